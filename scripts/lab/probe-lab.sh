# Sourced by scripts/lab/probe.sh and probe-join.sh: the lab both start. Checks the lab's venvs and
# the built vllm-diag, then starts a real Prometheus (scraping the engine and the router's metrics
# port every 5 s) and a vLLM CPU engine with the tiny model, waits for it and warms it up. Expects
# `repo`, `name` (for messages) and `name_dir` (the run directory's prefix); sets `lab`, `diag`,
# `run`, `pids` (stopped on exit), `port`, `rport`, `rmport`, `prom_port`, `engine_flags`, `start`
# and the helpers `free_port` and `utc`. May be set first: `max_num_seqs` (the engine's sequence
# cap, default 32) and `engine_nice` (the engine's nice value, default 10: below the other work on
# the machine; a load test gives it -5, so that builds on a shared machine do not fake a slowdown).
lab=${VLLM_DIAG_LAB_DIR:-$HOME/.cache/vllm-diag-lab}
diag=${VLLM_DIAG:-$repo/target/debug/vllm-diag}
[ -x "$diag" ] || { echo "$name: $diag is not built (cargo build, or set VLLM_DIAG)" >&2; exit 2; }
[ -x "$lab/venv/bin/vllm" ] && [ -x "$lab/router-venv/bin/vllm-router" ] || {
  echo "$name: the lab's venvs are missing; run scripts/real-engine.sh --router once" >&2; exit 2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
utc() { date -u +%Y-%m-%dT%H:%M:%SZ; }
run=$(mktemp -d "$lab/$name_dir.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

port=$(free_port); rport=$(free_port); rmport=$(free_port); prom_port=$(free_port)
engine_flags=(--host 127.0.0.1 --port "$port" --served-model-name tiny-llama --dtype bfloat16
  --max-model-len 1024 --max-num-seqs "${max_num_seqs:-32}" --enable-prefix-caching --block-size 32
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
  setsid nice -n "${engine_nice:-10}" "$lab/venv/bin/vllm" serve "$lab/tiny-llama" "${engine_flags[@]}" >"$run/engine.log" 2>&1 &
pids+=($!)
echo "$name: engine on :$port, Prometheus on :$prom_port (logs: $run)" >&2
for i in $(seq 1 300); do curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && break; sleep 1; done
curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null || { echo "$name: the engine did not start; see $run/engine.log" >&2; exit 1; }
# A few requests first: the first ones after a start are slower (compilation, caches).
for i in 1 2 3; do
  curl -fsS "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
    -d '{"model":"tiny-llama","prompt":"warm up","max_tokens":8}' >/dev/null
done
