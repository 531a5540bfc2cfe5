//! `vllm-diag probe` against a real vLLM engine, replayed: fixtures/real-engine-probe/ holds what
//! scripts/lab/probe.sh recorded (a vLLM 0.32 CPU engine with the tiny model, scraped every 5 s,
//! probed directly, through vLLM's router, and through the router at its
//! --max-concurrent-requests): each probe's JSON as vllm-diag wrote it, and every raw sample
//! Prometheus held. The samples are backfilled into a real Prometheus, the engines' side of each
//! probe is read again through the product's own code, and what the lab showed is held:
//!
//! - the engines' view replays to the numbers the probe printed;
//! - straight to the engine (completions and chat) and through the router, the engine finished exactly the requests the
//!   probe completed, and the client's times exceed the engine's (what lies outside the engine's
//!   clock: the HTTP server before vLLM stamps the request and after its first token, the network,
//!   the router);
//! - at the router's concurrency limit the probe saw 408s that neither the engine nor the router's
//!   own request counter counted.
//!
//! fixtures/real-engine-probe-join/ holds what scripts/lab/probe-join.sh recorded: `explain --probe`
//! through the router at its limit (the 408s named as refused in front of the engine, failing any
//! --fail-on bar) and `check --probe` straight to the engine (a pass), read back as reports.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use vllm_diag::probe::{engine, ProbeRun};
use vllm_diag::prom::Selector;
use vllm_diag::source::prometheus::{ClientOptions, PrometheusClient};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-probe")
}

fn recorded(name: &str) -> ProbeRun {
    let path = fixtures().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not a probe's JSON: {e}", path.display()))
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
        (None, None) => true,
        _ => false,
    }
}

/// The engines' side of `run`, read again from `prom` by the product's code.
fn replay(prom: &common::PromServer, rt: &tokio::runtime::Runtime, run: &ProbeRun) -> engine::EngineView {
    let e = run.engine.as_ref().expect("the lab gave every probe a Prometheus");
    let client = PrometheusClient::new(ClientOptions { base_url: prom.url.clone(), ..ClientOptions::default() }).unwrap();
    let range = Duration::from_secs(((e.to - e.from).num_milliseconds() as u64).div_ceil(1000));
    let selector = Selector::parse(&e.selector).unwrap();
    let answers = rt.block_on(engine::read(&client, &engine::queries(&selector, e.to, range)));
    engine::view(e.prometheus.clone(), &selector, (e.from, e.to), answers, &run.summary)
}

