//! The probe's only network code: the requests of a [`Plan`] sent within its [`super::Limits`], each
//! measured from the client's side.
//!
//! Request `i` starts no earlier than `i / rate` seconds after the first and only when fewer than
//! `concurrency` are in flight; none starts once `max_duration` has passed since the first, and
//! one still running then is cut ([`TimeoutLimit::ProbeDuration`]). Every request goes to the
//! plan's endpoint and nowhere else (the HTTP client follows a redirect only to the same scheme,
//! host and port).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::plan::{body, Plan};
use super::{Measured, Outcome, TimeoutLimit};
use crate::source::prometheus::transport::{chain_text, innermost, io_error_kind, is_incomplete_message};

/// The most of an answer the probe reads (a streamed answer of a few thousand tokens is far less).
const MAX_BODY: usize = 8 << 20;
/// The most of an error's text kept.
const MESSAGE_CHARS: usize = 160;

/// What a run of the plan gave.
#[derive(Debug)]
pub struct Sent {
    pub started: DateTime<Utc>,
    pub ended: DateTime<Utc>,
    pub requests: Vec<Measured>,
    /// Requests never started: the duration ran out first.
    pub not_started: usize,
    /// Requests that found every slot taken at their turn and waited for one (an open loop's
    /// arrivals held back by the concurrency limit; a closed loop's every request but the first few).
    pub waited_for_slot: usize,
}

/// Why the model could not be read from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// The server could not be asked: no connection, no answer in time, an HTTP error.
    Unanswered(String),
    /// It answered, but not with one model: the user must name it.
    NotOne(String),
}

/// The model the server serves, from its `/v1/models` (one GET): the only one, or an error naming
/// them all when there are several.
pub async fn lookup_model(client: &reqwest::Client, plan: &Plan) -> Result<String, LookupError> {
    use LookupError::{NotOne, Unanswered};
    let url = plan.models_url.as_str();
    let shown = crate::prom::strip_credentials(url);
    let resp = tokio::time::timeout(plan.limits.request_timeout, client.get(url).send())
        .await
        .map_err(|_| Unanswered(format!("GET {shown}: no answer within {} s (--timeout)", plan.limits.request_timeout.as_secs_f64())))?
        .map_err(|e| Unanswered(format!("GET {shown}: {}", innermost(&chain_text(&e)))))?;
    let status = resp.status().as_u16();
    let text = read_all(resp, 1 << 20).await.map_err(|e| Unanswered(format!("GET {shown}: {}", innermost(&chain_text(&e)))))?;
    if status != 200 {
        return Err(Unanswered(format!("GET {shown} answered HTTP {status}: {}; or give the model with --model", error_message(&text))));
    }
    let ids: Vec<String> = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["data"].as_array().map(|d| d.iter().filter_map(|m| m["id"].as_str().map(crate::text::printable)).collect()))
        .ok_or_else(|| NotOne(format!("GET {shown}: the answer is not an OpenAI model list; give the model with --model")))?;
    match ids.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(NotOne(format!("GET {shown}: the server lists no model; give one with --model"))),
        many => Err(NotOne(format!("GET {shown}: the server serves {}; choose one with --model", many.join(", ")))),
    }
}

/// How a run's requests are started, within its [`super::Limits`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// At the limits' rate: request `i` no sooner than `i / rate` after the first, nor `1 / rate`
    /// after the one before, and only when a slot is free. With a rate above what `concurrency`
    /// requests in flight can reach, this is a closed loop: a new request as each one ends, the
    /// slots always full, the rate a ceiling that never binds.
    Paced,
    /// An open loop: Poisson arrivals at the limits' rate on average (exponential gaps drawn from
    /// `seed`, so a rerun sends at the same moments). An arrival finding every slot taken waits
    /// for one ([`Sent::waited_for_slot`]): the concurrency limit holds whatever the draw.
    Poisson { seed: u64 },
}

