//! Change events: restarts, configuration changes, rollouts and replicas joining or leaving.
//!
//! A scenario lists them as `[[event]]` tables; each names a model, a time before the window's end
//! and the replicas it touches. The simulation writes them into the metrics the way servers and
//! Kubernetes do (`up` 0 while a process is down, counters starting again from 0, a new
//! `process_start_time_seconds`, new `vllm:cache_config_info` labels, new pod names and
//! kube-state-metrics generations), and [`crate::ScenarioSpec::true_events`] says exactly what
//! happened when, in the product's own event kinds, so tests can hold the product to it.
//!
//! This module parses and validates the events and plans, per replica, when it exists, when it is
//! down and what it comes back as ([`Life`]); `sim.rs` follows that plan.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::spec::delta;
use super::ScenarioSpec;

/// What happens to the chosen replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// The processes stop for `down` and start again with the same configuration.
    Restart,
    /// A restart after which the KV cache has `num_gpu_blocks` blocks.
    ConfigChange,
    /// The Deployment's pod template changed: one replica after the other is replaced by a new pod
    /// (optionally running a new image).
    Rollout,
    /// The replicas do not exist before the event (scale-up).
    ReplicaAdded,
    /// The replicas are gone from the event on (scale-down).
    ReplicaRemoved,
}

impl EventKind {
    pub const ALL: [EventKind; 5] = [EventKind::Restart, EventKind::ConfigChange, EventKind::Rollout, EventKind::ReplicaAdded, EventKind::ReplicaRemoved];

    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Restart => "restart",
            EventKind::ConfigChange => "config-change",
            EventKind::Rollout => "rollout",
            EventKind::ReplicaAdded => "replica-added",
            EventKind::ReplicaRemoved => "replica-removed",
        }
    }

    /// Whether the replicas' processes stop and start again.
    pub fn restarts(self) -> bool {
        matches!(self, EventKind::Restart | EventKind::ConfigChange | EventKind::Rollout)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One `[[event]]` of a scenario, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSpec {
    pub kind: EventKind,
    /// The model_name whose replicas change.
    pub model: String,
    /// When the first chosen replica goes down (or appears, or leaves), before the window's end.
    pub at_before_end: Duration,
    /// The replica indexes it touches, in the order a rollout replaces them.
    pub replicas: Vec<u32>,
    /// How long each replica is down (restart, config-change, rollout); zero: it restarts between
    /// two scrapes, so no scrape fails.
    pub down: Duration,
    /// config-change: the new KV-cache size.
    pub num_gpu_blocks: Option<u64>,
    /// rollout: the new pods' image (unchanged when `None`).
    pub image: Option<String>,
    /// rollout: time between one replica going down and the next.
    pub stagger: Duration,
    /// restart, config-change, rollout: how long the new process stays slow after it first
    /// answers (a cold start: compilation, CUDA graphs, empty caches); zero: none.
    pub warm_up: Duration,
    /// ... and how much slower its prefill and decode steps are when it first answers (falling
    /// linearly to 1 over `warm_up`).
    pub warm_up_slowdown: f64,
}

/// The image every pod runs until a rollout changes it.
pub const DEFAULT_IMAGE: &str = "vllm/vllm-openai:v0.8.5";
/// The Deployment generation kube-state-metrics reports before the first rollout.
pub const FIRST_GENERATION: u64 = 3;

/// Something the product should list in its timeline, with exactly when it happened.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TrueEvent {
    /// The first sample that shows the change.
    pub time: DateTime<Utc>,
    /// The product's event kind: restart, target-down, target-up, config-change, rollout,
    /// version-change, replica-added, replica-removed, gpu-error.
    pub kind: String,
    pub model: String,
    /// The vLLM targets (`instance` labels) concerned.
    pub instances: Vec<String>,
    /// Before and after, where there is one ("num_gpu_blocks 2000 -> 900").
    pub detail: String,
}

/// Every kind name [`TrueEvent::kind`] takes (and `expect.caused_by` may name).
pub const TRUE_KINDS: [&str; 9] =
    ["restart", "target-down", "target-up", "config-change", "rollout", "version-change", "replica-added", "replica-removed", "gpu-error"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawEvent {
    kind: EventKind,
    model: String,
    at: String,
    #[serde(default)]
    replicas: Option<Vec<u32>>,
    #[serde(default)]
    down: Option<String>,
    #[serde(default)]
    num_gpu_blocks: Option<u64>,
    #[serde(default)]
    image: Option<String>,
    #[serde(default)]
    stagger: Option<String>,
    #[serde(default)]
    warm_up: Option<String>,
    #[serde(default)]
    warm_up_slowdown: Option<f64>,
}

/// The parser's context: how to build an error, read a duration, and the timeline's bounds.
pub(crate) struct Ctx<'a> {
    pub invalid: &'a dyn Fn(&str, String) -> super::ScenarioError,
    pub duration: &'a dyn Fn(&str, &str) -> Result<Duration, super::ScenarioError>,
    pub interval: Duration,
    /// warmup + baseline + window.
    pub total: Duration,
}

