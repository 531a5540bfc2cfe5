//! Histograms: vLLM's bucket bounds for each family, [`Hist`] (a histogram being filled), and
//! where each family's histogram sits in a replica's list.

use super::families::Fam;

pub(super) const TTFT_BUCKETS: &[f64] =
    &[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0];
pub(super) const ITL_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0];
pub(super) const LATENCY_BUCKETS: &[f64] =
    &[0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0];
pub(super) const ITERATION_BUCKETS: &[f64] = &[1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0];
pub(super) const N_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0];
pub(super) const NIXL_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
/// Bounds for bytes per NIXL transfer (1 MB to 10 GB; the tool reads only its `_sum`).
pub(super) const NIXL_BYTES_BUCKETS: &[f64] = &[1e6, 1e7, 1e8, 1e9, 1e10];

/// vLLM's 1-2-5 series up to and including `max`.
pub(super) fn one_two_five(max: f64) -> Vec<f64> {
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
pub(crate) struct Hist {
    pub(crate) bounds: Vec<f64>,
    pub(crate) counts: Vec<u64>,
    pub(crate) sum: f64,
}

impl Hist {
    pub(crate) fn new(bounds: &[f64]) -> Hist {
        Hist { bounds: bounds.to_vec(), counts: vec![0; bounds.len() + 1], sum: 0.0 }
    }

    /// Record `n` observations of `v`.
    pub(crate) fn observe(&mut self, v: f64, n: u64) {
        if n == 0 || !v.is_finite() {
            return;
        }
        let i = self.bounds.partition_point(|b| *b < v);
        self.counts[i] += n;
        self.sum += v * n as f64;
    }

    pub(super) fn scale(&mut self, m: u64) {
        for c in &mut self.counts {
            *c *= m;
        }
        self.sum *= m as f64;
    }
}

pub(super) const H_TTFT: usize = 0;
pub(super) const H_ITL: usize = 1;
pub(super) const H_QUEUE: usize = 2;
pub(super) const H_PREFILL: usize = 3;
pub(super) const H_DECODE: usize = 4;
pub(super) const H_E2E: usize = 5;
pub(super) const H_PROMPT: usize = 6;
pub(super) const H_GENERATION: usize = 7;
pub(super) const H_MAX_TOKENS: usize = 8;
pub(super) const H_N: usize = 9;
pub(super) const H_ITERATION: usize = 10;
/// Only for models with a NIXL connector.
pub(super) const H_NIXL: usize = 11;
/// Only for models with `preemption_detail`.
pub(super) const H_PREEMPTIONS: usize = 12;
/// Only for models with a NIXL connector.
pub(super) const H_NIXL_BYTES: usize = 13;
pub(super) const HIST_FAMS: [Fam; 14] = [
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
    Fam::NixlXfer,
    Fam::ReqPreemptions,
    Fam::NixlBytes,
];
/// vLLM's buckets for `request_num_preemptions`.
pub(super) const PREEMPTION_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0];

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
}
