//! Label matchers from `--selector`, parsed and written back out as PromQL.
//!
//! User text is never pasted into a query: it is parsed into [`Matcher`]s and re-escaped, so a value
//! holding quotes, backslashes or newlines cannot end the string early and change what is selected.
//!
//! Reading is PromQL's own: each matcher is handed to `promql-parser`, so a string literal means here
//! exactly what it means in a query (`\x41`, `\u00e9`, raw backticks) and a regular expression that
//! PromQL would refuse is refused here, before any query runs. A small scanner around it splits the
//! list and finds where each matcher starts, so an error names the character it is about, which the
//! parser alone does not. Writing stays ours ([`Selector::to_promql`], [`Selector::series`]).

use std::fmt;

use super::escape::escape_label_value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatchOp {
    Eq,
    Ne,
    Re,
    Nre,
}

impl MatchOp {
    fn as_str(self) -> &'static str {
        match self {
            MatchOp::Eq => "=",
            MatchOp::Ne => "!=",
            MatchOp::Re => "=~",
            MatchOp::Nre => "!~",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
}

impl Matcher {
    pub fn eq(name: &str, value: &str) -> Matcher {
        Matcher { name: name.to_string(), op: MatchOp::Eq, value: value.to_string() }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}\"{}\"", self.name, self.op.as_str(), escape_label_value(&self.value))
    }
}

impl Matcher {
    /// The matcher ready to test label values (a regular expression compiled once).
    pub fn compile(&self) -> Result<CompiledMatcher, regex::Error> {
        let re = match self.op {
            MatchOp::Re | MatchOp::Nre => Some(regex::Regex::new(&format!("^(?:{})$", self.value))?),
            MatchOp::Eq | MatchOp::Ne => None,
        };
        Ok(CompiledMatcher { matcher: self.clone(), re })
    }
}

/// A matcher that tests label values as Prometheus does: a series without the label has it empty,
/// and a regular expression must match the whole value.
#[derive(Debug, Clone)]
pub struct CompiledMatcher {
    pub matcher: Matcher,
    re: Option<regex::Regex>,
}

impl CompiledMatcher {
    pub fn matches(&self, value: Option<&str>) -> bool {
        let v = value.unwrap_or("");
        match (self.matcher.op, &self.re) {
            (MatchOp::Eq, _) => v == self.matcher.value,
            (MatchOp::Ne, _) => v != self.matcher.value,
            (MatchOp::Re, Some(re)) => re.is_match(v),
            (MatchOp::Nre, Some(re)) => !re.is_match(v),
            (MatchOp::Re | MatchOp::Nre, None) => false,
        }
    }
}

/// vLLM production-stack's router (vllm-project/production-stack,
/// `src/vllm_router/services/metrics_service/__init__.py`) exports gauges under the engine's own
/// names, one series per engine it routes to, labelled `server` (the engine's URL) and without
/// `model_name`: read as engine series they would count each engine's requests twice, under a scope
/// of their own. Every selector of these names reads only series without `server` (`server=""`),
/// unless the matchers already say something of `server`. An engine relabelled with a `server`
/// label of its own loses these families (docs/hops.md).
pub const SHADOWED: [(&str, &str); 6] = [
    ("vllm:num_requests_running", "gauge"),
    ("vllm:num_requests_waiting", "gauge"),
    ("vllm:num_requests_swapped", "gauge"),
    ("vllm:gpu_prefix_cache_hit_rate", "gauge"),
    ("vllm:gpu_prefix_cache_hits_total", "gauge (a counter in the engine)"),
    ("vllm:gpu_prefix_cache_queries_total", "gauge (a counter in the engine)"),
];

/// Whether `metric` is one of [`SHADOWED`], in any spelling (`vllm_` for `vllm:`, a counter stored
/// without `_total`).
pub fn is_shadowed(metric: &str) -> bool {
    let norm = |n: &str| {
        let n = n.strip_prefix("vllm_").map_or_else(|| n.to_string(), |rest| format!("vllm:{rest}"));
        n.strip_suffix("_total").map_or(n.clone(), str::to_string)
    };
    let m = norm(metric);
    SHADOWED.iter().any(|(name, _)| norm(name) == m)
}

