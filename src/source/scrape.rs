//! Direct scrape: no Prometheus anywhere, only vLLM's `/metrics` endpoints.
//!
//! `explain --scrape URL...` samples every endpoint at a fixed interval across the window, stores
//! the samples the way a Prometheus scraper would, and then diagnoses them with local evaluation
//! ([`super::local::LocalSource`]). What a scraper adds is added here too, because the rules and
//! signals depend on it: `instance="host:port"` and `job="vllm"` on every series (labels of those
//! names in the exposition become `exported_instance`/`exported_job`), `up` 1 or 0 per round, and a
//! staleness marker when a series disappears or a target stops answering, so a dead replica stops
//! counting at once. Samples are stamped with the round's scheduled time (the first round opens the
//! window, the last closes it), so the window holds exactly the rounds taken.
//!
//! With no history, comparisons with a baseline are unknown and rules decide on their absolute
//! thresholds. `--baseline-from FILE` supplies a baseline: an OpenMetrics file with timestamps, such
//! as one written by an earlier `--scrape ... --save-samples FILE` (or any file
//! `promtool tsdb create-blocks-from openmetrics` accepts). Its last sample ends the baseline window.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::local::LocalSource;
use crate::local::store::{is_stale, stale_nan};
use crate::local::Store;
use crate::prom::exposition::{self, Format};
use crate::prom::{openmetrics, Selector};
use crate::report::RunParams;
use crate::report::TimeRange;
use crate::source::Labels;

/// Why a scrape run cannot start or produced nothing to diagnose.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("--scrape {url:?}: {problem}")]
    BadTarget { url: String, problem: String },
    #[error("{0}")]
    Usage(String),
    #[error("no target could be scraped: {0}")]
    NothingScraped(String),
    #[error("--baseline-from {}: {problem}", .path.display())]
    Baseline { path: PathBuf, problem: String },
    #[error("--save-samples {}: {problem}", .path.display())]
    Save { path: PathBuf, problem: String },
}

/// One endpoint to scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What is fetched (credentials removed; they travel as basic auth).
    pub url: url::Url,
    /// `host:port`, the `instance` label.
    pub instance: String,
    user: Option<(String, Option<String>)>,
}

impl Target {
    /// Parse `--scrape`: a scheme is optional (http), a bare host:port or `/` path means `/metrics`,
    /// `user:pass@` becomes basic auth and is never shown.
    pub fn parse(text: &str) -> Result<Target, ScrapeError> {
        let bad = |problem: String| ScrapeError::BadTarget { url: crate::prom::redact_url(text), problem };
        let with_scheme = if text.contains("://") { text.to_string() } else { format!("http://{text}") };
        let mut url = url::Url::parse(&with_scheme).map_err(|e| bad(format!("not a URL ({e}); write e.g. http://10.0.0.5:8000/metrics")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!("the scheme must be http or https, not {}", url.scheme())));
        }
        let host = url.host_str().ok_or_else(|| bad("the URL has no host".into()))?.to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let user = (!url.username().is_empty()).then(|| (url.username().to_string(), url.password().map(str::to_string)));
        let _ = url.set_username("");
        let _ = url.set_password(None);
        if url.path().is_empty() || url.path() == "/" {
            url.set_path("/metrics");
        }
        let host_shown = if host.contains(':') { format!("[{host}]") } else { host };
        Ok(Target { instance: format!("{host_shown}:{port}"), url, user })
    }

    /// The URL as shown to people: never with credentials (a `?token=` keeps its name, not its value).
    pub fn shown(&self) -> String {
        crate::prom::strip_credentials(self.url.as_str())
    }
}

/// What a scrape run is asked to do.
#[derive(Debug, Clone)]
pub struct Plan {
    pub targets: Vec<Target>,
    pub window: Duration,
    pub interval: Duration,
    /// Credentials and TLS for every target (the flags that serve `--prometheus` too).
    pub auth: ScrapeAuth,
}

/// How to reach targets behind TLS or an authenticating proxy (kube-rbac-proxy, an ingress): the
/// same flags as for a Prometheus server. Credentials in a target's URL win over these.
#[derive(Debug, Clone, Default)]
pub struct ScrapeAuth {
    pub tls: super::prometheus::TlsOptions,
    pub bearer_token: Option<super::prometheus::Secret>,
    pub basic_auth: Option<(String, super::prometheus::Secret)>,
    /// Extra headers, values masked everywhere.
    pub headers: Vec<(String, super::prometheus::Secret)>,
}

