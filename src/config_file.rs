//! The configuration file, `vllm-diag.toml`: a team's source, scope and rule settings written down
//! once, so that a command line during an incident says only what differs today.
//!
//! Where it is looked for: `--config FILE`, else `./vllm-diag.toml`, else
//! `$XDG_CONFIG_HOME/vllm-diag/vllm-diag.toml` (`~/.config/vllm-diag/vllm-diag.toml` when that variable
//! is unset); `--no-config` reads none. It applies to `explain`, `check` and `config show`; the `rules`
//! commands read only their own flags, so a rule test means the same on every machine.
//!
//! Precedence is the usual one, a flag over the environment over the file over the built-in default,
//! and `vllm-diag config show` prints the merged result with the origin of every value. Credentials
//! are taken as a whole from one place (the credential flags or credentials in the URL, else
//! `$VLLM_DIAG_BEARER_TOKEN`, else the file), because mixing a user from one place with a token from
//! another only ever produces a confusing 401.
//!
//! Such a file gets committed and shared, so it never holds a secret: it names secret *files*
//! (`bearer_token_file`) or environment variables (`bearer_token = "${PROM_TOKEN}"`), and a token,
//! password or credential header written out in the file is refused. `${NAME}` works in every string;
//! an unset variable is an error naming it and the file:line, never an empty string that would turn
//! into a confusing 401 or an empty selector later.
//!
//! Every mistake, including an unknown key, is an error with file:line: a misspelt key silently
//! ignored would leave the default in force with nobody noticing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::cli::ExplainArgs;
use crate::error::Failure;
use crate::rules::{RuleError, RuleSet};
use crate::source::auth::{ENV_BASIC_AUTH_PASSWORD, ENV_BEARER_TOKEN, TENANT_HEADER};
use crate::source::prometheus::Secret;

/// The file name looked for in the current directory and the user's configuration directory.
pub const FILE_NAME: &str = "vllm-diag.toml";
/// The environment variable clap reads `--prometheus` from.
pub const ENV_PROMETHEUS_URL: &str = "VLLM_DIAG_PROMETHEUS_URL";
/// `--prometheus`'s built-in default.
pub const DEFAULT_PROMETHEUS: &str = "http://localhost:9090";

/// Looks an environment variable up; tests pass their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// A configuration file that cannot be found, read or used. Never quotes a secret.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--config {path}: cannot read it: {reason}. Give the path of a vllm-diag.toml file, or drop --config")]
    Missing { path: String, reason: String },
    #[error("config file error: {path}: cannot read it: {reason}")]
    Unreadable { path: String, reason: String },
    #[error("config file error: {path}:{line}:{column}: {message}")]
    Invalid { path: String, line: usize, column: usize, message: String },
    #[error("rule file error: {0}")]
    Rules(#[from] RuleError),
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Failure {
        match e {
            ConfigError::Rules(r) => Failure::Rules(r),
            other => Failure::Usage(other.to_string()),
        }
    }
}

/// Which of a command's values the command line or the environment gave, as opposed to clap's
/// defaults (only those may be replaced by the file). Filled by [`crate::cli::parse`].
#[derive(Debug, Clone, Default)]
pub struct Given {
    flags: BTreeSet<String>,
    env: BTreeSet<String>,
}

impl Given {
    /// Record every argument whose value came from the command line or the environment.
    pub fn from_matches(m: &clap::ArgMatches) -> Given {
        let mut g = Given::default();
        for id in m.ids() {
            match m.value_source(id.as_str()) {
                Some(clap::parser::ValueSource::CommandLine) => {
                    g.flags.insert(id.as_str().to_string());
                }
                Some(clap::parser::ValueSource::EnvVariable) => {
                    g.env.insert(id.as_str().to_string());
                }
                _ => {}
            }
        }
        g
    }

    /// Whether the flag (by its clap id, `group_by`) was given on the command line.
    pub fn flag(&self, id: &str) -> bool {
        self.flags.contains(id)
    }
}

/// What the file adds that no flag can carry: kept in [`ExplainArgs::config`] for the run.
#[derive(Debug, Clone, Default)]
pub struct Applied {
    /// The file that was read, if any.
    pub file: Option<PathBuf>,
    /// `[thresholds]`, applied after the profile.
    pub thresholds: Vec<(String, f64)>,
    /// `[rules] enabled`: when given, only these rules run.
    pub enabled: Option<BTreeSet<String>>,
    /// `[rules] disabled`.
    pub disabled: BTreeSet<String>,
    /// `bearer_token = "${VAR}"`, when the file's credentials are the ones in force.
    pub bearer_token: Option<Secret>,
    /// `basic_auth_password = "${VAR}"`, likewise.
    pub basic_auth_password: Option<Secret>,
}

impl Applied {
    /// Apply the thresholds and remove the disabled rules; returns the disabled ids, sorted.
    ///
    /// A removed rule's place in the "explains" chains is kept: when A supersedes B and B supersedes
    /// C, disabling B still lets A absorb C.
    pub fn apply_to_rules(&self, set: &mut RuleSet) -> Vec<String> {
        for (name, value) in &self.thresholds {
            set.thresholds.insert(name.clone(), *value);
        }
        let off: BTreeSet<String> = set
            .rules
            .iter()
            .map(|r| r.id.clone())
            .filter(|id| self.disabled.contains(id) || self.enabled.as_ref().is_some_and(|e| !e.contains(id)))
            .collect();
        if off.is_empty() {
            return Vec::new();
        }
        let chains: BTreeMap<String, Vec<String>> =
            set.rules.iter().map(|r| (r.id.clone(), r.supersedes.clone())).collect();
        for r in set.rules.iter_mut().filter(|r| !off.contains(&r.id)) {
            let mut kept: Vec<String> = Vec::new();
            let mut stack: Vec<String> = r.supersedes.iter().rev().cloned().collect();
            let mut seen = BTreeSet::new();
            while let Some(s) = stack.pop() {
                if !seen.insert(s.clone()) {
                    continue;
                }
                if off.contains(&s) {
                    stack.extend(chains.get(&s).into_iter().flatten().rev().cloned());
                } else {
                    kept.push(s);
                }
            }
            r.supersedes = kept;
        }
        set.rules.retain(|r| !off.contains(&r.id));
        off.into_iter().collect()
    }

    /// The file's secret for an environment variable the auth code reads, used only when the
    /// variable itself is unset.
    pub fn env_fallback(&self, name: &str) -> Option<String> {
        match name {
            ENV_BEARER_TOKEN => self.bearer_token.as_ref().map(|s| s.expose().to_string()),
            ENV_BASIC_AUTH_PASSWORD => self.basic_auth_password.as_ref().map(|s| s.expose().to_string()),
            _ => None,
        }
    }
}

/// How to find the file: `--config` and `--no-config`.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    pub explicit: Option<PathBuf>,
    pub disabled: bool,
}

/// A value from the file, with where it was written and the variables it expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct Item<T> {
    pub value: T,
    pub line: usize,
    pub column: usize,
    pub vars: Vec<String>,
}

/// The `[source]` table.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SourceSection {
    pub prometheus: Option<Item<String>>,
    pub tenant: Option<Item<String>>,
    /// By name, in file order; values are secrets.
    pub headers: Vec<(String, Item<Secret>)>,
    pub ca_file: Option<Item<PathBuf>>,
    pub cert_file: Option<Item<PathBuf>>,
    pub key_file: Option<Item<PathBuf>>,
    pub insecure_skip_verify: Option<Item<bool>>,
    pub bearer_token_file: Option<Item<PathBuf>>,
    pub bearer_token: Option<Item<Secret>>,
    pub basic_auth_user: Option<Item<String>>,
    pub basic_auth_password_file: Option<Item<PathBuf>>,
    pub basic_auth_password: Option<Item<Secret>>,
}

impl SourceSection {
    fn has_credentials(&self) -> bool {
        self.bearer_token_file.is_some()
            || self.bearer_token.is_some()
            || self.basic_auth_user.is_some()
            || self.prometheus.as_ref().is_some_and(|u| url_has_credentials(&u.value))
    }
}

