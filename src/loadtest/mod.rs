//! `vllm-diag loadtest URL`: a sweep of offered loads through the path users take, each step held
//! for a while and judged against the profile's limits, to find the knee (the highest load served
//! within them), which limit bound there, and thresholds derived from the measured curve.
//!
//! The stages are plain functions over data; the requests are [`crate::probe::send`]'s (a closed
//! loop, or Poisson arrivals), the engines' reads are [`engine`]'s:
//!
//! - [`plan`]: the bounds and their ceilings, the doubling ladder, the bisection ([`plan::Sweep`])
//!   and the worst case a dry run prints.
//! - [`step`] (here): a step's requests and the engines' view into a [`Step`], judged ([`judge`]).
//! - [`knee`], [`bound_at`], [`derive`]: the knee, the limit that bound there, the profile.
//!
//! Everything here is data; [`crate::render`] words it, and the JSON is the serialized
//! [`LoadtestRun`], a stable contract (docs/probe.md).

pub mod engine;
pub mod plan;

use chrono::{DateTime, Utc};

use crate::probe::summary::summarize;
use crate::probe::{Measured, BUSY_STATUSES};
pub use crate::report::loadtest::{
    Bound, Bounds, DerivedProfile, Knee, LoadMode, LoadtestRun, Phase, Slo, Step, StepBreach, StepEngine, Stop, SweepPlan, WorstCase, SCHEMA_VERSION,
};
use crate::report::{LimitKind, KV_CEILING, PREFILL_FILLED};

/// The margin `--profile-out` adds to the knee's values by default: half again.
pub const MARGIN: f64 = 0.5;

/// What a step sent, into a [`Step`] (not yet judged): counts, throughput over the step's time
/// (its first start to its last end), the client's distributions.
pub fn step(index: usize, phase: Phase, load: f64, times: (DateTime<Utc>, DateTime<Utc>), requests: &[Measured], waited_for_slot: usize) -> Step {
    let s = summarize(requests);
    let (started, ended) = times;
    let seconds = ((ended - started).num_milliseconds() as f64 / 1000.0).max(1e-3);
    Step {
        index,
        phase,
        load,
        started,
        ended,
        sent: s.sent,
        ok: s.ok,
        failed: s.failed,
        by_outcome: s.by_outcome.clone(),
        waited_for_slot,
        requests_ran_out: false,
        requests_per_second: s.ok as f64 / seconds,
        tokens_per_second: s.tokens as f64 / seconds,
        ttft: s.ttft,
        between_tokens: s.between_tokens,
        e2e: s.e2e,
        engine: None,
        breaches: Vec::new(),
    }
}

/// Why a step breaks the limits: a failed request (or none sent), the client's p95 time to the
/// first token over `ttft_p95_high`, the engines' p95 time between tokens over `itl_p95_high`
/// (where read: a client sees tokens in bursts, so its own gaps are not judged).
pub fn judge(step: &Step, slo: &Slo) -> Vec<StepBreach> {
    let mut out = Vec::new();
    if step.sent == 0 {
        out.push(StepBreach::NothingSent);
    } else if step.failed > 0 {
        let by_outcome = step.by_outcome.iter().filter(|(k, _)| *k != "ok").map(|(k, v)| (k.clone(), *v)).collect();
        out.push(StepBreach::RequestsFailed { failed: step.failed, sent: step.sent, by_outcome });
    }
    if let (Some(t), Some(limit)) = (step.ttft, slo.ttft_p95_high) {
        if t.p95 > limit {
            out.push(StepBreach::TtftOverLimit { p95_seconds: t.p95, limit_seconds: limit });
        }
    }
    if let (Some(itl), Some(limit)) = (step.engine.as_ref().and_then(|e| e.itl_p95), slo.itl_p95_high) {
        if itl > limit {
            out.push(StepBreach::ItlOverLimit { p95_seconds: itl, limit_seconds: limit });
        }
    }
    out
}

/// The knee: the highest load within the limits below the lowest load that broke them (a noisy
/// good step above a bad one is not the knee), and that lowest bad step. `None` when no step
/// below every bad one passed.
pub fn knee(steps: &[Step]) -> Option<(usize, Option<usize>)> {
    let first_bad = steps.iter().filter(|s| !s.passed()).min_by(|a, b| a.load.total_cmp(&b.load)).map(|s| s.index);
    let ceiling = first_bad.map_or(f64::INFINITY, |i| steps[i].load);
    let good = steps.iter().filter(|s| s.passed() && s.load < ceiling).max_by(|a, b| a.load.total_cmp(&b.load))?;
    Some((good.index, first_bad))
}

