//! Time by hop: where the time users wait went, per scope, from the means the signals already read
//! (no query of its own, so nothing here grows with the fleet).
//!
//! A request goes through a router or gateway (where one is seen), the API server's input
//! processing, the engine's queue, the KV transfer from a prefill instance (NIXL, where exported),
//! prefill and decode. Each hop is a mean per request from `_sum` over `_count` (exact whatever the
//! buckets), in the window and in the baseline:
//!
//! - `router`: a router's own time before the engine answered, less what the engine accounts for
//!   before it answers (vllm-router: `router_duration_mean` less `input_processing_mean`); or a
//!   gateway's time to first token less the engine's (`gateway_ttft_mean` less `ttft_mean`);
//! - `input-processing`: `input_processing_mean` (TTFT less queue and prefill);
//! - `engine-queue`: `queue_mean`, less `kv_transfer_mean` where NIXL exports it (vLLM records a
//!   disaggregated request scheduled once its KV has arrived: the transfer is in its queue time);
//! - `kv-transfer`: `kv_transfer_mean`; `prefill`: `prefill_mean`; `decode`: `decode_mean`.
//!
//! A hop grew when its mean rose at least [`GREW_FLOOR_S`] and at least [`GREW_RATIO`] times its
//! baseline; the one that rose most is named. A hop whose metrics are not in the data for a scope
//! is listed as not seen, with what it would need. docs/hops.md says what each hop reads.

use std::collections::{BTreeMap, BTreeSet};

use super::fetch::{Answers, ReadPlan, Way};
use super::plan::SignalPlan;
use crate::prom::Selector;
use crate::report::{Hop, HopSplit, HopValues, RunParams, Scope};
use crate::rules::eval::{Availability, SignalTable, SignalValues, WindowValues};
use crate::rules::RuleSet;
use crate::signals::{queries, HopRole, Role};
use crate::source::{Data, Request};

pub use crate::report::hop_seconds as seconds;

/// Where the router's time per request is within this factor of the engines' whole request
/// (`router_over_e2e`), the clients are taken not to stream: the router timed each request until
/// its whole answer, and its own wait is what lies beyond the engines' end-to-end time. The same
/// band as router-saturated's (rules/router.toml).
pub const WHOLE_ANSWER_BAND: (f64, f64) = (0.85, 1.15);

pub use crate::report::{HOP_GREW_FLOOR_S as GREW_FLOOR_S, HOP_GREW_RATIO as GREW_RATIO};

/// One signal's window and baseline value for a scope, finite values only, to the nanosecond: a
/// remainder of means is exact only to floating-point dust (`6.8e-13` s against `6.8e-13` s plus
/// an ulp from another server's summing order), which says nothing about a request's time.
fn read(table: &SignalTable, signal: &str, scope: &Scope) -> (Option<f64>, Option<f64>) {
    let Some(v) = table.get(signal) else { return (None, None) };
    let finite = |x: Option<&f64>| x.copied().filter(|x| x.is_finite()).map(|x| (x * 1e9).round() / 1e9);
    (finite(v.window.values.get(scope)), finite(v.baseline.values.get(scope)))
}

/// `a - b`, clamped at 0, where both exist.
fn less(a: (Option<f64>, Option<f64>), b: (Option<f64>, Option<f64>)) -> (Option<f64>, Option<f64>) {
    let one = |x: Option<f64>, y: Option<f64>| Some((x? - y.unwrap_or(0.0)).max(0.0));
    (one(a.0, b.0), one(a.1, b.1))
}

/// The signals the hops read, by their role in the pack (`role = "hop.queue"`): a role no signal
/// has reads as not seen.
#[derive(Debug, Clone, Default)]
pub struct HopSignals(BTreeMap<HopRole, String>);

impl HopSignals {
    pub fn of(rules: &RuleSet) -> HopSignals {
        HopSignals(
            rules
                .signals
                .values()
                .filter_map(|d| match d.role {
                    Some(Role::Hop(h)) => Some((h, d.id.clone())),
                    _ => None,
                })
                .collect(),
        )
    }

    /// The id of the signal with this role ("" where none has it: nothing reads under it).
    pub fn id(&self, role: HopRole) -> &str {
        self.0.get(&role).map_or("", String::as_str)
    }
}

