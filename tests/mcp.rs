//! `vllm-diag mcp` driven by a real MCP client that nobody here wrote: the official Python SDK
//! (PyPI `mcp`), run by tests/mcp_client.py from the virtual environment scripts/test.sh builds
//! (scripts/mcp-client-venv.sh). Over stdio the client starts the server itself; over streamable
//! HTTP the test starts it on a free port. A real Prometheus holds a generated incident: the
//! client must list the tools, get the incident's cause as the top finding from `explain`, and
//! read errors that say what to fix. Planted credentials must appear in nothing the client or the
//! server's log gets.
//!
//! Like the servers in tests/common, a missing client is a failure that says how to install it,
//! never a skipped test.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use common::run::{at_window_end, path_arg, write_file};
use common::{free_port, start_scenario};

const TOKEN: &str = "tok-MCPPLANTED-8c21e7";
const HEADER_VALUE: &str = "hdr-MCPPLANTED-40fd";
const URL_PASSWORD: &str = "url-MCPPLANTED-77b1";
const SERVICE_TOKEN: &str = "svc-token-51aa90";

/// The virtual environment's python, with the SDK importable; panics saying how to get it.
fn python() -> PathBuf {
    let path = std::env::var_os("VLLM_DIAG_MCP_PYTHON").map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("VLLM_DIAG_TEST_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/vllm-diag-test"));
        cache.join("mcp-venv/bin/python")
    });
    let works = Command::new(&path).args(["-c", "import mcp"]).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success());
    if !works {
        panic!(
            "the Python MCP SDK is not installed at {}. tests/mcp.rs drives vllm-diag mcp with that real client: run scripts/mcp-client-venv.sh \
             (scripts/test.sh runs it), which installs it into a virtual environment, or point $VLLM_DIAG_MCP_PYTHON at a python that can `import mcp`",
            path.display()
        );
    }
    path
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py")
}

/// What the client saw (its JSON transcript) and what it and the server wrote on stderr.
struct Session {
    transcript: Value,
    stderr: String,
}

impl Session {
    fn call(&self, i: usize) -> &Value {
        &self.transcript["calls"][i]
    }

    fn result(&self, i: usize) -> &Value {
        let c = self.call(i);
        assert!(c.get("result").is_some(), "call {i} gave no result: {c}\nstderr:\n{}", self.stderr);
        &c["result"]
    }

    fn text(&self, i: usize) -> String {
        self.result(i)["content"].as_array().into_iter().flatten().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("\n")
    }
}

/// Run the client with `calls` against `target` (`stdio BINARY ARGS...` or `http URL`).
fn client(calls: Value, token: Option<&str>, target: &[&str]) -> Session {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(python());
    cmd.arg(client_script()).arg("--calls").arg(calls.to_string());
    if let Some(t) = token {
        cmd.args(["--token", t]);
    }
    let out = cmd.args(target).current_dir(dir.path()).stdin(Stdio::null()).output().expect("run the MCP client");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "the MCP client failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}", out.status);
    let transcript = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("the client's transcript is not JSON ({e}):\n{stdout}\nstderr:\n{stderr}"));
    Session { transcript, stderr }
}

fn binary() -> &'static str {
    env!("CARGO_BIN_EXE_vllm-diag")
}

/// The incident's top finding and the checks any `explain` result must pass.
fn assert_explain_found(s: &Session, i: usize, expected: &str) {
    let r = s.result(i);
    assert_eq!(r["isError"], false, "{r}");
    let doc = &r["structuredContent"];
    assert_eq!(doc["findings"][0]["rule"], expected, "{doc}");
    // The text summary comes first, naming the cause; the JSON document follows.
    let first = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(first.contains(expected), "{first}");
    assert!(first.contains("exit code"), "{first}");
    assert!(!first.contains("-v for"), "{first}");
    let second: Value = serde_json::from_str(r["content"][1]["text"].as_str().unwrap_or_default()).expect("the second block is the JSON");
    assert_eq!(&second, doc);
    assert_eq!(doc["mcp"]["size_cap_bytes"], 65536);
    assert!(doc.to_string().len() <= 65536);
    eprintln!(
        "explain over MCP: {} s, JSON {} bytes (complete: {}), summary {} lines",
        s.call(i)["seconds"],
        doc.to_string().len(),
        doc["mcp"]["complete"],
        first.lines().count()
    );
    // Only the deciding evidence, without the chart series.
    for e in doc["findings"][0]["evidence"].as_array().unwrap() {
        assert_eq!(e["passed"], true, "{e}");
        assert!(e.get("series").is_none(), "{e}");
    }
}

