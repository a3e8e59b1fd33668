#!/usr/bin/env bash
# What the OAuth resource-server check costs: tools/call throughput and latency on an open tenant
# vs a protected one (every request carries an ES256 access token the server verifies), against
# one server, interleaved round by round (open, protected, open, …) so both see the same machine
# load. Prints each run, the medians and the ratio protected/open.
#
#   bench/oauth.sh                       # 3 rounds of 5 s each
#   ROUNDS=5 DURATION=10 bench/oauth.sh --connections 32
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

oauth_env
start_server oauth memory
oauth_tenants

echo "== oauth: $rounds rounds x (open, protected), ${duration}s of tools/call each, one server (pid $server_pid)"
for round in $(seq 1 "$rounds"); do
    bench_run open "$round" --url "$base/t/open/mcp" "$@"
    bench_run protected "$round" --url "$base/t/locked/mcp" --bearer-token-env BENCH_ACCESS_TOKEN "$@"
done

compare open protected
exit $status
