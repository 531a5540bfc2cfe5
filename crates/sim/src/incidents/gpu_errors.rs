//! `gpu-errors` and its near miss.

use super::*;

/// One replica's GPU reports XID 79 (fallen off the bus) for the last 10 minutes and stops serving.
pub struct GpuErrors;

impl Incident for GpuErrors {
    fn name(&self) -> &'static str {
        "gpu-errors"
    }

    fn needs(&self) -> Needs {
        Needs { dcgm: true, uses_replica: true, ..Needs::default() }
    }

    fn true_event(&self, node: &str) -> Option<(&'static str, String)> {
        Some(("gpu-error", format!("XID 79 on {node}")))
    }

    fn params(&self) -> StateParams {
        // XID 79: the GPU fell off the bus. The engine hangs with its batch; the router keeps sending.
        StateParams {
            onset: Onset::BeforeEnd { secs: 600 },
            scope: Scope::Replica,
            serving: false,
            running: Running::Hold,
            waiting: Level::Accumulate,
            kv_usage: Level::Hold,
            gpu: GpuParams { util: (0.0, 0.0), power_w: (60.0, 70.0), temp_c: (38.0, 44.0), xid: 79, ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}

/// XID stays 0.
pub struct GpuErrorsNear;

impl Incident for GpuErrorsNear {
    fn name(&self) -> &'static str {
        "gpu-errors-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::GpuErrors)
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::Replica, ..StateParams::HEALTHY }
    }
}
