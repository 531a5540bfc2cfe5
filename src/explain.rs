//! The explain pipeline: discover which metrics exist, query every signal for the window and the
//! baseline concurrently, evaluate the rules, rank, and assemble the [`Report`].
//!
//! Only [`run_queries`] touches the network. A query that fails or times out does not stop the run:
//! the signals that needed it become "not evaluated" with the reason, and the rest of the diagnosis
//! still comes out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use crate::report::RunParams;
use crate::rank::{rank, Judgement};
use crate::report::{MetricsInfo, Report, RunStats, Scope, SourceInfo, SCHEMA_VERSION};
use crate::rules::eval::{evaluate, Availability, Outcome, SignalTable, SignalValues, WindowValues};
use crate::rules::RuleSet;
use crate::prom::Selector;
use crate::signals::{self, QueryContext};
use crate::source::{decode, Data, Request, Response, Source, SourceError};

/// How a run talks to its source.
#[derive(Debug, Clone)]
pub struct ExplainOptions {
    pub params: RunParams,
    pub selector: Selector,
    /// Queries in flight at once.
    pub concurrency: usize,
    /// Everything must be answered within this; what is not becomes "not evaluated: timed out".
    pub deadline: Duration,
}

/// Why a run produced no report at all.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    #[error("{0}")]
    Unreachable(SourceError),
    #[error("{0}")]
    NoData(String),
}

/// Signals the recommenders read (see [`crate::recommend`]).
const RECOMMENDATION_INPUTS: &[&str] = &["prompt_len_mean", "output_len_mean", "running_per_replica", "kv_usage_avg"];

/// Labels worth knowing about on a fleet's vLLM series, whatever the grouping: how many namespaces,
/// pods and instances the window holds.
const FLEET_LABELS: &[&str] = &["namespace", "pod", "instance"];

/// Answers keyed by request.
type Answers = BTreeMap<Request, Result<Response, SourceError>>;

/// Send every request concurrently (at most `concurrency` at once) and decode the answers. Requests
/// still unanswered at the deadline get a timeout error.
pub async fn run_queries(source: &Arc<dyn Source>, requests: Vec<Request>, concurrency: usize, deadline: Duration) -> Answers {
    let url = source.url();
    let end = tokio::time::Instant::now() + deadline;
    let mut answers = Answers::new();
    let pending: BTreeSet<Request> = requests.iter().cloned().collect();
    let mut stream = futures::stream::iter(requests.into_iter().map(|req| {
        let source = Arc::clone(source);
        let url = url.clone();
        async move {
            let res = match source.send(&req).await {
                Ok(ex) => decode(&url, &req, &ex),
                Err(e) => Err(e),
            };
            (req, res)
        }
    }))
    .buffer_unordered(concurrency.max(1));
    loop {
        match tokio::time::timeout_at(end, stream.next()).await {
            Ok(Some((req, res))) => {
                answers.insert(req, res);
            }
            Ok(None) => break,
            Err(_) => break,
        }
    }
    for req in pending {
        answers.entry(req).or_insert_with(|| Err(SourceError::Timeout { url: url.clone(), after: deadline }));
    }
    answers
}

/// When the first vLLM sample in `range` is, if it comes more than one step after the range's start:
/// a `count` of one vLLM series over the range, about sixty points. `None` when the data covers
/// the range, or the answer does not tell.
async fn data_start(
    source: &Arc<dyn Source>,
    selector: &Selector,
    names: &BTreeSet<String>,
    range: &crate::report::TimeRange,
    deadline: Duration,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let metric = signals::RUNNING_GAUGE
        .iter()
        .map(|n| n.to_string())
        .find(|n| names.contains(n))
        .or_else(|| names.iter().find(|n| n.starts_with("vllm")).cloned())?;
    let step = (range.duration().as_secs() / 60).max(15);
    let req = Request::Range {
        query: format!("count({})", selector.series(&metric, &[])),
        start: range.start,
        end: range.end,
        step_seconds: step,
    };
    let answers = run_queries(source, vec![req.clone()], 1, deadline).await;
    let Some(Ok(Response { data: Data::Matrix(series), .. })) = answers.get(&req) else {
        return None;
    };
    let first = series.iter().filter_map(|s| s.points.first().map(|p| p.0)).fold(f64::INFINITY, f64::min);
    if !first.is_finite() || first <= (range.start.timestamp() + step as i64) as f64 {
        return None;
    }
    chrono::DateTime::from_timestamp(first as i64, 0)
}

/// Which metric names hold data in a window (vLLM's plus the extra names signals use).
fn discovery_request(selector: &Selector, extras: &[String], range: &crate::report::TimeRange) -> Request {
    Request::LabelValues {
        label: "__name__".into(),
        matchers: vec![signals::discovery_matcher(selector, extras)],
        start: range.start,
        end: range.end,
    }
}

/// Turn a vector answer into values per scope.
fn by_scope(resp: &Response, group_by: &[String]) -> BTreeMap<Scope, f64> {
    let mut out = BTreeMap::new();
    if let Data::Vector(samples) = &resp.data {
        for s in samples {
            let scope: Scope = group_by.iter().map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect();
            out.insert(scope, s.v);
        }
    }
    out
}

