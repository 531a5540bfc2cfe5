//! Alertmanager's webhook notification (payload version 4), read and checked, and what a diagnosis
//! takes from it: the selector that scopes it and the window that covers the alerts.
//!
//! The shape is Alertmanager's `notify/webhook` message: `version`, `groupKey`, `truncatedAlerts`,
//! then the template data (`receiver`, `status`, `alerts`, `groupLabels`, `commonLabels`,
//! `commonAnnotations`, `externalURL`); each alert has `status`, `labels`, `annotations`,
//! `startsAt`, `endsAt`, `generatorURL` and `fingerprint`. Field names are kept as Alertmanager
//! writes them both ways, so the `trigger` a delivery carries reads like the notification it came from.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::prom::{escape_regex_literal, is_label_name, MatchOp, Matcher, Selector};

/// The only payload version Alertmanager's webhook has sent since 0.6.
pub const PAYLOAD_VERSION: &str = "4";

/// Labels alerts carry that vLLM series do not: they never become matchers (a matcher on them
/// would select nothing).
pub const ALERT_ONLY_LABELS: &[&str] = &["alertname", "alertstate", "severity", "vllm_diag_rule", "prometheus", "prometheus_replica"];

/// The longest window a notification can ask for, however long ago its alerts started.
pub const MAX_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// One webhook notification: a group of alerts and what they have in common.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    pub version: String,
    pub group_key: String,
    #[serde(default)]
    pub truncated_alerts: u64,
    pub status: String,
    #[serde(default)]
    pub receiver: String,
    #[serde(default)]
    pub group_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub common_labels: BTreeMap<String, String>,
    #[serde(default)]
    pub common_annotations: BTreeMap<String, String>,
    #[serde(rename = "externalURL", default)]
    pub external_url: String,
    pub alerts: Vec<Alert>,
}

/// One alert of a notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    pub status: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
    pub starts_at: DateTime<Utc>,
    /// Alertmanager writes `0001-01-01T00:00:00Z` for an alert still firing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<DateTime<Utc>>,
    #[serde(rename = "generatorURL", default)]
    pub generator_url: String,
    #[serde(default)]
    pub fingerprint: String,
}

/// Whether the group fires or has resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupStatus {
    Firing,
    Resolved,
}

impl Notification {
    /// Read a request body: JSON of payload version 4 with a group key, a known status and at
    /// least one alert. The error is the reason a 400 answer gives.
    pub fn parse(body: &[u8]) -> Result<Notification, String> {
        let n: Notification = serde_json::from_slice(body).map_err(|e| format!("not an Alertmanager webhook notification: {e}"))?;
        if n.version != PAYLOAD_VERSION {
            return Err(format!("payload version {:?} is not supported: vllm-diag reads Alertmanager's webhook payload version {PAYLOAD_VERSION}", n.version));
        }
        if n.group_key.is_empty() {
            return Err("groupKey is empty: every Alertmanager notification names its group".into());
        }
        if n.alerts.is_empty() {
            return Err("the notification holds no alerts".into());
        }
        n.group_status()?;
        Ok(n)
    }

    /// `firing` or `resolved`, as the notification says.
    pub fn group_status(&self) -> Result<GroupStatus, String> {
        match self.status.as_str() {
            "firing" => Ok(GroupStatus::Firing),
            "resolved" => Ok(GroupStatus::Resolved),
            other => Err(format!("status {other:?} is neither \"firing\" nor \"resolved\"")),
        }
    }

    /// The alerts that fire (all of them when none says so, as in a hand-written notification).
    pub fn firing(&self) -> Vec<&Alert> {
        let firing: Vec<&Alert> = self.alerts.iter().filter(|a| a.status == "firing").collect();
        if firing.is_empty() {
            self.alerts.iter().collect()
        } else {
            firing
        }
    }

