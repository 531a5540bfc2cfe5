//! What a model's servers look like in each state, as one table of numbers.
//!
//! Every incident kind is a [`StateParams`] value: multipliers, levels and shares applied to the
//! healthy workload. The simulator reads nothing else, so a new kind is a new row here plus, at
//! most, a new field with a healthy default. Each pathology has a near miss (`<kind>-near`): the
//! same story told too weakly for its rule to fire, so a test can prove the rule stays quiet.
//!
//! The rows are written against the targets the diagnosis must see over a 30-minute window (see
//! the module docs of [`crate`] and `fixtures/scenarios/README.md`); the unit tests in
//! `tests.rs` measure them from the generated data the way Prometheus would.

use serde::{Deserialize, Serialize};

/// Which story a scenario tells about its incident model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IncidentKind {
    /// No change at all.
    Healthy,
    /// Traffic grows linearly through the baseline and the window, within capacity.
    Ramp,
    /// More requests than the servers can batch: queueing, no preemption.
    LoadExceedsCapacity,
    /// Prefill got slower (longer prompts to compute, a slower kernel): TTFT up, queue fine.
    SlowPrefill,
    /// Prefill x1.45 underneath: its mean reads x1.4 where slow-prefill needs 1.5x (the first
    /// step, in it too, does not slow), TTFT P95 x1.44 (about 0.35 s) where it needs 2x or 3 s.
    SlowPrefillNear,
    /// Decode steps got slower: inter-token latency up, queue and TTFT fine.
    SlowDecode,
    /// Decode steps 1.3x slower: ITL P95 reads about 1.3x where slow-decode needs 1.5x (or over
    /// 100 ms; it reads about 62 ms).
    SlowDecodeNear,
    /// Requests take 1.5 s longer to reach the engine (a slow tokenizer, a starved API server):
    /// TTFT up, queue, prefill and decode unchanged.
    SlowInputProcessing,
    /// 0.1 s longer before the engine: TTFT barely moves.
    SlowInputProcessingNear,
    /// A queue blip: about 30 requests wait per replica for a minute in the middle of the window,
    /// then drain; arrivals unchanged.
    LoadExceedsCapacityNear,
    /// The external prefix cache behind the KV connector stops hitting (0.6 -> 0.03 of what the
    /// local cache missed); nothing else moves: no rule reads it (what else moved lists it).
    ExternalPrefixCacheMiss,
    /// Its hit ratio dips to 0.5.
    ExternalPrefixCacheMissNear,
    /// The server process leaks memory: its resident memory grows by 80 MB a minute from the
    /// onset; nothing else moves. No rule reads `process_resident_memory_bytes` (what else moved
    /// lists it).
    ProcessMemoryGrowth,
    /// It grows by 4 MB a minute: 80 MB over twenty minutes, a twelfth of the process.
    ProcessMemoryGrowthNear,
    /// The engine takes four times as many decode steps for the same work at the same load: the
    /// tokens per step per running request collapse; nothing else moves.
    IterationTokensCollapse,
    /// 1.3 times as many steps: tokens per step per running request fall to three quarters.
    IterationTokensCollapseNear,
    /// Requests take 0.3 s longer to reach the engine, on a fleet whose collector does not keep
    /// the queue-time histogram (the scenario drops it): TTFT up, queue and prefill flat, and
    /// slow-input-processing cannot split TTFT (what else moved lists it).
    TtftUnattributed,
    /// 0.1 s longer: TTFT rises by under 250 ms.
    TtftUnattributedNear,
    /// Overload plus degraded steps: queue, TTFT and ITL all up, no preemption, and the engine
    /// completes barely more than before (a larger batch alone would turn out more tokens).
    SevereSaturation,
    /// The same overload with steps x1.35 slower: queue and TTFT cross their bars, ITL P95 reads
    /// about x1.34 where severe-saturation needs 1.5x (or over 100 ms): load-exceeds-capacity's.
    SevereSaturationNear,
    /// The KV cache is full and running requests are preempted.
    KvCachePressure,
    /// The API server answers a share of requests with 5xx; latency is unchanged.
    HttpErrors,
    /// 0.8% answered 5xx (0.1% before; the window reads 0.76%): more than three times the
    /// baseline, but under the 1% that http-errors needs beside its 3x (and the 5% it needs
    /// alone), and a change under what else moved's 1-point floor.
    HttpErrorsNear,
    /// Long outputs keep every batch slot busy decoding: the queue grows, TTFT explodes, ITL is fine.
    PrefillStarvation,
    /// Longer outputs and more running requests, but below the cap and with no queue.
    PrefillStarvationNear,
    /// The prefix cache stops hitting (0.5 -> 0.04) and prefill gets 3x slower.
    PrefixCacheMiss,
    /// The hit ratio dips to 0.4; latency unchanged.
    PrefixCacheMissNear,
    /// A full cache preempts every request about 1.5 times and recomputes a quarter of the prompt tokens.
    RecomputeThrashing,
    /// Two short bursts of preemption, 1% recomputed tokens, cache below 85%.
    RecomputeThrashingNear,
    /// Prompts three times longer: TTFT doubles because prefill has more to do, not because of queueing.
    WorkloadShift,
    /// Prompts 20% longer; latency unchanged.
    WorkloadShiftNear,
    /// Prompts 0.4 times as long (a shorter system prompt): TTFT falls, nothing gets slower.
    WorkloadLighter,
    /// Prompts 0.72 times as long: the mean prompt reads about x0.72 where workload-lighter needs
    /// x0.67 or less.
    WorkloadLighterNear,
    /// A tenth of the traffic: tiny batches, an idle GPU, healthy latency.
    GpuUnderutilized,
    /// Half the traffic.
    GpuUnderutilizedNear,
    /// For the last 10 minutes nothing completes and no token is generated while requests sit in the batch.
    ThroughputStall,
    /// For the last 10 minutes nothing arrives and the batch drains: an idle model, not a stall.
    ThroughputStallNear,
    /// One replica's engine freezes for 10 minutes in the middle of the window with its batch in
    /// hand, then resumes: no token, no completion, its gauges held where they were (vLLM V1
    /// publishes them from the engine's step, which no longer runs). Over before the window's
    /// last five minutes, which throughput-stall reads.
    StalledEngine,
    /// The same freeze for 6 minutes: the token rate (over 2 minutes, at 1-minute steps) reads
    /// zero at 5 of the window's 31 steps, a stall share of 16% where stalled-engine needs 20% (7
    /// steps; the 10-minute freeze reads 9, 29%).
    StalledEngineNear,
    /// One server's last data-parallel rank holds 6 to 9 requests waiting while its other rank
    /// has room (the ranks' balancing sends it more than its share): the most-queued rank about 7.5
    /// above the other, the rule's bar 4. The server's latency histograms are not changed.
    RankImbalance,
    /// 2.5 to 3.5 waiting on that rank: about 3 above the other where rank-imbalance needs 4.
    RankImbalanceNear,
    /// Every replica holds 1.5 to 3.5 requests deferred (waiting on an adapter slot, a transfer or
    /// a grammar rather than for capacity): about 7.5 across three replicas, the rule's bar 4.
    /// Their queue times are not generated: the latency histograms stay healthy.
    DeferredWaiting,
    /// 0.5 to 1.5 each: about 3 deferred across three replicas where deferred-waiting needs 4.
    DeferredWaitingNear,
    /// Twice the traffic; the engine's admission control rejects about 2/s per replica.
    RequestsRejected,
    /// Three rejections in one burst.
    RequestsRejectedNear,
    /// Clients abort 15% of requests and 3% finish with an error.
    RequestErrors,
    /// Aborts rise from 1% to 2%; no errors.
    RequestErrorsNear,
    /// Clients close 15% of their streams early (1% before); no errors. With `counts_aborts =
    /// false` the engine counts none of them (vLLM 0.32).
    GiveUps,
    /// Clients close 2.5% of their streams early.
    GiveUpsNear,
    /// Requests preempted for higher-priority ones (`--scheduling-policy priority`): preemptions as
    /// often as under KV pressure, 95% of them for priority, the cache at 60-75%.
    PriorityPreemption,
    /// A few priority preemptions (0.03/s), the cache at 60-75%, as in the baseline: the policy was
    /// on all along.
    PriorityPreemptionNear,
    /// A full cache preempts about one request in eight, each five times before it completes: 0.6
    /// preemptions per finished request, but the same requests evicted again and again.
    RepeatedPreemption,
    /// A full cache preempts 60% of the requests once each: the same 0.6 preemptions per finished
    /// request, none of them twice.
    RepeatedPreemptionNear,
    /// For the last 15 minutes every engine sleeps (weights offloaded) while requests keep arriving.
    EngineAsleep,
    /// Asleep the same way, but nothing arrives.
    EngineAsleepNear,
    /// Speculative decoding acceptance falls from 0.6 to 0.15.
    SpecDecodeInefficient,
    /// Acceptance falls to 0.45.
    SpecDecodeInefficientNear,
    /// NIXL KV transfers take 30 times longer (a congested or misrouted link): each request waits
    /// for its KV in the decode instance's queue, as vLLM records it (scheduled once its KV came).
    KvTransferSlow,
    /// Transfers twice as long.
    KvTransferSlowNear,
    /// The transfer-time histogram records a thousandth of each transfer's time (a unit slip):
    /// bytes over time read 1,000 times any link's rate. Nothing else changes.
    KvTransferRateImpossible,
    /// Transfers ten times faster, and recorded as such: a fast link, about 100 GB/s.
    KvTransferRateImpossibleNear,
    /// NIXL KV transfers fail 0.5/s per replica and take 5x longer.
    KvTransferFailures,
    /// No failures; transfers 20% slower.
    KvTransferFailuresNear,
    /// KV-cache usage climbs from 0.45 to 0.9 across the window while the load stays flat.
    KvCacheLeak,
    /// Traffic ramps 1x -> 1.6x and KV usage rises with it: growth, not a leak.
    KvCacheLeakNear,
    /// One replica receives 3x the arrivals of each of its peers (the model's total unchanged).
    ReplicaImbalance,
    /// One replica receives 1.2x.
    ReplicaImbalanceNear,
    /// One replica is slow (ITL x3, TTFT x2) and nearly full (KV ~0.95); its peers are healthy.
    ReplicaOutlier,
    /// One replica 1.2x slower.
    ReplicaOutlierNear,
    /// Arrivals x2.5 on a model whose replicas have different caps (`max_num_seqs_per_replica`):
    /// the one with the lower cap pins its batch there and queues, its peers run the rest.
    ReplicaConfigCap,
    /// Arrivals x1.3: the lower cap is never reached, nothing queues.
    ReplicaConfigCapNear,
    /// One replica receives 2.7x the arrivals of its peer, and decode follows the batch (each step
    /// costs 1 + batch/2): it runs a larger batch and its ITL rises with it.
    ReplicaBatchLoad,
    /// 1.5x.
    ReplicaBatchLoadNear,
    /// One replica stops being scraped 12 minutes before the window's end.
    TargetDown,
    /// Every target stays up.
    TargetDownNear,
    /// Every GPU of the model is thermally throttled: SM clock 1980 -> 1200 MHz, ITL x1.8.
    GpuThrottling,
    /// Clocks dip to 1900 MHz without a throttle reason; ITL unchanged.
    GpuThrottlingNear,
    /// One replica's GPU reports XID 79 (fallen off the bus) for the last 10 minutes and stops serving.
    GpuErrors,
    /// XID stays 0.
    GpuErrorsNear,
    /// Prompts four times longer on a model whose GPUs replay the real H200: compute-bound most of
    /// the time, at the power cap (0x4) with the clock 25% down, no fault reason.
    GpuPromptShift,
    /// Prompts 1.3x, the GPUs at the cap a seventh of the time.
    GpuPromptShiftNear,
    /// Prefill bursts among decode, as the real H200 ran them (a third of the time compute-bound
    /// at the power cap), against an all-decode baseline: busy, not faulty.
    GpuPrefillBursts,
    /// Prefill bursts in 3% of the scrapes: the most capped GPU reads the power cap (0x4) in 4 of
    /// the window's 60 scrapes (6.7%) where gpu-power-capped needs 10% (6). The share is drawn
    /// scrape by scrape, so a GPU's count spreads (binomial): at 5% or more a third of the seeds
    /// put some GPU at 10%.
    GpuPrefillBurstsNear,
    /// One replica's GPU too hot: hardware thermal slowdown (0x40) laid over its real samples,
    /// SM clock about 1200 MHz, 86-90 °C, its ITL x1.95.
    GpuThermalSlowdown,
    /// One replica's GPU runs hot (80-83 °C) with no reason set and its clock intact.
    GpuThermalSlowdownNear,
    /// The model's GPUs capped at 450 W of the board's 700 W: decode-shaped load hits the cap too,
    /// clocks cut; ITL x1.2.
    GpuPowerLimitLowered,
    /// Capped at 680 W: the real draw stays under it while decoding.
    GpuPowerLimitLoweredNear,
    /// vLLM's router in front of the model (`router = "vllm-router"`) takes 1.5 s (median) of its
    /// own before an engine answers each request (short of CPU, slow connections to its workers);
    /// the engines see nothing of it.
    RouterSaturated,
    /// The router takes 0.12 s of its own: under what a user notices.
    RouterSaturatedNear,
    /// vLLM's router in PD mode (`router = "vllm-router-pd"`): its prefill workers hold 15 to 40
    /// requests waiting each with a long queue time, while its decode workers stay as they were.
    PrefillPoolSaturated,
    /// Both pools queue alike: the model's capacity, not the split between them.
    PrefillPoolSaturatedNear,
    /// The reverse: the decode workers queue, the prefill workers stay as they were.
    DecodePoolSaturated,
    /// The decode workers hold 3 to 4.5 waiting each: under a backlog.
    DecodePoolSaturatedNear,
    /// The router's policy sends one worker three times what it sends each of the others (a hot
    /// key under consistent hashing); the replica is not slower per request.
    RoutingSkew,
    /// 1.2 times.
    RoutingSkewNear,
    /// The router opens one worker's circuit at the onset and keeps it open: that engine stays
    /// up, reporting, and gets nothing; its peers take its share.
    BackendCutOff,
    /// The circuit opens for two minutes in the middle of the window, then closes.
    BackendCutOffNear,
    /// A cache-aware router (`router_policy = "cache_aware"`) gets no prompt tokens from its
    /// workers (vLLM started without --enable-scale-out answers the render route 403): every
    /// prefix decision is `missing_tokens`, made by load.
    RouterPrefixBlind,
    /// 40% of the decisions lack the tokens (some workers refuse to render, the others do) where
    /// router-prefix-blind needs over half.
    RouterPrefixBlindNear,
    /// The router retries 10% of the requests it receives (attempts that fail between router and
    /// engine, which the engines never see); the engines count no error.
    RouterRetries,
    /// 1% retried.
    RouterRetriesNear,
    /// From 60 minutes before the window's end, 30% of requests miss a 500 ms TTFT target.
    SloBurn,
    /// About 0.5% of requests miss it.
    SloBurnNear,
}

