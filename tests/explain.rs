//! explain against a real Prometheus holding generated scenarios: the right cause ranks first for the
//! right model, healthy fleets stay quiet, V0 and V1 names give the same diagnosis, and every exit
//! code is what docs/output.md promises.

mod common;

use assert_cmd::Command;
use serde_json::Value;

use common::{start_scenario, PromServer};

fn at(spec: &vllm_diag_sim::ScenarioSpec) -> String {
    spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Run explain with JSON output; returns (exit code, parsed report or Null, stderr).
fn explain(url: &str, extra: &[&str]) -> (i32, Value, String) {
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--prometheus", url, "--format", "json"])
        .args(extra)
        .env_remove("VLLM_DIAG_PROMETHEUS_URL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), json, String::from_utf8_lossy(&out.stderr).to_string())
}

fn findings(report: &Value) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (f["rule"].as_str().unwrap().to_string(), f["scope"]["model_name"].as_str().unwrap_or("").to_string(), f["severity"].as_str().unwrap().to_string())
        })
        .collect()
}

/// Start the scenario, explain its window, and check the scenario's own expectation.
fn check_scenario(name: &str) -> Value {
    let (spec, prom) = start_scenario(name);
    let (code, report, stderr) = explain(&prom.url, &["--at", &at(&spec), "--window", "30m"]);
    assert!(report.is_object(), "{name}: no JSON report (exit {code}): {stderr}");
    let got = findings(&report);
    if spec.expect.healthy {
        let loud: Vec<_> = got.iter().filter(|f| f.2 != "info").collect();
        assert!(loud.is_empty(), "{name}: a healthy fleet gave findings {loud:?}\n{report:#}");
        assert_eq!(code, 0, "{name}: {stderr}");
        assert!(report["stats"]["rules_evaluated"].as_u64().unwrap() > 0);
    } else {
        let first = spec.expect.first.as_deref().unwrap();
        let model = spec.expect.model.as_deref().unwrap();
        assert!(!got.is_empty(), "{name}: no findings\n{report:#}");
        assert_eq!((got[0].0.as_str(), got[0].1.as_str()), (first, model), "{name}: ranked {got:?}\n{report:#}");
        // The incident is confined to one model: nothing of warning or above elsewhere.
        let elsewhere: Vec<_> = got.iter().filter(|f| f.1 != model && f.2 != "info").collect();
        assert!(elsewhere.is_empty(), "{name}: findings for healthy models {elsewhere:?}");
        // Every evidence item names the PromQL it came from.
        for e in report["findings"][0]["evidence"].as_array().unwrap() {
            assert!(!e["query"].as_str().unwrap().is_empty(), "{name}: evidence without query: {e}");
        }
    }
    report
}

#[test]
fn healthy_steady_traffic_gives_no_warning() {
    check_scenario("healthy-steady");
}

#[test]
fn traffic_ramping_within_capacity_gives_no_warning() {
    check_scenario("healthy-ramp");
}

#[test]
fn overload_ranks_load_exceeds_capacity_first() {
    check_scenario("load-exceeds-capacity");
}

#[test]
fn slow_prefill_ranks_first() {
    check_scenario("slow-prefill");
}

#[test]
fn slow_decode_ranks_first() {
    check_scenario("slow-decode");
}

#[test]
fn severe_saturation_ranks_first_and_absorbs_overload() {
    check_scenario("severe-saturation");
}

#[test]
fn kv_cache_pressure_ranks_first_and_v0_names_give_the_same_diagnosis() {
    let v1 = check_scenario("kv-cache-pressure");
    let v0 = check_scenario("v0-kv-cache-pressure");
    assert_eq!(findings(&v1), findings(&v0));
    assert_eq!(v1["metrics"]["generation"], "v1");
    assert_eq!(v0["metrics"]["generation"], "v0");
    assert_eq!(v0["metrics"]["names_used"]["kv_usage_max"], "vllm:gpu_cache_usage_perc");
    assert_eq!(v0["metrics"]["names_used"]["itl_p95"], "vllm:time_per_output_token_seconds_bucket");
    assert_eq!(v1["metrics"]["names_used"]["kv_usage_max"], "vllm:kv_cache_usage_perc");
    // V0 has no HTTP metrics: the HTTP rule says so instead of calling the fleet healthy.
    let ne = v0["not_evaluated"].as_array().unwrap();
    assert!(ne.iter().any(|n| n["rule"] == "http-errors" && n["reason"].as_str().unwrap().contains("http_requests_total")), "{ne:?}");
}

#[test]
fn http_errors_rank_first() {
    check_scenario("http-errors");
}

