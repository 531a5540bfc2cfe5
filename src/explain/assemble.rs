//! Stage: assemble. Answers become values: each signal's value per scope in the window and the
//! baseline (with the replica a per-replica signal names), and the fleet's label counts.

use std::collections::{BTreeMap, BTreeSet};

use super::fetch::Answers;
use super::plan::{Planned, SignalPlan};
use crate::report::{FailureKind, QueryFailure, RunParams, Scope, Warnings};
use crate::rules::eval::{Availability, SignalTable, SignalValues, WindowValues};
use crate::signals;
use crate::source::{Data, Request, Response, Sample};

/// The scope a sample belongs to: its values of the grouping labels (empty when it lacks one).
fn scope_of(s: &Sample, group_by: &[String]) -> Scope {
    group_by.iter().map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect()
}

fn samples(resp: &Response) -> &[Sample] {
    match &resp.data {
        Data::Vector(samples) => samples,
        _ => &[],
    }
}

/// A bucket answer's samples with their labels looked up once. A histogram read answers several
/// signals in each window (two quantiles, an outlier, a burn rate, observation counts, the check
/// that every replica has the same bounds); each of them is a pass over these rows instead of a
/// new grouping of the answer's label sets, which at 1,000 replicas hold tens of thousands of
/// samples. [`signal_table`] builds the rows of one answer at a time and drops them before the
/// next, so they cost no more memory than one grouping did.
pub(crate) struct BucketRows<'a> {
    /// The replica label the rows name, or "" when no reader asks for replicas.
    replica_label: &'a str,
    /// Each scope's values of the grouping labels ("" for a label a sample lacks), in order of
    /// first appearance.
    scopes: Vec<Vec<&'a str>>,
    /// Each replica's value of the replica label ("" when a sample lacks it).
    replicas: Vec<&'a str>,
    /// Each `le` value as written, and as a number (None when it is not one: Prometheus leaves
    /// such a bucket out).
    les: Vec<(&'a str, Option<f64>)>,
    /// One row per sample with an `le` label, in the answer's order.
    rows: Vec<BucketRow>,
}

/// A sample of a bucket answer: indexes into its scopes, replicas and `le` values, and its value.
struct BucketRow {
    scope: u32,
    replica: u32,
    le: u32,
    v: f64,
}

impl<'a> BucketRows<'a> {
    pub(crate) fn new(resp: &'a Response, group_by: &[String], replica_label: &'a str) -> BucketRows<'a> {
        let mut scope_of: std::collections::HashMap<Vec<&'a str>, u32> = std::collections::HashMap::new();
        let mut replica_of: std::collections::HashMap<&'a str, u32> = std::collections::HashMap::new();
        let mut le_of: std::collections::HashMap<&'a str, u32> = std::collections::HashMap::new();
        let mut out = BucketRows { replica_label, scopes: Vec::new(), replicas: Vec::new(), les: Vec::new(), rows: Vec::new() };
        let mut key: Vec<&'a str> = Vec::with_capacity(group_by.len());
        for s in samples(resp) {
            let Some(le) = s.labels.get("le") else { continue };
            key.clear();
            key.extend(group_by.iter().map(|l| s.labels.get(l).map_or("", String::as_str)));
            let scope = match scope_of.get(&key) {
                Some(&i) => i,
                None => {
                    out.scopes.push(key.clone());
                    scope_of.insert(key.clone(), (out.scopes.len() - 1) as u32);
                    (out.scopes.len() - 1) as u32
                }
            };
            let name = if replica_label.is_empty() { "" } else { s.labels.get(replica_label).map_or("", String::as_str) };
            let replica = *replica_of.entry(name).or_insert_with(|| {
                out.replicas.push(name);
                (out.replicas.len() - 1) as u32
            });
            let le = *le_of.entry(le).or_insert_with(|| {
                out.les.push((le, crate::local::functions::parse_go_float(le)));
                (out.les.len() - 1) as u32
            });
            out.rows.push(BucketRow { scope, replica, le, v: s.v });
        }
        out
    }

    fn le(&self, r: &BucketRow) -> &'a str {
        self.les[r.le as usize].0
    }

    fn bound(&self, r: &BucketRow) -> Option<f64> {
        self.les[r.le as usize].1
    }

    fn scope(&self, group_by: &[String], i: u32) -> Scope {
        group_by.iter().cloned().zip(self.scopes[i as usize].iter().map(|v| v.to_string())).collect()
    }

    /// Per scope, `item` of each row that gives one, in the answer's order; a scope without any is
    /// left out.
    fn per_scope<T>(&self, group_by: &[String], mut item: impl FnMut(&BucketRow) -> Option<T>) -> BTreeMap<Scope, Vec<T>> {
        let mut per: Vec<Vec<T>> = self.scopes.iter().map(|_| Vec::new()).collect();
        for r in &self.rows {
            if let Some(x) = item(r) {
                per[r.scope as usize].push(x);
            }
        }
        per.into_iter().enumerate().filter(|(_, xs)| !xs.is_empty()).map(|(i, xs)| (self.scope(group_by, i as u32), xs)).collect()
    }

    /// Per scope and replica (the scope's labels and the replica label), `item` of each row that
    /// gives one, in the answer's order.
    fn per_replica<T>(&self, group_by: &[String], mut item: impl FnMut(&BucketRow) -> Option<T>) -> BTreeMap<Scope, Vec<T>> {
        let mut per: std::collections::HashMap<(u32, u32), Vec<T>> = std::collections::HashMap::new();
        for r in &self.rows {
            if let Some(x) = item(r) {
                per.entry((r.scope, r.replica)).or_default().push(x);
            }
        }
        per.into_iter()
            .map(|((scope, replica), xs)| {
                let mut key = self.scope(group_by, scope);
                key.insert(self.replica_label.to_string(), self.replicas[replica as usize].to_string());
                (key, xs)
            })
            .collect()
    }

    /// The bounds some replicas lack ([`signals::uncovered_bounds_per_replica`]); empty when every
    /// replica has the same.
    fn uncovered(&self) -> Vec<f64> {
        let mut per: std::collections::HashMap<(u32, u32), Vec<&str>> = std::collections::HashMap::new();
        for r in &self.rows {
            per.entry((r.scope, r.replica)).or_default().push(self.le(r));
        }
        signals::uncovered_bounds_per_replica(per.into_values())
    }
}

