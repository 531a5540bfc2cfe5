//! `backend-cut-off` and its near miss.

use super::*;

/// The router opens one worker's circuit at the onset and keeps it open: that engine stays
/// up, reporting, and gets nothing; its peers take its share.
pub struct BackendCutOff;

impl Incident for BackendCutOff {
    fn name(&self) -> &'static str {
        "backend-cut-off"
    }

    fn needs(&self) -> Needs {
        Needs { router: true, min_replicas: 2, uses_replica: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { router_open: &[(0.0, 1.0)], ..StateParams::HEALTHY }
    }
}

/// The circuit opens for two minutes in the middle of the window, then closes.
pub struct BackendCutOffNear;

impl Incident for BackendCutOffNear {
    fn name(&self) -> &'static str {
        "backend-cut-off-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::BackendCutOff)
    }

    fn params(&self) -> StateParams {
        StateParams { router_open: &[(0.45, 0.52)], ..StateParams::HEALTHY }
    }
}
