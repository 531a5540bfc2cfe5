//! Generated vLLM fleets, so integration tests can run the diagnosis against a real Prometheus.
//!
//! Hand-written fixtures drift from what servers emit and never have the noise that makes a
//! threshold flaky. A scenario file instead names a fleet (models, replicas, request rates), a
//! timeline (warm-up, baseline, window), at most one incident on one model and any number of
//! change events (restarts, configuration changes, rollouts, scaling; see `events.rs`); the generator
//! simulates every replica interval by interval with vLLM's real metric names, labels and
//! histogram buckets, and writes OpenMetrics that `promtool tsdb create-blocks-from openmetrics`
//! backfills. The same seed always gives the same bytes.
//!
//! The numbers each incident kind produces live in one table (`state.rs`, [`IncidentKind::params`]);
//! the simulation (`sim.rs`) knows nothing about kinds, and `openmetrics.rs` only formats.
//!
//! # The scenario file
//!
//! ```toml
//! name = "kv-cache-pressure"        # must equal the file's stem in fixtures/scenarios/
//! description = "what happens"      # optional
//! seed = 7                          # optional (0); the same seed gives the same bytes
//! start = "2026-01-15T08:00:00Z"    # RFC 3339 time of the first sample
//! interval = "30s"                  # scrape interval, at least 1s
//! warmup = "20m"                    # optional (0s): healthy lead-in before the baseline
//! baseline = "30m"                  # the baseline window, right before ...
//! window = "30m"                    # ... the diagnosed window, which ends at the last sample
//! metrics = "v1"                    # optional: "v1" (default), "v0", or "v1-otel" (V1 with `vllm_` for `vllm:`)
//! histograms = false                # optional (true): false keeps only gauges and counters
//! drop = ["vllm:request_success"]   # optional: families (as vLLM names them, without _total) the
//!                                   #   collector does not keep
//! counts_aborts = false             # optional (true): false is a vLLM that counts a stream its client
//!                                   #   closed as nothing (0.32: no finished_reason="abort", no
//!                                   #   finished-request histograms, HTTP 200); its first token is
//!                                   #   still in TTFT and its tokens in the token counters
//!
//! [[model]]                         # one or more
//! name = "meta-llama/Llama-3.1-8B-Instruct"   # the model_name label
//! replicas = 3                      # 1..=64 servers; instance "<model-slug>-<i>:8000", a pod each
//! rate = 2.0                        # healthy requests per second per replica (0 < rate <= 500)
//! max_model_len = 32768             # optional (32768): last bound of the token histograms
//! max_num_seqs = 64                 # optional (64): running requests never exceed it
//! max_num_seqs_per_replica = [8, 32] # optional: one cap per replica instead (a replica deployed
//!                                   #   with another --max-num-seqs than its peers)
//! weights = [3, 1, 1]               # optional (even): share of the model's arrivals per replica
//! spec_decode = true                # optional (false): V1 speculative-decoding counters
//! kv_connector = "nixl"             # optional (none): NIXL transfer metrics (V1), or "lmcache": external prefix-cache lookups and hits (V1)
//! dcgm = true                       # optional (false): an NVIDIA DCGM exporter per replica's GPU
//! gpu = "h200"                      # optional: the DCGM series replay a real H200's samples
//!                                   #   (fixtures/real-gpu/; implies dcgm): idle, decode-shaped or
//!                                   #   compute-bound at the power cap as the state's work asks
//! preemption_detail = true          # optional (false): vllm:num_preemptions_by_reason{reason} and
//!                                   #   the per-request histogram vllm:request_num_preemptions (V1)
//! waiting_by_reason = true          # optional (false): vllm:num_requests_waiting_by_reason{reason},
//!                                   #   capacity and deferred, as newer vLLM splits its queue (V1)
//! dp_ranks = 2                      # optional (1): data-parallel ranks per server (V1): the running,
//!                                   #   waiting and KV gauges per `engine`, the rest on engine 0
//! router = "vllm-router"           # optional: vLLM's router in front of the model (its own target,
//!                                   #   families read from vllm-router 0.1.17, see router.rs)
//!                                   # "vllm-router-pd": the same router in prefill/decode mode
//!                                   #   (the first half of the replicas prefill, the rest decode)
//! router_policy = "consistent_hash" # optional (round_robin): the router's --policy (a label)
//! custom_buckets = { time_to_first_token = [1, 5, 60] }  # optional: vLLM's --custom-histogram-buckets
//!                                   #   (families time_to_first_token, inter_token_latency and
//!                                   #   request_latency: queue, prefill, decode, E2E), ascending bounds
//!
//! [incident]                        # optional: at most one
//! kind = "kv-cache-pressure"        # see IncidentKind (every pathology and its "-near" miss)
//! model = "meta-llama/Llama-3.1-8B-Instruct"
//! replica = 1                       # replica index, for kinds about one replica (default 0)
//! onset = "-60m"                    # optional: start this long before the window's end
//!
//! [[event]]                         # optional, any number
//! kind = "config-change"            # restart | config-change | rollout | replica-added | replica-removed
//! model = "meta-llama/Llama-3.1-8B-Instruct"
//! at = "12m"                        # before the window's end: when the first chosen replica goes down
//! replicas = [0, 2]                 # optional (all of the model's)
//! down = "90s"                      # restart/config-change/rollout (2 intervals; "0s": no failed scrape)
//! num_gpu_blocks = 900              # config-change only (required there): the new KV-cache size
//! image = "vllm/vllm-openai:v0.9.1" # rollout only (optional): the new pods' image
//! stagger = "60s"                   # rollout only (1 interval): one replica after the other
//! warm_up = "4m"                    # restart/config-change/rollout (0s): the new process is slow this long
//! warm_up_slowdown = 3.0            # ... and this many times slower when it first answers (3; falls to 1)
//!
//! [expect]                          # what the diagnosis must conclude; the generator ignores it
//! first = "kv-cache-pressure"       # the rule ranked first ...
//! model = "meta-llama/Llama-3.1-8B-Instruct"  # ... for this model_name ...
//! replica = "llama-3-1-8b-instruct-1:8000"    # ... naming this instance (optional)
//! absent = ["recompute-thrashing"]  # rules that must not fire for any scope
//! healthy = false                   # true: no warning or critical finding at all
//! caused_by = "config-change"       # the first finding is tied to an event of this kind
//! no_cause = false                  # true: no finding is tied to any event
//! cold_start = false                # true: the first finding is a replica's cold start (info)
//! replica_cause = "config"          # why the named replica differs: load, config or hardware
//! binding = "max-num-seqs"          # the limit the report's `binding` names for `model`
//! grew = "input-processing"         # the hop the report's time by hop names as grown for `model`
//! ```
//!
//! Every vLLM series carries `job="vllm"`, `instance`, `pod`, `namespace="inference"` and
//! `model_name` (and `engine="0"` in V1); `up` and `http_requests_total` carry the target labels
//! only. DCGM series carry `job="dcgm"`, `instance="<node>:9400"`, `gpu`, `UUID`, `device`,
//! `modelName`, `Hostname` and the replica's `pod`, `namespace` and `container="vllm"`, never
//! `model_name`. Every vLLM target also exports `process_start_time_seconds` (its target labels);
//! kube-state-metrics series exist only in scenarios with a rollout.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;

