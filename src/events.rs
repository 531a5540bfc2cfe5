//! Change events, read from the metrics alone: restarts, targets going down and coming back,
//! replicas and models appearing and vanishing, cache-configuration and image changes, rollouts,
//! GPU XID errors. [`plan`] writes the queries; [`read`] turns their answers into [`Event`]s.
//!
//! The number of queries does not depend on the fleet's size: nine per time span (one span when the
//! baseline and the window are no further apart than the window is long, else one each): range
//! queries over the span at a step of a 60th of it (15 s at least; a 240th when looking for a
//! deploy), and instant queries over the whole span for the changes that need many samples per
//! step to see (counter resets, targets arriving or leaving, new configuration series), each
//! returning only where something changed, so their answers stay small on a quiet fleet of any
//! size. Only when something changed does a second round ([`follow_up`], sent with the findings'
//! follow-ups) date those changes step by step for the targets named and nothing else, ask which
//! models the changed targets, pods and Deployments serve (target-level series such as `up`,
//! `process_start_time_seconds`, kube-state-metrics' and DCGM's carry no model label), the
//! configuration the changed targets started with, and how many replicas each model had (for "2 of
//! 3"): the queries of that round name only the changed targets, but the replica counts, one row
//! per model.
//!
//! How each kind is dated, and how exactly:
//! - `restart`: the value of `process_start_time_seconds` (exact) of every process that started in
//!   the span, under the same series or a new one (a replaced pod); without that series (vLLM in
//!   multiprocess mode exports none), the step at which a vLLM counter reset (within a step; a
//!   replica down longer than [`GAP`] between its two processes is missed there). Resets are
//!   first looked for over the whole span in one evaluation, and dated step by step in the second
//!   round for the replicas that reset only.
//! - `target-down` / `target-up`: the first and the last step with an `up` sample of 0.
//! - `replica-added` / `replica-removed`, `model-added` / `model-removed`: the first and the last
//!   sample of a target's `up` series (within a step), counted only when the target is not seen
//!   again (removed) or was not seen before (added) in the span; a scrape interval over
//!   [`PRESENCE`] would read as flapping and is ignored.
//! - `config-change`: a `vllm:cache_config_info` series appearing with other values of the
//!   configuration labels than its target's previous one.
//! - `rollout`: a Deployment's `kube_deployment_metadata_generation` rising; `version-change`: a
//!   Deployment's pods showing an image they did not run before (`kube_pod_container_info`).
//! - `gpu-error`: `DCGM_FI_DEV_XID_ERRORS` moving to a non-zero code.
//!
//! Changes of one kind on one scope less than [`WAVE`] apart are one event, dated by the first:
//! "2 of 3 replicas restarted".

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

use crate::prom::{escape_regex_literal, Labels, MatchOp, Matcher, Selector};
use crate::report::{Event, EventKind, Scope, TimeRange};
use crate::signals::{self, promql_duration};
use crate::source::{Data, Request, Response, SourceError};

/// The longest time between two samples of one replica across which a restart is still seen.
pub const GAP: Duration = Duration::from_secs(600);
/// The range over which a target counts as present: scrape intervals up to this are read right.
pub const PRESENCE: Duration = Duration::from_secs(120);
/// Changes of one kind on one scope closer than this are one event.
pub const WAVE: Duration = Duration::from_secs(300);
/// Steps per span when diagnosing: an event not dated exactly is dated within a sixtieth of the
/// span (a minute for a 30-minute window and its baseline). Every step costs the server a pass
/// over each target's `up`, reset counter and cache-info series, so finer steps are not free.
pub const STEPS: u64 = 60;
/// Steps per span when looking for the last deploy (`check --since deploy`, 6 hours): its time
/// opens the window, so it is dated more finely (90 s over 6 hours).
pub const DEPLOY_STEPS: u64 = 240;
/// The labels of `vllm:cache_config_info` that describe the cache, compared across a change.
/// Per-process labels (`engine`) and target labels are not among them.
pub const CONFIG_LABELS: &[&str] = &[
    "block_size",
    "cache_dtype",
    "num_gpu_blocks",
    "num_gpu_blocks_override",
    "num_cpu_blocks",
    "gpu_memory_utilization",
    "enable_prefix_caching",
    "prefix_caching_hash_algo",
    "sliding_window",
    "swap_space_bytes",
    "cpu_offload_gb",
    "kv_cache_memory_bytes",
    "kv_offloading_backend",
    "kv_offloading_size",
    "calculate_kv_scales",
    "kv_cache_size_tokens",
    "kv_cache_max_concurrency",
];

/// What a request of the plan asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Probe {
    /// Instant: the replicas that changed, with their scope, target and pod.
    Map,
    /// Instant: how many replicas each scope had in the span (one row per scope).
    Counts,
    ProcessStart,
    /// Instant, at the span's end: the replicas whose vLLM counters reset anywhere in the span.
    ResetAny,
    /// Second round, only for those: the step at which each reset.
    CounterReset,
    Down,
    /// Instant, at the span's end: targets seen in the span but not at its start or not at its
    /// end, the only ones that can have been added or removed.
    PresenceAny,
    /// Second round, only for those: the step at which each appeared or vanished.
    Appear,
    Vanish,
    /// Instant, at the span's start: each target's configuration.
    ConfigStart,
    /// Instant, at the span's end: targets with a cache-configuration series the span's start
    /// did not have, the only ones whose configuration can have changed.
    ConfigAny,
    /// Second round, only for those: when each configuration series appeared.
    ConfigAppear,
    Generation,
    /// Instant, at the span's start: each Deployment's images.
    ImageStart,
    ImageAppear,
    Xid,
    /// Second round, only for models with a replica that (re)started: every replica's mean time to
    /// first token and inter-token latency, step by step, for telling a cold start from a regression.
    WarmTtft,
    WarmItl,
}