/// A parsed, expanded and checked configuration file.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// Where it was found, for `config show`: `--config`, the current directory, ...
    pub found: String,
    pub source: SourceSection,
    pub selector: Option<Item<String>>,
    pub group_by: Option<Item<Vec<String>>>,
    pub replica_label: Option<Item<String>>,
    pub window: Option<Item<Duration>>,
    pub baseline: Option<Item<Duration>>,
    pub profile: Option<Item<String>>,
    /// Name (with its position), value, and the value as written.
    pub thresholds: Vec<Item<(String, f64, String)>>,
    pub rules_dir: Option<Item<PathBuf>>,
    pub rules_enabled: Option<Vec<Item<String>>>,
    pub rules_disabled: Vec<Item<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    source: Option<RawSource>,
    selector: Option<Spanned<String>>,
    group_by: Option<Spanned<toml::Value>>,
    replica_label: Option<Spanned<String>>,
    window: Option<Spanned<String>>,
    baseline: Option<Spanned<String>>,
    profile: Option<Spanned<String>>,
    #[serde(default)]
    thresholds: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    rules: Option<RawRules>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    prometheus: Option<Spanned<String>>,
    tenant: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<Spanned<String>, Spanned<String>>,
    ca_file: Option<Spanned<String>>,
    cert_file: Option<Spanned<String>>,
    key_file: Option<Spanned<String>>,
    insecure_skip_verify: Option<Spanned<bool>>,
    bearer_token_file: Option<Spanned<String>>,
    bearer_token: Option<Spanned<String>>,
    basic_auth_user: Option<Spanned<String>>,
    basic_auth_password_file: Option<Spanned<String>>,
    basic_auth_password: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRules {
    dir: Option<Spanned<String>>,
    enabled: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    disabled: Vec<Spanned<String>>,
}

/// Find the file to read: `--config`, else the first of [`candidates`] that exists.
pub fn locate(lookup: &Lookup, env: Env) -> Result<Option<(PathBuf, String)>, ConfigError> {
    if lookup.disabled {
        return Ok(None);
    }
    if let Some(path) = &lookup.explicit {
        return match std::fs::metadata(path) {
            Ok(m) if m.is_file() => Ok(Some((path.clone(), "--config".to_string()))),
            Ok(_) => Err(ConfigError::Missing { path: path.display().to_string(), reason: "it is not a file".into() }),
            Err(e) => Err(ConfigError::Missing { path: path.display().to_string(), reason: io_reason(&e) }),
        };
    }
    Ok(candidates(env).into_iter().find(|(p, _)| p.is_file()))
}

/// Where a file is looked for without `--config`, in order, each with how `config show` names it.
pub fn candidates(env: Env) -> Vec<(PathBuf, String)> {
    let mut out = vec![(Path::new(".").join(FILE_NAME), "the current directory".to_string())];
    let xdg = env("XDG_CONFIG_HOME").filter(|v| Path::new(v).is_absolute());
    match (xdg, env("HOME").filter(|h| !h.is_empty())) {
        (Some(dir), _) => out.push((Path::new(&dir).join("vllm-diag").join(FILE_NAME), "$XDG_CONFIG_HOME/vllm-diag".into())),
        (None, Some(home)) => {
            out.push((Path::new(&home).join(".config").join("vllm-diag").join(FILE_NAME), "~/.config/vllm-diag".into()))
        }
        (None, None) => {}
    }
    out
}

/// Read and check the file `locate` found.
pub fn load(lookup: &Lookup, env: Env) -> Result<Option<ConfigFile>, ConfigError> {
    let Some((path, found)) = locate(lookup, env)? else { return Ok(None) };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        let (path, reason) = (path.display().to_string(), io_reason(&e));
        if lookup.explicit.is_some() {
            ConfigError::Missing { path, reason }
        } else {
            ConfigError::Unreadable { path, reason }
        }
    })?;
    parse(&path, &found, &text, env).map(Some)
}

fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    s.split(" (os error").next().unwrap_or(&s).to_string()
}

