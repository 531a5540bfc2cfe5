//! Slack mrkdwn, for an incident channel read on a phone.
//!
//! Slack is not Markdown: `*bold*`, `_italic_`, no headings, no tables, and `&`, `<`, `>` are its
//! only escapes (`<...>` is a link or a mention). So the message is short lines and bullets, label
//! values and metric names go in code spans, and text from outside (server warnings, failure
//! reasons) has its markup characters replaced by look-alikes, since Slack has no backslash escape.
//!
//! Slack truncates a message's text beyond 40,000 characters, recommends staying under 4,000, and
//! a section block holds at most 3,000; the whole message is kept within [`LIMIT`] so it can be
//! posted as text or as one section block. The most important finding comes first and is shown in
//! full; when the rest do not fit, they shrink to one line each, and what still does not fit is
//! counted in a closing "and N more" line that says where the whole report is. The timeline (one
//! line per change) keeps [`TIMELINE_RESERVE`] characters for its most relevant events and takes
//! what the findings leave; the events it cannot show are counted. The tail (what was not
//! evaluated, the warnings, the blind spots) counts for at most [`TAIL_RESERVE`] while the findings
//! are laid out, so a server's long warnings cannot push the first finding's evidence out; it gets
//! the rest, each of its lines shortened alike so that none of them disappears.

use super::view::{FindingView, ReportView};
use super::{one_line, plural, RenderOptions, Verdict};
use crate::report::Severity;

/// Characters (not bytes) a message may take: one Slack section block.
pub const LIMIT: usize = 3000;
/// Characters the timeline may take before the findings are laid out; it gets more when they
/// leave more.
const TIMELINE_RESERVE: usize = 400;
/// Characters the tail (not evaluated, healthy, switched off, warnings, blind spots) counts for
/// when the findings are laid out: it is context, so a long list of warnings takes what the
/// findings leave rather than pushing the first finding's evidence and steps out.
const TAIL_RESERVE: usize = 600;
/// Characters one line of the tail may take; a longer one (a server's warnings) is cut.
const TAIL_LINE: usize = 400;

pub fn render(view: &ReportView, opts: &RenderOptions) -> String {
    // check's verdict comes first and counts in the limit like the rest of the head.
    let mut head_lines = Vec::new();
    if let Some(v) = &opts.verdict {
        head_lines.extend([plain(v), String::new()]);
    }
    head_lines.extend(head(view));
    let head_text = head_lines.join("\n");
    // The tail is context; it may be cut to one line, never the findings' headline.
    let tail_lines = tail(view);
    let tail_text = tail_lines.join("\n");

    let full: Vec<String> = view.findings.iter().map(finding_full).collect();
    let lean_all: Vec<String> = view.findings.iter().map(|f| finding_full_with(f, false)).collect();
    let lean = lean_all.first().cloned().unwrap_or_default();
    let brief: Vec<String> = view.findings.iter().map(finding_brief).collect();

    let len = |s: &str| s.chars().count();
    // Room for the closing "and N more" line, reserved whenever anything may need cutting.
    let more_line = |n: usize| {
        format!(
            "_…and {} not shown here; `vllm-diag explain --format markdown` or `--format html` has the whole report._",
            plural(n, "more finding", "more findings")
        )
    };
    // The timeline keeps a little room whatever the findings take: its heading, its most relevant
    // events and the count of the rest (nothing at all without events).
    let timeline_reserve = timeline(view, TIMELINE_RESERVE).map_or(0, |t| len(&t) + 2);
    // What else moved: a few lines at most, after the findings, always shown (on a run where no
    // rule fired it is the news).
    let moved = unexplained(view);
    let moved_len = moved.as_ref().map_or(0, |m| len(m) + 2);
    // The tail counts for at most its reserve: the findings come first, and it is shortened to
    // what they and the timeline leave.
    let fixed = len(&head_text) + 2 + len(&tail_text).min(TAIL_RESERVE) + 2 + timeline_reserve + moved_len;
    let budget = |reserve: usize| LIMIT.saturating_sub(fixed + reserve);

    let total_full: usize = full.iter().map(|b| len(b) + 2).sum();
    let mut blocks: Vec<String> = Vec::new();
    let mut omitted = 0;
    let total_lean: usize = lean_all.iter().map(|b| len(b) + 2).sum();
    if total_full <= budget(0) {
        blocks = full;
    } else if total_lean <= budget(0) {
        // Every finding in full fits once the cards beyond the first recommendation give way.
        blocks = lean_all;
    } else {
        let reserve = len(&more_line(view.findings.len())) + 2;
        let mut used = 0;
        for (i, (f, b)) in full.iter().zip(&brief).enumerate() {
            // The first finding is shown in full when it fits (without its cards when only that fits);
            // the others one line each.
            let candidate = if i == 0 && len(f) + 2 <= budget(reserve) {
                f
            } else if i == 0 && len(&lean) + 2 <= budget(reserve) {
                &lean
            } else {
                b
            };
            if used + len(candidate) + 2 <= budget(reserve) {
                used += len(candidate) + 2;
                blocks.push(candidate.clone());
            } else {
                omitted = view.findings.len() - i;
                break;
            }
        }
    }
    if omitted > 0 {
        blocks.push(more_line(omitted));
    }

    let mut parts = vec![head_text];
    parts.extend(blocks);
    parts.extend(moved);
    // The timeline takes the room the findings and the tail leave, one line per event.
    // It keeps the room reserved for it whatever the tail would take.
    let taken: usize = parts.iter().map(|p| len(p) + 2).sum::<usize>() + len(&tail_text) + 2;
    let room = LIMIT.saturating_sub(taken).max(timeline_reserve.saturating_sub(2));
    if let Some(timeline) = timeline(view, room) {
        parts.push(timeline);
    }
    let body_len: usize = parts.iter().map(|p| len(p) + 2).sum();
    if let Some(tail) = fit_tail(&tail_lines, LIMIT.saturating_sub(body_len)) {
        parts.push(tail);
    }
    let mut out = parts.join("\n\n");
    if len(&out) > LIMIT {
        // Only reachable with absurdly long rule titles or scopes: cut at a line, never mid-markup.
        out = cut(&out, LIMIT - 1);
    }
    out.push('\n');
    out
}

