//! A PromQL parser for the subset local evaluation implements, with Prometheus' precedence
//! (`or` < `and`/`unless` < comparisons < `+ -` < `* / % atan2` < `^`, right-associative; unary minus
//! binds like `*`), both placements of `by`/`without`, `on`/`ignoring` with `group_left`/`group_right`,
//! matrix selectors, subqueries and `offset`. Static type errors are found here, as Prometheus finds
//! them, so an evaluation never starts on an expression that cannot mean anything.
//!
//! Written as a recursive descent over characters (durations and numbers look alike only to a
//! tokenizer that does not know where it is).

use regex::Regex;

use super::ast::*;

/// A query that cannot be parsed or type-checked, or that uses what local evaluation lacks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// Invalid PromQL (Prometheus would reject it too).
    #[error("parse error at character {pos}: {msg}")]
    Syntax { pos: usize, msg: String },
    /// Valid PromQL that local evaluation does not implement.
    #[error("{0} is not supported by local evaluation")]
    Unsupported(String),
}

/// Parse and type-check a query.
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    let mut p = Parser { src: input, pos: 0 };
    let e = p.expr(0)?;
    p.ws();
    if p.pos < p.src.len() {
        return Err(p.err(format!("unexpected {:?}", p.rest_excerpt())));
    }
    check(&e).map_err(|msg| ParseError::Syntax { pos: 0, msg })?;
    Ok(e)
}

