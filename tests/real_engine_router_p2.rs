//! Real traffic that is not users', judged on a real router in front of two real engines.
//!
//! `scripts/real-engine.sh --power2` ran two vLLM 0.32 CPU replicas of one model behind vLLM's
//! router (`vllm-router` 0.1.17) with `--policy power_of_two` and health checks every 5 s, clients
//! streaming 70% of their requests to the router, scraped every 15 s by a real Prometheus; through
//! healthy stretches, an engine overload, a burst of requests one engine answered 400 (its first 4xx
//! ever on that route), a replica killed and left down, and an idle stretch. It exported every raw
//! sample and a manifest into `fixtures/real-engine-router-p2/`. Here:
//!
//! - every window inside a healthy or idle stretch (2 and 3 minutes, every 30 s) has no warning
//!   or critical finding, though power_of_two's load probes are answered 404 on a route the engine
//!   does not serve the whole time; they are reported as info (`unmatched-routes`) with their count;
//! - the overload is the engines', never the router's;
//! - the first-ever 4xx burst is counted with its size by the PromQL the signals read, on
//!   Prometheus, on VictoriaMetrics and in the local evaluator, where `increase()` alone reads 0;
//!   and `http-errors` names it.

mod common;

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use common::lab::{at, findings, loud, report};

const RUN: &str = "fixtures/real-engine-router-p2";
const MODEL: &str = "tiny-llama";

type Phase = common::LabPhase;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(RUN)
}

fn manifest() -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join("manifest.json")).expect("manifest")).expect("manifest JSON")
}

fn served() -> (Vec<Phase>, tempfile::TempDir, common::PromServer) {
    assert_eq!(common::lab_checks_failed(&dir()), Vec::<String>::new(), "the lab's own checks");
    let tmp = tempfile::tempdir().expect("temp dir");
    let prom = common::PromServer::start_with_openmetrics(common::unpack_lab_samples(&dir().join("samples.om.gz"), tmp.path(), true));
    (common::lab_manifest(&dir()), tmp, prom)
}

fn summary(r: &Value) -> String {
    let fs: Vec<String> = findings(r).map(|f| format!("{} {}", f["severity"].as_str().unwrap_or("?"), f["rule"].as_str().unwrap_or("?"))).collect();
    format!("{} [status {}]", fs.join("; "), r["status"])
}

fn phase<'a>(phases: &'a [Phase], name: &str) -> &'a Phase {
    phases.iter().find(|p| p.name == name).unwrap_or_else(|| panic!("no phase {name}"))
}

/// The rules that blame vLLM's router.
const ROUTER_RULES: &[&str] = &["router-saturated", "routing-skew", "router-retries", "router-prefix-blind"];

