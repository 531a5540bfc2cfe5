//! Every pathology in the runbooks against a real Prometheus: each rule ranks first for the right
//! model (and replica) on its generated scenario, and stays quiet on its near miss. A V1 fleet, a V0
//! fleet and an OpenTelemetry-renamed fleet give the same diagnosis.

mod common;

use assert_cmd::Command;
use serde_json::Value;

fn explain(name: &str, extra: &[&str]) -> (vllm_diag::scenario::ScenarioSpec, Value, String) {
    let (spec, prom) = common::start_scenario(name);
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--prometheus", &prom.url, "--at", &at, "--format", "json"])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{name}: no JSON ({e}): {stderr}"));
    (spec, report, stderr)
}

fn summary(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| format!("{} {} {} {}", f["severity"], f["rule"], f["scope"], f["score"]))
        .collect()
}

fn check(name: &str) -> Value {
    let (spec, report, _) = explain(name, &[]);
    let findings = report["findings"].as_array().unwrap();
    let ex = &spec.expect;
    for rule in &ex.absent {
        assert!(
            !findings.iter().any(|f| &f["rule"] == rule || f["also_consistent"].as_array().unwrap().iter().any(|a| &a["rule"] == rule)),
            "{name}: near miss, yet {rule} fired: {:#?}",
            summary(&report)
        );
    }
    if ex.healthy {
        let loud: Vec<_> = findings.iter().filter(|f| f["severity"] != "info").collect();
        assert!(loud.is_empty(), "{name}: expected no warning or critical finding: {:#?}", summary(&report));
    }
    if let Some(first) = &ex.first {
        assert!(!findings.is_empty(), "{name}: no findings; not evaluated: {:#}", report["not_evaluated"]);
        let f = &findings[0];
        assert_eq!(f["rule"], first.as_str(), "{name}: ranked {:#?}\nnot evaluated: {:#}", summary(&report), report["not_evaluated"]);
        if let Some(model) = &ex.model {
            assert_eq!(f["scope"]["model_name"], model.as_str(), "{name}: {:#?}", summary(&report));
        }
        if let Some(replica) = &ex.replica {
            let named = f["scope"].as_object().unwrap().values().any(|v| v == replica.as_str());
            assert!(named, "{name}: the finding does not name replica {replica}: {}", f["scope"]);
        }
        // The other models stay quiet.
        if let Some(model) = &ex.model {
            let elsewhere: Vec<_> =
                findings.iter().filter(|f| f["scope"]["model_name"] != model.as_str() && f["severity"] != "info").collect();
            assert!(elsewhere.is_empty(), "{name}: findings for healthy models: {elsewhere:#?}");
        }
    }
    report
}

macro_rules! scenarios {
    ($($test:ident => $file:literal),* $(,)?) => {
        $( #[test] fn $test() { check($file); } )*
        const LISTED: &[&str] = &[$($file),*];
    };
}

scenarios! {
    prefill_starvation => "prefill-starvation",
    prefill_starvation_near_miss => "prefill-starvation-near",
    prefix_cache_miss => "prefix-cache-miss",
    prefix_cache_miss_near_miss => "prefix-cache-miss-near",
    recompute_thrashing => "recompute-thrashing",
    recompute_thrashing_near_miss => "recompute-thrashing-near",
    workload_shift => "workload-shift",
    workload_shift_near_miss => "workload-shift-near",
    gpu_underutilized => "gpu-underutilized",
    gpu_underutilized_near_miss => "gpu-underutilized-near",
    throughput_stall => "throughput-stall",
    throughput_stall_near_miss => "throughput-stall-near",
    requests_rejected => "requests-rejected",
    requests_rejected_near_miss => "requests-rejected-near",
    request_errors => "request-errors",
    request_errors_near_miss => "request-errors-near",
    engine_asleep => "engine-asleep",
    engine_asleep_near_miss => "engine-asleep-near",
    spec_decode_inefficient => "spec-decode-inefficient",
    spec_decode_inefficient_near_miss => "spec-decode-inefficient-near",
    kv_transfer_failures => "kv-transfer-failures",
    kv_transfer_failures_near_miss => "kv-transfer-failures-near",
    kv_cache_leak => "kv-cache-leak",
    kv_cache_leak_near_miss => "kv-cache-leak-near",
    replica_imbalance => "replica-imbalance",
    replica_imbalance_near_miss => "replica-imbalance-near",
    replica_outlier => "replica-outlier",
    replica_outlier_near_miss => "replica-outlier-near",
    target_down => "target-down",
    target_down_near_miss => "target-down-near",
    gpu_throttling => "gpu-throttling",
    gpu_throttling_near_miss => "gpu-throttling-near",
    gpu_errors => "gpu-errors",
    gpu_errors_near_miss => "gpu-errors-near",
    slo_burn => "slo-burn",
    slo_burn_near_miss => "slo-burn-near",
}

#[test]
fn every_scenario_file_is_checked_somewhere() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    // The issue-2 scenarios are checked in tests/explain.rs.
    let elsewhere = [
        "healthy-steady",
        "healthy-ramp",
        "load-exceeds-capacity",
        "slow-prefill",
        "slow-decode",
        "severe-saturation",
        "kv-cache-pressure",
        "http-errors",
        "v0-kv-cache-pressure",
        "otel-kv-cache-pressure",
    ];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            assert!(LISTED.contains(&stem.as_str()) || elsewhere.contains(&stem.as_str()), "{stem} is not checked by any test");
        }
    }
}

