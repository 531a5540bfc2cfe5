//! Stage: assemble. Answers become values: each signal's value per scope in the window and the
//! baseline (with the replica a per-replica signal names), and the fleet's label counts.

use std::collections::{BTreeMap, BTreeSet};

use super::fetch::Answers;
use super::plan::{Planned, SignalPlan};
use crate::report::{RunParams, Scope};
use crate::rules::eval::{Availability, SignalTable, SignalValues, WindowValues};
use crate::signals;
use crate::source::{Data, Request, Response, Sample};

/// The scope a sample belongs to: its values of the grouping labels (empty when it lacks one).
fn scope_of(s: &Sample, group_by: &[String]) -> Scope {
    group_by.iter().map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect()
}

/// Turn a vector answer into values per scope.
pub fn by_scope(resp: &Response, group_by: &[String]) -> BTreeMap<Scope, f64> {
    match &resp.data {
        Data::Vector(samples) => samples.iter().map(|s| (scope_of(s, group_by), s.v)).collect(),
        _ => BTreeMap::new(),
    }
}

type Culprits = BTreeMap<Scope, BTreeMap<String, String>>;

/// Outlier answers: one series per scope whose value is already the ratio and whose replica label
/// names the worst replica. A scope with one replica has no series (nothing to compare with).
pub fn outliers(resp: &Response, group_by: &[String], label: &str) -> (BTreeMap<Scope, f64>, Culprits) {
    let mut values = BTreeMap::new();
    let mut culprits = BTreeMap::new();
    if let Data::Vector(samples) = &resp.data {
        // 0/0 (all replicas idle) is NaN: no outlier to speak of.
        for s in samples.iter().filter(|s| !s.v.is_nan()) {
            let scope = scope_of(s, group_by);
            values.insert(scope.clone(), s.v);
            if let Some(name) = s.labels.get(label) {
                culprits.insert(scope, [(label.to_string(), name.clone())].into_iter().collect());
            }
        }
    }
    (values, culprits)
}

/// Per-replica answers listing replicas: the value is how many per scope, and a lone replica is
/// named (by the replica label, and by `instance` too when the answer carries it).
pub fn listed(resp: &Response, group_by: &[String], label: &str) -> (BTreeMap<Scope, f64>, Culprits) {
    let mut per: BTreeMap<Scope, BTreeMap<String, Option<String>>> = BTreeMap::new();
    if let Data::Vector(samples) = &resp.data {
        for s in samples {
            let name = s.labels.get(label).cloned().unwrap_or_default();
            let instance = (label != "instance").then(|| s.labels.get("instance").cloned()).flatten();
            per.entry(scope_of(s, group_by)).or_default().insert(name, instance);
        }
    }
    let mut values = BTreeMap::new();
    let mut culprits = BTreeMap::new();
    for (scope, names) in per {
        values.insert(scope.clone(), names.len() as f64);
        if let (1, Some((name, instance))) = (names.len(), names.iter().next()) {
            let mut c: BTreeMap<String, String> = [(label.to_string(), name.clone())].into_iter().collect();
            if let Some(i) = instance {
                c.insert("instance".into(), i.clone());
            }
            culprits.insert(scope, c);
        }
    }
    (values, culprits)
}

/// One signal's values in one window from the answers to its plan.
pub fn fill(pl: &Planned, answers: &Answers, group_by: &[String]) -> WindowValues {
    let mut wv = WindowValues {
        availability: pl.availability.clone(),
        values: BTreeMap::new(),
        counts: BTreeMap::new(),
        query: pl.query.clone(),
        metric: pl.metric.clone(),
        culprits: BTreeMap::new(),
        bounds: pl.bounds.clone(),
    };
    if let Some(req) = &pl.value {
        match answers.get(req) {
            Some(Ok(resp)) => match &pl.per_replica {
                None => wv.values = by_scope(resp, group_by),
                Some((label, signals::Reduction::Outlier)) => (wv.values, wv.culprits) = outliers(resp, group_by, label),
                Some((label, signals::Reduction::Count)) => (wv.values, wv.culprits) = listed(resp, group_by, label),
            },
            Some(Err(e)) => wv.availability = Availability::Failed(e.short_reason()),
            None => wv.availability = Availability::Failed("not answered".into()),
        }
    }
    if let Some(Some(Ok(resp))) = pl.count.as_ref().map(|r| answers.get(r)) {
        wv.counts = by_scope(resp, group_by);
    }
    // NaN values (a quantile over no observations, 0/0) are no data for that scope.
    wv.values.retain(|_, v| !v.is_nan());
    wv
}

/// Every planned signal's values, and the metric name each was read from (both names when vLLM
/// renamed it between the baseline and the window, which a warning reports).
pub fn signal_table(plan: &SignalPlan, answers: &Answers, group_by: &[String], warnings: &mut Vec<String>) -> (SignalTable, BTreeMap<String, String>) {
    let mut table = SignalTable::new();
    let mut names_used = BTreeMap::new();
    for (id, (w, b)) in &plan.signals {
        let sv = SignalValues { window: fill(w, answers, group_by), baseline: fill(b, answers, group_by) };
        if !sv.window.metric.is_empty() {
            let used = if !sv.baseline.metric.is_empty() && sv.baseline.metric != sv.window.metric {
                warnings.push(format!("{id}: metric name changed between baseline ({}) and window ({}); vLLM was probably upgraded", sv.baseline.metric, sv.window.metric));
                format!("{} (baseline: {})", sv.window.metric, sv.baseline.metric)
            } else {
                sv.window.metric.clone()
            };
            names_used.insert(id.clone(), used);
        }
        table.insert(id.clone(), sv);
    }
    (table, names_used)
}

/// How many values each fleet label takes, from its count query. A count that did not answer
/// leaves the label out (the header then says less, nothing more); without the running-requests
/// gauge the counts say nothing at all. Grouping or replica labels no series carries are warned of.
pub fn fleet_labels(requests: &[(String, Request)], answers: &Answers, window_names: &BTreeSet<String>, p: &RunParams, warnings: &mut Vec<String>) -> BTreeMap<String, usize> {
    let mut labels = BTreeMap::new();
    for (label, req) in requests {
        if let Some(Ok(Response { data: Data::Vector(samples), .. })) = answers.get(req) {
            let n = samples.first().map(|s| s.v).filter(|v| v.is_finite() && *v >= 0.0).unwrap_or(0.0);
            labels.insert(label.clone(), n as usize);
        }
    }
    if !signals::RUNNING_GAUGE.iter().any(|n| window_names.contains(*n)) {
        labels.clear();
    }
    let present: Vec<&str> = labels.iter().filter(|(_, n)| **n > 0).map(|(l, _)| l.as_str()).collect();
    let present = if present.is_empty() { "none".to_string() } else { present.join(", ") };
    for label in &p.group_by {
        if labels.get(label) == Some(&0) {
            warnings.push(format!(
                "--group-by {label}: no vLLM series in the window carries this label, so every finding has it empty; labels checked and found: {present}"
            ));
        }
    }
    if labels.get(&p.replica_label) == Some(&0) {
        warnings.push(format!(
            "--replica-label {}: no vLLM series in the window carries this label, so replicas cannot be told apart (outliers, imbalance and affected replicas see one per scope); labels checked and found: {present}",
            p.replica_label
        ));
    }
    labels
}
