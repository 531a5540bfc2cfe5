//! Local evaluation held to a real Prometheus, scenario by scenario.
//!
//! For each scenario in fixtures/scenarios/, `vllm-diag explain --record` runs against a real
//! Prometheus holding the scenario's backfilled series. Every request it sent is then answered again
//! by local evaluation over the very same generated series, and both answers are decoded and
//! compared: the same series must come back with values within 1e-6 (relative). Finally the whole
//! diagnosis runs over the local source and must reach the same findings, healthy and not-evaluated
//! lists as the Prometheus run.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use vllm_diag::explain::{explain, ExplainOptions};
use vllm_diag::local::Store;
use vllm_diag::source::local::LocalSource;
use vllm_diag::source::record::Replay;
use vllm_diag::source::{decode, Data, Exchange, Labels, Request, Response};

const REL_TOL: f64 = 1e-6;
const ABS_TOL: f64 = 1e-9;

fn close(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    (a - b).abs() <= ABS_TOL + REL_TOL * a.abs().max(b.abs())
}

/// Differences between two decoded answers, as readable lines (empty when they agree).
fn compare(prom: &Response, local: &Response) -> Vec<String> {
    let mut diffs = Vec::new();
    match (&prom.data, &local.data) {
        (Data::Vector(a), Data::Vector(b)) => {
            let a: BTreeMap<&Labels, f64> = a.iter().map(|s| (&*s.labels, s.v)).collect();
            let b: BTreeMap<&Labels, f64> = b.iter().map(|s| (&*s.labels, s.v)).collect();
            for (labels, va) in &a {
                match b.get(labels) {
                    None => diffs.push(format!("series {labels:?} only from Prometheus ({va})")),
                    Some(vb) if !close(*va, *vb) => diffs.push(format!("series {labels:?}: Prometheus {va}, local {vb}")),
                    _ => {}
                }
            }
            for (labels, vb) in &b {
                if !a.contains_key(labels) {
                    diffs.push(format!("series {labels:?} only from local evaluation ({vb})"));
                }
            }
        }
        (Data::Matrix(a), Data::Matrix(b)) => {
            let a: BTreeMap<&Labels, &Vec<(f64, f64)>> = a.iter().map(|s| (&s.labels, &s.points)).collect();
            let b: BTreeMap<&Labels, &Vec<(f64, f64)>> = b.iter().map(|s| (&s.labels, &s.points)).collect();
            if a.keys().collect::<Vec<_>>() != b.keys().collect::<Vec<_>>() {
                diffs.push(format!("series differ: Prometheus {:?}, local {:?}", a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>()));
            }
            for (labels, pa) in &a {
                let Some(pb) = b.get(labels) else { continue };
                if pa.len() != pb.len() {
                    diffs.push(format!("series {labels:?}: {} points from Prometheus, {} locally", pa.len(), pb.len()));
                    continue;
                }
                for ((ta, va), (tb, vb)) in pa.iter().zip(pb.iter()) {
                    if ta != tb || !close(*va, *vb) {
                        diffs.push(format!("series {labels:?} at {ta}: Prometheus ({ta}, {va}), local ({tb}, {vb})"));
                    }
                }
            }
        }
        (Data::Scalar(a), Data::Scalar(b)) => {
            if !close(*a, *b) {
                diffs.push(format!("scalar: Prometheus {a}, local {b}"));
            }
        }
        // Prometheus lists label values per TSDB block, so it may name a series created later in
        // the block (vllm-router's retries, at the first retry); local evaluation is exact: a subset.
        (Data::Labels(a), Data::Labels(b)) => {
            if b.iter().any(|v| !a.contains(v)) || (a.len() != b.len() && b.is_empty()) {
                diffs.push(format!("label values: Prometheus {a:?}, local {b:?}"));
            }
        }
        (a, b) => diffs.push(format!("result types differ: Prometheus {a:?}, local {b:?}")),
    }
    diffs
}

/// Findings (rule, scope, severity), healthy, not evaluated, and evidence (value, baseline) by key.
type Summary = (Vec<(String, String, String)>, Vec<Value>, Vec<Value>, BTreeMap<String, (Value, Value)>);

