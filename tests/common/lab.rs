//! Reading a lab run's windows: `explain --format json` at a time, and what its findings name
//! (tests/real_engine_fleet.rs and tests/real_engine_router.rs).

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use serde_json::Value;

pub fn at(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// `explain --format json` of the `window` ending at `end`, against `baseline` before its start.
pub fn report(url: &str, end: DateTime<Utc>, window: Duration, baseline: Duration) -> Value {
    let args = [
        "--no-config".to_string(),
        "--window".to_string(),
        format!("{}s", window.num_seconds()),
        "--baseline".to_string(),
        format!("{}s", baseline.num_seconds()),
        "--format".to_string(),
        "json".to_string(),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    super::run::run(&super::run::explain_args(url, &at(end), &args), &[]).json()
}

pub fn findings(report: &Value) -> impl Iterator<Item = &Value> {
    report["findings"].as_array().into_iter().flatten()
}

/// The findings above info.
pub fn loud(report: &Value) -> Vec<&Value> {
    findings(report).filter(|f| f["severity"] != "info").collect()
}

/// The replicas a finding names: the one in its scope, or those its evidence found affected.
pub fn replicas_named(f: &Value) -> Vec<String> {
    let mut named: Vec<String> = f["scope"]["instance"].as_str().map(String::from).into_iter().collect();
    named.extend(f["replicas"]["affected"].as_array().into_iter().flatten().filter_map(|r| r.as_str().map(String::from)));
    named
}