#[test]
fn healthy_and_idle_windows_quiet_the_probes_info_and_the_router_never_blamed() {
    let (phases, _tmp, prom) = served();
    let mut wrong = Vec::new();
    // The overload, against the healthy stretch before it: the engines', not the router's.
    let (o, h1) = (phase(&phases, "overload"), phase(&phases, "healthy-1"));
    let r = report(&prom.url, o.end, o.end - o.start, o.start - h1.start);
    let rules: Vec<&str> = findings(&r).filter_map(|f| f["rule"].as_str()).collect();
    if rules.iter().any(|x| ROUTER_RULES.contains(x)) || r["status"] == "ok" || !o.expect_first.iter().any(|e| Some(e.as_str()) == rules.first().copied()) {
        wrong.push(format!("overload: expected {:?} first and no router rule: {}", o.expect_first, summary(&r)));
    }
    // Its latency condition (TTFT, queue time or ITL) was met by TTFT: prefills slowing ITL cast
    // no doubt on it.
    let doubts: Vec<&Value> = r["findings"][0]["correlations"].as_array().into_iter().flatten().filter(|c| c["supports"] == false).collect();
    if !doubts.is_empty() {
        wrong.push(format!("overload: {} doubted by a correlation on a symptom another one met: {doubts:?}", rules.first().unwrap_or(&"?")));
    }
    // Healthy and idle stretches, 2 and 3 minute windows every minute, each against the window
    // before it; a window whose baseline held an incident may truthfully see its load gone.
    let quiet: Vec<(DateTime<Utc>, DateTime<Utc>)> = phases.iter().filter(|p| p.kind == "healthy" || p.kind == "idle").map(|p| (p.start, p.end)).collect();
    let mut stretches: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    for (s, e) in quiet {
        match stretches.last_mut() {
            Some(last) if (s - last.1).num_seconds() <= 15 => last.1 = e,
            _ => stretches.push((s, e)),
        }
    }
    let (mut inside, mut probes_named) = (0, 0);
    for minutes in [2, 3] {
        let window = Duration::minutes(minutes);
        for &(from, to) in &stretches {
            let mut end = from + window;
            while end <= to {
                let start = end - window;
                let r = report(&prom.url, end, window, window);
                inside += 1;
                let label = format!("{minutes}m to {}", at(end));
                let baseline_held_incident = phases.iter().any(|p| p.kind == "incident" && start - window < p.end && start > p.start);
                let stray: Vec<&Value> = loud(&r)
                    .into_iter()
                    .filter(|f| !(baseline_held_incident && ["workload-shift", "workload-lighter"].contains(&f["rule"].as_str().unwrap_or_default())))
                    .collect();
                if !stray.is_empty() {
                    wrong.push(format!("{label} (healthy or idle): {}", summary(&r)));
                }
                if let Some(f) = findings(&r).find(|f| f["rule"] == "unmatched-routes") {
                    probes_named += 1;
                    let ev = |id: &str| f["evidence"].as_array().into_iter().flatten().find(|e| e["signal"] == id).and_then(|e| e["value"].as_f64());
                    let (count, share) = (ev("http_unmatched_requests"), ev("http_unmatched_4xx_share"));
                    if f["severity"] != "info" || !count.is_some_and(|c| c >= 1.0) || share != Some(1.0) {
                        wrong.push(format!("{label}: unmatched-routes without its numbers (count {count:?}, 4xx share {share:?}): {f}"));
                    }
                }
                end += Duration::seconds(30);
            }
        }
    }
    assert!(inside >= 8, "only {inside} healthy or idle windows judged");
    assert!(probes_named * 2 >= inside, "the probes were named as info in only {probes_named} of {inside} windows");
    assert!(wrong.is_empty(), "{} windows went wrong:\n  {}", wrong.len(), wrong.join("\n  "));
}

/// The burst as the manifest recorded it: its engine, the number answered 400, the phase's span.
fn burst() -> (String, f64, DateTime<Utc>, DateTime<Utc>) {
    let m = manifest();
    let p = m["phases"].as_array().into_iter().flatten().find(|p| p["name"] == "burst").expect("a burst phase");
    let time = |v: &Value| DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default()).expect("time").with_timezone(&Utc);
    let b = &p["burst"];
    let n = b["statuses"]["400"].as_f64().expect("the burst's 400s");
    (b["replica"].as_str().expect("its replica").to_string(), n, time(&p["start"]), time(&p["end"]))
}

/// The 4xx the burst's engine answered on users' routes over the burst phase, as the signals read
/// a counter (`counter_rate` times the range), and as `increase()` alone reads it.
fn burst_queries(instance: &str, range: std::time::Duration) -> (String, String) {
    let series = format!(r#"http_requests_total{{instance="{instance}",status="4xx",handler="/v1/completions"}}"#);
    let secs = range.as_secs();
    (format!("sum({}) * {secs}", vllm_diag::signals::counter_rate(&series, range)), format!("sum(increase({series}[{secs}s]))"))
}

/// The lab's samples of `http_requests_total` and `up`, as (name, labels, [(unix seconds, value)]).
fn counter_samples() -> Vec<(String, BTreeMap<String, String>, Vec<(f64, f64)>)> {
    let file = std::fs::File::open(dir().join("samples.om.gz")).expect("samples");
    let mut by: BTreeMap<(String, BTreeMap<String, String>), Vec<(f64, f64)>> = BTreeMap::new();
    for line in std::io::BufReader::new(flate2::read::GzDecoder::new(file)).lines() {
        let line = line.expect("samples line");
        let (name, rest) = line.split_once(['{', ' ']).unwrap_or((line.as_str(), ""));
        if name != "http_requests_total" && name != "up" {
            continue;
        }
        let (labels, tail) = if line.as_bytes()[name.len()] == b'{' { rest.split_once("} ").expect("labels") } else { ("", rest) };
        let labels: BTreeMap<String, String> = labels
            .split("\",")
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once("=\"").expect("label");
                (k.to_string(), v.trim_end_matches('"').to_string())
            })
            .collect();
        let mut parts = tail.split_whitespace();
        let v: f64 = parts.next().and_then(|v| v.parse().ok()).expect("value");
        let t: f64 = parts.next().and_then(|t| t.parse().ok()).expect("timestamp");
        by.entry((name.to_string(), labels)).or_default().push((t, v));
    }
    by.into_iter().map(|((n, l), p)| (n, l, p)).collect()
}

