use std::collections::BTreeMap;

use super::detect::*;
use super::plan::*;
use super::*;
use crate::prom::Labels;
use crate::report::{EventKind, Scope, Warnings};
use crate::source::{Data, Response, Sample, Series, SourceError};

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn secs(s: &str) -> f64 {
    t(s).timestamp() as f64
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn span() -> (TimeRange, TimeRange) {
    (
        TimeRange { start: t("2026-01-15T08:00:00Z"), end: t("2026-01-15T09:00:00Z") },
        TimeRange { start: t("2026-01-15T09:00:00Z"), end: t("2026-01-15T10:00:00Z") },
    )
}

fn names() -> BTreeSet<String> {
    ["vllm:num_requests_running", "vllm:prompt_tokens_total", "vllm:cache_config_info"].iter().map(|s| s.to_string()).collect()
}

fn the_plan() -> EventPlan {
    let (b, w) = span();
    let sel = Selector::parse(r#"namespace="prod""#).unwrap();
    let by = vec!["model_name".to_string()];
    let n = names();
    plan(&EventContext { selector: &sel, group_by: &by, replica_label: "instance", names: &n, steps: STEPS }, &b, &w)
}

fn target(i: u32, model: &str) -> Labels {
    labels(&[
        ("instance", &format!("{model}-{i}:8000")),
        ("job", "vllm"),
        ("namespace", "prod"),
        ("pod", &format!("{model}-7d9f8b6c5-x{i}abc")),
        ("model_name", model),
    ])
}

fn vector(rows: Vec<Labels>, time: f64) -> Response {
    Response { data: Data::Vector(rows.into_iter().map(|labels| Sample { labels: labels.into(), t: time, v: 1.0 }).collect()), warnings: vec![], infos: vec![] }
}

fn matrix(series: Vec<(Labels, Vec<(f64, f64)>)>) -> Response {
    Response { data: Data::Matrix(series.into_iter().map(|(labels, points)| Series { labels, points }).collect()), warnings: vec![], infos: vec![] }
}

fn empty() -> Response {
    matrix(vec![])
}

/// Answers for the plan, both rounds: every probe empty unless given; the replica map lists
/// three llama replicas and one qwen replica.
fn answers(plan: &mut EventPlan, given: Vec<(Probe, Response)>) -> BTreeMap<Request, Result<Response, SourceError>> {
    let mut given: BTreeMap<Probe, Response> = given.into_iter().collect();
    // The first round's whole-span checks name the targets whose changes the test gives.
    let named = |probes: &[Probe]| -> Vec<Labels> {
        let mut seen = BTreeSet::new();
        probes
            .iter()
            .filter_map(|p| given.get(p))
            .flat_map(|r| points(r).into_iter().map(|(l, _, _)| labels(&[("instance", label(l, "instance")), ("job", label(l, "job"))])).collect::<Vec<_>>())
            .filter(|l| seen.insert(l.clone()))
            .collect()
    };
    let firsts: Vec<(Probe, Vec<Labels>)> = [(Probe::PresenceAny, vec![Probe::Appear, Probe::Vanish]), (Probe::ConfigAny, vec![Probe::ConfigAppear])]
        .into_iter()
        .map(|(any, of)| (any, named(&of)))
        .collect();
    for (any, rows) in firsts {
        if !rows.is_empty() && !given.contains_key(&any) {
            given.insert(any, vector(rows, secs("2026-01-15T10:00:00Z")));
        }
    }
    let answer = |probe: &Probe| match probe {
        Probe::Map => vector((0..3).map(|i| target(i, "llama")).chain([target(0, "qwen")]).collect(), 0.0),
        p => given.get(p).cloned().unwrap_or_else(empty),
    };
    let mut out = BTreeMap::new();
    for (probe, req) in &plan.spans[0].requests {
        out.insert(req.clone(), Ok(answer(probe)));
    }
    follow_up(plan, &out);
    for (probe, req) in &plan.spans[0].requests {
        out.entry(req.clone()).or_insert_with(|| Ok(answer(probe)));
    }
    out
}

/// Read the events of `given` (and a warning list).
fn read_all(plan: &mut EventPlan, given: Vec<(Probe, Response)>, warnings: &mut Warnings) -> Vec<Event> {
    let a = answers(plan, given);
    read(plan, &[&a], warnings)
}

#[test]
fn the_baseline_and_the_window_are_one_span_when_they_touch_and_two_when_not() {
    let (b, w) = span();
    assert_eq!(spans(&b, &w), vec![TimeRange { start: b.start, end: w.end }]);
    let far = TimeRange { start: b.start - chrono::Duration::days(1), end: b.end - chrono::Duration::days(1) };
    assert_eq!(spans(&far, &w), vec![far, w]);
}

#[test]
fn the_query_count_does_not_depend_on_the_fleet_and_target_series_drop_the_model_matcher() {
    let p = the_plan();
    assert_eq!(p.spans.len(), 1);
    assert_eq!(p.spans[0].step, 120, "two hours over 60 steps");
    assert_eq!(p.requests().len(), 9, "the replica map, the starting configurations and the dating of resets, arrivals, departures and configurations come in a second round, only after a change");
    let any = |probe: Probe| p.spans[0].requests.iter().find(|(q, _)| *q == probe).map(|(_, r)| r.describe()).unwrap();
    assert_eq!(
        any(Probe::PresenceAny),
        r#"group by (instance, job) (count_over_time(up{namespace="prod"}[7320s])) unless (group by (instance, job) (count_over_time(up{namespace="prod"}[120s] offset 7200s)) and group by (instance, job) (count_over_time(up{namespace="prod"}[120s])))"#
    );
    assert_eq!(
        any(Probe::ConfigAny),
        r#"group by (instance, job) (count_over_time(vllm:cache_config_info{namespace="prod"}[7200s]) unless count_over_time(vllm:cache_config_info{namespace="prod"}[120s] offset 7200s))"#
    );
    let text: Vec<String> = p.requests().iter().map(|r| r.describe()).collect();
    let up = text.iter().find(|q| q.starts_with("min_over_time(up")).unwrap();
    assert_eq!(up, r#"min_over_time(up{namespace="prod"}[120s]) == 0"#);
    // Every query parses as PromQL.
    for q in &text {
        if !q.starts_with('{') {
            promql_parser::parser::parse(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        }
    }
}

#[test]
fn a_quiet_fleet_lists_no_replica_and_a_change_asks_only_for_the_replicas_it_names() {
    let mut p = the_plan();
    let quiet: BTreeMap<Request, Result<Response, SourceError>> = p.requests().into_iter().map(|r| (r, Ok(empty()))).collect();
    assert!(follow_up(&mut p, &quiet).is_empty());
    let mut p = the_plan();
    let mut a = quiet.clone();
    let start = p.spans[0].requests.iter().find(|(probe, _)| *probe == Probe::ProcessStart).map(|(_, r)| r.clone()).unwrap();
    let row = labels(&[("instance", "llama-1:8000"), ("job", "vllm")]);
    a.insert(start, Ok(matrix(vec![(row, vec![(secs("2026-01-15T09:10:30Z"), secs("2026-01-15T09:10:07Z"))])])));
    let more = follow_up(&mut p, &a);
    assert_eq!(more.len(), 2, "the map of the changed replica and the replica counts per model");
    // A target missing at the span's start: its arrival is dated, and only its own.
    let mut q = the_plan();
    let mut b = quiet.clone();
    let any = q.spans[0].requests.iter().find(|(probe, _)| *probe == Probe::PresenceAny).map(|(_, r)| r.clone()).unwrap();
    b.insert(any, Ok(vector(vec![labels(&[("instance", "llama-9:8000"), ("job", "vllm")])], secs("2026-01-15T10:00:00Z"))));
    let asked: Vec<String> = follow_up(&mut q, &b).iter().map(|r| r.describe()).collect();
    assert!(asked.contains(&r#"count_over_time(up{namespace="prod",instance=~"llama-9:8000"}[120s]) unless count_over_time(up{namespace="prod",instance=~"llama-9:8000"}[120s] offset 120s)"#.to_string()), "{asked:#?}");
    assert_eq!(asked.len(), 4, "the map, the counts, the arrival and the departure: {asked:#?}");
    assert_eq!(
        more[0].describe(),
        r#"group by (instance, job, namespace, pod, model_name) (last_over_time(vllm:num_requests_running{namespace="prod",instance=~"llama-1:8000",server=""}[7200s]))"#
    );
    assert_eq!(
        more[1].describe(),
        r#"count by (model_name) (group by (model_name, instance) (last_over_time(vllm:num_requests_running{namespace="prod",server=""}[7200s])))"#
    );
}

#[test]
fn counter_resets_are_found_over_the_whole_span_then_dated_only_for_the_replicas_that_reset() {
    let mut p = the_plan();
    let any = p.spans[0].requests.iter().find(|(probe, _)| *probe == Probe::ResetAny).map(|(_, r)| r.clone()).unwrap();
    assert!(matches!(&any, Request::Instant { .. }), "one evaluation over the span: {}", any.describe());
    assert_eq!(any.describe(), r#"max by (instance, job, model_name) (resets(vllm:prompt_tokens_total{namespace="prod"}[7800s])) > 0"#);
    let quiet: BTreeMap<Request, Result<Response, SourceError>> = p.requests().into_iter().map(|r| (r, Ok(empty()))).collect();
    assert!(follow_up(&mut p.clone(), &quiet).is_empty(), "no reset: nothing to date");
    // Replica 1 reset: the second round dates it, and asks for that replica only.
    let row = labels(&[("instance", "llama-1:8000"), ("job", "vllm"), ("model_name", "llama")]);
    let dated = (row.clone(), vec![(secs("2026-01-15T09:12:00Z"), 1.0), (secs("2026-01-15T09:14:00Z"), 1.0)]);
    let a = answers(&mut p, vec![(Probe::ResetAny, vector(vec![row], secs("2026-01-15T10:00:00Z"))), (Probe::CounterReset, matrix(vec![dated]))]);
    let step = p.spans[0].requests.iter().find(|(probe, _)| *probe == Probe::CounterReset).map(|(_, r)| r.describe()).expect("asked in the second round");
    // The range is GAP plus a step (two minutes over this two-hour span).
    assert_eq!(step, r#"max by (instance, job, model_name) (resets(vllm:prompt_tokens_total{namespace="prod",instance=~"llama-1:8000"}[720s])) > 0"#);
    let events = read(&p, &[&a], &mut Warnings::default());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].kind, events[0].time), (EventKind::Restart, t("2026-01-15T09:12:00Z")));
}

#[test]
fn pods_name_their_deployment() {
    assert_eq!(deployment_of("llama-3-8b-7d9f8b6c5-x2abc"), Some("llama-3-8b"));
    assert_eq!(deployment_of("solo"), None);
    assert_eq!(deployment_of("a-b"), None);
}

#[test]
fn a_restart_wave_is_one_event_with_exact_times_and_a_count_of_the_scope() {
    let mut p = the_plan();
    let start = |i: u32, at: &str| {
        (labels(&[("instance", &format!("llama-{i}:8000")), ("job", "vllm")]), vec![(secs(at) + 30.0, secs(at)), (secs(at) + 60.0, secs(at))])
    };
    let resp = matrix(vec![start(0, "2026-01-15T09:10:07Z"), start(2, "2026-01-15T09:11:02Z")]);
    let mut warnings = Warnings::default();
    let events = read_all(&mut p, vec![(Probe::ProcessStart, resp)], &mut warnings);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!((e.kind, e.time, e.until), (EventKind::Restart, t("2026-01-15T09:10:07Z"), Some(t("2026-01-15T09:11:02Z"))));
    assert_eq!(e.detail, "2 of 3 replicas restarted");
    assert_eq!(e.replicas, vec!["llama-0:8000", "llama-2:8000"]);
    assert_eq!(e.scope.get("model_name").map(String::as_str), Some("llama"));
}

#[test]
fn a_process_started_before_the_span_is_not_a_restart_in_it() {
    let mut p = the_plan();
    let resp = matrix(vec![(labels(&[("instance", "llama-0:8000"), ("job", "vllm")]), vec![(secs("2026-01-15T08:00:30Z"), secs("2026-01-15T07:00:00Z"))])]);
    let events = read_all(&mut p, vec![(Probe::ProcessStart, resp)], &mut Warnings::default());
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn a_config_change_says_what_changed_and_a_restart_with_the_same_config_is_no_change() {
    let mut p = the_plan();
    let cfg = |i: u32, blocks: &str| {
        labels(&[("instance", &format!("llama-{i}:8000")), ("job", "vllm"), ("engine", "0"), ("num_gpu_blocks", blocks), ("block_size", "16")])
    };
    let start = vector((0..3).map(|i| cfg(i, "2000")).collect(), secs("2026-01-15T08:00:00Z"));
    let appear = matrix(vec![
        (cfg(0, "900"), vec![(secs("2026-01-15T09:20:00Z"), 1.0)]),
        (cfg(1, "900"), vec![(secs("2026-01-15T09:21:00Z"), 1.0)]),
        // Replica 2 restarted with the same configuration: its series came back unchanged.
        (cfg(2, "2000"), vec![(secs("2026-01-15T09:22:00Z"), 1.0)]),
    ]);
    let events = read_all(&mut p, vec![(Probe::ConfigStart, start), (Probe::ConfigAppear, appear)], &mut Warnings::default());
    assert_eq!(events.len(), 1, "{events:?}");
    let e = &events[0];
    assert_eq!(e.kind, EventKind::ConfigChange);
    assert_eq!(e.detail, "num_gpu_blocks 2000 -> 900 on 2 of 3 replicas");
    assert_eq!(e.before.get("num_gpu_blocks").map(String::as_str), Some("2000"));
    assert_eq!(e.after.get("num_gpu_blocks").map(String::as_str), Some("900"));
    assert_eq!(e.time, t("2026-01-15T09:20:00Z"));
}

#[test]
fn down_then_up_is_two_events_and_a_target_still_down_at_the_end_only_one() {
    let mut p = the_plan();
    let l0 = labels(&[("instance", "llama-0:8000"), ("job", "vllm")]);
    let l1 = labels(&[("instance", "llama-1:8000"), ("job", "vllm")]);
    // One point per step (two minutes over this two-hour span).
    let step = p.spans[0].step as f64;
    let run = |from: &str, n: i64| (0..n).map(|k| (secs(from) + step * k as f64, 0.0)).collect::<Vec<_>>();
    let resp = matrix(vec![(l0, run("2026-01-15T09:10:00Z", 4)), (l1, run("2026-01-15T09:54:00Z", 4))]);
    let events = read_all(&mut p, vec![(Probe::Down, resp)], &mut Warnings::default());
    let kinds: Vec<(EventKind, String)> = events.iter().map(|e| (e.kind, e.time.format("%H:%M:%S").to_string())).collect();
    assert_eq!(kinds, vec![(EventKind::TargetDown, "09:08:00".into()), (EventKind::TargetUp, "09:16:00".into()), (EventKind::TargetDown, "09:52:00".into())]);
}

#[test]
fn replicas_that_leave_for_good_are_removed_and_a_whole_model_leaving_is_a_model_removed() {
    let mut p = the_plan();
    let tl = |i: u32, m: &str| labels(&[("instance", &format!("{m}-{i}:8000")), ("job", "vllm")]);
    let at = secs("2026-01-15T09:30:00Z") + PRESENCE.as_secs() as f64;
    let vanish = matrix(vec![(tl(1, "llama"), vec![(at, 1.0)]), (tl(0, "qwen"), vec![(at, 1.0)])]);
    let events = read_all(&mut p, vec![(Probe::Vanish, vanish)], &mut Warnings::default());
    let got: Vec<(EventKind, String)> = events.iter().map(|e| (e.kind, e.detail.clone())).collect();
    assert_eq!(got, vec![(EventKind::ReplicaRemoved, "1 of 3 replicas removed".into()), (EventKind::ModelRemoved, "model gone (1 replica removed)".into())]);
    assert!(events.iter().all(|e| e.time == t("2026-01-15T09:30:00Z")));
}

/// How many replicas each model had over the span.
fn counts(of: &[(&str, f64)]) -> Response {
    let samples = of.iter().map(|(m, n)| Sample { labels: labels(&[("model_name", m)]).into(), t: secs("2026-01-15T10:00:00Z"), v: *n }).collect();
    Response { data: Data::Vector(samples), warnings: vec![], infos: vec![] }
}

#[test]
fn where_every_target_appears_in_the_span_the_data_begins_there_and_first_starts_are_no_restarts() {
    // Prometheus began collecting at 09:10 (or the fleet did not exist before): every target
    // appears then, each process having started a little before its first scrape. Nothing
    // was added and nothing restarted; llama's third replica, twenty minutes later, was added.
    let tl = |i: u32, m: &str| labels(&[("instance", &format!("{m}-{i}:8000")), ("job", "vllm")]);
    let first = secs("2026-01-15T09:10:00Z");
    let later = secs("2026-01-15T09:30:00Z");
    let appear = matrix(vec![
        (tl(0, "llama"), vec![(first, 1.0)]),
        (tl(1, "llama"), vec![(first + 120.0, 1.0)]),
        (tl(2, "llama"), vec![(later, 1.0)]),
        (tl(0, "qwen"), vec![(first, 1.0)]),
    ]);
    let starts = matrix(vec![(tl(0, "llama"), vec![(first, first - 80.0)]), (tl(2, "llama"), vec![(later, later - 60.0)])]);
    let events_with = |starts: &Response, of: &[(&str, f64)]| {
        let mut p = the_plan();
        read_all(&mut p, vec![(Probe::Appear, appear.clone()), (Probe::ProcessStart, starts.clone()), (Probe::Counts, counts(of))], &mut Warnings::default())
    };
    let events = events_with(&starts, &[("llama", 3.0), ("qwen", 1.0)]);
    let got: Vec<(EventKind, String, String)> = events.iter().map(|e| (e.kind, e.time.format("%H:%M").to_string(), e.detail.clone())).collect();
    assert_eq!(got, vec![(EventKind::ReplicaAdded, "09:30".into(), "1 of 3 replicas added".into())]);
    // The same targets in a fleet that was already running (qwen had another replica all
    // along): they were added, and their first process starts are still not restarts.
    let events = events_with(&starts, &[("llama", 3.0), ("qwen", 2.0)]);
    let kinds: Vec<(EventKind, String)> = events.iter().map(|e| (e.kind, e.time.format("%H:%M").to_string())).collect();
    assert!(kinds.contains(&(EventKind::ReplicaAdded, "09:10".into())) && !kinds.iter().any(|(k, _)| *k == EventKind::Restart), "{events:?}");
    // A process that starts again after its target was first seen is a restart.
    let again = matrix(vec![(tl(0, "llama"), vec![(first, first - 80.0), (first + 1200.0, first + 1190.0)])]);
    let events = events_with(&again, &[("llama", 3.0), ("qwen", 1.0)]);
    let restarts: Vec<String> = events.iter().filter(|e| e.kind == EventKind::Restart).map(|e| e.time.format("%H:%M:%S").to_string()).collect();
    assert_eq!(restarts, vec!["09:29:50".to_string()], "{events:?}");
}

#[test]
fn a_flapping_target_is_neither_added_nor_removed() {
    let mut p = the_plan();
    let l = labels(&[("instance", "llama-1:8000"), ("job", "vllm")]);
    let appear = matrix(vec![(l.clone(), vec![(secs("2026-01-15T09:10:00Z"), 1.0), (secs("2026-01-15T09:20:00Z"), 1.0)])]);
    let vanish = matrix(vec![(l, vec![(secs("2026-01-15T09:15:00Z"), 1.0)])]);
    let events = read_all(&mut p, vec![(Probe::Appear, appear), (Probe::Vanish, vanish)], &mut Warnings::default());
    assert!(events.is_empty(), "{events:?}");
}

#[test]
fn a_rollout_and_a_new_image_are_tied_to_the_model_through_the_pod_names() {
    let mut p = the_plan();
    let d = labels(&[("namespace", "prod"), ("deployment", "llama")]);
    let generation = matrix(vec![(d.clone(), vec![(secs("2026-01-15T09:05:00Z"), 4.0)])]);
    let img = |i: &str| labels(&[("namespace", "prod"), ("deployment", "llama"), ("image", i)]);
    let start = vector(vec![img("vllm/vllm-openai:v0.8.5")], secs("2026-01-15T08:00:00Z"));
    let new = matrix(vec![(img("vllm/vllm-openai:v0.9.1"), vec![(secs("2026-01-15T09:06:00Z"), 1.0)])]);
    let events = read_all(&mut p, vec![(Probe::Generation, generation), (Probe::ImageStart, start), (Probe::ImageAppear, new)], &mut Warnings::default());
    let got: Vec<(EventKind, String, Option<&str>)> =
        events.iter().map(|e| (e.kind, e.detail.clone(), e.scope.get("model_name").map(String::as_str))).collect();
    assert_eq!(
        got,
        vec![
            (EventKind::Rollout, "Deployment prod/llama generation 4".into(), Some("llama")),
            (EventKind::VersionChange, "image vllm/vllm-openai:v0.8.5 -> vllm/vllm-openai:v0.9.1 (Deployment prod/llama)".into(), Some("llama")),
        ]
    );
}

#[test]
fn failed_probes_are_named_in_one_warning() {
    let mut p = the_plan();
    let mut a = answers(&mut p, vec![]);
    for (probe, req) in &p.spans[0].requests {
        if matches!(probe, Probe::Down | Probe::Xid) {
            a.insert(req.clone(), Err(SourceError::Timeout { url: "http://p".into(), after: Duration::from_secs(1) }));
        }
    }
    let mut warnings = Warnings::default();
    read(&p, &[&a], &mut warnings);
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].starts_with("change events: 2 of the event queries got no answer"), "{}", warnings[0]);
}

#[test]
fn the_deploy_is_the_start_of_the_last_wave() {
    let ev = |at: &str, kind: EventKind| Event {
        time: t(at),
        kind,
        scope: Scope::new(),
        detail: String::new(),
        replicas: vec![],
        of: None,
        until: None,
        before: BTreeMap::new(),
        after: BTreeMap::new(),
    };
    let events = vec![
        ev("2026-01-15T07:00:00Z", EventKind::Rollout),
        ev("2026-01-15T09:00:00Z", EventKind::Rollout),
        ev("2026-01-15T09:02:00Z", EventKind::Restart),
        ev("2026-01-15T09:30:00Z", EventKind::TargetDown),
    ];
    assert_eq!(last_deploy(&events).map(|e| e.time), Some(t("2026-01-15T09:00:00Z")));
    assert_eq!(last_deploy(&events[3..]), None);
}
