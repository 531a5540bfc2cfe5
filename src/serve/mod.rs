//! `vllm-diag serve`: diagnoses for Alertmanager notifications, delivered where the incident is
//! handled.
//!
//! A small HTTP service. `POST /alertmanager` takes Alertmanager's webhook notifications (payload
//! version 4, [`alert`]); for each firing group it runs the explain pipeline scoped by the alerts'
//! labels over a window ending now that covers the alerts, and delivers the report ([`deliver`]):
//! to a generic webhook as the `--format json` report with the triggering alerts under `trigger`,
//! and to Slack in the slack format. A resolved group gets a short follow-up. `GET /healthz`
//! answers `ok`; `GET /metrics` tells what the service has done and the findings of the latest
//! diagnosis of every firing group ([`metrics`]).
//!
//! What a service is expected to do with bad input and load: with a token configured, a request
//! without `Authorization: Bearer <token>` gets 401 (compared in constant time); a body over the
//! size cap 413; a body that is not a version 4 notification 400 with the reason; a group
//! diagnosed within the dedup interval is not diagnosed again (200 saying so). Notifications are
//! answered at once (202) and diagnosed by a fixed number of workers from a bounded queue; when
//! the queue is full the answer is 503, and Alertmanager sends again later. Deliveries are tried
//! three times with a growing pause, on their own tasks ([`Outbox`]): a slow or hung receiver
//! holds neither a worker nor the queue, and a group's deliveries still go out in order. On
//! SIGTERM or Ctrl-C the service stops taking notifications, finishes the diagnoses it accepted
//! and their deliveries (within [`DRAIN`]) and exits 0. Secrets (the token, the Slack URL's path,
//! credentials in URLs) never reach a log line.
//!
//! The caller hands over the diagnosis as a closure ([`Diagnose`]): this module knows nothing of
//! the settings or the app, like `watch`.

pub mod alert;
pub mod deliver;
pub mod metrics;
pub mod share;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::error::Failure;
use crate::prom::{redact_text, Selector};
use crate::source::prometheus::Secret;
use alert::{GroupStatus, Notification};
use deliver::{Diagnosis, Retry, RunScope, Target};
use metrics::Metrics;

/// Runs the explain pipeline once: the extra matchers that scope it, the window's end and length.
/// It blocks (the service calls it on a blocking thread).
pub type Diagnose = dyn Fn(&Selector, DateTime<Utc>, Duration) -> Result<Diagnosis, Failure> + Send + Sync;

/// The request body cap when none is configured: a notification of a few hundred alerts fits.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// How long a stopping service waits for the diagnoses it accepted and their deliveries.
pub const DRAIN: Duration = Duration::from_secs(120);

/// How long a client may take to send a request's headers, and then its body. Alertmanager sends a
/// notification at once; a connection that trickles (or sends half a request and waits) would
/// otherwise hold a file descriptor for ever, and enough of them stop the service.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stopping service lets requests in progress finish before it closes their
/// connections: a handler only queues a notification, so this is only ever spent on a client
/// that is slow to send.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// What the service is told.
#[derive(Debug, Clone)]
pub struct Config {
    /// `host:port` to listen on (port 0: any free port; the log line says which).
    pub listen: String,
    pub webhook: Option<Target>,
    pub slack: Option<Target>,
    /// Required as `Authorization: Bearer <token>` on `POST /alertmanager` when set.
    pub auth_token: Option<Secret>,
    /// A group diagnosed this recently is not diagnosed again.
    pub dedup: Duration,
    /// Diagnoses running at once.
    pub max_concurrent: usize,
    /// Notifications waiting for a worker before the service answers 503.
    pub queue: usize,
    /// The shortest window diagnosed.
    pub window: Duration,
    /// A group whose scope and window match a diagnosis started this recently (or still running)
    /// gets that diagnosis rather than a run of its own ([`share`]); zero shares nothing.
    pub share_within: Duration,
    /// The diagnosis' grouping labels, which scope it when the alerts carry them.
    pub group_by: Vec<String>,
    pub body_limit: usize,
    pub retry: Retry,
    /// Chart links in the Slack message, as `--links` gives them to explain.
    pub links: Option<crate::render::links::GraphLinks>,
}

