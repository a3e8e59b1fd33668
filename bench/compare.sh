#!/usr/bin/env bash
# mcp-harbor beside its peers, in one run: a minimal rmcp 3.x echo server
# (bench/compare/rmcp-echo) and a bare actix-web JSON-RPC echo with no MCP behind it, the ceiling
# (bench/compare/actix-echo). In each of ROUNDS rounds the servers run side by side (each pinned to
# SERVER_CPU, the load generator on BENCH_CPU) and take turns, phase by phase, under the same
# mcp-harbor-bench phases: tools/call at 1 and 16 connections, stateless 2026-07-28 calls, session
# inits (each phase on every server before the next phase, in an order that rotates from round to
# round, so that the figures set against each other are taken seconds apart); then, server by
# server on fresh processes, the memory per idle session and per session holding an open GET
# stream. mcp-harbor also serves an OAuth-protected tenant. In the same rounds mcp-harbor over
# HTTPS (harbor-tls: rustls, a certificate made with openssl; calls at 1 and 16 connections,
# inits, idle and streams) for its cost against plain HTTP. Then the extras: bench/eventlog.sh
# (in-process vs Redis state, 1000-event replay) and 3 replicas behind nginx (deploy/cluster.sh),
# then 1 replica behind it.
# Prints the medians, their ratios and each target as met/missed, and writes it all with a
# machine description to bench/results/<date>-compare.txt.
#
#   bench/compare.sh                              # about 10 minutes
#   ROUNDS=1 DURATION=2 EXTRAS= bench/compare.sh  # a quick check, no extras
#   PEERS="harbor harbor-tls" EXTRAS= bench/compare.sh  # HTTPS vs plain only
#
# Environment: PEERS (the servers of each round, "harbor harbor-tls rmcp echo"), ROUNDS (3), DURATION (5 measured seconds per tools/call run; inits run half of
# it), IDLE_SESSIONS (5000), STREAM_SESSIONS (4000), RUNS (20 replays), EXTRAS ("eventlog
# cluster"), OUT (bench/results/<UTC date>-compare.txt, or -2, -3, ... when taken), NOTE (a line for the header, e.g. "busy
# machine"), COMPARE_TARGET_DIR (~/.cache/mcp-harbor/compare-target, the peers' builds), and
# those of bench/server.sh. Exits 1 when a request failed or a server did not start.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=${ROUNDS:-3}
duration=${DURATION:-5}
idle_sessions=${IDLE_SESSIONS:-5000}
stream_sessions=${STREAM_SESSIONS:-4000}
runs=${RUNS:-20}
extras=${EXTRAS-eventlog cluster}
peers=${PEERS-harbor harbor-tls rmcp echo}
# The day's first report is <date>-compare.txt, later ones -2, -3, ... (never written over).
if [[ -n ${OUT:-} ]]; then
    out_file=$OUT
else
    out_file=bench/results/$(date -u +%F)-compare.txt
    n=2
    while [[ -e $out_file ]]; do
        out_file=bench/results/$(date -u +%F)-compare-$n.txt
        n=$((n + 1))
    done
fi
peer_target=${COMPARE_TARGET_DIR:-$HOME/.cache/mcp-harbor/compare-target}
if ! [[ $rounds =~ ^[0-9]+$ ]] || ((rounds < 1 || rounds > 20)); then
    echo "ROUNDS must be an integer from 1 to 20" >&2
    exit 2
fi
for peer in $peers; do
    [[ $peer =~ ^(harbor|harbor-tls|rmcp|echo)$ ]] || {
        echo "PEERS may only name harbor, harbor-tls, rmcp and echo" >&2
        exit 2
    }
done
for extra in $extras; do
    [[ $extra == eventlog || $extra == cluster ]] || {
        echo "EXTRAS may only name eventlog and cluster" >&2
        exit 2
    }
done

