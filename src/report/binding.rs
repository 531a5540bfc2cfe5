//! The path a scope's requests took and what bound it: the time by hop ([`HopSplit`]), what
//! the hops do not explain, and the limit that bound each model ([`Binding`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::*;

/// The time a scope's requests spent in each hop of their path (docs/hops.md), from the means the
/// signals read: the window against the baseline, which hop grew, and which could not be seen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopSplit {
    pub scope: Scope,
    /// The time to the first token as far as the hops seen reach: the router's own wait (where it
    /// is seen) plus the engine's mean time to first token, per request.
    pub first_token: HopValues,
    /// In the order a request goes through them.
    pub hops: Vec<Hop>,
    /// The hop that grew most against the baseline, when one grew past the bar (100 ms and 1.5x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grew: Option<String>,
    /// One sentence: what grew where, what stayed, what could not be seen.
    pub text: String,
}

/// A mean per request in the window and in the baseline, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HopValues {
    #[serde(with = "crate::report::opt_f64")]
    pub window: Option<f64>,
    #[serde(with = "crate::report::opt_f64")]
    pub baseline: Option<f64>,
}

/// The smallest rise of a hop's mean worth naming: a tenth of a second, a fifth of a chat
/// first-token target of 500 ms. Healthy means wander by a few milliseconds between windows.
pub const HOP_GREW_FLOOR_S: f64 = 0.1;
/// ... and the factor it must also rise by (a decode of 8 s that gains 0.2 s did not grow).
pub const HOP_GREW_RATIO: f64 = 1.5;

/// One hop of a request's path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hop {
    /// `router`, `input-processing`, `engine-queue`, `kv-transfer`, `prefill` or `decode`.
    pub hop: String,
    /// Mean seconds per request in the window and the baseline; null where not seen.
    #[serde(with = "crate::report::opt_f64")]
    pub window: Option<f64>,
    #[serde(with = "crate::report::opt_f64")]
    pub baseline: Option<f64>,
    /// Whether the metrics that measure it were in the data for this scope.
    pub seen: bool,
    /// The signals it was read from (`input_processing_mean`, `router_duration_mean` less
    /// `input_processing_mean`, ...), or what it would need when not seen.
    pub from: String,
}

impl Hop {
    /// How much its mean rose against the baseline, where it grew: seen, at least
    /// [`HOP_GREW_FLOOR_S`] more and [`HOP_GREW_RATIO`] times as much.
    pub fn grew_by(&self) -> Option<f64> {
        let (w, b) = (self.window?, self.baseline?);
        let rise = w - b;
        (self.seen && rise >= HOP_GREW_FLOOR_S && (b <= 0.0 || w >= HOP_GREW_RATIO * b)).then_some(rise)
    }
}

/// One scope's numbers behind its healthy core checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Readings {
    pub scope: Scope,
    /// As a finding's evidence: value, baseline, the condition it was held to and whether it held.
    pub evidence: Vec<Evidence>,
}

/// A signal that moved in the direction that hurts, against its baseline's median and spread, for
/// long enough, with no warning or critical finding explaining it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unexplained {
    pub signal: String,
    /// Human name of the signal, e.g. "P95 time to first token".
    pub title: String,
    pub unit: String,
    pub scope: Scope,
    /// `up` or `down`: the direction it moved in, the one that hurts.
    pub direction: String,
    /// The median of its trend points over the stretch that moved.
    #[serde(with = "crate::report::opt_f64")]
    pub value: Option<f64>,
    /// The median of its baseline's trend points.
    #[serde(with = "crate::report::opt_f64")]
    pub baseline: Option<f64>,
    /// `value` over `baseline`; absent when the baseline is 0.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::report::opt_f64")]
    pub ratio: Option<f64>,
    /// The change over the baseline's spread (its median absolute deviation, scaled to a standard
    /// deviation); absent when the baseline did not vary at all.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::report::opt_f64")]
    pub robust_z: Option<f64>,
    /// The last trend point still at the baseline level before the stretch that moved (the
    /// window's start when it moved from there).
    pub onset: DateTime<Utc>,
    /// It had already moved at the window's first point.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_start: bool,
    /// How long it stayed moved, seconds.
    pub duration_seconds: u64,
    /// Still moved at the window's last point.
    pub ongoing: bool,
    /// The PromQL evaluated at every step (over `range_seconds` each).
    pub query: String,
    /// The metric family read.
    pub metric: String,
    /// Read only for this list: no rule reads its family (external prefix-cache hits, ...).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spare: bool,
    pub series: Trend,
}

