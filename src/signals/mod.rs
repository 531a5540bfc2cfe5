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
//! The module is in three parts: the declarations and how a declaration is resolved against the
//! names present (here), the PromQL each signal is read with (`promql.rs`), and histogram bucket
//! bounds: where a target falls among them and how a burn rate is read from bucket rates
//! (`bounds.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use crate::prom::Selector;

mod bounds;
mod promql;
#[cfg(test)]
mod tests;

pub use bounds::*;
pub use promql::*;

/// How a signal is computed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SignalKind {
    /// `histogram_quantile(q, ...)` over a histogram family (name without `_bucket`).
    Quantile {
        quantile: f64,
        histogram: Vec<String>,
        #[serde(default = "default_min_observations")]
        min_observations: f64,
    },
    /// Per-second rate of a counter (names with `_total`), summed over the scope.
    Rate {
        counter: Vec<String>,
        #[serde(default)]
        r#match: String,
        #[serde(default)]
        attribute_via: Vec<String>,
        #[serde(default = "default_join")]
        join_on: Vec<String>,
    },
    /// Rate of one counter over another (a share: 5xx over all, aborted over finished). With `per`,
    /// that ratio divided by a gauge averaged over time, engine by engine (replica and `engine`
    /// label) where the gauge stayed at `per_at_least` or more throughout (below it, no value: a
    /// gauge sampled at 0, 1 or 2 measures no level; a range across a change of load mixes two),
    /// then averaged over the scope: generated tokens per engine step per running request.
    Ratio {
        numerator: CounterRef,
        denominator: CounterRef,
        #[serde(default)]
        per: Vec<String>,
        #[serde(default)]
        per_at_least: f64,
        /// For counters that lack the grouping label (http_requests_total, DCGM): a vLLM gauge whose
        /// series map the `join_on` labels to the grouping label.
        #[serde(default)]
        attribute_via: Vec<String>,
        #[serde(default = "default_join")]
        join_on: Vec<String>,
    },
    /// Mean of a histogram (`_sum` over `_count`): e.g. mean prompt length. `model_label`: a
    /// gateway's label that names the model where vLLM's says `model_name` (Dynamo's frontend says
    /// `model`), copied into `model_name` when the run groups by it.
    Mean {
        histogram: Vec<String>,
        #[serde(default)]
        model_label: String,
    },
    /// The mean of one histogram less the means of others, each `_sum` over `_count`: what of a
    /// duration the others do not account for (TTFT less queue time less prefill time is input
    /// processing and the API server). Each of `minus` is one family's list of alternatives.
    Remainder { histogram: Vec<String>, minus: Vec<Vec<String>> },
    /// A gauge reduced over time (`max`, `avg`, `min`, `last`) then across the scope's series.
    Gauge {
        gauge: Vec<String>,
        over_time: OverTime,
        across: Across,
        #[serde(default)]
        r#match: String,
        #[serde(default)]
        attribute_via: Vec<String>,
        #[serde(default = "default_join")]
        join_on: Vec<String>,
        /// Tie series to their scope through the anchor's series in the window or as long before
        /// it, not only in the window: a target that stopped serving before the window and has
        /// failed its scrapes since (`up` 0, no vLLM series left) is still its model's.
        #[serde(default)]
        attribute_before: bool,
        /// Another gauge taken off this one per scope where it exists (nothing where it does not):
        /// the requests of `num_requests_waiting` that `num_requests_waiting_by_reason` says were
        /// deferred for something other than capacity. Named as declared (its `vllm_` spelling is
        /// not tried) and not required: a fleet without it reads the gauge whole.
        #[serde(default)]
        less: Option<GaugeRef>,
        /// The gauge is a bitmask (DCGM's clocks-event reasons): each sample reads 1 where any of
        /// these bits is set and 0 where none is, before `over_time` (so `avg` is the share of the
        /// window with one of them set, `max` whether any sample had one). Read through a subquery
        /// at the trend step: a maximum of raw bitmasks would lose bits (0x100 hides 0x8).
        #[serde(default)]
        bits: Vec<u32>,
        /// Another gauge of the same exporter (the same labels) that this one is divided by, series
        /// by series, before reducing across the scope: power draw over its limit.
        #[serde(default)]
        over: Option<String>,
        /// Each series multiplied by this before reducing across the scope (a counter of
        /// microseconds read as a share of time: 0.000001).
        #[serde(default)]
        scale: Option<f64>,
    },
    /// The share of the window during which a counter was increasing (0..1): "sustained" preemptions.
    ActiveShare { counter: Vec<String> },
    /// The share of the window during which a replica held requests (running or waiting) while its
    /// counter (generated tokens) rose by less than `below` per second: a stalled engine. The worst
    /// replica's share. A target down has no series, so its steps do not count.
    StallShare {
        counter: Vec<String>,
        running: Vec<String>,
        waiting: Vec<String>,
        #[serde(default = "default_stall_below")]
        below: f64,
        #[serde(default = "default_replica_label")]
        replica_label: String,
    },
    /// The mean time a request waits, by Little's law: requests waiting (a gauge, averaged over the
    /// window and summed over the scope) divided by requests completed per second (a counter). It
    /// stands in for queue-time histograms where only gauges and counters are kept.
    QueueWait { gauge: Vec<String>, counter: Vec<String> },
    /// Requests the clients gave up on that the engine counted nowhere, estimated: requests that got
    /// their first token (`started`, a histogram's `_count`: TTFT) less requests that finished
    /// (`finished`, a counter), less the most that could still be under way at the window's end
    /// (`running`, a gauge: its highest level in the window, summed over the scope), per second and
    /// never below 0. vLLM V1 records a request's TTFT when its first token leaves the engine, and
    /// a stream the client closes ends as no finished request at all in some versions (no
    /// `finished_reason="abort"`, HTTP 200). With `share`, that rate over itself plus the finished
    /// rate: the share of requests given up.
    GiveUps {
        started: Vec<String>,
        finished: Vec<String>,
        running: Vec<String>,
        #[serde(default)]
        share: bool,
    },
    /// How fast a gauge climbs, per hour (linear regression over the window), averaged over replicas.
    Slope {
        gauge: Vec<String>,
        #[serde(default)]
        r#match: String,
    },
    /// How uneven a counter's rate is across replicas: the busiest replica over the mean of all
    /// (with `least`, the least served one over the mean: a replica that gets nothing reads 0).
    Spread {
        counter: Vec<String>,
        #[serde(default = "default_replica_label")]
        replica_label: String,
        #[serde(default)]
        least: bool,
    },
    /// How close a gauge stays to its own peak: mean over the window divided by the maximum, per
    /// replica, averaged (1.0 = pinned at its ceiling the whole time).
    Fill { gauge: Vec<String> },
    /// One replica against its peers: the worst replica's value over the median of the others (or,
    /// with `measure = "gap"`, minus it: how far apart they are in the signal's own unit). The
    /// replica is named in the finding. Over a histogram, a replica with fewer than
    /// `min_observations` in the window has no quantile worth comparing and is left out.
    Outlier {
        #[serde(default)]
        histogram: Vec<String>,
        #[serde(default)]
        gauge: Vec<String>,
        #[serde(default = "default_quantile")]
        quantile: f64,
        #[serde(default = "default_replica_label")]
        replica_label: String,
        #[serde(default)]
        measure: OutlierMeasure,
        #[serde(default = "default_replica_observations")]
        min_observations: u32,
        /// Compare the data-parallel ranks (`engine`) inside each replica instead of the replicas:
        /// the worst rank against the median of its replica's other ranks, the replica where that
        /// is largest named with its rank. Gauges only.
        #[serde(default)]
        ranks: bool,
    },
    /// Error-budget burn rate of a latency objective: the share of observations above `target` (read
    /// from the histogram bucket at the target, or interpolated between the two around it when the
    /// bounds found in the data have none there) divided by the budget `1 - objective`.
    SloBurn {
        histogram: Vec<String>,
        /// A quantity (`500ms`) or a named threshold (`$ttft_target`).
        target: String,
        /// A fraction (`0.99`, `99%`) or a named threshold.
        objective: String,
    },
    /// A router's family, attributed to the models its workers serve. vllm-router's series carry
    /// no model label: a worker-level family names the worker by its URL (`worker_label`,
    /// `http://host:port`), joined to the engines' `instance` (`engines`, a vLLM gauge) through its
    /// host:port; a router-level family (no `worker_label`) goes to every model the router's workers
    /// (`workers`, a worker-level gauge every router exports) serve. See `router_query`.
    Router {
        measure: RouterMeasure,
        family: Vec<String>,
        /// The denominator's family of a `ratio` (router-level).
        #[serde(default)]
        denominator: Vec<String>,
        /// Matchers on `family` (`outcome="failure"`).
        #[serde(default)]
        r#match: String,
        #[serde(default)]
        worker_label: String,
        /// The value `held_out` counts (`vllm_router_cb_state` 1: open; `vllm_router_worker_health` 0).
        #[serde(default)]
        equals: f64,
        #[serde(default = "default_router_workers")]
        workers: Vec<String>,
        #[serde(default = "default_router_engines")]
        engines: Vec<String>,
    },
    /// Replicas (series of a gauge) that reported during the window but no longer at its end: the
    /// value is how many, and a lone one is named in the finding.
    Vanished {
        gauge: Vec<String>,
        #[serde(default = "default_replica_label")]
        replica_label: String,
    },
    /// Replicas whose gauge exceeded `above` at some point in the window: how many, and a lone one
    /// is named. With `attribute_via`, for exporters without the grouping label (DCGM).
    ReplicasOver {
        gauge: Vec<String>,
        above: f64,
        #[serde(default = "default_replica_label")]
        replica_label: String,
        #[serde(default)]
        attribute_via: Vec<String>,
        #[serde(default = "default_join")]
        join_on: Vec<String>,
        /// As a gauge's `bits`: the bitmask's samples read 1 where one of these bits is set.
        #[serde(default)]
        bits: Vec<u32>,
        /// Labels of the gauge's own series that the finding also names (a GPU's `UUID` and
        /// `Hostname`), where the series carry them.
        #[serde(default)]
        name_by: Vec<String>,
    },
}

