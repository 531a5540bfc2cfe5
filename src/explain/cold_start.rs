//! Stage: cold start. A replica that (re)started is often slow for its first minutes (compilation,
//! CUDA-graph capture, empty prefix and kernel caches): that is a cold start tied to the start,
//! not a regression, as long as the replica is then as fast as its peers. A slowdown that outlasts
//! [`THRESHOLD`] (`cold_start_warm_up`, 10 minutes) still is a regression, tied to the start.
//!
//! Reads the per-replica mean latencies that the change events' second round fetched for the
//! models where a replica started ([`crate::events::replica_latency`]): no query of its own.
//!
//! For each replica of a restart, replica-added, rollout, configuration or version change: at every
//! point after the start, it is *slow* when its mean time to first token or inter-token latency is
//! at least `replica_outlier_high` times its peers' median and above it by `replica_ttft_gap` or
//! `replica_itl_gap` (the bars a replica comparison uses). Its peers are the model's replicas that did
//! not start in the span; with none, its own level before the start. It is *warm* from the first
//! point after its last slow one, less the range each point's rate covers, when at least two points
//! follow. A replica slow in its first minutes and warm within the limit had a cold start; one
//! still slow at the window's end but inside the limit is still warming up (said so).
//!
//! What a cold start explains, and then turns into info: a finding that names the replica
//! (`replica-outlier`), and a model-wide latency finding (`slow-prefill`, `slow-decode`, `slo-burn`)
//! when the model's other replicas stayed at their baseline level (median within 1.2x). What
//! outlasts the limit keeps its severity and is tied to the start (`preceded_by`) when nothing else
//! dated it.

use chrono::{DateTime, TimeZone, Utc};

use super::onset::Dating;
use crate::events::ReplicaLatency;
use crate::report::{ColdStart, Event, EventKind, Finding, PrecededBy, Severity, TimeRange};
use crate::rules::{ColdStartReach, RuleSet};

/// The threshold naming the longest warm-up, seconds.
pub const THRESHOLD: &str = crate::rules::COLD_START_WARM_UP;
/// Its value when the rule pack does not set it: 10 minutes.
pub const DEFAULT_LIMIT_SECONDS: f64 = 600.0;
/// The peers' window median over their baseline median under which the rest of the model is
/// unchanged.
const PEERS_UNCHANGED: f64 = 1.2;
/// How soon after the start the first slow point must come: a slowdown that begins later is not
/// the start's.
const FIRST_SLOW_WITHIN_SECONDS: f64 = 300.0;

fn kinds_that_start(kind: EventKind) -> bool {
    matches!(kind, EventKind::Restart | EventKind::ReplicaAdded | EventKind::Rollout | EventKind::ConfigChange | EventKind::VersionChange)
}

use crate::stats::finite_median as median;

fn at(points: &[(f64, f64)], t: f64) -> Option<f64> {
    points.iter().find(|(pt, _)| (*pt - t).abs() < 0.5).map(|(_, v)| *v)
}

/// What one replica did after one start.
#[derive(Debug, Clone, PartialEq)]
struct Warm {
    event: usize,
    replica: String,
    /// None: never slow. Some(true): a cold start (or still warming inside the limit).
    cold: bool,
    note: ColdStart,
}

struct Bars {
    ratio: f64,
    ttft_gap: f64,
    itl_gap: f64,
    limit: f64,
}

