//! Change events: the `[[event]]` syntax and its errors, what each kind writes into the series,
//! the truth `true_events()` gives, and the scenario files built on them.

use super::*;

const M: &str = "org/Model";
const OTHER: &str = "org/Other";

/// One model of `replicas` replicas (and a neighbour with one), 30 s scrapes, 10 + 10 + 20 minutes,
/// with `events` appended (TOML text).
fn spec_with(replicas: u32, events: &str) -> ScenarioSpec {
    let text = format!(
        r#"
name = "unit"
seed = 9
start = "2026-01-15T08:00:00Z"
interval = "30s"
warmup = "10m"
baseline = "10m"
window = "20m"
[[model]]
name = "{M}"
replicas = {replicas}
rate = 2.0
[[model]]
name = "{OTHER}"
replicas = 1
rate = 1.0
{events}"#
    );
    ScenarioSpec::from_toml_str(&text).unwrap_or_else(|e| panic!("{e}\n{events}"))
}

/// The two event scenarios the product's tests judge too (fixtures/scenarios/).
fn parked_replica_removed_overload() -> ScenarioSpec {
    load("replica-removed-overload")
}

fn parked_rollout_slow_decode() -> ScenarioSpec {
    load("rollout-slow-decode")
}

fn load(name: &str) -> ScenarioSpec {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../fixtures/scenarios/{name}.toml"));
    ScenarioSpec::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The series called `name` of one instance (and with `extra` labels).
fn one<'a>(s: &'a [GeneratedSeries], name: &str, instance: &str, extra: &[(&str, &str)]) -> Vec<&'a GeneratedSeries> {
    s.iter()
        .filter(|x| {
            x.name == name
                && x.labels.get("instance").map(String::as_str) == Some(instance)
                && extra.iter().all(|(k, v)| x.labels.get(k).map(String::as_str) == Some(*v))
        })
        .collect()
}

fn value_at(series: &GeneratedSeries, t: DateTime<Utc>) -> Option<f64> {
    let t = secs(t);
    series.points.iter().find(|(pt, _)| (*pt - t).abs() < 1e-6).map(|(_, v)| *v)
}

fn minutes(m: i64) -> chrono::TimeDelta {
    chrono::TimeDelta::minutes(m)
}

fn seconds(s: i64) -> chrono::TimeDelta {
    chrono::TimeDelta::seconds(s)
}

fn kinds<'a>(events: impl IntoIterator<Item = &'a TrueEvent>) -> Vec<(String, DateTime<Utc>, Vec<String>)> {
    events.into_iter().map(|e| (e.kind.clone(), e.time, e.instances.clone())).collect()
}

// ---- the syntax ----

#[test]
fn parses_every_event_kind_with_its_defaults() {
    let spec = spec_with(
        3,
        r#"
[[event]]
kind = "restart"
model = "org/Model"
at = "-18m"
[[event]]
kind = "config-change"
model = "org/Model"
at = "12m"
replicas = [0, 2]
down = "90s"
num_gpu_blocks = 900
[[event]]
kind = "rollout"
model = "org/Model"
at = "8m"
image = "vllm/vllm-openai:v0.9.1"
stagger = "60s"
[[event]]
kind = "replica-removed"
model = "org/Other"
at = "3m"
"#,
    );
    let e = &spec.events;
    assert_eq!(e.len(), 4);
    assert_eq!((e[0].kind, e[0].at_before_end.as_secs(), e[0].replicas.clone()), (EventKind::Restart, 1080, vec![0, 1, 2]));
    assert_eq!(e[0].down.as_secs(), 60, "two scrape intervals by default");
    assert_eq!((e[1].replicas.clone(), e[1].down.as_secs(), e[1].num_gpu_blocks), (vec![0, 2], 90, Some(900)));
    assert_eq!((e[2].stagger.as_secs(), e[2].image.as_deref()), (60, Some("vllm/vllm-openai:v0.9.1")));
    assert_eq!((e[3].kind, e[3].down.as_secs(), e[3].replicas.clone()), (EventKind::ReplicaRemoved, 0, vec![0]));
    assert!(spec.has_kube_state_metrics());
    let default_stagger = spec_with(2, "[[event]]\nkind = \"rollout\"\nmodel = \"org/Model\"\nat = \"5m\"\n");
    assert_eq!(default_stagger.events[0].stagger, default_stagger.interval);
    assert!(!spec_with(2, "").has_kube_state_metrics());
}

