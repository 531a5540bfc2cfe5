//! The shared wording: every fact a reader sees is worded here once (times, sources, scopes,
//! evidence, the headline, coverage, not-evaluated lines, warnings, recommendations), and both the
//! text formats and the view call these, so they agree on every fact they print.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::{one_line, own_condition, sparkline, view};
use crate::report::{Evidence, Finding, NotEvaluated, Report, Scope, Severity, TimeRange};
use crate::units;

// ---------------------------------------------------------------------------------------------
// Shared wording. Both text formats call these, so they agree on every fact they print.
// ---------------------------------------------------------------------------------------------

/// `2026-01-15 09:00:00 → 09:30:00 UTC (30m)`; the end carries its date only when it differs.
pub(crate) fn describe_range(r: &TimeRange) -> String {
    let start = r.start.format("%Y-%m-%d %H:%M:%S");
    let end = if r.start.date_naive() == r.end.date_naive() { r.end.format("%H:%M:%S").to_string() } else { r.end.format("%Y-%m-%d %H:%M:%S").to_string() };
    format!("{start} → {end} UTC ({})", describe_duration(r))
}

/// Whole-second length of a range in humantime form (`30m`, `1h 30m`).
pub(crate) fn describe_duration(r: &TimeRange) -> String {
    let secs = r.duration().as_secs();
    humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
}

/// An instant for the PromQL note: time of day when it falls on `day_of`, else the full date.
pub(crate) fn describe_instant(t: &DateTime<Utc>, day_of: &DateTime<Utc>) -> String {
    if t.date_naive() == day_of.date_naive() {
        t.format("%H:%M:%S UTC").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    }
}

/// When each evidence query was evaluated, said once per finding.
pub(crate) fn query_timing(report: &Report) -> String {
    let day = &report.window.start;
    format!("at {} (baseline: same query at {})", describe_instant(&report.window.end, day), describe_instant(&report.baseline.end, day))
}

/// The source kind (`prometheus`), its URL without credentials, and the selector as `{...}` when set.
pub(crate) fn describe_source(report: &Report) -> (String, String, Option<String>) {
    let kind = match report.source.kind.as_str().trim() {
        "" => "source".to_string(),
        k => one_line(k),
    };
    let sel = one_line(&report.source.selector);
    let selector = if sel.is_empty() { None } else { Some(format!("{{{sel}}}")) };
    (kind, display_url(report.source.url.trim()), selector)
}

/// The URL without user name or password (and credential parameters masked). The source is meant
/// to have removed them already; doing it again here means a slip elsewhere cannot put a secret on
/// screen.
pub(crate) fn display_url(raw: &str) -> String {
    // On one line, without control characters: a recording's URL is a file's text.
    one_line(&crate::prom::strip_credentials(raw))
}

/// `v1 metric names`, `mixed v0 and v1 metric names`, ...
pub(crate) fn describe_generation(generation: &str) -> String {
    match generation.trim() {
        "v1" => "v1 metric names".to_string(),
        "v0" => "v0 metric names".to_string(),
        "mixed" => "mixed v0 and v1 metric names".to_string(),
        "" | "unknown" => "metric generation unknown".to_string(),
        other => format!("{other} metric names"),
    }
}

/// `5 replicas by instance · 5 pods · 1 namespace`: the fleet's size by its labels, or `None` when
/// the report does not know it (a lookup that did not answer, an older recording).
pub(crate) fn describe_fleet(m: &crate::report::MetricsInfo) -> Option<String> {
    if m.labels.is_empty() {
        return None;
    }
    let count = crate::stats::plural;
    let mut parts = vec![match m.labels.get(&m.replica_label) {
        Some(0) => format!("replicas not told apart (no `{}` label)", m.replica_label),
        None => format!("replica count unknown (the `{}` count did not answer)", m.replica_label),
        Some(&n) => format!("{} by {}", count(n, "replica", "replicas"), m.replica_label),
    }];
    for (label, one, many) in [("pod", "pod", "pods"), ("instance", "instance", "instances"), ("namespace", "namespace", "namespaces")] {
        if label == m.replica_label {
            continue;
        }
        if let Some(&n) = m.labels.get(label).filter(|n| **n > 0) {
            parts.push(count(n, one, many));
        }
    }
    Some(parts.join(" · "))
}