/// The HTTP client for scraping: TLS settings and extra headers applied. Errors name the flag.
pub fn client(auth: &ScrapeAuth) -> Result<reqwest::Client, String> {
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in &auth.headers {
        let n = reqwest::header::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| format!("--header {name:?}: not a valid HTTP header name"))?;
        let mut v =
            reqwest::header::HeaderValue::from_str(value.expose()).map_err(|_| format!("--header {n}: the value holds characters HTTP does not allow"))?;
        v.set_sensitive(true);
        headers.append(n, v);
    }
    let builder = reqwest::Client::builder()
        .user_agent(concat!("vllm-diag/", env!("CARGO_PKG_VERSION")))
        .default_headers(headers)
        .connect_timeout(Duration::from_secs(5))
        // The extra headers may be credentials: follow a redirect only on the same scheme, host
        // and port (reqwest drops Authorization across hosts, but not other headers).
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let same = attempt.previous().first().is_some_and(|first| {
                first.scheme() == attempt.url().scheme()
                    && first.host_str() == attempt.url().host_str()
                    && first.port_or_known_default() == attempt.url().port_or_known_default()
            });
            if same && attempt.previous().len() < 5 {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }));
    super::prometheus::configure_tls(builder, &auth.tls)
        .map_err(|e| e.to_string())?
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {}", first_cause(&e)))
}

impl Plan {
    /// Rounds needed to cover the window (the first opens it, the last closes it).
    pub fn rounds(&self) -> usize {
        (self.window.as_millis() / self.interval.as_millis().max(1)) as usize + 1
    }
}

/// Per-target memory between rounds: which series the last round returned (for staleness).
#[derive(Debug, Default)]
pub struct TargetState {
    last: BTreeSet<Labels>,
    /// Rounds that failed, with the last reason.
    pub failures: usize,
    pub last_error: Option<String>,
}

/// What a fetch produced: the body and its content type, or why there is none.
pub type Fetched = Result<(String, String), String>;

/// Store one round's answer from one target at `t_ms`, as a scraper would.
pub fn ingest(store: &mut Store, state: &mut TargetState, target: &Target, t_ms: i64, fetched: Fetched) {
    let mut up_labels = Labels::new();
    up_labels.insert("__name__".into(), "up".into());
    up_labels.insert("instance".into(), target.instance.clone());
    up_labels.insert("job".into(), "vllm".into());
    let parsed =
        fetched.and_then(|(body, ct)| exposition::parse(&body, Format::from_content_type(&ct)).map_err(|e| format!("cannot parse the exposition: {e}")));
    let now: BTreeSet<Labels> = match parsed {
        Err(e) => {
            state.failures += 1;
            state.last_error = Some(e);
            store.push(up_labels, t_ms, 0.0);
            BTreeSet::new()
        }
        Ok(exp) => {
            store.push(up_labels, t_ms, 1.0);
            let mut seen = BTreeSet::new();
            for s in exp.samples {
                let mut labels = Labels::new();
                for (k, v) in s.labels {
                    let k = match k.as_str() {
                        "instance" | "job" => format!("exported_{k}"),
                        _ => k,
                    };
                    if !v.is_empty() {
                        labels.insert(k, v);
                    }
                }
                labels.insert("__name__".into(), s.name);
                labels.insert("instance".into(), target.instance.clone());
                labels.insert("job".into(), "vllm".into());
                if !seen.insert(labels.clone()) {
                    continue; // a duplicate line: Prometheus keeps the first
                }
                store.push(labels, s.timestamp_ms.unwrap_or(t_ms), s.value);
            }
            seen
        }
    };
    for gone in state.last.difference(&now) {
        store.push(gone.clone(), t_ms, stale_nan());
    }
    state.last = now;
}