/// The label production-stack's router puts on the series it exports under engine names.
pub const SHADOW_LABEL: &str = "server";

/// A list of matchers, in the order given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub matchers: Vec<Matcher>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--selector {input:?}: {problem} at character {column}. Expected label matchers such as namespace=\"prod\",job=~\"vllm.*\"")]
pub struct SelectorError {
    pub input: String,
    pub column: usize,
    pub problem: String,
}

impl Selector {
    /// Parse `a="x", b!~"y.*"` (optionally wrapped in braces). Values may use double or single quotes
    /// or backticks, read as PromQL reads them (Go-style escapes inside double and single quotes);
    /// a regular expression must be one PromQL accepts.
    pub fn parse(input: &str) -> Result<Selector, SelectorError> {
        Scanner { input, chars: input.char_indices().collect(), pos: 0 }.parse()
    }

    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty()
    }

    /// The matchers joined by commas, ready to go inside `{...}`.
    pub fn to_promql(&self) -> String {
        self.matchers.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(",")
    }

    /// A copy without matchers on the given labels.
    pub fn without(&self, labels: &[String]) -> Selector {
        Selector { matchers: self.matchers.iter().filter(|m| !labels.contains(&m.name)).cloned().collect() }
    }

    /// A copy with only the matchers on the given labels.
    pub fn only(&self, labels: &[String]) -> Selector {
        Selector { matchers: self.matchers.iter().filter(|m| labels.contains(&m.name)).cloned().collect() }
    }

    /// Full series selector: `metric{matchers}` (or `metric` alone).
    pub fn series(&self, metric: &str, extra: &[Matcher]) -> String {
        // The names another exporter reuses for series of its own (see SHADOWED) read without them.
        let unshadow = is_shadowed(metric) && !self.matchers.iter().chain(extra.iter()).any(|m| m.name == SHADOW_LABEL);
        let all: Vec<String> =
            self.matchers.iter().chain(extra.iter()).map(|m| m.to_string()).chain(unshadow.then(|| Matcher::eq(SHADOW_LABEL, "").to_string())).collect();
        if all.is_empty() {
            metric.to_string()
        } else {
            format!("{metric}{{{}}}", all.join(","))
        }
    }
}

/// Where one matcher sits in the input, in characters: its start, and its quoted value's start and end.
struct Span {
    name: String,
    op: MatchOp,
    start: usize,
    literal: usize,
    end: usize,
}

/// Splits the list into matchers and finds each one's extent; reading them is promql-parser's.
struct Scanner<'a> {
    input: &'a str,
    chars: Vec<(usize, char)>,
    pos: usize,
}

