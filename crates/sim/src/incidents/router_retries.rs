//! `router-retries` and its near miss.

use super::*;

/// The router retries 10% of the requests it receives (attempts that fail between router and
/// engine, which the engines never see); the engines count no error.
pub struct RouterRetries;

impl Incident for RouterRetries {
    fn name(&self) -> &'static str {
        "router-retries"
    }

    fn needs(&self) -> Needs {
        Needs { router: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { router_retry_share: 0.1, ..StateParams::HEALTHY }
    }
}

/// 1% retried.
pub struct RouterRetriesNear;

impl Incident for RouterRetriesNear {
    fn name(&self) -> &'static str {
        "router-retries-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RouterRetries)
    }

    fn params(&self) -> StateParams {
        StateParams { router_retry_share: 0.01, ..StateParams::HEALTHY }
    }
}
