//! Stage: onset. When each finding's problem began, read from the trend of its leading signal that
//! [`super::follow_up`] already fetched: no query of its own.
//!
//! The leading signal is the finding's first evidence, in the rule's order, that carries a trend and
//! is past one of its limits while its baseline value was not (see [`leading`]); when its trend
//! cannot date the problem, the next such signal is asked. Its baseline points give a level (their
//! median) and a spread (their median absolute deviation, scaled to a standard deviation, with a
//! floor: 2% of the level or 5% of the way to the limit, so a flat baseline does not make every
//! wiggle a change). A window point has *departed* when it lies more than [`DEPART_K`] spreads past
//! the level in the finding's direction, or past the limit the finding crossed (when that limit
//! lies beyond the baseline's noise, or the baseline was past it too). Single spikes and dips are
//! smoothed away with a 3-point running median, and a departure counts only when it lasts:
//! [`MIN_RUN`] points or a fifth of the window, whichever is more, or every point to the window's
//! end (at least two). The onset is then walked back, on the raw points, to the last point still
//! at the baseline level (within [`LEVEL_K`] spreads): the series left its baseline after that time. When no such point exists in the window, the
//! baseline's own points decide: when the baseline ends where the window begins (its last point
//! shares the window's first instant; its own last point is one step before) and its own last
//! points are at the level, the problem began with the window and is dated at the window's first
//! point (a window taken from an alert's start, as `serve` takes it, begins with its incident);
//! when the baseline held the problem too, ends long before the window or has no points, the
//! problem was there at the window's start ([`Onset::BeforeWindow`]). When nothing departs for
//! long enough, or the trend is too thin, the onset is unknown (`None`).
//!
//! A problem that began in the window is over when its series comes back to the baseline level
//! and stays there ([`detect_span`]); one already there at the window's start, whose baseline may
//! hold the same problem, is over when its series comes back within every line it crossed
//! ([`over_before_window`]).
//!
//! Trend points are sub-range aggregates (a rate over the last few minutes at every step), so a
//! change shows from the first step after it: the onset found is within about one step of the truth.

use chrono::{DateTime, Utc};

use crate::report::{Evidence, Finding, Limit};

/// Spreads past the baseline level at which a point has departed.
pub const DEPART_K: f64 = 3.0;
/// Spreads past the baseline level within which a point is still at the baseline level.
pub const LEVEL_K: f64 = 2.0;
/// The shortest departure that counts, in points (unless it runs to the window's end).
pub const MIN_RUN: usize = 3;
/// ... or this share of the window's points, when that is more.
pub const RUN_SHARE: f64 = 0.2;
/// How far back on the healthy side of every line it crossed, as a share of the line, a signal
/// must be for a problem present before the window to count as over (see [`over_before_window`]).
pub const BACK_MARGIN: f64 = 0.1;
/// The spread's floor relative to the baseline level ...
const FLOOR_OF_LEVEL: f64 = 0.02;
/// ... and relative to the distance from the level to the limit.
const FLOOR_OF_GAP: f64 = 0.05;

/// Which way the problem moves the signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Up,
    Down,
}

impl Direction {
    fn sign(self) -> f64 {
        match self {
            Direction::Up => 1.0,
            Direction::Down => -1.0,
        }
    }
}

/// A line the finding crossed: `> 0.9` is `{ value: 0.9, inclusive: false, .. }` going up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crossed {
    pub value: f64,
    pub inclusive: bool,
    /// The baseline's evaluated value was past the line as well: a chronic problem, so the line
    /// counts even where the baseline's points are too spread to tell it from noise.
    pub baseline_past: bool,
}

/// What the trend says about when the problem began.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Onset {
    /// The series left its baseline after this time (unix seconds): its last point at the baseline level.
    At(f64),
    /// The series was already past its baseline at the window's first point.
    BeforeWindow,
}

use crate::stats::median_keeping_nan as median;

/// The shortest run that counts in a window of `n` points: [`MIN_RUN`] or a fifth of the window.
fn lasting(n: usize) -> usize {
    MIN_RUN.max((RUN_SHARE * n as f64).ceil() as usize)
}

/// `raw` through a 3-point running median (the first and last points stay as they are): single
/// spikes and dips smoothed away.
fn smoothed(raw: &[f64]) -> Vec<f64> {
    let n = raw.len();
    (0..n)
        .map(|i| {
            let (a, b) = (raw[i.saturating_sub(1)], raw[(i + 1).min(n - 1)]);
            median(vec![a, raw[i], b]).unwrap_or(raw[i])
        })
        .collect()
}

/// The finite points, in time order, one per timestamp.
fn clean(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut p: Vec<(f64, f64)> = points.iter().copied().filter(|(t, v)| t.is_finite() && v.is_finite()).collect();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    p.dedup_by(|a, b| a.0 == b.0);
    p
}

/// When the series `window` left the level of `baseline`, moving in `direction`, past `limit`
/// (the line the finding crossed) if given. `None` when it cannot be told: too few points, no level
/// and no limit, or no departure that lasts.
pub fn detect(baseline: &[(f64, f64)], window: &[(f64, f64)], direction: Direction, limit: Option<Crossed>) -> Option<Onset> {
    detect_span(baseline, window, direction, limit).map(|(onset, _)| onset)
}

