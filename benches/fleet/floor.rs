//! The floor: the very requests an explain run made, sent by the smallest client that can send
//! them, so "explain / floor" is what vllm-diag adds on top of the backend's own work.
//!
//! The requests come from the run's `--record` file and are sent exactly as vllm-diag sends them
//! (same paths, same form fields, POST for queries and GET for label values, compressed answers
//! asked for where vllm-diag asks for them (`wants_gzip`: not of a server on this host), the same
//! number in flight), each answer read to its last byte and nothing else done with it.
//! Two schedules are timed:
//! - flat: everything at once (at most `concurrency` in flight); no client can do better. This is
//!   the floor the targets are measured against;
//! - phased: explain's own dependencies (discovery, then the signals, then the follow-ups that
//!   depend on the findings), so "explain / phased" is what the tool itself adds (start-up,
//!   decoding, evaluation, rendering) and "phased / flat" what the dependencies cost.
//!
//! The client is built before the clock starts (building a TLS-capable client is start-up cost,
//! which vllm-diag's own time includes and the floor does not); its connections are opened inside
//! the timed part, as vllm-diag's are.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use futures::StreamExt;
use serde::Deserialize;
use vllm_diag::source::{Exchange, Request};

/// The server-side query timeout vllm-diag sends by default (`--query-timeout 20s`).
const QUERY_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Deserialize)]
struct RecordingFile {
    exchanges: Vec<StoredExchange>,
}

#[derive(Deserialize)]
struct StoredExchange {
    request: Request,
    response: Option<Exchange>,
}

/// What one recorded run asked and got.
pub struct Recorded {
    pub requests: Vec<Request>,
    /// Body bytes of every answer (decoded, as stored).
    pub body_bytes: Vec<u64>,
    /// Requests recorded with an error instead of an answer.
    pub errors: usize,
}

impl Recorded {
    pub fn load(path: &std::path::Path) -> Result<Recorded, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let file: RecordingFile = serde_json::from_str(&text).map_err(|e| format!("{}: not a recording: {e}", path.display()))?;
        let mut out = Recorded { requests: Vec::new(), body_bytes: Vec::new(), errors: 0 };
        for ex in file.exchanges {
            match &ex.response {
                Some(r) if r.http_status == 200 => out.body_bytes.push(r.body.len() as u64),
                _ => out.errors += 1,
            }
            out.requests.push(ex.request);
        }
        Ok(out)
    }

    pub fn total_bytes(&self) -> u64 {
        self.body_bytes.iter().sum()
    }

    pub fn largest(&self) -> u64 {
        self.body_bytes.iter().copied().max().unwrap_or(0)
    }
}

/// One timed pass of the floor client.
pub struct Pass {
    pub wall: Duration,
    pub bytes: u64,
}

/// The client, asking for compressed answers exactly where vllm-diag would (not on this host).
fn client(base: &str) -> Result<reqwest::Client, String> {
    let url = url::Url::parse(base).map_err(|e| format!("{base}: {e}"))?;
    client_with(vllm_diag::source::prometheus::wants_gzip(&url))
}

/// The client, asking for gzip-compressed answers or not.
fn client_with(gzip: bool) -> Result<reqwest::Client, String> {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::ACCEPT, reqwest::header::HeaderValue::from_static("application/json"));
    reqwest::Client::builder().default_headers(headers).gzip(gzip).build().map_err(|e| format!("cannot build the HTTP client: {e}"))
}

fn request(http: &reqwest::Client, base: &str, req: &Request, extra: &[(&str, &str)]) -> reqwest::RequestBuilder {
    let mut form = req.form(Some(QUERY_TIMEOUT));
    form.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
    let endpoint = format!("{base}/{}", req.path());
    if matches!(req, Request::LabelValues { .. }) {
        http.get(format!("{endpoint}?{body}"))
    } else {
        http.post(endpoint).header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded").body(body)
    }
}

async fn send_all(http: &reqwest::Client, base: &str, reqs: &[&Request], concurrency: usize) -> Result<u64, String> {
    let results: Vec<Result<u64, String>> = futures::stream::iter(reqs.iter().map(|req| async move {
        let resp = request(http, base, req, &[]).send().await.map_err(|e| format!("{}: {e}", req.describe()))?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| format!("{}: {e}", req.describe()))?;
        if !status.is_success() {
            return Err(format!("{}: HTTP {status}: {}", req.describe(), String::from_utf8_lossy(&body)));
        }
        Ok(body.len() as u64)
    }))
    .buffer_unordered(concurrency.max(1))
    .collect()
    .await;
    results.into_iter().sum()
}

/// Everything at once, at most `concurrency` in flight.
pub async fn flat(base: &str, rec: &Recorded, concurrency: usize) -> Result<Pass, String> {
    let http = client(base)?;
    let all: Vec<&Request> = rec.requests.iter().collect();
    let started = Instant::now();
    let bytes = send_all(&http, base, &all, concurrency).await?;
    Ok(Pass { wall: started.elapsed(), bytes })
}

