//! The fleet simulation: every replica, every scrape interval.
//!
//! Each interval a replica draws Poisson arrivals, splits off the requests the HTTP layer and the
//! engine's admission control reject, and draws each remaining request's prompt and output
//! length, queue, prefill and per-token times from lognormals whose medians come from the
//! replica's current [`StateParams`]. Observations go into cumulative histograms with vLLM's
//! bucket bounds, so every count is an integer, buckets never decrease and `+Inf` equals `_count`
//! by construction. Gauges are sampled at the interval's end: `num_requests_running` from
//! Little's law (busy seconds over the interval) unless the state pins it, the rest follow the
//! state's [`Level`](crate::Level)s. Counters start at an offset, because a scraped process has been running a
//! while: one healthy interval scaled by a random factor, so the offsets have the shape of real
//! traffic too.
//!
//! Engine steps are counted from the tokens actually produced: an idle engine takes no steps, so
//! `iteration_tokens_total` shows small batches when traffic is low. Speculative-decoding
//! counters are derived from the generated tokens and the acceptance rate; NIXL observes one
//! transfer per request; DCGM gauges describe one GPU per replica on its own node.
//!
//! Per-token latencies are subsampled (a few draws per request, weighted to the request's token
//! count) to keep generation fast in debug builds while keeping counts and sums consistent.
//! Every replica has its own ChaCha stream derived from the seed, so output does not depend on
//! evaluation order. A replica that stops being scraped keeps `up` (at 0) and loses every other
//! sample from then on.
//!
//! This file runs the fleet over the timeline ([`simulate`]) and says which state each replica is
//! in ([`state_at`]). Its parts are in `sim/`: the metric families (`families.rs`), histograms and
//! their buckets (`hist.rs`), the random draws (`draw.rs`), the fleet's names (`names.rs`), the
//! series a replica's samples collect into (`trace.rs`), one server (`replica.rs` and `replica/`)
//! and kube-state-metrics (`kube.rs`).

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::events::{self, Life, Phase};
use super::state::{Scope, StateParams, Workload};
use super::{ModelSpec, ScenarioSpec};

mod draw;
mod families;
mod hist;
mod kube;
mod names;
mod replica;
mod trace;

pub(crate) use draw::{binomial, lognormal};
pub use families::GeneratedSeries;
pub(crate) use families::{Fam, Generated, Kind, Line, Metric};
pub(crate) use hist::Hist;
pub(crate) use names::{fleet_names, host_stems};

use families::Family;
use kube::kube_state_metrics;
use names::rollout_pods;
use replica::Replica;
use trace::Trace;

/// Healthy KV-cache usage the cache size is chosen for (the middle of the healthy range).
const HEALTHY_KV: f64 = 0.45;
const BLOCK_SIZE: f64 = 16.0;

/// The state a replica is in during one interval.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moment {
    pub(crate) st: StateParams,
    /// Arrival multiplier of this replica (state, ramp and weights together).
    mult: f64,
    /// How far through the state's span the interval starts and ends, 0..1.
    pub(crate) frac_prev: f64,
    pub(crate) frac: f64,
    /// Whether this replica is the one `incident.replica` names.
    pub(crate) singled: bool,
}

