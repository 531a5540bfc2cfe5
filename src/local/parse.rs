//! PromQL text to syntax tree, with the maintained `promql-parser` crate (pinned in Cargo.toml)
//! doing the parsing and type checking, and this module adding what local evaluation needs around
//! it:
//!
//! - Positions. The crate's messages say what is wrong but not where, so [`locate`] finds the place:
//!   for a lexical error, the shortest prefix of the query that fails the same way; for a syntax or
//!   type error, the first token after which the query can no longer be completed (tried with a few
//!   completions that close what is open). Messages read "parse error at character N: ...".
//! - Refusals. What the crate accepts but local evaluation does not implement (the `@` modifier,
//!   functions outside [`super::functions::IMPLEMENTED`], `limitk`, `fill` modifiers, `or` between
//!   label matchers) is refused before evaluation as "not supported by local evaluation".
//! - Selectors: a bare selector for the `match[]` of the label API ([`parse_selector`]) and the
//!   `name{label="value"}` series of rule test files ([`parse_series`]).

use promql_parser::label::MatchOp;
use promql_parser::parser::token::{T_LIMITK, T_LIMIT_RATIO};
use promql_parser::parser::{self as pp, Expr, VectorSelector};

use super::functions::IMPLEMENTED;
use crate::prom::Labels;

/// What promql-parser says about any grammar error (it does not say which token).
const GRAMMAR_ERROR: &str = "invalid promql query";
/// Limits on the search for an error's position.
const MAX_PROBED_BYTES: usize = 4096;
const MAX_PROBED_TOKENS: usize = 400;

/// A query that cannot be parsed or type-checked, or that uses what local evaluation lacks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// Invalid PromQL (Prometheus would reject it too); `pos` counts characters from 1.
    #[error("parse error at character {pos}: {msg}")]
    Syntax { pos: usize, msg: String },
    /// Invalid PromQL found after parsing, where no single character is to blame.
    #[error("parse error: {0}")]
    Invalid(String),
    /// Valid PromQL that local evaluation does not implement.
    #[error("{0} is not supported by local evaluation")]
    Unsupported(String),
}

/// Parse and type-check a query, and refuse what local evaluation does not implement.
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    let expr = syntax(input).map_err(|msg| locate(input, &msg))?;
    check_supported(&expr)?;
    Ok(expr)
}

/// Parse a bare selector such as `{__name__=~"vllm:.+",job="vllm"}` or `up{job="x"}` (the `match[]`
/// of the series and label APIs).
pub fn parse_selector(input: &str) -> Result<VectorSelector, ParseError> {
    match parse(input)? {
        Expr::VectorSelector(vs) => Ok(vs),
        _ => Err(ParseError::Invalid(format!("{input:?} is not a series selector"))),
    }
}

/// Why a rule test's input series could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SeriesError {
    #[error("series {text:?}: {source}")]
    Parse { text: String, source: ParseError },
    #[error("series {text:?}: input series take label=\"value\" pairs only")]
    NotEquality { text: String },
    #[error("series {text:?} has no metric name")]
    NoName { text: String },
}

/// The labels of a series written as promtool's test files write input series,
/// `name{label="value", ...}`: equality matchers only, and a metric name (kept as `__name__`).
pub fn parse_series(text: &str) -> Result<Labels, SeriesError> {
    let vs = parse_selector(text).map_err(|source| SeriesError::Parse { text: text.to_string(), source })?;
    let mut labels = Labels::new();
    if let Some(name) = &vs.name {
        labels.insert("__name__".to_string(), name.clone());
    }
    for m in &vs.matchers.matchers {
        if m.op != MatchOp::Equal {
            return Err(SeriesError::NotEquality { text: text.to_string() });
        }
        labels.insert(m.name.clone(), m.value.clone());
    }
    if !labels.contains_key("__name__") {
        return Err(SeriesError::NoName { text: text.to_string() });
    }
    Ok(labels)
}

/// promql-parser's parse, made total: some numbers would panic in it (a number of seconds too large
/// for a `Duration`, an `x` that does not start a hexadecimal `0x`), so those are refused first, and
/// any other panic becomes an error too.
fn syntax(input: &str) -> Result<Expr, String> {
    check_numbers(input)?;
    std::panic::catch_unwind(|| pp::parse(input)).unwrap_or_else(|_| Err(GRAMMAR_ERROR.to_string()))
}

fn lexes(input: &str) -> Result<(), String> {
    std::panic::catch_unwind(|| pp::lexer(input).map(|_| ())).unwrap_or_else(|_| Err(GRAMMAR_ERROR.to_string()))
}