/// Outlier answers: one series per scope whose value is already the ratio and whose replica label
/// names the worst replica. A scope with one replica has no series (nothing to compare with).
fn outliers(resp: &Response, group_by: &[String], label: &str) -> (BTreeMap<Scope, f64>, BTreeMap<Scope, BTreeMap<String, String>>) {
    let mut values = BTreeMap::new();
    let mut culprits = BTreeMap::new();
    if let Data::Vector(samples) = &resp.data {
        for s in samples {
            let scope: Scope = group_by.iter().map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect();
            // 0/0 (all replicas idle) is NaN: no outlier to speak of.
            if s.v.is_nan() {
                continue;
            }
            values.insert(scope.clone(), s.v);
            if let Some(name) = s.labels.get(label) {
                culprits.insert(scope, [(label.to_string(), name.clone())].into_iter().collect());
            }
        }
    }
    (values, culprits)
}

/// Per-replica answers listing replicas: the value is how many per scope, and a lone replica is
/// named (by the replica label, and by `instance` too when the answer carries it).
fn listed(resp: &Response, group_by: &[String], label: &str) -> (BTreeMap<Scope, f64>, BTreeMap<Scope, BTreeMap<String, String>>) {
    let mut per: BTreeMap<Scope, BTreeMap<String, Option<String>>> = BTreeMap::new();
    if let Data::Vector(samples) = &resp.data {
        for s in samples {
            let scope: Scope = group_by.iter().map(|l| (l.clone(), s.labels.get(l).cloned().unwrap_or_default())).collect();
            let name = s.labels.get(label).cloned().unwrap_or_default();
            let instance = (label != "instance").then(|| s.labels.get("instance").cloned()).flatten();
            per.entry(scope).or_default().insert(name, instance);
        }
    }
    let mut values = BTreeMap::new();
    let mut culprits = BTreeMap::new();
    for (scope, names) in per {
        values.insert(scope.clone(), names.len() as f64);
        if let (1, Some((name, instance))) = (names.len(), names.iter().next()) {
            let mut c: BTreeMap<String, String> = [(label.to_string(), name.clone())].into_iter().collect();
            if let Some(i) = instance {
                c.insert("instance".into(), i.clone());
            }
            culprits.insert(scope, c);
        }
    }
    (values, culprits)
}

/// The selector narrowed to some scopes: `model_name="a"` for one, `model_name=~"a|b"` for several
/// (per label, so with several grouping labels it may admit a few combinations more, never fewer).
fn only_scopes(selector: &Selector, group_by: &[String], scopes: &BTreeSet<Scope>) -> Selector {
    use crate::prom::{escape_regex_literal, MatchOp, Matcher};
    let mut sel = selector.clone();
    for label in group_by {
        let values: BTreeSet<&str> = scopes.iter().map(|s| s.get(label).map_or("", String::as_str)).collect();
        match values.len() {
            0 => {}
            1 => sel.matchers.extend(values.iter().map(|v| Matcher::eq(label, v))),
            _ => sel.matchers.push(Matcher {
                name: label.clone(),
                op: MatchOp::Re,
                value: values.iter().map(|v| escape_regex_literal(v)).collect::<Vec<_>>().join("|"),
            }),
        }
    }
    sel
}

/// Signal kinds whose query can simply be grouped by replica as well.
fn replica_breakdown_supported(kind: &signals::SignalKind) -> bool {
    use signals::SignalKind as K;
    match kind {
        K::Quantile { .. } | K::Mean { .. } | K::ActiveShare { .. } | K::Fill { .. } | K::Slope { .. } => true,
        K::Rate { attribute_via, .. } | K::Ratio { attribute_via, .. } | K::Gauge { attribute_via, .. } => attribute_via.is_empty(),
        _ => false,
    }
}

/// Which replicas cross the limits the scope as a whole crossed.
fn affected_replicas(samples: &[crate::source::Sample], e: &crate::report::Evidence, replica_label: &str) -> crate::report::Replicas {
    let holds = |label: &str, v: f64, limit: f64| {
        if label.starts_with(">=") {
            v >= limit
        } else if label.starts_with('>') {
            v > limit
        } else if label.starts_with("<=") {
            v <= limit
        } else {
            v < limit
        }
    };
    let crossed: Vec<&crate::report::Limit> =
        e.limits.iter().filter(|l| e.value.is_some_and(|v| holds(&l.label, v, l.value))).collect();
    let mut names: Vec<String> = samples.iter().map(|s| s.labels.get(replica_label).cloned().unwrap_or_default()).collect();
    names.sort();
    names.dedup();
    let mut affected: Vec<String> = samples
        .iter()
        .filter(|s| s.v.is_finite() && crossed.iter().any(|l| holds(&l.label, s.v, l.value)))
        .map(|s| s.labels.get(replica_label).cloned().unwrap_or_default())
        .collect();
    affected.sort();
    affected.dedup();
    crate::report::Replicas {
        label: replica_label.to_string(),
        affected,
        total: names.len(),
        signal: e.signal.clone(),
        limit: crossed.iter().map(|l| l.label.clone()).collect::<Vec<_>>().join(" or "),
    }
}

