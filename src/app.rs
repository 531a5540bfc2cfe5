//! The run: flags -> options -> source -> explain -> render -> write, and the exit code.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use crate::cli::{Cli, Command, ExplainArgs, FailOn, RulesCommand};
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
    match cli.command {
        Command::Explain(args) => run_explain(args),
        Command::Rules(RulesCommand::List(a)) => {
            let set = load_with_overrides(a.rules.as_deref())?;
            write_stdout(&crate::rules::doc::list(&set))?;
            Ok(exit::OK)
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
    let mut rules: RuleSet = load_with_overrides(args.rules.as_deref())?;
    if let Some(profile) = &args.profile {
        rules.apply_profile(profile).map_err(Failure::Usage)?;
    }

    let (source, params, selector, recorder): (Arc<dyn Source>, _, _, Option<Arc<Recorder>>) = match &args.replay {
        Some(path) => {
            if args.window.is_some() || args.at.is_some() || args.baseline.is_some() || args.selector.is_some() {
                return Err(Failure::Usage(
                    "--replay re-runs the recorded windows and selector: drop --window, --at, --baseline and --selector".into(),
                ));
            }
            let (replay, params) = Replay::open(path).map_err(|e| Failure::Recording(e.to_string()))?;
            let selector = crate::selector::Selector::parse(&params.selector)
                .map_err(|e| Failure::Recording(format!("{}: the recorded selector is invalid: {e}", path.display())))?;
            eprintln!("vllm-diag: replaying {} (recorded from {})", path.display(), replay.info().url);
            (Arc::new(replay), params, selector, None)
        }
        None => {
            let (params, selector) = crate::config::run_params(&args, chrono::Utc::now())?;
            let client = PrometheusClient::new(ClientOptions {
                base_url: args.prometheus.clone(),
                query_timeout: args.query_timeout,
                ..ClientOptions::default()
            })
            .map_err(|e| Failure::Usage(format!("--prometheus: {e}")))?;
            let client: Arc<dyn Source> = Arc::new(client);
            match &args.record {
                Some(_) => {
                    let rec = Arc::new(Recorder::new(client));
                    (rec.clone() as Arc<dyn Source>, params, selector, Some(rec))
                }
                None => (client, params, selector, None),
            }
        }
    };

    let opts = ExplainOptions { params: params.clone(), selector, concurrency: args.concurrency as usize, deadline: args.timeout };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Output(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(explain(source, &rules, &opts));

    // Record even a failed run: its errors are part of what happened.
    if let (Some(rec), Some(path)) = (&recorder, &args.record) {
        rec.save(path, &params).map_err(|e| Failure::Recording(e.to_string()))?;
    }

    let report = match result {
        Ok(r) => r,
        Err(ExplainError::Unreachable(e)) => return Err(Failure::Source(e.to_string())),
        Err(ExplainError::NoData(m)) => return Err(Failure::NoData(m)),
    };

    let color = args.format == render::Format::Table
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb");
    // Wrap tables to the terminal; a pipe or a file gets unwrapped lines (easier to paste and grep).
    let width = std::io::stdout()
        .is_terminal()
        .then(|| terminal_size::terminal_size().map(|(w, _)| w.0))
        .flatten();
    let text = render::render(&report, args.format, &RenderOptions { color, width });
    write_stdout(&text)?;
    Ok(exit_code(&report, args.fail_on))
}

/// Write to stdout; a closed pipe (`| head`) is not an error.
fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Output(e.to_string())),
    }
}