/// `5 replicas`, `replicas not told apart` or `replica count unknown`, when the fleet's labels
/// were counted.
pub(crate) fn describe_replicas(m: &crate::report::MetricsInfo) -> Option<String> {
    if m.labels.is_empty() {
        return None;
    }
    Some(match m.labels.get(&m.replica_label) {
        Some(0) => "replicas not told apart".to_string(),
        None => "replica count unknown".to_string(),
        Some(&n) => crate::stats::plural(n, "replica", "replicas"),
    })
}

/// How scopes are written. When every scope seen is one label (normally `model_name`), scopes are
/// written as that label's value alone, and the label is named once in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScopeStyle {
    pub group_label: Option<String>,
    /// Whether [`ScopeStyle::compact`] may shorten the grouping label's values: only when every
    /// shortened value is still unique in the report.
    pub shorten: bool,
}

impl ScopeStyle {
    pub fn for_report(report: &Report) -> Self {
        let mut seen: Vec<&Scope> = report.metrics.scopes.iter().filter(|s| !s.is_empty()).collect();
        if seen.is_empty() {
            seen = report
                .findings
                .iter()
                .map(|f| &f.scope)
                .chain(report.healthy.iter().map(|c| &c.scope))
                .chain(report.not_evaluated.iter().map(|n| &n.scope))
                .filter(|s| !s.is_empty())
                .collect();
        }
        let mut labels = BTreeSet::new();
        for scope in &seen {
            if scope.len() != 1 {
                return ScopeStyle { group_label: None, shorten: false };
            }
            labels.extend(scope.keys().cloned());
        }
        let group_label = if labels.len() == 1 { labels.into_iter().next() } else { None };
        let shorten = group_label.as_deref().is_some_and(|label| {
            let values: BTreeSet<&str> = report
                .metrics
                .scopes
                .iter()
                .chain(report.findings.iter().map(|f| &f.scope))
                .chain(report.healthy.iter().map(|c| &c.scope))
                .chain(report.not_evaluated.iter().map(|n| &n.scope))
                .filter_map(|s| s.get(label).map(String::as_str))
                .collect();
            let shortened: BTreeSet<String> = values.iter().map(|v| short_name(v)).collect();
            shortened.len() == values.len()
        });
        ScopeStyle { group_label, shorten }
    }

    /// Like [`ScopeStyle::format`], with long model names shortened for narrow places (the table
    /// format's headings): `meta-llama/Llama-3.1-8B-Instruct` becomes `Llama-3.1-8B-Instruct`.
    /// The full names stay in the header's list of scopes and in every other format.
    pub fn compact(&self, scope: &Scope) -> String {
        let Some(label) = self.group_label.as_deref().filter(|_| self.shorten) else {
            return self.format(scope);
        };
        match scope.get(label) {
            Some(value) => {
                let mut short = scope.clone();
                short.insert(label.to_string(), short_name(value));
                self.format(&short)
            }
            None => self.format(scope),
        }
    }

    /// `llama-3`, `llama-3 (engine=1)`, `instance=10.0.0.7:8000`, or `all` for the empty scope.
    pub fn format(&self, scope: &Scope) -> String {
        if scope.is_empty() {
            return "all".to_string();
        }
        let pairs = |skip: Option<&str>| {
            scope.iter().filter(|(k, _)| Some(k.as_str()) != skip).map(|(k, v)| format!("{k}={}", one_line(v))).collect::<Vec<_>>().join(", ")
        };
        match self.group_label.as_deref().and_then(|l| scope.get(l).map(|v| (l, v))) {
            // Grouped by a label the series lack (`--group-by pod` on a fleet without pods): say so
            // rather than print nothing.
            Some((label, value)) if scope.len() == 1 && value.is_empty() => format!("(no {label} label)"),
            Some((_, value)) if scope.len() == 1 => one_line(value),
            Some((label, value)) => format!("{} ({})", one_line(value), pairs(Some(label))),
            None => pairs(None),
        }
    }

