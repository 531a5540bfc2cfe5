"""The router programme of the real-engine lab: two vLLM replicas of one model behind vLLM's own
router (the `vllm-router` wheel), clients sending to the router only, driven through healthy
stretches and incidents that happen in the router's hop while the engines stay healthy.

Usage: python router.py --engine-cmd JSON --flags JSON --ports P0,P1 --cores 0,1
                        --router-cmd PATH --router-port R --router-metrics-port M
                        --manifest OUT.json --last-scrape OUT.txt --log-dir DIR
                        [--phase-seconds 180] [--healthy-seconds 180] [--engine JSON]

scripts/real-engine.sh --router starts a Prometheus scraping both replicas and the router's own
metrics port every 5 s first, then runs this. Each replica runs in its own session pinned to its
own core (as in the fleet programme). The router runs in a session of its own, on no particular
core; it is restarted (same ports) before each healthy stretch whose incident needs other flags,
so each incident has a healthy stretch under the same router flags before it.

Phases, each incident after a healthy stretch, the truth in the manifest:
  healthy-1   round robin, light streamed load: the false-alarm test;
  router-cpu  the router's process moved into a CPU cgroup with a quota (cgroup v1 cpu.cfs_quota_us,
              what a Kubernetes CPU limit does): the router is the bottleneck, the engines idle;
  healthy-3   cache_aware policy, light load with diverse prompts (the policy spreads them);
  hot-prefix  cache_aware, every prompt starts with one long shared prefix: the policy pins the
              traffic on the replica that holds it; neither replica is sick;
  healthy-4   round robin with a 3 s request timeout and a circuit breaker that opens after 3
              failures and stays open 15 minutes; the light load unstreamed;
  cut-off     replica 1's engine core is stopped (SIGSTOP) for a few seconds at the start: requests
              to it time out at the router, its circuit opens, the engine resumes and is healthy, and
              the router keeps sending it nothing;
  healthy-5   round robin with a 2 s request timeout (retries on, circuit breaker off);
  retries     light load plus two clients whose requests outlast the router's timeout: the router
              times them out and sends them again, while the engines count no errors;
  healthy-6   the tail.
Light load is streamed (`"stream": true`, as chat clients do); the timeout groups are not, since the
router's request timeout is measured to cut requests that are not streamed.

Exit codes: 0 when the phases came out as intended, 3 when they did not (the manifest is still
written, with "checks" saying what failed); 1 on any other failure.
"""
import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib

import aiohttp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drive import Stats, log, run_lab, utc  # noqa: E402
from events import http_ok  # noqa: E402
from fleet import HIST, Replica, hist_totals, mean_of, sampler  # noqa: E402
from limits import engine_core_pids, signal_all  # noqa: E402

CGROUP = "/sys/fs/cgroup/cpu"
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu red green blue amber violet "
         "north south east west river stone cloud field forest harbor signal engine rocket planet").split()
HOT_PREFIX = " ".join(WORDS[(i * 7) % len(WORDS)] for i in range(240))


class Load:
    def __init__(self, clients, words, max_tokens, think=0.0, stream=True, prefix=None, stagger=0.0):
        self.clients, self.words, self.max_tokens, self.think = clients, words, max_tokens, think
        self.stream, self.prefix, self.stagger = stream, prefix, stagger

    def describe(self):
        d = {"clients": self.clients, "prompt_words": self.words, "max_tokens": self.max_tokens,
             "think_seconds": self.think, "stream": self.stream}
        if self.prefix:
            d["shared_prefix_words"] = len(self.prefix.split())
        if self.stagger:
            d["stagger_seconds"] = self.stagger
        return d


