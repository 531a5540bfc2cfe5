//! Evaluating a parsed query over a [`Store`] at one instant, the way Prometheus 2.42 does.
//!
//! - An instant selector returns, per series, the newest sample no older than the lookback delta
//!   (5 minutes, both ends inclusive) unless that sample is a staleness marker.
//! - A range selector returns the samples in `[t - range, t]` (both ends inclusive, as in 2.x),
//!   staleness markers dropped; `offset` shifts both.
//! - A subquery evaluates its expression at every multiple of its step (absolute, not relative to
//!   `t`) inside `[t - offset - range, t - offset]`.
//! - A range query is an instant evaluation at each step. That is what Prometheus computes too:
//!   its step-wise engine differs in speed, not in results, for everything implemented here.
//!
//! Functions live in [`super::functions`], aggregations and binary operators in [`super::ops`].

use std::collections::BTreeMap;

use super::ast::*;
use super::store::{at_or_before, between, is_stale, Store};
use crate::prom::Labels;

/// Prometheus' default lookback delta for instant selectors.
pub const LOOKBACK_MS: i64 = 5 * 60 * 1000;
/// Subquery step when none is written (Prometheus' default evaluation interval).
pub const DEFAULT_SUBQUERY_STEP_MS: i64 = 60 * 1000;

/// One element of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Labels,
    pub v: f64,
}

/// One series of a range vector (or of a range query's answer).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Labels,
    /// (unix milliseconds, value), oldest first.
    pub points: Vec<(i64, f64)>,
}

/// A range vector together with what the functions over it need to know about its window.
#[derive(Debug, Clone)]
pub struct RangeValue {
    pub series: Vec<Series>,
    pub range_ms: i64,
    pub offset_ms: i64,
}

#[derive(Debug, Clone)]
pub enum Value {
    Scalar(f64),
    Vector(Vec<Sample>),
    Matrix(RangeValue),
    Str(String),
}

/// Why an evaluation failed, in Prometheus' error classes.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The query is invalid (`bad_data`, HTTP 400).
    #[error("{0}")]
    BadData(String),
    /// The query is valid but cannot be computed on this data (`execution`, HTTP 422), e.g.
    /// many-to-many matching.
    #[error("{0}")]
    Execution(String),
    /// Valid PromQL that local evaluation does not implement (`bad_data`).
    #[error("{0} is not supported by local evaluation")]
    Unsupported(String),
}

/// Evaluates expressions over a store.
pub struct Evaluator<'a> {
    pub store: &'a Store,
    pub lookback_ms: i64,
}

