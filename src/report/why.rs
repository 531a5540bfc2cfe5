//! What explains a finding beside its evidence: the GPU clocks-event reasons its GPUs reported,
//! why the replica it names differs from its peers, the trends that moved with it, and a cold start.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuReasonKind {
    SwPowerCap,
    HwSlowdown,
    SwThermalSlowdown,
    HwThermalSlowdown,
    HwPowerBrake,
}

impl GpuReasonKind {
    /// Every reason, in the order a finding lists them (faults first once sorted).
    pub const ALL: [GpuReasonKind; 5] =
        [GpuReasonKind::SwPowerCap, GpuReasonKind::HwSlowdown, GpuReasonKind::SwThermalSlowdown, GpuReasonKind::HwThermalSlowdown, GpuReasonKind::HwPowerBrake];

    /// Its bit in DCGM's clocks-event bitmask.
    pub fn bit(self) -> u32 {
        match self {
            GpuReasonKind::SwPowerCap => 0x4,
            GpuReasonKind::HwSlowdown => 0x8,
            GpuReasonKind::SwThermalSlowdown => 0x20,
            GpuReasonKind::HwThermalSlowdown => 0x40,
            GpuReasonKind::HwPowerBrake => 0x80,
        }
    }

    /// Whether it is a fault: everything but the power cap, which is the GPU working at its limit.
    pub fn fault(self) -> bool {
        self != GpuReasonKind::SwPowerCap
    }
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
