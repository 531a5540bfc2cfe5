//! Authentication and TLS against a real Prometheus serving through its own `--web.config.file`:
//! a private CA, basic auth with a bcrypt-hashed password, and mutual TLS. The right CA and password
//! give the same diagnosis as a plain server; the wrong CA, a missing CA, a wrong password, a missing
//! client certificate and plain HTTP to a TLS port each give a message that names the URL and the flag
//! that fixes it, with exit code 3. Tenant, header and bearer-token flags are checked on the wire
//! through a proxy, and Thanos-style partial-response warnings reach the report.

mod common;

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::Value;

use common::proxy::{Action, FaultProxy, Match, Rule};
use common::secure::{start_scenario_secured, Pki, WebConfig};
use common::start_scenario;

const USER: &str = "alice";
const PASSWORD: &str = "correct-horse-7431";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}\nstderr:\n{}", self.stdout, self.stderr))
    }
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::cargo_bin("vllm-diag").unwrap_or_else(|e| panic!("binary: {e}"));
    for var in [
        "VLLM_DIAG_PROMETHEUS_URL",
        "VLLM_DIAG_BEARER_TOKEN",
        "VLLM_DIAG_BASIC_AUTH_PASSWORD",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().unwrap_or_else(|e| panic!("run vllm-diag: {e}"));
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn at(spec: &vllm_diag::scenario::ScenarioSpec) -> String {
    spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn first_finding(report: &Value) -> (String, String) {
    let f = &report["findings"][0];
    (
        f["rule"].as_str().unwrap_or_default().to_string(),
        f["scope"]["model_name"].as_str().unwrap_or_default().to_string(),
    )
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    p
}

#[test]
fn tls_with_a_private_ca_and_basic_auth_works_end_to_end_and_every_mistake_says_what_to_fix() {
    let pki = Pki::generate();
    let web = WebConfig {
        pki: Some(&pki),
        require_client_cert: false,
        basic_auth: Some((USER, PASSWORD)),
    };
    let (spec, prom) = start_scenario_secured("kv-cache-pressure", &web);
    assert!(prom.url.starts_with("https://127.0.0.1:"), "{}", prom.url);
    let when = at(&spec);
    let password_file = write(pki.dir(), "password", &format!("{PASSWORD}\n"));
    let wrong_file = write(pki.dir(), "wrong", "not-the-password\n");
    let ca = pki.ca.to_str().unwrap_or_default();
    let other_ca = pki.other_ca.to_str().unwrap_or_default();
    let pw = password_file.to_str().unwrap_or_default();
    let base = [
        "explain",
        "--prometheus",
        prom.url.as_str(),
        "--at",
        when.as_str(),
        "--window",
        "30m",
        "--format",
        "json",
    ];

    // Right CA, right password: the diagnosis the scenario expects.
    let ok = run(
        &[
            &base[..],
            &[
                "--ca-file",
                ca,
                "--basic-auth-user",
                USER,
                "--basic-auth-password-file",
                pw,
            ],
        ]
        .concat(),
        &[],
    );
    let report = ok.json();
    assert_eq!(
        first_finding(&report),
        (
            spec.expect.first.clone().unwrap_or_default(),
            spec.expect.model.clone().unwrap_or_default()
        ),
        "stderr: {}",
        ok.stderr
    );
    assert_eq!(report["source"]["url"], prom.url.as_str());
    assert!(!ok.stderr.contains("WARNING"), "{}", ok.stderr);

    // The password from the environment instead of a file.
    let env = run(
        &[&base[..], &["--ca-file", ca, "--basic-auth-user", USER]].concat(),
        &[("VLLM_DIAG_BASIC_AUTH_PASSWORD", PASSWORD)],
    );
    assert_eq!(first_finding(&env.json()), first_finding(&report), "{}", env.stderr);

    // A certificate from another CA: a TLS error naming the URL and --ca-file, exit 3.
    let wrong_ca = run(
        &[
            &base[..],
            &[
                "--ca-file",
                other_ca,
                "--basic-auth-user",
                USER,
                "--basic-auth-password-file",
                pw,
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(wrong_ca.code, 3, "{}", wrong_ca.stderr);
    assert!(wrong_ca.stdout.is_empty(), "{}", wrong_ca.stdout);
    for needle in [
        prom.url.as_str(),
        "TLS handshake failed",
        "not signed by a CA this machine trusts",
        "--ca-file",
    ] {
        assert!(
            wrong_ca.stderr.contains(needle),
            "missing {needle:?} in: {}",
            wrong_ca.stderr
        );
    }

    // No CA at all: the built-in roots do not know a private CA either.
    let no_ca = run(
        &[
            &base[..],
            &["--basic-auth-user", USER, "--basic-auth-password-file", pw],
        ]
        .concat(),
        &[],
    );
    assert_eq!(no_ca.code, 3, "{}", no_ca.stderr);
    assert!(no_ca.stderr.contains("--ca-file"), "{}", no_ca.stderr);

    // Wrong password: a clear 401 message, exit 3.
    let wrong_pw = run(
        &[
            &base[..],
            &[
                "--ca-file",
                ca,
                "--basic-auth-user",
                USER,
                "--basic-auth-password-file",
                wrong_file.to_str().unwrap_or_default(),
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(wrong_pw.code, 3, "{}", wrong_pw.stderr);
    for needle in ["HTTP 401", "not authorized", "--basic-auth-user", prom.url.as_str()] {
        assert!(
            wrong_pw.stderr.contains(needle),
            "missing {needle:?} in: {}",
            wrong_pw.stderr
        );
    }
    assert!(!wrong_pw.stderr.contains("not-the-password"));

    // No credentials: the same 401 message.
    let anonymous = run(&[&base[..], &["--ca-file", ca]].concat(), &[]);
    assert_eq!(anonymous.code, 3);
    assert!(anonymous.stderr.contains("HTTP 401"), "{}", anonymous.stderr);

    // --insecure-skip-verify works without the CA, and says loudly what it gives up.
    let insecure = run(
        &[
            &base[..],
            &[
                "--insecure-skip-verify",
                "--basic-auth-user",
                USER,
                "--basic-auth-password-file",
                pw,
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(first_finding(&insecure.json()), first_finding(&report));
    assert!(
        insecure.stderr.contains("WARNING: --insecure-skip-verify"),
        "{}",
        insecure.stderr
    );

    // Plain HTTP to the TLS port: told to use https://.
    let plain_url = prom.url.replacen("https://", "http://", 1);
    let plain = run(
        &[
            "explain",
            "--prometheus",
            plain_url.as_str(),
            "--at",
            when.as_str(),
            "--basic-auth-user",
            USER,
            "--basic-auth-password-file",
            pw,
        ],
        &[],
    );
    assert_eq!(plain.code, 3, "{}", plain.stderr);
    assert!(plain.stderr.contains("https://"), "{}", plain.stderr);
}

#[test]
fn a_server_that_requires_a_client_certificate_accepts_ours_and_says_so_when_it_is_missing() {
    let pki = Pki::generate();
    let web = WebConfig {
        pki: Some(&pki),
        require_client_cert: true,
        basic_auth: None,
    };
    let (spec, prom) = start_scenario_secured("slow-decode", &web);
    let when = at(&spec);
    let ca = pki.ca.to_str().unwrap_or_default();
    let base = [
        "explain",
        "--prometheus",
        prom.url.as_str(),
        "--at",
        when.as_str(),
        "--format",
        "json",
        "--ca-file",
        ca,
    ];

    let with_cert = run(
        &[
            &base[..],
            &[
                "--cert-file",
                pki.client_cert.to_str().unwrap_or_default(),
                "--key-file",
                pki.client_key.to_str().unwrap_or_default(),
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(
        first_finding(&with_cert.json()),
        (
            spec.expect.first.clone().unwrap_or_default(),
            spec.expect.model.clone().unwrap_or_default()
        ),
        "{}",
        with_cert.stderr
    );

    let without = run(&base, &[]);
    assert_eq!(without.code, 3, "{}", without.stderr);
    assert!(without.stderr.contains(prom.url.as_str()), "{}", without.stderr);
    assert!(without.stderr.contains("--cert-file"), "{}", without.stderr);

    // A key that does not belong to a certificate file is refused before anything is sent, naming
    // both files, exit 2.
    let mismatched = run(
        &[
            &base[..],
            &[
                "--cert-file",
                pki.ca.to_str().unwrap_or_default(),
                "--key-file",
                pki.ca.to_str().unwrap_or_default(),
            ],
        ]
        .concat(),
        &[],
    );
    assert_eq!(mismatched.code, 2, "{}", mismatched.stderr);
    assert!(mismatched.stderr.contains("--key-file"), "{}", mismatched.stderr);
}

#[test]
fn tenant_headers_and_a_bearer_token_reach_the_server_and_partial_response_warnings_reach_the_report() {
    let (spec, prom) = start_scenario("healthy-steady");
    let warning = "partial response: store 10.0.0.7:10901 (eu-west) unavailable";
    let add_warning = {
        let w = warning.to_string();
        move |body: &str| -> String {
            match serde_json::from_str::<Value>(body) {
                Ok(mut v) => {
                    v["warnings"] = serde_json::json!([w.clone()]);
                    v.to_string()
                }
                Err(_) => body.to_string(),
            }
        }
    };
    let proxy = FaultProxy::start(
        &prom.url,
        vec![Rule::always(
            Match::Param("kv_cache_usage_perc".into()),
            Action::Edit(std::sync::Arc::new(add_warning)),
        )],
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let token = write(dir.path(), "token", "tok-wire-5521\n");
    let when = at(&spec);
    let r = run(
        &[
            "explain",
            "--prometheus",
            proxy.url.as_str(),
            "--at",
            when.as_str(),
            "--format",
            "json",
            "--tenant",
            "team-a|team-b",
            "--header",
            "X-Api-Key: key-778",
            "--bearer-token-file",
            token.to_str().unwrap_or_default(),
        ],
        &[],
    );
    let report = r.json();
    assert_eq!(r.code, 0, "{}", r.stderr);

    let seen = proxy.seen();
    assert!(!seen.is_empty());
    for s in &seen {
        assert_eq!(s.header("x-scope-orgid"), Some("team-a|team-b"), "{s:?}");
        assert_eq!(s.header("x-api-key"), Some("key-778"));
        assert_eq!(s.header("authorization"), Some("Bearer tok-wire-5521"));
    }
    let warnings: Vec<&str> = report["warnings"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(warnings.contains(&warning), "{warnings:?}");
    // The numbers still count: the warning says they may be incomplete, not that they are absent.
    assert!(report["stats"]["rules_evaluated"].as_u64().unwrap_or(0) > 0);

    // https:// to a server that speaks plain HTTP: told to use http://.
    let https = prom.url.replacen("http://", "https://", 1);
    let r = run(&["explain", "--prometheus", https.as_str(), "--at", when.as_str()], &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(
        r.stderr.contains("does not speak TLS") && r.stderr.contains("http://"),
        "{}",
        r.stderr
    );

    // The same token from the environment.
    let r = run(
        &[
            "explain",
            "--prometheus",
            proxy.url.as_str(),
            "--at",
            when.as_str(),
            "--format",
            "json",
        ],
        &[("VLLM_DIAG_BEARER_TOKEN", "tok-env-9")],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        proxy
            .seen()
            .last()
            .and_then(|s| s.header("authorization").map(str::to_string))
            .as_deref(),
        Some("Bearer tok-env-9")
    );
}
