//! Markdown for pasting into an incident channel or a GitHub issue as is.
//!
//! The lowest common denominator of Slack and GitHub decides the markup: bold lines instead of `#`
//! headings, lists instead of wide tables, fenced code blocks (no HTML `<details>`, which Slack
//! shows as raw tags). Label values, server warnings and failure reasons come from outside and
//! are escaped, so a model called `*prod*` or a warning holding `<html>` cannot reformat the
//! message; code spans written in rule text are kept, since rule authors use them for flags.

use super::view::{EvidenceView, FindingView, ReportView};
use super::{one_line, RenderOptions};

pub fn render(view: &ReportView, opts: &RenderOptions) -> String {
    // Blocks are separated by one blank line; a block may span several lines.
    let mut blocks: Vec<String> = Vec::new();

    if let Some(v) = &opts.verdict {
        blocks.push(text(v));
    }
    blocks.push(format!("**vllm-diag: {}**", text(&view.headline)));

    let h = &view.header;
    let source = match &h.selector {
        Some(sel) => format!("{} {}, selector {}", text(&h.source_kind), code(&h.source_url), code(sel)),
        None => format!("{} {}", text(&h.source_kind), code(&h.source_url)),
    };
    let mut header = vec![
        format!("- **Window:** {}", h.window),
        format!("- **Baseline:** {}", h.baseline),
        format!("- **Source:** {source}"),
        format!("- **Metrics:** {}", text(&h.metrics)),
    ];
    if let Some(fleet) = &h.fleet {
        header.push(format!("- **Fleet:** {}", text(fleet)));
    }
    blocks.push(header.join("\n"));

    for f in &view.findings {
        finding_blocks(&mut blocks, view, f);
    }

    if let Some(sentence) = &view.conclusion {
        blocks.push(format!("**{}**", text(sentence)));
    }
    if !view.unexplained.is_empty() {
        let mut b = "**Also changed, not explained by any rule:**".to_string();
        for u in &view.unexplained {
            b.push_str(&format!("\n- {}", text(&u.line)));
        }
        blocks.push(b);
    }
    if let Some(heading) = &view.timeline_heading {
        let mut b = format!("**{}**", text(heading));
        for e in view.timeline_listed() {
            b.push_str(&format!("\n- {}", timeline_item(e)));
        }
        if let Some(more) = &view.timeline_more {
            b.push_str(&format!("\n- {}", text(more)));
        }
        blocks.push(b);
    }
    if let Some(healthy) = &view.healthy {
        let rules: Vec<String> = healthy.rules.iter().map(|r| text(r)).collect();
        blocks.push(format!(
            "Checked and healthy: {} ({})",
            healthy.pairs,
            rules.join(", ")
        ));
    }
    if let Some(line) = &view.disabled_line {
        blocks.push(text(line));
    }
    if !view.not_evaluated.is_empty() {
        let mut b = format!("**{}**", text(&view.not_evaluated_heading));
        for n in &view.not_evaluated {
            b.push_str(&format!(
                "\n- {} ({}): {}",
                code(&n.rule),
                text(&n.scope),
                text(&n.reason)
            ));
        }
        blocks.push(b);
    }
    if !view.warnings.is_empty() {
        let lines: Vec<String> = view.warnings.iter().map(|w| format!("- {}", text(w))).collect();
        blocks.push(format!("**Warnings:**\n{}", lines.join("\n")));
    }
    if !view.caveats.is_empty() {
        let lines: Vec<String> = view.caveats.iter().map(|c| format!("- {}", text(c))).collect();
        blocks.push(format!("**Blind spots:**\n{}", lines.join("\n")));
    }

    let mut out = blocks.join("\n\n");
    out.push('\n');
    out
}

