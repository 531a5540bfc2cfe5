//! `rules export --backtest` against a real Prometheus holding generated scenarios: each
//! incident's alert fires once, on the incident's model, after the incident began; nothing at
//! warning or critical fires on the healthy fleets; a range without vLLM data is "not evaluated"
//! (exit 3), never a quiet week; credentials go to the server and nowhere else.

mod common;

use common::run::{run, Run};
use serde_json::Value;

/// `rules export --backtest <range> --at <end> --prometheus <url> --json` plus `extra`.
fn backtest(url: &str, range: &str, at: &str, extra: &[&str]) -> Run {
    let mut args = vec!["--no-config", "rules", "export", "--backtest", range, "--at", at, "--prometheus", url, "--json"];
    args.extend_from_slice(extra);
    run(&args, &[])
}

/// The alerts that fired, as (alert, rule, severity, episodes).
fn fired(json: &Value) -> Vec<(String, String, String, Vec<Value>)> {
    json["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .filter(|a| a["status"] == "fired")
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap_or_default().to_string();
            (s("alert"), s("rule"), s("severity"), a["episodes"].as_array().cloned().unwrap_or_default())
        })
        .collect()
}

fn time(v: &Value) -> chrono::DateTime<chrono::Utc> {
    v.as_str().and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&chrono::Utc)).unwrap_or_else(|| panic!("not a time: {v}"))
}

#[test]
fn each_incident_fires_its_alert_once_on_its_model_after_it_began_and_nothing_else_serious() {
    // Incidents whose alert holds through the window's end (the generator keeps an incident on
    // once it starts), on V1 names with histograms, which the exported file targets.
    for name in ["kv-cache-pressure", "slow-decode", "request-errors", "load-exceeds-capacity"] {
        let (spec, prom) = common::start_scenario(name);
        let rule = spec.expect.first.clone().unwrap();
        let model = spec.expect.model.clone().unwrap();
        let onset = spec.incident_onset().expect("an incident scenario has an onset");
        // Over the whole generated stretch (80 minutes); the healthy test below asks a week.
        let r = backtest(&prom.url, "90m", &common::run::at_window_end(&spec), &[]);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        let json = r.json();
        assert_eq!(json["complete"], true, "{name}: {json}");
        let fired = fired(&json);
        let Some((_, _, _, episodes)) = fired.iter().find(|(_, r, _, _)| *r == rule) else {
            panic!("{name}: the {rule} alert never fired: {fired:?}");
        };
        assert_eq!(episodes.len(), 1, "{name}: {rule} fired {} times: {episodes:?}", episodes.len());
        let e = &episodes[0];
        assert_eq!(e["labels"]["model_name"], model.as_str(), "{name}: {e}");
        assert!(time(&e["firing_since"]) > onset, "{name}: fired at {} before the incident began at {onset}", e["firing_since"]);
        assert!(time(&e["firing_since"]) <= spec.window_end(), "{name}: {e}");
        // Pages, not alerts: with Alertmanager grouping by model and the exported inhibit rules,
        // the incident pages once, its cause first, and nothing the cause absorbs pages beside it.
        let pages = json["pages"].as_array().expect("pages");
        let serious: Vec<&Value> = pages.iter().filter(|p| p["scope"]["model_name"] == model.as_str()).collect();
        assert_eq!(serious.len(), 1, "{name}: one page for the incident: {pages:?}");
        assert_eq!(serious[0]["paged"][0], rule.as_str(), "{name}: the cause first: {}", serious[0]);
        let paged: Vec<&Value> = serious[0]["paged"].as_array().unwrap().iter().collect();
        for m in serious[0]["muted"].as_array().unwrap() {
            assert!(!paged.contains(&m), "{name}: {m} both paged and muted");
        }
        // The incident stays with its model: nothing at warning or critical on the other one.
        for (alert, _, severity, episodes) in &fired {
            if severity != "info" {
                for e in episodes {
                    assert_eq!(e["labels"]["model_name"], model.as_str(), "{name}: {alert} fired on another model: {e}");
                }
            }
        }
    }
}

