//! `priority-preemption` and its near miss.

use super::*;

/// Requests preempted for higher-priority ones (`--scheduling-policy priority`): preemptions as
/// often as under KV pressure, 95% of them for priority, the cache at 60-75%.
pub struct PriorityPreemption;

impl Incident for PriorityPreemption {
    fn name(&self) -> &'static str {
        "priority-preemption"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        // The scheduler evicts low-priority requests for high-priority arrivals: as many
        // preemptions as KV pressure brings, with room left in the cache.
        StateParams {
            queue_median_s: 0.4,
            queue_sigma: 0.6,
            waiting: Level::Wander(2.0, 8.0),
            kv_usage: Level::Wander(0.6, 0.75),
            preemptions_per_s: (0.8, 2.5),
            preemption_priority_share: 0.95,
            ..StateParams::HEALTHY
        }
    }
}

/// A few priority preemptions (0.03/s), the cache at 60-75%, as in the baseline: the policy was
/// on all along.
pub struct PriorityPreemptionNear;

impl Incident for PriorityPreemptionNear {
    fn name(&self) -> &'static str {
        "priority-preemption-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::PriorityPreemption)
    }

    fn params(&self) -> StateParams {
        StateParams {
            onset: Onset::BaselineStart,
            kv_usage: Level::Wander(0.6, 0.75),
            preemptions_per_s: (0.03, 0.03),
            preemption_priority_share: 1.0,
            ..StateParams::HEALTHY
        }
    }
}