impl Ctx<'_> {
    /// A duration that is a whole number of intervals.
    fn intervals(&self, field: &str, text: &str) -> Result<Duration, super::ScenarioError> {
        let d = (self.duration)(field, text)?;
        if d.as_millis() % self.interval.as_millis() != 0 {
            let every = humantime::format_duration(self.interval);
            return Err((self.invalid)(field, format!("{text:?} must be a whole number of intervals ({every})")));
        }
        Ok(d)
    }
}

/// Parse and check the `[[event]]` list against the models (name and replica count).
pub(crate) fn parse(raw: Vec<RawEvent>, models: &[(String, u32)], cx: &Ctx) -> Result<Vec<EventSpec>, super::ScenarioError> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, e) in raw.into_iter().enumerate() {
        let field = |name: &str| format!("event[{i}].{name}");
        let Some((_, replicas)) = models.iter().find(|(name, _)| *name == e.model) else {
            let names: Vec<&str> = models.iter().map(|(n, _)| n.as_str()).collect();
            return Err((cx.invalid)(&field("model"), format!("{:?} is not one of the models ({})", e.model, names.join(", "))));
        };
        let at_text = e.at.trim();
        let at_before_end = cx.intervals(&field("at"), at_text.strip_prefix('-').unwrap_or(at_text))?;
        if at_before_end.is_zero() || at_before_end >= cx.total {
            return Err((cx.invalid)(
                &field("at"),
                format!("{:?} must lie after the first sample and before the window's end (the timeline is {})", e.at, humantime::format_duration(cx.total)),
            ));
        }
        let chosen = match e.replicas {
            None => (0..*replicas).collect(),
            Some(list) => {
                if list.is_empty() {
                    return Err((cx.invalid)(&field("replicas"), "is empty; leave it out to mean every replica".into()));
                }
                for (j, r) in list.iter().enumerate() {
                    if *r >= *replicas {
                        return Err((cx.invalid)(&field("replicas"), format!("{r} is not a replica index of {:?} (0 to {})", e.model, replicas - 1)));
                    }
                    if list[..j].contains(r) {
                        return Err((cx.invalid)(&field("replicas"), format!("{r} is listed twice")));
                    }
                }
                list
            }
        };
        let only = |name: &str, present: bool, kinds: &str| {
            if present {
                Err((cx.invalid)(&field(name), format!("applies to {kinds} only; remove it from this {}", e.kind)))
            } else {
                Ok(())
            }
        };
        let down = match (&e.down, e.kind.restarts()) {
            (Some(text), true) => cx.intervals(&field("down"), text)?,
            (None, true) => cx.interval * 2,
            (d, false) => {
                only("down", d.is_some(), "restart, config-change and rollout")?;
                Duration::ZERO
            }
        };
        let num_gpu_blocks = match (e.num_gpu_blocks, e.kind) {
            (Some(b), EventKind::ConfigChange) if !(16..=100_000_000).contains(&b) => {
                return Err((cx.invalid)(&field("num_gpu_blocks"), "must be between 16 and 100000000".into()));
            }
            (None, EventKind::ConfigChange) => {
                return Err((cx.invalid)(&field("num_gpu_blocks"), "a config-change needs the new KV-cache size, like num_gpu_blocks = 900".into()));
            }
            (b, EventKind::ConfigChange) => b,
            (b, _) => {
                only("num_gpu_blocks", b.is_some(), "config-change")?;
                None
            }
        };
        let (image, stagger) = if e.kind == EventKind::Rollout {
            if let Some(img) = &e.image {
                if img.trim().is_empty() || img.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err((cx.invalid)(&field("image"), format!("{img:?} is not an image reference")));
                }
            }
            let stagger = match &e.stagger {
                Some(text) => cx.intervals(&field("stagger"), text)?,
                None => cx.interval,
            };
            (e.image, stagger)
        } else {
            only("image", e.image.is_some(), "rollout")?;
            only("stagger", e.stagger.is_some(), "rollout")?;
            (None, Duration::ZERO)
        };
        let (warm_up, warm_up_slowdown) = if e.kind.restarts() {
            let warm_up = match &e.warm_up {
                Some(text) => cx.intervals(&field("warm_up"), text)?,
                None => Duration::ZERO,
            };
            let slowdown = match (e.warm_up_slowdown, warm_up.is_zero()) {
                (Some(f), false) if !(1.0..=100.0).contains(&f) => {
                    return Err((cx.invalid)(&field("warm_up_slowdown"), format!("{f} must be between 1 and 100 (times slower)")));
                }
                (Some(_), true) => {
                    return Err((cx.invalid)(&field("warm_up_slowdown"), "needs warm_up, how long the new process stays slow (like warm_up = \"4m\")".into()));
                }
                (Some(f), false) => f,
                (None, false) => 3.0,
                (None, true) => 1.0,
            };
            (warm_up, slowdown)
        } else {
            only("warm_up", e.warm_up.is_some(), "restart, config-change and rollout")?;
            only("warm_up_slowdown", e.warm_up_slowdown.is_some(), "restart, config-change and rollout")?;
            (Duration::ZERO, 1.0)
        };
        out.push(EventSpec { kind: e.kind, model: e.model, at_before_end, replicas: chosen, down, num_gpu_blocks, image, stagger, warm_up, warm_up_slowdown });
    }
    check_lives(&out, models, cx)?;
    Ok(out)
}