/// What a [`SignalKind::Router`] signal reads of its family, per model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterMeasure {
    /// A router-level histogram's mean (`_sum` over `_count`).
    Mean,
    /// A router-level histogram's mean over the mean of an engine histogram (`denominator`) for
    /// the same scope: how the router's time per request compares with the engines' own.
    OverEngineMean,
    /// A router-level counter's rate over `denominator`'s (0 where the counter has no series).
    Ratio,
    /// A worker-level counter's rate, summed over the model's workers.
    Rate,
    /// A worker-level counter's busiest worker over the mean of the model's workers.
    Spread,
    /// An engine gauge (`engines`) summed per engine instance, averaged over the instances a
    /// worker-level family lists as its workers in the window (the prefill pool: the workers of
    /// `vllm_router_pd_prefill_requests_total`). A pool none of whose workers is an engine that
    /// reported has no value.
    PoolMean,
    /// The largest share of the window one of the model's workers read `equals` (a circuit held
    /// open, a worker marked unhealthy), read at the trends' step; only workers whose engine
    /// reported in the window count (an engine that is down is `target-down`'s).
    HeldOut,
}

fn default_router_workers() -> Vec<String> {
    vec!["vllm_router_worker_health".to_string()]
}

fn default_router_engines() -> Vec<String> {
    vec!["vllm:num_requests_running".to_string()]
}

