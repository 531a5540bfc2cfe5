//! Conditions in words, for the terminal formats.

// ---------------------------------------------------------------------------------------------
// Conditions in words. A rule's condition, as it bears on one signal, comes in structure
// (`report::Threshold`): its own comparisons, and the other signals each `and` or `or` reads (the
// JSON writes those as `(see a, b)`). The terminal formats spell them out from the finding's own
// evidence; nothing here reads the JSON's text back.
// ---------------------------------------------------------------------------------------------

use crate::report::{Term, Threshold};
use crate::text::one_line;

/// A signal's own part of a condition line, once the other signals are left out: what is left
/// of each group, in parentheses where the line's text had them.
enum Own {
    Atom(String),
    Not(Box<Own>),
    Paren(Box<Own>),
    Seq(&'static str, Vec<Own>),
}

/// `top` as in [`Term::text`]: a group there has no parentheses.
fn own_tree(t: &Term, top: bool) -> Own {
    match t {
        Term::Text(s) => Own::Atom(one_line(s)),
        Term::Not(x) => Own::Not(Box::new(own_tree(x, true))),
        Term::Group { all, parts, see } => {
            let seq = Own::Seq(Term::joiner(*all), parts.iter().map(|p| own_tree(p, false)).collect());
            // The text's parentheses stand around the group as written, the other signals counted.
            if top || parts.len() + usize::from(!see.is_empty()) == 1 {
                seq
            } else {
                Own::Paren(Box::new(seq))
            }
        }
    }
}

/// The words of an [`Own`]. Parentheses around a part left alone once the other signals beside
/// it are gone (`(x)`) are dropped, and so are those around a whole line; never those of `not`.
fn own_text(o: &Own, whole: bool) -> String {
    match o {
        Own::Atom(s) => s.clone(),
        Own::Not(x) => format!("not ({})", own_text(x, false)),
        Own::Seq(sep, items) => items.iter().map(|i| own_text(i, whole && items.len() == 1)).collect::<Vec<_>>().join(sep),
        Own::Paren(x) => {
            // One part left once the other signals beside it are gone: its own parentheses, if it
            // has any, are enough (`((a or b))` would read as two groups).
            if let Own::Seq(_, items) = x.as_ref() {
                if let [one] = items.as_slice() {
                    return own_text(one, whole);
                }
            }
            let inner = own_text(x, false);
            let lone = !inner.contains(" or ") && !inner.contains(" and ") && !inner.contains('(');
            if lone || (whole && !inner.contains('(')) {
                inner
            } else {
                format!("({inner})")
            }
        }
    }
}

fn compound(s: &str) -> bool {
    s.contains(" or ") || s.contains(" and ")
}

/// A signal's condition without the other signals it is combined with: `>= 50% or (see
/// preemption_recent)` -> `>= 50%`. The conditions of several lines of a rule, which must all
/// hold, are joined by `and`: `(>= 1.5x baseline or > 100 ms) and > 100 ms`.
/// A line where the signal is one alternative among others (`running_avg < 2x baseline or
/// itl_p95 > 100 ms`) does not need it to hold: beside a line that does, it is left out, so the words never
/// read as a requirement the signal met when it did not.
pub(crate) fn own_condition(t: &Threshold) -> String {
    let optional = |l: &&Term| matches!(l, Term::Group { all: false, see, .. } if !see.is_empty());
    let needed: Vec<&Term> = t.lines.iter().filter(|l| !optional(l)).collect();
    let lines: Vec<&Term> = if needed.is_empty() { t.lines.iter().collect() } else { needed };
    let parts: Vec<String> = lines.iter().map(|l| own_text(&own_tree(l, true), true)).filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [one] => one.clone(),
        _ => parts.iter().map(|p| if compound(p) { format!("({p})") } else { p.clone() }).collect::<Vec<_>>().join(" and "),
    }
}

fn all_see_groups(t: &Threshold) -> Vec<(&'static str, &[String])> {
    t.see_groups().into_iter().map(|(all, see)| (Term::joiner(all), see)).collect()
}

/// The signals a condition holds as alternatives (`... or (see a, b)`): when one of them is shown
/// as deciding a finding, the others say nothing more.
pub(crate) fn alternatives(t: &Threshold) -> Vec<String> {
    t.alternatives().map(|id| one_line(id)).collect()
}

