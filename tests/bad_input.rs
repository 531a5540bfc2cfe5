//! Bad input gets an error that names what is wrong and where, and the right exit code: flag values
//! (zero, negative or absurd durations, a window end in the future, a malformed selector), windows
//! longer than the data, truncated or tampered `--replay` files, and broken rule files. Nothing
//! panics, and nothing bad is silently taken as good.

mod common;

use std::path::Path;

use serde_json::Value;

use common::run::{at_window_end, explain_args, path_arg, write_file, Run};
use common::start_scenario;

/// Run vllm-diag with `args`, and check that it did not panic whatever it was given.
fn run(args: &[&str]) -> Run {
    let r = common::run::run(args, &[]);
    assert!(!r.stderr.contains("panicked"), "vllm-diag panicked: {}", r.stderr);
    r
}

#[test]
fn bad_flag_values_exit_2_naming_the_flag_and_the_fix() {
    // None of these reaches a server: nothing listens at this URL, and the error must come first.
    let url = "http://127.0.0.1:9";
    let cases: &[(&[&str], &[&str])] = &[
        (&["--window", "0s"], &["--window", "longer than zero"]),
        (&["--window", "-5m"], &["--window", "cannot be negative"]),
        (&["--window", "soon"], &["--window", "30m"]),
        (&["--baseline", "0s"], &["--baseline", "longer than zero"]),
        (&["--baseline", "-1d"], &["--baseline", "negative"]),
        (&["--timeout", "0s"], &["--timeout", "longer than zero"]),
        (&["--query-timeout", "-3s"], &["--query-timeout", "negative"]),
        (&["--concurrency", "0"], &["--concurrency", "1..=256"]),
        // Beyond any window or timeout (far enough back, these overflowed the windows' arithmetic).
        (&["--window", "300000y"], &["--window", "at most 100 years"]),
        (&["--window", "262000y", "--baseline", "1s"], &["--window", "at most 100 years"]),
        (&["--query-timeout", "99999999999d"], &["--query-timeout", "at most 100 years"]),
        // Windows that would start before there were any metrics.
        (&["--window", "60y"], &["--window", "before 1970-01-01 UTC", "shorter --window"]),
        (&["--window", "30m", "--baseline", "60y"], &["--baseline", "before 1970-01-01 UTC"]),
        (&["--at", "1969-12-31T23:50:00Z", "--window", "30m"], &["--window", "1969-12-31T23:50:00Z", "later --at"]),
        (&["--at", "2999-01-01T00:00:00Z"], &["--at", "in the future"]),
        (&["--at", "yesterday"], &["--at", "RFC 3339"]),
        (&["--at", "2026-13-45T00:00:00Z"], &["--at", "RFC 3339"]),
        (&["--selector", "model_name=~"], &["--selector", "at character"]),
        (&["--selector", "model_name=\"unterminated"], &["--selector", "at character"]),
        (&["--group-by", "model-name"], &["--group-by", "label names"]),
        (&["--format", "yaml"], &["--format", "table"]),
        (&["--prometheus", "localhost:9090"], &["--prometheus", "http://host:9090"]),
        (&["--basic-auth-password-file", "/nonexistent"], &["--basic-auth-user"]),
        (&["--bearer-token-file", "/nonexistent/token"], &["--bearer-token-file", "/nonexistent/token", "cannot read"]),
        (&["--cert-file", "c.pem"], &["--key-file"]),
        (&["--ca-file", "/nonexistent/ca.pem"], &["--ca-file", "/nonexistent/ca.pem"]),
        (&["--header", "no colon here"], &["--header #1", "Name: value"]),
        (&["--tenant", "a||b"], &["--tenant"]),
    ];
    for (args, needles) in cases {
        let r =
            if args.contains(&"--prometheus") { run(&[&["explain"][..], args].concat()) } else { run(&[&["explain", "--prometheus", url][..], args].concat()) };
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        for n in *needles {
            assert!(r.stderr.contains(n), "{args:?}: expected {n:?} in: {}", r.stderr);
        }
    }
}

