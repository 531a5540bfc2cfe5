//! The exported alerts page once per incident. For each generated incident, a real Prometheus holds
//! it (ending now) and evaluates the rule file `rules export` writes; a real Alertmanager, set up
//! with what `rules export --format alertmanager` writes (the route grouping by model, the inhibit
//! rules mirroring each rule's `supersedes`), notifies a loopback webhook. One notification group
//! must arrive, on the incident's model, and its alerts must be the cause's first, with none of the
//! alerts the cause absorbs (which explain lists under it as "Also explains").

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use common::alertmanager::Alertmanager;
use common::{free_port, load_scenario, PromServer};

fn export(args: &[&str]) -> String {
    let out =
        Command::new(env!("CARGO_BIN_EXE_vllm-diag")).args(["--no-config", "rules", "export"]).args(args).stdin(Stdio::null()).output().expect("rules export");
    assert!(out.status.success(), "rules export {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Every webhook notification's body, as JSON.
fn receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let store = got.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0usize;
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim_end().is_empty() {
                    break;
                }
                if let Some((k, v)) = h.split_once(':') {
                    if k.eq_ignore_ascii_case("content-length") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                store.lock().unwrap().push(v);
            }
        }
    });
    (url, got)
}

/// Alertmanager with the generated route and inhibit rules, its route's receiver the webhook.
fn alertmanager(addr: SocketAddr, generated: &str, hook: &str) -> Alertmanager {
    // The generated route goes under a root route with a receiver; nothing else is changed.
    assert!(generated.contains("\nroute:\n  routes:\n"), "the generated route moved:\n{generated}");
    let config = generated.replacen(
        "\nroute:\n  routes:\n",
        "\nroute:\n  receiver: hook\n  group_wait: 10s\n  group_interval: 5m\n  repeat_interval: 4h\n  routes:\n",
        1,
    ) + &format!("receivers:\n  - name: hook\n    webhook_configs:\n      - url: {hook}\n");
    Alertmanager::start_with_config(&config, addr)
}

/// One incident, end to end: (the groups notified, each group's alerts' rules in order).
fn notified(name: &str, rules: &str, generated: &str) -> Vec<(String, Vec<String>, Vec<String>)> {
    let spec = common::ending_now(name);
    let am_addr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (hook, got) = receiver();
    let am = alertmanager(am_addr, generated, &hook);
    let extra = format!("rule_files: [vllm-diag.rules.yml]\nalerting:\n  alertmanagers:\n    - static_configs:\n        - targets: ['{am_addr}']\n");
    let _prom = PromServer::start_generated_with(&spec, &extra, &[("vllm-diag.rules.yml", rules)]);
    // The first notification, then long enough for any other group's (its group_wait is the same).
    let started = Instant::now();
    while got.lock().unwrap().is_empty() {
        if started.elapsed() > Duration::from_secs(240) {
            panic!("{name}: no notification in 240 s; alertmanager's log:\n{}", am.log());
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(15));
    let got = got.lock().unwrap().clone();
    got.iter()
        .map(|n| {
            let rules = |status: &str| -> Vec<String> {
                n["alerts"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|a| a["status"] == status)
                    .map(|a| a["labels"]["vllm_diag_rule"].as_str().unwrap_or_default().to_string())
                    .collect()
            };
            (
                n["groupKey"].as_str().unwrap_or_default().to_string(),
                rules("firing"),
                vec![n["groupLabels"]["model_name"].as_str().unwrap_or_default().to_string()],
            )
        })
        .collect()
}

#[test]
fn each_generated_incident_pages_once_with_the_causes_alert_first() {
    // Evaluated every two seconds, held for none: the incident is already under way when the
    // servers start.
    let rules = export(&["--for", "0s"]).replacen("  - name: \"vllm-diag\"\n", "  - name: \"vllm-diag\"\n    interval: 2s\n", 1);
    assert!(rules.contains("interval: 2s"), "the export's group line moved");
    let generated = export(&["--format", "alertmanager"]);
    let incidents = ["kv-cache-pressure", "slow-decode", "request-errors", "load-exceeds-capacity"];
    let results: Vec<(String, Vec<(String, Vec<String>, Vec<String>)>)> = std::thread::scope(|s| {
        let handles: Vec<_> = incidents.iter().map(|name| s.spawn(|| (name.to_string(), notified(name, &rules, &generated)))).collect();
        handles.into_iter().map(|h| h.join().expect("incident thread")).collect()
    });
    let set: Vec<(String, Vec<String>)> = generated
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- source_matchers: [\"vllm_diag_rule=\\\"").and_then(|r| r.split('\\').next()).map(str::to_string))
        .map(|source| {
            let block = generated.split(&format!("vllm_diag_rule=\\\"{source}\\\"\"]\n")).nth(1).unwrap_or_default();
            let targets = block.lines().next().and_then(|l| l.split("=~\\\"").nth(1)).and_then(|r| r.split('\\').next()).unwrap_or_default();
            (source, targets.split('|').map(str::to_string).collect())
        })
        .collect();
    assert!(set.iter().any(|(s, t)| s == "kv-cache-pressure" && t.contains(&"slo-burn".to_string())), "{set:?}");
    for (name, notifications) in results {
        let spec = load_scenario(&name);
        let (cause, model) = (spec.expect.first.clone().unwrap(), spec.expect.model.clone().unwrap());
        let groups: std::collections::BTreeSet<&String> = notifications.iter().map(|(k, _, _)| k).collect();
        assert_eq!(groups.len(), 1, "{name}: one notification group per incident, got {notifications:?}");
        let (_, alerts, labels) = &notifications[0];
        assert_eq!(labels, &vec![model.clone()], "{name}: the group is the incident's model");
        assert_eq!(alerts.first(), Some(&cause), "{name}: the cause's alert first: {alerts:?}");
        let absorbed = set.iter().find(|(s, _)| *s == cause).map(|(_, t)| t.clone()).unwrap_or_default();
        for a in alerts {
            assert!(!absorbed.contains(a), "{name}: {a} paged although {cause} absorbs it: {alerts:?}");
        }
        println!("{name}: one page, alerts {alerts:?}");
    }
}