/// One accepted notification.
enum Job {
    Firing(Notification, Selector),
    Resolved(Notification),
}

/// What the request handlers share.
struct Front {
    token: Option<Secret>,
    dedup: Duration,
    /// When each group was last accepted for diagnosis.
    seen: Arc<Mutex<BTreeMap<String, Instant>>>,
    group_by: Vec<String>,
    body_limit: usize,
    queue: mpsc::Sender<Job>,
    queue_len: usize,
    metrics: Arc<Metrics>,
}

/// What the workers share.
struct Worker {
    diagnose: Arc<Diagnose>,
    targets: Vec<Target>,
    window: Duration,
    retry: Retry,
    client: reqwest::Client,
    metrics: Arc<Metrics>,
    links: Option<crate::render::links::GraphLinks>,
    /// Groups being diagnosed, with the resolved notifications that wait for them.
    busy: Mutex<BTreeMap<String, Vec<Notification>>>,
    /// The front's dedup record: a group whose diagnosis failed is forgotten, so Alertmanager's
    /// next notification of it is diagnosed rather than answered "duplicate".
    seen: Arc<Mutex<BTreeMap<String, Instant>>>,
    outbox: Outbox,
    shared: share::Shared,
}

/// Deliveries in progress. Each runs on its own task, so a receiver that is slow or does not
/// answer (each try may take the client's 15 s timeout, three tries) holds neither a worker nor
/// the queue; a group's deliveries still go out in the order they were made, each waiting for the
/// group's one before. At most `permits` deliveries are in progress: past that a worker waits for
/// one to end, the queue fills, and new notifications are answered 503, as when the workers are
/// busy.
struct Outbox {
    permits: Arc<tokio::sync::Semaphore>,
    /// Each group's latest delivery, which the group's next one waits for.
    tails: Mutex<BTreeMap<String, tokio::task::JoinHandle<()>>>,
}

impl Outbox {
    fn new(limit: usize) -> Outbox {
        Outbox { permits: Arc::new(tokio::sync::Semaphore::new(limit.max(1))), tails: Mutex::new(BTreeMap::new()) }
    }

    /// Every delivery still in progress ends (the latest of each group waits for the ones before).
    async fn drain(&self) {
        let tails: Vec<_> = std::mem::take(&mut *self.tails.lock().unwrap_or_else(|e| e.into_inner())).into_values().collect();
        for t in tails {
            let _ = t.await;
        }
    }
}

