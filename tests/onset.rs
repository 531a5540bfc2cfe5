//! The onset of a finding against the truth: generated scenarios (whose incident start the
//! scenario file fixes) and the real engine's lab run (whose phases the manifest times), each
//! backfilled into a real Prometheus and diagnosed by the binary. The onset must fall within two
//! trend steps of when the incident began, a problem already there when the window opened must say
//! so (`onset` null with an `onset_signal`), and a healthy fleet has no finding to date. A problem
//! the real engine stopped is called over (`ended`) where its phase ended, and none before.

mod common;

use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

use common::run::{at_window_end, explain_json};
use common::{load_scenario, PromServer};

/// A finding's onset, its signal, and the trend step of that signal.
fn onset_of(f: &Value) -> (Option<DateTime<Utc>>, Option<String>, u64) {
    let onset = f["onset"].as_str().map(|s| DateTime::parse_from_rfc3339(s).expect("onset is RFC 3339").with_timezone(&Utc));
    let signal = f["onset_signal"].as_str().map(String::from);
    let step = f["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| Some(e["signal"].as_str().unwrap_or_default()) == signal.as_deref())
        .and_then(|e| e["series"]["step_seconds"].as_u64())
        .unwrap_or(0);
    (onset, signal, step)
}

/// Diagnose `name` (its incident moved to start `before_end` before the window's end when given)
/// and return the onset's error against the truth in seconds, and the trend step, of its `rule` finding.
fn measure(name: &str, before_end: Option<Duration>, rule: &str) -> (i64, u64) {
    let mut spec = load_scenario(name);
    if let (Some(d), Some(inc)) = (before_end, spec.incident.as_mut()) {
        inc.onset_before_end = Some(d);
    }
    let truth = spec.incident_onset().expect("an incident");
    let prom = PromServer::start_generated(&spec);
    let report = explain_json(&prom.url, &at_window_end(&spec), &[]).json();
    let f = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["rule"] == rule)
        .unwrap_or_else(|| panic!("{name} ({before_end:?}): no {rule} finding\n{report:#}"));
    let (onset, signal, step) = onset_of(f);
    let onset = onset.unwrap_or_else(|| panic!("{name} ({before_end:?}): no onset (signal {signal:?})\n{f:#}"));
    let error = (onset - truth).num_seconds();
    eprintln!("{name} {before_end:?}: {rule} via {signal:?}: onset {onset}, truth {truth}, error {error} s, step {step} s");
    (error, step)
}

fn assert_close(name: &str, before_end: Option<Duration>, rule: &str) {
    let (error, step) = measure(name, before_end, rule);
    assert!(step > 0, "{name}: the onset's signal has no trend step");
    assert!(error.unsigned_abs() <= 2 * step, "{name} ({before_end:?}): onset {error} s from the truth (step {step} s)");
}

#[test]
fn kv_cache_pressure_is_dated_at_the_incident_start() {
    // The scenario's incident begins with the window, then in the middle of it, off the minute grid.
    assert_close("kv-cache-pressure", None, "kv-cache-pressure");
    assert_close("kv-cache-pressure", Some(Duration::from_secs(17 * 60 + 30)), "kv-cache-pressure");
}

#[test]
fn slow_decode_is_dated_at_the_incident_start() {
    assert_close("slow-decode", None, "slow-decode");
    assert_close("slow-decode", Some(Duration::from_secs(20 * 60)), "slow-decode");
}

#[test]
fn slow_prefill_and_a_late_stall_are_dated_at_the_incident_start() {
    assert_close("slow-prefill", Some(Duration::from_secs(14 * 60)), "slow-prefill");
    // The stall begins 10 minutes before the end, by the kind's own timing.
    let (error, step) = measure("throughput-stall", None, "throughput-stall");
    assert!(error.unsigned_abs() <= 2 * step, "throughput-stall: onset {error} s from the truth (step {step} s)");
}

