//! Aggregation and binary operators with Prometheus' matching and labelling rules. Like functions,
//! they receive evaluated operands; the evaluator translates the syntax's operators into the small
//! descriptions below ([`AggOp`], [`BinOp`], [`Grouping`], [`VectorMatching`]).
//!
//! - Aggregations keep only the `by` labels (or drop the `without` labels and the metric name);
//!   `topk`/`bottomk` keep whole samples.
//! - Arithmetic drops the metric name; a comparison keeps the left sample as it is unless `bool` asks
//!   for 0/1 (which drops the name too).
//! - One-to-one matching on `on (...)` keeps only those labels; `ignoring (...)` drops them;
//!   `group_left`/`group_right` keep the "many" side's labels and copy the listed ones from the "one"
//!   side. A "one" side with two series for a match group, or two results with the same labels, is
//!   an error (`execution`), as in Prometheus: silently picking one would give wrong numbers.

use std::collections::{BTreeMap, BTreeSet};

use super::math::quantile;
use super::value::{EvalError, Sample, Value};
use crate::prom::{format_go_float, is_label_name, Labels};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggOp {
    Sum,
    Avg,
    Min,
    Max,
    Count,
    Group,
    Stddev,
    Stdvar,
    Topk,
    Bottomk,
    Quantile,
    CountValues,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grouping {
    /// No clause: everything in one group.
    None,
    By(Vec<String>),
    Without(Vec<String>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Atan2,
    Eq,
    Ne,
    Gt,
    Lt,
    Ge,
    Le,
    And,
    Or,
    Unless,
}

impl BinOp {
    pub fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Gt | BinOp::Lt | BinOp::Ge | BinOp::Le)
    }

    pub fn is_set(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or | BinOp::Unless)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Mod => "%",
            BinOp::Pow => "^",
            BinOp::Atan2 => "atan2",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Gt => ">",
            BinOp::Lt => "<",
            BinOp::Ge => ">=",
            BinOp::Le => "<=",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Unless => "unless",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cardinality {
    OneToOne,
    ManyToOne,
    OneToMany,
    ManyToMany,
}

/// How two instant vectors are matched: `on`/`ignoring` and `group_left`/`group_right`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VectorMatching {
    pub card: Cardinality,
    /// `on (...)` when true, `ignoring (...)` (or nothing) when false.
    pub on: bool,
    pub labels: Vec<String>,
    /// Labels copied from the "one" side with `group_left (...)` / `group_right (...)`.
    pub include: Vec<String>,
}

