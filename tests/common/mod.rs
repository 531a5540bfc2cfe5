//! A real Prometheus per test, holding generated scenario data.
//!
//! Integration tests run vllm-diag against the server operators actually run, not a mock: each
//! [`PromServer`] backfills its own TSDB with `promtool` (or copies the blocks of the same text
//! backfilled before, see [`backfill`]) in its own temporary directory, listens on
//! its own free port and is killed when dropped, so tests can run in parallel without sharing
//! anything. The small HTTP client below speaks HTTP/1.0 over `std::net` on purpose: it works
//! the same from plain `#[test]`s and from inside `#[tokio::test]`s, where starting a second
//! runtime would panic.
//!
//! When `prometheus` or `promtool` is missing the harness panics and says how to install them:
//! a silently skipped integration test looks exactly like a passing one.

#![allow(dead_code)]

/// A real Alertmanager routing to `vllm-diag serve`.
pub mod alertmanager;
/// A misbehaving proxy in front of a real Prometheus (fault tests).
/// Reading a lab run's windows (fleet and router runs).
pub mod lab;
pub mod pack;
pub mod proxy;
/// Running the vllm-diag binary and reading what it gave back.
pub mod run;
/// Prometheus behind its own TLS and basic auth, certificates made in the test.
pub mod secure;
/// A real VictoriaMetrics single-node holding generated scenario data.
pub mod victoria;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tempfile::TempDir;
use vllm_diag_sim::{generate_openmetrics, ScenarioSpec};

/// How long a server may take to become ready before the test fails: only a guard against a server
/// that never comes up (the wait ends as soon as it is ready), so long enough for a busy machine
/// where several tests start Prometheus at once (30 s left little room; found by reading, not seen
/// failing).
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How many ports to try when another process takes ours between choosing it and binding it.
const BIND_ATTEMPTS: usize = 5;

/// Prometheus' configuration: nothing to scrape, every sample is backfilled.
const CONFIG: &str = "global:\n  scrape_interval: 1m\n  evaluation_interval: 1m\nscrape_configs: []\n";

/// A running Prometheus with its own data directory. Killed and reaped on drop.
pub struct PromServer {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    addr: SocketAddr,
    child: Child,
    log: PathBuf,
    dir: TempDir,
}

/// The path of `fixtures/scenarios/<name>.toml`.
pub fn scenario_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios").join(format!("{name}.toml"))
}

/// Load a scenario fixture; panics naming the scenario when it does not load.
pub fn load_scenario(name: &str) -> ScenarioSpec {
    ScenarioSpec::load(scenario_path(name)).unwrap_or_else(|e| panic!("scenario {name}: {e}"))
}

/// Load a scenario fixture, generate its data, backfill it and start Prometheus on it.
pub fn start_scenario(name: &str) -> (ScenarioSpec, PromServer) {
    let spec = load_scenario(name);
    let server = PromServer::start_generated(&spec);
    (spec, server)
}

/// Write the series `spec` generates to `<dir>/scenario.om` as OpenMetrics, for promtool to backfill.
fn write_openmetrics(spec: &ScenarioSpec, dir: &Path) -> PathBuf {
    let om = dir.join("scenario.om");
    let file = std::fs::File::create(&om).unwrap_or_else(|e| panic!("cannot create {}: {e}", om.display()));
    let mut out = std::io::BufWriter::new(file);
    generate_openmetrics(spec, &mut out).and_then(|()| out.flush()).unwrap_or_else(|e| panic!("cannot write {}: {e}", om.display()));
    om
}

/// A `--web.config.file` for Prometheus to serve through (TLS, basic auth), and the URL scheme it gives.
struct WebServing<'a> {
    config: &'a Path,
    scheme: &'static str,
}

impl PromServer {
    /// A Prometheus with no data at all.
    pub fn start_empty() -> PromServer {
        PromServer::start_in(temp_dir("vllm-diag-prom-"), None, None)
    }