/// Every scope's split, for the scopes with a mean time to first token in the window.
pub fn split(table: &SignalTable, ids: &HopSignals) -> Vec<HopSplit> {
    let scopes: BTreeSet<&Scope> = table.get(ids.id(HopRole::Ttft)).map(|v| v.window.values.keys().collect()).unwrap_or_default();
    scopes.into_iter().filter(|s| !s.is_empty()).filter_map(|s| split_one(table, s, ids)).collect()
}

fn split_one(table: &SignalTable, scope: &Scope, ids: &HopSignals) -> Option<HopSplit> {
    let id = |r| ids.id(r);
    let ttft = read(table, id(HopRole::Ttft), scope);
    ttft.0?;
    let input = read(table, id(HopRole::InputProcessing), scope);
    let hop = |name: &str, v: (Option<f64>, Option<f64>), from: &str| Hop {
        hop: name.to_string(),
        window: v.0,
        baseline: v.1,
        seen: v.0.is_some(),
        from: from.to_string(),
    };
    let router = {
        let vllm_router = read(table, id(HopRole::RouterDuration), scope);
        let gateway = read(table, id(HopRole::GatewayTtft), scope);
        if vllm_router.0.is_some() {
            // Per side: whole answers (the ratio in the band) less the engines' end-to-end mean
            // (the router's mean over the ratio), else less the engine's input processing.
            let over = read(table, id(HopRole::RouterOverE2e), scope);
            let whole =
                |r: Option<f64>, o: Option<f64>| o.filter(|o| *o >= WHOLE_ANSWER_BAND.0 && *o <= WHOLE_ANSWER_BAND.1 && *o > 0.0).and_then(|o| Some(r? / o));
            let engine_part = (whole(vllm_router.0, over.0).or(input.0), whole(vllm_router.1, over.1).or(input.1));
            let (router_id, input_id, over_id) = (id(HopRole::RouterDuration), id(HopRole::InputProcessing), id(HopRole::RouterOverE2e));
            let from = if whole(vllm_router.0, over.0).is_some() || whole(vllm_router.1, over.1).is_some() {
                format!("{router_id} less {input_id} (streams), or less the engines' end-to-end mean where {over_id} is within 15% of 1 (whole answers)")
            } else {
                format!("{router_id} less {input_id}")
            };
            hop("router", less(vllm_router, engine_part), &from)
        } else if gateway.0.is_some() {
            hop("router", less(gateway, ttft), &format!("{} less {}", id(HopRole::GatewayTtft), id(HopRole::Ttft)))
        } else {
            hop("router", (None, None), "a router's or gateway's own duration (vllm_router_generate_duration_seconds, a gateway's time to first token)")
        }
    };
    // A disaggregated request waits for its KV in the decode instance's queue: vLLM records it
    // scheduled once the transfer is done, so its queue time holds the transfer's.
    let queue = read(table, id(HopRole::Queue), scope);
    let transfer = read(table, id(HopRole::KvTransfer), scope);
    let mut hops = vec![router, hop("input-processing", input, id(HopRole::InputProcessing))];
    if transfer.0.is_some() {
        hops.push(hop("engine-queue", less(queue, transfer), &format!("{} less {}", id(HopRole::Queue), id(HopRole::KvTransfer))));
        hops.push(hop("kv-transfer", transfer, id(HopRole::KvTransfer)));
    } else {
        hops.push(hop("engine-queue", queue, id(HopRole::Queue)));
        hops.push(hop(
            "kv-transfer",
            (None, None),
            "vllm:nixl_xfer_time_seconds (NIXL only: without disaggregated prefill there is no transfer; another connector's stays in the queue time)",
        ));
    }
    hops.push(hop("prefill", read(table, id(HopRole::Prefill), scope), id(HopRole::Prefill)));
    hops.push(hop("decode", read(table, id(HopRole::Decode), scope), id(HopRole::Decode)));
    let router_w = hops[0].window.unwrap_or(0.0);
    let first_token = HopValues { window: ttft.0.map(|t| t + router_w), baseline: ttft.1.map(|t| t + hops[0].baseline.unwrap_or(0.0)) };
    let grew = grown(&hops).into_iter().max_by(|a, b| a.1.total_cmp(&b.1)).map(|(h, _)| h.to_string());
    Some(HopSplit { scope: scope.clone(), first_token, hops, grew, text: String::new() }.worded())
}

