"""Drives a running vLLM server through named load phases and writes a manifest of what happened when.

Usage: python drive.py --url http://127.0.0.1:PORT --model tiny-llama --phase-seconds 180
                       --gap-seconds 20 --manifest OUT.json [--only PHASE,...]

Every incident is preceded by a healthy stretch of the same length, so each incident can be
diagnosed against the healthy stretch right before it, and each healthy stretch against the healthy
stretch before it. Requests use token-id prompts (exact lengths), `ignore_eos` and a fixed
`max_tokens`, so the work per request is known. Random prompts give the prefix cache nothing to
reuse, as real diverse traffic does.
"""
import argparse
import asyncio
import datetime as dt
import json
import multiprocessing
import os
import random
import signal
import sys
import time
import zlib

import aiohttp

VOCAB_LOW, VOCAB_HIGH = 300, 4000


def utc(ts):
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def log(msg):
    print(f"[{utc(time.time())}] {msg}", file=sys.stderr, flush=True)


def run_lab(label, manifest_path, manifest, programme, checks, cleanup):
    """Run a lab programme (a coroutine function) to its end, then its own checks (a function
    returning the failed ones); always clean up and write the manifest. Exits 0, 1 when the
    programme could not run (RuntimeError), 3 when its phases did not come out as intended, 143 on
    SIGTERM. Shared by the lab scripts (events, limits, users, fleet, router)."""

    def on_term(*_):
        raise SystemExit(143)

    signal.signal(signal.SIGTERM, on_term)
    code = 0
    try:
        asyncio.run(programme())
        failed = checks()
        manifest["checks"] = {"failed": failed}
        if failed:
            log("the phases did not come out as intended:\n  " + "\n  ".join(failed))
            code = 3
    except RuntimeError as e:
        log(f"{label}: {e}")
        code = 1
    finally:
        cleanup()
        with open(manifest_path, "w") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
    sys.exit(code)


class Load:
    """What the clients of one phase send."""

    def __init__(self, clients, prompt_tokens, max_tokens, think=0.0, shared_prefix=0,
                 bad_clients=0, abort_clients=0, cpu_hogs=0):
        self.clients = clients
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.think = think
        self.shared_prefix = shared_prefix
        self.bad_clients = bad_clients
        self.abort_clients = abort_clients
        self.cpu_hogs = cpu_hogs

    def describe(self):
        d = {"clients": self.clients, "prompt_tokens": self.prompt_tokens, "max_tokens": self.max_tokens,
             "think_seconds": self.think}
        for k in ("shared_prefix", "bad_clients", "abort_clients", "cpu_hogs"):
            if getattr(self, k):
                d[k] = getattr(self, k)
        return d


LIGHT = dict(clients=4, prompt_tokens=64, max_tokens=32, think=0.5)

# name, kind, load, expected causes (rule ids, first acceptable), baseline phase, what it shows
PHASES = [
    ("healthy-1", "healthy", Load(**LIGHT), [], None, "light load: 4 clients, 64-token random prompts, 32 output tokens"),
    ("overload", "incident", Load(clients=120, prompt_tokens=64, max_tokens=32), ["load-exceeds-capacity"], "healthy-1",
     "120 clients against --max-num-seqs 32, same request shape: the queue grows (under the 160-request admission limit)"),
    ("healthy-2", "healthy", Load(**LIGHT), [], "healthy-1", "light load again"),
    ("kv-pressure", "incident", Load(clients=30, prompt_tokens=400, max_tokens=400), ["kv-cache-pressure", "recompute-thrashing"],
     "healthy-2", "30 clients with 400-token prompts and 400-token outputs against 160 KV blocks: preemptions"),
    ("healthy-3", "healthy", Load(**LIGHT), [], "healthy-2", "light load again"),
    ("slow-decode", "incident", Load(cpu_hogs=3, **LIGHT), ["slow-decode"], "healthy-3",
     "light load while 3 busy-loop processes compete for the engine's 2 cores"),
    ("healthy-4", "healthy", Load(**LIGHT), [], "healthy-3", "light load again"),
    ("http-errors", "incident", Load(bad_clients=4, abort_clients=2, **LIGHT), ["http-errors"], "healthy-4",
     "light load plus clients sending unknown model names (404) and max_tokens past the context (400), and clients that disconnect mid-stream"),
    ("prefix-shared", "healthy", Load(clients=4, prompt_tokens=480, max_tokens=32, think=0.5, shared_prefix=448), [], "healthy-4",
     "light load whose 480-token prompts share a 448-token prefix: the prefix cache serves most of each prompt"),
    ("prefix-drop", "incident", Load(clients=4, prompt_tokens=480, max_tokens=32, think=0.5), ["prefix-cache-miss"], "prefix-shared",
     "the same load with unique 480-token prompts: nothing to reuse, prefill computes every token"),
    ("healthy-5", "healthy", Load(**LIGHT), [], "healthy-4", "light load again"),
    ("rejections", "incident", Load(clients=240, prompt_tokens=64, max_tokens=32), ["requests-rejected"], "healthy-5",
     "240 clients against --max-num-queued-reqs 160: the engine refuses what does not fit in its queue"),
    ("healthy-6", "healthy", Load(**LIGHT), [], "healthy-5", "light load again"),
    ("workload-shift", "incident", Load(clients=4, prompt_tokens=320, max_tokens=32, think=0.5), ["workload-shift"], "healthy-6",
     "the same clients with prompts five times longer (320 tokens)"),
]