/// The verdict with its icon, what was compared and where the numbers come from, and the
/// closing sentence (the all-clear, or why there is none).
fn head(view: &ReportView) -> Vec<String> {
    let icon = match (view.verdict, view.worst) {
        (Verdict::Findings, Some(Severity::Critical)) => ":red_circle:",
        (Verdict::Findings, Some(Severity::Warning)) => ":warning:",
        (Verdict::Findings, _) => ":information_source:",
        // No rule fired, but signals moved that none explains: not an all-clear.
        (Verdict::Clean, _) if !view.unexplained.is_empty() => ":large_yellow_circle:",
        (Verdict::Clean, _) => ":white_check_mark:",
        (Verdict::NothingEvaluated | Verdict::Incomplete, _) => ":grey_question:",
    };
    let h = &view.header;
    let mut head = vec![
        format!("{icon} *vllm-diag: {}*", plain(&view.headline)),
        format!("Window {} · baseline {}", h.window, h.baseline_brief),
    ];
    let mut source = format!("Source {} {}", plain(&h.source_kind), code(&h.source_url));
    if let Some(sel) = &h.selector {
        source.push_str(&format!(", selector {}", code(sel)));
    }
    head.push(source);
    if let Some(sentence) = &view.conclusion {
        head.push(plain(sentence));
    }
    head
}

/// "Also changed, not explained by any rule": the first [`super::view::UNEXPLAINED_LISTED`] changes
/// (each line cut to [`TAIL_LINE`]) and how many more the JSON has. `None` when nothing moved.
fn unexplained(view: &ReportView) -> Option<String> {
    if view.unexplained.is_empty() {
        return None;
    }
    let mut lines = vec!["*Also changed, not explained by any rule:*".to_string()];
    for u in view.unexplained.iter().take(super::view::UNEXPLAINED_LISTED) {
        let line = format!("• {}", plain(&u.line));
        lines.push(if line.chars().count() > TAIL_LINE { format!("{}…", line.chars().take(TAIL_LINE - 1).collect::<String>()) } else { line });
    }
    let more = view.unexplained.len().saturating_sub(super::view::UNEXPLAINED_LISTED);
    if more > 0 {
        lines.push(format!("_… and {more} more (see `--format json`)_"));
    }
    Some(lines.join("\n"))
}

