//! `check`: explain over the time since a deploy, against as long before it, verdict first.

use super::explain::{check_annotations, diagnose, live_now, one_shot_runtime, output};
use super::write_stdout;
use crate::error::Failure;
use crate::render::{self, RenderOptions};
use crate::report::{Event, TimeRange};
use crate::settings::probe::JoinProbe;
use crate::settings::{Setting, Settings};

/// How far back `--since deploy` looks for the last rollout or restart wave.
pub const DEPLOY_LOOKBACK: std::time::Duration = std::time::Duration::from_secs(6 * 3600);

/// `--since deploy`: the start of the last rollout, restart or configuration-change wave in the
/// selected scope within [`DEPLOY_LOOKBACK`] before `end`, read from the metrics.
fn find_deploy(s: &Settings, end: chrono::DateTime<chrono::Utc>) -> Result<Event, Failure> {
    let (params, selector) = s.run_params(end)?;
    let client: std::sync::Arc<dyn crate::source::Source> = std::sync::Arc::new(super::connect::connect(s)?);
    let lookback = chrono::Duration::from_std(DEPLOY_LOOKBACK).unwrap_or_default();
    let range = TimeRange { start: end - lookback, end };
    let runtime = one_shot_runtime()?;
    let (events, warnings) =
        runtime.block_on(crate::explain::find_events(client, &selector, &params.group_by, &params.replica_label, range, *s.limits.timeout));
    for w in &warnings {
        eprintln!("vllm-diag: {w}");
    }
    crate::events::last_deploy(&events).cloned().ok_or_else(|| {
        Failure::NoData(format!(
            "--since deploy: no rollout, restart or configuration change of the selected replicas in the {} before {} (read from process_start_time_seconds, vLLM counter resets, vllm:cache_config_info and kube-state-metrics). Give the deploy time instead: --since 2026-01-15T09:00:00Z or --since 20m",
            humantime::format_duration(DEPLOY_LOOKBACK),
            end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ))
    })
}

/// `check`: explain over the time since the deploy (`--since`), with the same length before it as
/// baseline.
pub(super) fn run_check(mut s: Settings, since: Option<&str>, probe: Option<JoinProbe>) -> Result<u8, Failure> {
    if let Some(j) = &probe {
        super::explain::probe_usable(&s, j)?;
    }
    let deploy_event = check_scope(&mut s, since)?;
    let runtime = one_shot_runtime()?;
    // The probe first, so that its requests are measured before the diagnosis' queries load the
    // Prometheus; it measures the present, just after the window.
    let probe_run = probe.as_ref().map(|j| super::probe::for_diagnosis(&s, j, &runtime)).transpose()?;
    let report = match diagnose(&s, false, &runtime) {
        Ok(mut r) => {
            r.deploy = deploy_event.clone();
            if let Some(run) = probe_run {
                r.probe = Some(super::explain::judge_probe(&s, run)?);
            }
            r
        }
        Err(e @ (Failure::Source(_) | Failure::NoData(_))) => {
            // The verdict line comes first even when there is no report to follow it.
            if s.output.format.is_text() {
                write_stdout(&format!("{NOT_EVALUATED}\n"))?;
            } else {
                eprintln!("{NOT_EVALUATED}");
            }
            return Err(since_not_window(e));
        }
        Err(e) => return Err(e),
    };
    let verdict = verdict(&s, &report);
    output(&s, &report, Some(verdict))
}

/// The verdict of a check that got no report.
pub(super) const NOT_EVALUATED: &str =
    "NOT EVALUATED: the deploy could not be checked (no data or no answer from the source; the reason follows); this is not a pass";

/// check sets the window with --since, and refuses --window: a no-data message says so.
pub(super) fn since_not_window(e: Failure) -> Failure {
    match e {
        Failure::NoData(m) => Failure::NoData(m.replace("Check --at and --window", "Check --at and --since")),
        other => other,
    }
}

/// The verdict line of a checked report: FAIL, PASS or NOT EVALUATED, with the deploy it measured from.
pub(super) fn verdict(s: &Settings, report: &crate::report::Report) -> String {
    let mut verdict = render::check_verdict(
        report,
        &RenderOptions { now: live_now(s), fail_on: *s.output.fail_on, fail_on_unexplained: *s.output.fail_on_unexplained, ..RenderOptions::default() },
    );
    if let Some(e) = &report.deploy {
        verdict.push_str(&format!(" (deploy taken from the metrics: {})", crate::check::deploy_phrase(e)));
    }
    verdict
}

/// Check's settings, then its window: from the deploy (`--since`, or the deploy event read from
/// the metrics, which is returned) to `--at`, the same length before it as baseline.
pub(super) fn check_scope(s: &mut Settings, since: Option<&str>) -> Result<Option<Event>, Failure> {
    if s.scope.window.is_some() || s.scope.baseline.is_some() {
        return Err(Failure::Usage("check measures from the deploy: give --since (and --at for a past check) instead of --window or --baseline".into()));
    }
    if s.output.watch.is_some() {
        return Err(Failure::Usage("--watch is for explain on a terminal; check runs once, for CI".into()));
    }
    check_annotations(s)?;
    let mut deploy_event: Option<Event> = None;
    if !s.source.scrape.is_empty() {
        return Err(Failure::Usage(
            "check compares the time since a deploy with as long before it, which needs stored history; --scrape samples only from now on. Point check at the Prometheus that scrapes the servers, or use `explain --scrape` (with --baseline-from) for a live look".into(),
        ));
    }
    if let Some(since) = since {
        if s.source.replay.is_some() {
            return Err(Failure::Usage("--replay re-runs the recorded windows: drop --since (the recording's window starts at the deploy)".into()));
        }
        let now = chrono::Utc::now();
        let end = crate::settings::parse_at(s.scope.at.as_deref().unwrap_or("now"), now)?;
        let deploy = if since.trim() == "deploy" {
            let event = find_deploy(s, end)?;
            let t = event.time;
            deploy_event = Some(event);
            crate::check::deploy_window_ok(t, end, "deploy")?
        } else {
            crate::check::deploy_time(since, end)?
        };
        let window = (end - deploy).to_std().unwrap_or_default();
        s.scope.window = Setting::flag(Some(window), "--since");
        let at_origin = if s.scope.at.origin.is_given() { s.scope.at.origin.clone() } else { crate::settings::Origin::Flag("--since") };
        s.scope.at = Setting::new(Some(end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)), at_origin);
    }
    Ok(deploy_event)
}
