//! `external-prefix-cache-miss` and its near miss.

use super::*;

/// The external prefix cache behind the KV connector stops hitting (0.6 -> 0.03 of what the
/// local cache missed); nothing else moves: no rule reads it (what else moved lists it).
pub struct ExternalPrefixCacheMiss;

impl Incident for ExternalPrefixCacheMiss {
    fn name(&self) -> &'static str {
        "external-prefix-cache-miss"
    }

    /// No rule names it: what else moved lists it.
    fn named_by_a_rule(&self) -> bool {
        false
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, external_cache: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { external_hit_ratio: 0.03, ..StateParams::HEALTHY }
    }
}

/// Its hit ratio dips to 0.5.
pub struct ExternalPrefixCacheMissNear;

impl Incident for ExternalPrefixCacheMissNear {
    fn name(&self) -> &'static str {
        "external-prefix-cache-miss-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::ExternalPrefixCacheMiss)
    }

    fn params(&self) -> StateParams {
        StateParams { external_hit_ratio: 0.5, ..StateParams::HEALTHY }
    }
}
