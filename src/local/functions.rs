//! PromQL functions, reimplemented from Prometheus 2.42's documented and observed behaviour.
//!
//! As in Prometheus' engine, a function receives its arguments already evaluated (see
//! [`super::eval`]) and never evaluates anything itself: it maps values to a value.
//!
//! The numerics that decide diagnoses are the ones that must match exactly:
//! - `rate`/`increase`/`delta` extrapolate like `extrapolatedRate`: the counter-reset correction, the
//!   extrapolation to each window edge when the first/last sample is within 1.1 average intervals
//!   of it (half an interval otherwise), and for counters no extrapolation below zero.
//! - `histogram_quantile` interpolates linearly inside the bucket holding the rank, after sorting
//!   buckets, merging equal bounds and forcing the counts monotonic; it is NaN without a `+Inf`
//!   bucket or without observations, and the rank falling into `+Inf` gives the second-highest bound.
//! - Every range function except `last_over_time` drops the metric name.

use super::math::{kahan_inc, kahan_sum, quantile};
use super::value::{ensure_unique, EvalError, RangeValue, Sample, Series, Value};
use crate::prom::{is_label_name, Labels};

/// Functions local evaluation implements (any other Prometheus function is refused as "not
/// supported by local evaluation" before evaluation starts).
pub const IMPLEMENTED: &[&str] = &[
    "rate",
    "increase",
    "irate",
    "delta",
    "idelta",
    "deriv",
    "resets",
    "changes",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "sum_over_time",
    "count_over_time",
    "last_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "present_over_time",
    "absent_over_time",
    "quantile_over_time",
    "predict_linear",
    "histogram_quantile",
    "clamp",
    "clamp_min",
    "clamp_max",
    "abs",
    "ceil",
    "floor",
    "exp",
    "ln",
    "log2",
    "log10",
    "sqrt",
    "sgn",
    "absent",
    "sort",
    "sort_desc",
    "round",
    "time",
    "timestamp",
    "vector",
    "scalar",
    "label_replace",
    "label_join",
];

/// What a function may need besides its arguments' values.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The evaluation time (unix milliseconds).
    pub t: i64,
    /// The labels `absent()`/`absent_over_time()` give their result: the argument selector's
    /// equality matchers. The evaluator derives them from the syntax, as Prometheus' engine does.
    pub absent_labels: Labels,
}

/// The evaluated arguments of one call, taken by position and type.
struct Args<'f> {
    func: &'f str,
    vals: Vec<Option<Value>>,
}

impl Args<'_> {
    fn take(&mut self, i: usize) -> Result<Value, EvalError> {
        self.vals.get_mut(i).and_then(Option::take).ok_or_else(|| EvalError::BadData(format!("missing argument {} in call to {}", i + 1, self.func)))
    }

    fn wrong(&self, i: usize, want: &str, got: &Value) -> EvalError {
        EvalError::BadData(format!("expected type {want} as argument {} in call to function {:?}, got {}", i + 1, self.func, got.type_name()))
    }

    fn scalar(&mut self, i: usize) -> Result<f64, EvalError> {
        match self.take(i)? {
            Value::Scalar(v) => Ok(v),
            other => Err(self.wrong(i, "scalar", &other)),
        }
    }

    fn string(&mut self, i: usize) -> Result<String, EvalError> {
        match self.take(i)? {
            Value::Str(s) => Ok(s),
            other => Err(self.wrong(i, "string", &other)),
        }
    }

    fn vector(&mut self, i: usize) -> Result<Vec<Sample>, EvalError> {
        match self.take(i)? {
            Value::Vector(v) => Ok(v),
            other => Err(self.wrong(i, "instant vector", &other)),
        }
    }

    fn range(&mut self, i: usize) -> Result<RangeValue, EvalError> {
        match self.take(i)? {
            Value::Matrix(m) => Ok(m),
            other => Err(self.wrong(i, "range vector", &other)),
        }
    }
}

