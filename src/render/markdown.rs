//! Markdown for pasting into an incident channel or a GitHub issue as is.
//!
//! The lowest common denominator of Slack and GitHub decides the markup: bold lines instead of `#`
//! headings, lists instead of wide tables, fenced code blocks (no HTML `<details>`, which Slack
//! shows as raw tags). Label values, server warnings and failure reasons come from outside and
//! are escaped, so a model called `*prod*` or a warning holding `<html>` cannot reformat the
//! message; code spans written in rule text are kept, since rule authors use them for flags.

use super::{
    also_consistent_list, recommendation_lines, replicas_line, describe_generation, describe_range, describe_range_at, describe_source, evidence_sparkline, headline,
    healthy_summary, no_findings_sentence, not_evaluated_heading, not_evaluated_lines, one_line,
    query_timing, warning_lines, EvidenceText, RenderOptions, ScopeStyle,
};
use crate::report::{Finding, Report};

pub fn render(report: &Report, opts: &RenderOptions) -> String {
    let scopes = ScopeStyle::for_report(report);
    // Blocks are separated by one blank line; a block may span several lines.
    let mut blocks: Vec<String> = Vec::new();

    blocks.push(format!("**vllm-diag: {}**", text(&headline(report))));

    let (kind, url, selector) = describe_source(report);
    let source = match selector {
        Some(sel) => format!("{} {}, selector {}", text(&kind), code(&url), code(&sel)),
        None => format!("{} {}", text(&kind), code(&url)),
    };
    let seen = scopes.describe_seen(&report.metrics.scopes);
    let mut header = vec![
        format!("- **Window:** {}", describe_range_at(&report.window, opts.now.as_ref())),
        format!("- **Baseline:** {}", describe_range(&report.baseline)),
        format!("- **Source:** {source}"),
        format!("- **Metrics:** vLLM {}; {}", describe_generation(&report.metrics.generation), text(&seen)),
    ];
    if let Some(fleet) = super::describe_fleet(&report.metrics) {
        header.push(format!("- **Fleet:** {}", text(&fleet)));
    }
    blocks.push(header.join("\n"));

    for (i, f) in report.findings.iter().enumerate() {
        finding_blocks(&mut blocks, report, f, i + 1, &scopes);
    }

    if let Some(sentence) = no_findings_sentence(report) {
        blocks.push(format!("**{}**", text(&sentence)));
    }
    if let Some((pairs, rules)) = healthy_summary(report) {
        let rules: Vec<String> = rules.iter().map(|r| text(r)).collect();
        blocks.push(format!(
            "Checked and healthy: {pairs} ({})",
            rules.join(", ")
        ));
    }
    if let Some(line) = super::disabled_line(report) {
        blocks.push(text(&line));
    }
    let skipped = not_evaluated_lines(report, &scopes);
    if !skipped.is_empty() {
        let mut b = format!("**{}**", text(&not_evaluated_heading(skipped.len())));
        for (rule, scope, reason) in skipped {
            b.push_str(&format!(
                "\n- {} ({}): {}",
                code(&rule),
                text(&scope),
                text(&reason)
            ));
        }
        blocks.push(b);
    }
    let warnings = warning_lines(report);
    if !warnings.is_empty() {
        let lines: Vec<String> = warnings.iter().map(|w| format!("- {}", text(w))).collect();
        blocks.push(format!("**Warnings:**\n{}", lines.join("\n")));
    }

    let mut out = blocks.join("\n\n");
    out.push('\n');
    out
}

