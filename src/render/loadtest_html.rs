//! A load test as one HTML page: the verdict and bounds in the text's words, the curve as SVG
//! charts over the offered load (the client's time to the first token, the time between tokens,
//! the throughput, the engines' batch and queue), the limits drawn, the knee and the first step
//! that broke them marked, and the text's table. Self-contained: no script, no request.

use std::fmt::Write as _;

use super::html::{clean, esc, nice_scale};
use super::loadtest::{bounds_line, closing_lines, load_words, slo_line, stop_words, table_rows, verdict};
use crate::report::loadtest::{LoadMode, LoadtestRun, Step};
use crate::units::{format_value, sig};

const W: f64 = 560.0;
const H: f64 = 230.0;
const LEFT: f64 = 62.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 18.0;
const BOTTOM: f64 = 40.0;

/// One line of a chart: its name, its CSS class and a value per step (`None` where it was not read).
struct Series {
    name: &'static str,
    class: &'static str,
    points: Vec<(f64, Option<f64>)>,
}

/// One chart: what it shows, in which unit, its lines and the limits drawn across it.
struct Chart {
    title: String,
    unit: &'static str,
    series: Vec<Series>,
    limits: Vec<(String, f64)>,
}

/// The page.
pub fn html(run: &LoadtestRun) -> String {
    let mut out = String::new();
    let title = format!("Load test of {} ({})", run.endpoint, run.model);
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    );
    let _ = writeln!(out, "<title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>", esc(&title));
    let _ = writeln!(out, "<h1>{}</h1>", esc(&title));
    let ok = run.knee.as_ref().is_some_and(|k| k.first_bad.is_some());
    let _ = writeln!(out, "<p class=\"verdict {}\">{}</p>", if ok { "knee" } else { "none" }, esc(&verdict(run)));
    let _ = writeln!(out, "<ul class=\"facts\">");
    let stopped = format!("stopped: {}; {} s in all", stop_words(run.stop), sig((run.ended - run.started).num_milliseconds() as f64 / 1000.0));
    let times = format!("{} → {} UTC", run.started.format("%Y-%m-%d %H:%M:%S"), run.ended.format("%H:%M:%S"));
    for line in [bounds_line(run.mode, &run.bounds, &run.ceilings), slo_line(&run.slo, run.prometheus.is_some()), stopped, times] {
        let _ = writeln!(out, "<li>{}</li>", esc(&line));
    }
    let _ = writeln!(out, "</ul>");
    for line in closing_lines(run) {
        let _ = writeln!(out, "<p class=\"closing\">{}</p>", esc(&line));
    }
    for (i, chart) in charts(run).iter().enumerate() {
        if let Some(svg) = draw(run, chart, &format!("chart-{i}")) {
            out.push_str(&svg);
        }
    }
    table(&mut out, run);
    let _ = writeln!(out, "</body>\n</html>");
    out
}

/// The charts the run has data for, in the order a reader asks: how slow, how much, why.
fn charts(run: &LoadtestRun) -> Vec<Chart> {
    let steps = by_load(run);
    let of = |f: &dyn Fn(&Step) -> Option<f64>| steps.iter().map(|s| (s.load, f(s))).collect::<Vec<_>>();
    let limit = |name: &str, v: Option<f64>| v.map(|v| (format!("{name} {}", format_value(v, "seconds")), v));
    let engines = |f: &dyn Fn(&crate::report::loadtest::StepEngine) -> Option<f64>| of(&|s: &Step| s.engine.as_ref().and_then(f));
    let mut out = vec![
        Chart {
            title: "Time to the first token (client)".into(),
            unit: "seconds",
            series: vec![
                Series { name: "p50", class: "s1", points: of(&|s: &Step| s.ttft.map(|t| t.p50)) },
                Series { name: "p95", class: "s2", points: of(&|s: &Step| s.ttft.map(|t| t.p95)) },
            ],
            limits: limit("p95 limit", run.slo.ttft_p95_high).into_iter().collect(),
        },
        Chart {
            title: "Time between tokens".into(),
            unit: "seconds",
            series: vec![
                Series { name: "client p95", class: "s1", points: of(&|s: &Step| s.between_tokens.map(|t| t.p95)) },
                Series { name: "engines p95", class: "s2", points: engines(&|e| e.itl_p95) },
            ],
            limits: limit("p95 limit", run.slo.itl_p95_high.filter(|_| run.prometheus.is_some())).into_iter().collect(),
        },
        Chart {
            title: "Throughput".into(),
            unit: "tokens/s",
            series: vec![Series { name: "generated tokens/s", class: "s2", points: of(&|s: &Step| Some(s.tokens_per_second)) }],
            limits: Vec::new(),
        },
        Chart {
            title: "The engines: running and waiting (highest over the step)".into(),
            unit: "count",
            series: vec![
                Series { name: "running", class: "s2", points: engines(&|e| e.running_max) },
                Series { name: "waiting", class: "s1", points: engines(&|e| e.waiting_max) },
            ],
            limits: Vec::new(),
        },
    ];
    // A line with no point read is left out, and a chart with no line.
    for c in &mut out {
        c.series.retain(|s| s.points.iter().any(|p| p.1.is_some_and(f64::is_finite)));
    }
    out.retain(|c| !c.series.is_empty());
    out
}

