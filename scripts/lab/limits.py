"""The limits programme of the real-engine lab: one vLLM engine, restarted with the flags that make
each of its limits bind on purpose, with the truth in the manifest.

Usage: python limits.py --engine-cmd JSON --flags JSON --port PORT
                        --manifest OUT.json --last-scrape OUT.txt --log-dir DIR
                        [--phase-seconds 180] [--engine JSON]

scripts/real-engine.sh --limits starts Prometheus first (scraping the engine's port every 5 s, so
one job and instance throughout) and runs this, which owns the engine process. Each limit phase
comes right after a healthy stretch at light load on the same engine process (its baseline), and
each engine is started with the flags that make the next limit bind:

  engine 1  --max-num-seqs 4 (160 KV blocks: plenty of room for 4 short sequences)
    healthy-1     light load (2 clients, 64-token prompts, 32 output tokens, ~0.5 s think time)
    seq-cap       24 clients of short requests: running pinned at 4, a queue, KV low
  engine 2  --max-num-batched-tokens 256 --enable-chunked-prefill, 2048 KV blocks
    healthy-2     light load
    token-budget  24 clients with 900-token prompts, 32 output tokens: every step is filled to the
                  256-token budget by prefill chunks, requests wait, running stays under
                  --max-num-seqs and KV low
  engine 3  the main lab's flags (160 KV blocks, --max-num-seqs 32)
    healthy-3     light load
    kv-cache      30 clients with 400-token prompts and 400-token outputs (the main lab's
                  kv-pressure): preemptions
    healthy-4     light load
    stalled       the engine-core process (and its worker) stopped with SIGSTOP for the whole
                  phase while the clients keep sending (8 closed-loop clients plus one new request
                  a second), then SIGCONT; the API server keeps answering /metrics
    healthy-5     light load
    idle          no clients at all

Between phases the programme waits for what the phase left under way to finish (at most 150 s).
Every 5 s the engine's own /metrics is read, so the manifest records what the engine itself said
per phase (running and waiting maxima, KV usage, preemptions, tokens per engine step).

Exit codes: 0 when the phases came out as intended, 3 when they did not (the manifest is still
written, with `"checks"` saying what failed); 1 on any other failure.
"""
import argparse
import asyncio
import json
import os
import random
import signal
import sys
import time
import zlib

import aiohttp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drive import VOCAB_LOW, VOCAB_HIGH, Load, Stats, log, run_lab, utc  # noqa: E402
from events import SAMPLE_RE, Engine, flag_map, http_ok, parse_metrics, post  # noqa: E402

LIGHT = Load(clients=2, prompt_tokens=64, max_tokens=32, think=0.5)
LIGHT_WHAT = "light load: 2 clients, random 64-token prompts, 32 output tokens, ~0.5 s think time"
SEQ_CAP = Load(clients=24, prompt_tokens=64, max_tokens=64, think=0.0)
BUDGET = Load(clients=24, prompt_tokens=900, max_tokens=32, think=0.0)
KV = Load(clients=30, prompt_tokens=400, max_tokens=400, think=0.0)
STALL = Load(clients=8, prompt_tokens=64, max_tokens=32, think=0.2)
IDLE = Load(clients=0, prompt_tokens=0, max_tokens=0)
SEQ_CAP_SEQS = 4
BUDGET_TOKENS = 256
BUDGET_BLOCKS = 2048
# The iteration-tokens histogram's (128, 256] bucket, recorded per phase for reference only: vLLM V1
# counts a chunked prompt in the step that finishes it, so this bucket does not hold the steps at the
# budget (see checks()); the mean tokens per step does.
BUDGET_BUCKET = (128.0, 256.0)


def with_flag(flags, name, value=None):
    """`flags` with `name` set to `value` (added when absent; a bare switch when value is None)."""
    out = list(flags)
    if name in out:
        i = out.index(name)
        if value is not None:
            out[i + 1] = str(value)
        return out
    return out + ([name] if value is None else [name, str(value)])


