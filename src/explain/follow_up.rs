//! Stage: follow up. For findings only, planned together and sent in one concurrent batch (one more
//! round trip after the signals, not two): trends of the evidence, one per-replica breakdown per
//! finding, and the cache configuration for recommendations. Each asks only for the scopes with a
//! finding (one model of fifty in a typical incident), never for the whole fleet.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::fetch::{Answers, Cut, ReadPlan, Way};
use super::plan::SignalPlan;
use crate::prom::{escape_regex_literal, MatchOp, Matcher, Selector};
use crate::report::{Evidence, Finding, Limit, Replicas, RunParams, Scope, TimeRange, Trend, Unread, Warnings};
use crate::rules::eval::SignalTable;
use crate::rules::RuleSet;
use crate::signals::{self, QueryContext, Role, SignalKind, Sizing};
use crate::source::{Data, Request, Response, Sample};

/// The follow-up requests of a run, and what each is for.
#[derive(Debug, Clone, Default)]
pub struct FollowUps {
    /// Per signal: its query, and the range requests over the baseline and the window.
    pub trends: BTreeMap<String, (String, Request, Request)>,
    /// The trends over a signal's own fixed range (an SLO burn rate's hour, the last five minutes)
    /// instead of `trend_range`. The others' baseline points start once `trend_range` lies inside
    /// the baseline (see [`trends`]).
    pub fixed_range: BTreeMap<String, Duration>,
    pub trend_range: Duration,
    pub step: u64,
    /// Per finding (same order): the per-replica request and the signal it breaks down.
    pub breakdowns: Vec<Option<(Request, String)>>,
    /// The cache configuration, when a finding recommends.
    pub cache: Option<Request>,
}

impl FollowUps {
    /// Every request to read, and how: a signal's baseline and window trends cut from one range
    /// query when they touch (see [`joined`]: the point where they touch goes to both, as the two
    /// range queries would give it), else, as a recording made before joining holds them, asked
    /// as they are; the breakdowns and the cache configuration as they are.
    pub fn reads(&self) -> ReadPlan {
        // A request read for two purposes keeps the first one's ways, as in [`ReadPlan::extend`].
        let mut plan = ReadPlan::whole(self.breakdowns.iter().flatten().map(|(r, _)| r.clone()).chain(self.cache.clone()));
        for (_, b, w) in self.trends.values() {
            let j = joined(b, w);
            for req in [b, w] {
                let mut ways = Vec::new();
                if let (Some(j), Request::Range { start, end, .. }) = (&j, req) {
                    ways.push(Way::then(j.clone(), None, Cut::Span(start.timestamp_millis(), end.timestamp_millis())));
                }
                ways.push(Way::whole(req.clone()));
                plan.wants.entry(req.clone()).or_insert(ways);
            }
        }
        plan
    }
}

/// A signal's trend over the baseline and over the window as one range query, when the baseline
/// ends where the window starts and the window's steps fall on the baseline's grid: the server then
/// reads the series once, and each window gets its points from it ([`Cut::Span`]).
fn joined(b: &Request, w: &Request) -> Option<Request> {
    let (Request::Range { query: qb, start: bs, end: be, step_seconds: sb }, Request::Range { query: qw, start: ws, end: we, step_seconds: sw }) = (b, w)
    else {
        return None;
    };
    let aligned = *sb > 0 && (*ws - *bs).num_milliseconds() % (*sb as i64 * 1000) == 0;
    (qb == qw && sb == sw && be == ws && aligned).then(|| Request::Range { query: qb.clone(), start: *bs, end: *we, step_seconds: *sb })
}

/// The selector narrowed to some scopes: `model_name="a"` for one, `model_name=~"a|b"` for several
/// (per label, so with several grouping labels it may admit a few combinations more, never fewer).
pub fn only_scopes(selector: &Selector, group_by: &[String], scopes: &BTreeSet<Scope>) -> Selector {
    let mut sel = selector.clone();
    for label in group_by {
        let values: BTreeSet<&str> = scopes.iter().map(|s| s.get(label).map_or("", String::as_str)).collect();
        match values.len() {
            0 => {}
            1 => sel.matchers.extend(values.iter().map(|v| Matcher::eq(label, v))),
            _ => sel.matchers.push(Matcher {
                name: label.clone(),
                op: MatchOp::Re,
                value: values.iter().map(|v| escape_regex_literal(v)).collect::<Vec<_>>().join("|"),
            }),
        }
    }
    sel
}

