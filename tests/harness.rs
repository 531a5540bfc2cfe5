//! The harness and the scenario generator, checked against a real Prometheus: what the other
//! integration tests rely on (series exist, names and labels are vLLM's, incidents show up in
//! PromQL the way the diagnosis will ask for them).

mod common;

use common::{start_scenario, PromServer};

const TTFT_P95: &str =
    "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[30m])))";

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
    assert_eq!(
        prom.query_one(r#"count(vllm:time_to_first_token_seconds_bucket{le="1.0"})"#, end),
        f64::from(spec.replica_count())
    );
    // HTTP metrics carry no model_name, as in vLLM
    let http = prom.query("http_requests_total", end);
    assert!(!http.is_empty());
    assert!(http.iter().all(|(labels, _)| !labels.contains_key("model_name")));
}

#[test]
fn the_healthy_scenario_keeps_every_models_ttft_p95_in_the_healthy_range() {
    let (spec, prom) = start_scenario("healthy-steady");
    let p95 = prom.query_by("model_name", TTFT_P95, spec.window_end());
    assert_eq!(p95.len(), spec.models.len(), "{p95:?}");
    for model in &spec.models {
        let v = p95[&model.name];
        assert!((0.3..=0.6).contains(&v), "{}: TTFT P95 {v}", model.name);
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
    let before =
        prom.query_by("model_name", "sum by (model_name) (rate(vllm:num_preemptions_total[30m]))", spec.baseline_end());
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