/// What a kind needs from the fleet for its story to be told at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// V1 metric names (the metrics the story moves do not exist in V0).
    pub v1: bool,
    pub spec_decode: bool,
    pub nixl: bool,
    /// A model with `kv_connector = "lmcache"` (its external prefix-cache counters).
    pub external_cache: bool,
    pub dcgm: bool,
    /// Fewest replicas for the story to make sense (peers to compare with).
    pub min_replicas: u32,
    /// `incident.replica` picks the replica the story is about.
    pub uses_replica: bool,
    /// The model's GPUs replay real samples (`gpu = "h200"`): the power cap and its clocks are
    /// the real board's.
    pub real_gpu: bool,
    /// vLLM's router in front of the model (`router = "vllm-router"`).
    pub router: bool,
    /// The same router in prefill/decode mode (`router = "vllm-router-pd"`).
    pub router_pd: bool,
    /// The waiting queue split by reason (`waiting_by_reason = true`).
    pub waiting_by_reason: bool,
    /// The router's policy is `cache_aware` (its prefix decisions).
    pub cache_aware: bool,
    /// Servers with several data-parallel ranks (`dp_ranks`).
    pub data_parallel: bool,
}

impl IncidentKind {
    pub const ALL: [IncidentKind; 103] = [
        IncidentKind::Healthy,
        IncidentKind::Ramp,
        IncidentKind::LoadExceedsCapacity,
        IncidentKind::LoadExceedsCapacityNear,
        IncidentKind::SlowPrefill,
        IncidentKind::SlowPrefillNear,
        IncidentKind::SlowDecode,
        IncidentKind::SlowDecodeNear,
        IncidentKind::SevereSaturation,
        IncidentKind::SevereSaturationNear,
        IncidentKind::KvCachePressure,
        IncidentKind::HttpErrors,
        IncidentKind::HttpErrorsNear,
        IncidentKind::PrefillStarvation,
        IncidentKind::PrefillStarvationNear,
        IncidentKind::PrefixCacheMiss,
        IncidentKind::PrefixCacheMissNear,
        IncidentKind::RecomputeThrashing,
        IncidentKind::RecomputeThrashingNear,
        IncidentKind::WorkloadShift,
        IncidentKind::WorkloadShiftNear,
        IncidentKind::WorkloadLighter,
        IncidentKind::WorkloadLighterNear,
        IncidentKind::GpuUnderutilized,
        IncidentKind::GpuUnderutilizedNear,
        IncidentKind::ThroughputStall,
        IncidentKind::ThroughputStallNear,
        IncidentKind::StalledEngine,
        IncidentKind::StalledEngineNear,
        IncidentKind::RankImbalance,
        IncidentKind::RankImbalanceNear,
        IncidentKind::DeferredWaiting,
        IncidentKind::DeferredWaitingNear,
        IncidentKind::RequestsRejected,
        IncidentKind::RequestsRejectedNear,
        IncidentKind::RequestErrors,
        IncidentKind::RequestErrorsNear,
        IncidentKind::GiveUps,
        IncidentKind::GiveUpsNear,
        IncidentKind::PriorityPreemption,
        IncidentKind::PriorityPreemptionNear,
        IncidentKind::RepeatedPreemption,
        IncidentKind::RepeatedPreemptionNear,
        IncidentKind::EngineAsleep,
        IncidentKind::EngineAsleepNear,
        IncidentKind::SpecDecodeInefficient,
        IncidentKind::SpecDecodeInefficientNear,
        IncidentKind::KvTransferFailures,
        IncidentKind::KvTransferFailuresNear,
        IncidentKind::KvCacheLeak,
        IncidentKind::KvCacheLeakNear,
        IncidentKind::ReplicaImbalance,
        IncidentKind::ReplicaImbalanceNear,
        IncidentKind::ReplicaOutlier,
        IncidentKind::ReplicaOutlierNear,
        IncidentKind::ReplicaConfigCap,
        IncidentKind::ReplicaConfigCapNear,
        IncidentKind::ReplicaBatchLoad,
        IncidentKind::ReplicaBatchLoadNear,
        IncidentKind::TargetDown,
        IncidentKind::TargetDownNear,
        IncidentKind::GpuThrottling,
        IncidentKind::GpuThrottlingNear,
        IncidentKind::GpuErrors,
        IncidentKind::GpuErrorsNear,
        IncidentKind::GpuPromptShift,
        IncidentKind::GpuPromptShiftNear,
        IncidentKind::GpuPrefillBursts,
        IncidentKind::GpuPrefillBurstsNear,
        IncidentKind::GpuThermalSlowdown,
        IncidentKind::GpuThermalSlowdownNear,
        IncidentKind::GpuPowerLimitLowered,
        IncidentKind::GpuPowerLimitLoweredNear,
        IncidentKind::SloBurn,
        IncidentKind::SloBurnNear,
        IncidentKind::SlowInputProcessing,
        IncidentKind::SlowInputProcessingNear,
        IncidentKind::ExternalPrefixCacheMiss,
        IncidentKind::ExternalPrefixCacheMissNear,
        IncidentKind::ProcessMemoryGrowth,
        IncidentKind::ProcessMemoryGrowthNear,
        IncidentKind::IterationTokensCollapse,
        IncidentKind::IterationTokensCollapseNear,
        IncidentKind::RouterSaturated,
        IncidentKind::RouterSaturatedNear,
        IncidentKind::PrefillPoolSaturated,
        IncidentKind::PrefillPoolSaturatedNear,
        IncidentKind::DecodePoolSaturated,
        IncidentKind::DecodePoolSaturatedNear,
        IncidentKind::RoutingSkew,
        IncidentKind::RoutingSkewNear,
        IncidentKind::BackendCutOff,
        IncidentKind::BackendCutOffNear,
        IncidentKind::RouterPrefixBlind,
        IncidentKind::RouterPrefixBlindNear,
        IncidentKind::RouterRetries,
        IncidentKind::RouterRetriesNear,
        IncidentKind::KvTransferSlow,
        IncidentKind::KvTransferSlowNear,
        IncidentKind::KvTransferRateImpossible,
        IncidentKind::KvTransferRateImpossibleNear,
        IncidentKind::TtftUnattributed,
        IncidentKind::TtftUnattributedNear,
    ];

