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

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use crate::prom::{MatchOp, Matcher, Selector};

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
    /// Rate of one counter over another (a share: 5xx over all, aborted over finished).
    Ratio {
        numerator: CounterRef,
        denominator: CounterRef,
        /// For counters that lack the grouping label (http_requests_total, DCGM): a vLLM gauge whose
        /// series map the `join_on` labels to the grouping label.
        #[serde(default)]
        attribute_via: Vec<String>,
        #[serde(default = "default_join")]
        join_on: Vec<String>,
    },
    /// Mean of a histogram (`_sum` over `_count`): e.g. mean prompt length.
    Mean { histogram: Vec<String> },
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
    },
    /// The share of the window during which a counter was increasing (0..1): "sustained" preemptions.
    ActiveShare { counter: Vec<String> },
    /// The mean time a request waits, by Little's law: requests waiting (a gauge, averaged over the
    /// window and summed over the scope) divided by requests completed per second (a counter). It
    /// stands in for queue-time histograms where only gauges and counters are kept.
    QueueWait { gauge: Vec<String>, counter: Vec<String> },
    /// How fast a gauge climbs, per hour (linear regression over the window), averaged over replicas.
    Slope {
        gauge: Vec<String>,
        #[serde(default)]
        r#match: String,
    },
    /// How uneven a counter's rate is across replicas: the busiest replica over the mean of all.
    Spread {
        counter: Vec<String>,
        #[serde(default = "default_replica_label")]
        replica_label: String,
    },
    /// How close a gauge stays to its own peak: mean over the window divided by the maximum, per
    /// replica, averaged (1.0 = pinned at its ceiling the whole time).
    Fill { gauge: Vec<String> },
    /// One replica against its peers: the worst replica's value over the median of the others. The
    /// replica is named in the finding.
    Outlier {
        #[serde(default)]
        histogram: Vec<String>,
        #[serde(default)]
        gauge: Vec<String>,
        #[serde(default = "default_quantile")]
        quantile: f64,
        #[serde(default = "default_replica_label")]
        replica_label: String,
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
    },
}

/// How per-replica answers become one value per scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// The worst replica over the median of the others, per scope; the replica it names is the
    /// culprit. The query ([`SignalQueries::value`]) computes it in PromQL; explain sends
    /// [`SignalQueries::fetch`] instead (one series per replica, read once) and reduces it itself,
    /// exactly as the PromQL would (`topk`, then `quantile(0.5, ...)` of the others).
    Outlier,
    /// How many replicas came back; a lone one is named. A scope with none is 0.
    Count,
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
    /// Where it was declared (`rules/signals.toml:12`), for errors.
    pub origin: String,
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
        SignalKind::Mean { histogram } => vec![hist(histogram, "_sum")],
        SignalKind::Rate { counter, attribute_via, .. } => with_anchor(vec![counter.clone()], attribute_via),
        SignalKind::Ratio { numerator, denominator, attribute_via, .. } => {
            let mut v = vec![numerator.counter.clone()];
            if denominator.counter != numerator.counter {
                v.push(denominator.counter.clone());
            }
            with_anchor(v, attribute_via)
        }
        SignalKind::Gauge { gauge, attribute_via, .. } => with_anchor(vec![gauge.clone()], attribute_via),
        SignalKind::ActiveShare { counter } | SignalKind::Spread { counter, .. } => vec![counter.clone()],
        SignalKind::QueueWait { gauge, counter } => vec![gauge.clone(), counter.clone()],
        SignalKind::Slope { gauge, .. } | SignalKind::Fill { gauge } | SignalKind::Vanished { gauge, .. } => vec![gauge.clone()],
        SignalKind::ReplicasOver { gauge, attribute_via, .. } => with_anchor(vec![gauge.clone()], attribute_via),
        SignalKind::Outlier { histogram, gauge, .. } => {
            if histogram.is_empty() { vec![gauge.clone()] } else { vec![hist(histogram, "_bucket")] }
        }
    }
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

/// Everything a query needs besides the signal itself.
#[derive(Debug, Clone)]
pub struct QueryContext {
    pub selector: Selector,
    pub group_by: Vec<String>,
    /// The window's length (the range of every `[...]`).
    pub range: Duration,
    /// Named thresholds, for signals whose query embeds one (SLO targets).
    pub thresholds: std::collections::BTreeMap<String, f64>,
    /// The bucket bounds found in the data, by stored bucket series name, for signals that read a
    /// bucket at a target. A histogram missing here is read at the target by value.
    pub buckets: std::collections::BTreeMap<String, Vec<Bound>>,
    /// What a signal's `replica_label = "$replica"` (the default) stands for.
    pub replica_label: String,
}

/// One histogram bucket bound found in the data, with every way the data writes it (`le="0.5"`).
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub value: f64,
    pub written: Vec<String>,
}

/// The finite bounds among `le` label values, ascending, spellings of one value merged.
pub fn parse_bounds(values: &[String]) -> Vec<Bound> {
    let mut out: Vec<Bound> = Vec::new();
    let mut parsed: Vec<(f64, &String)> =
        values.iter().filter_map(|v| crate::prom::parse_sample_value(v).filter(|x| x.is_finite()).map(|x| (x, v))).collect();
    parsed.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    for (value, text) in parsed {
        match out.last_mut() {
            Some(last) if last.value == value => last.written.push(text.clone()),
            _ => out.push(Bound { value, written: vec![text.clone()] }),
        }
    }
    out
}

/// Where a target falls among a histogram's bounds.
#[derive(Debug, Clone, PartialEq)]
pub enum AtTarget<'a> {
    /// A bucket ends exactly at the target.
    Exact(&'a Bound),
    /// Between two bounds: the share at or under the target is interpolated linearly between them.
    Between(&'a Bound, &'a Bound),
    /// Under the first bound: interpolated between zero and it (histogram_quantile's assumption).
    BelowFirst(&'a Bound),
}

/// Locate `target` among `bounds` (ascending, finite). Above the last finite bound nothing can be
/// read: every observation past it sits in the +Inf bucket.
pub fn bucket_at(bounds: &[Bound], target: f64) -> Result<AtTarget<'_>, String> {
    let close = |b: &Bound| (b.value - target).abs() <= 1e-9 * target.abs().max(1e-12);
    if let Some(b) = bounds.iter().find(|b| close(b)) {
        return Ok(AtTarget::Exact(b));
    }
    let Some(last) = bounds.last() else {
        return Err("the histogram has no finite buckets".into());
    };
    if target > last.value {
        return Err(format!(
            "the target {} is above the histogram's largest finite bucket ({}): the share of observations over it cannot be read",
            crate::units::format_seconds(target),
            crate::units::format_seconds(last.value)
        ));
    }
    match bounds.iter().position(|b| b.value > target) {
        Some(0) if target > 0.0 && bounds[0].value > 0.0 => Ok(AtTarget::BelowFirst(&bounds[0])),
        Some(0) | None => Err(format!("the target {} is outside the histogram's buckets", crate::units::format_seconds(target))),
        Some(i) => Ok(AtTarget::Between(&bounds[i - 1], &bounds[i])),
    }
}

