//! Stage: finish. What the run learned beside the rules, found for each finding as its parts and
//! written into it once ([`build`]), then ranked once ([`finished`]). Each part is a pure function
//! of the finding as judged (with the follow-ups' trends and breakdowns) and of the parts found
//! before it, in this order:
//!
//! 1. `clipped`: evidence read over a window shorter than its reading says so in its title
//!    ([`judge::clipped_titles`]);
//! 2. `dating`: when it began and ended, from its trend ([`onset::dating`]), or for a count of
//!    targets down, from the first such event ([`correlate::dated_by_events`]);
//! 3. `change`: the change it followed, from that dating ([`correlate::change`]);
//! 4. `start`: what a replica's (re)start explains of it: a cold start turns it into info, a
//!    slowdown that outlasted the warm-up is tied to the start when no change was
//!    ([`cold_start::verdict`]);
//! 5. `replica`: why the replica it names differs: load, configuration or hardware, unless a cold
//!    start explained it ([`replica_cause::found`]);
//! 6. `gpu_reasons`: the DCGM clocks-event reasons its evidence holds ([`gpu_reasons::of`]);
//! 7. `answers`: a rule step the rule file has answered by the binding limit or by the per-replica
//!    breakdown, as a checked statement with their numbers ([`answer_from_run`]).
//!
//! [`build`] then leaves out every step that proposes a flag the finding's evidence rules out (its
//! won't-help), so no two lines of one finding contradict each other.
//!
//! The order of the list: findings still going on before those that are over; where a replica
//! started, what still warns before what a cold start turned into info; and where a replica's
//! load lowered a finding, the ongoing warnings first again.
//!
//! The follow-ups come before (`follow_up::build` wrote the trends these read). What else moved
//! reads each finding as it will stand ([`Parts::severity`], [`Parts::cold`]) and hands back its
//! correlations, the last part, before [`finished`] builds the list.

use std::collections::BTreeMap;

use super::binding::ReplicaRead;
use super::cold_start::{self, WarmUps};
use super::onset::{self, Dating};
use super::replica_cause::{self, Cause};
use super::{correlate, gpu_reasons, judge, moved};
use crate::events::ReplicaLatency;
use crate::report::{
    Awaits, Binding, BoundAnswer, Correlation, Event, Finding, GpuReason, PrecededBy, RunParams, Scope, Severity, SpreadAnswer, SpreadMeasure, Step,
    EVEN_SPREAD,
};
use crate::rules::eval::SignalTable;
use crate::rules::RuleSet;

/// What the finishing stage reads besides the findings.
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

/// What finishing learned of one finding. Built from the default, a finding keeps what it was
/// judged with, less any GPU reasons or correlations and any step whose lever its won't-help rules
/// out.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    /// Evidence titles for this window, by the evidence's position.
    pub clipped: Vec<(usize, String)>,
    /// When it began and ended, where its trend or an event dates it.
    pub dating: Option<Dating>,
    /// The change it followed: its first step then points at it.
    pub change: Option<PrecededBy>,
    /// What a replica's start explains of it.
    pub start: Option<cold_start::Verdict>,
    /// Why the replica it names differs from its peers.
    pub replica: Option<replica_cause::Found>,
    pub gpu_reasons: Vec<GpuReason>,
    /// Rule steps the run answered, by their position among the judged steps.
    pub answers: Vec<(usize, Step)>,
    /// The trends that moved with its own, from what else moved.
    pub correlations: Vec<Correlation>,
}

impl Parts {
    /// Every replica the finding is about had a cold start.
    pub fn cold(&self) -> bool {
        self.start.as_ref().is_some_and(|v| v.cold)
    }

    /// Whether a finding, `judged` with a cold start or not, carries one once built: a start's
    /// verdict decides, else it keeps its own.
    pub fn cold_start(&self, judged: bool) -> bool {
        self.start.as_ref().map_or(judged, |v| v.cold)
    }

    /// The severity of a finding judged at `judged` once finished: info where a cold start or a
    /// replica's load explains it, a warning where a replica's own setting holds it.
    pub fn severity(&self, judged: Severity) -> Severity {
        match self.replica.as_ref().map(|r| &r.cause) {
            Some(Cause::Load { .. }) => Severity::Info,
            Some(Cause::Config { .. }) => Severity::Warning,
            _ if self.cold() => Severity::Info,
            _ => judged,
        }
    }
}

/// Every finding's parts, and whether a replica started and slowed in the run (what a cold start
/// turned into info then goes after what still warns).
pub struct Finishing {
    pub parts: Vec<Parts>,
    pub started: bool,
}

impl Finishing {
    /// Each of `judged` as it will stand once built, for what else moved to read.
    pub fn standing<'a>(&self, judged: &'a [Finding]) -> Vec<moved::Standing<'a>> {
        judged
            .iter()
            .zip(&self.parts)
            .map(|(f, part)| moved::Standing { finding: f, severity: part.severity(f.severity), cold_start: part.cold_start(f.cold_start.is_some()) })
            .collect()
    }

    /// What else moved's correlations, one list per finding in the same order.
    pub fn correlated(&mut self, correlations: Vec<Vec<Correlation>>) {
        debug_assert_eq!(correlations.len(), self.parts.len(), "one list of correlations per finding");
        for (part, c) in self.parts.iter_mut().zip(correlations) {
            part.correlations = c;
        }
    }
}

