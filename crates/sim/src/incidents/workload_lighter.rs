//! `workload-lighter` and its near miss.

use super::*;

/// Prompts 0.4 times as long (a shorter system prompt): TTFT falls, nothing gets slower.
pub struct WorkloadLighter;

impl Incident for WorkloadLighter {
    fn name(&self) -> &'static str {
        "workload-lighter"
    }

    fn params(&self) -> StateParams {
        StateParams { prompt: 0.4, ..StateParams::HEALTHY }
    }
}

/// Prompts 0.72 times as long: the mean prompt reads about x0.72 where workload-lighter needs
/// x0.67 or less.
pub struct WorkloadLighterNear;

impl Incident for WorkloadLighterNear {
    fn name(&self) -> &'static str {
        "workload-lighter-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::WorkloadLighter)
    }

    fn params(&self) -> StateParams {
        StateParams { prompt: 0.72, ..StateParams::HEALTHY }
    }
}