LIGHT = Load(clients=6, words=48, max_tokens=32, think=0.5)
# Staggered: the first request carries the prefix to one replica before the others ask (six at once
# would find no replica holding it and spread it over both).
# More clients than the light load (10, ~0.2 s think time): an application with one long system
# prompt ramping up, enough that the pinned replica holds several requests more than its peer.
HOT = Load(clients=10, words=16, max_tokens=32, think=0.2, prefix=HOT_PREFIX, stagger=1.0)
# Unstreamed: vLLM answers such a request's headers with its whole answer, so a request stuck in a
# stalled engine times out at the router and counts as a failure of that worker (a stream's headers
# come at once and count as a success, and the circuit never opens: measured).
UNSTREAMED = Load(clients=6, words=48, max_tokens=32, think=0.5, stream=False)
LONG = Load(clients=2, words=16, max_tokens=600, think=0.0, stream=False)


class Router:
    def __init__(self, args, replicas):
        self.args, self.replicas = args, replicas
        self.url = f"http://127.0.0.1:{args.router_port}"
        self.metrics_url = f"http://127.0.0.1:{args.router_metrics_port}/metrics"
        self.proc = None
        self.runs = []
        self.flags = []

    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self, flags):
        n = len(self.runs) + 1
        logf = open(os.path.join(self.args.log_dir, f"router-{n}.log"), "w")
        cmd = [self.args.router_cmd, "--host", "127.0.0.1", "--port", str(self.args.router_port),
               "--prometheus-host", "127.0.0.1", "--prometheus-port", str(self.args.router_metrics_port),
               "--worker-urls"] + [r.url for r in self.replicas] + flags
        env = dict(os.environ, NO_COLOR="1")
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        logf.close()
        self.flags = flags
        self.runs.append({"pid": self.proc.pid, "launched": utc(time.time()), "flags": " ".join(flags),
                          "log": os.path.basename(logf.name)})
        log(f"router started (pid {self.proc.pid}): {' '.join(flags)}")

    async def wait_up(self, limit=120):
        deadline = time.time() + limit
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the router exited with {self.proc.returncode}; see {self.args.log_dir}/{self.runs[-1]['log']}")
            ok_m, _ = await asyncio.to_thread(http_ok, self.metrics_url)
            ok_h, _ = await asyncio.to_thread(http_ok, f"{self.url}/health")
            if ok_m and ok_h:
                self.runs[-1]["up"] = utc(time.time())
                return
            await asyncio.sleep(0.5)
        raise RuntimeError(f"the router did not answer within {limit} s")

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.runs[-1]["stopped"] = utc(time.time())
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except Exception:  # noqa: BLE001
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()

    async def restart(self, flags):
        self.stop()
        # The metrics port must be free again before the next start binds it.
        for _ in range(60):
            ok, _ = await asyncio.to_thread(http_ok, self.metrics_url, 0.5)
            if not ok:
                break
            await asyncio.sleep(0.5)
        self.start(flags)
        await self.wait_up()

    def view(self):
        """The router's own counters, summed per family and worker."""
        ok, text = http_ok(self.metrics_url, timeout=5)
        if not ok:
            return None
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            try:
                key, value = line.rsplit(" ", 1)
                v = float(value)
            except ValueError:
                continue
            name = key.split("{", 1)[0]
            if name.endswith("_bucket"):
                continue
            worker = None
            if 'worker="' in key:
                worker = key.split('worker="', 1)[1].split('"', 1)[0]
            k = name + (f"@{worker}" if worker else "")
            if 'outcome="' in key:
                k += "/" + key.split('outcome="', 1)[1].split('"', 1)[0]
            out[k] = out.get(k, 0.0) + v
        return out


