//! Prometheus concepts in one place: label names, matchers and selectors, string escaping.
//!
//! Everything else that speaks Prometheus (queries in `signals`, the HTTP client in `source`, the
//! local evaluator) takes these from here rather than spelling them again.

pub mod selector;

pub use selector::{escape_label_value, escape_regex_literal, MatchOp, Matcher, Selector, SelectorError};

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
