//! The fleet simulation: every replica, every scrape interval.
//!
//! Each interval a replica draws Poisson arrivals, splits off the requests the HTTP layer and the
//! engine's admission control reject, and draws each remaining request's prompt and output
//! length, queue, prefill and per-token times from lognormals whose medians come from the
//! replica's current [`StateParams`]. Observations go into cumulative histograms with vLLM's
//! bucket bounds, so every count is an integer, buckets never decrease and `+Inf` equals `_count`
//! by construction. Gauges are sampled at the interval's end: `num_requests_running` from
//! Little's law (busy seconds over the interval) unless the state pins it, the rest follow the
//! state's [`Level`]s. Counters start at an offset, because a scraped process has been running a
//! while: one healthy interval scaled by a random factor, so the offsets have the shape of real
//! traffic too.
//!
//! Engine steps are counted from the tokens actually produced: an idle engine takes no steps, so
//! `iteration_tokens_total` shows small batches when traffic is low. Speculative-decoding
//! counters are derived from the generated tokens and the acceptance rate; NIXL observes one
//! transfer per request; DCGM gauges describe one GPU per replica on its own node.
//!
//! Per-token latencies are subsampled (a few draws per request, weighted to the request's token
//! count) to keep generation fast in debug builds while keeping counts and sums consistent.
//! Every replica has its own ChaCha stream derived from the seed, so output does not depend on
//! evaluation order. A replica that stops being scraped keeps `up` (at 0) and loses every other
//! sample from then on.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Binomial, Distribution, Poisson, StandardNormal};

use super::events::{self, Life, Phase};
use super::state::{Level, Running, Scope, SleepState, StateParams, Workload};
use super::{EventKind, EventSpec, KvConnector, MetricsGeneration, ModelSpec, ReplicaInfo, ScenarioSpec, DEFAULT_IMAGE, FIRST_GENERATION};
use vllm_diag::source::Labels;

/// One generated time series: a sample name (`vllm:..._bucket`, `..._total`), its labels and
/// `(unix seconds, value)` points, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedSeries {
    pub name: String,
    pub labels: Labels,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A metric family as OpenMetrics groups it: counters are named without `_total`.
#[derive(Debug)]
pub(crate) struct Family {
    pub name: String,
    pub kind: Kind,
    pub help: &'static str,
    pub metrics: Vec<Metric>,
}

/// One label set of a family; a histogram has one line per bucket plus `_count` and `_sum`.
#[derive(Debug)]
pub(crate) struct Metric {
    pub labels: Labels,
    pub lines: Vec<Line>,
}

#[derive(Debug)]
pub(crate) struct Line {
    pub suffix: &'static str,
    pub le: Option<String>,
    /// One entry per sample time; `None` where the series has no sample (its target was not scraped).
    pub values: Vec<Option<f64>>,
}

#[derive(Debug)]
pub(crate) struct Generated {
    /// Sample times, unix milliseconds.
    pub times_ms: Vec<i64>,
    pub families: Vec<Family>,
}

impl Generated {
    pub(crate) fn into_series(self) -> Vec<GeneratedSeries> {
        let times: Vec<f64> = self.times_ms.iter().map(|t| *t as f64 / 1000.0).collect();
        let mut out = Vec::new();
        for fam in self.families {
            for metric in fam.metrics {
                for line in metric.lines {
                    let mut labels = metric.labels.clone();
                    if let Some(le) = line.le {
                        labels.insert("le".to_string(), le);
                    }
                    let points = times.iter().copied().zip(line.values).filter_map(|(t, v)| Some((t, v?))).collect();
                    out.push(GeneratedSeries { name: format!("{}{}", fam.name, line.suffix), labels, points });
                }
            }
        }
        out.sort_by(|a, b| (&a.name, &a.labels).cmp(&(&b.name, &b.labels)));
        out
    }
}

/// Every family a replica exports, in output order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Fam {
    Up,
    CacheConfig,
    Running,
    Waiting,
    KvUsage,
    SleepState,
    PromptTokens,
    GenerationTokens,
    Preemptions,
    PreemptionsByReason,
    RequestSuccess,
    PrefixQueries,
    PrefixHits,
    ExternalPrefixQueries,
    ExternalPrefixHits,
    Recomputed,
    AdmissionRejections,
    SpecDrafts,
    SpecDraftTokens,
    SpecAccepted,
    NixlFailed,
    HttpRequests,
    Ttft,
    Itl,
    Queue,
    Prefill,
    Decode,
    E2e,
    ReqPromptTokens,
    ReqGenerationTokens,
    ParamsMaxTokens,
    ParamsN,
    IterationTokens,
    ReqPreemptions,
    NixlXfer,
    GpuUtil,
    SmClock,
    GpuTemp,
    Power,
    // The reasons' older name; no longer written (ClocksEventReasons is), kept so the families
    // keep their place in the output.
    #[allow(dead_code)]
    ThrottleReasons,
    Xid,
    FbUsed,
    FbFree,
    // Families added with change events come last, so the older ones keep their place in the output.
    ProcessStart,
    KsmGeneration,
    KsmObservedGeneration,
    KsmContainerInfo,
    KsmRestarts,
    // Added for what else moved, after the others for the same reason.
    ProcessMemory,
    // A real GPU's exporter (`gpu = "h200"`): the newer name of the reasons bitmask, the
    // violation counters (microseconds, published as the exporter's untyped counters without
    // `_total`: gauges here), the power limits and the memory clock.
    ClocksEventReasons,
    PowerViolation,
    ThermalViolation,
    PowerLimit,
    PowerLimitDefault,
    MemClock,
    // vLLM's router in front of a model (router.rs), after the others for the same reason.
    RouterRequests,
    RouterProcessed,
    RouterDecisions,
    RouterCbState,
    RouterCbOutcomes,
    RouterWorkerHealth,
    RouterActiveWorkers,
    RouterGenerateDuration,
    RouterRetries,
    // Its prefill/decode mode (`router = "vllm-router-pd"`).
    RouterPdRequests,
    RouterPdPrefillRequests,
    RouterPdDecodeRequests,
    // NIXL's bytes per transfer (issue 48, item 5), after the others for the same reason.
    NixlBytes,
    // The waiting queue by reason (`waiting_by_reason`), after the others for the same reason.
    WaitingByReason,
    // The router's cache-aware prefix decisions (`router_policy = "cache_aware"`), after the others.
    RouterPrefixDecisions,
}

