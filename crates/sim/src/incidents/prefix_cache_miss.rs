//! `prefix-cache-miss` and its near miss.

use super::*;

/// The prefix cache stops hitting (0.5 -> 0.04) and prefill gets 3x slower.
pub struct PrefixCacheMiss;

impl Incident for PrefixCacheMiss {
    fn name(&self) -> &'static str {
        "prefix-cache-miss"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        // Every prompt token is computed again (0.96 of them instead of 0.5), and the longest
        // prompts, which dominate the P95, were the best cached: prefill x3.2.
        StateParams { prefix_hit_ratio: 0.04, prefill: 3.2, ..StateParams::HEALTHY }
    }
}

/// The hit ratio dips to 0.4; latency unchanged.
pub struct PrefixCacheMissNear;

impl Incident for PrefixCacheMissNear {
    fn name(&self) -> &'static str {
        "prefix-cache-miss-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::PrefixCacheMiss)
    }

    fn params(&self) -> StateParams {
        StateParams { prefix_hit_ratio: 0.4, ..StateParams::HEALTHY }
    }
}
