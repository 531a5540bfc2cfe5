//! The harness and the scenario generator, checked against a real Prometheus: what the other
//! integration tests rely on (series exist, names and labels are vLLM's, incidents show up in
//! PromQL the way the diagnosis will ask for them).

mod common;

use common::{start_scenario, PromServer};

/// PromQL for the P95 of a histogram (its name without `_bucket`) per model, over 30 minutes.
fn p95_by_model(histogram: &str) -> String {
    format!("histogram_quantile(0.95, sum by (le, model_name) (rate({histogram}_bucket[30m])))")
}

#[test]
fn an_empty_server_is_ready_and_holds_no_vllm_series() {
    let prom = PromServer::start_empty();
    let (status, body) = prom.get("/-/ready").expect("the server answers");
    assert_eq!(status, 200, "{body}");
    let now = chrono::Utc::now();
    assert!(prom.query("count(vllm:num_requests_running)", now).is_empty());
    assert_eq!(prom.query_one("vector(1)", now), 1.0);
}

#[test]
fn the_healthy_scenario_has_one_running_gauge_per_replica_at_the_window_end() {
    let (spec, prom) = start_scenario("healthy-steady");
    let end = spec.window_end();
    let count = prom.query_one("count(vllm:num_requests_running)", end);
    assert_eq!(count, f64::from(spec.replica_count()));
    // every replica is a target, and bucket bounds are written as floats
    assert_eq!(prom.query_one("count(up == 1)", end), f64::from(spec.replica_count()));
    assert_eq!(prom.query_one(r#"count(vllm:time_to_first_token_seconds_bucket{le="1.0"})"#, end), f64::from(spec.replica_count()));
    // HTTP metrics carry no model_name, as in vLLM
    let http = prom.query("http_requests_total", end);
    assert!(!http.is_empty());
    assert!(http.iter().all(|(labels, _)| !labels.contains_key("model_name")));
}

#[test]
fn the_healthy_scenario_keeps_every_models_ttft_p95_in_the_healthy_range() {
    let (spec, prom) = start_scenario("healthy-steady");
    let p95 = prom.query_by("model_name", &p95_by_model("vllm:time_to_first_token_seconds"), spec.window_end());
    assert_eq!(p95.len(), spec.models.len(), "{p95:?}");
    for model in &spec.models {
        let v = p95[&model.name];
        assert!((0.15..=0.35).contains(&v), "{}: TTFT P95 {v}", model.name);
    }
}

#[test]
fn kv_cache_pressure_fills_the_incident_models_cache_and_preempts_only_there() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let end = spec.window_end();
    let incident = spec.incident_model().expect("the scenario has an incident");
    let kv = prom.query_by("model_name", "max by (model_name) (max_over_time(vllm:kv_cache_usage_perc[30m]))", end);
    assert!(kv[incident] > 0.95, "KV usage {kv:?}");
    let preemptions = prom.query_by("model_name", "sum by (model_name) (rate(vllm:num_preemptions_total[30m]))", end);
    assert_eq!(preemptions.len(), spec.models.len(), "{preemptions:?}");
    for (model, rate) in &preemptions {
        if model == incident {
            assert!(*rate > 0.0, "{model} preempts");
        } else {
            assert_eq!(*rate, 0.0, "{model} does not preempt");
            assert!(kv[model] < 0.95, "{model} KV {}", kv[model]);
        }
    }
    // and the baseline before it was clean
    let before = prom.query_by("model_name", "sum by (model_name) (rate(vllm:num_preemptions_total[30m]))", spec.baseline_end());
    assert!(before.values().all(|r| *r == 0.0), "{before:?}");
}

#[test]
fn the_v0_scenario_exports_v0_names_only() {
    let (spec, prom) = start_scenario("v0-kv-cache-pressure");
    let end = spec.window_end();
    let replicas = f64::from(spec.replica_count());
    assert_eq!(prom.query_one("count(vllm:gpu_cache_usage_perc)", end), replicas);
    assert!(prom.query("vllm:kv_cache_usage_perc", end).is_empty());
    assert_eq!(prom.query_one("count(vllm:time_per_output_token_seconds_count)", end), replicas);
    assert!(prom.query("vllm:inter_token_latency_seconds_count", end).is_empty());
    assert!(prom.query("http_requests_total", end).is_empty());
    assert!(prom.query(r#"{__name__=~"vllm:.+", engine!=""}"#, end).is_empty(), "V0 has no engine label");
}

#[test]
fn every_vllm_series_and_up_carry_the_replicas_pod_and_namespace() {
    let (spec, prom) = start_scenario("healthy-steady");
    let end = spec.window_end();
    let replicas = f64::from(spec.replica_count());
    let pods: std::collections::BTreeMap<String, String> = spec.replicas().into_iter().map(|r| (r.instance, r.pod)).collect();
    for (labels, _) in prom.query(r#"up or vllm:num_requests_running or vllm:kv_cache_usage_perc"#, end) {
        assert_eq!(labels.get("namespace").map(String::as_str), Some("inference"), "{labels:?}");
        assert_eq!(labels.get("pod"), pods.get(&labels["instance"]), "{labels:?}");
    }
    assert!(prom.query(r#"{__name__=~"vllm:.+", pod=""}"#, end).is_empty(), "a vLLM series without a pod");
    // one pod per replica, so grouping by pod and by instance agree
    assert_eq!(prom.query_one("count(count by (pod) (vllm:num_requests_running))", end), replicas);
    // V1's newer series exist everywhere and stay flat when healthy
    assert_eq!(prom.query_one(r#"count(vllm:engine_sleep_state{sleep_state="awake"} == 1)"#, end), replicas);
    assert_eq!(prom.query_one("sum(increase(vllm:prompt_tokens_recomputed_total[30m]))", end), 0.0);
    assert_eq!(prom.query_one("sum(increase(vllm:admission_rejections_total[30m]))", end), 0.0);
    assert!(prom.query(r#"vllm:admission_rejections_total{engine!=""}"#, end).is_empty(), "no engine label");
}

#[test]
fn the_opentelemetry_fleet_is_stored_under_vllm_underscore_names_only() {
    let (spec, prom) = start_scenario("otel-kv-cache-pressure");
    let end = spec.window_end();
    assert!(prom.query(r#"{__name__=~"vllm:.+"}"#, end).is_empty());
    let incident = spec.incident_model().expect("an incident");
    let kv = prom.query_by("model_name", "max by (model_name) (max_over_time(vllm_kv_cache_usage_perc[30m]))", end);
    assert!(kv[incident] > 0.95, "{kv:?}");
    let p95 = prom.query_by("model_name", &p95_by_model("vllm_request_queue_time_seconds"), end);
    assert!(p95[incident] > 1.0, "{p95:?}");
}

#[test]
fn a_target_down_reads_up_0_and_its_series_vanish_from_instant_queries() {
    let (spec, prom) = start_scenario("target-down");
    let end = spec.window_end();
    let incident = spec.incident.as_ref().expect("an incident");
    let down = spec.instance_of(&incident.model, incident.replica).expect("the replica");
    let up = prom.query_by("instance", "up", end);
    assert_eq!(up.len(), spec.replica_count() as usize);
    for (instance, v) in &up {
        assert_eq!(*v, if *instance == down { 0.0 } else { 1.0 }, "{instance}");
    }
    // 12 minutes without a sample is past the 5-minute lookback
    let running = prom.query_by("instance", "vllm:num_requests_running", end);
    assert!(!running.contains_key(&down), "{running:?}");
    assert_eq!(running.len(), spec.replica_count() as usize - 1);
    // 30 minutes earlier it was there
    let before = prom.query_by("instance", "vllm:num_requests_running", spec.window_start());
    assert!(before.contains_key(&down));
}

#[test]
fn slo_burn_reads_30_percent_over_500_ms_from_the_bucket_in_both_windows() {
    let (spec, prom) = start_scenario("slo-burn");
    let incident = spec.incident_model().expect("an incident");
    let share = r#"1 - sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="0.5"}[30m]))
                    / sum by (model_name) (rate(vllm:time_to_first_token_seconds_count[30m]))"#;
    for at in [spec.window_end(), spec.window_start()] {
        let over = prom.query_by("model_name", share, at);
        assert!((0.26..=0.34).contains(&over[incident]), "at {at}: {over:?}");
        for (model, v) in &over {
            if model != incident {
                assert!(*v < 0.005, "{model}: {v}");
            }
        }
    }
}

#[test]
fn prefill_starvation_pins_running_at_its_cap_and_queues_in_promql() {
    let (spec, prom) = start_scenario("prefill-starvation");
    let end = spec.window_end();
    let incident = spec.incident_model().expect("an incident");
    let pinned = prom.query(
        &format!(
            r#"avg_over_time(vllm:num_requests_running{{model_name="{incident}"}}[30m]) / max_over_time(vllm:num_requests_running{{model_name="{incident}"}}[30m])"#
        ),
        end,
    );
    assert!(!pinned.is_empty());
    for (labels, v) in &pinned {
        assert!(*v >= 0.95, "{}: avg/max {v}", labels["instance"]);
    }
    let waiting = prom.query(&format!(r#"vllm:num_requests_waiting{{model_name="{incident}"}}"#), end);
    assert!(waiting.iter().all(|(_, v)| *v > 50.0), "{waiting:?}");
    let queue = prom.query_by("model_name", &p95_by_model("vllm:request_queue_time_seconds"), end);
    assert!(queue[incident] > 5.0, "{queue:?}");
}

#[test]
fn dcgm_series_join_the_vllm_series_on_pod_and_show_the_throttled_model() {
    let (spec, prom) = start_scenario("gpu-throttling");
    let end = spec.window_end();
    let incident = spec.incident_model().expect("an incident");
    // DCGM has no model_name; the pod label carries it across
    let clock = prom.query_by(
        "model_name",
        "avg by (model_name) (DCGM_FI_DEV_SM_CLOCK + on (pod) group_left (model_name) (0 * max by (pod, model_name) (vllm:num_requests_running)))",
        end,
    );
    assert_eq!(clock.len(), 1, "only the model with dcgm = true has GPU series: {clock:?}");
    assert!((1150.0..=1250.0).contains(&clock[incident]), "{clock:?}");
    assert!(prom.query("DCGM_FI_DEV_GPU_UTIL{model_name!=\"\"}", end).is_empty());
    let throttled = prom.query_one("count(DCGM_FI_DEV_CLOCKS_EVENT_REASONS == 64)", end);
    let gpus = spec.models.iter().find(|m| m.name == incident).map(|m| m.replicas).unwrap_or(0);
    assert_eq!(throttled, f64::from(gpus));
    assert_eq!(prom.query_one(r#"count(up{job="dcgm"} == 1)"#, end), f64::from(gpus));
    // an hour before, the same GPUs ran at full clock
    assert_eq!(prom.query_one("max(DCGM_FI_DEV_CLOCKS_EVENT_REASONS)", spec.window_start()), 0.0);
}

#[test]
fn engine_asleep_shows_in_the_sleep_state_gauge_while_requests_wait() {
    let (spec, prom) = start_scenario("engine-asleep");
    let end = spec.window_end();
    let incident = spec.incident_model().expect("an incident");
    let state = |s: &str| prom.query_by("model_name", &format!(r#"min by (model_name) (vllm:engine_sleep_state{{sleep_state="{s}"}})"#), end);
    assert_eq!(state("awake")[incident], 0.0);
    assert_eq!(state("weights_offloaded")[incident], 1.0);
    let waiting = prom.query_by("model_name", "min by (model_name) (vllm:num_requests_waiting)", end);
    assert!(waiting[incident] > 20.0, "{waiting:?}");
    let done = prom.query_by("model_name", "sum by (model_name) (increase(vllm:request_success_total[10m]))", end);
    assert_eq!(done[incident], 0.0);
}