/// One stop of a replica's process: down from `down_ms` (inclusive) to `up_ms`, when the new
/// process answers (equal: it restarted between two scrapes).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outage {
    pub event: usize,
    pub down_ms: i64,
    pub up_ms: i64,
    /// The KV-cache size the new process has (config-change).
    pub blocks: Option<u64>,
    /// The rollout that replaces the pod (index into the rollouts of the model, counted from 0).
    pub rollout: Option<usize>,
    /// The new process's cold start: how long (ms) and how much slower at first.
    pub warm_up_ms: i64,
    pub warm_up_slowdown: f64,
}

/// When a replica exists and when its process is down, from the events.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Life {
    /// The replica appears at this time (replica-added).
    pub added_ms: Option<i64>,
    /// The replica is gone from this time on (replica-removed).
    pub removed_ms: Option<i64>,
    /// Sorted by time, never overlapping.
    pub outages: Vec<Outage>,
}

/// What a replica is at one sample time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Phase<'a> {
    /// Not in service discovery: no series at all, not even `up`.
    Absent,
    /// Its scrape fails: `up` 0, the other vLLM series absent.
    Down,
    /// A new process answers for the first time (after an outage or on being added).
    Fresh(Option<&'a Outage>),
    Up,
}

impl Life {
    pub fn phase(&self, t_ms: i64) -> Phase<'_> {
        if self.added_ms.is_some_and(|a| t_ms < a) || self.removed_ms.is_some_and(|r| t_ms >= r) {
            return Phase::Absent;
        }
        if let Some(o) = self.outages.iter().find(|o| o.up_ms == t_ms) {
            return Phase::Fresh(Some(o));
        }
        if self.added_ms == Some(t_ms) {
            return Phase::Fresh(None);
        }
        if self.outages.iter().any(|o| o.down_ms <= t_ms && t_ms < o.up_ms) {
            return Phase::Down;
        }
        Phase::Up
    }

    /// How much slower the replica's steps are at `t_ms` while a new process warms up (1: warm).
    pub fn slowdown(&self, t_ms: i64) -> f64 {
        self.outages
            .iter()
            .filter(|o| o.warm_up_ms > 0 && o.up_ms <= t_ms && t_ms < o.up_ms + o.warm_up_ms)
            .map(|o| {
                let left = 1.0 - (t_ms - o.up_ms) as f64 / o.warm_up_ms as f64;
                1.0 + (o.warm_up_slowdown - 1.0) * left
            })
            .fold(1.0, f64::max)
    }

    /// Whether the replica serves traffic during the interval ending at `t_ms`.
    pub fn serving(&self, t_ms: i64) -> bool {
        self.phase(t_ms) == Phase::Up
    }
}

/// The wall-clock time of an event (`at` before the window's end), unix milliseconds.
fn at_ms(window_end_ms: i64, e: &EventSpec) -> i64 {
    window_end_ms - e.at_before_end.as_millis() as i64
}

/// Every replica's [`Life`], model by model (one entry per replica index).
pub(crate) fn lives(spec: &ScenarioSpec) -> Vec<Vec<Life>> {
    let models: Vec<(String, u32)> = spec.models.iter().map(|m| (m.name.clone(), m.replicas)).collect();
    plan(&spec.events, &models, spec.window_end().timestamp_millis())
}