#[test]
fn refuses_events_that_cannot_happen_naming_the_field() {
    let ev = |body: &str| format!("[[event]]\n{body}\n");
    for (events, needles) in [
        (ev("kind = \"reboot\"\nmodel = \"org/Model\"\nat = \"5m\""), vec!["reboot", "restart"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\"\ncolour = 1"), vec!["colour"]),
        (ev("kind = \"restart\"\nmodel = \"x\"\nat = \"5m\""), vec!["event[0].model", "org/Model, org/Other"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"soon\""), vec!["event[0].at", "duration"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"45s\""), vec!["event[0].at", "intervals"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"0s\""), vec!["event[0].at", "after the first sample"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"40m\""), vec!["event[0].at", "40m"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\"\nreplicas = [3]"), vec!["event[0].replicas", "0 to 2"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\"\nreplicas = [1, 1]"), vec!["event[0].replicas", "twice"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\"\nreplicas = []"), vec!["event[0].replicas", "empty"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\"\ndown = \"10s\""), vec!["event[0].down", "intervals"]),
        (ev("kind = \"config-change\"\nmodel = \"org/Model\"\nat = \"5m\""), vec!["event[0].num_gpu_blocks", "needs"]),
        (ev("kind = \"config-change\"\nmodel = \"org/Model\"\nat = \"5m\"\nnum_gpu_blocks = 3"), vec!["event[0].num_gpu_blocks", "between"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\"\nnum_gpu_blocks = 900"), vec!["event[0].num_gpu_blocks", "config-change only"]),
        (ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\"\nimage = \"v2\""), vec!["event[0].image", "rollout only"]),
        (ev("kind = \"config-change\"\nmodel = \"org/Model\"\nat = \"5m\"\nnum_gpu_blocks = 900\nstagger = \"30s\""), vec!["event[0].stagger", "rollout only"]),
        (ev("kind = \"rollout\"\nmodel = \"org/Model\"\nat = \"5m\"\nimage = \"a b\""), vec!["event[0].image", "not an image"]),
        (ev("kind = \"replica-added\"\nmodel = \"org/Model\"\nat = \"5m\"\ndown = \"30s\""), vec!["event[0].down", "restart, config-change and rollout only"]),
        (
            ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\"\ndown = \"2m\"") + &ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"4m\""),
            vec!["event[0]", "still down", "event[1]"],
        ),
        (
            ev("kind = \"replica-added\"\nmodel = \"org/Model\"\nat = \"5m\"\nreplicas = [2]") + &ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"8m\""),
            vec!["event[1]", "replica 2", "does not exist yet"],
        ),
        (
            ev("kind = \"replica-removed\"\nmodel = \"org/Model\"\nat = \"8m\"\nreplicas = [0]")
                + &ev("kind = \"restart\"\nmodel = \"org/Model\"\nat = \"5m\""),
            vec!["event[1]", "replica 0", "removed"],
        ),
        (
            ev("kind = \"replica-removed\"\nmodel = \"org/Model\"\nat = \"8m\"\nreplicas = [0]")
                + &ev("kind = \"replica-added\"\nmodel = \"org/Model\"\nat = \"5m\"\nreplicas = [0]"),
            vec!["replica 0", "removed before it is added"],
        ),
        (
            ev("kind = \"replica-removed\"\nmodel = \"org/Model\"\nat = \"8m\"\nreplicas = [0]")
                + &ev("kind = \"replica-removed\"\nmodel = \"org/Model\"\nat = \"5m\"\nreplicas = [0]"),
            vec!["event[1]", "replica-removed twice"],
        ),
    ] {
        refused(3, &events, &needles);
    }
}

