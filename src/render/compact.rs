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

    // check's verdict stays one line whatever its length: CI reads the first line (`check --help`).
    if let Some(v) = &opts.verdict {
        out.push(super::one_line(v));
        out.push(String::new());
    }
    let serious: Vec<&FindingView> = view.findings.iter().filter(|f| f.severity >= Severity::Warning).collect();
    // Time by hop (render/hops.rs): a model's sentence under its first finding, where a hop grew;
    // the models without a finding get a block of their own below.
    let mut hops_told: Vec<&str> = Vec::new();
    let mut hop_of = |f: &FindingView| -> Option<String> {
        let h = view.hops.iter().find(|h| h.grew.is_some() && h.scope == f.scope_short)?;
        (!hops_told.contains(&h.scope.as_str())).then(|| {
            hops_told.push(&h.scope);
            format!("Time by hop: {}", h.sentence)
        })
    };
    match (view.verdict, serious.first()) {
        (Verdict::Findings, Some(top)) => {
            out.extend(painted(&verdict_of(top), width, top.severity.as_str().to_uppercase().as_str(), code(top.severity), opts.color));
            finding_lines(&mut out, top, hop_of(top).as_deref(), width);
            for f in &serious[1..] {
                out.push(String::new());
                let head = format!("#{} {} {}", f.rank, f.severity.as_str().to_uppercase(), verdict_of(f).split_once(' ').map_or("", |(_, rest)| rest));
                let badge = format!("#{} {}", f.rank, f.severity.as_str().to_uppercase());
                out.extend(painted(&head, width, &badge, code(f.severity), opts.color));
                finding_lines(&mut out, f, hop_of(f).as_deref(), width);
            }
        }
        _ => out.extend(no_problem_lines(view, width, opts.color)),
    }
    let rest: Vec<super::hops::HopView> = view.hops.iter().filter(|h| !hops_told.contains(&h.scope.as_str())).cloned().collect();
    if let Some((head, lines)) = super::hops::compact_lines(&rest).split_first() {
        out.push(String::new());
        out.push(head.clone());
        for l in lines {
            out.extend(wrap(l, w, "  - ", "    "));
        }
    }

    // What else moved, after the findings: bounded, the rest in -v and JSON.
    if !view.unexplained.is_empty() && view.verdict != Verdict::NothingEvaluated {
        out.push(String::new());
        out.push("Also changed, not explained by any rule:".to_string());
        for u in view.unexplained.iter().take(super::view::UNEXPLAINED_LISTED) {
            out.extend(wrap(&u.line, w, "  - ", "    "));
        }
        if view.unexplained.len() > super::view::UNEXPLAINED_LISTED {
            out.push(format!("  ({} more in -v and --format json)", view.unexplained.len() - super::view::UNEXPLAINED_LISTED));
        }
    }

    let info: Vec<String> = view
        .findings
        .iter()
        .filter(|f| f.severity < Severity::Warning)
        .map(|f| match (&f.cold_start, &f.replica_cause) {
            (Some(c), _) | (None, Some(c)) => format!("{} ({}): {c}", f.rule, f.scope_short),
            (None, None) => format!("{} ({})", f.rule, f.scope_short),
        })
        .collect();
    let mut notes: Vec<String> = Vec::new();
    if !info.is_empty() {
        notes.extend(wrap(&format!("Also noted (info): {}", info.join(", ")), w, "", INDENT));
    }
    // The core checks the run could not judge, when findings are shown (the verdict says it otherwise).
    if let (Verdict::Findings, Some(sentence)) = (view.verdict, &view.conclusion) {
        notes.extend(wrap(sentence, w, "", INDENT));
    }
    if view.verdict == Verdict::NothingEvaluated && !view.not_evaluated.is_empty() {
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
        // No rule fired (or only info), but signals moved that no rule explains: not an all-clear.
        _ if !view.unexplained.is_empty() => {
            let moved = super::plural(view.unexplained.len(), "signal moved", "signals moved");
            let line = format!("NOT AN ALL-CLEAR: no warning or critical finding in {in_rules}, but {moved} that no rule explains");
            out.extend(painted(&line, width, "NOT AN ALL-CLEAR", "1;33", color));
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
fn finding_lines(out: &mut Vec<String>, f: &FindingView, hop: Option<&str>, width: usize) {
    let w = Some(width);
    let rows: Vec<_> = f.deciding.iter().filter_map(|&i| f.evidence.get(i)).collect();
    let col = |get: &dyn Fn(&super::view::EvidenceView) -> usize| rows.iter().map(|e| get(e)).max().unwrap_or(0);
    let (tw, vw, bw) = (col(&|e| e.title.chars().count()), col(&|e| e.value.chars().count()), col(&|e| e.baseline.chars().count()));
    for e in &rows {
        let mut line = format!("{INDENT}{:<tw$}  {:>vw$} vs {:<bw$}  held: {}", e.title, e.value, e.baseline, e.condition_own);
        if let Some(c) = &e.confidence {
            line.push_str(&format!(" · {c}"));
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
    if let Some(line) = &f.binding {
        out.extend(wrap(line, w, INDENT, &format!("{INDENT}  ")));
    }
    if let Some(line) = &f.replica_cause {
        out.extend(wrap(line, w, INDENT, &format!("{INDENT}  ")));
    }
    if let Some(line) = hop {
        out.extend(wrap(line, w, INDENT, &format!("{INDENT}  ")));
    }
    // A correlation that points elsewhere is a reason to doubt the finding; those that support it
    // are in -v, Markdown and JSON.
    for line in &f.doubts {
        out.extend(wrap(line, w, INDENT, &format!("{INDENT}  ")));
    }
    for r in &f.recommendations {
        out.extend(wrap(&r.brief, w, INDENT, &format!("{INDENT}  ")));
        if let Some(card) = &r.card_brief {
            out.extend(wrap(card, w, &format!("{INDENT}  "), &format!("{INDENT}    ")));
        }
    }
    for line in &f.wont_help {
        out.extend(wrap(line, w, INDENT, &format!("{INDENT}  ")));
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
    if r.total > 0 && view.verdict != Verdict::NothingEvaluated {
        parts.push(format!("{} of {} rules evaluated, {} healthy", r.evaluated, r.total, r.healthy));
    }
    // The clean verdict names them already; nothing evaluated lists them.
    let named_above = (view.verdict == Verdict::Clean || view.findings.iter().all(|f| f.severity < Severity::Warning)) && view.verdict != Verdict::Incomplete;
    if let (Some(brief), false) = (&view.not_evaluated_brief, named_above || view.verdict == Verdict::NothingEvaluated) {
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
        let listed: Vec<&str> = text.lines().skip_while(|l| *l != "Also changed, not explained by any rule:").skip(1).take_while(|l| l.starts_with("  ")).collect();
        assert_eq!(listed.iter().filter(|l| l.starts_with("  - ")).count(), 3, "{text}");
        assert!(listed[0].starts_with("  - P95 time to first token up 2.4x (robust z 31) on "), "{text}");
        let joined = text.replace("\n    ", " ");
        assert!(joined.contains("on qwen2.5-coder-32b since 09:12:00 UTC (18 min, ongoing): 1.9 s vs 800 ms"), "{text}");
        assert!(listed.last().unwrap().contains("(1 more in -v and --format json)"), "{text}");
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
        let first = verdict_line(&text);
        assert!(first.starts_with("CRITICAL kv-cache-exhausted: "), "{text}");
        assert!(first.contains(" · llama-3.1-70b-instruct · since 09:03 UTC · after a configuration change at 09:01 UTC"), "{text}");
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
        assert!(text.contains("Suggested max_num_seqs = 37"), "{text}");
        assert!(text.contains(&format!("Next: 1. {}", kv.steps[0].split(' ').next().unwrap_or_default())), "{text}");
        assert!(!text.contains(&kv.steps[2]), "only the first two steps\n{text}");
        assert!(!text.contains("PromQL at") && !text.contains("Checked and healthy"), "{text}");
    }

    const DECIDING_MAX: usize = crate::render::view::DECIDING;

    #[test]
    fn nothing_evaluated_is_never_ok_and_lists_what_could_not_be_checked() {
        let text = render(&nothing_evaluated_report(), &piped());
        assert!(text.starts_with("NOTHING EVALUATED: Nothing was evaluated"), "{text}");
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
            reason: "metric missing in the window: DCGM_FI_DEV_SM_CLOCK".into(),
        });
        let text = render(&r, &piped());
        assert_eq!(verdict_line(&text), "OK: no problem found in 24 of 25 rules · not evaluated: gpu-throttling (metric missing in the window)", "{text}");
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
