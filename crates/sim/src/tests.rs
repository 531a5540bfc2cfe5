//! Checks on the generator itself: the spec parser, the shape of the data, and that every
//! incident kind moves the quantity it is meant to move, measured the way Prometheus would
//! (bucket increases over a window, then linear interpolation inside the bucket).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::*;

const MODEL_A: &str = "meta-llama/Llama-3.1-8B-Instruct";
const MODEL_B: &str = "Qwen/Qwen2.5-7B-Instruct";

fn small_spec(incident: Option<&str>, metrics: &str) -> ScenarioSpec {
    let incident = incident.map(|k| format!("[incident]\nkind = \"{k}\"\nmodel = \"{MODEL_B}\"\n")).unwrap_or_default();
    let text = format!(
        r#"
name = "unit"
seed = 11
start = "2026-01-15T08:00:00Z"
interval = "30s"
warmup = "0s"
baseline = "15m"
window = "15m"
metrics = "{metrics}"
[[model]]
name = "{MODEL_A}"
replicas = 1
rate = 2.0
[[model]]
name = "{MODEL_B}"
replicas = 2
rate = 1.5
{incident}"#
    );
    ScenarioSpec::from_toml_str(&text).expect("the unit-test scenario parses")
}

/// Measurements of one model (or one of its replicas) over one time range, computed from the
/// generated series.
#[derive(Clone, Copy)]
pub(super) struct View<'a> {
    pub series: &'a [GeneratedSeries],
    pub model: &'a str,
    /// Only this replica's series (by instance), when set.
    pub instance: Option<&'a str>,
    pub from: f64,
    pub to: f64,
}

pub(super) fn at(points: &[(f64, f64)], t: f64) -> f64 {
    points.iter().find(|(pt, _)| (*pt - t).abs() < 1e-6).map(|(_, v)| *v).expect("a sample at that time")
}

pub(super) fn secs(t: DateTime<Utc>) -> f64 {
    t.timestamp_millis() as f64 / 1000.0
}

impl<'a> View<'a> {
    pub fn new(series: &'a [GeneratedSeries], model: &'a str, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        View { series, model, instance: None, from: secs(from), to: secs(to) }
    }

    /// The same range for one replica only.
    pub fn replica(self, instance: &'a str) -> Self {
        View { instance: Some(instance), ..self }
    }

    /// The same view over another range.
    pub fn between(self, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        View { from: secs(from), to: secs(to), ..self }
    }

    pub fn of(&self, name: &str) -> impl Iterator<Item = &'a GeneratedSeries> + '_ {
        let name = name.to_string();
        let model = self.model;
        let instance = self.instance;
        self.series.iter().filter(move |s| {
            s.name == name
                && s.labels.get("model_name").map(String::as_str) == Some(model)
                && instance.is_none_or(|i| s.labels.get("instance").map(String::as_str) == Some(i))
        })
    }

    /// Total increase of a counter over the range, summed over replicas (and label values matching `filter`).
    pub fn increase_where(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        self.of(name)
            .filter(|s| filter.iter().all(|(k, v)| s.labels.get(k).map(String::as_str) == Some(*v)))
            .map(|s| at(&s.points, self.to) - at(&s.points, self.from))
            .sum()
    }

    pub fn increase(&self, name: &str) -> f64 {
        self.increase_where(name, &[])
    }

    /// Number of replicas in the view.
    pub fn replicas(&self) -> f64 {
        self.of("vllm:num_requests_running").count() as f64
    }

    /// Per-second rate per replica.
    pub fn rate_per_replica(&self, name: &str) -> f64 {
        self.increase(name) / (self.to - self.from) / self.replicas()
    }

    /// Summed bucket increases of a histogram family over the range, `(upper bound, count)` ascending.
    pub fn buckets(&self, family: &str) -> Vec<(f64, f64)> {
        let mut by_le: BTreeMap<String, f64> = BTreeMap::new();
        for s in self.of(&format!("{family}_bucket")) {
            let le = s.labels.get("le").cloned().expect("buckets have le");
            *by_le.entry(le).or_default() += at(&s.points, self.to) - at(&s.points, self.from);
        }
        let mut buckets: Vec<(f64, f64)> = by_le.into_iter().map(|(le, c)| (vllm_diag::prom::parse_sample_value(&le).expect("le is a number"), c)).collect();
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        buckets
    }

    /// Quantile of a histogram family over the range, like `histogram_quantile(q, sum by (le) (increase(...)))`.
    pub fn quantile(&self, q: f64, family: &str) -> f64 {
        histogram_quantile(q, &self.buckets(family))
    }

    /// Share of observations above the bucket bound `le`, read from that bucket as an SLO rule would.
    pub fn share_over(&self, family: &str, le: f64) -> f64 {
        let b = self.buckets(family);
        let total = b.last().map(|x| x.1).unwrap_or(0.0);
        let within = b.iter().find(|(bound, _)| (*bound - le).abs() < 1e-9).map(|x| x.1).expect("a bucket at le");
        1.0 - within / total
    }

    /// Mean of a histogram family over the range (`_sum` over `_count`).
    pub fn mean(&self, family: &str) -> f64 {
        self.increase(&format!("{family}_sum")) / self.increase(&format!("{family}_count"))
    }

    /// Values of a gauge over the range (the start excluded, the end included), across replicas.
    pub fn gauge(&self, name: &str) -> Vec<f64> {
        self.of(name).flat_map(|s| s.points.iter().filter(|(t, _)| *t > self.from && *t <= self.to).map(|(_, v)| *v)).collect()
    }

