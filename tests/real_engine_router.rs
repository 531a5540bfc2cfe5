//! Diagnosis judged on a real router in front of two real engines.
//!
//! `scripts/real-engine.sh --router` ran two vLLM CPU replicas of one model (each pinned to its own
//! core) behind vLLM's own router (`vllm-router` 0.1.17), with the clients sending to the router
//! only, scraped every 5 s by a real Prometheus (the engines as job `vllm`, the router's metrics
//! port as job `vllm-router`), through healthy stretches and four incidents in the router's hop
//! while the engines stayed healthy: the router's CPU limited by a cgroup quota, cache-aware
//! routing pinning a hot prefix on one replica, a circuit breaker left open on a replica whose
//! engine came back, and a request timeout shorter than some requests. It exported every raw
//! sample and a manifest into `fixtures/real-engine-router/`. Here the samples are backfilled into
//! a real Prometheus of the test's own and diagnosed:
//!
//! - phase by phase against the healthy stretch before it: each incident's cause first (on the
//!   replica the manifest names, where it names one); each healthy stretch without a warning;
//! - as an engineer picks windows (2 and 3 minutes ending every minute, 5 minutes every two, each
//!   against the window before it): no window inside a healthy stretch gets a warning or critical finding but a
//!   truthful workload change where its baseline held an incident;
//! - the time by hop sees the router in every window, and says the router's hop grew where its CPU
//!   was limited.

mod common;

use std::path::Path;

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use common::lab::{at, findings, loud, replicas_named, report};

const MODEL: &str = "tiny-llama";

/// The run with `--enable-scale-out` on the engines, whose lab checks all passed.
const RUN: &str = "fixtures/real-engine-router";
/// The first run, without it: the cache_aware policy got no tokens and could not pin the hot prefix
/// (the one check that failed, kept in its manifest; its `notes` say what was changed by hand).
const BLIND_RUN: &str = "fixtures/real-engine-router-blind";

type Phase = common::LabPhase;

fn served(run: &str) -> (Vec<Phase>, tempfile::TempDir, common::PromServer) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(run);
    let failed = common::lab_checks_failed(&dir);
    let allowed: &[&str] = if run == BLIND_RUN { &["hot-prefix: decisions [1485.0, 1532.0]: the policy did not pin the prefix"] } else { &[] };
    assert_eq!(failed.iter().map(|c| c.trim_matches('"')).collect::<Vec<_>>(), allowed, "{}: the lab's own checks", dir.display());
    let tmp = tempfile::tempdir().expect("temp dir");
    let prom = common::PromServer::start_with_openmetrics(common::unpack_lab_samples(&dir.join("samples.om.gz"), tmp.path(), true));
    (common::lab_manifest(&dir), tmp, prom)
}

fn summary(report: &Value) -> String {
    let fs: Vec<String> = findings(report)
        .map(|f| {
            let replica = f["scope"]["instance"].as_str().map(|i| format!(" on {i}")).unwrap_or_default();
            format!("{} {}{replica}", f["severity"].as_str().unwrap_or("?"), f["rule"].as_str().unwrap_or("?"))
        })
        .collect();
    format!("{} [status {}; hops: {}]", fs.join("; "), report["status"], hop_text(report))
}

fn hop_text(report: &Value) -> String {
    report["hops"].as_array().into_iter().flatten().filter_map(|h| h["text"].as_str()).collect::<Vec<_>>().join(" | ")
}

/// The model's split by hop in a report.
fn model_hops(report: &Value) -> Option<&Value> {
    report["hops"].as_array().into_iter().flatten().find(|h| h["scope"]["model_name"] == MODEL && h["scope"]["instance"].is_null())
}

fn router_seen(report: &Value) -> bool {
    model_hops(report).and_then(|h| h["hops"].as_array()).into_iter().flatten().any(|h| h["hop"] == "router" && h["seen"] == true)
}

// One Prometheus per run, serving both judgements.
#[test]
fn every_phase_named_right_and_healthy_windows_quiet() {
    let (phases, _tmp, prom) = served(RUN);
    phases_diagnosed_right(RUN, &phases, &prom);
    healthy_windows_quiet(RUN, &phases, &prom);
}

