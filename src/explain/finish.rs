//! The steps that change the ranked findings after the follow-ups, as one named list in the order
//! they run. Each reads what the steps before it wrote, so the order is part of the behaviour:
//!
//! 1. `retitle clipped`: a finding whose trend shows the window clipped its episode says so in its
//!    title ([`judge::retitle_clipped`]);
//! 2. `onset`: when each finding began, from its trend ([`onset::apply`]);
//! 3. `ongoing first`: with onsets known, findings still going on rank before those that are over
//!    ([`crate::rank::ongoing_first`]);
//! 4. `correlate`: a finding whose onset follows a change on its scope is tied to it
//!    ([`correlate::apply`], which reads the onsets);
//! 5. `cold start`: a replica slow because it just started ([`cold_start::apply`], which reads the
//!    changes correlate tied);
//! 6. `replica cause`: why a replica a finding names differs: load, configuration or hardware
//!    ([`replica_cause::apply`]);
//! 7. `gpu reasons`: the DCGM clocks-event reasons a GPU finding's evidence holds ([`gpu_reasons::apply`]);
//! 8. `answered by the run`: a rule step the rule file has answered by the binding limit or by the
//!    per-replica breakdown becomes a checked statement with their numbers ([`answer_from_run`]);
//! 9. `levers ruled out`: a step that proposes changing a flag the finding's evidence rules out
//!    (its won't-help) is not given, so no two lines of one finding contradict each other.
//!
//! The follow-ups themselves come before (`follow_up::apply`, which fills the trends these read),
//! and what else moved after (`moved::apply`, which reads every finding as finished here).

use std::collections::BTreeMap;

use super::binding::ReplicaRead;
use super::{cold_start, correlate, gpu_reasons, judge, onset, replica_cause};
use crate::events::ReplicaLatency;
use crate::report::{Awaits, Binding, BoundAnswer, Event, Finding, RunParams, Scope, SpreadAnswer, SpreadMeasure, Step, EVEN_SPREAD};
use crate::rules::eval::SignalTable;
use crate::rules::RuleSet;

/// What the finishing steps read besides the findings.
pub struct Finish<'a> {
    pub rules: &'a RuleSet,
    pub p: &'a RunParams,
    pub table: &'a SignalTable,
    pub events: &'a [Event],
    /// How precisely changes and trends are dated: the coarser of the two steps.
    pub step: u64,
    pub latency: &'a [ReplicaLatency],
    pub replicas: &'a BTreeMap<Scope, Vec<ReplicaRead>>,
    /// Which limit bound each model (and each replica that differs).
    pub binding: &'a [Binding],
}

type FinishStep = fn(&mut [Finding], &Finish);

/// The steps, named, in the order they run.
pub const STEPS: &[(&str, FinishStep)] = &[
    ("retitle clipped", retitle_clipped),
    ("onset", onset),
    ("ongoing first", ongoing_first),
    ("correlate", correlate),
    ("cold start", cold_start),
    ("replica cause", replica_cause),
    ("gpu reasons", gpu_reasons),
    ("answered by the run", answered_by_the_run),
    ("levers ruled out", levers_ruled_out),
];

/// Run every step of [`STEPS`] over `findings`, in order.
pub fn run(findings: &mut [Finding], with: &Finish) {
    for (_, step) in STEPS {
        step(findings, with);
    }
}

fn retitle_clipped(f: &mut [Finding], c: &Finish) {
    judge::retitle_clipped(f, c.rules, c.p.window.duration());
}

fn onset(f: &mut [Finding], _: &Finish) {
    onset::apply(f);
}

fn ongoing_first(f: &mut [Finding], _: &Finish) {
    crate::rank::ongoing_first(f);
}

fn correlate(f: &mut [Finding], c: &Finish) {
    correlate::apply(f, c.events, c.step, c.p.window.start, c.p.baseline.start, c.rules);
}

fn cold_start(f: &mut [Finding], c: &Finish) {
    cold_start::apply(f, c.events, c.latency, &c.p.window, c.rules);
}

fn replica_cause(f: &mut [Finding], c: &Finish) {
    replica_cause::apply(f, c.replicas, c.table, c.rules, c.p);
}