/// An interpolation weight in [0, 1], to six decimals (PromQL literal).
fn weight(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() { "0".into() } else { s.to_string() }
}

/// Said once per histogram when a target is read between buckets: the number is an estimate.
pub fn bucket_note(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Option<String> {
    let SignalKind::SloBurn { target, .. } = kind else { return None };
    let t = quantity(target, &ctx.thresholds).ok()?;
    let series = resolved.names.first()?;
    let bounds = ctx.buckets.get(series)?;
    let fam = family_of(series);
    let s = crate::units::format_seconds;
    match bucket_at(bounds, t).ok()? {
        AtTarget::Exact(_) => None,
        AtTarget::Between(lo, hi) => Some(format!(
            "{fam} has no bucket at the SLO target {}: burn rates interpolate between its {} and {} buckets (an estimate; a bucket at the target makes them exact)",
            s(t),
            s(lo.value),
            s(hi.value)
        )),
        AtTarget::BelowFirst(hi) => Some(format!(
            "{fam} has no bucket at the SLO target {}: burn rates interpolate between 0 and its first bucket, {} (an estimate; a bucket at the target makes them exact)",
            s(t),
            s(hi.value)
        )),
    }
}

/// Stored bucket series a signal needs the bounds of (every spelling of every alternative).
pub fn bucket_series(kind: &SignalKind) -> Vec<String> {
    match kind {
        SignalKind::SloBurn { histogram, .. } | SignalKind::Quantile { histogram, .. } => {
            histogram.iter().flat_map(|h| spellings(&format!("{h}_bucket"))).collect()
        }
        _ => Vec::new(),
    }
}

/// The running-requests gauge, in both spellings: every vLLM version exports it, one series per
/// replica (engine), so it is what the fleet's size and the data's extent are read from.
pub const RUNNING_GAUGE: [&str; 2] = ["vllm:num_requests_running", "vllm_num_requests_running"];

/// The distinct combinations of the fleet's `labels` over `range`, read once from the
/// running-requests gauge every vLLM version exports (one series per engine): how many values each
/// label takes is counted from them by vllm-diag. One row per replica at most.
pub fn fleet_labels_query(selector: &Selector, labels: &[String], range: Duration) -> String {
    let names = RUNNING_GAUGE
        .iter()
        .map(|n| crate::prom::escape_regex_literal(n))
        .collect::<Vec<_>>()
        .join("|");
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: names }];
    m.extend(selector.matchers.iter().cloned());
    let series = format!("{{{}}}", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","));
    format!("group by ({}) (last_over_time({series}[{}]))", labels.join(", "), promql_duration(range))
}

/// The bucket series of the histograms `series` under the user's selector, for the label index:
/// which `le` values they carry is listed from the index alone (`/api/v1/label/le/values`), without
/// reading a sample. Whether every replica carries each bound is checked on the bucket reads
/// themselves ([`uncovered_bounds`]).
pub fn bucket_bounds_matcher(selector: &Selector, series: &[String]) -> String {
    let names = series.iter().map(|n| crate::prom::escape_regex_literal(n)).collect::<Vec<_>>().join("|");
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: names }];
    m.extend(selector.matchers.iter().cloned());
    format!("{{{}}}", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","))
}

/// The bounds a histogram's buckets carry, from the `le` values listed for it. Without `+Inf`
/// nothing is known (not a histogram Prometheus can read).
pub fn listed_bounds(le_values: &[String]) -> Vec<Bound> {
    let parsed: Vec<f64> = le_values.iter().filter_map(|le| crate::prom::parse_sample_value(le)).collect();
    if !parsed.contains(&f64::INFINITY) {
        return Vec::new();
    }
    parse_bounds(le_values)
}

/// Bounds that some replicas' buckets lack, from a per-replica bucket read (`le` and the labels
/// that tell replicas apart on each sample): a fleet half-way through a change of bucket layout.
/// A rate read at such a bound leaves the other replicas' observations out.
pub fn uncovered_bounds<'a>(samples: impl Iterator<Item = (&'a str, Vec<&'a str>)>) -> Vec<f64> {
    let mut per: std::collections::HashMap<Vec<&str>, BTreeSet<u64>> = std::collections::HashMap::new();
    let mut all: BTreeSet<u64> = BTreeSet::new();
    for (le, who) in samples {
        let Some(v) = crate::prom::parse_sample_value(le).filter(|v| !v.is_nan()) else { continue };
        per.entry(who).or_default().insert(v.to_bits());
        all.insert(v.to_bits());
    }
    let mut out: Vec<f64> = all.into_iter().filter(|b| per.values().any(|have| !have.contains(b))).map(f64::from_bits).collect();
    out.sort_by(f64::total_cmp);
    out
}

/// How heavy a query of vllm-diag's own making is likely to be for the server, lowest first: bucket
/// reads (every bucket series of a histogram), then other reads of a histogram's buckets, then the
/// rest. Requests are sent heaviest first, so the last answers of a round are short ones and the
/// round ends sooner (the longest-first rule of scheduling).
pub fn weight_rank(query: &str) -> u8 {
    if query.contains("sum by (le,") {
        0
    } else if query.contains("_bucket") {
        1
    } else {
        2
    }
}

/// PromQL duration in whole seconds (exact and accepted everywhere).
pub fn promql_duration(d: Duration) -> String {
    format!("{}s", d.as_secs().max(1))
}

/// The stem of a stored histogram series name: `x_bucket` / `x_sum` -> `x`.
fn family_of(series: &str) -> &str {
    series
        .strip_suffix("_bucket")
        .or_else(|| series.strip_suffix("_sum"))
        .or_else(|| series.strip_suffix("_count"))
        .unwrap_or(series)
}

/// Parse a rule file's `match = 'finished_reason="abort"'` into matchers.
pub fn parse_match(m: &str) -> Result<Vec<Matcher>, crate::prom::SelectorError> {
    Ok(Selector::parse(m)?.matchers)
}

