#!/usr/bin/env bash
# What tracing costs: tools/call throughput and latency on a server with OpenTelemetry export off
# vs one exporting every span and metric over OTLP/HTTP (sampling ratio 1.0) to a local sink that
# accepts and discards the exports. Both servers run at once (pinned to the same core), loaded in
# turn, round by round (off, on, off, …), so both see the same machine load. Prints each run, the
# medians and the ratio on/off.
#
#   bench/telemetry.sh                    # 3 rounds of 5 s each
#   ROUNDS=5 DURATION=10 bench/telemetry.sh --connections 32
#
# Environment: ROUNDS (3), DURATION (5), SAMPLING_RATIO (1.0: every trace kept), TRACES (true; false:
# metrics only), and those of bench/server.sh (SERVER_CPU, BENCH_CPU). After the rounds it checks
# that nothing was lost: the sink got a tools/call span for every call the on-server answered (at
# ratio 1.0) and its exported duration histogram counts them all.
# Exits 1 when a request failed or a server did not start.
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

# The OTLP sink (mcp-harbor-bench --otlp-sink): answers 200 to every export (what a collector
# does) and counts the spans by name and the exported tools/call operations; GET /counts reports.
sink_log=$log_dir/sink.log
"$bench_bin" --otlp-sink >"$sink_log" 2>&1 &
sink_pid=$!
sink_port=""
for _ in $(seq 1 50); do
    sink_port=$(head -n 1 "$sink_log" 2>/dev/null || true)
    [[ -n $sink_port ]] && break
    sleep 0.1
done

off_pid="" off_url=""
cleanup() {
    stop_server
    if [[ -n $off_pid ]]; then
        server_pid=$off_pid
        stop_server
    fi
    kill "$sink_pid" 2>/dev/null || true
    rm -rf "$log_dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_server off memory
off_pid=$server_pid off_url=$url
metrics_token="bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
MCP_HARBOR__TELEMETRY__OTLP_ENDPOINT="http://127.0.0.1:$sink_port" \
    MCP_HARBOR__TELEMETRY__SAMPLING_RATIO="${SAMPLING_RATIO:-1.0}" \
    MCP_HARBOR__TELEMETRY__TRACES="${TRACES:-true}" MCP_HARBOR__METRICS__TOKEN="$metrics_token" \
    MCP_HARBOR__TELEMETRY__METRICS_INTERVAL_MS=1000 start_server on memory
on_url=$url

if [[ ${TRACES:-true} == true ]]; then
    setting="traces with sampling ratio ${SAMPLING_RATIO:-1.0} and metrics"
else
    setting="metrics only (traces off)"
fi
echo "== telemetry: $rounds rounds x (export off, export on: $setting), ${duration}s of tools/call each"
for round in $(seq 1 "$rounds"); do
    bench_pid=$off_pid bench_run off "$round" --url "$off_url" "$@"
    bench_run on "$round" --url "$on_url" "$@"
done

compare off on
# What the on-server says it answered, then what reached the sink once it has flushed (a
# SIGTERM'd server exports what it still holds).
answered=$(curl -fsS -H "Authorization: Bearer $metrics_token" "${on_url%/t/demo/mcp}/metrics" |
    awk '/^mcp_server_operation_duration_seconds_count\{/ && /mcp_method_name="tools\/call"/ { n += $NF } END { printf "%d", n }')
stop_server
curl -fsS "http://127.0.0.1:$sink_port/counts" >"$log_dir/counts" || echo "the sink did not answer" >"$log_dir/counts"
kill "$sink_pid" 2>/dev/null || true
echo
echo "OTLP sink: $(head -n 1 "$log_dir/counts")"
sampled=$(awk '$1 == "span" && $3 == "tools/call" { n += $2 } END { printf "%d", n }' "$log_dir/counts")
exported=$(awk '$1 == "operations" && $3 == "tools/call" { n += $2 } END { printf "%d", n }' "$log_dir/counts")
echo "tools/call answered by the on-server: $answered; tools/call spans at the sink: $sampled; tools/call in its exported duration histogram: $exported"
if [[ $exported != "$answered" ]]; then
    echo "METRICS LOST: the sink's count is not the server's"
    status=1
fi
if [[ ${TRACES:-true} == true ]]; then
    ratio=${SAMPLING_RATIO:-1.0}
    if awk -v r="$ratio" 'BEGIN { exit !(r >= 1) }'; then
        if [[ $sampled != "$answered" ]]; then
            echo "SPANS LOST: $((answered - sampled)) of $answered calls have no span at the sink"
            status=1
        fi
    else
        echo "sampled share: $(awk -v s="$sampled" -v a="$answered" 'BEGIN { if (a) printf "%.3f", s / a; else print "-" }') (ratio $ratio)"
    fi
fi
exit $status
