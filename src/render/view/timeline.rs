//! The timeline as the view shows it: the report's change events worded once each, which the text
//! formats list (at most [`TIMELINE_LISTED`], the ones that matter first), and the events marked
//! on a finding's chart.

use super::*;

/// How many events the text formats list at most (the JSON has every one).
pub const TIMELINE_LISTED: usize = 12;

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

pub(super) fn phase(report: &Report, t: &DateTime<Utc>) -> Phase {
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
pub(super) fn concerns(e: &Event, f: &Finding) -> bool {
    e.scope.iter().all(|(k, v)| f.scope.get(k) == Some(v))
}

/// `09:01:15 UTC config-change (llama-3): num_gpu_blocks 2000 -> 900`.
pub(super) fn event_line(time: &str, kind: EventKind, scope: &str, detail: &str) -> String {
    if detail.is_empty() {
        format!("{time} {kind} ({scope})")
    } else {
        format!("{time} {kind} ({scope}): {detail}")
    }
}

/// Every event of the report worded once, oldest first, each marked listed or not.
pub(super) fn timeline(report: &Report, scopes: &ScopeStyle, now: Option<&DateTime<Utc>>) -> Vec<EventView> {
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
pub(super) fn timeline_heading(report: &Report) -> Option<String> {
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
pub(super) fn chart_events(report: &Report, f: &Finding, scopes: &ScopeStyle) -> Vec<ChartEvent> {
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
