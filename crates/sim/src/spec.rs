//! The scenario as the generator takes it: the fleet's models and their options, the incident, what
//! the diagnosis must conclude, and the timeline and fleet a parsed scenario describes.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;

use crate::{events, sim, EventKind, EventSpec, IncidentKind, Onset, TrueEvent};

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
    /// The first finding must be tied to an event of this kind (one of [`TRUE_KINDS`](crate::TRUE_KINDS)).
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

impl ScenarioSpec {
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

pub(crate) fn delta(d: Duration) -> TimeDelta {
    TimeDelta::milliseconds(d.as_millis() as i64)
}
