//! The run: flags -> options -> source -> explain -> render -> write, and the exit code.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use crate::cli::{Annotations, CheckArgs, Cli, Command, ExplainArgs, FailOn, RulesCommand};
use crate::error::{exit, Failure};
use crate::explain::{explain, ExplainError, ExplainOptions};
use crate::render::{self, RenderOptions};
use crate::report::{Report, Severity};
use crate::rules::{load_with_overrides, RuleSet};
use crate::source::prometheus::{ClientOptions, PrometheusClient};
use crate::source::record::{Recorder, Replay};
use crate::source::Source;

/// Run the parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<u8, Failure> {
    use crate::config_file::{configure, Lookup, Mode};
    // The configuration file is read only by the commands it applies to, so a broken one never
    // stops `man` or `rules`.
    let lookup = Lookup { explicit: cli.config.clone(), disabled: cli.no_config };
    match cli.command {
        Command::Explain(args) => run_explain(configure(args, &lookup, Mode::Explain)?),
        Command::Check(mut args) => {
            args.explain = configure(args.explain, &lookup, Mode::Check)?;
            run_check(args)
        }
        Command::Config(crate::cli::ConfigCommand::Show(args)) => {
            write_stdout(&crate::config_file::show(args, &lookup)?)?;
            Ok(exit::OK)
        }
        Command::Completions { shell } => {
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut buf: Vec<u8> = Vec::new();
            clap_complete::generate(shell, &mut cmd, "vllm-diag", &mut buf);
            write_stdout(&String::from_utf8_lossy(&buf))?;
            Ok(exit::OK)
        }
        Command::Man => {
            let mut buf: Vec<u8> = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command())
                .render(&mut buf)
                .map_err(|e| Failure::Output(e.to_string()))?;
            write_stdout(&String::from_utf8_lossy(&buf))?;
            Ok(exit::OK)
        }
        Command::Rules(RulesCommand::List(a)) => {
            let set = load_with_overrides(a.rules.as_deref())?;
            write_stdout(&crate::rules::doc::list(&set))?;
            Ok(exit::OK)
        }
        Command::Rules(RulesCommand::Test { files, rules }) => {
            let set = load_with_overrides(rules.rules.as_deref())?;
            let summary = crate::rules::test::run_files(&files, &set).map_err(|e| Failure::Usage(format!("test file error: {e}")))?;
            write_stdout(&summary.text)?;
            Ok(if summary.failed > 0 { exit::FINDINGS } else { exit::OK })
        }
        Command::Rules(RulesCommand::Show { id, rules }) => {
            let set = load_with_overrides(rules.rules.as_deref())?;
            let text = crate::rules::doc::show(&set, &id).ok_or_else(|| {
                Failure::Usage(format!(
                    "no rule {id:?}. Known rules: {}",
                    set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")
                ))
            })?;
            write_stdout(&text)?;
            Ok(exit::OK)
        }
    }
}

/// Exit code for a finished report.
pub fn exit_code(report: &Report, fail_on: FailOn) -> u8 {
    let threshold = match fail_on {
        FailOn::Never => None,
        FailOn::Info => Some(Severity::Info),
        FailOn::Warning => Some(Severity::Warning),
        FailOn::Critical => Some(Severity::Critical),
    };
    if let (Some(t), Some(worst)) = (threshold, report.worst_severity()) {
        if worst >= t {
            return exit::FINDINGS;
        }
    }
    if report.stats.rules_evaluated == 0 {
        return exit::NO_DATA;
    }
    exit::OK
}

fn run_explain(args: ExplainArgs) -> Result<u8, Failure> {
    if let Some(every) = args.watch {
        return crate::watch::run(&args, every);
    }
    check_annotations(&args)?;
    let progress = !args.quiet && std::io::stderr().is_terminal();
    let report = diagnose(&args, progress)?;
    output(&args, &report, None)
}

