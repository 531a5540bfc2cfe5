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

mod shared;
pub use shared::add_reads;

use super::fetch::Answers;
use crate::prom::Selector;
use crate::report::{Binding, BindingState, LimitKind, RunParams, Scope};
use crate::signals::queries::binding::BindingRead;
use crate::source::{Data, Fold, Request, Response, Series};

/// Requests waiting, averaged over a step, that count as a queue: one request waited the whole
/// step (a request seen in one scrape of several is a scheduler's blink, not a queue).
pub const QUEUED: f64 = 1.0;
pub use crate::report::{KV_CEILING, PREFILL_FILLED, STALL_TOKENS};
/// Steps at the running batch's peak (within [`cap_slack`]) for the peak to count as a plateau (a
/// cap) rather than a passing high.
pub const PLATEAU_STEPS: usize = 3;
/// Tokens per engine step within this share of their plateau count as at the token budget (a
/// step's mean wobbles by a few tokens as prefill chunks and decode tokens mix).
pub const BUDGET_SLACK: f64 = 0.05;

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
    /// Tokens per engine step, the step's mean (`vllm:iteration_tokens_total` sum over count). vLLM
    /// V1 records a chunked prompt's tokens in the step that finishes it, so the histogram's
    /// buckets do not show steps at the budget: a real engine at a 256-token budget had 72% of its
    /// steps under 128 tokens and 28% over 512, its mean 256.
    pub tokens_per_step: Option<f64>,
    /// The share of those tokens that were prompt tokens: 1 - generated tokens over all tokens.
    pub prefill_share: Option<f64>,
}

/// A scope's caps, inferred from its whole window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Caps {
    /// The running batch's plateau: its peak, held at least [`PLATEAU_STEPS`] steps.
    pub running: Option<f64>,
    /// The token budget: the plateau of tokens per engine step, held with a queue while prompt
    /// tokens filled the steps.
    pub budget: Option<f64>,
    /// The share of the queued steps at each plateau, to tell which binds where both seem to.
    pub running_held: f64,
    pub budget_held: f64,
}

fn seq_full(s: &Step, caps: &Caps) -> bool {
    caps.running.is_some_and(|cap| s.running.unwrap_or(0.0) >= cap - cap_slack(cap))
}

