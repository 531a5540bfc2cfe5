//! Slack mrkdwn, for an incident channel read on a phone.
//!
//! Slack is not Markdown: `*bold*`, `_italic_`, no headings, no tables, and `&`, `<`, `>` are its
//! only escapes (`<...>` is a link or a mention). So the message is short lines and bullets, and
//! text from outside (label values, server warnings, failure reasons) has its markup characters
//! replaced by look-alikes, since Slack has no backslash escape.
//!
//! The message is the [answer](super::answer), whole: the verdict, the scope, the numbers that
//! decided it, the binding limit, each experiment card on one line, the first next steps, the
//! findings it absorbed, then the other findings one line each and the context in one line. The
//! answer is short by construction (about 1,500 characters on the shipped recordings and every
//! generated incident), so nothing is cut to fit; [`LIMIT`] (one section block's 3,000
//! characters) is only a guard against absurd text from outside (a 10,000-character label value).
//! The same answer as Block Kit JSON, for a webhook, is [`super::slack_blocks`].

use super::answer::Answer;
use super::view::ReportView;
use super::{one_line, plural, RenderOptions, Verdict};
use crate::report::Severity;

/// Characters (not bytes) a message may take: one Slack section block.
pub const LIMIT: usize = 3000;

/// What the answer aims to fit in an incident channel, as Slack displays it (`&gt;` one character).
pub const CHANNEL_BUDGET: usize = 1500;

/// Characters of the message as sent, escapes and all (stricter than Slack's display, where
/// `&gt;` is one character), a link (`<url|chart>`) counted as the label Slack shows: what the
/// budget counts.
fn sent_len(s: &str) -> usize {
    let mut n = 0;
    let mut rest = s;
    while let Some(i) = rest.find("<http") {
        n += rest[..i].chars().count();
        match rest[i..].find('>') {
            Some(end) => {
                let link = &rest[i + 1..i + end];
                n += link.split_once('|').map_or(0, |(_, label)| label.chars().count());
                rest = &rest[i + end + 1..];
            }
            None => {
                rest = &rest[i..];
                break;
            }
        }
    }
    n + rest.chars().count()
}

pub fn render(view: &ReportView, opts: &RenderOptions) -> String {
    let a = view.answer();
    let mut parts: Vec<String> = Vec::new();
    if let Some(v) = &opts.verdict {
        parts.push(plain(v));
    }
    // Under the budget with the message's final newline.
    let room = (CHANNEL_BUDGET - 1).saturating_sub(parts.iter().map(|p| sent_len(p) + 2).sum());
    parts.extend(sections_within(&a, room));
    let mut out = parts.join("\n\n");
    if out.chars().count() > LIMIT {
        // Only reachable with absurdly long text from outside: cut at a line, never mid-markup.
        out = cut(&out, LIMIT - 1);
    }
    out.push('\n');
    out
}

/// The answer as mrkdwn paragraphs within `budget` characters as Slack shows them: where the whole
/// answer is longer, the least important lines go first (the other findings past the first, what
/// else moved, the warnings, the answered steps past the first, the notes, the info findings, the
/// probe's summary line (its refusal in front of the engines stays), the last answered step, the
/// time by hop, the second step, the deciding numbers past the first, the probe's last line, the
/// last other finding), and the message says how many lines it left out. Block Kit puts each paragraph in a section block
/// of its own.
pub(crate) fn sections_within(a: &Answer, budget: usize) -> Vec<String> {
    let a = &with_links_within(a);
    let whole = sections(a, 0);
    if sent_len(&whole.join("\n\n")) <= budget {
        return whole;
    }
    let mut a = a.clone();
    let mut cut = 0usize;
    let mut last = whole;
    while drop_one(&mut a) {
        cut += 1;
        last = sections(&a, cut);
        if sent_len(&last.join("\n\n")) <= budget {
            break;
        }
    }
    last
}

