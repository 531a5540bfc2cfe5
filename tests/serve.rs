//! `vllm-diag serve` as a service: the binary listens on a free port of 127.0.0.1, a real
//! Prometheus holds a generated incident that ends now, and a loopback HTTP receiver stands in for
//! the generic webhook and for Slack. A notification in Alertmanager's webhook format (written here
//! by hand, or sent by a real Alertmanager) must bring the ranked diagnosis to the receiver; bad
//! requests, duplicates and a backend that is down must be answered as a service should; under a
//! storm of 100 groups, every group's diagnosis must reach the receiver exactly once.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use common::alertmanager::Alertmanager;
use common::{free_port, incident_now, load_scenario, run::write_file, PromServer};

const TOKEN: &str = "test-token-5f1c";
const SLACK_SECRET: &str = "T000/B000/slacksecretpath";
const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

// ---------------------------------------------------------------------------------------------
// The loopback receiver: every POST it gets, by path, answered 200.
// ---------------------------------------------------------------------------------------------

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Hit {
    path: String,
    body: String,
}

struct Receiver {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
        let url = format!("http://{}", listener.local_addr().expect("receiver address"));
        let hits = Arc::new(Mutex::new(Vec::new()));
        let store = hits.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Some(hit) = read_request(stream) {
                    store.lock().unwrap().push(hit);
                }
            }
        });
        Receiver { url, hits }
    }

    fn hits(&self, path_prefix: &str) -> Vec<Hit> {
        self.hits.lock().unwrap().iter().filter(|h| h.path.starts_with(path_prefix)).cloned().collect()
    }

    /// Wait until `n` requests to paths starting with `prefix` arrived; panics after `timeout`.
    fn wait_for(&self, prefix: &str, n: usize, timeout: Duration, serve: &Serve) -> Vec<Hit> {
        let started = Instant::now();
        loop {
            let hits = self.hits(prefix);
            if hits.len() >= n {
                return hits;
            }
            if started.elapsed() > timeout {
                panic!("the receiver got {} of {n} requests to {prefix} in {timeout:?}; serve's log:\n{}", hits.len(), serve.log());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// Read one HTTP/1.1 request (headers, then a Content-Length body) and answer 200.
fn read_request(mut stream: TcpStream) -> Option<Hit> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((name, value)) = h.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    Some(Hit { path, body: String::from_utf8_lossy(&body).into_owned() })
}

// ---------------------------------------------------------------------------------------------
// The service under test.
// ---------------------------------------------------------------------------------------------

struct Serve {
    addr: SocketAddr,
    child: Child,
    log: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Serve {
    /// Start `vllm-diag serve` on a free port against `prometheus`, delivering to `receiver`'s
    /// /hook and (through a URL file) /slack/..., with the test token required; `extra` follows.
    fn start(prometheus: &str, receiver: &Receiver, extra: &[&str]) -> Serve {
        let dir = tempfile::tempdir().expect("temp dir");
        let slack = write_file(dir.path(), "slack-url", &format!("{}/slack/{SLACK_SECRET}\n", receiver.url));
        let token = write_file(dir.path(), "token", &format!("{TOKEN}\n"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_vllm-diag"));
        cmd.args(["serve", "--no-config", "--listen", "127.0.0.1:0", "--prometheus", prometheus])
            .args(["--webhook-url", &format!("{}/hook", receiver.url)])
            .arg("--slack-webhook-url-file")
            .arg(&slack)
            .arg("--auth-token-file")
            .arg(&token)
            .args(extra)
            .env_remove("VLLM_DIAG_PROMETHEUS_URL")
            .env_remove("VLLM_DIAG_BEARER_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start vllm-diag serve");
        let stderr = child.stderr.take().expect("serve's stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut l = sink.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let started = Instant::now();
        let addr = loop {
            let text = log.lock().unwrap().clone();
            if let Some(rest) = text.split("listening on http://").nth(1) {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                break addr.parse::<SocketAddr>().unwrap_or_else(|e| panic!("serve's address {addr:?}: {e}"));
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("vllm-diag serve exited ({status}) before listening:\n{text}");
            }
            if started.elapsed() > Duration::from_secs(30) {
                panic!("vllm-diag serve was not listening after 30s:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(25));
        };
        Serve { addr, child, log, _dir: dir }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// POST a body to /alertmanager with `authorization` (if any); the status and the JSON answer.
    fn notify(&self, body: &[u8], authorization: Option<&str>) -> (u16, Value) {
        let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
        let head =
            format!("POST /alertmanager HTTP/1.0\r\nHost: {}\r\nContent-Type: application/json\r\n{auth}Content-Length: {}\r\n\r\n", self.addr, body.len());
        let (status, text) = request(self.addr, head.as_bytes(), body);
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    fn get(&self, path: &str) -> (u16, String) {
        request(self.addr, format!("GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).as_bytes(), b"")
    }

    /// SIGTERM, then the exit code and the whole log.
    fn stop(mut self) -> (i32, String) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                return (status.code().unwrap_or(-1), self.log());
            }
            if started.elapsed() > Duration::from_secs(30) {
                panic!("serve did not stop within 30s of SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.0 exchange: the status and the body of the answer. A server may answer before it
/// has read the whole body (413): what it answered is still read.
fn request(addr: SocketAddr, head: &[u8], body: &[u8]) -> (u16, String) {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to serve");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let _ = stream.write_all(head).and_then(|()| stream.write_all(body));
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, answer) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("not an HTTP answer: {text:?}"));
    (status, answer.to_string())
}

// ---------------------------------------------------------------------------------------------
// Notifications, written as Alertmanager writes them (notify/webhook, payload version 4).
// ---------------------------------------------------------------------------------------------

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn notification(status: &str, model: &str, starts: DateTime<Utc>, ends: Option<DateTime<Utc>>) -> Value {
    let labels = json!({"alertname": "VllmKvCachePressure", "model_name": model, "severity": "critical", "vllm_diag_rule": "kv-cache-pressure"});
    json!({
        "version": "4",
        "groupKey": format!("{{}}:{{alertname=\"VllmKvCachePressure\", model_name=\"{model}\"}}"),
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "vllm-diag",
        "groupLabels": {"alertname": "VllmKvCachePressure", "model_name": model},
        "commonLabels": labels,
        "commonAnnotations": {"summary": "KV cache nearly full"},
        "externalURL": "http://alertmanager.example:9093",
        "alerts": [{
            "status": status,
            "labels": labels,
            "annotations": {"summary": "KV cache nearly full"},
            "startsAt": rfc3339(starts),
            "endsAt": ends.map(rfc3339).unwrap_or_else(|| "0001-01-01T00:00:00Z".into()),
            "generatorURL": "http://prometheus.example:9090/graph?g0.expr=x",
            "fingerprint": "0123456789abcdef"
        }]
    })
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// A URL where nothing listens.
fn dead_backend() -> String {
    format!("http://127.0.0.1:{}", free_port())
}

/// The value of an unlabelled sample in an exposition text.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
}

// ---------------------------------------------------------------------------------------------
// The tests.
// ---------------------------------------------------------------------------------------------

#[test]
fn a_firing_alert_brings_the_ranked_diagnosis_to_the_webhook_and_slack_once() {
    let prom = incident_now();
    let receiver = Receiver::start();
    let serve = Serve::start(&prom.url, &receiver, &["--timeout", "60s"]);

    let fired = Utc::now() - chrono::Duration::minutes(10);
    let body = notification("firing", MODEL, fired, None).to_string();
    let (status, answer) = serve.notify(body.as_bytes(), Some(&bearer()));
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["selector"], format!("model_name=\"{MODEL}\""), "alert-only labels are no matchers: {answer}");

    let hook = receiver.wait_for("/hook", 1, Duration::from_secs(120), &serve);
    let report: Value = serde_json::from_str(&hook[0].body).expect("the webhook gets JSON");
    // The --format json contract, as it is.
    assert_eq!(report["schema_version"], 1);
    let first = &report["findings"][0];
    assert_eq!((first["rule"].as_str(), first["scope"]["model_name"].as_str()), (Some("kv-cache-pressure"), Some(MODEL)), "{report:#}");
    let elsewhere: Vec<&Value> = report["findings"].as_array().unwrap().iter().filter(|f| f["scope"]["model_name"] != MODEL).collect();
    assert!(elsewhere.is_empty(), "the diagnosis is scoped to the alert's model: {elsewhere:?}");
    assert_eq!(report["source"]["selector"], format!("model_name=\"{MODEL}\""));
    // What triggered it, and what the run was.
    assert_eq!(report["trigger"]["alerts"][0]["labels"]["model_name"], MODEL);
    assert_eq!(report["trigger"]["groupKey"], notification("firing", MODEL, fired, None)["groupKey"]);
    assert_eq!(report["run"]["kind"], "diagnosis");
    assert_eq!(report["run"]["status"], "diagnosed");
    assert_eq!(report["run"]["exit_code"], 0);
    assert_eq!(report["run"]["window_seconds"], 1800);

    let slack = receiver.wait_for("/slack/", 1, Duration::from_secs(30), &serve);
    assert_eq!(slack[0].path, format!("/slack/{SLACK_SECRET}"));
    let text = serde_json::from_str::<Value>(&slack[0].body).expect("Slack gets JSON")["text"].as_str().unwrap_or_default().to_string();
    assert!(text.contains("VllmKvCachePressure") && text.contains("KV"), "{text}");
    // Each evidence title links to a chart of the window, as in explain --format slack.
    assert!(text.contains("/graph?g0.expr="), "no chart links: {text}");

    // The same group again within --dedup: answered, not diagnosed again.
    let (status, answer) = serve.notify(body.as_bytes(), Some(&bearer()));
    assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")), "{answer}");

    let (status, metrics) = serve.get("/metrics");
    assert_eq!(status, 200);
    assert_eq!(sample(&metrics, "vllm_diag_serve_runs_total"), Some(1.0), "{metrics}");
    assert_eq!(sample(&metrics, "vllm_diag_serve_failures_total"), Some(0.0), "{metrics}");
    assert!(metrics.contains("vllm_diag_serve_deliveries_total{target=\"webhook\",result=\"ok\"} 1"), "{metrics}");
    assert!(metrics.contains("vllm_diag_serve_notifications_total{outcome=\"duplicate\"} 1"), "{metrics}");

    // The findings, as series a real Prometheus scrapes and can alert on.
    let finding = format!("vllm_diag_finding{{rule=\"kv-cache-pressure\",severity=\"critical\",model_name=\"{MODEL}\"}} 1");
    assert!(metrics.contains(&finding), "{metrics}");
    assert_eq!(sample(&metrics, "vllm_diag_diagnosed_groups"), Some(1.0), "{metrics}");
    let scraper = common::PromServer::start_scraping(&serve.addr.to_string(), "1s");
    let scraped = scraper.wait_for_series(&format!("vllm_diag_finding{{rule=\"kv-cache-pressure\",model_name=\"{MODEL}\"}}"), true);
    assert_eq!(scraped.len(), 1, "{scraped:?}");
    assert_eq!((scraped[0].0.get("severity").map(String::as_str), scraped[0].1), (Some("critical"), 1.0), "{scraped:?}");

    // Resolved: a short follow-up to both, and no second diagnosis.
    let resolved = notification("resolved", MODEL, fired, Some(Utc::now())).to_string();
    let (status, answer) = serve.notify(resolved.as_bytes(), Some(&bearer()));
    assert_eq!(status, 202, "{answer}");
    let hook = receiver.wait_for("/hook", 2, Duration::from_secs(30), &serve);
    let follow_up: Value = serde_json::from_str(&hook[1].body).expect("JSON");
    assert_eq!((follow_up["run"]["kind"].as_str(), follow_up["trigger"]["status"].as_str()), (Some("resolved"), Some("resolved")));
    assert!(follow_up.get("findings").is_none());
    let slack = receiver.wait_for("/slack/", 2, Duration::from_secs(30), &serve);
    assert!(slack[1].body.contains("Resolved"), "{}", slack[1].body);
    let (_, metrics) = serve.get("/metrics");
    assert_eq!(sample(&metrics, "vllm_diag_serve_runs_total"), Some(1.0), "{metrics}");
    // Its findings left the page, and Prometheus sees them go (a stale series).
    assert!(!metrics.contains("vllm_diag_finding{"), "{metrics}");
    assert!(scraper.wait_for_series("vllm_diag_finding", false).is_empty());

    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("stopped"), "{log}");
    assert!(!log.contains(TOKEN) && !log.contains("slacksecretpath"), "a secret reached the log:\n{log}");
}

#[test]
fn bad_requests_are_refused_with_the_right_status_and_nothing_is_diagnosed() {
    let receiver = Receiver::start();
    let serve = Serve::start(&dead_backend(), &receiver, &[]);
    let good = notification("firing", MODEL, Utc::now(), None).to_string();

    let (status, answer) = serve.notify(good.as_bytes(), None);
    assert_eq!(status, 401, "{answer}");
    let (status, _) = serve.notify(good.as_bytes(), Some("Bearer wrong-token"));
    assert_eq!(status, 401);
    let (status, _) = serve.notify(good.as_bytes(), Some(&format!("Basic {TOKEN}")));
    assert_eq!(status, 401);

    let (status, answer) = serve.notify(b"{\"version\": \"4\", \"alerts\": [", Some(&bearer()));
    assert_eq!(status, 400, "{answer}");
    assert!(answer["reason"].as_str().unwrap_or_default().contains("not an Alertmanager webhook notification"), "{answer}");
    let v3 = good.replace("\"version\":\"4\"", "\"version\":\"3\"");
    let (status, answer) = serve.notify(v3.as_bytes(), Some(&bearer()));
    assert_eq!(status, 400, "{answer}");
    assert!(answer["reason"].as_str().unwrap_or_default().contains("version"), "{answer}");

    let huge = vec![b' '; 2 * 1024 * 1024];
    let (status, _) = serve.notify(&huge, Some(&bearer()));
    assert_eq!(status, 413);

    let (status, body) = serve.get("/healthz");
    assert_eq!((status, body.trim()), (200, "ok"));
    let (_, metrics) = serve.get("/metrics");
    assert_eq!(sample(&metrics, "vllm_diag_serve_runs_total"), Some(0.0), "{metrics}");
    assert!(metrics.contains("vllm_diag_serve_notifications_total{outcome=\"unauthorized\"} 3"), "{metrics}");
    assert!(metrics.contains("vllm_diag_serve_notifications_total{outcome=\"too_large\"} 1"), "{metrics}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(receiver.hits("/").is_empty(), "nothing may be delivered: {:?}", receiver.hits("/"));
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn a_backend_that_is_down_is_delivered_as_a_failed_run_with_its_exit_code() {
    let receiver = Receiver::start();
    let serve = Serve::start(&dead_backend(), &receiver, &["--timeout", "5s"]);
    let body = notification("firing", MODEL, Utc::now() - chrono::Duration::minutes(3), None).to_string();
    let (status, answer) = serve.notify(body.as_bytes(), Some(&bearer()));
    assert_eq!(status, 202, "{answer}");

    let hook = receiver.wait_for("/hook", 1, Duration::from_secs(60), &serve);
    let envelope: Value = serde_json::from_str(&hook[0].body).expect("JSON");
    assert_eq!(envelope["run"]["status"], "failed", "{envelope:#}");
    assert_eq!(envelope["run"]["exit_code"], 3, "a source that cannot be reached is exit code 3: {envelope:#}");
    assert!(!envelope["run"]["error"].as_str().unwrap_or_default().is_empty(), "{envelope:#}");
    assert!(envelope.get("findings").is_none(), "{envelope:#}");
    assert_eq!(envelope["trigger"]["alerts"][0]["labels"]["model_name"], MODEL);
    let slack = receiver.wait_for("/slack/", 1, Duration::from_secs(30), &serve);
    assert!(slack[0].body.contains("could not diagnose"), "{}", slack[0].body);

    let (_, metrics) = serve.get("/metrics");
    assert_eq!(sample(&metrics, "vllm_diag_serve_failures_total"), Some(1.0), "{metrics}");
    // A failed diagnosis does not hold its group for --dedup: Alertmanager's next notification of
    // it is diagnosed again.
    let (status, answer) = serve.notify(body.as_bytes(), Some(&bearer()));
    assert_eq!((status, answer["status"].as_str()), (202, Some("accepted")), "{answer}");
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
}

/// A backend that takes connections and never answers (a mock: a stuck Prometheus), so that a
/// diagnosis lasts until --timeout.
fn silent_backend() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    format!("http://{addr}")
}

#[test]
fn a_groups_follow_up_is_delivered_after_its_diagnosis_even_when_it_resolves_during_it() {
    let receiver = Receiver::start();
    let serve = Serve::start(&silent_backend(), &receiver, &["--timeout", "4s", "--max-concurrent", "2"]);
    let fired = Utc::now() - chrono::Duration::minutes(3);
    let firing = notification("firing", MODEL, fired, None).to_string();
    let (status, answer) = serve.notify(firing.as_bytes(), Some(&bearer()));
    assert_eq!(status, 202, "{answer}");
    // Resolved while the diagnosis still waits on the backend; a second worker is free to take it.
    std::thread::sleep(Duration::from_millis(300));
    let resolved = notification("resolved", MODEL, fired, Some(Utc::now())).to_string();
    let (status, answer) = serve.notify(resolved.as_bytes(), Some(&bearer()));
    assert_eq!(status, 202, "{answer}");
    let hook = receiver.wait_for("/hook", 2, Duration::from_secs(60), &serve);
    let kinds: Vec<String> =
        hook.iter().map(|h| serde_json::from_str::<Value>(&h.body).expect("JSON")["trigger"]["status"].as_str().unwrap_or_default().to_string()).collect();
    assert_eq!(kinds, ["firing", "resolved"], "the follow-up overtook the diagnosis:\n{}", serve.log());
}

/// A client that sends half a request and waits (a mock of a fault no real sender makes on
/// purpose): its connection is closed after the header timeout, it cannot keep SIGTERM from
/// stopping the service, and it does not stop the service answering others.
#[test]
fn a_client_that_sends_half_a_request_is_cut_off_and_cannot_hold_up_a_stop() {
    use std::io::{Read, Write};
    let receiver = Receiver::start();
    let serve = Serve::start(&dead_backend(), &receiver, &[]);
    let half = |serve: &Serve| {
        let mut c = std::net::TcpStream::connect(serve.addr).expect("connect");
        c.write_all(b"POST /alertmanager HTTP/1.1\r\nHost: x\r\n").expect("send half a request");
        c
    };
    // Cut off after the header timeout (10 s): the read ends (closed, or a 408 then closed).
    let mut slow = half(&serve);
    slow.set_read_timeout(Some(Duration::from_secs(40))).unwrap();
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = slow.read_to_end(&mut rest);
    assert!(started.elapsed() < Duration::from_secs(30), "the half request was held {:?}", started.elapsed());
    // Others are answered meanwhile.
    let _held = half(&serve);
    let (status, _) = serve.get("/healthz");
    assert_eq!(status, 200);
    // SIGTERM with a half request open: the service stops (stop() fails the test after 30 s).
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn a_full_queue_is_answered_503_until_a_worker_is_free() {
    // A backend that accepts connections and never answers: each diagnosis holds its worker until
    // --timeout.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let backend = format!("http://{}", silent.local_addr().expect("address"));
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    std::thread::spawn(move || {
        for s in silent.incoming().flatten() {
            keep.lock().unwrap().push(s);
        }
    });
    let receiver = Receiver::start();
    let serve = Serve::start(&backend, &receiver, &["--timeout", "8s", "--max-concurrent", "1", "--queue", "1"]);
    let send = |model: &str| serve.notify(notification("firing", model, Utc::now(), None).to_string().as_bytes(), Some(&bearer()));
    assert_eq!(send("model-a").0, 202, "the first runs");
    // The first has left the queue once its diagnosis reaches the backend (on a busy machine that
    // took longer than the half second this test used to wait, and the second found the queue full).
    let started = Instant::now();
    while held.lock().unwrap().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(30), "the first diagnosis never reached the backend:\n{}", serve.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(send("model-b").0, 202, "the second waits in the queue");
    let (status, answer) = send("model-c");
    assert_eq!(status, 503, "the third finds the queue full: {answer}");
    assert!(answer["reason"].as_str().unwrap_or_default().contains("--queue 1"), "{answer}");
    // Both accepted groups are diagnosed (and fail: the backend never answers), one after the other.
    let hooks = receiver.wait_for("/hook", 2, Duration::from_secs(90), &serve);
    for h in &hooks {
        let v: Value = serde_json::from_str(&h.body).expect("JSON");
        assert_eq!(v["run"]["status"], "failed", "{v:#}");
    }
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
}

/// A receiver that takes connections and never answers (a mock: a hung webhook endpoint; each
/// delivery to it lasts the client's 15 s timeout, three times). The diagnoses go on meanwhile:
/// with one worker, the next groups are diagnosed at once instead of each waiting about 47 s, and
/// notifications are accepted, not answered 503.
#[test]
fn a_hung_receiver_holds_up_neither_the_diagnoses_nor_the_queue() {
    let hung = Receiver { url: silent_backend(), hits: Arc::new(Mutex::new(Vec::new())) };
    let serve = Serve::start(&dead_backend(), &hung, &["--max-concurrent", "1", "--queue", "2"]);
    let diagnosed = |serve: &Serve| serve.log().matches("vllm-diag serve: diagnosed group").count();
    for (i, model) in ["model-a", "model-b", "model-c"].into_iter().enumerate() {
        let body = notification("firing", model, Utc::now(), None).to_string();
        let (status, answer) = serve.notify(body.as_bytes(), Some(&bearer()));
        assert_eq!(status, 202, "{model}: {answer}\n{}", serve.log());
        let started = Instant::now();
        while diagnosed(&serve) < i + 1 {
            assert!(started.elapsed() < Duration::from_secs(20), "{model} was not diagnosed within 20 s:\n{}", serve.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Two deliveries are in progress (--queue 2); the third diagnosis waits for one to end.
    let (_, metrics) = serve.get("/metrics");
    assert_eq!(sample(&metrics, "vllm_diag_serve_deliveries_pending"), Some(3.0), "{metrics}");
}

// ---------------------------------------------------------------------------------------------
// A real Alertmanager (Debian's prometheus-alertmanager) routing to serve.
// ---------------------------------------------------------------------------------------------

#[test]
fn an_alert_routed_by_a_real_alertmanager_brings_the_diagnosis_to_the_receiver() {
    let prom = incident_now();
    let receiver = Receiver::start();
    let serve = Serve::start(&prom.url, &receiver, &["--timeout", "60s"]);
    let am = Alertmanager::start(&serve.url(), TOKEN);
    let alert = json!([{
        "labels": {"alertname": "VllmKvCachePressure", "model_name": MODEL, "severity": "critical", "vllm_diag_rule": "kv-cache-pressure"},
        "annotations": {"summary": "KV cache nearly full"},
        "startsAt": rfc3339(Utc::now() - chrono::Duration::minutes(5)),
        "generatorURL": format!("{}/graph", prom.url)
    }]);
    assert_eq!(am.post_alerts(&alert), 200);

    let hook = receiver.wait_for("/hook", 1, Duration::from_secs(120), &serve);
    let report: Value = serde_json::from_str(&hook[0].body).expect("the webhook gets JSON");
    let first = &report["findings"][0];
    assert_eq!((first["rule"].as_str(), first["scope"]["model_name"].as_str()), (Some("kv-cache-pressure"), Some(MODEL)), "{report:#}");
    assert_eq!(report["trigger"]["receiver"], "vllm-diag");
    assert_eq!(report["trigger"]["groupLabels"]["model_name"], MODEL);
    assert_eq!(report["trigger"]["version"], "4");
    assert_eq!(report["run"]["selector"], format!("model_name=\"{MODEL}\""));
    let slack = receiver.wait_for("/slack/", 1, Duration::from_secs(30), &serve);
    assert!(slack[0].body.contains("VllmKvCachePressure"), "{}", slack[0].body);
    drop(am);
    let (code, log) = serve.stop();
    assert_eq!(code, 0, "{log}");
}

#[test]
fn settings_that_do_not_apply_or_secrets_that_do_not_read_stop_serve_with_exit_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let not_a_url = write_file(dir.path(), "slack-url", "xoxb-not-a-url-secret\n");
    let empty = write_file(dir.path(), "token", "\n");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--replay".into(), "run.json".into()], "drop --replay"),
        (vec!["--at".into(), "now".into()], "drop --at"),
        (vec!["--slack-webhook-url-file".into(), not_a_url.display().to_string()], "does not hold an http"),
        (vec!["--auth-token-file".into(), empty.display().to_string()], "is empty"),
        (vec!["--webhook-url".into(), "ftp://u:pw@host/x".into()], "give an http"),
    ];
    for (extra, expected) in cases {
        let mut args: Vec<String> = ["serve", "--no-config", "--listen", "127.0.0.1:0"].map(String::from).to_vec();
        args.extend(extra.iter().cloned());
        let out = Command::new(env!("CARGO_BIN_EXE_vllm-diag")).args(&args).stdin(Stdio::null()).output().expect("run vllm-diag");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
        assert!(!stderr.contains("xoxb-not-a-url-secret") && !stderr.contains("pw@"), "a secret reached stderr: {stderr}");
    }
}

#[test]
fn bad_connection_settings_stop_serve_with_exit_2_before_it_listens() {
    for (extra, expected) in
        [(vec!["--prometheus", "localhost:9090"], "no scheme"), (vec!["--header", "bad"], "--header #1"), (vec!["--tenant", "a||b"], "--tenant")]
    {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vllm-diag"))
            .args(["serve", "--no-config", "--listen", "127.0.0.1:0"])
            .args(&extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run vllm-diag");
        // It used to start serving and fail each notification instead: stop it if it does.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break Some(status);
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut stderr = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut stderr).expect("read stderr");
        assert_eq!(status.and_then(|s| s.code()), Some(2), "{extra:?}: still serving, or another exit: {stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    }
}

/// The whole way, with real components only: a real Prometheus evaluates the rules `vllm-diag rules
/// export` wrote over an incident that is happening now, sends the firing alert to a real
/// Alertmanager, which routes it to `vllm-diag serve`, whose ranked diagnosis reaches the receiver.
#[test]
fn an_exported_rule_firing_in_prometheus_reaches_the_receiver_as_a_diagnosis_through_alertmanager() {
    let out = Command::new(env!("CARGO_BIN_EXE_vllm-diag"))
        .args(["rules", "export", "--format", "prometheus", "--for", "0s"])
        .stdin(Stdio::null())
        .output()
        .expect("run rules export");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rules = String::from_utf8(out.stdout).expect("YAML is UTF-8");
    // Evaluated every two seconds rather than the test configuration's minute.
    let rules = rules.replacen("  - name: \"vllm-diag\"\n", "  - name: \"vllm-diag\"\n    interval: 2s\n", 1);
    assert!(rules.contains("interval: 2s"), "the export's group line moved:\n{rules}");

    // Prometheus is told where Alertmanager will listen; Alertmanager starts once serve is up,
    // and serve needs Prometheus' URL.
    let am_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut spec = load_scenario("kv-cache-pressure");
    let total = chrono::Duration::from_std(spec.warmup + spec.baseline + spec.window).expect("scenario length");
    let step = spec.interval.as_secs().max(1) as i64;
    let now = Utc::now().timestamp();
    spec.start = DateTime::from_timestamp(now - now % step, 0).expect("now") - total;
    let extra = format!("rule_files: [vllm-diag.rules.yml]\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am_addr}']\n");
    let prom = PromServer::start_generated_with(&spec, &extra, &[("vllm-diag.rules.yml", &rules)]);
    let receiver = Receiver::start();
    let serve = Serve::start(&prom.url, &receiver, &["--timeout", "60s"]);
    let _am = Alertmanager::start_on(&serve.url(), TOKEN, am_addr);
    // Other alerts of the same incident may arrive first, and in any order: wait for the one under
    // test, however many come before it.
    let started = Instant::now();
    let report: Value = loop {
        let hooks: Vec<Value> = receiver.hits("/hook").iter().filter_map(|h| serde_json::from_str::<Value>(&h.body).ok()).collect();
        if let Some(r) = hooks.iter().find(|r| r["trigger"]["groupLabels"]["alertname"] == "VllmDiagKvCachePressure") {
            break r.clone();
        }
        if started.elapsed() > Duration::from_secs(180) {
            let names: Vec<&Value> = hooks.iter().map(|r| &r["trigger"]["groupLabels"]["alertname"]).collect();
            panic!("the kv-cache-pressure alert did not reach the receiver in 180 s; it got {names:?}; serve's log:\n{}", serve.log());
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let first = &report["findings"][0];
    assert_eq!((first["rule"].as_str(), first["scope"]["model_name"].as_str()), (Some("kv-cache-pressure"), Some(MODEL)), "{report:#}");
    assert_eq!(report["trigger"]["commonLabels"]["vllm_diag_rule"], "kv-cache-pressure");
    assert_eq!(report["trigger"]["commonLabels"]["model_name"], MODEL);
    assert_eq!(report["run"]["selector"], format!("model_name=\"{MODEL}\""));
    // Every alert that fired names the incident's model: nothing fired elsewhere.
    for h in receiver.hits("/hook") {
        let r: Value = serde_json::from_str(&h.body).expect("JSON");
        assert_eq!(r["trigger"]["groupLabels"]["model_name"], MODEL, "an alert fired for another model: {r:#}");
    }
}

// ---------------------------------------------------------------------------------------------
// An alert storm (issue 50, item 4).
// ---------------------------------------------------------------------------------------------

/// The storm's fleet: four models of three replicas, the first out of KV cache, ending now.
const STORM_MODELS: [&str; 4] = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct", "mistralai/Mistral-7B-Instruct-v0.3", "google/gemma-2-9b-it"];
/// Groups in the storm, and how the service is bounded while it lasts.
const STORM_GROUPS: usize = 100;

fn storm_fleet() -> PromServer {
    let mut toml = "name = \"storm\"\nseed = 50\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"60s\"\nwarmup = \"5m\"\nbaseline = \"30m\"\nwindow = \"30m\"\n"
        .to_string();
    for m in STORM_MODELS {
        toml.push_str(&format!("\n[[model]]\nname = \"{m}\"\nreplicas = 3\nrate = 2.0\n"));
    }
    toml.push_str(&format!("\n[incident]\nkind = \"kv-cache-pressure\"\nmodel = \"{}\"\n", STORM_MODELS[0]));
    let mut spec = vllm_diag_sim::ScenarioSpec::from_toml_str(&toml).unwrap_or_else(|e| panic!("storm spec: {e}"));
    let total = chrono::Duration::from_std(spec.warmup + spec.baseline + spec.window).expect("scenario length");
    let now = Utc::now().timestamp();
    spec.start = DateTime::from_timestamp(now - now % 60, 0).expect("now") - total;
    PromServer::start_generated(&spec)
}

/// Group `i` of the storm: its own alert name (so its own group key), one of the fleet's models,
/// firing since 5 to 24 minutes ago (the groups' windows overlap).
fn storm_notification(i: usize, now: DateTime<Utc>) -> Value {
    let model = STORM_MODELS[i % STORM_MODELS.len()];
    let mut n = notification("firing", model, now - chrono::Duration::minutes(5 + (i % 20) as i64), None);
    let alertname = format!("VllmStorm{i:03}");
    n["groupKey"] = Value::from(format!("{{}}:{{alertname=\"{alertname}\", model_name=\"{model}\"}}"));
    n["groupLabels"]["alertname"] = Value::from(alertname.clone());
    n["commonLabels"]["alertname"] = Value::from(alertname.clone());
    n["alerts"][0]["labels"]["alertname"] = Value::from(alertname);
    n
}

/// Prometheus' own evaluation time and query count so far (its /metrics, the `inner_eval` slice).
fn prometheus_work(prom: &PromServer) -> (f64, f64) {
    let (_, text) = prom.get("/metrics").expect("Prometheus' /metrics");
    let read = |name: &str| sample(&text, &format!("{name}{{slice=\"inner_eval\"}}")).unwrap_or(0.0);
    (read("prometheus_engine_query_duration_seconds_sum"), read("prometheus_engine_query_duration_seconds_count"))
}

/// 100 groups fire within a second, each sent by its own thread as Alertmanager sends groups; a
/// 503 (the queue full) is sent again after a pause, as Alertmanager retries a 5xx. Every group's
/// diagnosis reaches the webhook exactly once, none failed, and a group sent again once accepted is
/// a duplicate, not a second diagnosis. Wall time and Prometheus' own work are printed (the storm's
/// benchmark, BENCHMARKS.md), never asserted.
#[test]
fn an_alert_storm_delivers_every_groups_diagnosis_exactly_once() {
    let prom = storm_fleet();
    let receiver = Receiver::start();
    let serve = Arc::new(Serve::start(&prom.url, &receiver, &["--timeout", "120s", "--max-concurrent", "2", "--queue", "16"]));
    let now = Utc::now();
    let before = prometheus_work(&prom);
    let started = Instant::now();
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let senders: Vec<_> = (0..STORM_GROUPS)
        .map(|i| {
            let (serve, refused) = (serve.clone(), refused.clone());
            let body = storm_notification(i, now).to_string();
            std::thread::spawn(move || {
                for _ in 0..600 {
                    let (status, answer) = serve.notify(body.as_bytes(), Some(&bearer()));
                    match status {
                        202 => return answer["group_key"].as_str().unwrap_or_default().to_string(),
                        503 => {
                            refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(500));
                        }
                        _ => panic!("group {i} answered {status}: {answer}"),
                    }
                }
                panic!("group {i} was refused for five minutes");
            })
        })
        .collect();
    let mut accepted: Vec<String> = senders.into_iter().map(|s| s.join().expect("a sender")).collect();
    accepted.sort();
    accepted.dedup();
    assert_eq!(accepted.len(), STORM_GROUPS, "accepted group keys");
    let hooks = receiver.wait_for("/hook", STORM_GROUPS, Duration::from_secs(600), &serve);
    let wall = started.elapsed();
    let after = prometheus_work(&prom);
    // Alertmanager sends an accepted group again (its group_interval, or a retry after a lost
    // answer): a duplicate, not a second diagnosis.
    for i in 0..5 {
        let (status, answer) = serve.notify(storm_notification(i, now).to_string().as_bytes(), Some(&bearer()));
        assert_eq!((status, answer["status"].as_str()), (200, Some("duplicate")), "group {i} sent again: {answer}");
    }
    std::thread::sleep(Duration::from_secs(2));
    let hooks_then = receiver.hits("/hook");
    assert_eq!(hooks_then.len(), hooks.len(), "deliveries after the storm was over");
    let mut delivered: Vec<String> = Vec::new();
    // The diagnoses the deliveries carry: (selector, window's end).
    let mut made: BTreeSet<(String, String)> = BTreeSet::new();
    for h in &hooks_then {
        let doc: Value = serde_json::from_str(&h.body).unwrap_or_else(|e| panic!("a delivery that is not JSON ({e}): {}", h.body));
        assert_eq!(doc["run"]["status"], "diagnosed", "a failed diagnosis: {}", doc["run"]);
        assert!(doc["findings"].is_array(), "a delivery without the report: {}", doc["run"]);
        delivered.push(doc["trigger"]["groupKey"].as_str().unwrap_or_default().to_string());
        let (selector, end) = (doc["run"]["selector"].as_str().unwrap_or_default(), doc["run"]["window_end"].as_str().unwrap_or_default());
        made.insert((selector.to_string(), end.to_string()));
    }
    // Overlapping groups of one model share a diagnosis (--share-within, 60s by default): every
    // group is either a run or a share, and the deliveries carry exactly the runs' windows.
    let (_, page) = serve.get("/metrics");
    let (runs, shared) = (sample(&page, "vllm_diag_serve_runs_total").unwrap_or(-1.0), sample(&page, "vllm_diag_serve_shared_total").unwrap_or(-1.0));
    assert_eq!(runs + shared, STORM_GROUPS as f64, "runs {runs} and shared {shared}:\n{page}");
    assert!(shared > 0.0, "no group shared another's diagnosis:\n{page}");
    assert_eq!(made.len() as f64, runs, "deliveries carry {} distinct (selector, window end) for {runs} runs: {made:?}", made.len());
    delivered.sort();
    let n = delivered.len();
    delivered.dedup();
    assert_eq!(n, delivered.len(), "a group's diagnosis was delivered more than once");
    assert_eq!(delivered, accepted, "the groups delivered are not the groups sent");
    let refused = refused.load(std::sync::atomic::Ordering::Relaxed);
    assert!(refused > 0, "the storm never filled the queue: the test did not exercise the 503s");
    eprintln!(
        "storm: {STORM_GROUPS} groups, {runs} diagnoses run and {shared} shared, {refused} answers 503 (sent again), delivered in {:.1}s; Prometheus: {} queries, {:.2}s of its own evaluation",
        wall.as_secs_f64(),
        after.1 - before.1,
        after.0 - before.0
    );
}

/// `--share-within 0s`: two groups of the same model, sent at once, are two diagnoses of their own.
#[test]
fn with_share_within_zero_every_group_runs_its_own_diagnosis() {
    let prom = storm_fleet();
    let receiver = Receiver::start();
    let serve = Serve::start(&prom.url, &receiver, &["--timeout", "120s", "--share-within", "0s"]);
    let now = Utc::now();
    for i in [0, 4] {
        let (status, answer) = serve.notify(storm_notification(i, now).to_string().as_bytes(), Some(&bearer()));
        assert_eq!(status, 202, "group {i}: {answer}");
    }
    receiver.wait_for("/hook", 2, Duration::from_secs(300), &serve);
    let (_, page) = serve.get("/metrics");
    assert_eq!(sample(&page, "vllm_diag_serve_runs_total"), Some(2.0), "{page}");
    assert_eq!(sample(&page, "vllm_diag_serve_shared_total"), Some(0.0), "{page}");
}
