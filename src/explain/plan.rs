//! Stage: plan. Which signals the enabled rules read, and the queries that measure each of them in
//! the window and in the baseline. The PromQL itself comes from [`crate::signals`].
//!
//! A signal whose query is the same in both windows is asked once, as a range query with two
//! steps (the baseline's end and the window's): the server then reads each series once over both
//! windows instead of once per window, and the fetch stage cuts the answer back into the two
//! instant answers the later stages read (see [`super::fetch::ReadPlan`], which the plan ends in).

use std::collections::{BTreeMap, BTreeSet};

use super::discover::Discovery;
use crate::report::{RunParams, Warnings};
use crate::rules::eval::Availability;
use crate::rules::RuleSet;
use crate::signals::{self, HistogramUse, QueryContext, Role, SignalDef, Sizing};
use crate::source::Request;

use super::fetch::{Cut, ReadPlan, Way};

/// One signal in one window: its query, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub resolved: Option<signals::Resolved>,
    pub per_replica: Option<(String, signals::Reduction)>,
    pub availability: Availability,
    pub value: Option<Request>,
    pub count: Option<Request>,
    pub query: String,
    pub metric: String,
    /// A quantile's histogram bounds, so values inside the first or +Inf bucket read as bounds.
    pub bounds: Vec<f64>,
    /// Set when `value` asks for the bucket rates of the histogram (per scope, or per replica for
    /// an outlier): this quantile is interpolated from them by vllm-diag.
    pub quantile: Option<f64>,
    /// Set instead of `value` when the signal is combined by vllm-diag from reads that other
    /// signals share (see [`signals::Combine`]).
    pub parts: Option<(signals::Combine, Vec<Request>)>,
    /// The histogram (stem) the signal reads by its buckets, and whether it reads them at a bound
    /// (an SLO burn rate), which needs every replica to carry that bound.
    pub histogram: Option<(String, bool)>,
    /// Set, to the range in seconds, when a quantile's observation counts are read from the `+Inf`
    /// bucket of its bucket read (rate x range is `increase(..._count[range])`) instead of `count`.
    pub counts_from_buckets: Option<f64>,
    /// The requests among `value` and `parts` that sum a counter's rates, described (see
    /// [`signals::SumRead`]): several over one counter are answered by one read.
    pub sums: Vec<(Request, signals::SumRead)>,
    /// Set when `value` asks for the bucket rates of the histogram and this SLO burn rate is
    /// computed from them by vllm-diag (see [`signals::BurnFromBuckets`]).
    pub burn: Option<signals::BurnFromBuckets>,
}

impl Planned {
    fn unavailable(availability: Availability) -> Planned {
        Planned {
            resolved: None,
            per_replica: None,
            availability,
            value: None,
            count: None,
            query: String::new(),
            metric: String::new(),
            bounds: Vec::new(),
            quantile: None,
            parts: None,
            histogram: None,
            counts_from_buckets: None,
            sums: Vec::new(),
            burn: None,
        }
    }
}

/// Every signal's plan for (window, baseline), how its requests are read, and the context they
/// were built in (the follow-ups build theirs from it).
#[derive(Debug, Clone)]
pub struct SignalPlan {
    pub signals: BTreeMap<String, (Planned, Planned)>,
    /// Each request the signals read, and how it is asked: a window's and a baseline's instant
    /// requests of one query as one two-step range query; the sums of a counter's rates taken from
    /// a read shared with others; the per-replica bucket reads asked unaggregated and summed by
    /// vllm-diag as it decodes them. Each with the form a recording made before holds, after it.
    pub reads: ReadPlan,
    pub ctx: QueryContext,
    /// What the plan adjusted to the window, for `-v` (the report's `notes`): signals whose own
    /// range was longer than the window and were read over the window instead.
    pub notes: Vec<String>,
}

/// A sum of a counter's rates (`request`) answered from a read of that counter grouped by more
/// labels (`from`), shared with other sums over it: the samples `filter` selects, summed by `by`.
#[derive(Debug, Clone)]
pub struct Derived {
    pub request: Request,
    pub from: Request,
    pub filter: Vec<crate::prom::CompiledMatcher>,
    pub by: Vec<String>,
}