/// Numbers must be ones promql-parser reads without panicking, and numbers used as durations
/// (`x[300]`, `offset 60`) must fit one.
fn check_numbers(input: &str) -> Result<(), String> {
    let toks = tokens(input);
    for (i, t) in toks.iter().enumerate() {
        if !t.text.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
            continue;
        }
        let lower = t.text.to_ascii_lowercase();
        if lower.contains('x') && !lower.starts_with("0x") {
            return Err(format!("invalid number {:?}", t.text));
        }
        let before = toks[..i].iter().rev().find(|p| !matches!(p.text, "+" | "-"));
        let after_offset = before.is_some_and(|p| p.text.eq_ignore_ascii_case("offset"));
        if !(t.in_brackets || after_offset) {
            continue;
        }
        if let Ok(secs) = promql_parser::util::parse_str_radix(t.text) {
            if !secs.is_finite() || secs > 1e15 {
                return Err(format!("duration out of range: {}", t.text));
            }
        }
    }
    Ok(())
}

// ---- where an error is ---------------------------------------------------------------------------

/// One token of a query, as far as finding positions needs: its text and byte span, and whether it
/// sits inside `[...]`; `open` is the stack of brackets still open after it.
struct Token<'a> {
    text: &'a str,
    start: usize,
    end: usize,
    in_brackets: bool,
    open: Vec<char>,
}

/// Split a query into tokens: strings (with escapes), words and numbers (`rate`, `vllm:x`, `1.5e-3`,
/// `5m`), two-character operators, and single characters; whitespace and `#` comments skipped.
fn tokens(input: &str) -> Vec<Token<'_>> {
    let b = input.as_bytes();
    let mut out = Vec::new();
    let mut open: Vec<char> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if c == b'#' {
            i = input[i..].find('\n').map_or(b.len(), |n| i + n);
            continue;
        }
        let start = i;
        if matches!(c, b'"' | b'\'' | b'`') {
            i += 1;
            while i < b.len() && b[i] != c {
                i += if b[i] == b'\\' && c != b'`' { 2 } else { 1 };
            }
            i = (i + 1).min(b.len());
        } else if c.is_ascii_alphanumeric() || matches!(c, b'_' | b':' | b'.') {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || matches!(b[i], b'_' | b':' | b'.')) {
                i += 1;
                let exponent = matches!(b[i - 1], b'e' | b'E') && b[start].is_ascii_digit();
                if exponent && i + 1 < b.len() && matches!(b[i], b'+' | b'-') && b[i + 1].is_ascii_digit() {
                    i += 1;
                }
            }
        } else if ["==", "!=", ">=", "<=", "=~", "!~"].iter().any(|op| input[i..].starts_with(op)) {
            i += 2;
        } else {
            i += input[i..].chars().next().map_or(1, char::len_utf8);
        }
        while !input.is_char_boundary(i.min(b.len())) {
            i += 1;
        }
        let end = i.min(b.len());
        let text = &input[start..end];
        let in_brackets = open.last() == Some(&'[');
        match text {
            "(" | "[" | "{" => open.push(text.chars().next().unwrap_or('(')),
            ")" | "]" | "}" => {
                open.pop();
            }
            _ => {}
        }
        out.push(Token { text, start, end, in_brackets, open: open.clone() });
    }
    out
}

/// The error `msg` for `input`, with the position it is found at (not looked for in queries longer
/// than [`MAX_PROBED_BYTES`]: every probe parses again).
fn locate(input: &str, msg: &str) -> ParseError {
    if input.len() > MAX_PROBED_BYTES {
        return ParseError::Invalid(msg.to_string());
    }
    let chars_before = |byte: usize| input[..byte].chars().count();
    let at_end = input.chars().count() + 1;
    if let Err(lex) = lexes(input) {
        let pos = if lex.contains("end of input") { at_end } else { lexical_position(input, &lex).unwrap_or(at_end) };
        return ParseError::Syntax { pos, msg: msg.to_string() };
    }
    let grammar = msg == GRAMMAR_ERROR;
    for t in tokens(input).iter().take(MAX_PROBED_TOKENS) {
        if !completable(&input[..t.end], &t.open, msg) {
            let what = if grammar { format!("unexpected {}", excerpt(t.text)) } else { msg.to_string() };
            return ParseError::Syntax { pos: chars_before(t.start) + 1, msg: what };
        }
    }
    let what = if grammar { "unexpected end of input".to_string() } else { msg.to_string() };
    ParseError::Syntax { pos: at_end, msg: what }
}

