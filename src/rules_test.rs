//! `vllm-diag rules test`: unit tests for rules, in the spirit of `promtool test rules`: input series written in the
//! expanding notation, a window, and the findings expected. They run the real pipeline (signals,
//! queries, rules, ranking) over the series with local evaluation, so a rule and its test need
//! nothing installed, and a test exercises the same PromQL a live run sends.
//!
//! A test file is TOML. Everything at the top level is a default for every `[[test]]` in the file;
//! a test's own `[[test.series]]` add to the file's `[[series]]` (replacing one with the same label
//! set), so a file can describe a healthy fleet once and each test change only what it is about:
//!
//! ```toml
//! interval = "1m"            # spacing of the input samples (the first is at time 0)
//! window = "30m"             # the window under diagnosis; the baseline is the window before it
//! # baseline = "30m"         # how far before the window the baseline sits (default: the window)
//! # at = "1h"                # end of the window, from time 0 (default: the last input sample)
//! # rules = ["slow-decode"]  # evaluate only these rules (default: all of them)
//!
//! [[series]]
//! series = 'vllm:num_requests_running{model_name="m", instance="a:8000"}'
//! values = "10x60"           # promtool notation: 10 repeated, 61 samples
//!
//! [[test]]
//! name = "decode slows down"
//! [[test.series]]
//! series = 'vllm:inter_token_latency_seconds_bucket{model_name="m", instance="a:8000", le="0.05"}'
//! values = "0+100x30 3000+0x29"
//! [test.expect]
//! findings = [{ rule = "slow-decode", scope = { model_name = "m" } }]
//! # healthy = [...]          # when given, exactly these rule/scope pairs must be healthy
//! # not_evaluated = [...]    # likewise; an entry may add reason = "text the reason contains"
//! # binding = [{ scope = { model_name = "m" }, limit = "max-num-seqs" }]  # the limit that bound
//! ```
//!
//! Values: `1 2 3` plain samples; `a+bxn` is `a, a+b, ..., a+n*b` (n+1 samples), `a-bxn` counts
//! down, `axn` repeats `a` n+1 times; `_` is a missing sample and `_xn` n of them; `stale` is a
//! staleness marker (the series disappears, as when a scrape stops returning it); `Inf`, `-Inf`
//! and `NaN` are values.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;
use toml::Spanned;

use crate::explain::{explain, ExplainOptions};
use crate::local::store::stale_nan;
use crate::local::Store;
use crate::prom::Selector;
use crate::report::RunParams;
use crate::report::{Report, Scope, TimeRange};
use crate::rules::RuleSet;
use crate::source::local::LocalSource;
use crate::source::Labels;

/// A test file that cannot be used, with the place of the mistake.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{column}: {message}")]
pub struct TestFileError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// One input series: its labels (with `__name__`) and samples at `index * interval`.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSeries {
    pub labels: Labels,
    pub values: Vec<Option<f64>>,
}