    /// A Prometheus with no data of its own that scrapes `target` (`host:port`) every `interval`.
    pub fn start_scraping(target: &str, interval: &str) -> PromServer {
        let jobs = format!("scrape_configs:\n  - job_name: vllm-diag\n    scrape_interval: {interval}\n    static_configs:\n      - targets: ['{target}']\n");
        PromServer::start_in_with(temp_dir("vllm-diag-prom-"), None, None, &jobs)
    }

    /// A Prometheus holding the samples of an OpenMetrics file (timestamps on every sample, `# EOF` last).
    pub fn start_with_openmetrics(path: impl AsRef<Path>) -> PromServer {
        PromServer::start_in(temp_dir("vllm-diag-prom-"), Some(path.as_ref()), None)
    }

    /// A Prometheus holding the data a scenario spec generates (for a spec the test has changed;
    /// [`start_scenario`] serves a fixture as it is).
    pub fn start_generated(spec: &ScenarioSpec) -> PromServer {
        PromServer::start_generated_in(temp_dir("vllm-diag-prom-"), spec, None)
    }

    /// A Prometheus holding `spec`'s data whose configuration ends with `extra` (rule files and
    /// alerting, say), with `files` (name, text) written beside the configuration first, so
    /// relative `rule_files` find them.
    pub fn start_generated_with(spec: &ScenarioSpec, extra: &str, files: &[(&str, &str)]) -> PromServer {
        let dir = temp_dir("vllm-diag-prom-");
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", p.display()));
        }
        let om = write_openmetrics(spec, dir.path());
        let server = PromServer::start_in_with(dir, Some(&om), None, extra);
        let _ = std::fs::remove_file(&om);
        server
    }

    /// Generate `spec`'s data into `dir`, backfill it and start Prometheus there (through `web` when
    /// given). The OpenMetrics text is deleted once the blocks hold the data.
    fn start_generated_in(dir: TempDir, spec: &ScenarioSpec, web: Option<WebServing>) -> PromServer {
        let om = write_openmetrics(spec, dir.path());
        let server = PromServer::start_in(dir, Some(&om), web);
        // the blocks hold the data now; the text is only disk space
        let _ = std::fs::remove_file(&om);
        server
    }

    /// Start Prometheus on `dir`: its data directory (backfilled from `openmetrics` when given) and
    /// config file go there. Served through `web`, readiness is read from the log, since `/-/ready`
    /// sits behind the same TLS and auth.
    fn start_in(dir: TempDir, openmetrics: Option<&Path>, web: Option<WebServing>) -> PromServer {
        PromServer::start_in_with(dir, openmetrics, web, "")
    }

    fn start_in_with(dir: TempDir, openmetrics: Option<&Path>, web: Option<WebServing>, extra_config: &str) -> PromServer {
        require_tools();
        let data = dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap_or_else(|e| panic!("cannot create {}: {e}", data.display()));
        if let Some(om) = openmetrics {
            backfill(om, &data);
        }
        let config = dir.path().join("prometheus.yml");
        // An extra configuration with scrape jobs of its own replaces the empty list.
        let base = if extra_config.contains("scrape_configs:") { CONFIG.replace("scrape_configs: []\n", "") } else { CONFIG.to_string() };
        std::fs::write(&config, format!("{base}{extra_config}")).unwrap_or_else(|e| panic!("cannot write {}: {e}", config.display()));

        let ready = if web.is_some() { Ready::LogLine("Server is ready to receive web requests") } else { Ready::Get("/-/ready") };
        let Spawned { addr, child, log } = spawn_ready(dir.path(), "prometheus", ready, |addr| {
            let mut cmd = Command::new("prometheus");
            cmd.arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.tsdb.path={}", data.display()))
                .arg("--storage.tsdb.retention.time=100y")
                // A firing alert whose first send found no Alertmanager yet (tests start it after
                // Prometheus) is sent again within seconds, not after the default minute.
                .arg("--rules.alert.resend-delay=2s")
                // Go collects garbage a quarter as often: these servers live seconds and hold a few
                // megabytes, and rules_export's scenario loop took 12% less CPU (25.2 s -> 22.3 s).
                .env("GOGC", "400")
                .arg(format!("--web.listen-address={addr}"));
            if let Some(web) = &web {
                cmd.arg(format!("--web.config.file={}", web.config.display()));
            }
            cmd
        });
        let scheme = web.map_or("http", |w| w.scheme);
        PromServer { url: format!("{scheme}://{addr}"), addr, child, log, dir }
    }

    /// What Prometheus has written to stdout and stderr so far.
    pub fn log_text(&self) -> String {
        read_log(&self.log)
    }

    /// The data directory, for tests that want to look at or add blocks.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `GET` a path (with its query string) and return the status and body.
    pub fn get(&self, path_and_query: &str) -> std::io::Result<(u16, String)> {
        http_get(self.addr, path_and_query, Duration::from_secs(30))
    }

    /// Run an instant query at `at` and return every sample, sorted by labels. Panics on any error.
    pub fn query(&self, promql: &str, at: DateTime<Utc>) -> Vec<(BTreeMap<String, String>, f64)> {
        let path = format!("/api/v1/query?query={}&time={}", url::form_urlencoded::byte_serialize(promql.as_bytes()).collect::<String>(), at.timestamp());
        let (status, body) = self.get(&path).unwrap_or_else(|e| panic!("query {promql}: {e}"));
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("query {promql}: HTTP {status}, not JSON ({e}): {body}"));
        if status != 200 || json["status"] != "success" {
            panic!("query {promql}: HTTP {status}: {body}");
        }
        let data = &json["data"];
        let value = |v: &serde_json::Value| -> f64 {
            v.get(1).and_then(|s| s.as_str()).and_then(vllm_diag::prom::parse_sample_value).unwrap_or_else(|| panic!("query {promql}: unreadable value {v}"))
        };
        let mut out: Vec<(BTreeMap<String, String>, f64)> = match data["resultType"].as_str() {
            Some("vector") => data["result"]
                .as_array()
                .map(|a| a.as_slice())
                .unwrap_or_default()
                .iter()
                .map(|s| {
                    let labels = s["metric"]
                        .as_object()
                        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                        .unwrap_or_default();
                    (labels, value(&s["value"]))
                })
                .collect(),
            Some("scalar") => vec![(BTreeMap::new(), value(&data["result"]))],
            other => panic!("query {promql}: unexpected result type {other:?}: {body}"),
        };
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// The single value of a query that must return exactly one sample.
    /// Ask `promql` now, every half second for up to a minute, until it returns series
    /// (`present`) or none (not `present`); returns the last answer.
    pub fn wait_for_series(&self, promql: &str, present: bool) -> Vec<(BTreeMap<String, String>, f64)> {
        let started = std::time::Instant::now();
        loop {
            let rows = self.query(promql, Utc::now());
            if rows.is_empty() != present || started.elapsed() > std::time::Duration::from_secs(60) {
                return rows;
            }
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
    }

    pub fn query_one(&self, promql: &str, at: DateTime<Utc>) -> f64 {
        let result = self.query(promql, at);
        match result.as_slice() {
            [(_, v)] => *v,
            _ => panic!("query {promql}: expected one sample, got {result:?}"),
        }
    }

    /// Values of a query keyed by one label (e.g. model_name).
    pub fn query_by(&self, label: &str, promql: &str, at: DateTime<Utc>) -> BTreeMap<String, f64> {
        self.query(promql, at).into_iter().map(|(labels, v)| (labels.get(label).cloned().unwrap_or_default(), v)).collect()
    }
}