#[test]
fn v1_v0_and_opentelemetry_names_give_the_same_diagnosis() {
    let key = |r: &Value| {
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| (f["rule"].clone(), f["scope"].clone(), f["severity"].clone()))
            .collect::<Vec<_>>()
    };
    let v1 = check("kv-cache-pressure");
    let v0 = check("v0-kv-cache-pressure");
    let otel = check("otel-kv-cache-pressure");
    assert_eq!(key(&v1), key(&v0));
    assert_eq!(key(&v1), key(&otel));
    assert_eq!(v1["metrics"]["generation"], "v1");
    assert_eq!(v0["metrics"]["generation"], "v0");
    assert_eq!(otel["metrics"]["generation"], "v1 (vllm_ names)");
    assert_eq!(otel["metrics"]["names_used"]["kv_usage_max"], "vllm_kv_cache_usage_perc");
}

#[test]
fn kv_cache_pressure_recommends_a_max_num_seqs_with_its_arithmetic_and_names_replicas() {
    let (_, report, _) = explain("kv-cache-pressure", &[]);
    let f = &report["findings"][0];
    assert_eq!(f["rule"], "kv-cache-pressure");
    let rec = &f["recommendations"][0];
    assert_eq!(rec["setting"], "max_num_seqs");
    assert!(rec["value"].as_str().unwrap().parse::<u64>().unwrap() > 0);
    assert!(rec["arithmetic"].as_str().unwrap().contains("blocks per sequence"), "{rec}");
    let replicas = &f["replicas"];
    assert_eq!(replicas["label"], "instance");
    assert_eq!(replicas["total"], 3, "{replicas}");
    assert_eq!(replicas["affected"].as_array().unwrap().len(), 3, "{replicas}");
}

#[test]
fn a_profile_changes_the_thresholds_the_rules_use() {
    // The batch profile tolerates a 30 s TTFT ceiling; chat's is 3 s. The same data, two verdicts on
    // the absolute ceiling, visible in the evidence.
    let (_, chat, _) = explain("load-exceeds-capacity", &[]);
    let (_, batch, _) = explain("load-exceeds-capacity", &["--profile", "batch"]);
    let ceiling = |r: &Value| {
        r["findings"][0]["evidence"].as_array().unwrap().iter().find(|e| e["signal"] == "ttft_p95").unwrap()["threshold"].clone()
    };
    assert_eq!(ceiling(&chat), ">= 2x baseline or > 3 s");
    assert_eq!(ceiling(&batch), ">= 2x baseline or > 30 s");
}

#[test]
fn a_latency_rise_caused_by_a_workload_shift_is_reported_as_such() {
    let report = check("workload-shift");
    let f = &report["findings"][0];
    assert_eq!(f["rule"], "workload-shift");
    let absorbed: Vec<&str> = f["also_consistent"].as_array().unwrap().iter().map(|a| a["rule"].as_str().unwrap()).collect();
    assert!(absorbed.contains(&"slow-prefill"), "the latency rule should be explained by the workload: {absorbed:?}");
    assert!(f["summary"].as_str().unwrap().contains("explained by the workload rather than by a serving regression"));
    // It keeps the latency rule's severity: users still see slower first tokens.
    assert_eq!(f["severity"], "warning");
}

#[test]
fn findings_can_be_grouped_by_another_label() {
    let (_, report, stderr) = explain("replica-imbalance", &["--group-by", "namespace,model_name"]);
    let scopes = report["metrics"]["scopes"].as_array().unwrap_or_else(|| panic!("{stderr}"));
    assert!(!scopes.is_empty());
    for s in scopes {
        assert_eq!(s["namespace"], "inference", "{s}");
        assert!(s["model_name"].is_string(), "{s}");
    }
    assert_eq!(report["findings"][0]["rule"], "replica-imbalance", "{:#?}", summary(&report));
}