/// Every finding's parts but its correlations (what else moved finds them from what these say).
pub fn parts(judged: &[Finding], c: &Finish) -> Finishing {
    let warm = WarmUps::read(c.events, c.latency, &c.p.window, c.rules);
    Finishing { parts: judged.iter().map(|f| parts_of(f, c, &warm)).collect(), started: !warm.is_empty() }
}

/// The parts of one finding, in the order the module documentation gives.
fn parts_of(f: &Finding, c: &Finish, warm: &WarmUps) -> Parts {
    let (window, rules) = (&c.p.window, c.rules);
    let judged = Dating::of(f);
    let dating =
        onset::dating(f).filter(|d| d.onset.is_some() || d.signal.is_some()).or_else(|| correlate::dated_by_events(f, &judged, c.events, window.start, rules));
    let dated = dating.as_ref().unwrap_or(&judged);
    let change = correlate::change(f, dated, c.events, c.step, window.start, c.p.baseline.start, rules);
    let tied = change.is_some() || f.preceded_by.is_some();
    let start = cold_start::verdict(f, dated, tied, warm, rules);
    let cold = start.as_ref().map_or(f.cold_start.is_some(), |v| v.cold);
    // What else moved adds the correlations.
    Parts {
        clipped: judge::clipped_titles(f, rules, window.duration()),
        replica: if cold { None } else { replica_cause::found(f, c.replicas, c.table, rules, c.p) },
        gpu_reasons: gpu_reasons::of(f, rules),
        answers: answers(f, c),
        dating,
        change,
        start,
        correlations: Vec::new(),
    }
}

/// A built finding with what ranking it reads of the moments before it was built.
struct Placed {
    finding: Finding,
    /// Over by the window's end, or less than a warning as judged.
    over: bool,
    /// Its severity once a start's verdict, and nothing after it, is applied.
    after_start: Severity,
    /// A replica's load lowered it.
    lowered: bool,
}

/// Build every finding from its parts and rank the list.
pub fn finished(judged: Vec<Finding>, Finishing { parts, started }: Finishing) -> Vec<Finding> {
    debug_assert_eq!(judged.len(), parts.len(), "one set of parts per finding");
    let mut all: Vec<Placed> = judged
        .into_iter()
        .zip(parts)
        .map(|(f, p)| {
            let judged = f.severity;
            let after_start = if p.cold() { Severity::Info } else { judged };
            let lowered = p.replica.as_ref().is_some_and(|r| matches!(r.cause, Cause::Load { .. }));
            let finding = build(f, p);
            Placed { over: !crate::rank::ongoing(finding.ended, judged), finding, after_start, lowered }
        })
        .collect();
    // Each sort is stable: a later one keeps the order of the one before within its groups.
    all.sort_by_key(|a| a.over);
    if started {
        all.sort_by_key(|a| std::cmp::Reverse(a.after_start));
    }
    if all.iter().any(|a| a.lowered) {
        all.sort_by_key(|a| !crate::rank::ongoing(a.finding.ended, a.finding.severity));
    }
    all.into_iter().map(|a| a.finding).collect()
}

/// Write a finding's parts into it: the one place finishing changes a finding.
pub fn build(mut f: Finding, p: Parts) -> Finding {
    f.severity = p.severity(f.severity);
    for (i, title) in p.clipped {
        if let Some(e) = f.evidence.get_mut(i) {
            e.title = title;
        }
    }
    if let Some(d) = p.dating {
        (f.onset, f.onset_signal, f.ended) = (d.onset, d.signal, d.ended);
    }
    for (i, answer) in p.answers {
        if let Some(s) = f.steps.get_mut(i) {
            *s = answer;
        }
    }
    if let Some(change) = p.change {
        // A change whose runbook starts at it leads the steps (and is then said there only); any
        // other is said once, by the finding's "began right after" line.
        if change.event.step_naming_it().is_some() {
            f.steps.insert(0, Step::Change { event: change.event.clone() });
        }
        f.preceded_by = Some(change);
    }
    if let Some(v) = p.start {
        if v.cold {
            f.raised_from = None;
            f.summary = v.note.not_a_regression(&f.summary);
            f.steps.insert(0, Step::WarmedUp { replicas: v.replicas });
            f.cold_start = Some(v.note);
        } else {
            f.cold_start = None;
            if !f.steps.iter().any(|s| matches!(s, Step::NotColdStart { .. })) {
                f.steps.insert(0, Step::NotColdStart { start: v.note });
            }
        }
        f.onset = v.onset.or(f.onset);
        f.preceded_by = v.tied.or(f.preceded_by);
    }
    if let Some(found) = p.replica {
        let replica = found.line.replica.clone();
        match found.cause {
            Cause::Load { running, peers_running, .. } => {
                f.steps = vec![Step::Balance { replica, running, peers_running }, Step::Scale].into();
            }
            Cause::Config { cap, waiting, peers, peers_capped } => {
                f.steps = vec![Step::AlignFlag { replica: replica.clone(), cap, peers, peers_capped }, Step::CompareLaunchArgs].into();
                f.recommendations.insert(0, crate::recommend::align_card(&replica, cap, waiting, peers, peers_capped));
            }
            // The rule's own steps (check the GPU and node, drain and replace) stand.
            Cause::Hardware => {}
        }
        if let Some(title) = found.line.kind.title() {
            f.title = title.into();
        }
        f.replica_cause = Some(found.line);
    }
    f.gpu_reasons = p.gpu_reasons;
    f.correlations = p.correlations;
    // A step never proposes a flag (`--max-num-seqs`) the finding's won't-help rules out.
    let out: Vec<&str> = f.wont_help.iter().filter_map(|w| w.ruled.as_ref()).flat_map(|r| r.flags().iter().copied()).collect();
    f.steps.retain(|s| s.lever().is_none_or(|l| !out.contains(&l)));
    f
}

