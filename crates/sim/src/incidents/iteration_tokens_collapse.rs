//! `iteration-tokens-collapse` and its near miss.

use super::*;

/// The engine takes four times as many decode steps for the same work at the same load: the
/// tokens per step per running request collapse; nothing else moves.
pub struct IterationTokensCollapse;

impl Incident for IterationTokensCollapse {
    fn name(&self) -> &'static str {
        "iteration-tokens-collapse"
    }

    /// No rule names it: what else moved lists it.
    fn named_by_a_rule(&self) -> bool {
        false
    }

    fn params(&self) -> StateParams {
        StateParams { step_split: 4.0, ..StateParams::HEALTHY }
    }
}

/// 1.3 times as many steps: tokens per step per running request fall to three quarters.
pub struct IterationTokensCollapseNear;

impl Incident for IterationTokensCollapseNear {
    fn name(&self) -> &'static str {
        "iteration-tokens-collapse-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::IterationTokensCollapse)
    }

    fn params(&self) -> StateParams {
        StateParams { step_split: 1.3, ..StateParams::HEALTHY }
    }
}
