//! `gpu-thermal-slowdown` and its near miss.

use super::*;

/// One replica's GPU too hot: hardware thermal slowdown (0x40) laid over its real samples,
/// SM clock about 1200 MHz, 86-90 °C, its ITL x1.95.
pub struct GpuThermalSlowdown;

impl Incident for GpuThermalSlowdown {
    fn name(&self) -> &'static str {
        "gpu-thermal-slowdown"
    }

    /// A GPU slowed by its temperature: gpu-throttling's story, on one replica.
    fn rule(&self) -> &'static str {
        "gpu-throttling"
    }

    fn needs(&self) -> Needs {
        Needs { real_gpu: true, uses_replica: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams {
            scope: Scope::Replica,
            itl: 1.95,
            prefill: 1.5,
            gpu: GpuParams { sm_clock_mhz: (1185.0, 1215.0), temp_c: (86.0, 90.0), throttle_reasons: 0x40, ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}

/// One replica's GPU runs hot (80-83 °C) with no reason set and its clock intact.
pub struct GpuThermalSlowdownNear;

impl Incident for GpuThermalSlowdownNear {
    fn name(&self) -> &'static str {
        "gpu-thermal-slowdown-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::GpuThermalSlowdown)
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::Replica, gpu: GpuParams { temp_c: (80.0, 83.0), ..GpuParams::HEALTHY }, ..StateParams::HEALTHY }
    }
}
