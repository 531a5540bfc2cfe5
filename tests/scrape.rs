//! Direct scrape against real HTTP endpoints on loopback: each endpoint (a tokio TcpListener)
//! serves a sequence of expositions, one per request, built from the real vLLM captures in
//! fixtures/real-metrics and from the scenario generator. Short windows (3 s at 0.5 s) keep it quick;
//! nothing here asserts on timing.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use vllm_diag::prom::exposition::{parse, Format};
use vllm_diag::source::scrape::{run, Plan, Target};
use vllm_diag::source::Request;

/// A loopback /metrics endpoint: the n-th request gets the n-th body (the last one repeats).
struct Endpoint {
    addr: SocketAddr,
    served: Arc<AtomicUsize>,
}

fn serve(bodies: Vec<String>) -> Endpoint {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let addr = std_listener.local_addr().expect("local address");
    std_listener.set_nonblocking(true).expect("non-blocking listener");
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(std_listener).expect("tokio listener");
            loop {
                let Ok((mut sock, _)) = listener.accept().await else { return };
                let n = count.fetch_add(1, Ordering::SeqCst);
                let body = bodies[n.min(bodies.len() - 1)].clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut got = Vec::new();
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => got.extend_from_slice(&buf[..k]),
                        }
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(body.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
    });
    Endpoint { addr, served }
}

