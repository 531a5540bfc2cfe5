//! Where numbers come from: a Prometheus-compatible HTTP API, or a recording of one.
//!
//! Every source answers the same [`Request`]s with the same raw [`Exchange`] (HTTP status, content
//! type, body text), and one decoder ([`decode`]) turns an exchange into a [`Response`]. Because a
//! replay hands the decoder the very bytes the server sent, a replayed run is the recorded run.

use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

pub mod auth;
mod decode;
pub mod local;
pub mod prometheus;
pub mod record;
pub mod scrape;

pub use decode::{decode, decode_folded, decode_summed, Fold};

/// Label set of one series (a Prometheus concept, defined in [`crate::prom`]).
pub use crate::prom::Labels;

/// One call to the data source's HTTP API.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Request {
    /// `/api/v1/query`
    Instant { query: String, time: DateTime<Utc> },
    /// `/api/v1/query_range`; `step_seconds` is whole seconds.
    Range { query: String, start: DateTime<Utc>, end: DateTime<Utc>, step_seconds: u64 },
    /// `/api/v1/label/<label>/values` with `match[]` selectors.
    LabelValues { label: String, matchers: Vec<String>, start: DateTime<Utc>, end: DateTime<Utc> },
}

impl Request {
    /// The API path below the base URL, without a leading slash.
    pub fn path(&self) -> String {
        match self {
            Request::Instant { .. } => "api/v1/query".to_string(),
            Request::Range { .. } => "api/v1/query_range".to_string(),
            Request::LabelValues { label, .. } => format!("api/v1/label/{label}/values"),
        }
    }

    /// The PromQL asked (none for a label-values request).
    pub fn query(&self) -> Option<&str> {
        match self {
            Request::Instant { query, .. } | Request::Range { query, .. } => Some(query),
            Request::LabelValues { .. } => None,
        }
    }

    /// The same request asking `query` instead (none for a label-values request).
    pub fn with_query(&self, query: &str) -> Option<Request> {
        match self {
            Request::Instant { time, .. } => Some(Request::Instant { query: query.to_string(), time: *time }),
            Request::Range { start, end, step_seconds, .. } => {
                Some(Request::Range { query: query.to_string(), start: *start, end: *end, step_seconds: *step_seconds })
            }
            Request::LabelValues { .. } => None,
        }
    }

    /// Form fields (sent POST, form-encoded), in a fixed order.
    pub fn form(&self, timeout: Option<Duration>) -> Vec<(String, String)> {
        let ts = |t: &DateTime<Utc>| format_time(t);
        let mut f: Vec<(String, String)> = match self {
            Request::Instant { query, time } => {
                vec![("query".into(), query.clone()), ("time".into(), ts(time))]
            }
            Request::Range { query, start, end, step_seconds } => {
                vec![("query".into(), query.clone()), ("start".into(), ts(start)), ("end".into(), ts(end)), ("step".into(), format!("{step_seconds}"))]
            }
            Request::LabelValues { matchers, start, end, .. } => {
                let mut v: Vec<(String, String)> = matchers.iter().map(|m| ("match[]".to_string(), m.clone())).collect();
                v.push(("start".into(), ts(start)));
                v.push(("end".into(), ts(end)));
                v
            }
        };
        if let (Some(t), false) = (timeout, matches!(self, Request::LabelValues { .. })) {
            f.push(("timeout".into(), format!("{}ms", t.as_millis().max(1))));
        }
        f
    }

    /// Short human description for errors and progress: the query text or the label.
    pub fn describe(&self) -> String {
        match self {
            Request::Instant { query, .. } | Request::Range { query, .. } => query.clone(),
            Request::LabelValues { label, matchers, .. } => {
                format!("values of label {label} for {}", matchers.join(", "))
            }
        }
    }
}

/// Why an answer's body could not be read in full.
pub(crate) enum BodyError {
    /// Over the cap (declared or counted, decompressed).
    TooBig,
    /// The connection broke off while reading.
    Broken(reqwest::Error),
}