/// Turn a vector answer into values per scope.
pub fn by_scope(resp: &Response, group_by: &[String]) -> BTreeMap<Scope, f64> {
    match &resp.data {
        Data::Vector(samples) => samples.iter().map(|s| (scope_of(s, group_by), s.v)).collect(),
        _ => BTreeMap::new(),
    }
}

/// Bucket-rate answers (`sum by (le, G) (...)`): per scope, the `q` quantile interpolated as
/// `histogram_quantile` does (Prometheus' rules: the `+Inf` bucket required, bounds merged, counts
/// made monotonic, the rank interpolated linearly inside its bucket, the last finite bound for a
/// rank in `+Inf`). Samples whose `le` is not a number are left out, as Prometheus does.
pub(crate) fn quantiles(rows: &BucketRows, group_by: &[String], q: f64) -> BTreeMap<Scope, f64> {
    let per = rows.per_scope(group_by, |r| Some((rows.bound(r)?, r.v)));
    per.into_iter().map(|(scope, mut buckets)| (scope, crate::local::functions::bucket_quantile(q, &mut buckets))).collect()
}

/// Per-replica bucket rates (`sum by (le, G, R) (...)`, `rows` naming the replica label R) become
/// the per-replica quantiles `histogram_quantile(q, ...)` would return: one sample per replica,
/// labelled by the grouping labels and the replica label (a replica whose buckets give no
/// quantile has NaN, as there).
/// Replicas observed at less than `min_rate` per second in the window (their `+Inf` buckets' rate)
/// are left out: their quantile is one of a handful of requests, nothing to compare.
pub(crate) fn replica_quantiles(resp: &Response, rows: &BucketRows, group_by: &[String], q: f64, min_rate: f64) -> Response {
    let t = samples(resp).first().map_or(0.0, |s| s.t);
    let per = rows.per_replica(group_by, |r| Some((rows.bound(r)?, r.v)));
    let samples = per
        .into_iter()
        .filter(|(_, buckets)| min_rate <= 0.0 || buckets.iter().filter(|(b, _)| *b == f64::INFINITY).map(|(_, rate)| rate).sum::<f64>() >= min_rate)
        .map(|(key, mut buckets)| {
            // The labels the answer carries (a replica or scope label it lacks is absent, not empty).
            let labels: crate::prom::Labels = key.into_iter().filter(|(_, v)| !v.is_empty()).collect();
            Sample { labels: labels.into(), t, v: crate::local::functions::bucket_quantile(q, &mut buckets) }
        })
        .collect();
    Response { data: Data::Vector(samples), warnings: resp.warnings.clone(), infos: resp.infos.clone() }
}

type Culprits = BTreeMap<Scope, BTreeMap<String, String>>;

/// Outlier answers: one series per replica. Per scope, the worst replica over the median of the
/// others, as `topk by (G) (1, X) / on (G) group_left quantile by (G) (0.5, X unless on (G, R)
/// topk by (G) (1, X))` computes it: NaN ranks lowest in both, the median interpolates between the
/// two middle values, and a scope with one replica has no value (nothing to compare with). Ties
/// go to the first replica in label order.
///
/// With `gap`, the worst replica minus that median instead: how far apart, in the signal's unit.
pub fn outliers(resp: &Response, group_by: &[String], label: &str, gap: bool) -> (BTreeMap<Scope, f64>, Culprits) {
    let mut values = BTreeMap::new();
    let mut culprits = BTreeMap::new();
    let Data::Vector(samples) = &resp.data else { return (values, culprits) };
    let mut per: BTreeMap<Scope, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        per.entry(scope_of(s, group_by)).or_default().push(s);
    }
    for (scope, mut replicas) in per {
        replicas.sort_by(|a, b| a.labels.cmp(&b.labels));
        let Some(top) = replicas.iter().copied().reduce(|best, s| if nan_lowest(s.v, best.v).is_gt() { s } else { best }) else { continue };
        let top_name = top.labels.get(label);
        let mut others: Vec<f64> = replicas.iter().filter(|s| s.labels.get(label) != top_name).map(|s| s.v).collect();
        if others.is_empty() {
            continue;
        }
        let median = crate::local::math::quantile(0.5, &mut others);
        let v = if gap { top.v - median } else { top.v / median };
        // 0/0 (all replicas idle) is NaN: no outlier to speak of.
        if v.is_nan() {
            continue;
        }
        values.insert(scope.clone(), v);
        if let Some(name) = top_name {
            culprits.insert(scope, [(label.to_string(), name.clone())].into_iter().collect());
        }
    }
    (values, culprits)
}

