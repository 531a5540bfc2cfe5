//! The random draws the simulation makes: lognormals, Poisson and binomial counts, and a value
//! placed in a range by a noise state.

use rand_chacha::ChaCha8Rng;
use rand_distr::{Binomial, Distribution, Poisson, StandardNormal};

pub(crate) fn lognormal(rng: &mut ChaCha8Rng, median: f64, sigma: f64) -> f64 {
    let z: f64 = StandardNormal.sample(rng);
    median * (sigma * z).exp()
}

pub(super) fn poisson(rng: &mut ChaCha8Rng, lambda: f64) -> u64 {
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

pub(crate) fn binomial(rng: &mut ChaCha8Rng, n: u64, p: f64) -> u64 {
    if n == 0 || p.is_nan() || p <= 0.0 {
        return 0;
    }
    match Binomial::new(n, p.min(1.0)) {
        Ok(b) => b.sample(rng),
        Err(_) => 0,
    }
}

/// A value inside `(lo, hi)` positioned by a standard-normal noise state.
pub(super) fn in_range((lo, hi): (f64, f64), z: f64) -> f64 {
    lo + (hi - lo) * (0.5 + 0.22 * z).clamp(0.0, 1.0)
}
