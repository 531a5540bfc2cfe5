//! Stage: judge. Every enabled rule for every scope over the signal table, ranked, and how much of
//! the pack gave a verdict.

use std::collections::BTreeSet;

use crate::rank::{rank, Judgement, Ranked};
use crate::report::{Coverage, RunParams, Scope};
use crate::rules::eval::{deciding_signals, evaluate_in, holds_late, recent_gate_holds, recent_view, Availability, Outcome, RecentView, SignalTable};
use crate::rules::{RuleDef, RuleSet};

/// The verdicts of a run.
#[derive(Debug, Clone)]
pub struct Judged {
    pub ranked: Ranked,
    /// Scopes seen in the window (one empty scope when none was).
    pub scopes: BTreeSet<Scope>,
    /// Rule and scope pairs with a verdict.
    pub evaluated: usize,
    pub coverage: Coverage,
    /// What the metrics could not show about rules judged healthy (their caveats), one sentence
    /// per rule naming its scopes.
    pub caveats: Vec<String>,
    /// The numbers behind each model's healthy core checks (see [`readings`]).
    pub readings: Vec<crate::report::Readings>,
}

/// Condition signals of each healthy core rule shown for a scope.
const READ_PER_RULE: usize = 2;

/// For each scope, the numbers its core rules judged healthy read, each against its line (the
/// first [`READ_PER_RULE`] condition signals of each, each signal once): what makes an OK
/// checkable. Scopes with data only; a scope whose core rules were all not evaluated has none.
pub fn readings(rules: &RuleSet, table: &SignalTable, judgements: &[Judgement]) -> Vec<crate::report::Readings> {
    let mut out: Vec<crate::report::Readings> = Vec::new();
    for j in judgements.iter().filter(|j| matches!(j.outcome, Outcome::NotMatched) && !j.scope.is_empty()) {
        let Some(rule) = rules.rules.iter().find(|r| r.id == j.rule && r.core) else { continue };
        let at = match out.iter().position(|r| r.scope == j.scope) {
            Some(i) => i,
            None => {
                out.push(crate::report::Readings { scope: j.scope.clone(), evidence: Vec::new() });
                out.len() - 1
            }
        };
        for e in crate::rules::eval::readings(rule, rules, table, &j.scope, READ_PER_RULE) {
            if e.value.is_some() && !out[at].evidence.iter().any(|x| x.signal == e.signal) {
                out[at].evidence.push(e);
            }
        }
    }
    out.retain(|r| !r.evidence.is_empty());
    out.sort_by(|a, b| a.scope.cmp(&b.scope));
    out
}

/// Whether any signal that looks inside the window brought data back. A rule decided without
/// numbers (an optional feature's metrics absent) does not make a run without such data
/// "evaluated": it has no verdict (exit 3). A 6h burn rate reaching back before the window is no
/// sign that the window holds data (which matters where discovery is coarse, e.g. VictoriaMetrics
/// lists the metric names of whole days).
pub fn any_data(rules: &RuleSet, table: &SignalTable, p: &RunParams) -> bool {
    let inside = |id: &String| rules.signals.get(id).is_none_or(|d| d.range_in(p.window.duration()) <= p.window.duration());
    table.iter().any(|(id, s)| inside(id) && matches!(s.window.availability, Availability::Ok) && !s.window.values.is_empty())
}

/// Judge one rule in one scope. A finding about one replica names it in its scope.
fn judge_one(rule: &RuleDef, rules: &RuleSet, table: &SignalTable, recent: Option<&RecentView>, scope: &Scope, any_data: bool) -> Judgement {
    let mut outcome = evaluate_in(rule, rules, table, recent, scope);
    if !any_data && matches!(outcome, Outcome::NotMatched) {
        // Only an optional feature's absence decided it, and with no data at all in the window
        // that absence proves nothing: not healthy, not evaluated.
        outcome = Outcome::Unknown { reasons: vec![crate::report::Reason::NothingInWindow] };
    }
    let mut named = scope.clone();
    if let Outcome::Matched { recent: read, stood_in, .. } = &outcome {
        let table = match (read, recent) {
            (Some(_), Some(view)) => &view.table,
            _ => table,
        };
        let deciding = deciding_signals(rule, rules, table, scope, stood_in.is_some(), false);
        let mut culprit = culprit_of(&deciding, table, scope);
        if culprit.is_empty() {
            // The deciding branch names no replica (`up` fell, a scope-wide reading): one that
            // held beside it may (the replica whose series vanished), when the held ones agree.
            culprit = culprit_of(&deciding_signals(rule, rules, table, scope, stood_in.is_some(), true), table, scope);
        }
        for (k, v) in culprit {
            named.entry(k).or_insert(v);
        }
    }
    let late = match (&outcome, recent) {
        (Outcome::Matched { recent: None, .. }, Some(view)) => holds_late(rule, rules, view, scope),
        _ => true,
    };
    Judgement { rule: rule.id.clone(), scope: named, outcome, late }
}

