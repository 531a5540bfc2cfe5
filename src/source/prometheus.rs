//! The HTTP client for any Prometheus-compatible query API (Prometheus, Thanos, Mimir, VictoriaMetrics).
//!
//! It only moves bytes: every answer, whatever its HTTP status, comes back as a raw [`Exchange`] and
//! [`super::decode`] decides what it means. That split is what lets `--record` store exactly what the
//! server said and `--replay` feed the same bytes through the same decoder.
//!
//! Three things here exist because real deployments get them wrong in ways a user cannot see:
//! - Base URLs often carry a path prefix (`https://host/prometheus`); joining keeps it.
//! - Credentials come from the URL (`http://user:pass@host`), a bearer token, or headers such as
//!   `X-Scope-OrgID`; none of them may ever be printed, so every URL we show is stripped and every
//!   transport message is built from parts that cannot hold them.
//! - Transport failures are translated into the three cases a person can act on: the server cannot be
//!   reached (wrong URL, down, TLS), it did not answer in time, or something else went wrong.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::time::Duration;

use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, LOCATION};
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
    /// Every secret's text, scrubbed from any message built from foreign error text.
    scrub: Vec<Secret>,
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
        for (name, value) in &opts.headers {
            let header_name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| SourceError::Other {
                detail: format!("{:?} is not a valid HTTP header name", name),
            })?;
            let mut header_value = HeaderValue::from_str(value.expose()).map_err(|_| SourceError::Other {
                detail: format!(
                    "the value of header {header_name} holds characters HTTP does not allow (line breaks or \
                     other control characters)"
                ),
            })?;
            header_value.set_sensitive(true);
            headers.append(header_name, header_value);
        }

        let request_timeout = opts.query_timeout + timeout_margin(opts.query_timeout);
        let http = reqwest::Client::builder()
            .user_agent(concat!("vllm-diag/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .gzip(true)
            .connect_timeout(
                opts.query_timeout
                    .clamp(Duration::from_millis(100), Duration::from_secs(10)),
            )
            .redirect(reqwest::redirect::Policy::custom(|attempt| {
                // Only 307 and 308 keep the method and body; following a 301/302/303 would turn the
                // POST into a GET without the query.
                let keeps_post = matches!(attempt.status().as_u16(), 307 | 308);
                if keeps_post && attempt.previous().len() < 5 {
                    attempt.follow()
                } else {
                    attempt.stop()
                }
            }))
            .build()
            .map_err(|e| SourceError::Other {
                detail: format!("cannot set up the HTTP client: {}", chain_text(&e)),
            })?;

        let mut scrub: Vec<Secret> = opts.headers.iter().map(|(_, v)| v.clone()).collect();
        scrub.extend(basic_auth.iter().map(|(_, p)| p.clone()));
        scrub.extend(opts.bearer_token.iter().cloned());

        Ok(PrometheusClient {
            http,
            base,
            shown,
            basic_auth,
            bearer_token: opts.bearer_token,
            query_timeout: opts.query_timeout,
            request_timeout,
            max_body_bytes: opts.max_body_bytes,
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

    async fn fetch(&self, req: &Request) -> Result<Exchange, SourceError> {
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

        let mut resp = builder
            .send()
            .await
            .map_err(|e| self.transport_error(&shown_endpoint, &e))?;
        let http_status = resp.status().as_u16();
        if (300..400).contains(&http_status) {
            let to = resp
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(redact_url_text)
                .unwrap_or_else(|| "an unnamed location".to_string());
            return Err(SourceError::Other {
                detail: format!(
                    "{shown_endpoint} redirects (HTTP {http_status}) to {to}; use the final URL's API base as the \
                     Prometheus URL"
                ),
            });
        }
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();

        let too_big = |url: &str| SourceError::Decode {
            url: url.to_string(),
            detail: format!(
                "response larger than {} bytes, the most vllm-diag reads; narrow the selector or shorten the window",
                self.max_body_bytes
            ),
        };
        if resp.content_length().is_some_and(|n| n > self.max_body_bytes as u64) {
            return Err(too_big(&shown_endpoint));
        }
        let mut buf: Vec<u8> = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| self.transport_error(&shown_endpoint, &e))?
        {
            if buf.len() + chunk.len() > self.max_body_bytes {
                return Err(too_big(&shown_endpoint));
            }
            buf.extend_from_slice(&chunk);
        }
        let body = match String::from_utf8(buf) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        };
        Ok(Exchange {
            http_status,
            content_type,
            body,
        })
    }

    /// Translate a reqwest error into what a person can act on, without any credential in it.
    fn transport_error(&self, endpoint: &str, e: &reqwest::Error) -> SourceError {
        let io_kind = io_error_kind(e);
        let text = self.scrubbed(&chain_text(e));
        if e.is_connect() {
            let detail = if io_kind == Some(io::ErrorKind::ConnectionRefused) {
                "connection refused".to_string()
            } else if text.contains("dns error") {
                let host = self.base.host_str().unwrap_or("the host");
                format!("cannot resolve the host name {host} ({})", innermost(&text))
            } else if e.is_timeout() || io_kind == Some(io::ErrorKind::TimedOut) {
                "no answer while connecting (connection timed out)".to_string()
            } else if looks_like_tls(&text) {
                format!("TLS handshake failed: {}", innermost(&text))
            } else if io_kind == Some(io::ErrorKind::ConnectionReset) {
                "connection reset while connecting".to_string()
            } else {
                innermost(&text)
            };
            return SourceError::Unreachable {
                url: self.shown.clone(),
                detail,
            };
        }
        if e.is_timeout() {
            return SourceError::Timeout {
                url: endpoint.to_string(),
                after: self.request_timeout,
            };
        }
        SourceError::Other {
            detail: format!("request to {endpoint} failed: {}", innermost(&text)),
        }
    }

    fn scrubbed(&self, s: &str) -> String {
        let mut out = s.to_string();
        for secret in &self.scrub {
            // A very short secret would garble ordinary words; it cannot plausibly leak into a
            // transport message anyway.
            if secret.expose().len() >= 3 {
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
            kind: "prometheus".to_string(),
            url: self.shown.clone(),
            selector: String::new(),
        }
    }
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
        detail: format!("invalid Prometheus URL {:?}: {why}; {URL_FORMS}", redact_url_text(text)),
    };
    if text.is_empty() {
        return Err(bad("it is empty"));
    }
    if !text.contains("://") {
        return Err(bad("it has no scheme (http:// or https://)"));
    }
    let mut url = Url::parse(text).map_err(|e| bad(&e.to_string()))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(bad(&format!("the scheme is {:?}, not http or https", url.scheme())));
    }
    if !url.host_str().is_some_and(|h| !h.is_empty()) {
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

/// Hide `user:pass@` in a URL-ish text that may not even parse.
fn redact_url_text(s: &str) -> String {
    let (scheme, rest) = match s.find("://") {
        Some(i) => (&s[..i + 3], &s[i + 3..]),
        None => ("", s),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}***@{}", &rest[at + 1..]),
        None => s.to_string(),
    }
}

/// `%40` -> `@` for user names and passwords taken from a URL. Invalid escapes are kept as written.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(b) = hex {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
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
    ["certificate", "tls", "handshake", "ssl", "alert"]
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
            }
        });
        (addr, seen)
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
                kind: "prometheus".into(),
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
        ] {
            let err = PrometheusClient::new(ClientOptions {
                base_url: bad.into(),
                ..ClientOptions::default()
            })
            .expect_err(bad);
            assert!(!err.to_string().contains("hunter22"), "{err}");
        }
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
        let ex = client(&format!("http://{addr}"))
            .send(&instant())
            .await
            .expect("exchange");
        assert_eq!(
            ex,
            Exchange {
                http_status: 502,
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
    fn redacts_credentials_in_url_text() {
        assert_eq!(redact_url_text("http://a:b@host/x@y"), "http://***@host/x@y");
        assert_eq!(redact_url_text("a:b@host:9090"), "***@host:9090");
        assert_eq!(redact_url_text("http://host/p"), "http://host/p");
    }

    #[test]
    fn innermost_keeps_the_cause_without_os_error_codes() {
        assert_eq!(
            innermost("client error (Connect): tcp connect error: Connection refused (os error 111)"),
            "connection refused"
        );
        assert_eq!(innermost(""), "unknown error");
    }
}