mod events;
mod openmetrics;
pub mod real_gpu;
mod router;
mod sim;
mod state;

pub use events::{EventKind, EventSpec, TrueEvent, DEFAULT_IMAGE, FIRST_GENERATION, TRUE_KINDS};
pub use sim::GeneratedSeries;
pub use state::{GpuParams, IncidentKind, Level, Needs, Onset, Running, Scope, SleepState, StateParams, Workload};

/// Which generation of vLLM metric names the fleet exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum MetricsGeneration {
    /// vLLM 0.10+ (V1 engine): `kv_cache_usage_perc`, `inter_token_latency_seconds`, `engine` label,
    /// prefix-cache counters, `http_requests_total`, sleep state, admission rejections and
    /// recomputed prompt tokens.
    #[default]
    #[serde(rename = "v1")]
    V1,
    /// vLLM 0.5-0.8 (V0 engine): `gpu_cache_usage_perc`, `time_per_output_token_seconds`, no
    /// `engine` label, no prefix-cache counters, no HTTP metrics, none of V1's newer series.
    #[serde(rename = "v0")]
    V0,
    /// V1 as stored by an OpenTelemetry pipeline that rewrites `vllm:` to `vllm_`.
    #[serde(rename = "v1-otel")]
    V1Otel,
}

impl MetricsGeneration {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricsGeneration::V1 => "v1",
            MetricsGeneration::V0 => "v0",
            MetricsGeneration::V1Otel => "v1-otel",
        }
    }

    /// Whether the engine is V1 (whatever the names are rewritten to).
    pub fn is_v1(self) -> bool {
        self != MetricsGeneration::V0
    }
}

/// A KV connector that moves KV caches between instances.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KvConnector {
    Nixl,
    /// An external prefix cache behind a KV connector (LMCache, Mooncake): vLLM counts its lookups
    /// and hits as `vllm:external_prefix_cache_queries` / `_hits`.
    Lmcache,
}

/// A router in front of a model's replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum RouterKind {
    /// vLLM's router (`vllm-router` on PyPI): its own target, exporting `vllm_router_*`.
    #[serde(rename = "vllm-router")]
    VllmRouter,
    /// vLLM's router in prefill/decode mode (`--vllm-pd-disaggregation`): the first half of the
    /// replicas (rounded up) are its prefill workers, the rest its decode workers; it exports the
    /// PD mode's families (`vllm_router_pd_*`) and not the plain mode's requests and durations.
    #[serde(rename = "vllm-router-pd")]
    VllmRouterPd,
}

impl RouterKind {
    /// Replica `ri` of `n` is a prefill worker of a router in PD mode.
    pub fn prefills(self, ri: u32, n: u32) -> bool {
        self == RouterKind::VllmRouterPd && ri < n.div_ceil(2)
    }
}

/// The routing policies vLLM's router 0.1.17 takes (`--policy`), as its decisions' `policy` label.
pub const ROUTER_POLICIES: [&str; 7] = ["random", "round_robin", "cache_aware", "kv_aware", "power_of_two", "consistent_hash", "sticky_least_loaded"];

/// A real GPU whose recorded samples a model's DCGM series replay (see `real_gpu.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum RealGpu {
    /// One NVIDIA H200, sampled once a second under serving-shaped load (fixtures/real-gpu/).
    #[serde(rename = "h200")]
    H200,
}