impl Fam {
    fn base_name(self, generation: MetricsGeneration) -> &'static str {
        let v0 = generation == MetricsGeneration::V0;
        match self {
            Fam::Up => "up",
            Fam::CacheConfig => "vllm:cache_config_info",
            Fam::Running => "vllm:num_requests_running",
            Fam::Waiting => "vllm:num_requests_waiting",
            Fam::KvUsage if v0 => "vllm:gpu_cache_usage_perc",
            Fam::KvUsage => "vllm:kv_cache_usage_perc",
            Fam::SleepState => "vllm:engine_sleep_state",
            Fam::PromptTokens => "vllm:prompt_tokens",
            Fam::GenerationTokens => "vllm:generation_tokens",
            Fam::Preemptions => "vllm:num_preemptions",
            Fam::PreemptionsByReason => "vllm:num_preemptions_by_reason",
            Fam::ReqPreemptions => "vllm:request_num_preemptions",
            Fam::RequestSuccess => "vllm:request_success",
            Fam::PrefixQueries => "vllm:prefix_cache_queries",
            Fam::PrefixHits => "vllm:prefix_cache_hits",
            Fam::ExternalPrefixQueries => "vllm:external_prefix_cache_queries",
            Fam::ExternalPrefixHits => "vllm:external_prefix_cache_hits",
            Fam::Recomputed => "vllm:prompt_tokens_recomputed",
            Fam::AdmissionRejections => "vllm:admission_rejections",
            Fam::SpecDrafts => "vllm:spec_decode_num_drafts",
            Fam::SpecDraftTokens => "vllm:spec_decode_num_draft_tokens",
            Fam::SpecAccepted => "vllm:spec_decode_num_accepted_tokens",
            Fam::NixlFailed => "vllm:nixl_num_failed_transfers",
            Fam::HttpRequests => "http_requests",
            Fam::Ttft => "vllm:time_to_first_token_seconds",
            Fam::Itl if v0 => "vllm:time_per_output_token_seconds",
            Fam::Itl => "vllm:inter_token_latency_seconds",
            Fam::Queue => "vllm:request_queue_time_seconds",
            Fam::Prefill => "vllm:request_prefill_time_seconds",
            Fam::Decode => "vllm:request_decode_time_seconds",
            Fam::E2e => "vllm:e2e_request_latency_seconds",
            Fam::ReqPromptTokens => "vllm:request_prompt_tokens",
            Fam::ReqGenerationTokens => "vllm:request_generation_tokens",
            Fam::ParamsMaxTokens => "vllm:request_params_max_tokens",
            Fam::ParamsN => "vllm:request_params_n",
            Fam::IterationTokens => "vllm:iteration_tokens_total",
            Fam::NixlXfer => "vllm:nixl_xfer_time_seconds",
            Fam::GpuUtil => "DCGM_FI_DEV_GPU_UTIL",
            Fam::SmClock => "DCGM_FI_DEV_SM_CLOCK",
            Fam::GpuTemp => "DCGM_FI_DEV_GPU_TEMP",
            Fam::Power => "DCGM_FI_DEV_POWER_USAGE",
            Fam::ThrottleReasons => "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
            Fam::Xid => "DCGM_FI_DEV_XID_ERRORS",
            Fam::FbUsed => "DCGM_FI_DEV_FB_USED",
            Fam::FbFree => "DCGM_FI_DEV_FB_FREE",
            Fam::ProcessStart => "process_start_time_seconds",
            Fam::KsmGeneration => "kube_deployment_metadata_generation",
            Fam::KsmObservedGeneration => "kube_deployment_status_observed_generation",
            Fam::KsmContainerInfo => "kube_pod_container_info",
            Fam::KsmRestarts => "kube_pod_container_status_restarts",
            Fam::ProcessMemory => "process_resident_memory_bytes",
            Fam::ClocksEventReasons => "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            Fam::PowerViolation => "DCGM_FI_DEV_POWER_VIOLATION",
            Fam::ThermalViolation => "DCGM_FI_DEV_THERMAL_VIOLATION",
            Fam::PowerLimit => "DCGM_FI_DEV_POWER_MGMT_LIMIT",
            Fam::PowerLimitDefault => "DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF",
            Fam::MemClock => "DCGM_FI_DEV_MEM_CLOCK",
            Fam::RouterRequests => "vllm_router_requests",
            Fam::RouterProcessed => "vllm_router_processed_requests",
            Fam::RouterDecisions => "vllm_router_policy_decisions",
            Fam::RouterCbState => "vllm_router_cb_state",
            Fam::RouterCbOutcomes => "vllm_router_cb_outcomes",
            Fam::RouterWorkerHealth => "vllm_router_worker_health",
            Fam::RouterActiveWorkers => "vllm_router_active_workers",
            Fam::RouterGenerateDuration => "vllm_router_generate_duration_seconds",
            Fam::RouterRetries => "vllm_router_retries",
            Fam::RouterPdRequests => "vllm_router_pd_requests",
            Fam::RouterPdPrefillRequests => "vllm_router_pd_prefill_requests",
            Fam::RouterPdDecodeRequests => "vllm_router_pd_decode_requests",
            Fam::NixlBytes => "vllm:nixl_bytes_transferred",
            Fam::WaitingByReason => "vllm:num_requests_waiting_by_reason",
            Fam::RouterPrefixDecisions => "vllm_router_prefix_routing_decisions",
        }
    }

    /// The stored family name: OpenTelemetry pipelines rewrite `vllm:` to `vllm_`.
    pub(crate) fn name(self, generation: MetricsGeneration) -> String {
        let base = self.base_name(generation);
        match base.strip_prefix("vllm:") {
            Some(rest) if generation == MetricsGeneration::V1Otel => format!("vllm_{rest}"),
            _ => base.to_string(),
        }
    }

    pub(crate) fn kind(self) -> Kind {
        match self {
            Fam::RouterRequests
            | Fam::RouterProcessed
            | Fam::RouterDecisions
            | Fam::RouterCbOutcomes
            | Fam::RouterRetries
            | Fam::RouterPrefixDecisions
            | Fam::RouterPdRequests
            | Fam::RouterPdPrefillRequests
            | Fam::RouterPdDecodeRequests => Kind::Counter,
            Fam::RouterGenerateDuration => Kind::Histogram,
            Fam::PromptTokens
            | Fam::GenerationTokens
            | Fam::Preemptions
            | Fam::PreemptionsByReason
            | Fam::RequestSuccess
            | Fam::PrefixQueries
            | Fam::PrefixHits
            | Fam::ExternalPrefixQueries
            | Fam::ExternalPrefixHits
            | Fam::Recomputed
            | Fam::AdmissionRejections
            | Fam::SpecDrafts
            | Fam::SpecDraftTokens
            | Fam::SpecAccepted
            | Fam::NixlFailed
            | Fam::HttpRequests
            | Fam::KsmRestarts => Kind::Counter,
            Fam::Ttft
            | Fam::Itl
            | Fam::Queue
            | Fam::Prefill
            | Fam::Decode
            | Fam::E2e
            | Fam::ReqPromptTokens
            | Fam::ReqGenerationTokens
            | Fam::ParamsMaxTokens
            | Fam::ParamsN
            | Fam::IterationTokens
            | Fam::NixlXfer
            | Fam::NixlBytes
            | Fam::ReqPreemptions => Kind::Histogram,
            _ => Kind::Gauge,
        }
    }

    fn help(self) -> &'static str {
        match self {
            Fam::Up => "Whether the target was scraped successfully.",
            Fam::CacheConfig => "KV cache configuration of the engine, one label per setting.",
            Fam::Running => "Requests currently in the engine's running batch.",
            Fam::Waiting => "Requests queued and not yet scheduled.",
            Fam::KvUsage => "Fraction of KV-cache blocks in use (1 means full).",
            Fam::SleepState => "Engine sleep state: 1 for the current state, 0 for the others.",
            Fam::PromptTokens => "Prompt tokens processed.",
            Fam::GenerationTokens => "Tokens generated.",
            Fam::Preemptions => "Requests preempted by the scheduler.",
            Fam::PreemptionsByReason => "Requests preempted by the scheduler, by reason.",
            Fam::ReqPreemptions => "How many times each finished request was preempted.",
            Fam::RequestSuccess => "Finished requests by reason.",
            Fam::PrefixQueries => "Prompt tokens looked up in the prefix cache.",
            Fam::PrefixHits => "Prompt tokens found in the prefix cache.",
            Fam::ExternalPrefixQueries => "Prompt tokens looked up in the external (KV connector) prefix cache.",
            Fam::ExternalPrefixHits => "Prompt tokens found in the external (KV connector) prefix cache.",
            Fam::Recomputed => "Cached prompt tokens computed again in a forward pass.",
            Fam::AdmissionRejections => "Requests rejected by admission control, by reason.",
            Fam::SpecDrafts => "Speculative-decoding drafts.",
            Fam::SpecDraftTokens => "Draft tokens proposed.",
            Fam::SpecAccepted => "Draft tokens accepted.",
            Fam::NixlFailed => "NIXL KV transfers that failed.",
            Fam::HttpRequests => "HTTP requests by handler, method and status class.",
            Fam::Ttft => "Seconds from arrival to the first output token.",
            Fam::Itl => "Seconds between consecutive output tokens.",
            Fam::Queue => "Seconds a request waited before being scheduled.",
            Fam::Prefill => "Seconds a request spent in prefill.",
            Fam::Decode => "Seconds a request spent in decode.",
            Fam::E2e => "Seconds from arrival to the last token.",
            Fam::ReqPromptTokens => "Prompt length of finished requests, tokens.",
            Fam::ReqGenerationTokens => "Output length of finished requests, tokens.",
            Fam::ParamsMaxTokens => "The max_tokens parameter of finished requests.",
            Fam::ParamsN => "The n parameter of finished requests.",
            Fam::IterationTokens => "Tokens processed per engine step.",
            Fam::NixlXfer => "Seconds one NIXL KV transfer took.",
            Fam::GpuUtil => "GPU utilization (in %).",
            Fam::SmClock => "SM clock frequency (in MHz).",
            Fam::GpuTemp => "GPU temperature (in C).",
            Fam::Power => "Power draw (in W).",
            Fam::ThrottleReasons => "Current clock throttle reasons (bitmask).",
            Fam::Xid => "Value of the last XID error encountered.",
            Fam::FbUsed => "Framebuffer memory used (in MiB).",
            Fam::FbFree => "Framebuffer memory free (in MiB).",
            Fam::ClocksEventReasons => "Current clock event reasons (bitmask).",
            Fam::PowerViolation => "Throttling duration due to power constraints (in us).",
            Fam::ThermalViolation => "Throttling duration due to thermal constraints (in us).",
            Fam::PowerLimit => "Power management limit (in W).",
            Fam::PowerLimitDefault => "Default power management limit (in W).",
            Fam::MemClock => "Memory clock frequency (in MHz).",
            Fam::ProcessStart => "Start time of the process since unix epoch in seconds.",
            Fam::KsmGeneration => "Sequence number representing a specific generation of the desired state.",
            Fam::KsmObservedGeneration => "The generation observed by the deployment controller.",
            Fam::KsmContainerInfo => "Information about a container in a pod.",
            Fam::KsmRestarts => "The number of container restarts per container.",
            Fam::ProcessMemory => "Resident memory size in bytes.",
            // vllm-router 0.1.17's own HELP texts.
            Fam::RouterRequests => "Total number of requests by route and method",
            Fam::RouterProcessed => "Total requests processed by each worker",
            Fam::RouterDecisions => "Total routing policy decisions by policy and worker",
            Fam::RouterCbState => "Circuit breaker state per worker (0=closed, 1=open, 2=half_open)",
            Fam::RouterCbOutcomes => "Total number of circuit breaker outcomes by worker and outcome type (success/failure)",
            Fam::RouterWorkerHealth => "Worker health status (1=healthy, 0=unhealthy)",
            Fam::RouterActiveWorkers => "Number of currently active workers",
            Fam::RouterGenerateDuration => "Generate request duration",
            Fam::RouterRetries => "Total number of request retries by route",
            // 0.1.17's PD-mode page writes no HELP for these (fixtures/router-metrics/): ours.
            Fam::RouterPdRequests => "Requests the router served in prefill/decode mode, by route",
            Fam::RouterPdPrefillRequests => "Requests sent to each prefill worker",
            Fam::RouterPdDecodeRequests => "Requests sent to each decode worker",
            Fam::NixlBytes => "Bytes one NIXL KV transfer moved.",
            Fam::WaitingByReason => "Requests waiting, by why they wait: capacity or deferred.",
            Fam::RouterPrefixDecisions => "Prefix routing decisions by outcome",
        }
    }
}

const TTFT_BUCKETS: &[f64] =
    &[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];
const ITL_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
const LATENCY_BUCKETS: &[f64] = &[0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0];
const ITERATION_BUCKETS: &[f64] = &[1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];
const N_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0];
const NIXL_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Bounds for bytes per NIXL transfer (1 MB to 10 GB; the tool reads only its `_sum`).
const NIXL_BYTES_BUCKETS: &[f64] = &[1e6, 1e7, 1e8, 1e9, 1e10];
/// KV-cache bytes one prompt token takes (an 8B Llama: 32 layers x 8 KV heads x 128 x K and V x
/// 2 bytes): what a transfer moves per prompt token.
const KV_BYTES_PER_TOKEN: f64 = 131_072.0;

/// An H100 80GB HBM3's framebuffer, MiB, and what the driver reserves of it.
const FB_TOTAL_MIB: f64 = 81_559.0;
const FB_RESERVED_MIB: f64 = 530.0;
const GPU_MODEL: &str = "NVIDIA H100 80GB HBM3";
const NAMESPACE: &str = "inference";
/// Healthy KV-cache usage the cache size is chosen for (the middle of the healthy range).
const HEALTHY_KV: f64 = 0.45;
const BLOCK_SIZE: f64 = 16.0;

/// vLLM's 1-2-5 series up to and including `max`.
fn one_two_five(max: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade = 1.0;
    loop {
        for m in [1.0, 2.0, 5.0] {
            let v = m * decade;
            if v > max {
                return out;
            }
            out.push(v);
        }
        decade *= 10.0;
    }
}

/// A bucket bound as vLLM writes it: always with a decimal point (`1.0`, `0.25`, `2560.0`).
pub(crate) fn format_le(bound: f64) -> String {
    if bound.is_infinite() {
        "+Inf".to_string()
    } else if bound.fract() == 0.0 && bound.abs() < 1e15 {
        format!("{bound:.1}")
    } else {
        format!("{bound}")
    }
}

/// A histogram being filled: per-bucket counts (the last is `+Inf`) and the sum.
#[derive(Debug, Clone)]
pub(crate) struct Hist {
    pub(crate) bounds: Vec<f64>,
    pub(crate) counts: Vec<u64>,
    pub(crate) sum: f64,
}

impl Hist {
    pub(crate) fn new(bounds: &[f64]) -> Hist {
        Hist { bounds: bounds.to_vec(), counts: vec![0; bounds.len() + 1], sum: 0.0 }
    }

    /// Record `n` observations of `v`.
    pub(crate) fn observe(&mut self, v: f64, n: u64) {
        if n == 0 || !v.is_finite() {
            return;
        }
        let i = self.bounds.partition_point(|b| *b < v);
        self.counts[i] += n;
        self.sum += v * n as f64;
    }

