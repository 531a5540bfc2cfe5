//! The answer: what every channel format says, decided once from the [`ReportView`].
//!
//! An incident channel, an issue, a CI step summary, the top of the HTML page and the default
//! terminal text all carry the same short answer, in this order:
//!
//! - the verdict: the worst finding's severity, rule and title, or `OK`, `NOT AN ALL-CLEAR`,
//!   `NOTHING EVALUATED` with why;
//! - the scope: the model, how many of its replicas are affected, since when, after which change;
//! - the two to four numbers that decided it, each against its baseline and the line it crossed;
//! - the limit that bound the model;
//! - each experiment card on one line (flag, from → to, confidence; the arithmetic is kept for
//!   `-v`), and the levers the evidence rules out;
//! - the first [`STEPS`] next steps;
//! - the findings it absorbed, in one line (a severity one of them raised said there);
//! - the other findings, one line each; what else moved; what could not be evaluated, as a count
//!   (the rules that bear on the finding by name); the window, the fleet, the profile and the
//!   rule counts in one line.
//!
//! Every fact is one string here, on one line and unescaped; a format escapes it for its markup
//! and lays it out, but never rewords it, shortens it or leaves it out (Slack's limits are met by
//! the [`Answer`] being short, not by cutting it). So the formats cannot disagree: the test
//! `every_channel_format_says_the_same_answer` holds each of them to every fact on every shipped
//! recording, and tests/channel.rs does so on every generated scenario.

use super::view::{FindingView, ReplicaCount, ReportView, RuleCounts};
use super::{plural, Verdict};
use crate::report::Severity;

/// What the cards' numbers are: the model's total (running, waiting) is never what a card sets.
pub const CARD_UNITS: &str = "engine settings per replica";
/// How many next steps the answer gives.
/// The most notes the answer carries under its lead finding.
pub const NOTES: usize = 2;
pub const STEPS: usize = 2;
/// How many of the steps the metrics already answered the answer gives.
pub const CHECKED: usize = 2;
/// How many of the numbers that decided the leading finding the answer gives (the first of its
/// deciding evidence; `-v` shows every signal).
pub const NUMBERS: usize = 3;
/// How many other findings are named, one line each, before the rest are counted.
pub const OTHERS: usize = 2;
/// How many changes no rule explains are named before the rest are counted.
pub const MOVED: usize = 3;
/// How many of the data source's warnings are named before the rest are counted.
pub const WARNINGS: usize = 2;
/// The longest a warning may be in the answer (a server can send anything): the rest is in `-v`.
pub const WARNING_CHARS: usize = 160;

/// The answer every channel format renders.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub verdict: Verdict,
    /// The severity the verdict leads with (the first finding's), `None` when no warning or
    /// critical finding leads.
    pub severity: Option<Severity>,
    /// `CRITICAL kv-cache-pressure: KV-cache pressure is causing preemptions`, `OK: no problem
    /// found in 28 of 32 rules`, `NOT AN ALL-CLEAR: ...`, `NOTHING EVALUATED: ...`.
    pub headline: String,
    /// The headline's first word or words, which a terminal paints: the severity (`CRITICAL`),
    /// `OK`, `NOT AN ALL-CLEAR` or `NOTHING EVALUATED`.
    pub badge: String,
    /// The leading finding in full: the first warning or critical finding.
    pub lead: Option<LeadFinding>,
    /// The other warning and critical findings, one line each (at most [`OTHERS`]), then how many
    /// more.
    pub others: Vec<String>,
    /// The severity of each line of `others` (none for the count of the rest).
    pub other_severities: Vec<Option<Severity>>,
    /// `Also noted (info): gpu-underutilized (llama)`.
    pub noted: Option<String>,
    /// `--probe`: what its requests met against the profile's ceiling, and a refusal in front of
    /// the engines when there was one.
    pub probe: Vec<String>,
    /// Why a run without findings is or is not an all-clear, or which core checks a run with
    /// findings could not make.
    pub conclusion: Option<String>,
    /// Changes no rule explains: the first [`MOVED`], then how many more.
    pub moved: Vec<String>,
    /// Rule/scope pairs listed because nothing was evaluated at all (the reason of each); empty
    /// otherwise, when [`Answer::not_evaluated`] counts them.
    pub not_evaluated_pairs: Vec<String>,
    /// `4 rules not evaluated, 1 more on some models only: -v lists them`, or `None`.
    pub not_evaluated: Option<String>,
    /// `Disabled in the configuration (not evaluated): a, b`.
    pub disabled: Option<String>,
    /// The data source's warnings: the first [`WARNINGS`], each at most [`WARNING_CHARS`], then
    /// how many more.
    pub warnings: Vec<String>,
    /// `2026-01-15 08:50 → 09:20 UTC vs the 30m before · 5 replicas · profile chat · 28 of 32
    /// rules evaluated, 25 healthy`.
    pub context: String,
    /// The counts the context line says.
    pub counts: RuleCounts,
}