def router_delta(before, after, replicas):
    if not before or not after:
        return None
    d = lambda k: round(after.get(k, 0.0) - before.get(k, 0.0), 4)  # noqa: E731
    count = d("vllm_router_generate_duration_seconds_count")
    out = {"requests": d("vllm_router_requests_total"),
           "retries": d("vllm_router_retries_total"),
           "retries_exhausted": d("vllm_router_retries_exhausted_total"),
           "duration_mean_seconds": round(d("vllm_router_generate_duration_seconds_sum") / count, 4) if count > 0 else None,
           "workers": {}}
    for r in replicas:
        out["workers"][r.instance] = {
            "decisions": d(f"vllm_router_policy_decisions_total@{r.url}"),
            "processed": d(f"vllm_router_processed_requests_total@{r.url}"),
            "cb_failures": d(f"vllm_router_cb_outcomes_total@{r.url}/failure"),
            "cb_state_at_end": after.get(f"vllm_router_cb_state@{r.url}"),
            "health_at_end": after.get(f"vllm_router_worker_health@{r.url}")}
    return out


class State:
    def __init__(self):
        self.done = False
        self.generation = 0
        self.stats = {}
        self.views = None


def prompt(rng, load):
    words = " ".join(rng.choice(WORDS) for _ in range(load.words))
    return f"{load.prefix} {words}" if load.prefix else words


async def send(session, args, router, load, rng, stats):
    body = {"model": args.model, "prompt": prompt(rng, load), "max_tokens": load.max_tokens, "ignore_eos": True,
            "stream": load.stream, "temperature": 0.0}
    t = time.time()
    try:
        async with session.post(f"{router.url}/v1/completions", json=body,
                                timeout=aiohttp.ClientTimeout(total=120)) as resp:
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


class ClientStats(Stats):
    def __init__(self):
        super().__init__()
        self.first, self.total = [], []

    def summary(self):
        mean = lambda xs: round(sum(xs) / len(xs), 4) if xs else None  # noqa: E731
        return {"completed": self.ok, "errors": {str(k): c for k, c in sorted(self.errors.items(), key=lambda kv: str(kv[0]))},
                "first_bytes_mean_seconds": mean(self.first), "total_mean_seconds": mean(self.total)}


async def worker(session, args, state, router, name, load, generation, seed, index=0):
    rng = random.Random(seed)
    if load.stagger:
        await asyncio.sleep(load.stagger * index)
    while not state.done and state.generation == generation:
        await send(session, args, router, load, rng, state.stats[name])
        if load.think:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * load.think)


def cpu_seconds(pid):
    """User and system CPU time of the process (every thread), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cgroup_quota(pid, quota_us, period_us):
    """Moves `pid` (every thread of it) into the lab's cpu cgroup with the given CFS quota."""
    path = os.path.join(CGROUP, "vllm-diag-router-lab")
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
        f.write(str(period_us))
    with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
        f.write(str(quota_us))
    with open(os.path.join(path, "cgroup.procs"), "w") as f:
        f.write(str(pid))


def cgroup_release(pid):
    try:
        with open(os.path.join(CGROUP, "cgroup.procs"), "w") as f:
            f.write(str(pid))
    except OSError:
        pass


def throttled(pid):
    try:
        with open(os.path.join(CGROUP, "vllm-diag-router-lab", "cpu.stat")) as f:
            return dict(line.split() for line in f.read().splitlines())
    except OSError:
        return {}


