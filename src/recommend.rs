//! Recommendations computed from the data, with their arithmetic shown so an engineer can check them.
//!
//! They are deliberately simple and conservative: a starting point for a load test, not a setting to
//! paste into production. Each is an experiment card: the flag, from (what the data shows, or
//! `unknown`) to (the value computed), the trade-off in one line, and a confidence that says whether
//! the whole window and its last minutes agree on what the value was sized from. Beside the cards a
//! finding lists the levers its evidence rules out ([`wont_help`]).

use std::collections::BTreeMap;

use crate::report::{Confidence, ConfidenceLevel, LimitKind, Recommendation, Scope, WontHelp};

/// Recommendation kinds a rule may ask for with `recommend = "..."`.
pub const KNOWN: &[&str] = &["max_num_seqs", "chunked_prefill"];

/// What the recommenders read for one scope.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inputs {
    /// From vllm:cache_config_info.
    pub num_gpu_blocks: Option<f64>,
    pub block_size: Option<f64>,
    pub prompt_len_mean: Option<f64>,
    pub output_len_mean: Option<f64>,
    pub running_per_replica: Option<f64>,
    /// Mean KV-cache usage over the window (0..1).
    pub kv_usage_avg: Option<f64>,
    /// Highest KV-cache usage any replica reached (0..1).
    pub kv_usage_max: Option<f64>,
    /// Running and waiting requests, averaged over the window and summed over replicas.
    pub running_avg: Option<f64>,
    pub waiting_avg: Option<f64>,
    /// Waiting requests over the window's last five minutes (summed over replicas).
    pub waiting_recent: Option<f64>,
    /// Mean running requests over the window's peak, per replica (near 1: pinned at a cap).
    pub running_fill: Option<f64>,
    /// Share of the window, and of its last five minutes, with preemptions (0..1).
    pub preemption_active: Option<f64>,
    pub preemption_recent: Option<f64>,
    /// P95 inter-token latency: the window, its baseline, the window's last five minutes.
    pub itl_p95: Option<f64>,
    pub itl_p95_baseline: Option<f64>,
    pub itl_p95_recent: Option<f64>,
    /// Prompt tokens per second, the window and its baseline.
    pub prompt_tokens_rate: Option<f64>,
    pub prompt_tokens_rate_baseline: Option<f64>,
    /// Tokens per engine step (mean).
    pub batch_tokens_mean: Option<f64>,
    /// Replicas serving the scope.
    pub replicas: Option<f64>,
    /// The limits that bound the scope's model over the window and the share of the window each
    /// held (only those past the binding stage's floor), when the binding was read. What the
    /// levers rule out must agree with it: a cap that bound is never said not to have.
    pub held: Option<BTreeMap<LimitKind, f64>>,
    /// Where the finding's replicas differ (some affected, some not): the replicas the cards are
    /// sized from, the ones the finding is about. `running_per_replica` and `kv_usage_avg` are then
    /// theirs, not an average over replicas that differ.
    pub sized_on: Option<SizedOn>,
}

/// The replicas a finding's cards are sized from, when they are not all of the model's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SizedOn {
    /// By the replica label.
    pub replicas: Vec<String>,
    /// How many replicas the model has.
    pub of: usize,
    /// Requests waiting on each of them (the median over the window's steps, averaged).
    pub waiting: f64,
}

/// `on 127.0.0.1:8000 (1 of 2 replicas, the one the finding is about): `, or nothing where the
/// cards are sized from every replica.
fn on(inp: &Inputs) -> String {
    match &inp.sized_on {
        Some(s) if s.replicas.len() == 1 => format!("on {} (1 of {} replicas, the one the finding is about): ", s.replicas[0], s.of),
        Some(s) => format!("on {} ({} of {} replicas, the ones the finding is about): ", s.replicas.join(", "), s.replicas.len(), s.of),
        None => String::new(),
    }
}

/// Share of the KV cache a recommendation plans to fill, leaving room for bursts and long tails.
const HEADROOM: f64 = 0.9;
/// KV-cache usage at or past which the cache is full (kv-cache-pressure's own line).
const KV_FULL: f64 = 0.9;
/// KV-cache usage under which more KV memory cannot be what is missing.
const KV_ROOM: f64 = 0.6;
/// Running requests at this share of their peak on average: the batch sat at a cap.
const PINNED: f64 = 0.9;
/// Preemptions in at least this share of a window: they were sustained (kv-cache-pressure's line).
const SUSTAINED: f64 = 0.5;
/// Requests waiting on average (summed over replicas): a queue.
const QUEUED: f64 = 1.0;
/// A rise of inter-token latency or prompt throughput against the baseline that counts.
const ROSE: f64 = 1.5;

/// Rules whose findings get experiment cards beyond the one their `recommend` names, and the
/// levers their evidence rules out.
pub const LEVER_RULES: &[&str] = &["kv-cache-pressure", "recompute-thrashing", "load-exceeds-capacity", "prefill-starvation", "slow-decode"];

pub fn recommend(kind: &str, inp: &Inputs) -> Option<Recommendation> {
    match kind {
        "max_num_seqs" => max_num_seqs(inp),
        "chunked_prefill" => chunked_prefill(inp),
        _ => None,
    }
}

