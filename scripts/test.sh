#!/usr/bin/env bash
# Runs the whole test suite, installing the real servers the integration tests need when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v promtool   >/dev/null 2>&1 || need+=(prometheus)
# The same diagnosis from VictoriaMetrics single-node (tests/victoria.rs).
command -v victoria-metrics >/dev/null 2>&1 || need+=(victoria-metrics)
# `serve` behind a real Alertmanager (tests/serve.rs).
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
# The HTML report is checked in a real headless browser (tests/html.rs), with a font to draw text.
command -v chromium   >/dev/null 2>&1 || need+=(chromium)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
# `script` gives `--watch` a terminal in tests/check.rs (util-linux; present on most systems).
command -v script     >/dev/null 2>&1 || need+=(bsdutils)
# The container image is built and run by a real engine (tests/image.rs): podman, with runc as
# its runtime (crun, podman's default, refuses this kind of machine's hybrid cgroups).
command -v podman     >/dev/null 2>&1 || need+=(podman)
command -v runc       >/dev/null 2>&1 || need+=(runc)
# The real MCP client of tests/mcp.rs is the Python SDK, in a virtual environment (below).
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]} (Debian packages)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# `vllm-diag mcp` is tested with a client nobody here wrote: the official Python MCP SDK, installed
# once into ~/.cache/vllm-diag-test/mcp-venv (tests/mcp.rs finds it there, or at $VLLM_DIAG_MCP_PYTHON).
VLLM_DIAG_MCP_PYTHON="$(./scripts/mcp-client-venv.sh)"
export VLLM_DIAG_MCP_PYTHON

# deploy/kubernetes is validated against the Kubernetes API's schemas by PyPI kubernetes-validate
# (tests/deploy.rs), installed the same way into ~/.cache/vllm-diag-test/kubernetes-validate-venv.
VLLM_DIAG_KUBERNETES_VALIDATE="$(./scripts/kubernetes-validate-venv.sh)"
export VLLM_DIAG_KUBERNETES_VALIDATE

# vLLM's router (PyPI vllm-router) stands between vllm-diag probe and a stand-in engine in
# tests/probe.rs, installed the same way into ~/.cache/vllm-diag-test/router-venv.
VLLM_DIAG_ROUTER="$(./scripts/router-venv.sh)"
export VLLM_DIAG_ROUTER

# The tests start vllm-diag hundreds of times: none of them may append to the CI job's own step
# summary (tests that check the summary set their own file), nor pick up a developer's connection.
unset GITHUB_STEP_SUMMARY VLLM_DIAG_PROMETHEUS_URL VLLM_DIAG_BEARER_TOKEN VLLM_DIAG_BASIC_AUTH_PASSWORD

# The code's form first (seconds, and a minute or two of checking): rustfmt.toml's format, and
# clippy over every target (library, binaries, tests, the benchmark, the simulator) with every
# warning an error.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy >&2
fi
cargo fmt --all --check
cargo clippy --locked --workspace --all-targets --features servers -- -D warnings

# Every test target of `cargo test --workspace --all-targets`, built once and run two at a time
# (many wait on servers they start; one after another they left a core idle), each target's output
# whole when it ends; one failing target does not hide the others' results.
python3 scripts/run-tests.py --locked --features servers

# Opt-in: VLLM_DIAG_INSTALL_CHECK=release (or debug) also installs the tool the way docs/install.md
# says, `cargo install --locked --path .`, into a temporary root and runs the installed binary
# (scripts/install-check.sh). Opt-in because neither build is one the tests made: the release one
# takes several minutes on 2 cores, and even the dev profile rebuilds much of the dependency tree.
case "${VLLM_DIAG_INSTALL_CHECK:-}" in
  "") ;;
  release) ./scripts/install-check.sh ;;
  debug) ./scripts/install-check.sh --debug ;;
  *) echo "VLLM_DIAG_INSTALL_CHECK must be release or debug, not '${VLLM_DIAG_INSTALL_CHECK}'" >&2; exit 2 ;;
esac

# Opt-in: VLLM_DIAG_REAL_ENGINE=1 also runs the real-engine lab live (scripts/real-engine.sh: a real
# vLLM engine for about 45 minutes, 6 GB the first time) and judges the fresh run. CI replays the
# exported samples instead (tests/real_engine.rs, above).
if [ "${VLLM_DIAG_REAL_ENGINE:-}" = 1 ]; then
  cargo test --locked --features servers --test real_engine -- --ignored live_lab_run
fi
