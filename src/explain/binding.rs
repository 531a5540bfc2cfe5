//! Stage: which limit binds. At every trend step of the window, for each replica and each model,
//! which limit held its requests back: the KV cache, the sequence cap (`max_num_seqs`), the token
//! budget (`max_num_batched_tokens`), something other than capacity (`deferred`), a stalled engine,
//! or nothing (no queue). See docs/how-it-decides.md, "Which limit binds".
//!
//! Its reads are a fixed handful of range queries over the window, asked with the signals in the
//! same round trip, whatever the fleet's size: the running, waiting and KV gauges, the generation
//! and preemption counters, each per replica; the waiting-by-reason gauge per replica where it
//! exists; the engine-step token histogram per model. Everything after them is plain functions over
//! the points: [`classify`] one step, [`infer_caps`] from a replica's whole window, [`attribute`]
//! the shares.

use std::collections::{BTreeMap, BTreeSet};

use super::fetch::Answers;
use crate::prom::Selector;
use crate::report::{Binding, BindingState, LimitKind, RunParams, Scope};
use crate::signals;
use crate::source::{Data, Request, Response, Series};

/// Requests waiting, averaged over a step, that count as a queue: one request waited the whole
/// step (a request seen in one scrape of several is a scheduler's blink, not a queue).
pub const QUEUED: f64 = 1.0;
/// KV-cache usage counted as "at its ceiling": the rules' `kv_usage_high` (90%). vLLM admits a
/// request only when its blocks fit, so usage rarely reads 100%; a queue beside 85% usage is held
/// by something else (the near miss of the scenarios).
pub const KV_CEILING: f64 = 0.9;
/// Generated tokens per second below which an engine with requests counts as producing nothing:
/// the rules' `stall_tokens_per_second`. A CPU engine at light load makes tens per second.
pub const STALL_TOKENS: f64 = 1.0;
/// Steps at the running batch's peak (within [`cap_slack`]) for the peak to count as a plateau (a
/// cap) rather than a passing high.
pub const PLATEAU_STEPS: usize = 3;
/// Share of a step's engine iterations in the token budget's bucket for the budget to bind: most
/// iterations full.
pub const AT_BUDGET: f64 = 0.5;
/// Share of the window's engine iterations the budget's bucket must hold to be taken as the
/// budget: the highest bucket that many iterations reach, not one stray large step.
pub const BUDGET_BUCKET_SHARE: f64 = 0.1;

/// The share of the window's steps a limit must hold to count as binding: a queue seen in fewer
/// steps is a blip (a real CPU fleet at light load showed one in 3-7% of its steps), not a limit
/// anyone should change. Its share is still reported.
pub const HELD_FLOOR: f64 = 0.1;

/// How close to its plateau the running batch counts as held at it: one request, or 5% of a large
/// cap (a batch turning over reads one below its cap now and then).
pub fn cap_slack(cap: f64) -> f64 {
    (cap * 0.05).max(1.0)
}

/// One scope at one step. `None`: not read at that step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// The running batch's peak within the step.
    pub running: Option<f64>,
    /// Requests waiting, averaged over the step.
    pub waiting: Option<f64>,
    /// Waiting for a reason other than capacity (`reason="deferred"`), where the engine says.
    pub deferred: Option<f64>,
    /// KV-cache usage's peak within the step (0..1).
    pub kv: Option<f64>,
    /// Generated tokens per second.
    pub generation: Option<f64>,
    /// Preemptions per second.
    pub preemptions: Option<f64>,
    /// Share of the step's engine iterations in the token budget's bucket.
    pub at_budget: Option<f64>,
}

/// A scope's caps, inferred from its whole window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Caps {
    /// The running batch's plateau: its peak, held at least [`PLATEAU_STEPS`] steps.
    pub running: Option<f64>,
    /// The token budget's bucket (lower and upper bound, tokens per engine step).
    pub budget: Option<(f64, f64)>,
}