/// [`detect`], and when a problem that began in the window is over: the time (unix seconds) of
/// the first point of the run at the window's end that is back at the baseline level (within
/// [`LEVEL_K`] spreads, and not past the limit), when that run lasts as long as a departure must
/// ([`MIN_RUN`] points or a fifth of the window) and follows the departure. `None` while the series
/// is still away at the window's end, and for a problem already there before the window (its
/// baseline may hold the problem too, so its level says nothing about being over).
pub fn detect_span(baseline: &[(f64, f64)], window: &[(f64, f64)], direction: Direction, limit: Option<Crossed>) -> Option<(Onset, Option<f64>)> {
    let w = clean(window);
    if w.len() < 2 {
        return None;
    }
    let base: Vec<f64> = clean(baseline).into_iter().map(|p| p.1).collect();
    let level = if base.len() >= 3 { median(base.clone()) } else { None };
    if level.is_none() && limit.is_none() {
        return None;
    }
    let spread = level.map(|l| {
        let mad = median(base.iter().map(|v| (v - l).abs()).collect()).unwrap_or(0.0) * 1.4826;
        let gap = limit.map_or(0.0, |c| (c.value - l).abs());
        mad.max(FLOOR_OF_LEVEL * l.abs()).max(FLOOR_OF_GAP * gap).max(1e-9)
    });
    let s = direction.sign();
    // A limit inside the baseline's own noise would mark every other point: it counts only when it
    // lies beyond the noise, or when the baseline level is past it already (a chronic problem).
    let limit = limit.filter(|c| match (level, spread) {
        (Some(l), Some(sp)) => c.baseline_past || s * (l - c.value) > 0.0 || s * (c.value - l) >= DEPART_K * sp,
        _ => true,
    });
    let beyond = |v: f64, k: f64| {
        let past_level = matches!((level, spread), (Some(l), Some(sp)) if s * (v - l) > k * sp);
        let past_limit = limit.is_some_and(|c| s * (v - c.value) > 0.0 || (c.inclusive && v == c.value));
        past_level || past_limit
    };
    let raw: Vec<f64> = w.iter().map(|p| p.1).collect();
    let n = raw.len();
    let smooth = smoothed(&raw);
    let departed: Vec<bool> = smooth.iter().map(|v| beyond(*v, DEPART_K)).collect();
    let need = lasting(n);
    let lasts = |i: usize| {
        let end = (i + need).min(n);
        departed[i..end].iter().all(|d| *d) && (i + need <= n || n - i >= 2)
    };
    let mut first = (0..n).find(|&i| lasts(i))?;
    // When the series came back to the level (raw and smoothed, for at least [`MIN_RUN`] points)
    // and then left it again in a departure that lasts, the problem the window ends with is the
    // later episode: date that one (the earlier one would put a KV-pressure episode's start at the
    // overload's KV rise minutes before).
    let at_level = |i: usize| !beyond(raw[i], LEVEL_K) && !beyond(smooth[i], LEVEL_K);
    let mut i = first;
    while i < n {
        while i < n && !at_level(i) {
            i += 1;
        }
        let run = (i..n).take_while(|&k| at_level(k)).count();
        i += run;
        if run >= MIN_RUN && i < n {
            match (i..n).find(|&k| lasts(k)) {
                Some(k) => {
                    first = k;
                    i = k;
                }
                None => break,
            }
        }
    }
    let mut j = first;
    while j > 0 && beyond(raw[j - 1], LEVEL_K) {
        j -= 1;
    }
    let chronic = limit.is_some_and(|c| c.baseline_past);
    let onset = if j > 0 {
        w[j - 1].0
    } else if !chronic && fresh_at_window_start(baseline, w[0].0, w.get(1).map(|p| p.0 - w[0].0), |v| beyond(v, LEVEL_K)) {
        // Away from the window's first point, and not in the baseline just before it: it started
        // there (a window taken from an alert's start begins with its incident).
        w[0].0
    } else {
        return Some((Onset::BeforeWindow, None));
    };
    // The run back at the level that reaches the window's end, on the raw points and the smoothed
    // alike (a single dip back is no recovery).
    let back = (0..n).rev().take_while(|&i| at_level(i)).count();
    let ended = (level.is_some() && back >= need && n - back > first).then(|| w[n - back].0);
    Some((Onset::At(onset), ended))
}

/// Whether a series away from its level at the window's first point (at `start`) was at its level
/// in the baseline just before: the baseline's own last point (the last one before `start`; the
/// point at `start` itself, which a baseline ending where the window begins shares with the window,
/// is the window's) lies within one window step (`step`, 1.5x for jitter) of `start` and is not
/// `away`. A baseline that held the problem, ends long before the window (`--baseline 1d`) or has
/// no point of its own cannot say the problem began with the window.
fn fresh_at_window_start(baseline: &[(f64, f64)], start: f64, step: Option<f64>, away: impl Fn(f64) -> bool) -> bool {
    let Some(step) = step.filter(|s| *s > 0.0) else { return false };
    let own: Vec<(f64, f64)> = clean(baseline).into_iter().filter(|p| p.0 < start).collect();
    let Some(&(t, v)) = own.last() else { return false };
    // A single dip of a problem the baseline held is no healthy baseline: its last three points'
    // median must be at the level too.
    let tail = median(own.iter().rev().take(3).map(|p| p.1).collect()).unwrap_or(v);
    start - t <= 1.5 * step && !away(v) && !away(tail)
}