/// The answer with its chart links, the longest left out first, while the message as sent (links
/// whole) would pass [`LIMIT`]: a chart link is a convenience, and a PromQL of a few kilobytes in
/// one would otherwise make the message be cut and lose the facts themselves. The budget counts a
/// link as its label, so the lines kept do not change.
fn with_links_within(a: &Answer) -> Answer {
    let mut a = a.clone();
    loop {
        if sections(&a, 0).join("\n\n").chars().count() < LIMIT {
            return a;
        }
        let Some(l) = a.lead.as_mut() else { return a };
        let Some(longest) = l.numbers.iter_mut().filter(|n| n.link.is_some()).max_by_key(|n| n.link.as_ref().map_or(0, String::len)) else { return a };
        longest.link = None;
    }
}

/// Leave out the least important line the answer still has; false when nothing is left to drop.
fn drop_one(a: &mut Answer) -> bool {
    if a.others.len() > 1 {
        a.others.pop();
        a.other_severities.pop();
    } else if !a.moved.is_empty() {
        a.moved.pop();
    } else if !a.warnings.is_empty() {
        a.warnings.pop();
    } else if let Some(l) = a.lead.as_mut().filter(|l| l.checked.len() > 1) {
        l.checked.pop();
    } else if let Some(l) = a.lead.as_mut().filter(|l| !l.notes.is_empty()) {
        l.notes.pop();
    } else if a.noted.is_some() {
        a.noted = None;
    } else if a.probe.len() > 1 {
        // The probe's summary goes before its refusal in front of the engines, which names the cause.
        a.probe.remove(0);
    } else if let Some(l) = a.lead.as_mut().filter(|l| !l.checked.is_empty() && !l.checked_binding) {
        // The binding, where a step answered by it carries it, stays as the binding line would.
        l.checked.pop();
    } else if let Some(l) = a.lead.as_mut().filter(|l| l.hop.is_some()) {
        l.hop = None;
    } else if let Some(l) = a.lead.as_mut().filter(|l| l.steps.len() > 1) {
        l.steps.pop();
    } else if let Some(l) = a.lead.as_mut().filter(|l| l.numbers.len() > 1) {
        l.numbers.pop();
    } else if !a.probe.is_empty() {
        a.probe.pop();
    } else if !a.others.is_empty() {
        a.others.pop();
        a.other_severities.pop();
    } else {
        return false;
    }
    true
}

/// The answer as mrkdwn paragraphs: the lead finding, the rest of the findings, the context;
/// `cut` lines left out to fit the channel are said at the end.
fn sections(a: &Answer, cut: usize) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut head = vec![format!("{} *vllm-diag: {}*", icon(a), plain(&a.headline))];
    if let Some(l) = &a.lead {
        head.push(plain(&l.scope));
        for n in &l.numbers {
            let chart = n.link.as_ref().map(|url| format!(" <{url}|chart>")).unwrap_or_default();
            head.push(format!("• {}{chart}", plain(&n.line)));
        }
        head.extend(l.binding.iter().map(|b| plain(b)));
        head.extend(l.notes.iter().map(|n| format!("_{}_", plain(n))));
        head.extend(l.hop.iter().map(|h| format!("_{}_", plain(h))));
    }
    parts.push(head.join("\n"));
    if let Some(l) = &a.lead {
        let mut advice: Vec<String> = Vec::new();
        if !l.cards.is_empty() {
            advice.push(format!("*{}* ({})", l.try_heading, super::answer::CARD_UNITS));
            advice.extend(l.cards.iter().map(|c| format!("• {}", plain(&c.line))));
        }
        advice.extend(l.wont_help.iter().map(|w| plain(w)));
        if !l.checked.is_empty() {
            advice.push("*Checked*".to_string());
            advice.extend(l.checked.iter().map(|c| format!("• {}", plain(c))));
        }
        if !l.steps.is_empty() {
            advice.push("*Next*".to_string());
            advice.extend(l.steps.iter().enumerate().map(|(i, s)| format!("{}. {}", i + 1, plain(s))));
        }
        advice.extend(l.absorbed.iter().chain(&l.not_evaluated).map(|x| plain(x)));
        if !advice.is_empty() {
            parts.push(advice.join("\n"));
        }
    }
    let mut rest: Vec<String> = a.others.iter().map(|o| format!("• {}", plain(o))).collect();
    rest.extend(a.noted.iter().chain(&a.conclusion).chain(&a.probe).map(|x| plain(x)));
    if !a.moved.is_empty() {
        rest.push("*Also changed, not explained by any rule:*".to_string());
        rest.extend(a.moved.iter().map(|m| format!("• {}", plain(m))));
    }
    rest.extend(a.not_evaluated_pairs.iter().map(|n| format!("• {}", plain(n))));
    rest.extend(a.disabled.iter().map(|d| plain(d)));
    rest.extend(a.warnings.iter().map(|w| format!(":warning: {}", plain(w))));
    if cut > 0 {
        rest.push(format!("_{} left out to fit the channel; the full report has every line._", plural(cut, "line", "lines")));
    }
    if !rest.is_empty() {
        parts.push(rest.join("\n"));
    }
    parts.push(footer(a));
    parts
}