fn budget_full(s: &Step, budget: Option<f64>) -> bool {
    budget.is_some_and(|b| s.tokens_per_step.is_some_and(|t| t >= b * (1.0 - BUDGET_SLACK)) && s.prefill_share.is_some_and(|p| p >= PREFILL_FILLED))
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
    let _ = running;
    match (seq_full(s, caps), budget_full(s, caps.budget)) {
        (true, false) => Some(LimitKind::MaxNumSeqs),
        (false, true) => Some(LimitKind::MaxNumBatchedTokens),
        // Both at their plateaus: the one held at more of the queued steps is the cap met; a tie
        // goes to the budget, the more specific evidence (a running count held level is also what
        // a step filled to its token budget leaves room for).
        (true, true) if caps.budget_held >= caps.running_held => Some(LimitKind::MaxNumBatchedTokens),
        (true, true) => Some(LimitKind::MaxNumSeqs),
        // Waiting with every cap below its line: held by something other than capacity.
        (false, false) => Some(LimitKind::Deferred),
    }
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

/// The token budget over a window of steps: the highest tokens-per-step level that at least
/// [`PLATEAU_STEPS`] queued, prompt-filled steps reach (within [`BUDGET_SLACK`] of it).
pub fn token_plateau(steps: &[Step]) -> Option<f64> {
    let filled: Vec<f64> = steps
        .iter()
        .filter(|s| s.waiting.is_some_and(|w| w >= QUEUED) && s.prefill_share.is_some_and(|p| p >= PREFILL_FILLED))
        .filter_map(|s| s.tokens_per_step)
        .filter(|t| t.is_finite() && *t >= 1.0)
        .collect();
    let mut levels = filled.clone();
    levels.sort_by(|a, b| b.total_cmp(a));
    levels.into_iter().find(|v| filled.iter().filter(|t| (**t - v).abs() <= v * BUDGET_SLACK).count() >= PLATEAU_STEPS)
}

/// A scope's caps from its steps. The shares of queued steps held at each plateau leave out the
/// first `settle` steps, whose counter rates still reach back before the window (a token rate then
/// lags the running gauge, which is read within its step).
pub fn infer_caps(steps: &[Step], settle: usize) -> Caps {
    let mut caps = Caps { running: running_plateau(steps), budget: token_plateau(steps), ..Caps::default() };
    let queued: Vec<&Step> = steps.iter().skip(settle.min(steps.len().saturating_sub(1))).filter(|s| s.waiting.is_some_and(|w| w >= QUEUED)).collect();
    if !queued.is_empty() {
        let n = queued.len() as f64;
        caps.running_held = queued.iter().filter(|s| seq_full(s, &caps)).count() as f64 / n;
        caps.budget_held = queued.iter().filter(|s| budget_full(s, caps.budget)).count() as f64 / n;
    }
    caps
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

/// The range queries of the stage, in the order [`read`] expects them.
#[derive(Debug, Clone)]
pub struct BindingPlan {
    pub running: Request,
    pub waiting: Request,
    pub kv: Option<Request>,
    pub generation: Option<Request>,
    pub preemptions: Option<Request>,
    pub reasons: Option<Request>,
    /// Tokens and engine steps per second, per replica (the iteration-token histogram's sum and count).
    pub tokens: Option<Request>,
    pub steps: Option<Request>,
    pub step: u64,
    /// The leading steps whose counter rates reach back before the window.
    pub settle: usize,
    /// Each read's query without its reduction across series, the labels it groups by and how it
    /// reduces them: what is sent (see [`add_reads`]).
    pub each: BTreeMap<Request, (String, Vec<String>, Fold)>,
}

impl BindingPlan {
    pub fn requests(&self) -> Vec<Request> {
        [
            Some(&self.running),
            Some(&self.waiting),
            self.kv.as_ref(),
            self.generation.as_ref(),
            self.preemptions.as_ref(),
            self.reasons.as_ref(),
            self.tokens.as_ref(),
            self.steps.as_ref(),
        ]
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
    let group: Vec<String> = p.group_by.iter().cloned().chain((!p.group_by.contains(&p.replica_label)).then(|| p.replica_label.clone())).collect();
    let range = |query: String| Request::Range { query, start: p.window.start + chrono::Duration::seconds(step as i64), end: p.window.end, step_seconds: step };
    let read = |r: BindingRead| r.query(selector, names, &group, step, counter_range).map(range);
    let all = [
        BindingRead::Running,
        BindingRead::Waiting,
        BindingRead::KvUsage,
        BindingRead::Generation,
        BindingRead::Preemptions,
        BindingRead::WaitingByReason,
        BindingRead::IterationTokens,
        BindingRead::IterationSteps,
    ];
    let each = all.into_iter().filter_map(|r| Some((read(r)?, r.each(selector, names, &group, step, counter_range)?))).collect();
    Some(BindingPlan {
        running: read(BindingRead::Running)?,
        waiting: read(BindingRead::Waiting)?,
        kv: read(BindingRead::KvUsage),
        generation: read(BindingRead::Generation),
        preemptions: read(BindingRead::Preemptions),
        reasons: read(BindingRead::WaitingByReason),
        tokens: read(BindingRead::IterationTokens),
        steps: read(BindingRead::IterationSteps),
        step,
        settle: (counter_range / step).saturating_sub(1) as usize,
        each,
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
    // Tokens per second into tokens per engine step, and the prompt tokens' share of them.
    let mut tokens = Grid::new();
    fill(&mut tokens, matrix(answers, plan.tokens.as_ref()), keys, |s, v, _| s.tokens_per_step = Some(v));
    fill(&mut g, matrix(answers, plan.steps.as_ref()), keys, |s, v, _| s.prefill_share = Some(v));
    for (scope, steps) in g.iter_mut() {
        for (t, s) in steps.iter_mut() {
            let per_second = tokens.get(scope).and_then(|m| m.get(t)).and_then(|x| x.tokens_per_step);
            let engine_steps = s.prefill_share.take();
            s.tokens_per_step = match (per_second, engine_steps) {
                (Some(tok), Some(n)) if n > 0.0 => Some(tok / n),
                _ => None,
            };
            s.prefill_share = match (per_second, s.generation) {
                (Some(tok), Some(gen)) if tok > 0.0 => Some((1.0 - gen / tok).clamp(0.0, 1.0)),
                _ => None,
            };
        }
    }
    g
}

use crate::stats::finite_upper_median as median;

/// How each limit that held was recognised, worded by [`crate::report::limit_basis`] (see
/// [`Binding::basis`]).
fn basis(shares: &BTreeMap<LimitKind, f64>, caps: &Caps, reasons: bool) -> BTreeMap<LimitKind, String> {
    shares.iter().filter(|(_, share)| **share > 0.0).map(|(l, _)| (*l, crate::report::limit_basis(*l, caps.running, caps.budget, reasons))).collect()
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

/// A replica's caps and its classified steps (time -> step and the limit that held there).
type Classified = (Caps, BTreeMap<i64, (Step, LimitKind)>);

/// Per model, per replica: caps, then each step's limit.
fn per_replica(plan: &BindingPlan, answers: &Answers, p: &RunParams) -> BTreeMap<Scope, BTreeMap<Scope, Classified>> {
    let keys: Vec<String> = p.group_by.iter().cloned().chain((!p.group_by.contains(&p.replica_label)).then(|| p.replica_label.clone())).collect();
    let mut replicas: BTreeMap<Scope, BTreeMap<Scope, Classified>> = BTreeMap::new();
    for (scope, steps) in grid(plan, answers, &keys) {
        let model: Scope = scope.iter().filter(|(k, _)| p.group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        let list: Vec<Step> = steps.values().cloned().collect();
        let caps = infer_caps(&list, plan.settle);
        let classified = steps.into_iter().filter_map(|(t, s)| classify(&s, &caps).map(|l| (t, (s, l)))).collect();
        replicas.entry(model).or_default().insert(scope, (caps, classified));
    }
    replicas
}

/// One replica over the window, from the stage's own reads, for comparing it with its peers.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaRead {
    /// The model's grouping labels and the replica label.
    pub scope: Scope,
    /// The running batch: its median over the window's steps, and its highest.
    pub running: f64,
    pub peak: f64,
    /// Requests waiting, the median over the steps.
    pub waiting: f64,
    /// KV-cache usage (each step's peak), the median over the steps (0..1), where it was read.
    pub kv: Option<f64>,
    /// Generated tokens per second, the median over the steps: what it serves (a replica slow per
    /// token holds each request longer, a larger batch at the same throughput; a loaded one serves more).
    pub generation: Option<f64>,
    /// The running batch's plateau held with a queue (inferred max_num_seqs), when one was seen.
    pub cap: Option<f64>,
    /// The limit that held longest, and its share of the steps.
    pub limit: LimitKind,
    pub share: f64,
}

/// Every replica of every model (keyed by the model's grouping labels), read from the stage's
/// answers: no query of its own, whatever the fleet's size.
pub fn replicas(plan: &BindingPlan, answers: &Answers, p: &RunParams) -> BTreeMap<Scope, Vec<ReplicaRead>> {
    let mut out: BTreeMap<Scope, Vec<ReplicaRead>> = BTreeMap::new();
    for (model, reps) in per_replica(plan, answers, p) {
        for (scope, (caps, steps)) in reps {
            let limits: Vec<LimitKind> = steps.values().map(|(_, l)| *l).collect();
            let Some((limit, shares)) = attribute(&limits) else { continue };
            let running: Vec<f64> = steps.values().filter_map(|(s, _)| s.running).collect();
            let Some(median_running) = median(running.clone()) else { continue };
            out.entry(model.clone()).or_default().push(ReplicaRead {
                scope,
                running: median_running,
                peak: running.iter().copied().fold(0.0, f64::max),
                waiting: median(steps.values().filter_map(|(s, _)| s.waiting).collect()).unwrap_or(0.0),
                kv: median(steps.values().filter_map(|(s, _)| s.kv).collect()),
                generation: median(steps.values().filter_map(|(s, _)| s.generation).collect()),
                cap: caps.running,
                limit,
                share: shares.get(&limit).copied().unwrap_or(0.0),
            });
        }
    }
    out
}

/// Every model's binding, and each replica's whose limit differs from its model's.
pub fn read(plan: &BindingPlan, answers: &Answers, p: &RunParams) -> Vec<Binding> {
    let reasons = !matrix(answers, plan.reasons.as_ref()).is_empty();
    let replicas = per_replica(plan, answers, p);
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
fn model_binding(model: Scope, reps: &BTreeMap<Scope, Classified>, reasons: bool, step_seconds: u64) -> Option<Binding> {
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
            tokens_per_step: at.iter().filter_map(|(s, _)| s.tokens_per_step).reduce(f64::max),
            prefill_share: at.iter().filter_map(|(s, _)| s.prefill_share).reduce(f64::max),
        };
        steps.insert(t, (step, limit));
    }
    let caps = Caps {
        running: reps.values().map(|(c, _)| c.running).sum::<Option<f64>>(),
        budget: reps.values().filter_map(|(c, _)| c.budget).reduce(f64::max),
        ..Caps::default()
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
        Caps { running: Some(running), ..Caps::default() }
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
    fn steps_held_at_a_token_plateau_by_prompt_chunks_are_the_token_budget() {
        // The real engine at --max-num-batched-tokens 256: about 256 tokens a step, 97% of them
        // prompt tokens, running 6 to 10 of 32, a queue.
        let budget = |running: f64, tokens: f64| Step { tokens_per_step: Some(tokens), prefill_share: Some(0.97), ..step(running, 14.0, 0.12, 8.0) };
        let steps: Vec<Step> = [(6.0, 255.0), (10.0, 256.0), (8.0, 251.0), (9.0, 256.5), (7.0, 254.0)].iter().map(|(r, t)| budget(*r, *t)).collect();
        let caps = infer_caps(&steps, 0);
        assert_eq!(caps.budget, Some(256.5));
        for s in &steps {
            assert_eq!(classify(s, &caps), Some(LimitKind::MaxNumBatchedTokens), "{s:?}");
        }
        // A step well under the plateau is not at the budget.
        assert_eq!(classify(&budget(6.0, 120.0), &caps), Some(LimitKind::Deferred));
        // The sequence cap at 4 with 64-token prompts and 64-token outputs: 8 tokens a step, half
        // of them prompt tokens. Decode fills those steps: no budget, the running batch's plateau.
        let seq = |tokens: f64| Step { tokens_per_step: Some(tokens), prefill_share: Some(0.5), ..step(4.0, 18.0, 0.08, 30.0) };
        let steps: Vec<Step> = [8.0, 8.1, 7.9, 8.0].iter().map(|t| seq(*t)).collect();
        let caps = infer_caps(&steps, 0);
        assert_eq!((caps.budget, caps.running), (None, Some(4.0)));
        assert_eq!(classify(&steps[0], &caps), Some(LimitKind::MaxNumSeqs));
    }

    #[test]
    fn where_both_plateaus_seem_to_hold_the_one_held_longer_binds() {
        // Long prompts under a sequence cap of 32: running pinned at 32 at every queued step,
        // prompt tokens most of each step, but the tokens per step vary with arrivals.
        let s = |tokens: f64| Step { tokens_per_step: Some(tokens), prefill_share: Some(0.85), ..step(32.0, 20.0, 0.5, 200.0) };
        let steps: Vec<Step> = [190.0, 192.0, 191.0, 150.0, 120.0, 170.0, 140.0].iter().map(|t| s(*t)).collect();
        let caps = infer_caps(&steps, 0);
        assert!(caps.budget.is_some() && caps.running_held > caps.budget_held, "{caps:?}");
        assert_eq!(classify(&steps[0], &caps), Some(LimitKind::MaxNumSeqs));
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
    fn a_model_step_takes_what_most_bound_replicas_hit() {
        use LimitKind as L;
        assert_eq!(model_step(&[L::None, L::None, L::MaxNumSeqs]), Some(L::MaxNumSeqs));
        assert_eq!(model_step(&[L::KvCache, L::MaxNumSeqs, L::MaxNumSeqs]), Some(L::MaxNumSeqs));
        assert_eq!(model_step(&[L::None, L::None]), Some(L::None));
        assert_eq!(model_step(&[]), None);
    }
}
