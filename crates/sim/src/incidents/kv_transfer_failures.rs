//! `kv-transfer-failures` and its near miss.

use super::*;

/// NIXL KV transfers fail 0.5/s per replica and take 5x longer.
pub struct KvTransferFailures;

impl Incident for KvTransferFailures {
    fn name(&self) -> &'static str {
        "kv-transfer-failures"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, nixl: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { nixl_failures_per_s: 0.5, nixl_xfer: 5.0, ..StateParams::HEALTHY }
    }
}

/// No failures; transfers 20% slower.
pub struct KvTransferFailuresNear;

impl Incident for KvTransferFailuresNear {
    fn name(&self) -> &'static str {
        "kv-transfer-failures-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::KvTransferFailures)
    }

    fn params(&self) -> StateParams {
        // x1.3 underneath reads as x1.2 through the histogram's buckets
        StateParams { nixl_xfer: 1.3, ..StateParams::HEALTHY }
    }
}