/// Apply function `func` to its evaluated arguments.
pub fn call(func: &str, args: Vec<Value>, ctx: &Context) -> Result<Value, EvalError> {
    if !IMPLEMENTED.contains(&func) {
        return Err(EvalError::Unsupported(format!("function {func}()")));
    }
    let n = args.len();
    let mut a = Args { func, vals: args.into_iter().map(Some).collect() };
    let t = ctx.t;
    let out = match func {
        "time" => return Ok(Value::Scalar(t as f64 / 1000.0)),
        // Of a computed vector, the evaluation time (a selector's own sample times are read by the
        // evaluator, which has them: see `Evaluator::call`).
        "timestamp" => a
            .vector(0)?
            .into_iter()
            .map(|mut s| {
                s.labels.remove("__name__");
                Sample { labels: s.labels, v: t as f64 / 1000.0 }
            })
            .collect(),
        "vector" => vec![Sample { labels: Labels::new(), v: a.scalar(0)? }],
        "scalar" => {
            let v = a.vector(0)?;
            return Ok(Value::Scalar(if v.len() == 1 { v[0].v } else { f64::NAN }));
        }
        "sort" | "sort_desc" => return Ok(Value::Vector(sort(a.vector(0)?, func == "sort_desc"))),
        "absent" => absent(a.vector(0)?.is_empty(), ctx),
        "absent_over_time" => absent(a.range(0)?.series.is_empty(), ctx),
        "quantile_over_time" => {
            let q = a.scalar(0)?;
            over_range(&a.range(1)?, t, false, |pts, _| {
                let mut vals: Vec<f64> = pts.iter().map(|p| p.1).collect();
                Some(quantile(q, &mut vals))
            })
        }
        "predict_linear" => {
            let m = a.range(0)?;
            let dur = a.scalar(1)?;
            over_range(&m, t, false, |pts, _| {
                (pts.len() >= 2).then(|| {
                    let (slope, intercept) = linear_regression(pts, t);
                    slope * dur + intercept
                })
            })
        }
        "histogram_quantile" => {
            let q = a.scalar(0)?;
            histogram_quantile(q, a.vector(1)?)
        }
        "clamp" => {
            let (v, lo, hi) = (a.vector(0)?, a.scalar(1)?, a.scalar(2)?);
            if hi < lo {
                vec![]
            } else {
                map_values(v, |x| x.max(lo).min(hi))
            }
        }
        "clamp_min" => {
            let (v, lo) = (a.vector(0)?, a.scalar(1)?);
            map_values(v, |x| x.max(lo))
        }
        "clamp_max" => {
            let (v, hi) = (a.vector(0)?, a.scalar(1)?);
            map_values(v, |x| x.min(hi))
        }
        "round" => {
            let v = a.vector(0)?;
            let to = if n > 1 { a.scalar(1)? } else { 1.0 };
            let inv = 1.0 / to;
            map_values(v, |x| (x * inv + 0.5).floor() / inv)
        }
        "label_replace" => {
            let v = a.vector(0)?;
            let (dst, repl, src, re) = (a.string(1)?, a.string(2)?, a.string(3)?, a.string(4)?);
            label_replace(v, &dst, &repl, &src, &re)?
        }
        "label_join" => {
            let v = a.vector(0)?;
            let (dst, sep) = (a.string(1)?, a.string(2)?);
            let srcs: Vec<String> = (3..n).map(|i| a.string(i)).collect::<Result<_, _>>()?;
            label_join(v, &dst, &sep, &srcs)?
        }
        _ => match elementwise(func) {
            Some(f) => map_values(a.vector(0)?, f),
            None => range_function(func, &a.range(0)?, t).ok_or_else(|| EvalError::Unsupported(format!("function {func}()")))?,
        },
    };
    ensure_unique(&out)?;
    Ok(Value::Vector(out))
}

/// Functions of one sample value (the metric name is dropped).
fn elementwise(func: &str) -> Option<fn(f64) -> f64> {
    Some(match func {
        "abs" => f64::abs,
        "ceil" => f64::ceil,
        "floor" => f64::floor,
        "exp" => f64::exp,
        "ln" => f64::ln,
        "log2" => f64::log2,
        "log10" => f64::log10,
        "sqrt" => f64::sqrt,
        "sgn" => |v: f64| {
            if v > 0.0 {
                1.0
            } else if v < 0.0 {
                -1.0
            } else {
                v
            }
        },
        _ => return None,
    })
}

