//! The signal kinds: one module per kind, each with its declaration's fields (a struct, read from
//! a `[[signal]]` table) and its [`Kind`] implementation: the checks its fields get at load, the
//! metric families it needs, its PromQL, and how explain reads it where it differs from most.
//! [`SignalKind`] is the declaration's `kind`, one newtype variant per kind, and
//! [`SignalKind::kind`] is the one place that dispatches on it.
//!
//! Adding a kind: its file here (struct and `impl Kind`), its `mod` line, its variant in
//! [`SignalKind`] and its arm in [`SignalKind::kind`].

use serde::Deserialize;

use super::*;

mod active_share;
mod fill;
mod gauge;
mod give_ups;
mod mean;
mod outlier;
mod quantile;
mod queue_wait;
mod rate;
mod ratio;
mod remainder;
mod replicas_over;
mod router;
mod slo_burn;
mod slope;
mod spread;
mod stall_share;
mod vanished;

pub use active_share::ActiveShare;
pub use fill::Fill;
pub use gauge::{across_query, Across, Gauge, GaugeParts, GaugeRef, OverTime};
pub use give_ups::GiveUps;
pub use mean::Mean;
pub use outlier::{Outlier, OutlierMeasure};
pub use quantile::Quantile;
pub use queue_wait::QueueWait;
pub use rate::Rate;
pub use ratio::{CounterRef, Ratio};
pub use remainder::Remainder;
pub use replicas_over::ReplicasOver;
pub use router::{Router, RouterMeasure};
pub use slo_burn::SloBurn;
pub use slope::Slope;
pub use spread::Spread;
pub use stall_share::StallShare;
pub use vanished::Vanished;

/// How a signal is computed: the declaration's `kind` and the fields of that kind.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SignalKind {
    Quantile(Quantile),
    Rate(Rate),
    Ratio(Ratio),
    Mean(Mean),
    Remainder(Remainder),
    Gauge(Gauge),
    ActiveShare(ActiveShare),
    StallShare(StallShare),
    QueueWait(QueueWait),
    GiveUps(GiveUps),
    Slope(Slope),
    Spread(Spread),
    Fill(Fill),
    Outlier(Outlier),
    SloBurn(SloBurn),
    Router(Router),
    Vanished(Vanished),
    ReplicasOver(ReplicasOver),
}

impl SignalKind {
    /// The kind behind the declaration: everything else asks it.
    pub fn kind(&self) -> &dyn Kind {
        match self {
            SignalKind::Quantile(k) => k,
            SignalKind::Rate(k) => k,
            SignalKind::Ratio(k) => k,
            SignalKind::Mean(k) => k,
            SignalKind::Remainder(k) => k,
            SignalKind::Gauge(k) => k,
            SignalKind::ActiveShare(k) => k,
            SignalKind::StallShare(k) => k,
            SignalKind::QueueWait(k) => k,
            SignalKind::GiveUps(k) => k,
            SignalKind::Slope(k) => k,
            SignalKind::Spread(k) => k,
            SignalKind::Fill(k) => k,
            SignalKind::Outlier(k) => k,
            SignalKind::SloBurn(k) => k,
            SignalKind::Router(k) => k,
            SignalKind::Vanished(k) => k,
            SignalKind::ReplicasOver(k) => k,
        }
    }
}

/// One signal kind: what a declaration of it needs checked, read and written as PromQL. The
/// default methods are what most kinds share.
pub trait Kind {
    /// The checks its fields get at load, beyond their types (an error says what to fix, and is
    /// put after `signal ID: `).
    fn validate(&self) -> Result<(), String>;

    /// The metric families it needs, each as its list of alternatives (in preference order).
    /// Names are series names as stored (`..._bucket` for histograms). See [`required_series`].
    fn required_series(&self) -> Vec<Vec<String>>;

    /// Its PromQL for one window, the families resolved (see [`build`]).
    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String>;

    /// How it reads its histogram's buckets, if it reads a histogram by its buckets (see
    /// [`histogram_of`]).
    fn histogram_use(&self) -> Option<HistogramUse> {
        None
    }

    /// Stored bucket series it needs the bounds of (every spelling of every alternative).
    fn bucket_series(&self) -> Vec<String> {
        Vec::new()
    }

    /// Said once per histogram when a target is read between buckets (see [`bucket_note`]).
    fn bucket_note(&self, _resolved: &Resolved, _ctx: &QueryContext) -> Option<String> {
        None
    }

    /// Its reading from its histogram's bucket rates, for an SLO burn rate (see
    /// [`burn_from_buckets`]).
    fn burn_from_buckets(&self, _resolved: &Resolved, _ctx: &QueryContext) -> Result<Option<BurnFromBuckets>, String> {
        Ok(None)
    }