def hog(until):
    """A bounded busy loop: competes for CPU with the engine until `until`."""
    x = 0
    while time.time() < until:
        x = (x * 31 + 7) % 1000003


class Stats:
    def __init__(self):
        self.ok = 0
        self.errors = {}
        self.aborted = 0

    def status(self, code):
        self.errors[code] = self.errors.get(code, 0) + 1


async def one_request(session, args, load, rng, prefix, stats, kind, stop_at):
    n = load.prompt_tokens - len(prefix)
    prompt = prefix + [rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(n)]
    body = {"model": args.model, "prompt": prompt, "max_tokens": load.max_tokens, "ignore_eos": True,
            "stream": True, "temperature": 0.0}
    if kind == "bad":
        if rng.random() < 0.5:
            body["model"] = "no-such-model"  # 404
        else:
            body["max_tokens"] = 5000  # past --max-model-len: 400
    timeout = aiohttp.ClientTimeout(total=max(1.0, stop_at - time.time() + 5))
    try:
        async with session.post(f"{args.url}/v1/completions", json=body, timeout=timeout) as resp:
            if resp.status != 200:
                await resp.read()
                stats.status(resp.status)
                return
            chunks = 0
            async for _ in resp.content:
                chunks += 1
                if kind == "abort" and chunks >= 4:
                    stats.aborted += 1
                    resp.close()
                    return
                if time.time() > stop_at + 2:
                    resp.close()
                    return
            stats.ok += 1
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        stats.status(type(e).__name__)


async def client(session, args, load, seed, kind, stop_at, stats):
    rng = random.Random(seed)
    prefix_rng = random.Random(12345)
    prefix = [prefix_rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(load.shared_prefix)]
    while time.time() < stop_at:
        await one_request(session, args, load, rng, prefix, stats, kind, stop_at)
        if load.think:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * load.think)
        if kind == "bad":
            await asyncio.sleep(rng.uniform(0.1, 0.4))


async def run_phase(args, name, load, seconds):
    stop_at = time.time() + seconds
    stats = Stats()
    hogs = [multiprocessing.Process(target=hog, args=(stop_at,), daemon=True) for _ in range(load.cpu_hogs)]
    for h in hogs:
        h.start()
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:
        tasks = [client(session, args, load, zlib.crc32(f'{name}/{i}'.encode()), "normal", stop_at, stats) for i in range(load.clients)]
        tasks += [client(session, args, load, zlib.crc32(f'{name}/bad/{i}'.encode()), "bad", stop_at, stats) for i in range(load.bad_clients)]
        tasks += [client(session, args, load, zlib.crc32(f'{name}/abort/{i}'.encode()), "abort", stop_at, stats) for i in range(load.abort_clients)]
        try:
            await asyncio.wait_for(asyncio.gather(*tasks), timeout=seconds + 10)
        except asyncio.TimeoutError:
            pass
    for h in hogs:
        h.join(timeout=5)
    return stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--phase-seconds", type=int, default=180)
    ap.add_argument("--gap-seconds", type=int, default=20)
    ap.add_argument("--warmup-seconds", type=int, default=60)
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--engine", default="{}", help="JSON object describing the engine, copied into the manifest")
    ap.add_argument("--only", default="", help="comma-separated phase names (for trying the lab out)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))

    manifest = {
        "description": "Phases a real vLLM engine was driven through by scripts/real-engine.sh; times are UTC.",
        "engine": json.loads(args.engine),
        "phase_seconds": args.phase_seconds,
        "phases": [],
    }
    log(f"warm-up for {args.warmup_seconds}s")
    asyncio.run(run_phase(args, "warmup", Load(**LIGHT), args.warmup_seconds))
    time.sleep(args.gap_seconds)
    for name, kind, load, expect, baseline, what in PHASES:
        if only and name not in only:
            continue
        start = time.time()
        log(f"phase {name} ({kind}) for {args.phase_seconds}s: {what}")
        stats = asyncio.run(run_phase(args, name, load, args.phase_seconds))
        end = start + args.phase_seconds
        entry = {"name": name, "kind": kind, "start": utc(start), "end": utc(end), "what": what,
                 "load": load.describe(), "expect_first": expect, "baseline_phase": baseline,
                 "client_view": {"completed": stats.ok, "aborted_by_client": stats.aborted,
                                 "errors": {str(k): v for k, v in sorted(stats.errors.items(), key=lambda kv: str(kv[0]))}}}
        manifest["phases"].append(entry)
        log(f"phase {name} done: {entry['client_view']}")
        with open(args.manifest, "w") as f:
            json.dump(manifest, f, indent=2)
            f.write("\n")
        # Let the engine drain whatever the phase left queued before the next phase starts.
        time.sleep(max(0, end + args.gap_seconds - time.time()))


if __name__ == "__main__":
    main()