/// Functions of a range vector alone; `None` for a name that is not one of them.
fn range_function(func: &str, m: &RangeValue, t: i64) -> Option<Vec<Sample>> {
    Some(match func {
        "rate" | "increase" | "delta" => {
            let (counter, rate) = match func {
                "rate" => (true, true),
                "increase" => (true, false),
                _ => (false, false),
            };
            over_range(m, t, false, |pts, range| extrapolated_rate(pts, range, counter, rate))
        }
        "irate" | "idelta" => over_range(m, t, false, |pts, _| instant_value(pts, func == "irate")),
        "deriv" => over_range(m, t, false, |pts, _| (pts.len() >= 2).then(|| linear_regression(pts, pts[0].0).0)),
        "resets" => over_range(m, t, false, |pts, _| Some(pts.windows(2).filter(|w| w[1].1 < w[0].1).count() as f64)),
        "changes" => {
            over_range(m, t, false, |pts, _| Some(pts.windows(2).filter(|w| w[1].1 != w[0].1 && !(w[1].1.is_nan() && w[0].1.is_nan())).count() as f64))
        }
        "avg_over_time" => over_range(m, t, false, |pts, _| Some(avg(pts.iter().map(|p| p.1)))),
        "sum_over_time" => over_range(m, t, false, |pts, _| Some(kahan_sum(pts.iter().map(|p| p.1)))),
        "count_over_time" => over_range(m, t, false, |pts, _| Some(pts.len() as f64)),
        "present_over_time" => over_range(m, t, false, |_, _| Some(1.0)),
        "last_over_time" => over_range(m, t, true, |pts, _| pts.last().map(|p| p.1)),
        "min_over_time" => over_range(m, t, false, |pts, _| Some(pts.iter().skip(1).fold(pts[0].1, |m, p| if p.1 < m || m.is_nan() { p.1 } else { m }))),
        "max_over_time" => over_range(m, t, false, |pts, _| Some(pts.iter().skip(1).fold(pts[0].1, |m, p| if p.1 > m || m.is_nan() { p.1 } else { m }))),
        "stddev_over_time" => over_range(m, t, false, |pts, _| Some(variance(pts).sqrt())),
        "stdvar_over_time" => over_range(m, t, false, |pts, _| Some(variance(pts))),
        _ => return None,
    })
}

fn absent(empty: bool, ctx: &Context) -> Vec<Sample> {
    if empty {
        vec![Sample { labels: ctx.absent_labels.clone(), v: 1.0 }]
    } else {
        vec![]
    }
}

fn sort(mut v: Vec<Sample>, descending: bool) -> Vec<Sample> {
    v.sort_by(|a, b| {
        let o = a.v.partial_cmp(&b.v).unwrap_or_else(|| a.v.is_nan().cmp(&b.v.is_nan()).reverse());
        if descending {
            o.reverse()
        } else {
            o
        }
    });
    v
}

fn label_join(v: Vec<Sample>, dst: &str, sep: &str, srcs: &[String]) -> Result<Vec<Sample>, EvalError> {
    if !is_label_name(dst) {
        return Err(EvalError::BadData(format!("invalid destination label name in label_join(): {dst}")));
    }
    Ok(v.into_iter()
        .map(|mut s| {
            let parts: Vec<String> = srcs.iter().map(|l| s.labels.get(l).cloned().unwrap_or_default()).collect();
            let joined = parts.join(sep);
            if joined.is_empty() {
                s.labels.remove(dst);
            } else {
                s.labels.insert(dst.to_string(), joined);
            }
            s
        })
        .collect())
}

/// Apply a function to every series of a range vector; series for which it returns `None` (too few
/// samples) are dropped, as are series with no samples at all.
fn over_range(m: &RangeValue, t: i64, keep_name: bool, f: impl Fn(&[(i64, f64)], (i64, i64, i64)) -> Option<f64>) -> Vec<Sample> {
    let range_end = t - m.offset_ms;
    let range_start = range_end - m.range_ms;
    let mut out = Vec::new();
    for Series { labels, points } in &m.series {
        if points.is_empty() {
            continue;
        }
        if let Some(v) = f(points, (range_start, range_end, m.range_ms)) {
            let mut labels = labels.clone();
            if !keep_name {
                labels.remove("__name__");
            }
            out.push(Sample { labels, v });
        }
    }
    out
}

