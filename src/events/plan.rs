//! The first round's queries for each span, and the second round's for the targets that changed
//! ([`follow_up`]), with the per-replica latencies read after a (re)start.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::prom::{escape_regex_literal, Labels, MatchOp, Matcher};
use crate::report::{Scope, TimeRange};
use crate::signals;
use crate::signals::queries::events as q;
use crate::source::{Request, Response, SourceError};

use super::detect::*;
use super::*;

/// The spans to read: the baseline and the window as one when they are no further apart than the
/// window is long (so a change between them is seen), else each on its own.
pub fn spans(baseline: &TimeRange, window: &TimeRange) -> Vec<TimeRange> {
    if baseline.start <= window.start && baseline.end + (window.end - window.start) >= window.start {
        vec![TimeRange { start: baseline.start, end: window.end.max(baseline.end) }]
    } else {
        vec![*baseline, *window]
    }
}

pub(super) fn present(name: &str, names: &BTreeSet<String>) -> Option<String> {
    signals::spellings(name).into_iter().find(|n| names.contains(n))
}

/// Labels with duplicates removed, in order.
pub(super) fn label_list(labels: &[&str]) -> String {
    let mut seen = BTreeSet::new();
    labels.iter().filter(|l| !l.is_empty() && seen.insert(**l)).copied().collect::<Vec<_>>().join(", ")
}

/// Plan the event queries for the baseline and the window.
pub fn plan(ctx: &EventContext, baseline: &TimeRange, window: &TimeRange) -> EventPlan {
    let spans = spans(baseline, window).into_iter().map(|span| plan_span(ctx, span)).collect();
    EventPlan { spans, group_by: ctx.group_by.to_vec(), replica_label: ctx.replica_label.to_string(), data_start: None }
}

pub(super) fn plan_span(ctx: &EventContext, span: TimeRange) -> SpanPlan {
    let len = span.duration().as_secs().max(1);
    let step = (len / ctx.steps.max(1)).max(15);
    let s = Duration::from_secs(step);
    let gap = GAP + s;
    let presence = PRESENCE.max(s);
    let by: Vec<&str> = ctx.group_by.iter().map(String::as_str).collect();
    // Target-level series carry no model label: they are read without the grouping matchers.
    let target = ctx.selector.without(ctx.group_by);
    let mut outside: Vec<String> = ctx.group_by.to_vec();
    outside.extend(["job", "instance", "pod", "container", ctx.replica_label].map(String::from));
    let cluster = ctx.selector.without(&outside);
    let range = |query: String| Request::Range { query, start: span.start, end: span.end, step_seconds: step };
    let at = |query: String, time: DateTime<Utc>| Request::Instant { query, time };
    let mut out = Vec::new();

    let mut keep = vec!["instance", "job", "namespace", "pod", ctx.replica_label];
    keep.extend(by.iter().copied());
    // Processes that started within the last GAP at each step, with their start time: a process
    // that came back under the same series and a new series (a replaced pod) alike.
    let start = target.series("process_start_time_seconds", &[]);
    out.push((Probe::ProcessStart, range(q::started_within(&start, gap))));
    // Counter resets: first over the whole span at once (every sample read once, an empty answer
    // on a quiet fleet); only the replicas that reset are dated step by step, in the second round.
    let resets = present("vllm:prompt_tokens_total", ctx.names).map(|counter| {
        let mut keep = vec!["instance", "job", ctx.replica_label];
        keep.extend(by.iter().copied());
        let c = ctx.selector.series(&counter, &[]);
        out.push((Probe::ResetAny, at(q::counter_reset(&label_list(&keep), &c, GAP + Duration::from_secs(len)), span.end)));
        (counter, label_list(&keep), gap)
    });
    let up = target.series("up", &[]);
    out.push((Probe::Down, range(q::target_down(&up, s))));
    // Targets that came or went, and configurations that changed: first over the whole span in
    // one evaluation each (the targets missing at its start or its end; the configuration series
    // its start did not have), dated step by step in the second round for those targets only.
    out.push((Probe::PresenceAny, at(q::presence_changed(&up, Duration::from_secs(len), presence), span.end)));
    if let Some(info) = present("vllm:cache_config_info", ctx.names) {
        out.push((Probe::ConfigAny, at(q::config_changed(&target.series(&info, &[]), Duration::from_secs(len), presence), span.end)));
    }
    out.push((Probe::Generation, range(q::generation_bumped(&cluster.series("kube_deployment_metadata_generation", &[]), s))));
    let images = cluster.series("kube_pod_container_info", &[]);
    out.push((Probe::ImageStart, at(q::images(&images), span.start)));
    out.push((Probe::ImageAppear, range(q::image_appeared(&images, s))));
    let xid = cluster.series("DCGM_FI_DEV_XID_ERRORS", &[]);
    out.push((Probe::Xid, range(q::xid_changed(&xid, s))));
    SpanPlan {
        span,
        step,
        requests: out,
        anchor: present("vllm:num_requests_running", ctx.names),
        keep: label_list(&keep),
        by: label_list(&by),
        replica_label: ctx.replica_label.to_string(),
        selector: ctx.selector.clone(),
        target,
        config: present("vllm:cache_config_info", ctx.names),
        resets,
        presence,
        warm: warm_histograms(ctx.names),
    }
}

