//! The HTTP client for any Prometheus-compatible query API (Prometheus, Thanos, Mimir, VictoriaMetrics).
//!
//! It only moves bytes: every answer, whatever its HTTP status, comes back as a raw [`Exchange`] and
//! [`super::decode`] decides what it means. That split is what lets `--record` store exactly what the
//! server said and `--replay` feed the same bytes through the same decoder.
//!
//! Things here exist because real deployments get them wrong in ways a user cannot see:
//! - Base URLs often carry a path prefix (`https://host/prometheus`); joining keeps it.
//! - Credentials come from the URL (`http://user:pass@host`), a bearer token, basic auth, or headers
//!   such as `X-Scope-OrgID`; none of them may ever be printed, so every URL we show is stripped, every
//!   transport message is built from parts that cannot hold them, and a body that echoes one back (some
//!   proxies' error pages do) has it masked before anything stores or prints it.
//! - Private CAs and client certificates ([`TlsOptions`]); a certificate problem is named as such, with
//!   the flag that fixes it, instead of a bare handshake error.
//! - Transport failures are translated into the cases a person can act on: the server cannot be
//!   reached (wrong URL, down, TLS), it did not answer in time, or something else went wrong.
//! - The tool runs when things are broken, so transient failures are retried: connection resets and
//!   HTTP 429, 502, 503 and 504, with jittered exponential backoff, honouring `Retry-After`, and never
//!   past the run's overall deadline. Queries are reads, so repeating one is safe; a 4xx such as 400 or
//!   422 means the query itself is wrong and is never repeated. Retries happen below the recorder, so
//!   a recording holds the answer that counted.

use std::fmt;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION, RETRY_AFTER};
use url::Url;

use super::{Exchange, Request, Source, SourceError};
use crate::report::SourceInfo;

mod base_url;
mod retry;
mod secret;
#[cfg(test)]
mod tests;
mod tls;
pub(crate) mod transport;

pub(crate) use retry::parse_retry_after;
pub use retry::RetryPolicy;
pub use secret::Secret;
pub(crate) use tls::configure_tls;
pub use tls::TlsOptions;

use base_url::{parse_base_url, show_url};
use retry::{is_final_api_error, timeout_margin};
use tls::{looks_like_tls, tls_advice};
use transport::{base64, chain_text, innermost, io_error_kind, is_incomplete_message};

/// Environment variable holding a bearer token.
pub const ENV_BEARER_TOKEN: &str = "VLLM_DIAG_BEARER_TOKEN";
/// Environment variable holding the basic-auth password.
pub const ENV_BASIC_AUTH_PASSWORD: &str = "VLLM_DIAG_BASIC_AUTH_PASSWORD";

/// Default cap on one response body: far above any sane vLLM query, far below running out of memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Where `--debug` lines go: one line per request attempt and per retry, credentials masked.
#[derive(Clone)]
pub struct DebugLog(Arc<dyn Fn(&str) + Send + Sync>);

impl DebugLog {
    pub fn new(f: impl Fn(&str) + Send + Sync + 'static) -> DebugLog {
        DebugLog(Arc::new(f))
    }

    /// Lines prefixed `vllm-diag: debug: ` on stderr.
    pub fn stderr() -> DebugLog {
        DebugLog::new(|line| eprintln!("vllm-diag: debug: {line}"))
    }

    fn line(&self, text: &str) {
        (self.0)(text)
    }
}

impl fmt::Debug for DebugLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DebugLog")
    }
}

/// What went over the wire during a run, for `--debug` and for tests that bound a run's cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransferStats {
    /// Requests answered or given up on (retries of one request count once).
    pub requests: u64,
    /// HTTP attempts, retries included.
    pub attempts: u64,
    /// Body bytes received, after decompression.
    pub bytes: u64,
    /// The largest single body, and what it answered.
    pub largest_bytes: u64,
    pub largest: String,
}

