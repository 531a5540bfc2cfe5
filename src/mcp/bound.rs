//! The report as an MCP result carries it: the `--format json` document, bounded.
//!
//! Always: each finding keeps only the evidence that decided it (the conditions that held), and no
//! evidence keeps its `series` (the points behind the charts). Then, while the document is larger
//! than [`SIZE_CAP`], it is trimmed in a fixed order, least needed first ([`STEPS`]), each step
//! saying under `mcp.trimmed` what it left out. `mcp.complete` is false when anything was trimmed;
//! the whole report is always `vllm-diag explain --format json` away. docs/agents.md documents
//! this.

use serde_json::{json, Map, Value};

/// The largest JSON document a tool result carries, in bytes (compact JSON).
pub const SIZE_CAP: usize = 64 * 1024;

/// A trimming step: it changes the document and returns what it left out, or `None` when it
/// found nothing to trim.
type Step = fn(&mut Map<String, Value>) -> Option<String>;

/// The trimming steps, in order.
const STEPS: &[Step] = &[
    drop_queries,
    |d| truncate(d, "healthy", 20, "rule and scope pairs found healthy"),
    |d| truncate(d, "not_evaluated", 20, "rule and scope pairs not evaluated"),
    |d| truncate(d, "warnings", 10, "warnings"),
    |d| truncate_last(d, "events", 20, "events (the most recent kept)"),
    |d| truncate(d, "binding", 10, "binding entries"),
    |d| per_finding(d, "steps", 3, "next steps"),
    |d| per_finding(d, "evidence", 4, "evidence items"),
    |d| per_finding(d, "also_consistent", 2, "also-consistent causes"),
    |d| truncate(d, "findings", 10, "findings (the best kept)"),
    |d| truncate(d, "healthy", 0, "rule and scope pairs found healthy"),
    |d| truncate(d, "not_evaluated", 0, "rule and scope pairs not evaluated"),
    |d| truncate(d, "events", 0, "events"),
    |d| truncate(d, "findings", 3, "findings (the best kept)"),
    |d| per_finding(d, "steps", 1, "next steps"),
    |d| truncate(d, "findings", 1, "findings (the best kept)"),
    keep_only_the_verdict,
];

/// Bound a document (the JSON report, or any object) to [`SIZE_CAP`] as the module says, and add
/// its `mcp` note.
pub fn bound(document: Value) -> Value {
    bound_to(document, SIZE_CAP)
}

/// [`bound`] to any cap (tests use small ones).
pub fn bound_to(document: Value, cap: usize) -> Value {
    let Value::Object(mut doc) = document else {
        return document;
    };
    only_deciding_evidence(&mut doc);
    let mut trimmed: Vec<String> = Vec::new();
    for step in STEPS {
        if size(&doc, &trimmed, cap) <= cap {
            break;
        }
        if let Some(note) = step(&mut doc) {
            trimmed.push(note);
        }
    }
    let note = note(&trimmed, cap);
    doc.insert("mcp".into(), note);
    Value::Object(doc)
}

fn note(trimmed: &[String], cap: usize) -> Value {
    json!({
        "size_cap_bytes": cap,
        "complete": trimmed.is_empty(),
        "evidence": "each finding's evidence holds the conditions that held, without the series behind the charts",
        "trimmed": trimmed,
    })
}

/// The document's size with its note, as it will be sent.
fn size(doc: &Map<String, Value>, trimmed: &[String], cap: usize) -> usize {
    let mut d = doc.clone();
    d.insert("mcp".into(), note(trimmed, cap));
    serde_json::to_string(&d).map_or(usize::MAX, |s| s.len())
}

fn findings(doc: &mut Map<String, Value>) -> impl Iterator<Item = &mut Map<String, Value>> {
    doc.get_mut("findings").and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

/// Each finding's evidence: the conditions that held (all of it when none is marked as held), no series.
fn only_deciding_evidence(doc: &mut Map<String, Value>) {
    for f in findings(doc) {
        if let Some(Value::Array(ev)) = f.get_mut("evidence") {
            if ev.iter().any(|e| e["passed"] == Value::Bool(true)) {
                ev.retain(|e| e["passed"] == Value::Bool(true));
            }
            for e in ev.iter_mut().filter_map(Value::as_object_mut) {
                e.remove("series");
            }
        }
    }
}

fn drop_queries(doc: &mut Map<String, Value>) -> Option<String> {
    let mut n = 0;
    for f in findings(doc) {
        for e in f.get_mut("evidence").and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut) {
            if e.remove("query").is_some() {
                n += 1;
            }
        }
    }
    (n > 0).then(|| format!("the PromQL of {n} evidence items (rules_show gives each rule's conditions)"))
}

/// Keep the first `keep` items of the array `key`.
fn truncate(doc: &mut Map<String, Value>, key: &str, keep: usize, what: &str) -> Option<String> {
    let list = doc.get_mut(key)?.as_array_mut()?;
    let n = list.len().checked_sub(keep).filter(|n| *n > 0)?;
    list.truncate(keep);
    Some(format!("{key}: {n} {what} left out"))
}

/// Keep the last `keep` items of the array `key`.
fn truncate_last(doc: &mut Map<String, Value>, key: &str, keep: usize, what: &str) -> Option<String> {
    let list = doc.get_mut(key)?.as_array_mut()?;
    let n = list.len().checked_sub(keep).filter(|n| *n > 0)?;
    list.drain(..n);
    Some(format!("{key}: {n} {what} left out"))
}