#[test]
fn a_problem_older_than_the_window_is_present_since_before_it() {
    // The SLO burn began an hour before the window's end: half an hour before the window.
    let spec = load_scenario("slo-burn");
    let prom = PromServer::start_generated(&spec);
    let report = explain_json(&prom.url, &at_window_end(&spec), &[]).json();
    let f = &report["findings"][0];
    assert_eq!(f["rule"], "slo-burn", "{report:#}");
    assert!(f["onset"].is_null(), "an onset inside the window: {f:#}");
    assert!(f["onset_signal"].is_string(), "no signal: the onset reads as unknown: {f:#}");
    let table = common::run::run(&common::run::explain_args(&prom.url, &at_window_end(&spec), &["--window", "30m", "-v"]), &[]).stdout;
    assert!(table.contains("Present since before the window ("), "{table}");
}

#[test]
fn healthy_fleets_have_no_finding_to_date() {
    for name in ["healthy-steady", "healthy-ramp"] {
        let spec = load_scenario(name);
        let prom = PromServer::start_generated(&spec);
        let report = explain_json(&prom.url, &at_window_end(&spec), &[]).json();
        let loud: Vec<&Value> = report["findings"].as_array().into_iter().flatten().filter(|f| f["severity"] != "info").collect();
        assert!(loud.is_empty(), "{name}: {loud:?}");
        for f in report["findings"].as_array().into_iter().flatten() {
            assert!(f.get("onset").is_some(), "{name}: a finding without the onset field: {f}");
        }
    }
}

/// The real engine's samples, unpacked for promtool.
fn real_engine(dir: &Path) -> (Value, PromServer) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine");
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(root.join("manifest.json")).expect("manifest")).expect("manifest JSON");
    let gz = std::fs::File::open(root.join("samples.om.gz")).expect("samples");
    let out = dir.join("samples.om");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out).expect("samples.om"));
    for line in std::io::BufReader::new(flate2::read::GzDecoder::new(gz)).lines() {
        writeln!(w, "{}", line.expect("gzip")).expect("write");
    }
    w.flush().expect("flush");
    drop(w);
    (manifest, PromServer::start_with_openmetrics(&out))
}

/// A manifest time (a phase's start or end).
fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default()).expect("phase time").with_timezone(&Utc)
}

/// The JSON report of a window from phase `p`'s start to `end`, against the phase `p` names as its
/// baseline (from that phase's start); `None` for a phase without one.
fn diagnose_from_phase_start(prom: &PromServer, phases: &[Value], p: &Value, end: DateTime<Utc>) -> Option<Value> {
    let b = phases.iter().find(|b| b["name"] == p["baseline_phase"])?;
    let start = time(&p["start"]);
    let window = format!("{}s", (end - start).num_seconds());
    let offset = format!("{}s", (start - time(&b["start"])).num_seconds());
    let at = end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let args = ["--window", window.as_str(), "--baseline", offset.as_str(), "--no-config", "--format", "json"];
    Some(common::run::run(&common::run::explain_args(&prom.url, &at, &args), &[]).json())
}

#[test]
fn the_real_engines_incident_phases_are_dated_at_their_start() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (manifest, prom) = real_engine(tmp.path());
    let phases = manifest["phases"].as_array().expect("phases");
    let mut dated = 0;
    for p in phases.iter().filter(|p| p["kind"] == "incident") {
        let start = time(&p["start"]);
        let Some(report) = diagnose_from_phase_start(&prom, phases, p, time(&p["end"])) else { continue };
        let name = p["name"].as_str().unwrap_or_default();
        let Some(rule) = report["findings"][0]["rule"].as_str() else { continue };
        let (onset, signal, step) = onset_of(&report["findings"][0]);
        eprintln!("real engine {name}: {rule} via {signal:?}: onset {onset:?}, phase start {start}, step {step} s");
        // The phase began when the load changed, the window's start: never before it, never unknown.
        let onset = onset.unwrap_or_else(|| panic!("real engine {name}: no onset (signal {signal:?})\n{:#}", report["findings"][0]));
        let error = (onset - start).num_seconds();
        assert!(error.unsigned_abs() <= 2 * step.max(5), "real engine {name}: onset {error} s from the phase's start");
        dated += 1;
    }
    assert!(dated >= 5, "only {dated} real-engine incident phases had a finding to date");
}