/// Parse a file's text. Relative paths in it are relative to the file's directory.
pub fn parse(path: &Path, found: &str, text: &str, env: Env) -> Result<ConfigFile, ConfigError> {
    let shown = path.display().to_string();
    let invalid = |byte: usize, message: String| {
        let (line, column) = line_col(text, byte);
        ConfigError::Invalid { path: shown.clone(), line, column, message }
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let start = e.span().map_or(0, |s| s.start);
        let mut message = e.message().trim().to_string();
        if message.starts_with("unknown field") {
            message.push_str(". See the README's \"Configuration file\" section for every key");
        } else if let Some(key) = key_on_line(text, start) {
            // toml names the type it wanted, not the key: add it.
            message = format!("{key}: {message}");
        }
        invalid(start, message)
    })?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();

    // `${NAME}` expansion with the position kept, for every string.
    let string = |key: &str, s: &Spanned<String>| -> Result<Item<String>, ConfigError> {
        let (value, vars) = expand(s.get_ref(), env).map_err(|m| invalid(s.span().start, format!("{key}: {m}")))?;
        let (line, column) = line_col(text, s.span().start);
        Ok(Item { value, line, column, vars })
    };
    let opt = |key: &str, s: &Option<Spanned<String>>| s.as_ref().map(|s| string(key, s)).transpose();
    let path_item = |key: &str, s: &Option<Spanned<String>>| -> Result<Option<Item<PathBuf>>, ConfigError> {
        let Some(item) = opt(key, s)? else { return Ok(None) };
        if item.value.trim().is_empty() {
            return Err(at(&shown, &item, format!("{key} is empty: give a file path")));
        }
        let p = PathBuf::from(&item.value);
        let value = if p.is_absolute() { p } else { base.join(p) };
        Ok(Some(Item { value, line: item.line, column: item.column, vars: item.vars }))
    };
    // A secret must come from the environment: the whole value one `${VAR}` reference.
    let secret = |key: &str, s: &Option<Spanned<String>>, file_key: &str| -> Result<Option<Item<Secret>>, ConfigError> {
        let Some(s) = s else { return Ok(None) };
        if !is_single_reference(s.get_ref()) {
            return Err(invalid(
                s.span().start,
                format!(
                    "{key}: a secret cannot be written in the file. Put it in a file and give {file_key} = \"PATH\", \
                     or in an environment variable and write {key} = \"${{VAR}}\""
                ),
            ));
        }
        let item = string(key, s)?;
        if item.value.trim().is_empty() {
            return Err(at(&shown, &item, format!("{key}: ${{{}}} is empty", item.vars.join(""))));
        }
        Ok(Some(Item { value: Secret::new(item.value.trim()), line: item.line, column: item.column, vars: item.vars }))
    };

    let mut source = SourceSection::default();
    if let Some(s) = &raw.source {
        if let Some(u) = &s.prometheus {
            let item = string("source.prometheus", u)?;
            check_url(u.get_ref(), &item.value).map_err(|m| at(&shown, &item, format!("source.prometheus: {m}")))?;
            source.prometheus = Some(item);
        }
        if let Some(t) = opt("source.tenant", &s.tenant)? {
            let v = t.value.trim();
            if v.is_empty() || v.chars().any(char::is_control) || v.split('|').any(|p| p.trim().is_empty()) {
                return Err(at(
                    &shown,
                    &t,
                    "source.tenant: give a tenant ID, or several joined by '|' (e.g. \"team-a|team-b\"), without control characters or empty parts".into(),
                ));
            }
            source.tenant = Some(Item { value: v.to_string(), ..t });
        }
        let mut names = BTreeSet::new();
        for (name, value) in &s.headers {
            let n = name.get_ref().trim();
            let key = format!("source.headers.{n}");
            let valid = !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid {
                return Err(invalid(name.span().start, format!("{key}: not a valid HTTP header name")));
            }
            if !names.insert(n.to_ascii_lowercase()) {
                return Err(invalid(name.span().start, format!("{key}: this header is given twice (header names ignore case)")));
            }
            if is_credential_header(n) && !value.get_ref().contains("${") {
                return Err(invalid(
                    value.span().start,
                    format!(
                        "{key}: the value of a credential header cannot be written in the file; reference an \
                         environment variable instead, e.g. {n} = \"${{PROM_API_KEY}}\""
                    ),
                ));
            }
            if n.eq_ignore_ascii_case(TENANT_HEADER) && s.tenant.is_some() {
                return Err(invalid(name.span().start, format!("{key}: source.tenant sets {TENANT_HEADER} too; give one of them")));
            }
            let item = string(&key, value)?;
            if item.value.chars().any(char::is_control) {
                return Err(at(&shown, &item, format!("{key}: the value holds line breaks or other control characters")));
            }
            let v = Secret::new(item.value.trim());
            source.headers.push((n.to_string(), Item { value: v, line: item.line, column: item.column, vars: item.vars }));
        }
        source.ca_file = path_item("source.ca_file", &s.ca_file)?;
        source.cert_file = path_item("source.cert_file", &s.cert_file)?;
        source.key_file = path_item("source.key_file", &s.key_file)?;
        match (&source.cert_file, &source.key_file) {
            (Some(c), None) => return Err(at(&shown, c, "source.cert_file needs source.key_file with its private key".into())),
            (None, Some(k)) => return Err(at(&shown, k, "source.key_file needs source.cert_file with its certificate".into())),
            _ => {}
        }
        source.insecure_skip_verify = s.insecure_skip_verify.as_ref().map(|b| {
            let (line, column) = line_col(text, b.span().start);
            Item { value: *b.get_ref(), line, column, vars: vec![] }
        });
        source.bearer_token_file = path_item("source.bearer_token_file", &s.bearer_token_file)?;
        source.bearer_token = secret("source.bearer_token", &s.bearer_token, "bearer_token_file")?;
        source.basic_auth_user = opt("source.basic_auth_user", &s.basic_auth_user)?;
        source.basic_auth_password_file = path_item("source.basic_auth_password_file", &s.basic_auth_password_file)?;
        source.basic_auth_password = secret("source.basic_auth_password", &s.basic_auth_password, "basic_auth_password_file")?;

        if let (Some(_), Some(b)) = (&source.bearer_token_file, &source.bearer_token) {
            return Err(at(&shown, b, "source.bearer_token and source.bearer_token_file are both given; keep one".into()));
        }
        if let (Some(_), Some(b)) = (&source.basic_auth_password_file, &source.basic_auth_password) {
            return Err(at(&shown, b, "source.basic_auth_password and source.basic_auth_password_file are both given; keep one".into()));
        }
        if let Some(u) = &source.basic_auth_user {
            if u.value.is_empty() || u.value.contains(':') || u.value.chars().any(char::is_control) {
                return Err(at(&shown, u, "source.basic_auth_user: give a user name without ':' or control characters".into()));
            }
            if let Some(b) = source.bearer_token_file.as_ref().map(|i| (i.line, i.column)).or(source.bearer_token.as_ref().map(|i| (i.line, i.column))) {
                return Err(ConfigError::Invalid {
                    path: shown.clone(),
                    line: b.0,
                    column: b.1,
                    message: "a bearer token and source.basic_auth_user are both given; a server takes one of them".into(),
                });
            }
        } else if let Some(p) = source.basic_auth_password_file.as_ref().map(|i| (i.line, i.column)).or(source.basic_auth_password.as_ref().map(|i| (i.line, i.column))) {
            return Err(ConfigError::Invalid {
                path: shown.clone(),
                line: p.0,
                column: p.1,
                message: "a basic-auth password is given without source.basic_auth_user; add the user name".into(),
            });
        }
        if let Some(u) = &source.prometheus {
            if url_has_credentials(&u.value) && (source.bearer_token_file.is_some() || source.bearer_token.is_some() || source.basic_auth_user.is_some()) {
                return Err(at(&shown, u, "source.prometheus carries user:password@ and the file gives other credentials too; keep one".into()));
            }
        }
    }

    let selector = opt("selector", &raw.selector)?;
    if let Some(s) = &selector {
        crate::prom::Selector::parse(&s.value).map_err(|e| {
            at(&shown, s, format!("selector {:?}: {} at character {}. Expected label matchers such as namespace=\"prod\"", e.input, e.problem, e.column))
        })?;
    }

    let group_by = match &raw.group_by {
        None => None,
        Some(g) => {
            let (line, column) = line_col(text, g.span().start);
            let parts: Vec<Spanned<String>> = match g.get_ref() {
                toml::Value::String(s) => vec![Spanned::new(g.span(), s.clone())],
                toml::Value::Array(a) if a.iter().all(|v| v.is_str()) => {
                    a.iter().filter_map(|v| v.as_str()).map(|s| Spanned::new(g.span(), s.to_string())).collect()
                }
                _ => return Err(invalid(g.span().start, "group_by: give label names, e.g. \"model_name\" or [\"model_name\", \"namespace\"]".into())),
            };
            let mut labels = Vec::new();
            let mut vars = Vec::new();
            for p in &parts {
                let item = string("group_by", p)?;
                vars.extend(item.vars);
                labels.extend(item.value.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()));
            }
            let bad = labels.is_empty() || !labels.iter().all(|l| crate::prom::is_label_name(l));
            if bad {
                return Err(invalid(g.span().start, "group_by: give one or more label names, e.g. \"model_name\" or [\"model_name\", \"namespace\"]".into()));
            }
            Some(Item { value: labels, line, column, vars })
        }
    };

    let replica_label = opt("replica_label", &raw.replica_label)?;
    if let Some(r) = &replica_label {
        if !crate::prom::is_replica_label(r.value.trim()) {
            return Err(at(&shown, r, format!("replica_label {:?}: give one label name, e.g. \"instance\" or \"pod\"", r.value)));
        }
    }

    let duration = |key: &str, s: &Option<Spanned<String>>| -> Result<Option<Item<Duration>>, ConfigError> {
        let Some(item) = opt(key, s)? else { return Ok(None) };
        let d = humantime::parse_duration(item.value.trim())
            .map_err(|e| at(&shown, &item, format!("{key} {:?}: {e} (write e.g. 30m, 2h, 1d)", item.value)))?;
        if d.is_zero() {
            return Err(at(&shown, &item, format!("{key}: must be longer than zero")));
        }
        Ok(Some(Item { value: d, line: item.line, column: item.column, vars: item.vars }))
    };
    let window = duration("window", &raw.window)?;
    let baseline = duration("baseline", &raw.baseline)?;
    let profile = opt("profile", &raw.profile)?;

    let mut thresholds = Vec::new();
    for (name, value) in &raw.thresholds {
        let key = format!("thresholds.{}", name.get_ref());
        let (v, written, vars) = match value.get_ref() {
            toml::Value::Integer(i) => (*i as f64, i.to_string(), vec![]),
            toml::Value::Float(f) => (*f, f.to_string(), vec![]),
            toml::Value::String(s) => {
                let item = string(&key, &Spanned::new(value.span(), s.clone()))?;
                let v = crate::rules::expr::parse_quantity(item.value.trim())
                    .map_err(|e| at(&shown, &item, format!("{key}: {}", e.message)))?;
                (v, item.value.trim().to_string(), item.vars)
            }
            _ => return Err(invalid(value.span().start, format!("{key}: give a number or a quantity such as \"1.5s\" or \"90%\""))),
        };
        if !v.is_finite() {
            return Err(invalid(value.span().start, format!("{key}: must be a finite number")));
        }
        let (line, column) = line_col(text, name.span().start);
        thresholds.push(Item { value: (name.get_ref().clone(), v, written), line, column, vars });
    }

    let (mut rules_dir, mut rules_enabled, mut rules_disabled) = (None, None, Vec::new());
    if let Some(r) = &raw.rules {
        rules_dir = path_item("rules.dir", &r.dir)?;
        let ids = |key: &str, list: &[Spanned<String>]| -> Result<Vec<Item<String>>, ConfigError> {
            list.iter().map(|s| string(key, s)).collect()
        };
        if let Some(list) = &r.enabled {
            rules_enabled = Some(ids("rules.enabled", list)?);
        }
        rules_disabled = ids("rules.disabled", &r.disabled)?;
        for d in &rules_disabled {
            if rules_enabled.as_ref().is_some_and(|e| e.iter().any(|x| x.value == d.value)) {
                return Err(at(&shown, d, format!("rules.disabled: {} is also in rules.enabled; keep it in one list", d.value)));
            }
        }
    }

    Ok(ConfigFile {
        path: path.to_path_buf(),
        found: found.to_string(),
        source,
        selector,
        group_by,
        replica_label,
        window,
        baseline,
        profile,
        thresholds,
        rules_dir,
        rules_enabled,
        rules_disabled,
    })
}

