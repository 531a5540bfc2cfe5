//! Why a rule was not evaluated, in structure: a [`Reason`] (a metric missing, a query that
//! failed with its [`FailureKind`], no data), ordered and compared by what it says, and the
//! [`Reasons`] of one rule and scope; the JSON keeps their words.

use serde::{Deserialize, Serialize};

/// Which of the two windows a reason is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Window,
    Baseline,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Window => "window",
            Side::Baseline => "baseline",
        }
    }
}

/// What kind of failure kept a query from answering (its words say the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// vllm-diag stopped waiting, or the server gave up on the query.
    TimedOut,
    /// The data source could not be reached.
    Unreachable,
    /// An HTTP status with a body that is not an API answer (`answered HTTP 503`).
    Http,
    /// The server refused the query (`bad_data`, `execution`).
    Rejected,
    /// An answer that could not be read.
    Unreadable,
    /// A replayed recording holds no answer for the query.
    NotRecorded,
    /// No answer came back for it (the run ended first).
    NotAnswered,
    /// The replicas' histograms disagree on their bucket bounds, so a bound cannot be read.
    BucketsDiffer,
    /// The query could not be written for the data found.
    Unplannable,
    /// Anything else: the request itself failed on the way (`request to ... failed`).
    Other,
}

/// A query that gave no answer to read: its kind, and its words (`timed out`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryFailure {
    pub kind: FailureKind,
    pub text: String,
}

impl QueryFailure {
    pub fn new(kind: FailureKind, text: impl Into<String>) -> QueryFailure {
        QueryFailure { kind, text: text.into() }
    }
}

/// One reason a rule could not be decided for a scope. Its words ([`Reason::text`]) are what the
/// report has always said; what decides anything (the exit's advice, the briefs) reads the kind.
#[derive(Debug, Clone)]
pub enum Reason {
    /// `signal x was not computed`.
    NotComputed { signal: String },
    /// None of the metric names the signal can use is in that window:
    /// `metric missing in the window: vllm:a, vllm:b`.
    MetricMissing { side: Side, families: Vec<String> },
    /// The signal's query failed: `ttft_p95 (window): timed out`.
    QueryFailed { signal: String, side: Side, failure: QueryFailure },
    /// The query answered, with nothing for this scope: `no data for x in the baseline`.
    NoData { signal: String, side: Side },
    /// `x is NaN in the window`.
    NotANumber { signal: String, side: Side },
    /// A quantile whose histogram's buckets cannot decide the comparison:
    /// `x {position}: {detail}` (`queue_p95 is under its first bucket's bound (0.3): whether it is
    /// > 0.1 cannot be told from its histogram's buckets`).
    Buckets { signal: String, position: String, detail: String },
    /// `threshold $name is not defined`.
    ThresholdUndefined { name: String },
    /// Only an optional feature's absence decided the rule, and no signal found any vLLM data in
    /// the window: counts as a metric missing in the window.
    NothingInWindow,
    /// Over the window's last minutes: `last minutes of the window: ...`.
    LastMinutes(Box<Reason>),
    /// From the rule's stand-in conditions: `stand-in: ...`.
    StandIn(Box<Reason>),
    /// Words kept as written (read back from JSON, or given by a caller).
    Text(String),
}

impl Reason {
    /// The words, as the report writes them.
    pub fn text(&self) -> String {
        match self {
            Reason::NotComputed { signal } => format!("signal {signal} was not computed"),
            Reason::MetricMissing { side, families } => format!("metric missing in the {}: {}", side.as_str(), families.join(", ")),
            Reason::QueryFailed { signal, side, failure } => format!("{signal} ({}): {}", side.as_str(), failure.text),
            Reason::NoData { signal, side } => format!("no data for {signal} in the {}", side.as_str()),
            Reason::NotANumber { signal, side } => format!("{signal} is NaN in the {}", side.as_str()),
            Reason::Buckets { signal, position, detail } => format!("{signal} {position}: {detail}"),
            Reason::ThresholdUndefined { name } => format!("threshold ${name} is not defined"),
            Reason::NothingInWindow => {
                "metric missing in the window, and no signal found any vLLM data in the window, so its absence proves nothing".to_string()
            }
            Reason::LastMinutes(r) => format!("last minutes of the window: {}", r.text()),
            Reason::StandIn(r) => format!("stand-in: {}", r.text()),
            Reason::Text(s) => s.clone(),
        }
    }

