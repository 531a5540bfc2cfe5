//! Stage: discover. Which metric names hold data in the window and the baseline, the bucket bounds
//! of histograms read at a target, and the fleet's label counts. Plain functions: requests out,
//! answers in; [`super::fetch`] sends them.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};

use super::fetch::Answers;
use super::ExplainError;
use crate::prom::Selector;
use crate::report::{RunParams, TimeRange, Warnings};
use crate::rules::RuleSet;
use crate::signals;
use crate::source::{Data, Request, Response, SourceError};

/// Labels worth knowing about on a fleet's vLLM series, whatever the grouping: how many namespaces,
/// pods and instances the window holds.
const FLEET_LABELS: &[&str] = &["namespace", "pod", "instance"];

/// The discovery requests of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveryPlan {
    /// Metric names in the window, and in the baseline.
    pub window: Request,
    pub baseline: Request,
    /// Per histogram (its bucket series in every spelling), the request listing its bounds.
    pub buckets: Vec<(Vec<String>, Request)>,
    /// Per label, the request counting its values on the fleet (sent with the signal queries).
    /// The fleet's labels and the one request whose rows say how many values each takes.
    pub labels: (Vec<String>, Request),
}

/// What discovery found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Discovery {
    pub window_names: BTreeSet<String>,
    pub baseline_names: BTreeSet<String>,
    pub buckets: BTreeMap<String, Vec<signals::Bound>>,
}

/// Which metric names hold data in a window (vLLM's plus the extra names signals use, which are
/// looked for without the selector's matchers on `group_by` labels: see
/// [`signals::discovery_matchers`]).
pub fn names_request(selector: &Selector, extras: &[String], group_by: &[String], range: &TimeRange) -> Request {
    Request::LabelValues { label: "__name__".into(), matchers: signals::discovery_matchers(selector, extras, group_by), start: range.start, end: range.end }
}