pub fn aggregate(op: AggOp, param: Option<Value>, input: Vec<Sample>, grouping: &Grouping) -> Result<Value, EvalError> {
    let label_param = match (&op, &param) {
        (AggOp::CountValues, Some(Value::Str(s))) => {
            if !is_label_name(s) {
                return Err(EvalError::BadData(format!("invalid label name {s:?}")));
            }
            Some(s.clone())
        }
        _ => None,
    };
    let num_param = match param {
        Some(Value::Scalar(v)) => Some(v),
        _ => None,
    };
    let group_key = |labels: &Labels| -> Labels {
        match grouping {
            Grouping::None => Labels::new(),
            Grouping::By(names) => names.iter().filter_map(|n| labels.get(n).filter(|v| !v.is_empty()).map(|v| (n.clone(), v.clone()))).collect(),
            Grouping::Without(names) => {
                labels.iter().filter(|(k, _)| k.as_str() != "__name__" && !names.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
            }
        }
    };

    if let Some(label) = label_param {
        // count_values: one output series per (group, value).
        let mut counts: BTreeMap<Labels, f64> = BTreeMap::new();
        for s in &input {
            let mut key = group_key(&s.labels);
            key.insert(label.clone(), format_go_float(s.v));
            *counts.entry(key).or_insert(0.0) += 1.0;
        }
        return Ok(Value::Vector(counts.into_iter().map(|(labels, v)| Sample { labels, v }).collect()));
    }

    // Groups in order of first appearance, like Prometheus (order does not reach the user).
    let mut order: Vec<Labels> = Vec::new();
    let mut groups: BTreeMap<Labels, Vec<Sample>> = BTreeMap::new();
    for s in input {
        let key = group_key(&s.labels);
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(s);
    }

    let mut out = Vec::new();
    for key in order {
        let members = groups.remove(&key).unwrap_or_default();
        match op {
            AggOp::Topk | AggOp::Bottomk => {
                let k = num_param.unwrap_or(0.0);
                // k below 1 (or NaN) selects nothing
                if !matches!(k.partial_cmp(&1.0), Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)) {
                    continue;
                }
                let k = if k > 1e9 { usize::MAX } else { k as usize };
                let mut members = members;
                members.sort_by(|a, b| {
                    // NaN ranks last for both topk and bottomk.
                    let o = match (a.v.is_nan(), b.v.is_nan()) {
                        (true, true) => std::cmp::Ordering::Equal,
                        (true, false) => std::cmp::Ordering::Greater,
                        (false, true) => std::cmp::Ordering::Less,
                        _ => {
                            let o = a.v.partial_cmp(&b.v).unwrap_or(std::cmp::Ordering::Equal);
                            if op == AggOp::Topk {
                                o.reverse()
                            } else {
                                o
                            }
                        }
                    };
                    o.then_with(|| a.labels.cmp(&b.labels))
                });
                out.extend(members.into_iter().take(k));
            }
            _ => {
                let vals: Vec<f64> = members.iter().map(|s| s.v).collect();
                let v = match op {
                    AggOp::Sum => vals.iter().sum(),
                    AggOp::Count => vals.len() as f64,
                    AggOp::Group => 1.0,
                    AggOp::Max => vals.iter().skip(1).fold(vals[0], |m, v| if *v > m || m.is_nan() { *v } else { m }),
                    AggOp::Min => vals.iter().skip(1).fold(vals[0], |m, v| if *v < m || m.is_nan() { *v } else { m }),
                    AggOp::Avg => incremental_mean(&vals),
                    AggOp::Stddev | AggOp::Stdvar => {
                        let (mut n, mut mean, mut m2) = (0.0, 0.0, 0.0);
                        for v in &vals {
                            n += 1.0;
                            let delta = v - mean;
                            mean += delta / n;
                            m2 += delta * (v - mean);
                        }
                        let var = m2 / n;
                        if op == AggOp::Stddev {
                            var.sqrt()
                        } else {
                            var
                        }
                    }
                    AggOp::Quantile => {
                        let mut vals = vals;
                        quantile(num_param.unwrap_or(f64::NAN), &mut vals)
                    }
                    AggOp::Topk | AggOp::Bottomk | AggOp::CountValues => unreachable_agg(),
                };
                out.push(Sample { labels: key, v });
            }
        }
    }
    Ok(Value::Vector(out))
}

fn unreachable_agg() -> f64 {
    // topk/bottomk/count_values are handled before; kept total instead of panicking.
    f64::NAN
}

/// Prometheus' running mean for `avg` (divides before adding, to avoid overflow).
fn incremental_mean(vals: &[f64]) -> f64 {
    let mut mean = 0.0f64;
    let mut count = 0.0f64;
    for (i, v) in vals.iter().enumerate() {
        count += 1.0;
        if i == 0 {
            mean = *v;
            continue;
        }
        if mean.is_infinite() {
            if v.is_infinite() && (mean > 0.0) == (*v > 0.0) {
                continue;
            }
            if !v.is_infinite() && !v.is_nan() {
                continue;
            }
        }
        mean += v / count - mean / count;
    }
    mean
}

/// (result, keep) of `l op r` for arithmetic and comparison operators.
fn elem(op: BinOp, l: f64, r: f64) -> (f64, bool) {
    match op {
        BinOp::Add => (l + r, true),
        BinOp::Sub => (l - r, true),
        BinOp::Mul => (l * r, true),
        BinOp::Div => (l / r, true),
        BinOp::Mod => (l % r, true),
        BinOp::Pow => (l.powf(r), true),
        BinOp::Atan2 => (l.atan2(r), true),
        BinOp::Eq => (l, l == r),
        BinOp::Ne => (l, l != r),
        BinOp::Gt => (l, l > r),
        BinOp::Lt => (l, l < r),
        BinOp::Ge => (l, l >= r),
        BinOp::Le => (l, l <= r),
        BinOp::And | BinOp::Or | BinOp::Unless => (f64::NAN, false),
    }
}

/// Arithmetic drops the metric name; `atan2` does not in Prometheus 2.42 (checked against it).
fn drops_name(op: BinOp) -> bool {
    matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::Pow)
}

