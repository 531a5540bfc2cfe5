//! The report: what a run found, in the shape every renderer reads and the JSON contract exposes.
//!
//! `schema_version` 1 is a public contract for CI pipelines: fields may be added, never renamed or
//! removed without bumping it. Numbers that are not finite (a quantile in the `+Inf` bucket, a ratio
//! of nothing) are written as the strings `"NaN"`, `"+Inf"`, `"-Inf"`, the way Prometheus writes them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 1;

pub mod card;
pub mod loadtest;
pub mod probe;
mod steps;
mod words;
pub use steps::{Answered, Step, StepVerdict, Steps, CHANGED};
pub use words::{caveat_words, hop_seconds, limit_basis, PAIRS as CORRELATION_PAIRS};

/// Labels that identify what a finding is about, e.g. `{model_name="llama"}`. Sorted, so output is stable.
pub type Scope = BTreeMap<String, String>;

/// A scope as plain text, `model_name=llama, engine=1` (in label order), or `all` for the empty
/// scope that stands for every scope. The text formats style theirs (`render::ScopeStyle`).
pub fn scope_text(scope: &Scope) -> String {
    if scope.is_empty() {
        return "all".to_string();
    }
    scope.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(", ")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl TimeRange {
    pub fn duration(&self) -> std::time::Duration {
        (self.end - self.start).to_std().unwrap_or_default()
    }

    /// Whether both ends lie in the years a diagnosis can be about: from the Unix epoch to the end
    /// of 9999 UTC (the last year an RFC 3339 time can name). Windows are checked against this where
    /// they come in (flags, a recording, a baseline file), so the arithmetic on them (a window's
    /// length added to a baseline, a step before a span) stays far inside what a time can hold.
    pub fn is_supported(&self) -> bool {
        let (first, last) = Self::SUPPORTED;
        self.start >= first && self.end <= last && self.start <= self.end
    }

    /// The supported times as errors name them: `1970-01-01 00:00:00 UTC to 9999-12-31 23:59:59 UTC`.
    pub fn supported_text() -> String {
        let (first, last) = Self::SUPPORTED;
        format!("{first} to {last}")
    }

    /// The first and last supported times, for [`TimeRange::is_supported`] and its errors.
    pub const SUPPORTED: (DateTime<Utc>, DateTime<Utc>) = (
        DateTime::UNIX_EPOCH,
        match DateTime::from_timestamp(253_402_300_799, 0) {
            Some(t) => t,
            None => DateTime::UNIX_EPOCH,
        },
    );
}

/// Where a run's series came from. It is written as its name in the JSON and in recordings
/// (`prometheus`, `scrape`, `rules-test`), and a name this build does not know reads back as
/// [`SourceKind::Other`], unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum SourceKind {
    /// Any Prometheus-compatible HTTP API (live or replayed from a recording of one).
    Prometheus,
    /// `--scrape`: /metrics pages read by the run itself and evaluated locally.
    Scrape,
    /// `rules test`: a test file's input series.
    RulesTest,
    /// Any other name (series evaluated locally by tests and tools, or a newer recording).
    Other(String),
}

impl SourceKind {
    pub fn as_str(&self) -> &str {
        match self {
            SourceKind::Prometheus => "prometheus",
            SourceKind::Scrape => "scrape",
            SourceKind::RulesTest => "rules-test",
            SourceKind::Other(s) => s,
        }
    }
}

impl From<String> for SourceKind {
    fn from(s: String) -> SourceKind {
        match s.as_str() {
            "prometheus" => SourceKind::Prometheus,
            "scrape" => SourceKind::Scrape,
            "rules-test" => SourceKind::RulesTest,
            _ => SourceKind::Other(s),
        }
    }
}

impl From<&str> for SourceKind {
    fn from(s: &str) -> SourceKind {
        SourceKind::from(s.to_string())
    }
}

impl From<SourceKind> for String {
    fn from(k: SourceKind) -> String {
        k.as_str().to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceInfo {
    pub kind: SourceKind,
    /// Base URL with any credentials removed.
    pub url: String,
    /// The extra label matchers applied to every query, as PromQL (`namespace="prod"`), or empty.
    #[serde(default)]
    pub selector: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u32,
    pub window: TimeRange,
    pub baseline: TimeRange,
    pub source: SourceInfo,
    /// Which vLLM metric names were found and used.
    pub metrics: MetricsInfo,
    /// Best first.
    pub findings: Vec<Finding>,
    /// Rule and scope pairs that were evaluated and did not match.
    pub healthy: Vec<Checked>,
    pub not_evaluated: Vec<NotEvaluated>,
    /// Rules switched off in the configuration file: not evaluated, by choice rather than for lack of
    /// data, so neither healthy nor "not evaluated". Sorted ids; omitted when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<String>,
    /// Warnings from the data source (with HTTP 200) and from vllm-diag itself.
    pub warnings: Vec<String>,
    /// What the metrics cannot show about rules judged healthy (their `[rule.caveat]`), one
    /// sentence per rule naming its scopes. Left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caveats: Vec<String>,
    pub stats: RunStats,
    /// How much of the rule pack could be judged on this data.
    #[serde(default)]
    pub coverage: Coverage,
    /// What changed in the baseline and the window, read from the metrics (restarts, targets down
    /// and up, replicas and models appearing or vanishing, configuration and version changes,
    /// rollouts, GPU errors), oldest first.
    #[serde(default)]
    pub events: Vec<Event>,
    /// `check --since deploy`: the event taken as the deploy (the start of the last rollout,
    /// restart or configuration-change wave in the selected scope). Omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<Event>,
    /// Which limit bound each model's scheduler over the window (and each replica's, where one
    /// differs from its model), read from its running, waiting and KV gauges at every trend step
    /// (docs/how-it-decides.md, "Which limit binds"). Omitted when the gauges were not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub binding: Vec<Binding>,
    /// What moved beyond the rules: signals whose trend left their baseline's range in the
    /// direction that hurts, for long enough, and that no warning or critical finding explains
    /// (docs/how-it-decides.md, "What else moved"). Largest change first; always present.
    #[serde(default)]
    pub unexplained: Vec<Unexplained>,
    /// Where the time users wait went, hop by hop, per scope: the router, input processing, the
    /// engine's queue, the KV transfer, prefill and decode, each as a mean per request in the window
    /// and the baseline, which hop grew and which could not be seen (docs/hops.md). Always present
    /// (empty when no scope had a first-token histogram).
    #[serde(default)]
    pub hops: Vec<HopSplit>,
    /// The latency profile whose targets and ceilings the rules used (`chat` unless `--profile`
    /// named another, or the replayed recording was judged with another). Absent from reports of
    /// runs that did not say (a library caller, an older report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// What the run adjusted to the window without it being a problem (signals whose own range is
    /// longer than a short window, read over the window instead): `-v` says it, the channel formats
    /// do not. Left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// The numbers behind each model's healthy core checks, each against its line: what an OK
    /// rests on (`-v` prints them). Left out when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readings: Vec<Readings>,
    /// `explain --probe URL`, `check --probe URL`: the requests sent through the path users take
    /// just before the diagnosis, what they met, the engines over the same minutes, and whether the
    /// probe fails the run (docs/probe.md). Omitted otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<probe::ProbeEvidence>,
}

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

/// What kind of change an [`Event`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A replica's process started again (its start time moved, or its vLLM counters reset).
    Restart,
    /// A target stopped answering its scrapes (`up` 0).
    TargetDown,
    /// A target that was down answers again.
    TargetUp,
    /// A replica's series appeared after the start of the data.
    ReplicaAdded,
    /// A replica's series stopped: it left service discovery.
    ReplicaRemoved,
    /// `vllm:cache_config_info` changed its labels (`num_gpu_blocks`, `block_size`, ...).
    ConfigChange,
    /// The image serving a model changed (kube-state-metrics' `kube_pod_container_info`).
    VersionChange,
    /// A model's first replica appeared.
    ModelAdded,
    /// A model's last replica vanished.
    ModelRemoved,
    /// A Deployment's generation moved (kube-state-metrics): a new revision was rolled out.
    Rollout,
    /// A GPU reported an XID error (DCGM).
    GpuError,
}

impl EventKind {
    pub const ALL: [EventKind; 11] = [
        EventKind::Restart,
        EventKind::TargetDown,
        EventKind::TargetUp,
        EventKind::ReplicaAdded,
        EventKind::ReplicaRemoved,
        EventKind::ConfigChange,
        EventKind::VersionChange,
        EventKind::ModelAdded,
        EventKind::ModelRemoved,
        EventKind::Rollout,
        EventKind::GpuError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Restart => "restart",
            EventKind::TargetDown => "target-down",
            EventKind::TargetUp => "target-up",
            EventKind::ReplicaAdded => "replica-added",
            EventKind::ReplicaRemoved => "replica-removed",
            EventKind::ConfigChange => "config-change",
            EventKind::VersionChange => "version-change",
            EventKind::ModelAdded => "model-added",
            EventKind::ModelRemoved => "model-removed",
            EventKind::Rollout => "rollout",
            EventKind::GpuError => "gpu-error",
        }
    }

