//! The clap definitions: every command, its flags with their help, environment variables,
//! defaults and value parsers, and the exit codes each command's help lists. What they become is
//! `to_settings.rs`'s. The probe's flags are in `probe_args.rs`, the rules commands' in
//! `rules_args.rs`.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use super::*;
use crate::settings;

pub const EXIT_CODES: &str = "\
Exit codes:
  0  ran; nothing at or above --fail-on
  1  a finding at or above --fail-on (with --fail-on unexplained or info, also a change no rule
     explains)
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

    /// Configuration file to read, instead of looking for ./vllm-diag.toml, then
    /// $XDG_CONFIG_HOME/vllm-diag/vllm-diag.toml (~/.config/vllm-diag/vllm-diag.toml). Flags override it.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Read no configuration file, even when one exists.
    #[arg(long, global = true, conflicts_with = "config")]
    pub no_config: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Diagnose a window: query the metrics, compare with a baseline, rank the likely causes.
    #[command(after_help = EXIT_CODES)]
    Explain(ExplainCommandArgs),
    /// Measure what users get: a few bounded requests to an OpenAI-compatible server (a router, a
    /// gateway or an engine), timed from the client, beside the engines' own numbers.
    ///
    /// Sends at most --requests requests, --rate a second, --concurrency at once, for at most
    /// --max-duration (the limits are printed with every result, and have ceilings no flag passes).
    /// With --prometheus (or $VLLM_DIAG_PROMETHEUS_URL, or the configuration file), the engines'
    /// metrics for the same minutes are read and the difference is reported as the time before the
    /// engine. --dry-run prints every request and sends none.
    #[command(after_help = PROBE_EXIT_CODES)]
    Probe(ProbeArgs),
    /// Find the knee: a sweep of offered loads (requests in flight, or a rate) through the path
    /// users take, each step held for --step and judged against the profile's limits; the highest
    /// load within them, which limit bound there (with --prometheus), and a profile from the curve.
    ///
    /// Steps double from --start until one breaks the limits (a failed request, the p95 time to the
    /// first token over ttft_p95_high, the engines' p95 time between tokens over itl_p95_high), then
    /// bisect between the last good step and the first bad one; never a load above the first bad
    /// step. Bounded by --max-concurrency, --max-rate, --max-duration and --max-requests (printed
    /// before the first request and with every result). --dry-run prints the plan and its worst case.
    #[command(after_help = LOADTEST_EXIT_CODES)]
    Loadtest(LoadtestArgs),
    /// Inspect the rule pack.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Post-deploy smoke check: the time since the deploy against the same length before it.
    ///
    /// Prints a one-line verdict first (FAIL, PASS or NOT EVALUATED), then the report. Meant for CI:
    /// no colour, no progress, and --fail-on warning unless told otherwise.
    #[command(
        after_help = EXIT_CODES,
        mut_arg("window", |a| a.hide(true)),
        mut_arg("baseline", |a| a.hide(true)),
        mut_arg("watch", |a| a.hide(true)),
        mut_arg("metrics_listen", |a| a.hide(true)),
        mut_arg("scrape", |a| a.hide(true)),
        mut_arg("interval", |a| a.hide(true)),
        mut_arg("baseline_from", |a| a.hide(true)),
        mut_arg("save_samples", |a| a.hide(true)),
        mut_arg("fail_on", |a| a.default_value("warning"))
    )]
    Check(CheckArgs),
    /// Serve diagnoses for Alertmanager: each firing alert group is diagnosed and the report
    /// delivered to a webhook (JSON) and Slack.
    ///
    /// POST /alertmanager takes Alertmanager's webhook notifications (payload version 4). For a
    /// firing group, explain runs scoped by the alerts' labels (the --group-by labels they carry and
    /// the labels Alertmanager grouped them by, except alertname, severity and vllm_diag_rule),
    /// over a window ending now that covers the earliest alert's start (at least --window). A
    /// resolved group gets a short follow-up. GET /healthz answers ok; GET /metrics gives the
    /// service's counters and each firing group's findings (vllm_diag_finding). SIGTERM or Ctrl-C stops it after the accepted diagnoses (exit 0).
    #[command(
        after_help = "Exit codes:\n  0  stopped by SIGTERM or Ctrl-C\n  2  usage, configuration or rule-file error (nothing served)\n\nEach delivery carries the exit code explain would have ended with (run.exit_code).",
        mut_arg("at", |a| a.hide(true)),
        mut_arg("format", |a| a.hide(true)),
        mut_arg("watch", |a| a.hide(true)),
        mut_arg("metrics_listen", |a| a.hide(true)),
        mut_arg("annotations", |a| a.hide(true)),
        mut_arg("record", |a| a.hide(true)),
        mut_arg("replay", |a| a.hide(true)),
        mut_arg("scrape", |a| a.hide(true)),
        mut_arg("interval", |a| a.hide(true)),
        mut_arg("baseline_from", |a| a.hide(true)),
        mut_arg("save_samples", |a| a.hide(true)),
        mut_arg("quiet", |a| a.hide(true)),
        mut_arg("verbose", |a| a.hide(true))
    )]
    Serve(ServeArgs),
    /// Serve read-only diagnoses to AI agents over the Model Context Protocol (MCP).
    ///
    /// Tools: explain, check, rules_list, rules_show, events. Each result is a short text summary
    /// followed by the JSON report (at most 64 KiB: docs/agents.md). Connection, authentication
    /// and the configuration file work as for explain; no credential is ever part of a result, an
    /// error or a log line. Over stdio (the default) the client starts this process and talks on
    /// its stdin and stdout; logs go to stderr. Over http, the MCP streamable HTTP endpoint is
    /// POST /mcp on --listen.
    #[command(
        after_help = "Exit codes:\n  0  the client closed the connection (stdio) or SIGTERM or Ctrl-C (http)\n  2  usage, configuration or rule-file error (nothing served)\n\nEach tool result carries the exit code explain or check would have ended with.",
        mut_arg("at", |a| a.hide(true)),
        mut_arg("format", |a| a.hide(true)),
        mut_arg("watch", |a| a.hide(true)),
        mut_arg("metrics_listen", |a| a.hide(true)),
        mut_arg("annotations", |a| a.hide(true)),
        mut_arg("record", |a| a.hide(true)),
        mut_arg("replay", |a| a.hide(true)),
        mut_arg("scrape", |a| a.hide(true)),
        mut_arg("interval", |a| a.hide(true)),
        mut_arg("baseline_from", |a| a.hide(true)),
        mut_arg("save_samples", |a| a.hide(true)),
        mut_arg("quiet", |a| a.hide(true)),
        mut_arg("verbose", |a| a.hide(true))
    )]
    Mcp(McpArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `vllm-diag man > vllm-diag.1`, `vllm-diag man explain`; with
    /// --out DIR, write one page per command and subcommand into DIR.
    Man {
        /// The command whose page to print, e.g. `explain` or `rules show` (default: vllm-diag's).
        #[arg(value_name = "COMMAND")]
        command: Vec<String>,
        /// Write every page (vllm-diag.1, vllm-diag-explain.1, vllm-diag-rules-show.1, ...) into
        /// this directory instead, and list them on stdout.
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        out: Option<PathBuf>,
    },
    /// The configuration file (vllm-diag.toml).
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration: the file merged with the flags given here and the
    /// environment, secrets masked, and where each value came from (flag, env, file:line, default).
    Show(ExplainArgs),
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// When the deploy happened: an RFC 3339 time (2026-01-15T09:00:00Z), a duration counted back
    /// from --at, i.e. from now by default (20m: the deploy was 20 minutes ago), or `deploy`: the
    /// start of the last rollout, restart or configuration-change wave of the selected replicas in
    /// the 6 hours before --at, read from the metrics (the verdict names the event it took). Not
    /// needed with --replay, whose recorded window starts at the deploy.
    #[arg(long, value_name = "TIME|DUR|deploy", required_unless_present = "replay")]
    pub since: Option<String>,

    #[command(flatten)]
    pub explain: ExplainArgs,

    #[command(flatten)]
    pub probe: JoinProbeArgs,
}

