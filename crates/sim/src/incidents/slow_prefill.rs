//! `slow-prefill` and its near miss.

use super::*;

/// Prefill got slower (longer prompts to compute, a slower kernel): TTFT up, queue fine.
pub struct SlowPrefill;

impl Incident for SlowPrefill {
    fn name(&self) -> &'static str {
        "slow-prefill"
    }

    fn params(&self) -> StateParams {
        StateParams { prefill: 6.0, ..StateParams::HEALTHY }
    }
}

/// Prefill x1.45 underneath: its mean reads x1.4 where slow-prefill needs 1.5x (the first
/// step, in it too, does not slow), TTFT P95 x1.44 (about 0.35 s) where it needs 2x or 3 s.
pub struct SlowPrefillNear;

impl Incident for SlowPrefillNear {
    fn name(&self) -> &'static str {
        "slow-prefill-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::SlowPrefill)
    }

    fn params(&self) -> StateParams {
        StateParams { prefill: 1.45, ..StateParams::HEALTHY }
    }
}
