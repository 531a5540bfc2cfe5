//! `loadtest`'s flags, as clap reads them; to_settings.rs turns them into settings.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::*;

pub const LOADTEST_EXIT_CODES: &str = "\
Exit codes:
  0  the sweep ran: a knee found, or every step within the limits up to the bounds
  1  no step was within the limits (the first already broke them)
  2  usage or configuration error (nothing sent)
  3  the engines' side could not be read for a step (with --prometheus), or the model could not be asked";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadModeArg {
    /// A closed loop: N requests always in flight, a new one as each ends.
    Concurrency,
    /// An open loop: Poisson arrivals at a mean rate a second.
    Rate,
}

#[derive(Debug, Args)]
pub struct LoadtestArgs {
    /// The server to load: its root (http://host:8000), its /v1, or the endpoint itself. The
    /// credential and TLS flags below go to this server only.
    #[arg(value_name = "URL", required_unless_present = "from")]
    pub url: Option<String>,

    /// The model to ask for (default: the only one the server's GET /v1/models lists).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// The API the requests use (every request is streamed).
    #[arg(long, value_enum, default_value = "completions")]
    pub api: ProbeApi,

    /// Words in each prompt (common short words, about a token each).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub prompt_words: u32,

    /// max_tokens of each request.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub max_tokens: u32,

    /// Do not send vLLM's ignore_eos (then an answer may end before max_tokens).
    #[arg(long)]
    pub no_ignore_eos: bool,

    /// What a step's load is: requests in flight (closed loop) or a rate (Poisson arrivals).
    #[arg(long, value_enum, default_value = "concurrency")]
    pub mode: LoadModeArg,

    /// The first step's load: requests in flight, or a second.
    #[arg(long, value_name = "LOAD", default_value = "1", value_parser = parse_rate)]
    pub start: f64,

    /// The most requests in flight at once: the highest step with --mode concurrency, a ceiling
    /// with --mode rate (ceiling 1024).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrency: u32,

    /// The most requests started a second: the highest step with --mode rate, a ceiling with
    /// --mode concurrency (ceiling 1000).
    #[arg(long, value_name = "PER_SECOND", default_value = "50", value_parser = parse_rate)]
    pub max_rate: f64,

    /// The whole sweep, waits included: no step starts that could not end within it (ceiling 4h).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30m")]
    pub max_duration: Duration,

    /// Requests in all, over every step (ceiling 100000).
    #[arg(long, value_name = "N", default_value_t = 10000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_requests: u32,

    /// How long each step starts requests (long enough for several scrapes; ceiling 30m).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "2m")]
    pub step: Duration,

    /// Each request's own limit (ceiling 10m).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "60s")]
    pub timeout: Duration,

    /// With a Prometheus: after each step, wait this long before reading the engines (at least one
    /// scrape interval).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_or_zero, default_value = "15s")]
    pub settle: Duration,

    /// Latency profile whose limits judge each step (ttft_p95_high, itl_p95_high): chat (default),
    /// code-completion, batch, rag, agentic, or one a --rules directory defines.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,

    /// Directory of extra *.toml rule files (for a profile of its own).
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,

    /// Write the thresholds derived from the knee as a [profile.NAME] table to FILE (put it in a
    /// --rules directory, and choose it with --profile NAME).
    #[arg(long, value_name = "FILE")]
    pub profile_out: Option<PathBuf>,

    /// The derived profile's name.
    #[arg(long, value_name = "NAME", default_value = "measured", requires = "profile_out")]
    pub profile_name: String,

    /// The share the derived ceilings add to the knee's values (0.5: half again).
    #[arg(long, value_name = "SHARE", default_value_t = 0.5)]
    pub margin: f64,

    /// Print the planned steps, the bounds and the worst case, and send nothing.
    #[arg(long)]
    pub dry_run: bool,

    /// Also write the result as an HTML page to FILE: the curve over the offered load (time to the
    /// first token, time between tokens, throughput, the engines' batch and queue) with the
    /// profile's limits drawn and the knee marked, and the table.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Send nothing: read a load test's result written with --format json from FILE and write it
    /// again, in --format and with --html.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["url", "dry_run", "profile_out"])]
    pub from: Option<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ProbeFormatArg,

    /// No progress lines on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Prometheus-compatible API to read the engines' metrics from, over each step. Its credentials
    /// come from the environment and the configuration file only.
    #[arg(long, value_name = "URL", env = "VLLM_DIAG_PROMETHEUS_URL", hide_env_values = true, help_heading = "Engines' metrics")]
    pub prometheus: Option<String>,

    /// The engines' series to read (default: model_name="MODEL", the model loaded).
    #[arg(long, value_name = "MATCHERS", help_heading = "Engines' metrics")]
    pub selector: Option<String>,

    /// Limit for each query to Prometheus.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "20s", help_heading = "Engines' metrics")]
    pub query_timeout: Duration,

    #[command(flatten)]
    pub connection: ConnectionArgs,

    #[arg(skip)]
    pub given: Given,
}
