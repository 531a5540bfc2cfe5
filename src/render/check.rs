//! `check`'s verdict line, in words: what [`Report::decide`] decided, with the deploy time and the
//! findings that decided it.

use super::{coverage_phrase, describe_duration, describe_time_at, one_line, plural, severity_counts, RenderOptions, ScopeStyle};
use crate::report::{Decision, Finding, NoVerdict, Report};

/// Whether [`check_verdict`] says `NOT EVALUATED` for `report`: every run without a verdict (exit
/// code 3) but one where nothing was judged and still something was found.
pub fn verdict_says_not_evaluated(report: &Report, opts: &RenderOptions) -> bool {
    match report.decide(opts.fail_on, opts.fail_on_unexplained) {
        Decision::NoVerdict(NoVerdict::CoreNotJudged | NoVerdict::TargetsUnread) => true,
        Decision::NoVerdict(NoVerdict::NothingJudged) => report.findings.is_empty(),
        _ => false,
    }
}

/// The first line `vllm-diag check` prints: `FAIL: ...`, `PASS: ...` or `NOT EVALUATED: ...`.
/// It says the same as the exit code (1, 0, 3), in words, with the deploy time it measured from
/// (the window's start) and the findings that decided it.
pub fn check_verdict(report: &Report, opts: &RenderOptions) -> String {
    let Some(probe) = &report.probe else {
        return diagnosis_verdict(report, opts);
    };
    if report.decide(opts.fail_on, opts.fail_on_unexplained) == Decision::FailProbe {
        let why = super::probe::failed_clause(probe).unwrap_or_default();
        let since = format!("since the deploy at {}", describe_time_at(&report.window.start, opts.now.as_ref()));
        return format!("FAIL: {why}; {} {since}", found_in(report, "the metrics"));
    }
    // Otherwise the diagnosis decided; the probe's result follows it.
    let verdict = diagnosis_verdict(report, opts);
    match super::probe::failed_clause(probe) {
        Some(why) if opts.fail_on.is_none() => format!("{verdict}; {why} (with --fail-on never, the probe fails nothing)"),
        Some(why) => format!("{verdict}; and {why}"),
        None => format!("{verdict}; {}", super::probe::passed_clause(probe)),
    }
}

/// The verdict of the diagnosis alone.
fn diagnosis_verdict(report: &Report, opts: &RenderOptions) -> String {
    let scopes = ScopeStyle::for_report(report);
    let since = format!("since the deploy at {}", describe_time_at(&report.window.start, opts.now.as_ref()));
    let decision = report.decide(opts.fail_on, opts.fail_on_unexplained);
    if decision == Decision::FailFindings {
        let bar = opts.fail_on.expect("a finding fails the run only against a bar");
        let failing: Vec<&Finding> = report.findings.iter().filter(|f| f.severity >= bar).collect();
        let count = if failing.len() == 1 {
            format!("1 {} finding", failing[0].severity)
        } else {
            format!("{} findings ({})", failing.len(), severity_counts(&failing.iter().map(|f| (*f).clone()).collect::<Vec<_>>()))
        };
        const NAMED: usize = 3;
        let mut named: Vec<String> = failing.iter().take(NAMED).map(|f| format!("{} on {}", one_line(&f.rule), scopes.format(&f.scope))).collect();
        if failing.len() > NAMED {
            named.push(format!("and {} more", failing.len() - NAMED));
        }
        return format!("FAIL: {count} {since} ({})", named.join(", "));
    }
    if decision == Decision::FailUnexplained {
        const NAMED: usize = 3;
        let mut named: Vec<String> =
            report.unexplained.iter().take(NAMED).map(|u| format!("{} {} on {}", u.title, u.direction, scopes.format(&u.scope))).collect();
        if report.unexplained.len() > NAMED {
            named.push(format!("and {} more", report.unexplained.len() - NAMED));
        }
        return format!(
            "FAIL: {} that no rule explains {since} ({}; --fail-on {})",
            plural(report.unexplained.len(), "signal moved", "signals moved"),
            named.join(", "),
            crate::report::fail_on_name(opts.fail_on, true)
        );
    }
    if decision == Decision::NoVerdict(NoVerdict::CoreNotJudged) {
        let core: Vec<String> = report.coverage.core_not_evaluated.iter().map(|r| one_line(r)).collect();
        let rest = found_in(report, "the rest");
        return format!(
            "NOT EVALUATED: the core checks {} could not be evaluated in the {} {since}; {rest} ({}), but this is not a pass",
            core.join(", "),
            describe_duration(&report.window),
            coverage_phrase(report).unwrap_or_else(|| format!("{} evaluated", plural(report.stats.rules_evaluated, "rule/scope pair", "rule/scope pairs")))
        );
    }
    if decision == Decision::NoVerdict(NoVerdict::TargetsUnread) {
        let unread = &report.coverage.unread_targets;
        let named: Vec<String> = unread.iter().take(3).map(|t| one_line(t)).collect();
        let more = if unread.len() > named.len() { format!(" and {} more", unread.len() - named.len()) } else { String::new() };
        let rest = found_in(report, "what answered");
        return format!(
            "NOT EVALUATED: {} answered nothing in the {} {since} ({}{more}); {rest}, but this is not a pass",
            plural(unread.len(), "scrape target", "scrape targets"),
            describe_duration(&report.window),
            named.join("; ")
        );
    }
    if decision == Decision::NoVerdict(NoVerdict::NothingJudged) && report.findings.is_empty() {
        let n = report.not_evaluated.len();
        let why = if n == 0 { String::new() } else { format!(" ({} could not be checked)", plural(n, "rule/scope pair", "rule/scope pairs")) };
        return format!("NOT EVALUATED: no rule could be checked against the {} {since}{why}; this is not a pass", describe_duration(&report.window));
    }
    let bar = match opts.fail_on {
        Some(bar) => format!("no {bar} or worse finding"),
        None => "nothing fails with --fail-on never".to_string(),
    };
    let mut notes: Vec<String> = Vec::new();
    // Changes no rule explains fail the run only with --fail-on unexplained (or info); the verdict
    // says them first either way.
    if !report.unexplained.is_empty() {
        notes.push(format!("but {} that no rule explains", plural(report.unexplained.len(), "signal moved", "signals moved")));
    }
    if !report.findings.is_empty() {
        let below = if opts.fail_on.is_some() { " below the bar" } else { "" };
        notes.push(format!("{} ({}){below}", plural(report.findings.len(), "finding", "findings"), severity_counts(&report.findings)));
    }
    notes.push(format!("{} evaluated", plural(report.stats.rules_evaluated, "rule/scope pair", "rule/scope pairs")));
    if !report.not_evaluated.is_empty() {
        notes.push(format!("{} not evaluated", report.not_evaluated.len()));
    }
    format!("PASS: {bar} in the {} {since}; {}", describe_duration(&report.window), notes.join(", "))
}

/// `nothing was found in the rest` or `the rest found 2 findings (1 warning, 1 info), none failing`.
fn found_in(report: &Report, part: &str) -> String {
    if report.findings.is_empty() {
        format!("nothing was found in {part}")
    } else {
        format!("{part} found {} ({}), none failing", plural(report.findings.len(), "finding", "findings"), severity_counts(&report.findings))
    }
}