fn at<T>(path: &str, item: &Item<T>, message: String) -> ConfigError {
    ConfigError::Invalid { path: path.to_string(), line: item.line, column: item.column, message }
}

/// The key written on the line holding `byte` (`window` in `window = 30`), if the line has one.
fn key_on_line(src: &str, byte: usize) -> Option<String> {
    let byte = byte.min(src.len());
    let start = src.get(..byte)?.rfind('\n').map_or(0, |i| i + 1);
    let line = src.get(start..)?.lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('#') && !key.starts_with('[')).then(|| key.to_string())
}

fn line_col(src: &str, byte: usize) -> (usize, usize) {
    let byte = byte.min(src.len());
    let before = src.get(..byte).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    (line, col)
}

/// Replace every `${NAME}` with the variable's value; `$${` is a literal `${`, any other `$` stays.
/// Returns the text and the names used. An unset variable or a malformed reference is an error.
pub fn expand(raw: &str, env: Env) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(raw.len());
    let mut vars = Vec::new();
    let mut rest = raw;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else {
                return Err(format!("\"${{\" is not closed; write ${{NAME}} (or $${{ for a literal \"${{\") in {raw:?}"));
            };
            let name = &tail[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(format!("${{{name}}} is not a variable reference; a name is letters, digits and '_'"));
            }
            match env(name) {
                Some(v) => out.push_str(&v),
                None => return Err(format!("${{{name}}} is not set; set the environment variable or remove the reference")),
            }
            vars.push(name.to_string());
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok((out, vars))
}

/// `"${NAME}"` and nothing else.
fn is_single_reference(raw: &str) -> bool {
    let t = raw.trim();
    t.starts_with("${") && t.ends_with('}') && t[2..t.len() - 1].chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && t.len() > 3
}

/// Header names whose values are credentials, which the file may only reference.
fn is_credential_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(n.as_str(), "authorization" | "proxy-authorization" | "cookie")
        || ["key", "token", "secret", "password", "auth"].iter().any(|w| n.contains(w))
}

/// Whether a base URL carries `user:pass@` or `user@` in its authority.
fn url_has_credentials(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#']).next().unwrap_or("").contains('@')
}

/// A usable http(s) URL, whose password (if any) came from `${VAR}` rather than the file's text.
fn check_url(raw: &str, expanded: &str) -> Result<(), String> {
    let u = url::Url::parse(expanded.trim())
        .map_err(|e| format!("{e}; give a base URL such as \"https://prometheus.example/prometheus\""))?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(format!("the scheme is {:?}; use http:// or https://", u.scheme()));
    }
    if url_has_credentials(raw) {
        let authority = raw.split_once("://").map_or(raw, |(_, r)| r).split(['/', '?', '#']).next().unwrap_or("");
        let userinfo = authority.rsplit_once('@').map_or("", |(u, _)| u);
        if let Some((_, password)) = userinfo.split_once(':') {
            if !is_single_reference(password) {
                return Err(
                    "the password in user:password@ cannot be written in the file; write \
                     https://user:${PROM_PASSWORD}@host, or use basic_auth_user with basic_auth_password_file"
                        .into(),
                );
            }
        }
    }
    Ok(())
}

/// Where an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Flag(&'static str),
    Env(&'static str),
    File { line: usize, vars: Vec<String> },
    Default,
}

/// One line of `config show`.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    /// Already masked when secret.
    pub value: String,
    pub origin: Origin,
}

/// The merged configuration, for `config show`.
#[derive(Debug, Clone)]
pub struct Effective {
    pub file: Option<(PathBuf, String)>,
    pub searched: Vec<PathBuf>,
    pub entries: Vec<Entry>,
}

/// What the run is, which decides what the file may fill in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `explain` (and `config show`).
    Explain,
    /// `check`: the deploy time decides the window and the baseline.
    Check,
    /// `config show`: as `explain`, but a file the configuration names that does not exist is shown
    /// as such rather than stopping the listing.
    Show,
}

/// Read the configuration file (if any) and merge it under the command line; flags the user gave
/// win. Checks the file's profile, thresholds and rule ids against the rules in force.
pub fn configure(args: ExplainArgs, lookup: &Lookup, mode: Mode) -> Result<ExplainArgs, ConfigError> {
    let env = |k: &str| std::env::var(k).ok();
    let file = load(lookup, &env)?;
    let (args, _) = resolve(args, file.as_ref(), &env, mode)?;
    Ok(args)
}

/// `vllm-diag config show`: the effective configuration with origins, secrets masked.
pub fn show(args: ExplainArgs, lookup: &Lookup) -> Result<String, ConfigError> {
    let env = |k: &str| std::env::var(k).ok();
    let file = load(lookup, &env)?;
    let (_, effective) = resolve(args, file.as_ref(), &env, Mode::Show)?;
    let searched = if lookup.disabled || lookup.explicit.is_some() { vec![] } else { candidates(&env).into_iter().map(|(p, _)| p).collect() };
    Ok(render_show(&Effective { searched, ..effective }, lookup))
}