/// [`flat`], asking for gzip-compressed answers or not: what compression costs the backend and
/// saves on the wire (`--gzip`). The bytes are those that came over the wire (compressed, where
/// they were); a compressed answer is inflated as a client must.
pub async fn flat_gzip(base: &str, rec: &Recorded, concurrency: usize, gzip: bool) -> Result<Pass, String> {
    // Asked by hand, so the body is read as it came.
    let http = client_with(false)?;
    let all: Vec<&Request> = rec.requests.iter().collect();
    let started = Instant::now();
    let results: Vec<Result<u64, String>> = futures::stream::iter(all.iter().map(|req| {
        let http = &http;
        async move {
            let mut r = request(http, base, req, &[]);
            if gzip {
                r = r.header(reqwest::header::ACCEPT_ENCODING, "gzip");
            }
            let resp = r.send().await.map_err(|e| format!("{}: {e}", req.describe()))?;
            let status = resp.status();
            let compressed = resp.headers().get(reqwest::header::CONTENT_ENCODING).is_some_and(|v| v.as_bytes() == b"gzip");
            let body = resp.bytes().await.map_err(|e| format!("{}: {e}", req.describe()))?;
            if !status.is_success() {
                return Err(format!("{}: HTTP {status}", req.describe()));
            }
            if compressed {
                let mut text = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&body[..]), &mut text).map_err(|e| format!("{}: {e}", req.describe()))?;
            }
            Ok(body.len() as u64)
        }
    }))
    .buffer_unordered(concurrency.max(1))
    .collect()
    .await;
    let bytes = results.into_iter().sum::<Result<u64, String>>()?;
    Ok(Pass { wall: started.elapsed(), bytes })
}

/// In explain's three phases: label values (discovery), then the signal queries, then the
/// follow-ups (trends, breakdowns, cache configuration), each phase waiting for the one before.
pub async fn phased(base: &str, rec: &Recorded, concurrency: usize) -> Result<Pass, String> {
    let http = client(base)?;
    let phases = phases(&rec.requests);
    let started = Instant::now();
    let mut bytes = 0;
    for phase in &phases {
        bytes += send_all(&http, base, phase, concurrency).await?;
    }
    Ok(Pass { wall: started.elapsed(), bytes })
}

/// What the change events' first-round instant queries read (resets, targets arriving or leaving,
/// new configuration series, the images at the span's start); their second round names targets
/// (`instance=~`) and is a follow-up.
const EVENT_PROBES: &[&str] = &["(resets(", "(count_over_time(up", "(count_over_time(vllm:cache_config_info", "count by (namespace, deployment, image)"];

/// How the fleet's labels query names the running-requests gauge (`signals::fleet_labels_query`).
const FLEET_LABELS_READ: &str = "{__name__=~\"vllm:num_requests_running|vllm_num_requests_running\"";

/// Split a recording into explain's phases. Discovery is the label-values requests and the SLO
/// histograms' bucket coverage (`count by (le) (...)`, sent with them). Signal queries
/// come in pairs, the same query at the window's end and at the baseline's (one range query with
/// those two steps, or two instant queries from builds before issue 11), and the fleet's label
/// counts (`count(count by (pod) (...))`, or since issue 11 one `group by (labels) (...)` over the
/// running-requests gauge) are sent with them, as are the change events' whole-span checks; a
/// follow-up is a range query (a
/// trend) or an instant query asked at one time only (a per-replica breakdown, the cache
/// configuration).
pub fn phases(requests: &[Request]) -> [Vec<&Request>; 3] {
    let mut times: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for r in requests {
        if let Request::Instant { query, .. } = r {
            *times.entry(query.as_str()).or_default() += 1;
        }
    }
    let mut out: [Vec<&Request>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for r in requests {
        let phase = match r {
            Request::LabelValues { .. } => 0,
            Request::Instant { query, .. } if query.starts_with("count by (le) (") => 0,
            Request::Instant { query, .. } if query.starts_with("count(count by (") => 1,
            Request::Instant { query, .. } if query.starts_with("group by (") && query.contains(FLEET_LABELS_READ) => 1,
            // The change events' whole-span checks, sent with the signals (src/events/).
            Request::Instant { query, .. } if EVENT_PROBES.iter().any(|p| query.contains(p)) && !query.contains("=~") => 1,
            Request::Instant { query, .. } if times.get(query.as_str()).copied().unwrap_or(0) > 1 => 1,
            // A signal asked for the baseline and the window at once: two steps, one per window end.
            Request::Range { start, end, step_seconds, .. } if (*end - *start).num_seconds() == *step_seconds as i64 => 1,
            _ => 2,
        };
        out[phase].push(r);
    }
    out
}

/// How the work of one query is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Prometheus' own accounting: `stats=all`, `execTotalTime` (evaluation only).
    ServerStats,
    /// VictoriaMetrics' own trace of the query (`trace=1`): the duration of its root span, the
    /// request's handling inside the server (evaluation and writing the answer), without the
    /// transfer.
    ServerTrace,
}

/// One query's cost: as the backend accounts for it ([`Timing`]), and the client's wall time from
/// sending the request to the answer's last byte (evaluation, encoding and loopback transfer).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cost {
    pub server: f64,
    pub wall: f64,
}