#[test]
fn a_real_client_lists_the_tools_gets_the_incident_and_reads_what_to_fix() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let expected = spec.expect.first.clone().expect("the scenario names its first finding");
    let at = at_window_end(&spec);
    let calls = json!([
        {"tool": "explain", "arguments": {"at": at, "window": "30m"}},
        {"tool": "explain", "arguments": {"window": "banana"}},
        {"tool": "explian", "arguments": {}},
        {"tool": "rules_list"},
        {"tool": "rules_show", "arguments": {"id": "kv-cache-presure"}},
        {"tool": "rules_show", "arguments": {"id": "kv-cache-pressure"}},
        // The data is months old: the time since a deploy twenty minutes ago holds none.
        {"tool": "check", "arguments": {"since": "20m"}},
        {"tool": "events", "arguments": {"window": "1h"}},
        {"tool": "explain", "arguments": {"at": at, "profile": "no-such-profile"}},
    ]);
    let s = client(calls, None, &["stdio", binary(), "mcp", "--no-config", "--prometheus", &prom.url]);

    assert_eq!(s.transcript["initialize"]["serverInfo"]["name"], "vllm-diag");
    let names: Vec<&str> = s.transcript["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["explain", "check", "rules_list", "rules_show", "events"]);
    let explain = &s.transcript["tools"][0];
    assert_eq!(explain["annotations"]["readOnlyHint"], true);
    assert!(explain["inputSchema"]["properties"]["window"].is_object(), "{explain}");

    assert_explain_found(&s, 0, &expected);
    // The same diagnosis from the command line, for the measurement beside it.
    let started = std::time::Instant::now();
    let cli = Command::new(binary())
        .args(["explain", "--no-config", "--prometheus", &prom.url, "--at", &at, "--window", "30m", "--format", "json"])
        .output()
        .unwrap();
    let full: Value = serde_json::from_slice(&cli.stdout).expect("explain --format json");
    eprintln!("explain on the command line: {:.3} s, JSON {} bytes", started.elapsed().as_secs_f64(), full.to_string().len());
    assert_eq!(full["findings"][0]["rule"], s.result(0)["structuredContent"]["findings"][0]["rule"]);
    // The incident is critical: with the server's default bar (warning) the verdict is exit code 1.
    assert_eq!(s.result(0)["structuredContent"]["outcome"]["exit_code"], 1);
    assert!(s.text(0).contains("exit code 1 (fail_on warning)"), "{}", s.text(0));
    assert_eq!(s.result(0)["structuredContent"]["findings"][0]["scope"]["model_name"], spec.expect.model.clone().unwrap_or_default().as_str());

    // A bad argument: a tool error naming the argument, the value and what to give instead.
    let bad = s.result(1);
    assert_eq!(bad["isError"], true, "{bad}");
    let text = s.text(1);
    assert!(text.contains("argument \"window\"") && text.contains("banana") && text.contains("30m"), "{text}");
    assert_eq!(bad["structuredContent"]["error"]["exit_code"], 2);

    // An unknown tool: a protocol error the SDK raises, naming the tools.
    let unknown = s.call(2)["protocol_error"].as_str().unwrap_or_default();
    assert!(unknown.contains("unknown tool") && unknown.contains("explain"), "{}", s.call(2));

    let listed = s.result(3)["structuredContent"]["rules"].as_array().unwrap().iter().filter_map(|r| r["id"].as_str()).collect::<Vec<_>>();
    assert!(listed.contains(&"kv-cache-pressure"), "{listed:?}");
    assert_eq!(s.result(4)["isError"], true);
    assert!(s.text(4).contains("Did you mean \"kv-cache-pressure\""), "{}", s.text(4));
    assert_eq!(s.result(5)["isError"], false);
    assert!(s.text(5).contains("kv-cache-pressure"), "{}", s.text(5));

    // No data since the deploy: not evaluated, said as such, never a pass.
    assert_eq!(s.result(6)["isError"], true, "{}", s.result(6));
    let check = s.text(6);
    assert!(check.starts_with("NOT EVALUATED") && check.contains("exit code 3") && !check.contains("PASS"), "{check}");
    assert_eq!(s.result(6)["structuredContent"]["error"]["exit_code"], 3);

    assert_eq!(s.result(7)["isError"], false, "{}", s.result(7));
    assert!(s.result(7)["structuredContent"]["events"].is_array());

    assert_eq!(s.result(8)["isError"], true);
    assert!(s.text(8).contains("\"profile\"") && s.text(8).contains("no-such-profile"), "{}", s.text(8));
}

