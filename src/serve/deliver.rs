//! What a diagnosis delivers, and delivering it: the JSON envelope for `--webhook-url`, the Slack
//! message, and the POST with retries.
//!
//! The envelope is the `--format json` report as it is (its `schema_version` contract), with two
//! top-level fields added: `trigger`, the notification that asked (its firing alerts), and `run`,
//! what this run was (`kind`, `status`, `exit_code`, the selector and window used, the error when
//! it failed). A failed run has no report fields, only `schema_version`, `trigger` and `run`; a
//! resolved group's follow-up likewise, with `run.kind` = `resolved`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::alert::Notification;
use crate::error::Failure;
use crate::prom::{redact_text, Selector};
use crate::render::links::GraphLinks;
use crate::render::slack::{code, plain};
use crate::render::{self, RenderOptions};
use crate::report::{Report, SCHEMA_VERSION};
use crate::source::prometheus::Secret;

/// What a diagnosis gave: the report, and the exit code `explain` would have ended with on it.
#[derive(Debug, Clone)]
pub struct Diagnosis {
    pub report: Report,
    pub exit_code: u8,
}

/// What a run was asked: the selector and window it used.
#[derive(Debug, Clone)]
pub struct RunScope {
    pub selector: Selector,
    pub window: Duration,
    pub end: DateTime<Utc>,
}

/// The webhook's JSON for a firing group's diagnosis (or its failure).
pub fn envelope(trigger: &Notification, scope: &RunScope, outcome: &Result<Diagnosis, Failure>) -> Value {
    let mut run = Map::new();
    run.insert("kind".into(), "diagnosis".into());
    let mut doc = match outcome {
        Ok(d) => {
            run.insert("status".into(), "diagnosed".into());
            run.insert("exit_code".into(), d.exit_code.into());
            match serde_json::to_value(&d.report) {
                Ok(Value::Object(m)) => m,
                other => {
                    // Unreachable for a Report, but a delivery never panics: say so in the envelope.
                    let mut m = Map::new();
                    m.insert("schema_version".into(), SCHEMA_VERSION.into());
                    run.insert("error".into(), format!("cannot encode the report: {other:?}").into());
                    m
                }
            }
        }
        Err(e) => {
            run.insert("status".into(), "failed".into());
            run.insert("exit_code".into(), e.exit_code().into());
            run.insert("error".into(), redact_text(&e.to_string()).into());
            let mut m = Map::new();
            m.insert("schema_version".into(), SCHEMA_VERSION.into());
            m
        }
    };
    run.insert("selector".into(), scope.selector.to_promql().into());
    run.insert("window_seconds".into(), scope.window.as_secs().into());
    run.insert("window_end".into(), scope.end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true).into());
    doc.insert("trigger".into(), serde_json::to_value(trigger.trigger()).unwrap_or(Value::Null));
    doc.insert("run".into(), Value::Object(run));
    Value::Object(doc)
}

/// The webhook's JSON for a group that resolved.
pub fn resolved_envelope(trigger: &Notification, message: &str) -> Value {
    json!({
        "schema_version": SCHEMA_VERSION,
        "trigger": trigger.trigger(),
        "run": { "kind": "resolved", "status": "resolved", "message": message },
    })
}

/// What the diagnosis is scoped to, for people: `model_name="x"`, or the whole fleet.
fn scope_text(selector: &Selector) -> String {
    if selector.is_empty() {
        "the whole fleet".to_string()
    } else {
        code(&selector.to_promql())
    }
}

/// The Slack message for a firing group: a line naming the alert, then the report in the slack
/// format (or why there is none).
pub fn slack_text(trigger: &Notification, scope: &RunScope, outcome: &Result<Diagnosis, Failure>, now: DateTime<Utc>, links: Option<&GraphLinks>) -> String {
    // A notification may carry thousands of alerts: their names are listed up to a point.
    let names = plain(&cut_names(&trigger.alert_names()));
    let on = scope_text(&scope.selector);
    match outcome {
        Ok(d) => {
            // Chart links as explain --format slack has them (`--links`).
            let opts = RenderOptions { now: Some(now), links: links.cloned(), ..RenderOptions::default() };
            let report = render::render(&d.report, render::Format::Slack, &opts);
            format!(":rotating_light: *{names}* is firing for {on}. vllm-diag's diagnosis:\n\n{report}")
        }
        Err(e) => format!(
            ":warning: *{names}* is firing for {on}, but vllm-diag could not diagnose it (exit code {}): {}",
            e.exit_code(),
            plain(&redact_text(&e.to_string()))
        ),
    }
}