/// The queries behind one signal for one window: the value, and for quantiles the observation count.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalQueries {
    /// The signal's value per scope, in PromQL (what reports show and rules export).
    pub value: String,
    /// What explain sends instead of `value`, when it is cheaper for the server to answer with the
    /// per-replica values and let vllm-diag reduce them (outliers: the per-replica expression is
    /// then evaluated once instead of three times).
    pub fetch: Option<String>,
    pub count: Option<String>,
    /// For outliers: the value query returns one series per replica, labelled with this label, and
    /// the scope's value is computed from them (worst over the median of the others).
    pub per_replica: Option<(String, Reduction)>,
    /// What explain sends instead of `value` when the value combines reads that other signals
    /// make too (a share's denominator, a request rate): the reads, each asked once however many
    /// signals need it, and how vllm-diag combines them into `value`'s result.
    pub parts: Option<(Combine, Vec<String>)>,
    /// The reads among `value` and `parts` that are sums of a counter's rates, described, so that
    /// explain can answer several over one counter with one read (see [`SumRead`]).
    pub sums: Vec<(String, SumRead)>,
}

/// How the `parts` of a signal become its value per scope, exactly as its PromQL would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// `(num or den * 0) / den`: every scope of the denominator; one with no numerator is 0.
    Share,
    /// `a / b`: the scopes both have.
    Divide,
    /// `max by (G) (per) / avg by (G) (per)` over one per-replica read.
    Spread,
}

/// Resolve a quantity or `$name` against the thresholds.
fn quantity(text: &str, thresholds: &std::collections::BTreeMap<String, f64>) -> Result<f64, String> {
    let t = text.trim();
    if let Some(name) = t.strip_prefix('$') {
        return thresholds.get(name).copied().ok_or_else(|| format!("threshold ${name} is not defined"));
    }
    crate::units::parse_quantity(t)
}

/// `le` values as clients write a bound: `0.5`, `1.0`, `1` and the like, as an anchored regex.
fn le_regex(bound: f64) -> String {
    let mut forms = vec![format!("{bound}")];
    if bound.fract() == 0.0 {
        forms.push(format!("{bound:.1}"));
    }
    forms.push(format!("{bound:e}"));
    forms.sort();
    forms.dedup();
    forms.iter().map(|f| crate::prom::escape_regex_literal(f)).collect::<Vec<_>>().join("|")
}

fn over_time_fn(o: OverTime) -> &'static str {
    match o {
        OverTime::Max => "max_over_time",
        OverTime::Avg => "avg_over_time",
        OverTime::Min => "min_over_time",
        OverTime::Last => "last_over_time",
    }
}

fn across_fn(a: Across) -> &'static str {
    match a {
        Across::Max => "max",
        Across::Sum => "sum",
        Across::Avg => "avg",
        Across::Min => "min",
    }
}

/// The per-scope bucket rates a quantile signal reads (`sum by (le, G) (rate(F_bucket[R]))`): the
/// argument of its `histogram_quantile`. Two quantiles of one histogram read it once, and vllm-diag
/// interpolates both from it ([`crate::local::functions::bucket_quantile`], Prometheus' own rules).
pub fn bucket_rates_query(resolved: &Resolved, ctx: &QueryContext) -> String {
    let fam = family_of(&resolved.names[0]);
    let by = ctx.group_by.join(", ");
    format!("sum by (le, {by}) (rate({}[{}]))", ctx.selector.series(&format!("{fam}_bucket"), &[]), promql_duration(ctx.range))
}

/// The per-replica bucket rates (`sum by (le, G, R) (rate(F_bucket[R]))`): what an outlier's
/// per-replica quantiles are read from, and, summed over replicas by vllm-diag, the scope's
/// quantiles of the same histogram, so the histogram is read once for all of them.
pub fn replica_bucket_rates_query(resolved: &Resolved, ctx: &QueryContext, replica_label: &str) -> String {
    let fam = family_of(&resolved.names[0]);
    let by = ctx.group_by.join(", ");
    format!(
        "sum by (le, {by}, {replica_label}) (rate({}[{}]))",
        ctx.selector.series(&format!("{fam}_bucket"), &[]),
        promql_duration(ctx.range)
    )
}

/// The stored histogram a signal reads by its buckets (quantiles, outliers over a histogram, SLO
/// burn rates), by its stem: `x` for `x_bucket`.
pub fn histogram_of(kind: &SignalKind, resolved: &Resolved) -> Option<String> {
    match kind {
        SignalKind::Quantile { .. } | SignalKind::SloBurn { .. } => Some(family_of(resolved.names.first()?).to_string()),
        SignalKind::Outlier { histogram, .. } if !histogram.is_empty() => Some(family_of(resolved.names.first()?).to_string()),
        _ => None,
    }
}

