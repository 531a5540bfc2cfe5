#!/usr/bin/env bash
# Installs vllm-diag the way docs/install.md says, `cargo install --locked --path .`, into a
# temporary root, then runs the installed binary from outside the checkout: `--version`, and the
# offline replay of a recorded incident, whose JSON report must equal the one tests/cli.rs checks
# (tests/snapshots/cli__kv_cache_pressure_json.snap).
#
# Usage: scripts/install-check.sh [--debug]
#   (none)   the release build, as a user gets it: fat LTO, several minutes on 2 cores the first time.
#   --debug  the dev profile instead, so that it reuses what `cargo test` built in the same target
#            directory (scripts/test.sh runs it so, after the tests: well under a minute).
# Either way the build goes to $CARGO_TARGET_DIR (default: target/), not to a fresh temporary one.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

profile=()
case "${1:-}" in
  "") ;;
  --debug) profile=(--debug) ;;
  *) echo "usage: $0 [--debug]" >&2; exit 2 ;;
esac

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

cargo install --locked --quiet --path . --root "$root" "${profile[@]}"
bin="$root/bin/vllm-diag"
[ -x "$bin" ] || { echo "install-check: cargo install put no vllm-diag in $root/bin" >&2; exit 1; }

fail() { echo "install-check: $*" >&2; exit 1; }

# Run from the empty root: the installed binary needs nothing from the checkout (its rules are
# compiled in) but the recording it is given.
cd "$root"
want="vllm-diag $(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)"
got=$("$bin" --version) || fail "--version failed"
[ "$got" = "$want" ] || fail "--version says '$got', expected '$want'"

report=$("$bin" explain --replay "$repo/fixtures/incidents/kv-cache-pressure.json" --format json) \
  || fail "explain --replay fixtures/incidents/kv-cache-pressure.json exited $?"
# The snapshot without insta's header (up to its second ---), ports masked as tests/cli.rs masks them.
expected=$(awk 'n >= 2 { print } /^---$/ { n++ }' "$repo/tests/snapshots/cli__kv_cache_pressure_json.snap")
masked=$(printf '%s\n' "$report" | sed -E 's/127\.0\.0\.1:[0-9]+/127.0.0.1:[port]/g')
if [ "$masked" != "$expected" ]; then
  diff <(printf '%s\n' "$expected") <(printf '%s\n' "$masked") | head -n 20 >&2 || true
  fail "the installed binary's replay differs from tests/snapshots/cli__kv_cache_pressure_json.snap"
fi
echo "install-check: $got installed to a temporary root${profile:+ (${profile[*]})}; --version and the kv-cache-pressure replay as expected"
