//! The report as a reader sees it: every section, decided and worded once, for every format.
//!
//! A [`Report`] is the data (and, as JSON, the stable contract); a [`ReportView`] is what the
//! report *says*: the verdict and its headline, the header, each finding with its evidence already
//! written as text, what was healthy, what could not be checked and why, the rules the
//! configuration switched off, and the data source's warnings. It is built by one function,
//! [`ReportView::new`], and every text and document format (table, Markdown, Slack, HTML, JUnit,
//! GitHub annotations) formats it and nothing else: a renderer adds markup and layout, never a fact.
//! So a section cannot be forgotten by one format, and two formats cannot word a fact differently.
//!
//! Text in the view is on one line each (server text has had its newlines and control characters
//! removed) but is not escaped: escaping belongs to the markup that prints it.
//!
//! The view is in three files: the view and its header, what was healthy and what could not be
//! checked (here), each finding's card and its evidence (`finding.rs`), and the timeline
//! (`timeline.rs`).
//!
//! The timeline (the report's change events, oldest first) is worded here too, each event once.
//! Text formats list at most [`TIMELINE_LISTED`] of them: when there are more, the ones a finding
//! began after come first, then the window's newest, then the baseline's newest, still printed
//! oldest first, and `... and N more (see --format json)` counts the rest. The JSON holds them all.

use chrono::{DateTime, Utc};

use super::links::GraphLinks;
use super::{
    ago, alternatives, card_lines, condition_in_words, core_sentence, coverage_phrase, describe_duration, describe_fleet, describe_generation,
    describe_instant, describe_range, describe_range_at, describe_source, disabled_line, evidence_sparkline, finding_queries, gap_phrase, headline,
    healthy_summary, no_findings_sentence, not_evaluated_heading, not_evaluated_lines, one_line, plural, query_timing, recent_line, recommendation_lines,
    replicas_line, stood_in_line, verdict, warning_lines, wont_help_lines, Named, RenderOptions, ScopeStyle, Verdict,
};
use crate::report::{Event, EventKind, Evidence, Finding, Report, Scope, Severity, TimeRange};

mod finding;
#[cfg(test)]
mod tests;
mod timeline;

pub use finding::*;
pub use timeline::*;

/// Everything a reader of any format is shown, in the order of the table format.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportView {
    /// What the run amounts to: findings, a clean bill, nothing evaluated, or incomplete.
    pub verdict: Verdict,
    /// The most severe finding's severity, if any.
    pub worst: Option<Severity>,
    /// `2 findings (1 critical, 1 warning) · 6 of 8 rules evaluated`: the first line of every format.
    pub headline: String,
    pub header: Header,
    /// `21 of 24 rules evaluated (2 through stand-in signals)`, or `None` when all were.
    pub coverage: Option<String>,
    /// The sentence naming the core checks that could not be judged, or `None`.
    pub core_missing: Option<String>,
    /// The same in brief, for the answer: `Core runbook checks not evaluated: slow-decode (metric
    /// missing in the window); what could not be seen is not known to be healthy`.
    pub core_brief: Option<String>,
    /// No rule/scope pair was evaluated: the run gives no verdict (exit code 3).
    pub nothing_evaluated: bool,
    /// The closing sentence: the all-clear (or why it is none) when there are no findings, the
    /// core-missing sentence when there are. `None` when there is nothing to add.
    pub conclusion: Option<String>,
    /// Most important first, as ranked.
    pub findings: Vec<FindingView>,
    /// `None` when no rule/scope pair was found healthy.
    pub healthy: Option<HealthyView>,
    /// Every healthy (rule, scope) pair, in the report's order, for formats that list each one.
    pub healthy_pairs: Vec<(String, String)>,
    /// Every rule/scope pair that could not be evaluated, sorted, with its reason.
    pub not_evaluated: Vec<NotEvaluatedView>,
    /// `Not evaluated (2 rule/scope pairs; not covered by this diagnosis):`.
    pub not_evaluated_heading: String,
    /// Rules the configuration file switched off (never evaluated, for any scope).
    pub disabled: Vec<String>,
    /// `Disabled in the configuration (not evaluated): a, b`, or `None` when nothing was.
    pub disabled_line: Option<String>,
    /// The data source's warnings in first-seen order, repeats folded with a count.
    pub warnings: Vec<String>,
    /// What the metrics cannot show about rules judged healthy (blind spots), on one line each.
    pub caveats: Vec<String>,
    /// `at 09:30:00 UTC (baseline: same query at 09:00:00 UTC)`: when every evidence query ran.
    pub query_timing: String,
    /// How the empty scope (a rule that applies everywhere, a disabled rule) is written: `all`.
    pub scope_all: String,
    /// The severity at or above which a finding fails the run (`--fail-on`).
    pub fail_on: Option<Severity>,
    /// Changes no rule explains fail the run too (`--fail-on unexplained`, or `info`).
    pub fail_on_unexplained: bool,
    /// The compared ranges themselves, for charts and machine-readable timestamps.
    pub window_range: TimeRange,
    pub baseline_range: TimeRange,
    /// What changed in the baseline and the window, oldest first: every event of the report.
    pub timeline: Vec<EventView>,
    /// `Timeline: 6 changes (3 in the baseline, 3 in the window), oldest first`; `None` when
    /// nothing changed (no format shows an empty timeline).
    pub timeline_heading: Option<String>,
    /// `... and 7 more (see --format json)` when the text formats do not list every event.
    pub timeline_more: Option<String>,
    /// How many rules the pack has, gave a verdict, and found nothing in any scope.
    pub rules: RuleCounts,
    /// `core checks not evaluated`, `a scrape target answered nothing`: why the run cannot pass,
    /// or `None`.
    pub gaps: Option<String>,
    /// `gpu-throttling (metric missing in the window)`, `a, b and 3 more`: the rules with a
    /// scope that could not be evaluated, for one line; `None` when every pair was.
    pub not_evaluated_brief: Option<String>,
    /// What else moved, largest first: signals no warning or critical finding explains.
    pub unexplained: Vec<UnexplainedView>,
    /// The time by hop, one entry per scope (render/hops.rs).
    pub hops: Vec<super::hops::HopView>,
    /// The latency profile the rules used (`chat`), when the report says.
    pub profile: Option<String>,
    /// What the run adjusted to the window (`-v` only): see [`Report::notes`].
    pub notes: Vec<String>,
    /// The rules judged in some scopes and not evaluated in others (counted in
    /// [`RuleCounts::partly_evaluated`]).
    pub partly_evaluated: Vec<String>,
    /// The numbers behind each model's healthy core checks, each against the line its rule needs
    /// to fire: `KV-cache usage (peak): 59%, baseline 55% (needs >= 90%: not met)`.
    pub readings: Vec<ReadingsView>,
    /// `--probe`: what its requests met, and a refusal in front of the engines (one line each).
    pub probe: Vec<String>,
    /// Why the probe fails the run, when it does.
    pub probe_failed: Option<String>,
}

