//! `kv-cache-pressure` (no near miss).

use super::*;

/// The KV cache is full and running requests are preempted.
pub struct KvCachePressure;

impl Incident for KvCachePressure {
    fn name(&self) -> &'static str {
        "kv-cache-pressure"
    }

    fn params(&self) -> StateParams {
        StateParams {
            queue_median_s: 0.8,
            queue_sigma: 0.6,
            // preempted requests recompute their prompt
            prefill: 1.5,
            itl: 1.3,
            waiting: Level::Wander(5.0, 20.0),
            kv_usage: Level::Wander(0.955, 1.0),
            preemptions_per_s: (0.8, 2.5),
            ..StateParams::HEALTHY
        }
    }
}
