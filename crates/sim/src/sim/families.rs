//! The metric families a fleet exports ([`Fam`]: each one's name, type and HELP text), and the
//! shapes the simulation hands on: families with their label sets and lines ([`Generated`]), or
//! flat series ([`GeneratedSeries`]).

use crate::MetricsGeneration;
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

    pub(super) fn help(self) -> &'static str {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