    /// The kind as a sentence names it: `a configuration change`, `a restart` (`target-up` and
    /// `model-removed` by their names).
    pub fn phrase(self) -> &'static str {
        match self {
            EventKind::ConfigChange => "a configuration change",
            EventKind::VersionChange => "a version change",
            EventKind::Rollout => "a rollout",
            EventKind::GpuError => "a GPU error",
            EventKind::ReplicaRemoved => "a scale-down",
            EventKind::ReplicaAdded => "a scale-up",
            EventKind::ModelAdded => "the model's first replicas came up",
            EventKind::Restart => "a restart",
            EventKind::TargetDown => "targets going down",
            EventKind::TargetUp | EventKind::ModelRemoved => self.as_str(),
        }
    }

    /// Whether this kind marks a deploy (`check --since deploy` starts at the last one).
    pub fn is_deploy(self) -> bool {
        matches!(self, EventKind::Rollout | EventKind::Restart | EventKind::ConfigChange | EventKind::VersionChange)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change seen in the metrics. Changes of several replicas of one scope close together are one
/// event ("2 of 3 replicas restarted"), dated by the first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub time: DateTime<Utc>,
    pub kind: EventKind,
    /// The grouping labels of the model it happened to (`{}` when it cannot be tied to one).
    pub scope: Scope,
    /// One line, e.g. "2 of 3 replicas restarted" or "num_gpu_blocks 2000 -> 900".
    pub detail: String,
    /// The replicas it happened to, by the replica label (sorted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<String>,
    /// How many replicas the scope had just before (for "2 of 3").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<usize>,
    /// The last of the changes merged into this event, when they spread over time (a rolling restart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
    /// For configuration and version changes: the labels that changed, before and after.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub before: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub after: BTreeMap<String, String>,
}

impl Event {
    /// The step a finding that began after this event takes first (explain puts it at the head of
    /// its steps).
    pub fn first_step(&self) -> String {
        self.step_naming_it().unwrap_or_else(|| format!("Start with what changed at {}: {} ({}).", self.clock(), self.kind, self.detail))
    }

    /// The first step of a kind whose runbook starts at the change itself (a configuration change,
    /// a rollout, a GPU error, a scale-down, a restart), which names the change so that a report
    /// need not say it again; `None` for the others.
    pub fn step_naming_it(&self) -> Option<String> {
        let (at, d) = (self.clock(), &self.detail);
        Some(match self.kind {
            EventKind::ConfigChange => {
                format!("Start with the configuration change at {at} ({d}): roll it back, or compare it with the last healthy configuration, before tuning anything else.")
            }
            EventKind::VersionChange | EventKind::Rollout => format!(
                "Start with the rollout at {at} ({d}): compare the new release with the previous one (image, engine flags, model revision) and roll back if the regression holds."
            ),
            EventKind::GpuError => format!("Start with the GPU error at {at} ({d}): cordon the node and check the driver log for the XID before anything else."),
            EventKind::ReplicaRemoved => format!("Start with the scale-down at {at} ({d}): restore the capacity, or check what removed it (autoscaler, eviction, failed pods)."),
            EventKind::Restart => format!(
                "Start with the restart at {at} ({d}): find out why the replicas restarted (deploy, OOM kill, crash) and whether they came back with the same flags and model."
            ),
            _ => return None,
        })
    }

    fn clock(&self) -> String {
        self.time.format("%H:%M:%S UTC").to_string()
    }
}

impl Finding {
    /// Whether the finding's first step is the one that names the change it began after
    /// ([`Event::step_naming_it`]), so that the change need not be said again.
    pub fn first_step_names_its_change(&self) -> bool {
        matches!(self.steps.first(), Some(Step::Change { event }) if event.step_naming_it().is_some())
    }
}

/// An event a finding began shortly after, on the same scope: the change to look at first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrecededBy {
    pub event: Event,
    /// Seconds from the event to the finding's onset (may be slightly negative: both are dated to
    /// within a step).
    pub lead_seconds: i64,
    /// The sentence the reports print, e.g. "began 2 min after 2 of 3 replicas restarted (config
    /// change: num_gpu_blocks 2000 -> 900)".
    pub text: String,
}

/// How much of the rule pack the data allowed to judge. A rule counts as evaluated when at least
/// one scope got a verdict (finding or healthy) from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Rules in the pack (without those disabled in the configuration).
    pub rules: usize,
    /// Rules that gave a verdict for at least one scope.
    pub evaluated: usize,
    /// Of those, rules that decided through their stand-in signals because their own were missing.
    pub stood_in: usize,
    /// The runbook's core rules (overload, slow prefill, slow decode, severe saturation, KV-cache
    /// pressure) that could not be evaluated, for want of a metric or because a query failed. When
    /// this is not empty the run cannot pass: exit code 3 unless a finding reaches `--fail-on`
    /// (exit 1), and `check` says NOT EVALUATED.
    pub core_not_evaluated: Vec<String>,
    /// Targets named with `--scrape` that answered none of the scrapes, with why. Nothing they
    /// serve is in the diagnosis (not even whether they are down: with no series they cannot be
    /// tied to a model), so the run cannot pass either. Left out of the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread_targets: Vec<String>,
}

