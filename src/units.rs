//! Numbers for people: quantities with units, and values formatted in their units.

/// The longest duration any flag or setting takes (a window, a timeout, an interval): 100 years of
/// 365.25 days. Windows must start after 1970 anyway, and Prometheus refuses a timeout or a range
/// past about 292 years; a value beyond this is a typo, refused where it is given.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(100 * 36_525 * 864);

/// A duration as people type it for a window, a timeout or an interval (`30m`, `2h`, `1h30m`,
/// `90s`): longer than zero, at most [`MAX_DURATION`]. The error says what is wrong, for the caller
/// to put after the flag or the file's line. Months (`M`) are refused: `30M` is 30 months in this
/// syntax, and nobody who types it means that (PromQL has no months either).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err("a duration cannot be negative (write e.g. 30m, 2h, 90s)".into());
    }
    if t.contains('M') {
        return Err("M means months here; write m for minutes (30m), or days (90d)".into());
    }
    let d = humantime::parse_duration(t).map_err(|e| format!("{e} (write e.g. 30m, 2h, 90s)"))?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    if d > MAX_DURATION {
        return Err("must be at most 100 years".into());
    }
    Ok(d)
}

/// A point in time as `--at` and `--since` take one: RFC 3339 (`2026-01-15T09:30:00Z`, an offset
/// instead of `Z`), or Unix seconds as Prometheus' API takes them (`1768469400`, `1768469400.5`).
/// The error says what is wrong and how to write it: a time without a time zone is refused rather
/// than guessed (UTC or the machine's zone?).
pub fn parse_time(text: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
    let t = text.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Ok(d.with_timezone(&Utc));
    }
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        let secs: f64 = t.parse().map_err(|_| format!("{t:?} is not a number of seconds"))?;
        // Milliseconds (13 digits) are a common slip: they would land in the year 50,000.
        if secs >= 1e11 {
            return Err(format!("{t:?} is too large for Unix seconds (milliseconds? drop the last three digits)"));
        }
        return DateTime::from_timestamp_millis((secs * 1000.0).round() as i64).ok_or_else(|| format!("{t:?} is out of range"));
    }
    let naive =
        ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"].iter().find_map(|f| NaiveDateTime::parse_from_str(t, f).ok());
    if let Some(n) = naive {
        return Err(format!("{t:?} has no time zone: add Z for UTC ({}Z) or an offset such as +01:00", n.format("%Y-%m-%dT%H:%M:%S")));
    }
    if NaiveDate::parse_from_str(t, "%Y-%m-%d").is_ok() {
        return Err(format!("{t:?} is a date without a time: write {t}T00:00:00Z for its start in UTC"));
    }
    if ["%H:%M:%S", "%H:%M"].iter().any(|f| NaiveTime::parse_from_str(t, f).is_ok()) {
        return Err(format!("{t:?} is a time of day without a date: write the date too, e.g. 2026-01-15T{t}Z"));
    }
    Err(format!("{t:?} is not a time: write RFC 3339 (2026-01-15T09:30:00Z) or Unix seconds"))
}

/// Scale a number written with a unit suffix to the base unit: `ms`, `s`, `m`, `h` to seconds, `%` to
/// a ratio, no suffix as it is. `None` for any other suffix.
pub fn scale_quantity(value: f64, unit: &str) -> Option<f64> {
    match unit {
        "" | "s" => Some(value),
        "ms" => Some(value / 1000.0),
        "m" => Some(value * 60.0),
        "h" => Some(value * 3600.0),
        "%" => Some(value / 100.0),
        _ => None,
    }
}

/// Parse a quantity as rules and signals write one: a number with an optional unit (`500ms`, `3s`,
/// `90%`, `0.9`), in its base unit.
pub fn parse_quantity(src: &str) -> Result<f64, String> {
    let t = src.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E' || c == '%').unwrap_or(t.len());
    // An exponent's `e` belongs to the number only when digits (or a sign) follow it.
    let (num, unit) = t.split_at(split);
    let bad = || format!("{src:?} is not a quantity (write e.g. 3s, 500ms, 90% or 0.9)");
    if num.is_empty() || !num.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let value: f64 = num.parse().map_err(|_| bad())?;
    scale_quantity(value, unit).ok_or_else(bad)
}

