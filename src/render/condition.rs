//! Conditions in words, for the terminal formats.

// ---------------------------------------------------------------------------------------------
// Conditions in words. A rule's condition, as it bears on one signal, names the other signals it
// is combined with as `(see a, b)` (the JSON keeps that form); the terminal formats spell them out
// from the finding's own evidence.
// ---------------------------------------------------------------------------------------------

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
                        if (lone || whole && !inner.contains('(')) && !s[..open].ends_with("not ") {
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
pub(crate) fn own_condition(cond: &str) -> String {
    let parts: Vec<String> = cond
        .split("; ")
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
pub(crate) fn alternatives(cond: &str) -> Vec<String> {
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
pub(crate) fn condition_in_words(cond: &str, signal: &str, evidence: &[(String, String, String)]) -> String {
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
