//! Faults between vllm-diag and a real Prometheus, made on cue by a loopback proxy
//! ([`common::proxy`]): error statuses, HTML and cut-off bodies, resets, a flood past the size cap,
//! answers slower than `--query-timeout` and `--timeout`, and the server dying mid-run.
//!
//! The promise under test (docs/how-it-decides.md, "What vllm-diag promises"): a fault that hits some queries leaves a
//! partial diagnosis in which exactly the affected rules are "not evaluated" with the reason; a fault
//! that hits every query, or discovery, ends with exit code 3 and a message that says what happened
//! where; a transient fault (503, 429, reset) is retried and leaves no trace; a query the server
//! rejects (422) is never repeated. Nothing is ever reported healthy for want of data.

mod common;

use std::time::Duration;

use serde_json::Value;

use common::proxy::{Action, FaultProxy, Match, Rule};
use common::run::{at_window_end, explain_json};
use common::secure::kill_pid;
use common::{free_port, start_scenario};

/// Every not-evaluated entry of a report, as `rule: reason`.
fn reasons(report: &Value) -> Vec<String> {
    report["not_evaluated"]
        .as_array()
        .map(|a| a.iter().map(|n| format!("{}: {}", n["rule"].as_str().unwrap_or(""), n["reason"].as_str().unwrap_or(""))).collect())
        .unwrap_or_default()
}

/// The rules of a report's findings, in rank order.
fn finding_rules(report: &Value) -> Vec<String> {
    report["findings"].as_array().map(|a| a.iter().map(|f| f["rule"].as_str().unwrap_or("").to_string()).collect()).unwrap_or_default()
}

/// Assert that no rule was evaluated and that every one says why: `cause` (more than three of them),
/// or a metric the fleet does not export.
fn assert_nothing_evaluated_because(report: &Value, cause: &str) {
    assert_eq!(report["stats"]["rules_evaluated"], 0);
    let why = reasons(report);
    assert!(why.iter().all(|w| w.contains(cause) || w.contains("metric missing")), "{why:#?}");
    assert!(why.iter().filter(|w| w.contains(cause)).count() > 3, "{why:#?}");
}

/// Queries for the inter-token-latency histogram: a fault there must cost only the rules that need it.
fn itl() -> Match {
    Match::Param("inter_token_latency_seconds".into())
}

#[test]
fn a_fault_on_some_queries_leaves_a_partial_diagnosis_naming_the_fault() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let when = at_window_end(&spec);
    let expected_first = spec.expect.first.clone().unwrap_or_default();

    // The untouched run, for comparison.
    let clean = explain_json(&prom.url, &when, &[]);
    let clean_report = clean.json();
    assert!(reasons(&clean_report).iter().all(|r| !r.contains("itl_p95")), "{:?}", reasons(&clean_report));

    let cases: Vec<(&str, Action, &str)> = vec![
        ("HTTP 500 from a proxy", Action::reply(500, "text/plain", "internal error"), "HTTP 500"),
        ("HTTP 503 every time", Action::reply(503, "text/html", "<html><title>503 Service Unavailable</title></html>"), "HTTP 503"),
        ("HTTP 429 every time", Action::reply(429, "text/plain", "rate limited"), "HTTP 429"),
        (
            "HTTP 422 query error",
            Action::reply(422, "application/json", r#"{"status":"error","errorType":"execution","error":"expanding series: too many samples"}"#),
            "rejected the query (execution, HTTP 422)",
        ),
        ("HTML with status 200", Action::reply(200, "text/html", "<!DOCTYPE html><html><title>Login</title></html>"), "not JSON"),
        ("a body that is not JSON", Action::reply(200, "application/json", "upstream connect error"), "not JSON"),
        ("JSON cut short", Action::TruncateBody(40), "truncated JSON"),
        ("a connection cut mid-body", Action::CutAfter(30), "closed before the answer was complete"),
        ("a connection reset", Action::Reset, "reset"),
        ("a body over the size cap", Action::Flood, "larger than 67108864 bytes"),
    ];
    for (name, action, expect) in cases {
        let proxy = FaultProxy::always(&prom.url, itl(), action);
        let r = explain_json(&proxy.url, &when, &[]);
        let report = r.json();
        // The failed signal leaves core checks unjudged: no pass (exit 3), and the report says which.
        assert_eq!(r.code, 3, "{name}: {}", r.stderr);
        assert!(report["coverage"]["core_not_evaluated"].as_array().is_some_and(|a| a.iter().any(|r| r == "slow-decode")), "{name}: {:#}", report["coverage"]);
        let why = reasons(&report);
        assert!(why.iter().any(|w| w.contains("itl_p95") && w.contains(expect)), "{name}: no not-evaluated reason mentions itl_p95 and {expect:?}: {why:#?}");
        // The cause does not need the failed signal, so it is still found, first.
        assert_eq!(finding_rules(&report).first(), Some(&expected_first), "{name}: {why:#?}");
        assert!(report["stats"]["rules_evaluated"].as_u64().unwrap_or(0) > 0, "{name}");
        // A rule and scope that could not be evaluated is never also called healthy.
        let pairs = |key: &str| -> std::collections::BTreeSet<(String, String)> {
            report[key].as_array().map(|a| a.iter().map(|e| (e["rule"].to_string(), e["scope"].to_string())).collect()).unwrap_or_default()
        };
        let both: Vec<_> = pairs("healthy").intersection(&pairs("not_evaluated")).cloned().collect();
        assert!(both.is_empty(), "{name}: healthy and not evaluated at once: {both:?}");
    }
}

