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

/// Samples grouped by scope, keyed by borrowed label values while grouping (a per-replica answer
/// has tens of thousands of samples, a few hundred scopes), each scope built once at the end.
fn grouped<'a, T>(samples: impl Iterator<Item = &'a Sample>, group_by: &[String], mut item: impl FnMut(&'a Sample) -> Option<T>) -> BTreeMap<Scope, Vec<T>> {
    let mut per: std::collections::HashMap<Vec<&'a str>, Vec<T>> = std::collections::HashMap::new();
    let mut key: Vec<&'a str> = Vec::with_capacity(group_by.len());
    for s in samples {
        if let Some(x) = item(s) {
            key.clear();
            key.extend(group_by.iter().map(|l| s.labels.get(l).map_or("", String::as_str)));
            match per.get_mut(&key) {
                Some(xs) => xs.push(x),
                None => {
                    per.insert(key.clone(), vec![x]);
                }
            }
        }
    }
    per.into_iter().map(|(key, xs)| (group_by.iter().cloned().zip(key.into_iter().map(String::from)).collect(), xs)).collect()
}

fn samples(resp: &Response) -> &[Sample] {
    match &resp.data {
        Data::Vector(samples) => samples,
        _ => &[],
    }
}

fn le_of(s: &Sample) -> Option<f64> {
    s.labels.get("le").and_then(|l| crate::local::functions::parse_go_float(l))
}

/// Turn a vector answer into values per scope.
pub fn by_scope(resp: &Response, group_by: &[String]) -> BTreeMap<Scope, f64> {
    match &resp.data {
        Data::Vector(samples) => samples.iter().map(|s| (scope_of(s, group_by), s.v)).collect(),
        _ => BTreeMap::new(),
    }
}

/// Bucket-rate answers (`sum by (le, G) (...)`): per scope, the `q` quantile interpolated as
/// `histogram_quantile` does (Prometheus' rules: the `+Inf` bucket required, bounds merged, counts
/// made monotonic, the rank interpolated linearly inside its bucket, the last finite bound for a
/// rank in `+Inf`). Samples whose `le` is not a number are left out, as Prometheus does.
pub fn quantiles(resp: &Response, group_by: &[String], q: f64) -> BTreeMap<Scope, f64> {
    let per = grouped(samples(resp).iter(), group_by, |s| Some((le_of(s)?, s.v)));
    per.into_iter().map(|(scope, mut buckets)| (scope, crate::local::functions::bucket_quantile(q, &mut buckets))).collect()
}

/// Per-replica bucket rates (`sum by (le, G, R) (...)`) become the per-replica quantiles
/// `histogram_quantile(q, ...)` would return: one sample per replica, labelled by the grouping
/// labels and the replica label (a replica whose buckets give no quantile has NaN, as there).
pub fn replica_quantiles(resp: &Response, group_by: &[String], label: &str, q: f64) -> Response {
    let with_replica: Vec<String> = group_by.iter().cloned().chain(std::iter::once(label.to_string())).collect();
    let t = samples(resp).first().map_or(0.0, |s| s.t);
    let per = grouped(samples(resp).iter(), &with_replica, |s| Some((le_of(s)?, s.v)));
    let samples = per
        .into_iter()
        .map(|(key, mut buckets)| {
            // The labels the answer carries (a replica or scope label it lacks is absent, not empty).
            let labels: crate::prom::Labels = key.into_iter().filter(|(_, v)| !v.is_empty()).collect();
            Sample { labels: labels.into(), t, v: crate::local::functions::bucket_quantile(q, &mut buckets) }
        })
        .collect();
    Response { data: Data::Vector(samples), warnings: resp.warnings.clone(), infos: resp.infos.clone() }
}

type Culprits = BTreeMap<Scope, BTreeMap<String, String>>;

