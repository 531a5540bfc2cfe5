//! `vllm-diag probe URL`: a small, bounded set of representative requests to an OpenAI-compatible
//! server, measured from the client's side, and where a Prometheus is given, the engines' own
//! numbers for the same minutes beside them.
//!
//! The stages are plain functions over data, as in the diagnosis:
//!
//! - [`plan`]: the settings checked into a [`Plan`] (the endpoint, the request shape, the
//!   [`Limits`] and their hard ceilings) and each request's body; a dry run prints the plan.
//! - [`send`]: the only network code: requests started at the plan's rate, at most its concurrency
//!   in flight, none after its duration; each one's timings and outcome measured ([`Measured`]).
//! - [`summary`]: the measurements into counts by outcome and latency distributions ([`Summary`]).
//! - [`engine`]: the engines' means over the probe's minutes (queries written in
//!   [`crate::signals::promql`]) and their difference from the client's ([`EngineView`]).
//!
//! Everything here is data; [`crate::render`] words it (text), and the JSON is the serialized
//! [`ProbeRun`], a stable contract (docs/probe.md).

pub mod engine;
pub mod plan;
pub mod send;
pub mod summary;

use std::time::Duration;

pub use crate::report::probe::{
    Api, BeforeEngine, EngineView, Limits, Measured, Outcome, ProbeBreach, ProbeEvidence, ProbeRun, RefusedInFront, Shape, StreamMode, Summary, TimeoutLimit,
    SCHEMA_VERSION,
};
pub use plan::Plan;

/// The highest values a probe accepts, whatever the flags say: a probe measures, it does not load.
pub const CEILINGS: Limits =
    Limits { requests: 200, rate_per_second: 20.0, concurrency: 32, max_duration: Duration::from_secs(600), request_timeout: Duration::from_secs(300) };

/// The defaults: ten requests, one a second, one at a time, a minute at most.
pub const DEFAULTS: Limits =
    Limits { requests: 10, rate_per_second: 1.0, concurrency: 1, max_duration: Duration::from_secs(60), request_timeout: Duration::from_secs(30) };

/// The statuses a server or a router answers when it is too busy to take a request: 408 (vLLM's
/// router at its --max-concurrent-requests), 429 (a rate limit), 503 (vLLM at its
/// --max-num-queued-reqs, a gateway without a healthy backend).
pub const BUSY_STATUSES: [u16; 3] = [408, 429, 503];

/// [`RefusedInFront`] from the requests and the engines' view: some requests answered a busy
/// status, and the engines were read and had nothing waiting.
pub fn refused_in_front(requests: &[Measured], engine: Option<&EngineView>) -> Option<RefusedInFront> {
    let engine = engine?;
    if engine.waiting_max != Some(0.0) {
        return None;
    }
    let refused: Vec<(&Measured, u16)> = requests
        .iter()
        .filter_map(|m| match m.outcome {
            Outcome::Http { status, .. } if BUSY_STATUSES.contains(&status) => Some((m, status)),
            _ => None,
        })
        .collect();
    if refused.is_empty() {
        return None;
    }
    let mut by_status = std::collections::BTreeMap::new();
    for (_, s) in &refused {
        *by_status.entry(*s).or_insert(0) += 1;
    }
    Some(RefusedInFront {
        by_status,
        refused: refused.len(),
        mean_seconds: refused.iter().map(|(m, _)| m.e2e_seconds).sum::<f64>() / refused.len() as f64,
        engines_running_max: engine.running_max,
    })
}