/// The limit that held at one step; `None` when the step has no gauge to read.
pub fn classify(s: &Step, caps: &Caps) -> Option<LimitKind> {
    if s.running.is_none() && s.waiting.is_none() {
        return None;
    }
    let running = s.running.unwrap_or(0.0);
    let waiting = s.waiting.unwrap_or(0.0);
    let queued = waiting >= QUEUED;
    if (running >= 1.0 || queued) && s.generation.is_some_and(|g| g < STALL_TOKENS) {
        return Some(LimitKind::Stalled);
    }
    let kv_full = s.kv.is_some_and(|k| k >= KV_CEILING);
    let preempted = s.preemptions.is_some_and(|p| p > 0.0);
    if kv_full && (queued || preempted) {
        return Some(LimitKind::KvCache);
    }
    if !queued {
        return Some(LimitKind::None);
    }
    if preempted {
        // The engine's own word that the cache ran out, whatever usage read at the scrape.
        return Some(LimitKind::KvCache);
    }
    if s.deferred.is_some_and(|d| d * 2.0 >= waiting) {
        return Some(LimitKind::Deferred);
    }
    if caps.running.is_some_and(|cap| running >= cap - cap_slack(cap)) {
        return Some(LimitKind::MaxNumSeqs);
    }
    if let (Some((low, _)), Some(share)) = (caps.budget, s.at_budget) {
        // Full iterations that carry more tokens than there are running requests hold prefill
        // chunks: the budget, not decode, fills them.
        if share >= AT_BUDGET && low >= running {
            return Some(LimitKind::MaxNumBatchedTokens);
        }
    }
    // Waiting with every cap below its line: held by something other than capacity.
    Some(LimitKind::Deferred)
}

/// The running batch's plateau over a window of steps: its peak, when held at least
/// [`PLATEAU_STEPS`] steps while requests waited (a peak with no queue beside it is steady load,
/// not a cap anyone met).
pub fn running_plateau(steps: &[Step]) -> Option<f64> {
    let peak = steps.iter().filter_map(|s| s.running).fold(f64::NEG_INFINITY, f64::max);
    if !peak.is_finite() || peak < 1.0 {
        return None;
    }
    let held = steps.iter().filter(|s| s.running.is_some_and(|r| r >= peak - cap_slack(peak)) && s.waiting.is_some_and(|w| w >= QUEUED)).count();
    (held >= PLATEAU_STEPS).then_some(peak)
}

/// A scope's caps from its steps and the token budget's bucket read for its model.
pub fn infer_caps(steps: &[Step], budget: Option<(f64, f64)>) -> Caps {
    Caps { running: running_plateau(steps), budget }
}

/// Each limit's share of the classified steps, and the limit that held longest among those where
/// any did (`none` only when none held at least [`HELD_FLOOR`] of the steps). `None` when no step
/// was classified.
pub fn attribute(limits: &[LimitKind]) -> Option<(LimitKind, BTreeMap<LimitKind, f64>)> {
    if limits.is_empty() {
        return None;
    }
    let mut counts: BTreeMap<LimitKind, usize> = LimitKind::ALL.iter().map(|l| (*l, 0)).collect();
    for l in limits {
        *counts.entry(*l).or_insert(0) += 1;
    }
    let n = limits.len() as f64;
    let shares: BTreeMap<LimitKind, f64> = counts.iter().map(|(l, c)| (*l, *c as f64 / n)).collect();
    // Ties go to the first in LimitKind::ALL's order (the declaration order: kv-cache first).
    let top = LimitKind::ALL
        .iter()
        .filter(|l| **l != LimitKind::None && counts[*l] > 0 && shares[*l] >= HELD_FLOOR)
        .fold(None::<LimitKind>, |best, l| match best {
            Some(b) if counts[&b] >= counts[l] => Some(b),
            _ => Some(*l),
        })
        .unwrap_or(LimitKind::None);
    Some((top, shares))
}

/// A model's limit at one step from its replicas': the one most of its bound replicas hit (ties
/// in [`LimitKind::ALL`]'s order), `none` only when every replica had no queue.
pub fn model_step(replicas: &[LimitKind]) -> Option<LimitKind> {
    if replicas.is_empty() {
        return None;
    }
    attribute(replicas).map(|(l, _)| l)
}

/// The share of a step's engine iterations above `low`, from the histogram's cumulative bucket
/// rates at that step (`le`'s bits -> iterations per second: for bounds >= 0 the bits sort as the
/// bounds do, `+Inf` last).
pub fn share_at_budget(buckets: &BTreeMap<u64, f64>, low: f64) -> Option<f64> {
    let total = buckets.iter().next_back().map(|(_, v)| *v)?;
    if total <= 0.0 {
        return None;
    }
    let below = buckets.iter().filter(|(le, _)| f64::from_bits(**le) <= low).map(|(_, v)| *v).fold(0.0, f64::max);
    Some(((total - below) / total).clamp(0.0, 1.0))
}