/// One query at two instants, asked as a range query whose two steps are those instants.
#[derive(Debug, Clone, PartialEq)]
pub struct Paired {
    pub range: Request,
    /// The instant requests it answers (the earlier first).
    pub at: [Request; 2],
}

/// The same query at `a` and `b` as one range query (`step` = the distance between them), when
/// they are whole seconds apart.
pub fn pair(query: &str, a: chrono::DateTime<chrono::Utc>, b: chrono::DateTime<chrono::Utc>) -> Option<Paired> {
    let (start, end) = if a <= b { (a, b) } else { (b, a) };
    let ms = (end - start).num_milliseconds();
    if ms <= 0 || ms % 1000 != 0 {
        return None;
    }
    Some(Paired {
        range: Request::Range { query: query.to_string(), start, end, step_seconds: (ms / 1000) as u64 },
        at: [Request::Instant { query: query.to_string(), time: start }, Request::Instant { query: query.to_string(), time: end }],
    })
}

/// How every signal's requests are read (see [`SignalPlan::reads`]). A want whose query is the same
/// at both ends is cut from their range query, else asked as the recording made before pairing
/// holds it; a sum taken from a shared read is cut from it (the read itself cut from its range
/// query where it pairs), else from the shared read asked alone, else from its own query at both
/// ends as one range query, as a recording made before reads were shared holds it.
fn read_plan(planned: &BTreeMap<String, (Planned, Planned)>, derived: &[Derived], reading: super::fetch::Reading) -> ReadPlan {
    let from: BTreeMap<&Request, &Derived> = derived.iter().map(|d| (&d.request, d)).collect();
    // Each instant asked at both ends, with its range query and its instant on it.
    let mut pair_of: BTreeMap<Request, (Request, i64, bool)> = BTreeMap::new();
    let mut wants: BTreeSet<Request> = BTreeSet::new();
    for (w, b) in planned.values() {
        let parts = |pl: &Planned| pl.parts.as_ref().map(|(_, r)| r.iter().map(|r| Some(r.clone())).collect::<Vec<_>>()).unwrap_or_default();
        let (wp, bp) = (parts(w), parts(b));
        let mut both = vec![(w.value.clone(), b.value.clone()), (w.count.clone(), b.count.clone())];
        match wp.len() == bp.len() {
            true => both.extend(wp.into_iter().zip(bp)),
            false => both.extend(wp.into_iter().map(|x| (x, None)).chain(bp.into_iter().map(|y| (None, y)))),
        }
        for (x, y) in both {
            wants.extend(x.iter().chain(&y).cloned());
            let read = |r: Option<Request>| r.map(|r| from.get(&r).map_or(r, |d| d.from.clone()));
            if let (Some(Request::Instant { query: qx, time: tx }), Some(Request::Instant { query: qy, time: ty })) = (read(x), read(y)) {
                if qx == qy {
                    if let Some(p) = pair(&qx, tx, ty) {
                        // A subquery shorter than the distance between the two instants would be
                        // computed over all of it (see [`signals::subquery_ranges`]): asked at each
                        // instant, with the pair kept for recordings made when it was asked so.
                        let apart = (tx - ty).num_milliseconds().unsigned_abs() as u128;
                        let spans = signals::subquery_ranges(&qx).iter().any(|r| r.as_millis() < apart);
                        for at in &p.at {
                            if let Request::Instant { time, .. } = at {
                                pair_of.insert(at.clone(), (p.range.clone(), time.timestamp_millis(), spans));
                            }
                        }
                    }
                }
            }
        }
    }
    let at = |r: &Request| pair_of.get(r).filter(|(_, _, spans)| !spans).map(|(range, t, _)| (range.clone(), *t));
    let mut plan = ReadPlan { wants: BTreeMap::new(), reading };
    for want in wants {
        let ways = match from.get(&want) {
            Some(d) => {
                let sum = Cut::Sum { filter: d.filter.clone(), by: d.by.clone() };
                let mut ways: Vec<Way> = at(&d.from).map(|(range, t)| Way::then(range, Some(t), sum.clone())).into_iter().collect();
                ways.push(Way::then(d.from.clone(), None, sum));
                // The sum's own query at both ends.
                let own = derived.iter().find_map(|o| match (&want, &o.request) {
                    (Request::Instant { query: qa, time: ta }, Request::Instant { query: qb, time: tb }) if qa == qb && ta != tb => pair(qa, *ta, *tb),
                    _ => None,
                });
                if let (Some(p), Request::Instant { time, .. }) = (own, &want) {
                    ways.push(Way::at(p.range, time.timestamp_millis()));
                }
                ways
            }
            // A pair whose subquery would span the distance between its instants comes second.
            None => match pair_of.get(&want) {
                Some((range, t, false)) => vec![Way::at(range.clone(), *t), Way::whole(want.clone())],
                Some((range, t, true)) => vec![Way::whole(want.clone()), Way::at(range.clone(), *t)],
                None => vec![Way::whole(want.clone())],
            },
        };
        plan.wants.insert(want, ways);
    }
    plan
}

