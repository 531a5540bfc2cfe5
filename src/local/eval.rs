//! Evaluating a parsed query (promql-parser's syntax tree) over a [`Store`] at one instant, the way
//! Prometheus 2.42 does.
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
//! As in Prometheus' engine, the evaluator walks the tree and evaluates a node's operands first;
//! [`super::functions`] and [`super::ops`] then receive values, never syntax, and never call back.

use std::collections::BTreeMap;
use std::time::Duration;

use promql_parser::label::MatchOp;
use promql_parser::parser::token::{
    TokenType, T_ADD, T_ATAN2, T_AVG, T_BOTTOMK, T_COUNT, T_COUNT_VALUES, T_DIV, T_EQLC, T_GROUP, T_GTE, T_GTR, T_LAND, T_LOR, T_LSS, T_LTE, T_LUNLESS, T_MAX,
    T_MIN, T_MOD, T_MUL, T_NEQ, T_POW, T_QUANTILE, T_STDDEV, T_STDVAR, T_SUB, T_SUM, T_TOPK,
};
use promql_parser::parser::value::ValueType;
use promql_parser::parser::{AggregateExpr, BinModifier, Call, Expr, LabelModifier, Offset, SubqueryExpr, VectorMatchCardinality, VectorSelector};

use super::functions::{self, Context};
use super::ops::{self, AggOp, BinOp, Cardinality, Grouping, VectorMatching};
use super::store::{at_or_before, between, is_stale, Store};
use super::value::{EvalError, RangeValue, Sample, Series, Value};
use crate::prom::Labels;

