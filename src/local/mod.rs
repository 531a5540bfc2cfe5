//! Local evaluation: PromQL answered in-process over raw time series, with no server.
//!
//! Three things need it: direct scrapes of vLLM's `/metrics` (no Prometheus anywhere), rule unit
//! tests (`vllm-diag rules test`, input series written in a test file), and differential tests that
//! hold the engine to a real Prometheus. Rather than computing signals a second way, it implements
//! the PromQL the signals already generate (and a general subset around it, since signal kinds keep
//! being added): the parser ([`parser`]), the evaluator ([`eval`], [`functions`], [`ops`]) and the
//! in-memory series store ([`store`]). [`api`] answers [`crate::source::Request`]s with the very JSON
//! envelope Prometheus returns, so everything downstream (decoding, explain, record and replay) is
//! the code path a real server's answers take. What the engine does not implement comes back as a
//! Prometheus-style `bad_data` error ("... is not supported by local evaluation"), which the
//! pipeline reports as "not evaluated" for the signals concerned: never a crash or a silent zero.
//!
//! Semantics follow Prometheus 2.42 (the version the differential tests run against): lookback 5m,
//! range selectors closed at both ends, staleness markers, `extrapolatedRate`, classic
//! `histogram_quantile`, metric-name dropping.

pub mod api;
pub mod ast;
pub mod eval;
pub mod functions;
pub mod ops;
pub mod parser;
pub mod store;

pub use api::answer;
pub use store::Store;
