//! The precedence rule, once: a flag beats the environment, which beats the file, which beats the
//! default ([`pick`]). Every value goes through it; what differs from one value to the next is only
//! which layers can hold it:
//!
//! - The file does not place the windows or the selector of a replay (the recording does), a
//!   scrape (it samples now) or a check (the deploy time does).
//! - Credentials are one value made of several keys (a token, or a user and a password), taken
//!   whole from the first layer that has any: the credential flags or `user:pass@` in a typed URL,
//!   else `$VLLM_DIAG_BEARER_TOKEN`, else the file. Mixing a user from one place with a token from
//!   another only ever produces a confusing 401. Within the file's credentials the password is a
//!   value of its own, which `$VLLM_DIAG_BASIC_AUTH_PASSWORD` beats.
//! - The file's headers and credentials were written for the file's server: when a flag or the
//!   environment points elsewhere, they stay behind.
//! - Headers merge by name: a `--header` replaces the file's header of the same name (and
//!   `--tenant` its X-Scope-OrgID, as `--header X-Scope-OrgID` replaces its tenant).

use std::collections::BTreeSet;

use super::file::{ConfigFile, Item, SourceSection};
use super::{ConfigError, Env, Mode, Origin, Setting, Settings, Threshold, ENV_PROMETHEUS_URL};
use crate::source::auth::{ENV_BASIC_AUTH_PASSWORD, ENV_BEARER_TOKEN, TENANT_HEADER};
use crate::source::prometheus::Secret;

/// The one precedence rule. `command_line` holds what the command line said: a flag, an
/// environment variable clap reads, or (when neither) clap's default, which comes last.
fn pick<T>(command_line: Setting<T>, env: Option<Setting<T>>, file: Option<Setting<T>>) -> Setting<T> {
    if command_line.origin.is_given() {
        return command_line;
    }
    env.or(file).unwrap_or(command_line)
}

/// A value from the file, as a setting that remembers file:line.
fn from_file<T: Clone>(f: &ConfigFile, item: &Item<T>) -> Setting<T> {
    Setting::new(item.value.clone(), file_origin(f, item.line, item.column, &item.vars))
}

fn file_origin(f: &ConfigFile, line: usize, column: usize, vars: &[String]) -> Origin {
    Origin::File { path: f.path.clone(), line: line.max(1), column, vars: vars.to_vec() }
}

/// An optional value from the file, as the `Some` of a setting.
fn some<T: Clone>(file: Option<&ConfigFile>, item: impl Fn(&ConfigFile) -> Option<&Item<T>>) -> Option<Setting<Option<T>>> {
    let f = file?;
    item(f).map(|i| from_file(f, i).map(Some))
}

/// A secret from the environment, when set to something other than blanks.
fn env_secret(env: Env, name: &'static str) -> Option<Setting<Option<Secret>>> {
    env(name).filter(|v| !v.trim().is_empty()).map(|v| Setting::new(Some(Secret::new(v)), Origin::Env(name)))
}

/// Merge the environment and the configuration file under the command line. Checks the file's
/// profile, thresholds, rule ids and paths against what is in force, each error at its file:line.
pub fn merge(cli: Settings, file: Option<&ConfigFile>, env: Env, mode: Mode) -> Result<Settings, ConfigError> {
    let mut s = cli;
    s.file.read = file.map(|f| (f.path.clone(), f.found.clone()));
    let none = SourceSection::default();
    let src = file.map_or(&none, |f| &f.source);

    // Where the metrics are.
    let env_url = env(ENV_PROMETHEUS_URL).filter(|v| !v.trim().is_empty()).map(|v| Setting::new(v, Origin::Env(ENV_PROMETHEUS_URL)));
    let file_url = file.and_then(|f| f.source.prometheus.as_ref().map(|u| from_file(f, u).map(|v| v.trim().to_string())));
    s.source.prometheus = pick(s.source.prometheus, env_url, file_url);
    let url = &s.source.prometheus;
    let same_server = |a: &str| a.trim().trim_end_matches('/') == url.trim().trim_end_matches('/');
    let elsewhere = src.prometheus.as_ref().is_some_and(|u| !url.origin.is_file() && !same_server(&u.value));
    s.connection.withheld = elsewhere.then(|| url.origin.clone());

    merge_connection(&mut s, file, src, elsewhere, env);

    // What to look at. The file places no windows for a replay, a scrape or a check.
    let windows_apply = mode != Mode::Check && s.source.replay.is_none() && s.source.scrape.is_empty();
    let scoped = if windows_apply { file } else { None };
    let sc = &mut s.scope;
    sc.selector = pick(std::mem::take(&mut sc.selector), None, some(scoped, |f| f.selector.as_ref()));
    sc.window = pick(std::mem::take(&mut sc.window), None, some(scoped, |f| f.window.as_ref()));
    sc.baseline = pick(std::mem::take(&mut sc.baseline), None, some(scoped, |f| f.baseline.as_ref()));
    let group_by = file.and_then(|f| f.group_by.as_ref().map(|g| from_file(f, g).map(|v| v.join(","))));
    sc.group_by = pick(std::mem::take(&mut sc.group_by), None, group_by);
    let replica = file.and_then(|f| f.replica_label.as_ref().map(|r| from_file(f, r).map(|v| v.trim().to_string())));
    sc.replica_label = pick(std::mem::take(&mut sc.replica_label), None, replica);

    merge_rules(&mut s, file)?;
    check_paths(&s, file, mode)?;
    Ok(s)
}

