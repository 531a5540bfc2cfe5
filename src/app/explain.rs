//! `explain`: the diagnosis (source, rules, report) and its output, shared by check and --watch.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use super::connect::{connect, scrape_prepare};
use super::write_stdout;
use crate::error::Failure;
use crate::explain::{explain, ExplainError, ExplainOptions};
use crate::render::{self, RenderOptions};
use crate::report::Report;
use crate::rules::{load_with_overrides, RuleSet};
use crate::settings::probe::JoinProbe;
use crate::settings::{Annotations, Settings};
use crate::source::prometheus::PrometheusClient;
use crate::source::record::{Recorder, Replay};
use crate::source::Source;

pub(super) fn run_explain(s: Settings, probe: Option<JoinProbe>) -> Result<u8, Failure> {
    if let Some(j) = &probe {
        probe_usable(&s, j)?;
        check_annotations(&s)?;
        let runtime = one_shot_runtime()?;
        let run = super::probe::for_diagnosis(&s, j, &runtime)?;
        let progress = !*s.output.quiet && std::io::stderr().is_terminal();
        let mut report = diagnose(&s, progress, &runtime)?;
        report.probe = Some(judge_probe(&s, run)?);
        return output(&s, &report, None);
    }
    if let Some(every) = *s.output.watch {
        let runtime = runtime()?;
        let watch = crate::watch::Watch {
            every,
            format: *s.output.format,
            progress: !*s.output.quiet && std::io::stderr().is_terminal(),
            replay: s.source.replay.is_some(),
            record: s.source.record.is_some(),
            at: s.scope.at.value.clone(),
            annotations: s.output.annotations.is_some(),
            serving: None,
        };
        let Some(listen) = s.output.metrics_listen.as_deref() else {
            return crate::watch::run(&watch, runtime.handle(), |progress| diagnose(&s, progress, &runtime), super::write_stdout);
        };
        // The latest run's findings on /metrics, under one group; a failed run takes them off
        // (they would be stale) and counts as a failure.
        crate::watch::validate(&watch, std::io::stdout().is_terminal())?;
        let metrics = Arc::new(crate::serve::metrics::Metrics::new(&[]));
        let addr = crate::serve::start_findings_page(listen, metrics.clone(), runtime.handle())?;
        let watch = crate::watch::Watch { serving: Some(format!("http://{addr}/metrics")), ..watch };
        let diagnose_and_show = |progress| {
            let started = std::time::Instant::now();
            let result = diagnose(&s, progress, &runtime);
            metrics.run(started.elapsed(), result.is_err());
            match &result {
                Ok(report) => metrics.diagnosed("watch", report, chrono::Utc::now().timestamp_millis() as f64 / 1000.0),
                Err(_) => metrics.resolved("watch"),
            }
            result
        };
        return crate::watch::run(&watch, runtime.handle(), diagnose_and_show, super::write_stdout);
    }
    check_annotations(&s)?;
    let progress = !*s.output.quiet && std::io::stderr().is_terminal();
    let report = diagnose(&s, progress, &one_shot_runtime()?)?;
    output(&s, &report, None)
}

/// Whether `--probe` can join this run: a live diagnosis of a Prometheus, once, ending now (the
/// probe measures the present, and reads the engines for its minutes from that Prometheus).
pub(super) fn probe_usable(s: &Settings, j: &JoinProbe) -> Result<(), Failure> {
    let _ = j;
    if s.source.replay.is_some() {
        return Err(Failure::Usage("--probe measures the server now, and --replay re-runs a recorded past: drop one of them".into()));
    }
    if !s.source.scrape.is_empty() {
        return Err(Failure::Usage(
            "--probe reads the engines for its minutes from the --prometheus, and --scrape has none: point --prometheus at the one that scrapes the engines, or run `vllm-diag probe URL` on its own".into(),
        ));
    }
    if s.output.watch.is_some() {
        return Err(Failure::Usage("--probe sends requests, and --watch would send them every round: run explain --probe once".into()));
    }
    if s.scope.at.origin.is_given() && s.scope.at.as_deref().is_some_and(|a| a.trim() != "now") {
        return Err(Failure::Usage(format!(
            "--probe measures the server now, and {} sets the window in the past: drop one of them",
            s.scope.at.origin.place("--at", "at")
        )));
    }
    Ok(())
}

