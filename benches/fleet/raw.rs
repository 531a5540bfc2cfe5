//! `--raw-reads`: the other design for what a run reads, measured on both sides. Each family the
//! run's queries read is asked once, raw (`{__name__="F"}[S]` at the window's end, `S` reaching as
//! far back as the run's longest range, offset and look-back do), loaded into the local
//! evaluator's store, and every query of the run is then evaluated in-process over it. So the
//! backend does about the data-read floor's work, and the client does the rest: what that costs
//! the client is what this measures.
//!
//! Per pass: the raw reads fetched as explain fetches (at its concurrency: the wall time), the
//! same reads one at a time for the backend's own work, the answers decoded by vllm-diag's own
//! decoder and loaded into a [`Store`], then the run's queries evaluated by the local engine (one
//! thread, as explain's single run evaluates). Queries the local engine refuses are counted and
//! named, not timed as answers.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::Serialize;
use vllm_diag::local::{instant_query, range_query, Store};
use vllm_diag::source::{decode, Data, Exchange, Request};

use crate::floor::{self, Recorded, Timing};
use crate::stats::median;

/// The look-back Prometheus gives an instant vector selector (`--query.lookback-delta`).
const LOOKBACK_SECS: i64 = 300;
/// How many of the slowest local evaluations the results name.
const SLOWEST: usize = 8;

/// The raw-read design at one fleet, medians over the passes.
#[derive(Serialize)]
pub struct Raw {
    pub passes: usize,
    pub families: usize,
    pub series: usize,
    pub samples: usize,
    pub bytes: u64,
    /// How far back of the window's end the farthest-reaching raw read goes.
    pub reach_seconds: i64,
    /// The backend's work for the raw reads, one at a time (as the benchmark's `Timing` says).
    pub backend_work_ms: f64,
    /// The client's wall time to have every raw answer, at explain's concurrency.
    pub fetch_wall_ms: f64,
    /// Decoding the answers and loading them into the store.
    pub load_ms: f64,
    /// Evaluating the run's queries over the store.
    pub eval_ms: f64,
    /// Queries evaluated, and those the local engine refused (the first few, with its reason).
    pub evaluated: usize,
    pub refused: Vec<String>,
    /// The slowest local evaluations (median ms, the query's description).
    pub slowest: Vec<(f64, String)>,
}

