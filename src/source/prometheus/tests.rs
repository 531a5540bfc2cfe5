use super::base_url::*;
use super::retry::*;
use super::tls::*;
use super::transport::*;

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
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
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
    format!("HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).into_bytes()
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
    RetryPolicy { attempts, base_delay: Duration::from_millis(5), max_delay: Duration::from_secs(2), deadline: None }
}

fn capture() -> (DebugLog, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    (DebugLog::new(move |s| l2.lock().expect("lock").push(s.to_string())), lines)
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
    let headers: Vec<(String, String)> = lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    let len: usize = headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("content-length")).and_then(|(_, v)| v.parse().ok()).unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Seen { request_line, headers, body: String::from_utf8_lossy(&body).into_owned() })
}

fn client(base: &str) -> PrometheusClient {
    PrometheusClient::new(ClientOptions { base_url: base.to_string(), query_timeout: Duration::from_secs(5), ..ClientOptions::default() })
        .expect("valid options")
}

fn instant() -> Request {
    Request::Instant { query: "sum(rate(vllm:request_success_total{model_name=\"a b\"}[5m]))".into(), time: Utc.timestamp_opt(1_700_000_000, 0).unwrap() }
}

const OK_BODY: &str = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;

#[test]
fn joins_paths_below_the_base_path_prefix() {
    let cases = [
        ("http://host:9090", "http://host:9090/api/v1/query"),
        ("http://host:9090/", "http://host:9090/api/v1/query"),
        ("https://host/prometheus", "https://host/prometheus/api/v1/query"),
        ("https://host/prometheus/", "https://host/prometheus/api/v1/query"),
        ("https://host/select/0/prometheus//", "https://host/select/0/prometheus/api/v1/query"),
        ("http://host:9090/api/v1/", "http://host:9090/api/v1/query"),
        ("https://host/prom/api/v1", "https://host/prom/api/v1/query"),
    ];
    for (base, want) in cases {
        assert_eq!(client(base).endpoint("api/v1/query").as_str(), want, "base {base}");
    }
    assert_eq!(client("https://host/prometheus").endpoint("api/v1/label/__name__/values").as_str(), "https://host/prometheus/api/v1/label/__name__/values");
}

#[test]
fn info_shows_the_base_url_without_trailing_slash_or_credentials() {
    let c = client("https://alice:s3cr%40t@host/prometheus/");
    assert_eq!(c.info(), SourceInfo { kind: crate::report::SourceKind::Prometheus, url: "https://host/prometheus".into(), selector: String::new() });
    assert_eq!(client("http://host:9090/").info().url, "http://host:9090");
    assert!(!format!("{c:?}").contains("s3cr"));
}

#[test]
fn rejects_urls_that_are_not_http_base_urls_and_says_what_is_expected() {
    for bad in ["", "localhost:9090", "ftp://host/", "http://", "not a url", "http://host:9090/?tenant=x"] {
        let err = PrometheusClient::new(ClientOptions { base_url: bad.into(), ..ClientOptions::default() }).expect_err(bad);
        let msg = err.to_string();
        assert!(msg.contains("http://host:9090"), "{msg}");
    }
}

#[test]
fn an_invalid_url_never_echoes_its_password() {
    for bad in ["alice:hunter22@host:9090", "ftp://alice:hunter22@host/", "http://alice:hunter22@host/?x=1", "http://alice:hun/ter22@host:9090"] {
        let err = PrometheusClient::new(ClientOptions { base_url: bad.into(), ..ClientOptions::default() }).expect_err(bad);
        assert!(!err.to_string().contains("hunter22") && !err.to_string().contains("ter22"), "{err}");
    }
    // A password whose `/` cut the host short: the error says to percent-encode it.
    let err = PrometheusClient::new(ClientOptions { base_url: "http://alice:hun/ter22@host:9090".into(), ..ClientOptions::default() }).expect_err("a cut host");
    assert!(err.to_string().contains("percent-encoded (/ as %2F)"), "{err}");
}

#[test]
fn credentials_given_twice_are_refused() {
    let err = PrometheusClient::new(ClientOptions { base_url: "http://u:p@host".into(), bearer_token: Some("tok".into()), ..ClientOptions::default() })
        .expect_err("two kinds of credentials");
    assert!(err.to_string().contains("more than once"));
}