/// Why a quantity written as `text` (`"90%"`, `"3s"`, `0.9`) cannot be compared with values in
/// `unit` (a signal's unit), if it cannot: a duration only with seconds, a percentage only with a
/// ratio (a share between 0 and 1). A plain number fits any unit. `None` when it fits.
pub fn unit_mismatch(text: &str, unit: &str) -> Option<String> {
    let t = text.trim();
    let suffix = t.trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | '+' | '-' | 'e' | 'E'));
    let written = match suffix {
        "%" => "a percentage",
        "s" | "ms" | "m" | "h" => "a duration",
        _ => return None,
    };
    let fits = match suffix {
        "%" => matches!(unit, "ratio" | "ratio_per_hour"),
        _ => unit == "seconds",
    };
    if fits {
        return None;
    }
    let instead = match unit {
        "seconds" => "a duration (\"900ms\", \"3s\") or a plain number of seconds".to_string(),
        "ratio" | "ratio_per_hour" => "a percentage (\"90%\") or a fraction (0.9)".to_string(),
        "percent" => "a plain number of percent (90, not \"90%\")".to_string(),
        other => format!("a plain number (in {})", other.replace('_', " ")),
    };
    Some(format!("{t:?} is {written}, but it is compared with values in {}: write {instead}", unit.replace('_', " ")))
}

/// Why a threshold's value cannot be compared with values in `unit`: a share above 100% or below
/// 0%, a negative duration, count or factor. The message names the valid range. `None` when it
/// fits, and for units whose range is not known here (degrees, a unit a rule file made up).
pub fn out_of_range(value: f64, text: &str, unit: &str) -> Option<String> {
    let t = text.trim();
    let (fits, range) = match unit {
        "ratio" => ((0.0..=1.0).contains(&value), "a share from 0% to 100% (0 to 1)"),
        "percent" => ((0.0..=100.0).contains(&value), "a number of percent from 0 to 100"),
        "seconds" => (value >= 0.0, "a duration of 0s or more"),
        "ratio_per_hour"
        | "factor"
        | "count"
        | "requests"
        | "bytes"
        | "tokens"
        | "watts"
        | "megahertz"
        | "per_second"
        | "requests_per_second"
        | "tokens_per_second"
        | "bytes_per_second" => (value >= 0.0, "a value of 0 or more"),
        _ => return None,
    };
    (!fits).then(|| format!("{t:?} is out of range: give {range}"))
}

/// A signal's unit in words, for people: `per second`, `a share (shown as %)`, `tokens per
/// second`. Unknown units have their underscores read as spaces.
pub fn unit_words(unit: &str) -> String {
    match unit {
        "ratio" => "a share, shown as %".to_string(),
        "ratio_per_hour" => "a share per hour, shown as %/h".to_string(),
        "factor" => "a factor, shown as Nx".to_string(),
        "percent" => "percent".to_string(),
        "count" => "a count".to_string(),
        "celsius" => "degrees Celsius".to_string(),
        "" => "no unit".to_string(),
        other => other.replace('_', " "),
    }
}

/// Format a value in its unit with a sensible precision: `1.42 s`, `850 ms`, `97.3%`, `1,204 tok/s`.
pub fn format_value(v: f64, unit: &str) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "+Inf".to_string() } else { "-Inf".to_string() };
    }
    match unit {
        "seconds" => format_seconds(v),
        "ratio" => format!("{}%", sig(v * 100.0)),
        "per_second" => format!("{}/s", sig(v)),
        "tokens_per_second" => format!("{} tok/s", sig(v)),
        "requests_per_second" => format!("{} req/s", sig(v)),
        "tokens" => format!("{} tok", sig(v)),
        "requests" => format!("{} req", sig(v)),
        "factor" => format!("{}x", sig(v)),
        "ratio_per_hour" => format!("{}{}%/h", if v > 0.0 { "+" } else { "" }, sig(v * 100.0)),
        "megahertz" => format!("{} MHz", sig(v)),
        "celsius" => format!("{} °C", sig(v)),
        "watts" => format!("{} W", sig(v)),
        "percent" => format!("{}%", sig(v)),
        "bytes" => format_bytes(v),
        "bytes_per_second" => format!("{}/s", format_bytes(v)),
        _ => sig(v),
    }
}

/// Bytes in decimal units (`950 MB`, `2.6 GB`), as `free` and `ps` users read them.
pub fn format_bytes(v: f64) -> String {
    let a = v.abs();
    let (scale, unit) = if a >= 1e12 {
        (1e12, "TB")
    } else if a >= 1e9 {
        (1e9, "GB")
    } else if a >= 1e6 {
        (1e6, "MB")
    } else if a >= 1e3 {
        (1e3, "kB")
    } else {
        (1.0, "B")
    };
    format!("{} {unit}", sig(v / scale))
}

/// Seconds as `ms` below one second, `s` below ten minutes, then minutes.
pub fn format_seconds(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0 s".to_string()
    } else if a < 1.0 {
        format!("{} ms", sig(v * 1000.0))
    } else if a < 600.0 {
        format!("{} s", sig(v))
    } else {
        format!("{} min", sig(v / 60.0))
    }
}

