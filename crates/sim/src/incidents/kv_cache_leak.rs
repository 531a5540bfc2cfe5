//! `kv-cache-leak` and its near miss.

use super::*;

/// KV-cache usage climbs from 0.45 to 0.9 across the window while the load stays flat.
pub struct KvCacheLeak;

impl Incident for KvCacheLeak {
    fn name(&self) -> &'static str {
        "kv-cache-leak"
    }

    fn params(&self) -> StateParams {
        StateParams { kv_usage: Level::Ramp(0.45, 0.9), ..StateParams::HEALTHY }
    }
}

/// Traffic ramps 1x -> 1.6x and KV usage rises with it: growth, not a leak.
pub struct KvCacheLeakNear;

impl Incident for KvCacheLeakNear {
    fn name(&self) -> &'static str {
        "kv-cache-leak-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::KvCacheLeak)
    }

    fn params(&self) -> StateParams {
        StateParams { arrivals_at_end: 1.6, kv_usage: Level::Wander(0.38, 0.52), kv_follows_load: true, ..StateParams::HEALTHY }
    }
}
