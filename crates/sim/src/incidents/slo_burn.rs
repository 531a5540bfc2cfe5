//! `slo-burn` and its near miss.

use super::*;

/// From 60 minutes before the window's end, 30% of requests miss a 500 ms TTFT target.
pub struct SloBurn;

impl Incident for SloBurn {
    fn name(&self) -> &'static str {
        "slo-burn"
    }

    fn params(&self) -> StateParams {
        // A slower prefill that has been there long before the window: 70% of first tokens
        // inside 500 ms, so a comparison with the baseline sees nothing.
        StateParams { onset: Onset::BeforeEnd { secs: 3600 }, prefill: 6.5, ..StateParams::HEALTHY }
    }
}

/// About 0.5% of requests miss it.
pub struct SloBurnNear;

impl Incident for SloBurnNear {
    fn name(&self) -> &'static str {
        "slo-burn-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::SloBurn)
    }

    fn params(&self) -> StateParams {
        StateParams { onset: Onset::BeforeEnd { secs: 3600 }, prefill: 1.3, ..StateParams::HEALTHY }
    }
}
