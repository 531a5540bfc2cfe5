//! A fleet with 10,000 series of one metric costs no more queries than a fleet of twenty, and its
//! answers stay small, because aggregation happens in PromQL (`max by (model_name) (...)`), not in
//! vllm-diag (except the histogram reads outliers need, asked per series and summed by vllm-diag:
//! they list replicas, and this fleet has no histograms). The proof is what the run itself reports with `--debug`: every request with the size of
//! its answer, and the total transferred. No timing is asserted.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

use common::run::explain_json;
use common::PromServer;

const WINDOW_END: i64 = 1_768_467_600; // 2026-01-15T09:00:00Z
const STEP: i64 = 120;
const SPAN: i64 = 70 * 60;

/// `series` series of one gauge (vllm:kv_cache_usage_perc), split over two models, one per
/// replica, sampled every two minutes across the window and the baseline.
fn fleet(series: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let path = dir.path().join("fleet.om");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap_or_else(|e| panic!("create: {e}")));
    let mut text = String::new();
    text.push_str("# TYPE vllm:kv_cache_usage_perc gauge\n# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n");
    for i in 0..series {
        let model = if i % 2 == 0 { "model-a" } else { "model-b" };
        let mut t = WINDOW_END - SPAN;
        while t <= WINDOW_END {
            // A value that differs per replica and over time, inside [0, 1].
            let v = ((i * 37 + (t / STEP) as usize * 11) % 100) as f64 / 100.0;
            let _ = writeln!(text, "vllm:kv_cache_usage_perc{{engine=\"0\",instance=\"replica-{i:05}:8000\",job=\"vllm\",model_name=\"{model}\"}} {v} {t}");
            t += STEP;
        }
        if text.len() > 1 << 20 {
            out.write_all(text.as_bytes()).unwrap_or_else(|e| panic!("write: {e}"));
            text.clear();
        }
    }
    text.push_str("# EOF\n");
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).unwrap_or_else(|e| panic!("write: {e}"));
    drop(out);
    (dir, path)
}

struct Cost {
    /// (answer bytes, request line) per request, from the debug log.
    answers: Vec<(u64, String)>,
    total_bytes: u64,
    report: Value,
}

fn run(prom: &PromServer) -> Cost {
    let at = Utc.timestamp_opt(WINDOW_END, 0).single().map(|t: DateTime<Utc>| t.to_rfc3339()).unwrap_or_default();
    let r = explain_json(&prom.url, &at, &["--debug"]);
    let report = r.json();
    let stderr = r.stderr;
    let mut answers = Vec::new();
    let mut total_bytes = None;
    for line in stderr.lines() {
        if let Some(rest) = line.strip_prefix("vllm-diag: debug: transferred ") {
            total_bytes = rest.split_whitespace().next().and_then(|n| n.parse::<u64>().ok());
        } else if let Some((req, result)) = line.strip_prefix("vllm-diag: debug: ").and_then(|l| l.split_once("] -> ")) {
            let bytes = result
                .strip_prefix("HTTP 200, ")
                .and_then(|r| r.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("a request failed: {line}"));
            // Without the server's address, so two servers' requests compare.
            answers.push((bytes, req.replace(&prom.url, "")));
        }
    }
    Cost { answers, total_bytes: total_bytes.unwrap_or_else(|| panic!("no transfer summary in: {stderr}")), report }
}

/// The points of one series of a range request, from its description (`start=... end=... step=60`);
/// 0 for anything else.
fn range_points(req: &str) -> u64 {
    let field = |name: &str| req.split_whitespace().find_map(|w| w.strip_prefix(name)).map(|v| v.trim_end_matches(']').to_string());
    let time = |v: String| chrono::DateTime::parse_from_rfc3339(&v).ok().map(|t| t.timestamp());
    match (field("start=").and_then(time), field("end=").and_then(time), field("step=").and_then(|v| v.parse::<i64>().ok())) {
        (Some(a), Some(b), Some(step)) if step > 0 && b >= a => ((b - a) / step + 1) as u64,
        _ => 0,
    }
}

#[test]
fn ten_thousand_series_of_one_gauge_cost_the_same_queries_and_small_answers() {
    let (_small_dir, small_om) = fleet(20);
    let (_big_dir, big_om) = fleet(10_000);
    let small = PromServer::start_with_openmetrics(&small_om);
    let big = PromServer::start_with_openmetrics(&big_om);
    let end = Utc.timestamp_opt(WINDOW_END, 0).single().unwrap_or_default();
    assert_eq!(big.query_one("count(vllm:kv_cache_usage_perc)", end), 10_000.0, "the big fleet is not that big");

    let s = run(&small);
    let b = run(&big);

    // The same questions, however many replicas answer them.
    assert_eq!(b.report["stats"]["queries"], s.report["stats"]["queries"]);
    let requests = |c: &Cost| c.answers.iter().map(|(_, r)| r.clone()).collect::<std::collections::BTreeSet<_>>();
    assert_eq!(b.answers.len(), s.answers.len());
    assert_eq!(requests(&b), requests(&s));
    // Two models, two scopes: the replicas were aggregated away.
    assert_eq!(b.report["metrics"]["scopes"].as_array().map(Vec::len), Some(2));

    // Aggregated answers do not grow with the fleet. A query that keeps one series per replica (to
    // name an outlier) is the only kind allowed to, and even that stays far below the cap.
    let per_replica = |req: &str| req.contains("instance") || req.contains("pod") || (req.starts_with("rate(") && req.contains("_bucket"));
    let by_request: BTreeMap<&str, u64> = s.answers.iter().map(|(n, r)| (r.as_str(), *n)).collect();
    for (bytes, req) in &b.answers {
        let small_bytes = by_request.get(req.as_str()).copied().unwrap_or(0);
        if per_replica(req) {
            assert!(*bytes < 4 << 20, "{bytes} bytes for {req}");
        } else {
            // Only the numbers' digits may differ (a mean over 10,000 series takes all 17): a range
            // answer (what else moved reads trends) by up to 17 bytes per point of each model.
            let slack = 512 + 17 * 2 * range_points(req);
            assert!(*bytes <= small_bytes + slack, "{bytes} bytes (vs {small_bytes} for 20 series) for {req}");
        }
    }
    // Everything the big run read, in all: a bound on its memory as well.
    assert!(b.total_bytes < 16 << 20, "{} bytes transferred", b.total_bytes);
    eprintln!(
        "10,000 series: {} requests, {} bytes in all, largest answer {} bytes; 20 series: {} bytes in all",
        b.answers.len(),
        b.total_bytes,
        b.answers.iter().map(|(n, _)| *n).max().unwrap_or(0),
        s.total_bytes
    );
}
