//! The condition an evidence signal was held to, in structure: a [`Threshold`] of [`Term`]s, and
//! the [`Limit`] a rule compares with (absolute, or against the baseline).

use serde::{Deserialize, Serialize};

/// A rule's condition as it bears on one evidence signal, in structure: one [`Term`] per line of
/// the rule that reads the signal (all of them must hold). `rules::eval` builds it; its text (the
/// JSON's `threshold`, `Display`) writes the other signals a group reads as `(see a, b)`:
/// `<= 3 s and (< 1.5x baseline or (see b))`, lines joined by `; `. The renderers spell it out from
/// the structure (`render::condition`), never from the text. Read back from JSON, a threshold is
/// its text, kept as one [`Term::Text`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Threshold {
    pub lines: Vec<Term>,
}

/// One part of a [`Threshold`].
#[derive(Debug, Clone, PartialEq)]
pub enum Term {
    /// A comparison on the signal in its unit (`> 3 s`, `>= 2x baseline`), or a condition kept as
    /// written (read back from JSON, or set by hand).
    Text(String),
    /// `not (...)`.
    Not(Box<Term>),
    /// An `and` (`all`) or an `or` of the signal's own parts, with the other signals the same group
    /// reads (`see`, each once, in the order the rule names them; empty when there are none).
    Group { all: bool, parts: Vec<Term>, see: Vec<String> },
}

impl Term {
    /// The word joining a group's parts: ` and ` or ` or `.
    pub fn joiner(all: bool) -> &'static str {
        if all {
            " and "
        } else {
            " or "
        }
    }

    /// The term as the JSON writes it; `top` for a whole line or what `not` negates (no parentheses
    /// around a group there).
    pub fn text(&self, top: bool) -> String {
        match self {
            Term::Text(s) => s.clone(),
            Term::Not(x) => format!("not ({})", x.text(true)),
            Term::Group { all, parts, see } => {
                let mut items: Vec<String> = parts.iter().map(|p| p.text(false)).collect();
                if !see.is_empty() {
                    items.push(format!("(see {})", see.join(", ")));
                }
                let inner = items.join(Term::joiner(*all));
                if top || items.len() == 1 {
                    inner
                } else {
                    format!("({inner})")
                }
            }
        }
    }
}

impl Threshold {
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Every group that reads other signals, with whether its parts are joined by `and` (`all`)
    /// and the signals it reads (`see`), in the order the text names them (a group's parts before
    /// its own others).
    pub fn see_groups(&self) -> Vec<(bool, &[String])> {
        fn walk<'a>(t: &'a Term, out: &mut Vec<(bool, &'a [String])>) {
            match t {
                Term::Text(_) => {}
                Term::Not(x) => walk(x, out),
                Term::Group { all, parts, see } => {
                    parts.iter().for_each(|p| walk(p, out));
                    if !see.is_empty() {
                        out.push((*all, see));
                    }
                }
            }
        }
        let mut out = Vec::new();
        self.lines.iter().for_each(|l| walk(l, &mut out));
        out
    }

    /// The signals the condition takes in this one's place (`... or (see a, b)`).
    pub fn alternatives(&self) -> impl Iterator<Item = &String> {
        self.see_groups().into_iter().filter(|(all, _)| !all).flat_map(|(_, see)| see.iter())
    }
}

impl std::fmt::Display for Threshold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.lines.iter().map(|t| t.text(true)).collect::<Vec<_>>().join("; "))
    }
}

impl From<String> for Threshold {
    /// A threshold kept as written (empty text: none).
    fn from(text: String) -> Threshold {
        Threshold { lines: if text.is_empty() { Vec::new() } else { vec![Term::Text(text)] } }
    }
}

impl From<&str> for Threshold {
    fn from(text: &str) -> Threshold {
        Threshold::from(text.to_string())
    }
}

impl PartialEq<&str> for Threshold {
    fn eq(&self, other: &&str) -> bool {
        // A threshold is worded by its Display; comparing the words is the comparison (tests).
        let words = self.to_string();
        words.as_str() == *other
    }
}

impl Serialize for Threshold {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Threshold {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Threshold, D::Error> {
        String::deserialize(d).map(Threshold::from)
    }
}

/// What is known of a quantile that lies in the first or the last (`+Inf`) histogram bucket.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Under the first bucket's bound.
    Below(f64),
    /// Over the largest finite bound.
    Above(f64),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "LimitDoc", into = "LimitDoc")]
pub struct Limit {
    /// The comparison as written for this signal, e.g. `> 3 s` or `>= 2x baseline`.
    pub label: String,
    pub value: f64,
    /// Which side of `value` is past the line (not in the JSON, whose `label` says it in words).
    pub side: LimitSide,
}

/// Which side of a [`Limit`] is past it, and whether the line itself is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitSide {
    Above,
    AtOrAbove,
    Below,
    AtOrBelow,
}

impl LimitSide {
    /// Whether the problem lies above the line (a latency up) rather than below it (a hit ratio down).
    pub fn is_above(self) -> bool {
        matches!(self, LimitSide::Above | LimitSide::AtOrAbove)
    }

    pub fn inclusive(self) -> bool {
        matches!(self, LimitSide::AtOrAbove | LimitSide::AtOrBelow)
    }
}

impl Limit {
    /// Whether `value` is past this line.
    pub fn crossed_by(&self, value: Option<f64>) -> bool {
        let sign = if self.side.is_above() { 1.0 } else { -1.0 };
        value.is_some_and(|v| sign * (v - self.value) > 0.0 || (self.side.inclusive() && v == self.value))
    }
}

/// A limit as the JSON contract has it: its words and its value. Read back, the side is the
/// label's leading operator (`>=`, `<`, ...; `>` when it has none), the one place a limit's words
/// are read, at the document's edge.
#[derive(Serialize, Deserialize)]
struct LimitDoc {
    label: String,
    value: f64,
}

impl From<LimitDoc> for Limit {
    fn from(d: LimitDoc) -> Limit {
        let l = d.label.trim_start();
        let side = match (l.starts_with('<'), l.starts_with(">=") || l.starts_with("<=")) {
            (true, true) => LimitSide::AtOrBelow,
            (true, false) => LimitSide::Below,
            (false, true) => LimitSide::AtOrAbove,
            (false, false) => LimitSide::Above,
        };
        Limit { label: d.label, value: d.value, side }
    }
}

impl From<Limit> for LimitDoc {
    fn from(l: Limit) -> LimitDoc {
        LimitDoc { label: l.label, value: l.value }
    }
}
