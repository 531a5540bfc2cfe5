#!/usr/bin/env bash
# vllm-diag in a deploy pipeline: install a released binary, then check the deploy. action.yml (GitHub)
# runs this file; ci/gitlab/vllm-diag.gitlab-ci.yml (GitLab) carries a copy of it (tests/ci.rs keeps
# the two the same). docs/ci.md describes the inputs.
#
#   vllm-diag-ci.sh install   download the release archive and its .sha256, verify, unpack
#   vllm-diag-ci.sh check     run `vllm-diag check`, write the outputs; exits with check's code
#   vllm-diag-ci.sh           both
#
# Environment (the action's inputs, the GitLab template's variables):
#   VLLM_DIAG_VERSION         the release to install, e.g. 0.1.0 (required)
#   VLLM_DIAG_RELEASES        where releases are: the archive is fetched from
#                             $VLLM_DIAG_RELEASES/v$VERSION/vllm-diag-$VERSION-x86_64-unknown-linux-gnu.tar.gz
#   VLLM_DIAG_PROMETHEUS_URL  the metrics backend (read by vllm-diag itself)
#   VLLM_DIAG_BEARER_TOKEN    its token, if it needs one (read by vllm-diag itself; never printed)
#   VLLM_DIAG_SINCE           when the deploy happened: a duration (20m), a time, or `deploy`
#   VLLM_DIAG_SELECTOR        label matchers for the deployed replicas, e.g. namespace="prod"
#   VLLM_DIAG_FAIL_ON         the lowest severity that fails the job [default: warning]
#   VLLM_DIAG_ARGS            more arguments for check, split on spaces (e.g. --profile batch)
#   VLLM_DIAG_INSTALL_DIR     where to unpack [default: $RUNNER_TEMP, $TMPDIR or /tmp, + /vllm-diag]
# On GitHub ($GITHUB_ACTIONS): findings become annotations, check appends its Markdown report to
# the step summary, and the outputs verdict, exit-code and report (a JSON file) go to $GITHUB_OUTPUT.
# On GitLab and elsewhere: vllm-diag.xml (JUnit, for the test report) and vllm-diag.md are written
# in the working directory, re-rendered from the run's recording, so the backend is asked once.
set -euo pipefail

die() { echo "vllm-diag-ci: $*" >&2; exit 2; }
version="${VLLM_DIAG_VERSION:-}"
[ -n "$version" ] || die "set VLLM_DIAG_VERSION (the release to install, e.g. 0.1.0)"
target=x86_64-unknown-linux-gnu
name="vllm-diag-$version-$target"
dir="${VLLM_DIAG_INSTALL_DIR:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/vllm-diag}"
bin="$dir/$name/vllm-diag"

fetch() { # URL FILE
  if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 3 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then wget -q -O "$2" "$1"
  else die "neither curl nor wget is installed"; fi
}

install() {
  [ "$(uname -s)-$(uname -m)" = Linux-x86_64 ] || die "releases are built for Linux x86_64, not $(uname -s) $(uname -m)"
  [ -n "${VLLM_DIAG_RELEASES:-}" ] || die "set VLLM_DIAG_RELEASES (the base URL of the releases)"
  if [ -x "$bin" ] && "$bin" --version | grep -qx "vllm-diag $version"; then
    echo "vllm-diag $version already in $dir"
  else
    mkdir -p "$dir"
    local base="${VLLM_DIAG_RELEASES%/}/v$version"
    fetch "$base/$name.tar.gz" "$dir/$name.tar.gz" || die "cannot download $base/$name.tar.gz"
    fetch "$base/$name.tar.gz.sha256" "$dir/$name.tar.gz.sha256" || die "cannot download $base/$name.tar.gz.sha256"
    (cd "$dir" && sha256sum -c --quiet "$name.tar.gz.sha256") || die "$name.tar.gz does not match its SHA-256: not installed"
    tar -xzf "$dir/$name.tar.gz" -C "$dir"
    rm -f "$dir/$name.tar.gz"
    echo "installed $("$bin" --version) into $dir/$name"
  fi
  if [ -n "${GITHUB_PATH:-}" ]; then echo "$dir/$name" >> "$GITHUB_PATH"; fi
}

check() {
  [ -x "$bin" ] || die "$bin is missing: run install first"
  [ -n "${VLLM_DIAG_SINCE:-}" ] || die "set VLLM_DIAG_SINCE (when the deploy happened: 20m, a time, or deploy)"
  local args=(check --no-config --since "$VLLM_DIAG_SINCE" --fail-on "${VLLM_DIAG_FAIL_ON:-warning}")
  [ -z "${VLLM_DIAG_SELECTOR:-}" ] || args+=(--selector "$VLLM_DIAG_SELECTOR")
  # shellcheck disable=SC2206 # split on spaces, as documented
  [ -z "${VLLM_DIAG_ARGS:-}" ] || args+=($VLLM_DIAG_ARGS)
  local record="$dir/run.json" out="$dir/check.txt" code=0
  rm -f "$record"
  if [ -n "${GITHUB_ACTIONS:-}" ]; then
    "$bin" "${args[@]}" --record "$record" --annotations github | tee "$out" || code=${PIPESTATUS[0]}
  else
    "$bin" "${args[@]}" --record "$record" | tee "$out" || code=${PIPESTATUS[0]}
  fi
  local verdict
  verdict="$(head -1 "$out" | cut -d: -f1)"
  if [ -s "$record" ]; then
    # The same run again from its recording, in the formats a CI shows (no query to the backend).
    "$bin" check --no-config --replay "$record" --format json > "$dir/report.json" 2>/dev/null || true
    if [ -z "${GITHUB_ACTIONS:-}" ]; then
      "$bin" check --no-config --replay "$record" --format junit > vllm-diag.xml 2>/dev/null || true
      "$bin" check --no-config --replay "$record" --format markdown > vllm-diag.md 2>/dev/null || true
    fi
  fi
  if [ -n "${GITHUB_OUTPUT:-}" ]; then
    { echo "verdict=$verdict"; echo "exit-code=$code"; echo "report=$dir/report.json"; } >> "$GITHUB_OUTPUT"
  fi
  return "$code"
}

case "${1:-all}" in
  install) install ;;
  check) check ;;
  all) install; check ;;
  *) die "unknown step '$1': install, check, or nothing for both" ;;
esac