/// The cards a finding of `rule` gets: the one its rule's `recommend` names (`kind`), then the other
/// levers its evidence sizes (a larger KV cache and more replicas for KV pressure; a higher
/// max_num_seqs where the sequence cap bound with KV room, and replicas, for a queue; a smaller
/// step budget where prefill interferes with decode).
pub fn cards(rule: &str, kind: Option<&str>, inp: &Inputs) -> Vec<Recommendation> {
    let mut out: Vec<Recommendation> = kind.and_then(|k| recommend(k, inp)).into_iter().collect();
    match rule {
        "kv-cache-pressure" | "recompute-thrashing" => {
            out.extend(kv_size(inp));
            out.extend(replicas(inp, kv_confidence(inp)));
        }
        "load-exceeds-capacity" => {
            out.extend(raise_max_num_seqs(inp));
            out.extend(replicas(inp, queue_confidence(inp)));
        }
        "slow-decode" => out.extend(prefill_interference(inp)),
        _ => {}
    }
    out
}

fn n(v: f64) -> String {
    crate::units::sig(v)
}

/// How many sequences fit in the KV cache with headroom. Preferably measured: the window's running
/// sequences and the share of the cache they used give each sequence's real footprint. The cache
/// configuration (blocks x block size over the mean request length) is shown as a cross-check, or
/// used alone when usage is unknown. The smaller of the two is suggested: running sequences are
/// measured part-way through their outputs, and a batch that fits only until its sequences reach
/// full length is preempted again (a real engine with 160 blocks of 32 tokens and 400 + 400-token
/// requests measured room for 7, where 7 full-length sequences need 175 blocks).
fn max_num_seqs(inp: &Inputs) -> Option<Recommendation> {
    let from_config = match (inp.num_gpu_blocks, inp.block_size, inp.prompt_len_mean, inp.output_len_mean) {
        (Some(blocks), Some(bs), Some(p), Some(o)) if blocks > 0.0 && bs > 0.0 && p.is_finite() && o.is_finite() && p + o > 0.0 => {
            let per_seq = ((p + o) / bs).ceil();
            let seqs = (blocks * HEADROOM / per_seq).floor().max(1.0);
            Some((
                seqs,
                format!(
                    "{} GPU blocks x {}% headroom / ceil(({} prompt + {} output tokens) / {} tokens per block = {} blocks per sequence) = {} sequences per replica",
                    n(blocks),
                    n(HEADROOM * 100.0),
                    n(p),
                    n(o),
                    n(bs),
                    n(per_seq),
                    n(seqs)
                ),
            ))
        }
        _ => None,
    };
    let measured = match (inp.running_per_replica, inp.kv_usage_avg) {
        (Some(r), Some(u)) if r.is_finite() && r > 0.0 && u.is_finite() && u > 0.0 => {
            let seqs = (r * HEADROOM / u).floor().max(1.0);
            Some((
                seqs,
                format!(
                    "{}{} running sequences per replica used {}% of the KV cache on average: {} x {}% headroom / {}% = {} sequences per replica",
                    on(inp),
                    n(r),
                    n(u * 100.0),
                    n(r),
                    n(HEADROOM * 100.0),
                    n(u * 100.0),
                    n(seqs)
                ),
            ))
        }
        _ => None,
    };
    // Two ways of sizing it that disagree by half or more: the card rests on the smaller, and is
    // less sure than its window alone would make it.
    let apart = match (&measured, &from_config) {
        (Some((m, _)), Some((c, _))) => (m.max(*c) / m.min(*c).max(1.0) >= 1.5)
            .then(|| format!("measured ({}) and configured ({}) sizes differ by {}x", n(*m), n(*c), n(m.max(*c) / m.min(*c).max(1.0)))),
        _ => None,
    };
    let (value, arithmetic) = match (measured, from_config) {
        (Some((m, _)), Some((c, ct))) if c < m => (
            c,
            format!(
                "{ct}. Measured, more would seem to fit ({} sequences per replica), but sequences are measured part-way through their outputs: {} of them at full length would not fit in {}% of the cache",
                n(m),
                n(m),
                n(HEADROOM * 100.0)
            ),
        ),
        (Some((m, mt)), Some((c, ct))) => {
            let note = if c > m * 1.5 {
                "; the gap means real sequences are much longer than the average request (long tails, n > 1, or blocks not freed)"
            } else {
                ""
            };
            (m, format!("{mt}. Cross-check from vllm:cache_config_info: {ct}{note}"))
        }
        (Some(m), None) => m,
        (None, Some(c)) => c,
        (None, None) => return None,
    };
    Some(Recommendation {
        setting: "max_num_seqs".into(),
        value: format!("{}", value as u64),
        arithmetic,
        caveat: "a starting point for a load test: long-tail requests need more blocks than the average".into(),
        flag: "--max-num-seqs".into(),
        // vLLM does not export the cap; a batch squeezed by the KV cache runs below it.
        from: "unknown".into(),
        to: format!("{}", value as u64),
        tradeoff: "fewer sequences at once: no preemptions, but each replica admits less and the queue takes the rest".into(),
        confidence: less_sure(kv_confidence(inp), apart),
    })
}

