//! JUnit XML, the test-report format every CI system reads (GitLab, Jenkins, GitHub test-report
//! actions, Buildkite, CircleCI), so a post-deploy check shows up in the CI's test view.
//!
//! The mapping: one `<testsuite>` per rule, one `<testcase>` per rule and scope (`classname` is the
//! rule id, `name` the scope). A finding at or above `--fail-on` is a `<failure>` holding the
//! evidence, the steps and the PromQL; a rule that could not be evaluated is `<skipped>` with the
//! reason, never a pass; a healthy pair passes, and so does a finding below the bar, with what it
//! found in `<system-out>` so it is not lost. Rules that matched but were explained better by
//! another rule (listed as "also consistent") are test cases of their own, failing at their own
//! severity. The shape follows the JUnit schema used by Jenkins and Surefire: `tests`, `failures`,
//! `errors`, `skipped` counts on every suite and on the root, `time` in seconds.
//!
//! Everything from outside is escaped, and characters XML 1.0 cannot carry at all (most control
//! characters) are replaced, so the document always parses.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{describe_range, describe_source, one_line, query_timing, EvidenceText, RenderOptions, ScopeStyle};
use crate::report::{Report, Scope, Severity};

/// What happened to one rule for one scope.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Passed,
    /// Matched; `fails` when at or above the bar. `detail` is the body text.
    Matched { severity: Severity, title: String, detail: String, fails: bool },
    Skipped { reason: String },
}

pub fn render(report: &Report, opts: &RenderOptions) -> String {
    let scopes = ScopeStyle::for_report(report);
    let fails = |s: Severity| opts.fail_on.is_some_and(|bar| s >= bar);

    // rule -> scope -> outcome. Matched beats skipped beats passed if a pair appears twice.
    let mut cases: BTreeMap<String, BTreeMap<String, Outcome>> = BTreeMap::new();
    let mut put = |rule: &str, scope: &Scope, o: Outcome| {
        let slot = cases.entry(one_line(rule)).or_default().entry(scopes.format(scope));
        let rank = |o: &Outcome| match o {
            Outcome::Matched { .. } => 2,
            Outcome::Skipped { .. } => 1,
            Outcome::Passed => 0,
        };
        match slot {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(o);
            }
            std::collections::btree_map::Entry::Occupied(mut e) => {
                if rank(&o) > rank(e.get()) {
                    e.insert(o);
                }
            }
        }
    };
    for c in &report.healthy {
        put(&c.rule, &c.scope, Outcome::Passed);
    }
    for n in &report.not_evaluated {
        put(&n.rule, &n.scope, Outcome::Skipped { reason: one_line(&n.reason) });
    }
    // Rules the configuration switched off: skipped for every scope, and said why.
    for rule in &report.disabled {
        put(rule, &Scope::new(), Outcome::Skipped { reason: "disabled in the configuration".to_string() });
    }
    for f in &report.findings {
        let mut detail = String::new();
        if !f.summary.trim().is_empty() {
            let _ = writeln!(detail, "{}\n", one_line(&f.summary));
        }
        for e in &f.evidence {
            let t = EvidenceText::new(e);
            let _ = write!(detail, "{}: {} (baseline {}", t.title, t.value, t.baseline);
            if let Some(c) = &t.change {
                let _ = write!(detail, ", {c}");
            }
            let _ = write!(detail, ")");
            if !t.condition.is_empty() {
                let _ = write!(detail, "; condition {} {}", t.condition, if t.held { "held" } else { "did not hold" });
            }
            if let Some(c) = &t.confidence {
                let _ = write!(detail, "; {c}");
            }
            detail.push('\n');
        }
        if !f.steps.is_empty() {
            detail.push_str("\nNext steps:\n");
            for (i, s) in f.steps.iter().enumerate() {
                let _ = writeln!(detail, "{}. {}", i + 1, one_line(s));
            }
        }
        let queries: Vec<_> = f.evidence.iter().filter(|e| !e.query.trim().is_empty()).collect();
        if !queries.is_empty() {
            let _ = writeln!(detail, "\nPromQL {}:", query_timing(report));
            for e in queries {
                let _ = writeln!(detail, "{}: {}", one_line(&e.signal), one_line(&e.query));
            }
        }
        put(
            &f.rule,
            &f.scope,
            Outcome::Matched { severity: f.severity, title: one_line(&f.title), detail: detail.clone(), fails: fails(f.severity) },
        );
        for a in &f.also_consistent {
            let detail = format!(
                "Also matched; explained better by {} ({}) on the same scope, whose failure or report holds the evidence.\n",
                one_line(&f.rule),
                f.severity
            );
            put(&a.rule, &f.scope, Outcome::Matched { severity: a.severity, title: one_line(&a.title), detail, fails: fails(a.severity) });
        }
    }

    let count = |cases: &BTreeMap<String, Outcome>| {
        let failures = cases.values().filter(|o| matches!(o, Outcome::Matched { fails: true, .. })).count();
        let skipped = cases.values().filter(|o| matches!(o, Outcome::Skipped { .. })).count();
        (cases.len(), failures, skipped)
    };
    let (mut tests, failures, skipped) = cases.values().map(count).fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    // Core runbook checks that could not be judged make the run no pass: one erroring case says so.
    let core = super::core_sentence(report);
    let errors = usize::from(core.is_some());
    tests += errors;

    let timestamp = report.window.end.format("%Y-%m-%dT%H:%M:%S").to_string();
    let (kind, url, selector) = describe_source(report);
    let bar = opts.fail_on.map_or("never".to_string(), |s| s.to_string());
    let mut properties = vec![
        ("window", describe_range(&report.window)),
        ("baseline", describe_range(&report.baseline)),
        ("source", format!("{kind} {url}")),
        ("fail_on", bar.clone()),
    ];
    if let Some(sel) = selector {
        properties.push(("selector", sel));
    }

    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"vllm-diag\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"0\">"
    );
    if let Some(sentence) = &core {
        let _ = writeln!(
            out,
            "  <testsuite name=\"coverage\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\" timestamp=\"{timestamp}\">"
        );
        let _ = writeln!(out, "    <testcase name=\"core runbook checks\" classname=\"coverage\" time=\"0\">");
        let _ = writeln!(out, "      <error message=\"{}\" type=\"not-evaluated\"/>", attr(sentence));
        out.push_str("    </testcase>\n  </testsuite>\n");
    }
    for (rule, by_scope) in &cases {
        let (tests, failures, skipped) = count(by_scope);
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"0\" timestamp=\"{timestamp}\">",
            attr(rule)
        );
        out.push_str("    <properties>\n");
        for (name, value) in &properties {
            let _ = writeln!(out, "      <property name=\"{name}\" value=\"{}\"/>", attr(value));
        }
        out.push_str("    </properties>\n");
        for (scope, outcome) in by_scope {
            let open = format!("    <testcase name=\"{}\" classname=\"{}\" time=\"0\"", attr(scope), attr(rule));
            match outcome {
                Outcome::Passed => {
                    let _ = writeln!(out, "{open}/>");
                }
                Outcome::Skipped { reason } => {
                    let _ = writeln!(out, "{open}>");
                    let _ = writeln!(out, "      <skipped message=\"{}\"/>", attr(&format!("not evaluated: {reason}")));
                    out.push_str("    </testcase>\n");
                }
                Outcome::Matched { severity, title, detail, fails: true } => {
                    let _ = writeln!(out, "{open}>");
                    let _ = writeln!(
                        out,
                        "      <failure message=\"{}\" type=\"{severity}\">{}</failure>",
                        attr(&format!("{}: {title}", severity.as_str().to_uppercase())),
                        text(detail)
                    );
                    out.push_str("    </testcase>\n");
                }
                Outcome::Matched { severity, title, detail, fails: false } => {
                    let _ = writeln!(out, "{open}>");
                    let _ = writeln!(
                        out,
                        "      <system-out>{}</system-out>",
                        text(&format!("Matched at {severity} severity, below --fail-on {bar}: {title}\n\n{detail}"))
                    );
                    out.push_str("    </testcase>\n");
                }
            }
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// An attribute value: markup characters, quotes and line breaks as character references (a raw
/// newline in an attribute would be normalised to a space by every parser).
fn attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            c => out.push(xml_char(c)),
        }
    }
    out
}