/// Merge the file under the command line. Returns the arguments to run with and, for `config show`,
/// every setting with its origin.
pub fn resolve(mut args: ExplainArgs, file: Option<&ConfigFile>, env: Env, mode: Mode) -> Result<(ExplainArgs, Effective), ConfigError> {
    let env_set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    let mut entries: Vec<Entry> = Vec::new();
    let mut applied = Applied { file: file.map(|f| f.path.clone()), ..Applied::default() };
    let none = SourceSection::default();
    let src = file.map_or(&none, |f| &f.source);
    let shown = file.map(|f| f.path.display().to_string()).unwrap_or_default();
    let from = |line: usize, vars: &[String]| Origin::File { line, vars: vars.to_vec() };
    let mut push = |key: &str, value: String, origin: Origin| entries.push(Entry { key: key.to_string(), value, origin });
    // The file does not place windows for a replay (the recording does), a scrape (it samples now)
    // or check (the deploy time does).
    let windows_apply = mode != Mode::Check && args.replay.is_none() && args.scrape.is_empty();

    // Where the metrics are.
    let url_origin = if args.given.flag("prometheus") {
        Origin::Flag("--prometheus")
    } else if args.given.env.contains("prometheus") || env_set(ENV_PROMETHEUS_URL) {
        Origin::Env(ENV_PROMETHEUS_URL)
    } else if let Some(u) = &src.prometheus {
        args.prometheus = u.value.trim().to_string();
        from(u.line, &u.vars)
    } else {
        Origin::Default
    };
    push("source.prometheus", mask_url(&args.prometheus), url_origin.clone());
    // The file's headers and credentials were written for the file's server: when a flag or the
    // environment points elsewhere, they are not sent there.
    let elsewhere = src.prometheus.as_ref().is_some_and(|u| {
        !matches!(url_origin, Origin::File { .. }) && u.value.trim().trim_end_matches('/') != args.prometheus.trim().trim_end_matches('/')
    });
    if elsewhere {
        push("source.headers, credentials", "(the file's are not sent: the URL is not the file's)".into(), url_origin.clone());
    }

    let c = &mut args.connection;
    let tenant_flag = c.tenant.is_some();
    let flag_names: BTreeSet<String> = c
        .headers
        .iter()
        .filter_map(|h| h.split_once(':').map(|(n, _)| n.trim().to_ascii_lowercase()))
        .collect();
    let tenant_by_header = flag_names.contains(&TENANT_HEADER.to_ascii_lowercase());
    let origin = match (&c.tenant, &src.tenant) {
        (Some(_), _) => Origin::Flag("--tenant"),
        // A --header X-Scope-OrgID replaces the file's tenant as --tenant would.
        (None, Some(_)) if tenant_by_header => Origin::Flag("--header"),
        (None, Some(t)) => {
            c.tenant = Some(t.value.clone());
            from(t.line, &t.vars)
        }
        _ => Origin::Default,
    };
    push("source.tenant", c.tenant.clone().unwrap_or_else(|| "(none)".into()), origin);

    // Headers: the file's, except those a --header (or --tenant, for X-Scope-OrgID) replaces. They
    // go after the flags' so that an error about `--header #2` still means the second flag.
    let mut file_headers = Vec::new();
    for (name, value) in &src.headers {
        let lower = name.to_ascii_lowercase();
        if elsewhere || flag_names.contains(&lower) || (tenant_flag && lower == TENANT_HEADER.to_ascii_lowercase()) {
            continue;
        }
        file_headers.push(format!("{name}: {}", value.value.expose()));
        push(&format!("source.headers.{name}"), "***".into(), from(value.line, &value.vars));
    }
    for h in &c.headers {
        if let Some((n, _)) = h.split_once(':') {
            push(&format!("source.headers.{}", n.trim()), "***".into(), Origin::Flag("--header"));
        }
    }
    if !file_headers.is_empty() {
        c.typed_headers = Some(c.headers.len());
    }
    c.headers.append(&mut file_headers);

    let origin = match (&c.ca_file, &src.ca_file) {
        (Some(_), _) => Origin::Flag("--ca-file"),
        (None, Some(p)) => {
            c.ca_file = Some(p.value.clone());
            from(p.line, &p.vars)
        }
        _ => Origin::Default,
    };
    push("source.ca_file", show_path(&c.ca_file), origin);
    let (cert_origin, key_origin) = match (&c.cert_file, &c.key_file, &src.cert_file, &src.key_file) {
        (None, None, Some(cf), Some(kf)) => {
            c.cert_file = Some(cf.value.clone());
            c.key_file = Some(kf.value.clone());
            (from(cf.line, &cf.vars), from(kf.line, &kf.vars))
        }
        (None, None, _, _) => (Origin::Default, Origin::Default),
        _ => (Origin::Flag("--cert-file"), Origin::Flag("--key-file")),
    };
    push("source.cert_file", show_path(&c.cert_file), cert_origin);
    push("source.key_file", show_path(&c.key_file), key_origin);
    let origin = match (c.insecure_skip_verify, &src.insecure_skip_verify) {
        (true, _) => Origin::Flag("--insecure-skip-verify"),
        (false, Some(b)) => {
            c.insecure_skip_verify = b.value;
            from(b.line, &b.vars)
        }
        _ => Origin::Default,
    };
    push("source.insecure_skip_verify", c.insecure_skip_verify.to_string(), origin);

    // Credentials come whole from one place.
    let flag_credentials = c.bearer_token_file.is_some()
        || c.basic_auth_user.is_some()
        || c.basic_auth_password_file.is_some()
        || (!matches!(url_origin, Origin::File { .. }) && url_has_credentials(&args.prometheus));
    let env_token = env_set(ENV_BEARER_TOKEN);
    let use_file = !elsewhere && !flag_credentials && !env_token && src.has_credentials();
    let mut token_origin = if c.bearer_token_file.is_some() { Origin::Flag("--bearer-token-file") } else { Origin::Default };
    let mut user_origin = if c.basic_auth_user.is_some() { Origin::Flag("--basic-auth-user") } else { Origin::Default };
    let mut pw_file_origin =
        if c.basic_auth_password_file.is_some() { Origin::Flag("--basic-auth-password-file") } else { Origin::Default };
    let mut token_value = "(none)".to_string();
    let mut token_value_origin = Origin::Default;
    let mut password = "(none)".to_string();
    let mut password_origin = Origin::Default;
    if !flag_credentials && env_token {
        token_value = "***".into();
        token_value_origin = Origin::Env(ENV_BEARER_TOKEN);
    }
    if use_file {
        if let Some(p) = &src.bearer_token_file {
            c.bearer_token_file = Some(p.value.clone());
            token_origin = from(p.line, &p.vars);
        }
        if let Some(t) = &src.bearer_token {
            applied.bearer_token = Some(t.value.clone());
            token_value = "***".into();
            token_value_origin = from(t.line, &t.vars);
        }
        if let Some(u) = &src.basic_auth_user {
            c.basic_auth_user = Some(u.value.clone());
            user_origin = from(u.line, &u.vars);
            if env_set(ENV_BASIC_AUTH_PASSWORD) {
                password = "***".into();
                password_origin = Origin::Env(ENV_BASIC_AUTH_PASSWORD);
            } else if let Some(p) = &src.basic_auth_password_file {
                c.basic_auth_password_file = Some(p.value.clone());
                pw_file_origin = from(p.line, &p.vars);
            } else if let Some(p) = &src.basic_auth_password {
                applied.basic_auth_password = Some(p.value.clone());
                password = "***".into();
                password_origin = from(p.line, &p.vars);
            }
        }
    } else if c.basic_auth_user.is_some() && c.basic_auth_password_file.is_none() && env_set(ENV_BASIC_AUTH_PASSWORD) {
        password = "***".into();
        password_origin = Origin::Env(ENV_BASIC_AUTH_PASSWORD);
    }
    push("source.bearer_token_file", show_path(&c.bearer_token_file), token_origin);
    push("source.bearer_token", token_value, token_value_origin);
    push("source.basic_auth_user", c.basic_auth_user.clone().unwrap_or_else(|| "(none)".into()), user_origin);
    push("source.basic_auth_password_file", show_path(&c.basic_auth_password_file), pw_file_origin);
    push("source.basic_auth_password", password, password_origin);

    // What to look at.
    let origin = match (&args.selector, file.and_then(|f| f.selector.as_ref())) {
        (Some(_), _) => Origin::Flag("--selector"),
        (None, Some(s)) if windows_apply => {
            args.selector = Some(s.value.clone());
            from(s.line, &s.vars)
        }
        _ => Origin::Default,
    };
    push("selector", args.selector.clone().filter(|s| !s.trim().is_empty()).unwrap_or_else(|| "(none)".into()), origin);
    let origin = match (args.given.flag("group_by"), file.and_then(|f| f.group_by.as_ref())) {
        (true, _) => Origin::Flag("--group-by"),
        (false, Some(g)) => {
            args.group_by = g.value.join(",");
            from(g.line, &g.vars)
        }
        _ => Origin::Default,
    };
    push("group_by", args.group_by.clone(), origin);
    let origin = match (args.given.flag("replica_label"), file.and_then(|f| f.replica_label.as_ref())) {
        (true, _) => Origin::Flag("--replica-label"),
        (false, Some(r)) => {
            args.replica_label = r.value.trim().to_string();
            from(r.line, &r.vars)
        }
        _ => Origin::Default,
    };
    push("replica_label", args.replica_label.clone(), origin);
    let origin = match (args.window, file.and_then(|f| f.window.as_ref())) {
        (Some(_), _) => Origin::Flag("--window"),
        (None, Some(w)) if windows_apply => {
            args.window = Some(w.value);
            from(w.line, &w.vars)
        }
        _ => Origin::Default,
    };
    push("window", humantime::format_duration(args.window.unwrap_or(Duration::from_secs(1800))).to_string(), origin);
    let origin = match (args.baseline, file.and_then(|f| f.baseline.as_ref())) {
        (Some(_), _) => Origin::Flag("--baseline"),
        (None, Some(b)) if windows_apply => {
            args.baseline = Some(b.value);
            from(b.line, &b.vars)
        }
        _ => Origin::Default,
    };
    let baseline = match args.baseline {
        Some(b) => humantime::format_duration(b).to_string(),
        None => "the window's length (the window right before)".into(),
    };
    push("baseline", baseline, origin);

    // Rules.
    let origin = match (&args.rules, file.and_then(|f| f.rules_dir.as_ref())) {
        (Some(_), _) => Origin::Flag("--rules"),
        (None, Some(d)) => {
            args.rules = Some(d.value.clone());
            from(d.line, &d.vars)
        }
        _ => Origin::Default,
    };
    push("rules.dir", args.rules.as_ref().map_or("(built-in pack only)".into(), |p| p.display().to_string()), origin);

    let needs_rules = file.is_some_and(|f| {
        f.profile.is_some() || !f.thresholds.is_empty() || f.rules_enabled.is_some() || !f.rules_disabled.is_empty()
    });
    let set = if needs_rules { Some(crate::rules::load_with_overrides(args.rules.as_deref())?) } else { None };
    let invalid = |line: usize, column: usize, message: String| ConfigError::Invalid { path: shown.clone(), line, column, message };

    let origin = match (&args.profile, file.and_then(|f| f.profile.as_ref()), &set) {
        (Some(_), _, _) => Origin::Flag("--profile"),
        (None, Some(p), Some(set)) => {
            if !set.profiles.contains_key(&p.value) {
                return Err(invalid(
                    p.line,
                    p.column,
                    format!("profile {:?}: no such profile. Known profiles: {}", p.value, set.profiles.keys().cloned().collect::<Vec<_>>().join(", ")),
                ));
            }
            args.profile = Some(p.value.clone());
            from(p.line, &p.vars)
        }
        _ => Origin::Default,
    };
    push("profile", args.profile.clone().unwrap_or_else(|| "chat".into()), origin);

    if let (Some(f), Some(set)) = (file, &set) {
        for t in &f.thresholds {
            let (name, value, written) = &t.value;
            if !set.thresholds.contains_key(name) {
                return Err(invalid(
                    t.line,
                    t.column,
                    format!("thresholds.{name}: no such threshold. Known thresholds: {}", set.thresholds.keys().cloned().collect::<Vec<_>>().join(", ")),
                ));
            }
            applied.thresholds.push((name.clone(), *value));
            push(&format!("thresholds.{name}"), written.clone(), from(t.line, &t.vars));
        }
        let known = |i: &Item<String>, key: &str| -> Result<(), ConfigError> {
            if set.rule(&i.value).is_none() {
                return Err(invalid(
                    i.line,
                    i.column,
                    format!("{key}: no rule {:?}. Known rules: {}", i.value, set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")),
                ));
            }
            Ok(())
        };
        if let Some(list) = &f.rules_enabled {
            for i in list {
                known(i, "rules.enabled")?;
            }
            applied.enabled = Some(list.iter().map(|i| i.value.clone()).collect());
            let line = list.first().map_or(0, |i| i.line);
            push("rules.enabled", list.iter().map(|i| i.value.as_str()).collect::<Vec<_>>().join(", "), from(line, &[]));
        }
        for i in &f.rules_disabled {
            known(i, "rules.disabled")?;
            applied.disabled.insert(i.value.clone());
        }
        if !applied.disabled.is_empty() || applied.enabled.is_some() {
            let mut probe = set.clone();
            let off = applied.apply_to_rules(&mut probe);
            let line = f.rules_disabled.first().or(f.rules_enabled.as_ref().and_then(|l| l.first())).map_or(0, |i| i.line);
            push("rules.disabled", if off.is_empty() { "(none)".into() } else { off.join(", ") }, from(line, &[]));
        }
    }

    // Paths named by the file must exist when they are used, reported against the file's line.
    if let Some(f) = file {
        let used = [
            (&args.connection.ca_file, &f.source.ca_file, "source.ca_file"),
            (&args.connection.cert_file, &f.source.cert_file, "source.cert_file"),
            (&args.connection.key_file, &f.source.key_file, "source.key_file"),
            (&args.connection.bearer_token_file, &f.source.bearer_token_file, "source.bearer_token_file"),
            (&args.connection.basic_auth_password_file, &f.source.basic_auth_password_file, "source.basic_auth_password_file"),
            (&args.rules, &f.rules_dir, "rules.dir"),
        ];
        for (in_use, item, key) in used {
            if let (Some(p), Some(i)) = (in_use, item) {
                if p == &i.value && !p.exists() {
                    let why = format!("{} does not exist (relative paths are read from the file's directory)", p.display());
                    if mode != Mode::Show {
                        return Err(invalid(i.line, i.column, format!("{key}: {why}")));
                    }
                    if let Some(e) = entries.iter_mut().find(|e| e.key == key) {
                        e.value = format!("{} (DOES NOT EXIST)", e.value);
                    }
                }
            }
        }
    }

    args.config = applied;
    let entries = entries
        .into_iter()
        .map(|mut e| {
            if let Origin::File { line, .. } = &mut e.origin {
                if *line == 0 {
                    *line = 1;
                }
            }
            e
        })
        .collect();
    Ok((args, Effective { file: file.map(|f| (f.path.clone(), f.found.clone())), searched: vec![], entries }))
}

fn show_path(p: &Option<PathBuf>) -> String {
    p.as_ref().map_or("(none)".into(), |p| p.display().to_string())
}

/// The URL with any password replaced by `***`.
fn mask_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or("");
            format!("{scheme}://{user}:***@{}", &rest[at + 1..])
        }
        None => url.to_string(),
    }
}

