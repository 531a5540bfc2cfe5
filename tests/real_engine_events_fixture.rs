//! The real-engine events fixture: what its manifest claims, checked on its raw samples.
//!
//! `scripts/real-engine.sh --events` ran one real vLLM engine (CPU build, tiny random-weight
//! Llama) scraped every 5 s by one real Prometheus, under one moderate load, through `steady-1`, a
//! restart with identical flags, `steady-2`, a restart with `--num-gpu-blocks-override` lowered, and
//! `pressure`; it exported every raw sample and a manifest (phases and restarts) into
//! `fixtures/real-engine-events/`. These tests read the samples themselves, without vllm-diag's
//! diagnosis, and check the facts a diagnosis of restarts and configuration changes will be judged
//! on: one job and instance throughout, the process start time moving at each restart (and only
//! then), `up` at 0 while the engine was down, vLLM's counters starting again from zero,
//! `vllm:cache_config_info` changing exactly as the manifest's `changed` says, and preemptions and a
//! full KV cache in `pressure` only.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-events")
}

/// One series of the export: its name, labels and (time in seconds, value) samples in time order.
struct Series {
    name: String,
    labels: BTreeMap<String, String>,
    samples: Vec<(f64, f64)>,
}

/// `name{a="x",b="y"} value time` (the export's lines) split into its parts.
fn parse_line(line: &str) -> Option<(String, BTreeMap<String, String>, f64, f64)> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices();
        let mut key = String::new();
        let mut value = String::new();
        let mut in_value = false;
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match (in_value, c) {
                (false, '}') => {
                    end = Some(i + 1);
                    break;
                }
                (false, '=') | (false, ',') => {}
                (false, '"') => in_value = true,
                (false, c) => key.push(c),
                (true, '\\') => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (true, '"') => {
                    labels.insert(std::mem::take(&mut key), std::mem::take(&mut value));
                    in_value = false;
                }
                (true, c) => value.push(c),
            }
        }
        rest = &body[end?..];
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next()?.parse().ok()?;
    let time = fields.next()?.parse().ok()?;
    Some((name, labels, value, time))
}

struct Fixture {
    manifest: Value,
    series: Vec<Series>,
}

fn load() -> Fixture {
    let dir = fixtures();
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let manifest: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let path = dir.join("samples.om.gz");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut by_key: BTreeMap<(String, Vec<(String, String)>), Series> = BTreeMap::new();
    for (n, line) in std::io::BufReader::new(flate2::read::GzDecoder::new(file)).lines().enumerate() {
        let line = line.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (name, labels, value, time) = parse_line(&line).unwrap_or_else(|| panic!("{}:{}: not a sample: {line}", path.display(), n + 1));
        let key = (name.clone(), labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
        by_key.entry(key).or_insert_with(|| Series { name, labels, samples: Vec::new() }).samples.push((time, value));
    }
    let mut series: Vec<Series> = by_key.into_values().collect();
    for s in &mut series {
        s.samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Fixture { manifest, series }
}

fn time(v: &Value) -> f64 {
    DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default()).unwrap_or_else(|e| panic!("bad time {v}: {e}")).with_timezone(&Utc).timestamp() as f64
}

impl Fixture {
    fn named<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a Series> + 'a {
        let name = name.to_string();
        self.series.iter().filter(move |s| s.name == name)
    }

    /// The only series of `name` (the lab has one engine).
    fn one(&self, name: &str) -> &Series {
        let found: Vec<&Series> = self.named(name).collect();
        assert_eq!(found.len(), 1, "{name}: expected one series, found {}", found.len());
        found[0]
    }

    fn phase(&self, name: &str) -> &Value {
        self.manifest["phases"].as_array().into_iter().flatten().find(|p| p["name"] == name).unwrap_or_else(|| panic!("manifest: no phase {name}"))
    }

    fn restarts(&self) -> Vec<&Value> {
        self.manifest["restarts"].as_array().into_iter().flatten().collect()
    }

    /// The sum over the series of `name` at each sample time (series share scrape times).
    fn summed(&self, name: &str) -> Vec<(f64, f64)> {
        let mut at: BTreeMap<i64, f64> = BTreeMap::new();
        for s in self.named(name) {
            for &(t, v) in &s.samples {
                *at.entry((t * 1000.0).round() as i64).or_default() += v;
            }
        }
        at.into_iter().map(|(t, v)| (t as f64 / 1000.0, v)).collect()
    }
}

/// How much a counter rose within [from, to], counting a drop as a restart from zero.
fn increase(samples: &[(f64, f64)], from: f64, to: f64) -> f64 {
    let inside: Vec<f64> = samples.iter().filter(|(t, _)| *t >= from && *t <= to).map(|s| s.1).collect();
    inside.windows(2).map(|w| if w[1] >= w[0] { w[1] - w[0] } else { w[1] }).sum()
}

