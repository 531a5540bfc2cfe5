//! A VictoriaMetrics single-node of our own on 127.0.0.1, and a fleet's data imported into it.
//!
//! The server runs with its own `-storageDataPath` (kept per fleet next to the Prometheus TSDB, so
//! the import is paid once), `-retentionPeriod=100y` (the fleet sits at a fixed date in the past)
//! and `-search.disableCache`: without it VictoriaMetrics answers a repeated range query partly from
//! its rollup cache, and every timed run after the first would measure the cache, not the work.
//! `-search.maxUniqueTimeseries` and `-search.maxSeries` are raised far past their defaults
//! (300,000 and 30,000), which refuse a 10,000-replica fleet's histograms outright, as its operator
//! would raise them. Everything else is the default, as a user's would be
//! (`-search.maxConcurrentRequests` is 2 x the cores: on this machine 4 of explain's 8 requests run
//! and the rest queue).
//!
//! The import streams the fleet's OpenMetrics file (the very file promtool backfills) through
//! `/api/v1/import/prometheus`: OpenMetrics minus its comment lines, with the timestamps turned from
//! seconds into milliseconds, is the Prometheus text format that endpoint takes. A converter thread
//! cuts the text into requests of about [`CHUNK_BYTES`] while at most [`IMPORTS_IN_FLIGHT`] are
//! posted, so neither side holds more than a few chunks. Then, like tests/common/victoria.rs, it
//! forces a flush and polls a count of the stored samples of every metric until each equals what
//! was sent, so the data is known to be complete before anything is timed.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::server::{free_port, Server};

/// How long imported samples may take to become searchable.
const SEARCHABLE_TIMEOUT: Duration = Duration::from_secs(600);
/// One import request's body, about.
const CHUNK_BYTES: usize = 16 << 20;
/// Import requests posted at once (the machine has 2 cores).
const IMPORTS_IN_FLIGHT: usize = 2;

/// Start VictoriaMetrics on `storage` and wait until it answers `/health`. Its log goes to
/// `work/<log_name>`. SIGINT stops it, so it flushes and closes the storage and the cached
/// directory opens cleanly next time.
pub async fn start(storage: &Path, work: &Path, log_name: &str) -> Result<Server, String> {
    std::fs::create_dir_all(work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let port = free_port()?;
    let mut cmd = Command::new("victoria-metrics");
    cmd.arg(format!("-storageDataPath={}", storage.display()))
        .arg("-retentionPeriod=100y")
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .arg("-search.disableCache")
        // The default caps (300,000 series a query may touch, 30,000 a series request may list)
        // refuse a 10,000-replica fleet's histograms outright; an operator of such a fleet raises
        // them, and nothing smaller comes near them.
        .arg("-search.maxUniqueTimeseries=20000000")
        .arg("-search.maxSeries=20000000")
        .arg("-loggerLevel=WARN");
    Server::spawn("victoria-metrics", "victoria-metrics", cmd, port, &work.join(log_name), "/health", (libc::SIGINT, Duration::from_secs(60))).await
}

/// What importing a fleet cost, stored with the storage directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Imported {
    pub samples: u64,
    /// Prometheus text sent (the OpenMetrics file without comments, timestamps in milliseconds).
    pub text_bytes: u64,
    pub requests: usize,
    /// From the first byte read to the last import request answered (conversion streamed alongside).
    pub import_secs: f64,
    /// Then until a flush made every sample searchable (counted per metric).
    pub searchable_secs: f64,
    /// `du`-style size of the storage directory after the import.
    pub storage_bytes: u64,
    pub victoria_metrics: String,
}

/// What the converter saw.
#[derive(Default)]
struct Converted {
    /// Samples per metric name.
    per_metric: BTreeMap<String, u64>,
    text_bytes: u64,
    first_ms: i64,
    last_ms: i64,
}

/// Stream `om` into the VictoriaMetrics at `url` and wait until every sample is searchable.
pub async fn import(url: &str, om: &Path) -> Result<Imported, String> {
    let started = Instant::now();
    let mut sent = Sent::default();
    sent.add(url, om, None).await?;
    sent.finish(url, started).await
}

/// What has been imported so far, file by file ([`Sent::add`]), until [`Sent::finish`] waits for
/// all of it to be searchable: a fleet too large for one OpenMetrics file on disk is imported one
/// generated chunk at a time.
#[derive(Default)]
pub struct Sent {
    converted: Option<Converted>,
    requests: usize,
}

