//! `deferred-waiting` and its near miss.

use super::*;

/// Every replica holds 1.5 to 3.5 requests deferred (waiting on an adapter slot, a transfer or
/// a grammar rather than for capacity): about 7.5 across three replicas, the rule's bar 4.
/// Their queue times are not generated: the latency histograms stay healthy.
pub struct DeferredWaiting;

impl Incident for DeferredWaiting {
    fn name(&self) -> &'static str {
        "deferred-waiting"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, waiting_by_reason: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { deferred: (1.5, 3.5), ..StateParams::HEALTHY }
    }
}

/// 0.5 to 1.5 each: about 3 deferred across three replicas where deferred-waiting needs 4.
pub struct DeferredWaitingNear;

impl Incident for DeferredWaitingNear {
    fn name(&self) -> &'static str {
        "deferred-waiting-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::DeferredWaiting)
    }

    fn params(&self) -> StateParams {
        StateParams { deferred: (0.5, 1.5), ..StateParams::HEALTHY }
    }
}
