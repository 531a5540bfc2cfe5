//! The incident kinds: one module per story, holding the kind and its near miss (`<kind>-near`:
//! the same story told too weakly for its rule to fire, so a test can prove the rule stays quiet),
//! each a unit struct with its doc comment and its [`Incident`] implementation: its name, the rule
//! that tells its story, what it needs of the fleet and its state's numbers ([`StateParams`]).
//! [`IncidentKind`] is a scenario's `kind`, and [`IncidentKind::incident`] is the one place that
//! dispatches on it.
//!
//! The numbers are written against the targets the diagnosis must see over a 30-minute window (see
//! the module docs of [`crate`] and `fixtures/scenarios/README.md`); the unit tests in `tests.rs`
//! measure them from the generated data the way Prometheus would.
//!
//! Adding a kind: its module here (or its struct in its kind's module, for a near miss), its `mod`
//! line, its variant in [`IncidentKind`] and [`IncidentKind::ALL`], and its arm in
//! [`IncidentKind::incident`]. A state that needs a number no kind had yet adds a field to
//! [`StateParams`] with a healthy default that changes nothing for the other kinds.

use serde::{Deserialize, Serialize};

pub(crate) use crate::state::{GpuParams, Level, Needs, Onset, Running, Scope, SleepState, StateParams};

mod backend_cut_off;
mod decode_pool_saturated;
mod deferred_waiting;
mod engine_asleep;
mod external_prefix_cache_miss;
mod give_ups;
mod gpu_errors;
mod gpu_power_limit_lowered;
mod gpu_prefill_bursts;
mod gpu_prompt_shift;
mod gpu_thermal_slowdown;
mod gpu_throttling;
mod gpu_underutilized;
mod healthy;
mod http_errors;
mod iteration_tokens_collapse;
mod kv_cache_leak;
mod kv_cache_pressure;
mod kv_transfer_failures;
mod kv_transfer_rate_impossible;
mod kv_transfer_slow;
mod load_exceeds_capacity;
mod prefill_pool_saturated;
mod prefill_starvation;
mod prefix_cache_miss;
mod priority_preemption;
mod process_memory_growth;
mod ramp;
mod rank_imbalance;
mod recompute_thrashing;
mod repeated_preemption;
mod replica_batch_load;
mod replica_config_cap;
mod replica_imbalance;
mod replica_outlier;
mod request_errors;
mod requests_rejected;
mod router_prefix_blind;
mod router_retries;
mod router_saturated;
mod routing_skew;
mod severe_saturation;
mod slo_burn;
mod slow_decode;
mod slow_input_processing;
mod slow_prefill;
mod spec_decode_inefficient;
mod stalled_engine;
mod target_down;
mod throughput_stall;
mod ttft_unattributed;
mod workload_lighter;
mod workload_shift;

/// Which story a scenario tells about its incident model: its name in scenario files is the
/// kebab-case of the variant (`kv-cache-pressure`). What each one is and does is in its module
/// under `incidents/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IncidentKind {
    Healthy,
    Ramp,
    LoadExceedsCapacity,
    LoadExceedsCapacityNear,
    SlowPrefill,
    SlowPrefillNear,
    SlowDecode,
    SlowDecodeNear,
    SevereSaturation,
    SevereSaturationNear,
    KvCachePressure,
    HttpErrors,
    HttpErrorsNear,
    PrefillStarvation,
    PrefillStarvationNear,
    PrefixCacheMiss,
    PrefixCacheMissNear,
    RecomputeThrashing,
    RecomputeThrashingNear,
    WorkloadShift,
    WorkloadShiftNear,
    WorkloadLighter,
    WorkloadLighterNear,
    GpuUnderutilized,
    GpuUnderutilizedNear,
    ThroughputStall,
    ThroughputStallNear,
    StalledEngine,
    StalledEngineNear,
    RankImbalance,
    RankImbalanceNear,
    DeferredWaiting,
    DeferredWaitingNear,
    RequestsRejected,
    RequestsRejectedNear,
    RequestErrors,
    RequestErrorsNear,
    GiveUps,
    GiveUpsNear,
    PriorityPreemption,
    PriorityPreemptionNear,
    RepeatedPreemption,
    RepeatedPreemptionNear,
    EngineAsleep,
    EngineAsleepNear,
    SpecDecodeInefficient,
    SpecDecodeInefficientNear,
    KvTransferFailures,
    KvTransferFailuresNear,
    KvCacheLeak,
    KvCacheLeakNear,
    ReplicaImbalance,
    ReplicaImbalanceNear,
    ReplicaOutlier,
    ReplicaOutlierNear,
    ReplicaConfigCap,
    ReplicaConfigCapNear,
    ReplicaBatchLoad,
    ReplicaBatchLoadNear,
    TargetDown,
    TargetDownNear,
    GpuThrottling,
    GpuThrottlingNear,
    GpuErrors,
    GpuErrorsNear,
    GpuPromptShift,
    GpuPromptShiftNear,
    GpuPrefillBursts,
    GpuPrefillBurstsNear,
    GpuThermalSlowdown,
    GpuThermalSlowdownNear,
    GpuPowerLimitLowered,
    GpuPowerLimitLoweredNear,
    SloBurn,
    SloBurnNear,
    SlowInputProcessing,
    SlowInputProcessingNear,
    ExternalPrefixCacheMiss,
    ExternalPrefixCacheMissNear,
    ProcessMemoryGrowth,
    ProcessMemoryGrowthNear,
    IterationTokensCollapse,
    IterationTokensCollapseNear,
    RouterSaturated,
    RouterSaturatedNear,
    PrefillPoolSaturated,
    PrefillPoolSaturatedNear,
    DecodePoolSaturated,
    DecodePoolSaturatedNear,
    RoutingSkew,
    RoutingSkewNear,
    BackendCutOff,
    BackendCutOffNear,
    RouterPrefixBlind,
    RouterPrefixBlindNear,
    RouterRetries,
    RouterRetriesNear,
    KvTransferSlow,
    KvTransferSlowNear,
    KvTransferRateImpossible,
    KvTransferRateImpossibleNear,
    TtftUnattributed,
    TtftUnattributedNear,
}

