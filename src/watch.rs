//! `explain --watch DUR`: the diagnosis kept up to date on a terminal during an incident.
//!
//! Every interval the whole explain pipeline runs again over a window ending now, the screen is
//! redrawn, and above the report a line says what changed since the previous run: which findings
//! appeared, which are over (still in the window, their problem ended) and which resolved, keyed
//! by rule and scope. A run that fails (Prometheus restarting,
//! a network blip) is shown as failed and compared with nothing: "resolved" is only ever said on
//! the strength of a run that evaluated, never because data went missing.
//!
//! Watching is for people at a terminal. It is refused when stdout is not one (a file or a CI log
//! would fill with redraws), with `--replay` (the answer never changes), with `--record` (which
//! run would be kept?) and with `--at` (the window would never move). Ctrl-C ends it with exit 0.
//!
//! The caller hands over what watching needs ([`Watch`]), a closure that runs the diagnosis once
//! and one that writes a screen: this module knows nothing of the app or its settings.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::Duration;

use crate::error::{exit, Failure};
use crate::render::{self, RenderOptions};
use chrono::{DateTime, Utc};

use crate::report::{Report, Severity};

/// Rule and scope (as displayed) of a finding.
pub type Key = (String, String);

/// A finding's severity, and when its problem was over if it was (see [`crate::report::Finding::ended`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct State {
    pub severity: Severity,
    pub ended: Option<DateTime<Utc>>,
}

impl State {
    /// A finding whose problem goes on.
    pub fn ongoing(severity: Severity) -> State {
        State { severity, ended: None }
    }
}

/// What changed between two runs that both produced a report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    pub appeared: Vec<(Key, Severity)>,
    /// Findings still in the window whose problem is over now and was not at the last run: told
    /// at once, where "resolved" waits until the episode has left the window.
    pub over: Vec<(Key, Severity, DateTime<Utc>)>,
    pub resolved: Vec<(Key, Severity)>,
}

/// The findings of a report by rule and scope.
pub fn keys(report: &Report) -> BTreeMap<Key, State> {
    let scopes = render::ScopeStyle::for_report(report);
    report.findings.iter().map(|f| ((f.rule.clone(), scopes.format(&f.scope)), State { severity: f.severity, ended: f.ended })).collect()
}

/// Findings present now and not before, over now and not before, and before and not now, each in
/// key order.
pub fn changes(before: &BTreeMap<Key, State>, now: &BTreeMap<Key, State>) -> Changes {
    Changes {
        appeared: now.iter().filter(|(k, _)| !before.contains_key(*k)).map(|(k, s)| (k.clone(), s.severity)).collect(),
        over: now
            .iter()
            .filter_map(|(k, s)| Some((k, s, s.ended?)))
            .filter(|(k, _, _)| before.get(*k).is_some_and(|b| b.ended.is_none()))
            .map(|(k, s, t)| (k.clone(), s.severity, t))
            .collect(),
        resolved: before.iter().filter(|(k, _)| !now.contains_key(*k)).map(|(k, s)| (k.clone(), s.severity)).collect(),
    }
}

/// `New: kv-cache-pressure on llama (critical) · Over: slow-prefill on llama (warning) since 09:12
/// UTC · Resolved: slow-decode on qwen (warning)`.
pub fn describe(c: &Changes) -> String {
    let list = |items: &[(Key, Severity)]| items.iter().map(|((r, s), sev)| format!("{r} on {s} ({sev})")).collect::<Vec<_>>().join(", ");
    let over = c.over.iter().map(|((r, s), sev, t)| format!("{r} on {s} ({sev}) since {}", t.format("%H:%M:%S UTC"))).collect::<Vec<_>>().join(", ");
    let parts: Vec<String> = [("New", list(&c.appeared)), ("Over", over), ("Resolved", list(&c.resolved))]
        .into_iter()
        .filter(|(_, l)| !l.is_empty())
        .map(|(head, l)| format!("{head}: {l}"))
        .collect();
    match parts.is_empty() {
        true => "No change in findings since the last run.".to_string(),
        false => format!("{}.", parts.join(" · ")),
    }
}

/// What a watch needs to know of the run it repeats.
#[derive(Debug, Clone)]
pub struct Watch {
    /// Time between two runs.
    pub every: Duration,
    /// The format each screen is rendered in.
    pub format: render::Format,
    /// Show progress on stderr while a run queries.
    pub progress: bool,
    /// The run replays a recording (which never changes).
    pub replay: bool,
    /// The run records itself (which of many runs would be kept?).
    pub record: bool,
    /// The window's end, as given (`--at`); only "now" moves.
    pub at: Option<String>,
    /// The run prints CI annotations.
    pub annotations: bool,
    /// Where the latest run's findings are served as metrics, said in each screen's first line.
    pub serving: Option<String>,
}

