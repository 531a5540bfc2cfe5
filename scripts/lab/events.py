"""The events programme of the real-engine lab: one vLLM engine, restarted twice under the same load.

Usage: python events.py --engine-cmd JSON --flags JSON --pressure-blocks 40 --port PORT
                        --manifest OUT.json --last-scrape OUT.txt --log-dir DIR
                        [--phase-seconds 240] [--engine JSON]

It owns the engine process (scripts/real-engine.sh --events starts Prometheus first, scraping the
engine's port, and runs this). With one engine on one port, so Prometheus sees one job and instance
throughout:
  steady-1   a moderate load M (healthy);
  restart    SIGTERM, wait for the exit, start again with the same flags (a restart that changes
             nothing: the near miss);
  steady-2   the same load M (healthy);
  restart    SIGTERM, start again with --num-gpu-blocks-override lowered to --pressure-blocks (a
             configuration change, visible in vllm:cache_config_info's num_gpu_blocks label);
  pressure   the same load M, which no longer fits in the KV cache (incident: preemptions).
The load clients pause while the engine is down and resume when /metrics and /v1/models answer
again; each later phase starts at that moment. Every 5 s the engine's own /metrics is read, so the
manifest records what the engine itself said (KV usage, queue, preemptions) per phase, and the
cache_config_info labels before and after each restart.

Exit codes: 0 when the phases came out as intended, 3 when they did not (steady phases with
preemptions or high KV usage, a pressure phase without preemptions): the manifest is still written,
with `"checks"` saying what failed; 1 on any other failure.
"""
import argparse
import asyncio
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import urllib.request
import zlib

import aiohttp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drive import VOCAB_LOW, VOCAB_HIGH, Load, Stats, log, run_lab, utc  # noqa: E402

# Load M: 8 closed-loop clients, random 128-token prompts, 160 output tokens, ~0.2 s think time.
# A request holds 4 to 9 blocks of 32 tokens, about 50 blocks for the 8 together: under a third of
# 160 blocks (at most 72, 45%, if all were at their longest at once), well over 40.
LOAD_M = Load(clients=8, prompt_tokens=128, max_tokens=160, think=0.2)
LOAD_WHAT = "8 clients, random 128-token prompts, 160 output tokens, ~0.2 s think time (non-streaming)"
SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def http_ok(url, timeout=2.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status == 200, r.read().decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - anything but a 200 means "not up"
        return False, ""


def parse_metrics(text):
    """The few things read from the engine's /metrics page."""
    out = {"cache_config": None}
    for line in text.splitlines():
        m = SAMPLE_RE.match(line)
        if not m or line.startswith("#"):
            continue
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        try:
            v = float(value)
        except ValueError:
            continue
        if name == "vllm:cache_config_info":
            out["cache_config"] = dict(LABEL_RE.findall(labels))
        elif name in ("process_start_time_seconds", "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting",
                      "vllm:num_requests_running", "vllm:num_preemptions_total", "vllm:request_success_total"):
            out[name] = out.get(name, 0.0) + v
    return out


class Engine:
    """One `vllm serve` process at a time, in its own process group."""

    def __init__(self, args):
        self.args = args
        self.proc = None
        self.starts = 0
        self.processes = []

    def start(self, flags):
        self.starts += 1
        logf = open(os.path.join(self.args.log_dir, f"vllm-{self.starts}.log"), "w")
        nice = self.args.engine_nice

        def lift():
            try:
                os.nice(nice)
            except OSError:
                pass  # not allowed (not root): the engine runs at the lab's own priority

        self.proc = subprocess.Popen(self.args.engine_cmd + flags, stdout=logf, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=lift if nice else None)
        logf.close()
        self.launched_at = time.time()
        self.processes.append({"pid": self.proc.pid, "flags": " ".join(flags), "launched": utc(self.launched_at),
                               "nice": os.getpriority(os.PRIO_PROCESS, self.proc.pid),
                               "log": os.path.basename(logf.name)})
        log(f"engine {self.starts} launched (pid {self.proc.pid}): {' '.join(flags)}")

    async def wait_up(self, base, limit=900):
        """Seconds since the epoch when /metrics first answered, once /v1/models answers too."""
        metrics_up = None
        deadline = time.time() + limit
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode} while starting; see "
                                   f"{self.args.log_dir}/{self.processes[-1]['log']}")
            if metrics_up is None and (await asyncio.to_thread(http_ok, f"{base}/metrics"))[0]:
                metrics_up = time.time()
            if metrics_up is not None and (await asyncio.to_thread(http_ok, f"{base}/v1/models"))[0]:
                self.processes[-1]["up"] = utc(metrics_up)
                log(f"engine {self.starts} up: /metrics answered at {utc(metrics_up)}, "
                    f"{metrics_up - self.launched_at:.0f} s after launch")
                return metrics_up
            await asyncio.sleep(0.5)
        raise RuntimeError(f"vLLM did not answer on /metrics and /v1/models within {limit} s")

    async def stop(self, on_signalled=None, timeout=30):
        """SIGTERM to the server process, then wait until it and its children are gone (SIGKILL
        after `timeout` seconds, as Kubernetes does after its grace period)."""
        p = self.proc
        signalled = time.time()
        p.send_signal(signal.SIGTERM)
        self.processes[-1]["signalled"] = utc(signalled)
        if on_signalled is not None:
            on_signalled()
        try:
            await asyncio.to_thread(p.wait, timeout)
        except subprocess.TimeoutExpired:
            log(f"engine pid {p.pid} still running {timeout} s after SIGTERM: SIGKILL")
            self.processes[-1]["killed"] = True
            os.killpg(p.pid, signal.SIGKILL)
            await asyncio.to_thread(p.wait)
        # Its engine-core child shares the process group: wait for it too (it holds the KV cache).
        for _ in range(60):
            try:
                os.killpg(p.pid, 0)
            except ProcessLookupError:
                break
            await asyncio.sleep(0.5)
        else:
            os.killpg(p.pid, signal.SIGKILL)
        exited = time.time()
        self.processes[-1]["exited"] = utc(exited)
        self.processes[-1]["exit_code"] = p.returncode
        log(f"engine pid {p.pid} exited with {p.returncode}, {exited - signalled:.1f} s after SIGTERM")
        self.proc = None
        return signalled

    def kill(self):
        """The end of the programme (after the exported window), or of a failed one."""
        if self.proc is not None and self.proc.poll() is None:
            self.processes[-1]["signalled"] = utc(time.time())
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except Exception:  # noqa: BLE001
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.processes[-1]["exited"] = utc(time.time())


