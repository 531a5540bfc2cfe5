#!/usr/bin/env python3
"""Runs every test target of the workspace, two at a time (scripts/test.sh calls it).

`cargo test` runs its test binaries one after another, and many of ours spend part of their time
waiting: for a Prometheus, VictoriaMetrics or Alertmanager to start, for Chromium, for the MCP
client's Python. On a 2-core machine one core then idles. This builds every test target once
(`cargo test --no-run`, exactly the targets `cargo test --workspace --all-targets` runs), then runs
the built executables themselves, as `cargo test` would (from their package's directory, with
cargo's CARGO_MANIFEST_DIR and CARGO_PKG_NAME), JOBS at a time (2, or $VLLM_DIAG_TEST_JOBS), the
slowest known ones first so that the last to finish are short. Not `cargo test -p PACKAGE`: with
one package selected cargo unifies the dependencies' features for that package alone, and for the
simulator's unit tests it rebuilt a dozen crates and the product (77 s of a fresh-clone run). Each
target's output is printed whole when it ends, with how long it took; a summary names the targets
that failed. The exit code is 0 when every target passed, 101 (cargo's) otherwise.

Arguments are passed to the build (`cargo test --no-run`, e.g. --locked).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

# Started first, slowest first (the fresh-clone figures in BENCHMARKS.md, "The test suite"); a
# target not listed starts after them. A stale list costs only time. differential makes the shared
# scenario runs (tests/common::scenario_run) that victoria and pathologies read back, so those two
# start later: beside it they would wait for the same runs.
SLOW_FIRST = [
    "differential",
    "rules_export",
    "real_engine_fleet",
    "moved",
    "channel",
    "faults",
    "victoria",
    "real_engine",
    "real_engine_router",
    "scrape",
    "serve",
    "ci",
    "alert_pages",
    "release",
    "onset",
    "pathologies",
    "backtest",
    "mcp",
    "check",
    "docs",
    "secrets",
    "events",
]


def targets(cargo_args):
    """(package, kind flag, name) of every test executable `cargo test --all-targets` would run."""
    build = subprocess.run(
        ["cargo", "test", "--workspace", "--all-targets", "--no-run", "--message-format=json-render-diagnostics", *cargo_args],
        stdout=subprocess.PIPE,
        text=True,
    )
    if build.returncode != 0:
        sys.exit(build.returncode)
    meta = json.loads(
        subprocess.run(["cargo", "metadata", "--no-deps", "--format-version=1", *[a for a in cargo_args if a in ("--locked", "--offline", "--frozen")]], stdout=subprocess.PIPE, text=True, check=True).stdout
    )
    names = {p["id"]: p["name"] for p in meta["packages"]}
    dirs = {p["id"]: os.path.dirname(p["manifest_path"]) for p in meta["packages"]}
    out = []
    for line in build.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable") or not msg["profile"]["test"]:
            continue
        kind = msg["target"]["kind"][0]
        flag = {"lib": "--lib", "proc-macro": "--lib", "bin": "--bin", "test": "--test", "bench": "--bench", "example": "--example"}.get(kind)
        if flag is None:
            continue
        package = msg["package_id"]
        out.append((names.get(package, package), flag, msg["target"]["name"], msg["executable"], dirs.get(package, ".")))
    rank = {n: i for i, n in enumerate(SLOW_FIRST)}
    out.sort(key=lambda t: (rank.get(t[2], len(SLOW_FIRST)), t[0], t[2]))
    return out


def run(target):
    package, flag, name, executable, directory = target
    # What `cargo test -p PACKAGE FLAG NAME` would run, named so for a rerun by hand.
    label = f"cargo test -p {package} {flag}" + ("" if flag == "--lib" else f" {name}")
    env = dict(os.environ, CARGO_MANIFEST_DIR=directory, CARGO_PKG_NAME=package)
    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as log:
        log.write(f"     Running {os.path.relpath(executable, directory)} ({label})\n")
        log.flush()
        code = subprocess.run([executable], cwd=directory, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL).returncode
        log.seek(0)
        text = log.read()
    return target, label, code, time.monotonic() - started, text


def main():
    cargo_args = sys.argv[1:]
    jobs = int(os.environ.get("VLLM_DIAG_TEST_JOBS", "2"))
    todo = targets(cargo_args)
    print(f"running {len(todo)} test targets, {jobs} at a time", flush=True)
    failed = []
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for done in as_completed([pool.submit(run, t) for t in todo]):
            target, cmd, code, took, text = done.result()
            verdict = "ok" if code == 0 else f"FAILED (exit code {code})"
            print(f"\n===== {cmd}: {verdict} in {took:.1f}s =====", flush=True)
            sys.stdout.write(text)
            sys.stdout.flush()
            if code != 0:
                failed.append(cmd)
    print(f"\n{len(todo)} test targets in {time.monotonic() - started:.0f}s, {len(failed)} failed", flush=True)
    for cmd in failed:
        print(f"  failed: {cmd}", flush=True)
    sys.exit(101 if failed else 0)


if __name__ == "__main__":
    main()
