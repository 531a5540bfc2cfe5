//! Answers into events: each change of one replica, Deployment or GPU found in the answers, then
//! changes of one kind on one scope merged into events and worded.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeZone, Utc};

use crate::prom::Labels;
use crate::report::{Event, EventKind, Scope, Warnings};
use crate::source::{Data, Request, Response, SourceError};

use super::*;

/// One change of one replica (or Deployment, or GPU), before changes are merged into events.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Change {
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
pub(super) struct Fleet {
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

pub(super) fn label<'a>(l: &'a Labels, name: &str) -> &'a str {
    l.get(name).map_or("", String::as_str)
}

pub(super) fn fleet(rows: &[Labels], group_by: &[String], replica_label: &str) -> Fleet {
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

pub(super) fn time(t: f64) -> Option<DateTime<Utc>> {
    if !t.is_finite() {
        return None;
    }
    Utc.timestamp_millis_opt((t * 1000.0).round() as i64).single()
}

/// Every (labels, time, value) of an answer, oldest first per series.
pub(super) fn points(resp: &Response) -> Vec<(&Labels, f64, f64)> {
    match &resp.data {
        Data::Matrix(series) => series.iter().flat_map(|s| s.points.iter().map(move |(t, v)| (&s.labels, *t, *v))).collect(),
        Data::Vector(samples) => samples.iter().map(|s| (&*s.labels, s.t, s.v)).collect(),
        _ => Vec::new(),
    }
}

/// Read the answers into events, oldest first. Probes that failed are named in one warning: the
/// events they would have found are then missing, and the report says so.
pub fn read(plan: &EventPlan, answers: &[&BTreeMap<Request, Result<Response, SourceError>>], warnings: &mut Warnings) -> Vec<Event> {
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

pub(super) fn fleet_of(got: &BTreeMap<Probe, &Response>, plan: &EventPlan) -> Fleet {
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

pub(super) fn changes_in(sp: &SpanPlan, got: &BTreeMap<Probe, &Response>, f: &Fleet, plan: &EventPlan) -> Vec<Change> {
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
pub(super) fn date_configs_by_restarts(changes: &mut [Change]) {
    let gap = chrono::Duration::from_std(GAP).unwrap_or_default();
    let restarts: Vec<(String, DateTime<Utc>)> = changes.iter().filter(|c| c.kind == EventKind::Restart).map(|c| (c.who.clone(), c.time)).collect();
    for c in changes.iter_mut().filter(|c| c.kind == EventKind::ConfigChange) {
        if let Some(t) = restarts.iter().filter(|(who, t)| *who == c.who && *t <= c.time && c.time - *t <= gap).map(|(_, t)| *t).max() {
            c.time = t;
        }
    }
}

pub(super) fn target_of<'a>(f: &'a Fleet, l: &Labels) -> Option<&'a (Scope, String)> {
    f.targets.get(&(label(l, "instance").to_string(), label(l, "job").to_string()))
}

pub(super) fn change(time: DateTime<Utc>, kind: EventKind, scope: &Scope, who: &str) -> Change {
    Change { time, kind, scope: scope.clone(), who: who.to_string(), before: BTreeMap::new(), after: BTreeMap::new(), note: String::new() }
}

/// When each target that came up inside the span was first seen: those that appeared once and had
/// not vanished before (a target that went away and came back restarted, or flapped).
pub(super) fn first_seen(f: &Fleet, appear: &[(&Labels, f64, f64)], vanish: &[(&Labels, f64, f64)]) -> BTreeMap<String, f64> {
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

pub(super) fn restarts(
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
pub(super) fn runs(times: &mut [f64], step: f64) -> Vec<(f64, f64)> {
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

pub(super) fn down_and_up(f: &Fleet, down: &[(&Labels, f64, f64)], step: f64, sp: &SpanPlan, out: &mut Vec<Change>) {
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

pub(super) fn presence(
    f: &Fleet,
    appear: &[(&Labels, f64, f64)],
    vanish: &[(&Labels, f64, f64)],
    sp: &SpanPlan,
    data_start: Option<DateTime<Utc>>,
    out: &mut Vec<Change>,
) {
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

pub(super) fn config_of(l: &Labels) -> BTreeMap<String, String> {
    CONFIG_LABELS.iter().filter_map(|k| l.get(k).map(|v| (k.to_string(), v.clone()))).collect()
}

pub(super) fn configs(f: &Fleet, start: &[(&Labels, f64, f64)], appear: &[(&Labels, f64, f64)], out: &mut Vec<Change>) {
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

pub(super) fn rollouts(
    f: &Fleet,
    generation: &[(&Labels, f64, f64)],
    image_start: &[(&Labels, f64, f64)],
    image_new: &[(&Labels, f64, f64)],
    out: &mut Vec<Change>,
) {
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

pub(super) fn xids(f: &Fleet, xid: &[(&Labels, f64, f64)], out: &mut Vec<Change>) {
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
pub(super) fn merge(mut changes: Vec<Change>, f: &Fleet) -> Vec<Event> {
    changes.sort_by(|a, b| (a.kind, &a.scope, &a.before, &a.after, a.time).cmp(&(b.kind, &b.scope, &b.before, &b.after, b.time)));
    let wave = chrono::Duration::from_std(WAVE).unwrap_or_default();
    let mut groups: Vec<Vec<Change>> = Vec::new();
    for c in changes {
        match groups.last_mut() {
            // One replica twice is two events; a wave is several replicas once each.
            Some(g)
                if g[0].kind == c.kind
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

pub(super) fn event(g: Vec<Change>, f: &Fleet) -> Event {
    let first = &g[0];
    let last = g.iter().map(|c| c.time).max().unwrap_or(first.time);
    let who: BTreeSet<String> = g.iter().map(|c| c.who.clone()).collect();
    let of = Some(f.total(&first.scope)).filter(|n| *n > 0);
    let is_replica = !matches!(first.kind, EventKind::Rollout | EventKind::VersionChange | EventKind::GpuError);
    let count = if is_replica { replicas_phrase(who.len(), of) } else { String::new() };
    let diff = first
        .before
        .keys()
        .map(|k| format!("{k} {} -> {}", show(&first.before[k]), show(first.after.get(k).map_or("", String::as_str))))
        .collect::<Vec<_>>()
        .join(", ");
    let detail = match first.kind {
        EventKind::Restart => {
            format!("{count} restarted{}", if who.len() > 1 && g.len() > who.len() { format!(" ({} restarts)", g.len()) } else { String::new() })
        }
        EventKind::TargetDown => format!("{count} stopped answering scrapes"),
        EventKind::TargetUp => format!("{count} answering scrapes again"),
        EventKind::ReplicaAdded => format!("{count} added"),
        EventKind::ReplicaRemoved => format!("{count} removed"),
        EventKind::ModelAdded => format!("model first seen ({})", crate::stats::plural_s(who.len(), "replica")),
        EventKind::ModelRemoved => format!("model gone ({} removed)", crate::stats::plural_s(who.len(), "replica")),
        EventKind::ConfigChange => format!("{diff} on {count}"),
        EventKind::VersionChange => format!("{diff} ({})", first.note),
        EventKind::Rollout => g.iter().map(|c| c.note.clone()).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join("; "),
        EventKind::GpuError => format!(
            "{} on {}",
            g.iter().map(|c| c.note.clone()).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(", "),
            who.iter().cloned().collect::<Vec<_>>().join("; ")
        ),
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

pub(super) fn show(v: &str) -> &str {
    if v.is_empty() {
        "(none)"
    } else {
        v
    }
}

/// "2 of 3 replicas", "the replica" (the scope's only one), "1 replica".
pub(super) fn replicas_phrase(n: usize, of: Option<usize>) -> String {
    match of {
        Some(1) if n == 1 => "the replica".to_string(),
        Some(total) if total >= n => format!("{n} of {total} replicas"),
        _ => crate::stats::plural_s(n, "replica"),
    }
}
