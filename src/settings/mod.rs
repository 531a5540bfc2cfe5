//! Typed settings for a run, built once: the command line, the environment, the configuration file
//! (`vllm-diag.toml`) and the defaults merged into one [`Settings`] whose every value remembers
//! where it came from ([`Origin`]: a flag, an environment variable, file:line, or the default).
//!
//! The command line arrives from [`crate::cli`] already typed (clap types stop there): a
//! [`Settings`] whose values are what was typed, what clap read from the environment, or clap's
//! default. [`merge`] lays the environment and the file under it with one rule, applied to every
//! value alike: a flag beats the environment, which beats the file, which beats the default.
//! Nothing after this module sees a flag; the app layer reads origins where it needs to know who
//! said what (which credentials go to the metrics backend and which to scrape targets).
//!
//! Where the file is looked for: `--config FILE`, else `./vllm-diag.toml`, else
//! `$XDG_CONFIG_HOME/vllm-diag/vllm-diag.toml` (`~/.config/vllm-diag/vllm-diag.toml` when that
//! variable is unset); `--no-config` reads none. It applies to `explain`, `check` and `config show`;
//! the `rules` commands read only their own flags, so a rule test means the same on every machine.
//!
//! - [`mod@file`]: the file read and checked, every value with its line.
//! - [`merge`]: the precedence rule.
//! - [`show`]: `vllm-diag config show`, the settings with their origins.

pub mod file;
pub mod loadtest;
mod merge;
pub mod probe;
mod show;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::Failure;
use crate::prom::{is_label_name, is_replica_label, Selector};
use crate::render::Format;
use crate::report::{RunParams, Severity, TimeRange};
use crate::rules::{RuleError, RuleSet};
use crate::source::prometheus::Secret;

pub use file::{candidates, expand, ConfigFile};
pub use merge::{merge, missing_path, rules_dir_exists};
pub use show::{origin_text, show};

/// The file name looked for in the current directory and the user's configuration directory.
pub const FILE_NAME: &str = "vllm-diag.toml";
/// The environment variable `--prometheus` is read from.
pub const ENV_PROMETHEUS_URL: &str = "VLLM_DIAG_PROMETHEUS_URL";
/// `--prometheus`'s built-in default.
pub const DEFAULT_PROMETHEUS: &str = "http://localhost:9090";
/// The window explain diagnoses when none is given.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(30 * 60);
/// The window `--scrape` samples when none is given.
pub const DEFAULT_SCRAPE_WINDOW: Duration = Duration::from_secs(120);
/// The time between two scrapes when `--interval` is not given.
pub const DEFAULT_SCRAPE_INTERVAL: Duration = Duration::from_secs(5);
/// The latency profile in force when none is chosen.
pub const DEFAULT_PROFILE: &str = "chat";