/// `Share of the last 5 min` -> `share of the last 5 min`; `P95 queue time` and `KV-cache usage`
/// keep their capitals.
fn lowercase_first(title: &str) -> String {
    let mut chars = title.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase() => a.to_lowercase().chain(title.chars().skip(1)).collect(),
        _ => title.to_string(),
    }
}

/// The finding's evidence as the words read it: signal, title, condition.
pub(crate) type Named = (String, String, Threshold);

/// A condition with the other signals of each group written out from the finding's evidence
/// (`signal`, `title`, condition): `>= 50% or share of the last 5 min with preemptions >= 50%`.
/// Signals joined by the same word on every side (`a or b or c`) are spelt out with their own
/// conditions; a group whose inner shape the condition does not show (`a and (b or c)` seen from
/// `b`) is named, not guessed: `or a condition on running requests and generation throughput`.
pub(crate) fn condition_in_words(t: &Threshold, signal: &str, evidence: &[Named]) -> String {
    t.lines.iter().map(|l| words(l, true, signal, evidence)).collect::<Vec<_>>().join("; ")
}

fn words(t: &Term, top: bool, signal: &str, evidence: &[Named]) -> String {
    match t {
        Term::Text(s) => one_line(s),
        Term::Not(x) => format!("not ({})", words(x, true, signal, evidence)),
        Term::Group { all, parts, see } => {
            let sep = Term::joiner(*all);
            let mut items: Vec<String> = parts.iter().map(|p| words(p, false, signal, evidence)).collect();
            if !see.is_empty() {
                items.push(others_in_words(sep, see, signal, evidence));
            }
            let inner = items.join(sep);
            if top || items.len() == 1 {
                inner
            } else {
                format!("({inner})")
            }
        }
    }
}

