//! `rules export --format prometheus`: the diagnosis rules as Prometheus alerting rules.
//!
//! Each rule whose conditions PromQL can express becomes one alerting rule that returns one series
//! per scope (the grouping labels, `model_name` by default) while every condition holds. The value
//! of each signal is the query [`crate::signals::build`] writes for explain, resolved against the
//! vLLM V1 metric names (an exported file has no discovered names to pick from); baselines are the
//! same query shifted back with `offset`.
//!
//! This is the one place besides `signals/` (promql.rs and the kinds' modules) where PromQL is
//! assembled, and only as glue around the signal queries: comparisons with thresholds, `Nx
//! baseline` as a comparison with the offset query, `and on (...)` / `or on (...)` between
//! conditions. What explain decides that this glue cannot reproduce is refused with a reason (see
//! [`Export::skipped`]) rather than exported with a different meaning:
//! - `not` over an optional signal (explain reads its absence as "no events", so `not` holds;
//!   PromQL cannot select a series that does not exist);
//! - counts of replicas (`replicas_over`, `vanished`) compared so that zero would match (a scope
//!   with none has no series in PromQL);
//! - stand-in conditions are left out (the file targets V1, which has the primary histograms);
//!   such rules are exported with a note.
//!
//! `Nx baseline` in explain compares value/baseline with N, counting 0/0 as 1 ("unchanged"); the
//! PromQL `A op N * B` is given the guards that keep that meaning when both are 0. Two differences
//! remain by design: explain leaves undecided a quantile that lies in a histogram's first or `+Inf`
//! bucket when that bucket straddles the threshold, where PromQL compares `histogram_quantile`'s
//! interpolation; and a comparison whose data is missing is "not evaluated" in explain and simply
//! no alert here. `tests/rules_export.rs` checks the result against every generated V1 scenario.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::expr::{CmpOp, Comparison, Expr, Rhs};
use super::load::{RuleDef, RuleSet};
use crate::prom::Selector;
use crate::report::Severity;
use crate::signals::{self, QueryContext, Reduction};

/// What the file is built for.
#[derive(Debug, Clone)]
pub struct Options {
    pub selector: Selector,
    /// The labels alerts are grouped by (the diagnosis' scope).
    pub group_by: Vec<String>,
    /// What `replica_label = "$replica"` in a signal stands for.
    pub replica_label: String,
    /// The range signals are read over (explain's `--window`).
    pub window: Duration,
    /// How far back the baseline is read (`offset`).
    pub baseline: Duration,
    /// The alerts' `for:`.
    pub hold: Duration,
    pub runbook_url_base: Option<String>,
    /// The profile whose thresholds the set carries (for the header), `None` for the defaults.
    pub profile: Option<String>,
    /// What the configuration file changed in the set, for the header: `thresholds kv_usage_high
    /// (file ./vllm-diag.toml:6)`, `rules turned off: slow-decode (...)`.
    pub configured: Vec<String>,
    /// The rules the configuration file turns off (left out of the set), for the header's count.
    pub turned_off: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            selector: Selector::default(),
            group_by: vec!["model_name".into()],
            replica_label: "instance".into(),
            window: Duration::from_secs(1800),
            baseline: Duration::from_secs(1800),
            hold: Duration::from_secs(300),
            runbook_url_base: None,
            profile: None,
            configured: Vec::new(),
            turned_off: 0,
        }
    }
}

/// One exported alerting rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    /// The diagnosis rule's id.
    pub rule: String,
    /// The alert name (`VllmDiagKvCachePressure`).
    pub name: String,
    pub severity: Severity,
    pub expr: String,
    /// What the export left out of the rule (its stand-in).
    pub notes: Vec<String>,
}

/// A rule that could not be exported, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub rule: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub alerts: Vec<Alert>,
    pub skipped: Vec<Skipped>,
}

/// The metric generation the exported file targets, said in its header.
pub const TARGET: &str = "vLLM V1 metric names (vllm:kv_cache_usage_perc, vllm:inter_token_latency_seconds, ...; the first spelling each signal declares)";

/// Bucket bounds vLLM V1 gives its latency histograms, so that SLO targets between two bounds are
/// interpolated as explain does with the bounds it finds in the data. Integers are written `1.0`
/// by vLLM (Python) and `1` by some pipelines: both are matched.
const V1_BUCKETS: &[(&str, &[f64])] = &[
    (
        "vllm:time_to_first_token_seconds_bucket",
        &[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0],
    ),
    ("vllm:inter_token_latency_seconds_bucket", &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]),
];

