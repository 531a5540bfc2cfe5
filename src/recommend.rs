//! Recommendations computed from the data, with their arithmetic shown so an engineer can check them.
//!
//! They are deliberately simple and conservative: a starting point for a load test, not a setting to
//! paste into production. Each is an experiment card: the flag, from (what the data shows, or
//! `unknown`) to (the value computed), the trade-off in one line, and a confidence that says whether
//! the whole window and its last minutes agree on what the value was sized from. Beside the cards a
//! finding lists the levers its evidence rules out ([`wont_help`]).

use std::collections::BTreeMap;

pub use crate::report::card::SizedOn;
use crate::report::card::{Card, CardFacts, ConfigFit, Doubt, Footprint, FullLength, RuledOut, SeqsFromConfig, SeqsMeasured, Sureness, SurenessRead, HEADROOM};
use crate::report::{ConfidenceLevel, LimitKind, Recommendation, Scope, WontHelp};

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

/// The cards a rule may ask for beside its `recommend` (`also_size`): a larger KV cache and more
/// replicas for KV pressure, a higher max_num_seqs and more replicas for a queue, a smaller step
/// budget where prefills slow decode.
pub const CARDS: &[&str] = &["kv_blocks", "replicas_for_kv", "more_seqs", "replicas_for_queue", "step_budget"];

pub fn recommend(kind: &str, inp: &Inputs) -> Option<Recommendation> {
    sized(kind, inp).map(Recommendation::from)
}

fn sized(kind: &str, inp: &Inputs) -> Option<Card> {
    match kind {
        "max_num_seqs" => max_num_seqs(inp),
        "chunked_prefill" => chunked_prefill(inp),
        _ => None,
    }
}

/// The cards a finding gets: the one its rule's `recommend` names (`kind`), then the others its
/// rule's `also_size` names ([`CARDS`]) that its evidence sizes (a higher max_num_seqs only where
/// the sequence cap bound with KV room, a smaller step budget only where prefill interferes with
/// decode).
pub fn cards(kind: Option<&str>, also: &[String], inp: &Inputs) -> Vec<Recommendation> {
    let mut out: Vec<Card> = kind.and_then(|k| sized(k, inp)).into_iter().collect();
    for card in also {
        out.extend(match card.as_str() {
            "kv_blocks" => kv_size(inp),
            "replicas_for_kv" => replicas(inp, kv_confidence(inp)),
            "more_seqs" => raise_max_num_seqs(inp),
            "replicas_for_queue" => replicas(inp, queue_confidence(inp)),
            "step_budget" => prefill_interference(inp),
            _ => None,
        });
    }
    out.into_iter().map(Recommendation::from).collect()
}

/// How many sequences fit in the KV cache with headroom. Preferably measured: the window's running
/// sequences and the share of the cache they used give each sequence's real footprint. The cache
/// configuration (blocks x block size over the mean request length) is shown as a cross-check, or
/// used alone when usage is unknown. The smaller of the two is suggested: running sequences are
/// measured part-way through their outputs, and a batch that fits only until its sequences reach
/// full length is preempted again (a real engine with 160 blocks of 32 tokens and 400 + 400-token
/// requests measured room for 7, where 7 full-length sequences need 175 blocks).
fn max_num_seqs(inp: &Inputs) -> Option<Card> {
    let config = match (inp.num_gpu_blocks, inp.block_size, inp.prompt_len_mean, inp.output_len_mean) {
        (Some(blocks), Some(bs), Some(p), Some(o)) if blocks > 0.0 && bs > 0.0 && p.is_finite() && o.is_finite() && p + o > 0.0 => {
            let per_seq = ((p + o) / bs).ceil();
            let seqs = (blocks * HEADROOM / per_seq).floor().max(1.0);
            Some(SeqsFromConfig { blocks, block_size: bs, prompt: p, output: o, per_seq, seqs })
        }
        _ => None,
    };
    let measured = match (inp.running_per_replica, inp.kv_usage_avg) {
        (Some(r), Some(u)) if r.is_finite() && r > 0.0 && u.is_finite() && u > 0.0 => {
            Some(SeqsMeasured { sized_on: inp.sized_on.clone(), running: r, kv_used: u, seqs: (r * HEADROOM / u).floor().max(1.0) })
        }
        _ => None,
    };
    // Two ways of sizing it that disagree by half or more: the card rests on the smaller, and is
    // less sure than its window alone would make it.
    let apart = match (&measured, &config) {
        (Some(m), Some(c)) => (m.seqs.max(c.seqs) / m.seqs.min(c.seqs).max(1.0) >= 1.5).then_some(Doubt::SizesDiffer { measured: m.seqs, configured: c.seqs }),
        _ => None,
    };
    let value = match (&measured, &config) {
        (Some(m), Some(c)) => m.seqs.min(c.seqs),
        (Some(m), None) => m.seqs,
        (None, Some(c)) => c.seqs,
        (None, None) => return None,
    };
    Some(Card { facts: CardFacts::SeqsForKv { measured, config, value }, confidence: less_sure(kv_confidence(inp), apart) })
}

