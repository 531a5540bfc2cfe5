//! `spec-decode-inefficient` and its near miss.

use super::*;

/// Speculative decoding acceptance falls from 0.6 to 0.15.
pub struct SpecDecodeInefficient;

impl Incident for SpecDecodeInefficient {
    fn name(&self) -> &'static str {
        "spec-decode-inefficient"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, spec_decode: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { spec_acceptance: 0.15, ..StateParams::HEALTHY }
    }
}

/// Acceptance falls to 0.45.
pub struct SpecDecodeInefficientNear;

impl Incident for SpecDecodeInefficientNear {
    fn name(&self) -> &'static str {
        "spec-decode-inefficient-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::SpecDecodeInefficient)
    }

    fn params(&self) -> StateParams {
        StateParams { spec_acceptance: 0.45, ..StateParams::HEALTHY }
    }
}