fn v1_buckets() -> BTreeMap<String, Vec<signals::Bound>> {
    V1_BUCKETS
        .iter()
        .map(|(name, bounds)| {
            let b = bounds
                .iter()
                .map(|v| {
                    let written = if v.fract() == 0.0 { vec![format!("{v}"), format!("{v:.1}")] } else { vec![format!("{v}")] };
                    signals::Bound { value: *v, written }
                })
                .collect();
            (name.to_string(), b)
        })
        .collect()
}

/// The PromQL explain asks for one signal, written for vLLM V1 names, grouped by `opts.group_by`
/// and read over `opts.window`, as this export uses it (reduced to one series per scope): what
/// `rules show` prints under each signal.
pub fn signal_query(set: &RuleSet, id: &str, opts: &Options) -> Result<String, String> {
    let t = Translator { set, opts, by: opts.group_by.join(", ") };
    t.signal(id).map(|(q, _)| q)
}

/// Translate every rule of `set` (thresholds as the set holds them: apply a profile first).
pub fn export(set: &RuleSet, opts: &Options) -> Export {
    let mut alerts = Vec::new();
    let mut skipped = Vec::new();
    for rule in &set.rules {
        match alert_expr(rule, set, opts) {
            Ok(expr) => {
                let mut notes: Vec<String> = rule
                    .stand_in
                    .iter()
                    .map(|s| {
                        format!(
                            "its stand-in (used by explain when {} {} no metric) is not exported: the file targets V1, which has {}",
                            s.missing.join(", "),
                            if s.missing.len() == 1 { "has" } else { "have" },
                            if s.missing.len() == 1 { "it" } else { "them" }
                        )
                    })
                    .collect();
                if rule.recent {
                    notes.push(
                        "its second reading over the last minutes of a long window (explain) is not exported: an alert is evaluated continuously over its own range"
                            .to_string(),
                    );
                }
                alerts.push(Alert { rule: rule.id.clone(), name: alert_name(&rule.id), severity: rule.severity, expr, notes });
            }
            Err(reason) => skipped.push(Skipped { rule: rule.id.clone(), reason }),
        }
    }
    Export { alerts, skipped }
}

/// `kv-cache-pressure` -> `VllmDiagKvCachePressure` (alert names follow metric-name syntax).
pub fn alert_name(id: &str) -> String {
    let mut out = String::from("VllmDiag");
    for word in id.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    out
}

/// The alert expression of one rule: every condition of `when`, joined on the grouping labels.
/// `Err` says why the rule cannot be expressed.
pub fn alert_expr(rule: &RuleDef, set: &RuleSet, opts: &Options) -> Result<String, String> {
    let tr = Translator { set, opts, by: opts.group_by.join(", ") };
    let mut parts = Vec::new();
    for c in &rule.when {
        let e = tr.expr(&c.expr).map_err(|e| format!("condition {:?}: {e}", c.text))?;
        parts.push(format!("({e})"));
    }
    let expr = parts.join(&format!(" and on ({}) ", tr.by));
    promql_parser::parser::parse(&expr).map_err(|e| format!("the translated expression does not parse ({e}); please report this"))?;
    Ok(expr)
}

struct Translator<'a> {
    set: &'a RuleSet,
    opts: &'a Options,
    /// The grouping labels, comma-separated.
    by: String,
}