pub fn binary(op: BinOp, l: Value, r: Value, return_bool: bool, matching: Option<&VectorMatching>) -> Result<Value, EvalError> {
    match (l, r) {
        (Value::Scalar(a), Value::Scalar(b)) => {
            let (v, keep) = elem(op, a, b);
            Ok(Value::Scalar(if return_bool { f64::from(u8::from(keep)) } else { v }))
        }
        (Value::Vector(v), Value::Scalar(s)) => Ok(Value::Vector(vector_scalar(op, v, s, false, return_bool))),
        (Value::Scalar(s), Value::Vector(v)) => Ok(Value::Vector(vector_scalar(op, v, s, true, return_bool))),
        (Value::Vector(a), Value::Vector(b)) => {
            let default =
                VectorMatching { card: if op.is_set() { Cardinality::ManyToMany } else { Cardinality::OneToOne }, on: false, labels: vec![], include: vec![] };
            let mut m = matching.cloned().unwrap_or(default);
            if op.is_set() {
                m.card = Cardinality::ManyToMany;
            }
            match op {
                BinOp::And => Ok(Value::Vector(set_and(a, b, &m))),
                BinOp::Or => Ok(Value::Vector(set_or(a, b, &m))),
                BinOp::Unless => Ok(Value::Vector(set_unless(a, b, &m))),
                _ => vector_vector(op, a, b, &m, return_bool).map(Value::Vector),
            }
        }
        _ => Err(EvalError::BadData("binary expression must contain only scalar and instant vector types".into())),
    }
}

fn vector_scalar(op: BinOp, v: Vec<Sample>, s: f64, scalar_left: bool, return_bool: bool) -> Vec<Sample> {
    let mut out = Vec::with_capacity(v.len());
    for mut sample in v {
        let (l, r) = if scalar_left { (s, sample.v) } else { (sample.v, s) };
        let (mut value, keep) = elem(op, l, r);
        // A comparison keeps the vector's value even when the scalar is on the left.
        if op.is_comparison() && scalar_left {
            value = r;
        }
        if return_bool {
            value = f64::from(u8::from(keep));
        } else if !keep {
            continue;
        }
        if return_bool || drops_name(op) {
            sample.labels.remove("__name__");
        }
        sample.v = value;
        out.push(sample);
    }
    out
}

