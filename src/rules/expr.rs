//! The condition language of rule files.
//!
//! A rule's `when` is a list of conditions that must all hold. Each condition compares signals with
//! absolute thresholds or with their own baseline:
//!
//! ```text
//! ttft_p95 >= 2x baseline or ttft_p95 > $ttft_p95_high
//! queue_p95 > 1s and not (itl_p95 >= 1.5x baseline)
//! kv_usage_max > 90%
//! ```
//!
//! Right-hand sides: a number with an optional unit (`ms`, `s`, `m`, `%`), `Nx baseline` (the signal's
//! value divided by its baseline value), or `$name` (a named threshold, which profiles can change).
//! Evaluation is three-valued: a comparison whose data is missing is *unknown*, and unknown stays
//! unknown unless the rest of the condition decides the answer (`false and unknown` is false).

use std::fmt;

use crate::report::{Reason, Side};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Gt,
    Ge,
    Lt,
    Le,
}

impl CmpOp {
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
        }
    }

    pub fn holds(self, a: f64, b: f64) -> bool {
        match self {
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
        }
    }

    pub fn is_upper(self) -> bool {
        matches!(self, CmpOp::Gt | CmpOp::Ge)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Rhs {
    /// An absolute value in the signal's base unit (seconds, fraction, per second).
    Value { value: f64, text: String },
    /// `Nx baseline`.
    Baseline { factor: f64 },
    /// `$name`, resolved against the active thresholds.
    Named { name: String },
}

impl fmt::Display for Rhs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rhs::Value { text, .. } => f.write_str(text),
            Rhs::Baseline { factor } => write!(f, "{}x baseline", crate::units::sig(*factor)),
            Rhs::Named { name } => write!(f, "${name}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub signal: String,
    pub op: CmpOp,
    pub rhs: Rhs,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Cmp(Comparison),
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Not(Box<Expr>),
}

impl Expr {
    /// Every comparison in the expression, in reading order.
    pub fn comparisons(&self) -> Vec<&Comparison> {
        let mut out = Vec::new();
        fn walk<'a>(e: &'a Expr, out: &mut Vec<&'a Comparison>) {
            match e {
                Expr::Cmp(c) => out.push(c),
                Expr::And(v) | Expr::Or(v) => v.iter().for_each(|x| walk(x, out)),
                Expr::Not(x) => walk(x, out),
            }
        }
        walk(self, &mut out);
        out
    }
}

/// A syntax error with its character offset inside the condition text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    pub offset: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Named(String),
    Number(f64, String),
    Op(CmpOp),
    LParen,
    RParen,
    And,
    Or,
    Not,
    Baseline,
    Times,
}

fn lex(src: &str) -> Result<Vec<(usize, Tok)>, ExprError> {
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    let err = |offset: usize, message: String| ExprError { offset, message };
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        match c {
            '(' => {
                out.push((start, Tok::LParen));
                i += 1;
            }
            ')' => {
                out.push((start, Tok::RParen));
                i += 1;
            }
            '>' | '<' => {
                let eq = chars.get(i + 1) == Some(&'=');
                let op = match (c, eq) {
                    ('>', true) => CmpOp::Ge,
                    ('>', false) => CmpOp::Gt,
                    ('<', true) => CmpOp::Le,
                    _ => CmpOp::Lt,
                };
                i += if eq { 2 } else { 1 };
                out.push((start, Tok::Op(op)));
            }
            '$' => {
                i += 1;
                let s = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                if s == i {
                    return Err(err(start, "expected a threshold name after '$'".into()));
                }
                out.push((start, Tok::Named(chars[s..i].iter().collect())));
            }
            c if c.is_ascii_digit() || c == '.' => {
                while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                    i += 1;
                }
                // exponent
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit() || *d == '-' || *d == '+') {
                    i += 2;
                    while i < chars.len() && chars[i].is_ascii_digit() {
                        i += 1;
                    }
                }
                let num: String = chars[start..i].iter().collect();
                let value: f64 = num.parse().map_err(|_| err(start, format!("{num:?} is not a number")))?;
                // unit or 'x'
                let us = i;
                while i < chars.len() && (chars[i].is_ascii_alphabetic() || chars[i] == '%') {
                    i += 1;
                }
                let unit: String = chars[us..i].iter().collect();
                let text: String = chars[start..i].iter().collect();
                if unit == "x" {
                    out.push((start, Tok::Number(value, text)));
                    out.push((us, Tok::Times));
                    continue;
                }
                let Some(scaled) = crate::units::scale_quantity(value, &unit) else {
                    return Err(err(us, format!("unknown unit {unit:?} (use ms, s, m, h, % or Nx baseline)")));
                };
                out.push((start, Tok::Number(scaled, text)));
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                    i += 1;
                }
                let w: String = chars[start..i].iter().collect();
                let tok = match w.as_str() {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    "baseline" => Tok::Baseline,
                    _ => Tok::Ident(w),
                };
                out.push((start, tok));
            }
            '%' if matches!(out.last(), Some((_, Tok::Number(_, n))) if n.ends_with(|c: char| c.is_ascii_digit())) => {
                return Err(err(start, "a unit goes right after its number, without a space: write e.g. 90%".into()));
            }
            other => return Err(err(start, format!("unexpected character {other:?}"))),
        }
    }
    Ok(out)
}