/// One served model: `replicas` servers, each receiving `rate` requests per second when healthy.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub name: String,
    pub replicas: u32,
    pub rate: f64,
    /// `--max-model-len`: the last bucket bound of the token-count histograms.
    pub max_model_len: u32,
    /// `--max-num-seqs`: the cap on running requests per replica.
    pub max_num_seqs: u32,
    /// One cap per replica instead of `max_num_seqs` (empty: every replica has `max_num_seqs`).
    pub max_num_seqs_per_replica: Vec<u32>,
    /// Share of the model's arrivals per replica (one weight per replica; empty means even).
    pub weights: Vec<f64>,
    pub spec_decode: bool,
    /// V1: why requests were preempted (`num_preemptions_by_reason`) and how often each finished
    /// request was (`request_num_preemptions`).
    pub preemption_detail: bool,
    /// V1: the waiting queue split by reason (`num_requests_waiting_by_reason`, `capacity` and
    /// `deferred`), as newer vLLM exports it.
    pub waiting_by_reason: bool,
    /// V1: data-parallel ranks per server (`engine` label values): the running and waiting gauges
    /// split between them, KV usage per rank; counters and histograms stay on engine 0.
    pub dp_ranks: u32,
    pub kv_connector: Option<KvConnector>,
    pub dcgm: bool,
    /// The GPU whose real samples the DCGM series replay (`gpu = "h200"`; implies `dcgm`). None:
    /// readings drawn from each state's ranges.
    pub gpu: Option<RealGpu>,
    /// vLLM's `--custom-histogram-buckets`: bucket bounds by family key (`time_to_first_token`,
    /// `inter_token_latency`, `request_latency`), replacing the defaults.
    pub custom_buckets: std::collections::BTreeMap<String, Vec<f64>>,
    /// A router in front of the replicas, and its policy (one of [`ROUTER_POLICIES`]).
    pub router: Option<RouterKind>,
    pub router_policy: String,
}

/// The bucket families `custom_buckets` may set (vLLM's keys for the latency histograms).
pub const CUSTOM_BUCKET_FAMILIES: [&str; 3] = ["time_to_first_token", "inter_token_latency", "request_latency"];

impl ModelSpec {
    /// A model with every option at its default.
    pub fn new(name: &str, replicas: u32, rate: f64) -> ModelSpec {
        ModelSpec {
            name: name.to_string(),
            replicas,
            rate,
            max_model_len: 32_768,
            max_num_seqs: 64,
            max_num_seqs_per_replica: Vec::new(),
            weights: Vec::new(),
            spec_decode: false,
            preemption_detail: false,
            waiting_by_reason: false,
            dp_ranks: 1,
            kv_connector: None,
            dcgm: false,
            gpu: None,
            custom_buckets: Default::default(),
            router: None,
            router_policy: "round_robin".to_string(),
        }
    }

    /// Replica `ri`'s cap on running requests.
    pub fn max_num_seqs_of(&self, ri: u32) -> u32 {
        self.max_num_seqs_per_replica.get(ri as usize).copied().unwrap_or(self.max_num_seqs)
    }

    /// Each replica's arrival multiplier from the weights: 1 for every replica when even, and
    /// always summing to the number of replicas (the model's total rate is unchanged).
    pub fn arrival_shares(&self) -> Vec<f64> {
        let n = self.replicas as usize;
        if self.weights.len() != n {
            return vec![1.0; n];
        }
        let total: f64 = self.weights.iter().sum();
        self.weights.iter().map(|w| w * n as f64 / total).collect()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct IncidentSpec {
    pub kind: IncidentKind,
    /// The model_name whose replicas enter the incident state.
    pub model: String,
    /// The replica the story is about, for kinds that single one out (default 0).
    pub replica: u32,
    /// Overrides the kind's own onset: the state starts this long before the window's end.
    pub onset_before_end: Option<Duration>,
}

/// What the diagnosis must conclude; read by tests, ignored by the generator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expectation {
    /// The rule that must rank first ...
    pub first: Option<String>,
    /// ... for this model_name ...
    pub model: Option<String>,
    /// ... naming this instance.
    pub replica: Option<String>,
    /// Rules that must not fire for any scope.
    pub absent: Vec<String>,
    /// No warning or critical finding at all.
    pub healthy: bool,
    /// The first finding was reached through its rule's stand-in signals (the primary ones missing).
    pub stood_in: bool,
    /// The exit code `explain` must give (3: core runbook checks could not be evaluated).
    pub exit: Option<i32>,
    /// The first finding must be tied to an event of this kind (one of [`TRUE_KINDS`]).
    pub caused_by: Option<String>,
    /// No finding may be tied to any event (a change that changed nothing: a near miss).
    pub no_cause: bool,
    /// The limit the report's `binding` must name for `model` (one of [`BINDING_LIMITS`]). With
    /// `healthy = true` and no `first`, `model` only names whose binding is checked.
    pub binding: Option<String>,
    /// The first finding is a replica's cold start: info, with its `cold_start` note.
    pub cold_start: bool,
    /// Why the replica the first finding names differs (`load`, `config` or `hardware`, one of
    /// [`REPLICA_CAUSES`]): its `replica_cause.kind`. `load` is info and no warning or critical
    /// finding may name that replica; `config` carries a `--max-num-seqs` card.
    pub replica_cause: Option<String>,
    /// Signals the report must list as changed and unexplained for `model` (what else moved),
    /// beginning where the incident does (within two trend steps).
    pub unexplained: Vec<String>,
    /// The hop the report's time by hop must name as grown for `model` (one of [`HOPS`]).
    pub grew: Option<String>,
}

/// The causes a finding's `replica_cause` names (vllm-diag's `ReplicaCauseKind`).
pub const REPLICA_CAUSES: [&str; 3] = ["load", "config", "hardware"];
/// The hops of a request's path the report's `hops` names (vllm-diag's explain::hops).
pub const HOPS: [&str; 6] = ["router", "input-processing", "engine-queue", "kv-transfer", "prefill", "decode"];

/// The limits a report's `binding` names (vllm-diag's `LimitKind`).
pub const BINDING_LIMITS: [&str; 6] = ["kv-cache", "max-num-seqs", "max-num-batched-tokens", "deferred", "stalled", "none"];

/// A parsed, validated scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioSpec {
    pub name: String,
    pub description: String,
    pub seed: u64,
    /// Time of the first sample.
    pub start: DateTime<Utc>,
    /// Scrape interval.
    pub interval: Duration,
    /// Healthy lead-in before the baseline.
    pub warmup: Duration,
    pub baseline: Duration,
    /// The incident window; it ends at the last sample.
    pub window: Duration,
    pub metrics: MetricsGeneration,
    /// False: the collector keeps no histogram (relabelled away, gauge-only collectors): only
    /// gauges and counters are written.
    pub histograms: bool,
    /// Families the collector does not keep (`vllm:request_success`), as vLLM names them.
    pub drop: Vec<String>,
    /// False: client aborts are counted nowhere but in TTFT, the token counters and HTTP 200s.
    pub counts_aborts: bool,
    pub models: Vec<ModelSpec>,
    pub incident: Option<IncidentSpec>,
    /// Restarts, configuration changes, rollouts and scaling, in file order.
    pub events: Vec<EventSpec>,
    pub expect: Expectation,
}