/// Element text.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#13;"),
            '\n' | '\t' => out.push(c),
            c => out.push(xml_char(c)),
        }
    }
    out
}

/// Characters XML 1.0 cannot hold even as references become U+FFFD.
fn xml_char(c: char) -> char {
    match c {
        '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}' => c,
        _ => '\u{FFFD}',
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;

    fn warning() -> RenderOptions {
        RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() }
    }

    #[test]
    fn junit_snapshot_of_the_sample_report() {
        insta::assert_snapshot!(render(&sample_report(), &warning()));
    }

    #[test]
    fn junit_snapshot_of_a_clean_report() {
        insta::assert_snapshot!(render(&clean_report(), &warning()));
    }

    #[test]
    fn junit_snapshot_when_nothing_was_evaluated() {
        insta::assert_snapshot!(render(&nothing_evaluated_report(), &warning()));
    }

    /// (suite, case) -> "failure" | "skipped" | "passed" | "system-out", from the parsed document.
    fn outcomes(xml: &str) -> BTreeMap<(String, String), String> {
        let doc = roxmltree::Document::parse(xml).expect("well-formed XML");
        let root = doc.root_element();
        assert_eq!(root.tag_name().name(), "testsuites");
        let mut out = BTreeMap::new();
        for suite in root.children().filter(|n| n.is_element()) {
            assert_eq!(suite.tag_name().name(), "testsuite");
            for case in suite.children().filter(|n| n.has_tag_name("testcase")) {
                let kind = case.children().find(|n| n.is_element()).map_or("passed".to_string(), |n| n.tag_name().name().to_string());
                out.insert((suite.attribute("name").unwrap().to_string(), case.attribute("name").unwrap().to_string()), kind);
            }
        }
        out
    }

    #[test]
    fn rules_disabled_in_the_configuration_are_skipped_and_missing_core_checks_error() {
        let mut r = clean_report();
        r.disabled = vec!["gpu-throttling".to_string()];
        r.coverage.core_not_evaluated = vec!["slow-decode".to_string()];
        let xml = render(&r, &warning());
        let got = outcomes(&xml);
        let disabled: Vec<_> = got.iter().filter(|((suite, _), _)| suite == "gpu-throttling").collect();
        assert_eq!(disabled.len(), 1, "{got:?}");
        assert_eq!(disabled[0].1, "skipped");
        assert!(xml.contains("disabled in the configuration"), "{xml}");
        assert_eq!(got[&("coverage".to_string(), "core runbook checks".to_string())], "error");
    }

    #[test]
    fn findings_at_or_above_the_bar_fail_and_not_evaluated_pairs_are_skipped() {
        let got = outcomes(&render(&sample_report(), &warning()));
        let key = |s: &str, c: &str| (s.to_string(), c.to_string());
        assert_eq!(got[&key("kv-cache-exhausted", "llama-3.1-70b-instruct")], "failure");
        assert_eq!(got[&key("ttft-regression", "qwen2.5-coder-32b")], "failure");
        assert_eq!(got[&key("kv-cache-exhausted", "qwen2.5-coder-32b")], "skipped");
        assert_eq!(got[&key("error-rate", "llama-3.1-70b-instruct")], "passed");
        // also consistent: queue-backlog (warning) fails, ttft-regression on llama (info) does not.
        assert_eq!(got[&key("queue-backlog", "llama-3.1-70b-instruct")], "failure");
        assert_eq!(got[&key("ttft-regression", "llama-3.1-70b-instruct")], "system-out");

        let critical = outcomes(&render(&sample_report(), &RenderOptions { fail_on: Some(Severity::Critical), ..RenderOptions::default() }));
        assert_eq!(critical[&key("ttft-regression", "qwen2.5-coder-32b")], "system-out");
        assert_eq!(critical[&key("kv-cache-exhausted", "llama-3.1-70b-instruct")], "failure");
    }

    #[test]
    fn counts_on_every_suite_and_the_root_agree_with_the_cases() {
        let xml = render(&sample_report(), &warning());
        let doc = roxmltree::Document::parse(&xml).unwrap();
        let root = doc.root_element();
        let num = |n: roxmltree::Node, a: &str| n.attribute(a).unwrap_or_else(|| panic!("{a} missing")).parse::<usize>().unwrap();
        let (mut tests, mut failures, mut skipped) = (0, 0, 0);
        for suite in root.children().filter(|n| n.is_element()) {
            let cases: Vec<_> = suite.children().filter(|n| n.has_tag_name("testcase")).collect();
            let f = cases.iter().filter(|c| c.children().any(|n| n.has_tag_name("failure"))).count();
            let s = cases.iter().filter(|c| c.children().any(|n| n.has_tag_name("skipped"))).count();
            assert_eq!((num(suite, "tests"), num(suite, "failures"), num(suite, "skipped"), num(suite, "errors")), (cases.len(), f, s, 0));
            tests += cases.len();
            failures += f;
            skipped += s;
        }
        assert_eq!((num(root, "tests"), num(root, "failures"), num(root, "skipped")), (tests, failures, skipped));
        assert_eq!((tests, failures, skipped), (11, 3, 2));
    }

    #[test]
    fn hostile_text_is_escaped_and_the_document_still_parses() {
        let mut r = sample_report();
        r.findings[0].scope.insert("model_name".to_string(), "a\"b'<c>&d\u{1}\u{FFFF}]]>".to_string());
        r.findings[0].summary = "</failure><injected/> & \r\n".to_string();
        r.not_evaluated[0].reason = "line1\nline2 \"quoted\"".to_string();
        let xml = render(&r, &warning());
        let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
        assert!(doc.descendants().all(|n| !n.has_tag_name("injected")));
        let failure = doc.descendants().find(|n| n.has_tag_name("failure")).unwrap();
        assert!(failure.text().unwrap_or_default().contains("</failure><injected/> &"));
        let case = failure.parent().unwrap();
        assert_eq!(case.attribute("name"), Some("a\"b'<c>&d\u{FFFD}\u{FFFD}]]>"));
        let messages: Vec<&str> = doc.descendants().filter(|n| n.has_tag_name("skipped")).filter_map(|n| n.attribute("message")).collect();
        assert!(messages.iter().any(|m| m.contains("line1 line2 \"quoted\"")), "{messages:?}");
    }

    #[test]
    fn with_fail_on_never_nothing_fails_but_findings_are_kept() {
        let xml = render(&sample_report(), &RenderOptions::default());
        let got = outcomes(&xml);
        assert!(!got.values().any(|k| k == "failure"));
        assert!(xml.contains("below --fail-on never"));
    }
}