impl Sent {
    /// Stream `om` into the VictoriaMetrics at `url`, its replicas tagged as chunk `tag`'s (see
    /// `data::tag_replica`) when given.
    pub async fn add(&mut self, url: &str, om: &Path, tag: Option<usize>) -> Result<(), String> {
        let (converted, requests) = send(url, om, tag).await?;
        self.requests += requests;
        match &mut self.converted {
            None => self.converted = Some(converted),
            Some(all) => {
                for (k, v) in converted.per_metric {
                    *all.per_metric.entry(k).or_default() += v;
                }
                all.text_bytes += converted.text_bytes;
                all.first_ms = all.first_ms.min(converted.first_ms);
                all.last_ms = all.last_ms.max(converted.last_ms);
            }
        }
        Ok(())
    }

    /// Wait until every sample sent is searchable; `started` is when the first byte was read.
    pub async fn finish(self, url: &str, started: Instant) -> Result<Imported, String> {
        let converted = self.converted.ok_or("nothing was imported")?;
        let import_secs = started.elapsed().as_secs_f64();
        let waited = Instant::now();
        wait_searchable(&reqwest::Client::new(), url, &converted).await?;
        Ok(Imported {
            samples: converted.per_metric.values().sum(),
            text_bytes: converted.text_bytes,
            requests: self.requests,
            import_secs,
            searchable_secs: waited.elapsed().as_secs_f64(),
            storage_bytes: 0,
            victoria_metrics: version(),
        })
    }
}

/// Stream `om` into the VictoriaMetrics at `url`: what was converted and how many requests it took.
async fn send(url: &str, om: &Path, tag: Option<usize>) -> Result<(Converted, usize), String> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Vec<u8>>(IMPORTS_IN_FLIGHT);
    let om_owned = om.to_path_buf();
    let converter = std::thread::spawn(move || convert(&om_owned, tx, tag));
    let http = reqwest::Client::new();
    let endpoint = format!("{url}/api/v1/import/prometheus");
    let chunks = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|c| (c, rx)) });
    // Boxed, so that dropping it drops the receiver and stops the converter.
    let mut posts = Box::pin(
        chunks
            .map(|chunk| {
                let (http, endpoint) = (&http, &endpoint);
                async move {
                    let resp = http.post(endpoint).body(chunk).send().await.map_err(|e| format!("import into victoria-metrics: {e}"))?;
                    let status = resp.status();
                    if !status.is_success() {
                        let body = resp.text().await.unwrap_or_default();
                        return Err(format!("victoria-metrics refused an import request: HTTP {status}: {body}"));
                    }
                    Ok(())
                }
            })
            .buffer_unordered(IMPORTS_IN_FLIGHT),
    );
    let mut requests = 0;
    let mut failed = None;
    while let Some(r) = posts.next().await {
        match r {
            Ok(()) => requests += 1,
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    drop(posts);
    let converted = converter.join().map_err(|_| "the OpenMetrics converter panicked".to_string())?;
    if let Some(e) = failed {
        return Err(e);
    }
    Ok((converted?, requests))
}

/// OpenMetrics -> Prometheus text with millisecond timestamps, in chunks of about [`CHUNK_BYTES`]
/// sent to `tx`. Stops (with an error) when the receiver is gone.
fn convert(om: &Path, tx: tokio::sync::mpsc::Sender<Vec<u8>>, tag: Option<usize>) -> Result<Converted, String> {
    let file = File::open(om).map_err(|e| format!("cannot open {}: {e}", om.display()))?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut out = Converted { first_ms: i64::MAX, last_ms: i64::MIN, ..Default::default() };
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 4096);
    let mut line = Vec::with_capacity(512);
    let mut metric: Vec<u8> = Vec::new();
    let mut metric_samples = 0u64;
    let mut lineno = 0u64;
    let gone = || "the import stopped before the whole file was sent".to_string();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line).map_err(|e| format!("cannot read {}: {e}", om.display()))? == 0 {
            break;
        }
        lineno += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        if text.is_empty() || text.starts_with(b"#") {
            continue;
        }
        let bad = || format!("{}:{lineno}: not `series value timestamp`: {}", om.display(), String::from_utf8_lossy(text));
        let cut = text.iter().rposition(|&b| b == b' ').ok_or_else(bad)?;
        let t_ms = millis(&text[cut + 1..]).ok_or_else(bad)?;
        out.first_ms = out.first_ms.min(t_ms);
        out.last_ms = out.last_ms.max(t_ms);
        let name_end = text.iter().position(|&b| b == b'{' || b == b' ').unwrap_or(text.len());
        if text[..name_end] != metric[..] {
            if !metric.is_empty() {
                *out.per_metric.entry(String::from_utf8_lossy(&metric).into_owned()).or_default() += metric_samples;
            }
            metric.clear();
            metric.extend_from_slice(&text[..name_end]);
            metric_samples = 0;
        }
        metric_samples += 1;
        match tag {
            Some(c) => chunk.extend_from_slice(&crate::data::tag_replica(&text[..=cut], c)),
            None => chunk.extend_from_slice(&text[..=cut]),
        }
        chunk.extend_from_slice(t_ms.to_string().as_bytes());
        chunk.push(b'\n');
        if chunk.len() >= CHUNK_BYTES {
            out.text_bytes += chunk.len() as u64;
            tx.blocking_send(std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK_BYTES + 4096))).map_err(|_| gone())?;
        }
    }
    if !metric.is_empty() {
        *out.per_metric.entry(String::from_utf8_lossy(&metric).into_owned()).or_default() += metric_samples;
    }
    if !chunk.is_empty() {
        out.text_bytes += chunk.len() as u64;
        tx.blocking_send(chunk).map_err(|_| gone())?;
    }
    if out.per_metric.is_empty() {
        return Err(format!("{}: no samples", om.display()));
    }
    Ok(out)
}