/// The probe judged against the profile the diagnosis used: its `ttft_p95_high` (after the
/// configuration file's thresholds) is the ceiling on the probe's 95th percentile time to the
/// first token.
pub(super) fn judge_probe(s: &Settings, run: crate::report::probe::ProbeRun) -> Result<crate::report::probe::ProbeEvidence, Failure> {
    let mut rules: RuleSet = load_with_overrides(s.rules.dir.as_deref())?;
    let profile = s.rules.profile.as_deref().unwrap_or(crate::rules::DEFAULT_PROFILE).to_string();
    rules.apply_profile(&profile).map_err(Failure::Usage)?;
    let _ = s.rules.apply_to_rules(&mut rules);
    Ok(crate::probe::judge(run, &profile, rules.thresholds.get("ttft_p95_high").copied()))
}

/// The async runtime of a single diagnosis: one thread. The requests' connections, the decoding
/// and the judging all run on the main thread, with no hand-offs between threads; on a small fleet
/// that is a fifth less CPU time and a few milliseconds less wall time than worker threads
/// (measured in commit 1f1e318), and at 1,000 replicas it is the same.
pub(super) fn one_shot_runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| Failure::Output(format!("cannot start the async runtime: {e}")))
}

/// The async runtime of a command that runs many diagnoses (`--watch`, `serve`): worker threads,
/// which also run the Ctrl-C handler while the watch loop sleeps and take diagnoses from several
/// of `serve`'s threads at once.
pub(super) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Output(format!("cannot start the async runtime: {e}")))
}

/// `--annotations` writes to stdout after the report, which only a text format can take.
pub(super) fn check_annotations(s: &Settings) -> Result<(), Failure> {
    if s.output.annotations.is_some() && !s.output.format.is_text() {
        return Err(Failure::Usage(format!(
            "--annotations prints workflow commands on stdout, which would corrupt --format {}: use --format text, table, markdown or slack with --annotations",
            s.output.format.name()
        )));
    }
    Ok(())
}

/// Chart links for the evidence: the file's template (`none`: no links), else Prometheus' `/graph`
/// page for a live run against a Prometheus-compatible API. A replay or a scrape links nowhere
/// unless the file says where: the reader may not reach the server it was recorded from.
pub(super) fn graph_links(s: &Settings) -> Option<render::links::GraphLinks> {
    match s.output.links.value.as_deref().map(str::trim) {
        Some("none") => None,
        Some(t) => render::links::GraphLinks::parse(t).ok(),
        None => (s.source.replay.is_none() && s.source.scrape.is_empty()).then(render::links::GraphLinks::prometheus),
    }
}

/// The time relative hints are measured from: now for a live run, none for a replay, whose
/// output must be the same bytes whenever it is rendered.
pub(super) fn live_now(s: &Settings) -> Option<chrono::DateTime<chrono::Utc>> {
    s.source.replay.is_none().then(chrono::Utc::now)
}

/// Render and write the report (after `check`'s verdict line), the GitHub step summary and the
/// annotations; returns the exit code.
pub(super) fn output(s: &Settings, report: &Report, verdict: Option<String>) -> Result<u8, Failure> {
    let format = *s.output.format;
    let fail_on = *s.output.fail_on;
    let fail_on_unexplained = *s.output.fail_on_unexplained;
    let color = verdict.is_none()
        && format.is_terminal()
        && std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb");
    // Wrap to the terminal; in a pipe or a file, to 100 columns.
    let width = std::io::stdout().is_terminal().then(|| terminal_size::terminal_size().map(|(w, _)| w.0)).flatten();
    // The text formats print check's verdict first, escaped for their reader; a document format
    // stays parseable, and the verdict goes to stderr.
    let opts = RenderOptions {
        color,
        width,
        now: live_now(s),
        fail_on,
        fail_on_unexplained,
        links: graph_links(s),
        detail: Default::default(),
        verdict: verdict.clone().filter(|_| format.is_text()),
    };
    if let (Some(v), false) = (&verdict, format.is_text()) {
        eprintln!("{}", render::one_line(v));
    }
    let mut text = render::render(report, format, &opts);
    if let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let mut md = render::render(report, render::Format::Markdown, &RenderOptions { now: opts.now, links: opts.links.clone(), ..RenderOptions::default() });
        if let Some(v) = &verdict {
            md = format!("### {}\n\n{md}", render::github::summary_heading(v, report, &opts));
        }
        if let Err(e) = append_summary(std::path::Path::new(&path), &md) {
            eprintln!("vllm-diag: warning: cannot append the report to $GITHUB_STEP_SUMMARY ({}): {e}", std::path::Path::new(&path).display());
        }
    }
    if *s.output.annotations == Some(Annotations::Github) {
        text.push_str(&render::github::annotations(report));
    }
    write_stdout(&text)?;
    Ok(report.exit_code_with(fail_on, fail_on_unexplained))
}