/// Which limit bound at the knee, read at the first bad step: the KV cache (usage at its ceiling
/// with a queue, or preemptions), the sequence cap (requests waiting while the running batch
/// stood at the sweep's highest), the token budget (a queue, the batch below its highest, the
/// engines' steps filled with prompt tokens), something else holding a queue (`deferred`), or no
/// queue at the engines at all (`none`: the limit is in front of them, or is their own speed).
/// `None` when the engines were not read at that step.
pub fn bound_at(steps: &[Step], bad: usize) -> Option<Bound> {
    let s = steps.get(bad)?;
    let e = s.engine.as_ref()?;
    e.running_max?;
    let cap = steps.iter().filter_map(|s| s.engine.as_ref()?.running_max).fold(f64::NEG_INFINITY, f64::max);
    let busy = s.by_outcome.iter().filter(|(k, _)| BUSY_STATUSES.iter().any(|b| **k == format!("http_{b}"))).map(|(_, v)| *v).sum();
    let queued = e.waiting_max.is_some_and(|w| w >= 1.0);
    let running = e.running_max.unwrap_or(0.0);
    // Within a request (or 5% of a large cap) of the sweep's highest: a batch turning over reads one below its cap now and then.
    let at_cap = running >= cap - (cap * 0.05).max(1.0);
    let prefill = match (e.prompt_tokens_per_second, e.generation_tokens_per_second) {
        (Some(p), Some(g)) if p + g > 0.0 => Some(p / (p + g)),
        _ => None,
    };
    let limit = if (e.kv_usage_max.is_some_and(|k| k >= KV_CEILING) && queued) || e.preemptions.is_some_and(|p| p > 0.0) {
        LimitKind::KvCache
    } else if !queued {
        LimitKind::None
    } else if at_cap {
        LimitKind::MaxNumSeqs
    } else if prefill.is_some_and(|p| p >= PREFILL_FILLED) {
        LimitKind::MaxNumBatchedTokens
    } else {
        LimitKind::Deferred
    };
    Some(Bound { limit, at_step: bad, running_max: Some(cap), waiting_mean: e.waiting_mean, kv_usage_max: e.kv_usage_max, busy_answers: busy })
}

/// Thresholds from the knee: each the knee's value with `margin` added, a ceiling; where the first
/// bad step broke the limits on that measure, never past the geometric mean of the knee's value and
/// that step's (so that a load past the knee breaks it). A measure the bad step did not break on
/// keeps the margin alone: on a real engine past its sequence cap the queued requests' prefills
/// slow the running batch's decode steps a little, and a ceiling pulled toward that would call
/// the queue a decode fault. A target from the knee's p95 with half the margin, never above its ceiling. The targets
/// are what a latency objective counts requests against (`latency_objective` of them within the
/// target): one at the knee's p95 or above leaves at most 5% of the knee's requests over it, a burn
/// rate of at most 5 against a 99% objective, below the slow and fast burn thresholds, so a load
/// within the knee does not page. The time between tokens comes from the engines where read, else
/// from the client's gaps.
pub fn derive(steps: &[Step], knee: &Knee, name: &str, margin: f64) -> DerivedProfile {
    let k = &steps[knee.step];
    let bad = knee.first_bad.map(|i| &steps[i]);
    let ceiling = |at_knee: Option<f64>, at_bad: Option<f64>| {
        let v = at_knee? * (1.0 + margin);
        Some(match at_bad {
            Some(b) if b > at_knee? => v.min((at_knee? * b).sqrt()),
            _ => v,
        })
    };
    let target = |p95: Option<f64>, high: Option<f64>| {
        let t = p95? * (1.0 + margin / 2.0);
        Some(high.map_or(t, |h| t.min(h)))
    };
    let broke_on = |ttft: bool| {
        bad.filter(|b| b.breaches.iter().any(|x| matches!((x, ttft), (StepBreach::TtftOverLimit { .. }, true) | (StepBreach::ItlOverLimit { .. }, false))))
    };
    let ttft_p95_high = ceiling(k.ttft.map(|t| t.p95), broke_on(true).and_then(|b| b.ttft.map(|t| t.p95)));
    let engine_itl = |s: &Step| s.engine.as_ref().and_then(|e| e.itl_p95);
    let itl_from_engines = engine_itl(k).is_some();
    let (itl_knee, itl_bad) = if itl_from_engines {
        (engine_itl(k), broke_on(false).and_then(engine_itl))
    } else {
        (k.between_tokens.map(|t| t.p95), broke_on(false).and_then(|b| b.between_tokens.map(|t| t.p95)))
    };
    let itl_p95_high = ceiling(itl_knee, itl_bad);
    DerivedProfile {
        name: name.to_string(),
        margin,
        ttft_target: target(k.ttft.map(|t| t.p95), ttft_p95_high),
        ttft_p95_high,
        itl_target: target(itl_knee, itl_p95_high),
        itl_p95_high,
        itl_from_engines,
    }
}

#[cfg(test)]
mod tests;