/// One time span's requests.
#[derive(Debug, Clone)]
pub struct SpanPlan {
    pub span: TimeRange,
    pub step: u64,
    pub requests: Vec<(Probe, Request)>,
    /// For the second round ([`follow_up`]): the replica map's anchor gauge and labels, the
    /// selectors, and the configuration's series name.
    anchor: Option<String>,
    keep: String,
    /// The grouping labels and the replica label, for the replica counts.
    by: String,
    replica_label: String,
    selector: Selector,
    target: Selector,
    config: Option<String>,
    /// The counter whose resets date restarts, and the `resets(...)` query dating them, for the
    /// replicas [`Probe::ResetAny`] names: (counter, grouping labels, range).
    resets: Option<(String, String, String)>,
    /// The range over which a target counts as present ([`PRESENCE`], a step at least).
    presence: String,
    /// The latency histograms read per replica after a (re)start: (probe, `_sum` and `_count` names).
    warm: Vec<(Probe, String, String)>,
}

/// The event requests of a run and how to read them.
#[derive(Debug, Clone, Default)]
pub struct EventPlan {
    pub spans: Vec<SpanPlan>,
    pub group_by: Vec<String>,
    pub replica_label: String,
    /// Where the data itself begins, when the source knows (`--scrape`: its first round). What
    /// appears with it was first seen, not added.
    pub data_start: Option<DateTime<Utc>>,
}

impl EventPlan {
    pub fn requests(&self) -> Vec<Request> {
        self.spans.iter().flat_map(|s| s.requests.iter().map(|(_, r)| r.clone())).collect()
    }

    /// The coarsest step used: how precisely events are dated.
    pub fn step(&self) -> u64 {
        self.spans.iter().map(|s| s.step).max().unwrap_or(15)
    }
}

/// Where the run looks and with which names.
#[derive(Debug, Clone)]
pub struct EventContext<'a> {
    pub selector: &'a Selector,
    pub group_by: &'a [String],
    pub replica_label: &'a str,
    /// vLLM metric names present in the baseline or the window.
    pub names: &'a BTreeSet<String>,
    /// Steps per span ([`STEPS`] or [`DEPLOY_STEPS`]).
    pub steps: u64,
}

/// The spans to read: the baseline and the window as one when they are no further apart than the
/// window is long (so a change between them is seen), else each on its own.
pub fn spans(baseline: &TimeRange, window: &TimeRange) -> Vec<TimeRange> {
    if baseline.start <= window.start && baseline.end + (window.end - window.start) >= window.start {
        vec![TimeRange { start: baseline.start, end: window.end.max(baseline.end) }]
    } else {
        vec![*baseline, *window]
    }
}

fn present(name: &str, names: &BTreeSet<String>) -> Option<String> {
    signals::spellings(name).into_iter().find(|n| names.contains(n))
}

/// Labels with duplicates removed, in order.
fn label_list(labels: &[&str]) -> String {
    let mut seen = BTreeSet::new();
    labels.iter().filter(|l| !l.is_empty() && seen.insert(**l)).copied().collect::<Vec<_>>().join(", ")
}

/// Plan the event queries for the baseline and the window.
pub fn plan(ctx: &EventContext, baseline: &TimeRange, window: &TimeRange) -> EventPlan {
    let spans = spans(baseline, window).into_iter().map(|span| plan_span(ctx, span)).collect();
    EventPlan { spans, group_by: ctx.group_by.to_vec(), replica_label: ctx.replica_label.to_string(), data_start: None }
}

