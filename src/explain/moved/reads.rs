//! What else moved's reads: each counter, gauge and histogram its trends need, read once at the
//! trends' step, and every watched signal's trend computed from them by vllm-diag, as the signal's
//! own query would compute it.
//!
//! - A histogram's quantiles (per model, and per replica where the rules compare replicas on it)
//!   come from its bucket rates: read unaggregated (`rate(F_bucket[R])`) and summed by `le`, the
//!   grouping labels and the replica label as the answer is decoded where a per-replica quantile
//!   needs them, else summed by the server by `le` and the grouping labels. Grouping thousands of
//!   bucket series by replica costs the server more than reading them.
//! - Sums of one counter's rates (a share's numerator and denominator, a rate) come from one read
//!   grouped by every label they group or filter on ([`signals::SumRead::shared`]), as the
//!   window's signal reads share theirs.
//! - A mean is its `_sum` rate over its `_count` rate, each read once whatever reads it (a
//!   remainder's means, the prefill mean).
//! - A plain gauge (reduced over time, then across the scope) is read reduced over time once, and
//!   reduced across the model's and the replicas' series by vllm-diag.
//! - Anything else keeps its own query.
//!
//! The small reads are packed into a few queries (each tagged with [`READ_LABEL`], joined with
//! `or`), the unaggregated ones asked alone. Each of the stage's queries as an earlier build asked
//! it stays a want: computed from these reads ([`Trends`]), or asked as it is where a recording
//! made before holds only that.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::Watched;
use crate::explain::fetch::{Combine, Reading, Way};
use crate::prom::{CompiledMatcher, Labels};
use crate::report::RunParams;
use crate::rules::RuleSet;
use crate::signals::{self, Across, HistogramUse, QueryContext, SignalKind, SumRead};
use crate::source::{Data, Request, Response, Series};

/// The label each read's series carry in a packed answer.
pub const READ_LABEL: &str = "vllm_diag_read";
/// Reads per packed query.
pub const PER_PACK: usize = 6;

/// A sum of a counter's rates taken from a read: the series `filter` selects, summed by `by`.
#[derive(Debug, Clone)]
pub struct Part {
    read: usize,
    filter: Vec<CompiledMatcher>,
    by: Vec<String>,
}

/// How one watched signal's trend is computed from the reads.
#[derive(Debug, Clone)]
pub enum Recipe {
    /// Its own query's series as they are.
    Own(usize),
    /// The quantile `q` interpolated from bucket rates summed by `by` (and `le`).
    Quantile { read: usize, q: f64, by: Vec<String> },
    /// `(num or den * 0) / den`.
    Share(Part, Part),
    /// `a / b`.
    Divide(Part, Part),
    /// One sum.
    Sum(Part),
    /// `(s0 / c0) - (s1 / c1) - ...`.
    Means(Vec<(Part, Part)>),
    /// Series reduced `across` by `by`; less another gauge's, where it has the scope.
    Across { read: usize, across: Across, by: Vec<String>, less: Option<usize> },
}

/// A read before it is placed in a query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Need {
    /// A whole query, packed; with the others that list replicas where it does (a model-level
    /// answer's size does not depend on the fleet's).
    Packed(String, bool),
    /// A histogram's bucket rates unaggregated, summed by these labels as decoded, with the query
    /// the server sums instead (a recording made before these reads, a refusal).
    Unaggregated { query: String, by: Vec<String>, summed: String },
}

/// What a query of the plan holds: reads packed with [`READ_LABEL`], or one read whole.
#[derive(Debug, Clone)]
enum Holds {
    Packed(BTreeMap<String, usize>),
    Whole(usize),
}

/// The trends of one of the stage's queries (a want), computed from the answers to `asks`.
#[derive(Debug)]
pub struct Trends {
    holds: Vec<Holds>,
    signals: Vec<(String, Recipe, Vec<String>)>,
}

/// The stage's reads: per want (one of the stage's queries as an earlier build asked it), the
/// requests it is computed from and how.
#[derive(Debug, Clone, Default)]
pub struct Reads {
    pub ways: BTreeMap<Request, Way>,
    pub reading: Reading,
}

