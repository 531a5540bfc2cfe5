//! `slow-input-processing` and its near miss.

use super::*;

/// Requests take 1.5 s longer to reach the engine (a slow tokenizer, a starved API server):
/// TTFT up, queue, prefill and decode unchanged.
pub struct SlowInputProcessing;

impl Incident for SlowInputProcessing {
    fn name(&self) -> &'static str {
        "slow-input-processing"
    }

    fn params(&self) -> StateParams {
        // Time before the engine queues the request, in TTFT (and E2E) only.
        StateParams { input_s: 1.5, ..StateParams::HEALTHY }
    }
}

/// 0.1 s longer before the engine: TTFT barely moves.
pub struct SlowInputProcessingNear;

impl Incident for SlowInputProcessingNear {
    fn name(&self) -> &'static str {
        "slow-input-processing-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::SlowInputProcessing)
    }

    fn params(&self) -> StateParams {
        StateParams { input_s: 0.1, ..StateParams::HEALTHY }
    }
}