/// The context line, in italics: window, fleet, profile, rule counts, what was not evaluated.
pub(crate) fn footer(a: &Answer) -> String {
    let mut line = plain(&a.context);
    if let Some(n) = &a.not_evaluated {
        line.push_str(&format!(" · {}", plain(n)));
    }
    format!("_{line}_")
}

/// The verdict's icon.
pub(crate) fn icon(a: &Answer) -> &'static str {
    match (a.verdict, a.severity) {
        (_, Some(Severity::Critical)) => ":red_circle:",
        (_, Some(Severity::Warning)) => ":warning:",
        // No rule fired, but signals moved that none explains: not an all-clear.
        (Verdict::Clean | Verdict::Findings, _) if !a.moved.is_empty() => ":large_yellow_circle:",
        (Verdict::Findings, _) => ":information_source:",
        (Verdict::Clean, _) => ":white_check_mark:",
        (Verdict::NothingEvaluated | Verdict::Incomplete, _) => ":grey_question:",
    }
}

/// Text from anywhere made inert for Slack: its three escapes, and look-alikes for the characters
/// that would start bold, strike-through or code (Slack has no backslash escape). `_` is left
/// alone: Slack only italicises it at word boundaries, and metric names are full of it.
pub(crate) fn plain(s: &str) -> String {
    one_line(s)
        .chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '*' => "∗".to_string(),
            '~' => "∼".to_string(),
            '`' => "ˋ".to_string(),
            c => c.to_string(),
        })
        .collect()
}

/// A code span. Slack code spans cannot hold a backtick, so one inside becomes a look-alike.
pub(crate) fn code(s: &str) -> String {
    let s = one_line(s);
    if s.is_empty() {
        return String::new();
    }
    let inner: String = s
        .chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '`' => "ˋ".to_string(),
            c => c.to_string(),
        })
        .collect();
    format!("`{inner}`")
}