/// Parse a bare selector such as `{__name__=~"vllm:.+",job="vllm"}` or `up{job="x"}` (the `match[]`
/// of the series and label APIs).
pub fn parse_selector(input: &str) -> Result<VectorSelector, ParseError> {
    match parse(input)? {
        Expr::Selector(s) => Ok(s),
        _ => Err(ParseError::Syntax { pos: 0, msg: format!("{input:?} is not a series selector") }),
    }
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

const AGG_NAMES: &[&str] =
    &["sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values"];

impl<'a> Parser<'a> {
    fn err(&self, msg: impl Into<String>) -> ParseError {
        ParseError::Syntax { pos: self.pos + 1, msg: msg.into() }
    }

    fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    fn rest_excerpt(&self) -> String {
        let r = self.rest();
        if r.is_empty() {
            return "end of input".to_string();
        }
        r.chars().take(20).collect()
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Skip whitespace and `#` comments.
    fn ws(&mut self) {
        loop {
            let r = self.rest();
            let trimmed = r.trim_start();
            self.pos += r.len() - trimmed.len();
            if trimmed.starts_with('#') {
                let n = trimmed.find('\n').unwrap_or(trimmed.len());
                self.pos += n;
            } else {
                break;
            }
        }
    }

    fn eat(&mut self, s: &str) -> bool {
        self.ws();
        if self.rest().starts_with(s) {
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), ParseError> {
        if self.eat(s) {
            Ok(())
        } else {
            Err(self.err(format!("expected {s:?}, found {:?}", self.rest_excerpt())))
        }
    }

    /// An identifier (metric names may contain `:`), without consuming it.
    fn peek_ident(&mut self) -> Option<&'a str> {
        self.ws();
        let r = self.rest();
        let mut end = 0;
        for (i, c) in r.char_indices() {
            let ok = c == '_' || c == ':' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit());
            if !ok {
                break;
            }
            end = i + c.len_utf8();
        }
        (end > 0).then(|| &r[..end])
    }

    fn ident(&mut self) -> Option<&'a str> {
        let id = self.peek_ident()?;
        self.pos += id.len();
        Some(id)
    }

    /// The next identifier is `kw` (as a whole word).
    fn eat_keyword(&mut self, kw: &str) -> bool {
        match self.peek_ident() {
            Some(id) if id.eq_ignore_ascii_case(kw) => {
                self.pos += id.len();
                true
            }
            _ => false,
        }
    }

    fn label_name(&mut self) -> Result<String, ParseError> {
        match self.ident() {
            Some(id) if !id.contains(':') => Ok(id.to_string()),
            _ => Err(self.err(format!("expected a label name, found {:?}", self.rest_excerpt()))),
        }
    }

    /// `(a, b, c)`, possibly empty, trailing comma allowed.
    fn label_list(&mut self) -> Result<Vec<String>, ParseError> {
        self.expect("(")?;
        let mut out = Vec::new();
        loop {
            if self.eat(")") {
                return Ok(out);
            }
            out.push(self.label_name()?);
            if !self.eat(",") {
                self.expect(")")?;
                return Ok(out);
            }
        }
    }

    // ---- expressions ----------------------------------------------------------------------------

    fn peek_binop(&mut self) -> Option<(BinOp, usize)> {
        self.ws();
        let r = self.rest();
        let sym = [
            ("==", BinOp::Eq),
            ("!=", BinOp::Ne),
            (">=", BinOp::Ge),
            ("<=", BinOp::Le),
            (">", BinOp::Gt),
            ("<", BinOp::Lt),
            ("+", BinOp::Add),
            ("-", BinOp::Sub),
            ("*", BinOp::Mul),
            ("/", BinOp::Div),
            ("%", BinOp::Mod),
            ("^", BinOp::Pow),
        ];
        for (s, op) in sym {
            if r.starts_with(s) {
                return Some((op, s.len()));
            }
        }
        let id = self.peek_ident()?;
        let op = match id.to_ascii_lowercase().as_str() {
            "and" => BinOp::And,
            "or" => BinOp::Or,
            "unless" => BinOp::Unless,
            "atan2" => BinOp::Atan2,
            _ => return None,
        };
        Some((op, id.len()))
    }

    fn expr(&mut self, min_prec: u8) -> Result<Expr, ParseError> {
        let mut lhs = self.unary()?;
        while let Some((op, len)) = self.peek_binop() {
            if op.precedence() < min_prec {
                break;
            }
            self.pos += len;
            let return_bool = self.eat_keyword("bool");
            let mut matching: Option<VectorMatching> = None;
            if let Some(on) = self.peek_ident().and_then(|id| match id.to_ascii_lowercase().as_str() {
                "on" => Some(true),
                "ignoring" => Some(false),
                _ => None,
            }) {
                self.ident();
                let labels = self.label_list()?;
                matching = Some(VectorMatching { card: Cardinality::OneToOne, on, labels, include: vec![] });
            }
            if let Some(card) = self.peek_ident().and_then(|id| match id.to_ascii_lowercase().as_str() {
                "group_left" => Some(Cardinality::ManyToOne),
                "group_right" => Some(Cardinality::OneToMany),
                _ => None,
            }) {
                self.ident();
                let include = if self.eat_peek("(") { self.label_list()? } else { vec![] };
                let m = matching.get_or_insert(VectorMatching { card, on: false, labels: vec![], include: vec![] });
                m.card = card;
                m.include = include;
            }
            let next_min = if op == BinOp::Pow { op.precedence() } else { op.precedence() + 1 };
            let rhs = self.expr(next_min)?;
            lhs = Expr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs), return_bool, matching };
        }
        Ok(lhs)
    }

    /// True when the next non-space text starts with `s` (not consumed).
    fn eat_peek(&mut self, s: &str) -> bool {
        self.ws();
        self.rest().starts_with(s)
    }

    fn unary(&mut self) -> Result<Expr, ParseError> {
        self.ws();
        if self.eat("-") {
            let e = self.expr(BinOp::Pow.precedence())?;
            return Ok(match e {
                Expr::Number(n) => Expr::Number(-n),
                e => Expr::Negate(Box::new(e)),
            });
        }
        if self.eat("+") {
            return self.expr(BinOp::Pow.precedence());
        }
        let primary = self.primary()?;
        self.postfix(primary)
    }

    fn postfix(&mut self, mut e: Expr) -> Result<Expr, ParseError> {
        loop {
            self.ws();
            if self.eat("[") {
                let range = self.duration()?;
                if self.eat(":") {
                    let step = if self.eat_peek("]") { None } else { Some(self.duration()?) };
                    self.expect("]")?;
                    if step == Some(0) {
                        return Err(self.err("zero step in subquery"));
                    }
                    e = Expr::Subquery { expr: Box::new(e), range_ms: range, step_ms: step, offset_ms: 0 };
                } else {
                    self.expect("]")?;
                    e = match e {
                        Expr::Selector(selector) => Expr::Matrix { selector, range_ms: range },
                        _ => return Err(self.err("ranges are only allowed for vector selectors")),
                    };
                }
                if range <= 0 {
                    return Err(self.err("the range of a range vector or subquery must be positive"));
                }
            } else if self.eat_keyword("offset") {
                let neg = self.eat("-");
                let d = self.duration()?;
                let d = if neg { -d } else { d };
                match &mut e {
                    Expr::Selector(s) | Expr::Matrix { selector: s, .. } => s.offset_ms += d,
                    Expr::Subquery { offset_ms, .. } => *offset_ms += d,
                    _ => return Err(self.err("offset modifier must be preceded by an instant vector selector, a range vector selector or a subquery")),
                }
            } else if self.eat_peek("@") {
                return Err(ParseError::Unsupported("the @ modifier".into()));
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, ParseError> {
        self.ws();
        let Some(c) = self.peek() else {
            return Err(self.err("unexpected end of input"));
        };
        if c == '(' {
            self.pos += 1;
            let e = self.expr(0)?;
            self.expect(")")?;
            return Ok(Expr::Paren(Box::new(e)));
        }
        if c == '"' || c == '\'' || c == '`' {
            return Ok(Expr::Str(self.string()?));
        }
        if c.is_ascii_digit() || (c == '.' && self.rest()[1..].starts_with(|d: char| d.is_ascii_digit())) {
            return Ok(Expr::Number(self.number()?));
        }
        if c == '{' {
            return Ok(Expr::Selector(self.selector(None)?));
        }
        let start = self.pos;
        let Some(id) = self.ident() else {
            return Err(self.err(format!("unexpected {:?}", self.rest_excerpt())));
        };
        let lower = id.to_ascii_lowercase();
        if lower == "inf" || lower == "nan" {
            return Ok(Expr::Number(if lower == "inf" { f64::INFINITY } else { f64::NAN }));
        }
        if AGG_NAMES.contains(&lower.as_str())
            && (self.eat_peek("(")
                || self.peek_ident().is_some_and(|n| matches!(n.to_ascii_lowercase().as_str(), "by" | "without")))
        {
            return self.aggregation(AggOp::from_name(&lower).unwrap_or(AggOp::Sum));
        }
        if self.eat_peek("(") {
            return self.call(id, start);
        }
        if matches!(
            lower.as_str(),
            "by" | "without"
                | "on"
                | "ignoring"
                | "group_left"
                | "group_right"
                | "bool"
                | "offset"
                | "and"
                | "or"
                | "unless"
                | "atan2"
        ) {
            self.pos = start;
            return Err(self.err(format!("unexpected keyword {id:?}")));
        }
        Ok(Expr::Selector(self.selector(Some(id))?))
    }

    fn call(&mut self, name: &str, start: usize) -> Result<Expr, ParseError> {
        if signature(name).is_none() {
            if KNOWN_BUT_UNSUPPORTED.contains(&name) {
                return Err(ParseError::Unsupported(format!("function {name}()")));
            }
            self.pos = start;
            return Err(self.err(format!("unknown function with name {name:?}")));
        }
        self.expect("(")?;
        let mut args = Vec::new();
        if !self.eat(")") {
            loop {
                args.push(self.expr(0)?);
                if self.eat(",") {
                    continue;
                }
                self.expect(")")?;
                break;
            }
        }
        Ok(Expr::Call { func: name.to_string(), args })
    }

    fn aggregation(&mut self, op: AggOp) -> Result<Expr, ParseError> {
        let mut grouping = self.grouping()?;
        self.expect("(")?;
        let first = self.expr(0)?;
        let (param, expr) = if self.eat(",") {
            let second = self.expr(0)?;
            (Some(Box::new(first)), second)
        } else {
            (None, first)
        };
        self.expect(")")?;
        if grouping == Grouping::None {
            grouping = self.grouping()?;
        }
        Ok(Expr::Aggregate { op, param, expr: Box::new(expr), grouping })
    }

    fn grouping(&mut self) -> Result<Grouping, ParseError> {
        if self.eat_keyword("by") {
            return Ok(Grouping::By(self.label_list()?));
        }
        if self.eat_keyword("without") {
            return Ok(Grouping::Without(self.label_list()?));
        }
        Ok(Grouping::None)
    }

    fn selector(&mut self, name: Option<&str>) -> Result<VectorSelector, ParseError> {
        let mut matchers = Vec::new();
        if let Some(n) = name {
            matchers.push(LabelMatcher {
                name: "__name__".into(),
                kind: MatchKind::Eq,
                value: n.to_string(),
                re: None,
            });
        }
        if self.eat("{") {
            loop {
                if self.eat("}") {
                    break;
                }
                let lname = self.label_name()?;
                self.ws();
                let kind = if self.eat("=~") {
                    MatchKind::Re
                } else if self.eat("!~") {
                    MatchKind::Nre
                } else if self.eat("!=") {
                    MatchKind::Ne
                } else if self.eat("=") {
                    MatchKind::Eq
                } else {
                    return Err(
                        self.err(format!("expected a label matching operator, found {:?}", self.rest_excerpt()))
                    );
                };
                self.ws();
                let vpos = self.pos;
                let value = self.string()?;
                let re = match kind {
                    MatchKind::Re | MatchKind::Nre => {
                        Some(Regex::new(&format!("^(?:{value})$")).map_err(|e| ParseError::Syntax {
                            pos: vpos + 1,
                            msg: format!("invalid regular expression {value:?}: {}", first_line(&e.to_string())),
                        })?)
                    }
                    _ => None,
                };
                if name.is_some() && lname == "__name__" {
                    return Err(self.err("metric name must not be set twice"));
                }
                matchers.push(LabelMatcher { name: lname, kind, value, re });
                if !self.eat(",") {
                    self.expect("}")?;
                    break;
                }
            }
        }
        if !matchers.iter().any(|m| !m.matches("")) {
            return Err(self.err("vector selector must contain at least one non-empty matcher"));
        }
        Ok(VectorSelector { matchers, offset_ms: 0 })
    }

    // ---- literals ---------------------------------------------------------------------------------

    fn number(&mut self) -> Result<f64, ParseError> {
        self.ws();
        let r = self.rest();
        if r.starts_with("0x") || r.starts_with("0X") {
            let digits: String = r[2..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
            let v = u64::from_str_radix(&digits, 16).map_err(|_| self.err("invalid hexadecimal number"))?;
            self.pos += 2 + digits.len();
            return Ok(v as f64);
        }
        let mut end = 0;
        let b = r.as_bytes();
        while end < b.len() && (b[end].is_ascii_digit() || b[end] == b'.') {
            end += 1;
        }
        if end < b.len() && (b[end] == b'e' || b[end] == b'E') {
            let mut e = end + 1;
            if e < b.len() && (b[e] == b'+' || b[e] == b'-') {
                e += 1;
            }
            if e < b.len() && b[e].is_ascii_digit() {
                while e < b.len() && b[e].is_ascii_digit() {
                    e += 1;
                }
                end = e;
            }
        }
        let text = &r[..end];
        let v: f64 = text.parse().map_err(|_| self.err(format!("invalid number {text:?}")))?;
        self.pos += end;
        if self.rest().starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            return Err(self.err(format!("unexpected {:?} after the number {text}", self.rest_excerpt())));
        }
        Ok(v)
    }

    /// A PromQL duration such as `5m`, `1h30m`, `1800s`, `250ms`, in milliseconds.
    fn duration(&mut self) -> Result<i64, ParseError> {
        self.ws();
        let r = self.rest();
        let mut total: i64 = 0;
        let mut i = 0;
        let b = r.as_bytes();
        let mut parts = 0;
        while i < b.len() && b[i].is_ascii_digit() {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let n: i64 = r[s..i].parse().map_err(|_| self.err("duration out of range"))?;
            let unit_ms: i64 = if r[i..].starts_with("ms") {
                i += 2;
                1
            } else {
                let unit = match b.get(i).copied() {
                    Some(b's') => 1000,
                    Some(b'm') => 60_000,
                    Some(b'h') => 3_600_000,
                    Some(b'd') => 86_400_000,
                    Some(b'w') => 604_800_000,
                    Some(b'y') => 31_536_000_000,
                    _ => {
                        return Err(self.err(format!(
                            "invalid duration {:?}: the number needs a unit (ms, s, m, h, d, w, y)",
                            &r[..i]
                        )))
                    }
                };
                i += 1;
                unit
            };
            total = n
                .checked_mul(unit_ms)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(|| self.err("duration out of range"))?;
            parts += 1;
        }
        if parts == 0 {
            return Err(self.err(format!("expected a duration, found {:?}", self.rest_excerpt())));
        }
        self.pos += i;
        Ok(total)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.ws();
        let start = self.pos;
        let r = self.rest();
        let mut chars = r.char_indices();
        let Some((_, quote)) = chars.next() else {
            return Err(self.err("expected a string"));
        };
        if !matches!(quote, '"' | '\'' | '`') {
            return Err(self.err(format!("expected a quoted string, found {:?}", self.rest_excerpt())));
        }
        let mut out = String::new();
        while let Some((i, c)) = chars.next() {
            if c == quote {
                self.pos = start + i + 1;
                return Ok(out);
            }
            if c == '\\' && quote != '`' {
                let Some((_, e)) = chars.next() else { break };
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    '\\' => out.push('\\'),
                    '"' | '\'' => out.push(e),
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = (0..n).filter_map(|_| chars.next().map(|(_, c)| c)).collect();
                        let code = u32::from_str_radix(&hex, 16).ok().filter(|_| hex.len() == n);
                        match code.and_then(char::from_u32) {
                            Some(ch) => out.push(ch),
                            None => {
                                self.pos = start + i;
                                return Err(self.err(format!("invalid escape \\{e}{hex}")));
                            }
                        }
                    }
                    '0'..='7' => {
                        let mut oct = String::from(e);
                        for _ in 0..2 {
                            match chars.next() {
                                Some((_, d)) if d.is_digit(8) => oct.push(d),
                                _ => {
                                    self.pos = start + i;
                                    return Err(self.err("invalid octal escape"));
                                }
                            }
                        }
                        match u32::from_str_radix(&oct, 8).ok().filter(|v| *v < 256).and_then(char::from_u32) {
                            Some(ch) => out.push(ch),
                            None => {
                                self.pos = start + i;
                                return Err(self.err("invalid octal escape"));
                            }
                        }
                    }
                    other => {
                        self.pos = start + i;
                        return Err(self.err(format!("unknown escape sequence \\{other}")));
                    }
                }
                continue;
            }
            if c == '\n' && quote != '`' {
                break;
            }
            out.push(c);
        }
        Err(ParseError::Syntax { pos: start + 1, msg: "unterminated quoted string".into() })
    }
}

