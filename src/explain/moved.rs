//! Stage: what else moved. After judging, every watched signal (a signal with `worse`, the
//! direction in which its change hurts, in `rules/signals.toml`) is compared with its own baseline
//! per scope, robustly, and the changes no warning or critical finding explains are listed
//! ("Also changed, not explained by any rule"; JSON `unexplained`).
//!
//! Reads: every watched signal's trend over the baseline and the window at the trends' step, a
//! handful of signals to one range query (each tagged with a [`LABEL`] by `label_replace` and
//! joined with `or`), at most [`MAX_QUERIES`]. Those queries are computed by vllm-diag from reads
//! of each counter, gauge and histogram they need, each read once (`moved/reads.rs`), and asked as they
//! are only of a recording made before those reads. The number of queries depends on the rule
//! pack, never on the fleet; they are sent in the follow-ups' round trip. Signals no rule reads
//! (`spare`: external prefix-cache hits) are read only where discovery found their family.
//!
//! A change, for one signal on one scope:
//! - the baseline level is the median of the baseline's trend points and its spread their median
//!   absolute deviation (scaled by 1.4826 to read as a standard deviation): one spike in the
//!   baseline moves neither, where a mean and a standard deviation would both follow it;
//! - a window point has moved when it is past the baseline level, in the direction that hurts, by
//!   at least `moved_z` spreads, by at least the signal's own `moved_floor` (a queue of less than
//!   one request is no queue), and by a factor of at least `moved_ratio` (a tiny but steady
//!   signal is not "20 sigma");
//! - it counts when consecutive moved points span at least `moved_duration`: one bucket jump of a
//!   quantile, one scrape's spike, is not a change. Its onset is the last point before that run,
//!   or, for a change that built up (a leak, a trend's range filling after a step), before the
//!   rising points that led up to it (each past the baseline by `moved_z` spreads and a tenth of
//!   the floor, each below the next).
//!
//! Explained: a warning or critical finding on the same scope (its grouping labels) whose evidence
//! reads the same metric family explains a change; a `symptom` (latency, queueing) is explained by
//! any warning or critical finding on its scope, since the finding is what users feel.
//!
//! Beside it, [`correlations`]: where two signals' trends move together over the window (KV usage
//! and TTFT, waiting requests and TTFT, prompt throughput and ITL), the finding whose evidence
//! holds either says so with the coefficient.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use super::fetch::{Answers, ReadPlan, Way};
use super::plan::SignalPlan;

mod correlation;
mod reads;
use crate::prom::{escape_label_value, Selector};
use crate::report::{Correlation, Finding, RunParams, Scope, Severity, Trend, Unexplained, Warnings};
use crate::rules::RuleSet;
use crate::signals::{self, QueryContext, Worse};
use crate::source::{Data, Request, Response};
pub use correlation::{correlations, pearson, CORRELATED, MIN_CORRELATION_POINTS};
pub use reads::READ_LABEL;

/// The label each signal's series carries in the combined answers.
pub const LABEL: &str = "vllm_diag_signal";
/// Signals per query: a handful, so one failing query loses a few, and no query grows long.
pub const PER_QUERY: usize = 6;
/// Queries at most, whatever the rule pack declares (signals past them are not watched, said in a
/// warning).
pub const MAX_QUERIES: usize = 4;
/// Baseline points at most: a baseline much longer than the window is read at a coarser step.
const MAX_BASELINE_POINTS: u64 = 120;
/// Replicas at most (the fleet's values of the replica label) for the per-replica readings: their
/// answer grows by three series a replica (6.7 KB), so past this the signals are watched per model
/// only, and a warning says so.
pub const MAX_REPLICAS_WATCHED: usize = 256;
/// Fewest baseline points to take a median and a spread from.
const MIN_BASELINE_POINTS: usize = 6;
/// Fewest consecutive moved points a change needs, whatever `moved_duration` asks, where the step is
/// the trends' range ([`steps`], windows of 20 minutes or more): two points whose ranges do not
/// overlap can both read one burst that straddles them (a healthy fleet's queue at its window's
/// end read 1.4 and 1.6 requests against 0.07), where the finer step's overlapping ranges saw it
/// fall in between. At the finer step, where the ranges overlap, `moved_duration` alone decides.
pub const MIN_RUN_POINTS: usize = 3;
/// Fewest window points for the step to be the trend's range (see [`steps`]).
pub const MIN_WINDOW_POINTS: u64 = 10;

/// The step and the range (seconds) of the stage's trends over a window of `window` seconds. The
/// range is the trends' (a tenth of the window, 2 to 10 minutes: at least two samples of a series
/// scraped every minute, four at 30 s). The step is that range wherever the window still holds
/// [`MIN_WINDOW_POINTS`] of it (windows of 20 minutes and more), so consecutive points' ranges do
/// not overlap and each sample is read once (Prometheus 2's ranges include both ends, so a sample
/// exactly on a step is read twice); a shorter window keeps the other trends' step (a thirtieth of
/// it, 15 s at least), its points' ranges overlapping, so the shortest change still spans points.
pub fn steps(window: u64) -> (u64, u64) {
    let range = (window / 10).clamp(120, 600);
    let fine = (window / 30).max(15);
    let step = if window / range >= MIN_WINDOW_POINTS { range.max(fine) } else { fine };
    (step, range)
}

/// The named thresholds (rules/thresholds.toml) and their defaults.
pub const RATIO: &str = crate::rules::MOVED_RATIO;
pub const Z: &str = crate::rules::MOVED_Z;
pub const DURATION: &str = crate::rules::MOVED_DURATION;
pub const DEFAULT_RATIO: f64 = 1.5;
pub const DEFAULT_Z: f64 = 6.0;
pub const DEFAULT_DURATION_SECONDS: f64 = 300.0;

/// One watched signal.
#[derive(Debug, Clone)]
pub struct Watched {
    pub id: String,
    /// None: read only for a correlation.
    pub worse: Option<Worse>,
    /// Its PromQL at every step, as the report shows it.
    pub query: String,
    pub metric: String,
    pub spare: bool,
    /// Read replica by replica (`watch_replicas`): its scope also holds the replica label.
    pub per_replica: bool,
}

/// The key of a signal's per-replica reading among the watched ones (and in the [`LABEL`]).
fn replica_key(id: &str) -> String {
    format!("{id}@replica")
}

/// The stage's reads.
#[derive(Debug, Clone, Default)]
pub struct MovedPlan {
    pub watched: BTreeMap<String, Watched>,
    /// Each query's requests: one range over the baseline and the window when they touch on the
    /// step's grid, else the baseline's and the window's.
    pub requests: Vec<Request>,
    pub step: u64,
    pub baseline_step: u64,
    pub trend_range: Duration,
    /// How each of `requests` is read: computed from the counters, gauges and histograms its
    /// signals read, each read once (`moved/reads.rs`), or asked as it is.
    pub reads: reads::Reads,
}

