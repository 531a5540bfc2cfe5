//! Evaluating rules over computed signal values, one scope at a time.

use std::collections::BTreeMap;

use super::expr::{self, Expr, Facts, Rhs, Truth};
use super::load::{Condition, RuleDef, RuleSet};
use crate::report::{Evidence, QueryFailure, Reason, RecentRead, Scope, Side, StoodIn, Term, Threshold};

/// Why a signal has no values at all.
#[derive(Debug, Clone, PartialEq)]
pub enum Availability {
    Ok,
    /// None of the metric names it can use exist in that window.
    Missing(Vec<String>),
    /// Its query failed (timeout, error); the failure says which.
    Failed(QueryFailure),
}

/// One signal's values for one window.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowValues {
    pub availability: Availability,
    pub values: BTreeMap<Scope, f64>,
    /// For quantiles: observations per scope.
    pub counts: BTreeMap<Scope, f64>,
    /// The PromQL the values came from (empty when it could not be built).
    pub query: String,
    /// The metric name used.
    pub metric: String,
    /// For per-replica signals: the replica each scope's value points at, as labels (`instance`,
    /// and `pod` where the signal is per pod).
    pub culprits: BTreeMap<Scope, BTreeMap<String, String>>,
    /// For quantiles: the histogram's finite bucket bounds found in the data, ascending (empty when
    /// unknown), which tell a value interpolated inside the first or `+Inf` bucket from a measured one.
    pub bounds: Vec<f64>,
}

impl WindowValues {
    pub fn unavailable(a: Availability) -> WindowValues {
        WindowValues {
            availability: a,
            values: BTreeMap::new(),
            counts: BTreeMap::new(),
            query: String::new(),
            metric: String::new(),
            culprits: BTreeMap::new(),
            bounds: Vec::new(),
        }
    }

    /// Where this window's value for `scope` lies among the histogram's buckets, when known.
    pub fn bucket(&self, scope: &Scope) -> Option<expr::Bucket> {
        expr::Bucket::locate(&self.bounds, *self.values.get(scope)?)
    }
}

/// One signal over both windows.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalValues {
    pub window: WindowValues,
    pub baseline: WindowValues,
}

/// Every signal the run computed, by id.
pub type SignalTable = BTreeMap<String, SignalValues>;

/// What one rule concluded for one scope.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `stood_in` says when the rule decided through its stand-in conditions, the primary signals
    /// being missing: a lower-confidence finding.
    /// `recent` says when they held over the window's last minutes only.
    Matched {
        score: f64,
        evidence: Vec<Evidence>,
        stood_in: Option<StoodIn>,
        recent: Option<RecentRead>,
    },
    NotMatched,
    Unknown {
        reasons: Vec<Reason>,
    },
}

struct ScopeFacts<'a> {
    table: &'a SignalTable,
    scope: &'a Scope,
    thresholds: &'a BTreeMap<String, f64>,
    set: &'a RuleSet,
}

impl ScopeFacts<'_> {
    fn optional(&self, signal: &str) -> bool {
        self.set.signals.get(signal).is_some_and(|d| d.optional)
    }
}

fn lookup(w: Option<&WindowValues>, signal: &str, scope: &Scope, side: Side) -> Result<f64, Reason> {
    let Some(w) = w else {
        return Err(Reason::NotComputed { signal: signal.to_string() });
    };
    match &w.availability {
        Availability::Missing(families) => Err(Reason::MetricMissing { side, families: families.clone() }),
        Availability::Failed(failure) => Err(Reason::QueryFailed { signal: signal.to_string(), side, failure: failure.clone() }),
        Availability::Ok => match w.values.get(scope) {
            Some(v) => Ok(*v),
            None => Err(Reason::NoData { signal: signal.to_string(), side }),
        },
    }
}

impl Facts for ScopeFacts<'_> {
    fn value(&self, signal: &str) -> Result<f64, String> {
        self.value_or_reason(signal).map_err(|r| r.text())
    }
    fn baseline(&self, signal: &str) -> Result<f64, String> {
        self.baseline_or_reason(signal).map_err(|r| r.text())
    }
    fn value_or_reason(&self, signal: &str) -> Result<f64, Reason> {
        lookup(self.table.get(signal).map(|s| &s.window), signal, self.scope, Side::Window)
    }
    fn baseline_or_reason(&self, signal: &str) -> Result<f64, Reason> {
        lookup(self.table.get(signal).map(|s| &s.baseline), signal, self.scope, Side::Baseline)
    }
    fn threshold(&self, name: &str) -> Option<f64> {
        self.thresholds.get(name).copied()
    }
    fn bucket(&self, signal: &str, baseline: bool) -> Option<expr::Bucket> {
        let v = self.table.get(signal)?;
        if baseline {
            v.baseline.bucket(self.scope)
        } else {
            v.window.bucket(self.scope)
        }
    }
    fn absent(&self, signal: &str) -> bool {
        // An optional signal with no data here means the feature is off or nothing happened.
        self.optional(signal)
            && self.table.get(signal).is_some_and(|s| match &s.window.availability {
                Availability::Missing(_) => true,
                Availability::Ok => !s.window.values.contains_key(self.scope),
                Availability::Failed(_) => false,
            })
    }
}

/// Whether the rule's caveat (what its metrics cannot show) applies to `scope`: its condition holds
/// there. False for a rule without one, and when the condition cannot be decided.
pub fn caveat_holds(rule: &RuleDef, set: &RuleSet, table: &SignalTable, scope: &Scope) -> bool {
    rule.caveat.as_ref().is_some_and(|c| holds(&c.when, set, table, scope))
}

