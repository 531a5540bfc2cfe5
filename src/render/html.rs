//! One self-contained HTML page, to attach to an incident ticket or open on a phone.
//!
//! Self-contained means no scripts, fonts, images or style sheets from anywhere: the page is a
//! single file that renders the same offline, in a mail client's preview or years later from a
//! ticket archive. Charts are inline SVG drawn here, one per evidence signal that carries a trend:
//! the baseline and the window side by side on one vertical scale (they need not be adjacent in
//! time: `--baseline 1d` compares with yesterday), the thresholds the rule applied drawn as dashed
//! lines, and gaps in the data left as gaps. The leading signal's chart marks the onset (and where the problem was over); every chart
//! of a finding marks the change events of its scope (or of no scope) as ticks coloured and labelled
//! by kind, the full event in a tooltip, the change the finding began after drawn bold. The page
//! lists the whole timeline (the text formats list at most a dozen). Layout is a single column that widens into a grid on
//! a large screen, so it reads on a phone without zooming.

use std::fmt::Write as _;

use super::view::{EvidenceView, FindingView, ReportView};
use super::{RenderOptions, Verdict};
use crate::report::{Severity, TimeRange};
use crate::units;

pub fn render(view: &ReportView, _opts: &RenderOptions) -> String {
    let mut body = String::new();

    let _ = writeln!(body, "<header>\n<h1>vllm-diag: {}</h1>", esc(&view.headline));
    let h = &view.header;
    let source = match &h.selector {
        Some(sel) => format!("{} <code>{}</code>, selector <code>{}</code>", esc(&h.source_kind), esc(&h.source_url), esc(sel)),
        None => format!("{} <code>{}</code>", esc(&h.source_kind), esc(&h.source_url)),
    };
    let fleet = h.fleet.as_deref().map(|f| format!("<dt>Fleet</dt><dd>{}</dd>\n", esc(f))).unwrap_or_default();
    let _ = writeln!(
        body,
        "<dl class=\"meta\">\n<dt>Window</dt><dd>{}</dd>\n<dt>Baseline</dt><dd>{}</dd>\n<dt>Source</dt><dd>{source}</dd>\n<dt>Metrics</dt><dd>{}</dd>\n{fleet}</dl>\n</header>",
        esc(&h.window),
        esc(&h.baseline),
        esc(&h.metrics),
    );

    answer(&mut body, view);
    if let Some(sentence) = &view.conclusion {
        // Only a real all-clear is drawn as one: a run missing its core checks is not.
        // Nor is one where signals moved that no rule explains.
        let class =
            if view.verdict == Verdict::Clean && view.unexplained.is_empty() && view.probe_failed.is_none() { "verdict clean" } else { "verdict unknown" };
        let _ = writeln!(body, "<p class=\"{class}\">{}</p>", esc(sentence));
    }
    for f in &view.findings {
        finding(&mut body, view, f);
    }
    if !view.unexplained.is_empty() {
        body.push_str("<section class=\"unexplained\">\n<h2>Also changed, not explained by any rule</h2>\n<ul>\n");
        for u in &view.unexplained {
            let _ = writeln!(body, "<li>{}<br><code>{}</code></li>", esc(&u.line), esc(&u.query));
        }
        body.push_str("</ul>\n</section>\n");
    }
    timeline(&mut body, view);

    let rest = rest(view);
    if !rest.is_empty() {
        let _ = write!(body, "<section class=\"rest\">\n{rest}</section>\n");
    }

    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>vllm-diag: {}</title>\n<style>{STYLE}{}</style>\n</head>\n<body>\n<main>\n{body}</main>\n</body>\n</html>\n",
        esc(&view.headline),
        if view.timeline.is_empty() && view.findings.iter().all(|f| f.preceded_by.is_none()) { "" } else { EVENT_STYLE }
    )
}

