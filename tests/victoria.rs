//! The same incident gives the same diagnosis from VictoriaMetrics as from Prometheus.
//!
//! Every scenario in fixtures/scenarios/ is loaded into a real Prometheus (backfilled by promtool)
//! and into a real VictoriaMetrics single-node (imported through /api/v1/import/prometheus), and
//! `vllm-diag explain` runs against each with the same --at. The findings (rule, scope, severity,
//! in order), what each finding absorbed and which of its conditions held, what was not evaluated
//! and what was healthy must be identical. Values may differ a little (MetricsQL's ranges leave out
//! a sample exactly at their start, its `rate()` does not extrapolate and, for a series that ends
//! inside the range, divides by the time the series existed), so the test bounds the difference of
//! every evidence value rather than asking for equality.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use assert_cmd::Command;
use serde_json::Value;

use common::victoria::start_vm_scenario;

/// Scenarios that run at once. Each holds two servers and runs the binary twice; CI has 2 cores.
const PARALLEL: usize = 3;

/// How far an evidence value from VictoriaMetrics may be from Prometheus' (relative). The data puts a
/// sample exactly on the window's start: Prometheus 2.x ranges include it, MetricsQL ranges do not,
/// so an `avg_over_time` averages one sample more in Prometheus (seen up to 14% when that sample is
/// the last of the healthy baseline). A replica that stopped answering mid-window gets its rate over
/// the time it was up from VictoriaMetrics and over the whole range from Prometheus (13% seen).
const VALUE_TOLERANCE: f64 = 0.2;
/// Below this, two evidence values are the same reading of nothing (floating-point rounding).
const ABSOLUTE_TOLERANCE: f64 = 1e-9;

/// Scenarios where VictoriaMetrics' documented semantics really do change the diagnosis, with why.
/// An entry here is asserted to still differ, so it cannot go stale.
const KNOWN_DIFFERENCES: &[(&str, &str)] = &[
    (
        "rollout-slow-decode",
        "backfilled data has no staleness markers: for five minutes after each pod of the rollout is replaced, Prometheus' lookback still sees the old pod's gauges beside the new one's, VictoriaMetrics does not; both name slow-decode first, Prometheus from the whole window, VictoriaMetrics from its last five minutes alone (the two ranked the findings differently before slow-decode was also judged there)",
    ),
    (
        "replica-removed-overload",
        "the same lookback: for five minutes after two replicas are removed Prometheus still counts their last samples, so target-down also absorbs replica-imbalance there; VictoriaMetrics does not. The first finding, target-down tied to the removal, is the same",
    ),
    (
        "gauge-only-load-exceeds-capacity-no-counters",
        "the waiting gauge's slope over a queue that holds level: Prometheus' deriv reads a small rise, VictoriaMetrics' does not, so prefill-starvation (whose TTFT and output length cannot be read without histograms) is undecided on one and healthy on the other. The first finding, load-exceeds-capacity from the waiting gauge, is the same",
    ),
];

/// Run explain with JSON output; returns (exit code, report or Null, stderr).
fn explain(url: &str, at: &str, extra: &[&str]) -> (i32, Value, String) {
    let out = Command::cargo_bin("vllm-diag")
        .expect("the vllm-diag binary is built")
        .args(["explain", "--prometheus", url, "--at", at, "--format", "json", "--quiet"])
        .args(extra)
        .env_remove("VLLM_DIAG_PROMETHEUS_URL")
        .env_remove("VLLM_DIAG_BEARER_TOKEN")
        .output()
        .expect("vllm-diag runs");
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, String::from_utf8_lossy(&out.stderr).to_string())
}

