//! `router-saturated` and its near miss.

use super::*;

/// vLLM's router in front of the model (`router = "vllm-router"`) takes 1.5 s (median) of its
/// own before an engine answers each request (short of CPU, slow connections to its workers);
/// the engines see nothing of it.
pub struct RouterSaturated;

impl Incident for RouterSaturated {
    fn name(&self) -> &'static str {
        "router-saturated"
    }

    fn needs(&self) -> Needs {
        Needs { router: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { router_wait_s: 1.5, ..StateParams::HEALTHY }
    }
}

/// The router takes 0.12 s of its own: under what a user notices.
pub struct RouterSaturatedNear;

impl Incident for RouterSaturatedNear {
    fn name(&self) -> &'static str {
        "router-saturated-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::RouterSaturated)
    }

    fn params(&self) -> StateParams {
        StateParams { router_wait_s: 0.12, ..StateParams::HEALTHY }
    }
}
