#!/usr/bin/env bash
# Where a request's CPU goes: runs a server under callgrind, drives one phase of mcp-harbor-bench
# against it (counters zeroed after a warm-up, dumped at the end) and prints the instructions per
# request (or per init) by component, then the 25 costliest functions. Instruction counts do not
# swing with the machine's load the way timings do; `rep stosb` memsets count one instruction per
# byte under valgrind, so the memset line overstates what it costs on the CPU.
#
#   bench/profile.sh                      # mcp-harbor, tools/call, 4 connections
#   bench/profile.sh echo                 # the bare actix-web echo of bench/compare (built by compare.sh)
#   bench/profile.sh harbor inits 4       # session opening (initialize + notifications/initialized)
#   bench/profile.sh harbor modern        # stateless 2026-07-28 tools/call
#   bench/profile.sh harbor oauth         # tools/call on an OAuth tenant (a bearer token per request)
#   bench/profile.sh harbor open          # the same tenant set-up without auth (oauth's baseline)
#
# Environment: SECONDS_MEASURED (16; inits run half of it), OUT (a temporary directory; keeps
# callgrind.out for callgrind_annotate / kcachegrind), COMPARE_TARGET_DIR (where compare.sh built
# the echo, ~/.cache/mcp-harbor/compare-target), CACHE_SIM=1 (also simulate the caches and branch
# predictors: prints instruction- and data-cache misses and mispredicted branches per request,
# what separates two servers that run as many instructions at different speeds; slower).
# Needs valgrind (Debian: apt-get install valgrind).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

server=${1:-harbor} phase=${2:-calls} conns=${3:-4}
measured=${SECONDS_MEASURED:-16}
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/mcp-harbor-profile.XXXXXX")}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
[[ $server == harbor || $server == echo ]] || { echo "server: harbor or echo" >&2; exit 2; }
[[ $phase =~ ^(calls|inits|modern|oauth|open)$ ]] || { echo "phase: calls, modern, inits, oauth or open" >&2; exit 2; }
[[ $server == harbor || $phase != oauth && $phase != open ]] || { echo "oauth and open are mcp-harbor phases" >&2; exit 2; }
if [[ ! -x ${CARGO_TARGET_DIR:-target}/release/mcp-harbor || ! -x ${CARGO_TARGET_DIR:-target}/release/mcp-harbor-bench ]]; then
    cargo build --release --bins
fi
port=$(. deploy/cluster.sh && free_port)
data=$(mktemp -d)
callgrind=(valgrind --tool=callgrind --compress-strings=no --compress-pos=no --callgrind-out-file="$out/callgrind.out")
if [[ ${CACHE_SIM:-0} == 1 ]]; then
    callgrind+=(--cache-sim=yes --branch-sim=yes)
fi
if [[ $server == echo ]]; then
    echo_bin=${COMPARE_TARGET_DIR:-$HOME/.cache/mcp-harbor/compare-target}/release/actix-echo
    [[ -x $echo_bin ]] || { echo "no $echo_bin: run bench/compare.sh once (it builds the peers)" >&2; exit 1; }
    "${callgrind[@]}" "$echo_bin" "$port" >"$out/server.log" 2>&1 &
    url=http://127.0.0.1:$port/mcp
else
    if [[ $phase == oauth || $phase == open ]]; then
        # bench/server.sh's OAuth set-up (an admin token here, the tenants once serving); its
        # clean-up trap is replaced below.
        # shellcheck source=bench/server.sh
        source bench/server.sh
        oauth_env
    fi
    MCP_HARBOR__SERVER__PORT=$port MCP_HARBOR__SERVER__WORKERS=1 MCP_HARBOR__SESSIONS__MAX_PER_TENANT=200000 \
    MCP_HARBOR__STORAGE__DATA_DIR=$data RUST_LOG=warn "${callgrind[@]}" ${CARGO_TARGET_DIR:-target}/release/mcp-harbor serve >"$out/server.log" 2>&1 &
    url=http://127.0.0.1:$port/t/demo/mcp
fi
vpid=$!
trap 'kill $vpid 2>/dev/null || true; rm -rf "$data" "${log_dir:-}"' EXIT
for _ in $(seq 1 300); do
    curl -s -o /dev/null -X POST "$url" 2>/dev/null && break
    kill -0 $vpid 2>/dev/null || { cat "$out/server.log" >&2; exit 1; }
    sleep 0.2
done
if [[ $phase == oauth || $phase == open ]]; then
    # bench/server.sh's tenants `open` (no auth) and `locked` (OAuth, a client_credentials
    # client), the same catalogs; oauth measures `locked` with a bearer token, open its twin.
    oauth_tenants
    url=${url%/t/demo/mcp}/t/$([[ $phase == oauth ]] && echo locked || echo open)/mcp
fi
bench=(${CARGO_TARGET_DIR:-target}/release/mcp-harbor-bench --url "$url" --connections "$conns")
if [[ $phase == modern ]]; then
    bench+=(--phase calls --modern)
elif [[ $phase == oauth ]]; then
    bench+=(--phase calls --bearer-token-env BENCH_ACCESS_TOKEN)
elif [[ $phase == open ]]; then
    bench+=(--phase calls)
else
    bench+=(--phase "$phase")
fi
"${bench[@]}" --duration 4 --warmup 1 >/dev/null 2>&1 || true
callgrind_control -z $vpid >/dev/null 2>&1
"${bench[@]}" --duration "$measured" --warmup 0 | tee "$out/bench.out"
callgrind_control -d $vpid >/dev/null 2>&1
kill $vpid
wait $vpid 2>/dev/null || true
units=$(sed -nE 's/^calls: .* ([0-9]+) requests, .*/\1/p; s/^inits: .* ([0-9]+) inits, .*/\1/p' "$out/bench.out")
[[ -n $units && $units -gt 0 ]] || { echo "the bench measured nothing" >&2; exit 1; }
per=request
[[ $phase == inits ]] && per=init
echo "instructions per $per ($server, $phase, $conns connections, $units ${per}s measured; $out/callgrind.out.1)"
python3 bench/profile_groups.py "$out/callgrind.out.1" "$units"
