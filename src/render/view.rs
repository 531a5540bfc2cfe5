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

/// How many events the text formats list at most (the JSON has every one).
pub const TIMELINE_LISTED: usize = 12;

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

/// One finding, with every part a format may show.
#[derive(Debug, Clone, PartialEq)]
pub struct FindingView {
    /// 1 for the most important finding.
    pub rank: usize,
    pub severity: Severity,
    pub rule: String,
    pub title: String,
    /// The scope in full: `llama-3 (engine=1)`.
    pub scope: String,
    /// The scope with long model names shortened, for narrow places.
    pub scope_short: String,
    /// `None` when the rule has no summary.
    pub summary: Option<String>,
    pub evidence: Vec<EvidenceView>,
    /// The lower-confidence note of a finding decided through stand-in signals.
    pub stood_in: Option<String>,
    /// Its first clause, for the answer.
    pub stood_in_brief: Option<String>,
    /// The note of a finding decided over the window's last minutes only.
    pub recent: Option<String>,
    /// Its first clause, for the answer.
    pub recent_brief: Option<String>,
    /// `2 of 3 replicas (kv_usage_max >= 90%): a, b`.
    pub replicas: Option<String>,
    /// When the problem began: `Started 09:03 UTC (17 min ago)` (the relative part on live runs
    /// only) or `Present since before the window (09:00 UTC)`; `None` when no trend could tell.
    pub onset: Option<String>,
    /// The change it began after: `Began 2 min after a configuration change at 09:01:00 UTC:
    /// num_gpu_blocks 2000 -> 900 on 2 of 3 replicas`. Every format prints it right under the onset.
    pub preceded_by: Option<String>,
    /// A replica's cold start that turned the finding into info: `Cold start: ... (re)started at
    /// 08:54:00 UTC and was slow for its first 5 min (...), then as fast as its peers`.
    pub cold_start: Option<String>,
    /// Why the replica a finding names differs: `Why this replica: config: max_num_seqs 8 on a:8000,
    /// at least 27 on its peers: ...` (load, config or hardware).
    pub replica_cause: Option<String>,
    /// The correlations on the finding's scope, one line each (`KV-cache usage and P95 TTFT
    /// moved together ... (r = 0.93 over 58 points ...)`).
    pub correlations: Vec<String>,
    /// Those that point away from the finding's cause (the compact text shows only these).
    pub doubts: Vec<String>,
    pub recommendations: Vec<RecommendationView>,
    /// The levers the evidence rules out: `Won't help: more KV memory (...): ...`.
    pub wont_help: Vec<String>,
    /// The same levers without why: `more KV memory (--gpu-memory-utilization / ...)`.
    pub wont_help_levers: Vec<String>,
    /// The runbook's next steps that are still to be done, in order ([`crate::report::Step::is_open`]).
    pub steps: Vec<String>,
    /// The runbook's steps the metrics already answered, as checked statements with their numbers,
    /// in order.
    pub checked: Vec<String>,
    /// The first of them names the change the finding began after ([`Finding::first_step_names_its_change`]).
    pub first_step_names_change: bool,
    pub references: Vec<String>,
    /// Other rules that matched the same scope, explained better by this one.
    pub also_consistent: Vec<AlsoView>,
    /// The rule's own severity when an absorbed finding raised the finding's.
    pub raised_from: Option<Severity>,
    /// The PromQL behind the evidence, as (signal, query), for signals that have a query.
    pub queries: Vec<(String, String)>,
    /// The evidence that decided it, by index, at most [`DECIDING`]: the signals whose condition
    /// held, in order, leaving out an alternative (`a or b`) to one already there.
    pub deciding: Vec<usize>,
    /// `since 08:50 UTC`, `since before the window (08:50 UTC)`, `08:50 to 09:05 UTC, now over`.
    pub since: Option<String>,
    /// How many replicas it affects, when the finding was broken down per replica.
    pub replicas_count: Option<ReplicaCount>,
    /// Which limit bound the finding's model over the window, in one sentence (the first finding
    /// of a model carries it; see [`binding_sentence`]).
    pub binding: Option<String>,
    /// The rules that could not be evaluated on the finding's model (or for every scope), which
    /// might have told another story there: `priority-preemption (metric missing in the window:
    /// vllm:num_preemptions_by_reason_total)`. Rules of no scope are left to the count.
    pub not_evaluated_here: Vec<String>,
}

/// See [`FindingView::replicas_count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaCount {
    /// The per-replica breakdown could not be read.
    NotEvaluated,
    Of {
        affected: usize,
        total: usize,
    },
}

/// How many evidence rows the text format shows for a finding at most.
pub const DECIDING: usize = 4;

/// One evidence signal: its numbers as text, its condition, and its course when recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceView {
    pub signal: String,
    pub title: String,
    pub value: String,
    pub baseline: String,
    /// `2.4x`, when both numbers exist and the baseline is positive.
    pub change: Option<String>,
    /// The condition as written; empty for a signal shown for context only.
    pub condition: String,
    /// The part of the condition on this signal alone: `>= 50%` of `>= 50% or (see preemption_recent)`.
    pub condition_own: String,
    /// The condition with the other signals it names written out: `>= 50% or share of the last 5
    /// min with preemptions >= 50%`.
    pub condition_words: String,
    /// The condition in structure, which the words above are made from.
    pub threshold: crate::report::Threshold,
    pub held: bool,
    /// The window's value is 0 for a signal the rule wants high somewhere (a share above a line):
    /// whatever its condition says (a guard such as `abort_share <= 0` holds there), nothing of it
    /// was seen, so it is never a number that decided a finding. A 0 that crossed a line from above
    /// (`up_min < 1`) still decides.
    pub zero: bool,
    /// Where its own comparison did not hold but an alternative on another signal did (`itl_p95 >=
    /// 1.5x baseline or ttft_p95 >= 2x baseline`), that signal's title: the line held through it.
    pub held_via: Option<String>,
    /// `low confidence (14 obs)`.
    pub confidence: Option<String>,
    /// `▁▂▁│▅▇█`: baseline and window on one scale, when the signal carries a trend.
    pub sparkline: Option<String>,
    /// The trend itself, for formats that draw charts.
    pub trend: Option<TrendView>,
    /// A chart of the evidence query over the window on the backend (see [`super::links`]), when
    /// the run has links.
    pub link: Option<String>,
}

