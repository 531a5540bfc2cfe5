//! `prefill-starvation` and its near miss.

use super::*;

/// Long outputs keep every batch slot busy decoding: the queue grows, TTFT explodes, ITL is fine.
pub struct PrefillStarvation;

impl Incident for PrefillStarvation {
    fn name(&self) -> &'static str {
        "prefill-starvation"
    }

    fn params(&self) -> StateParams {
        // Outputs five times longer (max_tokens four times higher) at the rate the full batch
        // can finish them, plus 2% more: every slot decodes, the excess queues and its wait
        // follows the queue's length.
        StateParams {
            arrivals: 1.02,
            arrivals_at_end: 1.02,
            arrivals_at_capacity: true,
            output: 5.0,
            max_tokens: 4.0,
            itl: 1.03,
            running: Running::AtCap,
            waiting: Level::Ramp(0.0, 60.0),
            queue_follows_waiting: true,
            queue_median_s: 0.3,
            queue_sigma: 0.35,
            kv_usage: Level::Wander(0.82, 0.88),
            gpu: GpuParams { util: (92.0, 98.0), ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}

/// Longer outputs and more running requests, but below the cap and with no queue.
pub struct PrefillStarvationNear;

impl Incident for PrefillStarvationNear {
    fn name(&self) -> &'static str {
        "prefill-starvation-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::PrefillStarvation)
    }

    fn params(&self) -> StateParams {
        // Outputs x3 from clients that send fewer requests: running x1.4, far below the cap.
        StateParams { arrivals: 0.47, arrivals_at_end: 0.47, output: 3.0, max_tokens: 3.0, kv_usage: Level::Wander(0.45, 0.7), ..StateParams::HEALTHY }
    }
}
