//! Checks that need every file merged: threshold units against the signals they are compared with,
//! thresholds nothing uses, and references between rules. (Each signal's own fields are checked as
//! it is read, by its kind: [`crate::signals::Kind::validate`].)

use std::collections::BTreeMap;

use super::*;

/// One place where a threshold is compared with a signal's values.
#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdUse {
    /// Who uses it, for an error: `rule slow-decode compares itl_p95 with it`.
    pub by: String,
    /// The unit of the values it is compared with.
    pub unit: String,
}

/// Thresholds read by a stage of the diagnosis rather than by a condition: (name, who uses it, unit).
pub const STAGE_THRESHOLDS: &[(&str, &str, &str)] = &[
    (crate::rules::COLD_START_WARM_UP, "the cold-start stage takes it as the longest slowdown after a replica (re)starts that is still warm-up", "seconds"),
    (crate::rules::MOVED_RATIO, "what else moved takes it as the smallest factor past a signal's baseline median that is a change", "factor"),
    (crate::rules::MOVED_Z, "what else moved takes it as the fewest robust standard deviations past a signal's baseline median that are a change", "factor"),
    (crate::rules::MOVED_DURATION, "what else moved takes it as the shortest stretch a signal must stay moved", "seconds"),
];

/// Where each threshold is used: the conditions that compare a signal with `$name`, and the SLO
/// burn-rate signals that take it as their latency target or objective.
pub fn threshold_uses(set: &RuleSet) -> BTreeMap<String, Vec<ThresholdUse>> {
    let mut out: BTreeMap<String, Vec<ThresholdUse>> = BTreeMap::new();
    for (name, by, unit) in STAGE_THRESHOLDS {
        out.entry(name.to_string()).or_default().push(ThresholdUse { by: by.to_string(), unit: unit.to_string() });
    }
    for r in &set.rules {
        for c in r.all_conditions() {
            for cmp in c.expr.comparisons() {
                let (expr::Rhs::Named { name }, Some(d)) = (&cmp.rhs, set.signals.get(&cmp.signal)) else { continue };
                let by = format!("rule {} compares {} with it", r.id, cmp.signal);
                out.entry(name.clone()).or_default().push(ThresholdUse { by, unit: d.unit.clone() });
            }
        }
    }
    for d in set.signals.values() {
        for f in d.kind.kind().threshold_fields() {
            if let Some(name) = f.text.trim().strip_prefix('$') {
                let by = format!("signal {} takes it as its {}", d.id, f.what);
                out.entry(name.to_string()).or_default().push(ThresholdUse { by, unit: f.unit.into() });
            }
        }
    }
    out
}

/// Why threshold `name`, written as `text`, does not fit the values it is compared with, if it
/// does not (`"90%"` for a latency in seconds), for the caller to put after the name.
pub fn unit_misfit(name: &str, text: &str, uses: &BTreeMap<String, Vec<ThresholdUse>>) -> Option<String> {
    uses.get(name)?.iter().find_map(|u| crate::units::unit_mismatch(text, &u.unit).map(|why| format!("{why} ({})", u.by)))
}

/// Why a threshold's value is outside the range of the values it is compared with (a share
/// above 100%, a negative duration), naming the first user and the valid range.
pub fn range_misfit(name: &str, value: f64, text: &str, uses: &BTreeMap<String, Vec<ThresholdUse>>) -> Option<String> {
    uses.get(name)?.iter().find_map(|u| crate::units::out_of_range(value, text, &u.unit).map(|why| format!("{why} ({})", u.by)))
}

/// Every threshold's unit against the signals it is compared with (in `[thresholds]` and in the
/// profiles), a profile's names against the thresholds, an SLO signal's `$name` against them.
pub(super) fn validate_thresholds(set: &RuleSet, uses: &BTreeMap<String, Vec<ThresholdUse>>) -> Result<(), RuleError> {
    for (name, p) in &set.profiles {
        for (threshold, w) in &p.origins {
            if !set.thresholds.contains_key(threshold) {
                return Err(w.error(format!(
                    "profile {name} sets {threshold}, which no [thresholds] table defines: check the name against the built-in rules/thresholds.toml, or define it under [thresholds].{}",
                    crate::text::did_you_mean(threshold, set.thresholds.keys().map(String::as_str))
                )));
            }
            if let Some(why) = unit_misfit(threshold, &w.text, uses) {
                return Err(w.error(format!("profile {name}: threshold {threshold}: {why}")));
            }
            let value = p.thresholds.get(threshold).copied().unwrap_or_default();
            if let Some(why) = range_misfit(threshold, value, &w.text, uses) {
                return Err(w.error(format!("profile {name}: threshold {threshold}: {why}")));
            }
        }
    }
    for (threshold, w) in &set.threshold_origins {
        if let Some(why) = unit_misfit(threshold, &w.text, uses) {
            return Err(w.error(format!("threshold {threshold}: {why}")));
        }
        let value = set.thresholds.get(threshold).copied().unwrap_or_default();
        if let Some(why) = range_misfit(threshold, value, &w.text, uses) {
            return Err(w.error(format!("threshold {threshold}: {why}")));
        }
    }
    for d in set.signals.values() {
        for f in d.kind.kind().threshold_fields() {
            if let Some(name) = f.text.trim().strip_prefix('$') {
                if !set.thresholds.contains_key(name) {
                    return Err(at_origin(&d.origin, format!("signal {}: ${name} is a threshold no [thresholds] table defines", d.id)));
                }
            }
        }
    }
    Ok(())
}