echo "building mcp-harbor (release) and the peers (into $peer_target)..." >&2
cargo build --release --bins --quiet
for pair in rmcp:rmcp-echo echo:actix-echo; do
    peer=${pair#*:}
    [[ " $peers " == *" ${pair%%:*} "* ]] || continue
    (cd "bench/compare/$peer" && CARGO_TARGET_DIR=$peer_target cargo build --release --locked --quiet)
done

# shellcheck source=bench/server.sh
source bench/server.sh

mkdir -p "$(dirname "$out_file")"
[[ " $peers " == *" harbor-tls "* ]] && make_tls_cert
exec 3>&1 4>&2
exec > >(tee "$log_dir/report.txt") 2>&1
tee_pid=$!

echo "# bench/compare.sh, $(date -u '+%F %T') UTC${NOTE:+ -- $NOTE}"
echo "machine: $(lscpu | sed -nE 's/^Model name: +//p' | head -n 1), $(nproc) cores, $(free -g | awk '/^Mem:/ { print $2 }') GiB RAM"
echo "kernel:  $(uname -srm)"
echo "rustc:   $(rustc -V)"
echo "commit:  $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench Cargo.toml Cargo.lock || echo ' (with uncommitted changes)')"
echo "peers:   rmcp $(sed -nE 's/^rmcp = \{ version = "=([0-9.]+)".*/\1/p' bench/compare/rmcp-echo/Cargo.toml) (stateful sessions, axum, one-thread runtime), actix-web $(awk '/^name = "actix-web"$/ { getline; print $3 }' bench/compare/actix-echo/Cargo.lock | tr -d '"') bare echo (one worker)"
echo "https:   harbor-tls: mcp-harbor with tls.cert_path/key_path (rustls, ring); the load generator trusts the certificate with --ca and keeps its connections alive (handshakes only as connections open, not per request)"
echo "setup:   server on CPU ${SERVER_CPU:-0}, load on CPU ${BENCH_CPU:-1} (${pin_server[*]:-not pinned}); $rounds rounds x ${duration}s per run; $idle_sessions idle sessions, $stream_sessions sessions with a GET stream"
busy_note

# start NAME TAG: starts the server NAME (harbor, harbor-tls, rmcp, echo) and sets $server_pid
# and $url; mcp-harbor (with its own data directory per TAG) also gets the OAuth tenants of
# oauth_tenants, harbor-tls is mcp-harbor over HTTPS.
start() {
    local name=$1 tag=$2
    if [[ $name == harbor ]]; then
        start_server "harbor-$tag" memory && oauth_tenants
        return
    fi
    if [[ $name == harbor-tls ]]; then
        start_server "harbor-tls-$tag" memory tls
        return
    fi
    local bin=$peer_target/release/rmcp-echo log=$log_dir/server-$name-$tag.log
    [[ $name == echo ]] && bin=$peer_target/release/actix-echo
    : >"$log"
    "${pin_server[@]}" "$bin" >"$log" 2>&1 &
    server_pid=$!
    url=""
    for _ in $(seq 1 100); do
        url=$(sed -nE 's#^.*serving.* at (http://[^ ]*)$#\1#p' "$log" | head -n 1)
        [[ -n $url ]] && return 0
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    echo "$name did not start:" >&2
    cat "$log" >&2
    stop_server
    return 1
}

# phase_run NAME ROUND SED-EXPR ARGS...: runs one mcp-harbor-bench phase, shows its output and
# appends "NAME <value picked by SED-EXPR>" to $results.
phase_run() {
    local name=$1 round=$2 expr=$3 out=$log_dir/$1-$2.out
    shift 3
    if ! "${pin_bench[@]}" "$bench_bin" --url "$url" --server-pid "$server_pid" "$@" >"$out" 2>&1; then
        status=1
        echo "  ERROR: $name failed (round $round)"
    fi
    sed "s/^/  $name: /" "$out"
    local value
    value=$(sed -nE "$expr" "$out")
    [[ -n $value ]] && echo "$name $value" >>"$results"
    return 0
}

# trust NAME: sets $ca, the load generator's arguments to trust server NAME's certificate (only
# harbor-tls has one).
trust() {
    ca=()
    if [[ $1 == harbor-tls ]]; then
        ca=(--ca "$tls_cert")
    fi
}

oauth_env
declare -A pid_of url_of
# The servers of the round in progress (cleanup stops only the last one started).
stop_round() {
    local pid
    for pid in "${pid_of[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
}
trap 'stop_round; cleanup' EXIT
for round in $(seq 1 "$rounds"); do
    # The servers of this round, all started at once (the idle ones, pinned beside the measured
    # one, use no CPU to speak of): each phase runs on every peer in turn before the next phase,
    # so a peer's figure and its peers' are taken seconds apart, not a minute; the order rotates
    # from round to round, so that no peer always goes first (or right after another).
    # shellcheck disable=SC2206
    list=($peers)
    shift_by=$(((round - 1) % ${#list[@]}))
    order=("${list[@]:shift_by}" "${list[@]:0:shift_by}")
    running=()
    for name in "${order[@]}"; do
        start "$name" "$round" || {
            status=1
            continue
        }
        pid_of[$name]=$server_pid url_of[$name]=$url
        running+=("$name")
        echo "== round $round/$rounds: $name (pid $server_pid, $url)"
    done
    echo "== round $round/$rounds: phases in turn across ${running[*]}"
    for phase in c1 c16 modern oauth inits; do
        for name in "${running[@]}"; do
            server_pid=${pid_of[$name]} url=${url_of[$name]}
            trust "$name"
            case $phase in
            c1) bench_run "$name-c1" "$round" --url "$url" "${ca[@]}" --connections 1 ;;
            c16) bench_run "$name-c16" "$round" --url "$url" "${ca[@]}" --connections 16 ;;
            modern)
                [[ $name == harbor-tls ]] ||
                    bench_run "$name-modern" "$round" --url "$url" --connections 16 --modern
                ;;
            oauth)
                [[ $name == harbor ]] && bench_run harbor-oauth "$round" --url "$base/t/locked/mcp" \
                    --connections 16 --bearer-token-env BENCH_ACCESS_TOKEN
                ;;
            inits)
                phase_run "$name-inits" "$round" 's/^inits: .* ([0-9.]+) inits\/s, .*errors 0$/\1/p' \
                    --phase inits --duration "$duration" --connections 16 "${ca[@]}"
                value=$(sed -nE 's/^inits cpu: server ([0-9.]+) us\/init.*/\1/p' "$log_dir/$name-inits-$round.out")
                [[ -n $value ]] && echo "$name-initcpu $value" >>"$results"
                ;;
            esac
        done
    done
    for name in "${running[@]}"; do
        server_pid=${pid_of[$name]}
        stop_server
        unset "pid_of[$name]"
    done
    for name in "${order[@]}"; do
        [[ $name == echo ]] && continue # no sessions, no GET streams
        start "$name" "$round-memory" || {
            status=1
            continue
        }
        trust "$name"
        # Memory per idle session as a replica that already holds sessions pays it: a first
        # idle run (printed, not counted) takes the one-off growth of a fresh process's first
        # sessions (~9 MiB for the first thousand: allocator segments, tables sized from zero),
        # then the measured run opens as many more.
        for idle in idlewarm idle; do
            phase_run "$name-$idle" "$round" 's/^idle: .*, (-?[0-9]+) bytes \(.*errors 0$/\1/p' \
                --phase idle --idle-sessions "$idle_sessions" --connections 16 "${ca[@]}"
        done
        stop_server
        # Streams on a fresh server of their own: after the idle runs, the memory their
        # transient allocations left free would take the streams' buffers and hide them.
        start "$name" "$round-streams" || {
            status=1
            continue
        }
        phase_run "$name-streams" "$round" 's/^streams: .*, (-?[0-9]+) bytes \(.*errors 0$/\1/p' \
            --phase streams --stream-sessions "$stream_sessions" --connections 16 "${ca[@]}"
        stop_server
    done