def engine_flags(base, kind):
    if kind == "seq-cap":
        return with_flag(base, "--max-num-seqs", SEQ_CAP_SEQS)
    if kind == "token-budget":
        f = with_flag(base, "--max-num-batched-tokens", BUDGET_TOKENS)
        f = with_flag(f, "--enable-chunked-prefill")
        return with_flag(f, "--num-gpu-blocks-override", BUDGET_BLOCKS)
    return list(base)


def read_page(text):
    """parse_metrics' view of a /metrics page plus the counters and histogram this programme needs."""
    out = parse_metrics(text)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        try:
            v = float(value)
        except ValueError:
            continue
        if name in ("vllm:generation_tokens_total", "vllm:prompt_tokens_total",
                    "vllm:iteration_tokens_total_count", "vllm:iteration_tokens_total_sum"):
            out[name] = out.get(name, 0.0) + v
        elif name == "vllm:iteration_tokens_total_bucket":
            for le in BUDGET_BUCKET:
                if f'le="{le}"' in labels:
                    key = f"steps_le_{int(le)}"
                    out[key] = out.get(key, 0.0) + v
    return out


def page(url, timeout=10):
    ok, text = http_ok(f"{url}/metrics", timeout=timeout)
    return read_page(text) if ok else None


def delta(before, after, key):
    if before is None or after is None or key not in after:
        return None
    return after.get(key, 0.0) - before.get(key, 0.0)


class State:
    def __init__(self):
        self.done = False
        self.generation = 0
        self.stats = Stats()
        self.view = None
        self.inflight = set()


async def closed_client(session, args, state, load, generation, seed):
    rng = random.Random(seed)
    while not state.done and state.generation == generation:
        prompt = [rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(load.prompt_tokens)]
        body = {"model": args.model, "prompt": prompt, "max_tokens": load.max_tokens, "ignore_eos": True,
                "stream": False, "temperature": 0.0}
        req = asyncio.create_task(post(session, f"{args.url}/v1/completions", body))
        state.inflight.add(req)
        try:
            status = await req
        finally:
            state.inflight.discard(req)
        if status == 200:
            state.stats.ok += 1
        else:
            state.stats.status(status)
        if load.think:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * load.think)


async def open_sender(session, args, state, load, generation, seed, per_second):
    """One new request every 1/per_second seconds whatever happened to the earlier ones: arrivals
    that go on while the engine does not answer."""
    rng = random.Random(seed)

    async def one():
        prompt = [rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(load.prompt_tokens)]
        body = {"model": args.model, "prompt": prompt, "max_tokens": load.max_tokens, "ignore_eos": True,
                "stream": False, "temperature": 0.0}
        status = await post(session, f"{args.url}/v1/completions", body)
        if status == 200:
            state.stats.ok += 1
        else:
            state.stats.status(status)

    while not state.done and state.generation == generation:
        t = asyncio.create_task(one())
        state.inflight.add(t)
        t.add_done_callback(state.inflight.discard)
        await asyncio.sleep(1.0 / per_second)


def start_clients(session, args, state, name, load, open_rate=0.0):
    state.generation += 1
    gen = state.generation
    tasks = [asyncio.create_task(closed_client(session, args, state, load, gen, zlib.crc32(f"limits/{name}/{i}".encode())))
             for i in range(load.clients)]
    if open_rate:
        tasks.append(asyncio.create_task(open_sender(session, args, state, load, gen,
                                                     zlib.crc32(f"limits/{name}/open".encode()), open_rate)))
    return tasks


async def sampler(args, state):
    """Reads the engine's /metrics every 5 s into the current phase's view."""
    while not state.done:
        view = state.view
        if view is not None:
            m = await asyncio.to_thread(page, args.url, 5)
            if m is not None and state.view is view:
                view["kv"].append(m.get("vllm:kv_cache_usage_perc", 0.0))
                view["running"].append(m.get("vllm:num_requests_running", 0.0))
                view["waiting"].append(m.get("vllm:num_requests_waiting", 0.0))
        await asyncio.sleep(5)