/// Each watched key's plan, before the reads are placed.
enum Plan {
    Own(String, bool),
    Quantile { hist: String, resolved: signals::Resolved, q: f64, by: Vec<String> },
    Share(SumRead, SumRead),
    Divide(SumRead, SumRead),
    Sum(SumRead),
    Means(Vec<(SumRead, SumRead)>),
    Across { each: String, across: Across, by: Vec<String>, less: Option<String> },
}

/// How one watched signal is read: from which reads, or by its own query.
fn plan_of(def: &signals::SignalDef, res: &signals::Resolved, w: &Watched, c: &QueryContext) -> Option<Plan> {
    let q = signals::build(&def.kind, res, c).ok()?;
    let sum_of = |query: &String| q.sums.iter().find(|(s, _)| s == query).map(|(_, r)| r.clone());
    let own = || Plan::Own(w.query.clone(), w.per_replica);
    Some(match (&def.kind, def.kind.kind().histogram_use(), &q.parts) {
        (SignalKind::Quantile(_), Some(HistogramUse::Quantile(quantile)), None) => match signals::histogram_of(&def.kind, res) {
            Some(hist) => Plan::Quantile { hist, resolved: res.clone(), q: quantile, by: c.group_by.clone() },
            None => own(),
        },
        (SignalKind::Mean(m), _, None) if m.model_label.is_empty() => Plan::Means(signals::mean_parts(&res.names, c)),
        (SignalKind::Remainder(_), _, _) => Plan::Means(signals::mean_parts(&res.names, c)),
        (SignalKind::Gauge(g), _, None) => match g.parts(res, c) {
            Ok(Some(parts)) => Plan::Across { each: parts.each, across: parts.across, by: c.group_by.clone(), less: parts.less },
            _ => own(),
        },
        (_, _, Some((how, reads))) if reads.len() == 2 => match (sum_of(&reads[0]), sum_of(&reads[1]), how) {
            (Some(a), Some(b), signals::Combine::Share) => Plan::Share(a, b),
            (Some(a), Some(b), signals::Combine::Divide) => Plan::Divide(a, b),
            _ => own(),
        },
        (_, _, None) => match (q.sums.as_slice(), q.fetch.is_none() && q.per_replica.is_none()) {
            ([(value, read)], true) if *value == q.value => Plan::Sum(read.clone()),
            _ => own(),
        },
        _ => own(),
    })
}

/// Where each read goes: the unaggregated alone (summed as decoded, per `reading`), the others
/// packed a handful to a query, those that list replicas apart from the model's.
fn place(needs: &[Need]) -> (Vec<(String, Holds)>, Reading) {
    let mut queries: Vec<(String, Holds)> = Vec::new();
    let mut reading = Reading::default();
    let (mut packed, mut listing): (Vec<(usize, &String)>, Vec<(usize, &String)>) = (Vec::new(), Vec::new());
    for (i, n) in needs.iter().enumerate() {
        match n {
            Need::Unaggregated { query, by, summed } => {
                reading.summed.insert(query.clone(), (by.clone(), summed.clone()));
                queries.push((query.clone(), Holds::Whole(i)));
            }
            Need::Packed(query, false) => packed.push((i, query)),
            Need::Packed(query, true) => listing.push((i, query)),
        }
    }
    for chunk in packed.chunks(PER_PACK).chain(listing.chunks(PER_PACK)) {
        let tags: BTreeMap<String, usize> = chunk.iter().map(|(i, _)| (format!("r{i}"), *i)).collect();
        let query = signals::queries::either(&chunk.iter().map(|(i, q)| signals::queries::tagged(q, READ_LABEL, &format!("r{i}"))).collect::<Vec<_>>());
        queries.push((query, Holds::Packed(tags)));
    }
    (queries, reading)
}

