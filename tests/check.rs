//! `vllm-diag check` and the CI and incident-channel outputs, as a pipeline meets them: exit codes
//! and verdicts against a real Prometheus and the shipped recordings, the GitHub step summary and
//! annotations, JUnit parsed back, Slack within its limit, completions and the man page, and
//! `--watch` on a real pseudo-terminal.

mod common;

use std::io::{Read, Write};
use std::process::{Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use common::{start_scenario, PromServer};

fn fixture(name: &str) -> String {
    format!("{}/fixtures/incidents/{name}.json", env!("CARGO_MANIFEST_DIR"))
}

/// Run vllm-diag with a clean environment for the things it reads; returns (code, stdout, stderr).
fn run_env(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::cargo_bin("vllm-diag").unwrap();
    cmd.args(args).env("NO_COLOR", "1").env_remove("GITHUB_STEP_SUMMARY").env_remove("VLLM_DIAG_PROMETHEUS_URL");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

fn run(args: &[&str]) -> (i32, String, String) {
    run_env(args, &[])
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({filters => vec![(r"127\.0\.0\.1:\d+", "127.0.0.1:[port]")]}, {
        insta::assert_snapshot!(name, text);
    });
}

/// The report of a shipped recording, as JSON: tests read expectations from it rather than
/// hard-coding what the rule pack concludes today.
fn report_of(name: &str) -> serde_json::Value {
    let (code, out, err) = run(&["explain", "--replay", &fixture(name), "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn rank(severity: &str) -> u8 {
    match severity {
        "info" => 1,
        "warning" => 2,
        "critical" => 3,
        other => panic!("unknown severity {other}"),
    }
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

// ---- against a real Prometheus -------------------------------------------------------------

#[test]
fn check_fails_a_deploy_that_caused_kv_cache_pressure_and_passes_a_healthy_one() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let at = rfc3339(spec.window_end());
    let deploy = rfc3339(spec.window_start());
    // The deploy as a time, and as "30 minutes before --at": the same window.
    for since in [deploy.as_str(), "30m"] {
        let (code, out, err) = run(&["check", "--prometheus", &prom.url, "--at", &at, "--since", since]);
        assert_eq!(code, 1, "--since {since}: {err}\n{out}");
        let first = out.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("FAIL: ")
                && first.contains(" since the deploy at 2026-01-15 08:50:00 UTC ")
                && first.contains("(kv-cache-pressure on meta-llama/Llama-3.1-8B-Instruct"),
            "{first}"
        );
        // The report follows the verdict, without colour: the default text, whose own first line
        // names the cause.
        assert!(out.contains("\n\nCRITICAL kv-cache-pressure: KV-cache pressure is causing preemptions\n") && !out.contains('\x1b'), "{out}");
    }
    // The same deploy held to critical only is still a failure; to never, it passes and says why.
    let (code, out, _) = run(&["check", "--prometheus", &prom.url, "--at", &at, "--since", "30m", "--fail-on", "never"]);
    assert_eq!(code, 0);
    assert!(out.starts_with("PASS: nothing fails with --fail-on never"), "{out}");
    drop(prom);

    let (spec, prom) = start_scenario("healthy-steady");
    let at = rfc3339(spec.window_end());
    let (code, out, err) = run(&["check", "--prometheus", &prom.url, "--at", &at, "--since", "30m"]);
    assert_eq!(code, 0, "{err}\n{out}");
    assert!(out.starts_with("PASS: no warning or worse finding in the 30m since the deploy at 2026-01-15"), "{out}");
}

#[test]
fn check_of_a_deploy_with_no_data_is_not_evaluated_and_exits_3() {
    let prom = PromServer::start_empty();
    let (code, out, err) = run(&["check", "--prometheus", &prom.url, "--at", "2026-01-15T09:30:00Z", "--since", "20m"]);
    assert_eq!(code, 3, "{err}");
    assert!(out.starts_with("NOT EVALUATED:") && out.contains("not a pass"), "{out}");
    assert!(err.contains("no vLLM metrics") && err.contains("Check --at and --since") && !err.contains("--window"), "{err}");
    // A document format keeps stdout clean: the verdict goes to stderr.
    let (code, out, err) = run(&["check", "--prometheus", &prom.url, "--at", "2026-01-15T09:30:00Z", "--since", "20m", "--format", "junit"]);
    assert_eq!(code, 3);
    // A document format keeps stdout a document: the verdict goes to stderr, and the JUnit report is
    // one erroring test case saying why there is no report.
    assert!(err.contains("NOT EVALUATED"), "{err}");
    assert!(out.starts_with("<?xml") && out.contains("errors=\"1\"") && out.contains("no vLLM metrics") && !out.contains("NOT EVALUATED"), "{out}");
}

#[test]
fn check_junit_output_is_a_test_report_ci_systems_read() {
    let (spec, prom) = start_scenario("slow-decode");
    let at = rfc3339(spec.window_end());
    let (code, out, err) = run(&["check", "--prometheus", &prom.url, "--at", &at, "--since", "30m", "--format", "junit"]);
    assert_eq!(code, 1, "{err}");
    // stdout is the XML document alone; the verdict went to stderr.
    assert!(err.contains("FAIL: 1 ") && err.contains("(slow-decode on "), "{err}");
    // What the report says, to compare the test cases with.
    let (_, json, _) = run(&["check", "--prometheus", &prom.url, "--at", &at, "--since", "30m", "--format", "json"]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let model = spec.incident_model().unwrap().to_string();
    let mut expected_failures: Vec<(String, String)> = Vec::new();
    for f in report["findings"].as_array().unwrap() {
        let scope = f["scope"]["model_name"].as_str().unwrap().to_string();
        // A finding fails once; the rules it absorbed pass, naming it (the same count as check's FAIL line).
        if rank(f["severity"].as_str().unwrap()) >= 2 {
            expected_failures.push((f["rule"].as_str().unwrap().to_string(), scope.clone()));
        }
    }
    expected_failures.sort();
    assert!(expected_failures.contains(&("slow-decode".to_string(), model)), "{expected_failures:?}");
    let doc = roxmltree::Document::parse(&out).unwrap_or_else(|e| panic!("not XML ({e}):\n{out}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    for a in ["tests", "failures", "errors", "skipped", "time"] {
        assert!(root.attribute(a).is_some(), "testsuites lacks {a}");
    }
    let mut failed = Vec::new();
    for suite in root.children().filter(|n| n.is_element()) {
        assert_eq!(suite.tag_name().name(), "testsuite");
        for a in ["name", "tests", "failures", "errors", "skipped", "time", "timestamp"] {
            assert!(suite.attribute(a).is_some(), "testsuite lacks {a}");
        }
        let kids: Vec<_> = suite.children().filter(|n| n.is_element()).collect();
        assert_eq!(kids.first().map(|k| k.tag_name().name()), Some("properties"));
        for case in kids.iter().filter(|k| k.has_tag_name("testcase")) {
            assert!(case.attribute("name").is_some() && case.attribute("classname").is_some() && case.attribute("time").is_some());
            for child in case.children().filter(|n| n.is_element()) {
                assert!(["failure", "skipped", "system-out"].contains(&child.tag_name().name()), "{:?}", child.tag_name());
                if child.has_tag_name("failure") {
                    assert!(child.attribute("message").is_some() && child.attribute("type").is_some());
                    let body = child.text().unwrap_or_default();
                    // A finding's failure carries its evidence.
                    assert!(body.contains("PromQL"), "{body}");
                    failed.push((case.attribute("classname").unwrap().to_string(), case.attribute("name").unwrap().to_string()));
                }
            }
        }
    }
    failed.sort();
    assert_eq!(failed, expected_failures);
    assert_eq!(root.attribute("failures"), Some(failed.len().to_string().as_str()));
    assert!(err.contains(&format!("FAIL: {} ", failed.len())), "check's verdict and the JUnit failures count the same findings: {err}");
    let skipped = doc.descendants().filter(|n| n.has_tag_name("skipped")).count();
    assert!(skipped > 0 || report["not_evaluated"].as_array().unwrap().is_empty(), "not-evaluated pairs are skipped cases");
}

// ---- offline, from the shipped recordings --------------------------------------------------

#[test]
fn check_of_a_recorded_incident_matches_its_snapshot_in_every_text_format() {
    for format in ["table", "markdown", "slack"] {
        let (code, out, err) = run(&["check", "--replay", &fixture("kv-cache-pressure"), "--format", format]);
        assert_eq!(code, 1, "{err}");
        assert!(out.starts_with("FAIL: ") && out.lines().next().unwrap().contains(" since the deploy at "), "{out}");
        snapshot(&format!("check_kv_cache_pressure_{format}"), &out);
    }
}

#[test]
fn new_formats_of_a_recorded_incident_match_their_snapshots() {
    for format in ["slack", "junit", "html"] {
        let (code, out, err) = run(&["explain", "--replay", &fixture("kv-cache-pressure"), "--format", format, "--fail-on", "warning"]);
        assert_eq!(code, 1, "{err}");
        snapshot(&format!("explain_kv_cache_pressure_{format}"), &out);
    }
}

#[test]
fn a_replay_renders_the_same_bytes_every_time_with_no_relative_times() {
    for format in ["table", "markdown", "slack", "html", "junit"] {
        let a = run(&["explain", "--replay", &fixture("kv-cache-pressure"), "--format", format]);
        let b = run(&["explain", "--replay", &fixture("kv-cache-pressure"), "--format", format]);
        assert_eq!(a.1, b.1, "{format}");
        assert!(!a.1.contains(" ago"), "{format}: a replay must not say how long ago");
    }
}

#[test]
fn the_slack_message_fits_slacks_limit_with_the_worst_finding_first() {
    let (_, out, _) = run(&["explain", "--replay", &fixture("kv-cache-pressure"), "--format", "slack"]);
    assert!(out.chars().count() < 1500, "{} chars", out.chars().count());
    assert!(out.starts_with(":red_circle: *vllm-diag: CRITICAL kv-cache-pressure: KV-cache pressure is causing preemptions*"), "{out}");
    // The answer whole: the numbers, the cards, two steps.
    for present in [
        "• KV-cache usage (peak): 100%",
        "• --max-num-seqs: unknown → 15 · confidence high",
        "\n1. Stabilise",
        "\n2. Reproduce",
        "left out to fit the channel; the full report has every line",
    ] {
        assert!(out.contains(present), "{present:?} missing\n{out}");
    }
    assert!(!out.contains('┌') && !out.contains("| "), "no tables in Slack");
}

#[test]
fn check_exit_codes_and_verdicts_follow_fail_on_like_explain() {
    for name in ["kv-cache-pressure", "slow-decode", "healthy-steady"] {
        let report = report_of(name);
        let worst = report["findings"].as_array().unwrap().iter().map(|f| rank(f["severity"].as_str().unwrap())).max().unwrap_or(0);
        for (bar, level) in [("info", 1), ("warning", 2), ("critical", 3)] {
            let (code, out, err) = run(&["check", "--replay", &fixture(name), "--fail-on", bar]);
            let (explain_code, _, _) = run(&["explain", "--replay", &fixture(name), "--fail-on", bar]);
            assert_eq!(code, explain_code, "{name} --fail-on {bar}: check and explain agree");
            let verdict = out.lines().next().unwrap_or_default();
            if worst >= level {
                assert_eq!(code, 1, "{name} --fail-on {bar}: {err}");
                assert!(verdict.starts_with("FAIL: "), "{name} --fail-on {bar}: {verdict}");
            } else {
                assert_eq!(code, 0, "{name} --fail-on {bar}: {err}");
                assert!(verdict.starts_with(&format!("PASS: no {bar} or worse finding")), "{name} --fail-on {bar}: {verdict}");
                if worst > 0 {
                    assert!(verdict.contains("below the bar"), "{verdict}");
                }
            }
        }
        // check's default bar is warning.
        let (code, _, _) = run(&["check", "--replay", &fixture(name)]);
        assert_eq!(code, u8::from(worst >= 2) as i32, "{name}");
    }
}

#[test]
fn check_refuses_what_would_change_its_meaning_with_exit_2() {
    let kv = fixture("kv-cache-pressure");
    for (args, needle) in [
        (vec!["check", "--prometheus", "http://127.0.0.1:9"], "--since"),
        (vec!["check", "--since", "yesterday-ish", "--prometheus", "http://127.0.0.1:9"], "--since"),
        (vec!["check", "--since", "10s", "--prometheus", "http://127.0.0.1:9"], "wait a few minutes"),
        // Since before there were metrics: the deploy window itself, or its baseline just before it
        // (these reached Prometheus, which refused the years before 0 with HTTP 400: exit 3).
        (vec!["check", "--since", "3000y", "--prometheus", "http://127.0.0.1:9"], "at most 100 years"),
        (vec!["check", "--since", "60y", "--prometheus", "http://127.0.0.1:9"], "before 1970-01-01 UTC"),
        (vec!["check", "--since", "40y", "--prometheus", "http://127.0.0.1:9"], "shorter --since"),
        (vec!["check", "--since", "30M", "--prometheus", "http://127.0.0.1:9"], "months"),
        (vec!["check", "--since", "20m", "--window", "1h", "--prometheus", "http://127.0.0.1:9"], "--since"),
        (vec!["check", "--since", "20m", "--replay", kv.as_str()], "--replay"),
        (vec!["check", "--since", "10m", "--scrape", "127.0.0.1:1"], "needs stored history"),
        (vec!["check", "--replay", kv.as_str(), "--watch", "1m"], "--watch"),
        (vec!["check", "--replay", kv.as_str(), "--annotations", "github", "--format", "json"], "--annotations"),
    ] {
        let (code, _, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

// ---- GitHub Actions ------------------------------------------------------------------------

#[test]
fn the_github_step_summary_gets_the_markdown_report_appended() {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "## Earlier step\n").unwrap();
    let path = summary.to_str().unwrap();
    let (code, _, err) = run_env(&["check", "--replay", &fixture("kv-cache-pressure")], &[("GITHUB_STEP_SUMMARY", path)]);
    assert_eq!(code, 1, "{err}");
    let (code, _, _) = run_env(&["explain", "--replay", &fixture("healthy-steady"), "--format", "json"], &[("GITHUB_STEP_SUMMARY", path)]);
    assert_eq!(code, 0);
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.starts_with("## Earlier step\n"), "what was there is kept: {text}");
    assert!(text.contains("### :x: FAIL: ") && text.contains(" since the deploy at 2026-01-15 08:50:00 UTC"), "{text}");
    assert!(text.contains("**vllm-diag: CRITICAL kv-cache-pressure: KV-cache pressure is causing preemptions**"), "{text}");
    // The second run (explain, JSON on stdout) still summarises in Markdown.
    assert!(text.contains("**vllm-diag: OK: no problem found in 38 of 42 rules**"), "{text}");
    assert_eq!(text.matches("**vllm-diag:").count(), 2);
}

#[test]
fn an_unwritable_step_summary_is_a_warning_not_a_failed_check() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("no-such-dir").join("summary.md");
    let (code, out, err) = run_env(&["check", "--replay", &fixture("healthy-steady")], &[("GITHUB_STEP_SUMMARY", bad.to_str().unwrap())]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("PASS"));
    assert!(err.contains("GITHUB_STEP_SUMMARY") && err.contains("no-such-dir"), "{err}");
}

#[test]
fn github_annotations_follow_the_report_one_per_finding() {
    let (code, out, err) = run(&["check", "--replay", &fixture("kv-cache-pressure"), "--annotations", "github"]);
    assert_eq!(code, 1, "{err}");
    let commands: Vec<&str> = out.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(commands.len(), report_of("kv-cache-pressure")["findings"].as_array().unwrap().len(), "{out}");
    assert!(
        commands[0].starts_with("::error title=vllm-diag%3A kv-cache-pressure on meta-llama/Llama-3.1-8B-Instruct::CRITICAL: KV-cache pressure"),
        "{}",
        commands[0]
    );
    assert!(out.trim_end().ends_with(commands[commands.len() - 1]), "annotations come after the report");
    let report_end = out.find("\n::").unwrap();
    assert!(!out[report_end + 1..].lines().any(|l| !l.starts_with("::")), "nothing but annotations after the report");
    let report = report_of("slow-decode");
    let (_, out, _) = run(&["explain", "--replay", &fixture("slow-decode"), "--annotations", "github"]);
    let commands: Vec<&str> = out.lines().filter(|l| l.starts_with("::")).collect();
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(commands.len(), findings.len(), "{out}");
    for (line, f) in commands.iter().zip(findings) {
        let command = match f["severity"].as_str().unwrap() {
            "critical" => "error",
            "warning" => "warning",
            _ => "notice",
        };
        let prefix = format!("::{command} title=vllm-diag%3A {} on ", f["rule"].as_str().unwrap());
        assert!(line.starts_with(&prefix), "{line}");
    }
    let (_, out, _) = run(&["explain", "--replay", &fixture("healthy-steady"), "--annotations", "github"]);
    assert!(!out.lines().any(|l| l.starts_with("::")), "{out}");
}

// ---- completions and the manual page -------------------------------------------------------

#[test]
fn completions_and_the_man_page_come_from_the_cli_definition() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let (code, out, err) = run(&["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.contains("vllm-diag") && out.contains("since"), "{shell}");
    }
    let (code, _, err) = run(&["completions", "tcsh"]);
    assert_eq!(code, 2);
    assert!(err.contains("bash"), "{err}");
    let (code, out, _) = run(&["man"]);
    assert_eq!(code, 0);
    assert!(out.starts_with(".ie") || out.contains(".TH vllm-diag"), "{}", &out[..out.len().min(200)]);
    for sub in ["explain", "check", "completions"] {
        assert!(out.contains(sub), "man page lacks {sub}");
    }
}

// ---- --watch --------------------------------------------------------------------------------

#[test]
fn watch_is_refused_off_a_terminal_and_with_a_replay() {
    let (code, _, err) = run(&["explain", "--watch", "1m", "--prometheus", "http://127.0.0.1:9"]);
    assert_eq!(code, 2);
    assert!(err.contains("--watch") && err.contains("terminal"), "{err}");
    let (code, _, err) = run(&["explain", "--watch", "1m", "--replay", &fixture("kv-cache-pressure")]);
    assert_eq!(code, 2);
    assert!(err.contains("--replay"), "{err}");
}

/// A scenario shifted so that its window ends about now, backfilled into its own Prometheus.
fn scenario_ending_now(name: &str) -> PromServer {
    let path = common::scenario_path(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let spec = vllm_diag_sim::ScenarioSpec::load(&path).unwrap();
    let shift = chrono::Utc::now() - spec.window_end();
    let start = spec.start + chrono::Duration::seconds(shift.num_seconds() - 60);
    let dir = tempfile::tempdir().unwrap();
    let moved = dir.path().join(format!("{name}.toml"));
    let original_start = text.lines().find(|l| l.starts_with("start = ")).expect("a start line");
    std::fs::write(&moved, text.replace(original_start, &format!("start = \"{}\"", rfc3339(start)))).unwrap();
    let spec = vllm_diag_sim::ScenarioSpec::load(&moved).unwrap();
    let om = dir.path().join(format!("{name}.om"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&om).unwrap());
    vllm_diag_sim::generate_openmetrics(&spec, &mut out).unwrap();
    out.flush().unwrap();
    drop(out);
    PromServer::start_with_openmetrics(&om)
}

/// `vllm-diag explain --prometheus <url> --watch 1s --quiet <extra>` on a pseudo-terminal, what it
/// prints read in the background.
struct OnTerminal {
    child: std::process::Child,
    chunks: std::sync::mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl OnTerminal {
    fn start(url: &str, extra: &str) -> OnTerminal {
        if StdCommand::new("script").arg("--version").output().is_err() {
            panic!("`script` (util-linux) is needed to give vllm-diag a terminal in this test");
        }
        let bin = assert_cmd::cargo::cargo_bin("vllm-diag");
        // `script` runs the command through $SHELL on a pseudo-terminal; what we write to its stdin is
        // typed there. `exec` makes vllm-diag the terminal's foreground process itself: a shell that
        // stays in between (dash, /bin/sh on Debian) would be killed by the Ctrl-C and report 130
        // whatever vllm-diag did. SHELL is pinned so the test runs the same way on every machine.
        let inner = format!("exec {} explain --prometheus {url} --watch 1s --quiet {extra}", bin.display());
        let mut child = StdCommand::new("script")
            .args(["-qfec", &inner, "/dev/null"])
            .env("SHELL", "/bin/sh")
            .env("NO_COLOR", "1")
            .env("COLUMNS", "120")
            .env_remove("GITHUB_STEP_SUMMARY")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let (tx, chunks) = std::sync::mpsc::channel::<Vec<u8>>();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        OnTerminal { child, chunks, seen: String::new() }
    }

    /// Read until the output holds `text`, for at most 90 s.
    fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !self.seen.contains(text) {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("watch did not print {text:?} within 90 s; it printed:\n{}", self.seen);
            }
            if let Ok(chunk) = self.chunks.recv_timeout(Duration::from_millis(200)) {
                self.seen.push_str(&String::from_utf8_lossy(&chunk));
            }
        }
    }

    /// Ctrl-C, typed on the terminal; the exit status and everything printed.
    fn ctrl_c(mut self) -> (std::process::ExitStatus, String) {
        self.child.stdin.as_mut().unwrap().write_all(b"\x03").unwrap();
        self.child.stdin.as_mut().unwrap().flush().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("watch did not stop on Ctrl-C; it printed:\n{}", self.seen);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(chunk) = self.chunks.recv_timeout(Duration::from_millis(200)) {
            self.seen.push_str(&String::from_utf8_lossy(&chunk));
        }
        (status, self.seen)
    }
}

#[test]
fn watch_redraws_on_a_terminal_shows_changes_and_stops_cleanly_on_ctrl_c() {
    let prom = scenario_ending_now("kv-cache-pressure");
    let mut term = OnTerminal::start(&prom.url, "");
    // Run 3 starting means run 2, the first one with something to compare, is fully drawn.
    term.wait_for("run 3 at");
    let (status, seen) = term.ctrl_c();
    assert!(status.success(), "exit status {status:?}; output:\n{seen}");
    assert!(seen.contains("Watching every 1s · run 1 at"), "{seen}");
    assert!(seen.contains("\x1b[2J"), "the screen is redrawn");
    assert!(seen.contains("First run: changes are shown from the next run on."), "{seen}");
    assert!(seen.contains("CRITICAL kv-cache-pressure: KV-cache pressure is causing preemptions"), "{seen}");
    assert!(seen.contains("No change in findings since the last run.") || seen.contains("New: ") || seen.contains("Resolved: "), "{seen}");
    assert!(!seen.contains("panicked"), "{seen}");
}

#[test]
fn watch_serves_its_findings_as_metrics_that_a_real_prometheus_scrapes() {
    let prom = scenario_ending_now("kv-cache-pressure");
    let mut term = OnTerminal::start(&prom.url, "--metrics-listen 127.0.0.1:0");
    term.wait_for("/metrics · Ctrl-C");
    // The header names the address the page was bound to.
    let after = term.seen.split("findings on http://").nth(1).unwrap_or_default();
    let addr = after.split("/metrics").next().unwrap_or_default().to_string();
    assert!(addr.starts_with("127.0.0.1:") && !addr.ends_with(":0"), "{addr:?} in\n{}", term.seen);
    let scraper = PromServer::start_scraping(&addr, "1s");
    let model = "meta-llama/Llama-3.1-8B-Instruct";
    let finding = scraper.wait_for_series(&format!("vllm_diag_finding{{rule=\"kv-cache-pressure\",model_name=\"{model}\"}}"), true);
    assert_eq!(finding.len(), 1, "{finding:?}");
    assert_eq!((finding[0].0.get("severity").map(String::as_str), finding[0].1), (Some("critical"), 1.0), "{finding:?}");
    let runs = scraper.wait_for_series("vllm_diag_watch_runs_total > 0", true);
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(scraper.wait_for_series("vllm_diag_last_diagnosis_timestamp_seconds", true).len() == 1);
    // The healthy model has no warning or critical finding on the page.
    let others = scraper.query(&format!("vllm_diag_finding{{model_name!=\"{model}\",severity=~\"warning|critical\"}}"), chrono::Utc::now());
    assert!(others.is_empty(), "{others:?}");
    let (status, seen) = term.ctrl_c();
    assert!(status.success(), "exit status {status:?}; output:\n{seen}");
}

#[test]
fn metrics_listen_needs_watch() {
    let (code, _, err) = run(&["explain", "--metrics-listen", "127.0.0.1:0", "--prometheus", "http://127.0.0.1:9"]);
    assert_eq!(code, 2);
    assert!(err.contains("--metrics-listen") && err.contains("--watch"), "{err}");
}