/// One server of the fleet and the names it is known by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaInfo {
    pub model: String,
    /// Index within the model.
    pub index: u32,
    /// The vLLM target's `instance` label, `<model-slug>-<index>:8000`.
    pub instance: String,
    /// The Kubernetes pod, `<model-slug>-<template hash>-<suffix>`.
    pub pod: String,
    /// The node its GPU sits on (DCGM's `Hostname`; its exporter is `<node>:9400`).
    pub node: String,
    /// The GPU's `UUID` label.
    pub gpu_uuid: String,
}

/// Why a scenario file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("scenario {origin} is not valid TOML for a scenario: {message}")]
    Syntax { origin: String, message: String },
    #[error("scenario {origin}: {field}: {message}")]
    Invalid { origin: String, field: String, message: String },
}

/// Largest number of samples per series a scenario may ask for (a week at 30 s).
const MAX_STEPS: u64 = 20_160;
const MAX_REPLICAS: u32 = 64;
const MAX_RATE: f64 = 500.0;
const MAX_NUM_SEQS: u32 = 4096;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    seed: u64,
    start: String,
    interval: String,
    #[serde(default)]
    warmup: Option<String>,
    baseline: String,
    window: String,
    #[serde(default)]
    metrics: MetricsGeneration,
    #[serde(default = "yes")]
    histograms: bool,
    #[serde(default)]
    drop: Vec<String>,
    #[serde(default = "yes")]
    counts_aborts: bool,
    #[serde(default)]
    model: Vec<RawModel>,
    #[serde(default)]
    incident: Option<RawIncident>,
    #[serde(default)]
    event: Vec<events::RawEvent>,
    #[serde(default)]
    expect: Option<RawExpect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: String,
    replicas: u32,
    rate: f64,
    #[serde(default)]
    max_model_len: Option<u32>,
    #[serde(default)]
    max_num_seqs: Option<u32>,
    #[serde(default)]
    max_num_seqs_per_replica: Option<Vec<u32>>,
    #[serde(default)]
    weights: Option<Vec<f64>>,
    #[serde(default)]
    spec_decode: bool,
    #[serde(default)]
    preemption_detail: bool,
    #[serde(default)]
    waiting_by_reason: bool,
    #[serde(default)]
    dp_ranks: Option<u32>,
    #[serde(default)]
    kv_connector: Option<KvConnector>,
    #[serde(default)]
    dcgm: bool,
    #[serde(default)]
    gpu: Option<RealGpu>,
    #[serde(default)]
    custom_buckets: std::collections::BTreeMap<String, Vec<f64>>,
    #[serde(default)]
    router: Option<RouterKind>,
    #[serde(default)]
    router_policy: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIncident {
    kind: IncidentKind,
    model: String,
    #[serde(default)]
    replica: Option<u32>,
    #[serde(default)]
    onset: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default)]
    first: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    replica: Option<String>,
    #[serde(default)]
    absent: Vec<String>,
    #[serde(default)]
    healthy: bool,
    #[serde(default)]
    stood_in: bool,
    #[serde(default)]
    exit: Option<i32>,
    #[serde(default)]
    caused_by: Option<String>,
    #[serde(default)]
    no_cause: bool,
    #[serde(default)]
    binding: Option<String>,
    #[serde(default)]
    cold_start: bool,
    #[serde(default)]
    replica_cause: Option<String>,
    #[serde(default)]
    unexplained: Vec<String>,
    #[serde(default)]
    grew: Option<String>,
}

fn yes() -> bool {
    true
}

impl ScenarioSpec {
    /// Parse and validate a scenario from TOML text.
    pub fn from_toml_str(text: &str) -> Result<ScenarioSpec, ScenarioError> {
        Self::parse(text, "<text>")
    }

