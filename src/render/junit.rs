//! JUnit XML, the test-report format every CI system reads (GitLab, Jenkins, GitHub test-report
//! actions, Buildkite, CircleCI), so a post-deploy check shows up in the CI's test view.
//!
//! The mapping: one `<testsuite>` per rule, one `<testcase>` per rule and scope (`classname` is the
//! rule id, `name` the scope). A finding at or above `--fail-on` is a `<failure>` holding the
//! evidence, the steps and the PromQL; a rule that could not be evaluated is `<skipped>` with the
//! reason, never a pass; a healthy pair passes, and so does a finding below the bar, with what it
//! found in `<system-out>` so it is not lost. Rules that matched but were explained better by
//! another rule (the finding's "Also explains") are test cases of their own that pass, saying in
//! `<system-out>` which finding explains them: the failures count the findings `check` counts, one
//! per cause, never the same cause twice. The shape follows the JUnit schema used by Jenkins and Surefire: `tests`, `failures`,
//! `errors`, `skipped` counts on every suite and on the root, `time` in seconds.
//!
//! What concerns the whole run is repeated as properties on every suite (JUnit has no place above
//! a suite): the window, baseline, source, selector, metrics, fleet, the headline, each of the
//! data source's warnings, and the timeline (a `timeline` heading, an `event` property per listed
//! change, oldest first, and `events_not_listed` when the JSON holds more). Rules disabled in the
//! configuration are skipped test cases; core runbook checks that could not be evaluated are one
//! erroring case in a `coverage` suite.
//!
//! Everything from outside is escaped, and characters XML 1.0 cannot carry at all (most control
//! characters) are replaced, so the document always parses.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::view::{FindingView, ReportView};
use super::RenderOptions;
use crate::report::Severity;

/// What happened to one rule for one scope.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Passed,
    /// Matched; `fails` when at or above the bar. `detail` is the body text.
    Matched {
        severity: Severity,
        title: String,
        detail: String,
        fails: bool,
    },
    Skipped {
        reason: String,
    },
    /// A change no rule explains (what else moved); `fails` under `--fail-on unexplained` or `info`.
    Moved {
        line: String,
        fails: bool,
    },
}

impl Outcome {
    /// Matched beats skipped beats passed if a pair appears twice.
    fn rank(&self) -> u8 {
        match self {
            Outcome::Matched { .. } | Outcome::Moved { .. } => 2,
            Outcome::Skipped { .. } => 1,
            Outcome::Passed => 0,
        }
    }
}

/// rule -> scope -> outcome.
type Cases = BTreeMap<String, BTreeMap<String, Outcome>>;

/// The suite of the changes no rule explains.
const UNEXPLAINED_SUITE: &str = "what_else_moved";