/// Outlier answers: one series per replica. Per scope, the worst replica over the median of the
/// others, as `topk by (G) (1, X) / on (G) group_left quantile by (G) (0.5, X unless on (G, R)
/// topk by (G) (1, X))` computes it: NaN ranks lowest in both, the median interpolates between the
/// two middle values, and a scope with one replica has no value (nothing to compare with). Ties
/// go to the first replica in label order.
pub fn outliers(resp: &Response, group_by: &[String], label: &str) -> (BTreeMap<Scope, f64>, Culprits) {
    let mut values = BTreeMap::new();
    let mut culprits = BTreeMap::new();
    let Data::Vector(samples) = &resp.data else { return (values, culprits) };
    let mut per: BTreeMap<Scope, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        per.entry(scope_of(s, group_by)).or_default().push(s);
    }
    for (scope, mut replicas) in per {
        replicas.sort_by(|a, b| a.labels.cmp(&b.labels));
        let Some(top) = replicas.iter().copied().reduce(|best, s| if nan_lowest(s.v, best.v).is_gt() { s } else { best }) else { continue };
        let top_name = top.labels.get(label);
        let mut others: Vec<f64> = replicas.iter().filter(|s| s.labels.get(label) != top_name).map(|s| s.v).collect();
        if others.is_empty() {
            continue;
        }
        let median = crate::local::math::quantile(0.5, &mut others);
        let v = top.v / median;
        // 0/0 (all replicas idle) is NaN: no outlier to speak of.
        if v.is_nan() {
            continue;
        }
        values.insert(scope.clone(), v);
        if let Some(name) = top_name {
            culprits.insert(scope, [(label.to_string(), name.clone())].into_iter().collect());
        }
    }
    (values, culprits)
}

/// PromQL's order for `topk` and `quantile`: NaN below every number.
fn nan_lowest(a: f64, b: f64) -> std::cmp::Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.total_cmp(&b),
    }
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

/// A signal's value per scope from the answers to its parts, as its PromQL computes it (see
/// [`signals::Combine`]): a share is 0 where the denominator has a scope the numerator lacks, a
/// quotient needs both, a spread is the busiest replica over the mean of the scope's replicas.
pub fn combine(how: signals::Combine, parts: &[&Response], group_by: &[String]) -> BTreeMap<Scope, f64> {
    match (how, parts) {
        (signals::Combine::Share, [num, den]) => {
            let num = by_scope(num, group_by);
            by_scope(den, group_by).into_iter().map(|(scope, d)| (scope.clone(), num.get(&scope).copied().unwrap_or(d * 0.0) / d)).collect()
        }
        (signals::Combine::Divide, [a, b]) => {
            let b = by_scope(b, group_by);
            by_scope(a, group_by).into_iter().filter_map(|(scope, a)| Some((scope.clone(), a / b.get(&scope)?))).collect()
        }
        (signals::Combine::Spread, [per]) => {
            let Data::Vector(samples) = &per.data else { return BTreeMap::new() };
            let mut per: BTreeMap<Scope, Vec<f64>> = BTreeMap::new();
            for s in samples {
                per.entry(scope_of(s, group_by)).or_default().push(s.v);
            }
            per.into_iter()
                .map(|(scope, vs)| {
                    // PromQL's max passes over NaN (unless every value is NaN); avg does not.
                    let max = vs.iter().copied().fold(f64::NAN, |m, v| if m.is_nan() || v > m { v } else { m });
                    let avg = vs.iter().sum::<f64>() / vs.len() as f64;
                    (scope, max / avg)
                })
                .collect()
        }
        _ => BTreeMap::new(),
    }
}

