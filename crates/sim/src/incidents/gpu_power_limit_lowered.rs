//! `gpu-power-limit-lowered` and its near miss.

use super::*;

/// The model's GPUs capped at 450 W of the board's 700 W: decode-shaped load hits the cap too,
/// clocks cut; ITL x1.2.
pub struct GpuPowerLimitLowered;

impl Incident for GpuPowerLimitLowered {
    fn name(&self) -> &'static str {
        "gpu-power-limit-lowered"
    }

    fn needs(&self) -> Needs {
        Needs { real_gpu: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { itl: 1.2, gpu: GpuParams { power_limit_w: 450.0, ..GpuParams::HEALTHY }, ..StateParams::HEALTHY }
    }
}

/// Capped at 680 W: the real draw stays under it while decoding.
pub struct GpuPowerLimitLoweredNear;

impl Incident for GpuPowerLimitLoweredNear {
    fn name(&self) -> &'static str {
        "gpu-power-limit-lowered-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::GpuPowerLimitLowered)
    }

    fn params(&self) -> StateParams {
        StateParams { gpu: GpuParams { power_limit_w: 680.0, ..GpuParams::HEALTHY }, ..StateParams::HEALTHY }
    }
}