/// One model's numbers behind its healthy core checks.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadingsView {
    pub scope: String,
    /// One line each: `P95 inter-token latency: 48.6 ms, baseline 48.5 ms (needs >= 1.5x baseline or > 100 ms: not met)`.
    pub lines: Vec<String>,
    /// The PromQL behind each, as (signal, query).
    pub queries: Vec<(String, String)>,
}

/// A change no rule explains, worded once.
#[derive(Debug, Clone, PartialEq)]
pub struct UnexplainedView {
    /// `P95 time to first token up 2.4x (robust z 31) on Qwen2.5-7B-Instruct since 09:12:00 UTC
    /// (18 min, ongoing): 1.9 s vs 800 ms`.
    pub line: String,
    /// `P95 time to first token up 2.4x on Qwen2.5-7B-Instruct since 09:12 UTC: 1.9 s vs 800 ms`:
    /// the answer's form.
    pub brief: String,
    /// The signal's id and its scope as findings write it (JUnit names a test case with them).
    pub signal: String,
    pub scope: String,
    /// The PromQL at every step.
    pub query: String,
}

/// How many changes no rule explains the compact text lists (the rest: `-v`, JSON).
pub const UNEXPLAINED_LISTED: usize = 3;

/// The rule pack's coverage in rules (not rule/scope pairs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RuleCounts {
    /// Rules in the pack, without those disabled in the configuration.
    pub total: usize,
    /// Rules that gave a verdict for at least one scope.
    pub evaluated: usize,
    /// Of those, rules that found nothing in any scope (neither a finding nor part of one).
    pub healthy: usize,
    /// Rules that gave no verdict in any scope: `total - evaluated`.
    pub not_evaluated: usize,
    /// Rules that gave a verdict in some scopes and could not be evaluated in others.
    pub partly_evaluated: usize,
}

/// Where the numbers come from and what was compared, in UTC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The window, with `ended 12 min ago` on a live run.
    pub window: String,
    /// The window without a relative hint: the same bytes whenever it is rendered.
    pub window_exact: String,
    pub baseline: String,
    /// `the 30m before` when the baseline ends where the window starts, else the baseline range.
    pub baseline_brief: String,
    /// `prometheus`, `replay`, ...
    pub source_kind: String,
    /// The source URL, with any credentials removed.
    pub source_url: String,
    /// `{namespace="prod"}`, when a selector was given.
    pub selector: Option<String>,
    /// `vLLM v1 metric names; model_name: a, b`.
    pub metrics: String,
    /// `5 replicas by instance · 5 pods`, when the fleet's size is known.
    pub fleet: Option<String>,
    /// `5 replicas` alone, when the fleet's size is known.
    pub replicas: Option<String>,
    /// How long ago the window ended (`12 min ago`), on a live run only.
    pub ended: Option<String>,
}

