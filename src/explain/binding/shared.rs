//! Reads that which limit binds shares with a signal: the stall share (`stall_share`) is the worst
//! replica's share of its subquery's steps stalled while holding requests, from the generated
//! tokens' rate and the running and waiting peaks per replica at every step. Binding reads the
//! first two per replica at that very step over the window; read over the baseline and the window
//! instead (and the waiting peak beside them), they answer binding (cut to its span) and both of
//! the signal's instants, which vllm-diag computes as the subquery does. The series are then read
//! once instead of once for binding and once more inside the subquery. A recording made before
//! holds binding's reads and the signal's own query: those are asked where it lacks these.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{TimeZone, Utc};

use super::BindingPlan;
use crate::explain::fetch::{Combine, Cut, ReadPlan, Way};
use crate::explain::plan::SignalPlan;
use crate::prom::Labels;
use crate::rules::RuleSet;
use crate::signals::{QueryContext, SignalKind, StallReads};
use crate::source::{Data, Fold, Request, Response, Sample};

/// Binding's requests into `reads`, each with its way; where a stall share reads the same series
/// at the same step, that signal's instants computed from reads that answer binding too.
pub fn add_reads(plan: Option<&BindingPlan>, signal_plan: &SignalPlan, rules: &RuleSet, reads: &mut ReadPlan) {
    let Some(plan) = plan else { return };
    // Each read asked unaggregated where nothing else asks that query as it is.
    let mut unaggregated: BTreeMap<Request, Request> = BTreeMap::new();
    for (own, (each, by, fold)) in &plan.each {
        if let Some(ask) = fold_in(reads, own, each, by, *fold) {
            unaggregated.insert(own.clone(), ask);
        }
    }
    let sent = |r: &Request| unaggregated.get(r).cloned().unwrap_or_else(|| r.clone());
    let mut wants: BTreeMap<Request, Vec<Way>> = plan.requests().into_iter().map(|r| (r.clone(), vec![Way::whole(sent(&r))])).collect();
    for (id, (window, baseline)) in &signal_plan.signals {
        let Some(def) = rules.signals.get(id) else { continue };
        let SignalKind::StallShare(stall) = &def.kind else { continue };
        let (Some(resolved), Some(other)) = (&window.resolved, &baseline.resolved) else { continue };
        let (Some(Request::Instant { query: qw, time: tw }), Some(Request::Instant { query: qb, time: tb })) = (&window.value, &baseline.value) else {
            continue;
        };
        if resolved != other || qw != qb {
            continue;
        }
        let ctx = QueryContext { range: def.range_in(signal_plan.ctx.range), ..signal_plan.ctx.clone() };
        let Ok(s) = stall.reads(resolved, &ctx) else { continue };
        let (Some(Request::Range { query: gen_q, start, end, step_seconds }), Request::Range { query: run_q, .. }) = (&plan.generation, &plan.running) else {
            continue;
        };
        let step = s.step as i64;
        // The subquery's steps are multiples of its step from the baseline instant's range on; binding's
        // steps must be among them, up to the window's instant.
        let range = ctx.range.as_secs() as i64;
        let first = (tb.timestamp() - range).div_euclid(step) * step + if (tb.timestamp() - range).rem_euclid(step) == 0 { 0 } else { step };
        // And the two ends' subqueries must touch (a baseline long before the window, a day
        // back, would have binding read the whole day between at its step).
        let aligned = start.timestamp().rem_euclid(step) == 0 && first <= start.timestamp() && end == tw && tb <= tw && (*tw - *tb).num_seconds() <= range;
        if *gen_q != s.generation || *run_q != s.running || *step_seconds != s.step || !aligned {
            continue;
        }
        let Some(from) = Utc.timestamp_opt(first, 0).single() else { continue };
        let over_both = |query: &String| Request::Range { query: query.clone(), start: from, end: *tw, step_seconds: s.step };
        let asks: Vec<Request> = [&s.generation, &s.running, &s.waiting]
            .into_iter()
            .zip(&s.each)
            .map(|(summed, each)| {
                let own = over_both(summed);
                fold_in(reads, &own, each, &s.by, Fold::Sum).unwrap_or(own)
            })
            .collect();
        let span = Cut::Span(start.timestamp_millis(), end.timestamp_millis());
        for (own, shared) in [(plan.generation.clone(), &asks[0]), (Some(plan.running.clone()), &asks[1])] {
            if let Some(own) = own {
                wants.insert(own.clone(), vec![Way::then(shared.clone(), None, span.clone()), Way::whole(sent(&own))]);
            }
        }
        for (want, t) in [(&window.value, tw), (&baseline.value, tb)] {
            let Some(ways) = want.as_ref().and_then(|w| reads.wants.get_mut(w)) else { continue };
            let how = Arc::new(StallFromSteps { reads: s.clone(), at: t.timestamp_millis(), range_ms: range * 1000, group_by: ctx.group_by.clone() });
            if let Some(way) = Way::combined(asks.clone(), how) {
                ways.insert(0, way);
            }
        }
    }
    for (want, ways) in wants {
        reads.wants.entry(want).or_insert(ways);
    }
}