#[test]
fn fail_on_turns_a_finding_into_exit_1_and_a_replay_matches_the_live_run() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("incident.json");
    let rec_s = rec.to_str().unwrap();
    let (code, live, stderr) = explain(&prom.url, &["--at", &at(&spec), "--fail-on", "warning", "--record", rec_s]);
    assert_eq!(code, 1, "{stderr}");
    let (code, _, _) = explain(&prom.url, &["--at", &at(&spec), "--fail-on", "never"]);
    assert_eq!(code, 0);
    drop(prom);
    // Offline, with the server gone: identical report, identical exit code.
    let (code, replayed, stderr) = explain("http://127.0.0.1:9", &["--replay", rec_s, "--fail-on", "warning"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(live, replayed);
    for format in ["table", "markdown"] {
        let a = Command::cargo_bin("vllm-diag").unwrap().args(["explain", "--replay", rec_s, "--format", format]).output().unwrap();
        let b = Command::cargo_bin("vllm-diag").unwrap().args(["explain", "--replay", rec_s, "--format", format]).output().unwrap();
        assert_eq!(a.stdout, b.stdout);
        assert!(!a.stdout.is_empty());
    }
}

#[test]
fn a_replay_judges_with_the_profile_the_run_was_recorded_with() {
    // healthy-steady under the code-completion profile's tighter latency targets burns its SLO;
    // under the default profile it does not. The replay must give the recorded verdict.
    let (spec, prom) = start_scenario("healthy-steady");
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("profiled.json");
    let rec_s = rec.to_str().unwrap();
    let (code, live, stderr) = explain(&prom.url, &["--at", &at(&spec), "--profile", "code-completion", "--fail-on", "warning", "--record", rec_s]);
    let (default_code, default_report, _) = explain(&prom.url, &["--at", &at(&spec), "--fail-on", "warning"]);
    assert_ne!(findings(&live), findings(&default_report), "the profile makes no difference here, so this test shows nothing");
    drop(prom);
    let (replay_code, replayed, replay_stderr) = explain("http://127.0.0.1:9", &["--replay", rec_s, "--fail-on", "warning"]);
    assert_eq!((replay_code, &replayed), (code, &live), "{stderr}\n{replay_stderr}");
    assert_ne!(replay_code, default_code);
    // Another profile given on replay is used, and said so.
    let (_, _, other) = explain("http://127.0.0.1:9", &["--replay", rec_s, "--profile", "batch"]);
    assert!(other.contains("judged with --profile code-completion; this replay uses --profile batch"), "{other}");
}

#[test]
fn a_selector_narrows_every_query() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let (code, report, stderr) = explain(&prom.url, &["--at", &at(&spec), "--selector", r#"model_name="Qwen/Qwen2.5-7B-Instruct""#]);
    assert_eq!(code, 0, "{stderr}");
    let scopes = report["metrics"]["scopes"].as_array().unwrap();
    assert_eq!(scopes.len(), 1, "{scopes:?}");
    assert!(findings(&report).iter().all(|f| f.2 == "info"));
}

#[test]
fn an_empty_prometheus_exits_3_and_says_there_is_no_vllm_data() {
    let prom = PromServer::start_empty();
    let (code, _, stderr) = explain(&prom.url, &["--at", "2026-01-15T09:30:00Z"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains("no vLLM metrics"), "{stderr}");
}

#[test]
fn a_window_before_the_data_exits_3() {
    let (_spec, prom) = start_scenario("healthy-steady");
    let (code, _, stderr) = explain(&prom.url, &["--at", "2025-06-01T00:00:00Z"]);
    assert_eq!(code, 3, "{stderr}");
}

#[test]
fn an_unreachable_prometheus_exits_3_and_names_the_url() {
    // Bind a port, then free it: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let (code, doc, stderr) = explain(&url, &["--at", "2026-01-15T09:30:00Z"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    // --format json still leaves a document on stdout: the error, not an empty file.
    assert_eq!(doc["error"]["exit_code"], 3, "{doc}");
    assert!(doc["error"]["message"].as_str().unwrap_or_default().contains(&format!("127.0.0.1:{port}")), "{doc}");
    assert!(doc.get("findings").is_none(), "{doc}");
    // And JUnit an erroring test case, for the CI's test view.
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["check", "--prometheus", &url, "--at", "2026-01-15T09:30:00Z", "--since", "20m", "--format", "junit"])
        .env_remove("VLLM_DIAG_PROMETHEUS_URL")
        .output()
        .unwrap();
    let xml = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3));
    assert!(xml.contains("errors=\"1\"") && xml.contains("<error message=\"cannot reach"), "{xml}");
    let tree = roxmltree::Document::parse(&xml);
    assert!(tree.is_ok(), "{tree:?}\n{xml}");
}

#[test]
fn a_malformed_rule_file_exits_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("mine.toml"),
        "[[rule]]\nid = \"mine\"\ntitle = \"Mine\"\nseverity = \"warning\"\nsummary = \"s\"\nwhen = [\"ttft_p95 >> 3s\"]\n",
    )
    .unwrap();
    let out = Command::cargo_bin("vllm-diag")
        .unwrap()
        .args(["explain", "--rules", dir.path().to_str().unwrap(), "--prometheus", "http://127.0.0.1:9"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("mine.toml:6:"), "{stderr}");
}

#[test]
fn bad_flags_exit_2_and_name_the_flag() {
    for (args, needle) in [
        (vec!["explain", "--window", "0s"], "--window"),
        (vec!["explain", "--window", "soon"], "--window"),
        (vec!["explain", "--at", "2999-01-01T00:00:00Z"], "future"),
        (vec!["explain", "--selector", "namespace=prod"], "--selector"),
        (vec!["explain", "--format", "yaml"], "--format"),
    ] {
        let out = Command::cargo_bin("vllm-diag").unwrap().args(&args).arg("--prometheus").arg("http://127.0.0.1:9").output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