/// Enable chunked prefill with a step budget that fits one decode token per running sequence plus an
/// average prompt, rounded up to a power of two.
fn chunked_prefill(inp: &Inputs) -> Option<Card> {
    let (running, prompt) = (inp.running_per_replica?, inp.prompt_len_mean?);
    if !(running.is_finite() && prompt.is_finite() && running >= 0.0 && prompt > 0.0) {
        return None;
    }
    let raw = running + prompt;
    let budget = (raw.max(1.0) as u64).next_power_of_two().clamp(512, 8192);
    Some(Card { facts: CardFacts::ChunkedPrefill { running, prompt, raw, budget }, confidence: queue_confidence(inp) })
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
fn agreement(whole: Option<bool>, recent: Option<bool>, read: SurenessRead) -> Sureness {
    let level = match (whole, recent) {
        (Some(true), Some(true)) => ConfidenceLevel::High,
        (Some(true), Some(false)) | (Some(false), Some(false)) => ConfidenceLevel::Low,
        _ => ConfidenceLevel::Medium,
    };
    Sureness { level, read, doubt: None }
}

/// One level less sure, saying why, where the data behind a card disagrees with itself.
fn less_sure(c: Sureness, doubt: Option<Doubt>) -> Sureness {
    let Some(doubt) = doubt else { return c };
    let level = match c.level {
        ConfidenceLevel::High => ConfidenceLevel::Medium,
        _ => ConfidenceLevel::Low,
    };
    Sureness { level, doubt: Some(doubt), ..c }
}

/// KV-sized cards: were preemptions sustained over the window and over its last minutes?
fn kv_confidence(inp: &Inputs) -> Sureness {
    let (whole, recent) = (inp.preemption_active, inp.preemption_recent);
    agreement(whole.map(|v| v >= SUSTAINED), recent.map(|v| v >= SUSTAINED), SurenessRead::Preempting { whole, recent })
}

/// Queue-sized cards: did requests wait over the window and over its last minutes?
fn queue_confidence(inp: &Inputs) -> Sureness {
    let (whole, recent) = (inp.waiting_avg, inp.waiting_recent);
    agreement(whole.map(|v| v >= QUEUED), recent.map(|v| v >= QUEUED), SurenessRead::Waiting { whole, recent })
}

/// Decode-sized cards: was inter-token latency up against the baseline, and still in the last minutes?
fn itl_confidence(inp: &Inputs) -> Sureness {
    let Some(b) = inp.itl_p95_baseline.filter(|b| b.is_finite() && *b > 0.0) else {
        return agreement(None, None, SurenessRead::ItlRise { whole: None, recent: None });
    };
    let (whole, recent) = (inp.itl_p95.map(|v| v / b), inp.itl_p95_recent.map(|v| v / b));
    agreement(whole.map(|x| x >= ROSE), recent.map(|x| x >= ROSE), SurenessRead::ItlRise { whole, recent })
}

/// A KV cache large enough for every request in flight (running and waiting) at the measured
/// footprint of a sequence, or its full length when that is larger.
fn kv_size(inp: &Inputs) -> Option<Card> {
    let (blocks, running, used) = (inp.num_gpu_blocks?, inp.running_per_replica?, inp.kv_usage_avg?);
    if !(finite(&[blocks, running, used]) && blocks > 0.0 && running > 0.0 && used > 0.0) {
        return None;
    }
    let replicas = replica_count(inp)?;
    let measured = used * blocks / running;
    let full = match (inp.block_size, inp.prompt_len_mean, inp.output_len_mean) {
        (Some(bs), Some(p), Some(o)) if finite(&[bs, p, o]) && bs > 0.0 && p + o > 0.0 => {
            Some(FullLength { blocks: ((p + o) / bs).ceil(), prompt: p, output: o, block_size: bs })
        }
        _ => None,
    };
    let per_seq = full.as_ref().map_or(measured, |f| f.blocks.max(measured));
    let waiting = match &inp.sized_on {
        Some(s) => s.waiting,
        None => inp.waiting_avg.filter(|w| w.is_finite() && *w > 0.0).unwrap_or(0.0) / replicas,
    };
    let needed = ((running + waiting) * per_seq / HEADROOM).ceil();
    if needed <= blocks {
        return None;
    }
    let doubt = full.as_ref().filter(|f| f.blocks >= measured * 1.5).map(|f| Doubt::FullLength { full: f.blocks, measured });
    let footprint = Footprint { measured, used, blocks, running, full: full.filter(|f| f.blocks > measured) };
    Some(Card {
        facts: CardFacts::KvBlocks { sized_on: inp.sized_on.clone(), running, waiting, per_seq, blocks, needed, footprint },
        confidence: less_sure(kv_confidence(inp), doubt),
    })
}

/// Enough replicas for the requests in flight (running and waiting) at what one replica held at
/// its limit, with headroom.
fn replicas(inp: &Inputs, confidence: Sureness) -> Option<Card> {
    let (per_replica, running, waiting) = (inp.running_per_replica?, inp.running_avg?, inp.waiting_avg?);
    if !(finite(&[per_replica, running, waiting]) && per_replica > 0.0 && waiting >= QUEUED) {
        return None;
    }
    let now = replica_count(inp)?;
    let raw = (running + waiting) / (per_replica * HEADROOM);
    let to = raw.ceil();
    if to <= now {
        return None;
    }
    let sized_on = inp.sized_on.as_ref().map(|s| s.replicas.clone());
    Some(Card { facts: CardFacts::Replicas { sized_on, running, waiting, per_replica, raw, now, to }, confidence })
}

/// The sequence cap bound (the batch pinned at its plateau, requests waiting) while the KV cache had
/// room: as many sequences as the cache holds at the plateau's footprint.
fn raise_max_num_seqs(inp: &Inputs) -> Option<Card> {
    let (per_replica, fill, kv_peak, wait) = (inp.running_per_replica?, inp.running_fill?, inp.kv_usage_max?, inp.waiting_avg?);
    if !(finite(&[per_replica, fill, kv_peak, wait]) && fill >= PINNED && kv_peak > 0.0 && kv_peak < KV_FULL && wait >= QUEUED && per_replica > 0.0) {
        return None;
    }
    let plateau = (per_replica / fill).round().max(1.0);
    let fit = (plateau * HEADROOM / kv_peak).floor();
    let config = match (inp.num_gpu_blocks, inp.block_size, inp.prompt_len_mean, inp.output_len_mean) {
        (Some(b), Some(bs), Some(p), Some(o)) if finite(&[b, bs, p, o]) && b > 0.0 && bs > 0.0 && p + o > 0.0 => {
            let per_seq = ((p + o) / bs).ceil();
            Some(ConfigFit { blocks: b, per_seq, fits: (b * HEADROOM / per_seq).floor() })
        }
        _ => None,
    };
    let to = config.as_ref().map_or(fit, |c| c.fits.min(fit));
    if to <= plateau {
        return None;
    }
    Some(Card { facts: CardFacts::MoreSeqs { per_replica, fill, plateau, kv_peak, fit, config, to }, confidence: queue_confidence(inp) })
}

/// Prefill interfering with decode (inter-token latency up while prompt throughput rose and the KV
/// cache had room): a step budget of one decode token per running sequence plus a 512-token prefill
/// chunk, rounded up to a power of two within 512..8192.
fn prefill_interference(inp: &Inputs) -> Option<Card> {
    let (itl, itl_b, pr, pr_b, kv_peak, running) =
        (inp.itl_p95?, inp.itl_p95_baseline?, inp.prompt_tokens_rate?, inp.prompt_tokens_rate_baseline?, inp.kv_usage_max?, inp.running_per_replica?);
    if !(finite(&[itl, itl_b, pr, pr_b, kv_peak, running])
        && itl_b > 0.0
        && pr_b > 0.0
        && itl >= ROSE * itl_b
        && pr >= ROSE * pr_b
        && kv_peak < KV_FULL
        && running >= 0.0)
    {
        return None;
    }
    let raw = running + 512.0;
    let budget = (raw.ceil() as u64).next_power_of_two().clamp(512, 8192);
    let step_tokens = inp.batch_tokens_mean.filter(|b| b.is_finite());
    Some(Card {
        facts: CardFacts::StepBudget { itl_factor: itl / itl_b, prompt_factor: pr / pr_b, kv_peak, running, raw, budget, step_tokens },
        confidence: itl_confidence(inp),
    })
}

/// The advice card that aligns the replica's sequence cap with its peers'.
pub fn align_card(replica: &str, cap: f64, waiting: f64, peers: f64, peers_capped: bool) -> Recommendation {
    Recommendation::from(Card {
        facts: CardFacts::Align { replica: replica.to_string(), cap, waiting, peers, peers_capped },
        confidence: Sureness { level: ConfidenceLevel::Medium, read: SurenessRead::BindsOnlyOn { replica: replica.to_string() }, doubt: None },
    })
}

/// The levers the evidence rules out, for a rule with `rules_out_levers`: more KV memory when the
/// cache never passed 60%; a lower max_num_seqs when the sequence cap did not bind, the KV cache
/// had room and nothing was preempted; a quantised KV cache when requests queued while the cache
/// had room. Where the binding was read ([`Inputs::held`]) it decides whether the sequence cap
/// bound (a cap that bound is never said not to have), and no KV lever is ruled out for a model
/// the KV cache bound.
pub fn wont_help(inp: &Inputs) -> Vec<WontHelp> {
    ruled_out(inp).into_iter().map(WontHelp::from).collect()
}

fn ruled_out(inp: &Inputs) -> Vec<RuledOut> {
    let mut out = Vec::new();
    let kv = inp.kv_usage_max.filter(|v| v.is_finite());
    let held = |limit: LimitKind| inp.held.as_ref().and_then(|h| h.get(&limit).copied());
    let kv_bound = held(LimitKind::KvCache).is_some();
    if let Some(peak) = kv.filter(|kv| *kv < KV_ROOM && !kv_bound) {
        out.push(RuledOut::KvMemory { peak, room: KV_ROOM });
    }
    let preempting = inp.preemption_active.is_some_and(|p| p >= SUSTAINED);
    if let (Some(kv_peak), false) = (kv.filter(|kv| *kv < KV_FULL), preempting || kv_bound) {
        let lower = match (held(LimitKind::MaxNumSeqs), &inp.held, inp.running_fill.filter(|f| f.is_finite())) {
            // The cap bound: whether a lower one helps is the runbook's call (prefill starvation
            // lowers it to make room for prompts), not something the evidence rules out.
            (Some(_), _, _) => None,
            // The binding was read and the cap did not bind.
            (None, Some(_), _) => Some(RuledOut::LowerSeqs { kv_peak, fill: None }),
            // Without the binding, the running batch against its peak tells.
            (None, None, Some(fill)) if fill < PINNED => Some(RuledOut::LowerSeqs { kv_peak, fill: Some(fill) }),
            _ => None,
        };
        out.extend(lower);
    }
    if let (Some(waiting), Some(kv_peak)) = (inp.waiting_avg.filter(|w| w.is_finite()), kv) {
        if waiting >= QUEUED && kv_peak < KV_FULL && !kv_bound {
            out.push(RuledOut::QuantisedKv { waiting, kv_peak });
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

    /// The `also_size` and `rules_out_levers` of the built-in rules these tests name, as
    /// rules/*.toml set them (this layer sits below the rules; tests/rules_test.rs and the
    /// recordings check the pack end to end).
    fn pack(rule: &str) -> (Vec<String>, bool) {
        let also: &[&str] = match rule {
            "kv-cache-pressure" | "recompute-thrashing" => &["kv_blocks", "replicas_for_kv"],
            "load-exceeds-capacity" => &["more_seqs", "replicas_for_queue"],
            "slow-decode" => &["step_budget"],
            _ => &[],
        };
        let levers = matches!(rule, "kv-cache-pressure" | "recompute-thrashing" | "load-exceeds-capacity" | "prefill-starvation" | "slow-decode");
        (also.iter().map(|a| a.to_string()).collect(), levers)
    }

    fn rule_cards(rule: &str, kind: Option<&str>, inp: &Inputs) -> Vec<Recommendation> {
        cards(kind, &pack(rule).0, inp)
    }

    fn rule_wont_help(rule: &str, inp: &Inputs) -> Vec<WontHelp> {
        if pack(rule).1 {
            wont_help(inp)
        } else {
            Vec::new()
        }
    }

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
        let cards = rule_cards("kv-cache-pressure", Some("max_num_seqs"), &kv_pressure());
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
        let c = Recommendation::from(kv_size(&kv_pressure()).unwrap());
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
        let c = Recommendation::from(kv_size(&inp).unwrap());
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
        let c = Recommendation::from(replicas(&kv_pressure(), kv_confidence(&kv_pressure())).unwrap());
        // (50.9 + 41.6) / (17 x 0.9) = 6.05 -> 7
        assert_eq!((c.from.as_str(), c.to.as_str()), ("3", "7"));
        assert!(c.arithmetic.contains("92.5 requests in flight"), "{}", c.arithmetic);
        // Without a queue there is nothing to add replicas for.
        assert!(replicas(&Inputs { waiting_avg: Some(0.2), ..kv_pressure() }, kv_confidence(&kv_pressure())).is_none());
    }

    #[test]
    fn a_pinned_sequence_cap_with_kv_room_gets_a_higher_max_num_seqs_from_its_plateau() {
        let cards = rule_cards("load-exceeds-capacity", None, &seq_cap());
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
        assert_eq!(Recommendation::from(raise_max_num_seqs(&inp).unwrap()).to, "9");
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
        let c = card(&rule_cards("slow-decode", None, &inp), "--max-num-batched-tokens").cloned().expect("a budget card");
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
        assert_eq!(c.words(), "share of time preempting: 96.8% over the window; its last 5 min were not read");
        let none = kv_confidence(&Inputs { preemption_active: None, ..unread });
        assert_eq!(none.words(), "share of time preempting: not read");
        let late = Inputs { waiting_avg: Some(0.5), waiting_recent: Some(12.0), ..seq_cap() };
        assert_eq!(queue_confidence(&late).level, ConfidenceLevel::Medium);
    }

    #[test]
    fn more_kv_memory_wont_help_when_the_cache_never_passed_sixty_percent() {
        let lines = rule_wont_help("load-exceeds-capacity", &seq_cap());
        assert!(lines.iter().any(|w| w.lever == "more KV memory" && w.why.contains("peaked at 10%")), "{lines:#?}");
        let lines = rule_wont_help("load-exceeds-capacity", &Inputs { kv_usage_max: Some(0.7), ..seq_cap() });
        assert!(!lines.iter().any(|w| w.lever == "more KV memory"), "{lines:#?}");
    }

    #[test]
    fn a_lower_max_num_seqs_wont_help_when_the_sequence_cap_did_not_bind() {
        let loose = Inputs { running_fill: Some(0.6), kv_usage_max: Some(0.5), ..Inputs::default() };
        assert!(rule_wont_help("slow-decode", &loose).iter().any(|w| w.lever == "a lower max_num_seqs"));
        // Pinned at the cap, or the KV cache preempting: the cap is a lever.
        assert!(!rule_wont_help("slow-decode", &Inputs { running_fill: Some(0.95), ..loose.clone() }).iter().any(|w| w.lever == "a lower max_num_seqs"));
        assert!(!rule_wont_help("kv-cache-pressure", &kv_pressure()).iter().any(|w| w.lever == "a lower max_num_seqs"));
        // The binding, where read, decides: a cap that bound is never said not to have, whatever
        // the running batch's average against its peak (a 200-replica fleet's mean fill read 70%
        // while the cap bound 87% of the window).
        let bound = Inputs { held: Some([(LimitKind::MaxNumSeqs, 0.87)].into_iter().collect()), ..loose.clone() };
        assert!(!rule_wont_help("slow-decode", &bound).iter().any(|w| w.lever == "a lower max_num_seqs"), "{:?}", rule_wont_help("slow-decode", &bound));
        let unbound = Inputs { held: Some(BTreeMap::new()), running_fill: Some(0.95), ..loose.clone() };
        assert!(rule_wont_help("slow-decode", &unbound).iter().any(|w| w.why.starts_with("the sequence cap did not bind")));
    }

    #[test]
    fn a_quantised_kv_cache_wont_help_when_the_queue_had_kv_headroom() {
        let lines = rule_wont_help("load-exceeds-capacity", &seq_cap());
        assert!(lines.iter().any(|w| w.flag == "--kv-cache-dtype fp8" && w.why.starts_with("20 requests waited")), "{lines:#?}");
        // A full cache with a queue: fewer bytes per block is a lever there.
        assert!(rule_wont_help("kv-cache-pressure", &kv_pressure()).is_empty());
        // Nothing about the KV cache is ruled out where the binding says it bound.
        let kv_bound = Inputs { held: Some([(LimitKind::KvCache, 0.4)].into_iter().collect()), ..seq_cap() };
        assert!(
            rule_wont_help("load-exceeds-capacity", &kv_bound).iter().all(|w| !w.flag.contains("kv-cache")),
            "{:?}",
            rule_wont_help("load-exceeds-capacity", &kv_bound)
        );
    }

    #[test]
    fn rules_without_a_lever_get_no_cards_and_no_wont_help_lines() {
        assert!(rule_cards("http-errors", None, &seq_cap()).is_empty());
        assert!(rule_wont_help("http-errors", &seq_cap()).is_empty());
    }
}