/// Comparable parts of a report: findings with their evidence values, healthy, not evaluated.
fn summary(report: &Value) -> Summary {
    let findings = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap().to_string(), f["scope"].to_string(), f["severity"].as_str().unwrap().to_string()))
        .collect();
    let mut evidence = BTreeMap::new();
    for f in report["findings"].as_array().unwrap() {
        for e in f["evidence"].as_array().unwrap() {
            evidence.insert(format!("{} {} {}", f["rule"], f["scope"], e["signal"]), (e["value"].clone(), e["baseline"].clone()));
        }
    }
    let mut healthy = report["healthy"].as_array().unwrap().clone();
    healthy.sort_by_key(|v| v.to_string());
    let mut not_eval = report["not_evaluated"].as_array().unwrap().clone();
    not_eval.sort_by_key(|v| v.to_string());
    (findings, healthy, not_eval, evidence)
}

fn json_close(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => close(x, y),
        _ => a == b,
    }
}

fn check_scenario(name: &str) {
    // The run tests/pathologies.rs and tests/victoria.rs judge as well, made once per build.
    let run = common::scenario_run(name);
    let spec = run.spec.clone();
    let rec = run.recording.clone();
    let prom_report: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{name}: no JSON report ({e}): {}", run.stderr));

    let store = Arc::new(Store::from_series(vllm_diag_sim::generate_series(&spec).into_iter().map(|g| (g.name, g.labels, g.points))));

    // 1. Every recorded request, answered locally.
    let recording: Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    let exchanges = recording["exchanges"].as_array().unwrap();
    assert!(exchanges.len() > 10, "{name}: only {} exchanges recorded", exchanges.len());
    let mut failures = Vec::new();
    let mut compared = 0;
    let mut answered = HashMap::new();
    for ex in exchanges {
        let req: Request = serde_json::from_value(ex["request"].clone()).unwrap();
        let Some(resp) = ex.get("response") else {
            failures.push(format!("{}: Prometheus gave no answer: {}", req.describe(), ex["error"]));
            continue;
        };
        let resp: Exchange = serde_json::from_value(resp.clone()).unwrap();
        let local = vllm_diag::source::local::answer(&store, &req);
        answered.insert(req.clone(), local.clone());
        match (decode("prom", &req, &resp), decode("local", &req, &local)) {
            (Ok(a), Ok(b)) => {
                compared += 1;
                for d in compare(&a, &b) {
                    failures.push(format!("{}: {d}", req.describe()));
                }
            }
            (a, b) => failures.push(format!("{}: Prometheus {:?} / local {:?}", req.describe(), a.err(), b.err())),
        }
    }
    assert!(failures.is_empty(), "{name}: {} of {} answers differ:\n{}", failures.len(), exchanges.len(), failures.join("\n"));
    assert!(compared > 10, "{name}: only {compared} answers compared");

    // 2. The whole diagnosis over the local source.
    let (_, params) = Replay::open(Path::new(&rec)).unwrap();
    let selector = vllm_diag::prom::Selector::parse(&params.selector).unwrap();
    // The run asks what the recorded one asked: those answers were just computed, from the same
    // store by the same evaluator, and are deterministic, so they are served again rather than
    // evaluated a second time (half of this test's time was that second evaluation). A request the
    // recording does not hold is evaluated.
    let local = LocalSource::new(store, "local", "generated series");
    let source: Arc<dyn vllm_diag::source::Source> = Arc::new(Answered { local, answered });
    let rules = vllm_diag::rules::load_builtin().unwrap();
    let opts = ExplainOptions { params, selector, concurrency: 4, deadline: Duration::from_secs(120) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let report = rt.block_on(explain(source, &rules, &opts)).unwrap_or_else(|e| panic!("{name}: local explain failed: {e}"));
    let local_report = serde_json::to_value(&report).unwrap();

    let (pf, ph, pn, pe) = summary(&prom_report);
    let (lf, lh, ln, le) = summary(&local_report);
    assert_eq!(pf, lf, "{name}: findings differ");
    assert_eq!(ph, lh, "{name}: healthy lists differ");
    assert_eq!(pn, ln, "{name}: not-evaluated lists differ");
    assert_eq!(pe.keys().collect::<Vec<_>>(), le.keys().collect::<Vec<_>>(), "{name}: evidence differs");
    for (k, (pv, pb)) in &pe {
        let (lv, lb) = &le[k];
        assert!(json_close(pv, lv) && json_close(pb, lb), "{name}: {k}: Prometheus {pv}/{pb}, local {lv}/{lb}");
    }
    // The run found something or judged something healthy: the comparison was not vacuous.
    assert!(!pf.is_empty() || !ph.is_empty(), "{name}: nothing was evaluated");
}

/// The local source, with the answers it already gave to the recorded requests kept.
struct Answered {
    local: LocalSource,
    answered: HashMap<Request, Exchange>,
}

impl vllm_diag::source::Source for Answered {
    fn send<'a>(&'a self, req: &'a Request) -> futures::future::BoxFuture<'a, Result<Exchange, vllm_diag::source::SourceError>> {
        match self.answered.get(req) {
            Some(answer) => Box::pin(std::future::ready(Ok(answer.clone()))),
            None => self.local.send(req),
        }
    }

    fn info(&self) -> vllm_diag::report::SourceInfo {
        self.local.info()
    }
}

/// Every scenario file, so a scenario added to fixtures/scenarios/ is covered without editing this.
fn scenario_names() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().to_string()))
        .collect();
    names.sort();
    names
}