/// The state replica `ri` of `model` is in during the interval `(prev_ms, now_ms]`.
pub(crate) fn state_at(spec: &ScenarioSpec, model: &ModelSpec, ri: u32, prev_ms: i64, now_ms: i64) -> Moment {
    let shares = model.arrival_shares();
    let base_share = shares.get(ri as usize).copied().unwrap_or(1.0);
    let healthy = Moment { st: StateParams::HEALTHY, mult: base_share, frac_prev: 0.0, frac: 0.0, singled: false };
    let (Some(incident), Some(onset)) = (spec.incident.as_ref().filter(|i| i.model == model.name), spec.incident_onset()) else {
        return healthy;
    };
    let singled = incident.replica == ri;
    let onset = onset.timestamp_millis();
    if prev_ms < onset {
        return Moment { singled, ..healthy };
    }
    let p = incident.kind.params();
    let end = spec.window_end().timestamp_millis();
    let frac_of = |t: i64| if end > onset { ((t - onset) as f64 / (end - onset) as f64).clamp(0.0, 1.0) } else { 1.0 };
    let (frac_prev, frac) = (frac_of(prev_ms), frac_of(now_ms));
    if p.scope == Scope::Replica && !singled {
        return Moment { frac_prev, frac, ..healthy };
    }
    // A pool of a router in PD mode: the other pool's workers stay healthy.
    let prefills = model.router.is_some_and(|r| r.prefills(ri, model.replicas));
    if (p.scope == Scope::PrefillPool && !prefills) || (p.scope == Scope::DecodePool && prefills) {
        return Moment { frac_prev, frac, ..healthy };
    }
    let share = if p.replica_weight != 1.0 {
        let n = shares.len() as f64;
        let weights: Vec<f64> = shares.iter().enumerate().map(|(i, s)| if i as u32 == incident.replica { s * p.replica_weight } else { *s }).collect();
        let total: f64 = weights.iter().sum();
        weights.get(ri as usize).map(|w| w * n / total).unwrap_or(1.0)
    } else {
        base_share
    };
    let mult = p.arrivals + (p.arrivals_at_end - p.arrivals) * frac;
    // A circuit the router holds open: that replica gets nothing, its peers its share.
    let share = match (circuit_open(&p, frac_prev, frac), singled) {
        (true, true) => 0.0,
        (true, false) if shares.len() > 1 => share * shares.len() as f64 / (shares.len() - 1) as f64,
        _ => share,
    };
    Moment { st: p, mult: mult * share, frac_prev, frac, singled }
}

/// Whether the router holds the singled replica's circuit open during `(frac_prev, frac]`.
pub(crate) fn circuit_open(p: &StateParams, frac_prev: f64, frac: f64) -> bool {
    p.router_open.iter().any(|(a, b)| frac_prev < *b && frac > *a)
}

/// KV-cache blocks sized so the healthy working set fills [`HEALTHY_KV`] of them: expected
/// running requests times their mean footprint (the prompt plus half the output so far).
pub(crate) fn gpu_blocks(model: &ModelSpec) -> u64 {
    let wl = Workload::DEFAULT;
    let healthy = StateParams::HEALTHY;
    let running = model.rate * wl.mean_service_s(&healthy);
    let prompt = wl.prompt_median * (wl.prompt_sigma * wl.prompt_sigma / 2.0).exp();
    let footprint = prompt + wl.mean_output(&healthy) / 2.0;
    ((running * footprint / BLOCK_SIZE / HEALTHY_KV).ceil() as u64).max(64)
}

