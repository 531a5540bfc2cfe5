//! `repeated-preemption` and its near miss.

use super::*;

/// A full cache preempts about one request in eight, each five times before it completes: 0.6
/// preemptions per finished request, but the same requests evicted again and again.
pub struct RepeatedPreemption;

impl Incident for RepeatedPreemption {
    fn name(&self) -> &'static str {
        "repeated-preemption"
    }

    /// Requests preempted again and again are recompute-thrashing's story.
    fn rule(&self) -> &'static str {
        "recompute-thrashing"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams {
            queue_median_s: 0.8,
            queue_sigma: 0.6,
            prefill: 1.4,
            itl: 1.3,
            waiting: Level::Wander(5.0, 20.0),
            kv_usage: Level::Wander(0.955, 1.0),
            preemptions_per_request: 0.6,
            preemptions_each: 5.0,
            ..StateParams::HEALTHY
        }
    }
}

/// A full cache preempts 60% of the requests once each: the same 0.6 preemptions per finished
/// request, none of them twice.
pub struct RepeatedPreemptionNear;

impl Incident for RepeatedPreemptionNear {
    fn name(&self) -> &'static str {
        "repeated-preemption-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RepeatedPreemption)
    }

    fn params(&self) -> StateParams {
        StateParams {
            queue_median_s: 0.8,
            queue_sigma: 0.6,
            prefill: 1.4,
            itl: 1.3,
            waiting: Level::Wander(5.0, 20.0),
            kv_usage: Level::Wander(0.955, 1.0),
            preemptions_per_request: 0.6,
            ..StateParams::HEALTHY
        }
    }
}
