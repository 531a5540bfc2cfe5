//! `vllm-diag loadtest` against a real vLLM engine, replayed: fixtures/real-engine-loadtest/ holds
//! what scripts/lab/loadtest.sh recorded (a vLLM 0.32 CPU engine with the tiny model at
//! `--max-num-seqs 4`, scraped every 5 s): the sweep's JSON as vllm-diag wrote it, the profile it
//! derived, a hold below the knee and one above it, explain's reports over them, and every raw
//! sample Prometheus held. The samples are backfilled into a real Prometheus and what the lab
//! showed is held:
//!
//! - the sweep found the knee at the engine's sequence cap (or next to it) and named
//!   `max-num-seqs` as the limit that bound, with the cap read from the engine's running gauge;
//! - the recorded steps, judged again by the product's code, give the same breaches, knee, bound
//!   and derived profile; each step's engines, read again from the replayed samples, the same view;
//! - the derived profile is accepted by `explain --rules DIR --profile NAME`, and with it explain
//!   over the replayed samples is quiet (no latency finding) at a load below the knee and finds
//!   the latency past its limits at a load above it.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use vllm_diag::loadtest::{self, engine, LoadtestRun};
use vllm_diag::prom::Selector;
use vllm_diag::report::LimitKind;
use vllm_diag::source::prometheus::{ClientOptions, PrometheusClient};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-loadtest")
}

fn text(name: &str) -> String {
    let path = fixtures().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json(name: &str) -> Value {
    serde_json::from_str(&text(name)).unwrap_or_else(|e| panic!("{name}: not JSON: {e}"))
}

fn recorded(name: &str) -> LoadtestRun {
    serde_json::from_str(&text(name)).unwrap_or_else(|e| panic!("{name}: not a load test's JSON: {e}"))
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
        (None, None) => true,
        _ => false,
    }
}

/// The engine's sequence cap, from the flags the manifest records.
fn sequence_cap(manifest: &Value) -> f64 {
    let flags = manifest["engine"]["flags"].as_str().expect("the engine's flags in the manifest");
    let mut words = flags.split_whitespace();
    words.find(|w| *w == "--max-num-seqs").and_then(|_| words.next()).and_then(|n| n.parse().ok()).expect("--max-num-seqs in the engine's flags")
}

/// The arguments the lab gave a command of its manifest (`name`), and the value after `flag`.
fn arg(manifest: &Value, name: &str, flag: &str) -> String {
    let entry = manifest["steps"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name}: not in the manifest"));
    let args = entry["args"].as_str().unwrap();
    let mut words = args.split_whitespace();
    words.find(|w| *w == flag).and_then(|_| words.next()).unwrap_or_else(|| panic!("{name}: no {flag} in {args}")).to_string()
}

/// The ids of the latency rules (rules/latency.toml, and the latency objective's burn in
/// rules/slo.toml): what "a latency finding" means here.
fn latency_rules() -> Vec<String> {
    let mut ids = Vec::new();
    for file in ["rules/latency.toml", "rules/slo.toml"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let t: toml::Value = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        ids.extend(t["rule"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap().to_string()));
    }
    assert!(ids.iter().any(|id| id == "slo-burn") && ids.iter().any(|id| id == "load-exceeds-capacity"), "{ids:?}");
    ids
}

fn rules_of(report: &Value) -> Vec<String> {
    report["findings"].as_array().map(|f| f.iter().map(|f| f["rule"].as_str().unwrap_or_default().to_string()).collect()).unwrap_or_default()
}