    /// The name used in scenario files, e.g. `kv-cache-pressure`.
    pub fn as_str(self) -> &'static str {
        match self {
            IncidentKind::Healthy => "healthy",
            IncidentKind::Ramp => "ramp",
            IncidentKind::LoadExceedsCapacity => "load-exceeds-capacity",
            IncidentKind::LoadExceedsCapacityNear => "load-exceeds-capacity-near",
            IncidentKind::SlowPrefill => "slow-prefill",
            IncidentKind::SlowPrefillNear => "slow-prefill-near",
            IncidentKind::SlowDecode => "slow-decode",
            IncidentKind::SlowDecodeNear => "slow-decode-near",
            IncidentKind::SevereSaturation => "severe-saturation",
            IncidentKind::SevereSaturationNear => "severe-saturation-near",
            IncidentKind::KvCachePressure => "kv-cache-pressure",
            IncidentKind::HttpErrors => "http-errors",
            IncidentKind::HttpErrorsNear => "http-errors-near",
            IncidentKind::PrefillStarvation => "prefill-starvation",
            IncidentKind::PrefillStarvationNear => "prefill-starvation-near",
            IncidentKind::PrefixCacheMiss => "prefix-cache-miss",
            IncidentKind::PrefixCacheMissNear => "prefix-cache-miss-near",
            IncidentKind::RecomputeThrashing => "recompute-thrashing",
            IncidentKind::RecomputeThrashingNear => "recompute-thrashing-near",
            IncidentKind::WorkloadShift => "workload-shift",
            IncidentKind::WorkloadShiftNear => "workload-shift-near",
            IncidentKind::WorkloadLighter => "workload-lighter",
            IncidentKind::WorkloadLighterNear => "workload-lighter-near",
            IncidentKind::GpuUnderutilized => "gpu-underutilized",
            IncidentKind::GpuUnderutilizedNear => "gpu-underutilized-near",
            IncidentKind::ThroughputStall => "throughput-stall",
            IncidentKind::ThroughputStallNear => "throughput-stall-near",
            IncidentKind::StalledEngine => "stalled-engine",
            IncidentKind::StalledEngineNear => "stalled-engine-near",
            IncidentKind::RankImbalance => "rank-imbalance",
            IncidentKind::RankImbalanceNear => "rank-imbalance-near",
            IncidentKind::DeferredWaiting => "deferred-waiting",
            IncidentKind::DeferredWaitingNear => "deferred-waiting-near",
            IncidentKind::RequestsRejected => "requests-rejected",
            IncidentKind::RequestsRejectedNear => "requests-rejected-near",
            IncidentKind::RequestErrors => "request-errors",
            IncidentKind::RequestErrorsNear => "request-errors-near",
            IncidentKind::GiveUps => "give-ups",
            IncidentKind::GiveUpsNear => "give-ups-near",
            IncidentKind::PriorityPreemption => "priority-preemption",
            IncidentKind::PriorityPreemptionNear => "priority-preemption-near",
            IncidentKind::RepeatedPreemption => "repeated-preemption",
            IncidentKind::RepeatedPreemptionNear => "repeated-preemption-near",
            IncidentKind::EngineAsleep => "engine-asleep",
            IncidentKind::EngineAsleepNear => "engine-asleep-near",
            IncidentKind::SpecDecodeInefficient => "spec-decode-inefficient",
            IncidentKind::SpecDecodeInefficientNear => "spec-decode-inefficient-near",
            IncidentKind::KvTransferFailures => "kv-transfer-failures",
            IncidentKind::KvTransferFailuresNear => "kv-transfer-failures-near",
            IncidentKind::KvCacheLeak => "kv-cache-leak",
            IncidentKind::KvCacheLeakNear => "kv-cache-leak-near",
            IncidentKind::ReplicaImbalance => "replica-imbalance",
            IncidentKind::ReplicaImbalanceNear => "replica-imbalance-near",
            IncidentKind::ReplicaOutlier => "replica-outlier",
            IncidentKind::ReplicaOutlierNear => "replica-outlier-near",
            IncidentKind::ReplicaConfigCap => "replica-config-cap",
            IncidentKind::ReplicaConfigCapNear => "replica-config-cap-near",
            IncidentKind::ReplicaBatchLoad => "replica-batch-load",
            IncidentKind::ReplicaBatchLoadNear => "replica-batch-load-near",
            IncidentKind::TargetDown => "target-down",
            IncidentKind::TargetDownNear => "target-down-near",
            IncidentKind::GpuThrottling => "gpu-throttling",
            IncidentKind::GpuThrottlingNear => "gpu-throttling-near",
            IncidentKind::GpuErrors => "gpu-errors",
            IncidentKind::GpuErrorsNear => "gpu-errors-near",
            IncidentKind::GpuPromptShift => "gpu-prompt-shift",
            IncidentKind::GpuPromptShiftNear => "gpu-prompt-shift-near",
            IncidentKind::GpuPrefillBursts => "gpu-prefill-bursts",
            IncidentKind::GpuPrefillBurstsNear => "gpu-prefill-bursts-near",
            IncidentKind::GpuThermalSlowdown => "gpu-thermal-slowdown",
            IncidentKind::GpuThermalSlowdownNear => "gpu-thermal-slowdown-near",
            IncidentKind::GpuPowerLimitLowered => "gpu-power-limit-lowered",
            IncidentKind::GpuPowerLimitLoweredNear => "gpu-power-limit-lowered-near",
            IncidentKind::SloBurn => "slo-burn",
            IncidentKind::SloBurnNear => "slo-burn-near",
            IncidentKind::SlowInputProcessing => "slow-input-processing",
            IncidentKind::SlowInputProcessingNear => "slow-input-processing-near",
            IncidentKind::ExternalPrefixCacheMiss => "external-prefix-cache-miss",
            IncidentKind::ExternalPrefixCacheMissNear => "external-prefix-cache-miss-near",
            IncidentKind::ProcessMemoryGrowth => "process-memory-growth",
            IncidentKind::ProcessMemoryGrowthNear => "process-memory-growth-near",
            IncidentKind::IterationTokensCollapse => "iteration-tokens-collapse",
            IncidentKind::IterationTokensCollapseNear => "iteration-tokens-collapse-near",
            IncidentKind::TtftUnattributed => "ttft-unattributed",
            IncidentKind::TtftUnattributedNear => "ttft-unattributed-near",
            IncidentKind::RouterSaturated => "router-saturated",
            IncidentKind::RouterSaturatedNear => "router-saturated-near",
            IncidentKind::PrefillPoolSaturated => "prefill-pool-saturated",
            IncidentKind::PrefillPoolSaturatedNear => "prefill-pool-saturated-near",
            IncidentKind::DecodePoolSaturated => "decode-pool-saturated",
            IncidentKind::DecodePoolSaturatedNear => "decode-pool-saturated-near",
            IncidentKind::RoutingSkew => "routing-skew",
            IncidentKind::RoutingSkewNear => "routing-skew-near",
            IncidentKind::BackendCutOff => "backend-cut-off",
            IncidentKind::BackendCutOffNear => "backend-cut-off-near",
            IncidentKind::KvTransferSlow => "kv-transfer-slow",
            IncidentKind::KvTransferSlowNear => "kv-transfer-slow-near",
            IncidentKind::KvTransferRateImpossible => "kv-transfer-rate-impossible",
            IncidentKind::KvTransferRateImpossibleNear => "kv-transfer-rate-impossible-near",
            IncidentKind::RouterPrefixBlind => "router-prefix-blind",
            IncidentKind::RouterPrefixBlindNear => "router-prefix-blind-near",
            IncidentKind::RouterRetries => "router-retries",
            IncidentKind::RouterRetriesNear => "router-retries-near",
        }
    }

    /// The rule that tells this kind's story (the kind's own name, but where the story is another
    /// rule's: give-ups are `request-errors`', requests preempted again and again
    /// `recompute-thrashing`'s). A near miss names its kind's.
    pub fn rule(self) -> &'static str {
        match self.near_miss_of().unwrap_or(self) {
            IncidentKind::GiveUps => "request-errors",
            IncidentKind::RepeatedPreemption => "recompute-thrashing",
            IncidentKind::GpuPromptShift => "workload-shift",
            IncidentKind::GpuPrefillBursts => "gpu-power-capped",
            IncidentKind::GpuThermalSlowdown => "gpu-throttling",
            // A replica that differs by its configuration or its load: the replica comparison's.
            IncidentKind::ReplicaConfigCap | IncidentKind::ReplicaBatchLoad => "replica-outlier",
            base => base.as_str(),
        }
    }

    /// For a near miss, the kind it nearly is (`prefill-starvation-near` -> `prefill-starvation`).
    pub fn near_miss_of(self) -> Option<IncidentKind> {
        let name = self.as_str().strip_suffix("-near")?;
        IncidentKind::ALL.iter().copied().find(|k| k.as_str() == name)
    }

    /// Whether a rule of the built-in pack names this incident (its id is the kind's name). Those
    /// no rule names are for what else moved to list (`expect.unexplained`).
    pub fn named_by_a_rule(self) -> bool {
        !matches!(
            self.near_miss_of().unwrap_or(self),
            IncidentKind::ExternalPrefixCacheMiss | IncidentKind::ProcessMemoryGrowth | IncidentKind::IterationTokensCollapse | IncidentKind::TtftUnattributed
        )
    }

    /// What the fleet must offer for this kind.
    pub fn needs(self) -> Needs {
        use IncidentKind as K;
        let base = self.near_miss_of().unwrap_or(self);
        let mut n = Needs::default();
        match base {
            K::PrefixCacheMiss
            | K::RecomputeThrashing
            | K::RequestsRejected
            | K::RequestErrors
            | K::GiveUps
            | K::PriorityPreemption
            | K::RepeatedPreemption
            | K::EngineAsleep => {
                n.v1 = true;
            }
            K::SpecDecodeInefficient => {
                n.v1 = true;
                n.spec_decode = true;
            }
            K::KvTransferFailures | K::KvTransferSlow | K::KvTransferRateImpossible => {
                n.v1 = true;
                n.nixl = true;
            }
            K::ExternalPrefixCacheMiss => {
                n.v1 = true;
                n.external_cache = true;
            }
            K::DeferredWaiting => {
                n.v1 = true;
                n.waiting_by_reason = true;
            }
            K::RankImbalance => {
                n.v1 = true;
                n.data_parallel = true;
                n.uses_replica = true;
            }
            K::GpuThrottling | K::GpuErrors => n.dcgm = true,
            K::GpuPromptShift | K::GpuPrefillBursts | K::GpuThermalSlowdown | K::GpuPowerLimitLowered => n.real_gpu = true,
            K::RouterSaturated | K::RouterRetries => n.router = true,
            K::RouterPrefixBlind => {
                n.router = true;
                n.cache_aware = true;
            }
            K::PrefillPoolSaturated | K::DecodePoolSaturated => {
                n.router = true;
                n.router_pd = true;
                n.min_replicas = 4;
            }
            K::RoutingSkew | K::BackendCutOff => {
                n.router = true;
                n.min_replicas = if base == K::RoutingSkew { 3 } else { 2 };
                n.uses_replica = true;
            }
            _ => {}
        }
        match base {
            K::ReplicaImbalance | K::ReplicaOutlier => {
                n.min_replicas = 3;
                n.uses_replica = true;
            }
            K::ReplicaConfigCap => n.min_replicas = 2,
            K::ReplicaBatchLoad => {
                n.min_replicas = 2;
                n.uses_replica = true;
            }
            K::TargetDown | K::GpuErrors | K::GpuThermalSlowdown | K::StalledEngine => n.uses_replica = true,
            _ => {}
        }
        if self == K::RequestsRejectedNear {
            // the one burst lands on one replica
            n.uses_replica = true;
        }
        n
    }

    /// The state's parameters: the row of the table.
    pub fn params(self) -> StateParams {
        use IncidentKind as K;
        let h = StateParams::HEALTHY;
        match self {
            K::Healthy => h,
            K::Ramp => StateParams { onset: Onset::BaselineStart, arrivals_at_end: 1.8, ..h },
            K::LoadExceedsCapacity => StateParams {
                arrivals: 2.5,
                arrivals_at_end: 2.5,
                queue_median_s: 1.5,
                queue_sigma: 0.5,
                itl: 1.05,
                running: Running::AtCap,
                waiting: Level::Wander(15.0, 40.0),
                kv_usage: Level::Wander(0.7, 0.85),
                ..h
            },
            K::SlowPrefill => StateParams { prefill: 6.0, ..h },
            K::SlowPrefillNear => StateParams { prefill: 1.45, ..h },
            // Time before the engine queues the request, in TTFT (and E2E) only.
            K::SlowInputProcessing => StateParams { input_s: 1.5, ..h },
            K::LoadExceedsCapacityNear => StateParams { waiting: Level::Wander(25.0, 35.0), waiting_bursts: &[(0.45, 0.483)], ..h },
            K::SlowInputProcessingNear => StateParams { input_s: 0.1, ..h },
            // Clients with a fixed concurrency send fewer requests when each one streams slower,
            // which is why generation throughput falls instead of the queue growing.
            K::SlowDecode => StateParams { arrivals: 0.75, arrivals_at_end: 0.75, itl: 2.5, ..h },
            // The same slowdown, weaker: x1.3 underneath reads as about x1.3 through the buckets
            // (the healthy P95 just under 50 ms, the window's between 50 and 75 ms).
            K::SlowDecodeNear => StateParams { itl: 1.3, ..h },
            // Degraded, not just busy: on a real engine a batch that grows with the load also
            // turns out more tokens per second (ITL rises through the batch size; that is
            // load-exceeds-capacity). Here the steps slow down so much that the engine completes
            // barely more than before while the queue grows.
            K::SevereSaturation | K::SevereSaturationNear => StateParams {
                arrivals: 1.1,
                arrivals_at_end: 1.1,
                queue_median_s: 2.5,
                queue_sigma: 0.5,
                itl: if self == K::SevereSaturation { 2.4 } else { 1.35 },
                running: Running::AtCap,
                waiting: Level::Wander(25.0, 60.0),
                kv_usage: Level::Wander(0.78, 0.84),
                ..h
            },
            K::KvCachePressure => StateParams {
                queue_median_s: 0.8,
                queue_sigma: 0.6,
                // preempted requests recompute their prompt
                prefill: 1.5,
                itl: 1.3,
                waiting: Level::Wander(5.0, 20.0),
                kv_usage: Level::Wander(0.955, 1.0),
                preemptions_per_s: (0.8, 2.5),
                ..h
            },
            K::HttpErrors => StateParams { http_5xx_share: 0.11, ..h },
            K::HttpErrorsNear => StateParams { http_5xx_share: 0.008, ..h },

            // Outputs five times longer (max_tokens four times higher) at the rate the full batch
            // can finish them, plus 2% more: every slot decodes, the excess queues and its wait
            // follows the queue's length.
            K::PrefillStarvation => StateParams {
                arrivals: 1.02,
                arrivals_at_end: 1.02,
                arrivals_at_capacity: true,
                output: 5.0,
                max_tokens: 4.0,
                itl: 1.03,
                running: Running::AtCap,
                waiting: Level::Ramp(0.0, 60.0),
                queue_follows_waiting: true,
                queue_median_s: 0.3,
                queue_sigma: 0.35,
                kv_usage: Level::Wander(0.82, 0.88),
                gpu: GpuParams { util: (92.0, 98.0), ..GpuParams::HEALTHY },
                ..h
            },
            // Outputs x3 from clients that send fewer requests: running x1.4, far below the cap.
            K::PrefillStarvationNear => {
                StateParams { arrivals: 0.47, arrivals_at_end: 0.47, output: 3.0, max_tokens: 3.0, kv_usage: Level::Wander(0.45, 0.7), ..h }
            }
            // Every prompt token is computed again (0.96 of them instead of 0.5), and the longest
            // prompts, which dominate the P95, were the best cached: prefill x3.2.
            K::PrefixCacheMiss => StateParams { prefix_hit_ratio: 0.04, prefill: 3.2, ..h },
            K::PrefixCacheMissNear => StateParams { prefix_hit_ratio: 0.4, ..h },
            K::RecomputeThrashing => StateParams {
                queue_median_s: 1.0,
                queue_sigma: 0.5,
                prefill: 1.5,
                itl: 1.3,
                waiting: Level::Wander(5.0, 20.0),
                kv_usage: Level::Wander(0.97, 1.0),
                preemptions_per_request: 1.5,
                recomputed_share: 0.25,
                ..h
            },
            K::RecomputeThrashingNear => StateParams {
                kv_usage: Level::Wander(0.6, 0.85),
                preemptions_per_s: (0.05, 0.05),
                preemption_bursts: &[(0.25, 0.3), (0.65, 0.7)],
                recomputed_share: 0.01,
                ..h
            },
            K::WorkloadShift => StateParams { prompt: 3.0, kv_usage: Level::Wander(0.45, 0.75), ..h },
            K::WorkloadShiftNear => StateParams { prompt: 1.2, ..h },
            K::WorkloadLighter => StateParams { prompt: 0.4, ..h },
            K::WorkloadLighterNear => StateParams { prompt: 0.72, ..h },
            K::GpuUnderutilized => StateParams {
                arrivals: 0.1,
                arrivals_at_end: 0.1,
                waiting: Level::Wander(0.0, 0.0),
                kv_usage: Level::Wander(0.02, 0.08),
                gpu: GpuParams { util: (12.0, 18.0), power_w: (170.0, 220.0), temp_c: (40.0, 46.0), ..GpuParams::HEALTHY },
                ..h
            },
            K::GpuUnderutilizedNear => StateParams {
                arrivals: 0.5,
                arrivals_at_end: 0.5,
                kv_usage: Level::Wander(0.15, 0.3),
                gpu: GpuParams { util: (55.0, 68.0), power_w: (380.0, 440.0), temp_c: (52.0, 58.0), ..GpuParams::HEALTHY },
                ..h
            },
            K::ThroughputStall => StateParams {
                onset: Onset::BeforeEnd { secs: 600 },
                serving: false,
                running: Running::Around(9.0, 11.0),
                waiting: Level::Accumulate,
                kv_usage: Level::Hold,
                ..h
            },
            K::ThroughputStallNear => StateParams {
                onset: Onset::BeforeEnd { secs: 600 },
                arrivals: 0.0,
                arrivals_at_end: 0.0,
                waiting: Level::Wander(0.0, 0.0),
                kv_usage: Level::Wander(0.0, 0.0),
                gpu: GpuParams { util: (0.0, 0.0), power_w: (68.0, 75.0), temp_c: (34.0, 38.0), ..GpuParams::HEALTHY },
                ..h
            },
            K::StalledEngine => StateParams { scope: Scope::Replica, stall_bursts: &[(0.3, 0.63)], ..h },
            K::StalledEngineNear => StateParams { scope: Scope::Replica, stall_bursts: &[(0.3, 0.5)], ..h },
            K::RankImbalance => StateParams { scope: Scope::Replica, rank_waiting: (6.0, 9.0), ..h },
            K::RankImbalanceNear => StateParams { scope: Scope::Replica, rank_waiting: (2.5, 3.5), ..h },
            K::DeferredWaiting => StateParams { deferred: (1.5, 3.5), ..h },
            K::DeferredWaitingNear => StateParams { deferred: (0.5, 1.5), ..h },
            K::RequestsRejected => StateParams {
                arrivals: 2.0,
                arrivals_at_end: 2.0,
                reject_share: 0.5,
                queue_median_s: 1.2,
                queue_sigma: 0.4,
                itl: 1.05,
                running: Running::AtCap,
                waiting: Level::Wander(28.0, 32.0),
                kv_usage: Level::Wander(0.7, 0.85),
                ..h
            },
            K::RequestsRejectedNear => StateParams { reject_burst: 3, ..h },
            K::RequestErrors => StateParams { abort_share: 0.15, error_share: 0.03, ..h },
            K::RequestErrorsNear => StateParams { abort_share: 0.02, ..h },
            K::GiveUps => StateParams { abort_share: 0.15, ..h },
            K::GiveUpsNear => StateParams { abort_share: 0.025, ..h },
            // The scheduler evicts low-priority requests for high-priority arrivals: as many
            // preemptions as KV pressure brings, with room left in the cache.
            K::PriorityPreemption => StateParams {
                queue_median_s: 0.4,
                queue_sigma: 0.6,
                waiting: Level::Wander(2.0, 8.0),
                kv_usage: Level::Wander(0.6, 0.75),
                preemptions_per_s: (0.8, 2.5),
                preemption_priority_share: 0.95,
                ..h
            },
            K::PriorityPreemptionNear => StateParams {
                onset: Onset::BaselineStart,
                kv_usage: Level::Wander(0.6, 0.75),
                preemptions_per_s: (0.03, 0.03),
                preemption_priority_share: 1.0,
                ..h
            },
            K::RepeatedPreemption => StateParams {
                queue_median_s: 0.8,
                queue_sigma: 0.6,
                prefill: 1.4,
                itl: 1.3,
                waiting: Level::Wander(5.0, 20.0),
                kv_usage: Level::Wander(0.955, 1.0),
                preemptions_per_request: 0.6,
                preemptions_each: 5.0,
                ..h
            },
            K::RepeatedPreemptionNear => StateParams {
                queue_median_s: 0.8,
                queue_sigma: 0.6,
                prefill: 1.4,
                itl: 1.3,
                waiting: Level::Wander(5.0, 20.0),
                kv_usage: Level::Wander(0.955, 1.0),
                preemptions_per_request: 0.6,
                ..h
            },
            // A model put to sleep gets little traffic, but what arrives waits for an engine that never steps.
            K::EngineAsleep => StateParams {
                onset: Onset::BeforeEnd { secs: 900 },
                arrivals: 0.1,
                arrivals_at_end: 0.1,
                serving: false,
                running: Running::Around(0.0, 0.0),
                waiting: Level::Accumulate,
                kv_usage: Level::Wander(0.0, 0.0),
                sleep: SleepState::WeightsOffloaded,
                gpu: GpuParams { util: (0.0, 0.0), power_w: (68.0, 75.0), temp_c: (34.0, 38.0), ..GpuParams::HEALTHY },
                ..h
            },
            K::EngineAsleepNear => StateParams {
                onset: Onset::BeforeEnd { secs: 900 },
                arrivals: 0.0,
                arrivals_at_end: 0.0,
                serving: false,
                running: Running::Around(0.0, 0.0),
                waiting: Level::Wander(0.0, 0.0),
                kv_usage: Level::Wander(0.0, 0.0),
                sleep: SleepState::WeightsOffloaded,
                gpu: GpuParams { util: (0.0, 0.0), power_w: (68.0, 75.0), temp_c: (34.0, 38.0), ..GpuParams::HEALTHY },
                ..h
            },
            K::SpecDecodeInefficient => StateParams { spec_acceptance: 0.15, ..h },
            K::SpecDecodeInefficientNear => StateParams { spec_acceptance: 0.45, ..h },
            K::ExternalPrefixCacheMiss => StateParams { external_hit_ratio: 0.03, ..h },
            K::ExternalPrefixCacheMissNear => StateParams { external_hit_ratio: 0.5, ..h },
            K::ProcessMemoryGrowth => StateParams { memory_growth_per_s: 80e6 / 60.0, ..h },
            K::ProcessMemoryGrowthNear => StateParams { memory_growth_per_s: 4e6 / 60.0, ..h },
            K::IterationTokensCollapse => StateParams { step_split: 4.0, ..h },
            K::IterationTokensCollapseNear => StateParams { step_split: 1.3, ..h },
            // slow-input-processing's story, smaller: TTFT P95 about doubles (0.3 s more) without
            // burning the 500 ms objective's budget fast enough for slo-burn.
            K::TtftUnattributed => StateParams { input_s: 0.3, ..h },
            K::TtftUnattributedNear => StateParams { input_s: 0.1, ..h },
            K::KvTransferFailures => StateParams { nixl_failures_per_s: 0.5, nixl_xfer: 5.0, ..h },
            K::KvTransferSlow => StateParams { nixl_xfer: 30.0, ..h },
            K::KvTransferSlowNear => StateParams { nixl_xfer: 2.0, ..h },
            K::KvTransferRateImpossible => StateParams { nixl_time_scale: 0.001, ..h },
            K::KvTransferRateImpossibleNear => StateParams { nixl_xfer: 0.1, ..h },
            // x1.3 underneath reads as x1.2 through the histogram's buckets
            K::KvTransferFailuresNear => StateParams { nixl_xfer: 1.3, ..h },
            K::KvCacheLeak => StateParams { kv_usage: Level::Ramp(0.45, 0.9), ..h },
            K::KvCacheLeakNear => StateParams { arrivals_at_end: 1.6, kv_usage: Level::Wander(0.38, 0.52), kv_follows_load: true, ..h },
            K::ReplicaImbalance => StateParams { replica_weight: 3.0, ..h },
            K::ReplicaImbalanceNear => StateParams { replica_weight: 1.2, ..h },
            K::ReplicaOutlier => StateParams { scope: Scope::Replica, itl: 3.0, prefill: 2.0, kv_usage: Level::Wander(0.93, 0.97), ..h },
            // ITL x1.25 underneath reads as about x1.2 through the buckets (the healthy P95 sits just under 50 ms)
            K::ReplicaOutlierNear => StateParams { scope: Scope::Replica, itl: 1.25, prefill: 1.2, ..h },
            // Little's law does the rest: the replica whose own cap is under the offered batch
            // pins it there and queues the excess.
            K::ReplicaConfigCap => StateParams { arrivals: 2.5, arrivals_at_end: 2.5, ..h },
            K::ReplicaConfigCapNear => StateParams { arrivals: 1.3, arrivals_at_end: 1.3, ..h },
            K::ReplicaBatchLoad => StateParams { replica_weight: 2.7, itl_batch_k: 2.0, ..h },
            K::ReplicaBatchLoadNear => StateParams { replica_weight: 1.5, itl_batch_k: 2.0, ..h },
            K::TargetDown => StateParams { onset: Onset::BeforeEnd { secs: 720 }, scope: Scope::Replica, scraped: false, ..h },
            K::TargetDownNear => StateParams { scope: Scope::Replica, ..h },
            // Thermal throttling slows every kernel: decode by the clock ratio and more (x1.95
            // underneath, x1.8 as histogram_quantile reads it), prefill a bit less.
            K::GpuThrottling => StateParams {
                itl: 1.95,
                prefill: 1.5,
                gpu: GpuParams { sm_clock_mhz: (1185.0, 1215.0), temp_c: (86.0, 90.0), power_w: (400.0, 440.0), throttle_reasons: 0x40, ..GpuParams::HEALTHY },
                ..h
            },
            K::GpuThrottlingNear => StateParams { gpu: GpuParams { sm_clock_mhz: (1890.0, 1910.0), temp_c: (66.0, 72.0), ..GpuParams::HEALTHY }, ..h },
            // XID 79: the GPU fell off the bus. The engine hangs with its batch; the router keeps sending.
            K::GpuErrors => StateParams {
                onset: Onset::BeforeEnd { secs: 600 },
                scope: Scope::Replica,
                serving: false,
                running: Running::Hold,
                waiting: Level::Accumulate,
                kv_usage: Level::Hold,
                gpu: GpuParams { util: (0.0, 0.0), power_w: (60.0, 70.0), temp_c: (38.0, 44.0), xid: 79, ..GpuParams::HEALTHY },
                ..h
            },
            K::GpuErrorsNear => StateParams { scope: Scope::Replica, ..h },
            // Four times the prompt: prefill dominates, the GPUs sit at their power cap.
            K::GpuPromptShift => {
                StateParams { prompt: 4.0, kv_usage: Level::Wander(0.45, 0.75), gpu: GpuParams { compute_share: 0.85, ..GpuParams::HEALTHY }, ..h }
            }
            K::GpuPromptShiftNear => StateParams { prompt: 1.3, gpu: GpuParams { compute_share: 0.15, ..GpuParams::HEALTHY }, ..h },
            K::GpuPrefillBursts => StateParams { gpu: GpuParams { compute_share: 0.33, ..GpuParams::HEALTHY }, ..h },
            K::GpuPrefillBurstsNear => StateParams { gpu: GpuParams { compute_share: 0.03, ..GpuParams::HEALTHY }, ..h },
            K::GpuThermalSlowdown => StateParams {
                scope: Scope::Replica,
                itl: 1.95,
                prefill: 1.5,
                gpu: GpuParams { sm_clock_mhz: (1185.0, 1215.0), temp_c: (86.0, 90.0), throttle_reasons: 0x40, ..GpuParams::HEALTHY },
                ..h
            },
            K::GpuThermalSlowdownNear => StateParams { scope: Scope::Replica, gpu: GpuParams { temp_c: (80.0, 83.0), ..GpuParams::HEALTHY }, ..h },
            K::GpuPowerLimitLowered => StateParams { itl: 1.2, gpu: GpuParams { power_limit_w: 450.0, ..GpuParams::HEALTHY }, ..h },
            K::GpuPowerLimitLoweredNear => StateParams { gpu: GpuParams { power_limit_w: 680.0, ..GpuParams::HEALTHY }, ..h },
            // A slower prefill that has been there long before the window: 70% of first tokens
            // inside 500 ms, so a comparison with the baseline sees nothing.
            K::RouterSaturated => StateParams { router_wait_s: 1.5, ..h },
            K::RouterSaturatedNear => StateParams { router_wait_s: 0.12, ..h },
            // Prompts queue for a prefill worker; the decode workers get them later and fewer.
            K::PrefillPoolSaturated | K::PrefillPoolSaturatedNear => StateParams {
                scope: if self == K::PrefillPoolSaturated { Scope::PrefillPool } else { Scope::Model },
                queue_median_s: 1.5,
                queue_sigma: 0.5,
                running: Running::AtCap,
                waiting: Level::Wander(15.0, 40.0),
                ..h
            },
            K::DecodePoolSaturated => StateParams {
                scope: Scope::DecodePool,
                queue_median_s: 1.5,
                queue_sigma: 0.5,
                running: Running::AtCap,
                waiting: Level::Wander(15.0, 40.0),
                ..h
            },
            K::DecodePoolSaturatedNear => StateParams { scope: Scope::DecodePool, waiting: Level::Wander(3.0, 4.5), ..h },
            K::RoutingSkew => StateParams { replica_weight: 3.0, ..h },
            K::RoutingSkewNear => StateParams { replica_weight: 1.2, ..h },
            K::BackendCutOff => StateParams { router_open: &[(0.0, 1.0)], ..h },
            K::BackendCutOffNear => StateParams { router_open: &[(0.45, 0.52)], ..h },
            K::RouterPrefixBlind => StateParams { router_blind_share: 1.0, ..h },
            K::RouterPrefixBlindNear => StateParams { router_blind_share: 0.4, ..h },
            K::RouterRetries => StateParams { router_retry_share: 0.1, ..h },
            K::RouterRetriesNear => StateParams { router_retry_share: 0.01, ..h },
            K::SloBurn => StateParams { onset: Onset::BeforeEnd { secs: 3600 }, prefill: 6.5, ..h },
            K::SloBurnNear => StateParams { onset: Onset::BeforeEnd { secs: 3600 }, prefill: 1.3, ..h },
        }
    }
}

