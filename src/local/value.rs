//! The values an evaluation produces and passes between its parts: scalars, strings, instant
//! vectors and range vectors, and the error classes Prometheus answers with. Functions and operators
//! take these and return these; nothing here knows about syntax.

use crate::prom::Labels;

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

impl Value {
    /// The type's name as Prometheus writes it in messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Scalar(_) => "scalar",
            Value::Vector(_) => "instant vector",
            Value::Matrix(_) => "range vector",
            Value::Str(_) => "string",
        }
    }
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

/// Fail when two samples of a result have the same labels (Prometheus does, e.g. after a
/// name-dropping function over several metric names).
pub fn ensure_unique(v: &[Sample]) -> Result<(), EvalError> {
    let mut seen = std::collections::BTreeSet::new();
    for s in v {
        if !seen.insert(&s.labels) {
            return Err(EvalError::Execution("vector cannot contain metrics with the same labelset".into()));
        }
    }
    Ok(())
}
