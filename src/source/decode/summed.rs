//! [`decode_summed`] reads an answer as `sum by (L)` of it would have been: only the labels in `L`
//! are kept as the samples are read (the others are skipped, never allocated), and series left
//! with the same labels are added up. explain asks some per-replica reads unaggregated and sums
//! them itself this way, which costs the server less than its own `sum by` into thousands of groups.
//! [`decode_folded`] does the same with `max by` as well.

use std::cell::RefCell;

use super::decode;
use crate::source::{Data, Exchange, Request, Response, Sample, Series, SourceError};

thread_local! {
    /// The labels [`decode_summed`] keeps, while it decodes (on this thread, with no await point in
    /// between); None otherwise.
    pub(super) static KEEP: RefCell<Option<std::rc::Rc<[String]>>> = const { RefCell::new(None) };
}

/// [`decode`], keeping only the labels named in `by` and adding up the values of series (or
/// samples) left with the same labels at the same timestamp: the answer `sum by (by) (...)` of the
/// query would have given (a series lacking a label of `by` is grouped without it, as there). The
/// server's `sum by` adds in its own order; this adds in the answer's, so a sum of several series
/// may differ from it in the last bits.
pub fn decode_summed(url: &str, req: &Request, ex: &Exchange, by: &[String]) -> Result<Response, SourceError> {
    decode_folded(url, req, ex, by, Fold::Sum)
}

/// How [`decode_folded`] makes one value of the values of series left with the same labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Fold {
    /// Added up: `sum by`.
    #[default]
    Sum,
    /// The largest: `max by` (a NaN gives way to any number, as in PromQL).
    Max,
}

impl Fold {
    fn fold(self, acc: f64, v: f64) -> f64 {
        match self {
            Fold::Sum => acc + v,
            Fold::Max if acc < v || acc.is_nan() => v,
            Fold::Max => acc,
        }
    }
}

/// [`decode_summed`], the series left alike made one by `fold`: what `sum by (by)` or `max by (by)`
/// of the query would have given.
pub fn decode_folded(url: &str, req: &Request, ex: &Exchange, by: &[String], fold: Fold) -> Result<Response, SourceError> {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            KEEP.with(|k| *k.borrow_mut() = None);
        }
    }
    KEEP.with(|k| *k.borrow_mut() = Some(by.into()));
    let _reset = Reset;
    let mut resp = decode(url, req, ex)?;
    drop(_reset);
    resp.data = match resp.data {
        Data::Vector(samples) => Data::Vector(sum_samples(samples, fold)),
        Data::Matrix(series) => Data::Matrix(sum_series(series, fold)),
        other => other,
    };
    Ok(resp)
}

/// Samples sorted by labels (as [`decode`] leaves them), those with the same labels made one by
/// `fold` (the earliest timestamp kept).
fn sum_samples(samples: Vec<Sample>, fold: Fold) -> Vec<Sample> {
    let mut out: Vec<Sample> = Vec::with_capacity(samples.len());
    for s in samples {
        match out.last_mut() {
            Some(last) if last.labels == s.labels => {
                last.v = fold.fold(last.v, s.v);
                last.t = last.t.min(s.t);
            }
            _ => out.push(s),
        }
    }
    out
}

/// Series sorted by labels (as [`decode`] leaves them), those with the same labels merged: the
/// values at each timestamp made one by `fold`, a timestamp only one of them has kept as it is.
fn sum_series(series: Vec<Series>, fold: Fold) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::with_capacity(series.len());
    for s in series {
        match out.last_mut() {
            Some(last) if last.labels == s.labels => {
                let mut points: std::collections::BTreeMap<i64, (f64, f64)> = std::collections::BTreeMap::new();
                for (t, v) in last.points.drain(..).chain(s.points) {
                    points.entry((t * 1000.0).round() as i64).and_modify(|e| e.1 = fold.fold(e.1, v)).or_insert((t, v));
                }
                last.points = points.into_values().collect();
            }
            _ => out.push(s),
        }
    }
    out
}
