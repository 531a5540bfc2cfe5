//! Every pathology of issue 3 and its near miss, measured from the generated data the way the
//! diagnosis will measure it over a 30-minute window: quantiles from bucket increases, rates from
//! counter increases, gauges over time. The numbers asserted are the targets the rules'
//! thresholds are built around; a near miss must stay on the quiet side of them.

use super::*;

const HEALTHY: &str = "meta-llama/Llama-3.1-8B-Instruct";
const SICK: &str = "Qwen/Qwen2.5-7B-Instruct";

/// A fleet of one healthy model (one replica) and the incident model (three replicas, 2 req/s
/// each, `options` added to its [[model]]), 10 minutes of warm-up, 30-minute baseline and window.
fn fleet(kind: &str, options: &str, incident: &str) -> ScenarioSpec {
    fleet_with(kind, options, incident, "v1")
}

fn fleet_with(kind: &str, options: &str, incident: &str, metrics: &str) -> ScenarioSpec {
    let text = format!(
        r#"
name = "unit"
seed = 21
start = "2026-01-15T08:00:00Z"
interval = "30s"
warmup = "10m"
baseline = "30m"
window = "30m"
metrics = "{metrics}"
[[model]]
name = "{HEALTHY}"
replicas = 1
rate = 2.0
[[model]]
name = "{SICK}"
replicas = 3
rate = 2.0
{options}
[incident]
kind = "{kind}"
model = "{SICK}"
{incident}
"#
    );
    ScenarioSpec::from_toml_str(&text).unwrap_or_else(|e| panic!("{kind}: {e}"))
}

/// A generated scenario with its incident model (`sick`) and one healthy neighbour.
struct Run {
    spec: ScenarioSpec,
    series: Vec<GeneratedSeries>,
    sick: String,
    healthy: String,
}

impl Run {
    fn new(spec: ScenarioSpec) -> Run {
        let series = generate(&spec);
        let sick = spec.incident_model().expect("an incident").to_string();
        let healthy = spec.models.iter().find(|m| m.name != sick).expect("a healthy neighbour").name.clone();
        Run { spec, series, sick, healthy }
    }

    /// The scenario file `fixtures/scenarios/<name>.toml`: the checks below are run on the very
    /// data the integration tests load into Prometheus.
    fn fixture(name: &str) -> Run {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scenarios").join(format!("{name}.toml"));
        Run::new(ScenarioSpec::load(&path).unwrap_or_else(|e| panic!("{name}: {e}")))
    }

    fn w(&self) -> View<'_> {
        window(&self.series, &self.spec, &self.sick)
    }

    fn b(&self) -> View<'_> {
        baseline(&self.series, &self.spec, &self.sick)
    }

    /// The last `minutes` of the window.
    fn tail(&self, minutes: i64) -> View<'_> {
        self.w().between(self.spec.window_end() - chrono::TimeDelta::minutes(minutes), self.spec.window_end())
    }

    /// Window over baseline of a histogram's P95.
    fn p95_ratio(&self, family: &str) -> f64 {
        self.w().quantile(0.95, family) / self.b().quantile(0.95, family)
    }

    fn ratio(&self, f: impl Fn(&View) -> f64) -> f64 {
        f(&self.w()) / f(&self.b())
    }

    /// Replicas of the incident model.
    fn n(&self) -> u32 {
        self.spec.models.iter().find(|m| m.name == self.sick).map(|m| m.replicas).unwrap_or(0)
    }

    /// The replica the incident singles out.
    fn singled(&self) -> u32 {
        self.spec.incident.as_ref().map(|i| i.replica).unwrap_or(0)
    }

    fn instance(&self, index: u32) -> String {
        self.spec.instance_of(&self.sick, index).expect("the replica exists")
    }

    /// The healthy model stays healthy whatever happens to its neighbour.
    fn assert_neighbour_untouched(&self) {
        let (w, b) = (window(&self.series, &self.spec, &self.healthy), baseline(&self.series, &self.spec, &self.healthy));
        for family in [TTFT, ITL, QUEUE] {
            let r = w.quantile(0.95, family) / b.quantile(0.95, family);
            assert!((0.75..1.33).contains(&r), "the healthy model's {family} moved: x{r}");
        }
        assert_eq!(w.increase("vllm:num_preemptions_total"), 0.0);
    }
}

fn within(what: &str, v: f64, range: std::ops::RangeInclusive<f64>) {
    assert!(range.contains(&v), "{what} = {v}, expected {range:?}");
}

/// Latency P95s unchanged (x0.9..1.1 for ITL, x0.8..1.25 for TTFT and queue).
fn assert_latency_unchanged(r: &Run) {
    within("TTFT P95 ratio", r.p95_ratio(TTFT), 0.8..=1.25);
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
    assert!(r.w().quantile(0.95, QUEUE) < 0.3, "queue P95 {}", r.w().quantile(0.95, QUEUE));
}

fn finished(v: &View) -> f64 {
    v.increase("vllm:request_success_total")
}

// ---- prefill starvation ----

#[test]
fn prefill_starvation_pins_running_at_the_cap_and_grows_the_queue_while_itl_holds() {
    let r = Run::fixture("prefill-starvation");
    let w = r.w();
    for i in 0..r.n() {
        let inst = r.instance(i);
        let rep = w.replica(&inst);
        let (_, max) = rep.gauge_range("vllm:num_requests_running");
        assert_eq!(max, 64.0, "{inst}: at max_num_seqs");
        within("running avg over max", rep.gauge_avg("vllm:num_requests_running") / max, 0.95..=1.0);
        // waiting grows roughly linearly from ~0 to ~60
        let start = rep.between(r.spec.window_start(), r.spec.window_start() + chrono::TimeDelta::minutes(2));
        within("waiting at the start", start.gauge_avg("vllm:num_requests_waiting"), 0.0..=6.0);
        within("waiting at the end", rep.gauge_at_end("vllm:num_requests_waiting")[0], 54.0..=66.0);
        let half = rep.between(r.spec.window_start(), r.spec.window_start() + chrono::TimeDelta::minutes(15));
        within("waiting half-way", half.gauge_at_end("vllm:num_requests_waiting")[0], 24.0..=36.0);
    }
    assert!(w.quantile(0.95, QUEUE) > 5.0, "queue P95 {}", w.quantile(0.95, QUEUE));
    assert!(w.quantile(0.95, TTFT) > 6.0, "TTFT P95 {}", w.quantile(0.95, TTFT));
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
    let (lo, hi) = w.gauge_range("vllm:kv_cache_usage_perc");
    assert!(lo >= 0.8 && hi <= 0.9, "KV {lo}..{hi}");
    assert_eq!(w.increase("vllm:num_preemptions_total"), 0.0);
    within("mean output ratio", r.ratio(|v| v.mean("vllm:request_generation_tokens")), 4.0..=6.0);
    within("mean max_tokens ratio", r.ratio(|v| v.mean("vllm:request_params_max_tokens")), 3.6..=4.4);
    within("mean prompt ratio", r.ratio(|v| v.mean("vllm:request_prompt_tokens")), 0.95..=1.05);
    // decode monopolises the engine: the steps carry the full batch
    assert!(w.mean("vllm:iteration_tokens_total") > 50.0);
    r.assert_neighbour_untouched();
}