fn real(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-metrics").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The capture with every counter-like sample replaced by `value(original)`, keeping every other
/// line (HELP, TYPE, gauges, escaping) exactly as the server wrote it.
fn with_counters(capture: &str, value: impl Fn(f64) -> f64) -> String {
    capture
        .lines()
        .map(|line| {
            let counter = ["_total", "_bucket", "_count", "_sum"].iter().any(|s| line.split(['{', ' ']).next().is_some_and(|n| n.ends_with(s)));
            if line.starts_with('#') || !counter {
                return line.to_string();
            }
            let (head, v) = line.trim_end().rsplit_once(' ').expect("a sample line");
            let v: f64 = v.parse().expect("a number");
            format!("{head} {}", value(v))
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn scraping_real_captures_stores_what_a_scraper_would_and_rates_survive_a_restart() {
    let capture = real("v1_recent_qwen3-30b-a3b_spec-decode_vllmstat-fixture.prom");
    // rounds 0-3 grow by 10, then the server restarts: counters start again from 10
    let bodies: Vec<String> =
        (0..7).map(|k| if k <= 3 { with_counters(&capture, |v| v + 10.0 * k as f64) } else { with_counters(&capture, |_| 10.0 * (k - 3) as f64) }).collect();
    let live = serve(bodies);
    // a second target nobody listens on
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let plan = Plan {
        targets: vec![Target::parse(&format!("127.0.0.1:{}", live.addr.port())).unwrap(), Target::parse(&format!("http://{dead}/metrics")).unwrap()],
        window: Duration::from_secs(3),
        interval: Duration::from_millis(500),
        auth: Default::default(),
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let scraped = rt.block_on(run(&plan, |_, _| {}));
    assert_eq!(live.served.load(Ordering::SeqCst), 7);
    assert_eq!(scraped.states[0].failures, 0);
    assert_eq!(scraped.states[1].failures, 7);

    let store = scraped.store;
    let at = scraped.last;
    let q = |query: &str| -> Vec<(BTreeMap<String, String>, f64)> {
        let ex = vllm_diag::source::local::answer(&store, &Request::Instant { query: query.into(), time: at });
        let body: Value = serde_json::from_str(&ex.body).unwrap();
        assert_eq!(body["status"], "success", "{query}: {body}");
        body["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let labels = s["metric"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
                (labels, vllm_diag::prom::parse_sample_value(s["value"][1].as_str().unwrap()).unwrap())
            })
            .collect()
    };
    // up: 1 for the live target, 0 for the dead one, with the instance a scraper would give
    let up: BTreeMap<String, f64> = q("up").into_iter().map(|(l, v)| (l["instance"].clone(), v)).collect();
    assert_eq!(up.get(&format!("127.0.0.1:{}", live.addr.port())), Some(&1.0));
    assert_eq!(up.get(&dead.to_string()), Some(&0.0));
    // every sample of the capture is a series, labelled job="vllm" and with the instance
    let n_samples = parse(&capture, Format::Detect).unwrap().samples.len();
    let series = q(r#"{job="vllm", __name__!="up"}"#);
    assert_eq!(series.len(), n_samples);
    // 30 before the restart, 30 after: increase() counts both, resets() sees the one restart
    for (labels, v) in q("increase(vllm:generation_tokens_total[3s])") {
        assert!((v - 60.0).abs() < 1e-9, "{labels:?}: {v}");
    }
    for (labels, v) in q("resets(vllm:prompt_tokens_total[3s])") {
        assert_eq!(v, 1.0, "{labels:?}");
    }
    // gauges as served
    assert!(!q("vllm:kv_cache_usage_perc").is_empty());
}

/// One endpoint per replica of a scenario, serving the samples at `indexes` one per request.
fn scenario_endpoints(name: &str, indexes: std::ops::Range<usize>) -> (vllm_diag_sim::ScenarioSpec, Vec<Endpoint>) {
    let spec = load_spec(name);
    let start = spec.start.timestamp_millis() as f64 / 1000.0;
    let step = spec.interval.as_secs_f64();
    let mut replicas: BTreeMap<String, Vec<vllm_diag_sim::GeneratedSeries>> = BTreeMap::new();
    for s in vllm_diag_sim::generate_series(&spec) {
        replicas.entry(s.labels.get("instance").cloned().unwrap_or_default()).or_default().push(s);
    }
    let endpoints = replicas
        .values()
        .map(|series| {
            let bodies = indexes
                .clone()
                .map(|i| {
                    let t = start + step * i as f64;
                    let mut body = String::new();
                    for s in series {
                        let Some((_, v)) = s.points.iter().find(|(pt, _)| (pt - t).abs() < 1e-6) else { continue };
                        let labels: Vec<String> = s
                            .labels
                            .iter()
                            .filter(|(k, _)| k.as_str() != "instance" && k.as_str() != "job")
                            .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
                            .collect();
                        body.push_str(&format!("{}{{{}}} {v}\n", s.name, labels.join(",")));
                    }
                    body
                })
                .collect();
            serve(bodies)
        })
        .collect();
    (spec, endpoints)
}

/// The diagnosis of what was scraped is evaluated in the (debug) binary itself: on a busy machine one
/// run with a baseline file took 52 s of wall time, against a default deadline of 30 s for all
/// queries (20 s for one), past which signals are reported "timed out" instead of evaluated. How fast
/// it is is not what these tests check, so the deadline is out of the way.
const UNHURRIED: [&str; 4] = ["--timeout", "10m", "--query-timeout", "10m"];

fn explain_scrape(endpoints: &[Endpoint], extra: &[&str]) -> (i32, Value, String) {
    let mut cmd = Command::cargo_bin("vllm-diag").unwrap();
    cmd.args(["explain", "--window", "3s", "--interval", "500ms", "--format", "json"]).args(UNHURRIED).env_remove("VLLM_DIAG_PROMETHEUS_URL");
    for e in endpoints {
        cmd.args(["--scrape", &format!("127.0.0.1:{}", e.addr.port())]);
    }
    let out = cmd.args(extra).output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, String::from_utf8_lossy(&out.stderr).to_string())
}

fn findings(r: &Value) -> Vec<(String, String)> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["rule"].as_str().unwrap().to_string(), f["scope"]["model_name"].as_str().unwrap_or("").to_string()))
        .collect()
}

fn load_spec(name: &str) -> vllm_diag_sim::ScenarioSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios").join(format!("{name}.toml"));
    vllm_diag_sim::ScenarioSpec::load(&path).unwrap()
}

fn last_indexes(spec: &vllm_diag_sim::ScenarioSpec, n: usize) -> std::ops::Range<usize> {
    let count = spec.sample_count();
    count - n..count
}