/// The latency histograms present, for [`Probe::WarmTtft`] and [`Probe::WarmItl`].
pub(super) fn warm_histograms(names: &BTreeSet<String>) -> Vec<(Probe, String, String)> {
    let families: [(Probe, &[&str]); 2] = [
        (Probe::WarmTtft, &["vllm:time_to_first_token_seconds"]),
        (Probe::WarmItl, &["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"]),
    ];
    families
        .iter()
        .filter_map(|(probe, alts)| {
            alts.iter().find_map(|family| {
                let sum = present(&format!("{family}_sum"), names)?;
                let count = present(&format!("{family}_count"), names)?;
                Some((*probe, sum, count))
            })
        })
        .collect()
}

/// One replica's mean latencies step by step over a span ([`Probe::WarmTtft`], [`Probe::WarmItl`]):
/// (unix seconds, seconds) points, read only for the models where a replica (re)started.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplicaLatency {
    pub scope: Scope,
    pub replica: String,
    pub ttft: Vec<(f64, f64)>,
    pub itl: Vec<(f64, f64)>,
    /// The range each point's rate covers, seconds.
    pub range_seconds: u64,
}

/// The per-replica latencies the second round read (empty when no replica started in the spans).
pub fn replica_latency(plan: &EventPlan, answers: &[&BTreeMap<Request, Result<Response, SourceError>>]) -> Vec<ReplicaLatency> {
    let mut out: BTreeMap<(Scope, String), ReplicaLatency> = BTreeMap::new();
    for sp in &plan.spans {
        for (probe, req) in sp.requests.iter().filter(|(p, _)| matches!(p, Probe::WarmTtft | Probe::WarmItl)) {
            let Some(Ok(resp)) = answers.iter().find_map(|a| a.get(req)) else { continue };
            for (labels, t, v) in points(resp) {
                let replica = label(labels, &plan.replica_label).to_string();
                if replica.is_empty() || !v.is_finite() || v < 0.0 {
                    continue;
                }
                let scope: Scope = plan.group_by.iter().map(|g| (g.clone(), label(labels, g).to_string())).collect();
                let entry = out.entry((scope.clone(), replica.clone())).or_insert_with(|| ReplicaLatency {
                    scope,
                    replica,
                    range_seconds: warm_range(sp.step),
                    ..Default::default()
                });
                match probe {
                    Probe::WarmTtft => entry.ttft.push((t, v)),
                    _ => entry.itl.push((t, v)),
                }
            }
        }
    }
    let mut out: Vec<ReplicaLatency> = out.into_values().collect();
    for r in &mut out {
        for s in [&mut r.ttft, &mut r.itl] {
            s.sort_by(|a, b| a.0.total_cmp(&b.0));
            s.dedup_by(|a, b| a.0 == b.0);
        }
    }
    out
}

/// The range of the per-replica latency rates: two steps, two minutes at least (four samples at
/// a 30 s scrape interval), so each point holds a few requests.
pub(super) fn warm_range(step: u64) -> u64 {
    (2 * step).max(120)
}

