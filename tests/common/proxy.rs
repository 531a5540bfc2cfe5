//! A loopback HTTP proxy in front of a real Prometheus that a test can make misbehave.
//!
//! Faults worth testing happen between vllm-diag and the server: a proxy answers 503 or an HTML page,
//! a load balancer resets the connection, a gateway cuts a body short, the server dies mid-run or is
//! too slow. A real Prometheus cannot be asked to do any of that on cue, so [`FaultProxy`] forwards
//! every request to one and applies [`Rule`]s to the ones they match: delay, replace, truncate, cut,
//! reset, flood, edit the JSON, or kill the server. Everything not matched is forwarded untouched, so
//! the rest of a run talks to the real server.
//!
//! Each connection carries one request (the proxy answers `Connection: close`), which keeps the proxy
//! small: plain threads, no HTTP library, HTTP/1.0 to the upstream so its answer ends at EOF.
//! Loops are bounded (the flood stops at a fixed size, delays wake up when the proxy is dropped).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Which requests a rule applies to. Matched against the method, path and decoded parameters
/// (query string and form body), e.g. `query=histogram_quantile(0.95, ...`.
#[derive(Clone, Debug)]
pub enum Match {
    Any,
    /// The path contains this (`/api/v1/query`, `/label/`).
    Path(&'static str),
    /// The decoded parameters contain this text (a metric name, a function).
    Param(String),
    /// Instant and range queries (not label lookups).
    Queries,
    /// Instant and range queries whose decoded parameters do not contain this text.
    QueriesWithout(&'static str),
}

/// What to do with a matched request.
#[derive(Clone)]
pub enum Action {
    /// Pass it on unchanged.
    Forward,
    /// Wait, then pass it on (the client may have given up by then).
    Delay(Duration),
    /// Answer by ourselves: status, content type, body, extra headers.
    Reply { status: u16, content_type: &'static str, body: String, headers: Vec<(String, String)> },
    /// Forward, then send the first N bytes of the body with a Content-Length that says N: a body
    /// that is complete as HTTP but cut as JSON.
    TruncateBody(usize),
    /// Forward, then send the headers (promising the whole body) and only N bytes, and close.
    CutAfter(usize),
    /// Reset the connection (TCP RST) without answering.
    Reset,
    /// Answer 200 with an endless, valid-looking JSON vector until the client stops reading (or
    /// 256 MiB were sent).
    Flood,
    /// Forward and rewrite the upstream body.
    Edit(Arc<dyn Fn(&str) -> String + Send + Sync>),
    /// Kill the upstream server (the proxy's kill hook), reset this connection and every one after
    /// it, and stop listening: from the client's side, the server died.
    Die,
}

impl Action {
    /// Answer by ourselves with this status, content type and body, and no extra headers.
    pub fn reply(status: u16, content_type: &'static str, body: &str) -> Action {
        Action::Reply { status, content_type, body: body.to_string(), headers: Vec::new() }
    }
}

/// A rule: when it matches, what to do, and for how many requests (None: all of them).
#[derive(Clone)]
pub struct Rule {
    pub when: Match,
    pub action: Action,
    pub times: Option<usize>,
}

impl Rule {
    pub fn always(when: Match, action: Action) -> Rule {
        Rule { when, action, times: None }
    }

    pub fn times(n: usize, when: Match, action: Action) -> Rule {
        Rule { when, action, times: Some(n) }
    }
}

/// One request as the proxy saw it, and what it did.
#[derive(Clone, Debug)]
pub struct SeenRequest {
    pub method: String,
    pub path: String,
    /// Decoded parameters, `k=v` joined by `&`.
    pub params: String,
    pub headers: Vec<(String, String)>,
    /// Index of the rule applied, None when forwarded by default.
    pub rule: Option<usize>,
}

impl SeenRequest {
    /// The value of a request header, its name matched in any case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Assert that there were requests in `seen` and that every one carried each of `headers` (name,
/// value; names match in any case).
pub fn assert_all_carry(seen: &[SeenRequest], headers: &[(&str, &str)]) {
    assert!(!seen.is_empty());
    for s in seen {
        for (name, value) in headers {
            assert_eq!(s.header(name), Some(*value), "{name}: {s:?}");
        }
    }
}

type KillHook = Box<dyn FnOnce() + Send>;

struct Shared {
    upstream: SocketAddr,
    rules: Mutex<Vec<Rule>>,
    seen: Mutex<Vec<SeenRequest>>,
    stop: AtomicBool,
    dead: AtomicBool,
    kill: Mutex<Option<KillHook>>,
}

/// The proxy; stops accepting and wakes its sleeping threads when dropped.
pub struct FaultProxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// Start a proxy to `upstream` (a `http://host:port` base URL) with these rules, first match wins.
    pub fn start(upstream: &str, rules: Vec<Rule>) -> FaultProxy {
        let upstream_addr: SocketAddr = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .parse()
            .unwrap_or_else(|e| panic!("proxy upstream {upstream:?} is not http://ip:port: {e}"));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("proxy cannot bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("proxy has no address: {e}"));
        listener.set_nonblocking(true).unwrap_or_else(|e| panic!("proxy listener: {e}"));
        let shared = Arc::new(Shared {
            upstream: upstream_addr,
            rules: Mutex::new(rules),
            seen: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            kill: Mutex::new(None),
        });
        let s = shared.clone();
        std::thread::spawn(move || accept_loop(listener, s));
        FaultProxy { url: format!("http://{addr}"), shared }
    }

    /// Start a proxy to `upstream` with one rule: every request that matches `when` gets `action`.
    pub fn always(upstream: &str, when: Match, action: Action) -> FaultProxy {
        FaultProxy::start(upstream, vec![Rule::always(when, action)])
    }

    /// What `Action::Die` runs before the proxy goes dark (e.g. killing the real Prometheus).
    pub fn on_die(&self, hook: impl FnOnce() + Send + 'static) {
        *self.shared.kill.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(hook));
    }

    /// Every request seen so far, in arrival order.
    pub fn seen(&self) -> Vec<SeenRequest> {
        self.shared.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many requests a rule was applied to.
    pub fn applied(&self, rule: usize) -> usize {
        self.seen().iter().filter(|s| s.rule == Some(rule)).count()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        if shared.stop.load(Ordering::SeqCst) || shared.dead.load(Ordering::SeqCst) {
            return; // dropping the listener: later connections are refused
        }
        match listener.accept() {
            Ok((sock, _)) => {
                let s = shared.clone();
                std::thread::spawn(move || handle(sock, s));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

struct RawRequest {
    head: String,
    body: Vec<u8>,
}

fn read_request(sock: &mut TcpStream) -> Option<RawRequest> {
    sock.set_nonblocking(false).ok()?;
    sock.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = sock.read(&mut chunk).ok()?;
        if n == 0 || buf.len() > (1 << 20) {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(RawRequest { head, body })
}

fn decode_params(s: &str) -> String {
    url::form_urlencoded::parse(s.as_bytes()).map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("&")
}

fn describe(req: &RawRequest) -> SeenRequest {
    let mut lines = req.head.split("\r\n");
    let first = lines.next().unwrap_or("");
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("").to_string();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    let mut params = decode_params(query);
    let body = decode_params(&String::from_utf8_lossy(&req.body));
    if !body.is_empty() {
        if !params.is_empty() {
            params.push('&');
        }
        params.push_str(&body);
    }
    SeenRequest { method, path: path.to_string(), params, headers, rule: None }
}

fn matches(m: &Match, seen: &SeenRequest) -> bool {
    match m {
        Match::Any => true,
        Match::Path(p) => seen.path.contains(p),
        Match::Param(t) => seen.params.contains(t.as_str()),
        Match::Queries => seen.path.ends_with("/query") || seen.path.ends_with("/query_range"),
        Match::QueriesWithout(t) => (seen.path.ends_with("/query") || seen.path.ends_with("/query_range")) && !seen.params.contains(t),
    }
}

fn handle(mut sock: TcpStream, shared: Arc<Shared>) {
    let Some(req) = read_request(&mut sock) else { return };
    let mut seen = describe(&req);
    if shared.dead.load(Ordering::SeqCst) {
        reset(sock);
        return;
    }
    let action = {
        let mut rules = shared.rules.lock().unwrap_or_else(|p| p.into_inner());
        let mut chosen = None;
        for (i, r) in rules.iter_mut().enumerate() {
            if r.times == Some(0) || !matches(&r.when, &seen) {
                continue;
            }
            if let Some(t) = r.times.as_mut() {
                *t -= 1;
            }
            if matches!(r.action, Action::Die) {
                // Decided under the lock: every request matched after this one finds the server dead.
                shared.dead.store(true, Ordering::SeqCst);
            }
            chosen = Some((i, r.action.clone()));
            break;
        }
        if chosen.is_none() && shared.dead.load(Ordering::SeqCst) {
            chosen = Some((usize::MAX, Action::Reset));
        }
        chosen
    };
    if shared.dead.load(Ordering::SeqCst) && !matches!(action, Some((_, Action::Die))) {
        reset(sock);
        return;
    }
    seen.rule = action.as_ref().map(|(i, _)| *i);
    shared.seen.lock().unwrap_or_else(|p| p.into_inner()).push(seen);
    let action = action.map(|(_, a)| a).unwrap_or(Action::Forward);

    match action {
        Action::Forward => forward(sock, &shared, &req, |r| r),
        Action::Delay(d) => {
            let until = Instant::now() + d;
            while Instant::now() < until {
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            forward(sock, &shared, &req, |r| r)
        }
        Action::Reply { status, content_type, body, headers } => {
            let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
            let text = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
                reason(status),
                body.len()
            );
            let _ = sock.write_all(text.as_bytes());
            let _ = sock.write_all(body.as_bytes());
            let _ = sock.flush();
            let _ = sock.shutdown(Shutdown::Both);
        }
        Action::TruncateBody(n) => forward(sock, &shared, &req, |mut r| {
            r.body.truncate(n);
            r
        }),
        Action::CutAfter(n) => {
            let Some(resp) = upstream(&shared, &req) else {
                reset(sock);
                return;
            };
            let head = response_head(&resp, resp.body.len());
            let _ = sock.write_all(head.as_bytes());
            let _ = sock.write_all(&resp.body[..n.min(resp.body.len())]);
            let _ = sock.flush();
            let _ = sock.shutdown(Shutdown::Both);
        }
        Action::Reset => reset(sock),
        Action::Flood => flood(sock, &shared),
        Action::Edit(f) => forward(sock, &shared, &req, |mut r| {
            r.body = f(&String::from_utf8_lossy(&r.body)).into_bytes();
            r
        }),
        Action::Die => {
            if let Some(hook) = shared.kill.lock().unwrap_or_else(|p| p.into_inner()).take() {
                hook();
            }
            reset(sock);
        }
    }
}

/// Close with RST: SO_LINGER 0, then drop.
fn reset(sock: TcpStream) {
    let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
    drop(sock);
}

struct Upstream {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

/// Send the request to the real server as HTTP/1.0 without compression; read to EOF.
fn upstream(shared: &Shared, req: &RawRequest) -> Option<Upstream> {
    let mut lines = req.head.split("\r\n");
    let first = lines.next()?;
    let first = first.rsplit_once(' ').map(|(a, _)| format!("{a} HTTP/1.0")).unwrap_or_else(|| first.to_string());
    let kept: Vec<&str> = lines
        .filter(|l| {
            let name = l.split(':').next().unwrap_or("").trim().to_ascii_lowercase();
            !matches!(name.as_str(), "connection" | "accept-encoding" | "keep-alive")
        })
        .collect();
    let mut head = format!("{first}\r\n");
    for l in kept {
        head.push_str(l);
        head.push_str("\r\n");
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut up = TcpStream::connect_timeout(&shared.upstream, Duration::from_secs(5)).ok()?;
    up.set_read_timeout(Some(Duration::from_secs(120))).ok()?;
    up.write_all(head.as_bytes()).ok()?;
    up.write_all(&req.body).ok()?;
    let mut raw = Vec::new();
    up.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .filter(|(k, _)| !matches!(k.to_ascii_lowercase().as_str(), "connection" | "content-length" | "transfer-encoding"))
        .collect();
    Some(Upstream { status, headers, body: raw[split + 4..].to_vec() })
}

fn response_head(r: &Upstream, content_length: usize) -> String {
    let mut head = format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
    for (k, v) in &r.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {content_length}\r\nConnection: close\r\n\r\n"));
    head
}

fn forward(mut sock: TcpStream, shared: &Shared, req: &RawRequest, edit: impl FnOnce(Upstream) -> Upstream) {
    let Some(resp) = upstream(shared, req) else {
        // What a real reverse proxy does when its upstream is gone.
        let body = "<html><head><title>502 Bad Gateway</title></head><body>upstream unavailable</body></html>";
        let _ = write!(sock, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        return;
    };
    if shared.dead.load(Ordering::SeqCst) {
        reset(sock);
        return;
    }
    let resp = edit(resp);
    let head = response_head(&resp, resp.body.len());
    let _ = sock.write_all(head.as_bytes());
    let _ = sock.write_all(&resp.body);
    let _ = sock.flush();
    let _ = sock.shutdown(Shutdown::Both);
}

fn flood(mut sock: TcpStream, shared: &Shared) {
    const LIMIT: usize = 256 << 20;
    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    if sock.write_all(head.as_bytes()).is_err() {
        return;
    }
    let start = r#"{"status":"success","data":{"resultType":"vector","result":["#;
    let sample = r#"{"metric":{"model_name":"m","instance":"replica-0000"},"value":[1700000000,"1"]},"#;
    let block: String = sample.repeat(1000);
    let mut sent = 0usize;
    let mut first = true;
    while sent < LIMIT && !shared.stop.load(Ordering::SeqCst) {
        let piece = if first { format!("{start}{block}") } else { block.clone() };
        first = false;
        if write!(sock, "{:x}\r\n{piece}\r\n", piece.len()).is_err() {
            return;
        }
        sent += piece.len();
    }
    let _ = sock.write_all(b"0\r\n\r\n");
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}