#[test]
fn a_first_ever_4xx_burst_is_counted_with_its_size_on_prometheus_victoriametrics_and_the_local_evaluator() {
    let (instance, sent, start, end) = burst();
    let range = (end - start).to_std().expect("a phase forwards in time");
    let (signal, plain) = burst_queries(&instance, range);
    // The burst is the engine's first 4xx on the route: its series did not exist before.
    let samples = counter_samples();
    let born = samples
        .iter()
        .filter(|(n, l, _)| n == "http_requests_total" && l["instance"] == instance && l["status"] == "4xx" && l["handler"] == "/v1/completions")
        .map(|(_, _, p)| p[0])
        .next()
        .expect("the burst's series");
    assert!(born.0 > start.timestamp() as f64 && born.1 > 0.0, "the series was not born inside the phase holding a value: {born:?}");

    // Prometheus.
    let tmp = tempfile::tempdir().expect("temp dir");
    let prom = common::PromServer::start_with_openmetrics(common::unpack_lab_samples(&dir().join("samples.om.gz"), tmp.path(), false));
    let on_prom = prom.query_one(&signal, end);
    assert_eq!(on_prom, sent, "Prometheus: {signal}");
    let today = prom.query(&plain, end).first().map(|(_, v)| *v).unwrap_or(0.0);
    assert!(today < sent / 2.0, "increase() alone was expected to miss the burst on Prometheus, read {today}");

    // The local evaluator.
    let mut store = vllm_diag::local::Store::new();
    for (name, labels, points) in &samples {
        let mut l: vllm_diag::prom::Labels = labels.clone().into();
        l.insert("__name__".into(), name.clone());
        store.add(l, points.iter().map(|(t, v)| ((t * 1000.0).round() as i64, *v)));
    }
    let local = |q: &str| match vllm_diag::local::instant_query(&store, q, end.timestamp_millis()).expect(q) {
        vllm_diag::local::Value::Vector(v) => v.first().map(|s| s.v).unwrap_or(0.0),
        other => panic!("{q}: {other:?}"),
    };
    assert_eq!(local(&signal), sent, "local evaluation: {signal}");
    assert!(local(&plain) < sent / 2.0, "increase() alone was expected to miss the burst locally");

    // VictoriaMetrics.
    let vm = common::victoria::VmServer::start_empty();
    let mut body = String::new();
    for (name, labels, points) in &samples {
        let l = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect::<Vec<_>>().join(",");
        for (t, v) in points {
            body.push_str(&format!("{name}{{{l}}} {v} {}\n", (t * 1000.0).round() as i64));
        }
    }
    vm.import(&body);
    let vm_query = |q: &str| -> Option<f64> {
        let _ = vm.get("/internal/force_flush");
        let path = format!("/api/v1/query?query={}&time={}", url::form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>(), end.timestamp());
        let (status, text) = vm.get(&path).ok()?;
        let json: Value = serde_json::from_str(&text).ok()?;
        (status == 200).then(|| json["data"]["result"][0]["value"][1].as_str().and_then(|v| v.parse().ok())).flatten()
    };
    let waited = std::time::Instant::now();
    let mut on_vm = None;
    while waited.elapsed() < std::time::Duration::from_secs(60) {
        on_vm = vm_query(&signal);
        if on_vm == Some(sent) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    assert_eq!(on_vm, Some(sent), "VictoriaMetrics: {signal}\n{}", vm.log_text());
}

#[test]
fn http_errors_names_the_burst_against_the_healthy_stretch_before_it() {
    let (phases, _tmp, prom) = served();
    let (b, h2) = (phase(&phases, "burst"), phase(&phases, "healthy-2"));
    let r = report(&prom.url, b.end, b.end - b.start, b.start - h2.start);
    let f = findings(&r).find(|f| f["rule"] == "http-errors" && f["scope"]["model_name"] == MODEL);
    assert!(f.is_some(), "http-errors did not name the burst: {}", summary(&r));
}
