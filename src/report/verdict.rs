//! The verdict: [`Report::decide`], the one place a run's pass, fail or no verdict is decided, and
//! the exit codes, check's verdict and the stderr notes that read it.

use serde::Serialize;

use super::*;

impl Report {
    /// The highest severity among findings, if any.
    pub fn worst_severity(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// The exit code this report gives (docs/output.md, "Exit codes"): [`EXIT_FINDINGS`] with a finding at
    /// or above `fail_on`; else [`EXIT_NO_DATA`] when nothing was judged, core checks could not be
    /// made or scrape targets answered nothing (no pass, whatever else was or was not found); else
    /// [`EXIT_OK`].
    pub fn exit_code(&self, fail_on: Option<Severity>) -> u8 {
        self.exit_code_with(fail_on, false)
    }

    /// The exit code where changes no rule explains may fail the run too (`--fail-on unexplained`,
    /// and `info` below it): 1 when `unexplained` and the report lists any.
    pub fn exit_code_with(&self, fail_on: Option<Severity>, unexplained: bool) -> u8 {
        self.decide(fail_on, unexplained).exit_code()
    }

    /// Whether this run passes, fails, or gives no verdict, for the bar `fail_on` (and changes no
    /// rule explains failing it when `unexplained`). The one place that decides it: the exit code,
    /// `check`'s first line and the run's notes on stderr all read this.
    pub fn decide(&self, fail_on: Option<Severity>, unexplained: bool) -> Decision {
        if let (Some(t), Some(worst)) = (fail_on, self.worst_severity()) {
            if worst >= t {
                return Decision::FailFindings;
            }
        }
        // A probe that failed fails a run with a bar (check's is warning): users met what it met.
        if fail_on.is_some() && self.probe.as_ref().is_some_and(|p| p.fails()) {
            return Decision::FailProbe;
        }
        if unexplained && !self.unexplained.is_empty() {
            return Decision::FailUnexplained;
        }
        if self.stats.rules_evaluated == 0 {
            return Decision::NoVerdict(NoVerdict::NothingJudged);
        }
        if self.core_missing() {
            return Decision::NoVerdict(NoVerdict::CoreNotJudged);
        }
        if self.gaps() {
            return Decision::NoVerdict(NoVerdict::TargetsUnread);
        }
        Decision::Pass
    }
}

/// What a run amounts to against its `--fail-on` bar ([`Report::decide`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A finding at or above the bar.
    FailFindings,
    /// Changes no rule explains, with `--fail-on unexplained` (or `info`).
    FailUnexplained,
    /// The probe (`--probe`) failed: a request failed, or its first tokens were over the
    /// profile's ceiling; with any `--fail-on` bar.
    FailProbe,
    /// No verdict: see why.
    NoVerdict(NoVerdict),
    /// Nothing fails the run and everything asked for was judged.
    Pass,
}

/// Why a run gives no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoVerdict {
    /// No rule/scope pair could be evaluated.
    NothingJudged,
    /// The runbook's core rules could not be judged ([`Coverage::core_not_evaluated`]).
    CoreNotJudged,
    /// Scrape targets answered nothing ([`Coverage::unread_targets`]).
    TargetsUnread,
}

impl Decision {
    /// The exit code of this decision (docs/output.md, "Exit codes").
    pub fn exit_code(self) -> u8 {
        match self {
            Decision::FailFindings | Decision::FailUnexplained | Decision::FailProbe => EXIT_FINDINGS,
            Decision::NoVerdict(_) => EXIT_NO_DATA,
            Decision::Pass => EXIT_OK,
        }
    }
}

/// Exit codes of a finished diagnosis (a public contract for CI; `error::exit` adds the usage
/// error): no finding at or above `--fail-on` and everything judged.
pub const EXIT_OK: u8 = 0;
/// A finding at or above `--fail-on` (or, with `--fail-on unexplained` or `info`, a change no
/// rule explains).
pub const EXIT_FINDINGS: u8 = 1;
/// No verdict: no data, core checks not judged, or scrape targets that answered nothing.
pub const EXIT_NO_DATA: u8 = 3;

/// How a run ended, as the JSON report carries it: the exit code and the `--fail-on` bar that
/// decided it (`"never"` when no finding fails the run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub exit_code: u8,
    pub fail_on: String,
}

impl Outcome {
    pub fn of(report: &Report, fail_on: Option<Severity>) -> Outcome {
        Outcome::with(report, fail_on, false)
    }

    /// With changes no rule explains failing the run when `unexplained` (see [`fail_on_name`]).
    pub fn with(report: &Report, fail_on: Option<Severity>, unexplained: bool) -> Outcome {
        Outcome { exit_code: report.exit_code_with(fail_on, unexplained), fail_on: fail_on_name(fail_on, unexplained) }
    }
}

/// The `--fail-on` level as given: `never`, `info`, `unexplained`, `warning`, `critical`.
/// `unexplained` is a warning bar that changes no rule explains fail too; `info`, below it, fails
/// on them as well.
pub fn fail_on_name(fail_on: Option<Severity>, unexplained: bool) -> String {
    match (fail_on, unexplained) {
        (Some(Severity::Warning), true) => "unexplained".to_string(),
        (Some(s), _) => s.to_string(),
        (None, _) => "never".to_string(),
    }
}
