//! Authentication and TLS against a real Prometheus serving through its own `--web.config.file`:
//! a private CA, basic auth with a bcrypt-hashed password, and mutual TLS. The right CA and password
//! give the same diagnosis as a plain server; the wrong CA, a missing CA, a wrong password, a missing
//! client certificate and plain HTTP to a TLS port each give a message that names the URL and the flag
//! that fixes it, with exit code 3. Tenant, header and bearer-token flags are checked on the wire
//! through a proxy, and Thanos-style partial-response warnings reach the report.

mod common;

use std::path::Path;

use serde_json::Value;
use vllm_diag_sim::ScenarioSpec;

use common::proxy::{assert_all_carry, Action, FaultProxy, Match};
use common::run::{at_window_end, explain_args, path_arg, run, write_file};
use common::secure::{start_scenario_secured, start_scenario_tls_basic_auth, Pki, WebConfig};
use common::start_scenario;

const USER: &str = "alice";
const PASSWORD: &str = "correct-horse-7431";

fn first_finding(report: &Value) -> (String, String) {
    let f = &report["findings"][0];
    (f["rule"].as_str().unwrap_or_default().to_string(), f["scope"]["model_name"].as_str().unwrap_or_default().to_string())
}

/// The (rule, model) the scenario expects to be found first.
fn expected_first(spec: &ScenarioSpec) -> (String, String) {
    (spec.expect.first.clone().unwrap_or_default(), spec.expect.model.clone().unwrap_or_default())
}

/// Assert that `stderr` mentions every one of `needles`.
fn assert_mentions(stderr: &str, needles: &[&str]) {
    for needle in needles {
        assert!(stderr.contains(needle), "missing {needle:?} in: {stderr}");
    }
}

#[test]
fn tls_with_a_private_ca_and_basic_auth_works_end_to_end_and_every_mistake_says_what_to_fix() {
    let (pki, spec, prom) = start_scenario_tls_basic_auth("kv-cache-pressure", USER, PASSWORD);
    assert!(prom.url.starts_with("https://127.0.0.1:"), "{}", prom.url);
    let when = at_window_end(&spec);
    let password_file = write_file(pki.dir(), "password", &format!("{PASSWORD}\n"));
    let wrong_file = write_file(pki.dir(), "wrong", "not-the-password\n");
    let ca = path_arg(&pki.ca);
    let pw = path_arg(&password_file);
    let base = explain_args(&prom.url, &when, &["--window", "30m", "--format", "json"]);
    // A run with these TLS flags, these login flags and these environment variables.
    let explain = |tls: &[&str], login: &[&str], env: &[(&str, &str)]| run(&[&base[..], tls, login].concat(), env);
    let login = ["--basic-auth-user", USER, "--basic-auth-password-file", pw];

    // Right CA, right password: the diagnosis the scenario expects.
    let ok = explain(&["--ca-file", ca], &login, &[]);
    let report = ok.json();
    assert_eq!(first_finding(&report), expected_first(&spec), "stderr: {}", ok.stderr);
    assert_eq!(report["source"]["url"], prom.url.as_str());
    assert!(!ok.stderr.contains("WARNING"), "{}", ok.stderr);

    // The password from the environment instead of a file.
    let env = explain(&["--ca-file", ca], &["--basic-auth-user", USER], &[("VLLM_DIAG_BASIC_AUTH_PASSWORD", PASSWORD)]);
    assert_eq!(first_finding(&env.json()), first_finding(&report), "{}", env.stderr);

    // A certificate from another CA: a TLS error naming the URL and --ca-file, exit 3.
    let wrong_ca = explain(&["--ca-file", path_arg(&pki.other_ca)], &login, &[]);
    assert_eq!(wrong_ca.code, 3, "{}", wrong_ca.stderr);
    // No report: --format json leaves the error document, which holds no secret either.
    let doc: serde_json::Value = serde_json::from_str(&wrong_ca.stdout).unwrap_or_default();
    assert!(doc["error"]["exit_code"] == 3 && doc.get("findings").is_none(), "{}", wrong_ca.stdout);
    assert!(!wrong_ca.stdout.contains(PASSWORD), "{}", wrong_ca.stdout);
    let needles: [&str; 4] = [&prom.url, "TLS handshake failed", "not signed by a CA this machine trusts", "--ca-file"];
    assert_mentions(&wrong_ca.stderr, &needles);

    // No CA at all: the built-in roots do not know a private CA either.
    let no_ca = explain(&[], &login, &[]);
    assert_eq!(no_ca.code, 3, "{}", no_ca.stderr);
    assert!(no_ca.stderr.contains("--ca-file"), "{}", no_ca.stderr);

    // Wrong password: a clear 401 message, exit 3.
    let wrong_login = ["--basic-auth-user", USER, "--basic-auth-password-file", path_arg(&wrong_file)];
    let wrong_pw = explain(&["--ca-file", ca], &wrong_login, &[]);
    assert_eq!(wrong_pw.code, 3, "{}", wrong_pw.stderr);
    assert_mentions(&wrong_pw.stderr, &["HTTP 401", "not authorized", "--basic-auth-user", &prom.url]);
    assert!(!wrong_pw.stderr.contains("not-the-password"));

    // No credentials: the same 401 message.
    let anonymous = explain(&["--ca-file", ca], &[], &[]);
    assert_eq!(anonymous.code, 3);
    assert!(anonymous.stderr.contains("HTTP 401"), "{}", anonymous.stderr);

    // --insecure-skip-verify works without the CA, and says loudly what it gives up.
    let insecure = explain(&["--insecure-skip-verify"], &login, &[]);
    assert_eq!(first_finding(&insecure.json()), first_finding(&report));
    assert!(insecure.stderr.contains("WARNING: --insecure-skip-verify"), "{}", insecure.stderr);

    // Plain HTTP to the TLS port: told to use https://.
    let plain_url = prom.url.replacen("https://", "http://", 1);
    let plain = run(&explain_args(&plain_url, &when, &login), &[]);
    assert_eq!(plain.code, 3, "{}", plain.stderr);
    assert!(plain.stderr.contains("https://"), "{}", plain.stderr);
}

