#!/usr/bin/env bash
# A profile-guided (PGO) release build of mcp-harbor. Not part of the README's commands nor of
# CI: an optional build for images and benchmarks, measured at -9 % server CPU per tools/call,
# -11 % per 2026-07-28 call and -13 % per session init against the plain release build
# (interleaved, pinned, 16 connections; bench/README.md).
#
#   scripts/pgo-build.sh            # writes target/pgo/mcp-harbor
#
# 1. builds mcp-harbor instrumented (-Cprofile-generate) into PGO_GEN_TARGET;
# 2. drives it with mcp-harbor-bench on loopback, the phases bench/compare.sh measures:
#    tools/call at 16 and 1 connections, stateless 2026-07-28 calls, session inits, calls to an
#    OAuth-protected tenant (PGO_SECONDS each, default 3);
# 3. merges the profile with the llvm-profdata of rustc's own LLVM version (Debian's
#    llvm-<major>, installed with apt-get when missing);
# 4. builds mcp-harbor with -Cprofile-use into PGO_USE_TARGET and copies it to OUT.
# The profile is named by its digest: cargo tracks RUSTFLAGS, not the file they name, so a new
# profile is a new path and forces the rebuild.
#
# Environment: PGO_GEN_TARGET, PGO_USE_TARGET (target directories, under
# ~/.cache/mcp-harbor by default: each is a full release build, 6-9 minutes cold),
# PGO_SECONDS (3), OUT (target/pgo/mcp-harbor), and those of bench/server.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

cache=${MCP_HARBOR_CI_CACHE:-$HOME/.cache/mcp-harbor}
gen_target=${PGO_GEN_TARGET:-$cache/pgo-gen-target}
use_target=${PGO_USE_TARGET:-$cache/pgo-use-target}
seconds=${PGO_SECONDS:-3}
out=${OUT:-target/pgo/mcp-harbor}

llvm_major=$(rustc -vV | sed -nE 's/^LLVM version: ([0-9]+).*/\1/p')
profdata=llvm-profdata-$llvm_major
if ! command -v "$profdata" >/dev/null; then
    echo "==> installing llvm-$llvm_major (for $profdata)"
    apt-get install -y -q "llvm-$llvm_major" >/dev/null
fi

echo "==> the plain release build (the load generator, and the baseline to compare with)"
cargo build --release --locked --bins

# A fixed path, so that the instrumented build's RUSTFLAGS stay the same and it is cached.
raw=$cache/pgo/raw
mkdir -p "$raw"
echo "==> instrumented build (into $gen_target)"
RUSTFLAGS="-Cprofile-generate=$raw" cargo build --release --locked --bin mcp-harbor \
    --target-dir "$gen_target"
# Build scripts ran instrumented too: only the server's own run goes into the profile.
rm -rf "${raw:?}"/*

# shellcheck source=bench/server.sh
source bench/server.sh
server_bin=$gen_target/release/mcp-harbor
echo "==> driving the instrumented server (${seconds}s per phase)"
oauth_env
start_server pgo memory
oauth_tenants
drive() {
    "${pin_bench[@]}" "$bench_bin" --duration "$seconds" "$@" | grep -E '^(calls|inits):'
}
drive --url "$url" --phase calls --connections 16
drive --url "$url" --phase calls --connections 1
drive --url "$url" --phase calls --connections 16 --modern
drive --url "$url" --phase inits --connections 16
drive --url "$base/t/locked/mcp" --phase calls --connections 16 --bearer-token-env BENCH_ACCESS_TOKEN
# The profile is written as the process exits: stop_server waits for it.
stop_server

merged=$raw/merged.profdata
"$profdata" merge -o "$merged" "$raw"/*.profraw
digest=$(sha256sum "$merged" | cut -c1-16)
profile=$cache/pgo/mcp-harbor-$digest.profdata
mv "$merged" "$profile"
rm -rf "${raw:?}"/*

echo "==> optimised build with $profile (into $use_target)"
RUSTFLAGS="-Cprofile-use=$profile" cargo build --release --locked --bin mcp-harbor \
    --target-dir "$use_target"
mkdir -p "$(dirname "$out")"
cp "$use_target/release/mcp-harbor" "$out"
echo "==> $out (profile-guided; the plain build stays in target/release)"
