//! `target-down` and its near miss.

use super::*;

/// One replica stops being scraped 12 minutes before the window's end.
pub struct TargetDown;

impl Incident for TargetDown {
    fn name(&self) -> &'static str {
        "target-down"
    }

    fn needs(&self) -> Needs {
        Needs { uses_replica: true, ..Needs::default() }
    }

    fn true_event(&self, _node: &str) -> Option<(&'static str, String)> {
        Some(("target-down", String::new()))
    }

    fn params(&self) -> StateParams {
        StateParams { onset: Onset::BeforeEnd { secs: 720 }, scope: Scope::Replica, scraped: false, ..StateParams::HEALTHY }
    }
}

/// Every target stays up.
pub struct TargetDownNear;

impl Incident for TargetDownNear {
    fn name(&self) -> &'static str {
        "target-down-near"
    }

    fn near_miss_of(&self) -> Option<IncidentKind> {
        Some(IncidentKind::TargetDown)
    }

    fn params(&self) -> StateParams {
        StateParams { scope: Scope::Replica, ..StateParams::HEALTHY }
    }
}