fn plan_span(ctx: &EventContext, span: TimeRange) -> SpanPlan {
    let len = span.duration().as_secs().max(1);
    let step = (len / ctx.steps.max(1)).max(15);
    let s = promql_duration(Duration::from_secs(step));
    let gap = promql_duration(GAP + Duration::from_secs(step));
    let presence = promql_duration(PRESENCE.max(Duration::from_secs(step)));
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
    out.push((Probe::ProcessStart, range(format!("{start} > (time() - {})", GAP.as_secs() + step))));
    // Counter resets: first over the whole span at once (every sample read once, an empty answer
    // on a quiet fleet); only the replicas that reset are dated step by step, in the second round.
    let resets = present("vllm:prompt_tokens_total", ctx.names).map(|counter| {
        let mut keep = vec!["instance", "job", ctx.replica_label];
        keep.extend(by.iter().copied());
        let whole = promql_duration(GAP + Duration::from_secs(len));
        let c = ctx.selector.series(&counter, &[]);
        out.push((Probe::ResetAny, at(format!("max by ({}) (resets({c}[{whole}])) > 0", label_list(&keep)), span.end)));
        (counter, label_list(&keep), gap.clone())
    });
    let up = target.series("up", &[]);
    out.push((Probe::Down, range(format!("min_over_time({up}[{s}]) == 0"))));
    // Targets that came or went, and configurations that changed: first over the whole span in
    // one evaluation each (the targets missing at its start or its end; the configuration series
    // its start did not have), dated step by step in the second round for those targets only.
    let whole = promql_duration(PRESENCE.max(Duration::from_secs(step)) + Duration::from_secs(len));
    let (at_start, targets) = (format!("offset {len}s"), "instance, job");
    out.push((
        Probe::PresenceAny,
        at(
            format!(
                "group by ({targets}) (count_over_time({up}[{whole}])) unless (group by ({targets}) (count_over_time({up}[{presence}] {at_start})) and group by ({targets}) (count_over_time({up}[{presence}])))"
            ),
            span.end,
        ),
    ));
    if let Some(info) = present("vllm:cache_config_info", ctx.names) {
        let c = target.series(&info, &[]);
        out.push((
            Probe::ConfigAny,
            at(format!("group by ({targets}) (count_over_time({c}[{}s]) unless count_over_time({c}[{presence}] {at_start}))", len), span.end),
        ));
    }
    let generation = |offset: &str| format!("max by (namespace, deployment) ({}{offset})", cluster.series("kube_deployment_metadata_generation", &[]));
    out.push((Probe::Generation, range(format!("{} > {}", generation(""), generation(&format!(" offset {s}"))))));
    let images = |offset: &str| {
        format!(
            "count by (namespace, deployment, image) (label_replace({}{offset}, \"deployment\", \"$1\", \"pod\", \"(.+)-[a-z0-9]+-[a-z0-9]+\"))",
            cluster.series("kube_pod_container_info", &[])
        )
    };
    out.push((Probe::ImageStart, at(images(""), span.start)));
    out.push((Probe::ImageAppear, range(format!("{} unless {}", images(""), images(&format!(" offset {s}"))))));
    let xid = cluster.series("DCGM_FI_DEV_XID_ERRORS", &[]);
    out.push((Probe::Xid, range(format!("{xid} != 0 and ({xid} != {xid} offset {s})"))));
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
fn warm_histograms(names: &BTreeSet<String>) -> Vec<(Probe, String, String)> {
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
fn warm_range(step: u64) -> u64 {
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
        let values = |rows: &[Labels], label: &str| -> BTreeSet<String> { rows.iter().filter_map(|l| l.get(label).cloned()).filter(|v| !v.is_empty()).collect() };
        let targets = values(&rows(&[Probe::ProcessStart, Probe::Down, Probe::PresenceAny, Probe::ConfigAny]), "instance");
        let mut pods: Vec<String> = values(&rows(&[Probe::Xid]), "pod").iter().map(|p| escape_regex_literal(p)).collect();
        pods.extend(values(&rows(&[Probe::Generation, Probe::ImageAppear]), "deployment").iter().map(|d| format!("{}-.+", escape_regex_literal(d))));
        let alternation = |vs: Vec<String>| vs.join("|");
        let mut new = Vec::new();
        if let Some(anchor) = &sp.anchor {
            let mut parts = Vec::new();
            for (label, vs) in [("instance", targets.iter().map(|t| escape_regex_literal(t)).collect::<Vec<_>>()), ("pod", pods)] {
                if !vs.is_empty() {
                    let m = Matcher { name: label.into(), op: MatchOp::Re, value: alternation(vs) };
                    parts.push(format!("last_over_time({}[{}])", sp.selector.series(anchor, &[m]), promql_duration(sp.span.duration())));
                }
            }
            if !parts.is_empty() {
                new.push((Probe::Map, Request::Instant { query: format!("group by ({}) ({})", sp.keep, parts.join(" or ")), time: sp.span.end }));
                let replicas = format!("group by ({}, {}) (last_over_time({}[{}]))", sp.by, sp.replica_label, sp.selector.series(anchor, &[]), promql_duration(sp.span.duration()));
                new.push((Probe::Counts, Request::Instant { query: format!("count by ({}) ({replicas})", sp.by), time: sp.span.end }));
            }
        }
        let reset = values(&rows(&[Probe::ResetAny]), "instance");
        if let (Some((counter, keep, gap)), false) = (&sp.resets, reset.is_empty()) {
            let m = Matcher { name: "instance".into(), op: MatchOp::Re, value: alternation(reset.iter().map(|t| escape_regex_literal(t)).collect()) };
            let c = sp.selector.series(counter, &[m]);
            let query = format!("max by ({keep}) (resets({c}[{gap}])) > 0");
            new.push((Probe::CounterReset, Request::Range { query, start: sp.span.start, end: sp.span.end, step_seconds: sp.step }));
        }
        let only = |vs: &BTreeSet<String>| Matcher { name: "instance".into(), op: MatchOp::Re, value: alternation(vs.iter().map(|t| escape_regex_literal(t)).collect()) };
        let range = |query: String| Request::Range { query, start: sp.span.start, end: sp.span.end, step_seconds: sp.step };
        let (s, presence) = (promql_duration(Duration::from_secs(sp.step)), &sp.presence);
        let came_or_went = values(&rows(&[Probe::PresenceAny]), "instance");
        if !came_or_went.is_empty() {
            let up = sp.target.series("up", &[only(&came_or_went)]);
            new.push((Probe::Appear, range(format!("count_over_time({up}[{presence}]) unless count_over_time({up}[{presence}] offset {s})"))));
            new.push((Probe::Vanish, range(format!("count_over_time({up}[{presence}] offset {s}) unless count_over_time({up}[{presence}])"))));
        }
        let changed = values(&rows(&[Probe::ConfigAny]), "instance");
        if let (Some(info), false) = (&sp.config, changed.is_empty()) {
            let c = sp.target.series(info, &[only(&changed)]);
            new.push((Probe::ConfigAppear, range(format!("{c} unless {c} offset {s}"))));
            new.push((Probe::ConfigStart, Request::Instant { query: c, time: sp.span.start }));
        }
        // A replica that (re)started or appeared: every replica of its model, mean latency step by
        // step, so its first minutes can be compared with its peers' (a cold start or not).
        let started = values(&rows(&[Probe::ProcessStart, Probe::ResetAny, Probe::PresenceAny]), "instance");
        if !started.is_empty() {
            let keep = label_list(&sp.by.split(", ").chain([sp.replica_label.as_str()]).collect::<Vec<_>>());
            let r = promql_duration(Duration::from_secs(warm_range(sp.step)));
            for (probe, sum, count) in &sp.warm {
                let mean = format!(
                    "sum by ({keep}) (rate({}[{r}])) / sum by ({keep}) (rate({}[{r}]))",
                    sp.selector.series(sum, &[]),
                    sp.selector.series(count, &[])
                );
                // Present through an outage of up to GAP: the peers' points stay while it is down.
                let models = format!("group by ({}) (last_over_time({}[{}]))", sp.by, sp.selector.series(count, &[only(&started)]), promql_duration(GAP));
                new.push((*probe, range(format!("({mean}) and on ({}) {models}", sp.by))));
            }
        }
        added.extend(new.iter().map(|(_, r)| r.clone()));
        sp.requests.extend(new);
    }
    added
}

/// One change of one replica (or Deployment, or GPU), before changes are merged into events.
#[derive(Debug, Clone, PartialEq)]
struct Change {
    time: DateTime<Utc>,
    kind: EventKind,
    scope: Scope,
    /// The replica's name, or the Deployment's, or the GPU's.
    who: String,
    before: BTreeMap<String, String>,
    after: BTreeMap<String, String>,
    note: String,
}

/// Who a target is: its scope and replica name.
#[derive(Debug, Clone, Default)]
struct Fleet {
    /// (instance, job) -> (scope, replica)
    targets: BTreeMap<(String, String), (Scope, String)>,
    /// (namespace, pod) -> (scope, replica)
    pods: BTreeMap<(String, String), (Scope, String)>,
    /// (namespace, deployment) -> scope
    deployments: BTreeMap<(String, String), Scope>,
    /// scope -> replica names (of those that changed)
    replicas: BTreeMap<Scope, BTreeSet<String>>,
    /// scope -> how many replicas it had in the span
    counts: BTreeMap<Scope, usize>,
}

impl Fleet {
    /// How many replicas `scope` had: counted in the span, or at least those that changed.
    fn total(&self, scope: &Scope) -> usize {
        self.counts.get(scope).copied().unwrap_or(0).max(self.replicas.get(scope).map_or(0, BTreeSet::len))
    }
}

/// The Deployment a pod belongs to, from its name (`<deployment>-<replicaset hash>-<suffix>`).
pub fn deployment_of(pod: &str) -> Option<&str> {
    let mut parts = pod.rsplitn(3, '-');
    let (_suffix, _hash, rest) = (parts.next()?, parts.next()?, parts.next()?);
    (!rest.is_empty()).then_some(rest)
}

fn label<'a>(l: &'a Labels, name: &str) -> &'a str {
    l.get(name).map_or("", String::as_str)
}

