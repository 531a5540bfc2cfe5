"""The power_of_two programme of the real-engine lab: two vLLM replicas behind vLLM's router with
`--policy power_of_two` and health checks every 5 s, clients streaming 70% of their requests to the
router, scraped every 15 s. What it is for: traffic that is not users' (the policy's load probes, which
vLLM answers 404 on a route it does not serve), counters the router and the engine create at their first
event already holding a value, and the router's counting paused while one worker is healthy.

Usage: python power2.py --engine-cmd JSON --flags JSON --ports P0,P1 --cores 0,1
                        --router-cmd PATH --router-port R --router-metrics-port M
                        --manifest OUT.json --last-scrape OUT.txt --log-dir DIR
                        [--phase-seconds 120] [--engine JSON]

scripts/real-engine.sh --power2 starts a Prometheus scraping both replicas (job vllm) and the router's
metrics port (job vllm-router) every 15 s first, then runs this.

Phases, the truth in the manifest:
  healthy-1  light load (6 clients, 70% of requests streamed): the false-alarm test;
  overload   90 clients without think time: the engines queue (the router is not the cause);
  healthy-2  light load again;
  burst      light load; 40 s in, a burst of requests with max_tokens past the context, sent straight
             to replica 0, which answers each 400: that engine's first 4xx ever on that route, so its
             series is created mid-window already holding a value; the manifest has the exact count;
  killed     light load; 20 s in, replica 1 is killed (SIGKILL) and stays down for the phase: the
             router's failures, retries and circuit transitions appear at their first event, and
             with one healthy worker it stops counting processed requests and policy decisions;
  healthy-3  replica 1 restarted (same flags); light load;
  idle       no clients at all: only the policy's probes and the health checks reach the engines.

Exit codes: 0 when the phases came out as intended, 3 when they did not (the manifest still written,
with "checks" saying what failed); 1 on any other failure.
"""
import argparse
import asyncio
import json
import os
import random
import sys
import time
import zlib

import aiohttp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drive import log, run_lab, utc  # noqa: E402
from events import http_ok  # noqa: E402
from fleet import Replica, sampler  # noqa: E402
from router import WORDS, ClientStats, Router, State, router_delta  # noqa: E402


class Mixed:
    """Clients whose requests are streamed with probability `streamed` (chat clients stream)."""

    def __init__(self, clients, words, max_tokens, think, streamed=0.7):
        self.clients, self.words, self.max_tokens, self.think, self.streamed = clients, words, max_tokens, think, streamed

    def describe(self):
        return {"clients": self.clients, "prompt_words": self.words, "max_tokens": self.max_tokens,
                "think_seconds": self.think, "streamed_share": self.streamed}


LIGHT = Mixed(clients=6, words=48, max_tokens=32, think=0.5)
HEAVY = Mixed(clients=90, words=48, max_tokens=96, think=0.0)


def engine_http(url):
    """The engine's http_requests_total per (handler, status), from its /metrics page."""
    ok, text = http_ok(f"{url}/metrics", timeout=5)
    if not ok:
        return None
    out = {}
    for line in text.splitlines():
        if not line.startswith("http_requests_total{"):
            continue
        labels, value = line.rsplit(" ", 1)
        handler = labels.split('handler="', 1)[1].split('"', 1)[0]
        status = labels.split('status="', 1)[1].split('"', 1)[0]
        out[f"{handler} {status}"] = out.get(f"{handler} {status}", 0.0) + float(value)
    return out


def http_delta(before, after):
    if before is None or after is None:
        return None
    keys = sorted(set(before) | set(after))
    return {k: after.get(k, 0.0) - before.get(k, 0.0) for k in keys if after.get(k, 0.0) != before.get(k, 0.0)}


async def send(session, url, model, load, rng, stats):
    stream = rng.random() < load.streamed
    body = {"model": model, "prompt": " ".join(rng.choice(WORDS) for _ in range(load.words)),
            "max_tokens": load.max_tokens, "ignore_eos": True, "stream": stream, "temperature": 0.0}
    t = time.time()
    try:
        async with session.post(f"{url}/v1/completions", json=body, timeout=aiohttp.ClientTimeout(total=120)) as resp:
            first = None
            async for _ in resp.content.iter_any():
                if first is None:
                    first = time.time() - t
            if resp.status == 200:
                stats.ok += 1
                stats.first.append(first if first is not None else time.time() - t)
                stats.total.append(time.time() - t)
            else:
                stats.status(resp.status)
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        stats.status(type(e).__name__)


async def worker(session, args, state, router, name, load, generation, seed):
    rng = random.Random(seed)
    while not state.done and state.generation == generation:
        await send(session, router.url, args.model, load, rng, state.stats[name])
        if load.think:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * load.think)


