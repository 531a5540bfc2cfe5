//! Rule files: TOML in, validated [`RuleSet`] out, with errors that name the file and line.
//!
//! The built-in pack (`rules/*.toml` in the repository) is compiled into the binary, so the tool works
//! with nothing beside it. `--rules DIR` loads every `*.toml` in DIR after the built-ins: a signal or
//! rule with an existing id replaces it, a new id adds one, and `[thresholds]` entries override by name.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::expr;
use crate::report::Severity;
use crate::signals::{SignalDef, SignalKind};

mod builtin;
mod model;
#[cfg(test)]
mod tests;
mod validate;

pub use builtin::{load_builtin, load_with_overrides, preload, BUILTIN};
pub use model::*;
pub use validate::{range_misfit, threshold_uses, unit_misfit, validate, ThresholdUse, STAGE_THRESHOLDS};

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
    #[serde(default)]
    routes: BTreeMap<String, Spanned<Vec<String>>>,
    #[serde(default)]
    correlation: Vec<Spanned<RawCorrelation>>,
}

/// Two signals whose trends are compared (what else moved): the cause, the effect it would raise,
/// what their moving together means, and the cause's level at or under which it is healthy.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCorrelation {
    cause: String,
    effect: String,
    meaning: String,
    #[serde(default)]
    healthy_at_or_below: Option<toml::Value>,
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
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    dated_by: Vec<String>,
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
    steps: Vec<RawStep>,
    #[serde(default)]
    references: Vec<String>,
    #[serde(default)]
    recommend: Option<String>,
    #[serde(default)]
    also_size: Vec<String>,
    #[serde(default)]
    rules_out_levers: bool,
    #[serde(default)]
    cold_start: Option<model::ColdStartReach>,
    #[serde(default)]
    replica_cause: bool,
    #[serde(default)]
    stand_in: Option<RawStandIn>,
    #[serde(default)]
    core: bool,
    #[serde(default)]
    recent: Option<RawRecent>,
    #[serde(default)]
    caveat: Option<RawCaveat>,
}

/// A step: its words alone, or a table with the signal that answers it.
struct RawStep(RuleStep);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStepTable {
    text: String,
    #[serde(default)]
    answered_by: Option<String>,
    #[serde(default)]
    if_grew: Option<String>,
    #[serde(default)]
    if_fell: Option<String>,
    #[serde(default)]
    if_unchanged: Option<String>,
    #[serde(default)]
    held_by: Vec<String>,
    #[serde(default)]
    if_held: Option<String>,
    #[serde(default)]
    if_not_held: Option<String>,
    #[serde(default)]
    if_even: Option<String>,
    #[serde(default)]
    if_uneven: Option<String>,
    #[serde(default)]
    lever: Option<String>,
    #[serde(default)]
    rank_by: Option<String>,
}

impl<'de> Deserialize<'de> for RawStep {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawStep;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a step's words, or a table with `text` and `answered_by`, `if_grew`, `if_fell`, `if_unchanged`, `held_by`, `if_held`, `if_not_held`, `if_even`, `if_uneven`, `lever`, `rank_by`")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RawStep, E> {
                Ok(RawStep(RuleStep { text: s.to_string(), ..RuleStep::default() }))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<RawStep, A::Error> {
                let t = RawStepTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))?;
                Ok(RawStep(RuleStep {
                    text: t.text,
                    answered_by: t.answered_by,
                    if_grew: t.if_grew,
                    if_fell: t.if_fell,
                    if_unchanged: t.if_unchanged,
                    held_by: t.held_by,
                    if_held: t.if_held,
                    if_not_held: t.if_not_held,
                    if_even: t.if_even,
                    if_uneven: t.if_uneven,
                    lever: t.lever,
                    rank_by: t.rank_by,
                }))
            }
        }
        d.deserialize_any(V)
    }
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

/// A quantity as written: a string's text (`"70%"`), a number's digits.
fn quantity_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(t) => t.clone(),
        other => other.to_string(),
    }
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
    let floor_text = s.moved_floor.as_ref().map(quantity_text);
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