/// `own` (a `sum by` or `max by` of `each`'s series) asked as `each` over the same span, its answer
/// reduced by `by` with `fold` as it is read, and `own` asked in its place where that cannot be
/// read (a recording made before). `None` where `each` is asked as it is by another read, or
/// reduced another way: the reading of a query holds for every request of it.
fn fold_in(reads: &mut ReadPlan, own: &Request, each: &str, by: &[String], fold: Fold) -> Option<Request> {
    let ask = own.with_query(each)?;
    let asked_whole = reads.reading.folded(each).is_none() && reads.wants.values().flatten().flat_map(Way::requests).any(|r| r.query() == Some(each));
    (!asked_whole && reads.reading.fold_in(each, by, fold, own.query()?)).then_some(ask)
}

/// A stall share at one instant from the three reads at every step (see the module documentation):
/// per replica, the mean over the steps of the range (both ends included, as the subquery's) where
/// all three have a point of `(generated < below) * (running + waiting >= 1)`; the largest per
/// scope.
#[derive(Debug)]
struct StallFromSteps {
    reads: StallReads,
    /// The instant, unix milliseconds, and the subquery's range.
    at: i64,
    range_ms: i64,
    group_by: Vec<String>,
}

/// A range answer's points per series, by unix milliseconds.
fn points(r: &Response) -> BTreeMap<&Labels, BTreeMap<i64, f64>> {
    let Data::Matrix(series) = &r.data else { return BTreeMap::new() };
    series.iter().map(|s| (&s.labels, s.points.iter().map(|(t, v)| ((t * 1000.0).round() as i64, *v)).collect())).collect()
}

impl Combine for StallFromSteps {
    fn combine(&self, answers: &[&Response]) -> Response {
        let warnings: Vec<String> = answers.iter().flat_map(|a| a.warnings.iter().cloned()).fold(Vec::new(), |mut acc, w| {
            if !acc.contains(&w) {
                acc.push(w);
            }
            acc
        });
        let infos: Vec<String> = answers.iter().flat_map(|a| a.infos.iter().cloned()).fold(Vec::new(), |mut acc, w| {
            if !acc.contains(&w) {
                acc.push(w);
            }
            acc
        });
        let [generation, running, waiting] = answers else { return Response { data: Data::Vector(Vec::new()), warnings, infos } };
        let (running, waiting) = (points(running), points(waiting));
        let from = self.at - self.range_ms;
        let mut worst: BTreeMap<Labels, f64> = BTreeMap::new();
        for (labels, steps) in points(generation) {
            let (Some(run), Some(wait)) = (running.get(labels), waiting.get(labels)) else { continue };
            let values = steps.range(from..=self.at).filter_map(|(t, g)| {
                let (r, w) = (run.get(t)?, wait.get(t)?);
                let stalled = if *g < self.reads.below { 1.0 } else { 0.0 };
                let holding = if r + w >= 1.0 { 1.0 } else { 0.0 };
                Some(stalled * holding)
            });
            let Some(share) = mean(values) else { continue };
            let scope: Labels = self.group_by.iter().filter_map(|l| Some((l.clone(), labels.get(l).filter(|v| !v.is_empty())?.clone()))).collect();
            // PromQL's max passes over NaN unless every value is NaN.
            let e = worst.entry(scope).or_insert(share);
            if share > *e || e.is_nan() {
                *e = share;
            }
        }
        let t = self.at as f64 / 1000.0;
        let data = worst.into_iter().map(|(labels, v)| Sample { labels: Arc::new(labels), t, v }).collect();
        Response { data: Data::Vector(data), warnings, infos }
    }
}

