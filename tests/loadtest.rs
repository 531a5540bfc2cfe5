//! `vllm-diag loadtest` against real servers: the sweep finds the knee at the engine's sequence cap
//! and names it, its bounds hold and are counted, nothing goes anywhere but the URL given, and the
//! profile it derives is one `explain` accepts.
//!
//! The router is the real one (vLLM's router, PyPI `vllm-router`, installed by
//! scripts/router-venv.sh) and so is the Prometheus that scrapes the engine. The engine is
//! [`Engine`], a stand-in written here because CI cannot run vLLM: it runs at most `cap` requests
//! at once and queues the rest (as vLLM's scheduler at `--max-num-seqs`), streams each answer's
//! first token after a set delay and then one token every few milliseconds, and exports vLLM's
//! families (running, waiting, KV-cache usage, the token counters, and the time to the first
//! token, between tokens and end to end as histograms with buckets).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::run::{run, Run};
use serde_json::Value;

const BUCKETS: [f64; 10] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A histogram: counts per bucket (cumulative when written), sum, count.
#[derive(Default, Clone)]
struct Histogram {
    buckets: [u64; 10],
    sum: f64,
    count: u64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if v <= *b {
                self.buckets[i] += 1;
            }
        }
        self.sum += v;
        self.count += 1;
    }

    fn write(&self, out: &mut String, family: &str, labels: &str) {
        out.push_str(&format!("# TYPE vllm:{family} histogram\n"));
        for (i, b) in BUCKETS.iter().enumerate() {
            out.push_str(&format!("vllm:{family}_bucket{{{labels},le=\"{b}\"}} {}\n", self.buckets[i]));
        }
        out.push_str(&format!("vllm:{family}_bucket{{{labels},le=\"+Inf\"}} {}\n", self.count));
        out.push_str(&format!("vllm:{family}_sum{{{labels}}} {}\nvllm:{family}_count{{{labels}}} {}\n", self.sum, self.count));
    }
}

/// The engine's state: what runs, what waits, what it has recorded.
#[derive(Default)]
struct State {
    running: usize,
    waiting: usize,
    running_max: usize,
    completions: usize,
    generated: u64,
    prompt: u64,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    queue: Histogram,
}

