//! `kv-transfer-rate-impossible` and its near miss.

use super::*;

/// The transfer-time histogram records a thousandth of each transfer's time (a unit slip):
/// bytes over time read 1,000 times any link's rate. Nothing else changes.
pub struct KvTransferRateImpossible;

impl Incident for KvTransferRateImpossible {
    fn name(&self) -> &'static str {
        "kv-transfer-rate-impossible"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, nixl: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { nixl_time_scale: 0.001, ..StateParams::HEALTHY }
    }
}

/// Transfers ten times faster, and recorded as such: a fast link, about 100 GB/s.
pub struct KvTransferRateImpossibleNear;

impl Incident for KvTransferRateImpossibleNear {
    fn name(&self) -> &'static str {
        "kv-transfer-rate-impossible-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::KvTransferRateImpossible)
    }

    fn params(&self) -> StateParams {
        StateParams { nixl_xfer: 0.1, ..StateParams::HEALTHY }
    }
}