/// A probe judged for a diagnosis: it fails when a request failed (or none could be sent), or when
/// its 95th percentile of the time to the first token is over `ttft_p95_limit` (the profile's
/// `ttft_p95_high`). The time between tokens is not judged: a client sees tokens in bursts (the
/// lab's streams delivered 32 tokens within a millisecond), so its gaps are not the engine's pace.
pub fn judge(run: ProbeRun, profile: &str, ttft_p95_limit: Option<f64>) -> ProbeEvidence {
    let mut breaches = Vec::new();
    let s = &run.summary;
    if s.sent == 0 {
        breaches.push(ProbeBreach::NothingSent);
    } else if s.failed > 0 {
        breaches.push(ProbeBreach::RequestsFailed { failed: s.failed, sent: s.sent });
    }
    if let (Some(t), Some(limit)) = (s.ttft, ttft_p95_limit) {
        if t.p95 > limit {
            breaches.push(ProbeBreach::TtftOverLimit { p95_seconds: t.p95, limit_seconds: limit });
        }
    }
    ProbeEvidence { run, profile: profile.to_string(), ttft_p95_limit, breaches }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::DateTime;

    fn request(outcome: Outcome, e2e: f64) -> Measured {
        Measured {
            index: 0,
            stream: false,
            started: DateTime::from_timestamp(0, 0).unwrap(),
            outcome,
            headers_seconds: None,
            ttft_seconds: None,
            e2e_seconds: e2e,
            tokens: None,
            gaps: Vec::new(),
        }
    }

    fn engine(waiting: Option<f64>) -> EngineView {
        let t = DateTime::from_timestamp(0, 0).unwrap();
        EngineView {
            prometheus: "http://p".into(),
            selector: String::new(),
            from: t,
            to: t,
            ttft_mean: None,
            e2e_mean: None,
            queue_mean: None,
            between_tokens_mean: None,
            finished: Some(2.0),
            running_max: Some(2.0),
            waiting_max: waiting,
            before_engine: engine::BeforeEngine { ttft_seconds: None, e2e_seconds: None },
            other_traffic: false,
            not_read: Vec::new(),
        }
    }

    #[test]
    fn a_probe_fails_on_a_failed_request_or_a_first_token_over_the_profiles_ceiling() {
        let run = |reqs: Vec<Measured>| ProbeRun {
            schema_version: SCHEMA_VERSION,
            target: "http://h".into(),
            endpoint: "http://h/v1/completions".into(),
            model: "m".into(),
            model_looked_up: false,
            shape: Shape { api: Api::Completions, stream: StreamMode::Always, prompt_words: 4, max_tokens: 4, ignore_eos: true },
            limits: DEFAULTS,
            ceilings: CEILINGS,
            started: DateTime::from_timestamp(0, 0).unwrap(),
            ended: DateTime::from_timestamp(1, 0).unwrap(),
            not_started: 0,
            summary: summary::summarize(&reqs),
            requests: reqs,
            engine: None,
            refused_in_front: None,
        };
        let streamed = |ttft: f64| Measured { ttft_seconds: Some(ttft), stream: true, ..request(Outcome::Ok, ttft + 0.1) };
        let fine = judge(run(vec![streamed(0.2), streamed(0.3)]), "chat", Some(3.0));
        assert!(!fine.fails(), "{:?}", fine.breaches);
        let slow = judge(run(vec![streamed(0.2), streamed(3.5)]), "chat", Some(3.0));
        assert_eq!(slow.breaches, vec![ProbeBreach::TtftOverLimit { p95_seconds: 3.5, limit_seconds: 3.0 }]);
        let refused = judge(run(vec![streamed(0.2), request(Outcome::Http { status: 408, message: String::new() }, 0.5)]), "chat", Some(3.0));
        assert_eq!(refused.breaches, vec![ProbeBreach::RequestsFailed { failed: 1, sent: 2 }]);
        assert_eq!(judge(run(Vec::new()), "chat", None).breaches, vec![ProbeBreach::NothingSent]);
        // No limit in the rules: only the requests are judged.
        assert!(!judge(run(vec![streamed(9.0)]), "chat", None).fails());
    }

    #[test]
    fn busy_answers_while_nothing_waited_are_refusals_in_front_of_the_engines() {
        let busy = |s| request(Outcome::Http { status: s, message: String::new() }, 0.2);
        let reqs = [request(Outcome::Ok, 1.4), busy(408), busy(408), busy(503), busy(404)];
        let r = refused_in_front(&reqs, Some(&engine(Some(0.0)))).expect("refused in front");
        assert_eq!((r.refused, r.by_status.get(&408), r.by_status.get(&503)), (3, Some(&2), Some(&1)));
        assert!((r.mean_seconds - 0.2).abs() < 1e-12);
        assert_eq!(r.engines_running_max, Some(2.0));
        // A queue at the engines, no engines read, or no busy answer: nothing to say.
        assert_eq!(refused_in_front(&reqs, Some(&engine(Some(3.0)))), None);
        assert_eq!(refused_in_front(&reqs, Some(&engine(None))), None);
        assert_eq!(refused_in_front(&reqs, None), None);
        assert_eq!(refused_in_front(&reqs[..1], Some(&engine(Some(0.0)))), None);
    }
}