/// A threshold a file of the user's defines that no condition or signal uses: a misspelling (not
/// in the built-in pack, where a rule file may replace the one rule that used it).
pub(super) fn unused_threshold(set: &RuleSet, uses: &BTreeMap<String, Vec<ThresholdUse>>) -> Result<(), RuleError> {
    for (threshold, w) in &set.threshold_origins {
        if !uses.contains_key(threshold) && !BUILTIN.iter().any(|(f, _)| *f == w.file) {
            let others = set.thresholds.keys().filter(|k| uses.contains_key(*k)).map(String::as_str);
            return Err(w.error(format!(
                "threshold {threshold} is used by no rule condition and no signal, so it changes nothing.{} Name a threshold the rules use (`vllm-diag rules show RULE` lists them), or use ${threshold} in a condition",
                crate::text::did_you_mean(threshold, others)
            )));
        }
    }
    Ok(())
}

/// Check that every reference resolves, once all files are merged.
pub fn validate(set: &RuleSet) -> Result<(), RuleError> {
    for d in set.signals.values() {
        let Some(recent) = &d.recent else { continue };
        let fail = |message: String| at_origin(&d.origin, message);
        let Some(r) = set.signals.get(recent) else {
            return Err(fail(format!("signal {}: recent = {recent:?} names no declared [[signal]]", d.id)));
        };
        if r.range.is_none() || !r.within_window || d.range.is_some() {
            return Err(fail(format!(
                "signal {}: its recent reading {recent:?} must have a fixed `range` with `within_window = true`, and {} itself no range (it is read over the whole window)",
                d.id, d.id
            )));
        }
        if r.unit != d.unit || std::mem::discriminant(&r.kind) != std::mem::discriminant(&d.kind) || r.recent.is_some() {
            return Err(fail(format!(
                "signal {}: its recent reading {recent:?} must be of the same kind and unit, and have no recent reading of its own",
                d.id
            )));
        }
    }
    for c in &set.correlations {
        if let Some(missing) = [&c.cause, &c.effect].into_iter().find(|id| !set.signals.contains_key(*id)) {
            return Err(at_origin(&c.origin, format!("correlation {} -> {}: {missing:?} names no declared [[signal]]", c.cause, c.effect)));
        }
    }
    let uses = threshold_uses(set);
    validate_thresholds(set, &uses)?;
    for r in &set.rules {
        let fail = |message: String| at_origin(&r.origin, message);
        // An error about one condition points at it, in the rule's file.
        let fail_in = |c: &Condition, message: String| {
            let mut e = fail(message);
            if c.at.0 > 0 {
                (e.line, e.column) = c.at;
            }
            e
        };
        if r.recent && set.recent_pairs(r).is_empty() {
            return Err(fail(format!(
                "rule {}: recent = true (or [rule.recent]), but none of the signals it reads has a `recent` reading over the window's last minutes",
                r.id
            )));
        }
        if let Some(s) = &r.stand_in {
            if let Some(m) = s.missing.iter().find(|m| !r.primary_signals().contains(m)) {
                return Err(fail(format!("rule {}: stand_in.missing names {m:?}, which none of the rule's own conditions or evidence reads", r.id)));
            }
        }
        if let Some(c) = &r.recent_when {
            if let Some(cmp) = c.expr.comparisons().into_iter().find(|cmp| !r.signals().contains(&cmp.signal)) {
                return Err(fail_in(
                    c,
                    format!(
                        "rule {}: [rule.recent] condition {:?} reads signal {:?}, which the rule itself does not read (it is checked over the whole window's readings of the rule's own signals)",
                        r.id, c.text, cmp.signal
                    ),
                ));
            }
        }
        if let Some(c) = &r.caveat {
            if let Some(cmp) = c.when.expr.comparisons().into_iter().find(|cmp| !r.signals().contains(&cmp.signal)) {
                return Err(fail_in(
                    &c.when,
                    format!(
                        "rule {}: caveat condition {:?} reads signal {:?}, which the rule itself does not read (a caveat may only read the rule's own signals)",
                        r.id, c.when.text, cmp.signal
                    ),
                ));
            }
        }
        for c in r.all_conditions() {
            for cmp in c.expr.comparisons() {
                if !set.signals.contains_key(&cmp.signal) {
                    return Err(fail_in(
                        c,
                        format!(
                            "rule {}: condition {:?} names signal {:?}, which no [[signal]] declares (known: {})",
                            r.id,
                            c.text,
                            cmp.signal,
                            set.signals.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                if let expr::Rhs::Named { name } = &cmp.rhs {
                    if !set.thresholds.contains_key(name) {
                        return Err(fail_in(
                            c,
                            format!(
                                "rule {}: condition {:?} uses ${name}, which no [thresholds] table defines.{}",
                                r.id,
                                c.text,
                                crate::text::did_you_mean(name, set.thresholds.keys().map(String::as_str))
                            ),
                        ));
                    }
                }
                if let (expr::Rhs::Value { text, .. }, Some(d)) = (&cmp.rhs, set.signals.get(&cmp.signal)) {
                    if let Some(why) = crate::units::unit_mismatch(text, &d.unit) {
                        return Err(fail_in(c, format!("rule {}: condition {:?} compares {}: {why}", r.id, c.text, cmp.signal)));
                    }
                }
            }
        }
        for e in &r.evidence {
            if !set.signals.contains_key(e) {
                return Err(fail(format!("rule {}: evidence names unknown signal {e:?}", r.id)));
            }
        }
        let read = r.signals();
        for (i, step) in r.steps.iter().enumerate() {
            for s in step.signals() {
                if !set.signals.contains_key(s) {
                    return Err(fail(format!(
                        "rule {}: step {} is answered by unknown signal {s:?}.{}",
                        r.id,
                        i + 1,
                        crate::text::did_you_mean(s, set.signals.keys().map(String::as_str))
                    )));
                }
                if !read.contains(s) {
                    return Err(fail(format!("rule {}: step {} reads {s:?}, which the rule does not read: add it to the rule's `evidence`", r.id, i + 1)));
                }
            }
            step_answer(step).map_err(|why| fail(format!("rule {}: step {}: {why}", r.id, i + 1)))?;
            if let Some(l) = &step.lever {
                if !l.starts_with("--") {
                    return Err(fail(format!("rule {}: step {}: lever {l:?} must be the engine flag the step changes, e.g. \"--max-num-seqs\"", r.id, i + 1)));
                }
            }
        }
        if let Some(rec) = &r.recommend {
            if !crate::recommend::KNOWN.contains(&rec.as_str()) {
                return Err(fail(format!("rule {}: unknown recommendation {rec:?} (known: {})", r.id, crate::recommend::KNOWN.join(", "))));
            }
        }
        for card in &r.also_size {
            if !crate::recommend::CARDS.contains(&card.as_str()) {
                return Err(fail(format!("rule {}: also_size: unknown card {card:?} (known: {})", r.id, crate::recommend::CARDS.join(", "))));
            }
        }
        for s in &r.supersedes {
            if set.rule(s).is_none() {
                return Err(fail(format!("rule {}: supersedes unknown rule {s:?}", r.id)));
            }
        }
    }
    // Last, once every reference is known good.
    unused_threshold(set, &uses)
}

/// A step's answer fields agree with what answers it: a signal's verdicts (`if_grew`, `if_fell`,
/// `if_unchanged`), the binding's (`held_by`, `if_held`, `if_not_held`) or the replicas'
/// (`if_even`, `if_uneven`), each only with its own `answered_by`.
fn step_answer(step: &RuleStep) -> Result<(), String> {
    use super::model::{BY_BINDING, BY_REPLICAS};
    let signal_words = step.if_grew.is_some() || step.if_fell.is_some() || step.if_unchanged.is_some();
    let binding_words = !step.held_by.is_empty() || step.if_held.is_some() || step.if_not_held.is_some();
    let replica_words = step.if_even.is_some() || step.if_uneven.is_some();
    let by = step.answered_by.as_deref();
    if by.is_none() && (signal_words || binding_words || replica_words) {
        return Err("it says what its answers mean but not what answers it: add `answered_by` (a signal, \"binding\" or \"replicas\")".into());
    }
    let by = by.unwrap_or_default();
    let (is_binding, is_replicas) = (by == BY_BINDING, by == BY_REPLICAS);
    if signal_words && (is_binding || is_replicas) {
        return Err(format!(
            "`if_grew`, `if_fell` and `if_unchanged` answer a signal's change, not answered_by = {by:?}: use {}",
            if is_binding { "`if_held` and `if_not_held`" } else { "`if_even` and `if_uneven`" }
        ));
    }
    if binding_words && !is_binding {
        return Err("`held_by`, `if_held` and `if_not_held` need answered_by = \"binding\"".into());
    }
    if replica_words && !is_replicas {
        return Err("`if_even` and `if_uneven` need answered_by = \"replicas\"".into());
    }
    if is_binding && step.held_by.is_empty() {
        let names: Vec<&str> = crate::report::LimitKind::ALL.iter().map(|k| k.name()).filter(|n| *n != "none").collect();
        return Err(format!("answered_by = \"binding\" needs `held_by`, the limits that confirm the step (any of {})", names.join(", ")));
    }
    for name in &step.held_by {
        if !crate::report::LimitKind::ALL.iter().any(|k| k.name() == name && *k != crate::report::LimitKind::None) {
            let names: Vec<&str> = crate::report::LimitKind::ALL.iter().map(|k| k.name()).filter(|n| *n != "none").collect();
            return Err(format!("held_by: unknown limit {name:?} (known: {})", names.join(", ")));
        }
    }
    Ok(())
}