/// Signal kinds whose query can simply be grouped by replica as well. A gauge attributed through
/// another series (`up` through the engine's gauges) can: the join carries the replica label from
/// the gauge's own side (target-down then names the target that went down).
fn replica_breakdown_supported(kind: &SignalKind) -> bool {
    kind.kind().replica_breakdown()
}

/// A scope cut down to its grouping labels (without a replica a finding names).
fn base_scope(scope: &Scope, group_by: &[String]) -> Scope {
    group_by.iter().map(|l| (l.clone(), scope.get(l).cloned().unwrap_or_default())).collect()
}

/// Trend requests for the evidence of the findings. Signals with a fixed range keep it;
/// per-replica signals have no single trend line.
fn plan_trends(findings: &[Finding], rules: &RuleSet, plan: &SignalPlan, selector: &Selector, p: &RunParams, out: &mut FollowUps) {
    out.trend_range = Duration::from_secs((p.window.duration().as_secs() / 10).clamp(120, 600));
    out.step = (p.window.duration().as_secs() / 30).max(15);
    let mut wanted: BTreeMap<String, BTreeSet<Scope>> = BTreeMap::new();
    for f in findings {
        for e in &f.evidence {
            wanted.entry(e.signal.clone()).or_default().insert(base_scope(&f.scope, &p.group_by));
        }
    }
    for (id, scopes) in &wanted {
        let (Some(def), Some((w, _))) = (rules.signals.get(id), plan.signals.get(id)) else { continue };
        let Some(resolved) = &w.resolved else { continue };
        // Per-replica answers reduced here have no trend of their own, except a largest value,
        // whose PromQL (`max by`) is as cheap at every step.
        if w.per_replica.as_ref().is_some_and(|(_, how)| *how != signals::Reduction::Max) {
            continue;
        }
        let tctx = QueryContext { selector: only_scopes(selector, &p.group_by, scopes), range: def.range.unwrap_or(out.trend_range), ..plan.ctx.clone() };
        if let Some(r) = def.range {
            out.fixed_range.insert(id.clone(), r);
        }
        let Ok(q) = signals::build(&def.kind, resolved, &tctx) else { continue };
        let range = |r: &TimeRange| Request::Range { query: q.value.clone(), start: r.start, end: r.end, step_seconds: out.step };
        out.trends.insert(id.clone(), (q.value.clone(), range(&p.baseline), range(&p.window)));
    }
}

/// The per-replica breakdown of a finding ("3 of 8 replicas"): its first passed evidence whose own
/// value crossed one of its limits, queried for its scope grouped by replica as well. A line at 0
/// (`prefix_queries_rate > 0`: the feature is in use) says nothing about which replicas have the
/// problem, so it is not the one broken down.
fn plan_breakdown(f: &Finding, rules: &RuleSet, plan: &SignalPlan, selector: &Selector, p: &RunParams) -> Option<(Request, String)> {
    if f.scope.keys().any(|k| !p.group_by.contains(k)) {
        return None; // already about one replica
    }
    if f.recent.is_some() {
        // Its values are the last minutes'; the replicas' are read over the whole window, which
        // did not cross the lines: they would all look unaffected.
        return None;
    }
    let e = f.evidence.iter().find(|e| e.passed && crossed_limits(e).iter().any(|l| l.value != 0.0))?;
    let def = rules.signals.get(&e.signal)?;
    if !replica_breakdown_supported(&def.kind) {
        return None;
    }
    let resolved = plan.signals.get(&e.signal)?.0.resolved.clone()?;
    let mut sel = selector.clone();
    sel.matchers.extend(f.scope.iter().map(|(k, v)| Matcher::eq(k, v)));
    let group_by: Vec<String> = p.group_by.iter().cloned().chain(std::iter::once(p.replica_label.clone())).collect();
    let rctx = QueryContext { selector: sel, group_by, range: def.range_in(plan.ctx.range), ..plan.ctx.clone() };
    let q = signals::build(&def.kind, &resolved, &rctx).ok()?;
    Some((Request::Instant { query: q.value, time: p.window.end }, e.signal.clone()))
}