/// How to reach the API. `Debug` is safe to print: secrets show as `***`.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The API base, e.g. `http://host:9090` or `https://host/prometheus`; may hold `user:pass@`.
    pub base_url: String,
    /// Sent to the server as `timeout`; the HTTP request gets a little longer so the server's own
    /// timeout error (which names the query) arrives first when it can.
    pub query_timeout: Duration,
    pub bearer_token: Option<Secret>,
    /// User name and password.
    pub basic_auth: Option<(String, Secret)>,
    /// Extra headers (`X-Scope-OrgID`, API keys). Values are treated as secrets.
    pub headers: Vec<(String, Secret)>,
    pub max_body_bytes: usize,
    pub tls: TlsOptions,
    pub retry: RetryPolicy,
    /// `--debug`: log every attempt (method, URL, parameters, status, size, time; never a credential).
    pub debug: Option<DebugLog>,
}

impl Default for ClientOptions {
    fn default() -> ClientOptions {
        ClientOptions {
            base_url: "http://localhost:9090".to_string(),
            query_timeout: Duration::from_secs(30),
            bearer_token: None,
            basic_auth: None,
            headers: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            tls: TlsOptions::default(),
            retry: RetryPolicy::default(),
            debug: None,
        }
    }
}

/// A Prometheus-compatible API over HTTP. Cheap to share behind an `Arc`; requests may run concurrently.
#[derive(Debug)]
pub struct PrometheusClient {
    http: reqwest::Client,
    /// Without credentials; the path has no trailing slash.
    base: Url,
    /// `base` as shown to people.
    shown: String,
    basic_auth: Option<(String, Secret)>,
    bearer_token: Option<Secret>,
    query_timeout: Duration,
    request_timeout: Duration,
    max_body_bytes: usize,
    retry: RetryPolicy,
    /// When retries stop (creation time + the policy's deadline).
    give_up_at: Option<Instant>,
    debug: Option<DebugLog>,
    /// Whether a client certificate is configured (for advice when a TLS server hangs up).
    client_cert: bool,
    stats: Mutex<TransferStats>,
    /// Every secret's text (and the encoded forms that travel on the wire), masked in any message
    /// built from foreign text and in every body.
    scrub: Vec<Secret>,
}

/// One attempt's failure, and whether another attempt may succeed.
struct Failed {
    error: SourceError,
    retryable: bool,
}

/// Whether to ask `base` for gzip-compressed answers: not on this host. Measured (BENCHMARKS.md,
/// "gzip, measured"): compressing a 200-replica run's 12.2 MB of answers cost Prometheus 17-22% more
/// CPU (180-280 ms a run) and made the run no faster on loopback, nor through a relay adding 20 ms of
/// round trip; it saves 94% of the bytes, which pays only where the link's bandwidth is what limits,
/// as it may to a remote backend.
pub fn wants_gzip(base: &Url) -> bool {
    match base.host() {
        Some(url::Host::Ipv4(ip)) => !ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => !ip.is_loopback(),
        Some(url::Host::Domain(d)) => !d.eq_ignore_ascii_case("localhost"),
        None => true,
    }
}

impl PrometheusClient {
    pub fn new(opts: ClientOptions) -> Result<PrometheusClient, SourceError> {
        let (base, url_auth) = parse_base_url(&opts.base_url)?;
        let shown = show_url(&base);

        let given = [url_auth.is_some(), opts.basic_auth.is_some(), opts.bearer_token.is_some()];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(SourceError::Other {
                detail: format!(
                    "credentials for {shown} are given more than once (in the URL, as basic auth and/or as a \
                     bearer token); give exactly one"
                ),
            });
        }
        let basic_auth = url_auth.or(opts.basic_auth);

