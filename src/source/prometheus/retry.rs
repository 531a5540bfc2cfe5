//! When a failed request is repeated: the policy, `Retry-After`, the answers no retry can fix, and the
//! margin the HTTP request gets beyond the server's own query timeout.

use std::time::Duration;

/// When to repeat a request that failed in a way that may pass on a second try.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all, the first one included; 1 turns retries off.
    pub attempts: u32,
    /// Backoff before the first retry; doubled for each further one, with jitter.
    pub base_delay: Duration,
    /// Longest wait between two attempts, `Retry-After` included.
    pub max_delay: Duration,
    /// No retry starts when its wait would end after this much time from the client's creation (the
    /// run's overall deadline): waiting longer cannot change the outcome.
    pub deadline: Option<Duration>,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy { attempts: 3, base_delay: Duration::from_millis(250), max_delay: Duration::from_secs(10), deadline: None }
    }
}

/// `Retry-After` is either whole seconds or an HTTP date.
pub(crate) fn parse_retry_after(v: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = chrono::DateTime::parse_from_rfc2822(v).ok()?;
    let secs = (at.with_timezone(&chrono::Utc) - now).num_milliseconds().max(0);
    Some(Duration::from_millis(secs as u64))
}

/// A Prometheus error envelope that repeating cannot fix: the server's own query timeout or a
/// cancelled query (the query is too heavy, not the server briefly unavailable).
pub(super) fn is_final_api_error(body: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct E {
        #[serde(rename = "errorType")]
        error_type: Option<String>,
    }
    serde_json::from_str::<E>(body).ok().and_then(|e| e.error_type).is_some_and(|t| t == "timeout" || t == "canceled")
}

/// Extra time the HTTP request gets beyond the server-side query timeout.
pub(super) fn timeout_margin(query_timeout: Duration) -> Duration {
    (query_timeout / 10).clamp(Duration::from_millis(250), Duration::from_secs(5))
}
