//! Edges a user meets on the way in: output to a reader that went away, thresholds outside the
//! range of what they are compared with, help that lists only what a command takes, and shell
//! completions that know the rule pack.

mod common;

use std::process::{Command, Stdio};

use common::run::{path_arg, write_file};

const BIN: &str = env!("CARGO_BIN_EXE_vllm-diag");
const REPLAY: &str = "fixtures/incidents/kv-cache-pressure.json";

/// Run vllm-diag with stdout and stderr both a pipe whose reading end is already closed (what
/// `2>&1 | head -0` leaves it), and return its exit code: every write fails with EPIPE.
fn closed_pipes(args: &[&str], stdin: Stdio) -> Option<i32> {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let status = Command::new(BIN)
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("VLLM_DIAG_PROMETHEUS_URL")
        .stdin(stdin)
        .stdout(writer.try_clone().expect("clone the pipe"))
        .stderr(writer)
        .status()
        .expect("run vllm-diag");
    status.code()
}

#[test]
fn a_closed_stdout_and_stderr_never_turn_the_exit_code_into_a_panic() {
    for (args, code) in [
        (&["explain", "--replay", "missing.json"][..], 2),
        (&["explain", "--replay", REPLAY], 0),
        (&["explain", "--replay", REPLAY, "-v", "--format", "json"], 0),
        (&["explain", "--replay", REPLAY, "--fail-on", "warning", "--format", "markdown"], 1),
        (&["check", "--replay", REPLAY, "--annotations", "github"], 1),
        (&["explain", "--no-such-flag"], 2),
        (&["explain", "--prometheus", "http://127.0.0.1:9", "--window", "30m", "--timeout", "5s"], 3),
        (&["rules", "list"], 0),
        (&["rules", "show", "kv-cache-pressure"], 0),
        (&["rules", "export"], 0),
        (&["completions", "bash"], 0),
        (&["man"], 0),
        (&["config", "show", "--no-config"], 0),
        (&["--help"], 0),
        (&["check", "--help"], 0),
    ] {
        assert_eq!(closed_pipes(args, Stdio::null()), Some(code), "vllm-diag {args:?} with stdout and stderr closed");
    }
}

#[test]
fn thresholds_outside_the_range_of_what_they_are_compared_with_are_refused_at_their_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (text, needle) in [
        ("[thresholds]\nkv_usage_high = \"185%\"\n", "thresholds.kv_usage_high: \"185%\" is out of range: give a share from 0% to 100% (0 to 1)"),
        ("[thresholds]\nkv_usage_high = 1.2\n", "\"1.2\" is out of range: give a share from 0% to 100%"),
        ("# a comment\n[thresholds]\nttft_p95_high = -3\n", "thresholds.ttft_p95_high: \"-3\" is out of range: give a duration of 0s or more"),
        ("[thresholds]\nwaiting_backlog = -1\n", "thresholds.waiting_backlog: \"-1\" is out of range: give a value of 0 or more"),
        ("[thresholds]\nttft_p95_high = \"-3s\"\n", "thresholds.ttft_p95_high"),
        ("window = \"-30m\"\n", "window \"-30m\": a duration cannot be negative"),
    ] {
        let file = write_file(dir.path(), "vllm-diag.toml", text);
        let run = common::run::run(&["explain", "--config", path_arg(&file), "--replay", &format!("{}/{REPLAY}", env!("CARGO_MANIFEST_DIR"))], &[]);
        assert_eq!(run.code, 2, "{text}: {}", run.stderr);
        let line = text.lines().position(|l| !l.starts_with('#') && l.contains('=')).unwrap() + 1;
        assert!(run.stderr.contains(&format!("{}:{line}:", file.display())), "{text}: names file:line: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{text}: {}", run.stderr);
    }
    // In range, the same keys are taken.
    let file = write_file(dir.path(), "vllm-diag.toml", "[thresholds]\nkv_usage_high = \"100%\"\nttft_p95_high = 0\n");
    let run = common::run::run(&["config", "show", "--config", path_arg(&file)], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    // A rule file's [thresholds] and profiles are checked the same way.
    let rules = tempfile::tempdir().expect("temp dir");
    write_file(rules.path(), "mine.toml", "[thresholds]\nkv_usage_high = \"150%\"\n");
    let run = common::run::run(&["rules", "list", "--rules", path_arg(rules.path())], &[]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("mine.toml:2") && run.stderr.contains("out of range: give a share from 0% to 100%"), "{}", run.stderr);
}