/// The engine's means read per replica, by the signals' own histograms: input processing is what
/// is left of the first token (as `input_processing_mean`), and the router's duration has no worker
/// label, so a replica's split starts at the engine.
const PER_REPLICA: [HopRole; 5] = [HopRole::Ttft, HopRole::Queue, HopRole::Prefill, HopRole::Decode, HopRole::KvTransfer];
/// The label that tags each part of the per-replica answer.
pub const PART_LABEL: &str = "vllm_diag_hop";
/// Replicas at most for the per-replica split (as what else moved's per-replica readings: past
/// this the split is per model only).
pub const MAX_REPLICAS: usize = super::moved::MAX_REPLICAS_WATCHED;

/// The per-replica reads: one instant query per side, every hop histogram's `_sum` and `_count`
/// rate per scope and replica, each tagged with [`PART_LABEL`] and joined with `or`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplicaPlan {
    pub label: String,
    pub window: Request,
    pub baseline: Request,
}

impl ReplicaPlan {
    pub fn requests(&self) -> Vec<Request> {
        vec![self.window.clone(), self.baseline.clone()]
    }

    /// How the two sides are read: where they ask the same query, as one range query whose two
    /// steps are the baseline's end and the window's (the server reads each series once over both
    /// windows), cut back into the two instants; each instant asked as it is where a recording
    /// made before holds only that.
    pub fn read_plan(&self) -> ReadPlan {
        let paired = match (&self.baseline, &self.window) {
            (Request::Instant { query: qb, time: tb }, Request::Instant { query: qw, time: tw }) if qb == qw => super::plan::pair(qb, *tb, *tw),
            _ => None,
        };
        let Some(paired) = paired else { return ReadPlan::whole(self.requests()) };
        let mut plan = ReadPlan::default();
        for at in &paired.at {
            if let Request::Instant { time, .. } = at {
                plan.wants.insert(at.clone(), vec![Way::at(paired.range.clone(), time.timestamp_millis()), Way::whole(at.clone())]);
            }
        }
        plan
    }
}

/// The per-replica reads for the hop signals the run planned, where replicas are told apart (the
/// replica label is not a grouping label) and there are at most [`MAX_REPLICAS`] of them.
pub fn replica_plan(signal_plan: &SignalPlan, ids: &HopSignals, selector: &Selector, p: &RunParams, replicas: Option<usize>) -> Option<ReplicaPlan> {
    let label = p.replica_label.clone();
    if p.group_by.contains(&label) || !crate::prom::is_label_name(&label) || replicas.is_none_or(|n| !(2..=MAX_REPLICAS).contains(&n)) {
        return None;
    }
    let by = p.group_by.iter().chain(std::iter::once(&label)).cloned().collect::<Vec<_>>().join(", ");
    let range = p.window.duration();
    let side = |window: bool, at| -> Option<Request> {
        let parts: Vec<String> = PER_REPLICA
            .iter()
            .filter_map(|role| {
                let id = ids.id(*role);
                let (w, b) = signal_plan.signals.get(id)?;
                let name = (if window { w } else { b }).resolved.as_ref()?.names.first()?;
                let fam = name.strip_suffix("_sum")?;
                Some(
                    ["_sum", "_count"]
                        .map(|suffix| queries::tagged(&queries::hop_part_rate(selector, fam, suffix, &by, range), PART_LABEL, &format!("{id}{suffix}"))),
                )
            })
            .flatten()
            .collect();
        (!parts.is_empty()).then(|| Request::Instant { query: queries::either(&parts), time: at })
    };
    Some(ReplicaPlan { window: side(true, p.window.end)?, baseline: side(false, p.baseline.end)?, label })
}

