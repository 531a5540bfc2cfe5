//! Rule files: TOML in, validated [`RuleSet`] out, with errors that name the file and line.
//!
//! The built-in pack (`rules/*.toml` in the repository) is compiled into the binary, so the tool works
//! with nothing beside it. `--rules DIR` loads every `*.toml` in DIR after the built-ins: a signal or
//! rule with an existing id replaces it, a new id adds one, and `[thresholds]` entries override by name.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde::Deserialize;
use toml::Spanned;

use super::expr::{self, Expr};
use crate::report::Severity;
use crate::signals::{SignalDef, SignalKind};

/// The built-in rule pack, in load order.
pub const BUILTIN: &[(&str, &str)] = &[
    ("rules/signals.toml", include_str!("../../rules/signals.toml")),
    ("rules/thresholds.toml", include_str!("../../rules/thresholds.toml")),
    ("rules/profiles.toml", include_str!("../../rules/profiles.toml")),
    ("rules/latency.toml", include_str!("../../rules/latency.toml")),
    ("rules/capacity.toml", include_str!("../../rules/capacity.toml")),
    ("rules/errors.toml", include_str!("../../rules/errors.toml")),
    ("rules/scheduler.toml", include_str!("../../rules/scheduler.toml")),
    ("rules/workload.toml", include_str!("../../rules/workload.toml")),
    ("rules/fleet.toml", include_str!("../../rules/fleet.toml")),
    ("rules/gpu.toml", include_str!("../../rules/gpu.toml")),
    ("rules/router.toml", include_str!("../../rules/router.toml")),
    ("rules/slo.toml", include_str!("../../rules/slo.toml")),
];

/// A rule file that cannot be used, at its line and column (0 when the problem is the file or
/// directory as a whole: not shown then).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", position(*line, *column))]
pub struct RuleError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