    fn scale(&mut self, m: u64) {
        for c in &mut self.counts {
            *c *= m;
        }
        self.sum *= m as f64;
    }
}

const H_TTFT: usize = 0;
const H_ITL: usize = 1;
const H_QUEUE: usize = 2;
const H_PREFILL: usize = 3;
const H_DECODE: usize = 4;
const H_E2E: usize = 5;
const H_PROMPT: usize = 6;
const H_GENERATION: usize = 7;
const H_MAX_TOKENS: usize = 8;
const H_N: usize = 9;
const H_ITERATION: usize = 10;
/// Only for models with a NIXL connector.
const H_NIXL: usize = 11;
/// Only for models with `preemption_detail`.
const H_PREEMPTIONS: usize = 12;
/// Only for models with a NIXL connector.
const H_NIXL_BYTES: usize = 13;
const HIST_FAMS: [Fam; 14] = [
    Fam::Ttft,
    Fam::Itl,
    Fam::Queue,
    Fam::Prefill,
    Fam::Decode,
    Fam::E2e,
    Fam::ReqPromptTokens,
    Fam::ReqGenerationTokens,
    Fam::ParamsMaxTokens,
    Fam::ParamsN,
    Fam::IterationTokens,
    Fam::NixlXfer,
    Fam::ReqPreemptions,
    Fam::NixlBytes,
];
/// vLLM's buckets for `request_num_preemptions`.
const PREEMPTION_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0];
/// `num_preemptions_by_reason`'s reasons, in the order `preempt_reasons` counts them.
const PREEMPTION_REASONS: [&str; 2] = ["kv_full", "priority"];

const REASONS_V1: &[&str] = &["stop", "length", "abort", "error"];
const REASONS_V0: &[&str] = &["stop", "length", "abort"];
const R_STOP: usize = 0;
const R_LENGTH: usize = 1;
const R_ABORT: usize = 2;
const R_ERROR: usize = 3;
const HTTP_STATUSES: [&str; 3] = ["2xx", "4xx", "5xx"];
const ADMISSION_REASON: &str = "max_num_queued_reqs";

pub(crate) fn lognormal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> f64 {
    let z: f64 = StandardNormal.sample(rng);
    median * (sigma * z).exp()
}

fn poisson(rng: &mut ChaCha8Rng, lambda: f64) -> u64 {
    if !(lambda.is_finite() && lambda > 0.0) {
        return 0;
    }
    match Poisson::new(lambda) {
        Ok(p) => {
            let v: f64 = p.sample(rng);
            v.max(0.0) as u64
        }
        Err(_) => 0,
    }
}

pub(crate) fn binomial(rng: &mut ChaCha8Rng, n: u64, p: f64) -> u64 {
    if n == 0 || p.is_nan() || p <= 0.0 {
        return 0;
    }
    match Binomial::new(n, p.min(1.0)) {
        Ok(b) => b.sample(rng),
        Err(_) => 0,
    }
}

/// A value inside `(lo, hi)` positioned by a standard-normal noise state.
fn in_range((lo, hi): (f64, f64), z: f64) -> f64 {
    lo + (hi - lo) * (0.5 + 0.22 * z).clamp(0.0, 1.0)
}

/// Host names from model names: `meta-llama/Llama-3.1-8B-Instruct` -> `llama-3-1-8b-instruct`.
fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_end_matches('-');
    if trimmed.is_empty() {
        "model".to_string()
    } else {
        trimmed.to_string()
    }
}

/// One host-name stem per model, unique across the fleet.
pub(crate) fn host_stems(models: &[ModelSpec]) -> Vec<String> {
    let short: Vec<String> = models.iter().map(|m| slug(m.name.rsplit('/').next().unwrap_or(&m.name))).collect();
    let unique = |v: &[String]| {
        let mut s = v.to_vec();
        s.sort();
        s.dedup();
        s.len() == v.len()
    };
    if unique(&short) {
        return short;
    }
    let long: Vec<String> = models.iter().map(|m| slug(&m.name)).collect();
    if unique(&long) {
        return long;
    }
    long.iter().enumerate().map(|(i, s)| format!("{s}-m{i}")).collect()
}

/// Characters Kubernetes uses in generated name suffixes (no vowels, no look-alikes).
const K8S_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn k8s_suffix(rng: &mut ChaCha8Rng, len: usize) -> String {
    (0..len).map(|_| char::from(K8S_ALPHABET[rng.gen_range(0..K8S_ALPHABET.len())])).collect()
}

fn gpu_uuid(rng: &mut ChaCha8Rng) -> String {
    let hex = |rng: &mut ChaCha8Rng, n: usize| -> String { (0..n).map(|_| char::from(b"0123456789abcdef"[rng.gen_range(0..16)])).collect() };
    format!("GPU-{}-{}-{}-{}-{}", hex(rng, 8), hex(rng, 4), hex(rng, 4), hex(rng, 4), hex(rng, 12))
}

/// Names of every replica, model by model: instance, pod (one Deployment per model, so one
/// template hash), node and GPU. Drawn from their own stream, so they do not move when the
/// simulation changes.
pub(crate) fn fleet_names(spec: &ScenarioSpec) -> Vec<Vec<ReplicaInfo>> {
    let stems = host_stems(&spec.models);
    let mut node = 0u32;
    let mut out = Vec::with_capacity(spec.models.len());
    for (mi, model) in spec.models.iter().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x6e61_6d65_735f_7631);
        rng.set_stream(mi as u64);
        let template = k8s_suffix(&mut rng, 10);
        let mut replicas = Vec::with_capacity(model.replicas as usize);
        for index in 0..model.replicas {
            let stem = &stems[mi];
            replicas.push(ReplicaInfo {
                model: model.name.clone(),
                index,
                instance: format!("{stem}-{index}:8000"),
                pod: format!("{stem}-{template}-{}", k8s_suffix(&mut rng, 5)),
                node: format!("gpu-node-{node:02}"),
                gpu_uuid: gpu_uuid(&mut rng),
            });
            node += 1;
        }
        out.push(replicas);
    }
    out
}

/// Collects a replica's values step by step: the first step creates the series, later steps
/// append to them in the same order. When a replica's labels change (a new pod, a new cache
/// configuration), [`Trace::relabel`] starts new series; [`Trace::finish`] pads every series to
/// the full timeline and joins those that kept their labels.
#[derive(Default)]
struct Trace {
    items: Vec<(Fam, Metric)>,
    cursor: usize,
    started: bool,
    /// While set, calls advance through the series without giving them a sample.
    absent: bool,
    /// Steps emitted so far.
    steps: usize,
    /// Where the series of the current label generation begin in `items`.
    base: usize,
}

impl Trace {
    fn begin_step(&mut self) {
        self.cursor = 0;
        self.absent = false;
    }

    fn end_step(&mut self) {
        self.started = true;
        self.steps += 1;
    }

    /// The replica's labels changed: the next step creates its series again.
    fn relabel(&mut self) {
        self.base = self.items.len();
        self.started = false;
    }

    /// Every series padded to the timeline (no sample before it began or after it ended), series
    /// whose labels came back after a relabel joined into one, series without any sample dropped.
    fn finish(mut self) -> Vec<(Fam, Metric)> {
        for (_, m) in &mut self.items {
            for line in &mut m.lines {
                line.values.resize(self.steps, None);
            }
        }
        if self.base == 0 {
            return self.items;
        }
        let mut out: Vec<(Fam, Metric)> = Vec::with_capacity(self.items.len());
        for (fam, m) in self.items {
            match out.iter_mut().find(|(f, o)| *f == fam && o.labels == m.labels) {
                Some((_, o)) => {
                    for (into, from) in o.lines.iter_mut().zip(m.lines) {
                        for (a, b) in into.values.iter_mut().zip(from.values) {
                            if a.is_none() {
                                *a = b;
                            }
                        }
                    }
                }
                None => out.push((fam, m)),
            }
        }
        out.retain(|(_, m)| m.lines.iter().any(|l| l.values.iter().any(Option::is_some)));
        out
    }

    fn scalar(&mut self, fam: Fam, labels: &Labels, extra: &[(&str, &str)], v: f64) {
        let value = if self.absent { None } else { Some(v) };
        if self.started {
            if let Some((_, m)) = self.items.get_mut(self.base + self.cursor) {
                if let Some(line) = m.lines.first_mut() {
                    line.values.push(value);
                }
            }
        } else {
            let mut l = labels.clone();
            for (k, val) in extra {
                l.insert((*k).to_string(), (*val).to_string());
            }
            let suffix = if fam.kind() == Kind::Counter { "_total" } else { "" };
            let mut values = vec![None; self.steps];
            values.push(value);
            self.items.push((fam, Metric { labels: l, lines: vec![Line { suffix, le: None, values }] }));
        }
        self.cursor += 1;
    }

    fn hist(&mut self, fam: Fam, labels: &Labels, h: &Hist) {
        let mut cumulative = Vec::with_capacity(h.counts.len() + 2);
        let mut acc = 0u64;
        for c in &h.counts {
            acc += c;
            cumulative.push(acc as f64);
        }
        cumulative.push(acc as f64); // _count
        cumulative.push(h.sum); // _sum
        let absent = self.absent;
        if self.started {
            if let Some((_, m)) = self.items.get_mut(self.base + self.cursor) {
                for (line, v) in m.lines.iter_mut().zip(cumulative) {
                    line.values.push(if absent { None } else { Some(v) });
                }
            }
        } else {
            let mut lines = Vec::with_capacity(cumulative.len());
            for (i, v) in cumulative.into_iter().enumerate() {
                let (suffix, le) = if i < h.bounds.len() {
                    ("_bucket", Some(format_le(h.bounds[i])))
                } else if i == h.bounds.len() {
                    ("_bucket", Some("+Inf".to_string()))
                } else if i == h.bounds.len() + 1 {
                    ("_count", None)
                } else {
                    ("_sum", None)
                };
                let mut values = vec![None; self.steps];
                values.push(if absent { None } else { Some(v) });
                lines.push(Line { suffix, le, values });
            }
            self.items.push((fam, Metric { labels: labels.clone(), lines }));
        }
        self.cursor += 1;
    }
}

/// The state a replica is in during one interval.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moment {
    pub(crate) st: StateParams,
    /// Arrival multiplier of this replica (state, ramp and weights together).
    mult: f64,
    /// How far through the state's span the interval starts and ends, 0..1.
    pub(crate) frac_prev: f64,
    pub(crate) frac: f64,
    /// Whether this replica is the one `incident.replica` names.
    pub(crate) singled: bool,
}

/// The GPU as DCGM sees it.
#[derive(Debug, Clone, Copy, Default)]
struct Gpu {
    util: f64,
    sm_clock: f64,
    temp: f64,
    power: f64,
    throttle: f64,
    xid: f64,
    fb_used: f64,
    // A real GPU's (`gpu = "h200"`) further fields.
    mem_clock: f64,
    power_violation_us: f64,
    thermal_violation_us: f64,
    power_limit: f64,
}