async fn fetch(client: &reqwest::Client, auth: &ScrapeAuth, target: &Target, timeout: Duration) -> Fetched {
    let mut req = client
        .get(target.url.clone())
        .timeout(timeout)
        .header("Accept", "text/plain;version=0.0.4;q=1,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1");
    if let Some((user, pass)) = &target.user {
        req = req.basic_auth(user, pass.as_deref());
    } else if let Some((user, pass)) = &auth.basic_auth {
        req = req.basic_auth(user, Some(pass.expose()));
    } else if let Some(token) = &auth.bearer_token {
        req = req.bearer_auth(token.expose());
    }
    let resp = req.send().await.map_err(|e| {
        if e.is_timeout() {
            format!("no answer within {}s", timeout.as_secs_f64())
        } else {
            // reqwest's message may hold the URL; ours never holds credentials.
            format!("cannot connect ({})", crate::prom::redact_text(&first_cause(&e)))
        }
    })?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("HTTP {}", status.as_u16()));
    }
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    // Read with a cap on the decompressed size: a page that never ends, or a small gzip body that
    // inflates to gigabytes, is a failed scrape, not the end of the machine's memory.
    let body = super::read_capped(resp, MAX_PAGE_BYTES).await.map_err(|e| match e {
        super::BodyError::TooBig => format!("the page is larger than {} MiB, far more than a vLLM server's /metrics: check the URL", MAX_PAGE_BYTES >> 20),
        super::BodyError::Broken(e) => format!("the answer broke off ({})", crate::prom::redact_text(&first_cause(&e))),
    })?;
    Ok((body, ct))
}

/// The most one scrape of one target reads, decompressed. A vLLM server's /metrics page is tens of
/// kilobytes (the real engine's, fixtures/real-engine/last-scrape.txt, is 54 KB); 32 MiB leaves room
/// for many models and adapters on one server.
const MAX_PAGE_BYTES: usize = 32 << 20;