fn gpu_reasons(f: &mut [Finding], c: &Finish) {
    gpu_reasons::apply(f, c.rules);
}

fn answered_by_the_run(findings: &mut [Finding], c: &Finish) {
    for f in findings {
        let binding = c.binding.iter().find(|b| b.is_model_of(&f.scope, &c.p.replica_label));
        let replicas = c.replicas.iter().find(|(model, _)| model.iter().all(|(k, v)| f.scope.get(k) == Some(v))).map(|(_, r)| r.as_slice());
        for step in f.steps.iter_mut() {
            if let Some(answer) = answer_from_run(step, binding, replicas, &c.p.replica_label) {
                *step = answer;
            }
        }
    }
}

/// The answer to a step that awaits the binding or the replicas, where the run read them.
fn answer_from_run(step: &Step, binding: Option<&Binding>, replicas: Option<&[ReplicaRead]>, replica_label: &str) -> Option<Step> {
    let Step::Rule { ask, awaits: Some(awaits), .. } = step else { return None };
    match awaits {
        Awaits::Binding { held_by, if_held, if_not_held } => {
            let b = binding?;
            let confirmed = held_by.contains(&b.limit);
            Some(Step::Bound(BoundAnswer {
                ask: ask.clone(),
                limit: b.limit,
                share: b.share,
                typical: b.typical.clone(),
                confirmed,
                meaning: if confirmed { if_held.clone() } else { if_not_held.clone() },
            }))
        }
        Awaits::Replicas { if_even, if_uneven } => {
            let reps = replicas.filter(|r| !r.is_empty())?;
            // What each replica serves: its generated tokens per second where every one was read.
            let generation: Option<Vec<f64>> = reps.iter().map(|r| r.generation).collect();
            let (measure, served) = match generation {
                Some(g) => (SpreadMeasure::GenerationTokens, g),
                None => (SpreadMeasure::Running, reps.iter().map(|r| r.running).collect()),
            };
            let low = served.iter().copied().fold(f64::INFINITY, f64::min);
            let (busiest, high) = served.iter().enumerate().fold((0, f64::NEG_INFINITY), |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) });
            let even = high <= low * EVEN_SPREAD;
            let name = |r: &ReplicaRead| r.scope.get(replica_label).cloned().unwrap_or_else(|| crate::report::scope_text(&r.scope));
            Some(Step::Spread(SpreadAnswer {
                ask: ask.clone(),
                replicas: reps.len(),
                measure,
                low,
                high,
                busiest: (!even).then(|| name(&reps[busiest])),
                even,
                meaning: if even { if_even.clone() } else { if_uneven.clone() },
            }))
        }
    }
}

fn levers_ruled_out(findings: &mut [Finding], _: &Finish) {
    drop_ruled_out_levers(findings);
}

