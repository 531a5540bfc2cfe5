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
lab=${VLLM_DIAG_LAB_DIR:-$HOME/.cache/vllm-diag-lab}
diag=${VLLM_DIAG:-$repo/target/debug/vllm-diag}
[ -x "$diag" ] || { echo "probe-join lab: $diag is not built (cargo build, or set VLLM_DIAG)" >&2; exit 2; }
[ -x "$lab/venv/bin/vllm" ] && [ -x "$lab/router-venv/bin/vllm-router" ] || {
  echo "probe-join lab: the lab's venvs are missing; run scripts/real-engine.sh --router once" >&2; exit 2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
utc() { date -u +%Y-%m-%dT%H:%M:%SZ; }
run=$(mktemp -d "$lab/probe-join.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

port=$(free_port); rport=$(free_port); rmport=$(free_port); prom_port=$(free_port)
engine_flags=(--host 127.0.0.1 --port "$port" --served-model-name tiny-llama --dtype bfloat16
  --max-model-len 1024 --max-num-seqs 32 --enable-prefix-caching --block-size 32
  --num-gpu-blocks-override 160 --max-num-queued-reqs 160)
cat > "$run/prometheus.yml" <<YML
global:
  scrape_interval: 5s
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: ["127.0.0.1:$port"]
  - job_name: vllm-router
    static_configs:
      - targets: ["127.0.0.1:$rmport"]
YML
start=$(utc)
prometheus --config.file="$run/prometheus.yml" --storage.tsdb.path="$run/data" \
  --web.listen-address="127.0.0.1:$prom_port" >"$run/prometheus.log" 2>&1 &
pids+=($!)
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=1 \
  setsid nice -n 10 "$lab/venv/bin/vllm" serve "$lab/tiny-llama" "${engine_flags[@]}" >"$run/engine.log" 2>&1 &
pids+=($!)
echo "probe-join lab: engine on :$port, Prometheus on :$prom_port (logs: $run)" >&2
for i in $(seq 1 300); do curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && break; sleep 1; done
curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null || { echo "probe-join lab: the engine did not start; see $run/engine.log" >&2; exit 1; }
for i in 1 2 3; do
  curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"tiny-llama","prompt":"warm up","max_tokens":8}' >/dev/null
done
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