/// An OpenMetrics timestamp (seconds, `1768464000` or `1768464000.250`) in milliseconds.
fn millis(ts: &[u8]) -> Option<i64> {
    let ts = std::str::from_utf8(ts).ok()?;
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac_ms: i64 = if frac.is_empty() { 0 } else { format!("{frac:0<3}").parse().ok()? };
    // `-1.999` is -1 s + 0.999 s, as the writer puts it (Euclidean division).
    secs.parse::<i64>().ok()?.checked_mul(1000)?.checked_add(frac_ms)
}

/// Flush, then poll the number of stored samples of every metric until each equals what was sent.
async fn wait_searchable(http: &reqwest::Client, url: &str, sent: &Converted) -> Result<(), String> {
    let started = Instant::now();
    // MetricsQL ranges are open on the left: reach a minute before the first sample.
    let range = (sent.last_ms - sent.first_ms) / 1000 + 60;
    let time = format!("{}.{:03}", sent.last_ms.div_euclid(1000), sent.last_ms.rem_euclid(1000));
    let mut pending: BTreeMap<&str, (u64, u64)> = sent.per_metric.iter().map(|(k, v)| (k.as_str(), (*v, 0))).collect();
    loop {
        // Moves the in-memory buffers into searchable parts now rather than within a second.
        let _ = http.get(format!("{url}/internal/force_flush")).send().await;
        let mut done = Vec::new();
        for (name, (expected, seen)) in pending.iter_mut() {
            let query = format!("sum(count_over_time({{__name__=\"{name}\"}}[{range}s]))");
            let answer = http
                .post(format!("{url}/api/v1/query"))
                .form(&[("query", query.as_str()), ("time", time.as_str())])
                .send()
                .await
                .map_err(|e| format!("counting the samples of {name}: {e}"))?;
            let body = answer.bytes().await.map_err(|e| format!("counting the samples of {name}: {e}"))?;
            let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| format!("counting the samples of {name}: {e}"))?;
            *seen = v["data"]["result"][0]["value"][1].as_str().and_then(|s| s.parse::<f64>().ok()).map_or(0, |v| v as u64);
            if *seen == *expected {
                done.push(*name);
            } else if *seen > *expected {
                return Err(format!("victoria-metrics holds {seen} samples of {name}, more than the {expected} imported"));
            }
        }
        for name in done {
            pending.remove(name);
        }
        if pending.is_empty() {
            return Ok(());
        }
        if started.elapsed() > SEARCHABLE_TIMEOUT {
            let short: Vec<String> = pending.iter().map(|(n, (e, s))| format!("{n}: {s} of {e}")).collect();
            return Err(format!("victoria-metrics made not every imported sample searchable in {}s: {}", SEARCHABLE_TIMEOUT.as_secs(), short.join(", ")));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The installed VictoriaMetrics' version: its own `-version` when it prints one (the Debian build
/// prints nothing), else the Debian package's.
pub fn version() -> String {
    let own = Command::new("victoria-metrics").arg("-version").output().ok();
    let own = own.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    if !own.is_empty() {
        return own;
    }
    Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "victoria-metrics"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| format!("VictoriaMetrics {} (Debian package)", String::from_utf8_lossy(&o.stdout).trim()))
        .unwrap_or_else(|| "VictoriaMetrics (version unknown)".into())
}

/// Bytes under `dir`, files only.
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}
