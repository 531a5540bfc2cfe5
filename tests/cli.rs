//! The command line as users meet it, offline: every output format of shipped recorded incidents
//! (snapshots), exit codes, broken recordings, and the rule documentation commands.

use assert_cmd::Command;

fn fixture(name: &str) -> String {
    format!("{}/fixtures/incidents/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("vllm-diag").unwrap().args(args).env("NO_COLOR", "1").output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({filters => vec![(r"127\.0\.0\.1:\d+", "127.0.0.1:[port]")]}, {
        insta::assert_snapshot!(name, text);
    });
}

#[test]
fn every_format_of_a_recorded_incident_matches_its_snapshot() {
    for format in ["table", "markdown", "json"] {
        let (code, out, err) = run(&["explain", "--replay", &fixture("kv-cache-pressure"), "--format", format]);
        assert_eq!(code, 0, "{err}");
        snapshot(&format!("kv_cache_pressure_{format}"), &out);
    }
}

#[test]
fn every_format_of_a_healthy_recording_matches_its_snapshot() {
    for format in ["table", "markdown", "json"] {
        let (code, out, err) = run(&["explain", "--replay", &fixture("healthy-steady"), "--format", format]);
        assert_eq!(code, 0, "{err}");
        snapshot(&format!("healthy_steady_{format}"), &out);
    }
}

