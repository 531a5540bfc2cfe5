//! Change events against the truth. Every generated scenario with restarts, configuration changes,
//! rollouts, replicas removed, targets down or GPU errors is backfilled into a real Prometheus and
//! diagnosed by the binary: every change the generator made must be listed (kind, model, time within
//! a few scrape intervals), a finding the scenario says follows a change must name it
//! (`expect.caused_by`), a near miss (a restart or rollout that changes nothing) must blame nothing
//! (`expect.no_cause`), and a change-led finding must be dated at the change. The same events must
//! come out of VictoriaMetrics and out of a replayed recording, and `check --since deploy` must find
//! the deploy.

mod common;

use std::path::Path;

use chrono::{DateTime, Utc};
use serde_json::Value;
use vllm_diag_sim::ScenarioSpec;

use common::run::{at_window_end, explain_json, run};
use common::victoria::VmServer;
use common::{load_scenario, PromServer};

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}"))).unwrap_or_else(|e| panic!("{v}: {e}")).with_timezone(&Utc)
}

/// Every scenario file whose generator makes at least one change event.
fn scenarios_with_events() -> Vec<(String, ScenarioSpec)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".toml").map(String::from))
        .collect();
    names.sort();
    names.into_iter().map(|n| (n.clone(), load_scenario(&n))).filter(|(_, s)| !s.true_events().is_empty()).collect()
}

/// Rollouts are named by their Deployment's generation or by the new image: either is the rollout.
fn same_family(kind: &str, expected: &str) -> bool {
    let rollout = |k: &str| k == "rollout" || k == "version-change";
    kind == expected || (rollout(kind) && rollout(expected))
}

fn model_of(e: &Value) -> &str {
    e["scope"]["model_name"].as_str().unwrap_or_default()
}

/// Check one scenario's report against its truth; returns what failed, one line each.
fn judge(name: &str, spec: &ScenarioSpec, report: &Value) -> Vec<String> {
    let mut failures = Vec::new();
    let events = report["events"].as_array().cloned().unwrap_or_default();
    let interval = spec.interval.as_secs() as i64;
    for truth in spec.true_events() {
        // Dated within a few scrape intervals; a restart by its new process, after the down time.
        let slack = 4 * interval.max(15) + if truth.kind == "restart" { 120 } else { 0 };
        let hit = events
            .iter()
            .any(|e| e["kind"] == truth.kind.as_str() && model_of(e) == truth.model && (time(&e["time"]) - truth.time).num_seconds().abs() <= slack);
        if !hit {
            failures.push(format!(
                "{name}: {} of {} at {} ({}) not listed within {slack} s; listed: {}",
                truth.kind,
                truth.model,
                truth.time,
                truth.detail,
                brief(&events)
            ));
        }
    }
    let findings = report["findings"].as_array().cloned().unwrap_or_default();
    if let Some(kind) = &spec.expect.caused_by {
        match findings.first() {
            Some(f) if same_family(f["preceded_by"]["event"]["kind"].as_str().unwrap_or_default(), kind) => {
                // A finding led by a change is dated at it.
                let onset = time(&f["onset"]);
                let change = time(&f["preceded_by"]["event"]["time"]);
                let lead = (onset - change).num_seconds();
                if !(-120..=600).contains(&lead) {
                    failures.push(format!("{name}: onset {onset} is {lead} s from the change at {change}"));
                }
            }
            Some(f) => failures.push(format!(
                "{name}: the first finding ({}, onset {}, onset_signal {}) is not tied to a {kind}: preceded_by = {}; evidence {}",
                f["rule"],
                f["onset"],
                f["onset_signal"],
                f["preceded_by"],
                f["evidence"].as_array().into_iter().flatten().map(|e| format!("{}={}", e["signal"], e["passed"])).collect::<Vec<_>>().join(" ")
            )),
            None => failures.push(format!("{name}: no finding, expected one caused by {kind}")),
        }
    }
    if spec.expect.no_cause {
        for f in &findings {
            if !f["preceded_by"].is_null() {
                failures.push(format!("{name}: near miss, yet {} is blamed on {}", f["rule"], f["preceded_by"]["text"]));
            }
        }
    }
    failures
}

