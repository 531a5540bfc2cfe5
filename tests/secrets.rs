//! Planted credentials never leave vllm-diag: not on stdout, not on stderr, not in `--record`
//! files, not in the `--debug` log, not in `--help`, not in any error message, including the error
//! paths where a server or proxy echoes them back.
//!
//! Each secret is a unique marker, and the test greps every byte the tool wrote for it and for the
//! encoded forms that travel on the wire (the base64 of `user:password`).

mod common;

use std::path::{Path, PathBuf};

use common::proxy::{Action, FaultProxy, Match, Rule};
use common::run::{at_window_end, explain_args, path_arg, run, write_file, Run};
use common::secure::start_scenario_tls_basic_auth;
use common::{free_port, start_scenario};

const TOKEN: &str = "tok-PLANTED-3f9a1c";
const PASSWORD: &str = "pw-PLANTED-77e2b0";
const HEADER_VALUE: &str = "hdr-PLANTED-5c1d";
const URL_PASSWORD: &str = "url-PLANTED-91ab";
const USER: &str = "alice";

/// Everything that must never appear, with a name for the failure message.
fn forbidden() -> Vec<(&'static str, String)> {
    vec![
        ("bearer token", TOKEN.to_string()),
        ("basic-auth password", PASSWORD.to_string()),
        ("header value", HEADER_VALUE.to_string()),
        ("URL password", URL_PASSWORD.to_string()),
        ("base64 of user:password", b64(&format!("{USER}:{PASSWORD}"))),
        ("base64 of the URL's user:password", b64(&format!("bob:{URL_PASSWORD}"))),
        // Any run of the marker's distinctive part, in case something cuts a secret short.
        ("a fragment of a planted secret", "PLANTED".to_string()),
    ]
}