/// The timeline in at most `room` characters: its heading, then one line per listed event, oldest
/// first; when they do not all fit, the most relevant that do (see [`super::view::EventView::relevance`]),
/// and how many were left out. `None` when nothing changed or not even the heading fits.
fn timeline(view: &ReportView, room: usize) -> Option<String> {
    let heading = format!("*{}*", plain(view.timeline_heading.as_deref()?));
    let len = |s: &str| s.chars().count();
    let more = |n: usize| format!("_… and {n} more (see `--format json`)_");
    let total = view.timeline.len();
    let mut events: Vec<(&super::view::EventView, String)> = view
        .timeline_listed()
        .map(|e| {
            let mut line = format!("• {} {} ({})", plain(&e.time), code(e.kind.as_str()), plain(&e.scope));
            if !e.detail.is_empty() {
                line.push_str(&format!(": {}", plain(&e.detail)));
            }
            (e, line)
        })
        .collect();
    let mut used = len(&heading);
    let all_fit = events.len() == total && used + events.iter().map(|(_, l)| len(l) + 1).sum::<usize>() <= room;
    if !all_fit {
        let reserve = len(&more(total)) + 1;
        events.sort_by_key(|(e, _)| e.relevance);
        let mut kept = Vec::new();
        for (e, line) in events {
            if used + len(&line) + 1 + reserve <= room {
                used += len(&line) + 1;
                kept.push((e, line));
            }
        }
        kept.sort_by(|a, b| a.0.at.total_cmp(&b.0.at));
        events = kept;
        used += reserve;
    }
    if used > room {
        return None;
    }
    let shown = events.len();
    let mut lines = vec![heading];
    lines.extend(events.into_iter().map(|(_, l)| l));
    if shown < total {
        lines.push(more(total - shown));
    }
    Some(lines.join("\n"))
}

/// What could not be checked, what was healthy, what was switched off, and the warnings.
fn tail(view: &ReportView) -> Vec<String> {
    let mut tail: Vec<String> = Vec::new();
    if !view.not_evaluated.is_empty() {
        let shown: Vec<String> = view
            .not_evaluated
            .iter()
            .take(3)
            .map(|n| format!("{} ({}): {}", code(&n.rule), code(&n.scope), plain(&n.reason)))
            .collect();
        let more = view.not_evaluated.len().saturating_sub(shown.len());
        let mut line = format!(":grey_question: Not evaluated ({}): {}", view.not_evaluated_pairs(), shown.join("; "));
        if more > 0 {
            line.push_str(&format!("; and {more} more"));
        }
        tail.push(line);
    }
    if let Some(healthy) = &view.healthy {
        tail.push(format!("Checked and healthy: {}", healthy.pairs));
    }
    if let Some(line) = &view.disabled_line {
        tail.push(plain(line));
    }
    if !view.warnings.is_empty() {
        tail.push(format!(":warning: {}", plain(&view.warnings.join("; "))));
    }
    if !view.caveats.is_empty() {
        tail.push(format!(":eyes: Blind spots: {}", plain(&view.caveats.join("; "))));
    }
    tail.into_iter().map(|line| cut_line(&line, TAIL_LINE)).collect()
}

/// The tail's lines in at most `room` characters: every line when they fit; else the longest
/// cut to one length, the most that fits (short lines stay whole), so what could not be checked,
/// the warnings and the blind spots are all still said; else as many lines, from the first, as
/// fit cut to a readable least. `None` when not even one does.
fn fit_tail(lines: &[String], room: usize) -> Option<String> {
    const LEAST: usize = 60;
    let len = |s: &str| s.chars().count();
    let joined = lines.join("\n");
    if lines.is_empty() || len(&joined) <= room {
        return (!lines.is_empty()).then_some(joined);
    }
    // The largest length every line may keep with the lines still within the room.
    let fits = |cap: usize| lines.iter().map(|l| len(l).min(cap) + 1).sum::<usize>() <= room + 1;
    let (mut lo, mut hi) = (LEAST, lines.iter().map(|l| len(l)).max().unwrap_or(0));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let mut kept = Vec::new();
    let mut used = 0;
    for line in lines {
        let line = cut_line(line, lo);
        if used + len(&line) + 1 > room + 1 {
            break;
        }
        used += len(&line) + 1;
        kept.push(line);
    }
    (!kept.is_empty()).then(|| kept.join("\n"))
}