/// `5 rule/scope pairs` checked and healthy, and the rules they belong to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthyView {
    pub pairs: String,
    pub rules: Vec<String>,
}

/// A rule/scope pair that could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotEvaluatedView {
    pub rule: String,
    pub scope: String,
    pub reason: String,
}

impl ReportView {
    /// The one place a report becomes what is shown. `opts` contributes only `now` (relative time
    /// hints on live runs) and `fail_on`; colour and width are the renderers' business.
    pub fn new(report: &Report, opts: &RenderOptions) -> Self {
        let scopes = ScopeStyle::for_report(report);
        ReportView {
            verdict: verdict(report),
            worst: report.worst_severity(),
            headline: headline(report),
            header: header(report, &scopes, opts.now.as_ref()),
            coverage: coverage_phrase(report),
            core_missing: core_sentence(report),
            core_brief: core_brief(report),
            nothing_evaluated: report.stats.rules_evaluated == 0,
            conclusion: no_findings_sentence(report),
            findings: report.findings.iter().enumerate().map(|(i, f)| finding(report, f, i + 1, &scopes, opts)).collect(),
            healthy: healthy_summary(report, &scopes).map(|(pairs, rules)| HealthyView { pairs, rules }),
            healthy_pairs: report.healthy.iter().map(|c| (one_line(&c.rule), scopes.format(&c.scope))).collect(),
            not_evaluated: not_evaluated_lines(report, &scopes).into_iter().map(|(rule, scope, reason)| NotEvaluatedView { rule, scope, reason }).collect(),
            not_evaluated_heading: not_evaluated_heading(report.not_evaluated.len()),
            disabled: report.disabled.iter().map(|r| one_line(r)).collect(),
            disabled_line: disabled_line(report),
            warnings: warning_lines(report),
            caveats: report.caveats.iter().map(|c| one_line(c)).collect(),
            query_timing: query_timing(report),
            scope_all: scopes.format(&Scope::new()),
            fail_on: opts.fail_on,
            fail_on_unexplained: opts.fail_on_unexplained,
            window_range: report.window,
            baseline_range: report.baseline,
            timeline: timeline(report, &scopes, opts.now.as_ref()),
            timeline_heading: timeline_heading(report),
            timeline_more: (report.events.len() > TIMELINE_LISTED)
                .then(|| format!("... and {} more (see --format json)", report.events.len() - TIMELINE_LISTED)),
            rules: rule_counts(report),
            gaps: report.gaps().then(|| gap_phrase(report)),
            not_evaluated_brief: not_evaluated_brief(report),
            unexplained: report
                .unexplained
                .iter()
                .map(|u| UnexplainedView {
                    line: super::unexplained_line(report, u, &scopes),
                    brief: super::unexplained_brief(report, u, &scopes),
                    signal: one_line(&u.signal),
                    scope: scopes.format(&u.scope),
                    query: one_line(&u.query),
                })
                .collect(),
            profile: report.profile.as_deref().map(one_line).filter(|p| !p.is_empty()),
            notes: report.notes.iter().map(|n| one_line(n)).collect(),
            partly_evaluated: partly_evaluated(report),
            readings: report
                .readings
                .iter()
                .map(|r| ReadingsView {
                    scope: scopes.format(&r.scope),
                    lines: r.evidence.iter().map(reading_line).collect(),
                    queries: r.evidence.iter().filter(|e| !e.query.trim().is_empty()).map(|e| (one_line(&e.signal), one_line(&e.query))).collect(),
                })
                .collect(),
            hops: super::hops::views(report, &scopes),
            probe: report.probe.as_ref().map(super::probe::evidence_lines).unwrap_or_default(),
            probe_failed: report.probe.as_ref().and_then(super::probe::failed_clause),
        }
    }

    /// `profile chat`: the latency profile whose targets the rules used, or `profile not recorded`
    /// for a report that does not say.
    pub fn profile_phrase(&self) -> String {
        match &self.profile {
            Some(p) => format!("profile {p}"),
            None => "profile not recorded".to_string(),
        }
    }

    /// The events the text formats list, oldest first.
    pub fn timeline_listed(&self) -> impl Iterator<Item = &EventView> {
        self.timeline.iter().filter(|e| e.listed)
    }

    /// `2 rule/scope pairs`: how many could not be evaluated.
    pub fn not_evaluated_pairs(&self) -> String {
        plural(self.not_evaluated.len(), "rule/scope pair", "rule/scope pairs")
    }

    /// Whether a finding of `severity` fails the run under `--fail-on`.
    pub fn fails(&self, severity: Severity) -> bool {
        self.fail_on.is_some_and(|bar| severity >= bar)
    }
}