    pub fn gauge_range(&self, name: &str) -> (f64, f64) {
        let v = self.gauge(name);
        assert!(!v.is_empty(), "{name} has samples");
        (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(f64::NEG_INFINITY, f64::max))
    }

    /// Average of a gauge over the range and its replicas.
    pub fn gauge_avg(&self, name: &str) -> f64 {
        let v = self.gauge(name);
        assert!(!v.is_empty(), "{name} has samples");
        v.iter().sum::<f64>() / v.len() as f64
    }

    /// A gauge's values at the range's end, one per replica.
    pub fn gauge_at_end(&self, name: &str) -> Vec<f64> {
        self.of(name).map(|s| at(&s.points, self.to)).collect()
    }
}

/// Prometheus' histogram_quantile over cumulative `(upper bound, count)` pairs ending with `+Inf`.
pub(super) fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> f64 {
    let total = buckets.last().map(|b| b.1).unwrap_or(0.0);
    if total <= 0.0 {
        return f64::NAN;
    }
    let rank = q * total;
    let i = buckets.iter().position(|(_, c)| *c >= rank).unwrap_or(buckets.len() - 1);
    if i == buckets.len() - 1 {
        return buckets[buckets.len().saturating_sub(2)].0;
    }
    let (upper, count) = buckets[i];
    let (lower, prev) = if i == 0 { (0.0, 0.0) } else { buckets[i - 1] };
    lower + (upper - lower) * (rank - prev) / (count - prev)
}

pub(super) fn generate(spec: &ScenarioSpec) -> Vec<GeneratedSeries> {
    generate_series(spec)
}

pub(super) fn window<'a>(s: &'a [GeneratedSeries], spec: &ScenarioSpec, model: &'a str) -> View<'a> {
    View::new(s, model, spec.window_start(), spec.window_end())
}

pub(super) fn baseline<'a>(s: &'a [GeneratedSeries], spec: &ScenarioSpec, model: &'a str) -> View<'a> {
    View::new(s, model, spec.baseline_start(), spec.baseline_end())
}

pub(super) const TTFT: &str = "vllm:time_to_first_token_seconds";
pub(super) const ITL: &str = "vllm:inter_token_latency_seconds";
pub(super) const QUEUE: &str = "vllm:request_queue_time_seconds";

// ---- the spec ----

#[test]
fn parses_the_documented_example_and_derives_the_timeline() {
    let spec = ScenarioSpec::from_toml_str(
        r#"
name = "kv-cache-pressure"
description = "one model's KV cache fills"
seed = 7
start = "2026-01-15T08:00:00Z"
interval = "30s"
warmup = "20m"
baseline = "30m"
window = "30m"
metrics = "v1"
[[model]]
name = "meta-llama/Llama-3.1-8B-Instruct"
replicas = 3
rate = 2.0
[[model]]
name = "Qwen/Qwen2.5-7B-Instruct"
replicas = 2
rate = 1.5
[incident]
kind = "kv-cache-pressure"
model = "meta-llama/Llama-3.1-8B-Instruct"
[expect]
first = "kv-cache-pressure"
model = "meta-llama/Llama-3.1-8B-Instruct"
"#,
    )
    .expect("the documented example parses");
    assert_eq!(spec.baseline_start().to_rfc3339(), "2026-01-15T08:20:00+00:00");
    assert_eq!(spec.window_start().to_rfc3339(), "2026-01-15T08:50:00+00:00");
    assert_eq!(spec.window_end().to_rfc3339(), "2026-01-15T09:20:00+00:00");
    assert_eq!(spec.sample_count(), 161);
    assert_eq!(spec.replica_count(), 5);
    assert_eq!(spec.incident.as_ref().map(|i| i.kind), Some(IncidentKind::KvCachePressure));
    assert_eq!(spec.expect.first.as_deref(), Some("kv-cache-pressure"));
    assert!(!spec.expect.healthy);
}

#[test]
fn rejects_an_incident_on_a_model_that_is_not_in_the_fleet() {
    let err = ScenarioSpec::from_toml_str(
        r#"
name = "x"
start = "2026-01-15T08:00:00Z"
interval = "30s"
baseline = "10m"
window = "10m"
[[model]]
name = "a"
replicas = 1
rate = 1.0
[incident]
kind = "slow-decode"
model = "b"
"#,
    )
    .expect_err("unknown incident model");
    assert!(err.to_string().contains("incident.model"), "{err}");
}

#[test]
fn rejects_bad_durations_unknown_fields_and_unknown_kinds() {
    let base = |extra: &str, window: &str| {
        format!(
            "name = \"x\"\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"30s\"\nbaseline = \"10m\"\nwindow = \"{window}\"\n{extra}\n[[model]]\nname = \"a\"\nreplicas = 1\nrate = 1.0\n"
        )
    };
    for (text, needle) in [
        (base("", "ten minutes"), "window"),
        (base("", "10m15s"), "whole number of intervals"),
        (base("colour = \"red\"", "10m"), "colour"),
        (base("", "10m") + "[incident]\nkind = \"meteor-strike\"\nmodel = \"a\"\n", "meteor-strike"),
        (base("", "10m") + "[expect]\nhealthy = true\nfirst = \"x\"\nmodel = \"a\"\n", "healthy"),
        (base("", "10m").replace("rate = 1.0", "rate = -1.0"), "rate"),
        (base("", "10m").replace("replicas = 1", "replicas = 0"), "replicas"),
    ] {
        let err = ScenarioSpec::from_toml_str(&text).expect_err(needle);
        assert!(err.to_string().contains(needle), "{needle}: {err}");
    }
}

