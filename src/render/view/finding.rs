//! Each finding as the view shows it: its card (rank, scope, severity, since when, what it
//! rules out and recommends), its evidence worded once, and the binding sentence of its model.

use super::*;

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
    /// Whether the first checked line is the binding (a step answered by it): it is then the
    /// finding's binding line, kept as long as that would be.
    pub checked_binding: bool,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaCount {
    /// The per-replica breakdown could not be read.
    NotEvaluated,
    Of {
        affected: usize,
        total: usize,
        /// The affected replicas by name, where only some are and no more than [`NAMED_REPLICAS`]:
        /// the ones the steps ("check the pod of the replica") are about.
        named: Vec<String>,
    },
}

/// The most affected replicas the answer names beside their count.
pub const NAMED_REPLICAS: usize = 3;

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

pub(super) fn finding(report: &Report, f: &Finding, rank: usize, scopes: &ScopeStyle, opts: &RenderOptions) -> FindingView {
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
        let alts = crate::render::condition::alternatives(&e.threshold);
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
        checked: f.steps.checked().map(|s| one_line(&s.text())).collect(),
        checked_binding: f.steps.answered_by_binding(),
        first_step_names_change: f.first_step_names_its_change(),
        references: f.references.iter().map(|r| one_line(r)).collect(),
        also_consistent: f.also_consistent.iter().map(|a| AlsoView { rule: one_line(&a.rule), title: one_line(&a.title), severity: a.severity }).collect(),
        raised_from: f.raised_from,
        queries: finding_queries(f),
        deciding,
        since: since(report, f),
        replicas_count: f.replicas.as_ref().and_then(|r| match &r.not_evaluated {
            Some(_) => Some(ReplicaCount::NotEvaluated),
            None => (r.total > 0).then(|| {
                let some = !r.affected.is_empty() && r.affected.len() < r.total && r.affected.len() <= NAMED_REPLICAS;
                ReplicaCount::Of {
                    affected: r.affected.len(),
                    total: r.total,
                    named: if some { r.affected.iter().map(|a| one_line(a)).collect() } else { Vec::new() },
                }
            }),
        }),
        // A step answered by the binding words it whole among the checked lines.
        binding: binding_of(report, f).filter(|_| first_of_its_model(report, f, rank) && !f.steps.answered_by_binding()).map(binding_sentence),
        not_evaluated_here: not_evaluated_here(report, f),
    }
}

/// `KV-cache usage (peak): 59%, baseline 55% (needs >= 90%: not met)`.
pub(super) fn reading_line(e: &Evidence) -> String {
    let w = evidence_words(e);
    format!("{}: {}, baseline {} (needs {}: {})", w.title, w.value, w.baseline, w.condition_own, if w.held { "met" } else { "not met" })
}

/// See [`FindingView::not_evaluated_here`]: pairs whose scope is part of the finding's, not empty.
pub(super) fn not_evaluated_here(report: &Report, f: &Finding) -> Vec<String> {
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

/// The model-level binding of a finding's scope (its grouping labels; a replica label the finding
/// names is left aside).
pub(super) fn binding_of<'a>(report: &'a Report, f: &Finding) -> Option<&'a crate::report::Binding> {
    report.binding.iter().find(|b| b.is_model_of(&f.scope, &report.metrics.replica_label))
}

/// Whether no finding ranked before `rank` has the same model-level binding.
pub(super) fn first_of_its_model(report: &Report, f: &Finding, rank: usize) -> bool {
    let mine = binding_of(report, f).map(|b| &b.scope);
    report.findings.iter().take(rank - 1).all(|g| binding_of(report, g).map(|b| &b.scope) != mine)
}

/// The binding's sentence (see [`crate::report::Binding::text`]).
pub fn binding_sentence(b: &crate::report::Binding) -> String {
    b.text()
}

/// The evidence rows that decided a finding (see [`FindingView::deciding`]).
pub(super) fn deciding(evidence: &[EvidenceView]) -> Vec<usize> {
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
pub(super) fn since(report: &Report, f: &Finding) -> Option<String> {
    let clock = |t: &DateTime<Utc>| format!("{} UTC", onset_clock(&report.window, t));
    match (f.onset, f.ended) {
        (Some(t), None) => Some(format!("since {}", clock(&t))),
        (Some(t), Some(end)) => Some(format!("{} to {}, now over", clock(&t), clock(&end))),
        (None, None) if f.present_before_window() => Some(format!("since before the window ({})", clock(&report.window.start))),
        (None, Some(end)) if f.present_before_window() => Some(format!("from before the window to {}, now over", clock(&end))),
        _ => None,
    }
}

pub(super) fn evidence(report: &Report, e: &Evidence, links: Option<&GraphLinks>) -> EvidenceView {
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
pub(super) fn onset_clock(window: &TimeRange, t: &DateTime<Utc>) -> String {
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
pub(super) fn onset_line(report: &Report, f: &Finding, now: Option<&DateTime<Utc>>) -> Option<String> {
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
pub(super) fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// One evidence item worded for people: title, numbers (bounds as `< x` / `≥ x`: a quantile
/// `histogram_quantile` put at the largest finite bound is at least that), change,
/// condition and confidence. The view adds the sparkline and the trend.
pub(crate) fn evidence_words(e: &Evidence) -> EvidenceView {
    use crate::render::own_condition;
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
