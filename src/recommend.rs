//! Recommendations computed from the data, with their arithmetic shown so an engineer can check them.
//!
//! They are deliberately simple and conservative: a starting point for a load test, not a setting to
//! paste into production.

use std::collections::BTreeMap;

use crate::report::{Recommendation, Scope};

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
}

/// Share of the KV cache a recommendation plans to fill, leaving room for bursts and long tails.
const HEADROOM: f64 = 0.9;

pub fn recommend(kind: &str, inp: &Inputs) -> Option<Recommendation> {
    match kind {
        "max_num_seqs" => max_num_seqs(inp),
        "chunked_prefill" => chunked_prefill(inp),
        _ => None,
    }
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
                    "{} running sequences per replica used {}% of the KV cache on average: {} x {}% headroom / {}% = {} sequences per replica",
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
    })
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
}