#[test]
fn prefill_starvation_near_miss_runs_longer_outputs_below_the_cap_without_a_queue() {
    let r = Run::fixture("prefill-starvation-near");
    let w = r.w();
    within("mean output ratio", r.ratio(|v| v.mean("vllm:request_generation_tokens")), 2.6..=3.4);
    within("running ratio", r.ratio(|v| v.gauge_avg("vllm:num_requests_running")), 1.25..=1.55);
    let (_, max) = w.gauge_range("vllm:num_requests_running");
    assert!(max < 60.0, "running peaks at {max}, below the cap of 64");
    for i in 0..r.n() {
        let inst = r.instance(i);
        let rep = w.replica(&inst);
        let avg_over_max = rep.gauge_avg("vllm:num_requests_running") / rep.gauge_range("vllm:num_requests_running").1;
        assert!(avg_over_max < 0.9, "{inst}: running avg/max {avg_over_max}");
    }
    assert!(w.gauge_range("vllm:num_requests_waiting").1 <= 1.0);
    assert_latency_unchanged(&r);
}

// ---- prefix-cache misses ----

fn hit_ratio(v: &View) -> f64 {
    v.increase("vllm:prefix_cache_hits_total") / v.increase("vllm:prefix_cache_queries_total")
}

#[test]
fn prefix_cache_miss_drops_the_hit_ratio_and_triples_prefill_on_the_same_prompts() {
    let r = Run::fixture("prefix-cache-miss");
    within("baseline hit ratio", hit_ratio(&r.b()), 0.47..=0.53);
    within("window hit ratio", hit_ratio(&r.w()), 0.03..=0.05);
    assert!(r.p95_ratio(TTFT) >= 2.5, "TTFT x{}", r.p95_ratio(TTFT));
    // the prefill histogram starts at 0.3 s, so its P95 ratio reads coarser than TTFT's
    within("prefill mean ratio", r.ratio(|v| v.mean("vllm:request_prefill_time_seconds")), 2.6..=3.4);
    assert!(r.w().quantile(0.95, QUEUE) < 0.3);
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
    within("mean prompt ratio", r.ratio(|v| v.mean("vllm:request_prompt_tokens")), 0.95..=1.05);
    r.assert_neighbour_untouched();
}

#[test]
fn prefix_cache_miss_near_miss_dips_the_hit_ratio_only() {
    let r = Run::fixture("prefix-cache-miss-near");
    within("window hit ratio", hit_ratio(&r.w()), 0.37..=0.43);
    assert_latency_unchanged(&r);
}

// ---- recompute thrashing ----

#[test]
fn recompute_thrashing_preempts_every_request_and_recomputes_a_quarter_of_the_prompts() {
    let r = Run::fixture("recompute-thrashing");
    let w = r.w();
    let (lo, hi) = w.gauge_range("vllm:kv_cache_usage_perc");
    assert!(lo >= 0.97 && hi <= 1.0, "KV {lo}..{hi}");
    within("preemptions per finished request", w.increase("vllm:num_preemptions_total") / finished(&w), 1.35..=1.65);
    for series in w.of("vllm:num_preemptions_total") {
        let inside: Vec<&(f64, f64)> = series.points.iter().filter(|(t, _)| *t >= w.from && *t <= w.to).collect();
        assert!(inside.windows(2).all(|p| p[1].1 > p[0].1), "preempting every interval");
    }
    within("recomputed share of prompt tokens", w.increase("vllm:prompt_tokens_recomputed_total") / w.increase("vllm:prompt_tokens_total"), 0.23..=0.27);
    assert_eq!(r.b().increase("vllm:prompt_tokens_recomputed_total"), 0.0);
    assert!(w.quantile(0.95, QUEUE) > 1.5, "queue P95 {}", w.quantile(0.95, QUEUE));
    assert!(r.p95_ratio(TTFT) >= 3.0, "TTFT x{}", r.p95_ratio(TTFT));
    r.assert_neighbour_untouched();
}

#[test]
fn recompute_thrashing_near_miss_preempts_in_two_short_bursts_only() {
    let r = Run::fixture("recompute-thrashing-near");
    let w = r.w();
    let intervals = ((w.to - w.from) / 30.0).round();
    for i in 0..r.n() {
        let inst = r.instance(i);
        let series = w.replica(&inst).of("vllm:num_preemptions_total").next().expect("a preemption counter");
        let inside: Vec<&(f64, f64)> = series.points.iter().filter(|(t, _)| *t >= w.from && *t <= w.to).collect();
        let active = inside.windows(2).filter(|p| p[1].1 > p[0].1).count() as f64;
        assert!(active / intervals < 0.15, "{inst}: preempting in {active} of {intervals} intervals");
    }
    // ~0.05/s per replica inside the bursts (two of 3 minutes, and the intervals they touch)
    let burst_secs = 0.1 * 1800.0;
    within("preemptions per second in bursts", w.increase("vllm:num_preemptions_total") / f64::from(r.n()) / burst_secs, 0.025..=0.08);
    within("recomputed share of prompt tokens", w.increase("vllm:prompt_tokens_recomputed_total") / w.increase("vllm:prompt_tokens_total"), 0.008..=0.012);
    assert!(w.gauge_range("vllm:kv_cache_usage_perc").1 <= 0.85);
    assert_latency_unchanged(&r);
}

// ---- workload shift ----

#[test]
fn workload_shift_triples_prompts_and_doubles_ttft_without_queueing() {
    let r = Run::fixture("workload-shift");
    within("mean prompt ratio", r.ratio(|v| v.mean("vllm:request_prompt_tokens")), 2.7..=3.3);
    assert!(r.p95_ratio(TTFT) >= 2.0, "TTFT x{}", r.p95_ratio(TTFT));
    assert!(r.w().quantile(0.95, QUEUE) < 0.3);
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
    within("mean output ratio", r.ratio(|v| v.mean("vllm:request_generation_tokens")), 0.93..=1.07);
    assert_eq!(r.w().increase("vllm:num_preemptions_total"), 0.0);
    r.assert_neighbour_untouched();
}

