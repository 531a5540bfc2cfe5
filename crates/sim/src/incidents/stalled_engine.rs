//! `stalled-engine` and its near miss.

use super::*;

/// One replica's engine freezes for 10 minutes in the middle of the window with its batch in
/// hand, then resumes: no token, no completion, its gauges held where they were (vLLM V1
/// publishes them from the engine's step, which no longer runs). Over before the window's
/// last five minutes, which throughput-stall reads.
pub struct StalledEngine;

impl Incident for StalledEngine {
    fn name(&self) -> &'static str {
        "stalled-engine"
    }

    fn needs(&self) -> Needs {
        Needs { uses_replica: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::Replica, stall_bursts: &[(0.3, 0.63)], ..StateParams::HEALTHY }
    }
}

/// The same freeze for 6 minutes: the token rate (over 2 minutes, at 1-minute steps) reads
/// zero at 5 of the window's 31 steps, a stall share of 16% where stalled-engine needs 20% (7
/// steps; the 10-minute freeze reads 9, 29%).
pub struct StalledEngineNear;

impl Incident for StalledEngineNear {
    fn name(&self) -> &'static str {
        "stalled-engine-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::StalledEngine)
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::Replica, stall_bursts: &[(0.3, 0.5)], ..StateParams::HEALTHY }
    }
}