fn fleet(rows: &[Labels], group_by: &[String], replica_label: &str) -> Fleet {
    let mut f = Fleet::default();
    for l in rows {
        let scope: Scope = group_by.iter().map(|g| (g.clone(), label(l, g).to_string())).collect();
        let replica = label(l, replica_label).to_string();
        f.targets.insert((label(l, "instance").into(), label(l, "job").into()), (scope.clone(), replica.clone()));
        if let Some(pod) = l.get("pod") {
            f.pods.insert((label(l, "namespace").into(), pod.clone()), (scope.clone(), replica.clone()));
            if let Some(d) = deployment_of(pod) {
                f.deployments.insert((label(l, "namespace").into(), d.to_string()), scope.clone());
            }
        }
        f.replicas.entry(scope).or_default().insert(replica);
    }
    f
}

fn time(t: f64) -> Option<DateTime<Utc>> {
    if !t.is_finite() {
        return None;
    }
    Utc.timestamp_millis_opt((t * 1000.0).round() as i64).single()
}

/// Every (labels, time, value) of an answer, oldest first per series.
fn points(resp: &Response) -> Vec<(&Labels, f64, f64)> {
    match &resp.data {
        Data::Matrix(series) => series.iter().flat_map(|s| s.points.iter().map(move |(t, v)| (&s.labels, *t, *v))).collect(),
        Data::Vector(samples) => samples.iter().map(|s| (&*s.labels, s.t, s.v)).collect(),
        _ => Vec::new(),
    }
}

/// Read the answers into events, oldest first. Probes that failed are named in one warning: the
/// events they would have found are then missing, and the report says so.
pub fn read(plan: &EventPlan, answers: &[&BTreeMap<Request, Result<Response, SourceError>>], warnings: &mut Vec<String>) -> Vec<Event> {
    let mut failed: Vec<String> = Vec::new();
    let mut events = Vec::new();
    for sp in &plan.spans {
        let mut got: BTreeMap<Probe, &Response> = BTreeMap::new();
        for (probe, req) in &sp.requests {
            match answers.iter().find_map(|a| a.get(req)) {
                Some(Ok(resp)) => {
                    got.insert(*probe, resp);
                }
                Some(Err(e)) => failed.push(format!("{probe:?}: {e}")),
                None => failed.push(format!("{probe:?}: not asked")),
            }
        }
        let f = fleet_of(&got, plan);
        events.extend(merge(changes_in(sp, &got, &f, plan), &f));
    }
    if !failed.is_empty() {
        warnings.push(format!(
            "change events: {} of the event queries got no answer, so the timeline may miss restarts, rollouts or configuration changes ({})",
            failed.len(),
            failed.first().cloned().unwrap_or_default()
        ));
    }
    events.sort_by(|a: &Event, b: &Event| (a.time, a.kind, &a.scope).cmp(&(b.time, b.kind, &b.scope)));
    events.dedup();
    events
}

fn fleet_of(got: &BTreeMap<Probe, &Response>, plan: &EventPlan) -> Fleet {
    let rows: Vec<Labels> = got.get(&Probe::Map).map(|r| points(r).into_iter().map(|(l, _, _)| l.clone()).collect()).unwrap_or_default();
    let mut f = fleet(&rows, &plan.group_by, &plan.replica_label);
    for (l, _, v) in got.get(&Probe::Counts).map(|r| points(r)).unwrap_or_default() {
        let scope: Scope = plan.group_by.iter().map(|g| (g.clone(), label(l, g).to_string())).collect();
        if v.is_finite() && v >= 0.0 {
            f.counts.insert(scope, v as usize);
        }
    }
    f
}

fn changes_in(sp: &SpanPlan, got: &BTreeMap<Probe, &Response>, f: &Fleet, plan: &EventPlan) -> Vec<Change> {
    let of = |p: Probe| got.get(&p).map(|r| points(r)).unwrap_or_default();
    let step = sp.step as f64;
    let mut out = Vec::new();
    let (appear, vanish) = (of(Probe::Appear), of(Probe::Vanish));
    let first_seen = first_seen(f, &appear, &vanish);
    restarts(f, &of(Probe::ProcessStart), &of(Probe::CounterReset), sp, plan, &first_seen, &mut out);
    down_and_up(f, &of(Probe::Down), step, sp, &mut out);
    presence(f, &appear, &vanish, sp, plan.data_start, &mut out);
    configs(f, &of(Probe::ConfigStart), &of(Probe::ConfigAppear), &mut out);
    rollouts(f, &of(Probe::Generation), &of(Probe::ImageStart), &of(Probe::ImageAppear), &mut out);
    xids(f, &of(Probe::Xid), &mut out);
    date_configs_by_restarts(&mut out);
    out
}