/// At most about [`NAMES_SHOWN`] characters of the alert names (`A, B, C`), cut at a name, saying
/// how many more there are.
fn cut_names(names: &str) -> String {
    if names.chars().count() <= NAMES_SHOWN {
        return names.to_string();
    }
    let all: Vec<&str> = names.split(", ").collect();
    let mut shown: Vec<&str> = Vec::new();
    let mut len = 0;
    for name in &all {
        len += name.chars().count() + 2;
        if len > NAMES_SHOWN {
            break;
        }
        shown.push(name);
    }
    let first = match shown.is_empty() {
        true => format!("{}…", all[0].chars().take(NAMES_SHOWN).collect::<String>()),
        false => shown.join(", "),
    };
    let more = all.len() - shown.len().max(1);
    if more == 0 {
        first
    } else {
        format!("{first} and {more} more")
    }
}

/// How much of the alert names a Slack message lists.
const NAMES_SHOWN: usize = 200;

/// The short follow-up for a group that resolved, for Slack and the webhook's `run.message`.
pub fn resolved_text(trigger: &Notification) -> String {
    let names = plain(&trigger.alert_names());
    let since = trigger.alerts.iter().map(|a| a.starts_at).min();
    let until = trigger.alerts.iter().filter_map(|a| a.ends_at).filter(|t| t.timestamp() > 0).max();
    let time = |t: DateTime<Utc>| t.format("%Y-%m-%d %H:%M UTC").to_string();
    let mut text = format!(":white_check_mark: Resolved: *{names}*");
    let labels: Vec<String> = trigger.group_labels.iter().filter(|(k, _)| k.as_str() != "alertname").map(|(k, v)| format!("{k}={v}")).collect();
    if !labels.is_empty() {
        text.push_str(&format!(" for {}", code(&labels.join(", "))));
    }
    match (since, until) {
        (Some(s), Some(u)) => text.push_str(&format!(" (firing from {} to {}).", time(s), time(u))),
        (Some(s), None) => text.push_str(&format!(" (firing since {}).", time(s))),
        _ => text.push('.'),
    }
    text
}

/// Where deliveries go.
#[derive(Debug, Clone)]
pub struct Target {
    /// `webhook` or `slack` (the `target` label of the delivery counter).
    pub name: &'static str,
    pub url: Secret,
    /// How logs name it, without its secrets.
    pub shown: String,
}

impl Target {
    /// A generic webhook: shown with its credentials masked.
    pub fn webhook(url: &str) -> Target {
        Target { name: "webhook", url: Secret::new(url), shown: crate::prom::redact_url(url) }
    }

    /// A Slack incoming webhook, whose path is the secret: shown as its host only.
    pub fn slack(url: &str) -> Target {
        let shown = match url::Url::parse(url) {
            Ok(u) => format!("slack ({}://{}/***)", u.scheme(), u.host_str().unwrap_or("?")),
            Err(_) => "slack".to_string(),
        };
        Target { name: "slack", url: Secret::new(url), shown }
    }
}

/// How often, and how far apart, a delivery is tried.
#[derive(Debug, Clone, Copy)]
pub struct Retry {
    pub tries: u32,
    /// The wait before the second try; doubled before each further one.
    pub backoff: Duration,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry { tries: 3, backoff: Duration::from_millis(500) }
    }
}

/// The longest a delivery waits when a receiver's 429 or 5xx says `Retry-After` (the wait holds a
/// worker).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// POST `body` as JSON to `target`, trying again on a connection error, a 429 or a 5xx (after
/// the receiver's `Retry-After` when it gives one, up to [`MAX_RETRY_AFTER`]). Returns
/// the tries it took, or why it failed (never the URL's secrets).
pub async fn post(client: &reqwest::Client, target: &Target, body: &Value, retry: Retry) -> Result<u32, String> {
    let mut wait = retry.backoff;
    let mut last = String::new();
    let mut tries = 0;
    let bytes = serde_json::to_vec(body).map_err(|e| format!("{}: cannot encode the body: {e}", target.shown))?;
    // What the receiver asked for with Retry-After, up to MAX_RETRY_AFTER.
    let mut asked: Option<Duration> = None;
    for attempt in 1..=retry.tries.max(1) {
        tries = attempt;
        if attempt > 1 {
            tokio::time::sleep(asked.take().map_or(wait, |a| a.max(wait))).await;
            wait = wait.saturating_mul(2);
        }
        match client.post(target.url.expose()).header(reqwest::header::CONTENT_TYPE, "application/json").body(bytes.clone()).send().await {
            Ok(r) if r.status().is_success() => return Ok(attempt),
            Ok(r) => {
                let status = r.status();
                last = format!("HTTP {status}");
                asked = r
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| crate::source::prometheus::parse_retry_after(v, Utc::now()))
                    .map(|d| d.min(MAX_RETRY_AFTER));
                if !(status.is_server_error() || status.as_u16() == 429) {
                    break;
                }
            }
            Err(e) => last = redact_text(&error_chain(&e.without_url())),
        }
    }
    Err(format!("{}: {last} ({tries} {})", target.shown, if tries == 1 { "try" } else { "tries" }))
}

