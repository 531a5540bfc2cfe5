//! Numerics shared by functions and aggregations, written as Prometheus writes them (compensated
//! sums, its quantile interpolation), so results agree to the last bits that matter.

/// Neumaier-compensated summation step: returns the new (sum, compensation).
pub fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if sum.abs() >= inc.abs() { c + ((sum - t) + inc) } else { c + ((inc - t) + sum) };
    (t, c)
}

/// A compensated sum.
pub fn kahan_sum(vals: impl Iterator<Item = f64>) -> f64 {
    let (mut s, mut c) = (0.0, 0.0);
    for v in vals {
        (s, c) = kahan_inc(v, s, c);
    }
    if s.is_infinite() {
        s
    } else {
        s + c
    }
}

/// The φ-quantile of values, interpolating between the two nearest ranks (sorts `vals`).
pub fn quantile(q: f64, vals: &mut [f64]) -> f64 {
    if vals.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    // NaN first, like Prometheus' ordering.
    vals.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal),
    });
    let n = vals.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    vals[lower as usize] * (1.0 - weight) + vals[upper as usize] * weight
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_interpolates_between_ranks() {
        assert_eq!(quantile(0.5, &mut [1.0, 3.0, 2.0, 4.0]), 2.5);
        assert!(quantile(0.5, &mut []).is_nan());
    }

    #[test]
    fn compensated_sums_keep_small_terms() {
        assert_eq!(kahan_sum([1e16, 1.0, -1e16].into_iter()), 1.0);
    }
}