class State:
    def __init__(self):
        self.running = asyncio.Event()
        self.stats = Stats()
        self.done = False
        self.view = None  # the engine's view of the current phase (dict), or None
        self.inflight = set()  # the requests under way (tasks)

    def give_up_inflight(self):
        """The clients give up what is under way (vLLM's API server, stopped, waits for open
        connections to close before it exits)."""
        for t in list(self.inflight):
            t.cancel()


async def post(session, url, body):
    try:
        async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=300)) as resp:
            await resp.read()
            return resp.status
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        return type(e).__name__


async def client(session, args, state, i):
    rng = random.Random(zlib.crc32(f"events/{i}".encode()))
    load = LOAD_M
    while not state.done:
        if not state.running.is_set():
            await state.running.wait()
            await asyncio.sleep(rng.uniform(0, 1.0))  # do not all come back in the same instant
            continue
        prompt = [rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(load.prompt_tokens)]
        body = {"model": args.model, "prompt": prompt, "max_tokens": load.max_tokens, "ignore_eos": True,
                "stream": False, "temperature": 0.0}
        req = asyncio.create_task(post(session, f"{args.url}/v1/completions", body))
        state.inflight.add(req)
        try:
            status = await req
        except asyncio.CancelledError:
            if state.done:
                raise
            status = "given-up"  # cut by a restart
        finally:
            state.inflight.discard(req)
        # Counted in the phase the request ended in: one cut by a restart counts in the restart.
        if status == 200:
            state.stats.ok += 1
        else:
            state.stats.status(status)
        await asyncio.sleep(rng.uniform(0.5, 1.5) * load.think)


async def sampler(args, state):
    """Reads the engine's /metrics every 5 s into the current phase's view."""
    while not state.done:
        view = state.view
        if view is not None:
            ok, text = await asyncio.to_thread(http_ok, f"{args.url}/metrics")
            if ok and state.view is view:
                m = parse_metrics(text)
                kv = m.get("vllm:kv_cache_usage_perc", 0.0)
                view["kv"].append(kv)
                view["waiting_max"] = max(view["waiting_max"], m.get("vllm:num_requests_waiting", 0.0))
                view["running_max"] = max(view["running_max"], m.get("vllm:num_requests_running", 0.0))
        await asyncio.sleep(5)