/// `explain`'s command line: the diagnosis' flags and the probe that may join it.
#[derive(Debug, Args)]
pub struct ExplainCommandArgs {
    #[command(flatten)]
    pub explain: ExplainArgs,

    #[command(flatten)]
    pub probe: JoinProbeArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub service: ServiceArgs,

    #[command(flatten)]
    pub explain: ExplainArgs,
}

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub server: McpServerArgs,

    #[command(flatten)]
    pub explain: ExplainArgs,
}

/// How `mcp` talks to its client.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "MCP server")]
pub struct McpServerArgs {
    /// stdio: the client starts vllm-diag and speaks on its stdin and stdout; http: the MCP
    /// streamable HTTP transport, POST /mcp on --listen.
    #[arg(long, value_enum, default_value = "stdio")]
    pub transport: McpTransport,

    /// With --transport http: the address to listen on, host:port. Port 0 picks a free port (stderr
    /// says which). Only loopback Host headers are accepted unless --allowed-host names others.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9096")]
    pub listen: String,

    /// With --transport http: a Host header value (name or name:port) to accept besides localhost,
    /// 127.0.0.1 and ::1, when clients reach the server by another name. Repeat for several.
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,

    /// With --transport http: file holding the token every request must carry as
    /// `Authorization: Bearer <token>`. Without it, anyone who can reach the address can run
    /// diagnoses (with the credentials given here).
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// With --transport http: listen on an address other machines can reach (0.0.0.0, a host's
    /// address) without --auth-token-file. Refused otherwise: the server holds the metrics
    /// backend's credentials.
    #[arg(long)]
    pub allow_unauthenticated_remote: bool,
}

