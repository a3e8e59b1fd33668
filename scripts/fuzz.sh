#!/usr/bin/env bash
# Fuzzing (cargo-fuzz / libFuzzer): builds the targets under fuzz/ with the nightly toolchain and
# runs each for a bounded time, growing its corpus in fuzz/corpus/<target>/ (kept in the repo).
#
#   scripts/fuzz.sh [seconds-per-target] [target...]     (default: 60 s, every target)
#
# Prints per target the runs (execs) and exec/s libFuzzer reports and whether it crashed; exits
# non-zero when any target crashed (its input is in fuzz/artifacts/<target>/: turn it into a
# regression test in tests/api/fuzz_regressions.rs). cargo-fuzz is installed into
# $MCP_HARBOR_CI_CACHE/cargo-fuzz (default ~/.cache/mcp-harbor) when missing.
#
# Environment: FUZZ_JOBS (parallel libFuzzer workers per target, default 1), FUZZ_SANITIZER
# (address, none, ...: default address), FUZZ_RSS_MB (per-input memory limit, default 2048),
# FUZZ_LOG_DIR (where each target's libFuzzer log goes, default a temporary directory),
# FUZZ_SAVE_CORPUS (0: new inputs are not added to fuzz/corpus, as in CI's smoke run),
# FUZZ_TARGET_DIR (where the nightly build goes, default fuzz/target; CI keeps it in its cache,
# so a clean checkout rebuilds only the project's own crates).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_PER_TARGET=${1:-60}
shift || true
CACHE="${MCP_HARBOR_CI_CACHE:-$HOME/.cache/mcp-harbor}"
FUZZ_ROOT="$CACHE/cargo-fuzz"
CARGO_FUZZ_VERSION=0.13.2
SANITIZER=${FUZZ_SANITIZER:-address}
JOBS=${FUZZ_JOBS:-1}
RSS_MB=${FUZZ_RSS_MB:-2048}
LOG_DIR=${FUZZ_LOG_DIR:-$(mktemp -d)}
SAVE_CORPUS=${FUZZ_SAVE_CORPUS:-1}
TARGET_DIR=${FUZZ_TARGET_DIR:-$ROOT/fuzz/target}
mkdir -p "$LOG_DIR"

case $SECONDS_PER_TARGET in
  '' | *[!0-9]*) echo "usage: $0 [seconds-per-target] [target...]" >&2; exit 2 ;;
esac

if ! rustup toolchain list | grep '^nightly' >/dev/null; then
  echo "==> installing the nightly toolchain (cargo-fuzz needs it)"
  rustup toolchain install nightly --profile minimal
fi
if ! "$FUZZ_ROOT/bin/cargo-fuzz" --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  echo "==> installing cargo-fuzz $CARGO_FUZZ_VERSION into $FUZZ_ROOT"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --root "$FUZZ_ROOT"
fi
export PATH="$FUZZ_ROOT/bin:$PATH"

mapfile -t ALL < <(cargo +nightly fuzz list --fuzz-dir "$ROOT/fuzz")
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")
for t in "${TARGETS[@]}"; do
  printf '%s\n' "${ALL[@]}" | grep -x -- "$t" >/dev/null || { echo "unknown target $t (known: ${ALL[*]})" >&2; exit 2; }
done

# The build (debug assertions and overflow checks on): every target at once, or each one named.
echo "==> building ${#TARGETS[@]} fuzz target(s) (nightly, sanitizer: $SANITIZER)"
build_start=$SECONDS
FUZZ_FLAGS=(--fuzz-dir "$ROOT/fuzz" --target-dir "$TARGET_DIR" --debug-assertions --sanitizer "$SANITIZER")
build() { cargo +nightly fuzz build "${FUZZ_FLAGS[@]}" "$@" >>"$LOG_DIR/build.log" 2>&1; }
if [ ${#TARGETS[@]} -eq ${#ALL[@]} ]; then
  build || { tail -40 "$LOG_DIR/build.log"; echo "fuzz build failed" >&2; exit 1; }
else
  for t in "${TARGETS[@]}"; do
    build "$t" || { tail -40 "$LOG_DIR/build.log"; echo "fuzz build of $t failed" >&2; exit 1; }
  done
fi
echo "    (build: $((SECONDS - build_start))s)"

failed=()
printf '\n%-18s %12s %10s %7s %7s  %s\n' target execs exec/s secs corpus result
for t in "${TARGETS[@]}"; do
  corpus="$ROOT/fuzz/corpus/$t"
  artifacts="$ROOT/fuzz/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  # New inputs go to the first corpus directory: the repo's, or a scratch one (FUZZ_SAVE_CORPUS=0).
  dirs=("$corpus") scratch=""
  [ "$SAVE_CORPUS" = 1 ] || { scratch=$(mktemp -d); dirs=("$scratch" "$corpus"); }
  extra=()
  [ -f "$ROOT/fuzz/dicts/$t.dict" ] && extra+=("-dict=$ROOT/fuzz/dicts/$t.dict")
  [ "$JOBS" -gt 1 ] && extra+=("-jobs=$JOBS" "-workers=$JOBS")
  log="$LOG_DIR/$t.log"
  start=$SECONDS
  set +e
  cargo +nightly fuzz run "${FUZZ_FLAGS[@]}" "$t" "${dirs[@]}" -- \
    -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb="$RSS_MB" -max_len=4096 -timeout=10 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "${extra[@]}" >"$log" 2>&1
  status=$?
  set -e
  took=$((SECONDS - start))
  [ -z "$scratch" ] || rm -rf "$scratch"
  # With -jobs>1 the workers log to fuzz-<n>.log in the current directory; fold them in.
  for w in fuzz-*.log; do [ -f "$w" ] && cat "$w" >>"$log" && rm -f "$w"; done
  execs=$(awk '/^stat::number_of_executed_units:/ {s += $2} END {print s + 0}' "$log")
  rate=$(awk '/^stat::average_exec_per_sec:/ {s += $2} END {print s + 0}' "$log")
  files=$(find "$corpus" -type f | wc -l)
  if [ "$status" -eq 0 ] && ! grep -qE '^(==[0-9]+== ?ERROR|SUMMARY: libFuzzer)|panicked at' "$log"; then
    result="ok"
  else
    result="CRASH (exit $status; log $log; inputs in fuzz/artifacts/$t/)"
    failed+=("$t")
    grep -E 'panicked at|^==[0-9]+==|SUMMARY|Test unit written to|^Error' "$log" | head -8 | sed 's/^/      /' || true
  fi
  printf '%-18s %12s %10s %7s %7s  %s\n' "$t" "$execs" "$rate" "$took" "$files" "$result"
done
echo "    (libFuzzer logs in $LOG_DIR)"

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found crashes in: ${failed[*]}" >&2
  exit 1
fi
echo "no crashes"