    /// The notification as a delivery carries it under `trigger`: everything as received, with
    /// only the alerts that fire (for a firing group).
    pub fn trigger(&self) -> Notification {
        let mut t = self.clone();
        if self.group_status() == Ok(GroupStatus::Firing) {
            t.alerts = self.firing().into_iter().cloned().collect();
        }
        t
    }

    /// The alert names, for people: `KvCachePressure` or `A, B`.
    pub fn alert_names(&self) -> String {
        let names: BTreeSet<&str> = self.alerts.iter().filter_map(|a| a.labels.get("alertname").map(String::as_str)).collect();
        if names.is_empty() {
            "alert".to_string()
        } else {
            names.into_iter().collect::<Vec<_>>().join(", ")
        }
    }

    /// The matchers that scope the diagnosis to what the alerts are about: every label of
    /// `group_by` (the diagnosis' grouping, `model_name` by default) that all firing alerts carry,
    /// and every label Alertmanager grouped them by, except the labels only alerts have
    /// ([`ALERT_ONLY_LABELS`]). A label with one value becomes `label="value"`; one whose firing
    /// alerts differ, `label=~"a|b"` with each value escaped as a literal. Sorted by label.
    pub fn scope(&self, group_by: &[String]) -> Selector {
        let firing = self.firing();
        let usable = |l: &str| is_label_name(l) && !l.starts_with("__") && !ALERT_ONLY_LABELS.contains(&l);
        let names: BTreeSet<&str> = group_by.iter().map(String::as_str).chain(self.group_labels.keys().map(String::as_str)).filter(|l| usable(l)).collect();
        let mut matchers = Vec::new();
        for name in names {
            let values: Option<BTreeSet<&str>> = match self.group_labels.get(name) {
                Some(v) => Some([v.as_str()].into()),
                None => firing.iter().map(|a| a.labels.get(name).map(String::as_str)).collect(),
            };
            let Some(values) = values.filter(|v| !v.is_empty() && !v.contains("")) else { continue };
            let matcher = if values.len() == 1 {
                Matcher::eq(name, values.first().copied().unwrap_or_default())
            } else {
                let alternatives: Vec<String> = values.iter().map(|v| escape_regex_literal(v)).collect();
                Matcher { name: name.to_string(), op: MatchOp::Re, value: alternatives.join("|") }
            };
            matchers.push(matcher);
        }
        Selector { matchers }
    }