/// The server's stderr, read on a thread; its first line names the address.
struct HttpServer {
    child: std::process::Child,
    url: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl HttpServer {
    fn start(args: &[&str]) -> HttpServer {
        let mut child = Command::new(binary())
            .args(["mcp", "--no-config", "--transport", "http", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vllm-diag mcp");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        let url = first.split("listening on ").nth(1).map(str::to_string).unwrap_or_else(|| panic!("no address in {first:?}"));
        let log = std::sync::Arc::new(std::sync::Mutex::new(format!("{first}\n")));
        let sink = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        HttpServer { child, url, log }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// SIGTERM, then the exit code; fails the test when the server has not stopped within 30 s.
    fn stop(&mut self) -> Option<i32> {
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for vllm-diag mcp") {
                return status.code();
            }
            if started.elapsed() > Duration::from_secs(30) {
                panic!("vllm-diag mcp did not stop within 30 s of SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// POST an initialize request by hand and return the status line.
fn post_status(url: &str, authorization: Option<&str>) -> String {
    let rest = url.trim_start_matches("http://");
    let (addr, path) = rest.split_once('/').unwrap();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let auth = authorization.map(|a| format!("Authorization: {a}\r\n")).unwrap_or_default();
    write!(
        stream,
        "POST /{path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer.lines().next().unwrap_or_default().to_string()
}

#[test]
fn over_streamable_http_the_client_gets_the_same_diagnosis_and_needs_the_token() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let expected = spec.expect.first.clone().expect("the scenario names its first finding");
    let dir = tempfile::tempdir().unwrap();
    let token_file = write_file(dir.path(), "token", &format!("{SERVICE_TOKEN}\n"));
    let server = HttpServer::start(&["--prometheus", &prom.url, "--auth-token-file", path_arg(&token_file)]);

    assert!(post_status(&server.url, None).contains(" 401 "), "{}", server.log());
    assert!(post_status(&server.url, Some("Bearer wrong")).contains(" 401 "), "{}", server.log());

    let at = at_window_end(&spec);
    let calls = json!([
        {"tool": "explain", "arguments": {"at": at}},
        {"tool": "explain", "arguments": {"at": at, "group_by": "model-name"}},
    ]);
    let s = client(calls, Some(SERVICE_TOKEN), &["http", &server.url]);
    assert_eq!(s.transcript["tools"].as_array().map(Vec::len), Some(5));
    assert_explain_found(&s, 0, &expected);
    assert_eq!(s.result(1)["isError"], true);
    assert!(s.text(1).contains("argument \"group_by\"") && s.text(1).contains("label name"), "{}", s.text(1));
    assert!(!server.log().contains(SERVICE_TOKEN), "{}", server.log());
    let mut server = server;
    assert_eq!(server.stop(), Some(0), "{}", server.log());
}

#[test]
fn credentials_given_to_mcp_appear_in_no_result_error_or_log() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let dir = tempfile::tempdir().unwrap();
    let token_file = write_file(dir.path(), "token", &format!("{TOKEN}\n"));
    let header = format!("X-Api-Key: {HEADER_VALUE}");
    let at = at_window_end(&spec);
    let calls = json!([
        {"tool": "explain", "arguments": {"at": at}},
        {"tool": "explain", "arguments": {"window": "banana"}},
        {"tool": "check", "arguments": {"since": "deploy"}},
        {"tool": "events"},
        {"tool": "rules_show", "arguments": {"id": TOKEN}},
    ]);
    // A server that answers, and a port where nothing listens (the error paths); then a password
    // in the URL itself.
    let port = free_port();
    let down = format!("http://127.0.0.1:{port}");
    let down_with_password = format!("http://bob:{URL_PASSWORD}@127.0.0.1:{port}");
    let credentials = ["--bearer-token-file", path_arg(&token_file), "--header", &header];
    for (url, extra) in [(prom.url.as_str(), &credentials[..]), (down.as_str(), &credentials[..]), (down_with_password.as_str(), &[][..])] {
        let args = [&["stdio", binary(), "mcp", "--no-config", "--prometheus", url, "--debug"][..], extra].concat();
        let s = client(calls.clone(), None, &args);
        let everything = format!("{}\n{}", s.transcript, s.stderr);
        // Without credentials given, the token is only the (unknown) rule id the last call names:
        // nothing to mask then.
        let given: &[(&str, &str)] = if extra.is_empty() {
            &[("URL password", URL_PASSWORD), ("a fragment of it", "url-MCPPLANTED")]
        } else {
            &[("bearer token", TOKEN), ("header value", HEADER_VALUE), ("a fragment", "MCPPLANTED")]
        };
        for (what, secret) in given {
            assert!(!everything.contains(secret), "the {what} leaked against {url}:\n{everything}");
        }
        if url != prom.url {
            // Unreachable: not evaluated, never healthy.
            assert_eq!(s.result(0)["isError"], true);
            assert!(s.text(0).starts_with("NOT EVALUATED"), "{}", s.text(0));
        } else {
            assert_eq!(s.result(0)["isError"], false, "{}", s.result(0));
        }
    }
}

#[test]
fn mcp_refuses_what_a_server_answering_calls_cannot_use() {
    let out = Command::new(binary()).args(["mcp", "--no-config", "--replay", "x.json"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("drop --replay"), "{err}");
    let out = Command::new(binary()).args(["mcp", "--no-config", "--auth-token-file", "t"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--transport http"));
}
