#!/usr/bin/env bash
# The fleet benchmark (BENCHMARKS.md): explain against the floor at 10, 100 and 1,000 replicas.
#
#   scripts/bench.sh                       # the diagonal: 10x1, 100x10, 1000x50 (replicas x models)
#   scripts/bench.sh --grid                # every size from {10,100,1000} x {1,10,50}
#   scripts/bench.sh --sizes 1000x50 --runs 15
#   scripts/bench.sh --fresh               # rebuild the cached TSDBs in target/bench/data
#   scripts/bench.sh --backend victoria    # the same against VictoriaMetrics (or: --backend both)
#   scripts/bench.sh --sizes 200x20,1000x50 --previous /path/to/old/vllm-diag   # side by side
#   scripts/bench.sh --sizes 10x1,200x20 --latency 20   # through a relay adding 20 ms of round trip
#   scripts/bench.sh --sizes 10x1,200x20 --concurrency 16   # explain and the floor with 16 in flight
#   scripts/bench.sh --sizes 200x20 --gzip   # the run's requests with and without compressed answers
#   scripts/bench.sh --sizes 200x20 --raw-reads   # also each family read raw once, the queries evaluated locally
#
# Results: target/bench/results.md and results.json. Generated TSDBs (and VictoriaMetrics storage
# directories) are kept in target/bench/data (about 1 GB each for 1000x50) and reused; the
# OpenMetrics text is deleted after the backfill/import.
# Installs Prometheus (with promtool), GNU time and, when --backend asks for it, VictoriaMetrics
# when missing (Debian packages).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v promtool   >/dev/null 2>&1 || need+=(prometheus)
[ -x /usr/bin/time ] || need+=(time)
victoria=""
prev=""
for a in "$@"; do
  if [ "$prev" = "--backend" ] && { [ "$a" = victoria ] || [ "$a" = victoriametrics ] || [ "$a" = both ]; }; then victoria=1; fi
  prev="$a"
done
if [ -n "$victoria" ]; then
  command -v victoria-metrics >/dev/null 2>&1 || need+=(victoria-metrics)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]} (Debian packages)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# The bench profile is the release profile: the vllm-diag binary measured is the one users run.
exec cargo bench --locked --bench fleet -- "$@"
