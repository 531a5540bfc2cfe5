//! Stage: why the replica differs. A finding that names one replica (`replica-outlier`, and
//! `slow-decode` where its scope is one replica) says whether that replica differs from its peers
//! by its **load** (it runs a larger batch and decodes slower with it: balance or scale, it is not
//! a bad replica), by its **configuration** (its own `max_num_seqs` holds its running batch with a
//! queue while its peers run more: align the flag) or, when neither explains it, by its
//! **hardware** (check the GPU and node; drain and replace). See docs/how-it-decides.md,
//! "Hardware, load or config".
//!
//! Reads nothing of its own: each replica's running batch, queue, inferred cap and binding limit
//! come from the binding stage's reads ([`super::binding::replicas`]), a fixed handful of queries
//! whatever the fleet's size, and the replica's ITL over its peers' from the replica comparison
//! (`itl_replica_outlier`) when it is about the same replica.

use std::collections::BTreeMap;

use super::binding::{cap_slack, ReplicaRead};
use crate::report::{Finding, LimitKind, ReplicaCause, ReplicaCauseKind, RunParams, Scope};
use crate::rules::eval::SignalTable;

/// A running batch at least this many times its peers' median is a larger batch (and at least
/// `replica_running_gap` requests more: a ratio of near-idle batches is chance); it is their load
/// only when the replica also generates at least this many times their tokens per second. A replica
/// slow per token holds each request longer, so at the same traffic it runs a larger batch too,
/// but serves no more.
pub const LOAD_BATCH_RATIO: f64 = 1.5;
/// The threshold for the smallest gap in running requests that counts, and its value when the
/// pack does not set it.
pub const RUNNING_GAP: &str = "replica_running_gap";
pub const DEFAULT_RUNNING_GAP: f64 = 4.0;

/// What made the replica differ.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    /// A larger batch than its peers', with decode slower by no more than the batch is larger.
    Load { running: f64, peers_running: f64, itl_factor: f64 },
    /// Held at its own sequence cap with a queue while its peers run more: `peers` is their cap,
    /// or, when they never met one, the most they ran at once (`peers_capped` false).
    Config { cap: f64, waiting: f64, peers: f64, peers_capped: bool },
    /// Neither: the replica itself (its GPU, its node). The hook for a GPU fault on its pod (e.g. a
    /// `gpu_fault_share` signal): such a fault is hardware whatever the load, and keeps the rule's
    /// steps (check, drain and replace).
    Hardware,
}

use crate::stats::finite_median as median;

/// Classify one replica against its peers. `itl_factor`: its P95 ITL over its peers' median, when
/// known for this replica.
pub fn classify(named: &ReplicaRead, peers: &[&ReplicaRead], itl_factor: Option<f64>, running_gap: f64) -> Cause {
    if peers.is_empty() {
        return Cause::Hardware;
    }
    // Config: its own cap binds, with a queue, and every peer ran more than that cap at once.
    if let (LimitKind::MaxNumSeqs, Some(cap)) = (named.limit, named.cap) {
        let values: Vec<f64> = peers.iter().map(|r| r.cap.unwrap_or(r.peak).max(r.peak)).collect();
        if values.iter().all(|v| *v > cap + cap_slack(cap)) {
            let peers_capped = peers.iter().all(|r| r.cap.is_some());
            let peers_value = median(values).unwrap_or(cap);
            return Cause::Config { cap, waiting: named.waiting, peers: peers_value, peers_capped };
        }
    }
    // Load: a larger batch, and decode slower by no more than the batch is larger.
    let peers_running = median(peers.iter().map(|r| r.running).collect()).unwrap_or(0.0);
    let peers_generation = median(peers.iter().filter_map(|r| r.generation).collect());
    let serves_more = match (named.generation, peers_generation) {
        (Some(g), Some(p)) => g >= LOAD_BATCH_RATIO * p && g > 0.0,
        _ => false,
    };
    let larger = serves_more && named.running - peers_running >= running_gap && named.running >= LOAD_BATCH_RATIO * peers_running;
    if let Some(f) = itl_factor.filter(|f| f.is_finite() && *f > 0.0) {
        let batch_factor = named.running / peers_running.max(1.0);
        if larger && f <= batch_factor {
            return Cause::Load { running: named.running, peers_running, itl_factor: f };
        }
    }
    Cause::Hardware
}