/// Label the metric generation from the names present.
pub fn generation(names: &BTreeSet<String>) -> String {
    let has = |n: &str| signals::spellings(n).iter().any(|s| names.contains(s));
    let v1 = ["vllm:kv_cache_usage_perc", "vllm:inter_token_latency_seconds_bucket", "vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total", "vllm:spec_decode_num_drafts_total", "vllm:request_prefill_kv_computed_tokens_bucket", "vllm:engine_sleep_state"]
        .iter()
        .any(|n| has(n));
    let v0 = ["vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc", "vllm:gpu_prefix_cache_hit_rate", "vllm:avg_generation_throughput_toks_per_s", "vllm:time_in_queue_requests_bucket", "vllm:tokens_total"]
        .iter()
        .any(|n| has(n))
        || (has("vllm:gpu_cache_usage_perc") && has("vllm:time_per_output_token_seconds_bucket") && !v1);
    let otel = names.iter().any(|n| n.starts_with("vllm_")) && !names.iter().any(|n| n.starts_with("vllm:"));
    let g = match (v1, v0) {
        (true, true) => "mixed",
        (true, false) => "v1",
        (false, true) => "v0",
        (false, false) => "unknown",
    };
    if otel { format!("{g} (vllm_ names)") } else { g.to_string() }
}

