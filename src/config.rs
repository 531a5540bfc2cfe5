//! Typed options for a run, built once from the command line (and later a config file).

use chrono::{DateTime, Utc};

use crate::cli::ExplainArgs;
use crate::error::Failure;
use crate::prom::{is_label_name, is_replica_label, Selector};
use crate::report::{RunParams, TimeRange};

/// Resolve the window end: `now` or an RFC 3339 time, not in the future.
pub fn parse_at(at: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, Failure> {
    let t = at.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    let parsed = DateTime::parse_from_rfc3339(t)
        .map(|d| d.with_timezone(&Utc))
        .map_err(|e| Failure::Usage(format!("--at {t:?}: {e}. Write an RFC 3339 time such as 2026-01-15T09:30:00Z, or \"now\"")))?;
    // A little clock skew is fine; a window in the future holds no data yet.
    if parsed > now + chrono::Duration::seconds(60) {
        return Err(Failure::Usage(format!(
            "--at {t}: is in the future (now is {}). Give the end of a window that has already happened",
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )));
    }
    Ok(parsed)
}

/// Build the run's parameters from the flags.
pub fn run_params(args: &ExplainArgs, now: DateTime<Utc>) -> Result<(RunParams, Selector), Failure> {
    let window = args.window.unwrap_or(std::time::Duration::from_secs(30 * 60));
    let offset = args.baseline.unwrap_or(window);
    let end = parse_at(args.at.as_deref().unwrap_or("now"), now)?;
    let w = chrono::Duration::from_std(window).map_err(|_| Failure::Usage("--window is too long".into()))?;
    let o = chrono::Duration::from_std(offset).map_err(|_| Failure::Usage("--baseline is too long".into()))?;
    let start = end.checked_sub_signed(w).ok_or_else(|| Failure::Usage("--window reaches before the year 0".into()))?;
    let b_end = end.checked_sub_signed(o).ok_or_else(|| Failure::Usage("--baseline reaches before the year 0".into()))?;
    let b_start = b_end.checked_sub_signed(w).ok_or_else(|| Failure::Usage("--baseline reaches before the year 0".into()))?;
    let selector = Selector::parse(args.selector.as_deref().unwrap_or("")).map_err(|e| Failure::Usage(e.to_string()))?;
    let group_by: Vec<String> = args.group_by.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    if group_by.is_empty() || !group_by.iter().all(|l| is_label_name(l)) {
        return Err(Failure::Usage(format!("--group-by {:?}: give one or more label names separated by commas, e.g. model_name or model_name,namespace", args.group_by)));
    }
    let replica_label = args.replica_label.trim().to_string();
    if !is_replica_label(&replica_label) {
        return Err(Failure::Usage(format!("--replica-label {:?}: give one label name, e.g. instance or pod", args.replica_label)));
    }
    if group_by.contains(&replica_label) {
        return Err(Failure::Usage(format!(
            "--replica-label {replica_label} is also in --group-by: findings would be per replica already, with nothing left to tell replicas apart. Drop it from one of them"
        )));
    }
    Ok((
        RunParams {
            window: TimeRange { start, end },
            baseline: TimeRange { start: b_start, end: b_end },
            selector: selector.to_promql(),
            group_by,
            replica_label,
        },
        selector,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 15, 12, 0, 0).unwrap()
    }

    #[test]
    fn at_accepts_now_and_rfc3339_and_rejects_the_future() {
        assert_eq!(parse_at("now", now()).unwrap(), now());
        assert_eq!(parse_at("2026-01-15T09:30:00Z", now()).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 9, 30, 0).unwrap());
        assert_eq!(parse_at("2026-01-15T10:30:00+01:00", now()).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 9, 30, 0).unwrap());
        let e = parse_at("2027-01-01T00:00:00Z", now()).unwrap_err().to_string();
        assert!(e.contains("future"), "{e}");
        let e = parse_at("yesterday", now()).unwrap_err().to_string();
        assert!(e.contains("--at") && e.contains("RFC 3339"), "{e}");
    }
}