fn last_before(samples: &[(f64, f64)], t: f64) -> Option<(f64, f64)> {
    samples.iter().rev().find(|s| s.0 < t).copied()
}

fn first_after(samples: &[(f64, f64)], t: f64) -> Option<(f64, f64)> {
    samples.iter().find(|s| s.0 >= t).copied()
}

#[test]
fn the_manifest_lists_two_restarts_between_three_phases_in_time_order() {
    let f = load();
    let names: Vec<&str> = f.manifest["phases"].as_array().into_iter().flatten().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["steady-1", "steady-2", "pressure"]);
    let kinds: Vec<&str> = f.restarts().iter().filter_map(|r| r["kind"].as_str()).collect();
    assert_eq!(kinds, ["restart", "config-change"]);
    let (s1, s2, p) = (f.phase("steady-1"), f.phase("steady-2"), f.phase("pressure"));
    let (r1, r2) = (f.restarts()[0], f.restarts()[1]);
    let order = [
        time(&s1["start"]),
        time(&s1["end"]),
        time(&r1["down"]),
        time(&r1["up"]),
        time(&s2["start"]),
        time(&s2["end"]),
        time(&r2["down"]),
        time(&r2["up"]),
        time(&p["start"]),
        time(&p["end"]),
    ];
    assert!(order.windows(2).all(|w| w[0] <= w[1]), "times out of order: {order:?}");
    assert_eq!(s1["baseline_phase"], Value::Null);
    assert_eq!(s2["baseline_phase"], "steady-1");
    assert_eq!(p["baseline_phase"], "steady-2");
    assert!(p["expect_first"].as_array().is_some_and(|a| a.iter().any(|r| r == "kv-cache-pressure")), "{p:#}");
    // The plain restart keeps every flag; the second one changes the KV cache size only.
    assert_eq!(r1["flags_before"], r1["flags_after"]);
    assert_eq!(r1["changed"], serde_json::json!({}));
    assert_ne!(r2["flags_before"], r2["flags_after"]);
    let blocks = &r2["changed"]["num_gpu_blocks"];
    assert_eq!(blocks, &serde_json::json!(["160", "40"]), "{:#}", r2["changed"]);
    assert_eq!(r2["flags_changed"], serde_json::json!({"--num-gpu-blocks-override": ["160", "40"]}));
}

#[test]
fn one_job_and_one_instance_throughout() {
    let f = load();
    let instance = f.manifest["engine"]["instance"].as_str().expect("manifest: engine.instance");
    for s in &f.series {
        assert_eq!(s.labels.get("instance").map(String::as_str), Some(instance), "{} {:?}", s.name, s.labels);
        assert_eq!(s.labels.get("job").map(String::as_str), Some("vllm"), "{} {:?}", s.name, s.labels);
    }
}

#[test]
fn the_process_start_time_moves_at_each_restart_and_only_then() {
    let f = load();
    let start = f.one("process_start_time_seconds");
    let changes: Vec<(f64, f64, f64)> = start.samples.windows(2).filter(|w| w[0].1 != w[1].1).map(|w| (w[1].0, w[0].1, w[1].1)).collect();
    let restarts = f.restarts();
    assert_eq!(changes.len(), restarts.len(), "process start time changes {changes:?} for {} restarts", restarts.len());
    for ((seen, old, new), r) in changes.iter().zip(&restarts) {
        let (down, up) = (time(&r["down"]), time(&r["up"]));
        // First seen on the first scrape after /metrics answered again (5 s scrapes; seconds in the manifest).
        assert!(*seen >= up - 1.0 && *seen <= up + 10.0, "{}: new start time first seen at {seen}, up at {up}", r["kind"]);
        // The new process was launched after the old one was signalled, before it answered.
        assert!(*old < down && *new > down && *new <= up + 1.0, "{}: start time {old} -> {new}, down {down}, up {up}", r["kind"]);
    }
}

#[test]
fn up_is_zero_while_the_engine_is_down_and_one_in_every_phase() {
    let f = load();
    let up = f.one("up");
    for r in f.restarts() {
        let (down, back) = (time(&r["down"]), time(&r["up"]));
        let zeros = up.samples.iter().filter(|(t, v)| *t > down && *t < back && *v == 0.0).count();
        assert!(zeros >= 1, "{}: Prometheus never saw the engine down between {down} and {back}", r["kind"]);
    }
    for p in f.manifest["phases"].as_array().into_iter().flatten() {
        let (from, to) = (time(&p["start"]), time(&p["end"]));
        let inside: Vec<f64> = up.samples.iter().filter(|(t, _)| *t >= from && *t <= to).map(|s| s.1).collect();
        // At least half the scrapes of the phase (5 s apart), every one of them up.
        let expected = (to - from) / 5.0;
        assert!(inside.len() as f64 >= expected / 2.0 && inside.iter().all(|v| *v == 1.0), "{}: up = {inside:?}", p["name"]);
    }
}

