//! Changes to the fleet found in the data (restarts, configuration and version changes) that a
//! finding may have begun after.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::*;

/// What kind of change an [`Event`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A replica's process started again (its start time moved, or its vLLM counters reset).
    Restart,
    /// A target stopped answering its scrapes (`up` 0).
    TargetDown,
    /// A target that was down answers again.
    TargetUp,
    /// A replica's series appeared after the start of the data.
    ReplicaAdded,
    /// A replica's series stopped: it left service discovery.
    ReplicaRemoved,
    /// `vllm:cache_config_info` changed its labels (`num_gpu_blocks`, `block_size`, ...).
    ConfigChange,
    /// The image serving a model changed (kube-state-metrics' `kube_pod_container_info`).
    VersionChange,
    /// A model's first replica appeared.
    ModelAdded,
    /// A model's last replica vanished.
    ModelRemoved,
    /// A Deployment's generation moved (kube-state-metrics): a new revision was rolled out.
    Rollout,
    /// A GPU reported an XID error (DCGM).
    GpuError,
}

impl EventKind {
    pub const ALL: [EventKind; 11] = [
        EventKind::Restart,
        EventKind::TargetDown,
        EventKind::TargetUp,
        EventKind::ReplicaAdded,
        EventKind::ReplicaRemoved,
        EventKind::ConfigChange,
        EventKind::VersionChange,
        EventKind::ModelAdded,
        EventKind::ModelRemoved,
        EventKind::Rollout,
        EventKind::GpuError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Restart => "restart",
            EventKind::TargetDown => "target-down",
            EventKind::TargetUp => "target-up",
            EventKind::ReplicaAdded => "replica-added",
            EventKind::ReplicaRemoved => "replica-removed",
            EventKind::ConfigChange => "config-change",
            EventKind::VersionChange => "version-change",
            EventKind::ModelAdded => "model-added",
            EventKind::ModelRemoved => "model-removed",
            EventKind::Rollout => "rollout",
            EventKind::GpuError => "gpu-error",
        }
    }

    /// The kind as a sentence names it: `a configuration change`, `a restart` (`target-up` and
    /// `model-removed` by their names).
    pub fn phrase(self) -> &'static str {
        match self {
            EventKind::ConfigChange => "a configuration change",
            EventKind::VersionChange => "a version change",
            EventKind::Rollout => "a rollout",
            EventKind::GpuError => "a GPU error",
            EventKind::ReplicaRemoved => "a scale-down",
            EventKind::ReplicaAdded => "a scale-up",
            EventKind::ModelAdded => "the model's first replicas came up",
            EventKind::Restart => "a restart",
            EventKind::TargetDown => "targets going down",
            EventKind::TargetUp | EventKind::ModelRemoved => self.as_str(),
        }
    }

    /// Whether this kind marks a deploy (`check --since deploy` starts at the last one).
    pub fn is_deploy(self) -> bool {
        matches!(self, EventKind::Rollout | EventKind::Restart | EventKind::ConfigChange | EventKind::VersionChange)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change seen in the metrics. Changes of several replicas of one scope close together are one
/// event ("2 of 3 replicas restarted"), dated by the first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub time: DateTime<Utc>,
    pub kind: EventKind,
    /// The grouping labels of the model it happened to (`{}` when it cannot be tied to one).
    pub scope: Scope,
    /// One line, e.g. "2 of 3 replicas restarted" or "num_gpu_blocks 2000 -> 900".
    pub detail: String,
    /// The replicas it happened to, by the replica label (sorted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<String>,
    /// How many replicas the scope had just before (for "2 of 3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<usize>,
    /// The last of the changes merged into this event, when they spread over time (a rolling restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// For configuration and version changes: the labels that changed, before and after.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub before: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub after: BTreeMap<String, String>,
}

impl Event {
    /// The step a finding that began after this event takes first. Explain puts one at the head of
    /// the steps only for a kind [`Event::step_naming_it`] names; the words for any other kind are
    /// for a report that holds one (an older report read back).
    pub fn first_step(&self) -> String {
        self.step_naming_it().unwrap_or_else(|| format!("Start with what changed at {}: {} ({}).", self.clock(), self.kind, self.detail))
    }

    /// The first step of a kind whose runbook starts at the change itself (a configuration change,
    /// a rollout, a GPU error, a scale-down, a restart), which names the change so that a report
    /// need not say it again; `None` for the others.
    pub fn step_naming_it(&self) -> Option<String> {
        let (at, d) = (self.clock(), &self.detail);
        Some(match self.kind {
            EventKind::ConfigChange => {
                format!("Start with the configuration change at {at} ({d}): roll it back, or compare it with the last healthy configuration, before tuning anything else.")
            }
            EventKind::VersionChange | EventKind::Rollout => format!(
                "Start with the rollout at {at} ({d}): compare the new release with the previous one (image, engine flags, model revision) and roll back if the regression holds."
            ),
            EventKind::GpuError => format!("Start with the GPU error at {at} ({d}): cordon the node and check the driver log for the XID before anything else."),
            EventKind::ReplicaRemoved => format!("Start with the scale-down at {at} ({d}): restore the capacity, or check what removed it (autoscaler, eviction, failed pods)."),
            EventKind::Restart => format!(
                "Start with the restart at {at} ({d}): find out why the replicas restarted (deploy, OOM kill, crash) and whether they came back with the same flags and model."
            ),
            _ => return None,
        })
    }

    fn clock(&self) -> String {
        self.time.format("%H:%M:%S UTC").to_string()
    }
}