fn first_line(s: &str) -> String {
    s.lines().rfind(|l| !l.trim().is_empty()).unwrap_or(s).trim().to_string()
}

// ---- static checks ----------------------------------------------------------------------------------

fn check(e: &Expr) -> Result<(), String> {
    match e {
        Expr::Number(_) | Expr::Str(_) | Expr::Selector(_) | Expr::Matrix { .. } => Ok(()),
        Expr::Paren(inner) => check(inner),
        Expr::Negate(inner) => {
            check(inner)?;
            match inner.value_type() {
                ValueType::Scalar | ValueType::Vector => Ok(()),
                t => Err(format!(
                    "unary expression only allowed on expressions of type scalar or instant vector, got {t:?}"
                )),
            }
        }
        Expr::Subquery { expr, .. } => {
            check(expr)?;
            match expr.value_type() {
                ValueType::Vector => Ok(()),
                t => Err(format!("subquery is only allowed on instant vector, got {t} instead")),
            }
        }
        Expr::Call { func, args } => {
            let sig = signature(func).ok_or_else(|| format!("unknown function with name {func:?}"))?;
            let n = args.len();
            let want = sig.args.len();
            let ok = match sig.variadic {
                0 => n == want,
                -1 => n >= want,
                k => n <= want && n + k as usize >= want,
            };
            if !ok {
                return Err(format!("expected {want} argument(s) in call to {func:?}, got {n}"));
            }
            for (i, a) in args.iter().enumerate() {
                check(a)?;
                let expected = sig.args[i.min(want.saturating_sub(1))];
                let got = a.value_type();
                if got != expected {
                    return Err(format!("expected type {expected} in call to function {func:?}, got {got}"));
                }
            }
            Ok(())
        }
        Expr::Aggregate { op, param, expr, .. } => {
            check(expr)?;
            if expr.value_type() != ValueType::Vector {
                return Err(format!(
                    "expected type instant vector in aggregation expression, got {}",
                    expr.value_type()
                ));
            }
            match (op.param_type(), param) {
                (None, Some(_)) => Err("this aggregation takes no parameter".into()),
                (Some(_), None) => Err("this aggregation needs a parameter".into()),
                (Some(t), Some(p)) => {
                    check(p)?;
                    if p.value_type() != t {
                        return Err(format!("expected type {t} in aggregation parameter, got {}", p.value_type()));
                    }
                    Ok(())
                }
                (None, None) => Ok(()),
            }
        }
        Expr::Binary { op, lhs, rhs, return_bool, matching } => {
            check(lhs)?;
            check(rhs)?;
            let (lt, rt) = (lhs.value_type(), rhs.value_type());
            for t in [lt, rt] {
                if !matches!(t, ValueType::Scalar | ValueType::Vector) {
                    return Err("binary expression must contain only scalar and instant vector types".into());
                }
            }
            if *return_bool && !op.is_comparison() {
                return Err("bool modifier can only be used on comparison operators".into());
            }
            if op.is_comparison() && lt == ValueType::Scalar && rt == ValueType::Scalar && !return_bool {
                return Err("comparisons between scalars must use BOOL modifier".into());
            }
            if op.is_set() && (lt != ValueType::Vector || rt != ValueType::Vector) {
                return Err(format!("set operator {:?} not allowed in binary scalar expression", op.as_str()));
            }
            if let Some(m) = matching {
                if lt != ValueType::Vector || rt != ValueType::Vector {
                    return Err("vector matching only allowed between instant vectors".into());
                }
                if op.is_set() && matches!(m.card, Cardinality::ManyToOne | Cardinality::OneToMany) {
                    return Err(format!("no grouping allowed for {:?} operation", op.as_str()));
                }
                if m.on {
                    if let Some(l) = m.include.iter().find(|l| m.labels.contains(l)) {
                        return Err(format!("label {l:?} must not occur in ON and GROUP clause at once"));
                    }
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Expr {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_every_query_shape_the_signals_generate() {
        for q in [
            r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1800s])))"#,
            r#"(sum by (model_name) (rate(a{finished_reason="abort"}[1800s])) or sum by (model_name) (rate(a[1800s])) * 0) / sum by (model_name) (rate(a[1800s]))"#,
            r#"sum by (model_name) (sum by (instance, job) (rate(c[1800s])) * on (instance, job) group_left (model_name) group by (instance, job, model_name) (last_over_time(g[1800s])))"#,
            "avg_over_time((sum by (model_name) (rate(c[120s])) > bool 0)[1800s:60s])",
            r#"{__name__=~"vllm[:_].+|http_requests_total",job="vllm"}"#,
            "max by (model_name) (max_over_time(vllm:kv_cache_usage_perc[1800s]))",
        ] {
            p(q);
        }
    }

    #[test]
    fn precedence_follows_prometheus() {
        // a + b * c ^ d ^ e  ==  a + (b * (c ^ (d ^ e)))
        match p("a + b * c ^ d ^ e") {
            Expr::Binary { op: BinOp::Add, rhs, .. } => match *rhs {
                Expr::Binary { op: BinOp::Mul, rhs, .. } => match *rhs {
                    Expr::Binary { op: BinOp::Pow, rhs, .. } => {
                        assert!(matches!(*rhs, Expr::Binary { op: BinOp::Pow, .. }))
                    }
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
        // a or b and c  ==  a or (b and c)
        assert!(matches!(p("a or b and c"), Expr::Binary { op: BinOp::Or, .. }));
        // -a ^ 2 == -(a ^ 2)
        assert!(matches!(p("-a ^ 2"), Expr::Negate(_)));
        // 1 - 2 - 3 is left-associative
        match p("1 - 2 - 3") {
            Expr::Binary { lhs, .. } => assert!(matches!(*lhs, Expr::Binary { .. })),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn grouping_may_follow_the_aggregated_expression() {
        match p("sum(rate(x[5m])) by (job)") {
            Expr::Aggregate { grouping, .. } => assert_eq!(grouping, Grouping::By(vec!["job".into()])),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn durations_combine_units() {
        match p("x[1h30m]") {
            Expr::Matrix { range_ms, .. } => assert_eq!(range_ms, 5_400_000),
            other => panic!("{other:?}"),
        }
        match p("rate(x[5m] offset 1m)") {
            Expr::Call { args, .. } => match &args[0] {
                Expr::Matrix { selector, .. } => assert_eq!(selector.offset_ms, 60_000),
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn string_escapes_follow_go() {
        match p(r#"x{a="q\"u\\o\ntē\x41\u00e9"}"#) {
            Expr::Selector(s) => assert_eq!(s.matchers[1].value, "q\"u\\o\ntēAé"),
            other => panic!("{other:?}"),
        }
        match p(r#"x{a=`raw\n`}"#) {
            Expr::Selector(s) => assert_eq!(s.matchers[1].value, "raw\\n"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn regex_matchers_are_fully_anchored() {
        let Expr::Selector(s) = p(r#"x{model=~"Llama-3\\.1"}"#) else { panic!() };
        let m = &s.matchers[1];
        assert!(m.matches("Llama-3.1"));
        assert!(!m.matches("Llama-3.1-8B"));
        assert!(!m.matches("xLlama-3.1"));
    }

    #[test]
    fn type_errors_are_reported_like_prometheus() {
        for (q, want) in [
            ("rate(x)", "expected type range vector"),
            ("x[5m] + 1", "binary expression must contain only scalar and instant vector"),
            ("1 > 2", "BOOL modifier"),
            ("1 and x", "set operator"),
            ("sum(x[5m])", "aggregation expression"),
            (r#"{job=""}"#, "non-empty matcher"),
            ("rate(x[5m])[10m]", "only allowed for vector selectors"),
            ("nosuchfn(x)", "unknown function"),
            ("x +", "unexpected end of input"),
            ("sum by (a (x)", "expected"),
            (r#"x{a=~"("}"#, "invalid regular expression"),
        ] {
            let e = parse(q).expect_err(q).to_string();
            assert!(e.contains(want), "{q}: {e}");
        }
    }

    #[test]
    fn unsupported_features_say_so() {
        for q in ["x @ 100", "hour()", "timestamp(x)"] {
            let e = parse(q).expect_err(q);
            assert!(matches!(e, ParseError::Unsupported(_)), "{q}: {e:?}");
            assert!(e.to_string().contains("not supported by local evaluation"), "{e}");
        }
    }

    #[test]
    fn the_parser_never_panics_on_arbitrary_text() {
        for q in [
            "",
            "(",
            ")",
            "{",
            "x{",
            "x{a",
            "x{a=",
            "x{a=\"",
            "[",
            "x[",
            "x[5",
            "x[5m",
            "x[5m:",
            "sum(",
            "-",
            "0x",
            "1e",
            "'\\",
            "\"\\u12",
            "x offset",
            "a or",
            "a + on(",
            "a + on(b) group_left(",
            "é",
            "x{é=\"1\"}",
        ] {
            let _ = parse(q);
        }
    }
}