pub fn render(view: &ReportView, _opts: &RenderOptions) -> String {
    let cases = cases(view);
    let count = |cases: &BTreeMap<String, Outcome>| {
        let failures = cases.values().filter(|o| matches!(o, Outcome::Matched { fails: true, .. } | Outcome::Moved { fails: true, .. })).count();
        let skipped = cases.values().filter(|o| matches!(o, Outcome::Skipped { .. })).count();
        (cases.len(), failures, skipped)
    };
    let (mut tests, failures, skipped) = cases.values().map(count).fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2));
    // Core runbook checks that could not be judged make the run no pass, and so does a run that
    // judged nothing at all (no core rule enabled, say): one erroring case says so.
    let no_verdict = view.core_missing.clone().or_else(|| view.nothing_evaluated.then(|| "Nothing could be evaluated: this run gives no verdict.".to_string()));
    let errors = usize::from(no_verdict.is_some());
    tests += errors;
    // The probe (--probe) is a test case of its own, failing as the run's decision has it.
    let probe_fails = view.probe_failed.is_some() && view.fail_on.is_some();
    tests += usize::from(!view.probe.is_empty());
    let failures = failures + usize::from(probe_fails);

    let timestamp = view.window_range.end.format("%Y-%m-%dT%H:%M:%S").to_string();
    let bar = crate::report::fail_on_name(view.fail_on, view.fail_on_unexplained);
    let properties = properties(view, &bar);

    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites name=\"vllm-diag\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"0\">");
    if let Some(sentence) = &no_verdict {
        let _ = writeln!(out, "  <testsuite name=\"coverage\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\" timestamp=\"{timestamp}\">");
        // Named for what is missing: core checks, or (scrape targets unread, nothing judged) coverage.
        let name = if sentence.starts_with("Core runbook") { "core runbook checks" } else { "what could not be seen" };
        let _ = writeln!(out, "    <testcase name=\"{name}\" classname=\"coverage\" time=\"0\">");
        let _ = writeln!(out, "      <error message=\"{}\" type=\"not-evaluated\"/>", attr(sentence));
        out.push_str("    </testcase>\n  </testsuite>\n");
    }
    if !view.probe.is_empty() {
        let _ = writeln!(
            out,
            "  <testsuite name=\"probe\" tests=\"1\" failures=\"{}\" errors=\"0\" skipped=\"0\" time=\"0\" timestamp=\"{timestamp}\">",
            usize::from(probe_fails)
        );
        let _ = writeln!(out, "    <testcase name=\"probe\" classname=\"probe\" time=\"0\">");
        let body = text(&format!("{}\n", view.probe.join("\n")));
        match (&view.probe_failed, probe_fails) {
            (Some(why), true) => {
                let _ = writeln!(out, "      <failure message=\"{}\" type=\"probe\">{body}</failure>", attr(why));
            }
            _ => {
                let _ = writeln!(out, "      <system-out>{body}</system-out>");
            }
        }
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
            testcase(&mut out, rule, scope, outcome, &bar);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// The document of a run that gave no report: one erroring test case saying why, so a CI's test
/// view shows the error instead of no tests at all.
pub fn failure(message: &str, exit_code: u8) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str("<testsuites name=\"vllm-diag\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\">\n");
    out.push_str("  <testsuite name=\"diagnosis\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\">\n");
    out.push_str("    <testcase name=\"diagnosis\" classname=\"diagnosis\" time=\"0\">\n");
    let _ = writeln!(out, "      <error message=\"{}\" type=\"no-report\">exit code {exit_code}: {}</error>", attr(message), text(message));
    out.push_str("    </testcase>\n  </testsuite>\n</testsuites>\n");
    out
}

/// Every rule/scope pair and what happened to it: healthy pairs pass, pairs not evaluated and
/// rules disabled in the configuration are skipped, findings and the rules also consistent with
/// them match (and fail at or above the bar).
fn cases(view: &ReportView) -> Cases {
    let mut cases: Cases = BTreeMap::new();
    let mut put = |rule: &str, scope: &str, o: Outcome| {
        let slot = cases.entry(rule.to_string()).or_default().entry(scope.to_string());
        match slot {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(o);
            }
            std::collections::btree_map::Entry::Occupied(mut e) => {
                if o.rank() > e.get().rank() {
                    e.insert(o);
                }
            }
        }
    };
    for (rule, scope) in &view.healthy_pairs {
        put(rule, scope, Outcome::Passed);
    }
    for n in &view.not_evaluated {
        put(&n.rule, &n.scope, Outcome::Skipped { reason: n.reason.clone() });
    }
    // Rules the configuration switched off: skipped for every scope, and said why.
    for rule in &view.disabled {
        put(rule, &view.scope_all, Outcome::Skipped { reason: "disabled in the configuration".to_string() });
    }
    for f in &view.findings {
        let detail = detail(view, f);
        put(&f.rule, &f.scope, Outcome::Matched { severity: f.severity, title: f.title.clone(), detail, fails: view.fails(f.severity) });
        for a in &f.also_consistent {
            let detail = format!("Also matched; explained by {} ({}) on the same scope, whose test case holds the evidence.\n", f.rule, f.severity);
            put(&a.rule, &f.scope, Outcome::Matched { severity: a.severity, title: a.title.clone(), detail, fails: false });
        }
    }
    // What else moved: one suite, `what_else_moved` (a rule's id has no underscore, so none can
    // take its name), a case per signal and scope.
    for u in &view.unexplained {
        put(UNEXPLAINED_SUITE, &format!("{} on {}", u.signal, u.scope), Outcome::Moved { line: u.line.clone(), fails: view.fail_on_unexplained });
    }
    cases
}

