//! A load test's result as data: the bounds it ran within, its steps (each an offered load held for
//! a while: what the client measured, what the engines recorded, how it was judged against the
//! profile's limits), the knee (the highest load served within them) and which limit bound there,
//! and the profile derived from the curve. [`crate::loadtest`] fills these in; [`crate::render`]
//! words them. The JSON is their serialization, a stable contract (docs/probe.md).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use super::probe::{NotReadReason, Shape, Spread};
use super::LimitKind;

/// The JSON contract's version: a field removed or changed in meaning raises it.
pub const SCHEMA_VERSION: u32 = 1;

/// What a step's load is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadMode {
    /// A closed loop: N requests always in flight, a new one as each ends (as `vllm bench serve
    /// --max-concurrency`); the rate bound is a ceiling.
    Concurrency,
    /// An open loop: Poisson arrivals at a mean rate a second; the concurrency bound is a ceiling.
    Rate,
}

/// How far the sweep may go: each bound enforced, and printed before the first request and with
/// every result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bounds {
    /// The most requests in flight at once (the highest step in concurrency mode).
    pub max_concurrency: usize,
    /// The most requests started per second (the highest step in rate mode).
    pub max_rate: f64,
    /// The whole sweep's time, waits for the engines' scrapes included; no step starts that could
    /// not end within it, and any request still running at its end is cut.
    #[serde(with = "secs")]
    pub max_duration: Duration,
    /// Requests in all, over every step.
    pub max_requests: usize,
    /// How long each step starts requests (its requests then finish).
    #[serde(with = "secs")]
    pub step: Duration,
    /// Each request's own limit.
    #[serde(with = "secs")]
    pub request_timeout: Duration,
}

/// The limits a step is judged against: the profile's, from the rule pack (and `--rules`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    pub profile: String,
    /// Ceiling on the 95th percentile of the client's time to the first token, seconds.
    pub ttft_p95_high: Option<f64>,
    /// Ceiling on the 95th percentile of the engines' time between tokens, seconds (judged only
    /// where the engines are read: a client sees tokens in bursts).
    pub itl_p95_high: Option<f64>,
}

/// Why a step is where it is in the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Doubling from the first load until a step breaks the limits (or the bound is reached).
    Doubling,
    /// Halving the gap between the last good step and the first bad one.
    Bisection,
}

/// What a dry run shows: the doubling ladder, the bisection steps at most, the worst case.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPlan {
    pub mode: LoadMode,
    /// The doubling steps' loads, in order (the last is the bound).
    pub ladder: Vec<f64>,
    /// Bisection steps at most, after the first bad step.
    pub max_bisections: usize,
    pub worst_case: WorstCase,
}

/// What the sweep can cost the fleet at most, from the bounds: every planned step run in full.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorstCase {
    pub steps: usize,
    /// Seconds: the steps, their drains and the waits for the engines' scrapes, within the bound.
    pub seconds: f64,
    /// Requests, within the bound.
    pub requests: usize,
    /// Tokens (prompt and generated) of those requests, about a token a prompt word.
    pub tokens: u64,
    /// The most requests in flight at once.
    pub concurrency: usize,
}

/// Why a step breaks the limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepBreach {
    /// Requests that did not come back whole.
    RequestsFailed { failed: usize, sent: usize, by_outcome: BTreeMap<String, usize> },
    /// No request could be started.
    NothingSent,
    /// The client's p95 time to the first token over the profile's `ttft_p95_high`.
    TtftOverLimit { p95_seconds: f64, limit_seconds: f64 },
    /// The engines' p95 time between tokens over the profile's `itl_p95_high`.
    ItlOverLimit { p95_seconds: f64, limit_seconds: f64 },
}

/// One engine-side measure of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepMeasure {
    RunningMax,
    WaitingMax,
    WaitingMean,
    KvUsageMax,
    Preemptions,
    TtftP95,
    ItlP95,
    ItlMean,
    GenerationRate,
    PromptRate,
    Finished,
}

impl StepMeasure {
    pub const ALL: [StepMeasure; 11] = [
        StepMeasure::RunningMax,
        StepMeasure::WaitingMax,
        StepMeasure::WaitingMean,
        StepMeasure::KvUsageMax,
        StepMeasure::Preemptions,
        StepMeasure::TtftP95,
        StepMeasure::ItlP95,
        StepMeasure::ItlMean,
        StepMeasure::GenerationRate,
        StepMeasure::PromptRate,
        StepMeasure::Finished,
    ];
}

/// What could not be read for a step, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepNotRead {
    pub measure: StepMeasure,
    pub reason: NotReadReason,
}

/// The engines over a step's minutes, read from Prometheus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepEngine {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// The most requests one engine had running, and waiting, at a scrape in the step.
    pub running_max: Option<f64>,
    pub waiting_max: Option<f64>,
    /// Requests waiting, the step's mean on the engine with the most.
    pub waiting_mean: Option<f64>,
    /// KV-cache usage's highest on any engine (0..1).
    pub kv_usage_max: Option<f64>,
    /// Preemptions over the step, every engine.
    pub preemptions: Option<f64>,
    /// The engines' 95th percentiles (histogram buckets, every engine's summed), seconds.
    pub ttft_p95: Option<f64>,
    pub itl_p95: Option<f64>,
    /// The engines' mean time between tokens (the histogram's sum over its count), seconds.
    pub itl_mean: Option<f64>,
    /// Tokens generated, and prompt tokens taken, per second, every engine.
    pub generation_tokens_per_second: Option<f64>,
    pub prompt_tokens_per_second: Option<f64>,
    /// Requests the engines finished in the step's minutes.
    pub finished: Option<f64>,
    pub not_read: Vec<StepNotRead>,
}