    /// Read, parse and validate a scenario file.
    pub fn load(path: impl AsRef<Path>) -> Result<ScenarioSpec, ScenarioError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
        Self::parse(&text, &path.display().to_string())
    }

    fn parse(text: &str, origin: &str) -> Result<ScenarioSpec, ScenarioError> {
        let raw: RawSpec = toml::from_str(text).map_err(|e| ScenarioError::Syntax { origin: origin.to_string(), message: e.to_string() })?;
        let invalid = |field: &str, message: String| ScenarioError::Invalid { origin: origin.to_string(), field: field.to_string(), message };

        if raw.name.trim().is_empty() {
            return Err(invalid("name", "must not be empty".into()));
        }
        let start = DateTime::parse_from_rfc3339(raw.start.trim())
            .map_err(|e| invalid("start", format!("{:?} is not an RFC 3339 time ({e})", raw.start)))?
            .with_timezone(&Utc);
        if start.timestamp() <= 0 || start.timestamp() > 32_503_680_000 {
            return Err(invalid("start", "must lie between 1970 and 3000".into()));
        }
        let duration = |field: &str, text: &str| -> Result<Duration, ScenarioError> {
            let d = humantime::parse_duration(text.trim()).map_err(|e| invalid(field, format!("{text:?} is not a duration like \"30s\" or \"20m\" ({e})")))?;
            if d.subsec_nanos() % 1_000_000 != 0 {
                return Err(invalid(field, "must be a whole number of milliseconds".into()));
            }
            Ok(d)
        };
        let interval = duration("interval", &raw.interval)?;
        let warmup = match &raw.warmup {
            Some(w) => duration("warmup", w)?,
            None => Duration::ZERO,
        };
        let baseline = duration("baseline", &raw.baseline)?;
        let window = duration("window", &raw.window)?;
        if interval < Duration::from_secs(1) {
            return Err(invalid("interval", "must be at least 1s".into()));
        }
        let ms = |d: Duration| d.as_millis() as u64;
        for (field, d) in [("warmup", warmup), ("baseline", baseline), ("window", window)] {
            if ms(d) % ms(interval) != 0 {
                return Err(invalid(field, format!("must be a whole number of intervals ({})", raw.interval)));
            }
        }
        if baseline.is_zero() || window.is_zero() {
            return Err(invalid("window", "baseline and window must both be longer than zero".into()));
        }
        let steps = (ms(warmup) + ms(baseline) + ms(window)) / ms(interval);
        if steps > MAX_STEPS {
            return Err(invalid("window", format!("{steps} samples per series; at most {MAX_STEPS} are allowed")));
        }

        if raw.model.is_empty() {
            return Err(invalid("model", "at least one [[model]] is needed".into()));
        }
        let mut models: Vec<ModelSpec> = Vec::with_capacity(raw.model.len());
        for (i, m) in raw.model.into_iter().enumerate() {
            let field = format!("model[{i}]");
            if m.name.trim().is_empty() {
                return Err(invalid(&field, "name must not be empty".into()));
            }
            if models.iter().any(|o| o.name == m.name) {
                return Err(invalid(&field, format!("model {:?} appears twice", m.name)));
            }
            if m.replicas == 0 || m.replicas > MAX_REPLICAS {
                return Err(invalid(&field, format!("replicas must be between 1 and {MAX_REPLICAS}")));
            }
            if !(m.rate.is_finite() && m.rate > 0.0 && m.rate <= MAX_RATE) {
                return Err(invalid(&field, format!("rate must be above 0 and at most {MAX_RATE} requests per second")));
            }
            let max_model_len = m.max_model_len.unwrap_or(32_768);
            if !(1_000..=10_000_000).contains(&max_model_len) {
                return Err(invalid(&field, "max_model_len must be between 1000 and 10000000".into()));
            }
            let max_num_seqs = m.max_num_seqs.unwrap_or(64);
            if !(1..=MAX_NUM_SEQS).contains(&max_num_seqs) {
                return Err(invalid(&field, format!("max_num_seqs must be between 1 and {MAX_NUM_SEQS}")));
            }
            let per_replica = m.max_num_seqs_per_replica.unwrap_or_default();
            if !per_replica.is_empty() {
                if per_replica.len() != m.replicas as usize {
                    return Err(invalid(&field, format!("max_num_seqs_per_replica has {} values; give one per replica ({})", per_replica.len(), m.replicas)));
                }
                if per_replica.iter().any(|c| !(1..=MAX_NUM_SEQS).contains(c)) {
                    return Err(invalid(&field, format!("max_num_seqs_per_replica: each cap must be between 1 and {MAX_NUM_SEQS}")));
                }
            }
            let weights = m.weights.unwrap_or_default();
            if !weights.is_empty() {
                if weights.len() != m.replicas as usize {
                    return Err(invalid(&field, format!("weights has {} values; give one per replica ({})", weights.len(), m.replicas)));
                }
                if weights.iter().any(|w| !(w.is_finite() && *w > 0.0 && *w <= 1e6)) {
                    return Err(invalid(&field, "weights must be positive numbers (at most 1000000)".into()));
                }
            }
            let spec_model = ModelSpec::new(&m.name, m.replicas, m.rate);
            let busiest = ModelSpec { weights: weights.clone(), ..spec_model }.arrival_shares().into_iter().enumerate().fold((0, 0.0), |best, (i, share)| {
                if share > best.1 {
                    (i, share)
                } else {
                    best
                }
            });
            if m.rate * busiest.1 > MAX_RATE {
                return Err(invalid(
                    &field,
                    format!("weights send {:.0} requests per second to replica {}; at most {MAX_RATE} per replica", m.rate * busiest.1, busiest.0),
                ));
            }
            let dp_ranks = m.dp_ranks.unwrap_or(1);
            if !(1..=8).contains(&dp_ranks) {
                return Err(invalid(&field, format!("dp_ranks = {dp_ranks}: give 1 to 8 ranks per server")));
            }
            if raw.metrics == MetricsGeneration::V0 && (m.spec_decode || m.kv_connector.is_some() || m.preemption_detail || m.waiting_by_reason || dp_ranks > 1)
            {
                return Err(invalid(
                    &field,
                    "spec_decode, kv_connector, preemption_detail, waiting_by_reason and dp_ranks are generated with V1 names only; use metrics = \"v1\""
                        .into(),
                ));
            }
            for (family, bounds) in &m.custom_buckets {
                if !CUSTOM_BUCKET_FAMILIES.contains(&family.as_str()) {
                    return Err(invalid(&field, format!("custom_buckets: unknown family {family:?}; use one of {CUSTOM_BUCKET_FAMILIES:?}")));
                }
                if bounds.is_empty() || bounds.iter().any(|b| !(b.is_finite() && *b > 0.0)) || bounds.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(invalid(&field, format!("custom_buckets.{family}: give positive bounds in ascending order")));
                }
            }
            let router_policy = m.router_policy.unwrap_or_else(|| "round_robin".to_string());
            if !ROUTER_POLICIES.contains(&router_policy.as_str()) {
                return Err(invalid(&field, format!("router_policy {router_policy:?} is not one of vllm-router's policies ({})", ROUTER_POLICIES.join(", "))));
            }
            models.push(ModelSpec {
                name: m.name,
                replicas: m.replicas,
                rate: m.rate,
                max_model_len,
                max_num_seqs,
                max_num_seqs_per_replica: per_replica,
                weights,
                spec_decode: m.spec_decode,
                preemption_detail: m.preemption_detail,
                waiting_by_reason: m.waiting_by_reason,
                dp_ranks,
                kv_connector: m.kv_connector,
                dcgm: m.dcgm || m.gpu.is_some(),
                gpu: m.gpu,
                custom_buckets: m.custom_buckets,
                router: m.router,
                router_policy,
            });
        }

        let total = warmup + baseline + window;
        let incident = match raw.incident {
            None => None,
            Some(inc) => {
                let Some(model) = models.iter().find(|m| m.name == inc.model) else {
                    let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
                    return Err(invalid("incident.model", format!("{:?} is not one of the models ({})", inc.model, names.join(", "))));
                };
                let kind = inc.kind;
                let needs = kind.needs();
                let lacks = |what: &str| invalid("incident.kind", format!("{kind} needs {what} on model {:?}; add it to that [[model]]", model.name));
                if needs.v1 && !raw.metrics.is_v1() {
                    return Err(invalid("incident.kind", format!("{kind} moves metrics that only V1 exports; use metrics = \"v1\" or \"v1-otel\"")));
                }
                if needs.spec_decode && !model.spec_decode {
                    return Err(lacks("spec_decode = true"));
                }
                if needs.nixl && model.kv_connector != Some(KvConnector::Nixl) {
                    return Err(lacks("kv_connector = \"nixl\""));
                }
                if needs.external_cache && model.kv_connector != Some(KvConnector::Lmcache) {
                    return Err(lacks("kv_connector = \"lmcache\""));
                }
                if needs.dcgm && !model.dcgm {
                    return Err(lacks("dcgm = true"));
                }
                if needs.waiting_by_reason && !model.waiting_by_reason {
                    return Err(lacks("waiting_by_reason = true"));
                }
                if needs.data_parallel && model.dp_ranks < 2 {
                    return Err(lacks("dp_ranks = 2 or more"));
                }
                if needs.router && model.router.is_none() {
                    return Err(lacks("router = \"vllm-router\""));
                }
                if needs.cache_aware && (model.router != Some(RouterKind::VllmRouter) || model.router_policy != "cache_aware") {
                    return Err(lacks("router = \"vllm-router\" and router_policy = \"cache_aware\""));
                }
                if needs.router_pd && model.router != Some(RouterKind::VllmRouterPd) {
                    return Err(lacks("router = \"vllm-router-pd\""));
                }
                if needs.real_gpu && model.gpu.is_none() {
                    return Err(lacks("gpu = \"h200\" (its story is the real board's power cap and clocks)"));
                }
                if model.replicas < needs.min_replicas {
                    return Err(invalid(
                        "incident.kind",
                        format!(
                            "{kind} compares a replica with its peers and needs at least {} replicas; {:?} has {}",
                            needs.min_replicas, model.name, model.replicas
                        ),
                    ));
                }
                let replica = match inc.replica {
                    None => 0,
                    Some(_) if !needs.uses_replica => {
                        return Err(invalid("incident.replica", format!("{kind} affects every replica of the model; remove replica")));
                    }
                    Some(r) if r >= model.replicas => {
                        return Err(invalid(
                            "incident.replica",
                            format!("{r} is not a replica index of {:?} (0 to {})", model.name, model.replicas.saturating_sub(1)),
                        ));
                    }
                    Some(r) => r,
                };
                let onset_before_end = match &inc.onset {
                    None => None,
                    Some(text) => {
                        let Some(rest) = text.trim().strip_prefix('-') else {
                            return Err(invalid("incident.onset", format!("{text:?} must be negative, relative to the window's end, like \"-60m\"")));
                        };
                        let d = duration("incident.onset", rest)?;
                        if d.is_zero() || ms(d) % ms(interval) != 0 {
                            return Err(invalid("incident.onset", format!("must be a whole number of intervals ({}) above zero", raw.interval)));
                        }
                        if d >= total {
                            return Err(invalid(
                                "incident.onset",
                                format!("{text} lies before the first sample; make warmup longer (the timeline is {})", humantime::format_duration(total)),
                            ));
                        }
                        Some(d)
                    }
                };
                if let Onset::BeforeEnd { secs } = kind.params().onset {
                    if onset_before_end.is_none() && Duration::from_secs(secs) >= total {
                        return Err(invalid(
                            "incident.kind",
                            format!(
                                "{kind} starts {} before the window's end, before the first sample; make warmup longer",
                                humantime::format_duration(Duration::from_secs(secs))
                            ),
                        ));
                    }
                }
                Some(IncidentSpec { kind, model: inc.model, replica, onset_before_end })
            }
        };

        let models_and_sizes: Vec<(String, u32)> = models.iter().map(|m| (m.name.clone(), m.replicas)).collect();
        let events = events::parse(raw.event, &models_and_sizes, &events::Ctx { invalid: &invalid, duration: &duration, interval, total })?;

        let mut spec = ScenarioSpec {
            name: raw.name,
            description: raw.description,
            seed: raw.seed,
            start,
            interval,
            warmup,
            baseline,
            window,
            metrics: raw.metrics,
            histograms: raw.histograms,
            drop: raw.drop,
            counts_aborts: raw.counts_aborts,
            models,
            incident,
            events,
            expect: Expectation::default(),
        };

        if let Some(e) = raw.expect {
            // A model without a first finding only names whose binding is checked (a near miss
            // whose limit must read `none`, say).
            // So does a model with unexplained changes: the model they must be listed for.
            let model_for_binding = e.first.is_none() && (e.binding.is_some() || !e.unexplained.is_empty());
            if e.healthy && (e.first.is_some() || (e.model.is_some() && !model_for_binding) || e.replica.is_some()) {
                return Err(invalid(
                    "expect",
                    "healthy = true cannot be combined with first, model or replica (model only with binding or unexplained)".into(),
                ));
            }
            if e.first.is_some() != e.model.is_some() && !(model_for_binding && e.model.is_some()) {
                return Err(invalid("expect", "first and model go together".into()));
            }
            if let Some(limit) = &e.binding {
                if !BINDING_LIMITS.contains(&limit.as_str()) {
                    return Err(invalid("expect.binding", format!("{limit:?} is not a limit ({})", BINDING_LIMITS.join(", "))));
                }
                if e.model.is_none() {
                    return Err(invalid("expect.binding", "names the limit for a model: it needs model".into()));
                }
            }
            if let Some(cause) = &e.replica_cause {
                if !REPLICA_CAUSES.contains(&cause.as_str()) {
                    return Err(invalid("expect.replica_cause", format!("{cause:?} is not a cause ({})", REPLICA_CAUSES.join(", "))));
                }
                if e.replica.is_none() {
                    return Err(invalid("expect.replica_cause", "says why the named replica differs: it needs first, model and replica".into()));
                }
            }
            if let Some(hop) = &e.grew {
                if !HOPS.contains(&hop.as_str()) {
                    return Err(invalid("expect.grew", format!("{hop:?} is not a hop ({})", HOPS.join(", "))));
                }
                if e.model.is_none() {
                    return Err(invalid("expect.grew", "names the hop that grew for a model: it needs first and model".into()));
                }
            }
            if e.stood_in && e.first.is_none() {
                return Err(invalid("expect.stood_in", "says how the first finding was reached: it needs first and model".into()));
            }
            if let Some(model) = &e.model {
                if !spec.models.iter().any(|m| &m.name == model) {
                    return Err(invalid("expect.model", format!("{model:?} is not one of the models")));
                }
            }
            if let Some(instance) = &e.replica {
                let Some(model) = &e.model else {
                    return Err(invalid("expect.replica", "needs first and model".into()));
                };
                let instances: Vec<String> = spec.replicas().into_iter().filter(|r| &r.model == model).map(|r| r.instance).collect();
                if !instances.contains(instance) {
                    return Err(invalid("expect.replica", format!("{instance:?} is not an instance of {model:?} ({})", instances.join(", "))));
                }
            }
            for (i, rule) in e.absent.iter().enumerate() {
                if rule.trim().is_empty() {
                    return Err(invalid("expect.absent", format!("entry {i} is empty")));
                }
                if e.absent[..i].contains(rule) {
                    return Err(invalid("expect.absent", format!("{rule:?} is listed twice")));
                }
                if e.first.as_ref() == Some(rule) {
                    return Err(invalid("expect.absent", format!("{rule:?} is also expected first")));
                }
            }
            if let Some(kind) = &e.caused_by {
                if !TRUE_KINDS.contains(&kind.as_str()) {
                    return Err(invalid("expect.caused_by", format!("{kind:?} is not an event kind ({})", TRUE_KINDS.join(", "))));
                }
                let Some(model) = &e.model else {
                    return Err(invalid("expect.caused_by", "says what the first finding follows: it needs first and model".into()));
                };
                if e.no_cause {
                    return Err(invalid("expect.caused_by", "cannot be combined with no_cause = true".into()));
                }
                if !spec.true_events().iter().any(|t| &t.kind == kind && &t.model == model) {
                    return Err(invalid("expect.caused_by", format!("no {kind} event happens to {model:?} in this scenario; add an [[event]] for it")));
                }
            }
            spec.expect = Expectation {
                first: e.first,
                model: e.model,
                replica: e.replica,
                absent: e.absent,
                stood_in: e.stood_in,
                exit: e.exit,
                healthy: e.healthy,
                caused_by: e.caused_by,
                no_cause: e.no_cause,
                binding: e.binding,
                cold_start: e.cold_start,
                replica_cause: e.replica_cause,
                unexplained: e.unexplained,
                grew: e.grew,
            };
        }
        Ok(spec)
    }

    /// Start of the healthy baseline (the first sample after the warm-up).
    pub fn baseline_start(&self) -> DateTime<Utc> {
        self.start + delta(self.warmup)
    }

    /// End of the baseline, which is the start of the window.
    pub fn baseline_end(&self) -> DateTime<Utc> {
        self.window_start()
    }

    pub fn window_start(&self) -> DateTime<Utc> {
        self.baseline_start() + delta(self.baseline)
    }

    /// The last sample.
    pub fn window_end(&self) -> DateTime<Utc> {
        self.window_start() + delta(self.window)
    }

    /// Number of samples in every series.
    pub fn sample_count(&self) -> usize {
        let total = self.warmup + self.baseline + self.window;
        (total.as_millis() / self.interval.as_millis()) as usize + 1
    }

    /// Total number of replicas across models.
    pub fn replica_count(&self) -> u32 {
        self.models.iter().map(|m| m.replicas).sum()
    }

    /// The model that has the incident, if any.
    pub fn incident_model(&self) -> Option<&str> {
        self.incident.as_ref().map(|i| i.model.as_str())
    }

    /// When the incident state begins, if there is an incident.
    pub fn incident_onset(&self) -> Option<DateTime<Utc>> {
        let incident = self.incident.as_ref()?;
        Some(match (incident.onset_before_end, incident.kind.params().onset) {
            (Some(d), _) => self.window_end() - delta(d),
            (None, Onset::WindowStart) => self.window_start(),
            (None, Onset::BaselineStart) => self.baseline_start(),
            (None, Onset::BeforeEnd { secs }) => self.window_end() - TimeDelta::seconds(secs as i64),
        })
    }

    /// Every server of the fleet, model by model, with its instance, pod and node names.
    pub fn replicas(&self) -> Vec<ReplicaInfo> {
        sim::fleet_names(self).into_iter().flatten().collect()
    }

    /// Every change the product should list in its timeline, oldest first: a `restart` per wave
    /// (restart, config-change and rollout events), `target-down` and `target-up` per replica and
    /// outage, `config-change`, `rollout`, `version-change` (a rollout to another image),
    /// `replica-added` and `replica-removed` per replica, and the incidents that are events too:
    /// `gpu-error` (gpu-errors) and `target-down` (target-down). Each at the first sample that
    /// shows it, except `restart` and `rollout`, which are dated when the first replica went down.
    pub fn true_events(&self) -> Vec<TrueEvent> {
        events::true_events(self)
    }

    /// Whether kube-state-metrics is part of the fleet (some event is a rollout).
    pub fn has_kube_state_metrics(&self) -> bool {
        self.events.iter().any(|e| e.kind == EventKind::Rollout)
    }

    /// The instance label of a model's replica, if both exist.
    pub fn instance_of(&self, model: &str, index: u32) -> Option<String> {
        self.replicas().into_iter().find(|r| r.model == model && r.index == index).map(|r| r.instance)
    }
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::milliseconds(d.as_millis() as i64)
}