/// One vLLM server (and, with DCGM, its GPU).
struct Replica<'a> {
    generation: MetricsGeneration,
    /// False: a stream the client closed is counted nowhere but in TTFT, ITL, the token counters
    /// and HTTP 200s (vLLM 0.32).
    counts_aborts: bool,
    wl: Workload,
    model: &'a ModelSpec,
    /// job, instance, pod, namespace, model_name (and engine in V1).
    labels: Labels,
    /// job, instance, pod and namespace (`up`, HTTP metrics).
    target: Labels,
    /// cache_config_info's labels.
    config: Labels,
    /// The vLLM labels without `engine` (admission control sits in the front end).
    frontend: Labels,
    /// DCGM's labels, and its exporter's target labels.
    dcgm: Labels,
    dcgm_target: Labels,
    rng: ChaCha8Rng,
    /// Batch-size cap (`--max-num-seqs`).
    cap: f64,
    /// Where in a state's preemption range this replica sits, 0..1.
    preempt_pos: f64,
    hists: Vec<Hist>,
    prompt_tokens: f64,
    generation_tokens: f64,
    preemptions: f64,
    /// By reason (PREEMPTION_REASONS).
    preempt_reasons: [f64; 2],
    success: [f64; 4],
    prefix_queries: f64,
    prefix_hits: f64,
    /// The external prefix cache's lookups and hits (a model with `kv_connector = "lmcache"`).
    external_queries: f64,
    external_hits: f64,
    recomputed: f64,
    rejections: f64,
    spec: [f64; 3],
    nixl_failed: f64,
    http: [f64; 3],
    running: f64,
    waiting: f64,
    /// Requests waiting for something other than capacity (a state's `deferred`), counted in the
    /// waiting gauge beside `waiting` (those waiting for capacity).
    deferred: f64,
    /// Requests waiting on the server's last data-parallel rank beyond its share (a state's
    /// `rank_waiting`), counted in the waiting gauge too.
    rank_extra: f64,
    kv: f64,
    sleep: SleepState,
    gpu: Gpu,
    /// Whether the target is scraped in the current interval.
    scraped: bool,
    /// Whether the replica is in service discovery at all (replica-added, replica-removed).
    present: bool,
    /// `process_start_time_seconds`: when the current process started, unix seconds.
    process_start: f64,
    /// `process_resident_memory_bytes` of the server process, less its wiggle, and the intervals
    /// simulated (for the wiggle, which draws nothing so that no other series changes).
    rss: f64,
    steps: u64,
    /// KV-cache blocks the healthy working set was sized for, and the blocks the engine has now
    /// (fewer after a config change to a smaller cache: the same working set no longer fits).
    sized_blocks: f64,
    blocks: f64,
    /// AR(1) noise states: waiting, KV usage, running, GPU utilisation, clock, temperature, power.
    noise: [f64; 7],
    prompts: Vec<f64>,
    /// The last interval's arrivals and their seconds of input processing (for a router in front).
    pub(crate) interval: (f64, f64),
}

impl<'a> Replica<'a> {
    fn new(spec: &'a ScenarioSpec, model: &'a ModelSpec, names: &ReplicaInfo, rng: ChaCha8Rng, gpu_blocks: u64, process_start: f64) -> Self {
        let generation = spec.metrics;
        let wl = Workload::DEFAULT;
        let mut target = Labels::new();
        target.insert("job".into(), "vllm".into());
        target.insert("instance".into(), names.instance.clone());
        target.insert("pod".into(), names.pod.clone());
        target.insert("namespace".into(), NAMESPACE.into());
        let mut labels = target.clone();
        labels.insert("model_name".into(), model.name.clone());
        let frontend = labels.clone();
        let mut config = target.clone();
        if generation.is_v1() {
            labels.insert("engine".into(), "0".into());
            config.insert("engine".into(), "0".into());
        }
        for (k, v) in [
            ("block_size", "16"),
            ("cache_dtype", "auto"),
            ("enable_prefix_caching", "True"),
            ("gpu_memory_utilization", "0.9"),
            ("num_cpu_blocks", "None"),
            ("sliding_window", "None"),
        ] {
            config.insert(k.into(), v.into());
        }
        config.insert("num_gpu_blocks".into(), gpu_blocks.to_string());

        let mut dcgm = Labels::new();
        for (k, v) in [("job", "dcgm"), ("gpu", "0"), ("device", "nvidia0"), ("modelName", GPU_MODEL), ("namespace", NAMESPACE), ("container", "vllm")] {
            dcgm.insert(k.into(), v.into());
        }
        dcgm.insert("instance".into(), format!("{}:9400", names.node));
        dcgm.insert("Hostname".into(), names.node.clone());
        dcgm.insert("UUID".into(), names.gpu_uuid.clone());
        dcgm.insert("pod".into(), names.pod.clone());
        if model.gpu.is_some() {
            dcgm.insert("modelName".into(), crate::real_gpu::H200_MODEL_NAME.into());
            dcgm.insert("DCGM_FI_DRIVER_VERSION".into(), crate::real_gpu::H200_DRIVER.into());
        }
        let mut dcgm_target = Labels::new();
        dcgm_target.insert("job".into(), "dcgm".into());
        dcgm_target.insert("instance".into(), format!("{}:9400", names.node));
        dcgm_target.insert("namespace".into(), "gpu-operator".into());
        dcgm_target.insert("pod".into(), format!("nvidia-dcgm-exporter-{}", &names.pod[names.pod.len() - 5..]));

        let token_buckets = one_two_five(f64::from(model.max_model_len));
        let custom = |family: &str, default: &'static [f64]| model.custom_buckets.get(family).map_or(default, Vec::as_slice);
        let hists = HIST_FAMS
            .iter()
            .map(|f| match f {
                Fam::Ttft => Hist::new(custom("time_to_first_token", TTFT_BUCKETS)),
                Fam::Itl => Hist::new(custom("inter_token_latency", ITL_BUCKETS)),
                Fam::Queue | Fam::Prefill | Fam::Decode | Fam::E2e => Hist::new(custom("request_latency", LATENCY_BUCKETS)),
                Fam::ParamsN => Hist::new(N_BUCKETS),
                Fam::IterationTokens => Hist::new(ITERATION_BUCKETS),
                Fam::NixlXfer => Hist::new(NIXL_BUCKETS),
                Fam::NixlBytes => Hist::new(NIXL_BYTES_BUCKETS),
                Fam::ReqPreemptions => Hist::new(PREEMPTION_BUCKETS),
                _ => Hist::new(&token_buckets),
            })
            .collect();
        let mut rng = rng;
        let preempt_pos = rng.gen_range(0.0..1.0);
        let fb_used = (FB_TOTAL_MIB * 0.9).round() + f64::from(rng.gen_range(-40i32..=40));
        Replica {
            generation,
            counts_aborts: spec.counts_aborts,
            wl,
            model,
            labels,
            target,
            config,
            frontend,
            dcgm,
            dcgm_target,
            rng,
            cap: f64::from(model.max_num_seqs),
            preempt_pos,
            hists,
            prompt_tokens: 0.0,
            generation_tokens: 0.0,
            preemptions: 0.0,
            preempt_reasons: [0.0; 2],
            success: [0.0; 4],
            prefix_queries: 0.0,
            prefix_hits: 0.0,
            external_queries: 0.0,
            external_hits: 0.0,
            recomputed: 0.0,
            rejections: 0.0,
            spec: [0.0; 3],
            nixl_failed: 0.0,
            http: [0.0; 3],
            running: 0.0,
            waiting: 0.0,
            deferred: 0.0,
            rank_extra: 0.0,
            kv: 0.0,
            sleep: SleepState::Awake,
            gpu: Gpu { fb_used, ..Gpu::default() },
            scraped: true,
            present: true,
            process_start,
            rss: healthy_rss(&names.instance),
            steps: 0,
            sized_blocks: gpu_blocks as f64,
            blocks: gpu_blocks as f64,
            noise: [0.0; 7],
            prompts: Vec::new(),
            interval: (0.0, 0.0),
        }
    }

    fn healthy_moment(&self) -> Moment {
        Moment { st: StateParams::HEALTHY, mult: 1.0, frac_prev: 0.0, frac: 0.0, singled: false }
    }

    /// Counters as they stand when the first scrape happens: the process has served traffic for a while.
    fn prime(&mut self, secs: f64) {
        let m = self.healthy_moment();
        self.step(secs, &m);
        let k: u64 = self.rng.gen_range(60..=2000);
        for h in &mut self.hists {
            h.scale(k);
        }
        let kf = k as f64;
        for c in [
            &mut self.prompt_tokens,
            &mut self.generation_tokens,
            &mut self.prefix_queries,
            &mut self.prefix_hits,
            &mut self.external_queries,
            &mut self.external_hits,
            &mut self.recomputed,
        ] {
            *c *= kf;
        }
        for c in self.success.iter_mut().chain(self.http.iter_mut()).chain(self.spec.iter_mut()) {
            *c *= kf;
        }
        self.preemptions += f64::from(self.rng.gen_range(1u32..=40));
        if self.generation.is_v1() {
            self.success[R_ERROR] += f64::from(self.rng.gen_range(1u32..=5));
        }
    }

    /// A new process answers at `now_ms`: every counter and histogram starts again from 0, the
    /// engine is empty, and the process may come with another cache size (`blocks`) or in another
    /// pod. Returns whether the series' labels changed.
    fn restart(&mut self, now_ms: i64, blocks: Option<u64>, pod: Option<&str>) -> bool {
        self.process_start = now_ms as f64 / 1000.0;
        self.rss = healthy_rss(self.target.get("instance").map_or("", String::as_str));
        for h in &mut self.hists {
            h.counts.iter_mut().for_each(|c| *c = 0);
            h.sum = 0.0;
        }
        for c in [
            &mut self.prompt_tokens,
            &mut self.generation_tokens,
            &mut self.preemptions,
            &mut self.prefix_queries,
            &mut self.prefix_hits,
            &mut self.external_queries,
            &mut self.external_hits,
            &mut self.recomputed,
            &mut self.rejections,
            &mut self.nixl_failed,
            &mut self.running,
            &mut self.waiting,
            &mut self.deferred,
            &mut self.rank_extra,
            &mut self.kv,
        ] {
            *c = 0.0;
        }
        for c in self.success.iter_mut().chain(self.http.iter_mut()).chain(self.spec.iter_mut()) {
            *c = 0.0;
        }
        self.scraped = true;
        let mut relabelled = false;
        if let Some(b) = blocks {
            self.blocks = b as f64;
            if self.config.get("num_gpu_blocks") != Some(&b.to_string()) {
                self.config.insert("num_gpu_blocks".into(), b.to_string());
                relabelled = true;
            }
        }
        if let Some(pod) = pod {
            for l in [&mut self.labels, &mut self.target, &mut self.config, &mut self.frontend, &mut self.dcgm] {
                l.insert("pod".into(), pod.to_string());
            }
            relabelled = true;
        }
        relabelled
    }