/// The cause as the report carries it (worded by [`ReplicaCause::words`]).
pub fn cause_of(cause: &Cause, replica: &str, named: &ReplicaRead, peers_running: f64, itl: Option<f64>) -> ReplicaCause {
    let base = ReplicaCause {
        kind: ReplicaCauseKind::Hardware,
        replica: replica.to_string(),
        running: Some(named.running),
        peers_running: Some(peers_running),
        itl_factor: itl,
        setting: None,
        value: None,
        peers_value: None,
        peers_capped: false,
        waiting: None,
        text: String::new(),
    };
    let mut rc = match cause {
        Cause::Load { running, peers_running, itl_factor } => {
            ReplicaCause { kind: ReplicaCauseKind::Load, running: Some(*running), peers_running: Some(*peers_running), itl_factor: Some(*itl_factor), ..base }
        }
        Cause::Config { cap, waiting, peers, peers_capped } => ReplicaCause {
            kind: ReplicaCauseKind::Config,
            setting: Some("max_num_seqs".into()),
            value: Some(*cap),
            peers_value: Some(*peers),
            peers_capped: *peers_capped,
            waiting: Some(*waiting),
            ..base
        },
        Cause::Hardware => base,
    };
    rc.text = rc.words();
    rc
}

/// What is known of the replica a finding names: how it differs, and the line the report carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub cause: Cause,
    pub line: ReplicaCause,
}

