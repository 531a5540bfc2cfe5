//! `gpu-throttling` and its near miss.

use super::*;

/// Every GPU of the model is thermally throttled: SM clock 1980 -> 1200 MHz, ITL x1.8.
pub struct GpuThrottling;

impl Incident for GpuThrottling {
    fn name(&self) -> &'static str {
        "gpu-throttling"
    }

    fn needs(&self) -> Needs {
        Needs { dcgm: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        // Thermal throttling slows every kernel: decode by the clock ratio and more (x1.95
        // underneath, x1.8 as histogram_quantile reads it), prefill a bit less.
        StateParams {
            itl: 1.95,
            prefill: 1.5,
            gpu: GpuParams { sm_clock_mhz: (1185.0, 1215.0), temp_c: (86.0, 90.0), power_w: (400.0, 440.0), throttle_reasons: 0x40, ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}

/// Clocks dip to 1900 MHz without a throttle reason; ITL unchanged.
pub struct GpuThrottlingNear;

impl Incident for GpuThrottlingNear {
    fn name(&self) -> &'static str {
        "gpu-throttling-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::GpuThrottling)
    }

    fn params(&self) -> StateParams {
        StateParams { gpu: GpuParams { sm_clock_mhz: (1890.0, 1910.0), temp_c: (66.0, 72.0), ..GpuParams::HEALTHY }, ..StateParams::HEALTHY }
    }
}
