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

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION, RETRY_AFTER};
use url::Url;

use super::{Exchange, Request, Source, SourceError};
use crate::report::SourceInfo;

/// Default cap on one response body: far above any sane vLLM query, far below running out of memory.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

const URL_FORMS: &str = "expected a URL like http://host:9090 or https://host/prometheus";

/// A credential. Printing it (Debug or Display) shows `***`; only [`Secret::expose`] gives the text.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Secret {
        Secret(s.into())
    }

    /// The secret text, for putting on the wire and nowhere else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret(s.to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// How TLS connections are checked. The defaults trust the built-in web roots only.
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// PEM file of CA certificates to trust in addition to the built-in roots (`--ca-file`).
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate and its private key, for servers that require mutual TLS
    /// (`--cert-file`, `--key-file`).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Accept any certificate (`--insecure-skip-verify`). Only for tests: the caller warns loudly.
    pub insecure_skip_verify: bool,
}

/// When to repeat a request that failed in a way that may pass on a second try.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included; 1 turns retries off.
    pub attempts: u32,
    /// Backoff before the first retry; doubled for each further one, with jitter.
    pub base_delay: Duration,
    /// Longest wait between two attempts, `Retry-After` included.
    pub max_delay: Duration,
    /// No retry starts when its wait would end after this much time from the client's creation (the
    /// run's overall deadline): waiting longer cannot change the outcome.
    pub deadline: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            attempts: 3,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(10),
            deadline: None,
        }
    }
}

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

impl PrometheusClient {
    pub fn new(opts: ClientOptions) -> Result<PrometheusClient, SourceError> {
        let (base, url_auth) = parse_base_url(&opts.base_url)?;
        let shown = show_url(&base);

        let given = [
            url_auth.is_some(),
            opts.basic_auth.is_some(),
            opts.bearer_token.is_some(),
        ];
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
            let header_name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| SourceError::Other {
                detail: format!("{:?} is not a valid HTTP header name", name),
            })?;
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
            .gzip(true)
            .connect_timeout(
                opts.query_timeout
                    .clamp(Duration::from_millis(100), Duration::from_secs(10)),
            )
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
        let http = builder.build().map_err(|e| SourceError::Other {
            detail: format!("cannot set up the HTTP client: {}", chain_text(&e)),
        })?;

        let mut scrub: Vec<Secret> = opts.headers.iter().map(|(_, v)| v.clone()).collect();
        if let Some((user, pass)) = &basic_auth {
            scrub.push(pass.clone());
            scrub.push(Secret(base64(format!("{user}:{}", pass.expose()).as_bytes())));
        }
        scrub.extend(opts.bearer_token.iter().cloned());
        // Longest first, so a secret that contains another is masked whole.
        scrub.sort_by_key(|s| std::cmp::Reverse(s.expose().len()));

        if let Some(log) = &opts.debug {
            let tls = &opts.tls;
            log.line(&format!(
                "source {shown}: headers on every request: {}; TLS: {}{}{}",
                header_names.join(", "),
                tls.ca_file.as_ref().map_or("built-in roots".to_string(), |p| format!(
                    "built-in roots + {}",
                    p.display()
                )),
                tls.client_cert
                    .as_ref()
                    .map_or(String::new(), |(c, _)| format!(", client certificate {}", c.display())),
                if tls.insecure_skip_verify {
                    ", certificates NOT verified"
                } else {
                    ""
                },
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
        let joined = format!(
            "{}/{}",
            self.base.path().trim_end_matches('/'),
            path.trim_start_matches('/')
        );
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
                    let wait = matches!(ex.http_status, 429 | 502 | 503 | 504)
                        .then(|| self.backoff(attempt, *retry_after))
                        .filter(|_| !is_final_api_error(&ex.body));
                    (summary, wait)
                }
                Err(f) => (f.error.to_string(), f.retryable.then(|| self.backoff(attempt, None))),
            };
            let retry_in =
                wait.filter(|w| attempt < self.retry.attempts && self.time_left().is_none_or(|left| *w < left));
            if let Some(log) = &self.debug {
                let mut line = format!(
                    "{} {} [{}] -> {summary} in {} ms (attempt {attempt})",
                    if matches!(req, Request::LabelValues { .. }) {
                        "GET"
                    } else {
                        "POST"
                    },
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
        let step = self
            .retry
            .base_delay
            .saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)))
            .min(self.retry.max_delay);
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
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(req.form(Some(self.query_timeout)))
            .finish();

        // Queries go as form-encoded POST (long PromQL breaks GET URLs behind proxies); the
        // label-values endpoint accepts only GET in Prometheus, so its few short parameters go in
        // the query string.
        let mut builder = if matches!(req, Request::LabelValues { .. }) {
            let mut u = endpoint;
            u.set_query(Some(&body));
            self.http.get(u).timeout(self.request_timeout)
        } else {
            self.http
                .post(endpoint)
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .timeout(self.request_timeout)
                .body(body)
        };
        if let Some((user, pass)) = &self.basic_auth {
            builder = builder.basic_auth(user, Some(pass.expose()));
        }
        if let Some(token) = &self.bearer_token {
            builder = builder.bearer_auth(token.expose());
        }