async def bad_burst(session, replica, model, count):
    """`count` completions with max_tokens past the context, straight to one engine: each a 400."""
    body = {"model": model, "prompt": "alpha bravo", "max_tokens": 4000, "temperature": 0.0}
    statuses = {}

    async def one():
        try:
            async with session.post(f"{replica.url}/v1/completions", json=body, timeout=aiohttp.ClientTimeout(total=30)) as r:
                await r.read()
                statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
        except (aiohttp.ClientError, asyncio.TimeoutError) as e:
            statuses[type(e).__name__] = statuses.get(type(e).__name__, 0) + 1

    for i in range(0, count, 10):
        await asyncio.gather(*(one() for _ in range(min(10, count - i))))
    return statuses


async def phase(args, state, router, replicas, session, name, kind, seconds, what, groups, expect=(), during=None):
    before = {r.index: await asyncio.to_thread(engine_http, r.url) for r in replicas}
    rbefore = await asyncio.to_thread(router.view)
    state.stats = {g: ClientStats() for g, _ in groups}
    state.views = {r.index: {"kv": [], "waiting_max": 0.0, "running_max": 0.0} for r in replicas}
    state.generation += 1
    gen = state.generation
    start = time.time()
    log(f"phase {name} ({kind}) for {seconds}s: {what}")
    tasks = [asyncio.create_task(worker(session, args, state, router, g, load, gen, zlib.crc32(f"power2/{name}/{g}/{i}".encode())))
             for g, load in groups for i in range(load.clients)]
    extra = {}
    if during is not None:
        extra = await during(start) or {}
    await asyncio.sleep(max(0, start + seconds - time.time()))
    end = time.time()
    state.generation += 1
    after = {r.index: await asyncio.to_thread(engine_http, r.url) for r in replicas}
    rafter = await asyncio.to_thread(router.view)
    views, state.views = state.views, None
    entry = {"name": name, "kind": kind, "start": utc(start), "end": utc(end), "what": what,
             "router_flags": " ".join(router.flags), "load": {g: load.describe() for g, load in groups},
             "expect_first": list(expect),
             "client_view": {g: s.summary() for g, s in state.stats.items()},
             "router_view": router_delta(rbefore, rafter, replicas),
             "engine_http": {r.instance: http_delta(before[r.index], after[r.index]) for r in replicas},
             "engine_view": {r.instance: {"waiting_max": views[r.index]["waiting_max"], "running_max": views[r.index]["running_max"]}
                             for r in replicas},
             "machine_load_average": round(os.getloadavg()[0], 2)} | extra
    log(f"phase {name} done: clients {json.dumps(entry['client_view'])} engines {json.dumps(entry['engine_http'])}")
    await asyncio.gather(*tasks, return_exceptions=True)
    return entry


def checks(phases, replicas):
    failed = []
    by = {p["name"]: p for p in phases}
    o = by.get("overload")
    if o and max(v["waiting_max"] for v in o["engine_view"].values()) < 5:
        failed.append("overload: no engine held 5 or more requests waiting")
    b = by.get("burst")
    if b and not (b.get("burst") or {}).get("statuses", {}).get("400"):
        failed.append("burst: no request was answered 400")
    k = by.get("killed")
    if k:
        w = ((k.get("router_view") or {}).get("workers") or {}).get(replicas[1].instance, {})
        if not w.get("cb_failures"):
            failed.append("killed: the router counted no failure of the killed replica")
    i = by.get("idle")
    if i and not any(any(key.startswith("none ") for key in (v or {})) for v in i["engine_http"].values()):
        failed.append("idle: the engines counted no request on an unmatched route (the policy's probes)")
    return failed