/// The counters, gauges and histograms `watched` reads, each once, and how each want (a chunk of
/// signals asked as one query: `chunks[i]` is `wants[i]`) is computed from them. None when a
/// want's signals could not all be planned so (it is asked as it is).
pub fn plan(
    rules: &RuleSet,
    resolved: &BTreeMap<String, signals::Resolved>,
    watched: &BTreeMap<String, Watched>,
    chunks: &[Vec<String>],
    wants: &[Vec<Request>],
    ctx: &QueryContext,
    p: &RunParams,
) -> Reads {
    let mut needs: Vec<Need> = Vec::new();
    let mut need = |n: Need| -> usize {
        match needs.iter().position(|x| *x == n) {
            Some(i) => i,
            None => {
                needs.push(n);
                needs.len() - 1
            }
        }
    };
    let replica_ctx = QueryContext { group_by: p.group_by.iter().cloned().chain([p.replica_label.clone()]).collect(), ..ctx.clone() };
    // Histograms with a per-replica quantile watched: read unaggregated for every quantile over them.
    let mut per_replica_hist: BTreeSet<String> = BTreeSet::new();
    // Gauges reduced over time, by how many (grouping, across) read them.
    let mut gauge_uses: BTreeMap<String, BTreeSet<(Vec<String>, u8)>> = BTreeMap::new();
    // Sum reads, by their key: the reads that share one.
    let mut sums: BTreeMap<(String, Option<(String, Vec<String>)>, std::time::Duration), Vec<SumRead>> = BTreeMap::new();
    let across_code = |a: Across| a as u8;
    let mut plans: BTreeMap<String, Plan> = BTreeMap::new();
    for (key, w) in watched {
        let (Some(def), Some(res)) = (rules.signals.get(&w.id), resolved.get(&w.id)) else { continue };
        let c = if w.per_replica { &replica_ctx } else { ctx };
        let Some(plan) = plan_of(def, res, w, c) else { continue };
        match &plan {
            Plan::Quantile { hist, .. } if w.per_replica => {
                per_replica_hist.insert(hist.clone());
            }
            Plan::Across { each, across, by, less } => {
                for series in std::iter::once(each).chain(less) {
                    gauge_uses.entry(series.clone()).or_default().insert((by.clone(), across_code(*across)));
                }
            }
            _ => {}
        }
        let mut note = |r: &SumRead| {
            let list = sums.entry(r.key()).or_default();
            if !list.contains(r) {
                list.push(r.clone());
            }
        };
        match &plan {
            Plan::Share(a, b) | Plan::Divide(a, b) => {
                note(a);
                note(b);
            }
            Plan::Sum(a) => note(a),
            Plan::Means(m) => m.iter().for_each(|(s, c)| {
                note(s);
                note(c);
            }),
            _ => {}
        }
        plans.insert(key.clone(), plan);
    }
    // Each sum read: from one read shared by every sum over its counter, or its own query.
    let mut part_of: Vec<(SumRead, Part)> = Vec::new();
    for reads in sums.values() {
        let all: Vec<&SumRead> = reads.iter().collect();
        let shared = (reads.len() > 1).then(|| SumRead::shared(&all, &ctx.selector, &ctx.group_by)).flatten();
        let compiled = |r: &SumRead| r.extra.iter().map(|m| m.compile().ok()).collect::<Option<Vec<_>>>();
        match (shared, reads.iter().map(compiled).collect::<Option<Vec<_>>>()) {
            (Some(query), Some(filters)) => {
                let lists = reads.iter().any(|r| r.by.contains(&p.replica_label));
                let at = need(Need::Packed(query, lists));
                for (r, filter) in reads.iter().zip(filters) {
                    part_of.push((r.clone(), Part { read: at, filter, by: r.by.clone() }));
                }
            }
            _ => {
                for r in reads {
                    let at = need(Need::Packed(r.promql(&ctx.selector, &ctx.group_by), r.by.contains(&p.replica_label)));
                    part_of.push((r.clone(), Part { read: at, filter: Vec::new(), by: r.by.clone() }));
                }
            }
        }
    }
    let part = |r: &SumRead| part_of.iter().find(|(x, _)| x == r).map(|(_, p)| p.clone());
    let mut recipes: BTreeMap<String, Recipe> = BTreeMap::new();
    for (key, plan) in plans {
        let recipe = match plan {
            Plan::Own(query, lists) => Some(Recipe::Own(need(Need::Packed(query, lists)))),
            Plan::Quantile { hist, resolved, q, by } => {
                let read = if per_replica_hist.contains(&hist) {
                    let query = signals::bucket_rates_read(&resolved, ctx);
                    let summed_by: Vec<String> = std::iter::once("le".to_string()).chain(p.group_by.iter().cloned()).chain([p.replica_label.clone()]).collect();
                    need(Need::Unaggregated { query, by: summed_by, summed: signals::replica_bucket_rates_query(&resolved, ctx, &p.replica_label) })
                } else {
                    need(Need::Packed(signals::bucket_rates_query(&resolved, ctx), false))
                };
                Some(Recipe::Quantile { read, q, by })
            }
            Plan::Share(a, b) => part(&a).zip(part(&b)).map(|(a, b)| Recipe::Share(a, b)),
            Plan::Divide(a, b) => part(&a).zip(part(&b)).map(|(a, b)| Recipe::Divide(a, b)),
            Plan::Sum(a) => part(&a).map(Recipe::Sum),
            Plan::Means(m) => m.iter().map(|(s, c)| part(s).zip(part(c))).collect::<Option<Vec<_>>>().map(Recipe::Means),
            Plan::Across { each, across, by, less } => {
                // Read reduced across the scope by the server where only this grouping and
                // reduction read it; unaggregated where several do (a model's and its replicas').
                let mut read_of = |series: &String| {
                    let uses = gauge_uses.get(series).map_or(0, BTreeSet::len);
                    match uses > 1 {
                        true => need(Need::Packed(series.clone(), true)),
                        false => need(Need::Packed(signals::across_query(series, across, &by), by.contains(&p.replica_label))),
                    }
                };
                let read = read_of(&each);
                let less = less.as_ref().map(&mut read_of);
                Some(Recipe::Across { read, across, by, less })
            }
        };
        if let Some(r) = recipe {
            recipes.insert(key, r);
        }
    }
    let (queries, reading) = place(&needs);
    // Each want: the queries holding its signals' reads, in a fixed order, asked over the want's
    // span at its step (one range over both windows, or the baseline's and the window's).
    let mut out = Reads { ways: BTreeMap::new(), reading };
    for (ids, asked) in chunks.iter().zip(wants) {
        let Some(signals) = ids.iter().map(|id| recipes.get(id).map(|r| (id.clone(), r.clone(), scope_labels(watched.get(id), p)))).collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let used: BTreeSet<usize> = signals.iter().flat_map(|(_, r, _)| reads_of(r)).collect();
        let mine: Vec<&(String, Holds)> = queries
            .iter()
            .filter(|(_, h)| match h {
                Holds::Whole(i) => used.contains(i),
                Holds::Packed(t) => t.values().any(|i| used.contains(i)),
            })
            .collect();
        let how: Arc<dyn Combine> = Arc::new(Trends { holds: mine.iter().map(|(_, h)| h.clone()).collect(), signals });
        for want in asked {
            let requests: Vec<Request> = mine.iter().filter_map(|(q, _)| want.with_query(q)).collect();
            if let Some(way) = Way::combined(requests, Arc::clone(&how)) {
                out.ways.insert(want.clone(), way);
            }
        }
    }
    out
}