#[test]
fn scraping_a_slow_decode_fleet_with_no_history_decides_on_absolute_thresholds() {
    let spec = load_spec("slow-decode");
    let (_, endpoints) = scenario_endpoints("slow-decode", last_indexes(&spec, 7));
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("scrape.json");
    let (code, report, stderr) = explain_scrape(&endpoints, &["--record", rec.to_str().unwrap()]);
    assert!(report.is_object(), "exit {code}: {stderr}");
    assert_eq!(report["source"]["kind"], "scrape");
    let model = spec.expect.model.clone().unwrap();
    assert!(findings(&report).contains(&("slow-decode".to_string(), model.clone())), "{:?}\n{stderr}", findings(&report));
    // no history: the comparisons with a baseline are unknown, and the report says why
    assert!(report["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("baseline")), "{report:#}");
    let f = report["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "slow-decode").unwrap();
    let itl = f["evidence"].as_array().unwrap().iter().find(|e| e["signal"] == "itl_p95").unwrap();
    assert!(itl["value"].as_f64().unwrap() > 0.1 && itl["baseline"].is_null(), "{itl}");
    // The first scrape is where the data begins, not a model or replica coming up: no such event,
    // and no finding blamed on one.
    let arrivals: Vec<&Value> = report["events"].as_array().unwrap().iter().filter(|e| e["kind"] == "model-added" || e["kind"] == "replica-added").collect();
    assert!(arrivals.is_empty(), "{arrivals:#?}");
    assert!(f["preceded_by"].is_null(), "{:#}", f["preceded_by"]);

    // --replay of a scrape recording gives the same report, offline
    let out = Command::cargo_bin("vllm-diag").unwrap().args(["explain", "--replay", rec.to_str().unwrap(), "--format", "json"]).output().unwrap();
    let replayed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(findings(&replayed), findings(&report), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(replayed["healthy"], report["healthy"]);
    assert_eq!(replayed["not_evaluated"], report["not_evaluated"]);
}

#[test]
fn a_baseline_saved_by_an_earlier_scrape_is_compared_against() {
    let spec = load_spec("slow-decode");
    let per_step = spec.interval.as_millis() as usize;
    let baseline_end = (spec.baseline_end() - spec.start).num_milliseconds() as usize / per_step;
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join("baseline.om");

    // 1. scrape the healthy baseline and keep its samples
    let (_, endpoints) = scenario_endpoints("slow-decode", baseline_end - 6..baseline_end + 1);
    let (code, _, stderr) = explain_scrape(&endpoints, &["--save-samples", samples.to_str().unwrap()]);
    // Without a baseline the core checks that compare against one cannot be made: no pass.
    assert_eq!(code, 3, "exit {code}: {stderr}");
    assert!(stderr.contains("core checks"), "{stderr}");
    let saved = std::fs::read_to_string(&samples).unwrap();
    assert!(saved.ends_with("# EOF\n") && saved.contains("vllm:inter_token_latency_seconds_bucket{"), "{}", &saved[..200.min(saved.len())]);

    // 2. scrape the incident with that baseline
    let (_, endpoints) = scenario_endpoints("slow-decode", last_indexes(&spec, 7));
    let (code, report, stderr) = explain_scrape(&endpoints, &["--baseline-from", samples.to_str().unwrap()]);
    assert!(report.is_object(), "exit {code}: {stderr}");
    let model = spec.expect.model.clone().unwrap();
    assert_eq!(findings(&report).first(), Some(&("slow-decode".to_string(), model)), "{report:#}");
    let f = &report["findings"][0];
    let itl = f["evidence"].as_array().unwrap().iter().find(|e| e["signal"] == "itl_p95").unwrap();
    let (v, b) = (itl["value"].as_f64().unwrap(), itl["baseline"].as_f64().unwrap());
    assert!(v >= 1.5 * b && b > 0.0, "ITL {v} against baseline {b}");
    assert!(!report["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains("holds no vLLM data")), "{report:#}");
}

#[test]
fn a_baseline_file_with_samples_outside_1970_to_9999_is_refused_naming_it() {
    let spec = load_spec("slow-decode");
    let (_, endpoints) = scenario_endpoints("slow-decode", last_indexes(&spec, 7));
    let dir = tempfile::tempdir().unwrap();
    // The earliest time a timestamp can name (this used to overflow the baseline's arithmetic and
    // panic), one minute before 1970, and one that ends a second after 1970: its baseline, as long
    // as the 3 s window, would start before it.
    for (name, ts) in [("earliest.prom", "-8334601228800000"), ("1969.prom", "-60000"), ("1970.prom", "1000")] {
        let path = dir.path().join(name);
        std::fs::write(&path, format!("vllm:num_requests_running{{model_name=\"m\",instance=\"a:1\"}} 1 {ts}\n")).unwrap();
        let (code, report, stderr) = explain_scrape(&endpoints, &["--baseline-from", path.to_str().unwrap()]);
        assert_eq!(code, 2, "{name}: {stderr}");
        // No report: stdout holds the error document of --format json, and nothing panicked.
        assert!(report["error"]["exit_code"] == 2 && report.get("findings").is_none() && !stderr.contains("panicked"), "{name}: {report} {stderr}");
        assert!(stderr.contains(name) && stderr.contains("outside the times a diagnosis can be about"), "{name}: {stderr}");
    }
}

#[test]
fn scrape_flags_are_checked_before_anything_is_scraped() {
    for (args, want) in [
        (vec!["--scrape", "127.0.0.1:1", "--window", "1s", "--interval", "1s"], "two --interval"),
        (vec!["--scrape", "127.0.0.1:1", "--at", "now"], "drop --at"),
        (vec!["--scrape", "ftp://user:hunter2@x/"], "http or https"),
        (vec!["--scrape", "127.0.0.1:1", "--baseline-from", "/nonexistent/b.om", "--window", "2s", "--interval", "1s"], "/nonexistent/b.om"),
        (vec!["--interval", "5s"], "--scrape"),
    ] {
        let out = Command::cargo_bin("vllm-diag").unwrap().arg("explain").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
        assert!(!stderr.contains("hunter2"), "{stderr}");
    }
}

#[test]
fn when_no_target_answers_the_run_exits_3_and_names_the_targets() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let out =
        Command::cargo_bin("vllm-diag").unwrap().args(["explain", "--scrape", &dead.to_string(), "--window", "1s", "--interval", "500ms"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("no target could be scraped") && stderr.contains(&dead.to_string()), "{stderr}");
}

/// The first scrape is where the data begins, not a model coming up. A real capture scraped for 10 s
/// every 2 s used to list "model first seen" after the window's start and blame the finding on it
/// ("right after the model's first replicas came up"), with its first step "start with what changed".
#[test]
fn the_first_scrape_is_not_a_model_coming_up() {
    let e = serve(vec![real("v1_recent_qwen3-30b-a3b_spec-decode_vllmstat-fixture.prom")]);
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--window", "10s", "--interval", "2s", "--format", "json", "--scrape", &format!("127.0.0.1:{}", e.addr.port())])
        .args(UNHURRIED)
        .env_remove("VLLM_DIAG_PROMETHEUS_URL")
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let arrivals: Vec<&Value> =
        report["events"].as_array().into_iter().flatten().filter(|e| e["kind"] == "model-added" || e["kind"] == "replica-added").collect();
    assert!(arrivals.is_empty() && report["findings"].is_array(), "{arrivals:#?}\n{}", String::from_utf8_lossy(&out.stderr));
    for f in report["findings"].as_array().into_iter().flatten() {
        assert!(f["preceded_by"].is_null(), "{:#}", f["preceded_by"]);
    }
}

/// One target of several answers nothing: the report of the others stands, but the run cannot pass
/// (exit 3), and the report itself (not only stderr) names the target. It used to list target-down
/// as healthy and exit 0 with `--fail-on warning`: a dead replica has no series to tie it to a model.
#[test]
fn a_scrape_target_that_answers_nothing_makes_the_run_no_pass_and_is_named_in_the_report() {
    let spec = load_spec("healthy-steady");
    let (_, endpoints) = scenario_endpoints("healthy-steady", last_indexes(&spec, 7));
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("scrape.json");
    let (code, report, stderr) = explain_scrape(&endpoints, &["--scrape", &dead.to_string(), "--fail-on", "warning", "--record", rec.to_str().unwrap()]);
    assert_eq!(code, 3, "{report:#}\n{stderr}");
    // A replay of the recording says the same: the gap is kept with the exchanges.
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--replay", rec.to_str().unwrap(), "--format", "json", "--fail-on", "warning"])
        .output()
        .unwrap();
    let replayed: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(replayed["coverage"], report["coverage"]);
    assert_eq!(replayed["warnings"], report["warnings"]);
    let unread = report["coverage"]["unread_targets"].as_array().cloned().unwrap_or_default();
    assert_eq!(unread.len(), 1, "{report:#}");
    assert!(unread[0].as_str().unwrap_or_default().contains(&dead.to_string()), "{unread:?}");
    assert!(report["warnings"].as_array().unwrap().iter().any(|w| w.as_str().unwrap_or_default().contains(&dead.to_string())), "{report:#}");
    // The table says it is not an all-clear (fresh endpoints: each serves its samples once).
    let (_, endpoints) = scenario_endpoints("healthy-steady", last_indexes(&spec, 7));
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--window", "3s", "--interval", "500ms", "--scrape", &dead.to_string()])
        .args(UNHURRIED)
        .args(endpoints.iter().flat_map(|e| ["--scrape".to_string(), format!("127.0.0.1:{}", e.addr.port())]))
        .env_remove("VLLM_DIAG_PROMETHEUS_URL")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    // The default text leads with it in capitals (NOT AN ALL-CLEAR), the full table in words.
    let headline = table.lines().next().unwrap_or_default().to_lowercase();
    assert!(headline.contains("not an all-clear") && headline.contains("a scrape target answered nothing"), "{table}");
}

/// Endpoints behind TLS and basic auth (an ingress or kube-rbac-proxy in front of vLLM) are reached
/// with the same flags as a secured Prometheus, typed on the command line. The target here is a
/// Prometheus serving its own /metrics behind TLS and basic auth: it holds no vLLM metrics, so
/// getting as far as "no vLLM metrics" proves the scrapes went through.
#[test]
fn targets_behind_tls_and_basic_auth_are_scraped_with_the_flags_typed_and_only_those() {
    const USER: &str = "scraper";
    const PASSWORD: &str = "pw-scrape-7f3c1e";
    let (pki, _spec, prom) = common::secure::start_scenario_tls_basic_auth("healthy-steady", USER, PASSWORD);
    let dir = tempfile::tempdir().unwrap();
    let pw = common::run::write_file(dir.path(), "pw", PASSWORD);
    let target = format!("{}/metrics", prom.url);
    let ca = common::run::path_arg(&pki.ca);
    let scrape = |extra: &[&str], env: &[(&str, &str)]| {
        let mut args = vec!["--no-config", "explain", "--scrape", target.as_str(), "--window", "1s", "--interval", "250ms", "--format", "json"];
        args.extend_from_slice(extra);
        let r = common::run::run(&args, env);
        assert!(!r.stdout.contains(PASSWORD) && !r.stderr.contains(PASSWORD), "the password was printed:\n{}\n{}", r.stdout, r.stderr);
        r
    };

    // No CA: the certificate is refused, and the run says so (exit 3, nothing scraped).
    let r = scrape(&[], &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.to_lowercase().contains("certificate"), "{}", r.stderr);

    // The CA but no credentials: HTTP 401.
    let r = scrape(&["--ca-file", ca], &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("HTTP 401"), "{}", r.stderr);

    // Both: the scrapes succeed and the diagnosis finds no vLLM metrics in what was scraped.
    let r = scrape(&["--ca-file", ca, "--basic-auth-user", USER, "--basic-auth-password-file", common::run::path_arg(&pw)], &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("no vLLM metrics"), "{}", r.stderr);
    assert!(!r.stderr.contains("HTTP 401") && !r.stderr.to_lowercase().contains("certificate"), "{}", r.stderr);

    // The password from the environment, for a user typed here, works as well.
    let r = scrape(&["--ca-file", ca, "--basic-auth-user", USER], &[("VLLM_DIAG_BASIC_AUTH_PASSWORD", PASSWORD)]);
    assert!(r.stderr.contains("no vLLM metrics"), "{}", r.stderr);

    // Credentials in a configuration file are the metrics backend's: they are not sent to the
    // scraped endpoints (other hosts), so the same target answers 401.
    let config = common::run::write_file(dir.path(), "vllm-diag.toml", &format!("[source]\nbasic_auth_user = \"{USER}\"\nbasic_auth_password_file = \"pw\"\n"));
    let r = common::run::run(
        &["--config", common::run::path_arg(&config), "explain", "--scrape", &target, "--window", "1s", "--interval", "250ms", "--ca-file", ca],
        &[],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("HTTP 401"), "the file's credentials went to the scrape target: {}", r.stderr);
}

/// A header from the configuration file (the metrics backend's API key) is not sent to scrape
/// targets, even when other headers are typed for them; the typed ones are.
#[test]
fn the_config_files_headers_stay_with_the_backend_when_headers_are_typed_for_a_scrape() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
                head.push(byte[0]);
            }
            log.lock().unwrap().push(String::from_utf8_lossy(&head).to_lowercase());
            let body = "vllm:num_requests_running{model_name=\"m\"} 1\n";
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = common::run::write_file(dir.path(), "vllm-diag.toml", "[source.headers]\nX-Api-Key = \"${BACKEND_KEY}\"\n");
    let target = format!("127.0.0.1:{port}");
    let r = common::run::run(
        &["--config", common::run::path_arg(&config), "explain", "--scrape", &target, "--window", "1s", "--interval", "250ms", "--header", "X-Debug: 1"],
        &[("BACKEND_KEY", "backend-key-5d1e")],
    );
    let requests = seen.lock().unwrap().clone();
    assert!(!requests.is_empty(), "nothing was scraped: {}", r.stderr);
    assert!(requests.iter().all(|h| h.contains("x-debug: 1")), "the typed header was not sent: {requests:#?}");
    assert!(
        requests.iter().all(|h| !h.contains("x-api-key") && !h.contains("backend-key-5d1e")),
        "the backend's header went to the scrape target: {requests:#?}"
    );
}

/// A page that never ends, and a small gzip body that inflates past the cap, are failed scrapes
/// that say why, not a run that eats the machine's memory (a mock: no real exporter sends either).
/// The cap must be reached before the scrape's timeout, which is its interval (at most 10 s): with a
/// 500 ms interval, 1 s was too short to read 32 MiB into the debug build on a busy machine, and the
/// endless page ended "no answer within 1s". So 10 s, the most there is, and the two at once.
#[test]
fn a_page_that_never_ends_or_inflates_past_the_cap_is_a_failed_scrape() {
    use std::io::{Read, Write};
    // 40 MiB of one line repeated, gzip-compressed: about 40 KB on the wire.
    let bomb = {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let line = "vllm:num_requests_running{model_name=\"m\"} 1\n".repeat(1 << 10);
        for _ in 0..(40 << 20) / line.len() {
            gz.write_all(line.as_bytes()).unwrap();
        }
        gz.finish().unwrap()
    };
    let runs: Vec<_> = [("endless", false), ("gzip bomb", true)]
        .into_iter()
        .map(|(name, gzip)| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let bomb = bomb.clone();
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    let Ok(mut s) = stream else { return };
                    let bomb = bomb.clone();
                    std::thread::spawn(move || {
                        let mut head = Vec::new();
                        let mut byte = [0u8; 1];
                        while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).is_ok_and(|n| n == 1) {
                            head.push(byte[0]);
                        }
                        if gzip {
                            let _ = write!(
                                s,
                                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                bomb.len()
                            );
                            let _ = s.write_all(&bomb);
                        } else {
                            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n");
                            let line = "vllm:num_requests_running{model_name=\"m\"} 1\n".repeat(1 << 12);
                            while s.write_all(line.as_bytes()).is_ok() {}
                        }
                    });
                }
            });
            let target = format!("127.0.0.1:{port}");
            (name, std::thread::spawn(move || common::run::run(&["explain", "--scrape", &target, "--window", "20s", "--interval", "10s"], &[])))
        })
        .collect();
    for (name, run) in runs {
        let r = run.join().expect("the run's thread");
        assert_eq!(r.code, 3, "{name}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{name}: {}", r.stderr);
        assert!(r.stderr.contains("no target could be scraped") && r.stderr.contains("larger than 32 MiB"), "{name}: {}", r.stderr);
    }
}