impl Report {
    /// Core runbook rules could not be judged: whatever else was found, the run cannot pass.
    pub fn core_missing(&self) -> bool {
        !self.coverage.core_not_evaluated.is_empty()
    }

    /// Something the run was asked to look at could not be seen: core rules not judged, or scrape
    /// targets that answered nothing. The run cannot pass.
    pub fn gaps(&self) -> bool {
        self.core_missing() || !self.coverage.unread_targets.is_empty()
    }

    /// No warning or critical finding, yet [`Report::gaps`]: the report must not read as an
    /// all-clear.
    pub fn incomplete(&self) -> bool {
        self.gaps() && !self.findings.iter().any(|f| f.severity >= Severity::Warning)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsInfo {
    /// `v1`, `v0`, `mixed` or `unknown`: which generation of vLLM metric names the window holds.
    pub generation: String,
    /// The scopes seen in the window (e.g. every model_name), sorted.
    pub scopes: Vec<Scope>,
    /// For each signal, the metric name it was computed from in the window (and the baseline when it differs).
    pub names_used: BTreeMap<String, String>,
    /// How many distinct values the fleet's labels (`namespace`, `pod`, `instance`, the grouping
    /// labels) take on the window's vLLM series; a label no series carries counts 0. Omitted when
    /// the lookup did not answer.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, usize>,
    /// The label that tells replicas apart (`--replica-label`).
    #[serde(default = "default_replica_label")]
    pub replica_label: String,
}

fn default_replica_label() -> String {
    "instance".into()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    pub queries: usize,
    pub rules_evaluated: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub rule: String,
    pub title: String,
    pub severity: Severity,
    /// Strength of evidence: how far past their thresholds the signals are. Higher is stronger.
    pub score: f64,
    pub scope: Scope,
    /// One sentence: what this means.
    pub summary: String,
    pub evidence: Vec<Evidence>,
    /// The runbook's next steps, as data: in the JSON, `steps` (their words) and `step_detail`
    /// (each step's data and whether the metrics answered it).
    #[serde(flatten)]
    pub steps: Steps,
    #[serde(default)]
    pub references: Vec<String>,
    /// Other rules that matched the same scope but explain less (most specific first wins).
    pub also_consistent: Vec<AlsoConsistent>,
    /// The rule's own severity, present only when a finding it absorbed raised `severity` (a
    /// finding is as severe as the worst one it explains), so the raise can be told from the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised_from: Option<Severity>,
    /// Settings computed from the data, with their arithmetic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommendations: Vec<Recommendation>,
    /// Levers the evidence rules out (more KV memory when the cache never passed 60%, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wont_help: Vec<WontHelp>,
    /// Which replicas show the problem, when it could be told per replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Replicas>,
    /// Present when the rule decided without its primary signals (their metrics missing from the
    /// data), through its stand-in conditions: a lower-confidence finding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stood_in: Option<StoodIn>,
    /// Present when the conditions held over the window's last minutes but not over the whole
    /// window: an episode that began late in a long window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recent: Option<RecentRead>,
    /// When the problem began: the time the leading signal (`onset_signal`) left its baseline level,
    /// its last point still at that level. `null` when the problem was already there at the
    /// window's start (then `onset_signal` is set) or when no trend could date it (then it is not).
    #[serde(default)]
    pub onset: Option<DateTime<Utc>>,
    /// The evidence signal whose trend dated the onset; absent when none could.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onset_signal: Option<String>,
    /// When the problem was over: for one that began in the window, `onset_signal`'s trend came
    /// back to its baseline level and stayed there to the window's end (for at least a fifth of the
    /// window); for one already there at the window's start (whose baseline may hold the same
    /// problem), the trend came back within every line its limits draw, by a tenth of the line, and
    /// stayed there as long. This is the first point back less the trend's range, which each point
    /// aggregates (not before the window's first point). Absent while the problem goes on at the
    /// window's end, or when no trend could date the problem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<DateTime<Utc>>,
    /// The change this finding began shortly after, on its scope (see [`PrecededBy`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preceded_by: Option<PrecededBy>,
    /// Present when the finding is a replica's cold start: slow for its first minutes after it
    /// (re)started, then as fast as its peers. Such a finding is info, not a regression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_start: Option<ColdStart>,
    /// Pairs of signals whose trends moved together on this scope (KV
    /// usage and TTFT, waiting requests and TTFT, prompt throughput and ITL), for a finding whose
    /// evidence reads either of them. Omitted when none did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub correlations: Vec<Correlation>,
    /// For a finding that names one replica (`replica-outlier`, `slow-decode` on one replica): why
    /// that replica differs from its peers, its load, its configuration or (otherwise) its hardware.
    /// Absent where the replica's and its peers' running batches could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_cause: Option<ReplicaCause>,
    /// For a GPU finding: the DCGM clocks-event reasons its GPUs reported in the window, decoded
    /// from the bitmask, each with the share of the window's samples it was set in (absent when
    /// none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_reasons: Vec<GpuReason>,
}

/// One DCGM clocks-event reason a GPU reported (NVML's `nvmlClocksEventReason*` bits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuReason {
    pub reason: GpuReasonKind,
    /// The bit, as DCGM's bitmask carries it (`0x40`).
    pub bit: String,
    /// Whether the tool counts it as a fault (thermal, hardware slowdown, power brake) rather than
    /// the GPU working at its limit (the power cap).
    pub fault: bool,
    /// Share of the window's samples with the bit set, on the model's worst GPU (0..1).
    pub share: f64,
}

/// The clocks-event reasons vllm-diag reads (the settings 0x2, 0x10 and 0x100 are never faults and
/// are not reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuReasonKind {
    SwPowerCap,
    HwSlowdown,
    SwThermalSlowdown,
    HwThermalSlowdown,
    HwPowerBrake,
}

/// Why the replica a finding names differs from its peers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaCause {
    pub kind: ReplicaCauseKind,
    /// The replica, by the replica label.
    pub replica: String,
    /// Its running batch (the median over the window's steps) and its peers' median of theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers_running: Option<f64>,
    /// Its P95 inter-token latency over its peers' median, when the replica comparison read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub itl_factor: Option<f64>,
    /// `config`: the setting that differs, its value on this replica and on its peers (inferred from
    /// the running batch's plateau; the peers' as the most they ran at once when they never met a cap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setting: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peers_value: Option<f64>,
    /// Whether `peers_value` is a cap the peers were held at (true) or only the most they ran at
    /// once, a floor under their cap (false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub peers_capped: bool,
    /// `config`: requests waiting on the replica while its cap held them (the median).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<f64>,
    /// One line for the reports.
    pub text: String,
}

