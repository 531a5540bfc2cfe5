#!/usr/bin/env bash
# The real MCP client tests/mcp.rs drives vllm-diag mcp with: the official Python SDK (PyPI `mcp`),
# installed into a virtual environment under ~/.cache/vllm-diag-test/ (or $VLLM_DIAG_TEST_CACHE).
# Idempotent: an environment that already holds this version is kept. Prints the environment's
# python on stdout, which tests/mcp.rs also finds by itself at that path.
set -euo pipefail
MCP_VERSION=2.3.0
cache="${VLLM_DIAG_TEST_CACHE:-$HOME/.cache/vllm-diag-test}"
venv="$cache/mcp-venv"
python="$venv/bin/python"
if ! "$python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mcp') != '$MCP_VERSION')" >/dev/null 2>&1; then
  echo "installing the Python MCP SDK $MCP_VERSION into $venv" >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$MCP_VERSION" >&2
fi
echo "$python"