/// The labels a watched signal's trends are scoped by.
fn scope_labels(w: Option<&Watched>, p: &RunParams) -> Vec<String> {
    let replica = w.is_some_and(|w| w.per_replica).then(|| p.replica_label.clone());
    p.group_by.iter().cloned().chain(replica).collect()
}

/// The reads a recipe takes.
fn reads_of(r: &Recipe) -> Vec<usize> {
    match r {
        Recipe::Own(i) | Recipe::Quantile { read: i, .. } => vec![*i],
        Recipe::Share(a, b) | Recipe::Divide(a, b) => vec![a.read, b.read],
        Recipe::Sum(a) => vec![a.read],
        Recipe::Means(m) => m.iter().flat_map(|(s, c)| [s.read, c.read]).collect(),
        Recipe::Across { read, less, .. } => std::iter::once(*read).chain(*less).collect(),
    }
}

/// Per group (the values of the grouping labels, a missing or empty one as None) and instant
/// (unix milliseconds), a value.
type Grid = BTreeMap<Vec<Option<String>>, BTreeMap<i64, f64>>;

fn ms(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

fn group(labels: &Labels, by: &[String]) -> Vec<Option<String>> {
    by.iter().map(|l| labels.get(l).filter(|v| !v.is_empty()).cloned()).collect()
}

/// The series `filter` selects, summed by `by` at each instant (`sum by (by)` at every step).
fn sum_grid(series: &[&Series], filter: &[CompiledMatcher], by: &[String]) -> Grid {
    let mut grid = Grid::new();
    for s in series {
        if !filter.iter().all(|m| m.matches(s.labels.get(&m.matcher.name).map(String::as_str))) {
            continue;
        }
        let g = grid.entry(group(&s.labels, by)).or_default();
        for &(t, v) in &s.points {
            *g.entry(ms(t)).or_insert(0.0) += v;
        }
    }
    grid
}

/// The series reduced `across` by `by` at each instant, as the aggregation operator does (NaN
/// skipped by `max` and `min` unless nothing else is there).
fn across_grid(series: &[&Series], across: Across, by: &[String]) -> Grid {
    let mut acc: BTreeMap<Vec<Option<String>>, BTreeMap<i64, (f64, usize)>> = BTreeMap::new();
    for s in series {
        let g = acc.entry(group(&s.labels, by)).or_default();
        for &(t, v) in &s.points {
            match g.entry(ms(t)) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert((v, 1));
                }
                std::collections::btree_map::Entry::Occupied(mut e) => {
                    let (x, n) = e.get_mut();
                    match across {
                        Across::Sum | Across::Avg => *x += v,
                        Across::Max => {
                            if v > *x || x.is_nan() {
                                *x = v
                            }
                        }
                        Across::Min => {
                            if v < *x || x.is_nan() {
                                *x = v
                            }
                        }
                    }
                    *n += 1;
                }
            }
        }
    }
    acc.into_iter().map(|(g, at)| (g, at.into_iter().map(|(t, (x, n))| (t, if across == Across::Avg { x / n as f64 } else { x })).collect())).collect()
}