fn plan(events: &[EventSpec], models: &[(String, u32)], end_ms: i64) -> Vec<Vec<Life>> {
    let mut out: Vec<Vec<Life>> = models.iter().map(|(_, n)| vec![Life::default(); *n as usize]).collect();
    let mut rollouts = vec![0usize; models.len()];
    for (ei, e) in events.iter().enumerate() {
        let Some(mi) = models.iter().position(|(name, _)| *name == e.model) else { continue };
        let at = at_ms(end_ms, e);
        let rollout = (e.kind == EventKind::Rollout).then(|| {
            rollouts[mi] += 1;
            rollouts[mi] - 1
        });
        for (order, r) in e.replicas.iter().enumerate() {
            let Some(life) = out[mi].get_mut(*r as usize) else { continue };
            match e.kind {
                EventKind::ReplicaAdded => life.added_ms = Some(at),
                EventKind::ReplicaRemoved => life.removed_ms = Some(at),
                _ => {
                    let down_ms = at + order as i64 * e.stagger.as_millis() as i64;
                    life.outages.push(Outage {
                        event: ei,
                        down_ms,
                        up_ms: down_ms + e.down.as_millis() as i64,
                        blocks: e.num_gpu_blocks,
                        rollout,
                        warm_up_ms: e.warm_up.as_millis() as i64,
                        warm_up_slowdown: e.warm_up_slowdown,
                    });
                }
            }
        }
    }
    for life in out.iter_mut().flatten() {
        life.outages.sort_by_key(|o| o.down_ms);
    }
    out
}

/// Refuse plans that cannot happen: a replica added twice or after leaving, down twice at once,
/// restarted before it exists or after it left.
fn check_lives(events: &[EventSpec], models: &[(String, u32)], cx: &Ctx) -> Result<(), super::ScenarioError> {
    // Times relative to an arbitrary window end; only their order matters here.
    let end = cx.total.as_millis() as i64;
    let lives = plan(events, models, end);
    for (ei, e) in events.iter().enumerate() {
        let field = format!("event[{ei}]");
        let Some(mi) = models.iter().position(|(name, _)| *name == e.model) else { continue };
        for r in &e.replicas {
            let same_kind_twice = events[..ei].iter().any(|o| o.kind == e.kind && o.model == e.model && o.replicas.contains(r) && !e.kind.restarts());
            if same_kind_twice {
                return Err((cx.invalid)(&field, format!("replica {r} of {:?} is {} twice", e.model, e.kind)));
            }
            let life = &lives[mi][*r as usize];
            if let (Some(a), Some(rm)) = (life.added_ms, life.removed_ms) {
                if rm <= a {
                    return Err((cx.invalid)(&field, format!("replica {r} of {:?} would be removed before it is added", e.model)));
                }
            }
            for (k, o) in life.outages.iter().enumerate() {
                if o.event != ei {
                    continue;
                }
                if let Some(next) = life.outages.get(k + 1) {
                    if next.down_ms < o.up_ms.max(o.down_ms + 1) {
                        return Err((cx.invalid)(
                            &field,
                            format!("replica {r} of {:?} is still down for event[{ei}] when event[{}] takes it down again", e.model, next.event),
                        ));
                    }
                }
                if life.added_ms.is_some_and(|a| o.down_ms <= a) {
                    return Err((cx.invalid)(&field, format!("replica {r} of {:?} does not exist yet at {}", e.model, describe(e))));
                }
                if life.removed_ms.is_some_and(|rm| o.down_ms >= rm) {
                    return Err((cx.invalid)(&field, format!("replica {r} of {:?} has been removed by then", e.model)));
                }
            }
        }
    }
    Ok(())
}

fn describe(e: &EventSpec) -> String {
    format!("{} {} before the window's end", e.kind, humantime::format_duration(e.at_before_end))
}

