//! One scrape interval of a replica: its arrivals and what the HTTP layer and admission control
//! reject, each request's lengths and latencies into the histograms, the counters, and the gauges
//! at the interval's end.

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

use super::{Replica, HEALTHY_RSS_CREEP, R_ABORT, R_ERROR, R_LENGTH, R_STOP};
use crate::sim::draw::{binomial, in_range, lognormal, poisson};
use crate::sim::hist::{
    H_DECODE, H_E2E, H_GENERATION, H_ITERATION, H_ITL, H_MAX_TOKENS, H_N, H_NIXL, H_NIXL_BYTES, H_PREEMPTIONS, H_PREFILL, H_PROMPT, H_QUEUE, H_TTFT,
};
use crate::sim::Moment;
use crate::state::{Level, Running, StateParams};
use crate::KvConnector;

/// KV-cache bytes one prompt token takes (an 8B Llama: 32 layers x 8 KV heads x 128 x K and V x
/// 2 bytes): what a transfer moves per prompt token.
const KV_BYTES_PER_TOKEN: f64 = 131_072.0;

impl Replica<'_> {
    /// Simulate one scrape interval of `secs` seconds.
    pub(crate) fn step(&mut self, secs: f64, m: &Moment) {
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
}