/// Whether one condition holds for `scope` over the whole window (false when it cannot be decided).
fn holds(c: &Condition, set: &RuleSet, table: &SignalTable, scope: &Scope) -> bool {
    let facts = ScopeFacts { table, scope, thresholds: &set.thresholds, set };
    expr::eval(&c.expr, &facts).0 == Truth::True
}

/// Whether the window's last minutes are worth reading for `scope` by the rule's `[rule.recent]`
/// condition over the whole window (true for a rule without one; false when it cannot be decided).
pub fn recent_gate_holds(rule: &RuleDef, set: &RuleSet, table: &SignalTable, scope: &Scope) -> bool {
    rule.recent_when.as_ref().is_none_or(|c| holds(c, set, table, scope))
}

/// True when the rule's verdict for `scope` came from its stand-in conditions (its own could not be
/// decided for want of a metric), whichever way it went.
pub fn decided_by_stand_in(rule: &RuleDef, set: &RuleSet, table: &SignalTable, scope: &Scope) -> bool {
    if rule.stand_in.is_none() {
        return false;
    }
    let facts = ScopeFacts { table, scope, thresholds: &set.thresholds, set };
    matches!(conditions(&rule.when, &facts).0, Truth::Unknown(_)) && !matches!(evaluate(rule, set, table, scope), Outcome::Unknown { .. })
}

/// All conditions together: false as soon as one is false, unknown (with every reason) when none
/// is false but some are unknown, else true with the summed score.
fn conditions(when: &[Condition], facts: &ScopeFacts) -> (Truth, f64) {
    let mut unknown = Vec::new();
    let mut score = 0.0;
    for c in when {
        match expr::eval(&c.expr, facts) {
            (Truth::False, _) => return (Truth::False, 0.0),
            (Truth::Unknown(r), _) => unknown.extend(r),
            (Truth::True, s) => score += s,
        }
    }
    if unknown.is_empty() {
        (Truth::True, score)
    } else {
        let mut seen = std::collections::BTreeSet::new();
        unknown.retain(|r| seen.insert(r.clone()));
        (Truth::Unknown(unknown), 0.0)
    }
}

/// The signal table as a rule with `recent = true` reads it over the window's last minutes: each
/// signal with a recent reading gets that reading as its window (its baseline stays the whole
/// baseline window's), when the reading is shorter than the window (`range_seconds`, the longest
/// such range). `None` when no signal has a recent reading shorter than the window.
#[derive(Debug, Clone, PartialEq)]
pub struct RecentView {
    pub table: SignalTable,
    /// Signals whose window value is their recent reading.
    pub swapped: Vec<String>,
    pub range_seconds: u64,
}

pub fn recent_view(set: &RuleSet, table: &SignalTable, window: std::time::Duration) -> Option<RecentView> {
    let mut out = table.clone();
    let mut swapped = Vec::new();
    let mut range = std::time::Duration::ZERO;
    for (id, def) in &set.signals {
        let Some(rdef) = def.recent.as_ref().and_then(|r| set.signals.get(r)) else { continue };
        let r = rdef.range_in(window);
        let (Some(base), Some(recent)) = (out.get_mut(id), table.get(&rdef.id)) else { continue };
        if r >= window {
            continue;
        }
        base.window = recent.window.clone();
        swapped.push(id.clone());
        range = range.max(r);
    }
    (!swapped.is_empty()).then_some(RecentView { table: out, swapped, range_seconds: range.as_secs() })
}

/// The numbers a rule read for one scope, each against its condition, whatever the verdict: its
/// first `n` condition signals' evidence. A healthy verdict shows them, so an OK can be checked.
pub fn readings(rule: &RuleDef, set: &RuleSet, table: &SignalTable, scope: &Scope, n: usize) -> Vec<Evidence> {
    let mut signals: Vec<String> = Vec::new();
    for c in &rule.when {
        for cmp in c.expr.comparisons() {
            if !signals.contains(&cmp.signal) {
                signals.push(cmp.signal.clone());
            }
        }
    }
    signals.iter().take(n).map(|sig| evidence_for(&rule.when, set, table, scope, sig)).collect()
}

/// Evaluate one rule for one scope: its own conditions, and, when those cannot be decided because
/// signals its stand-in covers have no metric in the window, the stand-in conditions.
pub fn evaluate(rule: &RuleDef, set: &RuleSet, table: &SignalTable, scope: &Scope) -> Outcome {
    evaluate_in(rule, set, table, None, scope)
}

/// [`evaluate`], and for a rule with `recent = true` that the whole window does not match, its
/// conditions again over `recent` (the window's last minutes): a match there is a finding that
/// says so. A recent reading that failed leaves the rule not evaluated; one with no data (no
/// traffic in the last minutes) leaves the whole window's verdict.
pub fn evaluate_in(rule: &RuleDef, set: &RuleSet, table: &SignalTable, recent: Option<&RecentView>, scope: &Scope) -> Outcome {
    let outcome = evaluate_whole(rule, set, table, scope);
    let Some(view) = recent.filter(|_| rule.recent && matches!(outcome, Outcome::NotMatched)) else { return outcome };
    let pairs = set.recent_pairs(rule);
    let swapped: Vec<String> = pairs.iter().filter(|(sig, _)| view.swapped.contains(sig)).map(|(sig, _)| sig.clone()).collect();
    if swapped.is_empty() {
        return outcome;
    }
    let facts = ScopeFacts { table: &view.table, scope, thresholds: &set.thresholds, set };
    match conditions(&rule.when, &facts) {
        (Truth::True, s) => {
            let evidence = rule
                .primary_signals()
                .iter()
                .map(|sig| {
                    let mut e = evidence_for(&rule.when, set, &view.table, scope, sig);
                    if let Some(title) = pairs.iter().find(|(b, _)| b == sig).and_then(|(_, r)| set.signals.get(r)).map(|d| d.title.clone()) {
                        if swapped.contains(sig) {
                            e.title = title;
                        }
                    }
                    e
                })
                .collect();
            Outcome::Matched { score: rounded(s), evidence, stood_in: None, recent: Some(RecentRead { range_seconds: view.range_seconds, signals: swapped }) }
        }
        (Truth::False, _) => outcome,
        (Truth::Unknown(reasons), _) => {
            let failed = swapped.iter().filter_map(|sig| view.table.get(sig)).any(|v| matches!(v.window.availability, Availability::Failed(_)));
            if failed {
                Outcome::Unknown { reasons: reasons.into_iter().map(|r| Reason::LastMinutes(Box::new(r))).collect() }
            } else {
                outcome
            }
        }
    }
}

