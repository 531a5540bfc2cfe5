//! The default terminal format: the verdict first, then each warning or critical finding in a few
//! lines, then one footer. It answers "what is wrong, since when, what do I do" in a screenful:
//!
//! - the first line says what is wrong: the severity, the cause (rule id and title), the scope,
//!   since when, and the change it followed; or `OK: no problem found in N of M rules`; or `NOT AN
//!   ALL-CLEAR: ...` when core checks could not be judged, as prominently as the table's headline;
//! - each warning or critical finding: the two to four signals that decided it against their
//!   baseline and the line they crossed, the computed advice, the first two next steps (the first
//!   finding's heading is the verdict line itself);
//! - the footer: the window and its baseline, the fleet's size, the rules evaluated and found
//!   healthy, what could not be evaluated, and `-v` for the rest.
//!
//! Everything else (the full evidence table, the PromQL, the healthy list, the timeline) is the
//! table format's, which `-v` selects. Lines are wrapped to the terminal, at most
//! [`MAX_WIDTH`] columns, and to [`MAX_WIDTH`] when there is no terminal (a pipe, a file).

use super::table::wrap;
use super::view::{FindingView, ReportView};
use super::{RenderOptions, Verdict};
use crate::report::Severity;

/// The widest line this format writes (a word longer than a line is kept whole).
pub const MAX_WIDTH: usize = 100;

/// Indentation of a finding's lines.
const INDENT: &str = "   ";

/// How many of a finding's next steps are shown.
const STEPS: usize = 2;

pub fn render(view: &ReportView, opts: &RenderOptions) -> String {
    let width = opts.width.map_or(MAX_WIDTH, |w| usize::from(w).min(MAX_WIDTH));
    let w = Some(width);
    let mut out: Vec<String> = Vec::new();

    if let Some(v) = &opts.verdict {
        out.extend(wrap(&super::one_line(v), w, "", "  "));
        out.push(String::new());
    }
    let serious: Vec<&FindingView> = view.findings.iter().filter(|f| f.severity >= Severity::Warning).collect();
    match (view.verdict, serious.first()) {
        (Verdict::Findings, Some(top)) => {
            out.extend(painted(&verdict_of(top), width, top.severity.as_str().to_uppercase().as_str(), code(top.severity), opts.color));
            finding_lines(&mut out, top, width);
            for f in &serious[1..] {
                out.push(String::new());
                let head = format!("#{} {} {}", f.rank, f.severity.as_str().to_uppercase(), verdict_of(f).split_once(' ').map_or("", |(_, rest)| rest));
                let badge = format!("#{} {}", f.rank, f.severity.as_str().to_uppercase());
                out.extend(painted(&head, width, &badge, code(f.severity), opts.color));
                finding_lines(&mut out, f, width);
            }
        }
        _ => out.extend(no_problem_lines(view, width, opts.color)),
    }

    let info: Vec<String> = view
        .findings
        .iter()
        .filter(|f| f.severity < Severity::Warning)
        .map(|f| format!("{} ({})", f.rule, f.scope_short))
        .collect();
    let mut notes: Vec<String> = Vec::new();
    if !info.is_empty() {
        notes.extend(wrap(&format!("Also noted (info): {}", info.join(", ")), w, "", INDENT));
    }
    // The core checks the run could not judge, when findings are shown (the verdict says it otherwise).
    if let (Verdict::Findings, Some(sentence)) = (view.verdict, &view.conclusion) {
        notes.extend(wrap(sentence, w, "", INDENT));
    }
    if view.nothing_evaluated && !view.not_evaluated.is_empty() {
        notes.extend(wrap(&view.not_evaluated_heading, w, "", INDENT));
        for n in &view.not_evaluated {
            notes.extend(wrap(&format!("{} ({}): {}", n.rule, n.scope, n.reason), w, "  - ", "    "));
        }
    }
    for warning in &view.warnings {
        notes.extend(wrap(&format!("Warning: {warning}"), w, "", INDENT));
    }
    if !notes.is_empty() {
        out.push(String::new());
        out.extend(notes);
    }

    out.push(String::new());
    out.extend(wrap(&footer(view), w, "", ""));

    out.iter().map(|l| format!("{}\n", l.trim_end())).collect()
}

/// `CRITICAL kv-cache-pressure: KV-cache pressure is causing preemptions · Llama-3.1-8B-Instruct ·
/// since 08:50 UTC · after a configuration change at 09:01 UTC`.
fn verdict_of(f: &FindingView) -> String {
    let mut parts = vec![format!("{} {}: {}", f.severity.as_str().to_uppercase(), f.rule, f.title), f.scope_short.clone()];
    parts.extend(f.since.clone());
    parts.extend(f.after.clone());
    parts.join(" · ")
}

