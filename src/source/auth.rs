//! Credentials and TLS settings from flags, files and the environment, into [`ClientOptions`].
//!
//! Secrets are read from files or environment variables rather than flags, because a flag's value is
//! visible to every user of the machine (`ps`) and lands in shell history. Whatever the source, a
//! secret goes straight into a [`Secret`], which prints as `***`, and no error here quotes a file's
//! content or a header's value: a message names the flag, the file, and what is wrong.
//!
//! Precedence is the usual one: a flag beats the environment. The bearer token from
//! `$VLLM_DIAG_BEARER_TOKEN` is used only when no other credential was given, so a token exported in
//! a shell profile does not clash with an explicit `--basic-auth-user`.

use std::path::{Path, PathBuf};

use super::prometheus::{ClientOptions, Secret, TlsOptions};

/// Environment variable holding a bearer token.
pub const ENV_BEARER_TOKEN: &str = "VLLM_DIAG_BEARER_TOKEN";
/// Environment variable holding the basic-auth password.
pub const ENV_BASIC_AUTH_PASSWORD: &str = "VLLM_DIAG_BASIC_AUTH_PASSWORD";
/// The header Thanos, Mimir, Cortex and Loki read the tenant from.
pub const TENANT_HEADER: &str = "X-Scope-OrgID";

/// The auth and TLS flags as given (paths and plain values; no secret is in here yet).
#[derive(Debug, Clone, Default)]
pub struct AuthFlags {
    pub bearer_token_file: Option<PathBuf>,
    pub basic_auth_user: Option<String>,
    pub basic_auth_password_file: Option<PathBuf>,
    /// `Name: value`, as typed.
    pub headers: Vec<String>,
    pub tenant: Option<String>,
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub insecure_skip_verify: bool,
}

/// A flag, file or variable that cannot be used. Never holds a secret's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AuthError(String);

/// The warning printed on stderr whenever certificate checks are off.
pub const INSECURE_WARNING: &str = "WARNING: --insecure-skip-verify is set: the server's TLS certificate is NOT \
     checked. Anyone between here and the server can read the credentials sent and change the answers. Use \
     --ca-file with the server's CA instead.";

/// Fill `opts` from the flags and the environment (`env` looks a variable up; tests pass their own).
/// Returns warnings for stderr.
pub fn apply(flags: &AuthFlags, env: &dyn Fn(&str) -> Option<String>, opts: &mut ClientOptions) -> Result<Vec<String>, AuthError> {
    let mut warnings = Vec::new();
    let env_value = |name: &str| env(name).filter(|v| !v.trim().is_empty());

    // Basic auth: a user from the flag, the password from a file or the environment.
    match (&flags.basic_auth_user, &flags.basic_auth_password_file) {
        (Some(user), file) => {
            if user.is_empty() || user.contains(':') || user.chars().any(char::is_control) {
                return Err(AuthError("--basic-auth-user: give a user name without ':' or control characters".to_string()));
            }
            let password = match file {
                Some(path) => read_secret("--basic-auth-password-file", path)?,
                None => match env_value(ENV_BASIC_AUTH_PASSWORD) {
                    Some(p) => Secret::new(p.trim_end_matches(['\r', '\n'])),
                    None => {
                        return Err(AuthError(format!(
                            "--basic-auth-user {user} needs a password: pass --basic-auth-password-file FILE or \
                             set ${ENV_BASIC_AUTH_PASSWORD}"
                        )))
                    }
                },
            };
            opts.basic_auth = Some((user.clone(), password));
        }
        (None, Some(path)) => {
            return Err(AuthError(format!("--basic-auth-password-file {} is given without --basic-auth-user; add the user name", path.display())))
        }
        (None, None) => {}
    }

    // Bearer token: the file flag, else the environment when nothing else authenticates.
    if let Some(path) = &flags.bearer_token_file {
        if flags.basic_auth_user.is_some() {
            return Err(AuthError("--bearer-token-file and --basic-auth-user are both given; a server takes one of them".to_string()));
        }
        let token = read_secret("--bearer-token-file", path)?;
        if token.expose().contains(['\n', '\r']) {
            return Err(AuthError(format!("--bearer-token-file {}: holds more than one line; put only the token in it", path.display())));
        }
        if token.expose().chars().any(char::is_control) {
            return Err(AuthError(format!(
                "--bearer-token-file {}: the token holds a control character, which an HTTP header cannot carry; put only the token in it",
                path.display()
            )));
        }
        opts.bearer_token = Some(token);
    } else if opts.basic_auth.is_none() && !url_has_credentials(&opts.base_url) {
        if let Some(token) = env_value(ENV_BEARER_TOKEN) {
            opts.bearer_token = Some(Secret::new(token.trim()));
        }
    }

    for (i, raw) in flags.headers.iter().enumerate() {
        let n = i + 1;
        let Some((name, value)) = raw.split_once(':') else {
            return Err(AuthError(format!("--header #{n}: expected \"Name: value\" (the header's text is not shown, it may hold a secret)")));
        };
        let name = name.trim();
        let valid_name = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !valid_name {
            return Err(AuthError(format!(
                "--header #{n}: the header name is empty or holds characters a header name cannot; expected \
                 \"Name: value\""
            )));
        }
        let value = value.trim();
        if value.chars().any(char::is_control) {
            return Err(AuthError(format!("--header #{n} ({name}): the value holds line breaks or other control characters")));
        }
        if name.eq_ignore_ascii_case(TENANT_HEADER) && flags.tenant.is_some() {
            return Err(AuthError(format!("--header #{n} sets {TENANT_HEADER} and --tenant sets it too; give one")));
        }
        opts.headers.push((name.to_string(), Secret::new(value)));
    }

    if let Some(tenant) = &flags.tenant {
        let t = tenant.trim();
        if t.is_empty() || t.chars().any(char::is_control) || t.split('|').any(|part| part.trim().is_empty()) {
            return Err(AuthError(
                "--tenant: give a tenant ID, or several joined by '|' (e.g. team-a|team-b), without control \
                 characters or empty parts"
                    .to_string(),
            ));
        }
        opts.headers.push((TENANT_HEADER.to_string(), Secret::new(t)));
    }

    let client_cert = match (&flags.cert_file, &flags.key_file) {
        (Some(c), Some(k)) => Some((c.clone(), k.clone())),
        (None, None) => None,
        (Some(c), None) => return Err(AuthError(format!("--cert-file {} needs --key-file with its private key", c.display()))),
        (None, Some(k)) => return Err(AuthError(format!("--key-file {} needs --cert-file with its certificate", k.display()))),
    };
    let tls_given = flags.ca_file.is_some() || client_cert.is_some() || flags.insecure_skip_verify;
    if tls_given && opts.base_url.trim_start().to_ascii_lowercase().starts_with("http://") {
        warnings.push(
            "--ca-file, --cert-file, --key-file and --insecure-skip-verify only apply to https:// URLs; the URL \
             is http://, so nothing is encrypted"
                .to_string(),
        );
    }
    if flags.insecure_skip_verify {
        if flags.ca_file.is_some() {
            warnings.push("--insecure-skip-verify makes --ca-file pointless: nothing is verified".to_string());
        }
        warnings.push(INSECURE_WARNING.to_string());
    }
    opts.tls = TlsOptions { ca_file: flags.ca_file.clone(), client_cert, insecure_skip_verify: flags.insecure_skip_verify };
    Ok(warnings)
}

