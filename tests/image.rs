//! The container image, built and run by a real engine: `scripts/image.sh` builds it with podman
//! (FROM scratch, nothing pulled) from the binary this test build made, and the tests run it with
//! runc, as user 65532 on a read-only root filesystem, against a real Prometheus holding an
//! incident that ends now: `explain` gives the diagnosis, `check` its exit code, `serve` is sent an
//! alert by a real Alertmanager (Debian's `prometheus-alertmanager`) and delivers the report, `mcp`
//! answers a client on stdio. The container shares the host's network, so 127.0.0.1 is the test's loopback.
//!
//! Needs podman and runc (Debian packages; scripts/test.sh installs them) and root, or a user
//! podman is set up for. crun, Debian's default runtime for podman, refuses this kind of machine's
//! cgroups, so runc is named; the resource limits are given explicitly, at or below this process'
//! own (the engine's defaults can be above what an unprivileged container may set).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use chrono::Utc;
use serde_json::{json, Value};

use common::alertmanager::Alertmanager;
use common::{free_port, incident_now, run::write_file};

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
const TOKEN: &str = "image-test-token-7c2d";

/// The image's tag: built once for the tests of this file, removed when the test process exits.
fn image() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    extern "C" fn remove() {
        if let Some(tag) = TAG.get() {
            let _ = Command::new("podman").args(["rmi", "--force", tag]).stdout(Stdio::null()).stderr(Stdio::null()).status();
        }
    }
    TAG.get_or_init(|| {
        let tag = format!("localhost/vllm-diag-test:{}-{}", std::process::id(), Utc::now().timestamp_millis());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/image.sh");
        let out = Command::new(&script)
            .args(["--binary", env!("CARGO_BIN_EXE_vllm-diag"), "--tag", &tag, "--engine", "podman"])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "scripts/image.sh failed ({}). It needs podman (scripts/test.sh installs it).\nstdout:\n{}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), tag, "image.sh prints the tag it built");
        // SAFETY: registers a plain function with the C library, run once at exit (a static's
        // Drop never runs).
        unsafe { libc::atexit(remove) };
        tag
    })
}

/// A resource limit for the container: this process' own hard limit, capped at 4096 (runc could
/// not set RLIMIT_NPROC at the machine's full hard limit).
fn limit(resource: libc::__rlimit_resource_t) -> u64 {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct it is given.
    let ok = unsafe { libc::getrlimit(resource, &mut r) } == 0;
    if ok {
        r.rlim_max.min(4096)
    } else {
        1024
    }
}

/// `podman run` with what this machine needs and what the image is meant to run with: runc, the
/// host's network, a read-only root filesystem, explicit limits; then `extra` (volumes, -d, -i).
fn podman_run(extra: &[&str]) -> Command {
    let nofile = limit(libc::RLIMIT_NOFILE);
    let nproc = limit(libc::RLIMIT_NPROC);
    let mut cmd = Command::new("podman");
    cmd.args(["run", "--runtime", "runc", "--network", "host", "--read-only", "--pull", "never"])
        .arg(format!("--ulimit=nofile={nofile}:{nofile}"))
        .arg(format!("--ulimit=nproc={nproc}:{nproc}"))
        .args(extra);
    cmd
}

