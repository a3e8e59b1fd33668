# Shared by the bench/*.sh scripts (sourced from the repository root, after
# `set -euo pipefail`): the release binaries, CPU pinning, starting and stopping the server on a
# free loopback port with a chosen session-state backend, removing its Redis keys, the
# interleaved comparisons, and the clean-up on exit.
#
# Environment: SERVER_CPU (default 0), BENCH_CPU (default 1), REDIS_URL (default
# redis://127.0.0.1:6379), EVENT_LOG_CAPACITY (default 4096 events kept per SSE stream).

server_bin=${CARGO_TARGET_DIR:-target}/release/mcp-harbor
bench_bin=${CARGO_TARGET_DIR:-target}/release/mcp-harbor-bench
redis_url=${REDIS_URL:-redis://127.0.0.1:6379}

if [[ ! -x $server_bin || ! -x $bench_bin ]]; then
    echo "building release binaries..." >&2
    cargo build --release --bins
fi

log_dir=$(mktemp -d "${TMPDIR:-/tmp}/mcp-harbor-bench.XXXXXX")

# Interleaved comparisons (bench/oauth.sh, bench/telemetry.sh): `bench_run NAME ROUND [ARGS...]`
# runs one tools/call phase and appends "NAME req/s p50 p99 cpu" to $results (status=1 on
# failure; cpu: the server's CPU µs per request over the measured window, from /proc, of
# $bench_pid when set, else of $server_pid); `compare A B` prints the medians of both and the
# ratio B/A.
results=$log_dir/results
status=0
bench_run() {
    local name=$1 round=$2 out=$log_dir/$1-$2.out
    shift 2
    if ! "${pin_bench[@]}" "$bench_bin" --phase calls --duration "$duration" --server-pid "${bench_pid:-$server_pid}" "$@" >"$out" 2>&1; then
        status=1
        echo "  ERROR: $name failed (round $round)"
    fi
    sed "s/^/  $name: /" "$out"
    local line cpu
    line=$(sed -nE "s/^calls: .* ([0-9.]+) req\/s, p50 ([0-9.]+) ms, p99 ([0-9.]+) ms, .*errors 0$/$name \1 \2 \3/p" "$out")
    cpu=$(sed -nE 's/^calls cpu: server ([0-9.]+) us\/req.*/\1/p' "$out")
    [[ -n $line ]] && echo "$line ${cpu:--}" >>"$results"
    return 0
}
median() { # NAME COLUMN
    awk -v n="$1" -v c="$2" '$1 == n && $c != "-" { print $c }' "$results" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'; }
compare() { # A B
    printf '\n%-22s %12s %12s %10s\n' "median" "$1" "$2" "$2/$1"
    local figure name col a b
    for figure in "req/s:2" "p50 ms:3" "p99 ms:4" "server CPU us/req:5"; do
        name=${figure%%:*} col=${figure##*:}
        a=$(median "$1" "$col") b=$(median "$2" "$col")
        printf '%-22s %12s %12s %10s\n' "tools/call $name" "$a" "$b" "$(ratio "$b" "$a")"
    done
}
# The load average and any running compiler: figures measured during a build are unreliable.
busy_note() {
    local busy
    # (Stopped ones, state T, use no CPU: a build suspended for the run does not count.)
    busy=$(ps -eo pid=,stat=,comm= | awk '$3 ~ /^(cargo|rustc|cc|ld|rust-lld|clippy-driver)$/ && $2 !~ /^T/ { printf "%s%s", sep, $1; sep = "," }')
    echo "load: $(uptime | sed 's/.*load average/load average/')${busy:+; compilers running (pids $busy): figures are unreliable}"
}

# An OAuth-protected tenant (bench/oauth.sh, bench/compare.sh). `oauth_env` before start_server
# (an admin token, one-hour access tokens); `oauth_tenants` after it creates the tenants `open`
# (no auth) and `locked` (OAuth, a client_credentials client), sets $base (the server's root URL)
# and exports BENCH_ACCESS_TOKEN, an access token for `locked` (for --bearer-token-env).
oauth_env() {
    admin_token="bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
    export MCP_HARBOR__ADMIN__TOKEN=$admin_token MCP_HARBOR__AUTH__ACCESS_TOKEN_TTL_SECS=3600
}
admin() { # METHOD PATH [BODY]
    curl -fsS -X "$1" -H "Authorization: Bearer $admin_token" -H 'Content-Type: application/json' \
        "$base/admin/v1$2" ${3:+-d "$3"}
}
oauth_tenants() {
    base=${url%/t/demo/mcp}
    admin POST /tenants '{"slug":"open","catalogs":["reference","demo"],"auth":{"mode":"none"}}' >/dev/null
    admin POST /tenants '{"slug":"locked","catalogs":["reference","demo"],"auth":{"mode":"oauth"}}' >/dev/null
    local client client_id client_secret
    client=$(admin POST /tenants/locked/oauth-clients \
        '{"client_name":"bench","grant_types":["client_credentials"],"token_endpoint_auth_method":"client_secret_post"}')
    client_id=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["client_id"])' <<<"$client")
    client_secret=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["client_secret"])' <<<"$client")
    BENCH_ACCESS_TOKEN=$(curl -fsS "$base/t/locked/oauth/token" -d grant_type=client_credentials \
        --data-urlencode "client_id=$client_id" --data-urlencode "client_secret=$client_secret" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
    export BENCH_ACCESS_TOKEN
}

# HTTPS (bench/compare.sh): `make_tls_cert` writes a self-signed P-256 certificate for 127.0.0.1
# and localhost to $tls_cert / $tls_key (CA:FALSE: webpki, in the load generator, refuses a CA
# certificate as a server's); `start_server NAME BACKEND tls` serves it; pass `--ca "$tls_cert"`
# to mcp-harbor-bench.
tls_cert=$log_dir/tls.crt
tls_key=$log_dir/tls.key
make_tls_cert() {
    command -v openssl >/dev/null 2>&1 || {
        echo "HTTPS needs the openssl command (to make a certificate)" >&2
        return 1
    }
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=mcp-harbor-bench" -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
        -addext "basicConstraints=critical,CA:FALSE" -keyout "$tls_key" -out "$tls_cert" 2>/dev/null
}

server_pid=""
url=""
# The key prefix of the running server's Redis state ("" with the in-process backend).
redis_prefix=""

# Server and load generator on different cores, so neither steals the other's CPU.
pin_server=()
pin_bench=()
if command -v taskset >/dev/null 2>&1 && (($(nproc) >= 2)); then
    pin_server=(taskset -c "${SERVER_CPU:-0}")
    pin_bench=(taskset -c "${BENCH_CPU:-1}")
else
    echo "note: taskset unavailable or a single core; server and bench are not pinned" >&2
fi

# Fails unless Redis answers at $redis_url (needed by the redis backend).
check_redis() {
    if ! command -v redis-cli >/dev/null 2>&1; then
        echo "the redis backend needs redis-cli (to check Redis and remove the bench's keys)" >&2
        return 1
    fi
    if [[ $(redis-cli -u "$redis_url" ping 2>&1) != PONG ]]; then
        echo "Redis does not answer at $redis_url; start it, e.g.:" >&2
        echo "  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no" >&2
        return 1
    fi
}

# Deletes every key of the last Redis-backed server (run after it stopped), in batches.
redis_cleanup() {
    if [[ -n $redis_prefix ]]; then
        redis-cli -u "$redis_url" --scan --pattern "$redis_prefix:*" |
            xargs -r -n 500 redis-cli -u "$redis_url" del >/dev/null || true
        redis_prefix=""
    fi
}

# Stops the server: SIGTERM (it drains), SIGKILL after 15 s. Then removes its Redis keys.
stop_server() {
    if [[ -n $server_pid ]]; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 1 150); do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
    redis_cleanup
}

# start_server NAME BACKEND [tls]: starts the server (one HTTP worker, a session cap of 200 000,
# an SQLite file in its own directory, EVENT_LOG_CAPACITY events per stream) with session state
# in-process (BACKEND memory) or in Redis under a fresh key prefix (BACKEND redis), on port 0
# (the kernel picks a free one), over HTTPS with `tls` (make_tls_cert first), and reads the URL
# it prints into $url.
start_server() {
    local name=$1 backend=$2 tls=${3:-}
    local log=$log_dir/server-$name.log data=$log_dir/data-$name
    local env=(
        MCP_HARBOR__SERVER__HOST=127.0.0.1
        MCP_HARBOR__SERVER__PORT=0
        MCP_HARBOR__SERVER__WORKERS=1
        MCP_HARBOR__SESSIONS__MAX_PER_TENANT=200000
        MCP_HARBOR__SESSIONS__EVENT_LOG_CAPACITY="${EVENT_LOG_CAPACITY:-4096}"
        MCP_HARBOR__STORAGE__DATA_DIR="$data"
        MCP_HARBOR__CLUSTER__DRAIN_GRACE_SECS=2
    )
    case $backend in
    memory) ;;
    redis)
        redis_prefix=bench-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
        env+=(MCP_HARBOR__REDIS__URL="$redis_url" MCP_HARBOR__REDIS__KEY_PREFIX="$redis_prefix")
        ;;
    *)
        echo "unknown backend $backend (memory or redis)" >&2
        return 1
        ;;
    esac
    [[ $tls == tls ]] && env+=(MCP_HARBOR__TLS__CERT_PATH="$tls_cert" MCP_HARBOR__TLS__KEY_PATH="$tls_key")
    mkdir -p "$data"
    "${pin_server[@]}" env "${env[@]}" "$server_bin" serve >"$log" 2>&1 &
    server_pid=$!
    url=""
    for _ in $(seq 1 100); do
        url=$(sed -n 's#^mcp-harbor: tenant demo serving MCP at \(https\{0,1\}://[^ ]*\)$#\1#p' "$log" | head -n 1)
        [[ -n $url ]] && break
        if ! kill -0 "$server_pid" 2>/dev/null; then
            echo "the server exited during start-up:" >&2
            cat "$log" >&2
            server_pid=""
            redis_cleanup
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

# On exit the server stops and $log_dir goes; a script with more to clean up (bench/telemetry.sh)
# defines its own cleanup after sourcing this file.
cleanup() {
    stop_server
    rm -rf "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
