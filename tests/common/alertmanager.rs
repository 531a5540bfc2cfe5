//! A real Alertmanager (Debian's `prometheus-alertmanager`) routing every alert to a `vllm-diag
//! serve`, for the tests of serve on the host (tests/serve.rs) and in the image (tests/image.rs).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::run::write_file;

pub struct Alertmanager {
    pub addr: SocketAddr,
    child: Child,
    _dir: tempfile::TempDir,
}

/// One HTTP/1.0 exchange with Alertmanager: the status.
fn status(addr: SocketAddr, head: &str, body: &[u8]) -> u16 {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else { return 0 };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body));
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

impl Alertmanager {
    /// Start Alertmanager on `addr`, routing every alert, grouped by alertname and model_name, to
    /// `serve_url`'s /alertmanager with `token` as its bearer token, after a one-second group wait.
    pub fn start_on(serve_url: &str, token: &str, addr: SocketAddr) -> Alertmanager {
        let dir = tempfile::tempdir().expect("temp dir");
        let token = write_file(dir.path(), "token", token);
        let config = format!(
            "route:\n  receiver: vllm-diag\n  group_by: [alertname, model_name]\n  group_wait: 1s\n  group_interval: 1m\n  repeat_interval: 1h\n\
             receivers:\n  - name: vllm-diag\n    webhook_configs:\n      - url: {serve_url}/alertmanager\n        send_resolved: true\n\
             \x20       http_config:\n          authorization:\n            credentials_file: {}\n",
            token.display()
        );
        Alertmanager::start_with(dir, &config, addr)
    }

    /// Start Alertmanager on `addr` with `config` (its whole configuration file), once it is ready.
    pub fn start_with_config(config: &str, addr: SocketAddr) -> Alertmanager {
        Alertmanager::start_with(tempfile::tempdir().expect("temp dir"), config, addr)
    }

    /// What it has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("alertmanager.log")).unwrap_or_default()
    }

    fn start_with(dir: tempfile::TempDir, config: &str, addr: SocketAddr) -> Alertmanager {
        let config = write_file(dir.path(), "alertmanager.yml", config);
        let log = std::fs::File::create(dir.path().join("alertmanager.log")).expect("log file");
        let mut child = Command::new("prometheus-alertmanager")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--cluster.listen-address=")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start prometheus-alertmanager: {e}. Run scripts/test.sh, which installs it (Debian package prometheus-alertmanager)")
            });
        let started = Instant::now();
        loop {
            if status(addr, &format!("GET /-/ready HTTP/1.0\r\nHost: {addr}\r\n\r\n"), b"") == 200 {
                break;
            }
            let log = std::fs::read_to_string(dir.path().join("alertmanager.log")).unwrap_or_default();
            if let Ok(Some(code)) = child.try_wait() {
                panic!("alertmanager exited ({code}):\n{log}");
            }
            if started.elapsed() > Duration::from_secs(30) {
                panic!("alertmanager not ready after 30s:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Alertmanager { addr, child, _dir: dir }
    }

    /// The same on a free port.
    pub fn start(serve_url: &str, token: &str) -> Alertmanager {
        Alertmanager::start_on(serve_url, token, SocketAddr::from(([127, 0, 0, 1], super::free_port())))
    }

    /// POST alerts to API v2; the status.
    pub fn post_alerts(&self, alerts: &Value) -> u16 {
        let body = alerts.to_string();
        let head = format!("POST /api/v2/alerts HTTP/1.0\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", self.addr, body.len());
        status(self.addr, &head, body.as_bytes())
    }
}

impl Drop for Alertmanager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