/// Plan every follow-up for the ranked findings.
pub fn plan(findings: &[Finding], rules: &RuleSet, plan: &SignalPlan, selector: &Selector, p: &RunParams, window_names: &BTreeSet<String>) -> FollowUps {
    let mut out = FollowUps::default();
    plan_trends(findings, rules, plan, selector, p, &mut out);
    out.breakdowns = findings.iter().map(|f| plan_breakdown(f, rules, plan, selector, p)).collect();
    let recommending: BTreeSet<Scope> = findings
        .iter()
        .filter(|f| rules.rule(&f.rule).is_some_and(|r| r.recommend.is_some() || r.also_size.iter().any(|c| c == "kv_blocks")))
        .map(|f| base_scope(&f.scope, &p.group_by))
        .collect();
    let info = signals::spellings("vllm:cache_config_info");
    if !recommending.is_empty() && window_names.iter().any(|n| info.contains(n)) {
        let name = signals::pick(&["vllm:cache_config_info".to_string()], window_names).cloned().unwrap_or_default();
        let anchor = signals::pick(&["vllm:num_requests_running".to_string()], window_names).cloned().unwrap_or_default();
        let sel = only_scopes(selector, &p.group_by, &recommending);
        let query = signals::cache_config_query(&sel, &p.group_by, &name, &anchor, p.window.duration());
        out.cache = Some(Request::Instant { query, time: p.window.end });
    }
    out
}

/// The limits of `e` that its scope's value is past.
fn crossed_limits(e: &Evidence) -> Vec<&Limit> {
    e.limits.iter().filter(|l| l.crossed_by(e.value)).collect()
}

/// Which replicas cross the limits the scope as a whole crossed.
pub fn affected_replicas(samples: &[Sample], e: &Evidence, replica_label: &str) -> Replicas {
    let crossed = crossed_limits(e);
    let mut names: Vec<String> = samples.iter().map(|s| s.labels.get(replica_label).cloned().unwrap_or_default()).collect();
    names.sort();
    names.dedup();
    let mut affected: Vec<String> = samples
        .iter()
        .filter(|s| s.v.is_finite() && crossed.iter().any(|l| l.crossed_by(Some(s.v))))
        .map(|s| s.labels.get(replica_label).cloned().unwrap_or_default())
        .collect();
    affected.sort();
    affected.dedup();
    Replicas {
        label: replica_label.to_string(),
        affected,
        total: names.len(),
        signal: e.signal.clone(),
        limit: crossed.iter().map(|l| l.label.clone()).collect::<Vec<_>>().join(" or "),
        not_evaluated: None,
    }
}