/// Serve until `shutdown` completes, then finish the accepted diagnoses; `Ok` after a clean stop.
pub async fn run(config: Config, diagnose: Arc<Diagnose>, shutdown: impl std::future::Future<Output = ()> + Send + 'static) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|e| Failure::Usage(format!("--listen {}: cannot listen there: {e}. Give a free host:port, e.g. 127.0.0.1:9095", config.listen)))?;
    let addr = listener.local_addr().map_err(|e| Failure::Output(format!("--listen {}: {e}", config.listen)))?;
    let targets: Vec<Target> = config.webhook.iter().chain(config.slack.iter()).cloned().collect();
    let metrics = Arc::new(Metrics::new(&targets.iter().map(|t| t.name).collect::<Vec<_>>()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        // A redirect would resend the diagnosis to wherever it points: a 3xx is a failed delivery.
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("vllm-diag/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| Failure::Output(format!("cannot build the HTTP client for deliveries: {e}")))?;
    let (tx, rx) = mpsc::channel(config.queue.max(1));
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let shown: Vec<&str> = targets.iter().map(|t| t.shown.as_str()).collect();
    // When each group was last accepted; shared so that a failed diagnosis can forget its group.
    let seen = Arc::new(Mutex::new(BTreeMap::new()));
    let worker = Arc::new(Worker {
        diagnose,
        targets: targets.clone(),
        window: config.window,
        retry: config.retry,
        client,
        metrics: metrics.clone(),
        links: config.links.clone(),
        busy: Mutex::new(BTreeMap::new()),
        seen: seen.clone(),
        outbox: Outbox::new(config.queue),
        shared: share::Shared::new(config.share_within),
    });
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..config.max_concurrent.max(1) {
        workers.spawn(work(worker.clone(), rx.clone()));
    }
    let front = Arc::new(Front {
        token: config.auth_token.clone(),
        dedup: config.dedup,
        seen: seen.clone(),
        group_by: config.group_by.clone(),
        body_limit: config.body_limit,
        queue: tx,
        queue_len: config.queue,
        metrics,
    });
    let app = Router::new()
        .route("/alertmanager", post(alertmanager))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics_page))
        .with_state(front);
    eprintln!(
        "vllm-diag serve: listening on http://{addr} (POST /alertmanager, GET /healthz, GET /metrics); delivering to {}",
        if shown.is_empty() { "nothing (no --webhook-url or --slack-webhook-url-file): diagnoses are only logged".to_string() } else { shown.join(" and ") }
    );
    serve_connections(listener, app, shutdown).await;
    eprintln!("vllm-diag serve: no longer taking notifications; finishing the diagnoses accepted");
    let drained = tokio::time::timeout(DRAIN, async {
        while workers.join_next().await.is_some() {}
        worker.outbox.drain().await;
    })
    .await;
    if drained.is_err() {
        eprintln!("vllm-diag serve: gave up waiting for diagnoses and deliveries after {}s", DRAIN.as_secs());
    }
    eprintln!("vllm-diag serve: stopped");
    Ok(())
}

/// `explain --watch --metrics-listen`: GET /metrics (the watch's page, [`Metrics::render_watch`])
/// and GET /healthz on `listen`, served on `runtime` for as long as the process runs. Returns the
/// address bound (port 0 picks a free one).
pub fn start_findings_page(listen: &str, metrics: Arc<Metrics>, runtime: &tokio::runtime::Handle) -> Result<std::net::SocketAddr, Failure> {
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(listen))
        .map_err(|e| Failure::Usage(format!("--metrics-listen {listen}: cannot listen there: {e}. Give a free host:port, e.g. 127.0.0.1:9464")))?;
    let addr = listener.local_addr().map_err(|e| Failure::Output(format!("--metrics-listen {listen}: {e}")))?;
    let page = move || {
        let metrics = metrics.clone();
        async move { ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], metrics.render_watch()).into_response() }
    };
    let app = Router::new().route("/metrics", get(page)).route("/healthz", get(|| async { "ok\n" }));
    runtime.spawn(serve_connections(listener, app, std::future::pending::<()>()));
    Ok(addr)
}

/// Accept connections until `shutdown` completes, each served by hyper with [`REQUEST_TIMEOUT`]
/// for its headers; then close them, giving requests in progress [`CLOSE_GRACE`]. (axum::serve
/// has no header timeout and waits for every connection to end on its own.)
async fn serve_connections(listener: tokio::net::TcpListener, app: Router, shutdown: impl std::future::Future<Output = ()> + Send + 'static) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let (stop, stopping) = tokio::sync::watch::channel(false);
    let mut connections = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // Out of file descriptors, say: let connections end before accepting more.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut stopping = stopping.clone();
        connections.spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder.timer(TokioTimer::new()).header_read_timeout(REQUEST_TIMEOUT);
            let conn = builder.serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopping.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
                }
            }
        });
        while connections.try_join_next().is_some() {}
    }
    let _ = stop.send(true);
    // Each connection closes within CLOSE_GRACE of the signal; this bound only guards against one
    // that does not.
    let _ = tokio::time::timeout(CLOSE_GRACE + Duration::from_secs(1), async { while connections.join_next().await.is_some() {} }).await;
}

