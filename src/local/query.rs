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
pub fn range_query(
    store: &Store,
    query: &str,
    start_ms: i64,
    end_ms: i64,
    step_ms: i64,
) -> Result<Vec<Series>, EvalError> {
    let expr = parse(query)?;
    Evaluator::new(store).range_query(&expr, start_ms, end_ms, step_ms)
}

/// The values `label` takes in series that match any of `matchers` (every series when there are
/// none) and have a sample (not a staleness marker) in `[from, to]`; sorted.
pub fn label_values(
    store: &Store,
    label: &str,
    matchers: &[String],
    from_ms: i64,
    to_ms: i64,
) -> Result<Vec<String>, EvalError> {
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