/// The answer every channel format gives, first: the verdict, the scope, the deciding numbers, the
/// binding limit, the cards one line each, the first steps, what was absorbed, the other findings
/// and the context. The whole report follows.
fn answer(out: &mut String, view: &ReportView) {
    let a = view.answer();
    let sev = a.severity.map_or("info", |s| s.as_str());
    let _ = writeln!(out, "<section class=\"answer {sev}\">\n<h2>{}</h2>", esc(&a.headline));
    let para = |out: &mut String, class: &str, line: &str| {
        let _ = writeln!(out, "<p class=\"{class}\">{}</p>", esc(line));
    };
    let list = |out: &mut String, tag: &str, items: &[String]| {
        if !items.is_empty() {
            let _ = writeln!(out, "<{tag}>");
            for i in items {
                let _ = writeln!(out, "<li>{}</li>", esc(i));
            }
            let _ = writeln!(out, "</{tag}>");
        }
    };
    if let Some(l) = &a.lead {
        para(out, "scope", &l.scope);
        out.push_str("<ul class=\"numbers\">\n");
        for n in &l.numbers {
            let chart = n.link.as_ref().map(|url| format!(" <a href=\"{}\">chart</a>", esc(url))).unwrap_or_default();
            let _ = writeln!(out, "<li>{}{chart}</li>", esc(&n.line));
        }
        out.push_str("</ul>\n");
        if let Some(line) = &l.binding {
            para(out, "binding", line);
        }
        for line in l.notes.iter().chain(&l.hop) {
            para(out, "note", line);
        }
        if !l.cards.is_empty() {
            let _ = writeln!(out, "<h3>{} ({})</h3>", l.try_heading, super::answer::CARD_UNITS);
            list(out, "ul", &l.cards.iter().map(|c| c.line.clone()).collect::<Vec<_>>());
        }
        for line in &l.wont_help {
            para(out, "wont-help", line);
        }
        if !l.checked.is_empty() {
            out.push_str("<h3>Checked</h3>\n");
            list(out, "ul", &l.checked);
        }
        if !l.steps.is_empty() {
            out.push_str("<h3>Next</h3>\n");
            list(out, "ol", &l.steps);
        }
        for line in l.absorbed.iter().chain(&l.not_evaluated) {
            para(out, "absorbed", line);
        }
    }
    list(out, "ul", &a.others);
    for line in a.noted.iter().chain(&a.conclusion).chain(&a.probe).chain(&a.disabled).chain(&a.warnings) {
        para(out, "note", line);
    }
    if !a.moved.is_empty() {
        out.push_str("<h3>Also changed, not explained by any rule</h3>\n");
        list(out, "ul", &a.moved);
    }
    list(out, "ul", &a.not_evaluated_pairs);
    let mut context = a.context.clone();
    if let Some(n) = &a.not_evaluated {
        context.push_str(&format!(" · {n}"));
    }
    para(out, "context", &context);
    out.push_str("</section>\n");
}

