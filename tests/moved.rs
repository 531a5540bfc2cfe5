//! What else moved (issue 40), against a real Prometheus: no healthy stretch of any shipped data,
//! generated or real, lists a change no rule explains, and how close each came is measured (the
//! distribution the thresholds in rules/thresholds.toml were picked from, docs/how-it-decides.md).
//! Incidents no rule names are listed with their onset, and their near misses stay quiet.
//!
//! Each run is recorded (`--record`), and the trends the stage read are read back from the
//! recording: for every watched signal and scope, the factor and the robust z it held for the
//! shortest stretch (`explain::moved::margin`), printed as a table with `--nocapture`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::Value;
use std::sync::Arc;

use vllm_diag::explain::moved::{self, Bars, Margin};
use vllm_diag::explain::{explain_traced, ExplainOptions};
use vllm_diag::source::record::Replay;

/// One signal on one scope of one run: how close it came.
#[derive(Debug, Clone)]
struct Row {
    dataset: String,
    signal: String,
    scope: String,
    m: Margin,
}

fn time(v: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default()).unwrap_or_else(|e| panic!("bad time {v}: {e}")).with_timezone(&Utc)
}

/// The margins of every watched signal in a recorded run, its trends split as the stage splits them.
fn margins(dataset: &str, report: &Value, recording: &Path) -> Vec<Row> {
    let rules = vllm_diag::rules::load_builtin().unwrap();
    let (w_start, w_end) = (time(&report["window"]["start"]), time(&report["window"]["end"]));
    let window = (w_end - w_start).to_std().unwrap();
    let bars = Bars::from(&rules.thresholds).within(window);
    // The trends as the stage read them: the recording replayed through the pipeline, which
    // computes each watched signal's points from the reads it recorded.
    let (replay, params) = Replay::open(recording).unwrap_or_else(|e| panic!("{dataset}: {e}"));
    let selector = vllm_diag::prom::Selector::parse(&params.selector).unwrap();
    let opts = ExplainOptions { params, selector, concurrency: 4, deadline: std::time::Duration::from_secs(120) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (_, trace) = rt.block_on(explain_traced(Arc::new(replay), &rules, &opts)).unwrap_or_else(|e| panic!("{dataset}: the replay failed: {e}"));
    assert!(!trace.trends.is_empty(), "{dataset}: the run read no trend for what else moved");
    let mut rows = Vec::new();
    for ((signal, scope), (b, w)) in trace.trends {
        // The model's readings (a replica's are keyed `signal@replica`).
        let Some(def) = rules.signals.get(&signal) else { continue };
        let Some(worse) = def.worse else { continue };
        if let Some(m) = moved::margin(&b, &w, worse, def.moved_floor, &bars) {
            let scope = scope.get("model_name").cloned().unwrap_or_default();
            rows.push(Row { dataset: dataset.to_string(), signal, scope, m });
        }
    }
    rows
}

/// `explain --format json --record` with `args`; the report and the recording's margins.
fn recorded(dataset: &str, url: &str, at: &str, args: &[&str]) -> (Value, Vec<Row>) {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("run.json");
    let rec_s = rec.to_string_lossy().to_string();
    let extra = [args, &["--format", "json", "--no-config", "--record", &rec_s][..]].concat();
    let run = common::run::run(&common::run::explain_args(url, at, &extra), &[]);
    let report = run.json();
    let rows = margins(dataset, &report, &rec);
    (report, rows)
}

fn unexplained(report: &Value) -> Vec<String> {
    report["unexplained"]
        .as_array()
        .unwrap_or_else(|| panic!("no unexplained list in the report"))
        .iter()
        .map(|u| format!("{} {} on {} ({}x, z {}) since {}", u["signal"], u["direction"], u["scope"]["model_name"], u["ratio"], u["robust_z"], u["onset"]))
        .collect()
}

/// A trend past every bar that was not listed was explained by a finding: which (printed).
fn explaining(dataset: &str, report: &Value, rows: &[Row]) {
    let past: Vec<&str> = rows.iter().filter(|r| r.m.nearness >= 1.0).map(|r| r.signal.as_str()).collect();
    if !past.is_empty() {
        let findings: Vec<String> = report["findings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| {
                format!(
                    "{} {}{}",
                    f["severity"].as_str().unwrap_or("?"),
                    f["rule"].as_str().unwrap_or("?"),
                    if f["cold_start"].is_object() { " (cold start)" } else { "" }
                )
            })
            .collect();
        eprintln!("{dataset}: {} past every bar, explained by: {}", past.join(", "), findings.join(", "));
    }
}