impl Header {
    /// `prometheus http://prom:9090, selector {namespace="prod"}`.
    pub fn source_line(&self) -> String {
        match &self.selector {
            Some(sel) => format!("{} {}, selector {sel}", self.source_kind, self.source_url),
            None => format!("{} {}", self.source_kind, self.source_url),
        }
    }
}

fn header(report: &Report, scopes: &ScopeStyle, now: Option<&DateTime<Utc>>) -> Header {
    let (source_kind, source_url, selector) = describe_source(report);
    let baseline_brief = if report.baseline.end == report.window.start {
        format!("the {} before", describe_duration(&report.baseline))
    } else {
        describe_range(&report.baseline)
    };
    Header {
        window: describe_range_at(&report.window, now),
        window_exact: describe_range(&report.window),
        baseline: describe_range(&report.baseline),
        baseline_brief,
        source_kind,
        source_url,
        selector,
        metrics: format!("vLLM {}; {}", describe_generation(&report.metrics.generation), scopes.describe_seen(&report.metrics.scopes)),
        fleet: describe_fleet(&report.metrics),
        replicas: super::words::describe_replicas(&report.metrics),
        ended: now.map(|n| super::words::ago(&report.window.end, n)),
    }
}

/// See [`ReportView::core_brief`]: the core checks and the kinds of their reasons.
fn core_brief(report: &Report) -> Option<String> {
    let core = &report.coverage.core_not_evaluated;
    let unread = &report.coverage.unread_targets;
    if core.is_empty() && unread.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !core.is_empty() {
        let kinds: std::collections::BTreeSet<String> =
            report.not_evaluated.iter().filter(|n| core.contains(&n.rule)).map(|n| one_line(&n.reason.brief())).collect();
        let ids: Vec<String> = core.iter().map(|r| one_line(r)).collect();
        let why = if kinds.is_empty() { String::new() } else { format!(" ({})", kinds.into_iter().collect::<Vec<_>>().join("; ")) };
        parts.push(format!("Core runbook checks not evaluated: {}{why}", ids.join(", ")));
    }
    if !unread.is_empty() {
        parts.push(format!("{} answered nothing", plural(unread.len(), "scrape target", "scrape targets")));
    }
    Some(format!("{}; what could not be seen is not known to be healthy", parts.join("; ")))
}

/// See [`RuleCounts`].
fn rule_counts(report: &Report) -> RuleCounts {
    let c = &report.coverage;
    let found: std::collections::BTreeSet<&str> =
        report.findings.iter().flat_map(|f| std::iter::once(f.rule.as_str()).chain(f.also_consistent.iter().map(|a| a.rule.as_str()))).collect();
    let partly = partly_evaluated(report).len();
    RuleCounts {
        total: c.rules,
        evaluated: c.evaluated,
        healthy: c.evaluated.saturating_sub(found.len()),
        not_evaluated: c.rules.saturating_sub(c.evaluated),
        partly_evaluated: partly,
    }
}

/// See [`ReportView::partly_evaluated`]: rules with a finding (or absorbed into one) or a healthy
/// verdict somewhere, and not evaluated somewhere else.
fn partly_evaluated(report: &Report) -> Vec<String> {
    let judged: std::collections::BTreeSet<&str> = report
        .findings
        .iter()
        .flat_map(|f| std::iter::once(f.rule.as_str()).chain(f.also_consistent.iter().map(|a| a.rule.as_str())))
        .chain(report.healthy.iter().map(|h| h.rule.as_str()))
        .collect();
    let partly: std::collections::BTreeSet<String> =
        report.not_evaluated.iter().filter(|n| judged.contains(n.rule.as_str())).map(|n| one_line(&n.rule)).collect();
    partly.into_iter().collect()
}

/// See [`ReportView::not_evaluated_brief`]: at most three rules by name; the reason (up to its
/// first `: `) when they all share one.
fn not_evaluated_brief(report: &Report) -> Option<String> {
    const NAMED: usize = 3;
    let mut rules: Vec<String> = Vec::new();
    let mut reasons: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut items: Vec<&crate::report::NotEvaluated> = report.not_evaluated.iter().collect();
    items.sort();
    for n in items {
        let rule = one_line(&n.rule);
        if !rules.contains(&rule) {
            rules.push(rule);
        }
        reasons.insert(one_line(&n.reason.brief()));
    }
    let mut names = rules.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", ");
    if rules.len() > NAMED {
        names.push_str(&format!(" and {} more", rules.len() - NAMED));
    }
    match (rules.len(), reasons.len()) {
        (0, _) => None,
        (_, 1) => Some(format!("{names} ({})", reasons.into_iter().next().unwrap_or_default())),
        _ => Some(names),
    }
}