/// The replica the deciding signals point at: each label their culprits agree on. A label two of
/// them name differently is left out (naming either would put one replica's number on another).
pub fn culprit_of(deciding: &[String], table: &SignalTable, scope: &Scope) -> std::collections::BTreeMap<String, String> {
    let mut named = std::collections::BTreeMap::new();
    let mut split = BTreeSet::new();
    for culprit in deciding.iter().filter_map(|sig| table.get(sig).and_then(|sv| sv.window.culprits.get(scope))) {
        for (k, v) in culprit {
            match named.get(k) {
                Some(have) if have != v => {
                    split.insert(k.clone());
                }
                Some(_) => {}
                None => {
                    named.insert(k.clone(), v.clone());
                }
            }
        }
    }
    named.retain(|k, _| !split.contains(k));
    named
}

/// The scopes where a rule with a second reading of the window's last minutes (`recent`) did not
/// hold over the whole window while its `[rule.recent]` condition did (slow-decode: P95 ITL up a
/// tenth), or, for a rule without one, did not hold at all: only there can those minutes change the
/// verdict. None for a window no longer than those minutes.
pub fn late_scopes(rules: &RuleSet, table: &SignalTable, p: &RunParams) -> BTreeSet<Scope> {
    let window = p.window.duration();
    let scopes: BTreeSet<&Scope> = table.values().flat_map(|s| s.window.values.keys()).collect();
    let mut out = BTreeSet::new();
    for rule in rules.rules.iter().filter(|r| r.recent) {
        let shorter = rules.recent_pairs(rule).iter().any(|(_, r)| rules.signals.get(r).is_some_and(|d| d.range_in(window) < window));
        if !shorter {
            continue;
        }
        for scope in &scopes {
            if !out.contains(*scope)
                && recent_gate_holds(rule, rules, table, scope)
                && matches!(crate::rules::eval::evaluate(rule, rules, table, scope), Outcome::NotMatched)
            {
                out.insert((*scope).clone());
            }
        }
    }
    out
}

/// Add the readings of the window's last minutes, asked for some scopes only, to the table.
pub fn merge_late(table: &mut SignalTable, part: SignalTable) {
    for (id, sv) in part {
        match table.get_mut(&id) {
            None => {
                table.insert(id, sv);
            }
            Some(t) => {
                for (have, add) in [(&mut t.window, sv.window), (&mut t.baseline, sv.baseline)] {
                    if !matches!(add.availability, Availability::Ok) {
                        have.availability = add.availability;
                        continue;
                    }
                    have.values.extend(add.values);
                    have.counts.extend(add.counts);
                    have.culprits.extend(add.culprits);
                }
            }
        }
    }
}

/// Judge every rule in every scope seen in the window, and rank.
pub fn judge(rules: &RuleSet, table: &SignalTable, p: &RunParams) -> Judged {
    judge_late(rules, table, p, &BTreeSet::new())
}

/// [`judge`], with the window's last minutes read for the scopes in `late` ([`late_scopes`]).
pub fn judge_late(rules: &RuleSet, table: &SignalTable, p: &RunParams, late: &BTreeSet<Scope>) -> Judged {
    let mut scopes: BTreeSet<Scope> = table.values().flat_map(|s| s.window.values.keys().cloned()).collect();
    if scopes.is_empty() {
        scopes.insert(Scope::new());
    }
    let any_data = any_data(rules, table, p);
    let recent = (!late.is_empty()).then(|| recent_view(rules, table, p.window.duration())).flatten();
    let judgements: Vec<Judgement> = rules
        .rules
        .iter()
        .flat_map(|rule| scopes.iter().map(move |scope| (rule, scope)))
        .map(|(rule, scope)| judge_one(rule, rules, table, recent.as_ref().filter(|_| late.contains(scope)), scope, any_data))
        .collect();
    let evaluated = if any_data { judgements.iter().filter(|j| !matches!(j.outcome, Outcome::Unknown { .. })).count() } else { 0 };
    let coverage = coverage(rules, table, &judgements, any_data, &p.group_by);
    let caveats = caveats(rules, table, &judgements);
    let readings = if any_data { readings(rules, table, &judgements) } else { Vec::new() };
    Judged { ranked: rank(rules, &p.group_by, judgements), scopes, evaluated, coverage, caveats, readings }
}