/// A rule/scope pair a test expects (for not-evaluated entries, optionally part of the reason).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Expected {
    pub rule: String,
    pub scope: Scope,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleTest {
    pub name: String,
    /// Line of the `[[test]]` header.
    pub line: usize,
    pub interval_ms: i64,
    pub window_ms: i64,
    pub baseline_ms: i64,
    /// End of the window, unix milliseconds.
    pub at_ms: i64,
    pub rules: Option<Vec<String>>,
    pub group_by: Vec<String>,
    /// What tells replicas apart (`instance` unless the file says otherwise).
    pub replica_label: String,
    pub series: Vec<InputSeries>,
    pub findings: Vec<Expected>,
    pub healthy: Option<Vec<Expected>>,
    pub not_evaluated: Option<Vec<Expected>>,
    /// The limit each scope's `binding` must name (`kv-cache`, `max-num-seqs`, ...).
    pub binding: Vec<(Scope, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TestFile {
    pub path: String,
    pub tests: Vec<RuleTest>,
}

// ---- the file format ------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    interval: Option<Spanned<String>>,
    #[serde(default)]
    window: Option<Spanned<String>>,
    #[serde(default)]
    baseline: Option<Spanned<String>>,
    #[serde(default)]
    at: Option<Spanned<String>>,
    #[serde(default)]
    rules: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    group_by: Option<Vec<String>>,
    #[serde(default)]
    replica_label: Option<Spanned<String>>,
    #[serde(default)]
    series: Vec<RawSeries>,
    #[serde(default)]
    test: Vec<Spanned<RawTest>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTest {
    name: String,
    #[serde(default)]
    interval: Option<Spanned<String>>,
    #[serde(default)]
    window: Option<Spanned<String>>,
    #[serde(default)]
    baseline: Option<Spanned<String>>,
    #[serde(default)]
    at: Option<Spanned<String>>,
    #[serde(default)]
    rules: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    group_by: Option<Vec<String>>,
    #[serde(default)]
    replica_label: Option<Spanned<String>>,
    #[serde(default)]
    series: Vec<RawSeries>,
    #[serde(default)]
    expect: Option<RawExpect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSeries {
    series: Spanned<String>,
    values: Spanned<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default)]
    findings: Vec<RawScoped>,
    #[serde(default)]
    healthy: Option<Vec<RawScoped>>,
    #[serde(default)]
    not_evaluated: Option<Vec<RawScoped>>,
    #[serde(default)]
    binding: Vec<RawBinding>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBinding {
    #[serde(default)]
    scope: BTreeMap<String, String>,
    limit: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScoped {
    rule: Spanned<String>,
    #[serde(default)]
    scope: BTreeMap<String, String>,
    #[serde(default)]
    reason: Option<String>,
}

/// Read and check a test file against the rule set (rule ids in expectations must exist).
pub fn load_file(path: &Path, rules: &RuleSet) -> Result<TestFile, TestFileError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| TestFileError {
        file: shown.clone(),
        line: 0,
        column: 0,
        message: format!("cannot read the test file: {e}"),
    })?;
    parse_file(&shown, &text, rules)
}

/// Parse a test file's text; `file` names it in errors.
pub fn parse_file(file: &str, src: &str, rules: &RuleSet) -> Result<TestFile, TestFileError> {
    let lines = crate::text::LineIndex::new(src);
    let err = |byte: usize, message: String| {
        let (line, column) = lines.line_col(byte);
        TestFileError { file: file.to_string(), line, column, message }
    };
    let raw: RawFile = toml::from_str(src).map_err(|e| err(e.span().map_or(0, |s| s.start), e.message().trim().to_string()))?;
    if raw.test.is_empty() {
        return Err(err(0, "no [[test]] in the file; see `vllm-diag rules test --help` for the format".into()));
    }
    let duration = |d: &Spanned<String>, what: &str| -> Result<i64, TestFileError> {
        let parsed = humantime::parse_duration(d.get_ref().trim())
            .map_err(|e| err(d.span().start, format!("{what} {:?} is not a duration like \"1m\" or \"30s\": {e}", d.get_ref())))?;
        i64::try_from(parsed.as_millis()).map_err(|_| err(d.span().start, format!("{what} is too long")))
    };
    let check_rules = |list: &Option<Vec<Spanned<String>>>| -> Result<Option<Vec<String>>, TestFileError> {
        match list {
            None => Ok(None),
            Some(ids) => {
                ids.iter()
                    .map(|id| {
                        if rules.rule(id.get_ref()).is_some() {
                            Ok(id.get_ref().clone())
                        } else {
                            Err(err(id.span().start, unknown_rule(id.get_ref(), rules)))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some)
            }
        }
    };
    let file_series = raw.series.iter().map(|s| input_series(s, &err)).collect::<Result<Vec<_>, _>>()?;
    let file_rules = check_rules(&raw.rules)?;

    let mut tests = Vec::new();
    for t in &raw.test {
        let test_start = t.span().start;
        let t = t.get_ref();
        let pick = |own: &Option<Spanned<String>>, file: &Option<Spanned<String>>| own.clone().or_else(|| file.clone());
        let interval_ms = match pick(&t.interval, &raw.interval) {
            Some(d) => duration(&d, "interval")?,
            None => 60_000,
        };
        if interval_ms <= 0 {
            return Err(err(test_start, format!("test {:?}: the interval must be longer than zero", t.name)));
        }
        let window_ms = match pick(&t.window, &raw.window) {
            Some(d) => duration(&d, "window")?,
            None => 30 * 60_000,
        };
        if window_ms <= 0 {
            return Err(err(test_start, format!("test {:?}: the window must be longer than zero", t.name)));
        }
        let baseline_ms = match pick(&t.baseline, &raw.baseline) {
            Some(d) => duration(&d, "baseline")?,
            None => window_ms,
        };
        let mut series = file_series.clone();
        for s in &t.series {
            let s = input_series(s, &err)?;
            match series.iter_mut().find(|o| o.labels == s.labels) {
                Some(existing) => *existing = s,
                None => series.push(s),
            }
        }
        if series.is_empty() {
            return Err(err(test_start, format!("test {:?} has no input series", t.name)));
        }
        let last = series.iter().map(|s| s.values.len() as i64 - 1).max().unwrap_or(0).max(0) * interval_ms;
        let at_ms = match pick(&t.at, &raw.at) {
            Some(d) => duration(&d, "at")?,
            None => last,
        };
        let expect = t.expect.as_ref();
        let scoped = |list: &[RawScoped]| -> Result<Vec<Expected>, TestFileError> {
            list.iter()
                .map(|s| {
                    if rules.rule(s.rule.get_ref()).is_none() {
                        return Err(err(s.rule.span().start, unknown_rule(s.rule.get_ref(), rules)));
                    }
                    Ok(Expected { rule: s.rule.get_ref().clone(), scope: s.scope.clone(), reason: s.reason.clone() })
                })
                .collect()
        };
        let replica_label = match pick(&t.replica_label, &raw.replica_label) {
            None => "instance".to_string(),
            Some(l) if crate::prom::is_replica_label(l.get_ref()) => l.get_ref().clone(),
            Some(l) => return Err(err(l.span().start, format!("replica_label {:?} is not a label name; write e.g. \"pod\"", l.get_ref()))),
        };
        let group_by = t.group_by.clone().or_else(|| raw.group_by.clone()).unwrap_or_else(|| vec!["model_name".to_string()]);
        if group_by.is_empty() || !group_by.iter().all(|l| crate::prom::is_label_name(l)) {
            return Err(err(test_start, format!("test {:?}: group_by must list label names, e.g. [\"model_name\"]", t.name)));
        }
        if group_by.contains(&replica_label) {
            return Err(err(test_start, format!("test {:?}: replica_label {replica_label:?} is also in group_by; use another label", t.name)));
        }
        let (line, _) = lines.line_col(test_start);
        tests.push(RuleTest {
            name: t.name.clone(),
            line,
            interval_ms,
            window_ms,
            baseline_ms,
            at_ms,
            rules: match check_rules(&t.rules)? {
                Some(r) => Some(r),
                None => file_rules.clone(),
            },
            group_by,
            replica_label,
            series,
            findings: scoped(expect.map_or(&[][..], |e| &e.findings))?,
            healthy: expect.and_then(|e| e.healthy.as_deref()).map(scoped).transpose()?,
            not_evaluated: expect.and_then(|e| e.not_evaluated.as_deref()).map(scoped).transpose()?,
            binding: expect
                .map_or(&[][..], |e| &e.binding)
                .iter()
                .map(|b| {
                    let limit = b.limit.get_ref();
                    if !crate::report::LimitKind::ALL.iter().any(|l| l.name() == limit) {
                        let names: Vec<&str> = crate::report::LimitKind::ALL.iter().map(|l| l.name()).collect();
                        return Err(err(b.limit.span().start, format!("limit {limit:?} is not one of {}", names.join(", "))));
                    }
                    Ok((b.scope.clone(), limit.clone()))
                })
                .collect::<Result<Vec<_>, _>>()?,
        });
    }
    Ok(TestFile { path: file.to_string(), tests })
}

fn unknown_rule(id: &str, rules: &RuleSet) -> String {
    format!(
        "no rule {id:?}.{} Known rules: {}",
        crate::text::did_you_mean(id, rules.rules.iter().map(|r| r.id.as_str())),
        rules.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")
    )
}

fn input_series(s: &RawSeries, err: &dyn Fn(usize, String) -> TestFileError) -> Result<InputSeries, TestFileError> {
    let text = s.series.get_ref();
    let labels = crate::local::parse_series(text).map_err(|e| err(s.series.span().start, e.to_string()))?;
    let values = parse_values(s.values.get_ref()).map_err(|e| err(s.values.span().start, format!("values {:?}: {e}", s.values.get_ref())))?;
    Ok(InputSeries { labels, values })
}

/// Expand promtool's notation (see the module documentation).
pub fn parse_values(text: &str) -> Result<Vec<Option<f64>>, String> {
    let mut out = Vec::new();
    for tok in text.split_whitespace() {
        if tok == "_" {
            out.push(None);
            continue;
        }
        if tok == "stale" {
            out.push(Some(stale_nan()));
            continue;
        }
        if let Some(n) = tok.strip_prefix("_x") {
            let n: usize = n.parse().map_err(|_| format!("{tok:?}: expected _xN with a whole number N"))?;
            out.extend(std::iter::repeat_n(None, n.min(1_000_000)));
            continue;
        }
        match tok.rfind('x') {
            Some(xpos) => {
                let (expr, n) = (&tok[..xpos], &tok[xpos + 1..]);
                let n: usize = n.parse().map_err(|_| format!("{tok:?}: the count after x must be a whole number"))?;
                if n > 1_000_000 {
                    return Err(format!("{tok:?}: at most 1000000 repetitions"));
                }
                // split "a+b" / "a-b" at a sign that is neither leading nor part of an exponent
                let split = expr.char_indices().skip(1).find(|(i, c)| (*c == '+' || *c == '-') && !matches!(expr.as_bytes()[i - 1], b'e' | b'E'));
                let (start, step) = match split {
                    Some((i, sign)) => {
                        let a = number(&expr[..i]).ok_or_else(|| format!("{tok:?}: {:?} is not a number", &expr[..i]))?;
                        let b = number(&expr[i + 1..]).ok_or_else(|| format!("{tok:?}: {:?} is not a number", &expr[i + 1..]))?;
                        (a, if sign == '-' { -b } else { b })
                    }
                    None => (number(expr).ok_or_else(|| format!("{tok:?}: {expr:?} is not a number"))?, 0.0),
                };
                for k in 0..=n {
                    out.push(Some(start + step * k as f64));
                }
            }
            None => out.push(Some(number(tok).ok_or_else(|| format!("{tok:?} is not a number, _, stale or a+bxN"))?)),
        }
    }
    if out.is_empty() {
        return Err("no values".into());
    }
    Ok(out)
}

fn number(s: &str) -> Option<f64> {
    crate::prom::parse_sample_value(s).filter(|_| !s.trim().is_empty())
}

// ---- running ------------------------------------------------------------------------------------

/// What one test concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Pass,
    /// Expected against got, as diff lines.
    Fail(Vec<String>),
}

fn store_of(t: &RuleTest) -> Store {
    let mut store = Store::new();
    for s in &t.series {
        let pts = s.values.iter().enumerate().filter_map(|(i, v)| v.map(|v| (i as i64 * t.interval_ms, v)));
        store.add(s.labels.clone(), pts);
    }
    store
}

fn time(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

/// Run one test: the whole diagnosis over its series, then the comparison.
pub async fn run_test(t: &RuleTest, rules: &RuleSet, origin: &str) -> Outcome {
    let mut set = rules.clone();
    if let Some(only) = &t.rules {
        set.rules.retain(|r| only.contains(&r.id));
    }
    let source = Arc::new(LocalSource::new(Arc::new(store_of(t)), crate::report::SourceKind::RulesTest, origin));
    let params = RunParams {
        window: TimeRange { start: time(t.at_ms - t.window_ms), end: time(t.at_ms) },
        baseline: TimeRange { start: time(t.at_ms - t.baseline_ms - t.window_ms), end: time(t.at_ms - t.baseline_ms) },
        selector: String::new(),
        group_by: t.group_by.clone(),
        replica_label: t.replica_label.clone(),
    };
    let opts = ExplainOptions { params, selector: Selector::default(), concurrency: 4, deadline: Duration::from_secs(120) };
    match explain(source, &set, &opts).await {
        Ok(report) => compare(t, &report),
        Err(e) => Outcome::Fail(vec![format!("the diagnosis did not run: {e}")]),
    }
}

fn show(rule: &str, scope: &Scope) -> String {
    let inner: Vec<String> = scope.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{rule} {{{}}}", inner.join(", "))
}

/// Compare a report with a test's expectations; a failure lists each section as a diff.
pub fn compare(t: &RuleTest, report: &Report) -> Outcome {
    let mut lines = Vec::new();
    let mut section = |title: &str, expected: &[Expected], got: Vec<(String, Scope, String)>| {
        let got_keys: BTreeSet<(String, Scope)> = got.iter().map(|(r, s, _)| (r.clone(), s.clone())).collect();
        let mut missing = Vec::new();
        let mut matched = BTreeSet::new();
        for e in expected {
            let hit = got.iter().find(|(r, s, reason)| r == &e.rule && s == &e.scope && e.reason.as_ref().is_none_or(|want| reason.contains(want.as_str())));
            match hit {
                Some((r, s, _)) => {
                    matched.insert((r.clone(), s.clone()));
                }
                None => missing.push(e),
            }
        }
        let extra: Vec<&(String, Scope, String)> = got.iter().filter(|(r, s, _)| !matched.contains(&(r.clone(), s.clone()))).collect();
        if missing.is_empty() && extra.is_empty() {
            return;
        }
        lines.push(format!("{title}:"));
        for key in &got_keys {
            if matched.contains(key) {
                lines.push(format!("    {}", show(&key.0, &key.1)));
            }
        }
        for e in missing {
            let reason = e.reason.as_ref().map(|r| format!(" (reason containing {r:?})")).unwrap_or_default();
            lines.push(format!("  - {}{reason}", show(&e.rule, &e.scope)));
        }
        for (r, s, reason) in extra {
            let reason = if reason.is_empty() { String::new() } else { format!(" ({reason})") };
            lines.push(format!("  + {}{reason}", show(r, s)));
        }
    };
    section("findings", &t.findings, report.findings.iter().map(|f| (f.rule.clone(), f.scope.clone(), String::new())).collect());
    if let Some(h) = &t.healthy {
        section("healthy", h, report.healthy.iter().map(|c| (c.rule.clone(), c.scope.clone(), String::new())).collect());
    }
    if let Some(n) = &t.not_evaluated {
        section("not_evaluated", n, report.not_evaluated.iter().map(|c| (c.rule.clone(), c.scope.clone(), c.reason.to_string())).collect());
    }
    for (scope, limit) in &t.binding {
        match report.binding.iter().find(|b| &b.scope == scope) {
            Some(b) if b.limit.name() == limit => {}
            Some(b) => {
                let shares: Vec<String> = b.shares.iter().filter(|(_, v)| **v > 0.0).map(|(l, v)| format!("{} {:.0}%", l.name(), v * 100.0)).collect();
                lines.push(format!("binding of {}: expected {limit}, got {} ({})", show("", scope).trim(), b.limit.name(), shares.join(", ")));
            }
            None => lines.push(format!("binding of {}: expected {limit}, got no binding for that scope", show("", scope).trim())),
        }
    }
    if lines.is_empty() {
        Outcome::Pass
    } else {
        let mut out = vec!["--- expected".to_string(), "+++ got".to_string()];
        out.extend(lines);
        Outcome::Fail(out)
    }
}

/// Totals of a `rules test` run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    /// What to print: one line per test, diffs under failures, totals last.
    pub text: String,
}

/// Load every file first (a malformed one stops the run before any test), then run the tests.
pub fn run_files(paths: &[std::path::PathBuf], rules: &RuleSet) -> Result<Summary, TestFileError> {
    let files = paths.iter().map(|p| load_file(p, rules)).collect::<Result<Vec<_>, _>>()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| TestFileError {
        file: String::new(),
        line: 0,
        column: 0,
        message: format!("cannot start the async runtime: {e}"),
    })?;
    let mut s = Summary::default();
    for f in &files {
        for t in &f.tests {
            let origin = format!("{}:{}", f.path, t.line);
            match runtime.block_on(run_test(t, rules, &origin)) {
                Outcome::Pass => {
                    s.passed += 1;
                    s.text.push_str(&format!("ok    {origin}: {}\n", t.name));
                }
                Outcome::Fail(diff) => {
                    s.failed += 1;
                    s.text.push_str(&format!("FAIL  {origin}: {}\n", t.name));
                    for l in diff {
                        s.text.push_str(&format!("      {l}\n"));
                    }
                }
            }
        }
    }
    s.text.push_str(&format!("{} passed, {} failed\n", s.passed, s.failed));
    // Test names and the values in the differences are a test file's text.
    s.text = crate::text::printable(&s.text);
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules() -> RuleSet {
        crate::rules::load_builtin().expect("the built-in pack loads")
    }

    #[test]
    fn the_expanding_notation_follows_promtool() {
        let v = parse_values("0+10x3 1x2 _ _x2 stale 5-1x2 -1+1x1 1e-3+1e-3x1 Inf").unwrap();
        let plain: Vec<String> =
            v.iter().map(|x| x.map_or("_".into(), |f| if crate::local::store::is_stale(f) { "stale".into() } else { f.to_string() })).collect();
        assert_eq!(plain, ["0", "10", "20", "30", "1", "1", "1", "_", "_", "_", "stale", "5", "4", "3", "-1", "0", "0.001", "0.002", "inf"]);
    }

    #[test]
    fn bad_values_are_explained() {
        for (v, want) in [("1x", "whole number"), ("abc", "not a number"), ("_xq", "_xN"), ("", "no values"), ("1+x3", "not a number")] {
            let e = parse_values(v).expect_err(v);
            assert!(e.contains(want), "{v}: {e}");
        }
    }

    #[test]
    fn a_malformed_file_names_the_line() {
        let src = "interval = \"1m\"\n[[test]]\nname = \"t\"\n[[test.series]]\nseries = 'x{a=\"b\"}'\nvalues = \"1 2 nope\"\n";
        let e = parse_file("t.toml", src, &rules()).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("t.toml", 6), "{e}");
        assert!(e.message.contains("nope"), "{e}");
    }

    #[test]
    fn an_unknown_rule_in_an_expectation_is_a_file_error() {
        let src = "[[test]]\nname = \"t\"\n[[test.series]]\nseries = 'x'\nvalues = \"1\"\n[test.expect]\nfindings = [{ rule = \"no-such-rule\" }]\n";
        let e = parse_file("t.toml", src, &rules()).unwrap_err();
        assert_eq!(e.line, 7, "{e}");
        assert!(e.message.contains("no rule \"no-such-rule\""), "{e}");
    }

    #[test]
    fn test_series_replace_file_series_with_the_same_labels() {
        let src = "[[series]]\nseries = 'x{a=\"1\"}'\nvalues = \"1 1\"\n[[series]]\nseries = 'y'\nvalues = \"2\"\n[[test]]\nname = \"t\"\n[[test.series]]\nseries = 'x{a=\"1\"}'\nvalues = \"5 5 5\"\n";
        let f = parse_file("t.toml", src, &rules()).unwrap();
        let t = &f.tests[0];
        assert_eq!(t.series.len(), 2);
        assert_eq!(t.series[0].values, vec![Some(5.0); 3]);
        // the window ends at the last sample by default
        assert_eq!(t.at_ms, 2 * 60_000);
    }

    #[test]
    fn the_replica_label_defaults_to_instance_and_a_test_may_set_its_own() {
        let src =
            "replica_label = \"pod\"\n[[series]]\nseries = 'x'\nvalues = \"1\"\n[[test]]\nname = \"a\"\n[[test]]\nname = \"b\"\nreplica_label = \"node\"\n";
        let f = parse_file("t.toml", src, &rules()).unwrap();
        assert_eq!((f.tests[0].replica_label.as_str(), f.tests[1].replica_label.as_str()), ("pod", "node"));
        let f = parse_file("t.toml", "[[series]]\nseries = 'x'\nvalues = \"1\"\n[[test]]\nname = \"a\"\n", &rules()).unwrap();
        assert_eq!(f.tests[0].replica_label, "instance");
        let e = parse_file("t.toml", "[[series]]\nseries = 'x'\nvalues = \"1\"\n[[test]]\nname = \"a\"\nreplica_label = \"a pod\"\n", &rules()).unwrap_err();
        assert!(e.line == 6 && e.message.contains("replica_label \"a pod\" is not a label name"), "{e}");
        let e = parse_file("t.toml", "group_by = [\"model name\"]\n[[series]]\nseries = 'x'\nvalues = \"1\"\n[[test]]\nname = \"a\"\n", &rules()).unwrap_err();
        assert!(e.message.contains("group_by must list label names"), "{e}");
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let e = parse_file("t.toml", "[[test]]\nname = \"t\"\nwindoe = \"5m\"\n", &rules()).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
    }

    fn report_with_healthy(pairs: &[(&str, &str)]) -> Report {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "window": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:30:00Z"},
            "baseline": {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:30:00Z"},
            "source": {"kind": "rules-test", "url": "t"},
            "metrics": {"generation": "v1", "scopes": [], "names_used": {}},
            "findings": [], "healthy": [], "not_evaluated": [], "warnings": [],
            "stats": {"queries": 0, "rules_evaluated": 0}
        }))
        .expect("a minimal report");
        for (rule, model) in pairs {
            r.healthy.push(crate::report::Checked { rule: rule.to_string(), scope: [("model_name".to_string(), model.to_string())].into_iter().collect() });
        }
        r
    }

    #[test]
    fn a_failure_shows_expected_against_got() {
        let t = RuleTest {
            name: "t".into(),
            line: 1,
            interval_ms: 60_000,
            window_ms: 60_000,
            baseline_ms: 60_000,
            at_ms: 0,
            rules: None,
            group_by: vec!["model_name".into()],
            replica_label: "instance".into(),
            series: vec![],
            findings: vec![],
            healthy: Some(vec![
                Expected { rule: "slow-decode".into(), scope: [("model_name".to_string(), "m".to_string())].into_iter().collect(), reason: None },
                Expected { rule: "slow-prefill".into(), scope: [("model_name".to_string(), "m".to_string())].into_iter().collect(), reason: None },
            ]),
            not_evaluated: None,
            binding: Vec::new(),
        };
        match compare(&t, &report_with_healthy(&[("slow-decode", "m"), ("http-errors", "m")])) {
            Outcome::Fail(lines) => assert_eq!(
                lines,
                vec![
                    "--- expected",
                    "+++ got",
                    "healthy:",
                    "    slow-decode {model_name=\"m\"}",
                    "  - slow-prefill {model_name=\"m\"}",
                    "  + http-errors {model_name=\"m\"}",
                ]
            ),
            Outcome::Pass => panic!("should fail"),
        }
    }
}
