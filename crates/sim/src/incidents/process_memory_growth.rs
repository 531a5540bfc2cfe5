//! `process-memory-growth` and its near miss.

use super::*;

/// The server process leaks memory: its resident memory grows by 80 MB a minute from the
/// onset; nothing else moves. No rule reads `process_resident_memory_bytes` (what else moved
/// lists it).
pub struct ProcessMemoryGrowth;

impl Incident for ProcessMemoryGrowth {
    fn name(&self) -> &'static str {
        "process-memory-growth"
    }

    /// No rule names it: what else moved lists it.
    fn named_by_a_rule(&self) -> bool {
        false
    }

    fn params(&self) -> StateParams {
        StateParams { memory_growth_per_s: 80e6 / 60.0, ..StateParams::HEALTHY }
    }
}

/// It grows by 4 MB a minute: 80 MB over twenty minutes, a twelfth of the process.
pub struct ProcessMemoryGrowthNear;

impl Incident for ProcessMemoryGrowthNear {
    fn name(&self) -> &'static str {
        "process-memory-growth-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::ProcessMemoryGrowth)
    }

    fn params(&self) -> StateParams {
        StateParams { memory_growth_per_s: 4e6 / 60.0, ..StateParams::HEALTHY }
    }
}
