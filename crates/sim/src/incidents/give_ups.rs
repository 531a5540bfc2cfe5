//! `give-ups` and its near miss.

use super::*;

/// Clients close 15% of their streams early (1% before); no errors. With `counts_aborts =
/// false` the engine counts none of them (vLLM 0.32).
pub struct GiveUps;

impl Incident for GiveUps {
    fn name(&self) -> &'static str {
        "give-ups"
    }

    /// Clients giving up are the request-errors rule's story.
    fn rule(&self) -> &'static str {
        "request-errors"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { abort_share: 0.15, ..StateParams::HEALTHY }
    }
}

/// Clients close 2.5% of their streams early.
pub struct GiveUpsNear;

impl Incident for GiveUpsNear {
    fn name(&self) -> &'static str {
        "give-ups-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::GiveUps)
    }

    fn params(&self) -> StateParams {
        StateParams { abort_share: 0.025, ..StateParams::HEALTHY }
    }
}