/// Every event, oldest first, in a small table: when, what kind, where, what; the baseline's rows
/// muted, the changes a finding began after in bold with that finding's rank.
fn timeline(out: &mut String, view: &ReportView) {
    let Some(heading) = &view.timeline_heading else { return };
    let _ = writeln!(out, "<section class=\"timeline\">\n<h2>{}</h2>\n<table class=\"timeline\">", esc(heading));
    out.push_str("<thead><tr><th>Time</th><th>Change</th><th>Scope</th><th>What</th></tr></thead>\n<tbody>\n");
    for e in &view.timeline {
        let lead = if e.explains.is_empty() { "" } else { " lead" };
        let explains = if e.explains.is_empty() {
            String::new()
        } else {
            let ranks: Vec<String> = e.explains.iter().map(|r| format!("#{r}")).collect();
            format!(" <span class=\"explains\">→ {} began after it</span>", ranks.join(", "))
        };
        let _ = writeln!(
            out,
            "<tr class=\"{}{lead}\"><td>{}</td><td><span class=\"kind k-{}\">{}</span></td><td>{}</td><td>{}{explains}</td></tr>",
            e.phase.as_str(),
            esc(&e.time),
            e.kind.as_str(),
            e.kind.as_str(),
            esc(&e.scope),
            esc(&e.detail)
        );
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
}

/// Healthy, disabled, not evaluated and warnings, after the findings.
fn rest(view: &ReportView) -> String {
    let mut rest = String::new();
    if let Some(healthy) = &view.healthy {
        let _ = writeln!(rest, "<p>Checked and healthy: {} ({})</p>", esc(&healthy.pairs), esc(&healthy.rules.join(", ")));
    }
    if !view.readings.is_empty() {
        rest.push_str("<h2>The core checks' numbers</h2>\n<p>Each against the line its rule needs to fire.</p>\n");
        for r in &view.readings {
            let _ = writeln!(rest, "<h3>{}</h3>\n<ul class=\"readings\">", esc(&r.scope));
            for (line, (_, query)) in r.lines.iter().zip(&r.queries) {
                let _ = writeln!(rest, "<li>{}<br><code>{}</code></li>", esc(line), esc(query));
            }
            rest.push_str("</ul>\n");
        }
    }
    if let Some(line) = &view.disabled_line {
        let _ = writeln!(rest, "<p class=\"disabled\">{}</p>", esc(line));
    }
    if !view.not_evaluated.is_empty() {
        let _ = writeln!(rest, "<h2>{}</h2>\n<ul class=\"skipped\">", esc(&view.not_evaluated_heading));
        for n in &view.not_evaluated {
            let _ = writeln!(rest, "<li><code>{}</code> ({}): {}</li>", esc(&n.rule), esc(&n.scope), esc(&n.reason));
        }
        rest.push_str("</ul>\n");
    }
    if !view.warnings.is_empty() {
        rest.push_str("<h2>Warnings</h2>\n<ul class=\"warnings\">\n");
        for w in &view.warnings {
            let _ = writeln!(rest, "<li>{}</li>", esc(w));
        }
        rest.push_str("</ul>\n");
    }
    if !view.caveats.is_empty() {
        rest.push_str("<h2>Blind spots</h2>\n<ul class=\"caveats\">\n");
        for c in &view.caveats {
            let _ = writeln!(rest, "<li>{}</li>", esc(c));
        }
        rest.push_str("</ul>\n");
    }
    if !view.notes.is_empty() {
        rest.push_str("<h2>Notes</h2>\n<ul class=\"notes\">\n");
        for n in &view.notes {
            let _ = writeln!(rest, "<li>{}</li>", esc(n));
        }
        rest.push_str("</ul>\n");
    }
    rest
}

fn finding(out: &mut String, view: &ReportView, f: &FindingView) {
    let (sev, rank) = (f.severity.as_str(), f.rank);
    let _ = writeln!(out, "<section class=\"finding {sev}\">");
    let _ = writeln!(
        out,
        "<h2><span class=\"badge {sev}\">#{rank} {}</span> {}</h2>\n<p class=\"scope\"><code>{}</code> on <code>{}</code></p>",
        sev.to_uppercase(),
        esc(&f.title),
        esc(&f.rule),
        esc(&f.scope)
    );
    if let Some(summary) = &f.summary {
        let _ = writeln!(out, "<p>{}</p>", esc(summary));
    }
    if let Some(line) = &f.onset {
        let _ = writeln!(out, "<p class=\"onset\">{}</p>", esc(line));
    }
    if let Some(line) = &f.preceded_by {
        let _ = writeln!(out, "<p class=\"preceded\">{}</p>", esc(line));
    }
    if !f.evidence.is_empty() {
        out.push_str("<div class=\"evidence\">\n");
        for (i, e) in f.evidence.iter().enumerate() {
            figure(out, view, e, f.severity, &format!("c{rank}-{i}"));
        }
        out.push_str("</div>\n");
    }
    if let Some(line) = &f.stood_in {
        let _ = writeln!(out, "<p class=\"stood-in\">{}</p>", esc(line));
    }
    if let Some(line) = &f.recent {
        let _ = writeln!(out, "<p class=\"recent\">{}</p>", esc(line));
    }
    if let Some(line) = &f.binding {
        let _ = writeln!(out, "<p class=\"binding\">{}</p>", esc(line));
    }
    if let Some(line) = &f.replicas {
        let _ = writeln!(out, "<p class=\"replicas\">Affected: {}</p>", esc(line));
    }
    for r in &f.recommendations {
        let _ = writeln!(out, "<h3>{}</h3>\n<p>{}</p>", esc(&r.head), esc(&r.how));
        if let Some(card) = &r.card {
            let _ = writeln!(out, "<p class=\"card\">{}</p>", esc(card));
        }
    }
    for line in &f.wont_help {
        let _ = writeln!(out, "<p class=\"wont-help\">{}</p>", esc(line));
    }
    if !f.checked.is_empty() {
        out.push_str("<h3>Checked against the data</h3>\n<ul>\n");
        for s in &f.checked {
            let _ = writeln!(out, "<li>{}</li>", esc(s));
        }
        out.push_str("</ul>\n");
    }
    if !f.steps.is_empty() {
        out.push_str("<h3>Next steps</h3>\n<ol>\n");
        for s in &f.steps {
            let _ = writeln!(out, "<li>{}</li>", esc(s));
        }
        out.push_str("</ol>\n");
    }
    if !f.references.is_empty() {
        out.push_str("<h3>References</h3>\n<ul>\n");
        for r in &f.references {
            let _ = writeln!(out, "<li>{}</li>", esc(r));
        }
        out.push_str("</ul>\n");
    }
    if let Some(also) = f.also_consistent_list(|id| id.to_string()) {
        let _ = writeln!(out, "<p>Also explains: {}</p>", esc(&also));
    }
    if !f.queries.is_empty() {
        let _ = writeln!(out, "<details>\n<summary>PromQL {}</summary>\n<dl class=\"promql\">", esc(&view.query_timing));
        for (signal, query) in &f.queries {
            let link = f.evidence.iter().find(|e| &e.signal == signal).and_then(|e| e.link.as_ref());
            let name = match link {
                Some(l) => format!("<a href=\"{}\">{}</a>", esc(l), esc(signal)),
                None => esc(signal),
            };
            let _ = writeln!(out, "<dt>{name}</dt><dd><code>{}</code></dd>", esc(query));
        }
        out.push_str("</dl>\n</details>\n");
    }
    out.push_str("</section>\n");
}

/// One evidence signal: its numbers and condition as a caption over its chart.
fn figure(out: &mut String, view: &ReportView, e: &EvidenceView, severity: Severity, id: &str) {
    let status = match (e.condition.is_empty(), e.held) {
        (true, _) => "context".to_string(),
        (false, true) => format!("<code>{}</code> held", esc(&e.condition_words)),
        (false, false) => format!("<code>{}</code> did not hold", esc(&e.condition_words)),
    };
    let class = match (e.condition.is_empty(), e.held) {
        (true, _) => "context",
        (false, true) => "held",
        (false, false) => "not-held",
    };
    let change = e.change.as_deref().map(|c| format!(" ({})", esc(c))).unwrap_or_default();
    let confidence = e.confidence.as_deref().map(|c| format!("<br><span class=\"low\">{}</span>", esc(c))).unwrap_or_default();
    let _ = writeln!(
        out,
        "<figure class=\"{class}\">\n<figcaption><strong>{}</strong> <span class=\"value\">{}</span><br>baseline {}{change} · {status}{confidence}</figcaption>",
        esc(&e.title),
        esc(&e.value),
        esc(&e.baseline)
    );
    match chart(view, e, severity, id) {
        Some(svg) => out.push_str(&svg),
        None => out.push_str("<p class=\"nochart\">No trend recorded for this signal.</p>\n"),
    }
    out.push_str("</figure>\n");
}

// Chart geometry, in SVG user units (the drawing scales to the figure's width).
const W: f64 = 460.0;
const H: f64 = 200.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 24.0;
const BOTTOM: f64 = 26.0;
const GAP: f64 = 12.0;

/// The chart of one evidence signal, or `None` when it carries no finite trend point.
fn chart(view: &ReportView, e: &EvidenceView, severity: Severity, id: &str) -> Option<String> {
    let t = e.trend.as_ref()?;
    // Only finite points inside their own range are drawn, and only they decide the scale.
    let inside = |points: &[(f64, f64)], r: &TimeRange| -> Vec<(f64, f64)> {
        let (a, b) = (r.start.timestamp() as f64 - 1.0, r.end.timestamp() as f64 + 1.0);
        points.iter().copied().filter(|p| p.0.is_finite() && p.1.is_finite() && p.0 >= a && p.0 <= b).collect()
    };
    let (base_pts, win_pts) = (inside(&t.baseline, &view.baseline_range), inside(&t.window, &view.window_range));
    let values: Vec<f64> = base_pts.iter().chain(&win_pts).map(|p| p.1).collect();
    if values.is_empty() {
        return None;
    }
    let limits = &t.limits;
    let extra = limits.iter().map(|l| l.1).chain([t.value, t.baseline_value].into_iter().flatten().filter(|v| v.is_finite()));
    let lo_data = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().chain(extra.clone()).fold(f64::NEG_INFINITY, f64::max);
    let lo = lo_data.min(0.0).min(extra.fold(f64::INFINITY, f64::min));
    let (lo, mut hi, step) = nice_scale(lo, hi);
    // A share never exceeds 100%: do not draw room above it.
    if t.unit == "ratio" && hi > 1.0 && values.iter().chain(limits.iter().map(|l| &l.1)).all(|v| *v <= 1.0) && lo >= 0.0 {
        hi = 1.0;
    }

    let plot_h = H - TOP - BOTTOM;
    // Clamped, so a value far off the scale (or an overflow) still gives a finite coordinate.
    let y = |v: f64| (TOP + plot_h - (v - lo) / (hi - lo) * plot_h).clamp(-1.0e6, 1.0e6);
    let pw = (W - LEFT - RIGHT - GAP) / 2.0;
    let panels = [(&view.baseline_range, base_pts, LEFT, "Baseline"), (&view.window_range, win_pts, LEFT + pw + GAP, "Window")];
    let colour = match severity {
        Severity::Critical => "#c0392b",
        Severity::Warning => "#b9770e",
        Severity::Info => "#2471a3",
    };

    let mut s = String::new();
    let title = format!("{} over the baseline and the window", e.title);
    let _ = writeln!(
        s,
        "<svg class=\"chart\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-labelledby=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\">\n<title id=\"{id}\">{}</title>",
        esc(&title)
    );
    // Grid and y labels.
    let mut v = lo;
    let mut guard = 0;
    while v <= hi + step * 1e-9 && guard < 20 {
        let yy = y(v);
        let _ = writeln!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\"/><text class=\"ylab\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            W - RIGHT,
            LEFT - 6.0,
            yy + 4.0,
            esc(&units::format_value(clean(v), &t.unit))
        );
        v += step;
        guard += 1;
    }
    for (range, points, x0, name) in panels {
        let span = (range.end.timestamp() - range.start.timestamp()).max(1) as f64;
        let x = |ts: f64| x0 + (ts - range.start.timestamp() as f64) / span * pw;
        let class = if name == "Baseline" { "panel base" } else { "panel win" };
        let _ = writeln!(s, "<rect class=\"{class}\" x=\"{x0:.1}\" y=\"{TOP}\" width=\"{pw:.1}\" height=\"{plot_h:.1}\"/>");
        let _ = writeln!(s, "<text class=\"ptitle\" x=\"{:.1}\" y=\"{:.1}\">{name}</text>", x0 + 4.0, TOP - 8.0);
        let _ = writeln!(
            s,
            "<text class=\"xlab\" x=\"{x0:.1}\" y=\"{:.1}\">{}</text><text class=\"xlab end\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            H - 8.0,
            time_label(range, &range.start),
            x0 + pw,
            H - 8.0,
            time_label(range, &range.end)
        );
        let stroke = if name == "Baseline" { "#7f8c8d" } else { colour };
        // Split the line where points are missing, so a gap in the data shows as a gap.
        let max_gap = (t.step_seconds.max(1) as f64) * 1.5;
        let mut segment: Vec<(f64, f64)> = Vec::new();
        let mut prev: Option<f64> = None;
        for (ts, val) in points {
            if prev.is_some_and(|p| ts - p > max_gap) {
                polyline(&mut s, &segment, stroke);
                segment.clear();
            }
            segment.push((x(ts), y(val)));
            prev = Some(ts);
        }
        polyline(&mut s, &segment, stroke);
        event_markers(&mut s, &t.events, range, x0, pw, &x);
        // The onset, where the leading signal left its baseline, and the end, where it came back,
        // drawn in the window panel (the end's label one line lower, so the two never overlap).
        let marks = [(&t.onset, "onset", 12.0), (&t.ended, "over", 24.0)];
        for (mark, word, dy) in marks.into_iter().filter(|_| name == "Window") {
            let Some((ts, label)) = mark else { continue };
            let (a, b) = (range.start.timestamp() as f64, range.end.timestamp() as f64);
            if ts.is_finite() && *ts >= a && *ts <= b {
                let xx = x(*ts);
                let anchor = if xx > x0 + pw * 0.7 { " end" } else { "" };
                let _ = writeln!(
                    s,
                    "<line class=\"onset\" x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"/><text class=\"olab{anchor}\" x=\"{:.1}\" y=\"{:.1}\">{word} {}</text>",
                    TOP + plot_h,
                    if anchor.is_empty() { xx + 3.0 } else { xx - 3.0 },
                    TOP + dy,
                    esc(label)
                );
            }
        }
    }
    // Thresholds, labelled at the right; labels that would overlap are nudged apart.
    let mut taken: Vec<f64> = Vec::new();
    let mut sorted = limits.clone();
    sorted.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (label, value) in sorted {
        let yy = y(value);
        let _ = writeln!(s, "<line class=\"limit\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\"/>", W - RIGHT);
        let mut ly = yy - 4.0;
        while taken.iter().any(|t| (t - ly).abs() < 12.0) {
            ly += 12.0;
        }
        taken.push(ly);
        let _ = writeln!(s, "<text class=\"llab\" x=\"{:.1}\" y=\"{ly:.1}\">{}</text>", W - RIGHT - 4.0, esc(&label));
    }
    s.push_str("</svg>\n");
    Some(s)
}