/// The backend's work for one run: every query once, one at a time (nothing else in flight),
/// timed as `timing` says. Label-values requests are left out (index lookups, not evaluation).
/// Returns each query's cost in the recording's order, with its description.
pub async fn server_exec_secs(base: &str, rec: &Recorded, timing: Timing) -> Result<Vec<(Cost, String)>, String> {
    let http = client(base)?;
    let mut each = Vec::new();
    for req in rec.requests.iter().filter(|r| !matches!(r, Request::LabelValues { .. })) {
        let (c, _) = exec_secs(&http, base, req, timing).await?;
        each.push((c, req.describe()));
    }
    Ok(each)
}

/// One query's cost as `timing` says, and its answer.
async fn exec_secs(http: &reqwest::Client, base: &str, req: &Request, timing: Timing) -> Result<(Cost, serde_json::Value), String> {
    let extra: &[(&str, &str)] = match timing {
        Timing::ServerStats => &[("stats", "all")],
        Timing::ServerTrace => &[("trace", "1")],
    };
    let started = Instant::now();
    let resp = request(http, base, req, extra).send().await.map_err(|e| format!("{}: {e}", req.describe()))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| format!("{}: {e}", req.describe()))?;
    let wall = started.elapsed().as_secs_f64();
    if !status.is_success() {
        return Err(format!("{}: HTTP {status}: {}", req.describe(), String::from_utf8_lossy(&body)));
    }
    let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| format!("{}: {e}", req.describe()))?;
    let server = match timing {
        Timing::ServerStats => v["data"]["stats"]["timings"]["execTotalTime"].as_f64(),
        Timing::ServerTrace => v["trace"]["duration_msec"].as_f64().map(|ms| ms / 1000.0),
    };
    let server = server.ok_or_else(|| format!("{}: the answer has no {timing:?} timing", req.describe()))?;
    Ok((Cost { server, wall }, v))
}

/// The metric names (families) a recording's queries read, and how many queries read each.
pub fn families(rec: &Recorded) -> Result<BTreeMap<String, usize>, String> {
    let mut out = BTreeMap::new();
    for req in &rec.requests {
        let (Request::Instant { query, .. } | Request::Range { query, .. }) = req else { continue };
        for name in vllm_diag::signals::families_read(query).map_err(|e| format!("{query}: {e}"))? {
            *out.entry(name).or_default() += 1;
        }
    }
    Ok(out)
}

/// From the start of the baseline to the end of the window: the span of the run's label-values
/// requests (discovery asks for both windows).
pub fn span(rec: &Recorded) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let spans = rec.requests.iter().filter_map(|r| match r {
        Request::LabelValues { start, end, .. } => Some((*start, *end)),
        _ => None,
    });
    spans.reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

/// The data-read floor: the backend's time to read every sample of each family once over `start ..
/// end` (`count(count_over_time(F[end - start]))` at `end`, one family at a time), timed as
/// `timing` says. Returns each family's cost and whether it holds data.
pub async fn data_read_secs(
    base: &str,
    families: &[String],
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    timing: Timing,
) -> Result<BTreeMap<String, (Cost, bool)>, String> {
    let http = client(base)?;
    let secs = (end - start).num_seconds().max(1);
    let mut each = BTreeMap::new();
    for f in families {
        let req = Request::Instant { query: format!("count(count_over_time({f}[{secs}s]))"), time: end };
        let (c, v) = exec_secs(&http, base, &req, timing).await?;
        each.insert(f.clone(), (c, v["data"]["result"].as_array().is_some_and(|a| !a.is_empty())));
    }
    Ok(each)
}

/// Every request at once, at most `concurrency` in flight, keeping each answer's body: the wall
/// time and the bodies in the requests' order.
pub async fn bodies(base: &str, reqs: &[Request], concurrency: usize) -> Result<(Duration, Vec<String>), String> {
    let http = client(base)?;
    let started = Instant::now();
    let results: Vec<Result<String, String>> = futures::stream::iter(reqs.iter().map(|req| {
        let http = &http;
        async move {
            let resp = request(http, base, req, &[]).send().await.map_err(|e| format!("{}: {e}", req.describe()))?;
            let status = resp.status();
            let body = resp.text().await.map_err(|e| format!("{}: {e}", req.describe()))?;
            if !status.is_success() {
                return Err(format!("{}: HTTP {status}", req.describe()));
            }
            Ok(body)
        }
    }))
    .buffered(concurrency.max(1))
    .collect()
    .await;
    let bodies = results.into_iter().collect::<Result<Vec<_>, _>>()?;
    Ok((started.elapsed(), bodies))
}

/// [`server_exec_secs`] for requests of the caller's own: each one's cost, one at a time.
pub async fn exec_each(base: &str, reqs: &[Request], timing: Timing) -> Result<Vec<Cost>, String> {
    let http = client(base)?;
    let mut each = Vec::new();
    for req in reqs {
        each.push(exec_secs(&http, base, req, timing).await?.0);
    }
    Ok(each)
}
