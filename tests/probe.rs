//! `vllm-diag probe` against real servers, and its limits held.
//!
//! The router is the real one: vLLM's router (PyPI `vllm-router` 0.1.17, installed by
//! scripts/router-venv.sh, which scripts/test.sh runs), whose concurrency limit, 408s and request
//! counter are what the probe is checked against. Behind it stands [`Engine`], a small
//! OpenAI-compatible server written here, because CI cannot run vLLM (the real engine is in the
//! lab: scripts/lab/probe.sh, replayed by tests/probe_lab.rs). It answers after a set delay, in
//! the shapes vLLM answers (server-sent events ending in `[DONE]`, usage in the last event), and
//! records every request it gets. Faults no real server produces on cue (a reset, a stream cut
//! short, a redirect to another port) come from the same stand-in, and each test says so.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::run::{run, Run};
use serde_json::Value;

/// What the stand-in engine does.
#[derive(Clone, Copy)]
enum Mode {
    /// Answer after the delay.
    Answer,
    /// Reset the connection (TCP RST) on a completion request.
    Reset,
    /// Send the stream's headers and one token event, then close without `[DONE]`.
    CutStream,
    /// Answer a completion request with a 307 to another port.
    RedirectTo(u16),
}

/// One request the stand-in engine got.
#[derive(Clone, Debug)]
struct Got {
    path: String,
    authorization: Option<String>,
    body: Value,
}

