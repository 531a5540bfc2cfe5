#!/usr/bin/env bash
# vLLM's router (PyPI `vllm-router`, a Rust binary in a wheel), which tests/probe.rs puts between
# vllm-diag probe and a stand-in engine: its concurrency limit, its 408s and its request counters
# are the real router's. Installed into a virtual environment under ~/.cache/vllm-diag-test/ (or
# $VLLM_DIAG_TEST_CACHE). Idempotent: an environment that already holds this version is kept.
# Prints the router binary's path on stdout, which tests/probe.rs also finds by itself there.
set -euo pipefail
ROUTER_VERSION=0.1.17
cache="${VLLM_DIAG_TEST_CACHE:-$HOME/.cache/vllm-diag-test}"
venv="$cache/router-venv"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm-router') != '$ROUTER_VERSION')" >/dev/null 2>&1; then
  echo "installing vllm-router $ROUTER_VERSION into $venv" >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "vllm-router==$ROUTER_VERSION" >&2
fi
echo "$venv/bin/vllm-router"
