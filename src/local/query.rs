//! The three questions local evaluation answers, from text to values: an instant query, a range
//! query, and the values of a label. The HTTP-shaped answer (Prometheus' JSON envelope) is built
//! from these by [`crate::source::local`].

use std::collections::BTreeSet;

use super::eval::{selects, Evaluator};
use super::parse::{parse, parse_selector, ParseError};
use super::store::{between, is_stale, Store};
use super::value::{EvalError, Series, Value};

impl From<ParseError> for EvalError {
    fn from(e: ParseError) -> EvalError {
        match e {
            ParseError::Unsupported(what) => EvalError::Unsupported(what),
            other => EvalError::BadData(other.to_string()),
        }
    }
}

/// `query` at one instant (unix milliseconds).
pub fn instant_query(store: &Store, query: &str, t_ms: i64) -> Result<Value, EvalError> {
    let expr = parse(query)?;
    Evaluator::new(store).eval(&expr, t_ms)
}

/// `query` at `start`, `start + step`, ... up to `end` (unix milliseconds): series sorted by labels.
pub fn range_query(store: &Store, query: &str, start_ms: i64, end_ms: i64, step_ms: i64) -> Result<Vec<Series>, EvalError> {
    let expr = parse(query)?;
    Evaluator::new(store).range_query(&expr, start_ms, end_ms, step_ms)
}

/// The values `label` takes in series that match any of `matchers` (every series when there are
/// none) and have a sample (not a staleness marker) in `[from, to]`; sorted.
pub fn label_values(store: &Store, label: &str, matchers: &[String], from_ms: i64, to_ms: i64) -> Result<Vec<String>, EvalError> {
    let selectors = matchers.iter().map(|m| parse_selector(m)).collect::<Result<Vec<_>, _>>()?;
    let mut values = BTreeSet::new();
    for (labels, points) in store.series() {
        let selected = selectors.is_empty() || selectors.iter().any(|sel| selects(sel, labels));
        if !selected || !between(points, from_ms, to_ms).iter().any(|(_, v)| !is_stale(*v)) {
            continue;
        }
        if let Some(v) = labels.get(label) {
            values.insert(v.clone());
        }
    }
    Ok(values.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prom::Labels;

    fn store() -> Store {
        let mut s = Store::new();
        for (name, m) in [("x", "a"), ("x", "b"), ("h_bucket", "a")] {
            let mut l: Labels = [("__name__", name), ("m", m)].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            if name == "h_bucket" {
                l.insert("le".into(), "+Inf".into());
            }
            s.add(l, (0..20).map(|i| (i * 15_000, (i % 7) as f64)));
        }
        s
    }

    #[test]
    fn queries_are_answered_from_text() {
        let s = store();
        let Value::Vector(v) = instant_query(&s, "sum by (m) (rate(x[1m]))", 120_000).unwrap() else { panic!() };
        assert_eq!(v.len(), 2);
        assert_eq!(range_query(&s, "x", 0, 60_000, 15_000).unwrap()[0].points.len(), 5);
        assert_eq!(label_values(&s, "m", &[r#"{__name__="x"}"#.into()], 0, 60_000).unwrap(), vec!["a", "b"]);
        assert!(matches!(instant_query(&s, "hour()", 0), Err(EvalError::Unsupported(_))));
        assert!(matches!(instant_query(&s, "x +", 0), Err(EvalError::BadData(_))));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        /// Pieces of PromQL put together at random: whatever parses is evaluated without a panic.
        #[test]
        fn evaluation_never_panics(parts in proptest::collection::vec(proptest::sample::select(vec![
            "x", "h_bucket", "{m=\"a\"}", "[1m]", "[5m:15s]", " offset 1m", "(", ")", ", ", " + ", " / ", " > bool ",
            " and on (m) ", " * on (m) group_left ", "sum by (m) ", "topk(", "quantile(", "count_values(\"v\", ",
            "rate(", "histogram_quantile(", "label_replace(", "\"a\"", "\"(.*)\"", "round(", "scalar(", "vector(",
            "absent(", "0", "1e300", "NaN", "-", "0.5", "max_over_time(", "predict_linear(", "time()", "clamp(",
        ]), 1..12)) {
            let q: String = parts.concat();
            let s = store();
            let _ = instant_query(&s, &q, 200_000);
            let _ = range_query(&s, &q, 0, 300_000, 30_000);
        }
    }
}
