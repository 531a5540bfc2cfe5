//! `healthy` (no near miss).

use super::*;

/// No change at all.
pub struct Healthy;

impl Incident for Healthy {
    fn name(&self) -> &'static str {
        "healthy"
    }

    fn params(&self) -> StateParams {
        StateParams::HEALTHY
    }
}