#[test]
fn an_invalid_header_value_is_refused_without_showing_it() {
    let err = PrometheusClient::new(ClientOptions { headers: vec![("X-Api-Key".into(), "abc\ndef-secret".into())], ..ClientOptions::default() })
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
    assert_eq!(ex, Exchange { http_status: 200, content_type: "application/json".into(), body: OK_BODY.into() });

    let seen = seen.lock().expect("lock").clone().expect("server saw a request");
    assert_eq!(seen.request_line, "POST /prometheus/api/v1/query HTTP/1.1");
    assert_eq!(seen.header("content-type"), Some("application/x-www-form-urlencoded"));
    assert_eq!(seen.header("accept"), Some("application/json"));
    assert_eq!(seen.header("user-agent"), Some(concat!("vllm-diag/", env!("CARGO_PKG_VERSION"))));
    // A server on this host is not asked for compressed answers (see `wants_gzip`); a remote one is.
    assert!(!seen.header("accept-encoding").is_some_and(|v| v.contains("gzip")), "{:?}", seen.header("accept-encoding"));
    let url = |u: &str| url::Url::parse(u).unwrap();
    assert!(
        !super::wants_gzip(&url("http://127.0.0.1:9090")) && !super::wants_gzip(&url("http://localhost:9090")) && !super::wants_gzip(&url("http://[::1]:9090"))
    );
    assert!(super::wants_gzip(&url("https://prometheus.example.com")) && super::wants_gzip(&url("http://10.0.0.7:9090")));
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
    assert_eq!(ex, Exchange { http_status: 502, content_type: "text/html".into(), body: html.into() });
    let (addr, _) = serve_once(Reply::Bytes(http_response("418 I'm a teapot", "text/html", html))).await;
    let ex = client(&format!("http://{addr}")).send(&instant()).await.expect("exchange");
    assert_eq!(ex, Exchange { http_status: 418, content_type: "text/html".into(), body: html.into() });
}

#[tokio::test]
async fn a_redirect_that_would_drop_the_post_body_is_an_error_naming_the_target() {
    let reply = "HTTP/1.1 302 Found\r\nLocation: https://u:pw1234@other/prometheus/api/v1/query\r\n\
                 Content-Length: 0\r\nConnection: close\r\n\r\n";
    let (addr, _) = serve_once(Reply::Bytes(reply.as_bytes().to_vec())).await;
    let err = client(&format!("http://{addr}")).send(&instant()).await.expect_err("redirect");
    let msg = err.to_string();
    assert!(msg.contains("redirects (HTTP 302) to https://***@other/prometheus"), "{msg}");
    assert!(!msg.contains("pw1234"));
}

#[tokio::test]
async fn a_server_that_stalls_maps_to_timeout() {
    let (addr, _) = serve_once(Reply::Stall).await;
    let c = PrometheusClient::new(ClientOptions { base_url: format!("http://{addr}"), query_timeout: Duration::from_millis(200), ..ClientOptions::default() })
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
    assert_eq!(err, SourceError::Unreachable { url: format!("http://127.0.0.1:{port}/prom"), detail: "connection refused".into() });
    assert!(err.is_unreachable());
    assert!(!format!("{err} {err:?}").contains("hunter22"));
    assert!(!format!("{err} {err:?}").contains("admin"));
}

#[tokio::test]
async fn a_body_over_the_cap_is_a_decode_error() {
    let big = "x".repeat(10_000);
    let with_length = http_response("200 OK", "application/json", &big);
    let without_length = format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{big}").into_bytes();
    for reply in [with_length, without_length] {
        let (addr, _) = serve_once(Reply::Bytes(reply)).await;
        let c = PrometheusClient::new(ClientOptions { base_url: format!("http://{addr}"), max_body_bytes: 1000, ..ClientOptions::default() }).expect("client");
        let err = c.send(&instant()).await.expect_err("too big");
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.starts_with("response larger than 1000 bytes"), "{detail}");
    }
}

#[test]
fn innermost_keeps_the_cause_without_os_error_codes() {
    assert_eq!(innermost("client error (Connect): tcp connect error: Connection refused (os error 111)"), "connection refused");
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
    let reply = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 4\r\nConnection: close\r\n\r\nslow".to_string();
    let (addr, seen) = serve_seq(vec![Reply::Bytes(reply.into_bytes()), Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))]).await;
    let (log, lines) = capture();
    let c = retrying_client(addr, fast_retries(3), Some(log));
    assert_eq!(c.send(&instant()).await.expect("exchange").http_status, 200);
    assert_eq!(seen.lock().expect("lock").len(), 2);
    let lines = lines.lock().expect("lock").join("\n");
    assert!(lines.contains("HTTP 429, 4 bytes") && lines.contains("retrying in 1000 ms"), "{lines}");
}

#[test]
fn retry_after_is_read_as_seconds_or_as_an_http_date() {
    let now = Utc.with_ymd_and_hms(2015, 10, 21, 7, 28, 0).unwrap();
    assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
    assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now), Some(Duration::from_secs(30)));
    assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now), Some(Duration::ZERO));
    assert_eq!(parse_retry_after("soon", now), None);
}