#[test]
fn parses_model_options_incident_replica_and_onset_and_the_richer_expectation() {
    let spec = ScenarioSpec::from_toml_str(
        r#"
name = "x"
start = "2026-01-15T08:00:00Z"
interval = "30s"
warmup = "30m"
baseline = "30m"
window = "30m"
[[model]]
name = "org/M"
replicas = 3
rate = 1.0
max_num_seqs = 32
weights = [3, 1, 1]
spec_decode = true
kv_connector = "nixl"
dcgm = true
[incident]
kind = "replica-outlier"
model = "org/M"
replica = 2
onset = "-45m"
[expect]
first = "replica-outlier"
model = "org/M"
replica = "m-2:8000"
absent = ["slow-decode", "target-down"]
"#,
    )
    .expect("parses");
    let m = &spec.models[0];
    assert_eq!((m.max_num_seqs, m.spec_decode, m.kv_connector, m.dcgm), (32, true, Some(KvConnector::Nixl), true));
    assert_eq!(m.arrival_shares(), vec![1.8, 0.6, 0.6]);
    let inc = spec.incident.as_ref().expect("an incident");
    assert_eq!((inc.replica, inc.onset_before_end), (2, Some(std::time::Duration::from_secs(2700))));
    assert_eq!(spec.incident_onset(), Some(spec.window_end() - chrono::TimeDelta::minutes(45)));
    assert_eq!(spec.expect.replica.as_deref(), Some("m-2:8000"));
    assert_eq!(spec.expect.absent, vec!["slow-decode".to_string(), "target-down".to_string()]);
    assert_eq!(spec.instance_of("org/M", 1).as_deref(), Some("m-1:8000"));
    assert_eq!(ModelSpec::new("a", 2, 1.0).arrival_shares(), vec![1.0, 1.0]);
}

#[test]
fn rejects_options_incidents_and_expectations_that_cannot_be_generated_with_a_message_naming_the_field() {
    let base = |metrics: &str, model: &str, rest: &str| {
        format!(
            "name = \"x\"\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"30s\"\nwarmup = \"10m\"\nbaseline = \"30m\"\nwindow = \"30m\"\nmetrics = \"{metrics}\"\n[[model]]\nname = \"a\"\nreplicas = 2\nrate = 1.0\n{model}\n{rest}"
        )
    };
    let inc = |kind: &str, extra: &str| format!("[incident]\nkind = \"{kind}\"\nmodel = \"a\"\n{extra}");
    for (text, needles) in [
        (base("v1", "weights = [1, 2, 3]", ""), vec!["model[0]", "one per replica"]),
        (base("v1", "weights = [1, -2]", ""), vec!["model[0]", "positive"]),
        (base("v1", "max_num_seqs = 0", ""), vec!["max_num_seqs"]),
        (base("v1", "weights = [1000000, 1]", "").replace("rate = 1.0", "rate = 300.0"), vec!["model[0]", "600 requests per second to replica 0"]),
        (base("v0", "spec_decode = true", ""), vec!["model[0]", "V1"]),
        (base("v1", "kv_connector = \"mooncake\"", ""), vec!["mooncake"]),
        (base("v1", "", &inc("spec-decode-inefficient", "")), vec!["incident.kind", "spec_decode = true"]),
        (base("v1", "", &inc("kv-transfer-failures-near", "")), vec!["incident.kind", "kv_connector"]),
        (base("v1", "", &inc("gpu-throttling", "")), vec!["incident.kind", "dcgm = true"]),
        (base("v0", "", &inc("engine-asleep", "")), vec!["incident.kind", "V1"]),
        (base("v1", "", &inc("replica-imbalance", "")), vec!["incident.kind", "at least 3 replicas"]),
        (base("v1", "", &inc("target-down", "replica = 2")), vec!["incident.replica", "0 to 1"]),
        (base("v1", "", &inc("slow-decode", "replica = 1")), vec!["incident.replica", "every replica"]),
        (base("v1", "", &inc("slo-burn", "onset = \"60m\"")), vec!["incident.onset", "negative"]),
        (base("v1", "", &inc("slo-burn", "onset = \"-80m\"")), vec!["incident.onset", "warmup"]),
        (base("v1", "", &inc("slo-burn", "onset = \"-45s\"")), vec!["incident.onset", "intervals"]),
        (
            base("v1", "", &(inc("target-down", "") + "[expect]\nfirst = \"target-down\"\nmodel = \"a\"\nreplica = \"b-0:8000\"\n")),
            vec!["expect.replica", "a-0:8000, a-1:8000"],
        ),
        (base("v1", "", "[expect]\nreplica = \"a-0:8000\"\n"), vec!["expect.replica", "first and model"]),
        (base("v1", "", "[expect]\nfirst = \"x\"\nmodel = \"a\"\nabsent = [\"x\"]\n"), vec!["expect.absent", "also expected first"]),
        (base("v1", "", "[expect]\nabsent = [\"x\", \"x\"]\n"), vec!["expect.absent", "twice"]),
    ] {
        let err = ScenarioSpec::from_toml_str(&text).expect_err(needles[0]).to_string();
        for needle in needles {
            assert!(err.contains(needle), "{needle}: {err}");
        }
    }
}

#[test]
fn a_kind_that_starts_before_the_first_sample_is_refused_until_the_warmup_is_long_enough() {
    let text = |warmup: &str| {
        format!(
            "name = \"x\"\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"30s\"\nwarmup = \"{warmup}\"\nbaseline = \"30m\"\nwindow = \"30m\"\n[[model]]\nname = \"a\"\nreplicas = 1\nrate = 1.0\n[incident]\nkind = \"slo-burn\"\nmodel = \"a\"\n"
        )
    };
    let err = ScenarioSpec::from_toml_str(&text("0s")).expect_err("60 minutes before the end is the first sample");
    assert!(err.to_string().contains("make warmup longer"), "{err}");
    assert!(ScenarioSpec::from_toml_str(&text("10m")).is_ok());
}