/// Every series the scenario's fleet exports, sorted by name then labels.
pub fn generate_series(spec: &ScenarioSpec) -> Vec<GeneratedSeries> {
    simulate_kept(spec).into_series()
}

/// The simulation, less what the scenario's collector does not keep (histograms, with
/// `histograms = false`; the families `drop` names).
fn simulate_kept(spec: &ScenarioSpec) -> sim::Generated {
    let mut generated = sim::simulate(spec);
    if !spec.histograms {
        generated.families.retain(|f| f.kind != sim::Kind::Histogram);
    }
    generated.families.retain(|f| !spec.drop.contains(&f.name));
    generated
}

/// Write the scenario as OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`:
/// every sample timestamped, each family's samples together, `# EOF` at the end.
pub fn generate_openmetrics(spec: &ScenarioSpec, out: &mut impl std::io::Write) -> std::io::Result<()> {
    generate_into(spec, out)
}

/// [`generate_openmetrics`] behind one concrete writer, so that the formatting is compiled here,
/// optimised (Cargo.toml optimises this crate even in the debug build the tests run), and not in
/// each unoptimised test binary that names its own writer type. The buffer makes the writes
/// through `dyn Write` few and large.
fn generate_into(spec: &ScenarioSpec, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    use std::io::Write;
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, out);
    openmetrics::write(&simulate_kept(spec), &mut buffered)?;
    buffered.flush()
}

#[cfg(test)]
mod tests;