/// The report-wide facts repeated on every suite (JUnit has no place above a suite for them):
/// what was compared, where the numbers come from, the verdict, and the data source's warnings
/// (one `warning` property each). Disabled rules are not here: they are skipped test cases.
fn properties(view: &ReportView, bar: &str) -> Vec<(&'static str, String)> {
    let h = &view.header;
    let mut properties = vec![
        ("window", h.window_exact.clone()),
        ("baseline", h.baseline.clone()),
        ("source", format!("{} {}", h.source_kind, h.source_url)),
        ("fail_on", bar.to_string()),
    ];
    if let Some(profile) = &view.profile {
        properties.push(("profile", profile.clone()));
    }
    if let Some(sel) = &h.selector {
        properties.push(("selector", sel.clone()));
    }
    properties.push(("metrics", h.metrics.clone()));
    if let Some(fleet) = &h.fleet {
        properties.push(("fleet", fleet.clone()));
    }
    properties.push(("headline", view.headline.clone()));
    for w in &view.warnings {
        properties.push(("warning", w.clone()));
    }
    for c in &view.caveats {
        properties.push(("blind_spot", c.clone()));
    }
    if let Some(heading) = &view.timeline_heading {
        properties.push(("timeline", heading.clone()));
    }
    for e in view.timeline_listed() {
        properties.push(("event", e.line_exact.clone()));
    }
    if let Some(more) = &view.timeline_more {
        properties.push(("events_not_listed", more.clone()));
    }
    properties
}

/// The body of a finding's failure (or, below the bar, its system-out): everything the other
/// formats show about it, as plain text.
fn detail(view: &ReportView, f: &FindingView) -> String {
    let mut detail = String::new();
    if let Some(summary) = &f.summary {
        let _ = writeln!(detail, "{summary}\n");
    }
    match (&f.onset, &f.preceded_by) {
        (Some(onset), Some(after)) => {
            let _ = writeln!(detail, "{onset}\n{after}\n");
        }
        (Some(line), None) | (None, Some(line)) => {
            let _ = writeln!(detail, "{line}\n");
        }
        (None, None) => {}
    }
    for e in &f.evidence {
        let _ = write!(detail, "{}: {} (baseline {}", e.title, e.value, e.baseline);
        if let Some(c) = &e.change {
            let _ = write!(detail, ", {c}");
        }
        let _ = write!(detail, ")");
        if !e.condition.is_empty() {
            let _ = write!(detail, "; condition {} {}", e.condition_words, if e.held { "held" } else { "did not hold" });
        }
        if let Some(c) = &e.confidence {
            let _ = write!(detail, "; {c}");
        }
        if let Some(s) = &e.sparkline {
            let _ = write!(detail, "; trend {s}");
        }
        detail.push('\n');
    }
    let mut notes: Vec<String> = Vec::new();
    notes.extend(f.stood_in.clone());
    notes.extend(f.recent.clone());
    notes.extend(f.replicas.as_ref().map(|r| format!("Affected: {r}")));
    // Which limit bound its model, and where the time went hop by hop, as the other formats say.
    notes.extend(f.binding.clone());
    notes.extend(super::answer::hop_line(view, f));
    notes.extend(f.recommendations.iter().map(|r| format!("{}: {}", r.head, r.how)));
    notes.extend(f.recommendations.iter().filter_map(|r| r.card.clone()));
    notes.extend(f.wont_help.iter().cloned());
    if !notes.is_empty() {
        let _ = write!(detail, "\n{}\n", notes.join("\n"));
    }
    if !f.checked.is_empty() {
        detail.push_str("\nChecked against the data:\n");
        for s in &f.checked {
            let _ = writeln!(detail, "- {s}");
        }
    }
    if !f.steps.is_empty() {
        detail.push_str("\nNext steps:\n");
        for (i, s) in f.steps.iter().enumerate() {
            let _ = writeln!(detail, "{}. {s}", i + 1);
        }
    }
    if !f.references.is_empty() {
        detail.push_str("\nReferences:\n");
        for r in &f.references {
            let _ = writeln!(detail, "- {r}");
        }
    }
    if let Some(also) = f.also_consistent_list(|id| id.to_string()) {
        let _ = writeln!(detail, "\nAlso explains: {also}");
    }
    if !f.queries.is_empty() {
        let _ = writeln!(detail, "\nPromQL {}:", view.query_timing);
        for (signal, query) in &f.queries {
            let _ = writeln!(detail, "{signal}: {query}");
        }
    }
    detail
}