/// `load`: it runs a larger batch than its peers and decodes slower with it (balance or scale);
/// `config`: its own limit holds it while its peers' do not (align the setting); `hardware`:
/// neither explains it (check and replace the replica).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplicaCauseKind {
    Load,
    Config,
    Hardware,
}

impl ReplicaCauseKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaCauseKind::Load => "load",
            ReplicaCauseKind::Config => "config",
            ReplicaCauseKind::Hardware => "hardware",
        }
    }
}

/// Two signals' trends moving together over the baseline and the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Correlation {
    /// The signal taken as the cause (`kv_usage_avg`) ...
    pub cause: String,
    /// ... and the one it would raise (`ttft_p95`).
    pub effect: String,
    /// Pearson's coefficient over the points both trends have.
    pub coefficient: f64,
    pub points: usize,
    /// The finding reads the cause: the correlation supports it. False: the finding reads only the
    /// effect, and the correlation points at another cause.
    pub supports: bool,
    /// One line for the reports.
    pub text: String,
}

/// A replica slow for its first minutes after a (re)start and then as fast as its peers (or still
/// in its first minutes at the window's end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColdStart {
    /// The replica, by the replica label.
    pub replica: String,
    /// When it (re)started: the event's time.
    pub started: DateTime<Utc>,
    /// When it was as fast as its peers again; absent while it was still slow at the window's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm: Option<DateTime<Utc>>,
    /// Seconds from `started` to `warm` (to the window's end while still warming up).
    pub warm_up_seconds: i64,
    /// The longest a slowdown after a start may last and still be a cold start (`cold_start_warm_up`).
    pub limit_seconds: i64,
    /// Its largest mean TTFT and ITL over its peers' (or over its own before the start) while slow.
    pub peak_ttft_ratio: f64,
    pub peak_itl_ratio: f64,
    /// Measured against its peers (true) or, with none, against its own level before the start.
    #[serde(default)]
    pub against_peers: bool,
    /// The factor over that reference from which a point was slow (`replica_outlier_high`).
    #[serde(default)]
    pub slow_factor: f64,
    /// One line for the reports, worded from the fields above ([`ColdStart::worded`]).
    pub text: String,
}

#[cfg(test)]
impl Finding {
    /// A finding of `rule` on `scope` and nothing more, for a test to fill in what it is about.
    pub fn bare(rule: &str, severity: Severity, scope: Scope) -> Finding {
        Finding {
            rule: rule.into(),
            title: String::new(),
            severity,
            score: 1.0,
            scope,
            summary: String::new(),
            evidence: vec![],
            steps: Steps::default(),
            references: vec![],
            also_consistent: vec![],
            raised_from: None,
            recommendations: vec![],
            wont_help: vec![],
            replicas: None,
            stood_in: None,
            recent: None,
            onset: None,
            onset_signal: None,
            ended: None,
            preceded_by: None,
            cold_start: None,
            replica_cause: None,
            gpu_reasons: Vec::new(),
            correlations: Vec::new(),
        }
    }
}

impl Finding {
    /// Whether the problem was already there at the window's start (`onset` null with a signal).
    pub fn present_before_window(&self) -> bool {
        self.onset.is_none() && self.onset_signal.is_some()
    }
}

/// How a finding was reached over the window's last minutes alone (a rule with `recent = true`
/// whose conditions did not hold over the whole window).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecentRead {
    /// How long before the window's end the recent readings start.
    pub range_seconds: u64,
    /// The signals read there instead of over the whole window (their baselines are unchanged).
    pub signals: Vec<String>,
}

/// How a finding was reached without its primary signals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoodIn {
    /// The primary signals whose metrics were missing in the window.
    pub missing: Vec<String>,
    /// The signals that decided instead.
    pub signals: Vec<String>,
}

/// An experiment card: a setting that is the lever, from what to what, computed from the window
/// with its arithmetic, its trade-off and how far the window's last minutes bear it out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recommendation {
    /// The engine setting, e.g. `max_num_seqs`.
    pub setting: String,
    pub value: String,
    /// How the value was computed, with the numbers used.
    pub arithmetic: String,
    pub caveat: String,
    /// The command-line flag (or `replicas`), e.g. `--max-num-seqs`.
    #[serde(default)]
    pub flag: String,
    /// Its current value as the data shows it, or `unknown` (vLLM does not export every setting).
    #[serde(default)]
    pub from: String,
    /// The value to try (`value`, with its unit where it has one).
    #[serde(default)]
    pub to: String,
    /// What the change costs, in one line.
    #[serde(default)]
    pub tradeoff: String,
    #[serde(default)]
    pub confidence: Confidence,
}

/// Whether the whole window and its last minutes agree on what the card is sized from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confidence {
    /// `high` (both agree), `medium` (only one of them could be read or showed it, the last minutes
    /// being the one that did), `low` (the whole window showed it, its last minutes no longer did).
    pub level: ConfidenceLevel,
    /// The reads behind the level, e.g. `preemptions in 96.8% of the window and 100% of its last 5 min`.
    pub basis: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfidenceLevel {
    High,
    #[default]
    Medium,
    Low,
}

impl ConfidenceLevel {
    pub fn as_str(&self) -> &'static str {
        match self {
            ConfidenceLevel::High => "high",
            ConfidenceLevel::Medium => "medium",
            ConfidenceLevel::Low => "low",
        }
    }
}

/// A lever the evidence rules out, and why.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WontHelp {
    /// What would not help, e.g. `more KV memory`.
    pub lever: String,
    /// The flag it would be, e.g. `--gpu-memory-utilization`.
    pub flag: String,
    /// The reading that rules it out, with its numbers.
    pub why: String,
    /// The readings it was worded from (absent in a report read back from JSON).
    #[serde(skip)]
    pub ruled: Option<card::RuledOut>,
}

/// Equal when they read the same: a report read back from JSON has the words, not the readings.
impl PartialEq for WontHelp {
    fn eq(&self, other: &WontHelp) -> bool {
        (&self.lever, &self.flag, &self.why) == (&other.lever, &other.flag, &other.why)
    }
}

/// "3 of 8 replicas": which of the scope's replicas cross the finding's first threshold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replicas {
    /// The label that names a replica (`instance`).
    pub label: String,
    pub affected: Vec<String>,
    pub total: usize,
    /// The signal and limit used to decide.
    pub signal: String,
    pub limit: String,
    /// Why the breakdown could not be made (its answer was damaged or missing): then `affected`
    /// is empty and `total` 0, and which replicas are affected is not evaluated, never left unsaid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_evaluated: Option<String>,
}