    /// Advance the AR(1) noise states one interval.
    fn drift(&mut self) {
        for z in &mut self.noise {
            let e: f64 = StandardNormal.sample(&mut self.rng);
            *z = 0.8 * *z + 0.6 * e;
        }
    }

    /// A gauge's next value under `level`; `arrived` is what accumulates.
    fn level(&self, level: Level, noise: usize, frac: f64, current: f64, arrived: f64) -> f64 {
        let z = self.noise[noise];
        match level {
            Level::Wander(lo, hi) => in_range((lo, hi), z),
            Level::Ramp(from, to) => {
                let (lo, hi) = if from <= to { (from, to) } else { (to, from) };
                (from + (to - from) * frac + 0.025 * (hi - lo) * z).clamp(lo, hi)
            }
            Level::Hold => current,
            Level::Accumulate => current + arrived,
        }
    }

    /// How much slower each decode step is for the batch the arrivals offer than for the healthy
    /// one, under a state whose decode follows the batch (`itl_batch_k` > 0): a step costs
    /// `1 + batch / k` (a fixed part and a part per sequence). The batch is the one the arrivals
    /// offer at the healthy speed (rate times the healthy service time), so that a slower step does
    /// not feed back into a larger batch. 1 otherwise.
    fn batch_slowdown(&self, st: &StateParams, mult: f64) -> f64 {
        if st.itl_batch_k <= 0.0 {
            return 1.0;
        }
        let healthy = self.model.rate * self.wl.mean_service_s(&StateParams::HEALTHY);
        let offered = (healthy * mult).min(self.cap);
        (1.0 + offered / st.itl_batch_k) / (1.0 + healthy / st.itl_batch_k)
    }

    /// Simulate one scrape interval of `secs` seconds.
    fn step(&mut self, secs: f64, m: &Moment) {
        let mut st = m.st;
        if st.stall_bursts.iter().any(|(a, b)| m.frac_prev < *b && m.frac > *a) {
            // A stuck engine: nothing served, and its gauges, published from the engine's own
            // step (vLLM V1), stay where the last step left them.
            st.serving = false;
            st.running = Running::Hold;
            st.waiting = Level::Hold;
            st.kv_usage = Level::Hold;
        }
        let wl = self.wl;
        self.scraped = st.scraped;
        self.sleep = st.sleep;
        self.steps += 1;
        self.interval = (0.0, 0.0);
        self.rss += (HEALTHY_RSS_CREEP + st.memory_growth_per_s) * secs;
        self.drift();
        self.update_gpu(&st, secs);
        if !st.scraped {
            // Nobody reads this server any more; what it does is invisible.
            return;
        }
        // What the state's working set needs of the cache the engine has now (1: all of it).
        let kv_demand = {
            let kv = self.level(st.kv_usage, 1, m.frac, self.kv, 0.0);
            let kv = if st.kv_follows_load { kv * m.mult } else { kv };
            if self.blocks == self.sized_blocks {
                kv
            } else {
                kv * self.sized_blocks / self.blocks
            }
        };
        let kv_full = st.serving && kv_demand > 1.0;
        if kv_full {
            // The working set no longer fits: the scheduler preempts running requests, which
            // recompute their prompts, and new ones wait for free blocks.
            st.queue_median_s = st.queue_median_s.max(0.8);
            st.queue_sigma = st.queue_sigma.max(0.6);
            st.prefill *= 1.5;
            st.itl *= 1.3;
            st.waiting = Level::Wander(5.0, 20.0);
        }
        // More work offered than max_num_seqs slots can hold: the batch is pinned at its cap and
        // the excess waits for a slot (Little's law on the queue).
        if st.serving && st.running == Running::FromLoad && !st.arrivals_at_capacity {
            let service = wl.mean_service_s(&st);
            let offered = self.model.rate * m.mult * service;
            if offered > self.cap {
                let excess = offered - self.cap;
                st.running = Running::AtCap;
                st.waiting = Level::Wander(excess * 0.8, excess * 1.2);
                st.queue_median_s = st.queue_median_s.max(service * excess / self.cap);
                st.queue_sigma = st.queue_sigma.min(0.5);
            }
        }

        let base_rate = if st.arrivals_at_capacity { self.cap / wl.mean_service_s(&st).max(1e-3) } else { self.model.rate };
        let arrivals = poisson(&mut self.rng, base_rate * m.mult * secs);
        self.interval.0 = arrivals as f64;
        let n5xx = binomial(&mut self.rng, arrivals, st.http_5xx_share);
        let n4xx = binomial(&mut self.rng, arrivals - n5xx, wl.http_4xx_share);
        let admitted = arrivals - n5xx - n4xx;
        let mut rejected = binomial(&mut self.rng, admitted, st.reject_share);
        let engine = admitted - rejected;
        if m.singled && st.reject_burst > 0 && m.frac_prev < 0.5 && m.frac >= 0.5 {
            rejected += u64::from(st.reject_burst);
        }
        self.rejections += rejected as f64;
        // rejected by admission control: 429 Too Many Requests
        self.http[1] += (n4xx + rejected) as f64;
        self.http[2] += n5xx as f64;

        let previous_waiting = self.waiting;
        if !st.waiting_bursts.is_empty() && !st.waiting_bursts.iter().any(|(a, b)| m.frac_prev < *b && m.frac > *a) {
            st.waiting = StateParams::HEALTHY.waiting;
        }
        self.waiting = self.level(st.waiting, 0, m.frac, previous_waiting, engine as f64).max(0.0).round();
        self.deferred = if st.deferred.1 > 0.0 { in_range(st.deferred, self.noise[3]).round() } else { 0.0 };
        self.rank_extra = if st.rank_waiting.1 > 0.0 { in_range(st.rank_waiting, self.noise[3]).round() } else { 0.0 };

        if !st.serving {
            self.running = match st.running {
                Running::Around(lo, hi) => in_range((lo, hi), self.noise[2]).round(),
                Running::AtCap => self.cap,
                Running::Hold | Running::FromLoad => self.running,
            }
            .min(self.cap);
            self.kv = self.level(st.kv_usage, 1, m.frac, self.kv, 0.0).clamp(0.0, 1.0);
            return;
        }

        let max_len = f64::from(self.model.max_model_len);
        let itl_median = wl.itl_median_s * st.itl * self.batch_slowdown(&st, m.mult);
        let total_weight: u32 = wl.max_tokens.iter().map(|(_, w)| *w).sum();
        let queue_median =
            if st.queue_follows_waiting && engine > 0 { st.queue_median_s.max(self.waiting / (engine as f64 / secs)) } else { st.queue_median_s };
        let nixl = self.model.kv_connector == Some(KvConnector::Nixl);

        let mut busy = 0.0;
        let mut interval_prompt = 0.0;
        let mut interval_output = 0.0;
        self.prompts.clear();
        for _ in 0..engine {
            let rng = &mut self.rng;
            let prompt = lognormal(rng, wl.prompt_median * st.prompt, wl.prompt_sigma).round().clamp(1.0, max_len - 1.0);
            let mut pick = rng.gen_range(0..total_weight.max(1));
            let mut max_tokens = 1024.0;
            for (v, w) in wl.max_tokens {
                if pick < w {
                    max_tokens = (f64::from(v) * st.max_tokens).round();
                    break;
                }
                pick -= w;
            }
            let n = if rng.gen_bool(wl.n2_share) { 2.0 } else { 1.0 };
            let wanted = lognormal(rng, wl.output_median * st.output, wl.output_sigma).round().max(1.0);
            let room = (max_len - prompt).max(1.0);
            let (mut out, mut reason) = if wanted >= max_tokens.min(room) { (max_tokens.min(room), R_LENGTH) } else { (wanted, R_STOP) };
            let fate: f64 = rng.gen_range(0.0..1.0);
            if fate < st.abort_share {
                out = (out * rng.gen_range(0.0..1.0)).floor().max(1.0);
                reason = R_ABORT;
            } else if fate < st.abort_share + st.error_share && self.generation.is_v1() {
                out = (out * rng.gen_range(0.0..0.5)).floor().max(1.0);
                reason = R_ERROR;
            }
            let queue = lognormal(rng, queue_median, st.queue_sigma);
            let prefill = wl.prefill_per_token_s * prompt * st.prefill * lognormal(rng, 1.0, wl.prefill_sigma) + lognormal(rng, wl.first_step_s * st.itl, 0.3);
            // Drawn only when the state has it, so other states' random streams stay as they were.
            let input = if st.input_s > 0.0 { lognormal(rng, st.input_s, 0.2) } else { 0.0 };
            let ttft = input + queue + prefill;
            self.interval.1 += input;
            let req_itl = lognormal(rng, itl_median, wl.itl_request_sigma);
            let tokens_after_first = (out - 1.0).max(0.0) as u64;
            let mut decode = 0.0;
            if tokens_after_first > 0 {
                let draws = tokens_after_first.min(4);
                let base = tokens_after_first / draws;
                let extra = tokens_after_first % draws;
                for j in 0..draws {
                    let weight = base + u64::from(j < extra);
                    let x = req_itl * lognormal(rng, 1.0, wl.itl_token_sigma);
                    self.hists[H_ITL].observe(x, weight);
                    decode += x * weight as f64;
                }
            }
            let hit_share = {
                let z: f64 = StandardNormal.sample(&mut self.rng);
                (st.prefix_hit_ratio * (1.0 + 0.3 * z)).clamp(0.0, 1.0)
            };
            // A disaggregated request waits in the decode instance's queue for its KV: vLLM
            // records it scheduled only once the transfer is done (WAITING_FOR_REMOTE_KVS comes
            // before the SCHEDULED event), so the transfer is in its queue time and its TTFT.
            let (queue, ttft) = if nixl {
                let x = lognormal(&mut self.rng, wl.nixl_median_s * st.nixl_xfer, wl.nixl_sigma);
                self.hists[H_NIXL].observe(x * st.nixl_time_scale, 1);
                self.hists[H_NIXL_BYTES].observe(prompt * KV_BYTES_PER_TOKEN, 1);
                (queue + x, ttft + x)
            } else {
                (queue, ttft)
            };
            let h = &mut self.hists;
            h[H_TTFT].observe(ttft, 1);
            if reason == R_ABORT && !self.counts_aborts {
                // Its first token and tokens were counted; it never finishes in the metrics.
                interval_prompt += prompt;
                interval_output += out;
                self.prefix_queries += prompt;
                self.prefix_hits += (prompt * hit_share).round();
                busy += prefill + decode;
                self.prompts.push(prompt);
                continue;
            }
            h[H_QUEUE].observe(queue, 1);
            h[H_PREFILL].observe(prefill, 1);
            h[H_DECODE].observe(decode, 1);
            h[H_E2E].observe(ttft + decode, 1);
            h[H_PROMPT].observe(prompt, 1);
            h[H_GENERATION].observe(out, 1);
            h[H_MAX_TOKENS].observe(max_tokens, 1);
            h[H_N].observe(n, 1);
            interval_prompt += prompt;
            interval_output += out;
            self.success[reason] += 1.0;
            self.prefix_queries += prompt;
            self.prefix_hits += (prompt * hit_share).round();
            if self.model.kv_connector == Some(KvConnector::Lmcache) {
                // What the local cache missed, looked up outside; no random draw, so no other
                // scenario's data changes.
                let missed = (prompt - (prompt * hit_share).round()).max(0.0);
                self.external_queries += missed;
                self.external_hits += (missed * st.external_hit_ratio).round();
            }
            busy += prefill + decode;
            self.prompts.push(prompt);
        }
        self.prompt_tokens += interval_prompt;
        self.generation_tokens += interval_output;
        self.http[0] += engine as f64;
        if st.recomputed_share > 0.0 {
            self.recomputed += (interval_prompt * st.recomputed_share * lognormal(&mut self.rng, 1.0, 0.1)).round();
        }

        // gauges at the interval's end
        let little = busy / secs;
        self.running = match st.running {
            Running::FromLoad => (little * lognormal(&mut self.rng, 1.0, 0.08)).round(),
            Running::AtCap => self.cap - if self.rng.gen_bool(0.3) { 1.0 } else { 0.0 },
            Running::Around(lo, hi) => in_range((lo, hi), self.noise[2]).round(),
            Running::Hold => self.running,
        }
        .clamp(0.0, self.cap);
        self.kv = if kv_full { in_range((0.955, 1.0), self.noise[1]) } else { kv_demand.clamp(0.0, 1.0) };

        let preempted_before = self.preemptions;
        let (lo, hi) = st.preemptions_per_s;
        let in_burst = st.preemption_bursts.is_empty() || st.preemption_bursts.iter().any(|(a, b)| m.frac_prev < *b && m.frac > *a);
        if in_burst {
            let rate = lo + (hi - lo) * self.preempt_pos;
            self.preemptions += poisson(&mut self.rng, rate * secs) as f64;
        }
        self.preemptions += poisson(&mut self.rng, st.preemptions_per_request * engine as f64) as f64;
        if kv_full {
            let rate = (0.4 + 0.6 * (kv_demand - 1.0)).min(1.5);
            self.preemptions += poisson(&mut self.rng, rate * secs) as f64;
        }
        if self.model.preemption_detail {
            // Split without drawing, so the other states' random streams stay as they were.
            let new = self.preemptions - preempted_before;
            let priority = (new * st.preemption_priority_share).round();
            self.preempt_reasons[0] += new - priority;
            self.preempt_reasons[1] += priority;
            let each = st.preemptions_each.max(1.0);
            let preempted = ((new / each).round() as u64).min(engine);
            self.hists[H_PREEMPTIONS].observe(each.round(), preempted);
            self.hists[H_PREEMPTIONS].observe(0.0, engine - preempted);
        }

        if self.model.spec_decode {
            // every draft step emits its accepted tokens plus one from the target model
            let k = wl.spec_tokens;
            let drafts = (interval_output / (1.0 + k * st.spec_acceptance)).round();
            let draft_tokens = drafts * k;
            let accepted = binomial(&mut self.rng, draft_tokens as u64, st.spec_acceptance) as f64;
            self.spec[0] += drafts;
            self.spec[1] += draft_tokens;
            self.spec[2] += accepted;
        }
        if nixl {
            self.nixl_failed += poisson(&mut self.rng, st.nixl_failures_per_s * secs) as f64;
        }

        // Engine steps. Decode steps happen only while something runs (the chance of that is
        // 1 - e^-L for L requests in flight on average); each prompt rides along in one step.
        let possible = (secs / itl_median).max(1.0);
        let decode_steps = (possible * (1.0 - (-little).exp()) * st.step_split).round() as u64;
        let prefill_steps = self.prompts.len() as u64;
        for p in &self.prompts {
            let v = (self.running + p.min(wl.max_batched_tokens)).round();
            self.hists[H_ITERATION].observe(v, 1);
        }
        if decode_steps > 0 && interval_output > prefill_steps as f64 {
            let batch = ((interval_output - prefill_steps as f64) / decode_steps as f64).max(1.0);
            let draws = decode_steps.min(8);
            let base = decode_steps / draws;
            let extra = decode_steps % draws;
            for j in 0..draws {
                let z: f64 = StandardNormal.sample(&mut self.rng);
                let v = (batch + z * batch.sqrt()).round().max(1.0);
                self.hists[H_ITERATION].observe(v, base + u64::from(j < extra));
            }
        }
    }

