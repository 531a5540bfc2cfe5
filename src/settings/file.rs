//! The configuration file, `vllm-diag.toml`, read and checked: every value with the line it was
//! written on and the `${VAR}`s it expanded. Nothing here decides precedence; [`super::merge`] does.
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

use super::{ConfigError, Env, Lookup, FILE_NAME};
use crate::source::auth::TENANT_HEADER;
use crate::source::prometheus::Secret;

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
    pub(super) fn has_credentials(&self) -> bool {
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
    /// `[links] graph`: the chart-link template, or `none`.
    pub links_graph: Option<Item<String>>,
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
    links: Option<RawLinks>,
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
struct RawLinks {
    graph: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRules {
    dir: Option<Spanned<String>>,
    enabled: Option<Spanned<Vec<Spanned<String>>>>,
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
        (None, Some(home)) => out.push((Path::new(&home).join(".config").join("vllm-diag").join(FILE_NAME), "~/.config/vllm-diag".into())),
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

/// What the parts of [`parse`] share: the file's name and text, the environment for `${NAME}`, and
/// the directory relative paths start from.
struct Reader<'a> {
    shown: String,
    lines: crate::text::LineIndex<'a>,
    env: Env<'a>,
    base: PathBuf,
}

impl Reader<'_> {
    fn invalid(&self, byte: usize, message: String) -> ConfigError {
        let (line, column) = self.lines.line_col(byte);
        ConfigError::Invalid { path: self.shown.clone(), line, column, message }
    }

    /// `${NAME}` expansion with the position kept, for every string.
    fn string(&self, key: &str, s: &Spanned<String>) -> Result<Item<String>, ConfigError> {
        let (value, vars) = expand(s.get_ref(), self.env).map_err(|m| self.invalid(s.span().start, format!("{key}: {m}")))?;
        let (line, column) = self.lines.line_col(s.span().start);
        Ok(Item { value, line, column, vars })
    }

    fn opt(&self, key: &str, s: &Option<Spanned<String>>) -> Result<Option<Item<String>>, ConfigError> {
        s.as_ref().map(|s| self.string(key, s)).transpose()
    }

    fn path_item(&self, key: &str, s: &Option<Spanned<String>>) -> Result<Option<Item<PathBuf>>, ConfigError> {
        let Some(item) = self.opt(key, s)? else { return Ok(None) };
        if item.value.trim().is_empty() {
            return Err(at(&self.shown, &item, format!("{key} is empty: give a file path")));
        }
        let p = PathBuf::from(&item.value);
        let value = if p.is_absolute() { p } else { self.base.join(p) };
        Ok(Some(Item { value, line: item.line, column: item.column, vars: item.vars }))
    }

    /// A secret must come from the environment: the whole value one `${VAR}` reference.
    fn secret(&self, key: &str, s: &Option<Spanned<String>>, file_key: &str) -> Result<Option<Item<Secret>>, ConfigError> {
        let Some(s) = s else { return Ok(None) };
        if !is_single_reference(s.get_ref()) {
            return Err(self.invalid(
                s.span().start,
                format!(
                    "{key}: a secret cannot be written in the file. Put it in a file and give {file_key} = \"PATH\", \
                     or in an environment variable and write {key} = \"${{VAR}}\""
                ),
            ));
        }
        let item = self.string(key, s)?;
        if item.value.trim().is_empty() {
            return Err(at(&self.shown, &item, format!("{key}: ${{{}}} is empty", item.vars.join(""))));
        }
        Ok(Some(Item { value: Secret::new(item.value.trim()), line: item.line, column: item.column, vars: item.vars }))
    }

    fn duration(&self, key: &str, s: &Option<Spanned<String>>) -> Result<Option<Item<Duration>>, ConfigError> {
        let Some(item) = self.opt(key, s)? else { return Ok(None) };
        let d = crate::units::parse_duration(&item.value).map_err(|e| at(&self.shown, &item, format!("{key} {:?}: {e}", item.value)))?;
        Ok(Some(Item { value: d, line: item.line, column: item.column, vars: item.vars }))
    }
}

/// Parse a file's text. Relative paths in it are relative to the file's directory.
pub fn parse(path: &Path, found: &str, text: &str, env: Env) -> Result<ConfigFile, ConfigError> {
    let r = Reader {
        shown: path.display().to_string(),
        lines: crate::text::LineIndex::new(text),
        env,
        base: path.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let start = e.span().map_or(0, |s| s.start);
        let mut message = e.message().trim().to_string();
        if message.starts_with("unknown field") {
            message.push_str(". See docs/configuration.md for every key");
        } else if let Some(key) = key_on_line(text, start) {
            // toml names the type it wanted, not the key: add it.
            message = format!("{key}: {message}");
        }
        r.invalid(start, message)
    })?;
    let source = match &raw.source {
        Some(s) => parse_source(&r, s)?,
        None => SourceSection::default(),
    };
    let selector = r.opt("selector", &raw.selector)?;
    if let Some(s) = &selector {
        crate::prom::Selector::parse(&s.value).map_err(|e| {
            at(&r.shown, s, format!("selector {:?}: {} at character {}. Expected label matchers such as namespace=\"prod\"", e.input, e.problem, e.column))
        })?;
    }
    let group_by = raw.group_by.as_ref().map(|g| parse_group_by(&r, g)).transpose()?;
    let replica_label = r.opt("replica_label", &raw.replica_label)?;
    if let Some(l) = &replica_label {
        if !crate::prom::is_replica_label(l.value.trim()) {
            return Err(at(&r.shown, l, format!("replica_label {:?}: give one label name, e.g. \"instance\" or \"pod\"", l.value)));
        }
    }
    let window = r.duration("window", &raw.window)?;
    let baseline = r.duration("baseline", &raw.baseline)?;
    let profile = r.opt("profile", &raw.profile)?;
    let thresholds = parse_thresholds(&r, &raw.thresholds)?;
    let (rules_dir, rules_enabled, rules_disabled) = match &raw.rules {
        Some(rules) => parse_rules(&r, rules)?,
        None => (None, None, Vec::new()),
    };
    let links_graph = r.opt("links.graph", &raw.links.as_ref().and_then(|l| l.graph.clone()))?;
    if let Some(g) = links_graph.as_ref().filter(|g| g.value.trim() != "none") {
        crate::render::links::GraphLinks::parse(&g.value).map_err(|e| at(&r.shown, g, format!("links.graph: {e}")))?;
    }
    Ok(ConfigFile {
        links_graph,
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

/// The `[source]` table: URL, tenant, headers, TLS files and credentials, each checked on its own
/// and against the others.
fn parse_source(r: &Reader, s: &RawSource) -> Result<SourceSection, ConfigError> {
    let mut source = SourceSection::default();
    if let Some(u) = &s.prometheus {
        let item = r.string("source.prometheus", u)?;
        check_url(u.get_ref(), &item.value).map_err(|m| at(&r.shown, &item, format!("source.prometheus: {m}")))?;
        source.prometheus = Some(item);
    }
    if let Some(t) = r.opt("source.tenant", &s.tenant)? {
        let v = t.value.trim();
        if v.is_empty() || v.chars().any(char::is_control) || v.split('|').any(|p| p.trim().is_empty()) {
            return Err(at(
                &r.shown,
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
            return Err(r.invalid(name.span().start, format!("{key}: not a valid HTTP header name")));
        }
        if !names.insert(n.to_ascii_lowercase()) {
            return Err(r.invalid(name.span().start, format!("{key}: this header is given twice (header names ignore case)")));
        }
        if is_credential_header(n) && !value.get_ref().contains("${") {
            return Err(r.invalid(
                value.span().start,
                format!(
                    "{key}: the value of a credential header cannot be written in the file; reference an \
                     environment variable instead, e.g. {n} = \"${{PROM_API_KEY}}\""
                ),
            ));
        }
        if n.eq_ignore_ascii_case(TENANT_HEADER) && s.tenant.is_some() {
            return Err(r.invalid(name.span().start, format!("{key}: source.tenant sets {TENANT_HEADER} too; give one of them")));
        }
        let item = r.string(&key, value)?;
        if item.value.chars().any(char::is_control) {
            return Err(at(&r.shown, &item, format!("{key}: the value holds line breaks or other control characters")));
        }
        let v = Secret::new(item.value.trim());
        source.headers.push((n.to_string(), Item { value: v, line: item.line, column: item.column, vars: item.vars }));
    }
    source.ca_file = r.path_item("source.ca_file", &s.ca_file)?;
    source.cert_file = r.path_item("source.cert_file", &s.cert_file)?;
    source.key_file = r.path_item("source.key_file", &s.key_file)?;
    match (&source.cert_file, &source.key_file) {
        (Some(c), None) => return Err(at(&r.shown, c, "source.cert_file needs source.key_file with its private key".into())),
        (None, Some(k)) => return Err(at(&r.shown, k, "source.key_file needs source.cert_file with its certificate".into())),
        _ => {}
    }
    source.insecure_skip_verify = s.insecure_skip_verify.as_ref().map(|b| {
        let (line, column) = r.lines.line_col(b.span().start);
        Item { value: *b.get_ref(), line, column, vars: vec![] }
    });
    source.bearer_token_file = r.path_item("source.bearer_token_file", &s.bearer_token_file)?;
    source.bearer_token = r.secret("source.bearer_token", &s.bearer_token, "bearer_token_file")?;
    source.basic_auth_user = r.opt("source.basic_auth_user", &s.basic_auth_user)?;
    source.basic_auth_password_file = r.path_item("source.basic_auth_password_file", &s.basic_auth_password_file)?;
    source.basic_auth_password = r.secret("source.basic_auth_password", &s.basic_auth_password, "basic_auth_password_file")?;

    if let (Some(_), Some(b)) = (&source.bearer_token_file, &source.bearer_token) {
        return Err(at(&r.shown, b, "source.bearer_token and source.bearer_token_file are both given; keep one".into()));
    }
    if let (Some(_), Some(b)) = (&source.basic_auth_password_file, &source.basic_auth_password) {
        return Err(at(&r.shown, b, "source.basic_auth_password and source.basic_auth_password_file are both given; keep one".into()));
    }
    if let Some(u) = &source.basic_auth_user {
        if u.value.is_empty() || u.value.contains(':') || u.value.chars().any(char::is_control) {
            return Err(at(&r.shown, u, "source.basic_auth_user: give a user name without ':' or control characters".into()));
        }
        if let Some(b) = source.bearer_token_file.as_ref().map(|i| (i.line, i.column)).or(source.bearer_token.as_ref().map(|i| (i.line, i.column))) {
            return Err(ConfigError::Invalid {
                path: r.shown.clone(),
                line: b.0,
                column: b.1,
                message: "a bearer token and source.basic_auth_user are both given; a server takes one of them".into(),
            });
        }
    } else if let Some(p) =
        source.basic_auth_password_file.as_ref().map(|i| (i.line, i.column)).or(source.basic_auth_password.as_ref().map(|i| (i.line, i.column)))
    {
        return Err(ConfigError::Invalid {
            path: r.shown.clone(),
            line: p.0,
            column: p.1,
            message: "a basic-auth password is given without source.basic_auth_user; add the user name".into(),
        });
    }
    if let Some(u) = &source.prometheus {
        if url_has_credentials(&u.value) && (source.bearer_token_file.is_some() || source.bearer_token.is_some() || source.basic_auth_user.is_some()) {
            return Err(at(&r.shown, u, "source.prometheus carries user:password@ and the file gives other credentials too; keep one".into()));
        }
    }
    Ok(source)
}

/// `group_by`: one string of comma-separated label names, or an array of them.
fn parse_group_by(r: &Reader, g: &Spanned<toml::Value>) -> Result<Item<Vec<String>>, ConfigError> {
    let (line, column) = r.lines.line_col(g.span().start);
    let parts: Vec<Spanned<String>> = match g.get_ref() {
        toml::Value::String(s) => vec![Spanned::new(g.span(), s.clone())],
        toml::Value::Array(a) if a.iter().all(|v| v.is_str()) => a.iter().filter_map(|v| v.as_str()).map(|s| Spanned::new(g.span(), s.to_string())).collect(),
        _ => return Err(r.invalid(g.span().start, "group_by: give label names, e.g. \"model_name\" or [\"model_name\", \"namespace\"]".into())),
    };
    let mut labels = Vec::new();
    let mut vars = Vec::new();
    for p in &parts {
        let item = r.string("group_by", p)?;
        vars.extend(item.vars);
        labels.extend(item.value.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()));
    }
    let bad = labels.is_empty() || !labels.iter().all(|l| crate::prom::is_label_name(l));
    if bad {
        return Err(r.invalid(g.span().start, "group_by: give one or more label names, e.g. \"model_name\" or [\"model_name\", \"namespace\"]".into()));
    }
    Ok(Item { value: labels, line, column, vars })
}

/// A threshold from the file: its name, its value, and the text it was written as.
type Threshold = Item<(String, f64, String)>;

/// `[thresholds]`: numbers, or quantities with units (`"1.5s"`, `"90%"`).
fn parse_thresholds(r: &Reader, raw: &BTreeMap<Spanned<String>, Spanned<toml::Value>>) -> Result<Vec<Threshold>, ConfigError> {
    let mut thresholds = Vec::new();
    for (name, value) in raw {
        let key = format!("thresholds.{}", name.get_ref());
        let (v, written, vars) = match value.get_ref() {
            toml::Value::Integer(i) => (*i as f64, i.to_string(), vec![]),
            toml::Value::Float(f) => (*f, f.to_string(), vec![]),
            toml::Value::String(s) => {
                let item = r.string(&key, &Spanned::new(value.span(), s.clone()))?;
                let v = crate::rules::expr::parse_quantity(item.value.trim()).map_err(|e| at(&r.shown, &item, format!("{key}: {}", e.message)))?;
                (v, item.value.trim().to_string(), item.vars)
            }
            _ => return Err(r.invalid(value.span().start, format!("{key}: give a number or a quantity such as \"1.5s\" or \"90%\""))),
        };
        if !v.is_finite() {
            return Err(r.invalid(value.span().start, format!("{key}: must be a finite number")));
        }
        let (line, column) = r.lines.line_col(name.span().start);
        thresholds.push(Item { value: (name.get_ref().clone(), v, written), line, column, vars });
    }
    Ok(thresholds)
}

type RuleLists = (Option<Item<PathBuf>>, Option<Vec<Item<String>>>, Vec<Item<String>>);

/// `[rules]`: a directory of rule files, and the rules enabled or disabled.
fn parse_rules(r: &Reader, rules: &RawRules) -> Result<RuleLists, ConfigError> {
    let mut rules_enabled = None;
    let rules_dir = r.path_item("rules.dir", &rules.dir)?;
    let ids = |key: &str, list: &[Spanned<String>]| -> Result<Vec<Item<String>>, ConfigError> { list.iter().map(|s| r.string(key, s)).collect() };
    if let Some(list) = &rules.enabled {
        if list.get_ref().is_empty() {
            // Every rule off would read as "nothing could be evaluated", blaming the data.
            return Err(r.invalid(
                list.span().start,
                "rules.enabled is empty, which turns every rule off: list the rules to run, or remove the key to run them all".into(),
            ));
        }
        rules_enabled = Some(ids("rules.enabled", list.get_ref())?);
    }
    let rules_disabled = ids("rules.disabled", &rules.disabled)?;
    for d in &rules_disabled {
        if rules_enabled.as_ref().is_some_and(|e: &Vec<Item<String>>| e.iter().any(|x| x.value == d.value)) {
            return Err(at(&r.shown, d, format!("rules.disabled: {} is also in rules.enabled; keep it in one list", d.value)));
        }
    }
    Ok((rules_dir, rules_enabled, rules_disabled))
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
            let valid = !name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit()) && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
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
    matches!(n.as_str(), "authorization" | "proxy-authorization" | "cookie") || ["key", "token", "secret", "password", "auth"].iter().any(|w| n.contains(w))
}

/// Whether a base URL carries `user:pass@` or `user@` in its authority.
pub(super) fn url_has_credentials(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#']).next().unwrap_or("").contains('@')
}

/// A usable http(s) URL, whose password (if any) came from `${VAR}` rather than the file's text.
fn check_url(raw: &str, expanded: &str) -> Result<(), String> {
    let u = url::Url::parse(expanded.trim()).map_err(|e| format!("{e}; give a base URL such as \"https://prometheus.example/prometheus\""))?;
    if u.scheme() != "http" && u.scheme() != "https" {
        return Err(format!("the scheme is {:?}; use http:// or https://", u.scheme()));
    }
    if url_has_credentials(raw) {
        let authority = raw.split_once("://").map_or(raw, |(_, r)| r).split(['/', '?', '#']).next().unwrap_or("");
        let userinfo = authority.rsplit_once('@').map_or("", |(u, _)| u);
        if let Some((_, password)) = userinfo.split_once(':') {
            if !is_single_reference(password) {
                return Err("the password in user:password@ cannot be written in the file; write \
                     https://user:${PROM_PASSWORD}@host, or use basic_auth_user with basic_auth_password_file"
                    .into());
            }
        }
    }
    Ok(())
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
            ("\n\nbaseline = \"1y1000000000000d\"\n", "must be at most 100 years", 3),
            ("window = \"-5m\"\n", "cannot be negative", 1),
            ("window = \"30M\"\n", "months", 1),
            ("selector = 'namespace=prod'\n", "selector", 1),
            ("group_by = [\"model name\"]\n", "group_by", 1),
            ("group_by = 3\n", "group_by", 1),
            ("\nreplica_label = \"pod name\"\n", "replica_label \"pod name\"", 2),
            ("[source]\nprometheus = \"ftp://x\"\n", "http:// or https://", 2),
            ("[source]\ncert_file = \"c.pem\"\n", "key_file", 2),
            ("[source]\ntenant = \"a||b\"\n", "source.tenant", 2),
            ("[thresholds]\nttft_p95_high = \"fast\"\n", "thresholds.ttft_p95_high", 2),
            ("[rules]\nenabled = [\"slow-decode\"]\ndisabled = [\"slow-decode\"]\n", "also in rules.enabled", 3),
            ("[rules]\ndir = \"r\"\n\nenabled = []\n", "rules.enabled is empty", 4),
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
    fn the_user_config_directory_follows_xdg_then_home() {
        let c = candidates(&env_of(&[("XDG_CONFIG_HOME", "/x/cfg"), ("HOME", "/home/u")]));
        assert_eq!(c[0].0, PathBuf::from("./vllm-diag.toml"));
        assert_eq!(c[1].0, PathBuf::from("/x/cfg/vllm-diag/vllm-diag.toml"));
        let c = candidates(&env_of(&[("XDG_CONFIG_HOME", "relative"), ("HOME", "/home/u")]));
        assert_eq!(c[1].0, PathBuf::from("/home/u/.config/vllm-diag/vllm-diag.toml"));
        assert_eq!(candidates(&env_of(&[])).len(), 1);
    }
}
