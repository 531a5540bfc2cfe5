//! The fleet simulation: every replica, every scrape interval.
//!
//! Each interval a replica draws Poisson arrivals, splits off the requests the HTTP layer rejects,
//! and draws each remaining request's prompt and output length, queue, prefill and per-token
//! times from lognormals whose medians come from the model's current [`StateParams`]. Observations
//! go into cumulative histograms with vLLM's bucket bounds, so every count is an integer, buckets
//! never decrease and `+Inf` equals `_count` by construction. Gauges are sampled at the interval's
//! end: `num_requests_running` from Little's law (busy seconds over the interval), the rest wander
//! inside the state's ranges. Counters start at an offset, because a scraped process has been
//! running a while: one healthy interval scaled by a random factor, so the offsets have the shape
//! of real traffic too.
//!
//! Per-token latencies are subsampled (a few draws per request, weighted to the request's token
//! count) to keep generation fast in debug builds while keeping counts and sums consistent.
//! Every replica has its own ChaCha stream derived from the seed, so output does not depend on
//! evaluation order.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Binomial, Distribution, Poisson, StandardNormal};

use super::state::{Onset, StateParams, Workload};
use super::{MetricsGeneration, ModelSpec, ScenarioSpec};
use crate::source::Labels;

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
    pub name: &'static str,
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
    /// One value per sample time.
    pub values: Vec<f64>,
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
                    let points = times.iter().copied().zip(line.values).collect();
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
enum Fam {
    Up,
    CacheConfig,
    Running,
    Waiting,
    KvUsage,
    PromptTokens,
    GenerationTokens,
    Preemptions,
    RequestSuccess,
    PrefixQueries,
    PrefixHits,
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
}

impl Fam {
    fn name(self, generation: MetricsGeneration) -> &'static str {
        let v0 = generation == MetricsGeneration::V0;
        match self {
            Fam::Up => "up",
            Fam::CacheConfig => "vllm:cache_config_info",
            Fam::Running => "vllm:num_requests_running",
            Fam::Waiting => "vllm:num_requests_waiting",
            Fam::KvUsage if v0 => "vllm:gpu_cache_usage_perc",
            Fam::KvUsage => "vllm:kv_cache_usage_perc",
            Fam::PromptTokens => "vllm:prompt_tokens",
            Fam::GenerationTokens => "vllm:generation_tokens",
            Fam::Preemptions => "vllm:num_preemptions",
            Fam::RequestSuccess => "vllm:request_success",
            Fam::PrefixQueries => "vllm:prefix_cache_queries",
            Fam::PrefixHits => "vllm:prefix_cache_hits",
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
        }
    }

    fn kind(self) -> Kind {
        match self {
            Fam::Up | Fam::CacheConfig | Fam::Running | Fam::Waiting | Fam::KvUsage => Kind::Gauge,
            Fam::PromptTokens
            | Fam::GenerationTokens
            | Fam::Preemptions
            | Fam::RequestSuccess
            | Fam::PrefixQueries
            | Fam::PrefixHits
            | Fam::HttpRequests => Kind::Counter,
            _ => Kind::Histogram,
        }
    }

    fn help(self) -> &'static str {
        match self {
            Fam::Up => "Whether the target was scraped successfully.",
            Fam::CacheConfig => "KV cache configuration of the engine, one label per setting.",
            Fam::Running => "Requests currently in the engine's running batch.",
            Fam::Waiting => "Requests queued and not yet scheduled.",
            Fam::KvUsage => "Fraction of KV-cache blocks in use (1 means full).",
            Fam::PromptTokens => "Prompt tokens processed.",
            Fam::GenerationTokens => "Tokens generated.",
            Fam::Preemptions => "Requests preempted by the scheduler.",
            Fam::RequestSuccess => "Finished requests by reason.",
            Fam::PrefixQueries => "Prompt tokens looked up in the prefix cache.",
            Fam::PrefixHits => "Prompt tokens found in the prefix cache.",
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
        }
    }
}

const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    160.0, 640.0, 2560.0,
];
const ITL_BUCKETS: &[f64] =
    &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
