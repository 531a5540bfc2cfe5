//! The command line, and nothing else: clap definitions. Typed options are built from these once
//! (see [`crate::config`]); clap types go no further.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub const EXIT_CODES: &str = "\
Exit codes:
  0  ran; nothing at or above --fail-on
  1  a finding at or above --fail-on
  2  usage, configuration or rule-file error
  3  data source unreachable, no vLLM data in the window, or nothing could be evaluated";

#[derive(Debug, Parser)]
#[command(
    name = "vllm-diag",
    version,
    about = "Ranked, evidence-backed diagnosis of vLLM inference fleets from Prometheus metrics",
    after_help = EXIT_CODES,
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Diagnose a window: query the metrics, compare with a baseline, rank the likely causes.
    #[command(after_help = EXIT_CODES)]
    Explain(ExplainArgs),
    /// Inspect the rule pack.
    #[command(subcommand)]
    Rules(RulesCommand),
}

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// One line per rule: id, severity, title.
    List(RulesArgs),
    /// Everything about one rule: what it detects, why it matters, its conditions and steps.
    Show {
        /// The rule id, e.g. kv-cache-pressure.
        id: String,
        #[command(flatten)]
        rules: RulesArgs,
    },
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    /// Directory of extra *.toml rule files; a rule or signal with an existing id replaces it.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum FailOn {
    Never,
    Info,
    Warning,
    Critical,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Base URL of a Prometheus-compatible API; a path prefix (https://host/prometheus) is kept.
    #[arg(long, value_name = "URL", env = "VLLM_DIAG_PROMETHEUS_URL", hide_env_values = true, default_value = "http://localhost:9090")]
    pub prometheus: String,

    /// Length of the window to diagnose (e.g. 30m, 2h) [default: 30m].
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub window: Option<Duration>,

    /// End of the window: RFC 3339 (2026-01-15T09:30:00Z) or "now" [default: now].
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,

    /// How far before the window the baseline sits [default: the window's length, i.e. the window
    /// right before]. 1d compares with the same time yesterday.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub baseline: Option<Duration>,

    /// Extra label matchers added to every vLLM query, e.g. 'namespace="prod",job="vllm"'.
    #[arg(long, value_name = "MATCHERS")]
    pub selector: Option<String>,

    /// Label(s) findings are grouped by, comma-separated.
    #[arg(long, value_name = "LABELS", default_value = "model_name")]
    pub group_by: String,

    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: crate::render::Format,

    /// Exit 1 when a finding at or above this severity exists.
    #[arg(long, value_enum, default_value = "never")]
    pub fail_on: FailOn,

    /// Directory of extra *.toml rule files; a rule or signal with an existing id replaces it.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,

    /// Latency profile whose targets and ceilings the rules use: chat (default), code-completion,
    /// batch, rag, agentic, or one defined in a --rules file.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,

    /// Store every query and its raw answer, with the run's parameters, in FILE.
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,

    /// Re-run a recorded diagnosis offline from FILE (no server needed).
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// Overall deadline for all queries; what is not answered by then is reported as not evaluated.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,

    /// Timeout for one query.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "20s")]
    pub query_timeout: Duration,

    /// Queries in flight at once.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| format!("{e} (write e.g. 30m, 2h, 90s)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn durations_must_be_positive_and_human() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert!(parse_duration("0s").unwrap_err().contains("longer than zero"));
        assert!(parse_duration("-5m").is_err());
        assert!(parse_duration("soon").is_err());
    }
}