impl std::fmt::Display for IncidentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a state replaces the healthy one on the incident model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Onset {
    /// At the start of the diagnosed window (a change the diagnosis should see against the baseline).
    WindowStart,
    /// At the start of the baseline (a trend that runs through both windows).
    BaselineStart,
    /// This many seconds before the window's end (the last minutes of the window, or long before it).
    BeforeEnd { secs: u64 },
}

/// Which replicas of the incident model enter the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// All of them.
    Model,
    /// Only the one `incident.replica` names; its peers stay healthy.
    Replica,
    /// The prefill workers of a router in PD mode (`RouterKind::prefills`); the decode ones stay healthy.
    PrefillPool,
    /// Its decode workers; the prefill ones stay healthy.
    DecodePool,
}

/// How a gauge moves while the state lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Level {
    /// Wanders inside `(low, high)` (AR(1) noise).
    Wander(f64, f64),
    /// Goes linearly from the first value at the onset to the second at the window's end, with a little noise.
    Ramp(f64, f64),
    /// Keeps the value it had when the state began.
    Hold,
    /// Grows by every request that arrives and is never served (waiting only).
    Accumulate,
}

/// How `num_requests_running` is set.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Running {
    /// Little's law: the busy seconds of the interval's requests over its length, capped at max_num_seqs.
    FromLoad,
    /// At max_num_seqs (one below it now and then).
    AtCap,
    /// Around a value inside `(low, high)`, whatever the load.
    Around(f64, f64),
    /// What it was when the state began.
    Hold,
}