#[test]
fn workload_shift_near_miss_lengthens_prompts_by_a_fifth() {
    let r = Run::fixture("workload-shift-near");
    within("mean prompt ratio", r.ratio(|v| v.mean("vllm:request_prompt_tokens")), 1.12..=1.28);
    assert_latency_unchanged(&r);
}

#[test]
fn workload_lighter_shortens_prompts_to_two_fifths_and_slows_nothing() {
    let r = Run::fixture("workload-lighter");
    within("mean prompt ratio", r.ratio(|v| v.mean("vllm:request_prompt_tokens")), 0.34..=0.46);
    assert!(r.p95_ratio(TTFT) < 1.0, "TTFT x{}", r.p95_ratio(TTFT));
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
}

#[test]
fn workload_lighter_near_miss_shortens_prompts_by_under_a_third() {
    let r = Run::fixture("workload-lighter-near");
    within("mean prompt ratio", r.ratio(|v| v.mean("vllm:request_prompt_tokens")), 0.69..=0.76);
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
}

// ---- GPU underutilised ----

fn dcgm_values(r: &Run, name: &str, from: f64, to: f64) -> Vec<f64> {
    let pods: Vec<String> = r.spec.replicas().into_iter().filter(|x| x.model == r.sick).map(|x| x.pod).collect();
    r.series
        .iter()
        .filter(|s| s.name == name && s.labels.get("pod").is_some_and(|p| pods.contains(p)))
        .flat_map(|s| s.points.iter().filter(|(t, _)| *t > from && *t <= to).map(|(_, v)| *v).collect::<Vec<_>>())
        .collect()
}

fn avg(v: &[f64]) -> f64 {
    assert!(!v.is_empty());
    v.iter().sum::<f64>() / v.len() as f64
}

#[test]
fn gpu_underutilized_runs_tiny_batches_on_an_idle_gpu_with_healthy_latency() {
    let r = Run::fixture("gpu-underutilized");
    let w = r.w();
    within("requests ratio", r.ratio(finished), 0.08..=0.12);
    within("running per replica", w.gauge_avg("vllm:num_requests_running"), 0.8..=2.5);
    let iteration = w.mean("vllm:iteration_tokens_total");
    assert!(iteration < 16.0, "mean tokens per step {iteration}");
    assert!(r.b().mean("vllm:iteration_tokens_total") > 30.0);
    assert_eq!(w.gauge_range("vllm:num_requests_waiting").1, 0.0);
    assert!(w.quantile(0.95, TTFT) < 0.5 && w.quantile(0.95, QUEUE) < 0.3);
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
    within("GPU utilisation", avg(&dcgm_values(&r, "DCGM_FI_DEV_GPU_UTIL", w.from, w.to)), 12.0..=18.0);
    within("GPU utilisation before", avg(&dcgm_values(&r, "DCGM_FI_DEV_GPU_UTIL", r.b().from, r.b().to)), 80.0..=90.0);
}

#[test]
fn gpu_underutilized_near_miss_halves_the_traffic_only() {
    let r = Run::fixture("gpu-underutilized-near");
    let w = r.w();
    within("requests ratio", r.ratio(finished), 0.45..=0.55);
    assert!(w.mean("vllm:iteration_tokens_total") > 16.0);
    assert!(avg(&dcgm_values(&r, "DCGM_FI_DEV_GPU_UTIL", w.from, w.to)) > 50.0);
    assert_latency_unchanged(&r);
}

// ---- throughput stall ----

#[test]
fn throughput_stall_freezes_every_counter_and_histogram_for_ten_minutes_with_requests_running() {
    let r = Run::fixture("throughput-stall");
    let tail = r.tail(10);
    for counter in ["vllm:generation_tokens_total", "vllm:prompt_tokens_total", "vllm:request_success_total"] {
        assert_eq!(tail.increase(counter), 0.0, "{counter}");
    }
    for family in [TTFT, ITL, QUEUE, "vllm:e2e_request_latency_seconds", "vllm:iteration_tokens_total"] {
        assert_eq!(tail.increase(&format!("{family}_count")), 0.0, "{family}");
    }
    let (lo, hi) = tail.gauge_range("vllm:num_requests_running");
    assert!(lo >= 9.0 && hi <= 11.0, "running {lo}..{hi}");
    let start = tail.between(tail_start(&r, 10) - chrono::TimeDelta::seconds(30), tail_start(&r, 10));
    for (before, after) in start.gauge_at_end("vllm:num_requests_waiting").iter().zip(tail.gauge_at_end("vllm:num_requests_waiting")) {
        assert!(after > before + 100.0, "waiting grows: {before} -> {after}");
    }
    // the first 20 minutes were healthy
    let early = r.w().between(r.spec.window_start(), tail_start(&r, 10));
    within("early requests ratio", early.rate_per_replica("vllm:request_success_total") / r.b().rate_per_replica("vllm:request_success_total"), 0.9..=1.1);
}

fn tail_start(r: &Run, minutes: i64) -> DateTime<Utc> {
    r.spec.window_end() - chrono::TimeDelta::minutes(minutes)
}

/// Of the window's last 30 one-minute steps (the rule's subquery reads 31, the window's start too), those at which the singled replica's token rate over
/// 2 minutes (the samples 90 s apart it spans) is under one a second while it holds requests: what
/// stalled-engine's stall share counts.
fn stalled_steps(r: &Run) -> usize {
    let inst = r.instance(r.singled());
    let one = |name: &str| {
        let s = r.series.iter().find(|s| s.name == name && s.labels.get("instance") == Some(&inst));
        &s.unwrap_or_else(|| panic!("no {name} for {inst}")).points
    };
    let (tokens, running, waiting) = (one("vllm:generation_tokens_total"), one("vllm:num_requests_running"), one("vllm:num_requests_waiting"));
    let end = secs(r.spec.window_end());
    (0..30)
        .map(|k| end - 60.0 * f64::from(k))
        .filter(|t| (at(tokens, *t) - at(tokens, t - 90.0)) / 90.0 < 1.0 && at(running, *t) + at(waiting, *t) >= 1.0)
        .count()
}

#[test]
fn stalled_engine_freezes_one_replica_for_ten_minutes_mid_window() {
    let r = Run::fixture("stalled-engine");
    within("stalled steps of 30", stalled_steps(&r) as f64, 7.0..=10.0);
    // over before throughput-stall's last five minutes
    assert!(r.tail(6).increase("vllm:generation_tokens_total") > 0.0);
}

#[test]
fn stalled_engine_near_miss_freezes_it_for_six_minutes() {
    let r = Run::fixture("stalled-engine-near");
    within("stalled steps of 30", stalled_steps(&r) as f64, 3.0..=5.0);
}