/// Each replica's split where it differs from its model's (see [`differs`]), placed after its
/// model's in `splits`.
pub fn with_replicas(splits: Vec<HopSplit>, plan: Option<&ReplicaPlan>, ids: &HopSignals, answers: &Answers, group_by: &[String]) -> Vec<HopSplit> {
    let Some(plan) = plan else { return splits };
    let table = replica_table(plan, ids, answers, group_by);
    let mut by_model: BTreeMap<Scope, Vec<HopSplit>> = BTreeMap::new();
    let scopes: BTreeSet<&Scope> = table.get(ids.id(HopRole::Ttft)).map(|v| v.window.values.keys().collect()).unwrap_or_default();
    for scope in scopes {
        let model: Scope = scope.iter().filter(|(k, _)| group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
        if let Some(mut one) = split_one(&table, scope, ids) {
            one.hops.retain(|h| h.hop != "router");
            let one = one.worded();
            by_model.entry(model).or_default().push(one);
        }
    }
    let mut out = Vec::with_capacity(splits.len());
    for model in splits {
        let replicas = by_model.remove(&model.scope).unwrap_or_default();
        let differing: Vec<HopSplit> = if replicas.len() < 2 {
            Vec::new()
        } else {
            replicas
                .iter()
                .enumerate()
                .filter(|(i, r)| differs(r, &model, replicas.iter().enumerate().filter(|(j, _)| j != i).map(|(_, x)| x)))
                .map(|(_, r)| r.clone())
                .collect()
        };
        out.push(model);
        out.extend(differing);
    }
    out
}

/// A replica differs where one of its hops grew that did not grow for its model, or where one of
/// its hops takes [`GREW_RATIO`] times the median of its peers' and [`GREW_FLOOR_S`] more in the
/// window (the model's mean weighs replicas by their requests: a replica serving most of them
/// hides in it, its peers do not).
pub fn differs<'a>(replica: &HopSplit, model: &HopSplit, peers: impl Iterator<Item = &'a HopSplit>) -> bool {
    let model_grew: BTreeSet<&str> = grown(&model.hops).into_iter().map(|(h, _)| h).collect();
    if grown(&replica.hops).iter().any(|(h, _)| !model_grew.contains(h)) {
        return true;
    }
    let peers: Vec<&HopSplit> = peers.collect();
    replica.hops.iter().any(|h| {
        let median = crate::stats::finite_median_of(peers.iter().filter_map(|p| p.hops.iter().find(|x| x.hop == h.hop).and_then(|x| x.window)));
        matches!((h.window, median), (Some(w), Some(m)) if w - m >= GREW_FLOOR_S && w >= GREW_RATIO * m)
    })
}

/// The per-replica answers as a signal table whose scopes carry the replica label: each hop's
/// mean per replica, and input processing as what the first token leaves after queue and prefill.
fn replica_table(plan: &ReplicaPlan, ids: &HopSignals, answers: &Answers, group_by: &[String]) -> SignalTable {
    let mut sums: [BTreeMap<(String, Scope), (Option<f64>, Option<f64>)>; 2] = Default::default();
    for (i, req) in [&plan.window, &plan.baseline].into_iter().enumerate() {
        let Some(Ok(resp)) = answers.get(req) else { continue };
        let Data::Vector(samples) = &resp.data else { continue };
        for s in samples {
            let (Some(part), Some(replica)) = (s.labels.get(PART_LABEL), s.labels.get(&plan.label)) else { continue };
            let mut scope: Scope = group_by.iter().map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect();
            scope.insert(plan.label.clone(), replica.clone());
            let (id, is_sum) = match (part.strip_suffix("_sum"), part.strip_suffix("_count")) {
                (Some(id), _) => (id, true),
                (_, Some(id)) => (id, false),
                _ => continue,
            };
            let e = sums[i].entry((id.to_string(), scope)).or_default();
            if is_sum {
                e.0 = Some(s.v)
            } else {
                e.1 = Some(s.v)
            }
        }
    }
    let mut means: BTreeMap<String, [BTreeMap<Scope, f64>; 2]> = BTreeMap::new();
    for (i, side) in sums.into_iter().enumerate() {
        for ((id, scope), (sum, count)) in side {
            if let (Some(sum), Some(count)) = (sum, count) {
                means.entry(id).or_default()[i].insert(scope, sum / count);
            }
        }
    }
    // Input processing: the first token less queue and prefill, where all three were read.
    let mut input: [BTreeMap<Scope, f64>; 2] = Default::default();
    for (i, side) in input.iter_mut().enumerate() {
        let get = |id: &str, scope: &Scope| means.get(id).and_then(|m| m[i].get(scope)).copied();
        for (scope, ttft) in means.get(ids.id(HopRole::Ttft)).map(|m| m[i].clone()).unwrap_or_default() {
            if let (Some(q), Some(pf)) = (get(ids.id(HopRole::Queue), &scope), get(ids.id(HopRole::Prefill), &scope)) {
                side.insert(scope, ttft - q - pf);
            }
        }
    }
    means.insert(ids.id(HopRole::InputProcessing).to_string(), input);
    let values = |v: BTreeMap<Scope, f64>| WindowValues { values: v, ..WindowValues::unavailable(Availability::Ok) };
    means.into_iter().map(|(id, [w, b])| (id, SignalValues { window: values(w), baseline: values(b) })).collect()
}