fn render_show(e: &Effective, lookup: &Lookup) -> String {
    let mut out = String::new();
    match &e.file {
        Some((path, found)) => out.push_str(&format!("Configuration file: {} (from {found})\n", path.display())),
        None if lookup.disabled => out.push_str("Configuration file: none (--no-config)\n"),
        None => {
            let looked: Vec<String> = e.searched.iter().map(|p| p.display().to_string()).collect();
            out.push_str(&format!("Configuration file: none found (looked for {})\n", looked.join(", ")));
        }
    }
    out.push('\n');
    let file = e.file.as_ref().map(|(p, _)| p.display().to_string()).unwrap_or_default();
    let origin = |o: &Origin| match o {
        Origin::Flag(f) => format!("flag {f}"),
        Origin::Env(v) => format!("env ${v}"),
        Origin::File { line, vars } if vars.is_empty() => format!("file {file}:{line}"),
        Origin::File { line, vars } => {
            format!("file {file}:{line} (via {})", vars.iter().map(|v| format!("${{{v}}}")).collect::<Vec<_>>().join(", "))
        }
        Origin::Default => "default".to_string(),
    };
    let rows: Vec<(String, String, String)> = e.entries.iter().map(|x| (x.key.clone(), one_line(&x.value), origin(&x.origin))).collect();
    let kw = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0).max("setting".len());
    let vw = rows.iter().map(|r| r.1.chars().count()).max().unwrap_or(0).max("value".len()).min(60);
    out.push_str(&format!("{:<kw$}  {:<vw$}  {}\n", "setting", "value", "from"));
    for (k, v, o) in rows {
        out.push_str(&format!("{k:<kw$}  {v:<vw$}  {o}\n"));
    }
    out
}