/// Run the whole fleet over the scenario's timeline.
pub(crate) fn simulate(spec: &ScenarioSpec) -> Generated {
    let n = spec.sample_count();
    let interval_ms = spec.interval.as_millis() as i64;
    let start_ms = spec.start.timestamp_millis();
    let times_ms: Vec<i64> = (0..n as i64).map(|i| start_ms + i * interval_ms).collect();
    let secs = spec.interval.as_secs_f64();
    let names = fleet_names(spec);
    let lives = events::lives(spec);
    let new_pods = rollout_pods(spec);

    let mut by_family: BTreeMap<Fam, Vec<Metric>> = BTreeMap::new();
    let mut fleet_index = 0u32;
    for (mi, model) in spec.models.iter().enumerate() {
        let blocks = gpu_blocks(model);
        let factors = serving_factors(model, &lives[mi], &times_ms);
        // Each replica's arrivals and input seconds per sample, for a router in front.
        let mut trails: Vec<Vec<(f64, f64)>> = Vec::new();
        for (ri, replica_names) in (0..model.replicas).zip(&names[mi]) {
            let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
            rng.set_stream(((mi as u64) << 32) | u64::from(ri));
            // The first process started a while before the data begins.
            let started = (start_ms / 1000 - 7200 - i64::from(fleet_index) * 37) as f64;
            fleet_index += 1;
            let mut replica = Replica::new(spec, model, replica_names, rng, blocks, started);
            replica.cap = f64::from(model.max_num_seqs_of(ri));
            let life = &lives[mi][ri as usize];
            let mut trace = Trace::default();
            replica.prime(secs);
            replica.present = life.phase(times_ms[0]) != Phase::Absent;
            replica.emit(&mut trace);
            let mut trail = vec![(0.0, 0.0)];
            for (k, w) in times_ms.windows(2).enumerate() {
                let mut moment = state_at(spec, model, ri, w[0], w[1]);
                let phase = life.phase(w[1]);
                match phase {
                    Phase::Up => {
                        moment.mult *= factors[k + 1];
                        let slow = life.slowdown(w[1]);
                        moment.st.itl *= slow;
                        moment.st.prefill *= slow;
                    }
                    // not answering, or a process that only now starts: nothing to simulate
                    Phase::Absent | Phase::Down | Phase::Fresh(_) => moment.st.scraped = false,
                }
                replica.present = phase != Phase::Absent;
                replica.step(secs, &moment);
                if let Phase::Fresh(outage) = phase {
                    let blocks = outage.and_then(|o| o.blocks);
                    let pod = outage.and_then(|o| o.rollout).and_then(|r| new_pods[mi].get(r)?.get(ri as usize));
                    if replica.restart(w[1], blocks, pod.map(String::as_str)) {
                        trace.relabel();
                    }
                }
                replica.emit(&mut trace);
                trail.push(replica.interval);
            }
            trails.push(trail);
            for (fam, metric) in trace.finish() {
                by_family.entry(fam).or_default().push(metric);
            }
        }
        if model.router.is_some() {
            for (fam, metric) in super::router::series(spec, mi, &names[mi], &trails, &times_ms) {
                by_family.entry(fam).or_default().push(metric);
            }
        }
    }
    if spec.has_kube_state_metrics() {
        for (fam, metric) in kube_state_metrics(spec, &names, &lives, &new_pods, &times_ms) {
            by_family.entry(fam).or_default().push(metric);
        }
    }

    let families = by_family
        .into_iter()
        .map(|(fam, mut metrics)| {
            metrics.sort_by(|a, b| a.labels.cmp(&b.labels));
            Family { name: fam.name(spec.metrics), kind: fam.kind(), help: fam.help(), metrics }
        })
        .collect();
    Generated { times_ms, families }
}

/// Per sample time, the arrival multiplier of a model's serving replicas: the model's total rate
/// is shared by the replicas that serve, so when some are down, gone or not yet added, the others
/// take their share (exactly 1 while all serve).
fn serving_factors(model: &ModelSpec, lives: &[Life], times_ms: &[i64]) -> Vec<f64> {
    let shares = model.arrival_shares();
    let all: f64 = shares.iter().sum();
    times_ms
        .iter()
        .map(|t| {
            let serving: Vec<f64> = shares.iter().zip(lives).filter(|(_, life)| life.serving(*t)).map(|(s, _)| *s).collect();
            if serving.len() == shares.len() || serving.is_empty() {
                1.0
            } else {
                all / serving.iter().sum::<f64>()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kv_cache_is_sized_for_the_healthy_working_set() {
        let m = ModelSpec::new("m", 2, 2.0);
        let wl = Workload::DEFAULT;
        let h = StateParams::HEALTHY;
        let running = 2.0 * wl.mean_service_s(&h);
        let tokens = gpu_blocks(&m) as f64 * BLOCK_SIZE;
        let footprint = 600.0 * (0.245f64).exp() + wl.mean_output(&h) / 2.0;
        let usage = running * footprint / tokens;
        assert!((0.44..=0.46).contains(&usage), "{usage}");
    }
}
