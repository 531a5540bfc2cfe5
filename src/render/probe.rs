//! `vllm-diag probe` in words: the limits first (always), what the requests came to, their
//! latencies, the errors by kind with the server's words, and the engines beside the client. The
//! JSON is the serialized [`ProbeRun`] with its exit code, the contract docs/probe.md describes.

use std::fmt::Write as _;

use crate::probe::engine::{EngineView, Measure, NotReadReason};
use crate::probe::plan::Planned;
use crate::probe::summary::Spread;
use crate::report::probe::{Limits, Outcome, ProbeBreach, ProbeEvidence, ProbeRun, RefusedInFront, Shape, StreamMode, TimeoutLimit};
use crate::units::format_seconds;

/// The limits line every probe prints, the run's and the dry run's alike.
pub fn limits_line(l: &Limits, ceilings: &Limits) -> String {
    format!(
        "limits: at most {} requests, {}/s, {} in flight, {} in all, {} each (ceilings: {}, {}/s, {}, {}, {})",
        l.requests,
        crate::units::sig(l.rate_per_second),
        l.concurrency,
        format_seconds(l.max_duration.as_secs_f64()),
        format_seconds(l.request_timeout.as_secs_f64()),
        ceilings.requests,
        crate::units::sig(ceilings.rate_per_second),
        ceilings.concurrency,
        format_seconds(ceilings.max_duration.as_secs_f64()),
        format_seconds(ceilings.request_timeout.as_secs_f64()),
    )
}

fn shape_line(s: &Shape) -> String {
    let stream = match s.stream {
        StreamMode::Always => "streamed",
        StreamMode::Never => "not streamed",
        StreamMode::Both => "streamed and not, alternating",
    };
    format!(
        "requests: {} prompts of {} words, max_tokens {}{}, {stream}",
        match s.api {
            crate::probe::Api::Completions => "completion",
            crate::probe::Api::Chat => "chat",
        },
        s.prompt_words,
        s.max_tokens,
        if s.ignore_eos { " (ignore_eos)" } else { "" }
    )
}

/// A dry run: what would be sent, nothing sent.
pub fn dry_run(endpoint: &str, shape: &Shape, limits: &Limits, ceilings: &Limits, planned: &[Planned], engine_reads: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "DRY RUN: nothing is sent. The probe would send to {endpoint}:");
    let _ = writeln!(out, "{}", limits_line(limits, ceilings));
    let _ = writeln!(out, "{}", shape_line(shape));
    for (i, p) in planned.iter().enumerate() {
        let body = p.body.as_ref().map(|b| format!(" {b}")).unwrap_or_default();
        let _ = writeln!(out, "{:>3}. {} {}{body}", i + 1, p.method, p.url);
    }
    if !engine_reads.is_empty() {
        let _ = writeln!(out, "then these queries to Prometheus, over the probe's minutes:");
        for q in engine_reads {
            let _ = writeln!(out, "     {q}");
        }
    }
    out
}

fn spread_row(out: &mut String, name: &str, s: Option<Spread>) {
    match s {
        Some(s) => {
            let _ = writeln!(
                out,
                "  {name:<22} {:>10} {:>10} {:>10} {:>10}  ({})",
                format_seconds(s.mean),
                format_seconds(s.p50),
                format_seconds(s.p95),
                format_seconds(s.max),
                crate::stats::plural(s.count, "value", "values")
            );
        }
        None => {
            let _ = writeln!(out, "  {name:<22} {:>10}", "none");
        }
    }
}

/// One failure kind in words.
pub fn outcome_words(o: &Outcome) -> String {
    match o {
        Outcome::Ok => "ok".into(),
        Outcome::Http { status, message } if message.is_empty() => format!("HTTP {status}"),
        Outcome::Http { status, message } => format!("HTTP {status} ({message})"),
        Outcome::StreamError { message } => format!("an error inside the stream after HTTP 200 ({message})"),
        Outcome::Timeout { limit: TimeoutLimit::Request } => "no complete answer within the request timeout".into(),
        Outcome::Timeout { limit: TimeoutLimit::ProbeDuration } => "cut when the probe's duration ran out".into(),
        Outcome::Reset { detail } => format!("connection reset or closed mid-answer ({detail})"),
        Outcome::Connect { detail } => format!("no connection ({detail})"),
        Outcome::Unreadable { detail } => format!("an answer that could not be read ({detail})"),
    }
}

/// The failures, grouped by what they said, most frequent first, each with its mean time.
fn failures(out: &mut String, run: &ProbeRun) {
    for (w, n, mean) in failure_groups(run) {
        let _ = writeln!(out, "  {n} x {w}, after {} on average", format_seconds(mean));
    }
}