/// Enable chunked prefill with a step budget that fits one decode token per running sequence plus an
/// average prompt, rounded up to a power of two.
fn chunked_prefill(inp: &Inputs) -> Option<Recommendation> {
    let (running, p) = (inp.running_per_replica?, inp.prompt_len_mean?);
    if !(running.is_finite() && p.is_finite() && running >= 0.0 && p > 0.0) {
        return None;
    }
    let raw = running + p;
    let budget = (raw.max(1.0) as u64).next_power_of_two().clamp(512, 8192);
    Some(Recommendation {
        setting: "enable_chunked_prefill=true, max_num_batched_tokens".into(),
        value: format!("{budget}"),
        arithmetic: format!(
            "{} running sequences per replica (one decode token each) + {} tokens of an average prompt = {} tokens per step, rounded up to a power of two within 512..8192 = {budget}",
            n(running),
            n(p),
            n(raw)
        ),
        caveat: "smaller budgets favour inter-token latency, larger ones throughput; load-test both directions".into(),
        flag: "--max-num-batched-tokens".into(),
        from: "unknown".into(),
        to: format!("{budget} (with --enable-chunked-prefill)"),
        tradeoff: "prompts are prefilled in chunks between decode steps: first tokens come sooner under long decodes, long prompts take more steps".into(),
        confidence: queue_confidence(inp),
    })
}

fn pct(v: f64) -> String {
    format!("{}%", n(v * 100.0))
}

fn finite(vs: &[f64]) -> bool {
    vs.iter().all(|v| v.is_finite())
}

/// Replicas serving the scope: as counted by the finding's breakdown, or running requests summed
/// over replicas divided by their per-replica average.
fn replica_count(inp: &Inputs) -> Option<f64> {
    let counted = inp.replicas.filter(|r| r.is_finite() && *r >= 1.0);
    let derived = match (inp.running_avg, inp.running_per_replica) {
        (Some(sum), Some(per)) if sum.is_finite() && per.is_finite() && per > 0.0 => Some((sum / per).round().max(1.0)),
        _ => None,
    };
    counted.or(derived)
}

/// The level from whether the condition a card was sized from held over the whole window
/// (`whole`) and over its last five minutes (`recent`), `None` where it was not read.
fn agreement(whole: Option<bool>, recent: Option<bool>, basis: String) -> Confidence {
    let level = match (whole, recent) {
        (Some(true), Some(true)) => ConfidenceLevel::High,
        (Some(true), Some(false)) | (Some(false), Some(false)) => ConfidenceLevel::Low,
        _ => ConfidenceLevel::Medium,
    };
    Confidence { level, basis }
}

/// `<what> in 96.8% of the window and 100% of its last 5 min`, or which of the two was not read.
fn both_reads(whole: Option<String>, recent: Option<String>, what: &str) -> String {
    match (whole, recent) {
        (Some(w), Some(r)) => format!("{what} {w} over the window and {r} over its last 5 min"),
        (Some(w), None) => format!("{what} {w} over the window; its last 5 min were not read"),
        (None, Some(r)) => format!("{what} {r} over the window's last 5 min; the whole window was not read"),
        (None, None) => format!("{what}: not read"),
    }
}

/// One level less sure, saying why, where the data behind a card disagrees with itself.
fn less_sure(c: Confidence, why: Option<String>) -> Confidence {
    let Some(why) = why else { return c };
    let level = match c.level {
        ConfidenceLevel::High => ConfidenceLevel::Medium,
        _ => ConfidenceLevel::Low,
    };
    Confidence { level, basis: format!("{}; {why}", c.basis) }
}

/// KV-sized cards: were preemptions sustained over the window and over its last minutes?
fn kv_confidence(inp: &Inputs) -> Confidence {
    let (w, r) = (inp.preemption_active, inp.preemption_recent);
    let basis = both_reads(w.map(pct), r.map(pct), "share of time preempting:");
    agreement(w.map(|v| v >= SUSTAINED), r.map(|v| v >= SUSTAINED), basis)
}

/// Queue-sized cards: did requests wait over the window and over its last minutes?
fn queue_confidence(inp: &Inputs) -> Confidence {
    let (w, r) = (inp.waiting_avg, inp.waiting_recent);
    let basis = both_reads(w.map(n), r.map(n), "requests waiting on average:");
    agreement(w.map(|v| v >= QUEUED), r.map(|v| v >= QUEUED), basis)
}

/// Decode-sized cards: was inter-token latency up against the baseline, and still in the last minutes?
fn itl_confidence(inp: &Inputs) -> Confidence {
    let Some(b) = inp.itl_p95_baseline.filter(|b| b.is_finite() && *b > 0.0) else {
        return agreement(None, None, "P95 inter-token latency against the baseline: not read".into());
    };
    let (w, r) = (inp.itl_p95.map(|v| v / b), inp.itl_p95_recent.map(|v| v / b));
    let basis = both_reads(w.map(|x| format!("{}x", n(x))), r.map(|x| format!("{}x", n(x))), "P95 inter-token latency against the baseline:");
    agreement(w.map(|x| x >= ROSE), r.map(|x| x >= ROSE), basis)
}

