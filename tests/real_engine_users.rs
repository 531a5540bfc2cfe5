//! What users run into that vLLM's own counters hide, judged on a real vLLM engine's samples.
//!
//! `scripts/real-engine.sh --users` ran vLLM's CPU build (the tiny random-weight Llama) with its API
//! server on one core and its engine core on the other, scraped every 5 s by a real Prometheus,
//! through client give-ups (streams closed after 4 tokens, which vLLM 0.32 counts as neither an
//! abort nor an error) and CPU taken from the API server alone, each after a healthy stretch and
//! each with a near miss, and exported every raw sample and a manifest of the phases into
//! `fixtures/real-engine-users/`. Here those samples are backfilled into a real Prometheus of the
//! test's own and every phase is diagnosed against the baseline phase the manifest names.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

const MODEL: &str = "tiny-llama";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-users")
}

type Phase = common::LabPhase;

/// One phase diagnosed against its baseline phase, as JSON.
fn diagnose(url: &str, phases: &[Phase], p: &Phase) -> Value {
    common::explain_lab_phase(url, phases, p, &["--format", "json"]).json()
}

fn summary(report: &Value) -> String {
    report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| format!("{} {}", f["severity"].as_str().unwrap_or("?"), f["rule"].as_str().unwrap_or("?")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The window value of `signal` in any finding's evidence.
fn evidence(report: &Value, signal: &str) -> Option<f64> {
    report["findings"].as_array()?.iter().flat_map(|f| f["evidence"].as_array().into_iter().flatten()).find(|e| e["signal"] == signal)?["value"].as_f64()
}

/// What the clients of each phase did, from the manifest: streams they closed early.
fn closed_by_clients(dir: &Path) -> std::collections::BTreeMap<String, f64> {
    let text = std::fs::read_to_string(dir.join("manifest.json")).expect("manifest");
    let m: Value = serde_json::from_str(&text).expect("manifest JSON");
    m["phases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| (p["name"].as_str().unwrap_or_default().to_string(), p["client_view"]["aborted_by_client"].as_f64().unwrap_or(0.0)))
        .collect()
}

/// Every phase with a baseline: incidents named first, near misses and healthy stretches quiet,
/// give-ups estimated within a factor of 1.5 of what the clients did.
fn judge(dir: &Path) -> Vec<String> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let prom = common::PromServer::start_with_openmetrics(common::unpack_lab_samples(&dir.join("samples.om.gz"), tmp.path(), true));
    let phases = common::lab_manifest(dir);
    let closed = closed_by_clients(dir);
    let mut wrong = Vec::new();
    let mut judged = Vec::new();
    for p in phases.iter().filter(|p| p.baseline.is_some()) {
        judged.push(p.kind.clone());
        let report = diagnose(&prom.url, &phases, p);
        if std::env::var_os("VLLM_DIAG_SHOW").is_some() {
            eprintln!(
                "{}: {} | giveup_rate {:?} giveup_share {:?} input_processing_mean {:?}",
                p.name,
                summary(&report),
                evidence(&report, "giveup_rate"),
                evidence(&report, "giveup_share"),
                evidence(&report, "input_processing_mean")
            );
        }
        if p.expect_first.is_empty() {
            if !common::loud(&report).is_empty() {
                wrong.push(format!("{} ({}): warning or critical findings: {}", p.name, p.kind, summary(&report)));
            }
        } else {
            let first = report["findings"][0]["rule"].as_str().unwrap_or("(no finding)").to_string();
            if !p.expect_first.contains(&first) || report["findings"][0]["scope"]["model_name"] != MODEL {
                wrong.push(format!("{}: expected {:?} first for {MODEL}, got: {}", p.name, p.expect_first, summary(&report)));
            }
        }
        if p.kind == "give-ups" {
            let truth = closed.get(&p.name).copied().unwrap_or_default();
            let seconds = (p.end - p.start).num_seconds() as f64;
            match evidence(&report, "giveup_rate") {
                Some(rate) if truth > 0.0 && (rate * seconds / truth).max(truth / (rate * seconds)) <= 1.5 => {}
                other => {
                    wrong.push(format!("give-ups: estimated {other:?}/s over {seconds} s against {truth} streams closed by clients: {}", summary(&report)))
                }
            }
        }
        if p.kind == "api-hog" && common::loud(&report).iter().any(|r| r == "slow-prefill" || r == "slow-decode") {
            wrong.push(format!("api-hog: the engine blamed for time spent before it: {}", summary(&report)));
        }
    }
    for kind in ["healthy", "give-ups", "give-ups-near", "api-hog", "api-hog-near"] {
        if !judged.iter().any(|k| k == kind) {
            wrong.push(format!("{}: no {kind} phase to judge", dir.display()));
        }
    }
    wrong
}

#[test]
fn give_ups_and_an_api_server_starved_of_cpu_are_named_on_a_real_engine_and_their_near_misses_stay_quiet() {
    let wrong = judge(&fixtures());
    assert!(wrong.is_empty(), "phases judged wrong:\n  {}", wrong.join("\n  "));
}