/// What an outlier signal says of the worst replica against the median of the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutlierMeasure {
    /// How many times the median it is (a factor).
    #[default]
    Ratio,
    /// How far above the median it is, in the signal's unit: a ratio of two near-empty gauges or
    /// of two fast latencies is large while the difference means nothing.
    Gap,
}

/// How an outlier's per-replica answer is reduced (see [`Reduction::Outlier`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutlierReading {
    pub measure: OutlierMeasure,
    /// Over a histogram: the fewest observations a replica needs in the window for its quantile to
    /// be compared (0 for a gauge), and the window's length in seconds to count them over.
    pub min_observations: u32,
    pub range_seconds: u64,
    /// Ranks inside each replica are compared (see [`SignalKind::Outlier`]'s `ranks`).
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

fn default_min_observations() -> f64 {
    20.0
}

fn default_join() -> Vec<String> {
    vec!["instance".to_string(), "job".to_string()]
}

/// The run's replica label (`--replica-label`, `instance` by default).
pub const RUN_REPLICA_LABEL: &str = "$replica";

fn default_replica_label() -> String {
    RUN_REPLICA_LABEL.to_string()
}

fn default_quantile() -> f64 {
    0.95
}

/// A P95 from fewer than 20 observations is one of the few slowest requests, not a quantile.
fn default_replica_observations() -> u32 {
    20
}

/// One gauge and the series of it to read (`Gauge::less`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GaugeRef {
    pub gauge: String,
    #[serde(default)]
    pub r#match: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterRef {
    pub counter: Vec<String>,
    #[serde(default)]
    pub r#match: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverTime {
    Max,
    Avg,
    Min,
    Last,
    /// A counter's per-second rate, series by series (DCGM's violation counters: microseconds
    /// spent throttled per second), before reducing across the scope.
    Rate,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Across {
    Max,
    Sum,
    Avg,
    Min,
}

/// A signal as declared.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalDef {
    pub id: String,
    pub title: String,
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
    /// Where it was declared (`rules/signals.toml:12`), for errors.
    pub origin: String,
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

    /// True when the signal's range was shortened to fit the window.
    pub fn clamped_in(&self, window: Duration) -> bool {
        self.within_window && self.range.is_some_and(|r| r > window)
    }
}