/// Every shipped recording (fixtures/incidents/*.json), by file stem.
fn shipped_recordings() -> Vec<String> {
    let dir = format!("{}/fixtures/incidents", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().filter_map(|e| e.unwrap().path().file_stem().and_then(|s| s.to_str()).map(str::to_string)).collect();
    names.sort();
    assert!(names.len() >= 3, "the shipped recordings are missing: {names:?}");
    names
}

#[test]
fn the_default_text_of_every_shipped_recording_matches_its_snapshot_within_100_columns() {
    for name in shipped_recordings() {
        let (code, out, err) = run(&["explain", "--replay", &fixture(&name)]);
        assert_eq!(code, 0, "{name}: {err}");
        for line in out.lines() {
            assert!(line.chars().count() <= 100, "{name}: wider than 100 columns when piped: {line:?}\n{out}");
        }
        let findings = run(&["explain", "--replay", &fixture(&name), "--format", "json"]).1;
        let report: serde_json::Value = serde_json::from_str(&findings).unwrap();
        if report["findings"].as_array().map(Vec::len) == Some(1) {
            assert!(out.lines().count() <= 25, "{name}: a one-finding incident takes {} lines\n{out}", out.lines().count());
        }
        snapshot(&format!("{}_text", name.replace('-', "_")), &out);
    }
}

#[test]
fn the_default_text_opens_with_the_verdict_and_closes_with_one_footer() {
    let (_, kv, _) = run(&["explain", "--replay", &fixture("kv-cache-pressure")]);
    let mut lines = kv.lines();
    assert_eq!(lines.next(), Some("CRITICAL kv-cache-pressure: KV-cache pressure is causing preemptions"), "{kv}");
    assert_eq!(lines.next(), Some("   meta-llama/Llama-3.1-8B-Instruct · 3 of 3 replicas affected · since 08:50 UTC"), "{kv}");
    // One line per card; the arithmetic is -v's.
    assert!(kv.lines().any(|l| l == "   --max-num-seqs: unknown → 15 · confidence high"), "{kv}");
    assert!(!kv.contains("Suggested max_num_seqs = 15: 17 running sequences per replica"), "{kv}");
    assert!(kv.contains("Next: 1. Stabilise the admitted load first"), "{kv}");
    // What it absorbed, the raise it gave, said in one line.
    assert!(kv.contains("Also explains: slo-burn (critical), load-exceeds-capacity (warning)"), "{kv}");
    // The evidence stays behind -v: no table, no PromQL, no healthy list.
    for absent in ["┌", "PromQL at", "Checked and healthy", "max_over_time(", "(see "] {
        assert!(!kv.contains(absent), "{absent:?} in the default text\n{kv}");
    }
    let footer: String = kv.trim_end().rsplit("\n\n").next().unwrap_or_default().replace('\n', " ");
    assert!(
        footer.starts_with("2026-01-15 08:50 → 09:20 UTC vs the 30m before · 5 replicas · profile chat · 38 of 42 rules evaluated, 35 healthy"),
        "{footer}"
    );
    assert!(footer.contains("4 rules not evaluated, and priority-preemption on this model: -v lists them"), "{footer}");
    assert!(footer.ends_with("run with -v for evidence and PromQL"), "{footer}");
    let (_, healthy, _) = run(&["explain", "--replay", &fixture("healthy-steady")]);
    assert!(healthy.starts_with("OK: no problem found in 38 of 42 rules\n"), "{healthy}");
    // The profile in force is said: another moves the thresholds.
    let (_, batch, _) = run(&["explain", "--replay", &fixture("healthy-steady"), "--profile", "batch"]);
    assert!(batch.replace('\n', " ").contains("· profile batch ·"), "{batch}");
}

/// -v piped keeps to 100 columns, and every query is still there whole, on lines of its own.
#[test]
fn verbose_piped_fits_100_columns_without_losing_the_promql() {
    for name in shipped_recordings() {
        let (code, out, err) = run(&["explain", "--replay", &fixture(&name), "-v"]);
        assert_eq!(code, 0, "{name}: {err}");
        for line in out.lines() {
            // A word longer than the line (a piece of PromQL without spaces) is kept whole.
            assert!(line.chars().count() <= 100 || !line.trim().contains(' '), "{name}: wider than 100 columns: {line:?}");
        }
        let (_, json, _) = run(&["explain", "--replay", &fixture(&name), "--format", "json"]);
        let report: serde_json::Value = serde_json::from_str(&json).unwrap();
        let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
        let queries = report["findings"].as_array().unwrap().iter().flat_map(|f| f["evidence"].as_array().unwrap().iter()).filter_map(|e| e["query"].as_str());
        for q in queries.filter(|q| !q.is_empty()) {
            assert!(flat.contains(&q.split_whitespace().collect::<Vec<_>>().join(" ")), "{name}: PromQL lost: {q}");
        }
    }
}

/// An OK can be checked: -v gives each model's numbers against the lines its core checks need.
#[test]
fn a_healthy_verbose_run_shows_each_models_numbers_against_their_lines() {
    let (code, out, err) = run(&["explain", "--replay", &fixture("healthy-steady"), "-v"]);
    assert_eq!(code, 0, "{err}");
    let (_, json, _) = run(&["explain", "--replay", &fixture("healthy-steady"), "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let models: Vec<&str> = report["metrics"]["scopes"].as_array().unwrap().iter().filter_map(|s| s["model_name"].as_str()).collect();
    assert_eq!(models.len(), 2, "{json}");
    let block = out.split("The core checks' numbers, each against the line its rule needs to fire:\n").nth(1).unwrap_or_else(|| panic!("no numbers\n{out}"));
    for model in models {
        let own: Vec<&str> = block.lines().skip_while(|l| l.trim() != model).skip(1).take_while(|l| l.starts_with("    ")).collect();
        let own = own.join(" ").split_whitespace().collect::<Vec<_>>().join(" ");
        for signal in ["KV-cache usage (peak): ", "P95 time to first token: ", "P95 inter-token latency: "] {
            let at = own.find(signal).unwrap_or_else(|| panic!("{model}: no {signal}\n{out}"));
            let line = own[at..].split(": not met)").next().unwrap_or_default();
            assert!(line.contains(", baseline ") && line.contains(" (needs "), "{line}");
        }
        // Each number with the query it came from.
        assert!(own.contains("max_over_time(vllm:kv_cache_usage_perc"), "{model}\n{out}");
    }
    assert_eq!(report["readings"].as_array().map(Vec::len), Some(2), "the JSON carries them too");
}

#[test]
fn verbose_gives_the_full_table_with_conditions_in_words() {
    for flag in ["-v", "--verbose"] {
        let (code, out, err) = run(&["explain", "--replay", &fixture("kv-cache-pressure"), flag]);
        assert_eq!(code, 0, "{err}");
        let (_, table, _) = run(&["explain", "--replay", &fixture("kv-cache-pressure"), "--format", "table"]);
        assert_eq!(out, table, "{flag} is the table format");
        for present in [
            "vllm-diag: 1 finding (1 critical)",
            "Checked and healthy",
            "Next steps",
            "PromQL at",
            "Not evaluated (5 rule/scope pairs",
            "profile chat · 38 of 42 rules evaluated",
        ] {
            assert!(out.contains(present), "{flag}: {present:?} missing\n{out}");
        }
        // The condition in words, wrapped in its cell over three rows.
        let cells: Vec<String> = out.lines().filter(|l| l.contains('┆')).map(|l| l.split('┆').nth(4).unwrap_or_default().trim().to_string()).collect();
        assert!(cells.join(" ").contains(">= 50% or share of the last 5 min with preemptions >= 50%"), "{out}");
        assert!(!out.contains("(see "), "{out}");
    }
}

#[test]
fn fail_on_decides_exit_code_1() {
    let kv = fixture("kv-cache-pressure");
    assert_eq!(run(&["explain", "--replay", &kv, "--fail-on", "critical"]).0, 1);
    assert_eq!(run(&["explain", "--replay", &kv, "--fail-on", "warning"]).0, 1);
    assert_eq!(run(&["explain", "--replay", &kv, "--fail-on", "never"]).0, 0);
    assert_eq!(run(&["explain", "--replay", &kv]).0, 0);
    let decode = fixture("slow-decode");
    // slow-decode is a warning on its own, but here it also explains a fast burn of the ITL
    // objective's error budget, which makes the finding critical.
    let (_, out, _) = run(&["explain", "--replay", &decode, "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["findings"][0]["rule"], "slow-decode");
    assert_eq!(report["findings"][0]["also_consistent"][0]["rule"], "slo-burn");
    assert_eq!(report["findings"][0]["severity"], "critical");
    assert_eq!(run(&["explain", "--replay", &decode, "--fail-on", "critical"]).0, 1);
    // With the batch profile's 100 ms ITL target the budget is not burning: a plain warning. The
    // recording holds the chat-profile queries only, so the SLO rule is not evaluated there.
    let (code, out, _) = run(&["explain", "--replay", &decode, "--fail-on", "critical", "--profile", "batch", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["findings"][0]["severity"], "warning", "{report:#}");
    assert_eq!(code, 0);
    // The document says how the run ended, under the bar it was given.
    assert_eq!(report["outcome"], serde_json::json!({"exit_code": 0, "fail_on": "critical"}));
    let (code, out, _) = run(&["explain", "--replay", &decode, "--fail-on", "warning", "--format", "json"]);
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["outcome"], serde_json::json!({"exit_code": 1, "fail_on": "warning"}));
    assert_eq!(run(&["explain", "--replay", &decode, "--fail-on", "warning"]).0, 1);
    let healthy = fixture("healthy-steady");
    assert_eq!(run(&["explain", "--replay", &healthy, "--fail-on", "info"]).0, 0);
}

#[test]
fn a_truncated_recording_exits_2_naming_the_file_and_line() {
    let text = std::fs::read_to_string(fixture("kv-cache-pressure")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let (code, _, err) = run(&["explain", "--replay", cut.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cut.json:") && err.contains("record it again"), "{err}");
}

#[test]
fn replay_refuses_flags_that_would_change_the_recorded_questions() {
    let (code, _, err) = run(&["explain", "--replay", &fixture("kv-cache-pressure"), "--window", "1h"]);
    assert_eq!(code, 2);
    assert!(err.contains("--replay"), "{err}");
}

#[test]
fn a_rule_that_needs_queries_the_recording_lacks_is_not_evaluated_not_healthy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("extra.toml"),
        r#"
[[signal]]
id = "e2e_p50"
title = "P50 end-to-end latency"
unit = "seconds"
kind = "quantile"
quantile = 0.5
histogram = ["vllm:e2e_request_latency_seconds"]

[[rule]]
id = "slow-median"
title = "Median latency is high"
severity = "info"
summary = "Half of all requests take longer than a minute."
when = ["e2e_p50 > 60s"]
"#,
    )
    .unwrap();
    let (code, out, err) = run(&["explain", "--replay", &fixture("kv-cache-pressure"), "--rules", dir.path().to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ne = report["not_evaluated"].as_array().unwrap();
    assert!(ne.iter().any(|n| n["rule"] == "slow-median" && n["reason"].as_str().unwrap().contains("record it again")), "{ne:?}");
    assert!(!report["healthy"].as_array().unwrap().iter().any(|h| h["rule"] == "slow-median"));
}

#[test]
fn rules_list_and_show_come_from_the_rule_files() {
    let (code, out, _) = run(&["rules", "list"]);
    assert_eq!(code, 0);
    for id in ["load-exceeds-capacity", "slow-prefill", "slow-decode", "severe-saturation", "kv-cache-pressure", "http-errors"] {
        assert!(out.contains(id), "{out}");
    }
    let (code, out, _) = run(&["rules", "show", "slow-decode"]);
    assert_eq!(code, 0);
    assert!(out.contains("itl_p95 >= 1.5x baseline or itl_p95 > $itl_p95_high"), "{out}");
    let (code, _, err) = run(&["rules", "show", "no-such-rule"]);
    assert_eq!(code, 2);
    assert!(err.contains("slow-decode") && !err.contains("Did you mean"), "{err}");
    let (code, _, err) = run(&["rules", "show", "kv-cache-presure"]);
    assert_eq!(code, 2);
    assert!(err.contains("no rule \"kv-cache-presure\". Did you mean \"kv-cache-pressure\"?"), "{err}");
}

#[test]
fn help_documents_the_exit_codes() {
    let (code, out, _) = run(&["explain", "--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("Exit codes") && out.contains("3  data source unreachable"), "{out}");
}

#[test]
fn a_bad_replica_label_and_regrouping_a_replay_are_usage_errors() {
    let replay = fixture("kv-cache-pressure");
    for (args, needle) in [
        (vec!["explain", "--replay", replay.as_str(), "--replica-label", "pod"], "--replay re-runs the recorded grouping"),
        (vec!["explain", "--replay", replay.as_str(), "--group-by", "namespace"], "--replay re-runs the recorded grouping"),
        (vec!["explain", "--prometheus", "http://127.0.0.1:1", "--replica-label", "pod name"], "--replica-label \"pod name\": give one label name"),
        (vec!["explain", "--prometheus", "http://127.0.0.1:1", "--replica-label", "__name__"], "--replica-label \"__name__\""),
        (vec!["explain", "--prometheus", "http://127.0.0.1:1", "--group-by", "model_name,pod", "--replica-label", "pod"], "also in --group-by"),
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn servers_refuse_a_reachable_address_without_a_token_unless_told() {
    // Nothing listens on port 1: the refusal comes before any connection or bind.
    for (who, args) in [
        ("serve", vec!["--no-config", "serve", "--prometheus", "http://127.0.0.1:1", "--listen", "0.0.0.0:0"]),
        ("mcp", vec!["--no-config", "mcp", "--prometheus", "http://127.0.0.1:1", "--transport", "http", "--listen", "0.0.0.0:0"]),
    ] {
        let (code, _, stderr) = run(&args);
        assert_eq!(code, 2, "{who}: {stderr}");
        assert!(stderr.contains(&format!("vllm-diag {who}: --listen 0.0.0.0:0 can be reached from other machines")), "{who}: {stderr}");
        assert!(stderr.contains("--allow-unauthenticated-remote"), "{stderr}");
        assert!(!stderr.contains("listening on"), "{who} listened anyway: {stderr}");
    }
}

/// One manual page per command: `man --out DIR` writes them all, and every page another names
/// (`vllm-diag-explain(1)`) is among them; `man explain` prints one.
#[test]
fn every_manual_page_another_names_exists() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    let (code, listed, err) = run(&["man", "--out", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let pages: std::collections::BTreeSet<String> =
        std::fs::read_dir(&out).unwrap().filter_map(|e| e.ok().and_then(|e| e.file_name().to_str().map(str::to_string))).collect();
    assert_eq!(listed.lines().count(), pages.len(), "{listed}");
    for page in ["vllm-diag.1", "vllm-diag-explain.1", "vllm-diag-check.1", "vllm-diag-rules-show.1", "vllm-diag-config-show.1"] {
        assert!(pages.contains(page), "{page} missing: {pages:?}");
    }
    let named = regex::Regex::new(r"vllm\\-diag[a-z\\-]*\(1\)").unwrap();
    let mut references = 0;
    for page in &pages {
        let text = std::fs::read_to_string(out.join(page)).unwrap();
        for m in named.find_iter(&text) {
            references += 1;
            let file = m.as_str().replace("\\-", "-").replace("(1)", ".1");
            assert!(pages.contains(&file), "{page} names {} but there is no {file}", m.as_str());
        }
    }
    assert!(references >= 10, "only {references} references between the pages");
    let (code, explain, _) = run(&["man", "explain"]);
    assert_eq!(code, 0);
    assert!(explain.contains(".TH vllm-diag-explain 1") && explain.contains("\\-\\-format"), "{explain}");
    let (_, main, _) = run(&["man"]);
    assert!(!main.contains("help(1)") && main.contains("vllm\\-diag\\-explain(1)"), "{main}");
    let (code, _, err) = run(&["man", "nope"]);
    assert_eq!(code, 2, "{err}");
}

/// A recording whose answer was damaged by hand: `damage` rewrites the exchanges; the replay's JSON.
fn replay_damaged(damage: impl Fn(&mut Vec<serde_json::Value>)) -> (i32, serde_json::Value, String) {
    let mut rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture("kv-cache-pressure")).unwrap()).unwrap();
    damage(rec["exchanges"].as_array_mut().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.json");
    std::fs::write(&path, serde_json::to_string(&rec).unwrap()).unwrap();
    let (code, json, err) = run(&["explain", "--replay", path.to_str().unwrap(), "--format", "json"]);
    let (_, text, _) = run(&["explain", "--replay", path.to_str().unwrap()]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}\n{err}"));
    (code, report, text)
}

/// Whether an exchange is the per-replica breakdown of the KV-cache finding.
fn is_breakdown(x: &serde_json::Value) -> bool {
    x["request"]["query"].as_str().is_some_and(|q| q.starts_with("max by (model_name, instance) (max_over_time(vllm:kv_cache_usage_perc{model_name="))
}

/// Nothing dropped in silence: the per-replica answer cut short by hand, or gone, makes which
/// replicas are affected "not evaluated" with why, and a warning says which answer; a damaged
/// signal answer makes its rules not evaluated, with a warning too.
#[test]
fn a_damaged_or_missing_answer_in_a_recording_is_never_silent() {
    let (_, intact, _) = replay_damaged(|_| {});
    assert_eq!(intact["warnings"], serde_json::json!([]));
    assert_eq!(intact["findings"][0]["replicas"]["total"], 3, "{:#}", intact["findings"][0]["replicas"]);

    let cut = |exchanges: &mut Vec<serde_json::Value>| {
        let x = exchanges.iter_mut().find(|x| is_breakdown(x)).expect("the recording holds the breakdown");
        let body = x["response"]["body"].as_str().unwrap().to_string();
        x["response"]["body"] = serde_json::Value::from(&body[..body.len() / 2]);
    };
    let gone = |exchanges: &mut Vec<serde_json::Value>| exchanges.retain(|x| !is_breakdown(x));
    for (what, damage) in [("cut short", &cut as &dyn Fn(&mut Vec<serde_json::Value>)), ("missing", &gone)] {
        let (code, report, text) = replay_damaged(damage);
        assert_eq!(code, 0, "{what}");
        let f = &report["findings"][0];
        assert_eq!(f["rule"], "kv-cache-pressure", "{what}: the finding stands");
        let why = f["replicas"]["not_evaluated"].as_str().unwrap_or_else(|| panic!("{what}: the breakdown silently gone: {:#}", f["replicas"]));
        assert!(why.starts_with("the per-replica answer could not be read: "), "{what}: {why}");
        let warnings = report["warnings"].to_string();
        assert!(warnings.contains("could not be read, so what needed it is not evaluated") && warnings.contains("kv_cache_usage_perc"), "{what}: {warnings}");
        assert!(text.contains("which replicas: not evaluated (-v says why)") && text.contains("Warning: 1 answer could not be read"), "{what}: {text}");
    }

    // A signal's answer damaged: the rules that read it are not evaluated, with why, and said.
    let (_, report, _) = replay_damaged(|exchanges| {
        for x in exchanges
            .iter_mut()
            .filter(|x| x["request"]["query"].as_str().is_some_and(|q| q.starts_with("max by (model_name) (max_over_time(vllm:kv_cache_usage_perc[1800s]))")))
        {
            x["response"]["body"] = serde_json::Value::from("{\"status\":\"succ");
        }
    });
    let not_evaluated = report["not_evaluated"].as_array().unwrap();
    assert!(
        not_evaluated.iter().any(|n| n["rule"] == "kv-cache-pressure" && n["reason"].as_str().is_some_and(|r| r.contains("cannot read"))),
        "{not_evaluated:#?}"
    );
    assert!(report["warnings"].to_string().contains("could not be read"), "{:#}", report["warnings"]);
}