/// Whether a problem is over, on the real engine: no finding is called over in a window that ends
/// with its incident phase, and a window that runs on through the healthy stretch after it calls
/// the phase's own finding over within two trend steps of the phase's end (the KV pressure drains
/// and the rejections stop with the load; the other phases' first findings there are read from
/// signals that cannot come back so soon, such as a burn rate over an hour, or are not theirs).
#[test]
fn the_real_engines_incidents_are_over_where_their_phase_ended_and_not_before() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (manifest, prom) = real_engine(tmp.path());
    let phases = manifest["phases"].as_array().expect("phases");
    let mut over = Vec::new();
    for (i, p) in phases.iter().enumerate().filter(|(_, p)| p["kind"] == "incident") {
        let name = p["name"].as_str().unwrap_or_default();
        let ends = [Some(time(&p["end"])), phases.get(i + 1).map(|n| time(&n["end"]))];
        for (after, end) in ends.into_iter().enumerate().filter_map(|(k, e)| e.map(|e| (k == 1, e))) {
            let Some(report) = diagnose_from_phase_start(&prom, phases, p, end) else { continue };
            let at = end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            for f in report["findings"].as_array().into_iter().flatten() {
                let Some(ended) = f["ended"].as_str() else { continue };
                let ended = time(&Value::from(ended));
                let rule = f["rule"].as_str().unwrap_or_default();
                assert!(after, "real engine {name}: {rule} called over at {ended} in a window ending with the phase at {at}");
                let expected = p["expect_first"].as_array().into_iter().flatten().any(|r| r == rule);
                let (_, _, step) = onset_of(f);
                let error = (ended - time(&p["end"])).num_seconds();
                eprintln!("real engine {name}: {rule} over at {ended}, phase end {}, error {error} s (step {step} s)", p["end"]);
                if expected {
                    assert!(error.unsigned_abs() <= 2 * step.max(5), "real engine {name}: {rule} over {error} s from the phase's end");
                    over.push(name.to_string());
                }
            }
        }
    }
    assert!(over.contains(&"kv-pressure".to_string()) && over.contains(&"rejections".to_string()), "called over: {over:?}");
}

/// Every other generated incident: its expected first finding dated within two trend steps of the
/// incident's start (four for the KV leak, a ramp that leaves the noise only gradually). The
/// replica-level stories (one target down, one outlier replica, one GPU's XID errors) are decided
/// per replica, which has no trend: their onset is unknown, and never "before the window".
#[test]
fn every_generated_incident_is_dated_near_its_start() {
    let names = [
        "load-exceeds-capacity",
        "severe-saturation",
        "http-errors",
        "kv-cache-leak",
        "prefill-starvation",
        "recompute-thrashing",
        "workload-shift",
        "requests-rejected",
        "request-errors",
        "engine-asleep",
        "gpu-throttling",
        "target-down",
        "replica-outlier",
        "gpu-errors",
        "spec-decode-inefficient",
        "kv-transfer-failures",
        "prefix-cache-miss",
    ];
    let mut measured = Vec::new();
    for name in names {
        let spec = load_scenario(name);
        let truth = spec.incident_onset().expect("an incident");
        let rule = spec.expect.first.clone().unwrap_or_default();
        let prom = PromServer::start_generated(&spec);
        let json = explain_json(&prom.url, &at_window_end(&spec), &[]).json();
        let f = json["findings"].as_array().into_iter().flatten().find(|f| f["rule"] == rule.as_str()).cloned();
        let f = f.unwrap_or_else(|| panic!("{name}: no {rule} finding\n{json:#}"));
        let (onset, signal, step) = onset_of(&f);
        let error = onset.map(|o| (o - truth).num_seconds());
        measured.push(format!("{name}: {rule} via {signal:?}: error {error:?} s (step {step} s)"));
        match error {
            Some(e) => {
                let steps = if name == "kv-cache-leak" { 4 } else { 2 };
                assert!(e.unsigned_abs() <= steps * step, "{name}: onset {e} s from the truth (step {step} s)");
            }
            None => {
                assert!(signal.is_none(), "{name}: reads as present before a window it began in");
                assert!(["target-down", "replica-outlier", "gpu-errors"].contains(&name), "{name}: no onset");
            }
        }
    }
    eprintln!("{}", measured.join("\n"));
}