/// An error and its causes, `a: b: c` (reqwest's own message alone says only "error sending request").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    /// A receiver that answers 429 with `Retry-After: 2`, then 200 (a mock: the status sequence is
    /// the point). The delivery waits what it was asked, not its own 0.5 s.
    #[tokio::test]
    async fn a_receivers_retry_after_is_honoured() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for (i, stream) in listener.incoming().enumerate() {
                let Ok(mut s) = stream else { return };
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let status = if i == 0 { "429 Too Many Requests\r\nRetry-After: 2" } else { "200 OK" };
                let _ = write!(s, "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            }
        });
        let started = std::time::Instant::now();
        let tries = super::post(&reqwest::Client::new(), &super::Target::webhook(&url), &serde_json::json!({}), super::Retry::default()).await;
        assert_eq!(tries, Ok(2));
        // A lower bound only: waiting is what is checked, not how fast the machine is.
        assert!(started.elapsed() >= std::time::Duration::from_secs(2), "{:?}", started.elapsed());
    }

    #[test]
    fn a_notification_of_many_alerts_lists_their_names_up_to_a_point() {
        assert_eq!(super::cut_names("A, B"), "A, B");
        let many = (0..500).map(|i| format!("Alert{i:03}")).collect::<Vec<_>>().join(", ");
        let cut = super::cut_names(&many);
        assert!(cut.chars().count() < super::NAMES_SHOWN + 20 && cut.starts_with("Alert000, Alert001") && cut.ends_with(" more"), "{cut}");
        let shown = cut.matches("Alert").count();
        assert!(cut.ends_with(&format!(" and {} more", 500 - shown)), "{cut}");
        assert_eq!(super::cut_names(&"x".repeat(300)).chars().count(), super::NAMES_SHOWN + 1);
    }
    use super::*;

    fn notification() -> Notification {
        let body = r#"{"version":"4","groupKey":"{}:{alertname=\"KvCachePressure\"}","status":"firing","receiver":"r",
            "groupLabels":{"alertname":"KvCachePressure","model_name":"llama"},
            "alerts":[{"status":"firing","labels":{"alertname":"KvCachePressure","model_name":"llama"},
                       "startsAt":"2026-01-15T09:00:00Z","endsAt":"0001-01-01T00:00:00Z"},
                      {"status":"resolved","labels":{"alertname":"KvCachePressure","model_name":"llama"},
                       "startsAt":"2026-01-15T08:00:00Z","endsAt":"2026-01-15T08:30:00Z"}]}"#;
        Notification::parse(body.as_bytes()).unwrap()
    }

    fn scope() -> RunScope {
        RunScope { selector: Selector::parse(r#"model_name="llama""#).unwrap(), window: Duration::from_secs(1800), end: Utc::now() }
    }

    #[test]
    fn a_failed_run_says_so_with_its_exit_code_and_no_secret() {
        let outcome = Err(Failure::Source("cannot reach http://u:hunter2@prom:9090: connection refused".into()));
        let v = envelope(&notification(), &scope(), &outcome);
        assert_eq!(v["run"]["status"], "failed");
        assert_eq!(v["run"]["exit_code"], 3);
        assert_eq!(v["schema_version"], SCHEMA_VERSION);
        assert_eq!(v["run"]["selector"], r#"model_name="llama""#);
        assert!(!v.to_string().contains("hunter2"), "{v}");
        assert_eq!(v["trigger"]["alerts"].as_array().map(Vec::len), Some(1), "only the firing alert triggers");
        assert_eq!(v["trigger"]["groupKey"], "{}:{alertname=\"KvCachePressure\"}");
        let slack = slack_text(&notification(), &scope(), &outcome, Utc::now(), None);
        assert!(slack.contains("could not diagnose") && !slack.contains("hunter2"), "{slack}");
    }

    #[test]
    fn the_resolved_follow_up_names_the_alert_and_its_times() {
        let mut n = notification();
        n.status = "resolved".into();
        for a in &mut n.alerts {
            a.status = "resolved".into();
            a.ends_at = Some(chrono::DateTime::parse_from_rfc3339("2026-01-15T09:40:00Z").unwrap().with_timezone(&Utc));
        }
        let text = resolved_text(&n);
        assert_eq!(text, ":white_check_mark: Resolved: *KvCachePressure* for `model_name=llama` (firing from 2026-01-15 08:00 UTC to 2026-01-15 09:40 UTC).");
        let v = resolved_envelope(&n, &text);
        assert_eq!((v["run"]["kind"].as_str(), v["trigger"]["status"].as_str()), (Some("resolved"), Some("resolved")));
    }

    #[test]
    fn a_slack_target_is_shown_without_its_path() {
        let t = Target::slack("https://hooks.slack.com/services/T000/B000/SECRETSECRET");
        assert_eq!(t.shown, "slack (https://hooks.slack.com/***)");
        let w = Target::webhook("https://user:pw@example.com/hook?token=abc");
        assert!(!w.shown.contains("pw") && !w.shown.contains("abc"), "{}", w.shown);
    }
}