/// Each scenario gets its own Prometheus; three run at a time, and every failure is reported, not
/// only the first.
#[test]
fn local_evaluation_matches_prometheus_on_every_scenario() {
    let names = scenario_names();
    assert!(names.len() >= 9, "only {} scenarios in fixtures/scenarios", names.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(name) = names.get(i) else { break };
                if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check_scenario(name))) {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "panicked".into());
                    failures.lock().unwrap_or_else(|p| p.into_inner()).push(format!("{name}: {msg}"));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    assert!(failures.is_empty(), "{} of {} scenarios differ:\n\n{}", failures.len(), names.len(), failures.join("\n\n"));
}

// ---- Edge cases the scenarios do not reach --------------------------------------------------------
//
// Scenario samples sit exactly on the window edges every 30 s, so extrapolation, lookback and
// reset handling are barely exercised. This data is irregular on purpose: jittered scrape times,
// gaps, counter resets, series that start and stop mid-range, NaN values, histograms whose buckets
// are not monotonic or lack `+Inf`, duplicate bounds; and it is queried at unaligned times.

const EDGE_START: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const EDGE_LEN: i64 = 3_600_000;

struct EdgeSeries {
    labels: Vec<(&'static str, String)>,
    name: String,
    points: Vec<(i64, f64)>,
}

fn edge_data() -> Vec<EdgeSeries> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let mut out = Vec::new();
    let times = |rng: &mut rand_chacha::ChaCha8Rng, from: i64, to: i64| -> Vec<i64> {
        let mut t = from + rng.gen_range(0..10_000);
        let mut v = Vec::new();
        while t < to {
            v.push(t);
            // mostly 15 s apart with jitter; sometimes a gap of a minute or two
            t += if rng.gen_bool(0.03) { rng.gen_range(60_000..150_000) } else { rng.gen_range(10_000..20_000) };
        }
        v
    };
    for i in 0..4 {
        let (from, to) = match i {
            2 => (EDGE_START + 1_200_000, EDGE_LEN + EDGE_START),
            3 => (EDGE_START, EDGE_START + 2_000_000),
            _ => (EDGE_START, EDGE_START + EDGE_LEN),
        };
        let ts = times(&mut rng, from, to);
        // counter: starts above zero, resets now and then
        let mut c = rng.gen_range(0.0..500.0);
        let pts = ts
            .iter()
            .map(|t| {
                if rng.gen_bool(0.02) {
                    c = rng.gen_range(0.0..5.0);
                } else {
                    c += rng.gen_range(0.0..30.0f64).floor();
                }
                (*t, c)
            })
            .collect();
        let job = if i % 2 == 0 { "a" } else { "b" };
        out.push(EdgeSeries { name: "c_total".into(), labels: vec![("i", i.to_string()), ("job", job.into())], points: pts });
        let gpts = ts.iter().map(|t| (*t, (rng.gen_range(0.0..1.0f64) * 1000.0).round() / 1000.0)).collect();
        out.push(EdgeSeries { name: "g".into(), labels: vec![("i", i.to_string()), ("j", job.into())], points: gpts });
        out.push(EdgeSeries {
            name: "info".into(),
            labels: vec![("i", i.to_string()), ("model_name", format!("m{}", i % 2))],
            points: ts.iter().map(|t| (*t, 1.0)).collect(),
        });
        // a histogram: cumulative buckets that grow together
        let bounds = ["0.1", "0.5", "1", "1.0", "2.5", "+Inf"];
        let mut counts = [0.0f64; 6];
        let mut series: Vec<Vec<(i64, f64)>> = vec![Vec::new(); 6];
        let mut sum = 0.0;
        let mut sum_pts = Vec::new();
        for t in &ts {
            let n = rng.gen_range(0..20);
            for _ in 0..n {
                let x: f64 = rng.gen_range(0.0..3.0);
                sum += x;
                for (k, b) in bounds.iter().enumerate() {
                    let ub: f64 = if *b == "+Inf" { f64::INFINITY } else { b.parse().unwrap() };
                    if x <= ub {
                        counts[k] += 1.0;
                    }
                }
            }
            for k in 0..6 {
                series[k].push((*t, counts[k]));
            }
            sum_pts.push((*t, sum));
        }
        for (k, b) in bounds.iter().enumerate() {
            out.push(EdgeSeries { name: "h_bucket".into(), labels: vec![("i", i.to_string()), ("le", b.to_string())], points: series[k].clone() });
        }
        out.push(EdgeSeries { name: "h_sum".into(), labels: vec![("i", i.to_string())], points: sum_pts });
        out.push(EdgeSeries { name: "h_count".into(), labels: vec![("i", i.to_string())], points: series[5].clone() });
    }
    // a gauge with NaN values among numbers
    let ts: Vec<i64> = (0..240).map(|k| EDGE_START + k * 15_000).collect();
    out.push(EdgeSeries {
        name: "g".into(),
        labels: vec![("i", "nan".into()), ("j", "a".into())],
        points: ts.iter().enumerate().map(|(k, t)| (*t, if k % 7 == 3 { f64::NAN } else { k as f64 / 240.0 })).collect(),
    });
    // buckets that are not monotonic (also in the +Inf bucket), and a histogram without +Inf
    for (le, v) in [("1", 10.0), ("2", 7.0), ("4", 12.0), ("+Inf", 11.0)] {
        out.push(EdgeSeries { name: "nm_bucket".into(), labels: vec![("le", le.into())], points: ts.iter().map(|t| (*t, v)).collect() });
    }
    for (le, v) in [("1", 3.0), ("2", 5.0)] {
        out.push(EdgeSeries { name: "noinf_bucket".into(), labels: vec![("le", le.into())], points: ts.iter().map(|t| (*t, v)).collect() });
    }
    out
}