#[test]
fn vllm_counters_start_again_from_zero_after_each_restart() {
    let f = load();
    for name in ["vllm:request_success_total", "vllm:prompt_tokens_total", "vllm:generation_tokens_total"] {
        let counter = f.summed(name);
        for r in f.restarts() {
            let (down, up) = (time(&r["down"]), time(&r["up"]));
            let before = last_before(&counter, down).unwrap_or_else(|| panic!("{name}: no sample before {}", r["kind"]));
            let after = first_after(&counter, up - 1.0).unwrap_or_else(|| panic!("{name}: no sample after {}", r["kind"]));
            assert!(before.1 > 0.0 && after.1 < before.1, "{name} at {}: {before:?} -> {after:?}", r["kind"]);
        }
    }
}

#[test]
fn cache_config_info_changes_exactly_as_the_manifest_says() {
    let f = load();
    let infos: Vec<&Series> = f.named("vllm:cache_config_info").collect();
    let at = |t: f64, before: bool| -> &BTreeMap<String, String> {
        let pick = |s: &&Series| if before { last_before(&s.samples, t) } else { first_after(&s.samples, t) };
        let best = infos.iter().filter_map(|s| pick(s).map(|p| (p.0, *s))).reduce(|a, b| match before {
            true if b.0 > a.0 => b,
            false if b.0 < a.0 => b,
            _ => a,
        });
        &best.unwrap_or_else(|| panic!("no cache_config_info around {t}")).1.labels
    };
    assert_eq!(infos.len(), 2, "one cache_config_info label set per configuration");
    for r in f.restarts() {
        let before = at(time(&r["down"]), true);
        let after = at(time(&r["up"]) - 1.0, false);
        let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
        let changed: BTreeMap<String, Value> =
            keys.into_iter().filter(|k| before.get(*k) != after.get(*k)).map(|k| (k.clone(), serde_json::json!([before.get(k), after.get(k)]))).collect();
        let claimed: BTreeMap<String, Value> = r["changed"].as_object().into_iter().flatten().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(changed, claimed, "{}: cache_config_info labels before and after", r["kind"]);
    }
    for (phase, blocks) in [("steady-1", "160"), ("steady-2", "160"), ("pressure", "40")] {
        let p = f.phase(phase);
        let mid = (time(&p["start"]) + time(&p["end"])) / 2.0;
        assert_eq!(at(mid, true).get("num_gpu_blocks").map(String::as_str), Some(blocks), "{phase}");
    }
}

#[test]
fn preemptions_and_a_full_kv_cache_in_pressure_only() {
    let f = load();
    let preemptions = f.summed("vllm:num_preemptions_total");
    let kv = f.summed("vllm:kv_cache_usage_perc");
    for p in f.manifest["phases"].as_array().into_iter().flatten() {
        let (from, to) = (time(&p["start"]), time(&p["end"]));
        let rose = increase(&preemptions, from, to);
        let peak = kv.iter().filter(|(t, _)| *t >= from && *t <= to).map(|s| s.1).fold(0.0, f64::max);
        match p["kind"].as_str() {
            Some("healthy") => {
                assert_eq!(rose, 0.0, "{}: {rose} preemptions", p["name"]);
                assert!(peak > 0.05 && peak < 0.6, "{}: KV usage peaked at {peak}", p["name"]);
            }
            _ => {
                assert!(rose >= 10.0, "{}: only {rose} preemptions", p["name"]);
                assert!(peak >= 0.9, "{}: KV usage peaked at only {peak}", p["name"]);
            }
        }
    }
    // Not one preemption anywhere before the pressure phase (restarts included).
    let pressure = time(&f.phase("pressure")["start"]);
    assert_eq!(increase(&preemptions, 0.0, pressure - 1.0), 0.0, "preemptions before the pressure phase");
}

#[test]
fn the_label_parser_reads_escapes_and_braces_in_values() {
    let (name, labels, value, time) = parse_line(r#"m{a="x}y",b="q\"z\\"} 1.5 1700000000.25"#).expect("a sample");
    assert_eq!((name.as_str(), value, time), ("m", 1.5, 1_700_000_000.25));
    assert_eq!(labels.get("a").map(String::as_str), Some("x}y"));
    assert_eq!(labels.get("b").map(String::as_str), Some("q\"z\\"));
    assert_eq!(parse_line("up 1 1700000000").map(|l| l.2), Some(1.0));
}