/// Why a finding's per-replica breakdown could not be made.
#[derive(Debug, Clone, PartialEq)]
pub enum Unread {
    /// The answer was not an instant vector.
    NotAVector,
    /// The query failed, for this reason (the source's).
    Failed(String),
    /// No answer came back for it.
    NotAnswered,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlsoConsistent {
    pub rule: String,
    pub title: String,
    pub severity: Severity,
    pub score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    pub signal: String,
    /// Human name of the signal, e.g. "P95 time to first token".
    pub title: String,
    /// `seconds`, `ratio`, `per_second`, `tokens_per_second`, `requests`, `tokens`, `count`.
    pub unit: String,
    #[serde(with = "crate::report::opt_f64")]
    pub value: Option<f64>,
    #[serde(with = "crate::report::opt_f64")]
    pub baseline: Option<f64>,
    /// The condition this signal was held to, as written in the rule (`> 2x baseline or > 3s`).
    /// Kept in structure ([`Threshold`]); the JSON has its text.
    pub threshold: Threshold,
    /// Whether that condition held.
    pub passed: bool,
    /// The exact PromQL the window value came from (the baseline query is the same text at the baseline's end).
    pub query: String,
    /// The metric name the signal was computed from.
    pub metric: String,
    /// Set when a quantile rests on very few observations.
    #[serde(default)]
    pub low_confidence: bool,
    /// For quantiles: how many observations the window holds.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "crate::report::opt_f64")]
    pub observations: Option<f64>,
    /// The numeric lines this signal was compared with, in its unit (`3` for `> 3s`, 2x the baseline
    /// value for `>= 2x baseline`), for drawing thresholds on charts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<Limit>,
    /// The signal over time across the baseline and the window (for sparklines and charts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Trend>,
    /// For a quantile in its histogram's first or `+Inf` bucket: only a bound is known
    /// (`{"below": 0.3}`: under 300 ms; `{"above": 80}`: over 80 s), whatever `value` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_bound: Option<Bound>,
    /// The same for the baseline value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_bound: Option<Bound>,
    /// The window and baseline quantiles lie in the same histogram bucket: they cannot be told
    /// apart, so no change between them is claimed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub same_bucket: bool,
}

#[cfg(test)]
impl Evidence {
    /// For tests: evidence of `signal` (a ratio) that held, with `value`, and nothing else.
    pub fn held(signal: &str, value: Option<f64>) -> Evidence {
        Evidence {
            signal: signal.into(),
            title: String::new(),
            unit: "ratio".into(),
            value,
            baseline: None,
            threshold: Threshold::default(),
            passed: true,
            query: String::new(),
            metric: String::new(),
            low_confidence: false,
            observations: None,
            limits: vec![],
            series: None,
            value_bound: None,
            baseline_bound: None,
            same_bucket: false,
        }
    }
}

/// A rule's condition as it bears on one evidence signal, in structure: one [`Term`] per line of
/// the rule that reads the signal (all of them must hold). `rules::eval` builds it; its text (the
/// JSON's `threshold`, `Display`) writes the other signals a group reads as `(see a, b)`:
/// `<= 3 s and (< 1.5x baseline or (see b))`, lines joined by `; `. The renderers spell it out from
/// the structure (`render::condition`), never from the text. Read back from JSON, a threshold is
/// its text, kept as one [`Term::Text`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Threshold {
    pub lines: Vec<Term>,
}

/// One part of a [`Threshold`].
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// A comparison on the signal in its unit (`> 3 s`, `>= 2x baseline`), or a condition kept as
    /// written (read back from JSON, or set by hand).
    Text(String),
    /// `not (...)`.
    Not(Box<Term>),
    /// An `and` (`all`) or an `or` of the signal's own parts, with the other signals the same group
    /// reads (`see`, each once, in the order the rule names them; empty when there are none).
    Group { all: bool, parts: Vec<Term>, see: Vec<String> },
}

impl Term {
    /// The word joining a group's parts: ` and ` or ` or `.
    pub fn joiner(all: bool) -> &'static str {
        if all {
            " and "
        } else {
            " or "
        }
    }

    /// The term as the JSON writes it; `top` for a whole line or what `not` negates (no parentheses
    /// around a group there).
    pub fn text(&self, top: bool) -> String {
        match self {
            Term::Text(s) => s.clone(),
            Term::Not(x) => format!("not ({})", x.text(true)),
            Term::Group { all, parts, see } => {
                let mut items: Vec<String> = parts.iter().map(|p| p.text(false)).collect();
                if !see.is_empty() {
                    items.push(format!("(see {})", see.join(", ")));
                }
                let inner = items.join(Term::joiner(*all));
                if top || items.len() == 1 {
                    inner
                } else {
                    format!("({inner})")
                }
            }
        }
    }
}

impl Threshold {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.lines.iter().map(|t| t.text(true)).collect::<Vec<_>>().join("; "))
    }
}

impl From<String> for Threshold {
    /// A threshold kept as written (empty text: none).
    fn from(text: String) -> Threshold {
        Threshold { lines: if text.is_empty() { Vec::new() } else { vec![Term::Text(text)] } }
    }
}

impl From<&str> for Threshold {
    fn from(text: &str) -> Threshold {
        Threshold::from(text.to_string())
    }
}

impl PartialEq<&str> for Threshold {
    fn eq(&self, other: &&str) -> bool {
        // A threshold is worded by its Display; comparing the words is the comparison (tests).
        let words = self.to_string();
        words.as_str() == *other
    }
}

impl Serialize for Threshold {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Threshold, D::Error> {
        String::deserialize(d).map(Threshold::from)
    }
}

/// What is known of a quantile that lies in the first or the last (`+Inf`) histogram bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Under the first bucket's bound.
    Below(f64),
    /// Over the largest finite bound.
    Above(f64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "LimitDoc", into = "LimitDoc")]
pub struct Limit {
    /// The comparison as written for this signal, e.g. `> 3 s` or `>= 2x baseline`.
    pub label: String,
    pub value: f64,
    /// Which side of `value` is past the line (not in the JSON, whose `label` says it in words).
    pub side: LimitSide,
}

/// Which side of a [`Limit`] is past it, and whether the line itself is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSide {
    Above,
    AtOrAbove,
    Below,
    AtOrBelow,
}

impl LimitSide {
    /// Whether the problem lies above the line (a latency up) rather than below it (a hit ratio down).
    pub fn is_above(self) -> bool {
        matches!(self, LimitSide::Above | LimitSide::AtOrAbove)
    }

    pub fn inclusive(self) -> bool {
        matches!(self, LimitSide::AtOrAbove | LimitSide::AtOrBelow)
    }
}

impl Limit {
    /// Whether `value` is past this line.
    pub fn crossed_by(&self, value: Option<f64>) -> bool {
        let sign = if self.side.is_above() { 1.0 } else { -1.0 };
        value.is_some_and(|v| sign * (v - self.value) > 0.0 || (self.side.inclusive() && v == self.value))
    }
}

/// A limit as the JSON contract has it: its words and its value. Read back, the side is the
/// label's leading operator (`>=`, `<`, ...; `>` when it has none), the one place a limit's words
/// are read, at the document's edge.
#[derive(Serialize, Deserialize)]
struct LimitDoc {
    label: String,
    value: f64,
}

