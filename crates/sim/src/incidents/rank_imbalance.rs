//! `rank-imbalance` and its near miss.

use super::*;

/// One server's last data-parallel rank holds 6 to 9 requests waiting while its other rank
/// has room (the ranks' balancing sends it more than its share): the most-queued rank about 7.5
/// above the other, the rule's bar 4. The server's latency histograms are not changed.
pub struct RankImbalance;

impl Incident for RankImbalance {
    fn name(&self) -> &'static str {
        "rank-imbalance"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, data_parallel: true, uses_replica: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::Replica, rank_waiting: (6.0, 9.0), ..StateParams::HEALTHY }
    }
}

/// 2.5 to 3.5 waiting on that rank: about 3 above the other where rank-imbalance needs 4.
pub struct RankImbalanceNear;

impl Incident for RankImbalanceNear {
    fn name(&self) -> &'static str {
        "rank-imbalance-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RankImbalance)
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::Replica, rank_waiting: (2.5, 3.5), ..StateParams::HEALTHY }
    }
}