/// Why the replica `f` names differs from its peers. `reads`: each model's replicas, from
/// [`super::binding::replicas`]. Only a rule that asks (`replica_cause`) and a finding about one
/// replica that has peers; the caller leaves out what a cold start already explained.
pub fn found(f: &Finding, reads: &BTreeMap<Scope, Vec<ReplicaRead>>, table: &SignalTable, rules: &crate::rules::RuleSet, p: &RunParams) -> Option<Found> {
    if !rules.rule(&f.rule).is_some_and(|r| r.replica_cause) {
        return None;
    }
    let gap = rules.thresholds.get(RUNNING_GAP).copied().unwrap_or(DEFAULT_RUNNING_GAP);
    let label = &p.replica_label;
    let replica = f.scope.get(label)?;
    let model: Scope = f.scope.iter().filter(|(k, _)| p.group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    let reps = reads.get(&model)?;
    let named = reps.iter().find(|r| r.scope.get(label) == Some(replica))?;
    let peers: Vec<&ReplicaRead> = reps.iter().filter(|r| r.scope.get(label) != Some(replica)).collect();
    if peers.is_empty() {
        return None;
    }
    let itl = rules
        .signal_for(crate::signals::Role::ReplicaItlOutlier)
        .and_then(|id| table.get(id))
        .filter(|s| s.window.culprits.get(&model).and_then(|c| c.get(label)) == Some(replica))
        .and_then(|s| s.window.values.get(&model).copied());
    let cause = classify(named, &peers, itl, gap);
    let peers_running = median(peers.iter().map(|r| r.running).collect()).unwrap_or(0.0);
    let line = cause_of(&cause, replica, named, peers_running, itl);
    Some(Found { cause, line })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Severity, Step};
    use crate::rules::eval::{Availability, SignalValues, WindowValues};

    fn model() -> Scope {
        [("model_name".to_string(), "m".to_string())].into_iter().collect()
    }

    fn read(instance: &str, running: f64, peak: f64, waiting: f64, cap: Option<f64>, limit: LimitKind) -> ReplicaRead {
        let mut scope = model();
        scope.insert("instance".into(), instance.into());
        // Tokens served in proportion to the batch: what a busier replica does.
        ReplicaRead { scope, running, peak, waiting, kv: None, generation: Some(running * 30.0), cap, limit, share: 0.9 }
    }

    fn params() -> RunParams {
        let t = chrono::DateTime::parse_from_rfc3339("2026-01-15T12:00:00Z").unwrap().with_timezone(&chrono::Utc);
        let r = crate::report::TimeRange { start: t - chrono::Duration::minutes(30), end: t };
        RunParams { window: r, baseline: r, selector: String::new(), group_by: vec!["model_name".into()], replica_label: "instance".into() }
    }

    /// The ITL outlier, about `instance`.
    fn itl_table(instance: &str, factor: f64) -> SignalTable {
        let w = WindowValues {
            values: [(model(), factor)].into_iter().collect(),
            culprits: [(model(), [("instance".to_string(), instance.to_string())].into_iter().collect())].into_iter().collect(),
            ..WindowValues::unavailable(Availability::Ok)
        };
        [("itl_replica_outlier".to_string(), SignalValues { window: w, baseline: WindowValues::unavailable(Availability::Ok) })].into_iter().collect()
    }

    fn finding(instance: &str) -> Finding {
        let mut scope = model();
        scope.insert("instance".into(), instance.into());
        Finding {
            steps: vec![Step::ask("Check the named replica's GPU."), Step::ask("Drain it from the load balancer and compare.")].into(),
            ..Finding::bare("replica-outlier", Severity::Warning, scope)
        }
    }

    fn run(f: Finding, reads: Vec<ReplicaRead>, table: &SignalTable) -> Finding {
        let by: BTreeMap<Scope, Vec<ReplicaRead>> = [(model(), reads)].into_iter().collect();
        let rules = crate::rules::RuleSet { thresholds: BTreeMap::new(), ..crate::rules::load_builtin().unwrap() };
        let replica = found(&f, &by, table, &rules, &params());
        crate::explain::finish::build(f, crate::explain::finish::Parts { replica, ..Default::default() })
    }

    #[test]
    fn a_replica_held_by_its_own_lower_cap_is_config_and_gets_an_align_card() {
        // Issue 47: capped at 8 with 12 waiting; its peer ran 25 at once without a queue.
        let reads = vec![read("capped", 8.0, 8.0, 12.0, Some(8.0), LimitKind::MaxNumSeqs), read("big", 25.0, 27.0, 0.0, None, LimitKind::None)];
        let f = run(finding("capped"), reads, &itl_table("big", 2.4));
        let rc = f.replica_cause.as_ref().expect("a cause");
        assert_eq!(rc.kind, ReplicaCauseKind::Config);
        assert_eq!((rc.value, rc.peers_value, rc.peers_capped), (Some(8.0), Some(27.0), false));
        assert!(rc.text.contains("max_num_seqs 8 on capped, at least 27 on its peers"), "{}", rc.text);
        // The ITL outlier is the other replica's: not this one's number.
        assert_eq!(rc.itl_factor, None);
        assert_eq!(f.severity, Severity::Warning);
        let card = &f.recommendations[0];
        assert_eq!((card.flag.as_str(), card.from.as_str()), ("--max-num-seqs", "8"));
        assert!(card.to.starts_with("27"), "{card:?}");
        assert!(f.steps[0].text().starts_with("Align the flag"), "{:?}", f.steps);
        assert!(!f.steps.iter().any(|s| s.text().to_lowercase().contains("drain")), "{:?}", f.steps);
        // Peers held at their own higher cap: that cap, said as theirs.
        let reads = vec![read("capped", 8.0, 8.0, 12.0, Some(8.0), LimitKind::MaxNumSeqs), read("big", 32.0, 32.0, 3.0, Some(32.0), LimitKind::MaxNumSeqs)];
        let rc = run(finding("capped"), reads, &SignalTable::new()).replica_cause.unwrap();
        assert_eq!((rc.kind, rc.peers_value, rc.peers_capped), (ReplicaCauseKind::Config, Some(32.0), true));
    }

    #[test]
    fn every_replica_at_the_same_cap_is_not_a_configuration_difference() {
        let reads = vec![read("a", 32.0, 32.0, 10.0, Some(32.0), LimitKind::MaxNumSeqs), read("b", 32.0, 32.0, 9.0, Some(32.0), LimitKind::MaxNumSeqs)];
        let rc = run(finding("a"), reads, &SignalTable::new()).replica_cause.unwrap();
        assert_eq!(rc.kind, ReplicaCauseKind::Hardware);
    }

    #[test]
    fn a_larger_batch_that_slows_decode_with_it_is_load_and_info_never_drain() {
        // 25 running against 8 (3.1x), ITL 2.4x: decode slowed less than the batch grew.
        let reads = vec![
            read("big", 25.0, 27.0, 0.0, None, LimitKind::None),
            read("small", 8.0, 9.0, 0.0, None, LimitKind::None),
            read("other", 9.0, 10.0, 0.0, None, LimitKind::None),
        ];
        let f = run(finding("big"), reads.clone(), &itl_table("big", 2.4));
        let rc = f.replica_cause.as_ref().unwrap();
        assert_eq!(rc.kind, ReplicaCauseKind::Load);
        assert_eq!((rc.running, rc.peers_running, rc.itl_factor), (Some(25.0), Some(8.5), Some(2.4)));
        assert_eq!(f.severity, Severity::Info);
        assert!(f.steps.iter().any(|s| s.text().starts_with("Balance")) && f.steps.iter().any(|s| s.text().starts_with("Or scale")), "{:?}", f.steps);
        assert!(!f.steps.iter().any(|s| s.text().to_lowercase().contains("drain")), "{:?}", f.steps);
        // The same batch and ITL, serving no more tokens than its peers: each request stays longer
        // on a slow replica (replica-outlier's scenario: 46 running against 15, ITL 2.9x).
        let mut slow = reads.clone();
        slow[0].generation = Some(270.0);
        let f = run(finding("big"), slow, &itl_table("big", 2.4));
        assert_eq!(f.replica_cause.unwrap().kind, ReplicaCauseKind::Hardware);
        // ITL 4x on a batch 2.9x larger: slower than its batch explains, the replica itself.
        let f = run(finding("big"), reads.clone(), &itl_table("big", 4.0));
        assert_eq!(f.replica_cause.unwrap().kind, ReplicaCauseKind::Hardware);
        assert_eq!(f.severity, Severity::Warning);
        assert!(f.steps.iter().any(|s| s.text().contains("Drain")), "hardware keeps the rule's steps: {:?}", f.steps);
    }

    #[test]
    fn a_slow_replica_with_its_peers_batch_is_hardware() {
        // replica-outlier's scenario: the same load everywhere, ITL 3x on one replica.
        let reads = vec![
            read("slow", 6.0, 8.0, 0.0, None, LimitKind::None),
            read("b", 5.0, 7.0, 0.0, None, LimitKind::None),
            read("c", 5.5, 7.0, 0.0, None, LimitKind::None),
        ];
        let f = run(finding("slow"), reads, &itl_table("slow", 3.0));
        assert_eq!(f.replica_cause.as_ref().unwrap().kind, ReplicaCauseKind::Hardware);
        assert!(f.replica_cause.unwrap().text.starts_with("hardware:"));
        // A gap under replica_running_gap is no larger batch, whatever the ratio.
        let reads = vec![read("x", 3.0, 3.0, 0.0, None, LimitKind::None), read("y", 1.0, 1.0, 0.0, None, LimitKind::None)];
        assert_eq!(run(finding("x"), reads, &itl_table("x", 2.5)).replica_cause.unwrap().kind, ReplicaCauseKind::Hardware);
    }

    #[test]
    fn findings_not_about_one_replica_or_without_peers_or_after_a_cold_start_are_left_alone() {
        let reads = vec![read("a", 8.0, 8.0, 12.0, Some(8.0), LimitKind::MaxNumSeqs), read("b", 25.0, 25.0, 0.0, None, LimitKind::None)];
        let model_wide = Finding::bare("replica-outlier", Severity::Warning, model());
        assert!(run(model_wide, reads.clone(), &SignalTable::new()).replica_cause.is_none());
        let other_rule = Finding { rule: "kv-cache-pressure".into(), ..finding("a") };
        assert!(run(other_rule, reads.clone(), &SignalTable::new()).replica_cause.is_none());
        assert!(run(finding("a"), reads[..1].to_vec(), &SignalTable::new()).replica_cause.is_none());
        assert!(run(finding("gone"), reads, &SignalTable::new()).replica_cause.is_none());
    }
}
