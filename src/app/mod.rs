//! The run: flags -> options -> source -> explain -> render -> write, and the exit code.
//!
//! This file dispatches the commands and holds what they share; the commands with more to them have
//! a file each: `explain.rs` (explain, and the diagnosis and output that check and --watch reuse),
//! `check.rs` (the post-deploy check), `serve.rs` (the service for Alertmanager) and `connect.rs` (the data source built from the settings).
//!
//! The command line becomes typed [`Settings`] here, once ([`crate::cli`] types them,
//! [`crate::settings::build`] merges the environment and the configuration file in); nothing the
//! app calls sees a flag.

mod check;
mod connect;
mod explain;
mod serve;

use std::io::Write;

use crate::cli::{Cli, Command, ConfigCommand, RulesCommand};
use crate::error::{exit, Failure};
use crate::report::{Report, Severity};
use crate::rules::load_with_overrides;
use crate::settings::{build, Mode, Settings};

/// Run the parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<u8, Failure> {
    // The configuration file is read only by the commands it applies to, so a broken one never
    // stops `man` or `rules`.
    let lookup = cli.lookup();
    match cli.command {
        Command::Explain(args) => {
            let settings = build(args.into_settings(), &lookup, Mode::Explain)?;
            let format = *settings.output.format;
            with_failure_document(format, explain::run_explain(settings))
        }
        Command::Check(args) => {
            let settings = build(args.explain.into_settings(), &lookup, Mode::Check)?;
            let format = *settings.output.format;
            with_failure_document(format, check::run_check(settings, args.since.as_deref()))
        }
        Command::Serve(args) => {
            let settings = build(args.explain.into_settings(), &lookup, Mode::Explain)?;
            serve::run_serve(settings, args.service)
        }
        Command::Config(ConfigCommand::Show(args)) => {
            let settings: Settings = build(args.into_settings(), &lookup, Mode::Show)?;
            write_stdout(&crate::settings::show(&settings))?;
            // Shown, marked DOES NOT EXIST; then an error, as explain would give (exit 2).
            crate::settings::missing_path(&settings)?;
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
            let summary = crate::rules_test::run_files(&files, &set).map_err(|e| Failure::Usage(format!("test file error: {e}")))?;
            write_stdout(&summary.text)?;
            Ok(if summary.failed > 0 { exit::FINDINGS } else { exit::OK })
        }
        Command::Rules(RulesCommand::Export(a)) => {
            use crate::rules::export;
            let mut set = load_with_overrides(a.rules.rules.as_deref())?;
            if let Some(p) = &a.profile {
                set.apply_profile(p).map_err(Failure::Usage)?;
            }
            let selector = match &a.selector {
                Some(s) => crate::prom::Selector::parse(s).map_err(|e| Failure::Usage(e.to_string()))?,
                None => crate::prom::Selector::default(),
            };
            let group_by: Vec<String> = a.group_by.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
            if let Some(bad) = group_by.iter().chain([&a.replica_label]).find(|l| !crate::prom::is_label_name(l)) {
                return Err(Failure::Usage(format!("--group-by/--replica-label: {bad:?} is not a label name (letters, digits and '_')")));
            }
            if group_by.is_empty() {
                return Err(Failure::Usage("--group-by needs at least one label, e.g. model_name".into()));
            }
            let opts = export::Options {
                selector,
                group_by,
                replica_label: a.replica_label,
                window: a.window,
                baseline: a.baseline.unwrap_or(a.window),
                hold: a.hold,
                runbook_url_base: a.runbook_url_base,
                profile: a.profile,
            };
            let out = export::export(&set, &opts);
            for s in &out.skipped {
                eprintln!("vllm-diag: not exported: {}: {}", s.rule, s.reason);
            }
            for a in &out.alerts {
                for n in &a.notes {
                    eprintln!("vllm-diag: note: {}: {n}", a.rule);
                }
            }
            if out.alerts.is_empty() {
                return Err(Failure::Usage("no rule could be expressed in PromQL, so there is nothing to export (reasons above)".into()));
            }
            write_stdout(&export::to_yaml(&out, &set, &opts))?;
            Ok(exit::OK)
        }
        Command::Rules(RulesCommand::Show { id, rules }) => {
            let set = load_with_overrides(rules.rules.as_deref())?;
            let text = crate::rules::doc::show(&set, &id).ok_or_else(|| {
                Failure::Usage(format!(
                    "no rule {id:?}.{} Known rules: {}",
                    crate::text::did_you_mean(&id, set.rules.iter().map(|r| r.id.as_str())),
                    set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")
                ))
            })?;
            write_stdout(&text)?;
            Ok(exit::OK)
        }
    }
}

/// Exit code for a finished report: 1 with a finding at or above `fail_on` ([`Report::exit_code`]).
pub fn exit_code(report: &Report, fail_on: Option<Severity>) -> u8 {
    report.exit_code(fail_on)
}

/// A run that ends without a report still leaves a document where a pipeline reading `--format
/// json` or `junit` expects one: the error and its exit code (stderr says it too, as always). Not
/// for a failed write to stdout itself, and not for flags that could not be read (no format yet).
fn with_failure_document(format: crate::render::Format, result: Result<u8, Failure>) -> Result<u8, Failure> {
    if let Err(e) = &result {
        if !matches!(e, Failure::Output(_)) {
            if let Some(doc) = crate::render::failure_document(format, &e.to_string(), e.exit_code()) {
                let _ = write_stdout(&doc);
            }
        }
    }
    result
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
