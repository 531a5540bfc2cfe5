//! The engines' side of a probe: their own means over the probe's minutes, read from Prometheus,
//! and the difference from what the client measured, which is the time spent before the engine
//! (a router, a gateway, the network, a TLS terminator).
//!
//! The engines' means are over every request they finished in those minutes, the probe's and any
//! other traffic's; [`EngineView::other_traffic`] says when the engines finished clearly more
//! than the probe sent, so a reader knows the means are not the probe's alone.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::prom::Selector;
use crate::report::probe::Summary;
pub use crate::report::probe::{BeforeEngine, EngineView, Measure, NotRead, NotReadReason};
use crate::source::{Data, Request, Source};

/// The vLLM family read for a measure, in the spellings it has had (vLLM 0.32 names the time
/// between tokens `inter_token_latency`; earlier versions `time_per_output_token`).
pub fn families(m: Measure) -> &'static [&'static str] {
    match m {
        Measure::Ttft => &["vllm:time_to_first_token_seconds", "vllm_time_to_first_token_seconds"],
        Measure::E2e | Measure::Finished => &["vllm:e2e_request_latency_seconds", "vllm_e2e_request_latency_seconds"],
        Measure::Queue => &["vllm:request_queue_time_seconds", "vllm_request_queue_time_seconds"],
        Measure::BetweenTokens => &[
            "vllm:inter_token_latency_seconds",
            "vllm_inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
            "vllm_time_per_output_token_seconds",
        ],
        Measure::RunningMax => &["vllm:num_requests_running", "vllm_num_requests_running"],
        Measure::WaitingMax => &["vllm:num_requests_waiting", "vllm_num_requests_waiting"],
    }
}

/// The minutes to read for a probe from `started` to `ended`: from `settle` before it (so that the
/// range holds the last scrape before the first request: a counter's rise is seen between two
/// samples, and a range starting at the probe would miss what the next scrape already holds) to
/// `settle` after it (for the last scrape to land). `settle` is at least a scrape interval. The
/// range is whole seconds, rounded up.
pub fn window(started: DateTime<Utc>, ended: DateTime<Utc>, settle: Duration) -> (DateTime<Utc>, DateTime<Utc>, Duration) {
    let settle = chrono::Duration::from_std(settle).unwrap_or_default();
    let (from, to) = (started - settle, ended + settle);
    let ms = (to - from).num_milliseconds().max(1000) as u64;
    (from, to, Duration::from_secs(ms.div_ceil(1000)))
}

/// Each measure's instant query at `to`.
pub fn queries(selector: &Selector, to: DateTime<Utc>, range: Duration) -> Vec<(Measure, Request)> {
    Measure::ALL
        .iter()
        .map(|m| {
            let q = match m {
                Measure::RunningMax | Measure::WaitingMax => crate::signals::probe_engine_gauge_max(selector, families(*m), range),
                _ => crate::signals::probe_engine_query(selector, families(*m), range, *m == Measure::Finished),
            };
            (*m, Request::Instant { query: q, time: to })
        })
        .collect()
}

/// The answers (a number, none, or a failure's reason) into the view, beside the probe's summary.
pub fn view(
    prometheus: String,
    selector: &Selector,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    answers: Vec<(Measure, Result<Option<f64>, String>)>,
    probe: &Summary,
) -> EngineView {
    let mut not_read = Vec::new();
    let mut get = |m: Measure| -> Option<f64> {
        let (_, a) = answers.iter().find(|(k, _)| *k == m)?;
        match a {
            Ok(Some(v)) if v.is_finite() => Some(*v),
            Ok(_) => {
                not_read.push(NotRead { measure: m, reason: NotReadReason::NoData });
                None
            }
            Err(detail) => {
                not_read.push(NotRead { measure: m, reason: NotReadReason::QueryFailed { detail: detail.clone() } });
                None
            }
        }
    };
    let (ttft, e2e, queue, between, finished) =
        (get(Measure::Ttft), get(Measure::E2e), get(Measure::Queue), get(Measure::BetweenTokens), get(Measure::Finished));
    let (running_max, waiting_max) = (get(Measure::RunningMax), get(Measure::WaitingMax));
    let minus = |client: Option<f64>, engine: Option<f64>| Some(client? - engine?);
    let before_engine = BeforeEngine { ttft_seconds: minus(probe.ttft.map(|s| s.mean), ttft), e2e_seconds: minus(probe.e2e.map(|s| s.mean), e2e) };
    let other_traffic = finished.is_some_and(|f| f - probe.ok as f64 > (probe.ok as f64 * 0.1).max(2.0));
    EngineView {
        prometheus,
        selector: selector.to_promql(),
        from,
        to,
        ttft_mean: ttft,
        e2e_mean: e2e,
        queue_mean: queue,
        between_tokens_mean: between,
        finished,
        running_max,
        waiting_max,
        before_engine,
        other_traffic,
        not_read,
    }
}