fn position(line: usize, column: usize) -> String {
    match (line, column) {
        (0, _) => String::new(),
        (l, 0) => format!(":{l}"),
        (l, c) => format!(":{l}:{c}"),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub text: String,
    pub expr: Expr,
    /// Where its text starts in its file (line, column), for errors found once every file is
    /// merged; (0, 0) when it was not read from a file.
    pub at: (usize, usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleDef {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// One sentence shown with a finding: what it means.
    pub summary: String,
    /// What the rule detects and how (for `rules show`).
    pub description: String,
    /// Why it matters.
    pub why: String,
    /// Conditions that must all hold.
    pub when: Vec<Condition>,
    /// Signals shown as context beside the ones the conditions name.
    pub evidence: Vec<String>,
    /// Rules this one explains better when both match the same scope.
    pub supersedes: Vec<String>,
    pub steps: Vec<String>,
    pub references: Vec<String>,
    /// A computed recommendation to attach (`max_num_seqs`, `chunked_prefill`).
    pub recommend: Option<String>,
    /// How to decide when the primary signals are missing from the data (histograms relabelled away,
    /// gauge-only collectors): other conditions over the signals that do exist.
    pub stand_in: Option<StandIn>,
    /// One of the runbook's core checks: an all-clear in which a core rule could not be evaluated
    /// is not an all-clear.
    pub core: bool,
    /// Also decided over the window's last minutes: where the whole window does not meet the
    /// conditions, they are evaluated again with each signal that has a `recent` reading read
    /// there instead, against the same baseline, so an episode that began late in a long window
    /// is not averaged away (see [`RuleSet::recent_pairs`]).
    pub recent: bool,
    /// Where those minutes are worth reading (`[rule.recent] when`): a condition over the whole
    /// window, checked for each scope where the rule did not hold there (slow-decode: P95 ITL up a
    /// tenth). Without one (`recent = true`) they are read for every such scope.
    pub recent_when: Option<Condition>,
    /// What the metrics cannot show about this rule's problem, said when the rule is judged healthy
    /// and the caveat's condition holds (an aborted share of 0 on an engine that counts no client
    /// disconnect), so that "healthy" is not read as more than the data says.
    pub caveat: Option<Caveat>,
    /// `file:line` of the declaration.
    pub origin: String,
}

/// A blind spot of a rule: `text` is said (as a warning) for each scope the rule found healthy
/// while `when` held there.
#[derive(Debug, Clone, PartialEq)]
pub struct Caveat {
    pub when: Condition,
    pub text: String,
}

/// A rule's second way of deciding: used only when one of `missing` has no metric in the window
/// (never when a query failed or timed out), and then said in the finding.
#[derive(Debug, Clone, PartialEq)]
pub struct StandIn {
    /// Primary signals whose absence lets the stand-in decide.
    pub missing: Vec<String>,
    /// Conditions that must all hold, over signals that exist where the primary ones do not.
    pub when: Vec<Condition>,
}

impl RuleDef {
    /// Every condition the rule holds: `when`, the stand-in's, the caveat's and `[rule.recent]`'s.
    pub fn all_conditions(&self) -> impl Iterator<Item = &Condition> {
        self.when
            .iter()
            .chain(self.stand_in.iter().flat_map(|s| &s.when))
            .chain(self.caveat.iter().map(|c| &c.when))
            .chain(self.recent_when.iter())
    }

    /// Every signal the rule reads: the conditions' first, then the extra evidence, without repeats.
    pub fn signals(&self) -> Vec<String> {
        let mut out = self.primary_signals();
        for s in self.stand_in_signals() {
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// The signals the stand-in conditions read (none without a stand-in).
    pub fn stand_in_signals(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in self.stand_in.iter().flat_map(|s| &s.when) {
            for cmp in c.expr.comparisons() {
                if !out.contains(&cmp.signal) {
                    out.push(cmp.signal.clone());
                }
            }
        }
        out
    }

    /// The signals of the conditions and the evidence, without the stand-in's.
    pub fn primary_signals(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in &self.when {
            for cmp in c.expr.comparisons() {
                if !out.contains(&cmp.signal) {
                    out.push(cmp.signal.clone());
                }
            }
        }
        for e in &self.evidence {
            if !out.contains(e) {
                out.push(e.clone());
            }
        }
        out
    }
}

/// Signals, thresholds and rules after merging every file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleSet {
    pub signals: BTreeMap<String, SignalDef>,
    pub thresholds: BTreeMap<String, f64>,
    /// Where each threshold was last set and how it was written, for errors found once every file
    /// is in (a unit that does not fit its signals, a name nothing uses).
    pub threshold_origins: BTreeMap<String, Written>,
    /// In id order.
    pub rules: Vec<RuleDef>,
    /// Latency profiles by name: thresholds that replace the defaults when chosen.
    pub profiles: BTreeMap<String, Profile>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    pub description: String,
    pub thresholds: BTreeMap<String, f64>,
    /// Where each threshold was set and how, for errors found once all files are in.
    pub origins: BTreeMap<String, Written>,
}

/// A threshold as written in a rule file: its text (`"3s"`, `0.9`) and where.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    pub text: String,
    pub file: String,
    pub line: usize,
    pub column: usize,
}

impl Written {
    fn error(&self, message: String) -> RuleError {
        RuleError { file: self.file.clone(), line: self.line, column: self.column, message }
    }
}

impl RuleSet {
    pub fn rule(&self, id: &str) -> Option<&RuleDef> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// Each signal the rule reads (conditions and evidence) that has a reading over the window's
    /// last minutes, with that reading's id.
    pub fn recent_pairs(&self, rule: &RuleDef) -> Vec<(String, String)> {
        rule.primary_signals()
            .into_iter()
            .filter_map(|sig| {
                let recent = self.signals.get(&sig)?.recent.clone()?;
                Some((sig, recent))
            })
            .collect()
    }

    /// True when the rule is decided over the window's last minutes too, or when it explains
    /// better (supersedes) a rule that is: a finding of the last minutes alone is explained by it
    /// only if it holds there as well.
    pub fn reads_recent(&self, rule: &RuleDef) -> bool {
        rule.recent || rule.supersedes.iter().any(|s| self.rule(s).is_some_and(|r| r.recent))
    }

    /// The readings over the window's last minutes that a second reading needs: those of every
    /// rule with `recent = true` and of every rule that would absorb its findings
    /// ([`RuleSet::reads_recent`]), without the ones the rules read anyway.
    pub fn late_signals(&self) -> std::collections::BTreeSet<String> {
        let own: std::collections::BTreeSet<String> = self.rules.iter().flat_map(|r| r.signals()).collect();
        self.rules
            .iter()
            .filter(|r| self.reads_recent(r))
            .flat_map(|r| self.recent_pairs(r))
            .map(|(_, recent)| recent)
            .filter(|s| !own.contains(s))
            .collect()
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    thresholds: BTreeMap<String, Spanned<toml::Value>>,
    #[serde(default)]
    signal: Vec<Spanned<RawSignal>>,
    #[serde(default)]
    rule: Vec<Spanned<RawRule>>,
    #[serde(default)]
    profile: BTreeMap<String, Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
}

#[derive(Deserialize)]
struct RawSignal {
    id: String,
    title: String,
    unit: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    range: Option<String>,
    #[serde(default)]
    optional: bool,
    #[serde(default)]
    within_window: bool,
    #[serde(default)]
    recent: Option<String>,
    #[serde(default)]
    worse: Option<String>,
    #[serde(default)]
    moved_floor: Option<toml::Value>,
    #[serde(default)]
    symptom: bool,
    #[serde(default)]
    spare: bool,
    #[serde(default)]
    watch_replicas: bool,
    #[serde(flatten)]
    kind: toml::Table,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    id: String,
    title: String,
    severity: Severity,
    summary: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    why: String,
    when: Vec<Spanned<String>>,
    #[serde(default)]
    evidence: Vec<String>,
    #[serde(default)]
    supersedes: Vec<String>,
    #[serde(default)]
    steps: Vec<String>,
    #[serde(default)]
    references: Vec<String>,
    #[serde(default)]
    recommend: Option<String>,
    #[serde(default)]
    stand_in: Option<RawStandIn>,
    #[serde(default)]
    core: bool,
    #[serde(default)]
    recent: Option<RawRecent>,
    #[serde(default)]
    caveat: Option<RawCaveat>,
}

/// `recent = true`, or a `[rule.recent]` table with the condition under which the window's last
/// minutes are read.
enum RawRecent {
    Always(bool),
    Gated(RawRecentGate),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRecentGate {
    when: Spanned<String>,
}

impl<'de> Deserialize<'de> for RawRecent {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawRecent;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("true, false, or a [rule.recent] table with `when`")
            }
            fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<RawRecent, E> {
                Ok(RawRecent::Always(b))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawRecent, A::Error> {
                // Through the file's own map, so the condition keeps its place in the file.
                RawRecentGate::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(RawRecent::Gated)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCaveat {
    when: Spanned<String>,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStandIn {
    missing: Vec<String>,
    when: Vec<Spanned<String>>,
}

const UNITS: &[&str] = &[
    "seconds",
    "ratio",
    "per_second",
    "tokens_per_second",
    "requests_per_second",
    "tokens",
    "requests",
    "count",
    "factor",
    "ratio_per_hour",
    "megahertz",
    "celsius",
    "watts",
    "percent",
    "bytes",
    "bytes_per_second",
];

fn valid_id(id: &str, allow_underscore: bool) -> bool {
    !id.is_empty()
        && id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (allow_underscore && c == '_'))
}

/// The line of an `origin` (`file:line`) when it is in `file`.
fn defined_in(origin: &str, file: &str) -> Option<usize> {
    origin.rsplit_once(':').filter(|(f, _)| *f == file).and_then(|(_, line)| line.parse().ok())
}

/// A file's `[thresholds]` and `[profile.NAME]` tables into the set, each value with how and where
/// it was written.
fn load_thresholds(set: &mut RuleSet, raw: &RawFile, file: &str, lines: &crate::text::LineIndex) -> Result<(), RuleError> {
    let written = |value: &Spanned<toml::Value>| {
        let (line, column) = lines.line_col(value.span().start);
        let text = match value.get_ref() {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        Written { text, file: file.to_string(), line, column }
    };
    let value_of = |name: &str, value: &Spanned<toml::Value>| -> Result<f64, RuleError> {
        let w = written(value);
        match value.get_ref() {
            toml::Value::Float(f) => Ok(*f),
            toml::Value::Integer(i) => Ok(*i as f64),
            toml::Value::String(s) => expr::parse_quantity(s).map_err(|e| w.error(format!("threshold {name}: {}", e.message))),
            _ => Err(w.error(format!("threshold {name} must be a number or a quantity such as \"3s\""))),
        }
    };
    for (name, value) in &raw.thresholds {
        let v = value_of(name, value)?;
        set.thresholds.insert(name.clone(), v);
        set.threshold_origins.insert(name.clone(), written(value));
    }
    for (pname, table) in &raw.profile {
        let entry = set.profiles.entry(pname.clone()).or_default();
        for (name, value) in table.get_ref() {
            if name == "description" {
                entry.description = value.get_ref().as_str().unwrap_or_default().to_string();
                continue;
            }
            let v = value_of(name, value)?;
            entry.thresholds.insert(name.clone(), v);
            entry.origins.insert(name.clone(), written(value));
        }
    }
    Ok(())
}

/// A signal's watch fields (what else moved): the direction that hurts and the smallest change, or
/// why they do not parse.
fn watch_fields(s: &RawSignal) -> Result<(Option<crate::signals::Worse>, f64), String> {
    let worse = match s.worse.as_deref() {
        None => None,
        Some("up") => Some(crate::signals::Worse::Up),
        Some("down") => Some(crate::signals::Worse::Down),
        Some(other) => return Err(format!("worse = {other:?} must be \"up\" or \"down\" (the direction in which a change hurts)")),
    };
    let floor_text = s.moved_floor.as_ref().map(|v| match v {
        toml::Value::String(t) => t.clone(),
        other => other.to_string(),
    });
    let moved_floor = match &floor_text {
        None => 0.0,
        Some(f) => expr::parse_quantity(f)
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("moved_floor {f:?} is not a quantity of at least 0 in the signal's unit"))?,
    };
    if let Some(why) = floor_text.as_deref().and_then(|f| crate::units::unit_mismatch(f, &s.unit)) {
        return Err(format!("moved_floor {why}"));
    }
    if worse.is_none() && (s.moved_floor.is_some() || s.symptom || s.spare || s.watch_replicas) {
        return Err("moved_floor, symptom, spare and watch_replicas only apply to a signal with `worse`".to_string());
    }
    Ok((worse, moved_floor))
}

/// Parse one file's text into the set (adding or overriding by id; twice in one file is an error).
pub fn load_str(set: &mut RuleSet, file: &str, src: &str) -> Result<(), RuleError> {
    let lines = crate::text::LineIndex::new(src);
    let err_at = |byte: usize, message: String| {
        let (line, column) = lines.line_col(byte);
        RuleError { file: file.to_string(), line, column, message }
    };
    let raw: RawFile = toml::from_str(src).map_err(|e| {
        let at = e.span().map(|s| s.start).unwrap_or(0);
        err_at(at, e.message().trim().to_string())
    })?;

    load_thresholds(set, &raw, file, &lines)?;

    for s in raw.signal {
        let at = s.span().start;
        let s = s.into_inner();
        if !valid_id(&s.id, true) {
            return Err(err_at(at, format!("signal id {:?} must be lowercase letters, digits and '_'", s.id)));
        }
        if !UNITS.contains(&s.unit.as_str()) {
            return Err(err_at(at, format!("signal {}: unknown unit {:?} (one of {})", s.id, s.unit, UNITS.join(", "))));
        }
        let (worse, moved_floor) = watch_fields(&s).map_err(|m| err_at(at, format!("signal {}: {m}", s.id)))?;
        let kind: SignalKind = toml::Value::Table(s.kind)
            .try_into()
            .map_err(|e: toml::de::Error| err_at(at, format!("signal {}: {}", s.id, e.message().trim())))?;
        validate_kind(&kind).map_err(|m| err_at(at, format!("signal {}: {m}", s.id)))?;
        let range = match &s.range {
            None => None,
            Some(r) => Some(
                humantime::parse_duration(r)
                    .ok()
                    .filter(|d| d.as_secs() >= 1)
                    .ok_or_else(|| err_at(at, format!("signal {}: range {r:?} is not a duration such as \"5m\"", s.id)))?,
            ),
        };
        let (line, _) = lines.line_col(at);
        if let Some(twice) = set.signals.get(&s.id).and_then(|d| defined_in(&d.origin, file)) {
            return Err(err_at(at, format!("signal {} is defined twice in this file (first at line {twice}): give one of them another id", s.id)));
        }
        set.signals.insert(
            s.id.clone(),
            SignalDef {
                id: s.id,
                title: s.title,
                unit: s.unit,
                description: s.description,
                kind,
                range,
                optional: s.optional,
                within_window: s.within_window,
                recent: s.recent,
                worse,
                moved_floor,
                symptom: s.symptom,
                spare: s.spare,
                watch_replicas: s.watch_replicas,
                origin: format!("{file}:{line}"),
            },
        );
    }

    for r in raw.rule {
        let at = r.span().start;
        let r = r.into_inner();
        if !valid_id(&r.id, false) {
            return Err(err_at(at, format!("rule id {:?} must be lowercase words joined by '-' (e.g. slow-decode)", r.id)));
        }
        if r.when.is_empty() {
            return Err(err_at(at, format!("rule {}: `when` needs at least one condition", r.id)));
        }
        let conditions = |list: Vec<Spanned<String>>| parse_conditions(list, &r.id, file, &lines);
        let when = conditions(r.when)?;
        let stand_in = match r.stand_in {
            None => None,
            Some(s) => {
                if s.missing.is_empty() || s.when.is_empty() {
                    return Err(err_at(at, format!("rule {}: [rule.stand_in] needs `missing` (the primary signals it stands in for) and `when`", r.id)));
                }
                Some(StandIn { missing: s.missing, when: conditions(s.when)? })
            }
        };
        let caveat = match r.caveat {
            None => None,
            Some(c) => {
                if c.text.trim().is_empty() {
                    return Err(err_at(at, format!("rule {}: [rule.caveat] needs a `text` saying what the metrics cannot show", r.id)));
                }
                let when = conditions(vec![c.when])?.pop().ok_or_else(|| err_at(at, format!("rule {}: [rule.caveat] needs `when`", r.id)))?;
                Some(Caveat { when, text: c.text })
            }
        };
        let (recent, recent_when) = match r.recent {
            None | Some(RawRecent::Always(false)) => (false, None),
            Some(RawRecent::Always(true)) => (true, None),
            Some(RawRecent::Gated(g)) => (true, conditions(vec![g.when])?.pop()),
        };
        let (line, _) = lines.line_col(at);
        let def = RuleDef {
            id: r.id,
            title: r.title,
            severity: r.severity,
            summary: r.summary,
            description: r.description,
            why: r.why,
            when,
            evidence: r.evidence,
            supersedes: r.supersedes,
            steps: r.steps,
            references: r.references,
            recommend: r.recommend,
            stand_in,
            core: r.core,
            recent,
            recent_when,
            caveat,
            origin: format!("{file}:{line}"),
        };
        // A rule of the same id from another file (a built-in one) is replaced; twice in one file
        // is a mistake, and the last one would win silently.
        if let Some(twice) = set.rules.iter().find(|x| x.id == def.id).and_then(|x| defined_in(&x.origin, file)) {
            return Err(err_at(at, format!("rule {} is defined twice in this file (first at line {twice}): give one of them another id", def.id)));
        }
        match set.rules.iter_mut().find(|x| x.id == def.id) {
            Some(existing) => *existing = def,
            None => set.rules.push(def),
        }
    }
    set.rules.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(())
}

/// A rule's conditions, each parsed; a mistake is reported at its character in the file.
fn parse_conditions(list: Vec<Spanned<String>>, rule: &str, file: &str, lines: &crate::text::LineIndex) -> Result<Vec<Condition>, RuleError> {
    let mut when = Vec::new();
    for c in list {
        // +1 for the opening quote; offsets count characters of the condition.
        let start = c.span().start + 1;
        let text = c.into_inner();
        let parsed = expr::parse(&text).map_err(|e| {
            let (line, column) = lines.line_col(start + text.chars().take(e.offset).map(char::len_utf8).sum::<usize>());
            RuleError { file: file.to_string(), line, column, message: format!("rule {rule}: in condition {text:?}: {}", e.message) }
        })?;
        when.push(Condition { text, expr: parsed, at: lines.line_col(start) });
    }
    Ok(when)
}

fn validate_kind(kind: &SignalKind) -> Result<(), String> {
    let nonempty = |v: &Vec<String>, what: &str| {
        if v.is_empty() { Err(format!("`{what}` needs at least one metric name")) } else { Ok(()) }
    };
    match kind {
        SignalKind::Quantile { quantile, histogram, .. } => {
            if !(0.0..=1.0).contains(quantile) {
                return Err(format!("quantile {quantile} must be between 0 and 1"));
            }
            nonempty(histogram, "histogram")
        }
        SignalKind::Mean { histogram, model_label } => {
            if !model_label.is_empty() && !crate::prom::is_label_name(model_label) {
                return Err(format!("model_label {model_label:?} is not a label name"));
            }
            nonempty(histogram, "histogram")
        }
        SignalKind::Router { measure, family, denominator, r#match, worker_label, equals, workers, engines } => {
            use crate::signals::RouterMeasure as M;
            crate::signals::parse_match(r#match).map_err(|e| format!("match: {e}"))?;
            let worker_level = matches!(measure, M::Rate | M::Spread | M::HeldOut);
            if worker_level == worker_label.is_empty() {
                return Err("a router signal's rate, spread and held_out read a worker-level family (`worker_label`); its mean and ratio a router-level one (none)".into());
            }
            if !worker_label.is_empty() && !crate::prom::is_label_name(worker_label) {
                return Err(format!("worker_label {worker_label:?} is not a label name"));
            }
            if (*measure == M::Ratio) == denominator.is_empty() {
                return Err("`denominator` goes with the ratio measure, and only with it".into());
            }
            if !equals.is_finite() {
                return Err("`equals` must be a number".into());
            }
            nonempty(family, "family")?;
            nonempty(workers, "workers")?;
            nonempty(engines, "engines")
        }
        SignalKind::Remainder { histogram, minus } => {
            nonempty(histogram, "histogram")?;
            if minus.is_empty() {
                return Err("`minus` needs at least one histogram to subtract".into());
            }
            minus.iter().try_for_each(|m| nonempty(m, "minus"))
        }
        SignalKind::Rate { counter, r#match, .. } => {
            crate::signals::parse_match(r#match).map_err(|e| format!("match: {e}"))?;
            nonempty(counter, "counter")
        }
        SignalKind::Ratio { numerator, denominator, attribute_via, per, per_at_least, .. } => {
            if !per_at_least.is_finite() || *per_at_least < 0.0 {
                return Err(format!("per_at_least {per_at_least} must be a number of at least 0"));
            }
            if !per.is_empty() && !attribute_via.is_empty() {
                return Err("`per` is not combined with `attribute_via`".into());
            }
            crate::signals::parse_match(&numerator.r#match).map_err(|e| format!("numerator match: {e}"))?;
            crate::signals::parse_match(&denominator.r#match).map_err(|e| format!("denominator match: {e}"))?;
            nonempty(&numerator.counter, "numerator.counter")?;
            nonempty(&denominator.counter, "denominator.counter")
        }
        SignalKind::Gauge { less: Some(l), attribute_via, .. } if l.gauge.trim().is_empty() || !attribute_via.is_empty() => {
            Err("`less` names one gauge, and is not combined with `attribute_via`".into())
        }
        SignalKind::Gauge { less: Some(l), .. } if crate::signals::parse_match(&l.r#match).is_err() => {
            crate::signals::parse_match(&l.r#match).map(|_| ()).map_err(|e| format!("less.match: {e}"))
        }
        SignalKind::Gauge { bits, over, less, .. } if !bits.is_empty() && (over.is_some() || less.is_some()) => {
            Err("`bits` reads a bitmask, and is not combined with `over` or `less`".into())
        }
        SignalKind::Gauge { scale: Some(k), .. } if !k.is_finite() || *k <= 0.0 => Err(format!("scale {k} must be a number above 0")),
        SignalKind::Gauge { over: Some(o), less, .. } if o.trim().is_empty() || less.is_some() => {
            Err("`over` names one gauge, and is not combined with `less`".into())
        }
        SignalKind::Gauge { bits, .. } | SignalKind::ReplicasOver { bits, .. } if bits.iter().any(|b| !b.is_power_of_two()) => {
            let bad = bits.iter().find(|b| !b.is_power_of_two()).copied().unwrap_or_default();
            Err(format!("bits: {bad} is not a single bit (a power of two: 1, 2, 4, 8, ...)"))
        }
        SignalKind::Gauge { gauge, r#match, .. } | SignalKind::Slope { gauge, r#match } => {
            crate::signals::parse_match(r#match).map_err(|e| format!("match: {e}"))?;
            nonempty(gauge, "gauge")
        }
        SignalKind::ActiveShare { counter } | SignalKind::Spread { counter, .. } => nonempty(counter, "counter"),
        SignalKind::QueueWait { gauge, counter } => {
            nonempty(gauge, "gauge")?;
            nonempty(counter, "counter")
        }
        SignalKind::GiveUps { started, finished, running, .. } => {
            nonempty(started, "started")?;
            nonempty(finished, "finished")?;
            nonempty(running, "running")
        }
        SignalKind::StallShare { counter, running, waiting, .. } => {
            nonempty(counter, "counter")?;
            nonempty(running, "running")?;
            nonempty(waiting, "waiting")
        }
        SignalKind::Fill { gauge } | SignalKind::Vanished { gauge, .. } | SignalKind::ReplicasOver { gauge, .. } => {
            nonempty(gauge, "gauge")
        }
        SignalKind::Outlier { histogram, gauge, quantile, .. } => {
            if histogram.is_empty() == gauge.is_empty() {
                return Err("an outlier signal names either `histogram` or `gauge`".into());
            }
            if !(0.0..=1.0).contains(quantile) {
                return Err(format!("quantile {quantile} must be between 0 and 1"));
            }
            Ok(())
        }
        SignalKind::SloBurn { histogram, target, objective } => {
            for (what, v) in [("target", target), ("objective", objective)] {
                if !v.trim().starts_with('$') {
                    expr::parse_quantity(v).map_err(|e| format!("{what}: {}", e.message))?;
                }
            }
            nonempty(histogram, "histogram")
        }
    }
}

/// An error at a declaration's `origin` (`file:line`), found once every file is merged.
fn at_origin(origin: &str, message: String) -> RuleError {
    let (file, line) = origin.rsplit_once(':').map(|(f, l)| (f.to_string(), l.parse().unwrap_or(0))).unwrap_or((origin.to_string(), 0));
    RuleError { file, line, column: 1, message }
}

/// One place where a threshold is compared with a signal's values.
#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdUse {
    /// Who uses it, for an error: `rule slow-decode compares itl_p95 with it`.
    pub by: String,
    /// The unit of the values it is compared with.
    pub unit: String,
}

/// Thresholds read by a stage of the diagnosis rather than by a condition: (name, who uses it, unit).
pub const STAGE_THRESHOLDS: &[(&str, &str, &str)] = &[
    (super::COLD_START_WARM_UP, "the cold-start stage takes it as the longest slowdown after a replica (re)starts that is still warm-up", "seconds"),
    (super::MOVED_RATIO, "what else moved takes it as the smallest factor past a signal's baseline median that is a change", "factor"),
    (super::MOVED_Z, "what else moved takes it as the fewest robust standard deviations past a signal's baseline median that are a change", "factor"),
    (super::MOVED_DURATION, "what else moved takes it as the shortest stretch a signal must stay moved", "seconds"),
];

/// Where each threshold is used: the conditions that compare a signal with `$name`, and the SLO
/// burn-rate signals that take it as their latency target or objective.
pub fn threshold_uses(set: &RuleSet) -> BTreeMap<String, Vec<ThresholdUse>> {
    let mut out: BTreeMap<String, Vec<ThresholdUse>> = BTreeMap::new();
    for (name, by, unit) in STAGE_THRESHOLDS {
        out.entry(name.to_string()).or_default().push(ThresholdUse { by: by.to_string(), unit: unit.to_string() });
    }
    for r in &set.rules {
        for c in r.all_conditions() {
            for cmp in c.expr.comparisons() {
                let (expr::Rhs::Named { name }, Some(d)) = (&cmp.rhs, set.signals.get(&cmp.signal)) else { continue };
                let by = format!("rule {} compares {} with it", r.id, cmp.signal);
                out.entry(name.clone()).or_default().push(ThresholdUse { by, unit: d.unit.clone() });
            }
        }
    }
    for d in set.signals.values() {
        if let SignalKind::SloBurn { target, objective, .. } = &d.kind {
            for (v, what, unit) in [(target, "latency target", "seconds"), (objective, "objective", "ratio")] {
                if let Some(name) = v.trim().strip_prefix('$') {
                    let by = format!("signal {} takes it as its {what}", d.id);
                    out.entry(name.to_string()).or_default().push(ThresholdUse { by, unit: unit.into() });
                }
            }
        }
    }
    out
}

/// Why threshold `name`, written as `text`, does not fit the values it is compared with, if it
/// does not (`"90%"` for a latency in seconds), for the caller to put after the name.
pub fn unit_misfit(name: &str, text: &str, uses: &BTreeMap<String, Vec<ThresholdUse>>) -> Option<String> {
    uses.get(name)?
        .iter()
        .find_map(|u| crate::units::unit_mismatch(text, &u.unit).map(|why| format!("{why} ({})", u.by)))
}

/// Every threshold's unit against the signals it is compared with (in `[thresholds]` and in the
/// profiles), a profile's names against the thresholds, an SLO signal's `$name` against them.
fn validate_thresholds(set: &RuleSet, uses: &BTreeMap<String, Vec<ThresholdUse>>) -> Result<(), RuleError> {
    for (name, p) in &set.profiles {
        for (threshold, w) in &p.origins {
            if !set.thresholds.contains_key(threshold) {
                return Err(w.error(format!(
                    "profile {name} sets {threshold}, which no [thresholds] table defines: check the name against the built-in rules/thresholds.toml, or define it under [thresholds].{}",
                    crate::text::did_you_mean(threshold, set.thresholds.keys().map(String::as_str))
                )));
            }
            if let Some(why) = unit_misfit(threshold, &w.text, uses) {
                return Err(w.error(format!("profile {name}: threshold {threshold}: {why}")));
            }
        }
    }
    for (threshold, w) in &set.threshold_origins {
        if let Some(why) = unit_misfit(threshold, &w.text, uses) {
            return Err(w.error(format!("threshold {threshold}: {why}")));
        }
    }
    for d in set.signals.values() {
        if let SignalKind::SloBurn { target, objective, .. } = &d.kind {
            for v in [target, objective] {
                if let Some(name) = v.trim().strip_prefix('$') {
                    if !set.thresholds.contains_key(name) {
                        return Err(at_origin(&d.origin, format!("signal {}: ${name} is a threshold no [thresholds] table defines", d.id)));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A threshold a file of the user's defines that no condition or signal uses: a misspelling (not
/// in the built-in pack, where a rule file may replace the one rule that used it).
fn unused_threshold(set: &RuleSet, uses: &BTreeMap<String, Vec<ThresholdUse>>) -> Result<(), RuleError> {
    for (threshold, w) in &set.threshold_origins {
        if !uses.contains_key(threshold) && !BUILTIN.iter().any(|(f, _)| *f == w.file) {
            let others = set.thresholds.keys().filter(|k| uses.contains_key(*k)).map(String::as_str);
            return Err(w.error(format!(
                "threshold {threshold} is used by no rule condition and no signal, so it changes nothing.{} Name a threshold the rules use (`vllm-diag rules show RULE` lists them), or use ${threshold} in a condition",
                crate::text::did_you_mean(threshold, others)
            )));
        }
    }
    Ok(())
}

/// Check that every reference resolves, once all files are merged.
pub fn validate(set: &RuleSet) -> Result<(), RuleError> {
    for d in set.signals.values() {
        let Some(recent) = &d.recent else { continue };
        let fail = |message: String| at_origin(&d.origin, message);
        let Some(r) = set.signals.get(recent) else {
            return Err(fail(format!("signal {}: recent = {recent:?} names no declared [[signal]]", d.id)));
        };
        if r.range.is_none() || !r.within_window || d.range.is_some() {
            return Err(fail(format!(
                "signal {}: its recent reading {recent:?} must have a fixed `range` with `within_window = true`, and {} itself no range (it is read over the whole window)",
                d.id, d.id
            )));
        }
        if r.unit != d.unit || std::mem::discriminant(&r.kind) != std::mem::discriminant(&d.kind) || r.recent.is_some() {
            return Err(fail(format!(
                "signal {}: its recent reading {recent:?} must be of the same kind and unit, and have no recent reading of its own",
                d.id
            )));
        }
    }
    let uses = threshold_uses(set);
    validate_thresholds(set, &uses)?;
    for r in &set.rules {
        let fail = |message: String| at_origin(&r.origin, message);
        // An error about one condition points at it, in the rule's file.
        let fail_in = |c: &Condition, message: String| {
            let mut e = fail(message);
            if c.at.0 > 0 {
                (e.line, e.column) = c.at;
            }
            e
        };
        if r.recent && set.recent_pairs(r).is_empty() {
            return Err(fail(format!(
                "rule {}: recent = true (or [rule.recent]), but none of the signals it reads has a `recent` reading over the window's last minutes",
                r.id
            )));
        }
        if let Some(s) = &r.stand_in {
            if let Some(m) = s.missing.iter().find(|m| !r.primary_signals().contains(m)) {
                return Err(fail(format!(
                    "rule {}: stand_in.missing names {m:?}, which none of the rule's own conditions or evidence reads",
                    r.id
                )));
            }
        }
        if let Some(c) = &r.recent_when {
            if let Some(cmp) = c.expr.comparisons().into_iter().find(|cmp| !r.signals().contains(&cmp.signal)) {
                return Err(fail_in(
                    c,
                    format!(
                        "rule {}: [rule.recent] condition {:?} reads signal {:?}, which the rule itself does not read (it is checked over the whole window's readings of the rule's own signals)",
                        r.id, c.text, cmp.signal
                    ),
                ));
            }
        }
        if let Some(c) = &r.caveat {
            if let Some(cmp) = c.when.expr.comparisons().into_iter().find(|cmp| !r.signals().contains(&cmp.signal)) {
                return Err(fail_in(
                    &c.when,
                    format!(
                        "rule {}: caveat condition {:?} reads signal {:?}, which the rule itself does not read (a caveat may only read the rule's own signals)",
                        r.id, c.when.text, cmp.signal
                    ),
                ));
            }
        }
        for c in r.all_conditions() {
            for cmp in c.expr.comparisons() {
                if !set.signals.contains_key(&cmp.signal) {
                    return Err(fail_in(
                        c,
                        format!(
                            "rule {}: condition {:?} names signal {:?}, which no [[signal]] declares (known: {})",
                            r.id,
                            c.text,
                            cmp.signal,
                            set.signals.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
                if let expr::Rhs::Named { name } = &cmp.rhs {
                    if !set.thresholds.contains_key(name) {
                        return Err(fail_in(
                            c,
                            format!(
                                "rule {}: condition {:?} uses ${name}, which no [thresholds] table defines.{}",
                                r.id,
                                c.text,
                                crate::text::did_you_mean(name, set.thresholds.keys().map(String::as_str))
                            ),
                        ));
                    }
                }
                if let (expr::Rhs::Value { text, .. }, Some(d)) = (&cmp.rhs, set.signals.get(&cmp.signal)) {
                    if let Some(why) = crate::units::unit_mismatch(text, &d.unit) {
                        return Err(fail_in(c, format!("rule {}: condition {:?} compares {}: {why}", r.id, c.text, cmp.signal)));
                    }
                }
            }
        }
        for e in &r.evidence {
            if !set.signals.contains_key(e) {
                return Err(fail(format!("rule {}: evidence names unknown signal {e:?}", r.id)));
            }
        }
        if let Some(rec) = &r.recommend {
            if !crate::recommend::KNOWN.contains(&rec.as_str()) {
                return Err(fail(format!("rule {}: unknown recommendation {rec:?} (known: {})", r.id, crate::recommend::KNOWN.join(", "))));
            }
        }
        for s in &r.supersedes {
            if set.rule(s).is_none() {
                return Err(fail(format!("rule {}: supersedes unknown rule {s:?}", r.id)));
            }
        }
    }
    // Last, once every reference is known good.
    unused_threshold(set, &uses)
}

impl RuleSet {
    /// Replace the default thresholds with a profile's.
    pub fn apply_profile(&mut self, name: &str) -> Result<(), String> {
        let p = self.profiles.get(name).ok_or_else(|| {
            format!("--profile {name:?}: no such profile. Known profiles: {}", self.profiles.keys().cloned().collect::<Vec<_>>().join(", "))
        })?;
        for (k, v) in p.thresholds.clone() {
            self.thresholds.insert(k, v);
        }
        Ok(())
    }
}

/// The built-in pack alone.
pub fn load_builtin() -> Result<RuleSet, RuleError> {
    load_with_overrides(None)
}

/// The built-in pack as parsed, once per process: by [`preload`]'s thread if it got there first,
/// else by whoever asks first (a second caller waits for the first one's result).
static PARSED_BUILTIN: OnceLock<Result<RuleSet, RuleError>> = OnceLock::new();

fn parse_builtin() -> Result<RuleSet, RuleError> {
    let mut set = RuleSet::default();
    for (name, src) in BUILTIN {
        load_str(&mut set, name, src)?;
    }
    Ok(set)
}

/// Start parsing the built-in pack on a thread of its own, so that it overlaps what the process
/// does before it needs the rules (parsing the command line, reading the configuration, building
/// the HTTP client): about a millisecond off every run's start on a machine with a spare core. A
/// process that never asks for the rules loses nothing but that thread's work; if the thread
/// cannot be started, the first caller parses the pack itself.
pub fn preload() {
    let _ = std::thread::Builder::new().name("rules".into()).spawn(|| PARSED_BUILTIN.get_or_init(parse_builtin).is_ok());
}

/// The built-in pack, then every `*.toml` in `dir` (sorted by name).
pub fn load_with_overrides(dir: Option<&Path>) -> Result<RuleSet, RuleError> {
    let mut set = PARSED_BUILTIN.get_or_init(parse_builtin).clone()?;
    if let Some(dir) = dir {
        let shown = dir.display().to_string();
        let io_err = |e: std::io::Error| RuleError {
            file: shown.clone(),
            line: 0,
            column: 0,
            message: format!("cannot read the rules directory: {e} (--rules takes a directory of *.toml files)"),
        };
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .map_err(io_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(RuleError { file: shown, line: 0, column: 0, message: "no *.toml rule files in this directory (--rules)".into() });
        }
        for f in files {
            let name = f.display().to_string();
            let src = std::fs::read_to_string(&f)
                .map_err(|e| RuleError { file: name.clone(), line: 0, column: 0, message: format!("cannot read: {e}") })?;
            load_str(&mut set, &name, &src)?;
        }
    }
    validate(&set)?;
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pack_read_ahead_on_its_own_thread_is_the_pack_read_in_place() {
        let cached = load_builtin().unwrap();
        // What the loader returned came through the process's one parse (the cell `preload` fills).
        assert!(PARSED_BUILTIN.get().is_some_and(Result::is_ok));
        let fresh = parse_builtin().unwrap();
        assert_eq!(cached, fresh);
        // Each caller gets its own copy to change (profiles, the file's thresholds).
        let mut changed = load_builtin().unwrap();
        changed.thresholds.insert("x".into(), 1.0);
        assert_eq!(load_builtin().unwrap(), fresh);
    }

    #[test]
    fn the_builtin_pack_loads_and_validates() {
        let set = load_builtin().unwrap();
        for id in ["load-exceeds-capacity", "slow-prefill", "slow-decode", "severe-saturation", "kv-cache-pressure", "http-errors"] {
            assert!(set.rule(id).is_some(), "missing {id}");
        }
    }

    #[test]
    fn a_toml_syntax_error_names_file_line_and_column() {
        let mut set = RuleSet::default();
        let e = load_str(&mut set, "x.toml", "[[rule]]\nid = \"a\"\ntitle = \n").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("x.toml", 3), "{e}");
    }

    #[test]
    fn a_bad_condition_points_inside_the_string() {
        let mut set = RuleSet::default();
        let src = "[[rule]]\nid = \"a\"\ntitle = \"A\"\nseverity = \"warning\"\nsummary = \"s\"\nwhen = [\"ttft_p95 > 3 sec\"]\n";
        let e = load_str(&mut set, "x.toml", src).unwrap_err();
        assert_eq!(e.line, 6);
        assert_eq!(e.column, 23, "{e}"); // the "s" of "sec"
        assert!(e.message.contains("rule a"), "{e}");
    }

    #[test]
    fn unknown_fields_severities_and_signals_are_rejected_with_their_line() {
        let mut set = RuleSet::default();
        let e = load_str(&mut set, "x.toml", "[[rule]]\nid = \"a\"\ntitle = \"A\"\nseverity = \"fatal\"\nsummary = \"s\"\nwhen = [\"x > 1\"]\n").unwrap_err();
        assert!(e.message.contains("fatal") || e.message.contains("variant"), "{e}");
        let e = load_str(&mut set, "x.toml", "[[signal]]\nid = \"s\"\ntitle = \"S\"\nunit = \"seconds\"\nkind = \"quantile\"\nquantle = 0.9\nhistogram = [\"h\"]\n").unwrap_err();
        assert_eq!(e.line, 1, "{e}");
        assert!(e.message.contains("quantle"), "{e}");

        let mut set = load_builtin().unwrap();
        load_str(&mut set, "y.toml", "[[rule]]\nid = \"b\"\ntitle = \"B\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"no_such_signal > 1\"]\n").unwrap();
        let e = validate(&set).unwrap_err();
        // Found once every file is merged, and reported at the condition that names it.
        assert_eq!((e.file.as_str(), e.line, e.column), ("y.toml", 6, 10), "{e}");
        assert!(e.message.contains("no_such_signal"), "{e}");
    }

    #[test]
    fn profiles_replace_the_default_thresholds() {
        let mut set = load_builtin().unwrap();
        assert_eq!(set.thresholds["ttft_target"], 0.5);
        set.apply_profile("code-completion").unwrap();
        assert_eq!(set.thresholds["ttft_target"], 0.2);
        assert_eq!(set.thresholds["ttft_p95_high"], 1.2);
        for p in ["chat", "code-completion", "batch", "rag", "agentic"] {
            assert!(set.profiles.contains_key(p), "{p}");
        }
        let e = set.apply_profile("gaming").unwrap_err();
        assert!(e.contains("chat"), "{e}");
    }

    #[test]
    fn a_user_file_overrides_a_builtin_rule_by_id() {
        let mut set = load_builtin().unwrap();
        let n = set.rules.len();
        load_str(&mut set, "mine.toml", "[[rule]]\nid = \"slow-decode\"\ntitle = \"Mine\"\nseverity = \"critical\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\n").unwrap();
        assert_eq!(set.rules.len(), n);
        assert_eq!(set.rule("slow-decode").unwrap().title, "Mine");
        assert_eq!(set.rule("slow-decode").unwrap().origin, "mine.toml:1");
    }

    #[test]
    fn an_error_about_a_whole_file_or_directory_shows_no_position() {
        let e = |line, column| RuleError { file: "rd".into(), line, column, message: "m".into() }.to_string();
        assert_eq!((e(0, 0), e(3, 0), e(3, 7)), ("rd: m".into(), "rd:3: m".into(), "rd:3:7: m".into()));
    }

    #[test]
    fn a_watched_signal_says_which_way_hurts_and_its_floor_fits_its_unit() {
        let sig = |extra: &str| format!("[[signal]]\nid = \"w\"\ntitle = \"T\"\nunit = \"seconds\"\nkind = \"quantile\"\nquantile = 0.9\nhistogram = [\"h\"]\n{extra}\n");
        let load = |extra: &str| load_str(&mut load_builtin().unwrap(), "mine.toml", &sig(extra)).map(|()| ());
        let mut set = load_builtin().unwrap();
        load_str(&mut set, "mine.toml", &sig("worse = \"up\"\nsymptom = true\nmoved_floor = \"250ms\"")).unwrap();
        let d = &set.signals["w"];
        assert_eq!((d.worse, d.moved_floor, d.symptom, d.spare), (Some(crate::signals::Worse::Up), 0.25, true, false));
        load("worse = \"down\"\nmoved_floor = 2").unwrap();
        let e = load("worse = \"sideways\"").unwrap_err();
        assert!(e.message.contains("must be \"up\" or \"down\""), "{e}");
        let e = load("worse = \"up\"\nmoved_floor = \"10%\"").unwrap_err();
        assert!(e.message.contains("moved_floor \"10%\" is a percentage, but it is compared with values in seconds"), "{e}");
        let e = load("moved_floor = \"1s\"").unwrap_err();
        assert!(e.message.contains("only apply to a signal with `worse`"), "{e}");
        // The built-in pack watches latency up and the prefix-cache hit ratio down.
        let set = load_builtin().unwrap();
        assert_eq!(set.signals["ttft_p95"].worse, Some(crate::signals::Worse::Up));
        assert_eq!(set.signals["prefix_hit_ratio"].worse, Some(crate::signals::Worse::Down));
        assert!(set.signals["external_prefix_hit_ratio"].spare);
    }

    #[test]
    fn a_caveat_reads_only_the_rules_own_signals_and_says_something() {
        let rule = |caveat: &str| format!("[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\n\n[rule.caveat]\n{caveat}\n");
        let mut set = load_builtin().unwrap();
        load_str(&mut set, "mine.toml", &rule("when = \"itl_p95 <= 0\"\ntext = \"blind\"")).unwrap();
        assert_eq!(set.rule("mine").unwrap().caveat.as_ref().map(|c| c.text.as_str()), Some("blind"));
        validate(&set).unwrap();
        let mut set = load_builtin().unwrap();
        load_str(&mut set, "mine.toml", &rule("when = \"abort_share <= 0\"\ntext = \"blind\"")).unwrap();
        let e = validate(&set).unwrap_err();
        assert!(e.message.contains("caveat condition \"abort_share <= 0\" reads signal \"abort_share\", which the rule itself does not read"), "{e}");
        let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &rule("when = \"itl_p95 <= 0\"\ntext = \" \"")).unwrap_err();
        assert!(e.message.contains("[rule.caveat] needs a `text`"), "{e}");
        let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &rule("when = \"itl_p95 <<= 0\"\ntext = \"t\"")).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("mine.toml", 9), "{e}");
    }

    #[test]
    fn a_recent_reading_must_be_a_short_read_of_the_same_kind_and_a_recent_rule_must_have_one() {
        let sig = |id: &str, extra: &str| format!("[[signal]]\nid = \"{id}\"\ntitle = \"T\"\nunit = \"seconds\"\nkind = \"quantile\"\nquantile = 0.9\nhistogram = [\"h\"]\n{extra}\n");
        let check = |text: &str| {
            let mut set = load_builtin().unwrap();
            load_str(&mut set, "mine.toml", text).unwrap();
            validate(&set)
        };
        check(&(sig("a", "recent = \"a_recent\"") + &sig("a_recent", "range = \"5m\"\nwithin_window = true"))).unwrap();
        let e = check(&sig("a", "recent = \"nope\"")).unwrap_err();
        assert!(e.message.contains("recent = \"nope\" names no declared [[signal]]") && e.file == "mine.toml" && e.line == 1, "{e}");
        let e = check(&(sig("a", "recent = \"a_recent\"") + &sig("a_recent", "range = \"5m\""))).unwrap_err();
        assert!(e.message.contains("must have a fixed `range` with `within_window = true`"), "{e}");
        let e = check(&(sig("a", "recent = \"a_recent\"") + &sig("a_recent", "range = \"5m\"\nwithin_window = true").replace("seconds", "ratio"))).unwrap_err();
        assert!(e.message.contains("same kind and unit"), "{e}");
        // A rule that asks for a second reading must read something that has one.
        let rule = |when: &str| format!("[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nrecent = true\nwhen = [\"{when}\"]\n");
        check(&rule("itl_p95 > 1s")).unwrap();
        let e = check(&rule("ttft_p95 > 1s")).unwrap_err();
        assert!(e.message.contains("recent = true (or [rule.recent]), but none of the signals it reads has a `recent` reading"), "{e}");
        // Its condition: a table with `when`, over the rule's own signals, reported at its place.
        let gated = |when: &str| format!("[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\n\n[rule.recent]\nwhen = \"{when}\"\n");
        check(&gated("itl_p95 >= 1.1x baseline")).unwrap();
        let mut set = load_builtin().unwrap();
        load_str(&mut set, "mine.toml", &gated("itl_p95 >= 1.1x baseline")).unwrap();
        let mine = set.rule("mine").unwrap();
        assert!(mine.recent && mine.recent_when.as_ref().is_some_and(|c| c.text == "itl_p95 >= 1.1x baseline"));
        let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &gated("itl_p95 >=> 1.1x baseline")).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("mine.toml", 9), "{e}");
        assert!(e.message.contains("rule mine: in condition \"itl_p95 >=> 1.1x baseline\""), "{e}");
        let e = check(&gated("ttft_p95 >= 1.1x baseline")).unwrap_err();
        assert!(e.message.contains("[rule.recent] condition \"ttft_p95 >= 1.1x baseline\" reads signal \"ttft_p95\", which the rule itself does not read"), "{e}");
        // Found once every file is merged, it is still reported at the condition.
        assert_eq!((e.file.as_str(), e.line, e.column), ("mine.toml", 9, 9), "{e}");
        let e = check(&gated("itl_p95 >= $nope")).unwrap_err();
        assert!(e.message.contains("uses $nope, which no [thresholds] table defines") && e.line == 9, "{e}");
        let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &gated("itl_p95 > 1s").replace("[rule.recent]\n", "[rule.recent]\nrange = \"5m\"\n")).unwrap_err();
        assert!(e.message.contains("unknown field `range`"), "{e}");
        let e = load_str(&mut load_builtin().unwrap(), "mine.toml", &rule("itl_p95 > 1s").replace("recent = true", "recent = \"yes\"")).unwrap_err();
        assert!(e.message.contains("true, false, or a [rule.recent] table with `when`"), "{e}");
        assert!(load_builtin().unwrap().rule("slow-decode").unwrap().recent_when.is_some(), "the built-in slow-decode declares its condition");
        // The built-in slow-decode reads four signals there.
        let set = load_builtin().unwrap();
        let pairs = set.recent_pairs(set.rule("slow-decode").unwrap());
        assert!(pairs.contains(&("itl_p95".to_string(), "itl_p95_recent".to_string())), "{pairs:?}");
        // The second reading asks slow-decode's readings and those of the rules that would absorb
        // its findings (workload-shift's request shape), not what a rule reads anyway.
        let late = set.late_signals();
        for s in ["itl_p95_recent", "queue_p95_recent", "prompt_len_recent", "max_tokens_recent"] {
            assert!(late.contains(s), "{s} not in {late:?}");
        }
        assert!(!late.contains("running_recent") && !late.contains("preemption_recent"), "{late:?}");
    }

    #[test]
    fn every_built_in_threshold_changes_something() {
        // A threshold no condition or signal reads is a knob that turns nothing.
        let set = load_builtin().unwrap();
        let uses = threshold_uses(&set);
        let unused: Vec<_> = set.thresholds.keys().filter(|k| !uses.contains_key(*k)).collect();
        assert!(unused.is_empty(), "built-in thresholds no rule or signal uses: {unused:?}");
        for (name, w) in &set.threshold_origins {
            assert_eq!(unit_misfit(name, &w.text, &uses), None);
        }
    }

    #[test]
    fn a_threshold_must_be_used_and_written_in_its_signals_unit() {
        let check = |src: &str| {
            let mut set = load_builtin().unwrap();
            load_str(&mut set, "mine.toml", src)?;
            validate(&set)
        };
        check("[thresholds]\nttft_p95_high = \"1.5s\"\nkv_usage_high = 0.85\n").unwrap();
        // Misspelt: used by nothing, reported at its line with the name meant.
        let e = check("# mine\n[thresholds]\nttft_p95_hgh = \"1.5s\"\n").unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("mine.toml", 3), "{e}");
        assert!(e.message.contains("threshold ttft_p95_hgh is used by no rule condition and no signal") && e.message.contains("Did you mean \"ttft_p95_high\"?"), "{e}");
        // A new threshold for a rule of one's own is used.
        let own = "[thresholds]\nmy_ceiling = \"2s\"\n\n[[rule]]\nid = \"mine\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > $my_ceiling\"]\n";
        check(own).unwrap();
        // A percentage for a latency in seconds, and a duration for a share.
        let e = check("[thresholds]\nttft_p95_high = \"90%\"\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("threshold ttft_p95_high: \"90%\" is a percentage, but it is compared with values in seconds") && e.message.contains("compares ttft_p95 with it"), "{e}");
        let e = check("[thresholds]\nkv_usage_high = \"90s\"\n").unwrap_err();
        assert!(e.message.contains("\"90s\" is a duration") && e.message.contains("a percentage (\"90%\") or a fraction (0.9)"), "{e}");
        // An SLO burn rate's target is a latency, its objective a share.
        let e = check("[thresholds]\nlatency_objective = \"99s\"\n").unwrap_err();
        assert!(e.message.contains("takes it as its objective"), "{e}");
        let e = check("[thresholds]\nttft_target = \"50%\"\n").unwrap_err();
        assert!(e.message.contains("takes it as its latency target"), "{e}");
        // The same in a profile, and for a condition's own number.
        let e = check("[profile.mine]\nttft_target = \"50%\"\n").unwrap_err();
        assert!(e.message.starts_with("profile mine: threshold ttft_target: \"50%\" is a percentage") && e.line == 2, "{e}");
        let e = check("[profile.mine]\nttft_targt = \"500ms\"\n").unwrap_err();
        assert!(e.message.contains("Did you mean \"ttft_target\"?"), "{e}");
        let e = check(&own.replace("$my_ceiling", "90%").replace("my_ceiling = \"2s\"\n", "")).unwrap_err();
        assert!(e.message.contains("rule mine: condition \"itl_p95 > 90%\" compares itl_p95: \"90%\" is a percentage"), "{e}");
        let e = check(&own.replace("$my_ceiling", "$my_celing")).unwrap_err();
        assert!(e.message.contains("uses $my_celing, which no [thresholds] table defines. Did you mean \"my_ceiling\"?"), "{e}");
    }

    #[test]
    fn a_rule_or_signal_defined_twice_in_one_file_is_an_error_at_the_second() {
        let rule = |id: &str| format!("[[rule]]\nid = \"{id}\"\ntitle = \"T\"\nseverity = \"info\"\nsummary = \"s\"\nwhen = [\"itl_p95 > 1s\"]\n");
        let mut set = load_builtin().unwrap();
        let e = load_str(&mut set, "mine.toml", &format!("{}\n{}", rule("mine"), rule("mine"))).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("mine.toml", 8), "{e}");
        assert!(e.message.contains("rule mine is defined twice in this file (first at line 1)"), "{e}");
        let signal = "[[signal]]\nid = \"s\"\ntitle = \"S\"\nunit = \"seconds\"\nkind = \"quantile\"\nquantile = 0.9\nhistogram = [\"h\"]\n";
        let e = load_str(&mut RuleSet::default(), "sig.toml", &format!("{signal}{signal}")).unwrap_err();
        assert_eq!(e.line, 8, "{e}");
        assert!(e.message.contains("signal s is defined twice"), "{e}");
    }

    #[test]
    fn a_profile_setting_an_unknown_threshold_is_an_error_at_its_line() {
        let mut set = load_builtin().unwrap();
        load_str(&mut set, "rd/mine.toml", "# mine\n[profile.chat]\nnope = \"1s\"\n").unwrap();
        let e = validate(&set).unwrap_err();
        assert_eq!((e.file.as_str(), e.line, e.column), ("rd/mine.toml", 3, 8), "{e}");
        assert!(e.message.contains("profile chat sets nope"), "{e}");
    }
}