#[test]
fn on_the_real_engine_the_sweep_finds_the_knee_at_the_sequence_cap_and_names_it() {
    let run = recorded("loadtest.json");
    let manifest = json("manifest.json");
    let cap = sequence_cap(&manifest);
    assert_eq!(cap, 4.0, "the lab capped the engine at 4 sequences");
    let knee = run.knee.as_ref().expect("the sweep found a knee");
    let loads: Vec<f64> = run.steps.iter().map(|s| s.load).collect();
    assert!((knee.load - cap).abs() <= 1.0, "the knee at {} in flight, the cap {cap}: steps {loads:?}", knee.load);
    let bad = knee.first_bad.expect("a step broke the limits");
    assert!(run.steps[bad].load > knee.load, "{loads:?}");
    // The limit that bound, read at the first bad step: the engine's queue with its batch at the cap.
    let bound = knee.bound.expect("the engines were read at the first bad step");
    assert_eq!((bound.limit, bound.at_step), (LimitKind::MaxNumSeqs, bad), "{bound:?}");
    assert_eq!(bound.running_max, Some(cap), "the running gauge's highest over the sweep is the cap");
    let e = run.steps[bad].engine.as_ref().unwrap();
    assert!(e.waiting_max.is_some_and(|w| w >= 1.0), "requests waited at the first bad step: {e:?}");
    // The engine never ran more than its cap, and nothing waited at the knee.
    assert!(run.steps.iter().all(|s| s.engine.as_ref().and_then(|e| e.running_max).is_some_and(|r| r <= cap)), "{:?}", run.steps);
    assert_eq!(run.steps[knee.step].engine.as_ref().unwrap().waiting_max, Some(0.0), "{:?}", run.steps[knee.step]);
    // Every request served: the knee is the latency's, not failures'.
    assert!(run.steps.iter().all(|s| s.failed == 0), "{:?}", run.steps.iter().map(|s| &s.by_outcome).collect::<Vec<_>>());

    // The product's stages, run again over the recorded steps, give what the run wrote.
    for s in &run.steps {
        assert_eq!(loadtest::judge(s, &run.slo), s.breaches, "step {}", s.index);
    }
    assert_eq!(loadtest::knee(&run.steps), Some((knee.step, knee.first_bad)));
    assert_eq!(loadtest::bound_at(&run.steps, bad), Some(bound));
    let derived = run.derived.as_ref().expect("a derived profile");
    assert_eq!(loadtest::derive(&run.steps, knee, &derived.name, derived.margin), *derived);
    assert!(derived.itl_from_engines);
    // The profile file is the one written from that run.
    assert_eq!(text("measured.toml"), vllm_diag::render::loadtest::profile_toml(&run, derived));
    println!("{}", vllm_diag::render::loadtest::text(&run));
}

#[test]
fn each_steps_engine_view_replays_from_the_real_engines_samples() {
    let run = recorded("loadtest.json");
    let dir = tempfile::tempdir().unwrap();
    let samples = common::unpack_lab_samples(&fixtures().join("samples.om.gz"), dir.path(), true);
    let prom = common::PromServer::start_with_openmetrics(&samples);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = PrometheusClient::new(ClientOptions { base_url: prom.url.clone(), ..ClientOptions::default() }).unwrap();
    let selector = Selector::parse(run.selector.as_deref().expect("the run's selector")).unwrap();
    for s in &run.steps {
        let was = s.engine.as_ref().expect("every step's engines were read");
        let settle = Duration::from_millis((was.to - s.ended).num_milliseconds() as u64);
        let w = engine::StepWindow::new(s.started, s.ended, settle);
        let answers = rt.block_on(vllm_diag::probe::engine::read(&client, &engine::queries(&selector, &w)));
        let seconds = (s.ended - s.started).num_milliseconds() as f64 / 1000.0;
        let now = engine::view(&w, was.from, seconds, answers);
        for (what, a, b) in [
            ("running at most", was.running_max, now.running_max),
            ("waiting at most", was.waiting_max, now.waiting_max),
            ("waiting on average", was.waiting_mean, now.waiting_mean),
            ("KV cache", was.kv_usage_max, now.kv_usage_max),
            ("preemptions", was.preemptions, now.preemptions),
            ("ttft p95", was.ttft_p95, now.ttft_p95),
            ("itl p95", was.itl_p95, now.itl_p95),
            ("finished", was.finished, now.finished),
        ] {
            assert!(close(a, b), "step {} ({} in flight): {what} was {a:?} in the run, {b:?} replayed", s.index, s.load);
        }
    }
}

