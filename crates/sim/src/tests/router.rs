//! vLLM's router in front of a model (`router = "vllm-router"`): the families, labels and joins
//! vllm-router 0.1.17 exports, and what each router story moves, measured on the scenario files.

use super::*;

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

fn fixture(name: &str) -> (ScenarioSpec, Vec<GeneratedSeries>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scenarios").join(format!("{name}.toml"));
    let spec = ScenarioSpec::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let series = generate(&spec);
    (spec, series)
}

/// A router series' value at `t` (0 where it has no sample yet: a counter created later).
fn value(series: &[GeneratedSeries], name: &str, labels: &[(&str, &str)], t: f64) -> f64 {
    series
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(k).map(String::as_str) == Some(*v)))
        .map(|s| s.points.iter().find(|(pt, _)| (*pt - t).abs() < 1e-6).map_or(0.0, |(_, v)| *v))
        .sum()
}

fn increase(series: &[GeneratedSeries], name: &str, labels: &[(&str, &str)], from: f64, to: f64) -> f64 {
    value(series, name, labels, to) - value(series, name, labels, from)
}

#[test]
fn the_router_is_a_target_of_its_own_with_vllm_routers_families_and_workers_named_by_url() {
    let (spec, series) = fixture("router-saturated-near");
    let router: Vec<&GeneratedSeries> = series.iter().filter(|s| s.labels.get("job").map(String::as_str) == Some("vllm-router")).collect();
    let names: std::collections::BTreeSet<&str> = router.iter().map(|s| s.name.as_str()).collect();
    for n in [
        "up",
        "vllm_router_requests_total",
        "vllm_router_processed_requests_total",
        "vllm_router_policy_decisions_total",
        "vllm_router_cb_state",
        "vllm_router_cb_outcomes_total",
        "vllm_router_worker_health",
        "vllm_router_active_workers",
        "vllm_router_generate_duration_seconds_bucket",
        "vllm_router_generate_duration_seconds_sum",
        "vllm_router_generate_duration_seconds_count",
    ] {
        assert!(names.contains(n), "{n} in {names:?}");
    }
    // No retry, no failure: the router creates those series at the first one.
    assert!(!names.contains("vllm_router_retries_total"));
    assert!(!router.iter().any(|s| s.labels.get("outcome").map(String::as_str) == Some("failure")));
    // No model label anywhere; every worker is an engine's instance behind http://.
    assert!(router.iter().all(|s| !s.labels.contains_key("model_name")));
    let instances: std::collections::BTreeSet<String> =
        spec.replicas().into_iter().filter(|r| r.model == MODEL).map(|r| format!("http://{}", r.instance)).collect();
    let workers: std::collections::BTreeSet<String> = router.iter().filter_map(|s| s.labels.get("worker").cloned()).collect();
    assert_eq!(workers, instances);
    // The bounds as the router writes them: `1`, not `1.0`.
    assert!(router.iter().any(|s| s.labels.get("le").map(String::as_str) == Some("1")));
    // Only the model with a router has one.
    assert_eq!(router.iter().filter(|s| s.name == "up").count(), 1);
    // Decisions are what the engines received, worker by worker.
    let (from, to) = (secs(spec.window_start()), secs(spec.window_end()));
    for r in spec.replicas().into_iter().filter(|r| r.model == MODEL) {
        let url = format!("http://{}", r.instance);
        let decided = increase(&series, "vllm_router_policy_decisions_total", &[("worker", &url)], from, to);
        let reached = increase(&series, "http_requests_total", &[("instance", &r.instance)], from, to);
        assert!((decided - reached).abs() < 1e-6, "{url}: {decided} decided, {reached} reached");
    }
}

#[test]
fn router_saturated_holds_each_request_1_5_s_in_the_router_and_the_engines_see_none_of_it() {
    let (spec, series) = fixture("router-saturated");
    let mean = |from, to| {
        increase(&series, "vllm_router_generate_duration_seconds_sum", &[], from, to)
            / increase(&series, "vllm_router_generate_duration_seconds_count", &[], from, to)
    };
    let (b0, b1, w0, w1) = (secs(spec.baseline_start()), secs(spec.baseline_end()), secs(spec.window_start()), secs(spec.window_end()));
    let (base, win) = (mean(b0, b1), mean(w0, w1));
    assert!((0.002..0.006).contains(&base), "baseline {base}");
    // A lognormal of median 1.5 s and sigma 0.5: mean 1.5 e^0.125 = 1.70 s.
    assert!((1.55..1.85).contains(&win), "window {win}");
    let w = window(&series, &spec, MODEL);
    let b = baseline(&series, &spec, MODEL);
    let ttft = w.mean(TTFT) / b.mean(TTFT);
    assert!((0.9..1.1).contains(&ttft), "the engines' TTFT x{ttft}");
    let (_, near) = fixture("router-saturated-near");
    let near_win =
        increase(&near, "vllm_router_generate_duration_seconds_sum", &[], w0, w1) / increase(&near, "vllm_router_generate_duration_seconds_count", &[], w0, w1);
    assert!((0.11..0.16).contains(&near_win), "near miss {near_win}");
}