/// `mcp --transport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum McpTransport {
    /// Newline-delimited JSON-RPC on stdin and stdout.
    Stdio,
    /// MCP streamable HTTP.
    Http,
}

/// What `serve` is told beyond the diagnosis' own settings.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Service")]
pub struct ServiceArgs {
    /// Address to listen on, host:port. Port 0 picks a free port (stderr says which).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9095")]
    pub listen: String,

    /// POST each diagnosis to URL as JSON: the --format json report, plus `trigger` (the
    /// notification's firing alerts) and `run` (status, exit_code, selector, window).
    #[arg(long, value_name = "URL")]
    pub webhook_url: Option<String>,

    /// File holding a Slack incoming-webhook URL (a secret: never given on the command line, never
    /// logged); each diagnosis is posted there in the slack format.
    #[arg(long, value_name = "FILE")]
    pub slack_webhook_url_file: Option<PathBuf>,

    /// File holding the token POST /alertmanager requires as `Authorization: Bearer <token>`
    /// (Alertmanager: http_config.authorization.credentials_file). Without it, anyone who can reach
    /// the address can trigger diagnoses.
    #[arg(long, value_name = "FILE")]
    pub auth_token_file: Option<PathBuf>,

    /// Listen on an address other machines can reach (0.0.0.0, a host's address) without
    /// --auth-token-file. Refused otherwise: the service holds the metrics backend's credentials.
    #[arg(long)]
    pub allow_unauthenticated_remote: bool,

    /// A group (Alertmanager's groupKey) diagnosed this recently is not diagnosed again.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "5m", allow_hyphen_values = true)]
    pub dedup: Duration,

    /// Diagnoses running at once.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub max_concurrent: u16,

    /// A group whose scope and window length match a diagnosis started this recently, or still
    /// running, gets that diagnosis (its report and window) instead of a run of its own: an alert
    /// storm of one model's alerts reads the data once. 0s: every group runs its own.
    #[arg(long, value_name = "DUR", value_parser = parse_duration_or_zero, default_value = "60s", allow_hyphen_values = true)]
    pub share_within: Duration,