/// The model's requests waiting by reason, summed over its replicas and averaged over the window.
fn waiting_by_reason(r: &Run, reason: &str) -> f64 {
    let w = r.w();
    let series: Vec<&GeneratedSeries> = r
        .series
        .iter()
        .filter(|s| s.name == "vllm:num_requests_waiting_by_reason" && s.labels["model_name"] == r.sick && s.labels["reason"] == reason)
        .collect();
    assert_eq!(series.len() as u32, r.n(), "one {reason} series per replica");
    series.iter().map(|s| avg(&s.points.iter().filter(|(t, _)| *t > w.from && *t <= w.to).map(|(_, v)| *v).collect::<Vec<_>>())).sum()
}

#[test]
fn deferred_waiting_holds_seven_deferred_requests_across_the_model_and_none_for_capacity() {
    let r = Run::fixture("deferred-waiting");
    within("deferred", waiting_by_reason(&r, "deferred"), 6.0..=9.0);
    assert!(waiting_by_reason(&r, "capacity") < 2.0);
    // the total gauge counts both
    within("waiting", r.w().gauge_avg("vllm:num_requests_waiting") * f64::from(r.n()), 6.0..=11.0);
    assert_latency_unchanged(&r);
    // the healthy neighbour does not split its queue
    assert!(!r.series.iter().any(|s| s.name == "vllm:num_requests_waiting_by_reason" && s.labels["model_name"] == r.healthy));
}

#[test]
fn deferred_waiting_near_miss_holds_three() {
    let r = Run::fixture("deferred-waiting-near");
    within("deferred", waiting_by_reason(&r, "deferred"), 2.5..=3.6);
    assert_latency_unchanged(&r);
}

/// Per rank of the singled replica, its average waiting requests over the window.
fn rank_waiting(r: &Run) -> Vec<f64> {
    let (w, inst) = (r.w(), r.instance(r.singled()));
    let mut ranks: Vec<(String, f64)> = r
        .series
        .iter()
        .filter(|s| s.name == "vllm:num_requests_waiting" && s.labels.get("instance") == Some(&inst))
        .map(|s| (s.labels["engine"].clone(), avg(&s.points.iter().filter(|(t, _)| *t > w.from && *t <= w.to).map(|(_, v)| *v).collect::<Vec<_>>())))
        .collect();
    ranks.sort_by(|a, b| a.0.cmp(&b.0));
    ranks.into_iter().map(|(_, v)| v).collect()
}

#[test]
fn rank_imbalance_queues_one_rank_of_one_server() {
    let r = Run::fixture("rank-imbalance");
    let ranks = rank_waiting(&r);
    assert_eq!(ranks.len(), 2);
    within("the second rank's waiting above the first's", ranks[1] - ranks[0], 6.0..=9.0);
    // every per-rank gauge of every server, and the counters on engine 0 only
    for name in ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"] {
        assert_eq!(r.series.iter().filter(|s| s.name == name && s.labels["model_name"] == r.sick).count() as u32, 2 * r.n(), "{name}");
    }
    assert!(r.series.iter().filter(|s| s.name == "vllm:generation_tokens_total" && s.labels["model_name"] == r.sick).all(|s| s.labels["engine"] == "0"));
    assert_latency_unchanged(&r);
}

#[test]
fn rank_imbalance_near_miss_queues_it_by_three() {
    let r = Run::fixture("rank-imbalance-near");
    let ranks = rank_waiting(&r);
    within("the second rank's waiting above the first's", ranks[1] - ranks[0], 2.5..=3.6);
    assert_latency_unchanged(&r);
}

#[test]
fn throughput_stall_near_miss_goes_idle_instead() {
    let r = Run::fixture("throughput-stall-near");
    let tail = r.tail(10);
    assert_eq!(tail.increase("vllm:generation_tokens_total"), 0.0);
    assert_eq!(tail.gauge_range("vllm:num_requests_running"), (0.0, 0.0));
    assert_eq!(tail.gauge_range("vllm:num_requests_waiting"), (0.0, 0.0));
}

// ---- rejections ----

#[test]
fn requests_rejected_grows_admission_rejections_two_per_second_per_replica() {
    let r = Run::fixture("requests-rejected");
    let w = r.w();
    within("rejections per second per replica", w.rate_per_replica("vllm:admission_rejections_total"), 1.7..=2.3);
    assert_eq!(r.b().increase("vllm:admission_rejections_total"), 0.0);
    // arrivals doubled; what was admitted is what the servers finish
    let offered = (w.increase("vllm:admission_rejections_total") + finished(&w)) / finished(&r.b());
    within("offered load ratio", offered, 1.8..=2.2);
    assert!(w.quantile(0.95, QUEUE) > 1.0, "queue P95 {}", w.quantile(0.95, QUEUE));
    assert_eq!(w.gauge_range("vllm:num_requests_running").1, 16.0);
    r.assert_neighbour_untouched();
}

#[test]
fn requests_rejected_near_miss_rejects_three_requests_in_one_burst() {
    let r = Run::fixture("requests-rejected-near");
    let w = r.w();
    assert_eq!(w.increase("vllm:admission_rejections_total"), 3.0);
    let inst = r.instance(r.singled());
    let series = w.replica(&inst).of("vllm:admission_rejections_total").next().expect("the counter");
    let steps: Vec<f64> = series.points.windows(2).map(|p| p[1].1 - p[0].1).filter(|d| *d > 0.0).collect();
    assert_eq!(steps, vec![3.0], "one burst on {inst}");
    assert_latency_unchanged(&r);
}

// ---- request errors ----

fn reason_share(v: &View, reason: &str) -> f64 {
    v.increase_where("vllm:request_success_total", &[("finished_reason", reason)]) / finished(v)
}

#[test]
fn request_errors_raise_aborts_to_15_percent_and_errors_to_3_percent() {
    let r = Run::fixture("request-errors");
    within("baseline abort share", reason_share(&r.b(), "abort"), 0.006..=0.014);
    assert_eq!(reason_share(&r.b(), "error"), 0.0);
    within("abort share", reason_share(&r.w(), "abort"), 0.13..=0.17);
    within("error share", reason_share(&r.w(), "error"), 0.022..=0.038);
    within("TTFT P95 ratio", r.p95_ratio(TTFT), 0.8..=1.25);
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
    r.assert_neighbour_untouched();
}

#[test]
fn request_errors_near_miss_doubles_aborts_only() {
    let r = Run::fixture("request-errors-near");
    within("abort share", reason_share(&r.w(), "abort"), 0.015..=0.025);
    assert_eq!(reason_share(&r.w(), "error"), 0.0);
    assert_latency_unchanged(&r);
}

// ---- engine asleep ----

fn sleep_state_at_end(v: &View, state: &str) -> Vec<f64> {
    v.of("vllm:engine_sleep_state").filter(|s| s.labels["sleep_state"] == state).map(|s| at(&s.points, v.to)).collect()
}