done

# The extras' figures, "-" when not measured.
redis_cpu_ratio=- replay_memory=- replay_redis=- cluster_note="not run (EXTRAS)"
if [[ " $extras " == *" eventlog "* ]]; then
    echo
    echo "== extra: in-process vs Redis session state (bench/eventlog.sh, $rounds rounds)"
    ROUNDS=$rounds DURATION=$duration RUNS=$runs IDLE_SESSIONS=$idle_sessions \
        bash bench/eventlog.sh | tee "$log_dir/eventlog.out" || status=1
    row_of() { sed -nE "s/^$1 +([0-9.-]+) +([0-9.-]+) +([0-9.-]+) .*/\\$2/p" "$log_dir/eventlog.out"; }
    redis_cpu_ratio=$(row_of 'tools\/call server CPU \(us\/req\)' 3)
    replay_memory=$(row_of 'replay 1000 events p50 \(ms\)' 1)
    replay_redis=$(row_of 'replay 1000 events p50 \(ms\)' 2)
fi

if [[ " $extras " == *" cluster "* ]]; then
    # echo_cluster_up N: N bare echoes (actix-echo) behind an nginx of their own, configured by
    # deploy/cluster.sh (round-robin: the echo has no sessions); sets $echo_pids and
    # $echo_nginx_url.
    echo_dir=$log_dir/echo-cluster
    # shellcheck source=deploy/cluster.sh
    . deploy/cluster.sh
    echo_cluster_up() {
        local port i ports=()
        echo_pids=()
        mkdir -p "$echo_dir"
        for i in $(seq 1 "$1"); do
            port=$(free_port)
            "$peer_target/release/actix-echo" "$port" >"$echo_dir/echo-$i.log" 2>&1 &
            echo_pids+=($!)
            ports+=("$port")
        done
        # deploy/cluster.sh up (just before) installed nginx if it was missing; its
        # ensure_nginx would end this whole run (and its report) on a failure.
        NGINX=$(command -v nginx || echo /usr/sbin/nginx)
        [[ -x $NGINX ]] || { echo "no nginx for the echo cluster" >&2; return 1; }
        RUN=$echo_dir PORTS="${ports[*]}" NGINX_PORT=$(free_port)
        write_nginx_conf round-robin
        echo_nginx_url=http://127.0.0.1:$NGINX_PORT
        "$NGINX" -c "$echo_dir/nginx.conf" -p "$echo_dir" || return 1
        for _ in $(seq 1 50); do
            curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' \
                -d '{"jsonrpc":"2.0","id":1,"method":"ping"}' "$echo_nginx_url/mcp" 2>/dev/null && return 0
            sleep 0.1
        done
        echo "the echo cluster did not start" >&2
        return 1
    }
    echo_cluster_down() {
        [[ -f $echo_dir/nginx.pid ]] && kill "$(cat "$echo_dir/nginx.pid")" 2>/dev/null
        rm -f "$echo_dir/nginx.pid"
        kill "${echo_pids[@]}" 2>/dev/null || true
        wait "${echo_pids[@]}" 2>/dev/null || true
        echo_pids=()
    }
    # bench_tenant: reads the cluster's addresses and registers the tenant "bench" through nginx.
    bench_tenant() {
        # shellcheck disable=SC1091
        . "$CLUSTER_DIR/cluster.env"
        curl -fsS -X POST -H "Authorization: Bearer $ADMIN_TOKEN" -H 'Content-Type: application/json' \
            "$NGINX_URL/admin/v1/tenants" -d '{"slug":"bench","catalogs":["reference","demo"],"auth":{"mode":"none"}}' >/dev/null
    }
    echo
    echo "== extra: 3 replicas behind nginx routing by session id (deploy/cluster.sh --lb route: PostgreSQL + Redis state, unpinned), $rounds rounds"
    export CLUSTER_DIR=$log_dir/cluster CLUSTER_LOG=warn MCP_HARBOR_BIN=$(realpath "$server_bin")
    if timeout 180 bash deploy/cluster.sh up --replicas 3 --lb route; then
        bench_tenant
        replica_pids=($(cat "$CLUSTER_DIR"/replica-*.pid))
        others=$(IFS=,; echo "${replica_pids[*]:1}")
        first_port=${PORTS%% *}
        for round in $(seq 1 "$rounds"); do
            # CPU: all three replicas' time over the window (--cpu-pids), so us/req is replica
            # CPU per request; 1e6 / it is the throughput per replica core.
            bench_pid=${replica_pids[0]} bench_run cluster "$round" --url "$NGINX_URL/t/bench/mcp" \
                --connections 16 --cpu-pids "$others"
            bench_pid=${replica_pids[0]} bench_run replica "$round" \
                --url "http://127.0.0.1:$first_port/t/bench/mcp" --connections 16
        done
        cluster_note=""
    else
        status=1
        cluster_note="deploy/cluster.sh up failed"
    fi
    bash deploy/cluster.sh down || true
    # The ceiling of that target on this machine: the bare echo, three of them behind nginx with
    # cluster.sh's proxy settings (no state behind them), against the echo alone (echo-c16).
    echo "== extra: 3 bare echoes behind nginx (the ceiling of the 3-replica target), $rounds rounds"
    for round in $(seq 1 "$rounds"); do
        if echo_cluster_up 3; then
            others=$(IFS=,; echo "${echo_pids[*]:1}")
            bench_pid=${echo_pids[0]} bench_run echo-cluster "$round" --url "$echo_nginx_url/mcp" \
                --connections 16 --cpu-pids "$others"
        else
            status=1
        fi
        echo_cluster_down
    done
    # The same stack with one replica: what nginx, PostgreSQL and Redis cost a replica, apart
    # from splitting the load three ways.
    echo "== extra: 1 replica behind the same nginx (deploy/cluster.sh --replicas 1), $rounds rounds"
    export CLUSTER_DIR=$log_dir/cluster-1
    if timeout 180 bash deploy/cluster.sh up --replicas 1 --lb route; then
        bench_tenant
        for round in $(seq 1 "$rounds"); do
            bench_pid=$(cat "$CLUSTER_DIR"/replica-1.pid) bench_run single "$round" \
                --url "$NGINX_URL/t/bench/mcp" --connections 16
        done
    else
        status=1
    fi
    bash deploy/cluster.sh down || true
