//! `vllm-diag loadtest` in words: the bounds first (always: before the first request, in a dry
//! run, with every result), a progress line per step, the steps as a table with the knee marked,
//! the knee and the limit that bound there; the JSON (the serialized [`LoadtestRun`] with its exit
//! code); and the derived profile as a `[profile.NAME]` table of a rules file.

use std::fmt::Write as _;

use crate::report::loadtest::{Bound, Bounds, DerivedProfile, LoadMode, LoadtestRun, Slo, Step, StepBreach, Stop, SweepPlan};
use crate::report::probe::Shape;
use crate::report::LimitKind;
use crate::units::{format_seconds, sig};

/// A step's load in words: `8 in flight`, `2.5/s`.
pub fn load_words(mode: LoadMode, load: f64) -> String {
    match mode {
        LoadMode::Concurrency => format!("{} in flight", sig(load)),
        LoadMode::Rate => format!("{}/s", sig(load)),
    }
}

/// The bounds line printed before the first request, by a dry run and with every result.
pub fn bounds_line(mode: LoadMode, b: &Bounds, c: &Bounds) -> String {
    let loads = match mode {
        LoadMode::Concurrency => format!("up to {} in flight (at most {}/s)", b.max_concurrency, sig(b.max_rate)),
        LoadMode::Rate => format!("up to {}/s (at most {} in flight)", sig(b.max_rate), b.max_concurrency),
    };
    format!(
        "bounds: {loads}, {} requests and {} in all; steps of {}, {} a request (ceilings: {} in flight, {}/s, {} requests, {}, steps of {}, {} a request)",
        b.max_requests,
        format_seconds(b.max_duration.as_secs_f64()),
        format_seconds(b.step.as_secs_f64()),
        format_seconds(b.request_timeout.as_secs_f64()),
        c.max_concurrency,
        sig(c.max_rate),
        c.max_requests,
        format_seconds(c.max_duration.as_secs_f64()),
        format_seconds(c.step.as_secs_f64()),
        format_seconds(c.request_timeout.as_secs_f64()),
    )
}

/// The limits each step is judged against.
pub fn slo_line(slo: &Slo, engines: bool) -> String {
    let mut parts = vec!["every request served".to_string()];
    if let Some(t) = slo.ttft_p95_high {
        parts.push(format!("p95 time to the first token at most {}", format_seconds(t)));
    }
    match (slo.itl_p95_high, engines) {
        (Some(i), true) => parts.push(format!("the engines' p95 time between tokens at most {}", format_seconds(i))),
        (Some(_), false) => parts.push("time between tokens not judged (no Prometheus: the engines' own are judged, a client's come in bursts)".into()),
        _ => {}
    }
    format!("limits ({} profile): {}", slo.profile, parts.join("; "))
}

fn ladder_line(plan: &SweepPlan) -> String {
    let loads: Vec<String> = plan.ladder.iter().map(|l| sig(*l)).collect();
    let unit = match plan.mode {
        LoadMode::Concurrency => "in flight",
        LoadMode::Rate => "a second (Poisson arrivals)",
    };
    format!(
        "steps: {} {unit}, doubling until a step breaks the limits, then at most {} bisection steps between the last good one and the first bad one; never above the first bad one",
        loads.join(", "),
        plan.max_bisections
    )
}

/// What a dry run prints: the target, the bounds, the limits, the planned steps, the worst case,
/// the queries the engines would be read with; nothing is sent.
pub fn dry_run(endpoint: &str, shape: &Shape, run: (&Bounds, &Bounds, &Slo), plan: &SweepPlan, engine_reads: &[String]) -> String {
    let (bounds, ceilings, slo) = run;
    let w = &plan.worst_case;
    let mut out = String::new();
    let _ = writeln!(out, "DRY RUN: nothing is sent. The load test would send to {endpoint}:");
    let _ = writeln!(out, "{}", bounds_line(plan.mode, bounds, ceilings));
    let _ = writeln!(out, "{}", slo_line(slo, !engine_reads.is_empty()));
    let _ = writeln!(
        out,
        "requests: {} prompts of {} words, max_tokens {}{}, streamed",
        match shape.api {
            crate::probe::Api::Completions => "completion",
            crate::probe::Api::Chat => "chat",
        },
        shape.prompt_words,
        shape.max_tokens,
        if shape.ignore_eos { " (ignore_eos)" } else { "" }
    );
    let _ = writeln!(out, "{}", ladder_line(plan));
    let _ = writeln!(
        out,
        "worst case: {} steps, {} in all, {} requests, about {} tokens, {} requests in flight at once",
        w.steps,
        format_seconds(w.seconds),
        w.requests,
        w.tokens,
        w.concurrency
    );
    if !engine_reads.is_empty() {
        let _ = writeln!(out, "after each step, these queries to Prometheus over its minutes:");
        for q in engine_reads {
            let _ = writeln!(out, "     {q}");
        }
    }
    out
}