/// KV-cache usage counted as "at its ceiling": the rules' `kv_usage_high` (90%). vLLM admits a
/// request only when its blocks fit, so usage rarely reads 100%; a queue beside 85% usage is held
/// by something else (the near miss of the scenarios).
pub const KV_CEILING: f64 = 0.9;
/// Generated tokens per second below which an engine with requests counts as producing nothing:
/// the rules' `stall_tokens_per_second`. A CPU engine at light load makes tens per second.
pub const STALL_TOKENS: f64 = 1.0;
/// The share of a step's tokens that must be prompt tokens for the token budget to be what fills
/// the step: decode alone adds one token per running request, so a step filled by decode is the
/// running batch's, not the budget's.
pub const PREFILL_FILLED: f64 = 0.75;

/// What held a scope's requests back at one step of the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitKind {
    /// KV-cache usage at its ceiling with requests waiting or preempted.
    KvCache,
    /// The running batch held at its plateau with requests waiting and KV headroom.
    MaxNumSeqs,
    /// Engine steps at the token budget with requests waiting.
    MaxNumBatchedTokens,
    /// Requests waiting for a reason other than capacity.
    Deferred,
    /// Requests waiting or running while no token is produced.
    Stalled,
    /// No queue.
    None,
}

impl LimitKind {
    pub const ALL: [LimitKind; 6] =
        [LimitKind::KvCache, LimitKind::MaxNumSeqs, LimitKind::MaxNumBatchedTokens, LimitKind::Deferred, LimitKind::Stalled, LimitKind::None];

    /// The name used in JSON (`kv-cache`, `max-num-seqs`, ...).
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::KvCache => "kv-cache",
            LimitKind::MaxNumSeqs => "max-num-seqs",
            LimitKind::MaxNumBatchedTokens => "max-num-batched-tokens",
            LimitKind::Deferred => "deferred",
            LimitKind::Stalled => "stalled",
            LimitKind::None => "none",
        }
    }
}

/// Which limit bound one scope over the window (see [`Report::binding`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Binding {
    /// The model (its grouping labels), with the replica label added for a replica that differs.
    pub scope: Scope,
    /// The limit that held longest among the steps where any limit held; `none` only when none did.
    pub limit: LimitKind,
    /// The share of the window's steps (those with data) during which `limit` held.
    pub share: f64,
    /// Every limit's share of the steps, `none` included (they add up to 1).
    pub shares: BTreeMap<LimitKind, f64>,
    /// How each limit that held was recognised, and each cap inferred (an observed plateau, a
    /// reading of the metrics), keyed by limit.
    pub basis: BTreeMap<LimitKind, String>,
    /// Steps of the window with data, of `step_seconds` each.
    pub steps: usize,
    pub step_seconds: u64,
    /// The scope's state in the steps `limit` held (medians), for the sentence that says it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typical: Option<BindingState>,
}

impl Binding {
    /// The model-level binding of a finding's scope: this binding is for the finding's model (its
    /// grouping labels), not one replica of it.
    pub fn is_model_of(&self, scope: &Scope, replica_label: &str) -> bool {
        !self.scope.contains_key(replica_label) && self.scope.iter().all(|(k, v)| scope.get(k) == Some(v))
    }
}

/// Medians over the steps one limit held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BindingState {
    pub running: f64,
    /// The running batch's plateau (inferred max_num_seqs), when one was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_cap: Option<f64>,
    pub waiting: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_usage: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_tokens_per_second: Option<f64>,
}
