//! `vllm-diag check`: where the window of a post-deploy check starts.
//!
//! A check compares the time since a deploy with the same length of time before it, so the only
//! new input is the deploy time. CI systems know it in one of two forms: as a timestamp (from the
//! deploy job) or as "we deployed N minutes ago" (a wait step), so `--since` takes either. A
//! duration counts back from the end of the window (`--at`, now by default), which keeps a check
//! of a past deploy (`--at 2026-01-15T09:30:00Z --since 30m`) meaning what it says.

use chrono::{DateTime, Utc};

use crate::error::Failure;
use crate::report::Event;

/// "rollout at 09:01:15 UTC: Deployment prod/llama generation 4 (model_name=llama)".
pub fn deploy_phrase(e: &Event) -> String {
    let scope = if e.scope.is_empty() { String::new() } else { format!(" ({})", crate::report::scope_text(&e.scope)) };
    format!("{} at {}: {}{scope}", e.kind, e.time.format("%Y-%m-%d %H:%M:%S UTC"), e.detail)
}

/// The shortest window a check accepts: rates and quantiles over less than a minute of scrapes
/// are noise, and a check that passes on noise is worse than one that waits.
pub const MIN_WINDOW_SECS: i64 = 60;

/// The deploy time from `--since` (RFC 3339, or a duration before `end`), checked to leave at
/// least [`MIN_WINDOW_SECS`] before `end`.
pub fn deploy_time(since: &str, end: DateTime<Utc>) -> Result<DateTime<Utc>, Failure> {
    let s = since.trim();
    let deploy = match crate::units::parse_time(s) {
        Ok(t) => t,
        Err(time_err) => match crate::units::parse_duration(s) {
            Ok(d) => {
                let d = chrono::Duration::from_std(d).map_err(|_| Failure::Usage(format!("--since {s}: that is too long ago")))?;
                end.checked_sub_signed(d).ok_or_else(|| Failure::Usage(format!("--since {s}: that is too long ago")))?
            }
            Err(duration_err) => {
                return Err(Failure::Usage(format!(
                    "--since: {time_err}; nor is it a duration ({duration_err}). Write the deploy time (2026-01-15T09:00:00Z) or how long \
                     ago it was (20m, 1h)"
                )))
            }
        },
    };
    deploy_window_ok(deploy, end, s)
}

/// Check that a deploy at `deploy` leaves at least [`MIN_WINDOW_SECS`] before `end`; `s` is what
/// `--since` said.
pub fn deploy_window_ok(deploy: DateTime<Utc>, end: DateTime<Utc>, s: &str) -> Result<DateTime<Utc>, Failure> {
    let end_text = end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    if deploy >= end {
        return Err(Failure::Usage(format!(
            "--since {s}: the deploy is not before the end of the window ({end_text}); give a time before --at (now by default)"
        )));
    }
    if (end - deploy).num_seconds() < MIN_WINDOW_SECS {
        return Err(Failure::Usage(format!(
            "--since {s}: less than {MIN_WINDOW_SECS}s of data since the deploy (the window ends {end_text}), too little to \
             measure rates and quantiles; wait a few minutes after the deploy, then check"
        )));
    }
    Ok(deploy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn end() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 15, 9, 30, 0).unwrap()
    }

    #[test]
    fn a_duration_counts_back_from_the_end_of_the_window() {
        assert_eq!(deploy_time("20m", end()).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 9, 10, 0).unwrap());
        assert_eq!(deploy_time(" 1h ", end()).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 8, 30, 0).unwrap());
    }

    #[test]
    fn a_time_is_taken_as_given_in_any_offset() {
        assert_eq!(deploy_time("2026-01-15T10:00:00+01:00", end()).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 9, 0, 0).unwrap());
    }

    #[test]
    fn a_deploy_at_or_after_the_end_is_refused() {
        let e = deploy_time("2026-01-15T09:45:00Z", end()).unwrap_err().to_string();
        assert!(e.contains("--since") && e.contains("not before"), "{e}");
        assert!(deploy_time("2026-01-15T09:30:00Z", end()).is_err());
    }

    #[test]
    fn less_than_a_minute_of_data_is_refused_with_advice() {
        let e = deploy_time("30s", end()).unwrap_err().to_string();
        assert!(e.contains("wait a few minutes"), "{e}");
        assert!(deploy_time("60s", end()).is_ok());
    }

    #[test]
    fn garbage_is_refused_naming_the_flag_and_both_forms() {
        let e = deploy_time("yesterday-ish", end()).unwrap_err().to_string();
        assert!(e.contains("--since") && e.contains("RFC 3339") && e.contains("20m"), "{e}");
        assert!(deploy_time("100000000000y", end()).is_err());
    }
}
