//! Prometheus concepts in one place: label names, matchers and selectors, string escaping.
//!
//! Everything else that speaks Prometheus (queries in `signals`, the HTTP client in `source`, the
//! local evaluator) takes these from here rather than spelling them again.

pub mod escape;
pub mod redact;
pub mod selector;

pub use escape::{escape_label_value, escape_regex_literal};
pub use redact::{mask_password, redact_text, redact_url, strip_credentials};
pub use selector::{MatchOp, Matcher, Selector, SelectorError};

/// Label set of one series, sorted for deterministic output.
pub type Labels = std::collections::BTreeMap<String, String>;

/// A Prometheus label name: letters, digits and `_`, not starting with a digit.
pub fn is_label_name(l: &str) -> bool {
    !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !l.starts_with(|c: char| c.is_ascii_digit())
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
    }
}