/// The token budget's bucket from a model's whole window: the highest finite bucket holding at
/// least [`BUDGET_BUCKET_SHARE`] of its iterations (`totals`: cumulative iterations per `le`).
pub fn budget_bucket(totals: &BTreeMap<u64, f64>) -> Option<(f64, f64)> {
    let mut bounds: Vec<(f64, f64)> = totals.iter().map(|(le, v)| (f64::from_bits(*le), *v)).collect();
    bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let all = bounds.last().map(|(_, v)| *v)?;
    if all <= 0.0 {
        return None;
    }
    let mut best = None;
    let mut prev = (0.0, 0.0);
    for (le, cum) in bounds.iter().copied().filter(|(le, _)| le.is_finite()) {
        if (cum - prev.1) / all >= BUDGET_BUCKET_SHARE {
            best = Some((prev.0, le));
        }
        prev = (le, cum);
    }
    best
}

/// The range queries of the stage, in the order [`read`] expects them.
#[derive(Debug, Clone)]
pub struct BindingPlan {
    pub running: Request,
    pub waiting: Request,
    pub kv: Option<Request>,
    pub generation: Option<Request>,
    pub preemptions: Option<Request>,
    pub reasons: Option<Request>,
    pub iterations: Option<Request>,
    pub step: u64,
}

impl BindingPlan {
    pub fn requests(&self) -> Vec<Request> {
        [Some(&self.running), Some(&self.waiting), self.kv.as_ref(), self.generation.as_ref(), self.preemptions.as_ref(), self.reasons.as_ref(), self.iterations.as_ref()]
            .into_iter()
            .flatten()
            .cloned()
            .collect()
    }
}

/// The step of the stage's reads: the trends' (a thirtieth of the window, 15 s at least).
pub fn step_seconds(p: &RunParams) -> u64 {
    (p.window.duration().as_secs() / 30).max(15)
}

/// Plan the reads over the window; `None` without the running and waiting gauges.
pub fn plan(selector: &Selector, p: &RunParams, names: &BTreeSet<String>) -> Option<BindingPlan> {
    let step = step_seconds(p);
    let counter_range = (2 * step).max(60);
    let pick = |alternatives: &[&str]| signals::pick(&alternatives.iter().map(|s| s.to_string()).collect::<Vec<_>>(), names).cloned();
    let group: Vec<String> = p.group_by.iter().cloned().chain((!p.group_by.contains(&p.replica_label)).then(|| p.replica_label.clone())).collect();
    let by = group.join(", ");
    let models = p.group_by.join(", ");
    let range = |query: String| Request::Range { query, start: p.window.start + chrono::Duration::seconds(step as i64), end: p.window.end, step_seconds: step };
    let sel = |m: &str| selector.series(m, &[]);
    let running = pick(&["vllm:num_requests_running"])?;
    let waiting = pick(&["vllm:num_requests_waiting"])?;
    Some(BindingPlan {
        running: range(format!("sum by ({by}) (max_over_time({}[{step}s]))", sel(&running))),
        waiting: range(format!("sum by ({by}) (avg_over_time({}[{step}s]))", sel(&waiting))),
        kv: pick(&["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]).map(|m| range(format!("max by ({by}) (max_over_time({}[{step}s]))", sel(&m)))),
        generation: pick(&["vllm:generation_tokens_total"]).map(|m| range(format!("sum by ({by}) (rate({}[{counter_range}s]))", sel(&m)))),
        preemptions: pick(&["vllm:num_preemptions_total"]).map(|m| range(format!("sum by ({by}) (rate({}[{counter_range}s]))", sel(&m)))),
        reasons: pick(&["vllm:num_requests_waiting_by_reason"]).map(|m| range(format!("sum by ({by}, reason) (avg_over_time({}[{step}s]))", sel(&m)))),
        iterations: pick(&["vllm:iteration_tokens_total_bucket"]).map(|m| range(format!("sum by ({models}, le) (rate({}[{counter_range}s]))", sel(&m)))),
        step,
    })
}

fn matrix<'a>(answers: &'a Answers, req: Option<&Request>) -> &'a [Series] {
    match req.and_then(|r| answers.get(r)) {
        Some(Ok(Response { data: Data::Matrix(series), .. })) => series,
        _ => &[],
    }
}

