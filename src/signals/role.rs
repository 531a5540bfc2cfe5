//! A signal's role: what a stage beside the rules reads it as. The stages that split the wait by
//! hop, size advice cards, name a GPU's clocks-event reasons and tell why one replica differs
//! find their signals by role, never by id, so a pack that defines its own signal for a role (its
//! router's duration, its KV measure) gets the same behaviour. A role is set in the rule file
//! (`role = "hop.queue"`) and given to at most one signal of a pack.

use crate::report::GpuReasonKind;

/// What a signal is read as beside the rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// One mean of the time by hop (`src/explain/hops.rs`).
    Hop(HopRole),
    /// One reading the advice cards are sized from (`src/recommend.rs`).
    Sizing(Sizing),
    /// The share of a GPU's samples with one clocks-event reason set.
    GpuReason(GpuReasonKind),
    /// A replica's P95 time between tokens against its peers' median: where it names the replica a
    /// finding is about, its hardware is the likely cause.
    ReplicaItlOutlier,
}

/// The means the time by hop is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HopRole {
    Ttft,
    Queue,
    Prefill,
    InputProcessing,
    KvTransfer,
    Decode,
    RouterDuration,
    RouterOverE2e,
    GatewayTtft,
}

/// The readings the cards are sized from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sizing {
    PromptLenMean,
    OutputLenMean,
    RunningPerReplica,
    KvUsageAvg,
    KvUsageMax,
    RunningAvg,
    WaitingAvg,
    WaitingRecent,
    RunningFill,
    PreemptionActive,
    PreemptionRecent,
    ItlP95,
    ItlP95Recent,
    PromptTokensRate,
    BatchTokensMean,
}

impl Sizing {
    /// The readings asked for whenever a rule recommends, whether or not a rule reads them.
    pub const ALWAYS_READ: [Sizing; 4] = [Sizing::PromptLenMean, Sizing::OutputLenMean, Sizing::RunningPerReplica, Sizing::KvUsageAvg];
}

const HOPS: [(HopRole, &str); 9] = [
    (HopRole::Ttft, "hop.ttft"),
    (HopRole::Queue, "hop.queue"),
    (HopRole::Prefill, "hop.prefill"),
    (HopRole::InputProcessing, "hop.input_processing"),
    (HopRole::KvTransfer, "hop.kv_transfer"),
    (HopRole::Decode, "hop.decode"),
    (HopRole::RouterDuration, "hop.router_duration"),
    (HopRole::RouterOverE2e, "hop.router_over_e2e"),
    (HopRole::GatewayTtft, "hop.gateway_ttft"),
];

const SIZINGS: [(Sizing, &str); 15] = [
    (Sizing::PromptLenMean, "sizing.prompt_len_mean"),
    (Sizing::OutputLenMean, "sizing.output_len_mean"),
    (Sizing::RunningPerReplica, "sizing.running_per_replica"),
    (Sizing::KvUsageAvg, "sizing.kv_usage_avg"),
    (Sizing::KvUsageMax, "sizing.kv_usage_max"),
    (Sizing::RunningAvg, "sizing.running_avg"),
    (Sizing::WaitingAvg, "sizing.waiting_avg"),
    (Sizing::WaitingRecent, "sizing.waiting_recent"),
    (Sizing::RunningFill, "sizing.running_fill"),
    (Sizing::PreemptionActive, "sizing.preemption_active"),
    (Sizing::PreemptionRecent, "sizing.preemption_recent"),
    (Sizing::ItlP95, "sizing.itl_p95"),
    (Sizing::ItlP95Recent, "sizing.itl_p95_recent"),
    (Sizing::PromptTokensRate, "sizing.prompt_tokens_rate"),
    (Sizing::BatchTokensMean, "sizing.batch_tokens_mean"),
];

const GPU_REASONS: [(GpuReasonKind, &str); 5] = [
    (GpuReasonKind::SwPowerCap, "gpu_reason.sw_power_cap"),
    (GpuReasonKind::HwSlowdown, "gpu_reason.hw_slowdown"),
    (GpuReasonKind::SwThermalSlowdown, "gpu_reason.sw_thermal_slowdown"),
    (GpuReasonKind::HwThermalSlowdown, "gpu_reason.hw_thermal_slowdown"),
    (GpuReasonKind::HwPowerBrake, "gpu_reason.hw_power_brake"),
];

impl Role {
    /// Every role, in a stable order, for errors and the docs.
    pub fn all() -> Vec<Role> {
        HOPS.iter()
            .map(|(h, _)| Role::Hop(*h))
            .chain(SIZINGS.iter().map(|(s, _)| Role::Sizing(*s)))
            .chain(GPU_REASONS.iter().map(|(g, _)| Role::GpuReason(*g)))
            .chain(std::iter::once(Role::ReplicaItlOutlier))
            .collect()
    }

    /// As a rule file writes it: `hop.queue`, `sizing.kv_usage_avg`, `gpu_reason.hw_slowdown`,
    /// `replica_itl_outlier`.
    pub fn name(self) -> &'static str {
        fn named<K: PartialEq>(list: &[(K, &'static str)], key: K) -> &'static str {
            list.iter().find(|(k, _)| *k == key).map_or("", |(_, n)| n)
        }
        match self {
            Role::Hop(h) => named(&HOPS, h),
            Role::Sizing(s) => named(&SIZINGS, s),
            Role::GpuReason(g) => named(&GPU_REASONS, g),
            Role::ReplicaItlOutlier => "replica_itl_outlier",
        }
    }

    /// The role a rule file names, or `None` for a name no stage reads.
    pub fn parse(name: &str) -> Option<Role> {
        Role::all().into_iter().find(|r| r.name() == name)
    }
}
