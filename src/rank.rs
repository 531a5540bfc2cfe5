//! Ranking: which explanation comes first.
//!
//! Within one scope (one model; a finding about one replica of it counts as the model's), a matched
//! rule that `supersedes` another matched rule absorbs it: the more specific explanation becomes the
//! finding, the other is listed under it as "also consistent", and the finding is at least as severe,
//! and its score at least as high, as anything it absorbed (a workload change that explains a latency warning is still a warning).
//! Across scopes and rules the order is severity, then strength of evidence (score), then rule id and
//! scope, so the same data always gives the same order.

use std::collections::{BTreeMap, BTreeSet};

use crate::report::{AlsoConsistent, Checked, Finding, NotEvaluated, Reasons, Scope, Severity};
use crate::rules::eval::Outcome;
use crate::rules::RuleSet;

/// What one rule concluded for one scope.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub rule: String,
    pub scope: Scope,
    pub outcome: Outcome,
    /// For a match: whether it also holds over the window's last minutes (true when that was not
    /// read). A finding of the last minutes alone is absorbed only by one that does.
    pub late: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ranked {
    pub findings: Vec<Finding>,
    pub healthy: Vec<Checked>,
    pub not_evaluated: Vec<NotEvaluated>,
}

/// The part of a scope that names the group (the model), without replica labels added to it.
fn base_scope(scope: &Scope, group_by: &[String]) -> Scope {
    if group_by.is_empty() {
        return scope.clone();
    }
    scope.iter().filter(|(k, _)| group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// Does `a` supersede `b`, directly or through a chain?
fn supersedes(set: &RuleSet, a: &str, b: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![a.to_string()];
    while let Some(x) = stack.pop() {
        if !seen.insert(x.clone()) {
            continue;
        }
        if let Some(r) = set.rule(&x) {
            for s in &r.supersedes {
                if s == b {
                    return true;
                }
                stack.push(s.clone());
            }
        }
    }
    false
}

fn order(a: &Finding, b: &Finding) -> std::cmp::Ordering {
    b.severity.cmp(&a.severity).then(b.score.total_cmp(&a.score)).then(a.rule.cmp(&b.rule)).then(a.scope.cmp(&b.scope))
}

/// A warning or critical problem that had not ended by the window's end. Once the findings' ends
/// are known, these come before every finding that is over (and before info findings), each group
/// keeping the order [`rank`] gave it (`explain::finish`): what is burning now is what the reader
/// acts on first; a problem that is over stays listed, with when it ended.
pub fn ongoing(ended: Option<chrono::DateTime<chrono::Utc>>, severity: Severity) -> bool {
    ended.is_none() && severity >= Severity::Warning
}

pub fn rank(set: &RuleSet, group_by: &[String], judgements: Vec<Judgement>) -> Ranked {
    let mut out = Ranked::default();
    let mut matched: BTreeMap<Scope, Vec<Finding>> = BTreeMap::new();
    let mut unknown: BTreeMap<String, Vec<(Scope, Reasons)>> = BTreeMap::new();
    // Matches that do not hold over the window's last minutes.
    let mut early: BTreeSet<(String, Scope)> = BTreeSet::new();
    for j in judgements {
        let Some(rule) = set.rule(&j.rule) else { continue };
        if !j.late {
            early.insert((j.rule.clone(), j.scope.clone()));
        }
        match j.outcome {
            Outcome::NotMatched => out.healthy.push(Checked { rule: j.rule, scope: j.scope }),
            Outcome::Unknown { reasons } => unknown.entry(j.rule).or_default().push((j.scope, Reasons(reasons))),
            Outcome::Matched { score, evidence, stood_in, recent } => matched.entry(base_scope(&j.scope, group_by)).or_default().push(Finding {
                steps: crate::rules::steps::answer(rule, &evidence).into(),
                rule: rule.id.clone(),
                title: rule.title.clone(),
                severity: rule.severity,
                score,
                scope: j.scope,
                summary: rule.summary.clone(),
                evidence,
                references: rule.references.clone(),
                also_consistent: Vec::new(),
                raised_from: None,
                recommendations: Vec::new(),
                wont_help: Vec::new(),
                replicas: None,
                stood_in,
                recent,
                onset: None,
                onset_signal: None,
                ended: None,
                preceded_by: None,
                cold_start: None,
                replica_cause: None,
                gpu_reasons: Vec::new(),
                correlations: Vec::new(),
            }),
        }
    }

    for (_, mut fs) in matched {
        fs.sort_by(order);
        // A finding is primary unless another matched rule in the same scope supersedes it; one of
        // the window's last minutes alone only by a rule that holds there as well (an episode that
        // is over does not explain one that began after it).
        let explains = |a: &Finding, b: &Finding| {
            a.rule != b.rule && supersedes(set, &a.rule, &b.rule) && (b.recent.is_none() || !early.contains(&(a.rule.clone(), a.scope.clone())))
        };
        let primary: Vec<bool> = fs.iter().map(|b| !fs.iter().any(|a| explains(a, b))).collect();
        let mut absorbed: Vec<AlsoConsistent> = Vec::new();
        let mut absorbed_by: Vec<usize> = Vec::new();
        for (i, f) in fs.iter().enumerate() {
            if !primary[i] {
                // Attach to the best-ranked primary that supersedes it.
                let host = (0..fs.len()).find(|&h| primary[h] && explains(&fs[h], f)).unwrap_or(0);
                absorbed.push(AlsoConsistent { rule: f.rule.clone(), title: f.title.clone(), severity: f.severity, score: f.score });
                absorbed_by.push(host);
            }
        }
        for (i, mut f) in fs.into_iter().enumerate() {
            if primary[i] {
                f.also_consistent = absorbed.iter().zip(&absorbed_by).filter(|(_, &h)| h == i).map(|(a, _)| a.clone()).collect();
                if let Some(worst) = f.also_consistent.iter().map(|a| a.severity).max().filter(|w| *w > f.severity) {
                    f.raised_from = Some(f.severity);
                    f.severity = worst;
                }
                // As strong as the strongest evidence it explains: the order and the scores agree.
                f.score = f.also_consistent.iter().map(|a| a.score).fold(f.score, f64::max);
                out.findings.push(f);
            }
        }
    }
    out.findings.sort_by(order);

    // Not evaluated: when a rule failed for the same reason in every scope, say it once for all.
    for (rule, entries) in unknown {
        let reasons: BTreeSet<&Reasons> = entries.iter().map(|(_, r)| r).collect();
        if entries.len() > 1 && reasons.len() == 1 {
            out.not_evaluated.push(NotEvaluated { rule, scope: Scope::new(), reason: entries[0].1.clone() });
        } else {
            for (scope, reason) in entries {
                out.not_evaluated.push(NotEvaluated { rule: rule.clone(), scope, reason });
            }
        }
    }
    out.healthy.sort();
    out.not_evaluated.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::load::load_builtin;

    fn scope(m: &str) -> Scope {
        [("model_name".to_string(), m.to_string())].into_iter().collect()
    }

    fn matched(rule: &str, m: &str, score: f64) -> Judgement {
        Judgement { rule: rule.into(), scope: scope(m), outcome: Outcome::Matched { score, evidence: vec![], stood_in: None, recent: None }, late: true }
    }

    #[test]
    fn ranks_critical_before_warning_then_by_score() {
        let set = load_builtin().unwrap();
        let r = rank(
            &set,
            &["model_name".to_string()],
            vec![matched("slow-decode", "a", 9.0), matched("severe-saturation", "b", 1.0), matched("slow-prefill", "c", 3.0)],
        );
        let order: Vec<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
        assert_eq!(order, vec!["severe-saturation", "slow-decode", "slow-prefill"]);
    }

    #[test]
    fn the_more_specific_rule_absorbs_the_general_one_in_the_same_scope() {
        let set = load_builtin().unwrap();
        let r = rank(&set, &["model_name".to_string()], vec![matched("load-exceeds-capacity", "a", 5.0), matched("kv-cache-pressure", "a", 1.0)]);
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].rule, "kv-cache-pressure");
        assert_eq!(r.findings[0].also_consistent[0].rule, "load-exceeds-capacity");
    }

    #[test]
    fn rules_in_different_scopes_do_not_absorb_each_other() {
        let set = load_builtin().unwrap();
        let r = rank(&set, &["model_name".to_string()], vec![matched("load-exceeds-capacity", "a", 5.0), matched("kv-cache-pressure", "b", 1.0)]);
        assert_eq!(r.findings.len(), 2);
        assert!(r.findings.iter().all(|f| f.also_consistent.is_empty()));
    }

    #[test]
    fn the_same_reason_everywhere_is_reported_once() {
        let set = load_builtin().unwrap();
        let unk = |m: &str| Judgement {
            rule: "http-errors".into(),
            scope: scope(m),
            outcome: Outcome::Unknown { reasons: vec!["metric missing in the window: http_requests_total".into()] },
            late: true,
        };
        let r = rank(&set, &["model_name".to_string()], vec![unk("a"), unk("b")]);
        assert_eq!(r.not_evaluated.len(), 1);
        assert!(r.not_evaluated[0].scope.is_empty());
    }

    #[test]
    fn a_replica_finding_absorbs_the_model_level_symptom_it_explains() {
        let set = load_builtin().unwrap();
        let mut replica = scope("a");
        replica.insert("instance".into(), "a-1:8000".into());
        let r = rank(
            &set,
            &["model_name".to_string()],
            vec![
                matched("slow-decode", "a", 3.0),
                Judgement {
                    rule: "replica-outlier".into(),
                    scope: replica.clone(),
                    outcome: Outcome::Matched { score: 0.5, evidence: vec![], stood_in: None, recent: None },
                    late: true,
                },
            ],
        );
        assert_eq!(r.findings.len(), 1, "{:?}", r.findings);
        assert_eq!(r.findings[0].rule, "replica-outlier");
        assert_eq!(r.findings[0].scope, replica);
        assert_eq!(r.findings[0].also_consistent[0].rule, "slow-decode");
    }

    #[test]
    fn an_absorbing_finding_is_at_least_as_severe_as_what_it_absorbed() {
        let set = load_builtin().unwrap();
        let r = rank(&set, &["model_name".to_string()], vec![matched("workload-shift", "a", 1.0), matched("slow-prefill", "a", 2.0)]);
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].rule, "workload-shift");
        assert_eq!(r.findings[0].severity, crate::report::Severity::Warning);
        // The raise is told from the rule's own severity (info), for a pipeline that reads it.
        assert_eq!(set.rule("workload-shift").unwrap().severity, crate::report::Severity::Info);
        assert_eq!(r.findings[0].raised_from, Some(crate::report::Severity::Info));
        // Absorbing nothing more severe raises nothing.
        let r = rank(&set, &["model_name".to_string()], vec![matched("slow-prefill", "a", 2.0)]);
        assert_eq!(r.findings[0].raised_from, None);
    }

    #[test]
    fn a_late_episode_is_absorbed_only_by_a_rule_that_holds_late_too() {
        let set = load_builtin().unwrap();
        let late_decode = || Judgement {
            rule: "slow-decode".into(),
            scope: scope("a"),
            outcome: Outcome::Matched {
                score: 1.0,
                evidence: vec![],
                stood_in: None,
                recent: Some(crate::report::RecentRead { range_seconds: 300, signals: vec!["itl_p95".into()] }),
            },
            late: true,
        };
        // KV pressure that is over by the window's last minutes explains nothing that began then.
        let over = Judgement { late: false, ..matched("kv-cache-pressure", "a", 3.0) };
        let r = rank(&set, &["model_name".to_string()], vec![over, late_decode()]);
        let rules: Vec<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
        assert_eq!(rules, ["kv-cache-pressure", "slow-decode"], "{:?}", r.findings);
        assert!(r.findings[0].also_consistent.is_empty());
        // Still going on in the last minutes: it absorbs the slow decode, as over the whole window.
        let r = rank(&set, &["model_name".to_string()], vec![matched("kv-cache-pressure", "a", 3.0), late_decode()]);
        assert_eq!(r.findings.len(), 1);
        assert_eq!(r.findings[0].also_consistent[0].rule, "slow-decode");
        // A whole-window match is absorbed as before, whether or not its superseder holds late.
        let over = Judgement { late: false, ..matched("kv-cache-pressure", "a", 3.0) };
        let r = rank(&set, &["model_name".to_string()], vec![over, matched("slow-decode", "a", 1.0)]);
        assert_eq!(r.findings.len(), 1);
    }

    /// The ongoing first, each group in its order, as finishing sorts them.
    fn ongoing_first(findings: &mut [Finding]) {
        findings.sort_by_key(|f| !ongoing(f.ended, f.severity));
    }

    #[test]
    fn problems_still_going_on_come_before_those_that_are_over() {
        let set = load_builtin().unwrap();
        let r = rank(
            &set,
            &["model_name".to_string()],
            vec![matched("kv-cache-pressure", "a", 3.0), matched("slow-decode", "b", 1.0), matched("workload-lighter", "c", 1.0)],
        );
        let mut fs = r.findings;
        assert_eq!(fs.iter().map(|f| f.rule.as_str()).collect::<Vec<_>>(), ["kv-cache-pressure", "slow-decode", "workload-lighter"]);
        let t = chrono::DateTime::<chrono::Utc>::from_timestamp(1_700_000_000, 0);
        fs[0].ended = t;
        ongoing_first(&mut fs);
        // The warning still going on first; the critical that is over before the info finding.
        assert_eq!(fs.iter().map(|f| f.rule.as_str()).collect::<Vec<_>>(), ["slow-decode", "kv-cache-pressure", "workload-lighter"]);
        // Nothing over: the order stays.
        fs[1].ended = None;
        ongoing_first(&mut fs);
        assert_eq!(fs.iter().map(|f| f.rule.as_str()).collect::<Vec<_>>(), ["slow-decode", "kv-cache-pressure", "workload-lighter"]);
    }
}