/// When a problem already there at the window's start was over: the time (unix seconds) of the
/// first point of the run at the window's end that is back on the healthy side of every line in
/// `lines` (those the signal's limits draw in `direction`) by at least [`BACK_MARGIN`] of the line,
/// on the raw points and the 3-point running median alike, when that run lasts as long as a
/// departure must ([`MIN_RUN`] points or a fifth of the window) and the window began past a line.
/// The baseline's level is no help here (it may hold the same problem), so only the lines say
/// where the problem ends; the margin keeps a signal hovering at its line from being called over.
pub fn over_before_window(window: &[(f64, f64)], direction: Direction, lines: &[Crossed]) -> Option<f64> {
    let w = clean(window);
    let n = w.len();
    if n < 2 || lines.is_empty() {
        return None;
    }
    let s = direction.sign();
    let back = |v: f64| lines.iter().all(|c| s * (c.value - v) >= BACK_MARGIN * c.value.abs() && !(c.inclusive && v == c.value));
    let raw: Vec<f64> = w.iter().map(|p| p.1).collect();
    let smooth = smoothed(&raw);
    let run = (0..n).rev().take_while(|&i| back(raw[i]) && back(smooth[i])).count();
    let need = lasting(n);
    (run >= need && run < n && !back(raw[0])).then(|| w[n - run].0)
}

/// Every finite line `e`'s limits draw in `direction` (`>= 2x baseline` and `> 3 s` for TTFT).
fn lines_in(e: &Evidence, direction: Direction) -> Vec<Crossed> {
    e.limits.iter().filter(|l| informative(e, l)).map(|l| line(e, l)).filter(|(dir, _)| *dir == direction).map(|(_, c)| c).collect()
}

/// The limit `l` of `e` as a line: which way its problem goes, where, and whether `e`'s baseline
/// value was past it too.
fn line(e: &Evidence, l: &Limit) -> (Direction, Crossed) {
    let dir = if l.side.is_above() { Direction::Up } else { Direction::Down };
    (dir, Crossed { value: l.value, inclusive: l.side.inclusive(), baseline_past: l.crossed_by(e.baseline) })
}

/// The evidence the onset is read from, among those with a trend in the window, in the rule's
/// order: the first whose window value is past one of its limits while its baseline value was not
/// (the signal that changed), else the first past a limit at all (a problem the baseline had too).
/// Preconditions (`prefix_queries_rate > 0`: prefix caching is in use) and guards
/// (`queue_p95 <= 300 ms`: the queue stayed short) hold in the baseline as well, so they never
/// date a problem that began in the window.
pub fn leading(f: &Finding) -> Option<&Evidence> {
    candidates(f).into_iter().next()
}

/// The signals that may date `f`, best first: those that changed, then those past a limit at all.
/// When the first cannot date it (a trend too noisy to show a lasting change), the next is asked.
fn candidates(f: &Finding) -> Vec<&Evidence> {
    let with_trend = || f.evidence.iter().filter(|e| e.series.as_ref().is_some_and(|s| !s.window.is_empty()));
    let past = |e: &Evidence, l: &Limit| informative(e, l) && l.crossed_by(e.value);
    let changed = |e: &Evidence| e.limits.iter().any(|l| past(e, l) && !l.crossed_by(e.baseline));
    let mut out: Vec<&Evidence> = with_trend().filter(|e| changed(e)).collect();
    out.extend(with_trend().filter(|e| !changed(e) && e.limits.iter().any(|l| past(e, l))));
    out
}

/// A finite line away from the baseline value: `>= 3x baseline` of a zero baseline is the line 0,
/// which every value of a ratio is on, so it tells nothing about when anything changed.
fn informative(e: &Evidence, l: &Limit) -> bool {
    l.value.is_finite() && e.baseline != Some(l.value)
}

/// Whether the signal that dated `f` (`dated_by`, its `onset_signal`) is past a limit in the window that its
/// baseline value was not past: the problem is new since the baseline, not a chronic one.
pub fn new_since_baseline(f: &Finding, dated_by: Option<&str>) -> bool {
    let Some(e) = f.evidence.iter().find(|e| Some(e.signal.as_str()) == dated_by) else { return false };
    e.limits.iter().any(|l| informative(e, l) && l.crossed_by(e.value) && !l.crossed_by(e.baseline))
}

/// The direction of `e`'s problem and the line it crossed, from its limits (`> 0.9`, `< 0.5`): the
/// first the window crossed and the baseline did not, else the first the window crossed.
fn direction_and_limit(e: &Evidence) -> (Direction, Option<Crossed>) {
    let mut lines = e.limits.iter().filter(|l| informative(e, l));
    let past = |l: &&Limit| l.crossed_by(e.value);
    let chosen = lines.clone().find(|l| past(l) && !l.crossed_by(e.baseline)).or_else(|| lines.clone().find(past)).or_else(|| lines.next());
    match chosen {
        Some(l) => {
            let (dir, crossed) = line(e, l);
            (dir, l.value.is_finite().then_some(crossed))
        }
        None => (Direction::Up, None),
    }
}

