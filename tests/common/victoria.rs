//! A real VictoriaMetrics single-node per test, holding generated scenario data.
//!
//! VictoriaMetrics is the second backend vllm-diag promises to read, and its PromQL dialect
//! (MetricsQL) differs from Prometheus in ways that matter to a diagnosis: `rate()` does not
//! extrapolate, lookback adapts to the scrape interval, NaN results are dropped from answers. Only
//! the real server shows whether those differences change a verdict, so tests start one like
//! [`super::PromServer`]: its own temporary `-storageDataPath`, its own free port on 127.0.0.1,
//! killed when dropped.
//!
//! Data goes in through `/api/v1/import/prometheus` (the Prometheus text format with millisecond
//! timestamps), converted from the very series the generator gives promtool. Newly imported samples
//! sit in in-memory buffers for up to a second before a search can see them, so
//! [`VmServer::load_series`] forces a flush and then polls a count of the stored samples until it
//! equals what was sent: a test never races the server's buffering, and never sleeps a guessed time.
//! The response cache is off (`-search.disableCache`, which its help recommends while backfilling),
//! so a query answered while samples were still arriving cannot be served again later.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tempfile::TempDir;
use vllm_diag_sim::{generate_series, GeneratedSeries, ScenarioSpec};

use super::{http_get, http_request, load_scenario, quoted, read_log, runs, spawn_ready, temp_dir, Ready, Spawned};

/// How long imported samples may take to become searchable before the test fails: a guard (the wait
/// ends as soon as they are), so with room for a busy machine.
const SEARCHABLE_TIMEOUT: Duration = Duration::from_secs(180);
/// Import request bodies are cut at about this size, so no request holds a whole fleet's text.
const IMPORT_CHUNK_BYTES: usize = 4 << 20;

/// A running VictoriaMetrics with its own storage directory. Killed and reaped on drop.
pub struct VmServer {
    /// Base URL, e.g. `http://127.0.0.1:41234`. The same API is also served below `/prometheus`.
    pub url: String,
    addr: SocketAddr,
    child: Child,
    log: PathBuf,
    _dir: TempDir,
}

/// Load a scenario fixture, generate its series, import them and wait until all are searchable.
pub fn start_vm_scenario(name: &str) -> (ScenarioSpec, VmServer) {
    let spec = load_scenario(name);
    let series = generate_series(&spec);
    let vm = VmServer::start_empty();
    vm.load_series(&series, spec.start, spec.window_end());
    (spec, vm)
}

impl VmServer {
    /// A VictoriaMetrics with no data.
    pub fn start_empty() -> VmServer {
        require_victoria_metrics();
        let dir = temp_dir("vllm-diag-vm-");
        let data = dir.path().join("data");
        let Spawned { addr, child, log } = spawn_ready(dir.path(), "victoria-metrics", Ready::Get("/health"), |addr| {
            let mut cmd = Command::new("victoria-metrics");
            cmd.arg(format!("-storageDataPath={}", data.display()))
                // The scenarios sit at a fixed date in the past; the default retention (one month)
                // would refuse them.
                .arg("-retentionPeriod=100y")
                .arg(format!("-httpListenAddr={addr}"))
                .arg("-search.disableCache")
                // Exported alerts that combine several counter shares exceed the 16 KiB default
                // (docs/sources.md says so and what to set).
                .arg("-search.maxQueryLen=128KiB")
                .arg("-loggerLevel=WARN");
            cmd
        });
        VmServer { url: format!("http://{addr}"), addr, child, log, _dir: dir }
    }

    /// Import series (every point of which lies in `from..=to`), then wait until a search sees every
    /// sample. Panics, with the server's log, when the import is refused or never becomes visible.
    pub fn load_series(&self, series: &[GeneratedSeries], from: DateTime<Utc>, to: DateTime<Utc>) {
        let mut body = String::with_capacity(IMPORT_CHUNK_BYTES + 4096);
        let mut sent = 0usize;
        for s in series {
            let prefix = series_prefix(s);
            for &(t, v) in &s.points {
                // Whole milliseconds: the generator's timestamps are multiples of the scrape interval.
                let _ = writeln!(body, "{prefix} {} {}", prom_float(v), (t * 1000.0).round() as i64);
                sent += 1;
            }
            if body.len() >= IMPORT_CHUNK_BYTES {
                self.import(&body);
                body.clear();
            }
        }
        if !body.is_empty() {
            self.import(&body);
        }
        self.wait_searchable(sent, from, to);
    }

