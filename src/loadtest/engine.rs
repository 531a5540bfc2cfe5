//! The engines over one step of a sweep, read from Prometheus: the running and waiting gauges and
//! the KV-cache usage (what the binding-limit judge reads, here over the step's scrapes), the
//! preemptions, the engines' own p95 time to the first token and between tokens, the tokens they
//! took and generated, and the requests they finished. The queries are written in
//! [`crate::signals::promql`]; the vLLM families read, in their spellings, are named here.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::probe::engine::families as probe_families;
use crate::probe::engine::Measure;
use crate::prom::Selector;
use crate::report::loadtest::{StepEngine, StepMeasure, StepNotRead};
use crate::report::probe::NotReadReason;
use crate::source::Request;

/// The vLLM family read for a measure, in the spellings it has had.
pub fn families(m: StepMeasure) -> &'static [&'static str] {
    match m {
        StepMeasure::RunningMax => probe_families(Measure::RunningMax),
        StepMeasure::WaitingMax | StepMeasure::WaitingMean => probe_families(Measure::WaitingMax),
        StepMeasure::KvUsageMax => &["vllm:kv_cache_usage_perc", "vllm_kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm_gpu_cache_usage_perc"],
        StepMeasure::Preemptions => &["vllm:num_preemptions_total", "vllm_num_preemptions_total"],
        StepMeasure::TtftP95 => probe_families(Measure::Ttft),
        StepMeasure::ItlP95 | StepMeasure::ItlMean => probe_families(Measure::BetweenTokens),
        StepMeasure::GenerationRate => &["vllm:generation_tokens_total", "vllm_generation_tokens_total"],
        StepMeasure::PromptRate => &["vllm:prompt_tokens_total", "vllm_prompt_tokens_total"],
        StepMeasure::Finished => probe_families(Measure::Finished),
    }
}

/// The minutes a step's reads cover. The gauges: the step itself, `gauges_at` with
/// `gauge_range` (its scrapes, not the drain or the wait after it). The counters and histograms:
/// from `settle` before the step to `settle` after its end (so that the scrape before its first
/// request and the one after its last are both read), as a probe's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepWindow {
    pub gauges_at: DateTime<Utc>,
    pub gauge_range: Duration,
    pub counters_at: DateTime<Utc>,
    pub counter_range: Duration,
}

impl StepWindow {
    pub fn new(started: DateTime<Utc>, ended: DateTime<Utc>, settle: Duration) -> StepWindow {
        let (_, to, range) = crate::probe::engine::window(started, ended, settle);
        let ms = (ended - started).num_milliseconds().max(1000) as u64;
        StepWindow { gauges_at: ended, gauge_range: Duration::from_secs(ms.div_ceil(1000)), counters_at: to, counter_range: range }
    }
}

/// Each measure's instant query.
pub fn queries(selector: &Selector, w: &StepWindow) -> Vec<(StepMeasure, Request)> {
    use crate::signals::{engine_counter_rise, engine_gauge_mean_max, engine_histogram_quantile, probe_engine_gauge_max, probe_engine_query};
    StepMeasure::ALL
        .iter()
        .map(|m| {
            let f = families(*m);
            let (g, c) = (w.gauge_range, w.counter_range);
            let (query, time) = match m {
                StepMeasure::RunningMax | StepMeasure::WaitingMax | StepMeasure::KvUsageMax => (probe_engine_gauge_max(selector, f, g), w.gauges_at),
                StepMeasure::WaitingMean => (engine_gauge_mean_max(selector, f, g), w.gauges_at),
                StepMeasure::Preemptions | StepMeasure::GenerationRate | StepMeasure::PromptRate => (engine_counter_rise(selector, f, c), w.counters_at),
                StepMeasure::TtftP95 | StepMeasure::ItlP95 => (engine_histogram_quantile(selector, f, 0.95, c), w.counters_at),
                StepMeasure::ItlMean => (probe_engine_query(selector, f, c, false), w.counters_at),
                StepMeasure::Finished => (probe_engine_query(selector, f, c, true), w.counters_at),
            };
            (*m, Request::Instant { query, time })
        })
        .collect()
}