impl<'a> Evaluator<'a> {
    pub fn new(store: &'a Store) -> Evaluator<'a> {
        Evaluator { store, lookback_ms: LOOKBACK_MS }
    }

    /// Evaluate at one instant (unix milliseconds).
    pub fn eval(&self, e: &Expr, t: i64) -> Result<Value, EvalError> {
        match e {
            Expr::Number(n) => Ok(Value::Scalar(*n)),
            Expr::Str(s) => Ok(Value::Str(s.clone())),
            Expr::Paren(inner) => self.eval(inner, t),
            Expr::Selector(sel) => Ok(Value::Vector(self.instant_selector(sel, t))),
            Expr::Matrix { selector, range_ms } => Ok(Value::Matrix(RangeValue {
                series: self.range_selector(selector, *range_ms, t),
                range_ms: *range_ms,
                offset_ms: selector.offset_ms,
            })),
            Expr::Subquery { expr, range_ms, step_ms, offset_ms } => {
                let step = step_ms.unwrap_or(DEFAULT_SUBQUERY_STEP_MS);
                let series = self.subquery(expr, *range_ms, step, *offset_ms, t)?;
                Ok(Value::Matrix(RangeValue { series, range_ms: *range_ms, offset_ms: *offset_ms }))
            }
            Expr::Negate(inner) => Ok(match self.eval(inner, t)? {
                Value::Scalar(v) => Value::Scalar(-v),
                Value::Vector(mut v) => {
                    for s in &mut v {
                        s.labels.remove("__name__");
                        s.v = -s.v;
                    }
                    Value::Vector(v)
                }
                other => other,
            }),
            Expr::Call { func, args } => super::functions::call(self, func, args, t),
            Expr::Aggregate { op, param, expr, grouping } => {
                let param = match param {
                    Some(p) => Some(self.eval(p, t)?),
                    None => None,
                };
                let input = self.vector(expr, t)?;
                super::ops::aggregate(*op, param, input, grouping)
            }
            Expr::Binary { op, lhs, rhs, return_bool, matching } => {
                let l = self.eval(lhs, t)?;
                let r = self.eval(rhs, t)?;
                super::ops::binary(*op, l, r, *return_bool, matching.as_ref())
            }
        }
    }

    /// Evaluate an expression that must give an instant vector.
    pub fn vector(&self, e: &Expr, t: i64) -> Result<Vec<Sample>, EvalError> {
        match self.eval(e, t)? {
            Value::Vector(v) => Ok(v),
            _ => Err(EvalError::BadData("expected an instant vector".into())),
        }
    }

    /// Evaluate an expression that must give a scalar.
    pub fn scalar(&self, e: &Expr, t: i64) -> Result<f64, EvalError> {
        match self.eval(e, t)? {
            Value::Scalar(v) => Ok(v),
            _ => Err(EvalError::BadData("expected a scalar".into())),
        }
    }

    fn matching_series<'s>(
        &'s self,
        sel: &'s VectorSelector,
    ) -> impl Iterator<Item = (&'s Labels, &'s Vec<(i64, f64)>)> + 's {
        self.store.named(sel.exact_name()).filter(move |(labels, _)| {
            sel.matchers.iter().all(|m| m.matches(labels.get(&m.name).map(String::as_str).unwrap_or("")))
        })
    }

    fn instant_selector(&self, sel: &VectorSelector, t: i64) -> Vec<Sample> {
        let ref_t = t - sel.offset_ms;
        let mut out = Vec::new();
        for (labels, points) in self.matching_series(sel) {
            if let Some((ts, v)) = at_or_before(points, ref_t) {
                if ts >= ref_t - self.lookback_ms && !is_stale(v) {
                    out.push(Sample { labels: labels.clone(), v });
                }
            }
        }
        out
    }

    fn range_selector(&self, sel: &VectorSelector, range_ms: i64, t: i64) -> Vec<Series> {
        let maxt = t - sel.offset_ms;
        let mint = maxt - range_ms;
        let mut out = Vec::new();
        for (labels, points) in self.matching_series(sel) {
            let pts: Vec<(i64, f64)> =
                between(points, mint, maxt).iter().copied().filter(|(_, v)| !is_stale(*v)).collect();
            if !pts.is_empty() {
                out.push(Series { labels: labels.clone(), points: pts });
            }
        }
        out
    }

    fn subquery(
        &self,
        e: &Expr,
        range_ms: i64,
        step_ms: i64,
        offset_ms: i64,
        t: i64,
    ) -> Result<Vec<Series>, EvalError> {
        let end = t - offset_ms;
        let from = end - range_ms;
        // First multiple of the step at or after `from`.
        let mut ts = -((-from).div_euclid(step_ms)) * step_ms;
        let mut acc: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
        let mut n = 0usize;
        while ts <= end {
            n += 1;
            if n > 11_000 {
                return Err(EvalError::BadData("subquery has more than 11,000 steps; use a larger step".into()));
            }
            match self.eval(e, ts)? {
                Value::Vector(v) => {
                    for s in v {
                        acc.entry(s.labels).or_default().push((ts, s.v));
                    }
                }
                Value::Scalar(v) => acc.entry(Labels::new()).or_default().push((ts, v)),
                _ => return Err(EvalError::BadData("subquery is only allowed on instant vector".into())),
            }
            ts += step_ms;
        }
        Ok(acc.into_iter().map(|(labels, points)| Series { labels, points }).collect())
    }

    /// A range query: the expression at `start`, `start + step`, ... up to `end`; series sorted by labels.
    pub fn range_query(&self, e: &Expr, start: i64, end: i64, step: i64) -> Result<Vec<Series>, EvalError> {
        match e.value_type() {
            ValueType::Scalar | ValueType::Vector => {}
            t => {
                return Err(EvalError::BadData(format!(
                    "invalid expression type \"{t}\" for range query, must be Scalar or instant Vector"
                )))
            }
        }
        if step <= 0 {
            return Err(EvalError::BadData(
                "zero or negative query resolution step widths are not accepted. Try a positive integer".into(),
            ));
        }
        if end < start {
            return Err(EvalError::BadData("end timestamp must not be before start time".into()));
        }
        if (end - start) / step > 11_000 {
            return Err(EvalError::BadData(
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)".into(),
            ));
        }
        let mut acc: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
        let mut ts = start;
        while ts <= end {
            match self.eval(e, ts)? {
                Value::Vector(v) => {
                    for s in v {
                        acc.entry(s.labels).or_default().push((ts, s.v));
                    }
                }
                Value::Scalar(v) => acc.entry(Labels::new()).or_default().push((ts, v)),
                _ => return Err(EvalError::BadData("range queries need a scalar or instant vector".into())),
            }
            ts += step;
        }
        Ok(acc.into_iter().map(|(labels, points)| Series { labels, points }).collect())
    }
}

