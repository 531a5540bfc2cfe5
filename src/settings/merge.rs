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

    s.output.links = pick(std::mem::take(&mut s.output.links), None, some(file, |f| f.links_graph.as_ref()));
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
    let shown = f.path.display().to_string();
    let invalid = |line: usize, column: usize, message: String| ConfigError::Invalid { path: shown.clone(), line, column, message };
    // The rules the file's names are checked against come from its rules directory.
    rules_dir_exists(&r.dir)?;
    let set = crate::rules::load_with_overrides(r.dir.as_deref())?;

    if let (Some(p), false) = (&f.profile, r.profile.origin.is_given()) {
        if !set.profiles.contains_key(&p.value) {
            let known = set.profiles.keys().cloned().collect::<Vec<_>>().join(", ");
            return Err(invalid(p.line, p.column, format!("profile {:?}: no such profile. Known profiles: {known}", p.value)));
        }
    }
    r.profile = pick(std::mem::take(&mut r.profile), None, some(file, |f| f.profile.as_ref()));

    let uses = crate::rules::threshold_uses(&set);
    for t in &f.thresholds {
        let (name, value, written) = &t.value;
        if !set.thresholds.contains_key(name) {
            let known = set.thresholds.keys().cloned().collect::<Vec<_>>().join(", ");
            let hint = crate::text::did_you_mean(name, set.thresholds.keys().map(String::as_str));
            return Err(invalid(t.line, t.column, format!("thresholds.{name}: no such threshold.{hint} Known thresholds: {known}")));
        }
        if let Some(why) = crate::rules::unit_misfit(name, written, &uses) {
            return Err(invalid(t.line, t.column, format!("thresholds.{name}: {why}")));
        }
        if let Some(why) = crate::rules::range_misfit(name, *value, written, &uses) {
            return Err(invalid(t.line, t.column, format!("thresholds.{name}: {why}")));
        }
        let threshold = Threshold { name: name.clone(), number: *value, written: written.clone() };
        r.thresholds.push(Setting::new(threshold, file_origin(f, t.line, t.column, &t.vars)));
    }
    let known = |i: &Item<String>, key: &str| -> Result<(), ConfigError> {
        if set.rule(&i.value).is_none() {
            let known = set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ");
            let hint = crate::text::did_you_mean(&i.value, set.rules.iter().map(|r| r.id.as_str()));
            return Err(invalid(i.line, i.column, format!("{key}: no rule {:?}.{hint} Known rules: {known}", i.value)));
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
/// show` prints them marked as missing first, then fails the same way: [`missing_path`]).
fn check_paths(s: &Settings, file: Option<&ConfigFile>, mode: Mode) -> Result<(), ConfigError> {
    if file.is_none() || mode == Mode::Show {
        return Ok(());
    }
    missing_path(s)
}

/// A rules directory the configuration file names must exist; a missing one is said at the
/// file's line, not as a `--rules` error (explain checks every path the file names later, `config
/// show` lists it as missing).
pub fn rules_dir_exists(dir: &Setting<Option<std::path::PathBuf>>) -> Result<(), ConfigError> {
    if let (Some(d), Origin::File { path, line, column, .. }) = (dir.value.as_ref(), &dir.origin) {
        if !d.is_dir() {
            let message = format!("rules.dir: {} is not a directory (relative paths are read from the file's directory)", d.display());
            return Err(ConfigError::Invalid { path: path.display().to_string(), line: *line, column: *column, message });
        }
    }
    Ok(())
}

/// The first file the configuration file names that does not exist, as an error at its line.
pub fn missing_path(s: &Settings) -> Result<(), ConfigError> {
    let Some((path, _)) = &s.file.read else { return Ok(()) };
    for (key, setting) in file_paths(s) {
        if let (Some(p), Origin::File { line, column, .. }) = (setting.value.as_ref(), &setting.origin) {
            if !p.exists() {
                return Err(ConfigError::Invalid {
                    path: path.display().to_string(),
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    use super::*;
    use crate::settings::{show, DEFAULT_PROMETHEUS};

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k: &str| map.get(k).cloned()
    }

    fn file_of(text: &str, env: &[(&str, &str)]) -> ConfigFile {
        super::super::file::parse(Path::new("/etc/team/vllm-diag.toml"), "--config", text, &env_of(env)).unwrap()
    }

    /// What the command line gives when nothing is typed: clap's defaults.
    fn command_line() -> Settings {
        let mut s = Settings::default();
        s.source.prometheus = Setting::default_value(DEFAULT_PROMETHEUS.to_string());
        s.scope.group_by = Setting::default_value("model_name".to_string());
        s.scope.replica_label = Setting::default_value("instance".to_string());
        s
    }

    fn merged(cli: Settings, file: &ConfigFile, env: &[(&str, &str)]) -> Settings {
        merge(cli, Some(file), &env_of(env), Mode::Explain).unwrap()
    }

    fn at_line(line: usize) -> Origin {
        Origin::File { path: PathBuf::from("/etc/team/vllm-diag.toml"), line, column: 14, vars: vec![] }
    }

    fn row(s: &Settings, key: &str) -> (String, Origin) {
        let r = show::rows(s).into_iter().find(|r| r.key == key).unwrap_or_else(|| panic!("no row {key}"));
        (r.value, r.origin)
    }

    #[test]
    fn the_file_beats_the_default_and_remembers_its_line() {
        let file = file_of("window = \"2h\"\n[source]\nprometheus = \"http://from-file:9090\"\n", &[]);
        let s = merged(command_line(), &file, &[]);
        assert_eq!(s.source.prometheus, Setting::new("http://from-file:9090".to_string(), at_line(3)));
        assert_eq!(s.scope.window.value, Some(Duration::from_secs(7200)));
        assert!(matches!(&s.scope.window.origin, Origin::File { line: 1, .. }));
    }

    #[test]
    fn the_environment_beats_the_file() {
        let file = file_of("[source]\nprometheus = \"http://from-file:9090\"\n", &[]);
        let s = merged(command_line(), &file, &[(ENV_PROMETHEUS_URL, "http://from-env:9090")]);
        assert_eq!(s.source.prometheus, Setting::new("http://from-env:9090".to_string(), Origin::Env(ENV_PROMETHEUS_URL)));
        // As it does when clap read the variable.
        let mut cli = command_line();
        cli.source.prometheus = Setting::new("http://from-env:9090".into(), Origin::Env(ENV_PROMETHEUS_URL));
        assert_eq!(merged(cli, &file, &[]).source.prometheus.origin, Origin::Env(ENV_PROMETHEUS_URL));
    }

    #[test]
    fn a_flag_beats_the_environment_and_the_file() {
        let file = file_of("window = \"2h\"\n[source]\nprometheus = \"http://from-file:9090\"\n", &[]);
        let mut cli = command_line();
        cli.source.prometheus = Setting::flag("http://from-flag:9090".into(), "--prometheus");
        cli.scope.window = Setting::flag(Some(Duration::from_secs(300)), "--window");
        let s = merged(cli, &file, &[(ENV_PROMETHEUS_URL, "http://from-env:9090")]);
        assert_eq!(s.source.prometheus, Setting::flag("http://from-flag:9090".to_string(), "--prometheus"));
        assert_eq!(s.scope.window, Setting::flag(Some(Duration::from_secs(300)), "--window"));
    }

    #[test]
    fn what_nobody_said_is_marked_default() {
        let s = merge(command_line(), None, &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(s.source.prometheus, Setting::default_value(DEFAULT_PROMETHEUS.to_string()));
        assert_eq!(row(&s, "window"), ("30m".to_string(), Origin::Default));
        assert_eq!(row(&s, "profile"), ("chat".to_string(), Origin::Default));
        assert_eq!(row(&s, "source.bearer_token"), ("(none)".to_string(), Origin::Default));
    }

    #[test]
    fn a_flag_given_with_the_default_value_still_beats_the_file() {
        let file = file_of("group_by = \"namespace\"\nreplica_label = \"pod\"\n", &[]);
        let mut cli = command_line();
        cli.scope.group_by = Setting::flag("model_name".into(), "--group-by");
        let s = merged(cli, &file, &[]);
        assert_eq!(s.scope.group_by.value, "model_name");
        assert_eq!((s.scope.replica_label.value.as_str(), s.scope.replica_label.origin.is_file()), ("pod", true));
        let s = merged(command_line(), &file, &[]);
        assert_eq!(s.scope.group_by.value, "namespace");
    }

    #[test]
    fn credentials_come_whole_from_one_place() {
        let file = file_of("[source]\nbasic_auth_user = \"alice\"\nbasic_auth_password = \"${PW}\"\n", &[("PW", "pw-file")]);
        let s = merged(command_line(), &file, &[]);
        assert_eq!(s.connection.basic_auth_user.value.as_deref(), Some("alice"));
        assert_eq!(s.connection.basic_auth_password.as_ref().map(|p| p.expose()), Some("pw-file"));
        assert!(s.connection.basic_auth_password.origin.is_file());

        // A token flag replaces the file's basic auth entirely.
        let mut cli = command_line();
        cli.connection.bearer_token_file = Setting::flag(Some(PathBuf::from("/t")), "--bearer-token-file");
        let s = merged(cli, &file, &[]);
        assert!(s.connection.basic_auth_user.is_none() && s.connection.basic_auth_password.is_none());
        // So does a token in the environment.
        let s = merged(command_line(), &file, &[(ENV_BEARER_TOKEN, "tok")]);
        assert!(s.connection.basic_auth_user.is_none());
        assert_eq!(s.connection.bearer_token.origin, Origin::Env(ENV_BEARER_TOKEN));
        // The environment's password beats the file's.
        let s = merged(command_line(), &file, &[(ENV_BASIC_AUTH_PASSWORD, "pw-env")]);
        assert_eq!(s.connection.basic_auth_password.as_ref().map(|p| p.expose()), Some("pw-env"));
        assert_eq!(row(&s, "source.basic_auth_password"), ("***".to_string(), Origin::Env(ENV_BASIC_AUTH_PASSWORD)));
        // A user typed here takes its password from the environment, never from the file.
        let mut cli = command_line();
        cli.connection.basic_auth_user = Setting::flag(Some("bob".into()), "--basic-auth-user");
        let s = merged(cli, &file, &[]);
        assert!(s.connection.basic_auth_password.is_none());
    }

    #[test]
    fn flag_headers_come_first_and_replace_the_files_tenant_and_headers() {
        let file = file_of("[source]\ntenant = \"team-a\"\nheaders = { X-Team = \"infra\", X-Other = \"o\" }\n", &[]);
        let mut cli = command_line();
        cli.connection.headers = ["X-Team: ml", "X-Scope-OrgID: team-b"].iter().map(|h| Setting::flag(Secret::new(*h), "--header")).collect();
        let s = merged(cli, &file, &[]);
        let headers: Vec<&str> = s.connection.headers.iter().map(|h| h.expose()).collect();
        assert_eq!(headers, ["X-Team: ml", "X-Scope-OrgID: team-b", "X-Other: o"]);
        assert_eq!(s.connection.tenant, Setting::flag(None, "--header"));
        let mut cli = command_line();
        cli.connection.tenant = Setting::flag(Some("team-c".into()), "--tenant");
        assert_eq!(merged(cli, &file, &[]).connection.tenant.value.as_deref(), Some("team-c"));
    }

    #[test]
    fn the_files_headers_and_credentials_are_never_sent_to_another_server() {
        let file = file_of(
            "[source]\nprometheus = \"https://prom.team\"\nbearer_token = \"${TOK}\"\nheaders = { X-Api-Key = \"${KEY}\" }\n",
            &[("TOK", "t"), ("KEY", "k")],
        );
        let s = merged(command_line(), &file, &[]);
        assert!(s.connection.bearer_token.is_some() && s.connection.headers.len() == 1 && s.connection.withheld.is_none());
        let mut cli = command_line();
        cli.source.prometheus = Setting::flag("https://prom.team/".into(), "--prometheus");
        assert!(merged(cli, &file, &[]).connection.bearer_token.is_some(), "the same server, given again, keeps them");
        let mut cli = command_line();
        cli.source.prometheus = Setting::flag("http://elsewhere:9090".into(), "--prometheus");
        for (cli, env) in [(cli, &[][..]), (command_line(), &[(ENV_PROMETHEUS_URL, "http://elsewhere:9090")][..])] {
            let s = merged(cli, &file, env);
            assert!(s.connection.bearer_token.is_none() && s.connection.headers.is_empty(), "{env:?}");
            assert_eq!(s.connection.withheld.as_ref(), Some(&s.source.prometheus.origin));
            assert!(row(&s, "source.headers, credentials").0.contains("not sent"));
        }
    }

    #[test]
    fn a_replay_a_scrape_or_a_check_takes_no_windows_from_the_file() {
        let file = file_of("window = \"2h\"\nbaseline = \"1d\"\nselector = 'namespace=\"prod\"'\n", &[]);
        let mut cli = command_line();
        cli.source.replay = Setting::flag(Some(PathBuf::from("r.json")), "--replay");
        let s = merged(cli, &file, &[]);
        assert_eq!((s.scope.window.value, s.scope.baseline.value, s.scope.selector.value.clone()), (None, None, None));
        let mut cli = command_line();
        cli.source.scrape = Setting::flag(vec!["host:8000".into()], "--scrape");
        assert!(merged(cli, &file, &[]).scope.window.is_none());
        let s = merge(command_line(), Some(&file), &env_of(&[]), Mode::Check).unwrap();
        assert_eq!((s.scope.window.value, s.scope.baseline.value), (None, None));
        assert!(merged(command_line(), &file, &[]).scope.selector.is_some());
    }

    #[test]
    fn profile_thresholds_and_rule_ids_are_checked_against_the_rules() {
        for (text, needle, line) in [
            ("\nprofile = \"turbo\"\n", "no such profile", 2),
            ("[thresholds]\nno_such = 3\n", "no such threshold", 2),
            ("[rules]\n\ndisabled = [\"slow-decod\"]\n", "no rule \"slow-decod\". Did you mean \"slow-decode\"?", 3),
            ("[thresholds]\nttft_p95_hgh = \"1.5s\"\n", "no such threshold. Did you mean \"ttft_p95_high\"?", 2),
            ("\n[thresholds]\nttft_p95_high = \"90%\"\n", "thresholds.ttft_p95_high: \"90%\" is a percentage, but it is compared with values in seconds", 3),
        ] {
            let e = merge(command_line(), Some(&file_of(text, &[])), &env_of(&[]), Mode::Explain).expect_err(text).to_string();
            assert!(e.contains(needle) && e.contains(&format!(":{line}:")), "{e}");
        }
        let s = merged(command_line(), &file_of("[thresholds]\nttft_p95_high = \"1.5s\"\n[rules]\ndisabled = [\"slow-decode\"]\n", &[]), &[]);
        assert_eq!(s.rules.thresholds[0].number, 1.5);
        assert!(matches!(&s.rules.thresholds[0].origin, Origin::File { line: 2, .. }));
        assert_eq!(row(&s, "rules.disabled").0, "slow-decode");
    }

    #[test]
    fn a_missing_file_named_by_the_file_is_an_error_at_its_line_and_shown_in_config_show() {
        let file = file_of("\n[source]\nca_file = \"no-such-ca.pem\"\n", &[]);
        let e = merge(command_line(), Some(&file), &env_of(&[]), Mode::Explain).unwrap_err().to_string();
        assert!(e.contains("vllm-diag.toml:3:") && e.contains("no-such-ca.pem does not exist"), "{e}");
        let s = merge(command_line(), Some(&file), &env_of(&[]), Mode::Show).unwrap();
        assert!(row(&s, "source.ca_file").0.ends_with("(DOES NOT EXIST)"));
    }

    #[test]
    fn config_show_prints_every_value_with_its_origin() {
        let file = file_of("selector = 'namespace=\"${NS}\"'\n[source]\nheaders = { X-Api-Key = \"${KEY}\" }\n", &[("NS", "prod"), ("KEY", "k-1")]);
        let mut cli = command_line();
        cli.scope.window = Setting::flag(Some(Duration::from_secs(900)), "--window");
        let text = show::show(&merged(cli, &file, &[]));
        let line = |key: &str| text.lines().find(|l| l.split_whitespace().next() == Some(key)).unwrap_or_else(|| panic!("{key}:\n{text}")).to_string();
        assert!(text.starts_with("Configuration file: /etc/team/vllm-diag.toml (from --config)\n\nsetting "), "{text}");
        assert!(line("selector").ends_with("file /etc/team/vllm-diag.toml:1 (via ${NS})"), "{text}");
        assert!(line("window").contains("15m") && line("window").ends_with("flag --window"), "{text}");
        assert!(line("source.headers.X-Api-Key").contains("***") && !text.contains("k-1"), "{text}");
        assert!(line("source.prometheus").ends_with("default"), "{text}");
    }
}
