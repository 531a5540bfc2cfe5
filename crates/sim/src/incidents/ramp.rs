//! `ramp` (no near miss).

use super::*;

/// Traffic grows linearly through the baseline and the window, within capacity.
pub struct Ramp;

impl Incident for Ramp {
    fn name(&self) -> &'static str {
        "ramp"
    }

    fn params(&self) -> StateParams {
        StateParams { onset: Onset::BaselineStart, arrivals_at_end: 1.8, ..StateParams::HEALTHY }
    }
}