/// `rate`, `increase` and `delta`. `window` is (range start, range end, range) in milliseconds.
pub fn extrapolated_rate(pts: &[(i64, f64)], window: (i64, i64, i64), counter: bool, per_second: bool) -> Option<f64> {
    if pts.len() < 2 {
        return None;
    }
    let (range_start, range_end, range_ms) = window;
    let (first_t, first_v) = pts[0];
    let (last_t, last_v) = pts[pts.len() - 1];
    let mut result = last_v - first_v;
    if counter {
        for w in pts.windows(2) {
            if w[1].1 < w[0].1 {
                result += w[0].1;
            }
        }
    }
    let mut to_start = (first_t - range_start) as f64 / 1000.0;
    let to_end = (range_end - last_t) as f64 / 1000.0;
    let sampled = (last_t - first_t) as f64 / 1000.0;
    let avg_step = sampled / (pts.len() - 1) as f64;
    if counter && result > 0.0 && first_v >= 0.0 {
        let to_zero = sampled * (first_v / result);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    let threshold = avg_step * 1.1;
    let mut extrapolate_to = sampled;
    extrapolate_to += if to_start < threshold { to_start } else { avg_step / 2.0 };
    extrapolate_to += if to_end < threshold { to_end } else { avg_step / 2.0 };
    let mut factor = extrapolate_to / sampled;
    if per_second {
        factor /= range_ms as f64 / 1000.0;
    }
    Some(result * factor)
}

/// `irate` (per second, counter-aware) and `idelta` from the last two samples.
fn instant_value(pts: &[(i64, f64)], is_rate: bool) -> Option<f64> {
    if pts.len() < 2 {
        return None;
    }
    let (prev_t, prev_v) = pts[pts.len() - 2];
    let (last_t, last_v) = pts[pts.len() - 1];
    let mut result = if is_rate && last_v < prev_v { last_v } else { last_v - prev_v };
    let interval = last_t - prev_t;
    if interval == 0 {
        return None;
    }
    if is_rate {
        result /= interval as f64 / 1000.0;
    }
    Some(result)
}

/// Incremental mean that survives infinities the way Prometheus' does.
fn avg(vals: impl Iterator<Item = f64>) -> f64 {
    let (mut mean, mut count, mut c) = (0.0f64, 0.0f64, 0.0f64);
    for v in vals {
        count += 1.0;
        if mean.is_infinite() {
            if v.is_infinite() && (mean > 0.0) == (v > 0.0) {
                continue;
            }
            if !v.is_infinite() && !v.is_nan() {
                continue;
            }
        }
        (mean, c) = kahan_inc(v / count - mean / count, mean, c);
    }
    if mean.is_infinite() {
        mean
    } else {
        mean + c
    }
}

/// Population variance (Welford, compensated).
fn variance(pts: &[(i64, f64)]) -> f64 {
    let (mut count, mut mean, mut c_mean, mut aux, mut c_aux) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (_, v) in pts {
        count += 1.0;
        let delta = v - (mean + c_mean);
        (mean, c_mean) = kahan_inc(delta / count, mean, c_mean);
        (aux, c_aux) = kahan_inc(delta * (v - (mean + c_mean)), aux, c_aux);
    }
    (aux + c_aux) / count
}

/// Least-squares slope and the intercept at `intercept_t` (x in seconds from it).
fn linear_regression(pts: &[(i64, f64)], intercept_t: i64) -> (f64, f64) {
    let init_y = pts[0].1;
    let const_y = pts.iter().all(|p| p.1 == init_y);
    if const_y {
        return if init_y.is_infinite() { (f64::NAN, f64::NAN) } else { (0.0, init_y) };
    }
    let (mut n, mut sx, mut cx, mut sy, mut cy, mut sxy, mut cxy, mut sx2, mut cx2) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for (t, v) in pts {
        n += 1.0;
        let x = (t - intercept_t) as f64 / 1000.0;
        (sx, cx) = kahan_inc(x, sx, cx);
        (sy, cy) = kahan_inc(*v, sy, cy);
        (sxy, cxy) = kahan_inc(x * v, sxy, cxy);
        (sx2, cx2) = kahan_inc(x * x, sx2, cx2);
    }
    let (sx, sy, sxy, sx2) = (sx + cx, sy + cy, sxy + cxy, sx2 + cx2);
    let cov = sxy - sx * sy / n;
    let var = sx2 - sx * sx / n;
    let slope = cov / var;
    (slope, sy / n - slope * sx / n)
}

/// `histogram_quantile` over classic buckets: groups by every label but `le`; the result has neither
/// `le` nor the metric name. Samples without a parseable `le` are ignored, as in Prometheus.
fn histogram_quantile(q: f64, input: Vec<Sample>) -> Vec<Sample> {
    let mut groups: std::collections::BTreeMap<Labels, Vec<(f64, f64)>> = std::collections::BTreeMap::new();
    for s in input {
        let Some(le) = s.labels.get("le").and_then(|l| parse_go_float(l)) else { continue };
        let mut key = s.labels;
        key.remove("le");
        groups.entry(key).or_default().push((le, s.v));
    }
    groups
        .into_iter()
        .map(|(mut labels, mut buckets)| {
            labels.remove("__name__");
            Sample { labels, v: bucket_quantile(q, &mut buckets) }
        })
        .collect()
}

/// Quantile from cumulative (upper bound, count) buckets.
pub fn bucket_quantile(q: f64, buckets: &mut [(f64, f64)]) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    // A NaN bound (`le="NaN"`, which a server or a scraped file can send) bounds nothing: it is
    // left out. The total order puts NaNs at the ends, so what is left is one run in the middle
    // (a comparator that is not a total order can panic the sort).
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = buckets.iter().position(|b| !b.0.is_nan()).unwrap_or(buckets.len());
    let last = buckets.iter().rposition(|b| !b.0.is_nan()).map_or(first, |i| i + 1);
    let buckets = &buckets[first..last];
    if buckets.is_empty() {
        return f64::NAN;
    }
    if buckets[buckets.len() - 1].0 != f64::INFINITY {
        return f64::NAN;
    }
    // Merge buckets with the same bound (e.g. "1" and "1.0").
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(buckets.len());
    for &(ub, c) in buckets.iter() {
        match merged.last_mut() {
            Some(last) if last.0 == ub => last.1 += c,
            _ => merged.push((ub, c)),
        }
    }
    // Counts must not decrease with the bound (scrapes and rate() can break that slightly).
    let mut max = f64::NEG_INFINITY;
    for b in merged.iter_mut() {
        if b.1 > max {
            max = b.1;
        } else if b.1 < max {
            b.1 = max;
        }
    }
    if merged.len() < 2 {
        return f64::NAN;
    }
    let observations = merged[merged.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let n = merged.len() - 1;
    let b = merged[..n].partition_point(|bk| bk.1 < rank);
    if b == n {
        return merged[n - 1].0;
    }
    if b == 0 && merged[0].0 <= 0.0 {
        return merged[0].0;
    }
    let (mut start, end, mut count) = (0.0, merged[b].0, merged[b].1);
    if b > 0 {
        start = merged[b - 1].0;
        count -= merged[b - 1].1;
        rank -= merged[b - 1].1;
    }
    start + (end - start) * (rank / count)
}

/// Go's `strconv.ParseFloat` for the forms that appear in `le` labels.
pub fn parse_go_float(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let body = lower.strip_prefix(['+', '-']).unwrap_or(&lower);
    let neg = lower.starts_with('-');
    match body {
        "inf" | "infinity" => return Some(if neg { f64::NEG_INFINITY } else { f64::INFINITY }),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if body.is_empty() || !body.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | '+' | '-')) {
        return None;
    }
    s.parse::<f64>().ok()
}