/// Wait for Ctrl-C or SIGTERM.
/// Waits for Ctrl-C or SIGTERM, then says so as `vllm-diag <who>` (`serve`, `mcp`).
pub async fn stop_signal(who: &'static str) {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    eprintln!("vllm-diag {who}: stopping (signal received)");
}

/// Whether `listen` (host:port) can only be reached from this machine: a loopback address or
/// `localhost`. Anything else (0.0.0.0, a host's address, a name that may resolve elsewhere) is
/// reachable from outside.
pub fn loopback_only(listen: &str) -> bool {
    if let Ok(addr) = listen.parse::<std::net::SocketAddr>() {
        return addr.ip().is_loopback();
    }
    let host = listen.rsplit_once(':').map_or(listen, |(h, _)| h).trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A server that holds the metrics backend's credentials refuses an address reachable from
/// outside without a token, unless told `--allow-unauthenticated-remote`: the error says what to do.
pub fn check_exposure(who: &str, listen: &str, has_token: bool, allowed: bool) -> Result<(), String> {
    if has_token || allowed || loopback_only(listen) {
        return Ok(());
    }
    Err(format!(
        "vllm-diag {who}: --listen {listen} can be reached from other machines and no --auth-token-file is given: anyone who reaches it could run diagnoses with this server's metrics credentials. Give --auth-token-file FILE, listen on a loopback address (127.0.0.1:PORT), or pass --allow-unauthenticated-remote to accept that"
    ))
}

/// A JSON answer.
fn answer(status: StatusCode, body: Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], format!("{body}\n")).into_response()
}

/// Whether the request carries `Authorization: Bearer <token>`: the scheme in any case (RFC 7235;
/// Alertmanager sends `authorization.type` as written), the token compared in constant time.
pub fn authorized(headers: &HeaderMap, token: &Secret) -> bool {
    use subtle::ConstantTimeEq;
    headers.get_all(header::AUTHORIZATION).iter().any(|v| {
        let v = v.as_bytes();
        v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ") && bool::from(v[7..].ct_eq(token.expose().as_bytes()))
    })
}

/// Why a body could not be read.
enum BodyError {
    TooLarge,
    Broken(String),
}

/// The body, up to `limit` bytes.
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<axum::body::Bytes, BodyError> {
    use http_body_util::BodyExt;
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    let collected = tokio::time::timeout(REQUEST_TIMEOUT, http_body_util::Limited::new(body, limit).collect())
        .await
        .map_err(|_| BodyError::Broken(format!("the body did not arrive within {}s", REQUEST_TIMEOUT.as_secs())))?;
    match collected {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(BodyError::TooLarge),
        Err(e) => Err(BodyError::Broken(e.to_string())),
    }
}

async fn alertmanager(State(front): State<Arc<Front>>, headers: HeaderMap, body: Body) -> Response {
    let m = &front.metrics;
    if let Some(token) = &front.token {
        if !authorized(&headers, token) {
            m.notification("unauthorized");
            let mut r = answer(
                StatusCode::UNAUTHORIZED,
                json!({"status": "unauthorized", "reason": "send Authorization: Bearer <token> with the token of --auth-token-file (Alertmanager: http_config.authorization.credentials_file)"}),
            );
            r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    let bytes = match read_body(&headers, body, front.body_limit).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            m.notification("too_large");
            let reason = format!("the body is over the {} byte limit", front.body_limit);
            return answer(StatusCode::PAYLOAD_TOO_LARGE, json!({"status": "too_large", "reason": reason}));
        }
        Err(BodyError::Broken(e)) => {
            m.notification("bad_request");
            return answer(StatusCode::BAD_REQUEST, json!({"status": "bad_request", "reason": format!("cannot read the body: {e}")}));
        }
    };
    let n = match Notification::parse(&bytes) {
        Ok(n) => n,
        Err(reason) => {
            m.notification("bad_request");
            return answer(StatusCode::BAD_REQUEST, json!({"status": "bad_request", "reason": reason}));
        }
    };
    match n.group_status() {
        Ok(GroupStatus::Resolved) => accept_resolved(&front, n),
        _ => accept_firing(&front, n),
    }
}