fn by_load(run: &LoadtestRun) -> Vec<&Step> {
    let mut steps: Vec<&Step> = run.steps.iter().collect();
    steps.sort_by(|a, b| a.load.total_cmp(&b.load).then(a.index.cmp(&b.index)));
    steps
}

/// One chart as SVG over the offered load, or `None` when it has no finite point.
fn draw(run: &LoadtestRun, c: &Chart, id: &str) -> Option<String> {
    let finite = |v: &f64| v.is_finite();
    let values: Vec<f64> = c.series.iter().flat_map(|s| s.points.iter().filter_map(|p| p.1)).filter(finite).collect();
    let loads: Vec<f64> = run.steps.iter().map(|s| s.load).filter(finite).collect();
    if values.is_empty() || loads.is_empty() {
        return None;
    }
    let hi = values.iter().copied().chain(c.limits.iter().map(|l| l.1)).fold(0.0, f64::max);
    let (lo, hi, step) = nice_scale(0.0, if hi > 0.0 { hi } else { 1.0 });
    let (x_lo, x_hi, x_step) = nice_scale(0.0, loads.iter().copied().fold(0.0, f64::max).max(1.0));
    let (pw, ph) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let x = |v: f64| LEFT + (v - x_lo) / (x_hi - x_lo) * pw;
    let y = |v: f64| (TOP + ph - (v - lo) / (hi - lo) * ph).clamp(-1.0e6, 1.0e6);
    let mut s = String::new();
    let _ = writeln!(s, "<figure>\n<figcaption>{} by offered load</figcaption>", esc(&c.title));
    let _ = writeln!(
        s,
        "<svg class=\"chart\" viewBox=\"0 0 {W} {H}\" role=\"img\" aria-labelledby=\"{id}\" xmlns=\"http://www.w3.org/2000/svg\">\n<title id=\"{id}\">{} by offered load</title>",
        esc(&c.title)
    );
    let mut v = lo;
    for _ in 0..20 {
        if v > hi + step * 1e-9 {
            break;
        }
        let _ = writeln!(
            s,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"ylab\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            W - RIGHT,
            y(v),
            y(v),
            LEFT - 6.0,
            y(v) + 4.0,
            esc(&format_value(clean(v), c.unit))
        );
        v += step;
    }
    let mut v = x_lo;
    for _ in 0..20 {
        if v > x_hi + x_step * 1e-9 {
            break;
        }
        let _ = writeln!(s, "<text class=\"xlab\" x=\"{:.1}\" y=\"{:.1}\">{}</text>", x(v), H - BOTTOM + 14.0, sig(clean(v)));
        v += x_step;
    }
    let axis = match run.mode {
        LoadMode::Concurrency => "requests in flight",
        LoadMode::Rate => "requests a second",
    };
    let _ = writeln!(s, "<text class=\"xname\" x=\"{:.1}\" y=\"{:.1}\">{axis}</text>", LEFT + pw / 2.0, H - 6.0);
    // The knee and the first load that broke the limits.
    if let Some(k) = &run.knee {
        let marks = [(Some(k.load), "knee", "knee"), (k.first_bad.and_then(|i| run.steps.get(i)).map(|s| s.load), "bad", "broke")];
        for (load, class, word) in marks {
            let Some(load) = load.filter(finite) else { continue };
            let _ = writeln!(
                s,
                "<line class=\"mark {class}\" x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{TOP}\" y2=\"{:.1}\"/><text class=\"mlab {class}\" x=\"{:.1}\" y=\"{:.1}\">{word} at {}</text>",
                x(load),
                x(load),
                TOP + ph,
                x(load) + 3.0,
                TOP + if class == "knee" { 10.0 } else { 22.0 },
                esc(&load_words(run.mode, load))
            );
        }
    }
    for (label, value) in &c.limits {
        let _ = writeln!(
            s,
            "<line class=\"limit\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"llab\" x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            W - RIGHT,
            y(*value),
            y(*value),
            W - RIGHT - 4.0,
            y(*value) - 4.0,
            esc(label)
        );
    }
    let bad: Vec<f64> = run.steps.iter().filter(|st| !st.passed()).map(|st| st.load).collect();
    for series in &c.series {
        let pts: Vec<(f64, f64)> = series.points.iter().filter_map(|(l, v)| v.filter(finite).map(|v| (*l, v))).collect();
        let line: Vec<String> = pts.iter().map(|(l, v)| format!("{:.1},{:.1}", x(*l), y(*v))).collect();
        let _ = writeln!(s, "<polyline class=\"{}\" points=\"{}\"/>", series.class, line.join(" "));
        for (l, v) in &pts {
            let state = if bad.contains(l) { " broke" } else { "" };
            let _ = writeln!(
                s,
                "<circle class=\"{}{state}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\"><title>{}: {} at {}</title></circle>",
                series.class,
                x(*l),
                y(*v),
                esc(series.name),
                esc(&format_value(*v, c.unit)),
                esc(&load_words(run.mode, *l))
            );
        }
    }
    s.push_str("</svg>\n");
    let legend: Vec<String> = c.series.iter().map(|se| format!("<span class=\"key {}\">{}</span>", se.class, esc(se.name))).collect();
    let _ = writeln!(s, "<p class=\"legend\">{}</p>\n</figure>", legend.join(" "));
    Some(s)
}

