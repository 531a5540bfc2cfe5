//! `throughput-stall` and its near miss.

use super::*;

/// For the last 10 minutes nothing completes and no token is generated while requests sit in the batch.
pub struct ThroughputStall;

impl Incident for ThroughputStall {
    fn name(&self) -> &'static str {
        "throughput-stall"
    }

    fn params(&self) -> StateParams {
        StateParams {
            onset: Onset::BeforeEnd { secs: 600 },
            serving: false,
            running: Running::Around(9.0, 11.0),
            waiting: Level::Accumulate,
            kv_usage: Level::Hold,
            ..StateParams::HEALTHY
        }
    }
}

/// For the last 10 minutes nothing arrives and the batch drains: an idle model, not a stall.
pub struct ThroughputStallNear;

impl Incident for ThroughputStallNear {
    fn name(&self) -> &'static str {
        "throughput-stall-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::ThroughputStall)
    }

    fn params(&self) -> StateParams {
        StateParams {
            onset: Onset::BeforeEnd { secs: 600 },
            arrivals: 0.0,
            arrivals_at_end: 0.0,
            waiting: Level::Wander(0.0, 0.0),
            kv_usage: Level::Wander(0.0, 0.0),
            gpu: GpuParams { util: (0.0, 0.0), power_w: (68.0, 75.0), temp_c: (34.0, 38.0), ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}