/// Parse one condition.
pub fn parse(src: &str) -> Result<Expr, ExprError> {
    let toks = lex(src)?;
    let mut p = P { toks, pos: 0, len: src.chars().count() };
    let e = p.or()?;
    if p.pos < p.toks.len() {
        // `3 s`, `3 parsecs`: a word right after a bare number is meant as its unit.
        let previous = p.pos.checked_sub(1).and_then(|i| p.toks.get(i));
        if let (Some((_, Tok::Number(_, number))), Some((_, Tok::Ident(word)))) = (previous, p.toks.get(p.pos)) {
            if number.ends_with(|c: char| c.is_ascii_digit() || c == '.') {
                let message = if word == "x" || crate::units::scale_quantity(1.0, word).is_some() {
                    format!("a unit goes right after its number, without a space: write {number}{word}")
                } else {
                    format!("unknown unit {word:?} after {number} (use ms, s, m, h or %, right after the number, or Nx baseline)")
                };
                return Err(p.err_here(&message));
            }
        }
        return Err(p.err_here("expected 'and', 'or' or the end of the condition"));
    }
    Ok(e)
}

struct P {
    toks: Vec<(usize, Tok)>,
    pos: usize,
    len: usize,
}

impl P {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|(_, t)| t)
    }
    fn offset(&self) -> usize {
        self.toks.get(self.pos).map(|(o, _)| *o).unwrap_or(self.len)
    }
    fn err_here(&self, m: &str) -> ExprError {
        ExprError { offset: self.offset(), message: m.to_string() }
    }
    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut v = vec![self.and()?];
        while self.peek() == Some(&Tok::Or) {
            self.pos += 1;
            v.push(self.and()?);
        }
        Ok(if v.len() == 1 { v.remove(0) } else { Expr::Or(v) })
    }
    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut v = vec![self.unary()?];
        while self.peek() == Some(&Tok::And) {
            self.pos += 1;
            v.push(self.unary()?);
        }
        Ok(if v.len() == 1 { v.remove(0) } else { Expr::And(v) })
    }
    fn unary(&mut self) -> Result<Expr, ExprError> {
        match self.peek() {
            Some(Tok::Not) => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Some(Tok::LParen) => {
                self.pos += 1;
                let e = self.or()?;
                if self.peek() != Some(&Tok::RParen) {
                    return Err(self.err_here("expected ')'"));
                }
                self.pos += 1;
                Ok(e)
            }
            Some(Tok::Ident(_)) => self.cmp(),
            None => Err(self.err_here("expected a comparison such as `ttft_p95 > 3s`, found the end")),
            Some(_) => Err(self.err_here("expected a signal name, 'not' or '('")),
        }
    }
    fn cmp(&mut self) -> Result<Expr, ExprError> {
        let Some(Tok::Ident(signal)) = self.peek().cloned() else {
            return Err(self.err_here("expected a signal name"));
        };
        self.pos += 1;
        let op = match self.peek() {
            Some(Tok::Op(op)) => *op,
            _ => return Err(self.err_here(&format!("expected >, >=, < or <= after {signal}"))),
        };
        self.pos += 1;
        let rhs = match self.peek().cloned() {
            Some(Tok::Number(v, text)) => {
                self.pos += 1;
                if self.peek() == Some(&Tok::Times) {
                    self.pos += 1;
                    if self.peek() != Some(&Tok::Baseline) {
                        return Err(self.err_here("expected 'baseline' after 'x' (as in `2x baseline`)"));
                    }
                    self.pos += 1;
                    Rhs::Baseline { factor: v }
                } else {
                    Rhs::Value { value: v, text }
                }
            }
            Some(Tok::Named(name)) => {
                self.pos += 1;
                Rhs::Named { name }
            }
            Some(Tok::Baseline) => {
                self.pos += 1;
                Rhs::Baseline { factor: 1.0 }
            }
            _ => return Err(self.err_here("expected a threshold: a number with an optional unit (3s, 500ms, 90%), `2x baseline` or `$name`")),
        };
        Ok(Expr::Cmp(Comparison { signal, op, rhs }))
    }
}

