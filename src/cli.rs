//! The command line, and nothing else: clap definitions, and their conversion into typed
//! [`Settings`] (each value a flag, an environment variable clap reads, or clap's default), which
//! [`crate::settings`] merges with the configuration file. Clap types go no further.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::settings::{self, Origin, Setting, Settings};

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

/// Parse the process's arguments like `Cli::parse`, also remembering which values the command line
/// or the environment gave (as opposed to clap's defaults), so that a configuration file fills in
/// only the rest.
pub fn parse() -> Cli {
    parse_from(std::env::args_os())
}

/// Whether the process's arguments name a command that reads the rule pack (explain, check,
/// serve, mcp, rules), looked at before they are parsed so that the pack can be read meanwhile
/// ([`crate::rules::preload`]). A wrong guess costs a millisecond either way, never a behaviour.
pub fn reads_rules<I: IntoIterator<Item = std::ffi::OsString>>(argv: I) -> bool {
    argv.into_iter().skip(1).any(|a| matches!(a.to_str(), Some("explain" | "check" | "serve" | "mcp" | "rules")))
}

/// [`parse`] over given arguments; exits with clap's message on a usage error, like `Cli::parse_from`.
pub fn parse_from<I, T>(argv: I) -> Cli
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    let matches = Cli::command().get_matches_from(argv);
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let sub = |name: &str| matches.subcommand_matches(name);
    let given = |m: Option<&clap::ArgMatches>| m.map(Given::from_matches).unwrap_or_default();
    match &mut cli.command {
        Command::Explain(a) => a.explain.given = given(sub("explain")),
        Command::Probe(a) => a.given = given(sub("probe")),
        Command::Loadtest(a) => a.given = given(sub("loadtest")),
        Command::Check(a) => a.explain.given = given(sub("check")),
        Command::Serve(a) => a.explain.given = given(sub("serve")),
        Command::Mcp(a) => a.explain.given = given(sub("mcp")),
        Command::Rules(RulesCommand::Export(a)) => a.given = given(sub("rules").and_then(|m| m.subcommand_matches("export"))),
        Command::Config(ConfigCommand::Show(a)) => a.given = given(sub("config").and_then(|m| m.subcommand_matches("show"))),
        _ => {}
    }
    cli
}

/// The command line as shell completion sees it: [`Cli`]'s, with the values only the rule pack
/// knows offered as completions: rule and signal ids for `rules show`, profile names for every
/// `--profile`.
/// Only `vllm-diag completions` uses it; parsing never does (a `--rules` directory may add more).
fn completion_command(rule_ids: &[String], profiles: &[String]) -> clap::Command {
    use clap::builder::PossibleValuesParser;
    // clap keeps possible values as &'static str; this command is built once, for one script.
    let leak = |v: &[String]| -> Vec<&'static str> { v.iter().map(|s| &*s.clone().leak()).collect() };
    let profiles = leak(profiles);
    let rule_ids = leak(rule_ids);
    let profile = move |c: clap::Command| {
        let values = profiles.clone();
        c.mut_arg("profile", move |a| a.value_parser(PossibleValuesParser::new(values)))
    };
    let mut cmd = <Cli as clap::CommandFactory>::command();
    for sub in ["explain", "check", "serve", "mcp"] {
        cmd = cmd.mut_subcommand(sub, profile.clone());
    }
    cmd.mut_subcommand("config", |c| c.mut_subcommand("show", profile.clone())).mut_subcommand("rules", |c| {
        c.mut_subcommand("export", profile.clone()).mut_subcommand("show", |s| s.mut_arg("id", |a| a.value_parser(PossibleValuesParser::new(rule_ids))))
    })
}

/// `vllm-diag completions SHELL`: the script, from [`completion_command`]. clap_complete's fish
/// script completes options' values but not positional ones, so the ids `rules show` takes are
/// added to it here; its bash script needs one name mended (below).
pub fn completion_script(shell: clap_complete::Shell, rule_ids: &[String], profiles: &[String]) -> String {
    let mut cmd = completion_command(rule_ids, profiles);
    let mut buf: Vec<u8> = Vec::new();
    clap_complete::generate(shell, &mut cmd, "vllm-diag", &mut buf);
    let mut script = String::from_utf8_lossy(&buf).into_owned();
    if shell == clap_complete::Shell::Bash {
        // clap_complete 4.6 names a subcommand's case `vllm__subcmd__diag__subcmd__explain` but
        // builds the word it matches as `vllm__diag__subcmd__explain` (the '-' in our name is
        // escaped twice over), so no subcommand's options or values completed. tests/edges.rs asks
        // bash itself.
        script = script.replace("vllm__subcmd__diag", "vllm__diag");
    }
    if shell == clap_complete::Shell::Fish {
        script.push_str(&format!(
            "complete -c vllm-diag -n \"__fish_vllm_diag_using_subcommand rules; and __fish_seen_subcommand_from show\" -f -a \"{}\"\n",
            rule_ids.join(" ")
        ));
    }
    script
}