fn brief(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "{} {} {} ({})",
                e["time"].as_str().unwrap_or_default(),
                e["kind"].as_str().unwrap_or_default(),
                model_of(e),
                e["detail"].as_str().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn generated_changes_are_listed_dated_and_blamed_only_when_they_matter() {
    let scenarios = scenarios_with_events();
    assert!(scenarios.len() >= 6, "expected the event scenarios in fixtures/scenarios, found {}", scenarios.len());
    assert!(scenarios.iter().any(|(_, s)| s.expect.caused_by.is_some()) && scenarios.iter().any(|(_, s)| s.expect.no_cause));
    let mut failures = Vec::new();
    for (name, spec) in &scenarios {
        let prom = PromServer::start_generated(spec);
        let report = explain_json(&prom.url, &at_window_end(spec), &[]).json();
        eprintln!("{name}: {}", brief(report["events"].as_array().map(Vec::as_slice).unwrap_or_default()));
        failures.extend(judge(name, spec, &report));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_scenario_without_changes_lists_none() {
    let spec = load_scenario("healthy-steady");
    assert!(spec.true_events().is_empty());
    let prom = PromServer::start_generated(&spec);
    let report = explain_json(&prom.url, &at_window_end(&spec), &[]).json();
    assert_eq!(report["events"], serde_json::json!([]), "{:#}", report["events"]);
}

/// The events of a report, as comparable lines.
fn lines(report: &Value) -> Vec<String> {
    report["events"].as_array().into_iter().flatten().map(|e| format!("{} {} {} {}", e["time"], e["kind"], e["scope"], e["detail"])).collect()
}

#[test]
fn victoriametrics_and_a_replayed_recording_give_the_same_events() {
    let spec = load_scenario("rollout-slow-decode");
    let at = at_window_end(&spec);
    let prom = PromServer::start_generated(&spec);
    let dir = tempfile::tempdir().expect("temp dir");
    let rec = dir.path().join("run.json");
    let rec_arg = rec.to_str().expect("utf-8 path");
    let live = explain_json(&prom.url, &at, &["--record", rec_arg]).json();
    assert!(!lines(&live).is_empty());
    assert!(!live["findings"][0]["preceded_by"].is_null(), "{:#}", live["findings"][0]);

    let replayed = run(&["explain", "--replay", rec_arg, "--format", "json"], &[]).json();
    assert_eq!(lines(&replayed), lines(&live));
    assert_eq!(replayed["findings"][0]["preceded_by"], live["findings"][0]["preceded_by"]);

    let vm = VmServer::start_empty();
    vm.load_series(&vllm_diag_sim::generate_series(&spec), spec.start, spec.window_end());
    let through_vm = explain_json(&vm.url, &at, &[]).json();
    assert_eq!(lines(&through_vm), lines(&live));
    assert_eq!(through_vm["findings"][0]["preceded_by"]["event"]["kind"], live["findings"][0]["preceded_by"]["event"]["kind"]);
}

#[test]
fn check_since_deploy_starts_at_the_last_rollout_and_says_so() {
    let spec = load_scenario("rollout-slow-decode");
    let rollout = spec.true_events().into_iter().find(|e| e.kind == "rollout").expect("a rollout in the scenario");
    let prom = PromServer::start_generated(&spec);
    let at = at_window_end(&spec);
    let out = run(&["check", "--since", "deploy", "--prometheus", &prom.url, "--at", &at, "--format", "json"], &[]);
    let report = out.json();
    let deploy = time(&report["deploy"]["time"]);
    assert!((deploy - rollout.time).num_seconds().abs() <= 2 * spec.interval.as_secs() as i64, "deploy {deploy}, rollout {}", rollout.time);
    assert_eq!(time(&report["window"]["start"]), deploy, "the window starts at the deploy");
    assert!(out.stderr.contains("deploy taken from the metrics:"), "{}", out.stderr);
    assert_eq!(out.code, 1, "slow decode after the rollout fails the check\n{}", out.stderr);

    // No rollout or restart in the last six hours: not evaluated, with what to give instead.
    let quiet = load_scenario("healthy-steady");
    let prom = PromServer::start_generated(&quiet);
    let out = run(&["check", "--since", "deploy", "--prometheus", &prom.url, "--at", &at_window_end(&quiet)], &[]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(out.stderr.contains("--since deploy: no rollout, restart or configuration change") && out.stderr.contains("--since 20m"), "{}", out.stderr);
}

/// The real engine's events run (`scripts/real-engine.sh --events`): one vLLM engine restarted twice
/// under one load, first with the same flags, then with a quarter of the KV cache.
mod real_engine {
    use std::io::{BufRead, Write};

    use super::*;

    struct Phase {
        name: String,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        baseline: Option<String>,
    }

    fn fixture() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-events")
    }

    fn manifest() -> Value {
        let p = fixture().join("manifest.json");
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn phases(m: &Value) -> Vec<Phase> {
        m["phases"]
            .as_array()
            .expect("phases")
            .iter()
            .map(|p| Phase {
                name: p["name"].as_str().unwrap_or_default().into(),
                start: time(&p["start"]),
                end: time(&p["end"]),
                baseline: p["baseline_phase"].as_str().map(String::from),
            })
            .collect()
    }

    fn served(dir: &Path) -> PromServer {
        let gz = fixture().join("samples.om.gz");
        let file = std::fs::File::open(&gz).unwrap_or_else(|e| panic!("{}: {e}", gz.display()));
        let out = dir.join("samples.om");
        let mut w = std::io::BufWriter::new(std::fs::File::create(&out).expect("create samples.om"));
        for line in std::io::BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
            writeln!(w, "{}", line.unwrap_or_else(|e| panic!("{}: {e}", gz.display()))).expect("write samples.om");
        }
        w.flush().expect("flush samples.om");
        drop(w);
        PromServer::start_with_openmetrics(&out)
    }

    /// `explain` of a phase against its baseline phase, as JSON.
    fn diagnose(url: &str, all: &[Phase], name: &str) -> Value {
        let p = all.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no phase {name}"));
        let b = all.iter().find(|b| Some(&b.name) == p.baseline.as_ref()).unwrap_or_else(|| panic!("{name}: no baseline phase"));
        let window = format!("{}s", (p.end - p.start).num_seconds());
        let offset = format!("{}s", (p.start - b.start).num_seconds());
        let at = p.end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        run(&["explain", "--prometheus", url, "--at", &at, "--window", &window, "--baseline", &offset, "--no-config", "--format", "json"], &[]).json()
    }

    fn listed<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
        report["events"].as_array().into_iter().flatten().filter(|e| e["kind"] == kind).collect()
    }

    #[test]
    fn the_config_change_is_named_as_the_cause_and_the_plain_restart_blames_nothing() {
        let m = manifest();
        let all = phases(&m);
        let restarts = m["restarts"].as_array().expect("restarts");
        let (plain, change) = (&restarts[0], &restarts[1]);
        assert_eq!((plain["kind"].as_str(), change["kind"].as_str()), (Some("restart"), Some("config-change")));
        let started = |r: &Value| {
            DateTime::<Utc>::from_timestamp_millis((r["process_start_after"].as_f64().expect("process_start_after") * 1000.0) as i64).expect("a time")
        };
        let dir = tempfile::tempdir().expect("temp dir");
        let prom = served(dir.path());

        // The plain restart lies between steady-1 and steady-2: listed, exactly dated, and steady-2
        // stays healthy with nothing blamed on it.
        let steady = diagnose(&prom.url, &all, "steady-2");
        let r = listed(&steady, "restart");
        assert!(
            r.iter().any(|e| (time(&e["time"]) - started(plain)).num_seconds().abs() <= 1),
            "restart at {} not listed: {}",
            started(plain),
            brief(steady["events"].as_array().unwrap())
        );
        assert!(listed(&steady, "config-change").is_empty(), "{}", brief(steady["events"].as_array().unwrap()));
        for f in steady["findings"].as_array().into_iter().flatten() {
            assert!(f["severity"] == "info" && f["preceded_by"].is_null(), "steady-2: {f:#}");
        }

        // The second restart cut the KV cache from 160 to 40 blocks: the pressure phase's first
        // finding is tied to that change, dated by the process that brought it.
        let pressure = diagnose(&prom.url, &all, "pressure");
        let cfg = listed(&pressure, "config-change");
        assert_eq!(cfg.len(), 1, "{}", brief(pressure["events"].as_array().unwrap()));
        assert_eq!((cfg[0]["before"]["num_gpu_blocks"].as_str(), cfg[0]["after"]["num_gpu_blocks"].as_str()), (Some("160"), Some("40")));
        assert!(
            (time(&cfg[0]["time"]) - started(change)).num_seconds().abs() <= 1,
            "config change dated {} vs process start {}",
            cfg[0]["time"],
            started(change)
        );
        let down = listed(&pressure, "target-down");
        assert!(
            down.iter().any(|e| (time(&e["time"]) - time(&change["down"])).num_seconds().abs() <= 20),
            "target-down near {}: {}",
            change["down"],
            brief(pressure["events"].as_array().unwrap())
        );
        let first = &pressure["findings"][0];
        assert!(["kv-cache-pressure", "recompute-thrashing"].contains(&first["rule"].as_str().unwrap_or_default()), "{first:#}");
        assert_eq!(first["preceded_by"]["event"]["kind"], "config-change", "{first:#}");
        assert!(first["steps"][0].as_str().unwrap_or_default().starts_with("Start with the configuration change"), "{:#}", first["steps"]);
    }
}