fn table(out: &mut String, run: &LoadtestRun) {
    let rows = table_rows(run);
    let _ = writeln!(out, "<table>");
    for (i, r) in rows.iter().enumerate() {
        let cell = if i == 0 { "th" } else { "td" };
        let cells: Vec<String> = r.iter().map(|c| format!("<{cell}>{}</{cell}>", esc(c))).collect();
        let _ = writeln!(out, "<tr>{}</tr>", cells.concat());
    }
    let _ = writeln!(out, "</table>");
}

const CSS: &str = "body{font-family:system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:1rem;max-width:60rem;color:#1b2631}\
h1{font-size:1.2rem}.verdict{font-weight:700;font-size:1.05rem}.verdict.knee{color:#1e8449}.verdict.none{color:#b03a2e}\
.facts{padding-left:1.2rem}.closing{margin:.3rem 0}figure{margin:1rem 0}figcaption{font-weight:600;margin-bottom:.2rem}\
svg.chart{width:100%;max-width:560px;height:auto;display:block}svg .grid{stroke:#e5e8e8}svg text{font-size:10px;fill:#424949}\
svg .ylab{text-anchor:end}svg .xlab,svg .xname{text-anchor:middle}svg polyline{fill:none;stroke-width:2}\
svg polyline.s1{stroke:#85929e}svg polyline.s2{stroke:#2471a3}svg circle.s1{fill:#85929e}svg circle.s2{fill:#2471a3}\
svg circle.broke{fill:#c0392b}svg .limit{stroke:#c0392b;stroke-dasharray:5 3}svg .llab{text-anchor:end;fill:#c0392b}\
svg .mark{stroke-width:1.2}svg .mark.knee{stroke:#1e8449}svg .mark.bad{stroke:#c0392b;stroke-dasharray:2 2}\
svg .mlab.knee{fill:#1e8449}svg .mlab.bad{fill:#c0392b}.legend{font-size:.85rem;margin:.2rem 0}\
.key::before{content:'';display:inline-block;width:1.2em;height:.25em;margin-right:.3em;vertical-align:middle}\
.key.s1::before{background:#85929e}.key.s2::before{background:#2471a3}\
table{border-collapse:collapse;font-size:.8rem;display:block;overflow-x:auto}td,th{border:1px solid #d5d8dc;padding:.2rem .4rem;white-space:nowrap}";

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_draws_each_measure_with_its_limit_and_marks_the_knee() {
        let run: crate::report::loadtest::LoadtestRun = serde_json::from_str(include_str!("../../fixtures/real-engine-loadtest/loadtest.json")).unwrap();
        let page = super::html(&run);
        assert!(page.contains(&crate::render::html::esc(&super::verdict(&run))), "the text's verdict");
        assert_eq!(page.matches("<svg class=\"chart\"").count(), 4, "TTFT, between tokens, throughput, the engines");
        assert_eq!(page.matches("class=\"limit\"").count(), 2, "the profile's two p95 limits");
        assert!(page.contains("class=\"mark knee\"") && page.contains("class=\"mark bad\""));
        assert_eq!(page.matches("<tr>").count(), run.steps.len() + 1, "a row per step under the header");
        assert!(!page.contains("<script"));
    }
}
