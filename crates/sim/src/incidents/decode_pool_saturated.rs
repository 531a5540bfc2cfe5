//! `decode-pool-saturated` and its near miss.

use super::*;

/// The reverse: the decode workers queue, the prefill workers stay as they were.
pub struct DecodePoolSaturated;

impl Incident for DecodePoolSaturated {
    fn name(&self) -> &'static str {
        "decode-pool-saturated"
    }

    fn needs(&self) -> Needs {
        Needs { router: true, router_pd: true, min_replicas: 4, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams {
            scope: Scope::DecodePool,
            queue_median_s: 1.5,
            queue_sigma: 0.5,
            running: Running::AtCap,
            waiting: Level::Wander(15.0, 40.0),
            ..StateParams::HEALTHY
        }
    }
}

/// The decode workers hold 3 to 4.5 waiting each: under a backlog.
pub struct DecodePoolSaturatedNear;

impl Incident for DecodePoolSaturatedNear {
    fn name(&self) -> &'static str {
        "decode-pool-saturated-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::DecodePoolSaturated)
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::DecodePool, waiting: Level::Wander(3.0, 4.5), ..StateParams::HEALTHY }
    }
}