/// Append to the step summary file, separated from what other steps wrote by a blank line.
fn append_summary(path: &std::path::Path, markdown: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    f.write_all(format!("{markdown}\n").as_bytes())?;
    f.flush()
}

/// Query the source and build the report: everything `explain` does before rendering. `progress`
/// shows a spinner on stderr while queries run; the queries run on `runtime`.
pub(crate) fn diagnose(s: &Settings, progress: bool, runtime: &tokio::runtime::Runtime) -> Result<Report, Failure> {
    let mut rules: RuleSet = load_with_overrides(s.rules.dir.as_deref())?;
    // The profile a replayed run was judged with, unless another is given.
    let mut recorded_profile: Option<String> = None;

    // Kept for --debug's transfer summary.
    let mut http_client: Option<Arc<PrometheusClient>> = None;
    // A scrape's problems (targets that failed rounds, or all of them), for the report itself.
    let mut scrape_notes: Vec<String> = Vec::new();
    let mut unread_targets: Vec<String> = Vec::new();
    let sc = &s.scope;
    let (source, params, selector, recorder): (Arc<dyn Source>, _, _, Option<Arc<Recorder>>) = match &*s.source.replay {
        Some(path) => {
            if sc.window.is_some() || sc.at.is_some() || sc.baseline.is_some() || sc.selector.is_some() {
                return Err(Failure::Usage("--replay re-runs the recorded windows and selector: drop --window, --at, --baseline and --selector".into()));
            }
            if sc.group_by.origin.is_flag() || sc.replica_label.origin.is_flag() {
                return Err(Failure::Usage(
                    "--replay re-runs the recorded grouping: drop --group-by and --replica-label (the recording answers only the queries it holds)".into(),
                ));
            }
            let (replay, params) = Replay::open(path).map_err(|e| Failure::Recording(e.to_string()))?;
            recorded_profile = replay.profile().map(str::to_string);
            scrape_notes = replay.scrape_gaps().warnings.clone();
            unread_targets = replay.scrape_gaps().unread_targets.clone();
            let selector = crate::prom::Selector::parse(&params.selector)
                .map_err(|e| Failure::Recording(format!("{}: the recorded selector is invalid: {e}", path.display())))?;
            eprintln!("vllm-diag: replaying {} (recorded from {})", path.display(), crate::render::display_url(&replay.info().url));
            (Arc::new(replay), params, selector, None)
        }
        None if !s.source.scrape.is_empty() => {
            let prepared = scrape_prepare(s, progress)?;
            scrape_notes = prepared.notes;
            unread_targets = prepared.unread;
            let local: Arc<dyn Source> = prepared.source;
            match &*s.source.record {
                Some(_) => {
                    let rec = Arc::new(Recorder::new(local));
                    rec.keep_scrape_gaps(crate::source::record::ScrapeGaps { warnings: scrape_notes.clone(), unread_targets: unread_targets.clone() });
                    (rec.clone() as Arc<dyn Source>, prepared.params, prepared.selector, Some(rec))
                }
                None => (local, prepared.params, prepared.selector, None),
            }
        }
        None => {
            let (params, selector) = s.run_params(chrono::Utc::now())?;
            let client = Arc::new(connect(s)?);
            http_client = Some(client.clone());
            let client: Arc<dyn Source> = client;
            match &*s.source.record {
                Some(_) => {
                    let rec = Arc::new(Recorder::new(client));
                    (rec.clone() as Arc<dyn Source>, params, selector, Some(rec))
                }
                None => (client, params, selector, None),
            }
        }
    };

    let profile = match (s.rules.profile.as_deref(), recorded_profile.as_deref()) {
        (Some(given), Some(recorded)) if given != recorded => {
            eprintln!("vllm-diag: warning: the recording was judged with --profile {recorded}; this replay uses --profile {given}, so its verdicts may differ");
            Some(given)
        }
        (given, recorded) => given.or(recorded),
    };
    if let Some(profile) = profile {
        rules.apply_profile(profile).map_err(Failure::Usage)?;
    }
    // The configuration file's thresholds and disabled rules (listed in the report as disabled),
    // after the profile.
    let disabled = s.rules.apply_to_rules(&mut rules);

    let (source, spinner) = crate::progress::attach(source, progress && s.source.replay.is_none());
    let opts = ExplainOptions { params: params.clone(), selector, concurrency: usize::from(*s.limits.concurrency), deadline: *s.limits.timeout };
    let result = runtime.block_on(explain(source, &rules, &opts)).map(|mut r| {
        r.disabled = disabled;
        r.warnings.extend(scrape_notes);
        r.coverage.unread_targets = unread_targets;
        r.profile = Some(profile.unwrap_or(crate::rules::DEFAULT_PROFILE).to_string());
        r
    });
    spinner.finish();

    if let (true, Some(c)) = (*s.connection.debug, &http_client) {
        let t = c.stats();
        eprintln!(
            "vllm-diag: debug: transferred {} bytes in {} requests ({} attempts); largest answer {} bytes, for {}",
            t.bytes, t.requests, t.attempts, t.largest_bytes, t.largest
        );
    }

    // Record even a failed run: its errors are part of what happened.
    if let (Some(rec), Some(path)) = (&recorder, &*s.source.record) {
        rec.save(path, &params, profile).map_err(|e| Failure::Recording(e.to_string()))?;
    }

    match result {
        Ok(r) => {
            let decision = r.decide(None, false);
            if decision == crate::report::Decision::NoVerdict(crate::report::NoVerdict::NothingJudged) {
                // The report still prints (it lists why), but nobody should read it as a verdict.
                let why = r
                    .not_evaluated
                    .iter()
                    .find(|n| !n.reason.iter().any(|x| x.metric_missing(None)))
                    .or(r.not_evaluated.first())
                    .map_or("no rule had the data it needs".to_string(), |n| n.reason.to_string());
                eprintln!("vllm-diag: nothing could be evaluated, so this run gives no verdict (exit code 3); for example: {why}");
            } else if decision == crate::report::Decision::NoVerdict(crate::report::NoVerdict::CoreNotJudged) {
                eprintln!(
                    "vllm-diag: the core checks {} could not be evaluated, so this run cannot pass (exit code 3 unless a finding reaches --fail-on); {}",
                    r.coverage.core_not_evaluated.join(", "),
                    core_hint(&r, matches!(s.scope.window.origin, crate::settings::Origin::Flag("--since")))
                );
            }
            Ok(r)
        }
        Err(e @ ExplainError::Unreachable(_)) => Err(Failure::Source(e.to_string())),
        Err(ExplainError::NoData(m)) => Err(Failure::NoData(m)),
    }
}