/// Rank answers: one series per (replica, data-parallel rank). Per replica, the worst rank over (or
/// minus) the median of the replica's other ranks, as [`outliers`] compares replicas; per scope, the
/// replica where that is largest, named with its rank. A replica with one rank has nothing to compare.
pub fn rank_outliers(resp: &Response, group_by: &[String], label: &str, gap: bool) -> (BTreeMap<Scope, f64>, Culprits) {
    let mut values: BTreeMap<Scope, f64> = BTreeMap::new();
    let mut culprits: Culprits = BTreeMap::new();
    let Data::Vector(samples) = &resp.data else { return (values, culprits) };
    let mut per: BTreeMap<(Scope, String), Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        let replica = s.labels.get(label).cloned().unwrap_or_default();
        per.entry((scope_of(s, group_by), replica)).or_default().push(s);
    }
    for ((scope, replica), ranks) in per {
        let one = Response { data: Data::Vector(ranks.into_iter().cloned().collect()), warnings: Vec::new(), infos: Vec::new() };
        let (v, c) = outliers(&one, group_by, signals::RANK_LABEL, gap);
        let (Some(v), Some(rank)) = (v.get(&scope).copied(), c.get(&scope).and_then(|c| c.get(signals::RANK_LABEL))) else { continue };
        if values.get(&scope).is_none_or(|best| v > *best) {
            values.insert(scope.clone(), v);
            culprits.insert(scope, [(label.to_string(), replica.clone()), (signals::RANK_LABEL.to_string(), rank.clone())].into_iter().collect());
        }
    }
    (values, culprits)
}

/// Per-replica answers reduced to the largest value per scope, as `max by (G)` would (NaN only
/// where every replica is NaN); the replica holding it is named where it is above 0 (ties: the
/// first in label order).
pub fn largest(resp: &Response, group_by: &[String], label: &str) -> (BTreeMap<Scope, f64>, Culprits) {
    let mut best: BTreeMap<Scope, &Sample> = BTreeMap::new();
    let Data::Vector(samples) = &resp.data else { return (BTreeMap::new(), BTreeMap::new()) };
    let mut sorted: Vec<&Sample> = samples.iter().collect();
    sorted.sort_by(|a, b| a.labels.cmp(&b.labels));
    for s in sorted {
        let e = best.entry(scope_of(s, group_by)).or_insert(s);
        if nan_lowest(s.v, e.v).is_gt() {
            *e = s;
        }
    }
    let values = best.iter().map(|(scope, s)| (scope.clone(), s.v)).collect();
    let culprits = best
        .into_iter()
        .filter(|(_, s)| s.v > 0.0)
        .filter_map(|(scope, s)| Some((scope, [(label.to_string(), s.labels.get(label)?.clone())].into_iter().collect())))
        .collect();
    (values, culprits)
}

/// PromQL's order for `topk` and `quantile`: NaN below every number.
fn nan_lowest(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.total_cmp(&b),
    }
}

/// Per-replica answers listing replicas: the value is how many per scope, and a lone replica is
/// named (by the replica label, and by `instance` too when the answer carries it).
pub fn listed(resp: &Response, group_by: &[String], label: &str) -> (BTreeMap<Scope, f64>, Culprits) {
    // Per scope, per replica: every other label its series carry (`instance` beside a pod, a GPU's
    // `UUID` and `Hostname` where the query keeps them), each with the values seen.
    let mut per: BTreeMap<Scope, BTreeMap<String, BTreeMap<String, BTreeSet<String>>>> = BTreeMap::new();
    if let Data::Vector(samples) = &resp.data {
        for s in samples {
            let name = s.labels.get(label).cloned().unwrap_or_default();
            let others = per.entry(scope_of(s, group_by)).or_default().entry(name).or_default();
            for (k, v) in s.labels.iter() {
                if k != label && k != "__name__" && !group_by.iter().any(|g| g == k) && !v.is_empty() {
                    others.entry(k.to_string()).or_default().insert(v.to_string());
                }
            }
        }
    }
    let mut values = BTreeMap::new();
    let mut culprits = BTreeMap::new();
    for (scope, names) in per {
        values.insert(scope.clone(), names.len() as f64);
        if let (1, Some((name, others))) = (names.len(), names.iter().next()) {
            let mut c: BTreeMap<String, String> = [(label.to_string(), name.clone())].into_iter().collect();
            for (k, vs) in others {
                c.insert(k.clone(), vs.iter().cloned().collect::<Vec<_>>().join(", "));
            }
            culprits.insert(scope, c);
        }
    }
    (values, culprits)
}

/// A signal's value per scope from the answers to its parts, as its PromQL computes it (see
/// [`signals::Combine`]): a share is 0 where the denominator has a scope the numerator lacks, a
/// quotient needs both, a spread is the busiest replica over the mean of the scope's replicas.
pub fn combine(how: signals::Combine, parts: &[&Response], group_by: &[String]) -> BTreeMap<Scope, f64> {
    match (how, parts) {
        (signals::Combine::Share, [num, den]) => {
            let num = by_scope(num, group_by);
            by_scope(den, group_by).into_iter().map(|(scope, d)| (scope.clone(), num.get(&scope).copied().unwrap_or(d * 0.0) / d)).collect()
        }
        (signals::Combine::Divide, [a, b]) => {
            let b = by_scope(b, group_by);
            by_scope(a, group_by).into_iter().filter_map(|(scope, a)| Some((scope.clone(), a / b.get(&scope)?))).collect()
        }
        (signals::Combine::Spread | signals::Combine::Least, [per]) => {
            let Data::Vector(samples) = &per.data else { return BTreeMap::new() };
            let mut per: BTreeMap<Scope, Vec<f64>> = BTreeMap::new();
            for s in samples {
                per.entry(scope_of(s, group_by)).or_default().push(s.v);
            }
            let least = how == signals::Combine::Least;
            per.into_iter()
                .map(|(scope, vs)| {
                    // PromQL's max and min pass over NaN (unless every value is NaN); avg does not.
                    let better = |v: f64, m: f64| if least { v < m } else { v > m };
                    let pick = vs.iter().copied().fold(f64::NAN, |m, v| if m.is_nan() || better(v, m) { v } else { m });
                    let avg = vs.iter().sum::<f64>() / vs.len() as f64;
                    (scope, pick / avg)
                })
                .collect()
        }
        _ => BTreeMap::new(),
    }
}