impl Drop for PromServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How a starting server shows that it is ready.
enum Ready<'a> {
    /// A plain-HTTP `GET` of this path answers 200.
    Get(&'a str),
    /// Its log holds this text (for a server whose every path sits behind TLS or auth).
    LogLine(&'a str),
}

/// A server process that [`spawn_ready`] started: where it listens, the process, and its log file.
struct Spawned {
    addr: SocketAddr,
    child: Child,
    log: PathBuf,
}

/// Start a server on a free port of 127.0.0.1 and wait until it is `ready`. `command` gives the
/// process to run for an address; its output goes to `<dir>/<name>-<attempt>.log`. When another
/// process takes the port first, another port is tried, up to [`BIND_ATTEMPTS`] times; any other
/// failure panics with the server's output.
fn spawn_ready(dir: &Path, name: &str, ready: Ready, command: impl Fn(SocketAddr) -> Command) -> Spawned {
    let mut last_log = String::new();
    for attempt in 1..=BIND_ATTEMPTS {
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let log = dir.join(format!("{name}-{attempt}.log"));
        let log_file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
        let log_err = log_file.try_clone().unwrap_or_else(|e| panic!("cannot share {}: {e}", log.display()));
        let mut child = command(addr)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name}: {e}. Run scripts/test.sh, which installs it"));
        match wait_ready(&mut child, addr, &log, &ready, name) {
            Ok(()) => return Spawned { addr, child, log },
            Err(failure) => {
                let _ = child.kill();
                let _ = child.wait();
                match failure {
                    Startup::PortTaken(text) => last_log = text,
                    Startup::Failed(why) => panic!("{why}"),
                }
            }
        }
    }
    panic!("{name} could not bind a port after {BIND_ATTEMPTS} attempts; its last output:\n{last_log}");
}