fn breach_words(b: &StepBreach) -> String {
    match b {
        StepBreach::RequestsFailed { failed, sent, by_outcome } => {
            let kinds: Vec<String> = by_outcome.iter().map(|(k, n)| format!("{n} {k}")).collect();
            format!("{failed} of {sent} failed ({})", kinds.join(", "))
        }
        StepBreach::NothingSent => "nothing sent".into(),
        StepBreach::TtftOverLimit { p95_seconds, limit_seconds } => {
            format!("p95 time to the first token {} > {}", format_seconds(*p95_seconds), format_seconds(*limit_seconds))
        }
        StepBreach::ItlOverLimit { p95_seconds, limit_seconds } => {
            format!("engines' p95 time between tokens {} > {}", format_seconds(*p95_seconds), format_seconds(*limit_seconds))
        }
    }
}

/// One stderr line as a step ends: its load, requests, throughput, p95 first token, failures,
/// verdict, and the sweep's time used of its bound.
pub fn progress(mode: LoadMode, s: &Step, used_seconds: f64, bound: &Bounds) -> String {
    let verdict =
        if s.passed() { "within the limits".to_string() } else { format!("over: {}", s.breaches.iter().map(breach_words).collect::<Vec<_>>().join("; ")) };
    format!(
        "vllm-diag: step {} ({}): {}: {} requests, {} req/s, {} tok/s, p95 first token {}, {} failed: {verdict}; {} of {} used",
        s.index + 1,
        phase_word(s),
        load_words(mode, s.load),
        s.sent,
        sig(s.requests_per_second),
        sig(s.tokens_per_second),
        s.ttft.map_or("-".into(), |t| format_seconds(t.p95)),
        s.failed,
        format_seconds(used_seconds),
        format_seconds(bound.max_duration.as_secs_f64())
    )
}

fn phase_word(s: &Step) -> &'static str {
    match s.phase {
        crate::report::loadtest::Phase::Doubling => "doubling",
        crate::report::loadtest::Phase::Bisection => "bisection",
    }
}

fn opt_s(v: Option<f64>) -> String {
    v.map_or("-".into(), format_seconds)
}

fn opt_n(v: Option<f64>) -> String {
    v.map_or("-".into(), sig)
}

