//! Stage: the GPU clocks-event reasons a finding's GPUs reported, decoded. The signals that read
//! each reason bit (a signal per reason, by its `role = "gpu_reason.KIND"`, each a share of the window's samples
//! with its bit set) are in the GPU rules' evidence; here each one that was set becomes a typed
//! reason of the finding, so the JSON names them without a reader decoding the bitmask.

use crate::report::{Finding, GpuReason, GpuReasonKind};
use crate::rules::RuleSet;
use crate::signals::Role;

/// The reasons whose share in `f`'s evidence is above 0, faults first. Each reason's share is the
/// signal of its role (`gpu_reason.hw_slowdown`).
pub fn of(f: &Finding, rules: &RuleSet) -> Vec<GpuReason> {
    let mut found: Vec<GpuReason> = GpuReasonKind::ALL
        .iter()
        .filter_map(|kind| {
            let signal = rules.signal_for(Role::GpuReason(*kind))?;
            let share = f.evidence.iter().find(|e| e.signal == signal)?.value.filter(|v| v.is_finite() && *v > 0.0)?;
            Some(GpuReason { reason: *kind, bit: format!("0x{:x}", kind.bit()), fault: kind.fault(), share })
        })
        .collect();
    found.sort_by_key(|r| !r.fault);
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Evidence, Scope, Severity};

    /// The reasons found, built into each finding the way explain builds it.
    fn built(fs: &mut [Finding], rules: &RuleSet) {
        for f in fs.iter_mut() {
            let parts = crate::explain::finish::Parts { gpu_reasons: of(f, rules), ..Default::default() };
            *f = crate::explain::finish::build(f.clone(), parts);
        }
    }

    fn ev(signal: &str, value: Option<f64>) -> Evidence {
        Evidence::held(signal, value)
    }

    #[test]
    fn the_reasons_set_in_the_window_are_named_faults_first_and_the_unset_ones_are_not() {
        let mut f = Finding::bare("gpu-throttling", Severity::Warning, Scope::new());
        f.evidence = vec![
            ev("gpu_power_cap_share", Some(0.2)),
            ev("gpu_hw_thermal_share", Some(1.0)),
            ev("gpu_hw_slowdown_share", Some(0.0)),
            ev("gpu_power_brake_share", None),
            ev("itl_p95", Some(0.05)),
        ];
        let mut fs = vec![f];
        built(&mut fs, &crate::rules::load_builtin().unwrap());
        let got: Vec<(GpuReasonKind, &str, bool)> = fs[0].gpu_reasons.iter().map(|r| (r.reason, r.bit.as_str(), r.fault)).collect();
        assert_eq!(got, vec![(GpuReasonKind::HwThermalSlowdown, "0x40", true), (GpuReasonKind::SwPowerCap, "0x4", false)]);
        let json = serde_json::to_value(&fs[0]).unwrap();
        assert_eq!(json["gpu_reasons"][0]["reason"], "hw_thermal_slowdown");
        // A finding without reason signals carries no list at all.
        let mut other = vec![Finding::bare("slow-decode", Severity::Warning, Scope::new())];
        built(&mut other, &crate::rules::load_builtin().unwrap());
        assert!(serde_json::to_value(&other[0]).unwrap().get("gpu_reasons").is_none());
    }
}
