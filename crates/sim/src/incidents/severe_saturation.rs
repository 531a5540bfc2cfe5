//! `severe-saturation` and its near miss.

use super::*;

/// Overload plus degraded steps: queue, TTFT and ITL all up, no preemption, and the engine
/// completes barely more than before (a larger batch alone would turn out more tokens).
pub struct SevereSaturation;

impl Incident for SevereSaturation {
    fn name(&self) -> &'static str {
        "severe-saturation"
    }

    fn params(&self) -> StateParams {
        overloaded(2.4)
    }
}

/// The same overload with steps x1.35 slower: queue and TTFT cross their bars, ITL P95 reads
/// about x1.34 where severe-saturation needs 1.5x (or over 100 ms): load-exceeds-capacity's.
pub struct SevereSaturationNear;

impl Incident for SevereSaturationNear {
    fn name(&self) -> &'static str {
        "severe-saturation-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::SevereSaturation)
    }

    fn params(&self) -> StateParams {
        overloaded(1.35)
    }
}

// Degraded, not just busy: on a real engine a batch that grows with the load also turns out more
// tokens per second (ITL rises through the batch size; that is load-exceeds-capacity). Here the
// steps slow down so much that the engine completes barely more than before while the queue grows.
fn overloaded(itl: f64) -> StateParams {
    StateParams {
        arrivals: 1.1,
        arrivals_at_end: 1.1,
        queue_median_s: 2.5,
        queue_sigma: 0.5,
        itl,
        running: Running::AtCap,
        waiting: Level::Wander(25.0, 60.0),
        kv_usage: Level::Wander(0.78, 0.84),
        ..StateParams::HEALTHY
    }
}
