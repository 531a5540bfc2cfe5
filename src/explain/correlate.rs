//! Stage: correlate. A finding whose onset follows a change on its scope closely is tied to it: its
//! evidence says so (`preceded_by`) and its first step points at the change. No query of its own.
//!
//! An event qualifies when it happened to the finding's scope (or to no scope in particular, like a
//! rollout of a Deployment no replica could be tied to) and the finding began at most
//! [`LEAD_STEPS`] trend steps (5 minutes at least) after it, or after its last change for a wave
//! spread over time, or at most one step before it (both are dated to within a step). Among several,
//! the kind that changes most comes first (configuration, version, rollout, GPU error, replicas
//! removed, restart, ...), then the closest. A finding decided by counting targets down or gone
//! (a signal with `dated_by` events, `up_min`) has no trend to date it: the first such event on its scope in the
//! window dates it. A problem there from the window's start counts as
//! beginning at the start (the case of `check`, whose window opens at the deploy) when its baseline
//! did not have it; a chronic one, or one no trend could date, is tied to nothing: a change cannot
//! explain what was already there.

use chrono::{DateTime, Utc};

use super::onset::{self, Dating};
use crate::report::{Event, EventKind, Finding, PrecededBy};
use crate::rules::RuleSet;

/// How many trend steps after an event a finding's onset may lie and still be tied to it.
pub const LEAD_STEPS: i64 = 3;
/// ... and at least this many seconds.
pub const MIN_LEAD_SECONDS: i64 = 300;

/// Which kinds explain a later problem best, most first; kinds not listed never do.
const PRIORITY: &[EventKind] = &[
    EventKind::ConfigChange,
    EventKind::VersionChange,
    EventKind::Rollout,
    EventKind::GpuError,
    EventKind::ReplicaRemoved,
    EventKind::ModelAdded,
    EventKind::Restart,
    EventKind::ReplicaAdded,
    EventKind::TargetDown,
];

fn rank(kind: EventKind) -> Option<usize> {
    PRIORITY.iter().position(|k| *k == kind)
}

/// The event `f` began after, if any (see the module documentation), and the seconds from it to
/// the onset (to the window's start for a problem there from the start). A problem that began in
/// the window is tied only to a change inside the window; one there from the window's start, to a
/// change in the baseline too, but never to the baseline's first sample, where a series that
/// merely begins there reads as a change.
pub fn preceding<'a>(
    f: &Finding,
    dating: &Dating,
    events: &'a [Event],
    step: u64,
    window_start: DateTime<Utc>,
    baseline_start: DateTime<Utc>,
) -> Option<(&'a Event, i64)> {
    // A problem already there when the window opened began at the latest at its start, and only
    // counts when its baseline did not have it.
    let onset = match dating.onset {
        Some(t) => t,
        None if dating.present_before_window() && onset::new_since_baseline(f, dating.signal.as_deref()) => window_start,
        None => return None,
    };
    let step = step.max(1) as i64;
    let lead_max = (LEAD_STEPS * step).max(MIN_LEAD_SECONDS);
    events
        .iter()
        .filter(|e| e.scope.iter().all(|(k, v)| f.scope.get(k) == Some(v)))
        .filter(|e| e.time >= window_start || (dating.onset.is_none() && e.time > baseline_start))
        .filter_map(|e| {
            let r = rank(e.kind)?;
            let lead = (onset - e.time).num_seconds();
            let last = (onset - e.until.unwrap_or(e.time)).num_seconds();
            (lead >= -step && last <= lead_max).then_some((r, lead.abs(), e, lead))
        })
        .min_by_key(|(r, dist, _, _)| (*r, *dist))
        .map(|(_, _, e, lead)| (e, lead))
}

/// Date a finding no trend dated and decided by a signal with `dated_by` events (a count of
/// targets down or gone) by the first such event on its scope in the window: its dating then.
pub fn dated_by_events(f: &Finding, dating: &Dating, events: &[Event], window_start: DateTime<Utc>, rules: &RuleSet) -> Option<Dating> {
    if dating.onset.is_some() || dating.signal.is_some() {
        return None;
    }
    f.evidence.iter().filter(|e| e.passed).find_map(|e| {
        let kinds = &rules.signals.get(&e.signal)?.dated_by;
        let first = events
            .iter()
            .filter(|ev| kinds.contains(&ev.kind) && ev.time >= window_start && ev.scope.iter().all(|(k, v)| f.scope.get(k) == Some(v)))
            .map(|ev| ev.time)
            .min()?;
        Some(Dating { onset: Some(first), signal: Some(e.signal.clone()), ended: dating.ended })
    })
}