/// The long flags a command's --help lists.
fn listed_flags(args: &[&str]) -> Vec<String> {
    let run = common::run::run(args, &[]);
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    run.stdout
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("--").or_else(|| l.trim_start().split_once(", --").map(|(_, f)| f)))
        .map(|f| f.split(|c: char| !(c.is_alphanumeric() || c == '-')).next().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn check_help_lists_none_of_the_flags_check_refuses_and_each_is_still_refused() {
    let explain = listed_flags(&["explain", "--help"]);
    let check = listed_flags(&["check", "--help"]);
    for flag in ["scrape", "interval", "baseline-from", "save-samples", "window", "baseline", "watch", "metrics-listen"] {
        assert!(explain.contains(&flag.to_string()), "explain --help lists --{flag}: {explain:?}");
        assert!(!check.contains(&flag.to_string()), "check --help lists --{flag}, which check refuses: {check:?}");
    }
    for args in [
        &["check", "--since", "20m", "--scrape", "127.0.0.1:1"][..],
        &["check", "--since", "20m", "--window", "30m"],
        &["check", "--since", "20m", "--interval", "5s"],
        &["check", "--since", "20m", "--baseline-from", "x.om"],
        &["check", "--since", "20m", "--save-samples", "x.om"],
    ] {
        let run = common::run::run(args, &[]);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    }
    // Every flag check --help lists, check accepts (a usage error names the flag it refuses).
    for flag in &check {
        if matches!(flag.as_str(), "help" | "version") {
            continue;
        }
        let run = common::run::run(&["check", &format!("--{flag}"), "--help"], &[]);
        assert!(!run.stderr.contains("unexpected argument"), "--{flag}: {}", run.stderr);
    }
}

#[test]
fn completions_offer_rule_and_signal_ids_profiles_and_formats_in_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let run = common::run::run(&["completions", shell], &[]);
        assert_eq!(run.code, 0, "{shell}: {}", run.stderr);
        for value in ["kv-cache-pressure", "slo-burn", "kv_usage_max", "code-completion", "agentic", "markdown", "junit"] {
            assert!(run.stdout.contains(value), "{shell} completion does not know {value}");
        }
    }
    // Bash itself, asked what completes `vllm-diag rules show kv-ca` and `explain --profile co`.
    let run = common::run::run(&["completions", "bash"], &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let script = write_file(dir.path(), "vllm-diag.bash", &run.stdout);
    let ask = |words: &str| -> Vec<String> {
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); COMP_LINE=\"{words}\"; COMP_POINT=${{#COMP_LINE}}; _vllm__diag vllm-diag \"${{COMP_WORDS[-1]}}\" \"${{COMP_WORDS[-2]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let out = Command::new("bash").args(["-c", &probe]).output().expect("run bash");
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
    };
    let got = ask("vllm-diag rules show kv-ca");
    assert!(got.contains(&"kv-cache-pressure".to_string()) && got.iter().all(|w| w.starts_with("kv-ca")), "{got:?}");
    let got = ask("vllm-diag rules show kv_us");
    assert!(got.contains(&"kv_usage_max".to_string()), "{got:?}");
    let got = ask("vllm-diag explain --profile co");
    assert_eq!(got, vec!["code-completion".to_string()]);
    let got = ask("vllm-diag check --format ju");
    assert_eq!(got, vec!["junit".to_string()]);
}

#[test]
fn rules_show_takes_a_signal_id_too() {
    let run = common::run::run(&["rules", "show", "kv_usage_max"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.starts_with("kv_usage_max (signal, "), "{}", run.stdout);
    assert!(run.stdout.contains("vllm:kv_cache_usage_perc") && run.stdout.contains("Read by: ") && run.stdout.contains("kv-cache-pressure"), "{}", run.stdout);
    let run = common::run::run(&["rules", "show", "kv_usage_maxx"], &[]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("no rule \"kv_usage_maxx\". Did you mean \"kv_usage_max\"?"), "{}", run.stderr);
}