/// The failed requests by what they said (most frequent first): the words, how many, their mean time.
fn failure_groups(run: &ProbeRun) -> Vec<(String, usize, f64)> {
    let mut groups: Vec<(String, usize, f64)> = Vec::new();
    for m in run.requests.iter().filter(|m| !m.outcome.is_ok()) {
        let w = outcome_words(&m.outcome);
        match groups.iter_mut().find(|g| g.0 == w) {
            Some(g) => {
                g.1 += 1;
                g.2 += m.e2e_seconds;
            }
            None => groups.push((w, 1, m.e2e_seconds)),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));
    groups.into_iter().map(|(w, n, total)| (w, n, total / n as f64)).collect()
}

fn engine_lines(out: &mut String, e: &EngineView, run: &ProbeRun) {
    let _ = writeln!(
        out,
        "engines ({}, {}, {} to {} UTC):",
        e.prometheus,
        if e.selector.is_empty() { "every series".to_string() } else { format!("{{{}}}", e.selector) },
        e.from.format("%H:%M:%S"),
        e.to.format("%H:%M:%S")
    );
    let opt = |v: Option<f64>| v.map(format_seconds).unwrap_or_else(|| "not read".into());
    let _ = writeln!(
        out,
        "  mean TTFT {}, end to end {}, queue {}, between tokens {}; {} requests finished{}",
        opt(e.ttft_mean),
        opt(e.e2e_mean),
        opt(e.queue_mean),
        opt(e.between_tokens_mean),
        e.finished.map(|f| format!("{f:.0}")).unwrap_or_else(|| "?".into()),
        if e.other_traffic { format!(" against the probe's {} (the means hold other traffic too)", run.summary.ok) } else { String::new() }
    );
    if e.running_max.is_some() || e.waiting_max.is_some() {
        let n = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "?".into());
        let _ = writeln!(out, "  at most {} running and {} waiting on one engine at a scrape", n(e.running_max), n(e.waiting_max));
    }
    let b = &e.before_engine;
    let client = |s: Option<Spread>| s.map(|s| format_seconds(s.mean)).unwrap_or_else(|| "none".into());
    let diff = |v: Option<f64>| v.map(format_seconds).unwrap_or_else(|| "not evaluated".into());
    let _ = writeln!(
        out,
        "time before the engine: {} to the first token (client {}, engines {}), {} end to end (client {}, engines {})",
        diff(b.ttft_seconds),
        client(run.summary.ttft),
        opt(e.ttft_mean),
        diff(b.e2e_seconds),
        client(run.summary.e2e),
        opt(e.e2e_mean),
    );
    for n in &e.not_read {
        let what = match n.measure {
            Measure::Ttft => "TTFT",
            Measure::E2e => "end-to-end time",
            Measure::Queue => "queue time",
            Measure::BetweenTokens => "time between tokens",
            Measure::Finished => "requests finished",
            Measure::RunningMax => "requests running",
            Measure::WaitingMax => "requests waiting",
        };
        let why = match &n.reason {
            NotReadReason::NoData => "no data under the selector in those minutes".to_string(),
            NotReadReason::QueryFailed { detail } => format!("the query failed: {detail}"),
        };
        let _ = writeln!(out, "  not evaluated: {what}: {why}");
    }
}

/// The probe's text output.
pub fn text(run: &ProbeRun) -> String {
    let mut out = String::new();
    let s = &run.summary;
    let verdict = if s.failed > 0 {
        format!("FAIL: {} of {} requests failed", s.failed, s.sent)
    } else if run.engine.as_ref().is_some_and(|e| !e.evaluated()) {
        format!("NOT EVALUATED: all {} requests succeeded, but the engines' side could not be read", s.sent)
    } else {
        format!("OK: all {} requests succeeded", s.sent)
    };
    let _ = writeln!(out, "PROBE {}  model {}  {verdict}", run.endpoint, run.model);
    let _ = writeln!(out, "{}", limits_line(&run.limits, &run.ceilings));
    let _ = writeln!(out, "{}", shape_line(&run.shape));
    let _ = writeln!(
        out,
        "sent {} from {} to {} UTC ({}); {} ok{}",
        s.sent,
        run.started.format("%H:%M:%S"),
        run.ended.format("%H:%M:%S"),
        format_seconds((run.ended - run.started).num_milliseconds() as f64 / 1000.0),
        s.ok,
        if run.not_started > 0 { format!("; {} not started: the duration ran out", run.not_started) } else { String::new() }
    );
    failures(&mut out, run);
    let _ = writeln!(out, "  {:<22} {:>10} {:>10} {:>10} {:>10}", "", "mean", "p50", "p95", "max");
    spread_row(&mut out, "time to first token", s.ttft);
    spread_row(&mut out, "between tokens", s.between_tokens);
    spread_row(&mut out, "end to end", s.e2e);
    let _ = writeln!(out, "  {} tokens generated by the requests that succeeded", s.tokens);
    if let Some(e) = &run.engine {
        engine_lines(&mut out, e, run);
    }
    if let Some(r) = &run.refused_in_front {
        let _ = writeln!(out, "refused in front of the engines: {}", refused_words(r, s.sent));
    }
    out
}