fi
busy_note

# ---------------------------------------------------------------------------------------------
# Summary

med() { median "$1" "${2:-2}"; }
echo
echo "== medians of $rounds rounds (CPU: the server's user + system time per request, /proc/PID/stat)"
printf '%-40s %11s %11s %11s %12s %12s\n' figure mcp-harbor rmcp echo harbor/rmcp harbor/echo
line() { # LABEL NAME-SUFFIX COLUMN
    local h r e
    h=$(med "harbor-$2" "$3") r=$(med "rmcp-$2" "$3") e=$(med "echo-$2" "$3")
    printf '%-40s %11s %11s %11s %12s %12s\n' "$1" "$h" "$r" "$e" "$(ratio "$h" "$r")" "$(ratio "$h" "$e")"
}
for kind in "c1:1 conn" "c16:16 conns" "modern:2026-07-28, 16 conns"; do
    suffix=${kind%%:*} label=${kind#*:}
    line "tools/call req/s ($label)" "$suffix" 2
    line "tools/call p50 ms ($label)" "$suffix" 3
    line "tools/call p99 ms ($label)" "$suffix" 4
    line "server CPU us/req ($label)" "$suffix" 5
done
line "session inits/s (16 conns)" inits 2
line "server CPU us/init (16 conns)" initcpu 2
line "bytes per idle session" idle 2
line "  (the first $idle_sessions, not counted)" idlewarm 2
line "bytes per session + open GET stream" streams 2
oauth_cpu=$(med harbor-oauth 5)
printf '%-40s %11s %11s %11s %12s %12s\n' "OAuth tenant CPU us/req (16)" "$oauth_cpu" - - - "$(ratio "$oauth_cpu" "$(med echo-c16 5)")"
printf '%-40s %11s\n' "OAuth tenant req/s (16 conns)" "$(med harbor-oauth 2)"
if [[ " $peers " == *" harbor-tls "* ]]; then
    echo
    echo "mcp-harbor over HTTPS (harbor-tls) vs plain HTTP, same rounds (connections kept alive: handshakes only as they open)"
    printf '%-40s %11s %11s %11s\n' figure plain https https/plain
    tls_line() { # LABEL NAME-SUFFIX COLUMN
        local p t
        p=$(med "harbor-$2" "$3") t=$(med "harbor-tls-$2" "$3")
        printf '%-40s %11s %11s %11s\n' "$1" "$p" "$t" "$(ratio "$t" "$p")"
    }
    for kind in "c1:1 conn" "c16:16 conns"; do
        suffix=${kind%%:*} label=${kind#*:}
        tls_line "tools/call req/s ($label)" "$suffix" 2
        tls_line "tools/call p50 ms ($label)" "$suffix" 3
        tls_line "server CPU us/req ($label)" "$suffix" 5
    done
    tls_line "session inits/s (16 conns)" inits 2
    tls_line "server CPU us/init (16 conns)" initcpu 2
    tls_line "bytes per idle session" idle 2
    tls_line "bytes per session + open GET stream" streams 2
fi
if [[ -z $cluster_note ]]; then
    echo
    printf '%-42s %11s %11s %11s\n' "3 replicas behind nginx (16 conns)" req/s "CPU us/req" "req/s/core"
    for name in cluster replica single echo-cluster; do
        cpu=$(med "$name" 5)
        case $name in
            cluster) label="through nginx, 3 replicas" ;;
            replica) label="one replica of it, direct" ;;
            single) label="through nginx, 1 replica (same stack)" ;;
            echo-cluster) label="3 bare echoes through nginx (ceiling)" ;;
        esac
        printf '%-42s %11s %11s %11s\n' "$label" "$(med "$name" 2)" "$cpu" "$(ratio 1000000 "$cpu")"
    done