#[test]
fn the_probe_matches_the_real_engine_within_the_time_before_it_and_sees_the_routers_408s() {
    let dir = tempfile::tempdir().unwrap();
    let samples = common::unpack_lab_samples(&fixtures().join("samples.om.gz"), dir.path(), true);
    let prom = common::PromServer::start_with_openmetrics(&samples);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();

    let direct = recorded("probe-engine");
    let chat = recorded("probe-engine-chat");
    let via_router = recorded("probe-router");
    let limited = recorded("probe-router-408");
    for run in [&direct, &chat, &via_router, &limited] {
        let was = run.engine.as_ref().unwrap();
        let now = replay(&prom, &rt, run);
        for (what, a, b) in [
            ("ttft", was.ttft_mean, now.ttft_mean),
            ("e2e", was.e2e_mean, now.e2e_mean),
            ("queue", was.queue_mean, now.queue_mean),
            ("between tokens", was.between_tokens_mean, now.between_tokens_mean),
            ("finished", was.finished, now.finished),
            ("running at most", was.running_max, now.running_max),
            ("waiting at most", was.waiting_max, now.waiting_max),
            ("before the engine, ttft", was.before_engine.ttft_seconds, now.before_engine.ttft_seconds),
        ] {
            assert!(close(a, b), "{}: {what} was {a:?} when probed, {b:?} replayed", run.endpoint);
        }
        assert_eq!(was.other_traffic, now.other_traffic);
    }

    // Straight to the engine: it finished exactly the requests the probe completed, nothing else.
    let e = direct.engine.as_ref().unwrap();
    assert!(e.evaluated() && !e.other_traffic, "{e:?}");
    assert_eq!(e.finished, Some(direct.summary.ok as f64));
    assert_eq!(direct.summary.ok, direct.summary.sent);
    // The client's times are the engine's plus what lies outside the engine's clock (the HTTP
    // server before vLLM stamps the request and after its first token, the network): more, never less.
    for run in [&direct, &chat, &via_router] {
        let e = run.engine.as_ref().unwrap();
        let b = e.before_engine;
        assert!(b.ttft_seconds.unwrap() > 0.0 && b.e2e_seconds.unwrap() > 0.0, "{}: {b:?}", run.endpoint);
        assert!(b.e2e_seconds.unwrap() < run.summary.e2e.unwrap().mean, "{}: {b:?}", run.endpoint);
    }
    // The chat API's streams: every request answered and timed from its first content.
    let c = chat.engine.as_ref().unwrap();
    assert_eq!((chat.summary.ok, c.finished), (6, Some(6.0)));
    // One of the six streams carried no text at all (the random-weight model's 32 tokens formed no
    // character): it has no time to the first token, and its usage still counts its tokens.
    let timed = chat.requests.iter().filter(|m| m.ttft_seconds.is_some()).count();
    assert_eq!(chat.summary.ttft.unwrap().count, timed);
    assert!(timed >= 5, "{timed} of 6 chat streams timed to their first content");
    assert_eq!(chat.summary.tokens, 6 * 32);
    // Through the router, every request reached the engine once.
    let r = via_router.engine.as_ref().unwrap();
    assert!(r.evaluated() && !r.other_traffic);
    assert_eq!(r.finished, Some(via_router.summary.ok as f64));

    // At the router's --max-concurrent-requests: 408s the probe saw.
    let refused = limited.requests.iter().filter(|m| matches!(m.outcome, vllm_diag::probe::Outcome::Http { status: 408, .. })).count();
    assert!(refused >= 1, "{:?}", limited.summary.by_outcome);
    assert_eq!(refused + limited.summary.ok, limited.summary.sent);
    // Neither the engine nor the router's own counter holds them: only what was served.
    let l = limited.engine.as_ref().unwrap();
    assert_eq!(l.finished, Some(limited.summary.ok as f64), "the engine finished what the router served");
    // The router was started afresh 20 s before this probe (more than the probe's look-back), and
    // its request counter appears with its first request: its highest value in the probe's minutes
    // is all it counted.
    let range = ((l.to - l.from).num_milliseconds() as u64).div_ceil(1000);
    let counted = prom.query_one(&format!("sum(max_over_time(vllm_router_requests_total[{range}s]))"), l.to + chrono::Duration::seconds(1));
    assert_eq!(counted, limited.summary.ok as f64, "the router counted the requests it served, not the {refused} it refused");
    // Named as a refusal in front of the engines: they had nothing waiting.
    let named = limited.refused_in_front.as_ref().expect("the 408s named as refused in front of the engines");
    assert_eq!((named.refused, named.by_status.get(&408)), (refused, Some(&refused)));
    assert_eq!(l.waiting_max, Some(0.0));
    assert!(direct.refused_in_front.is_none() && via_router.refused_in_front.is_none());
    assert_eq!(limited.refused_in_front, vllm_diag::probe::refused_in_front(&limited.requests, Some(&replay(&prom, &rt, &limited))));
    // In words: the verdict, the limits, the 408s with their time, the engines beside the client.
    let text = vllm_diag::render::probe::text(&limited);
    assert!(
        text.starts_with(&format!(
            "PROBE {}  model tiny-llama  FAIL: {refused} of 10 requests failed\nlimits: at most 10 requests, 20/s, 10 in flight",
            limited.endpoint
        )),
        "{text}"
    );
    assert!(text.contains(&format!("  {refused} x HTTP 408, after ")), "{text}");
    assert!(text.contains(&format!("refused in front of the engines: {refused} of 10 requests answered busy ({refused} with HTTP 408)")), "{text}");
    // Joined to a diagnosis (explain --probe, check --probe), the real run fails on its 408s and
    // the answer names them as refused in front of the engines, with the probe's numbers.
    let joined = vllm_diag::probe::judge(limited.clone(), "chat", Some(3.0));
    assert_eq!(joined.breaches, vec![vllm_diag::report::probe::ProbeBreach::RequestsFailed { failed: refused, sent: 10 }]);
    let lines = vllm_diag::render::probe::evidence_lines(&joined);
    assert!(lines[0].contains(&format!(": {refused} of 10 requests failed ({refused} x HTTP 408")), "{lines:?}");
    assert!(
        lines[1].starts_with(&format!("Refused in front of the engines: {refused} of 10 requests answered busy ({refused} with HTTP 408) after ")),
        "{lines:?}"
    );
    assert!(lines[1].contains("while no engine had a request waiting (at most 2 running on one)"), "{lines:?}");
    let served = vllm_diag::probe::judge(via_router.clone(), "chat", Some(3.0));
    assert!(!served.fails(), "the router with room served all: {:?}", served.breaches);
    let text = vllm_diag::render::probe::text(&direct);
    assert!(text.contains("OK: all 12 requests succeeded") && text.contains("; 12 requests finished\n"), "{text}");
    let b = direct.engine.as_ref().unwrap().before_engine.ttft_seconds.unwrap();
    assert!(text.contains(&format!("\ntime before the engine: {} to the first token", vllm_diag::units::format_seconds(b))), "{text}");
    println!("{text}");
    let counters: Value = serde_json::from_str(&std::fs::read_to_string(fixtures().join("router-counters.json")).unwrap()).unwrap();
    let c = &counters["vllm_router_requests_total"];
    assert_eq!(c["after"].as_f64().unwrap() - c["before"].as_f64().unwrap(), limited.summary.ok as f64, "its /metrics page said the same");
}

