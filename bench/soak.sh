#!/usr/bin/env bash
# Soak: a mixed load (sessions opening and closing, tool calls, SSE resumptions, stateless
# calls, admin changes) held on one server for DURATION seconds (default 600) while its resident
# memory, open file descriptors, threads and runtime tasks are sampled every SAMPLE seconds
# (default 5). Exits 1 when a request failed or memory, descriptors or tasks kept growing
# (the rules are in bench/soak.rs).
#
#   bench/soak.sh                          # 10 minutes, in-process session state
#   DURATION=1800 BACKEND=redis bench/soak.sh
#
# Environment: DURATION (600, at most 3600), SAMPLE (5), BACKEND (memory or redis), PAUSE_MS
# (2: each worker's pause between operations), and those of bench/server.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

duration=${DURATION:-600}
sample=${SAMPLE:-5}
backend=${BACKEND:-memory}
pause=${PAUSE_MS:-2}
if ! [[ $duration =~ ^[0-9]+$ ]] || ((duration < 10 || duration > 3600)); then
    echo "DURATION must be an integer from 10 to 3600 (seconds)" >&2
    exit 2
fi

# shellcheck source=bench/server.sh
source bench/server.sh

SOAK_ADMIN_TOKEN="soak-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
SOAK_METRICS_TOKEN="soak-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
export SOAK_ADMIN_TOKEN SOAK_METRICS_TOKEN
export MCP_HARBOR__ADMIN__TOKEN=$SOAK_ADMIN_TOKEN MCP_HARBOR__METRICS__TOKEN=$SOAK_METRICS_TOKEN
[[ $backend == redis ]] && check_redis
start_server soak "$backend"
echo "== soak: ${duration}s, backend $backend, server pid $server_pid ($url)"
started=$SECONDS
status=0
"${pin_bench[@]}" "$bench_bin" --phase soak --url "$url" --server-pid "$server_pid" \
    --duration "$duration" --sample-secs "$sample" --soak-pause-ms "$pause" \
    --admin-token-env SOAK_ADMIN_TOKEN --metrics-token-env SOAK_METRICS_TOKEN "$@" || status=1
if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "the server exited during the soak:" >&2
    tail -n 50 "$log_dir/server-soak.log" >&2
    status=1
fi
echo "== soak: $((SECONDS - started)) s, $([[ $status == 0 ]] && echo passed || echo FAILED)"
exit $status