        let resp = builder
            .send()
            .await
            .map_err(|e| self.transport_error(&shown_endpoint, &e))?;
        let http_status = resp.status().as_u16();
        if (300..400).contains(&http_status) {
            let to = resp
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(crate::prom::redact_url)
                .unwrap_or_else(|| "an unnamed location".to_string());
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
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let retry_after = resp
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, chrono::Utc::now()));

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
        Ok((
            Exchange {
                http_status,
                content_type: self.scrubbed(&content_type),
                body: self.scrubbed(&body),
            },
            retry_after,
        ))
    }

    /// Translate a reqwest error into what a person can act on, without any credential in it.
    fn transport_error(&self, endpoint: &str, e: &reqwest::Error) -> Failed {
        let io_kind = io_error_kind(e);
        let text = self.scrubbed(&chain_text(e));
        let host = self.base.host_str().unwrap_or("the host");
        let hangup = matches!(
            io_kind,
            Some(io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe)
        ) || is_incomplete_message(e);
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
        let unreachable = |detail: String, retryable: bool| Failed {
            error: SourceError::Unreachable {
                url: self.shown.clone(),
                detail,
            },
            retryable,
        };
        // A certificate problem does not go away by asking again.
        if looks_like_tls(&text) {
            return unreachable(tls_advice(&text, host, self.client_cert), false);
        }
        if e.is_connect() {
            return if io_kind == Some(io::ErrorKind::ConnectionRefused) {
                unreachable("connection refused".to_string(), false)
            } else if text.contains("dns error") {
                unreachable(
                    format!("cannot resolve the host name {host} ({})", innermost(&text)),
                    false,
                )
            } else if e.is_timeout() || io_kind == Some(io::ErrorKind::TimedOut) {
                unreachable("no answer while connecting (connection timed out)".to_string(), false)
            } else if hangup {
                // A flaky network or a restarting server: worth another try.
                unreachable(
                    format!("the connection was reset or closed while connecting{mtls_hint}"),
                    true,
                )
            } else {
                unreachable(innermost(&text), false)
            };
        }
        if e.is_timeout() {
            return Failed {
                error: SourceError::Timeout {
                    url: endpoint.to_string(),
                    after: self.request_timeout,
                },
                retryable: false,
            };
        }
        let detail = if hangup {
            format!(
                "the connection was reset or closed before the answer was complete ({}){mtls_hint}",
                innermost(&text)
            )
        } else {
            innermost(&text)
        };
        Failed {
            error: SourceError::Other {
                detail: format!("request to {endpoint} failed: {detail}"),
            },
            retryable: hangup,
        }
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
        SourceInfo {
            kind: crate::report::SourceKind::Prometheus,
            url: self.shown.clone(),
            selector: String::new(),
        }
    }
}

/// Add the CA file, the client certificate and the verification switch to the client builder. Errors
/// name the flag and the file; a key's content never appears in them.
pub(crate) fn configure_tls(mut builder: reqwest::ClientBuilder, tls: &TlsOptions) -> Result<reqwest::ClientBuilder, SourceError> {
    let read = |flag: &str, path: &PathBuf| -> Result<Vec<u8>, SourceError> {
        std::fs::read(path).map_err(|e| SourceError::Other {
            detail: format!("{flag} {}: cannot read it: {}", path.display(), io_text(&e)),
        })
    };
    if let Some(path) = &tls.ca_file {
        let pem = read("--ca-file", path)?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default();
        if certs.is_empty() {
            return Err(SourceError::Other {
                detail: format!(
                    "--ca-file {}: holds no PEM certificate (expected -----BEGIN CERTIFICATE----- blocks)",
                    path.display()
                ),
            });
        }
        for cert in certs {
            builder = builder.add_root_certificate(cert);
        }
    }
    if let Some((cert_path, key_path)) = &tls.client_cert {
        let mut pem = read("--cert-file", cert_path)?;
        let key = read("--key-file", key_path)?;
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(SourceError::Other {
                detail: format!("--cert-file {}: holds no PEM certificate", cert_path.display()),
            });
        }
        if !String::from_utf8_lossy(&key).contains("PRIVATE KEY-----") {
            return Err(SourceError::Other {
                detail: format!(
                    "--key-file {}: holds no PEM private key (expected a -----BEGIN PRIVATE KEY----- block)",
                    key_path.display()
                ),
            });
        }
        pem.push(b'\n');
        pem.extend_from_slice(&key);
        let identity = reqwest::Identity::from_pem(&pem).map_err(|_| SourceError::Other {
            detail: format!(
                "--cert-file {} and --key-file {}: cannot be used together as a client certificate; give a PEM \
                 certificate and its PEM (PKCS#8, PKCS#1 or SEC1) private key",
                cert_path.display(),
                key_path.display()
            ),
        })?;
        builder = builder.identity(identity);
    }
    if tls.insecure_skip_verify {
        builder = builder.danger_accept_invalid_certs(true);
    }
    Ok(builder)
}

/// `Retry-After` is either whole seconds or an HTTP date.
pub(crate) fn parse_retry_after(v: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let secs = (at.with_timezone(&chrono::Utc) - now).num_milliseconds().max(0);
    Some(Duration::from_millis(secs as u64))
}