/// SLO burn rates from bucket rates (per scope or per replica: summed per scope and bound first, as
/// `sum by (G) (rate(F_bucket{le=...}))` would), as the signal's PromQL computes them: the good rate
/// from the bounds and weights it reads, over the `+Inf` bucket's rate. A scope lacking one of
/// those buckets has no value, as the PromQL's vector matching would leave it.
pub(crate) fn burn_rates(rows: &BucketRows, group_by: &[String], burn: &signals::BurnFromBuckets) -> BTreeMap<Scope, f64> {
    let per_scope = rows.per_scope(group_by, |r| Some((rows.le(r), r.v)));
    per_scope
        .into_iter()
        .filter_map(|(scope, buckets)| {
            // The summed rate of the buckets written as one of `spellings`: none, no value.
            let rate_of = |spellings: &[&str]| -> Option<f64> {
                let mut found = buckets.iter().filter(|(le, _)| spellings.contains(le)).map(|(_, v)| *v).peekable();
                found.peek()?;
                Some(found.sum())
            };
            let mut good = 0.0;
            for (written, w) in &burn.good {
                good += rate_of(&written.iter().map(String::as_str).collect::<Vec<_>>())? * w;
            }
            let total = rate_of(&["+Inf"])?;
            Some((scope, (1.0 - good / total) / burn.budget))
        })
        .collect()
}

/// One signal's values in one window from the answers to its plan.
pub fn fill(pl: &Planned, answers: &Answers, group_by: &[String]) -> WindowValues {
    fill_from(pl, answers, group_by, None).0
}

/// Whether a plan reads its value from bucket rates (a quantile, a burn rate, observation counts).
fn reads_buckets(pl: &Planned) -> bool {
    pl.quantile.is_some() || pl.burn.is_some() || pl.counts_from_buckets.is_some()
}

/// The replica label a plan needs its bucket rows to name ("" for none).
fn replica_label_of(pl: &Planned) -> &str {
    match &pl.per_replica {
        Some((label, signals::Reduction::Outlier(_))) if pl.quantile.is_some() => label,
        _ => "",
    }
}

/// [`fill`], with the bucket rows of the plan's answer when the caller has them (rows naming
/// another replica label than the plan needs are not used: the plan's own are built); and, for an
/// outlier read per replica from a histogram, the bounds some replicas lack.
fn fill_from(pl: &Planned, answers: &Answers, group_by: &[String], shared: Option<&BucketRows>) -> (WindowValues, Vec<f64>) {
    let mut wv = WindowValues {
        availability: pl.availability.clone(),
        values: BTreeMap::new(),
        counts: BTreeMap::new(),
        query: pl.query.clone(),
        metric: pl.metric.clone(),
        culprits: BTreeMap::new(),
        bounds: pl.bounds.clone(),
    };
    let mut bucket_counts = None;
    let mut uncovered = Vec::new();
    if let Some(req) = &pl.value {
        match answers.get(req) {
            Some(Ok(resp)) => {
                let label = replica_label_of(pl);
                let own = (reads_buckets(pl) && !shared.is_some_and(|r| label.is_empty() || r.replica_label == label))
                    .then(|| BucketRows::new(resp, group_by, label));
                let rows = own.as_ref().or(shared);
                match (&pl.per_replica, rows) {
                    (None, Some(rows)) if pl.burn.is_some() => wv.values = pl.burn.as_ref().map(|b| burn_rates(rows, group_by, b)).unwrap_or_default(),
                    (None, Some(rows)) if pl.quantile.is_some() => wv.values = quantiles(rows, group_by, pl.quantile.unwrap_or(f64::NAN)),
                    (Some((label, signals::Reduction::Outlier(how))), Some(rows)) if pl.quantile.is_some() => {
                        // The observations a replica needs, as a rate of its +Inf bucket over the window.
                        let min_rate = f64::from(how.min_observations) / (how.range_seconds.max(1) as f64);
                        let per = replica_quantiles(resp, rows, group_by, pl.quantile.unwrap_or(f64::NAN), min_rate);
                        (wv.values, wv.culprits) = outliers(&per, group_by, label, how.measure == signals::OutlierMeasure::Gap);
                        if pl.histogram.is_some() {
                            uncovered = rows.uncovered();
                        }
                    }
                    (None, _) => wv.values = by_scope(resp, group_by),
                    (Some((label, signals::Reduction::Outlier(how))), _) if how.ranks => {
                        (wv.values, wv.culprits) = rank_outliers(resp, group_by, label, how.measure == signals::OutlierMeasure::Gap)
                    }
                    (Some((label, signals::Reduction::Outlier(how))), _) => {
                        (wv.values, wv.culprits) = outliers(resp, group_by, label, how.measure == signals::OutlierMeasure::Gap)
                    }
                    (Some((label, signals::Reduction::Count)), _) => (wv.values, wv.culprits) = listed(resp, group_by, label),
                    (Some((label, signals::Reduction::Max)), _) => (wv.values, wv.culprits) = largest(resp, group_by, label),
                }
                if let (Some(range), Some(rows)) = (pl.counts_from_buckets, rows) {
                    let inf = rows.per_scope(group_by, |r| (rows.bound(r) == Some(f64::INFINITY)).then_some(r.v));
                    bucket_counts = Some(inf.into_iter().map(|(scope, vs)| (scope, vs.iter().sum::<f64>() * range)).collect());
                }
            }
            Some(Err(e)) => wv.availability = Availability::Failed(e.failure()),
            None => wv.availability = Availability::Failed(QueryFailure::new(FailureKind::NotAnswered, "not answered")),
        }
    }
    if let Some((how, reads)) = &pl.parts {
        let got: Result<Vec<&Response>, QueryFailure> = reads
            .iter()
            .map(|r| match answers.get(r) {
                Some(Ok(resp)) => Ok(resp),
                Some(Err(e)) => Err(e.failure()),
                None => Err(QueryFailure::new(FailureKind::NotAnswered, "not answered")),
            })
            .collect();
        match got {
            Ok(resps) => wv.values = combine(*how, &resps, group_by),
            Err(e) => wv.availability = Availability::Failed(e),
        }
    }
    if let Some(Some(Ok(resp))) = pl.count.as_ref().map(|r| answers.get(r)) {
        wv.counts = by_scope(resp, group_by);
    }
    if let Some(counts) = bucket_counts {
        wv.counts = counts;
    }
    // NaN values (a quantile over no observations, 0/0) are no data for that scope.
    wv.values.retain(|_, v| !v.is_nan());
    (wv, uncovered)
}