impl From<LimitDoc> for Limit {
    fn from(d: LimitDoc) -> Limit {
        let l = d.label.trim_start();
        let side = match (l.starts_with('<'), l.starts_with(">=") || l.starts_with("<=")) {
            (true, true) => LimitSide::AtOrBelow,
            (true, false) => LimitSide::Below,
            (false, true) => LimitSide::AtOrAbove,
            (false, false) => LimitSide::Above,
        };
        Limit { label: d.label, value: d.value, side }
    }
}

impl From<Limit> for LimitDoc {
    fn from(l: Limit) -> LimitDoc {
        LimitDoc { label: l.label, value: l.value }
    }
}

/// A signal's course over both windows, computed over short sub-ranges (`range_seconds`) every
/// `step_seconds`. Points are `[unix seconds, value]`; points without a finite value are left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    pub step_seconds: u64,
    pub range_seconds: u64,
    /// The PromQL evaluated at every step.
    pub query: String,
    pub baseline: Vec<(f64, f64)>,
    pub window: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Checked {
    pub rule: String,
    pub scope: Scope,
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NotEvaluated {
    pub rule: String,
    pub scope: Scope,
    /// Why, in structure ([`Reasons`]); the JSON has its text, the reasons joined by `; `.
    pub reason: Reasons,
}

/// The warnings a run collects as its stages find them (from the data source, with HTTP 200, and
/// from vllm-diag itself), in the order found. The report takes them once, at the end of the run:
/// [`Warnings::into_report`], each once, where it first appeared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Warnings(Vec<String>);

impl Warnings {
    pub fn push(&mut self, warning: String) {
        self.0.push(warning);
    }

    /// For [`Report::warnings`]: each warning once, where it first appeared.
    pub fn into_report(self) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        self.0.into_iter().filter(|w| seen.insert(w.clone())).collect()
    }

    /// Every warning in the order found, repeats kept.
    pub fn into_vec(self) -> Vec<String> {
        self.0
    }
}

impl Extend<String> for Warnings {
    fn extend<I: IntoIterator<Item = String>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl std::ops::Deref for Warnings {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.0
    }
}

/// Which of the two windows a reason is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Window,
    Baseline,
}

impl Side {
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Window => "window",
            Side::Baseline => "baseline",
        }
    }
}

/// What kind of failure kept a query from answering (its words say the rest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// vllm-diag stopped waiting, or the server gave up on the query.
    TimedOut,
    /// The data source could not be reached.
    Unreachable,
    /// An HTTP status with a body that is not an API answer (`answered HTTP 503`).
    Http,
    /// The server refused the query (`bad_data`, `execution`).
    Rejected,
    /// An answer that could not be read.
    Unreadable,
    /// A replayed recording holds no answer for the query.
    NotRecorded,
    /// No answer came back for it (the run ended first).
    NotAnswered,
    /// The replicas' histograms disagree on their bucket bounds, so a bound cannot be read.
    BucketsDiffer,
    /// The query could not be written for the data found.
    Unplannable,
    /// Anything else: the request itself failed on the way (`request to ... failed`).
    Other,
}

/// A query that gave no answer to read: its kind, and its words (`timed out`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryFailure {
    pub kind: FailureKind,
    pub text: String,
}

impl QueryFailure {
    pub fn new(kind: FailureKind, text: impl Into<String>) -> QueryFailure {
        QueryFailure { kind, text: text.into() }
    }
}

/// One reason a rule could not be decided for a scope. Its words ([`Reason::text`]) are what the
/// report has always said; what decides anything (the exit's advice, the briefs) reads the kind.
#[derive(Debug, Clone)]
pub enum Reason {
    /// `signal x was not computed`.
    NotComputed { signal: String },
    /// None of the metric names the signal can use is in that window:
    /// `metric missing in the window: vllm:a, vllm:b`.
    MetricMissing { side: Side, families: Vec<String> },
    /// The signal's query failed: `ttft_p95 (window): timed out`.
    QueryFailed { signal: String, side: Side, failure: QueryFailure },
    /// The query answered, with nothing for this scope: `no data for x in the baseline`.
    NoData { signal: String, side: Side },
    /// `x is NaN in the window`.
    NotANumber { signal: String, side: Side },
    /// A quantile whose histogram's buckets cannot decide the comparison:
    /// `x {position}: {detail}` (`queue_p95 is under its first bucket's bound (0.3): whether it is
    /// > 0.1 cannot be told from its histogram's buckets`).
    Buckets { signal: String, position: String, detail: String },
    /// `threshold $name is not defined`.
    ThresholdUndefined { name: String },
    /// Only an optional feature's absence decided the rule, and no signal found any vLLM data in
    /// the window: counts as a metric missing in the window.
    NothingInWindow,
    /// Over the window's last minutes: `last minutes of the window: ...`.
    LastMinutes(Box<Reason>),
    /// From the rule's stand-in conditions: `stand-in: ...`.
    StandIn(Box<Reason>),
    /// Words kept as written (read back from JSON, or given by a caller).
    Text(String),
}

impl Reason {
    /// The words, as the report writes them.
    pub fn text(&self) -> String {
        match self {
            Reason::NotComputed { signal } => format!("signal {signal} was not computed"),
            Reason::MetricMissing { side, families } => format!("metric missing in the {}: {}", side.as_str(), families.join(", ")),
            Reason::QueryFailed { signal, side, failure } => format!("{signal} ({}): {}", side.as_str(), failure.text),
            Reason::NoData { signal, side } => format!("no data for {signal} in the {}", side.as_str()),
            Reason::NotANumber { signal, side } => format!("{signal} is NaN in the {}", side.as_str()),
            Reason::Buckets { signal, position, detail } => format!("{signal} {position}: {detail}"),
            Reason::ThresholdUndefined { name } => format!("threshold ${name} is not defined"),
            Reason::NothingInWindow => {
                "metric missing in the window, and no signal found any vLLM data in the window, so its absence proves nothing".to_string()
            }
            Reason::LastMinutes(r) => format!("last minutes of the window: {}", r.text()),
            Reason::StandIn(r) => format!("stand-in: {}", r.text()),
            Reason::Text(s) => s.clone(),
        }
    }

    /// The kind of the reason in words, for the briefs (`metric missing in the window`): its
    /// words up to its detail, or all of them for a reason without one.
    pub fn head(&self) -> Option<String> {
        match self {
            Reason::MetricMissing { side, .. } => Some(format!("metric missing in the {}", side.as_str())),
            Reason::QueryFailed { signal, side, .. } => Some(format!("{signal} ({})", side.as_str())),
            Reason::Buckets { signal, position, .. } => Some(format!("{signal} {position}")),
            Reason::LastMinutes(_) => Some("last minutes of the window".to_string()),
            Reason::StandIn(_) => Some("stand-in".to_string()),
            Reason::NotComputed { .. }
            | Reason::NoData { .. }
            | Reason::NotANumber { .. }
            | Reason::ThresholdUndefined { .. }
            | Reason::NothingInWindow
            | Reason::Text(_) => None,
        }
    }