// ---- the shape of the data ----

#[test]
fn histogram_buckets_never_decrease_with_le_and_inf_equals_count() {
    for metrics in ["v1", "v0"] {
        let spec = small_spec(Some("kv-cache-pressure"), metrics);
        let series = generate(&spec);
        type LabelPairs = Vec<(String, String)>;
        let mut groups: BTreeMap<(String, LabelPairs), Vec<&GeneratedSeries>> = BTreeMap::new();
        for s in series.iter().filter(|s| s.name.ends_with("_bucket")) {
            let key: Vec<(String, String)> = s.labels.iter().filter(|(k, _)| *k != "le").map(|(k, v)| (k.clone(), v.clone())).collect();
            groups.entry((s.name.trim_end_matches("_bucket").to_string(), key)).or_default().push(s);
        }
        assert!(groups.len() >= 11 * 3, "{metrics}: every replica has every histogram");
        for ((family, labels), mut buckets) in groups {
            buckets.sort_by(|a, b| {
                let le = |s: &GeneratedSeries| vllm_diag::prom::parse_sample_value(&s.labels["le"]).expect("le parses");
                le(a).total_cmp(&le(b))
            });
            assert_eq!(buckets.last().map(|b| b.labels["le"].as_str()), Some("+Inf"));
            let count = series
                .iter()
                .find(|s| s.name == format!("{family}_count") && s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect::<Vec<_>>() == labels)
                .expect("every histogram has a _count");
            for t in 0..spec.sample_count() {
                let values: Vec<f64> = buckets.iter().map(|b| b.points[t].1).collect();
                assert!(values.windows(2).all(|w| w[0] <= w[1]), "{family} {labels:?} at {t}: {values:?}");
                assert!(values.iter().all(|v| v.fract() == 0.0), "{family}: integer counts");
                assert_eq!(values.last().copied(), Some(count.points[t].1), "{family}: +Inf == _count");
            }
        }
    }
}

#[test]
fn counters_never_decrease_and_start_above_zero() {
    let spec = small_spec(Some("load-exceeds-capacity"), "v1");
    for s in generate(&spec) {
        let cumulative = ["_total", "_bucket", "_count", "_sum"].iter().any(|sfx| s.name.ends_with(sfx));
        if !cumulative {
            continue;
        }
        assert!(s.points.windows(2).all(|w| w[0].1 <= w[1].1), "{} {:?} decreases", s.name, s.labels);
        if s.name.ends_with("_count") || s.name == "vllm:prompt_tokens_total" || s.name == "vllm:num_preemptions_total" {
            assert!(s.points[0].1 > 0.0, "{} starts at an offset", s.name);
        }
    }
}

#[test]
fn every_series_has_one_sample_per_interval_on_the_timeline() {
    let spec = small_spec(None, "v1");
    let start = secs(spec.start);
    let step = spec.interval.as_secs_f64();
    for s in generate(&spec) {
        assert_eq!(s.points.len(), spec.sample_count(), "{}", s.name);
        for (i, (t, _)) in s.points.iter().enumerate() {
            assert!((t - (start + step * i as f64)).abs() < 1e-6);
        }
    }
}

/// A scenario's OpenMetrics text, written to memory.
fn openmetrics_of(s: &ScenarioSpec) -> Vec<u8> {
    let mut out = Vec::new();
    generate_openmetrics(s, &mut out).expect("writing to memory works");
    out
}

#[test]
fn the_same_seed_gives_the_same_bytes_and_another_seed_does_not() {
    let spec = small_spec(Some("slow-decode"), "v1");
    let render = openmetrics_of;
    let a = render(&spec);
    assert_eq!(a, render(&spec));
    let mut other = spec.clone();
    other.seed += 1;
    assert_ne!(a, render(&other));
}

#[test]
fn openmetrics_output_keeps_families_together_timestamps_every_sample_and_ends_with_eof() {
    let spec = small_spec(None, "v1");
    let mut out = Vec::new();
    generate_openmetrics(&spec, &mut out).expect("writing to memory works");
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.ends_with("# EOF\n"));
    let mut seen: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap_or_default().to_string();
            assert!(!seen.contains(&name), "family {name} declared twice");
            seen.push(name.clone());
            current = name;
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        assert!(line.starts_with(&current), "{line} is outside its family {current}");
        let after_labels = line.rsplit_once('}').map(|(_, r)| r).unwrap_or(line);
        let fields: Vec<&str> = after_labels.split_whitespace().collect();
        assert_eq!(fields.len(), 2, "value and timestamp: {line}");
    }
    for name in ["vllm:prompt_tokens", "vllm:iteration_tokens_total", "http_requests", "up"] {
        assert!(seen.iter().any(|s| s == name), "{name} family present");
    }
}

