//! The default terminal format: the [answer](super::answer) every channel format gives, for a
//! terminal. It answers "what is wrong, since when, what do I do" in a screenful:
//!
//! - the first line says what is wrong: the severity, the rule and its title; or `OK: no problem
//!   found in N of M rules`; or `NOT AN ALL-CLEAR: ...` when core checks could not be judged;
//! - the leading finding: its scope (model, replicas affected, since when, after which change),
//!   the two to four numbers that decided it against their baseline and the line they crossed, the
//!   limit that bound the model, each experiment card on one line, the first two next steps, and
//!   the findings it absorbed;
//! - the other warning or critical findings, one line each;
//! - the footer: the window and its baseline, the fleet's size, the profile, the rules evaluated
//!   and found healthy, how many could not be evaluated, and `-v` for the rest.
//!
//! Everything else (the full evidence table, each card's arithmetic, the PromQL, the healthy list,
//! the timeline) is the table format's, which `-v` selects. Lines are wrapped to the terminal, at
//! most [`MAX_WIDTH`] columns, and to [`MAX_WIDTH`] when there is no terminal (a pipe, a file).

use super::answer::Answer;
use super::table::wrap;
use super::view::ReportView;
use super::RenderOptions;
use crate::report::Severity;

/// The widest line this format writes (a word longer than a line is kept whole).
pub const MAX_WIDTH: usize = 100;

/// Indentation of a finding's lines.
const INDENT: &str = "   ";

pub fn render(view: &ReportView, opts: &RenderOptions) -> String {
    let width = opts.width.map_or(MAX_WIDTH, |w| usize::from(w).min(MAX_WIDTH));
    let w = Some(width);
    let a = view.answer_in_terminal();
    let mut out: Vec<String> = Vec::new();

    // check's verdict stays one line whatever its length: CI reads the first line (`check --help`).
    if let Some(v) = &opts.verdict {
        out.push(super::one_line(v));
        out.push(String::new());
    }
    let (badge, colour) = badge(&a);
    out.extend(painted(&a.headline, width, &badge, colour, opts.color));
    if let Some(l) = &a.lead {
        let more = format!("{INDENT}  ");
        out.extend(wrap(&l.scope, w, INDENT, &more));
        for n in &l.numbers {
            out.extend(wrap(&n.line, w, INDENT, &more));
        }
        for line in l.binding.iter().chain(&l.notes).chain(&l.hop) {
            out.extend(wrap(line, w, INDENT, &more));
        }
        // One line per card, under a line that says what they are.
        if !l.cards.is_empty() {
            out.push(format!("{INDENT}{} ({}; the arithmetic: -v):", l.try_heading, super::answer::CARD_UNITS));
        }
        for c in &l.cards {
            out.extend(wrap(&c.line, w, INDENT, &more));
        }
        for line in &l.wont_help {
            out.extend(wrap(line, w, INDENT, &more));
        }
        for line in &l.checked {
            out.extend(wrap(line, w, &format!("{INDENT}Checked: "), &format!("{INDENT}         ")));
        }
        for (n, step) in l.steps.iter().enumerate() {
            let first = if n == 0 { format!("{INDENT}Next: 1. ") } else { format!("{INDENT}      {}. ", n + 1) };
            let rest = " ".repeat(first.chars().count());
            out.extend(wrap(step, w, &first, &rest));
        }
        for line in l.absorbed.iter().chain(&l.not_evaluated) {
            out.extend(wrap(line, w, INDENT, &more));
        }
    }
    if !a.others.is_empty() {
        out.push(String::new());
        for (line, severity) in a.others.iter().zip(&a.other_severities) {
            // `#2 WARNING`: its badge coloured like the headline's.
            let badge: String = line.split(' ').take(2).collect::<Vec<_>>().join(" ");
            let colour = severity.filter(|s| *s >= Severity::Warning).map_or("1;34", code);
            out.extend(painted(line, width, &badge, colour, opts.color));
        }
    }
    if !a.moved.is_empty() {
        out.push(String::new());
        out.push("Also changed, not explained by any rule:".to_string());
        for line in &a.moved {
            out.extend(wrap(line, w, "  - ", "    "));
        }
    }

    let mut notes: Vec<String> = Vec::new();
    for line in a.noted.iter().chain(&a.conclusion).chain(&a.probe) {
        notes.extend(wrap(line, w, "", INDENT));
    }
    if !a.not_evaluated_pairs.is_empty() {
        notes.extend(wrap(&view.not_evaluated_heading, w, "", INDENT));
        for line in &a.not_evaluated_pairs {
            notes.extend(wrap(line, w, "  - ", "    "));
        }
    }
    for line in a.disabled.iter().chain(&a.warnings) {
        notes.extend(wrap(line, w, "", INDENT));
    }
    if !notes.is_empty() {
        out.push(String::new());
        out.extend(notes);
    }

    out.push(String::new());
    let mut footer = a.context.clone();
    if let Some(n) = &a.not_evaluated {
        footer.push_str(&format!(" · {n}"));
    }
    footer.push_str(match opts.detail {
        super::Detail::Verbose => " · run with -v for evidence and PromQL",
        super::Detail::JsonBelow => " · the JSON report below has the evidence and PromQL",
    });
    out.extend(wrap(&footer, w, "", ""));

    out.iter().map(|l| format!("{}\n", l.trim_end())).collect()
}