/// The metric families a signal needs, each as its list of alternatives (in preference order).
/// Names are series names as stored (`..._bucket` for histograms).
pub fn required_series(kind: &SignalKind) -> Vec<Vec<String>> {
    let hist = |h: &Vec<String>, suffix: &str| h.iter().map(|n| format!("{n}{suffix}")).collect::<Vec<_>>();
    let with_anchor = |mut v: Vec<Vec<String>>, anchor: &Vec<String>| {
        if !anchor.is_empty() {
            v.push(anchor.clone());
        }
        v
    };
    match kind {
        SignalKind::Quantile { histogram, .. } | SignalKind::SloBurn { histogram, .. } => vec![hist(histogram, "_bucket")],
        SignalKind::Mean { histogram, .. } => vec![hist(histogram, "_sum")],
        SignalKind::Router { measure, family, denominator, worker_label, workers, engines, .. } => {
            // A ratio needs only its denominator: vLLM's router creates a counter's series at its
            // first event (no retry yet: no `vllm_router_retries_total`), which reads as 0.
            let mut v = vec![match measure {
                RouterMeasure::Mean | RouterMeasure::OverEngineMean => hist(family, "_sum"),
                RouterMeasure::Ratio => denominator.clone(),
                _ => family.clone(),
            }];
            // The engines' histogram an `over_engine_mean` divides by, before the workers and
            // engines (router_query reads those from the end).
            if *measure == RouterMeasure::OverEngineMean {
                v.push(hist(denominator, "_sum"));
            }
            if worker_label.is_empty() {
                v.push(workers.clone());
            }
            v.push(engines.clone());
            v
        }
        SignalKind::Remainder { histogram, minus } => std::iter::once(histogram).chain(minus).map(|h| hist(h, "_sum")).collect(),
        SignalKind::Rate { counter, attribute_via, .. } => with_anchor(vec![counter.clone()], attribute_via),
        SignalKind::Ratio { numerator, denominator, attribute_via, per, .. } => {
            let mut v = vec![numerator.counter.clone()];
            if denominator.counter != numerator.counter {
                v.push(denominator.counter.clone());
            }
            if !per.is_empty() {
                v.push(per.clone());
            }
            with_anchor(v, attribute_via)
        }
        SignalKind::Gauge { gauge, attribute_via, over, .. } => {
            let mut v = vec![gauge.clone()];
            v.extend(over.iter().map(|o| vec![o.clone()]));
            with_anchor(v, attribute_via)
        }
        SignalKind::ActiveShare { counter } | SignalKind::Spread { counter, .. } => vec![counter.clone()],
        SignalKind::QueueWait { gauge, counter } => vec![gauge.clone(), counter.clone()],
        SignalKind::GiveUps { started, finished, running, .. } => vec![hist(started, "_count"), finished.clone(), running.clone()],
        SignalKind::StallShare { counter, running, waiting, .. } => vec![counter.clone(), running.clone(), waiting.clone()],
        SignalKind::Slope { gauge, .. } | SignalKind::Fill { gauge } | SignalKind::Vanished { gauge, .. } => vec![gauge.clone()],
        SignalKind::ReplicasOver { gauge, attribute_via, .. } => with_anchor(vec![gauge.clone()], attribute_via),
        SignalKind::Outlier { histogram, gauge, .. } => {
            if histogram.is_empty() { vec![gauge.clone()] } else { vec![hist(histogram, "_bucket")] }
        }
    }
}

/// Every spelling a declared name may have in storage: as declared, with `vllm_` for `vllm:`
/// (OpenTelemetry pipelines), and counters without `_total`.
/// Generated tokens per second under which an engine holding requests counts as stalled: what
/// `throughput-stall` calls stalled (`stall_tokens_per_second`).
fn default_stall_below() -> f64 {
    1.0
}

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
    series
        .strip_suffix("_bucket")
        .or_else(|| series.strip_suffix("_sum"))
        .or_else(|| series.strip_suffix("_count"))
        .unwrap_or(series)
}

/// Resolve a quantity or `$name` against the thresholds.
fn quantity(text: &str, thresholds: &std::collections::BTreeMap<String, f64>) -> Result<f64, String> {
    let t = text.trim();
    if let Some(name) = t.strip_prefix('$') {
        return thresholds.get(name).copied().ok_or_else(|| format!("threshold ${name} is not defined"));
    }
    crate::units::parse_quantity(t)
}