/// A KV cache large enough for every request in flight (running and waiting) at the measured
/// footprint of a sequence, or its full length when that is larger.
fn kv_size(inp: &Inputs) -> Option<Recommendation> {
    let (blocks, run, used) = (inp.num_gpu_blocks?, inp.running_per_replica?, inp.kv_usage_avg?);
    if !(finite(&[blocks, run, used]) && blocks > 0.0 && run > 0.0 && used > 0.0) {
        return None;
    }
    let replicas = replica_count(inp)?;
    let measured = used * blocks / run;
    let full = match (inp.block_size, inp.prompt_len_mean, inp.output_len_mean) {
        (Some(bs), Some(p), Some(o)) if finite(&[bs, p, o]) && bs > 0.0 && p + o > 0.0 => Some(((p + o) / bs).ceil()),
        _ => None,
    };
    let per_seq = full.map_or(measured, |f| f.max(measured));
    let waiting = match &inp.sized_on {
        Some(s) => s.waiting,
        None => inp.waiting_avg.filter(|w| w.is_finite() && *w > 0.0).unwrap_or(0.0) / replicas,
    };
    let needed = ((run + waiting) * per_seq / HEADROOM).ceil();
    if needed <= blocks {
        return None;
    }
    let footprint = match full {
        Some(f) if f > measured => format!(
            "{} blocks each at full length (ceil(({} prompt + {} output tokens) / {} tokens per block)), more than the {} measured ({} of {} blocks over {} running)",
            n(f), n(inp.prompt_len_mean.unwrap_or_default()), n(inp.output_len_mean.unwrap_or_default()), n(inp.block_size.unwrap_or_default()), n(measured), pct(used), n(blocks), n(run)
        ),
        _ => format!("{} blocks each as measured ({} of {} blocks over {} running sequences)", n(measured), pct(used), n(blocks), n(run)),
    };
    let ratio = needed / blocks;
    Some(Recommendation {
        setting: "KV cache (blocks per replica)".into(),
        value: n(needed),
        arithmetic: format!(
            "{}({} running + {} waiting requests per replica) x {} blocks per sequence / {} headroom = {} blocks, {}x the {} blocks now; {footprint}",
            on(inp),
            n(run), n(waiting), n(per_seq), pct(HEADROOM), n(needed), n(ratio), n(blocks)
        ),
        caveat: "the blocks grow with the memory given to the KV cache, not with gpu_memory_utilization as a whole: the weights and activations stay; check peak memory".into(),
        flag: "--gpu-memory-utilization / --kv-cache-memory-bytes".into(),
        from: format!("{} blocks", n(blocks)),
        to: format!("{} blocks ({}x)", n(needed), n(ratio)),
        tradeoff: "memory for the KV cache is taken from activations and CUDA graphs, or bought with larger GPUs; an fp8 KV cache doubles the blocks at some accuracy risk".into(),
        confidence: less_sure(
            kv_confidence(inp),
            full.filter(|f| *f >= measured * 1.5).map(|f| format!("a sequence needs {} blocks at full length against {} measured", n(f), n(measured))),
        ),
    })
}

/// Enough replicas for the requests in flight (running and waiting) at what one replica held at
/// its limit, with headroom.
fn replicas(inp: &Inputs, confidence: Confidence) -> Option<Recommendation> {
    let (per, run, wait) = (inp.running_per_replica?, inp.running_avg?, inp.waiting_avg?);
    if !(finite(&[per, run, wait]) && per > 0.0 && wait >= QUEUED) {
        return None;
    }
    let now = replica_count(inp)?;
    let offered = run + wait;
    let raw = offered / (per * HEADROOM);
    let to = raw.ceil();
    if to <= now {
        return None;
    }
    Some(Recommendation {
        setting: "replicas".into(),
        value: n(to),
        arithmetic: format!(
            "offered load: {} running + {} waiting = {} requests in flight over the model's replicas; one replica held {} at its limit{}: {} / ({} x {} headroom) = {} -> {} replicas",
            n(run), n(wait), n(offered), n(per), inp.sized_on.as_ref().map(|s| format!(" ({})", s.replicas.join(", "))).unwrap_or_default(), n(offered), n(per), pct(HEADROOM), n(raw), n(to)
        ),
        caveat: "requests in flight stand for offered load at today's latency (Little's law); a queue still growing at the window's end means more".into(),
        flag: "replicas".into(),
        from: n(now),
        to: n(to),
        tradeoff: "cost grows with the replicas; the queue goes, but each request is no faster than the baseline's".into(),
        confidence,
    })
}

/// The sequence cap bound (the batch pinned at its plateau, requests waiting) while the KV cache had
/// room: as many sequences as the cache holds at the plateau's footprint.
fn raise_max_num_seqs(inp: &Inputs) -> Option<Recommendation> {
    let (per, fill, kv, wait) = (inp.running_per_replica?, inp.running_fill?, inp.kv_usage_max?, inp.waiting_avg?);
    if !(finite(&[per, fill, kv, wait]) && fill >= PINNED && kv > 0.0 && kv < KV_FULL && wait >= QUEUED && per > 0.0) {
        return None;
    }
    let plateau = (per / fill).round().max(1.0);
    let fit = (plateau * HEADROOM / kv).floor();
    let config = match (inp.num_gpu_blocks, inp.block_size, inp.prompt_len_mean, inp.output_len_mean) {
        (Some(b), Some(bs), Some(p), Some(o)) if finite(&[b, bs, p, o]) && b > 0.0 && bs > 0.0 && p + o > 0.0 => {
            let per_seq = ((p + o) / bs).ceil();
            Some((
                (b * HEADROOM / per_seq).floor(),
                format!(
                    "; vllm:cache_config_info: {} blocks x {} / {} blocks per full-length sequence = {}",
                    n(b),
                    pct(HEADROOM),
                    n(per_seq),
                    n((b * HEADROOM / per_seq).floor())
                ),
            ))
        }
        _ => None,
    };
    let (to, cross) = match config {
        Some((c, text)) if c < fit => (c, format!("{text}, the smaller")),
        Some((_, text)) => (fit, text),
        None => (fit, String::new()),
    };
    if to <= plateau {
        return None;
    }
    Some(Recommendation {
        setting: "max_num_seqs".into(),
        value: n(to),
        arithmetic: format!(
            "running requests averaged {} per replica, {} of their peak: pinned at about {} (the cap); at that plateau KV-cache usage peaked at {}: {} x {} headroom / {} = {} sequences per replica{cross}",
            n(per), pct(fill), n(plateau), pct(kv), n(plateau), pct(HEADROOM), pct(kv), n(fit)
        ),
        caveat: "a starting point for a load test: watch preemptions and inter-token latency as the batch grows".into(),
        flag: "--max-num-seqs".into(),
        from: format!("{} (the running plateau)", n(plateau)),
        to: n(to),
        tradeoff: "a larger batch: more throughput per replica, each decode step slower (inter-token latency up)".into(),
        confidence: queue_confidence(inp),
    })
}

