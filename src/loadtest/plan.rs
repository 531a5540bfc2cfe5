//! The steps of a sweep, chosen as it goes: doubling from the first load until a step breaks the
//! limits or the load bound is reached, then bisection between the last good step and the first
//! bad one. Never a load above the first bad step. Nothing here touches the network: a dry run is
//! [`SweepPlan`] alone.

use std::time::Duration;

use crate::report::loadtest::{Bounds, LoadMode, Phase, Stop, SweepPlan, WorstCase};

/// The highest bounds a load test accepts, whatever the flags say: far above a probe's (a load test
/// is meant to load), short of what nobody means.
pub const CEILINGS: Bounds = Bounds {
    max_concurrency: 1024,
    max_rate: 1000.0,
    max_duration: Duration::from_secs(4 * 3600),
    max_requests: 100_000,
    step: Duration::from_secs(1800),
    request_timeout: Duration::from_secs(600),
};

/// The defaults: up to 64 in flight or 50 a second, 2 minutes a step, 30 minutes and 10,000
/// requests in all.
pub const DEFAULTS: Bounds = Bounds {
    max_concurrency: 64,
    max_rate: 50.0,
    max_duration: Duration::from_secs(1800),
    max_requests: 10_000,
    step: Duration::from_secs(120),
    request_timeout: Duration::from_secs(60),
};

/// Bisection steps at most after the first bad step.
pub const MAX_BISECTIONS: usize = 4;

/// The doubling steps: `start`, twice that, ... up to the mode's bound, the bound itself last.
pub fn ladder(mode: LoadMode, start: f64, bounds: &Bounds) -> Vec<f64> {
    let top = match mode {
        LoadMode::Concurrency => bounds.max_concurrency as f64,
        LoadMode::Rate => bounds.max_rate,
    };
    let mut out = Vec::new();
    let mut load = start.min(top);
    while load < top {
        out.push(load);
        load *= 2.0;
    }
    out.push(top);
    out
}

/// The sweep's state: which load comes next, from what the steps so far gave.
#[derive(Debug, Clone)]
pub struct Sweep {
    mode: LoadMode,
    ladder: Vec<f64>,
    rung: usize,
    bisections_left: usize,
    good: Option<f64>,
    bad: Option<f64>,
    stop: Option<Stop>,
}

impl Sweep {
    pub fn new(mode: LoadMode, ladder: Vec<f64>, max_bisections: usize) -> Sweep {
        Sweep { mode, ladder, rung: 0, bisections_left: max_bisections, good: None, bad: None, stop: None }
    }

    /// The next step's load and phase; `None` when the sweep is over ([`Sweep::stop`] says why).
    pub fn next_load(&mut self) -> Option<(f64, Phase)> {
        if self.stop.is_some() {
            return None;
        }
        let Some(bad) = self.bad else {
            return match self.ladder.get(self.rung) {
                Some(l) => Some((*l, Phase::Doubling)),
                None => {
                    self.stop = Some(Stop::LoadBound);
                    None
                }
            };
        };
        let Some(good) = self.good else {
            self.stop = Some(Stop::FirstStepBroke);
            return None;
        };
        let mid = match self.mode {
            LoadMode::Concurrency => ((good + bad) / 2.0).floor(),
            // Rates to two significant digits: 6.3/s, not 6.28125/s.
            LoadMode::Rate => round_sig((good + bad) / 2.0),
        };
        let close = match self.mode {
            LoadMode::Concurrency => bad - good <= 1.0,
            LoadMode::Rate => bad / good <= 1.1,
        };
        if self.bisections_left == 0 || close || mid <= good || mid >= bad {
            self.stop = Some(Stop::Found);
            return None;
        }
        Some((mid, Phase::Bisection))
    }

    /// What the step at `load` gave.
    pub fn record(&mut self, load: f64, passed: bool, phase: Phase) {
        if phase == Phase::Bisection {
            self.bisections_left = self.bisections_left.saturating_sub(1);
        } else {
            self.rung += 1;
        }
        if passed {
            self.good = Some(self.good.map_or(load, |g| g.max(load)));
        } else {
            self.bad = Some(self.bad.map_or(load, |b| b.min(load)));
        }
    }

    /// End the sweep early: a bound ran out.
    pub fn stop_for(&mut self, why: Stop) {
        self.stop.get_or_insert(why);
    }

    /// Why the sweep ended (`None` while it goes on).
    pub fn stop(&self) -> Option<Stop> {
        self.stop
    }
}

fn round_sig(x: f64) -> f64 {
    if x <= 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(1 - x.log10().floor() as i32);
    (x * scale).round() / scale
}

