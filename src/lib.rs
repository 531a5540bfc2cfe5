//! vllm-diag: a ranked, evidence-backed diagnosis of vLLM fleets from Prometheus-compatible metrics.
//!
//! # How it is built
//!
//! Data flows one way, from the command line to the rendered report:
//!
//! ```text
//! cli -> settings ---------------------------------------------------------------> app (commands)
//!                    explain: discover -> plan -> fetch -> assemble -> judge -> follow_up
//!                             (signals)  (signals) (source)  (rules)   (rules, rank) (recommend)
//!                    -> report::Report -> render (one file per format over one view)
//! ```
//!
//! The modules stand in layers, lowest first, in [`LAYERS`]: a module may use only the modules
//! before it in that list (and its own submodules), so there are no import cycles and nothing low
//! reaches up. `tests/shape.rs` reads the sources and fails on any `crate::` path that breaks the
//! order, and on a module missing from the list.
//!
//! - Foundations: [`text`] (line and column of a position in a file, for errors), [`units`]
//!   (quantities and numbers for people), [`stats`] (medians and counts in words), [`prom`] (Prometheus concepts:
//!   label sets, label names, matchers, escaping, redaction, number formatting, the /metrics text
//!   parser and OpenMetrics writer), [`report`] (the data model and JSON contract).
//! - Data: [`local`] (a PromQL evaluator over series in
//!   memory), [`source`] (one decoder behind live, replayed, scraped and local sources).
//! - Diagnosis: [`signals`] (named measurements, where the diagnosis' PromQL is written), [`probe`]
//!   (requests to an OpenAI-compatible server timed from the client, beside the engines' own
//!   numbers), [`loadtest`] (a sweep of offered loads to the knee, the limit that bound there, a
//!   profile from the curve), [`events`]
//!   (change events read from the metrics: their queries and how answers become a timeline), [`recommend`]
//!   (sizing advice), [`rules`] (declarative conditions over signals), [`rank`], [`explain`] (the pipeline's
//!   stages), [`rules_test`] (`rules test`, which runs the pipeline over test series).
//! - Output: [`render`], [`progress`].
//! - The program: [`error`], [`check`], [`watch`], the settings, [`serve`] (diagnoses for
//!   Alertmanager notifications), [`mcp`] (the diagnosis as tools for AI agents), [`cli`] and [`app`].
//!
//! Only fetching is async; everything after it is plain functions over data.

/// The layer order, lowest first (see the crate documentation). Adding a top-level module means
/// placing it here.
pub const LAYERS: &[&str] = &[
    "text",
    "units",
    "stats",
    "prom",
    "report",
    "local",
    "source",
    "signals",
    "probe",
    "loadtest",
    "events",
    "recommend",
    "rules",
    "rank",
    "explain",
    "rules_test",
    "render",
    "progress",
    "error",
    "check",
    "watch",
    "settings",
    "serve",
    "mcp",
    "cli",
    "app",
];

/// `eprintln!` and `eprint!` for every module below: std's versions, except that a closed or broken
/// stderr (`vllm-diag ... 2>&1 | head -0`) drops the text instead of panicking, so the command still
/// ends with its own exit code. Defined before the modules, so their textual scope shadows std's.
macro_rules! eprintln {
    () => {
        $crate::write_stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::write_stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// See [`eprintln!`] above.
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::write_stderr(format_args!($($arg)*))
    };
}

/// Write to stderr, ignoring a failure: stderr is where failures would be reported, and a reader
/// that went away (a closed pipe) must not turn the command's outcome into a panic.
pub fn write_stderr(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_fmt(args);
}

pub mod app;
pub mod check;
pub mod cli;
pub mod error;
pub mod events;
pub mod explain;
pub mod loadtest;
pub mod local;
pub mod mcp;
pub mod probe;
pub mod progress;
pub mod prom;
pub mod rank;
pub mod recommend;
pub mod render;
pub mod report;
pub mod rules;
pub mod rules_test;
pub mod serve;
pub mod settings;
pub mod signals;
pub mod source;
pub mod stats;
pub mod text;
pub mod units;
pub mod watch;
