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

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use engine::EngineView;
pub use plan::Plan;
pub use summary::Summary;

/// The JSON contract's version: a field removed or changed in meaning raises it.
pub const SCHEMA_VERSION: u32 = 1;

/// Which OpenAI-compatible API the requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    /// `POST /v1/completions`, a `prompt`.
    Completions,
    /// `POST /v1/chat/completions`, one user message.
    Chat,
}

impl Api {
    /// The path below `/v1`.
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "completions",
            Api::Chat => "chat/completions",
        }
    }
}

/// Which requests are streamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamMode {
    /// Every request streamed (`"stream": true`): time to the first token and between tokens.
    Always,
    /// None streamed: whole answers (how a router's request timeout and concurrency limit see them).
    Never,
    /// Alternating, streamed first.
    Both,
}

impl StreamMode {
    /// Whether request `index` (from 0) is streamed.
    pub fn streams(self, index: usize) -> bool {
        match self {
            StreamMode::Always => true,
            StreamMode::Never => false,
            StreamMode::Both => index.is_multiple_of(2),
        }
    }
}

/// What each request asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shape {
    pub api: Api,
    pub stream: StreamMode,
    /// Words in each prompt (common short words: about a token each on most tokenizers).
    pub prompt_words: usize,
    /// `max_tokens` of each request.
    pub max_tokens: u32,
    /// Send vLLM's `ignore_eos`, so that every answer is `max_tokens` long.
    pub ignore_eos: bool,
}

/// How much the probe may send: each bound enforced by [`send`], and printed with every result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Requests in all (the model lookup, when made, is not one of them).
    pub requests: usize,
    /// Requests started per second, at most.
    pub rate_per_second: f64,
    /// Requests in flight at once, at most.
    pub concurrency: usize,
    /// No request starts after this much time from the first, and any still running then is cut.
    #[serde(with = "secs")]
    pub max_duration: Duration,
    /// Each request's own limit.
    #[serde(with = "secs")]
    pub request_timeout: Duration,
}

/// The highest values a probe accepts, whatever the flags say: a probe measures, it does not load.
pub const CEILINGS: Limits = Limits {
    requests: 200,
    rate_per_second: 20.0,
    concurrency: 32,
    max_duration: Duration::from_secs(600),
    request_timeout: Duration::from_secs(300),
};

/// The defaults: ten requests, one a second, one at a time, a minute at most.
pub const DEFAULTS: Limits = Limits {
    requests: 10,
    rate_per_second: 1.0,
    concurrency: 1,
    max_duration: Duration::from_secs(60),
    request_timeout: Duration::from_secs(30),
};

/// How one request ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// HTTP 200 and a complete answer.
    Ok,
    /// Another HTTP status; `message` is the start of the server's error text, made printable.
    Http { status: u16, message: String },
    /// A streamed answer that carried an error event after its 200.
    StreamError { message: String },
    /// No answer within a limit: the request's own timeout, or the probe's duration.
    Timeout { limit: TimeoutLimit },
    /// The connection was reset or closed before the answer ended.
    Reset { detail: String },
    /// No connection: refused, no route, a name that does not resolve, a TLS handshake refused.
    Connect { detail: String },
    /// A 200 whose body could not be read as the API's answer.
    Unreadable { detail: String },
}

impl Outcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok)
    }

    /// The outcome's kind, as the JSON names it (the key of [`Summary::by_outcome`]).
    pub fn key(&self) -> String {
        match self {
            Outcome::Ok => "ok".into(),
            Outcome::Http { status, .. } => format!("http_{status}"),
            Outcome::StreamError { .. } => "stream_error".into(),
            Outcome::Timeout { limit: TimeoutLimit::Request } => "timeout".into(),
            Outcome::Timeout { limit: TimeoutLimit::ProbeDuration } => "cut_by_duration".into(),
            Outcome::Reset { .. } => "reset".into(),
            Outcome::Connect { .. } => "connect".into(),
            Outcome::Unreadable { .. } => "unreadable".into(),
        }
    }
}

/// Which limit a timed-out request ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutLimit {
    /// The request's own timeout (`--timeout`).
    Request,
    /// The probe's duration (`--max-duration`) ran out while it was under way.
    ProbeDuration,
}

/// One request, measured from the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// From 0, in the order they were started.
    pub index: usize,
    pub stream: bool,
    pub started: DateTime<Utc>,
    pub outcome: Outcome,
    /// Time to the response headers.
    pub headers_seconds: Option<f64>,
    /// Time to the first token (streamed answers only: an unstreamed answer's first token arrives
    /// with its last).
    pub ttft_seconds: Option<f64>,
    /// Time to the end of the answer (or to the failure).
    pub e2e_seconds: f64,
    /// Tokens generated, as the answer's `usage` says (else the token events counted).
    pub tokens: Option<u64>,
    /// Gaps between successive token events of a stream, in seconds.
    pub gaps: Vec<f64>,
}

/// A whole probe: what was planned, what happened, and the engines' view when read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRun {
    pub schema_version: u32,
    /// The URL given, without credentials.
    pub target: String,
    /// Where the requests went, without credentials.
    pub endpoint: String,
    pub model: String,
    /// Whether the model was read from the server's `/v1/models` (one GET before the requests).
    pub model_looked_up: bool,
    pub shape: Shape,
    pub limits: Limits,
    pub ceilings: Limits,
    pub started: DateTime<Utc>,
    pub ended: DateTime<Utc>,
    /// Requests never started because the duration ran out first.
    pub not_started: usize,
    pub requests: Vec<Measured>,
    pub summary: Summary,
    /// The engines over the same minutes; `None` when no Prometheus was given.
    pub engine: Option<EngineView>,
    /// Requests refused as busy while the engines had nothing waiting ([`refused_in_front`]).
    #[serde(default)]
    pub refused_in_front: Option<RefusedInFront>,
}

/// The statuses a server or a router answers when it is too busy to take a request: 408 (vLLM's
/// router at its --max-concurrent-requests), 429 (a rate limit), 503 (vLLM at its
/// --max-num-queued-reqs, a gateway without a healthy backend).
pub const BUSY_STATUSES: [u16; 3] = [408, 429, 503];

/// Requests refused as busy while no engine had a request waiting in those minutes: the refusal
/// came from in front of the engines (a router's or a gateway's limit), which the engines' metrics
/// do not count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedInFront {
    /// Requests refused, by status.
    pub by_status: std::collections::BTreeMap<u16, usize>,
    pub refused: usize,
    /// Their mean time to the refusal, seconds.
    pub mean_seconds: f64,
    /// The most one engine had running at a scrape in those minutes.
    pub engines_running_max: Option<f64>,
}

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

impl ProbeRun {
    /// The exit code (docs/output.md): 1 when a request failed, 3 when the engines' view was asked
    /// for and could not be read, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.summary.failed > 0 || self.summary.sent == 0 {
            crate::report::EXIT_FINDINGS
        } else if self.engine.as_ref().is_some_and(|e| !e.evaluated()) {
            crate::report::EXIT_NO_DATA
        } else {
            crate::report::EXIT_OK
        }
    }
}

/// Durations as seconds (a float) in the JSON.
mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
