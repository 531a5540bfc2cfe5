//! `replica-imbalance` and its near miss.

use super::*;

/// One replica receives 3x the arrivals of each of its peers (the model's total unchanged).
pub struct ReplicaImbalance;

impl Incident for ReplicaImbalance {
    fn name(&self) -> &'static str {
        "replica-imbalance"
    }

    fn needs(&self) -> Needs {
        Needs { min_replicas: 3, uses_replica: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { replica_weight: 3.0, ..StateParams::HEALTHY }
    }
}

/// One replica receives 1.2x.
pub struct ReplicaImbalanceNear;

impl Incident for ReplicaImbalanceNear {
    fn name(&self) -> &'static str {
        "replica-imbalance-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::ReplicaImbalance)
    }

    fn params(&self) -> StateParams {
        StateParams { replica_weight: 1.2, ..StateParams::HEALTHY }
    }
}
