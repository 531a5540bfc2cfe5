//! `vllm-diag rules test`: the built-in pack's own tests pass, a wrong expectation fails with a
//! diff (exit 1), a malformed file names its line (exit 2), and a user's rule with its test runs
//! with nothing else installed.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn builtin_test_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("rules/tests");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|e| e == "toml")).collect();
    files.sort();
    files
}

fn rules_test(args: &[&str], files: &[PathBuf]) -> (i32, String, String) {
    let out = Command::cargo_bin("vllm-diag").unwrap().args(["rules", "test"]).args(args).args(files).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string())
}

#[test]
fn the_built_in_rule_tests_pass() {
    let files = builtin_test_files();
    assert!(files.len() >= 3, "rules/tests/ holds {files:?}");
    let (code, stdout, stderr) = rules_test(&[], &files);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(!stdout.contains("FAIL"), "{stdout}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.ends_with(" passed, 0 failed") && !last.starts_with("0 "), "{stdout}");
}

#[test]
fn the_built_in_tests_make_each_original_rule_fire_and_stay_quiet() {
    let text: String = builtin_test_files().iter().map(|p| std::fs::read_to_string(p).unwrap()).collect();
    for rule in ["load-exceeds-capacity", "slow-prefill", "slow-decode", "severe-saturation", "kv-cache-pressure", "http-errors"] {
        let fires = format!("findings = [{{ rule = \"{rule}\"");
        assert!(text.contains(&fires), "no test in rules/tests makes {rule} fire");
        assert!(text.contains(&format!("{{ rule = \"{rule}\", scope")), "no test in rules/tests names {rule}");
    }
    assert!(text.matches("name = \"near miss").count() >= 6, "every rule needs a near-miss test");
}

const USER_RULE: &str = r#"
[[rule]]
id = "deep-queue"
title = "Requests pile up"
severity = "warning"
summary = "More than 20 requests wait on average."
when = ["waiting_avg > 20"]
steps = ["Add capacity."]
"#;

fn user_test(expected_rule: &str) -> String {
    format!(
        r#"
interval = "1m"
window = "10m"
rules = ["deep-queue"]

[[series]]
series = 'vllm:num_requests_waiting{{model_name="m", instance="a:8000"}}'
values = "0x10 30x10"

[[test]]
name = "a deep queue fires"
[test.expect]
findings = [{{ rule = "{expected_rule}", scope = {{ model_name = "m" }} }}]
"#
    )
}

#[test]
fn a_user_rule_and_its_test_run_with_no_server() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/mine.toml"), USER_RULE).unwrap();
    let test = dir.path().join("mine_test.toml");
    std::fs::write(&test, user_test("deep-queue")).unwrap();
    let rules = dir.path().join("rules");
    let (code, stdout, stderr) = rules_test(&["--rules", rules.to_str().unwrap()], &[test]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("ok    ") && stdout.contains("a deep queue fires"), "{stdout}");
    assert!(stdout.ends_with("1 passed, 0 failed\n"), "{stdout}");
}

#[test]
fn a_wrong_expectation_fails_with_expected_against_got() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/mine.toml"), USER_RULE).unwrap();
    let test = dir.path().join("mine_test.toml");
    // expects a finding for a different rule: both sides of the diff must show
    std::fs::write(&test, user_test("deep-queue").replace("findings = [{ rule = \"deep-queue\"", "findings = [{ rule = \"slow-decode\"")).unwrap();
    let rules = dir.path().join("rules");
    let (code, stdout, stderr) = rules_test(&["--rules", rules.to_str().unwrap()], &[test]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("FAIL  "), "{stdout}");
    assert!(stdout.contains("--- expected") && stdout.contains("+++ got"), "{stdout}");
    assert!(stdout.contains("  - slow-decode {model_name=\"m\"}"), "{stdout}");
    assert!(stdout.contains("  + deep-queue {model_name=\"m\"}"), "{stdout}");
    assert!(stdout.ends_with("0 passed, 1 failed\n"), "{stdout}");
}

#[test]
fn a_malformed_test_file_is_a_usage_error_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let test = dir.path().join("broken.toml");
    std::fs::write(&test, "[[test]]\nname = \"t\"\n[[test.series]]\nseries = 'x'\nvalues = \"1 2 3x\"\n").unwrap();
    let (code, stdout, stderr) = rules_test(&[], &[test]);
    assert_eq!(code, 2, "{stdout}{stderr}");
    assert!(stderr.contains("broken.toml:5:"), "{stderr}");
    assert!(stderr.contains("3x"), "{stderr}");
    assert!(stdout.is_empty(), "no test runs when a file is malformed: {stdout}");
}

#[test]
fn a_missing_test_file_is_a_usage_error() {
    let (code, _, stderr) = rules_test(&[], &[PathBuf::from("/nonexistent/tests.toml")]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent/tests.toml") && stderr.contains("cannot read"), "{stderr}");
}