/// Wait until a server is `ready`, its process exits, or the time runs out.
fn wait_ready(child: &mut Child, addr: SocketAddr, log: &Path, ready: &Ready, name: &str) -> Result<(), Startup> {
    let started = Instant::now();
    loop {
        let is_ready = match ready {
            Ready::Get(path) => matches!(http_get(addr, path, Duration::from_secs(2)), Ok((200, _))),
            Ready::LogLine(line) => read_log(log).contains(line),
        };
        if is_ready {
            return Ok(());
        }
        match child.try_wait() {
            Ok(Some(status)) => {
                let text = read_log(log);
                if text.contains("address already in use") {
                    return Err(Startup::PortTaken(text));
                }
                return Err(Startup::Failed(format!("{name} exited ({status}) before it was ready:\n{text}")));
            }
            Ok(None) => {}
            Err(e) => return Err(Startup::Failed(format!("cannot check on {name}: {e}"))),
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(Startup::Failed(format!("{name} was not ready after {}s; its output:\n{}", READY_TIMEOUT.as_secs(), read_log(log))));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// A server's log as text, or a note saying why it cannot be read.
fn read_log(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_else(|e| format!("(cannot read {}: {e})", log.display()))
}

/// Why a server did not become ready: another process took its port (its log), or anything else.
enum Startup {
    PortTaken(String),
    Failed(String),
}

/// A new temporary directory whose name starts with `prefix`, deleted when dropped.
fn temp_dir(prefix: &str) -> TempDir {
    tempfile::Builder::new().prefix(prefix).tempdir().unwrap_or_else(|e| panic!("cannot create a temporary directory: {e}"))
}

/// Panic with instructions when the real servers are not installed.
fn require_tools() {
    for tool in ["prometheus", "promtool"] {
        if !runs(tool, "--version") {
            panic!(
                "`{tool}` is not installed or does not run. The integration tests need a real Prometheus: \
                 run scripts/test.sh, which installs prometheus and promtool (Debian package `prometheus`)"
            );
        }
    }
}

/// Whether `tool version_flag` starts and succeeds, i.e. the tool is installed and works.
fn runs(tool: &str, version_flag: &str) -> bool {
    Command::new(tool).arg(version_flag).stdout(Stdio::null()).stderr(Stdio::null()).status().map(|s| s.success()).unwrap_or(false)
}

/// Turn an OpenMetrics file into TSDB blocks in `data` with `promtool`; panics with its output on
/// failure. The blocks of a text backfilled before (by any test binary of this build) are copied
/// from a cache under the target directory instead: promtool takes about a second a scenario, most
/// of a scenario test's time, and the suite backfills the same scenarios many times.
fn backfill(openmetrics: &Path, data: &Path) {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("promtool-blocks");
    let key = std::fs::read(openmetrics).ok().map(|bytes| content_key(&bytes));
    // Test binaries run side by side (scripts/run-tests.py) and backfill the same scenarios: the
    // first to need a text's blocks makes them while the others wait, holding a lock per text.
    let _lock = key.as_ref().and_then(|k| {
        std::fs::create_dir_all(&cache).ok()?;
        exclusive_lock(&cache.join(format!(".{k}.lock"))).ok()
    });
    if let Some(cached) = key.as_ref().map(|k| cache.join(k)).filter(|c| c.is_dir()) {
        copy_tree(&cached, data);
        return;
    }
    run_promtool(openmetrics, data);
    // Keep a copy for the next time: built beside, then renamed into place in one step, so that
    // another process sees a whole cache entry or none (when two race, the second rename fails
    // and its copy is dropped).
    if let Some(k) = key {
        let building = cache.join(format!(".{k}.{}", std::process::id()));
        if std::fs::create_dir_all(&building).is_ok() {
            copy_tree(data, &building);
            if std::fs::rename(&building, cache.join(&k)).is_err() {
                let _ = std::fs::remove_dir_all(&building);
            }
        }
    }
}

/// Wait for, then hold, an exclusive lock on the file `path` (created when missing), across
/// threads and processes alike; it is released when the returned file is dropped.
fn exclusive_lock(path: &Path) -> std::io::Result<std::fs::File> {
    let lock = std::fs::File::create(path)?;
    // SAFETY: flock(2) on a file descriptor this function owns.
    unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    Ok(lock)
}

/// A cache key for a generated text: its length and CRC-32. Two texts of one length whose CRC-32s
/// agree are one in four billion; an accidental match would serve another scenario's data, which
/// its test's expectations would then fail on, not pass.
fn content_key(bytes: &[u8]) -> String {
    format!("{}-{:08x}", bytes.len(), crc32fast::hash(bytes))
}

/// Copy the directory tree `from` into `to` (created when missing); panics naming the file.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("cannot create {}: {e}", to.display()));
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display())) {
        let entry = entry.unwrap_or_else(|e| panic!("cannot read {}: {e}", from.display()));
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("cannot copy {} to {}: {e}", src.display(), dst.display()));
        }
    }
}