/// The hops that grew past the bar, with their rise in seconds.
fn grown(hops: &[Hop]) -> Vec<(&str, f64)> {
    hops.iter().filter_map(|h| Some((h.hop.as_str(), h.grew_by()?))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> HopSignals {
        HopSignals::of(&crate::rules::load_builtin().unwrap())
    }
    use crate::rules::eval::{Availability, SignalValues, WindowValues};

    fn scope(m: &str) -> Scope {
        [("model_name".to_string(), m.to_string())].into_iter().collect()
    }

    fn table(rows: &[(&str, f64, f64)]) -> SignalTable {
        let mut t = SignalTable::new();
        for (signal, w, b) in rows {
            let values = |v: f64| WindowValues { values: [(scope("m"), v)].into_iter().collect(), ..WindowValues::unavailable(Availability::Ok) };
            t.insert(signal.to_string(), SignalValues { window: values(*w), baseline: values(*b) });
        }
        t
    }

    const ENGINE: [(&str, f64, f64); 5] =
        [("ttft_mean", 0.21, 0.2), ("queue_mean", 0.05, 0.05), ("prefill_mean", 0.15, 0.14), ("input_processing_mean", 0.01, 0.01), ("decode_mean", 8.0, 7.9)];

    #[test]
    fn a_router_wait_that_grew_in_front_of_unchanged_engines_is_named_with_the_engines_unchanged() {
        let mut rows = ENGINE.to_vec();
        rows.push(("router_duration_mean", 1.81, 0.02));
        let s = &split(&table(&rows), &ids())[0];
        assert_eq!(s.grew.as_deref(), Some("router"));
        let router = &s.hops[0];
        assert!(router.seen && (router.window.unwrap() - 1.8).abs() < 1e-9 && (router.baseline.unwrap() - 0.01).abs() < 1e-9, "{router:?}");
        assert!((s.first_token.window.unwrap() - 2.01).abs() < 1e-9);
        assert!(s.text.contains("+1.79 s at the router, engine hops unchanged"), "{}", s.text);
        assert!(!s.text.contains("not seen"), "{}", s.text);
    }

    #[test]
    fn a_packs_own_signal_for_a_hop_is_read_under_its_id_and_named_in_the_split() {
        // A gateway's time to first token under another name: the pack's file gives it the role.
        let mut rules = crate::rules::load_builtin().unwrap();
        let mine = "[[signal]]\nid = \"edge_ttft_mean\"\ntitle = \"Edge TTFT\"\nunit = \"seconds\"\nkind = \"mean\"\nhistogram = [\"edge_ttft_seconds\"]\nrole = \"hop.gateway_ttft\"\n";
        crate::rules::load::load_str(&mut rules, "mine.toml", mine).unwrap();
        let mut rows = ENGINE.to_vec();
        rows.push(("edge_ttft_mean", 1.21, 0.22));
        rows.push(("gateway_ttft_mean", 9.0, 9.0));
        let s = &split(&table(&rows), &HopSignals::of(&rules))[0];
        assert_eq!(s.grew.as_deref(), Some("router"), "{}", s.text);
        assert_eq!(s.hops[0].from, "edge_ttft_mean less ttft_mean");
        assert!((s.hops[0].window.unwrap() - 1.0).abs() < 1e-9, "{:?}", s.hops[0]);
    }

    #[test]
    fn a_router_that_came_to_time_whole_answers_did_not_wait_longer() {
        // The router lab's blind run across the clients' switch to unstreamed requests: the
        // router's mean 79 ms -> 245 ms, 1.02 times the engines' whole request in the window.
        let mut rows = ENGINE.to_vec();
        rows.push(("router_duration_mean", 0.245, 0.079));
        rows.push(("router_over_e2e", 1.02, 0.3));
        let s = &split(&table(&rows), &ids())[0];
        assert_eq!(s.grew, None, "{}", s.text);
        let router = &s.hops[0];
        assert!((router.window.unwrap() - (0.245 - 0.245 / 1.02)).abs() < 1e-6, "{router:?}");
        assert!((router.baseline.unwrap() - 0.069).abs() < 1e-9, "{router:?}");
        assert!(router.from.contains("whole answers"), "{router:?}");
        // Past the band the router's time is its own again (the router-cpu phase: 3.2 times).
        let mut rows = ENGINE.to_vec();
        rows.push(("router_duration_mean", 1.06, 0.007));
        rows.push(("router_over_e2e", 3.2, 0.02));
        let s = &split(&table(&rows), &ids())[0];
        assert_eq!(s.grew.as_deref(), Some("router"));
        assert!((s.hops[0].window.unwrap() - 1.05).abs() < 1e-9);
    }

    /// The per-replica answer for one side: per replica, (ttft, queue, prefill, decode) means over
    /// one request a second.
    fn replica_answer(rows: &[(&str, [f64; 4])]) -> crate::source::Response {
        let mut samples = Vec::new();
        for (replica, means) in rows {
            for (id, mean) in ["ttft_mean", "queue_mean", "prefill_mean", "decode_mean"].into_iter().zip(means) {
                for (part, v) in [("_sum", *mean), ("_count", 1.0)] {
                    let labels: crate::prom::Labels = [
                        ("model_name".to_string(), "m".to_string()),
                        ("instance".to_string(), replica.to_string()),
                        (PART_LABEL.to_string(), format!("{id}{part}")),
                    ]
                    .into();
                    samples.push(crate::source::Sample { labels: std::sync::Arc::new(labels), t: 0.0, v });
                }
            }
        }
        crate::source::Response { data: Data::Vector(samples), warnings: Vec::new(), infos: Vec::new() }
    }

    #[test]
    fn a_replica_whose_hops_differ_from_its_peers_is_split_apart_after_its_model() {
        // Three replicas; c's queue went from 10 ms to 900 ms, a and b stayed. The model's mean
        // queue rose too (to 307 ms), so the model's split names the queue, and c alone differs.
        let plan = ReplicaPlan {
            label: "instance".into(),
            window: Request::Instant { query: "w".into(), time: chrono::DateTime::UNIX_EPOCH },
            baseline: Request::Instant { query: "b".into(), time: chrono::DateTime::UNIX_EPOCH },
        };
        let mut answers = Answers::new();
        answers.insert(plan.window.clone(), Ok(replica_answer(&[("a", [0.2, 0.01, 0.15, 8.0]), ("b", [0.21, 0.01, 0.15, 8.1]), ("c", [1.1, 0.9, 0.15, 8.0])])));
        answers
            .insert(plan.baseline.clone(), Ok(replica_answer(&[("a", [0.2, 0.01, 0.15, 8.0]), ("b", [0.2, 0.01, 0.15, 8.0]), ("c", [0.2, 0.01, 0.15, 8.0])])));
        let model = table(&[
            ("ttft_mean", 0.503, 0.2),
            ("queue_mean", 0.307, 0.01),
            ("prefill_mean", 0.15, 0.15),
            ("input_processing_mean", 0.046, 0.04),
            ("decode_mean", 8.03, 8.0),
        ]);
        let splits = with_replicas(split(&model, &ids()), Some(&plan), &ids(), &answers, &["model_name".to_string()]);
        assert_eq!(splits.len(), 2, "{splits:#?}");
        assert_eq!(splits[0].scope, scope("m"));
        assert_eq!(splits[1].scope.get("instance").map(String::as_str), Some("c"));
        assert_eq!(splits[1].grew.as_deref(), Some("engine-queue"));
        assert!(splits[1].hops.iter().all(|h| h.hop != "router") && !splits[1].text.contains("not seen: router"), "{}", splits[1].text);
        assert!(splits[1].text.contains("+890 ms in the engine's queue"), "{}", splits[1].text);
        // No plan (one replica, or too many): the model's split alone.
        assert_eq!(with_replicas(split(&model, &ids()), None, &ids(), &answers, &["model_name".to_string()]).len(), 1);
    }

    #[test]
    fn a_replica_carrying_most_requests_differs_from_its_peers_not_from_its_model() {
        // The fleet lab's uneven phase: one replica took most requests, so the model's means are
        // its own; the other replica's hops are what it differs from.
        let split_of = |decode: f64| HopSplit {
            scope: scope("m"),
            first_token: HopValues { window: Some(0.2), baseline: Some(0.2) },
            hops: vec![Hop { hop: "decode".into(), window: Some(decode), baseline: Some(decode), seen: true, from: String::new() }],
            grew: None,
            text: String::new(),
        };
        let (busy, idle, model) = (split_of(1.92), split_of(0.65), split_of(1.8));
        assert!(differs(&busy, &model, [&idle].into_iter()));
        assert!(!differs(&idle, &model, [&busy].into_iter()));
        assert!(!differs(&split_of(0.7), &model, [&idle].into_iter()), "50 ms above its peer is no difference");
    }

    #[test]
    fn without_router_metrics_the_router_is_not_seen_and_a_transfer_that_grew_is_named() {
        // The transfer is in the queue time (vLLM schedules the request once its KV came): the
        // queue hop is what is left of it.
        let mut rows = ENGINE.to_vec();
        rows[1] = ("queue_mean", 0.33, 0.059);
        rows.push(("kv_transfer_mean", 0.28, 0.009));
        let s = &split(&table(&rows), &ids())[0];
        assert_eq!(s.grew.as_deref(), Some("kv-transfer"));
        assert!(!s.hops[0].seen && s.hops[0].window.is_none());
        let queue = &s.hops[2];
        assert_eq!(queue.hop, "engine-queue");
        assert!((queue.window.unwrap() - 0.05).abs() < 1e-9 && (queue.baseline.unwrap() - 0.05).abs() < 1e-9, "{queue:?}");
        assert!(s.text.contains("in the KV transfer, other hops unchanged; not seen: router"), "{}", s.text);
    }

    #[test]
    fn a_small_or_proportionally_small_rise_is_no_growth_and_missing_hops_are_not_seen() {
        // Decode 8 s -> 8.5 s: half a second, but 1.06x. Queue 10 ms -> 60 ms: 6x, but 50 ms.
        let rows = [("ttft_mean", 0.25, 0.2), ("queue_mean", 0.06, 0.01), ("decode_mean", 8.5, 8.0)];
        let s = &split(&table(&rows), &ids())[0];
        assert_eq!(s.grew, None);
        assert!(s.text.starts_with("no hop grew: first token +50 ms"), "{}", s.text);
        let unseen: Vec<&str> = s.hops.iter().filter(|h| !h.seen).map(|h| h.hop.as_str()).collect();
        assert_eq!(unseen, ["router", "input-processing", "kv-transfer", "prefill"]);
    }

    #[test]
    fn two_hops_that_grew_name_the_larger_and_the_other_beside_it() {
        let mut rows = ENGINE.to_vec();
        rows[1] = ("queue_mean", 0.6, 0.05);
        rows[2] = ("prefill_mean", 1.5, 0.14);
        let s = &split(&table(&rows), &ids())[0];
        assert_eq!(s.grew.as_deref(), Some("prefill"));
        assert!(s.text.contains("in prefill, also +550 ms in the engine's queue"), "{}", s.text);
    }

    #[test]
    fn means_are_read_to_the_nanosecond_so_a_remainders_floating_point_dust_is_zero() {
        let rows = [("ttft_mean", 0.2, 0.2), ("input_processing_mean", 6.818295927857321e-13, 6.818434705735399e-13), ("queue_mean", 0.024802501085341, 0.02)];
        let s = &split(&table(&rows), &ids())[0];
        assert_eq!((s.hops[1].window, s.hops[1].baseline), (Some(0.0), Some(0.0)));
        assert_eq!(s.hops[2].window, Some(0.024802501));
    }

    #[test]
    fn no_first_token_mean_no_split_and_non_finite_values_are_no_values() {
        assert!(split(&table(&[("queue_mean", 0.1, 0.1)]), &ids()).is_empty());
        let s = &split(&table(&[("ttft_mean", 0.2, f64::NAN), ("prefill_mean", f64::INFINITY, 0.1)]), &ids())[0];
        assert!(s.first_token.baseline.is_none() && !s.hops[4].seen && s.grew.is_none(), "{s:?}");
    }
}