impl Cli {
    /// How to find the configuration file.
    pub fn lookup(&self) -> settings::Lookup {
        settings::Lookup { explicit: self.config.clone(), disabled: self.no_config }
    }
}

/// Which of a command's values the command line or the environment gave, as opposed to clap's
/// defaults (only those may be replaced by the file). Filled by [`parse_from`].
#[derive(Debug, Clone, Default)]
pub struct Given {
    flags: std::collections::BTreeSet<String>,
    env: std::collections::BTreeSet<String>,
}

impl Given {
    /// Record every argument whose value came from the command line or the environment.
    fn from_matches(m: &clap::ArgMatches) -> Given {
        let mut g = Given::default();
        for id in m.ids() {
            match m.value_source(id.as_str()) {
                Some(clap::parser::ValueSource::CommandLine) => {
                    g.flags.insert(id.as_str().to_string());
                }
                Some(clap::parser::ValueSource::EnvVariable) => {
                    g.env.insert(id.as_str().to_string());
                }
                _ => {}
            }
        }
        g
    }

    /// Where the value of the argument with clap id `id` (typed as `flag`, read from `env`) came from.
    fn origin(&self, id: &str, flag: &'static str, env: Option<&'static str>) -> Origin {
        match env {
            _ if self.flags.contains(id) => Origin::Flag(flag),
            Some(var) if self.env.contains(id) => Origin::Env(var),
            _ => Origin::Default,
        }
    }
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

impl JoinProbeArgs {
    /// The probe to join the diagnosis, when `--probe` was given.
    pub fn into_settings(self, given: &Given) -> Option<settings::probe::JoinProbe> {
        use crate::probe::{Api, StreamMode, DEFAULTS};
        let url = self.probe?;
        let set = |id: &str, flag: &'static str| given.origin(id, flag, None);
        let probe = settings::probe::ProbeSettings {
            url,
            model: opt(self.probe_model, "--probe-model"),
            api: Setting::new(
                match self.probe_api {
                    ProbeApi::Completions => Api::Completions,
                    ProbeApi::Chat => Api::Chat,
                },
                set("probe_api", "--probe-api"),
            ),
            stream: Setting::new(
                match self.probe_stream {
                    ProbeStream::Always => StreamMode::Always,
                    ProbeStream::Never => StreamMode::Never,
                    ProbeStream::Both => StreamMode::Both,
                },
                set("probe_stream", "--probe-stream"),
            ),
            prompt_words: Setting::default_value(64),
            max_tokens: Setting::new(self.probe_max_tokens, set("probe_max_tokens", "--probe-max-tokens")),
            ignore_eos: Setting::default_value(true),
            requests: Setting::new(self.probe_requests as usize, set("probe_requests", "--probe-requests")),
            rate: Setting::new(self.probe_rate, set("probe_rate", "--probe-rate")),
            concurrency: Setting::new(self.probe_concurrency as usize, set("probe_concurrency", "--probe-concurrency")),
            max_duration: Setting::default_value(DEFAULTS.max_duration),
            timeout: Setting::default_value(DEFAULTS.request_timeout),
            settle: Setting::new(self.probe_settle, set("probe_settle", "--probe-settle")),
            dry_run: false,
            format: settings::probe::ProbeFormat::Text,
            quiet: false,
        };
        Some(settings::probe::JoinProbe { probe, bearer_token_file: self.probe_bearer_token_file })
    }
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

impl ProbeArgs {
    /// The probe's settings, and the shared ones (where the engines are read, and the connection
    /// flags, which the app sends to the probed URL only).
    pub fn into_settings(self) -> (Settings, settings::probe::ProbeSettings) {
        use crate::probe::{Api, StreamMode};
        let g = &self.given;
        let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
        let mut shared = Settings::default();
        shared.source.prometheus = match self.prometheus {
            Some(url) => Setting::new(url, g.origin("prometheus", "--prometheus", Some(settings::ENV_PROMETHEUS_URL))),
            None => Setting::default_value(settings::DEFAULT_PROMETHEUS.to_string()),
        };
        shared.scope.selector = opt(self.selector, "--selector");
        shared.limits.query_timeout = Setting::new(self.query_timeout, set("query_timeout", "--query-timeout"));
        shared.connection = self.connection.into_settings(g);
        let probe = settings::probe::ProbeSettings {
            url: self.url,
            model: opt(self.model, "--model"),
            api: Setting::new(
                match self.api {
                    ProbeApi::Completions => Api::Completions,
                    ProbeApi::Chat => Api::Chat,
                },
                set("api", "--api"),
            ),
            stream: Setting::new(
                match self.stream {
                    ProbeStream::Always => StreamMode::Always,
                    ProbeStream::Never => StreamMode::Never,
                    ProbeStream::Both => StreamMode::Both,
                },
                set("stream", "--stream"),
            ),
            prompt_words: Setting::new(self.prompt_words as usize, set("prompt_words", "--prompt-words")),
            max_tokens: Setting::new(self.max_tokens, set("max_tokens", "--max-tokens")),
            ignore_eos: Setting::new(!self.no_ignore_eos, set("no_ignore_eos", "--no-ignore-eos")),
            requests: Setting::new(self.requests as usize, set("requests", "--requests")),
            rate: Setting::new(self.rate, set("rate", "--rate")),
            concurrency: Setting::new(self.concurrency as usize, set("concurrency", "--concurrency")),
            max_duration: Setting::new(self.max_duration, set("max_duration", "--max-duration")),
            timeout: Setting::new(self.timeout, set("timeout", "--timeout")),
            settle: Setting::new(self.settle, set("settle", "--settle")),
            dry_run: self.dry_run,
            format: match self.format {
                ProbeFormatArg::Text => settings::probe::ProbeFormat::Text,
                ProbeFormatArg::Json => settings::probe::ProbeFormat::Json,
            },
            quiet: self.quiet,
        };
        (shared, probe)
    }
}

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
    #[arg(value_name = "URL")]
    pub url: String,

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

impl LoadtestArgs {
    /// The load test's settings, and the shared ones (as `probe`'s: where the engines are read,
    /// the connection flags for the loaded URL, the rules and profile).
    pub fn into_settings(self) -> (Settings, settings::loadtest::LoadtestSettings) {
        use crate::loadtest::LoadMode;
        use crate::probe::Api;
        let g = &self.given;
        let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
        let mut shared = Settings::default();
        shared.source.prometheus = match self.prometheus {
            Some(url) => Setting::new(url, g.origin("prometheus", "--prometheus", Some(settings::ENV_PROMETHEUS_URL))),
            None => Setting::default_value(settings::DEFAULT_PROMETHEUS.to_string()),
        };
        shared.scope.selector = opt(self.selector, "--selector");
        shared.limits.query_timeout = Setting::new(self.query_timeout, set("query_timeout", "--query-timeout"));
        shared.connection = self.connection.into_settings(g);
        shared.rules.dir = opt(self.rules, "--rules");
        shared.rules.profile = opt(self.profile, "--profile");
        let lt = settings::loadtest::LoadtestSettings {
            url: self.url,
            model: opt(self.model, "--model"),
            api: Setting::new(
                match self.api {
                    ProbeApi::Completions => Api::Completions,
                    ProbeApi::Chat => Api::Chat,
                },
                set("api", "--api"),
            ),
            prompt_words: Setting::new(self.prompt_words as usize, set("prompt_words", "--prompt-words")),
            max_tokens: Setting::new(self.max_tokens, set("max_tokens", "--max-tokens")),
            ignore_eos: Setting::new(!self.no_ignore_eos, set("no_ignore_eos", "--no-ignore-eos")),
            mode: Setting::new(
                match self.mode {
                    LoadModeArg::Concurrency => LoadMode::Concurrency,
                    LoadModeArg::Rate => LoadMode::Rate,
                },
                set("mode", "--mode"),
            ),
            start: Setting::new(self.start, set("start", "--start")),
            max_concurrency: Setting::new(self.max_concurrency as usize, set("max_concurrency", "--max-concurrency")),
            max_rate: Setting::new(self.max_rate, set("max_rate", "--max-rate")),
            max_duration: Setting::new(self.max_duration, set("max_duration", "--max-duration")),
            max_requests: Setting::new(self.max_requests as usize, set("max_requests", "--max-requests")),
            step: Setting::new(self.step, set("step", "--step")),
            timeout: Setting::new(self.timeout, set("timeout", "--timeout")),
            settle: Setting::new(self.settle, set("settle", "--settle")),
            profile_out: self.profile_out,
            profile_name: self.profile_name,
            margin: Setting::new(self.margin, set("margin", "--margin")),
            dry_run: self.dry_run,
            format: match self.format {
                ProbeFormatArg::Text => settings::probe::ProbeFormat::Text,
                ProbeFormatArg::Json => settings::probe::ProbeFormat::Json,
            },
            quiet: self.quiet,
        };
        (shared, lt)
    }
}

fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("{s:?} is not a rate: give requests per second above 0, e.g. 2 or 0.5")),
    }
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

