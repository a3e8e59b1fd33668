#!/usr/bin/env bash
# What federation costs: `tools/call echo` on an upstream MCP server (an mcp-harbor serving its
# `demo` tenant) called directly, vs the same call through a gateway mcp-harbor whose tenant
# `fed` federates that upstream (gateway mode), vs the gateway's own built-in echo. Round by
# round, interleaved (direct, federated, built-in, …), so all see the same machine load. Prints
# each run, the medians and the ratios the gateway is held to: federated throughput against
# direct, the gateway's CPU per federated call against its CPU per built-in call, and the p50
# the gateway adds.
#
# Pinning: the gateway on its own core (SERVER_CPU, 0), the upstream and the load generator on
# the other (BENCH_CPU, 1), as a gateway and the servers behind it run on different machines.
#
#   bench/federation.sh                   # 3 rounds of 5 s each, 16 connections
#   ROUNDS=5 DURATION=10 bench/federation.sh --connections 32
#
# Environment: ROUNDS (3), DURATION (5), and those of bench/server.sh. Exits 1 when a request
# failed or a server did not start.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=${ROUNDS:-3}
duration=${DURATION:-5}
if ! [[ $rounds =~ ^[0-9]+$ ]] || ((rounds < 1 || rounds > 100)); then
    echo "ROUNDS must be an integer from 1 to 100" >&2
    exit 2
fi

# shellcheck source=bench/server.sh
source bench/server.sh

upstream_pid=""
cleanup() {
    stop_server
    if [[ -n $upstream_pid ]]; then
        server_pid=$upstream_pid
        stop_server
    fi
    rm -rf "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

oauth_env
# The gateway reaches the upstream over plain http on loopback (a development setting).
export MCP_HARBOR__EGRESS__ALLOW_PRIVATE=true
gateway_pin=("${pin_server[@]}")
pin_server=("${pin_bench[@]}")
start_server upstream memory
upstream_pid=$server_pid upstream_url=$url
pin_server=("${gateway_pin[@]}")
start_server gateway memory
gateway_pid=$server_pid builtin_url=$url
base=${url%/t/demo/mcp}
admin POST /tenants '{"slug":"fed","catalogs":[],"auth":{"mode":"none"}}' >/dev/null
admin PUT /tenants/fed/upstreams/demo \
    "{\"name\":\"demo\",\"url\":\"$upstream_url\",\"tools\":{\"allow\":[\"echo\"]}}" >"$log_dir/upstream.json"
grep -q '"connected":true' "$log_dir/upstream.json" || {
    echo "the gateway did not connect to the upstream: $(cat "$log_dir/upstream.json")" >&2
    exit 1
}
federated_url=$base/t/fed/mcp

echo "== federation: $rounds rounds x (direct to the upstream, federated through the gateway, the gateway's built-in echo), ${duration}s of tools/call each"
for round in $(seq 1 "$rounds"); do
    bench_pid=$upstream_pid bench_run direct "$round" --url "$upstream_url" "$@"
    bench_pid=$gateway_pid bench_run federated "$round" --url "$federated_url" "$@"
    bench_pid=$gateway_pid bench_run builtin "$round" --url "$builtin_url" "$@"
done

compare direct federated
compare builtin federated
echo
echo "federated/direct throughput: $(ratio "$(median federated 2)" "$(median direct 2)") (target >= 0.6)"
echo "gateway CPU per federated call / per built-in call: $(ratio "$(median federated 5)" "$(median builtin 5)") (target <= 1.5)"
echo "p50 added by the gateway: $(awk -v f="$(median federated 3)" -v d="$(median direct 3)" 'BEGIN { printf "%.3f", f - d }') ms (target <= 1)"
exit $status