pub async fn explain(source: Arc<dyn Source>, rules: &RuleSet, opts: &ExplainOptions) -> Result<Report, ExplainError> {
    let p = &opts.params;
    let started = std::time::Instant::now();
    let mut warnings: Vec<String> = Vec::new();
    let mut queries_sent = 0usize;

    // Signals the enabled rules read, in a stable order.
    let mut needed: BTreeSet<String> = rules.rules.iter().flat_map(|r| r.signals()).collect();
    if rules.rules.iter().any(|r| r.recommend.is_some()) {
        for s in RECOMMENDATION_INPUTS {
            if rules.signals.contains_key(*s) {
                needed.insert(s.to_string());
            }
        }
    }
    let extras: Vec<String> = needed
        .iter()
        .filter_map(|s| rules.signals.get(s))
        .flat_map(|d| signals::required_series(&d.kind))
        .flatten()
        .filter(|n| !n.starts_with("vllm"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();

    // 1. Discovery, both windows at once; with it, the bucket bounds of histograms read at a target
    // (SLO burn), so a target between two buckets can be interpolated.
    let disc_w = discovery_request(&opts.selector, &extras, &p.window);
    let disc_b = discovery_request(&opts.selector, &extras, &p.baseline);
    // How many namespaces, pods, instances and scopes the fleet has, and whether the grouping and
    // replica labels exist at all.
    let label_requests: Vec<(String, Request)> = FLEET_LABELS
        .iter()
        .map(|l| l.to_string())
        .chain(p.group_by.iter().cloned())
        .chain(std::iter::once(p.replica_label.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|label| {
            let query = signals::label_count_query(&opts.selector, &label, p.window.duration());
            (label, Request::Instant { query, time: p.window.end })
        })
        .collect();
    let bucket_requests: Vec<(Vec<String>, Request)> = needed
        .iter()
        .filter_map(|s| rules.signals.get(s))
        .map(|d| signals::bucket_series(&d.kind))
        .filter(|series| !series.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|series| {
            let query = signals::bucket_coverage_query(&opts.selector, &series);
            (series, Request::Instant { query, time: p.window.end })
        })
        .collect();
    queries_sent += 2 + bucket_requests.len();
    // The bucket bounds only refine SLO reads, so they get a quarter of the deadline: a stuck
    // answer must not cost the whole run. (The label counts go with the signal queries, below.)
    let (mut disc, mut bounds_answers) = tokio::join!(
        run_queries(&source, vec![disc_w.clone(), disc_b.clone()], 2, opts.deadline),
        run_queries(
            &source,
            bucket_requests.iter().map(|(_, r)| r.clone()).collect(),
            opts.concurrency.saturating_sub(2).max(1),
            opts.deadline / 4
        ),
    );
    // A histogram whose bounds could not be listed is read at the target by value (`le="0.5"`).
    let mut buckets: BTreeMap<String, Vec<signals::Bound>> = BTreeMap::new();
    for (series, req) in &bucket_requests {
        match bounds_answers.remove(req) {
            Some(Ok(Response { data: Data::Vector(samples), warnings: w, .. })) => {
                warnings.extend(w);
                let counts: Vec<(String, f64)> =
                    samples.iter().filter_map(|s| s.labels.get("le").map(|le| (le.clone(), s.v))).collect();
                let bounds = signals::covered_bounds(&counts);
                if !bounds.is_empty() {
                    for s in series {
                        buckets.insert(s.clone(), bounds.clone());
                    }
                }
            }
            // A recording made before this lookup existed: replay as it was recorded, silently.
            Some(Err(SourceError::NotRecorded { .. })) => {}
            Some(Err(e)) => warnings.push(format!(
                "could not list the buckets of {} ({e}): an SLO target is read only from a bucket exactly at it, and its quantiles are taken at face value (even inside the first or last bucket)",
                series.first().map(|s| s.trim_end_matches("_bucket")).unwrap_or_default()
            )),
            _ => {}
        }
    }
    let names_of = |r: Result<Response, SourceError>, warnings: &mut Vec<String>| -> Result<BTreeSet<String>, SourceError> {
        let resp = r?;
        warnings.extend(resp.warnings.iter().cloned());
        match resp.data {
            Data::Labels(v) => Ok(v.into_iter().collect()),
            _ => Ok(BTreeSet::new()),
        }
    };
    let window_names = match disc.remove(&disc_w).unwrap_or_else(|| Err(SourceError::Other { detail: "no answer".into() })) {
        Ok(r) => names_of(Ok(r), &mut warnings).map_err(ExplainError::Unreachable)?,
        Err(e) => return Err(ExplainError::Unreachable(e)),
    };
    let baseline_names = match disc.remove(&disc_b).unwrap_or_else(|| Err(SourceError::Other { detail: "no answer".into() })) {
        Ok(r) => names_of(Ok(r), &mut warnings).unwrap_or_default(),
        Err(e) => {
            warnings.push(format!("could not list the baseline's metrics ({e}); baseline comparisons are not evaluated"));
            BTreeSet::new()
        }
    };
    if !window_names.iter().any(|n| n.starts_with("vllm")) {
        let sel = if opts.selector.is_empty() { String::new() } else { format!(" matching {{{}}}", opts.selector.to_promql()) };
        return Err(ExplainError::NoData(format!(
            "no vLLM metrics (vllm:* or vllm_*){sel} at {} between {} and {}. Check --at and --window, the --selector, and that Prometheus scrapes the vLLM servers' /metrics",
            source.url(),
            crate::source::format_time(&p.window.start),
            crate::source::format_time(&p.window.end)
        )));
    }
    if !baseline_names.iter().any(|n| n.starts_with("vllm")) {
        warnings.push(format!(
            "the baseline window ({} to {}) holds no vLLM data: comparisons with the baseline are not evaluated, absolute thresholds still are",
            crate::source::format_time(&p.baseline.start),
            crate::source::format_time(&p.baseline.end)
        ));
        // Then the window may be longer than the data as well: one coarse range query tells.
        let remaining = opts.deadline.saturating_sub(started.elapsed()).max(std::time::Duration::from_millis(1));
        queries_sent += 1;
        if let Some(first) = data_start(&source, &opts.selector, &window_names, &p.window, remaining).await {
            warnings.push(format!(
                "vLLM data only starts at about {} (the window starts at {}): the window is longer than the data, so averages cover only the part with data and rates are underestimated; shorten --window or move --at",
                crate::source::format_time(&first),
                crate::source::format_time(&p.window.start)
            ));
        }
    }

    // 2. Plan the signal queries for each window.
    let ctx = QueryContext {
        selector: opts.selector.clone(),
        group_by: p.group_by.clone(),
        range: p.window.duration(),
        thresholds: rules.thresholds.clone(),
        buckets,
        replica_label: p.replica_label.clone(),
    };
    struct Planned {
        resolved: Option<signals::Resolved>,
        per_replica: Option<(String, signals::Reduction)>,
        availability: Availability,
        value: Option<Request>,
        count: Option<Request>,
        query: String,
        metric: String,
        bounds: Vec<f64>,
    }
    let plan = |def: &crate::signals::SignalDef, names: &BTreeSet<String>, at| -> Planned {
        match signals::resolve(&def.kind, names) {
            Err(missing) => Planned { resolved: None, per_replica: None, availability: Availability::Missing(missing), value: None, count: None, query: String::new(), metric: String::new(), bounds: Vec::new() },
            Ok(resolved) => match signals::build(&def.kind, &resolved, &QueryContext { range: def.range_in(ctx.range), ..ctx.clone() }) {
                Err(e) => Planned { resolved: None, per_replica: None, availability: Availability::Failed(e), value: None, count: None, query: String::new(), metric: String::new(), bounds: Vec::new() },
                Ok(q) => Planned {
                    resolved: Some(resolved.clone()),
                    per_replica: q.per_replica.clone(),
                    availability: Availability::Ok,
                    value: Some(Request::Instant { query: q.value.clone(), time: at }),
                    count: q.count.map(|c| Request::Instant { query: c, time: at }),
                    query: q.value,
                    metric: resolved.names[0].clone(),
                    // Quantiles carry their histogram's bounds, so values inside the first or +Inf
                    // bucket are read as bounds.
                    bounds: match &def.kind {
                        signals::SignalKind::Quantile { .. } => {
                            ctx.buckets.get(&resolved.names[0]).map(|b| b.iter().map(|b| b.value).collect()).unwrap_or_default()
                        }
                        _ => Vec::new(),
                    },
                },
            },
        }
    };
    let mut planned: BTreeMap<String, (Planned, Planned)> = BTreeMap::new();
    for id in &needed {
        let Some(def) = rules.signals.get(id) else { continue };
        planned.insert(id.clone(), (plan(def, &window_names, p.window.end), plan(def, &baseline_names, p.baseline.end)));
        if let Ok(resolved) = signals::resolve(&def.kind, &window_names) {
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
        .filter(|d| d.clamped_in(p.window.duration()) && planned.get(&d.id).is_some_and(|(w, _)| w.resolved.is_some()))
        .map(|d| format!("{} ({} -> {})", d.id, signals::promql_duration(d.range.unwrap_or_default()), signals::promql_duration(p.window.duration())))
        .collect();
    if !clamped.is_empty() {
        warnings.push(format!(
            "the window ({}) is shorter than some signals' own ranges, which must lie inside it (the short window of each SLO burn-rate pair, the 'last 5 minutes' reads): read over the whole window instead: {}",
            signals::promql_duration(p.window.duration()),
            clamped.join(", ")
        ));
    }
    let requests: Vec<Request> = planned
        .values()
        .flat_map(|(w, b)| [&w.value, &w.count, &b.value, &b.count])
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    queries_sent += requests.len();

    // 3. Ask, within what is left of the overall deadline (discovery used some of it).
    let remaining = opts.deadline.saturating_sub(started.elapsed()).max(std::time::Duration::from_millis(1));
    // The fleet's label counts need nothing but the selector: they ride along.
    let label_reqs: Vec<Request> = label_requests.iter().map(|(_, r)| r.clone()).collect();
    queries_sent += label_reqs.len();
    let answers = run_queries(&source, requests.into_iter().chain(label_reqs).collect(), opts.concurrency, remaining).await;
    let mut fleet_labels: BTreeMap<String, usize> = BTreeMap::new();
    for (label, req) in &label_requests {
        // A count that did not answer leaves the label out: the header then says less, nothing more.
        if let Some(Ok(Response { data: Data::Vector(samples), .. })) = answers.get(req) {
            let n = samples.first().map(|s| s.v).filter(|v| v.is_finite() && *v >= 0.0).unwrap_or(0.0);
            fleet_labels.insert(label.clone(), n as usize);
        }
    }
    for resp in answers.values().flatten() {
        warnings.extend(resp.warnings.iter().cloned());
    }
    // The counts come from the running-requests gauge: without it they say nothing.
    if !signals::RUNNING_GAUGE.iter().any(|n| window_names.contains(*n)) {
        fleet_labels.clear();
    }
    // Grouping or replica labels no vLLM series carries make every scope (or replica) one.
    let present: Vec<&str> = fleet_labels.iter().filter(|(_, n)| **n > 0).map(|(l, _)| l.as_str()).collect();
    let present = if present.is_empty() { "none".to_string() } else { present.join(", ") };
    for label in &p.group_by {
        if fleet_labels.get(label) == Some(&0) {
            warnings.push(format!(
                "--group-by {label}: no vLLM series in the window carries this label, so every finding has it empty; labels checked and found: {present}"
            ));
        }
    }
    if fleet_labels.get(&p.replica_label) == Some(&0) {
        warnings.push(format!(
            "--replica-label {}: no vLLM series in the window carries this label, so replicas cannot be told apart (outliers, imbalance and affected replicas see one per scope); labels checked and found: {present}",
            p.replica_label
        ));
    }

    // 4. Assemble values.
    let fill = |pl: &Planned| -> WindowValues {
        let mut wv = WindowValues {
            availability: pl.availability.clone(),
            values: BTreeMap::new(),
            counts: BTreeMap::new(),
            query: pl.query.clone(),
            metric: pl.metric.clone(),
            culprits: BTreeMap::new(),
            bounds: pl.bounds.clone(),
        };
        if let Some(req) = &pl.value {
            match answers.get(req) {
                Some(Ok(resp)) => match &pl.per_replica {
                    None => wv.values = by_scope(resp, &p.group_by),
                    Some((label, signals::Reduction::Outlier)) => (wv.values, wv.culprits) = outliers(resp, &p.group_by, label),
                    Some((label, signals::Reduction::Count)) => (wv.values, wv.culprits) = listed(resp, &p.group_by, label),
                },
                Some(Err(e)) => wv.availability = Availability::Failed(e.short_reason()),
                None => wv.availability = Availability::Failed("not answered".into()),
            }
        }
        if let Some(Some(Ok(resp))) = pl.count.as_ref().map(|r| answers.get(r)) {
            wv.counts = by_scope(resp, &p.group_by);
        }
        // NaN values (a quantile over no observations, 0/0) are no data for that scope.
        wv.values.retain(|_, v| !v.is_nan());
        wv
    };
    let mut table = SignalTable::new();
    let mut names_used = BTreeMap::new();
    for (id, (w, b)) in &planned {
        let sv = SignalValues { window: fill(w), baseline: fill(b) };
        if !sv.window.metric.is_empty() {
            let used = if !sv.baseline.metric.is_empty() && sv.baseline.metric != sv.window.metric {
                warnings.push(format!("{id}: metric name changed between baseline ({}) and window ({}); vLLM was probably upgraded", sv.baseline.metric, sv.window.metric));
                format!("{} (baseline: {})", sv.window.metric, sv.baseline.metric)
            } else {
                sv.window.metric.clone()
            };
            names_used.insert(id.clone(), used);
        }
        table.insert(id.clone(), sv);
    }

    // 5. Scopes seen in the window, then every rule for every scope.
    let mut scopes: BTreeSet<Scope> = table.values().flat_map(|s| s.window.values.keys().cloned()).collect();
    if scopes.is_empty() {
        scopes.insert(Scope::new());
    }
    // A rule decided without numbers (an optional feature's metrics absent) does not make the run
    // "evaluated" when not one signal query brought data back: such a run has no verdict (exit 3).
    // Only signals that look inside the window count: a 6h burn rate reaching back before it is no
    // sign that the window itself holds data (which matters where discovery is coarse, e.g.
    // VictoriaMetrics lists the metric names of whole days).
    let inside = |id: &String| rules.signals.get(id).map_or(true, |d| d.range_in(p.window.duration()) <= p.window.duration());
    let any_data = table.iter().any(|(id, s)| inside(id) && matches!(s.window.availability, Availability::Ok) && !s.window.values.is_empty());
    let mut judgements = Vec::new();
    let mut evaluated = 0usize;
    for rule in &rules.rules {
        for scope in &scopes {
            let mut outcome = evaluate(rule, rules, &table, scope);
            if !any_data && matches!(outcome, Outcome::NotMatched) {
                // Only an optional feature's absence decided it, and with no data at all in the
                // window that absence proves nothing: not healthy, not evaluated.
                outcome = Outcome::Unknown {
                    reasons: vec!["metric missing in the window, and no signal found any vLLM data in the window, so its absence proves nothing".into()],
                };
            }
            if any_data && !matches!(outcome, Outcome::Unknown { .. }) {
                evaluated += 1;
            }
            // A finding about one replica names it in its scope.
            let mut named = scope.clone();
            if matches!(outcome, Outcome::Matched { .. }) {
                for sig in rule.signals() {
                    if let Some(culprit) = table.get(&sig).and_then(|sv| sv.window.culprits.get(scope)) {
                        for (k, v) in culprit {
                            named.entry(k.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
            }
            judgements.push(Judgement { rule: rule.id.clone(), scope: named, outcome });
        }
    }
    let coverage = coverage(rules, &table, &judgements, any_data, &p.group_by);
    let mut ranked = rank(rules, &p.group_by, judgements);

    // 6. Follow-ups for findings only, planned together and sent in one concurrent batch (one more
    //    round trip after the signals, not two): trends of the evidence, one per-replica breakdown
    //    per finding, and the cache configuration for recommendations. Each asks only for the scopes
    //    with a finding (one model of fifty in a typical incident), never for the whole fleet.
    let trend_range = std::time::Duration::from_secs((p.window.duration().as_secs() / 10).clamp(120, 600));
    let step = (p.window.duration().as_secs() / 30).max(15);
    let trend_ctx = QueryContext { range: trend_range, ..ctx.clone() };
    let base_scope = |scope: &Scope| -> Scope { p.group_by.iter().map(|l| (l.clone(), scope.get(l).cloned().unwrap_or_default())).collect() };
    // (Signals with a fixed range keep it; per-replica signals have no single trend line.)
    let mut wanted: BTreeMap<String, BTreeSet<Scope>> = BTreeMap::new();
    for f in &ranked.findings {
        for e in &f.evidence {
            wanted.entry(e.signal.clone()).or_default().insert(base_scope(&f.scope));
        }
    }
    let mut trend_requests: BTreeMap<String, (String, Request, Request)> = BTreeMap::new();
    for (id, scopes) in &wanted {
        let (Some(def), Some((w, _))) = (rules.signals.get(id), planned.get(id)) else { continue };
        let Some(resolved) = &w.resolved else { continue };
        if w.per_replica.is_some() {
            continue;
        }
        let tctx = QueryContext { selector: only_scopes(&opts.selector, &p.group_by, scopes), range: def.range.unwrap_or(trend_range), ..trend_ctx.clone() };
        let Ok(q) = signals::build(&def.kind, resolved, &tctx) else { continue };
        let range = |r: &crate::report::TimeRange| Request::Range { query: q.value.clone(), start: r.start, end: r.end, step_seconds: step };
        trend_requests.insert(id.clone(), (q.value.clone(), range(&p.baseline), range(&p.window)));
    }
    let trend_reqs: Vec<Request> = trend_requests.values().flat_map(|(_, b, w)| [b.clone(), w.clone()]).collect();

    // Per-replica breakdown ("3 of 8 replicas"): one query per finding restricted to its model.
    let mut extra: Vec<Request> = Vec::new();
    let mut breakdowns: Vec<Option<(Request, String)>> = Vec::new();
    for f in &ranked.findings {
        let b = (|| {
            if f.scope.keys().any(|k| !p.group_by.contains(k)) {
                return None; // already about one replica
            }
            let e = f.evidence.iter().find(|e| e.passed && !e.limits.is_empty())?;
            let def = rules.signals.get(&e.signal)?;
            if !replica_breakdown_supported(&def.kind) {
                return None;
            }
            let resolved = planned.get(&e.signal)?.0.resolved.clone()?;
            let mut sel = opts.selector.clone();
            for (k, v) in &f.scope {
                sel.matchers.push(crate::prom::Matcher::eq(k, v));
            }
            let mut group_by = p.group_by.clone();
            group_by.push(p.replica_label.clone());
            let rctx = QueryContext { selector: sel, group_by, range: def.range_in(ctx.range), ..ctx.clone() };
            let q = signals::build(&def.kind, &resolved, &rctx).ok()?;
            Some((Request::Instant { query: q.value, time: p.window.end }, e.signal.clone()))
        })();
        if let Some((req, _)) = &b {
            extra.push(req.clone());
        }
        breakdowns.push(b);
    }
    let recommending: BTreeSet<Scope> = ranked
        .findings
        .iter()
        .filter(|f| rules.rule(&f.rule).is_some_and(|r| r.recommend.is_some()))
        .map(|f| base_scope(&f.scope))
        .collect();
    let cache_req = (!recommending.is_empty() && window_names.iter().any(|n| signals::spellings("vllm:cache_config_info").contains(n))).then(|| {
        let name = signals::pick(&["vllm:cache_config_info".to_string()], &window_names).cloned().unwrap_or_default();
        let anchor = signals::pick(&["vllm:num_requests_running".to_string()], &window_names).cloned().unwrap_or_default();
        let by = p.group_by.join(", ");
        let r = signals::promql_duration(p.window.duration());
        let sel = only_scopes(&opts.selector, &p.group_by, &recommending);
        Request::Instant {
            query: format!(
                "max by ({by}, num_gpu_blocks, block_size) (last_over_time({}[{r}]) * on (instance, job) group_left ({by}) group by (instance, job, {by}) (last_over_time({}[{r}])))",
                sel.without(&p.group_by).series(&name, &[]),
                sel.series(&anchor, &[])
            ),
            time: p.window.end,
        }
    });
    if let Some(r) = &cache_req {
        extra.push(r.clone());
    }

    let follow_ups: Vec<Request> = trend_reqs.iter().chain(&extra).cloned().collect();
    let more = if follow_ups.is_empty() {
        Answers::new()
    } else {
        queries_sent += follow_ups.len();
        let remaining = opts.deadline.saturating_sub(started.elapsed()).max(std::time::Duration::from_millis(1));
        run_queries(&source, follow_ups, opts.concurrency, remaining).await
    };

    if !trend_requests.is_empty() {
        for resp in trend_reqs.iter().filter_map(|r| more.get(r)).flatten() {
            warnings.extend(resp.warnings.iter().cloned());
        }
        let points = |req: &Request, scope: &Scope| -> Vec<(f64, f64)> {
            match more.get(req) {
                Some(Ok(Response { data: Data::Matrix(series), .. })) => series
                    .iter()
                    .find(|s| p.group_by.iter().all(|l| s.labels.get(l).cloned().unwrap_or_default() == scope.get(l).cloned().unwrap_or_default()))
                    .map(|s| s.points.iter().copied().filter(|(_, v)| v.is_finite()).collect())
                    .unwrap_or_default(),
                _ => Vec::new(),
            }
        };
        for f in &mut ranked.findings {
            for e in &mut f.evidence {
                if let Some((query, b, w)) = trend_requests.get(&e.signal) {
                    let (baseline, window) = (points(b, &f.scope), points(w, &f.scope));
                    if !baseline.is_empty() || !window.is_empty() {
                        e.series = Some(crate::report::Trend { step_seconds: step, range_seconds: trend_range.as_secs(), query: query.clone(), baseline, window });
                    }
                }
            }
        }
    }

    // 7. Apply the breakdowns and compute the recommendations (these need no follow-up query when the
    //    measured KV footprint is enough).
    {
        let cache = match cache_req.as_ref().and_then(|r| more.get(r)) {
            Some(Ok(Response { data: Data::Vector(v), .. })) => crate::recommend::cache_config(v, &p.group_by),
            _ => BTreeMap::new(),
        };
        for (f, b) in ranked.findings.iter_mut().zip(&breakdowns) {
            if let Some((req, signal)) = b {
                if let Some(Ok(Response { data: Data::Vector(samples), .. })) = more.get(req) {
                    if let Some(e) = f.evidence.iter().find(|e| &e.signal == signal) {
                        f.replicas = Some(affected_replicas(samples, e, &p.replica_label));
                    }
                }
            }
            if let Some(kind) = rules.rule(&f.rule).and_then(|r| r.recommend.clone()) {
                let base: Scope = f.scope.iter().filter(|(k, _)| p.group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
                let val = |sig: &str| table.get(sig).and_then(|t| t.window.values.get(&base).copied());
                let inputs = crate::recommend::Inputs {
                    num_gpu_blocks: cache.get(&base).map(|c| c.0),
                    block_size: cache.get(&base).map(|c| c.1),
                    prompt_len_mean: val("prompt_len_mean"),
                    output_len_mean: val("output_len_mean"),
                    running_per_replica: val("running_per_replica"),
                    kv_usage_avg: val("kv_usage_avg"),
                };
                f.recommendations.extend(crate::recommend::recommend(&kind, &inputs));
            }
        }
    }

    let mut seen = BTreeSet::new();
    warnings.retain(|w| seen.insert(w.clone()));
    let mut info: SourceInfo = source.info();
    info.selector = opts.selector.to_promql();
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        window: p.window,
        baseline: p.baseline,
        source: info,
        metrics: MetricsInfo {
            generation: generation(&window_names),
            scopes: scopes.into_iter().filter(|s| !s.is_empty()).collect(),
            names_used,
            labels: fleet_labels,
            replica_label: p.replica_label.clone(),
        },
        findings: ranked.findings,
        healthy: ranked.healthy,
        not_evaluated: ranked.not_evaluated,
        disabled: Vec::new(),
        warnings,
        stats: RunStats { queries: queries_sent, rules_evaluated: evaluated },
        coverage,
    })
}

/// How much of the pack gave a verdict, which rules decided through stand-ins, and which core
/// rules could not be judged. A core rule counts as not judged only for a gap of the run (a metric
/// missing from the data, a query that failed), not for a scope that merely had nothing to measure
/// (an idle or new model), which would otherwise deny every fleet with one idle model its verdict.
fn coverage(rules: &RuleSet, table: &SignalTable, judgements: &[Judgement], any_data: bool, group_by: &[String]) -> crate::report::Coverage {
    let base = |scope: &Scope| -> Scope { scope.iter().filter(|(k, _)| group_by.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect() };
    let decided = |id: &str| any_data && judgements.iter().any(|j| j.rule == id && !matches!(j.outcome, Outcome::Unknown { .. }));
    let gap = |sig: &String| {
        table.get(sig).is_some_and(|v| {
            [&v.window.availability, &v.baseline.availability].iter().any(|a| !matches!(a, Availability::Ok))
        })
    };
    let condition_signals = |r: &crate::rules::RuleDef| -> Vec<String> {
        r.when.iter().chain(r.stand_in.iter().flat_map(|s| &s.when)).flat_map(|c| c.expr.comparisons()).map(|c| c.signal.clone()).collect()
    };
    let evaluated: Vec<&crate::rules::RuleDef> = rules.rules.iter().filter(|r| decided(&r.id)).collect();
    crate::report::Coverage {
        rules: rules.rules.len(),
        evaluated: evaluated.len(),
        stood_in: evaluated
            .iter()
            .filter(|r| {
                judgements
                    .iter()
                    .filter(|j| j.rule == r.id)
                    .any(|j| crate::rules::eval::decided_by_stand_in(r, rules, table, &base(&j.scope)))
            })
            .count(),
        core_not_evaluated: rules
            .rules
            .iter()
            .filter(|r| {
                r.core
                    && (!any_data
                        || (judgements.iter().any(|j| j.rule == r.id && matches!(j.outcome, Outcome::Unknown { .. }))
                            && condition_signals(r).iter().any(gap)))
            })
            .map(|r| r.id.clone())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(model: &str) -> Scope {
        [("model_name".to_string(), model.to_string())].into_iter().collect()
    }

    fn narrowed(user: &str, models: &[&str]) -> String {
        let sel = Selector::parse(user).unwrap();
        let scopes: BTreeSet<Scope> = models.iter().map(|m| scope(m)).collect();
        only_scopes(&sel, &["model_name".to_string()], &scopes).series("m", &[])
    }

    #[test]
    fn one_scope_narrows_the_selector_to_an_equality_keeping_the_users_matchers() {
        assert_eq!(narrowed(r#"namespace="prod""#, &["meta-llama/Llama-3.1-8B"]), r#"m{namespace="prod",model_name="meta-llama/Llama-3.1-8B"}"#);
    }

    #[test]
    fn several_scopes_narrow_the_selector_to_an_escaped_alternation() {
        assert_eq!(narrowed("", &["a.b", "c"]), r#"m{model_name=~"a\\.b|c"}"#);
    }

    #[test]
    fn a_scope_without_the_label_selects_series_without_it() {
        assert_eq!(narrowed("", &[""]), r#"m{model_name=""}"#);
    }

    #[test]
    fn coverage_counts_rules_with_a_verdict_and_names_core_rules_without_one() {
        let rules = crate::rules::load_builtin().unwrap();
        let missing = crate::rules::eval::WindowValues::unavailable(Availability::Missing(vec!["h_bucket".into()]));
        let mut table = SignalTable::new();
        for sig in ["ttft_p95", "queue_p95", "itl_p95"] {
            table.insert(sig.into(), SignalValues { window: missing.clone(), baseline: missing.clone() });
        }
        // The stand-ins' own signals, quiet.
        let value = |v: f64| crate::rules::eval::WindowValues {
            values: [(scope("m"), v)].into_iter().collect(),
            ..crate::rules::eval::WindowValues::unavailable(Availability::Ok)
        };
        for (sig, v) in [("kv_usage_max", 0.5), ("preemption_active", 0.0), ("waiting_per_replica", 0.0), ("queue_wait_mean", 0.0), ("running_fill", 0.5)] {
            table.insert(sig.into(), SignalValues { window: value(v), baseline: value(v) });
        }
        let j = |rule: &str, outcome: Outcome| Judgement { rule: rule.into(), scope: scope("m"), outcome };
        let unknown = || Outcome::Unknown { reasons: vec!["metric missing".into()] };
        let judgements = vec![
            j("kv-cache-pressure", Outcome::NotMatched),
            j("load-exceeds-capacity", Outcome::NotMatched),
            j("slow-decode", unknown()),
            j("slow-prefill", unknown()),
            j("severe-saturation", unknown()),
            j("http-errors", Outcome::NotMatched),
        ];
        let by = vec!["model_name".to_string()];
        let c = coverage(&rules, &table, &judgements, true, &by);
        assert_eq!(c.rules, rules.rules.len());
        assert_eq!(c.evaluated, 3);
        // kv-cache-pressure is cleared by its own first condition (the cache is half empty); only
        // load-exceeds-capacity needed its stand-in.
        assert_eq!(c.stood_in, 1);
        assert_eq!(c.core_not_evaluated, vec!["severe-saturation", "slow-decode", "slow-prefill"]);
        // A model with nothing to measure (idle, new) leaves its rules unknown without any metric
        // missing: not a gap of the run.
        let mut quiet_table = table.clone();
        for sig in ["ttft_p95", "queue_p95", "itl_p95"] {
            quiet_table.insert(sig.into(), SignalValues { window: value(0.1), baseline: value(0.1) });
        }
        let idle = vec![Judgement { rule: "slow-decode".into(), scope: scope("idle"), outcome: unknown() }, j("slow-decode", Outcome::NotMatched)];
        assert!(coverage(&rules, &quiet_table, &idle, true, &by).core_not_evaluated.is_empty());
        // With no data at all in the window nothing counts as evaluated, and every core rule is missing.
        let none = coverage(&rules, &table, &judgements, false, &by);
        assert_eq!(none.evaluated, 0);
        assert_eq!(none.core_not_evaluated.len(), 5);
    }
}
