//! A probe's result as data: what was sent, what each request did, the summary, the engines' view
//! over the same minutes, and, where a probe joined a diagnosis (`explain --probe`, `check
//! --probe`), how it was judged ([`ProbeEvidence`]). [`crate::probe`] fills these in;
//! [`crate::render`] words them. The JSON is their serialization (docs/probe.md, docs/output.md).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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

/// A distribution of seconds: count, mean, median, 95th percentile (nearest rank) and maximum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub count: usize,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub max: f64,
}

impl Spread {
    /// `None` for no values (non-finite ones are left out).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Spread> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let rank = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Spread { count: v.len(), mean: v.iter().sum::<f64>() / v.len() as f64, p50: rank(0.5), p95: rank(0.95), max: v[v.len() - 1] })
    }
}

/// What the requests came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Requests started.
    pub sent: usize,
    pub ok: usize,
    pub failed: usize,
    /// Requests per outcome kind (`ok`, `http_408`, `timeout`, `cut_by_duration`, `reset`, ...).
    pub by_outcome: BTreeMap<String, usize>,
    /// Time to the first token of the streamed requests that succeeded.
    pub ttft: Option<Spread>,
    /// Every gap between two token events of the streamed requests that succeeded.
    pub between_tokens: Option<Spread>,
    /// End-to-end time of the requests that succeeded, streamed or not.
    pub e2e: Option<Spread>,
    /// End-to-end time of the requests that failed: a 408 in half a second is not a slow answer.
    pub failed_e2e: Option<Spread>,
    /// Tokens generated over the succeeded requests.
    pub tokens: u64,
}

/// One engine-side measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Time to the first token (vLLM starts it when its API server takes the request).
    Ttft,
    /// End-to-end request time.
    E2e,
    /// Time waiting in the engine's queue.
    Queue,
    /// Time between two tokens.
    BetweenTokens,
    /// Requests the engines finished (the e2e histogram's count, from its first sample in the
    /// minutes to its last: exact, where `increase` would extrapolate to the range's edges).
    Finished,
    /// The most requests one engine had running at a scrape.
    RunningMax,
    /// The most requests one engine had waiting at a scrape.
    WaitingMax,
}

/// What could not be read, and why (the failed query's short reason, or no data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotRead {
    pub measure: Measure,
    pub reason: NotReadReason,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum NotReadReason {
    /// The query failed: the source's own short reason.
    QueryFailed { detail: String },
    /// No series under the selector, or no request finished in the window.
    NoData,
}

/// The engines over the probe's minutes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineView {
    /// The Prometheus read, without credentials.
    pub prometheus: String,
    /// The selector every read was under.
    pub selector: String,
    /// The minutes read: the probe's first request to its end plus the wait for the last scrape.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The engines' means, seconds.
    pub ttft_mean: Option<f64>,
    pub e2e_mean: Option<f64>,
    pub queue_mean: Option<f64>,
    pub between_tokens_mean: Option<f64>,
    /// Requests the engines finished in those minutes.
    pub finished: Option<f64>,
    /// The most requests one engine had running, and waiting, at a scrape in those minutes: an
    /// engine with room to spare (nothing waiting) did not refuse or slow what the probe saw.
    pub running_max: Option<f64>,
    pub waiting_max: Option<f64>,
    /// The client's mean less the engines' mean: time before the engine.
    pub before_engine: BeforeEngine,
    /// The engines finished clearly more requests than the probe completed: their means hold
    /// other traffic too.
    pub other_traffic: bool,
    pub not_read: Vec<NotRead>,
}

/// Client minus engine, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BeforeEngine {
    /// The probe's mean time to the first token (streamed requests) less the engines' mean TTFT.
    pub ttft_seconds: Option<f64>,
    /// The probe's mean end-to-end time less the engines' mean end-to-end time.
    pub e2e_seconds: Option<f64>,
}

impl EngineView {
    /// Whether the comparison was made: at least one difference computed and no query failed.
    pub fn evaluated(&self) -> bool {
        (self.before_engine.ttft_seconds.is_some() || self.before_engine.e2e_seconds.is_some())
            && !self.not_read.iter().any(|n| matches!(n.reason, NotReadReason::QueryFailed { .. }))
    }
}

impl Measure {
    pub const ALL: [Measure; 7] =
        [Measure::Ttft, Measure::E2e, Measure::Queue, Measure::BetweenTokens, Measure::Finished, Measure::RunningMax, Measure::WaitingMax];
}

/// A probe that joined a diagnosis: the run, the limit its latency was held to, and what, if
/// anything, fails it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeEvidence {
    pub run: ProbeRun,
    /// The profile the limit came from (`chat` unless `--profile` said otherwise).
    pub profile: String,
    /// The profile's ceiling on the 95th percentile of the time to the first token
    /// (`ttft_p95_high`), seconds, which the probe's own 95th percentile is held to; `None` when
    /// the rules set none.
    pub ttft_p95_limit: Option<f64>,
    /// Why the probe fails the run, in the order found; empty when it passes.
    pub breaches: Vec<ProbeBreach>,
}

/// One reason a probe fails the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProbeBreach {
    /// Requests that did not come back whole (any status but 200, a timeout, a reset, no connection).
    RequestsFailed { failed: usize, sent: usize },
    /// No request could be started.
    NothingSent,
    /// The probe's 95th percentile of the time to the first token is over the profile's ceiling.
    TtftOverLimit { p95_seconds: f64, limit_seconds: f64 },
}

impl ProbeEvidence {
    pub fn fails(&self) -> bool {
        !self.breaches.is_empty()
    }
}