    /// Notifications waiting for a free diagnosis slot; beyond that the answer is 503 (Alertmanager
    /// retries).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..))]
    pub queue: u16,
}

/// `--format` values come from `render::Format` itself (its names and descriptions), so clap
/// stays in this file and a new format needs no change here.
impl ValueEnum for crate::render::Format {
    fn value_variants<'a>() -> &'a [Self] {
        Self::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).help(self.about()))
    }
}

/// Where `--annotations` writes findings as CI annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Annotations {
    /// GitHub Actions workflow commands (`::error title=...::message`) on stdout after the report.
    Github,
}

/// `--fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum FailOn {
    Never,
    Info,
    Unexplained,
    Warning,
    Critical,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// Base URL of a Prometheus-compatible API; a path prefix (https://host/prometheus) is kept.
    #[arg(long, value_name = "URL", env = "VLLM_DIAG_PROMETHEUS_URL", hide_env_values = true, default_value = settings::DEFAULT_PROMETHEUS)]
    pub prometheus: String,

    /// Length of the window to diagnose (e.g. 30m, 2h) [default: 30m].
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub window: Option<Duration>,

    /// End of the window: RFC 3339 (2026-01-15T09:30:00Z), Unix seconds, or "now" [default: now].
    #[arg(long, value_name = "TIME")]
    pub at: Option<String>,

    /// How far before the window the baseline sits [default: the window's length, i.e. the window
    /// right before]. 1d compares with the same time yesterday.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub baseline: Option<Duration>,

    /// Extra label matchers added to every vLLM query, e.g. 'namespace="prod",job="vllm"'.
    #[arg(long, value_name = "MATCHERS")]
    pub selector: Option<String>,

    /// Label(s) findings are grouped by, comma-separated.
    #[arg(long, value_name = "LABELS", default_value = "model_name")]
    pub group_by: String,

    /// The label that tells one model's replicas apart, in findings and breakdowns: instance, or
    /// pod on Kubernetes, or any label the vLLM series carry.
    #[arg(long, value_name = "LABEL", default_value = "instance")]
    pub replica_label: String,

    /// Output format. The default, text, opens with the verdict and shows each warning or critical
    /// finding in a few lines; -v shows the full evidence instead.
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::render::Format,

    /// Show the full evidence: every signal with its condition in words, the PromQL, what was
    /// healthy and what could not be evaluated (the table format). The other formats always carry
    /// it.
    #[arg(long, short = 'v')]
    pub verbose: bool,

    /// Exit 1 when a finding at or above this severity exists. `unexplained`: a warning or
    /// critical finding, or a signal that moved that no rule explains (so does `info`, below it).
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

    /// Scrape a vLLM /metrics endpoint directly instead of asking Prometheus (repeat for each
    /// replica); samples are taken every --interval across --window, then diagnosed locally.
    /// `host:port` means http://host:port/metrics.
    #[arg(long, value_name = "URL", conflicts_with = "replay")]
    pub scrape: Vec<String>,

    /// With --scrape: time between two scrapes [default: 5s].
    #[arg(long, value_name = "DUR", value_parser = parse_duration, requires = "scrape")]
    pub interval: Option<Duration>,

    /// With --scrape: a baseline captured earlier, as OpenMetrics with timestamps (e.g. written by
    /// --save-samples); without it, baseline comparisons are not evaluated.
    #[arg(long, value_name = "FILE", requires = "scrape")]
    pub baseline_from: Option<PathBuf>,

    /// With --scrape: also write every scraped sample to FILE (OpenMetrics with timestamps), for a
    /// later --baseline-from or for `promtool tsdb create-blocks-from openmetrics`.
    #[arg(long, value_name = "FILE", requires = "scrape")]
    pub save_samples: Option<PathBuf>,

    /// Overall deadline for all queries; what is not answered by then is reported as not evaluated.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "30s", allow_hyphen_values = true)]
    pub timeout: Duration,

    /// Timeout for one query.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, default_value = "20s", allow_hyphen_values = true)]
    pub query_timeout: Duration,

    /// Queries in flight at once.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub concurrency: u16,

    #[command(flatten)]
    pub connection: ConnectionArgs,

    /// No progress display on stderr (it only ever appears when stderr is a terminal).
    #[arg(long, short = 'q')]
    pub quiet: bool,

    /// Re-run every DUR on a terminal, showing which findings appeared and which resolved since
    /// the last run. Ctrl-C stops. Needs a live source (no --replay, --record or --at).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, allow_hyphen_values = true)]
    pub watch: Option<Duration>,

    /// With --watch: also serve the latest run's findings on http://ADDR/metrics (host:port; port
    /// 0 picks a free one, said on stderr), as serve does: vllm_diag_finding{rule,severity,<scope>}
    /// 1 and vllm_diag_not_evaluated{rule,<scope>} 1, for Prometheus to scrape and alert on.
    #[arg(long, value_name = "ADDR", requires = "watch")]
    pub metrics_listen: Option<String>,

    /// Also print the findings as CI annotations after the report (critical: error, warning:
    /// warning, info: notice). Text formats only, since the lines go to stdout.
    #[arg(long, value_enum, value_name = "KIND")]
    pub annotations: Option<Annotations>,

    /// Which of these values the command line or the environment gave (see [`parse`]).
    #[arg(skip)]
    pub given: Given,
}