impl Translator<'_> {
    fn expr(&self, e: &Expr) -> Result<String, String> {
        match e {
            Expr::Cmp(c) => self.comparison(c),
            Expr::And(v) | Expr::Or(v) => {
                let op = if matches!(e, Expr::And(_)) { "and" } else { "or" };
                let parts = v.iter().map(|x| self.expr(x).map(|s| format!("({s})"))).collect::<Result<Vec<_>, _>>()?;
                Ok(parts.join(&format!(" {op} on ({}) ", self.by)))
            }
            Expr::Not(x) => self.expr(&negate(x, self.set)?),
        }
    }

    /// The signal's query, reduced to one series per scope, and its reduction.
    fn signal(&self, id: &str) -> Result<(String, Option<Reduction>), String> {
        let def = self.set.signals.get(id).ok_or_else(|| format!("signal {id} is not declared"))?;
        // The first alternative of every family: the newest spelling (V1).
        let present: BTreeSet<String> = signals::required_series(&def.kind).into_iter().filter_map(|alts| alts.into_iter().next()).collect();
        let resolved = signals::resolve(&def.kind, &present).map_err(|m| format!("signal {id}: cannot resolve {}", m.join(", ")))?;
        let ctx = QueryContext {
            selector: self.opts.selector.clone(),
            group_by: self.opts.group_by.clone(),
            range: def.range_in(self.opts.window),
            thresholds: self.set.thresholds.clone().into(),
            buckets: v1_buckets().into(),
            replica_label: self.opts.replica_label.clone(),
        };
        let q = signals::build(&def.kind, &resolved, &ctx).map_err(|e| format!("signal {id}: {e}"))?;
        Ok(match q.per_replica.and_then(|(_, r)| Some((signals::queries::reduced_per_replica(&q.value, r, &self.by)?, r))) {
            Some((query, r)) => (query, Some(r)),
            None => (q.value, None),
        })
    }

    fn comparison(&self, c: &Comparison) -> Result<String, String> {
        let (q, reduction) = self.signal(&c.signal)?;
        let op = c.op.as_str();
        let threshold = match &c.rhs {
            Rhs::Value { value, .. } => Some(*value),
            Rhs::Named { name } => Some(*self.set.thresholds.get(name).ok_or_else(|| format!("threshold ${name} is not defined"))?),
            Rhs::Baseline { .. } => None,
        };
        if let Some(t) = threshold {
            if !t.is_finite() {
                return Err(format!("the threshold of {} is not a finite number", c.signal));
            }
            if reduction == Some(Reduction::Count) && c.op.holds(0.0, t) {
                return Err(format!("{} counts replicas and `{op} {}` holds for zero: a scope with none has no series in PromQL", c.signal, number(t)));
            }
            return Ok(format!("({q}) {op} {}", number(t)));
        }
        let Rhs::Baseline { factor } = &c.rhs else { unreachable!("thresholds returned above") };
        if reduction == Some(Reduction::Count) {
            return Err(format!("{} counts replicas: a baseline of a count that may be absent cannot be compared", c.signal));
        }
        if !factor.is_finite() {
            return Err(format!("the baseline factor of {} is not a finite number", c.signal));
        }
        let base = with_offset(&q, self.opts.baseline);
        let f = number(*factor);
        // explain counts 0/0 as "unchanged" (1 op factor); plain PromQL gives 0 op 0.
        let explain_zero = c.op.holds(1.0, *factor);
        let promql_zero = c.op.holds(0.0, 0.0);
        Ok(match (explain_zero, promql_zero) {
            (false, true) if c.op == CmpOp::Ge => format!("(({q}) >= {f} * ({base})) > 0"),
            (false, true) => format!("({q}) <= {f} * (({base}) > 0)"),
            (true, false) => {
                format!("({q}) {op} {f} * ({base}) or on ({}) (({q}) == 0 and on ({}) ({base}) == 0)", self.by, self.by)
            }
            _ => format!("({q}) {op} {f} * ({base})"),
        })
    }
}

/// `not` pushed down to the comparisons: De Morgan, and each comparison flipped. Exact for signals
/// explain reads as unknown when absent (absent stays "no alert" both ways); refused for optional
/// signals, whose absence explain reads as "no events", which `not` would turn into a match.
fn negate(e: &Expr, set: &RuleSet) -> Result<Expr, String> {
    Ok(match e {
        Expr::Cmp(c) => {
            let def = set.signals.get(&c.signal).ok_or_else(|| format!("signal {} is not declared", c.signal))?;
            if def.optional {
                return Err(format!("`not` over {}, an optional signal: explain counts its absence as no events, which PromQL cannot select", c.signal));
            }
            let op = match c.op {
                CmpOp::Gt => CmpOp::Le,
                CmpOp::Ge => CmpOp::Lt,
                CmpOp::Lt => CmpOp::Ge,
                CmpOp::Le => CmpOp::Gt,
            };
            Expr::Cmp(Comparison { signal: c.signal.clone(), op, rhs: c.rhs.clone() })
        }
        Expr::And(v) => Expr::Or(v.iter().map(|x| negate(x, set)).collect::<Result<_, _>>()?),
        Expr::Or(v) => Expr::And(v.iter().map(|x| negate(x, set)).collect::<Result<_, _>>()?),
        Expr::Not(x) => (**x).clone(),
    })
}