/// SLO burn rates from bucket rates (per scope or per replica: summed per scope and bound first, as
/// `sum by (G) (rate(F_bucket{le=...}))` would), as the signal's PromQL computes them: the good rate
/// from the bounds and weights it reads, over the `+Inf` bucket's rate. A scope lacking one of
/// those buckets has no value, as the PromQL's vector matching would leave it.
pub fn burn_rates(resp: &Response, group_by: &[String], burn: &signals::BurnFromBuckets) -> BTreeMap<Scope, f64> {
    let per_scope = grouped(samples(resp).iter(), group_by, |s| s.labels.get("le").map(|le| (le.as_str(), s.v)));
    per_scope
        .into_iter()
        .filter_map(|(scope, buckets)| {
            // The summed rate of the buckets written as one of `spellings`: none, no value.
            let rate_of = |spellings: &[&str]| -> Option<f64> {
                let mut found = buckets.iter().filter(|(le, _)| spellings.contains(le)).map(|(_, v)| *v).peekable();
                found.peek()?;
                Some(found.sum())
            };
            let mut good = 0.0;
            for (written, w) in &burn.good {
                good += rate_of(&written.iter().map(String::as_str).collect::<Vec<_>>())? * w;
            }
            let total = rate_of(&["+Inf"])?;
            Some((scope, (1.0 - good / total) / burn.budget))
        })
        .collect()
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
                None if pl.burn.is_some() => wv.values = pl.burn.as_ref().map(|b| burn_rates(resp, group_by, b)).unwrap_or_default(),
                None if pl.quantile.is_some() => wv.values = quantiles(resp, group_by, pl.quantile.unwrap_or(f64::NAN)),
                None => wv.values = by_scope(resp, group_by),
                Some((label, signals::Reduction::Outlier)) if pl.quantile.is_some() => {
                    let per = replica_quantiles(resp, group_by, label, pl.quantile.unwrap_or(f64::NAN));
                    (wv.values, wv.culprits) = outliers(&per, group_by, label);
                }
                Some((label, signals::Reduction::Outlier)) => (wv.values, wv.culprits) = outliers(resp, group_by, label),
                Some((label, signals::Reduction::Count)) => (wv.values, wv.culprits) = listed(resp, group_by, label),
            },
            Some(Err(e)) => wv.availability = Availability::Failed(e.short_reason()),
            None => wv.availability = Availability::Failed("not answered".into()),
        }
    }
    if let Some((how, reads)) = &pl.parts {
        let got: Result<Vec<&Response>, String> = reads
            .iter()
            .map(|r| match answers.get(r) {
                Some(Ok(resp)) => Ok(resp),
                Some(Err(e)) => Err(e.short_reason()),
                None => Err("not answered".into()),
            })
            .collect();
        match got {
            Ok(resps) => wv.values = combine(*how, &resps, group_by),
            Err(e) => wv.availability = Availability::Failed(e),
        }
    }
    if let Some(Some(Ok(resp))) = pl.count.as_ref().map(|r| answers.get(r)) {
        wv.counts = by_scope(resp, group_by);
    }
    if let (Some(range), Some(Some(Ok(resp)))) = (pl.counts_from_buckets, pl.value.as_ref().map(|r| answers.get(r))) {
        let inf = grouped(samples(resp).iter(), group_by, |s| (le_of(s) == Some(f64::INFINITY)).then_some(s.v));
        wv.counts = inf.into_iter().map(|(scope, vs)| (scope, vs.iter().sum::<f64>() * range)).collect();
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
    let uncovered = [uncovered(plan, answers, group_by, true), uncovered(plan, answers, group_by, false)];
    for (hist, bounds) in uncovered.iter().flatten().collect::<BTreeMap<_, _>>() {
        warnings.push(format!(
            "{hist}: not every replica has the bucket bounds {}: some replicas use another bucket layout (an upgrade half-way through the fleet?), so its SLO burn rates, read at a bound, are not evaluated",
            bounds.iter().map(|b| crate::units::format_seconds(*b)).collect::<Vec<_>>().join(", ")
        ));
    }
    for (id, (w, b)) in &plan.signals {
        let mut sv = SignalValues { window: fill(w, answers, group_by), baseline: fill(b, answers, group_by) };
        for (pl, wv, side) in [(w, &mut sv.window, &uncovered[0]), (b, &mut sv.baseline, &uncovered[1])] {
            if let Some((hist, true)) = &pl.histogram {
                if side.contains_key(hist) {
                    wv.availability = Availability::Failed(format!("{hist}: bucket bounds differ across replicas"));
                    wv.values.clear();
                }
            }
        }
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

/// Per histogram read per replica in one window (the window's or the baseline's), the bounds some
/// replicas lack ([`signals::uncovered_bounds`]); histograms whose replicas agree are left out.
fn uncovered(plan: &SignalPlan, answers: &Answers, group_by: &[String], window: bool) -> BTreeMap<String, Vec<f64>> {
    let mut out = BTreeMap::new();
    for (w, b) in plan.signals.values() {
        let pl = if window { w } else { b };
        let (Some((hist, _)), Some((label, signals::Reduction::Outlier)), Some(_), Some(req)) = (&pl.histogram, &pl.per_replica, pl.quantile, &pl.value) else { continue };
        let Some(Ok(Response { data: Data::Vector(samples), .. })) = answers.get(req) else { continue };
        let labels: Vec<&String> = group_by.iter().chain(std::iter::once(label)).collect();
        let rows = samples.iter().filter_map(|s| Some((s.labels.get("le")?.as_str(), labels.iter().map(|l| s.labels.get(l).map_or("", String::as_str)).collect::<Vec<&str>>())));
        let missing = signals::uncovered_bounds(rows);
        if !missing.is_empty() {
            out.insert(hist.clone(), missing);
        }
    }
    out
}

/// How many values each fleet label takes, from the rows of its one query. A query that did not
/// answer leaves every label out (the header then says less, nothing more); without the running-requests
/// gauge the counts say nothing at all. Grouping or replica labels no series carries are warned of.
pub fn fleet_labels(request: &(Vec<String>, Request), answers: &Answers, window_names: &BTreeSet<String>, p: &RunParams, warnings: &mut Vec<String>) -> BTreeMap<String, usize> {
    let mut labels = BTreeMap::new();
    if let Some(Ok(Response { data: Data::Vector(rows), .. })) = answers.get(&request.1) {
        for label in &request.0 {
            let values: BTreeSet<&str> = rows.iter().filter_map(|r| r.labels.get(label)).map(String::as_str).filter(|v| !v.is_empty()).collect();
            labels.insert(label.clone(), values.len());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::{instant_query, Store, Value};
    use crate::signals::{build, resolve, QueryContext, SignalKind};

    /// The context the unit tests build signals in: by model, replicas by instance.
    fn test_ctx(range_secs: u64) -> QueryContext {
        QueryContext {
            selector: crate::prom::Selector::default(),
            group_by: vec!["model_name".into()],
            range: std::time::Duration::from_secs(range_secs),
            thresholds: Default::default(),
            buckets: Default::default(),
            replica_label: "instance".into(),
        }
    }

    /// Per-replica gauge values, evaluated by the local PromQL engine twice: the outlier query as
    /// written (reduced in PromQL) and the per-replica query explain sends, reduced here. Both
    /// must agree, NaN, zeros, ties and lone replicas included.
    type Reduced = (BTreeMap<Scope, f64>, Culprits);

    fn both(models: &[Vec<f64>]) -> (Reduced, Reduced) {
        let kind = SignalKind::Outlier { histogram: vec![], gauge: vec!["g".into()], quantile: 0.95, replica_label: "$replica".into() };
        let resolved = resolve(&kind, &["g".to_string()].into_iter().collect()).unwrap();
        let ctx = test_ctx(60);
        let q = build(&kind, &resolved, &ctx).unwrap();
        let mut store = Store::new();
        for (m, values) in models.iter().enumerate() {
            for (i, v) in values.iter().enumerate() {
                let labels = [("__name__", "g".to_string()), ("model_name", format!("m{m}")), ("instance", format!("r{i:02}"))]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                store.add(labels, [(0, *v), (30_000, *v), (60_000, *v)]);
            }
        }
        let answer = |query: &str| -> Response {
            let Value::Vector(v) = instant_query(&store, query, 60_000).unwrap() else { panic!("{query}: not a vector") };
            let data = Data::Vector(v.into_iter().map(|s| Sample { labels: s.labels.into(), t: 60.0, v: s.v }).collect());
            Response { data, warnings: vec![], infos: vec![] }
        };
        let by = vec!["model_name".to_string()];
        // The PromQL answer has one series per scope already: read it as the old reduction did.
        let mut promql = (BTreeMap::new(), BTreeMap::new());
        if let Data::Vector(samples) = &answer(&q.value).data {
            for s in samples.iter().filter(|s| !s.v.is_nan()) {
                promql.0.insert(scope_of(s, &by), s.v);
                promql.1.insert(scope_of(s, &by), [("instance".to_string(), s.labels["instance"].clone())].into_iter().collect());
            }
        }
        (promql, outliers(&answer(q.fetch.as_deref().unwrap()), &by, "instance"))
    }

    /// A signal combined here from its parts gives what its PromQL gives, evaluated by the local
    /// engine on the same series: shares with and without numerators (0, not missing), quotients
    /// over the scopes both sides have, spreads over replicas with NaN-free rates.
    #[test]
    fn signals_combined_from_their_parts_are_what_their_promql_computes() {
        let counter = |store: &mut Store, name: &str, model: &str, inst: &str, extra: Option<(&str, &str)>, per_min: f64| {
            let mut labels: crate::prom::Labels =
                [("__name__", name), ("model_name", model), ("instance", inst)].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            if let Some((k, v)) = extra {
                labels.insert(k.to_string(), v.to_string());
            }
            store.add(labels, (0..=4).map(|i| (i * 30_000, per_min * i as f64 / 2.0)));
        };
        let mut store = Store::new();
        // busy: aborts on one replica, uneven load; calm: no aborts at all; idle: nothing finishes.
        for (inst, ok, abort) in [("a", 30.0, 3.0), ("b", 10.0, 0.0)] {
            counter(&mut store, "done_total", "busy", inst, Some(("finished_reason", "stop")), ok);
            counter(&mut store, "done_total", "busy", inst, Some(("finished_reason", "abort")), abort);
        }
        counter(&mut store, "done_total", "calm", "c", Some(("finished_reason", "stop")), 6.0);
        counter(&mut store, "done_total", "idle", "d", Some(("finished_reason", "stop")), 0.0);
        for (m, inst, w) in [("busy", "a", 4.0), ("busy", "b", 2.0), ("calm", "c", 0.0), ("lonely", "e", 1.0)] {
            let labels = [("__name__", "waiting"), ("model_name", m), ("instance", inst)].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            store.add(labels, [(0, w), (60_000, w), (120_000, w)]);
        }
        let answer = |query: &str| -> Response {
            let Value::Vector(v) = instant_query(&store, query, 120_000).unwrap() else { panic!("{query}: not a vector") };
            Response { data: Data::Vector(v.into_iter().map(|s| Sample { labels: s.labels.into(), t: 120.0, v: s.v }).collect()), warnings: vec![], infos: vec![] }
        };
        let ctx = test_ctx(120);
        let counter_ref = |m: &str| crate::signals::CounterRef { counter: vec!["done_total".into()], r#match: m.into() };
        let kinds = [
            SignalKind::Ratio { numerator: counter_ref(r#"finished_reason="abort""#), denominator: counter_ref(""), attribute_via: vec![], join_on: vec!["instance".into()] },
            SignalKind::QueueWait { gauge: vec!["waiting".into()], counter: vec!["done_total".into()] },
            SignalKind::Spread { counter: vec!["done_total".into()], replica_label: "$replica".into() },
        ];
        let names: BTreeSet<String> = ["done_total", "waiting"].into_iter().map(String::from).collect();
        let by = vec!["model_name".to_string()];
        for kind in kinds {
            let q = build(&kind, &resolve(&kind, &names).unwrap(), &ctx).unwrap();
            let (how, reads) = q.parts.clone().unwrap_or_else(|| panic!("{kind:?} has no parts"));
            let resps: Vec<Response> = reads.iter().map(|r| answer(r)).collect();
            let mut here = combine(how, &resps.iter().collect::<Vec<_>>(), &by);
            let mut promql = by_scope(&answer(&q.value), &by);
            here.retain(|_, v| !v.is_nan());
            promql.retain(|_, v| !v.is_nan());
            assert!(!promql.is_empty(), "{}", q.value);
            assert_eq!(promql.keys().collect::<Vec<_>>(), here.keys().collect::<Vec<_>>(), "{}", q.value);
            for (scope, v) in &promql {
                assert!((v - here[scope]).abs() <= 1e-12 * v.abs().max(1.0) || v == &here[scope], "{}: {scope:?} {v} vs {}", q.value, here[scope]);
            }
        }
    }

    /// An SLO burn rate taken from the bucket rates (per replica, as explain reads them for an
    /// outlier) is the one its own PromQL computes from one bucket and the count: at a bound, between
    /// two (interpolated), under the first, and with no bounds listed; a scope whose replicas lack
    /// the bucket has none.
    #[test]
    fn burn_rates_from_bucket_rates_are_those_their_promql_gives() {
        let mut store = Store::new();
        let series = |name: &str, model: &str, inst: &str, le: Option<&str>, per_minute: f64, store: &mut Store| {
            let mut labels: crate::prom::Labels =
                [("__name__", name), ("model_name", model), ("instance", inst)].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            if let Some(le) = le {
                labels.insert("le".into(), le.into());
            }
            store.add(labels, (0..=4).map(|i| (i * 30_000, per_minute * i as f64 / 2.0)));
        };
        for (model, inst, scale) in [("busy", "a", 1.0), ("busy", "b", 3.0), ("slow", "c", 0.5)] {
            for (le, n) in [("0.1", 10.0), ("0.25", 40.0), ("1", 90.0), ("2.5", 97.0), ("+Inf", 100.0)] {
                let n = if model == "slow" { n / 4.0 } else { n };
                series("h_bucket", model, inst, Some(le), n * scale, &mut store);
            }
            series("h_count", model, inst, None, 100.0 * scale / if model == "slow" { 4.0 } else { 1.0 }, &mut store);
        }
        let answer = |query: &str| -> Response {
            let Value::Vector(v) = instant_query(&store, query, 120_000).unwrap() else { panic!("{query}: not a vector") };
            Response { data: Data::Vector(v.into_iter().map(|s| Sample { labels: s.labels.into(), t: 120.0, v: s.v }).collect()), warnings: vec![], infos: vec![] }
        };
        let by = vec!["model_name".to_string()];
        let per_replica = answer("sum by (le, model_name, instance) (rate(h_bucket[120s]))");
        let bounds = crate::signals::parse_bounds(&["0.1", "0.25", "1", "2.5", "+Inf"].map(String::from));
        let names: BTreeSet<String> = ["h_bucket".to_string(), "h_count".to_string()].into();
        for (target, listed) in [("250ms", true), ("500ms", true), ("50ms", true), ("250ms", false), ("2s", true)] {
            let kind = SignalKind::SloBurn { histogram: vec!["h".into()], target: target.into(), objective: "0.99".into() };
            let resolved = resolve(&kind, &names).unwrap();
            let mut ctx = test_ctx(120);
            if listed {
                std::sync::Arc::make_mut(&mut ctx.buckets).insert("h_bucket".into(), bounds.clone());
            }
            let q = build(&kind, &resolved, &ctx).unwrap();
            let burn = crate::signals::burn_from_buckets(&kind, &resolved, &ctx).unwrap().unwrap();
            let mut promql = by_scope(&answer(&q.value), &by);
            let here = burn_rates(&per_replica, &by, &burn);
            promql.retain(|_, v| !v.is_nan());
            assert_eq!(promql.len(), 2, "{}: {promql:?}", q.value);
            assert_eq!(promql.keys().collect::<Vec<_>>(), here.keys().collect::<Vec<_>>(), "{}", q.value);
            for (scope, v) in &promql {
                assert!((v - here[scope]).abs() <= 1e-9 * v.abs().max(1.0), "{}: {scope:?} {v} vs {}", q.value, here[scope]);
            }
        }
        // A bound the bucket rates lack leaves no value, as the PromQL's matching would.
        let burn = crate::signals::BurnFromBuckets { good: vec![(vec!["0.3".into()], 1.0)], budget: 0.01 };
        assert!(burn_rates(&per_replica, &by, &burn).is_empty());
    }

    #[test]
    fn the_outlier_reduced_here_is_the_one_promql_computes() {
        let cases: Vec<Vec<Vec<f64>>> = vec![
            vec![vec![1.0, 1.0, 5.0], vec![2.0, 4.0]],
            vec![vec![3.0]],
            vec![vec![0.0, 0.0, 0.0], vec![1.0, 0.0, 0.0]],
            vec![vec![f64::NAN, 2.0, 1.0, 3.0], vec![f64::NAN, f64::NAN], vec![f64::NAN, 7.0]],
            vec![vec![0.5, 0.25, 0.75, 0.1, 0.9, 0.3]],
        ];
        for case in cases {
            let (promql, here) = both(&case);
            assert_eq!(promql.0, here.0, "values for {case:?}");
            assert_eq!(promql.1, here.1, "culprits for {case:?}");
        }
    }

    #[test]
    fn quantiles_from_bucket_rates_are_those_histogram_quantile_gives() {
        // Two models: one with observations spread over the buckets (one `le` spelled twice), one
        // idle (every rate 0, so no quantile), and a third whose ranks fall in +Inf.
        let mut store = Store::new();
        let bucket = |model: &str, le: &str, per_minute: f64, store: &mut Store| {
            let labels = [("__name__", "h_bucket"), ("model_name", model), ("le", le), ("instance", "a")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            store.add(labels, (0..=4).map(|i| (i * 30_000, per_minute * i as f64 / 2.0)));
        };
        for (le, n) in [("0.1", 10.0), ("0.25", 40.0), ("1", 90.0), ("1.0", 5.0), ("+Inf", 100.0)] {
            bucket("busy", le, n, &mut store);
        }
        for le in ["0.1", "1", "+Inf"] {
            bucket("idle", le, 0.0, &mut store);
        }
        for (le, n) in [("0.1", 1.0), ("1", 2.0), ("+Inf", 50.0)] {
            bucket("slow", le, n, &mut store);
        }
        let by = vec!["model_name".to_string()];
        let answer = |query: &str| -> Response {
            let Value::Vector(v) = instant_query(&store, query, 120_000).unwrap() else { panic!("{query}: not a vector") };
            Response { data: Data::Vector(v.into_iter().map(|s| Sample { labels: s.labels.into(), t: 120.0, v: s.v }).collect()), warnings: vec![], infos: vec![] }
        };
        let rates = "sum by (le, model_name) (rate(h_bucket[120s]))";
        for q in [0.5, 0.95, 0.99] {
            let mut promql = by_scope(&answer(&format!("histogram_quantile({q}, {rates})")), &by);
            let mut here = quantiles(&answer(rates), &by, q);
            promql.retain(|_, v| !v.is_nan());
            here.retain(|_, v| !v.is_nan());
            assert_eq!(promql, here, "q = {q}");
            assert_eq!(here.len(), 2, "busy and slow have a quantile, idle has none: {here:?}");
        }
        // Read per replica, the same quantiles once the replicas' buckets are summed, and the
        // observation counts from the +Inf bucket are the increase of the count over the range.
        let per_replica = answer("sum by (le, model_name, instance) (rate(h_bucket[120s]))");
        for q in [0.5, 0.95] {
            let mut promql = by_scope(&answer(&format!("histogram_quantile({q}, {rates})")), &by);
            let mut here = quantiles(&per_replica, &by, q);
            promql.retain(|_, v| !v.is_nan());
            here.retain(|_, v| !v.is_nan());
            assert_eq!(promql.len(), here.len());
            for (scope, v) in &promql {
                assert!((v - here[scope]).abs() <= 1e-9 * v.abs().max(1.0), "q = {q}, {scope:?}: {v} vs {}", here[scope]);
            }
        }
        let planned = super::super::plan::Planned {
            resolved: None,
            per_replica: None,
            availability: Availability::Ok,
            value: Some(Request::Instant { query: "buckets".into(), time: chrono::DateTime::from_timestamp(120, 0).unwrap() }),
            count: None,
            query: String::new(),
            metric: String::new(),
            bounds: vec![],
            quantile: Some(0.95),
            parts: None,
            histogram: None,
            counts_from_buckets: Some(120.0),
            sums: vec![],
            burn: None,
        };
        let mut answers = Answers::new();
        answers.insert(planned.value.clone().unwrap(), Ok(per_replica));
        let counts = fill(&planned, &answers, &by).counts;
        let increase = by_scope(&answer(r#"sum by (model_name) (increase(h_bucket{le="+Inf"}[120s]))"#), &by);
        assert_eq!(counts.len(), increase.len());
        for (scope, v) in &increase {
            assert!((v - counts[scope]).abs() <= 1e-9 * v.abs().max(1.0), "{scope:?}: {v} vs {}", counts[scope]);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        #[test]
        fn any_fleet_gives_the_same_outliers_both_ways(models in proptest::collection::vec(
            proptest::collection::vec(proptest::sample::select(vec![0.0, 0.1, 0.2, 0.5, 0.7, 1.0, 3.0, f64::NAN]), 1..7), 1..4)) {
            let (promql, here) = both(&models);
            proptest::prop_assert_eq!(&promql.0, &here.0);
            // With a tie at the top, PromQL's pick depends on its heap; the value does not.
            let unique_top = models.iter().all(|m| {
                let max = m.iter().copied().filter(|v| !v.is_nan()).fold(f64::NEG_INFINITY, f64::max);
                m.iter().filter(|v| **v == max).count() <= 1
            });
            if unique_top {
                proptest::prop_assert_eq!(&promql.1, &here.1);
            }
        }
    }
}