/// Whether the rule's conditions hold over the window's last minutes as well (`view`), for a rule
/// that matched: a finding of the last minutes alone is explained by it only then. Undecidable
/// there counts as holding (the whole window's verdict stands).
pub fn holds_late(rule: &RuleDef, set: &RuleSet, view: &RecentView, scope: &Scope) -> bool {
    let facts = ScopeFacts { table: &view.table, scope, thresholds: &set.thresholds, set };
    !matches!(conditions(&rule.when, &facts).0, Truth::False)
}

/// The signals whose comparisons decided a match for `scope`: every held condition's, and of an
/// `or` only the branch that held with the highest score (the first of equals), never the branches
/// that did not hold, nor what a `not` negates. `stood_in` reads the stand-in conditions. A finding
/// names the replica these signals point at, so that the instance named is the one its deciding
/// numbers are about (a TTFT outlier on one replica is not named after another's ITL).
/// With `every_branch`, the signals of every alternative that held, not only the best one.
pub fn deciding_signals(rule: &RuleDef, set: &RuleSet, table: &SignalTable, scope: &Scope, stood_in: bool, every_branch: bool) -> Vec<String> {
    let facts = ScopeFacts { table, scope, thresholds: &set.thresholds, set };
    let when = if stood_in { rule.stand_in.as_ref().map_or(&[][..], |s| &s.when[..]) } else { &rule.when[..] };
    let mut out = Vec::new();
    for c in when {
        held_signals(&c.expr, &facts, every_branch, &mut out);
    }
    out
}

fn held_signals(e: &Expr, facts: &ScopeFacts, every_branch: bool, out: &mut Vec<String>) {
    match e {
        Expr::Cmp(c) => {
            if expr::eval(e, facts).0 == Truth::True && !out.contains(&c.signal) {
                out.push(c.signal.clone());
            }
        }
        Expr::And(v) => v.iter().for_each(|x| held_signals(x, facts, every_branch, out)),
        Expr::Or(v) if every_branch => v.iter().filter(|x| expr::eval(x, facts).0 == Truth::True).for_each(|x| held_signals(x, facts, true, out)),
        Expr::Or(v) => {
            let best = v
                .iter()
                .filter_map(|x| match expr::eval(x, facts) {
                    (Truth::True, s) => Some((x, s)),
                    _ => None,
                })
                .fold(None::<(&Expr, f64)>, |best, (x, s)| match best {
                    Some((_, b)) if b >= s => best,
                    _ => Some((x, s)),
                });
            if let Some((x, _)) = best {
                held_signals(x, facts, false, out);
            }
        }
        Expr::Not(_) => {}
    }
}

/// A finding's score as reported: two decimals.
fn rounded(s: f64) -> f64 {
    (s * 100.0).round() / 100.0
}

fn evaluate_whole(rule: &RuleDef, set: &RuleSet, table: &SignalTable, scope: &Scope) -> Outcome {
    let facts = ScopeFacts { table, scope, thresholds: &set.thresholds, set };
    let reasons = match conditions(&rule.when, &facts) {
        (Truth::False, _) => return Outcome::NotMatched,
        (Truth::True, s) => {
            let evidence = rule.primary_signals().iter().map(|sig| evidence_for(&rule.when, set, table, scope, sig)).collect();
            return Outcome::Matched { score: rounded(s), evidence, stood_in: None, recent: None };
        }
        (Truth::Unknown(reasons), _) => reasons,
    };
    let Some(stand_in) = &rule.stand_in else {
        return Outcome::Unknown { reasons };
    };
    // A primary query that failed or timed out keeps the rule "not evaluated": the data may be there.
    let failed = rule.primary_signals().iter().any(|sig| {
        table.get(sig).is_some_and(|v| matches!(v.window.availability, Availability::Failed(_)) || matches!(v.baseline.availability, Availability::Failed(_)))
    });
    if failed {
        return Outcome::Unknown { reasons };
    }
    // Only a metric that does not exist lets the stand-in decide: a failed or timed-out query
    // stays "not evaluated", since the data may well be there.
    let missing: Vec<String> =
        stand_in.missing.iter().filter(|sig| table.get(*sig).is_some_and(|v| matches!(v.window.availability, Availability::Missing(_)))).cloned().collect();
    if missing.is_empty() {
        return Outcome::Unknown { reasons };
    }
    match conditions(&stand_in.when, &facts) {
        (Truth::False, _) => Outcome::NotMatched,
        (Truth::Unknown(more), _) => {
            let mut all = reasons;
            all.extend(more.into_iter().map(|r| Reason::StandIn(Box::new(r))));
            Outcome::Unknown { reasons: all }
        }
        (Truth::True, s) => {
            let signals = rule.stand_in_signals();
            let mut shown = signals.clone();
            for e in &rule.evidence {
                if !shown.contains(e) && !missing.contains(e) {
                    shown.push(e.clone());
                }
            }
            let evidence = shown.iter().map(|sig| evidence_for(&stand_in.when, set, table, scope, sig)).collect();
            Outcome::Matched { score: rounded(s), evidence, stood_in: Some(StoodIn { missing, signals }), recent: None }
        }
    }
}

