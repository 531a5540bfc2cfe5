//! `request-errors` and its near miss.

use super::*;

/// Clients abort 15% of requests and 3% finish with an error.
pub struct RequestErrors;

impl Incident for RequestErrors {
    fn name(&self) -> &'static str {
        "request-errors"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { abort_share: 0.15, error_share: 0.03, ..StateParams::HEALTHY }
    }
}

/// Aborts rise from 1% to 2%; no errors.
pub struct RequestErrorsNear;

impl Incident for RequestErrorsNear {
    fn name(&self) -> &'static str {
        "request-errors-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RequestErrors)
    }

    fn params(&self) -> StateParams {
        StateParams { abort_share: 0.02, ..StateParams::HEALTHY }
    }
}