#[test]
fn the_derived_profile_quiets_explain_below_the_knee_and_not_above_it() {
    let manifest = json("manifest.json");
    let run = recorded("loadtest.json");
    let derived = run.derived.clone().unwrap();
    let rules = tempfile::tempdir().unwrap();
    std::fs::write(rules.path().join("measured.toml"), text("measured.toml")).unwrap();
    let r = rules.path().to_str().unwrap();
    let shown = common::run::run(&["--no-config", "config", "show", "--rules", r, "--profile", &derived.name], &[]);
    assert_eq!(shown.code, 0, "the derived profile is accepted: {}", shown.stderr);

    let dir = tempfile::tempdir().unwrap();
    let samples = common::unpack_lab_samples(&fixtures().join("samples.om.gz"), dir.path(), true);
    let prom = common::PromServer::start_with_openmetrics(&samples);
    let latency = latency_rules();
    let knee = run.knee.as_ref().unwrap().load;
    let mut reports = Vec::new();
    for (hold, name) in [("hold-below.json", "explain-below"), ("hold-above.json", "explain-above")] {
        let h = recorded(hold);
        assert_eq!(h.steps.len(), 1, "{hold}: one step held");
        let (at, window) = (arg(&manifest, name, "--at"), arg(&manifest, name, "--window"));
        let e = common::run::run(
            &common::run::explain_args(&prom.url, &at, &["--window", &window, "--rules", r, "--profile", &derived.name, "--format", "json"]),
            &[],
        );
        assert!(e.code == 0 || e.code == 1, "{name}: exit {}\n{}", e.code, e.stderr);
        let report = e.json();
        // The replay finds what explain found on the live engine.
        assert_eq!(rules_of(&report), rules_of(&json(&format!("{name}.json"))), "{name}: replayed and live");
        reports.push((h.steps[0].load, report));
    }
    let (below, quiet) = &reports[0];
    let (above, loud) = &reports[1];
    assert!(*below < knee && *above > knee, "holds at {below} and {above} in flight, the knee at {knee}");
    let found = |r: &Value| rules_of(r).into_iter().filter(|id| latency.contains(id)).collect::<Vec<_>>();
    assert!(found(quiet).is_empty(), "below the knee ({below} in flight) the derived profile finds no latency: {:?}", rules_of(quiet));
    let loud_below: Vec<&Value> = quiet["findings"].as_array().unwrap().iter().filter(|f| f["severity"] != "info").collect();
    assert!(loud_below.is_empty(), "below the knee nothing warns: {loud_below:?}");
    assert!(!found(loud).is_empty(), "above the knee ({above} in flight) it finds the latency: {:?}", rules_of(loud));
    assert!(found(loud).iter().any(|id| id == "load-exceeds-capacity"), "the queue at the cap named as the load's: {:?}", rules_of(loud));

    // Its steps the run's own numbers answer are answered, not asked: admission by the binding
    // (the sequence cap, at the flag the engine ran with) and the replicas' shares by the breakdown.
    let cap = sequence_cap(&manifest);
    let finding = loud["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "load-exceeds-capacity").unwrap();
    let detail = finding["step_detail"].as_array().unwrap();
    let of_kind = |k: &str| detail.iter().find(|s| s["kind"] == k).unwrap_or_else(|| panic!("no {k} step: {detail:#?}"));
    let bound = of_kind("bound");
    assert_eq!(bound["state"], "answered");
    assert_eq!(bound["limit"], "max-num-seqs", "{bound}");
    assert_eq!(bound["confirmed"], true, "{bound}");
    assert!(bound["share"].as_f64().unwrap() >= 0.5, "{bound}");
    assert_eq!(bound["typical"]["running_cap"].as_f64(), Some(cap), "{bound}");
    let spread = of_kind("spread");
    assert_eq!((spread["state"].as_str(), spread["replicas"].as_u64()), (Some("answered"), Some(1)), "{spread}");
    let open: Vec<&str> = detail.iter().filter(|s| s["state"] == "open").map(|s| s["text"].as_str().unwrap()).collect();
    assert!(open.iter().all(|t| !t.contains("bottleneck is admission") && !t.contains("every replica")), "asked although answered: {open:?}");
    // The binding is said once: in the answered step, not again as a line of its own.
    let text = common::run::run(
        &common::run::explain_args(&prom.url, &arg(&manifest, "explain-above", "--at"), &["--window", "120s", "--rules", r, "--profile", &derived.name]),
        &[],
    );
    assert_eq!(text.stdout.matches("Bound by max_num_seqs").count(), 1, "{}", text.stdout);
    assert!(text.stdout.contains("Checked: Bound by max_num_seqs for"), "{}", text.stdout);
    // Slack, which cuts lines to fit, keeps it as it kept the binding line.
    let slack = common::run::run(
        &common::run::explain_args(
            &prom.url,
            &arg(&manifest, "explain-above", "--at"),
            &["--window", "120s", "--rules", r, "--profile", &derived.name, "--format", "slack"],
        ),
        &[],
    );
    assert!(slack.stdout.contains("Bound by max_num_seqs for"), "{}", slack.stdout);
}
