//! Label matchers from `--selector`, parsed and written back out as PromQL.
//!
//! User text is never pasted into a query: it is parsed into [`Matcher`]s and re-escaped, so a value
//! holding quotes, backslashes or newlines cannot end the string early and change what is selected.

use std::fmt;

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
    /// or backticks, with Go-style escapes inside double and single quotes.
    pub fn parse(input: &str) -> Result<Selector, SelectorError> {
        let mut p = Parser { input, chars: input.char_indices().collect(), pos: 0 };
        p.parse()
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
        Selector {
            matchers: self.matchers.iter().filter(|m| !labels.contains(&m.name)).cloned().collect(),
        }
    }

    /// A copy with only the matchers on the given labels.
    pub fn only(&self, labels: &[String]) -> Selector {
        Selector {
            matchers: self.matchers.iter().filter(|m| labels.contains(&m.name)).cloned().collect(),
        }
    }

    /// Full series selector: `metric{matchers}` (or `metric` alone).
    pub fn series(&self, metric: &str, extra: &[Matcher]) -> String {
        let all: Vec<String> =
            self.matchers.iter().chain(extra.iter()).map(|m| m.to_string()).collect();
        if all.is_empty() {
            metric.to_string()
        } else {
            format!("{metric}{{{}}}", all.join(","))
        }
    }
}

/// Escape a label value for a double-quoted PromQL string.
pub fn escape_label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Escape RE2 metacharacters so a literal (a model name like `Llama-3.1`) can sit inside `=~"..."`.
pub fn escape_regex_literal(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 4);
    for c in v.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

struct Parser<'a> {
    input: &'a str,
    chars: Vec<(usize, char)>,
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, problem: impl Into<String>) -> SelectorError {
        SelectorError { input: self.input.to_string(), column: self.pos + 1, problem: problem.into() }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).map(|&(_, c)| c)
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(c) if c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn parse(&mut self) -> Result<Selector, SelectorError> {
        self.skip_ws();
        let braced = self.peek() == Some('{');
        if braced {
            self.pos += 1;
        }
        let mut matchers = Vec::new();
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
            matchers.push(self.matcher()?);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                None | Some('}') => {}
                Some(c) => return Err(self.err(format!("expected ',' between matchers, found {c:?}"))),
            }
        }
        Ok(Selector { matchers })
    }

    fn matcher(&mut self) -> Result<Matcher, SelectorError> {
        let start = self.pos;
        match self.peek() {
            Some(c) if is_name_start(c) => {}
            Some(c) => return Err(self.err(format!("expected a label name, found {c:?}"))),
            None => return Err(self.err("expected a label name")),
        }
        while matches!(self.peek(), Some(c) if is_name_char(c)) {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos].iter().map(|&(_, c)| c).collect();
        self.skip_ws();
        let op = match (self.peek(), self.chars.get(self.pos + 1).map(|&(_, c)| c)) {
            (Some('='), Some('~')) => {
                self.pos += 2;
                MatchOp::Re
            }
            (Some('!'), Some('~')) => {
                self.pos += 2;
                MatchOp::Nre
            }
            (Some('!'), Some('=')) => {
                self.pos += 2;
                MatchOp::Ne
            }
            (Some('='), _) => {
                self.pos += 1;
                MatchOp::Eq
            }
            _ => return Err(self.err(format!("expected =, !=, =~ or !~ after label {name}"))),
        };
        self.skip_ws();
        let value = self.string()?;
        Ok(Matcher { name, op, value })
    }

    fn string(&mut self) -> Result<String, SelectorError> {
        let quote = match self.peek() {
            Some(q @ ('"' | '\'' | '`')) => q,
            _ => return Err(self.err("expected a quoted value")),
        };
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(self.err("unterminated quoted value"));
            };
            self.pos += 1;
            if c == quote {
                return Ok(out);
            }
            if c == '\\' && quote != '`' {
                let Some(e) = self.peek() else {
                    return Err(self.err("unterminated escape"));
                };
                self.pos += 1;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '\\' | '"' | '\'' => out.push(e),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    // \uXXXX and \UXXXXXXXX, as PromQL (Go) reads them and as escape_label_value
                    // writes control characters.
                    'u' | 'U' => {
                        let len = if e == 'u' { 4 } else { 8 };
                        let hex: String = (0..len).filter_map(|i| self.chars.get(self.pos + i).map(|(_, c)| *c)).collect();
                        let ch = (hex.len() == len && hex.chars().all(|c| c.is_ascii_hexdigit()))
                            .then(|| u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32))
                            .flatten();
                        match ch {
                            Some(ch) => {
                                out.push(ch);
                                self.pos += len;
                            }
                            None => return Err(self.err(format!("\\{e} must be followed by {len} hex digits of a valid character"))),
                        }
                    }
                    other => return Err(self.err(format!("unknown escape \\{other}"))),
                }
            } else {
                out.push(c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn regex_literals_escape_metacharacters() {
        assert_eq!(escape_regex_literal("Llama-3.1 (8B)"), r"Llama-3\.1 \(8B\)");
    }

    #[test]
    fn without_drops_matchers_on_named_labels() {
        let s = Selector::parse(r#"model_name="a",job="vllm""#).unwrap();
        assert_eq!(s.without(&["model_name".into()]).to_promql(), "job=\"vllm\"");
        assert_eq!(s.only(&["model_name".into()]).to_promql(), "model_name=\"a\"");
    }
}