/// The first line when no warning or critical finding heads it: OK, not an all-clear, or nothing
/// evaluated, with what says why.
fn no_problem_lines(view: &ReportView, width: usize, color: bool) -> Vec<String> {
    let w = Some(width);
    let r = &view.rules;
    let in_rules = if r.total > 0 {
        format!("{} of {} rules", r.evaluated, r.total)
    } else {
        view.healthy.as_ref().map_or_else(|| "what was checked".to_string(), |h| h.pairs.clone())
    };
    let mut out = Vec::new();
    match view.verdict {
        Verdict::NothingEvaluated => {
            let sentence = view.conclusion.clone().unwrap_or_else(|| "Nothing was evaluated; this is not an all-clear.".into());
            out.extend(painted(&format!("NOTHING EVALUATED: {sentence}"), width, "NOTHING EVALUATED", "1;33", color));
        }
        Verdict::Incomplete => {
            let gaps = view.gaps.clone().unwrap_or_else(|| "core checks not evaluated".into());
            let line = format!("NOT AN ALL-CLEAR: {gaps} · no warning or critical finding in the {in_rules} evaluated");
            out.extend(painted(&line, width, "NOT AN ALL-CLEAR", "1;33", color));
            if let Some(sentence) = &view.conclusion {
                out.extend(wrap(sentence, w, "", INDENT));
            }
        }
        // Clean, or findings of info severity only.
        _ => {
            let mut line = if view.findings.is_empty() {
                format!("OK: no problem found in {in_rules}")
            } else {
                format!("OK: no warning or critical finding in {in_rules}")
            };
            if let Some(brief) = &view.not_evaluated_brief {
                line.push_str(&format!(" · not evaluated: {brief}"));
            }
            out.extend(painted(&line, width, "OK", "1;32", color));
        }
    }
    out
}

/// A finding's lines under its heading: the deciding numbers, the advice, the first next steps.
fn finding_lines(out: &mut Vec<String>, f: &FindingView, width: usize) {
    let w = Some(width);
    let rows: Vec<_> = f.deciding.iter().filter_map(|&i| f.evidence.get(i)).collect();
    let col = |get: &dyn Fn(&super::view::EvidenceView) -> usize| rows.iter().map(|e| get(e)).max().unwrap_or(0);
    let (tw, vw, bw) = (col(&|e| e.title.chars().count()), col(&|e| e.value.chars().count()), col(&|e| e.baseline.chars().count()));
    for e in &rows {
        let mut line = format!("{INDENT}{:<tw$}  {:>vw$} vs {:<bw$}  held: {}", e.title, e.value, e.baseline, e.condition_own);
        if let Some(c) = &e.confidence {
            line.push_str(&format!(" ({c})"));
        }
        if line.chars().count() <= width {
            out.push(line);
        } else {
            out.extend(wrap(&line, Some(width), INDENT, &format!("{INDENT}  ")));
        }
    }
    if let Some(line) = &f.stood_in {
        out.extend(wrap(line, w, INDENT, &format!("{INDENT}  ")));
    }
    for r in &f.recommendations {
        out.extend(wrap(&r.brief, w, INDENT, &format!("{INDENT}  ")));
    }
    for (n, step) in f.steps.iter().take(STEPS).enumerate() {
        let first = if n == 0 { format!("{INDENT}Next: 1. ") } else { format!("{INDENT}      {}. ", n + 1) };
        let rest = " ".repeat(first.chars().count());
        out.extend(wrap(step, w, &first, &rest));
    }
}

/// `2026-01-15 08:50 → 09:20 UTC vs the 30m before · 5 replicas · 24 of 25 rules evaluated, 21
/// healthy · run with -v for evidence and PromQL`.
fn footer(view: &ReportView) -> String {
    let h = &view.header;
    let mut parts = vec![format!("{} vs {}", window(&view.window_range), h.baseline_brief)];
    if let Some(fleet) = &h.fleet {
        let first = fleet.split(" · ").next().unwrap_or_default();
        parts.push(first.split(" by ").next().unwrap_or_default().to_string());
    }
    let r = &view.rules;
    if r.total > 0 && !view.nothing_evaluated {
        parts.push(format!("{} of {} rules evaluated, {} healthy", r.evaluated, r.total, r.healthy));
    }
    // The clean verdict names them already; nothing evaluated lists them.
    let named_above = (view.verdict == Verdict::Clean || view.findings.iter().all(|f| f.severity < Severity::Warning)) && view.verdict != Verdict::Incomplete;
    if let (Some(brief), false) = (&view.not_evaluated_brief, named_above || view.nothing_evaluated) {
        parts.push(format!("not evaluated: {brief}"));
    }
    if !view.disabled.is_empty() {
        parts.push(format!("disabled: {}", view.disabled.join(", ")));
    }
    parts.push("run with -v for evidence and PromQL".to_string());
    parts.join(" · ")
}

/// `2026-01-15 08:50 → 09:20 UTC`: the window in minutes (seconds when it has them), its end's
/// date only when it differs.
fn window(r: &crate::report::TimeRange) -> String {
    let clock = |t: &chrono::DateTime<chrono::Utc>| t.format(if t.timestamp() % 60 == 0 { "%H:%M" } else { "%H:%M:%S" }).to_string();
    let end = if r.start.date_naive() == r.end.date_naive() { clock(&r.end) } else { format!("{} {}", r.end.format("%Y-%m-%d"), clock(&r.end)) };
    format!("{} {} → {end} UTC", r.start.format("%Y-%m-%d"), clock(&r.start))
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