/// The replica's points after `t0`, each with whether it was slow and its two ratios.
fn judge_points(me: &ReplicaLatency, peers: &[&ReplicaLatency], t0: f64, bars: &Bars) -> Vec<(f64, bool, f64, f64)> {
    let own_before = |s: &[(f64, f64)]| median(s.iter().filter(|(t, _)| *t < t0).map(|(_, v)| *v).collect());
    let (own_ttft, own_itl) = (own_before(&me.ttft), own_before(&me.itl));
    let mut times: Vec<f64> = me.ttft.iter().chain(&me.itl).map(|(t, _)| *t).filter(|t| *t > t0).collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    times
        .into_iter()
        .map(|t| {
            let reference = |pick: fn(&ReplicaLatency) -> &Vec<(f64, f64)>, own: Option<f64>| {
                if peers.is_empty() {
                    own
                } else {
                    median(peers.iter().filter_map(|p| at(pick(p), t)).collect())
                }
            };
            let one = |mine: Option<f64>, reference: Option<f64>, gap: f64| match (mine, reference) {
                (Some(m), Some(r)) if r > 0.0 => (m / r, m >= bars.ratio * r && m - r >= gap),
                _ => (f64::NAN, false),
            };
            let (rt, slow_t) = one(at(&me.ttft, t), reference(|p| &p.ttft, own_ttft), bars.ttft_gap);
            let (ri, slow_i) = one(at(&me.itl, t), reference(|p| &p.itl, own_itl), bars.itl_gap);
            (t, slow_t || slow_i, rt, ri)
        })
        .collect()
}

fn time(t: f64) -> DateTime<Utc> {
    Utc.timestamp_opt(t.floor() as i64, 0).single().unwrap_or_default()
}

/// Every started replica's warm-up.
fn warm_ups(events: &[Event], series: &[ReplicaLatency], window: &TimeRange, bars: &Bars) -> Vec<Warm> {
    let started: Vec<(&crate::report::Scope, &str)> =
        events.iter().filter(|e| kinds_that_start(e.kind)).flat_map(|e| e.replicas.iter().map(move |r| (&e.scope, r.as_str()))).collect();
    let end = window.end.timestamp() as f64;
    let mut out = Vec::new();
    for (ei, e) in events.iter().enumerate().filter(|(_, e)| kinds_that_start(e.kind) && e.time <= window.end) {
        for replica in &e.replicas {
            let Some(me) = series.iter().find(|s| s.scope == e.scope && s.replica == *replica) else { continue };
            let peers: Vec<&ReplicaLatency> =
                series.iter().filter(|s| s.scope == e.scope && !started.iter().any(|(sc, r)| **sc == s.scope && *r == s.replica)).collect();
            // The replica's own start lies between the event's first and last change.
            let t0 = e.time.timestamp() as f64;
            let points = judge_points(me, &peers, t0, bars);
            let slow: Vec<&(f64, bool, f64, f64)> = points.iter().filter(|p| p.1).collect();
            let (Some(first), Some(last)) = (slow.first(), slow.last()) else { continue };
            let until = e.until.map(|u| u.timestamp() as f64).unwrap_or(t0);
            if first.0 - until > FIRST_SLOW_WITHIN_SECONDS + me.range_seconds as f64 {
                continue;
            }
            let after: Vec<&(f64, bool, f64, f64)> = points.iter().filter(|p| p.0 > last.0).collect();
            let warm_at = (after.len() >= 2).then(|| (after[0].0 - me.range_seconds as f64).max(last.0));
            let warm_up = warm_at.unwrap_or(end) - t0;
            let peak = |i: usize| slow.iter().map(|p| if i == 0 { p.2 } else { p.3 }).filter(|v| v.is_finite()).fold(0.0, f64::max);
            let (pt, pi) = (peak(0), peak(1));
            let started_at = time(t0);
            let note = ColdStart {
                replica: replica.clone(),
                started: started_at,
                warm: warm_at.map(time),
                warm_up_seconds: warm_up.round() as i64,
                limit_seconds: bars.limit as i64,
                peak_ttft_ratio: pt,
                peak_itl_ratio: pi,
                against_peers: !peers.is_empty(),
                slow_factor: bars.ratio,
                text: String::new(),
            }
            .worded();
            out.push(Warm { event: ei, replica: replica.clone(), cold: note.is_cold(), note });
        }
    }
    out
}