impl MovedPlan {
    pub fn requests(&self) -> Vec<Request> {
        self.requests.clone()
    }

    /// The stage's requests as the fetch stage reads them: each computed from the shared reads,
    /// else (a recording made before them) asked as it is.
    pub fn read_plan(&self) -> ReadPlan {
        let mut plan = ReadPlan { wants: BTreeMap::new(), reading: self.reads.reading.clone() };
        for want in &self.requests {
            let ways = self.reads.ways.get(want).cloned().into_iter().chain([Way::whole(want.clone())]).collect();
            plan.wants.insert(want.clone(), ways);
        }
        plan
    }
}

/// The bars a change must pass.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bars {
    pub ratio: f64,
    pub z: f64,
    pub seconds: f64,
    /// The fewest consecutive points a change needs besides `seconds` (see [`MIN_RUN_POINTS`]).
    pub points: usize,
}

impl Bars {
    /// The shortest stretch fits the window: at most a third of it (a three-minute window of a
    /// lab run asks a minute).
    pub fn within(self, window: Duration) -> Bars {
        let (step, range) = steps(window.as_secs());
        let points = if step >= range { MIN_RUN_POINTS } else { 1 };
        Bars { seconds: self.seconds.min(window.as_secs_f64() / 3.0), points, ..self }
    }

    pub fn from(thresholds: &BTreeMap<String, f64>) -> Bars {
        let get = |name: &str, default: f64| thresholds.get(name).copied().filter(|v| v.is_finite() && *v > 0.0).unwrap_or(default);
        Bars { ratio: get(RATIO, DEFAULT_RATIO).max(1.0), z: get(Z, DEFAULT_Z), seconds: get(DURATION, DEFAULT_DURATION_SECONDS), points: 1 }
    }
}

/// Plan the reads: the watched signals the plan resolved (and the spare ones discovery found),
/// per scope, over the baseline and the window.
pub fn plan(
    rules: &RuleSet,
    signal_plan: &SignalPlan,
    spare_plan: &SignalPlan,
    selector: &Selector,
    p: &RunParams,
    replicas: Option<usize>,
    warnings: &mut Warnings,
) -> MovedPlan {
    let window = p.window.duration().as_secs();
    let (step, range) = steps(window);
    let trend_range = Duration::from_secs(range);
    let baseline_secs = p.baseline.duration().as_secs();
    let baseline_step = if baseline_secs / step > MAX_BASELINE_POINTS { baseline_secs.div_ceil(MAX_BASELINE_POINTS).div_ceil(step) * step } else { step };
    let ctx = QueryContext { selector: selector.clone(), range: trend_range, ..signal_plan.ctx.clone() };
    let correlated: BTreeSet<&str> = rules.correlations.iter().flat_map(|c| [c.cause.as_str(), c.effect.as_str()]).collect();
    let mut watched = BTreeMap::new();
    let mut resolved_of: BTreeMap<String, signals::Resolved> = BTreeMap::new();
    // How many replicas the answer would list: unknown (no running gauge to count them on) is
    // not read one by one either, since its cost could not be bounded.
    let too_many = match replicas {
        Some(n) if n > MAX_REPLICAS_WATCHED => Some(n),
        Some(_) => None,
        None => Some(0),
    };
    let mut not_per_replica = Vec::new();
    for (id, def) in &rules.signals {
        if def.worse.is_none() && !correlated.contains(id.as_str()) {
            continue;
        }
        if def.range.is_some() {
            continue;
        }
        let planned = if def.spare { spare_plan.signals.get(id) } else { signal_plan.signals.get(id) };
        let Some((w, b)) = planned else { continue };
        // Read where the family is in both windows, as one signal across both.
        let (Some(resolved), Some(_)) = (&w.resolved, &b.resolved) else { continue };
        if w.per_replica.is_some() {
            continue;
        }
        let Ok(q) = signals::build(&def.kind, resolved, &ctx) else { continue };
        resolved_of.insert(id.clone(), resolved.clone());
        watched
            .insert(id.clone(), Watched { id: id.clone(), worse: def.worse, query: q.value, metric: w.metric.clone(), spare: def.spare, per_replica: false });
        // The same, replica by replica, where the rules compare replicas on it (a grouping that
        // already tells replicas apart needs no second reading).
        if def.watch_replicas && too_many.is_some() {
            not_per_replica.push(id.clone());
        } else if def.watch_replicas && def.worse.is_some() && !p.group_by.contains(&p.replica_label) {
            let by_replica = QueryContext { group_by: p.group_by.iter().cloned().chain([p.replica_label.clone()]).collect(), ..ctx.clone() };
            if let Ok(q) = signals::build(&def.kind, resolved, &by_replica) {
                let watch = Watched { id: id.clone(), worse: def.worse, query: q.value, metric: w.metric.clone(), spare: def.spare, per_replica: true };
                watched.insert(replica_key(id), watch);
            }
        }
    }
    if let Some(n) = too_many.filter(|n| *n > 0 && !not_per_replica.is_empty()) {
        warnings.push(format!(
            "what else moved: {} watched per model only, not replica by replica: the fleet has {n} values of {} (at most {MAX_REPLICAS_WATCHED} are read one by one)",
            not_per_replica.join(", "),
            p.replica_label
        ));
    }
    // The model-level readings first, the per-replica ones in queries of their own: an answer that
    // lists replicas grows with the fleet, the others do not (tests/query_budget.rs).
    let (model_ids, replica_ids): (Vec<&String>, Vec<&String>) = watched.keys().partition(|k| !watched[*k].per_replica);
    let chunks: Vec<&[&String]> = model_ids.chunks(PER_QUERY).chain(replica_ids.chunks(PER_QUERY)).collect();
    if chunks.len() > MAX_QUERIES {
        let left: Vec<String> = chunks[MAX_QUERIES..].iter().flat_map(|c| c.iter().map(|s| s.to_string())).collect();
        warnings.push(format!(
            "what else moved: {} not watched (at most {} signals are read for it): {}",
            left.len(),
            MAX_QUERIES * PER_QUERY,
            left.join(", ")
        ));
    }
    let mut requests = Vec::new();
    let mut wants: Vec<Vec<Request>> = Vec::new();
    for chunk in chunks.iter().take(MAX_QUERIES) {
        let query = chunk.iter().map(|id| signals::queries::tagged(&watched[*id].query, LABEL, &escape_label_value(id))).collect::<Vec<_>>();
        let query = signals::queries::either(&query);
        let aligned = (p.window.start - p.baseline.start).num_seconds() % step as i64 == 0;
        let asked = if p.baseline.end == p.window.start && baseline_step == step && aligned {
            vec![Request::Range { query, start: p.baseline.start, end: p.window.end, step_seconds: step }]
        } else {
            vec![
                Request::Range { query: query.clone(), start: p.baseline.start, end: p.baseline.end, step_seconds: baseline_step },
                Request::Range { query, start: p.window.start, end: p.window.end, step_seconds: step },
            ]
        };
        requests.extend(asked.iter().cloned());
        wants.push(asked);
    }
    let ids: Vec<Vec<String>> = chunks.iter().take(MAX_QUERIES).map(|c| c.iter().map(|s| s.to_string()).collect()).collect();
    let kept: BTreeSet<String> = ids.iter().flatten().cloned().collect();
    watched.retain(|id, _| kept.contains(id));
    let reads = reads::plan(rules, &resolved_of, &watched, &ids, &wants, &ctx, p);
    MovedPlan { watched, requests, step, baseline_step, trend_range, reads }
}