/// The plan a dry run prints: the ladder, the bisection steps at most, and the worst case: every
/// planned step run in full (its length, a drain of at most a request's timeout, the wait for the
/// engines' scrapes), within the bounds. Requests: in concurrency mode the rate bound caps each
/// step; in rate mode each step's mean rate does (Poisson arrivals vary about it); the request
/// bound caps both.
pub fn sweep_plan(mode: LoadMode, start: f64, bounds: &Bounds, settle: Duration, tokens_per_request: u64) -> SweepPlan {
    let ladder = ladder(mode, start, bounds);
    let steps = ladder.len() + MAX_BISECTIONS;
    let step_secs = bounds.step.as_secs_f64();
    let each = step_secs + bounds.request_timeout.as_secs_f64() + settle.as_secs_f64();
    let seconds = (steps as f64 * each).min(bounds.max_duration.as_secs_f64());
    let per_step = |load: f64| match mode {
        LoadMode::Concurrency => bounds.max_rate * step_secs,
        LoadMode::Rate => load * step_secs,
    };
    let top = ladder.last().copied().unwrap_or(start);
    let planned: f64 = ladder.iter().map(|l| per_step(*l)).sum::<f64>() + MAX_BISECTIONS as f64 * per_step(top);
    let requests = (planned.ceil() as usize).min(bounds.max_requests);
    let concurrency = match mode {
        LoadMode::Concurrency => top as usize,
        LoadMode::Rate => bounds.max_concurrency,
    };
    SweepPlan {
        mode,
        ladder,
        max_bisections: MAX_BISECTIONS,
        worst_case: WorstCase { steps, seconds, requests, tokens: requests as u64 * tokens_per_request, concurrency },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(c: usize, r: f64) -> Bounds {
        Bounds { max_concurrency: c, max_rate: r, ..DEFAULTS }
    }

    #[test]
    fn the_ladder_doubles_to_the_bound_and_ends_on_it() {
        assert_eq!(ladder(LoadMode::Concurrency, 1.0, &bounds(12, 50.0)), [1.0, 2.0, 4.0, 8.0, 12.0]);
        assert_eq!(ladder(LoadMode::Concurrency, 1.0, &bounds(8, 50.0)), [1.0, 2.0, 4.0, 8.0]);
        assert_eq!(ladder(LoadMode::Rate, 0.5, &bounds(8, 3.0)), [0.5, 1.0, 2.0, 3.0]);
        assert_eq!(ladder(LoadMode::Concurrency, 20.0, &bounds(8, 50.0)), [8.0]);
    }

    /// Run a sweep against a fleet whose knee is at `knee`: a load passes when at or below it.
    fn sweep(mode: LoadMode, top: usize, knee: f64) -> (Vec<(f64, Phase)>, Option<Stop>) {
        let mut s = Sweep::new(mode, ladder(mode, 1.0, &bounds(top, top as f64)), MAX_BISECTIONS);
        let mut ran = Vec::new();
        while let Some((load, phase)) = s.next_load() {
            ran.push((load, phase));
            s.record(load, load <= knee, phase);
            assert!(ran.len() < 30);
        }
        (ran, s.stop())
    }

    #[test]
    fn doubling_stops_at_the_first_bad_step_and_bisection_closes_on_the_knee() {
        let (ran, stop) = sweep(LoadMode::Concurrency, 64, 4.0);
        let loads: Vec<f64> = ran.iter().map(|r| r.0).collect();
        assert_eq!(loads, [1.0, 2.0, 4.0, 8.0, 6.0, 5.0]);
        assert_eq!(ran[4].1, Phase::Bisection);
        assert_eq!(stop, Some(Stop::Found));
        // Never above the first bad step.
        let (ran, _) = sweep(LoadMode::Concurrency, 64, 21.0);
        assert!(ran.iter().all(|r| r.0 <= 32.0), "{ran:?}");
        assert_eq!(ran.iter().filter(|r| r.1 == Phase::Bisection).count(), 4, "at most four bisection steps: {ran:?}");
        // All good to the bound; the first step bad.
        assert_eq!(sweep(LoadMode::Concurrency, 8, 100.0).1, Some(Stop::LoadBound));
        let (ran, stop) = sweep(LoadMode::Concurrency, 8, 0.5);
        assert_eq!((ran.len(), stop), (1, Some(Stop::FirstStepBroke)));
        let (ran, stop) = sweep(LoadMode::Rate, 64, 5.0);
        assert_eq!(stop, Some(Stop::Found));
        assert!(ran.iter().any(|r| r.0 == 6.0) && ran.iter().all(|r| r.0 <= 8.0), "{ran:?}");
    }

    #[test]
    fn the_worst_case_counts_every_planned_step_within_the_bounds() {
        let b = Bounds { step: Duration::from_secs(60), request_timeout: Duration::from_secs(30), max_duration: Duration::from_secs(3600), ..bounds(8, 10.0) };
        let p = sweep_plan(LoadMode::Concurrency, 1.0, &b, Duration::from_secs(15), 100);
        assert_eq!(p.ladder, [1.0, 2.0, 4.0, 8.0]);
        assert_eq!(p.worst_case.steps, 8);
        assert_eq!(p.worst_case.seconds, 8.0 * 105.0);
        assert_eq!(p.worst_case.requests, 8 * 600);
        assert_eq!((p.worst_case.tokens, p.worst_case.concurrency), (480_000, 8));
        let capped = sweep_plan(LoadMode::Concurrency, 1.0, &Bounds { max_requests: 50, max_duration: Duration::from_secs(100), ..b }, Duration::ZERO, 1);
        assert_eq!((capped.worst_case.requests, capped.worst_case.seconds), (50, 100.0));
    }
}
