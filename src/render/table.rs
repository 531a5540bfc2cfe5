//! The default terminal format: a short header, one block per finding with a boxed evidence table,
//! then what was healthy, what could not be checked, and the data source's warnings.
//!
//! Tables are drawn with comfy-table, which is told never to look at the terminal: the width comes
//! from [`RenderOptions::width`] and colour from [`RenderOptions::color`], both decided by the
//! caller. That keeps rendering a pure function and lets tests pin the output byte for byte.
//! PromQL lines are never wrapped, so they can be copied straight into a query box.

use comfy_table::{presets, Cell, ContentArrangement, Table};

use super::view::{FindingView, ReportView};
use super::RenderOptions;
use crate::report::Severity;

/// Indentation of everything inside a finding block.
const INDENT: &str = "   ";

/// The width when there is no terminal (a pipe, a file): what the text format keeps to.
pub const PIPED_WIDTH: usize = 100;

/// The width to lay out for: the terminal's, or [`PIPED_WIDTH`] without one.
fn layout_width(opts: &RenderOptions) -> Option<usize> {
    Some(opts.width.map_or(PIPED_WIDTH, usize::from))
}

pub fn render(view: &ReportView, opts: &RenderOptions) -> String {
    let width = layout_width(opts);
    let mut out: Vec<String> = Vec::new();

    if let Some(v) = &opts.verdict {
        out.push(super::one_line(v));
        out.push(String::new());
    }
    out.push(format!("vllm-diag: {}", view.headline));
    out.push(String::new());
    let h = &view.header;
    let mut rows = vec![("Window", h.window.clone()), ("Baseline", h.baseline.clone()), ("Source", h.source_line()), ("Metrics", h.metrics.clone())];
    if let Some(fleet) = &h.fleet {
        rows.push(("Fleet", fleet.clone()));
    }
    let r = &view.rules;
    let mut rules = view.profile_phrase();
    if r.total > 0 && view.verdict != super::Verdict::NothingEvaluated {
        rules.push_str(&format!(" · {} of {} rules evaluated, {} healthy, {} not evaluated", r.evaluated, r.total, r.healthy, r.not_evaluated));
        if r.partly_evaluated > 0 {
            rules.push_str(&format!(" ({} more on some scopes only)", r.partly_evaluated));
        }
    }
    rows.push(("Rules", rules));
    for (label, value) in rows {
        out.extend(wrap(&value, width, &format!("{label:<10}"), &" ".repeat(10)));
    }

    for finding in &view.findings {
        out.push(String::new());
        finding_block(&mut out, view, finding, opts);
    }

    if let Some(sentence) = &view.conclusion {
        out.push(String::new());
        out.extend(wrap(sentence, width, "", ""));
    }
    // The probe (--probe): what its requests met, and a refusal in front of the engines.
    if !view.probe.is_empty() {
        out.push(String::new());
        for line in &view.probe {
            out.extend(wrap(line, width, "", "  "));
        }
    }
    // Time by hop, every scope's whole split (render/hops.rs).
    if let Some((head, scopes)) = super::hops::table_lines(&view.hops) {
        out.push(String::new());
        out.push(paint_bold(&head, opts.color));
        for (split, sentence) in scopes {
            out.extend(wrap(&split, width, "  - ", "    "));
            out.extend(wrap(&sentence, width, "    ", "    "));
        }
    }
    if !view.unexplained.is_empty() {
        out.push(String::new());
        out.push(paint_bold(&format!("Also changed, not explained by any rule ({}):", view.unexplained.len()), opts.color));
        for u in &view.unexplained {
            out.extend(wrap(&u.line, width, "  - ", "    "));
            out.push("    PromQL:".to_string());
            out.extend(wrap_promql(&u.query, width, "      "));
        }
    }
    if let Some(heading) = &view.timeline_heading {
        out.push(String::new());
        let head = wrap(heading, width, "", INDENT);
        out.extend(head.iter().map(|l| paint_bold(l, opts.color)));
        for e in view.timeline_listed() {
            out.extend(wrap(&e.line_short, width, "  - ", "    "));
        }
        if let Some(more) = &view.timeline_more {
            out.extend(wrap(more, width, "  ", "    "));
        }
    }
    out.push(String::new());
    if let Some(healthy) = &view.healthy {
        let text = format!("Checked and healthy: {} ({})", healthy.pairs, healthy.rules.join(", "));
        out.extend(wrap(&text, width, "", INDENT));
    }
    // What an OK rests on: each model's numbers against the lines its core checks need to fire.
    if !view.readings.is_empty() {
        out.push(paint_bold("The core checks' numbers, each against the line its rule needs to fire:", opts.color));
        for r in &view.readings {
            out.extend(wrap(&r.scope, width, "  ", "    "));
            for (line, (_, query)) in r.lines.iter().zip(&r.queries) {
                out.extend(wrap(line, width, "    ", "      "));
                out.extend(wrap_promql(query, width, "      "));
            }
        }
    }
    if let Some(line) = &view.disabled_line {
        out.extend(wrap(line, width, "", INDENT));
    }
    if !view.not_evaluated.is_empty() {
        let head = wrap(&view.not_evaluated_heading, width, "", INDENT);
        out.extend(head.iter().map(|l| paint_bold(l, opts.color)));
        for n in &view.not_evaluated {
            out.extend(wrap(&format!("{} ({}): {}", n.rule, n.scope, n.reason), width, "  - ", "    "));
        }
    }
    if !view.warnings.is_empty() {
        out.push(String::new());
    }
    for w in &view.warnings {
        out.extend(wrap(&format!("Warning: {w}"), width, "", INDENT));
    }
    if !view.caveats.is_empty() {
        out.push(String::new());
    }
    for c in &view.caveats {
        out.extend(wrap(&format!("Blind spot: {c}"), width, "", INDENT));
    }
    for n in &view.notes {
        out.extend(wrap(&format!("Note: {n}"), width, "", INDENT));
    }

    let mut text: String = out.iter().map(|l| format!("{}\n", l.trim_end())).collect();
    while text.ends_with("\n\n") {
        text.pop();
    }
    text
}