fn evidence_for(when: &[Condition], set: &RuleSet, table: &SignalTable, scope: &Scope, sig: &str) -> Evidence {
    let def = set.signals.get(sig);
    let unit = def.map(|d| d.unit.as_str()).unwrap_or("");
    let values = table.get(sig);
    // What this signal was held to: each condition on it, written with its own comparisons and the
    // other signals it may be met through (`> 100 ms or (see running_avg)`). Whether it held is
    // about its own lines: the conditions on it alone when it has any (a condition it shares with
    // other signals is met through them as well, and its part there is one alternative), else its
    // parts of the shared ones. A finding's conditions all held, so this is what tells the reader
    // which signals crossed their lines. The limits drawn are its own comparisons alone.
    let facts = ScopeFacts { table, scope, thresholds: &set.thresholds, set };
    let on_it: Vec<&Condition> = when.iter().filter(|c| c.expr.comparisons().iter().any(|k| k.signal == sig)).collect();
    let projected: Vec<Expr> = on_it.iter().filter_map(|c| project(&c.expr, sig)).collect();
    let threshold = threshold_for(when, sig, unit, &set.thresholds);
    let own: Vec<&Expr> = on_it.iter().filter(|c| c.expr.comparisons().iter().all(|k| k.signal == sig)).map(|c| &c.expr).collect();
    let passed = if own.is_empty() {
        projected.iter().all(|e| expr::eval(e, &facts).0 == Truth::True)
    } else {
        own.iter().all(|e| expr::eval(e, &facts).0 == Truth::True)
    };
    let value = values.and_then(|v| v.window.values.get(scope).copied());
    let baseline = values.and_then(|v| v.baseline.values.get(scope).copied());
    let observations = values.and_then(|v| v.window.counts.get(scope).copied());
    let min_obs = def.and_then(|d| d.kind.kind().min_observations());
    let low_confidence = matches!((observations, min_obs), (Some(n), Some(m)) if n < m);
    Evidence {
        signal: sig.to_string(),
        title: def.map(|d| d.title.clone()).unwrap_or_else(|| sig.to_string()),
        unit: unit.to_string(),
        value,
        baseline,
        threshold,
        passed,
        query: values.map(|v| v.window.query.clone()).unwrap_or_default(),
        metric: values.map(|v| v.window.metric.clone()).unwrap_or_default(),
        low_confidence,
        observations: if min_obs.is_some() { observations } else { None },
        // A baseline known only as a bound gives no line to draw relative limits from.
        limits: limits(&projected, unit, &set.thresholds, baseline.filter(|_| values.and_then(|v| v.baseline.bucket(scope)).and_then(bound).is_none())),
        series: None,
        value_bound: values.and_then(|v| v.window.bucket(scope)).and_then(bound),
        baseline_bound: values.and_then(|v| v.baseline.bucket(scope)).and_then(bound),
        same_bucket: values
            .and_then(|v| Some((v.window.bucket(scope)?, v.baseline.bucket(scope)?)))
            .is_some_and(|(w, b)| w.index == b.index && w.interval.is_some()),
    }
}

/// A value known only as a bound, in the report's words.
fn bound(b: expr::Bucket) -> Option<crate::report::Bound> {
    let (lo, hi) = b.interval?;
    Some(if lo == 0.0 { crate::report::Bound::Below(hi) } else { crate::report::Bound::Above(lo) })
}

/// The numeric thresholds behind a signal's comparisons (relative ones need the baseline value).
fn limits(projected: &[Expr], unit: &str, thresholds: &BTreeMap<String, f64>, baseline: Option<f64>) -> Vec<crate::report::Limit> {
    let mut out: Vec<crate::report::Limit> = Vec::new();
    for e in projected {
        for c in e.comparisons() {
            let value = match &c.rhs {
                Rhs::Value { value, .. } => Some(*value),
                Rhs::Named { name } => thresholds.get(name).copied(),
                Rhs::Baseline { factor } => baseline.filter(|b| b.is_finite()).map(|b| b * factor),
            };
            let label = describe(&Expr::Cmp(c.clone()), unit, thresholds, true);
            if let Some(value) = value.filter(|v| v.is_finite()) {
                if !out.iter().any(|l| l.label == label) {
                    let side = match c.op {
                        expr::CmpOp::Gt => crate::report::LimitSide::Above,
                        expr::CmpOp::Ge => crate::report::LimitSide::AtOrAbove,
                        expr::CmpOp::Lt => crate::report::LimitSide::Below,
                        expr::CmpOp::Le => crate::report::LimitSide::AtOrBelow,
                    };
                    out.push(crate::report::Limit { label, value, side });
                }
            }
        }
    }
    out
}

/// The part of a condition that speaks of one signal (`None` when it does not mention it).
fn project(e: &Expr, sig: &str) -> Option<Expr> {
    match e {
        Expr::Cmp(c) => (c.signal == sig).then(|| e.clone()),
        Expr::Not(x) => project(x, sig).map(|x| Expr::Not(Box::new(x))),
        Expr::And(v) | Expr::Or(v) => {
            let mut kept: Vec<Expr> = v.iter().filter_map(|x| project(x, sig)).collect();
            match kept.len() {
                0 => None,
                1 => kept.pop(),
                _ => Some(if matches!(e, Expr::And(_)) { Expr::And(kept) } else { Expr::Or(kept) }),
            }
        }
    }
}