/// The engine's sleep mode (`vllm:engine_sleep_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SleepState {
    Awake,
    /// Sleep level 1.
    WeightsOffloaded,
    /// Sleep level 2.
    DiscardAll,
}

impl SleepState {
    pub const ALL: [SleepState; 3] = [SleepState::Awake, SleepState::WeightsOffloaded, SleepState::DiscardAll];

    /// The `sleep_state` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SleepState::Awake => "awake",
            SleepState::WeightsOffloaded => "weights_offloaded",
            SleepState::DiscardAll => "discard_all",
        }
    }
}

/// What the DCGM exporter reports for a replica's GPU (only exported for models with `dcgm = true`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuParams {
    /// DCGM_FI_DEV_GPU_UTIL range, percent.
    pub util: (f64, f64),
    /// DCGM_FI_DEV_SM_CLOCK range, MHz.
    pub sm_clock_mhz: (f64, f64),
    pub temp_c: (f64, f64),
    pub power_w: (f64, f64),
    /// DCGM_FI_DEV_CLOCK_THROTTLE_REASONS bitmask (0x40: hardware thermal slowdown).
    pub throttle_reasons: u32,
    /// DCGM_FI_DEV_XID_ERRORS: the last XID seen (0: none).
    pub xid: u32,
    /// With a real GPU's samples (`gpu = "h200"`): the share of scrapes that find the GPU
    /// compute-bound at its power cap rather than decoding (prefill-heavy work).
    pub compute_share: f64,
    /// With a real GPU's samples: the enforced power limit, watts (the board's default is 700 W).
    /// A sample that drew more is held at it, the power cap set and the clock cut in proportion.
    pub power_limit_w: f64,
}

