//! A Prometheus of our own on 127.0.0.1 over a fleet's TSDB, stopped when dropped.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::server::{free_port, Server};

/// Start Prometheus on `tsdb` (no scrape targets) and wait until it answers `/-/ready`. SIGTERM
/// stops it, so the TSDB closes cleanly and the cached data stays tidy.
pub async fn start(tsdb: &Path, work: &Path) -> Result<Server, String> {
    std::fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let config = work.join("prometheus.yml");
    std::fs::write(&config, "global:\n  scrape_interval: 1m\nscrape_configs: []\n").map_err(|e| format!("cannot write {}: {e}", config.display()))?;
    let port = free_port()?;
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", tsdb.display()))
        .arg("--storage.tsdb.retention.time=100y")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"));
    Server::spawn("prometheus", "prometheus", cmd, port, &work.join("prometheus.log"), "/-/ready", (libc::SIGTERM, Duration::from_secs(10))).await
}
