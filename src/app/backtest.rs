//! `rules export --backtest`: send each exported alert as range queries (a day at a time), then let
//! [`crate::rules::backtest`] say when it would have fired.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;

use super::explain::one_shot_runtime;
use super::write_stdout;
use crate::error::{exit, Failure};
use crate::prom::Selector;
use crate::rules::backtest::{self, AlertResult, Backtest};
use crate::rules::export::Alert;
use crate::settings::{parse_at, Settings};
use crate::source::{Data, Request, Series, Source, SourceError};

/// Range queries in flight at once: a week of a rule's expression is heavy for the server.
const CONCURRENCY: usize = 4;

/// What the backtest was asked for.
pub(super) struct Ask {
    pub range: Duration,
    pub step: Duration,
    pub hold: Duration,
    pub json: bool,
    /// The alerts' grouping and inhibit rules, for the pages per incident.
    pub group_by: Vec<String>,
    pub inhibitions: Vec<crate::rules::export::Inhibit>,
}

/// Backtest `alerts` on the settings' Prometheus and print the report. Exit 0 when the range held
/// vLLM data and every alert was evaluated, 3 otherwise (the report says what is missing).
pub(super) fn run(s: &Settings, alerts: &[Alert], selector: &Selector, ask: &Ask) -> Result<u8, Failure> {
    let now = chrono::Utc::now();
    let end = match s.scope.at.as_deref() {
        Some(at) => parse_at(at, now)?,
        None => now,
    };
    let plan = backtest::plan(end, ask.range, ask.step, ask.hold);
    let client: Arc<dyn Source> = Arc::new(super::connect::connect(s)?);
    let source = client.info().url;
    // Each query is asked a day at a time: a subquery over a week at its own resolution is more
    // points than VictoriaMetrics answers (30,000 a series), and a day is a query a server answers
    // within its timeout. The pieces meet on the step grid, so stretches run on across them.
    let chunks = backtest::chunks(&plan);
    let pieces = |query: &str| {
        chunks
            .iter()
            .map(|(start, end)| Request::Range { query: query.to_string(), start: *start, end: *end, step_seconds: plan.step.as_secs() })
            .collect::<Vec<_>>()
    };
    let mut requests = pieces(&backtest::coverage_query(selector));
    for a in alerts {
        requests.extend(pieces(&a.expr));
    }
    let deadline = *s.limits.timeout;
    let runtime = one_shot_runtime()?;
    let answers = runtime.block_on(ask_all(client.clone(), requests, deadline));
    let mut answers = answers.chunks(chunks.len().max(1)).map(joined);
    let coverage = match answers.next() {
        Some(Ok(series)) => Ok(backtest::coverage(&series)),
        // Nothing else would be answered either: say so as explain does, exit 3.
        Some(Err(e)) if e.is_unreachable() => return Err(Failure::Source(e.to_string())),
        Some(Err(e)) => Err(e.short_reason()),
        None => Err("no answer".to_string()),
    };
    let results = alerts
        .iter()
        .zip(answers)
        .map(|(a, answer)| AlertResult {
            rule: a.rule.clone(),
            alert: a.name.clone(),
            severity: a.severity,
            expr: a.expr.clone(),
            outcome: answer.map(|series| backtest::episodes(&series, &plan)).map_err(|e| backtest::shorten(&e.to_string())),
        })
        .collect();
    let report = Backtest { plan, range: ask.range, source, coverage, alerts: results, group_by: ask.group_by.clone(), inhibitions: ask.inhibitions.clone() };
    if ask.json {
        let text = serde_json::to_string_pretty(&backtest::to_json(&report)).map_err(|e| Failure::Output(e.to_string()))?;
        write_stdout(&format!("{text}\n"))?;
    } else {
        write_stdout(&backtest::to_text(&report))?;
    }
    Ok(if report.complete() { exit::OK } else { exit::NO_DATA })
}

/// The pieces of one query's answer as one: each label set's points from every piece, or the
/// first piece's error.
fn joined(pieces: &[Result<Vec<Series>, SourceError>]) -> Result<Vec<Series>, SourceError> {
    let mut by_labels: std::collections::BTreeMap<crate::prom::Labels, Vec<(f64, f64)>> = std::collections::BTreeMap::new();
    for piece in pieces {
        for series in piece.as_ref().map_err(Clone::clone)? {
            by_labels.entry(series.labels.clone()).or_default().extend(series.points.iter().copied());
        }
    }
    Ok(by_labels.into_iter().map(|(labels, points)| Series { labels, points }).collect())
}

/// Every request's series, in order; none outlives `deadline` from now.
async fn ask_all(client: Arc<dyn Source>, requests: Vec<Request>, deadline: Duration) -> Vec<Result<Vec<Series>, SourceError>> {
    let started = Instant::now();
    futures::stream::iter(requests)
        .map(|req| {
            let client = client.clone();
            async move {
                let left = deadline.saturating_sub(started.elapsed());
                let url = client.url();
                let exchange = match tokio::time::timeout(left, client.send(&req)).await {
                    Ok(answer) => answer?,
                    Err(_) => return Err(SourceError::Timeout { url, after: deadline }),
                };
                let response = crate::source::decode(&url, &req, &exchange)?;
                match response.data {
                    Data::Matrix(series) => Ok(series),
                    other => Err(SourceError::Decode { url, detail: format!("a range query answered with {} instead of a matrix", kind(&other)) }),
                }
            }
        })
        .buffered(CONCURRENCY)
        .collect()
        .await
}

fn kind(d: &Data) -> &'static str {
    match d {
        Data::Vector(_) => "a vector",
        Data::Matrix(_) => "a matrix",
        Data::Scalar(_) => "a scalar",
        Data::String(_) => "a string",
        Data::Labels(_) => "label values",
    }
}