impl GpuParams {
    pub const HEALTHY: GpuParams = GpuParams {
        util: (80.0, 90.0),
        sm_clock_mhz: (1980.0, 1980.0),
        temp_c: (58.0, 66.0),
        power_w: (520.0, 580.0),
        throttle_reasons: 0,
        xid: 0,
        // Chat serving is decode: a real H200 decoding at full batch stayed under its cap.
        compute_share: 0.0,
        power_limit_w: 700.0,
    };
}

/// One state of a model's servers. Multipliers apply to the healthy workload ([`Workload::DEFAULT`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StateParams {
    pub onset: Onset,
    pub scope: Scope,
    /// Arrival-rate multiplier at the onset.
    pub arrivals: f64,
    /// Arrival-rate multiplier at the window's end; linear in between (equal to `arrivals` for a step).
    pub arrivals_at_end: f64,
    /// The arrival multipliers apply to the replica's capacity (max_num_seqs over the mean time a
    /// request holds a slot in this state) instead of to the model's healthy rate.
    pub arrivals_at_capacity: bool,
    /// Arrival weight of the replica `incident.replica` names, against 1 for each peer; the
    /// model's total is unchanged.
    pub replica_weight: f64,
    /// Median time a request waits before it is scheduled, seconds (lognormal).
    pub queue_median_s: f64,
    pub queue_sigma: f64,
    /// The median wait is at least the waiting requests over the arrival rate (Little's law on the queue).
    pub queue_follows_waiting: bool,
    /// Prompt-length multiplier (prefill time follows the length).
    pub prompt: f64,
    /// Multiplier of the output length clients would accept.
    pub output: f64,
    /// Multiplier of the `max_tokens` values clients send.
    pub max_tokens: f64,
    /// Prefill-time multiplier, on top of what the prompt length implies.
    pub prefill: f64,
    /// Median seconds a request spends before the engine queues it (tokenization, the API server),
    /// counted in TTFT and E2E only. Healthy: 0 (TTFT is queue plus prefill, as the generated
    /// data always had it, so no other scenario's bytes change).
    pub input_s: f64,
    /// Inter-token-latency multiplier (also the first decode step).
    pub itl: f64,
    /// Whether the engine completes anything. When not, requests neither finish nor observe
    /// anything, counters stop and the engine takes no steps.
    pub serving: bool,
    /// Whether the target is scraped. When not, `up` is 0 and every other series of the replica ends.
    pub scraped: bool,
    pub running: Running,
    pub waiting: Level,
    /// KV-cache usage, 0..1.
    pub kv_usage: Level,
    /// KV usage scales with the arrival multiplier (more traffic, more blocks).
    pub kv_follows_load: bool,
    /// Range a replica's preemption rate (per second) is drawn from.
    pub preemptions_per_s: (f64, f64),
    /// Preemptions per finished request, on top of `preemptions_per_s`.
    pub preemptions_per_request: f64,
    /// When not empty, preemptions happen only inside these fractions of the state's span.
    pub preemption_bursts: &'static [(f64, f64)],
    /// When not empty, `waiting` holds only inside these fractions of the state's span (the
    /// healthy level outside them).
    pub waiting_bursts: &'static [(f64, f64)],
    /// `prompt_tokens_recomputed_total` as a share of the prompt tokens.
    pub recomputed_share: f64,
    /// Share of preemptions made for higher-priority requests (`reason="priority"` of
    /// `num_preemptions_by_reason`); the rest are for want of KV cache (`kv_full`).
    pub preemption_priority_share: f64,
    /// How many times each preempted request is preempted before it finishes
    /// (`request_num_preemptions`).
    pub preemptions_each: f64,
    /// Share of HTTP requests answered 5xx (they never reach the engine).
    pub http_5xx_share: f64,
    /// Share of engine requests the client aborts.
    pub abort_share: f64,
    /// Share of engine requests that finish with `finished_reason="error"` (V1).
    pub error_share: f64,
    /// Share of prompt tokens served from the prefix cache.
    pub prefix_hit_ratio: f64,
    /// Share of the prompt tokens the local prefix cache missed that the external one (behind a
    /// `kv_connector = "lmcache"`) served.
    pub external_hit_ratio: f64,
    /// Share of arrivals the engine's admission control rejects (`admission_rejections_total`,
    /// answered 429 at the HTTP layer).
    pub reject_share: f64,
    /// Rejections in one burst at the middle of the state's span, on the replica `incident.replica` names.
    pub reject_burst: u32,
    pub sleep: SleepState,
    /// Speculative decoding: accepted over draft tokens.
    pub spec_acceptance: f64,
    /// NIXL failed transfers per second per replica.
    pub nixl_failures_per_s: f64,
    /// NIXL transfer-time multiplier.
    pub nixl_xfer: f64,
    /// What the transfer-time histogram records of each transfer's real time (1: all of it).
    pub nixl_time_scale: f64,
    /// Bytes a second by which the server process's resident memory grows (a leak).
    pub memory_growth_per_s: f64,
    /// Decode steps taken for the same work, as a multiple of the healthy number (1): more steps,
    /// fewer tokens each.
    pub step_split: f64,
    /// Decode follows the running batch: each step costs `1 + batch / k` against the healthy
    /// batch's (0: the healthy ITL whatever the batch, as every older state has it).
    pub itl_batch_k: f64,
    pub gpu: GpuParams,
    /// vLLM's router (a model with `router`): its own median time per request before an engine
    /// answers, seconds (lognormal), on top of the engine's input processing.
    pub router_wait_s: f64,
    /// Share of the router's requests it sends again after an attempt failed on the way.
    pub router_retry_share: f64,
    /// Fractions of the state's span during which the router holds the circuit of the replica
    /// `incident.replica` names open: it gets no arrivals, its peers take its share.
    pub router_open: &'static [(f64, f64)],
    /// Range of requests waiting on the last data-parallel rank of the replica `incident.replica`
    /// names beyond its share (a model with `dp_ranks`): one rank queues, the others have room.
    pub rank_waiting: (f64, f64),
    /// Share of a cache-aware router's prefix decisions made without the prompt's tokens
    /// (`missing_tokens`: the worker asked to render the prompt refused); the rest hit, miss or
    /// balance load in fixed shares.
    pub router_blind_share: f64,
    /// Range of requests a replica holds deferred (waiting for something other than capacity: a
    /// LoRA adapter slot, a KV transfer, a grammar compiling), on top of `waiting`, which counts
    /// those waiting for capacity. Healthy: none.
    pub deferred: (f64, f64),
    /// Fractions of the state's span during which the engine is stuck: it serves nothing (as
    /// `serving = false`) and its running, waiting and KV gauges hold their last values.
    pub stall_bursts: &'static [(f64, f64)],
}

