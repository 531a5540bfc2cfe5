//! What a model's servers look like in a state, as one set of numbers, and the healthy workload
//! every state scales.
//!
//! Every incident kind (`incidents/`) is a [`StateParams`] value: multipliers, levels and shares
//! applied to the healthy workload. The simulator reads nothing else, so a new kind is a new module
//! there plus, at most, a new field here with a healthy default.

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
        let long = wl.mean_output(&crate::IncidentKind::PrefillStarvation.params());
        assert!(long / healthy > 4.0, "x{}", long / healthy);
    }
}