/// The spec of `replicas` replicas (and the neighbour) with `tail` appended is refused, and the
/// error says every one of `needles`.
fn refused(replicas: u32, tail: &str, needles: &[&str]) {
    let text = format!(
        "name = \"x\"\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"30s\"\nbaseline = \"10m\"\nwindow = \"20m\"\n\
         [[model]]\nname = \"{M}\"\nreplicas = {replicas}\nrate = 1.0\n[[model]]\nname = \"{OTHER}\"\nreplicas = 1\nrate = 1.0\n{tail}"
    );
    let err = ScenarioSpec::from_toml_str(&text).expect_err(needles[0]).to_string();
    for needle in needles {
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn the_new_expectations_parse_and_are_checked_against_the_events() {
    let restart = "[[event]]\nkind = \"config-change\"\nmodel = \"org/Model\"\nat = \"5m\"\nnum_gpu_blocks = 100\n";
    let spec = spec_with(2, &format!("{restart}[expect]\nfirst = \"kv-cache-pressure\"\nmodel = \"org/Model\"\ncaused_by = \"config-change\"\n"));
    assert_eq!(spec.expect.caused_by.as_deref(), Some("config-change"));
    assert!(!spec.expect.no_cause);
    let spec = spec_with(2, &format!("{restart}[expect]\nhealthy = true\nno_cause = true\n"));
    assert!(spec.expect.no_cause && spec.expect.healthy);
    for (expect, needles) in [
        ("caused_by = \"meteor\"\nfirst = \"x\"\nmodel = \"org/Model\"", vec!["expect.caused_by", "meteor", "config-change, rollout"]),
        ("caused_by = \"config-change\"", vec!["expect.caused_by", "first and model"]),
        ("caused_by = \"config-change\"\nfirst = \"x\"\nmodel = \"org/Model\"\nno_cause = true", vec!["expect.caused_by", "no_cause"]),
        ("caused_by = \"rollout\"\nfirst = \"x\"\nmodel = \"org/Model\"", vec!["expect.caused_by", "no rollout event happens to \"org/Model\""]),
        ("caused_by = \"config-change\"\nfirst = \"x\"\nmodel = \"org/Other\"", vec!["expect.caused_by", "org/Other"]),
        ("blamed = false", vec!["blamed"]),
    ] {
        refused(2, &format!("{restart}[expect]\n{expect}\n"), &needles);
    }
}

// ---- what each kind writes ----

#[test]
fn every_vllm_target_reports_when_its_process_started_and_no_kube_state_metrics_without_a_rollout() {
    let spec = spec_with(2, "");
    let s = generate(&spec);
    let starts: Vec<&GeneratedSeries> = s.iter().filter(|x| x.name == "process_start_time_seconds").collect();
    assert_eq!(starts.len(), 3, "one per vLLM target");
    let ups: Vec<&GeneratedSeries> = s.iter().filter(|x| x.name == "up").collect();
    for st in &starts {
        assert!(ups.iter().any(|u| u.labels == st.labels), "the target labels of up: {:?}", st.labels);
        let v = st.points[0].1;
        assert!(st.points.iter().all(|p| p.1 == v), "constant without a restart");
        assert!(v <= secs(spec.start) - 7200.0 && v > secs(spec.start) - 7200.0 - 200.0, "{v}");
    }
    let mut values: Vec<u64> = starts.iter().map(|x| x.points[0].1 as u64).collect();
    values.dedup();
    assert_eq!(values.len(), 3, "each process started at its own time");
    assert!(!s.iter().any(|x| x.name.starts_with("kube_")), "kube-state-metrics only comes with a rollout");
    let config: Vec<&GeneratedSeries> = s.iter().filter(|x| x.name == "vllm:cache_config_info").collect();
    assert!(config.iter().all(|c| c.labels.get("num_gpu_blocks").is_some_and(|b| b.parse::<u64>().is_ok())));
}

#[test]
fn a_restart_takes_the_target_down_then_resets_every_counter_and_moves_the_process_start() {
    let spec = spec_with(3, "[[event]]\nkind = \"restart\"\nmodel = \"org/Model\"\nat = \"10m\"\nreplicas = [1]\ndown = \"90s\"\n");
    let s = generate(&spec);
    let at = spec.window_end() - minutes(10);
    let back = at + seconds(90);
    let inst = spec.instance_of(M, 1).expect("replica 1");
    let up = one(&s, "up", &inst, &[])[0];
    for k in 0..3 {
        assert_eq!(value_at(up, at + seconds(30 * k)), Some(0.0), "down {k}");
    }
    assert_eq!(value_at(up, at - seconds(30)), Some(1.0));
    assert_eq!(value_at(up, back), Some(1.0));
    for name in ["vllm:prompt_tokens_total", "vllm:time_to_first_token_seconds_count", "vllm:num_requests_running", "process_start_time_seconds"] {
        let x = one(&s, name, &inst, &[])[0];
        assert_eq!(x.points.len(), spec.sample_count() - 3, "{name}: absent while down");
        assert!(value_at(x, at).is_none() && value_at(x, back).is_some(), "{name}");
    }
    let prompt = one(&s, "vllm:prompt_tokens_total", &inst, &[])[0];
    let before = value_at(prompt, at - seconds(30)).expect("a sample");
    assert!(before > 1000.0);
    assert_eq!(value_at(prompt, back), Some(0.0), "a fresh process has counted nothing");
    let later = value_at(prompt, spec.window_end()).expect("a sample");
    assert!(later > 0.0 && later < before, "counting again from 0: {later}");
    for bucket in one(&s, "vllm:time_to_first_token_seconds_bucket", &inst, &[]) {
        assert_eq!(value_at(bucket, back), Some(0.0), "histograms reset too");
    }
    for gauge in ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"] {
        assert_eq!(value_at(one(&s, gauge, &inst, &[])[0], back), Some(0.0), "{gauge}: an empty engine");
    }
    let start = one(&s, "process_start_time_seconds", &inst, &[])[0];
    assert_eq!(value_at(start, back), Some(secs(back)));
    assert!(value_at(start, at - seconds(30)).expect("a sample") < secs(spec.start));
    // The peers were untouched (and took the load meanwhile); the labels never changed.
    let peer = spec.instance_of(M, 0).expect("replica 0");
    assert_eq!(one(&s, "up", &peer, &[])[0].points.iter().filter(|p| p.1 == 0.0).count(), 0);
    assert_eq!(one(&s, "vllm:prompt_tokens_total", &inst, &[]).len(), 1, "the same series throughout");
    assert_eq!(one(&s, "vllm:cache_config_info", &inst, &[]).len(), 1);
}

#[test]
fn a_restart_between_two_scrapes_resets_counters_without_a_failed_scrape() {
    let spec = spec_with(2, "[[event]]\nkind = \"restart\"\nmodel = \"org/Model\"\nat = \"10m\"\ndown = \"0s\"\n");
    let s = generate(&spec);
    let at = spec.window_end() - minutes(10);
    for r in 0..2 {
        let inst = spec.instance_of(M, r).expect("a replica");
        assert!(one(&s, "up", &inst, &[])[0].points.iter().all(|p| p.1 == 1.0));
        let c = one(&s, "vllm:generation_tokens_total", &inst, &[])[0];
        assert_eq!(c.points.len(), spec.sample_count());
        assert_eq!(value_at(c, at), Some(0.0));
        assert_eq!(value_at(one(&s, "process_start_time_seconds", &inst, &[])[0], at), Some(secs(at)));
    }
    let truth = kinds(&spec.true_events());
    assert_eq!(truth.len(), 1, "{truth:?}");
    assert_eq!(truth[0].0, "restart");
}

#[test]
fn a_config_change_restarts_with_the_new_cache_size_in_the_labels_and_in_the_engine() {
    let spec = spec_with(3, "[[event]]\nkind = \"config-change\"\nmodel = \"org/Model\"\nat = \"10m\"\nreplicas = [0, 2]\nnum_gpu_blocks = 400\n");
    let s = generate(&spec);
    let at = spec.window_end() - minutes(10);
    let back = at + seconds(60);
    let sized = crate::sim::gpu_blocks(&spec.models[0]).to_string();
    for r in 0..3 {
        let inst = spec.instance_of(M, r).expect("a replica");
        let configs = one(&s, "vllm:cache_config_info", &inst, &[]);
        let blocks: Vec<&str> = configs.iter().map(|c| c.labels["num_gpu_blocks"].as_str()).collect();
        let kv = View::new(&s, M, back, spec.window_end()).replica(&inst);
        let preempted = kv.increase("vllm:num_preemptions_total");
        let before = View::new(&s, M, spec.baseline_start(), at - seconds(30)).replica(&inst);
        assert_eq!(before.increase("vllm:num_preemptions_total"), 0.0, "replica {r}: no preemption before");
        if r == 1 {
            assert_eq!(blocks, vec![sized.as_str()], "replica 1 keeps its cache");
            assert!(kv.gauge_range("vllm:kv_cache_usage_perc").1 <= 0.6);
            assert_eq!(preempted, 0.0);
            continue;
        }
        assert_eq!(blocks.len(), 2, "before and after: {blocks:?}");
        let old = configs.iter().find(|c| c.labels["num_gpu_blocks"] == sized).expect("the old size");
        let new = configs.iter().find(|c| c.labels["num_gpu_blocks"] == "400").expect("the new size");
        assert_eq!(old.points.last().map(|p| p.0), Some(secs(at) - 30.0), "the old config ends at the restart");
        assert_eq!(new.points.first().map(|p| p.0), Some(secs(back)), "the new one begins when it answers");
        // A quarter of the cache: the working set no longer fits.
        let after = View::new(&s, M, back + seconds(30), spec.window_end()).replica(&inst);
        let (lo, hi) = after.gauge_range("vllm:kv_cache_usage_perc");
        assert!(lo >= 0.95 && hi <= 1.0, "replica {r}: KV {lo}..{hi}");
        let rate = after.increase("vllm:num_preemptions_total") / (after.to - after.from);
        assert!((0.3..=1.6).contains(&rate), "replica {r}: {rate} preemptions/s");
    }
}

#[test]
fn a_config_change_to_a_bigger_cache_only_lowers_kv_usage() {
    let spec = spec_with(2, "[[event]]\nkind = \"config-change\"\nmodel = \"org/Model\"\nat = \"10m\"\ndown = \"0s\"\nnum_gpu_blocks = 4000\n");
    let s = generate(&spec);
    let at = spec.window_end() - minutes(10);
    let after = View::new(&s, M, at + seconds(30), spec.window_end());
    let before = View::new(&s, M, spec.baseline_start(), at - seconds(30));
    let (_, hi) = after.gauge_range("vllm:kv_cache_usage_perc");
    assert!(hi < 0.3, "KV {hi}");
    assert_eq!(after.increase("vllm:num_preemptions_total"), 0.0);
    let ratio = after.quantile(0.95, TTFT) / before.quantile(0.95, TTFT);
    assert!((0.8..1.25).contains(&ratio), "TTFT x{ratio}");
}

#[test]
fn a_rollout_renames_pods_one_after_the_other_and_kube_state_metrics_tells_it() {
    let spec = spec_with(
        3,
        "[[event]]\nkind = \"rollout\"\nmodel = \"org/Model\"\nat = \"10m\"\ndown = \"30s\"\nstagger = \"60s\"\nimage = \"vllm/vllm-openai:v0.9.1\"\n",
    );
    let s = generate(&spec);
    let at = spec.window_end() - minutes(10);
    let old: Vec<String> = spec.replicas().into_iter().filter(|r| r.model == M).map(|r| r.pod).collect();
    let mut new_pods = Vec::new();
    for r in 0..3u32 {
        let inst = spec.instance_of(M, r).expect("a replica");
        let down = at + seconds(60 * i64::from(r));
        let back = down + seconds(30);
        let up = one(&s, "up", &inst, &[]);
        let pods: Vec<&str> = up.iter().map(|u| u.labels["pod"].as_str()).collect();
        assert_eq!(pods.len(), 2, "replica {r}: old and new pod: {pods:?}");
        let old_up = up.iter().find(|u| u.labels["pod"] == old[r as usize]).expect("the old pod");
        let new_up = up.iter().find(|u| u.labels["pod"] != old[r as usize]).expect("a new pod");
        assert_eq!(value_at(old_up, down), Some(0.0), "replica {r}: the old pod's scrape fails");
        assert_eq!(old_up.points.last().map(|p| p.0), Some(secs(down)));
        assert_eq!(new_up.points.first().map(|p| (p.0, p.1)), Some((secs(back), 1.0)));
        let new_pod = new_up.labels["pod"].clone();
        assert!(new_pod.starts_with("model-") && new_pod.len() == old[0].len(), "{new_pod}");
        let start = one(&s, "process_start_time_seconds", &inst, &[("pod", &new_pod)]);
        assert_eq!(start.len(), 1);
        assert_eq!(start[0].points.first().map(|p| p.1), Some(secs(back)), "a fresh process");
        let prompt = one(&s, "vllm:prompt_tokens_total", &inst, &[("pod", &new_pod)])[0];
        assert_eq!(prompt.points.first().map(|p| p.1), Some(0.0), "counters from 0 in the new pod");
        let info = s.iter().filter(|x| x.name == "kube_pod_container_info" && x.labels.get("pod") == Some(&new_pod)).collect::<Vec<_>>();
        assert_eq!(info.len(), 1);
        assert_eq!(info[0].labels["image"], "vllm/vllm-openai:v0.9.1");
        assert_eq!(info[0].points.first().map(|p| p.0), Some(secs(back)));
        let old_info =
            s.iter().find(|x| x.name == "kube_pod_container_info" && x.labels.get("pod") == Some(&old[r as usize])).expect("the old pod's container");
        assert_eq!(old_info.labels["image"], DEFAULT_IMAGE);
        assert_eq!(old_info.points.last().map(|p| p.0), Some(secs(down) - 30.0));
        new_pods.push(new_pod);
    }
    let template = |p: &str| p[..p.len() - 6].to_string();
    assert!(new_pods.iter().all(|p| template(p) == template(&new_pods[0])), "one new template hash: {new_pods:?}");
    assert_ne!(template(&new_pods[0]), template(&old[0]));
    // Deployment generations: 3 -> 4 at the rollout, observed one scrape later.
    let gen =
        |name: &str| s.iter().find(|x| x.name == name && x.labels.get("deployment").map(String::as_str) == Some("model")).unwrap_or_else(|| panic!("{name}"));
    let meta = gen("kube_deployment_metadata_generation");
    let observed = gen("kube_deployment_status_observed_generation");
    assert_eq!(meta.labels["job"], "kube-state-metrics");
    assert_eq!(meta.labels["instance"], "kube-state-metrics:8080");
    assert_eq!(meta.labels["namespace"], "inference");
    assert_eq!((value_at(meta, at - seconds(30)), value_at(meta, at)), (Some(3.0), Some(4.0)));
    assert_eq!((value_at(observed, at), value_at(observed, at + seconds(30))), (Some(3.0), Some(4.0)));
    // The neighbour's Deployment is reported too, unchanged; restarts stay 0 in a rollout.
    let other = s.iter().find(|x| x.name == "kube_deployment_metadata_generation" && x.labels["deployment"] == "other").expect("the other deployment");
    assert!(other.points.iter().all(|p| p.1 == 3.0));
    let restarts: Vec<&GeneratedSeries> = s.iter().filter(|x| x.name == "kube_pod_container_status_restarts_total").collect();
    assert_eq!(restarts.len(), 3 + 3 + 1, "old pods, new pods, the neighbour's pod");
    assert!(restarts.iter().all(|x| x.points.iter().all(|p| p.1 == 0.0)));
    assert!(s.iter().any(|x| x.name == "up" && x.labels["job"] == "kube-state-metrics"));
}

#[test]
fn an_added_replica_has_no_series_before_it_appears_and_a_removed_one_none_after_it_left() {
    let spec = spec_with(
        3,
        "[[event]]\nkind = \"replica-added\"\nmodel = \"org/Model\"\nat = \"12m\"\nreplicas = [2]\n\
         [[event]]\nkind = \"replica-removed\"\nmodel = \"org/Model\"\nat = \"6m\"\nreplicas = [0]\n",
    );
    let s = generate(&spec);
    let added = spec.window_end() - minutes(12);
    let removed = spec.window_end() - minutes(6);
    let new = spec.instance_of(M, 2).expect("replica 2");
    let gone = spec.instance_of(M, 0).expect("replica 0");
    for x in s.iter().filter(|x| x.labels.get("instance") == Some(&new)) {
        assert_eq!(x.points.first().map(|p| p.0), Some(secs(added)), "{} before the replica exists", x.name);
    }
    assert_eq!(value_at(one(&s, "vllm:prompt_tokens_total", &new, &[])[0], added), Some(0.0));
    assert_eq!(value_at(one(&s, "process_start_time_seconds", &new, &[])[0], added), Some(secs(added)));
    for x in s.iter().filter(|x| x.labels.get("instance") == Some(&gone)) {
        assert_eq!(x.points.last().map(|p| p.0), Some(secs(removed) - 30.0), "{} after the replica left", x.name);
        assert!(x.points.iter().all(|p| x.name != "up" || p.1 == 1.0), "a removed target is not down, it is gone");
    }
    // The model's traffic is shared by the replicas that serve: replica 1 carries 1.5x while
    // replica 2 is not there yet and after replica 0 left.
    let r1 = spec.instance_of(M, 1).expect("replica 1");
    let rate =
        |from: DateTime<Utc>, to: DateTime<Utc>| View::new(&s, M, from, to).replica(&r1).increase("vllm:request_success_total") / (secs(to) - secs(from));
    let alone_with_one = rate(spec.baseline_start(), added);
    let three = rate(added + seconds(30), removed);
    let ratio = alone_with_one / three;
    assert!((1.3..1.7).contains(&ratio), "x{ratio}");
}

#[test]
fn losing_half_the_replicas_overloads_the_others_past_max_num_seqs() {
    let spec = parked_replica_removed_overload();
    let s = generate(&spec);
    let at = spec.window_end() - minutes(15);
    let model = "meta-llama/Llama-3.1-8B-Instruct";
    let before = View::new(&s, model, spec.baseline_start(), at - seconds(30));
    assert!(before.quantile(0.95, QUEUE) < 0.3, "queue P95 before {}", before.quantile(0.95, QUEUE));
    let (_, hi) = before.gauge_range("vllm:num_requests_running");
    assert!(hi < 30.0, "room to spare before: {hi}");
    let served = |v: &View| v.increase("vllm:request_success_total") / (v.to - v.from);
    let mut after_total = 0.0;
    // the two replicas left
    for r in 0..2 {
        let inst = spec.instance_of(model, r).expect("a replica");
        let after = View::new(&s, model, at + seconds(30), spec.window_end()).replica(&inst);
        assert!(after.quantile(0.95, QUEUE) > 1.5, "replica {r}: queue P95 after {}", after.quantile(0.95, QUEUE));
        let ttft = after.quantile(0.95, TTFT) / before.quantile(0.95, TTFT);
        assert!(ttft > 4.0, "replica {r}: TTFT x{ttft}");
        let itl = after.quantile(0.95, ITL) / before.quantile(0.95, ITL);
        assert!((0.9..1.1).contains(&itl), "replica {r}: ITL x{itl}");
        let (lo, _) = after.gauge_range("vllm:num_requests_running");
        assert!(lo >= 29.0, "replica {r}: running pinned at max_num_seqs = 30: {lo}");
        assert!(after.gauge_avg("vllm:num_requests_waiting") > 3.0);
        after_total += served(&after);
    }
    let total = after_total / served(&before);
    assert!((0.9..1.1).contains(&total), "the model's traffic is unchanged: x{total}");
}

// ---- the truth ----

#[test]
fn the_truth_lists_each_wave_outage_change_and_scaling_at_its_first_sample() {
    let spec = spec_with(
        3,
        r#"
[[event]]
kind = "config-change"
model = "org/Model"
at = "16m"
replicas = [0, 2]
down = "60s"
num_gpu_blocks = 900
[[event]]
kind = "rollout"
model = "org/Model"
at = "10m"
down = "30s"
stagger = "60s"
image = "vllm/vllm-openai:v0.9.1"
[[event]]
kind = "replica-added"
model = "org/Other"
at = "14m"
[[event]]
kind = "replica-removed"
model = "org/Model"
at = "3m"
replicas = [1]
"#,
    );
    let end = spec.window_end();
    let i = |r: u32| spec.instance_of(M, r).expect("a replica");
    let other = spec.instance_of(OTHER, 0).expect("the neighbour");
    let truth = spec.true_events();
    let sized = crate::sim::gpu_blocks(&spec.models[0]);
    let find = |kind: &str| truth.iter().filter(|e| e.kind == kind).collect::<Vec<_>>();
    let config = find("config-change");
    assert_eq!(config.len(), 1);
    assert_eq!((config[0].time, config[0].instances.clone()), (end - minutes(15), vec![i(0), i(2)]));
    assert_eq!(config[0].detail, format!("num_gpu_blocks {sized} -> 900"));
    let restarts = find("restart");
    assert_eq!(restarts.iter().map(|e| e.time).collect::<Vec<_>>(), vec![end - minutes(16), end - minutes(10)]);
    assert_eq!(restarts[0].instances, vec![i(0), i(2)]);
    assert_eq!(restarts[0].detail, "2 of 3 replicas");
    assert_eq!(restarts[1].instances, vec![i(0), i(1), i(2)]);
    let rollout = find("rollout");
    assert_eq!(rollout.len(), 1);
    assert_eq!(rollout[0].time, end - minutes(10));
    assert_eq!(rollout[0].detail, format!("generation 3 -> 4, image {DEFAULT_IMAGE} -> vllm/vllm-openai:v0.9.1"));
    let version = find("version-change");
    assert_eq!(version.len(), 1);
    assert_eq!(version[0].time, end - minutes(10) + seconds(30), "the first new pod answers");
    assert_eq!(version[0].detail, format!("image {DEFAULT_IMAGE} -> vllm/vllm-openai:v0.9.1"));
    let downs: Vec<(DateTime<Utc>, Vec<String>)> = find("target-down").iter().map(|e| (e.time, e.instances.clone())).collect();
    assert_eq!(
        downs,
        vec![
            (end - minutes(16), vec![i(0)]),
            (end - minutes(16), vec![i(2)]),
            (end - minutes(10), vec![i(0)]),
            (end - minutes(9), vec![i(1)]),
            (end - minutes(8), vec![i(2)]),
        ]
    );
    let ups: Vec<DateTime<Utc>> = find("target-up").iter().map(|e| e.time).collect();
    assert_eq!(
        ups,
        vec![end - minutes(15), end - minutes(15), end - minutes(10) + seconds(30), end - minutes(9) + seconds(30), end - minutes(8) + seconds(30)]
    );
    assert_eq!(kinds(find("replica-added")), vec![("replica-added".to_string(), end - minutes(14), vec![other])]);
    assert_eq!(kinds(find("replica-removed")), vec![("replica-removed".to_string(), end - minutes(3), vec![i(1)])]);
    assert!(truth.windows(2).all(|w| w[0].time <= w[1].time), "oldest first");
    assert_eq!(truth.len(), 1 + 2 + 1 + 1 + 5 + 5 + 1 + 1);
}

#[test]
fn the_truth_of_a_rollout_that_keeps_the_image_has_no_version_change_and_an_outage_past_the_end_no_target_up() {
    // replica 0 is down from 60 s before the end, replica 1 from 30 s: both for 90 s
    let spec = spec_with(2, "[[event]]\nkind = \"rollout\"\nmodel = \"org/Model\"\nat = \"1m\"\ndown = \"90s\"\n");
    let truth = spec.true_events();
    assert!(!truth.iter().any(|e| e.kind == "version-change"));
    assert_eq!(truth.iter().find(|e| e.kind == "rollout").map(|e| e.detail.as_str()), Some("generation 3 -> 4"));
    assert_eq!(truth.iter().filter(|e| e.kind == "target-down").count(), 2);
    assert_eq!(truth.iter().filter(|e| e.kind == "target-up").count(), 0, "still down at the window's end");
    let s = generate(&spec);
    let pods = s.iter().filter(|x| x.name == "up" && x.labels["job"] == "vllm" && x.labels["instance"].starts_with("model-")).count();
    assert_eq!(pods, 2, "the new pods never answered inside the timeline");
}

#[test]
fn the_truth_of_the_incidents_that_are_events_too() {
    let text = |kind: &str| {
        format!(
            "name = \"x\"\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"30s\"\nwarmup = \"10m\"\nbaseline = \"30m\"\nwindow = \"30m\"\n\
             [[model]]\nname = \"{M}\"\nreplicas = 3\nrate = 1.0\ndcgm = true\n[incident]\nkind = \"{kind}\"\nmodel = \"{M}\"\nreplica = 2\n"
        )
    };
    let spec = ScenarioSpec::from_toml_str(&text("gpu-errors")).expect("parses");
    let truth = spec.true_events();
    assert_eq!(truth.len(), 1);
    let e = &truth[0];
    assert_eq!((e.kind.as_str(), e.instances.clone()), ("gpu-error", vec![spec.instance_of(M, 2).expect("replica 2")]));
    // the first sample that shows XID 79
    let s = generate(&spec);
    let xid = s.iter().find(|x| x.name == "DCGM_FI_DEV_XID_ERRORS" && x.labels["Hostname"] == "gpu-node-02").expect("replica 2's GPU");
    let first = xid.points.iter().find(|p| p.1 != 0.0).expect("an XID").0;
    assert_eq!(secs(e.time), first);
    assert_eq!(e.detail, "XID 79 on gpu-node-02");

    let spec = ScenarioSpec::from_toml_str(&text("target-down")).expect("parses");
    let truth = spec.true_events();
    let s = generate(&spec);
    let up = s.iter().find(|x| x.name == "up" && x.labels["instance"] == "model-2:8000").expect("replica 2's up");
    let first = up.points.iter().find(|p| p.1 == 0.0).expect("a failed scrape").0;
    assert_eq!(kinds(&truth), vec![("target-down".to_string(), truth[0].time, vec!["model-2:8000".to_string()])]);
    assert_eq!(secs(truth[0].time), first);
    assert!(ScenarioSpec::from_toml_str(&text("gpu-errors-near")).expect("parses").true_events().is_empty());
}

#[test]
fn the_scenario_files_tell_their_events_and_the_truth_says_when() {
    let llama = "meta-llama/Llama-3.1-8B-Instruct";
    let qwen = "Qwen/Qwen2.5-7B-Instruct";
    let i = |spec: &ScenarioSpec, m: &str, r: u32| spec.instance_of(m, r).expect("a replica");
    let summary = |spec: &ScenarioSpec| -> Vec<(String, i64, usize)> {
        let end = spec.window_end();
        spec.true_events().iter().map(|e| (e.kind.clone(), (end - e.time).num_seconds(), e.instances.len())).collect()
    };
    let s = |k: &str, before_end: i64, n: usize| (k.to_string(), before_end, n);

    let spec = load("config-change-kv-pressure");
    // at the same time: sorted by kind
    assert_eq!(summary(&spec), vec![s("config-change", 1200, 2), s("restart", 1200, 2)]);
    let truth = spec.true_events();
    assert_eq!(truth[0].detail, "num_gpu_blocks 1578 -> 400");
    assert_eq!(truth[0].instances, vec![i(&spec, llama, 0), i(&spec, llama, 2)]);
    assert_eq!(spec.expect.caused_by.as_deref(), Some("config-change"));

    let spec = load("config-change-near");
    assert_eq!(summary(&spec), vec![s("config-change", 900, 3), s("restart", 900, 3)]);
    assert_eq!(spec.true_events()[0].detail, "num_gpu_blocks 1578 -> 4000");
    assert!(spec.expect.no_cause && spec.expect.healthy);

    let spec = load("restart-near");
    assert_eq!(summary(&spec), vec![s("restart", 900, 2)]);
    assert_eq!(spec.true_events()[0].model, qwen);
    assert!(spec.expect.no_cause && spec.expect.healthy);

    let spec = parked_rollout_slow_decode();
    assert_eq!(summary(&spec), vec![s("restart", 1320, 3), s("rollout", 1320, 3), s("version-change", 1320, 3)]);
    assert_eq!(spec.incident_onset(), Some(spec.window_end() - minutes(20)), "decode slows once the last new pod serves");
    assert_eq!(spec.expect.caused_by.as_deref(), Some("rollout"));

    let spec = load("rollout-near");
    assert_eq!(summary(&spec), vec![s("restart", 900, 3), s("rollout", 900, 3), s("version-change", 900, 3)]);
    assert!(spec.expect.no_cause && spec.expect.healthy);

    let spec = parked_replica_removed_overload();
    assert_eq!(summary(&spec), vec![s("replica-removed", 900, 1), s("replica-removed", 900, 1)]);
    assert_eq!(spec.expect.caused_by.as_deref(), Some("replica-removed"));
}

#[test]
fn after_a_config_change_to_a_quarter_of_the_cache_the_changed_replicas_fill_and_preempt() {
    let spec = load("config-change-kv-pressure");
    let s = generate(&spec);
    let model = "meta-llama/Llama-3.1-8B-Instruct";
    let at = spec.window_end() - minutes(20);
    for r in 0..3 {
        let inst = spec.instance_of(model, r).expect("a replica");
        let before = View::new(&s, model, spec.baseline_start(), at - seconds(30)).replica(&inst);
        let after = View::new(&s, model, at + seconds(30), spec.window_end()).replica(&inst);
        assert_eq!(before.increase("vllm:num_preemptions_total"), 0.0, "replica {r}");
        assert!(before.gauge_range("vllm:kv_cache_usage_perc").1 <= 0.6, "replica {r}");
        if r == 1 {
            assert!(after.gauge_range("vllm:kv_cache_usage_perc").1 <= 0.6);
            assert_eq!(after.increase("vllm:num_preemptions_total"), 0.0);
            continue;
        }
        let (lo, hi) = after.gauge_range("vllm:kv_cache_usage_perc");
        assert!(lo >= 0.95 && hi <= 1.0, "replica {r}: KV {lo}..{hi}");
        // preempting in every interval after the change
        let preempt = one(&s, "vllm:num_preemptions_total", &inst, &[])[0];
        let inside: Vec<&(f64, f64)> = preempt.points.iter().filter(|(t, _)| *t >= after.from).collect();
        let rising = inside.windows(2).filter(|p| p[1].1 > p[0].1).count();
        assert!(rising as f64 >= 0.8 * (inside.len() - 1) as f64, "replica {r}: {rising} of {}", inside.len() - 1);
        let ratio = after.quantile(0.95, QUEUE);
        assert!(ratio > 1.0, "replica {r}: queue P95 {ratio}");
    }
    // The neighbour is untouched.
    let qwen = View::new(&s, "Qwen/Qwen2.5-7B-Instruct", spec.window_start(), spec.window_end());
    assert_eq!(qwen.increase("vllm:num_preemptions_total"), 0.0);
}

#[test]
fn events_are_deterministic_from_the_seed() {
    let spec = parked_rollout_slow_decode();
    let render = super::openmetrics_of;
    let a = render(&spec);
    assert_eq!(a, render(&spec));
    assert_eq!(spec.true_events(), spec.true_events());
    let mut other = spec.clone();
    other.seed += 1;
    let b = render(&other);
    assert_ne!(a, b);
    // another seed draws other new pod names
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).to_string();
    let pods = |t: &str| -> std::collections::BTreeSet<String> {
        t.lines().filter(|l| l.starts_with("kube_pod_container_info{")).filter_map(|l| l.split("pod=\"").nth(1)?.split('"').next().map(String::from)).collect()
    };
    assert_ne!(pods(&text(&a)), pods(&text(&b)));
}