fn finding_block(out: &mut Vec<String>, view: &ReportView, f: &FindingView, opts: &RenderOptions) {
    let width = layout_width(opts);
    let badge = format!("#{} {}", f.rank, f.severity.as_str().to_uppercase());
    let rest = format!("{} · {} · {}", f.rule, f.title, f.scope_short);
    // Wrap without colour codes (they would count as width), then colour the badge in place.
    let mut heading = wrap(&rest, width, &format!("{badge}  "), INDENT);
    if let (true, Some(first)) = (opts.color, heading.first_mut()) {
        if let Some(tail) = first.strip_prefix(badge.as_str()) {
            *first = format!("{}{tail}", paint(&badge, f.severity));
        }
    }
    out.extend(heading);

    if let Some(summary) = &f.summary {
        out.extend(wrap(summary, width, INDENT, INDENT));
    }
    if let Some(line) = &f.onset {
        out.extend(wrap(line, width, INDENT, INDENT));
    }
    if let Some(line) = &f.preceded_by {
        out.extend(wrap(line, width, INDENT, &format!("{INDENT}  ")));
    }
    if let Some(line) = &f.replica_cause {
        out.extend(wrap(line, width, INDENT, &format!("{INDENT}  ")));
    }

    if !f.evidence.is_empty() {
        let inner = width.map(|w| w.saturating_sub(INDENT.len()));
        // On a narrow terminal the trends get their own lines under the table instead of a column
        // that would squeeze the numbers into slivers.
        let trend_column = inner.is_none_or(|w| w >= TREND_COLUMN_MIN_WIDTH);
        let table = evidence_table(f, inner, trend_column);
        out.extend(table.lines().map(|l| format!("{INDENT}{l}")));
        if !trend_column {
            let trends: Vec<(&str, &str)> = f.evidence.iter().filter_map(|e| e.sparkline.as_deref().map(|s| (e.title.as_str(), s))).collect();
            if !trends.is_empty() {
                out.push(format!("{INDENT}Trends (baseline│window)"));
                for (title, spark) in trends {
                    out.extend(wrap(&format!("{spark} {title}"), width, &format!("{INDENT}  "), &format!("{INDENT}    ")));
                }
            }
        }
    }

    for line in f.stood_in.iter().chain(&f.recent).chain(&f.binding).chain(&f.correlations) {
        out.extend(wrap(line, width, INDENT, &format!("{INDENT}  ")));
    }
    if let Some(line) = &f.replicas {
        out.extend(wrap(&format!("Affected: {line}"), width, INDENT, &format!("{INDENT}  ")));
    }
    for r in &f.recommendations {
        out.extend(wrap(&r.head, width, INDENT, &format!("{INDENT}  ")));
        out.extend(wrap(&r.how, width, &format!("{INDENT}  "), &format!("{INDENT}  ")));
        if let Some(card) = &r.card {
            out.extend(wrap(card, width, &format!("{INDENT}  "), &format!("{INDENT}    ")));
        }
    }
    for line in &f.wont_help {
        out.extend(wrap(line, width, INDENT, &format!("{INDENT}  ")));
    }
    if !f.checked.is_empty() {
        out.push(format!("{INDENT}Checked against the data"));
        for c in &f.checked {
            out.extend(wrap(c, width, &format!("{INDENT}  - "), &format!("{INDENT}    ")));
        }
    }
    if !f.steps.is_empty() {
        out.push(format!("{INDENT}Next steps"));
        for (n, step) in f.steps.iter().enumerate() {
            let first = format!("{INDENT}  {}. ", n + 1);
            let rest = " ".repeat(first.chars().count());
            out.extend(wrap(step, width, &first, &rest));
        }
    }
    if !f.references.is_empty() {
        out.push(format!("{INDENT}References"));
        for r in &f.references {
            out.push(format!("{INDENT}  - {r}"));
        }
    }
    if let Some(also) = f.also_consistent_list(|id| id.to_string()) {
        out.extend(wrap(&format!("Also explains: {also}"), width, INDENT, &format!("{INDENT}  ")));
    }

    if !f.queries.is_empty() {
        out.extend(wrap(&format!("PromQL {}", view.query_timing), width, INDENT, &format!("{INDENT}  ")));
        // Each query on lines of its own under its signal, wrapped where PromQL allows it.
        for (signal, query) in &f.queries {
            out.push(format!("{INDENT}  {signal}"));
            out.extend(wrap_promql(query, width, &format!("{INDENT}    ")));
        }
    }
}

