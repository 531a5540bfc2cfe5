//! The clap definitions of `vllm-diag probe` and of the probe `explain --probe` and `check --probe`
//! join to a diagnosis.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::*;

/// `--probe URL` on explain and check: a short probe before the diagnosis, joining it as evidence.
/// Its limits are the probe's (docs/probe.md), with fewer requests by default.
#[derive(Debug, Args)]
pub struct JoinProbeArgs {
    /// Probe this server first (a router, a gateway or an engine: its root, its /v1 or the endpoint
    /// itself): a few bounded requests through the path users take, timed from the client, and
    /// the engines read for the same minutes from the --prometheus. A request that fails, or a 95th
    /// percentile time to the first token over the profile's ttft_p95_high, fails the run with any
    /// --fail-on bar (check's is warning).
    #[arg(long = "probe", value_name = "URL", help_heading = "Probe")]
    pub probe: Option<String>,

    /// The model the probe asks for (default: the only one the server's GET /v1/models lists).
    #[arg(long, value_name = "NAME", requires = "probe", help_heading = "Probe")]
    pub probe_model: Option<String>,

    /// A file holding the bearer token for the probed server (the other credential flags are the
    /// Prometheus'); never printed.
    #[arg(long, value_name = "FILE", requires = "probe", help_heading = "Probe")]
    pub probe_bearer_token_file: Option<PathBuf>,

    /// The API the probe's requests use.
    #[arg(long, value_enum, default_value = "completions", requires = "probe", help_heading = "Probe")]
    pub probe_api: ProbeApi,

    /// Which of the probe's requests are streamed (only streamed ones time the first token).
    #[arg(long, value_enum, default_value = "both", requires = "probe", help_heading = "Probe")]
    pub probe_stream: ProbeStream,

    /// The probe's requests in all (ceiling 200).
    #[arg(long, value_name = "N", default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..), requires = "probe", help_heading = "Probe")]
    pub probe_requests: u32,

    /// The probe's requests started per second, at most (ceiling 20).
    #[arg(long, value_name = "PER_SECOND", default_value = "1", value_parser = parse_rate, requires = "probe", help_heading = "Probe")]
    pub probe_rate: f64,

    /// The probe's requests in flight at once, at most (ceiling 32).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..), requires = "probe", help_heading = "Probe")]
    pub probe_concurrency: u32,

    /// max_tokens of each probe request.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=32768), requires = "probe", help_heading = "Probe")]
    pub probe_max_tokens: u32,

    /// How long after the probe's last request to wait before reading the engines (at least one
    /// scrape interval).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_or_zero, default_value = "30s", requires = "probe", help_heading = "Probe")]
    pub probe_settle: Duration,
}

pub const PROBE_EXIT_CODES: &str = "\
Exit codes:
  0  every request succeeded (and the engines' side was read, when a Prometheus was given)
  1  a request failed: an HTTP status other than 200, a timeout, a reset, no connection
  2  usage or configuration error (nothing sent)
  3  every request succeeded, but the engines' side could not be read (not evaluated)";

#[derive(Debug, Args)]
pub struct ProbeArgs {
    /// The server to probe: its root (http://host:8000), its /v1, or the endpoint itself
    /// (.../v1/chat/completions). The credential and TLS flags below go to this server only.
    #[arg(value_name = "URL")]
    pub url: String,

    /// The model to ask for. Without it, the server's GET /v1/models is asked once and must list
    /// exactly one.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// The API the requests use.
    #[arg(long, value_enum, default_value = "completions")]
    pub api: ProbeApi,

    /// Which requests are streamed: always, never, or both (alternating).
    #[arg(long, value_enum, default_value = "both")]
    pub stream: ProbeStream,

    /// Words in each prompt (common short words, about a token each).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub prompt_words: u32,

    /// max_tokens of each request.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=32768))]
    pub max_tokens: u32,

    /// Do not send vLLM's ignore_eos (then an answer may end before max_tokens).
    #[arg(long)]
    pub no_ignore_eos: bool,

    /// Requests in all (ceiling 200).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub requests: u32,

    /// Requests started per second, at most (ceiling 20).
    #[arg(long, value_name = "PER_SECOND", default_value = "1", value_parser = parse_rate)]
    pub rate: f64,

    /// Requests in flight at once, at most (ceiling 32).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,

    /// No request starts after this, and any still running then is cut (ceiling 10m).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "60s")]
    pub max_duration: Duration,

    /// Each request's own limit (ceiling 5m).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,

    /// With a Prometheus: the engines are read from this long before the first request to this
    /// long after the last, waited for (at least one scrape interval, so that the scrapes on both
    /// sides of the probe are read).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_or_zero, default_value = "30s")]
    pub settle: Duration,

    /// Print every request the probe would send, and send none.
    #[arg(long)]
    pub dry_run: bool,

    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: ProbeFormatArg,

    /// No notes on stderr while the probe runs.
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Prometheus-compatible API to read the engines' metrics from, for the same minutes. Without
    /// it (here, in $VLLM_DIAG_PROMETHEUS_URL or in the configuration file) the engines are not
    /// read. Its credentials come from the environment and the configuration file only: the
    /// credential flags go to the probed URL.
    #[arg(long, value_name = "URL", env = "VLLM_DIAG_PROMETHEUS_URL", hide_env_values = true, help_heading = "Engines' metrics")]
    pub prometheus: Option<String>,

    /// The engines' series to read (default: model_name="MODEL", the model probed).
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProbeApi {
    /// POST /v1/completions
    Completions,
    /// POST /v1/chat/completions
    Chat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProbeStream {
    Always,
    Never,
    Both,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProbeFormatArg {
    Text,
    Json,
}

pub(super) fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("{s:?} is not a rate: give requests per second above 0, e.g. 2 or 0.5")),
    }
}
