//! What a report says about the whole rule pack (how many rules, which were healthy), left out of
//! the snapshots and comparisons that are about one incident: adding a rule to the pack changes
//! those counts and lists on every report, and no snapshot, README block or recording should have
//! to change with it (tests/cli.rs adds a throwaway rule to prove it).

/// The filters, for `insta::with_settings!` (with the port filter the snapshots already use).
pub fn filters() -> Vec<(&'static str, &'static str)> {
    vec![
        (r"127\.0\.0\.1:\d+", "127.0.0.1:[port]"),
        (r"\b\d+ of \d+ rules\b", "[evaluated] of [pack] rules"),
        (r"\b\d+ healthy\b", "[n] healthy"),
        (r"\b\d+ rule/scope pairs \([^)]*\)", "[n] rule/scope pairs ([the pack's healthy rules])"),
        (r"\b\d+ rule/scope pairs\b", "[n] rule/scope pairs"),
        // JSON: the healthy list, and the counts of rules.
        (r#"(?s)"healthy": \[.*?\n  \]"#, r#""healthy": "[the pack's healthy rules]""#),
        (r#""(rules_evaluated|rules|evaluated)": \d+"#, r#""$1": "[n]""#),
        // JUnit: a rule healthy everywhere is a suite of passing testcases, and every healthy
        // rule/scope pair a passing testcase.
        (r#"(?s) *<testsuite name="[^"]*" tests="\d+" failures="0" errors="0" skipped="0"[^>]*>.*?</testsuite>\n"#, ""),
        (r#"(?m)^ *<testcase [^>]*/>\n"#, ""),
        (r#"tests="\d+""#, r#"tests="[n]""#),
    ]
}

/// `text` with the filters applied, for comparisons outside insta.
#[allow(dead_code)]
pub fn normalise(text: &str) -> String {
    filters().into_iter().fold(text.to_string(), |t, (re, with)| regex::Regex::new(re).unwrap().replace_all(&t, with).into_owned())
}