/// Prefill interfering with decode (inter-token latency up while prompt throughput rose and the KV
/// cache had room): a step budget of one decode token per running sequence plus a 512-token prefill
/// chunk, rounded up to a power of two within 512..8192.
fn prefill_interference(inp: &Inputs) -> Option<Recommendation> {
    let (itl, itl_b, pr, pr_b, kv, per) =
        (inp.itl_p95?, inp.itl_p95_baseline?, inp.prompt_tokens_rate?, inp.prompt_tokens_rate_baseline?, inp.kv_usage_max?, inp.running_per_replica?);
    if !(finite(&[itl, itl_b, pr, pr_b, kv, per]) && itl_b > 0.0 && pr_b > 0.0 && itl >= ROSE * itl_b && pr >= ROSE * pr_b && kv < KV_FULL && per >= 0.0) {
        return None;
    }
    let raw = per + 512.0;
    let budget = (raw.ceil() as u64).next_power_of_two().clamp(512, 8192);
    let steps = inp.batch_tokens_mean.filter(|b| b.is_finite()).map(|b| format!("; steps averaged {} tokens", n(b))).unwrap_or_default();
    Some(Recommendation {
        setting: "max_num_batched_tokens".into(),
        value: format!("{budget}"),
        arithmetic: format!(
            "P95 inter-token latency {}x the baseline while prompt tokens per second rose {}x and the KV cache had room (peak {}): prefill shares the steps; {} running sequences per replica (one decode token each) + a 512-token prefill chunk = {} tokens per step, rounded up to a power of two within 512..8192 = {budget}{steps}",
            n(itl / itl_b), n(pr / pr_b), pct(kv), n(per), n(raw)
        ),
        caveat: "the current budget is not exported: compare with the engine's flags before changing it".into(),
        flag: "--max-num-batched-tokens".into(),
        from: "unknown".into(),
        to: format!("{budget} (with --enable-chunked-prefill)"),
        tradeoff: "smaller prefill chunks per step: steadier inter-token latency, later first tokens for long prompts".into(),
        confidence: itl_confidence(inp),
    })
}

/// The levers a finding of `rule` has that its evidence rules out: more KV memory when the cache
/// never passed 60%; a lower max_num_seqs when the sequence cap did not bind, the KV cache had
/// room and nothing was preempted; a quantised KV cache when requests queued while the cache had
/// room. Where the binding was read ([`Inputs::held`]) it decides whether the sequence cap bound (a
/// cap that bound is never said not to have), and no KV lever is ruled out for a model the KV
/// cache bound.
pub fn wont_help(rule: &str, inp: &Inputs) -> Vec<WontHelp> {
    if !LEVER_RULES.contains(&rule) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let kv = inp.kv_usage_max.filter(|v| v.is_finite());
    let held = |limit: LimitKind| inp.held.as_ref().and_then(|h| h.get(&limit).copied());
    let kv_bound = held(LimitKind::KvCache).is_some();
    if let Some(kv) = kv.filter(|kv| *kv < KV_ROOM && !kv_bound) {
        out.push(WontHelp {
            lever: "more KV memory".into(),
            flag: "--gpu-memory-utilization / --kv-cache-memory-bytes".into(),
            why: format!("KV-cache usage peaked at {}, never past {}", pct(kv), pct(KV_ROOM)),
        });
    }
    let preempting = inp.preemption_active.is_some_and(|p| p >= SUSTAINED);
    if let (Some(kv), false) = (kv.filter(|kv| *kv < KV_FULL), preempting || kv_bound) {
        let why = match (held(LimitKind::MaxNumSeqs), &inp.held, inp.running_fill.filter(|f| f.is_finite())) {
            // The cap bound: whether a lower one helps is the runbook's call (prefill starvation
            // lowers it to make room for prompts), not something the evidence rules out.
            (Some(_), _, _) => None,
            // The binding was read and the cap did not bind.
            (None, Some(_), _) => Some(format!("the sequence cap did not bind, and the KV cache had room (peak {})", pct(kv))),
            // Without the binding, the running batch against its peak tells.
            (None, None, Some(fill)) if fill < PINNED => Some(format!(
                "the sequence cap did not bind: running requests averaged {} of their peak, and the KV cache had room (peak {})",
                pct(fill),
                pct(kv)
            )),
            _ => None,
        };
        out.extend(why.map(|why| WontHelp { lever: "a lower max_num_seqs".into(), flag: "--max-num-seqs".into(), why }));
    }
    if let (Some(wait), Some(kv)) = (inp.waiting_avg.filter(|w| w.is_finite()), kv) {
        if wait >= QUEUED && kv < KV_FULL && !kv_bound {
            out.push(WontHelp {
                lever: "a quantised KV cache".into(),
                flag: "--kv-cache-dtype fp8".into(),
                why: format!("{} requests waited on average while KV-cache usage peaked at {}: they were not waiting for KV blocks", n(wait), pct(kv)),
            });
        }
    }
    out
}