/// Everything the product should list, oldest first (then by kind and model).
pub(crate) fn true_events(spec: &ScenarioSpec) -> Vec<TrueEvent> {
    let replicas = spec.replicas();
    let instance = |model: &str, r: u32| replicas.iter().find(|x| x.model == model && x.index == r).map(|x| x.instance.clone()).unwrap_or_default();
    let end = spec.window_end();
    let lives = lives(spec);
    let mut blocks: Vec<Vec<u64>> = spec.models.iter().map(|m| vec![super::sim::gpu_blocks(m); m.replicas as usize]).collect();
    let mut images: Vec<String> = spec.models.iter().map(|_| DEFAULT_IMAGE.to_string()).collect();
    let mut generations: Vec<u64> = spec.models.iter().map(|_| FIRST_GENERATION).collect();
    let mut out = Vec::new();
    let mut push = |time: DateTime<Utc>, kind: &str, model: &str, instances: Vec<String>, detail: String| {
        out.push(TrueEvent { time, kind: kind.to_string(), model: model.to_string(), instances, detail });
    };
    let last = spec.window_end();
    // Events are applied in time order so that "before" values are right.
    let mut order: Vec<usize> = (0..spec.events.len()).collect();
    order.sort_by_key(|i| std::cmp::Reverse(spec.events[*i].at_before_end));
    for ei in order {
        let e = &spec.events[ei];
        let Some(mi) = spec.models.iter().position(|m| m.name == e.model) else { continue };
        let at = end - delta(e.at_before_end);
        let names: Vec<String> = e.replicas.iter().map(|r| instance(&e.model, *r)).collect();
        match e.kind {
            EventKind::ReplicaAdded | EventKind::ReplicaRemoved => {
                for name in names {
                    push(at, e.kind.as_str(), &e.model, vec![name], String::new());
                }
                continue;
            }
            _ => {}
        }
        // The outages of this event, in replica order, that begin inside the timeline.
        let outages: Vec<(u32, Outage)> = e
            .replicas
            .iter()
            .filter_map(|r| {
                let o = lives[mi][*r as usize].outages.iter().find(|o| o.event == ei)?;
                Some((*r, o.clone()))
            })
            .filter(|(_, o)| o.down_ms <= last.timestamp_millis())
            .collect();
        let time = |ms: i64| DateTime::<Utc>::from_timestamp_millis(ms).unwrap_or(at);
        if outages.is_empty() {
            continue;
        }
        let restarted: Vec<String> = outages.iter().map(|(r, _)| instance(&e.model, *r)).collect();
        push(at, "restart", &e.model, restarted, format!("{} of {} replicas", outages.len(), spec.models[mi].replicas));
        for (r, o) in &outages {
            if o.up_ms > o.down_ms {
                push(time(o.down_ms), "target-down", &e.model, vec![instance(&e.model, *r)], String::new());
                if o.up_ms <= last.timestamp_millis() {
                    push(time(o.up_ms), "target-up", &e.model, vec![instance(&e.model, *r)], String::new());
                }
            }
        }
        let back: Vec<&(u32, Outage)> = outages.iter().filter(|(_, o)| o.up_ms <= last.timestamp_millis()).collect();
        let first_back = back.iter().map(|(_, o)| o.up_ms).min();
        match e.kind {
            EventKind::ConfigChange => {
                let new = e.num_gpu_blocks.unwrap_or_default();
                if let Some(first) = first_back {
                    let before = back.first().map(|(r, _)| blocks[mi][*r as usize]).unwrap_or_default();
                    let changed: Vec<String> = back.iter().map(|(r, _)| instance(&e.model, *r)).collect();
                    push(time(first), "config-change", &e.model, changed, format!("num_gpu_blocks {before} -> {new}"));
                }
                for (r, _) in &back {
                    blocks[mi][*r as usize] = new;
                }
            }
            EventKind::Rollout => {
                let generation = generations[mi];
                generations[mi] += 1;
                let rolled: Vec<String> = outages.iter().map(|(r, _)| instance(&e.model, *r)).collect();
                let mut detail = format!("generation {generation} -> {}", generation + 1);
                if let Some(img) = e.image.as_ref().filter(|img| **img != images[mi]) {
                    detail.push_str(&format!(", image {} -> {img}", images[mi]));
                    if let Some(first) = first_back {
                        let changed: Vec<String> = back.iter().map(|(r, _)| instance(&e.model, *r)).collect();
                        push(time(first), "version-change", &e.model, changed, format!("image {} -> {img}", images[mi]));
                    }
                    images[mi] = img.clone();
                }
                push(at, "rollout", &e.model, rolled, detail);
            }
            _ => {}
        }
    }
    if let (Some(inc), Some(onset)) = (&spec.incident, spec.incident_onset()) {
        // The state shows from the first sample after its onset.
        let first = onset + delta(spec.interval);
        let who = vec![instance(&inc.model, inc.replica)];
        if first <= end {
            let node = replicas.iter().find(|x| x.model == inc.model && x.index == inc.replica).map(|x| x.node.as_str());
            if let Some((kind, detail)) = inc.kind.true_event(node.unwrap_or_default()) {
                push(first, kind, &inc.model, who, detail);
            }
        }
    }
    out.sort();
    out
}