/// One line in at most `max` characters, cut at a word and outside any code span or bold run
/// (Slack would show a lone backtick or asterisk as it is), with `…` marking the cut.
fn cut_line(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut keep: String = s.chars().take(max.saturating_sub(1)).collect();
    if let Some(i) = keep.rfind(' ') {
        keep.truncate(i);
    }
    // An odd count of a markup character means the cut fell inside a span it opened.
    for mark in ['`', '*'] {
        if keep.matches(mark).count() % 2 == 1 {
            if let Some(i) = keep.rfind(mark) {
                keep.truncate(i);
            }
        }
    }
    format!("{}…", keep.trim_end())
}

/// Heading, summary, the evidence held to a condition (with its trend), and the next steps.
fn finding_full(f: &FindingView) -> String {
    finding_full_with(f, true)
}

/// A finding in full; `cards` false leaves out the cards beyond the first recommendation and the
/// won't-help lines (what a finding gives up before its evidence and next steps when room is short).
fn finding_full_with(f: &FindingView, cards: bool) -> String {
    let mut lines = vec![heading(f)];
    if let Some(summary) = &f.summary {
        lines.push(plain(summary));
    }
    if let Some(line) = &f.onset {
        lines.push(plain(line));
    }
    if let Some(line) = &f.preceded_by {
        lines.push(plain(line));
    }
    let mut context = 0;
    for e in &f.evidence {
        if e.condition.is_empty() {
            context += 1;
            continue;
        }
        let mut line = format!("• {}: *{}*, baseline {}", linked_title(e), plain(&e.value), plain(&e.baseline));
        if let Some(change) = &e.change {
            line.push_str(&format!(" ({})", plain(change)));
        }
        line.push_str(&format!(" — {} {}", code(&e.condition), if e.held { "held" } else { "did not hold" }));
        if let Some(c) = &e.confidence {
            line.push_str(&format!("; {c}"));
        }
        if let Some(s) = &e.sparkline {
            line.push_str(&format!(" {}", code(s)));
        }
        lines.push(line);
    }
    if context > 0 {
        lines.push(format!("_{} for context in the full report_", plural(context, "more signal", "more signals")));
    }
    for line in f.stood_in.iter().chain(&f.recent) {
        lines.push(format!("_{}_", plain(line)));
    }
    if let Some(line) = &f.replicas {
        lines.push(format!("Affected: {}", plain(line)));
    }
    for (i, r) in f.recommendations.iter().enumerate() {
        // The first recommendation in full; the other cards by their first sentence, so the
        // finding's evidence and next steps keep their room in Slack's 3,000 characters.
        if i == 0 {
            lines.push(format!("*{}*: {}", plain(&r.head), plain(&r.how)));
        } else if cards {
            lines.push(plain(&r.brief));
        }
        if let Some(card) = r.card_brief.as_ref().filter(|_| cards) {
            lines.push(plain(card));
        }
    }
    if cards {
        lines.extend(f.wont_help.iter().map(|l| plain(l)));
    }
    if !f.steps.is_empty() {
        lines.push("*Next steps*".to_string());
        for (n, s) in f.steps.iter().enumerate() {
            lines.push(format!("{}. {}", n + 1, plain(s)));
        }
    }
    if let Some(also) = f.also_consistent_list(code) {
        lines.push(format!("Also consistent: {also}"));
    }
    lines.join("\n")
}

/// One line: heading only, with the strongest held signal.
fn finding_brief(f: &FindingView) -> String {
    let mut line = heading(f);
    if let Some(e) = f.evidence.iter().find(|e| e.held_condition()) {
        line.push_str(&format!(" — {} *{}* ({})", linked_title(e), plain(&e.value), code(&e.condition)));
    }
    line
}

/// An evidence title, as a link to its chart when the run has links. Slack links are `<url|text>`;
/// a link never holds `|` or `>` (see [`super::links`]).
fn linked_title(e: &super::view::EvidenceView) -> String {
    match &e.link {
        Some(l) => format!("<{l}|{}>", plain(&e.title)),
        None => plain(&e.title),
    }
}