/// Read `num_gpu_blocks` and `block_size` per scope from a cache_config_info answer.
pub fn cache_config(samples: &[crate::source::Sample], group_by: &[String]) -> BTreeMap<Scope, (f64, f64)> {
    let mut out = BTreeMap::new();
    for s in samples {
        let scope: Scope = group_by.iter().map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect();
        let num = |k: &str| s.labels.get(k).and_then(|v| v.parse::<f64>().ok());
        if let (Some(b), Some(bs)) = (num("num_gpu_blocks"), num("block_size")) {
            out.entry(scope).or_insert((b, bs));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_num_seqs_shows_its_arithmetic() {
        let r = recommend(
            "max_num_seqs",
            &Inputs {
                num_gpu_blocks: Some(20000.0),
                block_size: Some(16.0),
                prompt_len_mean: Some(760.0),
                output_len_mean: Some(210.0),
                running_per_replica: None,
                kv_usage_avg: None,
                ..Inputs::default()
            },
        )
        .unwrap();
        // ceil(970 / 16) = 61 blocks; 20000 * 0.9 / 61 = 295.08 -> 295
        assert_eq!(r.value, "295");
        assert!(r.arithmetic.contains("61 blocks per sequence"), "{}", r.arithmetic);
    }

    #[test]
    fn max_num_seqs_prefers_the_measured_footprint_and_cross_checks_the_config() {
        let r = recommend(
            "max_num_seqs",
            &Inputs {
                num_gpu_blocks: Some(20000.0),
                block_size: Some(16.0),
                prompt_len_mean: Some(760.0),
                output_len_mean: Some(210.0),
                running_per_replica: Some(40.0),
                kv_usage_avg: Some(0.96),
                ..Inputs::default()
            },
        )
        .unwrap();
        // 40 x 0.9 / 0.96 = 37.5 -> 37
        assert_eq!(r.value, "37");
        assert!(r.arithmetic.contains("Cross-check"), "{}", r.arithmetic);
        assert!(r.arithmetic.contains("much longer than the average"), "{}", r.arithmetic);
    }

    #[test]
    fn max_num_seqs_never_suggests_more_full_length_sequences_than_the_cache_holds() {
        // The real engine's KV-pressure phase: 160 blocks of 32 tokens, 400 + 400-token requests
        // (25 blocks each at full length), 7 running sequences using 89% of the cache on average.
        let r = recommend(
            "max_num_seqs",
            &Inputs {
                num_gpu_blocks: Some(160.0),
                block_size: Some(32.0),
                prompt_len_mean: Some(400.0),
                output_len_mean: Some(400.0),
                running_per_replica: Some(7.0),
                kv_usage_avg: Some(0.892),
                ..Inputs::default()
            },
        )
        .unwrap();
        // 160 x 0.9 / 25 = 5.76 -> 5; measured 7 x 0.9 / 0.892 = 7.06 -> 7 would need 175 blocks.
        assert_eq!(r.value, "5", "{}", r.arithmetic);
        assert!(r.arithmetic.contains("7 of them at full length would not fit in 90% of the cache"), "{}", r.arithmetic);
    }

    #[test]
    fn chunked_prefill_budget_is_a_bounded_power_of_two() {
        let r = recommend("chunked_prefill", &Inputs { running_per_replica: Some(64.0), prompt_len_mean: Some(760.0), ..Inputs::default() }).unwrap();
        assert_eq!(r.value, "1024");
        let r = recommend("chunked_prefill", &Inputs { running_per_replica: Some(1.0), prompt_len_mean: Some(20.0), ..Inputs::default() }).unwrap();
        assert_eq!(r.value, "512");
    }

    #[test]
    fn missing_inputs_give_no_recommendation_rather_than_a_guess() {
        assert!(recommend("max_num_seqs", &Inputs { prompt_len_mean: Some(1.0), ..Inputs::default() }).is_none());
        assert!(recommend("chunked_prefill", &Inputs::default()).is_none());
        assert!(recommend("nonsense", &Inputs::default()).is_none());
    }

    /// The KV-pressure incident's numbers (fixtures/incidents/kv-cache-pressure.json): 3 replicas,
    /// 17 running sequences each using 96.7% of 1578 blocks of 16 tokens, 41.6 requests waiting.
    fn kv_pressure() -> Inputs {
        Inputs {
            num_gpu_blocks: Some(1578.0),
            block_size: Some(16.0),
            prompt_len_mean: Some(776.0),
            output_len_mean: Some(212.0),
            running_per_replica: Some(17.0),
            kv_usage_avg: Some(0.967),
            kv_usage_max: Some(1.0),
            running_avg: Some(50.9),
            waiting_avg: Some(41.6),
            waiting_recent: Some(40.0),
            running_fill: Some(0.8),
            preemption_active: Some(0.968),
            preemption_recent: Some(1.0),
            replicas: Some(3.0),
            ..Inputs::default()
        }
    }

    /// The lab's seq-cap phase: --max-num-seqs 4 pinned, a queue of about 20, KV at 10%.
    fn seq_cap() -> Inputs {
        Inputs {
            running_per_replica: Some(3.9),
            running_avg: Some(3.9),
            running_fill: Some(0.975),
            kv_usage_max: Some(0.1),
            kv_usage_avg: Some(0.09),
            waiting_avg: Some(20.0),
            waiting_recent: Some(20.0),
            ..Inputs::default()
        }
    }

    fn card<'a>(cards: &'a [Recommendation], flag: &str) -> Option<&'a Recommendation> {
        cards.iter().find(|c| c.flag == flag)
    }

    #[test]
    fn kv_pressure_gets_three_cards_each_with_flag_from_to_tradeoff_and_confidence() {
        let cards = cards("kv-cache-pressure", Some("max_num_seqs"), &kv_pressure());
        let flags: Vec<&str> = cards.iter().map(|c| c.flag.as_str()).collect();
        assert_eq!(flags, ["--max-num-seqs", "--gpu-memory-utilization / --kv-cache-memory-bytes", "replicas"]);
        for c in &cards {
            assert!(!c.from.is_empty() && !c.to.is_empty() && !c.tradeoff.is_empty() && !c.confidence.basis.is_empty(), "{c:#?}");
            assert_eq!(c.confidence.level, ConfidenceLevel::High, "{c:#?}");
        }
        // The cap is not exported, and a batch squeezed by the KV cache runs below it.
        assert_eq!((cards[0].from.as_str(), cards[0].to.as_str()), ("unknown", "15"));
    }

    #[test]
    fn the_kv_cache_card_sizes_blocks_for_every_request_in_flight_from_the_cache_config() {
        let c = kv_size(&kv_pressure()).unwrap();
        // 96.7% x 1578 / 17 = 89.8 blocks each (more than 62 at the mean length); 41.6 / 3 = 13.9
        // waiting per replica; (17 + 13.87) x 89.76 / 0.9 = 3078.4 -> 3079.
        assert_eq!(c.from, "1578 blocks");
        assert!(c.to.starts_with(&format!("{} blocks", c.value)), "{c:#?}");
        let v: f64 = c.value.parse().unwrap();
        assert!((3070.0..=3090.0).contains(&v), "{c:#?}");
        assert!(c.arithmetic.contains("13.9 waiting") && c.arithmetic.contains("as measured"), "{}", c.arithmetic);
    }

    #[test]
    fn the_kv_cache_card_uses_the_full_length_footprint_when_it_is_larger_than_the_measured_one() {
        // The lab's KV phase: 160 blocks of 32 tokens, 400 + 400-token requests (25 blocks at full
        // length), 7 running using 89.2% (20.4 blocks each as measured).
        let inp = Inputs {
            num_gpu_blocks: Some(160.0),
            block_size: Some(32.0),
            prompt_len_mean: Some(400.0),
            output_len_mean: Some(400.0),
            running_per_replica: Some(7.0),
            running_avg: Some(7.0),
            kv_usage_avg: Some(0.892),
            waiting_avg: Some(23.0),
            ..Inputs::default()
        };
        let c = kv_size(&inp).unwrap();
        // (7 + 23) x 25 / 0.9 = 833.3 -> 834
        assert_eq!(c.value, "834", "{}", c.arithmetic);
        assert!(c.arithmetic.contains("25 blocks each at full length"), "{}", c.arithmetic);
    }

    #[test]
    fn no_kv_cache_card_when_the_blocks_already_hold_every_request_in_flight() {
        let inp = Inputs { waiting_avg: Some(0.0), kv_usage_avg: Some(0.3), ..kv_pressure() };
        assert!(kv_size(&inp).is_none());
        assert!(kv_size(&Inputs { num_gpu_blocks: None, ..kv_pressure() }).is_none(), "no configuration, no card");
    }

    #[test]
    fn the_replicas_card_weighs_requests_in_flight_against_what_one_replica_held_at_its_limit() {
        let c = replicas(&kv_pressure(), kv_confidence(&kv_pressure())).unwrap();
        // (50.9 + 41.6) / (17 x 0.9) = 6.05 -> 7
        assert_eq!((c.from.as_str(), c.to.as_str()), ("3", "7"));
        assert!(c.arithmetic.contains("92.5 requests in flight"), "{}", c.arithmetic);
        // Without a queue there is nothing to add replicas for.
        assert!(replicas(&Inputs { waiting_avg: Some(0.2), ..kv_pressure() }, Confidence::default()).is_none());
    }

    #[test]
    fn a_pinned_sequence_cap_with_kv_room_gets_a_higher_max_num_seqs_from_its_plateau() {
        let cards = cards("load-exceeds-capacity", None, &seq_cap());
        let c = card(&cards, "--max-num-seqs").expect("a max_num_seqs card");
        // 3.9 / 0.975 = 4 (the plateau); 4 x 0.9 / 0.1 = 36
        assert_eq!((c.from.as_str(), c.to.as_str()), ("4 (the running plateau)", "36"));
        assert_eq!(c.confidence.level, ConfidenceLevel::High);
        assert!(card(&cards, "replicas").is_some(), "{cards:#?}");
    }

    #[test]
    fn no_higher_max_num_seqs_when_the_kv_cache_is_full_or_the_batch_was_not_pinned() {
        assert!(raise_max_num_seqs(&Inputs { kv_usage_max: Some(0.95), ..seq_cap() }).is_none());
        assert!(raise_max_num_seqs(&Inputs { running_fill: Some(0.6), ..seq_cap() }).is_none());
        // The configuration caps it: 160 x 0.9 / ceil(128 / 32) = 36 -> 36; 40 blocks -> 9.
        let inp = Inputs { num_gpu_blocks: Some(40.0), block_size: Some(32.0), prompt_len_mean: Some(64.0), output_len_mean: Some(64.0), ..seq_cap() };
        assert_eq!(raise_max_num_seqs(&inp).unwrap().to, "9");
    }

    #[test]
    fn prefill_interfering_with_decode_gets_a_smaller_step_budget() {
        let inp = Inputs {
            itl_p95: Some(0.1),
            itl_p95_baseline: Some(0.05),
            itl_p95_recent: Some(0.11),
            prompt_tokens_rate: Some(20000.0),
            prompt_tokens_rate_baseline: Some(8000.0),
            kv_usage_max: Some(0.5),
            running_per_replica: Some(40.0),
            ..Inputs::default()
        };
        let c = card(&cards("slow-decode", None, &inp), "--max-num-batched-tokens").cloned().expect("a budget card");
        // 40 + 512 = 552 -> 1024
        assert_eq!((c.from.as_str(), c.value.as_str()), ("unknown", "1024"));
        assert_eq!(c.confidence.level, ConfidenceLevel::High);
        // Prompt throughput flat: decode is slow for another reason.
        assert!(prefill_interference(&Inputs { prompt_tokens_rate: Some(8000.0), ..inp.clone() }).is_none());
        // The KV cache full: that is the lever, not the budget.
        assert!(prefill_interference(&Inputs { kv_usage_max: Some(0.95), ..inp }).is_none());
    }

    #[test]
    fn confidence_is_high_when_the_last_minutes_agree_low_when_they_no_longer_show_it_and_medium_unread() {
        assert_eq!(kv_confidence(&kv_pressure()).level, ConfidenceLevel::High);
        let over = Inputs { preemption_recent: Some(0.0), ..kv_pressure() };
        assert_eq!(kv_confidence(&over).level, ConfidenceLevel::Low);
        let unread = Inputs { preemption_recent: None, ..kv_pressure() };
        let c = kv_confidence(&unread);
        assert_eq!(c.level, ConfidenceLevel::Medium);
        assert!(c.basis.contains("not read"), "{}", c.basis);
        let late = Inputs { waiting_avg: Some(0.5), waiting_recent: Some(12.0), ..seq_cap() };
        assert_eq!(queue_confidence(&late).level, ConfidenceLevel::Medium);
    }

    #[test]
    fn more_kv_memory_wont_help_when_the_cache_never_passed_sixty_percent() {
        let lines = wont_help("load-exceeds-capacity", &seq_cap());
        assert!(lines.iter().any(|w| w.lever == "more KV memory" && w.why.contains("peaked at 10%")), "{lines:#?}");
        let lines = wont_help("load-exceeds-capacity", &Inputs { kv_usage_max: Some(0.7), ..seq_cap() });
        assert!(!lines.iter().any(|w| w.lever == "more KV memory"), "{lines:#?}");
    }

    #[test]
    fn a_lower_max_num_seqs_wont_help_when_the_sequence_cap_did_not_bind() {
        let loose = Inputs { running_fill: Some(0.6), kv_usage_max: Some(0.5), ..Inputs::default() };
        assert!(wont_help("slow-decode", &loose).iter().any(|w| w.lever == "a lower max_num_seqs"));
        // Pinned at the cap, or the KV cache preempting: the cap is a lever.
        assert!(!wont_help("slow-decode", &Inputs { running_fill: Some(0.95), ..loose.clone() }).iter().any(|w| w.lever == "a lower max_num_seqs"));
        assert!(!wont_help("kv-cache-pressure", &kv_pressure()).iter().any(|w| w.lever == "a lower max_num_seqs"));
        // The binding, where read, decides: a cap that bound is never said not to have, whatever
        // the running batch's average against its peak (a 200-replica fleet's mean fill read 70%
        // while the cap bound 87% of the window).
        let bound = Inputs { held: Some([(LimitKind::MaxNumSeqs, 0.87)].into_iter().collect()), ..loose.clone() };
        assert!(!wont_help("slow-decode", &bound).iter().any(|w| w.lever == "a lower max_num_seqs"), "{:?}", wont_help("slow-decode", &bound));
        let unbound = Inputs { held: Some(BTreeMap::new()), running_fill: Some(0.95), ..loose.clone() };
        assert!(wont_help("slow-decode", &unbound).iter().any(|w| w.why.starts_with("the sequence cap did not bind")));
    }

    #[test]
    fn a_quantised_kv_cache_wont_help_when_the_queue_had_kv_headroom() {
        let lines = wont_help("load-exceeds-capacity", &seq_cap());
        assert!(lines.iter().any(|w| w.flag == "--kv-cache-dtype fp8" && w.why.starts_with("20 requests waited")), "{lines:#?}");
        // A full cache with a queue: fewer bytes per block is a lever there.
        assert!(wont_help("kv-cache-pressure", &kv_pressure()).is_empty());
        // Nothing about the KV cache is ruled out where the binding says it bound.
        let kv_bound = Inputs { held: Some([(LimitKind::KvCache, 0.4)].into_iter().collect()), ..seq_cap() };
        assert!(
            wont_help("load-exceeds-capacity", &kv_bound).iter().all(|w| !w.flag.contains("kv-cache")),
            "{:?}",
            wont_help("load-exceeds-capacity", &kv_bound)
        );
    }

    #[test]
    fn rules_without_a_lever_get_no_cards_and_no_wont_help_lines() {
        assert!(cards("http-errors", None, &seq_cap()).is_empty());
        assert!(wont_help("http-errors", &seq_cap()).is_empty());
    }
}