/// Refuse what cannot be watched, with the reason and the fix.
pub fn validate(w: &Watch, stdout_is_terminal: bool) -> Result<(), Failure> {
    if w.replay {
        return Err(Failure::Usage("--watch re-queries a live source; a --replay never changes. Drop --watch to read the recording".into()));
    }
    if w.record {
        return Err(Failure::Usage("--watch runs many times and --record keeps one run: drop one of them".into()));
    }
    if w.at.as_deref().is_some_and(|a| !a.trim().eq_ignore_ascii_case("now")) {
        return Err(Failure::Usage("--watch follows the present: drop --at (each run's window ends when it runs)".into()));
    }
    if !w.format.is_text() {
        return Err(Failure::Usage("--watch redraws a terminal: use --format text, table, markdown or slack".into()));
    }
    if w.annotations {
        return Err(Failure::Usage("--annotations is for CI logs, --watch for a terminal: drop one of them".into()));
    }
    if !stdout_is_terminal {
        return Err(Failure::Usage("--watch needs a terminal on stdout (it redraws the screen); to poll from a script, run explain in a loop".into()));
    }
    Ok(())
}

/// Run until Ctrl-C. Errors of the first run that are the user's to fix (a bad selector, a rule
/// file) end the watch; failures of the data source are shown and retried at the next tick.
/// `diagnose` runs the pipeline once (its argument: whether to show progress) and `write` puts a
/// screen on stdout: the watch loop itself knows nothing of the app that calls it. The Ctrl-C
/// handler runs on `runtime`, the one the diagnosis uses.
pub fn run(
    w: &Watch,
    runtime: &tokio::runtime::Handle,
    mut diagnose: impl FnMut(bool) -> Result<Report, Failure>,
    write: impl Fn(&str) -> Result<(), Failure>,
) -> Result<u8, Failure> {
    validate(w, std::io::stdout().is_terminal())?;
    stop_on_ctrl_c(runtime)?;
    let every = w.every;
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::env::var("TERM").map_or(true, |t| t != "dumb");
    let progress = w.progress;
    let every_text = humantime::format_duration(Duration::from_secs(every.as_secs().max(1))).to_string();
    let mut previous: Option<BTreeMap<Key, State>> = None;
    let mut run = 0u64;
    loop {
        run += 1;
        let started = chrono::Utc::now();
        let result = diagnose(progress);
        let mut screen = clear_screen();
        let serving = w.serving.as_deref().map(|url| format!(" · findings on {url}")).unwrap_or_default();
        screen.push_str(&format!("Watching every {every_text} · run {run} at {}{serving} · Ctrl-C to stop\n", started.format("%H:%M:%S UTC")));
        match result {
            Ok(report) => {
                let now = keys(&report);
                match &previous {
                    Some(before) => screen.push_str(&describe(&changes(before, &now))),
                    None => screen.push_str("First run: changes are shown from the next run on."),
                }
                screen.push_str("\n\n");
                let width = terminal_size::terminal_size().map(|(w, _)| w.0);
                let opts = RenderOptions {
                    color: color && w.format.is_terminal(),
                    width,
                    now: Some(chrono::Utc::now()),
                    fail_on: None,
                    fail_on_unexplained: false,
                    links: None,
                    verdict: None,
                    detail: Default::default(),
                };
                screen.push_str(&render::render(&report, w.format, &opts));
                previous = Some(now);
            }
            Err(e @ (Failure::Usage(_) | Failure::Rules(_) | Failure::Recording(_))) if run == 1 => return Err(e),
            Err(e) => {
                screen.push_str(&format!("This run failed: {e}\nRetrying in {every_text}; the last good run's findings are kept for comparison.\n"));
            }
        }
        write(&screen)?;
        std::thread::sleep(every);
    }
}

/// The start of a screen: the cursor home and the terminal cleared, written by crossterm (its
/// ANSI form, so the screen still goes out in one write).
fn clear_screen() -> String {
    use crossterm::{cursor::MoveTo, terminal::Clear, terminal::ClearType, Command};
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = MoveTo(0, 0).write_ansi(&mut out);
    let _ = Clear(ClearType::All).write_ansi(&mut out);
    out
}