/// What `sig` is held to by the conditions `when`: each condition that reads it, as it bears on
/// it (see [`crate::report::Threshold`]).
pub fn threshold_for(when: &[Condition], sig: &str, unit: &str, thresholds: &BTreeMap<String, f64>) -> Threshold {
    let on_it = when.iter().filter(|c| c.expr.comparisons().iter().any(|k| k.signal == sig));
    Threshold { lines: on_it.map(|c| describe_for(&c.expr, sig, unit, thresholds)).collect() }
}

/// A condition as it bears on `sig`, for people: its comparisons on `sig` in the signal's unit, then
/// the other signals the same `and` or `or` reads (written `(see a, b)`):
/// `<= 100 ms and (< 1.5x baseline or (see running_avg, generation_tokens_rate))`.
fn describe_for(e: &Expr, sig: &str, unit: &str, thresholds: &BTreeMap<String, f64>) -> Term {
    let mentions = |x: &Expr| x.comparisons().iter().any(|k| k.signal == sig);
    match e {
        Expr::Cmp(_) => Term::Text(describe(e, unit, thresholds, true)),
        Expr::Not(x) => Term::Not(Box::new(describe_for(x, sig, unit, thresholds))),
        Expr::And(v) | Expr::Or(v) => {
            // `and` and `or` do not depend on their order: this signal's parts first, then the
            // other signals' in one group.
            let parts: Vec<Term> = v.iter().filter(|x| mentions(x)).map(|x| describe_for(x, sig, unit, thresholds)).collect();
            let mut see: Vec<String> = Vec::new();
            for k in v.iter().filter(|x| !mentions(x)).flat_map(|x| x.comparisons()) {
                if !see.contains(&k.signal) {
                    see.push(k.signal.clone());
                }
            }
            Term::Group { all: matches!(e, Expr::And(_)), parts, see }
        }
    }
}