/// The leading finding, as the answer gives it.
#[derive(Debug, Clone, PartialEq)]
pub struct LeadFinding {
    pub rank: usize,
    pub severity: Severity,
    pub rule: String,
    /// `meta-llama/Llama-3.1-8B-Instruct · 3 of 3 replicas affected · since 08:50 UTC`.
    pub scope: String,
    /// The numbers that decided it.
    pub numbers: Vec<Number>,
    /// `Bound by the KV cache for 100% of the window: ...`.
    pub binding: Option<String>,
    /// Notes that qualify it: decided through stand-ins or over the last minutes, the change it
    /// began after, a cold start, a correlation that points elsewhere.
    pub notes: Vec<String>,
    /// `Time by hop: engine queue +941 ms (24.9 ms -> 966 ms)`, where a hop grew.
    pub hop: Option<String>,
    pub cards: Vec<Card>,
    /// What the cards are headed by: `Try`, or `Try one of these` where there are several (each is
    /// a lever of its own: any one of them is an experiment, not a recipe to apply together).
    /// Every format adds [`CARD_UNITS`] to it.
    pub try_heading: &'static str,
    /// `Won't help: a lower max_num_seqs (--max-num-seqs), ...; -v says why`: one line, or none.
    pub wont_help: Vec<String>,
    /// The first [`CHECKED`] steps the metrics already answered, with their numbers.
    pub checked: Vec<String>,
    /// Whether the first of `checked` is the binding: a channel that must cut lines keeps it.
    pub checked_binding: bool,
    /// The first [`STEPS`] next steps still to be done.
    pub steps: Vec<String>,
    /// `Also explains: slo-burn (critical: raises this finding from warning), load-exceeds-capacity (warning)`.
    pub absorbed: Option<String>,
    /// `Not evaluated on this model: priority-preemption (metric missing in the window) (-v says why)`.
    pub not_evaluated: Option<String>,
}

/// A number that decided the finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number {
    pub signal: String,
    /// `KV-cache usage (peak): 100%, baseline 59% (held: >= 90%)`.
    pub line: String,
    /// The value alone (`100%`), for tests and for formats that emphasise it.
    pub value: String,
    /// A chart of its query, when the run has links.
    pub link: Option<String>,
}

/// An experiment card on one line, with the arithmetic `-v` shows under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    /// `--max-num-seqs: unknown → 15 · confidence high`.
    pub line: String,
    /// `Suggested max_num_seqs = 15: 17 running sequences per replica ...`.
    pub arithmetic: String,
}

/// Whether the answer's lines that leave something out say where it is: in the terminal, `-v` is
/// one flag away; a channel's reader has no command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hints {
    None,
    Terminal,
}

impl Hints {
    /// `: -v lists them` in the terminal, nothing elsewhere.
    fn lists(self) -> &'static str {
        match self {
            Hints::Terminal => ": -v lists them",
            Hints::None => "",
        }
    }

    /// `; -v says why` in the terminal, nothing elsewhere.
    fn says_why(self, sep: &'static str) -> String {
        match self {
            Hints::Terminal => format!("{sep}-v says why"),
            Hints::None => String::new(),
        }
    }
}