/// One signal's points on one scope, baseline and window.
pub type Points = (Vec<(f64, f64)>, Vec<(f64, f64)>);

/// Where the baseline's and the window's points start (unix seconds). A trend point aggregates the
/// trend range before it, so a point within that range of a window's start still measures what came
/// before it (the tail of an incident before a healthy stretch, the baseline's own predecessor):
/// each window's points start once the range lies inside it. A window too short for that keeps a
/// third of its own length from the start instead (the baseline, enough points for a median; the
/// window, the shortest stretch a change must last).
pub fn starts(trend_range: f64, step: f64, baseline: (f64, f64), window: (f64, f64), seconds: f64) -> (f64, f64) {
    let b_len = baseline.1 - baseline.0;
    let w_len = window.1 - window.0;
    let b_lead = if b_len - trend_range >= step * MIN_BASELINE_POINTS as f64 { trend_range } else { trend_range.min(b_len / 3.0) };
    let w_lead = if w_len - trend_range >= seconds { trend_range } else { trend_range.min(w_len / 3.0) };
    (baseline.0 + b_lead, window.0 + w_lead)
}

/// The answers cut into per-signal, per-scope baseline and window points (see [`starts`]).
fn read_points(plan: &MovedPlan, answers: &Answers, p: &RunParams, seconds: f64, warnings: &mut Warnings) -> BTreeMap<(String, Scope), Points> {
    let mut out: BTreeMap<(String, Scope), Points> = BTreeMap::new();
    let ts = |t: &DateTime<Utc>| t.timestamp() as f64;
    let (b_from, w_from) = starts(
        plan.trend_range.as_secs_f64(),
        plan.step as f64,
        (ts(&p.baseline.start), ts(&p.baseline.end)),
        (ts(&p.window.start), ts(&p.window.end)),
        seconds,
    );
    let b_end = ts(&p.baseline.end);
    let w_start = ts(&p.window.start);
    let mut failed = 0;
    for req in &plan.requests {
        match answers.get(req) {
            Some(Ok(Response { data: Data::Matrix(series), .. })) => {
                for s in series {
                    let Some(id) = s.labels.get(LABEL) else { continue };
                    let Some(watched) = plan.watched.get(id) else { continue };
                    let replica = watched.per_replica.then_some(&p.replica_label);
                    let scope: Scope = p.group_by.iter().chain(replica).map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect();
                    let entry = out.entry((id.clone(), scope)).or_default();
                    for &(t, v) in &s.points {
                        if !v.is_finite() {
                            continue;
                        }
                        if t > w_start {
                            if t >= w_from {
                                entry.1.push((t, v));
                            }
                        } else if t >= b_from && t <= b_end {
                            entry.0.push((t, v));
                        }
                    }
                }
            }
            Some(Ok(_)) => failed += 1,
            Some(Err(_)) => failed += 1,
            None => {}
        }
    }
    if failed > 0 {
        warnings.push(format!("what else moved: {failed} of its {} queries failed, so changes outside the rules may be missing", plan.requests.len()));
    }
    for (b, w) in out.values_mut() {
        b.sort_by(|x, y| x.0.total_cmp(&y.0));
        w.sort_by(|x, y| x.0.total_cmp(&y.0));
    }
    out
}

pub use crate::stats::finite_median_of as median;

/// A signal's baseline level and spread: the median of its points and their median absolute
/// deviation scaled to read as a standard deviation (x 1.4826).
pub fn level(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let med = median(points.iter().map(|p| p.1))?;
    let mad = median(points.iter().map(|p| (p.1 - med).abs()))? * 1.4826;
    Some((med, mad))
}

/// A change found in one trend.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub baseline: f64,
    pub spread: f64,
    /// The median of the moved run's points.
    pub value: f64,
    pub ratio: Option<f64>,
    pub z: Option<f64>,
    /// Unix seconds: the last point before the run (the window's start when the run begins there).
    pub onset: f64,
    pub from_start: bool,
    pub seconds: f64,
    pub ongoing: bool,
}

/// How far `x` is past `base` in the direction that hurts, as a factor (`None`: the baseline is 0
/// and `x` past it, any factor).
fn factor(x: f64, base: f64, worse: Worse) -> Option<f64> {
    match worse {
        Worse::Up if base > 0.0 => Some(x / base),
        Worse::Down if x > 0.0 => Some(base / x),
        _ => None,
    }
}

/// Whether one window point moved past the bars.
fn moved(x: f64, base: f64, spread: f64, worse: Worse, floor: f64, bars: &Bars) -> bool {
    let harm = match worse {
        Worse::Up => x - base,
        Worse::Down => base - x,
    };
    if harm <= 0.0 || harm < floor || harm < bars.z * spread {
        return false;
    }
    match worse {
        Worse::Up => base <= 0.0 || x >= bars.ratio * base,
        // A signal at 0 cannot fall.
        Worse::Down => base > 0.0 && x * bars.ratio <= base,
    }
}