#[test]
fn values_from_the_environment_or_the_file_are_named_where_they_were_given() {
    // Nothing listens at this URL: each error must come before any request.
    let url = "http://127.0.0.1:9";
    let dir = tempfile::tempdir().unwrap();
    let config = |name: &str, text: &str| write_file(dir.path(), name, text);
    let token_file = write_file(dir.path(), "token", "T0KEN\u{1}VAL\n");
    let far = config("far.toml", "window = \"60y\"\n");
    let replica = config("replica.toml", "\ngroup_by = [\"model_name\", \"instance\"]\n");
    let env_token = config("token.toml", "[source]\nbearer_token = \"${TOK}\"\n");
    // (arguments, environment, what the error must say)
    type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, Vec<String>);
    let cases: Vec<Case> = vec![
        (
            vec!["explain", "--prometheus", url],
            vec![("VLLM_DIAG_BEARER_TOKEN", "T0KEN\nVAL")],
            vec!["$VLLM_DIAG_BEARER_TOKEN".into(), "control character".into()],
        ),
        (
            vec!["--config", path_arg(&env_token), "explain", "--prometheus", url],
            vec![("TOK", "T0KEN\u{7}VAL")],
            vec![format!("{}:2:", env_token.display()), "source.bearer_token".into()],
        ),
        (
            vec!["explain", "--prometheus", url, "--bearer-token-file", path_arg(&token_file)],
            vec![],
            vec![token_file.display().to_string(), "control character".into()],
        ),
        (vec!["explain"], vec![("VLLM_DIAG_PROMETHEUS_URL", "localhost:9090")], vec!["$VLLM_DIAG_PROMETHEUS_URL".into(), "no scheme".into()]),
        (
            vec!["--config", path_arg(&far), "explain", "--prometheus", url],
            vec![],
            vec![format!("{}:1:", far.display()), "window".into(), "before 1970-01-01 UTC".into()],
        ),
        (
            vec!["--config", path_arg(&replica), "explain", "--prometheus", url],
            vec![],
            vec![format!("{}:2:", replica.display()), "group_by".into(), "--replica-label".into()],
        ),
        (vec!["explain", "--prometheus", url, "--at", ""], vec![], vec!["--at is empty".into()]),
    ];
    for (args, env, needles) in cases {
        let r = common::run::run(&args, &env);
        assert_eq!(r.code, 2, "{args:?} {env:?}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked") && !r.stderr.contains("T0KEN"), "{args:?}: {}", r.stderr);
        for n in &needles {
            assert!(r.stderr.contains(n.as_str()), "{args:?} {env:?}: expected {n:?} in: {}", r.stderr);
        }
    }
}

#[test]
fn a_window_longer_than_the_data_says_where_the_data_starts_and_one_before_it_says_there_is_none() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let at = at_window_end(&spec);

    // The generated data starts at spec.start; a 3h window reaches back before it, and its baseline
    // (the 3h before) holds nothing at all.
    let r = run(&explain_args(&prom.url, &at, &["--window", "3h", "--format", "json"]));
    let report = r.json();
    let warnings: Vec<String> = report["warnings"].as_array().map(|a| a.iter().filter_map(|w| w.as_str().map(str::to_string)).collect()).unwrap_or_default();
    assert!(warnings.iter().any(|w| w.contains("baseline window") && w.contains("holds no vLLM data")), "{warnings:#?}");
    let starts = warnings.iter().find(|w| w.contains("vLLM data only starts at about")).unwrap_or_else(|| panic!("{warnings:#?}"));
    // Within one coarse step (3h / 60 = 3 minutes) after the first sample.
    let first = spec.start;
    let said = starts
        .split("starts at about ")
        .nth(1)
        .and_then(|rest| rest.split(" UTC").next())
        .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S").ok())
        .map(|t| t.and_utc())
        .unwrap_or_else(|| panic!("no time in {starts:?}"));
    assert!(said >= first && said <= first + chrono::Duration::minutes(4), "said {said}, data starts {first}");
    // Absolute thresholds still judge what there is; nothing that needs the baseline is called healthy.
    assert!(report["stats"]["rules_evaluated"].as_u64().unwrap_or(0) > 0);
    assert!(
        report["not_evaluated"].as_array().is_some_and(|n| n.iter().any(|e| e["reason"].as_str().unwrap_or("").contains("baseline"))),
        "{:#}",
        report["not_evaluated"]
    );

    // A window that ends before the data begins: exit 3, naming the window, the URL and what to check.
    let before = (first - chrono::Duration::hours(2)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let r = run(&explain_args(&prom.url, &before, &["--window", "30m"]));
    assert_eq!(r.code, 3, "{}", r.stderr);
    for n in ["no vLLM metrics", &prom.url, "--at", "--window"] {
        assert!(r.stderr.contains(n), "expected {n:?} in {}", r.stderr);
    }
}

