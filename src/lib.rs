//! vllm-diag: a ranked, evidence-backed diagnosis of vLLM fleets from Prometheus-compatible metrics.
//!
//! The pipeline reads top to bottom:
//! arguments ([`cli`]) -> typed [`settings`] (flags, environment, config file, defaults) -> a [`source`] of numbers (Prometheus, a replay file,
//! or [`local`] evaluation over scraped samples)
//! -> [`signals`] (named measurements, the only place PromQL is written) -> [`rules`] (declarative
//! conditions over signals) -> [`rank`] (ordering and most-specific-first grouping) -> a [`report::Report`]
//! -> [`render`] (one file per output format). Only fetching is async; everything after it is plain
//! functions over data.

pub mod app;
pub mod check;
pub mod cli;
pub mod error;
pub mod explain;
pub mod exposition;
pub mod local;
pub mod progress;
pub mod prom;
pub mod rank;
pub mod recommend;
pub mod render;
pub mod report;
pub mod rules;
pub mod settings;
pub mod signals;
pub mod source;
pub mod units;
pub mod watch;
