#!/usr/bin/env bash
# Runs the whole test suite, installing the real servers the integration tests need when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v promtool   >/dev/null 2>&1 || need+=(prometheus)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]} (Debian packages)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

cargo test --locked --all-targets
