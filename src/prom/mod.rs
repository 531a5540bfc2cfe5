//! Prometheus concepts in one place, so nothing else spells them again.
//!
//! - Names: [`is_label_name`], [`label_name_len`], [`is_metric_name`], [`metric_name_len`],
//!   [`is_replica_label`]; the label set of a series, [`Labels`].
//! - Matchers: [`selector`] reads `--selector` (and recorded or configured selectors) with
//!   `promql-parser`, keeping error positions, and writes matchers back out as PromQL.
//! - Strings: [`escape`] escapes and unescapes PromQL strings (reading is promql-parser's) and the
//!   exposition formats' label values and HELP text; [`escape_regex_literal`] for `=~` literals.
//! - Numbers: [`format_go_float`] writes a sample value as Prometheus does; [`parse_sample_value`]
//!   reads the API's value strings, [`parse_exposition_value`] the exposition formats' values.
//! - Exposition: [`exposition`] parses the /metrics text formats (Prometheus text and OpenMetrics);
//!   [`openmetrics`] writes timestamped samples (`--save-samples`, the simulator).
//! - Secrets: [`redact`] takes credentials out of URLs and free text before they are shown.
//!
//! The HTTP client (`crate::source`), PromQL written for signals (`crate::signals`) and the local
//! evaluator take these from here; prom itself uses nothing else of the crate.

pub mod escape;
pub mod exposition;
pub mod labels;
pub mod openmetrics;
pub mod redact;
pub mod selector;

pub use escape::{escape_label_value, escape_regex_literal};
pub use redact::{mask_password, redact_text, redact_url, strip_credentials};
pub use selector::{CompiledMatcher, MatchOp, Matcher, Selector, SelectorError};

pub use labels::Labels;

/// A Prometheus label name: letters, digits and `_`, not starting with a digit.
pub fn is_label_name(l: &str) -> bool {
    !l.is_empty() && label_name_len(l) == l.len()
}

/// How many bytes of `s`, from its start, make a label name (0 when `s` does not start with one).
pub fn label_name_len(s: &str) -> usize {
    name_len(s, false)
}

/// A Prometheus metric name: letters, digits, `_` and `:`, not starting with a digit.
pub fn is_metric_name(m: &str) -> bool {
    !m.is_empty() && metric_name_len(m) == m.len()
}

/// How many bytes of `s`, from its start, make a metric name (0 when `s` does not start with one).
pub fn metric_name_len(s: &str) -> usize {
    name_len(s, true)
}

fn name_len(s: &str, colon: bool) -> usize {
    let ok = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || (colon && c == b':');
    match s.bytes().next() {
        Some(first) if ok(first) && !first.is_ascii_digit() => s.bytes().take_while(|&c| ok(c)).count(),
        _ => 0,
    }
}

/// A label a user may name as the replica label: a label name, not one reserved (`__name__`).
pub fn is_replica_label(l: &str) -> bool {
    is_label_name(l) && !l.starts_with("__")
}

/// A sample value as Prometheus writes one in JSON and exposition text: Go's
/// `strconv.FormatFloat(v, 'f', -1, 64)`, with `NaN`, `+Inf` and `-Inf`.
pub fn format_go_float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// A sample value as the HTTP API writes it in a string (`"1.5"`, `"NaN"`, `"+Inf"`), read leniently:
/// surrounding space and any case of `NaN` and `Inf` are accepted.
pub fn parse_sample_value(s: &str) -> Option<f64> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "nan" => Some(f64::NAN),
        "+inf" | "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        _ => t.parse::<f64>().ok(),
    }
}

/// A sample value in the exposition formats, read strictly: decimal or exponent notation, `NaN`,
/// `+Inf`, `-Inf` (and the lower-case and unsigned spellings servers write), nothing else.
pub fn parse_exposition_value(s: &str) -> Option<f64> {
    match s {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => {
            // Rust would also accept "infinity" and friends; the formats do not.
            if !s.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')) {
                return None;
            }
            s.parse().ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prometheus_special_values() {
        assert!(parse_sample_value("NaN").unwrap().is_nan());
        assert_eq!(parse_sample_value("+Inf"), Some(f64::INFINITY));
        assert_eq!(parse_sample_value("-Inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_sample_value("1.5e3"), Some(1500.0));
        assert_eq!(parse_sample_value("bogus"), None);
    }

    #[test]
    fn sample_values_are_written_as_go_writes_them() {
        assert_eq!(format_go_float(1.0), "1");
        assert_eq!(format_go_float(0.1), "0.1");
        assert_eq!(format_go_float(f64::INFINITY), "+Inf");
        assert_eq!(format_go_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_go_float(f64::NAN), "NaN");
    }

    #[test]
    fn written_values_read_back_to_the_same_float() {
        for v in [0.0, -0.0, 0.1, 1e21, 1e-7, 123.456, f64::MAX, 5e-324, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(parse_exposition_value(&format_go_float(v)).map(f64::to_bits), Some(v.to_bits()), "{v}");
            assert_eq!(parse_sample_value(&format_go_float(v)).map(f64::to_bits), Some(v.to_bits()), "{v}");
        }
        assert!(parse_exposition_value("NaN").is_some_and(f64::is_nan));
    }

    #[test]
    fn exposition_values_are_strict_and_api_values_lenient() {
        assert_eq!(parse_sample_value(" +INF "), Some(f64::INFINITY));
        assert_eq!(parse_sample_value("1e3"), Some(1000.0));
        assert_eq!(parse_exposition_value(" 1"), None);
        assert_eq!(parse_exposition_value("infinity"), None);
        assert_eq!(parse_exposition_value("0x10"), None);
        assert_eq!(parse_exposition_value("1.5e-3"), Some(0.0015));
    }

    #[test]
    fn label_names_follow_the_prometheus_grammar() {
        assert!(is_label_name("model_name") && is_label_name("_x") && is_label_name("__name__"));
        assert!(!is_label_name("") && !is_label_name("1a") && !is_label_name("a-b") && !is_label_name("a.b"));
        assert!(is_replica_label("pod") && !is_replica_label("__name__"));
        assert!(!is_label_name("vllm:x") && !is_label_name("é"));
        assert_eq!(label_name_len("model_name=\"x\""), 10);
        assert_eq!(label_name_len("9x"), 0);
    }

    #[test]
    fn metric_names_may_hold_colons() {
        assert!(is_metric_name("vllm:num_requests_running") && is_metric_name(":x") && is_metric_name("_x"));
        assert!(!is_metric_name("") && !is_metric_name("1x") && !is_metric_name("a-b") && !is_metric_name("a{"));
        assert_eq!(metric_name_len("vllm:x{a=\"1\"} 2"), 6);
        assert_eq!(metric_name_len("{a=\"1\"}"), 0);
    }
}
