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
# Environment: ROUNDS (3), DURATION (5), SAMPLING_RATIO (1.0: every trace kept), and those of bench/server.sh (SERVER_CPU, BENCH_CPU).
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

# The OTLP sink: answers 200 to every POST (what a collector does), counts the bytes it got.
sink_log=$log_dir/sink.log
python3 - >"$sink_log" 2>&1 <<'EOF' &
import http.server, socketserver, sys
class Sink(http.server.BaseHTTPRequestHandler):
    received = 0
    def do_POST(self):
        n = int(self.headers.get("content-length") or 0)
        self.rfile.read(n)
        Sink.received += n
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Sink) as s:
    print(s.server_address[1], flush=True)
    try:
        s.serve_forever()
    finally:
        print(f"received {Sink.received} bytes", flush=True)
EOF
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
MCP_HARBOR__TELEMETRY__OTLP_ENDPOINT="http://127.0.0.1:$sink_port" \
    MCP_HARBOR__TELEMETRY__SAMPLING_RATIO="${SAMPLING_RATIO:-1.0}" \
    MCP_HARBOR__TELEMETRY__METRICS_INTERVAL_MS=1000 start_server on memory
on_url=$url

echo "== telemetry: $rounds rounds x (export off, export on with sampling ratio ${SAMPLING_RATIO:-1.0}), ${duration}s of tools/call each"
for round in $(seq 1 "$rounds"); do
    bench_pid=$off_pid bench_run off "$round" --url "$off_url" "$@"
    bench_run on "$round" --url "$on_url" "$@"
done

compare off on
stop_server
kill -INT "$sink_pid" 2>/dev/null || true
wait "$sink_pid" 2>/dev/null || true
echo "OTLP sink: $(tail -n 1 "$sink_log")"
exit $status