/// What to do about core checks that could not be evaluated, from why they could not: advice to
/// switch a check off is only for a metric the data does not have, never for a query that failed
/// or a baseline with nothing in it (switched off, those would pass silently for good).
fn core_hint(r: &crate::report::Report, check: bool) -> &'static str {
    use crate::report::{FailureKind, Reason, Side};
    let reasons: Vec<&crate::report::Reasons> = r.not_evaluated.iter().filter(|n| r.coverage.core_not_evaluated.contains(&n.rule)).map(|n| &n.reason).collect();
    let any = |test: &dyn Fn(&Reason) -> bool| reasons.iter().any(|x| x.iter().any(test));
    // A query that timed out, answered an HTTP error or failed on the way: asking again may do.
    let failed = |x: &Reason| x.failure().is_some_and(|f| matches!(f.kind, FailureKind::TimedOut | FailureKind::Http | FailureKind::Other));
    if any(&failed) {
        "queries failed or timed out (the report lists them): run it again, or give the server more time with --timeout and --query-timeout"
    } else if any(&Reason::baseline_empty) && check {
        "the baseline (as long before the deploy as the time since it) holds no data to compare with (the report says which): a deploy too soon after the data begins cannot be checked this way; compare by hand with `explain --window ... --baseline ...`"
    } else if any(&Reason::baseline_empty) {
        "the baseline holds no data to compare with (the report says which): move or widen it with --baseline (with --scrape, give one saved earlier with --save-samples as --baseline-from)"
    } else if !reasons.is_empty() && reasons.iter().all(|x| x.iter().any(|r| r.metric_missing(Some(Side::Window)))) {
        "a metric they need is not in the data (the report names it): if this fleet cannot export it, disable those checks in vllm-diag.toml"
    } else {
        "the report says why"
    }
}