    /// The scopes seen, for the header: `model_name: a, b` or `a=1, b=2; a=3`.
    pub fn describe_seen(&self, scopes: &[Scope]) -> String {
        if scopes.is_empty() {
            return "no scopes seen".to_string();
        }
        let list: Vec<String> = scopes.iter().map(|s| self.format(s)).collect();
        match &self.group_label {
            Some(label) => format!("{label}: {}", list.join(", ")),
            None => list.join("; "),
        }
    }
}

/// One evidence item worded for people: title, numbers (bounds as `< x` / `≥ x`: a quantile
/// `histogram_quantile` put at the largest finite bound is at least that), change,
/// condition and confidence. The view adds the sparkline and the trend.
pub(crate) fn evidence_words(e: &Evidence) -> view::EvidenceView {
    use crate::report::Bound;
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
    view::EvidenceView {
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

/// `1 critical, 1 warning`, most severe first.
pub(crate) fn severity_counts(findings: &[Finding]) -> String {
    [Severity::Critical, Severity::Warning, Severity::Info]
        .iter()
        .filter_map(|s| {
            let n = findings.iter().filter(|f| f.severity == *s).count();
            (n > 0).then(|| format!("{n} {s}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the run amounts to, which decides the headline and the closing sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Findings,
    /// No findings, and at least one rule/scope pair was evaluated.
    Clean,
    /// No findings because nothing could be evaluated: not a clean bill.
    NothingEvaluated,
    /// No finding of warning or worse in what could be judged, but core runbook rules could not be
    /// judged (latency histograms missing, say): not a clean bill either.
    Incomplete,
}

pub(crate) fn verdict(report: &Report) -> Verdict {
    if report.findings.is_empty() && report.healthy.is_empty() {
        Verdict::NothingEvaluated
    } else if report.incomplete() {
        Verdict::Incomplete
    } else if !report.findings.is_empty() {
        Verdict::Findings
    } else {
        Verdict::Clean
    }
}

/// `21 of 24 rules evaluated (2 through stand-in signals)`, or `None` when every rule was evaluated
/// (or the report predates the count).
pub(crate) fn coverage_phrase(report: &Report) -> Option<String> {
    let c = &report.coverage;
    if c.rules == 0 || (c.evaluated == c.rules && c.stood_in == 0) {
        return None;
    }
    let mut s = format!("{} of {} rules evaluated", c.evaluated, c.rules);
    if c.stood_in > 0 {
        s.push_str(&format!(" ({} through stand-in signals)", c.stood_in));
    }
    Some(s)
}

/// The sentence naming the core rules that could not be judged, or `None`.
pub(crate) fn core_sentence(report: &Report) -> Option<String> {
    let core = &report.coverage.core_not_evaluated;
    let unread = &report.coverage.unread_targets;
    if core.is_empty() && unread.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !core.is_empty() {
        let ids: Vec<String> = core.iter().map(|r| one_line(r)).collect();
        let why: BTreeSet<String> = report.not_evaluated.iter().filter(|n| core.contains(&n.rule)).map(|n| one_line(&n.reason.to_string())).collect();
        let mut s = format!("Core runbook checks not evaluated: {}", ids.join(", "));
        if let Some(first) = why.iter().next() {
            s.push_str(&format!(" ({first}{})", if why.len() > 1 { "; and more, listed below" } else { "" }));
        }
        parts.push(s);
    }
    if !unread.is_empty() {
        let list: Vec<String> = unread.iter().map(|t| one_line(t)).collect();
        parts.push(format!("Scrape targets that answered nothing, so nothing they serve is in this diagnosis: {}", list.join("; ")));
    }
    Some(format!("{}. What could not be seen is not known to be healthy.", parts.join(". ")))
}

/// The lower-confidence note of a finding decided through stand-in signals, or `None`.
/// Its first clause, for the answer, and the whole line.
pub(crate) fn stood_in_line(f: &Finding) -> Option<(String, String)> {
    let s = f.stood_in.as_ref()?;
    let brief = format!(
        "Lower confidence: decided without {} (their metrics are missing from the data)",
        s.missing.iter().map(|m| one_line(m)).collect::<Vec<_>>().join(", ")
    );
    let whole = format!("{brief}; {} stood in", s.signals.iter().map(|m| one_line(m)).collect::<Vec<_>>().join(", "));
    Some((brief, whole))
}

/// The note of a finding decided over the window's last minutes only, or `None`: which readings
/// were taken there, from when to when, against what. Its first clause, for the answer, and the
/// whole line.
pub(crate) fn recent_line(report: &Report, f: &Finding) -> Option<(String, String)> {
    let r = f.recent.as_ref()?;
    let start = report.window.end - chrono::Duration::seconds(r.range_seconds as i64);
    let span = TimeRange { start, end: report.window.end };
    let day = &report.window.start;
    let last = if r.range_seconds % 60 == 0 { format!("{} min", r.range_seconds / 60) } else { describe_duration(&span) };
    let brief = format!(
        "Held over the window's last {last} ({} → {}) but not over the whole window",
        describe_instant(&start, day),
        describe_instant(&report.window.end, day)
    );
    let whole = format!(
        "{brief}: the rows marked \"last {last}\" were read there, each against its baseline over the whole baseline window (its query with the window's range, [{}], at {})",
        crate::signals::promql_duration(report.window.duration()),
        describe_instant(&report.baseline.end, day),
    );
    Some((brief, whole))
}

/// One change no rule explains: `P95 time to first token up 2.4x (robust z 31) on llama since
/// 09:12:00 UTC (18 min, ongoing): 1.9 s vs 800 ms`.
pub(crate) fn unexplained_line(report: &Report, u: &crate::report::Unexplained, scopes: &ScopeStyle) -> String {
    // A fall reads as the share left (0.05x), a rise with one decimal; a z past 100 only as that.
    let factor = |r: f64| if r < 1.0 { format!("{r:.2}x") } else { format!("{r:.1}x") };
    let size = match (u.ratio, u.robust_z) {
        (Some(r), Some(z)) if z > 100.0 => format!("{} (robust z > 100)", factor(r)),
        (Some(r), Some(z)) => format!("{} (robust z {z:.0})", factor(r)),
        (Some(r), None) => format!("{} (its baseline did not vary)", factor(r)),
        (None, _) => "from 0".to_string(),
    };
    let scope = scopes.compact(&u.scope);
    let on = if scope.is_empty() || scope == scopes.format(&Scope::new()) { String::new() } else { format!(" on {scope}") };
    let since = if u.from_start {
        format!("already at the window's start ({})", describe_instant(&report.window.start, &report.window.start))
    } else {
        format!("since {}", describe_instant(&u.onset, &report.window.start))
    };
    let minutes = (u.duration_seconds as f64 / 60.0).round() as u64;
    let lasting = if u.ongoing { format!("{minutes} min, ongoing") } else { format!("{minutes} min, then back") };
    let value = |v: Option<f64>| v.map_or_else(|| "?".to_string(), |v| crate::units::format_value(v, &u.unit));
    format!(
        "{} {} {size}{on} {since} ({lasting}): {} vs {}{}",
        one_line(&u.title),
        u.direction,
        value(u.value),
        value(u.baseline),
        if u.spare { " (read for this list only: no rule reads it)" } else { "" }
    )
}

/// The same change in brief, for the answer: `P95 time to first token up 2.4x on llama since
/// 09:12 UTC: 1.9 s vs 800 ms` (its size against the baseline's spread and how long it lasted: -v).
pub(crate) fn unexplained_brief(report: &Report, u: &crate::report::Unexplained, scopes: &ScopeStyle) -> String {
    let factor = match u.ratio {
        Some(r) if r < 1.0 => format!(" {r:.2}x"),
        Some(r) => format!(" {r:.1}x"),
        None => " from 0".to_string(),
    };
    let scope = scopes.compact(&u.scope);
    let on = if scope.is_empty() || scope == scopes.format(&Scope::new()) { String::new() } else { format!(" on {scope}") };
    let at = if u.from_start { report.window.start } else { u.onset };
    let value = |v: Option<f64>| v.map_or_else(|| "?".to_string(), |v| crate::units::format_value(v, &u.unit));
    format!("{} {}{factor}{on} since {}: {} vs {}", one_line(&u.title), u.direction, at.format("%H:%M UTC"), value(u.value), value(u.baseline))
}

/// First line of every text format: `2 findings (1 critical, 1 warning) · 2 not evaluated`.
pub(crate) fn headline(report: &Report) -> String {
    let main = match verdict(report) {
        Verdict::Findings => format!("{} ({})", plural(report.findings.len(), "finding", "findings"), severity_counts(&report.findings)),
        Verdict::Clean if !report.unexplained.is_empty() => {
            format!("no rule fired, but {} no rule explains", plural(report.unexplained.len(), "signal moved that", "signals moved that"))
        }
        Verdict::Clean => "no problems found".to_string(),
        Verdict::NothingEvaluated => "nothing evaluated".to_string(),
        Verdict::Incomplete if report.findings.is_empty() => format!("not an all-clear: {}", gap_phrase(report)),
        Verdict::Incomplete => {
            format!("{} ({}), {}", plural(report.findings.len(), "finding", "findings"), severity_counts(&report.findings), gap_phrase(report))
        }
    };
    match (report.not_evaluated.len(), verdict(report), coverage_phrase(report)) {
        (0, Verdict::NothingEvaluated, _) => main,
        (n, Verdict::NothingEvaluated, _) => {
            format!("{main} ({} could not be checked)", plural(n, "rule/scope pair", "rule/scope pairs"))
        }
        (_, _, Some(c)) => format!("{main} · {c}"),
        (0, _, None) => main,
        (n, _, None) => format!("{main} · {n} not evaluated"),
    }
}

/// What kept the run from passing, for the headline: `core checks not evaluated`, `a scrape target
/// answered nothing`, or both.
pub(crate) fn gap_phrase(report: &Report) -> String {
    let mut parts = Vec::new();
    if report.core_missing() {
        parts.push("core checks not evaluated".to_string());
    }
    match report.coverage.unread_targets.len() {
        0 => {}
        1 => parts.push("a scrape target answered nothing".to_string()),
        n => parts.push(format!("{n} scrape targets answered nothing")),
    }
    parts.join(", ")
}

/// The sentence printed instead of findings when there are none.
pub(crate) fn no_findings_sentence(report: &Report) -> Option<String> {
    let skipped = report.not_evaluated.len();
    match verdict(report) {
        Verdict::Findings => core_sentence(report),
        Verdict::Incomplete if !report.findings.is_empty() => core_sentence(report),
        Verdict::Incomplete => Some(format!(
            "No warning or critical finding in what could be checked ({}), but this is not an all-clear. {}",
            plural(report.healthy.len(), "rule/scope pair", "rule/scope pairs"),
            core_sentence(report).unwrap_or_default()
        )),
        Verdict::Clean => {
            let mut s = format!("No problems found in the window: {} checked", plural(report.healthy.len(), "rule/scope pair", "rule/scope pairs"));
            if skipped > 0 {
                s.push_str(&format!(", {skipped} not evaluated (listed below: what could not be evaluated is not known to be healthy)"));
            } else {
                s.push_str(", 0 not evaluated");
            }
            s.push('.');
            if !report.unexplained.is_empty() {
                s = format!(
                    "No rule fired ({} checked), but this is not an all-clear: {} that no rule explains, listed under \"Also changed\".",
                    plural(report.healthy.len(), "rule/scope pair", "rule/scope pairs"),
                    plural(report.unexplained.len(), "signal moved", "signals moved")
                );
            }
            Some(s)
        }
        Verdict::NothingEvaluated => {
            let mut s = "Nothing was evaluated: no rule could be checked against this window, so this is \
                         not an all-clear."
                .to_string();
            // With failures the list below explains itself; without, the likely cause is the selector.
            if skipped == 0 && report.metrics.scopes.is_empty() {
                s.push_str(
                    " No vLLM series were seen in the window; check the selector and that the \
                     data source scrapes vLLM.",
                );
            }
            Some(s)
        }
    }
}

/// The one line naming the rules the configuration file switched off, if any.
pub(crate) fn disabled_line(report: &Report) -> Option<String> {
    (!report.disabled.is_empty()).then(|| {
        let ids: Vec<String> = report.disabled.iter().map(|r| one_line(r)).collect();
        format!("Disabled in the configuration (not evaluated): {}", ids.join(", "))
    })
}

/// `5 rule/scope pairs (rule-a, rule-b)`, or `None` when there is nothing healthy to mention.
/// A rule that fired on some scope is listed with the scopes it was healthy on, so that the list
/// never reads as clearing the finding above it.
pub(crate) fn healthy_summary(report: &Report, scopes: &ScopeStyle) -> Option<(String, Vec<String>)> {
    if report.healthy.is_empty() {
        return None;
    }
    let fired: BTreeSet<&str> =
        report.findings.iter().flat_map(|f| std::iter::once(f.rule.as_str()).chain(f.also_consistent.iter().map(|a| a.rule.as_str()))).collect();
    let rules: BTreeSet<&str> = report.healthy.iter().map(|c| c.rule.as_str()).collect();
    let named = rules
        .into_iter()
        .map(|rule| {
            if !fired.contains(rule) {
                return one_line(rule);
            }
            let on: Vec<String> = report.healthy.iter().filter(|c| c.rule == rule).map(|c| scopes.format(&c.scope)).collect();
            format!("{} on {}", one_line(rule), on.join(", "))
        })
        .collect();
    Some((plural(report.healthy.len(), "rule/scope pair", "rule/scope pairs"), named))
}

/// Not-evaluated entries in a stable order, each with its scope already worded.
pub(crate) fn not_evaluated_lines(report: &Report, scopes: &ScopeStyle) -> Vec<(String, String, String)> {
    let mut items: Vec<&NotEvaluated> = report.not_evaluated.iter().collect();
    items.sort();
    items.into_iter().map(|n| (one_line(&n.rule), scopes.format(&n.scope), one_line(&n.reason.to_string()))).collect()
}

/// Heading over the not-evaluated list, the same in every format.
pub(crate) fn not_evaluated_heading(count: usize) -> String {
    format!("Not evaluated ({}; not covered by this diagnosis):", plural(count, "rule/scope pair", "rule/scope pairs"))
}

/// Warnings in first-seen order, exact repeats folded into one line with a count.
pub(crate) fn warning_lines(report: &Report) -> Vec<String> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for w in &report.warnings {
        let w = one_line(w);
        match out.iter_mut().find(|(seen, _)| *seen == w) {
            Some((_, n)) => *n += 1,
            None => out.push((w, 1)),
        }
    }
    out.into_iter().map(|(w, n)| if n > 1 { format!("{w} ({n} times)") } else { w }).collect()
}

/// The PromQL behind a finding's evidence, as (signal, query) pairs, one line each.
pub(crate) fn finding_queries(f: &Finding) -> Vec<(String, String)> {
    f.evidence.iter().filter(|e| !e.query.trim().is_empty()).map(|e| (one_line(&e.signal), one_line(&e.query))).collect()
}

/// `3 of 8 replicas (instance): a, b, c`, when the finding was broken down per replica.
pub(crate) fn replicas_line(f: &Finding) -> Option<String> {
    let r = f.replicas.as_ref()?;
    if let Some(why) = &r.not_evaluated {
        return Some(format!("not evaluated ({})", one_line(why)));
    }
    if r.total == 0 {
        return None;
    }
    let names = if r.affected.is_empty() {
        "none on its own".to_string()
    } else if r.affected.len() <= 6 {
        r.affected.iter().map(|a| one_line(a)).collect::<Vec<_>>().join(", ")
    } else {
        format!("{}, and {} more", r.affected[..5].iter().map(|a| one_line(a)).collect::<Vec<_>>().join(", "), r.affected.len() - 5)
    };
    let limit = if r.limit.is_empty() { String::new() } else { format!(" ({} {})", one_line(&r.signal), one_line(&r.limit)) };
    Some(format!("{} of {} replicas{limit}: {names}", r.affected.len(), r.total))
}

/// `Suggested max_num_seqs = 18`, then how it was computed and its caveat.
pub(crate) fn recommendation_lines(f: &Finding) -> Vec<(String, String)> {
    f.recommendations
        .iter()
        .map(|r| (format!("Suggested {} = {}", one_line(&r.setting), one_line(&r.value)), format!("{} ({})", one_line(&r.arithmetic), one_line(&r.caveat))))
        .collect()
}

/// The experiment card of a recommendation, whole and brief: `--max-num-seqs: unknown → 15 ·
/// trade-off: ... · confidence high: preempting in ...` and `--max-num-seqs: unknown → 15 ·
/// confidence high`. `None` for a recommendation without a flag (a report from before cards).
pub(crate) fn card_lines(r: &crate::report::Recommendation) -> Option<(String, String)> {
    if r.flag.trim().is_empty() {
        return None;
    }
    let (from, to) = (one_line(&r.from), one_line(&r.to));
    // `1578 blocks → 3083 blocks (1.95x)` reads `1578 → 3083 blocks (1.95x)`: the unit once.
    let from = match from.rsplit_once(' ') {
        Some((n, unit)) if to.split(' ').nth(1) == Some(unit) && n.parse::<f64>().is_ok() => n.to_string(),
        _ => from,
    };
    let change = format!("{}: {from} → {to}", one_line(&r.flag));
    let level = r.confidence.level.as_str();
    let whole = format!("{change} · trade-off: {} · confidence {level}: {}", one_line(&r.tradeoff), one_line(&r.confidence.basis));
    Some((whole, format!("{change} · confidence {level}")))
}

/// `Won't help: more KV memory (--gpu-memory-utilization): KV-cache usage peaked at 42%, never past 60%`.
pub(crate) fn wont_help_lines(f: &Finding) -> Vec<String> {
    f.wont_help.iter().map(|w| format!("Won't help: {} ({}): {}", one_line(&w.lever), one_line(&w.flag), one_line(&w.why))).collect()
}

// ---------------------------------------------------------------------------------------------
// Human touches: relative times, short names, sparklines, the check verdict.
// ---------------------------------------------------------------------------------------------

/// `12 min ago`, `3 h 5 min ago`, `2 days ago`; `just now` under a minute (or for a time a little
/// in the future, which is clock skew).
pub(crate) fn ago(t: &DateTime<Utc>, now: &DateTime<Utc>) -> String {
    let secs = (*now - *t).num_seconds();
    if secs < 60 {
        return "just now".to_string();
    }
    let mins = secs / 60;
    if mins < 60 {
        return format!("{mins} min ago");
    }
    let (h, m) = (mins / 60, mins % 60);
    if h < 48 {
        return if m == 0 { format!("{h} h ago") } else { format!("{h} h {m} min ago") };
    }
    format!("{} days ago", h / 24)
}

/// [`describe_range`] with, on a live run, how long ago the range ended:
/// `2026-01-15 09:00:00 → 09:30:00 UTC (30m, ended 12 min ago)`.
pub(crate) fn describe_range_at(r: &TimeRange, now: Option<&DateTime<Utc>>) -> String {
    let plain = describe_range(r);
    match now {
        Some(now) => match plain.strip_suffix(')') {
            Some(head) => format!("{head}, ended {})", ago(&r.end, now)),
            None => plain,
        },
        None => plain,
    }
}

/// An instant in UTC with, on a live run, a relative hint: `2026-01-15 08:50:00 UTC (30 min ago)`.
pub(crate) fn describe_time_at(t: &DateTime<Utc>, now: Option<&DateTime<Utc>>) -> String {
    let abs = t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    match now {
        Some(now) => format!("{abs} ({})", ago(t, now)),
        None => abs,
    }
}

/// A model name short enough for a heading: the organisation or directory part is dropped
/// (`meta-llama/Llama-3.1-8B-Instruct` -> `Llama-3.1-8B-Instruct`), and what is still longer
/// than 32 characters loses its middle (`averyveryverylong…name-suffix`). The ends are kept
/// because that is where model names differ: the family first, the size and variant last.
pub(crate) fn short_name(name: &str) -> String {
    const MAX: usize = 32;
    let name = one_line(name);
    let base = match name.trim_end_matches('/').rsplit_once('/') {
        Some((_, last)) if !last.is_empty() => last.to_string(),
        _ => name.clone(),
    };
    let chars: Vec<char> = base.chars().collect();
    if chars.len() <= MAX {
        return base;
    }
    let head: String = chars[..15].iter().collect();
    let tail: String = chars[chars.len() - 16..].iter().collect();
    format!("{head}…{tail}")
}

/// The evidence's sparkline over baseline and window, when it carries a trend.
pub(crate) fn evidence_sparkline(report: &Report, e: &Evidence) -> Option<String> {
    let t = e.series.as_ref()?;
    sparkline::trend(t, &report.baseline, &report.window, sparkline::CELLS)
}

pub(crate) use crate::stats::plural;