#[test]
fn routing_skew_sends_the_named_worker_three_times_each_peers_share_and_its_near_miss_1_2_times() {
    for (name, ratio) in [("routing-skew", 3.0), ("routing-skew-near", 1.2)] {
        let (spec, series) = fixture(name);
        let (from, to) = (secs(spec.window_start()), secs(spec.window_end()));
        let decided: Vec<f64> = spec
            .replicas()
            .into_iter()
            .filter(|r| r.model == MODEL)
            .map(|r| {
                increase(
                    &series,
                    "vllm_router_policy_decisions_total",
                    &[("worker", &format!("http://{}", r.instance)), ("policy", "consistent_hash")],
                    from,
                    to,
                )
            })
            .collect();
        let peers = (decided[0] + decided[1]) / 2.0;
        let got = decided[2] / peers;
        assert!((ratio * 0.9..ratio * 1.1).contains(&got), "{name}: x{got} ({decided:?})");
    }
}

#[test]
fn backend_cut_off_holds_one_circuit_open_while_its_engine_reports_and_gets_nothing() {
    let (spec, series) = fixture("backend-cut-off");
    let (from, to) = (secs(spec.window_start()), secs(spec.window_end()));
    let cut = spec.instance_of(MODEL, 1).expect("replica 1");
    let url = format!("http://{cut}");
    let open: Vec<f64> = series
        .iter()
        .filter(|s| s.name == "vllm_router_cb_state" && s.labels["worker"] == url)
        .flat_map(|s| s.points.iter().filter(|(t, _)| *t > from && *t <= to).map(|(_, v)| *v))
        .collect();
    assert!(!open.is_empty() && open.iter().all(|v| *v == 1.0), "{open:?}");
    assert!(value(&series, "vllm_router_cb_outcomes_total", &[("worker", &url), ("outcome", "failure")], to) >= 5.0);
    assert_eq!(increase(&series, "http_requests_total", &[("instance", &cut)], from, to), 0.0);
    // Its engine still reports: up, and its gauges at every scrape.
    let w = window(&series, &spec, MODEL).replica(&cut);
    assert_eq!(w.gauge("vllm:num_requests_running").len(), (spec.window.as_secs() / spec.interval.as_secs()) as usize);
    // Its peers carry its share: the model's total is unchanged.
    let total = window(&series, &spec, MODEL).increase("vllm:request_success_total") / baseline(&series, &spec, MODEL).increase("vllm:request_success_total");
    assert!((0.9..1.1).contains(&total), "x{total}");
}

#[test]
fn router_retries_retry_a_tenth_of_the_requests_and_the_engines_count_no_error() {
    let (spec, series) = fixture("router-retries");
    let (b0, w0, w1) = (secs(spec.baseline_start()), secs(spec.window_start()), secs(spec.window_end()));
    assert_eq!(increase(&series, "vllm_router_retries_total", &[], b0, w0), 0.0);
    let share = increase(&series, "vllm_router_retries_total", &[], w0, w1) / increase(&series, "vllm_router_requests_total", &[], w0, w1);
    assert!((0.08..0.12).contains(&share), "{share}");
    let (mut errors, mut all) = (0.0, 0.0);
    for r in spec.replicas().into_iter().filter(|r| r.model == MODEL) {
        errors += increase(&series, "http_requests_total", &[("instance", &r.instance), ("status", "5xx")], w0, w1);
        all += increase(&series, "http_requests_total", &[("instance", &r.instance)], w0, w1);
    }
    assert!(all > 1000.0 && errors / all < 0.01, "{errors} of {all}");
}

/// The share of the window's prefix decisions made without the prompt's tokens, and all of them.
fn blind_share(spec: &ScenarioSpec, series: &[GeneratedSeries]) -> (f64, f64) {
    let (w0, w1) = (secs(spec.window_start()), secs(spec.window_end()));
    let fam = "vllm_router_prefix_routing_decisions_total";
    let blind = increase(series, fam, &[("outcome", "missing_tokens")], w0, w1);
    let all = increase(series, fam, &[], w0, w1);
    (blind / all, all)
}

#[test]
fn router_prefix_blind_makes_every_decision_without_tokens_after_a_baseline_that_had_them() {
    let (spec, series) = fixture("router-prefix-blind");
    let (share, all) = blind_share(&spec, &series);
    assert!(share > 0.99 && all > 5000.0, "{share} of {all}");
    let (b0, w0) = (secs(spec.baseline_start()), secs(spec.window_start()));
    let fam = "vllm_router_prefix_routing_decisions_total";
    assert_eq!(increase(&series, fam, &[("outcome", "missing_tokens")], b0, w0), 0.0);
    assert!(increase(&series, fam, &[("outcome", "prefix_hit")], b0, w0) > 0.0);
    // as vllm-router labels them, one decision per request
    assert!(series.iter().filter(|s| s.name == fam).all(|s| s.labels["policy"] == "cache_aware" && s.labels["stage"] == "regular"));
    let requests = increase(&series, "vllm_router_requests_total", &[], w0, secs(spec.window_end()));
    assert!((all - requests).abs() <= 2.0, "{all} decisions for {requests} requests");
}

#[test]
fn router_prefix_blind_near_miss_lacks_the_tokens_for_two_fifths_of_the_decisions() {
    let (spec, series) = fixture("router-prefix-blind-near");
    let (share, all) = blind_share(&spec, &series);
    assert!((0.38..0.42).contains(&share) && all > 5000.0, "{share} of {all}");
}

#[test]
fn only_a_cache_aware_router_writes_prefix_decisions() {
    let (_, series) = fixture("router-retries-near");
    assert!(!series.iter().any(|s| s.name == "vllm_router_prefix_routing_decisions_total"));
}