/// Looks an environment variable up; tests pass their own.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// Typed on the command line, as this flag.
    Flag(&'static str),
    /// This environment variable.
    Env(&'static str),
    /// The configuration file, at this line and column, with the `${VAR}`s the value expanded.
    File { path: PathBuf, line: usize, column: usize, vars: Vec<String> },
    /// Nobody said: the built-in default.
    Default,
}

impl Origin {
    /// Typed on this command line.
    pub fn is_flag(&self) -> bool {
        matches!(self, Origin::Flag(_))
    }

    /// Said by anyone: a flag, the environment or the file.
    pub fn is_given(&self) -> bool {
        !matches!(self, Origin::Default)
    }

    pub fn is_file(&self) -> bool {
        matches!(self, Origin::File { .. })
    }

    /// Where a bad value was given, for the start of an error: the flag as typed (`--window`), the
    /// variable (`$VLLM_DIAG_PROMETHEUS_URL`), or the file's line and column with its key
    /// (`./vllm-diag.toml:3:10: window`). A default is named by its flag.
    pub fn place(&self, flag: &str, key: &str) -> String {
        match self {
            Origin::Flag(f) => f.to_string(),
            Origin::Env(v) => format!("${v}"),
            Origin::File { path, line, column, .. } => format!("{}:{line}:{column}: {key}", path.display()),
            Origin::Default => flag.to_string(),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    pub origin: Origin,
}

impl<T> Setting<T> {
    pub fn new(value: T, origin: Origin) -> Setting<T> {
        Setting { value, origin }
    }

    /// The built-in default.
    pub fn default_value(value: T) -> Setting<T> {
        Setting { value, origin: Origin::Default }
    }

    /// Typed as `flag`.
    pub fn flag(value: T, flag: &'static str) -> Setting<T> {
        Setting { value, origin: Origin::Flag(flag) }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Setting<U> {
        Setting { value: f(self.value), origin: self.origin }
    }
}

impl<T: Default> Default for Setting<T> {
    fn default() -> Setting<T> {
        Setting::default_value(T::default())
    }
}

impl<T> std::ops::Deref for Setting<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// Everything a diagnosis run (`explain`, `check`, `config show`) is told, each value with its origin.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The configuration file read, if any, and where it was looked for.
    pub file: FileInfo,
    pub source: SourceSettings,
    pub connection: Connection,
    pub scope: Scope,
    pub rules: RuleSettings,
    pub limits: Limits,
    pub output: Output,
}

/// Which configuration file was read.
#[derive(Debug, Clone, Default)]
pub struct FileInfo {
    /// The file and how it was found (`--config`, the current directory, ...).
    pub read: Option<(PathBuf, String)>,
    /// `--no-config` was given.
    pub disabled: bool,
    /// Where a file was looked for (empty with `--config` or `--no-config`).
    pub searched: Vec<PathBuf>,
}

/// Where the numbers come from.
#[derive(Debug, Clone, Default)]
pub struct SourceSettings {
    /// The Prometheus-compatible API.
    pub prometheus: Setting<String>,
    /// Re-run a recording instead.
    pub replay: Setting<Option<PathBuf>>,
    /// Store every query and answer here.
    pub record: Setting<Option<PathBuf>>,
    /// Scrape these /metrics endpoints instead of asking Prometheus.
    pub scrape: Setting<Vec<String>>,
    /// With scrape: the time between two scrapes (`None`: [`DEFAULT_SCRAPE_INTERVAL`]).
    pub interval: Setting<Option<Duration>>,
    pub baseline_from: Setting<Option<PathBuf>>,
    pub save_samples: Setting<Option<PathBuf>>,
}

/// How to talk to the source: authentication, TLS, extra headers. Secrets are [`Secret`]s.
#[derive(Debug, Clone, Default)]
pub struct Connection {
    /// `Name: value` lines: the flags' first (in order, so `--header #2` means the second flag),
    /// then the file's that no flag replaces.
    pub headers: Vec<Setting<Secret>>,
    pub tenant: Setting<Option<String>>,
    pub ca_file: Setting<Option<PathBuf>>,
    pub cert_file: Setting<Option<PathBuf>>,
    pub key_file: Setting<Option<PathBuf>>,
    pub insecure_skip_verify: Setting<bool>,
    pub bearer_token_file: Setting<Option<PathBuf>>,
    /// From `$VLLM_DIAG_BEARER_TOKEN` or the file's `bearer_token = "${VAR}"`.
    pub bearer_token: Setting<Option<Secret>>,
    pub basic_auth_user: Setting<Option<String>>,
    pub basic_auth_password_file: Setting<Option<PathBuf>>,
    /// From `$VLLM_DIAG_BASIC_AUTH_PASSWORD` or the file's `basic_auth_password = "${VAR}"`.
    pub basic_auth_password: Setting<Option<Secret>>,
    /// Set when the file's headers and credentials stay behind because the URL in force (from
    /// this origin) is not the file's.
    pub withheld: Option<Origin>,
    /// Log every request to stderr.
    pub debug: Setting<bool>,
}

/// What to look at: the windows, the series, the grouping.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The window's length (`None`: [`DEFAULT_WINDOW`], or [`DEFAULT_SCRAPE_WINDOW`] for a scrape).
    pub window: Setting<Option<Duration>>,
    /// The window's end, as written: RFC 3339 or "now" (`None`: now).
    pub at: Setting<Option<String>>,
    /// How far before the window the baseline sits (`None`: the window's length).
    pub baseline: Setting<Option<Duration>>,
    /// Extra label matchers, as written.
    pub selector: Setting<Option<String>>,
    /// Labels findings are grouped by, comma-separated.
    pub group_by: Setting<String>,
    pub replica_label: Setting<String>,
}

/// Which rules run, and with which thresholds.
#[derive(Debug, Clone, Default)]
pub struct RuleSettings {
    /// Extra rule files.
    pub dir: Setting<Option<PathBuf>>,
    /// The latency profile (`None`: [`DEFAULT_PROFILE`]).
    pub profile: Setting<Option<String>>,
    /// `[thresholds]`, applied after the profile.
    pub thresholds: Vec<Setting<Threshold>>,
    /// `[rules] enabled`: when given, only these rules run (in the file's order).
    pub enabled: Setting<Option<Vec<String>>>,
    /// `[rules] disabled`.
    pub disabled: Setting<BTreeSet<String>>,
    /// The rules the file turns off (disabled, or left out of `enabled`), sorted, as checked
    /// against the rules in force; `None` when the file turns none off by name.
    pub off: Setting<Option<Vec<String>>>,
}

/// One `[thresholds]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub name: String,
    pub number: f64,
    /// As written in the file (`"1.5s"`), for `config show`.
    pub written: String,
}

/// Query limits.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    /// Overall deadline for all queries.
    pub timeout: Setting<Duration>,
    /// Timeout of one query.
    pub query_timeout: Setting<Duration>,
    /// Queries in flight at once.
    pub concurrency: Setting<u16>,
}