/// `a op b` where both have the group at the instant.
fn both(a: &Grid, b: &Grid, op: impl Fn(f64, f64) -> f64) -> Grid {
    let mut out = Grid::new();
    for (g, at) in a {
        let Some(other) = b.get(g) else { continue };
        let row: BTreeMap<i64, f64> = at.iter().filter_map(|(t, x)| other.get(t).map(|y| (*t, op(*x, *y)))).collect();
        if !row.is_empty() {
            out.insert(g.clone(), row);
        }
    }
    out
}

/// `(num or den * 0) / den`.
fn share(num: &Grid, den: &Grid) -> Grid {
    den.iter()
        .map(|(g, at)| {
            let row = at.iter().map(|(t, d)| (*t, num.get(g).and_then(|n| n.get(t)).copied().unwrap_or(d * 0.0) / d)).collect();
            (g.clone(), row)
        })
        .collect()
}

/// `whole - (part or whole * 0)`.
fn less(whole: &Grid, part: &Grid) -> Grid {
    whole
        .iter()
        .map(|(g, at)| (g.clone(), at.iter().map(|(t, w)| (*t, w - part.get(g).and_then(|p| p.get(t)).copied().unwrap_or(w * 0.0))).collect()))
        .collect()
}

/// The quantile `q` of bucket rates per group of `by` at each instant, as `histogram_quantile`.
fn quantile_grid(series: &[&Series], q: f64, by: &[String]) -> Grid {
    let mut buckets: BTreeMap<Vec<Option<String>>, BTreeMap<i64, Vec<(f64, f64)>>> = BTreeMap::new();
    for s in series {
        let Some(bound) = s.labels.get("le").and_then(|le| crate::local::functions::parse_go_float(le)) else { continue };
        let g = buckets.entry(group(&s.labels, by)).or_default();
        for &(t, v) in &s.points {
            g.entry(ms(t)).or_default().push((bound, v));
        }
    }
    buckets.into_iter().map(|(g, at)| (g, at.into_iter().map(|(t, mut b)| (t, crate::local::functions::bucket_quantile(q, &mut b))).collect())).collect()
}