/// Ctrl-C ends the process at once with exit 0, wherever the loop is (sleeping or waiting for
/// Prometheus): the watch holds no state worth saving and the screen needs no restoring. The
/// handler is a task on the caller's runtime, whose worker threads run it while the loop sleeps.
fn stop_on_ctrl_c(runtime: &tokio::runtime::Handle) -> Result<(), Failure> {
    // Register before returning, so a Ctrl-C right after the first draw is caught.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    runtime.spawn(async move {
        let signal = tokio::signal::ctrl_c();
        tokio::pin!(signal);
        // Polling once installs the handler.
        let registered = futures::poll!(&mut signal);
        if let std::task::Poll::Ready(Err(e)) = registered {
            let _ = ready_tx.send(Err(e.to_string()));
            return;
        }
        let _ = ready_tx.send(Ok(()));
        if signal.await.is_ok() {
            eprintln!();
            std::process::exit(exit::OK as i32);
        }
    });
    match ready_rx.recv_timeout(Duration::from_secs(5)) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(Failure::Output(format!("cannot listen for Ctrl-C: {e}"))),
        Err(_) => Err(Failure::Output("cannot listen for Ctrl-C: the handler did not start".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(rule: &str, scope: &str) -> Key {
        (rule.to_string(), scope.to_string())
    }

    #[test]
    fn findings_are_matched_by_rule_and_scope_across_runs() {
        let (warn, crit) = (State::ongoing(Severity::Warning), State::ongoing(Severity::Critical));
        let before = BTreeMap::from([(k("slow-decode", "qwen"), warn), (k("kv-cache-pressure", "llama"), crit)]);
        let now = BTreeMap::from([(k("kv-cache-pressure", "llama"), crit), (k("kv-cache-pressure", "qwen"), crit)]);
        let c = changes(&before, &now);
        assert_eq!(c.appeared, vec![(k("kv-cache-pressure", "qwen"), Severity::Critical)]);
        assert_eq!(c.resolved, vec![(k("slow-decode", "qwen"), Severity::Warning)]);
        assert!(c.over.is_empty());
        assert_eq!(describe(&c), "New: kv-cache-pressure on qwen (critical) · Resolved: slow-decode on qwen (warning).");
    }

    #[test]
    fn a_finding_whose_problem_ended_is_told_over_once_before_it_leaves_the_window() {
        let t = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 1, 15, 9, 12, 30).unwrap();
        let crit = State::ongoing(Severity::Critical);
        let ended = State { ended: Some(t), ..crit };
        let ongoing = BTreeMap::from([(k("kv-cache-pressure", "llama"), crit)]);
        let over = BTreeMap::from([(k("kv-cache-pressure", "llama"), ended)]);
        let c = changes(&ongoing, &over);
        assert_eq!(c.over, vec![(k("kv-cache-pressure", "llama"), Severity::Critical, t)]);
        assert_eq!(describe(&c), "Over: kv-cache-pressure on llama (critical) since 09:12:30 UTC.");
        // Said once: the next run, still over, is no change; one where it came back is not "over".
        assert_eq!(describe(&changes(&over, &over)), "No change in findings since the last run.");
        assert!(changes(&over, &ongoing).over.is_empty());
        // A finding first seen already over is new, not over; one that left the window resolved.
        assert_eq!(describe(&changes(&BTreeMap::new(), &over)), "New: kv-cache-pressure on llama (critical).");
        assert_eq!(describe(&changes(&over, &BTreeMap::new())), "Resolved: kv-cache-pressure on llama (critical).");
    }

    #[test]
    fn identical_runs_report_no_change() {
        let same = BTreeMap::from([(k("a", "x"), State::ongoing(Severity::Info))]);
        assert_eq!(describe(&changes(&same, &same)), "No change in findings since the last run.");
        assert_eq!(describe(&changes(&BTreeMap::new(), &same)), "New: a on x (info).");
        assert_eq!(describe(&changes(&same, &BTreeMap::new())), "Resolved: a on x (info).");
    }

    /// A watch of `explain --watch 1m` with these flags.
    fn args(extra: &[&str]) -> Watch {
        let mut w = Watch {
            every: Duration::from_secs(60),
            format: render::Format::Text,
            progress: false,
            replay: false,
            record: false,
            at: None,
            annotations: false,
            serving: None,
        };
        for pair in extra.chunks(2) {
            match pair {
                ["--replay", _] => w.replay = true,
                ["--record", _] => w.record = true,
                ["--at", at] => w.at = Some(at.to_string()),
                ["--format", "json"] => w.format = render::Format::Json,
                other => panic!("not in this test: {other:?}"),
            }
        }
        w
    }

    #[test]
    fn watch_is_refused_where_it_cannot_work() {
        let msg = |a: &Watch, tty: bool| validate(a, tty).unwrap_err().to_string();
        assert!(msg(&args(&["--replay", "x.json"]), true).contains("--replay"));
        assert!(msg(&args(&["--record", "x.json"]), true).contains("--record"));
        assert!(msg(&args(&["--at", "2026-01-15T09:00:00Z"]), true).contains("--at"));
        assert!(msg(&args(&["--format", "json"]), true).contains("--format"));
        assert!(msg(&args(&[]), false).contains("terminal"));
        assert!(validate(&args(&[]), true).is_ok());
        assert!(validate(&args(&["--at", "now"]), true).is_ok());
        assert_eq!(validate(&args(&[]), false).unwrap_err().exit_code(), exit::USAGE);
    }

    #[test]
    fn a_screen_starts_with_the_cursor_home_and_the_terminal_cleared() {
        assert_eq!(clear_screen(), "\x1b[1;1H\x1b[2J");
    }
}
