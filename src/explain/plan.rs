//! Stage: plan. Which signals the enabled rules read, and the queries that measure each of them in
//! the window and in the baseline. The PromQL itself comes from [`crate::signals`].

use std::collections::{BTreeMap, BTreeSet};

use super::discover::Discovery;
use crate::report::RunParams;
use crate::rules::eval::Availability;
use crate::rules::RuleSet;
use crate::signals::{self, QueryContext, SignalDef};
use crate::source::Request;

/// Signals the recommenders read (see [`crate::recommend`]).
pub const RECOMMENDATION_INPUTS: &[&str] = &["prompt_len_mean", "output_len_mean", "running_per_replica", "kv_usage_avg"];

/// One signal in one window: its query, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    pub resolved: Option<signals::Resolved>,
    pub per_replica: Option<(String, signals::Reduction)>,
    pub availability: Availability,
    pub value: Option<Request>,
    pub count: Option<Request>,
    pub query: String,
    pub metric: String,
    /// A quantile's histogram bounds, so values inside the first or +Inf bucket read as bounds.
    pub bounds: Vec<f64>,
}

impl Planned {
    fn unavailable(availability: Availability) -> Planned {
        Planned { resolved: None, per_replica: None, availability, value: None, count: None, query: String::new(), metric: String::new(), bounds: Vec::new() }
    }
}

/// Every signal's plan for (window, baseline), the requests to send, and the context they were
/// built in (the follow-ups build theirs from it).
#[derive(Debug, Clone)]
pub struct SignalPlan {
    pub signals: BTreeMap<String, (Planned, Planned)>,
    pub requests: Vec<Request>,
    pub ctx: QueryContext,
}

/// Signals the enabled rules read, in a stable order (with the recommenders' inputs when a rule
/// recommends).
pub fn needed_signals(rules: &RuleSet) -> BTreeSet<String> {
    let mut needed: BTreeSet<String> = rules.rules.iter().flat_map(|r| r.signals()).collect();
    if rules.rules.iter().any(|r| r.recommend.is_some()) {
        needed.extend(RECOMMENDATION_INPUTS.iter().filter(|s| rules.signals.contains_key(**s)).map(|s| s.to_string()));
    }
    needed
}

/// Plan one signal against the names present in one window, asked at `at`.
pub fn plan_one(def: &SignalDef, names: &BTreeSet<String>, at: chrono::DateTime<chrono::Utc>, ctx: &QueryContext) -> Planned {
    let resolved = match signals::resolve(&def.kind, names) {
        Err(missing) => return Planned::unavailable(Availability::Missing(missing)),
        Ok(r) => r,
    };
    match signals::build(&def.kind, &resolved, &QueryContext { range: def.range_in(ctx.range), ..ctx.clone() }) {
        Err(e) => Planned::unavailable(Availability::Failed(e)),
        Ok(q) => Planned {
            per_replica: q.per_replica.clone(),
            availability: Availability::Ok,
            value: Some(Request::Instant { query: q.value.clone(), time: at }),
            count: q.count.map(|c| Request::Instant { query: c, time: at }),
            query: q.value,
            metric: resolved.names[0].clone(),
            bounds: match &def.kind {
                signals::SignalKind::Quantile { .. } => {
                    ctx.buckets.get(&resolved.names[0]).map(|b| b.iter().map(|b| b.value).collect()).unwrap_or_default()
                }
                _ => Vec::new(),
            },
            resolved: Some(resolved),
        },
    }
}

/// Plan every needed signal in both windows. Notes about how a signal will be read (coarse buckets,
/// a range clamped to a short window) go to `warnings`.
pub fn plan_signals(rules: &RuleSet, needed: &BTreeSet<String>, ctx: QueryContext, p: &RunParams, disc: &Discovery, warnings: &mut Vec<String>) -> SignalPlan {
    let mut planned = BTreeMap::new();
    for id in needed {
        let Some(def) = rules.signals.get(id) else { continue };
        let pair = (plan_one(def, &disc.window_names, p.window.end, &ctx), plan_one(def, &disc.baseline_names, p.baseline.end, &ctx));
        planned.insert(id.clone(), pair);
        if let Ok(resolved) = signals::resolve(&def.kind, &disc.window_names) {
            if let Some(note) = signals::bucket_note(&def.kind, &resolved, &ctx) {
                if !warnings.contains(&note) {
                    warnings.push(note);
                }
            }
        }
    }
    // Signals whose fixed range must stay inside the window (the short windows of SLO burn-rate
    // pairs) are read over the window when it is shorter: say so, and which ranges were used.
    let clamped: Vec<String> = needed
        .iter()
        .filter_map(|id| rules.signals.get(id))
        .filter(|d| d.clamped_in(p.window.duration()) && planned.get(&d.id).is_some_and(|(w, _): &(Planned, Planned)| w.resolved.is_some()))
        .map(|d| format!("{} ({} -> {})", d.id, signals::promql_duration(d.range.unwrap_or_default()), signals::promql_duration(p.window.duration())))
        .collect();
    if !clamped.is_empty() {
        warnings.push(format!(
            "the window ({}) is shorter than some signals' own ranges, which must lie inside it (the short window of each SLO burn-rate pair, the 'last 5 minutes' reads): read over the whole window instead: {}",
            signals::promql_duration(p.window.duration()),
            clamped.join(", ")
        ));
    }
    let requests = planned
        .values()
        .flat_map(|(w, b)| [&w.value, &w.count, &b.value, &b.count])
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    SignalPlan { signals: planned, requests, ctx }
}
