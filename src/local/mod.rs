//! Local evaluation: PromQL answered in-process over raw time series, with no server.
//!
//! Three things need it: direct scrapes of vLLM's `/metrics` (no Prometheus anywhere), rule unit
//! tests (`vllm-diag rules test`, input series written in a test file), and differential tests that
//! hold the engine to a real Prometheus. Rather than computing signals a second way, it implements
//! the PromQL the signals already generate (and a general subset around it, since signal kinds keep
//! being added). What the engine does not implement comes back as a Prometheus-style `bad_data`
//! error ("... is not supported by local evaluation"), which the pipeline reports as "not
//! evaluated" for the signals concerned: never a crash or a silent zero.
//!
//! The parts, each depending only on those after it:
//! - [`query`]: the entry points (instant query, range query, label values), text in, values out;
//!   [`crate::source::local`] wraps them in the JSON envelope Prometheus returns, so everything
//!   downstream (decoding, explain, record and replay) is the code path a real server's answers take;
//! - [`parse`]: the `promql-parser` crate's syntax tree, with positions in error messages and
//!   refusals of what is not implemented; also the series selectors of rule test files;
//! - [`eval`]: walks the tree, evaluating operands first, over the [`store`];
//! - [`functions`] and [`ops`]: PromQL functions, aggregations and binary operators over evaluated
//!   [`value`]s (numerics shared in [`math`]);
//! - [`store`]: the in-memory series store.
//!
//! Semantics follow Prometheus 2.42 (the version the differential tests run against): lookback 5m,
//! range selectors closed at both ends, staleness markers, `extrapolatedRate`, classic
//! `histogram_quantile`, metric-name dropping.

pub mod eval;
pub mod functions;
pub mod math;
pub mod ops;
pub mod parse;
pub mod query;
pub mod store;
pub mod value;

pub use parse::{parse_series, SeriesError};
pub use query::{instant_query, label_values, range_query};
pub use store::Store;
pub use value::{EvalError, Sample, Series, Value};