/// The other signals one group of `signal`'s condition reads, joined to it by `sep`, in words.
fn others_in_words(sep: &str, see: &[String], signal: &str, evidence: &[Named]) -> String {
    let ids: Vec<String> = see.iter().map(|id| one_line(id)).collect();
    let find = |id: &str| evidence.iter().find(|(s, _, _)| s == id);
    let title = |id: &str| find(id).map_or_else(|| id.to_string(), |(_, t, _)| lowercase_first(t));
    // Spelt out only when every other signal of the group sees this one and the rest of the
    // group, by the same word: a flat `a or b or c`.
    let flat = ids.iter().all(|id| {
        find(id).is_some_and(|(_, _, c)| {
            c.lines.len() <= 1
                && all_see_groups(c).iter().any(|(h_sep, h_ids)| {
                    let mut want: Vec<&str> = ids.iter().filter(|x| *x != id).map(String::as_str).chain([signal]).collect();
                    let h_ids: Vec<String> = h_ids.iter().map(|x| one_line(x)).collect();
                    let mut got: Vec<&str> = h_ids.iter().map(String::as_str).collect();
                    want.sort_unstable();
                    got.sort_unstable();
                    *h_sep == sep && want == got
                })
        })
    });
    if flat {
        ids.iter()
            .map(|id| {
                let own = find(id).map(|(_, _, c)| own_condition(c)).unwrap_or_default();
                if compound(&own) {
                    format!("({} {own})", title(id))
                } else {
                    format!("{} {own}", title(id))
                }
            })
            .collect::<Vec<_>>()
            .join(sep)
    } else {
        let names: Vec<String> = ids.iter().map(|id| title(id)).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        };
        format!("a condition on {list}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words as they were made from the JSON's text before the condition came in structure,
    /// kept to show the structure gives the same words for every rule shipped.
    mod from_text {
        /// One `(see a, b)` in a condition: its byte span (with the ` or ` / ` and ` before it), the word
        /// joining it to the rest, and the signals it names.
        struct SeeGroup {
            start: usize,
            end: usize,
            sep: &'static str,
            ids: Vec<String>,
        }

        fn see_groups(cond: &str) -> Vec<SeeGroup> {
            let mut out = Vec::new();
            let mut from = 0;
            while let Some(i) = cond[from..].find("(see ").map(|i| from + i) {
                let Some(close) = cond[i..].find(')').map(|j| i + j + 1) else { break };
                let ids = cond[i + "(see ".len()..close - 1].split(", ").map(str::to_string).collect();
                let (start, sep) = if cond[..i].ends_with(" or ") {
                    (i - " or ".len(), " or ")
                } else if cond[..i].ends_with(" and ") {
                    (i - " and ".len(), " and ")
                } else {
                    (i, "")
                };
                out.push(SeeGroup { start, end: close, sep, ids });
                from = close;
            }
            out
        }

        /// Whether `s` is one parenthesized group, negated or not: `(a or b)`, `not (a)`.
        fn one_group(s: &str) -> bool {
            let body = s.strip_prefix("not ").unwrap_or(s);
            let mut depth = 0;
            for (i, c) in body.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            return i == body.len() - 1 && body.starts_with('(');
                        }
                    }
                    _ if depth == 0 => return false,
                    _ => {}
                }
            }
            false
        }

        /// `(x)` around a part left alone once the `(see ...)` beside it is gone becomes `x`.
        fn unwrap_lone_parens(s: &str) -> String {
            let mut s = s.to_string();
            loop {
                let bytes: Vec<(usize, char)> = s.char_indices().collect();
                let mut found = None;
                let mut stack: Vec<usize> = Vec::new();
                for &(i, c) in &bytes {
                    match c {
                        '(' => stack.push(i),
                        ')' => {
                            if let Some(open) = stack.pop() {
                                let inner = &s[open + 1..i];
                                let whole = open == 0 && i == s.len() - 1;
                                let lone = !inner.contains(" or ") && !inner.contains(" and ") && !inner.contains('(');
                                if (lone || whole && !inner.contains('(') || one_group(inner)) && !s[..open].ends_with("not ") {
                                    found = Some((open, i));
                                    break;
                                }
                            }
                        }
                        _ => {}
                    }
                }
                match found {
                    Some((open, close)) => s = format!("{}{}{}", &s[..open], &s[open + 1..close], &s[close + 1..]),
                    None => return s,
                }
            }
        }

        /// A signal's condition without the other signals it is combined with: `>= 50% or (see
        /// preemption_recent)` -> `>= 50%`. The conditions of several lines of a rule (`a; b`), which
        /// must all hold, are joined by `and`: `(>= 1.5x baseline or > 100 ms) and > 100 ms`.
        pub fn own_condition(cond: &str) -> String {
            // A line whose top level is `... or (see others)`: the signal is an alternative there.
            let optional = |part: &str| {
                let (mut depth, mut or, mut see) = (0i32, false, false);
                for (i, c) in part.char_indices() {
                    match c {
                        '(' if depth == 0 && part[i..].starts_with("(see ") => see = true,
                        _ => {}
                    }
                    match c {
                        '(' => depth += 1,
                        ')' => depth -= 1,
                        _ if depth == 0 && part[i..].starts_with(" or ") => or = true,
                        _ => {}
                    }
                }
                or && see
            };
            let all: Vec<&str> = cond.split("; ").collect();
            let needed: Vec<&str> = all.iter().copied().filter(|p| !optional(p)).collect();
            let lines = if needed.is_empty() { all } else { needed };
            let parts: Vec<String> = lines
                .into_iter()
                .map(|part| {
                    let mut s = part.to_string();
                    for g in see_groups(part).iter().rev() {
                        s.replace_range(g.start..g.end, "");
                    }
                    unwrap_lone_parens(s.trim())
                })
                .filter(|p| !p.is_empty())
                .collect();
            let compound = |p: &String| p.contains(" or ") || p.contains(" and ");
            match parts.as_slice() {
                [one] => one.clone(),
                _ => parts.iter().map(|p| if compound(p) { format!("({p})") } else { p.clone() }).collect::<Vec<_>>().join(" and "),
            }
        }

        /// The signals a condition holds as alternatives (`... or (see a, b)`): when one of them is shown
        /// as deciding a finding, the others say nothing more.
        pub fn alternatives(cond: &str) -> Vec<String> {
            see_groups(cond).into_iter().filter(|g| g.sep == " or ").flat_map(|g| g.ids).collect()
        }

        /// `Share of the last 5 min` -> `share of the last 5 min`; `P95 queue time` and `KV-cache usage`
        /// keep their capitals.
        fn lowercase_first(title: &str) -> String {
            let mut chars = title.chars();
            match (chars.next(), chars.next()) {
                (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase() => a.to_lowercase().chain(title.chars().skip(1)).collect(),
                _ => title.to_string(),
            }
        }

        /// A condition with each `(see a, b)` written out from the finding's evidence (`signal`, `title`,
        /// `condition`): `>= 50% or share of the last 5 min with preemptions >= 50%`. Signals joined by
        /// the same word on every side (`a or b or c`) are spelt out with their own conditions; a group
        /// whose inner shape the text does not show (`a and (b or c)` seen from `b`) is named, not
        /// guessed: `or a condition on running requests and generation throughput`.
        pub fn condition_in_words(cond: &str, signal: &str, evidence: &[(String, String, String)]) -> String {
            let find = |id: &str| evidence.iter().find(|(s, _, _)| s == id);
            let title = |id: &str| find(id).map_or_else(|| id.to_string(), |(_, t, _)| lowercase_first(t));
            cond.split("; ")
                .map(|part| {
                    let mut s = part.to_string();
                    for g in see_groups(part).iter().rev() {
                        // Spelt out only when every other signal of the group sees this one and the rest of
                        // the group, by the same word: a flat `a or b or c`.
                        let flat = g.ids.iter().all(|id| {
                            find(id).is_some_and(|(_, _, c)| {
                                !c.contains("; ")
                                    && see_groups(c).iter().any(|h| {
                                        let mut want: Vec<&str> = g.ids.iter().filter(|x| *x != id).map(String::as_str).chain([signal]).collect();
                                        let mut got: Vec<&str> = h.ids.iter().map(String::as_str).collect();
                                        want.sort_unstable();
                                        got.sort_unstable();
                                        h.sep == g.sep && want == got
                                    })
                            })
                        });
                        let words = if flat && !g.sep.is_empty() {
                            g.ids
                                .iter()
                                .map(|id| {
                                    let own = find(id).map(|(_, _, c)| own_condition(c)).unwrap_or_default();
                                    if own.contains(" or ") || own.contains(" and ") {
                                        format!("({} {own})", title(id))
                                    } else {
                                        format!("{} {own}", title(id))
                                    }
                                })
                                .collect::<Vec<_>>()
                                .join(g.sep)
                        } else {
                            let names: Vec<String> = g.ids.iter().map(|id| title(id)).collect();
                            let list = match names.split_last() {
                                Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                                _ => names.join(""),
                            };
                            format!("a condition on {list}")
                        };
                        s.replace_range(g.start..g.end, &format!("{}{words}", g.sep));
                    }
                    s
                })
                .collect::<Vec<_>>()
                .join("; ")
        }
    }

    #[test]
    fn every_shipped_rule_s_conditions_read_the_same_as_from_their_text() {
        let set = crate::rules::load::load_builtin().expect("builtin rules");
        let mut checked = 0;
        for rule in &set.rules {
            let mut whens = vec![&rule.when[..]];
            whens.extend(rule.stand_in.as_ref().map(|s| &s.when[..]));
            for when in whens {
                let mut signals: Vec<String> = Vec::new();
                for c in when {
                    for k in c.expr.comparisons() {
                        if !signals.contains(&k.signal) {
                            signals.push(k.signal.clone());
                        }
                    }
                }
                let def = |sig: &str| set.signals.get(sig);
                let held: Vec<(String, String, Threshold)> = signals
                    .iter()
                    .map(|sig| {
                        let unit = def(sig).map_or("", |d| d.unit.as_str());
                        let title = def(sig).map_or_else(|| sig.clone(), |d| d.title.clone());
                        (sig.clone(), title, crate::rules::eval::threshold_for(when, sig, unit, &set.thresholds))
                    })
                    .collect();
                let as_text: Vec<(String, String, String)> = held.iter().map(|(s, t, c)| (s.clone(), t.clone(), one_line(&c.to_string()))).collect();
                for ((sig, _, c), (_, _, text)) in held.iter().zip(&as_text) {
                    assert_eq!(own_condition(c), from_text::own_condition(text), "{} {sig}: {text}", rule.id);
                    // A part left alone keeps one pair of parentheses at most (router-saturated's
                    // input processing read `((< 2x baseline or <= 250 ms))`).
                    assert!(!own_condition(c).contains("(("), "{} {sig}: {}", rule.id, own_condition(c));
                    assert_eq!(alternatives(c), from_text::alternatives(text), "{} {sig}: {text}", rule.id);
                    assert_eq!(condition_in_words(c, sig, &held), from_text::condition_in_words(text, sig, &as_text), "{} {sig}: {text}", rule.id);
                    checked += 1;
                }
            }
        }
        assert!(checked > 50, "{checked}");
    }
}