struct Engine {
    port: u16,
    got: Arc<Mutex<Vec<Got>>>,
    connections: Arc<AtomicUsize>,
    in_flight_max: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

/// What the stand-in has served, for its /metrics (read by a real Prometheus in the tests of
/// `explain --probe` and `check --probe`): each answered request's time, and how many are in flight.
#[derive(Clone, Default)]
struct Served {
    done: Arc<Mutex<Vec<f64>>>,
    in_flight: Arc<AtomicUsize>,
}

impl Served {
    /// vLLM's families as the stand-in's `model_name="stand-in"` engine: running as in flight,
    /// nothing ever waiting (it takes every request at once), and the answered requests' times as
    /// histograms of one bucket (their first token counted at the answer's start, after the delay).
    fn metrics(&self, delay: Duration) -> String {
        let done = self.done.lock().unwrap().clone();
        let (n, sum) = (done.len(), done.iter().sum::<f64>());
        let l = "model_name=\"stand-in\"";
        let mut out = format!(
            "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{l}}} {}\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{l}}} 0\n",
            self.in_flight.load(Ordering::SeqCst)
        );
        for (family, total) in
            [("e2e_request_latency_seconds", sum), ("time_to_first_token_seconds", n as f64 * delay.as_secs_f64()), ("request_queue_time_seconds", 0.0)]
        {
            out.push_str(&format!(
                "# TYPE vllm:{family} histogram\nvllm:{family}_bucket{{{l},le=\"+Inf\"}} {n}\nvllm:{family}_sum{{{l}}} {total}\nvllm:{family}_count{{{l}}} {n}\n"
            ));
        }
        out
    }
}

impl Engine {
    fn start(delay: Duration, mode: Mode) -> Engine {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let got = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let in_flight_max = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (g, c, m, s) = (got.clone(), connections.clone(), in_flight_max.clone(), stop.clone());
        let served = Served::default();
        let in_flight = served.clone();
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        c.fetch_add(1, Ordering::SeqCst);
                        let (g, m, f) = (g.clone(), m.clone(), in_flight.clone());
                        std::thread::spawn(move || serve(conn, delay, mode, g, m, f));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Engine { port, got, connections, in_flight_max, stop }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn completions(&self) -> Vec<Got> {
        self.got.lock().unwrap().iter().filter(|g| g.path.ends_with("/completions")).cloned().collect()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// One connection: requests one after another (keep-alive), until the peer closes it.
fn serve(conn: TcpStream, delay: Duration, mode: Mode, got: Arc<Mutex<Vec<Got>>>, max: Arc<AtomicUsize>, served: Served) {
    let in_flight = served.in_flight.clone();
    conn.set_nonblocking(false).ok();
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut conn = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (parts.next().unwrap_or("").to_string(), parts.next().unwrap_or("").to_string());
        let (mut length, mut authorization) = (0usize, None);
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (name, value) = h.split_once(':').unwrap_or((h, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "authorization" => authorization = Some(value.trim().to_string()),
                _ => {}
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let send = |conn: &mut TcpStream, status: &str, ctype: &str, text: &str| {
            let _ = write!(conn, "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n{text}", text.len());
        };
        match (method.as_str(), path.as_str()) {
            ("GET", "/health") => send(&mut conn, "200 OK", "text/plain", "OK"),
            ("GET", "/metrics") => send(&mut conn, "200 OK", "text/plain; version=0.0.4", &served.metrics(delay)),
            ("GET", "/v1/models") => {
                got.lock().unwrap().push(Got { path: path.clone(), authorization, body });
                send(&mut conn, "200 OK", "application/json", r#"{"object":"list","data":[{"id":"stand-in","object":"model"}]}"#)
            }
            ("POST", p) if p.ends_with("/completions") => {
                got.lock().unwrap().push(Got { path: path.clone(), authorization, body: body.clone() });
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                let t = Instant::now();
                let done = completion(&mut conn, &body, delay, mode);
                if done {
                    served.done.lock().unwrap().push(t.elapsed().as_secs_f64());
                }
                in_flight.fetch_sub(1, Ordering::SeqCst);
                if !done {
                    return;
                }
            }
            _ => send(&mut conn, "404 Not Found", "text/plain", "not found"),
        }
    }
}

/// Answer one completion request; false when the connection is to be dropped.
fn completion(conn: &mut TcpStream, body: &Value, delay: Duration, mode: Mode) -> bool {
    let tokens = body["max_tokens"].as_u64().unwrap_or(4).min(64);
    match mode {
        Mode::Reset => {
            // A reset on cue: no real server does this when asked.
            let s = socket2::SockRef::from(&*conn);
            let _ = s.set_linger(Some(Duration::ZERO));
            return false;
        }
        Mode::RedirectTo(port) => {
            let _ = write!(conn, "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{port}/v1/completions\r\nContent-Length: 0\r\n\r\n");
            return true;
        }
        _ => {}
    }
    std::thread::sleep(delay);
    if body["stream"].as_bool() == Some(true) {
        let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
        let chunk = |conn: &mut TcpStream, text: &str| {
            let _ = write!(conn, "{:x}\r\n{text}\r\n", text.len());
            let _ = conn.flush();
        };
        let chat = body.get("messages").is_some();
        if chat {
            // A chat stream opens with the assistant's role and no text, as vLLM's does.
            chunk(conn, "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n");
        }
        for i in 0..tokens {
            if chat {
                chunk(conn, &format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i}\"}}}}]}}\n\n"));
            } else {
                chunk(conn, &format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"t{i}\"}}]}}\n\n"));
            }
            if matches!(mode, Mode::CutStream) {
                // A stream cut short on cue (a proxy dying mid-answer), which no real server does when asked.
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        chunk(conn, &format!("data: {{\"choices\":[],\"usage\":{{\"completion_tokens\":{tokens}}}}}\n\n"));
        chunk(conn, "data: [DONE]\n\n");
        let _ = write!(conn, "0\r\n\r\n");
    } else {
        let text = format!("{{\"choices\":[{{\"index\":0,\"text\":\"x\"}}],\"usage\":{{\"completion_tokens\":{tokens}}}}}");
        let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}", text.len());
    }
    true
}

/// vLLM's router in front of `engine`, with `flags`; stopped when dropped.
struct Router {
    child: Child,
    port: u16,
    metrics_port: u16,
}

impl Router {
    fn start(engine: &Engine, flags: &[&str]) -> Router {
        let (port, metrics_port) = (common::free_port(), common::free_port());
        let child = Command::new(common::router_binary())
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--prometheus-host", "127.0.0.1"])
            .args(["--prometheus-port", &metrics_port.to_string(), "--worker-urls", &engine.url(), "--policy", "round_robin"])
            .args(flags)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start vllm-router");
        let r = Router { child, port, metrics_port };
        let deadline = Instant::now() + Duration::from_secs(120);
        while http_get(r.port, "/health").map(|(s, _)| s) != Some(200) {
            assert!(Instant::now() < deadline, "vllm-router did not answer /health within 120 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        r
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `vllm_router_requests_total`, summed over its series, from the router's own /metrics.
    fn requests_counted(&self) -> f64 {
        let (_, text) = http_get(self.metrics_port, "/metrics").expect("the router's /metrics");
        text.lines().filter(|l| l.starts_with("vllm_router_requests_total")).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(c, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default()))
}

fn probe(url: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--no-config", "probe", url, "--format", "json", "--quiet"];
    args.extend_from_slice(extra);
    run(&args, &[])
}

fn outcomes(report: &Value) -> Vec<String> {
    report["requests"].as_array().unwrap().iter().map(|r| r["outcome"]["kind"].as_str().unwrap().to_string()).collect()
}

#[test]
fn through_a_real_router_the_probe_sends_what_its_limits_allow_and_nothing_more() {
    let engine = Engine::start(Duration::from_millis(300), Mode::Answer);
    let router = Router::start(&engine, &[]);
    let before = router.requests_counted();
    let r = probe(&router.url(), &["--requests", "6", "--rate", "5", "--concurrency", "2", "--max-tokens", "8"]);
    let j = r.json();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // The model came from /v1/models (one GET), then exactly the requests asked for.
    assert_eq!(j["model"], "stand-in");
    assert_eq!(j["model_looked_up"], true);
    assert_eq!(engine.completions().len(), 6, "the engine got exactly --requests completions");
    assert!(engine.completions().iter().all(|g| g.body["model"] == "stand-in" && g.body["max_tokens"] == 8));
    assert_eq!(router.requests_counted() - before, 6.0, "the router counted the same six");
    assert!(engine.in_flight_max.load(Ordering::SeqCst) <= 2, "never more than --concurrency in flight at the engine");
    // Each request started no sooner than its turn at --rate after the probe began, and at least
    // 1/rate after the one before, by the probe's own clock.
    let begun: chrono::DateTime<chrono::Utc> = j["started"].as_str().unwrap().parse().unwrap();
    let mut previous: Option<chrono::DateTime<chrono::Utc>> = None;
    for (i, r) in j["requests"].as_array().unwrap().iter().enumerate() {
        let t: chrono::DateTime<chrono::Utc> = r["started"].as_str().unwrap().parse().unwrap();
        let after = (t - begun).num_milliseconds();
        assert!(after >= i as i64 * 200 - 1, "request {i} started {after} ms after the probe began, before its turn at 5/s");
        if let Some(p) = previous {
            assert!((t - p).num_milliseconds() >= 199, "request {i} started {} ms after the one before it, at 5/s", (t - p).num_milliseconds());
        }
        previous = Some(t);
    }
    assert_eq!(j["summary"]["ok"], 6);
    assert_eq!(j["summary"]["tokens"], 48);
    // Streamed and not, alternating: three streams timed to their first token, with gaps between tokens.
    assert_eq!(j["summary"]["ttft"]["count"], 3);
    assert!(j["summary"]["between_tokens"]["count"].as_u64().unwrap() >= 3 * 7);
    assert_eq!(j["limits"]["requests"], 6);
    assert_eq!(j["outcome"]["exit_code"], 0);
    assert!(j["engine"].is_null(), "no Prometheus was given, so none was read");
}

#[test]
fn chat_requests_go_to_the_chat_endpoint_and_their_streams_are_timed_from_the_first_content() {
    let engine = Engine::start(Duration::from_millis(100), Mode::Answer);
    let router = Router::start(&engine, &[]);
    let r = probe(
        &format!("{}/v1", router.url()),
        &["--api", "chat", "--model", "stand-in", "--requests", "2", "--rate", "10", "--stream", "always", "--max-tokens", "5"],
    );
    let j = r.json();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(j["endpoint"], format!("{}/v1/chat/completions", router.url()));
    let got = engine.completions();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|g| g.path == "/v1/chat/completions" && g.body["messages"][0]["role"] == "user"), "{got:?}");
    // The role-only first event is not a token: five tokens, four gaps each.
    assert_eq!(j["summary"]["tokens"], 10);
    assert_eq!(j["summary"]["between_tokens"]["count"], 8);
}

#[test]
fn a_router_at_its_concurrency_limit_answers_408s_the_probe_counts_and_the_router_does_not() {
    // As measured on vllm-router 0.1.17 (docs/hops.md): a token bucket of --max-concurrent-requests,
    // released when the worker's answer begins, so unstreamed requests hold it to the end.
    let engine = Engine::start(Duration::from_secs(3), Mode::Answer);
    let router = Router::start(&engine, &["--max-concurrent-requests", "2", "--queue-size", "4"]);
    let before = router.requests_counted();
    let r = probe(&router.url(), &["--model", "stand-in", "--requests", "10", "--rate", "20", "--concurrency", "10", "--stream", "never"]);
    let j = r.json();
    assert_eq!(r.code, 1, "a failed request fails the probe\n{}", r.stderr);
    let kinds = outcomes(&j);
    let refused = kinds.iter().filter(|k| *k == "http").count();
    let served = kinds.iter().filter(|k| *k == "ok").count();
    assert!(refused >= 1, "the router refused some of ten requests at a limit of 2: {kinds:?}");
    assert_eq!(refused + served, 10, "every request either served or refused: {kinds:?}");
    assert!(j["requests"].as_array().unwrap().iter().filter(|r| r["outcome"]["kind"] == "http").all(|r| r["outcome"]["status"] == 408));
    assert_eq!(j["summary"]["by_outcome"]["http_408"], refused);
    // The router's own counter holds only what it served: the 408s appear in no family.
    assert_eq!(router.requests_counted() - before, served as f64, "the router counted only the requests it served");
    assert_eq!(engine.completions().len(), served, "the refused requests never reached the engine");
    let text = run(
        &[
            "--no-config",
            "probe",
            &router.url(),
            "--model",
            "stand-in",
            "--requests",
            "4",
            "--rate",
            "20",
            "--concurrency",
            "4",
            "--stream",
            "never",
            "--quiet",
        ],
        &[],
    );
    assert_eq!(text.code, 1);
    assert!(text.stdout.starts_with("PROBE ") && text.stdout.contains("FAIL: ") && text.stdout.contains("x HTTP 408"), "{}", text.stdout);
}

#[test]
fn a_request_that_outlasts_its_timeout_or_the_probes_duration_is_cut_and_counted() {
    // The stand-in engine is slow (10 s); the router in front of it is real and has no timeout of its own.
    let engine = Engine::start(Duration::from_secs(10), Mode::Answer);
    let router = Router::start(&engine, &[]);
    let r = probe(&router.url(), &["--model", "stand-in", "--requests", "1", "--timeout", "1s", "--stream", "always"]);
    assert_eq!(r.code, 1);
    assert_eq!(outcomes(&r.json()), ["timeout"]);
    let before = engine.completions().len();
    let r = probe(&router.url(), &["--model", "stand-in", "--requests", "5", "--rate", "1", "--concurrency", "5", "--max-duration", "2s"]);
    let j = r.json();
    assert_eq!(r.code, 1);
    let kinds = outcomes(&j);
    assert!(!kinds.is_empty() && kinds.iter().all(|k| k == "timeout"), "{kinds:?}");
    assert!(j["requests"].as_array().unwrap().iter().all(|r| r["outcome"]["limit"] == "probe_duration"));
    assert_eq!(kinds.len() + j["not_started"].as_u64().unwrap() as usize, 5, "the rest never started");
    assert!(j["not_started"].as_u64().unwrap() >= 2, "at 1/s, no request starts at or after 2 s");
    assert!(engine.completions().len() - before <= kinds.len(), "nothing sent that the probe does not account for");
}

#[test]
fn resets_cut_streams_and_refused_connections_are_failures_of_their_own_kind() {
    // Faults on cue, which no real server produces when asked: the stand-in engine alone.
    let reset = Engine::start(Duration::ZERO, Mode::Reset);
    let r = probe(&reset.url(), &["--model", "m", "--requests", "1"]);
    assert_eq!((r.code, outcomes(&r.json())), (1, vec!["reset".to_string()]), "{}", r.stdout);
    let cut = Engine::start(Duration::ZERO, Mode::CutStream);
    let r = probe(&cut.url(), &["--model", "m", "--requests", "1", "--stream", "always"]);
    let j = r.json();
    assert_eq!((r.code, outcomes(&j)), (1, vec!["reset".to_string()]), "{}", r.stdout);
    assert!(j["requests"][0]["ttft_seconds"].is_number(), "the first token was measured before the cut");
    let closed = common::free_port();
    let r = probe(&format!("http://127.0.0.1:{closed}"), &["--model", "m", "--requests", "2"]);
    assert_eq!((r.code, outcomes(&r.json())), (1, vec!["connect".to_string(), "connect".to_string()]));
    // Without --model, the probe cannot start where nothing answers: no verdict, and the JSON says why.
    let r = probe(&format!("http://127.0.0.1:{closed}"), &["--requests", "2"]);
    let j = r.json();
    assert_eq!((r.code, j["error"]["exit_code"].as_u64()), (3, Some(3)), "{}", r.stdout);
    assert!(j["error"]["message"].as_str().unwrap().contains("/v1/models"), "{j}");
}

#[test]
fn nothing_goes_to_an_address_not_given_and_credentials_never_show() {
    // A redirect to another port on cue (a misconfigured gateway), from the stand-in engine.
    let elsewhere = Engine::start(Duration::ZERO, Mode::Answer);
    let engine = Engine::start(Duration::ZERO, Mode::RedirectTo(elsewhere.port));
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").unwrap();
    for format in ["json", "text"] {
        let r = run(
            &["--no-config", "probe", &engine.url(), "--model", "m", "--requests", "2", "--bearer-token-file", token.to_str().unwrap(), "--format", format],
            &[],
        );
        assert_eq!(r.code, 1, "a redirect is not an answer");
        assert!(!r.stdout.contains("s3cret") && !r.stderr.contains("s3cret"), "the token was printed:\n{}\n{}", r.stdout, r.stderr);
    }
    assert_eq!(elsewhere.connections.load(Ordering::SeqCst), 0, "the redirect to another port was not followed");
    // The Prometheus token from the environment is the backend's: it never goes to the probed URL.
    let quiet = Engine::start(Duration::ZERO, Mode::Answer);
    let r = run(&["--no-config", "probe", &quiet.url(), "--model", "m", "--requests", "1", "--quiet"], &[("VLLM_DIAG_BEARER_TOKEN", "backend-secret")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(quiet.completions()[0].authorization, None);
    let got = engine.completions();
    assert_eq!(got.len(), 4);
    assert!(got.iter().all(|g| g.authorization.as_deref() == Some("Bearer s3cret-token")), "the token went to the URL given");
}

#[test]
fn a_dry_run_prints_every_request_and_the_limits_and_sends_nothing() {
    let engine = Engine::start(Duration::ZERO, Mode::Answer);
    let r = run(&["--no-config", "probe", &engine.url(), "--requests", "3", "--dry-run"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("DRY RUN: nothing is sent."), "{}", r.stdout);
    assert!(r.stdout.contains("limits: at most 3 requests, 1/s, 1 in flight, 60 s in all, 30 s each"), "{}", r.stdout);
    assert!(r.stdout.contains(&format!("GET {}/v1/models", engine.url())), "the model lookup is shown: {}", r.stdout);
    assert_eq!(r.stdout.matches("POST ").count(), 3);
    let j = run(&["--no-config", "probe", &engine.url(), "--model", "m", "--requests", "2", "--dry-run", "--format", "json"], &[]).json();
    assert_eq!(j["requests"].as_array().unwrap().len(), 2);
    assert_eq!(j["requests"][0]["body"]["stream"], true);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(engine.connections.load(Ordering::SeqCst), 0, "a dry run connects to nothing");
}

#[test]
fn limits_past_their_ceilings_and_bad_urls_are_refused_before_anything_is_sent() {
    let engine = Engine::start(Duration::ZERO, Mode::Answer);
    let url = engine.url();
    for (args, says) in [
        (vec!["--requests", "500"], "--requests 500 is over the probe's ceiling of 200"),
        (vec!["--rate", "100"], "--rate 100 is over the probe's ceiling of 20/s"),
        (vec!["--concurrency", "64"], "--concurrency 64 is over the probe's ceiling of 32"),
        (vec!["--max-duration", "1h"], "--max-duration 3600s is over the probe's ceiling"),
        (vec!["--rate", "0"], "--rate"),
    ] {
        let mut a = vec!["--no-config", "probe", url.as_str(), "--model", "m"];
        a.extend(args);
        let r = run(&a, &[]);
        assert_eq!(r.code, 2, "{a:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{a:?}: {}", r.stderr);
    }
    let with_password = format!("http://me:hunter2@127.0.0.1:{}", engine.port);
    let r = run(&["--no-config", "probe", &with_password, "--model", "m"], &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("credentials in the URL") && !r.stderr.contains("hunter2"), "{}", r.stderr);
    assert_eq!(engine.connections.load(Ordering::SeqCst), 0, "nothing was sent");
}

// `explain --probe` and `check --probe`: the probe joins a diagnosis. The Prometheus is real: it
// holds a healthy fleet's last hour (fixtures/scenarios/healthy-steady.toml moved to end now,
// backfilled with promtool) and scrapes the stand-in engine's /metrics every second, so the
// diagnosis reads the fleet and the probe reads the stand-in's minutes from the same server.

/// The fleet's history and the stand-in's live metrics in one Prometheus.
fn fleet_and_engine(engine: &Engine) -> common::PromServer {
    let spec = common::ending_now("healthy-steady");
    let jobs =
        format!("scrape_configs:\n  - job_name: stand-in\n    scrape_interval: 1s\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n", engine.port);
    let prom = common::PromServer::start_generated_with(&spec, &jobs, &[]);
    // The stand-in scraped at least once before the probe starts (its scrapes are what the probe reads).
    let up = prom.wait_for_series("vllm:num_requests_waiting{model_name=\"stand-in\"}", true);
    let targets = prom.get("/api/v1/targets").map(|(_, b)| b).unwrap_or_default();
    assert!(!up.is_empty(), "Prometheus did not scrape the stand-in within a minute: {targets}\n{}", prom.log_text());
    prom
}

/// `vllm-diag COMMAND` over `prom` with the diagnosis scoped to the fleet (not the stand-in), the
/// probe at `target` for the stand-in's model, the engines read 3 s after (three scrapes).
fn joined(command: &str, prom: &common::PromServer, target: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--no-config", command, "--prometheus", &prom.url, "--selector", "model_name!=\"stand-in\"", "--quiet"];
    if command == "check" {
        args.extend_from_slice(&["--since", "30m"]);
    }
    args.extend_from_slice(&["--probe", target, "--probe-model", "stand-in", "--probe-settle", "3s"]);
    args.extend_from_slice(extra);
    run(&args, &[])
}

#[test]
fn check_probe_passes_on_a_healthy_probe_and_fails_on_the_routers_408s_which_explain_names() {
    // Healthy: a router with room, an engine answering in 0.1 s.
    let engine = Engine::start(Duration::from_millis(100), Mode::Answer);
    let router = Router::start(&engine, &[]);
    let prom = fleet_and_engine(&engine);
    let ok = joined("check", &prom, &router.url(), &["--probe-requests", "4", "--probe-rate", "4", "--format", "json"]);
    assert_eq!(ok.code, 0, "a healthy fleet and a healthy probe pass\n{}\n{}", ok.stdout, ok.stderr);
    assert!(
        ok.stderr.contains("PASS: ")
            && ok.stderr.contains("; the probe of http://127.0.0.1:")
            && ok.stderr.contains(" passed (all 4 requests succeeded; p95 time to the first token "),
        "{}",
        ok.stderr
    );
    assert!(ok.stderr.contains("within the chat profile's ceiling of 3 s"), "{}", ok.stderr);
    let j = ok.json();
    let p = &j["probe"];
    assert_eq!((p["run"]["summary"]["ok"].as_u64(), p["breaches"].as_array().map(Vec::len)), (Some(4), Some(0)), "{p}");
    assert_eq!((p["profile"].as_str(), p["ttft_p95_limit"].as_f64()), (Some("chat"), Some(3.0)));
    // The engines' side was read from the Prometheus that scrapes the stand-in: the four it finished.
    assert_eq!(p["run"]["engine"]["finished"].as_f64(), Some(4.0), "{}", p["run"]["engine"]);
    assert_eq!(engine.completions().len(), 4, "exactly --probe-requests reached the engine");
    assert_eq!(j["outcome"]["exit_code"], 0);
    drop((router, prom, engine));

    // The router at --max-concurrent-requests 2 answers 408 to what it cannot hold, while the
    // engine has nothing waiting: check fails on the probe, and says so first.
    let engine = Engine::start(Duration::from_secs(3), Mode::Answer);
    let router = Router::start(&engine, &["--max-concurrent-requests", "2", "--queue-size", "4"]);
    let prom = fleet_and_engine(&engine);
    let busy = ["--probe-requests", "10", "--probe-rate", "20", "--probe-concurrency", "10", "--probe-stream", "never"];
    let failed = joined("check", &prom, &router.url(), &[&busy[..], &["--format", "json"]].concat());
    assert_eq!(failed.code, 1, "the router's 408s fail the check\n{}", failed.stderr);
    assert!(failed.stderr.contains("FAIL: the probe of http://127.0.0.1:") && failed.stderr.contains("x HTTP 408"), "{}", failed.stderr);
    assert!(failed.stderr.contains("nothing was found in the metrics since the deploy at"), "the fleet's metrics were healthy: {}", failed.stderr);
    let j = failed.json();
    let p = &j["probe"];
    let refused = p["run"]["summary"]["by_outcome"]["http_408"].as_u64().expect("some 408s");
    assert!(refused >= 1);
    assert_eq!(p["breaches"][0]["kind"], "requests_failed", "{p}");
    assert_eq!(p["run"]["refused_in_front"]["by_status"]["408"].as_u64(), Some(refused), "named as refused in front of the engines: {p}");
    assert_eq!(p["run"]["engine"]["waiting_max"].as_f64(), Some(0.0));
    assert_eq!(j["outcome"]["exit_code"], 1);

    // explain --probe names the refusal with the probe's numbers, in the text and in Markdown.
    let text = joined("explain", &prom, &router.url(), &busy);
    assert!(text.stdout.contains("PROBE FAILED: the probe of http://127.0.0.1:"), "{}", text.stdout);
    assert!(text.stdout.contains("Refused in front of the engines: ") && text.stdout.contains(" with HTTP 408) after "), "{}", text.stdout);
    assert!(text.stdout.contains("while no engine had a request waiting"), "{}", text.stdout);
    let md = joined("explain", &prom, &router.url(), &[&busy[..], &["--format", "markdown"]].concat());
    assert!(md.stdout.contains("Refused in front of the engines: "), "{}", md.stdout);
}

#[test]
fn a_joined_probe_sends_only_to_the_url_given_with_its_own_token_and_no_secret_shows() {
    let engine = Engine::start(Duration::from_millis(50), Mode::Answer);
    let prom = fleet_and_engine(&engine);
    let dir = tempfile::tempdir().unwrap();
    let (probe_token, prom_token) = (dir.path().join("probe-token"), dir.path().join("prom-token"));
    std::fs::write(&probe_token, "probe-s3cret\n").unwrap();
    std::fs::write(&prom_token, "prom-s3cret\n").unwrap();
    let r = joined(
        "explain",
        &prom,
        &engine.url(),
        &[
            "--probe-requests",
            "3",
            "--probe-rate",
            "5",
            "--probe-bearer-token-file",
            probe_token.to_str().unwrap(),
            "--bearer-token-file",
            prom_token.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    for secret in ["probe-s3cret", "prom-s3cret"] {
        assert!(!r.stdout.contains(secret) && !r.stderr.contains(secret), "{secret} was printed");
    }
    // The engine got the three requests and nothing else but Prometheus' scrapes of /metrics
    // (which the stand-in does not record), each with the probe's token, never the Prometheus'.
    let got = engine.got.lock().unwrap().clone();
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got.iter().all(|g| g.path == "/v1/completions" && g.authorization.as_deref() == Some("Bearer probe-s3cret")), "{got:?}");
    assert_eq!(r.json()["probe"]["run"]["summary"]["ok"], 3);
}

#[test]
fn a_probe_cannot_join_a_replay_a_scrape_a_watch_or_a_past_window() {
    let engine = Engine::start(Duration::ZERO, Mode::Answer);
    let url = engine.url();
    let replay = format!("{}/fixtures/incidents/healthy-steady.json", env!("CARGO_MANIFEST_DIR"));
    for (args, says) in [
        (vec!["explain", "--replay", replay.as_str()], "--replay"),
        (vec!["explain", "--scrape", "127.0.0.1:1"], "--scrape"),
        (vec!["explain", "--watch", "1m"], "--watch"),
        (vec!["check", "--since", "30m", "--at", "2026-01-15T09:00:00Z"], "--at"),
    ] {
        let mut full = vec!["--no-config"];
        full.extend(args);
        full.extend(["--probe", url.as_str(), "--probe-model", "m"]);
        let r = run(&full, &[]);
        assert_eq!(r.code, 2, "{full:?}: {}", r.stderr);
        assert!(r.stderr.contains(says) && r.stderr.contains("--probe"), "{full:?}: {}", r.stderr);
    }
    assert!(engine.got.lock().unwrap().is_empty(), "nothing was sent");
    let r = run(&["--no-config", "explain", "--probe-model", "m"], &[]);
    assert_eq!(r.code, 2, "--probe-model needs --probe: {}", r.stderr);
}