fn text(out: &Output) -> String {
    format!("exit {:?}\nstdout:\n{}\nstderr:\n{}", out.status.code(), String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// Run the image with `args` (to completion) and return what it gave back.
fn run_image(args: &[&str]) -> Output {
    podman_run(&["--rm", image()]).args(args).stdin(Stdio::null()).output().expect("run podman")
}

/// The same command on this machine, outside the container, for comparison.
fn run_here(args: &[&str]) -> Output {
    common::run::vllm_diag().args(args).output().expect("run vllm-diag")
}

#[test]
fn the_image_runs_as_a_non_root_user_from_scratch_and_is_small() {
    let tag = image();
    let out = Command::new("podman")
        .args(["image", "inspect", "--format", "{{.Config.User}} {{.Size}} {{len .RootFS.Layers}}", tag])
        .output()
        .expect("podman image inspect");
    assert!(out.status.success(), "{}", text(&out));
    let inspected = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = inspected.split_whitespace().collect();
    assert_eq!(fields.first().copied(), Some("65532:65532"), "{inspected}");
    assert_eq!(fields.get(2).copied(), Some("1"), "one layer: the files image.sh laid out, no base image: {inspected}");
    let size: u64 = fields.get(1).and_then(|s| s.parse().ok()).expect("image size");
    let binary = std::fs::metadata(env!("CARGO_BIN_EXE_vllm-diag")).expect("binary").len();
    // The libraries ldd lists are a few MiB; nothing else is in the image.
    assert!(size < binary + 16 * 1024 * 1024, "image {size} bytes for a {binary}-byte binary");
    println!("image {tag}: {size} bytes, binary {binary} bytes");

    let out = run_image(&["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("vllm-diag {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn explain_and_check_in_the_image_diagnose_a_real_prometheus_as_the_binary_does() {
    let server = incident_now();
    let prom = server.url.clone();
    let args = ["explain", "--no-config", "--prometheus", &prom, "--window", "30m", "--format", "json"];
    let inside = run_image(&args);
    let outside = run_here(&args);
    assert_eq!(inside.status.code(), outside.status.code(), "inside:\n{}\noutside:\n{}", text(&inside), text(&outside));
    let report: Value = serde_json::from_slice(&inside.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&inside)));
    let rules = |r: &Value| {
        r["findings"].as_array().map(|f| f.iter().map(|f| f["rule"].as_str().unwrap_or_default().to_string()).collect::<Vec<_>>()).unwrap_or_default()
    };
    assert_eq!(rules(&report).first().map(String::as_str), Some("kv-cache-pressure"), "{}", text(&inside));
    let here: Value = serde_json::from_slice(&outside.stdout).expect("JSON outside");
    assert_eq!(rules(&report), rules(&here), "the same findings inside and outside the container");

    // check: the incident is the half hour since the "deploy": FAIL, exit 1 (--fail-on warning).
    let check = ["check", "--no-config", "--prometheus", &prom, "--since", "30m"];
    let inside = run_image(&check);
    assert_eq!(inside.status.code(), Some(1), "{}", text(&inside));
    assert!(String::from_utf8_lossy(&inside.stdout).starts_with("FAIL"), "{}", text(&inside));

    // Nothing listening: not evaluated, exit 3, never a pass.
    let dead = format!("http://127.0.0.1:{}", free_port());
    let inside = run_image(&["check", "--no-config", "--prometheus", &dead, "--since", "30m", "--timeout", "10s"]);
    assert_eq!(inside.status.code(), Some(3), "{}", text(&inside));
    assert!(String::from_utf8_lossy(&inside.stdout).starts_with("NOT EVALUATED"), "{}", text(&inside));

    // A recording that is not there: a usage error, exit 2, as outside.
    let inside = run_image(&["explain", "--replay", "/no/such/recording.json"]);
    assert_eq!(inside.status.code(), Some(2), "{}", text(&inside));
}

/// The one POST a loopback receiver gets (path, body), answered 200.
fn receive_one(listener: TcpListener, tx: mpsc::Sender<(String, String)>) {
    for mut stream in listener.incoming().flatten() {
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut reader = BufReader::new(stream.try_clone().expect("clone stream"));
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            continue;
        }
        let path = line.split_whitespace().nth(1).unwrap_or_default().to_string();
        let mut length = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).is_err() {
                break;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((name, value)) = h.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let _ = tx.send((path, String::from_utf8_lossy(&body).into_owned()));
    }
}

/// One HTTP/1.0 request; the status and the body of the answer.
fn request(addr: SocketAddr, head: &str, body: &[u8]) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "{head}\r\nHost: {addr}\r\nContent-Length: {}\r\n\r\n", body.len())?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, answer) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((status, answer.to_string()))
}

fn podman_logs(name: &str) -> String {
    Command::new("podman").args(["logs", name]).output().map(|o| text(&o)).unwrap_or_default()
}

