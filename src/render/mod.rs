//! Turning a [`Report`] into text: a terminal table, Markdown for incident channels, Slack, HTML,
//! JUnit XML, or JSON for CI.
//!
//! Every renderer is a pure function to a `String`; the caller decides where it goes. Nothing here
//! probes the terminal, so the same report always renders to the same bytes, which is what makes
//! the snapshot tests meaningful and lets `--format table` be piped into a file.
//!
//! The pipeline is `Report -> ReportView -> text`. [`view::ReportView`] holds every section a
//! reader sees (header, verdict, findings with their evidence, healthy, not evaluated, disabled,
//! warnings), decided and worded once by the helpers in this module; the renderers only lay it out
//! in their markup, so the formats can never disagree about the facts or forget a section. JSON is
//! the exception on purpose: it is the serialized `Report` itself, the stable contract for scripts.
//! Two rules shape the wording:
//! - a rule that could not be evaluated is always listed by name, scope and reason: a diagnosis
//!   with holes must show them;
//! - when nothing at all was evaluated the output never calls anything healthy.
//!
//! Adding a format: write `render/<name>.rs` with `pub fn render(view: &ReportView, opts:
//! &RenderOptions) -> String`, add a variant to [`Format`] (and to [`Format::ALL`]), and one arm
//! to [`Format::spec`] giving its name, its one-line description and its renderer. `--format`,
//! its help text and its error messages follow from that.

use chrono::{DateTime, Utc};

use crate::report::{Report, Severity};

pub mod answer;
pub mod compact;
pub mod github;
pub mod hops;
pub mod html;
pub mod json;
pub mod junit;
pub mod links;
pub mod loadtest;
pub mod loadtest_html;
pub mod markdown;
pub mod probe;
pub mod slack;
pub mod slack_blocks;
pub mod sparkline;
pub mod table;
pub mod view;

pub use view::ReportView;

/// Output format chosen with `--format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// The verdict first, each warning or critical finding in a few lines, then one footer line
    /// (the default; `-v` gives [`Format::Table`]).
    #[default]
    Text,
    /// Boxed tables for a terminal: the full evidence, its conditions, the PromQL, what was healthy.
    Table,
    /// Compact Markdown to paste into an incident channel or a GitHub issue.
    Markdown,
    /// The report as JSON (schema in `report.rs`), for scripts and CI.
    Json,
    /// Slack mrkdwn: no tables, within one message, the most important finding first.
    Slack,
    /// The Slack message as Block Kit JSON, a payload for an incoming webhook.
    SlackBlocks,
    /// JUnit XML: a test case per rule and scope, for the test report view of CI systems.
    Junit,
    /// One self-contained HTML page with a chart of every evidence signal, for incident tickets.
    Html,
}

/// What a format is: its `--format` name, its description, whether people read it, its renderer.
struct Spec {
    name: &'static str,
    about: &'static str,
    text: bool,
    renderer: Renderer,
}

enum Renderer {
    /// Lays out the report view.
    View(fn(&ReportView, &RenderOptions) -> String),
    /// Serialises the report itself (JSON: the schema is the contract, not the view), with how the
    /// run ended under the options' `fail_on`.
    Report(fn(&Report, &RenderOptions) -> String),
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: &'static [Format] =
        &[Format::Text, Format::Table, Format::Markdown, Format::Json, Format::Slack, Format::SlackBlocks, Format::Junit, Format::Html];

    /// The one place a format is described.
    fn spec(self) -> Spec {
        use Renderer::{Report as R, View as V};
        let (name, about, text, renderer) = match self {
            Format::Text => ("text", "The verdict first, each warning or critical finding in a few lines, a footer (-v: table)", true, V(compact::render)),
            Format::Table => ("table", "Boxed tables for a terminal: the full evidence and its PromQL (what -v gives)", true, V(table::render)),
            Format::Markdown => ("markdown", "Compact Markdown to paste into an incident channel or a GitHub issue", true, V(markdown::render)),
            Format::Json => ("json", "The report as JSON (schema in `report.rs`), for scripts and CI", false, R(json::render)),
            Format::Slack => ("slack", "Slack mrkdwn: the answer in one message, under 1,500 characters", true, V(slack::render)),
            Format::SlackBlocks => ("slack-blocks", "The Slack message as Block Kit JSON, a payload for an incoming webhook", false, V(slack_blocks::render)),
            Format::Junit => ("junit", "JUnit XML: a test case per rule and scope, for the test report view of CI systems", false, V(junit::render)),
            Format::Html => ("html", "One self-contained HTML page with a chart of every evidence signal, for incident tickets", false, V(html::render)),
        };
        Spec { name, about, text, renderer }
    }