/// The answers into the step's view; the token counters' rises become rates over the step's
/// `seconds`. A gauge or counter with no series is no data; a quantile of no requests (NaN) too.
pub fn view(w: &StepWindow, from: DateTime<Utc>, seconds: f64, answers: Vec<(StepMeasure, Result<Option<f64>, String>)>) -> StepEngine {
    let mut not_read = Vec::new();
    let mut get = |m: StepMeasure| -> Option<f64> {
        let (_, a) = answers.iter().find(|(k, _)| *k == m)?;
        match a {
            Ok(Some(v)) if v.is_finite() => Some(*v),
            Ok(_) => {
                not_read.push(StepNotRead { measure: m, reason: NotReadReason::NoData });
                None
            }
            Err(detail) => {
                not_read.push(StepNotRead { measure: m, reason: NotReadReason::QueryFailed { detail: detail.clone() } });
                None
            }
        }
    };
    let per_second = |v: Option<f64>| v.map(|v| v / seconds.max(1e-9));
    StepEngine {
        from,
        to: w.counters_at,
        running_max: get(StepMeasure::RunningMax),
        waiting_max: get(StepMeasure::WaitingMax),
        waiting_mean: get(StepMeasure::WaitingMean),
        kv_usage_max: get(StepMeasure::KvUsageMax),
        preemptions: get(StepMeasure::Preemptions),
        ttft_p95: get(StepMeasure::TtftP95),
        itl_p95: get(StepMeasure::ItlP95),
        itl_mean: get(StepMeasure::ItlMean),
        generation_tokens_per_second: per_second(get(StepMeasure::GenerationRate)),
        prompt_tokens_per_second: per_second(get(StepMeasure::PromptRate)),
        finished: get(StepMeasure::Finished),
        not_read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_steps_gauges_cover_the_step_and_its_counters_the_settling_time_around_it() {
        let s = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let e = DateTime::from_timestamp_millis(1_800_000_010_400).unwrap();
        let w = StepWindow::new(s, e, Duration::from_secs(5));
        assert_eq!((w.gauges_at, w.gauge_range), (e, Duration::from_secs(11)));
        assert_eq!(((w.counters_at - e).num_seconds(), w.counter_range), (5, Duration::from_secs(21)));
        let q = queries(&Selector::parse("model_name=\"m\"").unwrap(), &w);
        assert_eq!(q.len(), StepMeasure::ALL.len());
        let text = |m: StepMeasure| q.iter().find(|(k, _)| *k == m).unwrap().1.query().unwrap().to_string();
        assert!(text(StepMeasure::WaitingMean).starts_with("max(avg_over_time({__name__=~\"vllm:num_requests_waiting|"), "{}", text(StepMeasure::WaitingMean));
        assert!(text(StepMeasure::ItlP95).starts_with("histogram_quantile(0.95, sum by (le) (increase({__name__=~\"vllm:inter_token_latency_seconds_bucket|"));
        assert!(text(StepMeasure::ItlP95).contains("model_name=\"m\"}[21s]"), "{}", text(StepMeasure::ItlP95));
        assert!(text(StepMeasure::KvUsageMax).contains("[11s]") && text(StepMeasure::KvUsageMax).contains("vllm:kv_cache_usage_perc"));
        let answers = vec![(StepMeasure::RunningMax, Ok(Some(4.0))), (StepMeasure::GenerationRate, Ok(Some(500.0))), (StepMeasure::ItlP95, Ok(Some(f64::NAN)))];
        let v = view(&w, s, 10.0, answers);
        assert_eq!((v.running_max, v.generation_tokens_per_second, v.itl_p95), (Some(4.0), Some(50.0), None));
        assert!(v.not_read.iter().any(|n| n.measure == StepMeasure::ItlP95 && n.reason == NotReadReason::NoData));
    }
}