fi

# target LABEL VALUE OP LIMIT [UNIT]: met/missed and by how much (relative to the limit).
target() {
    awk -v label="$1" -v v="$2" -v op="$3" -v l="$4" -v unit="${5:-}" 'BEGIN {
        if (v == "-" || v == "") { printf "%-62s %10s   n/a (not measured)\n", label, "-"; exit }
        ok = (op == ">=") ? (v + 0 >= l + 0) : (v + 0 <= l + 0)
        margin = (l + 0 == 0) ? 0 : 100 * ((op == ">=") ? (v - l) / l : (l - v) / l)
        word = (op == ">=") ? (ok ? "above" : "below") : (ok ? "under" : "over")
        printf "%-62s %10s   %s (%s %s%s: %s by %.0f%%)\n", label, v unit, ok ? "met" : "MISSED", op, l, unit, word, margin < 0 ? -margin : margin
    }'
}
echo
# info LABEL VALUE: a figure the issue sets no target for.
info() { printf '%-62s %10s   info (no target)\n' "$1" "${2:--}"; }
echo "== targets (ratios of medians in this run)"
target "CPU/tools/call session-era: harbor / bare echo" "$(ratio "$(med harbor-c16 5)" "$(med echo-c16 5)")" '<=' 1.1
target "CPU/tools/call session-era: harbor / rmcp" "$(ratio "$(med harbor-c16 5)" "$(med rmcp-c16 5)")" '<=' 0.3
target "CPU/tools/call 2026-07-28: harbor / bare echo" "$(ratio "$(med harbor-modern 5)" "$(med echo-modern 5)")" '<=' 1.1
target "CPU/tools/call 2026-07-28: harbor / rmcp" "$(ratio "$(med harbor-modern 5)" "$(med rmcp-modern 5)")" '<=' 0.3
target "CPU/tools/call harbor: 2026-07-28 / session-era" "$(ratio "$(med harbor-modern 5)" "$(med harbor-c16 5)")" '<=' 1.0
target "CPU/tools/call OAuth tenant (JWT per request) / bare echo" "$(ratio "$oauth_cpu" "$(med echo-c16 5)")" '<=' 1.25
target "session inits/s: harbor / rmcp" "$(ratio "$(med harbor-inits)" "$(med rmcp-inits)")" '>=' 4
target "(info) server CPU per init: harbor / rmcp, inverse of >= 4x" "$(ratio "$(med harbor-initcpu)" "$(med rmcp-initcpu)")" '<=' 0.25
target "bytes per idle session (harbor)" "$(med harbor-idle)" '<=' 4096 " B"
target "bytes per session holding a GET stream (harbor)" "$(med harbor-streams)" '<=' 8192 " B"
target "CPU/tools/call Redis event log / in-process" "$redis_cpu_ratio" '<=' 1.3
target "1000-event Last-Event-ID replay p50, in-process" "$replay_memory" '<=' 20 " ms"
target "1000-event Last-Event-ID replay p50, Redis" "$replay_redis" '<=' 20 " ms"
cluster_ratio=- pinned_ratio=-
[[ -z $cluster_note ]] && cluster_ratio=$(ratio "$(med replica 5)" "$(med cluster 5)")
[[ -z $cluster_note ]] && pinned_ratio=$(ratio "$(med harbor-c16 5)" "$(med cluster 5)")
# Against a replica of the same cluster loaded directly in the same rounds (same build, same
# unpinned placement, same state stores): what sharing the load behind nginx costs a replica.
target "3 replicas/nginx req/s per replica core vs a replica directly" "$cluster_ratio" '>=' 0.7
[[ -z $cluster_note ]] && info "(info) the same vs the pinned single server of the main rounds" "$pinned_ratio"
[[ -n $cluster_note ]] && echo "  (3 replicas: $cluster_note)"
[[ -z $cluster_note ]] && target "(info) the same for the bare echo: 3 behind nginx / 1 alone" \
    "$(ratio "$(med echo-c16 5)" "$(med echo-cluster 5)")" '>=' 0.7