def engine_core_pids(api_pid):
    """The engine-core process of the API server `api_pid` and its descendants (its workers): the
    child whose command line names EngineCore (vLLM sets the process title), or else every process in
    the server's process group but the server itself and multiprocessing's resource tracker."""
    procs = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        procs[int(d)] = {"ppid": int(fields[1]), "pgid": int(fields[2]), "cmd": cmd}
    core = [p for p, v in procs.items() if v["ppid"] == api_pid and "EngineCore" in v["cmd"]]
    if not core:
        core = [p for p, v in procs.items() if v["pgid"] == api_pid and p != api_pid
                and v["ppid"] == api_pid and "resource_tracker" not in v["cmd"]]
    out, todo = [], list(core)
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, v in procs.items() if v["ppid"] == p]
    return sorted(out), {p: procs[p]["cmd"] for p in out}


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


async def drain(args, state, tasks, limit=150):
    """Stop the phase's clients after their current request and wait (at most `limit` s) until the
    engine has nothing running or waiting."""
    state.generation += 1
    t0 = time.time()
    deadline = t0 + limit
    if tasks:
        await asyncio.wait(tasks, timeout=limit)
    while time.time() < deadline:
        m = await asyncio.to_thread(page, args.url, 5)
        idle = m is not None and m.get("vllm:num_requests_running", 0.0) == 0 and m.get("vllm:num_requests_waiting", 0.0) == 0
        if idle and not state.inflight:
            return round(time.time() - t0, 1)
        await asyncio.sleep(2)
    log(f"drain: the engine was still busy {limit} s after the phase")
    return None