/// Whether the model's replicas that did not start stayed at their baseline level in the window.
fn peers_unchanged(scope: &crate::report::Scope, cold: &[&str], series: &[ReplicaLatency], window: &TimeRange) -> bool {
    let (start, end) = (window.start.timestamp() as f64, window.end.timestamp() as f64);
    let peers: Vec<&ReplicaLatency> = series.iter().filter(|s| s.scope == *scope && !cold.contains(&s.replica.as_str())).collect();
    if peers.is_empty() {
        return false;
    }
    [|s: &ReplicaLatency| s.ttft.clone(), |s: &ReplicaLatency| s.itl.clone()].iter().all(|pick| {
        let all: Vec<(f64, f64)> = peers.iter().flat_map(|p| pick(p)).collect();
        let before = median(all.iter().filter(|(t, _)| *t < start).map(|(_, v)| *v).collect());
        let during = median(all.iter().filter(|(t, _)| *t >= start && *t <= end).map(|(_, v)| *v).collect());
        match (before, during) {
            (Some(b), Some(d)) if b > 0.0 => d <= PEERS_UNCHANGED * b,
            (_, None) => true,
            _ => false,
        }
    })
}

fn names_replica(f: &Finding, replica: &str) -> bool {
    f.scope.values().any(|v| v == replica) || f.replicas.as_ref().is_some_and(|r| r.affected.iter().any(|n| n == replica))
}

/// Every started replica's warm-up in the run: read once, asked of every finding.
pub struct WarmUps<'a> {
    warm: Vec<Warm>,
    events: &'a [Event],
    series: &'a [ReplicaLatency],
    window: &'a TimeRange,
}

impl<'a> WarmUps<'a> {
    pub fn read(events: &'a [Event], series: &'a [ReplicaLatency], window: &'a TimeRange, rules: &RuleSet) -> WarmUps<'a> {
        let thresholds = &rules.thresholds;
        let th = |name: &str, default: f64| thresholds.get(name).copied().filter(|v| v.is_finite() && *v > 0.0).unwrap_or(default);
        let bars = Bars {
            ratio: th("replica_outlier_high", 2.0),
            ttft_gap: th("replica_ttft_gap", 0.25),
            itl_gap: th("replica_itl_gap", 0.01),
            limit: th(THRESHOLD, DEFAULT_LIMIT_SECONDS),
        };
        WarmUps { warm: warm_ups(events, series, window, &bars), events, series, window }
    }

    /// No replica started and slowed: no finding changes, and none moves.
    pub fn is_empty(&self) -> bool {
        self.warm.is_empty()
    }
}

/// What a replica's start explains of one finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Every replica the finding is about had a cold start: it is then info, not a regression.
    pub cold: bool,
    /// The start's note: the first cold one, or the one that outlasted the warm-up.
    pub note: ColdStart,
    /// The replicas that warmed up, when `cold`.
    pub replicas: Vec<String>,
    /// The start the finding is tied to, where no change already was.
    pub tied: Option<PrecededBy>,
    /// The start as its onset, where nothing else dated it and it was not there before the window.
    pub onset: Option<DateTime<Utc>>,
}