fn finding_blocks(blocks: &mut Vec<String>, view: &ReportView, f: &FindingView) {
    blocks.push(format!(
        "**#{} {} · {}**\n{} on {}",
        f.rank,
        f.severity.as_str().to_uppercase(),
        text(&f.title),
        code(&f.rule),
        code(&f.scope)
    ));
    if let Some(summary) = &f.summary {
        blocks.push(text(summary));
    }
    // The change it began after goes right under the onset, in the same paragraph.
    match (&f.onset, &f.preceded_by) {
        (Some(onset), Some(after)) => blocks.push(format!("{}  \n{}", text(onset), text(after))),
        (Some(line), None) | (None, Some(line)) => blocks.push(text(line)),
        (None, None) => {}
    }
    if let Some(line) = &f.replica_cause {
        blocks.push(text(line));
    }
    if !f.evidence.is_empty() {
        let items: Vec<String> = f
            .evidence
            .iter()
            .map(|e| {
                let mut item = evidence_item(e);
                if let Some(trend) = &e.sparkline {
                    item.push_str(&format!(" · trend {}", code(trend)));
                }
                item
            })
            .collect();
        blocks.push(format!("Evidence:\n{}", items.join("\n")));
    }
    for line in f.stood_in.iter().chain(&f.recent) {
        blocks.push(format!("_{}_", text(line)));
    }
    if let Some(line) = &f.replicas {
        blocks.push(format!("Affected: {}", text(line)));
    }
    if let Some(line) = &f.binding {
        blocks.push(text(line));
    }
    for line in &f.correlations {
        blocks.push(text(line));
    }
    for r in &f.recommendations {
        blocks.push(format!("**{}**  \n{}", text(&r.head), text(&r.how)));
        blocks.extend(r.card.as_ref().map(|c| text(c)));
    }
    for line in &f.wont_help {
        blocks.push(text(line));
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
    if let Some(also) = f.also_consistent_list(code) {
        blocks.push(format!("Also consistent: {also}"));
    }
    if !f.queries.is_empty() {
        let longest_ticks = f
            .queries
            .iter()
            .map(|(_, q)| longest_run(q, '`'))
            .max()
            .unwrap_or(0);
        let fence = "`".repeat((longest_ticks + 1).max(3));
        let body: Vec<String> = f.queries.iter().map(|(s, q)| format!("# {s}\n{q}")).collect();
        blocks.push(format!(
            "PromQL {}:\n{fence}\n{}\n{fence}",
            text(&view.query_timing),
            body.join("\n")
        ));
    }
    let charts: Vec<String> = f.evidence.iter().filter_map(|e| e.link.as_ref().map(|l| format!("[{}](<{l}>)", text(&e.signal)))).collect();
    if !charts.is_empty() {
        blocks.push(format!("Charts: {}", charts.join(" · ")));
    }
}

/// The event's line with its kind as code, like rule ids elsewhere:
/// ``09:01:00 UTC `config-change` (llama-3): num_gpu_blocks 2000 -> 900``.
fn timeline_item(e: &super::view::EventView) -> String {
    let mut s = format!("{} {} ({})", text(&e.time), code(e.kind.as_str()), text(&e.scope));
    if !e.detail.is_empty() {
        s.push_str(&format!(": {}", text(&e.detail)));
    }
    s
}

/// `- P95 time to first token: **4.12 s**, baseline 820 ms (5x) — `> 3s` held; low confidence (14 obs)`
fn evidence_item(e: &EvidenceView) -> String {
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
            '_' => {
                !(prev.is_some_and(char::is_alphanumeric)
                    && next.is_some_and(char::is_alphanumeric))
            }
            '&' => looks_like_entity(&chars[i + 1..]),
            // Only at the start of a line can these open a heading, list, quote or underline.
            '#' | '-' | '+' | '=' | '>' => i == 0,
            '.' | ')' => {
                next.is_none_or(char::is_whitespace)
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
    fn the_change_a_finding_began_after_is_in_the_onsets_paragraph_and_each_event_is_one_line() {
        let md = render(&sample_report_with_events(), &RenderOptions::default());
        assert!(md.contains("Started 09:03 UTC  \nBegan 2 min after a configuration change at 09:01 UTC: num_gpu_blocks 2000 -> 900"), "{md}");
        let (_, timeline) = md.split_once("**Timeline: 6 changes (3 in the baseline, 3 in the window), oldest first**\n").expect("timeline");
        let items: Vec<&str> = timeline.lines().take_while(|l| l.starts_with("- ")).collect();
        assert_eq!(items.len(), 6, "{md}");
        assert_eq!(items[2], "- 08:58:00 UTC `rollout` (all): Deployment inference-prod/vllm-llama generation 7 -> 8");
    }

    #[test]
    fn a_long_timeline_says_how_many_more_the_json_has() {
        let mut r = sample_report_with_events();
        let e = r.events[0].clone();
        r.events.extend(std::iter::repeat_n(e, 10));
        let md = render(&r, &RenderOptions::default());
        assert!(md.contains("\n- ... and 4 more (see --format json)\n"), "{md}");
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