/// The first stretch of the window in which the trend stayed past the bars for at least
/// `bars.seconds`, measured against the baseline's median and spread.
pub fn detect(baseline: &[(f64, f64)], window: &[(f64, f64)], worse: Worse, floor: f64, bars: &Bars, step: f64, window_start: f64) -> Option<Change> {
    if baseline.len() < MIN_BASELINE_POINTS || window.is_empty() || step <= 0.0 {
        return None;
    }
    let (base, spread) = level(baseline)?;
    let flags: Vec<bool> = window.iter().map(|&(_, x)| moved(x, base, spread, worse, floor, bars)).collect();
    let mut i = 0;
    while i < flags.len() {
        if !flags[i] {
            i += 1;
            continue;
        }
        // A run of consecutive points (no step missing between them).
        let mut j = i;
        while j + 1 < flags.len() && flags[j + 1] && window[j + 1].0 - window[j].0 <= step * 1.5 {
            j += 1;
        }
        // Each point stands for the step up to it: n points span n steps (and at least
        // `bars.points` of them, see MIN_RUN_POINTS).
        let seconds = (j - i + 1) as f64 * step;
        if seconds >= bars.seconds && j - i + 1 >= bars.points {
            let value = median(window[i..=j].iter().map(|p| p.1))?;
            let harm_at = |x: f64| match worse {
                Worse::Up => x - base,
                Worse::Down => base - x,
            };
            // A change that built up (a leak, a trend's range filling) began before it passed every
            // bar: walk back over the points leading up to the run that were already past the
            // baseline by `moved_z` spreads and a tenth of the floor, each less than the next.
            let mut first = i;
            while first > 0 {
                let (prev, next) = (harm_at(window[first - 1].1), harm_at(window[first].1));
                let departed =
                    prev > 0.0 && prev >= bars.z * spread && prev >= floor / 10.0 && prev < next && window[first].0 - window[first - 1].0 <= step * 1.5;
                if !departed {
                    break;
                }
                first -= 1;
            }
            // Moved from the first point read (the window's first whose range lies inside it).
            let from_start = first == 0;
            let onset = if first == 0 { window_start } else { window[first - 1].0 };
            let harm = harm_at(value);
            return Some(Change {
                baseline: base,
                spread,
                value,
                ratio: factor(value, base, worse).map(|f| if worse == Worse::Up { f } else { 1.0 / f }),
                z: (spread > 0.0).then(|| harm / spread),
                onset,
                from_start,
                seconds,
                ongoing: j + 1 == flags.len(),
            });
        }
        i = j + 1;
    }
    None
}

/// How close a trend came to a change: over every stretch of consecutive window points spanning
/// `seconds`, the factor and the robust z it held throughout (its least point), the largest of
/// each over the window. What the thresholds were picked from (docs/how-it-decides.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Margin {
    /// The largest factor past the baseline median held for `seconds` (1 when never past it).
    pub ratio: f64,
    /// The largest robust z held for `seconds` (infinite when the baseline did not vary and the
    /// trend moved; 0 when it never did).
    pub z: f64,
    /// The largest change in the signal's unit held for `seconds`.
    pub change: f64,
    /// How near the stretch that came nearest got to every bar at once: over the stretch, the least
    /// of its factor's excess over the bar's (`(factor - 1) / (moved_ratio - 1)`), its robust z over
    /// `moved_z` and its change over the signal's floor. 1 or more: listed, unless a finding explains it.
    pub nearness: f64,
}

pub fn margin(baseline: &[(f64, f64)], window: &[(f64, f64)], worse: Worse, floor: f64, bars: &Bars) -> Option<Margin> {
    let (step, seconds) = (window.windows(2).map(|w| w[1].0 - w[0].0).fold(f64::INFINITY, f64::min), bars.seconds);
    let step = if step.is_finite() { step } else { seconds };
    if baseline.len() < MIN_BASELINE_POINTS || window.is_empty() || step <= 0.0 {
        return None;
    }
    let (base, spread) = level(baseline)?;
    let k = ((seconds / step).ceil() as usize).max(bars.points).max(1);
    if window.len() < k {
        return None;
    }
    let per_point: Vec<(f64, f64, f64)> = window
        .iter()
        .map(|&(_, x)| {
            let harm = match worse {
                Worse::Up => x - base,
                Worse::Down => base - x,
            };
            let ratio = if harm <= 0.0 { 1.0 } else { factor(x, base, worse).unwrap_or(f64::INFINITY) };
            let z = if harm <= 0.0 {
                0.0
            } else if spread > 0.0 {
                harm / spread
            } else {
                f64::INFINITY
            };
            (ratio, z, harm.max(0.0))
        })
        .collect();
    let near = |&(ratio, z, change): &(f64, f64, f64)| {
        let r = if bars.ratio > 1.0 { (ratio - 1.0) / (bars.ratio - 1.0) } else { f64::INFINITY };
        let f = if floor > 0.0 { change / floor } else { f64::INFINITY };
        r.min(z / bars.z).min(f)
    };
    let mut m = Margin { ratio: 1.0, z: 0.0, change: 0.0, nearness: 0.0 };
    for run in per_point.windows(k) {
        m.ratio = m.ratio.max(run.iter().map(|p| p.0).fold(f64::INFINITY, f64::min));
        m.z = m.z.max(run.iter().map(|p| p.1).fold(f64::INFINITY, f64::min));
        m.change = m.change.max(run.iter().map(|p| p.2).fold(f64::INFINITY, f64::min));
        m.nearness = m.nearness.max(run.iter().map(near).fold(f64::INFINITY, f64::min));
    }
    Some(m)
}

/// The family a metric name belongs to: `x_bucket`, `x_sum`, `x_count`, `x_total` are `x`.
fn family(metric: &str) -> &str {
    ["_bucket", "_sum", "_count", "_total"].iter().find_map(|s| metric.strip_suffix(s)).unwrap_or(metric)
}

/// The scope a finding is about, cut to the grouping labels.
fn base_scope(scope: &Scope, group_by: &[String]) -> Scope {
    group_by.iter().map(|l| (l.clone(), scope.get(l).cloned().unwrap_or_default())).collect()
}

/// A finding as what else moved reads it: as judged, with the severity and the cold start the
/// finishing stage gives it.
#[derive(Debug, Clone, Copy)]
pub struct Standing<'a> {
    pub finding: &'a Finding,
    pub severity: Severity,
    pub cold_start: bool,
}

