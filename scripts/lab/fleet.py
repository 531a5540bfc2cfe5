"""The fleet programme of the real-engine lab: two (or more) vLLM replicas of one model behind a
load balancer, driven through healthy stretches and incidents that touch one replica.

Usage: python fleet.py --engine-cmd JSON --flags JSON --ports P0,P1 --cores 0,1
                       --manifest OUT.json --last-scrape OUT.txt --log-dir DIR
                       [--phase-seconds 240] [--healthy-seconds 240] [--engine JSON]

scripts/real-engine.sh --fleet starts a Prometheus scraping every port every 15 s first, then runs
this. Each replica runs in its own session (setsid), its whole process tree pinned to its own core
(taskset, and VLLM_CPU_OMP_THREADS_BIND for vLLM's own threads), on its own port, under the same
--served-model-name. The load balancer sends each request to the next replica in turn (or, with
--balance random, to one chosen at random) among those that answer /health (checked every second,
and marked down at once when a request cannot connect), as a Kubernetes Service with readiness
probes does; the uneven phase weights the choice instead.

Phases, each after a healthy stretch and each with the truth in the manifest:
  healthy-1, healthy-2  light load: the false-alarm test (KV usage of 1-3 %);
  uneven        16 clients, 90 % of requests to replica 0: the hot replica nears its limit;
  starved       light load while three busy loops, each in its own session, share replica 1's core;
  restart       replica 1 is killed (SIGKILL to its session), stays down 60 s, and is started again
                with the same flags: it comes back cold;
  kv-pressure   light load plus 24 clients with 400-token prompts and 400-token outputs, all sent
                to replica 0 (160 KV blocks): preemptions on that replica only;
  healthy-3..6  light load between the incidents (the one after kv-pressure is the workload going
                back to light: a truthful workload change, not a fault).

Every 5 s each replica's own /metrics is read, so the manifest records what each engine said per
phase (KV usage, queue, preemptions, mean TTFT and ITL), beside what the clients saw.

Exit codes: 0 when the phases came out as intended, 3 when they did not (the manifest is still
written, with `"checks"` saying what failed); 1 on any other failure.
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
from drive import VOCAB_LOW, VOCAB_HIGH, Load, Stats, log, run_lab, utc  # noqa: E402
from events import http_ok, parse_metrics  # noqa: E402

LIGHT = Load(clients=6, prompt_tokens=64, max_tokens=32, think=0.5)
LIGHT_WHAT = "6 clients, random 64-token prompts, 32 output tokens, ~0.5 s think time"
HEAVY = Load(clients=24, prompt_tokens=400, max_tokens=400, think=0.0)
UNEVEN = Load(clients=16, prompt_tokens=64, max_tokens=32, think=0.2)
AUTOGROUP_NICE = -5


def set_autogroup_nice(pid, nice):
    """The kernel's autogroup scheduling shares a core between sessions, not processes: a session's
    weight is its autogroup's nice value. The replicas get a higher one than the machine's other
    sessions (builds, the load clients), so those do not slow their steps; the busy loops of the
    starved phase get the same one, so they really compete with the replica they share a core with."""
    try:
        with open(f"/proc/{pid}/autogroup", "w") as f:
            f.write(str(nice))
        return True
    except OSError:
        return False


class Replica:
    def __init__(self, args, index, port, core):
        self.args, self.index, self.port, self.core = args, index, port, core
        self.url = f"http://127.0.0.1:{port}"
        self.instance = f"127.0.0.1:{port}"
        self.proc = None
        self.up = False
        self.processes = []

    def start(self):
        n = len(self.processes) + 1
        logf = open(os.path.join(self.args.log_dir, f"vllm-r{self.index}-{n}.log"), "w")
        env = dict(os.environ, VLLM_CPU_OMP_THREADS_BIND=str(self.core))
        cmd = ["taskset", "-c", str(self.core)] + self.args.engine_cmd + self.args.flags + ["--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        logf.close()
        self.launched_at = time.time()
        niced = set_autogroup_nice(self.proc.pid, self.args.engine_nice) if self.args.engine_nice else False
        self.processes.append({"pid": self.proc.pid, "core": self.core, "launched": utc(self.launched_at),
                               "autogroup_nice": self.args.engine_nice if niced else 0,
                               "log": os.path.basename(logf.name)})
        log(f"replica {self.index} launched on core {self.core}, port {self.port} (pid {self.proc.pid})")

    async def wait_up(self, limit=900):
        deadline = time.time() + limit
        metrics_up = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"replica {self.index} exited with {self.proc.returncode} while starting; see "
                                   f"{self.args.log_dir}/{self.processes[-1]['log']}")
            if metrics_up is None and (await asyncio.to_thread(http_ok, f"{self.url}/metrics"))[0]:
                metrics_up = time.time()
            if metrics_up is not None and (await asyncio.to_thread(http_ok, f"{self.url}/v1/models"))[0]:
                self.processes[-1]["up"] = utc(metrics_up)
                log(f"replica {self.index} up: /metrics answered {metrics_up - self.launched_at:.0f} s after launch")
                return metrics_up
            await asyncio.sleep(0.5)
        raise RuntimeError(f"replica {self.index} did not answer on /metrics and /v1/models within {limit} s")

    def kill(self):
        """SIGKILL to the replica's whole session (the API server and its engine core), as the OOM
        killer or a lost node does: no graceful drain."""
        t = time.time()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.processes[-1]["killed"] = utc(t)
        self.up = False
        log(f"replica {self.index} killed")
        return t

    def stop(self):
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


class Group:
    """Clients that send one kind of request, to replicas chosen by one policy: None for round robin
    over the replicas that are up, "random" for a uniform choice among them (what a Kubernetes
    Service in kube-proxy's iptables mode does), a list of weights, or one replica's index."""

    def __init__(self, name, load, policy=None):
        self.name, self.load, self.policy = name, load, policy


class Balancer:
    def __init__(self, replicas):
        self.replicas = replicas
        self.turn = 0

    def pick(self, policy, rng):
        up = [r for r in self.replicas if r.up]
        if not up:
            return None
        if isinstance(policy, int):
            r = self.replicas[policy]
            return r if r.up else None
        if isinstance(policy, list):
            weights = [policy[r.index] for r in up]
            return rng.choices(up, weights=weights)[0]
        if policy == "random":
            return rng.choice(up)
        self.turn += 1
        return up[self.turn % len(up)]


async def health(replicas, state):
    """/health every second per replica: what a readiness probe tells a load balancer."""
    while not state.done:
        for r in replicas:
            if r.proc is None or r.proc.poll() is not None:
                r.up = False
                continue
            ok, _ = await asyncio.to_thread(http_ok, f"{r.url}/health", 1.0)
            r.up = ok
        await asyncio.sleep(1.0)


class State:
    def __init__(self, replicas):
        self.done = False
        self.groups = []
        self.generation = 0
        self.per_replica = {r.index: Stats() for r in replicas}
        self.no_replica = 0
        self.views = None


async def send(session, args, replica, load, rng, stats):
    prompt = [rng.randrange(VOCAB_LOW, VOCAB_HIGH) for _ in range(load.prompt_tokens)]
    body = {"model": args.model, "prompt": prompt, "max_tokens": load.max_tokens, "ignore_eos": True,
            "stream": False, "temperature": 0.0}
    try:
        async with session.post(f"{replica.url}/v1/completions", json=body,
                                timeout=aiohttp.ClientTimeout(total=300)) as resp:
            await resp.read()
            if resp.status == 200:
                stats.ok += 1
            else:
                stats.status(resp.status)
    except aiohttp.ClientConnectorError as e:
        replica.up = False  # the balancer stops sending to it until /health answers again
        stats.status(type(e).__name__)
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        stats.status(type(e).__name__)


async def worker(session, args, state, balancer, group, generation, seed):
    rng = random.Random(seed)
    while not state.done and state.generation == generation:
        replica = balancer.pick(group.policy, rng)
        if replica is None:
            state.no_replica += 1
            await asyncio.sleep(0.5)
            continue
        await send(session, args, replica, group.load, rng, state.per_replica[replica.index])
        if group.load.think:
            await asyncio.sleep(rng.uniform(0.5, 1.5) * group.load.think)


def start_groups(session, args, state, balancer, groups, phase_name):
    state.generation += 1
    gen = state.generation
    tasks = []
    for g in groups:
        for i in range(g.load.clients):
            seed = zlib.crc32(f"fleet/{phase_name}/{g.name}/{i}".encode())
            tasks.append(asyncio.create_task(worker(session, args, state, balancer, g, gen, seed)))
    return tasks


def start_hogs(n, core, seconds, nice):
    """Busy loops, each in its own session (see set_autogroup_nice), pinned to `core`."""
    code = f"import time\nu=time.time()+{seconds}\nx=0\nwhile time.time()<u: x=(x*31+7)%1000003\n"
    procs = []
    for _ in range(n):
        p = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c", code], start_new_session=True)
        if nice:
            set_autogroup_nice(p.pid, nice)
        procs.append(p)
    return procs


def scrape(replica):
    ok, text = http_ok(f"{replica.url}/metrics", timeout=5)
    return parse_metrics(text) if ok else None


async def sampler(replicas, state):
    while not state.done:
        views = state.views
        if views is not None:
            for r in replicas:
                m = await asyncio.to_thread(scrape, r)
                if m is None or state.views is not views:
                    continue
                v = views[r.index]
                v["kv"].append(m.get("vllm:kv_cache_usage_perc", 0.0))
                v["waiting_max"] = max(v["waiting_max"], m.get("vllm:num_requests_waiting", 0.0))
                v["running_max"] = max(v["running_max"], m.get("vllm:num_requests_running", 0.0))
        await asyncio.sleep(5)


HIST = ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds")


def hist_totals(replica):
    """Sum and count of the TTFT and ITL histograms on the replica's /metrics page."""
    ok, text = http_ok(f"{replica.url}/metrics", timeout=5)
    out = {}
    if not ok:
        return None
    for line in text.splitlines():
        for h in HIST:
            for suffix in ("_sum", "_count"):
                if line.startswith(h + suffix + "{") or line.startswith(h + suffix + " "):
                    try:
                        out[h + suffix] = out.get(h + suffix, 0.0) + float(line.rsplit(" ", 1)[1])
                    except ValueError:
                        pass
    m = parse_metrics(text)
    out["preemptions"] = m.get("vllm:num_preemptions_total", 0.0)
    out["finished"] = m.get("vllm:request_success_total", 0.0)
    out["process_start"] = m.get("process_start_time_seconds")
    return out


def mean_of(before, after, h):
    if not before or not after:
        return None
    ds = after.get(h + "_sum", 0.0) - before.get(h + "_sum", 0.0)
    dc = after.get(h + "_count", 0.0) - before.get(h + "_count", 0.0)
    return round(ds / dc, 5) if dc > 0 else None


async def phase(args, state, balancer, session, name, kind, baseline, seconds, what, groups,
                expect=(), expect_replica=None, during=None):
    replicas = balancer.replicas
    before = {r.index: await asyncio.to_thread(hist_totals, r) for r in replicas}
    state.per_replica = {r.index: Stats() for r in replicas}
    state.no_replica = 0
    state.views = {r.index: {"kv": [], "waiting_max": 0.0, "running_max": 0.0} for r in replicas}
    start = time.time()
    log(f"phase {name} ({kind}) for {seconds}s: {what}")
    tasks = start_groups(session, args, state, balancer, groups, name)
    extra = {}
    if during is not None:
        extra = await during(start) or {}
    await asyncio.sleep(max(0, start + seconds - time.time()))
    end = time.time()
    state.generation += 1  # the phase's clients stop after their current request
    after = {r.index: await asyncio.to_thread(hist_totals, r) for r in replicas}
    views = state.views
    state.views = None
    engine_view = {}
    for r in replicas:
        v, b, a = views[r.index], before[r.index], after[r.index]
        kv = v["kv"] or [0.0]
        same_process = b and a and b.get("process_start") == a.get("process_start")
        engine_view[r.instance] = {
            "kv_usage_max": round(max(kv), 4), "kv_usage_mean": round(sum(kv) / len(kv), 4),
            "waiting_max": v["waiting_max"], "running_max": v["running_max"],
            "preemptions": (a["preemptions"] - b["preemptions"]) if same_process else None,
            "requests_finished": (a["finished"] - b["finished"]) if same_process else None,
            "ttft_mean_seconds": mean_of(b, a, HIST[0]) if same_process else None,
            "itl_mean_seconds": mean_of(b, a, HIST[1]) if same_process else None,
            "samples": len(v["kv"])}
    client_view = {replicas[i].instance: {"completed": s.ok, "errors": {str(k): c for k, c in sorted(s.errors.items(), key=lambda kv: str(kv[0]))}}
                   for i, s in state.per_replica.items()}
    entry = {"name": name, "kind": kind, "start": utc(start), "end": utc(end), "what": what,
             "load": {g.name: g.load.describe() | {"policy": g.policy if g.policy is not None else "round-robin"} for g in groups},
             "expect_first": list(expect), "expect_replica": expect_replica, "baseline_phase": baseline,
             "client_view": client_view, "engine_view": engine_view,
             "machine_load_average": round(os.getloadavg()[0], 2)} | extra
    if state.no_replica:
        entry["client_view"]["no_replica_up"] = state.no_replica
    log(f"phase {name} done: {json.dumps(client_view)} {json.dumps(engine_view)}")
    # Let whatever the phase left under way finish (a request holds its client until it ends).
    await asyncio.gather(*tasks, return_exceptions=True)
    return entry


def checks(phases, replicas):
    failed = []
    r0, r1 = replicas[0].instance, replicas[1].instance
    for p in phases:
        ev = p["engine_view"]
        if p["kind"] == "healthy":
            for inst, v in ev.items():
                if (v["preemptions"] or 0) > 0:
                    failed.append(f"{p['name']}: {v['preemptions']:.0f} preemptions on {inst} in a healthy phase")
                if v["kv_usage_max"] >= 0.6:
                    failed.append(f"{p['name']}: KV usage reached {v['kv_usage_max']:.0%} on {inst} in a healthy phase")
        elif p["name"] == "uneven":
            c = p["client_view"]
            if c[r0]["completed"] < 4 * max(1, c[r1]["completed"]):
                failed.append(f"uneven: {r0} completed {c[r0]['completed']}, {r1} {c[r1]['completed']}: not uneven enough")
        elif p["name"] == "starved":
            a, b = ev[r0]["itl_mean_seconds"], ev[r1]["itl_mean_seconds"]
            if not a or not b or b < 1.5 * a:
                failed.append(f"starved: mean ITL {b} on {r1} against {a} on {r0}: the hogs did not slow it")
        elif p["name"] == "restart":
            if not p.get("restart", {}).get("down_seconds", 0) >= 30:
                failed.append("restart: the replica was not down for 30 s")
        elif p["name"] == "kv-pressure":
            if (ev[r0]["preemptions"] or 0) <= 0 or ev[r0]["kv_usage_max"] < 0.9:
                failed.append(f"kv-pressure: {r0} had {ev[r0]['preemptions']} preemptions, KV max {ev[r0]['kv_usage_max']}")
            if (ev[r1]["preemptions"] or 0) > 0:
                failed.append(f"kv-pressure: {r1} was preempting too")
    return failed


async def programme(args, replicas, manifest):
    state = State(replicas)
    balancer = Balancer(replicas)
    for r in replicas:  # one after the other: the second start reuses the first's compile cache
        r.start()
        await r.wait_up()
        r.up = True
    manifest["window"] = {"start": utc(time.time())}
    conn = aiohttp.TCPConnector(limit=0)
    H, P = args.healthy_seconds, args.phase_seconds
    # --balance random sends light load where a Kubernetes Service in iptables mode would: to a replica
    # chosen at random. A strict round robin keeps two replicas' KV usage equal to the block; chance
    # makes them differ 2-3x at 1-3% usage, as fleets at night do.
    light = [Group("light", LIGHT, None if args.balance == "round-robin" else "random")]
    r0, r1 = replicas[0], replicas[1]
    bg = [asyncio.create_task(health(replicas, state)), asyncio.create_task(sampler(replicas, state))]
    async with aiohttp.ClientSession(connector=conn) as session:
        log(f"warm-up for {args.warmup_seconds}s")
        tasks = start_groups(session, args, state, balancer, light, "warmup")
        await asyncio.sleep(args.warmup_seconds)
        state.generation += 1
        await asyncio.gather(*tasks, return_exceptions=True)
        phases = manifest["phases"]

        async def starve(start):
            hogs = start_hogs(3, r1.core, P, args.engine_nice)
            return {"cpu_hogs": {"count": len(hogs), "core": r1.core, "replica": r1.instance,
                                 "how": "3 busy loops, each in its own session (setsid) pinned to the replica's core"}}

        async def kill_and_restart(start):
            down = r1.kill()
            await asyncio.sleep(args.down_seconds)
            r1.start()
            up = await r1.wait_up()
            return {"restart": {"replica": r1.instance, "down": utc(down), "up": utc(up),
                                "down_seconds": round(up - down, 1), "how": "SIGKILL to the replica's session, "
                                f"{args.down_seconds} s down, then the same command and flags"}}

        plan = [
            ("healthy-1", "healthy", None, H, f"light load ({LIGHT_WHAT})", light, [], None, None),
            ("healthy-2", "healthy", "healthy-1", H, "light load again: the false-alarm test", light, [], None, None),
            ("uneven", "incident", "healthy-2", P,
             "16 clients (64-token prompts, 32 output tokens, ~0.2 s think time), 90% of requests sent to replica 0",
             [Group("uneven", UNEVEN, [0.9, 0.1])], ["replica-imbalance"], r0.instance, None),
            ("healthy-3", "healthy", "healthy-2", H, "light load again", light, [], None, None),
            ("starved", "incident", "healthy-3", P,
             "light load while 3 busy loops, each in its own session, share replica 1's core",
             light, ["replica-outlier"], r1.instance, starve),
            ("healthy-4", "healthy", "healthy-3", H, "light load again", light, [], None, None),
            ("restart", "incident", "healthy-4", P,
             f"light load; replica 1 killed at the start, down {args.down_seconds} s, then started again with the same flags",
             light, ["target-down"], r1.instance, kill_and_restart),
            ("healthy-5", "healthy", "healthy-4", H, "light load again, the restarted replica back in rotation", light, [], None, None),
            ("kv-pressure", "incident", "healthy-5", P,
             "light load, plus 24 clients with 400-token prompts and 400-token outputs sent to replica 0 only (160 KV blocks)",
             light + [Group("heavy", HEAVY, 0)], ["kv-cache-pressure", "recompute-thrashing", "replica-outlier"], r0.instance, None),
            ("healthy-6", "healthy", "healthy-5", H,
             "light load again (the heavy clients stopped: the workload going back is a true change)", light, [], None, None),
        ]
        for name, kind, baseline, seconds, what, groups, expect, expect_replica, during in plan:
            if args.only and name not in args.only:
                continue
            phases.append(await phase(args, state, balancer, session, name, kind, baseline, seconds, what, groups,
                                      expect, expect_replica, during))
            with open(args.manifest, "w") as f:
                json.dump(manifest, f, indent=2)
                f.write("\n")
        state.done = True
        for t in bg:
            t.cancel()
        await asyncio.gather(*bg, return_exceptions=True)
    await asyncio.sleep(args.tail_seconds)  # two more scrapes
    manifest["window"]["end"] = utc(time.time())
    ok, text = await asyncio.to_thread(http_ok, f"{r0.url}/metrics", 10)
    if ok:
        with open(args.last_scrape, "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine-cmd", required=True, help="JSON list: the command before the flags")
    ap.add_argument("--flags", required=True, help="JSON list: the engine's flags, without --port")
    ap.add_argument("--ports", required=True, help="one port per replica, comma-separated")
    ap.add_argument("--cores", default="", help="one core per replica, comma-separated (default 0,1,...)")
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--phase-seconds", type=int, default=240)
    ap.add_argument("--healthy-seconds", type=int, default=240)
    ap.add_argument("--down-seconds", type=int, default=60)
    ap.add_argument("--warmup-seconds", type=int, default=45)
    ap.add_argument("--tail-seconds", type=int, default=35)
    ap.add_argument("--only", default="", help="comma-separated phase names (for trying the lab out)")
    ap.add_argument("--balance", choices=["round-robin", "random"], default="round-robin",
                    help="how the light load picks a replica (the uneven phase weights the choice either way)")
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--last-scrape", required=True)
    ap.add_argument("--log-dir", required=True)
    ap.add_argument("--engine", default="{}", help="JSON object describing the engines, copied into the manifest")
    ap.add_argument("--engine-nice", type=int, default=AUTOGROUP_NICE,
                    help="autogroup nice value of each replica's session and of the starved phase's busy loops (0: leave it)")
    args = ap.parse_args()
    args.engine_cmd = json.loads(args.engine_cmd)
    args.flags = json.loads(args.flags)
    args.only = set(filter(None, args.only.split(",")))
    ports = [int(p) for p in args.ports.split(",")]
    cores = [int(c) for c in args.cores.split(",")] if args.cores else list(range(len(ports)))
    if len(ports) < 2 or len(cores) != len(ports):
        sys.exit("fleet: give at least two ports and one core per port")
    replicas = [Replica(args, i, p, c) for i, (p, c) in enumerate(zip(ports, cores))]
    manifest = {
        "description": "The fleet run of scripts/real-engine.sh --fleet: replicas of one model, each a vLLM "
                       "engine pinned to its own core, behind a load balancer (round robin, random or weighted: see each "
                       "phase's load policy) that skips a replica "
                       "whose /health fails, scraped by one Prometheus every 15 s; times are UTC. "
                       "`expect_replica` is the instance an incident touches.",
        "engine": json.loads(args.engine) | {"replicas": [{"instance": r.instance, "core": r.core, "processes": r.processes} for r in replicas]},
        "phase_seconds": args.phase_seconds,
        "healthy_seconds": args.healthy_seconds,
        "phases": [],
    }

    def cleanup():
        for r in replicas:
            r.stop()

    run_lab("fleet", args.manifest, manifest, lambda: programme(args, replicas, manifest), lambda: checks(manifest["phases"], replicas) if not args.only else [], cleanup)


if __name__ == "__main__":
    main()
