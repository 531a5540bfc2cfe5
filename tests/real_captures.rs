//! Every real /metrics capture in fixtures/real-metrics, loaded into a real Prometheus: each gives a
//! report, says which generation of vLLM metrics it found, and its "not evaluated" list names only
//! metrics the capture really lacks. The captures are single snapshots, so each is replayed as a
//! short history: counters (and histogram buckets, sums and counts) grow linearly up to the captured
//! value, gauges hold it.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use assert_cmd::Command;
use serde_json::Value;

type Labels = BTreeMap<String, String>;

/// A deliberately small reader for the capture files (one sample per line). The product's own
/// exposition parser is tested separately; this keeps the test independent of it.
fn samples(text: &str) -> Vec<(String, Labels, f64)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(line.len());
        let name = line[..name_end].to_string();
        let mut labels = Labels::new();
        let mut rest = &line[name_end..];
        if rest.starts_with('{') {
            let body = &rest[1..];
            let mut chars = body.char_indices().peekable();
            let mut key = String::new();
            let mut end = body.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '}' => {
                        end = i + 1;
                        break;
                    }
                    ',' | ' ' => {}
                    '=' => {
                        assert_eq!(chars.next().map(|x| x.1), Some('"'), "{line}");
                        let mut val = String::new();
                        while let Some((_, c)) = chars.next() {
                            match c {
                                '\\' => match chars.next().map(|x| x.1) {
                                    Some('n') => val.push('\n'),
                                    Some(o) => val.push(o),
                                    None => {}
                                },
                                '"' => break,
                                o => val.push(o),
                            }
                        }
                        labels.insert(std::mem::take(&mut key), val);
                    }
                    o => key.push(o),
                }
            }
            rest = &body[end..];
        }
        let value = rest.split_whitespace().next().unwrap_or("");
        let Some(v) = vllm_diag::prom::parse_sample_value(value) else { continue };
        out.push((name, labels, v));
    }
    out
}

fn is_cumulative(name: &str) -> bool {
    ["_total", "_count", "_sum", "_bucket"].iter().any(|s| name.ends_with(s))
}

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

const START: i64 = 1_768_000_000; // 2026-01-09T23:06:40Z, a fixed past time
const STEPS: i64 = 60;
const STEP: i64 = 60;

fn openmetrics(samples: &[(String, Labels, f64)]) -> String {
    let mut series: BTreeMap<(String, Vec<(String, String)>), f64> = BTreeMap::new();
    for (name, labels, v) in samples {
        let mut l = labels.clone();
        l.entry("job".into()).or_insert_with(|| "vllm".into());
        l.entry("instance".into()).or_insert_with(|| "capture:8000".into());
        series.insert((name.clone(), l.into_iter().collect()), *v);
    }
    let mut out = String::new();
    for ((name, labels), v) in &series {
        let ls = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect::<Vec<_>>().join(",");
        for i in 0..=STEPS {
            let value = if is_cumulative(name) && v.is_finite() { v * (0.5 + 0.5 * i as f64 / STEPS as f64) } else { *v };
            let _ = writeln!(out, "{name}{{{ls}}} {value} {}", START + i * STEP);
        }
    }
    out.push_str("# EOF\n");
    out
}

fn check(file: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-metrics").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let samples = samples(&text);
    let names: BTreeSet<String> = samples.iter().map(|s| s.0.clone()).collect();
    let dir = tempfile::tempdir().unwrap();
    let om = dir.path().join("capture.om");
    std::fs::write(&om, openmetrics(&samples)).unwrap();
    let prom = common::PromServer::start_with_openmetrics(&om);
    let end = chrono::DateTime::from_timestamp(START + STEPS * STEP, 0).unwrap();
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--prometheus", &prom.url, "--format", "json", "--at"])
        .arg(end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .args(["--window", "30m"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if !names.iter().any(|n| n.starts_with("vllm")) {
        assert_eq!(out.status.code(), Some(3), "{file}: no vLLM series, yet: {stderr}");
        assert!(stderr.contains("no vLLM metrics"), "{stderr}");
        return Value::Null;
    }
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{file}: {e}: {stderr}"));
    for ne in report["not_evaluated"].as_array().unwrap() {
        let reason = ne["reason"].as_str().unwrap();
        assert!(!reason.contains("timed out") && !reason.contains("rejected"), "{file}: a query failed: {reason}");
        for part in reason.split("; ") {
            if let Some(list) = part.strip_prefix("metric missing in the window: ") {
                for alt in list.split(" / ") {
                    for spelling in vllm_diag::signals::spellings(alt) {
                        assert!(!names.contains(&spelling), "{file}: reported {spelling} missing, but the capture has it");
                    }
                }
            }
        }
    }
    report
}

/// What each capture lacks: its generation and every metric family (with its alternatives) the
/// rules found missing, once each. By family rather than by rule, so a rule added to the pack over
/// signals the pack already reads changes no snapshot (docs/architecture.md: a rule in four files).
fn gaps(report: &Value) -> String {
    let mut out = format!("generation: {}\n", report["metrics"]["generation"]);
    let mut missing: BTreeSet<String> = BTreeSet::new();
    for ne in report["not_evaluated"].as_array().unwrap() {
        for part in ne["reason"].as_str().unwrap().split("; ") {
            missing.insert(part.trim_start_matches("stand-in: ").to_string());
        }
    }
    for m in missing {
        let _ = writeln!(out, "{m}");
    }
    out
}

macro_rules! captures {
    ($($test:ident => $file:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let report = check($file);
                // A capture with no vLLM data gives no report (its --format json is an error document).
                if report.get("findings").is_some() {
                    insta::assert_snapshot!(stringify!($test), gaps(&report));
                }
            }
        )*
    };
}

captures! {
    v0_0_5_opt125m => "v0_0.5-0.6_vllm-issue8819_opt125m_EXCERPTS.txt",
    v0_0_5_1_hermes => "v0_0.5.1_vllm-issue6337_hermes-70b_EXCERPT.txt",
    v0_0_5_3_llama3 => "v0_0.5.3_vllm-issue8115_llama3-70b_EXCERPTS.txt",
    v0_0_5_empty_families => "v0_0.5.x_functionary-pr263_empty-families.txt",
    v0_0_6_aibrix => "v0_0.6-0.7_aibrix_runtime_qwen-coder-1.5b.txt",
    v1_0_10_glm45 => "v1_0.10.0_production-stack-issue617_glm45_EXCERPTS.txt",
    v1_0_10_dp2 => "v1_0.10.x_dp2-apiserver2_vllm-pr22227_qwen3-8b_EXCERPTS.txt",
    v1_0_30_cpu => "v1_0.30.0_cpu-image_grep-excerpt_qwen2.5-0.5b.txt",
    v1_0_8_qwen_coder => "v1_0.8.0_production-stack-issue318_qwen-coder-32b_EXCERPTS.txt",
    v1_0_8_3_http_only => "v1_0.8.3-dev_vllm-pr15894_http-metrics_grep.txt",
    v1_recent_spec_decode => "v1_recent_qwen3-30b-a3b_spec-decode_vllmstat-fixture.prom",
}