    /// DCGM's view of the GPU for the interval.
    fn update_gpu(&mut self, st: &StateParams, secs: f64) {
        let g = st.gpu;
        if self.model.gpu.is_some() {
            return self.replay_gpu(st, secs);
        }
        self.gpu.util = in_range(g.util, self.noise[3]).round();
        self.gpu.sm_clock = (in_range(g.sm_clock_mhz, self.noise[4]) / 15.0).round() * 15.0;
        self.gpu.temp = in_range(g.temp_c, self.noise[5]).round();
        self.gpu.power = (in_range(g.power_w, self.noise[6]) * 1000.0).round() / 1000.0;
        self.gpu.throttle = f64::from(g.throttle_reasons);
        self.gpu.xid = f64::from(g.xid);
    }

    /// A real GPU's reading for the interval: one recorded sample from the pool the state's work
    /// puts it in (idle when it serves nothing, compute-bound at the power cap for `compute_share`
    /// of the scrapes, decode-shaped otherwise), then what the state lays over it: a lowered power
    /// limit (the draw held at it, the cap set, the clock cut in proportion), fault reasons (their
    /// bits, the state's clock and temperature), an XID. The violation counters grow by the
    /// interval's share spent capped or throttled.
    fn replay_gpu(&mut self, st: &StateParams, secs: f64) {
        use crate::real_gpu::{pools, Pool, REASON_SW_POWER_CAP};
        let g = st.gpu;
        let idle = !st.serving || g.util.1 <= 0.0 || self.sleep != SleepState::Awake;
        let capped_share = if idle { 0.0 } else { g.compute_share.clamp(0.0, 1.0) };
        let pool = if idle {
            Pool::Idle
        } else if self.rng.gen::<f64>() < capped_share {
            Pool::Compute
        } else {
            Pool::Decode
        };
        let samples = &pools()[pool as usize];
        let s = samples[self.rng.gen_range(0..samples.len())];
        let mut reasons = s.clocks_event_reasons;
        let (mut clock, mut power, mut temp) = (s.sm_clock_mhz, s.power_w, s.temp_c);
        let mut capped = capped_share;
        if power > g.power_limit_w {
            clock = (clock * g.power_limit_w / power / 15.0).round() * 15.0;
            power = g.power_limit_w - self.rng.gen_range(0.0..4.0);
            reasons |= REASON_SW_POWER_CAP;
            capped = if idle { 0.0 } else { 1.0 };
        }
        let faults = g.throttle_reasons & !REASON_SW_POWER_CAP;
        if faults != 0 {
            reasons |= faults;
            clock = (in_range(g.sm_clock_mhz, self.noise[4]) / 15.0).round() * 15.0;
            self.gpu.thermal_violation_us += (secs * 1e6).round();
        }
        if g.temp_c != crate::GpuParams::HEALTHY.temp_c {
            temp = in_range(g.temp_c, self.noise[5]).round();
        }
        self.gpu.util = if g.util.1 <= 0.0 { 0.0 } else { s.gpu_util_pct };
        self.gpu.sm_clock = clock;
        self.gpu.mem_clock = s.mem_clock_mhz;
        self.gpu.temp = temp;
        self.gpu.power = (power * 1000.0).round() / 1000.0;
        self.gpu.throttle = f64::from(reasons);
        self.gpu.xid = f64::from(g.xid);
        self.gpu.power_limit = g.power_limit_w;
        self.gpu.power_violation_us += (capped * secs * 1e6).round();
    }