struct Engine {
    port: u16,
    state: Arc<(Mutex<State>, Condvar)>,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

/// How the stand-in answers: its sequence cap, the delay to the first token, the gap between tokens.
#[derive(Clone, Copy)]
struct Speed {
    cap: usize,
    first_token: Duration,
    gap: Duration,
    /// Answer every completion request with a redirect to this port instead.
    redirect_to: Option<u16>,
}

impl Engine {
    fn start(speed: Speed) -> Engine {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let state: Arc<(Mutex<State>, Condvar)> = Arc::default();
        let (connections, stop) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
        let (st, c, s) = (state.clone(), connections.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        c.fetch_add(1, Ordering::SeqCst);
                        let st = st.clone();
                        std::thread::spawn(move || serve(conn, speed, st));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Engine { port, state, connections, stop }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn completions(&self) -> usize {
        self.state.0.lock().unwrap().completions
    }

    fn running_max(&self) -> usize {
        self.state.0.lock().unwrap().running_max
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn metrics(s: &State) -> String {
    let l = "model_name=\"stand-in\"";
    let mut out = String::new();
    for (name, kind, v) in [
        ("num_requests_running", "gauge", s.running as f64),
        ("num_requests_waiting", "gauge", s.waiting as f64),
        ("kv_cache_usage_perc", "gauge", s.running as f64 * 0.05),
        ("num_preemptions_total", "counter", 0.0),
        ("generation_tokens_total", "counter", s.generated as f64),
        ("prompt_tokens_total", "counter", s.prompt as f64),
    ] {
        out.push_str(&format!("# TYPE vllm:{name} {kind}\nvllm:{name}{{{l}}} {v}\n"));
    }
    s.ttft.write(&mut out, "time_to_first_token_seconds", l);
    s.itl.write(&mut out, "inter_token_latency_seconds", l);
    s.e2e.write(&mut out, "e2e_request_latency_seconds", l);
    s.queue.write(&mut out, "request_queue_time_seconds", l);
    out
}

/// One connection: requests one after another (keep-alive), until the peer closes it.
fn serve(conn: TcpStream, speed: Speed, state: Arc<(Mutex<State>, Condvar)>) {
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
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((name, value)) = h.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let send = |conn: &mut TcpStream, status: &str, text: &str| {
            let _ = write!(conn, "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}", text.len());
        };
        match (method.as_str(), path.as_str()) {
            ("GET", "/health") => send(&mut conn, "200 OK", "{}"),
            ("GET", "/metrics") => send(&mut conn, "200 OK", &metrics(&state.0.lock().unwrap())),
            ("GET", "/v1/models") => send(&mut conn, "200 OK", r#"{"object":"list","data":[{"id":"stand-in","object":"model"}]}"#),
            ("POST", p) if p.ends_with("/completions") => match speed.redirect_to {
                Some(port) => {
                    state.0.lock().unwrap().completions += 1;
                    let _ = write!(conn, "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:{port}/v1/completions\r\nContent-Length: 0\r\n\r\n");
                }
                None => completion(&mut conn, &body, speed, &state),
            },
            _ => send(&mut conn, "404 Not Found", "{}"),
        }
    }
}

/// One streamed completion: wait for a slot under the cap, the first token after the delay, then
/// a token every gap; the engine's histograms recorded as vLLM records them.
fn completion(conn: &mut TcpStream, body: &Value, speed: Speed, state: &Arc<(Mutex<State>, Condvar)>) {
    let tokens = body["max_tokens"].as_u64().unwrap_or(4).min(256);
    let arrived = Instant::now();
    {
        let (m, cv) = &**state;
        let mut s = m.lock().unwrap();
        s.completions += 1;
        s.waiting += 1;
        while s.running >= speed.cap {
            s = cv.wait(s).unwrap();
        }
        s.waiting -= 1;
        s.running += 1;
        s.running_max = s.running_max.max(s.running);
        s.queue.observe(arrived.elapsed().as_secs_f64());
    }
    let _ = write!(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n");
    let chunk = |conn: &mut TcpStream, text: &str| {
        let _ = write!(conn, "{:x}\r\n{text}\r\n", text.len());
        let _ = conn.flush();
    };
    std::thread::sleep(speed.first_token);
    let ttft = arrived.elapsed().as_secs_f64();
    let mut last = Instant::now();
    let mut gaps = Vec::new();
    for i in 0..tokens {
        if i > 0 {
            std::thread::sleep(speed.gap);
            gaps.push(last.elapsed().as_secs_f64());
            last = Instant::now();
        }
        chunk(conn, &format!("data: {{\"choices\":[{{\"index\":0,\"text\":\"t{i}\"}}]}}\n\n"));
    }
    {
        // The slot is free before the last events go out, as vLLM frees a finished sequence's.
        let (m, cv) = &**state;
        let mut s = m.lock().unwrap();
        s.running -= 1;
        s.generated += tokens;
        s.prompt += body["prompt"].as_str().map_or(0, |p| p.split(' ').count() as u64);
        s.ttft.observe(ttft);
        for g in gaps {
            s.itl.observe(g);
        }
        s.e2e.observe(arrived.elapsed().as_secs_f64());
        cv.notify_one();
    }
    chunk(conn, &format!("data: {{\"choices\":[],\"usage\":{{\"completion_tokens\":{tokens}}}}}\n\n"));
    chunk(conn, "data: [DONE]\n\n");
    let _ = write!(conn, "0\r\n\r\n");
}

/// vLLM's router in front of `engine`; stopped when dropped.
struct Router {
    child: Child,
    port: u16,
}

impl Router {
    fn start(engine: &Engine) -> Router {
        let (port, metrics_port) = (common::free_port(), common::free_port());
        let child = Command::new(common::router_binary())
            .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--prometheus-host", "127.0.0.1"])
            .args(["--prometheus-port", &metrics_port.to_string(), "--worker-urls", &engine.url(), "--policy", "round_robin"])
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start vllm-router");
        let r = Router { child, port };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !healthy(r.port) {
            assert!(Instant::now() < deadline, "vllm-router did not answer /health within 120 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        r
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn healthy(port: u16) -> bool {
    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else { return false };
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = write!(c, "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    let mut text = String::new();
    let _ = c.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/1.0 200")
}

fn loadtest(url: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--no-config", "loadtest", url];
    args.extend_from_slice(extra);
    run(&args, &[])
}

fn loads(j: &Value) -> Vec<f64> {
    j["steps"].as_array().unwrap().iter().map(|s| s["load"].as_f64().unwrap()).collect()
}

#[test]
fn the_sweep_finds_the_knee_at_the_engines_sequence_cap_names_it_and_derives_a_profile_explain_accepts() {
    let engine = Engine::start(Speed { cap: 4, first_token: Duration::from_millis(200), gap: Duration::from_millis(15), redirect_to: None });
    let router = Router::start(&engine);
    let prom = common::PromServer::start_scraping(&format!("127.0.0.1:{}", engine.port), "1s");
    let up = prom.wait_for_series("vllm:num_requests_waiting{model_name=\"stand-in\"}", true);
    assert!(!up.is_empty(), "Prometheus did not scrape the stand-in: {}", prom.log_text());
    let dir = tempfile::tempdir().unwrap();
    // The limits: a first token within 450 ms at p95. Unqueued, the stand-in's comes after 200 ms;
    // a request queued behind the cap waits a whole answer (about 500 ms) more.
    std::fs::write(dir.path().join("slo.toml"), "[profile.lt]\nttft_p95_high = \"450ms\"\nitl_p95_high = \"100ms\"\n").unwrap();
    let out = dir.path().join("measured.toml");
    let page = dir.path().join("loadtest.html");
    let r = loadtest(
        &router.url(),
        &[
            "--prometheus",
            &prom.url,
            "--rules",
            dir.path().to_str().unwrap(),
            "--profile",
            "lt",
            "--max-concurrency",
            "16",
            "--max-tokens",
            "20",
            "--prompt-words",
            "8",
            "--step",
            "4s",
            "--settle",
            "2s",
            "--timeout",
            "10s",
            "--max-duration",
            "4m",
            "--profile-out",
            out.to_str().unwrap(),
            "--profile-name",
            "measured-lt",
            "--html",
            page.to_str().unwrap(),
            "--format",
            "json",
        ],
    );
    let j = r.json();
    // The same run as a page: a chart per measure it read, the knee marked, a row per step.
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.matches("<svg class=\"chart\"").count() >= 3 && html.contains("knee at 4 in flight"), "{html}");
    assert_eq!(html.matches("<tr>").count(), j["steps"].as_array().unwrap().len() + 1);
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(j["knee"]["load"].as_f64(), Some(4.0), "the knee at the cap of 4: steps {:?}\n{}", loads(&j), r.stderr);
    let bound = &j["knee"]["bound"];
    assert_eq!(bound["limit"], "max-num-seqs", "{bound}");
    assert_eq!(bound["running_max"].as_f64(), Some(4.0));
    // Doubling to the first bad step, then bisection below it; never a load above it.
    let l = loads(&j);
    assert_eq!(&l[..4], &[1.0, 2.0, 4.0, 8.0], "{l:?}");
    assert!(l.iter().all(|x| *x <= 8.0), "{l:?}");
    assert_eq!(j["stop"], "found");
    // The engine never ran more than its cap, and got exactly what the sweep says it sent.
    assert_eq!(engine.running_max(), 4);
    let sent: u64 = j["steps"].as_array().unwrap().iter().map(|s| s["sent"].as_u64().unwrap()).sum();
    assert_eq!(engine.completions() as u64, sent, "every request the engine got is one the sweep counted");
    // Each step's throughput and the engines' view.
    let knee_step = &j["steps"][j["knee"]["step"].as_u64().unwrap() as usize];
    assert!(knee_step["requests_per_second"].as_f64().unwrap() > 2.0, "{knee_step}");
    assert_eq!(knee_step["engine"]["waiting_max"].as_f64(), Some(0.0), "nothing waited at the knee: {knee_step}");
    // Tokens 15 ms apart: the engines' p95 falls within the buckets around it (25 and 50 ms).
    assert!(knee_step["engine"]["itl_p95"].as_f64().unwrap() < 0.05, "{knee_step}");
    // One progress line a step on stderr.
    assert_eq!(r.stderr.lines().filter(|l| l.starts_with("vllm-diag: step ")).count(), l.len(), "{}", r.stderr);
    // The derived profile: a rules file explain takes with --profile.
    let toml = std::fs::read_to_string(&out).unwrap();
    assert!(toml.contains("[profile.measured-lt]") && toml.contains("ttft_p95_high = \"") && toml.contains("# Margin: "), "{toml}");
    let rules = tempfile::tempdir().unwrap();
    std::fs::copy(&out, rules.path().join("measured.toml")).unwrap();
    let replay = format!("{}/fixtures/incidents/healthy-steady.json", env!("CARGO_MANIFEST_DIR"));
    let e =
        run(&["--no-config", "explain", "--replay", &replay, "--rules", rules.path().to_str().unwrap(), "--profile", "measured-lt", "--format", "json"], &[]);
    assert!(e.code == 0 || e.code == 1, "explain accepts the derived profile: {}\n{}", e.code, e.stderr);
    let shown = run(&["--no-config", "config", "show", "--rules", rules.path().to_str().unwrap(), "--profile", "measured-lt"], &[]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
}

#[test]
fn the_bounds_on_requests_rate_concurrency_and_duration_hold_and_are_counted() {
    let engine = Engine::start(Speed { cap: 64, first_token: Duration::from_millis(20), gap: Duration::from_millis(2), redirect_to: None });
    // The request bound: 30 requests in all, whatever the steps would have sent.
    let r = loadtest(
        &engine.url(),
        &["--model", "stand-in", "--max-requests", "30", "--max-concurrency", "8", "--step", "3s", "--max-tokens", "4", "--format", "json", "--quiet"],
    );
    let j = r.json();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let sent: u64 = j["steps"].as_array().unwrap().iter().map(|s| s["sent"].as_u64().unwrap()).sum();
    assert_eq!((sent, engine.completions()), (30, 30), "exactly --max-requests, counted by the engine too");
    assert_eq!(j["stop"], "request_bound");
    assert!(engine.running_max() <= 8);
    // The rate bound: at most 5 a second in a closed loop of 4; the steps' starts 200 ms apart or more.
    let before = engine.completions();
    let r = loadtest(
        &engine.url(),
        &["--model", "stand-in", "--max-rate", "5", "--max-concurrency", "4", "--step", "2s", "--max-tokens", "4", "--format", "json", "--quiet"],
    );
    let j = r.json();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(loads(&j), [1.0, 2.0, 4.0]);
    for s in j["steps"].as_array().unwrap() {
        assert!(s["sent"].as_u64().unwrap() <= 10, "at most 5/s for 2 s: {s}");
    }
    let sent: u64 = j["steps"].as_array().unwrap().iter().map(|s| s["sent"].as_u64().unwrap()).sum();
    assert_eq!(engine.completions() - before, sent as usize);
    assert_eq!((j["stop"].as_str(), j["knee"]["load"].as_f64(), j["knee"]["first_bad"].as_u64()), (Some("load_bound"), Some(4.0), None));
    // The duration bound: a step of 2 s and a 5 s bound leave room for one step only.
    let r = loadtest(
        &engine.url(),
        &["--model", "stand-in", "--max-duration", "5s", "--step", "2s", "--timeout", "2s", "--max-tokens", "4", "--format", "json", "--quiet"],
    );
    let j = r.json();
    assert_eq!((loads(&j), j["stop"].as_str()), (vec![1.0], Some("duration_bound")), "{}", r.stdout);
    let took = (j["ended"].as_str().unwrap().parse::<chrono::DateTime<chrono::Utc>>().unwrap()
        - j["started"].as_str().unwrap().parse::<chrono::DateTime<chrono::Utc>>().unwrap())
    .num_milliseconds();
    assert!(took <= 5_000, "the sweep took {took} ms of its 5 s");
    // An open loop: Poisson arrivals at 2 and 4 a second, at most 3 in flight.
    let before = engine.completions();
    let r = loadtest(
        &engine.url(),
        &["--model", "stand-in", "--mode", "rate", "--start", "2", "--max-rate", "4", "--max-concurrency", "3", "--step", "2s", "--format", "json", "--quiet"],
    );
    let j = r.json();
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!((loads(&j), j["mode"].as_str()), (vec![2.0, 4.0], Some("rate")));
    let sent: u64 = j["steps"].as_array().unwrap().iter().map(|s| s["sent"].as_u64().unwrap()).sum();
    assert!(sent >= 2, "{sent}");
    assert_eq!(engine.completions() - before, sent as usize);
}

#[test]
fn a_dry_run_sends_nothing_and_the_sweep_sends_only_to_the_url_given() {
    let elsewhere = Engine::start(Speed { cap: 4, first_token: Duration::ZERO, gap: Duration::ZERO, redirect_to: None });
    let redirecting = Engine::start(Speed { cap: 4, first_token: Duration::ZERO, gap: Duration::ZERO, redirect_to: Some(elsewhere.port) });
    let r = loadtest(&redirecting.url(), &["--model", "m", "--dry-run", "--max-concurrency", "8", "--step", "10s"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("DRY RUN: nothing is sent."), "{}", r.stdout);
    assert!(r.stdout.contains("steps: 1, 2, 4, 8 in flight") && r.stdout.contains("worst case: 8 steps"), "{}", r.stdout);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(redirecting.connections.load(Ordering::SeqCst), 0, "a dry run connects to nothing");
    // A redirect to another port is not followed: the first step fails on it, and no knee.
    let r = loadtest(&redirecting.url(), &["--model", "m", "--step", "1s", "--max-concurrency", "2", "--format", "json", "--quiet"]);
    let j = r.json();
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(j["knee"].is_null() && j["stop"] == "first_step_broke", "{j}");
    assert_eq!(elsewhere.connections.load(Ordering::SeqCst), 0, "nothing went to the address the redirect named");
    // Bounds past their ceilings are refused before anything is sent.
    for (args, says) in [
        (vec!["--max-concurrency", "5000"], "--max-concurrency 5000 is over the load test's ceiling of 1024"),
        (vec!["--max-requests", "1000000"], "--max-requests 1000000 is over the load test's ceiling of 100000"),
        (vec!["--max-rate", "5000"], "--max-rate 5000 is over the load test's ceiling of 1000/s"),
    ] {
        let mut a = vec!["--model", "m"];
        a.extend(args);
        let r = loadtest(&elsewhere.url(), &a);
        assert_eq!(r.code, 2, "{a:?}: {}", r.stderr);
        assert!(r.stderr.contains(says), "{a:?}: {}", r.stderr);
    }
    assert_eq!(elsewhere.connections.load(Ordering::SeqCst), 0);
}