/// What the starts in `warm` explain of `f`, dated by `dating`; `tied`: whether a change already
/// explains when it began.
pub fn verdict(f: &Finding, dating: &Dating, tied: bool, warm: &WarmUps, rules: &RuleSet) -> Option<Verdict> {
    if f.severity < Severity::Warning {
        return None;
    }
    let (events, series, window) = (warm.events, warm.series, warm.window);
    let on_scope: Vec<&Warm> = warm.warm.iter().filter(|w| events[w.event].scope.iter().all(|(k, v)| f.scope.get(k) == Some(v))).collect();
    let scope = &events[on_scope.first()?.event].scope;
    let about: Vec<&Warm> = match rules.rule(&f.rule).and_then(|r| r.cold_start) {
        Some(ColdStartReach::Replica) => on_scope.iter().copied().filter(|w| names_replica(f, &w.replica)).collect(),
        Some(ColdStartReach::Model) => {
            let cold: Vec<&str> = on_scope.iter().map(|w| w.replica.as_str()).collect();
            if peers_unchanged(scope, &cold, series, window) {
                on_scope
            } else {
                Vec::new()
            }
        }
        None => Vec::new(),
    };
    let first = about.first()?;
    let event = &events[first.event];
    let cold = about.iter().all(|w| w.cold);
    let (note, replicas) = match about.iter().find(|w| !w.cold) {
        Some(w) => (w.note.clone(), Vec::new()),
        None => (first.note.clone(), about.iter().map(|w| w.replica.clone()).collect()),
    };
    // Undated by its trend: the slowdown began with the start.
    let onset = (!tied && dating.onset.is_none() && !dating.present_before_window()).then_some(event.time);
    let lead = dating.onset.or(onset).map_or(0, |o| (o - event.time).num_seconds());
    let tied = (!tied).then(|| PrecededBy::new(event.clone(), lead, None));
    Some(Verdict { cold, note, replicas, tied, onset })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Scope;
    use std::collections::BTreeMap;

    /// The built-in pack (what a cold start explains is its rules' `cold_start`), with these
    /// thresholds only.
    fn rules(thresholds: BTreeMap<String, f64>) -> RuleSet {
        RuleSet { thresholds, ..crate::rules::load_builtin().unwrap() }
    }

    /// What the starts explain of each finding, built into it and ranked the way explain does.
    fn built(fs: &mut Vec<Finding>, events: &[Event], series: &[ReplicaLatency], window: &TimeRange, rules: &RuleSet) {
        use crate::explain::finish;
        let warm = WarmUps::read(events, series, window, rules);
        let parts: Vec<finish::Parts> =
            fs.iter().map(|f| finish::Parts { start: verdict(f, &Dating::of(f), f.preceded_by.is_some(), &warm, rules), ..Default::default() }).collect();
        *fs = finish::finished(std::mem::take(fs), finish::Finishing { parts, started: !warm.is_empty() });
    }

    const T0: f64 = 1_768_464_000.0; // the baseline's start
    const STEP: f64 = 60.0;

    fn scope() -> Scope {
        [("model_name".to_string(), "llama".to_string())].into_iter().collect()
    }

    /// 60 one-minute points: 30 of baseline, 30 of window; `slow(minute)` gives the factor.
    fn replica(name: &str, ttft: f64, slow: impl Fn(usize) -> f64) -> ReplicaLatency {
        let pts = |base: f64| (0..60).map(|i| (T0 + i as f64 * STEP, base * slow(i))).collect::<Vec<_>>();
        ReplicaLatency { scope: scope(), replica: name.into(), ttft: pts(ttft), itl: pts(0.03), range_seconds: 120 }
    }

    fn window() -> TimeRange {
        TimeRange { start: time(T0 + 30.0 * STEP), end: time(T0 + 59.0 * STEP) }
    }

    fn restart(at_minute: usize, who: &str) -> Event {
        Event {
            time: time(T0 + at_minute as f64 * STEP),
            kind: EventKind::Restart,
            scope: scope(),
            detail: "1 of 3 replicas restarted".into(),
            replicas: vec![who.into()],
            of: Some(3),
            until: None,
            before: Default::default(),
            after: Default::default(),
        }
    }

    fn outlier(who: &str) -> Finding {
        let mut s = scope();
        s.insert("instance".into(), who.into());
        Finding::bare("replica-outlier", Severity::Warning, s)
    }

    fn fleet(slow_from: usize, slow_for: usize, factor: f64) -> Vec<ReplicaLatency> {
        vec![
            replica("a", 0.2, |_| 1.0),
            replica("b", 0.2, move |i| if (slow_from..slow_from + slow_for).contains(&i) { factor } else { 1.0 }),
            replica("c", 0.2, |_| 1.0),
        ]
    }

    #[test]
    fn a_replica_slow_for_its_first_minutes_then_like_its_peers_is_a_cold_start() {
        let events = [restart(40, "b")];
        let mut fs = vec![outlier("b"), Finding::bare("kv-cache-pressure", Severity::Warning, scope())];
        built(&mut fs, &events, &fleet(41, 4, 5.0), &window(), &rules(BTreeMap::new()));
        let cold = fs.iter().find(|f| f.rule == "replica-outlier").unwrap();
        assert_eq!(cold.severity, Severity::Info);
        let note = cold.cold_start.as_ref().expect("a cold start note");
        assert_eq!(note.replica, "b");
        assert!(note.warm.is_some() && note.warm_up_seconds <= 360, "{note:?}");
        assert!(note.text.starts_with("cold start: b (re)started at"), "{}", note.text);
        assert_eq!(cold.preceded_by.as_ref().unwrap().event.kind, EventKind::Restart);
        // What a cold start does not explain keeps its severity, and comes first.
        assert_eq!(fs[0].rule, "kv-cache-pressure");
        assert_eq!(fs[0].severity, Severity::Warning);
    }

    #[test]
    fn a_slowdown_that_outlasts_the_warm_up_stays_a_warning_tied_to_the_restart() {
        let events = [restart(40, "b")];
        let mut fs = vec![outlier("b")];
        built(&mut fs, &events, &fleet(41, 14, 5.0), &window(), &rules(BTreeMap::new()));
        assert_eq!(fs[0].severity, Severity::Warning);
        assert!(fs[0].cold_start.is_none());
        assert!(fs[0].steps[0].text().starts_with("Not a cold start: b (re)started"), "{:?}", fs[0].steps);
        assert_eq!(fs[0].preceded_by.as_ref().unwrap().event.kind, EventKind::Restart);
        // The threshold is the rule pack's: a longer allowance makes it a cold start.
        let mut fs = vec![outlier("b")];
        let th: BTreeMap<String, f64> = [(THRESHOLD.to_string(), 1200.0)].into_iter().collect();
        built(&mut fs, &events, &fleet(41, 14, 5.0), &window(), &rules(th));
        assert_eq!(fs[0].severity, Severity::Info);
    }

    #[test]
    fn another_replica_named_or_a_slowdown_long_after_the_start_is_not_the_start() {
        let events = [restart(40, "b")];
        let mut fs = vec![outlier("c")];
        built(&mut fs, &events, &fleet(41, 4, 5.0), &window(), &rules(BTreeMap::new()));
        assert_eq!((fs[0].severity, fs[0].preceded_by.is_none()), (Severity::Warning, true));
        let mut fs = vec![outlier("b")];
        built(&mut fs, &events, &fleet(50, 4, 5.0), &window(), &rules(BTreeMap::new()));
        assert_eq!((fs[0].severity, fs[0].cold_start.is_none()), (Severity::Warning, true));
    }

    #[test]
    fn a_model_wide_slowdown_is_a_cold_start_only_when_the_other_replicas_stayed_at_baseline() {
        let events = [restart(40, "b")];
        let mut fs = vec![Finding::bare("slow-prefill", Severity::Warning, scope())];
        built(&mut fs, &events, &fleet(41, 4, 5.0), &window(), &rules(BTreeMap::new()));
        assert_eq!(fs[0].severity, Severity::Info);
        // The peers slowed too: the model has a problem of its own.
        let mut series = fleet(41, 4, 5.0);
        series[0] = replica("a", 0.2, |i| if i >= 30 { 1.5 } else { 1.0 });
        let mut fs = vec![Finding::bare("slow-prefill", Severity::Warning, scope())];
        built(&mut fs, &events, &series, &window(), &rules(BTreeMap::new()));
        assert_eq!(fs[0].severity, Severity::Warning);
    }

    #[test]
    fn still_slow_at_the_window_end_inside_the_limit_is_a_cold_start_under_way() {
        let events = [restart(55, "b")];
        let mut fs = vec![outlier("b")];
        built(&mut fs, &events, &fleet(56, 10, 5.0), &window(), &rules(BTreeMap::new()));
        assert_eq!(fs[0].severity, Severity::Info);
        let note = fs[0].cold_start.as_ref().unwrap();
        assert!(note.warm.is_none() && note.text.starts_with("cold start under way"), "{note:?}");
    }
}
