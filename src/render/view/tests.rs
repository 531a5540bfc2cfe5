use super::*;
use crate::render::fixtures::*;
use crate::render::{render, Format};
use chrono::TimeZone;

#[test]
fn every_section_of_the_sample_report_is_in_the_view() {
    let v = ReportView::new(&sample_report(), &RenderOptions::default());
    assert_eq!(v.verdict, Verdict::Findings);
    assert_eq!(v.worst, Some(Severity::Critical));
    assert_eq!(v.headline, "2 findings (1 critical, 1 warning) · 6 of 8 rules evaluated");
    assert_eq!(v.coverage.as_deref(), Some("6 of 8 rules evaluated"));
    assert_eq!(v.header.window, "2026-01-15 09:00:00 → 09:30:00 UTC (30m)");
    assert_eq!(v.header.baseline_brief, "the 30m before");
    assert_eq!(v.header.source_line(), r#"prometheus http://prometheus.monitoring:9090, selector {namespace="inference-prod"}"#);
    assert!(v.header.fleet.as_deref().is_some_and(|f| f.starts_with("5 replicas by instance")));
    assert_eq!(v.findings.len(), 2);
    let kv = &v.findings[0];
    assert_eq!((kv.rank, kv.severity, kv.rule.as_str()), (1, Severity::Critical, "kv-cache-exhausted"));
    assert_eq!(kv.scope, "llama-3.1-70b-instruct");
    assert_eq!((kv.evidence[0].value.as_str(), kv.evidence[0].baseline.as_str()), ("99.1%", "62%"));
    assert!(kv.evidence[0].sparkline.is_some() && kv.evidence[0].trend.is_some());
    assert_eq!(kv.evidence[0].trend.as_ref().unwrap().limits, vec![("> 95%".to_string(), 0.95)]);
    assert!(kv.replicas.as_deref().is_some_and(|r| r.starts_with("2 of 3 replicas")));
    assert_eq!(kv.onset.as_deref(), Some("Started 09:03 UTC"));
    assert_eq!(v.findings[1].onset.as_deref(), Some("Present since before the window (09:00 UTC)"));
    assert_eq!(kv.recommendations[0].head, "Suggested max_num_seqs = 37");
    assert_eq!(kv.steps.len(), 3);
    assert_eq!(kv.also_consistent_list(|id| id.to_string()).as_deref(), Some("queue-backlog (warning), ttft-regression (info)"));
    // A finding raised by what it absorbed says which one raised it, and from what.
    let mut raised = kv.clone();
    raised.severity = Severity::Warning;
    raised.raised_from = Some(Severity::Info);
    assert_eq!(
        raised.also_consistent_list(|id| format!("`{id}`")).as_deref(),
        Some("`queue-backlog` (warning: raises this finding from info), `ttft-regression` (info)")
    );
    assert_eq!(kv.queries.len(), 2);
    assert_eq!(v.healthy.as_ref().map(|h| h.pairs.as_str()), Some("5 rule/scope pairs"));
    assert_eq!(v.healthy_pairs.len(), 5);
    assert_eq!(v.not_evaluated.len(), 2);
    assert_eq!(v.not_evaluated[0].rule, "kv-cache-exhausted", "sorted by rule");
    assert_eq!(v.not_evaluated_pairs(), "2 rule/scope pairs");
    assert_eq!(v.warnings, vec!["partial response: store 10.0.3.7:10901 unavailable (2 times)"]);
    assert_eq!(v.query_timing, "at 09:30:00 UTC (baseline: same query at 09:00:00 UTC)");
    assert!(v.disabled.is_empty() && v.disabled_line.is_none());
    assert_eq!(v.scope_all, "all");
}

#[test]
fn disabled_rules_are_listed_by_name() {
    let mut r = clean_report();
    r.disabled = vec!["gpu-throttling".to_string(), "slow\ndecode".to_string()];
    let v = ReportView::new(&r, &RenderOptions::default());
    assert_eq!(v.disabled, vec!["gpu-throttling", "slow decode"]);
    assert_eq!(v.disabled_line.as_deref(), Some("Disabled in the configuration (not evaluated): gpu-throttling, slow decode"));
}

#[test]
fn a_run_that_evaluated_nothing_has_no_all_clear_and_no_healthy_section() {
    let v = ReportView::new(&nothing_evaluated_report(), &RenderOptions::default());
    assert_eq!(v.verdict, Verdict::NothingEvaluated);
    assert!(v.headline.starts_with("nothing evaluated"), "{}", v.headline);
    assert!(v.healthy.is_none() && v.healthy_pairs.is_empty() && v.findings.is_empty());
    let c = v.conclusion.unwrap_or_default();
    assert!(c.starts_with("Nothing was evaluated") && c.contains("not an all-clear"), "{c}");
    assert_eq!(v.not_evaluated.len(), 2);
}

#[test]
fn a_live_run_adds_the_relative_time_only_where_it_may() {
    let r = sample_report();
    let now = r.window.end + chrono::Duration::minutes(12);
    let v = ReportView::new(&r, &RenderOptions { now: Some(now), ..RenderOptions::default() });
    assert!(v.header.window.ends_with("ended 12 min ago)"), "{}", v.header.window);
    assert!(!v.header.window_exact.contains("ago") && !v.header.baseline.contains("ago"));
    assert_eq!(v.findings[0].onset.as_deref(), Some("Started 09:03 UTC (39 min ago)"));
    assert_eq!(v.findings[1].onset.as_deref(), Some("Present since before the window (09:00 UTC)"));
}

#[test]
fn a_problem_over_before_the_windows_end_says_since_when_and_by_which_signal() {
    let mut r = sample_report();
    let f = &mut r.findings[0];
    f.onset_signal = Some(f.evidence[0].signal.clone());
    f.ended = Some(Utc.with_ymd_and_hms(2026, 1, 15, 9, 21, 0).unwrap());
    let title = f.evidence[0].title.clone();
    let v = ReportView::new(&r, &RenderOptions::default());
    assert_eq!(v.findings[0].onset.as_deref(), Some(format!("Started 09:03 UTC; over since 09:21 UTC: {title} back at its baseline level").as_str()));
    let now = r.window.end + chrono::Duration::minutes(12);
    let v = ReportView::new(&r, &RenderOptions { now: Some(now), ..RenderOptions::default() });
    assert_eq!(
        v.findings[0].onset.as_deref(),
        Some(format!("Started 09:03 UTC (39 min ago); over since 09:21 UTC (21 min ago): {title} back at its baseline level").as_str())
    );
}

#[test]
fn a_problem_present_before_the_window_and_over_in_it_says_since_when_by_its_limits() {
    let mut r = sample_report();
    let f = &mut r.findings[1];
    f.onset_signal = Some(f.evidence[0].signal.clone());
    assert!(f.present_before_window());
    f.ended = Some(Utc.with_ymd_and_hms(2026, 1, 15, 9, 6, 0).unwrap());
    let title = f.evidence[0].title.clone();
    let v = ReportView::new(&r, &RenderOptions::default());
    assert_eq!(
        v.findings[1].onset.as_deref(),
        Some(format!("Present since before the window (09:00 UTC); over since 09:06 UTC: {title} back within its limits").as_str())
    );
    // Its chart marks the end, and no onset.
    let points = vec![(r.window.start.timestamp() as f64, 0.99), (r.window.end.timestamp() as f64, 0.4)];
    r.findings[1].evidence[0].series =
        Some(crate::report::Trend { step_seconds: 60, range_seconds: 180, query: "q".into(), baseline: points.clone(), window: points });
    let v = ReportView::new(&r, &RenderOptions::default());
    let trend = v.findings[1].evidence[0].trend.clone().expect("a trend");
    assert_eq!((trend.onset, trend.ended.map(|m| m.1)), (None, Some("09:06".to_string())));
}

#[test]
fn the_onset_marks_the_leading_signals_trend_and_a_finding_without_one_says_nothing() {
    let mut r = sample_report();
    let points = vec![(r.window.start.timestamp() as f64, 0.6), (r.window.end.timestamp() as f64, 0.99)];
    r.findings[0].evidence[0].series =
        Some(crate::report::Trend { step_seconds: 60, range_seconds: 180, query: "q".into(), baseline: points.clone(), window: points });
    r.findings[1].onset_signal = None;
    let v = ReportView::new(&r, &RenderOptions::default());
    let marker = v.findings[0].evidence[0].trend.as_ref().and_then(|t| t.onset.clone());
    assert_eq!(marker, Some((r.findings[0].onset.unwrap().timestamp() as f64, "09:03".to_string())));
    assert_eq!(v.findings[0].evidence[0].trend.as_ref().and_then(|t| t.ended.clone()), None);
    assert_eq!(v.findings[1].onset, None);
    // A problem that was over is marked where it ended, on the same chart.
    let end = r.window.start + chrono::Duration::minutes(21);
    r.findings[0].ended = Some(end);
    let v = ReportView::new(&r, &RenderOptions::default());
    let marker = v.findings[0].evidence[0].trend.as_ref().and_then(|t| t.ended.clone());
    assert_eq!(marker, Some((end.timestamp() as f64, "09:21".to_string())));
}

#[test]
fn credentials_never_reach_the_view() {
    let mut r = sample_report();
    r.source.url = "https://user:s3cret@prom.example:9090/".to_string();
    let v = ReportView::new(&r, &RenderOptions::default());
    assert_eq!(v.header.source_url, "https://prom.example:9090/");
}

#[test]
fn the_timeline_words_every_event_once_oldest_first() {
    let mut r = sample_report_with_events();
    r.events.reverse();
    let v = ReportView::new(&r, &RenderOptions::default());
    let times: Vec<&str> = v.timeline.iter().map(|e| e.time.as_str()).collect();
    assert_eq!(times, ["08:44:00 UTC", "08:46:30 UTC", "08:58:00 UTC", "09:00:30 UTC", "09:01:00 UTC", "09:12:00 UTC"]);
    assert_eq!(v.timeline_heading.as_deref(), Some("Timeline: 6 changes (3 in the baseline, 3 in the window), oldest first"));
    assert_eq!(v.timeline_more, None);
    assert!(v.timeline.iter().all(|e| e.listed));
    let rollout = &v.timeline[2];
    assert_eq!((rollout.kind, rollout.scope.as_str(), rollout.phase), (EventKind::Rollout, "all", Phase::Baseline));
    assert_eq!(rollout.line, "08:58:00 UTC rollout (all): Deployment inference-prod/vllm-llama generation 7 -> 8");
    let config = &v.timeline[4];
    assert_eq!(config.phase, Phase::Window);
    assert_eq!((config.explains.clone(), config.relevance), (vec![1], 0));
    assert_eq!(config.line, "09:01:00 UTC config-change (llama-3.1-70b-instruct): num_gpu_blocks 2000 -> 900 on 2 of 3 replicas");
    assert!(v.timeline.iter().filter(|e| e.kind != EventKind::ConfigChange).all(|e| e.explains.is_empty()));
}

#[test]
fn a_finding_says_which_change_it_began_after() {
    let v = ReportView::new(&sample_report_with_events(), &RenderOptions::default());
    assert_eq!(
        v.findings[0].preceded_by.as_deref(),
        Some("Began 2 min after a configuration change at 09:01:00 UTC: num_gpu_blocks 2000 -> 900 on 2 of 3 replicas")
    );
    assert_eq!(v.findings[1].preceded_by, None);
    assert!(v.findings[0].steps[0].starts_with("Start with the configuration change at 09:01:00 UTC"));
}

#[test]
fn a_live_run_says_how_long_ago_each_event_was_and_the_exact_line_does_not() {
    let r = sample_report_with_events();
    let now = r.window.end + chrono::Duration::minutes(12);
    let v = ReportView::new(&r, &RenderOptions { now: Some(now), ..RenderOptions::default() });
    assert_eq!(v.timeline[4].time, "09:01:00 UTC (41 min ago)");
    assert!(v.timeline[4].line.starts_with("09:01:00 UTC (41 min ago) config-change"));
    assert!(v.timeline[4].line_exact.starts_with("09:01:00 UTC config-change"));
}

#[test]
fn the_charts_mark_the_events_of_the_findings_scope_and_the_change_it_began_after() {
    let v = ReportView::new(&sample_report_with_events(), &RenderOptions::default());
    let trend = v.findings[0].evidence[0].trend.as_ref().expect("the sample's KV signal has a trend");
    let kinds: Vec<&str> = trend.events.iter().map(|e| e.kind.as_str()).collect();
    // The other model's restart at 09:12 is not this finding's.
    assert_eq!(kinds, ["target-down", "target-up", "rollout", "restart", "config-change"]);
    assert!(trend.events.windows(2).all(|w| w[0].at < w[1].at));
    let lead: Vec<EventKind> = trend.events.iter().filter(|e| e.lead).map(|e| e.kind).collect();
    assert_eq!(lead, [EventKind::ConfigChange]);
    assert!(trend.events[4].line.ends_with("num_gpu_blocks 2000 -> 900 on 2 of 3 replicas"));
}

#[test]
fn a_long_timeline_lists_a_dozen_keeping_what_a_finding_began_after() {
    let mut r = sample_report_with_events();
    let template = r.events[0].clone();
    for i in 0..20 {
        let mut e = template.clone();
        e.time = r.baseline.start + chrono::Duration::seconds(30 + 60 * i);
        e.detail = format!("flap {i}");
        r.events.push(e);
    }
    let v = ReportView::new(&r, &RenderOptions::default());
    assert_eq!(v.timeline.len(), 26);
    let listed: Vec<&EventView> = v.timeline_listed().collect();
    assert_eq!(listed.len(), TIMELINE_LISTED);
    assert_eq!(v.timeline_more.as_deref(), Some("... and 14 more (see --format json)"));
    assert!(listed.windows(2).all(|w| w[0].at <= w[1].at), "oldest first");
    assert!(listed.iter().any(|e| e.kind == EventKind::ConfigChange), "the change a finding began after is listed");
    assert_eq!(listed.iter().filter(|e| e.phase == Phase::Window).count(), 3, "every window event is listed");
}

#[test]
fn without_events_there_is_no_timeline() {
    let v = ReportView::new(&sample_report(), &RenderOptions::default());
    assert!(v.timeline.is_empty() && v.timeline_heading.is_none() && v.timeline_more.is_none());
    assert!(v.findings.iter().all(|f| f.preceded_by.is_none()));
    assert!(v.findings[0].evidence[0].trend.as_ref().is_some_and(|t| t.events.is_empty()));
}

/// An event detail is server text: whatever it holds, it stays one line and inert in every format.
#[test]
fn hostile_event_text_stays_inert_in_every_format() {
    let mut r = sample_report_with_events();
    let hostile = "<script>x</script> *bold* `tick` |pipe| <!channel> ]]> &amp;\nsecond line\r\u{1b}[31m";
    r.events[0].detail = hostile.to_string();
    r.events[0].scope.insert("model_name".to_string(), "*m* <b>".to_string());
    if let Some(p) = r.findings[0].preceded_by.as_mut() {
        p.text = format!("began 2 min after {hostile}");
    }
    // Without a first step that names the change, the answer says it in a note, hostile text and all.
    r.findings[0].steps.retain(|s| !matches!(s, crate::report::Step::Change { .. }));
    for &format in Format::ALL {
        let text = render(&r, format, &RenderOptions::default());
        let name = format.name();
        assert!(!text.contains('\u{1b}'), "{name}: a control character reached the output\n{text}");
        assert!(!text.contains("\nsecond line"), "{name}: a newline in an event reached the output\n{text}");
        // Markup (not the terminal table, not the JSON's data) must not carry the tags.
        // (Markdown escapes with a backslash, which leaves the characters in place.)
        if ![Format::Text, Format::Table, Format::Json].contains(&format) {
            let live = text.replace("\\<", "");
            assert!(!live.contains("<script>") && !live.contains("<!channel>") && !live.contains("<b>"), "{name}\n{text}");
        }
        if format == Format::Junit {
            roxmltree::Document::parse(&text).expect("well-formed XML");
        }
    }
    let md = render(&r, Format::Markdown, &RenderOptions::default());
    assert!(md.contains(r"\<script>x\</script> \*bold\*"), "{md}");
    let slack = render(&r, Format::Slack, &RenderOptions::default());
    assert!(slack.contains("&lt;script&gt;x&lt;/script&gt; ∗bold∗ ˋtickˋ |pipe| &lt;!channel&gt;"), "{slack}");
}

/// The sections a reader must find in every format when the report has them.
#[test]
fn every_format_shows_disabled_rules_warnings_and_not_evaluated_pairs() {
    let mut r = sample_report();
    r.disabled = vec!["gpu-throttling".to_string()];
    let opts = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
    for &format in Format::ALL {
        let text = render(&r, format, &opts);
        let name = format.name();
        assert!(text.contains("gpu-throttling"), "{name}: disabled rule missing\n{text}");
        assert!(text.contains("10.0.3.7:10901 unavailable"), "{name}: warning missing\n{text}");
        // The channel formats count what could not be evaluated (naming only what bears on the
        // leading finding); the documents list every pair.
        if format == Format::Text {
            assert!(text.contains("not evaluated") && text.contains("-v lists them"), "{name}: not-evaluated count missing\n{text}");
        } else if [Format::Markdown, Format::Slack, Format::SlackBlocks].contains(&format) {
            assert!(text.contains("not evaluated") && !text.contains("-v "), "{name}: not-evaluated count missing, or a command-line hint\n{text}");
        } else {
            assert!(text.contains("spec-decode-acceptance-drop"), "{name}: not-evaluated pair missing\n{text}");
        }
        // The compact text and Slack leave the source to -v (the table); every document names it.
        if ![Format::Text, Format::Slack, Format::SlackBlocks].contains(&format) {
            assert!(text.contains("prometheus.monitoring:9090"), "{name}: source missing\n{text}");
        }
    }
}

/// The shape this module exists for: a renderer formats the view and never reads the report,
/// so it cannot word a fact its own way or leave a section out.
#[test]
fn renderers_read_the_view_not_the_report() {
    let sources = [
        ("table.rs", include_str!("../table.rs")),
        ("markdown.rs", include_str!("../markdown.rs")),
        ("slack.rs", include_str!("../slack.rs")),
        ("html.rs", include_str!("../html.rs")),
        ("junit.rs", include_str!("../junit.rs")),
    ];
    for (name, source) in sources {
        let code = source.split("#[cfg(test)]").next().unwrap_or_default();
        // The type `Report` itself (not `ReportView`), or the report's parts.
        let names_report = code.match_indices("Report").any(|(i, _)| !code[i + "Report".len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_'));
        assert!(!names_report, "{name} reads the Report: format the ReportView instead");
        for needle in ["report::Finding", "report::Evidence", "report::Scope"] {
            assert!(!code.contains(needle), "{name} reads the report ({needle}): format the ReportView instead");
        }
    }
}