impl Answer {
    /// The answer of a view (the view's own facts, nothing more).
    pub fn new(view: &ReportView, hints: Hints) -> Answer {
        let serious: Vec<&FindingView> = view.findings.iter().filter(|f| f.severity >= Severity::Warning).collect();
        let lead_view = serious.first().copied().filter(|_| view.verdict == Verdict::Findings);
        let others = others(&serious, lead_view.is_some(), hints);
        let other_severities = serious
            .iter()
            .skip(usize::from(lead_view.is_some()))
            .take(OTHERS)
            .map(|f| Some(f.severity))
            .chain(std::iter::repeat(None))
            .take(others.len())
            .collect();
        let (badge, headline) = match lead_view {
            Some(f) => (f.severity.as_str().to_uppercase(), heading(f)),
            None => {
                let (badge, rest) = no_problem_headline(view);
                (badge.to_string(), format!("{badge}: {rest}"))
            }
        };
        let noted: Vec<String> = view
            .findings
            .iter()
            .filter(|f| f.severity < Severity::Warning)
            .map(|f| match &f.cold_start {
                Some(c) => format!("{} ({}): {c}", f.rule, f.scope),
                None => format!("{} ({})", f.rule, f.scope),
            })
            .collect();
        let mut moved: Vec<String> = Vec::new();
        if view.verdict != Verdict::NothingEvaluated {
            moved.extend(view.unexplained.iter().take(MOVED).map(|u| u.brief.clone()));
            if view.unexplained.len() > MOVED {
                moved.push(format!("... and {} more{}", view.unexplained.len() - MOVED, hints.lists()));
            }
        }
        let not_evaluated_pairs = if view.verdict == Verdict::NothingEvaluated {
            view.not_evaluated.iter().map(|n| format!("{} ({}): {}", n.rule, n.scope, n.reason)).collect()
        } else {
            Vec::new()
        };
        Answer {
            verdict: view.verdict,
            severity: lead_view.map(|f| f.severity),
            headline,
            badge,
            lead: lead_view.map(|f| lead(view, f, hints)),
            others,
            other_severities,
            noted: (!noted.is_empty()).then(|| format!("Also noted (info): {}", noted.join(", "))),
            conclusion: conclusion(view),
            probe: view.probe.clone(),
            moved,
            not_evaluated_pairs,
            not_evaluated: not_evaluated_count(view, hints),
            disabled: view.disabled_line.clone(),
            warnings: warnings(&view.warnings, hints),
            context: context(view),
            counts: view.rules,
        }
    }

    /// Every fact of the answer, in order, each one line: what a format must show, whatever its
    /// layout (the agreement tests hold every format to this list).
    pub fn facts(&self) -> Vec<&str> {
        let mut out: Vec<&str> = vec![&self.headline];
        if let Some(l) = &self.lead {
            out.push(&l.scope);
            out.extend(l.numbers.iter().map(|n| n.line.as_str()));
            out.extend(l.binding.as_deref());
            out.extend(l.notes.iter().map(String::as_str));
            out.extend(l.cards.iter().map(|c| c.line.as_str()));
            out.extend(l.wont_help.iter().map(String::as_str));
            out.extend(l.checked.iter().map(String::as_str));
            out.extend(l.steps.iter().map(String::as_str));
            out.extend(l.absorbed.as_deref());
            out.extend(l.not_evaluated.as_deref());
        }
        out.extend(self.others.iter().map(String::as_str));
        out.extend(self.noted.as_deref());
        out.extend(self.conclusion.as_deref());
        out.extend(self.probe.iter().map(String::as_str));
        out.extend(self.moved.iter().map(String::as_str));
        out.extend(self.not_evaluated_pairs.iter().map(String::as_str));
        out.extend(self.not_evaluated.as_deref());
        out.extend(self.disabled.as_deref());
        out.extend(self.warnings.iter().map(String::as_str));
        out.push(&self.context);
        out
    }
}

/// `CRITICAL kv-cache-pressure: KV-cache pressure is causing preemptions`.
fn heading(f: &FindingView) -> String {
    format!("{} {}: {}", f.severity.as_str().to_uppercase(), f.rule, f.title)
}