fn scope_of(labels: &crate::prom::Labels, keys: &[String]) -> Scope {
    keys.iter().map(|k| (k.clone(), labels.get(k).cloned().unwrap_or_default())).collect()
}

type Grid = BTreeMap<Scope, BTreeMap<i64, Step>>;

/// Put one answer's points into the replicas' steps with `set`.
fn fill(grid: &mut Grid, series: &[Series], keys: &[String], set: impl Fn(&mut Step, f64, &crate::prom::Labels)) {
    for s in series {
        let scope = scope_of(&s.labels, keys);
        let steps = grid.entry(scope).or_default();
        for (t, v) in &s.points {
            if v.is_finite() {
                set(steps.entry(t.round() as i64).or_default(), *v, &s.labels);
            }
        }
    }
}

/// The models' token-budget buckets and, per step, the share of iterations in them.
fn budgets(series: &[Series], group_by: &[String]) -> BTreeMap<Scope, ((f64, f64), BTreeMap<i64, f64>)> {
    let mut per: BTreeMap<Scope, BTreeMap<i64, BTreeMap<u64, f64>>> = BTreeMap::new();
    for s in series {
        let Some(le) = s.labels.get("le").and_then(|l| if l == "+Inf" { Some(f64::INFINITY) } else { l.parse::<f64>().ok() }) else { continue };
        let steps = per.entry(scope_of(&s.labels, group_by)).or_default();
        for (t, v) in s.points.iter().filter(|(_, v)| v.is_finite()) {
            *steps.entry(t.round() as i64).or_default().entry(le.to_bits()).or_insert(0.0) += v;
        }
    }
    let mut out = BTreeMap::new();
    for (scope, steps) in per {
        let mut totals: BTreeMap<u64, f64> = BTreeMap::new();
        for buckets in steps.values() {
            for (le, v) in buckets {
                *totals.entry(*le).or_insert(0.0) += v;
            }
        }
        let Some(bucket) = budget_bucket(&totals) else { continue };
        let shares = steps.iter().filter_map(|(t, b)| share_at_budget(b, bucket.0).map(|s| (*t, s))).collect();
        out.insert(scope, (bucket, shares));
    }
    out
}