#[test]
fn a_server_that_requires_a_client_certificate_accepts_ours_and_says_so_when_it_is_missing() {
    let pki = Pki::generate();
    let web = WebConfig { pki: Some(&pki), require_client_cert: true, basic_auth: None };
    let (spec, prom) = start_scenario_secured("slow-decode", &web);
    let when = at_window_end(&spec);
    let ca = path_arg(&pki.ca);
    let base = explain_args(&prom.url, &when, &["--format", "json", "--ca-file", ca]);
    let with_key = |cert: &Path, key: &Path| run(&[&base[..], &["--cert-file", path_arg(cert), "--key-file", path_arg(key)]].concat(), &[]);

    let with_cert = with_key(&pki.client_cert, &pki.client_key);
    assert_eq!(first_finding(&with_cert.json()), expected_first(&spec), "{}", with_cert.stderr);

    let without = run(&base, &[]);
    assert_eq!(without.code, 3, "{}", without.stderr);
    assert!(without.stderr.contains(prom.url.as_str()), "{}", without.stderr);
    assert!(without.stderr.contains("--cert-file"), "{}", without.stderr);

    // A key that does not belong to a certificate file is refused before anything is sent, naming
    // both files, exit 2.
    let mismatched = with_key(&pki.ca, &pki.ca);
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
    let proxy = FaultProxy::always(&prom.url, Match::Param("kv_cache_usage_perc".into()), Action::Edit(std::sync::Arc::new(add_warning)));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let token = write_file(dir.path(), "token", "tok-wire-5521\n");
    let when = at_window_end(&spec);
    let r = run(
        &explain_args(
            &proxy.url,
            &when,
            &["--format", "json", "--tenant", "team-a|team-b", "--header", "X-Api-Key: key-778", "--bearer-token-file", path_arg(&token)],
        ),
        &[],
    );
    let report = r.json();
    assert_eq!(r.code, 0, "{}", r.stderr);

    let sent = [("x-scope-orgid", "team-a|team-b"), ("x-api-key", "key-778"), ("authorization", "Bearer tok-wire-5521")];
    assert_all_carry(&proxy.seen(), &sent);
    let warnings: Vec<&str> = report["warnings"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    assert!(warnings.contains(&warning), "{warnings:?}");
    // The numbers still count: the warning says they may be incomplete, not that they are absent.
    assert!(report["stats"]["rules_evaluated"].as_u64().unwrap_or(0) > 0);

    // https:// to a server that speaks plain HTTP: told to use http://.
    let https = prom.url.replacen("http://", "https://", 1);
    let r = run(&explain_args(&https, &when, &[]), &[]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    assert!(r.stderr.contains("does not speak TLS") && r.stderr.contains("http://"), "{}", r.stderr);

    // The same token from the environment.
    let r = run(&explain_args(&proxy.url, &when, &["--format", "json"]), &[("VLLM_DIAG_BEARER_TOKEN", "tok-env-9")]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(proxy.seen().last().and_then(|s| s.header("authorization").map(str::to_string)).as_deref(), Some("Bearer tok-env-9"));
}
