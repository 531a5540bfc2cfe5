//! Prometheus concepts in one place: label names, matchers and selectors, string escaping.
//!
//! Everything else that speaks Prometheus (queries in `signals`, the HTTP client in `source`, the
//! local evaluator) takes these from here rather than spelling them again.

pub mod escape;
pub mod openmetrics;
pub mod redact;
pub mod selector;

pub use escape::{escape_label_value, escape_regex_literal};
pub use redact::{mask_password, redact_text, redact_url, strip_credentials};
pub use selector::{MatchOp, Matcher, Selector, SelectorError};

/// Label set of one series, sorted for deterministic output.
pub type Labels = std::collections::BTreeMap<String, String>;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_values_are_written_as_go_writes_them() {
        assert_eq!(format_go_float(1.0), "1");
        assert_eq!(format_go_float(0.1), "0.1");
        assert_eq!(format_go_float(f64::INFINITY), "+Inf");
        assert_eq!(format_go_float(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_go_float(f64::NAN), "NaN");
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