def snapshot(args):
    ok, text = http_ok(f"{args.url}/metrics", timeout=10)
    if not ok:
        raise RuntimeError(f"{args.url}/metrics did not answer")
    return parse_metrics(text)


async def phase(args, state, name, kind, baseline, expect, what, seconds):
    start = time.time()
    load_before = os.getloadavg()[0]
    before = await asyncio.to_thread(snapshot, args)
    state.stats = Stats()
    state.view = {"kv": [], "waiting_max": 0.0, "running_max": 0.0}
    log(f"phase {name} ({kind}) for {seconds}s: {what}")
    await asyncio.sleep(max(0, start + seconds - time.time()))
    end = time.time()
    after = await asyncio.to_thread(snapshot, args)
    view, stats = state.view, state.stats
    kv = view["kv"] or [0.0]
    entry = {"name": name, "kind": kind, "start": utc(start), "end": utc(end), "what": what,
             "load": LOAD_M.describe() | {"stream": False}, "expect_first": expect, "baseline_phase": baseline,
             "client_view": {"completed": stats.ok,
                             "errors": {str(k): v for k, v in sorted(stats.errors.items(), key=lambda kv: str(kv[0]))}},
             "engine_view": {
                 "num_gpu_blocks": (after["cache_config"] or {}).get("num_gpu_blocks"),
                 "kv_usage_max": round(max(kv), 4), "kv_usage_mean": round(sum(kv) / len(kv), 4),
                 "waiting_max": view["waiting_max"], "running_max": view["running_max"],
                 "preemptions": after.get("vllm:num_preemptions_total", 0.0) - before.get("vllm:num_preemptions_total", 0.0),
                 "requests_finished": after.get("vllm:request_success_total", 0.0) - before.get("vllm:request_success_total", 0.0),
                 "samples": len(view["kv"])},
             "machine_load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    log(f"phase {name} done: {entry['client_view']} {entry['engine_view']}")
    return entry


async def restart(args, state, engine, kind, flags_before, flags_after):
    before = await asyncio.to_thread(snapshot, args)
    state.running.clear()
    restart_stats = Stats()
    state.stats = restart_stats
    state.view = None
    log(f"{kind}: stopping the engine (clients paused)")
    down = await engine.stop(state.give_up_inflight)
    engine.start(flags_after)
    up = await engine.wait_up(args.url)
    after = await asyncio.to_thread(snapshot, args)
    state.running.set()
    cb, ca = before["cache_config"] or {}, after["cache_config"] or {}
    changed = {k: [cb.get(k), ca.get(k)] for k in sorted(set(cb) | set(ca)) if cb.get(k) != ca.get(k)}
    fb, fa = flag_map(flags_before), flag_map(flags_after)
    flags_changed = {k: [fb.get(k), fa.get(k)] for k in sorted(set(fb) | set(fa)) if fb.get(k) != fa.get(k)}
    return {"kind": kind, "down": utc(down), "up": utc(up), "flags_before": " ".join(flags_before),
            "flags_after": " ".join(flags_after), "changed": changed, "flags_changed": flags_changed,
            "process_start_before": before.get("process_start_time_seconds"),
            "process_start_after": after.get("process_start_time_seconds"),
            "down_seconds": round(up - down, 1), "client_view_while_down": {
                "completed": restart_stats.ok, "errors": {str(k): v for k, v in restart_stats.errors.items()}}}, up


def flag_map(flags):
    out, key = {}, None
    for f in flags:
        if f.startswith("--"):
            key = f
            out[key] = "true"
        elif key is not None:
            out[key] = f
            key = None
    return out


def with_blocks(flags, blocks):
    out = list(flags)
    i = out.index("--num-gpu-blocks-override")
    out[i + 1] = str(blocks)
    return out


def checks(phases):
    """What the phases must show for the fixture to be what it claims."""
    failed = []
    for p in phases:
        v = p["engine_view"]
        if p["kind"] == "healthy":
            if v["preemptions"] > 0:
                failed.append(f"{p['name']}: {v['preemptions']:.0f} preemptions in a healthy phase")
            if v["kv_usage_max"] >= 0.6:
                failed.append(f"{p['name']}: KV usage reached {v['kv_usage_max']:.0%} in a healthy phase")
        else:
            if v["preemptions"] <= 0:
                failed.append(f"{p['name']}: no preemption")
            if v["kv_usage_max"] < 0.9:
                failed.append(f"{p['name']}: KV usage only reached {v['kv_usage_max']:.0%}")
    return failed


async def programme(args, engine, manifest):
    state = State()
    flags_a = args.flags
    flags_b = with_blocks(flags_a, args.pressure_blocks)
    engine.start(flags_a)
    first_up = await engine.wait_up(args.url)
    manifest["window"] = {"start": utc(first_up)}
    conn = aiohttp.TCPConnector(limit=0, force_close=True)  # no connection outlives a restart
    async with aiohttp.ClientSession(connector=conn) as session:
        tasks = [asyncio.create_task(client(session, args, state, i)) for i in range(LOAD_M.clients)]
        tasks.append(asyncio.create_task(sampler(args, state)))
        state.running.set()
        log(f"warm-up for {args.warmup_seconds}s")
        await asyncio.sleep(args.warmup_seconds)
        blocks_a = flag_map(flags_a)["--num-gpu-blocks-override"]
        manifest["phases"].append(await phase(
            args, state, "steady-1", "healthy", None, [],
            f"load M ({LOAD_WHAT}) against {blocks_a} KV blocks: fits comfortably", args.phase_seconds))
        r, _ = await restart(args, state, engine, "restart", flags_a, flags_a)
        manifest["restarts"].append(r)
        manifest["phases"].append(await phase(
            args, state, "steady-2", "healthy", "steady-1", [],
            "the same load M right after a restart with identical flags (a restart that changes nothing)",
            args.phase_seconds))
        r, _ = await restart(args, state, engine, "config-change", flags_a, flags_b)
        manifest["restarts"].append(r)
        manifest["phases"].append(await phase(
            args, state, "pressure", "incident", "steady-2", ["kv-cache-pressure", "recompute-thrashing"],
            f"the same load M right after a restart with --num-gpu-blocks-override {args.pressure_blocks} "
            f"(was {blocks_a}): it no longer fits in the KV cache, sequences are preempted",
            args.phase_seconds))
        state.running.clear()
        state.done = True
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(args.tail_seconds)  # a few more scrapes of the idle engine
    manifest["window"]["end"] = utc(time.time())
    ok, text = await asyncio.to_thread(http_ok, f"{args.url}/metrics", 10)
    if ok:
        with open(args.last_scrape, "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine-cmd", required=True, help="JSON list: the command before the flags")
    ap.add_argument("--flags", required=True, help="JSON list: the engine's flags (with --num-gpu-blocks-override)")
    ap.add_argument("--pressure-blocks", type=int, default=40)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--phase-seconds", type=int, default=240)
    ap.add_argument("--warmup-seconds", type=int, default=30)
    ap.add_argument("--tail-seconds", type=int, default=15)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--last-scrape", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--engine", default="{}", help="JSON object describing the engine, copied into the manifest")
    ap.add_argument("--engine-nice", type=int, default=-5,
                    help="niceness added to the engine's processes (-5: the background jobs of a shared machine, "
                         "builds at nice 10, do not slow its steps and fake a decode slowdown; 0: none)")
    args = ap.parse_args()
    args.engine_cmd = json.loads(args.engine_cmd)
    args.flags = json.loads(args.flags)
    args.url = f"http://127.0.0.1:{args.port}"

    engine = Engine(args)
    manifest = {
        "description": "The events run of scripts/real-engine.sh --events: one vLLM engine scraped by one "
                       "Prometheus (one job and instance throughout), restarted twice under the same load; "
                       "times are UTC. `window` is the exported range; `restarts[].down` is when the engine "
                       "was sent SIGTERM, `up` when its /metrics answered again.",
        "engine": json.loads(args.engine) | {"instance": f"127.0.0.1:{args.port}", "processes": engine.processes},
        "phase_seconds": args.phase_seconds,
        "phases": [],
        "restarts": [],
    }

    def cleanup():
        engine.kill()

    run_lab("events", args.manifest, manifest, lambda: programme(args, engine, manifest), lambda: checks(manifest["phases"]), cleanup)


if __name__ == "__main__":
    main()
