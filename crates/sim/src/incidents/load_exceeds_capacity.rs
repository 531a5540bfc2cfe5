//! `load-exceeds-capacity` and its near miss.

use super::*;

/// More requests than the servers can batch: queueing, no preemption.
pub struct LoadExceedsCapacity;

impl Incident for LoadExceedsCapacity {
    fn name(&self) -> &'static str {
        "load-exceeds-capacity"
    }

    fn params(&self) -> StateParams {
        StateParams {
            arrivals: 2.5,
            arrivals_at_end: 2.5,
            queue_median_s: 1.5,
            queue_sigma: 0.5,
            itl: 1.05,
            running: Running::AtCap,
            waiting: Level::Wander(15.0, 40.0),
            kv_usage: Level::Wander(0.7, 0.85),
            ..StateParams::HEALTHY
        }
    }
}

/// A queue blip: about 30 requests wait per replica for a minute in the middle of the window,
/// then drain; arrivals unchanged.
pub struct LoadExceedsCapacityNear;

impl Incident for LoadExceedsCapacityNear {
    fn name(&self) -> &'static str {
        "load-exceeds-capacity-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::LoadExceedsCapacity)
    }

    fn params(&self) -> StateParams {
        StateParams { waiting: Level::Wander(25.0, 35.0), waiting_bursts: &[(0.45, 0.483)], ..StateParams::HEALTHY }
    }
}