fn testcase(out: &mut String, rule: &str, scope: &str, outcome: &Outcome, bar: &str) {
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
        Outcome::Moved { line, fails: true } => {
            let _ = writeln!(out, "{open}>");
            let _ = writeln!(
                out,
                "      <failure message=\"{}\" type=\"unexplained\">{}</failure>",
                attr(&format!("UNEXPLAINED: {line}")),
                text(&format!("Changed, not explained by any rule: {line}\n"))
            );
            out.push_str("    </testcase>\n");
        }
        Outcome::Moved { line, fails: false } => {
            let _ = writeln!(out, "{open}>");
            let _ = writeln!(
                out,
                "      <system-out>{}</system-out>",
                text(&format!("Changed, not explained by any rule (fails with --fail-on unexplained; --fail-on {bar} here): {line}\n"))
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

/// Characters XML 1.0 cannot hold even as references, and bidirectional overrides, become U+FFFD.
fn xml_char(c: char) -> char {
    if super::is_bidi_control(c) {
        return '\u{FFFD}';
    }
    match c {
        '\u{9}' | '\u{A}' | '\u{D}' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}' => c,
        _ => '\u{FFFD}',
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;
    use crate::report::Report;

    /// The JUnit document of `report`, through the view as `render::render` does it.
    fn render(report: &Report, opts: &RenderOptions) -> String {
        super::render(&ReportView::new(report, opts), opts)
    }

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

    #[test]
    fn junit_snapshot_of_the_sample_report_with_events() {
        insta::assert_snapshot!(render(&sample_report_with_events(), &warning()));
    }

    #[test]
    fn the_timeline_is_in_every_suites_properties_and_the_failure_names_the_change() {
        let xml = render(&sample_report_with_events(), &warning());
        let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
        for suite in doc.root_element().children().filter(|n| n.has_tag_name("testsuite")) {
            let events: Vec<&str> = suite
                .descendants()
                .filter(|n| n.has_tag_name("property") && n.attribute("name") == Some("event"))
                .filter_map(|n| n.attribute("value"))
                .collect();
            assert_eq!(events.len(), 6);
            assert_eq!(events[0], "08:44:00 UTC target-down (llama-3.1-70b-instruct): 1 of 3 replicas stopped answering scrapes");
        }
        let failure = doc.descendants().find(|n| n.has_tag_name("failure")).unwrap().text().unwrap_or_default();
        assert!(failure.contains("Started 09:03 UTC\nBegan 2 min after a configuration change at 09:01:00 UTC"), "{failure}");
    }

    #[test]
    fn changes_no_rule_explains_are_test_cases_that_fail_only_under_fail_on_unexplained() {
        let r = with_unexplained(clean_report(), 2);
        let key = |signal: &str| ("what_else_moved".to_string(), format!("{signal} on qwen2.5-coder-32b"));
        let got = outcomes(&render(&r, &warning()));
        assert_eq!(got.get(&key("ttft_p95")).map(String::as_str), Some("system-out"), "{got:?}");
        assert_eq!(got.get(&key("signal_1")).map(String::as_str), Some("system-out"), "{got:?}");
        let strict = RenderOptions { fail_on_unexplained: true, ..warning() };
        let xml = render(&r, &strict);
        let got = outcomes(&xml);
        assert_eq!(got.get(&key("ttft_p95")).map(String::as_str), Some("failure"), "{got:?}");
        let doc = roxmltree::Document::parse(&xml).expect("well-formed XML");
        assert_eq!(doc.root_element().attribute("failures"), Some("2"));
        let fail_on: Vec<&str> =
            doc.descendants().filter(|n| n.has_tag_name("property") && n.attribute("name") == Some("fail_on")).filter_map(|n| n.attribute("value")).collect();
        assert!(!fail_on.is_empty() && fail_on.iter().all(|v| *v == "unexplained"), "{fail_on:?}");
        let messages: Vec<&str> = doc.descendants().filter(|n| n.has_tag_name("failure")).filter_map(|n| n.attribute("message")).collect();
        assert!(
            messages.iter().any(|m| m.starts_with("UNEXPLAINED: P95 time to first token up 2.4x (robust z 31) on qwen2.5-coder-32b since 09:12:00 UTC")),
            "{messages:?}"
        );
        // Nothing moved: no such suite.
        assert!(!render(&clean_report(), &strict).contains("what_else_moved"));
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
        // Absorbed (the finding's "Also explains"): neither queue-backlog (warning) nor
        // ttft-regression (info) on llama fails; the finding that explains them does, once.
        assert_eq!(got[&key("queue-backlog", "llama-3.1-70b-instruct")], "system-out");
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
        assert_eq!((tests, failures, skipped), (11, 2, 2));
    }

    #[test]
    fn hostile_text_is_escaped_and_the_document_still_parses() {
        let mut r = sample_report();
        r.findings[0].scope.insert("model_name".to_string(), "a\"b'<c>&d\u{1}\u{FFFF}]]>".to_string());
        r.findings[0].summary = "</failure><injected/> & \r\n".to_string();
        r.not_evaluated[0].reason = "line1\nline2 \"quoted\"".into();
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
