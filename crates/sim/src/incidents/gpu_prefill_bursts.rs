//! `gpu-prefill-bursts` and its near miss.

use super::*;

/// Prefill bursts among decode, as the real H200 ran them (a third of the time compute-bound
/// at the power cap), against an all-decode baseline: busy, not faulty.
pub struct GpuPrefillBursts;

impl Incident for GpuPrefillBursts {
    fn name(&self) -> &'static str {
        "gpu-prefill-bursts"
    }

    /// GPUs held at their power cap by the work they are given: gpu-power-capped's story.
    fn rule(&self) -> &'static str {
        "gpu-power-capped"
    }

    fn needs(&self) -> Needs {
        Needs { real_gpu: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { gpu: GpuParams { compute_share: 0.33, ..GpuParams::HEALTHY }, ..StateParams::HEALTHY }
    }
}

/// Prefill bursts in 3% of the scrapes: the most capped GPU reads the power cap (0x4) in 4 of
/// the window's 60 scrapes (6.7%) where gpu-power-capped needs 10% (6). The share is drawn
/// scrape by scrape, so a GPU's count spreads (binomial): at 5% or more a third of the seeds
/// put some GPU at 10%.
pub struct GpuPrefillBurstsNear;

impl Incident for GpuPrefillBurstsNear {
    fn name(&self) -> &'static str {
        "gpu-prefill-bursts-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::GpuPrefillBursts)
    }

    fn params(&self) -> StateParams {
        StateParams { gpu: GpuParams { compute_share: 0.03, ..GpuParams::HEALTHY }, ..StateParams::HEALTHY }
    }
}