/// The change a finding so dated followed, if any: its `preceded_by`. A finding dated by change
/// events (its signal's `dated_by`: targets down or gone) did not follow one of those that has no
/// runbook of its own (targets going down): that event is the finding itself. One that has (a
/// scale-down) leads its steps.
pub fn change(
    f: &Finding,
    dating: &Dating,
    events: &[Event],
    step: u64,
    window_start: DateTime<Utc>,
    baseline_start: DateTime<Utc>,
    rules: &RuleSet,
) -> Option<PrecededBy> {
    let own = dating.signal.as_ref().and_then(|s| rules.signals.get(s)).map(|d| d.dated_by.as_slice()).unwrap_or_default();
    let others: Vec<Event> = events.iter().filter(|e| !own.contains(&e.kind) || e.step_naming_it().is_some()).cloned().collect();
    let (e, lead) = preceding(f, dating, &others, step, window_start, baseline_start)?;
    Some(PrecededBy::new(e.clone(), lead, dating.onset.is_none().then_some(window_start)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    use crate::report::Step;

    /// Correlate's parts of each finding, built into it the way explain builds it.
    fn built(fs: &mut [Finding], events: &[Event], step: u64, window_start: DateTime<Utc>, baseline_start: DateTime<Utc>, rules: &RuleSet) {
        for f in fs.iter_mut() {
            let now = Dating::of(f);
            let dating = dated_by_events(f, &now, events, window_start, rules);
            let change = change(f, dating.as_ref().unwrap_or(&now), events, step, window_start, baseline_start, rules);
            *f = crate::explain::finish::build(f.clone(), crate::explain::finish::Parts { dating, change, ..Default::default() });
        }
    }

    fn pack() -> RuleSet {
        crate::rules::load_builtin().unwrap()
    }
    use crate::report::{Scope, Severity};

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn scope(model: &str) -> Scope {
        [("model_name".to_string(), model.to_string())].into_iter().collect()
    }

    fn finding(model: &str, onset: Option<&str>) -> Finding {
        Finding {
            title: "KV-cache pressure".into(),
            steps: vec![Step::ask("Check the cache.")].into(),
            onset: onset.map(t),
            onset_signal: Some("kv_usage_max".into()),
            ..Finding::bare("kv-cache-pressure", Severity::Critical, scope(model))
        }
    }

    fn event(at: &str, kind: EventKind, model: &str, detail: &str) -> Event {
        Event {
            time: t(at),
            kind,
            scope: if model.is_empty() { Scope::new() } else { scope(model) },
            detail: detail.into(),
            replicas: vec![],
            of: None,
            until: None,
            before: BTreeMap::new(),
            after: BTreeMap::new(),
        }
    }

    #[test]
    fn a_finding_that_began_after_a_change_on_its_model_names_it_and_starts_with_it() {
        let events = vec![
            event("2026-01-15T09:01:00Z", EventKind::Restart, "llama", "2 of 3 replicas restarted"),
            event("2026-01-15T09:01:00Z", EventKind::ConfigChange, "llama", "num_gpu_blocks 2000 -> 900 on 2 of 3 replicas"),
            event("2026-01-15T09:02:00Z", EventKind::ConfigChange, "qwen", "block_size 16 -> 32 on 1 of 1 replica"),
        ];
        let mut fs = vec![finding("llama", Some("2026-01-15T09:03:00Z"))];
        built(
            &mut fs,
            &events,
            60,
            t("2026-01-15T08:50:00Z"),
            t("2026-01-15T08:50:00Z") - chrono::Duration::minutes(30),
            &crate::rules::load_builtin().unwrap(),
        );
        let p = fs[0].preceded_by.as_ref().expect("tied");
        assert_eq!(p.event.kind, EventKind::ConfigChange, "the configuration explains more than the restart");
        assert_eq!(p.lead_seconds, 120);
        assert_eq!(p.text, "began 2 min after a configuration change at 09:01:00 UTC: num_gpu_blocks 2000 -> 900 on 2 of 3 replicas");
        assert!(fs[0].steps[0].text().starts_with("Start with the configuration change at 09:01:00 UTC"), "{:?}", fs[0].steps[0]);
        assert_eq!(fs[0].steps.len(), 2);
    }

    #[test]
    fn changes_too_long_before_on_another_model_or_after_the_onset_are_not_blamed() {
        let events = vec![
            event("2026-01-15T08:40:00Z", EventKind::ConfigChange, "llama", "long before"),
            event("2026-01-15T09:02:00Z", EventKind::ConfigChange, "qwen", "another model"),
            event("2026-01-15T09:10:00Z", EventKind::Restart, "llama", "after the onset"),
            event("2026-01-15T09:01:00Z", EventKind::TargetUp, "llama", "never a cause"),
        ];
        let mut fs = vec![finding("llama", Some("2026-01-15T09:03:00Z"))];
        built(
            &mut fs,
            &events,
            60,
            t("2026-01-15T08:50:00Z"),
            t("2026-01-15T08:50:00Z") - chrono::Duration::minutes(30),
            &crate::rules::load_builtin().unwrap(),
        );
        assert_eq!(fs[0].preceded_by, None);
        assert_eq!(fs[0].steps.len(), 1);
    }

    #[test]
    fn a_problem_present_before_the_window_is_tied_to_nothing() {
        let events = vec![event("2026-01-15T09:01:00Z", EventKind::Rollout, "", "Deployment prod/llama generation 4")];
        let mut fs = vec![finding("llama", None)];
        built(
            &mut fs,
            &events,
            60,
            t("2026-01-15T08:50:00Z"),
            t("2026-01-15T08:50:00Z") - chrono::Duration::minutes(30),
            &crate::rules::load_builtin().unwrap(),
        );
        assert_eq!(fs[0].preceded_by, None);
        // A fleet-wide rollout does qualify for a dated finding.
        let mut fs = vec![finding("llama", Some("2026-01-15T09:04:00Z"))];
        built(
            &mut fs,
            &events,
            60,
            t("2026-01-15T08:50:00Z"),
            t("2026-01-15T08:50:00Z") - chrono::Duration::minutes(30),
            &crate::rules::load_builtin().unwrap(),
        );
        assert_eq!(fs[0].preceded_by.as_ref().map(|p| p.event.kind), Some(EventKind::Rollout));
    }

    #[test]
    fn a_wave_spread_over_time_counts_from_its_last_change() {
        let mut e = event("2026-01-15T09:00:00Z", EventKind::Rollout, "llama", "rolling");
        e.until = Some(t("2026-01-15T09:20:00Z"));
        let mut fs = vec![finding("llama", Some("2026-01-15T09:22:00Z"))];
        built(&mut fs, &[e], 60, t("2026-01-15T08:50:00Z"), t("2026-01-15T08:20:00Z"), &pack());
        assert_eq!(fs[0].preceded_by.as_ref().map(|p| p.lead_seconds), Some(22 * 60));
    }

    fn evidence(signal: &str, value: f64, baseline: f64, passed: bool) -> crate::report::Evidence {
        serde_json::from_value(serde_json::json!({
            "signal": signal, "title": signal, "unit": "ratio", "value": value, "baseline": baseline,
            "threshold": "> 0.9", "passed": passed, "query": "q", "metric": "m",
            "limits": [{"label": "> 0.9", "value": 0.9}]
        }))
        .unwrap()
    }

    /// A finding on llama with `evidence`, undated, its onset signal given.
    fn finding_with(rule: &str, evidence: Vec<crate::report::Evidence>, onset_signal: Option<&str>) -> Finding {
        Finding { rule: rule.into(), evidence, onset_signal: onset_signal.map(String::from), ..finding("llama", None) }
    }

    #[test]
    fn a_change_in_the_baseline_is_never_what_a_problem_that_began_in_the_window_followed() {
        // The fleet lab's KV pressure: a restart at the baseline's first second, the problem from
        // 4 min 15 s later, inside the window.
        let (baseline, window) = (t("2026-11-28T02:42:54Z"), t("2026-11-28T02:46:54Z"));
        let events = vec![event("2026-11-28T02:42:54Z", EventKind::Restart, "llama", "1 of 2 replicas restarted")];
        let mut fs = vec![finding("llama", Some("2026-11-28T02:47:09Z"))];
        built(&mut fs, &events, 15, window, baseline, &pack());
        assert_eq!(fs[0].preceded_by, None);
        assert!(fs[0].steps.iter().all(|s| !matches!(s, Step::Change { .. })), "{:?}", fs[0].steps);
        // Nor one there from the window's start, to the baseline's first sample.
        let mut from_start = vec![finding_with("kv-cache-pressure", vec![evidence("kv", 0.99, 0.5, true)], Some("kv"))];
        built(&mut from_start, &events, 15, window, baseline, &pack());
        assert_eq!(from_start[0].preceded_by, None);
    }

    #[test]
    fn a_problem_there_from_the_start_is_tied_to_a_change_just_before_only_when_the_baseline_lacked_it() {
        let start = t("2026-01-15T09:00:00Z");
        let events = vec![event("2026-01-15T08:58:00Z", EventKind::ConfigChange, "llama", "d")];
        let mut new = vec![finding_with("kv-cache-pressure", vec![evidence("kv", 0.99, 0.5, true)], Some("kv"))];
        built(&mut new, &events, 60, start, start - chrono::Duration::minutes(30), &pack());
        let p = new[0].preceded_by.as_ref().expect("tied");
        assert_eq!(p.lead_seconds, 120);
        assert_eq!(p.text, "was there from the window's start at 09:00:00 UTC, 2 min after a configuration change at 08:58:00 UTC: d");
        // The same problem in the baseline too: chronic, tied to nothing.
        let mut chronic = vec![finding_with("kv-cache-pressure", vec![evidence("kv", 0.99, 0.97, true)], Some("kv"))];
        built(&mut chronic, &events, 60, start, start - chrono::Duration::minutes(30), &pack());
        assert_eq!(chronic[0].preceded_by, None);
    }

    #[test]
    fn replicas_gone_date_their_finding_and_the_removal_explains_it() {
        let start = t("2026-01-15T09:00:00Z");
        let events = vec![
            event("2026-01-15T08:50:00Z", EventKind::ReplicaRemoved, "llama", "d"),
            event("2026-01-15T09:12:00Z", EventKind::ReplicaRemoved, "llama", "d"),
        ];
        let mut fs = vec![finding_with("target-down", vec![evidence("replicas_vanished", 2.0, 0.0, true)], None)];
        built(&mut fs, &events, 60, start, start - chrono::Duration::minutes(30), &pack());
        assert_eq!(fs[0].onset, Some(t("2026-01-15T09:12:00Z")), "the first removal in the window, not the one before it");
        assert_eq!(fs[0].preceded_by.as_ref().map(|p| p.event.time), Some(t("2026-01-15T09:12:00Z")));
    }

    #[test]
    fn targets_down_date_their_finding_but_do_not_precede_it() {
        // The real fleet lab's restart: one of two replicas stopped answering scrapes. The finding
        // is dated by that event; it did not follow it, it is it.
        let start = t("2026-01-15T09:00:00Z");
        let events = vec![event("2026-01-15T09:04:00Z", EventKind::TargetDown, "llama", "1 of 2 replicas stopped answering scrapes")];
        let mut fs = vec![finding_with("target-down", vec![evidence("up_min", 0.0, 1.0, true)], None)];
        built(&mut fs, &events, 60, start, start - chrono::Duration::minutes(30), &pack());
        assert_eq!(fs[0].onset, Some(t("2026-01-15T09:04:00Z")));
        assert_eq!(fs[0].preceded_by, None);
        assert!(fs[0].steps.iter().all(|s| !matches!(s, Step::Change { .. })), "{:?}", fs[0].steps);
        // Another finding on the model that began then did follow it.
        let mut later = vec![finding_with("slow-prefill", vec![evidence("prefill_mean", 0.5, 0.1, true)], Some("prefill_mean"))];
        later[0].onset = Some(t("2026-01-15T09:05:00Z"));
        built(&mut later, &events, 60, start, start - chrono::Duration::minutes(30), &pack());
        assert_eq!(later[0].preceded_by.as_ref().map(|p| p.event.kind), Some(EventKind::TargetDown));
        assert!(later[0].steps.iter().all(|s| !matches!(s, Step::Change { .. })), "said once, by its note: {:?}", later[0].steps);
    }
}