fn b64(s: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = s.as_bytes();
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let b = [c[0], *c.get(1).unwrap_or(&0), *c.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= c.len() { A[((n >> (18 - 6 * i)) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

fn assert_clean(what: &str, text: &str) {
    for (name, secret) in forbidden() {
        assert!(!text.contains(&secret), "the {name} leaked into {what}:\n{text}");
    }
}

/// Run vllm-diag (the secrets may be in `env`), and check stdout and stderr.
fn run_clean(label: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    let r = run(args, env);
    assert_clean(&format!("stdout of {label}"), &r.stdout);
    assert_clean(&format!("stderr of {label}"), &r.stderr);
    r
}

fn read_clean(label: &str, path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{label}: no recording at {}: {e}", path.display()));
    assert_clean(&format!("the --record file of {label}"), &text);
    text
}

/// The planted secrets as vllm-diag takes them.
struct Files {
    dir: tempfile::TempDir,
    /// A file holding the token.
    token: PathBuf,
    /// A file holding the basic-auth password.
    password: PathBuf,
    /// A `--header` value carrying the planted header value.
    header: String,
}

/// `explain` against `url` at `when` with `--debug`, then `flags`, then `--record <rec>`: every
/// place a secret could be written to, switched on.
fn debug_recorded<'a>(url: &'a str, when: &'a str, flags: &[&'a str], rec: &'a Path) -> Vec<&'a str> {
    explain_args(url, when, &[&["--debug"][..], flags, &["--record", path_arg(rec)]].concat())
}

/// The planted token and password, each in a file of a new temporary directory, and the header.
fn files() -> Files {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let token = write_file(dir.path(), "token", &format!("{TOKEN}\n"));
    let password = write_file(dir.path(), "password", &format!("{PASSWORD}\n"));
    let header = format!("X-Api-Key: {HEADER_VALUE}");
    Files { dir, token, password, header }
}

#[test]
fn no_planted_secret_appears_in_output_debug_logs_or_recordings_of_working_runs() {
    let (spec, prom) = start_scenario("kv-cache-pressure");
    let when = at_window_end(&spec);
    let f = files();
    // A proxy in front, so we can also see that the secrets did go out on the wire.
    let proxy = FaultProxy::start(&prom.url, vec![]);

    for format in ["table", "markdown", "json"] {
        let rec = f.dir.path().join(format!("token-{format}.json"));
        let r = run_clean(
            &format!("a token run ({format})"),
            &debug_recorded(
                &proxy.url,
                &when,
                &["--format", format, "--bearer-token-file", path_arg(&f.token), "--header", &f.header, "--tenant", "team-a"],
                &rec,
            ),
            &[],
        );
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(r.stderr.contains("vllm-diag: debug: POST"), "the debug log is missing: {}", r.stderr);
        assert!(r.stderr.contains("authorization: Bearer (masked)"), "{}", r.stderr);
        read_clean(format, &rec);

        // Replaying the recording prints the same report, with nothing secret to print.
        let replayed = run_clean("a replay", &["explain", "--replay", path_arg(&rec), "--format", format], &[]);
        assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    }
    let wire = proxy.seen();
    assert!(wire.iter().all(|w| w.header("authorization") == Some(&format!("Bearer {TOKEN}")[..])));
    assert!(wire.iter().all(|w| w.header("x-api-key") == Some(HEADER_VALUE)));

    // Basic auth from a file, then from the environment; the token in the environment too.
    let rec = f.dir.path().join("basic.json");
    let r = run_clean(
        "a basic-auth run",
        &debug_recorded(&proxy.url, &when, &["--basic-auth-user", USER, "--basic-auth-password-file", path_arg(&f.password)], &rec),
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    read_clean("a basic-auth run", &rec);
    let expected = format!("Basic {}", b64(&format!("{USER}:{PASSWORD}")));
    assert_eq!(proxy.seen().last().and_then(|w| w.header("authorization").map(str::to_string)), Some(expected));

    let r = run_clean(
        "a run with secrets from the environment",
        &explain_args(&proxy.url, &when, &["--debug", "--basic-auth-user", USER]),
        &[("VLLM_DIAG_BASIC_AUTH_PASSWORD", PASSWORD), ("VLLM_DIAG_BEARER_TOKEN", TOKEN)],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);

    // Credentials in the URL itself (and the URL in the environment).
    let with_creds = proxy.url.replacen("http://", &format!("http://bob:{URL_PASSWORD}@"), 1);
    let rec = f.dir.path().join("url.json");
    let r = run_clean("a run with URL credentials", &debug_recorded(&with_creds, &when, &[], &rec), &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    read_clean("a run with URL credentials", &rec);
    let r = run_clean("a run with the URL from the environment", &["explain", "--at", &when, "--format", "json"], &[("VLLM_DIAG_PROMETHEUS_URL", &with_creds)]);
    assert_eq!(r.code, 0, "{}", r.stderr);
}

#[test]
fn no_planted_secret_appears_on_any_error_path_even_when_a_server_echoes_it() {
    let (spec, prom) = start_scenario("healthy-steady");
    let when = at_window_end(&spec);
    let f = files();

    // Proxies that print the request's credentials back (what was really sent), on discovery and on
    // queries.
    let basic = format!("Basic {}", b64(&format!("{USER}:{PASSWORD}")));
    let bearer = format!("Bearer {TOKEN}");
    for (kind, auth, sent) in [
        ("token", vec!["--bearer-token-file", path_arg(&f.token)], bearer.as_str()),
        ("basic", vec!["--basic-auth-user", USER, "--basic-auth-password-file", path_arg(&f.password)], basic.as_str()),
    ] {
        let echo = format!(
            "<html><head><title>400 Bad Request</title></head><body>Request headers: Authorization: {sent}; \
             X-Api-Key: {HEADER_VALUE}</body></html>"
        );
        let json_echo = format!(r#"{{"status":"error","errorType":"bad_data","error":"invalid credentials {sent} for key {HEADER_VALUE}"}}"#);
        let cases: Vec<(&str, Rule)> = vec![
            ("401 echo on discovery", Rule::always(Match::Path("/label/"), Action::reply(401, "text/html", &echo))),
            ("400 echo on discovery", Rule::always(Match::Path("/label/"), Action::reply(400, "text/html", &echo))),
            ("error envelope echo on queries", Rule::always(Match::Queries, Action::reply(400, "application/json", &json_echo))),
            ("200 HTML echo on queries", Rule::always(Match::Queries, Action::reply(200, "text/html", &echo))),
            ("503 echo with retries", Rule::always(Match::Queries, Action::reply(503, "text/plain", &echo))),
            ("resets", Rule::always(Match::Any, Action::Reset)),
        ];
        for (name, rule) in cases {
            let proxy = FaultProxy::start(&prom.url, vec![rule]);
            let rec = f.dir.path().join(format!("{}-{kind}.json", name.replace(' ', "-")));
            let label = format!("{name} ({kind})");
            let flags = [&["--format", "json", "--header", &f.header][..], &auth[..]].concat();
            let args = debug_recorded(&proxy.url, &when, &flags, &rec);
            let r = run_clean(&label, &args, &[]);
            assert_ne!(r.code, 0, "{label}: expected a failure: {}", r.stderr);
            let recorded = read_clean(&label, &rec);
            // The echo was recorded, masked: the evidence survives, the secret does not.
            if !name.starts_with("resets") {
                assert!(recorded.contains("***"), "{label}: the echo was not recorded masked:\n{recorded}");
            }
        }
    }

    // Nothing listening, with the password in the URL.
    let down = format!("http://bob:{URL_PASSWORD}@127.0.0.1:{}/prom", free_port());
    let rec = f.dir.path().join("down.json");
    let r = run_clean("an unreachable server", &debug_recorded(&down, &when, &[], &rec), &[]);
    assert_eq!(r.code, 3);
    read_clean("an unreachable server", &rec);

    // Malformed input holding secrets.
    let bad_header = format!("X-Api-Key: a\u{1}{HEADER_VALUE}");
    let no_colon = format!("Bearer {TOKEN}");
    for (label, args) in [
        ("a control character in a header", vec!["explain", "--prometheus", &prom.url, "--header", &bad_header]),
        ("a header without a colon", vec!["explain", "--prometheus", &prom.url, "--header", &no_colon]),
        ("a URL with a bad scheme", vec!["explain", "--prometheus", "ftp://bob:url-PLANTED-91ab@host/"]),
        ("a URL with a query string", vec!["explain", "--prometheus", "http://bob:url-PLANTED-91ab@host/?x=1"]),
        ("a bad flag after the URL", vec!["explain", "--prometheus", &down, "--window", "soon"]),
        ("two kinds of credentials", vec!["explain", "--prometheus", &down, "--bearer-token-file", path_arg(&f.token)]),
    ] {
        let r = run_clean(label, &args, &[]);
        assert_eq!(r.code, 2, "{label}: {}", r.stderr);
    }

    // --help, with every secret in the environment.
    for args in [vec!["--help"], vec!["explain", "--help"], vec!["check", "--help"]] {
        let r =
            run_clean("--help", &args, &[("VLLM_DIAG_PROMETHEUS_URL", &down), ("VLLM_DIAG_BEARER_TOKEN", TOKEN), ("VLLM_DIAG_BASIC_AUTH_PASSWORD", PASSWORD)]);
        assert_eq!(r.code, 0, "{}", r.stderr);
    }
}

#[test]
fn no_planted_secret_appears_when_tls_or_the_password_is_wrong() {
    let (pki, spec, prom) = start_scenario_tls_basic_auth("healthy-steady", USER, PASSWORD);
    let when = at_window_end(&spec);
    let f = files();
    let wrong = write_file(f.dir.path(), "wrong", "pw-PLANTED-wrong\n");
    for (label, ca, pw) in [
        ("the wrong CA", path_arg(&pki.other_ca), path_arg(&f.password)),
        ("the wrong password", path_arg(&pki.ca), path_arg(&wrong)),
        ("the right CA and password", path_arg(&pki.ca), path_arg(&f.password)),
    ] {
        let rec = f.dir.path().join(format!("{}.json", label.replace(' ', "-")));
        let r = run_clean(
            label,
            &debug_recorded(&prom.url, &when, &["--ca-file", ca, "--header", &f.header, "--basic-auth-user", USER, "--basic-auth-password-file", pw], &rec),
            &[],
        );
        if label.starts_with("the right") {
            assert_eq!(r.code, 0, "{}", r.stderr);
        } else {
            assert_eq!(r.code, 3, "{label}: {}", r.stderr);
        }
        read_clean(label, &rec);
    }
}