impl StateParams {
    pub const HEALTHY: StateParams = StateParams {
        onset: Onset::WindowStart,
        scope: Scope::Model,
        arrivals: 1.0,
        arrivals_at_end: 1.0,
        arrivals_at_capacity: false,
        replica_weight: 1.0,
        queue_median_s: 0.015,
        queue_sigma: 1.0,
        queue_follows_waiting: false,
        prompt: 1.0,
        output: 1.0,
        max_tokens: 1.0,
        prefill: 1.0,
        input_s: 0.0,
        itl: 1.0,
        serving: true,
        scraped: true,
        running: Running::FromLoad,
        waiting: Level::Wander(0.0, 0.6),
        kv_usage: Level::Wander(0.3, 0.6),
        kv_follows_load: false,
        preemptions_per_s: (0.0, 0.0),
        preemptions_per_request: 0.0,
        preemption_bursts: &[],
        waiting_bursts: &[],
        recomputed_share: 0.0,
        preemption_priority_share: 0.0,
        preemptions_each: 1.0,
        http_5xx_share: 0.001,
        abort_share: 0.01,
        error_share: 0.0,
        prefix_hit_ratio: 0.5,
        external_hit_ratio: 0.6,
        reject_share: 0.0,
        reject_burst: 0,
        sleep: SleepState::Awake,
        spec_acceptance: 0.6,
        nixl_failures_per_s: 0.0,
        nixl_xfer: 1.0,
        nixl_time_scale: 1.0,
        memory_growth_per_s: 0.0,
        step_split: 1.0,
        itl_batch_k: 0.0,
        gpu: GpuParams::HEALTHY,
        router_wait_s: 0.003,
        router_retry_share: 0.0,
        router_open: &[],
        stall_bursts: &[],
        deferred: (0.0, 0.0),
        router_blind_share: 0.0,
        rank_waiting: (0.0, 0.0),
    };
}