fn lead(view: &ReportView, f: &FindingView, hints: Hints) -> LeadFinding {
    // The change it began after, said once: by its first step when the runbook starts there
    // (`Start with the configuration change at 09:01 UTC (...)`), else by a note of its own.
    let step_names_it = f.first_step_names_change;
    let mut scope = vec![f.scope.clone()];
    scope.extend(f.replicas_count.as_ref().map(|r| match r {
        ReplicaCount::NotEvaluated => match hints {
            Hints::Terminal => "which replicas: not evaluated (-v says why)".to_string(),
            Hints::None => "which replicas: not evaluated".to_string(),
        },
        ReplicaCount::Of { affected, total, named } if named.is_empty() => format!("{affected} of {total} replicas affected"),
        ReplicaCount::Of { affected, total, named } => format!("{affected} of {total} replicas affected ({})", named.join(", ")),
    }));
    scope.extend(f.since.clone());
    let numbers = f
        .deciding
        .iter()
        .take(NUMBERS)
        .filter_map(|&i| f.evidence.get(i))
        .map(|e| {
            let mut line = format!("{}: {}, baseline {} (held: {})", e.title, e.value, e.baseline, e.condition_own);
            if let Some(c) = &e.confidence {
                line.push_str(&format!(", {c}"));
            }
            Number { signal: e.signal.clone(), line, value: e.value.clone(), link: e.link.clone() }
        })
        .collect();
    let mut notes: Vec<String> = Vec::new();
    notes.extend(f.stood_in_brief.clone());
    notes.extend(f.recent_brief.clone());
    notes.extend(f.preceded_by.clone().filter(|_| !step_names_it));
    // Why the replica it names differs (load, config or hardware), and where the time went hop by
    // hop where one grew; a correlation that points elsewhere last.
    notes.extend(f.replica_cause.clone());
    // Where the time went, where a hop grew: a line of its own, which Slack carries while the
    // message stays within its budget (-v and the JSON have the whole split).
    let hop = hop_line(view, f);
    notes.extend(f.doubts.first().cloned());
    // The answer keeps to a few lines (Slack under 1,500 characters): at most NOTES of them; -v
    // and the JSON have every one.
    notes.truncate(NOTES);
    let cards = f.recommendations.iter().map(|r| Card { line: r.card_brief.clone().unwrap_or_else(|| r.head.clone()), arithmetic: r.brief.clone() }).collect();
    let _ = view;
    LeadFinding {
        rank: f.rank,
        severity: f.severity,
        rule: f.rule.clone(),
        scope: scope.join(" · "),
        numbers,
        binding: f.binding.clone(),
        notes,
        hop,
        try_heading: if f.recommendations.len() > 1 { "Try one of these" } else { "Try" },
        cards,
        wont_help: wont_help(f, hints),
        checked: f.checked.iter().take(CHECKED).cloned().collect(),
        checked_binding: f.checked_binding,
        steps: f.steps.iter().take(STEPS).cloned().collect(),
        absorbed: f.also_consistent_list(|id| id.to_string()).map(|l| format!("Also explains: {l}")),
        not_evaluated: None,
    }
}

/// The levers the evidence rules out, in one line: `Won't help: a lower max_num_seqs
/// (--max-num-seqs), a quantised KV cache (--kv-cache-dtype fp8); -v says why`.
fn wont_help(f: &FindingView, hints: Hints) -> Vec<String> {
    if f.wont_help_levers.is_empty() {
        return Vec::new();
    }
    vec![format!("Won't help: {}{}", f.wont_help_levers.join(", "), hints.says_why("; "))]
}

/// The warning and critical findings after the lead, one line each: `#2 WARNING slow-decode:
/// Decode is slow · qwen · P95 inter-token latency: 112 ms, baseline 48.6 ms`.
fn others(serious: &[&FindingView], led: bool, hints: Hints) -> Vec<String> {
    let lead_scope = serious.first().filter(|_| led).map(|f| f.scope.clone()).unwrap_or_default();
    let rest: Vec<&&FindingView> = serious.iter().skip(usize::from(led)).collect();
    let mut out: Vec<String> = rest
        .iter()
        .take(OTHERS)
        .map(|f| {
            // The number that decided it most, against its baseline.
            let number = f
                .deciding
                .first()
                .and_then(|&i| f.evidence.get(i))
                .map(|e| format!(" · {}: {}, baseline {}", e.title, e.value, e.baseline))
                .unwrap_or_default();
            match f.scope.strip_prefix(lead_scope.as_str()) {
                // On the leading finding's model: said once, there.
                Some("") => format!("#{} {}{number}", f.rank, heading(f)),
                _ => format!("#{} {} · {}{number}", f.rank, heading(f), f.scope_short),
            }
        })
        .collect();
    if rest.len() > OTHERS {
        out.push(format!("... and {}{}", plural(rest.len() - OTHERS, "more finding", "more findings"), hints.lists()));
    }
    out
}