/// An optional flag's value: given on the command line, or nobody's.
fn opt<T>(value: Option<T>, flag: &'static str) -> Setting<Option<T>> {
    match value {
        Some(v) => Setting::flag(Some(v), flag),
        None => Setting::default_value(None),
    }
}

impl RulesArgs {
    /// The settings the rules commands take from the command line: the rules directory, and the
    /// profile (`rules export --profile`); the configuration file fills in the rest.
    pub fn into_settings(self, profile: Option<String>) -> Settings {
        Settings {
            rules: settings::RuleSettings { dir: opt(self.rules, "--rules"), profile: opt(profile, "--profile"), ..settings::RuleSettings::default() },
            ..Settings::default()
        }
    }
}

impl ExportArgs {
    /// The settings `rules export` takes from its flags: the rules directory, the profile and the
    /// scope (selector, grouping, replica label); the configuration file fills in what they leave,
    /// then the defaults (model_name, instance).
    pub fn settings(&mut self) -> Settings {
        let given_or = |v: Option<String>, flag: &'static str, default: &str| match v {
            Some(v) => Setting::flag(v, flag),
            None => Setting::default_value(default.to_string()),
        };
        let mut s = RulesArgs { rules: self.rules.rules.take() }.into_settings(self.profile.take());
        s.scope.selector = opt(self.selector.take(), "--selector");
        s.scope.group_by = given_or(self.group_by.take(), "--group-by", "model_name");
        s.scope.replica_label = given_or(self.replica_label.take(), "--replica-label", "instance");
        if self.backtest.backtest.is_some() {
            let g = &self.given;
            let b = &mut self.backtest;
            let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
            s.source.prometheus = Setting::new(std::mem::take(&mut b.prometheus), g.origin("prometheus", "--prometheus", Some(settings::ENV_PROMETHEUS_URL)));
            s.scope.at = opt(b.at.take(), "--at");
            s.limits.timeout = Setting::new(b.timeout, set("timeout", "--timeout"));
            s.limits.query_timeout = Setting::new(b.query_timeout, set("query_timeout", "--query-timeout"));
            s.connection = b.connection.clone().into_settings(g);
        }
        s
    }

    /// The flags typed that only a backtest reads, when there is no --backtest: they would be
    /// ignored, so the command stops and says so.
    pub fn backtest_flags_without_backtest(&self) -> Vec<String> {
        if self.backtest.backtest.is_some() {
            return Vec::new();
        }
        const ONLY: &[&str] = &[
            "prometheus",
            "bearer_token_file",
            "basic_auth_user",
            "basic_auth_password_file",
            "headers",
            "tenant",
            "ca_file",
            "cert_file",
            "key_file",
            "insecure_skip_verify",
            "debug",
        ];
        ONLY.iter()
            .filter(|id| self.given.flags.contains(**id))
            .map(|id| format!("--{}", if *id == "headers" { "header".to_string() } else { id.replace('_', "-") }))
            .collect()
    }
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