/// When a run starts its requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    pub arrivals: Arrivals,
    /// The first request's index: its prompt, and whether it streams (a load test's steps go on
    /// from the last step's index, so that no two requests of a sweep share a prompt).
    pub first_index: usize,
    /// No request starts later than this after the first (at most the limits' `max_duration`,
    /// after which every request still running is cut). A probe's is its `max_duration`; a load
    /// test's step lets the requests it started finish after its own length.
    pub starts_for: Duration,
}

impl Schedule {
    /// The probe's: paced at its rate, from request 0, starting for its whole duration.
    pub fn probe(limits: &super::Limits) -> Schedule {
        Schedule { arrivals: Arrivals::Paced, first_index: 0, starts_for: limits.max_duration }
    }
}

/// The turns of a run's requests, as offsets from its start: `i / rate` (paced), or the sums of
/// exponential gaps of mean `1 / rate` (Poisson).
pub struct Turns {
    arrivals: Arrivals,
    rate: f64,
    next: usize,
    at: f64,
    rng: rand::rngs::StdRng,
}

impl Turns {
    pub fn new(arrivals: Arrivals, rate: f64) -> Turns {
        use rand::SeedableRng;
        let seed = match arrivals {
            Arrivals::Poisson { seed } => seed,
            Arrivals::Paced => 0,
        };
        Turns { arrivals, rate, next: 0, at: 0.0, rng: rand::rngs::StdRng::seed_from_u64(seed) }
    }
}

impl Iterator for Turns {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        use rand::Rng;
        let i = self.next;
        self.next += 1;
        let secs = match self.arrivals {
            Arrivals::Paced => i as f64 / self.rate,
            Arrivals::Poisson { .. } => {
                if i > 0 {
                    // 1 - u is in (0, 1]: its logarithm is finite.
                    let u: f64 = self.rng.gen();
                    self.at += -(1.0 - u).ln() / self.rate;
                }
                self.at
            }
        };
        Some(Duration::from_secs_f64(secs))
    }
}

/// Send the plan's requests for `model`, within its limits (the probe's schedule).
pub async fn run(client: &reqwest::Client, plan: &Plan, model: &str) -> Sent {
    run_scheduled(client, plan, model, Schedule::probe(&plan.limits)).await
}

/// Send the plan's requests for `model` on `schedule`, within the plan's limits: at most
/// `requests` of them, at most `concurrency` in flight, none started after `schedule.starts_for`
/// (nor `max_duration`), every one still running at `max_duration` cut.
pub async fn run_scheduled(client: &reqwest::Client, plan: &Plan, model: &str, schedule: Schedule) -> Sent {
    let limits = plan.limits;
    let started = Utc::now();
    let t0 = Instant::now();
    let deadline = t0 + limits.max_duration;
    let last_start = t0 + schedule.starts_for.min(limits.max_duration);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.concurrency.max(1)));
    let mut handles = Vec::new();
    let (mut not_started, mut waited_for_slot) = (0, 0);
    // Paced, a request never starts sooner than 1 / rate after the one before: after a wait for a
    // free slot, the next requests do not catch up in a burst. Poisson arrivals are not spaced.
    let spacing = match schedule.arrivals {
        Arrivals::Paced => Duration::from_secs_f64(1.0 / limits.rate_per_second),
        Arrivals::Poisson { .. } => Duration::ZERO,
    };
    let mut turns = Turns::new(schedule.arrivals, limits.rate_per_second);
    let mut last: Option<Instant> = None;
    for i in 0..limits.requests {
        let turn = t0 + turns.next().unwrap_or_default();
        let at = last.map_or(turn, |l| turn.max(l + spacing));
        if at >= last_start || at >= deadline {
            not_started = limits.requests - i;
            break;
        }
        tokio::time::sleep_until(at).await;
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                waited_for_slot += 1;
                match tokio::time::timeout_at(last_start.min(deadline), slots.clone().acquire_owned()).await {
                    Ok(Ok(p)) if Instant::now() < last_start.min(deadline) => p,
                    _ => {
                        not_started = limits.requests - i;
                        break;
                    }
                }
            }
        };
        // The request's clock starts here, where the probe decides to send it.
        let index = schedule.first_index + i;
        let start = Start { index, stream: plan.shape.stream.streams(index), t: Instant::now(), started: Utc::now() };
        last = Some(start.t);
        let (client, url) = (client.clone(), plan.endpoint.clone());
        let b = body(&plan.shape, model, index);
        let timeout = limits.request_timeout;
        handles.push(tokio::spawn(async move {
            let m = one(&client, url, b, start, timeout, deadline).await;
            drop(permit);
            m
        }));
    }
    let mut requests = Vec::with_capacity(handles.len());
    for h in handles {
        // A request's task panicking would be a bug of ours; it is not hidden as a server's fault.
        requests.push(h.await.expect("a probe request's task ended without a measurement"));
    }
    Sent { started, ended: Utc::now(), requests, not_started, waited_for_slot }
}

