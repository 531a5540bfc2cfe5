//! The binding stage's reads (what limits each model): per replica, step by step over the window,
//! the engine's gauges reduced over each step and its counters' rates. Each read is a
//! [`BindingRead`]: it knows the metric families it reads (newest spelling first) and its PromQL.

use std::collections::BTreeSet;

use crate::prom::Selector;
use crate::source::Fold;

/// One of the binding stage's reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingRead {
    /// Requests running: the step's highest, summed over the group's series.
    Running,
    /// Requests waiting: the step's mean, summed.
    Waiting,
    /// KV-cache usage: the step's highest, the highest of the group's series.
    KvUsage,
    /// Generated tokens per second.
    Generation,
    /// Preemptions per second.
    Preemptions,
    /// Requests waiting, by why (`reason`): the step's mean, summed.
    WaitingByReason,
    /// Tokens per second through the engine's steps (the iteration-token histogram's sum).
    IterationTokens,
    /// Engine steps per second (the iteration-token histogram's count).
    IterationSteps,
}

/// How a read reduces its series.
enum Shape {
    /// `ACROSS by (BY[, EXTRA]) (OVER_over_time(S[STEP]))`.
    Gauge { across: &'static str, over: &'static str, extra: Option<&'static str> },
    /// `sum by (BY) (rate(S[COUNTER_RANGE]))`.
    Rate,
}

impl BindingRead {
    /// The metric names the read takes, the first present in the data used.
    pub fn metrics(self) -> &'static [&'static str] {
        match self {
            BindingRead::Running => &["vllm:num_requests_running"],
            BindingRead::Waiting => &["vllm:num_requests_waiting"],
            BindingRead::KvUsage => &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
            BindingRead::Generation => &["vllm:generation_tokens_total"],
            BindingRead::Preemptions => &["vllm:num_preemptions_total"],
            BindingRead::WaitingByReason => &["vllm:num_requests_waiting_by_reason"],
            BindingRead::IterationTokens => &["vllm:iteration_tokens_total_sum"],
            BindingRead::IterationSteps => &["vllm:iteration_tokens_total_count"],
        }
    }

    fn shape(self) -> Shape {
        let gauge = |across, over, extra| Shape::Gauge { across, over, extra };
        match self {
            BindingRead::Running => gauge("sum", "max", None),
            BindingRead::Waiting => gauge("sum", "avg", None),
            BindingRead::KvUsage => gauge("max", "max", None),
            BindingRead::WaitingByReason => gauge("sum", "avg", Some("reason")),
            BindingRead::Generation | BindingRead::Preemptions | BindingRead::IterationTokens | BindingRead::IterationSteps => Shape::Rate,
        }
    }

    /// The read's query over the metric `names` present, grouped by `by` (the grouping labels and
    /// the replica label), at `step` seconds, counters' rates over `counter_range` seconds. `None`
    /// when none of its metrics is present.
    pub fn query(self, selector: &Selector, names: &BTreeSet<String>, by: &[String], step: u64, counter_range: u64) -> Option<String> {
        let alternatives: Vec<String> = self.metrics().iter().map(|s| s.to_string()).collect();
        let metric = super::super::pick(&alternatives, names)?;
        let series = selector.series(metric, &[]);
        let by = by.join(", ");
        Some(match self.shape() {
            Shape::Gauge { across, over, extra: None } => format!("{across} by ({by}) ({over}_over_time({series}[{step}s]))"),
            Shape::Gauge { across, over, extra: Some(extra) } => format!("{across} by ({by}, {extra}) ({over}_over_time({series}[{step}s]))"),
            Shape::Rate => format!("sum by ({by}) (rate({series}[{counter_range}s]))"),
        })
    }

    /// [`BindingRead::query`] without its reduction across series: each series reduced over the
    /// step (or its rate), with the labels the query groups by and how it reduces them (`sum by`,
    /// `max by`), for vllm-diag to reduce as it reads the answer. Grouping thousands of series each
    /// into a group of its own costs the server more than reading them.
    pub fn each(self, selector: &Selector, names: &BTreeSet<String>, by: &[String], step: u64, counter_range: u64) -> Option<(String, Vec<String>, Fold)> {
        let alternatives: Vec<String> = self.metrics().iter().map(|s| s.to_string()).collect();
        let metric = super::super::pick(&alternatives, names)?;
        let series = selector.series(metric, &[]);
        let mut by = by.to_vec();
        Some(match self.shape() {
            Shape::Gauge { across, over, extra } => {
                by.extend(extra.map(String::from));
                (format!("{over}_over_time({series}[{step}s])"), by, if across == "max" { Fold::Max } else { Fold::Sum })
            }
            Shape::Rate => (format!("rate({series}[{counter_range}s])"), by, Fold::Sum),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_read_is_its_reduction_over_the_step_by_replica() {
        let names: BTreeSet<String> =
            ["vllm:num_requests_running", "vllm:gpu_cache_usage_perc", "vllm:num_requests_waiting_by_reason"].map(String::from).into();
        let by = ["model_name".to_string(), "instance".to_string()];
        let q = |r: BindingRead| r.query(&Selector::default(), &names, &by, 60, 120);
        assert_eq!(q(BindingRead::Running).unwrap(), "sum by (model_name, instance) (max_over_time(vllm:num_requests_running{server=\"\"}[60s]))");
        assert_eq!(q(BindingRead::KvUsage).unwrap(), "max by (model_name, instance) (max_over_time(vllm:gpu_cache_usage_perc[60s]))");
        assert_eq!(q(BindingRead::WaitingByReason).unwrap(), "sum by (model_name, instance, reason) (avg_over_time(vllm:num_requests_waiting_by_reason[60s]))");
        assert_eq!(q(BindingRead::Waiting), None, "no waiting gauge in the data");
    }

    #[test]
    fn each_read_unaggregated_says_how_to_reduce_it_as_its_query_does() {
        let names: BTreeSet<String> =
            ["vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:num_requests_waiting_by_reason", "vllm:generation_tokens_total"]
                .map(String::from)
                .into();
        let by = ["model_name".to_string(), "instance".to_string()];
        let each = |r: BindingRead| r.each(&Selector::default(), &names, &by, 60, 120);
        let labels = |extra: &[&str]| by.iter().cloned().chain(extra.iter().map(|s| s.to_string())).collect::<Vec<_>>();
        assert_eq!(each(BindingRead::Running), Some(("max_over_time(vllm:num_requests_running{server=\"\"}[60s])".into(), labels(&[]), Fold::Sum)));
        assert_eq!(each(BindingRead::KvUsage), Some(("max_over_time(vllm:kv_cache_usage_perc[60s])".into(), labels(&[]), Fold::Max)));
        assert_eq!(
            each(BindingRead::WaitingByReason),
            Some(("avg_over_time(vllm:num_requests_waiting_by_reason[60s])".into(), labels(&["reason"]), Fold::Sum))
        );
        assert_eq!(each(BindingRead::Generation), Some(("rate(vllm:generation_tokens_total[120s])".into(), labels(&[]), Fold::Sum)));
        assert_eq!(each(BindingRead::Waiting), None, "no waiting gauge in the data");
    }
}