/// The first line when no warning or critical finding leads: its badge and the rest.
fn no_problem_headline(view: &ReportView) -> (&'static str, String) {
    let r = &view.rules;
    let in_rules = if r.total > 0 {
        format!("{} of {} rules", r.evaluated, r.total)
    } else {
        view.healthy.as_ref().map_or_else(|| "what was checked".to_string(), |h| h.pairs.clone())
    };
    if let Some(p) = &view.probe_failed {
        let rest = match view.verdict {
            Verdict::NothingEvaluated => "no rule could be checked against this window".to_string(),
            _ => format!("no warning or critical finding in the {in_rules} evaluated"),
        };
        return ("PROBE FAILED", format!("{p} · {rest}"));
    }
    match view.verdict {
        Verdict::NothingEvaluated => ("NOTHING EVALUATED", "no rule could be checked against this window, so this is not an all-clear".to_string()),
        Verdict::Incomplete => {
            let gaps = view.gaps.clone().unwrap_or_else(|| "core checks not evaluated".into());
            ("NOT AN ALL-CLEAR", format!("{gaps} · no warning or critical finding in the {in_rules} evaluated"))
        }
        _ if !view.unexplained.is_empty() => {
            let moved = plural(view.unexplained.len(), "signal moved", "signals moved");
            ("NOT AN ALL-CLEAR", format!("no warning or critical finding in {in_rules}, but {moved} that no rule explains"))
        }
        _ if view.findings.is_empty() => ("OK", format!("no problem found in {in_rules}")),
        _ => ("OK", format!("no warning or critical finding in {in_rules}")),
    }
}

/// The sentence that qualifies the verdict: which core checks could not be made (with findings,
/// or without), or why nothing was evaluated. A clean run's is the headline and the counts.
fn conclusion(view: &ReportView) -> Option<String> {
    match view.verdict {
        Verdict::Clean => None,
        Verdict::NothingEvaluated => view
            .conclusion
            .as_ref()
            .map(|c| {
                c.trim_start_matches("Nothing was evaluated: no rule could be checked against this window, so this is not an all-clear.").trim().to_string()
            })
            .filter(|c| !c.is_empty()),
        _ => view.core_brief.clone(),
    }
}

/// `4 rules not evaluated, and priority-preemption on this model: -v lists them`, or `None`.
fn not_evaluated_count(view: &ReportView, hints: Hints) -> Option<String> {
    if view.verdict == Verdict::NothingEvaluated {
        return None;
    }
    let r = &view.rules;
    // The rules not evaluated on the leading finding's model are named: they might have told
    // another story there.
    let here: Vec<&str> = view
        .findings
        .iter()
        .find(|f| f.severity >= Severity::Warning)
        .map(|f| f.not_evaluated_here.iter().map(|n| n.split(" (").next().unwrap_or_default()).collect())
        .unwrap_or_default();
    let elsewhere = view.partly_evaluated.iter().filter(|p| !here.contains(&p.as_str())).count();
    // Each rule counted once: those not evaluated anywhere are named among the count, those
    // evaluated on other models only are added to it.
    let (part, whole): (Vec<&str>, Vec<&str>) = here.iter().partition(|h| view.partly_evaluated.iter().any(|p| p == *h));
    let mut parts: Vec<String> = Vec::new();
    if r.not_evaluated > 0 {
        let among = match whole.len() {
            0 => String::new(),
            n if n == r.not_evaluated => format!(" ({})", whole.join(", ")),
            _ => format!(" ({} among them)", whole.join(", ")),
        };
        parts.push(format!("{} not evaluated{among}", plural(r.not_evaluated, "rule", "rules")));
    }
    if !part.is_empty() {
        let and = if parts.is_empty() { "not evaluated" } else { "and" };
        parts.push(format!("{and} {} on this model", part.join(", ")));
    }
    if elsewhere > 0 {
        parts.push(format!("{} on some models only", plural(elsewhere, "more", "more")));
    }
    (!parts.is_empty()).then(|| format!("{}{}", parts.join(", "), hints.lists()))
}