/// What scripts/lab/probe-join.sh recorded: `explain --probe` and `check --probe` on the lab.
fn joined(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-probe-join").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

#[test]
fn on_the_lab_explain_probe_names_the_routers_408s_and_check_probe_passes_straight_to_the_engine() {
    use vllm_diag::report::probe::{ProbeBreach, ProbeEvidence};
    use vllm_diag::report::{Decision, Report, Severity};
    // Through the real router at --max-concurrent-requests 2 --queue-size 4: ten unstreamed
    // 600-token requests at once, eight answered 408.
    let report: Report = serde_json::from_value(joined("explain-probe-408.json")).expect("explain's JSON report");
    let probe: &ProbeEvidence = report.probe.as_ref().expect("the probe joined the report");
    let run = &probe.run;
    let refused = run.summary.by_outcome.get("http_408").copied().unwrap_or(0);
    assert_eq!((refused, run.summary.ok, run.summary.sent), (8, 2, 10));
    // The judgement is the product's, made again from the run: the failed requests, nothing else.
    assert_eq!(*probe, vllm_diag::probe::judge(run.clone(), "chat", Some(3.0)));
    assert_eq!(probe.breaches, vec![ProbeBreach::RequestsFailed { failed: 8, sent: 10 }]);
    // The engine finished only what the router let through, and had nothing waiting: the 408s
    // came from in front of it, and the report names them so.
    let e = run.engine.as_ref().expect("the engine was read");
    assert_eq!((e.finished, e.waiting_max, e.other_traffic), (Some(2.0), Some(0.0), false));
    let named = run.refused_in_front.as_ref().expect("named as refused in front of the engines");
    assert_eq!((named.refused, named.by_status.get(&408)), (8, Some(&8)));
    let lines = vllm_diag::render::probe::evidence_lines(probe);
    assert!(
        lines[1].starts_with(
            "Refused in front of the engines: 8 of 10 requests answered busy (8 with HTTP 408) after 221 ms on average while no engine had a request waiting"
        ),
        "{lines:?}"
    );
    // The metrics found nothing (the refusals are in no family); explain's default --fail-on never
    // passed it (exit 0), and any bar fails it on the probe, as check's verdict says first.
    assert!(report.findings.is_empty());
    assert_eq!(report.decide(None, false), Decision::Pass);
    assert_eq!(report.decide(Some(Severity::Warning), false), Decision::FailProbe);
    let opts = vllm_diag::render::RenderOptions { fail_on: Some(Severity::Warning), ..Default::default() };
    let verdict = vllm_diag::render::check_verdict(&report, &opts);
    assert!(verdict.starts_with(&format!("FAIL: the probe of {}: 8 of 10 requests failed (8 x HTTP 408 after 221 ms on average)", run.endpoint)), "{verdict}");
    let text = vllm_diag::render::render(&report, vllm_diag::render::Format::Text, &vllm_diag::render::RenderOptions::default());
    assert!(text.starts_with("PROBE FAILED: the probe of "), "{text}");

    // The same probe again a few seconds later: the router's queue held all ten this time (its
    // refusals vary from run to run, docs/probe.md), and the answer says the probe passed.
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-probe-join/explain-probe-408.txt");
    let again = words(&std::fs::read_to_string(path).unwrap());
    assert!(again.starts_with("OK: no problem found") && again.contains("all 10 requests succeeded") && !again.contains("Refused"), "{again}");

    // check --probe straight to the engine: six requests, all served, within the chat profile.
    let check: Report = serde_json::from_value(joined("check-probe-engine.json")).expect("check's JSON report");
    let p = check.probe.as_ref().expect("the probe joined the check");
    assert!(!p.fails() && p.run.summary.ok == 6);
    let e = p.run.engine.as_ref().expect("the engine was read");
    assert_eq!(e.finished, Some(6.0), "the engine finished exactly the probe's six");
    assert!(e.before_engine.ttft_seconds.is_some_and(|t| t > 0.0), "the client's first token comes after the engine's: {:?}", e.before_engine);
    assert_eq!(check.decide(Some(Severity::Warning), false), Decision::Pass);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-probe-join/check-probe-engine.verdict");
    let verdict = std::fs::read_to_string(path).unwrap();
    assert!(
        verdict.starts_with("PASS: ")
            && verdict.contains(&format!("; the probe of {} passed (all 6 requests succeeded; p95 time to the first token ", p.run.endpoint)),
        "{verdict}"
    );
}
