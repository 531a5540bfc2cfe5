//! `gpu-underutilized` and its near miss.

use super::*;

/// A tenth of the traffic: tiny batches, an idle GPU, healthy latency.
pub struct GpuUnderutilized;

impl Incident for GpuUnderutilized {
    fn name(&self) -> &'static str {
        "gpu-underutilized"
    }

    fn params(&self) -> StateParams {
        StateParams {
            arrivals: 0.1,
            arrivals_at_end: 0.1,
            waiting: Level::Wander(0.0, 0.0),
            kv_usage: Level::Wander(0.02, 0.08),
            gpu: GpuParams { util: (12.0, 18.0), power_w: (170.0, 220.0), temp_c: (40.0, 46.0), ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}

/// Half the traffic.
pub struct GpuUnderutilizedNear;

impl Incident for GpuUnderutilizedNear {
    fn name(&self) -> &'static str {
        "gpu-underutilized-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::GpuUnderutilized)
    }

    fn params(&self) -> StateParams {
        StateParams {
            arrivals: 0.5,
            arrivals_at_end: 0.5,
            kv_usage: Level::Wander(0.15, 0.3),
            gpu: GpuParams { util: (55.0, 68.0), power_w: (380.0, 440.0), temp_c: (52.0, 58.0), ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}