/// The first warnings, each kept to [`WARNING_CHARS`] at a word, and how many more.
fn warnings(all: &[String], hints: Hints) -> Vec<String> {
    let mut out: Vec<String> = all
        .iter()
        .take(WARNINGS)
        .map(|w| {
            let line = format!("Warning: {w}");
            if line.chars().count() <= WARNING_CHARS {
                return line;
            }
            let mut keep: String = line.chars().take(WARNING_CHARS - 1).collect();
            if let Some(i) = keep.rfind(' ') {
                keep.truncate(i);
            }
            match hints {
                Hints::Terminal => format!("{}… (-v has it whole)", keep.trim_end()),
                Hints::None => format!("{}…", keep.trim_end()),
            }
        })
        .collect();
    if all.len() > WARNINGS {
        out.push(format!("... and {}{}", plural(all.len() - WARNINGS, "more warning", "more warnings"), hints.lists()));
    }
    out
}

/// `2026-01-15 08:50 → 09:20 UTC vs the 30m before · 5 replicas · profile chat · 28 of 32 rules
/// evaluated, 25 healthy`.
fn context(view: &ReportView) -> String {
    let h = &view.header;
    // A live run says how long ago the window ended (a replay never does).
    let ago = h.ended.as_ref().map(|a| format!(" (ended {a})")).unwrap_or_default();
    let mut parts = vec![format!("{}{ago} vs {}", window(&view.window_range), h.baseline_brief)];
    parts.extend(h.replicas.clone());
    parts.push(view.profile_phrase());
    let r = &view.rules;
    if r.total > 0 && view.verdict != Verdict::NothingEvaluated {
        parts.push(format!("{} of {} rules evaluated, {} healthy", r.evaluated, r.total, r.healthy));
    }
    parts.join(" · ")
}

/// `2026-01-15 08:50 → 09:20 UTC`: the window in minutes (seconds when it has them), its end's
/// date only when it differs.
pub(crate) fn window(r: &crate::report::TimeRange) -> String {
    let clock = |t: &chrono::DateTime<chrono::Utc>| t.format(if t.timestamp() % 60 == 0 { "%H:%M" } else { "%H:%M:%S" }).to_string();
    let end = if r.start.date_naive() == r.end.date_naive() { clock(&r.end) } else { format!("{} {}", r.end.format("%Y-%m-%d"), clock(&r.end)) };
    format!("{} {} → {end} UTC", r.start.format("%Y-%m-%d"), clock(&r.start))
}

impl ReportView {
    /// The answer every channel format gives: no line of it points at a command-line flag, which a
    /// channel's reader does not have.
    pub fn answer(&self) -> Answer {
        Answer::new(self, Hints::None)
    }

    /// The same answer for the terminal, where `-v` is one flag away: the lines that leave
    /// something out say where it is.
    pub fn answer_in_terminal(&self) -> Answer {
        Answer::new(self, Hints::Terminal)
    }
}