/// Prometheus' default lookback delta for instant selectors.
pub const LOOKBACK_MS: i64 = 5 * 60 * 1000;
/// Subquery step when none is written (Prometheus' default evaluation interval).
pub const DEFAULT_SUBQUERY_STEP_MS: i64 = 60 * 1000;
/// Prometheus' limit on the points of a range query or subquery.
const MAX_STEPS: i64 = 11_000;

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
            Expr::NumberLiteral(n) => Ok(Value::Scalar(n.val)),
            Expr::StringLiteral(s) => Ok(Value::Str(s.val.clone())),
            Expr::Paren(p) => self.eval(&p.expr, t),
            Expr::VectorSelector(vs) => Ok(Value::Vector(self.instant_selector(vs, t))),
            Expr::MatrixSelector(ms) => {
                let (range_ms, offset_ms) = (millis(&ms.range), offset_millis(ms.vs.offset.as_ref()));
                let series = self.range_selector(&ms.vs, range_ms, t);
                Ok(Value::Matrix(RangeValue { series, range_ms, offset_ms }))
            }
            Expr::Subquery(sq) => self.subquery(sq, t),
            Expr::Unary(u) => Ok(negate(self.eval(&u.expr, t)?)),
            Expr::Call(c) => self.call(c, t),
            Expr::Aggregate(a) => self.aggregate(a, t),
            Expr::Binary(b) => {
                let op = bin_op(b.op)?;
                let l = self.eval(&b.lhs, t)?;
                let r = self.eval(&b.rhs, t)?;
                let return_bool = b.modifier.as_ref().is_some_and(|m| m.return_bool);
                ops::binary(op, l, r, return_bool, b.modifier.as_ref().map(matching).as_ref())
            }
            Expr::Extension(_) => Err(EvalError::Unsupported("an extension expression".into())),
        }
    }

    /// Evaluate an expression that must give an instant vector.
    pub fn vector(&self, e: &Expr, t: i64) -> Result<Vec<Sample>, EvalError> {
        match self.eval(e, t)? {
            Value::Vector(v) => Ok(v),
            _ => Err(EvalError::BadData("expected an instant vector".into())),
        }
    }

    fn call(&self, c: &Call, t: i64) -> Result<Value, EvalError> {
        // `timestamp(selector)`: each sample's own time, as Prometheus gives it (of anything else,
        // the evaluation time).
        if let ("timestamp", Some(Expr::VectorSelector(vs))) = (c.func.name, c.args.args.first().map(|a| unparen(a))) {
            let samples = self
                .instant_samples(vs, t)
                .into_iter()
                .map(|(mut s, ts)| {
                    s.labels.remove("__name__");
                    Sample { labels: s.labels, v: ts as f64 / 1000.0 }
                })
                .collect();
            return Ok(Value::Vector(samples));
        }
        let args = c.args.args.iter().map(|a| self.eval(a, t)).collect::<Result<Vec<_>, _>>()?;
        let absent_labels = match (c.func.name, c.args.args.first()) {
            ("absent" | "absent_over_time", Some(arg)) => absent_labels(arg),
            _ => Labels::new(),
        };
        functions::call(c.func.name, args, &Context { t, absent_labels })
    }

    fn aggregate(&self, a: &AggregateExpr, t: i64) -> Result<Value, EvalError> {
        let op = agg_op(a.op)?;
        let param = a.param.as_ref().map(|p| self.eval(p, t)).transpose()?;
        let input = self.vector(&a.expr, t)?;
        let grouping = match &a.modifier {
            None => Grouping::None,
            Some(LabelModifier::Include(l)) => Grouping::By(l.labels.clone()),
            Some(LabelModifier::Exclude(l)) => Grouping::Without(l.labels.clone()),
        };
        ops::aggregate(op, param, input, &grouping)
    }

    fn matching_series<'s>(&'s self, sel: &'s VectorSelector) -> impl Iterator<Item = (&'s Labels, &'s Vec<(i64, f64)>)> + 's {
        self.store.named(exact_name(sel)).filter(move |(labels, _)| selects(sel, labels))
    }

    fn instant_selector(&self, sel: &VectorSelector, t: i64) -> Vec<Sample> {
        self.instant_samples(sel, t).into_iter().map(|(s, _)| s).collect()
    }

    /// The samples an instant selector picks at `t`, each with its own time (unix milliseconds).
    fn instant_samples(&self, sel: &VectorSelector, t: i64) -> Vec<(Sample, i64)> {
        let ref_t = t.saturating_sub(offset_millis(sel.offset.as_ref()));
        let mut out = Vec::new();
        for (labels, points) in self.matching_series(sel) {
            if let Some((ts, v)) = at_or_before(points, ref_t) {
                if ts >= ref_t.saturating_sub(self.lookback_ms) && !is_stale(v) {
                    out.push((Sample { labels: labels.clone(), v }, ts));
                }
            }
        }
        out
    }

    fn range_selector(&self, sel: &VectorSelector, range_ms: i64, t: i64) -> Vec<Series> {
        let maxt = t.saturating_sub(offset_millis(sel.offset.as_ref()));
        let mint = maxt.saturating_sub(range_ms);
        let mut out = Vec::new();
        for (labels, points) in self.matching_series(sel) {
            let pts: Vec<(i64, f64)> = between(points, mint, maxt).iter().copied().filter(|(_, v)| !is_stale(*v)).collect();
            if !pts.is_empty() {
                out.push(Series { labels: labels.clone(), points: pts });
            }
        }
        out
    }

    fn subquery(&self, sq: &SubqueryExpr, t: i64) -> Result<Value, EvalError> {
        let range_ms = millis(&sq.range);
        let step_ms = sq.step.as_ref().map_or(DEFAULT_SUBQUERY_STEP_MS, millis);
        let offset_ms = offset_millis(sq.offset.as_ref());
        if step_ms <= 0 {
            return Err(EvalError::BadData("the step of a subquery must be at least 1ms".into()));
        }
        let end = t.saturating_sub(offset_ms);
        let from = end.saturating_sub(range_ms);
        if (end - from) / step_ms > MAX_STEPS {
            return Err(EvalError::BadData("subquery has more than 11,000 steps; use a larger step".into()));
        }
        // First multiple of the step at or after `from`.
        let first = -((-from).div_euclid(step_ms)) * step_ms;
        let series = self.steps(&sq.expr, first, end, step_ms)?;
        Ok(Value::Matrix(RangeValue { series, range_ms, offset_ms }))
    }

    /// The expression at `from`, `from + step`, ... up to `to`, as series sorted by labels.
    fn steps(&self, e: &Expr, from: i64, to: i64, step: i64) -> Result<Vec<Series>, EvalError> {
        let mut acc: BTreeMap<Labels, Vec<(i64, f64)>> = BTreeMap::new();
        let mut ts = from;
        while ts <= to {
            match self.eval(e, ts)? {
                Value::Vector(v) => {
                    for s in v {
                        acc.entry(s.labels).or_default().push((ts, s.v));
                    }
                }
                Value::Scalar(v) => acc.entry(Labels::new()).or_default().push((ts, v)),
                _ => return Err(EvalError::BadData("only a scalar or an instant vector can be evaluated at steps".into())),
            }
            ts += step;
        }
        Ok(acc.into_iter().map(|(labels, points)| Series { labels, points }).collect())
    }

    /// A range query: the expression at `start`, `start + step`, ... up to `end`; series sorted by labels.
    pub fn range_query(&self, e: &Expr, start: i64, end: i64, step: i64) -> Result<Vec<Series>, EvalError> {
        match e.value_type() {
            ValueType::Scalar | ValueType::Vector => {}
            t => {
                let t = if t == ValueType::Matrix { "range vector" } else { "string" };
                return Err(EvalError::BadData(format!("invalid expression type \"{t}\" for range query, must be Scalar or instant Vector")));
            }
        }
        if step <= 0 {
            return Err(EvalError::BadData("zero or negative query resolution step widths are not accepted. Try a positive integer".into()));
        }
        if end < start {
            return Err(EvalError::BadData("end timestamp must not be before start time".into()));
        }
        if (end - start) / step > MAX_STEPS {
            return Err(EvalError::BadData(
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)".into(),
            ));
        }
        self.steps(e, start, end, step)
    }
}

