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
use std::path::PathBuf;
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
        let in_flight = Arc::new(AtomicUsize::new(0));
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
fn serve(conn: TcpStream, delay: Duration, mode: Mode, got: Arc<Mutex<Vec<Got>>>, max: Arc<AtomicUsize>, in_flight: Arc<AtomicUsize>) {
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
            ("GET", "/v1/models") => {
                got.lock().unwrap().push(Got { path: path.clone(), authorization, body });
                send(&mut conn, "200 OK", "application/json", r#"{"object":"list","data":[{"id":"stand-in","object":"model"}]}"#)
            }
            ("POST", p) if p.ends_with("/completions") => {
                got.lock().unwrap().push(Got { path: path.clone(), authorization, body: body.clone() });
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                let done = completion(&mut conn, &body, delay, mode);
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

fn router_binary() -> PathBuf {
    let path = std::env::var_os("VLLM_DIAG_ROUTER").map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("VLLM_DIAG_TEST_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/vllm-diag-test"));
        cache.join("router-venv/bin/vllm-router")
    });
    assert!(
        path.exists(),
        "vLLM's router is not installed at {}: run scripts/router-venv.sh (scripts/test.sh runs it), or point $VLLM_DIAG_ROUTER at a vllm-router binary",
        path.display()
    );
    path
}

impl Router {
    fn start(engine: &Engine, flags: &[&str]) -> Router {
        let (port, metrics_port) = (common::free_port(), common::free_port());
        let child = Command::new(router_binary())
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
    let r = probe(&format!("{}/v1", router.url()), &["--api", "chat", "--model", "stand-in", "--requests", "2", "--rate", "10", "--stream", "always", "--max-tokens", "5"]);
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
    let r = probe(
        &router.url(),
        &["--model", "stand-in", "--requests", "10", "--rate", "20", "--concurrency", "10", "--stream", "never"],
    );
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
    let text = run(&["--no-config", "probe", &router.url(), "--model", "stand-in", "--requests", "4", "--rate", "20", "--concurrency", "4", "--stream", "never", "--quiet"], &[]);
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
