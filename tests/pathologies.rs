//! Every pathology in the runbooks against a real Prometheus: each rule ranks first for the right
//! model (and replica) on its generated scenario, and stays quiet on its near miss. A V1 fleet, a V0
//! fleet and an OpenTelemetry-renamed fleet give the same diagnosis.

mod common;

use assert_cmd::Command;
use serde_json::Value;

fn explain(name: &str, extra: &[&str]) -> (vllm_diag_sim::ScenarioSpec, Value, String, Option<i32>) {
    let (spec, prom) = common::start_scenario(name);
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out =
        Command::cargo_bin("vllm-diag").unwrap().args(["explain", "--prometheus", &prom.url, "--at", &at, "--format", "json"]).args(extra).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{name}: no JSON ({e}): {stderr}"));
    (spec, report, stderr, out.status.code())
}

fn summary(report: &Value) -> Vec<String> {
    report["findings"].as_array().unwrap().iter().map(|f| format!("{} {} {} {}", f["severity"], f["rule"], f["scope"], f["score"])).collect()
}

fn check(name: &str) -> Value {
    // The run tests/differential.rs and tests/victoria.rs judge as well, made once per build.
    let run = common::scenario_run(name);
    let (spec, report, stderr, code) = (run.spec.clone(), run.report(), run.stderr.clone(), run.code);
    assert!(report.is_object(), "{name}: no JSON (exit {code:?}): {stderr}");
    if std::env::var_os("VLLM_DIAG_SHOW").is_some() {
        eprintln!("{name}: {}", serde_json::to_string_pretty(&report["findings"]).unwrap());
        let listed: Vec<String> = report["unexplained"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|u| format!("{} {} {} vs {} from {} ({})", u["signal"], u["scope"], u["value"], u["baseline"], u["onset"], u["ratio"]))
            .collect();
        eprintln!("{name}: unexplained {listed:#?}; not evaluated {}", report["not_evaluated"]);
    }
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
    // What else moved: a healthy fleet or near miss lists nothing; an incident no rule names is
    // listed for its model, from the incident's onset (within two trend steps).
    let listed = report["unexplained"].as_array().unwrap_or_else(|| panic!("{name}: no unexplained list"));
    if ex.healthy && ex.unexplained.is_empty() {
        assert!(listed.is_empty(), "{name}: a healthy fleet lists changes no rule explains: {listed:#?}");
    }
    for signal in &ex.unexplained {
        let Some(u) = listed.iter().find(|u| u["signal"] == signal.as_str() && ex.model.as_ref().is_none_or(|m| u["scope"]["model_name"] == m.as_str())) else {
            panic!("{name}: {signal} not listed as unexplained: {listed:#?}")
        };
        let onset = chrono::DateTime::parse_from_rfc3339(u["onset"].as_str().unwrap()).unwrap().with_timezone(&chrono::Utc);
        let expected = spec.incident_onset().expect("an incident");
        let step = (spec.window_end() - spec.window_start()).num_seconds() / 30;
        assert!((onset - expected).num_seconds().abs() <= 2 * step, "{name}: {signal} listed from {onset}, the incident began at {expected}");
        assert!(u["ongoing"] == true, "{name}: {signal} no longer moved at the window's end: {u:#}");
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
        // Reached without the primary signals: said, and marked lower confidence.
        assert_eq!(f["stood_in"].is_object(), ex.stood_in, "{name}: stood_in expected {} but the finding says {:#}", ex.stood_in, f["stood_in"]);
        // The other models stay quiet.
        if let Some(model) = &ex.model {
            let elsewhere: Vec<_> = findings.iter().filter(|f| f["scope"]["model_name"] != model.as_str() && f["severity"] != "info").collect();
            assert!(elsewhere.is_empty(), "{name}: findings for healthy models: {elsewhere:#?}");
        }
    }
    if let Some(cause) = &ex.replica_cause {
        let f = findings.first().unwrap_or_else(|| panic!("{name}: no finding, expected a replica cause"));
        assert_eq!(f["replica_cause"]["kind"], cause.as_str(), "{name}: the replica's cause: {:#}", f["replica_cause"]);
        let replica = ex.replica.as_deref().unwrap_or_default();
        match cause.as_str() {
            "load" => {
                assert_eq!(f["severity"], "info", "{name}: a replica that carries more load is not a bad replica: {:#?}", summary(&report));
                let loud: Vec<_> =
                    findings.iter().filter(|f| f["severity"] != "info" && f["scope"].as_object().unwrap().values().any(|v| v == replica)).collect();
                assert!(loud.is_empty(), "{name}: a warning or critical finding names the loaded replica: {loud:#?}");
                assert!(!f["steps"].to_string().to_lowercase().contains("drain"), "{name}: load is not drained: {:#}", f["steps"]);
            }
            "config" => {
                assert_eq!(f["severity"], "warning", "{name}: {:#?}", summary(&report));
                let cards = f["recommendations"].as_array().cloned().unwrap_or_default();
                assert!(cards.iter().any(|c| c["flag"] == "--max-num-seqs"), "{name}: no card aligning --max-num-seqs: {cards:#?}");
            }
            _ => {}
        }
    }
    // Time by hop: the hop that grew is named for the incident's model.
    if let Some(hop) = &ex.grew {
        let model = ex.model.as_deref().expect("grew needs a model");
        let split = report["hops"].as_array().and_then(|h| h.iter().find(|s| s["scope"]["model_name"] == model));
        let split = split.unwrap_or_else(|| panic!("{name}: no time by hop for {model}: {:#}", report["hops"]));
        assert_eq!(split["grew"], hop.as_str(), "{name}: time by hop {split:#}");
    }
    if ex.cold_start {
        let f = findings.first().unwrap_or_else(|| panic!("{name}: no finding, expected a cold start"));
        assert_eq!(f["severity"], "info", "{name}: a cold start is info: {:#?}", summary(&report));
        assert!(f["cold_start"]["warm"].is_string(), "{name}: no cold start with its end on {}: {:#}", f["rule"], f["cold_start"]);
        assert!(f["preceded_by"]["event"]["kind"] == "restart", "{name}: the cold start is not tied to the restart: {:#}", f["preceded_by"]);
    }
    if let Some(exit) = ex.exit {
        assert_eq!(code, Some(exit), "{name}: exit code; stderr: {stderr}; coverage: {:#}", report["coverage"]);
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
    config_change_kv_pressure => "config-change-kv-pressure",
    kv_cache_pressure_fresh => "kv-cache-pressure-fresh",
    config_change_near => "config-change-near",
    restart_near => "restart-near",
    rollout_near => "rollout-near",
    rollout_slow_decode => "rollout-slow-decode",
    replica_removed_overload => "replica-removed-overload",
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
    gpu_prompt_shift => "gpu-prompt-shift",
    gpu_prompt_shift_near_miss => "gpu-prompt-shift-near",
    gpu_prefill_bursts => "gpu-prefill-bursts",
    gpu_thermal_slowdown => "gpu-thermal-slowdown",
    gpu_thermal_slowdown_near_miss => "gpu-thermal-slowdown-near",
    gpu_power_limit_lowered => "gpu-power-limit-lowered",
    gpu_power_limit_lowered_near_miss => "gpu-power-limit-lowered-near",
    slo_burn => "slo-burn",
    slo_burn_near_miss => "slo-burn-near",
    gauge_only_kv_cache_pressure => "gauge-only-kv-cache-pressure",
    gauge_only_kv_cache_pressure_near_miss => "gauge-only-kv-cache-pressure-near",
    gauge_only_load_exceeds_capacity => "gauge-only-load-exceeds-capacity",
    gauge_only_load_exceeds_capacity_near_miss => "gauge-only-load-exceeds-capacity-near",
    gauge_only_chronic_kv_cache_pressure => "gauge-only-chronic-kv-cache-pressure",
    replica_config_cap => "replica-config-cap",
    replica_config_cap_near_miss => "replica-config-cap-near",
    replica_batch_load => "replica-batch-load",
    replica_batch_load_near_miss => "replica-batch-load-near",
    binding_max_num_seqs => "binding-max-num-seqs",
    binding_max_num_seqs_near_miss => "binding-max-num-seqs-near",
    target_down_before_the_window => "target-down-before-window",
    cold_start => "cold-start",
    cold_start_near_miss => "cold-start-near",
    slow_input_processing_near_miss => "slow-input-processing-near",
    give_ups => "give-ups",
    give_ups_near_miss => "give-ups-near",
    priority_preemption => "priority-preemption",
    priority_preemption_near_miss => "priority-preemption-near",
    repeated_preemption => "repeated-preemption",
    repeated_preemption_near_miss => "repeated-preemption-near",
    gauge_only_load_exceeds_capacity_no_counters => "gauge-only-load-exceeds-capacity-no-counters",
    gauge_only_load_exceeds_capacity_no_counters_near_miss => "gauge-only-load-exceeds-capacity-no-counters-near",
    external_prefix_cache_miss => "external-prefix-cache-miss",
    external_prefix_cache_miss_near_miss => "external-prefix-cache-miss-near",
    process_memory_growth => "process-memory-growth",
    process_memory_growth_near_miss => "process-memory-growth-near",
    iteration_tokens_collapse => "iteration-tokens-collapse",
    iteration_tokens_collapse_near_miss => "iteration-tokens-collapse-near",
    ttft_unattributed => "ttft-unattributed",
    ttft_unattributed_near_miss => "ttft-unattributed-near",
    router_saturated => "router-saturated",
    router_saturated_near_miss => "router-saturated-near",
    routing_skew => "routing-skew",
    routing_skew_near_miss => "routing-skew-near",
    backend_cut_off => "backend-cut-off",
    backend_cut_off_near_miss => "backend-cut-off-near",
    router_retries => "router-retries",
    router_retries_near_miss => "router-retries-near",
    prefill_pool_saturated => "prefill-pool-saturated",
    prefill_pool_saturated_near_miss => "prefill-pool-saturated-near",
    decode_pool_saturated => "decode-pool-saturated",
    decode_pool_saturated_near_miss => "decode-pool-saturated-near",
    kv_transfer_slow => "kv-transfer-slow",
    kv_transfer_slow_near_miss => "kv-transfer-slow-near",
    kv_transfer_rate_impossible => "kv-transfer-rate-impossible",
    kv_transfer_rate_impossible_near_miss => "kv-transfer-rate-impossible-near",
    slow_decode_near_miss => "slow-decode-near",
    slow_prefill_near_miss => "slow-prefill-near",
    severe_saturation_near_miss => "severe-saturation-near",
    http_errors_near_miss => "http-errors-near",
    workload_lighter => "workload-lighter",
    workload_lighter_near_miss => "workload-lighter-near",
    stalled_engine => "stalled-engine",
    stalled_engine_near_miss => "stalled-engine-near",
    gpu_prefill_bursts_near_miss => "gpu-prefill-bursts-near",
    deferred_waiting => "deferred-waiting",
    deferred_waiting_near_miss => "deferred-waiting-near",
    router_prefix_blind => "router-prefix-blind",
    router_prefix_blind_near_miss => "router-prefix-blind-near",
    rank_imbalance => "rank-imbalance",
    rank_imbalance_near_miss => "rank-imbalance-near",
}

/// The value of `signal` in `f`'s evidence, window and baseline.
fn evidence_of(f: &Value, signal: &str) -> (f64, f64) {
    let e = f["evidence"].as_array().unwrap().iter().find(|e| e["signal"] == signal).unwrap_or_else(|| panic!("no {signal} in {f:#}"));
    (e["value"].as_f64().unwrap(), e["baseline"].as_f64().unwrap())
}

#[test]
fn a_ttft_rise_before_the_engine_is_slow_input_processing_with_the_split_in_its_evidence_and_not_slow_prefill() {
    let report = check("slow-input-processing");
    let f = &report["findings"][0];
    // TTFT up 1.5 s, all of it before the engine: the split says so.
    let (rest, rest_base) = evidence_of(f, "input_processing_mean");
    assert!((1.3..1.8).contains(&rest) && rest_base.abs() < 0.05, "input processing {rest} s against {rest_base} s");
    let (prefill, prefill_base) = evidence_of(f, "prefill_mean");
    assert!((0.8..1.25).contains(&(prefill / prefill_base)), "prefill {prefill} against {prefill_base}");
    let (ttft, ttft_base) = evidence_of(f, "ttft_mean");
    let (queue, queue_base) = evidence_of(f, "queue_mean");
    assert!((ttft - ttft_base - 1.5).abs() < 0.25 && (queue - queue_base).abs() < 0.05, "TTFT {ttft_base} -> {ttft}, queue {queue_base} -> {queue}");
}

#[test]
fn slow_prefill_still_blames_prefill_when_its_own_histogram_moved_and_says_how_little_came_before_the_engine() {
    let report = check("slow-prefill");
    let f = &report["findings"][0];
    let (prefill, prefill_base) = evidence_of(f, "prefill_mean");
    assert!(prefill >= 1.5 * prefill_base, "prefill {prefill_base} -> {prefill}");
    let (rest, _) = evidence_of(f, "input_processing_mean");
    assert!(rest.abs() < 0.05, "input processing {rest}");
    let absent = report["findings"].as_array().unwrap().iter().all(|f| f["rule"] != "slow-input-processing");
    assert!(absent, "{:#?}", summary(&report));
}

#[test]
fn a_quantile_past_the_largest_custom_bucket_reads_as_at_least_that_bound_and_still_decides() {
    let report = check("custom-buckets-slow-prefill");
    let f = &report["findings"][0];
    let e = f["evidence"].as_array().unwrap().iter().find(|e| e["signal"] == "ttft_p95").expect("ttft_p95 evidence");
    // histogram_quantile returns 0.5 s, the largest finite bound: only a lower bound.
    assert_eq!(e["value_bound"]["above"].as_f64(), Some(0.5), "{e:#}");
    assert!(e["baseline_bound"].is_null() && e["baseline"].as_f64().unwrap() < 0.25, "{e:#}");
    let (spec, prom) = common::start_scenario("custom-buckets-slow-prefill");
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let out = Command::cargo_bin("vllm-diag").unwrap().args(["explain", "--prometheus", &prom.url, "--at", &at, "-v"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // The evidence row (its title may wrap in its cell; the numbers stay on its first line).
    let line = text.lines().find(|l| l.contains("│ P95 time to first")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("≥ 500 ms") && line.contains("≥ 2"), "{line}");
}

#[test]
fn an_slo_target_under_the_first_custom_bucket_is_not_read_as_a_burn_and_names_the_flag() {
    let report = check("custom-buckets-near");
    let text = report["not_evaluated"].to_string() + &report["warnings"].to_string();
    assert!(text.contains("under the histogram's first bucket (1 s)") && text.contains("--custom-histogram-buckets"), "{text}");
}

#[test]
fn a_saturated_router_in_front_of_healthy_engines_is_found_under_a_selector_on_the_model_and_its_wait_is_the_routers_hop() {
    // The router's series carry no model label: discovery and its queries look for them without
    // the selector's model matcher, and attribute them through the workers' engines.
    let (_, report, stderr, _) = explain("router-saturated", &["--selector", r#"model_name="meta-llama/Llama-3.1-8B-Instruct""#]);
    let f = &report["findings"][0];
    assert_eq!(f["rule"], "router-saturated", "{stderr}: {:#?}", summary(&report));
    let (router, base) = evidence_of(f, "router_duration_mean");
    assert!(router > 1.5 && base < 0.01, "router {base} -> {router}");
    let split = &report["hops"][0];
    assert_eq!(split["grew"], "router", "{split:#}");
    let hops = split["hops"].as_array().unwrap();
    assert!(hops.iter().filter(|h| h["hop"] != "router" && h["hop"] != "decode").all(|h| h["window"].as_f64().unwrap_or(0.0) < 0.15), "{split:#}");
    assert!(split["text"].as_str().unwrap().contains("at the router, engine hops unchanged"), "{split:#}");
}

#[test]
fn the_time_by_hop_names_the_queue_under_load_and_decode_when_decode_slowed() {
    // Their expectations' `grew` (explain.rs checks the rest of these scenarios).
    for name in ["load-exceeds-capacity", "slow-decode"] {
        let report = check(name);
        let quiet = report["hops"].as_array().unwrap().iter().filter(|s| s["scope"]["model_name"] != "meta-llama/Llama-3.1-8B-Instruct");
        for s in quiet {
            assert!(s["grew"].is_null(), "{name}: a healthy model's hop grew: {s:#}");
        }
    }
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
        "slow-input-processing",
        "custom-buckets-slow-prefill",
        "custom-buckets-near",
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
    let key = |r: &Value| r["findings"].as_array().unwrap().iter().map(|f| (f["rule"].clone(), f["scope"].clone(), f["severity"].clone())).collect::<Vec<_>>();
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
    let (_, report, _, _) = explain("kv-cache-pressure", &[]);
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
    let (_, chat, _, _) = explain("load-exceeds-capacity", &[]);
    let (_, batch, _, _) = explain("load-exceeds-capacity", &["--profile", "batch"]);
    let ceiling = |r: &Value| r["findings"][0]["evidence"].as_array().unwrap().iter().find(|e| e["signal"] == "ttft_p95").unwrap()["threshold"].clone();
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
    let (_, report, stderr, _) = explain("replica-imbalance", &["--group-by", "namespace,model_name"]);
    let scopes = report["metrics"]["scopes"].as_array().unwrap_or_else(|| panic!("{stderr}"));
    assert!(!scopes.is_empty());
    for s in scopes {
        assert_eq!(s["namespace"], "inference", "{s}");
        assert!(s["model_name"].is_string(), "{s}");
    }
    assert_eq!(report["findings"][0]["rule"], "replica-imbalance", "{:#?}", summary(&report));
}

/// The code-completion profile's 200 ms TTFT target falls between vLLM's 100 ms and 250 ms buckets:
/// the burn rate is interpolated between them (and the report says it is an estimate), so it must lie
/// between the burn rates read at those two buckets.
#[test]
fn an_slo_target_between_two_buckets_is_interpolated_and_flagged_as_an_estimate() {
    let (spec, prom) = common::start_scenario("slo-burn");
    let at = spec.window_end();
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--prometheus", &prom.url, "--at", &at.to_rfc3339(), "--format", "json", "--profile", "code-completion"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let warnings = report["warnings"].to_string();
    assert!(
        warnings
            .contains("vllm:time_to_first_token_seconds has no bucket at the SLO target 200 ms: burn rates interpolate between its 100 ms and 250 ms buckets"),
        "{warnings}"
    );
    // With this profile's tighter targets the rule fires for a model (which one depends on what
    // else explains its latency); its evidence carries the TTFT burn either way.
    let finding = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "slo-burn")
        .unwrap_or_else(|| panic!("no slo-burn finding: {:#?}", summary(&report)));
    let model = finding["scope"]["model_name"].as_str().unwrap();
    let ev = finding["evidence"].as_array().unwrap().iter().find(|e| e["signal"] == "ttft_burn_1h").expect("ttft_burn_1h evidence");
    let query = ev["query"].as_str().unwrap();
    assert!(query.contains(r#"le="0.1""#) && query.contains(r#"le="0.25""#), "{query}");
    let got = ev["value"].as_f64().unwrap();
    let burn_at = |le: &str| {
        let q = format!(
            r#"(1 - sum(rate(vllm:time_to_first_token_seconds_bucket{{model_name="{model}",le="{le}"}}[1h])) / sum(rate(vllm:time_to_first_token_seconds_count{{model_name="{model}"}}[1h]))) / 0.01"#
        );
        prom.query_one(&q, at)
    };
    let (strict, lenient) = (burn_at("0.1"), burn_at("0.25"));
    assert!(strict > lenient, "the scenario should put observations between 100 ms and 250 ms: {strict} vs {lenient}");
    assert!(lenient < got && got < strict, "interpolated burn {got} is not between {lenient} (250 ms) and {strict} (100 ms)");
    // Two thirds of the way from the 100 ms bucket to the 250 ms one.
    let expected = strict + (lenient - strict) * (2.0 / 3.0);
    assert!((got - expected).abs() <= 1e-3 * expected.abs().max(1.0), "got {got}, expected {expected}");
}

/// On Kubernetes the pod names a replica better than its address: with `--replica-label pod` the
/// outlier finding, its breakdown and the fleet summary speak of pods.
#[test]
fn replicas_can_be_told_apart_by_pod() {
    let (spec, prom) = common::start_scenario("replica-outlier");
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--prometheus", &prom.url, "--at", &spec.window_end().to_rfc3339(), "--format", "json", "--replica-label", "pod"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no JSON ({e}): {}", String::from_utf8_lossy(&out.stderr)));
    let f = &report["findings"][0];
    assert_eq!(f["rule"], "replica-outlier", "{:#?}", summary(&report));
    let pod = f["scope"]["pod"].as_str().unwrap_or_else(|| panic!("the finding does not name a pod: {}", f["scope"]));
    // The pod of the replica the scenario made slow (its instance is in the expectation).
    let instance = spec.expect.replica.clone().unwrap();
    let pods = prom.query_by("pod", &format!(r#"group by (pod) (vllm:num_requests_running{{instance="{instance}"}})"#), spec.window_end());
    assert_eq!(pods.keys().collect::<Vec<_>>(), vec![pod], "{instance} runs in another pod");
    assert_eq!(report["metrics"]["replica_label"], "pod");
    let replicas: u64 = spec.models.iter().map(|m| m.replicas as u64).sum();
    assert_eq!(report["metrics"]["labels"]["pod"], replicas, "{}", report["metrics"]);
    assert_eq!(report["metrics"]["labels"]["instance"], replicas, "{}", report["metrics"]);
    assert_eq!(report["metrics"]["labels"]["namespace"], 1, "{}", report["metrics"]);
}

/// A grouping or replica label that no vLLM series carries is said, with the labels that exist, and
/// the table's header gives the fleet's size.
#[test]
fn a_label_no_series_carries_is_warned_about_and_the_fleet_is_sized() {
    let (spec, prom) = common::start_scenario("healthy-steady");
    let at = spec.window_end().to_rfc3339();
    let run = |extra: &[&str]| {
        let out = Command::cargo_bin("vllm-diag")
            .unwrap()
            .args(["explain", "--prometheus", &prom.url, "--at", &at])
            .args(extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let (code, json) = run(&["--group-by", "model_name,cluster", "--replica-label", "node", "--format", "json"]);
    assert_eq!(code, Some(0), "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("--group-by cluster: no vLLM series in the window carries this label")
            && warnings.contains("labels checked and found: instance, model_name, namespace, pod"),
        "{warnings}"
    );
    assert!(warnings.contains("--replica-label node: no vLLM series in the window carries this label"), "{warnings}");
    assert_eq!(report["metrics"]["labels"]["cluster"], 0);

    // The fleet line is part of the full evidence (`-v`); the default text's footer counts replicas.
    let (_, table) = run(&["-v"]);
    let replicas: usize = spec.models.iter().map(|m| m.replicas as usize).sum();
    let fleet = format!("Fleet     {replicas} replicas by instance · {replicas} pods · 1 namespace");
    assert!(table.contains(&fleet), "no `{fleet}` in:\n{table}");
}