/// Read the answers into each replica's steps.
fn grid(plan: &BindingPlan, answers: &Answers, keys: &[String]) -> Grid {
    let mut g = Grid::new();
    fill(&mut g, matrix(answers, Some(&plan.running)), keys, |s, v, _| s.running = Some(v));
    fill(&mut g, matrix(answers, Some(&plan.waiting)), keys, |s, v, _| s.waiting = Some(v));
    fill(&mut g, matrix(answers, plan.kv.as_ref()), keys, |s, v, _| s.kv = Some(v));
    fill(&mut g, matrix(answers, plan.generation.as_ref()), keys, |s, v, _| s.generation = Some(v));
    fill(&mut g, matrix(answers, plan.preemptions.as_ref()), keys, |s, v, _| s.preemptions = Some(v));
    fill(&mut g, matrix(answers, plan.reasons.as_ref()), keys, |s, v, l| {
        if l.get("reason").is_some_and(|r| r == "deferred") {
            s.deferred = Some(s.deferred.unwrap_or(0.0) + v);
        }
    });
    g
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The sentence saying how each limit that held was recognised (see [`Binding::basis`]).
fn basis(shares: &BTreeMap<LimitKind, f64>, caps: &Caps, reasons: bool) -> BTreeMap<LimitKind, String> {
    let mut out = BTreeMap::new();
    for (l, share) in shares {
        if *share <= 0.0 {
            continue;
        }
        let text = match l {
            LimitKind::KvCache => format!("KV-cache usage at or above {:.0}% (vllm:kv_cache_usage_perc) with requests waiting, or preemptions (vllm:num_preemptions_total)", KV_CEILING * 100.0),
            LimitKind::MaxNumSeqs => match caps.running {
                Some(cap) => format!("max_num_seqs inferred as {cap}: the running batch's observed plateau, held with requests waiting and KV headroom"),
                None => "the running batch's observed plateau".to_string(),
            },
            LimitKind::MaxNumBatchedTokens => match caps.budget {
                Some((low, high)) => format!("max_num_batched_tokens inferred in ({low}, {high}] tokens: the highest bucket of vllm:iteration_tokens_total most engine steps reached, above the running batch"),
                None => "engine steps at the token budget".to_string(),
            },
            LimitKind::Deferred if reasons => "requests waiting with reason=\"deferred\" (vllm:num_requests_waiting_by_reason), or waiting while every cap had room".to_string(),
            LimitKind::Deferred => "requests waiting while running, KV cache and token budget all had room (no waiting-by-reason gauge to say why)".to_string(),
            LimitKind::Stalled => format!("requests running or waiting while fewer than {STALL_TOKENS} generated tokens per second came out (vllm:generation_tokens_total)"),
            LimitKind::None => "no request waited".to_string(),
        };
        out.insert(*l, text);
    }
    out
}

/// One scope's binding from its steps (time -> step) and caps.
fn bind(scope: Scope, steps: &BTreeMap<i64, (Step, LimitKind)>, caps: &Caps, reasons: bool, step_seconds: u64) -> Option<Binding> {
    let limits: Vec<LimitKind> = steps.values().map(|(_, l)| *l).collect();
    let (limit, shares) = attribute(&limits)?;
    let held: Vec<&Step> = steps.values().filter(|(_, l)| *l == limit).map(|(s, _)| s).collect();
    let typical = BindingState {
        running: median(held.iter().filter_map(|s| s.running).collect()).unwrap_or(0.0),
        running_cap: caps.running,
        waiting: median(held.iter().filter_map(|s| s.waiting).collect()).unwrap_or(0.0),
        kv_usage: median(held.iter().filter_map(|s| s.kv).collect()),
        generation_tokens_per_second: median(held.iter().filter_map(|s| s.generation).collect()),
    };
    Some(Binding {
        scope,
        limit,
        share: shares.get(&limit).copied().unwrap_or(0.0),
        basis: basis(&shares, caps, reasons),
        shares,
        steps: limits.len(),
        step_seconds,
        typical: Some(typical),
    })
}

/// Every model's binding, and each replica's whose limit differs from its model's.
pub fn read(plan: &BindingPlan, answers: &Answers, p: &RunParams) -> Vec<Binding> {
    let keys: Vec<String> = p.group_by.iter().cloned().chain((!p.group_by.contains(&p.replica_label)).then(|| p.replica_label.clone())).collect();
    let reasons = !matrix(answers, plan.reasons.as_ref()).is_empty();
    let mut grid = grid(plan, answers, &keys);
    let budgets = budgets(matrix(answers, plan.iterations.as_ref()), &p.group_by);
    // Per replica: caps, then each step's limit.
    let mut replicas: BTreeMap<Scope, BTreeMap<Scope, (Caps, BTreeMap<i64, (Step, LimitKind)>)>> = BTreeMap::new();
    for (scope, steps) in std::mem::take(&mut grid) {
        let model: Scope = scope.iter().filter(|(k, _)| p.group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let budget = budgets.get(&model);
        let mut steps = steps;
        if let Some((_, shares)) = budget {
            for (t, s) in steps.iter_mut() {
                s.at_budget = shares.get(t).copied();
            }
        }
        let list: Vec<Step> = steps.values().cloned().collect();
        let caps = infer_caps(&list, budget.map(|(b, _)| *b));
        let classified = steps.into_iter().filter_map(|(t, s)| classify(&s, &caps).map(|l| (t, (s, l)))).collect();
        replicas.entry(model).or_default().insert(scope, (caps, classified));
    }
    let mut out = Vec::new();
    for (model, reps) in replicas {
        let Some(model_binding) = model_binding(model, &reps, reasons, plan.step) else { continue };
        let model_limit = model_binding.limit;
        out.push(model_binding);
        if reps.len() > 1 {
            for (scope, (caps, steps)) in &reps {
                if let Some(b) = bind(scope.clone(), steps, caps, reasons, plan.step).filter(|b| b.limit != model_limit) {
                    out.push(b);
                }
            }
        }
    }
    out
}

/// A model's binding from its replicas' classified steps: at each step the limit most of its bound
/// replicas hit ([`model_step`]); its state there summed over replicas (KV: the fullest).
fn model_binding(model: Scope, reps: &BTreeMap<Scope, (Caps, BTreeMap<i64, (Step, LimitKind)>)>, reasons: bool, step_seconds: u64) -> Option<Binding> {
    if reps.len() == 1 {
        let (caps, steps) = reps.values().next()?;
        return bind(model, steps, caps, reasons, step_seconds);
    }
    let times: BTreeSet<i64> = reps.values().flat_map(|(_, s)| s.keys().copied()).collect();
    let mut steps = BTreeMap::new();
    for t in times {
        let at: Vec<&(Step, LimitKind)> = reps.values().filter_map(|(_, s)| s.get(&t)).collect();
        let Some(limit) = model_step(&at.iter().map(|(_, l)| *l).collect::<Vec<_>>()) else { continue };
        let sum = |f: fn(&Step) -> Option<f64>| at.iter().filter_map(|(s, _)| f(s)).reduce(|a, b| a + b);
        let step = Step {
            running: sum(|s| s.running),
            waiting: sum(|s| s.waiting),
            deferred: sum(|s| s.deferred),
            kv: at.iter().filter_map(|(s, _)| s.kv).reduce(f64::max),
            generation: sum(|s| s.generation),
            preemptions: sum(|s| s.preemptions),
            at_budget: at.iter().filter_map(|(s, _)| s.at_budget).reduce(f64::max),
        };
        steps.insert(t, (step, limit));
    }
    let caps = Caps {
        running: reps.values().map(|(c, _)| c.running).sum::<Option<f64>>(),
        budget: reps.values().find_map(|(c, _)| c.budget),
    };
    bind(model, &steps, &caps, reasons, step_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(running: f64, waiting: f64, kv: f64, generation: f64) -> Step {
        Step { running: Some(running), waiting: Some(waiting), kv: Some(kv), generation: Some(generation), preemptions: Some(0.0), ..Step::default() }
    }

    fn caps(running: f64) -> Caps {
        Caps { running: Some(running), budget: None }
    }

    #[test]
    fn a_queue_beside_a_full_running_batch_and_kv_headroom_is_the_sequence_cap() {
        assert_eq!(classify(&step(32.0, 45.0, 0.41, 900.0), &caps(32.0)), Some(LimitKind::MaxNumSeqs));
        // One below the cap is a batch turning over, still held.
        assert_eq!(classify(&step(31.0, 45.0, 0.41, 900.0), &caps(32.0)), Some(LimitKind::MaxNumSeqs));
    }

    #[test]
    fn a_queue_beside_kv_at_85_percent_is_not_the_kv_cache() {
        assert_eq!(classify(&step(32.0, 20.0, 0.85, 900.0), &caps(32.0)), Some(LimitKind::MaxNumSeqs));
        assert_eq!(classify(&step(20.0, 20.0, 0.95, 900.0), &caps(32.0)), Some(LimitKind::KvCache));
    }

    #[test]
    fn preemptions_with_a_queue_are_the_kv_cache_whatever_usage_read_at_the_scrape() {
        let s = Step { preemptions: Some(0.3), ..step(7.0, 23.0, 0.56, 200.0) };
        assert_eq!(classify(&s, &Caps::default()), Some(LimitKind::KvCache));
    }

    #[test]
    fn a_full_batch_with_no_queue_binds_nothing() {
        assert_eq!(classify(&step(32.0, 0.0, 0.6, 900.0), &caps(32.0)), Some(LimitKind::None));
        assert_eq!(classify(&step(32.0, 0.4, 0.6, 900.0), &caps(32.0)), Some(LimitKind::None));
    }

    #[test]
    fn requests_held_while_nothing_is_generated_are_a_stall() {
        assert_eq!(classify(&step(10.0, 5.0, 0.5, 0.0), &caps(32.0)), Some(LimitKind::Stalled));
        assert_eq!(classify(&step(0.0, 5.0, 0.0, 0.0), &Caps::default()), Some(LimitKind::Stalled));
        // An idle engine produces nothing and holds nothing: no stall.
        assert_eq!(classify(&step(0.0, 0.0, 0.0, 0.0), &Caps::default()), Some(LimitKind::None));
        // Without the counter at that step, a stall cannot be told.
        assert_eq!(classify(&Step { generation: None, ..step(10.0, 0.0, 0.5, 0.0) }, &Caps::default()), Some(LimitKind::None));
    }

    #[test]
    fn waiting_the_engine_calls_deferred_is_deferred_and_so_is_a_queue_no_cap_explains() {
        let s = Step { deferred: Some(8.0), ..step(32.0, 10.0, 0.5, 500.0) };
        assert_eq!(classify(&s, &caps(32.0)), Some(LimitKind::Deferred));
        assert_eq!(classify(&step(5.0, 10.0, 0.3, 500.0), &caps(32.0)), Some(LimitKind::Deferred));
    }

    #[test]
    fn full_iterations_above_the_running_batch_are_the_token_budget() {
        let c = Caps { running: Some(64.0), budget: Some((1024.0, 2048.0)) };
        let s = Step { at_budget: Some(0.8), ..step(12.0, 30.0, 0.5, 300.0) };
        assert_eq!(classify(&s, &c), Some(LimitKind::MaxNumBatchedTokens));
        // Few iterations at the budget: not it.
        assert_eq!(classify(&Step { at_budget: Some(0.2), ..s.clone() }, &c), Some(LimitKind::Deferred));
        // Decode alone fills iterations as large as the batch: the "budget" bucket under the
        // running count is no budget.
        let small = Caps { running: None, budget: Some((16.0, 32.0)) };
        assert_eq!(classify(&Step { at_budget: Some(0.9), ..step(32.0, 30.0, 0.5, 300.0) }, &small), Some(LimitKind::Deferred));
    }

    #[test]
    fn a_plateau_is_a_peak_held_with_a_queue_and_a_passing_high_is_not() {
        let held: Vec<Step> = [16.0, 32.0, 32.0, 31.0, 18.0, 32.0].iter().map(|r| step(*r, 80.0, 0.5, 900.0)).collect();
        assert_eq!(running_plateau(&held), Some(32.0));
        let passing: Vec<Step> = [10.0, 32.0, 12.0, 11.0].iter().map(|r| step(*r, 5.0, 0.5, 900.0)).collect();
        assert_eq!(running_plateau(&passing), None);
        // Steady load at its own level with no queue: no cap inferred.
        let steady: Vec<Step> = [32.0; 10].iter().map(|r| step(*r, 0.0, 0.5, 900.0)).collect();
        assert_eq!(running_plateau(&steady), None);
    }

    #[test]
    fn the_limit_is_the_longest_held_and_none_only_when_nothing_held() {
        use LimitKind as L;
        // Bursty overload: bound 40% of the time, idle 60%.
        let (l, shares) = attribute(&[L::None, L::None, L::None, L::MaxNumSeqs, L::MaxNumSeqs, L::KvCache]).unwrap();
        assert_eq!(l, L::MaxNumSeqs);
        assert!((shares[&L::None] - 0.5).abs() < 1e-9 && (shares[&L::MaxNumSeqs] - 1.0 / 3.0).abs() < 1e-9);
        assert!((shares.values().sum::<f64>() - 1.0).abs() < 1e-9);
        assert_eq!(attribute(&[L::None, L::None]).unwrap().0, L::None);
        assert!(attribute(&[]).is_none());
        // A queue in one step of twenty is a blip: none binds, and its share is still said.
        let mut blip = vec![L::None; 19];
        blip.push(L::Deferred);
        let (l, shares) = attribute(&blip).unwrap();
        assert_eq!((l, shares[&L::Deferred]), (L::None, 0.05));
        blip[0] = L::Deferred;
        assert_eq!(attribute(&blip).unwrap().0, L::Deferred);
    }

    #[test]
    fn the_budget_bucket_is_the_highest_many_iterations_reach() {
        let b = |pairs: &[(f64, f64)]| -> BTreeMap<u64, f64> { pairs.iter().map(|(le, v)| (le.to_bits(), *v)).collect() };
        // 60% of iterations in (1024, 2048], one stray in (2048, 4096].
        let totals = b(&[(32.0, 40.0), (1024.0, 40.0), (2048.0, 99.0), (4096.0, 100.0), (f64::INFINITY, 100.0)]);
        assert_eq!(budget_bucket(&totals), Some((1024.0, 2048.0)));
        assert!((share_at_budget(&totals, 1024.0).unwrap() - 0.6).abs() < 1e-9);
        assert_eq!(budget_bucket(&b(&[(32.0, 0.0), (f64::INFINITY, 0.0)])), None);
    }

    #[test]
    fn a_model_step_takes_what_most_bound_replicas_hit() {
        use LimitKind as L;
        assert_eq!(model_step(&[L::None, L::None, L::MaxNumSeqs]), Some(L::MaxNumSeqs));
        assert_eq!(model_step(&[L::KvCache, L::MaxNumSeqs, L::MaxNumSeqs]), Some(L::MaxNumSeqs));
        assert_eq!(model_step(&[L::None, L::None]), Some(L::None));
        assert_eq!(model_step(&[]), None);
    }
}