async def programme(args, replicas, manifest):
    state = State()
    router = Router(args, replicas)
    manifest["router"] = {"version": args.router_version, "runs": router.runs, "url": router.url, "metrics": router.metrics_url}
    for r in replicas:
        r.start()
        await r.wait_up()
        r.up = True
    flags = ["--policy", "power_of_two", "--health-check-interval-secs", "5"]
    router.start(flags)
    await router.wait_up()
    manifest["window"] = {"start": utc(time.time())}
    P = args.phase_seconds
    r0, r1 = replicas
    bg = [asyncio.create_task(sampler(replicas, state))]
    light = [("light", LIGHT)]
    phases = manifest["phases"]

    async def burst(start):
        await asyncio.sleep(40)
        t = time.time()
        statuses = await bad_burst(session, r0, args.model, args.burst)
        log(f"burst to replica 0: {statuses}")
        return {"burst": {"replica": r0.instance, "sent": args.burst, "statuses": statuses, "started": utc(t),
                          "ended": utc(time.time()), "route": "/v1/completions",
                          "how": "completions with max_tokens 4000 past --max-model-len 1024, straight to the engine, 10 at a time"}}

    async def kill(start):
        await asyncio.sleep(20)
        t = r1.kill()
        return {"killed": {"replica": r1.instance, "at": utc(t), "how": "SIGKILL to the replica's session; not restarted in this phase"}}

    plan = [
        ("healthy-1", "healthy", "light load through the router (power_of_two), 70% of requests streamed", light, [], None),
        ("overload", "incident", f"{HEAVY.clients} clients without think time ({HEAVY.max_tokens} tokens each)", [("heavy", HEAVY)],
         ["kv-cache-pressure", "load-exceeds-capacity"], None),
        ("healthy-2", "healthy", "light load again", light, [], None),
        ("burst", "incident", f"light load; 40 s in, {args.burst} requests with max_tokens past the context straight to replica 0",
         light, ["http-errors"], burst),
        ("killed", "incident", "light load; 20 s in, replica 1 killed and left down", light, ["target-down"], kill),
        ("healthy-3", "healthy", "replica 1 restarted with the same flags; light load", light, [], None),
        ("idle", "idle", "no clients: only the router's probes and health checks", [], [], None),
    ]
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:
        log(f"warm-up for {args.warmup_seconds}s")
        state.stats = {"light": ClientStats()}
        state.generation += 1
        warm = [asyncio.create_task(worker(session, args, state, router, "light", LIGHT, state.generation, i)) for i in range(LIGHT.clients)]
        await asyncio.sleep(args.warmup_seconds)
        state.generation += 1
        await asyncio.gather(*warm, return_exceptions=True)
        for name, kind, what, groups, expect, during in plan:
            if name == "healthy-3":
                r1.start()
                await r1.wait_up()
                r1.up = True
                # The router's health checks take the worker back after two successes (10 s).
                await asyncio.sleep(15)
            entry = await phase(args, state, router, replicas, session, name, kind, P, what, groups, expect, during)
            phases.append(entry)
            with open(args.manifest, "w") as f:
                json.dump(manifest, f, indent=2)
                f.write("\n")
    state.done = True
    for t in bg:
        t.cancel()
    await asyncio.gather(*bg, return_exceptions=True)
    await asyncio.sleep(args.tail_seconds)
    manifest["window"]["end"] = utc(time.time())
    ok, text = await asyncio.to_thread(http_ok, r0.url + "/metrics", 10)
    if ok:
        with open(args.last_scrape, "w") as f:
            f.write(text)
    ok, text = await asyncio.to_thread(http_ok, router.metrics_url, 10)
    if ok:
        with open(args.last_scrape + ".router", "w") as f:
            f.write(text)
    router.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine-cmd", required=True)
    ap.add_argument("--flags", required=True)
    ap.add_argument("--ports", required=True)
    ap.add_argument("--cores", default="0,1")
    ap.add_argument("--router-cmd", required=True)
    ap.add_argument("--router-version", default="")
    ap.add_argument("--router-port", type=int, required=True)
    ap.add_argument("--router-metrics-port", type=int, required=True)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--phase-seconds", type=int, default=120)
    ap.add_argument("--healthy-seconds", type=int, default=120)
    ap.add_argument("--warmup-seconds", type=int, default=30)
    ap.add_argument("--tail-seconds", type=int, default=35)
    ap.add_argument("--burst", type=int, default=60)
    ap.add_argument("--only", default="")
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--last-scrape", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--engine", default="{}")
    ap.add_argument("--engine-nice", type=int, default=-5)
    args = ap.parse_args()
    args.engine_cmd = json.loads(args.engine_cmd)
    args.flags = json.loads(args.flags)
    ports = [int(p) for p in args.ports.split(",")]
    cores = [int(c) for c in args.cores.split(",")]
    if len(ports) != 2 or len(cores) != 2:
        sys.exit("power2: give two ports and two cores")
    replicas = [Replica(args, i, p, c) for i, (p, c) in enumerate(zip(ports, cores))]
    manifest = {
        "description": "The power_of_two run of scripts/real-engine.sh --power2: two vLLM replicas of one model, each pinned "
                       "to its own core, behind vLLM's router with --policy power_of_two and health checks every 5 s; "
                       "clients send to the router only (70% of requests streamed), but for the burst, sent straight to "
                       "replica 0; Prometheus scrapes both engines (job vllm) and the router (job vllm-router) every 15 s; "
                       "times are UTC. engine_http: each engine's http_requests_total change per handler and status.",
        "engine": json.loads(args.engine) | {"replicas": [{"instance": r.instance, "core": r.core, "processes": r.processes} for r in replicas]},
        "phase_seconds": args.phase_seconds,
        "phases": [],
    }

    def cleanup():
        for r in replicas:
            r.stop()

    run_lab("power2", args.manifest, manifest, lambda: programme(args, replicas, manifest), lambda: checks(manifest["phases"], replicas), cleanup)


if __name__ == "__main__":
    main()