/// What a request has measured so far (kept when a limit cuts it).
#[derive(Default)]
struct Partial {
    headers: Option<f64>,
    ttft: Option<f64>,
    last_token: Option<f64>,
    gaps: Vec<f64>,
    events: u64,
    tokens: Option<u64>,
}

/// When and how a request was started.
struct Start {
    index: usize,
    stream: bool,
    t: Instant,
    started: DateTime<Utc>,
}

async fn one(client: &reqwest::Client, url: url::Url, body: serde_json::Value, start: Start, timeout: Duration, deadline: Instant) -> Measured {
    let Start { index, stream, t, started } = start;
    let own = t + timeout;
    let (until, limit) = if own <= deadline { (own, TimeoutLimit::Request) } else { (deadline, TimeoutLimit::ProbeDuration) };
    let mut p = Partial::default();
    let outcome = match tokio::time::timeout_at(until, exchange(client, url, &body, stream, t, &mut p)).await {
        Ok(o) => o,
        Err(_) => Outcome::Timeout { limit },
    };
    Measured {
        index,
        stream,
        started,
        outcome,
        headers_seconds: p.headers,
        ttft_seconds: p.ttft,
        e2e_seconds: t.elapsed().as_secs_f64(),
        tokens: p.tokens.or((p.events > 0).then_some(p.events)),
        gaps: p.gaps,
    }
}

async fn exchange(client: &reqwest::Client, url: url::Url, body: &serde_json::Value, stream: bool, t: Instant, p: &mut Partial) -> Outcome {
    let request = client.post(url).header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_string());
    let resp = match request.send().await {
        Ok(r) => r,
        Err(e) => return transport_outcome(&e, false),
    };
    p.headers = Some(t.elapsed().as_secs_f64());
    let status = resp.status().as_u16();
    if status != 200 {
        return match read_all(resp, 64 << 10).await {
            Ok(text) => Outcome::Http { status, message: error_message(&text) },
            Err(_) => Outcome::Http { status, message: String::new() },
        };
    }
    if stream {
        read_stream(resp, t, p).await
    } else {
        match read_all(resp, MAX_BODY).await {
            Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
                Ok(v) if v.get("error").is_some_and(|e| !e.is_null()) => Outcome::StreamError { message: error_message(&text) },
                Ok(v) => {
                    p.tokens = v["usage"]["completion_tokens"].as_u64();
                    Outcome::Ok
                }
                Err(e) => Outcome::Unreadable { detail: format!("the answer is not JSON ({e})") },
            },
            Err(e) => transport_outcome(&e, true),
        }
    }
}

