//! The load test's judging, knee, binding limit and derived profile, over steps made here.

use super::*;
use crate::report::loadtest::{Spread, StepNotRead};

fn t(s: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
}

fn spread(p50: f64, p95: f64) -> Option<Spread> {
    Some(Spread { count: 20, mean: p50, p50, p95, max: p95 })
}

fn engine(running: f64, waiting: f64) -> StepEngine {
    StepEngine {
        from: t(0),
        to: t(10),
        running_max: Some(running),
        waiting_max: Some(waiting),
        waiting_mean: Some(waiting / 2.0),
        kv_usage_max: Some(0.2),
        preemptions: Some(0.0),
        ttft_p95: Some(0.1),
        itl_p95: Some(0.02),
        itl_mean: Some(0.015),
        generation_tokens_per_second: Some(300.0),
        prompt_tokens_per_second: Some(100.0),
        finished: Some(20.0),
        not_read: Vec::new(),
    }
}

/// A step at `load` whose client p95 TTFT is `ttft_p95`, with engines running and waiting so.
fn at(index: usize, load: f64, ttft_p95: f64, failed: usize, e: Option<StepEngine>) -> Step {
    let mut s = step(index, Phase::Doubling, load, (t(0), t(10)), &[], 0);
    s.sent = 20;
    s.ok = 20 - failed;
    s.failed = failed;
    if failed > 0 {
        s.by_outcome.insert("http_408".into(), failed);
    }
    s.ttft = spread(ttft_p95 / 2.0, ttft_p95);
    s.between_tokens = spread(0.01, 0.03);
    s.engine = e;
    s
}

fn slo() -> Slo {
    Slo { profile: "chat".into(), ttft_p95_high: Some(0.5), itl_p95_high: Some(0.1) }
}

fn judged(mut steps: Vec<Step>) -> Vec<Step> {
    for s in &mut steps {
        s.breaches = judge(s, &slo());
    }
    steps
}

#[test]
fn a_step_breaks_on_a_failure_a_slow_first_token_or_the_engines_slow_tokens() {
    assert!(judge(&at(0, 1.0, 0.2, 0, Some(engine(1.0, 0.0))), &slo()).is_empty());
    let b = judge(&at(0, 8.0, 0.9, 2, None), &slo());
    assert!(matches!(&b[0], StepBreach::RequestsFailed { failed: 2, sent: 20, by_outcome } if by_outcome.get("http_408") == Some(&2)), "{b:?}");
    assert_eq!(b[1], StepBreach::TtftOverLimit { p95_seconds: 0.9, limit_seconds: 0.5 });
    let mut slow_tokens = engine(4.0, 0.0);
    slow_tokens.itl_p95 = Some(0.25);
    assert_eq!(judge(&at(0, 4.0, 0.2, 0, Some(slow_tokens)), &slo()), vec![StepBreach::ItlOverLimit { p95_seconds: 0.25, limit_seconds: 0.1 }]);
    // The client's own gaps are not judged; a profile without limits judges the requests alone.
    let none = Slo { profile: "x".into(), ttft_p95_high: None, itl_p95_high: None };
    assert!(judge(&at(0, 4.0, 9.0, 0, None), &none).is_empty());
    let mut empty = at(0, 4.0, 0.1, 0, None);
    empty.sent = 0;
    assert_eq!(judge(&empty, &slo()), vec![StepBreach::NothingSent]);
}

#[test]
fn the_knee_is_the_highest_good_load_below_the_lowest_bad_one_and_names_the_sequence_cap() {
    let steps = judged(vec![
        at(0, 1.0, 0.2, 0, Some(engine(1.0, 0.0))),
        at(1, 2.0, 0.2, 0, Some(engine(2.0, 0.0))),
        at(2, 4.0, 0.25, 0, Some(engine(4.0, 0.0))),
        at(3, 8.0, 0.9, 0, Some(engine(4.0, 4.0))),
        at(4, 6.0, 0.8, 0, Some(engine(4.0, 2.0))),
        at(5, 5.0, 0.7, 0, Some(engine(4.0, 1.0))),
    ]);
    assert_eq!(knee(&steps), Some((2, Some(5))));
    let b = bound_at(&steps, 5).unwrap();
    assert_eq!((b.limit, b.running_max, b.at_step, b.busy_answers), (LimitKind::MaxNumSeqs, Some(4.0), 5, 0));
    // A noisy good step above a bad one is not the knee.
    let noisy = judged(vec![at(0, 1.0, 0.2, 0, None), at(1, 2.0, 0.9, 0, None), at(2, 3.0, 0.2, 0, None)]);
    assert_eq!(knee(&noisy), Some((0, Some(1))));
    // No good step: no knee. Every step good: the knee is the highest, no bad step.
    assert_eq!(knee(&judged(vec![at(0, 1.0, 0.9, 0, None)])), None);
    assert_eq!(knee(&judged(vec![at(0, 1.0, 0.1, 0, None), at(1, 2.0, 0.1, 0, None)])), Some((1, None)));
}

