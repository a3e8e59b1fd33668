#!/usr/bin/env bash
# Installs what helm/check.py needs into a venv (default ~/.cache/mcp-harbor/helmenv):
# helm-python-sdk (Helm's Go SDK as a native library: no helm binary) and kubernetes-validate.
# Then: "$HELMENV/bin/python" helm/check.py
set -euo pipefail

HELMENV="${MCP_HARBOR_HELMENV:-${MCP_HARBOR_CI_CACHE:-$HOME/.cache/mcp-harbor}/helmenv}"

if [ -x "$HELMENV/bin/python" ] \
  && "$HELMENV/bin/python" -c 'import helm_python, kubernetes_validate, yaml' 2>/dev/null; then
  exit 0
fi
python3 -m venv "$HELMENV"
"$HELMENV/bin/pip" install --quiet --disable-pip-version-check helm-python-sdk kubernetes-validate
"$HELMENV/bin/python" -c 'import helm_python, kubernetes_validate, yaml'
echo "helm check dependencies installed in $HELMENV"