/// Queue a firing group's diagnosis, unless it was diagnosed within the dedup interval.
fn accept_firing(front: &Front, n: Notification) -> Response {
    let m = &front.metrics;
    let key = n.group_key.clone();
    let Ok(mut seen) = front.seen.lock() else {
        return answer(StatusCode::INTERNAL_SERVER_ERROR, json!({"status": "error", "reason": "internal state unavailable"}));
    };
    let now = Instant::now();
    seen.retain(|_, at| now.duration_since(*at) < front.dedup);
    if let Some(at) = seen.get(&key) {
        m.notification("duplicate");
        let ago = now.duration_since(*at).as_secs();
        let note = format!(
            "group {key} was accepted for diagnosis {ago}s ago, within --dedup {}: not diagnosed again",
            humantime::format_duration(Duration::from_secs(front.dedup.as_secs()))
        );
        eprintln!("vllm-diag serve: {}", redact_text(&crate::text::one_line(&note)));
        return answer(StatusCode::OK, json!({"status": "duplicate", "note": note}));
    }
    let selector = n.scope(&front.group_by);
    let shown = selector.to_promql();
    match front.queue.try_send(Job::Firing(n, selector)) {
        Ok(()) => {
            seen.insert(key.clone(), now);
            m.notification("accepted");
            eprintln!("vllm-diag serve: accepted group {}: diagnosing {{{}}}", logged(&key), logged(&shown));
            answer(StatusCode::ACCEPTED, json!({"status": "accepted", "group_key": key, "selector": shown}))
        }
        Err(e) => busy(front, e),
    }
}

/// Queue a resolved group's follow-up; the group may be diagnosed again as soon as it fires again.
fn accept_resolved(front: &Front, n: Notification) -> Response {
    if let Ok(mut seen) = front.seen.lock() {
        seen.remove(&n.group_key);
    }
    let key = n.group_key.clone();
    match front.queue.try_send(Job::Resolved(n)) {
        Ok(()) => {
            front.metrics.notification("resolved");
            answer(StatusCode::ACCEPTED, json!({"status": "accepted", "group_key": key, "kind": "resolved"}))
        }
        Err(e) => busy(front, e),
    }
}

/// Text a client sent (a group key, label values) as it goes into a log line: on one line and
/// without control characters, so it cannot forge a line of its own or drive a terminal.
fn logged(s: &str) -> String {
    crate::text::one_line(s)
}

/// The 503 for a full (or closing) queue.
fn busy(front: &Front, e: mpsc::error::TrySendError<Job>) -> Response {
    front.metrics.notification("queue_full");
    let reason = match e {
        mpsc::error::TrySendError::Full(_) => format!("{} notifications are waiting already (--queue {}): try again later", front.queue_len, front.queue_len),
        mpsc::error::TrySendError::Closed(_) => "the service is stopping".to_string(),
    };
    eprintln!("vllm-diag serve: refused a notification: {reason}");
    let mut r = answer(StatusCode::SERVICE_UNAVAILABLE, json!({"status": "busy", "reason": reason}));
    r.headers_mut().insert(header::RETRY_AFTER, header::HeaderValue::from_static("30"));
    r
}

async fn metrics_page(State(front): State<Arc<Front>>) -> Response {
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], front.metrics.render()).into_response()
}