fn edge_openmetrics(data: &[EdgeSeries]) -> String {
    let mut s = String::new();
    let mut by_family: BTreeMap<String, Vec<&EdgeSeries>> = BTreeMap::new();
    for d in data {
        let fam = d.name.trim_end_matches("_total").trim_end_matches("_bucket").trim_end_matches("_sum").trim_end_matches("_count");
        by_family.entry(fam.to_string()).or_default().push(d);
    }
    for (fam, series) in by_family {
        s.push_str(&format!("# TYPE {fam} unknown\n"));
        for d in series {
            let labels: Vec<String> = d.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
            for (t, v) in &d.points {
                let v = if v.is_nan() { "NaN".to_string() } else { format!("{v}") };
                s.push_str(&format!("{}{{{}}} {} {}.{:03}\n", d.name, labels.join(","), v, t / 1000, t % 1000));
            }
        }
    }
    s.push_str("# EOF\n");
    s
}

fn edge_store(data: &[EdgeSeries]) -> Store {
    let mut store = Store::new();
    for d in data {
        let mut labels: Labels = d.labels.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        labels.insert("__name__".into(), d.name.clone());
        store.add(labels, d.points.iter().copied());
    }
    store
}

const EDGE_QUERIES: &[&str] = &[
    "c_total",
    "g",
    "g offset 2m",
    "c_total offset 90s",
    "rate(c_total[1m])",
    "rate(c_total[5m])",
    "rate(c_total[20m])",
    "increase(c_total[3m])",
    "increase(c_total[1h])",
    "delta(g[2m])",
    "irate(c_total[2m])",
    "idelta(g[2m])",
    "deriv(g[3m])",
    "resets(c_total[10m])",
    "changes(g[10m])",
    "predict_linear(g[5m], 60)",
    "rate(c_total[5m] offset 7m)",
    "avg_over_time(g[3m])",
    "min_over_time(g[3m])",
    "max_over_time(g[3m])",
    "sum_over_time(g[3m])",
    "count_over_time(g[3m])",
    "last_over_time(g[3m])",
    "stddev_over_time(g[5m])",
    "stdvar_over_time(g[5m])",
    "quantile_over_time(0.3, g[5m])",
    "present_over_time(g[1m])",
    "histogram_quantile(0.9, rate(h_bucket[5m]))",
    "histogram_quantile(0.5, sum by (le) (rate(h_bucket[5m])))",
    "histogram_quantile(0.99, h_bucket)",
    "histogram_quantile(0.5, nm_bucket)",
    "histogram_quantile(0.95, nm_bucket)",
    "histogram_quantile(0.5, noinf_bucket)",
    "histogram_quantile(0, h_bucket)",
    "histogram_quantile(1, h_bucket)",
    "sum by (i) (rate(c_total[5m]))",
    "sum(rate(h_sum[5m])) / sum(rate(h_count[5m]))",
    "avg(g)",
    "max by (j) (g)",
    "min without (i) (g)",
    "count(g)",
    "group by (j) (g)",
    "stddev(g)",
    "stdvar by (j) (g)",
    "topk(2, g)",
    "bottomk(1, g) by (j)",
    "quantile(0.7, g)",
    "count_values(\"v\", round(g * 4))",
    "sum(g) by (j)",
    "g > 0.5",
    "g > bool 0.5",
    "0.5 < g",
    "g == bool g",
    "g * on (i) group_left (model_name) info",
    "info * on (i) group_right g",
    "rate(c_total[5m]) / ignoring (job) g",
    "g or c_total",
    "g and on (i) c_total",
    "g unless on (i) c_total",
    "(sum by (j) (rate(c_total{job=\"a\"}[5m])) or sum by (j) (g) * 0) / sum by (j) (g)",
    "abs(g - 0.5)",
    "ceil(g * 10)",
    "floor(g * 10)",
    "round(g, 0.1)",
    "round(g)",
    "clamp(g, 0.2, 0.8)",
    "clamp_min(g, 0.5)",
    "clamp_max(g, 0.5)",
    "sqrt(g)",
    "exp(g)",
    "ln(g)",
    "log2(g)",
    "log10(g)",
    "sgn(g - 0.5)",
    "avg_over_time((sum(rate(c_total[1m])) > bool 1)[10m:30s])",
    "max_over_time(rate(c_total[1m])[5m:])",
    "rate(c_total[5m:20s])",
    "avg_over_time(g[7m:45s] offset 1m)",
    "scalar(sum(g))",
    "vector(1)",
    "time()",
    "absent(nope)",
    "absent(g{i=\"0\"})",
    "absent(nope{a=\"b\",c=~\"d\"})",
    "absent_over_time(g[1m])",
    "label_replace(g, \"x\", \"v$1\", \"i\", \"(.*)\")",
    "label_join(g, \"y\", \"-\", \"i\", \"j\")",
    "sort(g)",
    "sort_desc(g)",
    "-g",
    "g ^ 2",
    "g % 0.3",
    "2 * g",
    "1 + 2",
    "3 > bool 2",
    "2 ^ 3 ^ 2",
    "-2 ^ 2",
    "g atan2 0.5",
    "{__name__=~\"g|info\", i=\"1\"}",
    "g{j!=\"a\"}",
    "g{i=~\"[02]\"}",
    "g{i!~\"0|1\"}",
];