fn map_values(v: Vec<Sample>, f: impl Fn(f64) -> f64) -> Vec<Sample> {
    v.into_iter()
        .map(|mut s| {
            s.labels.remove("__name__");
            s.v = f(s.v);
            s
        })
        .collect()
}

fn label_replace(v: Vec<Sample>, dst: &str, repl: &str, src: &str, re: &str) -> Result<Vec<Sample>, EvalError> {
    let regex =
        regex::Regex::new(&format!("^(?:{re})$")).map_err(|e| EvalError::BadData(format!("invalid regular expression in label_replace(): {re}: {e}")))?;
    if !is_label_name(dst) {
        return Err(EvalError::BadData(format!("invalid destination label name in label_replace(): {dst}")));
    }
    Ok(v.into_iter()
        .map(|mut s| {
            let value = s.labels.get(src).cloned().unwrap_or_default();
            if let Some(caps) = regex.captures(&value) {
                let mut out = String::new();
                caps.expand(repl, &mut out);
                if out.is_empty() {
                    s.labels.remove(dst);
                } else {
                    s.labels.insert(dst.to_string(), out);
                }
            }
            s
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: (i64, i64, i64) = (0, 60_000, 60_000);

    #[test]
    fn rate_extrapolates_to_the_window_edges_when_samples_are_close_to_them() {
        // samples every 15s from 5s to 50s: 5s from the start and 10s from the end, both < 1.1*15s
        let pts: Vec<(i64, f64)> = (0..4).map(|i| (5_000 + i * 15_000, 100.0 + 15.0 * i as f64)).collect();
        // increase 45 over 45s sampled, extrapolated to 60s → 60; per second over 60s → 1
        let r = extrapolated_rate(&pts, W, true, true).unwrap();
        assert!((r - 1.0).abs() < 1e-12, "{r}");
    }

    #[test]
    fn rate_does_not_extrapolate_a_counter_below_zero() {
        // the counter starts at 3 with slope 1/s: extrapolating 5s back would cross zero at 3s before
        let pts = vec![(5_000, 3.0), (20_000, 18.0), (35_000, 33.0), (50_000, 48.0)];
        let inc = extrapolated_rate(&pts, W, true, false).unwrap();
        // sampled 45s, to_start capped at 3s (zero point), to_end 10s → 45 * 58/45 = 58
        assert!((inc - 58.0).abs() < 1e-9, "{inc}");
    }

    #[test]
    fn rate_adds_the_value_before_a_counter_reset() {
        let pts = vec![(0, 10.0), (15_000, 20.0), (30_000, 5.0), (45_000, 15.0), (60_000, 25.0)];
        let inc = extrapolated_rate(&pts, W, true, false).unwrap();
        // 25 - 10 + 20 = 35, no extrapolation needed (samples on both edges)
        assert!((inc - 35.0).abs() < 1e-9, "{inc}");
    }

    #[test]
    fn rate_needs_two_samples() {
        assert_eq!(extrapolated_rate(&[(0, 1.0)], W, true, true), None);
    }

    #[test]
    fn far_edges_extrapolate_by_half_an_interval_only() {
        // samples 30s..45s in a 60s window: 30s to the start (> 1.1*15s), 15s to the end (< 16.5s)
        let pts = vec![(30_000, 10.0), (45_000, 20.0)];
        let d = extrapolated_rate(&pts, W, false, false).unwrap();
        // sampled 15, + 7.5 at the start + 15 at the end = 37.5 → 10 * 37.5/15 = 25
        assert!((d - 25.0).abs() < 1e-9, "{d}");
    }

    #[test]
    fn histogram_quantile_interpolates_inside_the_bucket() {
        let mut b = [(0.1, 10.0), (0.5, 60.0), (1.0, 100.0), (f64::INFINITY, 100.0)];
        // rank 95 falls in (0.5, 1]: 0.5 + 0.5 * (35/40)
        let v = bucket_quantile(0.95, &mut b);
        assert!((v - 0.9375).abs() < 1e-12, "{v}");
    }

    #[test]
    fn histogram_quantile_edge_cases_match_prometheus() {
        // no +Inf bucket
        assert!(bucket_quantile(0.5, &mut [(1.0, 1.0), (2.0, 2.0)]).is_nan());
        // no observations
        assert!(bucket_quantile(0.5, &mut [(1.0, 0.0), (f64::INFINITY, 0.0)]).is_nan());
        // rank in the +Inf bucket: the highest finite bound
        assert_eq!(bucket_quantile(0.99, &mut [(1.0, 1.0), (2.0, 2.0), (f64::INFINITY, 100.0)]), 2.0);
        // q out of range
        assert_eq!(bucket_quantile(-1.0, &mut [(1.0, 1.0), (f64::INFINITY, 1.0)]), f64::NEG_INFINITY);
        assert_eq!(bucket_quantile(2.0, &mut [(1.0, 1.0), (f64::INFINITY, 1.0)]), f64::INFINITY);
        // a first bucket with a non-positive bound returns that bound
        assert_eq!(bucket_quantile(0.1, &mut [(-1.0, 5.0), (f64::INFINITY, 10.0)]), -1.0);
        // a non-monotonic bucket is raised to the envelope
        let v = bucket_quantile(0.5, &mut [(1.0, 10.0), (2.0, 8.0), (4.0, 20.0), (f64::INFINITY, 20.0)]);
        assert!((v - 1.0).abs() < 1e-12, "{v}");
        // unsorted input, duplicate bounds merged
        let v = bucket_quantile(0.5, &mut [(f64::INFINITY, 4.0), (1.0, 1.0), (1.0, 1.0)]);
        assert_eq!(v, 1.0);
    }

    #[test]
    fn buckets_bounded_by_nan_are_left_out_and_do_not_panic_the_sort() {
        // Over 20 buckets, a comparator that is not a total order panics the standard sort; a
        // server or a scraped file can send le="NaN" (parse_go_float takes it) in any spelling.
        let finite: Vec<(f64, f64)> = (1..=41).map(|i| (i as f64, i as f64)).chain([(f64::INFINITY, 41.0)]).collect();
        let clean = bucket_quantile(0.5, &mut finite.clone());
        let mut dirty = finite.clone();
        for (i, nan) in [f64::NAN, -f64::NAN, f64::NAN, -f64::NAN, f64::NAN, f64::NAN, -f64::NAN, f64::NAN].into_iter().enumerate() {
            dirty.insert(i * 5, (nan, 7.0));
        }
        assert_eq!(bucket_quantile(0.5, &mut dirty), clean);
        // Nothing but NaN bounds: no quantile.
        assert!(bucket_quantile(0.5, &mut vec![(f64::NAN, 1.0); 30]).is_nan());
    }

    #[test]
    fn le_labels_parse_like_go() {
        assert_eq!(parse_go_float("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_go_float("0.005"), Some(0.005));
        assert_eq!(parse_go_float("1e3"), Some(1000.0));
        assert_eq!(parse_go_float("abc"), None);
        assert_eq!(parse_go_float(""), None);
    }

    #[test]
    fn a_function_receives_values_and_what_absent_needs_from_the_syntax() {
        let ctx = Context { t: 5_000, absent_labels: [("a".to_string(), "b".to_string())].into_iter().collect() };
        let Value::Vector(v) = call("absent", vec![Value::Vector(vec![])], &ctx).unwrap() else { panic!() };
        assert_eq!(v, vec![Sample { labels: ctx.absent_labels.clone(), v: 1.0 }]);
        assert!(matches!(call("time", vec![], &ctx), Ok(Value::Scalar(t)) if t == 5.0));
        let sample = Sample { labels: [("__name__".to_string(), "x".to_string())].into_iter().collect(), v: -2.0 };
        let Value::Vector(v) = call("abs", vec![Value::Vector(vec![sample])], &ctx).unwrap() else { panic!() };
        assert_eq!(v, vec![Sample { labels: Labels::new(), v: 2.0 }]);
        assert!(matches!(call("hour", vec![], &ctx), Err(EvalError::Unsupported(_))));
        assert!(matches!(call("abs", vec![Value::Scalar(1.0)], &ctx), Err(EvalError::BadData(_))));
    }

    #[test]
    fn label_replace_expands_groups_and_deletes_on_empty() {
        let s = vec![Sample { labels: [("a".to_string(), "foo-bar".to_string())].into_iter().collect(), v: 1.0 }];
        let out = label_replace(s.clone(), "b", "$2", "a", "(.*)-(.*)").unwrap();
        assert_eq!(out[0].labels.get("b").map(String::as_str), Some("bar"));
        let out = label_replace(s.clone(), "a", "", "a", ".*").unwrap();
        assert!(!out[0].labels.contains_key("a"));
        let out = label_replace(s, "b", "x", "a", "nomatch").unwrap();
        assert!(!out[0].labels.contains_key("b"));
    }
}