#[test]
fn every_vllm_series_carries_job_instance_pod_namespace_model_name_and_engine_in_v1_only() {
    for (metrics, engine) in [("v1", true), ("v0", false)] {
        let spec = small_spec(None, metrics);
        let series = generate(&spec);
        let pods: std::collections::BTreeMap<String, String> = spec.replicas().into_iter().map(|r| (r.instance, r.pod)).collect();
        for s in series.iter().filter(|s| s.name.starts_with("vllm:") || s.name == "up" || s.name.starts_with("http_")) {
            assert_eq!(s.labels.get("job").map(String::as_str), Some("vllm"), "{metrics} {}", s.name);
            assert_eq!(s.labels.get("namespace").map(String::as_str), Some("inference"), "{metrics} {}", s.name);
            let instance = &s.labels["instance"];
            assert_eq!(s.labels.get("pod"), pods.get(instance), "{metrics} {} on {instance}", s.name);
            if s.name.starts_with("vllm:") && s.name != "vllm:cache_config_info" {
                assert!(s.labels.contains_key("model_name"), "{metrics} {} lacks model_name", s.name);
                // admission control lives in the front end, which has no engine
                let expect_engine = engine && s.name != "vllm:admission_rejections_total";
                assert_eq!(s.labels.contains_key("engine"), expect_engine, "{metrics} {}", s.name);
            } else if s.name != "vllm:cache_config_info" {
                assert!(!s.labels.contains_key("model_name"), "{} has no model_name in vLLM", s.name);
            }
        }
        let instances: std::collections::BTreeSet<&str> = series.iter().filter(|s| s.name == "up").map(|s| s.labels["instance"].as_str()).collect();
        assert_eq!(instances.len(), spec.replica_count() as usize);
    }
}

#[test]
fn v0_uses_the_old_names_and_omits_v1_only_metrics() {
    let names = |metrics: &str| -> std::collections::BTreeSet<String> { generate(&small_spec(None, metrics)).into_iter().map(|s| s.name).collect() };
    let v0 = names("v0");
    let v1 = names("v1");
    for (old, new) in
        [("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"), ("vllm:time_per_output_token_seconds_count", "vllm:inter_token_latency_seconds_count")]
    {
        assert!(v0.contains(old) && !v0.contains(new), "v0 has {old} only");
        assert!(v1.contains(new) && !v1.contains(old), "v1 has {new} only");
    }
    for name in [
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "http_requests_total",
        "vllm:prompt_tokens_recomputed_total",
        "vllm:admission_rejections_total",
        "vllm:engine_sleep_state",
    ] {
        assert!(!v0.contains(name) && v1.contains(name), "{name} is v1 only");
    }
    assert!(v1.contains("vllm:iteration_tokens_total_bucket"));
    for optional in ["vllm:spec_decode_num_drafts_total", "vllm:nixl_num_failed_transfers_total", "DCGM_FI_DEV_GPU_UTIL"] {
        assert!(!v1.contains(optional), "{optional} only when the model asks for it");
    }
}

#[test]
fn otel_names_are_the_v1_names_with_an_underscore_and_the_same_values() {
    let v1 = generate(&small_spec(Some("kv-cache-pressure"), "v1"));
    let otel = generate(&small_spec(Some("kv-cache-pressure"), "v1-otel"));
    assert_eq!(v1.len(), otel.len());
    let mut renamed: Vec<GeneratedSeries> = otel
        .into_iter()
        .map(|mut s| {
            assert!(!s.name.starts_with("vllm:"), "{} keeps the colon", s.name);
            if let Some(rest) = s.name.strip_prefix("vllm_") {
                s.name = format!("vllm:{rest}");
            }
            s
        })
        .collect();
    renamed.sort_by(|a, b| (&a.name, &a.labels).cmp(&(&b.name, &b.labels)));
    assert!(renamed == v1, "the same data under other names");
}

// ---- what each state does ----

#[test]
fn the_healthy_state_stays_inside_the_healthy_targets() {
    let spec = small_spec(None, "v1");
    let s = generate(&spec);
    for model in [MODEL_A, MODEL_B] {
        let w = window(&s, &spec, model);
        let ttft = w.quantile(0.95, TTFT);
        assert!((0.15..=0.35).contains(&ttft), "{model} TTFT P95 {ttft}");
        let queue = w.quantile(0.95, QUEUE);
        assert!(queue < 0.3, "{model} queue P95 {queue}");
        let itl = w.quantile(0.95, ITL);
        assert!((0.03..=0.05).contains(&itl), "{model} ITL P95 {itl}");
        // a chat SLO (first token within 500 ms, token gaps within 50 ms, 99% of the time) has budget left
        let slow_first = w.share_over(TTFT, 0.5);
        assert!(slow_first < 0.005, "{model} share of TTFT over 500 ms {slow_first}");
        let slow_gaps = w.share_over(ITL, 0.05);
        assert!(slow_gaps < 0.01, "{model} share of ITL over 50 ms {slow_gaps}");
        let (lo, hi) = w.gauge_range("vllm:num_requests_waiting");
        assert!(lo >= 0.0 && hi <= 2.0, "{model} waiting {lo}..{hi}");
        let (lo, hi) = w.gauge_range("vllm:kv_cache_usage_perc");
        assert!(lo >= 0.3 && hi <= 0.6, "{model} KV {lo}..{hi}");
        assert_eq!(w.increase("vllm:num_preemptions_total"), 0.0);
        let finished = w.increase("vllm:request_success_total");
        let aborted = w.increase_where("vllm:request_success_total", &[("finished_reason", "abort")]);
        assert!((0.005..0.02).contains(&(aborted / finished)), "{model} abort share {}", aborted / finished);
        assert_eq!(w.increase_where("vllm:request_success_total", &[("finished_reason", "error")]), 0.0);
        let hit = w.increase("vllm:prefix_cache_hits_total") / w.increase("vllm:prefix_cache_queries_total");
        assert!((0.45..=0.55).contains(&hit), "{model} prefix hit ratio {hit}");
        for counter in ["vllm:prompt_tokens_recomputed_total", "vllm:admission_rejections_total"] {
            assert_eq!(w.increase(counter), 0.0, "{model} {counter}");
        }
        assert!(w.gauge("vllm:engine_sleep_state").iter().all(|v| *v == 0.0 || *v == 1.0));
        let awake: Vec<f64> =
            w.of("vllm:engine_sleep_state").filter(|x| x.labels["sleep_state"] == "awake").flat_map(|x| x.points.iter().map(|p| p.1)).collect();
        assert!(!awake.is_empty() && awake.iter().all(|v| *v == 1.0), "{model} awake");
    }
    let share_5xx = http_5xx_share(&s, &spec, MODEL_A);
    assert!(share_5xx < 0.005, "5xx share {share_5xx}");
}