/// `Time by hop: engine queue +941 ms (24.9 ms -> 966 ms)`: where a hop of the finding's scope grew.
pub(crate) fn hop_line(view: &ReportView, f: &FindingView) -> Option<String> {
    view.hops.iter().find(|h| h.scope == f.scope_short).and_then(|h| h.brief.as_ref()).map(|b| format!("Time by hop: {b}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;
    use crate::render::RenderOptions;

    fn answer(r: &crate::report::Report) -> Answer {
        ReportView::new(r, &RenderOptions::default()).answer_in_terminal()
    }

    #[test]
    fn the_scope_names_the_affected_replicas_only_where_some_of_a_few_are() {
        let scope_with = |affected: &[&str], total: usize| {
            let mut r = sample_report();
            let reps = r.findings[0].replicas.as_mut().expect("the sample names its replicas");
            reps.affected = affected.iter().map(|a| a.to_string()).collect();
            reps.total = total;
            answer(&r).lead.expect("a lead finding").scope
        };
        assert!(scope_with(&["a:1"], 2).contains("1 of 2 replicas affected (a:1) ·"));
        assert!(scope_with(&["a:1", "b:1", "c:1"], 3).contains("3 of 3 replicas affected ·"), "all of them: nothing to tell apart");
        assert!(scope_with(&["a:1", "b:1", "c:1", "d:1"], 10).contains("4 of 10 replicas affected ·"), "too many to name in a line");
    }

    #[test]
    fn the_answer_of_the_sample_report() {
        let a = answer(&sample_report());
        assert_eq!(a.headline, "CRITICAL kv-cache-exhausted: KV cache exhausted: requests are being preempted");
        let l = a.lead.as_ref().expect("a lead finding");
        assert_eq!(l.scope, "llama-3.1-70b-instruct · 2 of 3 replicas affected (10.0.0.1:8000, 10.0.0.2:8000) · since 09:03 UTC");
        assert!((1..=NUMBERS).contains(&l.numbers.len()), "{:?}", l.numbers);
        assert_eq!(l.numbers[0].line, "KV cache usage (max): 99.1%, baseline 62% (held: > 95%)");
        assert_eq!(l.cards.iter().map(|c| c.line.as_str()).collect::<Vec<_>>(), ["--max-num-seqs: unknown → 37 · confidence high"]);
        assert!(l.cards[0].arithmetic.starts_with("Suggested max_num_seqs = 37: "), "{}", l.cards[0].arithmetic);
        assert_eq!(l.steps.len(), STEPS);
        assert_eq!(l.absorbed.as_deref(), Some("Also explains: queue-backlog (warning), ttft-regression (info)"));
        assert_eq!(
            a.others,
            ["#2 WARNING ttft-regression: Time to first token regressed · qwen2.5-coder-32b · P95 time to first token: 4.12 s, baseline 820 ms"]
        );
        // The sample's pack: 8 rules, 6 evaluated, so 2 nowhere; 1 more (on Qwen only).
        assert_eq!((a.counts.total, a.counts.evaluated, a.counts.not_evaluated, a.counts.partly_evaluated), (8, 6, 2, 1));
        assert_eq!(a.not_evaluated.as_deref(), Some("2 rules not evaluated, 1 more on some models only: -v lists them"));
        assert!(a.context.contains(" · profile chat · 6 of 8 rules evaluated, 3 healthy"), "{}", a.context);
        // Every fact is one line.
        assert!(a.facts().iter().all(|f| !f.contains('\n') && !f.is_empty()), "{:?}", a.facts());
    }

    #[test]
    fn a_rule_not_evaluated_on_the_leads_model_is_named() {
        let mut r = sample_report();
        let mut n = r.not_evaluated[0].clone();
        n.scope = r.findings[0].scope.clone();
        n.rule = "priority-preemption".into();
        n.reason = crate::report::Reasons(vec![crate::report::Reason::MetricMissing {
            side: crate::report::Side::Window,
            families: vec!["vllm:num_preemptions_by_reason_total".into()],
        }]);
        r.not_evaluated.push(n);
        let a = answer(&r);
        // Not evaluated for any scope, so one of the rules counted (the pack's counts here are the
        // sample's own): named among them, not added to them.
        assert_eq!(a.not_evaluated.as_deref(), Some("2 rules not evaluated (priority-preemption among them), 1 more on some models only: -v lists them"));
    }

    #[test]
    fn without_a_warning_or_critical_finding_there_is_no_lead() {
        let a = answer(&clean_report());
        assert!(a.lead.is_none() && a.others.is_empty());
        assert!(a.headline.starts_with("OK: no problem found in "), "{}", a.headline);
        let a = answer(&nothing_evaluated_report());
        assert!(a.headline.starts_with("NOTHING EVALUATED: ") && a.not_evaluated.is_none() && !a.not_evaluated_pairs.is_empty());
    }
}