#[test]
fn transient_faults_are_retried_and_leave_no_trace_while_rejected_queries_are_not_repeated() {
    let (spec, prom) = start_scenario("slow-decode");
    let when = at_window_end(&spec);
    let clean = explain_json(&prom.url, &when, &[]).json();

    let retry_after = Action::Reply { status: 429, content_type: "text/plain", body: "slow down".into(), headers: vec![("Retry-After".into(), "1".into())] };
    let transient: Vec<(&str, Action)> = vec![
        ("503", Action::reply(503, "text/plain", "restarting")),
        ("502 from a gateway", Action::reply(502, "text/html", "<html><title>502 Bad Gateway</title></html>")),
        ("504 from a gateway", Action::reply(504, "text/plain", "gateway timeout")),
        ("429 with Retry-After", retry_after),
        ("a connection reset", Action::Reset),
        ("a cut body", Action::CutAfter(10)),
    ];
    for (name, action) in transient {
        // Every query fails once, then passes.
        let proxy = FaultProxy::start(&prom.url, vec![Rule::times(3, Match::Queries, action)]);
        let r = explain_json(&proxy.url, &when, &[]);
        let report = r.json();
        assert_eq!(proxy.applied(0), 3, "{name}: the fault was not exercised");
        assert_eq!(report["findings"], clean["findings"], "{name}: {}", r.stderr);
        assert_eq!(report["not_evaluated"], clean["not_evaluated"], "{name}");
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
    }

    // A query the server rejects as wrong is asked once, never again.
    let rejected = Action::reply(422, "application/json", r#"{"status":"error","errorType":"execution","error":"bad"}"#);
    let proxy = FaultProxy::always(&prom.url, itl(), rejected);
    let r = explain_json(&proxy.url, &when, &[]);
    let asked: Vec<String> = proxy.seen().iter().filter(|s| s.rule == Some(0)).map(|s| s.params.clone()).collect();
    let distinct: std::collections::BTreeSet<&String> = asked.iter().collect();
    assert!(!asked.is_empty(), "{}", r.stderr);
    assert_eq!(asked.len(), distinct.len(), "a 422 was retried: {asked:#?}");

    // A persistent 503 is retried a bounded number of times (3 attempts), not forever.
    let proxy = FaultProxy::always(&prom.url, itl(), Action::reply(503, "text/plain", "down"));
    let _ = explain_json(&proxy.url, &when, &[]);
    let seen = proxy.seen();
    let per_query = seen.iter().filter(|s| s.rule == Some(0)).fold(std::collections::BTreeMap::<String, usize>::new(), |mut m, s| {
        *m.entry(s.params.clone()).or_default() += 1;
        m
    });
    assert!(!per_query.is_empty());
    assert!(per_query.values().all(|n| *n == 3), "{per_query:#?}");
}

#[test]
fn every_query_failing_or_discovery_failing_ends_with_exit_3_and_a_clear_message() {
    let (spec, prom) = start_scenario("healthy-steady");
    let when = at_window_end(&spec);

    // Discovery (the label-values request) fails: no report, exit 3, the message names the fault.
    let discovery: Vec<(&str, Action, &str)> = vec![
        ("503", Action::reply(503, "text/html", "<html><title>503 Service Unavailable</title></html>"), "HTTP 503: service unavailable"),
        ("401", Action::reply(401, "text/plain", "Unauthorized"), "HTTP 401: not authorized"),
        ("HTML login page", Action::reply(200, "text/html", "<!DOCTYPE html><html><head><title>Sign in</title></head></html>"), "HTML page titled \"Sign in\""),
        ("reset", Action::Reset, "reset"),
        ("truncated", Action::TruncateBody(25), "truncated JSON"),
    ];
    for (name, action, expect) in discovery {
        let proxy = FaultProxy::always(&prom.url, Match::Path("/label/"), action);
        let r = explain_json(&proxy.url, &when, &[]);
        assert_eq!(r.code, 3, "{name}: {}", r.stderr);
        let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap_or_default();
        assert!(doc["error"]["exit_code"] == 3 && doc.get("findings").is_none(), "{name}: {}", r.stdout);
        assert!(r.stderr.contains(expect), "{name}: expected {expect:?} in {}", r.stderr);
        assert!(r.stderr.contains(&proxy.url), "{name}: the URL is not named: {}", r.stderr);
    }

    // Discovery works but every query fails: a report in which nothing is evaluated, exit 3.
    let proxy = FaultProxy::always(&prom.url, Match::Queries, Action::reply(500, "text/plain", "boom"));
    let r = explain_json(&proxy.url, &when, &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("nothing could be evaluated") && r.stderr.contains("HTTP 500"), "{}", r.stderr);
    let report = r.json();
    assert!(report["findings"].as_array().is_some_and(|f| f.is_empty()));
    // Every rule says why: the failed query, or a metric the fleet does not export.
    assert_nothing_evaluated_because(&report, "HTTP 500");

    // Nothing listens at all.
    let url = format!("http://127.0.0.1:{}", free_port());
    let r = explain_json(&url, &when, &[]);
    assert_eq!(r.code, 3);
    assert!(r.stderr.contains(&format!("cannot reach {url}: connection refused")), "{}", r.stderr);
}

#[test]
fn answers_slower_than_the_query_timeout_or_the_deadline_are_not_evaluated_timed_out() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let when = at_window_end(&spec);
    let expected_first = spec.expect.first.clone().unwrap_or_default();

    // Slower than --query-timeout on one signal: that signal times out, the rest is diagnosed.
    // Slower than the overall --timeout on one signal: the same, within the deadline (with enough
    // slots that the stuck queries do not hold up the others). Every other query must be answered
    // within those limits, on a busy machine too: 5 s and 15 s (1 s and 4 s were tight there), the
    // stuck one held back far longer.
    for (delay, flags) in [(60, &["--query-timeout", "5s"][..]), (60, &["--timeout", "15s", "--concurrency", "64"][..])] {
        let proxy = FaultProxy::always(&prom.url, itl(), Action::Delay(Duration::from_secs(delay)));
        let r = explain_json(&proxy.url, &when, flags);
        let report = r.json();
        assert_eq!(r.code, 3, "{flags:?}: core checks left unjudged by the timeout: {}", r.stderr);
        assert!(reasons(&report).iter().any(|w| w.contains("itl_p95") && w.contains("timed out")), "{flags:?}: {:#?}", reasons(&report));
        assert_eq!(finding_rules(&report).first(), Some(&expected_first), "{flags:?}");
    }

    // Every query slower than the deadline: nothing evaluated, exit 3, the report says why.
    let proxy = FaultProxy::always(&prom.url, Match::Queries, Action::Delay(Duration::from_secs(20)));
    let r = explain_json(&proxy.url, &when, &["--timeout", "3s"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let report = r.json();
    assert_nothing_evaluated_because(&report, "timed out");

    // Only the bucket-bound lookup is stuck: it gets a quarter of the deadline, the SLO burn is read
    // at the bucket equal to the target as without it, and the report says the lookup failed. The
    // rest must be answered in the other three quarters: 15 s, a margin a busy machine meets.
    let proxy = FaultProxy::always(&prom.url, Match::Path("/label/le/"), Action::Delay(Duration::from_secs(60)));
    let r = explain_json(&proxy.url, &when, &["--timeout", "20s"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = r.json();
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("could not list the buckets of vllm:time_to_first_token_seconds"), "{warnings}");
    assert!(warnings.contains("timed out"), "{warnings}");
    assert_eq!(finding_rules(&report).first(), Some(&expected_first));
    assert!(!reasons(&report).iter().any(|w| w.contains("burn") && w.contains("timed out")), "the burn rates are still read: {:#?}", reasons(&report));

    // Discovery slower than the deadline: exit 3 with a timeout message.
    let proxy = FaultProxy::always(&prom.url, Match::Path("/label/"), Action::Delay(Duration::from_secs(20)));
    let r = explain_json(&proxy.url, &when, &["--timeout", "2s"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("timed out"), "{}", r.stderr);
}

#[test]
fn prometheus_killed_mid_run_gives_an_honest_report_and_exit_3() {
    let (spec, prom) = start_scenario("healthy-steady");
    let when = at_window_end(&spec);
    // Discovery (with the fleet's label counts, which read `__name__`) goes through; the first
    // signal query kills the server, as a crash or an OOM kill would.
    let proxy = FaultProxy::start(&prom.url, vec![Rule::times(1, Match::QueriesWithout("__name__"), Action::Die)]);
    let pid = prom.pid();
    proxy.on_die(move || kill_pid(pid));
    let r = explain_json(&proxy.url, &when, &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("nothing could be evaluated"), "{}", r.stderr);
    let report = r.json();
    assert_eq!(report["stats"]["rules_evaluated"], 0, "{report:#}");
    let why = reasons(&report);
    assert!(!why.is_empty());
    assert!(why.iter().all(|w| w.contains("unreachable") || w.contains("reset") || w.contains("metric missing")), "{why:#?}");
    // The server is really gone: it was not a trick of the proxy.
    assert!(prom.get("/-/ready").is_err());
}
