//! Record a run's traffic and replay it offline.
//!
//! `--record FILE` wraps the live source in a [`Recorder`], which keeps every request with exactly what
//! came back (the raw exchange, or the transport error), and saves them with the run's parameters.
//! `--replay FILE` opens that file as a [`Replay`] source: the same parameters produce the same requests,
//! which get the same bytes, which go through the same decoder, so the report is identical. That makes a
//! recording a bug report, a regression fixture and a way to re-run new rules over an old incident.
//!
//! The file is pretty, sorted JSON so it diffs well and can be read or trimmed by hand. It holds no
//! credentials: URLs are shown without them and requests and bodies never contain them.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::{Exchange, Request, Source, SourceError};
use crate::report::SourceInfo;
use crate::report::{RunParams, TimeRange};

/// The `format` field of every recording.
pub const FORMAT: &str = "vllm-diag-recording";
/// The only recording version this build reads and writes.
pub const VERSION: u32 = 1;

/// Why a recording could not be written or read. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("cannot access the recording {}: {source}. Check the path and its permissions", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}:{line}:{column}: the recording is damaged ({message}). It may be truncated or edited by hand; \
         record it again with --record",
        .path.display()
    )]
    Parse { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{}: {message}", .path.display())]
    Format { path: PathBuf, message: String },
}

/// What one request produced, as stored.
type Outcome = Result<Exchange, SourceError>;

/// A live source that remembers everything it was asked and everything it answered.
pub struct Recorder {
    inner: Arc<dyn Source>,
    log: Mutex<BTreeMap<Request, Outcome>>,
    /// What a scrape knew before any query: its warnings and the targets that answered nothing.
    scrape: Mutex<ScrapeGaps>,
}

/// What a `--scrape` run learnt while scraping, which no query answer holds: kept in its recording
/// so a replay reports the same.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScrapeGaps {
    /// Targets that failed some rounds, and why (the report's warnings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Targets that answered none (the report's `coverage.unread_targets`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unread_targets: Vec<String>,
}

impl ScrapeGaps {
    pub fn is_empty(&self) -> bool {
        self.warnings.is_empty() && self.unread_targets.is_empty()
    }
}

impl Recorder {
    pub fn new(inner: Arc<dyn Source>) -> Recorder {
        Recorder { inner, log: Mutex::new(BTreeMap::new()), scrape: Mutex::new(ScrapeGaps::default()) }
    }

    /// Keep what the scrape learnt, to write with the exchanges.
    pub fn keep_scrape_gaps(&self, gaps: ScrapeGaps) {
        *self.scrape.lock().unwrap_or_else(|e| e.into_inner()) = gaps;
    }

    /// How many distinct requests were recorded so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Write the recording to `path` atomically: a half-written file never replaces a good one.
    pub fn save(&self, path: &Path, params: &RunParams, profile: Option<&str>) -> Result<(), RecordError> {
        let exchanges: Vec<StoredExchange> = self
            .lock()
            .iter()
            .map(|(request, outcome)| match outcome {
                Ok(ex) => StoredExchange { request: request.clone(), response: Some(ex.clone()), error: None },
                Err(e) => StoredExchange { request: request.clone(), response: None, error: Some(e.clone()) },
            })
            .collect();
        let file = RecordingFile {
            format: FORMAT.to_string(),
            version: VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            params: params.clone(),
            profile: profile.map(str::to_string),
            scrape: self.scrape.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            source: self.inner.info(),
            exchanges,
        };
        let mut text = serde_json::to_string_pretty(&file).map_err(|e| RecordError::Io { path: path.to_path_buf(), source: std::io::Error::other(e) })?;
        text.push('\n');
        write_atomically(path, text.as_bytes())
    }