#[test]
fn local_evaluation_matches_prometheus_on_irregular_edge_cases() {
    let data = edge_data();
    let dir = tempfile::tempdir().unwrap();
    let om = dir.path().join("edge.om");
    std::fs::write(&om, edge_openmetrics(&data)).unwrap();
    let prom = common::PromServer::start_with_openmetrics(&om);
    let store = edge_store(&data);

    let times: Vec<i64> = vec![
        EDGE_START + 15_000,
        EDGE_START + 901_337,
        EDGE_START + 1_234_567,
        EDGE_START + 2_100_000,
        EDGE_START + 2_222_222,
        EDGE_START + EDGE_LEN - 1,
        EDGE_START + EDGE_LEN + 200_000,
    ];
    let ts = |t: i64| chrono::DateTime::from_timestamp_millis(t).unwrap();
    let mut requests: Vec<Request> = Vec::new();
    for q in EDGE_QUERIES {
        for t in &times {
            requests.push(Request::Instant { query: q.to_string(), time: ts(*t) });
        }
    }
    for q in ["rate(c_total[2m])", "histogram_quantile(0.9, sum by (le, i) (rate(h_bucket[3m])))", "g", "avg_over_time((g > bool 0.5)[5m:30s])", "sum(g)"] {
        requests.push(Request::Range { query: q.to_string(), start: ts(EDGE_START + 123_456), end: ts(EDGE_START + 3_000_000), step_seconds: 47 });
    }
    for m in ["{__name__=~\".+\"}", "{__name__=~\"g|c_total\",i=\"2\"}"] {
        for (a, b) in [(EDGE_START, EDGE_START + 600_000), (EDGE_START + 2_500_000, EDGE_START + EDGE_LEN)] {
            requests.push(Request::LabelValues { label: "__name__".into(), matchers: vec![m.into()], start: ts(a), end: ts(b) });
            requests.push(Request::LabelValues { label: "i".into(), matchers: vec![m.into()], start: ts(a), end: ts(b) });
        }
    }

    let mut failures = Vec::new();
    for req in &requests {
        let path = match req {
            Request::Instant { query, time } => {
                format!("/api/v1/query?query={}&time={}", enc(query), vllm_diag::source::format_time(time))
            }
            Request::Range { query, start, end, step_seconds } => format!(
                "/api/v1/query_range?query={}&start={}&end={}&step={step_seconds}",
                enc(query),
                vllm_diag::source::format_time(start),
                vllm_diag::source::format_time(end)
            ),
            Request::LabelValues { label, matchers, start, end } => format!(
                "/api/v1/label/{label}/values?match[]={}&start={}&end={}",
                enc(&matchers[0]),
                vllm_diag::source::format_time(start),
                vllm_diag::source::format_time(end)
            ),
        };
        let (status, body) = prom.get(&path).unwrap();
        let remote = Exchange { http_status: status, content_type: "application/json".into(), body };
        let local = vllm_diag::source::local::answer(&store, req);
        let at = match req {
            Request::Instant { time, .. } => format!(" at {}", time.timestamp_millis() - EDGE_START),
            _ => String::new(),
        };
        match (decode("prom", req, &remote), decode("local", req, &local)) {
            // Prometheus lists label values per TSDB block, so it may name series without samples in
            // the range (its API documentation says so); local evaluation is exact: a subset.
            (Ok(Response { data: Data::Labels(a), .. }), Ok(Response { data: Data::Labels(b), .. })) => {
                if b.iter().any(|v| !a.contains(v)) {
                    failures.push(format!("{}: local {b:?} is not within Prometheus' {a:?}", req.describe()));
                }
                if b.is_empty() && matches!(req, Request::LabelValues { matchers, .. } if matchers[0].contains(".+")) {
                    failures.push(format!("{}: nothing locally, Prometheus {a:?}", req.describe()));
                }
            }
            (Ok(a), Ok(b)) => failures.extend(compare(&a, &b).into_iter().map(|d| format!("{}{at}: {d}", req.describe()))),
            (Err(a), Err(b)) => {
                // both refuse: fine when both call it the same class of error
                let class = |e: &vllm_diag::source::SourceError| match e {
                    vllm_diag::source::SourceError::Api { error_type, .. } => error_type.clone(),
                    other => format!("{other:?}"),
                };
                if class(&a) != class(&b) {
                    failures.push(format!("{}{at}: Prometheus {a} / local {b}", req.describe()));
                }
            }
            (a, b) => failures.push(format!("{}{at}: Prometheus {:?} / local {:?}", req.describe(), a.err(), b.err())),
        }
    }
    assert!(failures.is_empty(), "{} of {} answers differ:\n{}", failures.len(), requests.len(), failures.join("\n"));
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}
