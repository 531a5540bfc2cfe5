//! Unicode sparklines (`▁▂▃▄▅▆▇█`) of an evidence signal over its baseline and its window.
//!
//! A column of numbers says where a signal ended up; a sparkline says how it got there: a step at
//! the deploy, a slow climb, a spike that already passed. Both halves share one vertical scale, so
//! a window drawn higher than its baseline really is higher. Each half is resampled by *time*, not
//! by point count: a stretch with no data stays a gap (a space) instead of being squeezed out,
//! because a hole in the data is a fact the reader should see.
//!
//! The scale is never narrower than a third of the signal's level ([`MIN_SPAN`]): a latency 6% above
//! its baseline draws as a small step, not as a climb from the floor to the top, and noise of a few
//! percent stays a ripple, while a signal that rises by half, or leaves zero, still uses the full
//! height.

use crate::report::{TimeRange, Trend};

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// Cells per half (baseline, window) in the text formats.
pub const CELLS: usize = 12;

/// Separator between the baseline half and the window half.
pub const DIVIDER: char = '│';

/// The least height of the scale, as a share of the largest magnitude drawn: the scale is widened
/// around the middle of the values to this when they lie closer together.
pub const MIN_SPAN: f64 = 1.0 / 3.0;

/// `▁▁▂▁▁▁▁▂▁▁▁▁│▅▇████▇██▇██`, or `None` when the trend holds no finite point.
pub fn trend(t: &Trend, baseline: &TimeRange, window: &TimeRange, cells: usize) -> Option<String> {
    let finite = |p: &&(f64, f64)| p.0.is_finite() && p.1.is_finite();
    let all: Vec<f64> = t.baseline.iter().chain(&t.window).filter(finite).map(|p| p.1).collect();
    if all.is_empty() || cells == 0 {
        return None;
    }
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = widened(lo, hi);
    let b = draw(&resample(&t.baseline, baseline, cells), lo, hi);
    let w = draw(&resample(&t.window, window, cells), lo, hi);
    Some(format!("{b}{DIVIDER}{w}"))
}

/// Mean of the points falling in each of `cells` equal slices of `range`; `None` for an empty slice.
pub fn resample(points: &[(f64, f64)], range: &TimeRange, cells: usize) -> Vec<Option<f64>> {
    let start = range.start.timestamp() as f64;
    let span = (range.end.timestamp() as f64 - start).max(1.0);
    let mut sums = vec![(0.0f64, 0usize); cells];
    for &(t, v) in points {
        if !t.is_finite() || !v.is_finite() {
            continue;
        }
        let pos = ((t - start) / span * cells as f64).floor();
        // A point exactly at the end belongs to the last cell; points outside the range are dropped.
        let idx = if pos >= cells as f64 && t <= start + span {
            cells - 1
        } else if pos < 0.0 || pos >= cells as f64 {
            continue;
        } else {
            pos as usize
        };
        sums[idx].0 += v;
        sums[idx].1 += 1;
    }
    sums.into_iter().map(|(s, n)| (n > 0).then(|| s / n as f64)).collect()
}

/// `lo..=hi` widened around its middle to at least [`MIN_SPAN`] of the larger magnitude. A flat
/// line stays flat (see [`bar`]).
fn widened(lo: f64, hi: f64) -> (f64, f64) {
    let least = MIN_SPAN * lo.abs().max(hi.abs());
    if hi - lo >= least || hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        return (lo, hi);
    }
    let mid = (lo + hi) / 2.0;
    (mid - least / 2.0, mid + least / 2.0)
}

fn draw(cells: &[Option<f64>], lo: f64, hi: f64) -> String {
    cells.iter().map(|c| c.map_or(' ', |v| bar(v, lo, hi))).collect()
}