    /// The reason itself, and the one it wraps (over the last minutes, from the stand-in).
    fn inner(&self) -> &Reason {
        match self {
            Reason::LastMinutes(r) | Reason::StandIn(r) => r.inner(),
            r => r,
        }
    }

    /// The failed query behind it, if a query failed.
    pub fn failure(&self) -> Option<&QueryFailure> {
        match self.inner() {
            Reason::QueryFailed { failure, .. } => Some(failure),
            _ => None,
        }
    }

    /// A metric missing in `side` (any side when `None`).
    pub fn metric_missing(&self, side: Option<Side>) -> bool {
        match self.inner() {
            Reason::MetricMissing { side: s, .. } => side.is_none_or(|want| *s == want),
            Reason::NothingInWindow => side.is_none_or(|want| want == Side::Window),
            _ => false,
        }
    }

    /// Nothing to compare with in the baseline: a metric missing there, no data or NaN there.
    pub fn baseline_empty(&self) -> bool {
        matches!(
            self.inner(),
            Reason::MetricMissing { side: Side::Baseline, .. } | Reason::NoData { side: Side::Baseline, .. } | Reason::NotANumber { side: Side::Baseline, .. }
        )
    }
}

impl From<&str> for Reason {
    fn from(text: &str) -> Reason {
        Reason::Text(text.to_string())
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// Reasons are the same when they read the same: the report has always told them apart by their
/// words, and said each once.
impl PartialEq for Reason {
    fn eq(&self, other: &Reason) -> bool {
        self.text() == other.text()
    }
}

impl Eq for Reason {}

impl PartialOrd for Reason {
    fn partial_cmp(&self, other: &Reason) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Reason {
    fn cmp(&self, other: &Reason) -> std::cmp::Ordering {
        self.text().cmp(&other.text())
    }
}

/// Every reason a rule could not be decided for a scope, in the order found. The JSON's `reason`
/// is their words joined by `; `; read back, that text is one [`Reason::Text`].
#[derive(Debug, Clone, Default)]
pub struct Reasons(pub Vec<Reason>);

impl Reasons {
    /// The words of the reasons up to the first one's detail (`metric missing in the window`):
    /// what the briefs name a reason by.
    pub fn brief(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        for r in &self.0 {
            match r.head() {
                Some(head) => {
                    out.push(head);
                    break;
                }
                None => out.push(r.text()),
            }
        }
        out.join("; ")
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Reason> {
        self.0.iter()
    }
}

impl std::fmt::Display for Reasons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.iter().map(Reason::text).collect::<Vec<_>>().join("; "))
    }
}

impl From<Vec<Reason>> for Reasons {
    fn from(v: Vec<Reason>) -> Reasons {
        Reasons(v)
    }
}

impl From<&str> for Reasons {
    fn from(text: &str) -> Reasons {
        Reasons(vec![Reason::Text(text.to_string())])
    }
}

impl From<String> for Reasons {
    fn from(text: String) -> Reasons {
        Reasons(vec![Reason::Text(text)])
    }
}

impl PartialEq for Reasons {
    fn eq(&self, other: &Reasons) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for Reasons {}

impl PartialOrd for Reasons {
    fn partial_cmp(&self, other: &Reasons) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// In the order of their words, as the report has always sorted them.
impl Ord for Reasons {
    fn cmp(&self, other: &Reasons) -> std::cmp::Ordering {
        self.to_string().cmp(&other.to_string())
    }
}

impl Serialize for Reasons {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Reasons {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Reasons, D::Error> {
        String::deserialize(d).map(Reasons::from)
    }
}

/// Serialises `Option<f64>` as a JSON number, `null`, or the strings "NaN", "+Inf", "-Inf".
pub mod opt_f64 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            None => s.serialize_none(),
            Some(x) if x.is_nan() => s.serialize_str("NaN"),
            Some(x) if *x == f64::INFINITY => s.serialize_str("+Inf"),
            Some(x) if *x == f64::NEG_INFINITY => s.serialize_str("-Inf"),
            Some(x) => s.serialize_f64(*x),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum NumOrStr {
            N(f64),
            S(String),
        }
        match Option::<NumOrStr>::deserialize(d)? {
            None => Ok(None),
            Some(NumOrStr::N(x)) => Ok(Some(x)),
            Some(NumOrStr::S(s)) => crate::prom::parse_sample_value(&s).map(Some).ok_or_else(|| serde::de::Error::custom(format!("not a number: {s:?}"))),
        }
    }
}

impl Report {
    /// The highest severity among findings, if any.
    pub fn worst_severity(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// The exit code this report gives (docs/output.md, "Exit codes"): [`EXIT_FINDINGS`] with a finding at
    /// or above `fail_on`; else [`EXIT_NO_DATA`] when nothing was judged, core checks could not be
    /// made or scrape targets answered nothing (no pass, whatever else was or was not found); else
    /// [`EXIT_OK`].
    pub fn exit_code(&self, fail_on: Option<Severity>) -> u8 {
        self.exit_code_with(fail_on, false)
    }

    /// The exit code where changes no rule explains may fail the run too (`--fail-on unexplained`,
    /// and `info` below it): 1 when `unexplained` and the report lists any.
    pub fn exit_code_with(&self, fail_on: Option<Severity>, unexplained: bool) -> u8 {
        self.decide(fail_on, unexplained).exit_code()
    }

    /// Whether this run passes, fails, or gives no verdict, for the bar `fail_on` (and changes no
    /// rule explains failing it when `unexplained`). The one place that decides it: the exit code,
    /// `check`'s first line and the run's notes on stderr all read this.
    pub fn decide(&self, fail_on: Option<Severity>, unexplained: bool) -> Decision {
        if let (Some(t), Some(worst)) = (fail_on, self.worst_severity()) {
            if worst >= t {
                return Decision::FailFindings;
            }
        }
        // A probe that failed fails a run with a bar (check's is warning): users met what it met.
        if fail_on.is_some() && self.probe.as_ref().is_some_and(|p| p.fails()) {
            return Decision::FailProbe;
        }
        if unexplained && !self.unexplained.is_empty() {
            return Decision::FailUnexplained;
        }
        if self.stats.rules_evaluated == 0 {
            return Decision::NoVerdict(NoVerdict::NothingJudged);
        }
        if self.core_missing() {
            return Decision::NoVerdict(NoVerdict::CoreNotJudged);
        }
        if self.gaps() {
            return Decision::NoVerdict(NoVerdict::TargetsUnread);
        }
        Decision::Pass
    }
}

/// What a run amounts to against its `--fail-on` bar ([`Report::decide`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// A finding at or above the bar.
    FailFindings,
    /// Changes no rule explains, with `--fail-on unexplained` (or `info`).
    FailUnexplained,
    /// The probe (`--probe`) failed: a request failed, or its first tokens were over the
    /// profile's ceiling; with any `--fail-on` bar.
    FailProbe,
    /// No verdict: see why.
    NoVerdict(NoVerdict),
    /// Nothing fails the run and everything asked for was judged.
    Pass,
}

/// Why a run gives no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoVerdict {
    /// No rule/scope pair could be evaluated.
    NothingJudged,
    /// The runbook's core rules could not be judged ([`Coverage::core_not_evaluated`]).
    CoreNotJudged,
    /// Scrape targets answered nothing ([`Coverage::unread_targets`]).
    TargetsUnread,
}

impl Decision {
    /// The exit code of this decision (docs/output.md, "Exit codes").
    pub fn exit_code(self) -> u8 {
        match self {
            Decision::FailFindings | Decision::FailUnexplained | Decision::FailProbe => EXIT_FINDINGS,
            Decision::NoVerdict(_) => EXIT_NO_DATA,
            Decision::Pass => EXIT_OK,
        }
    }
}

/// Exit codes of a finished diagnosis (a public contract for CI; `error::exit` adds the usage
/// error): no finding at or above `--fail-on` and everything judged.
pub const EXIT_OK: u8 = 0;
/// A finding at or above `--fail-on` (or, with `--fail-on unexplained` or `info`, a change no
/// rule explains).
pub const EXIT_FINDINGS: u8 = 1;
/// No verdict: no data, core checks not judged, or scrape targets that answered nothing.
pub const EXIT_NO_DATA: u8 = 3;

/// How a run ended, as the JSON report carries it: the exit code and the `--fail-on` bar that
/// decided it (`"never"` when no finding fails the run).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    pub exit_code: u8,
    pub fail_on: String,
}