    /// POST Prometheus text (millisecond timestamps) to `/api/v1/import/prometheus`.
    pub fn import(&self, text: &str) {
        let (status, answer) = http_post(self.addr, "/api/v1/import/prometheus", text.as_bytes(), Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("import into victoria-metrics: {e}\n{}", self.log_text()));
        if status != 204 && status != 200 {
            panic!("victoria-metrics refused the import: HTTP {status}: {answer}\n{}", self.log_text());
        }
    }

    /// Flush, then poll the number of stored samples in `from..=to` until it reaches `expected`.
    fn wait_searchable(&self, expected: usize, from: DateTime<Utc>, to: DateTime<Utc>) {
        let started = Instant::now();
        // The range is open on the left in MetricsQL: reach a minute past the first sample.
        let range = (to - from).num_seconds().max(0) + 60;
        let query = format!("sum(count_over_time({{__name__=~\".+\"}}[{range}s]))");
        let path = format!("/api/v1/query?query={}&time={}", url::form_urlencoded::byte_serialize(query.as_bytes()).collect::<String>(), to.timestamp());
        let mut seen = 0usize;
        loop {
            // Moves the in-memory buffers into searchable parts now rather than within a second.
            let _ = self.get("/internal/force_flush");
            if let Ok((200, body)) = self.get(&path) {
                seen = count_of(&body);
                if seen == expected {
                    return;
                }
                if seen > expected {
                    panic!("victoria-metrics holds {seen} samples, more than the {expected} imported: {body}");
                }
            }
            if started.elapsed() > SEARCHABLE_TIMEOUT {
                panic!(
                    "victoria-metrics made only {seen} of {expected} imported samples searchable in {}s; its log:\n{}",
                    SEARCHABLE_TIMEOUT.as_secs(),
                    self.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `GET` a path (with its query string) and return the status and body.
    pub fn get(&self, path_and_query: &str) -> std::io::Result<(u16, String)> {
        http_get(self.addr, path_and_query, Duration::from_secs(30))
    }

    /// What VictoriaMetrics has logged so far.
    pub fn log_text(&self) -> String {
        read_log(&self.log)
    }
}

impl Drop for VmServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `name{label="value",...}` with the text format's escapes.
fn series_prefix(s: &GeneratedSeries) -> String {
    let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={}", quoted(v))).collect();
    format!("{}{{{}}}", s.name, labels.join(","))
}

/// A sample value as the text format writes it (`NaN`, `+Inf`, `-Inf` or a number).
fn prom_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// The value of a one-sample vector answer, 0 for an empty one.
fn count_of(body: &str) -> usize {
    let json: serde_json::Value = serde_json::from_str(body).unwrap_or(serde_json::Value::Null);
    json["data"]["result"][0]["value"][1].as_str().and_then(|s| s.parse::<f64>().ok()).map_or(0, |v| v as usize)
}

/// Panic with instructions when VictoriaMetrics is not installed: a skipped test looks like a pass.
fn require_victoria_metrics() {
    if !runs("victoria-metrics", "-version") {
        panic!(
            "`victoria-metrics` is not installed or does not run. The VictoriaMetrics tests need the real server: \
             run scripts/test.sh, which installs it (Debian package `victoria-metrics`)"
        );
    }
}

/// Minimal HTTP/1.0 POST with a body; the server closes the connection after answering.
fn http_post(addr: SocketAddr, path: &str, body: &[u8], timeout: Duration) -> std::io::Result<(u16, String)> {
    let head = format!("POST {path} HTTP/1.0\r\nHost: {addr}\r\nContent-Type: text/plain\r\nContent-Length: {}", body.len());
    http_request(addr, &head, body, timeout)
}
