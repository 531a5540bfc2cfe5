//! The change events' reads: the first round's probes over each span (processes started, counter
//! resets, targets down, targets that came or went, configuration series, Deployment generations,
//! images, XID errors) and the second round's for the targets that changed. The events module
//! decides what to ask and when; each function here is one probe's query, from the series it reads
//! (a selector already applied) and its ranges.

use std::time::Duration;

use super::super::promql_duration;

/// The labels a target is told by in the presence probes.
const TARGETS: &str = "instance, job";

/// Processes whose start time (`start`: `process_start_time_seconds` under a selector) is within
/// the last `within` at each step.
pub fn started_within(start: &str, within: Duration) -> String {
    format!("{start} > (time() - {})", within.as_secs())
}

/// The counter `counter` (a selector) reset within `range`, per `keep` labels.
pub fn counter_reset(keep: &str, counter: &str, range: Duration) -> String {
    format!("max by ({keep}) (resets({counter}[{}])) > 0", promql_duration(range))
}

/// Targets (`up` under a selector) down at some sample of each `step`.
pub fn target_down(up: &str, step: Duration) -> String {
    format!("min_over_time({up}[{}]) == 0", promql_duration(step))
}

/// Targets seen over the span (`len` long, and `presence` before it) but missing at its start or
/// its end, in one evaluation at the span's end.
pub fn presence_changed(up: &str, len: Duration, presence: Duration) -> String {
    let (whole, p, at_start) = (promql_duration(presence + len), promql_duration(presence), format!("offset {}s", len.as_secs()));
    format!(
        "group by ({TARGETS}) (count_over_time({up}[{whole}])) unless (group by ({TARGETS}) (count_over_time({up}[{p}] {at_start})) and group by ({TARGETS}) (count_over_time({up}[{p}])))"
    )
}

/// Configuration series (`info` under a selector) present in the span (`len` long) that its start
/// did not have, per target.
pub fn config_changed(info: &str, len: Duration, presence: Duration) -> String {
    let (len, p) = (len.as_secs(), promql_duration(presence));
    format!("group by ({TARGETS}) (count_over_time({info}[{len}s]) unless count_over_time({info}[{p}] offset {len}s))")
}

/// Deployments whose generation (`generation`: `kube_deployment_metadata_generation` under a
/// selector) grew since the step before.
pub fn generation_bumped(generation: &str, step: Duration) -> String {
    let at = |offset: &str| format!("max by (namespace, deployment) ({generation}{offset})");
    format!("{} > {}", at(""), at(&format!(" offset {}", promql_duration(step))))
}

fn images_at(info: &str, offset: &str) -> String {
    format!("count by (namespace, deployment, image) (label_replace({info}{offset}, \"deployment\", \"$1\", \"pod\", \"(.+)-[a-z0-9]+-[a-z0-9]+\"))")
}

/// Each Deployment's container images (`info`: `kube_pod_container_info` under a selector), the
/// Deployment named from its pods' names.
pub fn images(info: &str) -> String {
    images_at(info, "")
}

/// Images of a Deployment that it did not run a step before.
pub fn image_appeared(info: &str, step: Duration) -> String {
    format!("{} unless {}", images_at(info, ""), images_at(info, &format!(" offset {}", promql_duration(step))))
}

/// GPUs whose last XID error (`xid` under a selector) is set and changed since the step before.
pub fn xid_changed(xid: &str, step: Duration) -> String {
    format!("{xid} != 0 and ({xid} != {xid} offset {})", promql_duration(step))
}

/// The labels `keep` of every series of the `anchors` (each a selector, of the gauge every replica
/// exports, narrowed to the targets or pods that changed) seen over `range`: which replicas and
/// models those targets are.
pub fn replica_map(keep: &str, anchors: &[String], range: Duration) -> String {
    let parts: Vec<String> = anchors.iter().map(|a| format!("last_over_time({a}[{}])", promql_duration(range))).collect();
    format!("group by ({keep}) ({})", super::either(&parts))
}

/// How many replicas (`replica_label` values) each `by` group had over `range`, from the gauge
/// every replica exports (`anchor` under a selector).
pub fn replica_counts(by: &str, replica_label: &str, anchor: &str, range: Duration) -> String {
    format!("count by ({by}) (group by ({by}, {replica_label}) (last_over_time({anchor}[{}])))", promql_duration(range))
}

/// Targets (`up` narrowed to those that came or went) present at a step and not the step before.
pub fn appeared(up: &str, presence: Duration, step: Duration) -> String {
    let (p, s) = (promql_duration(presence), promql_duration(step));
    format!("count_over_time({up}[{p}]) unless count_over_time({up}[{p}] offset {s})")
}

/// Targets present the step before and not at a step.
pub fn vanished(up: &str, presence: Duration, step: Duration) -> String {
    let (p, s) = (promql_duration(presence), promql_duration(step));
    format!("count_over_time({up}[{p}] offset {s}) unless count_over_time({up}[{p}])")
}

/// Configuration series (`info` narrowed to the targets that changed) new at a step.
pub fn config_appeared(info: &str, step: Duration) -> String {
    format!("{info} unless {info} offset {}", promql_duration(step))
}

/// Each replica's mean (`sum` over `count`, each under a selector) step by step, rates over
/// `range`, per `keep` labels (the grouping labels and the replica label), for the `by` groups
/// (models) where one of the replicas `started` (the count series narrowed to them) was seen
/// within `present`.
pub fn replica_mean_where_started(keep: &str, by: &str, sum: &str, count: &str, started: &str, range: Duration, present: Duration) -> String {
    let r = promql_duration(range);
    let mean = format!("sum by ({keep}) (rate({sum}[{r}])) / sum by ({keep}) (rate({count}[{r}]))");
    let models = format!("group by ({by}) (last_over_time({started}[{}]))", promql_duration(present));
    format!("({mean}) and on ({by}) {models}")
}