/// A signal's role (what a stage beside the rules reads it as) and the change events that date a
/// finding it decides, or why they do not parse.
fn role_fields(s: &RawSignal) -> Result<(Option<crate::signals::Role>, Vec<crate::report::EventKind>), String> {
    use crate::signals::Role;
    let role = match s.role.as_deref() {
        None => None,
        Some(name) => Some(Role::parse(name).ok_or_else(|| {
            let known: Vec<&str> = Role::all().into_iter().map(Role::name).collect();
            format!("role {name:?} is not a role any stage reads (one of {})", known.join(", "))
        })?),
    };
    let dated_by = s
        .dated_by
        .iter()
        .map(|k| {
            crate::report::EventKind::ALL.into_iter().find(|e| e.as_str() == k).ok_or_else(|| {
                let known: Vec<&str> = crate::report::EventKind::ALL.iter().map(|e| e.as_str()).collect();
                format!("dated_by names {k:?}, which is not a change event (one of {})", known.join(", "))
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((role, dated_by))
}

/// Give `role` to signal `id` of `file`: a role another signal of the same file has is an error; one
/// a signal of an earlier file has is taken from it.
fn take_role(set: &mut RuleSet, role: Option<crate::signals::Role>, id: &str, file: &str) -> Result<(), String> {
    let Some(role) = role else { return Ok(()) };
    if let Some(holder) = set.signals.values().find(|d| d.role == Some(role) && d.id != id && defined_in(&d.origin, file).is_some()) {
        let first = defined_in(&holder.origin, file).unwrap_or_default();
        return Err(format!("role {:?} is given to signal {} too (line {first}): a role belongs to one signal", role.name(), holder.id));
    }
    set.signals.values_mut().filter(|d| d.role == Some(role)).for_each(|d| d.role = None);
    Ok(())
}

/// A file's `[[correlation]]` tables into the set: a pair of the same two signals replaces an
/// earlier file's.
fn load_correlations(set: &mut RuleSet, raw: &[Spanned<RawCorrelation>], file: &str, lines: &crate::text::LineIndex) -> Result<(), RuleError> {
    for c in raw {
        let at = c.span().start;
        let (line, column) = lines.line_col(at);
        let c = c.get_ref();
        let healthy_text = c.healthy_at_or_below.as_ref().map(quantity_text);
        let healthy_at_or_below = match &healthy_text {
            None => None,
            Some(h) => Some(expr::parse_quantity(h).ok().filter(|v| v.is_finite()).ok_or_else(|| RuleError {
                file: file.to_string(),
                line,
                column,
                message: format!("correlation {} -> {}: healthy_at_or_below {h:?} is not a quantity in the cause's unit", c.cause, c.effect),
            })?),
        };
        set.correlations.retain(|d| !(d.cause == c.cause && d.effect == c.effect));
        set.correlations.push(CorrelationDef {
            cause: c.cause.clone(),
            effect: c.effect.clone(),
            meaning: c.meaning.clone(),
            healthy_at_or_below,
            origin: format!("{file}:{line}"),
        });
    }
    Ok(())
}

/// The prefix of a route list's name in a signal's `match` (`handler=~"$routes.user"`).
const ROUTES: &str = "$routes.";

/// Whether a signal's fields name a route list.
fn names_routes(v: &toml::Value) -> bool {
    match v {
        toml::Value::String(s) => s.contains(ROUTES),
        toml::Value::Table(t) => t.values().any(names_routes),
        toml::Value::Array(a) => a.iter().any(names_routes),
        _ => false,
    }
}

/// `v` with every `$routes.NAME` replaced by that list as an anchored regular expression's
/// alternatives (each route escaped).
fn with_routes(v: &toml::Value, routes: &BTreeMap<String, Vec<String>>) -> Result<toml::Value, String> {
    Ok(match v {
        toml::Value::String(s) if s.contains(ROUTES) => {
            let mut out = String::new();
            let mut rest = s.as_str();
            while let Some(at) = rest.find(ROUTES) {
                out.push_str(&rest[..at]);
                let tail = &rest[at + ROUTES.len()..];
                let end = tail.find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')).unwrap_or(tail.len());
                let name = &tail[..end];
                let list = routes.get(name).ok_or_else(|| {
                    let known = routes.keys().cloned().collect::<Vec<_>>().join(", ");
                    format!("no route list named {name:?} (a [routes] table lists them; known: {known})")
                })?;
                // Escaped for the regular expression, then for the PromQL string it is written in.
                out.push_str(&list.iter().map(|r| crate::prom::escape_regex_literal(r).replace('\\', "\\\\")).collect::<Vec<_>>().join("|"));
                rest = &tail[end..];
            }
            out.push_str(rest);
            toml::Value::String(out)
        }
        toml::Value::Table(t) => toml::Value::Table(t.iter().map(|(k, x)| Ok((k.clone(), with_routes(x, routes)?))).collect::<Result<_, String>>()?),
        toml::Value::Array(a) => toml::Value::Array(a.iter().map(|x| with_routes(x, routes)).collect::<Result<_, String>>()?),
        other => other.clone(),
    })
}

/// A signal's kind from its fields as written, its route lists filled in, checked.
fn kind_with_routes(raw: &toml::Table, routes: &BTreeMap<String, Vec<String>>) -> Result<SignalKind, String> {
    let kind: SignalKind = with_routes(&toml::Value::Table(raw.clone()), routes)?.try_into().map_err(|e: toml::de::Error| e.message().trim().to_string())?;
    kind.kind().validate()?;
    Ok(kind)
}

/// Every signal that names a route list read again with the lists in force once every file is in
/// (a `--rules DIR` file's `[routes]` replaces the built-in list for the built-in signals too).
pub(super) fn resolve_routes(set: &mut RuleSet) -> Result<(), RuleError> {
    let routes = set.routes.clone();
    for def in set.signals.values_mut() {
        if let Some(raw) = &def.raw_kind {
            def.kind = kind_with_routes(raw, &routes).map_err(|m| {
                let (file, line) = def.origin.rsplit_once(':').map(|(f, l)| (f.to_string(), l.parse().unwrap_or(0))).unwrap_or((def.origin.clone(), 0));
                RuleError { file, line, column: 0, message: format!("signal {}: {m}", def.id) }
            })?;
        }
    }
    Ok(())
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
    load_correlations(set, &raw.correlation, file, &lines)?;
    for (name, list) in &raw.routes {
        let bad = |m: String| err_at(list.span().start, format!("routes.{name}: {m}"));
        if !valid_id(name, true) {
            return Err(bad("a route list's name is lowercase letters, digits and '_'".into()));
        }
        if list.get_ref().is_empty() || list.get_ref().iter().any(|r| !r.starts_with('/') && r != "none") {
            return Err(bad("list at least one route, each a path starting with '/' as the server's handler label writes it".into()));
        }
        set.routes.insert(name.clone(), list.get_ref().clone());
    }

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
        let (role, dated_by) = role_fields(&s).map_err(|m| err_at(at, format!("signal {}: {m}", s.id)))?;
        take_role(set, role, &s.id, file).map_err(|m| err_at(at, format!("signal {}: {m}", s.id)))?;
        let raw_kind = names_routes(&toml::Value::Table(s.kind.clone())).then(|| s.kind.clone());
        let kind = kind_with_routes(&s.kind, &set.routes).map_err(|m| err_at(at, format!("signal {}: {m}", s.id)))?;
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
                title: SignalDef::titled(&s.title, range),
                bare_title: s.title,
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
                role,
                dated_by,
                origin: format!("{file}:{line}"),
                raw_kind,
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
            steps: r.steps.into_iter().map(|s| s.0).collect(),
            references: r.references,
            recommend: r.recommend,
            also_size: r.also_size,
            rules_out_levers: r.rules_out_levers,
            cold_start: r.cold_start,
            replica_cause: r.replica_cause,
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

/// An error at a declaration's `origin` (`file:line`), found once every file is merged.
fn at_origin(origin: &str, message: String) -> RuleError {
    let (file, line) = origin.rsplit_once(':').map(|(f, l)| (f.to_string(), l.parse().unwrap_or(0))).unwrap_or((origin.to_string(), 0));
    RuleError { file, line, column: 1, message }
}