/// `check`: explain over the time since the deploy, with the same length before it as baseline.
fn run_check(mut args: CheckArgs) -> Result<u8, Failure> {
    let ex = &mut args.explain;
    if ex.window.is_some() || ex.baseline.is_some() {
        return Err(Failure::Usage(
            "check measures from the deploy: give --since (and --at for a past check) instead of --window or --baseline".into(),
        ));
    }
    if ex.watch.is_some() {
        return Err(Failure::Usage("--watch is for explain on a terminal; check runs once, for CI".into()));
    }
    check_annotations(ex)?;
    if !ex.scrape.is_empty() {
        return Err(Failure::Usage(
            "check compares the time since a deploy with as long before it, which needs stored history; --scrape samples only from now on. Point check at the Prometheus that scrapes the servers, or use `explain --scrape` (with --baseline-from) for a live look".into(),
        ));
    }
    if let Some(since) = &args.since {
        if ex.replay.is_some() {
            return Err(Failure::Usage(
                "--replay re-runs the recorded windows: drop --since (the recording's window starts at the deploy)".into(),
            ));
        }
        let now = chrono::Utc::now();
        let end = crate::config::parse_at(ex.at.as_deref().unwrap_or("now"), now)?;
        let deploy = crate::check::deploy_time(since, end)?;
        let window = (end - deploy).to_std().unwrap_or_default();
        ex.window = Some(window);
        ex.at = Some(end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    }
    let report = match diagnose(&args.explain, false) {
        Ok(r) => r,
        Err(e @ (Failure::Source(_) | Failure::NoData(_))) => {
            // The verdict line comes first even when there is no report to follow it.
            let verdict = "NOT EVALUATED: the deploy could not be checked (no data or no answer from the source; the reason follows); this is not a pass";
            if args.explain.format.is_text() {
                write_stdout(&format!("{verdict}\n"))?;
            } else {
                eprintln!("{verdict}");
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let fail_on = severity_of(args.explain.fail_on);
    let verdict = render::check_verdict(&report, &RenderOptions { now: live_now(&args.explain), fail_on, ..RenderOptions::default() });
    output(&args.explain, &report, Some(verdict))
}

/// `--annotations` writes to stdout after the report, which only a text format can take.
fn check_annotations(args: &ExplainArgs) -> Result<(), Failure> {
    if args.annotations.is_some() && !args.format.is_text() {
        return Err(Failure::Usage(format!(
            "--annotations prints workflow commands on stdout, which would corrupt --format {}: use --format table, markdown or slack with --annotations",
            clap::ValueEnum::to_possible_value(&args.format).map(|v| v.get_name().to_string()).unwrap_or_default()
        )));
    }
    Ok(())
}

fn severity_of(fail_on: FailOn) -> Option<Severity> {
    match fail_on {
        FailOn::Never => None,
        FailOn::Info => Some(Severity::Info),
        FailOn::Warning => Some(Severity::Warning),
        FailOn::Critical => Some(Severity::Critical),
    }
}

/// The time relative hints are measured from: now for a live run, none for a replay, whose
/// output must be the same bytes whenever it is rendered.
fn live_now(args: &ExplainArgs) -> Option<chrono::DateTime<chrono::Utc>> {
    args.replay.is_none().then(chrono::Utc::now)
}

/// Render and write the report (after `check`'s verdict line), the GitHub step summary and the
/// annotations; returns the exit code.
fn output(args: &ExplainArgs, report: &Report, verdict: Option<String>) -> Result<u8, Failure> {
    let color = verdict.is_none()
        && args.format == render::Format::Table
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb");
    // Wrap tables to the terminal; a pipe or a file gets unwrapped lines (easier to paste and grep).
    let width = std::io::stdout()
        .is_terminal()
        .then(|| terminal_size::terminal_size().map(|(w, _)| w.0))
        .flatten();
    let opts = RenderOptions { color, width, now: live_now(args), fail_on: severity_of(args.fail_on) };
    let mut text = render::render(report, args.format, &opts);
    if let Some(v) = &verdict {
        if args.format.is_text() {
            text = format!("{v}\n\n{text}");
        } else {
            // A document format stays parseable: the verdict goes to stderr.
            eprintln!("{v}");
        }
    }
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let mut md = render::render(report, render::Format::Markdown, &RenderOptions { now: opts.now, ..RenderOptions::default() });
        if let Some(v) = &verdict {
            md = format!("### {}\n\n{md}", render::github::summary_heading(v));
        }
        if let Err(e) = append_summary(std::path::Path::new(&path), &md) {
            eprintln!("vllm-diag: warning: cannot append the report to $GITHUB_STEP_SUMMARY ({}): {e}", std::path::Path::new(&path).display());
        }
    }
    if args.annotations == Some(Annotations::Github) {
        text.push_str(&render::github::annotations(report));
    }
    write_stdout(&text)?;
    Ok(exit_code(report, args.fail_on))
}

/// Append to the step summary file, separated from what other steps wrote by a blank line.
fn append_summary(path: &std::path::Path, markdown: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(format!("{markdown}\n").as_bytes())?;
    f.flush()
}

/// Query the source and build the report: everything `explain` does before rendering. `progress`
/// shows a spinner on stderr while queries run.
pub(crate) fn diagnose(args: &ExplainArgs, progress: bool) -> Result<Report, Failure> {
    let mut rules: RuleSet = load_with_overrides(args.rules.as_deref())?;
    if let Some(profile) = &args.profile {
        rules.apply_profile(profile).map_err(Failure::Usage)?;
    }
    // The configuration file's thresholds and disabled rules (listed in the report as disabled).
    let disabled = args.config.apply_to_rules(&mut rules);

    // Kept for --debug's transfer summary.
    let mut http_client: Option<Arc<PrometheusClient>> = None;
    let (source, params, selector, recorder): (Arc<dyn Source>, _, _, Option<Arc<Recorder>>) = match &args.replay {
        Some(path) => {
            if args.window.is_some() || args.at.is_some() || args.baseline.is_some() || args.selector.is_some() {
                return Err(Failure::Usage(
                    "--replay re-runs the recorded windows and selector: drop --window, --at, --baseline and --selector".into(),
                ));
            }
            if args.given.flag("group_by") || args.given.flag("replica_label") {
                return Err(Failure::Usage(
                    "--replay re-runs the recorded grouping: drop --group-by and --replica-label (the recording answers only the queries it holds)".into(),
                ));
            }
            let (replay, params) = Replay::open(path).map_err(|e| Failure::Recording(e.to_string()))?;
            let selector = crate::selector::Selector::parse(&params.selector)
                .map_err(|e| Failure::Recording(format!("{}: the recorded selector is invalid: {e}", path.display())))?;
            eprintln!("vllm-diag: replaying {} (recorded from {})", path.display(), replay.info().url);
            (Arc::new(replay), params, selector, None)
        }
        None if !args.scrape.is_empty() => {
            let prepared = scrape_prepare(args, progress)?;
            let local: Arc<dyn Source> = prepared.source;
            match &args.record {
                Some(_) => {
                    let rec = Arc::new(Recorder::new(local));
                    (rec.clone() as Arc<dyn Source>, prepared.params, prepared.selector, Some(rec))
                }
                None => (local, prepared.params, prepared.selector, None),
            }
        }
        None => {
            let (params, selector) = crate::config::run_params(args, chrono::Utc::now())?;
            let client = Arc::new(connect(args)?);
            http_client = Some(client.clone());
            let client: Arc<dyn Source> = client;
            match &args.record {
                Some(_) => {
                    let rec = Arc::new(Recorder::new(client));
                    (rec.clone() as Arc<dyn Source>, params, selector, Some(rec))
                }
                None => (client, params, selector, None),
            }
        }
    };

    let (source, spinner) = crate::progress::attach(source, progress && args.replay.is_none());
    let opts = ExplainOptions { params: params.clone(), selector, concurrency: args.concurrency as usize, deadline: args.timeout };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Output(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(explain(source, &rules, &opts)).map(|mut r| {
        r.disabled = disabled;
        r
    });
    spinner.finish();

    if let (true, Some(c)) = (args.connection.debug, &http_client) {
        let t = c.stats();
        eprintln!(
            "vllm-diag: debug: transferred {} bytes in {} requests ({} attempts); largest answer {} bytes, for {}",
            t.bytes, t.requests, t.attempts, t.largest_bytes, t.largest
        );
    }

    // Record even a failed run: its errors are part of what happened.
    if let (Some(rec), Some(path)) = (&recorder, &args.record) {
        rec.save(path, &params).map_err(|e| Failure::Recording(e.to_string()))?;
    }

    match result {
        Ok(r) => {
            if r.stats.rules_evaluated == 0 {
                // The report still prints (it lists why), but nobody should read it as a verdict.
                let why = r.not_evaluated.iter().find(|n| !n.reason.contains("metric missing")).or(r.not_evaluated.first()).map_or("no rule had the data it needs".to_string(), |n| n.reason.clone());
                eprintln!("vllm-diag: nothing could be evaluated, so this run gives no verdict (exit code 3); for example: {why}");
            }
            Ok(r)
        }
        Err(ExplainError::Unreachable(e)) => Err(Failure::Source(e.to_string())),
        Err(ExplainError::NoData(m)) => Err(Failure::NoData(m)),
    }
}

/// `--scrape`: check the flags that do not apply, sample the endpoints, place the windows.
fn scrape_prepare(args: &ExplainArgs, progress: bool) -> Result<crate::source::scrape::Prepared, Failure> {
    use crate::source::scrape::{prepare, ScrapeArgs, ScrapeError};
    if args.at.is_some() {
        return Err(Failure::Usage("--scrape diagnoses the window it samples, ending now: drop --at".into()));
    }
    if args.baseline.is_some() {
        return Err(Failure::Usage(
            "--scrape has no history to offset a baseline into: drop --baseline, or pass a baseline captured earlier with --baseline-from FILE".into(),
        ));
    }
    let (params, selector) = crate::config::run_params(args, chrono::Utc::now())?;
    let window = args.window.unwrap_or(std::time::Duration::from_secs(120));
    let prepared = prepare(ScrapeArgs {
        urls: &args.scrape,
        window,
        interval: args.interval.unwrap_or(std::time::Duration::from_secs(5)),
        baseline_from: args.baseline_from.as_deref(),
        save_samples: args.save_samples.as_deref(),
        selector,
        group_by: params.group_by,
        replica_label: params.replica_label,
        auth: {
            let o = client_options(args, args.scrape.first().map(String::as_str).unwrap_or_default(), true)?;
            crate::source::scrape::ScrapeAuth { tls: o.tls, bearer_token: o.bearer_token, basic_auth: o.basic_auth, headers: o.headers }
        },
        progress,
    })
    .map_err(|e| match e {
        ScrapeError::NothingScraped(_) => Failure::Source(e.to_string()),
        other => Failure::Usage(other.to_string()),
    })?;
    for n in &prepared.notes {
        eprintln!("vllm-diag: warning: {n}");
    }
    Ok(prepared)
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Output(e.to_string())),
    }
}

/// The HTTP client for `--prometheus`, with the auth and TLS flags and the environment applied.
/// Retries never outlive the run's --timeout.
fn connect(args: &ExplainArgs) -> Result<PrometheusClient, Failure> {
    let opts = client_options(args, &args.prometheus, false)?;
    PrometheusClient::new(opts).map_err(|e| {
        let e = e.to_string();
        Failure::Usage(if e.starts_with("--") { e } else { format!("--prometheus: {e}") })
    })
}

/// The auth and TLS flags and the environment, applied for a server at `base_url`; warnings (an
/// unverified certificate) go to stderr.
///
/// For `--scrape` only what is typed on this command line counts: the configuration file's source
/// and `$VLLM_DIAG_BEARER_TOKEN` hold the metrics backend's credentials, which must not be sent to
/// the vLLM endpoints (other hosts) unasked. The password of a `--basic-auth-user` typed here may
/// still come from `$VLLM_DIAG_BASIC_AUTH_PASSWORD`.
fn client_options(args: &ExplainArgs, base_url: &str, scrape: bool) -> Result<ClientOptions, Failure> {
    use crate::source::auth::{apply, AuthFlags, ENV_BASIC_AUTH_PASSWORD};
    use crate::source::prometheus::{DebugLog, RetryPolicy};
    let c = &args.connection;
    let typed = |id: &str| !scrape || args.given.flag(id);
    let flags = AuthFlags {
        bearer_token_file: c.bearer_token_file.clone().filter(|_| typed("bearer_token_file")),
        basic_auth_user: c.basic_auth_user.clone().filter(|_| typed("basic_auth_user")),
        basic_auth_password_file: c.basic_auth_password_file.clone().filter(|_| typed("basic_auth_password_file")),
        headers: if typed("headers") { c.headers.clone() } else { Vec::new() },
        tenant: c.tenant.clone().filter(|_| typed("tenant")),
        ca_file: c.ca_file.clone().filter(|_| typed("ca_file")),
        cert_file: c.cert_file.clone().filter(|_| typed("cert_file")),
        key_file: c.key_file.clone().filter(|_| typed("key_file")),
        insecure_skip_verify: c.insecure_skip_verify && typed("insecure_skip_verify"),
    };
    let mut opts = ClientOptions {
        base_url: base_url.to_string(),
        query_timeout: args.query_timeout,
        retry: RetryPolicy { deadline: Some(args.timeout), ..RetryPolicy::default() },
        debug: c.debug.then(DebugLog::stderr),
        ..ClientOptions::default()
    };
    // Secrets the configuration file references with ${VAR} stand in for the environment's own.
    let env = |k: &str| {
        let own = std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        match scrape {
            true if k == ENV_BASIC_AUTH_PASSWORD => own,
            true => None,
            false => own.or_else(|| args.config.env_fallback(k)),
        }
    };
    let warnings = apply(&flags, &env, &mut opts).map_err(|e| Failure::Usage(e.to_string()))?;
    for w in warnings {
        eprintln!("vllm-diag: {w}");
    }
    Ok(opts)
}