/// The metric name when the selector pins it (by name or with `__name__=`): lets the store skip
/// other names.
pub fn exact_name(sel: &VectorSelector) -> Option<&str> {
    sel.name.as_deref().or_else(|| sel.matchers.matchers.iter().find(|m| m.name == "__name__" && m.op == MatchOp::Equal).map(|m| m.value.as_str()))
}

/// Does a series with these labels match the selector (an absent label matching as empty)?
pub fn selects(sel: &VectorSelector, labels: &Labels) -> bool {
    let get = |name: &str| labels.get(name).map(String::as_str).unwrap_or("");
    sel.name.as_ref().is_none_or(|n| get("__name__") == n) && sel.matchers.matchers.iter().all(|m| m.is_match(get(&m.name)))
}

fn negate(v: Value) -> Value {
    match v {
        Value::Scalar(v) => Value::Scalar(-v),
        Value::Vector(mut v) => {
            for s in &mut v {
                s.labels.remove("__name__");
                s.v = -s.v;
            }
            Value::Vector(v)
        }
        other => other,
    }
}

/// Labels `absent()` gives its result: the selector's equality matchers (not the name), unless a
/// label is pinned twice.
fn absent_labels(arg: &Expr) -> Labels {
    let sel = match arg {
        Expr::VectorSelector(vs) => vs,
        Expr::MatrixSelector(ms) => &ms.vs,
        _ => return Labels::new(),
    };
    let mut out = Labels::new();
    let mut dup = std::collections::BTreeSet::new();
    for m in &sel.matchers.matchers {
        if m.name == "__name__" || m.op != MatchOp::Equal {
            continue;
        }
        if out.insert(m.name.clone(), m.value.clone()).is_some() {
            dup.insert(m.name.clone());
        }
    }
    for d in dup {
        out.remove(&d);
    }
    out
}

fn millis(d: &Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

fn offset_millis(o: Option<&Offset>) -> i64 {
    match o {
        None => 0,
        Some(Offset::Pos(d)) => millis(d),
        Some(Offset::Neg(d)) => -millis(d),
    }
}

fn agg_op(op: TokenType) -> Result<AggOp, EvalError> {
    Ok(match op.id() {
        T_SUM => AggOp::Sum,
        T_AVG => AggOp::Avg,
        T_MIN => AggOp::Min,
        T_MAX => AggOp::Max,
        T_COUNT => AggOp::Count,
        T_GROUP => AggOp::Group,
        T_STDDEV => AggOp::Stddev,
        T_STDVAR => AggOp::Stdvar,
        T_TOPK => AggOp::Topk,
        T_BOTTOMK => AggOp::Bottomk,
        T_QUANTILE => AggOp::Quantile,
        T_COUNT_VALUES => AggOp::CountValues,
        _ => return Err(EvalError::Unsupported(format!("the {op} aggregation"))),
    })
}

fn bin_op(op: TokenType) -> Result<BinOp, EvalError> {
    Ok(match op.id() {
        T_ADD => BinOp::Add,
        T_SUB => BinOp::Sub,
        T_MUL => BinOp::Mul,
        T_DIV => BinOp::Div,
        T_MOD => BinOp::Mod,
        T_POW => BinOp::Pow,
        T_ATAN2 => BinOp::Atan2,
        T_EQLC => BinOp::Eq,
        T_NEQ => BinOp::Ne,
        T_GTR => BinOp::Gt,
        T_LSS => BinOp::Lt,
        T_GTE => BinOp::Ge,
        T_LTE => BinOp::Le,
        T_LAND => BinOp::And,
        T_LOR => BinOp::Or,
        T_LUNLESS => BinOp::Unless,
        _ => return Err(EvalError::Unsupported(format!("the {op} operator"))),
    })
}

/// `on`/`ignoring` and `group_left`/`group_right` as the operators take them.
fn matching(m: &BinModifier) -> VectorMatching {
    let (card, include) = match &m.card {
        VectorMatchCardinality::OneToOne => (Cardinality::OneToOne, vec![]),
        VectorMatchCardinality::ManyToMany => (Cardinality::ManyToMany, vec![]),
        VectorMatchCardinality::ManyToOne(l) => (Cardinality::ManyToOne, l.labels.clone()),
        VectorMatchCardinality::OneToMany(l) => (Cardinality::OneToMany, l.labels.clone()),
    };
    let (on, labels) = match &m.matching {
        None => (false, vec![]),
        Some(LabelModifier::Include(l)) => (true, l.labels.clone()),
        Some(LabelModifier::Exclude(l)) => (false, l.labels.clone()),
    };
    VectorMatching { card, on, labels, include }
}

/// The expression inside any parentheses.
fn unparen(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => unparen(&p.expr),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::parse::parse;
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
        let Value::Matrix(m) = ev.eval(&parse(r#"x{a="1"}[3m:2m]"#).unwrap(), 7 * 60_000 + 30_000).unwrap() else { panic!() };
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
