//! Raw time series held in memory, the way a TSDB holds them: one series per label set (the metric
//! name is the `__name__` label), samples as millisecond timestamps with float values, and
//! staleness markers.
//!
//! A staleness marker is the special NaN Prometheus writes when a series disappears from a scrape
//! (or a target goes down). It is stored like a sample so an instant selector stops returning the
//! series at once instead of for the five minutes of lookback; range selectors skip it.

use std::collections::{BTreeMap, BTreeSet};

use crate::prom::Labels;

/// Bit pattern of Prometheus' staleness marker (a NaN that no arithmetic produces).
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// The staleness marker as a value.
pub fn stale_nan() -> f64 {
    f64::from_bits(STALE_NAN_BITS)
}

/// True for the staleness marker only, not for an ordinary NaN sample.
pub fn is_stale(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

/// The samples of a series with `from <= t <= to`, staleness markers included.
pub fn between(points: &[(i64, f64)], from: i64, to: i64) -> &[(i64, f64)] {
    let lo = points.partition_point(|(t, _)| *t < from);
    let hi = points.partition_point(|(t, _)| *t <= to);
    if lo >= hi {
        &[]
    } else {
        &points[lo..hi]
    }
}

/// The last sample of a series at or before `t`.
pub fn at_or_before(points: &[(i64, f64)], t: i64) -> Option<(i64, f64)> {
    let i = points.partition_point(|(ts, _)| *ts <= t);
    i.checked_sub(1).map(|i| points[i])
}

/// A stored series: its labels and samples.
pub type SeriesRef<'a> = (&'a Labels, &'a Vec<(i64, f64)>);

/// Every series, indexed by metric name; iteration is in label order, like a TSDB's.
#[derive(Debug, Clone, Default)]
pub struct Store {
    by_name: BTreeMap<String, BTreeMap<Labels, Vec<(i64, f64)>>>,
}

impl Store {
    pub fn new() -> Store {
        Store::default()
    }

    /// Add samples to the series with these labels (which must include `__name__`). Samples are
    /// kept in time order; a second sample at the same timestamp replaces the first.
    pub fn add(&mut self, labels: Labels, points: impl IntoIterator<Item = (i64, f64)>) {
        let name = labels.get("__name__").cloned().unwrap_or_default();
        let series = self.by_name.entry(name).or_default().entry(labels).or_default();
        let was_sorted_end = series.last().map(|(t, _)| *t);
        let mut appended_in_order = true;
        for (t, v) in points {
            if let Some((last_t, last_v)) = series.last_mut() {
                if t == *last_t {
                    *last_v = v;
                    continue;
                }
                if t < *last_t {
                    appended_in_order = false;
                }
            }
            series.push((t, v));
        }
        if !appended_in_order || was_sorted_end.is_none() {
            // Rare (out-of-order input): sort, keeping the last value written for a timestamp.
            let mut indexed: Vec<(usize, (i64, f64))> = series.drain(..).enumerate().collect();
            indexed.sort_by_key(|(i, (t, _))| (*t, *i));
            let mut out: Vec<(i64, f64)> = Vec::with_capacity(indexed.len());
            for (_, (t, v)) in indexed {
                match out.last_mut() {
                    Some(last) if last.0 == t => last.1 = v,
                    _ => out.push((t, v)),
                }
            }
            *series = out;
        }
    }

    /// Add one sample.
    pub fn push(&mut self, labels: Labels, t: i64, v: f64) {
        self.add(labels, std::iter::once((t, v)));
    }

    /// Number of series.
    pub fn len(&self) -> usize {
        self.by_name.values().map(BTreeMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every series, in name then label order.
    pub fn series(&self) -> impl Iterator<Item = (&Labels, &Vec<(i64, f64)>)> {
        self.by_name.values().flat_map(|m| m.iter())
    }

    /// Series whose metric name is `name`, or every series when `name` is `None`.
    pub fn named(&self, name: Option<&str>) -> Box<dyn Iterator<Item = SeriesRef<'_>> + '_> {
        match name {
            Some(n) => match self.by_name.get(n) {
                Some(m) => Box::new(m.iter()),
                None => Box::new(std::iter::empty()),
            },
            None => Box::new(self.series()),
        }
    }

    /// Metric names present at all.
    pub fn names(&self) -> BTreeSet<String> {
        self.by_name.keys().cloned().collect()
    }

    /// The earliest and latest sample time over all series (staleness markers excluded).
    pub fn time_span(&self) -> Option<(i64, i64)> {
        let mut span: Option<(i64, i64)> = None;
        for (_, pts) in self.series() {
            let real = pts.iter().filter(|(_, v)| !is_stale(*v));
            for (t, _) in real {
                span = Some(match span {
                    None => (*t, *t),
                    Some((a, b)) => (a.min(*t), b.max(*t)),
                });
            }
        }
        span
    }

    /// A store holding series given as (metric name, labels, points with times in unix seconds).
    pub fn from_series(series: impl IntoIterator<Item = (String, Labels, Vec<(f64, f64)>)>) -> Store {
        let mut store = Store::new();
        for (name, mut labels, points) in series {
            labels.insert("__name__".to_string(), name);
            store.add(labels, points.into_iter().map(|(t, v)| ((t * 1000.0).round() as i64, v)));
        }
        store
    }

    /// Merge another store into this one.
    pub fn extend(&mut self, other: Store) {
        for (_, m) in other.by_name {
            for (labels, pts) in m {
                self.add(labels, pts);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(name: &str) -> Labels {
        [("__name__".to_string(), name.to_string())].into_iter().collect()
    }

    #[test]
    fn the_staleness_marker_is_a_nan_that_ordinary_nan_is_not() {
        assert!(stale_nan().is_nan());
        assert!(is_stale(stale_nan()));
        assert!(!is_stale(f64::NAN));
    }

    #[test]
    fn samples_added_out_of_order_end_up_sorted_and_a_repeated_timestamp_keeps_the_last_value() {
        let mut s = Store::new();
        s.add(labels("x"), [(3000, 3.0), (1000, 1.0)]);
        s.add(labels("x"), [(2000, 2.0), (3000, 30.0)]);
        let (_, pts) = s.series().next().unwrap();
        assert_eq!(pts, &vec![(1000, 1.0), (2000, 2.0), (3000, 30.0)]);
    }

    #[test]
    fn between_is_inclusive_at_both_ends() {
        let s = vec![(1000, 1.0), (2000, 2.0), (3000, 3.0)];
        assert_eq!(between(&s, 1000, 2000), &[(1000, 1.0), (2000, 2.0)]);
        assert_eq!(between(&s, 3001, 4000), &[] as &[(i64, f64)]);
        assert_eq!(at_or_before(&s, 2500), Some((2000, 2.0)));
        assert_eq!(at_or_before(&s, 999), None);
    }
}