# paired A B COLUMN: the median over the rounds of each round's A / B (the phases of a round ran
# seconds apart); "-" unless both have a figure in every round.
paired() {
    awk -v a="$1" -v b="$2" -v c="$3" '$1 == a && $c != "-" { x[++na] = $c }
        $1 == b && $c != "-" { y[++nb] = $c }
        END { if (na == 0 || na != nb) exit; for (i = 1; i <= na; i++) print x[i] / y[i] }' "$results" |
        sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else printf "%.2f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
# The same targets as ratios of each round's figures (the spread of the rounds moves a ratio of
# medians; a round's two figures were taken under the same conditions).
info "(info) per-round ratio, median: CPU/tools/call harbor / echo" "$(paired harbor-c16 echo-c16 5)"
info "(info) per-round ratio, median: CPU/tools/call 2026-07-28 / echo" "$(paired harbor-modern echo-modern 5)"
info "(info) per-round ratio, median: CPU/tools/call OAuth / echo" "$(paired harbor-oauth echo-c16 5)"
info "(info) per-round ratio, median: session inits/s harbor / rmcp" "$(paired harbor-inits rmcp-inits 2)"
info "(info) per-round ratio, median: CPU/tools/call 2026-07-28 / session-era" "$(paired harbor-modern harbor-c16 5)"
[[ -z $cluster_note ]] && info "(info) per-round ratio, median: replica directly / 3 via nginx" \
    "$(paired replica cluster 5)"
# The ceiling against rmcp: what the bare echo (parse + serialise, no MCP) reaches on the same
# two rmcp targets. A target stricter than these asks mcp-harbor to beat the echo itself.
info "(info) ceiling: bare echo / rmcp, CPU per tools/call (vs <= 0.3)" "$(ratio "$(med echo-c16 5)" "$(med rmcp-c16 5)")"
info "(info) ceiling: bare echo / rmcp, inits/s (vs >= 4)" "$(ratio "$(med echo-inits)" "$(med rmcp-inits)")"
[[ -z $cluster_note ]] && info "(info) 3 replicas vs 1 replica behind the same nginx, per core" \
    "$(ratio "$(med single 5)" "$(med cluster 5)")"
info "(info) HTTPS / plain: server CPU per tools/call, 16 conns" "$(ratio "$(med harbor-tls-c16 5)" "$(med harbor-c16 5)")"
info "(info) HTTPS / plain: server CPU per tools/call, 1 conn" "$(ratio "$(med harbor-tls-c1 5)" "$(med harbor-c1 5)")"
info "(info) HTTPS / plain: req/s, 16 conns" "$(ratio "$(med harbor-tls-c16 2)" "$(med harbor-c16 2)")"
((status == 0)) || echo "errors: some requests failed or a server did not start (see above)"

exec 1>&3 2>&4
wait "$tee_pid" 2>/dev/null || true
cp "$log_dir/report.txt" "$out_file"
echo "written to $out_file" >&2
exit "$status"