fn run_promtool(openmetrics: &Path, data: &Path) {
    let output = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(openmetrics)
        .arg(data)
        .output()
        .unwrap_or_else(|e| panic!("cannot run promtool: {e}. Run scripts/test.sh, which installs it"));
    if !output.status.success() {
        panic!(
            "promtool could not backfill {} ({}):\n{}{}",
            openmetrics.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A real-engine lab's exported samples (`samples.om.gz`) as plain OpenMetrics in `dir`, ready for
/// [`PromServer::start_with_openmetrics`], with every histogram family dropped when
/// `histograms` is false (a family is a histogram when it has `_bucket` series).
pub fn unpack_lab_samples(samples: &Path, dir: &Path, histograms: bool) -> PathBuf {
    use std::io::BufRead;
    let file = std::fs::File::open(samples).unwrap_or_else(|e| panic!("{}: {e}", samples.display()));
    let lines: Vec<String> =
        std::io::BufReader::new(flate2::read::GzDecoder::new(file)).lines().collect::<Result<_, _>>().unwrap_or_else(|e| panic!("{}: {e}", samples.display()));
    let name = |l: &str| l.split(['{', ' ']).next().unwrap_or_default().to_string();
    let histogram_families: std::collections::BTreeSet<String> =
        lines.iter().map(|l| name(l)).filter_map(|n| n.strip_suffix("_bucket").map(String::from)).collect();
    let is_histogram = |n: &str| ["_bucket", "_sum", "_count", "_created"].iter().any(|s| n.strip_suffix(s).is_some_and(|f| histogram_families.contains(f)));
    let out = dir.join(if histograms { "samples.om" } else { "gauges-and-counters.om" });
    let mut w = std::io::BufWriter::new(std::fs::File::create(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display())));
    for l in &lines {
        if histograms || l.starts_with('#') || !is_histogram(&name(l)) {
            writeln!(w, "{l}").unwrap_or_else(|e| panic!("{}: {e}", out.display()));
        }
    }
    w.flush().unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    out
}

/// A port nothing listens on right now (another process may still take it before a server does).
/// A Prometheus holding the kv-cache-pressure scenario moved so that its incident window ends now
/// (for what reads "now": serve, the CI action, the image).
pub fn incident_now() -> PromServer {
    PromServer::start_generated(&ending_now("kv-cache-pressure"))
}

/// The scenario `name` moved so that its incident window ends now (on its scrape step).
pub fn ending_now(name: &str) -> ScenarioSpec {
    let mut spec = load_scenario(name);
    let total = chrono::Duration::from_std(spec.warmup + spec.baseline + spec.window).expect("scenario length");
    let step = spec.interval.as_secs().max(1) as i64;
    let now = chrono::Utc::now().timestamp();
    spec.start = chrono::DateTime::from_timestamp(now - now % step, 0).expect("now") - total;
    spec
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).unwrap_or_else(|e| panic!("cannot find a free port on 127.0.0.1: {e}"))
}

/// Minimal HTTP/1.0 GET: the server closes the connection after the body, so no chunking to undo.
fn http_get(addr: SocketAddr, path_and_query: &str, timeout: Duration) -> std::io::Result<(u16, String)> {
    let head = format!("GET {path_and_query} HTTP/1.0\r\nHost: {addr}\r\nAccept: application/json");
    http_request(addr, &head, &[], timeout)
}

/// Send one HTTP/1.0 request (`head` is the request line and headers, without the blank line that
/// ends them; `body` follows it) and return the status and body of the answer, read until the
/// server closes the connection.
fn http_request(addr: SocketAddr, head: &str, body: &[u8], timeout: Duration) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    write!(stream, "{head}\r\n\r\n")?;
    stream.write_all(body)?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, answer) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not an HTTP response: {head}")))?;
    Ok((status, answer.to_string()))
}