/// The points of an evidence signal over the baseline and the window, with the limits applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendView {
    pub unit: String,
    pub step_seconds: u64,
    /// (unix seconds, value), possibly with gaps and non-finite values.
    pub baseline: Vec<(f64, f64)>,
    pub window: Vec<(f64, f64)>,
    /// The thresholds the rule applied to this signal, finite ones only, labelled.
    pub limits: Vec<(String, f64)>,
    /// The evaluated values, so a chart's scale includes them.
    pub value: Option<f64>,
    pub baseline_value: Option<f64>,
    /// On the finding's leading signal: when it left its baseline (unix seconds, in the window), and
    /// the time as a label (`09:03`), for a marker on its chart.
    pub onset: Option<(f64, String)>,
    /// Likewise, when the problem was over (the finding's `ended`), on the same chart.
    pub ended: Option<(f64, String)>,
    /// The events of the finding's scope (or of no scope) in the baseline or the window, oldest
    /// first, for markers on the chart.
    pub events: Vec<ChartEvent>,
}

/// An event drawn on a finding's chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartEvent {
    /// Unix seconds.
    pub at: f64,
    /// Its kind, the marker's label (the time is in `line`).
    pub kind: EventKind,
    /// The event's one-line form, for a tooltip.
    pub line: String,
    /// The change the finding began after (its `preceded_by`): drawn emphasised.
    pub lead: bool,
}

/// Where an event falls among the compared ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Baseline,
    Window,
    /// Between a baseline and a window that do not adjoin, or outside both.
    Outside,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Baseline => "baseline",
            Phase::Window => "window",
            Phase::Outside => "outside",
        }
    }
}

/// One change event, worded once.
#[derive(Debug, Clone, PartialEq)]
pub struct EventView {
    /// `09:01:15 UTC` (with its date when not on the window's first day), with `(17 min ago)` on
    /// live runs.
    pub time: String,
    /// Unix seconds, for charts.
    pub at: f64,
    pub kind: EventKind,
    /// The scope as finding scopes are written: `llama-3`, or `all` for an event tied to no scope.
    pub scope: String,
    /// The scope with long model names shortened.
    pub scope_short: String,
    /// `2 of 3 replicas restarted`, `num_gpu_blocks 2000 -> 900 on 2 of 3 replicas`.
    pub detail: String,
    pub phase: Phase,
    /// The ranks of the findings that began after it.
    pub explains: Vec<usize>,
    /// Its place in the order the text formats keep events when they cannot show every one, 0 for
    /// the first kept: what a finding began after, then the window's newest, then the baseline's.
    pub relevance: usize,
    /// Whether the text formats list it: one of the [`TIMELINE_LISTED`] most relevant.
    pub listed: bool,
    /// `09:01:15 UTC config-change (llama-3): num_gpu_blocks 2000 -> 900 on 2 of 3 replicas`.
    pub line: String,
    /// The same with the short scope, for narrow places.
    pub line_short: String,
    /// [`EventView::line`] without the relative hint: the same bytes whenever it is rendered.
    pub line_exact: String,
}

/// `Suggested max_num_seqs = 37`, then how it was computed and its caveat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecommendationView {
    pub head: String,
    pub how: String,
    /// `Suggested max_num_seqs = 15: 17 running sequences per replica used 96.7% of the KV cache
    /// on average: 17 x 90% headroom / 96.7% = 15 sequences per replica`: the head and the first
    /// sentence of how, without the cross-checks and the caveat.
    pub brief: String,
    /// The experiment card: `--max-num-seqs: unknown → 15 · trade-off: ... · confidence high: ...`.
    pub card: Option<String>,
    /// The card without trade-off and basis, for the compact text: `--max-num-seqs: unknown → 15 · confidence high`.
    pub card_brief: Option<String>,
}

/// A rule that also matched the finding's scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlsoView {
    pub rule: String,
    pub title: String,
    pub severity: Severity,
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

impl FindingView {
    /// `rule-a (warning), rule-b (info)`, each rule id written by `id` (a code span, say). Where
    /// one of them raised the finding's severity, it says so: `slo-burn (critical: raises this
    /// finding from warning)`.
    pub fn also_consistent_list(&self, id: impl Fn(&str) -> String) -> Option<String> {
        if self.also_consistent.is_empty() {
            return None;
        }
        let raiser = self.raised_from.and_then(|_| self.also_consistent.iter().position(|a| a.severity == self.severity));
        Some(
            self.also_consistent
                .iter()
                .enumerate()
                .map(|(i, a)| match (raiser == Some(i), self.raised_from) {
                    (true, Some(from)) => format!("{} ({}: raises this finding from {from})", id(&a.rule), a.severity),
                    _ => format!("{} ({})", id(&a.rule), a.severity),
                })
                .collect::<Vec<_>>()
                .join(", "),
        )
    }
}