        let mut headers = HeaderMap::new();
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let mut header_names = vec!["accept".to_string()];
        for (name, value) in &opts.headers {
            let header_name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| SourceError::Other { detail: format!("{:?} is not a valid HTTP header name", name) })?;
            if header_name == reqwest::header::AUTHORIZATION && (basic_auth.is_some() || opts.bearer_token.is_some()) {
                return Err(SourceError::Other {
                    detail: "--header Authorization is given as well as basic auth or a bearer token (--basic-auth-user, \
                             --bearer-token-file, the URL's user:password@, or their variables); give one"
                        .to_string(),
                });
            }
            let mut header_value = HeaderValue::from_str(value.expose()).map_err(|_| SourceError::Other {
                detail: format!(
                    "the value of header {header_name} holds characters HTTP does not allow (line breaks or \
                     other control characters)"
                ),
            })?;
            header_value.set_sensitive(true);
            header_names.push(format!("{header_name} (value masked)"));
            headers.append(header_name, header_value);
        }
        if basic_auth.is_some() {
            header_names.push("authorization: Basic (masked)".to_string());
        }
        if opts.bearer_token.is_some() {
            header_names.push("authorization: Bearer (masked)".to_string());
        }

        let request_timeout = opts.query_timeout + timeout_margin(opts.query_timeout);
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("vllm-diag/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .gzip(wants_gzip(&base))
            .connect_timeout(opts.query_timeout.clamp(Duration::from_millis(100), Duration::from_secs(10)))
            // Our own retries decide what is repeated; a hidden second layer would double them.
            .retry(reqwest::retry::never())
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                // Only 307 and 308 keep the method and body; following a 301/302/303 would turn the
                // POST into a GET without the query.
                let keeps_post = matches!(attempt.status().as_u16(), 307 | 308);
                if keeps_post && attempt.previous().len() < 5 {
                    attempt.follow()
                } else {
                    attempt.stop()
                }
            }));
        builder = configure_tls(builder, &opts.tls)?;
        let http = builder.build().map_err(|e| SourceError::Other { detail: format!("cannot set up the HTTP client: {}", chain_text(&e)) })?;

        let mut scrub: Vec<Secret> = opts.headers.iter().map(|(_, v)| v.clone()).collect();
        if let Some((user, pass)) = &basic_auth {
            scrub.push(pass.clone());
            scrub.push(Secret::new(base64(format!("{user}:{}", pass.expose()).as_bytes())));
        }
        scrub.extend(opts.bearer_token.iter().cloned());
        // Longest first, so a secret that contains another is masked whole.
        scrub.sort_by_key(|s| std::cmp::Reverse(s.expose().len()));

        if let Some(log) = &opts.debug {
            let tls = &opts.tls;
            log.line(&format!(
                "source {shown}: headers on every request: {}; TLS: {}{}{}",
                header_names.join(", "),
                tls.ca_file.as_ref().map_or("built-in roots".to_string(), |p| format!("built-in roots + {}", p.display())),
                tls.client_cert.as_ref().map_or(String::new(), |(c, _)| format!(", client certificate {}", c.display())),
                if tls.insecure_skip_verify { ", certificates NOT verified" } else { "" },
            ));
        }

        Ok(PrometheusClient {
            http,
            base,
            shown,
            basic_auth,
            bearer_token: opts.bearer_token,
            query_timeout: opts.query_timeout,
            request_timeout,
            max_body_bytes: opts.max_body_bytes,
            give_up_at: opts.retry.deadline.map(|d| Instant::now() + d),
            retry: opts.retry,
            debug: opts.debug,
            client_cert: opts.tls.client_cert.is_some(),
            stats: Mutex::new(TransferStats::default()),
            scrub,
        })
    }

    /// The full URL of an API path (`api/v1/query`) below the base, keeping the base's path prefix.
    pub fn endpoint(&self, path: &str) -> Url {
        let mut u = self.base.clone();
        let joined = format!("{}/{}", self.base.path().trim_end_matches('/'), path.trim_start_matches('/'));
        u.set_path(&joined);
        u
    }

    /// What went over the wire so far.
    pub fn stats(&self) -> TransferStats {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// One request with its retries.
    async fn fetch(&self, req: &Request) -> Result<Exchange, SourceError> {
        let what = req.describe();
        let mut attempt: u32 = 1;
        loop {
            let started = Instant::now();
            let outcome = self.fetch_once(req).await;
            self.count_attempt(&outcome, &what);
            let (summary, wait) = match &outcome {
                Ok((ex, retry_after)) => {
                    let summary = format!("HTTP {}, {} bytes", ex.http_status, ex.body.len());
                    let wait =
                        matches!(ex.http_status, 429 | 502 | 503 | 504).then(|| self.backoff(attempt, *retry_after)).filter(|_| !is_final_api_error(&ex.body));
                    (summary, wait)
                }
                Err(f) => (f.error.to_string(), f.retryable.then(|| self.backoff(attempt, None))),
            };
            let retry_in = wait.filter(|w| attempt < self.retry.attempts && self.time_left().is_none_or(|left| *w < left));
            if let Some(log) = &self.debug {
                let mut line = format!(
                    "{} {} [{}] -> {summary} in {} ms (attempt {attempt})",
                    if matches!(req, Request::LabelValues { .. }) { "GET" } else { "POST" },
                    self.endpoint(&req.path()),
                    describe_params(req),
                    started.elapsed().as_millis(),
                );
                match (retry_in, wait) {
                    (Some(w), _) => line.push_str(&format!("; retrying in {} ms", w.as_millis())),
                    (None, Some(_)) => line.push_str("; not retried (no attempts or time left)"),
                    (None, None) => {}
                }
                log.line(&self.scrubbed(&line));
            }
            match retry_in {
                Some(w) => {
                    tokio::time::sleep(w).await;
                    attempt += 1;
                }
                None => {
                    if let Ok(mut s) = self.stats.lock() {
                        s.requests += 1;
                    }
                    return outcome.map(|(ex, _)| ex).map_err(|f| f.error);
                }
            }
        }
    }

    fn count_attempt(&self, outcome: &Result<(Exchange, Option<Duration>), Failed>, what: &str) {
        let mut s = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        s.attempts += 1;
        if let Ok((ex, _)) = outcome {
            let n = ex.body.len() as u64;
            s.bytes += n;
            if n > s.largest_bytes {
                s.largest_bytes = n;
                s.largest = what.to_string();
            }
        }
    }

    /// Time until the overall deadline, if there is one.
    fn time_left(&self) -> Option<Duration> {
        self.give_up_at.map(|t| t.saturating_duration_since(Instant::now()))
    }

    /// How long to wait before attempt `attempt + 1`: the server's `Retry-After` when it gave one,
    /// else exponential backoff with jitter (half to all of the step), capped.
    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(d) = retry_after {
            return d.min(self.retry.max_delay);
        }
        let step = self.retry.base_delay.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1))).min(self.retry.max_delay);
        // Jitter between 0.5x and 1x, so clients retrying together spread out. The standard
        // library's randomly keyed hasher is random enough for that; no RNG crate needed.
        let random = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u32(attempt);
            h.finish()
        };
        let jitter: f64 = (random >> 11) as f64 / (1u64 << 53) as f64 * 0.5 + 0.5;
        step.mul_f64(jitter)
    }

    async fn fetch_once(&self, req: &Request) -> Result<(Exchange, Option<Duration>), Failed> {
        let endpoint = self.endpoint(&req.path());
        let shown_endpoint = endpoint.to_string();
        let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(req.form(Some(self.query_timeout))).finish();

        // Queries go as form-encoded POST (long PromQL breaks GET URLs behind proxies); the
        // label-values endpoint accepts only GET in Prometheus, so its few short parameters go in
        // the query string.
        let mut builder = if matches!(req, Request::LabelValues { .. }) {
            let mut u = endpoint;
            u.set_query(Some(&body));
            self.http.get(u).timeout(self.request_timeout)
        } else {
            self.http.post(endpoint).header(CONTENT_TYPE, "application/x-www-form-urlencoded").timeout(self.request_timeout).body(body)
        };
        if let Some((user, pass)) = &self.basic_auth {
            builder = builder.basic_auth(user, Some(pass.expose()));
        }
        if let Some(token) = &self.bearer_token {
            builder = builder.bearer_auth(token.expose());
        }

        let resp = builder.send().await.map_err(|e| self.transport_error(&shown_endpoint, &e))?;
        let http_status = resp.status().as_u16();
        if (300..400).contains(&http_status) {
            let to =
                resp.headers().get(LOCATION).and_then(|v| v.to_str().ok()).map(crate::prom::redact_url).unwrap_or_else(|| "an unnamed location".to_string());
            return Err(Failed {
                error: SourceError::Other {
                    detail: self.scrubbed(&format!(
                        "{shown_endpoint} redirects (HTTP {http_status}) to {to}; use the final URL's API base as \
                         the Prometheus URL"
                    )),
                },
                retryable: false,
            });
        }
        let content_type = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let retry_after = resp.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(|v| parse_retry_after(v, chrono::Utc::now()));

        let too_big = |url: &str| Failed {
            error: SourceError::Decode {
                url: url.to_string(),
                detail: format!(
                    "response larger than {} bytes, the most vllm-diag reads; narrow the selector or shorten the \
                     window",
                    self.max_body_bytes
                ),
            },
            retryable: false,
        };
        let body = super::read_capped(resp, self.max_body_bytes).await.map_err(|e| match e {
            super::BodyError::TooBig => too_big(&shown_endpoint),
            super::BodyError::Broken(e) => self.transport_error(&shown_endpoint, &e),
        })?;
        Ok((Exchange { http_status, content_type: self.scrubbed(&content_type), body: self.scrubbed(&body) }, retry_after))
    }

    /// Translate a reqwest error into what a person can act on, without any credential in it.
    fn transport_error(&self, endpoint: &str, e: &reqwest::Error) -> Failed {
        let io_kind = io_error_kind(e);
        let text = self.scrubbed(&chain_text(e));
        let host = self.base.host_str().unwrap_or("the host");
        let hangup =
            matches!(io_kind, Some(io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe)) || is_incomplete_message(e);
        // TLS 1.3 servers check a client certificate after the handshake and may just hang up.
        let mtls_hint = if self.base.scheme() == "https" && !self.client_cert {
            "; if the server requires a client certificate (mutual TLS), pass --cert-file and --key-file"
        } else if self.base.scheme() == "http" {
            // A TLS port answers plain HTTP with a 400 and hangs up; the hang-up can reach the
            // client before the answer does.
            "; if the server speaks TLS, use https:// in the URL"
        } else {
            ""
        };
        let unreachable = |detail: String, retryable: bool| Failed { error: SourceError::Unreachable { url: self.shown.clone(), detail }, retryable };
        // A certificate problem does not go away by asking again.
        if looks_like_tls(&text) {
            return unreachable(tls_advice(&text, host, self.client_cert), false);
        }
        if e.is_connect() {
            return if io_kind == Some(io::ErrorKind::ConnectionRefused) {
                unreachable("connection refused".to_string(), false)
            } else if text.contains("dns error") {
                unreachable(format!("cannot resolve the host name {host} ({})", innermost(&text)), false)
            } else if e.is_timeout() || io_kind == Some(io::ErrorKind::TimedOut) {
                unreachable("no answer while connecting (connection timed out)".to_string(), false)
            } else if hangup {
                // A flaky network or a restarting server: worth another try.
                unreachable(format!("the connection was reset or closed while connecting{mtls_hint}"), true)
            } else {
                unreachable(innermost(&text), false)
            };
        }
        if e.is_timeout() {
            return Failed { error: SourceError::Timeout { url: endpoint.to_string(), after: self.request_timeout }, retryable: false };
        }
        let detail = if hangup {
            format!("the connection was reset or closed before the answer was complete ({}){mtls_hint}", innermost(&text))
        } else {
            innermost(&text)
        };
        Failed { error: SourceError::Other { detail: format!("request to {endpoint} failed: {detail}") }, retryable: hangup }
    }

    fn scrubbed(&self, s: &str) -> String {
        let mut out = s.to_string();
        for secret in &self.scrub {
            // A very short secret would garble ordinary words; it cannot plausibly leak into a
            // transport message anyway.
            if secret.expose().len() >= 3 && out.contains(secret.expose()) {
                out = out.replace(secret.expose(), "***");
            }
        }
        out
    }
}

impl Source for PrometheusClient {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>> {
        Box::pin(self.fetch(req))
    }

    fn info(&self) -> SourceInfo {
        SourceInfo { kind: crate::report::SourceKind::Prometheus, url: self.shown.clone(), selector: String::new() }
    }
}

/// The request's parameters for the debug log, values cut short.
fn describe_params(req: &Request) -> String {
    req.form(None)
        .iter()
        .map(|(k, v)| {
            let v = if v.chars().count() > 300 { format!("{}...", v.chars().take(300).collect::<String>()) } else { v.clone() };
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}
