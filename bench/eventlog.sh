#!/usr/bin/env bash
# Compares mcp-harbor's session-state backends, in-process (memory) and Redis, in one run: for
# each of ROUNDS rounds and each backend in turn, a fresh server (one worker, pinned as in
# run.sh) gets the calls, replay, resume and idle phases of mcp-harbor-bench, then stops. The
# summary gives the median per backend, the ratios redis/memory and PASS/FAIL per target.
#
#   bench/eventlog.sh                        # 3 rounds: calls 5 s, 20 replays, 5000 idle sessions
#   ROUNDS=5 DURATION=10 RUNS=50 bench/eventlog.sh
#   bench/eventlog.sh --connections 32       # extra arguments go to every mcp-harbor-bench run
#
# Environment: ROUNDS (3), BACKENDS ("memory redis"), DURATION (5, measured seconds of calls),
# RUNS (20, resumptions timed by replay and by resume), IDLE_SESSIONS (5000), and those of
# bench/server.sh: REDIS_URL (redis://127.0.0.1:6379), SERVER_CPU, BENCH_CPU, EVENT_LOG_CAPACITY.
# Exits 1 when a request failed or a server did not start, 2 on bad settings; a missed target is
# reported as FAIL without changing the exit status (the figures depend on the machine's load).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=${ROUNDS:-3}
backends=${BACKENDS:-memory redis}
duration=${DURATION:-5}
runs=${RUNS:-20}
idle_sessions=${IDLE_SESSIONS:-5000}
if ! [[ $rounds =~ ^[0-9]+$ ]] || ((rounds < 1 || rounds > 100)); then
    echo "ROUNDS must be an integer from 1 to 100" >&2
    exit 2
fi
for backend in $backends; do
    if [[ $backend != memory && $backend != redis ]]; then
        echo "BACKENDS may only name memory and redis" >&2
        exit 2
    fi
done

# shellcheck source=bench/server.sh
source bench/server.sh

[[ " $backends " == *" redis "* ]] && check_redis

# One line per figure measured: "<backend> <round> <figure> <value>".
results=$log_dir/results
: >"$results"
status=0

record() { echo "$1 $2 $3 $4" >>"$results"; }

redis_used_memory() {
    redis-cli -u "$redis_url" info memory | tr -d '\r' | sed -n 's/^used_memory:\([0-9]*\)$/\1/p'
}

# run_phase BACKEND ROUND PHASE [ARGS...]: runs one phase against the server, shows its output
# and records its figures.
run_phase() {
    local backend=$1 round=$2 phase=$3
    shift 3
    local out=$log_dir/$phase-$backend-$round.out
    if ! "${pin_bench[@]}" "$bench_bin" --url "$url" --server-pid "$server_pid" --phase "$phase" \
        "$@" "${extra[@]}" >"$out" 2>&1; then
        status=1
        echo "  ERROR: $phase failed on $backend (round $round)"
    fi
    sed 's/^/  /' "$out"
    local figures
    case $phase in
    calls)
        figures=$(sed -nE 's/^calls: .* ([0-9.]+) req\/s, p50 ([0-9.]+) ms, p99 ([0-9.]+) ms, .*errors 0$/\1 \2 \3/p' "$out")
        [[ -n $figures ]] && set -- $figures && record "$backend" "$round" calls_rps "$1" &&
            record "$backend" "$round" calls_p50 "$2" && record "$backend" "$round" calls_p99 "$3"
        figures=$(sed -nE 's/^calls cpu: server ([0-9.]+) us\/req.*/\1/p' "$out")
        [[ -n $figures ]] && record "$backend" "$round" calls_cpu "$figures"
        ;;
    replay | resume)
        figures=$(sed -nE "s/^$phase: .*runs, p50 ([0-9.]+) ms, p99 ([0-9.]+) ms, max ([0-9.]+) ms, errors 0\$/\\1 \\2 \\3/p" "$out")
        [[ -n $figures ]] && set -- $figures && record "$backend" "$round" "${phase}_p50" "$1" &&
            record "$backend" "$round" "${phase}_p99" "$2" && record "$backend" "$round" "${phase}_max" "$3"
        ;;
    idle)
        figures=$(sed -nE 's/^idle: ([0-9]+) sessions .*, (-?[0-9]+) bytes \(.*errors 0$/\1 \2/p' "$out")
        [[ -n $figures ]] && set -- $figures && record "$backend" "$round" idle_bytes "$2"
        ;;
    esac
    return 0
}

