//! Slack Block Kit JSON: the [answer](super::answer) as a message payload a Slack incoming
//! webhook (or `chat.postMessage`) takes as it is: `{"text": ..., "blocks": [...]}`.
//!
//! The blocks are the mrkdwn paragraphs of [`super::slack`], one section block each, and the
//! context line as a context block; `text` is the verdict, which Slack shows in notifications.
//! Slack's limits are kept: at most [`MAX_BLOCKS`] blocks, at most [`MAX_TEXT`] characters in a
//! section's text (a longer paragraph is split at lines into several sections; a single longer
//! line, only possible with absurd text from outside, is cut), and the fallback `text` within
//! [`MAX_TEXT`] as well.

use serde_json::{json, Value};

use super::view::ReportView;
use super::{slack, RenderOptions};

/// Blocks a message may hold.
pub const MAX_BLOCKS: usize = 50;
/// Characters a section block's text may hold.
pub const MAX_TEXT: usize = 3000;

pub fn render(view: &ReportView, _opts: &RenderOptions) -> String {
    let a = view.answer();
    let mut paragraphs = slack::sections_within(&a, slack::CHANNEL_BUDGET - 1);
    let footer = paragraphs.pop().unwrap_or_default();
    let mut blocks: Vec<Value> = Vec::new();
    for p in &paragraphs {
        for text in split(p, MAX_TEXT) {
            blocks.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": text}}));
        }
    }
    // Room for the context block, always last.
    blocks.truncate(MAX_BLOCKS - 1);
    blocks.push(json!({"type": "context", "elements": [{"type": "mrkdwn", "text": cut(&footer, MAX_TEXT)}]}));
    let fallback = format!("{} {}", slack::icon(&a), slack::plain(&a.headline));
    let payload = json!({"text": cut(&fallback, MAX_TEXT), "blocks": blocks});
    let mut out = serde_json::to_string_pretty(&payload).unwrap_or_else(|_| "{}".to_string());
    out.push('\n');
    out
}

/// A paragraph in pieces of at most `max` characters, split between lines.
fn split(p: &str, max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    for line in p.lines() {
        let line = cut(line, max);
        if !cur.is_empty() && cur.chars().count() + 1 + line.chars().count() > max {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push('\n');
        }
        cur.push_str(&line);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// At most `max` characters, with `…` marking a cut.
fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    format!("{}…", s.chars().take(max - 1).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;

    fn blocks(r: &crate::report::Report) -> Value {
        let text = render(&ReportView::new(r, &RenderOptions::default()), &RenderOptions::default());
        serde_json::from_str(&text).expect("valid JSON")
    }

    #[test]
    fn the_payload_has_a_fallback_text_and_section_blocks_ending_in_the_context() {
        let v = blocks(&sample_report());
        assert!(v["text"].as_str().is_some_and(|t| t.starts_with(":red_circle: CRITICAL kv-cache-exhausted")), "{v:#}");
        let b = v["blocks"].as_array().expect("blocks");
        assert!(b.len() >= 3, "{v:#}");
        assert!(b[..b.len() - 1].iter().all(|x| x["type"] == "section" && x["text"]["type"] == "mrkdwn"), "{v:#}");
        assert_eq!(b.last().map(|x| x["type"].clone()), Some(json!("context")));
    }

    #[test]
    fn absurd_text_from_outside_keeps_slacks_limits() {
        let mut r = sample_report();
        r.findings[0].title = "x".repeat(10_000);
        r.warnings = (0..200).map(|i| format!("warning {i} {}", "w".repeat(4000))).collect();
        let v = blocks(&r);
        let b = v["blocks"].as_array().expect("blocks");
        assert!(b.len() <= MAX_BLOCKS);
        for x in b {
            let text = x["text"]["text"].as_str().or(x["elements"][0]["text"].as_str()).unwrap_or_default();
            assert!(text.chars().count() <= MAX_TEXT, "{} chars", text.chars().count());
        }
        assert!(v["text"].as_str().unwrap_or_default().chars().count() <= MAX_TEXT);
    }

    #[test]
    fn a_paragraph_longer_than_a_block_is_split_between_lines() {
        let p = (0..10).map(|i| format!("line {i} {}", "y".repeat(50))).collect::<Vec<_>>().join("\n");
        let pieces = split(&p, 200);
        assert!(pieces.len() > 1 && pieces.iter().all(|x| x.chars().count() <= 200));
        assert_eq!(pieces.join("\n"), p);
    }
}
