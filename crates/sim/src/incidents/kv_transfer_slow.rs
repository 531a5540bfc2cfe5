//! `kv-transfer-slow` and its near miss.

use super::*;

/// NIXL KV transfers take 30 times longer (a congested or misrouted link): each request waits
/// for its KV in the decode instance's queue, as vLLM records it (scheduled once its KV came).
pub struct KvTransferSlow;

impl Incident for KvTransferSlow {
    fn name(&self) -> &'static str {
        "kv-transfer-slow"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, nixl: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { nixl_xfer: 30.0, ..StateParams::HEALTHY }
    }
}

/// Transfers twice as long.
pub struct KvTransferSlowNear;

impl Incident for KvTransferSlowNear {
    fn name(&self) -> &'static str {
        "kv-transfer-slow-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::KvTransferSlow)
    }

    fn params(&self) -> StateParams {
        StateParams { nixl_xfer: 2.0, ..StateParams::HEALTHY }
    }
}