/// Signals the enabled rules read, in a stable order (with the recommenders' inputs when a rule
/// recommends).
pub fn needed_signals(rules: &RuleSet) -> BTreeSet<String> {
    let mut needed: BTreeSet<String> = rules.rules.iter().flat_map(|r| r.signals()).collect();
    if rules.rules.iter().any(|r| r.recommend.is_some() || !r.also_size.is_empty() || r.rules_out_levers) {
        needed.extend(Sizing::ALWAYS_READ.iter().filter_map(|s| rules.signal_for(Role::Sizing(*s))).map(str::to_string));
    }
    // The time by hop reads its means whatever the rules read (src/explain/hops.rs).
    needed.extend(rules.signals.values().filter(|d| matches!(d.role, Some(Role::Hop(_)))).map(|d| d.id.clone()));
    needed
}

/// Plan one signal against the names present in one window, asked at `at`.
pub fn plan_one(def: &SignalDef, names: &BTreeSet<String>, at: chrono::DateTime<chrono::Utc>, ctx: &QueryContext) -> Planned {
    let resolved = match signals::resolve(&def.kind, names) {
        Err(missing) => return Planned::unavailable(Availability::Missing(missing)),
        Ok(r) => r,
    };
    match signals::build(&def.kind, &resolved, &QueryContext { range: def.range_in(ctx.range), ..ctx.clone() }) {
        Err(e) => Planned::unavailable(Availability::Failed(crate::report::QueryFailure::new(crate::report::FailureKind::Unplannable, e))),
        Ok(q) => Planned {
            per_replica: q.per_replica.clone(),
            availability: Availability::Ok,
            value: q.parts.is_none().then(|| Request::Instant { query: q.fetch.clone().unwrap_or_else(|| q.value.clone()), time: at }),
            parts: q.parts.map(|(how, reads)| (how, reads.into_iter().map(|query| Request::Instant { query, time: at }).collect())),
            count: q.count.map(|c| Request::Instant { query: c, time: at }),
            query: q.value,
            metric: resolved.names[0].clone(),
            bounds: match def.kind.kind().histogram_use() {
                Some(HistogramUse::Quantile(_)) => ctx.buckets.get(&resolved.names[0]).map(|b| b.iter().map(|b| b.value).collect()).unwrap_or_default(),
                _ => Vec::new(),
            },
            quantile: None,
            histogram: signals::histogram_of(&def.kind, &resolved).map(|h| (h, def.kind.kind().histogram_use() == Some(HistogramUse::Burn))),
            counts_from_buckets: None,
            sums: q.sums.into_iter().map(|(query, read)| (Request::Instant { query, time: at }, read)).collect(),
            burn: None,
            resolved: Some(resolved),
        },
    }
}

/// What a signal takes from a histogram's bucket rates.
enum BucketUse {
    Quantile(f64),
    Burn(signals::BurnFromBuckets),
}

/// A histogram's bucket read over one range, by its stem and range.
type BucketRead = (String, std::time::Duration);