#[test]
fn the_blind_run_too() {
    let (phases, _tmp, prom) = served(BLIND_RUN);
    phases_diagnosed_right(BLIND_RUN, &phases, &prom);
    healthy_windows_quiet(BLIND_RUN, &phases, &prom);
}

/// `report` of every (end, window) pair, four at a time (each is an explain process waiting on
/// Prometheus), in their order.
fn reports(url: &str, asks: &[(DateTime<Utc>, Duration)]) -> Vec<Value> {
    let mut out: Vec<Option<Value>> = vec![None; asks.len()];
    for (chunk, slots) in asks.chunks(4).zip(out.chunks_mut(4)) {
        std::thread::scope(|s| {
            let handles: Vec<_> = chunk.iter().map(|(end, window)| s.spawn(move || report(url, *end, *window, *window))).collect();
            for (h, slot) in handles.into_iter().zip(slots.iter_mut()) {
                *slot = Some(h.join().expect("an explain thread panicked"));
            }
        });
    }
    out.into_iter().map(|r| r.unwrap_or(Value::Null)).collect()
}

fn phases_diagnosed_right(run: &str, phases: &[Phase], prom: &common::PromServer) {
    let mut wrong = Vec::new();
    let mut judged = 0;
    for p in phases.iter().filter(|p| p.baseline.is_some()) {
        let b = phases.iter().find(|b| Some(&b.name) == p.baseline.as_ref()).unwrap_or_else(|| panic!("{}: no baseline phase", p.name));
        judged += 1;
        let r = report(&prom.url, p.end, p.end - p.start, p.start - b.start);
        if !router_seen(&r) {
            wrong.push(format!("{}: the time by hop did not see the router: {}", p.name, summary(&r)));
        }
        if p.kind == "healthy" {
            if !loud(&r).is_empty() {
                wrong.push(format!("{} (healthy): {}", p.name, summary(&r)));
            }
            continue;
        }
        // A router incident is never "OK".
        if r["status"] == "ok" {
            wrong.push(format!("{}: reported OK: {}", p.name, summary(&r)));
        }
        // The blind run's hot prefix: the policy, without the prompts' tokens, spread it; the load
        // rose truthfully (10 clients with a long prefix after 6), and the blind policy is named.
        if run == BLIND_RUN && p.name == "hot-prefix" {
            let rules: Vec<&str> = findings(&r).filter_map(|f| f["rule"].as_str()).collect();
            if !rules.contains(&"router-prefix-blind") || rules.contains(&"routing-skew") {
                wrong.push(format!("hot-prefix (blind): router-prefix-blind not named, or a skew the router did not make: {}", summary(&r)));
            }
            continue;
        }
        let first = &r["findings"][0];
        let rule = first["rule"].as_str().unwrap_or("(no finding)");
        if !p.expect_first.iter().any(|e| e == rule) || first["scope"]["model_name"] != MODEL {
            wrong.push(format!("{}: expected one of {:?} first for {MODEL}, got: {}", p.name, p.expect_first, summary(&r)));
        } else if let Some(replica) = p.expect_replica.as_ref() {
            // routing-skew names the busy replica, backend-cut-off the worker held out longest.
            let named = replicas_named(first);
            if !named.contains(replica) || named.len() != 1 {
                wrong.push(format!("{}: {rule} names {named:?}, not {replica} alone: {}", p.name, summary(&r)));
            }
            // The skew's "find the worker" is answered by what each replica served, naming it.
            let find = first["step_detail"].as_array().and_then(|s| s.iter().find(|s| s["ask"].as_str().is_some_and(|a| a.starts_with("Find the worker"))));
            if rule == "routing-skew" && find.is_none_or(|s| s["state"] != "answered" || s["busiest"].as_str() != Some(replica.as_str())) {
                wrong.push(format!("{}: routing-skew's step finding the worker is not answered with {replica}: {find:?}", p.name));
            }
        }
        if p.name == "router-cpu" && model_hops(&r).and_then(|h| h["grew"].as_str()) != Some("router") {
            wrong.push(format!("router-cpu: the time by hop did not name the router's hop: {}", hop_text(&r)));
        }
    }
    assert!(judged >= 8, "only {judged} phases judged");
    assert!(wrong.is_empty(), "{run}: phases diagnosed wrong:\n  {}", wrong.join("\n  "));
}