#[test]
fn serve_in_the_image_is_sent_an_alert_by_a_real_alertmanager_and_delivers_the_diagnosis() {
    let server = incident_now();
    let prom = server.url.clone();
    let dir = tempfile::tempdir().expect("temp dir");
    let token = write_file(dir.path(), "token", &format!("{TOKEN}\n"));
    // The container's user is 65532: the mounted secret must be readable by it.
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod token");

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the receiver");
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || receive_one(listener, tx));

    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let name = format!("vllm-diag-serve-test-{}-{port}", std::process::id());
    let mount = format!("{}:/secrets/token:ro", token.display());
    let out = podman_run(&["-d", "--name", &name, "-v", &mount, image()])
        .args([
            "serve",
            "--no-config",
            "--listen",
            &listen,
            "--prometheus",
            &prom,
            "--webhook-url",
            &hook,
            "--auth-token-file",
            "/secrets/token",
            "--timeout",
            "60s",
        ])
        .output()
        .expect("podman run -d");
    assert!(out.status.success(), "{}", text(&out));
    struct Remove(String);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = Command::new("podman").args(["rm", "--force", &self.0]).output();
        }
    }
    let _remove = Remove(name.clone());

    let addr: SocketAddr = listen.parse().unwrap();
    let started = Instant::now();
    loop {
        match request(addr, "GET /healthz HTTP/1.0", b"") {
            Ok((200, body)) if body.trim() == "ok" => break,
            _ if started.elapsed() > Duration::from_secs(60) => panic!("serve in the container never answered /healthz:\n{}", podman_logs(&name)),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }

    // Without the token: refused.
    let (status, _) = request(addr, "POST /alertmanager HTTP/1.0\r\nContent-Type: application/json", b"{}").expect("POST");
    assert_eq!(status, 401);
    // A real Alertmanager, routing to the container with the token, is sent the alert.
    let am = Alertmanager::start(&format!("http://{listen}"), TOKEN);
    let fired = Utc::now() - chrono::Duration::minutes(10);
    let alert = json!([{
        "labels": {"alertname": "VllmKvCachePressure", "model_name": MODEL, "severity": "critical", "vllm_diag_rule": "kv-cache-pressure"},
        "annotations": {"summary": "KV cache nearly full"},
        "startsAt": fired.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "generatorURL": format!("{prom}/graph")
    }]);
    assert_eq!(am.post_alerts(&alert), 200);

    let (path, body) = rx.recv_timeout(Duration::from_secs(180)).unwrap_or_else(|_| panic!("no delivery from serve:\n{}", podman_logs(&name)));
    assert_eq!(path, "/hook");
    let report: Value = serde_json::from_str(&body).expect("the webhook gets JSON");
    assert_eq!(report["findings"][0]["rule"], "kv-cache-pressure", "{report:#}");
    assert_eq!(report["run"]["status"], "diagnosed");
    assert_eq!(report["trigger"]["receiver"], "vllm-diag", "delivered through Alertmanager: {report:#}");
    drop(am);

    // SIGTERM (podman stop) ends it cleanly: exit 0.
    let out = Command::new("podman").args(["stop", "--time", "60", &name]).output().expect("podman stop");
    assert!(out.status.success(), "{}", text(&out));
    let out = Command::new("podman").args(["inspect", "--format", "{{.State.ExitCode}}", &name]).output().expect("podman inspect");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "serve's exit code after SIGTERM:\n{}", podman_logs(&name));
}

#[test]
fn mcp_in_the_image_answers_a_client_on_stdio() {
    let server = incident_now();
    let prom = server.url.clone();
    let mut child = podman_run(&["--rm", "-i", image()])
        .args(["mcp", "--no-config", "--prometheus", &prom])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("podman run -i");
    let mut stdin = child.stdin.take().expect("stdin");
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "image-test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "rules_show", "arguments": {"id": "kv-cache-pressure"}}}),
    ];
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut answers: Vec<Value> = Vec::new();
    for m in &messages {
        writeln!(stdin, "{m}").expect("write to mcp");
        stdin.flush().expect("flush");
        if m.get("id").is_some() {
            let line = rx.recv_timeout(Duration::from_secs(60)).expect("an answer from mcp in the container");
            answers.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
        }
    }
    drop(stdin);
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "the client closed stdin: mcp exits 0");
    assert_eq!(answers[0]["id"], 1);
    assert!(answers[0]["result"]["serverInfo"].is_object(), "{}", answers[0]);
    let tools: Vec<&str> = answers[1]["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(tools.contains(&"explain") && tools.contains(&"check"), "{tools:?}");
    assert!(answers[2]["result"]["content"][0]["text"].as_str().unwrap_or_default().contains("kv-cache-pressure"), "{}", answers[2]);
}
