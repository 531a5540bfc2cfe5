//! The configuration file, `vllm-diag.toml`, through the real binary: where it is found, the
//! precedence of flag over environment over file over default, `${VAR}` expansion and its errors,
//! unknown keys with file:line, secrets masked in `config show`, disabled rules reported as
//! disabled, and a file whose source, CA and credentials drive a real run against a Prometheus
//! behind TLS and basic auth.
//!
//! Every run gets an empty HOME and no XDG_CONFIG_HOME, so a developer's own configuration never
//! leaks into a test.

mod common;

use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use common::proxy::{assert_all_carry, FaultProxy};
use common::run::{at_window_end, run_command, vllm_diag, write_file, Run};
use common::secure::start_scenario_tls_basic_auth;
use common::start_scenario;

// `Run` is the shared one from `common::run`; only this file reads `config show` rows.
impl Run {
    /// The `from` column of one `config show` row, and its value.
    fn row(&self, key: &str) -> (String, String) {
        let line = self
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no row {key} in:\n{}\nstderr: {}", self.stdout, self.stderr));
        let rest = line[key.len()..].trim_start();
        let (value, from) = rest.split_once("  ").unwrap_or((rest, ""));
        (value.trim().to_string(), from.trim().to_string())
    }
}

/// A scratch directory to run in, with an empty HOME inside it.
struct Sandbox {
    dir: TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::Builder::new().prefix("vllm-diag-config-").tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        std::fs::create_dir_all(dir.path().join("home")).unwrap_or_else(|e| panic!("mkdir: {e}"));
        Sandbox { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Write `text` to `rel` inside the sandbox, making its folders.
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        write_file(self.dir.path(), rel, text)
    }

    /// Run vllm-diag in the sandbox, with its empty HOME, no XDG_CONFIG_HOME or NO_COLOR, and `env`.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = vllm_diag();
        cmd.current_dir(self.dir.path()).env("HOME", self.dir.path().join("home")).env_remove("XDG_CONFIG_HOME").env_remove("NO_COLOR");
        run_command(cmd, args, env)
    }
}

#[test]
fn a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() {
    let s = Sandbox::new();
    let file = s.write("team.toml", "window = \"2h\"\n\n[source]\nprometheus = \"http://from-file:9090\"\n");
    let file = file.to_str().expect("UTF-8 path");

    let r = s.run(&["config", "show", "--config", file], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.row("source.prometheus"), ("http://from-file:9090".into(), format!("file {file}:4")));
    assert_eq!(r.row("window"), ("2h".into(), format!("file {file}:1")));
    assert_eq!(r.row("profile"), ("chat".into(), "default".into()));

    let r = s.run(&["config", "show", "--config", file], &[("VLLM_DIAG_PROMETHEUS_URL", "http://from-env:9090")]);
    assert_eq!(r.row("source.prometheus"), ("http://from-env:9090".into(), "env $VLLM_DIAG_PROMETHEUS_URL".into()));

    let r = s.run(
        &["config", "show", "--config", file, "--prometheus", "http://from-flag:9090", "--window", "5m"],
        &[("VLLM_DIAG_PROMETHEUS_URL", "http://from-env:9090")],
    );
    assert_eq!(r.row("source.prometheus"), ("http://from-flag:9090".into(), "flag --prometheus".into()));
    assert_eq!(r.row("window"), ("5m".into(), "flag --window".into()));

    let r = s.run(&["config", "show"], &[]);
    assert_eq!(r.row("source.prometheus"), ("http://localhost:9090".into(), "default".into()));
    assert_eq!(r.row("window"), ("30m".into(), "default".into()));
    assert!(r.stdout.starts_with("Configuration file: none found (looked for ./vllm-diag.toml"), "{}", r.stdout);
}