/// Keep the first `keep` items of each finding's array `key`.
fn per_finding(doc: &mut Map<String, Value>, key: &str, keep: usize, what: &str) -> Option<String> {
    let mut n = 0;
    for f in findings(doc) {
        if let Some(list) = f.get_mut(key).and_then(Value::as_array_mut) {
            n += list.len().saturating_sub(keep);
            list.truncate(keep);
        }
    }
    (n > 0).then(|| format!("findings: {n} {what} left out (at most {keep} per finding kept)"))
}

/// The last resort: the top finding's rule, severity, scope and summary, and how the run ended.
fn keep_only_the_verdict(doc: &mut Map<String, Value>) -> Option<String> {
    let keep = ["schema_version", "window", "baseline", "outcome", "stats", "coverage", "error"];
    let top = doc.get("findings").and_then(Value::as_array).and_then(|f| f.first()).map(|f| {
        let mut short = Map::new();
        for k in ["rule", "title", "severity", "score", "scope", "summary"] {
            if let Some(v) = f.get(k) {
                short.insert(k.into(), v.clone());
            }
        }
        Value::Object(short)
    });
    let before = doc.len();
    doc.retain(|k, _| keep.contains(&k.as_str()));
    doc.insert("findings".into(), Value::Array(top.into_iter().collect()));
    // Still over (a summary longer than the cap): the summary goes too.
    Some(format!("everything but the top finding's summary and the run's outcome ({} fields left out)", before.saturating_sub(doc.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(i: usize, passed: bool) -> Value {
        json!({"signal": format!("s{i}"), "passed": passed, "query": "x".repeat(200), "series": {"points": [1, 2, 3]}, "value": 1.0})
    }

    fn big_report(findings: usize) -> Value {
        let finding = |i: usize| {
            json!({
                "rule": format!("rule-{i}"), "severity": "warning", "summary": "s".repeat(300),
                "evidence": (0..8).map(|j| evidence(j, j % 2 == 0)).collect::<Vec<_>>(),
                "steps": (0..6).map(|j| format!("step {j} {}", "t".repeat(200))).collect::<Vec<_>>(),
            })
        };
        json!({
            "schema_version": 1,
            "findings": (0..findings).map(finding).collect::<Vec<_>>(),
            "healthy": (0..500).map(|i| json!({"rule": format!("r{i}"), "scope": {"model_name": "m"}})).collect::<Vec<_>>(),
            "not_evaluated": (0..100).map(|i| json!({"rule": format!("r{i}"), "reason": "metric missing in the window"})).collect::<Vec<_>>(),
            "outcome": {"exit_code": 1, "fail_on": "never"},
        })
    }

    #[test]
    fn a_small_report_keeps_everything_but_the_undeciding_evidence_and_the_series() {
        let doc = bound(
            big_report(1)
                .as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.insert("healthy".into(), json!([]));
                    o.insert("not_evaluated".into(), json!([]));
                    Value::Object(o)
                })
                .unwrap(),
        );
        assert_eq!(doc["mcp"]["complete"], true);
        assert_eq!(doc["mcp"]["size_cap_bytes"], SIZE_CAP);
        let ev = doc["findings"][0]["evidence"].as_array().unwrap();
        assert_eq!(ev.len(), 4);
        assert!(ev.iter().all(|e| e["passed"] == true && e.get("series").is_none() && e.get("query").is_some()));
        assert_eq!(doc["findings"][0]["steps"].as_array().unwrap().len(), 6);
    }

    #[test]
    fn a_large_report_is_trimmed_under_the_cap_in_order_and_says_what_it_left_out() {
        let doc = bound(big_report(60));
        let text = serde_json::to_string(&doc).unwrap();
        assert!(text.len() <= SIZE_CAP, "{} bytes", text.len());
        assert_eq!(doc["mcp"]["complete"], false);
        let trimmed: Vec<&str> = doc["mcp"]["trimmed"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(trimmed[0].starts_with("the PromQL of"), "{trimmed:?}");
        assert!(trimmed.iter().any(|t| t.starts_with("healthy: 480 ")), "{trimmed:?}");
        // The best findings stay, in order.
        assert_eq!(doc["findings"][0]["rule"], "rule-0");
        assert_eq!(doc["outcome"]["exit_code"], 1);
    }

    #[test]
    fn even_a_tiny_cap_keeps_the_top_finding_and_the_outcome() {
        let doc = bound_to(big_report(5), 2000);
        assert_eq!(doc["findings"].as_array().unwrap().len(), 1);
        assert_eq!(doc["findings"][0]["steps"].as_array().unwrap().len(), 1);
        assert!(serde_json::to_string(&doc).unwrap().len() <= 2000);
        // Smaller than even that: the last resort.
        let doc = bound_to(big_report(5), 900);
        assert_eq!(doc["findings"].as_array().unwrap().len(), 1);
        assert_eq!(doc["findings"][0]["rule"], "rule-0");
        assert_eq!(doc["outcome"]["exit_code"], 1);
        assert!(doc["healthy"].as_array().is_none_or(Vec::is_empty), "{doc}");
        let last = doc["mcp"]["trimmed"].as_array().unwrap().last().unwrap().as_str().unwrap().to_string();
        assert!(last.starts_with("everything but the top finding"), "{last}");
    }

    #[test]
    fn a_document_that_is_not_an_object_is_left_alone() {
        assert_eq!(bound(json!([1, 2])), json!([1, 2]));
    }
}