impl<'a> Standing<'a> {
    /// A finding as it stands.
    pub fn of(finding: &'a Finding) -> Standing<'a> {
        Standing { finding, severity: finding.severity, cold_start: finding.cold_start.is_some() }
    }
}

/// What else moved: the changes no finding explains, largest first; the correlations of each
/// finding (in the order given); and every watched signal's points per scope (keyed by its key
/// among the watched: `id`, or `id@replica` for a per-replica reading).
pub struct Moved {
    pub unexplained: Vec<Unexplained>,
    pub correlations: Vec<Vec<Correlation>>,
    pub points: BTreeMap<(String, Scope), Points>,
}

/// Whether a warning or critical finding explains `signal`'s change on `scope`: its evidence reads
/// the signal's family, or a warning rule it explains (its "also explains", as `rules` define it)
/// reads the signal. A replica's cold start (an info finding with its note) explains the symptoms
/// on its model too: the latency of its first minutes is the start's.
pub fn explained(signal: &str, metric: &str, symptom: bool, scope: &Scope, findings: &[Standing], group_by: &[String], rules: &RuleSet) -> bool {
    let absorbed_reads = |f: &Finding| {
        f.also_consistent
            .iter()
            .filter(|a| a.severity >= Severity::Warning)
            .any(|a| rules.rule(&a.rule).is_some_and(|r| r.signals().iter().any(|s| s == signal)))
    };
    findings.iter().filter(|s| &base_scope(&s.finding.scope, group_by) == scope).any(|s| {
        let serious = s.severity >= Severity::Warning;
        (symptom && (serious || s.cold_start))
            || (serious
                && (s.finding.evidence.iter().any(|e| e.signal == signal || (!e.metric.is_empty() && family(&e.metric) == family(metric)))
                    || absorbed_reads(s.finding)))
    })
}

/// What else moved, read from the trends `plan` asked for, beside `findings`.
pub fn find(plan: &MovedPlan, answers: &Answers, findings: &[Standing], rules: &RuleSet, p: &RunParams, warnings: &mut Warnings) -> Moved {
    if plan.requests.is_empty() {
        return Moved { unexplained: Vec::new(), correlations: vec![Vec::new(); findings.len()], points: BTreeMap::new() };
    }
    let bars = Bars::from(&rules.thresholds).within(p.window.duration());
    let points = read_points(plan, answers, p, bars.seconds, warnings);
    let correlations = correlations(&points, findings, &rules.correlations, &p.group_by);
    let w_start = p.window.start.timestamp() as f64;
    let mut out = Vec::new();
    // The model's own readings first, so that a replica's change its model's reading already
    // lists is not said twice.
    let mut ordered: Vec<(&(String, Scope), &Points)> = points.iter().collect();
    ordered.sort_by_key(|((key, _), _)| plan.watched.get(key).is_some_and(|w| w.per_replica));
    let mut listed: BTreeSet<(String, Scope)> = BTreeSet::new();
    for ((key, scope), (b, w)) in ordered {
        let Some(watched) = plan.watched.get(key) else { continue };
        let id = &watched.id;
        let Some(def) = rules.signals.get(id) else { continue };
        let Some(worse) = watched.worse else { continue };
        let Some(change) = detect(b, w, worse, def.moved_floor, &bars, plan.step as f64, w_start) else { continue };
        let model = base_scope(scope, &p.group_by);
        if explained(id, &watched.metric, def.symptom, &model, findings, &p.group_by, rules)
            || (watched.per_replica && listed.contains(&(id.clone(), model.clone())))
        {
            continue;
        }
        listed.insert((id.clone(), model));
        out.push(Unexplained {
            signal: id.clone(),
            title: def.title.clone(),
            unit: def.unit.clone(),
            scope: scope.clone(),
            direction: if worse == Worse::Up { "up" } else { "down" }.to_string(),
            value: Some(change.value),
            baseline: Some(change.baseline),
            ratio: change.ratio,
            robust_z: change.z,
            onset: Utc.timestamp_opt(change.onset as i64, 0).single().unwrap_or(p.window.start),
            from_start: change.from_start,
            duration_seconds: change.seconds as u64,
            ongoing: change.ongoing,
            query: watched.query.clone(),
            metric: watched.metric.clone(),
            spare: watched.spare,
            series: Trend {
                step_seconds: plan.step,
                range_seconds: plan.trend_range.as_secs(),
                query: watched.query.clone(),
                baseline: b.clone(),
                window: w.clone(),
            },
        });
    }
    out.sort_by(|a, b| size(b).total_cmp(&size(a)).then_with(|| a.signal.cmp(&b.signal)).then_with(|| a.scope.cmp(&b.scope)));
    Moved { unexplained: out, correlations, points }
}

/// How large a change is, for ordering: its robust z, else its factor.
fn size(u: &Unexplained) -> f64 {
    u.robust_z.or(u.ratio).unwrap_or(f64::INFINITY)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STEP: f64 = 60.0;

    fn bars() -> Bars {
        Bars { ratio: DEFAULT_RATIO, z: DEFAULT_Z, seconds: DEFAULT_DURATION_SECONDS, points: 1 }
    }

    fn series(start: f64, values: &[f64]) -> Vec<(f64, f64)> {
        values.iter().enumerate().map(|(i, v)| (start + STEP * (i as f64 + 1.0), *v)).collect()
    }

    /// 27 baseline points around `level` with a small deterministic wiggle.
    fn steady(level: f64, wiggle: f64) -> Vec<f64> {
        (0..27).map(|i| level + wiggle * (((i * 7) % 5) as f64 - 2.0) / 2.0).collect()
    }

    const W0: f64 = 1800.0;

    #[test]
    fn a_step_up_that_lasts_is_a_change_with_its_onset_at_the_last_point_before_it() {
        let b = series(0.0, &steady(0.4, 0.02));
        let mut w = vec![0.41; 12];
        w.extend(vec![1.2; 18]);
        let c = detect(&b, &series(W0, &w), Worse::Up, 0.25, &bars(), STEP, W0).expect("a 3x step for 18 minutes");
        assert_eq!(c.onset, W0 + 12.0 * STEP);
        assert!(!c.from_start && c.ongoing);
        assert!((c.ratio.unwrap() - 3.0).abs() < 0.01, "{c:?}");
        assert!(c.z.unwrap() > 20.0, "{c:?}");
        assert_eq!(c.seconds, 18.0 * STEP);
    }

    #[test]
    fn a_change_that_builds_up_dates_from_where_it_left_the_baseline_not_where_it_passed_the_bars() {
        // A leak: flat for 10 minutes, then 0.08 more each minute; it passes 1.5x (0.6) after
        // about 3 minutes, but began at minute 10.
        let b = series(0.0, &steady(0.4, 0.002));
        let mut w = vec![0.4; 10];
        w.extend((1..=20).map(|k| 0.4 + 0.08 * k as f64));
        let c = detect(&b, &series(W0, &w), Worse::Up, 0.1, &bars(), STEP, W0).expect("a leak");
        assert_eq!(c.onset, W0 + 10.0 * STEP);
        assert!(!c.from_start);
        // A step stays dated at its last point before the run; a wiggle before it does not move it.
        let mut w = vec![0.4; 10];
        w[9] = 0.41;
        w.extend(vec![1.2; 20]);
        let c = detect(&b, &series(W0, &w), Worse::Up, 0.1, &bars(), STEP, W0).expect("a step");
        assert_eq!(c.onset, W0 + 10.0 * STEP);
    }

    #[test]
    fn one_spike_in_the_baseline_does_not_hide_a_change_and_one_in_the_window_is_none() {
        let mut base = steady(0.4, 0.02);
        base[10] = 30.0;
        let b = series(0.0, &base);
        let w: Vec<f64> = vec![1.2; 30];
        assert!(detect(&b, &series(W0, &w), Worse::Up, 0.25, &bars(), STEP, W0).is_some(), "a mean and standard deviation would follow the spike");
        let mut spike = vec![0.41; 30];
        spike[5] = 9.0;
        spike[6] = 9.0;
        assert_eq!(detect(&b, &series(W0, &spike), Worse::Up, 0.25, &bars(), STEP, W0), None);
    }

    #[test]
    fn a_change_shorter_than_the_duration_is_none_and_one_just_long_enough_counts() {
        let b = series(0.0, &steady(0.4, 0.02));
        let mut w = vec![0.41; 30];
        for x in &mut w[10..14] {
            *x = 1.5;
        }
        assert_eq!(detect(&b, &series(W0, &w), Worse::Up, 0.25, &bars(), STEP, W0), None, "4 minutes");
        w[14] = 1.5;
        let c = detect(&b, &series(W0, &w), Worse::Up, 0.25, &bars(), STEP, W0).expect("5 minutes");
        assert!(!c.ongoing);
    }

    #[test]
    fn a_nearly_constant_signal_needs_the_relative_and_absolute_floors_not_just_sigmas() {
        // A constant baseline: any wiggle is infinitely many deviations.
        let b = series(0.0, &[0.05; 27]);
        let w = vec![0.06; 30];
        assert_eq!(detect(&b, &series(W0, &w), Worse::Up, 0.0, &bars(), STEP, W0), None, "1.2x is under the ratio");
        let w = vec![0.09; 30];
        assert!(detect(&b, &series(W0, &w), Worse::Up, 0.0, &bars(), STEP, W0).unwrap().z.is_none(), "no spread: no z");
        assert_eq!(detect(&b, &series(W0, &w), Worse::Up, 0.25, &bars(), STEP, W0), None, "40 ms more is under the floor");
    }

    #[test]
    fn a_noisy_baseline_raises_the_bar_by_its_spread() {
        let b = series(0.0, &steady(1.0, 0.8));
        let w = vec![2.0; 30];
        assert_eq!(detect(&b, &series(W0, &w), Worse::Up, 0.0, &bars(), STEP, W0), None, "2x, but within six spreads");
        let w = vec![8.0; 30];
        assert!(detect(&b, &series(W0, &w), Worse::Up, 0.0, &bars(), STEP, W0).is_some());
    }

    #[test]
    fn a_fall_counts_only_for_signals_that_hurt_going_down_and_a_rise_only_for_those_going_up() {
        let b = series(0.0, &steady(0.6, 0.01));
        let w = vec![0.1; 30];
        let c = detect(&b, &series(W0, &w), Worse::Down, 0.1, &bars(), STEP, W0).expect("a hit ratio collapsing");
        assert!(c.from_start);
        assert!((c.ratio.unwrap() - 1.0 / 6.0).abs() < 0.01);
        assert_eq!(detect(&b, &series(W0, &w), Worse::Up, 0.1, &bars(), STEP, W0), None);
        assert_eq!(detect(&b, &series(W0, &vec![0.95; 30]), Worse::Down, 0.1, &bars(), STEP, W0), None);
        // From zero nothing can fall; up from zero, only the floor bars it.
        let zero = series(0.0, &[0.0; 27]);
        assert_eq!(detect(&zero, &series(W0, &[0.0; 30]), Worse::Down, 0.1, &bars(), STEP, W0), None);
        assert_eq!(detect(&zero, &series(W0, &[0.5; 30]), Worse::Up, 1.0, &bars(), STEP, W0), None);
        let c = detect(&zero, &series(W0, &[3.0; 30]), Worse::Up, 1.0, &bars(), STEP, W0).unwrap();
        assert_eq!((c.ratio, c.z), (None, None));
    }

    #[test]
    fn the_margin_says_how_near_a_trend_came_to_every_bar_and_reaches_1_exactly_where_detect_lists() {
        let b = series(0.0, &steady(0.4, 0.02));
        let flat = detect_and_margin(&b, &[0.41; 30]);
        assert!(flat.1.nearness < 0.1, "{:?}", flat.1);
        assert_eq!(detect_and_margin(&b, &[0.3; 30]).1.nearness, 0.0, "below the baseline: no harm at all");
        assert!(flat.0.is_none());
        // 1.2x for the whole window: a fifth of the way to 1.5x... and well past six spreads.
        let (listed, m) = detect_and_margin(&b, &[0.48; 30]);
        assert!(listed.is_none() && (m.nearness - 0.32).abs() < 0.01 && (m.ratio - 1.2).abs() < 1e-9, "{m:?}");
        // 2x, 0.4 more than the 0.25 floor, for 5 minutes: listed, and nearness past 1.
        let mut w = vec![0.41; 30];
        for x in &mut w[20..25] {
            *x = 0.8;
        }
        let (listed, m) = detect_and_margin(&b, &w);
        assert!(listed.is_some() && m.nearness >= 1.0, "{m:?}");
        // The same for 4 minutes: neither.
        w[24] = 0.41;
        let (listed, m) = detect_and_margin(&b, &w);
        assert!(listed.is_none() && m.nearness < 1.0, "{m:?}");
    }

    fn detect_and_margin(b: &[(f64, f64)], w: &[f64]) -> (Option<Change>, Margin) {
        let w = series(W0, w);
        (detect(b, &w, Worse::Up, 0.25, &bars(), STEP, W0), margin(b, &w, Worse::Up, 0.25, &bars()).unwrap())
    }

    #[test]
    fn the_step_is_the_range_where_the_window_holds_ten_of_it_so_each_sample_is_read_once() {
        // The default half hour: rates over 3 minutes every 3 minutes, ten points.
        assert_eq!(steps(1800), (180, 180));
        assert_eq!(steps(1200), (120, 120));
        assert_eq!(steps(3600), (360, 360));
        // Past 100 minutes the range stops at 10 minutes: the step too, more points.
        assert_eq!(steps(7200), (600, 600));
        assert_eq!(steps(86400), (2880, 600));
        // A shorter window keeps the fine step, its ranges overlapping.
        assert_eq!(steps(900), (30, 120));
        assert_eq!(steps(180), (15, 120));
    }

    #[test]
    fn where_the_ranges_do_not_overlap_a_change_needs_three_points_whatever_its_seconds() {
        let coarse = Bars::from(&BTreeMap::new()).within(Duration::from_secs(1800));
        assert_eq!((coarse.seconds, coarse.points), (300.0, MIN_RUN_POINTS));
        assert_eq!(Bars::from(&BTreeMap::new()).within(Duration::from_secs(900)).points, 1);
        let b = series(0.0, &steady(0.07, 0.1));
        let at = |values: &[f64]| values.iter().enumerate().map(|(i, v)| (W0 + 180.0 * (i as f64 + 1.0), *v)).collect::<Vec<_>>();
        // Two 3-minute points past every bar: 360 s, but one burst can straddle two points.
        let two = at(&[0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.1, 0.8, 1.4, 1.6]);
        assert_eq!(detect(&b, &two, Worse::Up, 1.0, &coarse, 180.0, W0), None);
        assert!(margin(&b, &two, Worse::Up, 1.0, &coarse).unwrap().nearness < 1.0);
        let three = at(&[0.0, 0.1, 0.0, 0.0, 0.0, 0.0, 0.1, 1.3, 1.4, 1.6]);
        let c = detect(&b, &three, Worse::Up, 1.0, &coarse, 180.0, W0).expect("three points, 9 minutes");
        assert_eq!((c.onset, c.seconds), (W0 + 7.0 * 180.0, 540.0));
        assert!(margin(&b, &three, Worse::Up, 1.0, &coarse).unwrap().nearness >= 1.0);
    }

    #[test]
    fn too_few_baseline_points_decide_nothing() {
        let b = series(0.0, &[0.4; 5]);
        assert_eq!(detect(&b, &series(W0, &[5.0; 30]), Worse::Up, 0.0, &bars(), STEP, W0), None);
    }

    #[test]
    fn a_quantile_flipping_between_two_buckets_is_not_a_change() {
        // Interpolated P95 alternating between two neighbouring bucket values, more often the
        // higher one in the window: never a sustained run past 1.5x.
        let base: Vec<f64> = (0..27).map(|i| if i % 3 == 0 { 0.75 } else { 0.45 }).collect();
        let win: Vec<f64> = (0..30).map(|i| if i % 2 == 0 { 0.75 } else { 0.45 }).collect();
        assert_eq!(detect(&series(0.0, &base), &series(W0, &win), Worse::Up, 0.25, &bars(), STEP, W0), None);
    }

    #[test]
    fn pearson_reads_moving_together_and_needs_six_shared_points() {
        let a = series(0.0, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        let b = series(0.0, &[2.0, 4.1, 6.0, 8.2, 10.0, 12.1, 14.0]);
        assert!(pearson(&a, &b).unwrap().0 > 0.99);
        let c = series(0.0, &[7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0]);
        assert!(pearson(&a, &c).unwrap().0 < -0.99);
        assert_eq!(pearson(&a[..5], &b[..5]), None);
        assert_eq!(pearson(&a, &series(0.0, &[1.0; 7])), None, "a flat line correlates with nothing");
    }

    fn finding(rule: &str, severity: Severity, model: &str, signals: &[(&str, &str)]) -> Finding {
        let mut f = Finding::bare(rule, severity, [("model_name".to_string(), model.to_string())].into_iter().collect());
        f.evidence = signals
            .iter()
            .map(|(s, m)| crate::report::Evidence {
                signal: s.to_string(),
                title: String::new(),
                unit: String::new(),
                value: None,
                baseline: None,
                threshold: Default::default(),
                passed: true,
                query: String::new(),
                metric: m.to_string(),
                low_confidence: false,
                observations: None,
                limits: vec![],
                series: None,
                value_bound: None,
                baseline_bound: None,
                same_bucket: false,
            })
            .collect();
        f
    }

    fn standing(fs: &[Finding]) -> Vec<Standing<'_>> {
        fs.iter().map(Standing::of).collect()
    }

    #[test]
    fn a_finding_explains_its_own_family_on_its_scope_and_symptoms_there_but_not_elsewhere() {
        let rules = crate::rules::load_builtin().unwrap();
        let by = vec!["model_name".to_string()];
        let scope = |m: &str| -> Scope { [("model_name".to_string(), m.to_string())].into_iter().collect() };
        let kv = finding(
            "kv-cache-pressure",
            Severity::Critical,
            "a",
            &[("kv_usage_avg", "vllm:kv_cache_usage_perc"), ("ttft_p95", "vllm:time_to_first_token_seconds_bucket")],
        );
        let fs = vec![kv];
        assert!(explained("ttft_mean", "vllm:time_to_first_token_seconds_sum", false, &scope("a"), &standing(&fs), &by, &rules), "same family");
        assert!(explained("queue_p95", "vllm:request_queue_time_seconds_bucket", true, &scope("a"), &standing(&fs), &by, &rules), "a symptom on its scope");
        assert!(!explained("prefix_hit_ratio", "vllm:prefix_cache_hits_total", false, &scope("a"), &standing(&fs), &by, &rules), "another family");
        assert!(!explained("queue_p95", "vllm:request_queue_time_seconds_bucket", true, &scope("b"), &standing(&fs), &by, &rules), "another model");
        let info = vec![finding("gpu-underutilized", Severity::Info, "a", &[("kv_usage_avg", "vllm:kv_cache_usage_perc")])];
        assert!(!explained("kv_usage_avg", "vllm:kv_cache_usage_perc", false, &scope("a"), &standing(&info), &by, &rules), "info explains nothing");
        assert!(!explained("itl_p95", "vllm:inter_token_latency_seconds_bucket", true, &scope("a"), &standing(&info), &by, &rules), "info explains nothing");
        let mut cold = finding("replica-outlier", Severity::Info, "a", &[("itl_replica_gap", "vllm:inter_token_latency_seconds_bucket")]);
        cold.scope.insert("instance".into(), "a-0:8000".into());
        cold.cold_start = Some(crate::report::ColdStart {
            replica: "a-0:8000".into(),
            started: Utc.timestamp_opt(0, 0).unwrap(),
            warm: None,
            warm_up_seconds: 60,
            limit_seconds: 600,
            peak_ttft_ratio: 2.0,
            peak_itl_ratio: 3.0,
            against_peers: true,
            slow_factor: 2.0,
            text: String::new(),
        });
        let cold = vec![cold];
        assert!(
            explained("itl_p95", "vllm:inter_token_latency_seconds_bucket", true, &scope("a"), &standing(&cold), &by, &rules),
            "a replica's cold start explains its model's latency"
        );
        assert!(!explained("kv_usage_avg", "vllm:kv_cache_usage_perc", false, &scope("a"), &standing(&cold), &by, &rules), "but not what is not a symptom");
        // The real lab's rejections: requests-rejected explains http-errors, so the 5xx share it
        // reads is explained too; an info rule explained beside it explains nothing.
        let mut rejected = finding("requests-rejected", Severity::Critical, "a", &[("rejections_rate", "vllm:request_rejected_total")]);
        let also = |rule: &str, severity| crate::report::AlsoConsistent { rule: rule.into(), title: String::new(), severity, score: 1.0 };
        rejected.also_consistent = vec![also("http-errors", Severity::Warning)];
        let rejected = vec![rejected];
        assert!(explained("http_5xx_ratio", "http_requests_total", false, &scope("a"), &standing(&rejected), &by, &rules), "what a rule it explains reads");
        assert!(!explained("http_5xx_ratio", "http_requests_total", false, &scope("b"), &standing(&rejected), &by, &rules), "on its scope only");
        let mut quiet = rejected[0].clone();
        quiet.also_consistent = vec![also("http-errors", Severity::Info)];
        assert!(!explained("http_5xx_ratio", "http_requests_total", false, &scope("a"), &standing(&[quiet]), &by, &rules), "not an info one's");
    }

    #[test]
    fn correlation_supports_a_finding_reading_the_cause_and_doubts_one_reading_only_the_effect() {
        let by = vec!["model_name".to_string()];
        let scope: Scope = [("model_name".to_string(), "a".to_string())].into_iter().collect();
        let rising: Vec<f64> = (0..30).map(|i| 0.3 + 0.02 * i as f64).collect();
        let ttft: Vec<f64> = rising.iter().map(|k| 0.2 + 3.0 * k).collect();
        let mut points = BTreeMap::new();
        points.insert(("kv_usage_avg".to_string(), scope.clone()), (series(0.0, &rising[..15]), series(900.0, &rising[15..])));
        points.insert(("ttft_p95".to_string(), scope.clone()), (series(0.0, &ttft[..15]), series(900.0, &ttft[15..])));
        let fs = vec![
            finding("kv-cache-pressure", Severity::Critical, "a", &[("kv_usage_avg", "")]),
            finding("slow-input-processing", Severity::Warning, "a", &[("ttft_p95", "")]),
            finding("gpu-underutilized", Severity::Info, "a", &[("kv_usage_avg", "")]),
        ];
        let found = correlations(&points, &standing(&fs), &crate::rules::load_builtin().unwrap().correlations, &by);
        assert_eq!(found[0].len(), 1);
        assert!(found[0][0].supports && found[0][0].coefficient > 0.99);
        assert!(!found[1][0].supports && found[1][0].text.contains("doubt"), "{:?}", found[1]);
        assert!(found[2].is_empty());
        // A finding that needs the effect not to have risen (the real lab's overload holds ITL under
        // 1.5x its baseline) does not claim it: no doubt is cast on it.
        let mut guarded = finding("load-exceeds-capacity", Severity::Critical, "a", &[("ttft_p95", "")]);
        guarded.evidence[0].limits = vec![crate::report::Limit { label: "< 1.5x baseline".into(), value: 1.5, side: crate::report::LimitSide::Below }];
        let found = correlations(&points, &standing(&[guarded.clone()]), &crate::rules::load_builtin().unwrap().correlations, &by);
        assert!(found[0].is_empty(), "{:?}", found[0]);
        guarded.evidence[0].limits.push(crate::report::Limit { label: "> 3 s".into(), value: 3.0, side: crate::report::LimitSide::Above });
        let found = correlations(&points, &standing(&[guarded]), &crate::rules::load_builtin().unwrap().correlations, &by);
        assert!(found[0][0].text.contains("doubt"), "a finding that also claims its rise: {:?}", found[0]);
        // One whose condition on the effect another signal met (the router lab's KV pressure: ITL
        // or TTFT or queue time, and TTFT rose) stands on that one.
        use crate::report::{Term, Threshold};
        let mut either = finding("kv-cache-pressure", Severity::Critical, "a", &[("ttft_p95", ""), ("queue_p95", "")]);
        either.evidence[0].threshold =
            Threshold { lines: vec![Term::Group { all: false, parts: vec![Term::Text("> 3 s".into())], see: vec!["queue_p95".into()] }] };
        either.evidence[1].passed = true;
        let found = correlations(&points, &standing(&[either.clone()]), &crate::rules::load_builtin().unwrap().correlations, &by);
        assert!(found[0].is_empty(), "{:?}", found[0]);
        either.evidence[1].passed = false;
        let found = correlations(&points, &standing(&[either]), &crate::rules::load_builtin().unwrap().correlations, &by);
        assert!(found[0].iter().any(|c| !c.supports), "the other signal did not meet it: {:?}", found[0]);
        // Unrelated trends say nothing.
        let flat: Vec<f64> = (0..30).map(|i| 0.5 + 0.01 * ((i * 13) % 7) as f64).collect();
        points.insert(("ttft_p95".to_string(), scope.clone()), (series(0.0, &flat[..15]), series(900.0, &flat[15..])));
        let fs = vec![finding("kv-cache-pressure", Severity::Critical, "a", &[("kv_usage_avg", "")])];
        let found = correlations(&points, &standing(&fs), &crate::rules::load_builtin().unwrap().correlations, &by);
        assert!(found[0].is_empty(), "{:?}", found[0]);
    }

    #[test]
    fn a_correlation_says_its_points_needs_ten_and_never_blames_a_healthy_cause() {
        let by = vec!["model_name".to_string()];
        let scope: Scope = [("model_name".to_string(), "a".to_string())].into_iter().collect();
        let with = |kv: &[f64], ttft: &[f64], half: usize| {
            let mut points = BTreeMap::new();
            points.insert(("kv_usage_avg".to_string(), scope.clone()), (series(0.0, &kv[..half]), series(900.0, &kv[half..])));
            points.insert(("ttft_p95".to_string(), scope.clone()), (series(0.0, &ttft[..half]), series(900.0, &ttft[half..])));
            let fs = vec![finding("kv-cache-pressure", Severity::Critical, "a", &[("kv_usage_avg", "")])];
            correlations(&points, &standing(&fs), &crate::rules::load_builtin().unwrap().correlations, &by).remove(0)
        };
        let rising: Vec<f64> = (0..30).map(|i| 0.3 + 0.02 * i as f64).collect();
        let ttft: Vec<f64> = rising.iter().map(|k| 0.2 + 3.0 * k).collect();
        let found = with(&rising, &ttft, 15);
        assert_eq!(found.len(), 1);
        assert!(found[0].text.ends_with(&format!("(r = 1.00 over {} points)", found[0].points)), "{}", found[0].text);
        // Eight shared points: too few to say anything.
        assert!(with(&rising[..8], &ttft[..8], 4).is_empty());
        // KV-cache usage moving with TTFT at 5-11%: not pressure, whatever the coefficient.
        let low: Vec<f64> = (0..30).map(|i| 0.05 + 0.002 * i as f64).collect();
        let ttft_low: Vec<f64> = low.iter().map(|k| 0.2 + 30.0 * k).collect();
        assert!(with(&low, &ttft_low, 15).is_empty());
        // An effect that stayed at its baseline's level (a rise of a few percent, however
        // correlated) is not raised by anything.
        let flat_ttft: Vec<f64> = rising.iter().map(|k| 1.0 + 0.01 * k).collect();
        assert!(with(&rising, &flat_ttft, 15).is_empty());
    }
}
