//! Markdown for an issue, a CI step summary or a chat that reads it (GitHub, GitLab, Mattermost).
//!
//! It is the [answer](super::answer), whole and nothing more, within 40 lines: the verdict, the
//! scope, the numbers that decided it (each linked to its chart when the run has links), the
//! binding limit, each experiment card on one line, the first next steps, the findings it
//! absorbed, the other findings one line each, and the context in one line. The evidence, its
//! PromQL, the timeline and what was healthy are in `-v`, `--format html` and `--format json`.
//!
//! The lowest common denominator of Slack and GitHub decides the markup: bold lines instead of `#`
//! headings, lists instead of tables. Label values, server warnings and failure reasons come from
//! outside and are escaped, so a model called `*prod*` or a warning holding `<html>` cannot
//! reformat the message; code spans written in rule text are kept, since rule authors use them for
//! flags.

use super::view::ReportView;
use super::{one_line, RenderOptions};

pub fn render(view: &ReportView, opts: &RenderOptions) -> String {
    let a = view.answer();
    // Blocks are separated by one blank line; a block may span several lines.
    let mut blocks: Vec<String> = Vec::new();
    if let Some(v) = &opts.verdict {
        blocks.push(text(v));
    }
    // Named, for a summary or an issue that gathers several tools' reports.
    let mut head = vec![format!("**vllm-diag: {}**", text(&a.headline))];
    if let Some(l) = &a.lead {
        head.push(text(&l.scope));
    }
    blocks.push(head.join("  \n"));
    if let Some(l) = &a.lead {
        let numbers: Vec<String> = l
            .numbers
            .iter()
            .map(|n| {
                let chart = n.link.as_ref().map(|url| format!(" ([chart](<{url}>))")).unwrap_or_default();
                format!("- {}{chart}", text(&n.line))
            })
            .collect();
        if !numbers.is_empty() {
            blocks.push(numbers.join("\n"));
        }
        let mut said: Vec<String> = l.binding.iter().map(|b| text(b)).collect();
        said.extend(l.notes.iter().map(|n| format!("_{}_", text(n))));
        said.extend(l.hop.iter().map(|n| format!("_{}_", text(n))));
        if !said.is_empty() {
            blocks.push(said.join("  \n"));
        }
        if !l.cards.is_empty() {
            let cards: Vec<String> = l.cards.iter().map(|c| format!("- {}", text(&c.line))).collect();
            blocks.push(format!("**{}** ({}):\n{}", l.try_heading, super::answer::CARD_UNITS, cards.join("\n")));
        }
        if !l.wont_help.is_empty() {
            blocks.push(l.wont_help.iter().map(|w| text(w)).collect::<Vec<_>>().join("  \n"));
        }
        if !l.checked.is_empty() {
            let checked: Vec<String> = l.checked.iter().map(|c| format!("- {}", text(c))).collect();
            blocks.push(format!("**Checked:**\n{}", checked.join("\n")));
        }
        if !l.steps.is_empty() {
            let steps: Vec<String> = l.steps.iter().enumerate().map(|(i, s)| format!("{}. {}", i + 1, text(s))).collect();
            blocks.push(format!("**Next:**\n{}", steps.join("\n")));
        }
        let tail: Vec<String> = l.absorbed.iter().chain(&l.not_evaluated).map(|x| text(x)).collect();
        if !tail.is_empty() {
            blocks.push(tail.join("  \n"));
        }
    }
    if !a.others.is_empty() {
        blocks.push(a.others.iter().map(|o| format!("- {}", text(o))).collect::<Vec<_>>().join("\n"));
    }
    let mut notes: Vec<String> = a.noted.iter().chain(&a.conclusion).chain(&a.probe).map(|x| text(x)).collect();
    notes.extend(a.disabled.iter().map(|d| text(d)));
    notes.extend(a.warnings.iter().map(|w| text(w)));
    if !notes.is_empty() {
        blocks.push(notes.join("  \n"));
    }
    if !a.moved.is_empty() {
        let moved: Vec<String> = a.moved.iter().map(|m| format!("- {}", text(m))).collect();
        blocks.push(format!("**Also changed, not explained by any rule:**\n{}", moved.join("\n")));
    }
    if !a.not_evaluated_pairs.is_empty() {
        let pairs: Vec<String> = a.not_evaluated_pairs.iter().map(|n| format!("- {}", text(n))).collect();
        blocks.push(format!("**{}**\n{}", text(&view.not_evaluated_heading), pairs.join("\n")));
    }
    let mut footer = text(&a.context);
    if let Some(n) = &a.not_evaluated {
        footer.push_str(&format!(" · {}", text(n)));
    }
    footer.push_str(&format!(" · source {}", code(&view.header.source_line())));
    blocks.push(format!("_{footer}_"));

    let mut out = blocks.join("\n\n");
    out.push('\n');
    out
}