async def phase(args, state, router, replicas, session, name, kind, baseline, seconds, what, groups,
                expect=(), expect_replica=None, during=None):
    before = {r.index: await asyncio.to_thread(hist_totals, r) for r in replicas}
    rbefore = await asyncio.to_thread(router.view)
    state.stats = {g: ClientStats() for g, _ in groups}
    state.views = {r.index: {"kv": [], "waiting_max": 0.0, "running_max": 0.0} for r in replicas}
    state.generation += 1
    gen = state.generation
    start = time.time()
    log(f"phase {name} ({kind}) for {seconds}s: {what}")
    tasks = []
    for g, load in groups:
        for i in range(load.clients):
            seed = zlib.crc32(f"router/{name}/{g}/{i}".encode())
            tasks.append(asyncio.create_task(worker(session, args, state, router, g, load, gen, seed, i)))
    extra = {}
    if during is not None:
        extra = await during(start) or {}
    await asyncio.sleep(max(0, start + seconds - time.time()))
    end = time.time()
    state.generation += 1
    after = {r.index: await asyncio.to_thread(hist_totals, r) for r in replicas}
    rafter = await asyncio.to_thread(router.view)
    views, state.views = state.views, None
    engine_view = {}
    for r in replicas:
        v, b, a = views[r.index], before[r.index], after[r.index]
        kv = v["kv"] or [0.0]
        same = b and a and b.get("process_start") == a.get("process_start")
        engine_view[r.instance] = {
            "kv_usage_max": round(max(kv), 4), "waiting_max": v["waiting_max"], "running_max": v["running_max"],
            "preemptions": (a["preemptions"] - b["preemptions"]) if same else None,
            "requests_finished": (a["finished"] - b["finished"]) if same else None,
            "ttft_mean_seconds": mean_of(b, a, HIST[0]) if same else None,
            "itl_mean_seconds": mean_of(b, a, HIST[1]) if same else None}
    entry = {"name": name, "kind": kind, "start": utc(start), "end": utc(end), "what": what,
             "router_flags": " ".join(router.flags),
             "load": {g: load.describe() for g, load in groups},
             "expect_first": list(expect), "expect_replica": expect_replica, "baseline_phase": baseline,
             "client_view": {g: s.summary() for g, s in state.stats.items()},
             "router_view": router_delta(rbefore, rafter, replicas),
             "engine_view": engine_view, "machine_load_average": round(os.getloadavg()[0], 2)} | extra
    log(f"phase {name} done: clients {json.dumps(entry['client_view'])} router {json.dumps(entry['router_view'])} "
        f"engines {json.dumps(engine_view)}")
    await asyncio.gather(*tasks, return_exceptions=True)
    return entry


def checks(phases, replicas):
    failed = []
    r0, r1 = replicas[0].instance, replicas[1].instance
    by = {p["name"]: p for p in phases}
    for p in phases:
        ev, rv = p["engine_view"], p["router_view"] or {}
        if p["kind"] == "healthy":
            for inst, v in ev.items():
                if (v["preemptions"] or 0) > 0:
                    failed.append(f"{p['name']}: {v['preemptions']:.0f} preemptions on {inst} in a healthy phase")
        if p["name"] == "router-cpu":
            h = by.get("healthy-1")
            a = (p["client_view"]["light"] or {}).get("first_bytes_mean_seconds")
            b = h and h["client_view"]["light"].get("first_bytes_mean_seconds")
            if not a or not b or a < 3 * b:
                failed.append(f"router-cpu: clients' first bytes {a} s against {b} s before: the quota did not bind")
        elif p["name"] == "hot-prefix":
            w = rv.get("workers", {})
            d = sorted((w.get(i, {}).get("decisions") or 0) for i in (r0, r1))
            if d[1] < 4 * max(1, d[0]):
                failed.append(f"hot-prefix: decisions {d}: the policy did not pin the prefix")
        elif p["name"] == "cut-off":
            w = rv.get("workers", {}).get(r1, {})
            if w.get("cb_state_at_end") != 1:
                failed.append(f"cut-off: replica 1's circuit was {w.get('cb_state_at_end')} at the end, not open (1)")
        elif p["name"] == "retries":
            if (rv.get("retries") or 0) <= 0:
                failed.append("retries: the router retried nothing")
    return failed