/// One step of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// From 0, in the order run.
    pub index: usize,
    pub phase: Phase,
    /// The offered load: requests in flight (concurrency mode) or a second (rate mode).
    pub load: f64,
    pub started: DateTime<Utc>,
    pub ended: DateTime<Utc>,
    /// Requests started, and of them completed and failed.
    pub sent: usize,
    pub ok: usize,
    pub failed: usize,
    pub by_outcome: BTreeMap<String, usize>,
    /// Requests that found every slot taken at their turn and waited (rate mode: the concurrency
    /// bound held the offered rate back).
    pub waited_for_slot: usize,
    /// The step stopped starting requests because the sweep's request bound ran out.
    pub requests_ran_out: bool,
    /// Completed requests, and their generated tokens, per second of the step.
    pub requests_per_second: f64,
    pub tokens_per_second: f64,
    /// The client's distributions over the completed requests.
    pub ttft: Option<Spread>,
    pub between_tokens: Option<Spread>,
    pub e2e: Option<Spread>,
    /// The engines over the step; `None` without a Prometheus.
    pub engine: Option<StepEngine>,
    /// Why the step breaks the limits; empty when it is within them.
    pub breaches: Vec<StepBreach>,
}

impl Step {
    pub fn passed(&self) -> bool {
        self.breaches.is_empty()
    }
}

/// Why the sweep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The knee was found: a good step next to a bad one, or the bisection steps spent.
    Found,
    /// The first step already broke the limits.
    FirstStepBroke,
    /// Every step up to the load bound was within the limits: the knee is above it.
    LoadBound,
    /// The next step could not end within `max_duration`.
    DurationBound,
    /// The request bound ran out.
    RequestBound,
}

/// The limit that bound at the knee, read at the first bad step above it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bound {
    /// Which limit; [`LimitKind::None`] when the engines had no queue: the limit is in front of
    /// them (a router, a gateway) or is the engines' own speed.
    pub limit: LimitKind,
    /// The step it was read at.
    pub at_step: usize,
    /// The running batch's highest over the sweep (the sequence cap, when it binds).
    pub running_max: Option<f64>,
    pub waiting_mean: Option<f64>,
    pub kv_usage_max: Option<f64>,
    /// The failed requests at that step that were answered busy (HTTP 408, 429, 503).
    pub busy_answers: usize,
}

/// The knee: the highest load served within the limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The step (an index into `steps`) and its load.
    pub step: usize,
    pub load: f64,
    /// The lowest load that broke the limits, when one did.
    pub first_bad: Option<usize>,
    /// Which limit bound there; `None` without a bad step or without the engines read.
    pub bound: Option<Bound>,
}

/// Thresholds derived from the knee for `--profile-out`: the knee's values with a margin, never
/// past halfway (geometrically) to the first bad step's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DerivedProfile {
    pub name: String,
    /// The share added to the knee's values (0.5: half again).
    pub margin: f64,
    /// Seconds; `None` where the knee has no value to derive it from.
    pub ttft_target: Option<f64>,
    pub ttft_p95_high: Option<f64>,
    pub itl_target: Option<f64>,
    pub itl_p95_high: Option<f64>,
    /// Whether the time between tokens came from the engines (else from the client's gaps).
    pub itl_from_engines: bool,
}

/// A whole load test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadtestRun {
    pub schema_version: u32,
    pub target: String,
    pub endpoint: String,
    pub model: String,
    pub mode: LoadMode,
    pub shape: Shape,
    pub bounds: Bounds,
    pub ceilings: Bounds,
    pub slo: Slo,
    /// The Prometheus the engines were read from, without credentials; `None` when not given.
    pub prometheus: Option<String>,
    pub selector: Option<String>,
    pub started: DateTime<Utc>,
    pub ended: DateTime<Utc>,
    pub steps: Vec<Step>,
    pub stop: Stop,
    /// `None` when no step was within the limits.
    pub knee: Option<Knee>,
    pub derived: Option<DerivedProfile>,
}

impl LoadtestRun {
    /// 0 when a knee was found below the bound (or the bound was reached within the limits) and
    /// the engines were read where asked; 1 when no step was within the limits; 3 when the
    /// engines were asked for and a step's could not be read.
    pub fn exit_code(&self) -> u8 {
        if self.knee.is_none() {
            crate::report::EXIT_FINDINGS
        } else if self.prometheus.is_some()
            && self.steps.iter().any(|s| s.engine.as_ref().is_none_or(|e| e.not_read.iter().any(|n| matches!(n.reason, NotReadReason::QueryFailed { .. }))))
        {
            crate::report::EXIT_NO_DATA
        } else {
            crate::report::EXIT_OK
        }
    }

    pub fn total_requests(&self) -> usize {
        self.steps.iter().map(|s| s.sent).sum()
    }
}

/// Durations as seconds (a float) in the JSON.
mod secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let v = f64::deserialize(d)?;
        Duration::try_from_secs_f64(v).map_err(serde::de::Error::custom)
    }
}