/// Three-valued truth.
#[derive(Debug, Clone, PartialEq)]
pub enum Truth {
    True,
    False,
    /// Could not be decided; the reasons name what was missing.
    Unknown(Vec<Reason>),
}

/// What a comparison needs from the data.
pub trait Facts {
    /// The signal's value in the window: Ok(value) or Err(reason it is missing).
    fn value(&self, signal: &str) -> Result<f64, String>;
    /// The signal's value in the baseline window.
    fn baseline(&self, signal: &str) -> Result<f64, String>;
    /// [`Facts::value`] with why it is missing in structure (its words kept as written unless the
    /// facts know more).
    fn value_or_reason(&self, signal: &str) -> Result<f64, Reason> {
        self.value(signal).map_err(Reason::Text)
    }
    /// [`Facts::baseline`] with why it is missing in structure.
    fn baseline_or_reason(&self, signal: &str) -> Result<f64, Reason> {
        self.baseline(signal).map_err(Reason::Text)
    }
    /// A named threshold.
    fn threshold(&self, name: &str) -> Option<f64>;
    /// True when the signal is optional and has no data: the feature is off or nothing happened, so
    /// every comparison on it is false rather than unknown.
    fn absent(&self, _signal: &str) -> bool {
        false
    }
    /// For a quantile read from a histogram: which bucket the value lies in, when its bucket
    /// bounds are known (the window's value, or the baseline's).
    fn bucket(&self, _signal: &str, _baseline: bool) -> Option<Bucket> {
        None
    }
}

/// Where a quantile lies among its histogram's finite bounds `b1 < ... < bn`. `histogram_quantile`
/// interpolates inside a bucket; inside the first bucket (`[0, b1]`) that interpolation is a guess
/// ("285 ms" for anything under 300 ms), and in the `+Inf` bucket it returns `bn` whatever the truth.
/// Such values are only known to lie in an interval, and two values in the same one of those two
/// buckets cannot be told apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// 0 for the first bucket, `n` for `+Inf`.
    pub index: usize,
    /// Where the value may lie when it is only a bound: `(0, b1)` or `(bn, +Inf)`.
    pub interval: Option<(f64, f64)>,
}

impl Bucket {
    /// Locate `v` among ascending finite `bounds`; `None` when there are none or `v` is not a number.
    pub fn locate(bounds: &[f64], v: f64) -> Option<Bucket> {
        let (first, last) = (*bounds.first()?, *bounds.last()?);
        if v.is_nan() {
            return None;
        }
        if v >= last {
            return Some(Bucket { index: bounds.len(), interval: Some((last, f64::INFINITY)) });
        }
        let index = bounds.iter().position(|b| v <= *b)?;
        let interval = (index == 0 && first > 0.0).then_some((0.0, first));
        Some(Bucket { index, interval })
    }
}

/// How `op` against `rhs` turns out for every value in `(lo, hi]`: true or false when all agree,
/// `None` when it depends on where in the interval the value lies.
fn holds_over(op: CmpOp, lo: f64, hi: f64, rhs: f64) -> Option<bool> {
    // Like a bucket, the interval excludes its lower end and includes its upper one.
    let above_lo = lo + lo.abs() * 1e-12 + 1e-15;
    match (op.holds(above_lo, rhs), op.holds(hi, rhs)) {
        (true, true) => Some(true),
        (false, false) => Some(false),
        _ => None,
    }
}