/// How to authenticate to the source and check its TLS certificate. Secrets come from files or the
/// environment, never from a flag's value, which every user of the machine can see in `ps`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Connection (authentication, TLS, request log)")]
pub struct ConnectionArgs {
    /// Send `Authorization: Bearer <token>` with the token read from FILE. Without this flag the token
    /// is taken from $VLLM_DIAG_BEARER_TOKEN when set and no other credential is given.
    #[arg(long, value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,

    /// Basic-auth user name; the password comes from --basic-auth-password-file or
    /// $VLLM_DIAG_BASIC_AUTH_PASSWORD.
    #[arg(long, value_name = "USER")]
    pub basic_auth_user: Option<String>,

    /// File holding the basic-auth password (its trailing line break is ignored).
    #[arg(long, value_name = "FILE", requires = "basic_auth_user")]
    pub basic_auth_password_file: Option<PathBuf>,

    /// Extra HTTP header for every request, 'Name: value'; repeat for several. Values are never
    /// printed.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,

    /// Tenant for Thanos, Mimir or Cortex, sent as X-Scope-OrgID; several as 'a|b'.
    #[arg(long, value_name = "ID")]
    pub tenant: Option<String>,

    /// PEM file of CA certificates to trust for https:// (in addition to the built-in roots).
    #[arg(long, value_name = "FILE")]
    pub ca_file: Option<PathBuf>,

    /// PEM client certificate, for servers that require mutual TLS (with --key-file).
    #[arg(long, value_name = "FILE", requires = "key_file")]
    pub cert_file: Option<PathBuf>,

    /// PEM private key of --cert-file.
    #[arg(long, value_name = "FILE", requires = "cert_file")]
    pub key_file: Option<PathBuf>,

    /// Do not verify the server's TLS certificate. Unsafe: for tests only (a warning says so).
    #[arg(long)]
    pub insecure_skip_verify: bool,

    /// Log every HTTP request to stderr: URL, parameters, status, size, time and retries, with
    /// credentials masked; and at the end what the run transferred.
    #[arg(long)]
    pub debug: bool,
}

pub(super) fn parse_duration(s: &str) -> Result<Duration, String> {
    // (The duration flags take hyphen values so that "-5m" lands here rather than being read as a flag.)
    crate::units::parse_duration(s)
}

/// A duration where zero turns something off (`0`, `0s`).
pub(super) fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    match s.trim().trim_end_matches(['s', 'm', 'h']) {
        "0" => Ok(Duration::ZERO),
        _ => parse_duration(s),
    }
}