/// Fail when two samples of a function's result have the same labels (Prometheus does, e.g. after
/// a name-dropping function over several metric names).
pub fn ensure_unique(v: &[Sample]) -> Result<(), EvalError> {
    let mut seen = std::collections::BTreeSet::new();
    for s in v {
        if !seen.insert(&s.labels) {
            return Err(EvalError::Execution("vector cannot contain metrics with the same labelset".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::parser::parse;
    use crate::local::store::stale_nan;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn store() -> Store {
        let mut s = Store::new();
        s.add(labels(&[("__name__", "x"), ("a", "1")]), (0..=10).map(|i| (i * 60_000, i as f64)));
        s.add(labels(&[("__name__", "x"), ("a", "2")]), [(0, 5.0), (60_000, stale_nan())]);
        s
    }

    fn instant(q: &str, t: i64) -> Vec<Sample> {
        let s = store();
        Evaluator::new(&s).vector(&parse(q).unwrap(), t).unwrap()
    }

    #[test]
    fn an_instant_selector_looks_back_five_minutes_inclusive() {
        // the last sample of x{a="1"} is at 10m: still seen at 15m, gone after
        assert_eq!(instant(r#"x{a="1"}"#, 15 * 60_000).len(), 1);
        assert_eq!(instant(r#"x{a="1"}"#, 15 * 60_000 + 1).len(), 0);
    }

    #[test]
    fn a_staleness_marker_ends_a_series_at_once() {
        assert_eq!(instant(r#"x{a="2"}"#, 30_000).len(), 1);
        assert_eq!(instant(r#"x{a="2"}"#, 60_000).len(), 0);
    }

    #[test]
    fn offset_shifts_the_selector_back() {
        let v = instant(r#"x{a="1"} offset 2m"#, 5 * 60_000);
        assert_eq!(v[0].v, 3.0);
    }

    #[test]
    fn a_range_selector_includes_both_ends_and_skips_staleness_markers() {
        let s = store();
        let ev = Evaluator::new(&s);
        let Value::Matrix(m) = ev.eval(&parse("x[2m]").unwrap(), 3 * 60_000).unwrap() else { panic!() };
        assert_eq!(m.series.len(), 1);
        assert_eq!(m.series[0].points, vec![(60_000, 1.0), (120_000, 2.0), (180_000, 3.0)]);
    }

    #[test]
    fn subquery_steps_are_aligned_to_absolute_multiples_of_the_step() {
        let s = store();
        let ev = Evaluator::new(&s);
        let Value::Matrix(m) = ev.eval(&parse(r#"x{a="1"}[3m:2m]"#).unwrap(), 7 * 60_000 + 30_000).unwrap() else {
            panic!()
        };
        // window [4m30s, 7m30s]: steps at 6m only (4m is before the window, 8m after)
        let times: Vec<i64> = m.series[0].points.iter().map(|p| p.0).collect();
        assert_eq!(times, vec![6 * 60_000]);
    }

    #[test]
    fn a_range_query_rejects_more_than_eleven_thousand_points() {
        let s = store();
        let ev = Evaluator::new(&s);
        let e = ev.range_query(&parse("x").unwrap(), 0, 20_000_000, 1000).unwrap_err();
        assert!(e.to_string().contains("11,000"), "{e}");
    }
}