/// The character (counted from 1) ending the shortest prefix that fails to lex with `lex`.
fn lexical_position(input: &str, lex: &str) -> Option<usize> {
    input
        .char_indices()
        .take(4 * MAX_PROBED_TOKENS)
        .enumerate()
        .find(|(_, (i, c))| lexes(&input[..i + c.len_utf8()]).err().as_deref() == Some(lex))
        .map(|(n, _)| n + 1)
}

/// Can `prefix` (with `open` brackets unclosed) still become a valid query? For a grammar error it
/// is enough that some completion parses or fails only on types; for any other error `msg`, some
/// completion must parse.
fn completable(prefix: &str, open: &[char], msg: &str) -> bool {
    const FILLERS: &[&str] = &["", " x", " 1", " 5m", " \"v\"", "=\"v\"", " (x)", " (a)", "[5m]", " x[5m]"];
    const TAILS: &[&str] = &["", " (x)"];
    let closers: String = open
        .iter()
        .rev()
        .map(|c| match c {
            '(' => ')',
            '[' => ']',
            _ => '}',
        })
        .collect();
    let grammar = msg == GRAMMAR_ERROR;
    FILLERS.iter().any(|filler| {
        TAILS.iter().any(|tail| {
            let candidate = format!("{prefix}{filler}{closers}{tail}");
            match syntax(&candidate) {
                Ok(_) => true,
                Err(e) => grammar && e != GRAMMAR_ERROR && lexes(&candidate).is_ok(),
            }
        })
    })
}

fn excerpt(text: &str) -> String {
    let short: String = text.chars().take(20).collect();
    format!("{short:?}")
}

// ---- what local evaluation does not implement ----------------------------------------------------

fn check_supported(e: &Expr) -> Result<(), ParseError> {
    let unsupported = |what: &str| Err(ParseError::Unsupported(what.to_string()));
    match e {
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Ok(()),
        Expr::VectorSelector(vs) => check_selector(vs),
        Expr::MatrixSelector(ms) => {
            if ms.range.as_millis() == 0 {
                return Err(ParseError::Invalid("the range of a range vector must be positive".into()));
            }
            check_selector(&ms.vs)
        }
        Expr::Subquery(sq) => {
            if sq.at.is_some() {
                return unsupported("the @ modifier");
            }
            if sq.range.as_millis() == 0 || sq.step.is_some_and(|s| s.as_millis() == 0) {
                return Err(ParseError::Invalid("the range and step of a subquery must be positive".into()));
            }
            check_supported(&sq.expr)
        }
        Expr::Paren(p) => check_supported(&p.expr),
        Expr::Unary(u) => check_supported(&u.expr),
        Expr::Call(c) => {
            if !IMPLEMENTED.contains(&c.func.name) {
                return Err(ParseError::Unsupported(format!("function {}()", c.func.name)));
            }
            c.args.args.iter().try_for_each(|a| check_supported(a))
        }
        Expr::Aggregate(a) => {
            if matches!(a.op.id(), T_LIMITK | T_LIMIT_RATIO) {
                return Err(ParseError::Unsupported(format!("the {} aggregation", a.op)));
            }
            if let Some(p) = &a.param {
                check_supported(p)?;
            }
            check_supported(&a.expr)
        }
        Expr::Binary(b) => {
            if b.modifier.as_ref().is_some_and(|m| m.fill_values.lhs.is_some() || m.fill_values.rhs.is_some()) {
                return unsupported("the fill modifier");
            }
            check_supported(&b.lhs)?;
            check_supported(&b.rhs)
        }
        Expr::Extension(_) => unsupported("an extension expression"),
    }
}