/// Server-sent events: a token event is one whose first choice carries text (`text`, or the chat
/// delta's `content`); an event with an `error` ends the request as a [`Outcome::StreamError`].
async fn read_stream(mut resp: reqwest::Response, t: Instant, p: &mut Partial) -> Outcome {
    let mut buf: Vec<u8> = Vec::new();
    let mut total = 0usize;
    let mut finished = false;
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => return transport_outcome(&e, true),
        };
        total += chunk.len();
        if total > MAX_BODY {
            return Outcome::Unreadable { detail: format!("the stream went on past {} MiB", MAX_BODY >> 20) };
        }
        buf.extend_from_slice(&chunk);
        while let Some((end, skip)) = event_end(&buf) {
            let event: Vec<u8> = buf.drain(..end + skip).take(end).collect();
            match on_event(&String::from_utf8_lossy(&event), t, p) {
                Event::Done => finished = true,
                Event::Error(message) => return Outcome::StreamError { message },
                Event::Other => {}
            }
        }
    }
    if !buf.iter().all(u8::is_ascii_whitespace) {
        if let Event::Error(message) = on_event(&String::from_utf8_lossy(&buf), t, p) {
            return Outcome::StreamError { message };
        }
    }
    if finished {
        Outcome::Ok
    } else {
        Outcome::Reset { detail: "the stream ended without its [DONE] event".into() }
    }
}

/// Where the first event in `buf` ends, and the length of the blank line after it.
fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

enum Event {
    Done,
    Error(String),
    Other,
}

fn on_event(event: &str, t: Instant, p: &mut Partial) -> Event {
    let data: String = event.lines().filter_map(|l| l.strip_prefix("data:")).map(|d| d.strip_prefix(' ').unwrap_or(d)).collect::<Vec<_>>().join("\n");
    if data.trim() == "[DONE]" {
        return Event::Done;
    }
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&data) else {
        return Event::Other;
    };
    if v.get("error").is_some_and(|e| !e.is_null()) {
        return Event::Error(error_message(&data));
    }
    if let Some(n) = v["usage"]["completion_tokens"].as_u64() {
        p.tokens = Some(n);
    }
    let choice = &v["choices"][0];
    let text = choice["text"].as_str().or_else(|| choice["delta"]["content"].as_str()).unwrap_or("");
    if !text.is_empty() {
        let now = t.elapsed().as_secs_f64();
        match p.last_token {
            None => p.ttft = Some(now),
            Some(last) => p.gaps.push(now - last),
        }
        p.last_token = Some(now);
        p.events += 1;
    }
    Event::Other
}

