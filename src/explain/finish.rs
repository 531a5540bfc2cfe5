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
//! 8. `levers ruled out`: a step that proposes changing a flag the finding's evidence rules out
//!    (its won't-help) is not given, so no two lines of one finding contradict each other.
//!
//! The follow-ups themselves come before (`follow_up::apply`, which fills the trends these read),
//! and what else moved after (`moved::apply`, which reads every finding as finished here).

use std::collections::BTreeMap;

use super::binding::ReplicaRead;
use super::{cold_start, correlate, gpu_reasons, judge, onset, replica_cause};
use crate::events::ReplicaLatency;
use crate::report::{Event, Finding, RunParams, Scope};
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
}

type Step = fn(&mut [Finding], &Finish);

/// The steps, named, in the order they run.
pub const STEPS: &[(&str, Step)] = &[
    ("retitle clipped", retitle_clipped),
    ("onset", onset),
    ("ongoing first", ongoing_first),
    ("correlate", correlate),
    ("cold start", cold_start),
    ("replica cause", replica_cause),
    ("gpu reasons", gpu_reasons),
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
    correlate::apply(f, c.events, c.step, c.p.window.start, c.p.baseline.start);
}

fn cold_start(f: &mut [Finding], c: &Finish) {
    cold_start::apply(f, c.events, c.latency, &c.p.window, c.rules);
}

fn replica_cause(f: &mut [Finding], c: &Finish) {
    replica_cause::apply(f, c.replicas, c.table, c.rules, c.p);
}

fn gpu_reasons(f: &mut [Finding], _: &Finish) {
    gpu_reasons::apply(f);
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
        assert_eq!(names, ["retitle clipped", "onset", "ongoing first", "correlate", "cold start", "replica cause", "gpu reasons", "levers ruled out"]);
    }

    #[test]
    fn a_step_never_proposes_a_lever_the_evidence_rules_out() {
        use crate::report::{Finding, Severity, Step, WontHelp};
        let mut f = Finding::bare("slow-decode", Severity::Warning, Default::default());
        f.steps = vec![
            Step::Rule { ask: "Lower max_num_seqs.".into(), lever: Some("--max-num-seqs".into()) },
            Step::Rule { ask: "Look at the GPUs.".into(), lever: None },
        ]
        .into();
        f.wont_help = vec![WontHelp::from(crate::report::card::RuledOut::LowerSeqs { kv_peak: 0.5, fill: None })];
        let mut fs = vec![f];
        super::drop_ruled_out_levers(&mut fs);
        assert_eq!(fs[0].steps.iter().map(Step::text).collect::<Vec<_>>(), ["Look at the GPUs."]);
    }
}