/// Rows of event labels at the foot of a panel; a label that fits in none is left to its tooltip.
const EVENT_ROWS: usize = 3;

/// The events inside `range` as ticks across the panel, each labelled by kind at the panel's foot
/// (labels that would overlap go up a row), with the whole event as its tooltip.
fn event_markers(s: &mut String, events: &[super::view::ChartEvent], range: &TimeRange, x0: f64, pw: f64, x: &dyn Fn(f64) -> f64) {
    let (a, b) = (range.start.timestamp() as f64, range.end.timestamp() as f64);
    let plot_bottom = H - BOTTOM;
    let mut rows: Vec<Vec<(f64, f64)>> = vec![Vec::new(); EVENT_ROWS];
    // The change the finding began after takes its label's place first, so it always has one.
    let mut inside: Vec<&super::view::ChartEvent> = events.iter().filter(|e| e.at.is_finite() && e.at >= a && e.at <= b).collect();
    inside.sort_by(|x, y| y.lead.cmp(&x.lead).then(x.at.total_cmp(&y.at)));
    for e in inside {
        let xx = x(e.at);
        let kind = e.kind.as_str();
        let lead = if e.lead { " lead" } else { "" };
        let _ = write!(
            s,
            "<g class=\"ev k-{kind}{lead}\"><title>{}</title><line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{TOP}\" y2=\"{plot_bottom:.1}\"/>",
            esc(&e.line)
        );
        // About 6 units a character at the labels' size.
        let width = kind.chars().count() as f64 * 6.0 + 4.0;
        let end = xx + width > x0 + pw;
        let span = if end { (xx - width, xx) } else { (xx, xx + width) };
        let free = rows.iter().position(|row| row.iter().all(|(l, r)| span.1 < *l || span.0 > *r));
        if let Some(row) = free {
            rows[row].push(span);
            let anchor = if end { " end" } else { "" };
            let _ = write!(
                s,
                "<text class=\"evlab{anchor}\" x=\"{:.1}\" y=\"{:.1}\">{kind}</text>",
                if end { xx - 2.0 } else { xx + 2.0 },
                plot_bottom - 4.0 - 11.0 * row as f64
            );
        }
        s.push_str("</g>\n");
    }
}

