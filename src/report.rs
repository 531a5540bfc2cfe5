//! The report: what a run found, in the shape every renderer reads and the JSON contract exposes.
//!
//! `schema_version` 1 is a public contract for CI pipelines: fields may be added, never renamed or
//! removed without bumping it. Numbers that are not finite (a quantile in the `+Inf` bucket, a ratio
//! of nothing) are written as the strings `"NaN"`, `"+Inf"`, `"-Inf"`, the way Prometheus writes them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub const SCHEMA_VERSION: u32 = 1;

mod binding;
pub mod card;
mod condition;
mod event;
pub mod loadtest;
pub mod opt_f64;
pub mod probe;
mod reason;
mod run;
mod steps;
mod verdict;
mod why;
mod words;
pub use binding::*;
pub use card::{Confidence, ConfidenceLevel, Recommendation, WontHelp};
pub use condition::*;
pub use event::*;
pub use reason::*;
pub use run::*;
pub use steps::{Answered, Awaits, BoundAnswer, SpreadAnswer, SpreadMeasure, Step, StepVerdict, Steps, CHANGED, EVEN_SPREAD};
pub use verdict::*;
pub use why::*;
pub use words::{caveat_words, hop_seconds, limit_basis};

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
