//! `check`: explain over the time since a deploy, against as long before it, verdict first.

use super::explain::{check_annotations, diagnose, live_now, output, runtime};
use super::write_stdout;
use crate::error::Failure;
use crate::render::{self, RenderOptions};
use crate::settings::{Setting, Settings};

/// `check`: explain over the time since the deploy (`--since`), with the same length before it as
/// baseline.
pub(super) fn run_check(mut s: Settings, since: Option<&str>) -> Result<u8, Failure> {
    if s.scope.window.is_some() || s.scope.baseline.is_some() {
        return Err(Failure::Usage(
            "check measures from the deploy: give --since (and --at for a past check) instead of --window or --baseline".into(),
        ));
    }
    if s.output.watch.is_some() {
        return Err(Failure::Usage("--watch is for explain on a terminal; check runs once, for CI".into()));
    }
    check_annotations(&s)?;
    if !s.source.scrape.is_empty() {
        return Err(Failure::Usage(
            "check compares the time since a deploy with as long before it, which needs stored history; --scrape samples only from now on. Point check at the Prometheus that scrapes the servers, or use `explain --scrape` (with --baseline-from) for a live look".into(),
        ));
    }
    if let Some(since) = since {
        if s.source.replay.is_some() {
            return Err(Failure::Usage(
                "--replay re-runs the recorded windows: drop --since (the recording's window starts at the deploy)".into(),
            ));
        }
        let now = chrono::Utc::now();
        let end = crate::settings::parse_at(s.scope.at.as_deref().unwrap_or("now"), now)?;
        let deploy = crate::check::deploy_time(since, end)?;
        let window = (end - deploy).to_std().unwrap_or_default();
        s.scope.window = Setting::flag(Some(window), "--since");
        let at_origin = if s.scope.at.origin.is_given() { s.scope.at.origin.clone() } else { crate::settings::Origin::Flag("--since") };
        s.scope.at = Setting::new(Some(end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)), at_origin);
    }
    let runtime = runtime()?;
    let report = match diagnose(&s, false, &runtime) {
        Ok(r) => r,
        Err(e @ (Failure::Source(_) | Failure::NoData(_))) => {
            // The verdict line comes first even when there is no report to follow it.
            let verdict = "NOT EVALUATED: the deploy could not be checked (no data or no answer from the source; the reason follows); this is not a pass";
            if s.output.format.is_text() {
                write_stdout(&format!("{verdict}\n"))?;
            } else {
                eprintln!("{verdict}");
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let verdict = render::check_verdict(&report, &RenderOptions { now: live_now(&s), fail_on: *s.output.fail_on, ..RenderOptions::default() });
    output(&s, &report, Some(verdict))
}