#[test]
fn engine_asleep_offloads_weights_on_every_replica_while_requests_pile_up() {
    let r = Run::fixture("engine-asleep");
    let tail = r.tail(15);
    assert_eq!(sleep_state_at_end(&tail, "awake"), vec![0.0; r.n() as usize]);
    assert_eq!(sleep_state_at_end(&tail, "weights_offloaded"), vec![1.0; r.n() as usize]);
    assert_eq!(sleep_state_at_end(&tail, "discard_all"), vec![0.0; r.n() as usize]);
    let before = r.b();
    assert_eq!(sleep_state_at_end(&before, "awake"), vec![1.0; r.n() as usize]);
    assert!(tail.gauge_at_end("vllm:num_requests_waiting").iter().all(|w| *w > 20.0), "waiting {:?}", tail.gauge_at_end("vllm:num_requests_waiting"));
    assert_eq!(tail.gauge_range("vllm:num_requests_running"), (0.0, 0.0));
    assert_eq!(finished(&tail), 0.0);
    // asleep for the whole 15 minutes, not just at the end
    let asleep: Vec<f64> = tail
        .of("vllm:engine_sleep_state")
        .filter(|s| s.labels["sleep_state"] == "awake")
        .flat_map(|s| s.points.iter().filter(|(t, _)| *t > tail.from && *t <= tail.to).map(|p| p.1).collect::<Vec<_>>())
        .collect();
    assert!(asleep.len() == 30 * r.n() as usize && asleep.iter().all(|v| *v == 0.0));
}

#[test]
fn engine_asleep_near_miss_sleeps_with_nothing_waiting() {
    let r = Run::fixture("engine-asleep-near");
    let tail = r.tail(15);
    assert_eq!(sleep_state_at_end(&tail, "weights_offloaded"), vec![1.0; r.n() as usize]);
    assert_eq!(tail.gauge_range("vllm:num_requests_waiting"), (0.0, 0.0));
}

// ---- speculative decoding ----

fn acceptance(v: &View) -> f64 {
    v.increase("vllm:spec_decode_num_accepted_tokens_total") / v.increase("vllm:spec_decode_num_draft_tokens_total")
}

#[test]
fn spec_decode_inefficient_drops_acceptance_from_0_6_to_0_15() {
    let r = Run::fixture("spec-decode-inefficient");
    within("baseline acceptance", acceptance(&r.b()), 0.58..=0.62);
    within("window acceptance", acceptance(&r.w()), 0.13..=0.17);
    let per_draft = r.b().increase("vllm:spec_decode_num_draft_tokens_total") / r.b().increase("vllm:spec_decode_num_drafts_total");
    within("draft tokens per draft", per_draft, 3.9..=4.1);
    // the healthy neighbour has no speculative decoding at all
    assert!(!r.series.iter().any(|s| s.name.starts_with("vllm:spec_decode") && s.labels["model_name"] == r.healthy));
}

#[test]
fn spec_decode_inefficient_near_miss_drops_acceptance_to_0_45() {
    let r = Run::fixture("spec-decode-inefficient-near");
    within("window acceptance", acceptance(&r.w()), 0.43..=0.47);
}

// ---- KV transfers ----

const NIXL: &str = "vllm:nixl_xfer_time_seconds";

#[test]
fn kv_transfer_failures_fail_half_a_transfer_per_second_and_slow_the_rest_fivefold() {
    let r = Run::fixture("kv-transfer-failures");
    let (w, b) = (r.w(), r.b());
    assert_eq!(b.increase("vllm:nixl_num_failed_transfers_total"), 0.0);
    within("failures per second per replica", w.rate_per_replica("vllm:nixl_num_failed_transfers_total"), 0.4..=0.6);
    within("healthy transfer P95", b.quantile(0.95, NIXL), 0.015..=0.025);
    within("transfer P95 ratio", r.p95_ratio(NIXL), 4.0..=6.0);
    within("transfers per request", b.increase(&format!("{NIXL}_count")) / finished(&b), 0.95..=1.05);
}

#[test]
fn kv_transfer_failures_near_miss_slows_transfers_a_little_and_fails_none() {
    let r = Run::fixture("kv-transfer-failures-near");
    assert_eq!(r.w().increase("vllm:nixl_num_failed_transfers_total"), 0.0);
    within("transfer P95 ratio", r.p95_ratio(NIXL), 1.08..=1.35);
}

#[test]
fn kv_transfer_slow_waits_thirty_times_longer_for_the_kv_in_the_queue_and_the_first_token() {
    let r = Run::fixture("kv-transfer-slow");
    let (w, b) = (r.w(), r.b());
    let (xw, xb) = (w.mean(NIXL), b.mean(NIXL));
    within("transfer mean ratio", xw / xb, 25.0..=35.0);
    // vLLM schedules a disaggregated request once its KV came: the wait is queue time and TTFT,
    // not input processing (TTFT less queue less prefill stays where it was).
    within("queue mean rise, s", w.mean(QUEUE) - b.mean(QUEUE), (xw - xb) * 0.9..=(xw - xb) * 1.1);
    within("TTFT mean rise, s", w.mean(TTFT) - b.mean(TTFT), (xw - xb) * 0.9..=(xw - xb) * 1.1);
    let prefill = "vllm:request_prefill_time_seconds";
    let rest = |v: &View| v.mean(TTFT) - v.mean(QUEUE) - v.mean(prefill);
    within("input processing, s", rest(&w) - rest(&b), -0.02..=0.02);
    assert_eq!(w.increase("vllm:nixl_num_failed_transfers_total"), 0.0);
    let near = Run::fixture("kv-transfer-slow-near");
    within("near miss transfer ratio", near.w().mean(NIXL) / near.b().mean(NIXL), 1.8..=2.2);
}

#[test]
fn every_transfer_moves_its_prompts_kv_and_the_impossible_rate_is_the_times_unit_slip() {
    const BYTES: &str = "vllm:nixl_bytes_transferred";
    let rate = |v: &View| v.increase(&format!("{BYTES}_sum")) / v.increase(&format!("{NIXL}_sum"));
    let healthy = Run::fixture("kv-transfer-rate-impossible");
    // One transfer per request, 128 KiB of KV per prompt token (a 600-token median prompt).
    assert_eq!(healthy.b().increase(&format!("{BYTES}_count")), healthy.b().increase(&format!("{NIXL}_count")));
    within("bytes per transfer", healthy.b().mean(BYTES), 7e7..=1.1e8);
    within("baseline rate, B/s", rate(&healthy.b()), 5e9..=2e10);
    within("window rate, B/s", rate(&healthy.w()), 5e12..=2e13);
    // The engines serve as before: the slip is the histogram's only.
    within("queue mean ratio", healthy.w().mean(QUEUE) / healthy.b().mean(QUEUE), 0.8..=1.25);
    let near = Run::fixture("kv-transfer-rate-impossible-near");
    within("near miss rate, B/s", rate(&near.w()), 5e10..=2e11);
}