/// For each rule judged healthy somewhere while its caveat's condition held there: the caveat, with
/// the scopes it applies to.
fn caveats(rules: &RuleSet, table: &SignalTable, judgements: &[Judgement]) -> Vec<String> {
    rules
        .rules
        .iter()
        .filter_map(|r| {
            let c = r.caveat.as_ref()?;
            let scopes: Vec<String> = judgements
                .iter()
                .filter(|j| j.rule == r.id && matches!(j.outcome, Outcome::NotMatched) && crate::rules::eval::caveat_holds(r, rules, table, &j.scope))
                .map(|j| crate::report::scope_text(&j.scope))
                .collect();
            (!scopes.is_empty()).then(|| crate::report::caveat_words(&r.id, &scopes, &c.text))
        })
        .collect()
}

/// Signals whose query succeeded over a metric in the data but came back with nothing for any scope,
/// in either window, where nothing cannot mean "idle": a quantile keeps its observation count (zero
/// for an idle model) and a counter's rate is zero. Empty everywhere, no rate could be taken: a
/// window shorter than two samples of each series (rate() needs two), say `--window 15s` over 60 s
/// scrapes. Means and ratios are left out (0/0 for an idle model is no value either), as are rates
/// attributed through a join and optional signals, whose absence means "none".
pub fn unread(rules: &RuleSet, table: &SignalTable) -> Vec<String> {
    use crate::signals::WhenEmpty;
    table
        .iter()
        .filter(|(id, v)| {
            let counted = match rules.signals.get(*id) {
                Some(d) if d.optional => return false,
                Some(d) => match d.kind.kind().when_empty() {
                    WhenEmpty::UnreadWithoutCounts => true,
                    WhenEmpty::Unread => false,
                    WhenEmpty::MayBe => return false,
                },
                None => return false,
            };
            [&v.window, &v.baseline].iter().any(|w| matches!(w.availability, Availability::Ok) && w.values.is_empty() && (!counted || w.counts.is_empty()))
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// How much of the pack gave a verdict, which rules decided through stand-ins, and which core
/// rules could not be judged. A core rule counts as not judged only for a gap of the run (a metric
/// missing from the data, a query that failed, a signal no rate could be taken for: [`unread`]),
/// not for a scope that merely had nothing to measure (an idle or new model), which would
/// otherwise deny every fleet with one idle model its verdict.
pub fn coverage(rules: &RuleSet, table: &SignalTable, judgements: &[Judgement], any_data: bool, group_by: &[String]) -> Coverage {
    let base = |scope: &Scope| -> Scope { scope.iter().filter(|(k, _)| group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect() };
    let decided = |id: &str| any_data && judgements.iter().any(|j| j.rule == id && !matches!(j.outcome, Outcome::Unknown { .. }));
    let unread = unread(rules, table);
    let gap = |sig: &String| {
        unread.contains(sig)
            || table.get(sig).is_some_and(|v| [&v.window.availability, &v.baseline.availability].iter().any(|a| !matches!(a, Availability::Ok)))
    };
    let condition_signals = |r: &RuleDef| -> Vec<String> {
        r.when.iter().chain(r.stand_in.iter().flat_map(|s| &s.when)).flat_map(|c| c.expr.comparisons()).map(|c| c.signal.clone()).collect()
    };
    let evaluated: Vec<&RuleDef> = rules.rules.iter().filter(|r| decided(&r.id)).collect();
    let stood_in =
        |r: &&&RuleDef| judgements.iter().filter(|j| j.rule == r.id).any(|j| crate::rules::eval::decided_by_stand_in(r, rules, table, &base(&j.scope)));
    let unjudged = |r: &&RuleDef| {
        r.core
            && (!any_data
                || (judgements.iter().any(|j| j.rule == r.id && matches!(j.outcome, Outcome::Unknown { .. })) && condition_signals(r).iter().any(gap)))
    };
    Coverage {
        rules: rules.rules.len(),
        evaluated: evaluated.len(),
        stood_in: evaluated.iter().filter(stood_in).count(),
        core_not_evaluated: rules.rules.iter().filter(unjudged).map(|r| r.id.clone()).collect(),
        unread_targets: Vec::new(),
    }
}

/// A signal declared over the window's last minutes (`range = "5m"`, `within_window`) is read over
/// the whole window when the window is shorter: its evidence says so, instead of naming minutes it
/// did not read (`P95 inter-token latency (last 5 min)` over a 3-minute window). Each such
/// evidence's position in `f` and its title for this window.
pub fn clipped_titles(f: &crate::report::Finding, rules: &RuleSet, window: std::time::Duration) -> Vec<(usize, String)> {
    f.evidence.iter().enumerate().filter_map(|(i, e)| Some((i, rules.signals.get(&e.signal).filter(|d| d.clamped_in(window))?.title_in(window)))).collect()
}