    fn emit(&self, t: &mut Trace) {
        let v1 = self.generation.is_v1();
        let l = &self.labels;
        t.begin_step();
        t.absent = !self.present;
        t.scalar(Fam::Up, &self.target, &[], if self.scraped { 1.0 } else { 0.0 });
        t.absent = !self.present || !self.scraped;
        t.scalar(Fam::CacheConfig, &self.config, &[], 1.0);
        t.scalar(Fam::ProcessStart, &self.target, &[], self.process_start);
        t.scalar(Fam::ProcessMemory, &self.target, &[], self.rss_now());
        let ranks = if v1 { self.model.dp_ranks.max(1) } else { 1 };
        if ranks == 1 {
            t.scalar(Fam::Running, l, &[], self.running);
            t.scalar(Fam::Waiting, l, &[], self.waiting + self.deferred + self.rank_extra);
            t.scalar(Fam::KvUsage, l, &[], self.kv);
        } else {
            // Data parallelism: the server's requests split between its ranks (the first ones take
            // what does not divide), the last rank holding `rank_extra` more; each rank's cache as
            // full as the server's.
            let split = |total: f64, k: u32| {
                let (n, total) = (f64::from(ranks), total.max(0.0).round());
                (total / n).floor() + if f64::from(k) < total % n { 1.0 } else { 0.0 }
            };
            let engines: Vec<String> = (0..ranks).map(|k| k.to_string()).collect();
            for k in 0..ranks {
                t.scalar(Fam::Running, l, &[("engine", &engines[k as usize])], split(self.running, k));
            }
            for k in 0..ranks {
                let extra = if k == ranks - 1 { self.rank_extra } else { 0.0 };
                t.scalar(Fam::Waiting, l, &[("engine", &engines[k as usize])], split(self.waiting + self.deferred, k) + extra);
            }
            for k in 0..ranks {
                t.scalar(Fam::KvUsage, l, &[("engine", &engines[k as usize])], self.kv);
            }
        }
        if v1 {
            for s in SleepState::ALL {
                t.scalar(Fam::SleepState, l, &[("sleep_state", s.as_str())], if s == self.sleep { 1.0 } else { 0.0 });
            }
        }
        t.scalar(Fam::PromptTokens, l, &[], self.prompt_tokens);
        t.scalar(Fam::GenerationTokens, l, &[], self.generation_tokens);
        t.scalar(Fam::Preemptions, l, &[], self.preemptions);
        if v1 && self.model.preemption_detail {
            for (r, v) in PREEMPTION_REASONS.iter().zip(self.preempt_reasons) {
                t.scalar(Fam::PreemptionsByReason, l, &[("reason", r)], v);
            }
        }
        let reasons = if v1 { REASONS_V1 } else { REASONS_V0 };
        for (i, r) in reasons.iter().enumerate() {
            t.scalar(Fam::RequestSuccess, l, &[("finished_reason", r)], self.success[i]);
        }
        if v1 {
            t.scalar(Fam::PrefixQueries, l, &[], self.prefix_queries);
            t.scalar(Fam::PrefixHits, l, &[], self.prefix_hits);
            t.scalar(Fam::Recomputed, l, &[], self.recomputed);
            t.scalar(Fam::AdmissionRejections, &self.frontend, &[("reason", ADMISSION_REASON)], self.rejections);
            if self.model.spec_decode {
                t.scalar(Fam::SpecDrafts, l, &[], self.spec[0]);
                t.scalar(Fam::SpecDraftTokens, l, &[], self.spec[1]);
                t.scalar(Fam::SpecAccepted, l, &[], self.spec[2]);
            }
            if self.model.kv_connector == Some(KvConnector::Nixl) {
                t.scalar(Fam::NixlFailed, l, &[], self.nixl_failed);
            }
            if self.model.kv_connector == Some(KvConnector::Lmcache) {
                t.scalar(Fam::ExternalPrefixQueries, l, &[], self.external_queries);
                t.scalar(Fam::ExternalPrefixHits, l, &[], self.external_hits);
            }
            if self.model.waiting_by_reason {
                t.scalar(Fam::WaitingByReason, l, &[("reason", "capacity")], self.waiting);
                t.scalar(Fam::WaitingByReason, l, &[("reason", "deferred")], self.deferred);
            }
            for (i, s) in HTTP_STATUSES.iter().enumerate() {
                t.scalar(Fam::HttpRequests, &self.target, &[("handler", "/v1/chat/completions"), ("method", "POST"), ("status", s)], self.http[i]);
            }
        }
        for (i, fam) in HIST_FAMS.iter().enumerate() {
            if matches!(fam, Fam::NixlXfer | Fam::NixlBytes) && self.model.kv_connector != Some(KvConnector::Nixl) {
                continue;
            }
            if *fam == Fam::ReqPreemptions && !(v1 && self.model.preemption_detail) {
                continue;
            }
            t.hist(*fam, l, &self.hists[i]);
        }
        // The GPU exporter is its own target and keeps answering while the replica exists.
        t.absent = !self.present;
        if self.model.dcgm {
            let d = &self.dcgm;
            let g = self.gpu;
            let fb_used = if self.sleep == SleepState::Awake { g.fb_used } else { (g.fb_used * 0.015).round() };
            t.scalar(Fam::Up, &self.dcgm_target, &[], 1.0);
            t.scalar(Fam::GpuUtil, d, &[], g.util);
            t.scalar(Fam::SmClock, d, &[], g.sm_clock);
            t.scalar(Fam::GpuTemp, d, &[], g.temp);
            t.scalar(Fam::Power, d, &[], g.power);
            // Current exporters publish the reasons as DCGM_FI_DEV_CLOCKS_EVENT_REASONS (the rule
            // tests cover the older DCGM_FI_DEV_CLOCK_THROTTLE_REASONS).
            t.scalar(Fam::ClocksEventReasons, d, &[], g.throttle);
            t.scalar(Fam::Xid, d, &[], g.xid);
            t.scalar(Fam::FbUsed, d, &[], fb_used);
            t.scalar(Fam::FbFree, d, &[], FB_TOTAL_MIB - FB_RESERVED_MIB - fb_used);
            if self.model.gpu.is_some() {
                t.scalar(Fam::PowerViolation, d, &[], g.power_violation_us);
                t.scalar(Fam::ThermalViolation, d, &[], g.thermal_violation_us);
                t.scalar(Fam::PowerLimit, d, &[], g.power_limit);
                t.scalar(Fam::PowerLimitDefault, d, &[], crate::real_gpu::H200_POWER_LIMIT_W);
                t.scalar(Fam::MemClock, d, &[], g.mem_clock);
            }
        }
        t.end_step();
    }
}

/// A fresh server process's resident memory: about a gigabyte (what vLLM 0.32's API server held
/// on the real engine, 0.95 to 1.02 GB), a little different on each replica (up to 64 MB, from
/// its instance's name, so nothing is drawn).
fn healthy_rss(instance: &str) -> f64 {
    let h = instance.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    0.95e9 + (h % 64) as f64 * 1e6
}

/// How fast a healthy process's resident memory creeps up, bytes a second: the real engine's
/// grew by 11 MB over 47 minutes of load and idle alike (fixtures/real-engine).
const HEALTHY_RSS_CREEP: f64 = 4e3;

impl Replica<'_> {
    /// The resident memory as scraped: the level plus a page-sized wiggle of up to 2 MB, in
    /// 128 KiB steps, from the interval's count (nothing drawn).
    fn rss_now(&self) -> f64 {
        let page = 131_072.0;
        let wiggle = ((self.steps.wrapping_mul(2_654_435_761) >> 7) % 31) as f64 - 15.0;
        ((self.rss / page).round() + wiggle) * page
    }
}

/// The state replica `ri` of `model` is in during the interval `(prev_ms, now_ms]`.
pub(crate) fn state_at(spec: &ScenarioSpec, model: &ModelSpec, ri: u32, prev_ms: i64, now_ms: i64) -> Moment {
    let shares = model.arrival_shares();
    let base_share = shares.get(ri as usize).copied().unwrap_or(1.0);
    let healthy = Moment { st: StateParams::HEALTHY, mult: base_share, frac_prev: 0.0, frac: 0.0, singled: false };
    let (Some(incident), Some(onset)) = (spec.incident.as_ref().filter(|i| i.model == model.name), spec.incident_onset()) else {
        return healthy;
    };
    let singled = incident.replica == ri;
    let onset = onset.timestamp_millis();
    if prev_ms < onset {
        return Moment { singled, ..healthy };
    }
    let p = incident.kind.params();
    let end = spec.window_end().timestamp_millis();
    let frac_of = |t: i64| if end > onset { ((t - onset) as f64 / (end - onset) as f64).clamp(0.0, 1.0) } else { 1.0 };
    let (frac_prev, frac) = (frac_of(prev_ms), frac_of(now_ms));
    if p.scope == Scope::Replica && !singled {
        return Moment { frac_prev, frac, ..healthy };
    }
    // A pool of a router in PD mode: the other pool's workers stay healthy.
    let prefills = model.router.is_some_and(|r| r.prefills(ri, model.replicas));
    if (p.scope == Scope::PrefillPool && !prefills) || (p.scope == Scope::DecodePool && prefills) {
        return Moment { frac_prev, frac, ..healthy };
    }
    let share = if p.replica_weight != 1.0 {
        let n = shares.len() as f64;
        let weights: Vec<f64> = shares.iter().enumerate().map(|(i, s)| if i as u32 == incident.replica { s * p.replica_weight } else { *s }).collect();
        let total: f64 = weights.iter().sum();
        weights.get(ri as usize).map(|w| w * n / total).unwrap_or(1.0)
    } else {
        base_share
    };
    let mult = p.arrivals + (p.arrivals_at_end - p.arrivals) * frac;
    // A circuit the router holds open: that replica gets nothing, its peers its share.
    let share = match (circuit_open(&p, frac_prev, frac), singled) {
        (true, true) => 0.0,
        (true, false) if shares.len() > 1 => share * shares.len() as f64 / (shares.len() - 1) as f64,
        _ => share,
    };
    Moment { st: p, mult: mult * share, frac_prev, frac, singled }
}

/// Whether the router holds the singled replica's circuit open during `(frac_prev, frac]`.
pub(crate) fn circuit_open(p: &StateParams, frac_prev: f64, frac: f64) -> bool {
    p.router_open.iter().any(|(a, b)| frac_prev < *b && frac > *a)
}

/// KV-cache blocks sized so the healthy working set fills [`HEALTHY_KV`] of them: expected
/// running requests times their mean footprint (the prompt plus half the output so far).
pub(crate) fn gpu_blocks(model: &ModelSpec) -> u64 {
    let wl = Workload::DEFAULT;
    let healthy = StateParams::HEALTHY;
    let running = model.rate * wl.mean_service_s(&healthy);
    let prompt = wl.prompt_median * (wl.prompt_sigma * wl.prompt_sigma / 2.0).exp();
    let footprint = prompt + wl.mean_output(&healthy) / 2.0;
    ((running * footprint / BLOCK_SIZE / HEALTHY_KV).ceil() as u64).max(64)
}

/// Run the whole fleet over the scenario's timeline.
pub(crate) fn simulate(spec: &ScenarioSpec) -> Generated {
    let n = spec.sample_count();
    let interval_ms = spec.interval.as_millis() as i64;
    let start_ms = spec.start.timestamp_millis();
    let times_ms: Vec<i64> = (0..n as i64).map(|i| start_ms + i * interval_ms).collect();
    let secs = spec.interval.as_secs_f64();
    let names = fleet_names(spec);
    let lives = events::lives(spec);
    let new_pods = rollout_pods(spec);

    let mut by_family: BTreeMap<Fam, Vec<Metric>> = BTreeMap::new();
    let mut fleet_index = 0u32;
    for (mi, model) in spec.models.iter().enumerate() {
        let blocks = gpu_blocks(model);
        let factors = serving_factors(model, &lives[mi], &times_ms);
        // Each replica's arrivals and input seconds per sample, for a router in front.
        let mut trails: Vec<Vec<(f64, f64)>> = Vec::new();
        for (ri, replica_names) in (0..model.replicas).zip(&names[mi]) {
            let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
            rng.set_stream(((mi as u64) << 32) | u64::from(ri));
            // The first process started a while before the data begins.
            let started = (start_ms / 1000 - 7200 - i64::from(fleet_index) * 37) as f64;
            fleet_index += 1;
            let mut replica = Replica::new(spec, model, replica_names, rng, blocks, started);
            replica.cap = f64::from(model.max_num_seqs_of(ri));
            let life = &lives[mi][ri as usize];
            let mut trace = Trace::default();
            replica.prime(secs);
            replica.present = life.phase(times_ms[0]) != Phase::Absent;
            replica.emit(&mut trace);
            let mut trail = vec![(0.0, 0.0)];
            for (k, w) in times_ms.windows(2).enumerate() {
                let mut moment = state_at(spec, model, ri, w[0], w[1]);
                let phase = life.phase(w[1]);
                match phase {
                    Phase::Up => {
                        moment.mult *= factors[k + 1];
                        let slow = life.slowdown(w[1]);
                        moment.st.itl *= slow;
                        moment.st.prefill *= slow;
                    }
                    // not answering, or a process that only now starts: nothing to simulate
                    Phase::Absent | Phase::Down | Phase::Fresh(_) => moment.st.scraped = false,
                }
                replica.present = phase != Phase::Absent;
                replica.step(secs, &moment);
                if let Phase::Fresh(outage) = phase {
                    let blocks = outage.and_then(|o| o.blocks);
                    let pod = outage.and_then(|o| o.rollout).and_then(|r| new_pods[mi].get(r)?.get(ri as usize));
                    if replica.restart(w[1], blocks, pod.map(String::as_str)) {
                        trace.relabel();
                    }
                }
                replica.emit(&mut trace);
                trail.push(replica.interval);
            }
            trails.push(trail);
            for (fam, metric) in trace.finish() {
                by_family.entry(fam).or_default().push(metric);
            }
        }
        if model.router.is_some() {
            for (fam, metric) in super::router::series(spec, mi, &names[mi], &trails, &times_ms) {
                by_family.entry(fam).or_default().push(metric);
            }
        }
    }
    if spec.has_kube_state_metrics() {
        for (fam, metric) in kube_state_metrics(spec, &names, &lives, &new_pods, &times_ms) {
            by_family.entry(fam).or_default().push(metric);
        }
    }

    let families = by_family
        .into_iter()
        .map(|(fam, mut metrics)| {
            metrics.sort_by(|a, b| a.labels.cmp(&b.labels));
            Family { name: fam.name(spec.metrics), kind: fam.kind(), help: fam.help(), metrics }
        })
        .collect();
    Generated { times_ms, families }
}