/// A PromQL number literal.
fn number(x: f64) -> String {
    format!("{x}")
}

/// `query` read `offset` earlier: ` offset D` after every range selector (`[...]` without a colon).
/// Subqueries are left alone: the selectors inside them are shifted, which shifts the subquery.
/// String literals are skipped, so a matcher value holding `[5m]` is not touched.
pub fn with_offset(query: &str, offset: Duration) -> String {
    let d = signals::promql_duration(offset);
    let mut out = String::with_capacity(query.len() + 32);
    let mut chars = query.chars().peekable();
    let mut range: Option<String> = None;
    while let Some(c) = chars.next() {
        if let Some(r) = range.as_mut() {
            r.push(c);
            if c == ']' {
                let is_subquery = r.contains(':');
                out.push_str(r);
                if !is_subquery {
                    out.push_str(&format!(" offset {d}"));
                }
                range = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => {
                out.push(c);
                while let Some(n) = chars.next() {
                    out.push(n);
                    if n == '\\' && c != '`' {
                        if let Some(escaped) = chars.next() {
                            out.push(escaped);
                        }
                    } else if n == c {
                        break;
                    }
                }
            }
            '[' => range = Some("[".to_string()),
            _ => out.push(c),
        }
    }
    if let Some(r) = range {
        out.push_str(&r);
    }
    out
}

/// A Prometheus duration as people write it: `5m`, `1h30m`, `90s` -> `1m30s`.
pub fn duration_text(d: Duration) -> String {
    let mut s = d.as_secs();
    if s == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, len) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if s >= len {
            out.push_str(&format!("{}{unit}", s / len));
            s %= len;
        }
    }
    out
}

/// A YAML double-quoted scalar: backslash, quote, and every character YAML would not keep as it
/// is (controls, line and paragraph separators) escaped.
pub fn yaml_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{85}' => out.push_str("\\N"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if (c as u32) < 0x20 || (0x7f..=0x9f).contains(&(c as u32)) => out.push_str(&format!("\\x{:02x}", c as u32)),
            '\u{fffe}' | '\u{ffff}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Text to show as it is in a Prometheus annotation (a Go template): `{{` opens an action, so it
/// is written as the action that prints it.
pub fn template_literal(s: &str) -> String {
    s.replace("{{", "{{ \"{{\" }}")
}