/// Every planned signal's values, and the metric name each was read from (both names when vLLM
/// renamed it between the baseline and the window, which a warning reports).
///
/// The plans are taken by the answer they read, so each bucket answer's rows are built once for
/// all its readers and dropped before the next answer's.
pub fn signal_table(plan: &SignalPlan, answers: &Answers, group_by: &[String], warnings: &mut Warnings) -> (SignalTable, BTreeMap<String, String>) {
    let mut table = SignalTable::new();
    let mut names_used = BTreeMap::new();
    let mut by_answer: BTreeMap<Option<&Request>, Vec<(&str, usize, &Planned)>> = BTreeMap::new();
    for (id, (w, b)) in &plan.signals {
        for (side, pl) in [(0, w), (1, b)] {
            by_answer.entry(pl.value.as_ref()).or_default().push((id.as_str(), side, pl));
        }
    }
    // Each window's values, and (for an outlier read per replica) the bounds some replicas lack.
    let mut filled: std::collections::HashMap<(&str, usize), (WindowValues, Vec<f64>)> = std::collections::HashMap::new();
    for (req, readers) in &by_answer {
        let resp = match req.map(|r| answers.get(r)) {
            Some(Some(Ok(resp))) if readers.iter().any(|(_, _, pl)| reads_buckets(pl)) => Some(resp),
            _ => None,
        };
        let label = readers.iter().map(|(_, _, pl)| replica_label_of(pl)).find(|l| !l.is_empty()).unwrap_or("");
        let rows = resp.map(|resp| BucketRows::new(resp, group_by, label));
        for (id, side, pl) in readers {
            filled.insert((id, *side), fill_from(pl, answers, group_by, rows.as_ref()));
        }
    }
    // Per histogram and window, the bounds some replicas lack (in the plans' order, as before).
    let mut uncovered: [BTreeMap<String, Vec<f64>>; 2] = Default::default();
    for (id, (w, b)) in &plan.signals {
        for (side, pl) in [(0, w), (1, b)] {
            if let (Some((hist, _)), Some((_, missing))) = (&pl.histogram, filled.get(&(id.as_str(), side))) {
                if !missing.is_empty() {
                    uncovered[side].insert(hist.clone(), missing.clone());
                }
            }
        }
    }
    for (hist, bounds) in uncovered.iter().flatten().collect::<BTreeMap<_, _>>() {
        warnings.push(format!(
            "{hist}: not every replica has the bucket bounds {}: some replicas use another bucket layout (an upgrade half-way through the fleet?), so its SLO burn rates, read at a bound, are not evaluated",
            bounds.iter().map(|b| crate::units::format_seconds(*b)).collect::<Vec<_>>().join(", ")
        ));
    }
    for (id, (w, b)) in &plan.signals {
        let mut take = |side: usize| filled.remove(&(id.as_str(), side)).map(|(wv, _)| wv);
        let (Some(window), Some(baseline)) = (take(0), take(1)) else { continue };
        let mut sv = SignalValues { window, baseline };
        for (pl, wv, side) in [(w, &mut sv.window, &uncovered[0]), (b, &mut sv.baseline, &uncovered[1])] {
            if let Some((hist, true)) = &pl.histogram {
                if side.contains_key(hist) {
                    wv.availability =
                        Availability::Failed(QueryFailure::new(FailureKind::BucketsDiffer, format!("{hist}: bucket bounds differ across replicas")));
                    wv.values.clear();
                }
            }
        }
        if !sv.window.metric.is_empty() {
            let used = if !sv.baseline.metric.is_empty() && sv.baseline.metric != sv.window.metric {
                warnings.push(format!(
                    "{id}: metric name changed between baseline ({}) and window ({}); vLLM was probably upgraded",
                    sv.baseline.metric, sv.window.metric
                ));
                format!("{} (baseline: {})", sv.window.metric, sv.baseline.metric)
            } else {
                sv.window.metric.clone()
            };
            names_used.insert(id.clone(), used);
        }
        table.insert(id.clone(), sv);
    }
    (table, names_used)
}

