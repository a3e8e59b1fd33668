#!/usr/bin/env bash
# CI's multi-replica stage, step e: a tenant created through one replica (directly, not through
# the balancer) is served by every other replica at once: initialize and tools/list on each.
#   tests/interop/cluster_tenant.sh      (deploy/cluster.sh up first; reads its cluster.env)
set -euo pipefail
RUN=${CLUSTER_DIR:-/tmp/mcp-harbor-cluster}
# shellcheck disable=SC1091
. "$RUN/cluster.env"
BIN=${MCP_HARBOR_BIN:-$(dirname "$0")/../../target/release/mcp-harbor}
read -r -a ports <<<"$PORTS"
slug="fresh-$(python3 -c 'import secrets; print(secrets.token_hex(3))')"
MCP_HARBOR_ADMIN_URL="http://127.0.0.1:${ports[0]}" MCP_HARBOR_ADMIN_TOKEN="$ADMIN_TOKEN" \
  "$BIN" admin tenant create "$slug" --auth none --catalog demo >/dev/null
echo "created tenant $slug through r1 (:${ports[0]})"
H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
passed=0 failed=0
for i in "${!ports[@]}"; do
  port=${ports[$i]}
  [ "$i" -eq 0 ] && continue
  url="http://127.0.0.1:$port/t/$slug/mcp"
  sid=$(curl -s -m 5 -D - -o /dev/null "${H[@]}" "$url" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tenant-check","version":"1"}}}' \
    | awk 'tolower($1)=="mcp-session-id:" {print $2}' | tr -d '\r')
  tools=$(curl -s -m 5 "${H[@]}" -H "Mcp-Session-Id: $sid" -H 'MCP-Protocol-Version: 2025-11-25' "$url" \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' || true)
  if [ -n "$sid" ] && grep -q '"echo"' <<<"$tools"; then
    echo "ok - r$((i + 1)) (:$port) serves $slug at once"
    passed=$((passed + 1))
  else
    echo "not ok - r$((i + 1)) (:$port) does not serve $slug (session '$sid', tools/list: ${tools:0:200})"
    failed=$((failed + 1))
  fi
done
echo "cluster-tenant: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