/// A configuration is seen when its series first appears, but it took effect when the process that
/// carries it started: a change that follows a restart of the same replica (within [`GAP`]) is
/// dated by the restart.
fn date_configs_by_restarts(changes: &mut [Change]) {
    let gap = chrono::Duration::from_std(GAP).unwrap_or_default();
    let restarts: Vec<(String, DateTime<Utc>)> = changes.iter().filter(|c| c.kind == EventKind::Restart).map(|c| (c.who.clone(), c.time)).collect();
    for c in changes.iter_mut().filter(|c| c.kind == EventKind::ConfigChange) {
        if let Some(t) = restarts.iter().filter(|(who, t)| *who == c.who && *t <= c.time && c.time - *t <= gap).map(|(_, t)| *t).max() {
            c.time = t;
        }
    }
}

fn target_of<'a>(f: &'a Fleet, l: &Labels) -> Option<&'a (Scope, String)> {
    f.targets.get(&(label(l, "instance").to_string(), label(l, "job").to_string()))
}

fn change(time: DateTime<Utc>, kind: EventKind, scope: &Scope, who: &str) -> Change {
    Change { time, kind, scope: scope.clone(), who: who.to_string(), before: BTreeMap::new(), after: BTreeMap::new(), note: String::new() }
}

/// When each target that came up inside the span was first seen: those that appeared once and had
/// not vanished before (a target that went away and came back restarted, or flapped).
fn first_seen(f: &Fleet, appear: &[(&Labels, f64, f64)], vanish: &[(&Labels, f64, f64)]) -> BTreeMap<String, f64> {
    let mut appeared: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (l, t, _) in appear {
        if let Some((_, replica)) = target_of(f, l) {
            appeared.entry(replica).or_default().push(*t);
        }
    }
    let mut out = BTreeMap::new();
    for (replica, times) in appeared {
        let gone_before = vanish.iter().any(|(l, t, _)| target_of(f, l).is_some_and(|(_, r)| r == replica) && *t <= times[0]);
        if times.len() == 1 && !gone_before {
            out.insert(replica.to_string(), times[0]);
        }
    }
    out
}

fn restarts(
    f: &Fleet,
    starts: &[(&Labels, f64, f64)],
    resets: &[(&Labels, f64, f64)],
    sp: &SpanPlan,
    plan: &EventPlan,
    first_seen: &BTreeMap<String, f64>,
    out: &mut Vec<Change>,
) {
    // Exact: the new process's start time, once per distinct value. A process that started before
    // its target was first seen (its model loading, then its first scrape) is that target's first
    // start, not a restart: it is the target appearing (or the data beginning).
    let mut seen: BTreeSet<(String, i64)> = BTreeSet::new();
    let lo = sp.span.start - chrono::Duration::seconds(sp.step as i64);
    for (l, _, v) in starts {
        let (Some((scope, replica)), Some(t)) = (target_of(f, l), time(*v)) else { continue };
        if t < lo || t > sp.span.end || !seen.insert((replica.clone(), t.timestamp())) {
            continue;
        }
        if first_seen.get(replica).is_some_and(|a| *v <= a + sp.step as f64) {
            continue;
        }
        out.push(change(t, EventKind::Restart, scope, replica));
    }
    let exact: BTreeSet<String> = seen.iter().map(|(r, _)| r.clone()).collect();
    // Counter resets, for replicas without a process start time: the first step of each run.
    let mut last: BTreeMap<String, f64> = BTreeMap::new();
    let mut rows: Vec<&(&Labels, f64, f64)> = resets.iter().collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (l, t, _) in rows {
        let replica = label(l, &plan.replica_label).to_string();
        let Some(tt) = time(*t) else { continue };
        if exact.contains(&replica) || tt < sp.span.start {
            continue;
        }
        let prev = last.insert(replica.clone(), *t);
        if prev.is_some_and(|p| t - p <= sp.step as f64 * 1.5) {
            continue;
        }
        let scope: Scope = plan.group_by.iter().map(|g| (g.clone(), label(l, g).to_string())).collect();
        let mut c = change(tt, EventKind::Restart, &scope, &replica);
        c.note = "counters reset".into();
        out.push(c);
    }
}

/// Runs of consecutive steps per key: (first, last) times.
fn runs(times: &mut [f64], step: f64) -> Vec<(f64, f64)> {
    times.sort_by(f64::total_cmp);
    let mut out: Vec<(f64, f64)> = Vec::new();
    for t in times.iter() {
        match out.last_mut() {
            Some((_, last)) if t - *last <= step * 1.5 => *last = *t,
            _ => out.push((*t, *t)),
        }
    }
    out
}

fn down_and_up(f: &Fleet, down: &[(&Labels, f64, f64)], step: f64, sp: &SpanPlan, out: &mut Vec<Change>) {
    let mut by_target: BTreeMap<(Scope, String), Vec<f64>> = BTreeMap::new();
    for (l, t, _) in down {
        if let Some((scope, replica)) = target_of(f, l) {
            by_target.entry((scope.clone(), replica.clone())).or_default().push(*t);
        }
    }
    let end = sp.span.end.timestamp() as f64;
    for ((scope, replica), mut times) in by_target {
        let start = sp.span.start.timestamp() as f64;
        for (first, last) in runs(&mut times, step) {
            // A min over the last step: the target went down within the step before `first`
            // (before the span, when `first` is its first step: then only its return is listed).
            if first > start + step * 0.5 {
                if let Some(t) = time(first - step) {
                    out.push(change(t, EventKind::TargetDown, &scope, &replica));
                }
            }
            if last + step <= end {
                if let Some(t) = time(last) {
                    out.push(change(t, EventKind::TargetUp, &scope, &replica));
                }
            }
        }
    }
}