/// Each histogram is read once per window for every quantile and outlier over it: P95 and P99 of
/// inter-token latency, its per-replica P95 for the outlier. Their value requests become one
/// request for the bucket rates, from which vllm-diag interpolates each quantile (see
/// [`super::assemble::fill`]): per scope when no outlier reads the histogram, per replica when one
/// does (the scope's quantiles then sum the replicas' buckets first, as `sum by (le, G)` would).
/// An SLO burn rate over the same histogram and range is taken from the same read (its good and
/// total rates are bucket rates); one over another range keeps its own query, which reads one
/// bucket and the count.
///
/// A per-replica read is asked unaggregated (`rate(F_bucket[R])`, see
/// [`signals::bucket_rates_read`]) and summed by `le`, the grouping labels and the replica label as
/// it is decoded: the same answer as `sum by (le, G, R) (...)`, for less of the server's work.
/// Returned: how to read those, and the query a recording made before held in their place.
fn share_bucket_reads(rules: &RuleSet, planned: &mut BTreeMap<String, (Planned, Planned)>, ctx: &QueryContext) -> super::fetch::Reading {
    let mut reading = super::fetch::Reading::default();
    for side in 0..2 {
        // (histogram, range) -> (signal, use, replica label of an outlier)
        let mut by_read: BTreeMap<BucketRead, Vec<(String, BucketUse, Option<String>)>> = BTreeMap::new();
        let mut burns: Vec<(BucketRead, String, signals::BurnFromBuckets)> = Vec::new();
        let mut resolved_of: BTreeMap<BucketRead, signals::Resolved> = BTreeMap::new();
        for (id, pair) in planned.iter() {
            let pl = if side == 0 { &pair.0 } else { &pair.1 };
            let (Some(def), Some(resolved)) = (rules.signals.get(id), &pl.resolved) else { continue };
            let Some(hist) = signals::histogram_of(&def.kind, resolved) else { continue };
            let key = (hist, def.range_in(ctx.range));
            let user = match (def.kind.kind().histogram_use(), &pl.per_replica) {
                (Some(HistogramUse::Quantile(quantile)), None) => (id.clone(), BucketUse::Quantile(quantile), None),
                (Some(HistogramUse::ReplicaQuantile(quantile)), Some((label, _))) => (id.clone(), BucketUse::Quantile(quantile), Some(label.clone())),
                (Some(HistogramUse::Burn), None) => {
                    let rctx = QueryContext { range: key.1, ..ctx.clone() };
                    if let Ok(Some(burn)) = signals::burn_from_buckets(&def.kind, resolved, &rctx) {
                        burns.push((key, id.clone(), burn));
                    }
                    continue;
                }
                _ => continue,
            };
            resolved_of.entry(key.clone()).or_insert_with(|| resolved.clone());
            by_read.entry(key).or_default().push(user);
        }
        // A burn rate rides on a bucket read only where the quantiles make one anyway.
        for (key, id, burn) in burns {
            if let Some(users) = by_read.get_mut(&key) {
                users.push((id, BucketUse::Burn(burn), None));
            }
        }
        for (key, users) in by_read {
            let Some(resolved) = resolved_of.get(&key) else { continue };
            let rctx = QueryContext { range: key.1, ..ctx.clone() };
            // One replica label for the read: an outlier declaring another keeps its own query.
            let label = users.iter().find_map(|(_, _, l)| l.clone());
            let read = match &label {
                Some(l) => {
                    let read = signals::bucket_rates_read(resolved, &rctx);
                    let by: Vec<String> = std::iter::once("le".to_string()).chain(ctx.group_by.iter().cloned()).chain(std::iter::once(l.clone())).collect();
                    let summed = signals::replica_bucket_rates_query(resolved, &rctx, l);
                    // The same read summed by another replica label (the other window's outlier
                    // declares another): this one is summed by the server.
                    match reading.fold_in(&read, &by, crate::source::Fold::Sum, &summed) {
                        true => read,
                        false => summed,
                    }
                }
                None => signals::bucket_rates_query(resolved, &rctx),
            };
            for (id, usage, own) in users {
                if own.is_some() && own != label {
                    continue;
                }
                let Some(pair) = planned.get_mut(&id) else { continue };
                let pl = if side == 0 { &mut pair.0 } else { &mut pair.1 };
                if let Some(Request::Instant { time, .. }) = &pl.value {
                    pl.value = Some(Request::Instant { query: read.clone(), time: *time });
                    match usage {
                        BucketUse::Quantile(q) => {
                            pl.quantile = Some(q);
                            // The observation count is the +Inf bucket's: no read of `_count` of its own.
                            if pl.count.take().is_some() {
                                pl.counts_from_buckets = Some(key.1.as_secs_f64());
                            }
                        }
                        BucketUse::Burn(b) => pl.burn = Some(b),
                    }
                }
            }
        }
    }
    reading
}

