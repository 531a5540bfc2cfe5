//! Checks that need every file merged: each signal kind's fields, threshold units against the
//! signals they are compared with, thresholds nothing uses, and references between rules.

use std::collections::BTreeMap;

use super::*;
use crate::signals::SignalKind;

pub(super) fn validate_kind(kind: &SignalKind) -> Result<(), String> {
    let nonempty = |v: &Vec<String>, what: &str| {
        if v.is_empty() { Err(format!("`{what}` needs at least one metric name")) } else { Ok(()) }
    };
    match kind {
        SignalKind::Quantile { quantile, histogram, .. } => {
            if !(0.0..=1.0).contains(quantile) {
                return Err(format!("quantile {quantile} must be between 0 and 1"));
            }
            nonempty(histogram, "histogram")
        }
        SignalKind::Mean { histogram, model_label } => {
            if !model_label.is_empty() && !crate::prom::is_label_name(model_label) {
                return Err(format!("model_label {model_label:?} is not a label name"));
            }
            nonempty(histogram, "histogram")
        }
        SignalKind::Router { measure, family, denominator, r#match, worker_label, equals, workers, engines } => {
            use crate::signals::RouterMeasure as M;
            crate::signals::parse_match(r#match).map_err(|e| format!("match: {e}"))?;
            let worker_level = matches!(measure, M::Rate | M::Spread | M::HeldOut | M::PoolMean);
            if worker_level == worker_label.is_empty() {
                return Err("a router signal's rate, spread, held_out and pool_mean read a worker-level family (`worker_label`); its mean, ratio and over_engine_mean a router-level one (none)".into());
            }
            if !worker_label.is_empty() && !crate::prom::is_label_name(worker_label) {
                return Err(format!("worker_label {worker_label:?} is not a label name"));
            }
            if matches!(measure, M::Ratio | M::OverEngineMean) == denominator.is_empty() {
                return Err("`denominator` goes with the ratio and over_engine_mean measures, and only with them".into());
            }
            if !equals.is_finite() {
                return Err("`equals` must be a number".into());
            }
            nonempty(family, "family")?;
            nonempty(workers, "workers")?;
            nonempty(engines, "engines")
        }
        SignalKind::Remainder { histogram, minus } => {
            nonempty(histogram, "histogram")?;
            if minus.is_empty() {
                return Err("`minus` needs at least one histogram to subtract".into());
            }
            minus.iter().try_for_each(|m| nonempty(m, "minus"))
        }
        SignalKind::Rate { counter, r#match, .. } => {
            crate::signals::parse_match(r#match).map_err(|e| format!("match: {e}"))?;
            nonempty(counter, "counter")
        }
        SignalKind::Ratio { numerator, denominator, attribute_via, per, per_at_least, .. } => {
            if !per_at_least.is_finite() || *per_at_least < 0.0 {
                return Err(format!("per_at_least {per_at_least} must be a number of at least 0"));
            }
            if !per.is_empty() && !attribute_via.is_empty() {
                return Err("`per` is not combined with `attribute_via`".into());
            }
            crate::signals::parse_match(&numerator.r#match).map_err(|e| format!("numerator match: {e}"))?;
            crate::signals::parse_match(&denominator.r#match).map_err(|e| format!("denominator match: {e}"))?;
            nonempty(&numerator.counter, "numerator.counter")?;
            nonempty(&denominator.counter, "denominator.counter")
        }
        SignalKind::Gauge { less: Some(l), attribute_via, .. } if l.gauge.trim().is_empty() || !attribute_via.is_empty() => {
            Err("`less` names one gauge, and is not combined with `attribute_via`".into())
        }
        SignalKind::Gauge { less: Some(l), .. } if crate::signals::parse_match(&l.r#match).is_err() => {
            crate::signals::parse_match(&l.r#match).map(|_| ()).map_err(|e| format!("less.match: {e}"))
        }
        SignalKind::Gauge { bits, over, less, .. } if !bits.is_empty() && (over.is_some() || less.is_some()) => {
            Err("`bits` reads a bitmask, and is not combined with `over` or `less`".into())
        }
        SignalKind::Gauge { scale: Some(k), .. } if !k.is_finite() || *k <= 0.0 => Err(format!("scale {k} must be a number above 0")),
        SignalKind::Gauge { over: Some(o), less, .. } if o.trim().is_empty() || less.is_some() => {
            Err("`over` names one gauge, and is not combined with `less`".into())
        }
        SignalKind::Gauge { bits, .. } | SignalKind::ReplicasOver { bits, .. } if bits.iter().any(|b| !b.is_power_of_two()) => {
            let bad = bits.iter().find(|b| !b.is_power_of_two()).copied().unwrap_or_default();
            Err(format!("bits: {bad} is not a single bit (a power of two: 1, 2, 4, 8, ...)"))
        }
        SignalKind::Gauge { gauge, r#match, .. } | SignalKind::Slope { gauge, r#match } => {
            crate::signals::parse_match(r#match).map_err(|e| format!("match: {e}"))?;
            nonempty(gauge, "gauge")
        }
        SignalKind::ActiveShare { counter } | SignalKind::Spread { counter, .. } => nonempty(counter, "counter"),
        SignalKind::QueueWait { gauge, counter } => {
            nonempty(gauge, "gauge")?;
            nonempty(counter, "counter")
        }
        SignalKind::GiveUps { started, finished, running, .. } => {
            nonempty(started, "started")?;
            nonempty(finished, "finished")?;
            nonempty(running, "running")
        }
        SignalKind::StallShare { counter, running, waiting, .. } => {
            nonempty(counter, "counter")?;
            nonempty(running, "running")?;
            nonempty(waiting, "waiting")
        }
        SignalKind::Fill { gauge } | SignalKind::Vanished { gauge, .. } | SignalKind::ReplicasOver { gauge, .. } => {
            nonempty(gauge, "gauge")
        }
        SignalKind::Outlier { histogram, gauge, quantile, .. } => {
            if histogram.is_empty() == gauge.is_empty() {
                return Err("an outlier signal names either `histogram` or `gauge`".into());
            }
            if !(0.0..=1.0).contains(quantile) {
                return Err(format!("quantile {quantile} must be between 0 and 1"));
            }
            Ok(())
        }
        SignalKind::SloBurn { histogram, target, objective } => {
            for (what, v) in [("target", target), ("objective", objective)] {
                if !v.trim().starts_with('$') {
                    expr::parse_quantity(v).map_err(|e| format!("{what}: {}", e.message))?;
                }
            }
            nonempty(histogram, "histogram")
        }
    }
}

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
        if let SignalKind::SloBurn { target, objective, .. } = &d.kind {
            for (v, what, unit) in [(target, "latency target", "seconds"), (objective, "objective", "ratio")] {
                if let Some(name) = v.trim().strip_prefix('$') {
                    let by = format!("signal {} takes it as its {what}", d.id);
                    out.entry(name.to_string()).or_default().push(ThresholdUse { by, unit: unit.into() });
                }
            }
        }
    }
    out
}

/// Why threshold `name`, written as `text`, does not fit the values it is compared with, if it
/// does not (`"90%"` for a latency in seconds), for the caller to put after the name.
pub fn unit_misfit(name: &str, text: &str, uses: &BTreeMap<String, Vec<ThresholdUse>>) -> Option<String> {
    uses.get(name)?
        .iter()
        .find_map(|u| crate::units::unit_mismatch(text, &u.unit).map(|why| format!("{why} ({})", u.by)))
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
        }
    }
    for (threshold, w) in &set.threshold_origins {
        if let Some(why) = unit_misfit(threshold, &w.text, uses) {
            return Err(w.error(format!("threshold {threshold}: {why}")));
        }
    }
    for d in set.signals.values() {
        if let SignalKind::SloBurn { target, objective, .. } = &d.kind {
            for v in [target, objective] {
                if let Some(name) = v.trim().strip_prefix('$') {
                    if !set.thresholds.contains_key(name) {
                        return Err(at_origin(&d.origin, format!("signal {}: ${name} is a threshold no [thresholds] table defines", d.id)));
                    }
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
                return Err(fail(format!(
                    "rule {}: stand_in.missing names {m:?}, which none of the rule's own conditions or evidence reads",
                    r.id
                )));
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
        if let Some(rec) = &r.recommend {
            if !crate::recommend::KNOWN.contains(&rec.as_str()) {
                return Err(fail(format!("rule {}: unknown recommendation {rec:?} (known: {})", r.id, crate::recommend::KNOWN.join(", "))));
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
