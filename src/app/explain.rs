//! `explain`: the diagnosis (source, rules, report) and its output, shared by check and --watch.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use super::connect::{connect, scrape_prepare};
use super::{exit_code, severity_of, write_stdout};
use crate::cli::{Annotations, ExplainArgs};
use crate::error::Failure;
use crate::explain::{explain, ExplainError, ExplainOptions};
use crate::render::{self, RenderOptions};
use crate::report::Report;
use crate::rules::{load_with_overrides, RuleSet};
use crate::source::prometheus::PrometheusClient;
use crate::source::record::{Recorder, Replay};
use crate::source::Source;

pub(super) fn run_explain(args: ExplainArgs) -> Result<u8, Failure> {
    if let Some(every) = args.watch {
        return crate::watch::run(&args, every, |progress| diagnose(&args, progress), super::write_stdout);
    }
    check_annotations(&args)?;
    let progress = !args.quiet && std::io::stderr().is_terminal();
    let report = diagnose(&args, progress)?;
    output(&args, &report, None)
}

/// `--annotations` writes to stdout after the report, which only a text format can take.
pub(super) fn check_annotations(args: &ExplainArgs) -> Result<(), Failure> {
    if args.annotations.is_some() && !args.format.is_text() {
        return Err(Failure::Usage(format!(
            "--annotations prints workflow commands on stdout, which would corrupt --format {}: use --format table, markdown or slack with --annotations",
            args.format.name()
        )));
    }
    Ok(())
}

/// The time relative hints are measured from: now for a live run, none for a replay, whose
/// output must be the same bytes whenever it is rendered.
pub(super) fn live_now(args: &ExplainArgs) -> Option<chrono::DateTime<chrono::Utc>> {
    args.replay.is_none().then(chrono::Utc::now)
}

/// Render and write the report (after `check`'s verdict line), the GitHub step summary and the
/// annotations; returns the exit code.
pub(super) fn output(args: &ExplainArgs, report: &Report, verdict: Option<String>) -> Result<u8, Failure> {
    let color = verdict.is_none()
        && args.format == render::Format::Table
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty())
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
            let selector = crate::prom::Selector::parse(&params.selector)
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
            } else if r.core_missing() {
                eprintln!(
                    "vllm-diag: the core checks {} could not be evaluated, so this run cannot pass (exit code 3 unless a finding reaches --fail-on); disable them in vllm-diag.toml if this fleet cannot have them",
                    r.coverage.core_not_evaluated.join(", ")
                );
            }
            Ok(r)
        }
        Err(ExplainError::Unreachable(e)) => Err(Failure::Source(e.to_string())),
        Err(ExplainError::NoData(m)) => Err(Failure::NoData(m)),
    }
}