/// Below this width (inside the indent) the trend column is left out of evidence tables.
const TREND_COLUMN_MIN_WIDTH: usize = 100;

fn evidence_table(f: &FindingView, width: Option<usize>, trend_column: bool) -> String {
    let mut table = Table::new();
    // A trend column only when some signal has one: a column of blanks says nothing.
    let with_trend = trend_column && f.evidence.iter().any(|e| e.sparkline.is_some());
    let mut header = vec!["Signal", "Value", "Baseline", "Change", "Condition", "Held"];
    if with_trend {
        header.push("Trend (baseline│window)");
    }
    table.force_no_tty().load_preset(presets::UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Dynamic).set_header(header);
    if let Some(w) = width {
        table.set_width(u16::try_from(w).unwrap_or(u16::MAX));
    }
    for e in &f.evidence {
        let signal = match &e.confidence {
            Some(c) => format!("{}\n{c}", e.title),
            None => e.title.clone(),
        };
        let mut row = vec![
            Cell::new(signal),
            Cell::new(&e.value),
            Cell::new(&e.baseline),
            Cell::new(e.change.as_deref().unwrap_or("—")),
            Cell::new(if e.condition.is_empty() { "(context)" } else { &e.condition_words }),
            Cell::new(match (e.condition.is_empty(), e.held, &e.held_via) {
                (true, _, _) => String::new(),
                // Held only through a guard that is met when nothing is seen (`<= 0`).
                (false, true, _) if e.zero => "yes, none seen".to_string(),
                (false, true, _) => "yes".to_string(),
                // Its own comparison did not hold; an alternative on another signal did.
                (false, false, Some(_)) => "no (line held)".to_string(),
                (false, false, None) => "no".to_string(),
            }),
        ];
        if with_trend {
            row.push(Cell::new(e.sparkline.as_deref().unwrap_or_default()));
        }
        table.add_row(row);
    }
    // The sparkline must never wrap: a broken trend reads as two trends.
    if with_trend {
        if let Some(col) = table.column_mut(6) {
            col.set_constraint(comfy_table::ColumnConstraint::Absolute(comfy_table::Width::Fixed((2 * super::sparkline::CELLS + 3) as u16)));
        }
    }
    table.to_string()
}

