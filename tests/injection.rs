//! Label values cannot change what a query selects: not in `--selector`, not when a model name that
//! came back from the server is put into a follow-up query (the per-replica breakdown of a finding).
//!
//! The fleet is a generated one whose models carry hostile names: the one in trouble has quotes,
//! braces, a backslash and a newline in its name, written to close the matcher early and add a
//! clause that selects everything; a healthy one is named like a regular expression that matches
//! every model. A real Prometheus holds them next to a model with an ordinary name. If any value
//! were pasted into PromQL instead of escaped, the breakdown would count the other models' replicas,
//! the selector would select the wrong models, or the queries would fail.

mod common;

use std::collections::BTreeSet;

use serde_json::Value;
use vllm_diag_sim::{ModelSpec, ScenarioSpec};

use common::run::{at_window_end, explain_json};
use common::{load_scenario, quoted, PromServer};

/// Closes the string and the braces, then selects every series; with a backslash and a newline.
const HOSTILE: &str = "evil\"} or vllm:kv_cache_usage_perc{model_name=~\".*\"} # \\ back\\slash\nnext line";
const NORMAL: &str = "Qwen/Qwen2.5-7B-Instruct";
/// As a regular expression this matches every model.
const REGEX_LIKE: &str = "meta-llama/Llama-3.1-8B-Instruct|.*";

fn hostile_fleet() -> (ScenarioSpec, PromServer) {
    let mut spec = load_scenario("kv-cache-pressure");
    // The incident model gets the hostile name; add a healthy model with a regex-like name.
    let incident_model = spec.incident.as_ref().map(|i| i.model.clone()).unwrap_or_default();
    for m in &mut spec.models {
        if m.name == incident_model {
            m.name = HOSTILE.to_string();
        } else {
            m.name = NORMAL.to_string();
        }
    }
    spec.models.push(ModelSpec::new(REGEX_LIKE, 2, 1.5));
    if let Some(i) = spec.incident.as_mut() {
        i.model = HOSTILE.to_string();
    }
    spec.expect.model = Some(HOSTILE.to_string());
    let prom = PromServer::start_generated(&spec);
    (spec, prom)
}

/// The exit code, the JSON report (Null when there is none: exit 3 before one is made) and stderr
/// of `explain` at `at` with `extra` flags.
fn explain(url: &str, at: &str, extra: &[&str]) -> (i32, Value, String) {
    let r = explain_json(url, at, extra);
    let json = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    (r.code, json, r.stderr)
}

fn scopes(report: &Value) -> BTreeSet<String> {
    report["metrics"]["scopes"].as_array().map(|a| a.iter().filter_map(|s| s["model_name"].as_str().map(str::to_string)).collect()).unwrap_or_default()
}

fn loud_findings(report: &Value) -> Vec<(String, String)> {
    report["findings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|f| f["severity"] != "info")
                .map(|f| (f["rule"].as_str().unwrap_or("").to_string(), f["scope"]["model_name"].as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn hostile_model_names_are_escaped_in_every_query_and_select_only_themselves() {
    let (spec, prom) = hostile_fleet();
    let at = at_window_end(&spec);
    let all: BTreeSet<String> = [HOSTILE, NORMAL, REGEX_LIKE].iter().map(|s| s.to_string()).collect();

    // The server really holds the three names, byte for byte.
    let held: BTreeSet<String> = prom
        .query("count by (model_name) (vllm:num_requests_running)", spec.window_end())
        .into_iter()
        .filter_map(|(labels, _)| labels.get("model_name").cloned())
        .collect();
    assert_eq!(held, all);

    // No selector: every model is its own scope, and the cause is found for the hostile one only.
    let (code, report, stderr) = explain(&prom.url, &at, &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(report.is_object(), "{stderr}");
    assert_eq!(scopes(&report), all);
    let first = &report["findings"][0];
    assert_eq!(first["rule"], spec.expect.first.clone().unwrap_or_default().as_str(), "{report:#}");
    assert_eq!(first["scope"]["model_name"], HOSTILE);
    assert!(loud_findings(&report).iter().all(|(_, m)| m == HOSTILE), "{:?}", loud_findings(&report));
    assert!(
        !report["not_evaluated"].as_array().is_some_and(|n| n.iter().any(|e| e["reason"].as_str().unwrap_or("").contains("parse error"))),
        "a query broke: {report:#}"
    );

    // The per-replica breakdown puts the hostile name, as the server sent it, into a new query. It
    // must count exactly that model's replicas, not the fleet's.
    let replicas = &first["replicas"];
    assert!(replicas.is_object(), "no per-replica breakdown to check: {first:#}");
    let own: BTreeSet<String> = spec.replicas().into_iter().filter(|r| r.model == HOSTILE).map(|r| r.instance).collect();
    assert_eq!(replicas["total"].as_u64(), Some(own.len() as u64), "{replicas:#}");
    let affected: BTreeSet<String> =
        replicas["affected"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect()).unwrap_or_default();
    assert!(!affected.is_empty() && affected.is_subset(&own), "{affected:?} not within {own:?}");

    // --selector with the regex-like name, as an exact match: that model alone, healthy.
    let sel = format!("model_name={}", quoted(REGEX_LIKE));
    let (code, report, stderr) = explain(&prom.url, &at, &["--selector", &sel]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(scopes(&report), [REGEX_LIKE.to_string()].into_iter().collect());
    assert!(loud_findings(&report).is_empty(), "{:?}", loud_findings(&report));

    // --selector with the hostile name: that model alone, with its finding.
    let sel = format!("model_name={}", quoted(HOSTILE));
    let (_, report, stderr) = explain(&prom.url, &at, &["--selector", &sel]);
    assert_eq!(scopes(&report), [HOSTILE.to_string()].into_iter().collect(), "{stderr}");
    assert_eq!(report["findings"][0]["scope"]["model_name"], HOSTILE);
    assert_eq!(report["findings"][0]["replicas"]["total"].as_u64(), Some(own.len() as u64));

    // ... and its negation: everything else, none of its trouble.
    let sel = format!("model_name!={}", quoted(HOSTILE));
    let (code, report, stderr) = explain(&prom.url, &at, &["--selector", &sel]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(scopes(&report), [NORMAL.to_string(), REGEX_LIKE.to_string()].into_iter().collect());
    assert!(loud_findings(&report).is_empty(), "{:?}", loud_findings(&report));

    // A selector value written to break out of its string is refused or taken literally, never run.
    let (code, report, stderr) = explain(&prom.url, &at, &["--selector", "model_name='x\"} or vllm:kv_cache_usage_perc{a=\"'"]);
    assert_eq!(code, 3, "{stderr}");
    assert!(report.is_null() || scopes(&report).is_empty(), "{report:#}");
    assert!(stderr.contains("no vLLM metrics"), "{stderr}");
}
