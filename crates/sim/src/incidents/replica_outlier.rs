//! `replica-outlier` and its near miss.

use super::*;

/// One replica is slow (ITL x3, TTFT x2) and nearly full (KV ~0.95); its peers are healthy.
pub struct ReplicaOutlier;

impl Incident for ReplicaOutlier {
    fn name(&self) -> &'static str {
        "replica-outlier"
    }

    fn needs(&self) -> Needs {
        Needs { min_replicas: 3, uses_replica: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::Replica, itl: 3.0, prefill: 2.0, kv_usage: Level::Wander(0.93, 0.97), ..StateParams::HEALTHY }
    }
}

/// One replica 1.2x slower.
pub struct ReplicaOutlierNear;

impl Incident for ReplicaOutlierNear {
    fn name(&self) -> &'static str {
        "replica-outlier-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::ReplicaOutlier)
    }

    fn params(&self) -> StateParams {
        // ITL x1.25 underneath reads as about x1.2 through the buckets (the healthy P95 sits just under 50 ms)
        StateParams { scope: Scope::Replica, itl: 1.25, prefill: 1.2, ..StateParams::HEALTHY }
    }
}
