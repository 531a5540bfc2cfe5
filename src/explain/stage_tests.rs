//! Each stage on literal data: requests planned, answers read, values judged, follow-ups applied.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{TimeZone, Utc};

use super::fetch::Answers;
use super::*;
use crate::report::{Evidence, Limit, Scope, TimeRange, Warnings};
use crate::rules::eval::{Availability, SignalTable, SignalValues, WindowValues};
use crate::source::{Data, Request, Response, Sample, Series, SourceError};

fn params() -> RunParams {
    let t = |h: u32, m: u32| Utc.with_ymd_and_hms(2026, 1, 15, h, m, 0).unwrap();
    RunParams {
        window: TimeRange { start: t(11, 30), end: t(12, 0) },
        baseline: TimeRange { start: t(11, 0), end: t(11, 30) },
        selector: String::new(),
        group_by: vec!["model_name".into()],
        replica_label: "instance".into(),
    }
}

/// The signals' query context for `p`: no selector, the built-in thresholds, replicas by `instance`.
fn query_ctx(rules: &crate::rules::RuleSet, p: &RunParams) -> QueryContext {
    QueryContext {
        selector: Selector::default(),
        group_by: p.group_by.clone(),
        range: p.window.duration(),
        thresholds: std::sync::Arc::new(rules.thresholds.clone()),
        buckets: Default::default(),
        replica_label: "instance".into(),
    }
}

fn labels(pairs: &[(&str, &str)]) -> crate::prom::Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn vector(samples: &[(&[(&str, &str)], f64)]) -> Response {
    Response { data: Data::Vector(samples.iter().map(|(l, v)| Sample { labels: labels(l).into(), t: 0.0, v: *v }).collect()), warnings: vec![], infos: vec![] }
}

fn scope(model: &str) -> Scope {
    [("model_name".to_string(), model.to_string())].into_iter().collect()
}