/// Leave out every step whose lever (`--max-num-seqs`) the finding's won't-help names.
fn drop_ruled_out_levers(findings: &mut [Finding]) {
    for f in findings {
        let out: Vec<&str> = f.wont_help.iter().filter_map(|w| w.ruled.as_ref()).flat_map(|r| r.flags().iter().copied()).collect();
        f.steps.retain(|s| s.lever().is_none_or(|l| !out.contains(&l)));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_steps_run_in_their_written_order() {
        let names: Vec<&str> = super::STEPS.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["retitle clipped", "onset", "ongoing first", "correlate", "cold start", "replica cause", "gpu reasons", "answered by the run", "levers ruled out"]
        );
    }

    fn replica(name: &str, running: f64, generation: Option<f64>) -> super::ReplicaRead {
        let scope = [("model_name".to_string(), "m".to_string()), ("instance".to_string(), name.to_string())].into();
        super::ReplicaRead { scope, running, peak: running, waiting: 0.0, kv: None, generation, cap: None, limit: crate::report::LimitKind::None, share: 1.0 }
    }

    fn awaiting(awaits: crate::report::Awaits) -> crate::report::Step {
        crate::report::Step::Rule { ask: "Ask.".into(), lever: None, awaits: Some(awaits) }
    }

    #[test]
    fn a_step_awaiting_the_binding_is_confirmed_only_by_a_limit_it_names() {
        use crate::report::{Awaits, Binding, LimitKind, Step};
        let awaits =
            Awaits::Binding { held_by: vec![LimitKind::MaxNumSeqs, LimitKind::KvCache], if_held: Some("held".into()), if_not_held: Some("not".into()) };
        let binding = |limit| Binding {
            scope: Default::default(),
            limit,
            share: 0.8,
            shares: Default::default(),
            basis: Default::default(),
            steps: 10,
            step_seconds: 15,
            typical: None,
        };
        let step = awaiting(awaits);
        let Some(Step::Bound(b)) = super::answer_from_run(&step, Some(&binding(LimitKind::MaxNumSeqs)), None, "instance") else { panic!() };
        assert!(b.confirmed && b.meaning.as_deref() == Some("held"), "{b:?}");
        assert_eq!(b.text(), "Bound by max_num_seqs for 80% of the window: held.");
        let Some(Step::Bound(b)) = super::answer_from_run(&step, Some(&binding(LimitKind::None)), None, "instance") else { panic!() };
        assert!(!b.confirmed && b.meaning.as_deref() == Some("not"), "{b:?}");
        assert_eq!(b.text(), "No limit bound: no request waited in the window: not.");
        assert_eq!(super::answer_from_run(&step, None, None, "instance"), None, "no binding read: the step stays asked");
    }

    #[test]
    fn a_step_awaiting_the_replicas_says_how_evenly_they_serve() {
        use crate::report::{Awaits, SpreadMeasure, Step};
        let step = awaiting(Awaits::Replicas { if_even: Some("even".into()), if_uneven: Some("uneven".into()) });
        let answer = |reps: &[super::ReplicaRead]| match super::answer_from_run(&step, None, Some(reps), "instance") {
            Some(Step::Spread(s)) => s,
            other => panic!("{other:?}"),
        };
        let even = answer(&[replica("a", 10.0, Some(400.0)), replica("b", 12.0, Some(500.0))]);
        assert!(even.even && even.busiest.is_none() && even.measure == SpreadMeasure::GenerationTokens, "{even:?}");
        assert_eq!(even.text(), "The 2 replicas each serve 400 to 500 generated tokens/s, within 1.5x of each other: even.");
        let uneven = answer(&[replica("a", 10.0, Some(400.0)), replica("b", 30.0, None), replica("c", 9.0, Some(380.0))]);
        assert_eq!(uneven.measure, SpreadMeasure::Running, "one replica's tokens unread: the running batch measures all");
        assert_eq!(uneven.busiest.as_deref(), Some("b"));
        assert_eq!(uneven.text(), "The 3 replicas serve 9 to 30 running requests: the most on b, 3.33x the least busy: uneven.");
        let one = answer(&[replica("a", 4.0, Some(205.0))]);
        assert_eq!(one.text(), "One replica serves the model (205 generated tokens/s): it has no peer to share its load with.");
        assert_eq!(super::answer_from_run(&step, None, Some(&[]), "instance"), None);
        let plain = crate::report::Step::ask("Ask.");
        assert_eq!(super::answer_from_run(&plain, None, Some(&[replica("a", 1.0, None)]), "instance"), None, "a step that awaits nothing is left");
    }

    #[test]
    fn a_step_never_proposes_a_lever_the_evidence_rules_out() {
        use crate::report::{Finding, Severity, Step, WontHelp};
        let mut f = Finding::bare("slow-decode", Severity::Warning, Default::default());
        f.steps =
            vec![Step::Rule { ask: "Lower max_num_seqs.".into(), lever: Some("--max-num-seqs".into()), awaits: None }, Step::ask("Look at the GPUs.")].into();
        f.wont_help = vec![WontHelp::from(crate::report::card::RuledOut::LowerSeqs { kv_peak: 0.5, fill: None })];
        let mut fs = vec![f];
        super::drop_ruled_out_levers(&mut fs);
        assert_eq!(fs[0].steps.iter().map(Step::text).collect::<Vec<_>>(), ["Look at the GPUs."]);
    }
}
