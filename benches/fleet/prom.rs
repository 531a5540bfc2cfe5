//! A Prometheus of our own on 127.0.0.1 over a fleet's TSDB, stopped when dropped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long opening a large TSDB may take before we give up.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Prom {
    pub url: String,
    child: Child,
    log: PathBuf,
}

impl Prom {
    /// Start Prometheus on `tsdb` (no scrape targets) and wait until it answers `/-/ready`.
    pub async fn start(tsdb: &Path, work: &Path) -> Result<Prom, String> {
        std::fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
        let config = work.join("prometheus.yml");
        std::fs::write(&config, "global:\n  scrape_interval: 1m\nscrape_configs: []\n")
            .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))?;
        let log = work.join("prometheus.log");
        let log_file = std::fs::File::create(&log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let log_err = log_file.try_clone().map_err(|e| format!("cannot share {}: {e}", log.display()))?;
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg("--storage.tsdb.retention.time=100y")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start prometheus: {e}. Install the Debian package `prometheus` (scripts/bench.sh does)"))?;
        let mut prom = Prom { url: format!("http://127.0.0.1:{port}"), child, log };
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{}/-/ready", prom.url)).send().await {
                if r.status().is_success() {
                    return Ok(prom);
                }
            }
            if let Ok(Some(status)) = prom.child.try_wait() {
                return Err(format!("prometheus exited ({status}) before it was ready:\n{}", prom.log_text()));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!("prometheus was not ready after {}s:\n{}", READY_TIMEOUT.as_secs(), prom.log_text()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(cannot read {}: {e})", self.log.display()))
    }
}

impl Drop for Prom {
    fn drop(&mut self) {
        // SIGTERM first so the TSDB closes cleanly and the cached data stays tidy.
        // SAFETY: the pid is our own, still unreaped child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
