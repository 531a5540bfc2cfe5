//! GitHub Actions: findings as workflow-command annotations, and the step-summary heading.
//!
//! An annotation is one line on stdout, `::error title=T::message`, that the runner turns into a
//! note on the workflow run. The line format is the whole protocol, so escaping is not cosmetic:
//! an unescaped newline in a message would end the command and let the rest of the text (which
//! can come from a Prometheus warning or a label value) be read as a new command. GitHub's rules:
//! in the message `%`, `\r` and `\n` are written `%25`, `%0D`, `%0A`; in a property such as
//! `title` also `:` and `,` (`%3A`, `%2C`), which would otherwise end the property.

use super::view::ReportView;
use super::{one_line, RenderOptions};
use crate::report::{Report, Severity};

/// One annotation per finding, most important first: critical as `error`, warning as `warning`,
/// info as `notice`. Empty when there are no findings.
///
/// Annotations go with a text format on stdout, which shows every other section of the report
/// (warnings, disabled rules, what could not be evaluated); they mark the findings on the run.
pub fn annotations(report: &Report) -> String {
    annotations_of(&ReportView::new(report, &RenderOptions::default()))
}

/// [`annotations`] of a report view.
pub fn annotations_of(view: &ReportView) -> String {
    let mut out = String::new();
    for f in &view.findings {
        let command = match f.severity {
            Severity::Critical => "error",
            Severity::Warning => "warning",
            Severity::Info => "notice",
        };
        let title = format!("vllm-diag: {} on {}", f.rule, f.scope);
        let held: Vec<String> = f.evidence.iter().filter(|e| e.held_condition()).map(|e| format!("{} {} ({})", e.title, e.value, e.condition_words)).collect();
        let mut message = format!("{}: {}", f.severity.as_str().to_uppercase(), f.title);
        if !held.is_empty() {
            message.push_str(&format!(". {}", held.join("; ")));
        }
        if let Some(step) = f.steps.first() {
            message.push_str(&format!(". First step: {step}"));
        }
        out.push_str(&format!("::{command} title={}::{}\n", property(&title), data(&message)));
    }
    out
}

/// `check`'s verdict as a step-summary heading, with a mark GitHub renders as an emoji: what
/// [`Report::decide`] decided for `report` under `opts`' bars, as the verdict words it.
pub fn summary_heading(verdict: &str, report: &Report, opts: &RenderOptions) -> String {
    let mark = match report.decide(opts.fail_on, opts.fail_on_unexplained) {
        crate::report::Decision::FailFindings | crate::report::Decision::FailUnexplained | crate::report::Decision::FailProbe => ":x:",
        _ if super::verdict_says_not_evaluated(report, opts) => ":grey_question:",
        _ => ":white_check_mark:",
    };
    // Escaped as Markdown: the verdict names scopes, whose label values come from the server.
    format!("{mark} {}", super::markdown::text(&one_line(verdict)))
}

/// Workflow-command data (the message).
pub fn data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// A workflow-command property value.
pub fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;

    #[test]
    fn each_finding_becomes_one_annotation_of_its_severity() {
        let text = annotations(&sample_report());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[0].starts_with("::error title=vllm-diag%3A kv-cache-exhausted on llama-3.1-70b-instruct::CRITICAL: "), "{}", lines[0]);
        assert!(lines[1].starts_with("::warning title=vllm-diag%3A ttft-regression on qwen2.5-coder-32b::WARNING: "), "{}", lines[1]);
        assert!(lines[0].contains("KV cache usage (max) 99.1%25 (> 95%25)"), "{}", lines[0]);
    }

    #[test]
    fn info_findings_are_notices_and_no_findings_give_no_lines() {
        let mut r = sample_report();
        r.findings.truncate(1);
        r.findings[0].severity = Severity::Info;
        assert!(annotations(&r).starts_with("::notice title="));
        assert_eq!(annotations(&clean_report()), "");
    }

    #[test]
    fn text_from_outside_cannot_end_the_command_or_start_another() {
        assert_eq!(data("50%\r\n::error::x"), "50%25%0D%0A::error::x");
        assert_eq!(property("a: b, c%\n"), "a%3A b%2C c%25%0A");
        let mut r = sample_report();
        r.findings[0].scope.insert("model_name".to_string(), "m,x::warning::pwned\n::error::y".to_string());
        r.findings[0].steps = vec![crate::report::Step::ask("100% sure\n::error::injected")].into();
        let text = annotations(&r);
        assert_eq!(text.lines().count(), 2, "{text}");
        for line in text.lines() {
            let (_, message) = line.split_once("::").and_then(|(_, rest)| rest.split_once("::")).unwrap();
            assert!(!message.contains('\n') && !message.contains('\r'));
        }
        assert!(text.contains("title=vllm-diag%3A kv-cache-exhausted on m%2Cx%3A%3Awarning%3A%3Apwned %3A%3Aerror%3A%3Ay::"), "{text}");
    }

    #[test]
    fn the_summary_heading_marks_the_verdict() {
        use crate::render::fixtures::{clean_report, sample_report};
        let critical = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
        let mut core_missing = clean_report();
        core_missing.coverage.core_not_evaluated = vec!["slow-decode".into()];
        for (report, mark) in [(sample_report(), ":x: "), (clean_report(), ":white_check_mark: "), (core_missing, ":grey_question: ")] {
            let verdict = super::super::check_verdict(&report, &critical);
            let heading = summary_heading(&verdict, &report, &critical);
            assert!(heading.starts_with(mark), "{heading}");
            assert!(heading.contains(&verdict[..4]), "the verdict follows the mark: {heading}");
        }
    }
}