/// An inline code span that survives any content: the fence is longer than any backtick run inside.
fn code(s: &str) -> String {
    let s = one_line(s);
    if s.is_empty() {
        return String::new();
    }
    let fence = "`".repeat(longest_run(&s, '`') + 1);
    if s.starts_with('`') || s.ends_with('`') {
        format!("{fence} {s} {fence}")
    } else {
        format!("{fence}{s}{fence}")
    }
}

fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut cur) = (0, 0);
    for ch in s.chars() {
        cur = if ch == c { cur + 1 } else { 0 };
        best = best.max(cur);
    }
    best
}

/// Plain text made inert for CommonMark, on one line. Code spans already in the text are kept
/// verbatim; everything else that could start emphasis, a link, HTML or a block is escaped.
pub(crate) fn text(s: &str) -> String {
    let s = one_line(s);
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '`' {
            let run = chars[i..].iter().take_while(|&&x| x == '`').count();
            if let Some(end) = closing_run(&chars, i + run, run) {
                out.extend(&chars[i..end + run]);
                i = end + run;
            } else {
                for _ in 0..run {
                    out.push_str("\\`");
                }
                i += run;
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1).copied();
        let escape = match c {
            '\\' | '*' | '[' | ']' | '<' | '~' => true,
            // `_` between two letters or digits can never start or end emphasis.
            '_' => !(prev.is_some_and(char::is_alphanumeric) && next.is_some_and(char::is_alphanumeric)),
            '&' => looks_like_entity(&chars[i + 1..]),
            // Only at the start of a line can these open a heading, list, quote or underline.
            '#' | '-' | '+' | '=' | '>' => i == 0,
            '.' | ')' => next.is_none_or(char::is_whitespace) && i > 0 && chars[..i].iter().all(char::is_ascii_digit),
            _ => false,
        };
        if escape {
            out.push('\\');
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Index of the next run of exactly `len` backticks at or after `from`.
fn closing_run(chars: &[char], from: usize, len: usize) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        if chars[i] == '`' {
            let run = chars[i..].iter().take_while(|&&x| x == '`').count();
            if run == len {
                return Some(i);
            }
            i += run;
        } else {
            i += 1;
        }
    }
    None
}

/// `amp;`, `#123;`: what follows an `&` in an HTML entity.
fn looks_like_entity(rest: &[char]) -> bool {
    let body = rest.iter().take_while(|c| c.is_ascii_alphanumeric() || **c == '#').count();
    body > 0 && rest.get(body) == Some(&';')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;
    use crate::report::Report;

    /// The Markdown of `report`, through the view as `render::render` does it.
    fn render(report: &Report, opts: &RenderOptions) -> String {
        super::render(&ReportView::new(report, opts), opts)
    }

    #[test]
    fn checks_verdict_comes_first_as_inert_text() {
        let verdict = "FAIL: 1 critical finding (kv-cache-pressure on m <img src=x> *bold* [l](http://e))".to_string();
        let text = render(&sample_report(), &RenderOptions { verdict: Some(verdict), ..RenderOptions::default() });
        let first = text.lines().next().unwrap_or_default();
        assert!(first.starts_with("FAIL: 1 critical finding"), "{text}");
        // Backslash escapes: shown as typed, never an image, emphasis or a link.
        assert!(first.contains("\\<img") && first.contains("\\*bold\\*") && first.contains("\\[l\\]"), "{first}");
    }

    #[test]
    fn markdown_snapshot_of_the_sample_report() {
        insta::assert_snapshot!(render(&sample_report(), &RenderOptions::default()));
    }

    #[test]
    fn markdown_snapshot_of_a_clean_report() {
        insta::assert_snapshot!(render(&clean_report(), &RenderOptions::default()));
    }

    #[test]
    fn markdown_snapshot_when_nothing_was_evaluated() {
        insta::assert_snapshot!(render(&nothing_evaluated_report(), &RenderOptions::default()));
    }

    #[test]
    fn markdown_snapshot_of_the_sample_report_with_events() {
        insta::assert_snapshot!(render(&sample_report_with_events(), &RenderOptions::default()));
    }

    #[test]
    fn the_change_a_finding_began_after_is_in_its_scope_line_and_its_note() {
        let md = render(&sample_report_with_events(), &RenderOptions::default());
        // Its first step starts there, naming the change: neither the scope line nor a note repeats it.
        assert!(md.contains("2 of 3 replicas affected (10.0.0.1:8000, 10.0.0.2:8000) · since 09:03 UTC\n"), "{md}");
        assert!(md.contains("1. Start with the configuration change at 09:01:00 UTC (num_gpu_blocks 2000 -> 900 on 2 of 3 replicas)"), "{md}");
        assert!(!md.contains("_Began 2 min after"), "{md}");
    }

    #[test]
    fn the_answer_fits_in_40_lines_however_many_findings_and_events() {
        let mut r = sample_report_with_events();
        let e = r.events[0].clone();
        r.events.extend(std::iter::repeat_n(e, 40));
        let template = r.findings.clone();
        for i in 0..30 {
            let mut f = template[i % 2].clone();
            f.scope.insert("model_name".to_string(), format!("model-{i:02}"));
            r.findings.push(f);
        }
        r.warnings = (0..30).map(|i| format!("warning {i}")).collect();
        let md = render(&with_unexplained(r, 9), &RenderOptions::default());
        assert!(md.lines().count() <= 40, "{} lines\n{md}", md.lines().count());
        assert!(md.contains("- ... and 29 more findings\n"), "{md}");
        assert!(!md.contains("-v"), "no command-line hints in a channel format: {md}");
    }

    #[test]
    fn nothing_evaluated_never_says_healthy() {
        let md = render(&nothing_evaluated_report(), &RenderOptions::default()).to_lowercase();
        assert!(!md.contains("healthy"), "{md}");
    }

    #[test]
    fn outside_text_cannot_add_formatting() {
        assert_eq!(text("*prod* [x](y) <b>"), r"\*prod\* \[x\](y) \<b>");
        assert_eq!(text("# not a heading"), r"\# not a heading");
        assert_eq!(text("1. not a list"), r"1\. not a list");
        assert_eq!(text("> not a quote, 0.90 -> 0.95"), r"\> not a quote, 0.90 -> 0.95");
        assert_eq!(text("a &amp; b & c"), r"a \&amp; b & c");
    }

    #[test]
    fn metric_names_and_code_spans_stay_readable() {
        assert_eq!(text("no series for vllm:num_requests_waiting"), "no series for vllm:num_requests_waiting");
        assert_eq!(text("lower `--max_num_seqs` now"), "lower `--max_num_seqs` now");
        assert_eq!(text("a lone ` tick"), r"a lone \` tick");
        assert_eq!(text("_lead and trail_"), r"\_lead and trail\_");
    }

    #[test]
    fn code_spans_hold_backticks() {
        assert_eq!(code("a`b"), "``a`b``");
        assert_eq!(code("`x`"), "`` `x` ``");
    }

    #[test]
    fn no_line_is_indented_enough_to_become_code() {
        for line in render(&sample_report(), &RenderOptions::default()).lines() {
            assert!(!line.starts_with("    "), "{line}");
        }
    }
}
