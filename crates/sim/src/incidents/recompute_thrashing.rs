//! `recompute-thrashing` and its near miss.

use super::*;

/// A full cache preempts every request about 1.5 times and recomputes a quarter of the prompt tokens.
pub struct RecomputeThrashing;

impl Incident for RecomputeThrashing {
    fn name(&self) -> &'static str {
        "recompute-thrashing"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams {
            queue_median_s: 1.0,
            queue_sigma: 0.5,
            prefill: 1.5,
            itl: 1.3,
            waiting: Level::Wander(5.0, 20.0),
            kv_usage: Level::Wander(0.97, 1.0),
            preemptions_per_request: 1.5,
            recomputed_share: 0.25,
            ..StateParams::HEALTHY
        }
    }
}

/// Two short bursts of preemption, 1% recomputed tokens, cache below 85%.
pub struct RecomputeThrashingNear;

impl Incident for RecomputeThrashingNear {
    fn name(&self) -> &'static str {
        "recompute-thrashing-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RecomputeThrashing)
    }

    fn params(&self) -> StateParams {
        StateParams {
            kv_usage: Level::Wander(0.6, 0.85),
            preemptions_per_s: (0.05, 0.05),
            preemption_bursts: &[(0.25, 0.3), (0.65, 0.7)],
            recomputed_share: 0.01,
            ..StateParams::HEALTHY
        }
    }
}