impl Outcome {
    pub fn of(report: &Report, fail_on: Option<Severity>) -> Outcome {
        Outcome::with(report, fail_on, false)
    }

    /// With changes no rule explains failing the run when `unexplained` (see [`fail_on_name`]).
    pub fn with(report: &Report, fail_on: Option<Severity>, unexplained: bool) -> Outcome {
        Outcome { exit_code: report.exit_code_with(fail_on, unexplained), fail_on: fail_on_name(fail_on, unexplained) }
    }
}

/// The `--fail-on` level as given: `never`, `info`, `unexplained`, `warning`, `critical`.
/// `unexplained` is a warning bar that changes no rule explains fail too; `info`, below it, fails
/// on them as well.
pub fn fail_on_name(fail_on: Option<Severity>, unexplained: bool) -> String {
    match (fail_on, unexplained) {
        (Some(Severity::Warning), true) => "unexplained".to_string(),
        (Some(s), _) => s.to_string(),
        (None, _) => "never".to_string(),
    }
}

/// What identifies a diagnosis run's data: stored in recordings so a replay asks the same questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunParams {
    /// The window under diagnosis.
    pub window: TimeRange,
    /// The comparison window (same length, earlier).
    pub baseline: TimeRange,
    /// Extra label matchers as canonical PromQL (`job="vllm",namespace="prod"`), or empty.
    pub selector: String,
    /// Labels findings are grouped by (default `model_name`).
    pub group_by: Vec<String>,
    /// The label that tells a scope's replicas apart (default `instance`).
    #[serde(default = "default_replica_label")]
    pub replica_label: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_reads_as_its_labels_in_order_and_the_empty_one_as_all() {
        let scope: Scope = [("model_name", "llama"), ("engine", "1")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(scope_text(&scope), "engine=1, model_name=llama");
        assert_eq!(scope_text(&Scope::new()), "all");
    }

    #[test]
    fn reasons_keep_their_words_in_the_json_and_name_their_kind_in_structure() {
        let failed = Reason::QueryFailed { signal: "ttft_p95".into(), side: Side::Baseline, failure: QueryFailure::new(FailureKind::TimedOut, "timed out") };
        let no_data = Reason::NoData { signal: "itl_p95".into(), side: Side::Window };
        let missing = Reason::MetricMissing { side: Side::Window, families: vec!["vllm:a".into(), "vllm:b".into()] };
        let n = NotEvaluated { rule: "r".into(), scope: Scope::new(), reason: Reasons(vec![no_data.clone(), Reason::LastMinutes(Box::new(missing.clone()))]) };
        let json = serde_json::to_value(&n).unwrap();
        assert_eq!(json["reason"], "no data for itl_p95 in the window; last minutes of the window: metric missing in the window: vllm:a, vllm:b");
        // The brief: the words up to the first reason's detail, as the text up to its first `: `.
        assert_eq!(n.reason.brief(), "no data for itl_p95 in the window; last minutes of the window");
        assert_eq!(Reasons(vec![failed.clone()]).brief(), "ttft_p95 (baseline)");
        assert!(n.reason.iter().any(|r| r.metric_missing(Some(Side::Window))) && !n.reason.iter().any(|r| r.metric_missing(Some(Side::Baseline))));
        assert_eq!(failed.failure().map(|f| f.kind), Some(FailureKind::TimedOut));
        assert!(!failed.baseline_empty() && Reason::NoData { signal: "x".into(), side: Side::Baseline }.baseline_empty());
        // Read back, the words are kept as written.
        let back: NotEvaluated = serde_json::from_value(json).unwrap();
        assert_eq!(back, n);
    }

    #[test]
    fn a_threshold_writes_the_other_signals_of_a_group_as_see() {
        let t = Threshold {
            lines: vec![
                Term::Text("> 50%".into()),
                Term::Group {
                    all: true,
                    parts: vec![Term::Group { all: false, parts: vec![Term::Text(">= 2x baseline".into())], see: vec!["a".into()] }],
                    see: vec!["a".into()],
                },
            ],
        };
        assert_eq!(serde_json::to_value(&t).unwrap(), "> 50%; (>= 2x baseline or (see a)) and (see a)");
        assert_eq!(serde_json::from_value::<Threshold>(serde_json::json!("")).unwrap(), Threshold::default());
    }

    #[test]
    fn the_report_takes_each_warning_once_where_it_first_appeared() {
        let mut w = Warnings::default();
        w.push("b".into());
        w.extend(["a".to_string(), "b".to_string()]);
        assert_eq!(w.len(), 3);
        assert_eq!(w.clone().into_vec(), ["b", "a", "b"]);
        assert_eq!(w.into_report(), ["b", "a"]);
    }

    #[test]
    fn a_limit_read_back_from_json_knows_its_side_from_its_operator() {
        for (label, side, crossed_at_line) in [
            ("> 3 s", LimitSide::Above, false),
            (">= 2x baseline", LimitSide::AtOrAbove, true),
            ("< 50%", LimitSide::Below, false),
            ("<= 300 ms", LimitSide::AtOrBelow, true),
        ] {
            let back: Limit = serde_json::from_str(&format!("{{\"label\": \"{label}\", \"value\": 1.0}}")).unwrap();
            assert_eq!(back.side, side, "{label}");
            assert_eq!(back.crossed_by(Some(1.0)), crossed_at_line, "{label}");
            assert_eq!(back.crossed_by(Some(2.0)), side.is_above(), "{label}");
            assert!(!back.crossed_by(None));
            assert_eq!(serde_json::to_value(&back).unwrap(), serde_json::json!({"label": label, "value": 1.0}), "the side stays out of the JSON");
        }
    }
}