/// The headline's badge (the words before its first colon) and its colour.
fn badge(a: &Answer) -> (String, &'static str) {
    let colour = match (a.severity, a.verdict) {
        (Some(s), _) => code(s),
        (None, super::Verdict::Clean | super::Verdict::Findings) if a.moved.is_empty() => "1;32",
        _ => "1;33",
    };
    (a.badge.clone(), colour)
}

/// The ANSI colour of a severity's badge, as the table format paints it.
fn code(severity: Severity) -> &'static str {
    match severity {
        Severity::Critical => "1;31",
        Severity::Warning => "1;33",
        Severity::Info => "1;34",
    }
}

/// `text` wrapped to `width` (continuation lines indented), with its leading `badge` coloured when
/// `color` (after wrapping: escape codes would count as width).
fn painted(text: &str, width: usize, badge: &str, code: &str, color: bool) -> Vec<String> {
    let mut lines = wrap(text, Some(width), "", INDENT);
    if let (true, Some(first)) = (color, lines.first_mut()) {
        if let Some(tail) = first.strip_prefix(badge) {
            *first = format!("\x1b[{code}m{badge}\x1b[0m{tail}");
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;
    use crate::report::Report;

    fn render(report: &Report, opts: &RenderOptions) -> String {
        super::render(&ReportView::new(report, opts), opts)
    }

    fn piped() -> RenderOptions {
        RenderOptions::default()
    }

    /// The verdict, its wrapped lines joined: up to the first line that is not its continuation.
    fn verdict_line(text: &str) -> String {
        let mut lines = text.lines();
        let mut out = lines.next().unwrap_or_default().to_string();
        for l in lines {
            match l.strip_prefix(INDENT) {
                Some(rest) if !rest.starts_with(' ') && !out.ends_with('\n') && looks_continued(rest) => out.push_str(&format!(" {rest}")),
                _ => break,
            }
        }
        out
    }

    /// A verdict's continuation, not a finding's first evidence row (which pads with two spaces).
    fn looks_continued(rest: &str) -> bool {
        !rest.contains("  ")
    }

    #[test]
    fn text_snapshot_of_the_sample_report() {
        insta::assert_snapshot!(render(&sample_report(), &piped()));
    }

    #[test]
    fn text_snapshot_of_the_sample_report_with_events() {
        insta::assert_snapshot!(render(&sample_report_with_events(), &piped()));
    }

    #[test]
    fn text_snapshot_of_a_clean_report() {
        insta::assert_snapshot!(render(&clean_report(), &piped()));
    }

    /// `n` changes no rule explains on Qwen, P95 TTFT first.

    #[test]
    fn a_clean_run_with_changes_no_rule_explains_is_not_an_all_clear_and_lists_three_of_them() {
        let text = render(&with_unexplained(clean_report(), 4), &piped());
        let first = verdict_line(&text);
        assert!(first.starts_with("NOT AN ALL-CLEAR: no warning or critical finding in "), "{text}");
        assert!(first.ends_with("but 4 signals moved that no rule explains"), "{text}");
        let listed: Vec<&str> =
            text.lines().skip_while(|l| *l != "Also changed, not explained by any rule:").skip(1).take_while(|l| l.starts_with("  ")).collect();
        assert_eq!(listed.iter().filter(|l| l.starts_with("  - ")).count(), 4, "three and the count of the rest: {text}");
        assert_eq!(listed[0], "  - P95 time to first token up 2.4x on qwen2.5-coder-32b since 09:12 UTC: 1.9 s vs 800 ms", "{text}");
        assert_eq!(*listed.last().unwrap(), "  - ... and 1 more: -v lists them", "{text}");
        // Without them, the same report is an all-clear.
        assert!(render(&clean_report(), &piped()).starts_with("OK: no problem found"));
        // The other formats' first line says it too.
        let rest = crate::render::headline(&clean_report()).strip_prefix("no problems found").unwrap().to_string();
        assert_eq!(crate::render::headline(&with_unexplained(clean_report(), 1)), format!("no rule fired, but 1 signal moved that no rule explains{rest}"));
    }

    #[test]
    fn changes_no_rule_explains_come_after_the_findings_and_leave_the_verdict_to_them() {
        let text = render(&with_unexplained(sample_report(), 1), &piped());
        assert!(!text.starts_with("NOT AN ALL-CLEAR"), "{text}");
        let also = text.find("Also changed, not explained by any rule:").expect("the list");
        assert!(text.find("Next: 1.").unwrap() < also, "{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= 100, "{line:?}");
        }
    }

    #[test]
    fn text_snapshot_when_nothing_was_evaluated() {
        insta::assert_snapshot!(render(&nothing_evaluated_report(), &piped()));
    }

    #[test]
    fn the_first_line_names_the_top_finding_its_scope_since_when_and_the_change_it_followed() {
        let text = render(&sample_report_with_events(), &piped());
        assert!(text.starts_with("CRITICAL kv-cache-exhausted: KV cache exhausted: requests are being preempted\n"), "{text}");
        // The scope, wrapped at the terminal's width: the affected replicas by name.
        let scope: Vec<&str> = text.lines().skip(1).take(2).map(str::trim).collect();
        assert_eq!(scope.join(" "), "llama-3.1-70b-instruct · 2 of 3 replicas affected (10.0.0.1:8000, 10.0.0.2:8000) · since 09:03 UTC", "{text}");
        // The change it followed, in its first step.
        assert!(text.contains("Next: 1. Start with the configuration change at 09:01:00 UTC"), "{text}");
        // The second finding has its own heading, ranked.
        assert!(text.lines().any(|l| l.starts_with("#2 WARNING ")), "{text}");
    }

    #[test]
    fn piped_lines_fit_100_columns_and_a_terminal_narrower_than_that() {
        for r in [sample_report(), sample_report_with_events(), clean_report(), nothing_evaluated_report()] {
            for (opts, max) in [(piped(), 100), (RenderOptions { width: Some(60), ..piped() }, 60), (RenderOptions { width: Some(300), ..piped() }, 100)] {
                let text = render(&r, &opts);
                for line in text.lines() {
                    // A single word longer than the line is kept whole; the samples have none.
                    assert!(line.chars().count() <= max, "wider than {max}: {line:?}\n{text}");
                }
            }
        }
    }

    #[test]
    fn a_finding_shows_its_deciding_numbers_advice_and_first_two_steps_only() {
        let v = ReportView::new(&sample_report(), &piped());
        let text = super::render(&v, &piped());
        let kv = &v.findings[0];
        assert!((1..=DECIDING_MAX).contains(&kv.deciding.len()), "{:?}", kv.deciding);
        for &i in &kv.deciding {
            let e = &kv.evidence[i];
            assert!(text.contains(&e.title) && text.contains(&e.value), "{} missing\n{text}", e.title);
        }
        // Each card on one line of its own; its arithmetic is -v's.
        assert!(text.lines().any(|l| l == "   --max-num-seqs: unknown → 37 · confidence high"), "{text}");
        assert!(!text.contains("Suggested max_num_seqs = 37"), "{text}");
        assert!(text.contains(&format!("Next: 1. {}", kv.steps[0].split(' ').next().unwrap_or_default())), "{text}");
        assert!(!text.contains(&kv.steps[2]), "only the first two steps\n{text}");
        assert!(!text.contains("PromQL at") && !text.contains("Checked and healthy"), "{text}");
    }

    const DECIDING_MAX: usize = crate::render::view::DECIDING;

    #[test]
    fn nothing_evaluated_is_never_ok_and_lists_what_could_not_be_checked() {
        let text = render(&nothing_evaluated_report(), &piped());
        assert!(text.starts_with("NOTHING EVALUATED: no rule could be checked"), "{text}");
        assert!(text.contains("not an all-clear"), "{text}");
        assert!(!text.to_lowercase().contains("healthy") && !text.contains("OK:"), "{text}");
        for n in &nothing_evaluated_report().not_evaluated {
            assert!(text.contains(&n.rule), "{} missing\n{text}", n.rule);
        }
    }

    #[test]
    fn without_the_core_checks_the_first_line_says_not_an_all_clear() {
        let mut r = clean_report();
        r.coverage = crate::report::Coverage { rules: 8, evaluated: 5, stood_in: 0, core_not_evaluated: vec!["slow-decode".into()], unread_targets: vec![] };
        let text = render(&r, &piped());
        assert!(text.lines().next().unwrap_or_default().starts_with("NOT AN ALL-CLEAR: core checks not evaluated"), "{text}");
        assert!(text.contains("slow-decode") && !text.contains("OK:"), "{text}");
        // With a warning or critical finding, the finding leads and the gap is still said.
        let mut with_finding = sample_report();
        with_finding.coverage.core_not_evaluated = vec!["slow-decode".into()];
        let text = render(&with_finding, &piped());
        assert!(text.starts_with("CRITICAL "), "{text}");
        assert!(text.contains("Core runbook checks not evaluated: slow-decode"), "{text}");
    }

    #[test]
    fn a_clean_run_says_ok_in_how_many_rules_and_names_what_was_not_evaluated() {
        let mut r = clean_report();
        r.coverage = crate::report::Coverage { rules: 25, evaluated: 24, ..Default::default() };
        r.not_evaluated.push(crate::report::NotEvaluated {
            rule: "gpu-throttling".into(),
            scope: Default::default(),
            reason: crate::report::Reasons(vec![crate::report::Reason::MetricMissing {
                side: crate::report::Side::Window,
                families: vec!["DCGM_FI_DEV_SM_CLOCK".into()],
            }]),
        });
        let text = render(&r, &piped());
        assert_eq!(verdict_line(&text), "OK: no problem found in 24 of 25 rules", "{text}");
        // The footer's counts add up: 24 evaluated and 1 not, of 25.
        let footer = text.replace("\n", " ");
        assert!(footer.contains("24 of 25 rules evaluated, 24 healthy · 1 rule not evaluated: -v lists them"), "{text}");
    }

    #[test]
    fn colour_only_when_asked_and_only_on_the_badge() {
        for r in [sample_report(), clean_report(), nothing_evaluated_report()] {
            assert!(!render(&r, &piped()).contains('\x1b'));
        }
        let text = render(&sample_report(), &RenderOptions { color: true, ..piped() });
        assert!(text.starts_with("\x1b[1;31mCRITICAL\x1b[0m kv-cache-exhausted"), "{text}");
        assert!(text.contains("\x1b[1;33m#2 WARNING\x1b[0m "), "{text}");
        let clean = render(&clean_report(), &RenderOptions { color: true, ..piped() });
        assert!(clean.starts_with("\x1b[1;32mOK\x1b[0m: "), "{clean}");
    }

    #[test]
    fn checks_verdict_comes_first_on_one_line_and_the_rest_fits() {
        let verdict = "FAIL: 1 critical finding since the deploy at 2026-01-15 09:00:00 UTC (kv-cache-exhausted on llama-3.1-70b-instruct, and more words)";
        let opts = RenderOptions { verdict: Some(verdict.into()), ..piped() };
        let text = render(&sample_report(), &opts);
        assert_eq!(text.lines().next(), Some(verdict), "{text}");
        assert!(text.lines().skip(1).all(|l| l.chars().count() <= MAX_WIDTH), "{text}");
    }
}