#[test]
fn discovery_asks_for_both_windows_and_counts_the_grouping_and_replica_labels() {
    let rules = crate::rules::load_builtin().unwrap();
    let p = params();
    let plan = discover::plan(&rules, &plan::needed_signals(&rules), &Selector::parse(r#"job="vllm""#).unwrap(), &p);
    let Request::LabelValues { label, matchers, start, end } = &plan.window else { panic!("{:?}", plan.window) };
    assert_eq!((label.as_str(), *start, *end), ("__name__", p.window.start, p.window.end));
    assert!(matchers[0].contains(r#"job="vllm""#) && matchers[0].contains("vllm[:_].+"), "{matchers:?}");
    assert!(matches!(&plan.baseline, Request::LabelValues { start, .. } if *start == p.baseline.start));
    let counted: Vec<&str> = plan.labels.0.iter().map(String::as_str).collect();
    assert_eq!(counted, vec!["instance", "model_name", "namespace", "pod"]);
    assert!(!plan.buckets.is_empty(), "the SLO histograms have their bounds listed");
}

#[test]
fn names_without_vllm_data_stop_the_run_and_a_failed_baseline_only_warns() {
    let rules = crate::rules::load_builtin().unwrap();
    let p = params();
    let sel = Selector::default();
    let plan = discover::plan(&rules, &plan::needed_signals(&rules), &sel, &p);
    let names = |v: &[&str]| Ok(Response { data: Data::Labels(v.iter().map(|s| s.to_string()).collect()), warnings: vec!["w".into()], infos: vec![] });
    let mut answers = Answers::new();
    answers.insert(plan.window.clone(), names(&["up"]));
    answers.insert(plan.baseline.clone(), names(&["vllm:num_requests_running"]));
    let e = discover::read_names(&plan, &mut answers, &mut Warnings::default(), "http://prom", &sel, &p).unwrap_err();
    assert!(matches!(&e, ExplainError::NoData(m) if m.contains("http://prom") && m.contains("--window")), "{e}");

    let mut answers = Answers::new();
    answers.insert(plan.window.clone(), names(&["vllm:num_requests_running"]));
    answers.insert(plan.baseline.clone(), Err(SourceError::Other { detail: "boom".into() }));
    let mut warnings = Warnings::default();
    let (w, b) = discover::read_names(&plan, &mut answers, &mut warnings, "http://prom", &sel, &p).unwrap();
    assert!(w.contains("vllm:num_requests_running") && b.is_empty());
    assert_eq!(warnings[0], "w", "the server's own warnings are kept");
    assert!(warnings.iter().any(|w| w.contains("could not list the baseline's metrics")), "{warnings:?}");
    assert!(warnings.iter().any(|w| w.contains("holds no vLLM data")), "{warnings:?}");
}

#[test]
fn a_window_longer_than_its_data_is_detected_from_the_first_point() {
    let p = params();
    let names: BTreeSet<String> = ["vllm:num_requests_running".to_string()].into();
    let req = discover::data_start_request(&Selector::default(), &names, &p.window).unwrap();
    assert!(matches!(&req, Request::Range { query, step_seconds: 30, .. } if query == "count(vllm:num_requests_running{server=\"\"})"), "{req:?}");
    let late = p.window.start.timestamp() as f64 + 600.0;
    let mut answers = Answers::new();
    let series = Series { labels: labels(&[]), points: vec![(late, 2.0), (late + 30.0, 2.0)] };
    answers.insert(req.clone(), Ok(Response { data: Data::Matrix(vec![series]), warnings: vec![], infos: vec![] }));
    assert_eq!(discover::data_start(&req, &answers, &p.window).map(|t| t.timestamp() as f64), Some(late));
    // Data from the first step on: nothing to say.
    let early = Series { labels: labels(&[]), points: vec![(p.window.start.timestamp() as f64, 1.0)] };
    answers.insert(req.clone(), Ok(Response { data: Data::Matrix(vec![early]), warnings: vec![], infos: vec![] }));
    assert_eq!(discover::data_start(&req, &answers, &p.window), None);
}

#[test]
fn a_window_that_outlasts_its_data_is_detected_from_the_newest_sample() {
    let p = params();
    let names: BTreeSet<String> = ["vllm:num_requests_running".to_string(), "vllm:num_requests_waiting".to_string()].into();
    let req = discover::data_end_request(&Selector::default(), &names, &p.window).unwrap();
    assert!(
        matches!(&req, Request::Instant { query, time } if query == "max(timestamp(vllm:num_requests_waiting{server=\"\"}))" && *time == p.window.end),
        "{req:?}"
    );
    let end = p.window.end.timestamp() as f64;
    let answer = |newest: f64| {
        let mut answers = Answers::new();
        let sample = Sample { labels: labels(&[]).into(), t: end, v: newest };
        answers.insert(req.clone(), Ok(Response { data: Data::Vector(vec![sample]), warnings: vec![], infos: vec![] }));
        answers
    };
    // Four minutes short of the end (of a 30-minute window): said, with the time to move --at to.
    let newest = discover::data_end(&req, &answer(end - 240.0), &p.window).expect("the data ends early");
    assert_eq!(newest.timestamp() as f64, end - 240.0);
    let w = discover::data_end_warning(&newest, &p.window);
    assert!(w.contains("4m before the window ends") && w.contains("move --at to"), "{w}");
    // A scrape interval and an ingestion delay short of it: nothing to say; nor with no answer.
    assert_eq!(discover::data_end(&req, &answer(end - 90.0), &p.window), None);
    assert_eq!(discover::data_end(&req, &Answers::new(), &p.window), None);
    // A short window allows a quarter of itself.
    let short = TimeRange { start: p.window.end - chrono::Duration::minutes(3), end: p.window.end };
    assert!(discover::data_end(&req, &answer(end - 60.0), &short).is_some());
    assert_eq!(discover::data_end(&req, &answer(end - 40.0), &short), None);
}

#[test]
fn a_signal_whose_metric_is_absent_is_planned_as_missing_and_sends_nothing() {
    let rules = crate::rules::load_builtin().unwrap();
    let p = params();
    let disc = discover::Discovery { window_names: ["vllm:num_requests_running".to_string()].into(), ..Default::default() };
    let ctx = query_ctx(&rules, &p);
    let needed: BTreeSet<String> = ["ttft_p95".to_string()].into();
    let plan = plan::plan_signals(&rules, &needed, ctx, &p, &disc, &mut Warnings::default());
    let (w, b) = &plan.signals["ttft_p95"];
    assert!(matches!(&w.availability, Availability::Missing(m) if !m.is_empty()), "{:?}", w.availability);
    assert!(matches!(b.availability, Availability::Missing(_)));
    assert!(plan.reads.wants.is_empty());
}

#[test]
fn a_subquery_is_asked_at_each_end_when_the_baseline_is_further_away_than_its_range() {
    // Asked as one range query at the baseline's end and the window's, a subquery is computed at
    // every step of its own from the first range to the last: with `--baseline 1d` that is a day of
    // 15 s steps for the last five minutes' share. Each end is asked alone then; a baseline right
    // before the window keeps the whole window's share as one range query (nothing in between).
    let rules = crate::rules::load_builtin().unwrap();
    let names: BTreeSet<String> = ["vllm:num_preemptions_total".to_string()].into();
    let disc = discover::Discovery { window_names: names.clone(), baseline_names: names, ..Default::default() };
    let needed: BTreeSet<String> = ["preemption_active".to_string(), "preemption_recent".to_string()].into();
    let sent = |p: &RunParams| -> Vec<Request> {
        let ctx = query_ctx(&rules, p);
        let plan = plan::plan_signals(&rules, &needed, ctx, p, &disc, &mut Warnings::default());
        let first: BTreeSet<Request> = plan.reads.wants.values().map(|ways| ways[0].ask.clone()).collect();
        first.into_iter().collect()
    };
    let adjacent = params();
    let day = RunParams {
        baseline: TimeRange { start: adjacent.window.start - chrono::Duration::days(1), end: adjacent.window.end - chrono::Duration::days(1) },
        ..adjacent.clone()
    };
    for p in [&adjacent, &day] {
        for req in sent(p) {
            let ranges = crate::signals::subquery_ranges(req.query().unwrap());
            assert!(!ranges.is_empty(), "{req:?}");
            if let Request::Range { step_seconds, .. } = &req {
                assert!(ranges.iter().all(|r| r.as_secs() >= *step_seconds), "a subquery spread over {step_seconds} s: {req:?}");
            }
        }
    }
    let kinds = |p: &RunParams| sent(p).iter().map(|r| matches!(r, Request::Range { .. })).collect::<Vec<bool>>();
    // Right before: the whole window's share paired, the last five minutes' at each end.
    assert_eq!(kinds(&adjacent).iter().filter(|r| **r).count(), 1, "{:?}", sent(&adjacent));
    assert_eq!(sent(&adjacent).len(), 3);
    // A day before: all four instants.
    assert_eq!(kinds(&day), vec![false; 4], "{:?}", sent(&day));
    // A recording made when they were paired still answers them: the pair is their second way.
    let ctx = query_ctx(&rules, &adjacent);
    let plan = plan::plan_signals(&rules, &needed, ctx, &adjacent, &disc, &mut Warnings::default());
    let recent = plan.reads.wants.iter().filter(|(w, _)| w.query().is_some_and(|q| q.contains("[300s:15s]"))).collect::<Vec<_>>();
    assert_eq!(recent.len(), 2);
    for (want, ways) in recent {
        assert_eq!(&ways[0].ask, want);
        assert!(matches!(&ways[1].ask, Request::Range { step_seconds: 1800, .. }) && ways[1].at.is_some(), "{ways:?}");
    }
}

#[test]
fn needed_signals_include_the_recommenders_inputs() {
    let rules = crate::rules::load_builtin().unwrap();
    let needed = plan::needed_signals(&rules);
    for s in ["prompt_len_mean", "output_len_mean", "running_per_replica", "kv_usage_avg", "ttft_mean", "queue_mean", "router_over_e2e"] {
        assert!(needed.contains(s), "{s}");
    }
}

#[test]
fn answers_become_values_per_scope_with_outliers_and_lone_replicas_named() {
    let by = vec!["model_name".to_string()];
    let resp = vector(&[(&[("model_name", "a")], 1.5), (&[("model_name", "b")], 2.0)]);
    assert_eq!(assemble::by_scope(&resp, &by), [(scope("a"), 1.5), (scope("b"), 2.0)].into_iter().collect());

    // Outliers arrive per replica and are reduced here: the worst over the median of the others.
    let resp = vector(&[
        (&[("model_name", "a"), ("instance", "i1")], 3.0),
        (&[("model_name", "a"), ("instance", "i2")], 1.0),
        (&[("model_name", "a"), ("instance", "i3")], 1.0),
        (&[("model_name", "b"), ("instance", "i4")], 0.0),
        (&[("model_name", "b"), ("instance", "i5")], 0.0),
    ]);
    let (values, culprits) = assemble::outliers(&resp, &by, "instance", false);
    assert_eq!(values, [(scope("a"), 3.0)].into_iter().collect(), "0/0 is no outlier");
    assert_eq!(culprits[&scope("a")]["instance"], "i1");

    let resp = vector(&[
        (&[("model_name", "a"), ("pod", "p1"), ("instance", "i1")], 1.0),
        (&[("model_name", "b"), ("pod", "p2")], 1.0),
        (&[("model_name", "b"), ("pod", "p3")], 1.0),
    ]);
    let (values, culprits) = assemble::listed(&resp, &by, "pod");
    assert_eq!(values, [(scope("a"), 1.0), (scope("b"), 2.0)].into_iter().collect());
    assert_eq!(crate::prom::Labels::from(culprits[&scope("a")].clone()), labels(&[("pod", "p1"), ("instance", "i1")]));
    assert!(!culprits.contains_key(&scope("b")), "two replicas: none named");
}

#[test]
fn a_failed_query_makes_its_signal_not_evaluated_and_nan_is_no_data() {
    let req = Request::Instant { query: "q".into(), time: params().window.end };
    let planned = plan::Planned {
        resolved: None,
        per_replica: None,
        availability: Availability::Ok,
        value: Some(req.clone()),
        count: None,
        query: "q".into(),
        metric: "m".into(),
        bounds: vec![],
        quantile: None,
        parts: None,
        histogram: None,
        counts_from_buckets: None,
        sums: vec![],
        burn: None,
    };
    let mut answers = Answers::new();
    answers.insert(req.clone(), Err(SourceError::Other { detail: "bad gateway".into() }));
    let wv = assemble::fill(&planned, &answers, &["model_name".to_string()]);
    assert!(matches!(&wv.availability, Availability::Failed(r) if r.text.contains("bad gateway")), "{:?}", wv.availability);
    answers.insert(req.clone(), Ok(vector(&[(&[("model_name", "a")], f64::NAN), (&[("model_name", "b")], 0.2)])));
    let wv = assemble::fill(&planned, &answers, &["model_name".to_string()]);
    assert_eq!(wv.values, [(scope("b"), 0.2)].into_iter().collect());
    assert!(matches!(assemble::fill(&planned, &Answers::new(), &[]).availability, Availability::Failed(_)), "unanswered");
}

#[test]
fn fleet_labels_are_counted_and_a_missing_grouping_label_is_warned_of() {
    let p = params();
    let req = Request::Instant { query: "group by (instance, model_name, pod) (...)".into(), time: p.window.end };
    let request = (vec!["instance".to_string(), "model_name".to_string(), "pod".to_string()], req.clone());
    // Eight engines on four pods (two each); none carries model_name, one no pod.
    let rows: Vec<(Vec<(&str, String)>, f64)> = (0..8)
        .map(|i| (if i == 7 { vec![("instance", format!("i{i}"))] } else { vec![("instance", format!("i{i}")), ("pod", format!("p{}", i / 2))] }, 1.0))
        .collect();
    let mut answers = Answers::new();
    answers.insert(
        req.clone(),
        Ok(Response {
            data: Data::Vector(
                rows.iter()
                    .map(|(l, v)| Sample { labels: l.iter().map(|(k, v)| (k.to_string(), v.clone())).collect::<crate::prom::Labels>().into(), t: 0.0, v: *v })
                    .collect(),
            ),
            warnings: vec![],
            infos: vec![],
        }),
    );
    let names: BTreeSet<String> = ["vllm:num_requests_running".to_string()].into();
    let mut warnings = Warnings::default();
    let counts = assemble::fleet_labels(&request, &answers, &names, &p, &mut warnings);
    assert_eq!(counts, [("instance".to_string(), 8), ("model_name".to_string(), 0), ("pod".to_string(), 4)].into_iter().collect());
    assert!(warnings.len() == 1 && warnings[0].starts_with("--group-by model_name") && warnings[0].ends_with("found: instance, pod"), "{warnings:?}");
    // Without the running gauge the counts say nothing; without an answer, nothing either.
    assert!(assemble::fleet_labels(&request, &answers, &BTreeSet::new(), &p, &mut Warnings::default()).is_empty());
    assert!(assemble::fleet_labels(&request, &Answers::new(), &names, &p, &mut Warnings::default()).is_empty());
}

fn values(v: f64) -> WindowValues {
    WindowValues { values: [(scope("a"), v)].into_iter().collect(), ..WindowValues::unavailable(Availability::Ok) }
}

#[test]
fn judging_finds_a_full_cache_and_clears_a_quiet_one() {
    let rules = crate::rules::load_builtin().unwrap();
    let p = params();
    let table = |kv: f64, preempting: f64| -> SignalTable {
        [("kv_usage_max", kv), ("preemption_active", preempting), ("kv_usage_avg", kv), ("ttft_p95", kv * 10.0)]
            .into_iter()
            .map(|(s, v)| (s.to_string(), SignalValues { window: values(v), baseline: values(0.3) }))
            .collect()
    };
    let judged = judge::judge(&rules, &table(0.99, 1.0), &p);
    assert!(judged.ranked.findings.iter().any(|f| f.rule == "kv-cache-pressure" && f.scope == scope("a")), "{:?}", judged.ranked.findings);
    assert_eq!(judged.scopes, [scope("a")].into());
    assert!(judged.evaluated > 0);
    let judged = judge::judge(&rules, &table(0.4, 0.0), &p);
    assert!(judged.ranked.healthy.iter().any(|c| c.rule == "kv-cache-pressure"));
}

/// The real engine's late slow decode (ITL 1.28x over the window, 2x over its last five minutes,
/// the queue long only in the earlier episode), for model `a`, and a steady model `b`.
fn late_decode_table(with_recent: bool) -> SignalTable {
    let two = |wa: f64, ba: f64, wb: f64, bb: f64| SignalValues {
        window: WindowValues { values: [(scope("a"), wa), (scope("b"), wb)].into_iter().collect(), ..WindowValues::unavailable(Availability::Ok) },
        baseline: WindowValues { values: [(scope("a"), ba), (scope("b"), bb)].into_iter().collect(), ..WindowValues::unavailable(Availability::Ok) },
    };
    let mut t: SignalTable = [
        ("itl_p95", two(0.0317, 0.0248, 0.025, 0.0248)),
        ("queue_p95", two(13.2, 1.95, 0.28, 0.28)),
        ("running_avg", two(3.15, 9.21, 5.0, 5.0)),
        ("generation_tokens_rate", two(289.0, 682.0, 500.0, 500.0)),
        ("running_recent", two(1.63, 11.8, 5.0, 5.0)),
        ("generation_tokens_recent", two(110.0, 822.0, 500.0, 500.0)),
    ]
    .into_iter()
    .map(|(s, v)| (s.to_string(), v))
    .collect();
    if with_recent {
        // Asked for `a` alone.
        let one = |w: f64, b: f64| SignalValues {
            window: WindowValues { values: [(scope("a"), w)].into_iter().collect(), ..WindowValues::unavailable(Availability::Ok) },
            baseline: WindowValues { values: [(scope("a"), b)].into_iter().collect(), ..WindowValues::unavailable(Availability::Ok) },
        };
        let part: SignalTable =
            [("itl_p95_recent", one(0.050, 0.025)), ("queue_p95_recent", one(0.285, 1.97))].into_iter().map(|(s, v)| (s.to_string(), v)).collect();
        judge::merge_late(&mut t, part);
    }
    t
}

#[test]
fn the_last_minutes_are_read_only_where_the_lead_signal_moved_and_the_rule_did_not_hold() {
    let rules = crate::rules::load_builtin().unwrap();
    let p = params();
    let table = late_decode_table(false);
    // ITL up 1.28x on `a` without slow-decode holding; `b` steady.
    assert_eq!(judge::late_scopes(&rules, &table, &p), [scope("a")].into());
    // A window no longer than the last minutes has nothing more to read.
    let short = RunParams { window: TimeRange { start: p.window.end - chrono::Duration::minutes(5), end: p.window.end }, ..p.clone() };
    assert!(judge::late_scopes(&rules, &table, &short).is_empty());
    // Read for `a`: slow-decode is named there, from those minutes; `b` stays healthy.
    let table = late_decode_table(true);
    let judged = judge::judge_late(&rules, &table, &p, &[scope("a")].into());
    let f = judged.ranked.findings.iter().find(|f| f.rule == "slow-decode").expect("slow-decode named");
    assert_eq!((f.scope.clone(), f.recent.as_ref().map(|r| r.range_seconds)), (scope("a"), Some(300)));
    assert!(judged.ranked.healthy.iter().any(|c| c.rule == "slow-decode" && c.scope == scope("b")));
    // Without the second reading the same table names nothing for `a`.
    assert!(!judge::judge(&rules, &table, &p).ranked.findings.iter().any(|f| f.rule == "slow-decode"));
}

#[test]
fn which_scopes_get_the_last_minutes_is_the_rule_files_condition() {
    let p = params();
    let table = late_decode_table(false);
    let with_gate = |when: Option<&str>| {
        let mut rules = crate::rules::load_builtin().unwrap();
        let r = rules.rules.iter_mut().find(|r| r.id == "slow-decode").unwrap();
        r.recent_when = when.map(|t| crate::rules::load::Condition { text: t.to_string(), expr: crate::rules::expr::parse(t).unwrap(), at: (0, 0) });
        judge::late_scopes(&rules, &table, &p)
    };
    assert_eq!(with_gate(Some("itl_p95 >= 1.1x baseline")), [scope("a")].into());
    // `a`'s ITL rose 1.28x: a stricter condition leaves it out.
    assert!(with_gate(Some("itl_p95 >= 1.5x baseline")).is_empty());
    // A condition that cannot be decided (a signal with no value) reads nothing.
    assert!(with_gate(Some("itl_p99 >= 1.1x baseline")).is_empty());
    // `recent = true` without a condition: every scope where the rule did not hold.
    assert_eq!(with_gate(None), [scope("a"), scope("b")].into());
}

#[test]
fn with_no_data_in_the_window_nothing_counts_as_evaluated() {
    let rules = crate::rules::load_builtin().unwrap();
    let empty = SignalValues { window: WindowValues::unavailable(Availability::Ok), baseline: WindowValues::unavailable(Availability::Ok) };
    let table: SignalTable = [("kv_usage_max".to_string(), empty)].into_iter().collect();
    assert!(!judge::any_data(&rules, &table, &params()));
    let judged = judge::judge(&rules, &table, &params());
    assert_eq!(judged.evaluated, 0);
    assert!(judged.ranked.findings.is_empty() && judged.ranked.healthy.is_empty());
    assert_eq!(judged.coverage.evaluated, 0);
}

/// Evidence of `signal` (a ratio) that held, with `value` and no baseline, limits or trend.
fn evidence(signal: &str, value: f64) -> Evidence {
    Evidence::held(signal, Some(value))
}

#[test]
fn affected_replicas_are_those_crossing_the_limit_the_scope_crossed() {
    let e = Evidence {
        threshold: ">= 95%".into(),
        limits: vec![Limit { label: ">= 95%".into(), value: 0.95, side: crate::report::LimitSide::AtOrAbove }],
        ..evidence("kv_usage_max", 0.97)
    };
    let samples: Vec<Sample> = [("i1", 0.99), ("i2", 0.5), ("i3", 0.96), ("i3", 0.97)]
        .iter()
        .map(|(i, v)| Sample { labels: labels(&[("instance", i)]).into(), t: 0.0, v: *v })
        .collect();
    let r = follow_up::affected_replicas(&samples, &e, "instance");
    assert_eq!((r.affected, r.total, r.limit.as_str()), (vec!["i1".to_string(), "i3".to_string()], 3, ">= 95%"));
}

#[test]
fn follow_ups_ask_every_trend_breakdown_and_the_cache_configuration() {
    let p = params();
    let r = |q: &str| Request::Instant { query: q.into(), time: p.window.end };
    let fu = follow_up::FollowUps {
        trends: [("s".to_string(), ("q".to_string(), r("b"), r("w")))].into_iter().collect(),
        breakdowns: vec![None, Some((r("x"), "s".into()))],
        cache: Some(r("c")),
        ..Default::default()
    };
    assert_eq!(fu.reads().asks(), vec![r("b"), r("c"), r("w"), r("x")]);
}

#[test]
fn a_signals_baseline_and_window_trends_are_one_range_query_split_back_into_two() {
    let p = params();
    let range = |r: &crate::report::TimeRange| Request::Range { query: "q".into(), start: r.start, end: r.end, step_seconds: 60 };
    let (b, w) = (range(&p.baseline), range(&p.window));
    let fu = follow_up::FollowUps { trends: [("s".to_string(), ("q".to_string(), b.clone(), w.clone()))].into_iter().collect(), ..Default::default() };
    let joined = Request::Range { query: "q".into(), start: p.baseline.start, end: p.window.end, step_seconds: 60 };
    let plan = fu.reads();
    assert_eq!(plan.asks(), vec![joined.clone()], "the baseline ends where the window starts");
    // Every step of the joined range, one series.
    let steps = (p.window.end - p.baseline.start).num_seconds() / 60;
    let points: Vec<(f64, f64)> = (0..=steps).map(|k| ((p.baseline.start.timestamp() + 60 * k) as f64, k as f64)).collect();
    let mut asked = Answers::new();
    asked.insert(
        joined.clone(),
        Ok(Response { data: Data::Matrix(vec![crate::source::Series { labels: labels(&[("model_name", "a")]), points }]), warnings: vec![], infos: vec![] }),
    );
    assert!(plan.more(&asked).is_empty());
    let answers = plan.answers(asked);
    let pts = |r: &Request| match answers.get(r) {
        Some(Ok(Response { data: Data::Matrix(s), .. })) => s[0].points.clone(),
        other => panic!("{other:?}"),
    };
    let (bp, wp) = (pts(&b), pts(&w));
    assert_eq!((bp.first().map(|p| p.0), bp.last().map(|p| p.0)), (Some(p.baseline.start.timestamp() as f64), Some(p.baseline.end.timestamp() as f64)));
    assert_eq!((wp.first().map(|p| p.0), wp.last().map(|p| p.0)), (Some(p.window.start.timestamp() as f64), Some(p.window.end.timestamp() as f64)));
    assert_eq!(bp.len() + wp.len(), steps as usize + 2, "the point where they touch is in both");
    // A recording made before joining holds the two range queries: they are asked instead, and
    // one it does not hold either gets the error of the first way it was asked.
    let not_recorded = |q: &str| Err(crate::source::SourceError::NotRecorded { request: q.into(), file: "r.json".into() });
    let mut old = Answers::new();
    old.insert(joined, not_recorded("joined"));
    assert_eq!(plan.more(&old), vec![b.clone(), w.clone()]);
    let own = Ok(Response { data: Data::Matrix(vec![]), warnings: vec!["own".into()], infos: vec![] });
    old.insert(b.clone(), own.clone());
    old.insert(w.clone(), not_recorded("w"));
    assert!(plan.more(&old).is_empty());
    let answers = plan.answers(old);
    assert_eq!(answers.get(&b), Some(&own));
    assert!(matches!(answers.get(&w), Some(Err(crate::source::SourceError::NotRecorded { request, .. })) if request == "joined"), "{:?}", answers.get(&w));
}

/// A signal plan of `signals` alone, grouped by model and read per instance over 30 m.
fn plan_of(signals: BTreeMap<String, (plan::Planned, plan::Planned)>) -> plan::SignalPlan {
    plan::SignalPlan {
        signals,
        reads: Default::default(),
        ctx: crate::signals::QueryContext {
            selector: Selector::default(),
            group_by: vec!["model_name".into()],
            range: std::time::Duration::from_secs(1800),
            thresholds: Default::default(),
            buckets: Default::default(),
            replica_label: "instance".into(),
        },
        notes: Vec::new(),
    }
}

#[test]
fn a_bound_some_replicas_lack_leaves_that_histograms_burn_rates_not_evaluated_and_says_which() {
    let p = params();
    let at = |q: &str| Request::Instant { query: q.into(), time: p.window.end };
    let planned = |q: &str, histogram: (&str, bool), outlier: bool| plan::Planned {
        resolved: None,
        per_replica: outlier.then(|| {
            (
                "instance".to_string(),
                crate::signals::Reduction::Outlier(crate::signals::OutlierReading {
                    measure: crate::signals::OutlierMeasure::Ratio,
                    min_observations: 0,
                    range_seconds: 1800,
                    ranks: false,
                }),
            )
        }),
        availability: Availability::Ok,
        value: Some(at(q)),
        count: None,
        query: q.into(),
        metric: "h_bucket".into(),
        bounds: vec![],
        quantile: outlier.then_some(0.95),
        parts: None,
        histogram: Some((histogram.0.to_string(), histogram.1)),
        counts_from_buckets: None,
        sums: vec![],
        burn: None,
    };
    let signals: BTreeMap<String, (plan::Planned, plan::Planned)> = [
        ("outlier".to_string(), (planned("buckets", ("h", false), true), planned("buckets", ("h", false), true))),
        ("burn".to_string(), (planned("burn", ("h", true), false), planned("burn", ("h", true), false))),
        ("other_burn".to_string(), (planned("other", ("g", true), false), planned("other", ("g", true), false))),
    ]
    .into_iter()
    .collect();
    let plan = plan_of(signals);
    // r0 and r1 carry 0.25; r2 another layout without it.
    let rows: Vec<(&[(&str, &str)], f64)> = vec![
        (&[("model_name", "a"), ("instance", "r0"), ("le", "0.25")], 1.0),
        (&[("model_name", "a"), ("instance", "r0"), ("le", "+Inf")], 2.0),
        (&[("model_name", "a"), ("instance", "r1"), ("le", "0.25")], 1.0),
        (&[("model_name", "a"), ("instance", "r1"), ("le", "+Inf")], 2.0),
        (&[("model_name", "a"), ("instance", "r2"), ("le", "0.5")], 1.0),
        (&[("model_name", "a"), ("instance", "r2"), ("le", "+Inf")], 2.0),
    ];
    let mut answers = Answers::new();
    answers.insert(at("buckets"), Ok(vector(&rows)));
    answers.insert(at("burn"), Ok(vector(&[(&[("model_name", "a")], 3.0)])));
    answers.insert(at("other"), Ok(vector(&[(&[("model_name", "a")], 4.0)])));
    let mut warnings = Warnings::default();
    let (table, _) = assemble::signal_table(&plan, &answers, &["model_name".to_string()], &mut warnings);
    let burn = &table["burn"].window;
    assert!(matches!(&burn.availability, Availability::Failed(r) if r.text.contains("bucket bounds differ")), "{:?}", burn.availability);
    assert!(burn.values.is_empty(), "never a value read at a bound some replicas lack");
    assert_eq!(table["other_burn"].window.values, [(scope("a"), 4.0)].into_iter().collect(), "another histogram is unaffected");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].starts_with("h: not every replica has the bucket bounds") && warnings[0].contains("250 ms, 500 ms"), "{warnings:?}");
}

/// One per-replica bucket answer read by several plans (a quantile per scope, an outlier per
/// replica, a burn rate, observation counts from the `+Inf` bucket, and an outlier by another
/// replica label): the table, which builds the answer's rows once for all of them, gives each
/// exactly what filling that plan on its own gives.
#[test]
fn every_reader_of_a_shared_bucket_answer_gets_what_it_gets_alone() {
    let p = params();
    let at = |q: &str| Request::Instant { query: q.into(), time: p.window.end };
    let base = plan::Planned {
        resolved: None,
        per_replica: None,
        availability: Availability::Ok,
        value: Some(at("buckets")),
        count: None,
        query: "q".into(),
        metric: "h_bucket".into(),
        bounds: vec![],
        quantile: None,
        parts: None,
        histogram: Some(("h".into(), false)),
        counts_from_buckets: None,
        sums: vec![],
        burn: None,
    };
    let outlier = |label: &str| plan::Planned {
        per_replica: Some((
            label.into(),
            crate::signals::Reduction::Outlier(crate::signals::OutlierReading {
                measure: crate::signals::OutlierMeasure::Ratio,
                min_observations: 0,
                range_seconds: 1800,
                ranks: false,
            }),
        )),
        quantile: Some(0.95),
        ..base.clone()
    };
    let readers: Vec<(&str, plan::Planned)> = vec![
        ("p95", plan::Planned { quantile: Some(0.95), counts_from_buckets: Some(1800.0), ..base.clone() }),
        ("p50", plan::Planned { quantile: Some(0.5), ..base.clone() }),
        ("outlier", outlier("instance")),
        ("outlier_by_pod", outlier("pod")),
        (
            "burn",
            plan::Planned {
                burn: Some(crate::signals::BurnFromBuckets { good: vec![(vec!["0.25".into()], 1.0)], budget: 0.01 }),
                histogram: Some(("h".into(), true)),
                ..base.clone()
            },
        ),
    ];
    let signals: BTreeMap<String, (plan::Planned, plan::Planned)> = readers.iter().map(|(id, pl)| (id.to_string(), (pl.clone(), pl.clone()))).collect();
    let plan = plan_of(signals);
    let mut rows: Vec<(Vec<(&str, String)>, f64)> = Vec::new();
    for (model, replicas) in [("a", 3), ("b", 2)] {
        for r in 0..replicas {
            let slow = if model == "a" && r == 2 { 4.0 } else { 1.0 };
            for (le, share) in [("0.1", 0.3), ("0.25", 0.7), ("1", 0.98), ("+Inf", 1.0)] {
                let labels =
                    vec![("model_name", model.to_string()), ("instance", format!("{model}{r}")), ("pod", format!("pod-{model}{r}")), ("le", le.to_string())];
                rows.push((labels, (10.0 + r as f64) * if le == "+Inf" { 1.0 } else { share / slow }));
            }
        }
    }
    let rows: Vec<(Vec<(&str, &str)>, f64)> = rows.iter().map(|(l, v)| (l.iter().map(|(k, v)| (*k, v.as_str())).collect(), *v)).collect();
    let rows: Vec<(&[(&str, &str)], f64)> = rows.iter().map(|(l, v)| (l.as_slice(), *v)).collect();
    let mut answers = Answers::new();
    answers.insert(at("buckets"), Ok(vector(&rows)));
    let by = ["model_name".to_string()];
    let mut warnings = Warnings::default();
    let (table, _) = assemble::signal_table(&plan, &answers, &by, &mut warnings);
    assert!(warnings.is_empty(), "{warnings:?}");
    for (id, pl) in &readers {
        let alone = assemble::fill(pl, &answers, &by);
        assert_eq!(table[*id].window, alone, "{id}");
        assert!(!alone.values.is_empty(), "{id} has values");
    }
    assert_eq!(table["outlier"].window.culprits[&scope("a")]["instance"], "a2");
    assert_eq!(table["outlier_by_pod"].window.culprits[&scope("a")]["pod"], "pod-a2");
    assert_eq!(table["p95"].window.counts[&scope("b")], (10.0 + 11.0) * 1800.0);
}

/// Sums of one counter's rates asked by several signals (HTTP error shares and the request rate,
/// attributed to models through the running gauge; finished, aborted and failed requests, and
/// their spread over replicas) are answered by one read each, and every signal still gets what its
/// own PromQL gives, evaluated by the local engine on the same series, in both windows.
#[tokio::test]
async fn sums_of_one_counter_answered_by_one_read_are_what_their_own_queries_give() {
    use crate::local::Store;
    let p = params();
    let t0 = p.baseline.start.timestamp_millis();
    let mut store = Store::new();
    let mut counter = |pairs: &[(&str, &str)], per_min: f64, from_min: i64| {
        store.add(labels(pairs), (from_min..=60).map(|i| (t0 + i * 60_000, per_min * (i - from_min) as f64)));
    };
    for (model, inst, load) in [("m1", "a:8000", 30.0), ("m1", "b:8000", 10.0), ("m2", "c:8000", 4.0)] {
        for (status, share) in [("2xx", 0.9), ("4xx", 0.07), ("5xx", 0.03)] {
            // The 5xx of replica b start in the window only.
            let from = if status == "5xx" && inst == "b:8000" { 35 } else { 0 };
            counter(
                &[("__name__", "http_requests_total"), ("instance", inst), ("job", "vllm"), ("status", status), ("handler", "/v1/completions")],
                load * share,
                from,
            );
        }
        // A cache-aware router renders every prompt on its worker first, which vLLM 0.32 answers
        // with a 4xx: no user's error, left out by the signals and by the read they share.
        counter(&[("__name__", "http_requests_total"), ("instance", inst), ("job", "vllm"), ("status", "4xx"), ("handler", "/v1/completions/render")], load, 0);
        // A router's load probes on a route the engine does not serve (handler "none"), all 404.
        counter(&[("__name__", "http_requests_total"), ("instance", inst), ("job", "vllm"), ("status", "4xx"), ("handler", "none")], 0.4, 0);
        for (reason, share) in [("stop", 0.8), ("length", 0.15), ("abort", 0.04), ("error", 0.01)] {
            if model == "m2" && reason == "error" {
                continue;
            }
            counter(
                &[("__name__", "vllm:request_success_total"), ("model_name", model), ("instance", inst), ("job", "vllm"), ("finished_reason", reason)],
                load * share,
                0,
            );
        }
        counter(&[("__name__", "vllm:num_requests_running"), ("model_name", model), ("instance", inst), ("job", "vllm")], 0.0, 0);
        counter(&[("__name__", "vllm:num_requests_waiting"), ("model_name", model), ("instance", inst), ("job", "vllm")], 0.0, 0);
    }
    let store = std::sync::Arc::new(store);
    let names: BTreeSet<String> =
        ["http_requests_total", "vllm:request_success_total", "vllm:num_requests_running", "vllm:num_requests_waiting"].into_iter().map(String::from).collect();
    let rules = crate::rules::load_builtin().unwrap();
    let disc = discover::Discovery { window_names: names.clone(), baseline_names: names, ..Default::default() };
    let ctx = query_ctx(&rules, &p);
    let needed = plan::needed_signals(&rules);
    let plan = plan::plan_signals(&rules, &needed, ctx, &p, &disc, &mut Warnings::default());
    let sum_of = |w: &fetch::Way| matches!(w.then, Some(fetch::Cut::Sum { .. }));
    let shared: BTreeSet<String> = plan
        .reads
        .wants
        .values()
        .flatten()
        .filter(|w| sum_of(w))
        .filter_map(|w| if let Request::Instant { query, .. } = &w.ask { Some(query.clone()) } else { None })
        .collect();
    assert_eq!(shared.len(), 2, "one read of each counter: {shared:#?}");
    let asks = plan.reads.asks();
    for q in &shared {
        assert!(asks.iter().any(|r| matches!(r, Request::Range { query, .. } if query == q)), "{q} is asked once for both windows");
    }
    let source: std::sync::Arc<dyn crate::source::Source> = std::sync::Arc::new(crate::source::local::LocalSource::new(store.clone(), "test", "local"));
    let deadline = std::time::Duration::from_secs(30);
    let (shared_answers, sent) = fetch::read(&source, &plan.reads, 4, deadline, std::time::Instant::now()).await;
    assert_eq!(sent, asks.len());
    // A recording made before reads were shared holds each sum's own range query instead: the
    // sums are then asked as they were recorded (after the shared read alone, which it does not
    // hold either), once for both windows, and come out the same.
    let not_recorded = SourceError::NotRecorded { file: "old.json".into(), request: String::new() };
    let earlier: std::sync::Arc<dyn crate::source::Source> =
        std::sync::Arc::new(Earlier { inner: source.clone(), missing: shared.clone(), error: not_recorded });
    let (older, sent) = fetch::read(&earlier, &plan.reads, 4, deadline, std::time::Instant::now()).await;
    let sums = plan.reads.wants.values().filter(|ways| ways.iter().any(sum_of)).count();
    // The shared reads the recording does not hold are not counted (a replay counts what it
    // answered); each sum's own query is asked once for both windows.
    assert_eq!(sent, asks.len() - shared.len() + sums / 2, "each sum asked once for both windows");
    let mut compared = 0;
    for answers in [&shared_answers, &older] {
        for (id, (w, b)) in &plan.signals {
            for pl in [w, b] {
                if pl.availability != Availability::Ok || pl.per_replica.is_some() || pl.sums.is_empty() {
                    continue;
                }
                let time = match pl.sums[0].0 {
                    Request::Instant { time, .. } => time,
                    _ => unreachable!(),
                };
                let req = Request::Instant { query: pl.query.clone(), time };
                let own = run_queries(&source, vec![req.clone()], 1, std::time::Duration::from_secs(30)).await;
                let mut expected = assemble::by_scope(own[&req].as_ref().unwrap(), &p.group_by);
                expected.retain(|_, v| !v.is_nan());
                let got = assemble::fill(pl, answers, &p.group_by).values;
                assert!(!expected.is_empty(), "{id}: {}", pl.query);
                assert_eq!(expected.keys().collect::<Vec<_>>(), got.keys().collect::<Vec<_>>(), "{id}: {}", pl.query);
                for (scope, v) in &expected {
                    assert!((v - got[scope]).abs() <= 1e-9 * v.abs().max(1.0), "{id} {scope:?}: {v} from its own query, {} from the shared read", got[scope]);
                }
                compared += 1;
            }
        }
    }
    assert!(compared >= 16, "{compared} signal windows compared");
}

/// A source that has not recorded the per-replica reads as explain now asks them (a recording made
/// before): only the queries an earlier build asked in their place.
struct Earlier {
    inner: std::sync::Arc<dyn crate::source::Source>,
    missing: BTreeSet<String>,
    /// What the missing queries get.
    error: SourceError,
}

impl crate::source::Source for Earlier {
    fn send<'a>(&'a self, req: &'a Request) -> futures::future::BoxFuture<'a, Result<crate::source::Exchange, crate::source::SourceError>> {
        if req.query().is_some_and(|q| self.missing.contains(q)) {
            let error = self.error.clone();
            return Box::pin(async move { Err(error) });
        }
        self.inner.send(req)
    }

    fn info(&self) -> crate::report::SourceInfo {
        self.inner.info()
    }
}

/// The per-replica bucket reads are asked unaggregated and summed by vllm-diag as they are decoded:
/// every signal over those histograms (quantiles per model, outliers per replica, burn rates,
/// observation counts) gets what the server's own `sum by (le, model_name, instance)` gives, in
/// both windows, also where a replica has two series per bound (two engines) and a series has no
/// replica label at all; and a recording made before, holding the server-side sums, replays to
/// the same values.
#[tokio::test]
async fn per_replica_bucket_reads_summed_by_vllm_diag_are_what_the_servers_sums_give() {
    use crate::local::Store;
    let p = params();
    let t0 = p.baseline.start.timestamp_millis();
    let mut store = Store::new();
    let les = ["0.05", "0.1", "0.5", "1", "+Inf"];
    let histograms = ["vllm:time_to_first_token_seconds_bucket", "vllm:inter_token_latency_seconds_bucket"];
    for (h, name) in histograms.iter().enumerate() {
        // (model, instance, engine, requests per minute, how slow: the share under each bound shrinks)
        let replicas: [(&str, Option<&str>, &str, f64, f64); 6] = [
            ("m1", Some("a:8000"), "0", 30.0, 1.0),
            ("m1", Some("b:8000"), "0", 12.0, 1.0),
            ("m1", Some("b:8000"), "1", 9.0, 1.2),
            ("m1", Some("c:8000"), "0", 20.0, 2.0 + h as f64),
            ("m2", Some("d:8000"), "0", 8.0, 1.0),
            ("m2", None, "0", 5.0, 2.0),
        ];
        for (model, instance, engine, per_min, slow) in replicas {
            for (i, le) in les.iter().enumerate() {
                let share: f64 = [0.3, 0.6, 0.9, 0.99, 1.0][i];
                let share = share.powf(slow);
                let mut l = vec![("__name__", *name), ("model_name", model), ("job", "vllm"), ("engine", engine), ("le", *le)];
                if let Some(inst) = instance {
                    l.push(("instance", inst));
                }
                // The load doubles in the window, the slow replicas slower still.
                let points = (0..=60).map(|m| {
                    let total = per_min * (m as f64 + (m - 30).max(0) as f64);
                    (t0 + m * 60_000, (total * share * if m > 30 { 0.9 } else { 1.0 }).floor())
                });
                store.add(labels(&l), points);
            }
        }
    }
    let store = std::sync::Arc::new(store);
    let names: BTreeSet<String> = histograms.iter().map(|s| s.to_string()).collect();
    let rules = crate::rules::load_builtin().unwrap();
    let bounds = crate::signals::parse_bounds(&les.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let buckets: BTreeMap<String, Vec<crate::signals::Bound>> = histograms.iter().map(|h| (h.to_string(), bounds.clone())).collect();
    let disc = discover::Discovery { window_names: names.clone(), baseline_names: names, buckets: buckets.clone() };
    let ctx = QueryContext { buckets: std::sync::Arc::new(buckets), ..query_ctx(&rules, &p) };
    let needed = plan::needed_signals(&rules);
    let plan = plan::plan_signals(&rules, &needed, ctx, &p, &disc, &mut Warnings::default());
    let raw: Vec<&String> = plan.reads.reading.summed.keys().collect();
    assert_eq!(raw.len(), 2, "one unaggregated read per histogram an outlier reads: {raw:#?}");
    for q in &raw {
        assert!(q.starts_with("rate(") && !q.contains("sum"), "{q}");
        assert!(plan.reads.asks().iter().any(|r| matches!(r, Request::Range { query, .. } if &query == q)), "{q} is asked once for both windows");
    }

    let local: std::sync::Arc<dyn crate::source::Source> = std::sync::Arc::new(crate::source::local::LocalSource::new(store.clone(), "test", "local"));
    let deadline = std::time::Duration::from_secs(30);
    let read = |source: std::sync::Arc<dyn crate::source::Source>| {
        let plan = plan.reads.clone();
        async move { fetch::read(&source, &plan, 4, deadline, std::time::Instant::now()).await.0 }
    };
    // As explain reads them now; as the server's sums, asked under the same requests; and from a
    // recording that holds only the server's sums.
    let summed_here = read(local.clone()).await;
    let mut by_server = Answers::new();
    for (req, answer) in run_queries(&local, plan.reads.asks(), 4, deadline).await {
        let answer = match req.query().and_then(|q| plan.reads.reading.summed.get(q)) {
            Some((_, earlier)) => {
                let old = req.with_query(earlier).unwrap();
                run_queries(&local, vec![old.clone()], 1, deadline).await.remove(&old).unwrap()
            }
            None => answer,
        };
        by_server.insert(req, answer);
    }
    let by_server = plan.reads.answers(by_server);
    let missing: BTreeSet<String> = plan.reads.reading.summed.keys().cloned().collect();
    let not_recorded = SourceError::NotRecorded { file: "old.json".into(), request: String::new() };
    let replayed = read(std::sync::Arc::new(Earlier { inner: local.clone(), missing: missing.clone(), error: not_recorded })).await;
    // A live server (or a proxy) that refuses the unaggregated read, or whose answer is too large to
    // read: the server's sum is asked instead.
    let too_large = SourceError::Decode { url: "http://prom:9090".into(), detail: "response larger than 67108864 bytes".into() };
    let refused = read(std::sync::Arc::new(Earlier { inner: local.clone(), missing, error: too_large })).await;
    let table = |answers: &Answers| assemble::signal_table(&plan, answers, &p.group_by, &mut Warnings::default()).0;
    let (here, server, older) = (table(&summed_here), table(&by_server), table(&replayed));
    assert_eq!(table(&refused), server, "a refused unaggregated read falls back to the server's sum");
    let mut compared = 0;
    for (id, (w, _)) in &plan.signals {
        if w.availability != Availability::Ok || w.histogram.is_none() {
            continue;
        }
        for (side, (a, b, c)) in [
            ("window", (&here[id].window, &server[id].window, &older[id].window)),
            ("baseline", (&here[id].baseline, &server[id].baseline, &older[id].baseline)),
        ] {
            assert!(!b.values.is_empty(), "{id} ({side}) has values");
            assert_eq!(a.values.keys().collect::<Vec<_>>(), b.values.keys().collect::<Vec<_>>(), "{id} ({side})");
            for (scope, v) in &b.values {
                assert!((v - a.values[scope]).abs() <= 1e-9 * v.abs().max(1.0), "{id} ({side}) {scope:?}: {v} summed by the server, {} here", a.values[scope]);
            }
            assert_eq!(a.culprits, b.culprits, "{id} ({side})");
            assert_eq!(a.counts.keys().collect::<Vec<_>>(), b.counts.keys().collect::<Vec<_>>(), "{id} ({side})");
            assert_eq!(b, c, "{id} ({side}): a recording of the server's sums replays to them");
            compared += 1;
        }
    }
    assert!(compared >= 8, "{compared} signal windows compared");
    // The two engines of b:8000 are one replica; c:8000 is the slow one (and m2's has no name).
    assert_eq!(
        here["ttft_replica_outlier"].window.culprits.get(&scope("m1")).map(|c| c["instance"].as_str()),
        Some("c:8000"),
        "{:?}",
        here["ttft_replica_outlier"].window
    );
}

/// Answers `up` at once and never answers anything else.
struct Stalls;

impl crate::source::Source for Stalls {
    fn send<'a>(&'a self, req: &'a Request) -> futures::future::BoxFuture<'a, Result<crate::source::Exchange, crate::source::SourceError>> {
        if req.query() == Some("up") {
            let ex = crate::source::Exchange {
                http_status: 200,
                content_type: "application/json".into(),
                body: r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.into(),
            };
            return Box::pin(async { Ok(ex) });
        }
        Box::pin(futures::future::pending())
    }

    fn info(&self) -> crate::report::SourceInfo {
        crate::report::SourceInfo { kind: crate::report::SourceKind::Prometheus, url: "http://prom:9090".into(), selector: String::new() }
    }
}

/// A query the run stopped waiting for is recorded as the timeout it was, so its replay times out
/// the same way (not "not recorded: record it again").
#[tokio::test]
async fn a_query_cut_off_by_the_deadline_replays_as_the_same_timeout() {
    let p = params();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("run.json");
    let recorder = std::sync::Arc::new(crate::source::record::Recorder::new(std::sync::Arc::new(Stalls)));
    let source: std::sync::Arc<dyn crate::source::Source> = recorder.clone();
    let requests = vec![Request::Instant { query: "up".into(), time: p.window.end }, Request::Instant { query: "stalls".into(), time: p.window.end }];
    let live = run_queries(&source, requests.clone(), 2, std::time::Duration::from_millis(50)).await;
    assert!(matches!(live[&requests[1]], Err(SourceError::Timeout { .. })), "{:?}", live[&requests[1]]);
    recorder.save(&path, &p, None).expect("save");
    let (replay, _) = crate::source::record::Replay::open(&path).expect("open");
    let replay: std::sync::Arc<dyn crate::source::Source> = std::sync::Arc::new(replay);
    let replayed = run_queries(&replay, requests.clone(), 2, std::time::Duration::from_secs(5)).await;
    assert_eq!(replayed, live);
}

/// A trend's points each sum up the trend range before them. The baseline's first points would
/// show what came before the baseline (the tail of an earlier incident), so they start once that
/// range lies inside it; a signal read over its own fixed range keeps every point and says which
/// range it is.
#[test]
fn a_baseline_trend_starts_once_its_range_lies_inside_the_baseline() {
    let p = params();
    let range = |q: &str, r: &crate::report::TimeRange| Request::Range { query: q.into(), start: r.start, end: r.end, step_seconds: 60 };
    let fu = follow_up::FollowUps {
        trends: [("own", "a"), ("fixed", "f")].iter().map(|(id, q)| (id.to_string(), (q.to_string(), range(q, &p.baseline), range(q, &p.window)))).collect(),
        fixed_range: [("fixed".to_string(), std::time::Duration::from_secs(3600))].into_iter().collect(),
        trend_range: std::time::Duration::from_secs(180),
        step: 60,
        ..Default::default()
    };
    let mut answers = Answers::new();
    for (_, b, w) in fu.trends.values() {
        for (req, r) in [(b, &p.baseline), (w, &p.window)] {
            let points: Vec<(f64, f64)> = (0..=(r.end - r.start).num_seconds() / 60).map(|k| ((r.start.timestamp() + 60 * k) as f64, 1.0)).collect();
            answers.insert(
                req.clone(),
                Ok(Response {
                    data: Data::Matrix(vec![crate::source::Series { labels: labels(&[("model_name", "a")]), points }]),
                    warnings: vec![],
                    infos: vec![],
                }),
            );
        }
    }
    let judged = vec![crate::report::Finding {
        evidence: vec![evidence("own", 1.0), evidence("fixed", 1.0)],
        ..crate::report::Finding::bare("r", crate::report::Severity::Warning, scope("a"))
    }];
    let rules = crate::rules::load_builtin().unwrap();
    let read = follow_up::read(&fu, &answers, &judged, &rules, &SignalTable::new(), &[], &Default::default(), &p, &mut Warnings::default());
    let findings: Vec<_> = judged.into_iter().zip(read).map(|(f, part)| follow_up::build(f, part)).collect();
    let own = findings[0].evidence[0].series.as_ref().expect("own trend");
    let (b0, bs) = (p.baseline.start.timestamp() as f64, (p.baseline.end - p.baseline.start).num_seconds() / 60 + 1);
    assert_eq!(own.baseline.first().map(|x| x.0), Some(b0 + 180.0), "{:?}", own.baseline);
    assert_eq!(own.baseline.len() as i64, bs - 3);
    assert_eq!(own.window.first().map(|x| x.0), Some(p.window.start.timestamp() as f64), "the window keeps its first points");
    assert_eq!(own.range_seconds, 180);
    let fixed = findings[0].evidence[1].series.as_ref().expect("fixed trend");
    assert_eq!((fixed.baseline.len() as i64, fixed.range_seconds), (bs, 3600));
}

/// A reading of the window's last five minutes, over a window shorter than that, is the whole
/// window's: its evidence says so rather than naming minutes it did not read.
#[test]
fn a_last_minutes_reading_over_a_shorter_window_is_titled_as_the_whole_window() {
    let rules = crate::rules::load_builtin().unwrap();
    let titled = |signal: &str| {
        let mut e = evidence(signal, 0.5);
        e.title = rules.signals[signal].title.clone();
        e
    };
    let finding = |evidence: Vec<Evidence>| crate::report::Finding {
        evidence,
        ..crate::report::Finding::bare("kv-cache-pressure", crate::report::Severity::Critical, scope("a"))
    };
    let all = || vec![finding(vec![titled("preemption_recent"), titled("itl_p95_recent"), titled("itl_p95")])];
    let retitled = |window: u64| {
        let f = all().remove(0);
        let parts = finish::Parts { clipped: judge::clipped_titles(&f, &rules, std::time::Duration::from_secs(window)), ..Default::default() };
        vec![finish::build(f, parts)]
    };
    let short = retitled(180);
    let titles: Vec<&str> = short[0].evidence.iter().map(|e| e.title.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Share of time with preemptions (the whole window, under 5 min)",
            "P95 inter-token latency (the whole window, under 5 min)",
            "P95 inter-token latency"
        ]
    );
    assert_eq!(retitled(1800), all(), "a window longer than the reading keeps its titles");
}

#[test]
fn what_else_moved_reads_replica_by_replica_only_where_the_fleet_is_counted_and_small() {
    let p = params();
    let rules = crate::rules::load_builtin().unwrap();
    let names: BTreeSet<String> = ["vllm:num_requests_running", "vllm:kv_cache_usage_perc"].into_iter().map(String::from).collect();
    let disc = discover::Discovery { window_names: names.clone(), baseline_names: names, ..Default::default() };
    let ctx = query_ctx(&rules, &p);
    let signal_plan = plan::plan_signals(&rules, &plan::needed_signals(&rules), ctx, &p, &disc, &mut Warnings::default());
    let none = plan::SignalPlan { signals: BTreeMap::new(), ..signal_plan.clone() };
    let per_replica = |replicas: Option<usize>| {
        let mut warnings = Warnings::default();
        let m = moved::plan(&rules, &signal_plan, &none, &Selector::default(), &p, replicas, &mut warnings);
        let keys: Vec<String> = m.watched.iter().filter(|(_, w)| w.per_replica).map(|(k, _)| k.clone()).collect();
        (keys, m.requests.len(), warnings)
    };
    let (keys, requests, warnings) = per_replica(Some(4));
    assert_eq!(keys, vec!["kv_usage_avg@replica".to_string()], "{warnings:?}");
    assert!(warnings.is_empty(), "{warnings:?}");
    // Past the cap: per model only, one query fewer, and a warning that says why.
    let (keys, fewer, warnings) = per_replica(Some(moved::MAX_REPLICAS_WATCHED + 1));
    assert!(keys.is_empty());
    assert!(fewer < requests, "{fewer} requests, {requests} with the replicas");
    assert!(warnings.iter().any(|w| w.contains("kv_usage_avg watched per model only") && w.contains("257 values of instance")), "{warnings:?}");
    // Uncounted (no running gauge to count replicas on): per model only, without a warning.
    let (keys, _, warnings) = per_replica(None);
    assert!(keys.is_empty() && warnings.is_empty(), "{keys:?} {warnings:?}");
}

/// A two-replica fleet: the replica capped at 8 queues (TTFT P95 0.74 s against
/// 0.07 s: 14x), the one running 32 decodes a batch of 25 (ITL P95 2.4x). Both branches of
/// replica-outlier hold, each about another replica.
fn two_outliers(itl_high: f64) -> SignalTable {
    let with = |v: f64, base: f64, culprit: Option<&str>| SignalValues {
        window: WindowValues {
            culprits: culprit.map(|c| (scope("a"), [("instance".to_string(), c.to_string())].into_iter().collect())).into_iter().collect(),
            ..values(v)
        },
        baseline: values(base),
    };
    [
        ("itl_replica_outlier", with(itl_high, 1.0, Some("big:8000"))),
        ("itl_replica_gap", with(0.05, 0.0, Some("big:8000"))),
        ("ttft_replica_outlier", with(14.0, 1.0, Some("capped:8000"))),
        ("ttft_replica_gap", with(0.67, 0.0, Some("capped:8000"))),
        ("kv_replica_outlier", with(1.1, 1.0, Some("big:8000"))),
        ("kv_replica_gap", with(0.02, 0.0, Some("big:8000"))),
    ]
    .into_iter()
    .map(|(s, v)| (s.to_string(), v))
    .collect()
}

#[test]
fn a_finding_names_the_replica_of_the_branch_that_decided_it() {
    let rules = crate::rules::load_builtin().unwrap();
    let p = params();
    let named = |table: &SignalTable| {
        let judged = judge::judge(&rules, table, &p);
        let f = judged.ranked.findings.iter().find(|f| f.rule == "replica-outlier").cloned();
        f.map(|f| f.scope.get("instance").cloned())
    };
    // Both branches held: the TTFT outlier (14x) is further past its line than the ITL one
    // (2.4x), so the capped replica is named, not the first signal's (ITL's) replica.
    assert_eq!(named(&two_outliers(2.4)), Some(Some("capped:8000".to_string())));
    // The ITL branch alone holds (TTFT's does not): the replica it is about.
    let mut itl_only = two_outliers(2.4);
    itl_only.get_mut("ttft_replica_gap").unwrap().window.values.insert(scope("a"), 0.1);
    assert_eq!(named(&itl_only), Some(Some("big:8000".to_string())));
    // The ITL branch does not hold (1.4x): its replica is never named although it comes first.
    assert_eq!(named(&two_outliers(1.4)), Some(Some("capped:8000".to_string())));
    // Two deciding signals naming different replicas name neither.
    let split = vec!["itl_replica_outlier".to_string(), "ttft_replica_outlier".to_string()];
    assert!(judge::culprit_of(&split, &two_outliers(2.4), &scope("a")).is_empty());
    let one = vec!["ttft_replica_outlier".to_string(), "ttft_replica_gap".to_string()];
    assert_eq!(judge::culprit_of(&one, &two_outliers(2.4), &scope("a")).get("instance").map(String::as_str), Some("capped:8000"));
}

#[test]
fn the_stall_share_is_read_from_bindings_reads_when_the_baseline_touches_the_window() {
    // Right before the window: the stall share's subquery is not asked; binding's generated tokens
    // and running peak are read from the baseline's first step on (and cut back to the window for
    // binding), with the waiting peak beside them. A day back: the subquery is asked, and binding's
    // reads as they are.
    let rules = crate::rules::load_builtin().unwrap();
    let names: BTreeSet<String> =
        ["vllm:generation_tokens_total", "vllm:num_requests_running", "vllm:num_requests_waiting"].into_iter().map(String::from).collect();
    let disc = discover::Discovery { window_names: names.clone(), baseline_names: names.clone(), ..Default::default() };
    let needed: BTreeSet<String> = ["stall_share".to_string()].into();
    let asked = |p: &RunParams| -> (Vec<Request>, fetch::ReadPlan) {
        let ctx = query_ctx(&rules, p);
        let plan = plan::plan_signals(&rules, &needed, ctx, p, &disc, &mut Warnings::default());
        let mut reads = plan.reads.clone();
        binding::add_reads(binding::plan(&Selector::default(), p, &names).as_ref(), &plan, &rules, &mut reads);
        (reads.asks(), reads)
    };
    let adjacent = params();
    let (asks, reads) = asked(&adjacent);
    assert!(asks.iter().all(|r| r.query().is_some_and(|q| !q.contains("avg_over_time(("))), "the subquery was asked: {asks:#?}");
    let from_baseline: Vec<&Request> = asks.iter().filter(|r| matches!(r, Request::Range { start, .. } if *start == adjacent.baseline.start)).collect();
    assert_eq!(from_baseline.len(), 3, "{asks:#?}");
    assert!(from_baseline.iter().any(|r| r.query().is_some_and(|q| q.contains("max_over_time(vllm:num_requests_waiting"))), "{asks:#?}");
    let generation = binding::plan(&Selector::default(), &adjacent, &names).and_then(|b| b.generation).unwrap();
    assert!(matches!(reads.wants[&generation][0].then, Some(fetch::Cut::Span(..))), "{:?}", reads.wants[&generation]);
    let day = RunParams {
        baseline: TimeRange { start: adjacent.window.start - chrono::Duration::days(1), end: adjacent.window.end - chrono::Duration::days(1) },
        ..adjacent.clone()
    };
    let (asks, _) = asked(&day);
    assert!(asks.iter().any(|r| r.query().is_some_and(|q| q.contains("avg_over_time(("))), "no subquery asked: {asks:#?}");
    assert!(asks.iter().all(|r| !matches!(r, Request::Range { start, .. } if *start < day.window.start)), "{asks:#?}");
}

#[test]
fn bindings_reads_are_asked_unaggregated_and_reduced_per_replica_as_read() {
    // Each of binding's reads is sent without its `sum by`/`max by` and folded by the grouping and
    // replica labels as decoded, its grouped query kept for a recording made before. A query some
    // other read asks as it is keeps binding's read grouped by the server: how a query is decoded
    // holds for every request of it.
    let rules = crate::rules::load_builtin().unwrap();
    let names: BTreeSet<String> =
        ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"].into_iter().map(String::from).collect();
    let p = params();
    let disc = discover::Discovery { window_names: names.clone(), baseline_names: names.clone(), ..Default::default() };
    let ctx = query_ctx(&rules, &p);
    let signal_plan = plan::plan_signals(&rules, &BTreeSet::new(), ctx, &p, &disc, &mut Warnings::default());
    let bplan = binding::plan(&Selector::default(), &p, &names).unwrap();
    let labels: Vec<String> = p.group_by.iter().cloned().chain(["instance".to_string()]).collect();
    let mut reads = fetch::ReadPlan::default();
    binding::add_reads(Some(&bplan), &signal_plan, &rules, &mut reads);
    let kv = bplan.kv.clone().unwrap();
    let sent = &reads.wants[&kv][0].ask;
    assert_eq!(sent.query(), Some("max_over_time(vllm:kv_cache_usage_perc[60s])"), "{sent:?}");
    assert_eq!(reads.reading.maxed[sent.query().unwrap()], (labels.clone(), kv.query().unwrap().to_string()));
    let running = &reads.wants[&bplan.running][0].ask;
    assert_eq!(reads.reading.summed[running.query().unwrap()], (labels, bplan.running.query().unwrap().to_string()));
    assert!(reads.reading.summed.values().chain(reads.reading.maxed.values()).all(|(_, grouped)| grouped.contains(" by (")));

    let taken = kv.with_query("max_over_time(vllm:kv_cache_usage_perc[60s])").unwrap();
    let mut reads = fetch::ReadPlan::whole([taken]);
    binding::add_reads(Some(&bplan), &signal_plan, &rules, &mut reads);
    assert_eq!(reads.wants[&kv][0].ask, kv, "asked as it is elsewhere: grouped by the server");
    assert!(reads.reading.maxed.is_empty());
    assert!(reads.reading.summed.contains_key(running.query().unwrap()));
}
