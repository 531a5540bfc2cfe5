//! Signals: named measurements over a window (P95 TTFT, preemption rate, KV-cache peak, ...).
//!
//! Signals are declared in `rules/*.toml`; this module turns a declaration into PromQL. It is the only
//! place PromQL is written. A declaration names metric *families* with alternatives for different vLLM
//! versions; [`resolve`] picks, per window, the first alternative present in the data (also trying the
//! `vllm_` spelling that OpenTelemetry pipelines produce), so a fleet mid-upgrade still gets an answer.
//! Aggregation happens in PromQL (`sum by (model_name)`), so the number of queries does not grow with
//! the number of replicas, nor does the size of the answers, except the per-replica reads: an
//! outlier's (see [`Reduction::Outlier`]; over a histogram, one series per replica and bucket, from
//! which explain also takes the scope's quantiles of that histogram), a spread's, and the fleet's
//! labels ([`fleet_labels_query`]), one row per engine.

//!
//! The module is in five parts: the declarations and how a declaration is resolved against the
//! names present (here), the signal kinds (`kinds/`: one module per kind, each with its fields,
//! checks and PromQL, behind the [`Kind`] trait), the PromQL the kinds share and the queries
//! explain builds around them (`promql.rs`), the reads the stages make beyond the rules' signals,
//! asked by typed request ([`queries`]), and histogram bucket bounds: where a target falls among
//! them and how a burn rate is read from bucket rates (`bounds.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::prom::Selector;

mod bounds;
mod kinds;
mod promql;
pub mod queries;
mod role;
#[cfg(test)]
mod tests;

pub use bounds::*;
pub use kinds::*;
pub use promql::*;
pub use role::{HopRole, Role, Sizing};

/// How an outlier's per-replica answer is reduced (see [`Reduction::Outlier`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutlierReading {
    pub measure: OutlierMeasure,
    /// Over a histogram: the fewest observations a replica needs in the window for its quantile to
    /// be compared (0 for a gauge), and the window's length in seconds to count them over.
    pub min_observations: u32,
    pub range_seconds: u64,
    /// Ranks inside each replica are compared (see [`Outlier`]'s `ranks`).
    pub ranks: bool,
}

/// The label vLLM gives each data-parallel rank (engine core) of one server.
pub const RANK_LABEL: &str = "engine";

/// How per-replica answers become one value per scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// The worst replica over (or minus) the median of the others, per scope; the replica it names
    /// is the culprit. The query ([`SignalQueries::value`]) computes it in PromQL; explain sends
    /// [`SignalQueries::fetch`] instead (one series per replica, read once) and reduces it itself,
    /// as the PromQL would (`topk`, then `quantile(0.5, ...)` of the others), except that over a
    /// histogram it leaves out replicas with too few observations to estimate a quantile.
    Outlier(OutlierReading),
    /// How many replicas came back; a lone one is named. A scope with none is 0.
    Count,
    /// The largest replica's value per scope, as `max by (G)` of the answer computes it; that
    /// replica is named where its value is above 0 (a router's worker held out longest).
    Max,
}

/// The run's replica label (`--replica-label`, `instance` by default).
pub const RUN_REPLICA_LABEL: &str = "$replica";

/// A signal as declared.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalDef {
    pub id: String,
    /// The title the reports print: as written, with its fixed range after it (`P95 queue time
    /// (last 5 min)`), see [`SignalDef::titled`].
    pub title: String,
    /// The title as written in the rule file.
    pub bare_title: String,
    pub unit: String,
    pub description: String,
    pub kind: SignalKind,
    /// A fixed range instead of the window's length (`5m`: "at the end of the window").
    pub range: Option<Duration>,
    /// Absence means "none": a missing metric or a scope without series counts as no events (a
    /// comparison on it is false), not as unknown. For feature metrics (speculative decoding, KV
    /// connectors) whose absence means the feature is off.
    pub optional: bool,
    /// The fixed range must lie inside the window under diagnosis: a window shorter than it reads
    /// the signal over the window instead (the short window of an SLO burn-rate pair, so an incident
    /// that ended before the window cannot keep the burn alert alive).
    pub within_window: bool,
    /// Its reading over the window's last minutes: another signal, of the same kind and unit, with
    /// a fixed `range` inside the window. A rule with `recent = true` is also decided with this
    /// reading in place of the whole window's, against the same baseline.
    pub recent: Option<String>,
    /// The direction in which a change of this signal hurts (latency up, a hit ratio down). Set,
    /// the signal is watched for changes no rule explains (`src/explain/moved.rs`).
    pub worse: Option<Worse>,
    /// The smallest change, in the signal's unit, that counts as one (a queue of less than one
    /// request, a tenth of a second more TTFT, is not a change worth listing). 0 when not set.
    pub moved_floor: f64,
    /// A symptom users feel (latency, queueing): any warning or critical finding on its scope
    /// explains its change. Other signals are explained only by a finding whose evidence reads the
    /// same metric family.
    pub symptom: bool,
    /// Read only for the changes no rule explains (no rule reads it): its family is asked only
    /// where discovery found it.
    pub spare: bool,
    /// Also watched replica by replica (each replica against its own baseline), as the rules
    /// compare replicas on it: one replica's change is diluted in its model's value.
    pub watch_replicas: bool,
    /// What a stage beside the rules reads it as (`role = "hop.queue"`): see [`Role`].
    pub role: Option<Role>,
    /// The change events that date a finding this signal decides (`dated_by = ["target-down"]`):
    /// a count of targets down or gone has no trend to date it, the first such event on the
    /// finding's scope in the window does.
    pub dated_by: Vec<crate::report::EventKind>,
    /// Where it was declared (`rules/signals.toml:12`), for errors.
    pub origin: String,
    /// Its kind's fields as written, when they name a route list (`$routes.user`): read again
    /// once every file is in, so that a later file's `[routes]` applies to it.
    pub raw_kind: Option<toml::Table>,
}

