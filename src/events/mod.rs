//! Change events, read from the metrics alone: restarts, targets going down and coming back,
//! replicas and models appearing and vanishing, cache-configuration and image changes, rollouts,
//! GPU XID errors. [`plan`] writes the queries; [`read`] turns their answers into [`Event`]s.
//!
//! The number of queries does not depend on the fleet's size: nine per time span (one span when the
//! baseline and the window are no further apart than the window is long, else one each): range
//! queries over the span at a step of a 60th of it (15 s at least; a 240th when looking for a
//! deploy), and instant queries over the whole span for the changes that need many samples per
//! step to see (counter resets, targets arriving or leaving, new configuration series), each
//! returning only where something changed, so their answers stay small on a quiet fleet of any
//! size. Only when something changed does a second round ([`follow_up`], sent with the findings'
//! follow-ups) date those changes step by step for the targets named and nothing else, ask which
//! models the changed targets, pods and Deployments serve (target-level series such as `up`,
//! `process_start_time_seconds`, kube-state-metrics' and DCGM's carry no model label), the
//! configuration the changed targets started with, and how many replicas each model had (for "2 of
//! 3"): the queries of that round name only the changed targets, but the replica counts, one row
//! per model.
//!
//! How each kind is dated, and how exactly:
//! - `restart`: the value of `process_start_time_seconds` (exact) of every process that started in
//!   the span, under the same series or a new one (a replaced pod); without that series (vLLM in
//!   multiprocess mode exports none), the step at which a vLLM counter reset (within a step; a
//!   replica down longer than [`GAP`] between its two processes is missed there). Resets are
//!   first looked for over the whole span in one evaluation, and dated step by step in the second
//!   round for the replicas that reset only.
//! - `target-down` / `target-up`: the first and the last step with an `up` sample of 0.
//! - `replica-added` / `replica-removed`, `model-added` / `model-removed`: the first and the last
//!   sample of a target's `up` series (within a step), counted only when the target is not seen
//!   again (removed) or was not seen before (added) in the span; a scrape interval over
//!   [`PRESENCE`] would read as flapping and is ignored.
//! - `config-change`: a `vllm:cache_config_info` series appearing with other values of the
//!   configuration labels than its target's previous one.
//! - `rollout`: a Deployment's `kube_deployment_metadata_generation` rising; `version-change`: a
//!   Deployment's pods showing an image they did not run before (`kube_pod_container_info`).
//! - `gpu-error`: `DCGM_FI_DEV_XID_ERRORS` moving to a non-zero code.
//!
//! Changes of one kind on one scope less than [`WAVE`] apart are one event, dated by the first:
//! "2 of 3 replicas restarted".

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::prom::Selector;
use crate::report::{Event, TimeRange};
use crate::source::Request;

mod detect;
mod plan;
#[cfg(test)]
mod tests;

pub use detect::{deployment_of, read};
pub use plan::{follow_up, plan, replica_latency, spans, ReplicaLatency};

/// The longest time between two samples of one replica across which a restart is still seen.
pub const GAP: Duration = Duration::from_secs(600);
/// The range over which a target counts as present: scrape intervals up to this are read right.
pub const PRESENCE: Duration = Duration::from_secs(120);
/// Changes of one kind on one scope closer than this are one event.
pub const WAVE: Duration = Duration::from_secs(300);
/// Steps per span when diagnosing: an event not dated exactly is dated within a sixtieth of the
/// span (a minute for a 30-minute window and its baseline). Every step costs the server a pass
/// over each target's `up`, reset counter and cache-info series, so finer steps are not free.
pub const STEPS: u64 = 60;
/// Steps per span when looking for the last deploy (`check --since deploy`, 6 hours): its time
/// opens the window, so it is dated more finely (90 s over 6 hours).
pub const DEPLOY_STEPS: u64 = 240;
/// The labels of `vllm:cache_config_info` that describe the cache, compared across a change.
/// Per-process labels (`engine`) and target labels are not among them.
pub const CONFIG_LABELS: &[&str] = &[
    "block_size",
    "cache_dtype",
    "num_gpu_blocks",
    "num_gpu_blocks_override",
    "num_cpu_blocks",
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "prefix_caching_hash_algo",
    "sliding_window",
    "swap_space_bytes",
    "cpu_offload_gb",
    "kv_cache_memory_bytes",
    "kv_offloading_backend",
    "kv_offloading_size",
    "calculate_kv_scales",
    "kv_cache_size_tokens",
    "kv_cache_max_concurrency",
];