fn heading(f: &FindingView) -> String {
    format!(
        "*#{} {} · {}*\n{} on {}",
        f.rank,
        f.severity.as_str().to_uppercase(),
        plain(&f.title),
        code(&f.rule),
        code(&f.scope)
    )
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
    use crate::report::{NotEvaluated, Report};

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
    fn changes_no_rule_explains_are_listed_after_the_findings_three_at_most_and_within_the_limit() {
        let text = render(&with_unexplained(clean_report(), 4), &opts());
        let heading = text.find("*Also changed, not explained by any rule:*").unwrap_or_else(|| panic!("{text}"));
        let listed: Vec<&str> = text[heading..].lines().skip(1).take_while(|l| l.starts_with("• ")).collect();
        assert_eq!(listed.len(), 3, "{text}");
        assert!(listed[0].starts_with("• P95 time to first token up 2.4x (robust z 31) on "), "{text}");
        assert!(text.contains("_… and 1 more (see `--format json`)_"), "{text}");
        assert!(!text.contains(":white_check_mark:") && text.starts_with(":large_yellow_circle: *vllm-diag: no rule fired, but 4 signals moved"), "not an all-clear: {text}");
        // After the findings, and nothing at all when nothing moved.
        let text = render(&with_unexplained(sample_report(), 1), &opts());
        let first_finding = text.find("kv-cache").unwrap_or_else(|| panic!("{text}"));
        assert!(text.find("*Also changed, not explained by any rule:*").is_some_and(|i| i > first_finding), "{text}");
        assert!(!render(&sample_report(), &opts()).contains("Also changed"));
        // Many findings beside them: still one section block.
        let mut r = with_unexplained(sample_report(), 9);
        more_findings(&mut r, 30);
        let text = render(&r, &opts());
        assert!(text.chars().count() <= LIMIT && text.contains("Also changed, not explained by any rule"), "{} chars", text.chars().count());
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
    fn each_event_is_one_line_and_the_change_a_finding_began_after_follows_its_onset() {
        let text = render(&sample_report_with_events(), &opts());
        let lines: Vec<&str> = text.lines().collect();
        let at = lines.iter().position(|l| *l == "Started 09:03 UTC").expect("onset");
        assert!(lines[at + 1].starts_with("Began 2 min after a configuration change at 09:01 UTC"), "{text}");
        let head = lines.iter().position(|l| l.starts_with("*Timeline: 6 changes")).expect("timeline");
        let events: Vec<&str> = lines[head + 1..].iter().take_while(|l| l.starts_with("• ")).copied().collect();
        assert_eq!(events.len(), 6, "{text}");
        assert_eq!(events[4], "• 09:01:00 UTC `config-change` (llama-3.1-70b-instruct): num_gpu_blocks 2000 -&gt; 900 on 2 of 3 replicas");
    }

    #[test]
    fn a_long_timeline_beside_many_findings_stays_within_the_limit_and_counts_what_it_left_out() {
        let mut r = sample_report_with_events();
        more_findings(&mut r, 8);
        let e = r.events[0].clone();
        for i in 0..40 {
            let mut e = e.clone();
            e.detail = format!("{i} {}", "long detail ".repeat(8));
            r.events.push(e);
        }
        let text = render(&r, &opts());
        assert!(text.chars().count() <= LIMIT, "{} chars", text.chars().count());
        let shown = text.lines().filter(|l| l.starts_with("• ") && l.contains(" UTC `")).count();
        let more: usize = text
            .split("_… and ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count of the events left out\n{text}"));
        assert_eq!(shown + more, r.events.len(), "{text}");
        // The tail (what could not be checked, the warnings) is still there.
        assert!(text.contains(":grey_question: Not evaluated") && text.contains("10.0.3.7:10901"), "{text}");
    }

    #[test]
    fn the_most_important_finding_comes_first() {
        let text = render(&sample_report(), &opts());
        let kv = text.find("kv-cache-exhausted").unwrap();
        let ttft = text.find("ttft-regression` on").unwrap();
        assert!(kv < ttft, "{text}");
    }

    #[test]
    fn there_are_no_tables_in_a_slack_message() {
        let text = render(&sample_report(), &opts());
        assert!(!text.contains('|') && !text.contains('┌') && !text.contains("---"), "{text}");
    }

    #[test]
    fn many_findings_stay_within_the_limit_and_say_how_many_were_left_out() {
        let mut r = sample_report();
        more_findings(&mut r, 60);
        let text = render(&r, &opts());
        assert!(text.chars().count() <= LIMIT, "{} chars", text.chars().count());
        assert!(text.contains("more findings not shown here"), "{text}");
        // The first finding is still shown in full, steps included.
        assert!(text.contains("*Next steps*"), "{text}");
        // Every finding is either shown or counted.
        let shown = text.matches("\n`kv-cache-exhausted` on").count() + text.matches("\n`ttft-regression` on").count();
        let more: usize = text
            .split("…and ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert_eq!(shown + more, r.findings.len(), "{text}");
    }

    #[test]
    fn long_warnings_give_way_to_the_first_findings_evidence_and_steps() {
        let mut r = sample_report_with_events();
        more_findings(&mut r, 6);
        // A server that warns about every one of sixty series, each warning a long sentence.
        r.warnings = (0..60).map(|i| format!("series {i} of `vllm:kv_cache_usage_perc` has a gap of 12 minutes in the window {}", "and more ".repeat(6))).collect();
        r.caveats = (0..20).map(|i| format!("blind spot {i}: {}", "this backend cannot say ".repeat(4))).collect();
        let ne = r.not_evaluated[0].clone();
        r.not_evaluated.extend((0..20).map(|i| NotEvaluated { reason: format!("{i} {}", "no data in the window ".repeat(5)), ..ne.clone() }));
        let text = render(&r, &opts());
        assert!(text.chars().count() <= LIMIT, "{} chars", text.chars().count());
        // The first finding keeps its evidence and its next steps ...
        assert!(text.contains("*Next steps*"), "{text}");
        assert!(text.contains("held"), "{text}");
        // ... the next findings their headlines, the timeline its room ...
        assert!(text.contains("*#2 WARNING"), "{text}");
        assert!(text.contains("*Timeline: "), "{text}");
        // ... and every kind of context is still said, each line shortened.
        for start in [":grey_question: Not evaluated (22 rule/scope pairs): ", "Checked and healthy: ", ":eyes: Blind spots: "] {
            assert!(text.lines().any(|l| l.starts_with(start)), "{start}\n{text}");
        }
        // ... and the warnings are still said, cut at a word and outside a code span.
        let line = text.lines().find(|l| l.starts_with(":warning: ")).unwrap_or_else(|| panic!("no warnings line\n{text}"));
        assert!(line.chars().count() <= TAIL_LINE && line.ends_with('…'), "{line}");
        assert_eq!(line.matches('`').count() % 2, 0, "{line}");
    }

    #[test]
    fn a_cut_line_never_leaves_a_span_open() {
        assert_eq!(cut_line("short", 10), "short");
        assert_eq!(cut_line("one two three four", 10), "one two…");
        assert_eq!(cut_line("a `long code span here` b", 14), "a…");
        assert_eq!(cut_line("x *bold words here* y", 12), "x…");
        assert!(cut_line(&"w".repeat(1000), 50).chars().count() <= 50);
    }

    #[test]
    fn huge_text_from_outside_cannot_break_the_limit() {
        let mut r = sample_report();
        r.findings[0].title = "x".repeat(10_000);
        r.warnings = vec!["w".repeat(10_000)];
        let text = render(&r, &opts());
        assert!(text.chars().count() <= LIMIT, "{} chars", text.chars().count());
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
    fn checks_verdict_comes_first_escaped_and_counts_in_the_limit() {
        // The verdict names scopes, whose label values come from the server.
        let verdict = format!("FAIL: 1 critical finding since the deploy (kv-cache-pressure on m <!channel> <https://evil.example|login> {})", "x".repeat(150));
        let mut r = sample_report();
        more_findings(&mut r, 60);
        let text = render(&r, &RenderOptions { verdict: Some(verdict), ..opts() });
        assert!(text.starts_with("FAIL: 1 critical finding"), "{text}");
        assert!(!text.contains("<!channel>") && !text.contains("<https://"), "{text}");
        assert!(text.chars().count() <= LIMIT, "{} chars", text.chars().count());
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
        assert!(text.contains("ended 12 min ago"), "{text}");
        assert!(!render(&r, &opts()).contains("ago"));
    }
}