#[test]
fn a_page_of_the_server_given_as_its_url_is_named_with_the_url_to_give_instead() {
    // The Prometheus UI's address pasted from a browser: its API is not under /graph.
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let at = at_window_end(&spec);
    for (given, drop) in [(format!("{}/graph", prom.url), "/graph"), (format!("{}/metrics", prom.url), "/metrics")] {
        let r = run(&explain_args(&given, &at, &["--window", "30m"]));
        assert_eq!(r.code, 3, "{}", r.stderr);
        let want = format!("That is a page of the server, not its base URL: drop {drop} from --prometheus (give {})", prom.url);
        assert!(r.stderr.contains(&want) && r.stderr.contains("HTTP 404"), "{}", r.stderr);
    }
    // Under a prefix it is not served under: the base URL is asked for.
    let r = run(&explain_args(&format!("{}/prom", prom.url), &at, &["--window", "30m"]));
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("No Prometheus API answers under this URL"), "{}", r.stderr);
}

#[test]
fn a_window_shorter_than_two_scrapes_is_no_pass_and_says_to_widen_it() {
    // 30 s scrapes: a 15 s window (and its baseline) holds at most one sample of each series, so no
    // rate can be taken. The incident in the data (a critical one) cannot be seen; the run used to
    // pass --fail-on warning with exit 0.
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let at = at_window_end(&spec);
    let r = run(&explain_args(&prom.url, &at, &["--window", "15s", "--fail-on", "warning", "--format", "json"]));
    assert_eq!(r.code, 3, "{}", r.stderr);
    let report = r.json();
    let core: Vec<&str> = report["coverage"]["core_not_evaluated"].as_array().map(|a| a.iter().filter_map(|v| v.as_str()).collect()).unwrap_or_default();
    for rule in ["kv-cache-pressure", "slow-decode", "slow-prefill"] {
        assert!(core.contains(&rule), "{rule} not among {core:?}");
    }
    let warnings = report["warnings"].to_string();
    assert!(warnings.contains("no rate could be taken for") && warnings.contains("ttft_p95") && warnings.contains("Widen --window"), "{warnings}");
    // A window that runs past the end of the data is not short: the warning says the series
    // stopped or the data ends, rather than to widen it.
    let later = (spec.window_end() + chrono::Duration::minutes(25)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let r = run(&explain_args(&prom.url, &later, &["--window", "30m", "--format", "json"]));
    let warnings = r.json()["warnings"].to_string();
    assert!(
        warnings.contains("no rate could be taken") && warnings.contains("the data ends before the window does") && !warnings.contains("Widen --window"),
        "{warnings}"
    );
    // Two minutes hold four scrapes: the incident is found.
    let r = run(&explain_args(&prom.url, &at, &["--window", "2m", "--fail-on", "warning", "--format", "json"]));
    let report = r.json();
    assert_eq!(r.code, 1, "{}: {:#}", r.stderr, report["findings"]);
    assert_eq!(report["findings"][0]["rule"], "kv-cache-pressure", "{:#}", report["findings"]);
    assert!(!report["warnings"].to_string().contains("no rate could be taken"), "{:#}", report["warnings"]);
}

#[test]
fn truncated_or_tampered_replay_files_are_refused_or_give_honest_not_evaluated_entries() {
    let (spec, prom) = start_scenario("slow-decode");
    let at = at_window_end(&spec);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let good = dir.path().join("good.json");
    let r = run(&explain_args(&prom.url, &at, &["--format", "json", "--record", path_arg(&good)]));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let original = r.json();
    let text = std::fs::read_to_string(&good).unwrap_or_else(|e| panic!("read: {e}"));
    let replay = |path: &Path| run(&["explain", "--replay", path_arg(path), "--format", "json"]);

    // The untouched recording replays to the same report.
    let r = replay(&good);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let replayed = r.json();
    assert_eq!(replayed["findings"], original["findings"]);

    // Refused outright, exit 2, naming the file (and the line where it can).
    let mut recording: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("recording: {e}"));
    let edit = |f: &dyn Fn(&mut Value)| -> String {
        let mut v = recording.clone();
        f(&mut v);
        serde_json::to_string_pretty(&v).unwrap_or_default()
    };
    let refused: Vec<(&str, String, &[&str])> = vec![
        ("cut in half", text[..text.len() / 2].to_string(), &["truncated.json:", "damaged", "--record"]),
        ("empty", String::new(), &["damaged"]),
        ("not JSON", "<html>proxy error</html>".to_string(), &["damaged"]),
        ("another JSON document", r#"{"dashboard": {"title": "vLLM"}}"#.to_string(), &["not a vllm-diag recording"]),
        ("a future version", edit(&|v| v["version"] = Value::from(99)), &["version 99", "--record"]),
        (
            "a window that ends before it starts",
            edit(&|v| {
                let start = v["params"]["window"]["start"].clone();
                v["params"]["window"]["start"] = v["params"]["window"]["end"].clone();
                v["params"]["window"]["end"] = start;
            }),
            &["params.window", "record it again"],
        ),
        ("no grouping label", edit(&|v| v["params"]["group_by"] = serde_json::json!([])), &["params.group_by"]),
        ("an invalid recorded selector", edit(&|v| v["params"]["selector"] = Value::from("model_name=~")), &["recorded selector is invalid"]),
        (
            "an exchange that is neither answer nor error",
            edit(&|v| {
                if let Some(e) = v["exchanges"].get_mut(0).and_then(Value::as_object_mut) {
                    e.remove("response");
                    e.remove("error");
                }
            }),
            &["exchange 1", "record it again"],
        ),
        ("a status that is not a number", edit(&|v| v["exchanges"][0]["response"]["http_status"] = Value::from("ok")), &["damaged"]),
    ];
    for (name, body, needles) in refused {
        let path = write_file(dir.path(), "truncated.json", &body);
        let r = replay(&path);
        assert_eq!(r.code, 2, "{name}: {}", r.stderr);
        // No report: --format json leaves the error document, and only that.
        let doc: Value = serde_json::from_str(&r.stdout).unwrap_or_default();
        assert!(doc["error"]["exit_code"] == 2 && doc.get("findings").is_none(), "{name}: {}", r.stdout);
        assert!(r.stderr.contains(path_arg(&path)), "{name}: the file is not named: {}", r.stderr);
        for n in needles {
            assert!(r.stderr.contains(n), "{name}: expected {n:?} in {}", r.stderr);
        }
    }

    // Tampered answers are read like any bad answer: the rules that needed them are not evaluated,
    // with the reason; the rest is diagnosed.
    let exchanges = recording["exchanges"].as_array_mut().unwrap_or_else(|| panic!("no exchanges"));
    let mut touched = 0;
    for e in exchanges.iter_mut() {
        if e["request"]["query"].as_str().is_some_and(|q| q.contains("inter_token_latency") && !q.contains("count")) {
            e["response"]["body"] = Value::from("<html><title>Tampered</title></html>");
            touched += 1;
        }
    }
    assert!(touched > 0);
    let before = exchanges.len();
    exchanges.retain(|e| !e["request"]["query"].as_str().is_some_and(|q| q.contains("time_to_first_token")));
    assert!(exchanges.len() < before);
    let path = write_file(dir.path(), "tampered.json", &serde_json::to_string_pretty(&recording).unwrap_or_default());
    let r = replay(&path);
    let report = r.json();
    let reasons: Vec<String> =
        report["not_evaluated"].as_array().map(|a| a.iter().filter_map(|n| n["reason"].as_str().map(str::to_string)).collect()).unwrap_or_default();
    assert!(reasons.iter().any(|w| w.contains("itl_p95") && w.contains("not JSON")), "{reasons:#?}");
    assert!(reasons.iter().any(|w| w.contains("ttft_p95") && w.contains("holds no answer for this query")), "{reasons:#?}");
    assert!(report["stats"]["rules_evaluated"].as_u64().unwrap_or(0) > 0);
}

#[test]
fn broken_rule_files_exit_2_naming_the_file_line_and_what_is_wrong() {
    let cases: &[(&str, &str, &[&str])] = &[
        ("not TOML", "[[rule]\nid = 1\n", &["bad.toml:"]),
        (
            "a condition that does not parse",
            "[[rule]]\nid = \"mine\"\ntitle = \"t\"\nseverity = \"warning\"\nsummary = \"s\"\nwhen = [\"ttft_p95 >> 3s\"]\n",
            &["bad.toml:6:", "mine", "ttft_p95 >> 3s"],
        ),
        (
            "an unknown signal",
            "[[rule]]\nid = \"mine\"\ntitle = \"t\"\nseverity = \"warning\"\nsummary = \"s\"\nwhen = [\"no_such_signal > 3s\"]\n",
            &["bad.toml:", "no_such_signal"],
        ),
        (
            "an unknown severity",
            "[[rule]]\nid = \"mine\"\ntitle = \"t\"\nseverity = \"dire\"\nsummary = \"s\"\nwhen = [\"ttft_p95 > 3s\"]\n",
            &["bad.toml:", "dire"],
        ),
        ("a threshold that is not a quantity", "[thresholds]\nttft_p95_high = \"fast\"\n", &["bad.toml:", "fast"]),
    ];
    for (name, body, needles) in cases {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        write_file(dir.path(), "bad.toml", body);
        for cmd in [&["rules", "list", "--rules"][..], &["explain", "--prometheus", "http://127.0.0.1:9", "--rules"][..]] {
            let r = run(&[cmd, &[path_arg(dir.path())]].concat());
            assert_eq!(r.code, 2, "{name}: {}", r.stderr);
            for n in *needles {
                assert!(r.stderr.contains(n), "{name}: expected {n:?} in {}", r.stderr);
            }
        }
    }
}

#[test]
fn a_saved_load_test_that_cannot_be_read_back_is_named_with_its_place_and_nothing_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let not_json = write_file(dir.path(), "notes.txt", "knee at 4\n");
    let other = write_file(dir.path(), "other.json", "{\n  \"schema_version\": 1,\n  \"findings\": []\n}\n");
    let saved = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-engine-loadtest/loadtest.json")).unwrap();
    let newer = write_file(dir.path(), "newer.json", &saved.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1));
    let missing = dir.path().join("absent.json");
    let cases: Vec<(Vec<&str>, Vec<String>)> = vec![
        (vec!["--from", path_arg(&not_json)], vec![format!("--from {}:1:1: not a load test's result", not_json.display()), "--format json".into()]),
        (vec!["--from", path_arg(&other)], vec![format!("--from {}:", other.display()), "missing field".into()]),
        (vec!["--from", path_arg(&newer)], vec!["schema_version 99".into(), "this build's (1)".into()]),
        (vec!["--from", path_arg(&missing)], vec![format!("--from {}: cannot read", missing.display())]),
        (vec!["--from", path_arg(&newer), "http://127.0.0.1:9"], vec!["cannot be used with".into()]),
        (vec![], vec!["<URL>".into()]),
    ];
    for (args, needles) in cases {
        let r = run(&[&["--no-config", "loadtest"][..], &args].concat());
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
        for n in needles {
            assert!(r.stderr.contains(&n), "{args:?}: expected {n:?} in: {}", r.stderr);
        }
    }
}