/// The trend of each finding's evidence that asked for one, by the evidence's position.
fn trends(fu: &FollowUps, answers: &Answers, findings: &[Finding], group_by: &[String], warnings: &mut Warnings) -> Vec<Vec<(usize, Trend)>> {
    if fu.trends.is_empty() {
        return vec![Vec::new(); findings.len()];
    }
    for (_, b, w) in fu.trends.values() {
        for resp in [b, w].into_iter().filter_map(|r| answers.get(r)).flatten() {
            warnings.extend(resp.warnings.iter().cloned());
        }
    }
    // Points at or after `from` (unix seconds).
    let points = |req: &Request, scope: &Scope, from: f64| -> Vec<(f64, f64)> {
        match answers.get(req) {
            Some(Ok(Response { data: Data::Matrix(series), .. })) => series
                .iter()
                .find(|s| group_by.iter().all(|l| s.labels.get(l).cloned().unwrap_or_default() == scope.get(l).cloned().unwrap_or_default()))
                .map(|s| s.points.iter().copied().filter(|(t, v)| v.is_finite() && *t >= from).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    };
    let trend = |f: &Finding, e: &Evidence| -> Option<Trend> {
        let (query, b, w) = fu.trends.get(&e.signal)?;
        // A point sums up the trend range before it: the baseline's first points would show
        // what came before the baseline (an earlier incident's tail), so they start once
        // that range lies inside it. A signal's own fixed range (an SLO's hour) keeps all.
        let fixed = fu.fixed_range.get(&e.signal);
        let from = match b {
            Request::Range { start, .. } if fixed.is_none() => start.timestamp() as f64 + fu.trend_range.as_secs_f64(),
            _ => f64::NEG_INFINITY,
        };
        let (baseline, window) = (points(b, &f.scope, from), points(w, &f.scope, f64::NEG_INFINITY));
        if baseline.is_empty() && window.is_empty() {
            return None;
        }
        let range_seconds = fixed.unwrap_or(&fu.trend_range).as_secs();
        Some(Trend { step_seconds: fu.step, range_seconds, query: query.clone(), baseline, window })
    };
    findings.iter().map(|f| f.evidence.iter().enumerate().filter_map(|(i, e)| Some((i, trend(f, e)?))).collect()).collect()
}

/// What the follow-up round read for one finding: the trends of its evidence (by position), which
/// of its replicas are affected, its cards and the levers its evidence rules out. The default
/// adds nothing.
#[derive(Debug, Clone, Default)]
pub struct FollowedUp {
    pub trends: Vec<(usize, Trend)>,
    pub replicas: Option<Replicas>,
    pub recommendations: Vec<crate::report::Recommendation>,
    pub wont_help: Option<Vec<crate::report::WontHelp>>,
}

/// Write what the follow-up round read into a finding: the one place this stage changes one.
pub fn build(mut f: Finding, part: FollowedUp) -> Finding {
    for (i, trend) in part.trends {
        if let Some(e) = f.evidence.get_mut(i) {
            e.series = Some(trend);
        }
    }
    if let Some(r) = part.replicas {
        f.replicas = Some(r);
    }
    f.recommendations.extend(part.recommendations);
    if let Some(w) = part.wont_help {
        f.wont_help = w;
    }
    f
}

/// What the follow-up answers say of each finding: trends, affected replicas, and recommendations
/// (which need no follow-up query when the measured KV footprint is enough).
/// `binding` is the binding stage's reading, which the levers ruled out must agree with.
#[allow(clippy::too_many_arguments)]
pub fn read(
    fu: &FollowUps,
    answers: &Answers,
    findings: &[Finding],
    rules: &RuleSet,
    table: &SignalTable,
    binding: &[crate::report::Binding],
    replicas: &BTreeMap<Scope, Vec<super::binding::ReplicaRead>>,
    p: &RunParams,
    warnings: &mut Warnings,
) -> Vec<FollowedUp> {
    let trends = trends(fu, answers, findings, &p.group_by, warnings);
    let cache = match fu.cache.as_ref().and_then(|r| answers.get(r)) {
        Some(Ok(Response { data: Data::Vector(v), .. })) => crate::recommend::cache_config(v, &p.group_by),
        _ => BTreeMap::new(),
    };
    let mut out: Vec<FollowedUp> = trends.into_iter().map(|trends| FollowedUp { trends, ..Default::default() }).collect();
    for ((f, b), part) in findings.iter().zip(&fu.breakdowns).zip(out.iter_mut()) {
        if let Some((req, signal)) = b {
            // A damaged or missing answer leaves which replicas are affected not evaluated, with
            // why: never a finding quietly without its breakdown (the warning is explain's).
            let unread = |why: Unread| Some(Replicas::unread(&p.replica_label, signal, why));
            part.replicas = match answers.get(req) {
                Some(Ok(Response { data: Data::Vector(samples), .. })) => {
                    f.evidence.iter().find(|e| &e.signal == signal).map(|e| affected_replicas(samples, e, &p.replica_label))
                }
                Some(Ok(_)) => unread(Unread::NotAVector),
                Some(Err(e)) => unread(Unread::Failed(e.short_reason())),
                None => unread(Unread::NotAnswered),
            };
        }
        let Some(def) = rules.rule(&f.rule) else { continue };
        if def.recommend.is_some() || !def.also_size.is_empty() || def.rules_out_levers {
            let affected = part.replicas.as_ref().or(f.replicas.as_ref());
            let base: Scope = f.scope.iter().filter(|(k, _)| p.group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            let mut inputs = recommend_inputs(rules, table, &base, cache.get(&base).copied(), affected.map(|r| r.total as f64));
            if let Some((sized_on, running, kv)) = sized_on(affected, replicas.get(&base), &p.replica_label) {
                inputs.running_per_replica = Some(running);
                inputs.kv_usage_avg = kv.or(inputs.kv_usage_avg);
                inputs.sized_on = Some(sized_on);
            }
            inputs.held = binding.iter().find(|b| b.scope == base).map(|b| {
                b.shares
                    .iter()
                    .filter(|(k, share)| **k != crate::report::LimitKind::None && **share >= super::binding::HELD_FLOOR)
                    .map(|(k, v)| (*k, *v))
                    .collect()
            });
            part.recommendations = crate::recommend::cards(def.recommend.as_deref(), &def.also_size, &inputs);
            if def.rules_out_levers {
                part.wont_help = Some(crate::recommend::wont_help(&inputs));
            }
        }
    }
    out
}

/// Where a finding is about some of its model's replicas and not the others (its breakdown names
/// fewer than all): those replicas, with their running batch and KV usage averaged over them,
/// for the cards to be sized from them rather than from replicas that differ.
fn sized_on(
    affected: Option<&Replicas>,
    reads: Option<&Vec<super::binding::ReplicaRead>>,
    label: &str,
) -> Option<(crate::recommend::SizedOn, f64, Option<f64>)> {
    let r = affected.filter(|r| r.not_evaluated.is_none() && !r.affected.is_empty() && r.affected.len() < r.total)?;
    let mine: Vec<&super::binding::ReplicaRead> = reads?.iter().filter(|x| x.scope.get(label).is_some_and(|v| r.affected.contains(v))).collect();
    if mine.len() != r.affected.len() {
        return None;
    }
    let count = mine.len() as f64;
    let running = mine.iter().map(|x| x.running).sum::<f64>() / count;
    let kvs: Vec<f64> = mine.iter().filter_map(|x| x.kv).collect();
    let kv = (kvs.len() == mine.len()).then(|| kvs.iter().sum::<f64>() / count);
    let waiting = mine.iter().map(|x| x.waiting).sum::<f64>() / count;
    (running > 0.0).then(|| (crate::recommend::SizedOn { replicas: r.affected.clone(), of: r.total, waiting }, running, kv))
}

/// What the recommenders read for one scope: its signals' values (window, and baseline where a card
/// compares), the cache configuration and the replica count the finding's breakdown found.
/// Each reading is the signal of its role (`role = "sizing.kv_usage_avg"`).
fn recommend_inputs(rules: &RuleSet, table: &SignalTable, base: &Scope, cache: Option<(f64, f64)>, replicas: Option<f64>) -> crate::recommend::Inputs {
    let of = |s: Sizing| rules.signal_for(Role::Sizing(s)).and_then(|id| table.get(id));
    let val = |s: Sizing| of(s).and_then(|t| t.window.values.get(base).copied());
    let before = |s: Sizing| of(s).and_then(|t| t.baseline.values.get(base).copied());
    crate::recommend::Inputs {
        num_gpu_blocks: cache.map(|c| c.0),
        block_size: cache.map(|c| c.1),
        prompt_len_mean: val(Sizing::PromptLenMean),
        output_len_mean: val(Sizing::OutputLenMean),
        running_per_replica: val(Sizing::RunningPerReplica),
        kv_usage_avg: val(Sizing::KvUsageAvg),
        kv_usage_max: val(Sizing::KvUsageMax),
        running_avg: val(Sizing::RunningAvg),
        waiting_avg: val(Sizing::WaitingAvg),
        waiting_recent: val(Sizing::WaitingRecent),
        running_fill: val(Sizing::RunningFill),
        preemption_active: val(Sizing::PreemptionActive),
        preemption_recent: val(Sizing::PreemptionRecent),
        itl_p95: val(Sizing::ItlP95),
        itl_p95_baseline: before(Sizing::ItlP95),
        itl_p95_recent: val(Sizing::ItlP95Recent),
        prompt_tokens_rate: val(Sizing::PromptTokensRate),
        prompt_tokens_rate_baseline: before(Sizing::PromptTokensRate),
        batch_tokens_mean: val(Sizing::BatchTokensMean),
        replicas,
        held: None,
        sized_on: None,
    }
}