const LATENCY_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0,
    1920.0, 7680.0,
];
const ITERATION_BUCKETS: &[f64] =
    &[1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];
const N_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0];

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
struct Hist {
    bounds: Vec<f64>,
    counts: Vec<u64>,
    sum: f64,
}

impl Hist {
    fn new(bounds: &[f64]) -> Hist {
        Hist { bounds: bounds.to_vec(), counts: vec![0; bounds.len() + 1], sum: 0.0 }
    }

    /// Record `n` observations of `v`.
    fn observe(&mut self, v: f64, n: u64) {
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
const HIST_FAMS: [Fam; 11] = [
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
];

const REASONS_V1: &[&str] = &["stop", "length", "abort", "error"];
const REASONS_V0: &[&str] = &["stop", "length", "abort"];
const R_STOP: usize = 0;
const R_LENGTH: usize = 1;
const R_ABORT: usize = 2;
const R_ERROR: usize = 3;
const HTTP_STATUSES: [&str; 3] = ["2xx", "4xx", "5xx"];

fn lognormal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> f64 {
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

fn binomial(rng: &mut ChaCha8Rng, n: u64, p: f64) -> u64 {
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
fn host_stems(models: &[ModelSpec]) -> Vec<String> {
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

/// Collects a replica's values step by step: the first step creates the series, later steps
/// append to them in the same order.
#[derive(Default)]
struct Trace {
    items: Vec<(Fam, Metric)>,
    cursor: usize,
    started: bool,
}

impl Trace {
    fn begin_step(&mut self) {
        self.cursor = 0;
    }

    fn end_step(&mut self) {
        self.started = true;
    }

    fn scalar(&mut self, fam: Fam, labels: &Labels, extra: &[(&str, &str)], v: f64) {
        if self.started {
            if let Some((_, m)) = self.items.get_mut(self.cursor) {
                if let Some(line) = m.lines.first_mut() {
                    line.values.push(v);
                }
            }
        } else {
            let mut l = labels.clone();
            for (k, val) in extra {
                l.insert((*k).to_string(), (*val).to_string());
            }
            let suffix = if fam.kind() == Kind::Counter { "_total" } else { "" };
            self.items.push((fam, Metric { labels: l, lines: vec![Line { suffix, le: None, values: vec![v] }] }));
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
        if self.started {
            if let Some((_, m)) = self.items.get_mut(self.cursor) {
                for (line, v) in m.lines.iter_mut().zip(cumulative) {
                    line.values.push(v);
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
                lines.push(Line { suffix, le, values: vec![v] });
            }
            self.items.push((fam, Metric { labels: labels.clone(), lines }));
        }
        self.cursor += 1;
    }
}

/// One vLLM server.
struct Replica<'a> {
    generation: MetricsGeneration,
    wl: Workload,
    model: &'a ModelSpec,
    /// job, instance, model_name (and engine in V1).
    labels: Labels,
    /// job and instance only (`up`, HTTP metrics).
    target: Labels,
    /// cache_config_info's labels.
    config: Labels,
    rng: ChaCha8Rng,
    /// Batch-size cap (`--max-num-seqs`).
    cap: f64,
    /// Where in a state's preemption range this replica sits, 0..1.
    preempt_pos: f64,
    hists: Vec<Hist>,
    prompt_tokens: f64,
    generation_tokens: f64,
    preemptions: f64,
    success: [f64; 4],
    prefix_queries: f64,
    prefix_hits: f64,
    http: [f64; 3],
    running: f64,
    waiting: f64,
    kv: f64,
    /// AR(1) noise states for waiting and KV usage.
    noise: [f64; 2],
    prompts: Vec<f64>,
}

impl<'a> Replica<'a> {
    fn new(
        spec: &'a ScenarioSpec,
        model: &'a ModelSpec,
        stem: &str,
        index: u32,
        rng: ChaCha8Rng,
        gpu_blocks: u64,
    ) -> Self {
        let generation = spec.metrics;
        let wl = Workload::DEFAULT;
        let instance = format!("{stem}-{index}:8000");
        let mut target = Labels::new();
        target.insert("job".into(), "vllm".into());
        target.insert("instance".into(), instance);
        let mut labels = target.clone();
        labels.insert("model_name".into(), model.name.clone());
        let mut config = target.clone();
        if generation == MetricsGeneration::V1 {
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

        let expected_running = model.rate * wl.mean_service_s();
        let cap = ((2.2 * expected_running / 8.0).ceil() * 8.0).max(8.0);
        let token_buckets = one_two_five(f64::from(model.max_model_len));
        let hists = HIST_FAMS
            .iter()
            .map(|f| match f {
                Fam::Ttft => Hist::new(TTFT_BUCKETS),
                Fam::Itl => Hist::new(ITL_BUCKETS),
                Fam::Queue | Fam::Prefill | Fam::Decode | Fam::E2e => Hist::new(LATENCY_BUCKETS),
                Fam::ParamsN => Hist::new(N_BUCKETS),
                Fam::IterationTokens => Hist::new(ITERATION_BUCKETS),
                _ => Hist::new(&token_buckets),
            })
            .collect();
        let mut rng = rng;
        let preempt_pos = rng.gen_range(0.0..1.0);
        Replica {
            generation,
            wl,
            model,
            labels,
            target,
            config,
            rng,
            cap,
            preempt_pos,
            hists,
            prompt_tokens: 0.0,
            generation_tokens: 0.0,
            preemptions: 0.0,
            success: [0.0; 4],
            prefix_queries: 0.0,
            prefix_hits: 0.0,
            http: [0.0; 3],
            running: 0.0,
            waiting: 0.0,
            kv: 0.0,
            noise: [0.0; 2],
            prompts: Vec::new(),
        }
    }

    /// Counters as they stand when the first scrape happens: the process has served traffic for a while.
    fn prime(&mut self, secs: f64) {
        self.step(secs, &StateParams::HEALTHY, 1.0);
        let m: u64 = self.rng.gen_range(60..=2000);
        for h in &mut self.hists {
            h.scale(m);
        }
        let mf = m as f64;
        for c in [&mut self.prompt_tokens, &mut self.generation_tokens, &mut self.prefix_queries, &mut self.prefix_hits]
        {
            *c *= mf;
        }
        for c in self.success.iter_mut().chain(self.http.iter_mut()) {
            *c *= mf;
        }
        self.preemptions += f64::from(self.rng.gen_range(1u32..=40));
        if self.generation == MetricsGeneration::V1 {
            self.success[R_ERROR] += f64::from(self.rng.gen_range(1u32..=5));
        }
    }

    /// Simulate one scrape interval of `secs` seconds in state `st`, with arrivals at `mult` x the healthy rate.
    fn step(&mut self, secs: f64, st: &StateParams, mult: f64) {
        let wl = self.wl;
        let max_len = f64::from(self.model.max_model_len);
        let arrivals = poisson(&mut self.rng, self.model.rate * mult * secs);
        let n5xx = binomial(&mut self.rng, arrivals, st.http_5xx_share);
        let n4xx = binomial(&mut self.rng, arrivals - n5xx, wl.http_4xx_share);
        let engine = arrivals - n5xx - n4xx;
        let itl_median = wl.itl_median_s * st.itl;
        let total_weight: u32 = wl.max_tokens.iter().map(|(_, w)| *w).sum();

        let mut busy = 0.0;
        self.prompts.clear();
        for _ in 0..engine {
            let rng = &mut self.rng;
            let prompt = lognormal(rng, wl.prompt_median, wl.prompt_sigma).round().clamp(1.0, max_len - 1.0);
            let mut pick = rng.gen_range(0..total_weight.max(1));
            let mut max_tokens = 1024.0;
            for (v, w) in wl.max_tokens {
                if pick < w {
                    max_tokens = f64::from(v);
                    break;
                }
                pick -= w;
            }
            let n = if rng.gen_bool(wl.n2_share) { 2.0 } else { 1.0 };
            let wanted = lognormal(rng, wl.output_median, wl.output_sigma).round().max(1.0);
            let room = (max_len - prompt).max(1.0);
            let (mut out, mut reason) =
                if wanted >= max_tokens.min(room) { (max_tokens.min(room), R_LENGTH) } else { (wanted, R_STOP) };
            if rng.gen_bool(st.abort_share) {
                out = (out * rng.gen_range(0.0..1.0)).floor().max(1.0);
                reason = R_ABORT;
            }
            let queue = lognormal(rng, st.queue_median_s, st.queue_sigma);
            let prefill = wl.prefill_per_token_s * prompt * st.prefill * lognormal(rng, 1.0, wl.prefill_sigma)
                + lognormal(rng, wl.first_step_s, 0.3);
            let ttft = queue + prefill;
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
            let h = &mut self.hists;
            h[H_TTFT].observe(ttft, 1);
            h[H_QUEUE].observe(queue, 1);
            h[H_PREFILL].observe(prefill, 1);
            h[H_DECODE].observe(decode, 1);
            h[H_E2E].observe(ttft + decode, 1);
            h[H_PROMPT].observe(prompt, 1);
            h[H_GENERATION].observe(out, 1);
            h[H_MAX_TOKENS].observe(max_tokens, 1);
            h[H_N].observe(n, 1);
            self.prompt_tokens += prompt;
            self.generation_tokens += out;
            self.success[reason] += 1.0;
            self.prefix_queries += prompt;
            let z: f64 = StandardNormal.sample(&mut self.rng);
            self.prefix_hits += (prompt * (st.prefix_hit_ratio + 0.15 * z).clamp(0.0, 1.0)).round();
            busy += prefill + decode;
            self.prompts.push(prompt);
        }
        self.http[0] += engine as f64;
        self.http[1] += n4xx as f64;
        self.http[2] += n5xx as f64;

        // gauges at the interval's end
        self.running = if st.running_at_cap {
            self.cap - if self.rng.gen_bool(0.3) { 1.0 } else { 0.0 }
        } else {
            (busy / secs * lognormal(&mut self.rng, 1.0, 0.08)).round().min(self.cap)
        };
        for z in &mut self.noise {
            let e: f64 = StandardNormal.sample(&mut self.rng);
            *z = 0.8 * *z + 0.6 * e;
        }
        self.waiting = in_range(st.waiting, self.noise[0]).round();
        self.kv = in_range(st.kv_usage, self.noise[1]);

        let (lo, hi) = st.preemptions_per_s;
        let preempt_rate = lo + (hi - lo) * self.preempt_pos;
        self.preemptions += poisson(&mut self.rng, preempt_rate * secs) as f64;

        // engine steps: one per decode iteration; each prompt rides along in one step
        let steps = (secs / itl_median).round().max(1.0) as u64;
        let prefill_steps = (self.prompts.len() as u64).min(steps);
        for p in self.prompts.iter().take(prefill_steps as usize) {
            let v = self.running + p.min(wl.max_batched_tokens);
            self.hists[H_ITERATION].observe(v, 1);
        }
        let decode_steps = steps - prefill_steps;
        if self.running >= 1.0 && decode_steps > 0 {
            let draws = decode_steps.min(8);
            let base = decode_steps / draws;
            let extra = decode_steps % draws;
            for j in 0..draws {
                let z: f64 = StandardNormal.sample(&mut self.rng);
                let v = (self.running + z * self.running.sqrt()).round().max(1.0);
                self.hists[H_ITERATION].observe(v, base + u64::from(j < extra));
            }
        }
    }

    fn emit(&self, t: &mut Trace) {
        let v1 = self.generation == MetricsGeneration::V1;
        let l = &self.labels;
        t.begin_step();
        t.scalar(Fam::Up, &self.target, &[], 1.0);
        t.scalar(Fam::CacheConfig, &self.config, &[], 1.0);
        t.scalar(Fam::Running, l, &[], self.running);
        t.scalar(Fam::Waiting, l, &[], self.waiting);
        t.scalar(Fam::KvUsage, l, &[], self.kv);
        t.scalar(Fam::PromptTokens, l, &[], self.prompt_tokens);
        t.scalar(Fam::GenerationTokens, l, &[], self.generation_tokens);
        t.scalar(Fam::Preemptions, l, &[], self.preemptions);
        let reasons = if v1 { REASONS_V1 } else { REASONS_V0 };
        for (i, r) in reasons.iter().enumerate() {
            t.scalar(Fam::RequestSuccess, l, &[("finished_reason", r)], self.success[i]);
        }
        if v1 {
            t.scalar(Fam::PrefixQueries, l, &[], self.prefix_queries);
            t.scalar(Fam::PrefixHits, l, &[], self.prefix_hits);
            for (i, s) in HTTP_STATUSES.iter().enumerate() {
                t.scalar(
                    Fam::HttpRequests,
                    &self.target,
                    &[("handler", "/v1/chat/completions"), ("method", "POST"), ("status", s)],
                    self.http[i],
                );
            }
        }
        for (i, fam) in HIST_FAMS.iter().enumerate() {
            t.hist(*fam, l, &self.hists[i]);
        }
        t.end_step();
    }
}

/// The state a model is in during the interval `(prev_ms, now_ms]`, and its arrival multiplier.
fn state_at(spec: &ScenarioSpec, model: &ModelSpec, prev_ms: i64, now_ms: i64) -> (StateParams, f64) {
    let Some(incident) = spec.incident.as_ref().filter(|i| i.model == model.name) else {
        return (StateParams::HEALTHY, 1.0);
    };
    let p = incident.kind.params();
    let onset = match p.onset {
        Onset::WindowStart => spec.window_start(),
        Onset::BaselineStart => spec.baseline_start(),
    }
    .timestamp_millis();
    if prev_ms < onset {
        return (StateParams::HEALTHY, 1.0);
    }
    let end = spec.window_end().timestamp_millis();
    let frac = if end > onset { ((now_ms - onset) as f64 / (end - onset) as f64).clamp(0.0, 1.0) } else { 1.0 };
    (p, p.arrivals + (p.arrivals_at_end - p.arrivals) * frac)
}

/// Run the whole fleet over the scenario's timeline.
pub(crate) fn simulate(spec: &ScenarioSpec) -> Generated {
    let n = spec.sample_count();
    let interval_ms = spec.interval.as_millis() as i64;
    let start_ms = spec.start.timestamp_millis();
    let times_ms: Vec<i64> = (0..n as i64).map(|i| start_ms + i * interval_ms).collect();
    let secs = spec.interval.as_secs_f64();
    let stems = host_stems(&spec.models);

    let mut by_family: BTreeMap<Fam, Vec<Metric>> = BTreeMap::new();
    for (mi, model) in spec.models.iter().enumerate() {
        let mut model_rng = ChaCha8Rng::seed_from_u64(spec.seed);
        model_rng.set_stream(((mi as u64) << 32) | 0xFFFF_FFFF);
        let gpu_blocks = model_rng.gen_range(20_000u64..80_000);
        for ri in 0..model.replicas {
            let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
            rng.set_stream(((mi as u64) << 32) | u64::from(ri));
            let mut replica = Replica::new(spec, model, &stems[mi], ri, rng, gpu_blocks);
            let mut trace = Trace::default();
            replica.prime(secs);
            replica.emit(&mut trace);
            for w in times_ms.windows(2) {
                let (st, mult) = state_at(spec, model, w[0], w[1]);
                replica.step(secs, &st, mult);
                replica.emit(&mut trace);
            }
            for (fam, metric) in trace.items {
                by_family.entry(fam).or_default().push(metric);
            }
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
        let m = |name: &str| ModelSpec { name: name.into(), replicas: 1, rate: 1.0, max_model_len: 4096 };
        assert_eq!(host_stems(&[m("meta-llama/Llama-3.1-8B-Instruct")]), vec!["llama-3-1-8b-instruct"]);
        let stems = host_stems(&[m("a/Model"), m("b/Model")]);
        assert_eq!(stems, vec!["a-model", "b-model"]);
        let stems = host_stems(&[m("a/M.x"), m("a/M-x")]);
        assert_ne!(stems[0], stems[1]);
    }
}