async def programme(args, replicas, manifest):
    state = State()
    router = Router(args, replicas)
    manifest["router"] = {"version": args.router_version, "runs": router.runs,
                          "url": router.url, "metrics": router.metrics_url}
    for r in replicas:
        r.start()
        await r.wait_up()
        r.up = True
    rr = ["--policy", "round_robin"]
    router.start(rr)
    await router.wait_up()
    manifest["window"] = {"start": utc(time.time())}
    H, P = args.healthy_seconds, args.phase_seconds
    r0, r1 = replicas
    bg = [asyncio.create_task(sampler(replicas, state))]
    light = [("light", LIGHT)]
    phases = manifest["phases"]

    async def quota(start):
        # The router's own CPU over the phase's first 10 s, unlimited, then a quota of a quarter of
        # it: the router cannot keep up with the same load. cgroup v1 takes at least 1 ms per
        # period, so a router that needs little gets a longer period instead.
        pid = router.pid()
        c0 = cpu_seconds(pid)
        await asyncio.sleep(10)
        share = (cpu_seconds(pid) - c0) / 10
        target = max(share * args.router_quota_fraction, 1e-4)
        period = 100000 if target * 100000 >= 1000 else min(1000000, int(1000 / target))
        q = max(1000, int(target * period))
        cgroup_quota(pid, q, period)
        log(f"router pid {pid} used {share:.2%} of a CPU; limited to {q} us per {period} us")
        await asyncio.sleep(max(0, start + P - 2 - time.time()))
        stat = throttled(pid)
        cgroup_release(pid)
        return {"router_cpu_limit": {"measured_share": round(share, 5), "quota_us": q, "period_us": period,
                                     "limited_from": utc(start + 10),
                                     "how": "the router's CPU measured over the phase's first 10 s, then its process moved "
                                            f"into a cgroup v1 cpu group with {args.router_quota_fraction:g} of that as its CFS quota",
                                     "cpu_stat_at_end": stat}}

    async def stop_replica(start):
        await asyncio.sleep(5)
        pids, cmds = engine_core_pids(r1.proc.pid)
        signal_all(pids, signal.SIGSTOP)
        t = time.time()
        log(f"SIGSTOP to replica 1's engine core {pids}")
        await asyncio.sleep(args.stall_seconds)
        signal_all(pids, signal.SIGCONT)
        log("SIGCONT")
        return {"stall": {"replica": r1.instance, "pids": pids, "stopped": utc(t), "continued": utc(time.time()),
                          "seconds": args.stall_seconds,
                          "how": "SIGSTOP to the engine-core process (its API server kept answering), then SIGCONT"}}

    timeout_flags = ["--policy", "round_robin", "--request-timeout-secs", "3", "--cb-failure-threshold", "3",
                     "--cb-window-duration-secs", "60", "--cb-timeout-duration-secs", "900"]
    retry_flags = ["--policy", "round_robin", "--request-timeout-secs", "2", "--disable-circuit-breaker"]
    plan = [
        (None, "healthy-1", "healthy", None, H, "light streamed load through the router (round robin)", light, [], None, None),
        (None, "router-cpu", "incident", "healthy-1", P,
         f"light load; 10 s in, the router's process limited to {args.router_quota_fraction:g} of the CPU it had used (a cgroup CPU quota)",
         light, ["router-saturated"], None, quota),
        (None, "healthy-2", "healthy", "healthy-1", H, "light load again, the router's CPU unlimited", light, [], None, None),
        (["--policy", "cache_aware"], "healthy-3", "healthy", "healthy-2", H,
         "light load with diverse prompts; the router restarted with --policy cache_aware", light, [], None, None),
        (None, "hot-prefix", "incident", "healthy-3", P,
         "10 clients (~0.2 s think time), every prompt starting with one shared 240-word prefix (cache_aware pins it)",
         [("hot", HOT)], ["routing-skew"], "pinned", None),
        (timeout_flags, "healthy-4", "healthy", "healthy-3", H,
         "the light load unstreamed; the router restarted with a 3 s request timeout "
         "and a circuit breaker (3 failures, open 900 s)", [("unstreamed", UNSTREAMED)], [], None, None),
        (None, "cut-off", "incident", "healthy-4", P,
         f"the same load; 5 s in, replica 1's engine core stopped for {args.stall_seconds} s, then resumed",
         [("unstreamed", UNSTREAMED)], ["backend-cut-off"], r1.instance, stop_replica),
        (retry_flags, "healthy-5", "healthy", "healthy-4", H,
         "light load; the router restarted with a 2 s request timeout, retries on, circuit breaker off",
         light, [], None, None),
        (None, "retries", "incident", "healthy-5", P,
         "light load plus 2 clients of unstreamed 600-token requests that outlast the router's 2 s timeout",
         light + [("long", LONG)], ["router-retries"], None, None),
        (rr, "healthy-6", "healthy", "healthy-5", H, "light load; the router restarted with round robin and no timeout",
         light, [], None, None),
    ]
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn) as session:
        log(f"warm-up for {args.warmup_seconds}s")
        state.stats = {"light": ClientStats()}
        state.generation += 1
        warm = [asyncio.create_task(worker(session, args, state, router, "light", LIGHT, state.generation, i))
                for i in range(LIGHT.clients)]
        await asyncio.sleep(args.warmup_seconds)
        state.generation += 1
        await asyncio.gather(*warm, return_exceptions=True)
        for flags, name, kind, baseline, seconds, what, groups, expect, expect_replica, during in plan:
            if args.only and name not in args.only:
                continue
            if flags is not None:
                await router.restart(flags)
            entry = await phase(args, state, router, replicas, session, name, kind, baseline, seconds, what, groups,
                                expect, expect_replica, during)
            if entry["expect_replica"] == "pinned":
                w = (entry["router_view"] or {}).get("workers", {})
                entry["expect_replica"] = max(w, key=lambda i: w[i].get("decisions") or 0) if w else None
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
    ok, text = await asyncio.to_thread(http_ok, router.metrics_url, 10)
    if ok:
        with open(args.last_scrape, "w") as f:
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
    ap.add_argument("--router-quota-fraction", type=float, default=0.05,
                    help="the router-cpu phase's CPU quota as a fraction of what the router used unlimited")
    ap.add_argument("--stall-seconds", type=int, default=12)
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--phase-seconds", type=int, default=180)
    ap.add_argument("--healthy-seconds", type=int, default=180)
    ap.add_argument("--warmup-seconds", type=int, default=40)
    ap.add_argument("--tail-seconds", type=int, default=15)
    ap.add_argument("--only", default="")
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--last-scrape", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--engine", default="{}")
    ap.add_argument("--engine-nice", type=int, default=-5)
    args = ap.parse_args()
    args.engine_cmd = json.loads(args.engine_cmd)
    args.flags = json.loads(args.flags)
    args.only = set(filter(None, args.only.split(",")))
    ports = [int(p) for p in args.ports.split(",")]
    cores = [int(c) for c in args.cores.split(",")]
    if len(ports) != 2 or len(cores) != 2:
        sys.exit("router: give two ports and two cores")
    replicas = [Replica(args, i, p, c) for i, (p, c) in enumerate(zip(ports, cores))]
    manifest = {
        "description": "The router run of scripts/real-engine.sh --router: two vLLM replicas of one model, each pinned "
                       "to its own core, behind vLLM's router; clients send to the router only; Prometheus scrapes "
                       "both engines (job vllm) and the router's metrics port (job vllm-router) every 5 s; times are UTC. "
                       "`expect_replica` is the engine instance an incident touches.",
        "engine": json.loads(args.engine) | {"replicas": [{"instance": r.instance, "core": r.core, "processes": r.processes} for r in replicas]},
        "phase_seconds": args.phase_seconds,
        "healthy_seconds": args.healthy_seconds,
        "phases": [],
    }
    def cleanup():
        for r in replicas:
            r.stop()

    run_lab("router", args.manifest, manifest, lambda: programme(args, replicas, manifest), lambda: checks(manifest["phases"], replicas) if not args.only else [], cleanup)


if __name__ == "__main__":
    main()