/// The direction in which a signal's change hurts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Worse {
    Up,
    Down,
}

impl SignalDef {
    /// The range the signal is read over when the window under diagnosis lasts `window`.
    pub fn range_in(&self, window: Duration) -> Duration {
        match self.range {
            Some(r) if self.within_window => r.min(window),
            Some(r) => r,
            None => window,
        }
    }

    /// The title a signal read over a fixed `range` prints, worded here once: `P95 queue
    /// time (last 5 min)`.
    pub fn titled(bare: &str, range: Option<Duration>) -> String {
        match range {
            Some(r) => format!("{bare} (last {})", span(r)),
            None => bare.to_string(),
        }
    }

    /// Its title over a window of `window`: where the window is shorter than its range, it was read
    /// over the whole window and says so (`P95 queue time (the whole window, under 5 min)`).
    pub fn title_in(&self, window: Duration) -> String {
        match self.range {
            Some(r) if self.clamped_in(window) => format!("{} (the whole window, under {})", self.bare_title, span(r)),
            _ => self.title.clone(),
        }
    }

    /// True when the signal's range was shortened to fit the window.
    pub fn clamped_in(&self, window: Duration) -> bool {
        self.within_window && self.range.is_some_and(|r| r > window)
    }
}

/// `5 min`, `1 h`, `90 s`.
fn span(d: Duration) -> String {
    match d.as_secs() {
        s if s % 3600 == 0 => format!("{} h", s / 3600),
        s if s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// The metric families a signal needs, each as its list of alternatives (in preference order).
/// Names are series names as stored (`..._bucket` for histograms).
pub fn required_series(kind: &SignalKind) -> Vec<Vec<String>> {
    kind.kind().required_series()
}

/// Every spelling a declared name may have in storage: as declared, with `vllm_` for `vllm:`
/// (OpenTelemetry pipelines), and counters without `_total`.
pub fn spellings(name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    if let Some(rest) = name.strip_prefix("vllm:") {
        out.push(format!("vllm_{rest}"));
    }
    for n in out.clone() {
        if let Some(stem) = n.strip_suffix("_total") {
            out.push(stem.to_string());
        }
    }
    out
}

/// Pick the first alternative (in any spelling) present in `present`.
pub fn pick<'a>(alternatives: &[String], present: &'a BTreeSet<String>) -> Option<&'a String> {
    alternatives.iter().flat_map(|a| spellings(a)).find_map(|s| present.get(&s))
}

/// The metric chosen for each required family, or the families that are missing.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// One chosen series name per entry of [`required_series`].
    pub names: Vec<String>,
}

/// Resolve a signal's families against the names present in one window.
pub fn resolve(kind: &SignalKind, present: &BTreeSet<String>) -> Result<Resolved, Vec<String>> {
    let mut names = Vec::new();
    let mut missing = Vec::new();
    for alts in required_series(kind) {
        match pick(&alts, present) {
            Some(n) => names.push(n.clone()),
            None => missing.push(alts.join(" / ")),
        }
    }
    if missing.is_empty() {
        Ok(Resolved { names })
    } else {
        Err(missing)
    }
}

/// Everything a query needs besides the signal itself. Planning clones it for every signal, so
/// the two maps are shared (`Arc`) rather than copied each time.
#[derive(Debug, Clone)]
pub struct QueryContext {
    pub selector: Selector,
    pub group_by: Vec<String>,
    /// The window's length (the range of every `[...]`).
    pub range: Duration,
    /// Named thresholds, for signals whose query embeds one (SLO targets).
    pub thresholds: std::sync::Arc<std::collections::BTreeMap<String, f64>>,
    /// The bucket bounds found in the data, by stored bucket series name, for signals that read a
    /// bucket at a target. A histogram missing here is read at the target by value.
    pub buckets: std::sync::Arc<std::collections::BTreeMap<String, Vec<Bound>>>,
    /// What a signal's `replica_label = "$replica"` (the default) stands for.
    pub replica_label: String,
}

/// The stem of a stored histogram series name: `x_bucket` / `x_sum` -> `x`.
fn family_of(series: &str) -> &str {
    series.strip_suffix("_bucket").or_else(|| series.strip_suffix("_sum")).or_else(|| series.strip_suffix("_count")).unwrap_or(series)
}

/// Resolve a quantity or `$name` against the thresholds.
fn quantity(text: &str, thresholds: &std::collections::BTreeMap<String, f64>) -> Result<f64, String> {
    let t = text.trim();
    if let Some(name) = t.strip_prefix('$') {
        return thresholds.get(name).copied().ok_or_else(|| format!("threshold ${name} is not defined"));
    }
    crate::units::parse_quantity(t)
}
