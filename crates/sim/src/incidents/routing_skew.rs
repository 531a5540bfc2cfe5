//! `routing-skew` and its near miss.

use super::*;

/// The router's policy sends one worker three times what it sends each of the others (a hot
/// key under consistent hashing); the replica is not slower per request.
pub struct RoutingSkew;

impl Incident for RoutingSkew {
    fn name(&self) -> &'static str {
        "routing-skew"
    }

    fn needs(&self) -> Needs {
        Needs { router: true, min_replicas: 3, uses_replica: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { replica_weight: 3.0, ..StateParams::HEALTHY }
    }
}

/// 1.2 times.
pub struct RoutingSkewNear;

impl Incident for RoutingSkewNear {
    fn name(&self) -> &'static str {
        "routing-skew-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RoutingSkew)
    }

    fn params(&self) -> StateParams {
        StateParams { replica_weight: 1.2, ..StateParams::HEALTHY }
    }
}