/// The bar for `v` on the scale `lo..=hi`. A flat line sits on the floor when it is zero (nothing
/// happened) and in the middle otherwise, so a constant non-zero signal does not read as "none".
fn bar(v: f64, lo: f64, hi: f64) -> char {
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        return if v == 0.0 { BARS[0] } else { BARS[3] };
    }
    let x = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
    BARS[((x * (BARS.len() - 1) as f64).round() as usize).min(BARS.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    fn range(start_min: i64, len_min: i64) -> TimeRange {
        let t0 = Utc.with_ymd_and_hms(2026, 1, 15, 8, 0, 0).unwrap();
        TimeRange { start: t0 + chrono::Duration::minutes(start_min), end: t0 + chrono::Duration::minutes(start_min + len_min) }
    }

    fn points(r: &TimeRange, values: &[f64]) -> Vec<(f64, f64)> {
        let start = r.start.timestamp() as f64;
        let step = (r.end.timestamp() as f64 - start) / (values.len() - 1).max(1) as f64;
        values.iter().enumerate().map(|(i, v)| (start + step * i as f64, *v)).collect()
    }

    #[test]
    fn a_step_up_in_the_window_is_drawn_higher_than_the_baseline() {
        let (b, w) = (range(0, 30), range(30, 30));
        let t = Trend { step_seconds: 60, range_seconds: 120, query: String::new(), baseline: points(&b, &[1.0; 31]), window: points(&w, &[5.0; 31]) };
        assert_eq!(trend(&t, &b, &w, 6).as_deref(), Some("▁▁▁▁▁▁│██████"));
    }

    #[test]
    fn a_ramp_uses_every_level_in_order() {
        let (b, w) = (range(0, 8), range(8, 8));
        let t = Trend {
            step_seconds: 60,
            range_seconds: 60,
            query: String::new(),
            baseline: points(&b, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.0]),
            window: points(&w, &[7.0; 9]),
        };
        let s = trend(&t, &b, &w, 8).unwrap();
        assert!(s.starts_with("▁▂▃▄▅▆▇█"), "{s}");
    }

    #[test]
    fn a_small_change_is_drawn_as_a_small_step_and_a_large_one_uses_the_full_height() {
        let (b, w) = (range(0, 30), range(30, 30));
        let step = |from: f64, to: f64| {
            let t = Trend { step_seconds: 60, range_seconds: 120, query: String::new(), baseline: points(&b, &[from; 31]), window: points(&w, &[to; 31]) };
            trend(&t, &b, &w, 3).unwrap()
        };
        // 6% up: one level, in the middle of the scale.
        assert_eq!(step(0.100, 0.106), "▄▄▄│▅▅▅");
        // Rising by half, and leaving zero, still span the floor to the top.
        assert_eq!(step(1.0, 1.5), "▁▁▁│███");
        assert_eq!(step(0.0, 0.02), "▁▁▁│███");
        // A fall is drawn the same way down.
        assert_eq!(step(0.106, 0.100), "▅▅▅│▄▄▄");
        // Negative values are scaled by their magnitude too.
        assert_eq!(step(-0.100, -0.106), "▅▅▅│▄▄▄");
    }

    #[test]
    fn a_stretch_without_data_is_left_blank() {
        let (b, w) = (range(0, 30), range(30, 30));
        let t = Trend { step_seconds: 60, range_seconds: 120, query: String::new(), baseline: vec![], window: points(&w, &[2.0, 3.0]) };
        let s = trend(&t, &b, &w, 4).unwrap();
        assert_eq!(s.split(DIVIDER).next(), Some("    "));
    }

    #[test]
    fn a_flat_zero_line_lies_on_the_floor_and_a_flat_non_zero_line_in_the_middle() {
        let (b, w) = (range(0, 10), range(10, 10));
        let zero = Trend { step_seconds: 60, range_seconds: 60, query: String::new(), baseline: points(&b, &[0.0; 11]), window: points(&w, &[0.0; 11]) };
        assert_eq!(trend(&zero, &b, &w, 3).as_deref(), Some("▁▁▁│▁▁▁"));
        let flat = Trend { baseline: points(&b, &[0.4; 11]), window: points(&w, &[0.4; 11]), ..zero };
        assert_eq!(trend(&flat, &b, &w, 3).as_deref(), Some("▄▄▄│▄▄▄"));
    }

    #[test]
    fn no_finite_point_gives_no_sparkline() {
        let (b, w) = (range(0, 10), range(10, 10));
        let t = Trend { step_seconds: 60, range_seconds: 60, query: String::new(), baseline: vec![(0.0, f64::NAN)], window: vec![] };
        assert_eq!(trend(&t, &b, &w, 4), None);
        assert_eq!(trend(&Trend { baseline: vec![], ..t }, &b, &w, 0), None);
    }

    #[test]
    fn points_outside_the_range_and_odd_values_are_ignored() {
        let r = range(0, 10);
        let start = r.start.timestamp() as f64;
        let cells = resample(&[(start - 60.0, 1.0), (start + 1e12, 1.0), (f64::NAN, 1.0), (start, f64::INFINITY), (start + 600.0, 2.0)], &r, 2);
        assert_eq!(cells, vec![None, Some(2.0)]);
    }
}