/// One incident kind: its name, the rule that tells its story, what it needs of the fleet, and its
/// state. The default methods are what most kinds share; a near miss takes its kind's rule, needs
/// and naming by a rule.
pub(crate) trait Incident: Sync {
    /// Its name in scenario files (`kind = "kv-cache-pressure"`): the kebab-case of its variant.
    fn name(&self) -> &'static str;

    /// For a near miss, the kind it nearly is (`prefill-starvation-near` -> `prefill-starvation`).
    fn near_miss_of(&self) -> Option<IncidentKind> {
        None
    }

    /// The rule that tells its story: its own name unless it is another rule's story; a near
    /// miss's kind's.
    fn rule(&self) -> &'static str {
        match self.near_miss_of() {
            Some(base) => base.rule(),
            None => self.name(),
        }
    }

    /// Whether a rule of the built-in pack names it (its id is the kind's name). Those no rule
    /// names are for what else moved to list (`expect.unexplained`).
    fn named_by_a_rule(&self) -> bool {
        self.near_miss_of().is_none_or(|base| base.named_by_a_rule())
    }

    /// What the fleet must offer for its story to be told at all: nothing beyond the defaults, or
    /// a near miss's kind's.
    fn needs(&self) -> Needs {
        self.near_miss_of().map(|base| base.needs()).unwrap_or_default()
    }

    /// The state's numbers.
    fn params(&self) -> StateParams;

    /// What the product's timeline should list when the state first shows, as a true event's
    /// kind and detail (`node`: the node of the replica `incident.replica` names). None for most.
    fn true_event(&self, _node: &str) -> Option<(&'static str, String)> {
        None
    }
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

    /// The kind behind the variant: everything else asks it.
    pub(crate) fn incident(self) -> &'static dyn Incident {
        use IncidentKind as K;
        match self {
            K::Healthy => &healthy::Healthy,
            K::Ramp => &ramp::Ramp,
            K::LoadExceedsCapacity => &load_exceeds_capacity::LoadExceedsCapacity,
            K::LoadExceedsCapacityNear => &load_exceeds_capacity::LoadExceedsCapacityNear,
            K::SlowPrefill => &slow_prefill::SlowPrefill,
            K::SlowPrefillNear => &slow_prefill::SlowPrefillNear,
            K::SlowDecode => &slow_decode::SlowDecode,
            K::SlowDecodeNear => &slow_decode::SlowDecodeNear,
            K::SevereSaturation => &severe_saturation::SevereSaturation,
            K::SevereSaturationNear => &severe_saturation::SevereSaturationNear,
            K::KvCachePressure => &kv_cache_pressure::KvCachePressure,
            K::HttpErrors => &http_errors::HttpErrors,
            K::HttpErrorsNear => &http_errors::HttpErrorsNear,
            K::PrefillStarvation => &prefill_starvation::PrefillStarvation,
            K::PrefillStarvationNear => &prefill_starvation::PrefillStarvationNear,
            K::PrefixCacheMiss => &prefix_cache_miss::PrefixCacheMiss,
            K::PrefixCacheMissNear => &prefix_cache_miss::PrefixCacheMissNear,
            K::RecomputeThrashing => &recompute_thrashing::RecomputeThrashing,
            K::RecomputeThrashingNear => &recompute_thrashing::RecomputeThrashingNear,
            K::WorkloadShift => &workload_shift::WorkloadShift,
            K::WorkloadShiftNear => &workload_shift::WorkloadShiftNear,
            K::WorkloadLighter => &workload_lighter::WorkloadLighter,
            K::WorkloadLighterNear => &workload_lighter::WorkloadLighterNear,
            K::GpuUnderutilized => &gpu_underutilized::GpuUnderutilized,
            K::GpuUnderutilizedNear => &gpu_underutilized::GpuUnderutilizedNear,
            K::ThroughputStall => &throughput_stall::ThroughputStall,
            K::ThroughputStallNear => &throughput_stall::ThroughputStallNear,
            K::StalledEngine => &stalled_engine::StalledEngine,
            K::StalledEngineNear => &stalled_engine::StalledEngineNear,
            K::RankImbalance => &rank_imbalance::RankImbalance,
            K::RankImbalanceNear => &rank_imbalance::RankImbalanceNear,
            K::DeferredWaiting => &deferred_waiting::DeferredWaiting,
            K::DeferredWaitingNear => &deferred_waiting::DeferredWaitingNear,
            K::RequestsRejected => &requests_rejected::RequestsRejected,
            K::RequestsRejectedNear => &requests_rejected::RequestsRejectedNear,
            K::RequestErrors => &request_errors::RequestErrors,
            K::RequestErrorsNear => &request_errors::RequestErrorsNear,
            K::GiveUps => &give_ups::GiveUps,
            K::GiveUpsNear => &give_ups::GiveUpsNear,
            K::PriorityPreemption => &priority_preemption::PriorityPreemption,
            K::PriorityPreemptionNear => &priority_preemption::PriorityPreemptionNear,
            K::RepeatedPreemption => &repeated_preemption::RepeatedPreemption,
            K::RepeatedPreemptionNear => &repeated_preemption::RepeatedPreemptionNear,
            K::EngineAsleep => &engine_asleep::EngineAsleep,
            K::EngineAsleepNear => &engine_asleep::EngineAsleepNear,
            K::SpecDecodeInefficient => &spec_decode_inefficient::SpecDecodeInefficient,
            K::SpecDecodeInefficientNear => &spec_decode_inefficient::SpecDecodeInefficientNear,
            K::KvTransferFailures => &kv_transfer_failures::KvTransferFailures,
            K::KvTransferFailuresNear => &kv_transfer_failures::KvTransferFailuresNear,
            K::KvCacheLeak => &kv_cache_leak::KvCacheLeak,
            K::KvCacheLeakNear => &kv_cache_leak::KvCacheLeakNear,
            K::ReplicaImbalance => &replica_imbalance::ReplicaImbalance,
            K::ReplicaImbalanceNear => &replica_imbalance::ReplicaImbalanceNear,
            K::ReplicaOutlier => &replica_outlier::ReplicaOutlier,
            K::ReplicaOutlierNear => &replica_outlier::ReplicaOutlierNear,
            K::ReplicaConfigCap => &replica_config_cap::ReplicaConfigCap,
            K::ReplicaConfigCapNear => &replica_config_cap::ReplicaConfigCapNear,
            K::ReplicaBatchLoad => &replica_batch_load::ReplicaBatchLoad,
            K::ReplicaBatchLoadNear => &replica_batch_load::ReplicaBatchLoadNear,
            K::TargetDown => &target_down::TargetDown,
            K::TargetDownNear => &target_down::TargetDownNear,
            K::GpuThrottling => &gpu_throttling::GpuThrottling,
            K::GpuThrottlingNear => &gpu_throttling::GpuThrottlingNear,
            K::GpuErrors => &gpu_errors::GpuErrors,
            K::GpuErrorsNear => &gpu_errors::GpuErrorsNear,
            K::GpuPromptShift => &gpu_prompt_shift::GpuPromptShift,
            K::GpuPromptShiftNear => &gpu_prompt_shift::GpuPromptShiftNear,
            K::GpuPrefillBursts => &gpu_prefill_bursts::GpuPrefillBursts,
            K::GpuPrefillBurstsNear => &gpu_prefill_bursts::GpuPrefillBurstsNear,
            K::GpuThermalSlowdown => &gpu_thermal_slowdown::GpuThermalSlowdown,
            K::GpuThermalSlowdownNear => &gpu_thermal_slowdown::GpuThermalSlowdownNear,
            K::GpuPowerLimitLowered => &gpu_power_limit_lowered::GpuPowerLimitLowered,
            K::GpuPowerLimitLoweredNear => &gpu_power_limit_lowered::GpuPowerLimitLoweredNear,
            K::SloBurn => &slo_burn::SloBurn,
            K::SloBurnNear => &slo_burn::SloBurnNear,
            K::SlowInputProcessing => &slow_input_processing::SlowInputProcessing,
            K::SlowInputProcessingNear => &slow_input_processing::SlowInputProcessingNear,
            K::ExternalPrefixCacheMiss => &external_prefix_cache_miss::ExternalPrefixCacheMiss,
            K::ExternalPrefixCacheMissNear => &external_prefix_cache_miss::ExternalPrefixCacheMissNear,
            K::ProcessMemoryGrowth => &process_memory_growth::ProcessMemoryGrowth,
            K::ProcessMemoryGrowthNear => &process_memory_growth::ProcessMemoryGrowthNear,
            K::IterationTokensCollapse => &iteration_tokens_collapse::IterationTokensCollapse,
            K::IterationTokensCollapseNear => &iteration_tokens_collapse::IterationTokensCollapseNear,
            K::RouterSaturated => &router_saturated::RouterSaturated,
            K::RouterSaturatedNear => &router_saturated::RouterSaturatedNear,
            K::PrefillPoolSaturated => &prefill_pool_saturated::PrefillPoolSaturated,
            K::PrefillPoolSaturatedNear => &prefill_pool_saturated::PrefillPoolSaturatedNear,
            K::DecodePoolSaturated => &decode_pool_saturated::DecodePoolSaturated,
            K::DecodePoolSaturatedNear => &decode_pool_saturated::DecodePoolSaturatedNear,
            K::RoutingSkew => &routing_skew::RoutingSkew,
            K::RoutingSkewNear => &routing_skew::RoutingSkewNear,
            K::BackendCutOff => &backend_cut_off::BackendCutOff,
            K::BackendCutOffNear => &backend_cut_off::BackendCutOffNear,
            K::RouterPrefixBlind => &router_prefix_blind::RouterPrefixBlind,
            K::RouterPrefixBlindNear => &router_prefix_blind::RouterPrefixBlindNear,
            K::RouterRetries => &router_retries::RouterRetries,
            K::RouterRetriesNear => &router_retries::RouterRetriesNear,
            K::KvTransferSlow => &kv_transfer_slow::KvTransferSlow,
            K::KvTransferSlowNear => &kv_transfer_slow::KvTransferSlowNear,
            K::KvTransferRateImpossible => &kv_transfer_rate_impossible::KvTransferRateImpossible,
            K::KvTransferRateImpossibleNear => &kv_transfer_rate_impossible::KvTransferRateImpossibleNear,
            K::TtftUnattributed => &ttft_unattributed::TtftUnattributed,
            K::TtftUnattributedNear => &ttft_unattributed::TtftUnattributedNear,
        }
    }

    /// The name used in scenario files, e.g. `kv-cache-pressure`.
    pub fn as_str(self) -> &'static str {
        self.incident().name()
    }

    /// The rule that tells this kind's story (the kind's own name, but where the story is another
    /// rule's: give-ups are `request-errors`', requests preempted again and again
    /// `recompute-thrashing`'s). A near miss names its kind's.
    pub fn rule(self) -> &'static str {
        self.incident().rule()
    }

    /// For a near miss, the kind it nearly is (`prefill-starvation-near` -> `prefill-starvation`).
    pub fn near_miss_of(self) -> Option<IncidentKind> {
        self.incident().near_miss_of()
    }

    /// Whether a rule of the built-in pack names this incident (its id is the kind's name). Those
    /// no rule names are for what else moved to list (`expect.unexplained`).
    pub fn named_by_a_rule(self) -> bool {
        self.incident().named_by_a_rule()
    }

    /// What the fleet must offer for this kind.
    pub fn needs(self) -> Needs {
        self.incident().needs()
    }

    /// The state's parameters.
    pub fn params(self) -> StateParams {
        self.incident().params()
    }

    /// The true event this kind's state makes when it first shows, if any: its kind and detail
    /// (`node`: the node of the replica the incident names).
    pub fn true_event(self, node: &str) -> Option<(&'static str, String)> {
        self.incident().true_event(node)
    }
}

impl std::fmt::Display for IncidentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
                Onset::BaselineStart => {
                    assert!(matches!(kind, IncidentKind::Ramp | IncidentKind::PriorityPreemptionNear), "{kind}")
                }
                Onset::BeforeEnd { secs } if secs > 1800 => {
                    assert!(matches!(kind, IncidentKind::SloBurn | IncidentKind::SloBurnNear), "{kind}")
                }
                _ => {}
            }
        }
    }
}