/// The rule steps of `f` the run answered, by position.
fn answers(f: &Finding, c: &Finish) -> Vec<(usize, Step)> {
    let binding = c.binding.iter().find(|b| b.is_model_of(&f.scope, &c.p.replica_label));
    let replicas = c.replicas.iter().find(|(model, _)| model.iter().all(|(k, v)| f.scope.get(k) == Some(v))).map(|(_, r)| r.as_slice());
    f.steps.iter().enumerate().filter_map(|(i, step)| Some((i, answer_from_run(step, binding, replicas, &c.p.replica_label)?))).collect()
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

#[cfg(test)]
mod tests {
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

    fn named(rule: &str, severity: crate::report::Severity) -> crate::report::Finding {
        crate::report::Finding::bare(rule, severity, Default::default())
    }

    fn order(fs: &[crate::report::Finding]) -> Vec<&str> {
        fs.iter().map(|f| f.rule.as_str()).collect()
    }

    #[test]
    fn the_list_is_ranked_ongoing_first_then_what_a_start_or_a_replicas_load_lowered_goes_last() {
        use super::{finished, Finishing, Parts};
        use crate::report::Severity::{Critical, Warning};
        let judged = || vec![named("x", Critical), named("y", Warning), named("z", Warning)];
        let plain = || Finishing { parts: vec![Parts::default(), Parts::default(), Parts::default()], started: false };
        assert_eq!(order(&finished(judged(), plain())), ["x", "y", "z"], "the judged order stands");
        // Over by the window's end: after what still goes on.
        let mut fs = judged();
        fs[0].ended = chrono::DateTime::from_timestamp(1_700_000_000, 0);
        assert_eq!(order(&finished(fs, plain())), ["y", "z", "x"]);
        // A cold start turns y into info, after what still warns.
        let note = crate::report::ColdStart {
            replica: "r".into(),
            started: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
            warm: None,
            warm_up_seconds: 60,
            limit_seconds: 600,
            peak_ttft_ratio: 3.0,
            peak_itl_ratio: 1.0,
            against_peers: true,
            slow_factor: 2.0,
            text: String::new(),
        };
        let verdict = crate::explain::cold_start::Verdict { cold: true, note, replicas: vec!["r".into()], tied: None, onset: None };
        let mut started = plain();
        started.parts[1].start = Some(verdict);
        let fs = finished(judged(), Finishing { started: true, ..started });
        assert_eq!(order(&fs), ["x", "z", "y"]);
        assert_eq!(fs[2].severity, crate::report::Severity::Info);
        // A replica's larger batch turns x into info, after the ongoing warnings.
        let cause = crate::explain::replica_cause::Cause::Load { running: 30.0, peers_running: 10.0, itl_factor: 2.0 };
        let line = crate::explain::replica_cause::cause_of(&cause, "r", &replica("r", 30.0, None), 10.0, Some(2.0));
        let mut lowered = plain();
        lowered.parts[0].replica = Some(crate::explain::replica_cause::Found { cause, line });
        let fs = finished(judged(), lowered);
        assert_eq!(order(&fs), ["y", "z", "x"]);
        assert_eq!(fs[2].title, "One replica runs a larger batch than its peers (load, not a bad replica)");
    }

    #[test]
    fn a_step_never_proposes_a_lever_the_evidence_rules_out() {
        use crate::report::{Finding, Severity, Step, WontHelp};
        let mut f = Finding::bare("slow-decode", Severity::Warning, Default::default());
        f.steps =
            vec![Step::Rule { ask: "Lower max_num_seqs.".into(), lever: Some("--max-num-seqs".into()), awaits: None }, Step::ask("Look at the GPUs.")].into();
        f.wont_help = vec![WontHelp::from(crate::report::card::RuledOut::LowerSeqs { kv_peak: 0.5, fill: None })];
        let fs = [super::build(f, super::Parts::default())];
        assert_eq!(fs[0].steps.iter().map(Step::text).collect::<Vec<_>>(), ["Look at the GPUs."]);
    }
}