/// The connection: tenant, headers, TLS, and the credentials taken whole from one place.
fn merge_connection(s: &mut Settings, file: Option<&ConfigFile>, src: &SourceSection, elsewhere: bool, env: Env) {
    let c = &mut s.connection;
    let header_name = |h: &Setting<Secret>| h.expose().split_once(':').map(|(n, _)| n.trim().to_ascii_lowercase());
    let flag_names: BTreeSet<String> = c.headers.iter().filter_map(header_name).collect();
    let tenant_flag = c.tenant.origin.is_flag();
    // A --header X-Scope-OrgID replaces the file's tenant as --tenant would.
    if !tenant_flag && src.tenant.is_some() && flag_names.contains(&TENANT_HEADER.to_ascii_lowercase()) {
        c.tenant = Setting::flag(None, "--header");
    }
    c.tenant = pick(std::mem::take(&mut c.tenant), None, some(file, |f| f.source.tenant.as_ref()));

    // The file's headers follow the flags', except those a flag replaces.
    if let (Some(f), false) = (file, elsewhere) {
        for (name, value) in &src.headers {
            let lower = name.to_ascii_lowercase();
            if flag_names.contains(&lower) || (tenant_flag && lower == TENANT_HEADER.to_ascii_lowercase()) {
                continue;
            }
            let line = Secret::new(format!("{name}: {}", value.value.expose()));
            c.headers.push(Setting::new(line, file_origin(f, value.line, value.column, &value.vars)));
        }
    }

    c.ca_file = pick(std::mem::take(&mut c.ca_file), None, some(file, |f| f.source.ca_file.as_ref()));
    c.cert_file = pick(std::mem::take(&mut c.cert_file), None, some(file, |f| f.source.cert_file.as_ref()));
    c.key_file = pick(std::mem::take(&mut c.key_file), None, some(file, |f| f.source.key_file.as_ref()));
    let insecure = file.and_then(|f| f.source.insecure_skip_verify.as_ref().map(|b| from_file(f, b)));
    c.insecure_skip_verify = pick(std::mem::take(&mut c.insecure_skip_verify), None, insecure);

    // Credentials: the layer that has any gives them all.
    let url = &s.source.prometheus;
    let typed = c.bearer_token_file.origin.is_flag()
        || c.basic_auth_user.origin.is_flag()
        || c.basic_auth_password_file.origin.is_flag()
        || (!url.origin.is_file() && super::file::url_has_credentials(url));
    let env_password = env_secret(env, ENV_BASIC_AUTH_PASSWORD);
    if typed {
        if c.basic_auth_user.is_some() && c.basic_auth_password_file.is_none() {
            c.basic_auth_password = env_password.unwrap_or_default();
        }
    } else if let Some(token) = env_secret(env, ENV_BEARER_TOKEN) {
        c.bearer_token = token;
    } else if let (Some(_), false, true) = (file, elsewhere, src.has_credentials()) {
        c.bearer_token_file = some(file, |f| f.source.bearer_token_file.as_ref()).unwrap_or_default();
        c.bearer_token = some(file, |f| f.source.bearer_token.as_ref()).unwrap_or_default();
        c.basic_auth_user = some(file, |f| f.source.basic_auth_user.as_ref()).unwrap_or_default();
        if c.basic_auth_user.is_some() {
            // The password is a value of its own: the environment's beats the file's (either form).
            let pw_file = some(file, |f| f.source.basic_auth_password_file.as_ref());
            let pw = some(file, |f| f.source.basic_auth_password.as_ref());
            match (env_password, pw_file) {
                (Some(e), _) => c.basic_auth_password = e,
                (None, Some(p)) => c.basic_auth_password_file = p,
                (None, None) => c.basic_auth_password = pw.unwrap_or_default(),
            }
        }
    }
}