/// `8 of 10 requests answered busy (8 with HTTP 408) after 190 ms on average while no engine had a
/// request waiting (at most 2 running on one): ...`.
fn refused_words(r: &RefusedInFront, sent: usize) -> String {
    let statuses: Vec<String> = r.by_status.iter().map(|(s, n)| format!("{n} with HTTP {s}")).collect();
    format!(
        "{} of {} answered busy ({}) after {} on average while no engine had a request waiting{}: a router's or gateway's limit, which the engines' metrics do not count",
        r.refused,
        crate::stats::plural(sent, "request", "requests"),
        statuses.join(", "),
        format_seconds(r.mean_seconds),
        match r.engines_running_max {
            // Requests of a fraction of a second fall between scrapes.
            Some(m) if m < 0.5 => " (and none seen running at a scrape)".to_string(),
            Some(m) => format!(" (at most {m:.0} running on one)"),
            None => String::new(),
        }
    )
}

/// What the probe's requests came to, in one clause: `all 10 requests succeeded` or `8 of 10
/// requests failed (8 x HTTP 408 (Request Timeout) after 190 ms on average)`.
fn requests_clause(run: &ProbeRun) -> String {
    let s = &run.summary;
    if s.sent == 0 {
        return "no request could be started".to_string();
    }
    if s.failed == 0 {
        return format!("all {} succeeded", crate::stats::plural(s.sent, "request", "requests"));
    }
    let groups: Vec<String> = failure_groups(run).into_iter().map(|(w, n, mean)| format!("{n} x {w} after {} on average", format_seconds(mean))).collect();
    format!("{} of {} failed ({})", s.failed, crate::stats::plural(s.sent, "request", "requests"), groups.join("; "))
}

/// The probe's first tokens against the profile's ceiling, in one clause.
fn latency_clause(e: &ProbeEvidence) -> String {
    let limit = |l: f64| format!("the {} profile's ceiling of {}", e.profile, format_seconds(l));
    match (e.run.summary.ttft, e.ttft_p95_limit) {
        (None, _) => "time to the first token not measured (no streamed request succeeded)".to_string(),
        (Some(t), Some(l)) if t.p95 > l => format!("p95 time to the first token {}, over {}", format_seconds(t.p95), limit(l)),
        (Some(t), Some(l)) => format!("p95 time to the first token {}, within {}", format_seconds(t.p95), limit(l)),
        (Some(t), None) => format!("p95 time to the first token {} (the rules set no ceiling)", format_seconds(t.p95)),
    }
}

/// The probe as a diagnosis shows it, in every format: one line on what its requests met, and the
/// refusal in front of the engines when there was one.
pub fn evidence_lines(e: &ProbeEvidence) -> Vec<String> {
    let run = &e.run;
    let engines = match &run.engine {
        None => String::new(),
        Some(v) if v.evaluated() => {
            let b = &v.before_engine;
            let parts: Vec<String> = [(b.ttft_seconds, "to the first token"), (b.e2e_seconds, "end to end")]
                .iter()
                .filter_map(|(x, what)| x.map(|x| format!("{} {what}", format_seconds(x))))
                .collect();
            format!("; time before the engine: {}", parts.join(", "))
        }
        Some(_) => "; the engines' side over its minutes not evaluated".to_string(),
    };
    let mut out = vec![format!(
        "Probe of {} (model {}, {} to {} UTC): {}; {}{engines}",
        crate::text::one_line(&run.endpoint),
        crate::text::one_line(&run.model),
        run.started.format("%H:%M:%S"),
        run.ended.format("%H:%M:%S"),
        requests_clause(run),
        latency_clause(e)
    )];
    if let Some(r) = &run.refused_in_front {
        out.push(format!("Refused in front of the engines: {}", refused_words(r, run.summary.sent)));
    }
    out
}

/// Why the probe fails the run, for a headline and check's verdict (`None` when it passes): `the
/// probe of URL: 8 of 10 requests failed (...)`, or its first tokens over the ceiling.
pub fn failed_clause(e: &ProbeEvidence) -> Option<String> {
    let parts: Vec<String> = e
        .breaches
        .iter()
        .map(|b| match b {
            ProbeBreach::RequestsFailed { .. } | ProbeBreach::NothingSent => requests_clause(&e.run),
            ProbeBreach::TtftOverLimit { .. } => latency_clause(e),
        })
        .collect();
    (!parts.is_empty()).then(|| format!("the probe of {}: {}", crate::text::one_line(&e.run.endpoint), parts.join("; ")))
}

/// What check's verdict adds for a probe that passed: `the probe of URL passed (all 5 requests
/// succeeded; p95 time to the first token 86 ms, within ...)`.
pub fn passed_clause(e: &ProbeEvidence) -> String {
    format!("the probe of {} passed ({}; {})", crate::text::one_line(&e.run.endpoint), requests_clause(&e.run), latency_clause(e))
}

/// The JSON contract: the run, and how it ended.
pub fn json(run: &ProbeRun) -> String {
    let mut v = serde_json::to_value(run).unwrap_or_default();
    v["outcome"] = serde_json::json!({"exit_code": run.exit_code()});
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}