/// 5xx share of a model's HTTP requests in the window (joined on instance, as HTTP metrics have no model_name).
fn http_5xx_share(s: &[GeneratedSeries], spec: &ScenarioSpec, model: &str) -> f64 {
    let instances: Vec<&str> =
        s.iter().filter(|x| x.name == "vllm:num_requests_running" && x.labels["model_name"] == model).map(|x| x.labels["instance"].as_str()).collect();
    let (from, to) = (secs(spec.window_start()), secs(spec.window_end()));
    let mut all = 0.0;
    let mut errors = 0.0;
    for x in s.iter().filter(|x| x.name == "http_requests_total" && instances.contains(&x.labels["instance"].as_str())) {
        let inc = at(&x.points, to) - at(&x.points, from);
        all += inc;
        if x.labels["status"] == "5xx" {
            errors += inc;
        }
    }
    errors / all
}

/// Window-over-baseline ratio of a P95 for the incident model.
fn p95_ratio(s: &[GeneratedSeries], spec: &ScenarioSpec, family: &str) -> f64 {
    window(s, spec, MODEL_B).quantile(0.95, family) / baseline(s, spec, MODEL_B).quantile(0.95, family)
}

fn assert_untouched(s: &[GeneratedSeries], spec: &ScenarioSpec) {
    let itl = match spec.metrics {
        MetricsGeneration::V0 => "vllm:time_per_output_token_seconds",
        _ => ITL,
    };
    for family in [TTFT, itl, QUEUE] {
        let r = window(s, spec, MODEL_A).quantile(0.95, family) / baseline(s, spec, MODEL_A).quantile(0.95, family);
        assert!((0.8..1.25).contains(&r), "the healthy model's {family} moved: x{r}");
    }
    assert_eq!(window(s, spec, MODEL_A).increase("vllm:num_preemptions_total"), 0.0);
}

#[test]
fn load_exceeds_capacity_queues_without_preempting_or_slowing_decode() {
    let spec = small_spec(Some("load-exceeds-capacity"), "v1");
    let s = generate(&spec);
    let w = window(&s, &spec, MODEL_B);
    let b = baseline(&s, &spec, MODEL_B);
    assert!(w.quantile(0.95, QUEUE) > 2.0, "queue P95 {}", w.quantile(0.95, QUEUE));
    assert!(p95_ratio(&s, &spec, TTFT) >= 3.0, "TTFT x{}", p95_ratio(&s, &spec, TTFT));
    let itl = p95_ratio(&s, &spec, ITL);
    assert!((0.9..=1.1).contains(&itl), "ITL x{itl}");
    let (lo, hi) = w.gauge_range("vllm:num_requests_waiting");
    assert!(lo >= 15.0 && hi <= 40.0, "waiting {lo}..{hi}");
    let (lo, hi) = w.gauge_range("vllm:kv_cache_usage_perc");
    assert!(lo >= 0.7 && hi <= 0.85, "KV {lo}..{hi}");
    let (run_lo, _) = w.gauge_range("vllm:num_requests_running");
    let (_, base_hi) = b.gauge_range("vllm:num_requests_running");
    assert!(run_lo > base_hi, "running at its cap ({run_lo}) above anything healthy ({base_hi})");
    assert_eq!(w.increase("vllm:num_preemptions_total"), 0.0);
    let arrivals = w.increase("vllm:request_success_total") / b.increase("vllm:request_success_total");
    assert!((2.2..2.8).contains(&arrivals), "arrivals x{arrivals}");
    assert_untouched(&s, &spec);
}

#[test]
fn slow_prefill_raises_ttft_but_not_queue_or_itl() {
    let spec = small_spec(Some("slow-prefill"), "v1");
    let s = generate(&spec);
    let w = window(&s, &spec, MODEL_B);
    assert!(p95_ratio(&s, &spec, TTFT) >= 3.0, "TTFT x{}", p95_ratio(&s, &spec, TTFT));
    assert!(w.quantile(0.95, QUEUE) < 0.3);
    let itl = p95_ratio(&s, &spec, ITL);
    assert!((0.9..=1.1).contains(&itl), "ITL x{itl}");
    assert!(w.gauge_range("vllm:num_requests_waiting").1 <= 2.0);
    assert!(p95_ratio(&s, &spec, "vllm:request_prefill_time_seconds") > 3.0);
    assert_untouched(&s, &spec);
}