/// A projected condition for people: `>= 2x baseline or > 3 s`, values in the signal's unit.
fn describe(e: &Expr, unit: &str, thresholds: &BTreeMap<String, f64>, top: bool) -> String {
    match e {
        Expr::Cmp(c) => {
            let rhs = match &c.rhs {
                Rhs::Value { value, .. } => crate::units::format_value(*value, unit),
                Rhs::Named { name } => thresholds.get(name).map(|v| crate::units::format_value(*v, unit)).unwrap_or_else(|| format!("${name}")),
                b @ Rhs::Baseline { .. } => b.to_string(),
            };
            format!("{} {rhs}", c.op.as_str())
        }
        Expr::Not(x) => format!("not ({})", describe(x, unit, thresholds, true)),
        Expr::And(v) | Expr::Or(v) => {
            let sep = if matches!(e, Expr::And(_)) { " and " } else { " or " };
            let inner = v.iter().map(|x| describe(x, unit, thresholds, false)).collect::<Vec<_>>().join(sep);
            if top {
                inner
            } else {
                format!("({inner})")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::load::{load_str, RuleSet};

    fn scope(m: &str) -> Scope {
        [("model_name".to_string(), m.to_string())].into_iter().collect()
    }

    fn wv(vals: &[(&str, f64)]) -> WindowValues {
        WindowValues {
            availability: Availability::Ok,
            values: vals.iter().map(|(m, v)| (scope(m), *v)).collect(),
            counts: vals.iter().map(|(m, _)| (scope(m), 500.0)).collect(),
            query: "q".into(),
            metric: "m".into(),
            culprits: BTreeMap::new(),
            bounds: Vec::new(),
        }
    }

    fn set() -> RuleSet {
        let mut s = RuleSet::default();
        load_str(
            &mut s,
            "t.toml",
            r#"
[thresholds]
high = "3s"
[[signal]]
id = "a"
title = "A"
unit = "seconds"
kind = "quantile"
quantile = 0.95
histogram = ["h"]
[[signal]]
id = "b"
title = "B"
unit = "ratio"
kind = "gauge"
gauge = ["g"]
over_time = "max"
across = "max"
[[rule]]
id = "r"
title = "R"
severity = "warning"
summary = "s"
when = ["a >= 2x baseline or a > $high", "b > 50%"]
"#,
        )
        .unwrap();
        s
    }

    /// A condition shared with another signal names it: load-exceeds-capacity's ITL guard holds when
    /// the batch grew, and its row said "no" with the batch left out of its text. A signal's own
    /// condition decides whether it held; its part of a shared one (one alternative) does not.
    #[test]
    fn a_condition_met_through_another_signal_holds_and_names_it() {
        let mut s = set();
        load_str(
            &mut s,
            "u.toml",
            r#"
[[rule]]
id = "q"
title = "Q"
severity = "warning"
summary = "s"
when = ["b > 50%", "a <= $high and (a < 1.5x baseline or b >= 2x baseline)"]
"#,
        )
        .unwrap();
        let mut t = SignalTable::new();
        // a rose 2x (not under 1.5x), but b doubled: the second condition holds through b.
        t.insert("a".into(), SignalValues { window: wv(&[("m", 2.0)]), baseline: wv(&[("m", 1.0)]) });
        t.insert("b".into(), SignalValues { window: wv(&[("m", 0.9)]), baseline: wv(&[("m", 0.4)]) });
        let Outcome::Matched { evidence, .. } = evaluate(s.rule("q").unwrap(), &s, &t, &scope("m")) else { panic!("q should match") };
        let a = evidence.iter().find(|e| e.signal == "a").unwrap();
        assert_eq!(a.threshold, "<= 3 s and (< 1.5x baseline or (see b))");
        // Its own part (under 1.5x) did not hold: the text says what met it instead.
        assert!(!a.passed, "{a:?}");
        // Its own limits stay its own comparisons.
        assert!(a.limits.iter().all(|l| !l.label.contains("see")), "{:?}", a.limits);
        let b = evidence.iter().find(|e| e.signal == "b").unwrap();
        assert_eq!(b.threshold, "> 50%; (>= 2x baseline or (see a)) and (see a)");
        assert!(b.passed);
        // Neither way: the condition fails, and so does each row it bears on.
        t.insert("b".into(), SignalValues { window: wv(&[("m", 0.6)]), baseline: wv(&[("m", 0.4)]) });
        assert!(matches!(evaluate(s.rule("q").unwrap(), &s, &t, &scope("m")), Outcome::NotMatched));
        // b's own condition decides its row, not its part of the shared one: b at 0.7 is over 50%
        // but not 2x its baseline of 0.4, and the rule still matches (a is now under 1.5x).
        t.insert("a".into(), SignalValues { window: wv(&[("m", 1.2)]), baseline: wv(&[("m", 1.0)]) });
        t.insert("b".into(), SignalValues { window: wv(&[("m", 0.7)]), baseline: wv(&[("m", 0.4)]) });
        let Outcome::Matched { evidence, .. } = evaluate(s.rule("q").unwrap(), &s, &t, &scope("m")) else { panic!("q should match") };
        assert!(evidence.iter().find(|e| e.signal == "b").unwrap().passed);
        assert!(evidence.iter().find(|e| e.signal == "a").unwrap().passed);
    }

    #[test]
    fn matches_when_every_condition_holds_and_builds_evidence() {
        let s = set();
        let mut t = SignalTable::new();
        t.insert("a".into(), SignalValues { window: wv(&[("m", 4.0)]), baseline: wv(&[("m", 1.0)]) });
        t.insert("b".into(), SignalValues { window: wv(&[("m", 0.9)]), baseline: wv(&[("m", 0.2)]) });
        match evaluate(s.rule("r").unwrap(), &s, &t, &scope("m")) {
            Outcome::Matched { score, evidence, .. } => {
                assert!(score > 0.0);
                assert_eq!(evidence.len(), 2);
                assert_eq!(evidence[0].threshold, ">= 2x baseline or > 3 s");
                assert_eq!(evidence[1].threshold, "> 50%");
                assert_eq!(evidence[0].value, Some(4.0));
                assert_eq!(evidence[0].baseline, Some(1.0));
                assert!(evidence[0].passed);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_metric_makes_the_rule_unknown_and_names_it() {
        let s = set();
        let mut t = SignalTable::new();
        t.insert("a".into(), SignalValues { window: wv(&[("m", 4.0)]), baseline: wv(&[("m", 1.0)]) });
        let missing = WindowValues::unavailable(Availability::Missing(vec!["g".into()]));
        t.insert("b".into(), SignalValues { window: missing.clone(), baseline: missing });
        match evaluate(s.rule("r").unwrap(), &s, &t, &scope("m")) {
            Outcome::Unknown { reasons } => assert_eq!(reasons.iter().map(Reason::text).collect::<Vec<_>>(), ["metric missing in the window: g"]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_false_condition_decides_even_when_another_is_unknown() {
        let s = set();
        let mut t = SignalTable::new();
        t.insert("a".into(), SignalValues { window: wv(&[("m", 0.5)]), baseline: wv(&[("m", 0.5)]) });
        let missing = WindowValues::unavailable(Availability::Failed(QueryFailure::new(crate::report::FailureKind::TimedOut, "timed out")));
        t.insert("b".into(), SignalValues { window: missing.clone(), baseline: missing });
        assert_eq!(evaluate(s.rule("r").unwrap(), &s, &t, &scope("m")), Outcome::NotMatched);
    }

    #[test]
    fn few_observations_mark_a_quantile_low_confidence() {
        let s = set();
        let mut t = SignalTable::new();
        let mut w = wv(&[("m", 4.0)]);
        w.counts.insert(scope("m"), 3.0);
        t.insert("a".into(), SignalValues { window: w, baseline: wv(&[("m", 1.0)]) });
        t.insert("b".into(), SignalValues { window: wv(&[("m", 0.9)]), baseline: wv(&[("m", 0.2)]) });
        let Outcome::Matched { evidence, .. } = evaluate(s.rule("r").unwrap(), &s, &t, &scope("m")) else { panic!() };
        assert!(evidence[0].low_confidence);
        assert_eq!(evidence[0].observations, Some(3.0));
        assert!(!evidence[1].low_confidence);
    }

    #[test]
    fn a_chronic_problem_fires_on_absolute_thresholds_even_when_the_baseline_was_as_bad() {
        let set = crate::rules::load_builtin().unwrap();
        let mut t = SignalTable::new();
        // Queue and TTFT were already terrible in the baseline: no rise, but far over the ceilings.
        for (sig, v) in [("ttft_p95", 8.0), ("queue_p95", 6.0), ("itl_p95", 0.04)] {
            t.insert(sig.into(), SignalValues { window: wv(&[("m", v)]), baseline: wv(&[("m", v)]) });
        }
        let rule = set.rule("load-exceeds-capacity").unwrap();
        assert!(matches!(evaluate(rule, &set, &t, &scope("m")), Outcome::Matched { .. }));
    }

    /// Signals of model "m" with their (window, baseline) values.
    fn measured(signals: &[(&str, f64, f64)]) -> SignalTable {
        signals.iter().map(|(sig, w, b)| (sig.to_string(), SignalValues { window: wv(&[("m", *w)]), baseline: wv(&[("m", *b)]) })).collect()
    }

    /// The built-in pack's signals for one model: `present` with values (window, baseline), every
    /// latency histogram missing from the data.
    fn gauge_only(present: &[(&str, f64, f64)]) -> SignalTable {
        let mut t = measured(present);
        for sig in ["ttft_p95", "queue_p95", "itl_p95"] {
            let missing = WindowValues::unavailable(Availability::Missing(vec![format!("vllm:{sig}_bucket")]));
            t.insert(sig.into(), SignalValues { window: missing.clone(), baseline: missing });
        }
        t
    }

    #[test]
    fn without_latency_histograms_the_stand_in_names_kv_pressure_and_says_so() {
        let set = crate::rules::load_builtin().unwrap();
        // A server under pressure in both windows (a chronic problem): absolute levels decide.
        let t =
            gauge_only(&[("kv_usage_max", 1.0, 1.0), ("preemption_active", 1.0, 1.0), ("waiting_per_replica", 116.0, 110.0), ("queue_wait_mean", 40.0, 38.0)]);
        match evaluate(set.rule("kv-cache-pressure").unwrap(), &set, &t, &scope("m")) {
            Outcome::Matched { stood_in: Some(s), evidence, .. } => {
                assert_eq!(s.missing, vec!["ttft_p95", "queue_p95", "itl_p95"]);
                assert!(s.signals.contains(&"waiting_per_replica".to_string()), "{s:?}");
                assert!(evidence.iter().any(|e| e.signal == "waiting_per_replica" && e.passed));
                assert!(!evidence.iter().any(|e| e.signal == "ttft_p95"), "missing signals are not shown as evidence");
            }
            other => panic!("{other:?}"),
        }
        // The stand-in is a rule of its own: an empty queue keeps it quiet.
        let quiet =
            gauge_only(&[("kv_usage_max", 1.0, 1.0), ("preemption_active", 1.0, 1.0), ("waiting_per_replica", 0.0, 0.0), ("queue_wait_mean", 0.0, 0.0)]);
        assert_eq!(evaluate(set.rule("kv-cache-pressure").unwrap(), &set, &quiet, &scope("m")), Outcome::NotMatched);
    }

    #[test]
    fn a_failed_query_never_hands_the_decision_to_the_stand_in() {
        let set = crate::rules::load_builtin().unwrap();
        let mut t =
            gauge_only(&[("kv_usage_max", 1.0, 1.0), ("preemption_active", 1.0, 1.0), ("waiting_per_replica", 116.0, 110.0), ("queue_wait_mean", 40.0, 38.0)]);
        for sig in ["ttft_p95", "queue_p95", "itl_p95"] {
            let failed = WindowValues::unavailable(Availability::Failed(QueryFailure::new(crate::report::FailureKind::TimedOut, "timed out")));
            t.insert(sig.into(), SignalValues { window: failed.clone(), baseline: failed });
        }
        assert!(matches!(evaluate(set.rule("kv-cache-pressure").unwrap(), &set, &t, &scope("m")), Outcome::Unknown { .. }));
    }

    #[test]
    fn an_itl_rise_that_comes_with_a_doubled_batch_and_more_tokens_is_load() {
        let set = crate::rules::load_builtin().unwrap();
        // Real-engine overload: queue and TTFT up ~10x, ITL up 1.6x.
        let table = |running: f64, tokens: f64| {
            measured(&[
                ("ttft_p95", 2.4, 0.04),
                ("queue_p95", 2.2, 0.1),
                ("itl_p95", 0.037, 0.023),
                ("running_avg", running, 1.6),
                ("generation_tokens_rate", tokens, 160.0),
            ])
        };
        let load = table(28.0, 1700.0);
        assert!(matches!(evaluate(set.rule("load-exceeds-capacity").unwrap(), &set, &load, &scope("m")), Outcome::Matched { .. }));
        assert_eq!(evaluate(set.rule("severe-saturation").unwrap(), &set, &load, &scope("m")), Outcome::NotMatched);
        // The batch grew only because every request took longer: fewer tokens per second.
        let starved = table(3.0, 70.0);
        assert!(matches!(evaluate(set.rule("severe-saturation").unwrap(), &set, &starved, &scope("m")), Outcome::Matched { .. }));
    }

    #[test]
    fn a_prefix_hit_ratio_low_in_both_windows_is_not_a_finding() {
        let set = crate::rules::load_builtin().unwrap();
        let table = |hit_w: f64, hit_b: f64| {
            measured(&[
                ("prefix_queries_rate", 300.0, 300.0),
                ("prefix_hit_ratio", hit_w, hit_b),
                ("prompt_len_mean", 64.0, 64.0),
                ("ttft_p95", 0.2, 0.04),
                ("prefill_p95", 0.2, 0.2),
            ])
        };
        let rule = set.rule("prefix-cache-miss").unwrap();
        assert_eq!(evaluate(rule, &set, &table(0.0, 0.0), &scope("m")), Outcome::NotMatched);
        assert!(matches!(evaluate(rule, &set, &table(0.02, 0.9), &scope("m")), Outcome::Matched { .. }));
    }

    /// The real engine's slow-decode phase at the end of a ten-minute window that began with KV
    /// pressure: over the whole window the queue was long (the earlier episode) and ITL rose 1.28x;
    /// over the last five minutes ITL doubled with an empty queue and a smaller batch.
    fn late_slow_decode() -> SignalTable {
        measured(&[
            ("itl_p95", 0.0317, 0.0248),
            ("itl_p95_recent", 0.050, 0.025),
            ("queue_p95", 13.2, 1.95),
            ("queue_p95_recent", 0.285, 1.97),
            ("running_avg", 3.15, 9.21),
            ("running_recent", 1.63, 11.8),
            ("generation_tokens_rate", 289.0, 682.0),
            ("generation_tokens_recent", 110.0, 822.0),
            ("itl_p99", 0.0567, 0.0664),
            ("output_len_mean", 94.0, 32.0),
            ("output_len_recent", 32.0, 32.0),
        ])
    }

    #[test]
    fn a_late_episode_is_decided_over_the_last_minutes_against_the_whole_baseline() {
        let set = crate::rules::load_builtin().unwrap();
        let rule = set.rule("slow-decode").unwrap();
        let t = late_slow_decode();
        // Over the whole window the earlier episode's queue hides it.
        assert_eq!(evaluate(rule, &set, &t, &scope("m")), Outcome::NotMatched);
        let view = recent_view(&set, &t, std::time::Duration::from_secs(600)).unwrap();
        assert_eq!(view.range_seconds, 300);
        match evaluate_in(rule, &set, &t, Some(&view), &scope("m")) {
            Outcome::Matched { recent: Some(r), evidence, .. } => {
                assert_eq!(r.range_seconds, 300);
                assert!(r.signals.contains(&"itl_p95".to_string()) && r.signals.contains(&"queue_p95".to_string()), "{r:?}");
                let itl = evidence.iter().find(|e| e.signal == "itl_p95").unwrap();
                // The last minutes' value, the whole baseline's value, and the reading's own title.
                assert_eq!((itl.value, itl.baseline), (Some(0.050), Some(0.0248)));
                assert_eq!(itl.title, "P95 inter-token latency (last 5 min)");
                // A signal without a recent reading keeps the whole window's value and title.
                let p99 = evidence.iter().find(|e| e.signal == "itl_p99").unwrap();
                assert_eq!((p99.value, p99.title.as_str()), (Some(0.0567), "P99 inter-token latency"));
            }
            other => panic!("{other:?}"),
        }
        // A rule without `recent = true` is not decided again.
        let kv = set.rule("kv-cache-pressure").unwrap();
        assert!(!kv.recent);
        assert_eq!(evaluate_in(kv, &set, &t, Some(&view), &scope("m")), evaluate(kv, &set, &t, &scope("m")));
    }

    #[test]
    fn a_window_no_longer_than_the_recent_range_has_no_second_reading() {
        let set = crate::rules::load_builtin().unwrap();
        let t = late_slow_decode();
        assert!(recent_view(&set, &t, std::time::Duration::from_secs(300)).is_none());
        assert!(recent_view(&set, &t, std::time::Duration::from_secs(180)).is_none());
        assert!(recent_view(&set, &t, std::time::Duration::from_secs(301)).is_some());
    }

    #[test]
    fn a_failed_recent_reading_leaves_the_rule_not_evaluated_and_a_quiet_one_healthy() {
        let set = crate::rules::load_builtin().unwrap();
        let rule = set.rule("slow-decode").unwrap();
        let mut t = late_slow_decode();
        let failed = WindowValues::unavailable(Availability::Failed(QueryFailure::new(crate::report::FailureKind::TimedOut, "timed out")));
        t.get_mut("itl_p95_recent").unwrap().window = failed;
        let view = recent_view(&set, &t, std::time::Duration::from_secs(600)).unwrap();
        assert!(matches!(evaluate_in(rule, &set, &t, Some(&view), &scope("m")), Outcome::Unknown { .. }));
        // No traffic in the last minutes: nothing to read there, the whole window's verdict stands.
        let mut t = late_slow_decode();
        t.get_mut("itl_p95_recent").unwrap().window = wv(&[]);
        let view = recent_view(&set, &t, std::time::Duration::from_secs(600)).unwrap();
        assert_eq!(evaluate_in(rule, &set, &t, Some(&view), &scope("m")), Outcome::NotMatched);
        // The same last minutes with ITL at its baseline level: healthy.
        let mut t = late_slow_decode();
        t.get_mut("itl_p95_recent").unwrap().window = wv(&[("m", 0.026)]);
        let view = recent_view(&set, &t, std::time::Duration::from_secs(600)).unwrap();
        assert_eq!(evaluate_in(rule, &set, &t, Some(&view), &scope("m")), Outcome::NotMatched);
    }

    #[test]
    fn an_episode_that_is_over_does_not_hold_late() {
        let set = crate::rules::load_builtin().unwrap();
        let mut t = late_slow_decode();
        // KV pressure earlier in the window: the cache full, preemptions over half of the window
        // but a tenth of its last five minutes.
        for (sig, w, b) in [("kv_usage_max", 1.0, 0.6), ("preemption_active", 0.5, 0.0), ("preemption_recent", 0.1, 0.0), ("ttft_p95", 15.8, 2.41)] {
            t.insert(sig.into(), SignalValues { window: wv(&[("m", w)]), baseline: wv(&[("m", b)]) });
        }
        let kv = set.rule("kv-cache-pressure").unwrap();
        assert!(matches!(evaluate(kv, &set, &t, &scope("m")), Outcome::Matched { .. }));
        let view = recent_view(&set, &t, std::time::Duration::from_secs(600)).unwrap();
        assert!(!holds_late(kv, &set, &view, &scope("m")));
        // Preemptions over half of the last five minutes too: it holds there.
        t.get_mut("preemption_recent").unwrap().window = wv(&[("m", 0.6)]);
        let view = recent_view(&set, &t, std::time::Duration::from_secs(600)).unwrap();
        assert!(holds_late(kv, &set, &view, &scope("m")));
    }
}