extra=("$@")
echo "== eventlog: $rounds rounds x ($backends); calls ${duration}s, $runs replays and resumptions, $idle_sessions idle sessions"
echo "   server on CPU ${SERVER_CPU:-0}, bench on CPU ${BENCH_CPU:-1} (${pin_server[*]:-not pinned}); Redis (unpinned) at $redis_url"
busy_note
for round in $(seq 1 "$rounds"); do
    for backend in $backends; do
        if ! start_server "$round-$backend" "$backend"; then
            status=1
            continue
        fi
        echo "== round $round/$rounds: $backend (server pid $server_pid, $url${redis_prefix:+, keys $redis_prefix:*})"
        run_phase "$backend" "$round" calls --duration "$duration"
        run_phase "$backend" "$round" replay --runs "$runs"
        run_phase "$backend" "$round" resume --runs "$runs"
        if [[ $backend == redis ]]; then
            before=$(redis_used_memory)
            run_phase "$backend" "$round" idle --idle-sessions "$idle_sessions"
            after=$(redis_used_memory)
            created=$(sed -nE 's/^idle: ([0-9]+) sessions .*/\1/p' "$log_dir/idle-$backend-$round.out")
            if [[ -n $before && -n $after && ${created:-0} -gt 0 ]]; then
                record "$backend" "$round" idle_redis_bytes $(((after - before) / created))
                echo "  redis: used_memory $before -> $after bytes, $(((after - before) / created)) bytes per idle session"
            fi
        else
            run_phase "$backend" "$round" idle --idle-sessions "$idle_sessions"
        fi
        stop_server
    done
done
busy_note

# median BACKEND FIGURE: the median over the rounds, "-" when never measured.
median() {
    awk -v b="$1" -v f="$2" '$1 == b && $3 == f { print $4 }' "$results" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
values() {
    awk -v b="$1" -v f="$2" '$1 == b && $3 == f { printf "%s%s", sep, $4; sep = " " }' "$results"
}
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'
}

echo
echo "== summary: median of $rounds rounds"
printf '%-34s %12s %12s %13s   %s\n' figure memory redis redis/memory "rounds (memory | redis)"
row() {
    local label=$1 figure=$2 m r
    m=$(median memory "$figure")
    r=$(median redis "$figure")
    printf '%-34s %12s %12s %13s   %s | %s\n' "$label" "$m" "$r" "$(ratio "$r" "$m")" \
        "$(values memory "$figure")" "$(values redis "$figure")"
}
row "tools/call throughput (req/s)" calls_rps
row "tools/call p50 (ms)" calls_p50
row "tools/call p99 (ms)" calls_p99
row "tools/call server CPU (us/req)" calls_cpu
row "replay 1000 events p50 (ms)" replay_p50
row "replay 1000 events p99 (ms)" replay_p99
row "resume, first event p50 (ms)" resume_p50
row "resume, first event p99 (ms)" resume_p99
row "idle session, replica RSS (bytes)" idle_bytes
row "idle session, Redis memory (bytes)" idle_redis_bytes

# check LABEL VALUE OP LIMIT: PASS, FAIL, or n/a (not measured).
verdict() {
    awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
        if (v == "-") { print "n/a (not measured)"; exit }
        ok = (op == ">=") ? (v + 0 >= l + 0) : (v + 0 <= l + 0)
        print ok ? "PASS" : "FAIL"
    }'
}
echo
echo "== targets"
calls_ratio=$(ratio "$(median redis calls_rps)" "$(median memory calls_rps)")
echo "Redis costs <= 30% of tools/call throughput (redis/memory >= 0.70): $calls_ratio -> $(verdict "$calls_ratio" '>=' 0.70)"
cpu_ratio=$(ratio "$(median redis calls_cpu)" "$(median memory calls_cpu)")
echo "Redis costs <= 30% more server CPU per tools/call (redis/memory <= 1.30): $cpu_ratio -> $(verdict "$cpu_ratio" '<=' 1.30)"
replay_redis=$(median redis replay_p50)
echo "1000-event replay p50 <= 20 ms (Redis backend): $replay_redis ms -> $(verdict "$replay_redis" '<=' 20)"
for backend in memory redis; do
    idle=$(median "$backend" idle_bytes)
    echo "idle session <= 8 KiB (8192 bytes) on the replica ($backend): $idle bytes -> $(verdict "$idle" '<=' 8192)"
done
if ((status != 0)); then
    echo "errors: some requests failed or a server did not start (see above)"
fi
exit "$status"