#[test]
fn healthy_fleets_fire_nothing_at_warning_or_critical_and_the_text_says_so() {
    for name in ["healthy-steady", "healthy-ramp"] {
        let (spec, prom) = common::start_scenario(name);
        let at = common::run::at_window_end(&spec);
        let r = backtest(&prom.url, "90m", &at, &[]);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr);
        let serious: Vec<_> = fired(&r.json()).into_iter().filter(|(_, _, s, _)| s != "info").collect();
        assert!(serious.is_empty(), "{name}: {serious:?}");
        // The text report over a week, once: its lines do not depend on the fleet, and a week holds
        // no other data than the 90 minutes just judged (a week of 1-minute steps is most of this
        // binary's time).
        if name != "healthy-steady" {
            continue;
        }
        // The text report: what was asked, where the data was, and no alarm at warning or above.
        let text = run(&["--no-config", "rules", "export", "--backtest", "7d", "--at", &at, "--prometheus", &prom.url], &[]);
        assert_eq!(text.code, 0, "{}", text.stderr);
        assert!(!text.stdout.contains("(warning, rule") && !text.stdout.contains("(critical, rule"), "{}", text.stdout);
        assert!(text.stdout.contains("Range: 2026-01-08 ") && text.stdout.contains("evaluated every 1m, for: 5m"), "{}", text.stdout);
        assert!(text.stdout.contains("vLLM data: 2026-01-15"), "{}", text.stdout);
        assert!(text.stdout.contains("Never fired ("), "{}", text.stdout);
    }
}

#[test]
fn a_range_without_vllm_data_is_not_evaluated_and_exits_3() {
    let prom = common::PromServer::start_empty();
    let r = backtest(&prom.url, "1d", "now", &[]);
    assert_eq!(r.code, 3, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.json()["complete"], false);
    let text = run(&["--no-config", "rules", "export", "--backtest", "1d", "--prometheus", &prom.url], &[]);
    assert_eq!(text.code, 3);
    assert!(text.stdout.starts_with("NOT EVALUATED"), "{}", text.stdout);
}

#[test]
fn an_unreachable_server_exits_3_naming_the_url() {
    let url = format!("http://127.0.0.1:{}", common::free_port());
    let r = run(&["--no-config", "rules", "export", "--backtest", "1d", "--prometheus", &url, "--timeout", "10s"], &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains(&url) && r.stderr.contains("--prometheus"), "{}", r.stderr);
}

#[test]
fn bad_backtest_arguments_exit_2_and_say_what_to_fix() {
    for (args, says) in [
        (vec!["--backtest", "soon"], "--backtest"),
        (vec!["--backtest", "0s"], "longer than zero"),
        (vec!["--backtest", "1d", "--at", "tomorrow"], "--at"),
        (vec!["--backtest", "1d", "--at", "2999-01-01T00:00:00Z"], "in the future"),
        (vec!["--prometheus", "http://x:9090"], "only applies with --backtest"),
        (vec!["--step", "30s"], "--backtest"),
    ] {
        let mut all = vec!["--no-config", "rules", "export"];
        all.extend(args.iter());
        let r = run(&all, &[]);
        assert_eq!(r.code, 2, "{args:?}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(says), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn credentials_reach_the_server_and_never_the_report() {
    let (spec, prom) = common::start_scenario("healthy-steady");
    let proxy = common::proxy::FaultProxy::start(&prom.url, vec![]);
    let dir = tempfile::tempdir().unwrap();
    let token = common::run::write_file(dir.path(), "token", "s3cret-backtest-token\n");
    let r = backtest(
        &proxy.url,
        "2h",
        &common::run::at_window_end(&spec),
        &["--bearer-token-file", common::run::path_arg(&token), "--header", "X-Team: hidden-value"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seen = proxy.seen();
    assert!(!seen.is_empty());
    common::proxy::assert_all_carry(&seen, &[("authorization", "Bearer s3cret-backtest-token"), ("x-team", "hidden-value")]);
    for secret in ["s3cret-backtest-token", "hidden-value"] {
        assert!(!r.stdout.contains(secret) && !r.stderr.contains(secret), "{secret} leaked");
    }
}
