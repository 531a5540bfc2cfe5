//! A real GPU's telemetry, replayed as the DCGM exporter would publish it.
//!
//! `fixtures/real-gpu/h200-serving-mix-nvml.jsonl` holds one NVIDIA H200 sampled through NVML once
//! a second under serving-shaped load (idle, decode-shaped, prefill-shaped and compute-bound
//! phases; its README says what ran). A model with `gpu = "h200"` draws its GPUs' readings from
//! these samples instead of from ranges: each scrape takes one real sample from the pool its state
//! asks for (compute-bound with the state's `compute_share`, else decode-shaped; idle for a server
//! doing nothing), so every clock, power, utilisation and reason bitmask a test sees is one the
//! real board reported. Faults the board never had (a thermal slowdown, a lowered power limit) are
//! laid over a real sample, as the hardware would: the reason bit set, the clock cut.
//!
//! [`to_openmetrics`] converts the samples as recorded, at their own one-second times, into the
//! DCGM exporter's series with the labels it sets in Kubernetes, for tests that judge every window
//! of the real recording.

use std::fmt::Write as _;
use std::sync::OnceLock;

use serde::Deserialize;

/// The samples, embedded so that the generator needs no file at run time.
const H200_JSONL: &str = include_str!("../../../fixtures/real-gpu/h200-serving-mix-nvml.jsonl");

/// The board the samples come from (`fixtures/real-gpu/h200-device.json`).
pub const H200_MODEL_NAME: &str = "NVIDIA H200";
pub const H200_DRIVER: &str = "580.159.04";
pub const H200_POWER_LIMIT_W: f64 = 700.0;
pub const H200_UUID: &str = "GPU-f98a5a30-c00c-6706-ca38-52de3bc7bfa1";

/// NVML's clocks-event reason bits.
pub const REASON_SW_POWER_CAP: u32 = 0x4;

/// One NVML sample, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Sample {
    /// Unix seconds.
    pub t: f64,
    pub sm_clock_mhz: f64,
    pub mem_clock_mhz: f64,
    pub gpu_util_pct: f64,
    pub mem_util_pct: f64,
    pub power_w: f64,
    pub temp_c: f64,
    pub clocks_event_reasons: u32,
    pub fb_used_mib: f64,
    pub power_violation_ns: f64,
    pub thermal_violation_ns: f64,
}

/// The samples, in recording order, with the load phase each was taken in.
#[derive(Debug)]
pub struct Recording {
    pub samples: Vec<(Sample, String)>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(flatten)]
    sample: Sample,
    phase: String,
}

/// The H200 recording, parsed once.
pub fn h200() -> &'static Recording {
    static REC: OnceLock<Recording> = OnceLock::new();
    REC.get_or_init(|| {
        let samples = H200_JSONL
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let line: Line = serde_json::from_str(l).expect("the embedded H200 samples parse");
                (line.sample, line.phase)
            })
            .collect();
        Recording { samples }
    })
}

/// Which kind of work a scrape of the GPU finds it doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// No kernels: the idle phases.
    Idle,
    /// Memory-bound, decode-shaped work, fully under way (utilisation 90% or more).
    Decode,
    /// Compute-bound work at the power cap (reason 0x4 set): prefill-shaped and back-to-back
    /// matrix products.
    Compute,
}

impl Recording {
    /// The samples of one pool.
    pub fn pool(&self, pool: Pool) -> Vec<Sample> {
        self.samples
            .iter()
            .filter(|(s, phase)| match pool {
                Pool::Idle => phase == "idle" && s.gpu_util_pct < 10.0,
                Pool::Decode => phase == "decode" && s.gpu_util_pct >= 90.0 && s.clocks_event_reasons == 0,
                Pool::Compute => s.clocks_event_reasons & REASON_SW_POWER_CAP != 0,
            })
            .map(|(s, _)| *s)
            .collect()
    }
}

/// The three pools, drawn from by the simulator (index by [`Pool`]).
pub fn pools() -> &'static [Vec<Sample>; 3] {
    static POOLS: OnceLock<[Vec<Sample>; 3]> = OnceLock::new();
    POOLS.get_or_init(|| {
        let r = h200();
        [r.pool(Pool::Idle), r.pool(Pool::Decode), r.pool(Pool::Compute)]
    })
}