/// `v` in double quotes, with backslashes, double quotes and newlines escaped: a PromQL string
/// literal, and a label value in the Prometheus text format. Written here, independently of the code
/// under test.
pub fn quoted(v: &str) -> String {
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One phase of a real-engine lab run, as its `manifest.json` records it (scripts/lab/).
#[derive(Debug, Clone)]
pub struct LabPhase {
    pub name: String,
    pub kind: String,
    pub start: chrono::DateTime<chrono::Utc>,
    pub end: chrono::DateTime<chrono::Utc>,
    /// Rules that must rank first (any of them).
    pub expect_first: Vec<String>,
    /// The replica the incident is about (fleet runs).
    pub expect_replica: Option<String>,
    /// The limit the report's `binding` must name (limits runs).
    pub expect_binding: Option<String>,
    /// The phase it is diagnosed against.
    pub baseline: Option<String>,
}

/// `explain` of one phase of a lab run against its baseline phase, with `extra` arguments.
pub fn explain_lab_phase(url: &str, phases: &[LabPhase], p: &LabPhase, extra: &[&str]) -> run::Run {
    let b = phases.iter().find(|b| Some(&b.name) == p.baseline.as_ref()).unwrap_or_else(|| panic!("{}: no baseline phase", p.name));
    let window = format!("{}s", (p.end - p.start).num_seconds());
    let offset = format!("{}s", (p.start - b.start).num_seconds());
    let at = p.end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let args = [&["--window", &window, "--baseline", &offset, "--no-config"][..], extra].concat();
    run::run(&run::explain_args(url, &at, &args), &[])
}

/// The phases of the lab run whose export is in `dir`. Panics, naming the file, on a manifest that
/// cannot be read.
pub fn lab_manifest(dir: &Path) -> Vec<LabPhase> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let m: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let time = |v: &serde_json::Value| -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{}: bad time {v}: {e}", path.display()))
            .with_timezone(&chrono::Utc)
    };
    let text_of = |v: &serde_json::Value| v.as_str().map(String::from);
    m["phases"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no phases", path.display()))
        .iter()
        .map(|p| LabPhase {
            name: text_of(&p["name"]).unwrap_or_default(),
            kind: text_of(&p["kind"]).unwrap_or_default(),
            start: time(&p["start"]),
            end: time(&p["end"]),
            expect_first: p["expect_first"].as_array().into_iter().flatten().filter_map(text_of).collect(),
            expect_replica: text_of(&p["expect_replica"]),
            expect_binding: text_of(&p["expect_binding"]),
            baseline: text_of(&p["baseline_phase"]),
        })
        .collect()
}

