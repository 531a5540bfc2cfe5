//! `engine-asleep` and its near miss.

use super::*;

/// For the last 15 minutes every engine sleeps (weights offloaded) while requests keep arriving.
pub struct EngineAsleep;

impl Incident for EngineAsleep {
    fn name(&self) -> &'static str {
        "engine-asleep"
    }

    fn needs(&self) -> Needs {
        Needs { v1: true, ..Needs::default() }
    }

    fn params(&self) -> StateParams {
        // A model put to sleep gets little traffic, but what arrives waits for an engine that never steps.
        StateParams {
            onset: Onset::BeforeEnd { secs: 900 },
            arrivals: 0.1,
            arrivals_at_end: 0.1,
            serving: false,
            running: Running::Around(0.0, 0.0),
            waiting: Level::Accumulate,
            kv_usage: Level::Wander(0.0, 0.0),
            sleep: SleepState::WeightsOffloaded,
            gpu: GpuParams { util: (0.0, 0.0), power_w: (68.0, 75.0), temp_c: (34.0, 38.0), ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}

/// Asleep the same way, but nothing arrives.
pub struct EngineAsleepNear;

impl Incident for EngineAsleepNear {
    fn name(&self) -> &'static str {
        "engine-asleep-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::EngineAsleep)
    }

    fn params(&self) -> StateParams {
        StateParams {
            onset: Onset::BeforeEnd { secs: 900 },
            arrivals: 0.0,
            arrivals_at_end: 0.0,
            serving: false,
            running: Running::Around(0.0, 0.0),
            waiting: Level::Wander(0.0, 0.0),
            kv_usage: Level::Wander(0.0, 0.0),
            sleep: SleepState::WeightsOffloaded,
            gpu: GpuParams { util: (0.0, 0.0), power_w: (68.0, 75.0), temp_c: (34.0, 38.0), ..GpuParams::HEALTHY },
            ..StateParams::HEALTHY
        }
    }
}