fn first_cause(e: &dyn std::error::Error) -> String {
    let mut cur: &dyn std::error::Error = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// The outcome of a scrape run.
pub struct Scraped {
    pub store: Store,
    /// Scheduled time of the first and the last round.
    pub first: DateTime<Utc>,
    pub last: DateTime<Utc>,
    pub states: Vec<TargetState>,
}

/// Scrape every target once per interval across the window. `progress(done, total)` is called after
/// each round.
pub async fn run(plan: &Plan, mut progress: impl FnMut(usize, usize)) -> Scraped {
    // `prepare` built it once already, so the settings are known to work.
    let client = client(&plan.auth).unwrap_or_default();
    let timeout = plan.interval.clamp(Duration::from_secs(1), Duration::from_secs(10));
    let rounds = plan.rounds();
    let start_instant = tokio::time::Instant::now();
    let first_ms = Utc::now().timestamp_millis();
    let first = DateTime::from_timestamp_millis(first_ms).unwrap_or_default();
    let step_ms = plan.interval.as_millis() as i64;
    let mut store = Store::new();
    let mut states: Vec<TargetState> = plan.targets.iter().map(|_| TargetState::default()).collect();
    for k in 0..rounds {
        tokio::time::sleep_until(start_instant + plan.interval * k as u32).await;
        let t_ms = first_ms + step_ms * k as i64;
        let answers = futures::future::join_all(plan.targets.iter().map(|t| fetch(&client, &plan.auth, t, timeout))).await;
        for ((target, state), fetched) in plan.targets.iter().zip(states.iter_mut()).zip(answers) {
            ingest(&mut store, state, target, t_ms, fetched);
        }
        progress(k + 1, rounds);
    }
    let last = DateTime::from_timestamp_millis(first_ms + step_ms * (rounds as i64 - 1)).unwrap_or(first);
    Scraped { store, first, last, states }
}

/// Load a baseline samples file (OpenMetrics or text format, every sample with a timestamp).
pub fn load_samples(path: &Path) -> Result<Store, ScrapeError> {
    let bad = |problem: String| ScrapeError::Baseline { path: path.to_path_buf(), problem };
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
    let exp = exposition::parse(&text, Format::Detect).map_err(|e| bad(format!("{e}")))?;
    let mut store = Store::new();
    for s in exp.samples {
        let Some(t) = s.timestamp_ms else {
            return Err(bad(format!("{} has no timestamp; a baseline needs timestamped samples (write one with --save-samples)", s.name)));
        };
        let mut labels = s.labels;
        labels.insert("__name__".into(), s.name);
        store.push(labels, t, s.value);
    }
    if store.is_empty() {
        return Err(bad("it holds no samples".into()));
    }
    // Checked before the scrape starts, not after its window: a file far outside the years a
    // diagnosis can be about (a timestamp in the wrong unit, say) is refused at once.
    let (first, last) = store.time_span().unwrap_or((0, 0));
    let span = DateTime::from_timestamp_millis(first).zip(DateTime::from_timestamp_millis(last));
    if !span.is_some_and(|(start, end)| TimeRange { start, end }.is_supported()) {
        return Err(bad(format!(
            "its timestamps run from {first} to {last} ms since 1970, outside the times a diagnosis can be about ({}): check the timestamps in the file (--save-samples writes them)",
            TimeRange::supported_text()
        )));
    }
    Ok(store)
}

/// Write every sample (staleness markers aside, which the format cannot carry) as OpenMetrics with
/// timestamps: readable by `--baseline-from` and by `promtool tsdb create-blocks-from openmetrics`.
pub fn save_samples(store: &Store, path: &Path) -> Result<(), ScrapeError> {
    let bad = |problem: String| ScrapeError::Save { path: path.to_path_buf(), problem };
    let file = std::fs::File::create(path).map_err(|e| bad(format!("cannot create it: {e}")))?;
    let mut w = openmetrics::Writer::new(file);
    let write = |w: &mut openmetrics::Writer<std::fs::File>| -> std::io::Result<()> {
        for (labels, points) in store.series() {
            let name = labels.get("__name__").map(String::as_str).unwrap_or_default();
            let rest = labels.iter().filter(|(k, _)| k.as_str() != "__name__").map(|(k, v)| (k.as_str(), v.as_str()));
            let series = openmetrics::series(name, rest);
            for (t, v) in points {
                if !is_stale(*v) {
                    w.sample(&series, *v, *t)?;
                }
            }
        }
        Ok(())
    };
    write(&mut w).and_then(|()| w.finish()).map_err(|e| bad(format!("cannot write it: {e}")))
}

/// Everything `explain --scrape` needs before the diagnosis: flags checked, endpoints scraped,
/// baseline loaded, windows placed.
pub struct Prepared {
    pub source: Arc<LocalSource>,
    pub params: RunParams,
    pub selector: Selector,
    /// Problems to tell the user (targets that failed some rounds).
    pub notes: Vec<String>,
    /// Targets that answered none of the rounds, with why: nothing they serve is in the diagnosis.
    pub unread: Vec<String>,
}

/// Options from the command line.
pub struct ScrapeArgs<'a> {
    pub urls: &'a [String],
    pub window: Duration,
    pub interval: Duration,
    pub baseline_from: Option<&'a Path>,
    pub save_samples: Option<&'a Path>,
    pub selector: Selector,
    pub group_by: Vec<String>,
    pub replica_label: String,
    pub auth: ScrapeAuth,
    /// Show progress on stderr.
    pub progress: bool,
}