// ---- KV-cache leak ----

#[test]
fn kv_cache_leak_climbs_linearly_while_the_load_stays_flat() {
    let r = Run::fixture("kv-cache-leak");
    let w = r.w();
    let first = w.between(r.spec.window_start(), r.spec.window_start() + chrono::TimeDelta::minutes(1));
    within("KV at the start", first.gauge_avg("vllm:kv_cache_usage_perc"), 0.42..=0.48);
    for end in w.gauge_at_end("vllm:kv_cache_usage_perc") {
        within("KV at the end", end, 0.86..=0.92);
    }
    let mid = w.between(r.spec.window_start(), r.spec.window_start() + chrono::TimeDelta::minutes(15));
    for v in mid.gauge_at_end("vllm:kv_cache_usage_perc") {
        within("KV half-way", v, 0.63..=0.72);
    }
    let (lo, hi) = r.b().gauge_range("vllm:kv_cache_usage_perc");
    assert!(lo >= 0.3 && hi <= 0.6, "a flat baseline: {lo}..{hi}");
    within("requests ratio", r.ratio(finished), 0.95..=1.05);
    within("running ratio", r.ratio(|v| v.gauge_avg("vllm:num_requests_running")), 0.93..=1.07);
    assert_eq!(w.increase("vllm:num_preemptions_total"), 0.0);
    assert_latency_unchanged(&r);
}

#[test]
fn kv_cache_leak_near_miss_grows_kv_with_the_traffic() {
    let r = Run::fixture("kv-cache-leak-near");
    let w = r.w();
    within("requests ratio (1x -> 1.6x)", r.ratio(finished), 1.2..=1.4);
    let last = w.between(r.spec.window_end() - chrono::TimeDelta::minutes(5), r.spec.window_end());
    let growth = last.gauge_avg("vllm:kv_cache_usage_perc") / r.b().gauge_avg("vllm:kv_cache_usage_perc");
    let running = last.gauge_avg("vllm:num_requests_running") / r.b().gauge_avg("vllm:num_requests_running");
    within("KV growth at the end", growth, 1.4..=1.75);
    within("KV growth over running growth", growth / running, 0.85..=1.15);
    assert_latency_unchanged(&r);
}

// ---- replicas ----

fn per_replica_finished(r: &Run) -> Vec<f64> {
    (0..r.n()).map(|i| finished(&r.w().replica(&r.instance(i)))).collect()
}

/// The singled-out replica's value and its peers'.
fn split(r: &Run, values: &[f64]) -> (f64, Vec<f64>) {
    let k = r.singled() as usize;
    let peers = values.iter().enumerate().filter(|(i, _)| *i != k).map(|(_, v)| *v).collect();
    (values[k], peers)
}

#[test]
fn replica_imbalance_sends_three_times_the_traffic_to_one_replica() {
    let r = Run::fixture("replica-imbalance");
    let (hot, peers) = split(&r, &per_replica_finished(&r));
    for peer in peers {
        within("hot over peer", hot / peer, 2.6..=3.4);
    }
    within("model total ratio", r.ratio(finished), 0.95..=1.05);
    for i in 0..r.n() {
        let inst = r.instance(i);
        assert!(r.w().replica(&inst).quantile(0.95, TTFT) < 0.5, "{inst}");
        assert!(r.w().replica(&inst).quantile(0.95, QUEUE) < 0.3, "{inst}");
    }
    assert_latency_unchanged(&r);
}

#[test]
fn replica_imbalance_near_miss_tilts_the_traffic_by_a_fifth() {
    let r = Run::fixture("replica-imbalance-near");
    let (hot, peers) = split(&r, &per_replica_finished(&r));
    within("hot over peers", hot / avg(&peers), 1.1..=1.3);
}

#[test]
fn replica_outlier_slows_and_fills_one_replica_while_its_peers_stay_healthy() {
    let r = Run::fixture("replica-outlier");
    let w = r.w();
    let bad = r.instance(r.singled());
    let p95s = |family: &str| -> Vec<f64> { (0..r.n()).map(|i| w.replica(&r.instance(i)).quantile(0.95, family)).collect() };
    let (itl, peers) = split(&r, &p95s(ITL));
    within("outlier ITL over its peers'", itl / avg(&peers), 2.6..=3.4);
    let (ttft, peers) = split(&r, &p95s(TTFT));
    within("outlier TTFT over its peers'", ttft / avg(&peers), 1.7..=2.5);
    let (lo, hi) = w.replica(&bad).gauge_range("vllm:kv_cache_usage_perc");
    assert!(lo >= 0.93 && hi <= 0.97, "outlier KV {lo}..{hi}");
    for i in (0..r.n()).filter(|i| *i != r.singled()) {
        let inst = r.instance(i);
        let (_, hi) = w.replica(&inst).gauge_range("vllm:kv_cache_usage_perc");
        assert!(hi <= 0.6, "{inst} KV {hi}");
        let ratio = w.replica(&inst).quantile(0.95, ITL) / r.b().replica(&inst).quantile(0.95, ITL);
        within("peer ITL ratio", ratio, 0.9..=1.1);
    }
    let (one, peers) = split(&r, &per_replica_finished(&r));
    within("arrivals even", one / avg(&peers), 0.9..=1.1);
}

#[test]
fn replica_outlier_near_miss_is_a_fifth_slower() {
    let r = Run::fixture("replica-outlier-near");
    let w = r.w();
    let p95s: Vec<f64> = (0..r.n()).map(|i| w.replica(&r.instance(i)).quantile(0.95, ITL)).collect();
    let (itl, peers) = split(&r, &p95s);
    within("outlier ITL over its peers'", itl / avg(&peers), 1.08..=1.35);
    assert!(w.replica(&r.instance(r.singled())).gauge_range("vllm:kv_cache_usage_perc").1 <= 0.6);
}