/// A worker: take jobs until the queue closes and is empty. A group's follow-up never overtakes
/// its diagnosis: a resolved notification taken while another worker still diagnoses the group
/// waits for that worker, which sends it after its own delivery. (Jobs are taken in order under
/// the queue's lock, so the group is marked busy before its follow-up can be taken.)
async fn work(worker: Arc<Worker>, rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Job>>>) {
    loop {
        let job = {
            let mut rx = rx.lock().await;
            let job = rx.recv().await;
            let mut busy = worker.busy.lock().unwrap_or_else(|e| e.into_inner());
            match job {
                Some(Job::Firing(n, selector)) => {
                    busy.entry(n.group_key.clone()).or_default();
                    Some(Job::Firing(n, selector))
                }
                Some(Job::Resolved(n)) => match busy.get_mut(&n.group_key) {
                    Some(waiting) => {
                        waiting.push(n);
                        continue;
                    }
                    None => Some(Job::Resolved(n)),
                },
                None => None,
            }
        };
        match job {
            Some(Job::Firing(n, selector)) => {
                let key = n.group_key.clone();
                worker.diagnose_and_deliver(n, selector).await;
                let waiting = worker.busy.lock().unwrap_or_else(|e| e.into_inner()).remove(&key).unwrap_or_default();
                for resolved in waiting {
                    worker.follow_up(resolved).await;
                }
            }
            Some(Job::Resolved(n)) => worker.follow_up(n).await,
            None => break,
        }
    }
}

impl Worker {
    async fn diagnose_and_deliver(self: &Arc<Self>, n: Notification, selector: Selector) {
        let now = Utc::now();
        let window = n.window(now, self.window);
        let started = Instant::now();
        let claim = self.shared.claim(&selector.to_promql(), window, now);
        let (outcome, end, shared_from) = match claim {
            share::Source::Wait(waiter) => {
                let end = waiter.end;
                match waiter.wait().await {
                    Some(d) => (Ok(d), end, true),
                    // The diagnosis it waited for failed: this group runs its own.
                    None => (self.run_diagnosis(&selector, now, window).await, now, false),
                }
            }
            share::Source::Make(maker) => {
                let outcome = self.run_diagnosis(&selector, now, window).await;
                maker.finish(outcome.as_ref().ok());
                (outcome, now, false)
            }
        };
        if shared_from {
            self.metrics.shared();
        } else {
            self.metrics.run(started.elapsed(), outcome.is_err());
        }
        let scope = RunScope { selector, window, end };
        match &outcome {
            // The group's findings on /metrics are this diagnosis's now.
            Ok(d) => self.metrics.diagnosed(&n.group_key, &d.report, Utc::now().timestamp() as f64),
            // No report: the group's earlier findings are not shown as if they still held.
            Err(_) => self.metrics.resolved(&n.group_key),
        }
        if outcome.is_err() {
            self.seen.lock().unwrap_or_else(|e| e.into_inner()).remove(&n.group_key);
        }
        let what = match &outcome {
            Ok(d) => match d.report.findings.first() {
                Some(f) => format!("first finding {} ({}), exit code {}", f.rule, f.severity, d.exit_code),
                None => format!("no finding, exit code {}", d.exit_code),
            },
            Err(e) => format!("failed (exit code {}): {}", e.exit_code(), redact_text(&e.to_string())),
        };
        if shared_from {
            let end = end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            eprintln!("vllm-diag serve: group {} shares the diagnosis of its scope and window ending {end}: {}", logged(&n.group_key), logged(&what));
        } else {
            eprintln!("vllm-diag serve: diagnosed group {} in {:.1}s: {}", logged(&n.group_key), started.elapsed().as_secs_f64(), logged(&what));
        }
        let webhook = deliver::envelope(&n, &scope, &outcome);
        let slack = json!({ "text": deliver::slack_text(&n, &scope, &outcome, Utc::now(), self.links.as_ref()) });
        self.deliver(&n.group_key, webhook, slack).await;
    }

    /// One diagnosis of `selector` over `window` ending `end`, on a blocking thread.
    async fn run_diagnosis(&self, selector: &Selector, end: DateTime<Utc>, window: Duration) -> Result<Diagnosis, Failure> {
        let (d, sel) = (self.diagnose.clone(), selector.clone());
        tokio::task::spawn_blocking(move || d(&sel, end, window))
            .await
            .unwrap_or_else(|e| Err(Failure::Output(format!("the diagnosis stopped unexpectedly: {e}"))))
    }