/// What to print, and the exit code.
#[derive(Debug, Clone, Default)]
pub struct Output {
    pub format: Setting<Format>,
    /// Exit 1 at or above this severity (`None`: never).
    pub fail_on: Setting<Option<Severity>>,
    /// Exit 1 on a change no rule explains too (`--fail-on unexplained`, or `info` below it).
    pub fail_on_unexplained: Setting<bool>,
    /// No progress display.
    pub quiet: Setting<bool>,
    /// Re-run every so often on a terminal.
    pub watch: Setting<Option<Duration>>,
    /// With a watch: where to serve the latest run's findings as metrics.
    pub metrics_listen: Setting<Option<String>>,
    /// Also print the findings as CI annotations.
    pub annotations: Setting<Option<Annotations>>,
    /// The chart-link template of the file's `[links] graph` (`none`: no links); unset, a live
    /// Prometheus run links to its `/graph` page.
    pub links: Setting<Option<String>>,
}

/// CI annotations printed after the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Annotations {
    /// GitHub Actions workflow commands.
    Github,
}

/// How to find the file: `--config` and `--no-config`.
#[derive(Debug, Clone, Default)]
pub struct Lookup {
    pub explicit: Option<PathBuf>,
    pub disabled: bool,
}

/// What the run is, which decides what the file may fill in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `explain`.
    Explain,
    /// `check`: the deploy time decides the window and the baseline.
    Check,
    /// `config show`: as `explain`, but a file the configuration names that does not exist is shown
    /// as such rather than stopping the listing.
    Show,
}

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

/// Read the configuration file (if any) from the real environment and merge the command line
/// over it. Checks the file's profile, thresholds and rule ids against the rules in force.
pub fn build(command_line: Settings, lookup: &Lookup, mode: Mode) -> Result<Settings, ConfigError> {
    let env = |k: &str| std::env::var(k).ok();
    let file = file::load(lookup, &env)?;
    let mut settings = merge(command_line, file.as_ref(), &env, mode)?;
    settings.file.disabled = lookup.disabled;
    if !lookup.disabled && lookup.explicit.is_none() {
        settings.file.searched = candidates(&env).into_iter().map(|(p, _)| p).collect();
    }
    Ok(settings)
}

