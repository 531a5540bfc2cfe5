//! Unit tests of the signals: declarations, PromQL, bounds.

use super::*;

fn ctx(sel: &str) -> QueryContext {
    QueryContext {
        selector: Selector::parse(sel).unwrap(),
        group_by: vec!["model_name".into()],
        range: Duration::from_secs(1800),
        thresholds: [("ttft_target".to_string(), 0.5)].into_iter().collect::<std::collections::BTreeMap<_, _>>().into(),
        buckets: Default::default(),
        replica_label: "instance".into(),
    }
}

fn present(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn picks_the_first_alternative_present_in_any_spelling() {
    let alts = vec!["vllm:kv_cache_usage_perc".to_string(), "vllm:gpu_cache_usage_perc".to_string()];
    assert_eq!(pick(&alts, &present(&["vllm:gpu_cache_usage_perc"])).unwrap(), "vllm:gpu_cache_usage_perc");
    assert_eq!(pick(&alts, &present(&["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"])).unwrap(), "vllm:kv_cache_usage_perc");
    assert_eq!(pick(&alts, &present(&["vllm_kv_cache_usage_perc"])).unwrap(), "vllm_kv_cache_usage_perc");
    assert!(pick(&alts, &present(&["vllm:num_requests_running"])).is_none());
}

#[test]
fn counters_may_be_stored_without_total() {
    assert!(spellings("vllm:num_preemptions_total").contains(&"vllm_num_preemptions".to_string()));
}

#[test]
fn quantile_query_aggregates_by_scope_and_keeps_the_selector() {
    let k = SignalKind::Quantile(Quantile { quantile: 0.95, histogram: vec!["vllm:time_to_first_token_seconds".into()], min_observations: 20.0 });
    let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
    let q = build(&k, &r, &ctx(r#"job="vllm""#)).unwrap();
    assert_eq!(q.value, r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1800s])))"#);
    assert_eq!(q.count.unwrap(), r#"sum by (model_name) (increase(vllm:time_to_first_token_seconds_count{job="vllm"}[1800s]))"#);
}

#[test]
fn ratio_of_a_labelled_subset_defaults_to_zero() {
    let k = SignalKind::Ratio(Ratio {
        numerator: CounterRef { counter: vec!["vllm:request_success_total".into()], r#match: r#"finished_reason="abort""#.into() },
        denominator: CounterRef { counter: vec!["vllm:request_success_total".into()], r#match: String::new() },
        per: vec![],
        per_at_least: 0.0,
        attribute_via: vec![],
        join_on: default_join(),
    });
    let r = resolve(&k, &present(&["vllm:request_success_total"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap();
    assert_eq!(
        q.value,
        r#"(sum by (model_name) (rate(vllm:request_success_total{finished_reason="abort"}[1800s])) or sum by (model_name) (rate(vllm:request_success_total[1800s])) * 0) / sum by (model_name) (rate(vllm:request_success_total[1800s]))"#
    );
}

#[test]
fn http_counters_are_attributed_through_the_anchor_gauge() {
    let k = SignalKind::Ratio(Ratio {
        numerator: CounterRef { counter: vec!["http_requests_total".into()], r#match: r#"status="5xx""#.into() },
        denominator: CounterRef { counter: vec!["http_requests_total".into()], r#match: String::new() },
        per: vec![],
        per_at_least: 0.0,
        attribute_via: vec!["vllm:num_requests_running".into()],
        join_on: default_join(),
    });
    let r = resolve(&k, &present(&["http_requests_total", "vllm:num_requests_running"])).unwrap();
    let q = build(&k, &r, &ctx(r#"model_name="m",job="vllm""#)).unwrap();
    // The model matcher applies to the anchor only: http_requests_total has no model_name.
    assert!(q.value.contains(r#"rate(http_requests_total{job="vllm",status="5xx"}[1800s])"#), "{}", q.value);
    assert!(q.value.contains(r#"last_over_time(vllm:num_requests_running{model_name="m",job="vllm",server=""}[1800s])"#));
}

#[test]
fn a_ratio_per_a_gauge_divides_by_its_average_only_where_that_is_high_enough() {
    let k = SignalKind::Ratio(Ratio {
        numerator: CounterRef { counter: vec!["vllm:generation_tokens_total".into()], r#match: String::new() },
        denominator: CounterRef { counter: vec!["vllm:iteration_tokens_total_count".into()], r#match: String::new() },
        per: vec!["vllm:num_requests_running".into()],
        per_at_least: 4.0,
        attribute_via: vec![],
        join_on: default_join(),
    });
    assert!(resolve(&k, &present(&["vllm:generation_tokens_total", "vllm:iteration_tokens_total_count"])).is_err(), "the gauge is required");
    let r = resolve(&k, &present(&["vllm:generation_tokens_total", "vllm:iteration_tokens_total_count", "vllm:num_requests_running"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap();
    assert_eq!(
        q.value,
        "avg by (model_name) (sum by (model_name, instance, engine) (rate(vllm:generation_tokens_total[1800s])) / sum by (model_name, instance, engine) (rate(vllm:iteration_tokens_total_count[1800s])) / (sum by (model_name, instance, engine) (avg_over_time(vllm:num_requests_running{server=\"\"}[1800s])) and (sum by (model_name, instance, engine) (min_over_time(vllm:num_requests_running{server=\"\"}[1800s])) >= 4)))"
    );
    assert!(q.parts.is_none() && q.sums.is_empty(), "read whole");
}

/// Matchers on a grouping label (`model_name`) would hide `up`, `http_requests_total` and DCGM's
/// series, which carry none: discovery looks for those without them, as their queries do.
#[test]
fn discovery_looks_for_other_exporters_without_the_grouping_matchers() {
    let extras = vec!["http_requests_total".to_string(), "up".to_string()];
    let by = vec!["model_name".to_string()];
    let sel = Selector::parse(r#"model_name="m",namespace="prod""#).unwrap();
    assert_eq!(
        discovery_matchers(&sel, &extras, &by),
        vec![r#"{__name__=~"vllm[:_].+",model_name="m",namespace="prod"}"#.to_string(), r#"{__name__=~"http_requests_total|up",namespace="prod"}"#.to_string()]
    );
    // No matcher on a grouping label: one selector, as before (and as older recordings hold it).
    let sel = Selector::parse(r#"namespace="prod""#).unwrap();
    assert_eq!(discovery_matchers(&sel, &extras, &by), vec![discovery_matcher(&sel, &extras)]);
    assert_eq!(discovery_matchers(&Selector::parse(r#"model_name="m""#).unwrap(), &[], &by).len(), 1);
}

#[test]
fn missing_families_are_named() {
    let k = SignalKind::Gauge(Gauge {
        gauge: vec!["vllm:kv_cache_usage_perc".into(), "vllm:gpu_cache_usage_perc".into()],
        over_time: OverTime::Max,
        across: Across::Max,
        r#match: String::new(),
        attribute_via: vec![],
        join_on: default_join(),
        attribute_before: false,
        less: None,
        bits: vec![],
        over: None,
        scale: None,
    });
    let err = resolve(&k, &present(&[])).unwrap_err();
    assert_eq!(err, vec!["vllm:kv_cache_usage_perc / vllm:gpu_cache_usage_perc".to_string()]);
}

#[test]
fn active_share_uses_a_subquery_over_the_window() {
    let k = SignalKind::ActiveShare(ActiveShare { counter: vec!["vllm:num_preemptions_total".into()] });
    let r = resolve(&k, &present(&["vllm:num_preemptions_total"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap();
    assert_eq!(q.value, "avg_over_time((sum by (model_name) (rate(vllm:num_preemptions_total[120s])) > bool 0)[1800s:60s])");
}

#[test]
fn discovery_matches_vllm_names_and_extras_under_the_selector() {
    let m = discovery_matcher(&Selector::parse(r#"job="vllm""#).unwrap(), &["http_requests_total".into()]);
    assert_eq!(m, r#"{__name__=~"vllm[:_].+|http_requests_total",job="vllm"}"#);
}

#[test]
fn slo_burn_reads_the_bucket_at_the_target_and_divides_by_the_budget() {
    let k = SignalKind::SloBurn(SloBurn { histogram: vec!["vllm:time_to_first_token_seconds".into()], target: "$ttft_target".into(), objective: "99%".into() });
    let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap();
    assert_eq!(
        q.value,
        r#"(1 - sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le=~"0\\.5|5e-1"}[1800s])) / sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="+Inf"}[1800s]))) / 0.01"#
    );
}

fn bounds(values: &[&str]) -> Vec<Bound> {
    parse_bounds(&values.iter().map(|v| v.to_string()).collect::<Vec<_>>())
}

fn slo(target: &str) -> SignalKind {
    SignalKind::SloBurn(SloBurn { histogram: vec!["vllm:time_to_first_token_seconds".into()], target: target.into(), objective: "99%".into() })
}

fn ctx_with_buckets(values: &[&str]) -> QueryContext {
    let mut c = ctx("");
    std::sync::Arc::make_mut(&mut c.buckets).insert("vllm:time_to_first_token_seconds_bucket".into(), bounds(values));
    c
}

#[test]
fn bucket_bounds_are_sorted_by_value_with_spellings_merged_and_inf_dropped() {
    let b = bounds(&["0.25", "+Inf", "0.1", "1.0", "1", "junk", "NaN"]);
    let got: Vec<(f64, Vec<String>)> = b.into_iter().map(|b| (b.value, b.written)).collect();
    assert_eq!(got, vec![(0.1, vec!["0.1".into()]), (0.25, vec!["0.25".into()]), (1.0, vec!["1".into(), "1.0".into()])]);
}

#[test]
fn a_target_is_located_exactly_or_between_the_buckets_and_outside_them_is_refused_with_where_to_set_buckets() {
    let b = bounds(&["0.1", "0.25", "0.5", "+Inf"]);
    assert!(matches!(bucket_at(&b, 0.25), Ok(AtTarget::Exact(x)) if x.value == 0.25));
    assert!(matches!(bucket_at(&b, 0.2), Ok(AtTarget::Between(lo, hi)) if lo.value == 0.1 && hi.value == 0.25));
    let below = bucket_at(&b, 0.05).unwrap_err();
    assert!(below.contains("under the histogram's first bucket (100 ms)") && below.contains("--custom-histogram-buckets"), "{below}");
    let above = bucket_at(&b, 2.0).unwrap_err();
    assert!(above.contains("above the histogram's largest finite bucket (500 ms)") && above.contains("--custom-histogram-buckets"), "{above}");
    assert!(bucket_at(&[], 0.2).is_err());
}

#[test]
fn slo_burn_reads_the_bucket_found_in_the_data_as_written() {
    let k = slo("$ttft_target");
    let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
    let c = ctx_with_buckets(&["0.25", "0.5", "+Inf"]);
    assert_eq!(
        build(&k, &r, &c).unwrap().value,
        r#"(1 - sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="0.5"}[1800s])) / sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="+Inf"}[1800s]))) / 0.01"#
    );
    assert_eq!(bucket_note(&k, &r, &c), None);
}

#[test]
fn bounds_come_from_the_label_index_and_those_some_replicas_lack_are_found_in_the_reads() {
    let les = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let b = listed_bounds(&les(&["0.1", "0.25", "0.5", "+Inf"]));
    assert_eq!(b.iter().map(|b| b.value).collect::<Vec<_>>(), vec![0.1, 0.25, 0.5]);
    assert!(listed_bounds(&les(&["0.1"])).is_empty(), "no +Inf: nothing is known");
    assert!(listed_bounds(&[]).is_empty());
    // Two spellings of one bound are one bound, read under both.
    let b = listed_bounds(&les(&["1", "1.0", "+Inf"]));
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].written, vec!["1".to_string(), "1.0".to_string()]);
    let m = bucket_bounds_matcher(&Selector::parse(r#"job="vllm""#).unwrap(), &["a_bucket".into(), "b_bucket".into()]);
    assert_eq!(m, r#"{__name__=~"a_bucket|b_bucket",job="vllm"}"#);
    // Three replicas; r2 has another layout (no 0.25, a 0.3 of its own); "1" and "1.0" agree.
    let rows = [
        ("0.1", "r0"),
        ("0.25", "r0"),
        ("1", "r0"),
        ("+Inf", "r0"),
        ("0.1", "r1"),
        ("0.25", "r1"),
        ("1.0", "r1"),
        ("+Inf", "r1"),
        ("0.1", "r2"),
        ("0.3", "r2"),
        ("1", "r2"),
        ("+Inf", "r2"),
    ];
    assert_eq!(uncovered_bounds(rows.iter().map(|(le, r)| (*le, vec![*r]))), vec![0.25, 0.3]);
    assert!(uncovered_bounds(rows[..8].iter().map(|(le, r)| (*le, vec![*r]))).is_empty());
    // Per replica: a bound written twice by one replica counts once for it, and a replica with no
    // readable bound at all is not a replica lacking every bound.
    let replicas: [&[&str]; 4] = [&["0.1", "1", "1.0", "+Inf"], &["0.1", "1", "+Inf"], &["x", "NaN"], &["0.1", "+Inf"]];
    assert_eq!(uncovered_bounds_per_replica(replicas.iter().map(|r| r.iter().copied())), vec![1.0]);
    assert!(uncovered_bounds_per_replica(replicas[..3].iter().map(|r| r.iter().copied())).is_empty());
    assert!(uncovered_bounds_per_replica(std::iter::empty::<Vec<&str>>()).is_empty());
}

#[test]
fn bucket_reads_rank_heaviest() {
    assert_eq!(weight_rank("sum by (le, model_name, instance) (rate(x_bucket[1800s]))"), 0);
    assert_eq!(weight_rank(r#"rate(x_bucket{namespace="prod"}[1800s])"#), 0, "every bucket, unaggregated");
    assert_eq!(weight_rank(r#"sum by (model_name) (rate(x_bucket{le="0.5"}[300s]))"#), 1);
    assert_eq!(weight_rank("sum by (model_name) (rate(x_total[1800s]))"), 2);
}

#[test]
fn the_fleet_labels_are_read_once_from_the_running_gauge() {
    let q = fleet_labels_query(&Selector::parse(r#"job="vllm""#).unwrap(), &["model_name".into(), "pod".into()], Duration::from_secs(1800));
    assert_eq!(
        q,
        r#"group by (model_name, pod) (last_over_time({__name__=~"vllm:num_requests_running|vllm_num_requests_running",job="vllm",server=""}[1800s]))"#
    );
}

#[test]
fn slo_burn_interpolates_a_target_between_two_buckets_and_says_so() {
    let k = slo("200ms");
    let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
    let c = ctx_with_buckets(&["0.1", "0.25", "0.5", "+Inf"]);
    // 200 ms is two thirds of the way from 100 ms to 250 ms.
    assert_eq!(
        build(&k, &r, &c).unwrap().value,
        r#"(1 - (sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="0.1"}[1800s])) * 0.333333 + sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="0.25"}[1800s])) * 0.666667) / sum by (model_name) (rate(vllm:time_to_first_token_seconds_bucket{le="+Inf"}[1800s]))) / 0.01"#
    );
    let note = bucket_note(&k, &r, &c).unwrap();
    assert!(note.contains("no bucket at the SLO target 200 ms") && note.contains("between its 100 ms and 250 ms buckets"), "{note}");
}

#[test]
fn slo_burn_under_the_first_bucket_or_over_the_last_is_refused() {
    let r = resolve(&slo("50ms"), &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
    let c = ctx_with_buckets(&["0.1", "0.25", "+Inf"]);
    // Any share of the first bucket's observations may lie over 50 ms: halving it is a guess.
    let e = build(&slo("50ms"), &r, &c).unwrap_err();
    assert!(e.contains("vllm:time_to_first_token_seconds: the target 50 ms is under the histogram's first bucket (100 ms)"), "{e}");
    assert!(e.contains("--custom-histogram-buckets"), "{e}");
    let e = build(&slo("1s"), &r, &c).unwrap_err();
    assert!(e.contains("vllm:time_to_first_token_seconds: the target 1 s is above"), "{e}");
}

#[test]
fn outliers_ask_for_one_value_per_replica() {
    let k = SignalKind::Outlier(Outlier {
        histogram: vec!["vllm:inter_token_latency_seconds".into()],
        gauge: vec![],
        quantile: 0.95,
        replica_label: "instance".into(),
        measure: OutlierMeasure::Ratio,
        min_observations: 20,
        ranks: false,
    });
    let r = resolve(&k, &present(&["vllm:inter_token_latency_seconds_bucket"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap();
    assert!(q.value.contains("sum by (le, model_name, instance)"), "{}", q.value);
    assert!(q.value.starts_with("topk by (model_name) (1, "), "{}", q.value);
    assert!(q.value.contains("/ on (model_name) group_left quantile by (model_name) (0.5, "), "{}", q.value);
    let reading = OutlierReading { measure: OutlierMeasure::Ratio, min_observations: 20, range_seconds: 1800, ranks: false };
    assert_eq!(q.per_replica, Some(("instance".to_string(), Reduction::Outlier(reading))));
    // explain fetches the per-replica expression once and reduces it itself.
    let fetch = q.fetch.unwrap();
    assert!(fetch.starts_with("histogram_quantile(0.95, sum by (le, model_name, instance) ("), "{fetch}");
    assert_eq!(q.value.matches(&fetch).count(), 3, "{}", q.value);
}

#[test]
fn gauges_without_the_grouping_label_join_on_the_declared_labels() {
    let k = SignalKind::Gauge(Gauge {
        gauge: vec!["DCGM_FI_DEV_SM_CLOCK".into()],
        over_time: OverTime::Avg,
        across: Across::Min,
        r#match: String::new(),
        attribute_via: vec!["vllm:num_requests_running".into()],
        join_on: vec!["namespace".into(), "pod".into()],
        attribute_before: false,
        less: None,
        bits: vec![],
        over: None,
        scale: None,
    });
    let r = resolve(&k, &present(&["DCGM_FI_DEV_SM_CLOCK", "vllm:num_requests_running"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap();
    assert_eq!(
        q.value,
        "min by (model_name) (avg_over_time(DCGM_FI_DEV_SM_CLOCK[1800s]) * on (namespace, pod) group_left (model_name) group by (namespace, pod, model_name) (last_over_time(vllm:num_requests_running{server=\"\"}[1800s])))"
    );
}

#[test]
fn subquery_ranges_are_read_past_quoted_text() {
    use std::time::Duration;
    assert_eq!(subquery_ranges("avg_over_time((sum(rate(x[120s])) > bool 0)[300s:15s])"), vec![Duration::from_secs(300)]);
    assert_eq!(subquery_ranges("max_over_time(x[1h30m:1m]) + rate(y[5m])"), vec![Duration::from_secs(5400)]);
    assert!(subquery_ranges(r#"rate(x{model_name="a[5m:1m]\"[7m:1m]"}[5m])"#).is_empty());
    assert!(subquery_ranges("rate(x[5m]").is_empty());
}

#[test]
fn a_remainder_is_the_first_histograms_mean_less_the_others_each_from_sum_over_count() {
    let k: SignalKind = toml::from_str(
        r#"kind = "remainder"
histogram = ["vllm:time_to_first_token_seconds"]
minus = [["vllm:request_queue_time_seconds"], ["vllm:request_prefill_time_seconds"]]"#,
    )
    .unwrap();
    let names = ["vllm:time_to_first_token_seconds_sum", "vllm:request_queue_time_seconds_sum", "vllm:request_prefill_time_seconds_sum"];
    let r = resolve(&k, &present(&names)).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap().value;
    let mean = |f: &str| format!("(sum by (model_name) (rate({f}_sum[1800s])) / sum by (model_name) (rate({f}_count[1800s])))");
    assert_eq!(
        q,
        format!("{} - {} - {}", mean("vllm:time_to_first_token_seconds"), mean("vllm:request_queue_time_seconds"), mean("vllm:request_prefill_time_seconds"))
    );
    // Any family missing: the remainder cannot be taken.
    assert!(resolve(&k, &present(&names[..2])).is_err());
}

#[test]
fn a_bitmask_gauge_reads_its_bits_sample_by_sample_through_a_subquery() {
    let gauge = |bits: Vec<u32>, over: Option<String>| {
        SignalKind::Gauge(Gauge {
            gauge: vec!["DCGM_FI_DEV_CLOCKS_EVENT_REASONS".into()],
            over_time: OverTime::Avg,
            across: Across::Max,
            r#match: String::new(),
            attribute_via: vec!["vllm:num_requests_running".into()],
            join_on: vec!["namespace".into(), "pod".into()],
            attribute_before: false,
            less: None,
            bits,
            over,
            scale: None,
        })
    };
    let k = gauge(vec![8, 64], None);
    let r = resolve(&k, &present(&["DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "vllm:num_requests_running"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap();
    assert_eq!(
        q.value,
        "max by (model_name) (avg_over_time((clamp_max(floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 8) % 2 + floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 64) % 2, 1))[1800s:60s]) * on (namespace, pod) group_left (model_name) group by (namespace, pod, model_name) (last_over_time(vllm:num_requests_running{server=\"\"}[1800s])))"
    );
    // One bit needs no clamp; a gauge over another is divided series by series.
    let one = build(&gauge(vec![4], None), &r, &ctx("")).unwrap().value;
    assert!(one.contains("avg_over_time((floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 4) % 2)[1800s:60s])"), "{one}");
    let SignalKind::Gauge(Gauge { over_time, across, r#match, attribute_via, join_on, attribute_before, less, bits, over, scale, .. }) =
        gauge(vec![], Some("DCGM_FI_DEV_POWER_MGMT_LIMIT".into()))
    else {
        unreachable!()
    };
    let k = SignalKind::Gauge(Gauge {
        gauge: vec!["DCGM_FI_DEV_POWER_USAGE".into()],
        over_time,
        across,
        r#match,
        attribute_via,
        join_on,
        attribute_before,
        less,
        bits,
        over,
        scale,
    });
    let r = resolve(&k, &present(&["DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "vllm:num_requests_running"])).unwrap();
    let v = build(&k, &r, &ctx("")).unwrap().value;
    assert!(v.contains("(avg_over_time(DCGM_FI_DEV_POWER_USAGE[1800s]) / avg_over_time(DCGM_FI_DEV_POWER_MGMT_LIMIT[1800s])) * on (namespace, pod)"), "{v}");
    assert!(v.ends_with("group by (namespace, pod, model_name) (last_over_time(vllm:num_requests_running{server=\"\"}[1800s])))"), "{v}");
}

fn router_kind(measure: RouterMeasure, family: &str, worker_label: &str) -> SignalKind {
    SignalKind::Router(Router {
        measure,
        family: vec![family.into()],
        denominator: if measure == RouterMeasure::Ratio { vec!["vllm_router_requests_total".into()] } else { vec![] },
        r#match: String::new(),
        worker_label: worker_label.into(),
        equals: 1.0,
        workers: vec!["vllm_router_worker_health".into()],
        engines: vec!["vllm:num_requests_running".into()],
    })
}

#[test]
fn a_routers_worker_series_join_the_engines_through_the_workers_host_and_port_without_the_model_matcher() {
    let k = router_kind(RouterMeasure::Rate, "vllm_router_processed_requests_total", "worker");
    let r = resolve(&k, &present(&["vllm_router_processed_requests_total", "vllm:num_requests_running"])).unwrap();
    let q = build(&k, &r, &ctx(r#"model_name="m",namespace="prod""#)).unwrap().value;
    assert_eq!(
        q,
        r#"sum by (model_name) (sum by (instance, model_name) (sum by (instance) (label_replace(label_replace(label_replace(((last_over_time(vllm_router_processed_requests_total{namespace="prod"}[1800s]) / 1800 unless count_over_time(vllm_router_processed_requests_total{namespace="prod"}[2100s]) > count_over_time(vllm_router_processed_requests_total{namespace="prod"}[1800s])) and on (instance, job) (sum_over_time(up[2100s]) > sum_over_time(up[1800s])) or rate(vllm_router_processed_requests_total{namespace="prod"}[1800s])), "router_instance", "$1", "instance", "(.*)"), "router_job", "$1", "job", "(.*)"), "instance", "$1", "worker", "[a-z+]+://([^/]+).*")) * on (instance) group_left (model_name) group by (instance, model_name) (last_over_time(vllm:num_requests_running{model_name="m",namespace="prod",server=""}[1800s]))))"#
    );
    promql_parser::parser::parse(&q).unwrap();
}

#[test]
fn a_routers_own_series_go_to_every_model_its_workers_serve_and_a_missing_retry_counter_reads_zero() {
    // The retries counter is not required: the router creates it at the first retry.
    let k = router_kind(RouterMeasure::Ratio, "vllm_router_retries_total", "");
    let r = resolve(&k, &present(&["vllm_router_requests_total", "vllm_router_worker_health", "vllm:num_requests_running"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap().value;
    assert!(q.starts_with("(sum by (model_name) (sum by (router_instance, router_job) (") && q.contains("or rate(vllm_router_retries_total[1800s]))"), "{q}");
    assert!(q.contains(r#"* on (router_instance, router_job) group_right group by (router_instance, router_job, model_name) ("#), "{q}");
    assert!(q.contains(" or ") && q.contains(" * 0) / "), "{q}");
    promql_parser::parser::parse(&q).unwrap();
    // Without the workers' gauge there is nothing to attribute the router to.
    assert!(resolve(&k, &present(&["vllm_router_requests_total", "vllm:num_requests_running"])).is_err());
    // A held-out share reads the gauge's value at the trends' step.
    let k = router_kind(RouterMeasure::HeldOut, "vllm_router_cb_state", "worker");
    let r = resolve(&k, &present(&["vllm_router_cb_state", "vllm:num_requests_running"])).unwrap();
    let q = build(&k, &r, &ctx("")).unwrap().value;
    assert!(
        q.starts_with("max by (model_name) (max by (instance, model_name) (max by (instance) (")
            && q.contains("avg_over_time((vllm_router_cb_state == bool 1)[1800s:60s])"),
        "{q}"
    );
    // Grouped by instance, the join's label is not also in group_left (PromQL refuses that).
    let by_instance = QueryContext { group_by: vec!["instance".into()], ..ctx("") };
    let q = build(&k, &r, &by_instance).unwrap().value;
    promql_parser::parser::parse(&q).unwrap_or_else(|e| panic!("{e}: {q}"));
}

#[test]
fn a_kinds_fields_are_read_with_serdes_wording_for_the_declarations_errors() {
    // The kinds are newtype variants of an internally tagged enum: their errors read as the
    // struct variants' did (rule-load errors quote them).
    let err = |text: &str| toml::from_str::<SignalKind>(text).unwrap_err().message().trim().to_string();
    assert_eq!(
        err("kind = \"quantile\"\nquantile = 0.9\nhistogram = [\"h\"]\nbogus = 1"),
        "unknown field `bogus`, expected one of `quantile`, `histogram`, `min_observations`"
    );
    assert_eq!(err("kind = \"fill\"\ngauge = [\"g\"]\nkind2 = 1"), "unknown field `kind2`, expected `gauge`");
    assert_eq!(err("kind = \"quantile\"\nhistogram = [\"h\"]"), "missing field `quantile`");
    assert_eq!(err("gauge = [\"g\"]"), "missing field `kind`");
    assert_eq!(
        err("kind = \"ratio\"\nnumerator = {counter = [\"a\"], x = 1}\ndenominator = {counter = [\"a\"]}"),
        "unknown field `x`, expected `counter` or `match`"
    );
    assert!(err("kind = \"nope\"").starts_with("unknown variant `nope`, expected one of `quantile`, `rate`, `ratio`, `mean`, `remainder`, `gauge`, "));
    let k: SignalKind = toml::from_str("kind = \"quantile\"\nquantile = 0.9\nhistogram = [\"h\"]").unwrap();
    assert_eq!(k.kind().min_observations(), Some(20.0));
}

#[test]
fn a_counter_born_inside_the_range_counts_from_zero_on_a_target_up_at_its_start() {
    let q = counter_rate(r#"http_requests_total{status="5xx"}"#, Duration::from_secs(600));
    assert_eq!(
        q,
        r#"((last_over_time(http_requests_total{status="5xx"}[600s]) / 600 unless count_over_time(http_requests_total{status="5xx"}[900s]) > count_over_time(http_requests_total{status="5xx"}[600s])) and on (instance, job) (sum_over_time(up[900s]) > sum_over_time(up[600s])) or rate(http_requests_total{status="5xx"}[600s]))"#
    );
    // It parses as PromQL, and reads the counter and `up`.
    let families = families_read(&q).unwrap();
    assert_eq!(families.into_iter().collect::<Vec<_>>(), ["http_requests_total", "up"]);
}

#[test]
fn literal_alternatives_are_told_from_regular_expressions() {
    assert!(literal_alternatives(r"/v1/completions|/v1/chat/completions|/v1/responses/\{response_id\}|none"));
    for re in [".*/render", "/v1/.+", "a|b*", "(a|b)", "[ab]", "^a", r"\d"] {
        assert!(!literal_alternatives(re), "{re}");
    }
}

#[test]
fn vllms_engine_counters_exist_from_its_start_and_read_as_rate_the_others_count_born_series() {
    for c in ["vllm:request_success_total", "vllm:num_preemptions_total", "vllm_request_success_total"] {
        assert!(created_at_start(c), "{c}");
        assert_eq!(counter_increase_rate(c, c, Duration::from_secs(60)), format!("rate({c}[60s])"));
    }
    for c in ["http_requests_total", "vllm_router_retries_total", "vllm:nixl_num_failed_transfers", "DCGM_FI_DEV_XID_ERRORS"] {
        assert!(!created_at_start(c), "{c}");
        assert_eq!(counter_increase_rate(c, c, Duration::from_secs(60)), counter_rate(c, Duration::from_secs(60)));
    }
}