fn presence(f: &Fleet, appear: &[(&Labels, f64, f64)], vanish: &[(&Labels, f64, f64)], sp: &SpanPlan, data_start: Option<DateTime<Utc>>, out: &mut Vec<Change>) {
    let first_step = sp.span.start.timestamp() as f64 + sp.step as f64;
    let mut appeared: BTreeMap<(Scope, String), Vec<f64>> = BTreeMap::new();
    let mut vanished: BTreeMap<(Scope, String), Vec<f64>> = BTreeMap::new();
    for (l, t, _) in appear {
        if let Some((scope, replica)) = target_of(f, l) {
            appeared.entry((scope.clone(), replica.clone())).or_default().push(*t);
        }
    }
    let presence = PRESENCE.as_secs().max(sp.step) as f64;
    for (l, t, _) in vanish {
        if let Some((scope, replica)) = target_of(f, l) {
            vanished.entry((scope.clone(), replica.clone())).or_default().push(*t - presence);
        }
    }
    // Where the data itself begins (the first round of `--scrape`), what appears with it, within one
    // presence lookback and a step, was first seen, not added. (A Prometheus cannot tell its data
    // beginning from a model's first deployment, which is a real event: it passes no start.)
    // Where no target of the fleet was there at the span's start (every one of them appeared in
    // it), the data begins with the first of them: a Prometheus that started collecting, or a fleet
    // that did not exist before. What appears with it is first seen, as with a scrape's first round.
    // (The targets named here are only those that changed; the replica counts cover every model.)
    let mut new_in: BTreeMap<&Scope, usize> = BTreeMap::new();
    for (scope, _) in appeared.keys() {
        *new_in.entry(scope).or_default() += 1;
    }
    let everyone_new = !f.counts.is_empty() && f.counts.iter().all(|(scope, n)| new_in.get(scope).is_some_and(|k| k >= n));
    let earliest = appeared.values().flatten().copied().fold(f64::INFINITY, f64::min);
    let data_start = data_start.map(|t| t.timestamp_millis() as f64 / 1000.0).or((everyone_new && earliest.is_finite()).then_some(earliest));
    let with_the_data = |t: f64| data_start.is_some_and(|d| t <= d + presence + sp.step as f64);
    // Added: appeared once, after the first step, never vanished before. Removed: vanished and
    // never back. A target that comes and goes is flapping (or scraped rarely): neither.
    let mut added: BTreeMap<Scope, Vec<(f64, String)>> = BTreeMap::new();
    let mut removed: BTreeMap<Scope, Vec<(f64, String)>> = BTreeMap::new();
    for (key, a) in &appeared {
        let v = vanished.get(key).cloned().unwrap_or_default();
        if a.len() == 1 && a[0] > first_step && !with_the_data(a[0]) && v.iter().all(|t| *t > a[0]) {
            added.entry(key.0.clone()).or_default().push((a[0], key.1.clone()));
        }
    }
    for (key, v) in &vanished {
        let a = appeared.get(key).cloned().unwrap_or_default();
        if v.len() == 1 && a.iter().all(|t| *t < v[0]) {
            removed.entry(key.0.clone()).or_default().push((v[0], key.1.clone()));
        }
    }
    let all = |scope: &Scope| f.total(scope);
    for (scope, list) in added {
        let kind = if list.len() == all(&scope) { EventKind::ModelAdded } else { EventKind::ReplicaAdded };
        for (t, who) in list {
            if let Some(t) = time(t) {
                out.push(change(t, kind, &scope, &who));
            }
        }
    }
    for (scope, list) in removed {
        let kind = if list.len() == all(&scope) { EventKind::ModelRemoved } else { EventKind::ReplicaRemoved };
        for (t, who) in list {
            if let Some(t) = time(t) {
                out.push(change(t.max(sp.span.start), kind, &scope, &who));
            }
        }
    }
}

fn config_of(l: &Labels) -> BTreeMap<String, String> {
    CONFIG_LABELS.iter().filter_map(|k| l.get(k).map(|v| (k.to_string(), v.clone()))).collect()
}

fn configs(f: &Fleet, start: &[(&Labels, f64, f64)], appear: &[(&Labels, f64, f64)], out: &mut Vec<Change>) {
    // Per target (and engine): its configuration now, updated as new series appear.
    let key = |l: &Labels| (label(l, "instance").to_string(), label(l, "job").to_string(), label(l, "engine").to_string());
    let mut current: BTreeMap<(String, String, String), BTreeMap<String, String>> = BTreeMap::new();
    for (l, _, _) in start {
        current.insert(key(l), config_of(l));
    }
    let mut rows: Vec<&(&Labels, f64, f64)> = appear.iter().collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (l, t, _) in rows {
        let now = config_of(l);
        let Some(before) = current.insert(key(l), now.clone()) else { continue };
        if before == now {
            continue;
        }
        let (Some((scope, replica)), Some(t)) = (target_of(f, l), time(*t)) else { continue };
        let mut c = change(t, EventKind::ConfigChange, scope, replica);
        let keys: BTreeSet<&String> = before.keys().chain(now.keys()).collect();
        for k in keys {
            let (b, a) = (before.get(k).cloned().unwrap_or_default(), now.get(k).cloned().unwrap_or_default());
            if a != b {
                c.before.insert(k.clone(), b);
                c.after.insert(k.clone(), a);
            }
        }
        out.push(c);
    }
}