impl Scanner<'_> {
    fn err(&self, problem: impl Into<String>) -> SelectorError {
        self.err_at(self.pos, problem)
    }

    fn err_at(&self, pos: usize, problem: impl Into<String>) -> SelectorError {
        SelectorError { input: self.input.to_string(), column: pos + 1, problem: problem.into() }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).map(|&(_, c)| c)
    }

    /// The input from character `from` to character `to`.
    fn text(&self, from: usize, to: usize) -> &str {
        let byte = |i: usize| self.chars.get(i).map_or(self.input.len(), |&(b, _)| b);
        &self.input[byte(from)..byte(to)]
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(c) if c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn parse(&mut self) -> Result<Selector, SelectorError> {
        let spans = self.scan()?;
        let matchers = spans.iter().map(|s| self.read(s)).collect::<Result<Vec<_>, _>>()?;
        Ok(Selector { matchers })
    }

    fn scan(&mut self) -> Result<Vec<Span>, SelectorError> {
        self.skip_ws();
        let braced = self.peek() == Some('{');
        if braced {
            self.pos += 1;
        }
        let mut spans = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None if !braced => break,
                None => return Err(self.err("missing closing '}'")),
                Some('}') if braced => {
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek().is_some() {
                        return Err(self.err("unexpected text after '}'"));
                    }
                    break;
                }
                _ => {}
            }
            spans.push(self.matcher()?);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                None | Some('}') => {}
                Some(c) => return Err(self.err(format!("expected ',' between matchers, found {c:?}"))),
            }
        }
        Ok(spans)
    }

    fn matcher(&mut self) -> Result<Span, SelectorError> {
        let start = self.pos;
        let rest = self.text(start, self.chars.len());
        let len = super::label_name_len(rest);
        if len == 0 {
            return Err(match self.peek() {
                Some(c) => self.err(format!("expected a label name, found {c:?}")),
                None => self.err("expected a label name"),
            });
        }
        self.pos += len; // ASCII: one character per byte
        let name = self.text(start, self.pos).to_string();
        self.skip_ws();
        let op = match (self.peek(), self.chars.get(self.pos + 1).map(|&(_, c)| c)) {
            (Some('='), Some('~')) => MatchOp::Re,
            (Some('!'), Some('~')) => MatchOp::Nre,
            (Some('!'), Some('=')) => MatchOp::Ne,
            (Some('='), _) => MatchOp::Eq,
            _ => return Err(self.err(format!("expected =, !=, =~ or !~ after label {name}"))),
        };
        self.pos += op.as_str().len();
        self.skip_ws();
        let literal = self.pos;
        self.literal()?;
        Ok(Span { name, op, start, literal, end: self.pos })
    }

    /// Step over a quoted value: to the matching quote, a backslash taking the next character along
    /// (except in backticks), as PromQL's lexer does.
    fn literal(&mut self) -> Result<(), SelectorError> {
        let quote = match self.peek() {
            Some(q @ ('"' | '\'' | '`')) => q,
            _ => return Err(self.err("expected a quoted value")),
        };
        self.pos += 1;
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err("unterminated quoted value"));
            };
            self.pos += 1;
            if c == quote {
                return Ok(());
            }
            if c == '\\' && quote != '`' {
                if self.peek().is_none() {
                    return Err(self.err("unterminated escape"));
                }
                self.pos += 1;
            }
        }
    }

    /// Read one matcher with promql-parser. It is parsed alone, beside a sentinel matcher that keeps
    /// PromQL's "at least one non-empty matcher" rule out of the way: the selector joins a metric
    /// name in every query, so `{}` and `job=~".*"` are fine here.
    fn read(&self, span: &Span) -> Result<Matcher, SelectorError> {
        let literal = self.text(span.literal, span.end);
        let expr = format!("{{{},_=\"x\"}}", self.text(span.start, span.end));
        if let Some(problem) = super::escape::escape_before_multibyte(literal) {
            return Err(self.err_at(span.literal, format!("{problem} in the quoted value")));
        }
        let parsed = match promql_parser::parser::parse(&expr) {
            Ok(promql_parser::parser::Expr::VectorSelector(vs)) => vs.matchers,
            Ok(_) => return Err(self.err_at(span.start, "PromQL does not read this as a label matcher")),
            // The value alone does not read as a PromQL string: point at it.
            Err(e) if super::escape::unquote_promql(literal).is_err() => {
                let problem = if literal.starts_with(['"', '\'']) && literal.contains('\n') {
                    "a line break inside a quoted value (write \\n, or use backticks)".to_string()
                } else if e.contains("escape") {
                    format!("{e} in the quoted value")
                } else {
                    format!("the quoted value is not a valid PromQL string ({e})")
                };
                return Err(self.err_at(span.literal, problem));
            }
            Err(e) if e.starts_with("illegal regex") => return Err(self.err_at(span.literal, "the value is not a valid regular expression")),
            Err(e) => return Err(self.err_at(span.start, format!("PromQL cannot read this matcher ({e})"))),
        };
        let read = match (parsed.or_matchers.is_empty(), parsed.matchers.as_slice()) {
            (true, [m, _sentinel]) => m,
            _ => return Err(self.err_at(span.start, "PromQL does not read this as one label matcher")),
        };
        use promql_parser::label::MatchOp as P;
        let op = match read.op {
            P::Equal => MatchOp::Eq,
            P::NotEqual => MatchOp::Ne,
            P::Re(_) => MatchOp::Re,
            P::NotRe(_) => MatchOp::Nre,
        };
        if read.name != span.name || op != span.op {
            return Err(self.err_at(span.start, "PromQL reads this matcher differently; write it as name=\"value\""));
        }
        if read.name == "__name__" {
            // Every query names its own metric; a second name makes it unparsable or empty.
            return Err(self.err_at(span.start, "the metric name (__name__) cannot be chosen here: these matchers join every query, each of which names its own metrics. Select by labels, e.g. namespace=\"prod\""));
        }
        Ok(Matcher { name: read.name.clone(), op, value: read.value.clone() })
    }
}