    /// The kind of the reason in words, for the briefs (`metric missing in the window`): its
    /// words up to its detail, or all of them for a reason without one.
    pub fn head(&self) -> Option<String> {
        match self {
            Reason::MetricMissing { side, .. } => Some(format!("metric missing in the {}", side.as_str())),
            Reason::QueryFailed { signal, side, .. } => Some(format!("{signal} ({})", side.as_str())),
            Reason::Buckets { signal, position, .. } => Some(format!("{signal} {position}")),
            Reason::LastMinutes(_) => Some("last minutes of the window".to_string()),
            Reason::StandIn(_) => Some("stand-in".to_string()),
            Reason::NotComputed { .. }
            | Reason::NoData { .. }
            | Reason::NotANumber { .. }
            | Reason::ThresholdUndefined { .. }
            | Reason::NothingInWindow
            | Reason::Text(_) => None,
        }
    }

    /// The reason itself, and the one it wraps (over the last minutes, from the stand-in).
    fn inner(&self) -> &Reason {
        match self {
            Reason::LastMinutes(r) | Reason::StandIn(r) => r.inner(),
            r => r,
        }
    }

    /// The failed query behind it, if a query failed.
    pub fn failure(&self) -> Option<&QueryFailure> {
        match self.inner() {
            Reason::QueryFailed { failure, .. } => Some(failure),
            _ => None,
        }
    }

    /// A metric missing in `side` (any side when `None`).
    pub fn metric_missing(&self, side: Option<Side>) -> bool {
        match self.inner() {
            Reason::MetricMissing { side: s, .. } => side.is_none_or(|want| *s == want),
            Reason::NothingInWindow => side.is_none_or(|want| want == Side::Window),
            _ => false,
        }
    }

    /// Nothing to compare with in the baseline: a metric missing there, no data or NaN there.
    pub fn baseline_empty(&self) -> bool {
        matches!(
            self.inner(),
            Reason::MetricMissing { side: Side::Baseline, .. } | Reason::NoData { side: Side::Baseline, .. } | Reason::NotANumber { side: Side::Baseline, .. }
        )
    }
}

impl From<&str> for Reason {
    fn from(text: &str) -> Reason {
        Reason::Text(text.to_string())
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// Reasons are the same when they read the same: the report has always told them apart by their
/// words, and said each once.
impl PartialEq for Reason {
    fn eq(&self, other: &Reason) -> bool {
        self.text() == other.text()
    }
}

impl Eq for Reason {}

impl PartialOrd for Reason {
    fn partial_cmp(&self, other: &Reason) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Reason {
    fn cmp(&self, other: &Reason) -> std::cmp::Ordering {
        self.text().cmp(&other.text())
    }
}

/// Every reason a rule could not be decided for a scope, in the order found. The JSON's `reason`
/// is their words joined by `; `; read back, that text is one [`Reason::Text`].
#[derive(Debug, Clone, Default)]
pub struct Reasons(pub Vec<Reason>);

impl Reasons {
    /// The words of the reasons up to the first one's detail (`metric missing in the window`):
    /// what the briefs name a reason by.
    pub fn brief(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        for r in &self.0 {
            match r.head() {
                Some(head) => {
                    out.push(head);
                    break;
                }
                None => out.push(r.text()),
            }
        }
        out.join("; ")
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Reason> {
        self.0.iter()
    }
}

impl std::fmt::Display for Reasons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.iter().map(Reason::text).collect::<Vec<_>>().join("; "))
    }
}

impl From<Vec<Reason>> for Reasons {
    fn from(v: Vec<Reason>) -> Reasons {
        Reasons(v)
    }
}

impl From<&str> for Reasons {
    fn from(text: &str) -> Reasons {
        Reasons(vec![Reason::Text(text.to_string())])
    }
}

impl From<String> for Reasons {
    fn from(text: String) -> Reasons {
        Reasons(vec![Reason::Text(text)])
    }
}

impl PartialEq for Reasons {
    fn eq(&self, other: &Reasons) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Reasons {}

impl PartialOrd for Reasons {
    fn partial_cmp(&self, other: &Reasons) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// In the order of their words, as the report has always sorted them.
impl Ord for Reasons {
    fn cmp(&self, other: &Reasons) -> std::cmp::Ordering {
        self.to_string().cmp(&other.to_string())
    }
}

impl Serialize for Reasons {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Reasons {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Reasons, D::Error> {
        String::deserialize(d).map(Reasons::from)
    }
}
