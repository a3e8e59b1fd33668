#!/usr/bin/env bash
# What a shared request rate costs: tools/call throughput and latency on a tenant without a rate
# limit vs one with `requests_per_minute` (set far above the load, so nothing is refused: every
# request pays the quota check, one GCRA script on Redis), against one Redis-backed server,
# interleaved round by round. Prints each run, the medians and the ratio rated/unlimited.
#
#   bench/quotas.sh                      # 3 rounds of 5 s each, session state and quotas in Redis
#   BACKEND=memory bench/quotas.sh       # the in-process quotas (one replica)
#   ROUNDS=5 DURATION=10 bench/quotas.sh --connections 32
#
# Environment: ROUNDS (3), DURATION (5), BACKEND (redis), and those of bench/server.sh
# (SERVER_CPU, BENCH_CPU, REDIS_URL). Exits 1 when a request failed or the server did not start.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=${ROUNDS:-3}
duration=${DURATION:-5}
backend=${BACKEND:-redis}
if ! [[ $rounds =~ ^[0-9]+$ ]] || ((rounds < 1 || rounds > 100)); then
    echo "ROUNDS must be an integer from 1 to 100" >&2
    exit 2
fi

# shellcheck source=bench/server.sh
source bench/server.sh

[[ $backend == redis ]] && check_redis
admin_token="bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
export MCP_HARBOR__ADMIN__TOKEN=$admin_token
start_server quotas "$backend"
base=${url%/t/demo/mcp}

admin() { # METHOD PATH [BODY]
    curl -fsS -X "$1" -H "Authorization: Bearer $admin_token" -H 'Content-Type: application/json' \
        "$base/admin/v1$2" ${3:+-d "$3"}
}
admin POST /tenants '{"slug":"unlimited","catalogs":["reference","demo"],"auth":{"mode":"none"}}' >/dev/null
# 50 million a minute: a GCRA step of 1.2 us, never reached by one server.
admin POST /tenants '{"slug":"rated","catalogs":["reference","demo"],"auth":{"mode":"none"},
    "limits":{"requests_per_minute":50000000}}' >/dev/null

echo "== quotas ($backend): $rounds rounds x (unlimited, rated), ${duration}s of tools/call each, one server (pid $server_pid)"
for round in $(seq 1 "$rounds"); do
    bench_run unlimited "$round" --url "$base/t/unlimited/mcp" "$@"
    bench_run rated "$round" --url "$base/t/rated/mcp" "$@"
done

compare unlimited rated
exit $status