/// Build the PromQL for a resolved signal.
pub fn build(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    let parse = |m: &str| parse_match(m).map_err(|e| e.to_string());
    let plain = |value: String| SignalQueries { value, fetch: None, count: None, per_replica: None, parts: None, sums: Vec::new() };
    let summed = |read: SumRead| (read.promql(sel, &ctx.group_by), read);
    let parts = |value: String, how: Combine, reads: Vec<String>| SignalQueries { parts: Some((how, reads)), ..plain(value) };
    let replica = |declared: &String| -> Result<String, String> {
        let l = if declared == RUN_REPLICA_LABEL { &ctx.replica_label } else { declared };
        if crate::prom::is_label_name(l) { Ok(l.clone()) } else { Err(format!("replica_label {l:?} is not a label name")) }
    };
    Ok(match kind {
        SignalKind::Quantile { quantile, .. } => {
            let fam = family_of(&resolved.names[0]);
            SignalQueries {
                value: format!("histogram_quantile({quantile}, {})", bucket_rates_query(resolved, ctx)),
                count: Some(format!(
                    "sum by ({by}) (increase({}[{r}]))",
                    sel.series(&format!("{fam}_count"), &[])
                )),
                fetch: None,
                per_replica: None,
                parts: None,
                sums: Vec::new(),
            }
        }
        SignalKind::Mean { .. } => {
            let fam = family_of(&resolved.names[0]);
            plain(format!(
                "sum by ({by}) (rate({}[{r}])) / sum by ({by}) (rate({}[{r}]))",
                sel.series(&format!("{fam}_sum"), &[]),
                sel.series(&format!("{fam}_count"), &[])
            ))
        }
        SignalKind::Rate { r#match, attribute_via, join_on, .. } => {
            let extra = parse(r#match)?;
            let anchor = (!attribute_via.is_empty()).then(|| resolved.names[1].as_str());
            let (value, read) = summed(rate_read(&resolved.names[0], &extra, anchor, join_on, ctx));
            SignalQueries { sums: vec![(value.clone(), read)], ..plain(value) }
        }
        SignalKind::Ratio { numerator, denominator, attribute_via, join_on } => {
            let num_extra = parse(&numerator.r#match)?;
            let den_extra = parse(&denominator.r#match)?;
            let num_name = &resolved.names[0];
            let den_name = if denominator.counter != numerator.counter { &resolved.names[1] } else { num_name };
            let anchor = (!attribute_via.is_empty()).then(|| resolved.names.last().map(String::as_str)).flatten();
            let (num, num_read) = summed(rate_read(num_name, &num_extra, anchor, join_on, ctx));
            let (den, den_read) = summed(rate_read(den_name, &den_extra, anchor, join_on, ctx));
            // A share with no matching events is 0, not "no data": fall back to 0 x the denominator.
            // explain reads the two rates once each (other shares and signals read the same
            // denominator) and divides them itself (Combine::Share).
            SignalQueries {
                sums: vec![(num.clone(), num_read), (den.clone(), den_read)],
                ..parts(format!("({num} or {den} * 0) / {den}"), Combine::Share, vec![num, den])
            }
        }
        SignalKind::Gauge { over_time, across, r#match, attribute_via, join_on, .. } => {
            let extra = parse(r#match)?;
            let (ot, ac) = (over_time_fn(*over_time), across_fn(*across));
            if attribute_via.is_empty() {
                plain(format!("{ac} by ({by}) ({ot}({}[{r}]))", sel.series(&resolved.names[0], &extra)))
            } else {
                let own = sel.without(&ctx.group_by);
                let j = join_on.join(", ");
                plain(format!(
                    "{ac} by ({by}) ({ot}({}[{r}]) * on ({j}) group_left ({by}) group by ({j}, {by}) (last_over_time({}[{r}])))",
                    own.series(&resolved.names[0], &extra),
                    sel.series(&resolved.names[1], &[])
                ))
            }
        }
        SignalKind::ActiveShare { .. } => {
            let step = (ctx.range.as_secs() / 30).max(15);
            let inner = (step * 2).max(120);
            plain(format!(
                "avg_over_time((sum by ({by}) (rate({}[{inner}s])) > bool 0)[{r}:{step}s])",
                sel.series(&resolved.names[0], &[])
            ))
        }
        SignalKind::QueueWait { .. } => {
            let waiting = format!("sum by ({by}) (avg_over_time({}[{r}]))", sel.series(&resolved.names[0], &[]));
            let (done, done_read) = summed(rate_read(&resolved.names[1], &[], None, &[], ctx));
            SignalQueries { sums: vec![(done.clone(), done_read)], ..parts(format!("{waiting} / {done}"), Combine::Divide, vec![waiting, done]) }
        }
        SignalKind::Slope { r#match, .. } => {
            let extra = parse(r#match)?;
            plain(format!("avg by ({by}) (deriv({}[{r}])) * 3600", sel.series(&resolved.names[0], &extra)))
        }
        SignalKind::Spread { replica_label, .. } => {
            let replica_label = &replica(replica_label)?;
            let mut read = rate_read(&resolved.names[0], &[], None, &[], ctx);
            read.by.push(replica_label.clone());
            let (per, read) = summed(read);
            SignalQueries { sums: vec![(per.clone(), read)], ..parts(format!("max by ({by}) ({per}) / avg by ({by}) ({per})"), Combine::Spread, vec![per]) }
        }
        SignalKind::Fill { .. } => {
            let m = sel.series(&resolved.names[0], &[]);
            plain(format!("avg by ({by}) (avg_over_time({m}[{r}]) / max_over_time({m}[{r}]))"))
        }
        SignalKind::Outlier { histogram, quantile, replica_label, .. } => {
            let replica_label = &replica(replica_label)?;
            let per = if histogram.is_empty() {
                format!("max by ({by}, {replica_label}) (avg_over_time({}[{r}]))", sel.series(&resolved.names[0], &[]))
            } else {
                let fam = family_of(&resolved.names[0]);
                format!(
                    "histogram_quantile({quantile}, sum by (le, {by}, {replica_label}) (rate({}[{r}])))",
                    sel.series(&format!("{fam}_bucket"), &[])
                )
            };
            // The worst replica over the median of the others. In PromQL the per-replica expression
            // is evaluated three times; explain fetches it once and reduces it (Reduction::Outlier).
            let top = format!("topk by ({by}) (1, {per})");
            SignalQueries {
                value: format!(
                    "{top} / on ({by}) group_left quantile by ({by}) (0.5, {per} unless on ({by}, {replica_label}) {top})"
                ),
                fetch: Some(per),
                count: None,
                per_replica: Some((replica_label.clone(), Reduction::Outlier)),
                parts: None,
                sums: Vec::new(),
            }
        }
        SignalKind::SloBurn { target, objective, .. } => plain(slo_burn_query(target, objective, resolved, ctx)?),
        SignalKind::Vanished { replica_label, .. } => {
            let replica_label = &replica(replica_label)?;
            let m = sel.series(&resolved.names[0], &[]);
            SignalQueries {
                value: format!(
                    "group by ({by}, {replica_label}) (last_over_time({m}[{r}])) unless group by ({by}, {replica_label}) (last_over_time({m}[5m]))"
                ),
                fetch: None,
                count: None,
                per_replica: Some((replica_label.clone(), Reduction::Count)),
                parts: None,
                sums: Vec::new(),
            }
        }
        SignalKind::ReplicasOver { above, replica_label, attribute_via, join_on, .. } => {
            let replica_label = &replica(replica_label)?;
            let value = replicas_over_query(*above, replica_label, !attribute_via.is_empty(), join_on, resolved, ctx);
            SignalQueries { value, fetch: None, count: None, per_replica: Some((replica_label.clone(), Reduction::Count)), parts: None, sums: Vec::new() }
        }
    })
}

/// How an SLO burn rate is taken from its histogram's bucket rates when explain reads them anyway
/// (for the histogram's quantiles, over the same range): the good rate is the bucket rates at
/// `good`'s bounds, each times its weight, exactly as [`slo_burn_query`] writes them (one bound, or
/// two interpolated, or the first from zero); the total is the `+Inf` bucket's; the burn rate is
/// `(1 - good / total) / budget`.
#[derive(Debug, Clone, PartialEq)]
pub struct BurnFromBuckets {
    pub good: Vec<(f64, f64)>,
    pub budget: f64,
}

/// The bucket reading of an SLO burn signal (see [`BurnFromBuckets`]); `None` for other signals.
pub fn burn_from_buckets(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Result<Option<BurnFromBuckets>, String> {
    let SignalKind::SloBurn { target, objective, .. } = kind else { return Ok(None) };
    let t = quantity(target, &ctx.thresholds)?;
    let o = quantity(objective, &ctx.thresholds)?;
    if !(0.0..1.0).contains(&o) {
        return Err(format!("objective {o} must be between 0 and 1"));
    }
    // The numbers as the query writes them, read back: the same weights and budget.
    let num = |text: String| text.parse::<f64>().map_err(|e| format!("{text}: {e}"));
    let budget = num(crate::units::sig(1.0 - o))?;
    let good = match ctx.buckets.get(resolved.names.first().ok_or("no histogram")?) {
        None => vec![(t, 1.0)],
        Some(bounds) => match bucket_at(bounds, t)? {
            AtTarget::Exact(b) => vec![(b.value, 1.0)],
            AtTarget::Between(lo, hi) => {
                let f = (t - lo.value) / (hi.value - lo.value);
                vec![(lo.value, num(weight(1.0 - f))?), (hi.value, num(weight(f))?)]
            }
            AtTarget::BelowFirst(hi) => vec![(hi.value, num(weight(t / hi.value))?)],
        },
    };
    Ok(Some(BurnFromBuckets { good, budget }))
}

/// The burn rate of an SLO "`objective` of requests under `target`": the share of observations over
/// the target (the buckets at or under it over the `+Inf` bucket), as a multiple of the error
/// budget. A target between two bucket bounds is interpolated linearly between them.
fn slo_burn_query(target: &str, objective: &str, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    let t = quantity(target, &ctx.thresholds)?;
    let o = quantity(objective, &ctx.thresholds)?;
    if !(0.0..1.0).contains(&o) {
        return Err(format!("objective {o} must be between 0 and 1"));
    }
    let fam = family_of(&resolved.names[0]);
    let bucket = format!("{fam}_bucket");
    let budget = crate::units::sig(1.0 - o);
    let at = |b: &Bound| {
        let le = match b.written.as_slice() {
            [one] => Matcher { name: "le".into(), op: MatchOp::Eq, value: one.clone() },
            many => Matcher {
                name: "le".into(),
                op: MatchOp::Re,
                value: many.iter().map(|w| crate::prom::escape_regex_literal(w)).collect::<Vec<_>>().join("|"),
            },
        };
        format!("sum by ({by}) (rate({}[{r}]))", sel.series(&bucket, &[le]))
    };
    // The rate of observations at or under the target.
    let good = match ctx.buckets.get(&resolved.names[0]) {
        None => format!(
            "sum by ({by}) (rate({}[{r}]))",
            sel.series(&bucket, &[Matcher { name: "le".into(), op: MatchOp::Re, value: le_regex(t) }])
        ),
        Some(bounds) => match bucket_at(bounds, t).map_err(|e| format!("{fam}: {e}"))? {
            AtTarget::Exact(b) => at(b),
            AtTarget::Between(lo, hi) => {
                let f = (t - lo.value) / (hi.value - lo.value);
                format!("({} * {} + {} * {})", at(lo), weight(1.0 - f), at(hi), weight(f))
            }
            AtTarget::BelowFirst(hi) => format!("({} * {})", at(hi), weight(t / hi.value)),
        },
    };
    // Every observation is in the +Inf bucket: the total is read from the same family as the good
    // share (as the quantiles' observation counts are), so one family is all a burn rate needs.
    let all = Matcher { name: "le".into(), op: MatchOp::Eq, value: "+Inf".into() };
    Ok(format!("(1 - {good} / sum by ({by}) (rate({}[{r}]))) / {budget}", sel.series(&bucket, &[all])))
}

/// Replicas whose gauge went over `above` in the window, one series each. An `attributed` gauge
/// (an exporter's, without the model label) is joined to the scope through the anchor gauge; the
/// anchor's `instance` then replaces the exporter's own, so the finding can name the vLLM server
/// as well as the pod.
fn replicas_over_query(above: f64, replica_label: &str, attributed: bool, join_on: &[String], resolved: &Resolved, ctx: &QueryContext) -> String {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    if !attributed {
        format!("max by ({by}, {replica_label}) (max_over_time({}[{r}])) > {above}", sel.series(&resolved.names[0], &[]))
    } else {
        let own = sel.without(&ctx.group_by);
        let j = join_on.join(", ");
        let carry = if replica_label == "instance" { by.clone() } else { format!("{by}, instance") };
        format!(
            "max by ({by}, {replica_label}{}) (max_over_time({}[{r}]) * on ({j}) group_left ({carry}) group by ({j}, {carry}) (last_over_time({}[{r}]))) > {above}",
            if replica_label == "instance" { "" } else { ", instance" },
            own.series(&resolved.names[0], &[]),
            sel.series(&resolved.names[1], &[])
        )
    }
}

/// One counter's per-second rate summed over groups: `sum by (BY) (rate(C{sel,extra}[R]))`. A
/// counter without the grouping labels (HTTP, DCGM) is summed per `join` labels first and carried
/// to the scope by an anchor gauge; matchers on the grouping labels then go to the anchor only.
///
/// Reads of one counter over one range that differ only in grouping and matchers (a share's
/// numerator and denominator, a spread's per-replica rates, an error rate) are answered by one read
/// grouped by every label they group or filter on ([`SumRead::shared`]), from which explain sums
/// each of them: the counter's series are then read once instead of once per signal.
#[derive(Debug, Clone, PartialEq)]
pub struct SumRead {
    pub counter: String,
    pub extra: Vec<Matcher>,
    pub by: Vec<String>,
    /// The anchor gauge and the labels joined on, for a counter without the grouping labels.
    pub anchor: Option<(String, Vec<String>)>,
    pub range: Duration,
}

impl SumRead {
    /// This read alone, as PromQL.
    pub fn promql(&self, selector: &Selector, group_by: &[String]) -> String {
        self.query(selector, group_by, &self.by, &self.extra)
    }

    /// Reads with the same key can share one read.
    pub fn key(&self) -> (String, Option<(String, Vec<String>)>, Duration) {
        (self.counter.clone(), self.anchor.clone(), self.range)
    }

    /// One read that answers every read in `reads` (all with one key): the counter's rates summed
    /// by every label they group or filter on, or `None` when they cannot share one (an attributed
    /// counter grouped by a label the anchor does not carry, or filtered on a grouping label).
    pub fn shared(reads: &[&SumRead], selector: &Selector, group_by: &[String]) -> Option<String> {
        let first = reads.first()?;
        // The grouping labels first, as every read writes them, then the others in name order.
        let others: BTreeSet<&String> = reads.iter().flat_map(|r| r.by.iter().chain(r.extra.iter().map(|m| &m.name))).filter(|l| !group_by.contains(l)).collect();
        let keep: Vec<String> = group_by.iter().chain(others).cloned().collect();
        if let Some((_, join)) = &first.anchor {
            let carried = |l: &String| group_by.contains(l) || join.contains(l);
            if reads.iter().any(|r| !r.by.iter().all(carried) || r.extra.iter().any(|m| group_by.contains(&m.name))) {
                return None;
            }
        }
        Some(first.query(selector, group_by, &keep, &[]))
    }

    fn query(&self, selector: &Selector, group_by: &[String], by: &[String], extra: &[Matcher]) -> String {
        let r = promql_duration(self.range);
        let outer = by.join(", ");
        match &self.anchor {
            None => format!("sum by ({outer}) (rate({}[{r}]))", selector.series(&self.counter, extra)),
            Some((anchor, join)) => {
                let own = selector.without(group_by);
                let j = join.join(", ");
                let g = group_by.join(", ");
                // The counter's own labels the outer sum keeps (a status it is filtered on) stay
                // through the join.
                let inner: Vec<&str> = join.iter().chain(by.iter().filter(|l| !group_by.contains(l) && !join.contains(l))).map(String::as_str).collect();
                format!(
                    "sum by ({outer}) (sum by ({}) (rate({}[{r}])) * on ({j}) group_left ({g}) group by ({j}, {g}) (last_over_time({}[{r}])))",
                    inner.join(", "),
                    own.series(&self.counter, extra),
                    selector.series(anchor, &[])
                )
            }
        }
    }
}

/// `sum by (G) (rate(C{sel,extra}[R]))`, attributed through `anchor` when the counter lacks the
/// grouping labels.
fn rate_read(counter: &str, extra: &[Matcher], anchor: Option<&str>, join: &[String], ctx: &QueryContext) -> SumRead {
    SumRead {
        counter: counter.to_string(),
        extra: extra.to_vec(),
        by: ctx.group_by.clone(),
        anchor: anchor.map(|a| (a.to_string(), join.to_vec())),
        range: ctx.range,
    }
}

/// How many series of `metric` hold a sample at each step of a range query: where the first point
/// lies tells when the data starts.
pub fn series_count_query(selector: &Selector, metric: &str) -> String {
    format!("count({})", selector.series(metric, &[]))
}

/// vLLM's cache configuration (`num_gpu_blocks`, `block_size` as labels of the info gauge `name`)
/// per scope. The info series carries no model label, so it is joined to the scope's labels
/// through `anchor` (a gauge every engine exports) on the engine's `instance` and `job`.
pub fn cache_config_query(selector: &Selector, group_by: &[String], name: &str, anchor: &str, range: Duration) -> String {
    let by = group_by.join(", ");
    let r = promql_duration(range);
    format!(
        "max by ({by}, num_gpu_blocks, block_size) (last_over_time({}[{r}]) * on (instance, job) group_left ({by}) group by (instance, job, {by}) (last_over_time({}[{r}])))",
        selector.without(group_by).series(name, &[]),
        selector.series(anchor, &[])
    )
}

/// The discovery selector: every vLLM series name plus the HTTP layer's, under the user's selector.
pub fn discovery_matcher(selector: &Selector, extra_names: &[String]) -> String {
    let mut names = vec!["vllm[:_].+".to_string()];
    names.extend(extra_names.iter().map(|n| crate::prom::escape_regex_literal(n)));
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: names.join("|") }];
    m.extend(selector.matchers.iter().cloned());
    format!("{{{}}}", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","))
}

/// The metric names a query reads: every selector's name, and each alternative of a
/// `__name__=~"a|b"` matcher (the only regex this module writes on names). For the query-budget
/// checks and the benchmark's data-read floor, which count how often each family is read.
pub fn families_read(query: &str) -> Result<BTreeSet<String>, String> {
    use promql_parser::parser::Expr;
    struct Names(BTreeSet<String>);
    impl promql_parser::util::ExprVisitor for Names {
        type Error = String;
        fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
            let vs = match e {
                Expr::VectorSelector(vs) => vs,
                Expr::MatrixSelector(ms) => &ms.vs,
                _ => return Ok(true),
            };
            self.0.extend(vs.name.clone());
            for m in vs.matchers.matchers.iter().filter(|m| m.name == "__name__") {
                self.0.extend(m.value.split('|').map(|n| n.replace('\\', "")));
            }
            Ok(true)
        }
    }
    let expr = promql_parser::parser::parse(query)?;
    let mut names = Names(BTreeSet::new());
    promql_parser::util::walk_expr(&mut names, &expr)?;
    Ok(names.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(sel: &str) -> QueryContext {
        QueryContext {
            selector: Selector::parse(sel).unwrap(),
            group_by: vec!["model_name".into()],
            range: Duration::from_secs(1800),
            thresholds: [("ttft_target".to_string(), 0.5)].into_iter().collect(),
            buckets: Default::default(),
            replica_label: "instance".into(),
        }
    }

    fn present(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn picks_the_first_alternative_present_in_any_spelling() {
        let alts = vec!["vllm:kv_cache_usage_perc".to_string(), "vllm:gpu_cache_usage_perc".to_string()];
        assert_eq!(pick(&alts, &present(&["vllm:gpu_cache_usage_perc"])).unwrap(), "vllm:gpu_cache_usage_perc");
        assert_eq!(
            pick(&alts, &present(&["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"])).unwrap(),
            "vllm:kv_cache_usage_perc"
        );
        assert_eq!(pick(&alts, &present(&["vllm_kv_cache_usage_perc"])).unwrap(), "vllm_kv_cache_usage_perc");
        assert!(pick(&alts, &present(&["vllm:num_requests_running"])).is_none());
    }

    #[test]
    fn counters_may_be_stored_without_total() {
        assert!(spellings("vllm:num_preemptions_total").contains(&"vllm_num_preemptions".to_string()));
    }

    #[test]
    fn quantile_query_aggregates_by_scope_and_keeps_the_selector() {
        let k = SignalKind::Quantile {
            quantile: 0.95,
            histogram: vec!["vllm:time_to_first_token_seconds".into()],
            min_observations: 20.0,
        };
        let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
        let q = build(&k, &r, &ctx(r#"job="vllm""#)).unwrap();
        assert_eq!(
            q.value,
            r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1800s])))"#
        );
        assert_eq!(
            q.count.unwrap(),
            r#"sum by (model_name) (increase(vllm:time_to_first_token_seconds_count{job="vllm"}[1800s]))"#
        );
    }

    #[test]
    fn ratio_of_a_labelled_subset_defaults_to_zero() {
        let k = SignalKind::Ratio {
            numerator: CounterRef { counter: vec!["vllm:request_success_total".into()], r#match: r#"finished_reason="abort""#.into() },
            denominator: CounterRef { counter: vec!["vllm:request_success_total".into()], r#match: String::new() },
            attribute_via: vec![],
            join_on: default_join(),
        };
        let r = resolve(&k, &present(&["vllm:request_success_total"])).unwrap();
        let q = build(&k, &r, &ctx("")).unwrap();
        assert_eq!(
            q.value,
            r#"(sum by (model_name) (rate(vllm:request_success_total{finished_reason="abort"}[1800s])) or sum by (model_name) (rate(vllm:request_success_total[1800s])) * 0) / sum by (model_name) (rate(vllm:request_success_total[1800s]))"#
        );
    }

    #[test]
    fn http_counters_are_attributed_through_the_anchor_gauge() {
        let k = SignalKind::Ratio {
            numerator: CounterRef { counter: vec!["http_requests_total".into()], r#match: r#"status="5xx""#.into() },
            denominator: CounterRef { counter: vec!["http_requests_total".into()], r#match: String::new() },
            attribute_via: vec!["vllm:num_requests_running".into()],
            join_on: default_join(),
        };
        let r = resolve(&k, &present(&["http_requests_total", "vllm:num_requests_running"])).unwrap();
        let q = build(&k, &r, &ctx(r#"model_name="m",job="vllm""#)).unwrap();
        // The model matcher applies to the anchor only: http_requests_total has no model_name.
        assert!(q.value.contains(r#"rate(http_requests_total{job="vllm",status="5xx"}[1800s])"#), "{}", q.value);
        assert!(q.value.contains(r#"last_over_time(vllm:num_requests_running{model_name="m",job="vllm"}[1800s])"#));
    }

    #[test]
    fn missing_families_are_named() {
        let k = SignalKind::Gauge {
            gauge: vec!["vllm:kv_cache_usage_perc".into(), "vllm:gpu_cache_usage_perc".into()],
            over_time: OverTime::Max,
            across: Across::Max,
            r#match: String::new(),
            attribute_via: vec![],
            join_on: default_join(),
        };
        let err = resolve(&k, &present(&[])).unwrap_err();
        assert_eq!(err, vec!["vllm:kv_cache_usage_perc / vllm:gpu_cache_usage_perc".to_string()]);
    }

    #[test]
    fn active_share_uses_a_subquery_over_the_window() {
        let k = SignalKind::ActiveShare { counter: vec!["vllm:num_preemptions_total".into()] };
        let r = resolve(&k, &present(&["vllm:num_preemptions_total"])).unwrap();
        let q = build(&k, &r, &ctx("")).unwrap();
        assert_eq!(
            q.value,
            "avg_over_time((sum by (model_name) (rate(vllm:num_preemptions_total[120s])) > bool 0)[1800s:60s])"
        );
    }

    #[test]
    fn discovery_matches_vllm_names_and_extras_under_the_selector() {
        let m = discovery_matcher(&Selector::parse(r#"job="vllm""#).unwrap(), &["http_requests_total".into()]);
        assert_eq!(m, r#"{__name__=~"vllm[:_].+|http_requests_total",job="vllm"}"#);
    }

    #[test]
    fn slo_burn_reads_the_bucket_at_the_target_and_divides_by_the_budget() {
        let k = SignalKind::SloBurn {
            histogram: vec!["vllm:time_to_first_token_seconds".into()],
            target: "$ttft_target".into(),
            objective: "99%".into(),
        };
        let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
        let q = build(&k, &r, &ctx("")).unwrap();
        assert_eq!(
            q.value,
            r#"(1 - sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le=~"0\\.5|5e-1"}[1800s])) / sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="+Inf"}[1800s]))) / 0.01"#
        );
    }

    fn bounds(values: &[&str]) -> Vec<Bound> {
        parse_bounds(&values.iter().map(|v| v.to_string()).collect::<Vec<_>>())
    }

    fn slo(target: &str) -> SignalKind {
        SignalKind::SloBurn {
            histogram: vec!["vllm:time_to_first_token_seconds".into()],
            target: target.into(),
            objective: "99%".into(),
        }
    }

    fn ctx_with_buckets(values: &[&str]) -> QueryContext {
        let mut c = ctx("");
        c.buckets.insert("vllm:time_to_first_token_seconds_bucket".into(), bounds(values));
        c
    }

    #[test]
    fn bucket_bounds_are_sorted_by_value_with_spellings_merged_and_inf_dropped() {
        let b = bounds(&["0.25", "+Inf", "0.1", "1.0", "1", "junk", "NaN"]);
        let got: Vec<(f64, Vec<String>)> = b.into_iter().map(|b| (b.value, b.written)).collect();
        assert_eq!(got, vec![(0.1, vec!["0.1".into()]), (0.25, vec!["0.25".into()]), (1.0, vec!["1".into(), "1.0".into()])]);
    }

    #[test]
    fn a_target_is_located_exactly_between_or_below_the_buckets() {
        let b = bounds(&["0.1", "0.25", "0.5", "+Inf"]);
        assert!(matches!(bucket_at(&b, 0.25), Ok(AtTarget::Exact(x)) if x.value == 0.25));
        assert!(matches!(bucket_at(&b, 0.2), Ok(AtTarget::Between(lo, hi)) if lo.value == 0.1 && hi.value == 0.25));
        assert!(matches!(bucket_at(&b, 0.05), Ok(AtTarget::BelowFirst(x)) if x.value == 0.1));
        let above = bucket_at(&b, 2.0).unwrap_err();
        assert!(above.contains("above the histogram's largest finite bucket (500 ms)"), "{above}");
        assert!(bucket_at(&[], 0.2).is_err());
    }

    #[test]
    fn slo_burn_reads_the_bucket_found_in_the_data_as_written() {
        let k = slo("$ttft_target");
        let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
        let c = ctx_with_buckets(&["0.25", "0.5", "+Inf"]);
        assert_eq!(
            build(&k, &r, &c).unwrap().value,
            r#"(1 - sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="0.5"}[1800s])) / sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="+Inf"}[1800s]))) / 0.01"#
        );
        assert_eq!(bucket_note(&k, &r, &c), None);
    }

    #[test]
    fn bounds_come_from_the_label_index_and_those_some_replicas_lack_are_found_in_the_reads() {
        let les = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let b = listed_bounds(&les(&["0.1", "0.25", "0.5", "+Inf"]));
        assert_eq!(b.iter().map(|b| b.value).collect::<Vec<_>>(), vec![0.1, 0.25, 0.5]);
        assert!(listed_bounds(&les(&["0.1"])).is_empty(), "no +Inf: nothing is known");
        assert!(listed_bounds(&[]).is_empty());
        // Two spellings of one bound are one bound, read under both.
        let b = listed_bounds(&les(&["1", "1.0", "+Inf"]));
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].written, vec!["1".to_string(), "1.0".to_string()]);
        let m = bucket_bounds_matcher(&Selector::parse(r#"job="vllm""#).unwrap(), &["a_bucket".into(), "b_bucket".into()]);
        assert_eq!(m, r#"{__name__=~"a_bucket|b_bucket",job="vllm"}"#);
        // Three replicas; r2 has another layout (no 0.25, a 0.3 of its own); "1" and "1.0" agree.
        let rows = [
            ("0.1", "r0"), ("0.25", "r0"), ("1", "r0"), ("+Inf", "r0"),
            ("0.1", "r1"), ("0.25", "r1"), ("1.0", "r1"), ("+Inf", "r1"),
            ("0.1", "r2"), ("0.3", "r2"), ("1", "r2"), ("+Inf", "r2"),
        ];
        assert_eq!(uncovered_bounds(rows.iter().map(|(le, r)| (*le, vec![*r]))), vec![0.25, 0.3]);
        assert!(uncovered_bounds(rows[..8].iter().map(|(le, r)| (*le, vec![*r]))).is_empty());
    }

    #[test]
    fn bucket_reads_rank_heaviest() {
        assert_eq!(weight_rank("sum by (le, model_name, instance) (rate(x_bucket[1800s]))"), 0);
        assert_eq!(weight_rank(r#"sum by (model_name) (rate(x_bucket{le="0.5"}[300s]))"#), 1);
        assert_eq!(weight_rank("sum by (model_name) (rate(x_total[1800s]))"), 2);
    }

    #[test]
    fn the_fleet_labels_are_read_once_from_the_running_gauge() {
        let q = fleet_labels_query(&Selector::parse(r#"job="vllm""#).unwrap(), &["model_name".into(), "pod".into()], Duration::from_secs(1800));
        assert_eq!(
            q,
            r#"group by (model_name, pod) (last_over_time({__name__=~"vllm:num_requests_running|vllm_num_requests_running",job="vllm"}[1800s]))"#
        );
    }

    #[test]
    fn slo_burn_interpolates_a_target_between_two_buckets_and_says_so() {
        let k = slo("200ms");
        let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
        let c = ctx_with_buckets(&["0.1", "0.25", "0.5", "+Inf"]);
        // 200 ms is two thirds of the way from 100 ms to 250 ms.
        assert_eq!(
            build(&k, &r, &c).unwrap().value,
            r#"(1 - (sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="0.1"}[1800s])) * 0.333333 + sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="0.25"}[1800s])) * 0.666667) / sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="+Inf"}[1800s]))) / 0.01"#
        );
        let note = bucket_note(&k, &r, &c).unwrap();
        assert!(note.contains("no bucket at the SLO target 200 ms") && note.contains("between its 100 ms and 250 ms buckets"), "{note}");
    }

    #[test]
    fn slo_burn_under_the_first_bucket_scales_it_and_over_the_last_is_refused() {
        let r = resolve(&slo("50ms"), &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
        let c = ctx_with_buckets(&["0.1", "0.25", "+Inf"]);
        let q = build(&slo("50ms"), &r, &c).unwrap().value;
        assert!(q.contains(r#"(sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="0.1"}[1800s])) * 0.5)"#), "{q}");
        let e = build(&slo("1s"), &r, &c).unwrap_err();
        assert!(e.contains("vllm:time_to_first_token_seconds: the target 1 s is above"), "{e}");
    }

    #[test]
    fn outliers_ask_for_one_value_per_replica() {
        let k = SignalKind::Outlier {
            histogram: vec!["vllm:inter_token_latency_seconds".into()],
            gauge: vec![],
            quantile: 0.95,
            replica_label: "instance".into(),
        };
        let r = resolve(&k, &present(&["vllm:inter_token_latency_seconds_bucket"])).unwrap();
        let q = build(&k, &r, &ctx("")).unwrap();
        assert!(q.value.contains("sum by (le, model_name, instance)"), "{}", q.value);
        assert!(q.value.starts_with("topk by (model_name) (1, "), "{}", q.value);
        assert!(q.value.contains("/ on (model_name) group_left quantile by (model_name) (0.5, "), "{}", q.value);
        assert_eq!(q.per_replica, Some(("instance".to_string(), Reduction::Outlier)));
        // explain fetches the per-replica expression once and reduces it itself.
        let fetch = q.fetch.unwrap();
        assert!(fetch.starts_with("histogram_quantile(0.95, sum by (le, model_name, instance) ("), "{fetch}");
        assert_eq!(q.value.matches(&fetch).count(), 3, "{}", q.value);
    }

    #[test]
    fn gauges_without_the_grouping_label_join_on_the_declared_labels() {
        let k = SignalKind::Gauge {
            gauge: vec!["DCGM_FI_DEV_SM_CLOCK".into()],
            over_time: OverTime::Avg,
            across: Across::Min,
            r#match: String::new(),
            attribute_via: vec!["vllm:num_requests_running".into()],
            join_on: vec!["namespace".into(), "pod".into()],
        };
        let r = resolve(&k, &present(&["DCGM_FI_DEV_SM_CLOCK", "vllm:num_requests_running"])).unwrap();
        let q = build(&k, &r, &ctx("")).unwrap();
        assert_eq!(
            q.value,
            "min by (model_name) (avg_over_time(DCGM_FI_DEV_SM_CLOCK[1800s]) * on (namespace, pod) group_left (model_name) group by (namespace, pod, model_name) (last_over_time(vllm:num_requests_running[1800s])))"
        );
    }
}
