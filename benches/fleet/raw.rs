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

/// `--raw-reads`, the step between the two designs: the histograms the run reads whole at more than
/// one grid read once each, raw, and the rest of the run as it is. Measured, not built: the run's
/// queries that read nothing but whole bucket families (no matcher but the name) and the raw reads
/// that would replace them, timed one at a time and interleaved over the passes, each at its least.
#[derive(Serialize)]
pub struct Once {
    /// The families read once instead, and the queries that read them now.
    pub families: Vec<String>,
    pub replaced: Vec<String>,
    /// The backend's work: the replaced queries, and the raw reads in their place (least of each).
    pub replaced_ms: f64,
    pub raw_ms: f64,
    /// Bytes received: the replaced queries' answers, and the raw reads'.
    pub replaced_bytes: u64,
    pub raw_bytes: u64,
    /// Each raw read: family, how far back it reaches (seconds), least work (ms), bytes.
    pub each: Vec<(String, i64, f64, u64)>,
    /// The run's backend work against the data-read floor (least of each) with the replaced
    /// queries' work taken out and the raw reads' put in (set by the caller, which has the run's).
    pub work_ratio_least: f64,
}

/// Measure [`Once`] over the run `rec` recorded (see there), against the backend at `base`.
pub fn histograms_once(rt: &tokio::runtime::Runtime, base: &str, rec: &Recorded, end: DateTime<Utc>, timing: Timing, passes: usize) -> Result<Once, String> {
    let whole: Vec<&Request> = rec.requests.iter().filter(|r| r.query().is_some_and(reads_whole_buckets)).collect();
    let mut times: BTreeMap<String, usize> = BTreeMap::new();
    for req in &whole {
        for f in vllm_diag::signals::families_read(req.query().unwrap_or_default())? {
            *times.entry(f).or_default() += 1;
        }
    }
    times.retain(|_, n| *n > 1);
    let replaced: Vec<&Request> = whole
        .into_iter()
        .filter(|r| vllm_diag::signals::families_read(r.query().unwrap_or_default()).is_ok_and(|fs| fs.iter().all(|f| times.contains_key(f))))
        .collect();
    let reaches = reaches(&replaced, end)?;
    let reads: Vec<Request> = reaches.iter().map(|(f, secs)| Request::Instant { query: format!("{{__name__=\"{f}\"}}[{secs}s]"), time: end }).collect();
    let now: Vec<Request> = replaced.iter().map(|r| (*r).clone()).collect();
    let least = |acc: &mut Vec<f64>, costs: Vec<crate::floor::Cost>| {
        acc.resize(costs.len(), f64::INFINITY);
        for (a, c) in acc.iter_mut().zip(costs) {
            *a = a.min(c.server * 1000.0);
        }
    };
    let (mut now_least, mut raw_least) = (Vec::new(), Vec::new());
    for _ in 0..passes {
        least(&mut now_least, rt.block_on(floor::exec_each(base, &now, timing))?);
        least(&mut raw_least, rt.block_on(floor::exec_each(base, &reads, timing))?);
    }
    let size = |reqs: &[Request]| -> Result<Vec<u64>, String> { Ok(rt.block_on(floor::bodies(base, reqs, 1))?.1.iter().map(|b| b.len() as u64).collect()) };
    let (now_bytes, raw_bytes) = (size(&now)?, size(&reads)?);
    Ok(Once {
        families: reaches.keys().cloned().collect(),
        replaced: now.iter().map(Request::describe).collect(),
        replaced_ms: now_least.iter().sum(),
        raw_ms: raw_least.iter().sum(),
        replaced_bytes: now_bytes.iter().sum(),
        raw_bytes: raw_bytes.iter().sum(),
        each: reaches.iter().zip(raw_least.iter().zip(&raw_bytes)).map(|((f, secs), (ms, b))| (f.clone(), *secs, *ms, *b)).collect(),
        work_ratio_least: f64::NAN,
    })
}

/// Whether every series selector of `query` reads a whole bucket family: `F_bucket`, no matcher
/// but its name.
fn reads_whole_buckets(query: &str) -> bool {
    let Ok(all) = vllm_diag::signals::selectors_of(query) else { return false };
    let whole = |vs: &promql_parser::parser::VectorSelector| {
        vs.matchers.matchers.iter().all(|m| m.name == "__name__")
            && vs.matchers.or_matchers.is_empty()
            && vs.name.as_deref().is_some_and(|n| n.ends_with("_bucket"))
    };
    !all.is_empty() && all.iter().all(whole)
}