/// Evaluate with evidence strength: the score sums, over the comparisons that made the condition
/// true, how far past their thresholds the values are (log2 of the margin, capped at 5).
pub fn eval(e: &Expr, f: &dyn Facts) -> (Truth, f64) {
    match e {
        Expr::Cmp(c) => eval_cmp(c, f),
        Expr::Not(x) => match eval(x, f).0 {
            Truth::True => (Truth::False, 0.0),
            Truth::False => (Truth::True, 0.0),
            u => (u, 0.0),
        },
        Expr::And(v) => {
            let mut unknown = Vec::new();
            let mut score = 0.0;
            for x in v {
                match eval(x, f) {
                    (Truth::False, _) => return (Truth::False, 0.0),
                    (Truth::Unknown(r), _) => unknown.extend(r),
                    (Truth::True, s) => score += s,
                }
            }
            if unknown.is_empty() {
                (Truth::True, score)
            } else {
                (Truth::Unknown(dedup(unknown)), 0.0)
            }
        }
        Expr::Or(v) => {
            let mut unknown = Vec::new();
            let mut best: Option<f64> = None;
            for x in v {
                match eval(x, f) {
                    (Truth::True, s) => best = Some(best.map_or(s, |b: f64| b.max(s))),
                    (Truth::Unknown(r), _) => unknown.extend(r),
                    (Truth::False, _) => {}
                }
            }
            match best {
                Some(s) => (Truth::True, s),
                None if unknown.is_empty() => (Truth::False, 0.0),
                None => (Truth::Unknown(dedup(unknown)), 0.0),
            }
        }
    }
}

fn dedup(mut v: Vec<Reason>) -> Vec<Reason> {
    let mut seen = std::collections::BTreeSet::new();
    v.retain(|x| seen.insert(x.clone()));
    v
}

fn margin_score(op: CmpOp, lhs: f64, rhs: f64) -> f64 {
    if !op.is_upper() {
        return 0.0;
    }
    let m = if rhs > 0.0 {
        lhs / rhs
    } else if lhs > 0.0 {
        32.0
    } else {
        1.0
    };
    if m.is_finite() {
        m.max(1.0).log2().min(5.0)
    } else {
        5.0
    }
}

