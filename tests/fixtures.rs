//! The recorded incidents shipped in fixtures/incidents/ are real: each one, replayed, gives exactly
//! the report a live run against a real Prometheus holding the same generated scenario gives today.
//! Regenerate them with `VLLM_DIAG_UPDATE_FIXTURES=1 cargo test --test fixtures`.

mod common;

use assert_cmd::Command;
use serde_json::Value;

const SHIPPED: &[&str] = &["kv-cache-pressure", "slow-decode", "healthy-steady"];

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn check(name: &str) {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/incidents").join(format!("{name}.json"));
    let (spec, prom) = common::start_scenario(name);
    let at = spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let update = std::env::var_os("VLLM_DIAG_UPDATE_FIXTURES").is_some();
    let mut live = Command::cargo_bin("vllm-diag").unwrap();
    live.args(["explain", "--prometheus", &prom.url, "--at", &at, "--format", "json"]);
    if update {
        live.arg("--record").arg(&fixture);
    }
    let live = json_of(&live.output().unwrap());
    drop(prom);

    let replayed = Command::cargo_bin("vllm-diag").unwrap().args(["explain", "--format", "json", "--replay"]).arg(&fixture).output().unwrap();
    assert!(
        replayed.status.code() != Some(2),
        "{name}: the shipped recording cannot be replayed; regenerate it with VLLM_DIAG_UPDATE_FIXTURES=1 cargo test --test fixtures\n{}",
        String::from_utf8_lossy(&replayed.stderr)
    );
    let mut replayed = json_of(&replayed);
    // The recording was made against another server (another port); everything else must match.
    let mut live = live;
    live["source"]["url"] = Value::Null;
    replayed["source"]["url"] = Value::Null;
    assert_eq!(
        live, replayed,
        "{name}: the shipped recording no longer matches a live run; if the change is intended, regenerate it with VLLM_DIAG_UPDATE_FIXTURES=1 cargo test --test fixtures"
    );
}

#[test]
fn shipped_recordings_match_a_live_run() {
    for name in SHIPPED {
        check(name);
    }
}
