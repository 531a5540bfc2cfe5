//! `replica-config-cap` and its near miss.

use super::*;

/// Arrivals x2.5 on a model whose replicas have different caps (`max_num_seqs_per_replica`):
/// the one with the lower cap pins its batch there and queues, its peers run the rest.
pub struct ReplicaConfigCap;

impl Incident for ReplicaConfigCap {
    fn name(&self) -> &'static str {
        "replica-config-cap"
    }

    /// A replica that differs by its configuration: the replica comparison's.
    fn rule(&self) -> &'static str {
        "replica-outlier"
    }

    fn needs(&self) -> Needs {
        Needs { min_replicas: 2, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        // Little's law does the rest: the replica whose own cap is under the offered batch
        // pins it there and queues the excess.
        StateParams { arrivals: 2.5, arrivals_at_end: 2.5, ..StateParams::HEALTHY }
    }
}

/// Arrivals x1.3: the lower cap is never reached, nothing queues.
pub struct ReplicaConfigCapNear;

impl Incident for ReplicaConfigCapNear {
    fn name(&self) -> &'static str {
        "replica-config-cap-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::ReplicaConfigCap)
    }

    fn params(&self) -> StateParams {
        StateParams { arrivals: 1.3, arrivals_at_end: 1.3, ..StateParams::HEALTHY }
    }
}
