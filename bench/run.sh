#!/usr/bin/env bash
# Load benchmark of mcp-harbor: starts the release server on a free loopback port (one worker,
# a high session cap), runs bench/load.rs (mcp-harbor-bench) against it and prints the figures.
#
#   bench/run.sh                      # calls, inits and idle, each on a fresh server
#   bench/run.sh --duration 5         # extra arguments go to mcp-harbor-bench
#   PHASES=all bench/run.sh           # all phases against one server
#   PHASES="calls" bench/run.sh --connections 32
#
# Environment: PHASES (default "calls inits idle"), SERVER_CPU (default 0), BENCH_CPU (default 1).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

server_bin=target/release/mcp-harbor
bench_bin=target/release/mcp-harbor-bench
if [[ ! -x $server_bin || ! -x $bench_bin ]]; then
    echo "building release binaries..." >&2
    cargo build --release --bins
fi

phases=${PHASES:-calls inits idle}
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/mcp-harbor-bench.XXXXXX")
server_pid=""
url=""

stop_server() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
}
cleanup() {
    stop_server
    rm -rf "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Server and load generator on different cores, so neither steals the other's CPU.
pin_server=()
pin_bench=()
if command -v taskset >/dev/null 2>&1 && (($(nproc) >= 2)); then
    pin_server=(taskset -c "${SERVER_CPU:-0}")
    pin_bench=(taskset -c "${BENCH_CPU:-1}")
else
    echo "note: taskset unavailable or a single core; server and bench are not pinned" >&2
fi

# Starts the server on port 0 (the kernel picks a free one) and reads the URL it prints.
start_server() {
    local log=$log_dir/server-$1.log
    MCP_HARBOR__SERVER__HOST=127.0.0.1 \
        MCP_HARBOR__SERVER__PORT=0 \
        MCP_HARBOR__SERVER__WORKERS=1 \
        MCP_HARBOR__SESSIONS__MAX_PER_TENANT=200000 \
        "${pin_server[@]}" "$server_bin" serve >"$log" 2>&1 &
    server_pid=$!
    url=""
    for _ in $(seq 1 100); do
        url=$(sed -n 's#^mcp-harbor: tenant demo serving MCP at \(http://[^ ]*\)$#\1#p' "$log" | head -n 1)
        [[ -n $url ]] && break
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "the server exited during start-up:" >&2
            cat "$log" >&2
            server_pid=""
            return 1
        fi
        sleep 0.1
    done
    if [[ -z $url ]]; then
        echo "the server did not report its URL within 10 s:" >&2
        cat "$log" >&2
        return 1
    fi
}

status=0
for phase in $phases; do
    start_server "$phase"
    echo "== $phase (server pid $server_pid, $url)"
    "${pin_bench[@]}" "$bench_bin" --url "$url" --server-pid "$server_pid" --phase "$phase" "$@" || status=1
    stop_server
done
exit "$status"