    /// The window to diagnose, ending `now`: long enough to cover the earliest firing alert's
    /// start, at least `min`, at most [`MAX_WINDOW`], in whole minutes.
    pub fn window(&self, now: DateTime<Utc>, min: Duration) -> Duration {
        let since = self.firing().iter().map(|a| a.starts_at).min().and_then(|t| (now - t).to_std().ok()).unwrap_or_default();
        let minutes = since.as_secs().div_ceil(60);
        Duration::from_secs(minutes * 60).max(min).min(MAX_WINDOW.max(min))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(status: &str, labels: &[(&str, &str)], starts: &str) -> serde_json::Value {
        let labels: serde_json::Map<String, serde_json::Value> = labels.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
        serde_json::json!({
            "status": status, "labels": labels, "annotations": {"summary": "s"},
            "startsAt": starts, "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus:9090/graph", "fingerprint": "abc"
        })
    }

    fn notification(status: &str, group_labels: &[(&str, &str)], alerts: Vec<serde_json::Value>) -> Notification {
        let group: serde_json::Map<String, serde_json::Value> = group_labels.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
        let body = serde_json::json!({
            "version": "4", "groupKey": "{}:{alertname=\"KvCachePressure\"}", "truncatedAlerts": 0,
            "status": status, "receiver": "vllm-diag", "groupLabels": group, "commonLabels": {},
            "commonAnnotations": {}, "externalURL": "http://alertmanager:9093", "alerts": alerts
        });
        Notification::parse(body.to_string().as_bytes()).unwrap()
    }

    #[test]
    fn a_version_4_notification_reads_and_writes_back_with_alertmanagers_names() {
        let n = notification("firing", &[("alertname", "KvCachePressure")], vec![alert("firing", &[("model_name", "m")], "2026-01-15T09:00:00Z")]);
        assert_eq!(n.group_status(), Ok(GroupStatus::Firing));
        let back = serde_json::to_value(&n).unwrap();
        assert_eq!(back["groupKey"], n.group_key.as_str());
        assert_eq!(back["externalURL"], "http://alertmanager:9093");
        assert_eq!(back["alerts"][0]["generatorURL"], "http://prometheus:9090/graph");
        assert_eq!(back["alerts"][0]["startsAt"], "2026-01-15T09:00:00Z");
    }

    #[test]
    fn bad_notifications_are_refused_with_a_reason() {
        assert!(Notification::parse(b"{").unwrap_err().contains("not an Alertmanager webhook notification"));
        let body = |version: &str, status: &str, alerts: &str| format!(r#"{{"version":"{version}","groupKey":"k","status":"{status}","alerts":{alerts}}}"#);
        let one = r#"[{"status":"firing","labels":{},"startsAt":"2026-01-15T09:00:00Z"}]"#;
        assert!(Notification::parse(body("3", "firing", one).as_bytes()).unwrap_err().contains("version \"3\""));
        assert!(Notification::parse(body("4", "pending", one).as_bytes()).unwrap_err().contains("neither"));
        assert!(Notification::parse(body("4", "firing", "[]").as_bytes()).unwrap_err().contains("no alerts"));
        assert!(Notification::parse(body("4", "firing", one).as_bytes()).is_ok());
    }

    #[test]
    fn the_scope_takes_grouping_labels_and_leaves_alert_only_labels_out() {
        let n = notification(
            "firing",
            &[("alertname", "KvCachePressure"), ("namespace", "prod"), ("severity", "critical")],
            vec![alert("firing", &[("model_name", "meta-llama/Llama-3.1-8B"), ("namespace", "prod")], "2026-01-15T09:00:00Z")],
        );
        let s = n.scope(&["model_name".to_string()]);
        assert_eq!(s.to_promql(), r#"model_name="meta-llama/Llama-3.1-8B",namespace="prod""#);
    }

    #[test]
    fn alerts_for_several_models_select_them_all_as_escaped_literals() {
        let n = notification(
            "firing",
            &[("alertname", "X")],
            vec![
                alert("firing", &[("model_name", "Llama-3.1")], "2026-01-15T09:00:00Z"),
                alert("firing", &[("model_name", "a\"b|c")], "2026-01-15T09:00:00Z"),
                alert("resolved", &[("model_name", "gone")], "2026-01-15T09:00:00Z"),
            ],
        );
        let s = n.scope(&["model_name".to_string(), "job".to_string()]);
        assert_eq!(s.matchers.len(), 1, "job is carried by no alert: {s:?}");
        assert_eq!(s.matchers[0].op, MatchOp::Re);
        assert_eq!(s.matchers[0].value, r#"Llama-3\.1|a"b\|c"#);
        assert_eq!(s.to_promql(), r#"model_name=~"Llama-3\\.1|a\"b\\|c""#);
        assert_eq!(n.trigger().alerts.len(), 2, "only the firing alerts trigger");
    }

    #[test]
    fn the_window_covers_the_earliest_alert_within_bounds() {
        let n = notification("firing", &[], vec![alert("firing", &[], "2026-01-15T09:00:00Z"), alert("firing", &[], "2026-01-15T08:10:30Z")]);
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        let min = Duration::from_secs(1800);
        assert_eq!(n.window(at("2026-01-15T09:10:00Z"), min), Duration::from_secs(60 * 60));
        assert_eq!(n.window(at("2026-01-15T08:20:00Z"), min), min);
        assert_eq!(n.window(at("2026-01-20T00:00:00Z"), min), MAX_WINDOW);
        // An alert from the future (clock skew) gives the minimum.
        assert_eq!(n.window(at("2026-01-15T08:00:00Z"), min), min);
    }
}
