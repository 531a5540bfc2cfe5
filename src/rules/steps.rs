//! A rule's steps for one finding: the ones the metrics answer become checked statements with their
//! numbers, the ones ordered by a signal are put in its order, the rest stay the rule file's words.

use crate::report::{Answered, Awaits, Evidence, LimitKind, Step, StepVerdict};
use crate::rules::{RuleDef, RuleStep, BY_BINDING, BY_REPLICAS};

/// The finding's steps from its rule's list and its evidence.
pub fn answer(rule: &RuleDef, evidence: &[Evidence]) -> Vec<Step> {
    let reading = |signal: &str| evidence.iter().find(|e| e.signal == signal);
    let mut out: Vec<Step> = rule.steps.iter().map(|s| one(s, reading(s.answered_by.as_deref().unwrap_or_default()))).collect();
    // The steps ordered by a signal keep their places among the others, largest value first; one
    // whose signal reads 0 is about something the window holds none of.
    let ranked: Vec<usize> = (0..rule.steps.len()).filter(|&i| rule.steps[i].rank_by.is_some() && out[i].is_open()).collect();
    let value = |i: usize| rule.steps[i].rank_by.as_deref().and_then(reading).and_then(|e| e.value).filter(|v| v.is_finite());
    let mut order = ranked.clone();
    order.sort_by(|&a, &b| value(b).unwrap_or(f64::NEG_INFINITY).total_cmp(&value(a).unwrap_or(f64::NEG_INFINITY)));
    let moved: Vec<Step> = order
        .iter()
        .map(|&i| match (value(i), rule.steps[i].rank_by.as_deref().and_then(reading)) {
            (Some(v), Some(e)) if v <= 0.0 => Step::Answered(Answered {
                ask: rule.steps[i].text.clone(),
                signal: e.signal.clone(),
                title: e.title.clone(),
                unit: e.unit.clone(),
                value: e.value,
                baseline: e.baseline,
                verdict: StepVerdict::None,
                meaning: Some("none of this kind to look into".into()),
            }),
            _ => out[i].clone(),
        })
        .collect();
    for (slot, step) in ranked.into_iter().zip(moved) {
        out[slot] = step;
    }
    out
}

/// One step: answered where its signal was read on both sides and can be compared.
fn one(step: &RuleStep, e: Option<&Evidence>) -> Step {
    let open = || Step::Rule { ask: step.text.clone(), lever: step.lever.clone(), awaits: awaits(step) };
    let Some(e) = e else { return open() };
    // A quantile known only as a bound, or one in the same bucket as its baseline, cannot say
    // whether it moved.
    if e.value_bound.is_some() || e.baseline_bound.is_some() || e.same_bucket {
        return open();
    }
    let Some(verdict) = StepVerdict::of(e.value, e.baseline) else { return open() };
    let meaning = match verdict {
        StepVerdict::Grew => &step.if_grew,
        StepVerdict::Fell => &step.if_fell,
        StepVerdict::Unchanged | StepVerdict::None => &step.if_unchanged,
    };
    Step::Answered(Answered {
        ask: step.text.clone(),
        signal: e.signal.clone(),
        title: e.title.clone(),
        unit: e.unit.clone(),
        value: e.value,
        baseline: e.baseline,
        verdict,
        meaning: meaning.clone(),
    })
}

/// What a step answered by the run (its binding, its replicas) waits for; `None` for the others.
fn awaits(step: &RuleStep) -> Option<Awaits> {
    match step.answered_by.as_deref()? {
        BY_BINDING => Some(Awaits::Binding {
            held_by: step.held_by.iter().filter_map(|n| LimitKind::ALL.into_iter().find(|k| k.name() == n)).collect(),
            if_held: step.if_held.clone(),
            if_not_held: step.if_not_held.clone(),
        }),
        BY_REPLICAS => Some(Awaits::Replicas { if_even: step.if_even.clone(), if_uneven: step.if_uneven.clone() }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(signal: &str, value: f64, baseline: f64) -> Evidence {
        let mut e = Evidence::held(signal, Some(value));
        e.baseline = Some(baseline);
        e.title = signal.to_string();
        e.unit = "count".into();
        e
    }

    fn rule(steps: Vec<RuleStep>) -> RuleDef {
        let mut r = crate::rules::load_builtin().unwrap().rule("slow-decode").unwrap().clone();
        r.steps = steps;
        r
    }

    #[test]
    fn a_step_the_data_answers_becomes_a_statement_and_one_it_cannot_stays_a_question() {
        let steps = vec![
            RuleStep { text: "Look at the GPUs.".into(), ..RuleStep::default() },
            RuleStep {
                text: "Did the batch grow?".into(),
                answered_by: Some("running_avg".into()),
                if_grew: Some("the batch explains it".into()),
                ..RuleStep::default()
            },
            RuleStep { text: "Did prompts grow?".into(), answered_by: Some("prompt_len_mean".into()), ..RuleStep::default() },
        ];
        let out = answer(&rule(steps), &[ev("running_avg", 73.9, 38.7)]);
        assert!(matches!(&out[0], Step::Rule { ask, .. } if ask == "Look at the GPUs."));
        let Step::Answered(a) = &out[1] else { panic!("{out:?}") };
        assert_eq!((a.verdict, a.meaning.as_deref()), (StepVerdict::Grew, Some("the batch explains it")));
        assert!(out[2].is_open(), "no reading: still asked");
    }

    #[test]
    fn ranked_steps_put_the_largest_class_first_and_answer_an_empty_one() {
        let steps = vec![
            RuleStep { text: "For errors.".into(), rank_by: Some("error_share".into()), ..RuleStep::default() },
            RuleStep { text: "For aborts.".into(), rank_by: Some("abort_share".into()), ..RuleStep::default() },
            RuleStep { text: "For give-ups.".into(), rank_by: Some("giveup_share".into()), ..RuleStep::default() },
            RuleStep { text: "Check timeouts.".into(), ..RuleStep::default() },
        ];
        let out = answer(&rule(steps), &[ev("error_share", 0.02, 0.0), ev("abort_share", 0.0, 0.0), ev("giveup_share", 0.41, 0.01)]);
        let words: Vec<String> = out.iter().map(Step::text).collect();
        assert_eq!(words[0], "For give-ups.");
        assert_eq!(words[1], "For errors.");
        assert!(!out[2].is_open(), "{words:?}");
        assert_eq!(words[3], "Check timeouts.");
    }
}