/// Three significant digits, no exponent for ordinary magnitudes, thousands kept plain.
pub fn sig(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let a = v.abs();
    let decimals = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else if a >= 0.001 {
        // keep three significant digits
        (3 - (a.log10().floor() as i32) - 1).clamp(0, 6) as usize
    } else {
        return format!("{v:.2e}");
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A ratio of value to baseline as `2.4x`, or `n/a`.
pub fn format_ratio(value: Option<f64>, baseline: Option<f64>) -> Option<String> {
    match (value, baseline) {
        (Some(v), Some(b)) if b.is_finite() && v.is_finite() && b > 0.0 => Some(format!("{}x", sig(v / b))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn quantities_are_read_in_their_base_unit() {
        assert_eq!(super::parse_quantity("500ms").unwrap(), 0.5);
        assert_eq!(super::parse_quantity("2m").unwrap(), 120.0);
        assert_eq!(super::parse_quantity("90%").unwrap(), 0.9);
        assert_eq!(super::parse_quantity("1e-3").unwrap(), 0.001);
        assert_eq!(super::parse_quantity(" 0.25 ").unwrap(), 0.25);
        for bad in ["2x", "fast", "", "5 s", "1.5em", "-3s"] {
            assert!(super::parse_quantity(bad).is_err(), "{bad:?}");
        }
    }

    use super::*;

    #[test]
    fn formats_values_with_units() {
        assert_eq!(format_value(0.85, "seconds"), "850 ms");
        assert_eq!(format_value(1.4234, "seconds"), "1.42 s");
        assert_eq!(format_value(0.9731, "ratio"), "97.3%");
        assert_eq!(format_value(1204.4, "tokens_per_second"), "1204 tok/s");
        assert_eq!(format_value(0.0123, "seconds"), "12.3 ms");
        assert_eq!(format_value(f64::INFINITY, "seconds"), "+Inf");
    }

    #[test]
    fn ratio_needs_a_positive_baseline() {
        assert_eq!(format_ratio(Some(3.0), Some(1.5)).as_deref(), Some("2x"));
        assert_eq!(format_ratio(Some(3.0), Some(0.0)), None);
        assert_eq!(format_ratio(Some(3.0), None), None);
    }

    #[test]
    fn a_quantity_must_be_written_in_a_unit_its_signal_can_be_compared_with() {
        for (text, unit) in [
            ("90%", "ratio"),
            ("20%", "ratio_per_hour"),
            ("3s", "seconds"),
            ("500ms", "seconds"),
            ("0.9", "seconds"),
            ("90", "percent"),
            ("4", "requests"),
            ("1e-3", "ratio"),
        ] {
            assert_eq!(super::unit_mismatch(text, unit), None, "{text} vs {unit}");
        }
        let e = super::unit_mismatch("90%", "seconds").unwrap();
        assert!(e.contains("\"90%\" is a percentage") && e.contains("a duration (\"900ms\""), "{e}");
        let e = super::unit_mismatch("90%", "percent").unwrap();
        assert!(e.contains("plain number of percent (90"), "{e}");
        let e = super::unit_mismatch("2s", "ratio").unwrap();
        assert!(e.contains("is a duration") && e.contains("a percentage (\"90%\") or a fraction"), "{e}");
        assert!(super::unit_mismatch("5m", "tokens_per_second").unwrap().contains("a plain number (in tokens per second)"));
    }

    #[test]
    fn times_are_rfc3339_or_unix_seconds_and_a_missing_zone_is_named() {
        let at = |s: &str| super::parse_time(s).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
        assert_eq!(at("2026-01-15T09:30:00Z").unwrap(), "2026-01-15T09:30:00Z");
        assert_eq!(at("2026-01-15T10:30:00+01:00").unwrap(), "2026-01-15T09:30:00Z");
        assert_eq!(at("1768469400").unwrap(), "2026-01-15T09:30:00Z");
        assert_eq!(at(" 1768469400.4 ").unwrap(), "2026-01-15T09:30:00Z");
        let e = at("2026-01-15T09:30:00").unwrap_err();
        assert!(e.contains("has no time zone: add Z for UTC (2026-01-15T09:30:00Z)"), "{e}");
        assert!(at("2026-01-15 09:30").unwrap_err().contains("(2026-01-15T09:30:00Z)"));
        assert!(at("2026-01-15").unwrap_err().contains("2026-01-15T00:00:00Z"));
        assert!(at("09:30").unwrap_err().contains("without a date"));
        assert!(at("1768469400000").unwrap_err().contains("milliseconds"));
        assert!(at("yesterday").unwrap_err().contains("not a time"));
    }
}