#[test]
fn slow_input_processing_raises_ttft_by_its_delay_with_queue_prefill_and_decode_flat() {
    let spec = small_spec(Some("slow-input-processing"), "v1");
    let s = generate(&spec);
    let (w, b) = (window(&s, &spec, MODEL_B), baseline(&s, &spec, MODEL_B));
    // The time before the engine: mean TTFT less mean queue less mean prefill.
    let rest = |x: &View| x.mean(TTFT) - x.mean(QUEUE) - x.mean("vllm:request_prefill_time_seconds");
    assert!(rest(&b).abs() < 0.01, "healthy rest {}", rest(&b));
    assert!((1.4..1.7).contains(&rest(&w)), "rest {}", rest(&w));
    for family in [QUEUE, "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds", ITL] {
        let r = w.mean(family) / b.mean(family);
        assert!((0.85..1.15).contains(&r), "{family} x{r}");
    }
    assert!(p95_ratio(&s, &spec, TTFT) >= 2.0, "TTFT x{}", p95_ratio(&s, &spec, TTFT));
    assert_untouched(&s, &spec);
    // The near miss: 0.1 s more.
    let spec = small_spec(Some("slow-input-processing-near"), "v1");
    let s = generate(&spec);
    let w = window(&s, &spec, MODEL_B);
    assert!((0.07..0.14).contains(&rest(&w)), "near rest {}", rest(&w));
    assert!(p95_ratio(&s, &spec, TTFT) < 2.0, "near TTFT x{}", p95_ratio(&s, &spec, TTFT));
}

#[test]
fn slow_decode_raises_itl_and_lowers_generation_throughput_only() {
    let spec = small_spec(Some("slow-decode"), "v1");
    let s = generate(&spec);
    let w = window(&s, &spec, MODEL_B);
    let b = baseline(&s, &spec, MODEL_B);
    assert!(p95_ratio(&s, &spec, ITL) >= 2.0, "ITL x{}", p95_ratio(&s, &spec, ITL));
    assert!(w.quantile(0.95, QUEUE) < 0.3);
    let ttft = p95_ratio(&s, &spec, TTFT);
    assert!((0.75..1.3).contains(&ttft), "TTFT x{ttft}");
    let gen = w.increase("vllm:generation_tokens_total") / b.increase("vllm:generation_tokens_total");
    assert!(gen < 0.9, "generation tokens x{gen}");
    assert_untouched(&s, &spec);
}

#[test]
fn severe_saturation_raises_queue_ttft_and_itl_without_preemption() {
    let spec = small_spec(Some("severe-saturation"), "v1");
    let s = generate(&spec);
    let w = window(&s, &spec, MODEL_B);
    assert!(w.quantile(0.95, QUEUE) > 3.0);
    assert!(p95_ratio(&s, &spec, TTFT) >= 4.0, "TTFT x{}", p95_ratio(&s, &spec, TTFT));
    assert!(p95_ratio(&s, &spec, ITL) >= 2.0, "ITL x{}", p95_ratio(&s, &spec, ITL));
    let (lo, hi) = w.gauge_range("vllm:kv_cache_usage_perc");
    assert!(lo >= 0.75 && hi <= 0.85, "KV {lo}..{hi}");
    assert_eq!(w.increase("vllm:num_preemptions_total"), 0.0);
    assert_untouched(&s, &spec);
}

#[test]
fn kv_cache_pressure_fills_the_cache_and_preempts_all_window_long() {
    for (metrics, kv, itl_family) in [("v1", "vllm:kv_cache_usage_perc", ITL), ("v0", "vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds")] {
        let spec = small_spec(Some("kv-cache-pressure"), metrics);
        let s = generate(&spec);
        let w = window(&s, &spec, MODEL_B);
        let (lo, hi) = w.gauge_range(kv);
        assert!(lo >= 0.95 && hi <= 1.0, "{metrics} KV {lo}..{hi}");
        let rate = w.rate_per_replica("vllm:num_preemptions_total");
        assert!((0.5..=3.0).contains(&rate), "{metrics} preemptions {rate}/s per replica");
        for series in w.of("vllm:num_preemptions_total") {
            let inside: Vec<&(f64, f64)> = series.points.iter().filter(|(t, _)| *t >= w.from && *t <= w.to).collect();
            assert!(inside.windows(2).all(|p| p[1].1 > p[0].1), "{metrics}: preempting every interval");
        }
        assert!(w.quantile(0.95, QUEUE) > 1.5);
        assert!(p95_ratio(&s, &spec, TTFT) >= 3.0, "TTFT x{}", p95_ratio(&s, &spec, TTFT));
        let itl = p95_ratio(&s, &spec, itl_family);
        assert!((1.1..1.6).contains(&itl), "{metrics} ITL x{itl}");
        assert_untouched(&s, &spec);
    }
}

#[test]
fn http_errors_raise_the_5xx_share_and_leave_latency_alone() {
    let spec = small_spec(Some("http-errors"), "v1");
    let s = generate(&spec);
    let share = http_5xx_share(&s, &spec, MODEL_B);
    assert!((0.08..=0.15).contains(&share), "5xx share {share}");
    assert!(http_5xx_share(&s, &spec, MODEL_A) < 0.005);
    let ttft = p95_ratio(&s, &spec, TTFT);
    assert!((0.8..1.25).contains(&ttft), "TTFT x{ttft}");
    assert_untouched(&s, &spec);
}

#[test]
fn ramp_grows_traffic_through_baseline_and_window_while_latency_stays_healthy() {
    let spec = small_spec(Some("ramp"), "v1");
    let s = generate(&spec);
    let w = window(&s, &spec, MODEL_B);
    let b = baseline(&s, &spec, MODEL_B);
    // average multiplier: ~1.2x over the baseline, ~1.6x over the window
    let growth = w.increase("vllm:request_success_total") / b.increase("vllm:request_success_total");
    assert!((1.15..1.55).contains(&growth), "window over baseline x{growth}");
    let ttft = w.quantile(0.95, TTFT);
    assert!((0.15..=0.35).contains(&ttft), "TTFT P95 {ttft}");
    assert!(w.quantile(0.95, QUEUE) < 0.3);
    let (lo, hi) = w.gauge_range("vllm:kv_cache_usage_perc");
    assert!(lo >= 0.3 && hi <= 0.6, "KV {lo}..{hi}");
    let (_, run_hi) = w.gauge_range("vllm:num_requests_running");
    let (base_lo, _) = b.gauge_range("vllm:num_requests_running");
    assert!(run_hi > base_lo);
    assert_eq!(w.increase("vllm:num_preemptions_total"), 0.0);
}