/// The healthy request mix every model serves; states scale it.
///
/// The numbers are those of a chat deployment meeting its targets: about 99.8% of first tokens
/// within 500 ms and 99.6% of token gaps within 50 ms, so an SLO rule has budget left when healthy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Workload {
    /// Median prompt length, tokens (lognormal).
    pub prompt_median: f64,
    pub prompt_sigma: f64,
    /// Median output length the client would accept, tokens (lognormal, cut at `max_tokens`).
    pub output_median: f64,
    pub output_sigma: f64,
    /// Prefill seconds per prompt token.
    pub prefill_per_token_s: f64,
    /// Noise on a request's prefill time (lognormal sigma).
    pub prefill_sigma: f64,
    /// Median inter-token latency, seconds.
    pub itl_median_s: f64,
    /// Spread of a request's mean ITL, and of tokens within a request (lognormal sigmas).
    pub itl_request_sigma: f64,
    pub itl_token_sigma: f64,
    /// Median time from prefill done to the first token leaving the server, seconds.
    pub first_step_s: f64,
    /// `max_tokens` values clients send, with weights.
    pub max_tokens: [(u32, u32); 4],
    /// Share of requests with `n = 2`.
    pub n2_share: f64,
    /// Share of HTTP requests rejected with 4xx (bad input) before reaching the engine.
    pub http_4xx_share: f64,
    /// Largest prefill chunk in one engine step, tokens.
    pub max_batched_tokens: f64,
    /// Draft tokens proposed per speculative step.
    pub spec_tokens: f64,
    /// Median NIXL transfer time, seconds (lognormal).
    pub nixl_median_s: f64,
    pub nixl_sigma: f64,
}

impl Workload {
    pub const DEFAULT: Workload = Workload {
        prompt_median: 600.0,
        prompt_sigma: 0.7,
        output_median: 180.0,
        output_sigma: 0.7,
        prefill_per_token_s: 0.00008,
        prefill_sigma: 0.3,
        itl_median_s: 0.03,
        itl_request_sigma: 0.12,
        itl_token_sigma: 0.15,
        first_step_s: 0.01,
        max_tokens: [(256, 2), (512, 3), (1024, 3), (2048, 2)],
        n2_share: 0.01,
        http_4xx_share: 0.003,
        max_batched_tokens: 8192.0,
        spec_tokens: 4.0,
        nixl_median_s: 0.008,
        nixl_sigma: 0.55,
    };

    /// Expected output tokens of a request in state `st`: the lognormal cut at each `max_tokens` value.
    pub fn mean_output(&self, st: &StateParams) -> f64 {
        let median = self.output_median * st.output;
        let mu = median.ln();
        let s = self.output_sigma;
        let mean = median * (s * s / 2.0).exp();
        let total: u32 = self.max_tokens.iter().map(|(_, w)| *w).sum();
        let mut acc = 0.0;
        for (m, w) in self.max_tokens {
            let cap = f64::from(m) * st.max_tokens;
            // E[min(L, cap)] = E[L; L < cap] + cap * P(L >= cap)
            let below = mean * normal_cdf((cap.ln() - mu - s * s) / s);
            let above = cap * (1.0 - normal_cdf((cap.ln() - mu) / s));
            acc += (below + above) * f64::from(w);
        }
        acc / f64::from(total.max(1))
    }

    /// Expected seconds a request occupies a batch slot in state `st` (prefill plus decode).
    pub fn mean_service_s(&self, st: &StateParams) -> f64 {
        let ln_mean = |median: f64, sigma: f64| median * (sigma * sigma / 2.0).exp();
        let prefill = ln_mean(self.prompt_median * st.prompt, self.prompt_sigma)
            * self.prefill_per_token_s
            * st.prefill
            * (self.prefill_sigma * self.prefill_sigma / 2.0).exp();
        let decode = self.mean_output(st) * self.itl_median_s * st.itl;
        prefill + self.first_step_s * st.itl + decode
    }
}

/// The standard normal CDF (Abramowitz and Stegun 7.1.26; error below 1.5e-7).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_name() {
        for kind in IncidentKind::ALL {
            let toml_text = format!("k = \"{}\"", kind.as_str());
            #[derive(Deserialize)]
            struct K {
                k: IncidentKind,
            }
            let parsed: K = toml::from_str(&toml_text).expect("kind parses");
            assert_eq!(parsed.k, kind);
        }
    }

    #[test]
    fn every_pathology_has_a_near_miss_and_every_near_miss_a_pathology() {
        let nears: Vec<IncidentKind> = IncidentKind::ALL.iter().copied().filter(|k| k.near_miss_of().is_some()).collect();
        assert_eq!(nears.len(), 50);
        for near in nears {
            let base = near.near_miss_of().expect("a near miss names its kind");
            assert_eq!(format!("{base}-near"), near.as_str());
            assert_eq!(base.near_miss_of(), None);
            let (n, b) = (near.needs(), base.needs());
            assert_eq!(
                (n.v1, n.spec_decode, n.nixl, n.dcgm, n.min_replicas, n.router, n.router_pd),
                (b.v1, b.spec_decode, b.nixl, b.dcgm, b.min_replicas, b.router, b.router_pd),
                "{near}"
            );
        }
    }

    #[test]
    fn every_state_keeps_its_ranges_ordered_and_shares_valid() {
        for kind in IncidentKind::ALL {
            let p = kind.params();
            let mut ranges = vec![p.preemptions_per_s, p.deferred, p.rank_waiting, p.gpu.util, p.gpu.sm_clock_mhz, p.gpu.temp_c, p.gpu.power_w];
            for level in [p.waiting, p.kv_usage] {
                if let Level::Wander(lo, hi) = level {
                    ranges.push((lo, hi));
                }
            }
            if let Running::Around(lo, hi) = p.running {
                ranges.push((lo, hi));
            }
            for (lo, hi) in ranges {
                assert!(lo <= hi, "{kind}: range ({lo}, {hi})");
            }
            match p.kv_usage {
                Level::Wander(lo, hi) | Level::Ramp(lo, hi) => assert!(lo >= 0.0 && hi <= 1.0, "{kind}"),
                Level::Hold => {}
                Level::Accumulate => panic!("{kind}: KV usage cannot accumulate requests"),
            }
            for share in [
                p.http_5xx_share,
                p.abort_share,
                p.error_share,
                p.prefix_hit_ratio,
                p.external_hit_ratio,
                p.recomputed_share,
                p.reject_share,
                p.spec_acceptance,
                p.router_blind_share,
            ] {
                assert!((0.0..=1.0).contains(&share), "{kind}");
            }
            assert!(p.abort_share + p.error_share < 1.0, "{kind}");
            assert!(p.arrivals >= 0.0 && p.arrivals_at_end >= 0.0, "{kind}");
            for m in [p.prompt, p.output, p.max_tokens, p.prefill, p.itl, p.replica_weight, p.nixl_xfer, p.nixl_time_scale, p.step_split] {
                assert!(m > 0.0, "{kind}");
            }
            assert!((0.0..=1.0).contains(&p.router_retry_share) && p.router_wait_s > 0.0, "{kind}");
            for (a, b) in p.preemption_bursts.iter().chain(p.router_open).chain(p.stall_bursts) {
                assert!(0.0 <= *a && a < b && *b <= 1.0, "{kind}");
            }
        }
    }

    #[test]
    fn only_the_ramp_starts_at_the_baseline_and_only_slo_burn_before_it() {
        for kind in IncidentKind::ALL {
            match kind.params().onset {
                // A ramp runs through both windows; so does a scheduling policy that was on all
                // along (its few priority preemptions are no change against the baseline).
                Onset::BaselineStart => assert!(matches!(kind, IncidentKind::Ramp | IncidentKind::PriorityPreemptionNear), "{kind}"),
                Onset::BeforeEnd { secs } if secs > 1800 => {
                    assert!(matches!(kind, IncidentKind::SloBurn | IncidentKind::SloBurnNear), "{kind}")
                }
                _ => {}
            }
        }
    }

    #[test]
    fn the_normal_cdf_matches_known_values() {
        for (x, p) in [(0.0, 0.5), (1.0, 0.841_344_7), (-1.644_853_6, 0.05), (2.326_347_9, 0.99)] {
            assert!((normal_cdf(x) - p).abs() < 1e-6, "{x}: {}", normal_cdf(x));
        }
    }

    #[test]
    fn mean_output_accounts_for_the_max_tokens_cut() {
        let wl = Workload::DEFAULT;
        let healthy = wl.mean_output(&StateParams::HEALTHY);
        // uncut the mean would be 180 * e^(0.245) = 230; the cut takes some off
        assert!((195.0..230.0).contains(&healthy), "{healthy}");
        let long = wl.mean_output(&IncidentKind::PrefillStarvation.params());
        assert!(long / healthy > 4.0, "x{}", long / healthy);
    }
}
