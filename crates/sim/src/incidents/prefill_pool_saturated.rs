//! `prefill-pool-saturated` and its near miss.

use super::*;

/// vLLM's router in PD mode (`router = "vllm-router-pd"`): its prefill workers hold 15 to 40
/// requests waiting each with a long queue time, while its decode workers stay as they were.
pub struct PrefillPoolSaturated;

impl Incident for PrefillPoolSaturated {
    fn name(&self) -> &'static str {
        "prefill-pool-saturated"
    }

    fn needs(&self) -> Needs {
        Needs { router: true, router_pd: true, min_replicas: 4, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        queued(Scope::PrefillPool)
    }
}

/// Both pools queue alike: the model's capacity, not the split between them.
pub struct PrefillPoolSaturatedNear;

impl Incident for PrefillPoolSaturatedNear {
    fn name(&self) -> &'static str {
        "prefill-pool-saturated-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::PrefillPoolSaturated)
    }

    fn params(&self) -> StateParams {
        queued(Scope::Model)
    }
}

// Prompts queue for a prefill worker; the decode workers get them later and fewer.
fn queued(scope: Scope) -> StateParams {
    StateParams { scope, queue_median_s: 1.5, queue_sigma: 0.5, running: Running::AtCap, waiting: Level::Wander(15.0, 40.0), ..StateParams::HEALTHY }
}