impl Settings {
    /// The window's length in force: the one given, else the default for the source.
    pub fn window(&self) -> Duration {
        let default = if self.source.scrape.is_empty() { DEFAULT_WINDOW } else { DEFAULT_SCRAPE_WINDOW };
        self.scope.window.unwrap_or(default)
    }

    /// The run's windows, selector and grouping, checked.
    pub fn run_params(&self, now: DateTime<Utc>) -> Result<(RunParams, Selector), Failure> {
        let s = &self.scope;
        let window = s.window.unwrap_or(DEFAULT_WINDOW);
        let offset = s.baseline.unwrap_or(window);
        let end = parse_at(s.at.as_deref().unwrap_or("now"), now)?;
        // Each error names where its value was given: the flag, or the file's line.
        let (wp, bp) = (s.window.origin.place("--window", "window"), s.baseline.origin.place("--baseline", "baseline"));
        let (gp, rp) = (s.group_by.origin.place("--group-by", "group_by"), s.replica_label.origin.place("--replica-label", "replica_label"));
        let w = chrono::Duration::from_std(window).map_err(|_| Failure::Usage(format!("{wp} is too long")))?;
        let o = chrono::Duration::from_std(offset).map_err(|_| Failure::Usage(format!("{bp} is too long")))?;
        // Both windows must start after the Unix epoch (TimeRange::is_supported); a start that
        // does not fit in a time at all is just as far out.
        let epoch = TimeRange::SUPPORTED.0;
        let (at, since, len) = (end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), epoch.format("%Y-%m-%d UTC"), humantime::format_duration(window));
        // The flag that sets the length: --window, or --since for check.
        let wflag = match &s.window.origin {
            Origin::Flag(f) => *f,
            _ => "--window",
        };
        let window_error = || {
            Failure::Usage(format!("{wp} {len} ending at {at} would start before {since}, where there are no metrics: give a shorter {wflag} or a later --at"))
        };
        let baseline_error = || {
            Failure::Usage(match s.baseline.is_some() {
                true => format!(
                    "{bp} {}: a {len} baseline that far before {at} would start before {since}, where there are no metrics: give a shorter --baseline or --window, or a later --at",
                    humantime::format_duration(offset)
                ),
                // The baseline defaults to the window just before: the window's length decides.
                false => format!(
                    "{wp} {len} ending at {at}: the baseline, as long and just before it, would start before {since}, where there are no metrics: give a shorter {wflag} or a later --at"
                ),
            })
        };
        let start = end.checked_sub_signed(w).filter(|t| *t >= epoch).ok_or_else(window_error)?;
        let b_end = end.checked_sub_signed(o).ok_or_else(baseline_error)?;
        let b_start = b_end.checked_sub_signed(w).filter(|t| *t >= epoch).ok_or_else(baseline_error)?;
        let selector = Selector::parse(s.selector.as_deref().unwrap_or("")).map_err(|e| Failure::Usage(e.to_string()))?;
        let group_by: Vec<String> = s.group_by.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
        if group_by.is_empty() || !group_by.iter().all(|l| is_label_name(l)) {
            return Err(Failure::Usage(format!(
                "{gp} {:?}: give one or more label names separated by commas, e.g. model_name or model_name,namespace",
                s.group_by.value
            )));
        }
        let replica_label = s.replica_label.trim().to_string();
        if !is_replica_label(&replica_label) {
            return Err(Failure::Usage(format!("{rp} {:?}: give one label name, e.g. instance or pod", s.replica_label.value)));
        }
        if group_by.contains(&replica_label) {
            return Err(Failure::Usage(format!(
                "{rp} {replica_label} is also in {gp} ({}): findings would be per replica already, with nothing left to tell replicas apart. Drop it from one of them",
                group_by.join(",")
            )));
        }
        Ok((
            RunParams {
                window: TimeRange { start, end },
                baseline: TimeRange { start: b_start, end: b_end },
                selector: selector.to_promql(),
                group_by,
                replica_label,
            },
            selector,
        ))
    }
}

