//! Stage: correlate. A finding whose onset follows a change on its scope closely is tied to it: its
//! evidence says so (`preceded_by`) and its first step points at the change. No query of its own.
//!
//! An event qualifies when it happened to the finding's scope (or to no scope in particular, like a
//! rollout of a Deployment no replica could be tied to) and the finding began at most
//! [`LEAD_STEPS`] trend steps (5 minutes at least) after it, or after its last change for a wave
//! spread over time, or at most one step before it (both are dated to within a step). Among several,
//! the kind that changes most comes first (configuration, version, rollout, GPU error, replicas
//! removed, restart, ...), then the closest. A finding present before the window, or not dated,
//! is tied to nothing: a change cannot explain what was already there.

use chrono::{DateTime, Utc};

use crate::report::{Event, EventKind, Finding, PrecededBy};

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

/// The event `f` began after, if any (see the module documentation).
pub fn preceding<'a>(f: &Finding, events: &'a [Event], step: u64) -> Option<(&'a Event, i64)> {
    let onset = f.onset?;
    let step = step.max(1) as i64;
    let lead_max = (LEAD_STEPS * step).max(MIN_LEAD_SECONDS);
    events
        .iter()
        .filter(|e| e.scope.iter().all(|(k, v)| f.scope.get(k) == Some(v)))
        .filter_map(|e| {
            let r = rank(e.kind)?;
            let lead = (onset - e.time).num_seconds();
            let last = (onset - e.until.unwrap_or(e.time)).num_seconds();
            (lead >= -step && last <= lead_max).then_some((r, lead.abs(), e, lead))
        })
        .min_by_key(|(r, dist, _, _)| (*r, *dist))
        .map(|(_, _, e, lead)| (e, lead))
}

/// Tie every dated finding to the change it followed, if any.
pub fn apply(findings: &mut [Finding], events: &[Event], step: u64) {
    for f in findings.iter_mut() {
        let Some((e, lead)) = preceding(f, events, step) else { continue };
        let text = sentence(e, lead);
        f.steps.insert(0, first_step(e));
        f.preceded_by = Some(PrecededBy { event: e.clone(), lead_seconds: lead, text });
    }
}

fn clock(t: &DateTime<Utc>) -> String {
    t.format("%H:%M UTC").to_string()
}

fn lead_phrase(lead: i64) -> String {
    match lead {
        l if l < 60 => "right after".to_string(),
        l if l < 3600 => format!("{} min after", (l + 30) / 60),
        l => format!("{} h {} min after", l / 3600, (l % 3600 + 30) / 60),
    }
}

/// "began 2 min after a configuration change at 09:01 UTC: num_gpu_blocks 2000 -> 900 on 2 of 3 replicas".
pub fn sentence(e: &Event, lead: i64) -> String {
    let what = match e.kind {
        EventKind::ConfigChange => "a configuration change",
        EventKind::VersionChange => "a version change",
        EventKind::Rollout => "a rollout",
        EventKind::GpuError => "a GPU error",
        EventKind::ReplicaRemoved => "a scale-down",
        EventKind::ReplicaAdded => "a scale-up",
        EventKind::ModelAdded => "the model's first replicas came up",
        EventKind::Restart => "a restart",
        EventKind::TargetDown => "targets going down",
        _ => e.kind.as_str(),
    };
    format!("began {} {what} at {}: {}", lead_phrase(lead), clock(&e.time), e.detail)
}

/// The step to take first, pointing at the change.
pub fn first_step(e: &Event) -> String {
    let at = clock(&e.time);
    match e.kind {
        EventKind::ConfigChange => format!(
            "Start with the configuration change at {at} ({}): roll it back, or compare it with the last healthy configuration, before tuning anything else.",
            e.detail
        ),
        EventKind::VersionChange | EventKind::Rollout => format!(
            "Start with the rollout at {at} ({}): compare the new release with the previous one (image, engine flags, model revision) and roll back if the regression holds.",
            e.detail
        ),
        EventKind::GpuError => format!("Start with the GPU error at {at} ({}): cordon the node and check the driver log for the XID before anything else.", e.detail),
        EventKind::ReplicaRemoved => format!("Start with the scale-down at {at} ({}): restore the capacity, or check what removed it (autoscaler, eviction, failed pods).", e.detail),
        EventKind::Restart => format!(
            "Start with the restart at {at} ({}): find out why the replicas restarted (deploy, OOM kill, crash) and whether they came back with the same flags and model.",
            e.detail
        ),
        _ => format!("Start with what changed at {at}: {} ({}).", e.kind, e.detail),
    }
}