async fn read_all(mut resp: reqwest::Response, max: usize) -> Result<String, reqwest::Error> {
    let mut buf = Vec::new();
    while let Some(c) = resp.chunk().await? {
        if buf.len() + c.len() > max {
            buf.extend_from_slice(&c[..max - buf.len()]);
            break;
        }
        buf.extend_from_slice(&c);
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The server's own words for an error, from an OpenAI-style body (`error.message`, vLLM's
/// `message`, a router's `detail` or `error` text) or the body's start; printable, one line, short.
pub fn error_message(text: &str) -> String {
    let from_json = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| [&v["error"]["message"], &v["message"], &v["detail"], &v["error"]].into_iter().find_map(|m| m.as_str().map(str::to_string)));
    let m = crate::text::one_line(&crate::prom::redact_text(&from_json.unwrap_or_else(|| text.to_string())));
    if m.chars().count() > MESSAGE_CHARS {
        format!("{}...", m.chars().take(MESSAGE_CHARS).collect::<String>())
    } else {
        m
    }
}

/// A transport error as an outcome: no connection at all, or one reset or closed under way
/// (`answering`: the headers had come).
fn transport_outcome(e: &reqwest::Error, answering: bool) -> Outcome {
    use std::io::ErrorKind;
    let detail = innermost(&chain_text(e));
    let reset = matches!(io_error_kind(e), Some(ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe | ErrorKind::UnexpectedEof))
        || is_incomplete_message(e);
    if e.is_timeout() {
        Outcome::Timeout { limit: TimeoutLimit::Request }
    } else if e.is_connect() && !reset {
        Outcome::Connect { detail }
    } else if reset || answering {
        Outcome::Reset { detail }
    } else {
        Outcome::Connect { detail }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_events_give_the_first_token_and_the_gaps_and_usage_the_count() {
        let t = Instant::now();
        let mut p = Partial::default();
        assert!(matches!(on_event("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}", t, &mut p), Event::Other));
        assert_eq!(p.ttft, None, "a role-only delta is no token");
        on_event("data: {\"choices\":[{\"text\":\"a\"}]}", t, &mut p);
        on_event("data: {\"choices\":[{\"delta\":{\"content\":\"b\"}}]}", t, &mut p);
        on_event("data: {\"choices\":[],\"usage\":{\"completion_tokens\":7}}", t, &mut p);
        assert!(p.ttft.is_some());
        assert_eq!((p.gaps.len(), p.events, p.tokens), (1, 2, Some(7)));
        assert!(matches!(on_event("data: [DONE]", t, &mut p), Event::Done));
        match on_event("data: {\"error\":{\"message\":\"boom\\nthere\",\"code\":500}}", t, &mut p) {
            Event::Error(m) => assert_eq!(m, "boom there"),
            _ => panic!("an error event"),
        }
    }

    #[test]
    fn paced_turns_are_even_and_poisson_turns_repeat_by_seed_at_the_mean_rate() {
        let paced: Vec<f64> = Turns::new(Arrivals::Paced, 4.0).take(4).map(|d| d.as_secs_f64()).collect();
        assert_eq!(paced, [0.0, 0.25, 0.5, 0.75]);
        let draw = |seed| Turns::new(Arrivals::Poisson { seed }, 10.0).take(10_001).map(|d| d.as_secs_f64()).collect::<Vec<_>>();
        let a = draw(7);
        assert_eq!(a, draw(7), "the same seed, the same moments");
        assert_ne!(a, draw(8));
        assert_eq!(a[0], 0.0);
        assert!(a.windows(2).all(|w| w[1] >= w[0]));
        // 10,000 gaps of mean 0.1 s: their sum within 3% of 1,000 s (the draw is fixed by the seed).
        assert!((a[10_000] - 1000.0).abs() < 30.0, "{}", a[10_000]);
    }

    /// A server on 127.0.0.1 answering every request with a whole completion after `delay`,
    /// counting requests and the most in flight at once.
    async fn counting_server(delay: Duration) -> (String, Arc<std::sync::atomic::AtomicUsize>, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (count, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let now = Arc::new(AtomicUsize::new(0));
        let (c, m) = (count.clone(), max.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut conn, _)) = listener.accept().await else { return };
                let (c, m, now) = (c.clone(), m.clone(), now.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    let mut got = Vec::new();
                    loop {
                        let Ok(n) = conn.read(&mut buf).await else { return };
                        if n == 0 {
                            return;
                        }
                        got.extend_from_slice(&buf[..n]);
                        let Some(head) = got.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                        let text = String::from_utf8_lossy(&got[..head]).to_ascii_lowercase();
                        let len: usize = text.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
                        if got.len() < head + 4 + len {
                            continue;
                        }
                        got.drain(..head + 4 + len);
                        c.fetch_add(1, Ordering::SeqCst);
                        m.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                        tokio::time::sleep(delay).await;
                        now.fetch_sub(1, Ordering::SeqCst);
                        let body = "{\"choices\":[{\"text\":\"x\"}],\"usage\":{\"completion_tokens\":1}}";
                        let _ = conn
                            .write_all(format!("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len()).as_bytes())
                            .await;
                    }
                });
            }
        });
        (url, count, max)
    }

    fn plan_for(url: &str, limits: super::super::Limits) -> Plan {
        let (endpoint, models_url) = super::super::plan::endpoint(url, super::super::Api::Completions).unwrap();
        let shape = super::super::Shape {
            api: super::super::Api::Completions,
            stream: super::super::StreamMode::Never,
            prompt_words: 2,
            max_tokens: 1,
            ignore_eos: true,
        };
        Plan { target: url.into(), endpoint, models_url, model: Some("m".into()), shape, limits }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_loop_keeps_its_slots_full_and_never_passes_them_or_the_request_limit() {
        use std::sync::atomic::Ordering;
        let (url, count, max) = counting_server(Duration::from_millis(150)).await;
        let limits = super::super::Limits {
            requests: 12,
            rate_per_second: 1000.0,
            concurrency: 3,
            max_duration: Duration::from_secs(20),
            request_timeout: Duration::from_secs(5),
        };
        let plan = plan_for(&url, limits);
        let sent = run_scheduled(&reqwest::Client::new(), &plan, "m", Schedule { first_index: 100, ..Schedule::probe(&limits) }).await;
        assert_eq!((sent.requests.len(), sent.not_started, count.load(Ordering::SeqCst)), (12, 0, 12));
        assert!(sent.requests.iter().all(|m| m.outcome.is_ok()), "{:?}", sent.requests);
        assert_eq!(max.load(Ordering::SeqCst), 3, "three in flight at once, never more");
        // Requests that found the three slots taken waited (one finding a slot just freed did not).
        assert!((3..=9).contains(&sent.waited_for_slot), "{}", sent.waited_for_slot);
        assert_eq!(sent.requests[0].index, 100, "the indexes go on from first_index");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn poisson_arrivals_stop_at_the_schedules_length_and_hold_the_concurrency_limit() {
        use std::sync::atomic::Ordering;
        let (url, count, max) = counting_server(Duration::from_millis(300)).await;
        let limits = super::super::Limits {
            requests: 1000,
            rate_per_second: 20.0,
            concurrency: 2,
            max_duration: Duration::from_secs(20),
            request_timeout: Duration::from_secs(5),
        };
        let plan = plan_for(&url, limits);
        let schedule = Schedule { arrivals: Arrivals::Poisson { seed: 3 }, first_index: 0, starts_for: Duration::from_millis(1500) };
        let t = std::time::Instant::now();
        let sent = run_scheduled(&reqwest::Client::new(), &plan, "m", schedule).await;
        let started = sent.requests.len();
        assert_eq!(count.load(Ordering::SeqCst), started, "the server got exactly what was started");
        assert_eq!(started + sent.not_started, 1000);
        assert!(max.load(Ordering::SeqCst) <= 2, "never more than the concurrency limit");
        // Two slots of 0.3 s each for 1.5 s: at most 5 + 5 starts, whatever the draw.
        assert!((2..=10).contains(&started), "{started}");
        assert!(sent.waited_for_slot >= 1, "at 20/s on two slots of 0.3 s, arrivals waited");
        let last = sent.requests.iter().map(|m| (m.started - sent.started).num_milliseconds()).max().unwrap();
        assert!(last < 1500, "no request started after the schedule's 1.5 s: {last} ms");
        assert!(sent.requests.iter().all(|m| m.outcome.is_ok()), "the started ones finished after the schedule's end");
        assert!(t.elapsed() < Duration::from_secs(19));
    }

    #[test]
    fn events_end_at_a_blank_line_of_either_kind() {
        assert_eq!(event_end(b"data: x\n\ndata: y"), Some((7, 2)));
        assert_eq!(event_end(b"data: x\r\n\r\n"), Some((7, 4)));
        assert_eq!(event_end(b"data: x\n"), None);
    }

    #[test]
    fn error_messages_are_the_servers_words_short_and_printable() {
        assert_eq!(error_message("{\"error\":{\"message\":\"model not found\"}}"), "model not found");
        assert_eq!(error_message("{\"detail\":\"Request timed out\"}"), "Request timed out");
        assert_eq!(error_message("Request Timeout"), "Request Timeout");
        assert!(error_message(&"x".repeat(500)).ends_with("..."));
        assert!(!error_message("bad \u{1b}[31m escape").contains('\u{1b}'));
    }
}