/// The largest margins per signal over `rows`, as a table for the docs.
fn table(title: &str, rows: &[Row]) -> String {
    let mut by: BTreeMap<&str, (f64, f64, f64, f64, usize, String)> = BTreeMap::new();
    for r in rows {
        let e = by.entry(&r.signal).or_insert((1.0, 0.0, 0.0, 0.0, 0, String::new()));
        if r.m.nearness > e.3 {
            e.3 = r.m.nearness;
            e.5 = format!("{} {}", r.dataset, r.scope);
        }
        e.0 = e.0.max(r.m.ratio);
        e.1 = e.1.max(r.m.z);
        e.2 = e.2.max(r.m.change);
        e.4 += 1;
    }
    let mut out = format!("{title}\n| signal | trends | largest sustained factor | largest sustained robust z | largest sustained change | nearest to every bar at once | where |\n|---|---|---|---|---|---|---|\n");
    for (s, (ratio, z, change, near, n, at)) in by {
        out.push_str(&format!("| {s} | {n} | {ratio:.2} | {z:.1} | {change:.3} | {near:.2} | {at} |\n"));
    }
    out
}

fn healthy_scenarios() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(String::from))
        .filter(|n| dir.join(format!("{n}.toml")).exists())
        .filter(|n| {
            let ex = common::load_scenario(n).expect;
            ex.healthy && ex.unexplained.is_empty()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn no_healthy_generated_fleet_lists_a_change_and_none_comes_near_every_bar() {
    let names = healthy_scenarios();
    assert!(names.len() >= 20, "only {} healthy scenarios", names.len());
    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    for name in &names {
        let (spec, prom) = common::start_scenario(name);
        let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let (report, r) = recorded(name, &prom.url, &at, &[]);
        let listed = unexplained(&report);
        if !listed.is_empty() {
            wrong.push(format!("{name}: {}", listed.join("; ")));
        }
        explaining(name, &report, &r);
        rows.extend(r);
    }
    eprintln!("{}", table("Healthy generated fleets (near misses included)", &rows));
    assert!(rows.len() > names.len() * 5, "only {} signal trends measured", rows.len());
    assert!(wrong.is_empty(), "healthy fleets listed changes no rule explains:\n  {}", wrong.join("\n  "));
}

/// Every healthy phase of every real engine export, against the phase before it as the lab chose.
#[test]
fn no_healthy_phase_of_the_real_engines_lists_a_change() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut rows = Vec::new();
    let mut wrong = Vec::new();
    let mut judged = 0;
    for export in ["real-engine", "real-engine-fleet", "real-engine-limits", "real-engine-events", "real-engine-users"] {
        let dir: PathBuf = root.join(export);
        let tmp = tempfile::tempdir().unwrap();
        let prom = common::PromServer::start_with_openmetrics(common::unpack_lab_samples(&dir.join("samples.om.gz"), tmp.path(), true));
        let phases = common::lab_manifest(&dir);
        for p in phases.iter().filter(|p| p.kind == "healthy") {
            let Some(b) = phases.iter().find(|b| Some(&b.name) == p.baseline.as_ref()) else { continue };
            let window = format!("{}s", (p.end - p.start).num_seconds());
            let offset = format!("{}s", (p.start - b.start).num_seconds());
            let at = p.end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let dataset = format!("{export}/{}", p.name);
            let (report, r) = recorded(&dataset, &prom.url, &at, &["--window", &window, "--baseline", &offset]);
            judged += 1;
            let listed = unexplained(&report);
            if !listed.is_empty() {
                wrong.push(format!("{dataset}: {}", listed.join("; ")));
            }
            explaining(&dataset, &report, &r);
            rows.extend(r);
        }
    }
    eprintln!("{}", table("Healthy phases of the real engines", &rows));
    assert!(judged >= 16, "only {judged} healthy phases judged");
    assert!(!rows.is_empty(), "no trend measured");
    assert!(wrong.is_empty(), "healthy real phases listed changes no rule explains:\n  {}", wrong.join("\n  "));
}

/// An incident no rule names reads as what it is: not an all-clear, the change named with its
/// size and onset, exit code 0 unless `--fail-on unexplained` (docs/output.md). One a rule names
/// lists nothing beside it: TTFT up with queue and prefill flat is `slow-input-processing` (issue
/// 39), which explains it.
#[test]
fn an_incident_no_rule_names_is_not_an_all_clear_and_one_a_rule_names_lists_nothing_more() {
    let (spec, prom) = common::start_scenario("external-prefix-cache-miss");
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let run = common::run::run(&common::run::explain_args(&prom.url, &at, &["--no-config"]), &[]);
    eprintln!("{}", run.stdout);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The exit code: 1 with --fail-on unexplained (and info below it), 0 with warning; the JSON
    // outcome says the same; check's verdict fails with the level and passes without it.
    for (level, code) in [("unexplained", 1), ("info", 1), ("warning", 0), ("never", 0)] {
        let r = common::run::run(&common::run::explain_args(&prom.url, &at, &["--no-config", "--format", "json", "--fail-on", level]), &[]);
        assert_eq!(r.code, code, "--fail-on {level}: {}", r.stderr);
        assert_eq!(r.json()["outcome"], serde_json::json!({"exit_code": code, "fail_on": level}), "--fail-on {level}");
    }
    let since = spec.window_start().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let check =
        |extra: &[&str]| common::run::run(&[&["check", "--no-config", "--prometheus", &prom.url, "--since", &since, "--at", &at][..], extra].concat(), &[]);
    let failed = check(&["--fail-on", "unexplained"]);
    assert_eq!(failed.code, 1, "{}\n{}", failed.stdout, failed.stderr);
    assert!(
        failed.stdout.starts_with("FAIL: 1 signal moved that no rule explains since the deploy at ")
            && failed.stdout.lines().next().unwrap_or_default().contains("External prefix-cache hit ratio down on "),
        "{}",
        failed.stdout
    );
    let passed = check(&[]);
    assert_eq!(passed.code, 0, "{}\n{}", passed.stdout, passed.stderr);
    assert!(
        passed.stdout.starts_with("PASS: ") && passed.stdout.lines().next().unwrap_or_default().contains("but 1 signal moved that no rule explains"),
        "{}",
        passed.stdout
    );

    // A healthy fleet does not fail --fail-on unexplained.
    let (spec, prom) = common::start_scenario("healthy-ramp");
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let quiet = common::run::run(&common::run::explain_args(&prom.url, &at, &["--no-config", "--fail-on", "unexplained"]), &[]);
    assert_eq!(quiet.code, 0, "{}\n{}", quiet.stdout, quiet.stderr);
    let first = run.stdout.lines().next().unwrap_or_default();
    assert!(first.starts_with("NOT AN ALL-CLEAR: no warning or critical finding in "), "{}", run.stdout);
    let joined = run.stdout.replace("\n    ", " ");
    assert!(joined.contains("Also changed, not explained by any rule:\n  - External prefix-cache hit ratio down "), "{}", run.stdout);
    // The answer gives its size and since when, within the trend's step (3 minutes over a half-hour
    // window: 08:59 is the last point before the 09:00 onset); -v adds how it compares with the
    // baseline's spread.
    assert!(
        joined.contains(" down 0.05x on Qwen2.5-7B-Instruct since 09:0") || joined.contains(" down 0.05x on Qwen2.5-7B-Instruct since 08:59"),
        "{}",
        run.stdout
    );

    let (spec, prom) = common::start_scenario("slow-input-processing");
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let report = common::run::run(&common::run::explain_args(&prom.url, &at, &["--no-config", "--format", "json"]), &[]).json();
    assert_eq!(report["findings"][0]["rule"], "slow-input-processing");
    let listed = unexplained(&report);
    assert!(listed.is_empty(), "slow-input-processing explains its TTFT, yet: {listed:?}");
}

/// One replica's change is diluted in its model's value: TTFT, ITL and KV usage are also watched
/// replica by replica. The replica-outlier scenario's slow, nearly full replica is explained by
/// replica-outlier; with that rule turned off, slow-decode names the model's latency, and the
/// replica's KV usage, which neither reads, is listed for the replica, with its instance.
#[test]
fn one_replica_moving_is_listed_for_that_replica_unless_a_rule_explains_it() {
    let (spec, prom) = common::start_scenario("replica-outlier");
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let report = common::run::run(&common::run::explain_args(&prom.url, &at, &["--no-config", "--format", "json"]), &[]).json();
    assert_eq!(report["findings"][0]["rule"], "replica-outlier", "{report:#}");
    assert!(unexplained(&report).is_empty(), "replica-outlier explains its replica, yet: {:?}", unexplained(&report));

    let dir = tempfile::tempdir().unwrap();
    let config = common::run::write_file(dir.path(), "vllm-diag.toml", "[rules]\ndisabled = [\"replica-outlier\"]\n");
    let args = ["--config", common::run::path_arg(&config), "--format", "json"];
    let report = common::run::run(&common::run::explain_args(&prom.url, &at, &args), &[]).json();
    let listed = report["unexplained"].as_array().cloned().unwrap_or_default();
    assert_eq!(listed.len(), 1, "{listed:#?}");
    let u = &listed[0];
    assert_eq!((u["signal"].as_str(), u["direction"].as_str()), (Some("kv_usage_avg"), Some("up")), "{u:#}");
    assert_eq!(u["scope"]["model_name"], spec.expect.model.clone().unwrap().as_str(), "{u:#}");
    assert_eq!(u["scope"]["instance"], spec.expect.replica.clone().unwrap().as_str(), "{u:#}");
    assert!(u["query"].as_str().unwrap_or_default().contains("by (model_name, instance)"), "{u:#}");

    // Its near miss, the same way, lists nothing.
    let (spec, prom) = common::start_scenario("replica-outlier-near");
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let report = common::run::run(&common::run::explain_args(&prom.url, &at, &args), &[]).json();
    assert!(unexplained(&report).is_empty(), "{:?}", unexplained(&report));
}

/// What else moved reads each counter, gauge and histogram once and computes every watched
/// signal's trend itself: the trends it computed are the ones the signals' own queries give, point
/// by point, per model and per replica, on scenarios whose trends read quantiles, shares, means, a
/// gauge less another and a gauge per replica.
#[test]
fn the_trends_computed_from_shared_reads_are_what_the_signals_own_queries_give() {
    for name in ["kv-cache-pressure", "replica-outlier", "deferred-waiting", "http-errors", "slow-input-processing"] {
        let (spec, prom) = common::start_scenario(name);
        let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let dir = tempfile::tempdir().unwrap();
        let rec = dir.path().join("run.json");
        let rec_s = rec.to_string_lossy().to_string();
        let run = common::run::run(&common::run::explain_args(&prom.url, &at, &["--format", "json", "--no-config", "--record", &rec_s]), &[]);
        let report = run.json();
        let rules = vllm_diag::rules::load_builtin().unwrap();
        let (replay, params) = Replay::open(&rec).unwrap();
        let selector = vllm_diag::prom::Selector::parse(&params.selector).unwrap();
        let (b_span, w_span) = ((params.baseline.start, params.baseline.end), (params.window.start, params.window.end));
        let (group_by, replica) = (params.group_by.clone(), params.replica_label.clone());
        let opts = ExplainOptions { params, selector, concurrency: 4, deadline: std::time::Duration::from_secs(120) };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (_, trace) = rt.block_on(explain_traced(Arc::new(replay), &rules, &opts)).unwrap();
        assert!(!trace.moved_queries.is_empty(), "{name}: no trend read");
        let recorded = std::fs::read_to_string(&rec).unwrap();
        assert!(!recorded.contains(&format!("\\\"{}\\\"", moved::LABEL)), "{name}: the run asked the stage's own queries; it reads shared reads");
        // The same queries, asked of Prometheus as they are.
        let mut own: BTreeMap<(String, Vec<(String, String)>), BTreeMap<i64, f64>> = BTreeMap::new();
        for req in &trace.moved_queries {
            let query: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(req.form(None)).finish();
            let (status, body) = prom.get(&format!("/{}?{query}", req.path())).unwrap();
            assert_eq!(status, 200, "{name}: {body}");
            let ex = vllm_diag::source::Exchange { http_status: status, content_type: "application/json".into(), body };
            let resp = vllm_diag::source::decode("prom", req, &ex).unwrap();
            let vllm_diag::source::Data::Matrix(series) = resp.data else { panic!("{name}: not a matrix") };
            for s in series {
                let key = s.labels.get(moved::LABEL).cloned().unwrap_or_default();
                let labels: Vec<String> = group_by.iter().cloned().chain(key.ends_with("@replica").then(|| replica.clone())).collect();
                let scope = labels.iter().map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect::<BTreeMap<_, _>>().into_iter().collect();
                let e = own.entry((key, scope)).or_default();
                e.extend(s.points.iter().filter(|p| p.1.is_finite()).map(|p| ((p.0 * 1000.0).round() as i64, p.1)));
            }
        }
        let bars = Bars::from(&rules.thresholds).within((w_span.1 - w_span.0).to_std().unwrap());
        let ts = |t: &DateTime<Utc>| t.timestamp() as f64;
        let (step, range) = trace.moved_step;
        let (b_from, w_from) = moved::starts(range as f64, step as f64, (ts(&b_span.0), ts(&b_span.1)), (ts(&w_span.0), ts(&w_span.1)), bars.seconds);
        let inside = |t: i64| {
            let t = t as f64 / 1000.0;
            (t > ts(&w_span.0) && t >= w_from) || (t <= ts(&w_span.0) && t >= b_from && t <= ts(&b_span.1))
        };
        let mut compared = 0;
        let mut differ = Vec::new();
        let mut keys = std::collections::BTreeSet::new();
        for ((key, scope), (b, w)) in &trace.trends {
            let scope: Vec<(String, String)> = scope.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            keys.insert((key.clone(), scope.clone()));
            let theirs = own.get(&(key.clone(), scope.clone())).cloned().unwrap_or_default();
            let mine: BTreeMap<i64, f64> = b.iter().chain(w).map(|p| ((p.0 * 1000.0).round() as i64, p.1)).collect();
            let theirs: BTreeMap<i64, f64> = theirs.into_iter().filter(|(t, _)| inside(*t)).collect();
            if mine.keys().collect::<Vec<_>>() != theirs.keys().collect::<Vec<_>>() {
                differ.push(format!("{key} {scope:?}: points at {:?} against {:?}", mine.keys().collect::<Vec<_>>(), theirs.keys().collect::<Vec<_>>()));
                continue;
            }
            for (t, v) in &mine {
                let o = theirs[t];
                compared += 1;
                if (v - o).abs() > 1e-9 + 1e-6 * o.abs().max(v.abs()) {
                    differ.push(format!("{key} {scope:?} at {t}: {v} against {o}"));
                }
            }
        }
        for ((key, scope), points) in &own {
            if !keys.contains(&(key.clone(), scope.clone())) && points.keys().any(|t| inside(*t)) {
                differ.push(format!("{key} {scope:?}: read by its own query only"));
            }
        }
        assert!(differ.is_empty(), "{name}: {} trends differ:\n  {}", differ.len(), differ.join("\n  "));
        assert!(compared > 100, "{name}: only {compared} points compared");
        assert!(report["findings"].is_array());
    }
}