/// Sums of one counter's rates over one range, asked by several signals with different groupings
/// or matchers (the HTTP error shares and request rate; finished requests, aborted, failed, per
/// replica), are answered by one read grouped by every label they group or filter on: the counter's
/// series are read once. Each sum is then taken from it ([`Cut::Sum`]), exactly as its own query
/// would (the same series, summed the same way). A read filtered by a regular expression keeps its
/// own query.
fn share_sum_reads(planned: &BTreeMap<String, (Planned, Planned)>, ctx: &QueryContext) -> Vec<Derived> {
    let mut groups: BTreeMap<_, BTreeMap<Request, &signals::SumRead>> = BTreeMap::new();
    for (w, b) in planned.values() {
        for pl in [w, b] {
            let asked: BTreeSet<&Request> = pl.value.iter().chain(pl.parts.iter().flat_map(|(_, r)| r)).collect();
            for (req, read) in pl.sums.iter().filter(|(r, _)| asked.contains(r)) {
                let Request::Instant { time, .. } = req else { continue };
                groups.entry((read.key(), *time)).or_default().insert(req.clone(), read);
            }
        }
    }
    let mut derived = Vec::new();
    for ((_, time), reads) in groups {
        if reads.len() < 2 {
            continue;
        }
        let all: Vec<&signals::SumRead> = reads.values().copied().collect();
        let Some(query) = signals::SumRead::shared(&all, &ctx.selector, &ctx.group_by) else { continue };
        let from = Request::Instant { query, time };
        let compiled: Option<Vec<Derived>> = reads
            .into_iter()
            .map(|(request, read)| {
                let filter = read.extra.iter().map(|m| m.compile().ok()).collect::<Option<Vec<_>>>()?;
                Some(Derived { request, from: from.clone(), filter, by: read.by.clone() })
            })
            .collect();
        derived.extend(compiled.unwrap_or_default());
    }
    derived
}

/// Plan every needed signal in both windows. Notes about how a signal will be read go to
/// `warnings` (coarse buckets) or, when they only say what was adjusted to a short window, to the
/// plan's `notes` (shown under `-v`).
pub fn plan_signals(rules: &RuleSet, needed: &BTreeSet<String>, ctx: QueryContext, p: &RunParams, disc: &Discovery, warnings: &mut Warnings) -> SignalPlan {
    let mut planned = BTreeMap::new();
    for id in needed {
        let Some(def) = rules.signals.get(id) else { continue };
        let pair = (plan_one(def, &disc.window_names, p.window.end, &ctx), plan_one(def, &disc.baseline_names, p.baseline.end, &ctx));
        planned.insert(id.clone(), pair);
        if let Ok(resolved) = signals::resolve(&def.kind, &disc.window_names) {
            if let Some(note) = signals::bucket_note(&def.kind, &resolved, &ctx) {
                if !warnings.contains(&note) {
                    warnings.push(note);
                }
            }
        }
    }
    // Signals whose fixed range must stay inside the window (the short windows of SLO burn-rate
    // pairs) are read over the window when it is shorter: say so, and which ranges were used.
    let clamped: Vec<String> = needed
        .iter()
        .filter_map(|id| rules.signals.get(id))
        .filter(|d| d.clamped_in(p.window.duration()) && planned.get(&d.id).is_some_and(|(w, _): &(Planned, Planned)| w.resolved.is_some()))
        .map(|d| format!("{} ({} -> {})", d.id, signals::promql_duration(d.range.unwrap_or_default()), signals::promql_duration(p.window.duration())))
        .collect();
    let mut notes = Vec::new();
    if !clamped.is_empty() {
        notes.push(format!(
            "the window ({}) is shorter than some signals' own ranges, which must lie inside it (the short window of each SLO burn-rate pair, the 'last 5 minutes' reads): read over the whole window instead: {}",
            signals::promql_duration(p.window.duration()),
            clamped.join(", ")
        ));
    }
    let reading = share_bucket_reads(rules, &mut planned, &ctx);
    let derived = share_sum_reads(&planned, &ctx);
    let reads = read_plan(&planned, &derived, reading);
    SignalPlan { signals: planned, reads, ctx, notes }
}
