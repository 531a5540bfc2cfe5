//! Histogram bucket bounds: the bounds found in the data, where an SLO target falls among them, and
//! how a burn rate is read from a histogram's bucket rates.

use std::collections::BTreeMap;

use super::{QueryContext, Resolved, SignalKind};

/// One histogram bucket bound found in the data, with every way the data writes it (`le="0.5"`).
#[derive(Debug, Clone, PartialEq)]
pub struct Bound {
    pub value: f64,
    pub written: Vec<String>,
}

/// The finite bounds among `le` label values, ascending, spellings of one value merged.
pub fn parse_bounds(values: &[String]) -> Vec<Bound> {
    let mut out: Vec<Bound> = Vec::new();
    let mut parsed: Vec<(f64, &String)> = values.iter().filter_map(|v| crate::prom::parse_sample_value(v).filter(|x| x.is_finite()).map(|x| (x, v))).collect();
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
}

/// Where operators set bucket bounds: vLLM's flag, named in every message about a target the
/// buckets cannot read.
pub const CUSTOM_BUCKETS_HINT: &str = "vLLM's --custom-histogram-buckets can add a bucket at it";

/// Locate `target` among `bounds` (ascending, finite). Above the last finite bound nothing can be
/// read: every observation past it sits in the +Inf bucket. Under the first bound nothing can be
/// read either: any share of the first bucket's observations may lie over the target (a first
/// bucket of 1 s under a 500 ms target, as coarse custom buckets give, would read a healthy fleet's
/// sub-second requests as half of them too slow).
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
            "the target {} is above the histogram's largest finite bucket ({}): the share of observations over it cannot be read; {CUSTOM_BUCKETS_HINT}",
            crate::units::format_seconds(target),
            crate::units::format_seconds(last.value)
        ));
    }
    match bounds.iter().position(|b| b.value > target) {
        Some(0) => Err(format!(
            "the target {} is under the histogram's first bucket ({}): the share of observations over it cannot be read; {CUSTOM_BUCKETS_HINT}",
            crate::units::format_seconds(target),
            crate::units::format_seconds(bounds[0].value)
        )),
        None => Err(format!("the target {} is outside the histogram's buckets", crate::units::format_seconds(target))),
        Some(i) => Ok(AtTarget::Between(&bounds[i - 1], &bounds[i])),
    }
}

/// An interpolation weight in [0, 1], to six decimals (PromQL literal).
pub(super) fn weight(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Said once per histogram when a target is read between buckets: the number is an estimate.
pub fn bucket_note(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Option<String> {
    kind.kind().bucket_note(resolved, ctx)
}

/// Stored bucket series a signal needs the bounds of (every spelling of every alternative).
pub fn bucket_series(kind: &SignalKind) -> Vec<String> {
    kind.kind().bucket_series()
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
    let mut per: std::collections::HashMap<Vec<&str>, Vec<&str>> = std::collections::HashMap::new();
    for (le, who) in samples {
        per.entry(who).or_default().push(le);
    }
    uncovered_bounds_per_replica(per.into_values())
}

/// [`uncovered_bounds`] from each replica's `le` values, already told apart: the bounds fewer
/// replicas carry than carry any bound at all.
pub fn uncovered_bounds_per_replica<'a, L: IntoIterator<Item = &'a str>>(replicas: impl Iterator<Item = L>) -> Vec<f64> {
    let mut carried: BTreeMap<u64, usize> = BTreeMap::new();
    let mut with_bounds = 0;
    let mut have: Vec<u64> = Vec::new();
    for les in replicas {
        have.clear();
        have.extend(les.into_iter().filter_map(|le| crate::prom::parse_sample_value(le).filter(|v| !v.is_nan())).map(f64::to_bits));
        if have.is_empty() {
            continue;
        }
        // One replica may write a bound twice ("1" and "1.0"): it carries it once.
        have.sort_unstable();
        have.dedup();
        with_bounds += 1;
        for b in &have {
            *carried.entry(*b).or_default() += 1;
        }
    }
    let mut out: Vec<f64> = carried.into_iter().filter(|(_, n)| *n < with_bounds).map(|(b, _)| f64::from_bits(b)).collect();
    out.sort_by(f64::total_cmp);
    out
}

/// How an SLO burn rate is taken from its histogram's bucket rates when explain reads them anyway
/// (for the histogram's quantiles, over the same range): the good rate is the rates of the buckets
/// whose `le` is written as in `good`, each bound times its weight, exactly as the burn rate's own
/// query selects and weighs them (one bound, or two interpolated, or the first from zero); the
/// total is the rate of `le="+Inf"`; the burn rate is `(1 - good / total) / budget`.
#[derive(Debug, Clone, PartialEq)]
pub struct BurnFromBuckets {
    /// Per bound: the `le` spellings its query's matcher selects, and the weight.
    pub good: Vec<(Vec<String>, f64)>,
    pub budget: f64,
}

/// The bucket reading of an SLO burn signal (see [`BurnFromBuckets`]); `None` for other signals.
pub fn burn_from_buckets(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Result<Option<BurnFromBuckets>, String> {
    kind.kind().burn_from_buckets(resolved, ctx)
}
