//! `check`: explain over the time since a deploy, against as long before it, verdict first.

use super::explain::{check_annotations, diagnose, live_now, output};
use super::{severity_of, write_stdout};
use crate::cli::CheckArgs;
use crate::error::Failure;
use crate::render::{self, RenderOptions};

/// `check`: explain over the time since the deploy, with the same length before it as baseline.
pub(super) fn run_check(mut args: CheckArgs) -> Result<u8, Failure> {
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