impl EvidenceView {
    /// Held to a condition (rather than shown for context) and the condition held.
    pub fn held_condition(&self) -> bool {
        self.held && !self.condition.is_empty()
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

fn finding(report: &Report, f: &Finding, rank: usize, scopes: &ScopeStyle, opts: &RenderOptions) -> FindingView {
    let now = opts.now.as_ref();
    let mut evidence: Vec<EvidenceView> = f.evidence.iter().map(|e| evidence(report, e, opts.links.as_ref())).collect();
    if let Some(signal) = &f.onset_signal {
        if let Some(trend) = evidence.iter_mut().find(|e| &e.signal == signal).and_then(|e| e.trend.as_mut()) {
            let mark = |t: &DateTime<Utc>| (t.timestamp_millis() as f64 / 1000.0, onset_clock(&report.window, t));
            // A problem there before the window has no onset to mark, but may have an end.
            trend.onset = f.onset.as_ref().map(mark);
            trend.ended = f.ended.as_ref().map(mark);
        }
    }
    let markers = chart_events(report, f, scopes);
    for trend in evidence.iter_mut().filter_map(|e| e.trend.as_mut()) {
        trend.events = markers.clone();
    }
    let named: Vec<Named> = evidence.iter().map(|e| (e.signal.clone(), e.title.clone(), e.threshold.clone())).collect();
    for e in &mut evidence {
        e.condition_words = condition_in_words(&e.threshold, &e.signal, &named);
    }
    let held: Vec<(String, String)> = evidence.iter().filter(|e| e.held_condition()).map(|e| (e.signal.clone(), e.title.clone())).collect();
    for e in evidence.iter_mut().filter(|e| !e.held && !e.condition.is_empty()) {
        let alts = super::condition::alternatives(&e.threshold);
        e.held_via = held.iter().find(|(s, _)| alts.contains(s)).map(|(_, t)| t.clone());
    }
    let deciding = deciding(&evidence);
    FindingView {
        rank,
        severity: f.severity,
        rule: one_line(&f.rule),
        title: one_line(&f.title),
        scope: scopes.format(&f.scope),
        scope_short: scopes.compact(&f.scope),
        summary: (!f.summary.trim().is_empty()).then(|| one_line(&f.summary)),
        evidence,
        stood_in: stood_in_line(f).map(|(_, whole)| whole),
        stood_in_brief: stood_in_line(f).map(|(brief, _)| brief),
        recent: recent_line(report, f).map(|(_, whole)| whole),
        recent_brief: recent_line(report, f).map(|(brief, _)| brief),
        replicas: replicas_line(f),
        onset: onset_line(report, f, now),
        preceded_by: f.preceded_by.as_ref().map(|p| capitalised(&one_line(&p.text))).filter(|s| !s.is_empty()),
        cold_start: f.cold_start.as_ref().map(|c| capitalised(&one_line(&c.text))),
        replica_cause: f.replica_cause.as_ref().map(|c| format!("Why this replica: {}", one_line(&c.text))),
        correlations: f.correlations.iter().map(|c| capitalised(&one_line(&c.text))).collect(),
        doubts: f.correlations.iter().filter(|c| !c.supports).map(|c| capitalised(&one_line(&c.text))).collect(),
        recommendations: recommendation_lines(f)
            .into_iter()
            .zip(&f.recommendations)
            .map(|((head, how), r)| {
                let first = one_line(&r.arithmetic);
                let first = first.split(". ").next().unwrap_or_default().trim_end_matches('.').to_string();
                let brief = if first.is_empty() { head.clone() } else { format!("{head}: {first}") };
                let (card, card_brief) = card_lines(r).unzip();
                RecommendationView { head, how, brief, card, card_brief }
            })
            .collect(),
        wont_help: wont_help_lines(f),
        wont_help_levers: f.wont_help.iter().map(|w| format!("{} ({})", one_line(&w.lever), one_line(&w.flag))).collect(),
        steps: f.steps.open().map(|s| one_line(&s.text())).collect(),
        // What the data showed first, what it found none of after.
        checked: f
            .steps
            .answered()
            .filter(|a| a.verdict != crate::report::StepVerdict::None)
            .chain(f.steps.answered().filter(|a| a.verdict == crate::report::StepVerdict::None))
            .map(|a| one_line(&a.text()))
            .collect(),
        first_step_names_change: f.first_step_names_its_change(),
        references: f.references.iter().map(|r| one_line(r)).collect(),
        also_consistent: f.also_consistent.iter().map(|a| AlsoView { rule: one_line(&a.rule), title: one_line(&a.title), severity: a.severity }).collect(),
        raised_from: f.raised_from,
        queries: finding_queries(f),
        deciding,
        since: since(report, f),
        replicas_count: f.replicas.as_ref().and_then(|r| match &r.not_evaluated {
            Some(_) => Some(ReplicaCount::NotEvaluated),
            None => (r.total > 0).then_some(ReplicaCount::Of { affected: r.affected.len(), total: r.total }),
        }),
        binding: binding_of(report, f).filter(|_| first_of_its_model(report, f, rank)).map(binding_sentence),
        not_evaluated_here: not_evaluated_here(report, f),
    }
}

/// `KV-cache usage (peak): 59%, baseline 55% (needs >= 90%: not met)`.
fn reading_line(e: &Evidence) -> String {
    let w = evidence_words(e);
    format!("{}: {}, baseline {} (needs {}: {})", w.title, w.value, w.baseline, w.condition_own, if w.held { "met" } else { "not met" })
}

/// See [`FindingView::not_evaluated_here`]: pairs whose scope is part of the finding's, not empty.
fn not_evaluated_here(report: &Report, f: &Finding) -> Vec<String> {
    let mut items: Vec<&crate::report::NotEvaluated> =
        report.not_evaluated.iter().filter(|n| !n.scope.is_empty() && n.scope.iter().all(|(k, v)| f.scope.get(k) == Some(v))).collect();
    items.sort();
    let mut out: Vec<String> = Vec::new();
    for n in items {
        // The reason's kind (`metric missing in the window`), the metrics in -v.
        let line = format!("{} ({})", one_line(&n.rule), one_line(&n.reason.brief()));
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
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

/// The model-level binding of a finding's scope (its grouping labels; a replica label the finding
/// names is left aside).
fn binding_of<'a>(report: &'a Report, f: &Finding) -> Option<&'a crate::report::Binding> {
    let replica = &report.metrics.replica_label;
    report.binding.iter().find(|b| !b.scope.contains_key(replica) && b.scope.iter().all(|(k, v)| f.scope.get(k) == Some(v)))
}

/// Whether no finding ranked before `rank` has the same model-level binding.
fn first_of_its_model(report: &Report, f: &Finding, rank: usize) -> bool {
    let mine = binding_of(report, f).map(|b| &b.scope);
    report.findings.iter().take(rank - 1).all(|g| binding_of(report, g).map(|b| &b.scope) != mine)
}

/// "Bound by max_num_seqs for 82% of the window; a typical step: 32 of 32 running, KV at 41%, 45
/// waiting" (the medians over the steps it held).
pub fn binding_sentence(b: &crate::report::Binding) -> String {
    use crate::report::LimitKind as L;
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let n = |x: f64| if (x - x.round()).abs() < 0.05 { format!("{}", x.round()) } else { format!("{x:.1}") };
    let share = pct(b.share);
    let Some(t) = &b.typical else { return format!("Bound by {} for {share} of the window", b.limit.name()) };
    let kv = t.kv_usage.map(|k| format!("KV at {}", pct(k)));
    let running = match t.running_cap {
        Some(cap) => format!("{} of {} running", n(t.running), n(cap)),
        None => format!("{} running", n(t.running)),
    };
    let waiting = format!("{} waiting", n(t.waiting));
    let join = |parts: Vec<Option<String>>| parts.into_iter().flatten().collect::<Vec<_>>().join(", ");
    match b.limit {
        L::MaxNumSeqs => format!("Bound by max_num_seqs for {share} of the window; a typical step: {}", join(vec![Some(running), kv, Some(waiting)])),
        // The batch's plateau under KV pressure is the cache's doing, not a cap: the count alone.
        L::KvCache => format!(
            "Bound by the KV cache for {share} of the window; a typical step: {}",
            join(vec![kv, Some(format!("{} running", n(t.running))), Some(waiting)])
        ),
        L::MaxNumBatchedTokens => format!(
            "Bound by max_num_batched_tokens for {share} of the window: engine steps at the token budget; a typical step: {}",
            join(vec![Some(running), kv, Some(waiting)])
        ),
        L::Deferred => {
            format!("Requests deferred (waiting, not for capacity) for {share} of the window; a typical step: {}", join(vec![Some(running), kv, Some(waiting)]))
        }
        L::Stalled => format!("Stalled for {share} of the window; a typical step: {}, no tokens generated", join(vec![Some(running), Some(waiting)])),
        L::None => "No limit bound: no request waited in the window".to_string(),
    }
}

/// The evidence rows that decided a finding (see [`FindingView::deciding`]).
fn deciding(evidence: &[EvidenceView]) -> Vec<usize> {
    let mut chosen: Vec<usize> = Vec::new();
    let mut covered: Vec<String> = Vec::new();
    for (i, e) in evidence.iter().enumerate().filter(|(_, e)| e.held_condition() && !e.zero) {
        if chosen.len() == DECIDING {
            break;
        }
        if covered.contains(&e.signal) {
            continue;
        }
        covered.extend(alternatives(&e.threshold));
        chosen.push(i);
    }
    chosen
}

/// `since 08:50 UTC` (see [`FindingView::since`]).
fn since(report: &Report, f: &Finding) -> Option<String> {
    let clock = |t: &DateTime<Utc>| format!("{} UTC", onset_clock(&report.window, t));
    match (f.onset, f.ended) {
        (Some(t), None) => Some(format!("since {}", clock(&t))),
        (Some(t), Some(end)) => Some(format!("{} to {}, now over", clock(&t), clock(&end))),
        (None, None) if f.present_before_window() => Some(format!("since before the window ({})", clock(&report.window.start))),
        (None, Some(end)) if f.present_before_window() => Some(format!("from before the window to {}, now over", clock(&end))),
        _ => None,
    }
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

fn evidence(report: &Report, e: &Evidence, links: Option<&GraphLinks>) -> EvidenceView {
    let trend = e.series.as_ref().map(|s| TrendView {
        unit: e.unit.clone(),
        step_seconds: s.step_seconds,
        baseline: s.baseline.clone(),
        window: s.window.clone(),
        limits: e.limits.iter().filter(|l| l.value.is_finite()).map(|l| (one_line(&l.label), l.value)).collect(),
        value: e.value,
        baseline_value: e.baseline,
        onset: None,
        ended: None,
        events: Vec::new(),
    });
    let link = links.filter(|_| !e.query.trim().is_empty()).map(|l| l.link(&report.source.url, &e.query, &report.window));
    EvidenceView { sparkline: evidence_sparkline(report, e), trend, link, ..evidence_words(e) }
}

/// `09:03` (with seconds when the time has them, with the date when the window spans two days).
fn onset_clock(window: &TimeRange, t: &DateTime<Utc>) -> String {
    let clock = if t.timestamp() % 60 == 0 { "%H:%M" } else { "%H:%M:%S" };
    if window.start.date_naive() == window.end.date_naive() {
        t.format(clock).to_string()
    } else {
        t.format(&format!("%Y-%m-%d {clock}")).to_string()
    }
}

/// `Started 09:03 UTC (17 min ago)`, `Present since before the window (09:00 UTC)`, or `None`;
/// with `; over since 09:15 UTC (5 min ago): P95 time to first token back at its baseline level`
/// (`back within its limits` for a problem present before the window) when the problem was over
/// before the window's end.
fn onset_line(report: &Report, f: &Finding, now: Option<&DateTime<Utc>>) -> Option<String> {
    let at = |t: &DateTime<Utc>| match now {
        Some(now) => format!("{} UTC ({})", onset_clock(&report.window, t), ago(t, now)),
        None => format!("{} UTC", onset_clock(&report.window, t)),
    };
    let title = f.evidence.iter().find(|e| Some(&e.signal) == f.onset_signal.as_ref()).map_or("its leading signal", |e| e.title.as_str());
    match f.onset {
        Some(t) => Some(match &f.ended {
            Some(end) => format!("Started {}; over since {}: {title} back at its baseline level", at(&t), at(end)),
            None => format!("Started {}", at(&t)),
        }),
        None if f.present_before_window() => {
            let since = format!("Present since before the window ({} UTC)", onset_clock(&report.window, &report.window.start));
            Some(match &f.ended {
                // The baseline may hold the same problem, so only the limits say it is over.
                Some(end) => format!("{since}; over since {}: {title} back within its limits", at(end)),
                None => since,
            })
        }
        None => None,
    }
}

/// `Began 2 min after ...` from `began 2 min after ...`.
fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn phase(report: &Report, t: &DateTime<Utc>) -> Phase {
    let within = |r: &TimeRange| r.start <= *t && *t <= r.end;
    if within(&report.window) {
        Phase::Window
    } else if within(&report.baseline) {
        Phase::Baseline
    } else {
        Phase::Outside
    }
}

/// Whether an event concerns a finding's scope: every label of its scope is the finding's (an
/// event tied to no scope concerns every finding), as the correlate stage decides it.
fn concerns(e: &Event, f: &Finding) -> bool {
    e.scope.iter().all(|(k, v)| f.scope.get(k) == Some(v))
}

/// `09:01:15 UTC config-change (llama-3): num_gpu_blocks 2000 -> 900`.
fn event_line(time: &str, kind: EventKind, scope: &str, detail: &str) -> String {
    if detail.is_empty() {
        format!("{time} {kind} ({scope})")
    } else {
        format!("{time} {kind} ({scope}): {detail}")
    }
}

/// Every event of the report worded once, oldest first, each marked listed or not.
fn timeline(report: &Report, scopes: &ScopeStyle, now: Option<&DateTime<Utc>>) -> Vec<EventView> {
    let mut events: Vec<&Event> = report.events.iter().collect();
    events.sort_by_key(|e| e.time);
    let mut views: Vec<EventView> = events
        .iter()
        .map(|e| {
            let exact = describe_instant(&e.time, &report.window.start);
            let time = match now {
                Some(now) => format!("{exact} ({})", ago(&e.time, now)),
                None => exact.clone(),
            };
            let (scope, scope_short, detail) = (scopes.format(&e.scope), scopes.compact(&e.scope), one_line(&e.detail));
            let explains =
                report.findings.iter().enumerate().filter(|(_, f)| f.preceded_by.as_ref().is_some_and(|p| p.event == **e)).map(|(i, _)| i + 1).collect();
            EventView {
                line: event_line(&time, e.kind, &scope, &detail),
                line_short: event_line(&time, e.kind, &scope_short, &detail),
                line_exact: event_line(&exact, e.kind, &scope, &detail),
                time,
                at: e.time.timestamp_millis() as f64 / 1000.0,
                kind: e.kind,
                scope,
                scope_short,
                detail,
                phase: phase(report, &e.time),
                explains,
                relevance: 0,
                listed: true,
            }
        })
        .collect();
    // What a finding began after, then the window's newest, then the baseline's newest.
    let mut order: Vec<usize> = (0..views.len()).collect();
    order.sort_by_key(|&i| (views[i].explains.is_empty(), views[i].phase != Phase::Window, std::cmp::Reverse(i)));
    for (relevance, i) in order.into_iter().enumerate() {
        views[i].relevance = relevance;
        views[i].listed = relevance < TIMELINE_LISTED;
    }
    views
}

/// `Timeline: 6 changes (3 in the baseline, 3 in the window), oldest first`, or `None`.
fn timeline_heading(report: &Report) -> Option<String> {
    let n = report.events.len();
    if n == 0 {
        return None;
    }
    let count = |p: Phase| report.events.iter().filter(|e| phase(report, &e.time) == p).count();
    let parts: Vec<String> = [(Phase::Baseline, "in the baseline"), (Phase::Window, "in the window"), (Phase::Outside, "outside both")]
        .into_iter()
        .map(|(p, words)| (count(p), words))
        .filter(|(k, _)| *k > 0)
        .map(|(k, words)| format!("{k} {words}"))
        .collect();
    Some(match parts.as_slice() {
        [_] if n == 1 => format!("Timeline: 1 change, {}", parts[0].trim_start_matches("1 ")),
        [only] => format!("Timeline: {n} changes, all {}, oldest first", only.trim_start_matches(&format!("{n} "))),
        _ => format!("Timeline: {n} changes ({}), oldest first", parts.join(", ")),
    })
}

/// The markers on a finding's charts: the events of its scope in the baseline or the window.
fn chart_events(report: &Report, f: &Finding, scopes: &ScopeStyle) -> Vec<ChartEvent> {
    let mut events: Vec<&Event> = report.events.iter().filter(|e| concerns(e, f) && phase(report, &e.time) != Phase::Outside).collect();
    events.sort_by_key(|e| e.time);
    events
        .into_iter()
        .map(|e| ChartEvent {
            at: e.time.timestamp_millis() as f64 / 1000.0,
            kind: e.kind,
            line: event_line(&describe_instant(&e.time, &report.window.start), e.kind, &scopes.format(&e.scope), &one_line(&e.detail)),
            lead: f.preceded_by.as_ref().is_some_and(|p| p.event == *e),
        })
        .collect()
}

/// One evidence item worded for people: title, numbers (bounds as `< x` / `≥ x`: a quantile
/// `histogram_quantile` put at the largest finite bound is at least that), change,
/// condition and confidence. The view adds the sparkline and the trend.
pub(crate) fn evidence_words(e: &Evidence) -> EvidenceView {
    use super::own_condition;
    use crate::report::Bound;
    use crate::units;
    let fmt = |v: Option<f64>, bound: Option<Bound>| match (v, bound) {
        (_, Some(Bound::Below(b))) => format!("< {}", units::format_value(b, &e.unit)),
        (_, Some(Bound::Above(b))) => format!("≥ {}", units::format_value(b, &e.unit)),
        (Some(x), None) => units::format_value(x, &e.unit),
        (None, None) => "no data".to_string(),
    };
    let confidence = e.low_confidence.then(|| match e.observations {
        Some(n) if n.is_finite() => format!("low confidence ({n:.0} obs)"),
        _ => "low confidence".to_string(),
    });
    let title = if e.title.trim().is_empty() { e.signal.clone() } else { e.title.clone() };
    // Values only known as bounds are never divided as if they were measurements.
    let change = match (e.same_bucket, e.value_bound, e.baseline_bound, e.value, e.baseline) {
        (true, _, _, _, _) => Some("same bucket".to_string()),
        (false, Some(Bound::Above(v)), None, _, Some(b)) if b > 0.0 => Some(format!("≥ {}x", units::sig(v / b))),
        (false, None, Some(Bound::Below(b)), Some(v), _) if b > 0.0 => Some(format!("> {}x", units::sig(v / b))),
        (false, Some(Bound::Below(v)), None, _, Some(b)) if b > 0.0 => Some(format!("< {}x", units::sig(v / b))),
        (false, None, Some(Bound::Above(b)), Some(v), _) if b > 0.0 => Some(format!("≤ {}x", units::sig(v / b))),
        (false, None, None, v, b) => units::format_ratio(v, b),
        _ => None,
    };
    EvidenceView {
        signal: one_line(&e.signal),
        title: one_line(&title),
        value: fmt(e.value, e.value_bound),
        baseline: fmt(e.baseline, e.baseline_bound),
        change,
        condition: one_line(&e.threshold.to_string()),
        condition_own: own_condition(&e.threshold),
        condition_words: one_line(&e.threshold.to_string()),
        threshold: e.threshold.clone(),
        held: e.passed,
        zero: e.value == Some(0.0) && e.limits.iter().any(|l| l.side.is_above()),
        held_via: None,
        confidence,
        sparkline: None,
        trend: None,
        link: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;
    use crate::render::{render, Format};
    use chrono::TimeZone;

    #[test]
    fn every_section_of_the_sample_report_is_in_the_view() {
        let v = ReportView::new(&sample_report(), &RenderOptions::default());
        assert_eq!(v.verdict, Verdict::Findings);
        assert_eq!(v.worst, Some(Severity::Critical));
        assert_eq!(v.headline, "2 findings (1 critical, 1 warning) · 6 of 8 rules evaluated");
        assert_eq!(v.coverage.as_deref(), Some("6 of 8 rules evaluated"));
        assert_eq!(v.header.window, "2026-01-15 09:00:00 → 09:30:00 UTC (30m)");
        assert_eq!(v.header.baseline_brief, "the 30m before");
        assert_eq!(v.header.source_line(), r#"prometheus http://prometheus.monitoring:9090, selector {namespace="inference-prod"}"#);
        assert!(v.header.fleet.as_deref().is_some_and(|f| f.starts_with("5 replicas by instance")));
        assert_eq!(v.findings.len(), 2);
        let kv = &v.findings[0];
        assert_eq!((kv.rank, kv.severity, kv.rule.as_str()), (1, Severity::Critical, "kv-cache-exhausted"));
        assert_eq!(kv.scope, "llama-3.1-70b-instruct");
        assert_eq!((kv.evidence[0].value.as_str(), kv.evidence[0].baseline.as_str()), ("99.1%", "62%"));
        assert!(kv.evidence[0].sparkline.is_some() && kv.evidence[0].trend.is_some());
        assert_eq!(kv.evidence[0].trend.as_ref().unwrap().limits, vec![("> 95%".to_string(), 0.95)]);
        assert!(kv.replicas.as_deref().is_some_and(|r| r.starts_with("2 of 3 replicas")));
        assert_eq!(kv.onset.as_deref(), Some("Started 09:03 UTC"));
        assert_eq!(v.findings[1].onset.as_deref(), Some("Present since before the window (09:00 UTC)"));
        assert_eq!(kv.recommendations[0].head, "Suggested max_num_seqs = 37");
        assert_eq!(kv.steps.len(), 3);
        assert_eq!(kv.also_consistent_list(|id| id.to_string()).as_deref(), Some("queue-backlog (warning), ttft-regression (info)"));
        // A finding raised by what it absorbed says which one raised it, and from what.
        let mut raised = kv.clone();
        raised.severity = Severity::Warning;
        raised.raised_from = Some(Severity::Info);
        assert_eq!(
            raised.also_consistent_list(|id| format!("`{id}`")).as_deref(),
            Some("`queue-backlog` (warning: raises this finding from info), `ttft-regression` (info)")
        );
        assert_eq!(kv.queries.len(), 2);
        assert_eq!(v.healthy.as_ref().map(|h| h.pairs.as_str()), Some("5 rule/scope pairs"));
        assert_eq!(v.healthy_pairs.len(), 5);
        assert_eq!(v.not_evaluated.len(), 2);
        assert_eq!(v.not_evaluated[0].rule, "kv-cache-exhausted", "sorted by rule");
        assert_eq!(v.not_evaluated_pairs(), "2 rule/scope pairs");
        assert_eq!(v.warnings, vec!["partial response: store 10.0.3.7:10901 unavailable (2 times)"]);
        assert_eq!(v.query_timing, "at 09:30:00 UTC (baseline: same query at 09:00:00 UTC)");
        assert!(v.disabled.is_empty() && v.disabled_line.is_none());
        assert_eq!(v.scope_all, "all");
    }

    #[test]
    fn disabled_rules_are_listed_by_name() {
        let mut r = clean_report();
        r.disabled = vec!["gpu-throttling".to_string(), "slow\ndecode".to_string()];
        let v = ReportView::new(&r, &RenderOptions::default());
        assert_eq!(v.disabled, vec!["gpu-throttling", "slow decode"]);
        assert_eq!(v.disabled_line.as_deref(), Some("Disabled in the configuration (not evaluated): gpu-throttling, slow decode"));
    }

    #[test]
    fn a_run_that_evaluated_nothing_has_no_all_clear_and_no_healthy_section() {
        let v = ReportView::new(&nothing_evaluated_report(), &RenderOptions::default());
        assert_eq!(v.verdict, Verdict::NothingEvaluated);
        assert!(v.headline.starts_with("nothing evaluated"), "{}", v.headline);
        assert!(v.healthy.is_none() && v.healthy_pairs.is_empty() && v.findings.is_empty());
        let c = v.conclusion.unwrap_or_default();
        assert!(c.starts_with("Nothing was evaluated") && c.contains("not an all-clear"), "{c}");
        assert_eq!(v.not_evaluated.len(), 2);
    }

    #[test]
    fn a_live_run_adds_the_relative_time_only_where_it_may() {
        let r = sample_report();
        let now = r.window.end + chrono::Duration::minutes(12);
        let v = ReportView::new(&r, &RenderOptions { now: Some(now), ..RenderOptions::default() });
        assert!(v.header.window.ends_with("ended 12 min ago)"), "{}", v.header.window);
        assert!(!v.header.window_exact.contains("ago") && !v.header.baseline.contains("ago"));
        assert_eq!(v.findings[0].onset.as_deref(), Some("Started 09:03 UTC (39 min ago)"));
        assert_eq!(v.findings[1].onset.as_deref(), Some("Present since before the window (09:00 UTC)"));
    }

    #[test]
    fn a_problem_over_before_the_windows_end_says_since_when_and_by_which_signal() {
        let mut r = sample_report();
        let f = &mut r.findings[0];
        f.onset_signal = Some(f.evidence[0].signal.clone());
        f.ended = Some(Utc.with_ymd_and_hms(2026, 1, 15, 9, 21, 0).unwrap());
        let title = f.evidence[0].title.clone();
        let v = ReportView::new(&r, &RenderOptions::default());
        assert_eq!(v.findings[0].onset.as_deref(), Some(format!("Started 09:03 UTC; over since 09:21 UTC: {title} back at its baseline level").as_str()));
        let now = r.window.end + chrono::Duration::minutes(12);
        let v = ReportView::new(&r, &RenderOptions { now: Some(now), ..RenderOptions::default() });
        assert_eq!(
            v.findings[0].onset.as_deref(),
            Some(format!("Started 09:03 UTC (39 min ago); over since 09:21 UTC (21 min ago): {title} back at its baseline level").as_str())
        );
    }

    #[test]
    fn a_problem_present_before_the_window_and_over_in_it_says_since_when_by_its_limits() {
        let mut r = sample_report();
        let f = &mut r.findings[1];
        f.onset_signal = Some(f.evidence[0].signal.clone());
        assert!(f.present_before_window());
        f.ended = Some(Utc.with_ymd_and_hms(2026, 1, 15, 9, 6, 0).unwrap());
        let title = f.evidence[0].title.clone();
        let v = ReportView::new(&r, &RenderOptions::default());
        assert_eq!(
            v.findings[1].onset.as_deref(),
            Some(format!("Present since before the window (09:00 UTC); over since 09:06 UTC: {title} back within its limits").as_str())
        );
        // Its chart marks the end, and no onset.
        let points = vec![(r.window.start.timestamp() as f64, 0.99), (r.window.end.timestamp() as f64, 0.4)];
        r.findings[1].evidence[0].series =
            Some(crate::report::Trend { step_seconds: 60, range_seconds: 180, query: "q".into(), baseline: points.clone(), window: points });
        let v = ReportView::new(&r, &RenderOptions::default());
        let trend = v.findings[1].evidence[0].trend.clone().expect("a trend");
        assert_eq!((trend.onset, trend.ended.map(|m| m.1)), (None, Some("09:06".to_string())));
    }

    #[test]
    fn the_onset_marks_the_leading_signals_trend_and_a_finding_without_one_says_nothing() {
        let mut r = sample_report();
        let points = vec![(r.window.start.timestamp() as f64, 0.6), (r.window.end.timestamp() as f64, 0.99)];
        r.findings[0].evidence[0].series =
            Some(crate::report::Trend { step_seconds: 60, range_seconds: 180, query: "q".into(), baseline: points.clone(), window: points });
        r.findings[1].onset_signal = None;
        let v = ReportView::new(&r, &RenderOptions::default());
        let marker = v.findings[0].evidence[0].trend.as_ref().and_then(|t| t.onset.clone());
        assert_eq!(marker, Some((r.findings[0].onset.unwrap().timestamp() as f64, "09:03".to_string())));
        assert_eq!(v.findings[0].evidence[0].trend.as_ref().and_then(|t| t.ended.clone()), None);
        assert_eq!(v.findings[1].onset, None);
        // A problem that was over is marked where it ended, on the same chart.
        let end = r.window.start + chrono::Duration::minutes(21);
        r.findings[0].ended = Some(end);
        let v = ReportView::new(&r, &RenderOptions::default());
        let marker = v.findings[0].evidence[0].trend.as_ref().and_then(|t| t.ended.clone());
        assert_eq!(marker, Some((end.timestamp() as f64, "09:21".to_string())));
    }

    #[test]
    fn credentials_never_reach_the_view() {
        let mut r = sample_report();
        r.source.url = "https://user:s3cret@prom.example:9090/".to_string();
        let v = ReportView::new(&r, &RenderOptions::default());
        assert_eq!(v.header.source_url, "https://prom.example:9090/");
    }

    #[test]
    fn the_timeline_words_every_event_once_oldest_first() {
        let mut r = sample_report_with_events();
        r.events.reverse();
        let v = ReportView::new(&r, &RenderOptions::default());
        let times: Vec<&str> = v.timeline.iter().map(|e| e.time.as_str()).collect();
        assert_eq!(times, ["08:44:00 UTC", "08:46:30 UTC", "08:58:00 UTC", "09:00:30 UTC", "09:01:00 UTC", "09:12:00 UTC"]);
        assert_eq!(v.timeline_heading.as_deref(), Some("Timeline: 6 changes (3 in the baseline, 3 in the window), oldest first"));
        assert_eq!(v.timeline_more, None);
        assert!(v.timeline.iter().all(|e| e.listed));
        let rollout = &v.timeline[2];
        assert_eq!((rollout.kind, rollout.scope.as_str(), rollout.phase), (EventKind::Rollout, "all", Phase::Baseline));
        assert_eq!(rollout.line, "08:58:00 UTC rollout (all): Deployment inference-prod/vllm-llama generation 7 -> 8");
        let config = &v.timeline[4];
        assert_eq!(config.phase, Phase::Window);
        assert_eq!((config.explains.clone(), config.relevance), (vec![1], 0));
        assert_eq!(config.line, "09:01:00 UTC config-change (llama-3.1-70b-instruct): num_gpu_blocks 2000 -> 900 on 2 of 3 replicas");
        assert!(v.timeline.iter().filter(|e| e.kind != EventKind::ConfigChange).all(|e| e.explains.is_empty()));
    }

    #[test]
    fn a_finding_says_which_change_it_began_after() {
        let v = ReportView::new(&sample_report_with_events(), &RenderOptions::default());
        assert_eq!(
            v.findings[0].preceded_by.as_deref(),
            Some("Began 2 min after a configuration change at 09:01:00 UTC: num_gpu_blocks 2000 -> 900 on 2 of 3 replicas")
        );
        assert_eq!(v.findings[1].preceded_by, None);
        assert!(v.findings[0].steps[0].starts_with("Start with the configuration change at 09:01:00 UTC"));
    }

    #[test]
    fn a_live_run_says_how_long_ago_each_event_was_and_the_exact_line_does_not() {
        let r = sample_report_with_events();
        let now = r.window.end + chrono::Duration::minutes(12);
        let v = ReportView::new(&r, &RenderOptions { now: Some(now), ..RenderOptions::default() });
        assert_eq!(v.timeline[4].time, "09:01:00 UTC (41 min ago)");
        assert!(v.timeline[4].line.starts_with("09:01:00 UTC (41 min ago) config-change"));
        assert!(v.timeline[4].line_exact.starts_with("09:01:00 UTC config-change"));
    }

    #[test]
    fn the_charts_mark_the_events_of_the_findings_scope_and_the_change_it_began_after() {
        let v = ReportView::new(&sample_report_with_events(), &RenderOptions::default());
        let trend = v.findings[0].evidence[0].trend.as_ref().expect("the sample's KV signal has a trend");
        let kinds: Vec<&str> = trend.events.iter().map(|e| e.kind.as_str()).collect();
        // The other model's restart at 09:12 is not this finding's.
        assert_eq!(kinds, ["target-down", "target-up", "rollout", "restart", "config-change"]);
        assert!(trend.events.windows(2).all(|w| w[0].at < w[1].at));
        let lead: Vec<EventKind> = trend.events.iter().filter(|e| e.lead).map(|e| e.kind).collect();
        assert_eq!(lead, [EventKind::ConfigChange]);
        assert!(trend.events[4].line.ends_with("num_gpu_blocks 2000 -> 900 on 2 of 3 replicas"));
    }

    #[test]
    fn a_long_timeline_lists_a_dozen_keeping_what_a_finding_began_after() {
        let mut r = sample_report_with_events();
        let template = r.events[0].clone();
        for i in 0..20 {
            let mut e = template.clone();
            e.time = r.baseline.start + chrono::Duration::seconds(30 + 60 * i);
            e.detail = format!("flap {i}");
            r.events.push(e);
        }
        let v = ReportView::new(&r, &RenderOptions::default());
        assert_eq!(v.timeline.len(), 26);
        let listed: Vec<&EventView> = v.timeline_listed().collect();
        assert_eq!(listed.len(), TIMELINE_LISTED);
        assert_eq!(v.timeline_more.as_deref(), Some("... and 14 more (see --format json)"));
        assert!(listed.windows(2).all(|w| w[0].at <= w[1].at), "oldest first");
        assert!(listed.iter().any(|e| e.kind == EventKind::ConfigChange), "the change a finding began after is listed");
        assert_eq!(listed.iter().filter(|e| e.phase == Phase::Window).count(), 3, "every window event is listed");
    }

    #[test]
    fn without_events_there_is_no_timeline() {
        let v = ReportView::new(&sample_report(), &RenderOptions::default());
        assert!(v.timeline.is_empty() && v.timeline_heading.is_none() && v.timeline_more.is_none());
        assert!(v.findings.iter().all(|f| f.preceded_by.is_none()));
        assert!(v.findings[0].evidence[0].trend.as_ref().is_some_and(|t| t.events.is_empty()));
    }

    /// An event detail is server text: whatever it holds, it stays one line and inert in every format.
    #[test]
    fn hostile_event_text_stays_inert_in_every_format() {
        let mut r = sample_report_with_events();
        let hostile = "<script>x</script> *bold* `tick` |pipe| <!channel> ]]> &amp;\nsecond line\r\u{1b}[31m";
        r.events[0].detail = hostile.to_string();
        r.events[0].scope.insert("model_name".to_string(), "*m* <b>".to_string());
        if let Some(p) = r.findings[0].preceded_by.as_mut() {
            p.text = format!("began 2 min after {hostile}");
        }
        // Without a first step that names the change, the answer says it in a note, hostile text and all.
        r.findings[0].steps.retain(|s| !matches!(s, crate::report::Step::Change { .. }));
        for &format in Format::ALL {
            let text = render(&r, format, &RenderOptions::default());
            let name = format.name();
            assert!(!text.contains('\u{1b}'), "{name}: a control character reached the output\n{text}");
            assert!(!text.contains("\nsecond line"), "{name}: a newline in an event reached the output\n{text}");
            // Markup (not the terminal table, not the JSON's data) must not carry the tags.
            // (Markdown escapes with a backslash, which leaves the characters in place.)
            if ![Format::Text, Format::Table, Format::Json].contains(&format) {
                let live = text.replace("\\<", "");
                assert!(!live.contains("<script>") && !live.contains("<!channel>") && !live.contains("<b>"), "{name}\n{text}");
            }
            if format == Format::Junit {
                roxmltree::Document::parse(&text).expect("well-formed XML");
            }
        }
        let md = render(&r, Format::Markdown, &RenderOptions::default());
        assert!(md.contains(r"\<script>x\</script> \*bold\*"), "{md}");
        let slack = render(&r, Format::Slack, &RenderOptions::default());
        assert!(slack.contains("&lt;script&gt;x&lt;/script&gt; ∗bold∗ ˋtickˋ |pipe| &lt;!channel&gt;"), "{slack}");
    }

    /// The sections a reader must find in every format when the report has them.
    #[test]
    fn every_format_shows_disabled_rules_warnings_and_not_evaluated_pairs() {
        let mut r = sample_report();
        r.disabled = vec!["gpu-throttling".to_string()];
        let opts = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
        for &format in Format::ALL {
            let text = render(&r, format, &opts);
            let name = format.name();
            assert!(text.contains("gpu-throttling"), "{name}: disabled rule missing\n{text}");
            assert!(text.contains("10.0.3.7:10901 unavailable"), "{name}: warning missing\n{text}");
            // The channel formats count what could not be evaluated (naming only what bears on the
            // leading finding); the documents list every pair.
            if format == Format::Text {
                assert!(text.contains("not evaluated") && text.contains("-v lists them"), "{name}: not-evaluated count missing\n{text}");
            } else if [Format::Markdown, Format::Slack, Format::SlackBlocks].contains(&format) {
                assert!(text.contains("not evaluated") && !text.contains("-v "), "{name}: not-evaluated count missing, or a command-line hint\n{text}");
            } else {
                assert!(text.contains("spec-decode-acceptance-drop"), "{name}: not-evaluated pair missing\n{text}");
            }
            // The compact text and Slack leave the source to -v (the table); every document names it.
            if ![Format::Text, Format::Slack, Format::SlackBlocks].contains(&format) {
                assert!(text.contains("prometheus.monitoring:9090"), "{name}: source missing\n{text}");
            }
        }
    }

    /// The shape this module exists for: a renderer formats the view and never reads the report,
    /// so it cannot word a fact its own way or leave a section out.
    #[test]
    fn renderers_read_the_view_not_the_report() {
        let sources = [
            ("table.rs", include_str!("table.rs")),
            ("markdown.rs", include_str!("markdown.rs")),
            ("slack.rs", include_str!("slack.rs")),
            ("html.rs", include_str!("html.rs")),
            ("junit.rs", include_str!("junit.rs")),
        ];
        for (name, source) in sources {
            let code = source.split("#[cfg(test)]").next().unwrap_or_default();
            // The type `Report` itself (not `ReportView`), or the report's parts.
            let names_report = code.match_indices("Report").any(|(i, _)| !code[i + "Report".len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'));
            assert!(!names_report, "{name} reads the Report: format the ReportView instead");
            for needle in ["report::Finding", "report::Evidence", "report::Scope"] {
                assert!(!code.contains(needle), "{name} reads the report ({needle}): format the ReportView instead");
            }
        }
    }
}