    /// The log, even if another task panicked while holding it (the map is still consistent).
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Request, Outcome>> {
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Source for Recorder {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>> {
        Box::pin(async move {
            let outcome = self.inner.send(req).await;
            self.lock().insert(req.clone(), outcome.clone());
            outcome
        })
    }

    fn info(&self) -> SourceInfo {
        self.inner.info()
    }

    fn url(&self) -> String {
        self.inner.url()
    }

    /// The run stopped waiting before an answer came: what the run made of it (a timeout) is
    /// recorded, unless the answer made it in after all.
    fn gave_up(&self, req: &Request, error: &SourceError) {
        self.lock().entry(req.clone()).or_insert_with(|| Err(error.clone()));
    }
}

/// A source that answers from a recording, offline.
#[derive(Debug)]
pub struct Replay {
    file: String,
    source: SourceInfo,
    profile: Option<String>,
    scrape: ScrapeGaps,
    answers: BTreeMap<Request, Outcome>,
}

impl Replay {
    /// Read a recording; returns the source and the parameters the run was recorded with.
    pub fn open(path: &Path) -> Result<(Replay, RunParams), RecordError> {
        let text = std::fs::read_to_string(path).map_err(|source| RecordError::Io { path: path.to_path_buf(), source })?;
        let parse_err =
            |e: serde_json::Error| RecordError::Parse { path: path.to_path_buf(), line: e.line(), column: e.column(), message: strip_position(&e.to_string()) };

        let format_err = |message: String| RecordError::Format { path: path.to_path_buf(), message };
        // The whole file in one pass (a large recording is mostly answer bodies). Only when it does
        // not read as a recording is the header read alone, so that a file of another kind or
        // version gets a message about that rather than about whichever field happens to differ.
        let not_an_object = || {
            format_err("not a vllm-diag recording (it is JSON, but not an object with \"format\" and \"version\"); pass a file written by --record".to_string())
        };
        let file: RecordingFile = match serde_json::from_str(&text) {
            Ok(file) if text.trim_start().starts_with('{') => file,
            // serde also reads a struct from an array of its fields; a recording is an object.
            Ok(_) => return Err(not_an_object()),
            Err(e) => {
                return Err(match serde_json::from_str::<Head>(&text) {
                    Ok(head) => match header_problem(
                        head.format.as_deref(),
                        head.version.as_ref().and_then(serde_json::Value::as_u64),
                        head.tool_version.as_ref().and_then(serde_json::Value::as_str),
                    ) {
                        Some(message) => format_err(message),
                        None => parse_err(e),
                    },
                    Err(h) if h.classify() == serde_json::error::Category::Data => not_an_object(),
                    Err(h) => parse_err(h),
                })
            }
        };
        if let Some(message) = header_problem(Some(&file.format), Some(u64::from(file.version)), Some(&file.tool_version)) {
            return Err(format_err(message));
        }
        check_params(&file.params).map_err(|m| format_err(format!("{m}; the file was edited by hand or damaged: record it again with --record")))?;
        let mut answers = BTreeMap::new();
        for (i, stored) in file.exchanges.into_iter().enumerate() {
            let outcome = match (stored.response, stored.error) {
                (Some(ex), None) => Ok(ex),
                (None, Some(e)) => Err(e),
                (Some(_), Some(_)) | (None, None) => {
                    return Err(format_err(format!(
                        "exchange {} must hold exactly one of \"response\" and \"error\"; the file was edited by \
                         hand or damaged: record it again with --record",
                        i + 1
                    )))
                }
            };
            answers.entry(stored.request).or_insert(outcome);
        }
        // Recordings store the URL without credentials; one edited by hand may not.
        let source = SourceInfo { url: crate::prom::strip_credentials(&file.source.url), ..file.source };
        let replay = Replay { file: path.display().to_string(), source, profile: file.profile, scrape: file.scrape, answers };
        Ok((replay, file.params))
    }

    /// The `--profile` the run was recorded with, if one was given.
    pub fn profile(&self) -> Option<&str> {
        self.profile.as_deref()
    }

    /// What a recorded scrape learnt while scraping (empty for other recordings).
    pub fn scrape_gaps(&self) -> &ScrapeGaps {
        &self.scrape
    }

    /// How many requests the recording can answer.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }
}

impl Source for Replay {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>> {
        let answer = match self.answers.get(req) {
            Some(outcome) => outcome.clone(),
            None => Err(SourceError::NotRecorded { file: self.file.clone(), request: req.describe() }),
        };
        Box::pin(futures::future::ready(answer))
    }

    fn info(&self) -> SourceInfo {
        self.source.clone()
    }
}

#[derive(Serialize, Deserialize)]
struct RecordingFile {
    format: String,
    version: u32,
    tool_version: String,
    params: RunParams,
    /// The `--profile` the run was judged with, when one was given: a replay judges with it too.
    /// (Absent in recordings made before it was kept: the default profile.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    profile: Option<String>,
    /// A scrape's warnings and unread targets (absent for other runs, and in older recordings).
    #[serde(default, skip_serializing_if = "ScrapeGaps::is_empty")]
    scrape: ScrapeGaps,
    source: SourceInfo,
    exchanges: Vec<StoredExchange>,
}

#[derive(Serialize, Deserialize)]
struct StoredExchange {
    request: Request,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    response: Option<Exchange>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<SourceError>,
}

/// The fields that identify a recording; everything else is skipped unread.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    version: Option<serde_json::Value>,
    #[serde(default)]
    tool_version: Option<serde_json::Value>,
}

/// What is wrong with a recording's header (its `format`, `version` and `tool_version` fields), if
/// anything: another kind of file, or a version this build does not read.
fn header_problem(format: Option<&str>, version: Option<u64>, tool_version: Option<&str>) -> Option<String> {
    match format {
        Some(FORMAT) => {}
        Some(other) => return Some(format!("not a vllm-diag recording (its format is {other:?}, expected {FORMAT:?}); pass a file written by --record")),
        None => return Some(format!("not a vllm-diag recording (no \"format\": {FORMAT:?} field); pass a file written by --record")),
    }
    match version {
        Some(v) if v == u64::from(VERSION) => None,
        found => {
            let found = found.map_or_else(|| "missing".to_string(), |v| v.to_string());
            let made_by = tool_version.unwrap_or("an unknown version");
            Some(format!(
                "recording version {found} (written by vllm-diag {made_by}) cannot be read by vllm-diag {}, \
                 which reads version {VERSION}; replay it with the version that wrote it, or record it again \
                 with --record",
                env!("CARGO_PKG_VERSION")
            ))
        }
    }
}

/// The recorded parameters must describe a run vllm-diag could have made: windows that go forward,
/// a baseline as long as the window and not after it, both between 1970 and 9999, at least one
/// grouping label.
fn check_params(p: &RunParams) -> Result<(), String> {
    for (name, r) in [("params.window", &p.window), ("params.baseline", &p.baseline)] {
        if r.start >= r.end {
            return Err(format!("{name} starts at {} but ends at {}, which is not later", r.start, r.end));
        }
        if !r.is_supported() {
            return Err(format!("{name} runs from {} to {}, outside the times a diagnosis can be about ({})", r.start, r.end, TimeRange::supported_text()));
        }
    }
    if p.baseline.end - p.baseline.start != p.window.end - p.window.start {
        return Err("params.baseline is not as long as params.window".to_string());
    }
    if p.baseline.end > p.window.end {
        return Err("params.baseline ends after params.window".to_string());
    }
    if p.group_by.is_empty() || !p.group_by.iter().all(|l| crate::prom::is_label_name(l)) {
        return Err("params.group_by must list label names, e.g. [\"model_name\"]".to_string());
    }
    if !crate::prom::is_replica_label(&p.replica_label) || p.group_by.contains(&p.replica_label) {
        return Err("params.replica_label must be a label name not in params.group_by, e.g. \"instance\"".to_string());
    }
    Ok(())
}

/// serde_json ends messages with " at line L column C"; the error carries those separately.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Write to a temporary file beside `path`, flush it to disk, then rename it over `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), RecordError> {
    let io_err = |source: std::io::Error| RecordError::Io { path: path.to_path_buf(), source };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "recording".into());
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()));

    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_err(e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TimeRange;
    use chrono::{TimeZone, Utc};
    use std::time::Duration;

    /// Answers from a fixed table and fails everything else as unreachable.
    struct Fake;

    impl Source for Fake {
        fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>> {
            let out = match req {
                Request::Instant { query, .. } if query == "up" => Ok(Exchange {
                    http_status: 200,
                    content_type: "application/json".into(),
                    body: r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#.into(),
                }),
                Request::Instant { query, .. } if query == "slow" => {
                    Err(SourceError::Timeout { url: "http://prom:9090/api/v1/query".into(), after: Duration::from_millis(1500) })
                }
                _ => Ok(Exchange { http_status: 502, content_type: "text/html".into(), body: "<title>bad</title>".into() }),
            };
            Box::pin(futures::future::ready(out))
        }

        fn info(&self) -> SourceInfo {
            SourceInfo { kind: crate::report::SourceKind::Prometheus, url: "http://prom:9090".into(), selector: String::new() }
        }
    }

    fn t(s: i64) -> chrono::DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0).unwrap()
    }

    fn params() -> RunParams {
        RunParams {
            window: TimeRange { start: t(0), end: t(600) },
            baseline: TimeRange { start: t(-600), end: t(0) },
            selector: "job=\"vllm\"".into(),
            group_by: vec!["model_name".into()],
            replica_label: "instance".into(),
        }
    }

    fn instant(q: &str) -> Request {
        Request::Instant { query: q.into(), time: t(600) }
    }

    fn requests() -> Vec<Request> {
        vec![
            instant("up"),
            instant("slow"),
            Request::Range { query: "rate(x[5m])".into(), start: t(0), end: t(600), step_seconds: 60 },
            Request::LabelValues { label: "__name__".into(), matchers: vec!["{job=\"vllm\"}".into()], start: t(0), end: t(600) },
        ]
    }

    async fn record_to(path: &Path) -> Vec<Result<Exchange, SourceError>> {
        let rec = Recorder::new(Arc::new(Fake));
        let mut live = Vec::new();
        for r in requests() {
            live.push(rec.send(&r).await);
        }
        assert_eq!(rec.len(), 4);
        rec.save(path, &params(), Some("batch")).expect("save");
        live
    }

    #[tokio::test]
    async fn a_replay_gives_back_exactly_what_was_recorded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run.json");
        let live = record_to(&path).await;

        let (replay, p) = Replay::open(&path).expect("open");
        assert_eq!(p, params());
        assert_eq!(replay.info(), Fake.info());
        // The profile the run was judged with comes back, so the replay judges with it too.
        assert_eq!(replay.profile(), Some("batch"));
        let mut replayed = Vec::new();
        for r in requests() {
            replayed.push(replay.send(&r).await);
        }
        assert_eq!(replayed, live);
        assert!(matches!(live[1], Err(SourceError::Timeout { .. })));
    }

    #[tokio::test]
    async fn the_file_is_deterministic_and_sorted_by_request() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        record_to(&a).await;
        // Same requests in reverse order must give the same bytes.
        let rec = Recorder::new(Arc::new(Fake));
        for r in requests().iter().rev() {
            let _ = rec.send(r).await;
        }
        rec.save(&b, &params(), Some("batch")).expect("save");
        let text_a = std::fs::read_to_string(&a).expect("read a");
        assert_eq!(text_a, std::fs::read_to_string(&b).expect("read b"));

        let v: serde_json::Value = serde_json::from_str(&text_a).expect("json");
        assert_eq!(v["format"], FORMAT);
        assert_eq!(v["version"], 1);
        assert_eq!(v["tool_version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(v["exchanges"].as_array().map(Vec::len), Some(4));
        // Sorted by request: instant queries first, alphabetically.
        assert_eq!(v["exchanges"][0]["request"]["query"], "slow");
        assert_eq!(v["exchanges"][0]["error"]["error"], "timeout");
        assert_eq!(v["exchanges"][1]["request"]["query"], "up");
        assert_eq!(v["exchanges"][1]["response"]["http_status"], 200);
        // No stray temporary files are left beside the recording.
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 2);
    }

    #[tokio::test]
    async fn an_unknown_request_is_not_recorded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run.json");
        record_to(&path).await;
        let (replay, _) = Replay::open(&path).expect("open");
        let err = replay.send(&instant("never asked")).await.expect_err("not recorded");
        assert_eq!(err, SourceError::NotRecorded { file: path.display().to_string(), request: "never asked".into() });
    }

    #[tokio::test]
    async fn a_truncated_file_is_a_parse_error_naming_the_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run.json");
        record_to(&path).await;
        let text = std::fs::read_to_string(&path).expect("read");
        let cut: String = text.lines().take(20).collect::<Vec<_>>().join("\n");
        std::fs::write(&path, &cut).expect("write");
        let err = Replay::open(&path).expect_err("truncated");
        let RecordError::Parse { line, .. } = &err else { panic!("{err:?}") };
        assert_eq!(*line, 20);
        let msg = err.to_string();
        assert!(msg.contains(&format!("{}:20:", path.display())), "{msg}");
        assert!(msg.contains("record it again with --record"), "{msg}");
    }

    #[tokio::test]
    async fn a_tampered_field_is_a_parse_error_naming_the_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run.json");
        record_to(&path).await;
        let text = std::fs::read_to_string(&path).expect("read");
        let line_no = text.lines().position(|l| l.contains("\"http_status\"")).expect("a status line") + 1;
        std::fs::write(&path, text.replacen("\"http_status\": 200", "\"http_status\": \"ok\"", 1)).expect("write");
        let err = Replay::open(&path).expect_err("tampered");
        let RecordError::Parse { line, .. } = &err else { panic!("{err:?}") };
        assert_eq!(*line, line_no);
    }

    #[tokio::test]
    async fn a_recording_written_as_an_array_of_its_fields_is_not_a_recording() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run.json");
        record_to(&path).await;
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        let fields = serde_json::json!([v["format"], v["version"], v["tool_version"], v["params"], null, {}, v["source"], v["exchanges"]]);
        std::fs::write(&path, fields.to_string()).expect("write");
        let err = Replay::open(&path).expect_err("an array");
        assert!(matches!(err, RecordError::Format { .. }) && err.to_string().contains("not an object"), "{err}");
    }

    #[test]
    fn a_file_of_another_format_is_a_format_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("other.json");
        std::fs::write(&path, r#"{"format":"grafana-dashboard","version":1}"#).expect("write");
        let err = Replay::open(&path).expect_err("wrong format");
        assert!(matches!(err, RecordError::Format { .. }), "{err:?}");
        assert!(err.to_string().contains("written by --record"), "{err}");

        for body in [r#"{"status":"success","data":[]}"#, "[]", "42", r#"{"format":7}"#] {
            std::fs::write(&path, body).expect("write");
            assert!(matches!(Replay::open(&path), Err(RecordError::Format { .. })), "{body}");
        }
    }

    #[test]
    fn an_unsupported_version_is_a_format_error_saying_what_to_do() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("future.json");
        std::fs::write(&path, r#"{"format":"vllm-diag-recording","version":2,"tool_version":"9.0.0"}"#).expect("write");
        let err = Replay::open(&path).expect_err("future version");
        let msg = err.to_string();
        assert!(matches!(err, RecordError::Format { .. }));
        assert!(msg.contains("version 2") && msg.contains("9.0.0") && msg.contains("--record"), "{msg}");
    }

    #[test]
    fn an_exchange_with_both_response_and_error_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("both.json");
        let file = serde_json::json!({
            "format": FORMAT, "version": 1, "tool_version": "0.1.0", "params": params(),
            "source": Fake.info(),
            "exchanges": [{"request": instant("up"),
                           "response": {"http_status": 200, "body": ""},
                           "error": {"error": "other", "detail": "x"}}]
        });
        std::fs::write(&path, file.to_string()).expect("write");
        assert!(matches!(Replay::open(&path), Err(RecordError::Format { .. })));
    }

    #[test]
    fn credentials_in_a_hand_edited_recordings_url_are_never_shown() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("edited.json");
        let source = SourceInfo { url: "http://u:S3CRETPW@prom:9090/x?token=T0KEN".into(), ..Fake.info() };
        let file = serde_json::json!({
            "format": FORMAT, "version": 1, "tool_version": "0.1.0", "params": params(),
            "source": source, "exchanges": []
        });
        std::fs::write(&path, file.to_string()).expect("write");
        let (replay, _) = Replay::open(&path).expect("a readable recording");
        let url = replay.info().url;
        assert!(!url.contains("S3CRETPW") && !url.contains("T0KEN") && url.contains("prom:9090"), "{url}");
    }

    #[test]
    fn a_missing_file_is_an_io_error_naming_it() {
        let err = Replay::open(Path::new("/nonexistent/dir/run.json")).expect_err("missing");
        assert!(matches!(err, RecordError::Io { .. }));
        assert!(err.to_string().contains("/nonexistent/dir/run.json"));
    }

    #[test]
    fn saving_into_a_missing_directory_is_an_io_error() {
        let rec = Recorder::new(Arc::new(Fake));
        let err = rec.save(Path::new("/nonexistent/dir/run.json"), &params(), None).expect_err("no dir");
        assert!(matches!(err, RecordError::Io { .. }));
    }

    #[test]
    fn recorded_parameters_that_no_run_could_have_are_refused_naming_the_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("tampered.json");
        let mut backwards = params();
        backwards.window = TimeRange { start: t(600), end: t(0) };
        let mut shorter = params();
        shorter.baseline = TimeRange { start: t(-60), end: t(0) };
        let mut later = params();
        later.baseline = TimeRange { start: t(600), end: t(1200) };
        // Forward and as long as each other, but where times cannot be added to without overflow.
        let span = |start: chrono::DateTime<chrono::Utc>| TimeRange { start, end: start + chrono::Duration::minutes(30) };
        let mut ancient = params();
        ancient.window = span(chrono::DateTime::<chrono::Utc>::MIN_UTC + chrono::Duration::minutes(30));
        ancient.baseline = span(chrono::DateTime::<chrono::Utc>::MIN_UTC);
        let mut far_future = params();
        far_future.window = span(chrono::DateTime::<chrono::Utc>::MAX_UTC - chrono::Duration::minutes(30));
        far_future.baseline = span(chrono::DateTime::<chrono::Utc>::MAX_UTC - chrono::Duration::minutes(60));
        let mut no_labels = params();
        no_labels.group_by = vec![];
        let mut bad_label = params();
        bad_label.group_by = vec!["model name".into()];
        for (p, field) in [
            (backwards, "params.window"),
            (shorter, "params.baseline"),
            (later, "params.baseline"),
            (ancient, "params.window"),
            (far_future, "params.window"),
            (no_labels, "params.group_by"),
            (bad_label, "params.group_by"),
        ] {
            let file = serde_json::json!({
                "format": FORMAT, "version": 1, "tool_version": "0.1.0", "params": p,
                "source": Fake.info(), "exchanges": []
            });
            std::fs::write(&path, file.to_string()).expect("write");
            let err = Replay::open(&path).expect_err(field).to_string();
            assert!(err.contains(field) && err.contains("record it again"), "{err}");
        }
    }

    #[test]
    fn a_recording_cut_anywhere_is_an_error_never_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let full = dir.path().join("full.json");
        futures::executor::block_on(record_to(&full));
        let text = std::fs::read_to_string(&full).expect("read");
        let cut = dir.path().join("cut.json");
        let mut cuts: Vec<usize> = (0..text.len()).step_by(7).collect();
        cuts.push(text.len() - 2);
        for n in cuts.into_iter().filter(|n| text.is_char_boundary(*n)) {
            std::fs::write(&cut, &text[..n]).expect("write");
            let err = Replay::open(&cut).expect_err("a cut recording");
            let msg = err.to_string();
            assert!(msg.contains("cut.json"), "{msg}");
        }
    }
}