/// A PromQL query on lines of `indent` within `width`, broken only at spaces outside its string
/// literals: whitespace, newlines included, means nothing to PromQL, so the lines pasted together
/// are the same query, while a label value with a space in it is never broken. A piece longer than
/// the line is kept whole.
pub(crate) fn wrap_promql(query: &str, width: Option<usize>, indent: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in query.chars() {
        match quote {
            Some(q) => {
                word.push(c);
                if escaped {
                    escaped = false;
                } else if c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if c == ' ' => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            None => {
                if matches!(c, '"' | '\'' | '`') {
                    quote = Some(c);
                }
                word.push(c);
            }
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let Some(width) = width else {
        return vec![format!("{indent}{}", words.join(" "))];
    };
    let mut lines = Vec::new();
    let mut line = indent.to_string();
    for w in words {
        if line.len() > indent.len() && line.chars().count() + 1 + w.chars().count() > width {
            lines.push(std::mem::replace(&mut line, indent.to_string()));
        }
        if line.len() > indent.len() {
            line.push(' ');
        }
        line.push_str(&w);
    }
    lines.push(line);
    lines
}

/// Greedy word wrap with a first-line prefix and a hanging prefix. `None` width: one line.
/// Words longer than the line are kept whole rather than split.
pub(crate) fn wrap(text: &str, width: Option<usize>, first: &str, rest: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let Some(width) = width else {
        return vec![format!("{first}{}", words.join(" "))];
    };
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut has_word = false;
    for word in words {
        let len = line.chars().count();
        if has_word && len + 1 + word.chars().count() > width {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            has_word = false;
        }
        if has_word {
            line.push(' ');
        }
        line.push_str(word);
        has_word = true;
    }
    lines.push(line);
    lines
}

fn paint(text: &str, severity: Severity) -> String {
    let code = match severity {
        Severity::Critical => "1;31",
        Severity::Warning => "1;33",
        Severity::Info => "1;34",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

fn paint_bold(text: &str, color: bool) -> String {
    if color {
        format!("\x1b[1m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;
    use crate::report::Report;

    /// The table of `report`, through the view as `render::render` does it.
    fn render(report: &Report, opts: &RenderOptions) -> String {
        super::render(&ReportView::new(report, opts), opts)
    }

    fn opts(width: u16) -> RenderOptions {
        RenderOptions { color: false, width: Some(width), ..RenderOptions::default() }
    }

    #[test]
    fn table_snapshot_of_the_sample_report() {
        insta::assert_snapshot!(render(&sample_report(), &opts(110)));
    }

    #[test]
    fn table_snapshot_wrapped_to_a_narrow_terminal() {
        insta::assert_snapshot!(render(&sample_report(), &opts(72)));
    }

    #[test]
    fn table_snapshot_piped_is_laid_out_for_100_columns() {
        insta::assert_snapshot!(render(&sample_report(), &RenderOptions::default()));
    }

    #[test]
    fn promql_wraps_at_spaces_outside_its_strings_and_pastes_back_whole() {
        let q = r#"sum by (model_name) (rate(vllm:x_total{namespace="a b c",pod=~"p\" q"}[5m])) / sum by (model_name) (rate(vllm:y_total[5m]))"#;
        let lines = wrap_promql(q, Some(40), "  ");
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines.iter().all(|l| l.starts_with("  ")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains(r#"namespace="a b c""#)), "a string is never broken: {lines:?}");
        let joined = lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ");
        assert_eq!(joined, q);
        for l in &lines {
            assert!(l.chars().count() <= 40 || !l.trim().contains(' ') || l.contains("a b c"), "{l}");
        }
    }

    #[test]
    fn table_snapshot_of_a_clean_report() {
        insta::assert_snapshot!(render(&clean_report(), &opts(100)));
    }

    #[test]
    fn table_snapshot_when_nothing_was_evaluated() {
        insta::assert_snapshot!(render(&nothing_evaluated_report(), &opts(100)));
    }

    #[test]
    fn table_snapshot_of_the_sample_report_with_events() {
        insta::assert_snapshot!(render(&sample_report_with_events(), &opts(110)));
    }

    #[test]
    fn the_change_a_finding_began_after_is_the_line_under_its_onset() {
        for o in [RenderOptions::default(), opts(72)] {
            let text = render(&sample_report_with_events(), &o);
            let lines: Vec<&str> = text.lines().collect();
            let at = lines.iter().position(|l| l.trim() == "Started 09:03 UTC").expect("onset line");
            assert!(lines[at + 1].trim_start().starts_with("Began 2 min after a configuration change at 09:01:00 UTC"), "{text}");
        }
    }

    #[test]
    fn the_timeline_lists_one_event_a_line_oldest_first() {
        let text = render(&sample_report_with_events(), &RenderOptions::default());
        let (_, timeline) = text.split_once("Timeline: 6 changes").expect("a timeline section");
        let items: Vec<&str> = timeline.lines().filter(|l| l.starts_with("  - ")).take(6).collect();
        assert_eq!(items.len(), 6, "{text}");
        assert!(items[0].starts_with("  - 08:44:00 UTC target-down (llama-3.1-70b-instruct): 1 of 3"), "{text}");
        assert!(items[5].starts_with("  - 09:12:00 UTC restart (qwen2.5-coder-32b)"), "{text}");
        let mut sorted = items.clone();
        sorted.sort();
        assert_eq!(items, sorted, "oldest first");
    }

    #[test]
    fn without_colour_there_are_no_escape_codes() {
        for r in [sample_report(), clean_report(), nothing_evaluated_report()] {
            assert!(!render(&r, &opts(100)).contains('\x1b'));
            assert!(!render(&r, &RenderOptions::default()).contains('\x1b'));
        }
    }

    #[test]
    fn with_colour_severities_are_coloured() {
        let text = render(&sample_report(), &RenderOptions { color: true, width: Some(100), ..RenderOptions::default() });
        assert!(text.contains("\x1b[1;31m#1 CRITICAL\x1b[0m"));
        assert!(text.contains("\x1b[1;33m#2 WARNING\x1b[0m"));
    }

    #[test]
    fn nothing_evaluated_never_says_healthy() {
        let text = render(&nothing_evaluated_report(), &opts(100)).to_lowercase();
        assert!(!text.contains("healthy"), "{text}");
        assert!(text.contains("nothing was evaluated"));
    }

    #[test]
    fn every_not_evaluated_pair_is_listed_by_name() {
        let text = render(&sample_report(), &opts(100));
        assert!(text.contains("kv-cache-exhausted (qwen2.5-coder-32b): timed out"));
        assert!(text.contains("spec-decode-acceptance-drop (qwen2.5-coder-32b): no series for"));
    }

    #[test]
    fn lines_fit_the_width_piped_or_not_and_promql_keeps_its_own_lines() {
        for (o, max) in [(opts(72), 72), (RenderOptions::default(), 100)] {
            let text = render(&sample_report(), &o);
            for line in text.lines() {
                // A word longer than the line (a PromQL piece, a URL) is kept whole.
                assert!(line.chars().count() <= max || !line.trim().contains(' '), "too wide for {max}: {line}");
            }
            let r = sample_report();
            for e in r.findings.iter().flat_map(|f| &f.evidence).filter(|e| !e.query.is_empty()) {
                assert!(text.split_whitespace().collect::<Vec<_>>().join(" ").contains(&e.query), "PromQL lost: {}\n{text}", e.query);
            }
        }
    }

    #[test]
    fn odd_widths_and_odd_data_do_not_panic() {
        let mut r = sample_report();
        r.findings[0].title = String::new();
        r.findings[0].scope = Default::default();
        r.findings[0].evidence[0].value = Some(f64::NAN);
        r.findings[0].evidence[0].baseline = Some(f64::NEG_INFINITY);
        r.findings[0].evidence[1].value = Some(1e300);
        r.findings[1].evidence[0].observations = Some(f64::INFINITY);
        r.warnings.push("line one\nline two".to_string());
        for width in [0, 1, 5, 20] {
            assert!(!render(&r, &opts(width)).is_empty());
        }
        let text = render(&r, &opts(u16::MAX));
        assert!(text.contains("NaN") && text.contains("-Inf"));
        assert!(text.contains("Warning: line one line two"));
    }

    #[test]
    fn wrap_keeps_a_hanging_indent() {
        assert_eq!(wrap("aa bb cc", Some(7), "> ", "  "), vec!["> aa bb", "  cc"]);
        assert_eq!(wrap("aa bb cc", None, "> ", "  "), vec!["> aa bb cc"]);
    }
}