#[test]
fn target_down_sets_up_to_zero_and_ends_the_replicas_series_twelve_minutes_before_the_end() {
    let r = Run::fixture("target-down");
    let down = r.instance(r.singled());
    let onset = secs(r.spec.window_end()) - 720.0;
    let end = secs(r.spec.window_end());
    for s in r.series.iter().filter(|s| s.labels.get("instance") == Some(&down)) {
        if s.name == "up" {
            assert_eq!(s.points.len(), r.spec.sample_count(), "up keeps being written");
            assert!(s.points.iter().all(|(t, v)| if *t > onset { *v == 0.0 } else { *v == 1.0 }), "up {:?}", s.points);
        } else {
            let last = s.points.last().expect("samples before the outage").0;
            assert!((last - onset).abs() < 1e-6, "{} ends at {last}, not at {onset}", s.name);
        }
    }
    for i in (0..r.n()).filter(|i| *i != r.singled()) {
        let inst = r.instance(i);
        let ups: Vec<f64> = r.series.iter().filter(|s| s.name == "up" && s.labels["instance"] == inst).flat_map(|s| s.points.iter().map(|p| p.1)).collect();
        assert!(ups.iter().all(|v| *v == 1.0), "{inst}");
        let running = r.series.iter().find(|s| s.name == "vllm:num_requests_running" && s.labels["instance"] == inst).expect("running");
        assert_eq!(running.points.last().map(|p| p.0), Some(end), "{inst} keeps reporting");
    }
}

#[test]
fn target_down_near_miss_keeps_every_target_up() {
    let r = Run::fixture("target-down-near");
    assert!(r.series.iter().filter(|s| s.name == "up").all(|s| s.points.iter().all(|p| p.1 == 1.0)));
    assert!(r.series.iter().all(|s| s.points.len() == r.spec.sample_count()));
}

// ---- GPUs ----

#[test]
fn dcgm_series_describe_one_gpu_per_replica_with_kubernetes_labels_and_no_model_name() {
    let r = Run::fixture("gpu-throttling-near");
    let replicas: Vec<ReplicaInfo> = r.spec.replicas().into_iter().filter(|x| x.model == r.sick).collect();
    for name in [
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
    ] {
        let series: Vec<&GeneratedSeries> = r.series.iter().filter(|s| s.name == name).collect();
        assert_eq!(series.len(), r.n() as usize, "{name}: one GPU per replica of the model with dcgm");
        for (s, rep) in series.iter().zip(&replicas) {
            let l = &s.labels;
            assert_eq!(l.get("model_name"), None, "{name}");
            assert_eq!(l["job"], "dcgm");
            assert_eq!(l["instance"], format!("{}:9400", rep.node));
            assert_eq!((l["gpu"].as_str(), l["container"].as_str(), l["namespace"].as_str()), ("0", "vllm", "inference"));
            assert_eq!(l["modelName"], "NVIDIA H100 80GB HBM3");
            assert_eq!((&l["pod"], &l["Hostname"], &l["UUID"]), (&rep.pod, &rep.node, &rep.gpu_uuid));
        }
    }
    let b = r.b();
    let util = avg(&dcgm_values(&r, "DCGM_FI_DEV_GPU_UTIL", b.from, b.to));
    within("healthy GPU utilisation", util, 80.0..=90.0);
    assert!(dcgm_values(&r, "DCGM_FI_DEV_SM_CLOCK", b.from, b.to).iter().all(|c| *c == 1980.0));
    within("healthy temperature", avg(&dcgm_values(&r, "DCGM_FI_DEV_GPU_TEMP", b.from, b.to)), 58.0..=66.0);
    within("healthy power", avg(&dcgm_values(&r, "DCGM_FI_DEV_POWER_USAGE", b.from, b.to)), 520.0..=580.0);
    let used = dcgm_values(&r, "DCGM_FI_DEV_FB_USED", b.from, b.to);
    let free = dcgm_values(&r, "DCGM_FI_DEV_FB_FREE", b.from, b.to);
    for (u, f) in used.iter().zip(&free) {
        assert!((u + f - 81_029.0).abs() < 1e-6 && *u > 73_000.0, "FB used {u} free {f}");
    }
    // the neighbour has no dcgm = true, so no GPU series
    let neighbour: Vec<String> = r.spec.replicas().into_iter().filter(|x| x.model == r.healthy).map(|x| x.pod).collect();
    assert!(!r.series.iter().any(|s| s.name.starts_with("DCGM") && s.labels.get("pod").is_some_and(|p| neighbour.contains(p))));
}

