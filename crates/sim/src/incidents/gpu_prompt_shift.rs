//! `gpu-prompt-shift` and its near miss.

use super::*;

/// Prompts four times longer on a model whose GPUs replay the real H200: compute-bound most of
/// the time, at the power cap (0x4) with the clock 25% down, no fault reason.
pub struct GpuPromptShift;

impl Incident for GpuPromptShift {
    fn name(&self) -> &'static str {
        "gpu-prompt-shift"
    }

    /// Longer prompts are workload-shift's story; the GPUs only show it.
    fn rule(&self) -> &'static str {
        "workload-shift"
    }

    fn needs(&self) -> Needs {
        Needs { real_gpu: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        // Four times the prompt: prefill dominates, the GPUs sit at their power cap.
        StateParams { prompt: 4.0, kv_usage: Level::Wander(0.45, 0.75), gpu: GpuParams { compute_share: 0.85, ..GpuParams::HEALTHY }, ..StateParams::HEALTHY }
    }
}

/// Prompts 1.3x, the GPUs at the cap a seventh of the time.
pub struct GpuPromptShiftNear;

impl Incident for GpuPromptShiftNear {
    fn name(&self) -> &'static str {
        "gpu-prompt-shift-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::GpuPromptShift)
    }

    fn params(&self) -> StateParams {
        StateParams { prompt: 1.3, gpu: GpuParams { compute_share: 0.15, ..GpuParams::HEALTHY }, ..StateParams::HEALTHY }
    }
}