/// The table's rows, the header first, the steps by load: what the text and the HTML page print.
pub(super) fn table_rows(run: &LoadtestRun) -> Vec<Vec<String>> {
    let knee = run.knee.as_ref().map(|k| k.step);
    let mut rows: Vec<Vec<String>> = vec![[
        "",
        "step",
        "load",
        "sent",
        "failed",
        "req/s",
        "tok/s",
        "TTFT p50",
        "TTFT p95",
        "e2e p95",
        "eng running",
        "eng waiting",
        "eng KV",
        "eng ITL p95",
        "verdict",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()];
    let mut steps: Vec<&Step> = run.steps.iter().collect();
    steps.sort_by(|a, b| a.load.total_cmp(&b.load).then(a.index.cmp(&b.index)));
    for s in steps {
        let e = s.engine.as_ref();
        rows.push(vec![
            if Some(s.index) == knee { "knee >".into() } else { String::new() },
            format!("{} {}", s.index + 1, if s.phase == crate::report::loadtest::Phase::Bisection { "b" } else { "d" }),
            load_words(run.mode, s.load),
            s.sent.to_string(),
            s.failed.to_string(),
            sig(s.requests_per_second),
            sig(s.tokens_per_second),
            opt_s(s.ttft.map(|t| t.p50)),
            opt_s(s.ttft.map(|t| t.p95)),
            opt_s(s.e2e.map(|t| t.p95)),
            opt_n(e.and_then(|e| e.running_max)),
            opt_n(e.and_then(|e| e.waiting_max)),
            e.and_then(|e| e.kv_usage_max).map_or("-".into(), |k| format!("{}%", sig(k * 100.0))),
            opt_s(e.and_then(|e| e.itl_p95)),
            if s.passed() { "ok".into() } else { s.breaches.iter().map(breach_words).collect::<Vec<_>>().join("; ") },
        ]);
    }
    rows
}

fn table(out: &mut String, run: &LoadtestRun) {
    let rows = table_rows(run);
    let widths: Vec<usize> = (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    for r in rows {
        let cells: Vec<String> = r.iter().zip(&widths).enumerate().map(|(i, (c, w))| if i == r.len() - 1 { c.clone() } else { format!("{c:<w$}") }).collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
}

/// The limit that bound at the knee, in words.
pub fn bound_words(b: &Bound, run: &LoadtestRun) -> String {
    let at = run.steps.get(b.at_step).map(|s| load_words(run.mode, s.load)).unwrap_or_default();
    match b.limit {
        LimitKind::MaxNumSeqs => format!(
            "the engines' sequence cap (max_num_seqs): at {at} the running batch stood at {} while requests waited ({} on average)",
            opt_n(b.running_max),
            opt_n(b.waiting_mean)
        ),
        LimitKind::KvCache => format!("the KV cache: at {at} usage reached {} with requests waiting or preempted", b.kv_usage_max.map_or("-".into(), |k| format!("{}%", sig(k * 100.0)))),
        LimitKind::MaxNumBatchedTokens => format!("the engines' token budget (max_num_batched_tokens): at {at} requests waited with the batch below its highest and the steps full of prompt tokens"),
        LimitKind::Deferred => format!("a queue at the engines with no cap reached (at {at}): something other than capacity held the requests"),
        LimitKind::Stalled => format!("stalled engines at {at}"),
        LimitKind::None if b.busy_answers > 0 => format!(
            "none seen at the engines: at {at}, {} requests were answered busy (408, 429, 503) while no engine had a request waiting: a router's or gateway's limit, in front of the engines",
            b.busy_answers
        ),
        LimitKind::None => format!("none seen at the engines: at {at} no engine had a request waiting; the limit is in front of them (a router, a gateway, the network) or is the engines' own speed"),
    }
}

pub(super) fn verdict(run: &LoadtestRun) -> String {
    let n = run.total_requests();
    match (&run.knee, run.stop) {
        (None, _) => format!("NO KNEE: the first step already broke the limits ({n} requests sent)"),
        (Some(k), Stop::LoadBound) => {
            format!("KNEE ABOVE THE BOUND: every step up to {} was within the limits ({n} requests sent)", load_words(run.mode, k.load))
        }
        (Some(k), Stop::DurationBound | Stop::RequestBound) if k.first_bad.is_none() => {
            format!("KNEE NOT REACHED: {} was within the limits when the sweep's bounds ran out ({n} requests sent)", load_words(run.mode, k.load))
        }
        (Some(k), _) => format!(
            "KNEE at {}: the highest load within the limits; {} broke them ({n} requests sent)",
            load_words(run.mode, k.load),
            k.first_bad.and_then(|i| run.steps.get(i)).map_or("nothing above it".into(), |s| load_words(run.mode, s.load))
        ),
    }
}

pub(super) fn stop_words(s: Stop) -> &'static str {
    match s {
        Stop::Found => "the knee was found",
        Stop::FirstStepBroke => "the first step broke the limits",
        Stop::LoadBound => "the load bound was reached",
        Stop::DurationBound => "the next step would not have ended within --max-duration",
        Stop::RequestBound => "the request bound (--max-requests) ran out",
    }
}

/// The text report.
pub fn text(run: &LoadtestRun) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "LOADTEST {}  model {}  {}", run.endpoint, run.model, verdict(run));
    let _ = writeln!(out, "{}", bounds_line(run.mode, &run.bounds, &run.ceilings));
    let _ = writeln!(out, "{}", slo_line(&run.slo, run.prometheus.is_some()));
    let _ = writeln!(out, "stopped: {}; {} s in all", stop_words(run.stop), sig((run.ended - run.started).num_milliseconds() as f64 / 1000.0));
    let _ = writeln!(out);
    table(&mut out, run);
    let _ = writeln!(out);
    for line in closing_lines(run) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// The lines under the table: the limit that bound at the knee, the engines' reads that failed and
/// the derived profile.
pub(super) fn closing_lines(run: &LoadtestRun) -> Vec<String> {
    let mut out = Vec::new();
    match (&run.knee, run.prometheus.as_deref()) {
        (Some(k), Some(_)) => out.push(match &k.bound {
            Some(b) => format!("Bound at the knee: {}.", bound_words(b, run)),
            None if k.first_bad.is_none() => "Bound at the knee: not seen, no step broke the limits.".to_string(),
            None => "Bound at the knee: not evaluated, the engines could not be read at the first bad step.".to_string(),
        }),
        (Some(_), None) => out.push("Bound at the knee: not evaluated (no --prometheus: the engines were not read).".to_string()),
        (None, _) => {}
    }
    for s in &run.steps {
        for n in s.engine.iter().flat_map(|e| &e.not_read) {
            if let crate::report::probe::NotReadReason::QueryFailed { detail } = &n.reason {
                out.push(format!("Not evaluated: step {}'s {:?} query failed: {}", s.index + 1, n.measure, crate::text::one_line(detail)));
            }
        }
    }
    out.extend(run.derived.as_ref().map(derived_line));
    out
}

pub(super) fn derived_line(d: &DerivedProfile) -> String {
    format!(
        "Derived profile {}: ttft_target {}, ttft_p95_high {}, itl_target {}, itl_p95_high {} (the knee's values with {}% added)",
        d.name,
        opt_s(d.ttft_target),
        opt_s(d.ttft_p95_high),
        opt_s(d.itl_target),
        opt_s(d.itl_p95_high),
        sig(d.margin * 100.0)
    )
}

/// The JSON contract: the run, and how it ended.
pub fn json(run: &LoadtestRun) -> String {
    let mut v = serde_json::to_value(run).unwrap_or_default();
    v["outcome"] = serde_json::json!({"exit_code": run.exit_code()});
    let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
    s.push('\n');
    s
}

/// A duration for a rules file: whole milliseconds (`"340ms"`), at least 1 ms.
fn toml_duration(seconds: f64) -> String {
    format!("\"{}ms\"", ((seconds * 1000.0).round() as u64).max(1))
}

/// `--profile-out`: a `[profile.NAME]` table a `--rules` directory takes (`explain --rules DIR
/// --profile NAME`), the derivation in comments.
pub fn profile_toml(run: &LoadtestRun, d: &DerivedProfile) -> String {
    let mut out = String::new();
    let knee = run.knee.as_ref();
    let at = knee.map(|k| load_words(run.mode, k.load)).unwrap_or_default();
    let _ = writeln!(
        out,
        "# Derived by `vllm-diag loadtest` from {} (model {}), {} to {}.",
        run.endpoint,
        run.model,
        run.started.to_rfc3339(),
        run.ended.to_rfc3339()
    );
    let _ = writeln!(out, "# The knee: {at}, the highest load within the {} profile's limits.", run.slo.profile);
    if let Some(b) = knee.and_then(|k| k.first_bad).and_then(|i| run.steps.get(i)) {
        let _ = writeln!(out, "# The first load past it: {}.", load_words(run.mode, b.load));
    }
    let _ = writeln!(
        out,
        "# Margin: each ceiling is the knee's p95 with {}% added, but no more than halfway (geometrically) to the first bad step's where it broke on it;",
        sig(d.margin * 100.0)
    );
    let _ = writeln!(
        out,
        "# each target is the knee's p95 with {}% added, never above its ceiling (at the knee at most 5% of requests miss it:",
        sig(d.margin * 50.0)
    );
    let _ = writeln!(out, "# against a 99% latency_objective a burn rate of at most 5, below slo-burn's thresholds).");
    let _ = writeln!(
        out,
        "# Time between tokens: {}.",
        if d.itl_from_engines { "the engines' own histogram (p95)" } else { "the client's gaps between token events (no Prometheus was read)" }
    );
    let _ = writeln!(out, "# Use it with: vllm-diag explain --rules DIR --profile {}   (DIR holding this file)", d.name);
    let _ = writeln!(out, "[profile.{}]", d.name);
    let _ = writeln!(out, "description = \"Measured by vllm-diag loadtest: knee at {at}\"");
    for (key, v) in [("ttft_target", d.ttft_target), ("ttft_p95_high", d.ttft_p95_high), ("itl_target", d.itl_target), ("itl_p95_high", d.itl_p95_high)] {
        match v {
            Some(v) => {
                let _ = writeln!(out, "{key} = {}", toml_duration(v));
            }
            None => {
                let _ = writeln!(out, "# {key}: not measured at the knee");
            }
        }
    }
    out
}