/// A Prometheus error envelope that repeating cannot fix: the server's own query timeout or a
/// cancelled query (the query is too heavy, not the server briefly unavailable).
fn is_final_api_error(body: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct E {
        #[serde(rename = "errorType")]
        error_type: Option<String>,
    }
    serde_json::from_str::<E>(body)
        .ok()
        .and_then(|e| e.error_type)
        .is_some_and(|t| t == "timeout" || t == "canceled")
}

/// The request's parameters for the debug log, values cut short.
fn describe_params(req: &Request) -> String {
    req.form(None)
        .iter()
        .map(|(k, v)| {
            let v = if v.chars().count() > 300 {
                format!("{}...", v.chars().take(300).collect::<String>())
            } else {
                v.clone()
            };
            format!("{k}={v}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A certificate or handshake failure in words, with the flag that fixes it.
fn tls_advice(text: &str, host: &str, client_cert: bool) -> String {
    let t = text.to_ascii_lowercase();
    let cause = innermost(text);
    let advice = if t.contains("unknownissuer") || t.contains("unknown issuer") || t.contains("unknownca") {
        "the server's certificate is not signed by a CA this machine trusts. If it uses a private CA, pass \
         that CA's certificate with --ca-file FILE"
            .to_string()
    } else if t.contains("notvalidforname") || t.contains("not valid for name") {
        format!(
            "the server's certificate is not valid for the name {host}; use a host name the certificate \
             lists, or have the certificate reissued"
        )
    } else if t.contains("expired") || t.contains("notvalidyet") {
        "the server's certificate has expired or is not valid yet; check the server's certificate and this \
         machine's clock"
            .to_string()
    } else if t.contains("certificaterequired") || t.contains("certificate required") {
        "the server requires a client certificate: pass --cert-file FILE and --key-file FILE".to_string()
    } else if (t.contains("badcertificate") || t.contains("bad certificate")) && !client_cert {
        "the server refused the connection for want of a certificate: it probably requires a client \
         certificate; pass --cert-file FILE and --key-file FILE"
            .to_string()
    } else if t.contains("badcertificate") || t.contains("bad certificate") {
        "the server rejected the client certificate (--cert-file/--key-file): check that the CA the server \
         trusts for clients signed it"
            .to_string()
    } else if t.contains("corrupt message") || t.contains("invalidcontenttype") || t.contains("wrong version") {
        "the server does not speak TLS on this port: write the URL with http:// (or use the server's HTTPS \
         port)"
            .to_string()
    } else if !client_cert {
        "check the server's certificate (--ca-file FILE adds a CA to trust); if the server requires a client \
         certificate (mutual TLS), pass --cert-file FILE and --key-file FILE"
            .to_string()
    } else {
        "check the server's certificate (--ca-file FILE adds a CA to trust) and the client certificate".to_string()
    };
    format!("TLS handshake failed: {advice} ({cause})")
}

fn io_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Standard base64 with padding, for masking the `Authorization: Basic` value.
fn base64(input: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(input)
}

/// The server went away mid-request or mid-answer: hyper's "connection closed before message
/// completed", or "channel closed" when the connection died before the request went out (an idle
/// connection closed by the server, a TLS 1.3 server hanging up after the handshake). Matched on
/// text: hyper is not a direct dependency, and its error kinds are not public through reqwest.
fn is_incomplete_message(e: &reqwest::Error) -> bool {
    let t = chain_text(e).to_ascii_lowercase();
    t.contains("connection closed")
        || t.contains("channel closed")
        || t.contains("was canceled")
        || t.contains("end of file before message length reached")
        || t.contains("unexpected eof")
}

/// Extra time the HTTP request gets beyond the server-side query timeout.
fn timeout_margin(query_timeout: Duration) -> Duration {
    (query_timeout / 10).clamp(Duration::from_millis(250), Duration::from_secs(5))
}

/// Parse and normalise the base URL: http(s) only, credentials taken out, path without trailing slash
/// (and without a pasted `/api/v1`, which every request adds itself).
fn parse_base_url(raw: &str) -> Result<(Url, Option<(String, Secret)>), SourceError> {
    let text = raw.trim();
    let bad = |why: &str| SourceError::Other {
        detail: format!("invalid Prometheus URL {:?}: {why}; {URL_FORMS}", crate::prom::redact_url(text)),
    };
    if text.is_empty() {
        return Err(bad("it is empty"));
    }
    if !text.contains("://") {
        return Err(bad("it has no scheme (http:// or https://)"));
    }
    let mut url = Url::parse(text).map_err(|e| {
        // `user:pa/ss@host`: the password's `/` ends the host early, and the error is about a port
        // or a host nobody typed.
        let after_scheme = text.split_once("://").map_or(text, |(_, rest)| rest);
        match after_scheme.contains('@') {
            true => bad(&format!(
                "{e}. A password in the URL holding /, ?, #, @ or : must be percent-encoded (/ as %2F), or passed with --basic-auth-user and ${}",
                crate::source::auth::ENV_BASIC_AUTH_PASSWORD
            )),
            false => bad(&e.to_string()),
        }
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(bad(&format!("the scheme is {:?}, not http or https", url.scheme())));
    }
    if url.host_str().is_none_or(|h| h.is_empty()) {
        return Err(bad("it has no host"));
    }
    if url.query().is_some() {
        return Err(bad(
            "it has a query string (?...), which a base URL cannot carry; use headers for tenants and keys",
        ));
    }
    url.set_fragment(None);

    let auth = if !url.username().is_empty() || url.password().is_some() {
        let user = percent_decode(url.username());
        let pass = percent_decode(url.password().unwrap_or(""));
        // Both setters only fail for URLs that cannot have credentials, which http(s) URLs can.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        Some((user, Secret(pass)))
    } else {
        None
    };

    let mut path = url.path().trim_end_matches('/').to_string();
    for suffix in ["/api/v1", "/api/v1/query"] {
        if path.ends_with(suffix) {
            path.truncate(path.len() - suffix.len());
        }
    }
    url.set_path(if path.is_empty() { "/" } else { &path });
    Ok((url, auth))
}

/// A URL as shown to people: no trailing slash after the host.
fn show_url(u: &Url) -> String {
    let s = u.as_str();
    if u.path() == "/" {
        s.trim_end_matches('/').to_string()
    } else {
        s.to_string()
    }
}

/// `%40` -> `@` for user names and passwords taken from a URL. Invalid escapes are kept as written.
fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// The messages of an error's sources, outermost first, joined by ": ". The top-level reqwest message
/// is skipped: it repeats the URL and says nothing about the cause.
fn chain_text(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(err) = cur {
        let msg = err.to_string();
        if !msg.is_empty() && parts.last() != Some(&msg) {
            parts.push(msg);
        }
        cur = err.source();
    }
    if parts.is_empty() {
        parts.push(e.to_string());
    }
    parts.join(": ")
}

/// The most specific part of a chain text, without ` (os error N)`.
fn innermost(text: &str) -> String {
    let last = text.rsplit(": ").next().unwrap_or(text).trim();
    let last = match last.find(" (os error") {
        Some(i) => &last[..i],
        None => last,
    };
    let mut chars = last.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => "unknown error".to_string(),
    }
}

fn looks_like_tls(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "certificate",
        "tls",
        "handshake",
        "ssl",
        "alert",
        "corrupt message",
        "invalidcontenttype",
    ]
    .iter()
    .any(|w| t.contains(w))
}

fn io_error_kind(e: &reqwest::Error) -> Option<io::ErrorKind> {
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io.kind());
        }
        cur = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// What the loopback server saw.
    #[derive(Debug, Default, Clone)]
    struct Seen {
        request_line: String,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Seen {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    enum Reply {
        /// Raw bytes written back after the request was read.
        Bytes(Vec<u8>),
        /// Read the request, then say nothing for a long time.
        Stall,
        /// Read the request, then reset the connection.
        Reset,
    }

    fn http_response(status: &str, content_type: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    /// A one-connection HTTP/1.1 server on 127.0.0.1 that records the request and sends `reply`.
    async fn serve_once(reply: Reply) -> (SocketAddr, Arc<Mutex<Option<Seen>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Mutex::new(None));
        let seen2 = seen.clone();
        tokio::spawn(async move {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let Some(req) = read_request(&mut sock).await else {
                return;
            };
            *seen2.lock().expect("lock") = Some(req);
            match reply {
                Reply::Bytes(b) => {
                    let _ = sock.write_all(&b).await;
                    let _ = sock.shutdown().await;
                }
                Reply::Stall => tokio::time::sleep(Duration::from_secs(30)).await,
                Reply::Reset => {
                    let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
                }
            }
        });
        (addr, seen)
    }

    /// An HTTP/1.1 server on 127.0.0.1 that answers successive connections with successive replies
    /// (`Reset` closes with a TCP RST right after reading the request) and records every request.
    async fn serve_seq(replies: Vec<Reply>) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        tokio::spawn(async move {
            for reply in replies {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let Some(req) = read_request(&mut sock).await else {
                    return;
                };
                seen2.lock().expect("lock").push(req);
                match reply {
                    Reply::Bytes(b) => {
                        let _ = sock.write_all(&b).await;
                        let _ = sock.shutdown().await;
                    }
                    Reply::Reset => {
                        let _ = socket2::SockRef::from(&sock).set_linger(Some(Duration::ZERO));
                        drop(sock);
                    }
                    Reply::Stall => tokio::time::sleep(Duration::from_secs(30)).await,
                }
            }
        });
        (addr, seen)
    }

    fn retrying_client(addr: SocketAddr, retry: RetryPolicy, log: Option<DebugLog>) -> PrometheusClient {
        PrometheusClient::new(ClientOptions {
            base_url: format!("http://{addr}"),
            query_timeout: Duration::from_secs(5),
            retry,
            debug: log,
            ..ClientOptions::default()
        })
        .expect("client")
    }

    fn fast_retries(attempts: u32) -> RetryPolicy {
        RetryPolicy {
            attempts,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(2),
            deadline: None,
        }
    }

    fn capture() -> (DebugLog, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l2 = lines.clone();
        (
            DebugLog::new(move |s| l2.lock().expect("lock").push(s.to_string())),
            lines,
        )
    }

    async fn read_request(sock: &mut TcpStream) -> Option<Seen> {
        let mut buf: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            let n = sock.read(&mut chunk).await.ok()?;
            if n == 0 || buf.len() > 1 << 20 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let request_line = lines.next()?.to_string();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = buf[head_end + 4..].to_vec();
        while body.len() < len {
            let n = sock.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
        Some(Seen {
            request_line,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    fn client(base: &str) -> PrometheusClient {
        PrometheusClient::new(ClientOptions {
            base_url: base.to_string(),
            query_timeout: Duration::from_secs(5),
            ..ClientOptions::default()
        })
        .expect("valid options")
    }

    fn instant() -> Request {
        Request::Instant {
            query: "sum(rate(vllm:request_success_total{model_name=\"a b\"}[5m]))".into(),
            time: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        }
    }

    const OK_BODY: &str = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;

    #[test]
    fn joins_paths_below_the_base_path_prefix() {
        let cases = [
            ("http://host:9090", "http://host:9090/api/v1/query"),
            ("http://host:9090/", "http://host:9090/api/v1/query"),
            ("https://host/prometheus", "https://host/prometheus/api/v1/query"),
            ("https://host/prometheus/", "https://host/prometheus/api/v1/query"),
            (
                "https://host/select/0/prometheus//",
                "https://host/select/0/prometheus/api/v1/query",
            ),
            ("http://host:9090/api/v1/", "http://host:9090/api/v1/query"),
            ("https://host/prom/api/v1", "https://host/prom/api/v1/query"),
        ];
        for (base, want) in cases {
            assert_eq!(client(base).endpoint("api/v1/query").as_str(), want, "base {base}");
        }
        assert_eq!(
            client("https://host/prometheus")
                .endpoint("api/v1/label/__name__/values")
                .as_str(),
            "https://host/prometheus/api/v1/label/__name__/values"
        );
    }

    #[test]
    fn info_shows_the_base_url_without_trailing_slash_or_credentials() {
        let c = client("https://alice:s3cr%40t@host/prometheus/");
        assert_eq!(
            c.info(),
            SourceInfo {
                kind: crate::report::SourceKind::Prometheus,
                url: "https://host/prometheus".into(),
                selector: String::new()
            }
        );
        assert_eq!(client("http://host:9090/").info().url, "http://host:9090");
        assert!(!format!("{c:?}").contains("s3cr"));
    }

    #[test]
    fn rejects_urls_that_are_not_http_base_urls_and_says_what_is_expected() {
        for bad in [
            "",
            "localhost:9090",
            "ftp://host/",
            "http://",
            "not a url",
            "http://host:9090/?tenant=x",
        ] {
            let err = PrometheusClient::new(ClientOptions {
                base_url: bad.into(),
                ..ClientOptions::default()
            })
            .expect_err(bad);
            let msg = err.to_string();
            assert!(msg.contains("http://host:9090"), "{msg}");
        }
    }

    #[test]
    fn an_invalid_url_never_echoes_its_password() {
        for bad in [
            "alice:hunter22@host:9090",
            "ftp://alice:hunter22@host/",
            "http://alice:hunter22@host/?x=1",
            "http://alice:hun/ter22@host:9090",
        ] {
            let err = PrometheusClient::new(ClientOptions {
                base_url: bad.into(),
                ..ClientOptions::default()
            })
            .expect_err(bad);
            assert!(!err.to_string().contains("hunter22") && !err.to_string().contains("ter22"), "{err}");
        }
        // A password whose `/` cut the host short: the error says to percent-encode it.
        let err = PrometheusClient::new(ClientOptions { base_url: "http://alice:hun/ter22@host:9090".into(), ..ClientOptions::default() }).expect_err("a cut host");
        assert!(err.to_string().contains("percent-encoded (/ as %2F)"), "{err}");
    }

    #[test]
    fn credentials_given_twice_are_refused() {
        let err = PrometheusClient::new(ClientOptions {
            base_url: "http://u:p@host".into(),
            bearer_token: Some("tok".into()),
            ..ClientOptions::default()
        })
        .expect_err("two kinds of credentials");
        assert!(err.to_string().contains("more than once"));
    }

    #[test]
    fn an_invalid_header_value_is_refused_without_showing_it() {
        let err = PrometheusClient::new(ClientOptions {
            headers: vec![("X-Api-Key".into(), "abc\ndef-secret".into())],
            ..ClientOptions::default()
        })
        .expect_err("newline in header");
        let msg = err.to_string();
        assert!(msg.contains("x-api-key") && !msg.contains("def-secret"), "{msg}");
    }

    #[test]
    fn secrets_print_as_stars() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "*** ***");
        let opts = ClientOptions {
            bearer_token: Some(s.clone()),
            basic_auth: Some(("bob".into(), s.clone())),
            headers: vec![("X-Scope-OrgID".into(), s)],
            ..ClientOptions::default()
        };
        assert!(!format!("{opts:?}").contains("hunter2"));
    }

    #[test]
    fn percent_escapes_in_url_credentials_are_decoded() {
        assert_eq!(percent_decode("p%40ss%3Aw"), "p@ss:w");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    #[tokio::test]
    async fn sends_a_form_encoded_post_below_the_path_prefix() {
        let (addr, seen) = serve_once(Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))).await;
        let c = client(&format!("http://{addr}/prometheus/"));
        let ex = c.send(&instant()).await.expect("exchange");
        assert_eq!(
            ex,
            Exchange {
                http_status: 200,
                content_type: "application/json".into(),
                body: OK_BODY.into()
            }
        );

        let seen = seen.lock().expect("lock").clone().expect("server saw a request");
        assert_eq!(seen.request_line, "POST /prometheus/api/v1/query HTTP/1.1");
        assert_eq!(seen.header("content-type"), Some("application/x-www-form-urlencoded"));
        assert_eq!(seen.header("accept"), Some("application/json"));
        assert_eq!(
            seen.header("user-agent"),
            Some(concat!("vllm-diag/", env!("CARGO_PKG_VERSION")))
        );
        assert!(seen.header("accept-encoding").is_some_and(|v| v.contains("gzip")));
        assert!(seen.header("authorization").is_none());
        let form: Vec<(String, String)> = url::form_urlencoded::parse(seen.body.as_bytes()).into_owned().collect();
        assert_eq!(form, instant().form(Some(Duration::from_secs(5))));
        assert!(form.contains(&("timeout".to_string(), "5000ms".to_string())));
    }

    #[tokio::test]
    async fn url_credentials_are_sent_as_basic_auth() {
        let (addr, seen) = serve_once(Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))).await;
        let c = client(&format!("http://user:p%40ss@{addr}"));
        c.send(&instant()).await.expect("exchange");
        let seen = seen.lock().expect("lock").clone().expect("request");
        // base64("user:p@ss")
        assert_eq!(seen.header("authorization"), Some("Basic dXNlcjpwQHNz"));
        assert_eq!(c.info().url, format!("http://{addr}"));
    }

    #[tokio::test]
    async fn bearer_token_and_custom_headers_are_sent() {
        let (addr, seen) = serve_once(Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))).await;
        let c = PrometheusClient::new(ClientOptions {
            base_url: format!("http://{addr}"),
            bearer_token: Some("tok-123".into()),
            headers: vec![("X-Scope-OrgID".into(), "tenant-a|tenant-b".into())],
            ..ClientOptions::default()
        })
        .expect("client");
        c.send(&instant()).await.expect("exchange");
        let seen = seen.lock().expect("lock").clone().expect("request");
        assert_eq!(seen.header("authorization"), Some("Bearer tok-123"));
        assert_eq!(seen.header("x-scope-orgid"), Some("tenant-a|tenant-b"));
    }

    #[tokio::test]
    async fn any_http_status_comes_back_as_an_exchange() {
        let html = "<html><title>502 Bad Gateway</title></html>";
        let (addr, _) = serve_once(Reply::Bytes(http_response("502 Bad Gateway", "text/html", html))).await;
        let c = retrying_client(addr, fast_retries(1), None);
        let ex = c.send(&instant()).await.expect("exchange");
        assert_eq!(
            ex,
            Exchange {
                http_status: 502,
                content_type: "text/html".into(),
                body: html.into()
            }
        );
        let (addr, _) = serve_once(Reply::Bytes(http_response("418 I'm a teapot", "text/html", html))).await;
        let ex = client(&format!("http://{addr}"))
            .send(&instant())
            .await
            .expect("exchange");
        assert_eq!(
            ex,
            Exchange {
                http_status: 418,
                content_type: "text/html".into(),
                body: html.into()
            }
        );
    }

    #[tokio::test]
    async fn a_redirect_that_would_drop_the_post_body_is_an_error_naming_the_target() {
        let reply = "HTTP/1.1 302 Found\r\nLocation: https://u:pw1234@other/prometheus/api/v1/query\r\n\
                     Content-Length: 0\r\nConnection: close\r\n\r\n";
        let (addr, _) = serve_once(Reply::Bytes(reply.as_bytes().to_vec())).await;
        let err = client(&format!("http://{addr}"))
            .send(&instant())
            .await
            .expect_err("redirect");
        let msg = err.to_string();
        assert!(
            msg.contains("redirects (HTTP 302) to https://***@other/prometheus"),
            "{msg}"
        );
        assert!(!msg.contains("pw1234"));
    }

    #[tokio::test]
    async fn a_server_that_stalls_maps_to_timeout() {
        let (addr, _) = serve_once(Reply::Stall).await;
        let c = PrometheusClient::new(ClientOptions {
            base_url: format!("http://{addr}"),
            query_timeout: Duration::from_millis(200),
            ..ClientOptions::default()
        })
        .expect("client");
        let started = std::time::Instant::now();
        let err = c.send(&instant()).await.expect_err("must time out");
        assert!(started.elapsed() < Duration::from_secs(5));
        match err {
            SourceError::Timeout { url, after } => {
                assert_eq!(url, format!("http://{addr}/api/v1/query"));
                assert_eq!(after, Duration::from_millis(450));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn nothing_listening_maps_to_connection_refused_without_credentials() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let c = client(&format!("http://admin:hunter22@127.0.0.1:{port}/prom"));
        let err = c.send(&instant()).await.expect_err("nothing listens");
        assert_eq!(
            err,
            SourceError::Unreachable {
                url: format!("http://127.0.0.1:{port}/prom"),
                detail: "connection refused".into()
            }
        );
        assert!(err.is_unreachable());
        assert!(!format!("{err} {err:?}").contains("hunter22"));
        assert!(!format!("{err} {err:?}").contains("admin"));
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_a_decode_error() {
        let big = "x".repeat(10_000);
        let with_length = http_response("200 OK", "application/json", &big);
        let without_length =
            format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{big}").into_bytes();
        for reply in [with_length, without_length] {
            let (addr, _) = serve_once(Reply::Bytes(reply)).await;
            let c = PrometheusClient::new(ClientOptions {
                base_url: format!("http://{addr}"),
                max_body_bytes: 1000,
                ..ClientOptions::default()
            })
            .expect("client");
            let err = c.send(&instant()).await.expect_err("too big");
            let SourceError::Decode { detail, .. } = &err else {
                panic!("{err:?}")
            };
            assert!(detail.starts_with("response larger than 1000 bytes"), "{detail}");
        }
    }


    #[test]
    fn innermost_keeps_the_cause_without_os_error_codes() {
        assert_eq!(
            innermost("client error (Connect): tcp connect error: Connection refused (os error 111)"),
            "connection refused"
        );
        assert_eq!(innermost(""), "unknown error");
    }

    #[tokio::test]
    async fn a_503_is_retried_and_the_next_answer_counts() {
        let (addr, seen) = serve_seq(vec![
            Reply::Bytes(http_response("503 Service Unavailable", "text/plain", "restarting")),
            Reply::Bytes(http_response("200 OK", "application/json", OK_BODY)),
        ])
        .await;
        let c = retrying_client(addr, fast_retries(3), None);
        let ex = c.send(&instant()).await.expect("exchange");
        assert_eq!(ex.http_status, 200);
        assert_eq!(seen.lock().expect("lock").len(), 2);
        let stats = c.stats();
        assert_eq!((stats.requests, stats.attempts), (1, 2));
        assert_eq!(stats.bytes, ("restarting".len() + OK_BODY.len()) as u64);
    }

    #[tokio::test]
    async fn retry_after_on_a_429_sets_the_wait() {
        let reply =
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 4\r\nConnection: close\r\n\r\nslow"
                .to_string();
        let (addr, seen) = serve_seq(vec![
            Reply::Bytes(reply.into_bytes()),
            Reply::Bytes(http_response("200 OK", "application/json", OK_BODY)),
        ])
        .await;
        let (log, lines) = capture();
        let c = retrying_client(addr, fast_retries(3), Some(log));
        assert_eq!(c.send(&instant()).await.expect("exchange").http_status, 200);
        assert_eq!(seen.lock().expect("lock").len(), 2);
        let lines = lines.lock().expect("lock").join("\n");
        assert!(
            lines.contains("HTTP 429, 4 bytes") && lines.contains("retrying in 1000 ms"),
            "{lines}"
        );
    }

    #[test]
    fn retry_after_is_read_as_seconds_or_as_an_http_date() {
        let now = Utc.with_ymd_and_hms(2015, 10, 21, 7, 28, 0).unwrap();
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[tokio::test]
    async fn client_errors_are_never_retried() {
        let body = r#"{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}"#;
        for status in ["400 Bad Request", "422 Unprocessable Entity", "404 Not Found"] {
            let (addr, seen) = serve_seq(vec![
                Reply::Bytes(http_response(status, "application/json", body)),
                Reply::Bytes(http_response("200 OK", "application/json", OK_BODY)),
            ])
            .await;
            let ex = retrying_client(addr, fast_retries(3), None)
                .send(&instant())
                .await
                .expect("exchange");
            assert_eq!(ex.http_status.to_string(), status[..3], "{status}");
            assert_eq!(seen.lock().expect("lock").len(), 1, "{status} was retried");
        }
    }

    #[tokio::test]
    async fn a_server_side_query_timeout_is_not_retried() {
        let body = r#"{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}"#;
        let (addr, seen) = serve_seq(vec![
            Reply::Bytes(http_response("503 Service Unavailable", "application/json", body)),
            Reply::Bytes(http_response("200 OK", "application/json", OK_BODY)),
        ])
        .await;
        let ex = retrying_client(addr, fast_retries(3), None)
            .send(&instant())
            .await
            .expect("exchange");
        assert_eq!(ex.http_status, 503);
        assert_eq!(seen.lock().expect("lock").len(), 1);
    }

    #[tokio::test]
    async fn retries_stop_after_the_last_attempt_with_the_last_answer() {
        let unavailable = || Reply::Bytes(http_response("503 Service Unavailable", "text/plain", "busy"));
        let (addr, seen) = serve_seq(vec![
            unavailable(),
            unavailable(),
            unavailable(),
            Reply::Bytes(http_response("200 OK", "application/json", OK_BODY)),
        ])
        .await;
        let ex = retrying_client(addr, fast_retries(3), None)
            .send(&instant())
            .await
            .expect("exchange");
        assert_eq!((ex.http_status, ex.body.as_str()), (503, "busy"));
        assert_eq!(seen.lock().expect("lock").len(), 3);
    }

    #[tokio::test]
    async fn no_retry_starts_that_would_end_after_the_deadline() {
        let reply = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 120\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy";
        let (addr, seen) = serve_seq(vec![
            Reply::Bytes(reply.as_bytes().to_vec()),
            Reply::Bytes(http_response("200 OK", "application/json", OK_BODY)),
        ])
        .await;
        let (log, lines) = capture();
        let policy = RetryPolicy {
            deadline: Some(Duration::from_secs(60)),
            max_delay: Duration::from_secs(300),
            ..fast_retries(3)
        };
        let ex = retrying_client(addr, policy, Some(log))
            .send(&instant())
            .await
            .expect("exchange");
        assert_eq!(ex.http_status, 503);
        assert_eq!(seen.lock().expect("lock").len(), 1);
        assert!(lines
            .lock()
            .expect("lock")
            .join("\n")
            .contains("not retried (no attempts or time left)"));
    }

    #[tokio::test]
    async fn a_connection_reset_is_retried() {
        let (addr, seen) = serve_seq(vec![
            Reply::Reset,
            Reply::Bytes(http_response("200 OK", "application/json", OK_BODY)),
        ])
        .await;
        let ex = retrying_client(addr, fast_retries(3), None)
            .send(&instant())
            .await
            .expect("exchange");
        assert_eq!(ex.http_status, 200);
        assert_eq!(seen.lock().expect("lock").len(), 2);
    }

    #[tokio::test]
    async fn a_reset_on_every_attempt_ends_in_an_error_that_says_so() {
        let (addr, _) = serve_seq(vec![Reply::Reset, Reply::Reset]).await;
        let err = retrying_client(addr, fast_retries(2), None)
            .send(&instant())
            .await
            .expect_err("reset twice");
        let text = err.to_string();
        assert!(
            text.contains(&format!("http://{addr}/api/v1/query")) && text.contains("reset"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_body_that_echoes_a_credential_has_it_masked() {
        // Some proxies' error pages print the request headers back.
        let page = "<html><body>Bad request. Authorization: Basic YWxpY2U6cHctZWNobw== pw-echo tok</body></html>";
        let (addr, _) = serve_once(Reply::Bytes(http_response("400 Bad Request", "text/html", page))).await;
        let c = PrometheusClient::new(ClientOptions {
            base_url: format!("http://{addr}"),
            basic_auth: Some(("alice".into(), "pw-echo".into())),
            ..ClientOptions::default()
        })
        .expect("client");
        let ex = c.send(&instant()).await.expect("exchange");
        assert!(
            !ex.body.contains("pw-echo") && !ex.body.contains("YWxpY2U6cHctZWNobw=="),
            "{}",
            ex.body
        );
        assert!(ex.body.contains("Basic ***"), "{}", ex.body);
    }

    #[tokio::test]
    async fn the_debug_log_names_every_attempt_and_no_credential() {
        let (addr, _) = serve_once(Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))).await;
        let (log, lines) = capture();
        let c = PrometheusClient::new(ClientOptions {
            base_url: format!("http://{addr}/prom"),
            bearer_token: Some("tok-debug-1".into()),
            headers: vec![("X-Scope-OrgID".into(), "tenant-secret".into())],
            debug: Some(log),
            ..ClientOptions::default()
        })
        .expect("client");
        c.send(&instant()).await.expect("exchange");
        let text = lines.lock().expect("lock").join("\n");
        assert!(
            text.contains("x-scope-orgid (value masked)") && text.contains("authorization: Bearer (masked)"),
            "{text}"
        );
        assert!(
            text.contains(&format!("POST http://{addr}/prom/api/v1/query [query=sum(rate(")),
            "{text}"
        );
        assert!(text.contains("-> HTTP 200"), "{text}");
        assert!(
            !text.contains("tok-debug-1") && !text.contains("tenant-secret"),
            "{text}"
        );
    }

    #[test]
    fn base64_matches_the_standard_alphabet_and_padding() {
        assert_eq!(base64(b"user:p@ss"), "dXNlcjpwQHNz");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
        assert_eq!(base64(b""), "");
    }

    #[test]
    fn tls_failures_are_explained_with_the_flag_that_fixes_them() {
        let unknown = tls_advice("invalid peer certificate: UnknownIssuer", "prom", false);
        assert!(
            unknown.contains("--ca-file") && unknown.contains("nknownIssuer"),
            "{unknown}"
        );
        assert!(tls_advice("received corrupt message of type InvalidContentType", "prom", false).contains("http://"));
        assert!(
            tls_advice("invalid peer certificate: NotValidForName", "prom.example", false).contains("prom.example")
        );
        assert!(tls_advice("received fatal alert: CertificateRequired", "h", false).contains("--cert-file"));
        assert!(
            tls_advice("received fatal alert: BadCertificate", "h", false).contains("requires a client certificate")
        );
        assert!(
            tls_advice("received fatal alert: BadCertificate", "h", true).contains("rejected the client certificate")
        );
    }

    #[test]
    fn tls_files_that_are_missing_or_not_pem_name_the_flag_and_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "hello").expect("write");
        let missing = dir.path().join("missing.pem");
        let try_tls = |tls: TlsOptions| {
            PrometheusClient::new(ClientOptions {
                base_url: "https://h".into(),
                tls,
                ..ClientOptions::default()
            })
            .expect_err("bad TLS files")
            .to_string()
        };
        let e = try_tls(TlsOptions {
            ca_file: Some(missing.clone()),
            ..TlsOptions::default()
        });
        assert!(
            e.starts_with("--ca-file") && e.contains("missing.pem") && e.contains("cannot read"),
            "{e}"
        );
        let e = try_tls(TlsOptions {
            ca_file: Some(junk.clone()),
            ..TlsOptions::default()
        });
        assert!(e.contains("--ca-file") && e.contains("no PEM certificate"), "{e}");
        let e = try_tls(TlsOptions {
            client_cert: Some((junk.clone(), junk.clone())),
            ..TlsOptions::default()
        });
        assert!(e.contains("--cert-file") && e.contains("junk.pem"), "{e}");
    }
}
