#!/usr/bin/env bash
# The schema validator tests/deploy.rs checks deploy/kubernetes/*.yaml with: PyPI
# `kubernetes-validate` (the Kubernetes API's OpenAPI schemas, every release, bundled), installed into
# a virtual environment under ~/.cache/vllm-diag-test/ (or $VLLM_DIAG_TEST_CACHE). Idempotent: an
# environment that already holds this version is kept. Prints the validator's path on stdout.
set -euo pipefail
VERSION=1.37.0
cache="${VLLM_DIAG_TEST_CACHE:-$HOME/.cache/vllm-diag-test}"
venv="$cache/kubernetes-validate-venv"
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('kubernetes-validate') != '$VERSION')" >/dev/null 2>&1; then
  echo "installing kubernetes-validate $VERSION into $venv" >&2
  mkdir -p "$cache"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$VERSION" >&2
fi
echo "$venv/bin/kubernetes-validate"
