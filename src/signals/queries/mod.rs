//! The reads explain's stages make beyond the rules' signals, asked by typed request: the binding
//! stage's per-replica steps ([`binding`]), the change events' probes ([`events`]), the hops'
//! per-replica means, what else moved's packed reads, the data's newest sample, and a rule export's
//! per-replica reductions. With `promql.rs` and `kinds/` they are the only place a query is
//! written; the stages say what they want read and get the query back.

use std::time::Duration;

use crate::prom::Selector;

use super::{promql_duration, Reduction};

pub mod binding;
pub mod events;

/// `query` with every series tagged `label="value"` (`label_replace` with an empty source), so
/// several reads can share one query ([`either`]) and be told apart in its answer. `value` is
/// written as it is: the caller escapes what is not a plain identifier.
pub fn tagged(query: &str, label: &str, value: &str) -> String {
    format!("label_replace({query}, \"{label}\", \"{value}\", \"\", \"\")")
}

/// Several reads asked as one query: their union (`a or b or ...`). Each should be [`tagged`], or
/// the union keeps only the first of series with the same labels.
pub fn either<S: AsRef<str>>(parts: &[S]) -> String {
    parts.iter().map(|p| p.as_ref()).collect::<Vec<_>>().join(" or ")
}

/// One `_sum` or `_count` series of a hop histogram (`family` + `suffix`) as a rate over `range`,
/// summed by `by` (the grouping labels and the replica label, comma-separated).
pub fn hop_part_rate(selector: &Selector, family: &str, suffix: &str, by: &str, range: Duration) -> String {
    format!("sum by ({by}) (rate({}[{}]))", selector.series(&format!("{family}{suffix}"), &[]), promql_duration(range))
}

/// The time of the newest sample of `metric` under the selector, over every series.
pub fn newest_sample(selector: &Selector, metric: &str) -> String {
    format!("max(timestamp({}))", selector.series(metric, &[]))
}

/// A per-replica signal's query reduced to its scope as a rule export's alert reads it: the worst
/// replica for an outlier, how many replicas for a count (`by`: the grouping labels,
/// comma-separated). `None` for a reduction the export keeps per replica.
pub fn reduced_per_replica(query: &str, reduction: Reduction, by: &str) -> Option<String> {
    match reduction {
        Reduction::Outlier(_) => Some(format!("max by ({by}) ({query})")),
        Reduction::Count => Some(format!("count by ({by}) ({query})")),
        Reduction::Max => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tagged_reads_share_one_query() {
        let q = either(&[tagged("a", "l", "x"), tagged("b", "l", "y")]);
        assert_eq!(q, r#"label_replace(a, "l", "x", "", "") or label_replace(b, "l", "y", "", "")"#);
    }

    #[test]
    fn a_hop_part_is_its_rate_summed_by_scope_and_replica() {
        let s = Selector::parse(r#"namespace="p""#).unwrap();
        let q = hop_part_rate(&s, "vllm:e2e_request_latency_seconds", "_sum", "model_name, instance", Duration::from_secs(1800));
        assert_eq!(q, r#"sum by (model_name, instance) (rate(vllm:e2e_request_latency_seconds_sum{namespace="p"}[1800s]))"#);
        assert_eq!(newest_sample(&s, "up"), r#"max(timestamp(up{namespace="p"}))"#);
    }
}