impl Trends {
    fn grid(&self, recipe: &Recipe, reads: &BTreeMap<usize, Vec<&Series>>) -> Grid {
        let of = |i: &usize| reads.get(i).map(Vec::as_slice).unwrap_or_default();
        let sum = |p: &Part| sum_grid(of(&p.read), &p.filter, &p.by);
        match recipe {
            Recipe::Own(_) => Grid::new(),
            Recipe::Quantile { read, q, by } => quantile_grid(of(read), *q, by),
            Recipe::Share(n, d) => share(&sum(n), &sum(d)),
            Recipe::Divide(a, b) => both(&sum(a), &sum(b), |x, y| x / y),
            Recipe::Sum(a) => sum(a),
            Recipe::Means(m) => {
                let mut means = m.iter().map(|(s, c)| both(&sum(s), &sum(c), |x, y| x / y));
                let first = means.next().unwrap_or_default();
                means.fold(first, |acc, next| both(&acc, &next, |x, y| x - y))
            }
            Recipe::Across { read, across, by, less: other } => {
                let whole = across_grid(of(read), *across, by);
                match other {
                    Some(o) => less(&whole, &across_grid(of(o), *across, by)),
                    None => whole,
                }
            }
        }
    }
}

impl Combine for Trends {
    /// The answer the want's query would have given: every signal's series, labelled by its
    /// scope and by the stage's [`super::LABEL`].
    fn combine(&self, answers: &[&Response]) -> Response {
        let mut reads: BTreeMap<usize, Vec<&Series>> = BTreeMap::new();
        let mut warnings: Vec<String> = Vec::new();
        let mut infos: Vec<String> = Vec::new();
        for (holds, answer) in self.holds.iter().zip(answers) {
            warnings.extend(answer.warnings.iter().filter(|w| !warnings.contains(w)).cloned().collect::<Vec<_>>());
            infos.extend(answer.infos.iter().filter(|w| !infos.contains(w)).cloned().collect::<Vec<_>>());
            let Data::Matrix(series) = &answer.data else { continue };
            for s in series {
                let at = match holds {
                    Holds::Whole(i) => Some(*i),
                    Holds::Packed(tags) => s.labels.get(READ_LABEL).and_then(|t| tags.get(t)).copied(),
                };
                if let Some(i) = at {
                    reads.entry(i).or_default().push(s);
                }
            }
        }
        let mut out: Vec<Series> = Vec::new();
        for (id, recipe, by) in &self.signals {
            if let Recipe::Own(i) = recipe {
                for s in reads.get(i).into_iter().flatten() {
                    let mut labels = s.labels.clone();
                    labels.remove(READ_LABEL);
                    labels.insert(super::LABEL.to_string(), id.clone());
                    out.push(Series { labels, points: s.points.clone() });
                }
                continue;
            }
            for (g, at) in self.grid(recipe, &reads) {
                let mut labels: Labels = by.iter().zip(g).filter_map(|(l, v)| Some((l.clone(), v?))).collect();
                labels.insert(super::LABEL.to_string(), id.clone());
                // NaN where the query gives NaN (no observations); left out of the trends alike.
                let points: Vec<(f64, f64)> = at.into_iter().map(|(t, v)| (t as f64 / 1000.0, v)).collect();
                if !points.is_empty() {
                    out.push(Series { labels, points });
                }
            }
        }
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        Response { data: Data::Matrix(out), warnings, infos }
    }
}
