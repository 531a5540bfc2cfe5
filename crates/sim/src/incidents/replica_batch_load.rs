//! `replica-batch-load` and its near miss.

use super::*;

/// One replica receives 2.7x the arrivals of its peer, and decode follows the batch (each step
/// costs 1 + batch/2): it runs a larger batch and its ITL rises with it.
pub struct ReplicaBatchLoad;

impl Incident for ReplicaBatchLoad {
    fn name(&self) -> &'static str {
        "replica-batch-load"
    }

    /// A replica that differs by its load: the replica comparison's.
    fn rule(&self) -> &'static str {
        "replica-outlier"
    }

    fn needs(&self) -> Needs {
        Needs { min_replicas: 2, uses_replica: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { replica_weight: 2.7, itl_batch_k: 2.0, ..StateParams::HEALTHY }
    }
}

/// 1.5x.
pub struct ReplicaBatchLoadNear;

impl Incident for ReplicaBatchLoadNear {
    fn name(&self) -> &'static str {
        "replica-batch-load-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::ReplicaBatchLoad)
    }

    fn params(&self) -> StateParams {
        StateParams { replica_weight: 1.5, itl_batch_k: 2.0, ..StateParams::HEALTHY }
    }
}