    /// The `--format` value: `text`, `table`, `markdown`, `json`, `slack`, `junit`, `html`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// One line saying what the format is for (the `--help` text of its value).
    pub fn about(self) -> &'static str {
        self.spec().about
    }

    /// Formats meant for people reading text (a verdict line or annotations may go around them);
    /// the others are documents a program parses, which nothing may be added to.
    pub fn is_text(self) -> bool {
        self.spec().text
    }

    /// Formats laid out for a terminal, which may be coloured and are wrapped to its width.
    pub fn is_terminal(self) -> bool {
        matches!(self, Format::Text | Format::Table)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--format` value that names no format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl std::fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        write!(f, "unknown format {:?}: use one of {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownFormat {}

impl std::str::FromStr for Format {
    type Err = UnknownFormat;

    /// The `--format` name, exactly as `--format` takes it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL.iter().copied().find(|f| f.name() == s).ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

/// Presentation knobs that do not change what is said.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Colour severities with ANSI escapes (text and table only). The caller decides (tty, `NO_COLOR`, flag).
    pub color: bool,
    /// The terminal's width: the table format wraps to it, the text format to it or 100 columns,
    /// whichever is less. `None` (no terminal): both are laid out for 100 columns (PromQL keeps
    /// lines of its own, broken only where whitespace means nothing to it).
    pub width: Option<u16>,
    /// The time of rendering, for relative hints such as "ended 12 min ago". Set for live runs
    /// only: a replay or a snapshot leaves it `None` and so renders the same bytes every time.
    pub now: Option<DateTime<Utc>>,
    /// The severity at or above which a finding fails the run (`--fail-on`); `None` when nothing
    /// fails. JUnit turns it into failed test cases; `check` into its verdict.
    pub fail_on: Option<Severity>,
    /// Changes no rule explains fail the run too (`--fail-on unexplained`, or `info`).
    pub fail_on_unexplained: bool,
    /// Deep links from evidence queries to charts (markdown, slack, html); `None` for none.
    pub links: Option<links::GraphLinks>,
    /// `check`'s verdict line (`FAIL: ...`), which the text formats print first, escaped for
    /// their reader (it names scopes, whose label values come from the server); Slack counts it
    /// in its length limit. The document formats leave it out: the caller prints it on stderr.
    pub verdict: Option<String>,
    /// Where the text format's footer sends the reader for the evidence and PromQL: `-v` on the
    /// command line, the JSON document that follows in an MCP answer.
    pub detail: Detail,
}

/// See [`RenderOptions::detail`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Detail {
    #[default]
    Verbose,
    JsonBelow,
}

/// What a document format (`json`, `junit`) writes on stdout when a run ends without a report (the
/// source unreachable, no vLLM data, a recording that cannot be read), so that a pipeline reading
/// the document finds the error where it expects the report, not an empty file. `None` for the
/// text formats and HTML: they print nothing on stdout, and the error goes to stderr as always.
pub fn failure_document(format: Format, message: &str, exit_code: u8) -> Option<String> {
    match format {
        Format::Json => Some(json::failure(message, exit_code)),
        Format::Junit => Some(junit::failure(message, exit_code)),
        _ => None,
    }
}

/// A line of text as `format` writes it: its escaping, and nothing else. Every fact of the
/// [`answer::Answer`] appears in a channel format exactly as `escape(format, fact)` (with its
/// whitespace laid out as the format wraps it), which is what the agreement tests look for.
pub fn escape(format: Format, s: &str) -> String {
    match format {
        Format::Markdown => markdown::text(s),
        Format::Slack | Format::SlackBlocks => slack::plain(s),
        Format::Html => html::esc(s),
        Format::Text | Format::Table | Format::Json | Format::Junit => one_line(s),
    }
}

/// Render `report` in `format`. Never fails: every format can express every report.
pub fn render(report: &Report, format: Format, opts: &RenderOptions) -> String {
    match format.spec().renderer {
        Renderer::View(render) => render(&ReportView::new(report, opts), opts),
        Renderer::Report(render) => render(report, opts),
    }
}

mod check;
mod condition;
#[cfg(test)]
pub(crate) mod fixtures;
mod words;

pub use check::{check_verdict, verdict_says_not_evaluated};
pub(crate) use condition::*;
pub use words::*;

pub(crate) use crate::text::{is_bidi_control, one_line};

#[cfg(test)]
mod control_tests {
    #[test]
    fn control_characters_from_outside_never_reach_the_terminal() {
        let hostile = "llama\u{1b}[31mRED\u{7}\u{9b}2J";
        let out = super::one_line(hostile);
        assert!(!out.chars().any(|c| c.is_control()), "{out:?}");
        assert!(out.starts_with("llama"));
        // A recording's URL is a file's text: shown without its escapes or credentials.
        let url = super::display_url("http://u:pw@evil\u{1b}]8;;x\u{7}click/\u{1b}[2J");
        assert!(!url.chars().any(|c| c.is_control()) && !url.contains("pw"), "{url:?}");
        // A right-to-left override (U+202E) would show the text after it reversed.
        assert_eq!(super::one_line("Aaa-model\u{202e} Qwen/Qwen2.5\u{2066}"), "Aaa-model\u{FFFD} Qwen/Qwen2.5\u{FFFD}");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use chrono::{TimeZone, Utc};

    use crate::report::*;

    use super::fixtures::*;
    use super::*;

    fn scope(pairs: &[(&str, &str)]) -> Scope {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_range_within_one_day_shows_the_date_once() {
        let r = sample_report();
        assert_eq!(describe_range(&r.window), "2026-01-15 09:00:00 → 09:30:00 UTC (30m)");
    }

    #[test]
    fn a_range_across_midnight_shows_both_dates() {
        let r = TimeRange { start: Utc.with_ymd_and_hms(2026, 1, 15, 23, 30, 0).unwrap(), end: Utc.with_ymd_and_hms(2026, 1, 16, 1, 0, 0).unwrap() };
        assert_eq!(describe_range(&r), "2026-01-15 23:30:00 → 2026-01-16 01:00:00 UTC (1h 30m)");
    }

    #[test]
    fn a_scope_of_only_the_grouping_label_is_written_as_its_value() {
        let style = ScopeStyle::for_report(&sample_report());
        assert_eq!(style.group_label.as_deref(), Some("model_name"));
        assert_eq!(style.format(&scope(&[("model_name", "llama-3")])), "llama-3");
        assert_eq!(style.format(&scope(&[("model_name", "llama-3"), ("engine", "1")])), "llama-3 (engine=1)");
        assert_eq!(style.format(&Scope::new()), "all");
        // Grouped by a label the series lack: said, not left blank.
        assert_eq!(style.format(&scope(&[("model_name", "")])), "(no model_name label)");
    }

    #[test]
    fn scopes_with_several_labels_are_written_in_full() {
        let mut r = sample_report();
        r.metrics.scopes = vec![scope(&[("model_name", "a"), ("engine", "0")])];
        let style = ScopeStyle::for_report(&r);
        assert_eq!(style.group_label, None);
        assert_eq!(style.format(&scope(&[("model_name", "a"), ("engine", "0")])), "engine=0, model_name=a");
    }

    #[test]
    fn evidence_shows_change_only_against_a_positive_baseline() {
        let r = sample_report();
        let kv = view::evidence_words(&r.findings[0].evidence[0]);
        assert_eq!((kv.value.as_str(), kv.baseline.as_str()), ("99.1%", "62%"));
        assert_eq!(kv.change.as_deref(), Some("1.6x"));
        let preempt = view::evidence_words(&r.findings[0].evidence[1]);
        assert_eq!(preempt.change, None);
        let ttft = view::evidence_words(&r.findings[1].evidence[0]);
        assert_eq!(ttft.confidence.as_deref(), Some("low confidence (14 obs)"));
        let missing = view::evidence_words(&r.findings[1].evidence[2]);
        assert_eq!(missing.value, "no data");
    }

    #[test]
    fn credentials_in_the_source_url_are_never_displayed() {
        assert_eq!(display_url("https://user:s3cret@prom.example:9090/"), "https://prom.example:9090/");
        assert!(!display_url("https://user:s3cret@[bad").contains("s3cret"));
    }

    #[test]
    fn nothing_evaluated_is_never_called_healthy() {
        let r = nothing_evaluated_report();
        assert_eq!(verdict(&r), Verdict::NothingEvaluated);
        let s = no_findings_sentence(&r).unwrap_or_default().to_lowercase();
        assert!(!s.contains("healthy") && !s.contains("no problems"), "{s}");
        assert!(healthy_summary(&r, &words::ScopeStyle::for_report(&r)).is_none());
    }

    #[test]
    fn repeated_warnings_are_folded_with_a_count() {
        let r = sample_report();
        assert_eq!(warning_lines(&r), vec!["partial response: store 10.0.3.7:10901 unavailable (2 times)"]);
    }

    #[test]
    fn headline_counts_findings_by_severity_and_not_evaluated() {
        assert_eq!(headline(&sample_report()), "2 findings (1 critical, 1 warning) · 6 of 8 rules evaluated");
        assert_eq!(headline(&clean_report()), "no problems found · 6 of 8 rules evaluated");
        let mut r = clean_report();
        r.coverage = crate::report::Coverage { rules: 8, evaluated: 8, stood_in: 0, core_not_evaluated: vec![], unread_targets: vec![] };
        assert_eq!(headline(&r), "no problems found");
    }

    fn t(s: &str) -> Term {
        Term::Text(s.into())
    }

    fn group(all: bool, parts: Vec<Term>, see: &[&str]) -> Term {
        Term::Group { all, parts, see: see.iter().map(|x| x.to_string()).collect() }
    }

    fn or(parts: Vec<Term>, see: &[&str]) -> Term {
        group(false, parts, see)
    }

    fn and(parts: Vec<Term>, see: &[&str]) -> Term {
        group(true, parts, see)
    }

    fn line(t: Term) -> Threshold {
        Threshold { lines: vec![t] }
    }

    /// The rows, each checked against the text the JSON writes for it.
    fn named(rows: Vec<(&str, &str, Threshold, &str)>) -> Vec<Named> {
        rows.into_iter()
            .map(|(a, b, c, text)| {
                assert_eq!(c.to_string(), text);
                (a.to_string(), b.to_string(), c)
            })
            .collect()
    }

    #[test]
    fn a_condition_names_the_other_signals_it_reads_in_words() {
        let ev = named(vec![
            ("preemption_active", "Share of window with preemptions", line(or(vec![t(">= 50%")], &["preemption_recent"])), ">= 50% or (see preemption_recent)"),
            (
                "preemption_recent",
                "Share of the last 5 min with preemptions",
                line(or(vec![t(">= 50%")], &["preemption_active"])),
                ">= 50% or (see preemption_active)",
            ),
        ]);
        assert_eq!(condition_in_words(&ev[0].2, "preemption_active", &ev), ">= 50% or share of the last 5 min with preemptions >= 50%");
        assert_eq!(own_condition(&ev[0].2), ">= 50%");
        assert_eq!(alternatives(&ev[0].2), ["preemption_recent"]);
        // A flat `or` of three signals: each spelt out with its own condition, compound ones in parentheses.
        let ev = named(vec![
            (
                "ttft_p95",
                "P95 time to first token",
                line(or(vec![t(">= 2x baseline"), t("> 3 s")], &["queue_p95", "itl_p95"])),
                ">= 2x baseline or > 3 s or (see queue_p95, itl_p95)",
            ),
            (
                "queue_p95",
                "P95 queue time",
                line(or(vec![t("> 1 s"), and(vec![t(">= 2x baseline"), t("> 300 ms")], &[])], &["ttft_p95", "itl_p95"])),
                "> 1 s or (>= 2x baseline and > 300 ms) or (see ttft_p95, itl_p95)",
            ),
            (
                "itl_p95",
                "P95 inter-token latency",
                line(or(vec![t(">= 1.5x baseline"), t("> 100 ms")], &["ttft_p95", "queue_p95"])),
                ">= 1.5x baseline or > 100 ms or (see ttft_p95, queue_p95)",
            ),
        ]);
        assert_eq!(
            condition_in_words(&ev[0].2, "ttft_p95", &ev),
            ">= 2x baseline or > 3 s or (P95 queue time > 1 s or (>= 2x baseline and > 300 ms)) or (P95 inter-token latency >= 1.5x baseline or > 100 ms)"
        );
        assert_eq!(own_condition(&ev[1].2), "> 1 s or (>= 2x baseline and > 300 ms)");
    }

    #[test]
    fn a_group_whose_shape_the_text_does_not_show_is_named_not_guessed() {
        // itl_p95 <= 100 ms and (itl_p95 < 1.5x baseline or (running_avg >= 2x baseline and gen >= 1.2x baseline))
        let ev = named(vec![
            (
                "itl_p95",
                "P95 inter-token latency",
                line(and(vec![t("<= 100 ms"), or(vec![t("< 1.5x baseline")], &["running_avg", "gen_rate"])], &[])),
                "<= 100 ms and (< 1.5x baseline or (see running_avg, gen_rate))",
            ),
            (
                "running_avg",
                "Running requests (avg)",
                line(and(vec![or(vec![and(vec![t(">= 2x baseline")], &["gen_rate"])], &["itl_p95"])], &["itl_p95"])),
                "((>= 2x baseline and (see gen_rate)) or (see itl_p95)) and (see itl_p95)",
            ),
            (
                "gen_rate",
                "Generation throughput",
                line(and(vec![or(vec![and(vec![t(">= 1.2x baseline")], &["running_avg"])], &["itl_p95"])], &["itl_p95"])),
                "((>= 1.2x baseline and (see running_avg)) or (see itl_p95)) and (see itl_p95)",
            ),
        ]);
        assert_eq!(
            condition_in_words(&ev[0].2, "itl_p95", &ev),
            "<= 100 ms and (< 1.5x baseline or a condition on running requests (avg) and generation throughput)"
        );
        assert_eq!(own_condition(&ev[0].2), "<= 100 ms and < 1.5x baseline");
        assert_eq!(own_condition(&ev[1].2), ">= 2x baseline");
        assert!(alternatives(&ev[0].2).contains(&"running_avg".to_string()));
        // A signal the evidence does not carry is named by its id; several lines are joined by `and`.
        assert_eq!(condition_in_words(&line(or(vec![t("> 3 s")], &["nowhere"])), "x", &ev), "> 3 s or a condition on nowhere");
        let two = Threshold { lines: vec![or(vec![t(">= 1.5x baseline"), t("> 100 ms")], &[]), t("> 100 ms")] };
        assert_eq!(two.to_string(), ">= 1.5x baseline or > 100 ms; > 100 ms");
        assert_eq!(own_condition(&two), "(>= 1.5x baseline or > 100 ms) and > 100 ms");
        let not = line(Term::Not(Box::new(t("> 3 s"))));
        assert_eq!(not.to_string(), "not (> 3 s)");
        assert_eq!(own_condition(&not), "not (> 3 s)");
    }

    #[test]
    fn a_check_whose_scrape_targets_answered_nothing_is_not_a_pass() {
        let mut r = clean_report();
        r.coverage.unread_targets = vec!["10.0.0.7:8000: connection refused".into()];
        let opts = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
        assert_eq!(r.decide(opts.fail_on, false), crate::report::Decision::NoVerdict(crate::report::NoVerdict::TargetsUnread), "exit code 3");
        let v = check_verdict(&r, &opts);
        assert!(v.starts_with("NOT EVALUATED: 1 scrape target answered nothing in the 30m since the deploy"), "{v}");
        assert!(v.contains("10.0.0.7:8000: connection refused") && v.ends_with("but this is not a pass"), "{v}");
        assert!(verdict_says_not_evaluated(&r, &opts));
    }

    /// The probe the real-engine lab joined to `explain` through vLLM's router at its limit: 8 of 10
    /// answered 408 (scripts/lab/probe-join.sh).
    fn lab_probe() -> crate::report::probe::ProbeEvidence {
        let r: Report = serde_json::from_str(include_str!("../../fixtures/real-engine-probe-join/explain-probe-408.json")).expect("the lab's report");
        r.probe.expect("its probe")
    }

    #[test]
    fn a_failed_probe_decides_a_check_with_a_bar_and_is_said_after_any_other_verdict() {
        let warning = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
        let mut r = clean_report();
        r.probe = Some(lab_probe());
        assert_eq!(r.decide(warning.fail_on, false), crate::report::Decision::FailProbe);
        let v = check_verdict(&r, &warning);
        assert!(v.starts_with("FAIL: the probe of http://127.0.0.1:39389/v1/completions: 8 of 10 requests failed (8 x HTTP 408 after 221 ms"), "{v}");
        assert!(v.contains("; nothing was found in the metrics since the deploy at "), "{v}");
        // Without a bar it fails nothing, and the verdict says so.
        let v = check_verdict(&r, &RenderOptions::default());
        assert!(v.starts_with("PASS: nothing fails with --fail-on never") && v.ends_with("(with --fail-on never, the probe fails nothing)"), "{v}");
        // A finding over the bar decides first; the probe follows it.
        let mut s = sample_report();
        s.probe = Some(lab_probe());
        assert_eq!(s.decide(warning.fail_on, false), crate::report::Decision::FailFindings);
        let v = check_verdict(&s, &warning);
        assert!(v.starts_with("FAIL: ") && v.contains("; and the probe of http://127.0.0.1:39389/v1/completions: 8 of 10 requests failed"), "{v}");
        // The answer's headline says it when no finding leads, and JUnit has a failing probe case.
        let view = ReportView::new(&r, &warning);
        assert_eq!(view.answer().badge, "PROBE FAILED");
        let junit = render(&r, Format::Junit, &warning);
        assert!(junit.contains("<testsuite name=\"probe\" tests=\"1\" failures=\"1\"") && junit.contains("type=\"probe\""), "{junit}");
        assert!(junit.contains("Refused in front of the engines: 8 of 10 requests answered busy"), "{junit}");
    }

    #[test]
    fn an_all_clear_without_the_core_checks_is_not_an_all_clear() {
        let mut r = clean_report();
        r.coverage = crate::report::Coverage { rules: 8, evaluated: 5, stood_in: 2, core_not_evaluated: vec!["slow-decode".into()], unread_targets: vec![] };
        assert_eq!(verdict(&r), Verdict::Incomplete);
        let h = headline(&r);
        assert!(h.starts_with("not an all-clear") && h.contains("5 of 8 rules evaluated (2 through stand-in signals)"), "{h}");
        let s = no_findings_sentence(&r).unwrap();
        assert!(s.contains("not an all-clear") && s.contains("slow-decode"), "{s}");
        assert!(!s.contains("No problems found"), "{s}");
        let opts = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
        assert!(check_verdict(&r, &opts).starts_with("NOT EVALUATED: the core checks slow-decode"), "{}", check_verdict(&r, &opts));
        // A warning finding reads as a finding, still naming what could not be checked; below
        // --fail-on it does not turn the check into a pass.
        let mut with_warning = sample_report();
        with_warning.coverage.core_not_evaluated = vec!["slow-decode".into()];
        assert_eq!(verdict(&with_warning), Verdict::Findings);
        assert!(no_findings_sentence(&with_warning).unwrap().contains("slow-decode"));
        let critical_only = RenderOptions { fail_on: Some(Severity::Critical), ..RenderOptions::default() };
        let mut warning_only = with_warning.clone();
        warning_only.findings.retain(|f| f.severity == Severity::Warning);
        let v = check_verdict(&warning_only, &critical_only);
        assert!(v.starts_with("NOT EVALUATED") && v.contains("1 finding (1 warning), none failing"), "{v}");
    }

    #[test]
    fn checks_verdict_still_passes_with_changes_no_rule_explains_and_says_them_first() {
        let opts = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
        let clean = clean_report();
        assert!(!check_verdict(&clean, &opts).contains("moved"));
        let mut moved = clean.clone();
        moved.unexplained.push(crate::report::Unexplained {
            signal: "prefix_hit_ratio".into(),
            title: "Prefix-cache hit ratio".into(),
            unit: "ratio".into(),
            scope: Scope::new(),
            direction: "down".into(),
            value: Some(0.1),
            baseline: Some(0.5),
            ratio: Some(0.2),
            robust_z: None,
            onset: moved.window.start,
            from_start: true,
            duration_seconds: 1800,
            ongoing: true,
            query: String::new(),
            metric: String::new(),
            spare: false,
            series: crate::report::Trend { step_seconds: 60, range_seconds: 180, query: String::new(), baseline: vec![], window: vec![] },
        });
        let v = check_verdict(&moved, &opts);
        assert!(v.starts_with("PASS: ") && v.contains("; but 1 signal moved that no rule explains, "), "{v}");
        assert_eq!(moved.exit_code(opts.fail_on), clean.exit_code(opts.fail_on));
        // --fail-on unexplained: the same report fails, and says on what; a clean one still passes.
        let unexplained = RenderOptions { fail_on_unexplained: true, ..opts };
        let v = check_verdict(&moved, &unexplained);
        assert!(
            v.starts_with("FAIL: 1 signal moved that no rule explains since the deploy at ")
                && v.contains("(Prefix-cache hit ratio down on ")
                && v.ends_with("; --fail-on unexplained)"),
            "{v}"
        );
        assert_eq!(moved.exit_code_with(unexplained.fail_on, true), crate::report::EXIT_FINDINGS);
        assert!(check_verdict(&clean, &unexplained).starts_with("PASS: "));
        assert_eq!(clean.exit_code_with(unexplained.fail_on, true), clean.exit_code(opts.fail_on));
        // A failing finding comes first and names the findings.
        let mut both = sample_report();
        both.unexplained = moved.unexplained.clone();
        assert!(check_verdict(&both, &unexplained).contains("critical"), "{}", check_verdict(&both, &unexplained));
        assert_eq!(crate::report::fail_on_name(Some(Severity::Warning), true), "unexplained");
        assert_eq!(crate::report::fail_on_name(Some(Severity::Info), true), "info");
        assert_eq!(crate::report::fail_on_name(None, false), "never");
    }

    #[test]
    fn every_format_has_a_unique_name_that_parses_back() {
        let names: BTreeSet<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names.len(), Format::ALL.len());
        assert_eq!(names, BTreeSet::from(["text", "table", "markdown", "json", "slack", "slack-blocks", "junit", "html"]));
        for &f in Format::ALL {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
            assert_eq!(f.to_string(), f.name());
            assert!(!f.about().is_empty() && !f.about().ends_with('.'), "{}", f.about());
        }
        let err = "yaml".parse::<Format>().unwrap_err().to_string();
        assert!(err.contains("\"yaml\"") && err.contains("text, table, markdown, json, slack, slack-blocks, junit, html"), "{err}");
        assert_eq!(Format::default(), Format::Text);
        let text: Vec<&str> = Format::ALL.iter().filter(|f| f.is_text()).map(|f| f.name()).collect();
        assert_eq!(text, ["text", "table", "markdown", "slack"]);
        let terminal: Vec<&str> = Format::ALL.iter().filter(|f| f.is_terminal()).map(|f| f.name()).collect();
        assert_eq!(terminal, ["text", "table"]);
    }

    #[test]
    fn render_dispatches_on_format() {
        let r = clean_report();
        let json = render(&r, Format::Json, &RenderOptions::default());
        assert!(json.starts_with('{'));
        assert!(render(&r, Format::Markdown, &RenderOptions::default()).contains("OK: no problem found"));
    }
}