impl FailOn {
    /// Whether changes no rule explains fail the run: at `unexplained` and below it.
    pub fn fails_unexplained(self) -> bool {
        matches!(self, FailOn::Info | FailOn::Unexplained)
    }
}

impl From<FailOn> for Option<crate::report::Severity> {
    fn from(f: FailOn) -> Option<crate::report::Severity> {
        use crate::report::Severity;
        match f {
            FailOn::Never => None,
            FailOn::Info => Some(Severity::Info),
            FailOn::Unexplained | FailOn::Warning => Some(Severity::Warning),
            FailOn::Critical => Some(Severity::Critical),
        }
    }
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

impl ExplainArgs {
    /// The typed settings this command line gives, each value with its origin (a flag, an
    /// environment variable clap reads, or clap's default), for [`crate::settings::build`] to merge
    /// with the environment and the configuration file.
    pub fn into_settings(self) -> Settings {
        let g = &self.given;
        let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
        // An optional value: its flag when given, else unset (the default).
        let connection = self.connection.into_settings(g);
        let scrape_origin = if self.scrape.is_empty() { Origin::Default } else { Origin::Flag("--scrape") };
        Settings {
            file: settings::FileInfo::default(),
            source: settings::SourceSettings {
                prometheus: Setting::new(self.prometheus, g.origin("prometheus", "--prometheus", Some(settings::ENV_PROMETHEUS_URL))),
                replay: opt(self.replay, "--replay"),
                record: opt(self.record, "--record"),
                scrape: Setting::new(self.scrape, scrape_origin),
                interval: opt(self.interval, "--interval"),
                baseline_from: opt(self.baseline_from, "--baseline-from"),
                save_samples: opt(self.save_samples, "--save-samples"),
            },
            connection,
            scope: settings::Scope {
                window: opt(self.window, "--window"),
                at: opt(self.at, "--at"),
                baseline: opt(self.baseline, "--baseline"),
                selector: opt(self.selector, "--selector"),
                group_by: Setting::new(self.group_by, set("group_by", "--group-by")),
                replica_label: Setting::new(self.replica_label, set("replica_label", "--replica-label")),
            },
            rules: settings::RuleSettings { dir: opt(self.rules, "--rules"), profile: opt(self.profile, "--profile"), ..settings::RuleSettings::default() },
            limits: settings::Limits {
                timeout: Setting::new(self.timeout, set("timeout", "--timeout")),
                query_timeout: Setting::new(self.query_timeout, set("query_timeout", "--query-timeout")),
                concurrency: Setting::new(self.concurrency, set("concurrency", "--concurrency")),
            },
            output: settings::Output {
                // -v is the text format at full length: the table.
                format: match (self.verbose, self.format) {
                    (true, crate::render::Format::Text) => Setting::flag(crate::render::Format::Table, "--verbose"),
                    (_, format) => Setting::new(format, set("format", "--format")),
                },
                fail_on: Setting::new(self.fail_on.into(), set("fail_on", "--fail-on")),
                fail_on_unexplained: Setting::new(self.fail_on.fails_unexplained(), set("fail_on", "--fail-on")),
                quiet: Setting::new(self.quiet, set("quiet", "--quiet")),
                watch: opt(self.watch, "--watch"),
                metrics_listen: opt(self.metrics_listen, "--metrics-listen"),
                annotations: opt(self.annotations.map(|Annotations::Github| settings::Annotations::Github), "--annotations"),
                links: Setting::default(),
            },
        }
    }
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

impl ConnectionArgs {
    /// The connection settings this command line gives; `g` tells which values it typed.
    fn into_settings(self, g: &Given) -> settings::Connection {
        let set = |id: &str, flag: &'static str| g.origin(id, flag, None);
        settings::Connection {
            headers: self.headers.into_iter().map(|h| Setting::flag(crate::source::prometheus::Secret::new(h), "--header")).collect(),
            tenant: opt(self.tenant, "--tenant"),
            ca_file: opt(self.ca_file, "--ca-file"),
            cert_file: opt(self.cert_file, "--cert-file"),
            key_file: opt(self.key_file, "--key-file"),
            insecure_skip_verify: Setting::new(self.insecure_skip_verify, set("insecure_skip_verify", "--insecure-skip-verify")),
            bearer_token_file: opt(self.bearer_token_file, "--bearer-token-file"),
            bearer_token: Setting::default_value(None),
            basic_auth_user: opt(self.basic_auth_user, "--basic-auth-user"),
            basic_auth_password_file: opt(self.basic_auth_password_file, "--basic-auth-password-file"),
            basic_auth_password: Setting::default_value(None),
            withheld: None,
            debug: Setting::new(self.debug, set("debug", "--debug")),
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    // (The duration flags take hyphen values so that "-5m" lands here rather than being read as a flag.)
    crate::units::parse_duration(s)
}

/// A duration where zero turns something off (`0`, `0s`).
fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    match s.trim().trim_end_matches(['s', 'm', 'h']) {
        "0" => Ok(Duration::ZERO),
        _ => parse_duration(s),
    }
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
    fn the_commands_that_read_the_rule_pack_are_told_from_the_others_before_parsing() {
        let reads = |args: &[&str]| reads_rules(std::iter::once("vllm-diag").chain(args.iter().copied()).map(std::ffi::OsString::from));
        assert!(reads(&["explain", "--window", "30m"]));
        assert!(reads(&["--no-config", "check", "--since", "1h"]));
        assert!(reads(&["rules", "list"]));
        assert!(reads(&["serve"]));
        assert!(reads(&["mcp", "--transport", "http"]));
        assert!(!reads(&["--version"]));
        assert!(!reads(&["completions", "bash"]));
        assert!(!reads(&["config", "show"]));
        // The program's own name is not an argument, even when it is spelled like a command.
        assert!(!reads_rules(["explain", "--help"].map(std::ffi::OsString::from).into_iter().take(1)));
    }

    #[test]
    fn durations_must_be_positive_and_human() {
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert!(parse_duration("0s").unwrap_err().contains("longer than zero"));
        assert!(parse_duration("-5m").is_err());
        assert!(parse_duration("soon").is_err());
        // Beyond what Prometheus takes as a timeout or a range (and any window with data).
        assert!(parse_duration("100y").is_ok());
        assert!(parse_duration("99999999999d").unwrap_err().contains("at most 100 years"));
        assert!(parse_duration("30M").unwrap_err().contains("months"));
    }

    fn explain_settings(argv: &[&str]) -> Settings {
        let mut full = vec!["vllm-diag", "explain"];
        full.extend_from_slice(argv);
        match parse_from(full).command {
            Command::Explain(a) => a.explain.into_settings(),
            other => panic!("not explain: {other:?}"),
        }
    }

    #[test]
    fn given_flags_are_told_apart_from_defaults() {
        let s = explain_settings(&["--group-by", "model_name", "--format", "json", "--header", "X-A: 1"]);
        assert_eq!(s.scope.group_by, Setting::flag("model_name".to_string(), "--group-by"));
        assert_eq!(s.scope.replica_label, Setting::default_value("instance".to_string()));
        assert_eq!(s.output.format, Setting::flag(crate::render::Format::Json, "--format"));
        assert_eq!(s.connection.headers[0].origin, Origin::Flag("--header"));
        assert_eq!(s.scope.window, Setting::default_value(None));
        assert!(!s.source.prometheus.origin.is_flag());
        assert_eq!(*s.output.fail_on, None);
    }

    #[test]
    fn verbose_turns_the_default_text_into_the_full_table_and_leaves_other_formats_alone() {
        use crate::render::Format;
        assert_eq!(explain_settings(&[]).output.format, Setting::default_value(Format::Text));
        assert_eq!(explain_settings(&["-v"]).output.format, Setting::flag(Format::Table, "--verbose"));
        assert_eq!(explain_settings(&["--verbose", "--format", "text"]).output.format, Setting::flag(Format::Table, "--verbose"));
        assert_eq!(explain_settings(&["-v", "--format", "markdown"]).output.format, Setting::flag(Format::Markdown, "--format"));
        assert_eq!(explain_settings(&["--format", "table"]).output.format, Setting::flag(Format::Table, "--format"));
        match parse_from(["vllm-diag", "check", "--since", "20m", "-v"]).command {
            Command::Check(a) => assert_eq!(*a.explain.into_settings().output.format, Format::Table),
            other => panic!("not check: {other:?}"),
        }
    }

    #[test]
    fn check_fails_on_warnings_by_default() {
        match parse_from(["vllm-diag", "check", "--since", "20m"]).command {
            Command::Check(a) => assert_eq!(a.explain.into_settings().output.fail_on, Setting::default_value(Some(crate::report::Severity::Warning))),
            other => panic!("not check: {other:?}"),
        }
    }

    #[test]
    fn every_output_format_has_a_flag_value() {
        use crate::render::Format;
        for f in Format::ALL {
            let name = f.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
            assert_eq!(name, f.name());
            assert_eq!(
                Cli::try_parse_from(["vllm-diag", "explain", "--format", f.name()])
                    .map(|c| matches!(c.command, Command::Explain(a) if a.explain.format == *f))
                    .ok(),
                Some(true)
            );
        }
    }
}
