//! A backend process of our own on 127.0.0.1 (Prometheus or VictoriaMetrics): a free port, its log
//! in a file, ready once a health path answers, stopped with a signal when dropped so its storage
//! closes cleanly and the cached data opens again next time.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long opening a large TSDB or storage directory may take before we give up.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

pub struct Server {
    pub url: String,
    child: Child,
    log: PathBuf,
    /// The signal that stops it cleanly, and how long to wait before killing it.
    stop: (libc::c_int, Duration),
}

/// A port nobody listens on at the moment.
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

impl Server {
    /// Run `cmd` (already listening on `port`), its output to `log`, and wait until `ready` (a
    /// path) answers 2xx. `name` and `package` say what to install when it cannot start.
    pub async fn spawn(
        name: &str,
        package: &str,
        mut cmd: Command,
        port: u16,
        log: &Path,
        ready: &str,
        stop: (libc::c_int, Duration),
    ) -> Result<Server, String> {
        let log_file = std::fs::File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let log_err = log_file.try_clone().map_err(|e| format!("cannot share {}: {e}", log.display()))?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}. Install the Debian package `{package}` (scripts/bench.sh does)"))?;
        let mut server = Server { url: format!("http://127.0.0.1:{port}"), child, log: log.to_path_buf(), stop };
        let http = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if let Ok(r) = http.get(format!("{}{ready}", server.url)).send().await {
                if r.status().is_success() {
                    return Ok(server);
                }
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("{name} exited ({status}) before it was ready:\n{}", server.log_text()));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!("{name} was not ready after {}s:\n{}", READY_TIMEOUT.as_secs(), server.log_text()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The CPU time (user and system) the server process has used so far.
    pub fn cpu(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).ok()?;
        // The fields after the command name (which may hold spaces) in parentheses.
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Some(Duration::from_millis(ticks * 1000 / hz))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("(cannot read {}: {e})", self.log.display()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SAFETY: the pid is our own, still unreaped child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, self.stop.0);
        }
        let deadline = Instant::now() + self.stop.1;
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
