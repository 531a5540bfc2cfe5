//! The GPU rules judged on a real GPU's telemetry: one NVIDIA H200 under serving-shaped load
//! (fixtures/real-gpu/, sampled through NVML once a second: idle, decode-shaped, prefill-shaped and
//! compute-bound phases). The samples are converted into the DCGM exporter's series with the labels
//! it sets in Kubernetes (`vllm_diag_sim::real_gpu::to_openmetrics`), beside a vLLM server on the
//! same pod to tie the GPU to its model, backfilled into a real Prometheus, and diagnosed in
//! windows sliding over the whole recording, each against several baselines.
//!
//! A healthy, busy H200 sets the software power cap (0x4) within a second of compute-bound work
//! and its SM clock falls 25%: no window may give a GPU finding above info, and the GPU rules must
//! have been evaluated (a window with no verdict proves nothing). The power cap itself is named,
//! as info, where the window sat at it.

mod common;

use chrono::{DateTime, TimeZone, Utc};
use common::run::run;
use common::PromServer;
use serde_json::Value;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
/// Where the recording's first sample lands.
const START: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

fn server() -> (PromServer, f64) {
    let om = vllm_diag_sim::real_gpu::to_openmetrics(START as f64, "gpu-node-01", "inference", "llama-0", MODEL, 16.0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h200.om");
    std::fs::write(&path, om).unwrap();
    let rec = vllm_diag_sim::real_gpu::h200();
    let span = rec.samples.last().unwrap().0.t - rec.samples[0].0.t;
    (PromServer::start_with_openmetrics(&path), span)
}

fn at(secs: i64) -> String {
    let t: DateTime<Utc> = Utc.timestamp_opt(START + secs, 0).unwrap();
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn explain(url: &str, end: i64, window: &str, baseline: Option<&str>) -> Value {
    let at = at(end);
    let mut args = vec!["explain", "--prometheus", url, "--at", &at, "--window", window, "--format", "json"];
    if let Some(b) = baseline {
        args.extend(["--baseline", b]);
    }
    let r = run(&args, &[]);
    // Exit 3 is expected: a fleet of one GPU and a running gauge has no latency histograms.
    r.json()
}

fn gpu_findings(report: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in report["findings"].as_array().unwrap() {
        let mut rules = vec![f["rule"].as_str().unwrap().to_string()];
        rules.extend(f["also_consistent"].as_array().into_iter().flatten().filter_map(|a| a["rule"].as_str().map(String::from)));
        for r in rules.into_iter().filter(|r| r.starts_with("gpu-")) {
            out.push((r, f["severity"].as_str().unwrap().to_string()));
        }
    }
    out
}

#[test]
fn no_window_of_a_real_h200_gives_a_gpu_finding_above_info() {
    let (prom, span) = server();
    let span = span as i64;
    let mut judged = 0;
    let mut capped_named = 0;
    for (window, secs, baselines) in [("30s", 30, vec![None, Some("60s")]), ("1m", 60, vec![None, Some("90s")]), ("2m", 120, vec![None])] {
        let mut end = secs + 20;
        while end <= span + 5 {
            for baseline in &baselines {
                let report = explain(&prom.url, end, window, *baseline);
                let loud: Vec<_> = gpu_findings(&report).into_iter().filter(|(_, sev)| sev != "info").collect();
                assert!(loud.is_empty(), "window {window} ending {} (baseline {baseline:?}): {loud:?}", at(end));
                // The GPU rules had a verdict: evaluated, not skipped for want of data.
                let not_eval: Vec<&str> = report["not_evaluated"].as_array().unwrap().iter().filter_map(|n| n["rule"].as_str()).collect();
                for rule in ["gpu-throttling", "gpu-power-capped", "gpu-power-limit-lowered"] {
                    assert!(!not_eval.contains(&rule), "window {window} ending {}: {rule} not evaluated: {:#}", at(end), report["not_evaluated"]);
                }
                judged += 1;
                if gpu_findings(&report).iter().any(|(r, _)| r == "gpu-power-capped") {
                    capped_named += 1;
                }
            }
            end += 20;
        }
    }
    assert!(judged >= 40, "only {judged} windows judged");
    // The prefill cycles and the compute-bound stretch hold the cap: some windows must say so.
    assert!(capped_named >= 5, "the power cap was named in {capped_named} of {judged} windows");
}

#[test]
fn the_compute_bound_stretch_reads_as_the_power_cap_with_the_decoded_reason_and_its_limit() {
    let (prom, span) = server();
    // The last 30 s are idle; the 30 s before them are back-to-back matrix products.
    let end = span as i64 - 32;
    let report = explain(&prom.url, end, "30s", None);
    let f = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "gpu-power-capped")
        .unwrap_or_else(|| panic!("no gpu-power-capped: {:#}", report["findings"]));
    assert_eq!(f["severity"], "info");
    let ev = |sig: &str| f["evidence"].as_array().unwrap().iter().find(|e| e["signal"] == sig).cloned().unwrap_or(Value::Null);
    let share = report_value(&report, "gpu_power_cap_share");
    assert!(share >= 0.9, "cap share {share}");
    // The draw was at its enforced limit (700 W), read from the exporter's limit series.
    let draw = ev("gpu_power_draw_ratio")["value"].as_f64().unwrap();
    assert!((0.97..=1.01).contains(&draw), "power draw over limit {draw}");
    // The violation counter agrees: most of the window spent capped.
    let violation = ev("gpu_power_violation_share")["value"].as_f64().unwrap();
    assert!(violation >= 0.7, "violation share {violation}");
    // Nothing the board never reported is claimed.
    assert!(!gpu_findings(&report).iter().any(|(r, _)| r == "gpu-throttling"));
}

/// A signal's window value for the model, from whichever finding's evidence has it.
fn report_value(report: &Value, signal: &str) -> f64 {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["evidence"].as_array().unwrap().iter())
        .find(|e| e["signal"] == signal)
        .and_then(|e| e["value"].as_f64())
        .unwrap_or_else(|| panic!("{signal} in no evidence: {:#}", report["findings"]))
}