/// How many values each fleet label takes, from the rows of its one query. A query that did not
/// answer leaves every label out (the header then says less, nothing more); without the running-requests
/// gauge the counts say nothing at all. Grouping or replica labels no series carries are warned of.
pub fn fleet_labels(
    request: &(Vec<String>, Request),
    answers: &Answers,
    window_names: &BTreeSet<String>,
    p: &RunParams,
    warnings: &mut Warnings,
) -> BTreeMap<String, usize> {
    let mut labels = BTreeMap::new();
    if let Some(Ok(Response { data: Data::Vector(rows), .. })) = answers.get(&request.1) {
        for label in &request.0 {
            let values: BTreeSet<&str> = rows.iter().filter_map(|r| r.labels.get(label)).map(String::as_str).filter(|v| !v.is_empty()).collect();
            labels.insert(label.clone(), values.len());
        }
    }
    if !signals::RUNNING_GAUGE.iter().any(|n| window_names.contains(*n)) {
        labels.clear();
    }
    let present: Vec<&str> = labels.iter().filter(|(_, n)| **n > 0).map(|(l, _)| l.as_str()).collect();
    let present = if present.is_empty() { "none".to_string() } else { present.join(", ") };
    for label in &p.group_by {
        if labels.get(label) == Some(&0) {
            warnings.push(format!(
                "--group-by {label}: no vLLM series in the window carries this label, so every finding has it empty; labels checked and found: {present}"
            ));
        }
    }
    if labels.get(&p.replica_label) == Some(&0) {
        warnings.push(format!(
            "--replica-label {}: no vLLM series in the window carries this label, so replicas cannot be told apart (outliers, imbalance and affected replicas see one per scope); labels checked and found: {present}",
            p.replica_label
        ));
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::{instant_query, Store, Value};
    use crate::signals::{build, resolve, Outlier, QueryContext, QueueWait, Ratio, SignalKind, SloBurn, Spread};

    /// The context the unit tests build signals in: by model, replicas by instance.
    fn test_ctx(range_secs: u64) -> QueryContext {
        QueryContext {
            selector: crate::prom::Selector::default(),
            group_by: vec!["model_name".into()],
            range: std::time::Duration::from_secs(range_secs),
            thresholds: Default::default(),
            buckets: Default::default(),
            replica_label: "instance".into(),
        }
    }

    /// Per-replica gauge values, evaluated by the local PromQL engine twice: the outlier query as
    /// written (reduced in PromQL) and the per-replica query explain sends, reduced here. Both
    /// must agree, NaN, zeros, ties and lone replicas included.
    type Reduced = (BTreeMap<Scope, f64>, Culprits);

    fn both(models: &[Vec<f64>]) -> (Reduced, Reduced) {
        let kind = SignalKind::Outlier(Outlier {
            histogram: vec![],
            gauge: vec!["g".into()],
            quantile: 0.95,
            replica_label: "$replica".into(),
            measure: Default::default(),
            min_observations: 20,
            ranks: false,
        });
        let resolved = resolve(&kind, &["g".to_string()].into_iter().collect()).unwrap();
        let ctx = test_ctx(60);
        let q = build(&kind, &resolved, &ctx).unwrap();
        let mut store = Store::new();
        for (m, values) in models.iter().enumerate() {
            for (i, v) in values.iter().enumerate() {
                let labels = [("__name__", "g".to_string()), ("model_name", format!("m{m}")), ("instance", format!("r{i:02}"))]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                store.add(labels, [(0, *v), (30_000, *v), (60_000, *v)]);
            }
        }
        let answer = |query: &str| -> Response {
            let Value::Vector(v) = instant_query(&store, query, 60_000).unwrap() else { panic!("{query}: not a vector") };
            let data = Data::Vector(v.into_iter().map(|s| Sample { labels: s.labels.into(), t: 60.0, v: s.v }).collect());
            Response { data, warnings: vec![], infos: vec![] }
        };
        let by = vec!["model_name".to_string()];
        // The PromQL answer has one series per scope already: read it as the old reduction did.
        let mut promql = (BTreeMap::new(), BTreeMap::new());
        if let Data::Vector(samples) = &answer(&q.value).data {
            for s in samples.iter().filter(|s| !s.v.is_nan()) {
                promql.0.insert(scope_of(s, &by), s.v);
                promql.1.insert(scope_of(s, &by), [("instance".to_string(), s.labels["instance"].clone())].into_iter().collect());
            }
        }
        (promql, outliers(&answer(q.fetch.as_deref().unwrap()), &by, "instance", false))
    }

    /// A signal combined here from its parts gives what its PromQL gives, evaluated by the local
    /// engine on the same series: shares with and without numerators (0, not missing), quotients
    /// over the scopes both sides have, spreads over replicas with NaN-free rates.
    #[test]
    fn signals_combined_from_their_parts_are_what_their_promql_computes() {
        let counter = |store: &mut Store, name: &str, model: &str, inst: &str, extra: Option<(&str, &str)>, per_min: f64| {
            let mut labels: crate::prom::Labels =
                [("__name__", name), ("model_name", model), ("instance", inst)].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            if let Some((k, v)) = extra {
                labels.insert(k.to_string(), v.to_string());
            }
            store.add(labels, (0..=4).map(|i| (i * 30_000, per_min * i as f64 / 2.0)));
        };
        let mut store = Store::new();
        // busy: aborts on one replica, uneven load; calm: no aborts at all; idle: nothing finishes.
        for (inst, ok, abort) in [("a", 30.0, 3.0), ("b", 10.0, 0.0)] {
            counter(&mut store, "done_total", "busy", inst, Some(("finished_reason", "stop")), ok);
            counter(&mut store, "done_total", "busy", inst, Some(("finished_reason", "abort")), abort);
        }
        counter(&mut store, "done_total", "calm", "c", Some(("finished_reason", "stop")), 6.0);
        counter(&mut store, "done_total", "idle", "d", Some(("finished_reason", "stop")), 0.0);
        for (m, inst, w) in [("busy", "a", 4.0), ("busy", "b", 2.0), ("calm", "c", 0.0), ("lonely", "e", 1.0)] {
            let labels = [("__name__", "waiting"), ("model_name", m), ("instance", inst)].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            store.add(labels, [(0, w), (60_000, w), (120_000, w)]);
        }
        let answer = |query: &str| -> Response {
            let Value::Vector(v) = instant_query(&store, query, 120_000).unwrap() else { panic!("{query}: not a vector") };
            Response {
                data: Data::Vector(v.into_iter().map(|s| Sample { labels: s.labels.into(), t: 120.0, v: s.v }).collect()),
                warnings: vec![],
                infos: vec![],
            }
        };
        let ctx = test_ctx(120);
        let counter_ref = |m: &str| crate::signals::CounterRef { counter: vec!["done_total".into()], r#match: m.into() };
        let kinds = [
            SignalKind::Ratio(Ratio {
                numerator: counter_ref(r#"finished_reason="abort""#),
                denominator: counter_ref(""),
                per: vec![],
                per_at_least: 0.0,
                attribute_via: vec![],
                join_on: vec!["instance".into()],
            }),
            SignalKind::QueueWait(QueueWait { gauge: vec!["waiting".into()], counter: vec!["done_total".into()] }),
            SignalKind::Spread(Spread { counter: vec!["done_total".into()], replica_label: "$replica".into(), least: false }),
        ];
        let names: BTreeSet<String> = ["done_total", "waiting"].into_iter().map(String::from).collect();
        let by = vec!["model_name".to_string()];
        for kind in kinds {
            let q = build(&kind, &resolve(&kind, &names).unwrap(), &ctx).unwrap();
            let (how, reads) = q.parts.clone().unwrap_or_else(|| panic!("{kind:?} has no parts"));
            let resps: Vec<Response> = reads.iter().map(|r| answer(r)).collect();
            let mut here = combine(how, &resps.iter().collect::<Vec<_>>(), &by);
            let mut promql = by_scope(&answer(&q.value), &by);
            here.retain(|_, v| !v.is_nan());
            promql.retain(|_, v| !v.is_nan());
            assert!(!promql.is_empty(), "{}", q.value);
            assert_eq!(promql.keys().collect::<Vec<_>>(), here.keys().collect::<Vec<_>>(), "{}", q.value);
            for (scope, v) in &promql {
                assert!((v - here[scope]).abs() <= 1e-12 * v.abs().max(1.0) || v == &here[scope], "{}: {scope:?} {v} vs {}", q.value, here[scope]);
            }
        }
    }

    /// An SLO burn rate taken from the bucket rates (per replica, as explain reads them for an
    /// outlier) is the one its own PromQL computes from one bucket and the count: at a bound, between
    /// two (interpolated), under the first, and with no bounds listed; a scope whose replicas lack
    /// the bucket has none.
    #[test]
    fn burn_rates_from_bucket_rates_are_those_their_promql_gives() {
        let mut store = Store::new();
        let series = |name: &str, model: &str, inst: &str, le: Option<&str>, per_minute: f64, store: &mut Store| {
            let mut labels: crate::prom::Labels =
                [("__name__", name), ("model_name", model), ("instance", inst)].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            if let Some(le) = le {
                labels.insert("le".into(), le.into());
            }
            store.add(labels, (0..=4).map(|i| (i * 30_000, per_minute * i as f64 / 2.0)));
        };
        for (model, inst, scale) in [("busy", "a", 1.0), ("busy", "b", 3.0), ("slow", "c", 0.5)] {
            for (le, n) in [("0.1", 10.0), ("0.25", 40.0), ("1", 90.0), ("2.5", 97.0), ("+Inf", 100.0)] {
                let n = if model == "slow" { n / 4.0 } else { n };
                series("h_bucket", model, inst, Some(le), n * scale, &mut store);
            }
            series("h_count", model, inst, None, 100.0 * scale / if model == "slow" { 4.0 } else { 1.0 }, &mut store);
        }
        let answer = |query: &str| -> Response {
            let Value::Vector(v) = instant_query(&store, query, 120_000).unwrap() else { panic!("{query}: not a vector") };
            Response {
                data: Data::Vector(v.into_iter().map(|s| Sample { labels: s.labels.into(), t: 120.0, v: s.v }).collect()),
                warnings: vec![],
                infos: vec![],
            }
        };
        let by = vec!["model_name".to_string()];
        let per_replica = answer("sum by (le, model_name, instance) (rate(h_bucket[120s]))");
        let bounds = crate::signals::parse_bounds(&["0.1", "0.25", "1", "2.5", "+Inf"].map(String::from));
        let names: BTreeSet<String> = ["h_bucket".to_string(), "h_count".to_string()].into();
        // A target under the first bucket (50 ms) cannot be read from the buckets at all: refused
        // by both ways of reading it.
        let under = SignalKind::SloBurn(SloBurn { histogram: vec!["h".into()], target: "50ms".into(), objective: "0.99".into() });
        let mut ctx = test_ctx(120);
        std::sync::Arc::make_mut(&mut ctx.buckets).insert("h_bucket".into(), bounds.clone());
        let resolved = resolve(&under, &names).unwrap();
        assert!(build(&under, &resolved, &ctx).is_err() && crate::signals::burn_from_buckets(&under, &resolved, &ctx).is_err());
        for (target, listed) in [("250ms", true), ("500ms", true), ("250ms", false), ("2s", true)] {
            let kind = SignalKind::SloBurn(SloBurn { histogram: vec!["h".into()], target: target.into(), objective: "0.99".into() });
            let resolved = resolve(&kind, &names).unwrap();
            let mut ctx = test_ctx(120);
            if listed {
                std::sync::Arc::make_mut(&mut ctx.buckets).insert("h_bucket".into(), bounds.clone());
            }
            let q = build(&kind, &resolved, &ctx).unwrap();
            let burn = crate::signals::burn_from_buckets(&kind, &resolved, &ctx).unwrap().unwrap();
            let mut promql = by_scope(&answer(&q.value), &by);
            let here = burn_rates(&BucketRows::new(&per_replica, &by, ""), &by, &burn);
            promql.retain(|_, v| !v.is_nan());
            assert_eq!(promql.len(), 2, "{}: {promql:?}", q.value);
            assert_eq!(promql.keys().collect::<Vec<_>>(), here.keys().collect::<Vec<_>>(), "{}", q.value);
            for (scope, v) in &promql {
                assert!((v - here[scope]).abs() <= 1e-9 * v.abs().max(1.0), "{}: {scope:?} {v} vs {}", q.value, here[scope]);
            }
        }
        // A bound the bucket rates lack leaves no value, as the PromQL's matching would.
        let burn = crate::signals::BurnFromBuckets { good: vec![(vec!["0.3".into()], 1.0)], budget: 0.01 };
        assert!(burn_rates(&BucketRows::new(&per_replica, &by, ""), &by, &burn).is_empty());
    }

    #[test]
    fn the_outlier_reduced_here_is_the_one_promql_computes() {
        let cases: Vec<Vec<Vec<f64>>> = vec![
            vec![vec![1.0, 1.0, 5.0], vec![2.0, 4.0]],
            vec![vec![3.0]],
            vec![vec![0.0, 0.0, 0.0], vec![1.0, 0.0, 0.0]],
            vec![vec![f64::NAN, 2.0, 1.0, 3.0], vec![f64::NAN, f64::NAN], vec![f64::NAN, 7.0]],
            vec![vec![0.5, 0.25, 0.75, 0.1, 0.9, 0.3]],
        ];
        for case in cases {
            let (promql, here) = both(&case);
            assert_eq!(promql.0, here.0, "values for {case:?}");
            assert_eq!(promql.1, here.1, "culprits for {case:?}");
        }
    }

    #[test]
    fn quantiles_from_bucket_rates_are_those_histogram_quantile_gives() {
        // Two models: one with observations spread over the buckets (one `le` spelled twice), one
        // idle (every rate 0, so no quantile), and a third whose ranks fall in +Inf.
        let mut store = Store::new();
        let bucket = |model: &str, le: &str, per_minute: f64, store: &mut Store| {
            let labels = [("__name__", "h_bucket"), ("model_name", model), ("le", le), ("instance", "a")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            store.add(labels, (0..=4).map(|i| (i * 30_000, per_minute * i as f64 / 2.0)));
        };
        for (le, n) in [("0.1", 10.0), ("0.25", 40.0), ("1", 90.0), ("1.0", 5.0), ("+Inf", 100.0)] {
            bucket("busy", le, n, &mut store);
        }
        for le in ["0.1", "1", "+Inf"] {
            bucket("idle", le, 0.0, &mut store);
        }
        for (le, n) in [("0.1", 1.0), ("1", 2.0), ("+Inf", 50.0)] {
            bucket("slow", le, n, &mut store);
        }
        let by = vec!["model_name".to_string()];
        let answer = |query: &str| -> Response {
            let Value::Vector(v) = instant_query(&store, query, 120_000).unwrap() else { panic!("{query}: not a vector") };
            Response {
                data: Data::Vector(v.into_iter().map(|s| Sample { labels: s.labels.into(), t: 120.0, v: s.v }).collect()),
                warnings: vec![],
                infos: vec![],
            }
        };
        let rates = "sum by (le, model_name) (rate(h_bucket[120s]))";
        for q in [0.5, 0.95, 0.99] {
            let mut promql = by_scope(&answer(&format!("histogram_quantile({q}, {rates})")), &by);
            let answered = answer(rates);
            let mut here = quantiles(&BucketRows::new(&answered, &by, ""), &by, q);
            promql.retain(|_, v| !v.is_nan());
            here.retain(|_, v| !v.is_nan());
            assert_eq!(promql, here, "q = {q}");
            assert_eq!(here.len(), 2, "busy and slow have a quantile, idle has none: {here:?}");
        }
        // Read per replica, the same quantiles once the replicas' buckets are summed, and the
        // observation counts from the +Inf bucket are the increase of the count over the range.
        let per_replica = answer("sum by (le, model_name, instance) (rate(h_bucket[120s]))");
        for q in [0.5, 0.95] {
            let mut promql = by_scope(&answer(&format!("histogram_quantile({q}, {rates})")), &by);
            let mut here = quantiles(&BucketRows::new(&per_replica, &by, "instance"), &by, q);
            promql.retain(|_, v| !v.is_nan());
            here.retain(|_, v| !v.is_nan());
            assert_eq!(promql.len(), here.len());
            for (scope, v) in &promql {
                assert!((v - here[scope]).abs() <= 1e-9 * v.abs().max(1.0), "q = {q}, {scope:?}: {v} vs {}", here[scope]);
            }
        }
        let planned = super::super::plan::Planned {
            resolved: None,
            per_replica: None,
            availability: Availability::Ok,
            value: Some(Request::Instant { query: "buckets".into(), time: chrono::DateTime::from_timestamp(120, 0).unwrap() }),
            count: None,
            query: String::new(),
            metric: String::new(),
            bounds: vec![],
            quantile: Some(0.95),
            parts: None,
            histogram: None,
            counts_from_buckets: Some(120.0),
            sums: vec![],
            burn: None,
        };
        let mut answers = Answers::new();
        answers.insert(planned.value.clone().unwrap(), Ok(per_replica));
        let counts = fill(&planned, &answers, &by).counts;
        let increase = by_scope(&answer(r#"sum by (model_name) (increase(h_bucket{le="+Inf"}[120s]))"#), &by);
        assert_eq!(counts.len(), increase.len());
        for (scope, v) in &increase {
            assert!((v - counts[scope]).abs() <= 1e-9 * v.abs().max(1.0), "{scope:?}: {v} vs {}", counts[scope]);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        #[test]
        fn any_fleet_gives_the_same_outliers_both_ways(models in proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(vec![0.0, 0.1, 0.2, 0.5, 0.7, 1.0, 3.0, f64::NAN]), 1..7), 1..4)) {
            let (promql, here) = both(&models);
            proptest::prop_assert_eq!(&promql.0, &here.0);
            // With a tie at the top, PromQL's pick depends on its heap; the value does not.
            let unique_top = models.iter().all(|m| {
                let max = m.iter().copied().filter(|v| !v.is_nan()).fold(f64::NEG_INFINITY, f64::max);
                m.iter().filter(|v| **v == max).count() <= 1
            });
            if unique_top {
                proptest::prop_assert_eq!(&promql.1, &here.1);
            }
        }
    }
}
