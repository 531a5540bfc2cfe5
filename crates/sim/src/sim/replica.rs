//! One vLLM server (and, with DCGM, its GPU): what it holds, how it is built, primed with a
//! running process's counters and restarted, and its noise. `replica/` holds what it does each
//! interval: serving (`serve.rs`), its GPU's readings (`gpu.rs`) and the samples it writes (`emit.rs`).

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::draw::in_range;
use super::families::Fam;
use super::hist::{
    one_two_five, Hist, HIST_FAMS, ITERATION_BUCKETS, ITL_BUCKETS, LATENCY_BUCKETS, NIXL_BUCKETS, NIXL_BYTES_BUCKETS, N_BUCKETS, PREEMPTION_BUCKETS,
    TTFT_BUCKETS,
};
use super::names::NAMESPACE;
use super::Moment;
use crate::state::{Level, SleepState, StateParams, Workload};
use crate::{MetricsGeneration, ModelSpec, ReplicaInfo, ScenarioSpec};
use vllm_diag::source::Labels;

mod emit;
mod gpu;
mod serve;

/// An H100 80GB HBM3's framebuffer, MiB, and what the driver reserves of it.
const FB_TOTAL_MIB: f64 = 81_559.0;
const FB_RESERVED_MIB: f64 = 530.0;
const GPU_MODEL: &str = "NVIDIA H100 80GB HBM3";
/// `num_preemptions_by_reason`'s reasons, in the order `preempt_reasons` counts them.
const PREEMPTION_REASONS: [&str; 2] = ["kv_full", "priority"];

const REASONS_V1: &[&str] = &["stop", "length", "abort", "error"];
const REASONS_V0: &[&str] = &["stop", "length", "abort"];
const R_STOP: usize = 0;
const R_LENGTH: usize = 1;
const R_ABORT: usize = 2;
const R_ERROR: usize = 3;
const HTTP_STATUSES: [&str; 3] = ["2xx", "4xx", "5xx"];

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
pub(super) struct Replica<'a> {
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
    pub(super) cap: f64,
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
    pub(super) present: bool,
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
    pub(super) fn new(spec: &'a ScenarioSpec, model: &'a ModelSpec, names: &ReplicaInfo, rng: ChaCha8Rng, gpu_blocks: u64, process_start: f64) -> Self {
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
    pub(super) fn prime(&mut self, secs: f64) {
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
    pub(super) fn restart(&mut self, now_ms: i64, blocks: Option<u64>, pod: Option<&str>) -> bool {
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