/// At most `max` characters, cut after a whole line when possible, with `…` marking the cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let keep: String = s.chars().take(max.saturating_sub(1)).collect();
    match keep.rfind('\n') {
        Some(i) if i > 0 => format!("{}…", keep[..i].trim_end()),
        _ => format!("{keep}…"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;
    use crate::report::Report;

    /// The Slack message of `report`, through the view as `render::render` does it.
    fn render(report: &Report, opts: &RenderOptions) -> String {
        super::render(&ReportView::new(report, opts), opts)
    }

    fn opts() -> RenderOptions {
        RenderOptions::default()
    }

    /// `n` more findings, copies of the first two on models of their own.
    fn more_findings(r: &mut Report, n: usize) {
        let template = r.findings.clone();
        for i in 0..n {
            let mut f = template[i % 2].clone();
            f.scope.insert("model_name".to_string(), format!("model-{i:02}"));
            r.findings.push(f);
        }
    }

    #[test]
    fn slack_snapshot_of_the_sample_report() {
        insta::assert_snapshot!(render(&sample_report(), &opts()));
    }

    #[test]
    fn slack_snapshot_of_a_clean_report() {
        insta::assert_snapshot!(render(&clean_report(), &opts()));
    }

    #[test]
    fn slack_snapshot_when_nothing_was_evaluated() {
        insta::assert_snapshot!(render(&nothing_evaluated_report(), &opts()));
    }

    #[test]
    fn slack_snapshot_of_the_sample_report_with_events() {
        insta::assert_snapshot!(render(&sample_report_with_events(), &opts()));
    }

    #[test]
    fn changes_no_rule_explains_are_listed_after_the_findings_three_at_most() {
        let text = render(&with_unexplained(clean_report(), 4), &opts());
        let heading = text.find("*Also changed, not explained by any rule:*").unwrap_or_else(|| panic!("{text}"));
        let listed: Vec<&str> = text[heading..].lines().skip(1).take_while(|l| l.starts_with("• ")).collect();
        assert_eq!(listed.len(), 4, "three and the count of the rest: {text}");
        assert!(listed[0].starts_with("• P95 time to first token up 2.4x on "), "{text}");
        assert_eq!(listed[3], "• ... and 1 more", "{text}");
        assert!(
            !text.contains(":white_check_mark:") && text.starts_with(":large_yellow_circle: *vllm-diag: NOT AN ALL-CLEAR: no warning or critical finding in "),
            "not an all-clear: {text}"
        );
        // After the findings, and nothing at all when nothing moved.
        let text = render(&with_unexplained(sample_report(), 1), &opts());
        let first_finding = text.find("kv-cache").unwrap_or_else(|| panic!("{text}"));
        assert!(text.find("*Also changed, not explained by any rule:*").is_some_and(|i| i > first_finding), "{text}");
        assert!(!render(&sample_report(), &opts()).contains("Also changed"));
    }

    #[test]
    fn the_change_a_finding_began_after_is_in_its_scope_line_and_its_notes() {
        let text = render(&sample_report_with_events(), &opts());
        let lines: Vec<&str> = text.lines().collect();
        // The first step names the change; without such a step, a note does; said once either way.
        assert!(lines[1].ends_with("since 09:03 UTC"), "{text}");
        assert!(text.contains("\n1. Start with the configuration change at 09:01:00 UTC (num_gpu_blocks 2000 -&gt; 900 on 2 of 3 replicas)"), "{text}");
        let mut r = sample_report_with_events();
        r.findings[0].steps.remove(0);
        let text = render(&r, &opts());
        assert!(text.contains("_Began 2 min after a configuration change at 09:01:00 UTC: num_gpu_blocks 2000 -&gt; 900 on 2 of 3 replicas_"), "{text}");
        assert!(!text.lines().nth(1).unwrap_or_default().contains("after a configuration change"), "said once: {text}");
    }

    #[test]
    fn the_most_important_finding_comes_first_and_the_next_in_one_line() {
        let text = render(&sample_report(), &opts());
        let kv = text.find("kv-cache-exhausted").unwrap();
        let ttft = text.find("• #2 WARNING ttft-regression: ").unwrap_or_else(|| panic!("{text}"));
        assert!(kv < ttft, "{text}");
    }

    #[test]
    fn there_are_no_tables_in_a_slack_message() {
        let text = render(&sample_report(), &opts());
        assert!(!text.contains('|') && !text.contains('┌') && !text.contains("---"), "{text}");
    }

    #[test]
    fn many_findings_keep_the_first_whole_and_count_the_rest() {
        let mut r = sample_report();
        more_findings(&mut r, 60);
        let text = render(&r, &opts());
        assert!(text.chars().count() <= 1500, "{} chars\n{text}", text.chars().count());
        // The first finding is still whole, steps included.
        assert!(text.contains("*Next*\n1. "), "{text}");
        // Every finding is either named or counted.
        let named = text.lines().filter(|l| l.starts_with("• #")).count();
        let more: usize = text
            .split("... and ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count of the rest\n{text}"));
        let serious = r.findings.iter().filter(|f| f.severity >= Severity::Warning).count();
        assert_eq!(1 + named + more, serious, "{text}");
    }

    #[test]
    fn long_warnings_are_kept_short_and_counted() {
        let mut r = sample_report();
        r.warnings =
            (0..60).map(|i| format!("series {i} of `vllm:kv_cache_usage_perc` has a gap of 12 minutes in the window {}", "and more ".repeat(30))).collect();
        let text = render(&r, &opts());
        assert!(text.chars().count() <= 1500, "{} chars\n{text}", text.chars().count());
        let warned: Vec<&str> = text.lines().filter(|l| l.starts_with(":warning: ")).collect();
        assert_eq!(warned.len(), 3, "two and the count of the rest: {text}");
        assert!(warned[0].ends_with('…') && warned[2].contains("58 more warnings"), "{text}");
        assert!(text.contains("*Next*"), "{text}");
    }

    #[test]
    fn huge_text_from_outside_cannot_break_the_limit() {
        let mut r = sample_report();
        r.findings[0].title = "x".repeat(10_000);
        r.warnings = vec!["w".repeat(10_000)];
        let text = render(&r, &opts());
        assert!(text.chars().count() <= LIMIT, "{} chars", text.chars().count());
    }

    /// A real router's HTTP queries are kilobytes of PromQL (the users' route list, the counters
    /// born mid-window): their chart links alone pass the limit. The links give way, the facts stay.
    #[test]
    fn chart_links_too_long_for_the_message_give_way_to_its_lines() {
        let mut r = sample_report();
        for e in &mut r.findings[0].evidence {
            e.query = format!("sum(rate(http_requests_total{{handler=~\"{}\"}}[3m]))", "/v1/completions|".repeat(200));
        }
        let linked = RenderOptions { links: Some(crate::render::links::GraphLinks::prometheus()), ..opts() };
        let short = render(&sample_report(), &linked);
        let long = render(&r, &linked);
        assert!(long.chars().count() < LIMIT, "{} chars", long.chars().count());
        let strip = |t: &str| -> Vec<String> { t.lines().map(|l| l.split(" <http").next().unwrap_or_default().to_string()).collect() };
        assert_eq!(strip(&long), strip(&short), "the same lines, without the links that did not fit:\n{long}");
        assert!(short.contains("|chart>") && !long.contains("|chart>"), "{long}");
        let blocks: serde_json::Value = serde_json::from_str(&super::super::slack_blocks::render(&ReportView::new(&r, &linked), &linked)).unwrap();
        for b in blocks["blocks"].as_array().unwrap() {
            let text = b["text"]["text"].as_str().unwrap_or_default();
            assert!(!text.contains('…') && text.chars().count() < LIMIT, "a block cut: {text}");
        }
    }

    #[test]
    fn outside_text_cannot_add_formatting_links_or_mentions() {
        assert_eq!(plain("*bold* <!channel> a & b ~x~ `c`"), "∗bold∗ &lt;!channel&gt; a &amp; b ∼x∼ ˋcˋ");
        assert_eq!(code("a`b<c>"), "`aˋb&lt;c&gt;`");
        let mut r = sample_report();
        r.findings[0].scope.insert("model_name".to_string(), "<!here>".to_string());
        let text = render(&r, &opts());
        assert!(!text.contains("<!here>"), "{text}");
    }

    #[test]
    fn checks_verdict_comes_first_escaped() {
        // The verdict names scopes, whose label values come from the server.
        let verdict = format!("FAIL: 1 critical finding since the deploy (kv-cache-pressure on m <!channel> <https://evil.example|login> {})", "x".repeat(150));
        let text = render(&sample_report(), &RenderOptions { verdict: Some(verdict), ..opts() });
        assert!(text.starts_with("FAIL: 1 critical finding"), "{text}");
        assert!(!text.contains("<!channel>") && !text.contains("<https://"), "{text}");
    }

    #[test]
    fn nothing_evaluated_is_not_called_healthy() {
        let text = render(&nothing_evaluated_report(), &opts()).to_lowercase();
        assert!(!text.contains("healthy") && !text.contains("white_check_mark"), "{text}");
    }

    #[test]
    fn a_live_run_says_how_long_ago_the_window_ended() {
        let r = sample_report();
        let now = r.window.end + chrono::Duration::minutes(12);
        let text = render(&r, &RenderOptions { now: Some(now), ..RenderOptions::default() });
        assert!(text.contains("(ended 12 min ago)"), "{text}");
        assert!(!render(&r, &opts()).contains("ago"));
    }
}