/// Plan discovery for the signals `needed`.
pub fn plan(rules: &RuleSet, needed: &BTreeSet<String>, selector: &Selector, p: &RunParams) -> DiscoveryPlan {
    let defs = || needed.iter().filter_map(|s| rules.signals.get(s));
    // Names outside vLLM's prefixes the signals read (the HTTP layer's, a router's), so discovery sees them;
    // with them those of the spare signals what else moved reads (the process's memory).
    let spare = rules.signals.values().filter(|d| d.spare && !needed.contains(&d.id));
    let extras: Vec<String> = defs()
        .chain(spare)
        .flat_map(|d| signals::required_series(&d.kind))
        .flatten()
        // A router's families (`vllm_router_*`) carry no model label either: under a selector on
        // the grouping labels they are looked for without it, like the HTTP layer's.
        .filter(|n| !n.starts_with("vllm") || n.starts_with("vllm_router_"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let labels: Vec<String> = FLEET_LABELS
        .iter()
        .map(|l| l.to_string())
        .chain(p.group_by.iter().cloned())
        .chain(std::iter::once(p.replica_label.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let query = signals::fleet_labels_query(selector, &labels, p.window.duration());
    let labels = (labels, Request::Instant { query, time: p.window.end });
    let buckets = defs()
        .map(|d| signals::bucket_series(&d.kind))
        .filter(|series| !series.is_empty())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|series| {
            let matcher = signals::bucket_bounds_matcher(selector, &series);
            (series, Request::LabelValues { label: "le".into(), matchers: vec![matcher], start: p.window.start, end: p.window.end })
        })
        .collect();
    DiscoveryPlan {
        window: names_request(selector, &extras, &p.group_by, &p.window),
        baseline: names_request(selector, &extras, &p.group_by, &p.baseline),
        buckets,
        labels,
    }
}

/// The bounds each histogram's buckets carry. A histogram whose bounds could not be listed is read
/// at a target by value (`le="0.5"`), and a warning says so.
pub fn read_buckets(plan: &DiscoveryPlan, answers: &mut Answers, warnings: &mut Warnings) -> BTreeMap<String, Vec<signals::Bound>> {
    let mut buckets = BTreeMap::new();
    for (series, req) in &plan.buckets {
        match answers.remove(req) {
            Some(Ok(Response { data: Data::Labels(les), warnings: w, .. })) => {
                warnings.extend(w);
                let bounds = signals::listed_bounds(&les);
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
    buckets
}

/// The metric names of the window and the baseline. The window's must answer and hold vLLM data,
/// or there is nothing to diagnose; the baseline's may be missing (comparisons are then not
/// evaluated, and a warning says so).
pub fn read_names(
    plan: &DiscoveryPlan,
    answers: &mut Answers,
    warnings: &mut Warnings,
    url: &str,
    selector: &Selector,
    p: &RunParams,
) -> Result<(BTreeSet<String>, BTreeSet<String>), ExplainError> {
    let mut names = |req: &Request, warnings: &mut Warnings| -> Result<BTreeSet<String>, SourceError> {
        let resp = answers.remove(req).unwrap_or_else(|| Err(SourceError::Other { detail: "no answer".into() }))?;
        warnings.extend(resp.warnings.iter().cloned());
        Ok(match resp.data {
            Data::Labels(v) => v.into_iter().collect(),
            _ => BTreeSet::new(),
        })
    };
    let window = names(&plan.window, warnings).map_err(ExplainError::Unreachable)?;
    let baseline = names(&plan.baseline, warnings).unwrap_or_else(|e| {
        warnings.push(format!("could not list the baseline's metrics ({e}); baseline comparisons are not evaluated"));
        BTreeSet::new()
    });
    if !window.iter().any(|n| n.starts_with("vllm")) {
        let sel = if selector.is_empty() { String::new() } else { format!(" matching {{{}}}", selector.to_promql()) };
        return Err(ExplainError::NoData(format!(
            "no vLLM metrics (vllm:* or vllm_*){sel} at {url} between {} and {}. Check --at and --window, the --selector, and that Prometheus scrapes the vLLM servers' /metrics",
            utc(&p.window.start),
            utc(&p.window.end)
        )));
    }
    if !baseline.iter().any(|n| n.starts_with("vllm")) {
        warnings.push(format!(
            "the baseline window ({} to {}) holds no vLLM data: comparisons with the baseline are not evaluated, absolute thresholds still are",
            utc(&p.baseline.start),
            utc(&p.baseline.end)
        ));
    }
    Ok((window, baseline))
}

/// The first of `preferred` the data has, else any vLLM name it has; `None` without vLLM names.
fn first_present(preferred: &[&str], names: &BTreeSet<String>) -> Option<String> {
    preferred.iter().map(|n| n.to_string()).find(|n| names.contains(n)).or_else(|| names.iter().find(|n| n.starts_with("vllm")).cloned())
}

/// Where the window's data may start late (no baseline data hints the fleet is new): one coarse
/// range query, about sixty points, of the series count of one vLLM gauge. `None` without vLLM names.
pub fn data_start_request(selector: &Selector, names: &BTreeSet<String>, range: &TimeRange) -> Option<Request> {
    let metric = first_present(&signals::RUNNING_GAUGE, names)?;
    Some(Request::Range {
        query: signals::series_count_query(selector, &metric),
        start: range.start,
        end: range.end,
        step_seconds: (range.duration().as_secs() / 60).max(15),
    })
}

/// When the first vLLM sample in `range` is, if it comes more than one step after the range's
/// start. `None` when the data covers the range, or the answer does not tell.
pub fn data_start(req: &Request, answers: &Answers, range: &TimeRange) -> Option<DateTime<Utc>> {
    let (Request::Range { step_seconds, .. }, Some(Ok(Response { data: Data::Matrix(series), .. }))) = (req, answers.get(req)) else {
        return None;
    };
    let first = series.iter().filter_map(|s| s.points.first().map(|p| p.0)).fold(f64::INFINITY, f64::min);
    if !first.is_finite() || first <= (range.start.timestamp() + *step_seconds as i64) as f64 {
        return None;
    }
    DateTime::from_timestamp(first as i64, 0)
}

/// The warning for a window longer than its data.
pub fn data_start_warning(first: &DateTime<Utc>, window: &TimeRange) -> String {
    format!(
        "vLLM data only starts at about {} (the window starts at {}): the window is longer than the data, so averages cover only the part with data and rates are underestimated; shorten --window or move --at",
        utc(first),
        utc(&window.start)
    )
}

/// A time as the report's header writes one.
fn utc(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// How long the newest vLLM sample may be older than the window's end before the window is said to
/// outlast its data: two minutes (a scrape interval and a remote-write backend's ingestion delay fit
/// in them), or a quarter of a shorter window, at least 30 s.
pub fn data_end_slack(window: &TimeRange) -> std::time::Duration {
    (window.duration() / 4).clamp(std::time::Duration::from_secs(30), std::time::Duration::from_secs(120))
}

/// The newest sample of one vLLM gauge at the window's end (within the server's lookback, five
/// minutes by default; a replica silent for longer is a finding of `target-down`). The waiting
/// gauge, which every vLLM version exports and fewer signals read than the running one. `None`
/// without vLLM names.
pub fn data_end_request(selector: &Selector, names: &BTreeSet<String>, window: &TimeRange) -> Option<Request> {
    let [running, running_old] = signals::RUNNING_GAUGE;
    let metric = first_present(&["vllm:num_requests_waiting", "vllm_num_requests_waiting", running, running_old], names)?;
    Some(Request::Instant { query: signals::queries::newest_sample(selector, &metric), time: window.end })
}

/// When the newest vLLM sample is, if it is more than [`data_end_slack`] before the window's end.
/// `None` when the data reaches the end, or the answer does not tell.
pub fn data_end(req: &Request, answers: &Answers, window: &TimeRange) -> Option<DateTime<Utc>> {
    let Some(Ok(Response { data: Data::Vector(samples), .. })) = answers.get(req) else {
        return None;
    };
    let newest = samples.iter().map(|s| s.v).filter(|v| v.is_finite()).fold(f64::NEG_INFINITY, f64::max);
    if !newest.is_finite() || newest >= (window.end.timestamp() - data_end_slack(window).as_secs() as i64) as f64 {
        return None;
    }
    DateTime::from_timestamp(newest as i64, 0)
}

/// The warning for a window that ends after its data.
pub fn data_end_warning(newest: &DateTime<Utc>, window: &TimeRange) -> String {
    let gap = (window.end - *newest).to_std().unwrap_or_default();
    format!(
        "the newest vLLM sample is from {}, {} before the window ends ({}): the fleet stopped reporting or the backend has not stored the last minutes yet, so the window's end holds no data, averages cover only the part before it and rates are underestimated; move --at to {} or earlier, or check that the servers are still scraped",
        utc(newest),
        humantime::format_duration(std::time::Duration::from_secs(gap.as_secs())),
        utc(&window.end),
        newest.format("%H:%M:%S")
    )
}