/// Control characters never reach the terminal.
fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k: &str| map.get(k).cloned()
    }

    fn parse_text(text: &str, env: &[(&str, &str)]) -> Result<ConfigFile, ConfigError> {
        parse(Path::new("/etc/team/vllm-diag.toml"), "--config", text, &env_of(env))
    }

    fn error_of(text: &str, env: &[(&str, &str)]) -> String {
        parse_text(text, env).expect_err("an invalid file").to_string()
    }

    fn explain_args(argv: &[&str]) -> ExplainArgs {
        let mut full = vec!["vllm-diag", "explain"];
        full.extend_from_slice(argv);
        match crate::cli::parse_from(full).command {
            crate::cli::Command::Explain(a) => a,
            other => panic!("not explain: {other:?}"),
        }
    }

    #[test]
    fn variables_expand_and_dollar_dollar_brace_stays_literal() {
        let env = env_of(&[("NS", "prod"), ("EMPTY", "")]);
        assert_eq!(expand("namespace=\"${NS}\"", &env).unwrap(), ("namespace=\"prod\"".to_string(), vec!["NS".to_string()]));
        assert_eq!(expand("a$${NS}b", &env).unwrap().0, "a${NS}b");
        assert_eq!(expand("x=~\".*$\" ${EMPTY}", &env).unwrap().0, "x=~\".*$\" ");
        assert!(expand("${MISSING}", &env).unwrap_err().contains("${MISSING} is not set"));
        assert!(expand("${NS", &env).unwrap_err().contains("not closed"));
        assert!(expand("${1X}", &env).unwrap_err().contains("not a variable reference"));
    }

    #[test]
    fn an_unset_variable_names_itself_and_the_line() {
        let e = error_of("window = \"30m\"\n[source]\nprometheus = \"${PROM_URL}\"\n", &[]);
        assert!(e.contains("/etc/team/vllm-diag.toml:3:") && e.contains("${PROM_URL} is not set"), "{e}");
    }

    #[test]
    fn unknown_keys_are_errors_with_their_line() {
        let e = error_of("window = \"30m\"\nwindwo = \"1h\"\n", &[]);
        assert!(e.contains(":2:1:") && e.contains("unknown field `windwo`"), "{e}");
        let e = error_of("[source]\nprometheus = \"http://p:9090\"\npromethues = \"x\"\n", &[]);
        assert!(e.contains(":3:1:") && e.contains("promethues"), "{e}");
        let e = error_of("[rules]\ndisable = [\"slow-decode\"]\n", &[]);
        assert!(e.contains(":2:1:") && e.contains("disable"), "{e}");
    }

    #[test]
    fn secrets_written_in_the_file_are_refused_but_references_are_read() {
        let e = error_of("[source]\nbearer_token = \"tok-hunter2\"\n", &[]);
        assert!(e.contains(":2:") && e.contains("bearer_token_file") && !e.contains("hunter2"), "{e}");
        let e = error_of("[source]\nbasic_auth_user = \"u\"\nbasic_auth_password = \"pw-hunter2\"\n", &[]);
        assert!(e.contains(":3:") && !e.contains("hunter2"), "{e}");
        let e = error_of("[source]\nheaders = { Authorization = \"Bearer hunter2\" }\n", &[]);
        assert!(e.contains("credential header") && !e.contains("hunter2"), "{e}");
        let e = error_of("[source]\nprometheus = \"https://u:hunter2@p.example\"\n", &[]);
        assert!(e.contains("password") && !e.contains("hunter2"), "{e}");

        let f = parse_text(
            "[source]\nprometheus = \"https://u:${PW}@p.example\"\nheaders = { X-Api-Key = \"${KEY}\", X-Team = \"infra\" }\n",
            &[("PW", "pw-1"), ("KEY", "k-1")],
        )
        .unwrap();
        assert_eq!(f.source.prometheus.unwrap().value, "https://u:pw-1@p.example");
        let headers: Vec<(String, String)> = f.source.headers.iter().map(|(n, v)| (n.clone(), v.value.expose().to_string())).collect();
        assert_eq!(headers, vec![("X-Api-Key".into(), "k-1".into()), ("X-Team".into(), "infra".into())]);
        let f = parse_text("[source]\nbearer_token = \"${TOK}\"\n", &[("TOK", "t-1\n")]).unwrap();
        assert_eq!(f.source.bearer_token.unwrap().value.expose(), "t-1");
    }

    #[test]
    fn relative_paths_are_read_from_the_files_directory() {
        let f = parse_text("[source]\nca_file = \"ca.pem\"\nbearer_token_file = \"/run/tok\"\n[rules]\ndir = \"rules\"\n", &[]).unwrap();
        assert_eq!(f.source.ca_file.unwrap().value, PathBuf::from("/etc/team/ca.pem"));
        assert_eq!(f.source.bearer_token_file.unwrap().value, PathBuf::from("/run/tok"));
        assert_eq!(f.rules_dir.unwrap().value, PathBuf::from("/etc/team/rules"));
    }

    #[test]
    fn bad_values_are_errors_at_their_line() {
        for (text, needle, line) in [
            ("window = \"soon\"\n", "window \"soon\"", 1),
            ("\nbaseline = \"0s\"\n", "longer than zero", 2),
            ("selector = 'namespace=prod'\n", "selector", 1),
            ("group_by = [\"model name\"]\n", "group_by", 1),
            ("group_by = 3\n", "group_by", 1),
            ("\nreplica_label = \"pod name\"\n", "replica_label \"pod name\"", 2),
            ("[source]\nprometheus = \"ftp://x\"\n", "http:// or https://", 2),
            ("[source]\ncert_file = \"c.pem\"\n", "key_file", 2),
            ("[source]\ntenant = \"a||b\"\n", "source.tenant", 2),
            ("[thresholds]\nttft_p95_high = \"fast\"\n", "thresholds.ttft_p95_high", 2),
            ("[rules]\nenabled = [\"slow-decode\"]\ndisabled = [\"slow-decode\"]\n", "also in rules.enabled", 3),
            ("[source]\nbearer_token_file = \"t\"\nbasic_auth_user = \"u\"\n", "a server takes one", 2),
        ] {
            let e = error_of(text, &[]);
            assert!(e.contains(needle) && e.contains(&format!("vllm-diag.toml:{line}:")), "{text:?} gave {e}");
        }
    }

    #[test]
    fn group_by_takes_a_list_or_a_comma_separated_string() {
        assert_eq!(parse_text("group_by = [\"model_name\", \"namespace\"]\n", &[]).unwrap().group_by.unwrap().value, ["model_name", "namespace"]);
        assert_eq!(parse_text("group_by = \"model_name, pod\"\n", &[]).unwrap().group_by.unwrap().value, ["model_name", "pod"]);
    }

    #[test]
    fn a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() {
        let file = parse_text("window = \"2h\"\n[source]\nprometheus = \"http://from-file:9090\"\n", &[]).unwrap();
        let origin = |e: &Effective, key: &str| e.entries.iter().find(|x| x.key == key).map(|x| (x.value.clone(), x.origin.clone())).unwrap();

        let (args, e) = resolve(explain_args(&[]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.prometheus, "http://from-file:9090");
        assert_eq!(origin(&e, "source.prometheus").1, Origin::File { line: 3, vars: vec![] });
        assert_eq!(args.window, Some(Duration::from_secs(7200)));

        let (args, e) = resolve(explain_args(&[]), Some(&file), &env_of(&[(ENV_PROMETHEUS_URL, "http://from-env:9090")]), Mode::Explain).unwrap();
        assert_eq!(origin(&e, "source.prometheus").1, Origin::Env(ENV_PROMETHEUS_URL));
        assert_ne!(args.prometheus, "http://from-file:9090");

        let (args, e) = resolve(explain_args(&["--prometheus", "http://from-flag:9090", "--window", "5m"]), Some(&file), &env_of(&[(ENV_PROMETHEUS_URL, "x")]), Mode::Explain).unwrap();
        assert_eq!((args.prometheus.as_str(), args.window), ("http://from-flag:9090", Some(Duration::from_secs(300))));
        assert_eq!(origin(&e, "source.prometheus").1, Origin::Flag("--prometheus"));
        assert_eq!(origin(&e, "window").1, Origin::Flag("--window"));

        let (args, e) = resolve(explain_args(&[]), None, &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.prometheus, DEFAULT_PROMETHEUS);
        assert_eq!(origin(&e, "source.prometheus"), (DEFAULT_PROMETHEUS.to_string(), Origin::Default));
        assert_eq!(origin(&e, "window"), ("30m".to_string(), Origin::Default));
    }

    #[test]
    fn a_flag_given_with_the_default_value_still_beats_the_file() {
        let file = parse_text("group_by = \"namespace\"\n", &[]).unwrap();
        let (args, _) = resolve(explain_args(&["--group-by", "model_name"]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.group_by, "model_name");
        let (args, _) = resolve(explain_args(&[]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.group_by, "namespace");

        let origin = |e: &Effective, key: &str| e.entries.iter().find(|x| x.key == key).map(|x| (x.value.clone(), x.origin.clone())).unwrap();
        let file = parse_text("replica_label = \"pod\"\n", &[]).unwrap();
        let (args, e) = resolve(explain_args(&[]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.replica_label, "pod");
        assert_eq!(origin(&e, "replica_label").0, "pod");
        let (args, e) = resolve(explain_args(&["--replica-label", "instance"]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.replica_label, "instance");
        assert_eq!(origin(&e, "replica_label").1, Origin::Flag("--replica-label"));
    }

    #[test]
    fn credentials_come_whole_from_one_place() {
        let file = parse_text("[source]\nbasic_auth_user = \"alice\"\nbasic_auth_password = \"${PW}\"\n", &[("PW", "pw-file")]).unwrap();
        let (args, _) = resolve(explain_args(&[]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.connection.basic_auth_user.as_deref(), Some("alice"));
        assert_eq!(args.config.env_fallback(ENV_BASIC_AUTH_PASSWORD).as_deref(), Some("pw-file"));

        // A token flag replaces the file's basic auth entirely.
        let (args, _) = resolve(explain_args(&["--bearer-token-file", "/t"]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert!(args.connection.basic_auth_user.is_none() && args.config.basic_auth_password.is_none());
        // So does a token in the environment.
        let (args, _) = resolve(explain_args(&[]), Some(&file), &env_of(&[(ENV_BEARER_TOKEN, "tok")]), Mode::Explain).unwrap();
        assert!(args.connection.basic_auth_user.is_none());
        // The environment's password beats the file's.
        let (args, e) = resolve(explain_args(&[]), Some(&file), &env_of(&[(ENV_BASIC_AUTH_PASSWORD, "pw-env")]), Mode::Explain).unwrap();
        assert!(args.config.basic_auth_password.is_none());
        let pw = e.entries.iter().find(|x| x.key == "source.basic_auth_password").unwrap();
        assert_eq!((pw.value.as_str(), &pw.origin), ("***", &Origin::Env(ENV_BASIC_AUTH_PASSWORD)));
    }

    #[test]
    fn flag_headers_keep_their_numbers_and_replace_the_files_tenant_and_headers() {
        let file = parse_text("[source]\ntenant = \"team-a\"\nheaders = { X-Team = \"infra\", X-Other = \"o\" }\n", &[]).unwrap();
        let (args, _) = resolve(explain_args(&["--header", "X-Team: ml", "--header", "X-Scope-OrgID: team-b"]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.connection.headers, ["X-Team: ml", "X-Scope-OrgID: team-b", "X-Other: o"]);
        assert_eq!(args.connection.tenant, None);
        let (args, _) = resolve(explain_args(&["--tenant", "team-c"]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!(args.connection.tenant.as_deref(), Some("team-c"));
    }

    #[test]
    fn the_files_headers_and_credentials_are_never_sent_to_another_server() {
        let file = parse_text(
            "[source]\nprometheus = \"https://prom.team\"\nbearer_token = \"${TOK}\"\nheaders = { X-Api-Key = \"${KEY}\" }\n",
            &[("TOK", "t"), ("KEY", "k")],
        )
        .unwrap();
        let (args, _) = resolve(explain_args(&[]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert!(args.config.bearer_token.is_some() && args.connection.headers.len() == 1);
        let (args, _) = resolve(explain_args(&["--prometheus", "https://prom.team/"]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert!(args.config.bearer_token.is_some(), "the same server, given again, keeps them");
        for argv in [&["--prometheus", "http://elsewhere:9090"][..], &[][..]] {
            let env = if argv.is_empty() { env_of(&[(ENV_PROMETHEUS_URL, "http://elsewhere:9090")]) } else { env_of(&[]) };
            let (args, e) = resolve(explain_args(argv), Some(&file), &env, Mode::Explain).unwrap();
            assert!(args.config.bearer_token.is_none() && args.connection.headers.is_empty(), "{argv:?}");
            assert!(e.entries.iter().any(|x| x.value.contains("not sent")));
        }
    }

    #[test]
    fn a_replay_or_a_check_takes_no_windows_from_the_file() {
        let file = parse_text("window = \"2h\"\nbaseline = \"1d\"\nselector = 'namespace=\"prod\"'\n", &[]).unwrap();
        let (args, _) = resolve(explain_args(&["--replay", "r.json"]), Some(&file), &env_of(&[]), Mode::Explain).unwrap();
        assert_eq!((args.window, args.baseline, args.selector), (None, None, None));
        let (args, _) = resolve(explain_args(&[]), Some(&file), &env_of(&[]), Mode::Check).unwrap();
        assert_eq!((args.window, args.baseline), (None, None));
    }

    #[test]
    fn profile_thresholds_and_rule_ids_are_checked_against_the_rules() {
        for (text, needle, line) in [
            ("\nprofile = \"turbo\"\n", "no such profile", 2),
            ("[thresholds]\nno_such = 3\n", "no such threshold", 2),
            ("[rules]\n\ndisabled = [\"slow-decod\"]\n", "no rule \"slow-decod\"", 3),
        ] {
            let file = parse_text(text, &[]).unwrap();
            let e = resolve(explain_args(&[]), Some(&file), &env_of(&[]), Mode::Explain).expect_err(text).to_string();
            assert!(e.contains(needle) && e.contains(&format!(":{line}:")), "{e}");
        }
    }

    #[test]
    fn disabling_a_rule_removes_it_and_keeps_the_chains_it_was_part_of() {
        let mut set = crate::rules::load_builtin().unwrap();
        // Find a chain A -> B -> C in the built-in pack.
        let (a, b, c) = set
            .rules
            .iter()
            .find_map(|a| {
                a.supersedes.iter().find_map(|b| {
                    set.rule(b).and_then(|br| br.supersedes.iter().find(|c| !a.supersedes.contains(c)).map(|c| (a.id.clone(), b.clone(), c.clone())))
                })
            })
            .expect("the built-in pack has a chain of three rules");
        let applied = Applied { disabled: [b.clone()].into(), thresholds: vec![("ttft_p95_high".into(), 1.5)], ..Applied::default() };
        let off = applied.apply_to_rules(&mut set);
        assert_eq!(off, vec![b.clone()]);
        assert!(set.rule(&b).is_none());
        assert!(set.rule(&a).unwrap().supersedes.contains(&c), "{a} no longer absorbs {c}");
        assert_eq!(set.thresholds["ttft_p95_high"], 1.5);

        let mut set = crate::rules::load_builtin().unwrap();
        let all = set.rules.len();
        let only = Applied { enabled: Some(["slow-decode".to_string()].into()), ..Applied::default() };
        assert_eq!(only.apply_to_rules(&mut set).len(), all - 1);
        assert_eq!(set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["slow-decode"]);
    }

    #[test]
    fn the_user_config_directory_follows_xdg_then_home() {
        let c = candidates(&env_of(&[("XDG_CONFIG_HOME", "/x/cfg"), ("HOME", "/home/u")]));
        assert_eq!(c[0].0, PathBuf::from("./vllm-diag.toml"));
        assert_eq!(c[1].0, PathBuf::from("/x/cfg/vllm-diag/vllm-diag.toml"));
        let c = candidates(&env_of(&[("XDG_CONFIG_HOME", "relative"), ("HOME", "/home/u")]));
        assert_eq!(c[1].0, PathBuf::from("/home/u/.config/vllm-diag/vllm-diag.toml"));
        assert_eq!(candidates(&env_of(&[])).len(), 1);
    }

    #[test]
    fn passwords_in_urls_are_masked() {
        assert_eq!(mask_url("https://alice:pw@host/p"), "https://alice:***@host/p");
        assert_eq!(mask_url("http://host:9090/a@b"), "http://host:9090/a@b");
    }

    #[test]
    fn given_flags_are_told_apart_from_defaults() {
        let cli = crate::cli::parse_from(["vllm-diag", "explain", "--group-by", "model_name"]);
        let crate::cli::Command::Explain(a) = cli.command else { panic!() };
        assert!(a.given.flag("group_by") && !a.given.flag("prometheus"));
    }
}
