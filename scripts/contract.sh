#!/usr/bin/env bash
# The admin API contract: Schemathesis (pinned in scripts/install-contract-deps.sh, cached under
# ~/.cache/mcp-harbor) runs every check it has against a live server, generating requests from
# the OpenAPI document the server serves (/admin/v1/openapi.json): examples, coverage (boundary
# and invalid values), fuzzing and stateful (link-following) phases. Any failure fails the run.
#
#   scripts/contract.sh [BINARY]        default: target/release/mcp-harbor (build it first)
#
# The server gets its own data dir and a free loopback port, and is stopped at the end. It runs
# with the development setting egress.allow_private, as the document's URL rules
# describe the server with it (without it, URLs must also name public hosts). Its database is the
# embedded SQLite file, or with CONTRACT_POSTGRES=postgres://user@host:port a fresh PostgreSQL
# database there, created for the run and dropped after it.
# Environment: CONTRACT_MAX_EXAMPLES (per operation and phase; default 40), CONTRACT_SEED (default
# a fixed seed, so CI is repeatable; `random` for a new one), CONTRACT_WORKERS (default 1: with
# more, Python 3.11's parser trips over Schemathesis's threads), CONTRACT_REPORT_DIR (default a
# temporary dir; the JUnit and NDJSON reports are written there).
# The rules that relate two fields, which the document states in prose, are taught to the
# generator in scripts/contract_hooks.py.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE="${MCP_HARBOR_CI_CACHE:-$HOME/.cache/mcp-harbor}"
CONTRACTENV="${MCP_HARBOR_CONTRACTENV:-$CACHE/contractenv}"
BIN="${1:-${CARGO_TARGET_DIR:-$ROOT/target}/release/mcp-harbor}"
MAX_EXAMPLES="${CONTRACT_MAX_EXAMPLES:-40}"
SEED="${CONTRACT_SEED:-20261123}"
WORKERS="${CONTRACT_WORKERS:-1}"
[ -x "$BIN" ] || { echo "contract: no server binary at $BIN (cargo build --release --bins)"; exit 2; }

MCP_HARBOR_CONTRACTENV="$CONTRACTENV" bash "$ROOT/scripts/install-contract-deps.sh"

WORK=$(mktemp -d)
REPORT_DIR=$(realpath -m "${CONTRACT_REPORT_DIR:-$WORK/report}")
PORT=$(. "$ROOT/deploy/cluster.sh" && free_port)
TOKEN="contract-$(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')"
DATABASE_URL="" DATABASE=""
if [ -n "${CONTRACT_POSTGRES:-}" ]; then
  DATABASE="harbor_contract_$(python3 -c 'import secrets; print(secrets.token_hex(6))')"
  psql "$CONTRACT_POSTGRES/postgres" -qXc "CREATE DATABASE $DATABASE" >/dev/null
  DATABASE_URL="$CONTRACT_POSTGRES/$DATABASE"
fi
SERVER_PID=""
cleanup() {
  [ -z "$SERVER_PID" ] || { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
  [ -z "$DATABASE" ] || psql "$CONTRACT_POSTGRES/postgres" -qXc "DROP DATABASE IF EXISTS $DATABASE WITH (FORCE)" >/dev/null || true
  rm -rf "$WORK/data"
  [ -n "${CONTRACT_REPORT_DIR:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
MCP_HARBOR__SERVER__PORT=$PORT MCP_HARBOR__LOG__FILTER=warn MCP_HARBOR__STORAGE__DATA_DIR="$WORK/data" \
  MCP_HARBOR__STORAGE__DATABASE_URL="$DATABASE_URL" \
  MCP_HARBOR__ADMIN__TOKEN="$TOKEN" MCP_HARBOR__EGRESS__ALLOW_PRIVATE=true \
  "$BIN" serve >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
  "$BIN" healthcheck --url "http://127.0.0.1:$PORT" 2>/dev/null && break
  sleep 0.1
done
"$BIN" healthcheck --url "http://127.0.0.1:$PORT" || { cat "$WORK/server.log"; exit 1; }

seed_args=(--seed "$SEED")
[ "$SEED" = random ] && seed_args=()
echo "contract: schemathesis $("$CONTRACTENV/bin/st" --version | awk '{print $NF}') against http://127.0.0.1:$PORT/admin/v1/openapi.json on ${DATABASE:-SQLite} (max ${MAX_EXAMPLES} examples per operation and phase, seed ${SEED})"
status=0
# From the scratch dir: Schemathesis keeps a cache (.schemathesis/) where it runs.
(cd "$WORK" && PYTHONPATH="$ROOT/scripts" SCHEMATHESIS_HOOKS=contract_hooks \
  "$CONTRACTENV/bin/st" run "http://127.0.0.1:$PORT/admin/v1/openapi.json" \
  --checks all \
  --header "Authorization: Bearer $TOKEN" \
  --max-examples "$MAX_EXAMPLES" \
  --workers "$WORKERS" \
  --request-timeout 10 \
  --generation-database none \
  --report junit,ndjson --report-dir "$REPORT_DIR" \
  --no-color "${seed_args[@]}") || status=$?

# What ran, from the event stream: operations, test cases (requests) and check evaluations.
python3 - "$REPORT_DIR" <<'PY' || true
import glob, json, os, sys
cases = checks = 0
failed = set()
operations = set()
for path in sorted(glob.glob(sys.argv[1] + "/*.ndjson"), key=os.path.getmtime)[-1:]:
    for line in open(path, encoding="utf-8"):
        event = json.loads(line)
        for kind, data in event.items():
            if kind != "ScenarioFinished":
                continue
            recorder = data.get("recorder", {})
            label = recorder.get("label", "")
            if label.split(" ")[0] in ("GET", "PUT", "POST", "DELETE", "PATCH"):
                operations.add(label)
            cases += len(recorder.get("cases", {}))
            for entries in recorder.get("checks", {}).values():
                checks += len(entries)
                failed.update(e["name"] for e in entries if str(e.get("status")).lower() == "failure")
print(f"contract: {len(operations)} operations, {cases} test cases, {checks} checks evaluated"
      + (f"; failing checks: {', '.join(sorted(failed))}" if failed else ""))
PY
if grep -q ' ERROR mcp_harbor' "$WORK/server.log"; then
  echo "contract: the server logged errors:"; grep ' ERROR mcp_harbor' "$WORK/server.log" | tail -20
fi
exit $status