fn check_selector(vs: &VectorSelector) -> Result<(), ParseError> {
    if vs.at.is_some() {
        return Err(ParseError::Unsupported("the @ modifier".into()));
    }
    if !vs.matchers.or_matchers.is_empty() {
        return Err(ParseError::Unsupported("`or` between label matchers".into()));
    }
    Ok(())
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
            "sum(rate(x[5m])) by (job)",
        ] {
            p(q);
        }
    }

    fn err(q: &str) -> String {
        parse(q).expect_err(q).to_string()
    }

    #[test]
    fn syntax_errors_say_where_and_what() {
        for (q, want) in [
            ("x +", "parse error at character 4: unexpected end of input"),
            ("sum by (a (x)", "parse error at character 8: unclosed left parenthesis"),
            ("sum by (a (x))", "parse error at character 11: unexpected \"(\""),
            ("x{a=\"b\" c=\"d\"}", "parse error at character 9: unexpected \"c\""),
            ("rate(x[5m]) )", "parse error at character 13: unexpected right parenthesis ')'"),
            ("sum(rate(x[5m])", "parse error at character 4: unclosed left parenthesis"),
            ("x{a=\"b}", "parse error at character 5: unterminated quoted string"),
            ("x{é=\"1\"}", "parse error at character 3:"),
            ("x[5m", "parse error at character 5:"),
        ] {
            let e = err(q);
            assert!(e.starts_with(want), "{q}: {e}");
        }
    }

    #[test]
    fn type_errors_are_reported_like_prometheus_with_a_position() {
        for (q, want) in [
            ("rate(x)", "expected type matrix in call to function 'rate', got vector"),
            ("x[5m] + 1", "binary expression must contain only scalar and instant vector"),
            ("1 > 2", "BOOL modifier"),
            ("1 and x", "set operator"),
            ("sum(x[5m])", "aggregation expression"),
            (r#"{job=""}"#, "non-empty matcher"),
            ("rate(x[5m])[10m]", "ranges only allowed for vector selectors"),
            ("nosuchfn(x)", "unknown function"),
            (r#"x{a=~"("}"#, "illegal regex"),
        ] {
            let e = err(q);
            assert!(e.contains(want) && e.starts_with("parse error at character "), "{q}: {e}");
        }
        assert!(err("rate(x)").starts_with("parse error at character 7:"), "{}", err("rate(x)"));
    }

    #[test]
    fn unsupported_features_say_so() {
        for q in ["x @ 100", "hour()", "day_of_week(x)", "limitk(2, x)", r#"x{a="1" or b="2"}"#] {
            let e = parse(q).expect_err(q);
            assert!(matches!(e, ParseError::Unsupported(_)), "{q}: {e:?}");
            assert!(e.to_string().contains("not supported by local evaluation"), "{e}");
        }
    }

    #[test]
    fn numbers_that_would_panic_in_the_parser_are_errors() {
        for q in ["x[1e400]", "x[1e30]", "x offset 1e300", "x[5m:1e300]", "x[1x]", "1x", "x offset 2x"] {
            assert!(parse(q).is_err(), "{q}");
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
            "x[0]",
            "x[5m:0]",
            "x[0.0001]",
        ] {
            let _ = parse(q);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]
        #[test]
        fn any_text_parses_or_fails_with_a_position_inside_it(q in "[a-z_:{}()\\[\\]=~!\"',+*/^<>.0-9 @#%`-]{0,30}") {
            if let Err(ParseError::Syntax { pos, .. }) = parse(&q) {
                proptest::prop_assert!(pos >= 1 && pos <= q.chars().count() + 1, "{q:?}: {pos}");
            }
        }
    }

    #[test]
    fn input_series_take_equality_matchers_and_a_name() {
        let l = parse_series(r#"vllm:x{model_name="m", instance="a"}"#).unwrap();
        assert_eq!(l.get("__name__").map(String::as_str), Some("vllm:x"));
        assert_eq!(l.get("instance").map(String::as_str), Some("a"));
        assert!(matches!(parse_series(r#"x{a=~"b"}"#), Err(SeriesError::NotEquality { .. })));
        assert!(matches!(parse_series(r#"{a="b"}"#), Err(SeriesError::NoName { .. })));
        assert!(parse_series(r#"{__name__="x", a="b"}"#).is_ok());
        let e = parse_series("x{").unwrap_err().to_string();
        assert!(e.starts_with("series \"x{\": parse error at character"), "{e}");
    }

    #[test]
    fn string_escapes_follow_go() {
        let Expr::VectorSelector(vs) = p(r#"x{a="q\"u\\o\ntē\x41\u00e9"}"#) else { panic!() };
        assert_eq!(vs.matchers.matchers[0].value, "q\"u\\o\ntēAé");
        let Expr::VectorSelector(vs) = p(r#"x{a=`raw\n`}"#) else { panic!() };
        assert_eq!(vs.matchers.matchers[0].value, "raw\\n");
    }

    #[test]
    fn regex_matchers_are_fully_anchored() {
        let Expr::VectorSelector(vs) = p(r#"x{model=~"Llama-3\\.1"}"#) else { panic!() };
        let m = &vs.matchers.matchers[0];
        assert!(m.is_match("Llama-3.1"));
        assert!(!m.is_match("Llama-3.1-8B"));
        assert!(!m.is_match("xLlama-3.1"));
    }
}