    /// The fewest observations a scope needs for its value to be more than low confidence.
    fn min_observations(&self) -> Option<f64> {
        None
    }

    /// What an answer with nothing for any scope says, over a metric present in the data.
    fn when_empty(&self) -> WhenEmpty {
        WhenEmpty::MayBe
    }

    /// Its query can simply be grouped by replica as well (the follow-ups' replica breakdown).
    fn replica_breakdown(&self) -> bool {
        false
    }

    /// Its fields that may name a threshold (`$ttft_target`), as written, with what they are to it
    /// and the unit the threshold must be in.
    fn threshold_fields(&self) -> Vec<ThresholdField<'_>> {
        Vec::new()
    }
}

/// How a signal reads its histogram's bucket rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HistogramUse {
    /// A quantile per scope.
    Quantile(f64),
    /// A quantile per replica (an outlier over a histogram).
    ReplicaQuantile(f64),
    /// An SLO burn rate: the buckets at or under a target over all.
    Burn,
}

/// What an answer with no series for any scope says of a signal whose metric is in the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenEmpty {
    /// Nothing: it may be empty for an idle fleet (0/0 of a mean or a ratio), or because a join
    /// matched nothing.
    MayBe,
    /// It could not be read: a counter's rate is 0 for an idle scope, never nothing.
    Unread,
    /// It could not be read unless its observation counts came back (a quantile keeps its count,
    /// zero for an idle model).
    UnreadWithoutCounts,
}

/// A field of a signal that may name a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThresholdField<'a> {
    /// As written: a quantity, or `$name`.
    pub text: &'a str,
    /// What it is to the signal (`latency target`).
    pub what: &'static str,
    /// The unit a threshold it names must be in.
    pub unit: &'static str,
}

/// An error when a field that lists metric names lists none.
fn nonempty(v: &[String], what: &str) -> Result<(), String> {
    if v.is_empty() {
        Err(format!("`{what}` needs at least one metric name"))
    } else {
        Ok(())
    }
}

/// A `match` field's matchers, an error prefixed with `what` (`match: ...`).
fn check_match(m: &str, what: &str) -> Result<(), String> {
    parse_match(m).map(|_| ()).map_err(|e| format!("{what}: {e}"))
}

/// A `match` field's matchers, for a query.
fn matchers(m: &str) -> Result<Vec<crate::prom::Matcher>, String> {
    parse_match(m).map_err(|e| e.to_string())
}

/// The stored series names of a histogram's alternatives with `suffix` (`_bucket`, `_sum`).
fn hist(h: &[String], suffix: &str) -> Vec<String> {
    h.iter().map(|n| format!("{n}{suffix}")).collect()
}

/// `v` with an anchor gauge's alternatives last, where the signal has one (`attribute_via`).
fn with_anchor(mut v: Vec<Vec<String>>, anchor: &[String]) -> Vec<Vec<String>> {
    if !anchor.is_empty() {
        v.push(anchor.to_vec());
    }
    v
}

/// A query with nothing but its value.
fn plain(value: String) -> SignalQueries {
    SignalQueries { value, fetch: None, count: None, per_replica: None, parts: None, sums: Vec::new() }
}

/// A value computed from `reads` by `how` (see [`SignalQueries::parts`]).
fn with_parts(value: String, how: Combine, reads: Vec<String>) -> SignalQueries {
    SignalQueries { parts: Some((how, reads)), ..plain(value) }
}

/// A sum read as PromQL, with its description.
fn summed(read: SumRead, ctx: &QueryContext) -> (String, SumRead) {
    (read.promql(&ctx.selector, &ctx.group_by), read)
}

/// A declared `replica_label`, `$replica` standing for the run's.
fn replica(declared: &String, ctx: &QueryContext) -> Result<String, String> {
    let l = if declared == RUN_REPLICA_LABEL { &ctx.replica_label } else { declared };
    if crate::prom::is_label_name(l) {
        Ok(l.clone())
    } else {
        Err(format!("replica_label {l:?} is not a label name"))
    }
}

/// The labels an attributed counter or gauge is joined to its anchor on, by default.
pub(super) fn default_join() -> Vec<String> {
    vec!["instance".to_string(), "job".to_string()]
}

fn default_replica_label() -> String {
    RUN_REPLICA_LABEL.to_string()
}

/// Every spelling of the bucket series of a histogram's alternatives (for their bounds).
fn bucket_spellings(histogram: &[String]) -> Vec<String> {
    histogram.iter().flat_map(|h| spellings(&format!("{h}_bucket"))).collect()
}