fn finding_blocks(
    blocks: &mut Vec<String>,
    report: &Report,
    f: &Finding,
    rank: usize,
    scopes: &ScopeStyle,
) {
    blocks.push(format!(
        "**#{rank} {} · {}**\n{} on {}",
        f.severity.as_str().to_uppercase(),
        text(&f.title),
        code(&f.rule),
        code(&scopes.format(&f.scope))
    ));
    if !f.summary.trim().is_empty() {
        blocks.push(text(&f.summary));
    }
    if !f.evidence.is_empty() {
        let items: Vec<String> = f
            .evidence
            .iter()
            .map(|e| {
                let mut item = evidence_item(&EvidenceText::new(e));
                if let Some(trend) = evidence_sparkline(report, e) {
                    item.push_str(&format!(" · trend {}", code(&trend)));
                }
                item
            })
            .collect();
        blocks.push(format!("Evidence:\n{}", items.join("\n")));
    }
    if let Some(line) = super::stood_in_line(f) {
        blocks.push(format!("_{}_", text(&line)));
    }
    if let Some(line) = replicas_line(f) {
        blocks.push(format!("Affected: {}", text(&line)));
    }
    for (head, how) in recommendation_lines(f) {
        blocks.push(format!("**{}**  \n{}", text(&head), text(&how)));
    }
    if !f.steps.is_empty() {
        let items: Vec<String> = f
            .steps
            .iter()
            .enumerate()
            .map(|(n, s)| format!("{}. {}", n + 1, text(s)))
            .collect();
        blocks.push(format!("Next steps:\n{}", items.join("\n")));
    }
    if !f.references.is_empty() {
        let items: Vec<String> = f
            .references
            .iter()
            .map(|r| format!("- {}", text(r)))
            .collect();
        blocks.push(format!("References:\n{}", items.join("\n")));
    }
    if let Some(also) = also_consistent_list(f, code) {
        blocks.push(format!("Also consistent: {also}"));
    }
    let queries = super::finding_queries(f);
    if !queries.is_empty() {
        let longest_ticks = queries
            .iter()
            .map(|(_, q)| longest_run(q, '`'))
            .max()
            .unwrap_or(0);
        let fence = "`".repeat((longest_ticks + 1).max(3));
        let body: Vec<String> = queries.iter().map(|(s, q)| format!("# {s}\n{q}")).collect();
        blocks.push(format!(
            "PromQL {}:\n{fence}\n{}\n{fence}",
            text(&query_timing(report)),
            body.join("\n")
        ));
    }
}

/// `- P95 time to first token: **4.12 s**, baseline 820 ms (5x) — `> 3s` held; low confidence (14 obs)`
fn evidence_item(e: &EvidenceText) -> String {
    let mut s = format!(
        "- {}: **{}**, baseline {}",
        text(&e.title),
        text(&e.value),
        text(&e.baseline)
    );
    if let Some(change) = &e.change {
        s.push_str(&format!(" ({})", text(change)));
    }
    if e.condition.is_empty() {
        // A signal shown for context: it was not held to any condition.
    } else {
        s.push_str(&format!(
            " — {} {}",
            code(&e.condition),
            if e.held { "held" } else { "did not hold" }
        ));
    }
    if let Some(c) = &e.confidence {
        s.push_str(&format!("; {c}"));
    }
    s
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
fn text(s: &str) -> String {
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
            '_' => {
                !(prev.is_some_and(char::is_alphanumeric)
                    && next.is_some_and(char::is_alphanumeric))
            }
            '&' => looks_like_entity(&chars[i + 1..]),
            // Only at the start of a line can these open a heading, list, quote or underline.
            '#' | '-' | '+' | '=' | '>' => i == 0,
            '.' | ')' => {
                next.map_or(true, char::is_whitespace)
                    && i > 0
                    && chars[..i].iter().all(char::is_ascii_digit)
            }
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
    let body = rest
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == '#')
        .count();
    body > 0 && rest.get(body) == Some(&';')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;

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
    fn nothing_evaluated_never_says_healthy() {
        let md = render(&nothing_evaluated_report(), &RenderOptions::default()).to_lowercase();
        assert!(!md.contains("healthy"), "{md}");
    }

    #[test]
    fn outside_text_cannot_add_formatting() {
        assert_eq!(text("*prod* [x](y) <b>"), r"\*prod\* \[x\](y) \<b>");
        assert_eq!(text("# not a heading"), r"\# not a heading");
        assert_eq!(text("1. not a list"), r"1\. not a list");
        assert_eq!(
            text("> not a quote, 0.90 -> 0.95"),
            r"\> not a quote, 0.90 -> 0.95"
        );
        assert_eq!(text("a &amp; b & c"), r"a \&amp; b & c");
    }

    #[test]
    fn metric_names_and_code_spans_stay_readable() {
        assert_eq!(
            text("no series for vllm:num_requests_waiting"),
            "no series for vllm:num_requests_waiting"
        );
        assert_eq!(
            text("lower `--max_num_seqs` now"),
            "lower `--max_num_seqs` now"
        );
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