#[tokio::test]
async fn client_errors_are_never_retried() {
    let body = r#"{"status":"error","errorType":"execution","error":"many-to-many matching not allowed"}"#;
    for status in ["400 Bad Request", "422 Unprocessable Entity", "404 Not Found"] {
        let (addr, seen) =
            serve_seq(vec![Reply::Bytes(http_response(status, "application/json", body)), Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))])
                .await;
        let ex = retrying_client(addr, fast_retries(3), None).send(&instant()).await.expect("exchange");
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
    let ex = retrying_client(addr, fast_retries(3), None).send(&instant()).await.expect("exchange");
    assert_eq!(ex.http_status, 503);
    assert_eq!(seen.lock().expect("lock").len(), 1);
}

#[tokio::test]
async fn retries_stop_after_the_last_attempt_with_the_last_answer() {
    let unavailable = || Reply::Bytes(http_response("503 Service Unavailable", "text/plain", "busy"));
    let (addr, seen) = serve_seq(vec![unavailable(), unavailable(), unavailable(), Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))]).await;
    let ex = retrying_client(addr, fast_retries(3), None).send(&instant()).await.expect("exchange");
    assert_eq!((ex.http_status, ex.body.as_str()), (503, "busy"));
    assert_eq!(seen.lock().expect("lock").len(), 3);
}

#[tokio::test]
async fn no_retry_starts_that_would_end_after_the_deadline() {
    let reply = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 120\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy";
    let (addr, seen) = serve_seq(vec![Reply::Bytes(reply.as_bytes().to_vec()), Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))]).await;
    let (log, lines) = capture();
    let policy = RetryPolicy { deadline: Some(Duration::from_secs(60)), max_delay: Duration::from_secs(300), ..fast_retries(3) };
    let ex = retrying_client(addr, policy, Some(log)).send(&instant()).await.expect("exchange");
    assert_eq!(ex.http_status, 503);
    assert_eq!(seen.lock().expect("lock").len(), 1);
    assert!(lines.lock().expect("lock").join("\n").contains("not retried (no attempts or time left)"));
}

#[tokio::test]
async fn a_connection_reset_is_retried() {
    let (addr, seen) = serve_seq(vec![Reply::Reset, Reply::Bytes(http_response("200 OK", "application/json", OK_BODY))]).await;
    let ex = retrying_client(addr, fast_retries(3), None).send(&instant()).await.expect("exchange");
    assert_eq!(ex.http_status, 200);
    assert_eq!(seen.lock().expect("lock").len(), 2);
}

#[tokio::test]
async fn a_reset_on_every_attempt_ends_in_an_error_that_says_so() {
    let (addr, _) = serve_seq(vec![Reply::Reset, Reply::Reset]).await;
    let err = retrying_client(addr, fast_retries(2), None).send(&instant()).await.expect_err("reset twice");
    let text = err.to_string();
    assert!(text.contains(&format!("http://{addr}/api/v1/query")) && text.contains("reset"), "{text}");
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
    assert!(!ex.body.contains("pw-echo") && !ex.body.contains("YWxpY2U6cHctZWNobw=="), "{}", ex.body);
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
    assert!(text.contains("x-scope-orgid (value masked)") && text.contains("authorization: Bearer (masked)"), "{text}");
    assert!(text.contains(&format!("POST http://{addr}/prom/api/v1/query [query=sum(rate(")), "{text}");
    assert!(text.contains("-> HTTP 200"), "{text}");
    assert!(!text.contains("tok-debug-1") && !text.contains("tenant-secret"), "{text}");
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
    assert!(unknown.contains("--ca-file") && unknown.contains("nknownIssuer"), "{unknown}");
    assert!(tls_advice("received corrupt message of type InvalidContentType", "prom", false).contains("http://"));
    assert!(tls_advice("invalid peer certificate: NotValidForName", "prom.example", false).contains("prom.example"));
    assert!(tls_advice("received fatal alert: CertificateRequired", "h", false).contains("--cert-file"));
    assert!(tls_advice("received fatal alert: BadCertificate", "h", false).contains("requires a client certificate"));
    assert!(tls_advice("received fatal alert: BadCertificate", "h", true).contains("rejected the client certificate"));
}

#[test]
fn tls_files_that_are_missing_or_not_pem_name_the_flag_and_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "hello").expect("write");
    let missing = dir.path().join("missing.pem");
    let try_tls = |tls: TlsOptions| {
        PrometheusClient::new(ClientOptions { base_url: "https://h".into(), tls, ..ClientOptions::default() }).expect_err("bad TLS files").to_string()
    };
    let e = try_tls(TlsOptions { ca_file: Some(missing.clone()), ..TlsOptions::default() });
    assert!(e.starts_with("--ca-file") && e.contains("missing.pem") && e.contains("cannot read"), "{e}");
    let e = try_tls(TlsOptions { ca_file: Some(junk.clone()), ..TlsOptions::default() });
    assert!(e.contains("--ca-file") && e.contains("no PEM certificate"), "{e}");
    let e = try_tls(TlsOptions { client_cert: Some((junk.clone(), junk.clone())), ..TlsOptions::default() });
    assert!(e.contains("--cert-file") && e.contains("junk.pem"), "{e}");
}