fn at_of(spec: &vllm_diag_sim::ScenarioSpec) -> String {
    spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// What must be identical between two backends: the ranked findings with what each absorbed and
/// which of their conditions held, and the sets of healthy and not-evaluated rule/scope pairs.
#[derive(Debug, PartialEq)]
struct Diagnosis {
    findings: Vec<Finding>,
    not_evaluated: BTreeSet<(String, String)>,
    healthy: BTreeSet<(String, String)>,
}

#[derive(Debug, PartialEq)]
struct Finding {
    rule: String,
    scope: String,
    severity: String,
    also_consistent: Vec<String>,
    /// Decided over the window's last minutes alone (`recent`).
    recent: bool,
    /// Every evidence signal with whether its condition held (`null` for context) and whether its
    /// quantile rests on too few observations.
    evidence: Vec<(String, (Value, Value))>,
}

fn diagnosis(report: &Value) -> Diagnosis {
    let list = |k: &str| report[k].as_array().cloned().unwrap_or_default();
    let pair = |v: &Value| (v["rule"].as_str().unwrap_or("").to_string(), v["scope"].to_string());
    Diagnosis {
        findings: list("findings")
            .iter()
            .map(|f| {
                let strings = |k: &str, field: &str| -> Vec<String> {
                    f[k].as_array().map(|a| a.iter().map(|x| x[field].as_str().unwrap_or("").to_string()).collect()).unwrap_or_default()
                };
                let evidence = f["evidence"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|e| {
                                let held = (e["passed"].clone(), e["low_confidence"].clone());
                                (e["signal"].as_str().unwrap_or("").to_string(), held)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                Finding {
                    rule: f["rule"].as_str().unwrap_or("").to_string(),
                    scope: f["scope"].to_string(),
                    severity: f["severity"].as_str().unwrap_or("").to_string(),
                    also_consistent: strings("also_consistent", "rule"),
                    recent: f["recent"].is_object(),
                    evidence,
                }
            })
            .collect(),
        not_evaluated: list("not_evaluated").iter().map(pair).collect(),
        healthy: list("healthy").iter().map(pair).collect(),
    }
}

/// The evidence values of every finding, by (rule, scope, signal), for the value comparison. A
/// signal read over the window's last minutes (a finding's `recent`) is another reading than the
/// whole window's, and keyed apart.
fn evidence_values(report: &Value) -> Vec<((String, String, String), f64)> {
    let mut out = Vec::new();
    for f in report["findings"].as_array().cloned().unwrap_or_default() {
        let late: Vec<&str> = f["recent"]["signals"].as_array().into_iter().flatten().filter_map(|s| s.as_str()).collect();
        for e in f["evidence"].as_array().cloned().unwrap_or_default() {
            if let Some(v) = e["value"].as_f64() {
                let signal = e["signal"].as_str().unwrap_or("");
                let key = (
                    f["rule"].as_str().unwrap_or("").to_string(),
                    f["scope"].to_string(),
                    if late.contains(&signal) { format!("{signal} (last minutes)") } else { signal.to_string() },
                );
                out.push((key, v));
            }
        }
    }
    out
}

struct Compared {
    name: String,
    prom: Diagnosis,
    vm: Diagnosis,
    /// The largest relative difference between evidence values, and where.
    worst: Option<(f64, String)>,
    /// Evidence values further apart than [`VALUE_TOLERANCE`].
    too_far: Vec<String>,
}

fn compare(name: &str) -> Compared {
    // The Prometheus run tests/differential.rs and tests/pathologies.rs judge as well, made once per
    // build (the same arguments but --quiet and --record, which change neither the report nor the
    // exit code).
    let run = common::scenario_run(name);
    let at = run.at.clone();
    let (pcode, preport, perr) = (run.code.unwrap_or(-1), run.report(), run.stderr.clone());
    assert!(preport.is_object(), "{name}: Prometheus gave no report (exit {pcode}): {perr}");
    let (_, vm) = start_vm_scenario(name);
    let (vcode, vreport, verr) = explain(&vm.url, &at, &[]);
    assert!(vreport.is_object(), "{name}: VictoriaMetrics gave no report (exit {vcode}): {verr}\n{}", vm.log_text());
    assert_eq!(pcode, vcode, "{name}: exit codes differ; VictoriaMetrics stderr: {verr}");

    let vm_values: std::collections::BTreeMap<_, _> = evidence_values(&vreport).into_iter().collect();
    let mut worst: Option<(f64, String)> = None;
    let mut too_far = Vec::new();
    for (key, p) in evidence_values(&preport) {
        let what = |v: String| format!("{} {} {}: prometheus {p}, victoriametrics {v}", key.0, key.1, key.2);
        let Some(&v) = vm_values.get(&key) else {
            too_far.push(what("no number".into()));
            continue;
        };
        // Two readings of nothing (a difference of means that cancels out, 1e-15 against 1e-12: the
        // backends sum in another order) are equal, whatever their ratio.
        let rel = if p == v || (p - v).abs() <= ABSOLUTE_TOLERANCE { 0.0 } else { (p - v).abs() / p.abs().max(v.abs()) };
        if rel > VALUE_TOLERANCE {
            too_far.push(what(v.to_string()));
        }
        if worst.as_ref().is_none_or(|(w, _)| rel > *w) {
            worst = Some((rel, what(v.to_string())));
        }
    }
    Compared { name: name.to_string(), prom: diagnosis(&preport), vm: diagnosis(&vreport), worst, too_far }
}

fn all_scenarios() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .collect();
    names.sort();
    names
}

/// Run `work` over `items` on at most `parallel` threads, results in the order of `items`.
fn bounded<T: Send>(items: &[String], parallel: usize, work: impl Fn(&str) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..parallel.min(items.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(item) = items.get(i) else { break };
                let r = work(item);
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
            });
        }
    });
    results.into_inner().unwrap_or_else(|p| p.into_inner()).into_iter().map(|r| r.expect("every item ran")).collect()
}