/// The DCGM exporter's labels for one GPU in Kubernetes (what dcgm-exporter sets with pod
/// attribution on): `gpu`, `UUID`, `device`, `modelName`, `Hostname`, `DCGM_FI_DRIVER_VERSION`,
/// and the pod's `namespace`, `pod` and `container`, plus the scrape's `job` and `instance`.
pub fn dcgm_labels(node: &str, namespace: &str, pod: &str, uuid: &str) -> Vec<(String, String)> {
    let mut l: Vec<(String, String)> = [
        ("job", "dcgm".to_string()),
        ("instance", format!("{node}:9400")),
        ("gpu", "0".to_string()),
        ("UUID", uuid.to_string()),
        ("device", "nvidia0".to_string()),
        ("modelName", H200_MODEL_NAME.to_string()),
        ("Hostname", node.to_string()),
        ("DCGM_FI_DRIVER_VERSION", H200_DRIVER.to_string()),
        ("namespace", namespace.to_string()),
        ("pod", pod.to_string()),
        ("container", "vllm".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    l.sort();
    l
}

/// The recording as OpenMetrics, at its own times shifted so that the first sample lands on
/// `start` (Unix seconds): the DCGM exporter's gauges for one GPU of pod `pod` on `node`, and a
/// vLLM server on that pod (`vllm:num_requests_running`, `running` requests, with `model_name`)
/// so that the GPU can be tied to its model as explain ties it. Violation counters in
/// microseconds, as the exporter reports them. Ends with `# EOF`.
pub fn to_openmetrics(start: f64, node: &str, namespace: &str, pod: &str, model: &str, running: f64) -> String {
    let rec = h200();
    let first = rec.samples.first().map_or(0.0, |(s, _)| s.t);
    let labels = dcgm_labels(node, namespace, pod, H200_UUID);
    let quoted = |l: &[(String, String)]| l.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect::<Vec<_>>().join(",");
    let dcgm = quoted(&labels);
    let vllm = quoted(&[
        ("instance".to_string(), format!("{pod}:8000")),
        ("job".to_string(), "vllm".to_string()),
        ("model_name".to_string(), model.to_string()),
        ("namespace".to_string(), namespace.to_string()),
        ("pod".to_string(), pod.to_string()),
    ]);
    type Field = fn(&Sample) -> f64;
    let families: [(&str, Field); 11] = [
        ("DCGM_FI_DEV_SM_CLOCK", |s| s.sm_clock_mhz),
        ("DCGM_FI_DEV_MEM_CLOCK", |s| s.mem_clock_mhz),
        ("DCGM_FI_DEV_GPU_UTIL", |s| s.gpu_util_pct),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", |s| s.mem_util_pct),
        ("DCGM_FI_DEV_POWER_USAGE", |s| s.power_w),
        ("DCGM_FI_DEV_GPU_TEMP", |s| s.temp_c),
        ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", |s| f64::from(s.clocks_event_reasons)),
        ("DCGM_FI_DEV_FB_USED", |s| s.fb_used_mib),
        ("DCGM_FI_DEV_POWER_VIOLATION", |s| (s.power_violation_ns / 1000.0).round()),
        ("DCGM_FI_DEV_THERMAL_VIOLATION", |s| (s.thermal_violation_ns / 1000.0).round()),
        ("DCGM_FI_DEV_POWER_MGMT_LIMIT", |_| H200_POWER_LIMIT_W),
    ];
    let mut out = String::new();
    let at = |s: &Sample| start + (s.t - first);
    for (name, field) in families.iter().chain(std::iter::once(&("DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF", (|_: &Sample| H200_POWER_LIMIT_W) as Field))) {
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (s, _) in &rec.samples {
            let _ = writeln!(out, "{name}{{{dcgm}}} {} {:.3}", field(s), at(s));
        }
    }
    let _ = writeln!(out, "# TYPE vllm:num_requests_running gauge");
    for (s, phase) in &rec.samples {
        let v = if phase == "idle" { 0.0 } else { running };
        let _ = writeln!(out, "vllm:num_requests_running{{{vllm}}} {v} {:.3}", at(s));
    }
    out.push_str("# EOF\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recording_has_every_pool_and_the_pools_are_what_the_board_did() {
        let p = pools();
        assert!(p.iter().all(|pool| pool.len() >= 20), "{:?}", p.iter().map(Vec::len).collect::<Vec<_>>());
        // Idle and decode-shaped load at full clock, no reason; compute-bound at the cap, clock cut.
        assert!(p[0].iter().chain(&p[1]).all(|s| s.sm_clock_mhz == 1980.0 && s.clocks_event_reasons == 0));
        assert!(p[2].iter().all(|s| s.clocks_event_reasons == REASON_SW_POWER_CAP && s.power_w > 600.0), "only the power cap, near the limit");
        assert!(p[2].iter().filter(|s| s.sm_clock_mhz <= 1500.0).count() * 2 > p[2].len(), "most capped samples run at 1500 MHz or less");
        // Never a thermal or hardware reason in the whole recording.
        assert!(h200().samples.iter().all(|(s, _)| s.clocks_event_reasons & !(REASON_SW_POWER_CAP | 1) == 0));
    }

    #[test]
    fn the_openmetrics_carries_the_exporters_kubernetes_labels_and_microseconds() {
        let om = to_openmetrics(1_000.0, "gpu-node-01", "inference", "llm-0", "m", 8.0);
        assert!(om.ends_with("# EOF\n"));
        let line = om.lines().find(|l| l.starts_with("DCGM_FI_DEV_SM_CLOCK{")).unwrap();
        for label in [
            "gpu=\"0\"",
            "UUID=\"GPU-",
            "device=\"nvidia0\"",
            "modelName=\"NVIDIA H200\"",
            "Hostname=\"gpu-node-01\"",
            "DCGM_FI_DRIVER_VERSION=\"580.159.04\"",
            "namespace=\"inference\"",
            "pod=\"llm-0\"",
            "container=\"vllm\"",
        ] {
            assert!(line.contains(label), "{label} in {line}");
        }
        assert!(line.ends_with(" 1000.000"), "the first sample lands on the start: {line}");
        let last_violation = om.lines().rfind(|l| l.starts_with("DCGM_FI_DEV_POWER_VIOLATION{")).unwrap();
        // The value follows the labels (`modelName="NVIDIA H200"` has a space of its own).
        let us: f64 = last_violation.rsplit_once('}').unwrap().1.split_whitespace().next().unwrap().parse().unwrap();
        // 84.19 s of power capping in the recording (nvidia-smi agrees), in microseconds.
        assert!((84.0e6..84.4e6).contains(&us), "{us}");
    }
}