fn polyline(s: &mut String, points: &[(f64, f64)], stroke: &str) {
    match points {
        [] => {}
        [(x, y)] => {
            let _ = writeln!(s, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"{stroke}\"/>");
        }
        _ => {
            let pts: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = writeln!(s, "<polyline class=\"line\" stroke=\"{stroke}\" points=\"{}\"/>", pts.join(" "));
        }
    }
}

/// `08:50`, or `01-15 08:50` when the range crosses a day.
fn time_label(range: &TimeRange, t: &chrono::DateTime<chrono::Utc>) -> String {
    if range.start.date_naive() == range.end.date_naive() {
        t.format("%H:%M").to_string()
    } else {
        t.format("%m-%d %H:%M").to_string()
    }
}

/// A scale from `lo` to `hi` with round steps (1, 2 or 5 times a power of ten), about four of them,
/// and a little room above the highest value.
pub(super) fn nice_scale(lo: f64, hi: f64) -> (f64, f64, f64) {
    let (lo, hi) = if !lo.is_finite() || !hi.is_finite() {
        (0.0, 1.0)
    } else if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        if hi == 0.0 {
            (0.0, 1.0)
        } else {
            (lo.min(0.0), hi.abs() * 1.25 + lo.min(0.0))
        }
    } else {
        (lo, hi + (hi - lo) * 0.08)
    };
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let nlo = (lo / step).floor() * step;
    let nhi = (hi / step).ceil() * step;
    if !(nlo.is_finite() && nhi.is_finite() && step.is_finite() && step > 0.0 && nhi > nlo) {
        // Values near the limits of f64: no round scale exists; draw against a plain one.
        return (0.0, 1.0, 0.2);
    }
    (nlo, nhi.max(nlo + step), step)
}

