//! `router-prefix-blind` and its near miss.

use super::*;

/// A cache-aware router (`router_policy = "cache_aware"`) gets no prompt tokens from its
/// workers (vLLM started without --enable-scale-out answers the render route 403): every
/// prefix decision is `missing_tokens`, made by load.
pub struct RouterPrefixBlind;

impl Incident for RouterPrefixBlind {
    fn name(&self) -> &'static str {
        "router-prefix-blind"
    }

    fn needs(&self) -> Needs {
        Needs { router: true, cache_aware: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { router_blind_share: 1.0, ..StateParams::HEALTHY }
    }
}

/// 40% of the decisions lack the tokens (some workers refuse to render, the others do) where
/// router-prefix-blind needs over half.
pub struct RouterPrefixBlindNear;

impl Incident for RouterPrefixBlindNear {
    fn name(&self) -> &'static str {
        "router-prefix-blind-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RouterPrefixBlind)
    }

    fn params(&self) -> StateParams {
        StateParams { router_blind_share: 0.4, ..StateParams::HEALTHY }
    }
}