/// The second round, sent with the findings' follow-ups and only when the first saw a change: the
/// replicas that changed, tied to their models (the targets, pods and Deployments named in the
/// answers, and nothing else: a quiet fleet of any size lists no replica), and the configuration
/// the changed targets had at the start. Adds the requests to the plan and returns them.
pub fn follow_up(plan: &mut EventPlan, answers: &BTreeMap<Request, Result<Response, SourceError>>) -> Vec<Request> {
    let mut added = Vec::new();
    for sp in &mut plan.spans {
        let rows = |probes: &[Probe]| -> Vec<Labels> {
            sp.requests
                .iter()
                .filter(|(p, _)| probes.contains(p))
                .filter_map(|(_, r)| answers.get(r)?.as_ref().ok())
                .flat_map(|resp| points(resp).into_iter().map(|(l, _, _)| l.clone()).collect::<Vec<_>>())
                .collect()
        };
        let values =
            |rows: &[Labels], label: &str| -> BTreeSet<String> { rows.iter().filter_map(|l| l.get(label).cloned()).filter(|v| !v.is_empty()).collect() };
        let targets = values(&rows(&[Probe::ProcessStart, Probe::Down, Probe::PresenceAny, Probe::ConfigAny]), "instance");
        let mut pods: Vec<String> = values(&rows(&[Probe::Xid]), "pod").iter().map(|p| escape_regex_literal(p)).collect();
        pods.extend(values(&rows(&[Probe::Generation, Probe::ImageAppear]), "deployment").iter().map(|d| format!("{}-.+", escape_regex_literal(d))));
        let alternation = |vs: Vec<String>| vs.join("|");
        let mut new = Vec::new();
        if let Some(anchor) = &sp.anchor {
            let mut anchors = Vec::new();
            for (label, vs) in [("instance", targets.iter().map(|t| escape_regex_literal(t)).collect::<Vec<_>>()), ("pod", pods)] {
                if !vs.is_empty() {
                    let m = Matcher { name: label.into(), op: MatchOp::Re, value: alternation(vs) };
                    anchors.push(sp.selector.series(anchor, &[m]));
                }
            }
            if !anchors.is_empty() {
                let whole = sp.span.duration();
                new.push((Probe::Map, Request::Instant { query: q::replica_map(&sp.keep, &anchors, whole), time: sp.span.end }));
                let counts = q::replica_counts(&sp.by, &sp.replica_label, &sp.selector.series(anchor, &[]), whole);
                new.push((Probe::Counts, Request::Instant { query: counts, time: sp.span.end }));
            }
        }
        let reset = values(&rows(&[Probe::ResetAny]), "instance");
        if let (Some((counter, keep, gap)), false) = (&sp.resets, reset.is_empty()) {
            let m = Matcher { name: "instance".into(), op: MatchOp::Re, value: alternation(reset.iter().map(|t| escape_regex_literal(t)).collect()) };
            let c = sp.selector.series(counter, &[m]);
            let query = q::counter_reset(keep, &c, *gap);
            new.push((Probe::CounterReset, Request::Range { query, start: sp.span.start, end: sp.span.end, step_seconds: sp.step }));
        }
        let only = |vs: &BTreeSet<String>| Matcher {
            name: "instance".into(),
            op: MatchOp::Re,
            value: alternation(vs.iter().map(|t| escape_regex_literal(t)).collect()),
        };
        let range = |query: String| Request::Range { query, start: sp.span.start, end: sp.span.end, step_seconds: sp.step };
        let (s, presence) = (Duration::from_secs(sp.step), sp.presence);
        let came_or_went = values(&rows(&[Probe::PresenceAny]), "instance");
        if !came_or_went.is_empty() {
            let up = sp.target.series("up", &[only(&came_or_went)]);
            new.push((Probe::Appear, range(q::appeared(&up, presence, s))));
            new.push((Probe::Vanish, range(q::vanished(&up, presence, s))));
        }
        let changed = values(&rows(&[Probe::ConfigAny]), "instance");
        if let (Some(info), false) = (&sp.config, changed.is_empty()) {
            let c = sp.target.series(info, &[only(&changed)]);
            new.push((Probe::ConfigAppear, range(q::config_appeared(&c, s))));
            new.push((Probe::ConfigStart, Request::Instant { query: c, time: sp.span.start }));
        }
        // A replica that (re)started or appeared: every replica of its model, mean latency step by
        // step, so its first minutes can be compared with its peers' (a cold start or not).
        let started = values(&rows(&[Probe::ProcessStart, Probe::ResetAny, Probe::PresenceAny]), "instance");
        if !started.is_empty() {
            let keep = label_list(&sp.by.split(", ").chain([sp.replica_label.as_str()]).collect::<Vec<_>>());
            let r = Duration::from_secs(warm_range(sp.step));
            for (probe, sum, count) in &sp.warm {
                let (sum, all, started) = (sp.selector.series(sum, &[]), sp.selector.series(count, &[]), sp.selector.series(count, &[only(&started)]));
                // Present through an outage of up to GAP: the peers' points stay while it is down.
                new.push((*probe, range(q::replica_mean_where_started(&keep, &sp.by, &sum, &all, &started, r, GAP))));
            }
        }
        added.extend(new.iter().map(|(_, r)| r.clone()));
        sp.requests.extend(new);
    }
    added
}