/// A secret from a file: the whole content without the trailing line break. Empty is an error.
fn read_secret(flag: &str, path: &Path) -> Result<Secret, AuthError> {
    let bytes = std::fs::read(path).map_err(|e| {
        let reason = e.to_string();
        let reason = reason.split(" (os error").next().unwrap_or(&reason).to_string();
        AuthError(format!("{flag} {}: cannot read it: {reason}", path.display()))
    })?;
    let text = String::from_utf8(bytes).map_err(|_| AuthError(format!("{flag} {}: is not UTF-8 text", path.display())))?;
    let trimmed = text.trim_end_matches(['\r', '\n']).trim();
    if trimmed.is_empty() {
        return Err(AuthError(format!("{flag} {}: is empty", path.display())));
    }
    Ok(Secret::new(trimmed))
}

/// Whether a base URL carries `user:pass@` (those credentials win over the environment's token).
fn url_has_credentials(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority.contains('@')
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k: &str| map.get(k).cloned()
    }

    fn file(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, content).expect("write temp file");
        p
    }

    fn apply_to(flags: &AuthFlags, env: &[(&str, &str)]) -> Result<(ClientOptions, Vec<String>), AuthError> {
        let mut opts = ClientOptions { base_url: "https://prom.example".into(), ..ClientOptions::default() };
        let w = apply(flags, &env_of(env), &mut opts)?;
        Ok((opts, w))
    }

    #[test]
    fn a_token_file_is_read_without_its_line_break() {
        let dir = tempfile::tempdir().expect("tempdir");
        let flags = AuthFlags { bearer_token_file: Some(file(&dir, "t", "tok-1\n")), ..AuthFlags::default() };
        let (opts, _) = apply_to(&flags, &[(ENV_BEARER_TOKEN, "from-env")]).expect("ok");
        assert_eq!(opts.bearer_token.expect("token").expose(), "tok-1");
    }

    #[test]
    fn the_token_comes_from_the_environment_when_no_flag_gives_credentials() {
        let (opts, _) = apply_to(&AuthFlags::default(), &[(ENV_BEARER_TOKEN, " tok-env \n")]).expect("ok");
        assert_eq!(opts.bearer_token.expect("token").expose(), "tok-env");
    }

    #[test]
    fn explicit_basic_auth_beats_a_token_in_the_environment() {
        let dir = tempfile::tempdir().expect("tempdir");
        let flags = AuthFlags { basic_auth_user: Some("alice".into()), basic_auth_password_file: Some(file(&dir, "p", "pw-1\n")), ..AuthFlags::default() };
        let (opts, _) = apply_to(&flags, &[(ENV_BEARER_TOKEN, "tok-env")]).expect("ok");
        assert!(opts.bearer_token.is_none());
        let (user, pass) = opts.basic_auth.expect("basic auth");
        assert_eq!((user.as_str(), pass.expose()), ("alice", "pw-1"));
    }

    #[test]
    fn the_password_may_come_from_the_environment_but_not_from_nowhere() {
        let flags = AuthFlags { basic_auth_user: Some("alice".into()), ..AuthFlags::default() };
        let (opts, _) = apply_to(&flags, &[(ENV_BASIC_AUTH_PASSWORD, "pw-env")]).expect("ok");
        assert_eq!(opts.basic_auth.expect("basic").1.expose(), "pw-env");
        let err = apply_to(&flags, &[]).expect_err("no password");
        assert!(err.to_string().contains("--basic-auth-password-file") && err.to_string().contains(ENV_BASIC_AUTH_PASSWORD));
    }

    #[test]
    fn file_errors_name_the_flag_and_the_file_but_never_the_content() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("nope");
        let flags = AuthFlags { bearer_token_file: Some(missing.clone()), ..AuthFlags::default() };
        let err = apply_to(&flags, &[]).expect_err("missing").to_string();
        assert!(err.starts_with("--bearer-token-file") && err.contains(&missing.display().to_string()), "{err}");

        let flags = AuthFlags { bearer_token_file: Some(file(&dir, "e", "\n")), ..AuthFlags::default() };
        assert!(apply_to(&flags, &[]).expect_err("empty").to_string().contains("is empty"));

        let flags = AuthFlags { bearer_token_file: Some(file(&dir, "two", "secret-a\nsecret-b\n")), ..AuthFlags::default() };
        let err = apply_to(&flags, &[]).expect_err("two lines").to_string();
        assert!(err.contains("more than one line") && !err.contains("secret-"), "{err}");
    }

    #[test]
    fn headers_are_split_validated_and_never_echoed() {
        let flags = AuthFlags { headers: vec!["X-Api-Key:  k-123 ".into(), "X-Other: a: b".into()], ..AuthFlags::default() };
        let (opts, _) = apply_to(&flags, &[]).expect("ok");
        let got: Vec<(String, String)> = opts.headers.iter().map(|(k, v)| (k.clone(), v.expose().to_string())).collect();
        assert_eq!(got, vec![("X-Api-Key".into(), "k-123".into()), ("X-Other".into(), "a: b".into())]);

        for bad in ["Bearer hunter2-secret", ": hunter2-secret", "X Bad: hunter2-secret"] {
            let flags = AuthFlags { headers: vec![bad.into()], ..AuthFlags::default() };
            let err = apply_to(&flags, &[]).expect_err(bad).to_string();
            assert!(err.contains("--header #1") && !err.contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn the_tenant_becomes_x_scope_orgid_and_may_join_several_with_a_bar() {
        let flags = AuthFlags { tenant: Some("team-a|team-b".into()), ..AuthFlags::default() };
        let (opts, _) = apply_to(&flags, &[]).expect("ok");
        assert_eq!(opts.headers[0].0, TENANT_HEADER);
        assert_eq!(opts.headers[0].1.expose(), "team-a|team-b");
        for bad in ["", "a||b", "a\nb"] {
            let flags = AuthFlags { tenant: Some(bad.into()), ..AuthFlags::default() };
            assert!(apply_to(&flags, &[]).expect_err(bad).to_string().starts_with("--tenant"));
        }
        let flags = AuthFlags { tenant: Some("a".into()), headers: vec!["x-scope-orgid: b".into()], ..AuthFlags::default() };
        assert!(apply_to(&flags, &[]).is_err());
    }

    #[test]
    fn a_client_certificate_needs_both_halves() {
        let flags = AuthFlags { cert_file: Some("c.pem".into()), ..AuthFlags::default() };
        assert!(apply_to(&flags, &[]).expect_err("no key").to_string().contains("--key-file"));
        let flags = AuthFlags { key_file: Some("k.pem".into()), ..AuthFlags::default() };
        assert!(apply_to(&flags, &[]).expect_err("no cert").to_string().contains("--cert-file"));
    }

    #[test]
    fn skipping_verification_always_warns() {
        let flags = AuthFlags { insecure_skip_verify: true, ..AuthFlags::default() };
        let (opts, warnings) = apply_to(&flags, &[]).expect("ok");
        assert!(opts.tls.insecure_skip_verify);
        assert!(warnings.iter().any(|w| w.starts_with("WARNING: --insecure-skip-verify")), "{warnings:?}");
    }

    #[test]
    fn url_credentials_are_recognised_only_in_the_authority() {
        assert!(url_has_credentials("http://u:p@host:9090"));
        assert!(!url_has_credentials("http://host:9090/a@b"));
    }
}