/// The lab checks a manifest recorded as failed (`"checks": {"failed": [...]}`), if any.
pub fn lab_checks_failed(dir: &Path) -> Vec<String> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let m: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    m["checks"]["failed"].as_array().into_iter().flatten().map(|c| c.to_string()).collect()
}

/// The rules of a report's warning and critical findings, in order.
pub fn loud(report: &serde_json::Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["severity"] != "info")
        .map(|f| f["rule"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The models of the query and samples budgets' fleet (tests/query_budget.rs, tests/samples_budget.rs).
pub const BUDGET_MODELS: [&str; 2] = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen2.5-7B-Instruct"];

/// The budgets' fleet: two models with `replicas` each, the first one out of KV cache in the window.
pub fn budget_fleet(replicas: u32) -> ScenarioSpec {
    let mut toml = format!(
        "name = \"budget-{replicas}\"\nseed = 11\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"60s\"\nwarmup = \"5m\"\n\
         baseline = \"30m\"\nwindow = \"30m\"\n"
    );
    for m in BUDGET_MODELS {
        toml.push_str(&format!("\n[[model]]\nname = \"{m}\"\nreplicas = {replicas}\nrate = 2.0\n"));
    }
    toml.push_str(&format!("\n[incident]\nkind = \"kv-cache-pressure\"\nmodel = \"{}\"\n", BUDGET_MODELS[0]));
    ScenarioSpec::from_toml_str(&toml).unwrap_or_else(|e| panic!("budget spec ({replicas} replicas): {e}"))
}

/// What one `explain --format json --record` run of a scenario fixture against a real Prometheus
/// gave back: see [`scenario_run`].
pub struct ScenarioRun {
    pub spec: ScenarioSpec,
    /// The run's `--at`: the end of the scenario's window.
    pub at: String,
    /// The exit code, `None` when a signal ended the process.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The run's recording (`--record`), every request and its answer.
    pub recording: PathBuf,
}

impl ScenarioRun {
    /// The JSON report, or `Null` when stdout is not one.
    pub fn report(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or(serde_json::Value::Null)
    }
}

/// `vllm-diag explain --prometheus <url> --at <the window's end> --format json --record <file>` over
/// the scenario fixture `name` in a real Prometheus (its window is the default half hour, as every
/// fixture's is; another is passed with `--window`).
///
/// Three test binaries judge this same run of every scenario: tests/differential.rs (its recording,
/// answered again by local evaluation), tests/pathologies.rs (the expected findings) and
/// tests/victoria.rs (the same diagnosis from VictoriaMetrics). Each started its own Prometheus and
/// ran explain for it, three times over 106 scenarios. The run is deterministic for a given binary
/// and data (the same requests, the same answers), so it is made once per build: the first test to
/// ask runs it and keeps stdout, stderr, the exit code and the recording under the target directory,
/// keyed by the vllm-diag binary (its size and modification time: a rebuild is a new key), the
/// generated data and the arguments; the others read them back. Entries of an older binary are
/// removed when a new one makes its first.
pub fn scenario_run(name: &str) -> ScenarioRun {
    use std::hash::{Hash, Hasher};
    let spec = load_scenario(name);
    let at = run::at_window_end(&spec);
    let mut text = Vec::new();
    generate_openmetrics(&spec, &mut text).unwrap_or_else(|e| panic!("scenario {name}: {e}"));
    let mut args: Vec<String> = vec!["explain".into(), "--at".into(), at.clone(), "--format".into(), "json".into()];
    if spec.window != Duration::from_secs(1800) {
        args.extend(["--window".to_string(), format!("{}s", spec.window.as_secs())]);
    }
    let bin = assert_cmd::cargo::cargo_bin("vllm-diag");
    let meta = std::fs::metadata(&bin).unwrap_or_else(|e| panic!("the vllm-diag binary {}: {e}", bin.display()));
    let modified = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).unwrap_or_default();
    let build = format!("{}-{}", meta.len(), modified.as_nanos());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    args.hash(&mut h);
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("scenario-runs");
    let entry = root.join(&build).join(format!("{name}-{}-{:016x}", content_key(&text), h.finish()));
    // Test binaries run side by side (scripts/run-tests.py): the first to ask for a run makes it
    // while the others wait for it, holding a lock beside the entry.
    std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("cannot create {}: {e}", root.display()));
    let _lock = exclusive_lock(&root.join(format!(".{name}.lock"))).unwrap_or_else(|e| panic!("cannot create a lock in {}: {e}", root.display()));
    if !entry.join("done").exists() {
        // An older binary's runs can never be asked for again: it was overwritten.
        if !root.join(&build).is_dir() {
            for old in std::fs::read_dir(&root).into_iter().flatten().flatten() {
                if old.file_name() != build.as_str() && !old.file_name().to_string_lossy().starts_with('.') {
                    let _ = std::fs::remove_dir_all(old.path());
                }
            }
        }
        std::fs::create_dir_all(root.join(&build)).unwrap_or_else(|e| panic!("cannot create {}: {e}", root.display()));
        let dir = tempfile::Builder::new()
            .prefix(".run-")
            .tempdir_in(root.join(&build))
            .unwrap_or_else(|e| panic!("cannot create a directory in {}: {e}", root.display()));
        let om = dir.path().join("scenario.om");
        std::fs::write(&om, &text).unwrap_or_else(|e| panic!("cannot write {}: {e}", om.display()));
        drop(text);
        let prom = PromServer::start_in(temp_dir("vllm-diag-prom-"), Some(&om), None);
        let _ = std::fs::remove_file(&om);
        let rec = dir.path().join("run.json");
        let mut cmd = run::vllm_diag();
        cmd.args(&args[..1]).args(["--prometheus", &prom.url]).args(&args[1..]).arg("--record").arg(&rec);
        let out = cmd.output().unwrap_or_else(|e| panic!("run vllm-diag: {e}"));
        drop(prom);
        let code = out.status.code().map_or("signal".to_string(), |c| c.to_string());
        for (file, bytes) in [("stdout", &out.stdout[..]), ("stderr", &out.stderr[..]), ("code", code.as_bytes())] {
            std::fs::write(dir.path().join(file), bytes).unwrap_or_else(|e| panic!("cannot write {file}: {e}"));
        }
        std::fs::write(dir.path().join("done"), b"").unwrap_or_else(|e| panic!("cannot write done: {e}"));
        // Into place in one step: another process sees a whole entry or none (when two race, the
        // second rename fails and its copy is dropped).
        let kept = dir.keep();
        if std::fs::rename(&kept, &entry).is_err() {
            if entry.join("done").exists() {
                let _ = std::fs::remove_dir_all(&kept);
            } else {
                panic!("cannot keep the run of {name} at {}", entry.display());
            }
        }
    }
    let read = |file: &str| std::fs::read_to_string(entry.join(file)).unwrap_or_else(|e| panic!("{}: {e}", entry.join(file).display()));
    let code = read("code").parse().ok();
    ScenarioRun { spec, at, code, stdout: read("stdout"), stderr: read("stderr"), recording: entry.join("run.json") }
}

/// vLLM's router binary (PyPI vllm-router): $VLLM_DIAG_ROUTER, or the venv scripts/router-venv.sh
/// makes under the test cache. Fails with what to run where it is missing.
pub fn router_binary() -> std::path::PathBuf {
    use std::path::PathBuf;
    let path = std::env::var_os("VLLM_DIAG_ROUTER").map(PathBuf::from).unwrap_or_else(|| {
        let cache = std::env::var_os("VLLM_DIAG_TEST_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/vllm-diag-test"));
        cache.join("router-venv/bin/vllm-router")
    });
    assert!(
        path.exists(),
        "vLLM's router is not installed at {}: run scripts/router-venv.sh (scripts/test.sh runs it), or point $VLLM_DIAG_ROUTER at a vllm-router binary",
        path.display()
    );
    path
}