#[test]
fn every_scenario_gives_the_same_diagnosis_from_victoriametrics_as_from_prometheus() {
    let names = all_scenarios();
    assert!(names.len() >= 40, "fixtures/scenarios/ holds only {} scenarios", names.len());
    let compared = bounded(&names, PARALLEL, compare);

    let mut problems = Vec::new();
    for c in &compared {
        let known = KNOWN_DIFFERENCES.iter().find(|(n, _)| *n == c.name);
        match (c.prom == c.vm, known) {
            (true, None) => {}
            (false, Some(_)) => {}
            (true, Some((_, why))) => {
                problems.push(format!("{}: listed as a known difference ({why}) but both backends now agree: remove it from KNOWN_DIFFERENCES", c.name))
            }
            (false, None) => problems.push(format!("{}: the diagnoses differ\n  prometheus:      {:?}\n  victoriametrics: {:?}", c.name, c.prom, c.vm)),
        }
        for far in &c.too_far {
            // A known difference may leave a finding on one side only: its evidence has no number on
            // the other, which is that difference, not another one.
            if known.is_some() && far.ends_with("no number") {
                continue;
            }
            problems.push(format!("{}: evidence more than {}% apart: {far}", c.name, VALUE_TOLERANCE * 100.0));
        }
        if let Some((rel, what)) = &c.worst {
            eprintln!("{}: largest evidence difference {:.3}% ({what})", c.name, rel * 100.0);
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// VictoriaMetrics single-node serves the Prometheus API at the root and again below `/prometheus`
/// (the path Grafana's VictoriaMetrics examples use). A base URL with that prefix must give the same
/// report, which also shows the prefix is kept: the server refuses paths it does not serve (below).
#[test]
fn the_prometheus_prefix_victoriametrics_serves_gives_the_same_report() {
    let (spec, vm) = start_vm_scenario("kv-cache-pressure");
    let at = at_of(&spec);
    let (code, root, err) = explain(&vm.url, &at, &[]);
    assert!(root.is_object(), "no report from {} (exit {code}): {err}", vm.url);
    assert_eq!(root["findings"][0]["rule"], "kv-cache-pressure", "{root:#}");
    for prefix in ["/prometheus", "/prometheus/"] {
        let url = format!("{}{prefix}", vm.url);
        let (c, mut report, e) = explain(&url, &at, &[]);
        assert_eq!(c, code, "{url}: {e}");
        let shown = report["source"]["url"].as_str().unwrap_or("").to_string();
        assert!(shown.ends_with("/prometheus"), "{url}: the report names the source as {shown:?}");
        report["source"]["url"] = root["source"]["url"].clone();
        if let Some(diff) = first_difference(&root, &report, "") {
            panic!("{url}: the report differs from the one read at the root: {diff}");
        }
    }
}

/// Where two reports differ, ignoring the last bits of floating-point values: VictoriaMetrics sums
/// series in parallel, in no fixed order, so asking the same query twice can give values that differ
/// by an ulp or two.
fn first_difference(a: &Value, b: &Value, at: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter().find_map(|k| first_difference(x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null), &format!("{at}.{k}")))
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (u, v))| first_difference(u, v, &format!("{at}[{i}]")))
        }
        (Value::Number(x), Value::Number(y)) => {
            let (u, v) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            let close = u == v || (u - v).abs() <= 1e-9 * u.abs().max(v.abs());
            (!close).then(|| format!("{at}: {u} against {v}"))
        }
        _ => (a != b).then(|| format!("{at}: {a} against {b}")),
    }
}

