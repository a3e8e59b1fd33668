#!/usr/bin/env bash
# Load benchmark of mcp-harbor: starts the release server on a free loopback port (one worker,
# a high session cap), runs bench/load.rs (mcp-harbor-bench) against it and prints the figures.
#
#   bench/run.sh                      # calls, inits and idle, each on a fresh server
#   bench/run.sh --duration 5         # extra arguments go to mcp-harbor-bench
#   PHASES=all bench/run.sh           # calls, inits and idle against one server
#   PHASES="calls" bench/run.sh --connections 32
#   PHASES="replay resume" BACKEND=redis bench/run.sh --runs 50
#
# Environment: PHASES (default "calls inits idle"; also replay, resume), BACKEND (memory, the
# default, or redis: session state in Redis at REDIS_URL under a fresh key prefix, removed
# afterwards), SERVER_CPU (default 0), BENCH_CPU (default 1), EVENT_LOG_CAPACITY (default 4096).
# bench/eventlog.sh compares the two backends.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=bench/server.sh
source bench/server.sh

phases=${PHASES:-calls inits idle}
backend=${BACKEND:-memory}
[[ $backend == redis ]] && check_redis

status=0
for phase in $phases; do
    start_server "$phase" "$backend"
    echo "== $phase ($backend, server pid $server_pid, $url)"
    "${pin_bench[@]}" "$bench_bin" --url "$url" --server-pid "$server_pid" --phase "$phase" "$@" || status=1
    stop_server
done
exit "$status"