/// What a request of the plan asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Probe {
    /// Instant: the replicas that changed, with their scope, target and pod.
    Map,
    /// Instant: how many replicas each scope had in the span (one row per scope).
    Counts,
    ProcessStart,
    /// Instant, at the span's end: the replicas whose vLLM counters reset anywhere in the span.
    ResetAny,
    /// Second round, only for those: the step at which each reset.
    CounterReset,
    Down,
    /// Instant, at the span's end: targets seen in the span but not at its start or not at its
    /// end, the only ones that can have been added or removed.
    PresenceAny,
    /// Second round, only for those: the step at which each appeared or vanished.
    Appear,
    Vanish,
    /// Instant, at the span's start: each target's configuration.
    ConfigStart,
    /// Instant, at the span's end: targets with a cache-configuration series the span's start
    /// did not have, the only ones whose configuration can have changed.
    ConfigAny,
    /// Second round, only for those: when each configuration series appeared.
    ConfigAppear,
    Generation,
    /// Instant, at the span's start: each Deployment's images.
    ImageStart,
    ImageAppear,
    Xid,
    /// Second round, only for models with a replica that (re)started: every replica's mean time to
    /// first token and inter-token latency, step by step, for telling a cold start from a regression.
    WarmTtft,
    WarmItl,
}

/// One time span's requests.
#[derive(Debug, Clone)]
pub struct SpanPlan {
    pub span: TimeRange,
    pub step: u64,
    pub requests: Vec<(Probe, Request)>,
    /// For the second round ([`follow_up`]): the replica map's anchor gauge and labels, the
    /// selectors, and the configuration's series name.
    anchor: Option<String>,
    keep: String,
    /// The grouping labels and the replica label, for the replica counts.
    by: String,
    replica_label: String,
    selector: Selector,
    target: Selector,
    config: Option<String>,
    /// The counter whose resets date restarts, and the `resets(...)` query dating them, for the
    /// replicas [`Probe::ResetAny`] names: (counter, grouping labels, range).
    resets: Option<(String, String, Duration)>,
    /// The range over which a target counts as present ([`PRESENCE`], a step at least).
    presence: Duration,
    /// The latency histograms read per replica after a (re)start: (probe, `_sum` and `_count` names).
    warm: Vec<(Probe, String, String)>,
}

/// The event requests of a run and how to read them.
#[derive(Debug, Clone, Default)]
pub struct EventPlan {
    pub spans: Vec<SpanPlan>,
    pub group_by: Vec<String>,
    pub replica_label: String,
    /// Where the data itself begins, when the source knows (`--scrape`: its first round). What
    /// appears with it was first seen, not added.
    pub data_start: Option<DateTime<Utc>>,
}

impl EventPlan {
    pub fn requests(&self) -> Vec<Request> {
        self.spans.iter().flat_map(|s| s.requests.iter().map(|(_, r)| r.clone())).collect()
    }

    /// The coarsest step used: how precisely events are dated.
    pub fn step(&self) -> u64 {
        self.spans.iter().map(|s| s.step).max().unwrap_or(15)
    }
}

/// Where the run looks and with which names.
#[derive(Debug, Clone)]
pub struct EventContext<'a> {
    pub selector: &'a Selector,
    pub group_by: &'a [String],
    pub replica_label: &'a str,
    /// vLLM metric names present in the baseline or the window.
    pub names: &'a BTreeSet<String>,
    /// Steps per span ([`STEPS`] or [`DEPLOY_STEPS`]).
    pub steps: u64,
}

/// The deploy among `events`: the start of the last wave of rollouts, restarts, configuration or
/// version changes (events of those kinds less than [`WAVE`] apart, across scopes, are one wave).
pub fn last_deploy(events: &[Event]) -> Option<&Event> {
    let mut deploys: Vec<&Event> = events.iter().filter(|e| e.kind.is_deploy()).collect();
    deploys.sort_by_key(|e| e.time);
    let wave = chrono::Duration::from_std(WAVE).unwrap_or_default();
    let mut start = *deploys.last()?;
    for e in deploys.iter().rev() {
        if start.time - e.until.unwrap_or(e.time) <= wave {
            if e.time <= start.time {
                start = e;
            }
        } else {
            break;
        }
    }
    Some(start)
}