/// Per sample time, the arrival multiplier of a model's serving replicas: the model's total rate
/// is shared by the replicas that serve, so when some are down, gone or not yet added, the others
/// take their share (exactly 1 while all serve).
fn serving_factors(model: &ModelSpec, lives: &[Life], times_ms: &[i64]) -> Vec<f64> {
    let shares = model.arrival_shares();
    let all: f64 = shares.iter().sum();
    times_ms
        .iter()
        .map(|t| {
            let serving: Vec<f64> = shares.iter().zip(lives).filter(|(_, life)| life.serving(*t)).map(|(s, _)| *s).collect();
            if serving.len() == shares.len() || serving.is_empty() {
                1.0
            } else {
                all / serving.iter().sum::<f64>()
            }
        })
        .collect()
}

/// The pod names each rollout gives a model's replicas: `[model][rollout][replica]`, one new
/// template hash per rollout, drawn from their own stream.
fn rollout_pods(spec: &ScenarioSpec) -> Vec<Vec<Vec<String>>> {
    let stems = host_stems(&spec.models);
    spec.models
        .iter()
        .enumerate()
        .map(|(mi, model)| {
            let rollouts = spec.events.iter().filter(|e| e.model == model.name && e.kind == EventKind::Rollout).count();
            (0..rollouts)
                .map(|k| {
                    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x726f_6c6c_6f75_7431);
                    rng.set_stream(((mi as u64) << 32) | k as u64);
                    let template = k8s_suffix(&mut rng, 10);
                    (0..model.replicas).map(|_| format!("{}-{template}-{}", stems[mi], k8s_suffix(&mut rng, 5))).collect()
                })
                .collect()
        })
        .collect()
}

/// kube-state-metrics' view of the fleet (only when some event is a rollout): each model's
/// Deployment generation (metadata, and observed one scrape later) and each live pod's vllm
/// container (image, restarts).
fn kube_state_metrics(
    spec: &ScenarioSpec,
    names: &[Vec<ReplicaInfo>],
    lives: &[Vec<Life>],
    new_pods: &[Vec<Vec<String>>],
    times_ms: &[i64],
) -> Vec<(Fam, Metric)> {
    let stems = host_stems(&spec.models);
    let end_ms = spec.window_end().timestamp_millis();
    let interval_ms = spec.interval.as_millis() as i64;
    let mut target = Labels::new();
    target.insert("job".into(), "kube-state-metrics".into());
    target.insert("instance".into(), "kube-state-metrics:8080".into());
    let gauge = |fam: Fam, labels: Labels, values: Vec<Option<f64>>| {
        let suffix = if fam.kind() == Kind::Counter { "_total" } else { "" };
        (fam, Metric { labels, lines: vec![Line { suffix, le: None, values }] })
    };
    let mut out = vec![gauge(Fam::Up, target.clone(), times_ms.iter().map(|_| Some(1.0)).collect())];
    target.insert("namespace".into(), NAMESPACE.into());
    for (mi, model) in spec.models.iter().enumerate() {
        let rollouts: Vec<&EventSpec> = spec.events.iter().filter(|e| e.model == model.name && e.kind == EventKind::Rollout).collect();
        let at: Vec<i64> = rollouts.iter().map(|e| end_ms - e.at_before_end.as_millis() as i64).collect();
        let mut labels = target.clone();
        labels.insert("deployment".into(), stems[mi].clone());
        let generation = |lag: i64| -> Vec<Option<f64>> {
            times_ms.iter().map(|t| Some((FIRST_GENERATION + at.iter().filter(|a| **a + lag <= *t).count() as u64) as f64)).collect()
        };
        out.push(gauge(Fam::KsmGeneration, labels.clone(), generation(0)));
        out.push(gauge(Fam::KsmObservedGeneration, labels, generation(interval_ms)));

        for (ri, life) in lives[mi].iter().enumerate() {
            // (pod, image, from, until): the pods this replica ran in, one after the other
            let mut pods: Vec<(String, String, i64, i64)> = Vec::new();
            let mut pod = names[mi][ri].pod.clone();
            let mut image = DEFAULT_IMAGE.to_string();
            let mut from = life.added_ms.unwrap_or(i64::MIN);
            let mut restarts: Vec<i64> = Vec::new();
            for o in &life.outages {
                match o.rollout {
                    Some(k) => {
                        pods.push((pod.clone(), image.clone(), from, o.down_ms));
                        pod = new_pods[mi].get(k).and_then(|p| p.get(ri)).cloned().unwrap_or(pod);
                        if let Some(img) = rollouts.get(k).and_then(|e| e.image.clone()) {
                            image = img;
                        }
                        from = o.up_ms;
                    }
                    None => restarts.push(o.down_ms),
                }
            }
            pods.push((pod, image, from, life.removed_ms.unwrap_or(i64::MAX)));
            for (pod, image, from, until) in pods {
                let live = |t: i64| from <= t && t < until;
                let mut l = target.clone();
                l.insert("pod".into(), pod);
                l.insert("container".into(), "vllm".into());
                let restarted: Vec<Option<f64>> =
                    times_ms.iter().map(|t| live(*t).then(|| restarts.iter().filter(|r| **r >= from && **r <= *t).count() as f64)).collect();
                if restarted.iter().all(Option::is_none) {
                    continue;
                }
                out.push(gauge(Fam::KsmRestarts, l.clone(), restarted));
                l.insert("image".into(), image);
                l.insert("image_id".into(), String::new());
                out.push(gauge(Fam::KsmContainerInfo, l, times_ms.iter().map(|t| live(*t).then_some(1.0)).collect()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_are_written_as_floats() {
        assert_eq!(format_le(1.0), "1.0");
        assert_eq!(format_le(0.25), "0.25");
        assert_eq!(format_le(2560.0), "2560.0");
        assert_eq!(format_le(f64::INFINITY), "+Inf");
    }

    #[test]
    fn token_buckets_follow_vllms_one_two_five_series() {
        assert_eq!(one_two_five(1000.0), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]);
        assert_eq!(one_two_five(32768.0).last(), Some(&20000.0));
    }

    #[test]
    fn observations_land_in_the_first_bucket_whose_bound_is_not_below_them() {
        let mut h = Hist::new(&[0.5, 1.0]);
        h.observe(0.5, 2);
        h.observe(0.7, 1);
        h.observe(9.0, 3);
        assert_eq!(h.counts, vec![2, 1, 3]);
        assert!((h.sum - (1.0 + 0.7 + 27.0)).abs() < 1e-9);
    }

    #[test]
    fn host_names_come_from_the_model_name_and_stay_unique() {
        let m = |name: &str| ModelSpec::new(name, 1, 1.0);
        assert_eq!(host_stems(&[m("meta-llama/Llama-3.1-8B-Instruct")]), vec!["llama-3-1-8b-instruct"]);
        let stems = host_stems(&[m("a/Model"), m("b/Model")]);
        assert_eq!(stems, vec!["a-model", "b-model"]);
        let stems = host_stems(&[m("a/M.x"), m("a/M-x")]);
        assert_ne!(stems[0], stems[1]);
    }

    #[test]
    fn otel_names_replace_the_vllm_colon_and_nothing_else() {
        let g = MetricsGeneration::V1Otel;
        assert_eq!(Fam::KvUsage.name(g), "vllm_kv_cache_usage_perc");
        assert_eq!(Fam::IterationTokens.name(g), "vllm_iteration_tokens_total");
        assert_eq!(Fam::HttpRequests.name(g), "http_requests");
        assert_eq!(Fam::GpuUtil.name(g), "DCGM_FI_DEV_GPU_UTIL");
        assert_eq!(Fam::KvUsage.name(MetricsGeneration::V1), "vllm:kv_cache_usage_perc");
    }

    #[test]
    fn dcgm_families_are_gauges_so_they_never_get_a_total_suffix() {
        for fam in [Fam::GpuUtil, Fam::SmClock, Fam::GpuTemp, Fam::Power, Fam::ThrottleReasons, Fam::Xid, Fam::FbUsed, Fam::FbFree] {
            assert_eq!(fam.kind(), Kind::Gauge, "{fam:?}");
            assert!(fam.base_name(MetricsGeneration::V1).starts_with("DCGM_FI_DEV_"));
        }
    }

    #[test]
    fn pod_names_look_like_a_deployments_pods() {
        let spec = crate::ScenarioSpec::from_toml_str(
            "name = \"x\"\nseed = 3\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"30s\"\nbaseline = \"1m\"\nwindow = \"1m\"\n\
             [[model]]\nname = \"org/Big-Model\"\nreplicas = 3\nrate = 1.0\n",
        )
        .expect("parses");
        let names = fleet_names(&spec);
        let pods: Vec<&str> = names[0].iter().map(|r| r.pod.as_str()).collect();
        let template: Vec<&str> = pods.iter().map(|p| &p[..p.len() - 6]).collect();
        assert!(template.iter().all(|t| *t == template[0]), "one template hash: {pods:?}");
        assert!(pods.iter().all(|p| p.starts_with("big-model-") && p.len() == "big-model-".len() + 16), "{pods:?}");
        let mut unique = pods.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), 3);
        assert_eq!(names[0][2].instance, "big-model-2:8000");
        assert_eq!(names[0][1].node, "gpu-node-01");
        assert!(names[0][0].gpu_uuid.starts_with("GPU-") && names[0][0].gpu_uuid.len() == 40);
    }

    #[test]
    fn the_kv_cache_is_sized_for_the_healthy_working_set() {
        let m = ModelSpec::new("m", 2, 2.0);
        let wl = Workload::DEFAULT;
        let h = StateParams::HEALTHY;
        let running = 2.0 * wl.mean_service_s(&h);
        let tokens = gpu_blocks(&m) as f64 * BLOCK_SIZE;
        let footprint = 600.0 * (0.245f64).exp() + wl.mean_output(&h) / 2.0;
        let usage = running * footprint / tokens;
        assert!((0.44..=0.46).contains(&usage), "{usage}");
    }
}