/// An answer's body as text (invalid UTF-8 replaced), decompressed, read up to `max` bytes: a body
/// that declares or reaches more stops with [`BodyError::TooBig`], so an endless answer or a small
/// gzip body that inflates to gigabytes costs at most `max`. The Prometheus client and the scraper
/// share it.
pub(crate) async fn read_capped(mut resp: reqwest::Response, max: usize) -> Result<String, BodyError> {
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(BodyError::TooBig);
    }
    let mut buf: Vec<u8> = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(BodyError::Broken)? {
        if buf.len() + chunk.len() > max {
            return Err(BodyError::TooBig);
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// RFC 3339 with millisecond precision in UTC, accepted by every Prometheus-compatible API.
pub fn format_time(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// What came back over the wire, before decoding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    pub http_status: u16,
    #[serde(default)]
    pub content_type: String,
    pub body: String,
}

/// A decoded, successful API answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub data: Data,
    /// `warnings` from the envelope (e.g. Thanos partial responses); never dropped.
    pub warnings: Vec<String>,
    /// `infos` from the envelope.
    pub infos: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Data {
    Vector(Vec<Sample>),
    Matrix(Vec<Series>),
    Scalar(f64),
    String(String),
    /// The answer to a label-values request.
    Labels(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Shared: an instant answer split from a range answer holds each series' labels once for
    /// both instants.
    pub labels: std::sync::Arc<Labels>,
    /// Unix seconds.
    pub t: f64,
    pub v: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Labels,
    /// (unix seconds, value), oldest first.
    pub points: Vec<(f64, f64)>,
}

/// Why a request produced no usable answer. Messages say what failed, where, and what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum SourceError {
    #[error("cannot reach {url}: {detail}. Check the URL (--prometheus or $VLLM_DIAG_PROMETHEUS_URL) and that the server is up")]
    Unreachable { url: String, detail: String },
    #[error("timed out after {}s waiting for {url}", .after.as_secs_f64())]
    Timeout { url: String, after: Duration },
    #[error("{url} answered HTTP {status} with a body that is not a Prometheus API response ({content_type}): {excerpt}")]
    NotPrometheus { url: String, status: u16, content_type: String, excerpt: String },
    /// An HTTP status that says what went wrong by itself (401, 403, 429, 5xx) with a body that is not
    /// a Prometheus envelope: the message says what the status means here and what to do.
    #[error("{url} answered HTTP {status}: {meaning}. The server said: {excerpt}")]
    HttpStatus { url: String, status: u16, meaning: String, excerpt: String },
    #[error("{url} rejected the query ({error_type}, HTTP {status}): {message}")]
    Api { url: String, status: u16, error_type: String, message: String },
    #[error("{url} sent a response vllm-diag cannot read: {detail}")]
    Decode { url: String, detail: String },
    #[error("the replay file {file} holds no answer for this request: {request}. It was recorded with different options or rules; record it again")]
    NotRecorded { file: String, request: String },
    #[error("{detail}")]
    Other { detail: String },
}

impl SourceError {
    /// True when the source as a whole could not be reached (as opposed to one query failing).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, SourceError::Unreachable { .. })
    }

    /// The failure in the report's terms: its kind, and [`SourceError::short_reason`].
    pub fn failure(&self) -> crate::report::QueryFailure {
        use crate::report::FailureKind;
        let kind = match self {
            SourceError::Timeout { .. } => FailureKind::TimedOut,
            SourceError::Api { error_type, .. } if error_type == "timeout" => FailureKind::TimedOut,
            SourceError::Unreachable { .. } => FailureKind::Unreachable,
            SourceError::NotPrometheus { .. } | SourceError::HttpStatus { .. } => FailureKind::Http,
            SourceError::Api { .. } => FailureKind::Rejected,
            SourceError::Decode { .. } => FailureKind::Unreadable,
            SourceError::NotRecorded { .. } => FailureKind::NotRecorded,
            SourceError::Other { .. } => FailureKind::Other,
        };
        crate::report::QueryFailure::new(kind, self.short_reason())
    }

    /// Short reason for a "not evaluated" entry.
    pub fn short_reason(&self) -> String {
        match self {
            SourceError::Timeout { .. } => "timed out".to_string(),
            SourceError::Api { error_type, .. } if error_type == "timeout" => {
                "timed out (the server gave up on the query; --query-timeout sets its limit)".to_string()
            }
            SourceError::Unreachable { .. } => "data source unreachable".to_string(),
            SourceError::NotRecorded { file, .. } => {
                format!("{file} holds no answer for this query (recorded with other rules or options); record it again")
            }
            other => {
                let s = other.to_string();
                if s.chars().count() > 200 {
                    let cut: String = s.chars().take(200).collect();
                    format!("{cut}...")
                } else {
                    s
                }
            }
        }
    }
}

/// Anything that can answer requests with raw exchanges. Implemented by the HTTP client and by replay.
pub trait Source: Send + Sync {
    /// Send one request and return what came back, or a transport-level error.
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>>;

    /// Where the numbers come from, for the report header (no credentials).
    fn info(&self) -> crate::report::SourceInfo;

    /// The base URL, for error messages.
    fn url(&self) -> String {
        self.info().url
    }

    /// A request the run stopped waiting for (its deadline passed) ends with `error`: a recorder
    /// keeps that, so a replay times out where the live run did. Nothing for other sources.
    fn gave_up(&self, _req: &Request, _error: &SourceError) {}
}
