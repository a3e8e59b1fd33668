#!/usr/bin/env bash
# Installs schemathesis (pinned) into a venv cached under ~/.cache/mcp-harbor/contractenv (or
# $MCP_HARBOR_CONTRACTENV) for scripts/contract.sh. Idempotent; prints nothing when the cache is
# already complete.
set -euo pipefail

SCHEMATHESIS_VERSION=4.32.5
CONTRACTENV="${MCP_HARBOR_CONTRACTENV:-${MCP_HARBOR_CI_CACHE:-$HOME/.cache/mcp-harbor}/contractenv}"

if [ -x "$CONTRACTENV/bin/st" ] \
  && [ "$("$CONTRACTENV/bin/python" -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null)" = "$SCHEMATHESIS_VERSION" ]; then
  exit 0
fi
python3 -m venv "$CONTRACTENV"
"$CONTRACTENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
echo "schemathesis $SCHEMATHESIS_VERSION installed in $CONTRACTENV"