fn rollouts(f: &Fleet, generation: &[(&Labels, f64, f64)], image_start: &[(&Labels, f64, f64)], image_new: &[(&Labels, f64, f64)], out: &mut Vec<Change>) {
    let deployment = |l: &Labels| (label(l, "namespace").to_string(), label(l, "deployment").to_string());
    let scope_of = |d: &(String, String)| f.deployments.get(d).cloned().unwrap_or_default();
    let name = |d: &(String, String)| if d.0.is_empty() { d.1.clone() } else { format!("{}/{}", d.0, d.1) };
    for (l, t, v) in generation {
        let d = deployment(l);
        if let Some(t) = time(*t) {
            let mut c = change(t, EventKind::Rollout, &scope_of(&d), &name(&d));
            c.note = format!("Deployment {} generation {}", name(&d), v);
            out.push(c);
        }
    }
    let mut images: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for (l, _, _) in image_start {
        images.entry(deployment(l)).or_default().insert(label(l, "image").to_string());
    }
    let mut rows: Vec<&(&Labels, f64, f64)> = image_new.iter().collect();
    rows.sort_by(|a, b| a.1.total_cmp(&b.1));
    for (l, t, _) in rows {
        let d = deployment(l);
        let image = label(l, "image").to_string();
        let known = images.entry(d.clone()).or_default();
        let before: Vec<String> = known.iter().filter(|i| **i != image).cloned().collect();
        if !known.insert(image.clone()) || before.is_empty() {
            continue;
        }
        let Some(t) = time(*t) else { continue };
        let mut c = change(t, EventKind::VersionChange, &scope_of(&d), &name(&d));
        c.before.insert("image".into(), before.join(", "));
        c.after.insert("image".into(), image);
        c.note = format!("Deployment {}", name(&d));
        out.push(c);
    }
}

fn xids(f: &Fleet, xid: &[(&Labels, f64, f64)], out: &mut Vec<Change>) {
    for (l, t, v) in xid {
        let scope = f.pods.get(&(label(l, "namespace").to_string(), label(l, "pod").to_string())).map(|(s, _)| s.clone()).unwrap_or_default();
        let gpu = [label(l, "Hostname"), label(l, "gpu"), label(l, "UUID")].iter().filter(|s| !s.is_empty()).cloned().collect::<Vec<_>>().join(" ");
        if let Some(t) = time(*t) {
            let mut c = change(t, EventKind::GpuError, &scope, if gpu.is_empty() { label(l, "pod") } else { &gpu });
            c.note = format!("XID {v}");
            out.push(c);
        }
    }
}

/// Changes of one kind on one scope (with the same before and after) close together become one event.
fn merge(mut changes: Vec<Change>, f: &Fleet) -> Vec<Event> {
    changes.sort_by(|a, b| (a.kind, &a.scope, &a.before, &a.after, a.time).cmp(&(b.kind, &b.scope, &b.before, &b.after, b.time)));
    let wave = chrono::Duration::from_std(WAVE).unwrap_or_default();
    let mut groups: Vec<Vec<Change>> = Vec::new();
    for c in changes {
        match groups.last_mut() {
            // One replica twice is two events; a wave is several replicas once each.
            Some(g) if g[0].kind == c.kind
                && g[0].scope == c.scope
                && g[0].before == c.before
                && g[0].after == c.after
                && c.time - g[g.len() - 1].time <= wave
                && (c.kind == EventKind::Rollout || g.iter().all(|o| o.who != c.who)) =>
            {
                g.push(c)
            }
            _ => groups.push(vec![c]),
        }
    }
    groups.into_iter().map(|g| event(g, f)).collect()
}

fn event(g: Vec<Change>, f: &Fleet) -> Event {
    let first = &g[0];
    let last = g.iter().map(|c| c.time).max().unwrap_or(first.time);
    let who: BTreeSet<String> = g.iter().map(|c| c.who.clone()).collect();
    let of = Some(f.total(&first.scope)).filter(|n| *n > 0);
    let is_replica = !matches!(first.kind, EventKind::Rollout | EventKind::VersionChange | EventKind::GpuError);
    let count = if is_replica { replicas_phrase(who.len(), of) } else { String::new() };
    let diff = first.before.keys().map(|k| format!("{k} {} -> {}", show(&first.before[k]), show(first.after.get(k).map_or("", String::as_str)))).collect::<Vec<_>>().join(", ");
    let detail = match first.kind {
        EventKind::Restart => format!("{count} restarted{}", if who.len() > 1 && g.len() > who.len() { format!(" ({} restarts)", g.len()) } else { String::new() }),
        EventKind::TargetDown => format!("{count} stopped answering scrapes"),
        EventKind::TargetUp => format!("{count} answering scrapes again"),
        EventKind::ReplicaAdded => format!("{count} added"),
        EventKind::ReplicaRemoved => format!("{count} removed"),
        EventKind::ModelAdded => format!("model first seen ({})", plural(who.len(), "replica")),
        EventKind::ModelRemoved => format!("model gone ({} removed)", plural(who.len(), "replica")),
        EventKind::ConfigChange => format!("{diff} on {count}"),
        EventKind::VersionChange => format!("{diff} ({})", first.note),
        EventKind::Rollout => g.iter().map(|c| c.note.clone()).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join("; "),
        EventKind::GpuError => format!("{} on {}", g.iter().map(|c| c.note.clone()).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(", "), who.iter().cloned().collect::<Vec<_>>().join("; ")),
    };
    Event {
        time: first.time,
        kind: first.kind,
        scope: first.scope.clone(),
        detail,
        replicas: if is_replica { who.into_iter().filter(|w| !w.is_empty()).collect() } else { Vec::new() },
        of: if is_replica { of } else { None },
        until: (last > first.time).then_some(last),
        before: first.before.clone(),
        after: first.after.clone(),
    }
}