/// Measure the raw-read design over the run `rec` recorded, against the backend at `base`.
/// The client fetches through `near` (the latency relay, when there is one); the backend's work is
/// asked of `direct`.
#[allow(clippy::too_many_arguments)]
pub fn measure(
    rt: &tokio::runtime::Runtime,
    near: &str,
    direct: &str,
    rec: &Recorded,
    end: DateTime<Utc>,
    timing: Timing,
    concurrency: usize,
    passes: usize,
) -> Result<Raw, String> {
    let queries: Vec<&Request> = rec.requests.iter().filter(|r| r.query().is_some()).collect();
    let reaches = reaches(&queries, end)?;
    let reads: Vec<Request> = reaches.iter().map(|(f, secs)| Request::Instant { query: format!("{{__name__=\"{f}\"}}[{secs}s]"), time: end }).collect();
    let (mut work, mut fetch, mut load, mut eval) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut each_eval: Vec<Vec<f64>> = vec![Vec::new(); queries.len()];
    let (mut series, mut samples, mut bytes, mut refused) = (0, 0, 0, Vec::new());
    for _ in 0..passes {
        let (wall, bodies) = rt.block_on(floor::bodies(near, &reads, concurrency))?;
        fetch.push(wall.as_secs_f64() * 1000.0);
        work.push(rt.block_on(floor::exec_each(direct, &reads, timing))?.iter().map(|c| c.server).sum::<f64>() * 1000.0);
        bytes = bodies.iter().map(|b| b.len() as u64).sum();
        let started = Instant::now();
        let store = load_store(near, &reads, bodies)?;
        load.push(started.elapsed().as_secs_f64() * 1000.0);
        series = store.len();
        samples = store.series().map(|(_, p)| p.len()).sum();
        let started = Instant::now();
        refused.clear();
        for (i, req) in queries.iter().enumerate() {
            let one = Instant::now();
            if let Err(e) = evaluate(&store, req) {
                refused.push(format!("{}: {e}", req.describe()));
            }
            each_eval[i].push(one.elapsed().as_secs_f64() * 1000.0);
        }
        eval.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let mut slowest: Vec<(f64, String)> = queries.iter().zip(&each_eval).map(|(r, t)| (median(t), r.describe())).collect();
    slowest.sort_by(|a, b| b.0.total_cmp(&a.0));
    slowest.truncate(SLOWEST);
    let refused_count = refused.len();
    refused.truncate(SLOWEST);
    Ok(Raw {
        passes,
        families: reaches.len(),
        series,
        samples,
        bytes,
        reach_seconds: reaches.values().copied().max().unwrap_or(0),
        backend_work_ms: median(&work),
        fetch_wall_ms: median(&fetch),
        load_ms: median(&load),
        eval_ms: median(&eval),
        evaluated: queries.len() - refused_count,
        refused,
        slowest,
    })
}

/// The raw answers decoded as explain decodes an answer, into one store.
fn load_store(base: &str, reads: &[Request], bodies: Vec<String>) -> Result<Store, String> {
    let mut store = Store::new();
    for (req, body) in reads.iter().zip(bodies) {
        let ex = Exchange { http_status: 200, content_type: "application/json".into(), body };
        let resp = decode(base, req, &ex).map_err(|e| e.to_string())?;
        let Data::Matrix(all) = resp.data else { return Err(format!("{}: not a matrix", req.describe())) };
        for s in all {
            store.add(s.labels, s.points.into_iter().map(|(t, v)| ((t * 1000.0).round() as i64, v)));
        }
    }
    Ok(store)
}

fn evaluate(store: &Store, req: &Request) -> Result<(), String> {
    let result = match req {
        Request::Instant { query, time } => instant_query(store, query, time.timestamp_millis()).map(drop),
        Request::Range { query, start, end, step_seconds } => {
            range_query(store, query, start.timestamp_millis(), end.timestamp_millis(), *step_seconds as i64 * 1000).map(drop)
        }
        Request::LabelValues { .. } => Ok(()),
    };
    result.map_err(|e| e.to_string())
}

/// Each family the queries read, and how far back of `end` they read it: each query's earliest
/// evaluation time, less its longest range selector (or the look-back, if longer) and its largest
/// offset.
fn reaches(queries: &[&Request], end: DateTime<Utc>) -> Result<BTreeMap<String, i64>, String> {
    let mut out = BTreeMap::new();
    for req in queries {
        let (query, earliest) = match req {
            Request::Instant { query, time } => (query, *time),
            Request::Range { query, start, .. } => (query, *start),
            Request::LabelValues { .. } => continue,
        };
        let (range, offset) = durations(query).map_err(|e| format!("{query}: {e}"))?;
        let reach = (end - earliest).num_seconds() + range.max(LOOKBACK_SECS) + offset;
        for family in vllm_diag::signals::families_read(query).map_err(|e| format!("{query}: {e}"))? {
            let at = out.entry(family).or_insert(0);
            *at = reach.max(*at);
        }
    }
    Ok(out)
}

/// The longest range (range selectors and subqueries) and the largest `offset` a query holds, in
/// seconds, read from its syntax tree by the PromQL parser vllm-diag uses.
fn durations(query: &str) -> Result<(i64, i64), String> {
    use promql_parser::parser::{Expr, Offset};
    struct Longest(i64, i64);
    impl promql_parser::util::ExprVisitor for Longest {
        type Error = String;
        fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
            let (range, offset) = match e {
                Expr::MatrixSelector(ms) => (Some(ms.range), ms.vs.offset.as_ref()),
                Expr::VectorSelector(vs) => (None, vs.offset.as_ref()),
                Expr::Subquery(sq) => (Some(sq.range), sq.offset.as_ref()),
                _ => return Ok(true),
            };
            self.0 = self.0.max(range.map_or(0, |r| r.as_secs() as i64));
            if let Some(Offset::Pos(d)) = offset {
                self.1 = self.1.max(d.as_secs() as i64);
            }
            Ok(true)
        }
    }
    let expr = promql_parser::parser::parse(query)?;
    let mut longest = Longest(0, 0);
    promql_parser::util::walk_expr(&mut longest, &expr)?;
    Ok((longest.0, longest.1))
}