/// Round away floating-point dust (0.30000000000000004) before a tick is printed.
pub(super) fn clean(v: f64) -> f64 {
    if v.abs() < 1e-12 {
        0.0
    } else {
        let p = 10f64.powi(9 - v.abs().log10().ceil() as i32);
        (v * p).round() / p
    }
}

/// The style of the timeline, the event markers and the line naming the change a finding began
/// after: added only to pages that show events, so the others stay byte for byte as they were.
const EVENT_STYLE: &str = r#"
p.preceded{font-weight:600;margin-top:-.6em}
svg .ev line{stroke:#5d6d7e;stroke-width:1.2;stroke-dasharray:5 3}
svg .ev.lead line{stroke-width:2.6;stroke-dasharray:none}
svg .evlab{font-size:10px;stroke:#fff;stroke-width:3px;paint-order:stroke}
svg .evlab.end{text-anchor:end}
svg .ev.lead .evlab{font-weight:700}
svg .k-config-change line,svg .k-version-change line,svg .k-rollout line{stroke:#1f618d}
svg .k-config-change text,svg .k-version-change text,svg .k-rollout text,.kind.k-config-change,.kind.k-version-change,.kind.k-rollout{fill:#1f618d;color:#1f618d}
svg .k-restart line,svg .k-target-down line,svg .k-replica-removed line,svg .k-model-removed line{stroke:#ca6f1e}
svg .k-restart text,svg .k-target-down text,svg .k-replica-removed text,svg .k-model-removed text,.kind.k-restart,.kind.k-target-down,.kind.k-replica-removed,.kind.k-model-removed{fill:#ca6f1e;color:#ca6f1e}
svg .k-gpu-error line{stroke:#c0392b}
svg .k-gpu-error text,.kind.k-gpu-error{fill:#c0392b;color:#c0392b}
svg .k-target-up line,svg .k-replica-added line,svg .k-model-added line{stroke:#1e8449}
svg .k-target-up text,svg .k-replica-added text,svg .k-model-added text,.kind.k-target-up,.kind.k-replica-added,.kind.k-model-added{fill:#1e8449;color:#1e8449}
table.timeline{width:100%;border-collapse:collapse;font-size:.92em}
table.timeline th{text-align:left;color:var(--muted);font-weight:600;border-bottom:1px solid var(--line);padding:2px 6px}
table.timeline td{padding:3px 6px;border-bottom:1px solid #eef0f1;vertical-align:top;overflow-wrap:anywhere}
table.timeline td:first-child{white-space:nowrap}
table.timeline tr.baseline,table.timeline tr.outside{color:var(--muted)}
table.timeline tr.lead{font-weight:600}
.kind{font-weight:600;white-space:nowrap}
@media (max-width:600px){table.timeline thead{display:none}table.timeline tr{display:block;border-bottom:1px solid #eef0f1;padding:4px 0}table.timeline td{display:inline;border:0;padding:0 6px 0 0}table.timeline td:last-child{display:block}}
.explains{color:var(--crit)}
"#;

/// Text for HTML element content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if (c.is_control() && c != '\n' && c != '\t') || super::is_bidi_control(c) => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
:root{color-scheme:light;--fg:#1c2833;--muted:#5d6d7e;--line:#d5d8dc;--bg:#f4f6f7;--card:#fff;--crit:#c0392b;--warn:#b9770e;--info:#2471a3}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.45 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1100px;margin:0 auto;padding:12px}
h1{font-size:1.35em;margin:.2em 0 .4em}
h2{font-size:1.15em;margin:.2em 0}
h3{font-size:1em;margin:1em 0 .3em}
code{font:13px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef0f1;padding:1px 4px;border-radius:3px;overflow-wrap:anywhere}
dl.meta{display:grid;grid-template-columns:auto 1fr;gap:2px 12px;margin:0 0 12px;font-size:.93em}
dl.meta dt{color:var(--muted)}
dl.meta dd{margin:0;overflow-wrap:anywhere}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px;margin:12px 0}
section.finding,section.answer{border-left:6px solid var(--info)}
section.answer .context{color:var(--muted);font-size:.9em}
section.critical{border-left-color:var(--crit)}
section.warning{border-left-color:var(--warn)}
.badge{display:inline-block;color:#fff;background:var(--info);border-radius:4px;padding:1px 7px;font-size:.8em;vertical-align:2px;margin-right:4px}
.badge.critical{background:var(--crit)}
.badge.warning{background:var(--warn)}
.scope{margin:.2em 0 .6em;color:var(--muted)}
.evidence{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,440px),1fr));gap:10px}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:8px}
figure.held{border-color:#e6b0aa;background:#fffafa}
figure.context{background:#fbfcfc}
figcaption{font-size:.92em;margin-bottom:4px}
.value{font-weight:700;font-size:1.1em}
.low{color:var(--warn)}
.nochart{color:var(--muted);font-size:.9em;margin:.3em 0}
.stood-in,.recent,.disabled{color:var(--muted);font-style:italic}
svg.chart{display:block;width:100%;height:auto}
svg .panel{fill:#fff;stroke:var(--line)}
svg .panel.base{fill:#f4f6f7}
svg .grid{stroke:#e5e8e8;stroke-width:1}
svg .line{fill:none;stroke-width:2;stroke-linejoin:round}
svg .limit{stroke:#7d3c98;stroke-width:1.4;stroke-dasharray:6 4}
svg text{font:13px -apple-system,"Segoe UI",Roboto,Arial,sans-serif;fill:var(--muted)}
svg .ylab{text-anchor:end}
svg .xlab.end{text-anchor:end}
svg .ptitle{font-weight:600;fill:var(--fg)}
svg .onset{stroke:var(--fg);stroke-width:1.2;stroke-dasharray:2 3}
svg .olab{fill:var(--fg);font-weight:600;stroke:#fff;stroke-width:3px;paint-order:stroke}
svg .olab.end{text-anchor:end}
p.onset{font-weight:600}
svg .llab{text-anchor:end;fill:#7d3c98;font-weight:600;stroke:#fff;stroke-width:3px;paint-order:stroke}
details{margin-top:.8em}
summary{cursor:pointer;color:var(--muted)}
dl.promql dt{font-weight:600;margin-top:.4em}
dl.promql dd{margin:0}
.verdict{font-weight:600;padding:10px 14px;border-radius:8px}
.verdict.clean{background:#e9f7ef}
.verdict.unknown{background:#fdebd0}
ul{padding-left:1.3em}
ol{padding-left:1.5em}
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;
    use crate::report::{Limit, Report, Trend};

    /// The page of `report`, through the view as `render::render` does it.
    fn render(report: &Report, opts: &RenderOptions) -> String {
        super::render(&ReportView::new(report, opts), opts)
    }

    fn with_trends() -> Report {
        let mut r = sample_report();
        let (b0, w0) = (r.baseline.start.timestamp() as f64, r.window.start.timestamp() as f64);
        let e = &mut r.findings[0].evidence[0];
        e.series = Some(Trend {
            step_seconds: 60,
            range_seconds: 120,
            query: "q".to_string(),
            baseline: (0..=30).map(|i| (b0 + 60.0 * i as f64, 0.55 + 0.002 * i as f64)).collect(),
            window: (0..=30).filter(|i| !(12..15).contains(i)).map(|i| (w0 + 60.0 * i as f64, 0.7 + 0.01 * i as f64)).collect(),
        });
        e.limits = vec![Limit { label: "> 95%".to_string(), value: 0.95, side: crate::report::LimitSide::Above }];
        r
    }

    #[test]
    fn html_snapshot_of_the_sample_report_with_trends() {
        insta::assert_snapshot!(render(&with_trends(), &RenderOptions::default()));
    }

    #[test]
    fn html_snapshot_when_nothing_was_evaluated() {
        insta::assert_snapshot!(render(&nothing_evaluated_report(), &RenderOptions::default()));
    }

    #[test]
    fn html_snapshot_of_the_sample_report_with_events() {
        insta::assert_snapshot!(render(&sample_report_with_events(), &RenderOptions::default()));
    }

    #[test]
    fn the_chart_marks_the_findings_events_and_not_another_models() {
        let page = render(&sample_report_with_events(), &RenderOptions::default());
        let svg = &page[page.find("<svg").unwrap()..page.find("</svg>").unwrap()];
        for kind in ["target-down", "target-up", "rollout", "restart", "config-change"] {
            assert!(svg.contains(&format!("<g class=\"ev k-{kind}")), "no {kind} marker\n{svg}");
        }
        assert_eq!(svg.matches("<g class=\"ev ").count(), 5, "{svg}");
        assert!(!svg.contains("qwen2.5-coder-32b"), "the other model's restart is on the chart\n{svg}");
        assert_eq!(svg.matches(" lead\"").count(), 1);
        assert!(
            svg.contains("<g class=\"ev k-config-change lead\"><title>09:01:00 UTC config-change (llama-3.1-70b-instruct): num_gpu_blocks 2000 -&gt; 900"),
            "{svg}"
        );
        // Events only in the panel of their own range: the baseline's in the left one.
        assert!(page.contains("<p class=\"onset\">Started 09:03 UTC</p>\n<p class=\"preceded\">Began 2 min after"), "{page}");
        assert!(page.contains("<table class=\"timeline\">") && page.contains("→ #1 began after it"), "{page}");
        assert_eq!(page.matches("<tr class=\"baseline").count(), 3);
        assert_eq!(page.matches("<tr class=\"window").count(), 3);
    }

    #[test]
    fn the_leading_signals_chart_marks_the_onset_and_where_the_problem_was_over() {
        let mut r = with_trends();
        let f = &mut r.findings[0];
        f.onset_signal = Some(f.evidence[0].signal.clone());
        let page = render(&r, &RenderOptions::default());
        assert!(page.contains(">onset 09:03</text>") && !page.contains(">over "), "{page}");
        r.findings[0].ended = Some(r.window.start + chrono::Duration::minutes(21));
        let page = render(&r, &RenderOptions::default());
        assert!(page.contains(">onset 09:03</text>") && page.contains(">over 09:21</text>"), "{page}");
        assert!(page.contains("; over since 09:21 UTC: "), "{page}");
    }

    #[test]
    fn a_page_without_events_has_no_timeline_and_no_markers() {
        let page = render(&sample_report(), &RenderOptions::default());
        assert!(!page.contains("class=\"timeline\"") && !page.contains("class=\"ev ") && !page.contains("svg .ev"), "{page}");
    }

    #[test]
    fn disabled_rules_are_listed_and_a_run_missing_core_checks_is_not_drawn_as_clean() {
        let mut r = clean_report();
        r.disabled = vec!["gpu-throttling".to_string()];
        let page = render(&r, &RenderOptions::default());
        assert!(page.contains("Disabled in the configuration (not evaluated): gpu-throttling"), "{page}");
        assert!(page.contains("verdict clean"));
        r.coverage.core_not_evaluated = vec!["slow-decode".to_string()];
        let page = render(&r, &RenderOptions::default());
        assert!(!page.contains("verdict clean") && page.contains("not an all-clear"), "{page}");
    }

    #[test]
    fn a_run_where_signals_moved_that_no_rule_explains_is_not_drawn_as_clean_and_lists_them() {
        let mut r = clean_report();
        let start = r.window.start;
        r.unexplained.push(crate::report::Unexplained {
            signal: "external_prefix_hit_ratio".into(),
            title: "External prefix-cache hit ratio <b>".into(),
            unit: "ratio".into(),
            scope: crate::report::Scope::new(),
            direction: "down".into(),
            value: Some(0.03),
            baseline: Some(0.6),
            ratio: Some(0.05),
            robust_z: None,
            onset: start,
            from_start: true,
            duration_seconds: 1800,
            ongoing: true,
            query: "sum(rate(x[3m])) > 0".into(),
            metric: String::new(),
            spare: true,
            series: crate::report::Trend { step_seconds: 60, range_seconds: 180, query: String::new(), baseline: vec![], window: vec![] },
        });
        let page = render(&r, &RenderOptions::default());
        assert!(!page.contains("verdict clean") && page.contains("not an all-clear"), "{page}");
        assert!(page.contains("<h2>Also changed, not explained by any rule</h2>"), "{page}");
        assert!(page.contains("External prefix-cache hit ratio &lt;b&gt; down 0.05x") && page.contains("&gt; 0</code>"), "{page}");
    }

    #[test]
    fn the_page_loads_nothing_from_anywhere() {
        let page = render(&with_trends(), &RenderOptions::default());
        for needle in ["<script", "<link", "<img", "@import", "url(", "src=", "href="] {
            assert!(!page.contains(needle), "found {needle}");
        }
    }

    #[test]
    fn a_signal_with_a_trend_gets_a_chart_with_its_threshold_and_a_gap_where_data_is_missing() {
        let page = render(&with_trends(), &RenderOptions::default());
        assert_eq!(page.matches("<svg").count(), 1);
        assert!(page.contains("class=\"limit\"") && page.contains("&gt; 95%"));
        // baseline line, window before the gap, window after it.
        assert_eq!(page.matches("<polyline").count(), 3, "{page}");
        assert!(page.contains("No trend recorded for this signal."));
    }

    #[test]
    fn outside_text_is_escaped() {
        let mut r = with_trends();
        r.findings[0].scope.insert("model_name".to_string(), "<script>alert(1)</script>".to_string());
        r.warnings.push("\"><img src=x onerror=alert(1)>".to_string());
        let page = render(&r, &RenderOptions::default());
        assert!(!page.contains("<script") && !page.contains("<img"));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    }

    #[test]
    fn scales_are_round_and_cover_the_data() {
        assert_eq!(nice_scale(0.0, 0.96), (0.0, 1.25, 0.25));
        let (lo, hi, step) = nice_scale(0.0, 3.0);
        assert!(lo == 0.0 && hi >= 3.0 && step == 1.0, "{lo} {hi} {step}");
        assert_eq!(nice_scale(0.0, 0.0), (0.0, 1.0, 0.2));
        let (lo, hi, _) = nice_scale(f64::NAN, 1.0);
        assert!(lo.is_finite() && hi.is_finite());
        let (lo, hi, step) = nice_scale(-f64::MAX, f64::MAX);
        assert!(lo.is_finite() && hi.is_finite() && step > 0.0);
        assert_eq!(clean(0.1 + 0.2), 0.3);
    }

    #[test]
    fn odd_data_does_not_panic_or_draw_nonsense() {
        let mut r = with_trends();
        let (w_end, b_end) = (r.window.end.timestamp() as f64, r.baseline.end.timestamp() as f64);
        let e = &mut r.findings[0].evidence[0];
        e.value = Some(f64::INFINITY);
        e.limits.push(Limit { label: "nan".to_string(), value: f64::NAN, side: crate::report::LimitSide::Above });
        if let Some(t) = e.series.as_mut() {
            t.window.push((f64::NAN, 1.0));
            t.window.push((1e18, 1e300));
            // Values at the limits of f64, inside the ranges, so they are drawn.
            t.window.push((w_end, f64::MAX));
            t.baseline.push((b_end, -f64::MAX));
        }
        let page = render(&r, &RenderOptions::default());
        assert!(!page.contains("NaN\"") && !page.contains("inf\""), "non-finite coordinates");
    }
}