#[test]
fn the_file_is_found_in_the_current_directory_then_the_user_config_directory() {
    let s = Sandbox::new();
    let home = s.path().join("home");
    let home_file = s.write("home/.config/vllm-diag/vllm-diag.toml", "profile = \"batch\"\n");
    let r = s.run(&["config", "show"], &[]);
    assert_eq!(r.row("profile"), ("batch".into(), format!("file {}:1", home_file.display())));
    assert!(r.stdout.contains("from ~/.config/vllm-diag"), "{}", r.stdout);

    let xdg = s.path().join("xdg");
    let xdg_file = s.write("xdg/vllm-diag/vllm-diag.toml", "profile = \"rag\"\n");
    let r = s.run(&["config", "show"], &[("XDG_CONFIG_HOME", xdg.to_str().expect("UTF-8"))]);
    assert_eq!(r.row("profile"), ("rag".into(), format!("file {}:1", xdg_file.display())));

    s.write("vllm-diag.toml", "\nprofile = \"agentic\"\n");
    let r = s.run(&["config", "show"], &[("XDG_CONFIG_HOME", xdg.to_str().expect("UTF-8"))]);
    assert_eq!(r.row("profile"), ("agentic".into(), "file ./vllm-diag.toml:2".into()));

    let r = s.run(&["config", "show", "--no-config"], &[]);
    assert_eq!(r.row("profile"), ("chat".into(), "default".into()));
    assert!(home.exists());
}

#[test]
fn a_missing_config_file_is_a_usage_error() {
    let s = Sandbox::new();
    for args in [
        &["config", "show", "--config", "nope.toml"][..],
        &["explain", "--config", "nope.toml", "--prometheus", "http://127.0.0.1:1"][..],
        &["check", "--since", "20m", "--config", "nope.toml"][..],
    ] {
        let r = s.run(args, &[]);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains("--config nope.toml: cannot read it"), "{}", r.stderr);
        assert!(r.stdout.is_empty(), "{}", r.stdout);
    }
}