#[cfg(test)]
mod shadow_tests {
    use super::*;

    #[test]
    fn production_stack_router_names_read_only_series_without_server_in_every_spelling() {
        let sel = Selector::parse(r#"namespace="prod""#).unwrap();
        assert_eq!(sel.series("vllm:num_requests_running", &[]), r#"vllm:num_requests_running{namespace="prod",server=""}"#);
        assert_eq!(Selector::default().series("vllm_num_requests_waiting", &[]), r#"vllm_num_requests_waiting{server=""}"#);
        assert_eq!(Selector::default().series("vllm:gpu_prefix_cache_hits", &[]), r#"vllm:gpu_prefix_cache_hits{server=""}"#);
        // Other names, and a selector that names `server` itself, are left alone.
        assert_eq!(sel.series("vllm:kv_cache_usage_perc", &[]), r#"vllm:kv_cache_usage_perc{namespace="prod"}"#);
        assert_eq!(Selector::default().series("vllm_router_worker_health", &[]), "vllm_router_worker_health");
        let own = Selector::parse(r#"server="a""#).unwrap();
        assert_eq!(own.series("vllm:num_requests_running", &[]), r#"vllm:num_requests_running{server="a"}"#);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A backslash before a character of several bytes is refused with a reason; promql-parser
    /// would panic on it (a case proptest found in tests/fuzz_decode.rs).
    #[test]
    fn a_backslash_before_a_multibyte_character_is_an_error_not_a_panic() {
        for input in ["a=\"\\\u{65981}\"", "a='\\é'", "a=~\"x\\ü\""] {
            let e = Selector::parse(input).unwrap_err();
            assert!(e.problem.contains("unknown escape sequence"), "{input}: {e}");
        }
        // An escaped backslash before one is fine.
        assert_eq!(Selector::parse("a=\"\\\\é\"").unwrap().matchers[0].value, "\\é");
    }

    #[test]
    fn the_metric_name_cannot_be_a_selector_matcher() {
        // Prometheus refuses `vllm:kv_cache_usage_perc{__name__=~"vllm:.*"}` too: "metric name
        // must not be set twice".
        for input in [r#"__name__="foo""#, r#"job="x",__name__=~"vllm.*""#] {
            let e = Selector::parse(input).unwrap_err();
            assert!(e.problem.contains("__name__") && e.problem.contains("Select by labels"), "{input}: {e}");
        }
    }

    #[test]
    fn compiled_matchers_test_values_as_prometheus_does() {
        let m = |text: &str| Selector::parse(text).unwrap().matchers.remove(0).compile().unwrap();
        // A missing label is the empty string.
        assert!(m(r#"status!="5xx""#).matches(None));
        assert!(m(r#"status="""#).matches(None));
        assert!(!m(r#"status="5xx""#).matches(None));
        // Regular expressions are anchored at both ends.
        assert!(m(r#"status=~"5..""#).matches(Some("503")));
        assert!(!m(r#"status=~"5..""#).matches(Some("1503")));
        assert!(!m(r#"status=~"5""#).matches(Some("503")));
        assert!(m(r#"status!~"5..""#).matches(Some("200")));
        assert!(m(r#"reason=~"abort|error""#).matches(Some("error")));
        assert!(!m(r#"reason=~"abort|error""#).matches(Some("aborted")));
    }

    #[test]
    fn parses_and_reprints_matchers() {
        let s = Selector::parse(r#"namespace="prod", job=~"vllm.*",pod!="x",model_name!~'a'"#).unwrap();
        assert_eq!(s.to_promql(), r#"namespace="prod",job=~"vllm.*",pod!="x",model_name!~"a""#);
    }

    #[test]
    fn accepts_braces_and_empty_input() {
        assert_eq!(Selector::parse("{a=\"b\"}").unwrap().to_promql(), "a=\"b\"");
        assert!(Selector::parse("").unwrap().is_empty());
        assert!(Selector::parse("  {}  ").unwrap().is_empty());
    }

    #[test]
    fn hostile_values_stay_inside_their_string() {
        let s = Selector::parse(r#"a="x\"} or vector(1) # \\ \n""#).unwrap();
        assert_eq!(s.matchers[0].value, "x\"} or vector(1) # \\ \n");
        let q = s.series("up", &[]);
        assert_eq!(q, r#"up{a="x\"} or vector(1) # \\ \n"}"#);
        // The printed form parses back to the same value.
        let back = Selector::parse(&s.to_promql()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn errors_name_the_position_and_what_was_expected() {
        let e = Selector::parse(r#"namespace="prod" job="x""#).unwrap_err();
        assert_eq!(e.column, 18);
        assert!(e.to_string().contains("expected ','"), "{e}");
        let e = Selector::parse("namespace=prod").unwrap_err();
        assert!(e.to_string().contains("quoted value"), "{e}");
        let e = Selector::parse("9x=\"a\"").unwrap_err();
        assert!(e.to_string().contains("label name"), "{e}");
        assert!(Selector::parse("a=\"unterminated").is_err());
        assert!(Selector::parse("{a=\"b\"").is_err());
    }

    #[test]
    fn string_literals_are_read_as_in_a_query() {
        let s = Selector::parse(r#"a="\x41", b='\u00e9\101', c=`raw\n`"#).unwrap();
        let values: Vec<&str> = s.matchers.iter().map(|m| m.value.as_str()).collect();
        assert_eq!(values, ["A", "éA", "raw\\n"]);
        assert_eq!(s.to_promql(), r#"a="A",b="éA",c="raw\\n""#);
    }

    #[test]
    fn a_bad_escape_or_regex_is_refused_at_its_value() {
        let e = Selector::parse(r#"job="vllm", a="x\q""#).unwrap_err();
        assert_eq!(e.column, 15, "{e}");
        assert!(e.to_string().contains("unknown escape sequence 'q'"), "{e}");
        let e = Selector::parse(r#"a=~"((""#).unwrap_err();
        assert_eq!(e.column, 4, "{e}");
        assert!(e.to_string().contains("regular expression"), "{e}");
        let e = Selector::parse("a=\"b\nc\"").unwrap_err();
        assert!(e.to_string().contains("line break"), "{e}");
        assert!(Selector::parse("a=`b\nc`").is_ok());
    }

    #[test]
    fn positions_count_characters_not_bytes() {
        let e = Selector::parse(r#"a="é" b="x""#).unwrap_err();
        assert_eq!(e.column, 7, "{e}");
    }

    #[test]
    fn selectors_promql_would_call_empty_are_fine_as_they_join_a_metric_name() {
        for text in [r#"a=~".*""#, r#"a="""#, r#"a!~"x""#, r#"on="x",by="y",offset="z""#] {
            assert!(Selector::parse(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn duplicate_labels_are_kept_as_promql_keeps_them() {
        let s = Selector::parse(r#"a="1",a!="2""#).unwrap();
        assert_eq!(s.matchers.len(), 2);
    }

    #[test]
    fn what_the_list_grammar_does_not_allow_is_refused_with_its_place() {
        // `or` between matchers, quoted or non-ASCII names, and empty items all stop at the scanner.
        let e = Selector::parse(r#"a="x" or b="y""#).unwrap_err();
        assert_eq!(e.column, 7, "{e}");
        assert!(Selector::parse(r#""a"="b""#).unwrap_err().to_string().contains("label name"));
        assert!(Selector::parse(r#"é="b""#).unwrap_err().to_string().contains("label name"));
        assert!(Selector::parse(r#"a="b",,c="d""#).is_err());
        assert!(Selector::parse(r#"{a="b"} or vector(1)"#).unwrap_err().to_string().contains("after '}'"));
    }

    #[test]
    fn without_drops_matchers_on_named_labels() {
        let s = Selector::parse(r#"model_name="a",job="vllm""#).unwrap();
        assert_eq!(s.without(&["model_name".into()]).to_promql(), "job=\"vllm\"");
        assert_eq!(s.only(&["model_name".into()]).to_promql(), "model_name=\"a\"");
    }
}
