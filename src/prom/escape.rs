//! String escaping and unescaping, for PromQL strings and for the exposition formats.
//!
//! The two grammars differ and each has one writer and one reader here. PromQL strings (in queries
//! and `--selector`) are read by `promql-parser`, so a literal means in `--selector` exactly what it
//! means in a query, `\x41` included, and are written double-quoted with every character that could
//! end the string early escaped. Exposition label values and HELP texts (Prometheus text format
//! 0.0.4 and OpenMetrics) know only `\\`, `\"` and `\n`; a reader keeps any other backslash as
//! written, as Prometheus' own parsers do.

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

/// Read a PromQL string literal, quotes included (`"a\x41"`, `'b'`, `` `c\d` ``), as PromQL reads
/// it (Go's escapes in double and single quotes, none in backticks). The error is promql-parser's.
pub fn unquote_promql(literal: &str) -> Result<String, String> {
    if let Some(problem) = escape_before_multibyte(literal) {
        return Err(problem);
    }
    promql_parser::util::unquote_string(literal)
}

/// A backslash before a character of more than one byte in a quoted (not backtick) literal: never
/// a valid PromQL escape, and promql-parser 0.11 would slice that character in two and panic, so
/// such text is refused before it reaches the parser.
pub fn escape_before_multibyte(literal: &str) -> Option<String> {
    if literal.starts_with('`') {
        return None;
    }
    let mut chars = literal.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(n) if !n.is_ascii() => return Some(format!("unknown escape sequence \\{n}")),
                _ => {}
            }
        }
    }
    None
}

/// Escape a label value for the exposition formats: `\\`, `\"` and `\n`.
pub fn escape_exposition_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 2);
    escape_exposition_value_into(&mut out, v);
    out
}

/// [`escape_exposition_value`], appending to `out` (writers of large files avoid a String per value).
pub fn escape_exposition_value_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Read an exposition label value (the text between its quotes): `\\`, `\"` and `\n` are read, any
/// other backslash is kept as written.
pub fn unescape_exposition_value(v: &str) -> String {
    unescape_exposition(v, true)
}

/// Escape a HELP text: `\\` and `\n`, and in OpenMetrics `\"` as well (its HELP is an escaped string).
pub fn escape_help(v: &str, openmetrics: bool) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if openmetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

/// Read a HELP text: `\\` and `\n`, and in OpenMetrics `\"`; any other backslash is kept as written.
pub fn unescape_help(v: &str, openmetrics: bool) -> String {
    unescape_exposition(v, openmetrics)
}

fn unescape_exposition(s: &str, quote: bool) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some('"') if quote => out.push('"'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_promql_string_is_read_as_promql_reads_it() {
        assert_eq!(unquote_promql(r#""\x41\u00e9\n""#).unwrap(), "Aé\n");
        assert_eq!(unquote_promql(r"'it\'s'").unwrap(), "it's");
        assert_eq!(unquote_promql(r"`raw\n`").unwrap(), "raw\\n");
        assert!(unquote_promql(r#""\q""#).is_err());
        assert!(unquote_promql(r#""open"#).is_err());
    }

    #[test]
    fn escaped_label_values_read_back_as_promql() {
        for v in ["plain", "q\"uote", "back\\slash", "new\nline", "tab\tcr\r", "bell\u{7}", "x\"} or vector(1) #", "é😀"] {
            let lit = format!("\"{}\"", escape_label_value(v));
            assert_eq!(unquote_promql(&lit).unwrap(), v, "{lit}");
        }
    }

    #[test]
    fn regex_literals_escape_metacharacters() {
        assert_eq!(escape_regex_literal("Llama-3.1 (8B)"), r"Llama-3\.1 \(8B\)");
        let re = regex::Regex::new(&format!("^(?:{})$", escape_regex_literal("a.b*[c]"))).unwrap();
        assert!(re.is_match("a.b*[c]") && !re.is_match("aXbb[c]"));
    }

    #[test]
    fn exposition_values_round_trip_and_keep_unknown_escapes() {
        for v in ["plain", "a\"b\\c\nd", "\\", "tail\\", "é"] {
            assert_eq!(unescape_exposition_value(&escape_exposition_value(v)), v);
        }
        assert_eq!(escape_exposition_value("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(unescape_exposition_value(r#"a\tb\"c"#), "a\\tb\"c");
    }

    #[test]
    fn help_text_escapes_quotes_only_in_openmetrics() {
        assert_eq!(escape_help("say \"hi\"\\\n", false), "say \"hi\"\\\\\\n");
        assert_eq!(escape_help("say \"hi\"", true), "say \\\"hi\\\"");
        assert_eq!(unescape_help(r#"a\"b\nc\\d\x"#, false), "a\\\"b\nc\\d\\x");
        assert_eq!(unescape_help(r#"a\"b"#, true), "a\"b");
        for v in ["a\"b\\c\nd", "\\"] {
            assert_eq!(unescape_help(&escape_help(v, true), true), v);
            assert_eq!(unescape_help(&escape_help(v, false), false), v);
        }
    }
}