/// Ask every query of [`queries`] (or of a load test's step: one at a time, small instant queries) and read each answer
/// as one number: the first sample of a vector or a scalar; an empty vector is no data.
pub async fn read<M: Copy>(source: &dyn Source, requests: &[(M, Request)]) -> Vec<(M, Result<Option<f64>, String>)> {
    let mut out = Vec::new();
    for (m, req) in requests {
        let answer = match source.send(req).await {
            Ok(ex) => match crate::source::decode(&source.url(), req, &ex) {
                Ok(r) => Ok(match r.data {
                    Data::Vector(v) => v.first().map(|s| s.v),
                    Data::Scalar(x) => Some(x),
                    _ => None,
                }),
                Err(e) => Err(e.short_reason()),
            },
            Err(e) => Err(e.short_reason()),
        };
        out.push((*m, answer));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::summary::Spread;

    fn summary(ttft: f64, e2e: f64, ok: usize) -> Summary {
        Summary {
            sent: ok,
            ok,
            failed: 0,
            by_outcome: Default::default(),
            ttft: Spread::of([ttft]),
            between_tokens: None,
            e2e: Spread::of([e2e]),
            failed_e2e: None,
            tokens: 0,
        }
    }

    #[test]
    fn the_time_before_the_engine_is_the_clients_mean_less_the_engines() {
        let sel = Selector::parse("model_name=\"m\"").unwrap();
        let t = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let answers = vec![
            (Measure::Ttft, Ok(Some(0.10))),
            (Measure::E2e, Ok(Some(0.90))),
            (Measure::Queue, Ok(None)),
            (Measure::BetweenTokens, Err("timed out".to_string())),
            (Measure::Finished, Ok(Some(10.0))),
        ];
        let v = view("http://p".into(), &sel, (t, t), answers, &summary(0.25, 1.0, 10));
        assert!((v.before_engine.ttft_seconds.unwrap() - 0.15).abs() < 1e-9);
        assert!((v.before_engine.e2e_seconds.unwrap() - 0.10).abs() < 1e-9);
        assert!(!v.other_traffic);
        assert_eq!(v.not_read.len(), 2);
        assert!(!v.evaluated(), "a failed query leaves the comparison not evaluated");
        let busy = view("http://p".into(), &sel, (t, t), vec![(Measure::Ttft, Ok(Some(0.1))), (Measure::Finished, Ok(Some(40.0)))], &summary(0.2, 1.0, 10));
        assert!(busy.other_traffic && busy.evaluated());
    }

    #[test]
    fn the_window_covers_the_probe_and_the_settling_time_in_whole_seconds() {
        let s = DateTime::from_timestamp_millis(1_800_000_000_000).unwrap();
        let e = DateTime::from_timestamp_millis(1_800_000_012_300).unwrap();
        let (from, to, range) = window(s, e, Duration::from_secs(20));
        assert_eq!(((s - from).num_seconds(), range), (20, Duration::from_secs(53)));
        assert_eq!((to - e).num_seconds(), 20);
        let q = queries(&Selector::parse("model_name=\"m\"").unwrap(), to, range);
        assert_eq!(q.len(), 7);
        assert!(q[5].1.query().unwrap().starts_with("max(max_over_time({__name__=~\"vllm:num_requests_running|vllm_num_requests_running\""), "{:?}", q[5]);
        let text = q[0].1.query().unwrap().to_string();
        assert!(text.contains("[53s]") && text.contains("model_name=\"m\"") && text.contains("vllm:time_to_first_token_seconds_sum"), "{text}");
    }
}