async def phase(args, state, session, engine, p):
    """One phase: its clients (and for the stalled phase, the SIGSTOP/SIGCONT), and what the engine
    and the clients saw."""
    name, kind, load = p["name"], p["kind"], p["load"]
    state.stats = Stats()
    before = await asyncio.to_thread(page, args.url)
    state.view = {"kv": [], "running": [], "waiting": []}
    start = time.time()
    log(f"phase {name} ({kind}) for {args.phase_seconds}s: {p['what']}")
    tasks = start_clients(session, args, state, name, load, p.get("open_rate", 0.0)) if load.clients else []
    extra = {}
    if kind == "stalled":
        await asyncio.sleep(args.stall_lead_seconds)  # the clients' requests are under way when it stops
        pids, cmds = engine_core_pids(engine.proc.pid)
        if not pids:
            raise RuntimeError(f"no engine-core process found under the API server (pid {engine.proc.pid})")
        signal_all(pids, signal.SIGSTOP)
        stopped = time.time()
        log(f"SIGSTOP to {pids} ({cmds})")
        # The API server may still be taking in outputs the engine core sent just before it stopped:
        # the counters are read for the "while stopped" deltas once those are in.
        await asyncio.sleep(3)
        stopped_before = await asyncio.to_thread(page, args.url)
        await asyncio.sleep(max(0, start + args.phase_seconds - time.time()))
        stopped_after = await asyncio.to_thread(page, args.url)  # the API server still answers
        signal_all(list(reversed(pids)), signal.SIGCONT)
        resumed = time.time()
        log(f"SIGCONT to {pids}")
        extra["stall"] = {"pids": pids, "commands": {str(k): v for k, v in cmds.items()},
                          "stopped": utc(stopped), "resumed": utc(resumed),
                          "api_server_answered": stopped_after is not None,
                          "frozen_gauges": {k: (stopped_after or {}).get(k) for k in
                                            ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc")},
                          "generation_tokens_while_stopped": delta(stopped_before, stopped_after, "vllm:generation_tokens_total"),
                          "requests_finished_while_stopped": delta(stopped_before, stopped_after, "vllm:request_success_total")}
    else:
        await asyncio.sleep(max(0, start + args.phase_seconds - time.time()))
    end = time.time()
    after = await asyncio.to_thread(page, args.url)
    view, stats = state.view, state.stats
    state.view = None
    kv = view["kv"] or [0.0]
    running = view["running"] or [0.0]
    flags = flag_map(p["flags"])
    seqs = float(flags.get("--max-num-seqs", 0))
    steps = delta(before, after, "vllm:iteration_tokens_total_count")
    at_budget = None
    if steps:
        lo, hi = (delta(before, after, f"steps_le_{int(le)}") for le in BUDGET_BUCKET)
        at_budget = round((hi - lo) / steps, 4) if lo is not None and hi is not None else None
    tokens = delta(before, after, "vllm:iteration_tokens_total_sum")
    entry = {"name": name, "kind": kind, "start": utc(start), "end": utc(end), "what": p["what"],
             "load": load.describe() | ({"open_loop_per_second": p["open_rate"]} if p.get("open_rate") else {}),
             "expect_first": p["expect_first"], "expect_binding": p["expect_binding"],
             "baseline_phase": p["baseline"], "flags": " ".join(p["flags"]),
             "limits": {"max_num_seqs": flags.get("--max-num-seqs"),
                        "max_num_batched_tokens": flags.get("--max-num-batched-tokens"),
                        "num_gpu_blocks": flags.get("--num-gpu-blocks-override")},
             "client_view": {"completed": stats.ok,
                             "errors": {str(k): v for k, v in sorted(stats.errors.items(), key=lambda kv: str(kv[0]))}},
             "engine_view": {
                 "running_max": max(running), "running_at_cap_share": round(sum(r >= seqs for r in running) / len(running), 4) if seqs else None,
                 "waiting_max": max(view["waiting"] or [0.0]),
                 "kv_usage_max": round(max(kv), 4), "kv_usage_mean": round(sum(kv) / len(kv), 4),
                 "preemptions": delta(before, after, "vllm:num_preemptions_total"),
                 "requests_finished": delta(before, after, "vllm:request_success_total"),
                 "generation_tokens": delta(before, after, "vllm:generation_tokens_total"),
                 "engine_steps": steps, "tokens_per_step_mean": round(tokens / steps, 1) if steps and tokens is not None else None,
                 "steps_at_budget_share": at_budget,
                 "samples": len(view["kv"])},
             "machine_load_average": round(os.getloadavg()[0], 2)} | extra
    log(f"phase {name} done: {json.dumps(entry['client_view'])} {json.dumps(entry['engine_view'])}")
    entry["drained_seconds"] = await drain(args, state, tasks)
    return entry


def plan(args):
    """The engines and their phases, in order: (flags, [phase, ...])."""
    base = args.flags
    seq, budget = engine_flags(base, "seq-cap"), engine_flags(base, "token-budget")

    def healthy(name, baseline, flags):
        return {"name": name, "kind": "healthy", "load": LIGHT, "what": LIGHT_WHAT, "expect_first": [],
                "expect_binding": "none", "baseline": baseline, "flags": flags}

    return [
        (seq, [
            healthy("healthy-1", None, seq),
            {"name": "seq-cap", "kind": "seq-cap", "load": SEQ_CAP, "flags": seq,
             "what": f"24 clients of short requests (64-token prompts, 64 output tokens) against --max-num-seqs "
                     f"{SEQ_CAP_SEQS} with 160 KV blocks: running pinned at {SEQ_CAP_SEQS}, a queue, KV low",
             "expect_first": ["load-exceeds-capacity"], "expect_binding": "max-num-seqs", "baseline": "healthy-1"},
        ]),
        (budget, [
            healthy("healthy-2", "healthy-1", budget),
            {"name": "token-budget", "kind": "token-budget", "load": BUDGET, "flags": budget,
             "what": f"24 clients with 900-token prompts and 32 output tokens against --max-num-batched-tokens "
                     f"{BUDGET_TOKENS} (chunked prefill) and {BUDGET_BLOCKS} KV blocks: every step is filled to the "
                     "budget, requests wait, running stays under --max-num-seqs, KV low",
             "expect_first": ["load-exceeds-capacity"], "expect_binding": "max-num-batched-tokens", "baseline": "healthy-2"},
        ]),
        (base, [
            healthy("healthy-3", "healthy-2", base),
            {"name": "kv-cache", "kind": "kv-cache", "load": KV, "flags": base,
             "what": "30 clients with 400-token prompts and 400-token outputs against 160 KV blocks: preemptions",
             "expect_first": ["kv-cache-pressure", "recompute-thrashing"], "expect_binding": "kv-cache", "baseline": "healthy-3"},
            healthy("healthy-4", "healthy-3", base),
            {"name": "stalled", "kind": "stalled", "load": STALL, "flags": base, "open_rate": 1.0,
             "what": f"8 closed-loop clients (64-token prompts, 32 output tokens, ~0.2 s think time) plus one new request "
                     f"a second; {args.stall_lead_seconds} s in, the engine-core process is stopped (SIGSTOP) until the "
                     "phase's end, then continued (SIGCONT)",
             "expect_first": ["stalled-engine"], "expect_binding": "stalled", "baseline": "healthy-4"},
            healthy("healthy-5", "healthy-4", base),
            {"name": "idle", "kind": "idle", "load": IDLE, "flags": base, "what": "no clients at all",
             "expect_first": [], "expect_binding": "none", "baseline": "healthy-5"},
        ]),
    ]


def checks(phases):
    """What the phases must show for the fixture to be what it claims."""
    failed = []
    for p in phases:
        v, k, n = p["engine_view"], p["kind"], p["name"]
        seqs = float(p["limits"]["max_num_seqs"] or 0)
        if k in ("healthy", "seq-cap", "token-budget", "idle") and (v["preemptions"] or 0) > 0:
            failed.append(f"{n}: {v['preemptions']:.0f} preemptions")
        if k in ("healthy", "seq-cap", "token-budget", "idle") and v["kv_usage_max"] >= 0.6:
            failed.append(f"{n}: KV usage reached {v['kv_usage_max']:.0%}")
        if k in ("healthy", "token-budget", "kv-cache") and seqs and v["running_max"] >= seqs:
            failed.append(f"{n}: running reached --max-num-seqs {seqs:.0f}")
        if k == "healthy" and v["waiting_max"] >= 2:
            failed.append(f"{n}: up to {v['waiting_max']:.0f} requests waited in a healthy phase")
        # 70%: the engine's own 5 s samples include the phase's first seconds (clients still
        # arriving) and short requests turning over (a slot read free between two steps); the first
        # run read 77% at the cap with up to 20 waiting.
        if k == "seq-cap" and ((v["running_at_cap_share"] or 0) < 0.7 or v["waiting_max"] < 4):
            failed.append(f"seq-cap: running at the cap in {v['running_at_cap_share']} of the samples, "
                          f"waiting at most {v['waiting_max']:.0f}: not pinned with a queue")
        # vLLM V1 records a chunked prompt's tokens in the step that finishes it, so the histogram's
        # (128, 256] bucket does not hold the steps at the budget (the first run: 72% of the steps
        # under 128 tokens, 28% over 512); their mean (sum over count) is the budget when it binds.
        if k == "token-budget" and ((v["tokens_per_step_mean"] or 0) < 0.9 * BUDGET_TOKENS or v["waiting_max"] < 1):
            failed.append(f"token-budget: {v['tokens_per_step_mean']} tokens per engine step against a budget of "
                          f"{BUDGET_TOKENS}, waiting at most {v['waiting_max']:.0f}")
        if k == "kv-cache" and ((v["preemptions"] or 0) <= 0 or v["kv_usage_max"] < 0.9):
            failed.append(f"kv-cache: {v['preemptions']} preemptions, KV usage at most {v['kv_usage_max']:.0%}")
        if k == "stalled":
            s = p.get("stall", {})
            if not s.get("api_server_answered"):
                failed.append("stalled: the API server did not answer /metrics while the engine core was stopped")
            if s.get("generation_tokens_while_stopped") != 0:
                failed.append(f"stalled: {s.get('generation_tokens_while_stopped')} tokens generated while stopped")
            if ((s.get("frozen_gauges") or {}).get("vllm:num_requests_running") or 0) < 1:
                failed.append("stalled: nothing was running when the engine core stopped (no stall to see)")
        if k == "idle" and (v["generation_tokens"] or 0) > 0:
            failed.append(f"idle: {v['generation_tokens']:.0f} tokens generated")
    return failed


async def programme(args, engine, manifest):
    state = State()
    bg = []
    conn = aiohttp.TCPConnector(limit=0, force_close=True)  # no connection outlives a restart
    async with aiohttp.ClientSession(connector=conn) as session:
        for i, (flags, phases) in enumerate(plan(args)):
            if i == 0:
                engine.start(flags)
                up = await engine.wait_up(args.url)
                manifest["window"] = {"start": utc(up)}
                bg.append(asyncio.create_task(sampler(args, state)))
            else:
                down = await engine.stop()
                engine.start(flags)
                up = await engine.wait_up(args.url)
                manifest["restarts"].append({"down": utc(down), "up": utc(up), "flags": " ".join(flags),
                                             "down_seconds": round(up - down, 1)})
            log(f"warm-up for {args.warmup_seconds}s")
            warm = start_clients(session, args, state, f"warmup-{i}", LIGHT)
            await asyncio.sleep(args.warmup_seconds)
            await drain(args, state, warm)
            for p in phases:
                manifest["phases"].append(await phase(args, state, session, engine, p))
                with open(args.manifest, "w") as f:
                    json.dump(manifest, f, indent=2)
                    f.write("\n")
        state.done = True
        for t in bg:
            t.cancel()
        await asyncio.gather(*bg, return_exceptions=True)
    await asyncio.sleep(args.tail_seconds)  # a few more scrapes
    manifest["window"]["end"] = utc(time.time())
    ok, text = await asyncio.to_thread(http_ok, f"{args.url}/metrics", 10)
    if ok:
        with open(args.last_scrape, "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine-cmd", required=True, help="JSON list: the command before the flags")
    ap.add_argument("--flags", required=True, help="JSON list: the main lab's engine flags")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--phase-seconds", type=int, default=180)
    ap.add_argument("--stall-lead-seconds", type=int, default=10)
    ap.add_argument("--warmup-seconds", type=int, default=30)
    ap.add_argument("--tail-seconds", type=int, default=15)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--last-scrape", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--engine", default="{}", help="JSON object describing the engine, copied into the manifest")
    ap.add_argument("--engine-nice", type=int, default=-5,
                    help="niceness added to the engine's processes (0: none); see events.py")
    args = ap.parse_args()
    args.engine_cmd = json.loads(args.engine_cmd)
    args.flags = json.loads(args.flags)
    args.url = f"http://127.0.0.1:{args.port}"
    if args.phase_seconds <= args.stall_lead_seconds + 30:
        sys.exit("limits: --phase-seconds must leave at least 30 s of stall after --stall-lead-seconds")

    engine = Engine(args)
    manifest = {
        "description": "The limits run of scripts/real-engine.sh --limits: one vLLM engine scraped by one "
                       "Prometheus every 5 s (one job and instance throughout), restarted with the flags that "
                       "make each limit bind; each limit phase follows a healthy stretch on the same engine "
                       "process. Times are UTC. `expect_binding` is the limit that bound in the phase (none for "
                       "healthy and idle stretches, stalled for the stopped engine core); `flags` the engine's "
                       "flags in force; `engine_view` what the engine's own /metrics said every 5 s.",
        "engine": json.loads(args.engine) | {"instance": f"127.0.0.1:{args.port}", "processes": engine.processes},
        "phase_seconds": args.phase_seconds,
        "phases": [],
        "restarts": [],
    }

    def cleanup():
        if engine.proc is not None:
            # Never leave a stopped engine core behind.
            signal_all(engine_core_pids(engine.proc.pid)[0], signal.SIGCONT)
        engine.kill()

    run_lab("limits", args.manifest, manifest, lambda: programme(args, engine, manifest), lambda: checks(manifest["phases"]), cleanup)


if __name__ == "__main__":
    main()
