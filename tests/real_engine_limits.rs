//! Which limit binds, judged on a real vLLM engine's samples.
//!
//! `scripts/real-engine.sh --limits` ran vLLM's CPU build (the tiny random-weight Llama) scraped
//! every 5 s by a real Prometheus, restarted it with the flags that make each of its limits bind on
//! purpose (the sequence cap, the token budget, the KV cache), stopped its engine core with SIGSTOP
//! for one phase and left it idle for another, each after a healthy stretch on the same engine, and
//! exported every raw sample and a manifest of the phases into `fixtures/real-engine-limits/`. Here
//! those samples are backfilled into a real Prometheus of the test's own and every phase is
//! diagnosed against the baseline phase the manifest names: the report's `binding` for the
//! engine's model must be the phase's `expect_binding` (`none` for healthy and idle stretches), and
//! in the stalled phase the stalled engine must be the first finding.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;

const MODEL: &str = "tiny-llama";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-limits")
}

type Phase = common::LabPhase;

fn manifest(dir: &Path) -> Vec<Phase> {
    let phases = common::lab_manifest(dir);
    for p in &phases {
        assert!(p.expect_binding.is_some(), "{}: phase {} has no expect_binding", dir.display(), p.name);
    }
    phases
}

/// One phase diagnosed against its baseline phase, as JSON.
fn diagnose(url: &str, phases: &[Phase], p: &Phase) -> Value {
    common::explain_lab_phase(url, phases, p, &["--format", "json"]).json()
}

/// The limit the report says bound for the engine's model, or what it said instead.
fn binding_of(report: &Value) -> String {
    let entries = report["binding"].as_array().cloned().unwrap_or_default();
    let ours = entries.iter().find(|b| b["scope"]["model_name"] == MODEL || b["scope"] == MODEL);
    match ours {
        Some(b) => b["limit"].as_str().unwrap_or("(no limit)").to_string(),
        None => format!("(no binding for {MODEL} in {})", report["binding"]),
    }
}

fn summary(report: &Value) -> String {
    let findings: Vec<String> = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| format!("{} {}", f["severity"].as_str().unwrap_or("?"), f["rule"].as_str().unwrap_or("?")))
        .collect();
    format!("binding {}; findings: {}", report["binding"], findings.join(", "))
}

/// Every phase with a baseline: its binding limit, and the stalled engine first in the stalled phase.
fn judge(dir: &Path) -> Vec<String> {
    let tmp = tempfile::tempdir().expect("temp dir");
    let prom = common::PromServer::start_with_openmetrics(common::unpack_lab_samples(&dir.join("samples.om.gz"), tmp.path(), true));
    let phases = manifest(dir);
    let mut wrong = Vec::new();
    let mut judged = Vec::new();
    for p in phases.iter().filter(|p| p.baseline.is_some()) {
        judged.push(p.kind.clone());
        let report = diagnose(&prom.url, &phases, p);
        let bound = binding_of(&report);
        let expected = p.expect_binding.as_deref().unwrap_or_default();
        if bound != expected {
            wrong.push(format!("{} ({}): expected binding {expected}, got {bound}: {}", p.name, p.kind, summary(&report)));
        }
        if p.kind == "stalled" && report["findings"][0]["rule"] != "stalled-engine" {
            wrong.push(format!("{}: expected stalled-engine first: {}", p.name, summary(&report)));
        }
    }
    for kind in ["healthy", "seq-cap", "token-budget", "kv-cache", "stalled", "idle"] {
        if !judged.iter().any(|k| k == kind) {
            wrong.push(format!("{}: no {kind} phase to judge", dir.display()));
        }
    }
    wrong
}

#[test]
fn every_phase_of_the_limits_run_names_the_limit_that_bound() {
    let wrong = judge(&fixtures());
    assert!(wrong.is_empty(), "phases judged wrong:\n  {}", wrong.join("\n  "));
}