#[test]
fn the_bound_is_the_kv_cache_the_token_budget_or_in_front_of_the_engines_by_what_they_showed() {
    let with = |e: StepEngine, failed: usize| judged(vec![at(0, 4.0, 0.2, 0, Some(engine(4.0, 0.0))), at(1, 8.0, 0.9, failed, Some(e))]);
    let mut kv = engine(6.0, 3.0);
    kv.kv_usage_max = Some(0.97);
    assert_eq!(bound_at(&with(kv, 0), 1).unwrap().limit, LimitKind::KvCache);
    let mut preempting = engine(2.0, 0.0);
    preempting.preemptions = Some(3.0);
    assert_eq!(bound_at(&with(preempting, 0), 1).unwrap().limit, LimitKind::KvCache);
    // A queue with the batch below its highest and the steps full of prompt tokens: the budget.
    let mut budget = engine(3.0, 5.0);
    budget.prompt_tokens_per_second = Some(4000.0);
    let steps = judged(vec![at(0, 4.0, 0.2, 0, Some(engine(8.0, 0.0))), at(1, 8.0, 0.9, 0, Some(budget))]);
    assert_eq!(bound_at(&steps, 1).unwrap().limit, LimitKind::MaxNumBatchedTokens);
    // 408s while no engine had a request waiting: in front of the engines.
    let front = bound_at(&with(engine(4.0, 0.0), 6), 1).unwrap();
    assert_eq!((front.limit, front.busy_answers), (LimitKind::None, 6));
    // Not read: nothing said.
    assert_eq!(bound_at(&judged(vec![at(0, 4.0, 0.2, 0, None), at(1, 8.0, 0.9, 0, None)]), 1), None);
    let mut unread = engine(4.0, 0.0);
    unread.running_max = None;
    unread.not_read.push(StepNotRead { measure: crate::report::loadtest::StepMeasure::RunningMax, reason: crate::report::probe::NotReadReason::NoData });
    assert_eq!(bound_at(&with(unread, 0), 1), None);
}

#[test]
fn the_derived_profile_adds_the_margin_and_stays_below_the_first_bad_step_on_what_broke_there() {
    // The first bad step broke on its first token (0.6 s over 0.5 s); its engines' time between
    // tokens rose (20 to 40 ms) but stayed within the limits.
    let mut slower = engine(4.0, 4.0);
    slower.itl_p95 = Some(0.04);
    let steps = judged(vec![at(0, 2.0, 0.2, 0, Some(engine(2.0, 0.0))), at(1, 4.0, 0.3, 0, Some(engine(4.0, 0.0))), at(2, 8.0, 0.6, 0, Some(slower))]);
    let (k, bad) = knee(&steps).unwrap();
    let kn = Knee { step: k, load: 4.0, first_bad: bad, bound: None };
    let p = derive(&steps, &kn, "measured", MARGIN);
    // 0.3 s with half again is 0.45 s, past sqrt(0.3 x 0.6) = 0.424 s: the ceiling stops there.
    assert!((p.ttft_p95_high.unwrap() - (0.3f64 * 0.6).sqrt()).abs() < 1e-9, "{p:?}");
    // The target: the knee's p95 (0.3 s) with a quarter added.
    assert!((p.ttft_target.unwrap() - 0.375).abs() < 1e-9, "{p:?}");
    assert!(p.itl_from_engines);
    // The engines' p95 between tokens at the knee, 20 ms, half again (30 ms): the bad step did not
    // break on it, so its 40 ms does not pull the ceiling down; the target a quarter added (25 ms).
    assert!((p.itl_p95_high.unwrap() - 0.03).abs() < 1e-9 && (p.itl_target.unwrap() - 0.025).abs() < 1e-9, "{p:?}");
    // A bad step that broke on failures alone caps neither.
    let failed = judged(vec![at(0, 4.0, 0.3, 0, Some(engine(4.0, 0.0))), at(1, 8.0, 0.4, 2, Some(engine(4.0, 4.0)))]);
    let p = derive(&failed, &Knee { step: 0, load: 4.0, first_bad: Some(1), bound: None }, "m", MARGIN);
    assert!((p.ttft_p95_high.unwrap() - 0.45).abs() < 1e-9, "{p:?}");
    // No bad step, no engines: the margin alone, the client's gaps.
    let alone = judged(vec![at(0, 2.0, 0.2, 0, None)]);
    let p = derive(&alone, &Knee { step: 0, load: 2.0, first_bad: None, bound: None }, "m", MARGIN);
    assert!((p.ttft_p95_high.unwrap() - 0.3).abs() < 1e-9 && !p.itl_from_engines);
    assert!((p.itl_p95_high.unwrap() - 0.045).abs() < 1e-9, "{p:?}");
}