    async fn follow_up(self: &Arc<Self>, n: Notification) {
        self.metrics.resolved(&n.group_key);
        let text = deliver::resolved_text(&n);
        eprintln!("vllm-diag serve: group {} resolved", logged(&n.group_key));
        let webhook = deliver::resolved_envelope(&n, &text);
        let slack = json!({ "text": text });
        self.deliver(&n.group_key, webhook, slack).await;
    }

    /// Hand the delivery to the outbox, after the group's delivery before it; returns once it is
    /// handed over (which waits only when the outbox is full).
    async fn deliver(self: &Arc<Self>, group: &str, webhook: Value, slack: Value) {
        if self.targets.is_empty() {
            return;
        }
        self.metrics.delivery_queued();
        let Ok(permit) = self.outbox.permits.clone().acquire_owned().await else {
            // The semaphore is never closed; if it were, there would be nothing to wait for.
            self.metrics.delivery_ended();
            return;
        };
        let mut tails = self.outbox.tails.lock().unwrap_or_else(|e| e.into_inner());
        tails.retain(|_, t| !t.is_finished());
        let before = tails.remove(group);
        let (worker, key) = (self.clone(), group.to_string());
        let task = tokio::spawn(async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            worker.send(&key, &webhook, &slack).await;
            worker.metrics.delivery_ended();
            drop(permit);
        });
        tails.insert(group.to_string(), task);
    }

    /// Send to every target at once; log and count each result.
    async fn send(&self, group: &str, webhook: &Value, slack: &Value) {
        let sends = self.targets.iter().map(|t| async move {
            let body = if t.name == "slack" { slack } else { webhook };
            (t, deliver::post(&self.client, t, body, self.retry).await)
        });
        for (t, result) in futures::future::join_all(sends).await {
            self.metrics.delivery(t.name, result.is_ok());
            if let Err(e) = result {
                eprintln!("vllm-diag serve: delivery of group {} failed: {e}", logged(group));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_serve_without_a_token_unless_told() {
        for ok in ["127.0.0.1:9095", "127.0.0.1:0", "[::1]:9095", "localhost:9095", "LOCALHOST:1"] {
            assert!(loopback_only(ok), "{ok}");
            assert!(check_exposure("serve", ok, false, false).is_ok());
        }
        for exposed in ["0.0.0.0:9095", "0.0.0.0:0", "[::]:9095", "10.0.0.5:9095", "myhost:9095", ":9095"] {
            assert!(!loopback_only(exposed), "{exposed}");
            let err = check_exposure("mcp", exposed, false, false).unwrap_err();
            assert!(err.starts_with("vllm-diag mcp: --listen "), "{err}");
            assert!(err.contains("--auth-token-file") && err.contains("--allow-unauthenticated-remote"), "{err}");
            assert!(check_exposure("mcp", exposed, true, false).is_ok(), "a token makes it safe");
            assert!(check_exposure("mcp", exposed, false, true).is_ok(), "told explicitly");
        }
    }

    #[test]
    fn a_group_key_cannot_forge_a_log_line() {
        let key = "{}:{a=\"x\"}\nvllm-diag serve: accepted group FAKE\u{1b}[31m";
        assert_eq!(logged(key), "{}:{a=\"x\"} vllm-diag serve: accepted group FAKE\u{FFFD}[31m");
    }

    #[test]
    fn only_the_exact_bearer_token_is_authorized() {
        let token = Secret::new("s3cret");
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, header::HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(authorized(&with("Bearer s3cret"), &token));
        assert!(authorized(&with("bearer s3cret"), &token) && authorized(&with("BEARER s3cret"), &token));
        assert!(!authorized(&with("Bearer s3cre"), &token));
        assert!(!authorized(&with("Bearer s3cret2"), &token));
        assert!(!authorized(&with("Basic s3cret"), &token));
        assert!(!authorized(&HeaderMap::new(), &token));
    }
}