/// `avg_over_time` of the values as Prometheus computes it (an incremental, compensated mean);
/// `None` for no values.
fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (mut mean, mut count, mut c) = (0.0f64, 0.0f64, 0.0f64);
    for v in values {
        count += 1.0;
        (mean, c) = crate::local::math::kahan_inc(v / count - mean / count, mean, c);
    }
    (count > 0.0).then_some(mean + c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::{instant_query, range_query, Store, Value};
    use crate::signals::{build, resolve, StallShare};

    /// The stall share computed from the three reads at every step is what the signal's query
    /// (a subquery) gives, evaluated by the local engine on the same series, at the window's and
    /// the baseline's instants: replicas that stall for a while, one never, one holding nothing.
    #[test]
    fn a_stall_share_from_the_steps_is_what_its_subquery_gives() {
        let mut store = Store::new();
        let labels = |name: &str, model: &str, inst: &str| -> Labels {
            [("__name__", name), ("model_name", model), ("instance", inst)].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        // 40 minutes of 30 s scrapes: (model, replica, stalled minutes, held requests).
        for (model, inst, stalled, held) in [("a", "r1", 12..25, 3.0), ("a", "r2", 0..0, 2.0), ("b", "r3", 5..38, 0.0), ("b", "r4", 30..34, 1.0)] {
            let mut tokens = 0.0;
            let mut gen = Vec::new();
            for i in 0..=80i64 {
                if !stalled.contains(&(i / 2)) {
                    tokens += 150.0;
                }
                gen.push((i * 30_000, tokens));
            }
            store.add(labels("gen_total", model, inst), gen);
            store.add(labels("running", model, inst), (0..=80i64).map(|i| (i * 30_000, if i % 7 == 0 { 0.0 } else { held })));
            store.add(labels("waiting", model, inst), (0..=80i64).map(|i| (i * 30_000, if i % 5 == 0 { 1.0 } else { 0.0 })));
        }
        let ctx = QueryContext {
            selector: crate::prom::Selector::default(),
            group_by: vec!["model_name".into()],
            range: std::time::Duration::from_secs(1200),
            thresholds: Default::default(),
            buckets: Default::default(),
            replica_label: "instance".into(),
        };
        let kind = SignalKind::StallShare(StallShare {
            counter: vec!["gen_total".into()],
            running: vec!["running".into()],
            waiting: vec!["waiting".into()],
            below: 1.0,
            replica_label: "$replica".into(),
        });
        let names = ["gen_total", "running", "waiting"].into_iter().map(String::from).collect();
        let resolved = resolve(&kind, &names).unwrap();
        let SignalKind::StallShare(stall) = &kind else { unreachable!() };
        let reads = stall.reads(&resolved, &ctx).unwrap();
        let query = build(&kind, &resolved, &ctx).unwrap().value;
        let (from, end, step) = (0, 2_400_000, reads.step as i64 * 1000);
        let answer = |q: &str| {
            let series = range_query(&store, q, from, end, step).unwrap();
            let series = series
                .into_iter()
                .map(|s| crate::source::Series { labels: s.labels, points: s.points.into_iter().map(|(t, v)| (t as f64 / 1000.0, v)).collect() })
                .collect();
            Response { data: Data::Matrix(series), warnings: vec![], infos: vec![] }
        };
        let steps = [answer(&reads.generation), answer(&reads.running), answer(&reads.waiting)];
        for at in [1_200_000, 2_400_000] {
            let how = StallFromSteps { reads: reads.clone(), at, range_ms: 1_200_000, group_by: ctx.group_by.clone() };
            let Data::Vector(here) = how.combine(&steps.iter().collect::<Vec<_>>()).data else { panic!("not a vector") };
            let Value::Vector(promql) = instant_query(&store, &query, at).unwrap() else { panic!("{query}: not a vector") };
            let here: Vec<(String, f64)> = here.iter().map(|s| (s.labels.get("model_name").cloned().unwrap_or_default(), s.v)).collect();
            let promql: Vec<(String, f64)> = promql.iter().map(|s| (s.labels.get("model_name").cloned().unwrap_or_default(), s.v)).collect();
            assert_eq!(here, promql, "at {at}: {query}");
            assert!(promql.iter().any(|(_, v)| *v > 0.0 && *v < 1.0), "a partial stall at {at}: {promql:?}");
        }
    }
}