#[test]
fn variables_expand_and_an_unset_one_names_itself_and_the_line() {
    let s = Sandbox::new();
    s.write("vllm-diag.toml", "# team defaults\nselector = 'namespace=\"${NS}\",job=\"vllm\"'\n");
    let r = s.run(&["config", "show"], &[("NS", "prod")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.row("selector"), ("namespace=\"prod\",job=\"vllm\"".into(), "file ./vllm-diag.toml:2 (via ${NS})".into()));

    for args in [&["config", "show"][..], &["explain", "--prometheus", "http://127.0.0.1:1"][..]] {
        let r = s.run(args, &[]);
        assert_eq!(r.code, 2, "{}", r.stderr);
        assert!(r.stderr.contains("./vllm-diag.toml:2:") && r.stderr.contains("${NS} is not set"), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn unknown_keys_and_bad_values_are_errors_with_file_and_line() {
    let s = Sandbox::new();
    for (text, needle, line) in [
        ("window = \"30m\"\nwindwo = \"1h\"\n", "unknown field `windwo`", 2),
        ("[source]\nprometheus = \"http://p:9090\"\ntenent = \"a\"\n", "unknown field `tenent`", 3),
        ("[sources]\nprometheus = \"http://p:9090\"\n", "unknown field `sources`", 1),
        ("[rules]\ndisabled = [\"slow-decod\"]\n", "no rule \"slow-decod\"", 2),
        ("\n\nprofile = \"turbo\"\n", "no such profile", 3),
        ("[thresholds]\nttft_p95_hihg = \"2s\"\n", "no such threshold", 2),
        ("window = 30\n", "window", 1),
        ("[rules]\ndir = \"r\"\nenabled = []\n", "rules.enabled is empty", 3),
        ("\nbaseline = \"99999999999d\"\n", "at most 100 years", 2),
    ] {
        s.write("vllm-diag.toml", text);
        let r = s.run(&["config", "show"], &[]);
        assert_eq!(r.code, 2, "{text:?}: {}", r.stderr);
        assert!(r.stderr.contains(&format!("config file error: ./vllm-diag.toml:{line}:")) && r.stderr.contains(needle), "{text:?}: {}", r.stderr);
    }
}

#[test]
fn config_show_marks_a_file_the_configuration_names_that_does_not_exist_and_fails_like_explain() {
    let s = Sandbox::new();
    s.write("vllm-diag.toml", "[source]\nprometheus = \"http://p:9090\"\nca_file = \"/nonexistent/ca.pem\"\n");
    let r = s.run(&["config", "show"], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stdout.contains("/nonexistent/ca.pem (DOES NOT EXIST)"), "{}", r.stdout);
    assert!(r.stderr.contains("./vllm-diag.toml:3:") && r.stderr.contains("does not exist"), "{}", r.stderr);
}

#[test]
fn config_show_masks_every_secret() {
    let s = Sandbox::new();
    s.write("token", "tok-from-file-5521\n");
    s.write(
        "vllm-diag.toml",
        "[source]\n\
         prometheus = \"https://diag:${URL_PW}@prom.example/prometheus\"\n\
         headers = { X-Api-Key = \"${API_KEY}\", X-Team = \"infra-team-7\" }\n",
    );
    let secrets = [("URL_PW", "pw-in-url-3391"), ("API_KEY", "api-key-8812")];
    let r = s.run(&["config", "show"], &secrets);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.row("source.prometheus").0, "https://diag:***@prom.example/prometheus");
    assert_eq!(r.row("source.headers.X-Api-Key"), ("***".into(), "file ./vllm-diag.toml:3 (via ${API_KEY})".into()));
    assert_eq!(r.row("source.headers.X-Team").0, "***");
    for (_, secret) in secrets {
        assert!(!r.stdout.contains(secret) && !r.stderr.contains(secret), "{secret} shown:\n{}{}", r.stdout, r.stderr);
    }
    assert!(!r.stdout.contains("infra-team-7"), "{}", r.stdout);

    s.write("vllm-diag.toml", "[source]\nbasic_auth_user = \"diag\"\nbasic_auth_password = \"${PW}\"\n");
    let r = s.run(&["config", "show"], &[("PW", "basic-pw-6610")]);
    assert_eq!(r.row("source.basic_auth_password"), ("***".into(), "file ./vllm-diag.toml:3 (via ${PW})".into()));
    assert!(!r.stdout.contains("basic-pw-6610"), "{}", r.stdout);

    s.write("vllm-diag.toml", "[source]\nbearer_token = \"${TOKEN}\"\n");
    let r = s.run(&["config", "show"], &[("TOKEN", "bearer-tok-1207")]);
    assert_eq!(r.row("source.bearer_token"), ("***".into(), "file ./vllm-diag.toml:2 (via ${TOKEN})".into()));
    assert!(!r.stdout.contains("bearer-tok-1207"), "{}", r.stdout);
    let r = s.run(&["config", "show", "--bearer-token-file", "token"], &[("TOKEN", "bearer-tok-1207")]);
    assert_eq!(r.row("source.bearer_token_file"), ("token".into(), "flag --bearer-token-file".into()));
    assert_eq!(r.row("source.bearer_token"), ("(none)".into(), "default".into()));
    assert!(!r.stdout.contains("tok-from-file-5521"), "{}", r.stdout);

    // A secret written out in the file is refused, and the refusal does not repeat it.
    s.write("vllm-diag.toml", "[source]\nbearer_token = \"inline-tok-4471\"\n");
    let r = s.run(&["config", "show"], &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("./vllm-diag.toml:2:") && !r.stderr.contains("inline-tok-4471"), "{}", r.stderr);
}

#[test]
fn a_broken_config_file_does_not_stop_the_commands_it_does_not_apply_to() {
    let s = Sandbox::new();
    s.write("vllm-diag.toml", "this is not toml\n");
    // Documentation still works, and says the file was left out and where it is broken ...
    for args in [&["rules", "list"][..], &["rules", "show", "kv-cache-pressure"]] {
        let r = s.run(args, &[]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stdout.contains("kv-cache-pressure"));
        assert!(r.stderr.contains("warning: config file error: ./vllm-diag.toml:1:") && r.stderr.contains("without the configuration file"), "{}", r.stderr);
    }
    // ... while what a pipeline acts on stops, as explain does.
    let r = s.run(&["rules", "export"], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stdout.is_empty() && r.stderr.contains("./vllm-diag.toml:1:"), "{}", r.stderr);
    let r = s.run(&["config", "show"], &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("./vllm-diag.toml:1:"), "{}", r.stderr);
}

/// `rules list`, `show`, `export` and `test` describe the pack explain would run: the file's
/// profile and thresholds in force, its turned-off rules marked (and not exported), each with
/// where; `--no-config` leaves the file out.
#[test]
fn the_rules_commands_take_what_the_configuration_file_says_about_the_rules() {
    let s = Sandbox::new();
    s.write(
        "vllm-diag.toml",
        "profile = \"batch\"\nselector = 'namespace=\"prod\"'\ngroup_by = \"model_name,cluster\"\n\n[thresholds]\nkv_usage_high = \"85%\"\n\n[rules]\ndisabled = [\"slow-decode\"]\n",
    );
    let r = s.run(&["rules", "list"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let line = r.stdout.lines().find(|l| l.starts_with("slow-decode ")).unwrap();
    assert!(line.ends_with("[off: file ./vllm-diag.toml:9]"), "{line}");

    let r = s.run(&["rules", "show", "kv-cache-pressure"], &[]);
    assert!(r.stdout.contains("$kv_usage_high = 85% (compared with kv_usage_max, set by file ./vllm-diag.toml:6)"), "{}", r.stdout);
    assert!(r.stdout.contains("$itl_p95_high = 200 ms (compared with itl_p95, set by profile batch (file ./vllm-diag.toml:1))"), "{}", r.stdout);

    let r = s.run(&["rules", "export"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("not exported: slow-decode: turned off by the configuration (file ./vllm-diag.toml:9)"), "{}", r.stderr);
    assert!(!r.stdout.contains("alert: VllmSlowDecode") && !r.stdout.contains("vllm_diag_rule: slow-decode"), "{}", r.stdout);
    assert!(r.stdout.contains("Thresholds: profile batch."), "{}", r.stdout);
    let all = s.run(&["--no-config", "rules", "list"], &[]).stdout.lines().count();
    assert!(r.stdout.contains(&format!(" of {all} rules exported; turned off by the configuration file: 1")), "{}", r.stdout);
    assert!(r.stdout.contains("kv_usage_high = 85% (file ./vllm-diag.toml:6)"), "{}", r.stdout);
    assert!(r.stdout.contains(">= 0.85"), "the file's threshold is not in the alerts");
    assert!(r.stdout.contains("by (model_name, cluster)") && r.stdout.contains("namespace=\\\"prod\\\""), "{}", r.stdout);
    // A flag still beats the file.
    let r = s.run(&["rules", "export", "--group-by", "model_name", "--profile", "chat"], &[]);
    assert!(!r.stdout.contains("cluster") && r.stdout.contains("Thresholds: profile chat."), "{}", r.stdout);

    // Without the file: nothing off, the defaults.
    let r = s.run(&["--no-config", "rules", "list"], &[]);
    assert!(!r.stdout.contains("[off:"), "{}", r.stdout);
    let r = s.run(&["--no-config", "rules", "show", "kv-cache-pressure"], &[]);
    assert!(r.stdout.contains("$kv_usage_high = 90% (compared with kv_usage_max)\n"), "{}", r.stdout);

    // `rules test` reads a file only when --config names it, so a test gives the same result on
    // every machine. Named, its thresholds judge: at 85% a built-in test's cache at 88% is under
    // pressure, so the test that expects it is not fails. A rule the file turns off can still be
    // tested: a test names the rules it runs.
    let tests = concat!(env!("CARGO_MANIFEST_DIR"), "/rules/tests/capacity.toml");
    s.write("vllm-diag.toml", "[thresholds]\nkv_usage_high = \"85%\"\n[rules]\ndisabled = [\"kv-cache-pressure\"]\n");
    let r = s.run(&["rules", "test", tests], &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let r = s.run(&["--config", "vllm-diag.toml", "rules", "test", tests], &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("FAIL"), "{}", r.stdout);

    // A rules directory the file names and that is missing is said at the file's line, with or
    // without the thresholds that are checked against its rules (a warning for the listing).
    for text in ["[rules]\ndir = \"no-such-rules\"\n", "[thresholds]\nkv_usage_high = \"85%\"\n[rules]\ndir = \"no-such-rules\"\n"] {
        s.write("vllm-diag.toml", text);
        for (args, code) in [(&["rules", "list"][..], 0), (&["rules", "export"], 2), (&["explain", "--replay", "none.json"], 2)] {
            let r = s.run(args, &[]);
            assert_eq!(r.code, code, "{args:?} {text}: {}", r.stderr);
            assert!(
                r.stderr.contains("./vllm-diag.toml:") && r.stderr.contains("no-such-rules") && !r.stderr.contains("--rules takes"),
                "{args:?} {text}: {}",
                r.stderr
            );
        }
    }

    // A file's selector that does not parse is named at its line by export.
    s.write("vllm-diag.toml", "selector = 'namespace=prod'\n");
    let r = s.run(&["rules", "export"], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("./vllm-diag.toml:1:"), "{}", r.stderr);
}

/// Without configuration kv-cache-pressure ranks first and absorbs slo-burn and
/// load-exceeds-capacity. Disabled, it is listed as disabled (neither healthy nor not evaluated),
/// and what it used to absorb is reported in its own right.
#[test]
fn disabled_rules_are_listed_as_disabled_never_as_healthy_or_not_evaluated() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let s = Sandbox::new();
    let at = at_window_end(&spec);
    s.write("vllm-diag.toml", &format!("[source]\nprometheus = \"{}\"\n\n[rules]\ndisabled = [\"kv-cache-pressure\", \"gpu-throttling\"]\n", prom.url));
    let plain = s.run(&["explain", "--no-config", "--prometheus", &prom.url, "--at", &at, "--format", "json"], &[]);
    let plain = plain.json();
    assert_eq!(plain["findings"][0]["rule"], "kv-cache-pressure", "{plain:#}");
    assert!(plain.get("disabled").is_none(), "an empty list is left out of the JSON");

    let r = s.run(&["explain", "--at", &at, "--format", "json"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = r.json();
    assert_eq!(report["disabled"], serde_json::json!(["gpu-throttling", "kv-cache-pressure"]));
    let mentions = |list: &str, rule: &str| report[list].as_array().into_iter().flatten().any(|x| x["rule"] == rule);
    for rule in ["kv-cache-pressure", "gpu-throttling"] {
        for list in ["findings", "healthy", "not_evaluated"] {
            assert!(!mentions(list, rule), "{rule} appears in {list}: {report:#}");
        }
    }
    let first = &report["findings"][0];
    assert_eq!(first["rule"], "load-exceeds-capacity", "{report:#}");
    assert_eq!(first["scope"], plain["findings"][0]["scope"]);
    assert!(first["also_consistent"].as_array().into_iter().flatten().any(|a| a["rule"] == "slo-burn"), "{first:#}");
    // gpu-throttling (no DCGM data) is gone from the not-evaluated list once disabled; what is left
    // there is deferred-waiting (this fleet has no waiting-by-reason gauge),
    // priority-preemption for the model that preempts (no preemption reasons without
    // `preemption_detail`) and the other GPU rules (no DCGM data).
    let left: Vec<&str> = report["not_evaluated"].as_array().into_iter().flatten().filter_map(|x| x["rule"].as_str()).collect();
    let expected = ["deferred-waiting", "priority-preemption", "gpu-power-capped", "gpu-power-limit-lowered"];
    assert!(left.contains(&"deferred-waiting") && left.iter().all(|r| expected.contains(r)), "{report:#}");

    for format in ["table", "markdown", "slack"] {
        let r = s.run(&["explain", "--at", &at, "--format", format], &[]);
        assert!(r.stdout.contains("Disabled in the configuration (not evaluated): gpu-throttling, kv-cache-pressure"), "{format}:\n{}", r.stdout);
    }

    // `enabled` keeps only the rules it names.
    s.write("vllm-diag.toml", &format!("[source]\nprometheus = \"{}\"\n[rules]\nenabled = [\"kv-cache-pressure\"]\n", prom.url));
    let report = s.run(&["explain", "--at", &at, "--format", "json"], &[]).json();
    let rules: Vec<&str> = report["findings"].as_array().into_iter().flatten().filter_map(|f| f["rule"].as_str()).collect();
    assert_eq!(rules, ["kv-cache-pressure"]);
    assert!(report["findings"][0]["also_consistent"].as_array().is_some_and(|a| a.is_empty()), "{report:#}");
    let healthy: Vec<&str> = report["healthy"].as_array().into_iter().flatten().filter_map(|h| h["rule"].as_str()).collect();
    assert!(healthy.iter().all(|r| *r == "kv-cache-pressure"), "{healthy:?}");
    assert!(report["disabled"].as_array().is_some_and(|d| d.len() > 20 && !d.contains(&Value::from("kv-cache-pressure"))));
}

/// The file alone says where the metrics are, which CA to trust (a path relative to the file) and
/// how to log in (the password from ${VAR}): a run with no connection flags gets the diagnosis from
/// a Prometheus behind TLS and basic auth, and a flag still overrides the file.
#[test]
fn the_files_source_ca_and_credentials_drive_a_real_run() {
    let (pki, spec, prom) = start_scenario_tls_basic_auth("slow-decode", "diag", "pw-correct-2209");
    let s = Sandbox::new();
    std::fs::copy(&pki.ca, s.path().join("team-ca.pem")).unwrap_or_else(|e| panic!("copy the CA: {e}"));
    s.write(
        "conf/vllm-diag.toml",
        &format!(
            "window = \"30m\"\n[source]\nprometheus = \"{}\"\nca_file = \"../team-ca.pem\"\nbasic_auth_user = \"diag\"\nbasic_auth_password = \"${{DIAG_PW}}\"\n",
            prom.url
        ),
    );
    let at = at_window_end(&spec);
    let r = s.run(&["explain", "--config", "conf/vllm-diag.toml", "--at", &at, "--format", "json"], &[("DIAG_PW", "pw-correct-2209")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.json()["findings"][0]["rule"], "slow-decode", "{}", r.stdout);
    assert!(!r.stdout.contains("pw-correct-2209") && !r.stderr.contains("pw-correct-2209"));

    // The environment's password beats the file's: a wrong one fails.
    let r = s.run(
        &["explain", "--config", "conf/vllm-diag.toml", "--at", &at, "--format", "json"],
        &[("DIAG_PW", "pw-correct-2209"), ("VLLM_DIAG_BASIC_AUTH_PASSWORD", "pw-wrong")],
    );
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("401"), "{}", r.stderr);

    // A missing CA file named by the file is reported against the file's line.
    s.write("conf/vllm-diag.toml", &format!("[source]\nprometheus = \"{}\"\nca_file = \"no-such-ca.pem\"\n", prom.url));
    let r = s.run(&["explain", "--config", "conf/vllm-diag.toml", "--at", &at], &[]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("conf/vllm-diag.toml:3:") && r.stderr.contains("no-such-ca.pem does not exist"), "{}", r.stderr);
}

/// The file's tenant, headers and `${VAR}` token reach the wire on every request; a `--header` of
/// the same name replaces the file's, and `--tenant` replaces its X-Scope-OrgID.
#[test]
fn the_files_tenant_headers_and_token_are_sent_and_flags_replace_them() {
    let (spec, prom) = start_scenario("healthy-steady");
    let proxy = FaultProxy::start(&prom.url, vec![]);
    let s = Sandbox::new();
    s.write(
        "vllm-diag.toml",
        &format!(
            "[source]\nprometheus = \"{}\"\ntenant = \"team-a\"\nbearer_token = \"${{TOK}}\"\n[source.headers]\nX-Api-Key = \"${{KEY}}\"\nX-Team = \"infra\"\n",
            proxy.url
        ),
    );
    let at = at_window_end(&spec);
    let env = [("TOK", "tok-wire-8841"), ("KEY", "key-wire-1102")];
    let r = s.run(&["explain", "--at", &at, "--format", "json"], &env);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let seen = proxy.seen();
    let sent = [("Authorization", "Bearer tok-wire-8841"), ("X-Scope-OrgID", "team-a"), ("X-Api-Key", "key-wire-1102"), ("X-Team", "infra")];
    assert_all_carry(&seen, &sent);
    for secret in ["tok-wire-8841", "key-wire-1102"] {
        assert!(!r.stdout.contains(secret) && !r.stderr.contains(secret));
    }

    let before = seen.len();
    let r = s.run(&["explain", "--at", &at, "--format", "json", "--tenant", "team-b", "--header", "X-Team: ml"], &env);
    assert_eq!(r.code, 0, "{}", r.stderr);
    for req in &proxy.seen()[before..] {
        assert_eq!(req.header("X-Scope-OrgID"), Some("team-b"), "{req:?}");
        assert_eq!(req.header("X-Team"), Some("ml"));
        assert_eq!(req.header("X-Api-Key"), Some("key-wire-1102"));
        let teams = req.headers.iter().filter(|(k, _)| k.eq_ignore_ascii_case("X-Team")).count();
        assert_eq!(teams, 1, "{req:?}");
    }
}
