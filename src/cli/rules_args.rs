//! The clap definitions of the rules commands: list, show, test, and export with its backtest.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::*;
use crate::settings;

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// One line per rule: id, severity, title.
    List(RulesArgs),
    /// Everything about one rule: what it detects, why it matters, its conditions and steps; or
    /// about one signal: what it measures, its PromQL, the rules that read it.
    Show {
        /// The rule or signal id, e.g. kv-cache-pressure or kv_usage.
        id: String,
        #[command(flatten)]
        rules: RulesArgs,
    },
    /// Run rule unit tests: input series, a window, the findings expected; no server needed.
    ///
    /// Each FILE is TOML with [[test]] tables. Input series use promtool's expanding notation
    /// (`0+10x60`, `1x30`, `_x3`, `stale`); the first sample is at time 0, one every `interval`.
    /// See docs/rules.md ("Testing rules") for the format. Exit 0 when every test passes, 1 when one
    /// fails (expected against got is printed as a diff), 2 for a malformed test file.
    Test {
        /// Test files (e.g. rules/tests/*.toml).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<PathBuf>,
        #[command(flatten)]
        rules: RulesArgs,
    },
    /// Write the rules as Prometheus alerting rules (a rule file) on stdout, or backtest them.
    ///
    /// One alert per rule whose conditions PromQL can express, returning one series per scope
    /// (--group-by) while the rule's conditions hold over --window; `Nx baseline` compares with the
    /// same query --baseline earlier (`offset`). Labels: severity, vllm_diag_rule. The file targets
    /// vLLM V1 metric names. Rules that cannot be expressed are listed on stderr with the reason.
    /// Exit 0 when at least one rule was exported, 2 otherwise.
    ///
    /// With --backtest DUR, nothing is written: each alert is evaluated over the DUR before --at on
    /// --prometheus (range queries a day at a time, every --step, honouring --for) and the report says
    /// how often, when and for how long each would have fired. Exit 0 when every alert was
    /// evaluated, 3 when the range holds no vLLM data or an alert's query failed.
    #[command(after_help = BACKTEST_EXIT_CODES)]
    Export(Box<ExportArgs>),
}

/// `rules export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The rule file format.
    #[arg(long, value_enum, default_value = "prometheus")]
    pub format: ExportFormat,

    /// Latency profile whose thresholds the alerts use: chat (default), code-completion, batch,
    /// rag, agentic, or one defined in a --rules file.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,

    /// Label matchers added to every query, e.g. 'namespace="prod",job="vllm"' [default: the
    /// configuration file's selector, else none].
    #[arg(long, value_name = "MATCHERS")]
    pub selector: Option<String>,

    /// Label(s) the alerts are grouped by, comma-separated (one alert per scope) [default: the
    /// configuration file's group_by, else model_name].
    #[arg(long, value_name = "LABELS")]
    pub group_by: Option<String>,

    /// The label that tells one model's replicas apart (per-replica signals) [default: the
    /// configuration file's replica_label, else instance].
    #[arg(long, value_name = "LABEL")]
    pub replica_label: Option<String>,

    /// The range each signal is read over, as explain's --window.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30m")]
    pub window: Duration,

    /// How far back `Nx baseline` reads the same signal (PromQL `offset`) [default: --window].
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub baseline: Option<Duration>,

    /// How long a condition must hold before the alert fires (the rules' `for:`); 0s for none.
    #[arg(long = "for", value_name = "DUR", value_parser = humantime::parse_duration, default_value = "5m")]
    pub hold: Duration,

    /// Base of each alert's runbook_url annotation; the rule id is appended (after a '/' unless
    /// the base ends in '/', '#', '=', '?' or '&'). Without it there is no runbook_url.
    #[arg(long, value_name = "URL")]
    pub runbook_url_base: Option<String>,

    #[command(flatten)]
    pub rules: RulesArgs,

    #[command(flatten)]
    pub backtest: BacktestArgs,

    /// Which of these values the command line or the environment gave (see [`parse`]).
    #[arg(skip)]
    pub given: Given,
}

/// `rules export --backtest`: where and how the exported alerts are evaluated over past data.
#[derive(Debug, Args)]
#[command(next_help_heading = "Backtest (evaluate the alerts over past data instead of writing them)")]
pub struct BacktestArgs {
    /// Evaluate every exported alert over this much time before --at (e.g. 7d) and report when
    /// each would have fired, instead of writing the rule file.
    #[arg(long, value_name = "DUR", value_parser = parse_duration)]
    pub backtest: Option<Duration>,

    /// With --backtest: base URL of the Prometheus-compatible API holding the past data.
    #[arg(long, value_name = "URL", env = "VLLM_DIAG_PROMETHEUS_URL", hide_env_values = true, default_value = settings::DEFAULT_PROMETHEUS)]
    pub prometheus: String,

    /// With --backtest: the end of the range, as explain's --at [default: now].
    #[arg(long, value_name = "TIME", requires = "backtest")]
    pub at: Option<String>,

    /// With --backtest: how often the alerts are evaluated, as Prometheus' evaluation_interval;
    /// raised when the range would need more than 11,000 points per series (a note says so).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "1m", requires = "backtest")]
    pub step: Duration,

    /// With --backtest: print the report as JSON (the contract is in docs/rules.md, "Backtesting the alerts").
    #[arg(long, requires = "backtest")]
    pub json: bool,

    /// With --backtest: overall deadline for the range queries.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "5m", requires = "backtest")]
    pub timeout: Duration,

    /// With --backtest: timeout for one range query.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "2m", requires = "backtest")]
    pub query_timeout: Duration,

    #[command(flatten)]
    pub connection: ConnectionArgs,
}

/// The exit codes of `rules export`.
pub const BACKTEST_EXIT_CODES: &str = "\
Exit codes:
  0  the file was written, or every alert was backtested (whether or not any fired)
  2  usage, configuration or rule-file error, or no rule could be exported
  3  --backtest: the source is unreachable, the range holds no vLLM data, or an alert's query failed";

/// `rules export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// A Prometheus rule file (YAML with `groups:`), for Prometheus, Thanos Ruler, Mimir, VictoriaMetrics vmalert.
    Prometheus,
    /// What Alertmanager needs for those alerts to page once per incident: a route grouping them
    /// by --group-by, and inhibit rules that mute what each rule absorbs (its `supersedes`).
    Alertmanager,
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    /// Directory of extra *.toml rule files; a rule or signal with an existing id replaces it.
    #[arg(long, value_name = "DIR")]
    pub rules: Option<PathBuf>,
}