/// The annotations of one rule's alert, as templates (Prometheus fills in `$labels` and `$value`).
pub fn annotations(rule: &RuleDef, set: &RuleSet, opts: &Options) -> Vec<(&'static str, String)> {
    let scope = match opts.group_by.as_slice() {
        [one] => format!("{{{{ $labels.{one} }}}}"),
        many => many.iter().map(|l| format!("{l}={{{{ $labels.{l} }}}}")).collect::<Vec<_>>().join(", "),
    };
    let lit = template_literal;
    let window = duration_text(opts.window);
    let conditions = rule.when.iter().map(|c| c.text.as_str()).collect::<Vec<_>>().join("; ");
    let named: BTreeSet<&str> = rule
        .when
        .iter()
        .flat_map(|c| c.expr.comparisons())
        .filter_map(|c| match &c.rhs {
            Rhs::Named { name } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    let thresholds = named.iter().filter_map(|n| set.thresholds.get(*n).map(|v| format!("${n} = {}", crate::units::sig(*v)))).collect::<Vec<_>>().join(", ");
    let mut description = format!(
        "{} Over the last {window} (baselines: the same signals {} earlier), all of: {}.",
        lit(&rule.summary),
        duration_text(opts.baseline),
        lit(&conditions)
    );
    if !thresholds.is_empty() {
        description.push_str(&format!(" Thresholds: {}.", lit(&thresholds)));
    }
    description.push_str(" Value of the first condition: {{ $value | humanize }}.");
    let mut out = vec![("summary", format!("{}: {scope}", lit(&rule.title))), ("description", description)];
    if let Some(base) = &opts.runbook_url_base {
        let sep = if base.is_empty() || base.ends_with(['/', '#', '=', '?', '&']) { "" } else { "/" };
        out.push(("runbook_url", lit(&format!("{base}{sep}{}", rule.id))));
    }
    if !rule.steps.is_empty() {
        let steps = rule.steps.iter().enumerate().map(|(i, s)| format!("{}. {}", i + 1, s.text)).collect::<Vec<_>>().join("\n");
        out.push(("first_steps", lit(&steps)));
    }
    out
}

/// The rule file: a header saying what it targets and how it was made, then one group.
pub fn to_yaml(export: &Export, set: &RuleSet, opts: &Options) -> String {
    let oneline = |s: &str| s.replace(['\n', '\r'], " ");
    let mut y = String::new();
    y.push_str(&format!("# Prometheus alerting rules generated by vllm-diag {} (`vllm-diag rules export`).\n", env!("CARGO_PKG_VERSION")));
    y.push_str("# Regenerate instead of editing: the diagnosis rules are the source.\n");
    y.push_str(&format!("# Targets {TARGET}.\n"));
    y.push_str(&format!(
        "# Signals are read over the last {}; baselines are the same queries offset by {}. Thresholds: {}.\n",
        duration_text(opts.window),
        duration_text(opts.baseline),
        match &opts.profile {
            Some(p) => format!("profile {}", oneline(p)),
            None => "the defaults (chat profile)".into(),
        }
    ));
    if !opts.configured.is_empty() {
        y.push_str(&format!("# From the configuration file: {}.\n", oneline(&opts.configured.join("; "))));
    }
    y.push_str(&format!("# Grouped by: {}.", opts.group_by.join(", ")));
    if !opts.selector.matchers.is_empty() {
        y.push_str(&format!(" Selector: {}.", oneline(&opts.selector.to_promql())));
    }
    y.push('\n');
    y.push_str(&format!("# {} of {} rules exported", export.alerts.len(), set.rules.len() + opts.turned_off));
    if opts.turned_off > 0 {
        y.push_str(&format!("; turned off by the configuration file: {}", opts.turned_off));
    }
    if !export.skipped.is_empty() {
        let ids = export.skipped.iter().map(|s| s.rule.as_str()).collect::<Vec<_>>().join(", ");
        y.push_str(&format!("; not expressible in PromQL (reasons on stderr): {ids}"));
    }
    y.push_str(".\n");
    y.push_str("groups:\n  - name: \"vllm-diag\"\n    rules:\n");
    for a in &export.alerts {
        let Some(rule) = set.rule(&a.rule) else { continue };
        y.push_str(&format!("      - alert: {}\n", yaml_quote(&a.name)));
        y.push_str(&format!("        expr: {}\n", yaml_quote(&a.expr)));
        if !opts.hold.is_zero() {
            y.push_str(&format!("        for: {}\n", yaml_quote(&duration_text(opts.hold))));
        }
        y.push_str("        labels:\n");
        y.push_str(&format!("          severity: {}\n", yaml_quote(a.severity.as_str())));
        y.push_str(&format!("          vllm_diag_rule: {}\n", yaml_quote(&a.rule)));
        y.push_str("        annotations:\n");
        for (k, v) in annotations(rule, set, opts) {
            y.push_str(&format!("          {k}: {}\n", yaml_quote(&v)));
        }
    }
    y
}

/// One Alertmanager inhibit rule: while the source rule's alert fires for a scope (the group_by
/// labels), the alerts of the rules it absorbs in that scope are muted, as explain lists those
/// under the source's finding ("Also explains") instead of as findings of their own.
#[derive(Debug, Clone, PartialEq)]
pub struct Inhibit {
    pub source: String,
    /// Exported rules the source supersedes, directly or through a chain, sorted.
    pub targets: Vec<String>,
}

/// The rules `id` supersedes, directly or through a chain (explain's absorption, src/rank.rs).
pub fn superseded_by(set: &RuleSet, id: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut stack: Vec<String> = set.rule(id).map(|r| r.supersedes.clone()).unwrap_or_default();
    while let Some(x) = stack.pop() {
        if x != id && out.insert(x.clone()) {
            stack.extend(set.rule(&x).map(|r| r.supersedes.clone()).unwrap_or_default());
        }
    }
    out
}

/// The inhibit rules mirroring the exported rules' `supersedes`. Two rules that supersede each
/// other (through chains) inhibit neither: each would mute the other and nothing would page.
pub fn inhibitions(export: &Export, set: &RuleSet) -> Vec<Inhibit> {
    let exported: std::collections::BTreeSet<&str> = export.alerts.iter().map(|a| a.rule.as_str()).collect();
    let mut out = Vec::new();
    for a in &export.alerts {
        let targets: Vec<String> =
            superseded_by(set, &a.rule).into_iter().filter(|t| exported.contains(t.as_str()) && !superseded_by(set, t).contains(&a.rule)).collect();
        if !targets.is_empty() {
            out.push(Inhibit { source: a.rule.clone(), targets });
        }
    }
    out
}

/// `rules export --format alertmanager`: the part of Alertmanager's configuration that makes the
/// exported alerts page once per incident: a route that groups them by the diagnosis' scope (one
/// notification group per model, whichever rules fire in it) and the inhibit rules of
/// [`inhibitions`], each holding only within one scope (`equal`: the group_by labels).
pub fn to_alertmanager_yaml(export: &Export, set: &RuleSet, opts: &Options) -> String {
    let labels = opts.group_by.iter().map(|l| yaml_quote(l)).collect::<Vec<_>>().join(", ");
    let mut y = String::new();
    y.push_str(&format!("# Alertmanager configuration for the alerts of `vllm-diag rules export`, generated by vllm-diag {}.\n", env!("CARGO_PKG_VERSION")));
    y.push_str("# Merge it into alertmanager.yml: add the route under your route's `routes:` (give it your\n");
    y.push_str("# receiver), and the inhibit rules to `inhibit_rules:`. The route puts every alert of one scope\n");
    y.push_str("# into one notification group, so an incident pages once; each inhibit rule mutes, within one\n");
    y.push_str("# scope, the alerts of the rules the source rule absorbs (explain's \"Also explains\"), so the\n");
    y.push_str("# notification carries the cause. Regenerate instead of editing: the diagnosis rules are the source.\n");
    y.push_str(&format!(
        "# Grouped by: {}. {} inhibit rules for {} exported alerts.\n",
        opts.group_by.join(", "),
        inhibitions(export, set).len(),
        export.alerts.len()
    ));
    y.push_str("route:\n  routes:\n");
    y.push_str("    - matchers: ['vllm_diag_rule=~\".+\"']\n");
    y.push_str(&format!("      group_by: [{labels}]\n"));
    y.push_str("inhibit_rules:\n");
    for i in inhibitions(export, set) {
        y.push_str(&format!("  - source_matchers: [{}]\n", yaml_quote(&format!("vllm_diag_rule=\"{}\"", i.source))));
        y.push_str(&format!("    target_matchers: [{}]\n", yaml_quote(&format!("vllm_diag_rule=~\"{}\"", i.targets.join("|")))));
        y.push_str(&format!("    equal: [{labels}]\n"));
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::load::load_str;

    const SIGNALS: &str = r#"
[thresholds]
high = "3s"

[[signal]]
id = "ttft"
title = "TTFT"
unit = "seconds"
kind = "quantile"
quantile = 0.95
histogram = ["vllm:time_to_first_token_seconds"]

[[signal]]
id = "waiting"
title = "Waiting"
unit = "requests"
kind = "gauge"
gauge = ["vllm:num_requests_waiting"]
over_time = "avg"
across = "sum"

[[signal]]
id = "spec"
title = "Spec"
unit = "ratio"
optional = true
kind = "gauge"
gauge = ["vllm:spec_x"]
over_time = "avg"
across = "avg"

[[signal]]
id = "gone"
title = "Gone"
unit = "count"
optional = true
kind = "vanished"
gauge = ["vllm:num_requests_running"]
"#;

    fn set_with(when: &str) -> RuleSet {
        let mut set = RuleSet::default();
        load_str(&mut set, "s.toml", SIGNALS).unwrap();
        let rule = format!("[[rule]]\nid = \"r\"\ntitle = \"R\"\nseverity = \"warning\"\nsummary = \"s\"\nwhen = [{when}]\n");
        load_str(&mut set, "r.toml", &rule).unwrap();
        set
    }

    fn translate(when: &str) -> Result<String, String> {
        let set = set_with(when);
        alert_expr(set.rule("r").unwrap(), &set, &Options::default())
    }

    const TTFT: &str = "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[1800s])))";
    const TTFT_BEFORE: &str = "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[1800s] offset 1800s)))";
    const WAITING: &str = "sum by (model_name) (avg_over_time(vllm:num_requests_waiting{server=\"\"}[1800s]))";

    #[test]
    fn an_absolute_threshold_compares_the_signal_query() {
        assert_eq!(translate(r#""ttft > $high""#).unwrap(), format!("(({TTFT}) > 3)"));
        assert_eq!(translate(r#""waiting >= 2""#).unwrap(), format!("(({WAITING}) >= 2)"));
    }

    #[test]
    fn a_baseline_compares_with_the_same_query_offset_by_the_baseline() {
        // 0/0 is "unchanged" in explain, so a rise needs a non-zero value.
        assert_eq!(translate(r#""ttft >= 2x baseline""#).unwrap(), format!("((({TTFT}) >= 2 * ({TTFT_BEFORE})) > 0)"));
        // A fall below half the baseline needs a baseline.
        assert_eq!(translate(r#""ttft <= 0.5x baseline""#).unwrap(), format!("(({TTFT}) <= 0.5 * (({TTFT_BEFORE}) > 0))"));
        // "below 1.5x the baseline" holds for 0/0.
        let e = translate(r#""ttft < 1.5x baseline""#).unwrap();
        assert_eq!(e, format!("(({TTFT}) < 1.5 * ({TTFT_BEFORE}) or on (model_name) (({TTFT}) == 0 and on (model_name) ({TTFT_BEFORE}) == 0))"));
    }

    #[test]
    fn and_or_and_the_list_of_conditions_join_on_the_grouping_labels() {
        let e = translate(r#""ttft > 3s or waiting > 1", "waiting < 10 and ttft < 10s""#).unwrap();
        assert_eq!(
            e,
            format!("((({TTFT}) > 3) or on (model_name) (({WAITING}) > 1)) and on (model_name) ((({WAITING}) < 10) and on (model_name) (({TTFT}) < 10))")
        );
    }

    #[test]
    fn not_is_pushed_down_to_flipped_comparisons() {
        let e = translate(r#""not (ttft > 3s or waiting >= 1)""#).unwrap();
        assert_eq!(e, format!("((({TTFT}) <= 3) and on (model_name) (({WAITING}) < 1))"));
    }

    #[test]
    fn not_over_an_optional_signal_and_counts_that_would_match_zero_are_refused() {
        let e = translate(r#""not spec > 0.5""#).unwrap_err();
        assert!(e.contains("optional signal") && e.contains("spec"), "{e}");
        let e = translate(r#""gone < 1""#).unwrap_err();
        assert!(e.contains("holds for zero"), "{e}");
        let ok = translate(r#""gone >= 1""#).unwrap();
        assert!(ok.starts_with("((count by (model_name) (group by (model_name, instance)"), "{ok}");
    }

    #[test]
    fn every_builtin_expression_parses_and_the_export_names_what_it_skips() {
        let set = crate::rules::load_builtin().unwrap();
        let ex = export(&set, &Options::default());
        assert_eq!(ex.alerts.len() + ex.skipped.len(), set.rules.len());
        assert!(ex.alerts.len() > 10, "{:?}", ex.skipped);
        for a in &ex.alerts {
            promql_parser::parser::parse(&a.expr).unwrap_or_else(|e| panic!("{}: {e}\n{}", a.rule, a.expr));
        }
        let kv = ex.alerts.iter().find(|a| a.rule == "kv-cache-pressure").unwrap();
        assert_eq!(kv.name, "VllmDiagKvCachePressure");
        assert_eq!(kv.notes.len(), 1, "its stand-in is left out, and said so");
    }

    #[test]
    fn every_grouping_exports_expressions_that_parse() {
        // A grouping label the joins are on (namespace for the GPU exporter's, instance for the
        // HTTP layer's) once put that label in both `on` and `group_left`, which PromQL refuses.
        let set = crate::rules::load_builtin().unwrap();
        let all = export(&set, &Options::default()).alerts.len();
        for (group_by, replica) in [
            (&["model_name", "namespace"][..], "instance"),
            (&["namespace", "model_name"], "instance"),
            (&["model_name", "pod"], "instance"),
            (&["instance"], "pod"),
            (&["model_name"], "pod"),
        ] {
            let opts = Options { group_by: group_by.iter().map(|l| l.to_string()).collect(), replica_label: replica.into(), ..Options::default() };
            let ex = export(&set, &opts);
            assert!(!ex.skipped.iter().any(|s| s.reason.contains("does not parse")), "{group_by:?}: {:?}", ex.skipped);
            assert_eq!(ex.alerts.len(), all, "{group_by:?}: {:?}", ex.skipped);
            for a in &ex.alerts {
                promql_parser::parser::parse(&a.expr).unwrap_or_else(|e| panic!("{group_by:?} {}: {e}\n{}", a.rule, a.expr));
            }
        }
    }

    #[test]
    fn offsets_go_after_range_selectors_not_subqueries_or_strings() {
        let q = r#"avg_over_time((sum(rate(x{a="[5m]"}[120s])) > bool 0)[1800s:60s])"#;
        assert_eq!(with_offset(q, Duration::from_secs(3600)), r#"avg_over_time((sum(rate(x{a="[5m]"}[120s] offset 3600s)) > bool 0)[1800s:60s])"#);
        assert_eq!(with_offset(r#"x{a="\"[1s]"}[5m]"#, Duration::from_secs(60)), r#"x{a="\"[1s]"}[5m] offset 60s"#);
    }

    #[test]
    fn yaml_strings_escape_what_yaml_would_not_keep() {
        assert_eq!(yaml_quote(r#"a "b" \c"#), r#""a \"b\" \\c""#);
        assert_eq!(yaml_quote("one\ntwo\tthree\r"), r#""one\ntwo\tthree\r""#);
        assert_eq!(yaml_quote("\u{1}\u{7f}\u{85}\u{2028}\u{2029}"), r#""\x01\x7f\N\L\P""#);
        assert_eq!(yaml_quote("ünïcödé: # ok"), "\"ünïcödé: # ok\"");
        assert_eq!(yaml_quote(""), "\"\"");
    }

    #[test]
    fn literal_text_cannot_open_a_template_action() {
        assert_eq!(template_literal("a {{ b }}"), "a {{ \"{{\" }} b }}");
    }

    #[test]
    fn durations_are_written_as_people_write_them() {
        assert_eq!(duration_text(Duration::from_secs(300)), "5m");
        assert_eq!(duration_text(Duration::from_secs(5400)), "1h30m");
        assert_eq!(duration_text(Duration::from_secs(90)), "1m30s");
        assert_eq!(duration_text(Duration::from_secs(86_400 + 1)), "1d1s");
    }

    #[test]
    fn annotations_template_the_scope_and_link_the_runbook() {
        let set = set_with(r#""ttft > $high""#);
        let opts = Options { runbook_url_base: Some("https://wiki/runbooks".into()), ..Options::default() };
        let a: BTreeMap<_, _> = annotations(set.rule("r").unwrap(), &set, &opts).into_iter().collect();
        assert_eq!(a["summary"], "R: {{ $labels.model_name }}");
        assert_eq!(a["runbook_url"], "https://wiki/runbooks/r");
        assert!(a["description"].contains("$high = 3") && a["description"].contains("{{ $value | humanize }}"), "{}", a["description"]);
        let opts = Options { group_by: vec!["namespace".into(), "model_name".into()], ..Options::default() };
        let a: BTreeMap<_, _> = annotations(set.rule("r").unwrap(), &set, &opts).into_iter().collect();
        assert_eq!(a["summary"], "R: namespace={{ $labels.namespace }}, model_name={{ $labels.model_name }}");
        assert!(!a.contains_key("runbook_url"));
    }
    #[test]
    fn inhibit_rules_mirror_supersedes_through_chains_and_skip_mutual_ones() {
        let set = crate::rules::load_builtin().expect("built-in pack");
        let out = export(&set, &Options::default());
        let inh = inhibitions(&out, &set);
        let of = |id: &str| inh.iter().find(|i| i.source == id).map(|i| i.targets.clone()).unwrap_or_default();
        let kv = of("kv-cache-pressure");
        assert!(kv.contains(&"slo-burn".to_string()) && kv.contains(&"load-exceeds-capacity".to_string()), "{kv:?}");
        // Every target is exported, is not the source, and does not supersede the source back.
        for i in &inh {
            for t in &i.targets {
                assert!(out.alerts.iter().any(|a| &a.rule == t) && *t != i.source && !superseded_by(&set, t).contains(&i.source), "{i:?}");
            }
        }
        let yaml = to_alertmanager_yaml(&out, &set, &Options::default());
        assert!(yaml.contains("  - source_matchers: [\"vllm_diag_rule=\\\"kv-cache-pressure\\\"\"]\n"), "{yaml}");
        assert!(yaml.contains("      group_by: [\"model_name\"]\n") && yaml.contains("    equal: [\"model_name\"]\n"), "{yaml}");
    }
}