fn show(v: &str) -> &str {
    if v.is_empty() { "(none)" } else { v }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// "2 of 3 replicas", "the replica" (the scope's only one), "1 replica".
fn replicas_phrase(n: usize, of: Option<usize>) -> String {
    match of {
        Some(1) if n == 1 => "the replica".to_string(),
        Some(total) if total >= n => format!("{n} of {total} replicas"),
        _ => plural(n, "replica"),
    }
}

/// The deploy among `events`: the start of the last wave of rollouts, restarts, configuration or
/// version changes (events of those kinds less than [`WAVE`] apart, across scopes, are one wave).
pub fn last_deploy(events: &[Event]) -> Option<&Event> {
    let mut deploys: Vec<&Event> = events.iter().filter(|e| e.kind.is_deploy()).collect();
    deploys.sort_by_key(|e| e.time);
    let wave = chrono::Duration::from_std(WAVE).unwrap_or_default();
    let mut start = *deploys.last()?;
    for e in deploys.iter().rev() {
        if start.time - e.until.unwrap_or(e.time) <= wave {
            if e.time <= start.time {
                start = e;
            }
        } else {
            break;
        }
    }
    Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Sample, Series};

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
        labels(&[("instance", &format!("{model}-{i}:8000")), ("job", "vllm"), ("namespace", "prod"), ("pod", &format!("{model}-7d9f8b6c5-x{i}abc")), ("model_name", model)])
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
        let firsts: Vec<(Probe, Vec<Labels>)> =
            [(Probe::PresenceAny, vec![Probe::Appear, Probe::Vanish]), (Probe::ConfigAny, vec![Probe::ConfigAppear])].into_iter().map(|(any, of)| (any, named(&of))).collect();
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
    fn read_all(plan: &mut EventPlan, given: Vec<(Probe, Response)>, warnings: &mut Vec<String>) -> Vec<Event> {
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
        assert_eq!(
            any.describe(),
            r#"max by (instance, job, model_name) (resets(vllm:prompt_tokens_total{namespace="prod"}[7800s])) > 0"#
        );
        let quiet: BTreeMap<Request, Result<Response, SourceError>> = p.requests().into_iter().map(|r| (r, Ok(empty()))).collect();
        assert!(follow_up(&mut p.clone(), &quiet).is_empty(), "no reset: nothing to date");
        // Replica 1 reset: the second round dates it, and asks for that replica only.
        let row = labels(&[("instance", "llama-1:8000"), ("job", "vllm"), ("model_name", "llama")]);
        let dated = (row.clone(), vec![(secs("2026-01-15T09:12:00Z"), 1.0), (secs("2026-01-15T09:14:00Z"), 1.0)]);
        let a = answers(&mut p, vec![(Probe::ResetAny, vector(vec![row], secs("2026-01-15T10:00:00Z"))), (Probe::CounterReset, matrix(vec![dated]))]);
        let step = p.spans[0].requests.iter().find(|(probe, _)| *probe == Probe::CounterReset).map(|(_, r)| r.describe()).expect("asked in the second round");
        // The range is GAP plus a step (two minutes over this two-hour span).
        assert_eq!(step, r#"max by (instance, job, model_name) (resets(vllm:prompt_tokens_total{namespace="prod",instance=~"llama-1:8000"}[720s])) > 0"#);
        let events = read(&p, &[&a], &mut vec![]);
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
        let start = |i: u32, at: &str| (labels(&[("instance", &format!("llama-{i}:8000")), ("job", "vllm")]), vec![(secs(at) + 30.0, secs(at)), (secs(at) + 60.0, secs(at))]);
        let resp = matrix(vec![start(0, "2026-01-15T09:10:07Z"), start(2, "2026-01-15T09:11:02Z")]);
        let mut warnings = vec![];
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
        let events = read_all(&mut p, vec![(Probe::ProcessStart, resp)], &mut vec![]);
        assert!(events.is_empty(), "{events:?}");
    }

    #[test]
    fn a_config_change_says_what_changed_and_a_restart_with_the_same_config_is_no_change() {
        let mut p = the_plan();
        let cfg = |i: u32, blocks: &str| labels(&[("instance", &format!("llama-{i}:8000")), ("job", "vllm"), ("engine", "0"), ("num_gpu_blocks", blocks), ("block_size", "16")]);
        let start = vector((0..3).map(|i| cfg(i, "2000")).collect(), secs("2026-01-15T08:00:00Z"));
        let appear = matrix(vec![
            (cfg(0, "900"), vec![(secs("2026-01-15T09:20:00Z"), 1.0)]),
            (cfg(1, "900"), vec![(secs("2026-01-15T09:21:00Z"), 1.0)]),
            // Replica 2 restarted with the same configuration: its series came back unchanged.
            (cfg(2, "2000"), vec![(secs("2026-01-15T09:22:00Z"), 1.0)]),
        ]);
        let events = read_all(&mut p, vec![(Probe::ConfigStart, start), (Probe::ConfigAppear, appear)], &mut vec![]);
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
        let events = read_all(&mut p, vec![(Probe::Down, resp)], &mut vec![]);
        let kinds: Vec<(EventKind, String)> = events.iter().map(|e| (e.kind, e.time.format("%H:%M:%S").to_string())).collect();
        assert_eq!(kinds, vec![(EventKind::TargetDown, "09:08:00".into()), (EventKind::TargetUp, "09:16:00".into()), (EventKind::TargetDown, "09:52:00".into())]);
    }

    #[test]
    fn replicas_that_leave_for_good_are_removed_and_a_whole_model_leaving_is_a_model_removed() {
        let mut p = the_plan();
        let tl = |i: u32, m: &str| labels(&[("instance", &format!("{m}-{i}:8000")), ("job", "vllm")]);
        let at = secs("2026-01-15T09:30:00Z") + PRESENCE.as_secs() as f64;
        let vanish = matrix(vec![(tl(1, "llama"), vec![(at, 1.0)]), (tl(0, "qwen"), vec![(at, 1.0)])]);
        let events = read_all(&mut p, vec![(Probe::Vanish, vanish)], &mut vec![]);
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
            read_all(&mut p, vec![(Probe::Appear, appear.clone()), (Probe::ProcessStart, starts.clone()), (Probe::Counts, counts(of))], &mut vec![])
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
        let events = read_all(&mut p, vec![(Probe::Appear, appear), (Probe::Vanish, vanish)], &mut vec![]);
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
        let events = read_all(&mut p, vec![(Probe::Generation, generation), (Probe::ImageStart, start), (Probe::ImageAppear, new)], &mut vec![]);
        let got: Vec<(EventKind, String, Option<&str>)> = events.iter().map(|e| (e.kind, e.detail.clone(), e.scope.get("model_name").map(String::as_str))).collect();
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
        let mut warnings = vec![];
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
}