/// The cluster version's path (`/select/<tenant>/prometheus`) on a single node is a clear error,
/// exit 3, naming the URL and the server's answer: the prefix is sent as given, never guessed away.
#[test]
fn a_path_the_server_does_not_serve_is_an_error_naming_the_url() {
    let (spec, vm) = start_vm_scenario("healthy-steady");
    let url = format!("{}/select/0/prometheus", vm.url);
    let (code, report, err) = explain(&url, &at_of(&spec), &[]);
    assert_eq!(code, 3, "{err}");
    assert!(report.get("findings").is_none() && report["error"]["exit_code"] == 3, "a report came out of a path the server refused: {report}");
    assert!(err.contains(&url) && err.contains("HTTP 400"), "{err}");
    // VictoriaMetrics puts its reason at the end of a long line: the excerpt keeps it.
    assert!(err.contains("unsupported path"), "{err}");
}

/// --record against VictoriaMetrics stores its answers; --replay reproduces the report offline.
#[test]
fn a_recording_made_against_victoriametrics_replays_to_the_same_report() {
    let (spec, vm) = start_vm_scenario("slow-decode");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("vm.json");
    let file_arg = file.to_str().expect("UTF-8 temp path");
    let (code, live, err) = explain(&vm.url, &at_of(&spec), &["--record", file_arg]);
    assert!(live.is_object(), "exit {code}: {err}");
    assert_eq!(live["findings"][0]["rule"], "slow-decode", "{live:#}");
    drop(vm);
    let out = Command::cargo_bin("vllm-diag")
        .expect("the vllm-diag binary is built")
        .args(["explain", "--replay", file_arg, "--format", "json"])
        .output()
        .expect("vllm-diag runs");
    assert_eq!(out.status.code(), Some(code), "{}", String::from_utf8_lossy(&out.stderr));
    let replayed: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    // A replay decodes the recorded bytes: unlike asking the server again, it is exact.
    assert_eq!(replayed, live);
}

/// VictoriaMetrics answers "which metric names hold data between these times" for whole days, so
/// discovery cannot tell that a window after the data (on the same day) is empty, where Prometheus
/// says so at once. The run must still give no verdict: exit 3, nothing healthy, nothing found.
/// (A 6h SLO burn rate reaching back to the data is no sign that the window holds any.)
#[test]
fn a_window_after_the_data_on_the_same_day_gives_no_verdict_as_with_prometheus() {
    let name = "kv-cache-pressure";
    let (spec, vm) = start_vm_scenario(name);
    let late = (spec.window_end() + chrono::Duration::minutes(160)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert_eq!(&late[..10], &at_of(&spec)[..10], "the late window must fall on the same day");
    let (code, report, err) = explain(&vm.url, &late, &[]);
    assert_eq!(code, 3, "{err}\n{report:#}");
    assert!(err.contains("nothing could be evaluated"), "{err}");
    assert_eq!(report["stats"]["rules_evaluated"], 0, "{report:#}");
    assert_eq!(report["healthy"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["findings"], serde_json::json!([]), "{report:#}");

    let (_, prom) = common::start_scenario(name);
    let (pcode, _, perr) = explain(&prom.url, &late, &[]);
    assert_eq!(pcode, 3, "{perr}");
    assert!(perr.contains("no vLLM metrics"), "{perr}");
}

/// `rules export --backtest` asks range queries, which VictoriaMetrics answers with its own
/// lookback and step handling: the incident's alert still fires once, on its model, after it began.
#[test]
fn the_alert_backtest_from_victoriametrics_fires_the_incident_alert_once_on_its_model() {
    let (spec, vm) = start_vm_scenario("kv-cache-pressure");
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["--no-config", "rules", "export", "--backtest", "7d", "--at", &at_of(&spec), "--prometheus", &vm.url, "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}{}", String::from_utf8_lossy(&out.stdout));
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let alert = json["alerts"].as_array().unwrap().iter().find(|a| a["rule"] == "kv-cache-pressure").cloned().expect("exported");
    assert_eq!(alert["status"], "fired", "{alert:#}");
    let episodes = alert["episodes"].as_array().unwrap();
    assert_eq!(episodes.len(), 1, "{alert:#}");
    assert_eq!(episodes[0]["labels"]["model_name"], spec.expect.model.clone().unwrap().as_str());
    let fired = chrono::DateTime::parse_from_rfc3339(episodes[0]["firing_since"].as_str().unwrap()).unwrap();
    assert!(fired > spec.incident_onset().unwrap(), "{alert:#}");
}