impl RuleSettings {
    /// Apply the file's thresholds and remove the rules it turns off; returns the ids turned off,
    /// sorted.
    ///
    /// A removed rule's place in the "explains" chains is kept: when A supersedes B and B supersedes
    /// C, disabling B still lets A absorb C.
    pub fn apply_to_rules(&self, set: &mut RuleSet) -> Vec<String> {
        use std::collections::BTreeMap;
        for t in &self.thresholds {
            set.thresholds.insert(t.name.clone(), t.number);
        }
        let enabled = self.enabled.as_ref();
        let off: BTreeSet<String> =
            set.rules.iter().map(|r| r.id.clone()).filter(|id| self.disabled.contains(id) || enabled.is_some_and(|e| !e.contains(id))).collect();
        if off.is_empty() {
            return Vec::new();
        }
        let chains: BTreeMap<String, Vec<String>> = set.rules.iter().map(|r| (r.id.clone(), r.supersedes.clone())).collect();
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
}

/// Resolve the window end: `now` or an RFC 3339 time, not in the future.
pub fn parse_at(at: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, Failure> {
    let t = at.trim();
    if t.eq_ignore_ascii_case("now") {
        return Ok(now);
    }
    if t.is_empty() {
        // `--at "$UNSET"` in a CI script: not "now", which would diagnose the wrong window.
        return Err(Failure::Usage("--at is empty: write an RFC 3339 time such as 2026-01-15T09:30:00Z, or \"now\"".into()));
    }
    let parsed = crate::units::parse_time(t).map_err(|e| Failure::Usage(format!("--at: {e}, or \"now\"")))?;
    // A little clock skew is fine; a window in the future holds no data yet.
    if parsed > now + chrono::Duration::seconds(60) {
        return Err(Failure::Usage(format!(
            "--at {t}: is in the future (now is {}). Give the end of a window that has already happened",
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 15, 12, 0, 0).unwrap()
    }

    #[test]
    fn at_accepts_now_and_rfc3339_and_rejects_the_future() {
        assert_eq!(parse_at("now", now()).unwrap(), now());
        assert_eq!(parse_at("2026-01-15T09:30:00Z", now()).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 9, 30, 0).unwrap());
        assert_eq!(parse_at("2026-01-15T10:30:00+01:00", now()).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 9, 30, 0).unwrap());
        let e = parse_at("2027-01-01T00:00:00Z", now()).unwrap_err().to_string();
        assert!(e.contains("future"), "{e}");
        let e = parse_at("yesterday", now()).unwrap_err().to_string();
        assert!(e.contains("--at") && e.contains("RFC 3339"), "{e}");
        let e = parse_at("2026-01-15T09:30:00", now()).unwrap_err().to_string();
        assert!(e.contains("--at: \"2026-01-15T09:30:00\" has no time zone: add Z for UTC"), "{e}");
        assert_eq!(parse_at("1768469400", now()).unwrap(), Utc.with_ymd_and_hms(2026, 1, 15, 9, 30, 0).unwrap());
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
        let threshold = Threshold { name: "ttft_p95_high".into(), number: 1.5, written: "1.5".into() };
        let rules = RuleSettings {
            disabled: Setting::default_value([b.clone()].into()),
            thresholds: vec![Setting::default_value(threshold)],
            ..RuleSettings::default()
        };
        let off = rules.apply_to_rules(&mut set);
        assert_eq!(off, vec![b.clone()]);
        assert!(set.rule(&b).is_none());
        assert!(set.rule(&a).unwrap().supersedes.contains(&c), "{a} no longer absorbs {c}");
        assert_eq!(set.thresholds["ttft_p95_high"], 1.5);

        let mut set = crate::rules::load_builtin().unwrap();
        let all = set.rules.len();
        let only = RuleSettings { enabled: Setting::default_value(Some(vec!["slow-decode".to_string()])), ..RuleSettings::default() };
        assert_eq!(only.apply_to_rules(&mut set).len(), all - 1);
        assert_eq!(set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["slow-decode"]);
    }
}
