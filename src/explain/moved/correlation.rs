//! What else moved's correlations: the runbooks' pairs of trends (a cause and the effect it would
//! raise, from the rule files' `[[correlation]]`) that moved together on a finding's scope, as
//! evidence for the finding or against it.

use std::collections::{BTreeMap, BTreeSet};

use super::{base_scope, median, Points, Standing};
use crate::report::{Correlation, Finding, Scope, Severity};
use crate::rules::CorrelationDef;

/// The coefficient from which two trends count as moving together.
pub const CORRELATED: f64 = 0.7;
/// The fewest points both trends must share for a coefficient to be said at all: six points make
/// a coefficient of 0.7 out of noise all too often.
pub const MIN_CORRELATION_POINTS: usize = 10;

/// The rise against its baseline's median under which an effect did not move: a coefficient
/// over an effect that stayed flat (P95 ITL at 1.004x its baseline) explains nothing.
const EFFECT_ROSE: f64 = 1.1;

/// Whether an effect's window median rose less than [`EFFECT_ROSE`] against its baseline's.
fn effect_flat(baseline: &[(f64, f64)], window: &[(f64, f64)]) -> bool {
    match (median(baseline.iter().map(|p| p.1)), median(window.iter().map(|p| p.1))) {
        (Some(b), Some(w)) => w < b * EFFECT_ROSE,
        _ => true,
    }
}

/// Whether a cause's trend sat at its healthy level over the window: its window median at or under
/// its pair's `healthy_at_or_below`, or no higher than its baseline's median.
fn cause_healthy(pair: &CorrelationDef, baseline: &[(f64, f64)], window: &[(f64, f64)]) -> bool {
    let (Some(b), Some(w)) = (median(baseline.iter().map(|p| p.1)), median(window.iter().map(|p| p.1))) else { return true };
    pair.healthy_at_or_below.is_some_and(|level| w <= level) || w <= b
}

/// Whether `f` holds `signal` only on the healthy side of its lines (every limit a ceiling: the
/// rule needs it not to have risen), rather than claiming its rise.
fn holds_below(f: &Finding, signal: &str) -> bool {
    f.evidence.iter().find(|e| e.signal == signal).is_some_and(|e| !e.limits.is_empty() && e.limits.iter().all(|l| !l.side.is_above()))
}

/// Whether another signal that `signal`'s condition accepts in its place (an `or` with it) met
/// its own part.
fn met_otherwise(f: &Finding, signal: &str) -> bool {
    let Some(e) = f.evidence.iter().find(|e| e.signal == signal) else { return false };
    e.threshold.alternatives().any(|o| f.evidence.iter().any(|x| &x.signal == o && x.passed))
}

/// Pearson's coefficient over the points two trends share (by time), with at least 6 of them (the
/// correlations say one only over [`MIN_CORRELATION_POINTS`]).
pub fn pearson(a: &[(f64, f64)], b: &[(f64, f64)]) -> Option<(f64, usize)> {
    let by_t: BTreeMap<i64, f64> = b.iter().map(|(t, v)| (t.round() as i64, *v)).collect();
    let pairs: Vec<(f64, f64)> = a.iter().filter_map(|(t, x)| by_t.get(&(t.round() as i64)).map(|y| (*x, *y))).collect();
    let n = pairs.len();
    if n < 6 {
        return None;
    }
    let mx = pairs.iter().map(|p| p.0).sum::<f64>() / n as f64;
    let my = pairs.iter().map(|p| p.1).sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (x, y) in &pairs {
        sxy += (x - mx) * (y - my);
        sxx += (x - mx).powi(2);
        syy += (y - my).powi(2);
    }
    if sxx <= 0.0 || syy <= 0.0 {
        return None;
    }
    let r = sxy / (sxx * syy).sqrt();
    r.is_finite().then_some((r, n))
}

/// The runbooks' correlations as evidence: for each warning or critical finding, each pair whose
/// trends over the window (baseline and window together, so a step between them counts) move
/// together on its scope, when the finding's evidence holds either signal of the pair. It supports
/// the finding when the finding reads the pair's cause; when the finding reads only the effect, it
/// points elsewhere and says so.
pub fn correlations(points: &BTreeMap<(String, Scope), Points>, findings: &[Standing], pairs: &[CorrelationDef], group_by: &[String]) -> Vec<Vec<Correlation>> {
    findings.iter().map(|s| if s.severity >= Severity::Warning { correlated(points, s.finding, pairs, group_by) } else { Vec::new() }).collect()
}

/// The correlations of one warning or critical finding, strongest first.
fn correlated(points: &BTreeMap<(String, Scope), Points>, f: &Finding, pairs: &[CorrelationDef], group_by: &[String]) -> Vec<Correlation> {
    let mut out = Vec::new();
    let scope = base_scope(&f.scope, group_by);
    let read: BTreeSet<String> = f.evidence.iter().map(|e| e.signal.clone()).collect();
    for pair in pairs {
        let (cause, effect) = (&pair.cause, &pair.effect);
        if !read.contains(cause) && !read.contains(effect) {
            continue;
        }
        let (Some((cb, cw)), Some((eb, ew))) = (points.get(&(cause.clone(), scope.clone())), points.get(&(effect.clone(), scope.clone()))) else {
            continue;
        };
        let joined = |b: &[(f64, f64)], w: &[(f64, f64)]| b.iter().chain(w).copied().collect::<Vec<_>>();
        let Some((r, n)) = pearson(&joined(cb, cw), &joined(eb, ew)) else { continue };
        if r < CORRELATED || n < MIN_CORRELATION_POINTS || cause_healthy(pair, cb, cw) || effect_flat(eb, ew) {
            continue;
        }
        let supports = read.contains(cause);
        // A finding that holds the effect below its lines (overload's "ITL did not rise 1.5x")
        // does not claim it, and one whose condition on it is met by another signal as well (KV
        // pressure's TTFT, queue time or ITL) stands on that one: what drives the effect is no
        // reason to doubt the finding.
        if !supports && (holds_below(f, effect) || met_otherwise(f, effect)) {
            continue;
        }
        let c = Correlation { cause: cause.clone(), effect: effect.clone(), coefficient: r, points: n, supports, text: String::new() };
        out.push(c.worded(&f.rule, &pair.meaning));
    }
    out.sort_by(|a, b| b.coefficient.total_cmp(&a.coefficient));
    out
}