/// Each phase's span and whether its clients streamed (every group of its load), from the manifest.
fn streaming(run: &str) -> Vec<(DateTime<Utc>, DateTime<Utc>, bool)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(run).join("manifest.json");
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("manifest")).expect("manifest JSON");
    let time = |v: &Value| DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default()).expect("phase time").with_timezone(&Utc);
    m["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| (time(&p["start"]), time(&p["end"]), p["load"].as_object().into_iter().flat_map(|l| l.values()).all(|g| g["stream"] == true)))
        .collect()
}

fn healthy_windows_quiet(run: &str, phases: &[Phase], prom: &common::PromServer) {
    let streamed = streaming(run);
    // Whether the clients streamed throughout [from, to), or not at all.
    let one_mode = |from: DateTime<Utc>, to: DateTime<Utc>| {
        let modes: std::collections::BTreeSet<bool> = streamed.iter().filter(|(s, e, _)| *s < to && *e > from).map(|(_, _, m)| *m).collect();
        modes.len() <= 1
    };
    let mut switched = 0;
    let first = phases.iter().map(|p| p.start).min().expect("phases");
    let last = phases.iter().map(|p| p.end).max().expect("phases");
    let mut wrong = Vec::new();
    let mut inside = 0;
    let mut judged = 0;
    // Healthy phases back to back are one healthy stretch, unless the router restarted between
    // them with other flags (its counters start again: still healthy, judged the same).
    let mut stretches: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for p in phases.iter().filter(|p| p.kind == "healthy") {
        match stretches.last_mut() {
            Some(last) if (p.start - last.1).num_seconds() <= 15 => last.1 = p.end,
            _ => stretches.push((p.start, p.end)),
        }
    }
    let mut asks = Vec::new();
    for (minutes, step) in [(2, 60), (3, 60), (5, 120)] {
        let window = Duration::minutes(minutes);
        let mut end = first + window * 2;
        while end <= last {
            asks.push((end, window));
            end += Duration::seconds(step);
        }
    }
    for ((end, window), r) in asks.iter().copied().zip(reports(&prom.url, &asks)) {
        {
            let start = end - window;
            judged += 1;
            let label = format!("{}m to {}", window.num_minutes(), at(end));
            if !router_seen(&r) {
                wrong.push(format!("{label}: the time by hop did not see the router"));
            }
            let healthy = stretches.iter().any(|(from, to)| *from <= start && end <= *to);
            // A baseline that held an incident may truthfully show its load gone (the hot prefix's
            // clients sent other prompts): a workload change, not a fault.
            let baseline_overlaps_incident = phases.iter().any(|p| p.kind != "healthy" && start - window < p.end && start > p.start);
            if healthy {
                inside += 1;
                // Where the lab's clients went from streamed to unstreamed requests between the
                // baseline and the window, the router's duration (a stream's first bytes, an
                // unstreamed request's whole answer) grows by an answer: neither router-saturated
                // nor the router's hop may read that as the router's (router_over_e2e).
                let mode_switched = !one_mode(start - window, end);
                switched += usize::from(mode_switched);
                if mode_switched && model_hops(&r).and_then(|h| h["grew"].as_str()) == Some("router") {
                    wrong.push(format!("{label} (across the switch to unstreamed requests): the time by hop says the router grew: {}", hop_text(&r)));
                }
                // Nor a replica split apart by the time by hop.
                let split: Vec<&str> = r["hops"].as_array().into_iter().flatten().filter_map(|h| h["scope"]["instance"].as_str()).collect();
                if !split.is_empty() {
                    wrong.push(format!("{label} (inside a healthy stretch): the time by hop split {split:?} apart"));
                }
                let stray: Vec<&Value> = loud(&r)
                    .into_iter()
                    .filter(|f| !(baseline_overlaps_incident && ["workload-shift", "workload-lighter"].contains(&f["rule"].as_str().unwrap_or_default())))
                    .collect();
                if !stray.is_empty() {
                    wrong.push(format!("{label} (inside a healthy stretch): {}", summary(&r)));
                }
            }
        }
    }
    assert!(inside >= 10, "only {inside} windows inside healthy stretches (of {judged})");
    assert!(switched >= 1, "{run}: no healthy window across the clients' switch to unstreamed requests was judged");
    assert!(wrong.is_empty(), "{run}: {} of {judged} windows went wrong:\n  {}", wrong.len(), wrong.join("\n  "));
}
