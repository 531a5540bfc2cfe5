//! `requests-rejected` and its near miss.

use super::*;

/// Twice the traffic; the engine's admission control rejects about 2/s per replica.
pub struct RequestsRejected;

impl Incident for RequestsRejected {
    fn name(&self) -> &'static str {
        "requests-rejected"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams {
            arrivals: 2.0,
            arrivals_at_end: 2.0,
            reject_share: 0.5,
            queue_median_s: 1.2,
            queue_sigma: 0.4,
            itl: 1.05,
            running: Running::AtCap,
            waiting: Level::Wander(28.0, 32.0),
            kv_usage: Level::Wander(0.7, 0.85),
            ..StateParams::HEALTHY
        }
    }
}

/// Three rejections in one burst.
pub struct RequestsRejectedNear;

impl Incident for RequestsRejectedNear {
    fn name(&self) -> &'static str {
        "requests-rejected-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RequestsRejected)
    }

    fn needs(&self) -> Needs {
        // the one burst lands on one replica
        Needs { uses_replica: true, ..IncidentKind::RequestsRejected.needs() }
    }

    fn params(&self) -> StateParams {
        StateParams { reject_burst: 3, ..StateParams::HEALTHY }
    }
}
