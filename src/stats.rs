//! Small statistics and counts in words, one home for each form the diagnosis uses. Each median
//! keeps the semantics its callers were written with, named for it, so that moving them here changed
//! no output:
//!
//! - [`finite_median`] (and [`finite_median_of`] for an iterator): the median of the finite
//!   values, the mean of the middle two for an even count (baselines, peers, what moved);
//! - [`finite_upper_median`]: the median of the finite values, the upper of the middle two for an
//!   even count (always one of the values: the binding stage's shares);
//! - [`median_keeping_nan`]: the median of every value, NaN included (sorted last by
//!   [`f64::total_cmp`]), the mean of the middle two for an even count (onset's runs, whose points
//!   are never NaN but are not filtered either).
//!
//! And [`plural`] / [`plural_s`]: `1 replica`, `3 replicas`.

/// The median of the finite values (the mean of the middle two for an even count); `None` when
/// there are none.
pub fn finite_median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    middle_mean(v)
}

/// [`finite_median`] of the values an iterator yields.
pub fn finite_median_of(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    finite_median(values.into_iter().collect())
}

/// The median of the finite values, taking the upper of the middle two for an even count (so it is
/// always one of the values); `None` when there are none.
pub fn finite_upper_median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// The median of every value, NaN and infinities included (ordered by [`f64::total_cmp`]), the
/// mean of the middle two for an even count; `None` for no values.
pub fn median_keeping_nan(v: Vec<f64>) -> Option<f64> {
    middle_mean(v)
}

fn middle_mean(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// `1 finding`, `3 findings`: the count and the word for it.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `1 replica`, `3 replicas`: [`plural`] for a word whose plural adds an `s`.
pub fn plural_s(n: usize, word: &str) -> String {
    plural(n, word, &format!("{word}s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_median_keeps_its_callers_semantics() {
        let even = vec![4.0, 1.0, f64::NAN, 3.0, 2.0];
        assert_eq!(finite_median(even.clone()), Some(2.5));
        assert_eq!(finite_median_of(even.iter().copied()), Some(2.5));
        assert_eq!(finite_upper_median(even), Some(3.0));
        assert_eq!(finite_median(vec![f64::INFINITY, f64::NAN]), None);
        assert_eq!(finite_upper_median(Vec::new()), None);
        // NaN is kept, and sorts last: the middle of [1, 2, NaN] is 2.
        assert_eq!(median_keeping_nan(vec![f64::NAN, 2.0, 1.0]), Some(2.0));
        assert!(median_keeping_nan(vec![f64::NAN, 1.0]).unwrap().is_nan());
        assert_eq!(median_keeping_nan(vec![1.0, 2.0, 3.0, 4.0]), Some(2.5));
    }

    #[test]
    fn counts_read_in_words() {
        assert_eq!(plural(1, "finding", "findings"), "1 finding");
        assert_eq!(plural(0, "rule/scope pair", "rule/scope pairs"), "0 rule/scope pairs");
        assert_eq!(plural_s(3, "replica"), "3 replicas");
        assert_eq!(plural_s(1, "replica"), "1 replica");
    }
}