fn eval_cmp(c: &Comparison, f: &dyn Facts) -> (Truth, f64) {
    if f.absent(&c.signal) {
        return (Truth::False, 0.0);
    }
    let v = match f.value_or_reason(&c.signal) {
        Ok(v) if v.is_nan() => return (Truth::Unknown(vec![Reason::NotANumber { signal: c.signal.clone(), side: Side::Window }]), 0.0),
        Ok(v) => v,
        Err(r) => return (Truth::Unknown(vec![r]), 0.0),
    };
    let here = f.bucket(&c.signal, false);
    let coarse = |what: &str, detail: String| {
        Truth::Unknown(vec![Reason::Buckets {
            signal: c.signal.clone(),
            position: what.to_string(),
            detail: format!("{detail} cannot be told from its histogram's buckets"),
        }])
    };
    let (lhs, rhs) = match &c.rhs {
        Rhs::Value { .. } | Rhs::Named { .. } => {
            let t = match &c.rhs {
                Rhs::Value { value, .. } => *value,
                Rhs::Named { name } => match f.threshold(name) {
                    Some(t) => t,
                    None => return (Truth::Unknown(vec![Reason::ThresholdUndefined { name: name.clone() }]), 0.0),
                },
                Rhs::Baseline { .. } => unreachable!(),
            };
            // A value known only as "under the first bound" or "over the last" decides a
            // threshold only when the whole interval falls on one side of it.
            if let Some((lo, hi)) = here.and_then(|b| b.interval) {
                match holds_over(c.op, lo, hi, t) {
                    Some(true) => return (Truth::True, margin_score(c.op, v, t)),
                    Some(false) => return (Truth::False, 0.0),
                    None => {
                        let where_ = if lo == 0.0 {
                            format!("is under its first bucket's bound ({hi})")
                        } else {
                            format!("is at or over its largest bucket bound ({lo})")
                        };
                        let detail = format!("whether it is {} {t}", c.op.as_str());
                        let detail = format!("{detail} cannot be told from its histogram's buckets ({})", crate::signals::CUSTOM_BUCKETS_HINT);
                        return (Truth::Unknown(vec![Reason::Buckets { signal: c.signal.clone(), position: where_, detail }]), 0.0);
                    }
                }
            }
            (v, t)
        }
        Rhs::Baseline { factor } => {
            let b = match f.baseline_or_reason(&c.signal) {
                Ok(b) if b.is_nan() => return (Truth::Unknown(vec![Reason::NotANumber { signal: c.signal.clone(), side: Side::Baseline }]), 0.0),
                Ok(b) => b,
                Err(r) => return (Truth::Unknown(vec![r]), 0.0),
            };
            let there = f.bucket(&c.signal, true);
            match (here, there) {
                // Two values in the first (or the +Inf) bucket cannot be told apart: no change can
                // be claimed. Inside other buckets the interpolation carries information, as in
                // Prometheus itself.
                (Some(x), Some(y)) if x.index == y.index && x.interval.is_some() => (1.0, *factor),
                (Some(x), Some(y)) if x.interval.is_some() || y.interval.is_some() => {
                    let (vlo, vhi) = x.interval.unwrap_or((v, v));
                    let (blo, bhi) = y.interval.unwrap_or((b, b));
                    let lo = if bhi > 0.0 { vlo / bhi } else { f64::INFINITY };
                    let hi = if blo > 0.0 { vhi / blo } else { f64::INFINITY };
                    match holds_over(c.op, lo, hi, *factor) {
                        Some(true) => return (Truth::True, margin_score(c.op, lo.max(1.0), *factor)),
                        Some(false) => return (Truth::False, 0.0),
                        None => {
                            return (
                                coarse("against its baseline", format!("whether it is {} {}x the baseline", c.op.as_str(), crate::units::sig(*factor))),
                                0.0,
                            )
                        }
                    }
                }
                _ => {
                    // Compare the ratio value/baseline with the factor; 0/0 counts as "unchanged".
                    let ratio = if b == 0.0 {
                        if v == 0.0 {
                            1.0
                        } else {
                            f64::INFINITY
                        }
                    } else {
                        v / b
                    };
                    (ratio, *factor)
                }
            }
        }
    };
    if c.op.holds(lhs, rhs) {
        (Truth::True, margin_score(c.op, lhs, rhs))
    } else {
        (Truth::False, 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct F {
        v: BTreeMap<&'static str, f64>,
        b: BTreeMap<&'static str, f64>,
    }
    impl Facts for F {
        fn value(&self, s: &str) -> Result<f64, String> {
            self.v.get(s).copied().ok_or_else(|| format!("no data for {s}"))
        }
        fn baseline(&self, s: &str) -> Result<f64, String> {
            self.b.get(s).copied().ok_or_else(|| format!("no baseline for {s}"))
        }
        fn threshold(&self, n: &str) -> Option<f64> {
            (n == "ttft_high").then_some(3.0)
        }
    }

    fn facts() -> F {
        F { v: [("ttft", 4.0), ("itl", 0.05), ("kv", 0.97)].into_iter().collect(), b: [("ttft", 0.5), ("itl", 0.05)].into_iter().collect() }
    }

    #[test]
    fn parses_units_baselines_and_named_thresholds() {
        let e = parse("ttft >= 2x baseline or ttft > $ttft_high and not (itl > 150ms)").unwrap();
        let cmps = e.comparisons();
        assert_eq!(cmps.len(), 3);
        assert_eq!(cmps[0].rhs, Rhs::Baseline { factor: 2.0 });
        assert_eq!(cmps[1].rhs, Rhs::Named { name: "ttft_high".into() });
        assert_eq!(cmps[2].rhs, Rhs::Value { value: 0.15, text: "150ms".into() });
        assert_eq!(parse("kv > 90%").unwrap().comparisons()[0].rhs, Rhs::Value { value: 0.9, text: "90%".into() });
    }

    #[test]
    fn syntax_errors_point_at_the_offending_character() {
        let e = parse("ttft > 3 parsecs").unwrap_err();
        assert_eq!(e.offset, 9);
        assert_eq!(e.message, "unknown unit \"parsecs\" after 3 (use ms, s, m, h or %, right after the number, or Nx baseline)");
        assert_eq!(parse("ttft > 3 s").unwrap_err().message, "a unit goes right after its number, without a space: write 3s");
        assert!(parse("ttft > 2 x baseline").unwrap_err().message.ends_with("write 2x"));
        assert!(parse("kv > 90 %").unwrap_err().message.contains("write e.g. 90%"));
        // A word after a complete comparison is still a plain syntax error.
        assert!(parse("ttft > 3s foo").unwrap_err().message.contains("expected 'and', 'or'"));
        let e = parse("ttft > 3q").unwrap_err();
        assert_eq!(e.offset, 8);
        assert!(e.message.contains("unknown unit"));
        let e = parse("ttft 3s").unwrap_err();
        assert!(e.message.contains("expected >"), "{e:?}");
        assert!(parse("(ttft > 1").unwrap_err().message.contains("')'"));
        assert!(parse("ttft > 2x").unwrap_err().message.contains("baseline"));
        assert!(parse("").is_err());
    }

    #[test]
    fn evaluates_against_baseline_and_absolute_thresholds() {
        let f = facts();
        assert_eq!(eval(&parse("ttft >= 2x baseline").unwrap(), &f).0, Truth::True);
        assert_eq!(eval(&parse("itl < 1.5x baseline").unwrap(), &f).0, Truth::True);
        assert_eq!(eval(&parse("ttft > $ttft_high").unwrap(), &f).0, Truth::True);
        assert_eq!(eval(&parse("kv > 99%").unwrap(), &f).0, Truth::False);
    }

    #[test]
    fn missing_data_is_unknown_unless_the_rest_decides() {
        let f = facts();
        // kv has no baseline
        assert!(matches!(eval(&parse("kv >= 2x baseline").unwrap(), &f).0, Truth::Unknown(_)));
        // ... but an absolute alternative that holds decides it
        assert_eq!(eval(&parse("kv >= 2x baseline or kv > 90%").unwrap(), &f).0, Truth::True);
        // ... and a false conjunct decides the other way
        assert_eq!(eval(&parse("kv >= 2x baseline and itl > 1s").unwrap(), &f).0, Truth::False);
        // unknown signal
        match eval(&parse("nothing > 1").unwrap(), &f).0 {
            Truth::Unknown(r) => assert_eq!(r, vec![Reason::from("no data for nothing")]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_zero_baseline_is_unchanged_when_the_value_is_zero_too() {
        let f = F { v: [("p", 0.0), ("q", 1.0)].into_iter().collect(), b: [("p", 0.0), ("q", 0.0)].into_iter().collect() };
        assert_eq!(eval(&parse("p < 1.5x baseline").unwrap(), &f).0, Truth::True);
        assert_eq!(eval(&parse("q >= 2x baseline").unwrap(), &f).0, Truth::True);
    }

    #[test]
    fn score_grows_with_the_margin_past_the_threshold() {
        let f = facts();
        let (_, s8) = eval(&parse("ttft >= 1x baseline").unwrap(), &f); // 8x the baseline
        let (_, s2) = eval(&parse("ttft >= 4x baseline").unwrap(), &f); // 2x the threshold
        assert!(s8 > s2 && s2 > 0.0, "{s8} {s2}");
        // guards (upper bounds) add nothing
        assert_eq!(eval(&parse("itl < 1s").unwrap(), &f).1, 0.0);
    }
}

/// Parse a lone quantity such as `3s`, `500ms`, `90%` or `0.9` into the base unit.
pub fn parse_quantity(src: &str) -> Result<f64, ExprError> {
    crate::units::parse_quantity(src).map_err(|message| ExprError { offset: 0, message })
}

#[cfg(test)]
mod quantity_tests {
    #[test]
    fn quantities_carry_their_units() {
        assert_eq!(super::parse_quantity("500ms").unwrap(), 0.5);
        assert_eq!(super::parse_quantity("90%").unwrap(), 0.9);
        assert!(super::parse_quantity("2x").is_err());
        assert!(super::parse_quantity("fast").is_err());
    }
}

#[cfg(test)]
mod bucket_tests {
    use super::*;

    /// Facts whose values are quantiles of a histogram with vLLM's queue-time bounds.
    struct Bucketed {
        v: f64,
        b: f64,
    }
    const QUEUE_BOUNDS: [f64; 5] = [0.3, 0.5, 0.8, 1.0, 1.5];
    impl Facts for Bucketed {
        fn value(&self, _: &str) -> Result<f64, String> {
            Ok(self.v)
        }
        fn baseline(&self, _: &str) -> Result<f64, String> {
            Ok(self.b)
        }
        fn threshold(&self, _: &str) -> Option<f64> {
            None
        }
        fn bucket(&self, _: &str, baseline: bool) -> Option<Bucket> {
            Bucket::locate(&QUEUE_BOUNDS, if baseline { self.b } else { self.v })
        }
    }

    fn truth(cond: &str, v: f64, b: f64) -> Truth {
        eval(&parse(cond).unwrap(), &Bucketed { v, b }).0
    }

    #[test]
    fn a_quantile_in_the_first_bucket_is_only_known_to_be_under_its_bound() {
        // "285 ms" is histogram_quantile's guess inside [0, 300 ms].
        assert_eq!(truth("q > 1s", 0.285, 0.285), Truth::False);
        assert_eq!(truth("q <= 300ms", 0.285, 0.285), Truth::True);
        // A threshold inside the bucket cannot be decided either way: unknown, never passed.
        match truth("q > 100ms", 0.285, 0.285) {
            Truth::Unknown(r) => assert!(r[0].text().contains("first bucket") && r[0].text().contains("cannot be told"), "{r:?}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(truth("q < 100ms", 0.2, 0.2), Truth::Unknown(_)));
    }

    #[test]
    fn two_values_in_one_bucket_are_never_compared_as_a_ratio() {
        // 0.285 against 0.05: 5.7x by the numbers, but both lie under 300 ms.
        assert_eq!(truth("q >= 2x baseline", 0.285, 0.05), Truth::False);
        assert_eq!(truth("q < 1.5x baseline", 0.285, 0.05), Truth::True);
        // Inside an interior bucket the interpolated values are compared, as Prometheus does:
        // 0.9 and 0.82 are both in (0.8, 1].
        assert_eq!(truth("q >= 1.05x baseline", 0.9, 0.82), Truth::True);
        // Both in the +Inf bucket: both only "over 1.5 s".
        assert_eq!(truth("q >= 2x baseline", 1.5, 1.5), Truth::False);
    }

    #[test]
    fn a_bound_against_a_measured_value_is_decided_by_the_whole_interval() {
        // Window measured at 2.2 s against a baseline under 300 ms: at least 7.3x.
        assert_eq!(truth("q >= 2x baseline", 1.2, 0.285), Truth::True);
        // Window under 300 ms against a baseline of 0.7 s: at most 0.43x.
        assert_eq!(truth("q >= 2x baseline", 0.2, 0.7), Truth::False);
        assert_eq!(truth("q <= 0.5x baseline", 0.2, 0.7), Truth::True);
        // Under 300 ms against 0.45 s: somewhere in [0, 0.67]: a fall to half cannot be told.
        assert!(matches!(truth("q <= 0.5x baseline", 0.2, 0.45), Truth::Unknown(_)));
        // The +Inf bucket: histogram_quantile returns the last bound; the truth is above it.
        assert_eq!(truth("q > 1.5s", 1.5, 0.4), Truth::True);
        assert_eq!(truth("q >= 3x baseline", 1.5, 0.4), Truth::True);
        assert!(matches!(truth("q > 2s", 1.5, 0.4), Truth::Unknown(_)));
    }

    #[test]
    fn locating_a_value_among_bounds() {
        assert_eq!(Bucket::locate(&QUEUE_BOUNDS, 0.1), Some(Bucket { index: 0, interval: Some((0.0, 0.3)) }));
        assert_eq!(Bucket::locate(&QUEUE_BOUNDS, 0.3), Some(Bucket { index: 0, interval: Some((0.0, 0.3)) }));
        assert_eq!(Bucket::locate(&QUEUE_BOUNDS, 0.31), Some(Bucket { index: 1, interval: None }));
        assert_eq!(Bucket::locate(&QUEUE_BOUNDS, 1.5), Some(Bucket { index: 5, interval: Some((1.5, f64::INFINITY)) }));
        assert_eq!(Bucket::locate(&QUEUE_BOUNDS, f64::NAN), None);
        assert_eq!(Bucket::locate(&[], 0.1), None);
    }
}