#[test]
fn every_scenario_fixture_parses_and_names_a_real_expectation() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scenarios");
    let mut kinds_seen = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("fixtures/scenarios exists") {
        let path = entry.expect("directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let spec = ScenarioSpec::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        assert_eq!(spec.name, stem, "{}: name matches the file", path.display());
        let e = &spec.expect;
        assert!(e.healthy || e.first.is_some() || !e.absent.is_empty(), "{}: has an expectation", path.display());
        let Some(incident) = &spec.incident else { continue };
        kinds_seen.insert(incident.kind);
        if !spec.histograms {
            // A gauge-only variant: named gauge-only-<rule>[-near]; its near miss borrows another
            // kind's quiet story, and must keep the stand-in's rule quiet.
            assert!(stem.starts_with("gauge-only-"), "{stem}: gauge-only scenarios are named gauge-only-*");
            // (gauge-only-<rule>-<variant>[-near] for a second story of the same rule).
            if stem.ends_with("-near") {
                let rule = stem.trim_start_matches("gauge-only-").trim_end_matches("-near");
                assert!(e.absent.iter().any(|r| rule.starts_with(r.as_str())) && e.healthy, "{stem}: keeps {rule} quiet");
            } else {
                assert!(e.stood_in, "{stem}: a gauge-only finding is reached through stand-ins");
            }
        } else if let Some(base) = incident.kind.near_miss_of() {
            // a near miss: its rule must stay quiet; one of an incident no rule names, what else
            // moved must list nothing
            assert!(e.first.is_none(), "{stem}: a near miss expects nothing first");
            if base.named_by_a_rule() {
                // Its own rule; a near miss may keep a neighbour quiet too (a lowered power limit
                // the GPU never hits is no throttling either).
                assert!(e.absent.iter().any(|r| r == base.rule()), "{stem}: keeps {} quiet: {:?}", base.rule(), e.absent);
            } else {
                assert!(e.healthy && e.unexplained.is_empty() && e.absent.is_empty(), "{stem}: a quiet near miss of an incident no rule names");
            }
            assert_eq!(stem, incident.kind.as_str(), "{stem}: named after its kind");
        } else if !incident.kind.named_by_a_rule() {
            // no rule names it: what else moved lists it, for its model
            assert!(e.healthy && !e.unexplained.is_empty(), "{stem}: listed as unexplained, no rule firing");
            assert_eq!(e.model.as_deref(), Some(incident.model.as_str()), "{stem}");
        } else if let Some(first) = &e.first {
            assert_eq!(first, incident.kind.rule(), "{stem}");
            assert_eq!(e.model.as_deref(), Some(incident.model.as_str()), "{stem}");
            let replica_level = matches!(
                incident.kind,
                IncidentKind::ReplicaOutlier
                    | IncidentKind::ReplicaConfigCap
                    | IncidentKind::ReplicaBatchLoad
                    | IncidentKind::TargetDown
                    | IncidentKind::GpuErrors
                    | IncidentKind::GpuThermalSlowdown
                    | IncidentKind::RoutingSkew
                    | IncidentKind::RankImbalance
            );
            // A target down since before the window has no series left in it but `up`: the
            // diagnosis ties it to its model through its past, and does not name it.
            let down_before_window = incident.kind == IncidentKind::TargetDown && incident.onset_before_end.is_some_and(|d| d > spec.window);
            if replica_level && !down_before_window {
                let instance = spec.instance_of(&incident.model, incident.replica);
                assert_eq!(e.replica, instance, "{stem}: names the replica at fault");
            } else if down_before_window {
                assert_eq!(e.replica, None, "{stem}: the finding is the model's");
            } else {
                assert_eq!(e.replica, None, "{stem}");
            }
        }
        // the V0 fleet has no V1-only metric to offer
        if spec.metrics == MetricsGeneration::V0 {
            assert!(spec.models.iter().all(|m| !m.spec_decode && m.kv_connector.is_none()), "{stem}");
        }
        // options only where the story needs them
        let needs = incident.kind.needs();
        for m in &spec.models {
            assert_eq!(m.spec_decode, needs.spec_decode && m.name == incident.model, "{stem}: spec_decode on {}", m.name);
            assert_eq!(m.dp_ranks > 1, needs.data_parallel && m.name == incident.model, "{stem}: dp_ranks on {}", m.name);
            assert_eq!(m.waiting_by_reason, needs.waiting_by_reason && m.name == incident.model, "{stem}: waiting_by_reason on {}", m.name);
            assert_eq!(m.kv_connector.is_some(), (needs.nixl || needs.external_cache) && m.name == incident.model, "{stem}: kv_connector on {}", m.name);
        }
    }
    for kind in IncidentKind::ALL {
        if kind.near_miss_of().is_some() || kinds_have_near(kind) {
            assert!(kinds_seen.contains(&kind), "no scenario tells the story of {kind}");
        }
    }
}

/// Kinds that come with a near miss: every pathology of issue 3.
fn kinds_have_near(kind: IncidentKind) -> bool {
    IncidentKind::ALL.iter().any(|k| k.near_miss_of() == Some(kind))
}

mod events;
mod kinds;
mod router;