/// The labels two samples are matched on.
fn signature(labels: &Labels, m: &VectorMatching) -> Labels {
    if m.on {
        labels.iter().filter(|(k, _)| m.labels.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
    } else {
        labels.iter().filter(|(k, _)| k.as_str() != "__name__" && !m.labels.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
    }
}

fn set_and(a: Vec<Sample>, b: Vec<Sample>, m: &VectorMatching) -> Vec<Sample> {
    let right: BTreeSet<Labels> = b.iter().map(|s| signature(&s.labels, m)).collect();
    a.into_iter().filter(|s| right.contains(&signature(&s.labels, m))).collect()
}

fn set_or(a: Vec<Sample>, b: Vec<Sample>, m: &VectorMatching) -> Vec<Sample> {
    let left: BTreeSet<Labels> = a.iter().map(|s| signature(&s.labels, m)).collect();
    let mut out = a;
    out.extend(b.into_iter().filter(|s| !left.contains(&signature(&s.labels, m))));
    out
}

fn set_unless(a: Vec<Sample>, b: Vec<Sample>, m: &VectorMatching) -> Vec<Sample> {
    let right: BTreeSet<Labels> = b.iter().map(|s| signature(&s.labels, m)).collect();
    a.into_iter().filter(|s| !right.contains(&signature(&s.labels, m))).collect()
}

fn show(l: &Labels) -> String {
    let inner: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

fn vector_vector(op: BinOp, lhs: Vec<Sample>, rhs: Vec<Sample>, m: &VectorMatching, return_bool: bool) -> Result<Vec<Sample>, EvalError> {
    if lhs.is_empty() || rhs.is_empty() {
        return Ok(vec![]);
    }
    let swapped = m.card == Cardinality::OneToMany;
    let (many, one) = if swapped { (rhs, lhs) } else { (lhs, rhs) };

    let mut one_side: BTreeMap<Labels, &Sample> = BTreeMap::new();
    for s in &one {
        let sig = signature(&s.labels, m);
        if let Some(prev) = one_side.get(&sig) {
            let side = if swapped { "left" } else { "right" };
            return Err(EvalError::Execution(format!(
                "found duplicate series for the match group {} on the {side} hand-side of the operation: [{}, {}];many-to-many matching not allowed: matching labels must be unique on one side",
                show(&sig),
                show(&s.labels),
                show(&prev.labels)
            )));
        }
        one_side.insert(sig, s);
    }

    let mut matched: BTreeMap<Labels, BTreeSet<Labels>> = BTreeMap::new();
    let mut out = Vec::new();
    for ls in &many {
        let sig = signature(&ls.labels, m);
        let Some(rs) = one_side.get(&sig) else { continue };
        let (vl, vr) = if swapped { (rs.v, ls.v) } else { (ls.v, rs.v) };
        let (mut value, keep) = elem(op, vl, vr);
        if return_bool {
            value = f64::from(u8::from(keep));
        } else if !keep {
            continue;
        }
        let mut labels = result_labels(&ls.labels, &rs.labels, op, m);
        if return_bool {
            labels.remove("__name__");
        }
        let entry = matched.entry(sig.clone());
        match m.card {
            Cardinality::OneToOne => {
                if let std::collections::btree_map::Entry::Occupied(_) = entry {
                    return Err(EvalError::Execution("multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)".into()));
                }
                entry.or_default();
            }
            _ => {
                if !entry.or_default().insert(labels.clone()) {
                    return Err(EvalError::Execution("multiple matches for labels: grouping labels must ensure unique matches".into()));
                }
            }
        }
        out.push(Sample { labels, v: value });
    }
    Ok(out)
}

fn result_labels(many: &Labels, one: &Labels, op: BinOp, m: &VectorMatching) -> Labels {
    let mut l = many.clone();
    if drops_name(op) {
        l.remove("__name__");
    }
    if m.card == Cardinality::OneToOne {
        if m.on {
            l.retain(|k, _| m.labels.contains(k));
        } else {
            l.retain(|k, _| !m.labels.contains(k));
        }
    }
    for name in &m.include {
        match one.get(name).filter(|v| !v.is_empty()) {
            Some(v) => {
                l.insert(name.clone(), v.clone());
            }
            None => {
                l.remove(name);
            }
        }
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(pairs: &[(&str, &str)], v: f64) -> Sample {
        Sample { labels: pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), v }
    }

    fn by(l: &[&str]) -> Grouping {
        Grouping::By(l.iter().map(|s| s.to_string()).collect())
    }

    fn vec_of(v: Value) -> Vec<Sample> {
        match v {
            Value::Vector(v) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sum_by_keeps_only_the_grouping_labels() {
        let input = vec![
            s(&[("__name__", "x"), ("m", "a"), ("i", "1")], 1.0),
            s(&[("__name__", "x"), ("m", "a"), ("i", "2")], 2.0),
            s(&[("__name__", "x"), ("m", "b")], 5.0),
        ];
        let out = vec_of(aggregate(AggOp::Sum, None, input, &by(&["m"])).unwrap());
        assert_eq!(out, vec![s(&[("m", "a")], 3.0), s(&[("m", "b")], 5.0)]);
    }

    #[test]
    fn without_drops_the_metric_name_too() {
        let input = vec![s(&[("__name__", "x"), ("m", "a"), ("i", "1")], 1.0)];
        let out = vec_of(aggregate(AggOp::Max, None, input, &Grouping::Without(vec!["i".into()])).unwrap());
        assert_eq!(out, vec![s(&[("m", "a")], 1.0)]);
    }

    #[test]
    fn topk_keeps_whole_samples() {
        let input = vec![s(&[("__name__", "x"), ("i", "1")], 1.0), s(&[("__name__", "x"), ("i", "2")], 3.0)];
        let out = vec_of(aggregate(AggOp::Topk, Some(Value::Scalar(1.0)), input, &Grouping::None).unwrap());
        assert_eq!(out, vec![s(&[("__name__", "x"), ("i", "2")], 3.0)]);
    }

    #[test]
    fn count_values_labels_each_distinct_value() {
        let input = vec![s(&[("i", "1")], 1.5), s(&[("i", "2")], 1.5), s(&[("i", "3")], 2.0)];
        let out = vec_of(aggregate(AggOp::CountValues, Some(Value::Str("v".into())), input, &Grouping::None).unwrap());
        assert_eq!(out, vec![s(&[("v", "1.5")], 2.0), s(&[("v", "2")], 1.0)]);
    }

    #[test]
    fn a_comparison_filters_and_keeps_the_name_while_bool_drops_it() {
        let v = vec![s(&[("__name__", "x")], 1.0), s(&[("__name__", "x"), ("a", "b")], 3.0)];
        let kept = vec_of(binary(BinOp::Gt, Value::Vector(v.clone()), Value::Scalar(2.0), false, None).unwrap());
        assert_eq!(kept, vec![s(&[("__name__", "x"), ("a", "b")], 3.0)]);
        let b = vec_of(binary(BinOp::Gt, Value::Vector(v), Value::Scalar(2.0), true, None).unwrap());
        assert_eq!(b, vec![s(&[], 0.0), s(&[("a", "b")], 1.0)]);
    }

    #[test]
    fn a_scalar_on_the_left_of_a_comparison_keeps_the_vector_value() {
        let v = vec![s(&[("a", "1")], 5.0)];
        let out = vec_of(binary(BinOp::Lt, Value::Scalar(2.0), Value::Vector(v), false, None).unwrap());
        assert_eq!(out[0].v, 5.0);
    }

    #[test]
    fn group_left_copies_labels_from_the_one_side() {
        let many = vec![s(&[("instance", "a"), ("job", "j")], 10.0), s(&[("instance", "b"), ("job", "j")], 20.0)];
        let one = vec![s(&[("instance", "a"), ("job", "j"), ("model_name", "m1")], 1.0), s(&[("instance", "b"), ("job", "j"), ("model_name", "m2")], 1.0)];
        let m = VectorMatching { card: Cardinality::ManyToOne, on: true, labels: vec!["instance".into(), "job".into()], include: vec!["model_name".into()] };
        let out = vec_of(binary(BinOp::Mul, Value::Vector(many), Value::Vector(one), false, Some(&m)).unwrap());
        assert_eq!(
            out,
            vec![s(&[("instance", "a"), ("job", "j"), ("model_name", "m1")], 10.0), s(&[("instance", "b"), ("job", "j"), ("model_name", "m2")], 20.0)]
        );
    }

    #[test]
    fn one_to_one_on_keeps_only_the_on_labels() {
        let a = vec![s(&[("x", "1"), ("y", "2")], 6.0)];
        let b = vec![s(&[("x", "1"), ("y", "3")], 2.0)];
        let m = VectorMatching { card: Cardinality::OneToOne, on: true, labels: vec!["x".into()], include: vec![] };
        let out = vec_of(binary(BinOp::Div, Value::Vector(a), Value::Vector(b), false, Some(&m)).unwrap());
        assert_eq!(out, vec![s(&[("x", "1")], 3.0)]);
    }

    #[test]
    fn a_duplicate_on_the_one_side_is_an_execution_error() {
        let a = vec![s(&[("x", "1")], 1.0)];
        let b = vec![s(&[("x", "1"), ("y", "1")], 1.0), s(&[("x", "1"), ("y", "2")], 1.0)];
        let m = VectorMatching { card: Cardinality::OneToOne, on: true, labels: vec!["x".into()], include: vec![] };
        let e = binary(BinOp::Add, Value::Vector(a), Value::Vector(b), false, Some(&m)).unwrap_err();
        assert!(matches!(e, EvalError::Execution(_)) && e.to_string().contains("many-to-many"), "{e}");
    }

    #[test]
    fn or_adds_right_samples_whose_labels_the_left_lacks() {
        let a = vec![s(&[("m", "a")], 1.0)];
        let b = vec![s(&[("m", "a")], 0.0), s(&[("m", "b")], 0.0)];
        let out = vec_of(binary(BinOp::Or, Value::Vector(a), Value::Vector(b), false, None).unwrap());
        assert_eq!(out, vec![s(&[("m", "a")], 1.0), s(&[("m", "b")], 0.0)]);
    }

    #[test]
    fn and_and_unless_filter_the_left_side() {
        let a = vec![s(&[("m", "a")], 1.0), s(&[("m", "b")], 2.0)];
        let b = vec![s(&[("m", "b")], 0.0)];
        assert_eq!(vec_of(binary(BinOp::And, Value::Vector(a.clone()), Value::Vector(b.clone()), false, None).unwrap()), vec![s(&[("m", "b")], 2.0)]);
        assert_eq!(vec_of(binary(BinOp::Unless, Value::Vector(a), Value::Vector(b), false, None).unwrap()), vec![s(&[("m", "a")], 1.0)]);
    }

    #[test]
    fn go_float_formatting_matches_count_values_labels() {}
}
