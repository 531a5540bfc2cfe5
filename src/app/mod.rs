//! The run: flags -> options -> source -> explain -> render -> write, and the exit code.
//!
//! This file dispatches the commands and holds what they share; the commands with more to them have
//! a file each: `explain.rs` (explain, and the diagnosis and output that check and --watch reuse),
//! `check.rs` (the post-deploy check), `serve.rs` (the service for Alertmanager), `probe.rs` (requests timed from the client), `loadtest.rs` (the sweep to the knee), `mcp.rs` (the tools for AI agents) and `connect.rs` (the data source built from the settings).
//!
//! The command line becomes typed [`Settings`] here, once ([`crate::cli`] types them,
//! [`crate::settings::build`] merges the environment and the configuration file in); nothing the
//! app calls sees a flag.

mod backtest;
mod check;
mod connect;
mod explain;
mod loadtest;
mod mcp;
mod probe;
mod rules;
mod serve;

use std::io::Write;

use crate::cli::{Cli, Command, ConfigCommand};
use crate::error::{exit, Failure};
use crate::report::{Report, Severity};
use crate::settings::{build, Mode, Settings};

/// Run the parsed command line; returns the exit code.
pub fn run(cli: Cli) -> Result<u8, Failure> {
    // The configuration file is read only by the commands it applies to, so a broken one never
    // stops `man`; the rules commands read what it says about the rules (see `rules.rs`).
    let lookup = cli.lookup();
    match cli.command {
        Command::Explain(args) => {
            let probe = args.probe.into_settings(&args.explain.given);
            let settings = build(args.explain.into_settings(), &lookup, Mode::Explain)?;
            let format = *settings.output.format;
            with_failure_document(format, explain::run_explain(settings, probe))
        }
        Command::Check(args) => {
            let probe = args.probe.into_settings(&args.explain.given);
            let settings = build(args.explain.into_settings(), &lookup, Mode::Check)?;
            let format = *settings.output.format;
            with_failure_document(format, check::run_check(settings, args.since.as_deref(), probe))
        }
        Command::Probe(args) => {
            let (shared, probe) = args.into_settings();
            let settings = build(shared, &lookup, Mode::Explain)?;
            probe::run_probe(settings, probe)
        }
        Command::Loadtest(args) => {
            let (shared, lt) = args.into_settings();
            let settings = build(shared, &lookup, Mode::Explain)?;
            loadtest::run_loadtest(settings, lt)
        }
        Command::Serve(args) => {
            let settings = build(args.explain.into_settings(), &lookup, Mode::Explain)?;
            serve::run_serve(settings, args.service)
        }
        Command::Mcp(args) => {
            let command_line = args.explain.into_settings();
            let settings = build(command_line.clone(), &lookup, Mode::Explain)?;
            mcp::run_mcp(settings, &command_line, &lookup, args.server)
        }
        Command::Config(ConfigCommand::Show(args)) => {
            let settings: Settings = build(args.into_settings(), &lookup, Mode::Show)?;
            write_stdout(&crate::settings::show(&settings))?;
            // Shown, marked DOES NOT EXIST; then an error, as explain would give (exit 2).
            crate::settings::missing_path(&settings)?;
            Ok(exit::OK)
        }
        Command::Completions { shell } => {
            // The built-in pack's rule and signal ids and profiles complete as values (a --rules directory's
            // own are not known here).
            let set = crate::rules::load_builtin()?;
            let ids: Vec<String> = set.rules.iter().map(|r| r.id.clone()).chain(set.signals.keys().cloned()).collect();
            let profiles: Vec<String> = set.profiles.keys().cloned().collect();
            write_stdout(&crate::cli::completion_script(shell, &ids, &profiles))?;
            Ok(exit::OK)
        }
        Command::Man { command, out } => man(&command, out.as_deref()),
        Command::Rules(command) => rules::run_rules(command, &lookup),
    }
}

/// `vllm-diag man`: one command's page on stdout, or every page into a directory. The pages name
/// each other (`vllm-diag-explain(1)`), so both come from the same command tree, without the
/// `help` subcommand (it has no page of its own) and without hidden commands.
fn man(path: &[String], out: Option<&std::path::Path>) -> Result<u8, Failure> {
    let mut cmd = <Cli as clap::CommandFactory>::command().disable_help_subcommand(true);
    cmd.build();
    if let Some(dir) = out {
        std::fs::create_dir_all(dir).map_err(|e| Failure::Output(format!("{}: {e}", dir.display())))?;
        clap_mangen::generate_to(cmd, dir).map_err(|e| Failure::Output(format!("{}: {e}", dir.display())))?;
        let mut written: Vec<String> = std::fs::read_dir(dir)
            .map_err(|e| Failure::Output(format!("{}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("vllm-diag") && n.to_string_lossy().ends_with(".1")))
            .map(|p| p.display().to_string())
            .collect();
        written.sort();
        write_stdout(&written.iter().map(|w| format!("{w}\n")).collect::<String>())?;
        return Ok(exit::OK);
    }
    let mut page = &cmd;
    for name in path {
        page = page
            .get_subcommands()
            .find(|c| c.get_name() == name && !c.is_hide_set())
            .ok_or_else(|| Failure::Usage(format!("vllm-diag man {}: no such command (`vllm-diag --help` lists them)", path.join(" "))))?;
    }
    let mut buf: Vec<u8> = Vec::new();
    clap_mangen::Man::new(page.clone()).render(&mut buf).map_err(|e| Failure::Output(e.to_string()))?;
    write_stdout(&String::from_utf8_lossy(&buf))?;
    Ok(exit::OK)
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
/// The explain flags given that only make sense for one run (a recording, a replay, a fixed end,
/// a watch loop, CI annotations): what `serve` and `mcp`, which answer calls over live data, refuse.
pub(crate) fn one_run_flags(s: &Settings) -> Vec<&'static str> {
    [
        (s.source.replay.is_some(), "--replay"),
        (s.source.record.is_some(), "--record"),
        (!s.source.scrape.is_empty(), "--scrape"),
        (s.scope.at.is_some(), "--at"),
        (s.output.watch.is_some(), "--watch"),
        (s.output.annotations.is_some(), "--annotations"),
    ]
    .into_iter()
    .filter_map(|(on, flag)| on.then_some(flag))
    .collect()
}

pub(crate) fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Output(e.to_string())),
    }
}
