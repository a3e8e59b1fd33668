#!/usr/bin/env bash
# What a stateless (2026-07-28) request costs beside a session-era one: tools/call throughput and
# latency of the `echo` tool on one server, session-era requests (2025-06-18, spread over 64
# sessions) vs stateless ones (no session: `_meta` and the Mcp-* headers checked on every
# request), interleaved round by round so both see the same machine load. Prints each run, the
# medians and the ratio stateless/session.
#
#   bench/modern.sh                       # 3 rounds of 5 s each
#   ROUNDS=5 DURATION=10 bench/modern.sh --connections 32
#
# Environment: ROUNDS (3), DURATION (5), and those of bench/server.sh (SERVER_CPU, BENCH_CPU).
# Exits 1 when a request failed or the server did not start.
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

start_server modern memory
echo "== modern: $rounds rounds x (session, stateless), ${duration}s of tools/call each, one server (pid $server_pid)"
for round in $(seq 1 "$rounds"); do
    bench_run session "$round" --url "$url" "$@"
    bench_run stateless "$round" --url "$url" --modern "$@"
done
compare session stateless
exit $status