/// The rules directory and profile, and what only the file holds: thresholds and rule lists, each
/// checked against the rules in force.
fn merge_rules(s: &mut Settings, file: Option<&ConfigFile>) -> Result<(), ConfigError> {
    let r = &mut s.rules;
    r.dir = pick(std::mem::take(&mut r.dir), None, some(file, |f| f.rules_dir.as_ref()));
    let Some(f) = file else { return Ok(()) };
    let needs_rules = f.profile.is_some() || !f.thresholds.is_empty() || f.rules_enabled.is_some() || !f.rules_disabled.is_empty();
    if !needs_rules {
        return Ok(());
    }
    let set = crate::rules::load_with_overrides(r.dir.as_deref())?;
    let shown = f.path.display().to_string();
    let invalid = |line: usize, column: usize, message: String| ConfigError::Invalid { path: shown.clone(), line, column, message };

    if let (Some(p), false) = (&f.profile, r.profile.origin.is_given()) {
        if !set.profiles.contains_key(&p.value) {
            let known = set.profiles.keys().cloned().collect::<Vec<_>>().join(", ");
            return Err(invalid(p.line, p.column, format!("profile {:?}: no such profile. Known profiles: {known}", p.value)));
        }
    }
    r.profile = pick(std::mem::take(&mut r.profile), None, some(file, |f| f.profile.as_ref()));

    for t in &f.thresholds {
        let (name, value, written) = &t.value;
        if !set.thresholds.contains_key(name) {
            let known = set.thresholds.keys().cloned().collect::<Vec<_>>().join(", ");
            return Err(invalid(t.line, t.column, format!("thresholds.{name}: no such threshold. Known thresholds: {known}")));
        }
        let threshold = Threshold { name: name.clone(), number: *value, written: written.clone() };
        r.thresholds.push(Setting::new(threshold, file_origin(f, t.line, t.column, &t.vars)));
    }
    let known = |i: &Item<String>, key: &str| -> Result<(), ConfigError> {
        if set.rule(&i.value).is_none() {
            let known = set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ");
            return Err(invalid(i.line, i.column, format!("{key}: no rule {:?}. Known rules: {known}", i.value)));
        }
        Ok(())
    };
    if let Some(list) = &f.rules_enabled {
        for i in list {
            known(i, "rules.enabled")?;
        }
        let line = list.first().map_or(0, |i| i.line);
        r.enabled = Setting::new(Some(list.iter().map(|i| i.value.clone()).collect()), file_origin(f, line, 1, &[]));
    }
    for i in &f.rules_disabled {
        known(i, "rules.disabled")?;
    }
    if let Some(first) = f.rules_disabled.first() {
        let ids = f.rules_disabled.iter().map(|i| i.value.clone()).collect();
        r.disabled = Setting::new(ids, file_origin(f, first.line, first.column, &[]));
    }
    if r.enabled.is_some() || !r.disabled.is_empty() {
        let off = r.apply_to_rules(&mut set.clone());
        let line = f.rules_disabled.first().or(f.rules_enabled.as_ref().and_then(|l| l.first())).map_or(0, |i| i.line);
        r.off = Setting::new(Some(off), file_origin(f, line, 1, &[]));
    }
    Ok(())
}

/// Paths the file names must exist when they are used, reported against the file's line (`config
/// show` lists them as missing instead).
fn check_paths(s: &Settings, file: Option<&ConfigFile>, mode: Mode) -> Result<(), ConfigError> {
    let Some(f) = file else { return Ok(()) };
    if mode == Mode::Show {
        return Ok(());
    }
    for (key, setting) in file_paths(s) {
        if let (Some(p), Origin::File { line, column, .. }) = (setting.value.as_ref(), &setting.origin) {
            if !p.exists() {
                return Err(ConfigError::Invalid {
                    path: f.path.display().to_string(),
                    line: *line,
                    column: *column,
                    message: format!("{key}: {} does not exist (relative paths are read from the file's directory)", p.display()),
                });
            }
        }
    }
    Ok(())
}

/// The settings that name a file, with their keys in the configuration file.
pub(super) fn file_paths(s: &Settings) -> [(&'static str, &Setting<Option<std::path::PathBuf>>); 6] {
    let c = &s.connection;
    [
        ("source.ca_file", &c.ca_file),
        ("source.cert_file", &c.cert_file),
        ("source.key_file", &c.key_file),
        ("source.bearer_token_file", &c.bearer_token_file),
        ("source.basic_auth_password_file", &c.basic_auth_password_file),
        ("rules.dir", &s.rules.dir),
    ]
}
