//! `workload-shift` and its near miss.

use super::*;

/// Prompts three times longer: TTFT doubles because prefill has more to do, not because of queueing.
pub struct WorkloadShift;

impl Incident for WorkloadShift {
    fn name(&self) -> &'static str {
        "workload-shift"
    }

    fn params(&self) -> StateParams {
        StateParams { prompt: 3.0, kv_usage: Level::Wander(0.45, 0.75), ..StateParams::HEALTHY }
    }
}

/// Prompts 20% longer; latency unchanged.
pub struct WorkloadShiftNear;

impl Incident for WorkloadShiftNear {
    fn name(&self) -> &'static str {
        "workload-shift-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::WorkloadShift)
    }

    fn params(&self) -> StateParams {
        StateParams { prompt: 1.2, ..StateParams::HEALTHY }
    }
}