/// When a finding began and ended: what it carries as `onset`, `onset_signal` and `ended` (see
/// [`Finding`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dating {
    pub onset: Option<DateTime<Utc>>,
    /// The signal whose trend (or, for a count of targets down, whose events) dated it.
    pub signal: Option<String>,
    pub ended: Option<DateTime<Utc>>,
}

impl Dating {
    /// The dating a finding already carries.
    pub fn of(f: &Finding) -> Dating {
        Dating { onset: f.onset, signal: f.onset_signal.clone(), ended: f.ended }
    }

    /// Dated by a signal that was already past its line when the window opened.
    pub fn present_before_window(&self) -> bool {
        self.onset.is_none() && self.signal.is_some()
    }
}

/// Date a finding from its leading signal's trend; `None` where no trend dates it.
pub fn dating(f: &Finding) -> Option<Dating> {
    let time = |t: f64| DateTime::<Utc>::from_timestamp_millis((t * 1000.0).round() as i64);
    let (found, ended, signal) = candidates(f).into_iter().find_map(|e| {
        let series = e.series.as_ref()?;
        let (direction, limit) = direction_and_limit(e);
        // A trend point aggregates the range before it, so the first point back at the level
        // is one range after the problem stopped (a change that starts shows at once).
        let range = series.range_seconds as f64;
        let start = series.window.iter().map(|p| p.0).filter(|t| t.is_finite()).fold(f64::INFINITY, f64::min);
        detect_span(&series.baseline, &series.window, direction, limit).map(|(onset, ended)| {
            let ended = match onset {
                Onset::At(_) => ended.map(|t| t - range),
                Onset::BeforeWindow => over_before_window(&series.window, direction, &lines_in(e, direction)).map(|t| (t - range).max(start)),
            };
            (onset, ended, e.signal.clone())
        })
    })?;
    Some(match found {
        Onset::At(t) => {
            let onset = time(t);
            Dating { onset, signal: onset.map(|_| signal), ended: onset.and(ended.map(|e| e.max(t)).and_then(time)) }
        }
        Onset::BeforeWindow => Dating { onset: None, signal: Some(signal), ended: ended.and_then(time) },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each finding's dating, built into it the way explain builds it.
    fn built(fs: &mut [Finding]) {
        for f in fs.iter_mut() {
            let parts = crate::explain::finish::Parts { dating: dating(f), ..Default::default() };
            *f = crate::explain::finish::build(f.clone(), parts);
        }
    }

    /// Points every 60 s from `start`, one per value.
    fn series(start: f64, values: &[f64]) -> Vec<(f64, f64)> {
        values.iter().enumerate().map(|(i, v)| (start + 60.0 * i as f64, *v)).collect()
    }

    /// A baseline of 31 points around `level` with a deterministic wiggle of `noise`.
    fn noisy(level: f64, noise: f64, n: usize) -> Vec<f64> {
        (0..n).map(|i| level + noise * (((i * 7919) % 13) as f64 / 6.0 - 1.0)).collect()
    }

    const B0: f64 = 0.0;
    const W0: f64 = 1800.0;

    fn up(limit: f64) -> Option<Crossed> {
        Some(Crossed { value: limit, inclusive: false, baseline_past: false })
    }

    #[test]
    fn a_step_change_is_dated_at_the_last_point_before_it() {
        let base = series(B0, &noisy(0.5, 0.02, 31));
        let mut w = noisy(0.5, 0.02, 31);
        for v in &mut w[12..] {
            *v = 0.97;
        }
        let got = detect(&base, &series(W0, &w), Direction::Up, up(0.9));
        assert_eq!(got, Some(Onset::At(W0 + 11.0 * 60.0)));
    }

    #[test]
    fn a_ramp_is_dated_where_it_leaves_the_baseline_not_where_it_crosses_the_limit() {
        let base = series(B0, &noisy(0.45, 0.01, 31));
        let w: Vec<f64> = (0..31).map(|i| if i < 10 { 0.45 } else { 0.45 + 0.025 * (i - 9) as f64 }).collect();
        let Some(Onset::At(t)) = detect(&base, &series(W0, &w), Direction::Up, up(0.9)) else { panic!("no onset") };
        // The limit is crossed at point 28; the baseline is left at point 10 or 11.
        assert!((W0 + 9.0 * 60.0..=W0 + 11.0 * 60.0).contains(&t), "{}", (t - W0) / 60.0);
    }

    #[test]
    fn a_problem_back_at_the_baseline_level_for_a_fifth_of_the_window_is_over() {
        let base = series(B0, &noisy(0.5, 0.02, 31));
        // Away from point 10 to 20, back from point 21 to the end (10 points, a fifth is 7).
        let mut w = noisy(0.5, 0.02, 31);
        w[10..21].fill(0.97);
        let got = detect_span(&base, &series(W0, &w), Direction::Up, up(0.9));
        assert_eq!(got, Some((Onset::At(W0 + 9.0 * 60.0), Some(W0 + 21.0 * 60.0))));
        // Back for only 5 points: too short to call it over.
        let mut w = noisy(0.5, 0.02, 31);
        w[10..26].fill(0.97);
        assert_eq!(detect_span(&base, &series(W0, &w), Direction::Up, up(0.9)), Some((Onset::At(W0 + 9.0 * 60.0), None)));
        // Down from the peak but still above the baseline's noise (0.7 against 0.5 +- 0.02): not over.
        let mut w = noisy(0.5, 0.02, 31);
        w[10..21].fill(0.97);
        w[21..].fill(0.7);
        assert_eq!(detect_span(&base, &series(W0, &w), Direction::Up, up(0.9)), Some((Onset::At(W0 + 9.0 * 60.0), None)));
        // A problem there before the window (its baseline's last minutes held it) is never called
        // over by its own baseline's level.
        let mut held = noisy(0.5, 0.02, 31);
        held[25..].fill(0.97);
        let mut w = vec![0.97; 31];
        w[15..].copy_from_slice(&noisy(0.5, 0.02, 16));
        assert_eq!(detect_span(&series(B0, &held), &series(W0, &w), Direction::Up, up(0.9)), Some((Onset::BeforeWindow, None)));
    }

    #[test]
    fn a_second_episode_after_a_lasting_return_is_the_one_dated() {
        let base = series(B0, &noisy(0.5, 0.02, 31));
        // Away at points 3-9 (as the overload filled the cache), back at 10-19, away again from 20
        // to the end: the problem the window ends with began at 20.
        let mut w = noisy(0.5, 0.02, 31);
        w[3..10].fill(0.97);
        w[20..].fill(0.97);
        assert_eq!(detect_span(&base, &series(W0, &w), Direction::Up, up(0.9)), Some((Onset::At(W0 + 19.0 * 60.0), None)));
        // A return of two points is a dip inside one episode.
        let mut w = noisy(0.5, 0.02, 31);
        w[3..].fill(0.97);
        w[12..14].fill(0.5);
        assert_eq!(detect_span(&base, &series(W0, &w), Direction::Up, up(0.9)), Some((Onset::At(W0 + 2.0 * 60.0), None)));
        // Already there at the start, back for a while, then again: the later episode, dated.
        let mut w = noisy(0.5, 0.02, 31);
        w[..8].fill(0.97);
        w[20..].fill(0.97);
        assert_eq!(detect_span(&base, &series(W0, &w), Direction::Up, up(0.9)), Some((Onset::At(W0 + 19.0 * 60.0), None)));
        // Two episodes of seven points, both over: the later one's start, and its end.
        let mut w = noisy(0.5, 0.02, 31);
        w[1..8].fill(0.97);
        w[15..22].fill(0.97);
        let got = detect_span(&base, &series(W0, &w), Direction::Up, up(0.9));
        assert_eq!(got, Some((Onset::At(W0 + 14.0 * 60.0), Some(W0 + 22.0 * 60.0))));
    }

    #[test]
    fn a_noisy_flat_series_has_no_onset() {
        let base = series(B0, &noisy(0.2, 0.05, 31));
        let w = series(W0, &noisy(0.21, 0.05, 31));
        assert_eq!(detect(&base, &w, Direction::Up, up(0.5)), None);
    }

    #[test]
    fn spikes_alone_are_no_onset() {
        let base = series(B0, &noisy(1.0, 0.05, 31));
        let mut w = noisy(1.0, 0.05, 31);
        for i in [3, 9, 10, 20, 27] {
            w[i] = 8.0;
        }
        assert_eq!(detect(&base, &series(W0, &w), Direction::Up, up(3.0)), None);
    }

    #[test]
    fn a_problem_away_from_the_windows_first_point_that_the_baseline_did_not_hold_started_with_the_window() {
        // The baseline ends where the window begins (its last point, at W0, is the window's first):
        // healthy to its last point of its own, one step before, then away from the window's first
        // point on, as when the window is taken from an alert's start.
        let mut base = noisy(0.5, 0.02, 31);
        base[30] = 0.96;
        let got = detect_span(&series(B0, &base), &series(W0, &[0.96; 31]), Direction::Up, up(0.9));
        assert_eq!(got, Some((Onset::At(W0), None)));
        // Going down as well (a hit rate that fell with the window's first point).
        let base = series(B0, &noisy(0.8, 0.02, 31));
        let got = detect(&base, &series(W0, &[0.2; 31]), Direction::Down, Some(Crossed { value: 0.5, inclusive: false, baseline_past: false }));
        assert_eq!(got, Some(Onset::At(W0)));
    }

    #[test]
    fn a_problem_the_baseline_held_at_its_end_was_there_before_the_window() {
        let w = series(W0, &[0.96; 31]);
        // The baseline's last ten minutes were away already.
        let mut held = noisy(0.5, 0.02, 31);
        held[20..].fill(0.96);
        assert_eq!(detect(&series(B0, &held), &w, Direction::Up, up(0.9)), Some(Onset::BeforeWindow));
        // A single dip back at the baseline's last point of its own does not make it healthy.
        held[29] = 0.5;
        assert_eq!(detect(&series(B0, &held), &w, Direction::Up, up(0.9)), Some(Onset::BeforeWindow));
        // A baseline just as bad throughout: the limit alone tells.
        assert_eq!(detect(&series(B0, &[0.96; 31]), &w, Direction::Up, up(0.9)), Some(Onset::BeforeWindow));
        // A baseline whose evaluated value was past the line (chronic) held it, whatever its last points.
        let chronic = Some(Crossed { value: 0.9, inclusive: false, baseline_past: true });
        assert_eq!(detect(&series(B0, &noisy(0.5, 0.02, 31)), &w, Direction::Up, chronic), Some(Onset::BeforeWindow));
    }

    #[test]
    fn a_baseline_that_ends_long_before_the_window_or_has_no_points_of_its_own_cannot_date_a_problem_at_the_window_start() {
        let w = series(W0, &[0.96; 31]);
        // A day before (`--baseline 1d`): healthy then says nothing about the minute before the window.
        let day_before = series(W0 - 86_400.0, &noisy(0.5, 0.02, 31));
        assert_eq!(detect(&day_before, &w, Direction::Up, up(0.9)), Some(Onset::BeforeWindow));
        // Only the shared instant: no point of its own.
        assert_eq!(detect(&series(W0, &[0.5]), &w, Direction::Up, up(0.9)), Some(Onset::BeforeWindow));
        assert_eq!(detect(&[], &w, Direction::Up, up(0.9)), Some(Onset::BeforeWindow));
    }

    #[test]
    fn a_change_right_after_the_window_start_is_in_the_window() {
        let base = series(B0, &noisy(0.5, 0.02, 31));
        let mut w = vec![0.97; 31];
        w[0] = 0.5;
        assert_eq!(detect(&base, &series(W0, &w), Direction::Up, up(0.9)), Some(Onset::At(W0)));
    }

    #[test]
    fn a_change_in_the_last_minutes_counts_when_it_lasts_to_the_end() {
        let base = series(B0, &noisy(0.1, 0.01, 31));
        let mut w = noisy(0.1, 0.01, 31);
        for v in &mut w[27..] {
            *v = 2.0;
        }
        assert_eq!(detect(&base, &series(W0, &w), Direction::Up, up(1.0)), Some(Onset::At(W0 + 26.0 * 60.0)));
        // One point at the very end is a spike, not an onset.
        let mut w = noisy(0.1, 0.01, 31);
        w[30] = 2.0;
        assert_eq!(detect(&base, &series(W0, &w), Direction::Up, up(1.0)), None);
    }

    #[test]
    fn a_limit_inside_the_baselines_noise_does_not_make_the_window_start_an_onset() {
        // As a KV-usage slope over short ranges: +-1/h of noise around 0, a +0.2/h limit.
        let base = series(B0, &noisy(0.0, 1.5, 31));
        let w = series(W0, &noisy(0.8, 0.3, 31));
        assert_eq!(detect(&base, &w, Direction::Up, up(0.2)), None);
    }

    #[test]
    fn a_chronic_problem_on_a_ramping_baseline_was_there_before_the_window() {
        // As a 1 h burn rate whose hour filled during the baseline: the baseline's value was past
        // the line already, so the window's first point past it is no onset.
        let base = series(B0, &(0..31).map(|i| 0.5 * i as f64).collect::<Vec<_>>());
        let w = series(W0, &(0..31).map(|i| 15.5 + 0.5 * i as f64).collect::<Vec<_>>());
        let chronic = Some(Crossed { value: 14.4, inclusive: false, baseline_past: true });
        assert_eq!(detect(&base, &w, Direction::Up, chronic), Some(Onset::BeforeWindow));
    }

    #[test]
    fn a_drop_is_found_going_down() {
        let base = series(B0, &noisy(100.0, 3.0, 31));
        let mut w = noisy(100.0, 3.0, 31);
        for v in &mut w[15..] {
            *v = 20.0;
        }
        let got = detect(&base, &series(W0, &w), Direction::Down, Some(Crossed { value: 50.0, inclusive: false, baseline_past: false }));
        assert_eq!(got, Some(Onset::At(W0 + 14.0 * 60.0)));
    }

    #[test]
    fn gaps_and_non_finite_points_are_skipped() {
        let base = series(B0, &noisy(0.5, 0.02, 31));
        let mut w = series(W0, &noisy(0.5, 0.02, 31));
        for p in &mut w[12..] {
            p.1 = 0.97;
        }
        w[5].1 = f64::NAN;
        w[14].1 = f64::INFINITY;
        w.remove(20); // a missing step
        w.push((f64::NAN, 0.97));
        assert_eq!(detect(&base, &w, Direction::Up, up(0.9)), Some(Onset::At(W0 + 11.0 * 60.0)));
    }

    #[test]
    fn a_thin_trend_or_no_level_and_no_limit_is_unknown() {
        let base = series(B0, &noisy(0.5, 0.02, 31));
        assert_eq!(detect(&base, &series(W0, &[0.99]), Direction::Up, up(0.9)), None);
        assert_eq!(detect(&[], &series(W0, &[0.5, 0.5, 0.99, 0.99, 0.99]), Direction::Up, None), None);
        // Without a baseline the limit alone still dates it.
        assert_eq!(detect(&[], &series(W0, &[0.5, 0.5, 0.99, 0.99, 0.99]), Direction::Up, up(0.9)), Some(Onset::At(W0 + 60.0)));
    }

    #[test]
    fn a_flat_zero_baseline_does_not_make_every_wiggle_a_change() {
        let base = series(B0, &[0.0; 31]);
        let w: Vec<f64> = (0..31).map(|i| if i % 2 == 0 { 0.0 } else { 0.002 }).collect();
        assert_eq!(detect(&base, &series(W0, &w), Direction::Up, up(0.1)), None);
    }

    fn finding_with(values: &[f64], limit_label: &str, limit: f64, value: f64) -> Finding {
        finding_over(&noisy(0.5, 0.02, 31), values, limit_label, limit, value)
    }

    /// A baseline whose last ten points are at 0.97: the problem was there before the window.
    fn held_at_its_end() -> Vec<f64> {
        let mut b = noisy(0.5, 0.02, 31);
        b[21..].fill(0.97);
        b
    }

    fn finding_over(baseline: &[f64], values: &[f64], limit_label: &str, limit: f64, value: f64) -> Finding {
        let json = serde_json::json!({
            "rule": "r", "title": "t", "severity": "warning", "score": 1.0, "scope": {}, "summary": "",
            "evidence": [
                {"signal": "context", "title": "c", "unit": "ratio", "value": 1.0, "baseline": 1.0, "threshold": "",
                 "passed": false, "query": "q", "metric": "m"},
                {"signal": "kv", "title": "KV", "unit": "ratio", "value": value, "baseline": 0.5, "threshold": limit_label,
                 "passed": true, "query": "q", "metric": "m", "limits": [{"label": limit_label, "value": limit}],
                 "series": {"step_seconds": 60, "range_seconds": 180, "query": "q",
                            "baseline": series(B0, baseline), "window": series(W0, values)}}
            ],
            "steps": [], "also_consistent": []
        });
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn apply_dates_a_finding_from_its_leading_signal_and_marks_one_present_before_the_window() {
        let mut w = vec![0.5; 31];
        w[20..].fill(0.97);
        let mut fs = vec![
            finding_with(&w, "> 90%", 0.9, 0.95),
            finding_over(&held_at_its_end(), &[0.97; 31], ">= 90%", 0.9, 0.97),
            finding_with(&[0.97; 31], ">= 90%", 0.9, 0.97),
        ];
        built(&mut fs);
        assert_eq!(fs[0].onset.map(|t| t.timestamp()), Some(W0 as i64 + 19 * 60));
        assert_eq!(fs[0].onset_signal.as_deref(), Some("kv"));
        assert_eq!((fs[1].onset, fs[1].onset_signal.as_deref()), (None, Some("kv")));
        // Away from the window's first point after a healthy baseline: it started there.
        assert_eq!((fs[2].onset.map(|t| t.timestamp()), fs[2].onset_signal.as_deref()), (Some(W0 as i64), Some("kv")));
    }

    #[test]
    fn the_leading_signal_is_the_one_that_crossed_its_limit_not_a_guard_or_a_precondition() {
        // As on the real engine's slow decode: the problem signal did not `pass` (one of its atoms
        // failed) but is past its limit; the queue guard after it held all along.
        let mut w = vec![0.5; 31];
        w[20..].fill(0.97);
        let mut f = finding_with(&w, "> 90%", 0.9, 0.95);
        let mut guard = f.evidence[1].clone();
        guard.signal = "queue_guard".into();
        guard.limits = vec![crate::report::Limit { label: "<= 300 ms".into(), value: 0.3, side: crate::report::LimitSide::AtOrBelow }];
        (guard.value, guard.baseline) = (Some(0.285), Some(0.285));
        guard.series = guard.series.map(|s| crate::report::Trend { baseline: series(B0, &[0.285; 31]), window: series(W0, &[0.285; 31]), ..s });
        f.evidence[1].passed = false;
        f.evidence.push(guard.clone());
        assert_eq!(leading(&f).map(|e| e.signal.as_str()), Some("kv"));
        // A precondition first (`> 0`, as true in the baseline) does not lead either.
        let mut pre = guard.clone();
        pre.signal = "in_use".into();
        pre.limits = vec![crate::report::Limit { label: "> 0".into(), value: 0.0, side: crate::report::LimitSide::Above }];
        (pre.value, pre.baseline) = (Some(2500.0), Some(2600.0));
        f.evidence.insert(0, pre);
        assert_eq!(leading(&f).map(|e| e.signal.as_str()), Some("kv"));
        let mut fs = vec![f.clone()];
        built(&mut fs);
        assert_eq!(fs[0].onset.map(|t| t.timestamp()), Some(W0 as i64 + 19 * 60));
        // With nothing that changed, the first past its limit: a problem the baseline had too.
        f.evidence[2].value = Some(0.5);
        assert_eq!(leading(&f).map(|e| e.signal.as_str()), Some("in_use"));
    }

    #[test]
    fn a_multiple_of_a_zero_baseline_neither_leads_nor_dates() {
        // As on the real engine's HTTP errors: 5xx stayed 0 (on its `>= 3x baseline` line of 0),
        // 4xx rose from 0 past 5%.
        let mut w = vec![0.0; 31];
        w[8..].fill(0.3);
        let mut f = finding_with(&w, ">= 3x baseline", 0.0, 0.37);
        f.evidence[1].baseline = Some(0.0);
        f.evidence[1].limits.push(crate::report::Limit { label: "> 5%".into(), value: 0.05, side: crate::report::LimitSide::Above });
        f.evidence[1].series.as_mut().unwrap().baseline = series(B0, &[0.0; 31]);
        let mut flat = f.evidence[1].clone();
        flat.signal = "flat".into();
        flat.value = Some(0.0);
        flat.series.as_mut().unwrap().window = series(W0, &[0.0; 31]);
        f.evidence.insert(1, flat);
        assert_eq!(leading(&f).map(|e| e.signal.as_str()), Some("kv"));
        let mut fs = vec![f];
        built(&mut fs);
        assert_eq!(fs[0].onset.map(|t| t.timestamp()), Some(W0 as i64 + 7 * 60));
    }

    #[test]
    fn apply_marks_a_finding_whose_leading_signal_came_back_as_over() {
        let mut w = vec![0.5; 31];
        w[10..20].fill(0.97);
        let mut fs = vec![finding_with(&w, "> 90%", 0.9, 0.95)];
        built(&mut fs);
        assert_eq!(fs[0].onset.map(|t| t.timestamp()), Some(W0 as i64 + 9 * 60));
        // Back from point 20; its trend's range is 3 minutes, which the problem left at point 17.
        assert_eq!(fs[0].ended.map(|t| t.timestamp()), Some(W0 as i64 + 17 * 60));
        // Still away at the end: no end.
        w[20..].fill(0.97);
        let mut fs = vec![finding_with(&w, "> 90%", 0.9, 0.95)];
        built(&mut fs);
        assert_eq!((fs[0].onset.is_some(), fs[0].ended), (true, None));
    }

    #[test]
    fn a_problem_there_before_the_window_is_over_once_back_within_its_lines_for_long_enough() {
        let line = [Crossed { value: 0.9, inclusive: false, baseline_past: true }];
        // Past the line for 10 points, then well back for 21 (a fifth of 31 is 7).
        let mut w = vec![0.97; 31];
        w[10..].fill(0.5);
        assert_eq!(over_before_window(&series(W0, &w), Direction::Up, &line), Some(W0 + 10.0 * 60.0));
        // Back under the line but within a tenth of it: hovering there is not over.
        w[10..].fill(0.85);
        assert_eq!(over_before_window(&series(W0, &w), Direction::Up, &line), None);
        // Back for 6 points only, or not at all: going on.
        w[10..].fill(0.97);
        w[25..].fill(0.5);
        assert_eq!(over_before_window(&series(W0, &w), Direction::Up, &line), None);
        assert_eq!(over_before_window(&series(W0, &[0.97; 31]), Direction::Up, &line), None);
        // One dip back in the run at the end breaks it at that point (raw and smoothed alike).
        w[20..].fill(0.5);
        w[27] = 0.97;
        assert_eq!(over_before_window(&series(W0, &w), Direction::Up, &line), None);
        // Never past a line in the window: nothing was there to end.
        assert_eq!(over_before_window(&series(W0, &[0.5; 31]), Direction::Up, &line), None);
        // No line: nothing says where the problem ends.
        let mut w = vec![0.97; 31];
        w[10..].fill(0.5);
        assert_eq!(over_before_window(&series(W0, &w), Direction::Up, &[]), None);
    }

    #[test]
    fn over_before_the_window_means_back_within_every_line_going_the_problems_way() {
        // TTFT's `>= 2x baseline` (4.87 s) and `> 3 s`: back under the first but still over 3 s is
        // still the problem.
        let lines = [Crossed { value: 4.87, inclusive: true, baseline_past: false }, Crossed { value: 3.0, inclusive: false, baseline_past: false }];
        let mut w = vec![19.0; 31];
        w[10..].fill(3.5);
        assert_eq!(over_before_window(&series(W0, &w), Direction::Up, &lines), None);
        w[10..].fill(0.04);
        assert_eq!(over_before_window(&series(W0, &w), Direction::Up, &lines), Some(W0 + 600.0));
        // Going down (a hit rate under 50%): back means a tenth above the line.
        let line = [Crossed { value: 0.5, inclusive: false, baseline_past: false }];
        let mut w = vec![0.1; 31];
        w[10..].fill(0.52);
        assert_eq!(over_before_window(&series(W0, &w), Direction::Down, &line), None);
        w[10..].fill(0.8);
        assert_eq!(over_before_window(&series(W0, &w), Direction::Down, &line), Some(W0 + 600.0));
    }

    #[test]
    fn apply_marks_a_finding_present_before_the_window_as_over_when_its_signal_came_back() {
        // As on the real engine at 20:55 in a ten-minute window: the saturation of the KV-pressure
        // phase fills the window's first minutes, then TTFT is back under its lines to the end.
        let mut w = vec![0.97; 31];
        w[10..].fill(0.5);
        let mut fs = vec![finding_over(&held_at_its_end(), &w, "> 90%", 0.9, 0.95)];
        built(&mut fs);
        assert_eq!((fs[0].onset, fs[0].onset_signal.as_deref()), (None, Some("kv")));
        // Back from point 10, less the trend's 3-minute range.
        assert_eq!(fs[0].ended.map(|t| t.timestamp()), Some(W0 as i64 + 7 * 60));
        // Still past at the end: going on.
        let mut fs = vec![finding_over(&held_at_its_end(), &[0.97; 31], "> 90%", 0.9, 0.97)];
        built(&mut fs);
        assert_eq!((fs[0].onset_signal.as_deref(), fs[0].ended), (Some("kv"), None));
    }

    #[test]
    fn a_finding_without_a_trend_has_no_onset_and_no_signal() {
        let mut f = finding_with(&[0.97; 31], "> 90%", 0.9, 0.97);
        f.evidence[1].series = None;
        let mut fs = vec![f];
        built(&mut fs);
        assert_eq!((fs[0].onset, fs[0].onset_signal.as_deref()), (None, None));
    }
}