pub fn prepare(a: ScrapeArgs<'_>) -> Result<Prepared, ScrapeError> {
    let targets = a.urls.iter().map(|u| Target::parse(u)).collect::<Result<Vec<_>, _>>()?;
    let mut seen = BTreeSet::new();
    for t in &targets {
        if !seen.insert(t.instance.clone()) {
            return Err(ScrapeError::Usage(format!("--scrape lists {} twice", t.instance)));
        }
    }
    if a.interval < Duration::from_millis(100) {
        return Err(ScrapeError::Usage("--interval must be at least 100ms".into()));
    }
    if a.window < a.interval * 2 {
        return Err(ScrapeError::Usage(format!(
            "--window {}s is shorter than two --interval {}s: rates need at least three scrapes; lengthen the window or shorten the interval",
            a.window.as_secs_f64(),
            a.interval.as_secs_f64()
        )));
    }
    if a.window.subsec_millis() != 0 {
        return Err(ScrapeError::Usage("--window must be a whole number of seconds with --scrape".into()));
    }
    // Read the baseline first: a broken file should fail before minutes of scraping.
    let baseline = a.baseline_from.map(load_samples).transpose()?;
    if a.auth.basic_auth.is_some() || a.auth.bearer_token.is_some() {
        if let Some(t) = targets.iter().find(|t| t.user.is_some()) {
            return Err(ScrapeError::Usage(format!("--scrape {}: credentials in the URL and from --basic-auth-user or a bearer token; give one", t.shown())));
        }
    }
    client(&a.auth).map_err(ScrapeError::Usage)?;
    let plan = Plan { targets, window: a.window, interval: a.interval, auth: a.auth };
    let rounds = plan.rounds();
    let shown: Vec<String> = plan.targets.iter().map(Target::shown).collect();
    if a.progress {
        eprint!("vllm-diag: scraping {} every {}s for {}s: 0/{rounds}", shown.join(", "), a.interval.as_secs_f64(), a.window.as_secs());
    }
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| ScrapeError::Usage(format!("cannot start the async runtime: {e}")))?;
    let show = a.progress;
    let scraped = runtime.block_on(run(&plan, |done, total| {
        if show {
            eprint!("\rvllm-diag: scraping {}: {done}/{total}   ", shown.join(", "));
        }
    }));
    if a.progress {
        eprintln!();
    }
    let mut notes = Vec::new();
    for (t, st) in plan.targets.iter().zip(&scraped.states) {
        if st.failures > 0 {
            notes.push(format!("{}: {} of {rounds} scrapes failed ({})", t.shown(), st.failures, st.last_error.clone().unwrap_or_default()));
        }
    }
    if scraped.states.iter().all(|s| s.failures == rounds) {
        return Err(ScrapeError::NothingScraped(notes.join("; ")));
    }
    let unread: Vec<String> = plan
        .targets
        .iter()
        .zip(&scraped.states)
        .filter(|(_, st)| st.failures == rounds)
        .map(|(t, st)| format!("{} (none of {rounds} scrapes answered: {})", t.shown(), st.last_error.clone().unwrap_or_default()))
        .collect();
    if let Some(path) = a.save_samples {
        save_samples(&scraped.store, path)?;
    }

    let window = TimeRange { start: scraped.first, end: scraped.last };
    let length = scraped.last - scraped.first;
    // Ranges are closed: a baseline ending at the first round would hold that round's samples.
    let before_first = scraped.first - chrono::Duration::milliseconds(1);
    let mut store = scraped.store;
    let baseline = match baseline {
        Some(b) => {
            let (_, last_ms) = b.time_span().unwrap_or((0, 0));
            let end = DateTime::from_timestamp_millis(last_ms).unwrap_or(before_first).min(before_first);
            let range = end.checked_sub_signed(length).map(|start| TimeRange { start, end }).filter(TimeRange::is_supported);
            let Some(range) = range else {
                return Err(ScrapeError::Baseline {
                    path: a.baseline_from.map(Path::to_path_buf).unwrap_or_default(),
                    problem: format!(
                        "its samples end at {end}, so a baseline as long as the window would lie outside the times a diagnosis can be about ({}): check the timestamps in the file (--save-samples writes them)",
                        TimeRange::supported_text()
                    ),
                });
            };
            store.extend(b);
            range
        }
        None => TimeRange { start: before_first - length, end: before_first },
    };
    let params = RunParams { window, baseline, selector: a.selector.to_promql(), group_by: a.group_by, replica_label: a.replica_label };
    let source = Arc::new(LocalSource::new(Arc::new(store), crate::report::SourceKind::Scrape, &shown.join(", ")));
    Ok(Prepared { source, params, selector: a.selector, notes, unread })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::local::answer;
    use crate::source::Request;

    fn target() -> Target {
        Target::parse("127.0.0.1:8000").unwrap()
    }

    fn ok(body: &str) -> Fetched {
        Ok((body.to_string(), "text/plain; version=0.0.4".to_string()))
    }

    fn query(store: &Store, q: &str, t_ms: i64) -> serde_json::Value {
        let ex = answer(store, &Request::Instant { query: q.into(), time: DateTime::from_timestamp_millis(t_ms).unwrap() });
        serde_json::from_str::<serde_json::Value>(&ex.body).unwrap()["data"]["result"].clone()
    }

    #[test]
    fn targets_default_to_http_and_metrics_and_hide_credentials() {
        let t = Target::parse("10.0.0.5:8000").unwrap();
        assert_eq!(t.shown(), "http://10.0.0.5:8000/metrics");
        assert_eq!(t.instance, "10.0.0.5:8000");
        let t = Target::parse("https://user:s3cret@vllm.example/prefix/metrics").unwrap();
        assert_eq!(t.instance, "vllm.example:443");
        assert!(!t.shown().contains("s3cret") && !t.shown().contains("user"), "{}", t.shown());
        let e = Target::parse("ftp://user:s3cret@x/").unwrap_err().to_string();
        assert!(e.contains("http or https") && !e.contains("s3cret"), "{e}");
        // Without a scheme, `user:pass@host` still never shows.
        let e = Target::parse("user:s3cret@host:notaport").unwrap_err().to_string();
        assert!(!e.contains("s3cret"), "{e}");
        let t = Target::parse("http://vllm:8000/metrics?token=s3cret&x=1").unwrap();
        assert_eq!(t.shown(), "http://vllm:8000/metrics?token=***&x=1");
        assert_eq!(t.url.query(), Some("token=s3cret&x=1"), "the request still carries it");
    }

    #[test]
    fn a_scrape_adds_instance_job_and_up_and_renames_clashing_labels() {
        let mut store = Store::new();
        let mut st = TargetState::default();
        ingest(&mut store, &mut st, &target(), 1000, ok("x{job=\"other\",a=\"1\"} 5\n"));
        let v = query(&store, "x", 1000);
        assert_eq!(v[0]["metric"], serde_json::json!({"__name__":"x","a":"1","exported_job":"other","instance":"127.0.0.1:8000","job":"vllm"}));
        assert_eq!(query(&store, "up", 1000)[0]["value"][1], "1");
    }

    #[test]
    fn a_failed_scrape_sets_up_to_zero_and_marks_every_series_stale_at_once() {
        let mut store = Store::new();
        let mut st = TargetState::default();
        ingest(&mut store, &mut st, &target(), 1000, ok("x 5\n"));
        ingest(&mut store, &mut st, &target(), 2000, Err("cannot connect".into()));
        assert_eq!(query(&store, "up", 2000)[0]["value"][1], "0");
        // without the marker, lookback would keep x for five minutes
        assert_eq!(query(&store, "x", 2500), serde_json::json!([]));
        assert_eq!(st.failures, 1);
    }

    #[test]
    fn a_series_that_disappears_goes_stale_and_a_bad_body_counts_as_a_failure() {
        let mut store = Store::new();
        let mut st = TargetState::default();
        ingest(&mut store, &mut st, &target(), 1000, ok("x 1\ny 1\n"));
        ingest(&mut store, &mut st, &target(), 2000, ok("x 2\n"));
        assert_eq!(query(&store, "y", 2000), serde_json::json!([]));
        assert_eq!(query(&store, "x", 2000)[0]["value"][1], "2");
        ingest(&mut store, &mut st, &target(), 3000, ok("x{ 1\n"));
        assert!(st.last_error.as_deref().unwrap_or_default().contains("line 1"), "{:?}", st.last_error);
    }

    #[test]
    fn saved_samples_load_back_as_the_same_series() {
        let mut store = Store::new();
        let mut st = TargetState::default();
        ingest(&mut store, &mut st, &target(), 1_700_000_000_123, ok("x{q=\"a\\\"b\"} 1.5\n"));
        ingest(&mut store, &mut st, &target(), 1_700_000_001_123, ok("x{q=\"a\\\"b\"} 2.5\n"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.om");
        save_samples(&store, &path).unwrap();
        let back = load_samples(&path).unwrap();
        let a: Vec<_> = store.series().map(|(l, p)| (l.clone(), p.iter().copied().filter(|(_, v)| !is_stale(*v)).collect::<Vec<_>>())).collect();
        let b: Vec<_> = back.series().map(|(l, p)| (l.clone(), p.clone())).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn a_baseline_file_without_timestamps_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.prom");
        std::fs::write(&path, "x 1\n").unwrap();
        let e = load_samples(&path).unwrap_err().to_string();
        assert!(e.contains("no timestamp") && e.contains("--save-samples"), "{e}");
    }
}