#[test]
fn gpu_throttling_drops_every_sm_clock_to_1200_with_the_thermal_bit_and_slows_decode() {
    let r = Run::fixture("gpu-throttling");
    let (w, b) = (r.w(), r.b());
    within("SM clock", avg(&dcgm_values(&r, "DCGM_FI_DEV_SM_CLOCK", w.from, w.to)), 1170.0..=1230.0);
    assert!(dcgm_values(&r, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", w.from, w.to).iter().all(|v| *v == 64.0));
    assert!(dcgm_values(&r, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", b.from, b.to).iter().all(|v| *v == 0.0));
    within("temperature", avg(&dcgm_values(&r, "DCGM_FI_DEV_GPU_TEMP", w.from, w.to)), 86.0..=90.0);
    within("ITL P95 ratio", r.p95_ratio(ITL), 1.6..=2.0);
    assert!(w.quantile(0.95, QUEUE) < 0.3);
    r.assert_neighbour_untouched();
}

#[test]
fn slow_decode_near_miss_slows_decode_by_under_a_third() {
    let r = Run::fixture("slow-decode-near");
    within("ITL P95 ratio", r.p95_ratio(ITL), 1.2..=1.4);
    assert!(r.w().quantile(0.95, ITL) < 0.08, "ITL P95 {}", r.w().quantile(0.95, ITL));
    within("TTFT P95 ratio", r.p95_ratio(TTFT), 0.8..=1.25);
    assert!(r.w().quantile(0.95, QUEUE) < 0.3, "queue P95 {}", r.w().quantile(0.95, QUEUE));
}

#[test]
fn slow_prefill_near_miss_slows_prefill_by_under_half() {
    let r = Run::fixture("slow-prefill-near");
    const PREFILL: &str = "vllm:request_prefill_time_seconds";
    within("prefill mean ratio", r.ratio(|v| v.mean(PREFILL)), 1.3..=1.47);
    within("TTFT P95 ratio", r.p95_ratio(TTFT), 1.2..=1.7);
    within("ITL P95 ratio", r.p95_ratio(ITL), 0.9..=1.1);
    assert!(r.w().quantile(0.95, QUEUE) < 0.3, "queue P95 {}", r.w().quantile(0.95, QUEUE));
}

#[test]
fn severe_saturation_near_miss_queues_with_decode_a_third_slower() {
    let r = Run::fixture("severe-saturation-near");
    within("ITL P95 ratio", r.p95_ratio(ITL), 1.2..=1.45);
    assert!(r.w().quantile(0.95, ITL) < 0.1, "ITL P95 {}", r.w().quantile(0.95, ITL));
    assert!(r.p95_ratio(TTFT) >= 2.0, "TTFT P95 x{}", r.p95_ratio(TTFT));
    assert!(r.w().quantile(0.95, QUEUE) > 1.0, "queue P95 {}", r.w().quantile(0.95, QUEUE));
}

#[test]
fn http_errors_near_miss_answers_under_one_percent_with_5xx() {
    let r = Run::fixture("http-errors-near");
    let share = http_5xx_share(&r.series, &r.spec, &r.sick);
    within("5xx share", share, 0.006..=0.0095);
    assert!(http_5xx_share(&r.series, &r.spec, &r.healthy) < 0.003);
    assert_latency_unchanged(&r);
}

/// Per GPU of the incident model, the share of the window's scrapes with the power cap (0x4) set.
fn power_cap_shares(r: &Run) -> Vec<f64> {
    let w = r.w();
    let pods: Vec<String> = r.spec.replicas().into_iter().filter(|x| x.model == r.sick).map(|x| x.pod).collect();
    pods.iter()
        .map(|pod| {
            let s = r.series.iter().find(|s| s.name == "DCGM_FI_DEV_CLOCKS_EVENT_REASONS" && s.labels.get("pod") == Some(pod));
            let v: Vec<f64> = s.expect("a GPU per pod").points.iter().filter(|(t, _)| *t > w.from && *t <= w.to).map(|(_, v)| *v).collect();
            v.iter().filter(|x| (**x as u32) & 0x4 != 0).count() as f64 / v.len() as f64
        })
        .collect()
}

#[test]
fn gpu_prefill_bursts_near_miss_caps_every_gpu_under_a_tenth_of_the_window() {
    let r = Run::fixture("gpu-prefill-bursts-near");
    let shares = power_cap_shares(&r);
    let most = shares.iter().copied().fold(0.0, f64::max);
    within("the most capped GPU's share", most, 0.03..=0.095);
}

#[test]
fn gpu_throttling_near_miss_dips_the_clock_without_a_reason() {
    let r = Run::fixture("gpu-throttling-near");
    let w = r.w();
    within("SM clock", avg(&dcgm_values(&r, "DCGM_FI_DEV_SM_CLOCK", w.from, w.to)), 1880.0..=1920.0);
    assert!(dcgm_values(&r, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", w.from, w.to).iter().all(|v| *v == 0.0));
    assert_latency_unchanged(&r);
}

#[test]
fn gpu_errors_report_xid_79_on_one_replica_whose_throughput_falls_to_zero() {
    let r = Run::fixture("gpu-errors");
    let bad = r.spec.replicas().into_iter().find(|x| x.model == r.sick && x.index == r.singled()).expect("the replica");
    let onset = secs(r.spec.window_end()) - 600.0;
    for s in r.series.iter().filter(|s| s.name == "DCGM_FI_DEV_XID_ERRORS") {
        let on_bad = s.labels["pod"] == bad.pod;
        for (t, v) in &s.points {
            let expected = if on_bad && *t > onset { 79.0 } else { 0.0 };
            assert_eq!(*v, expected, "{} at {t}", s.labels["pod"]);
        }
    }
    let tail = r.tail(10);
    assert_eq!(finished(&tail.replica(&bad.instance)), 0.0);
    assert_eq!(tail.replica(&bad.instance).increase("vllm:generation_tokens_total"), 0.0);
    for i in (0..r.n()).filter(|i| *i != r.singled()) {
        assert!(finished(&tail.replica(&r.instance(i))) > 0.0);
    }
}

#[test]
fn gpu_errors_near_miss_keeps_xid_at_zero() {
    let r = Run::fixture("gpu-errors-near");
    assert!(r.series.iter().filter(|s| s.name == "DCGM_FI_DEV_XID_ERRORS").all(|s| s.points.iter().all(|p| p.1 == 0.0)));
}

// ---- SLO burn ----

#[test]
fn slo_burn_misses_the_500_ms_target_for_30_percent_of_requests_since_an_hour_before_the_end() {
    let r = Run::fixture("slo-burn");
    let (w, b) = (r.w(), r.b());
    within("share over 500 ms in the window", w.share_over(TTFT, 0.5), 0.26..=0.34);
    within("share over 500 ms in the baseline", b.share_over(TTFT, 0.5), 0.26..=0.34);
    let warmup = w.between(r.spec.start, r.spec.baseline_start());
    assert!(warmup.share_over(TTFT, 0.5) < 0.01, "before the onset {}", warmup.share_over(TTFT, 0.5));
    assert!(w.quantile(0.95, QUEUE) < 0.3);
    within("ITL P95 window over warm-up", w.quantile(0.95, ITL) / warmup.quantile(0.95, ITL), 0.9..=1.1);
    // a comparison with the baseline sees nothing
    within("TTFT P95 ratio", r.p95_ratio(TTFT), 0.85..=1.18);
}

#[test]
fn slo_burn_near_miss_misses_it_for_half_a_percent() {
    let r = Run::fixture("slo-burn-near");
    within("share over 500 ms", r.w().share_over(TTFT, 0.5), 0.003..=0.009);
}

// ---- fleet-wide shapes ----

#[test]
fn max_num_seqs_caps_running_requests_whatever_the_load() {
    let r = Run::new(fleet("load-exceeds-capacity", "max_num_seqs = 20", ""));
    assert_eq!(r.w().gauge_range("vllm:num_requests_running").1, 20.0);
}

#[test]
fn weights_share_the_models_arrivals_between_its_replicas() {
    let r = Run::new(fleet("healthy", "weights = [2, 1, 1]", ""));
    let f = per_replica_finished(&r);
    within("weighted over even", f[0] / f[1], 1.7..=2.3);
    within("total", (f[0] + f[1] + f[2]) / (2.0 * 3.0 * 1800.0), 0.95..=1.05);
}

#[test]
fn kv_cache_pressure_under_otel_names_is_the_same_story() {
    let r = Run::new(fleet_with("kv-cache-pressure", "", "", "v1-otel"));
    let w = r.w();
    assert_eq!(w.of("vllm:kv_cache_usage_perc").count(), 0);
    let kv: Vec<f64> = r
        .series
        .iter()
        .filter(|s| s.name == "vllm_kv_cache_usage_perc" && s.labels["model_name"] == SICK)
        .flat_map(|s| s.points.iter().filter(|(t, _)| *t > w.from).map(|p| p.1).collect::<Vec<_>>())
        .collect();
    assert!(kv.iter().all(|v| *v >= 0.95), "the cache is full");
}

#[test]
fn generating_a_full_scenario_stays_fast_enough_for_every_test() {
    // volume, not time: the series and samples a 30-minute scenario with every option writes
    let spec = fleet("gpu-errors", "dcgm = true\nspec_decode = true\nkv_connector = \"nixl\"", "replica = 1");
    let mut out = Vec::new();
    generate_openmetrics(&spec, &mut out).expect("writes to memory");
    let lines = out.iter().filter(|b| **b == b'\n').count();
    assert!(lines < 600_000, "{lines} lines of OpenMetrics");
}
