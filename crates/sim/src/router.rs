//! vLLM's router in front of a model (`router = "vllm-router"` on a `[[model]]`): its own target,
//! `job="vllm-router"`, `instance="<model-slug>-router:8080"`, exporting the families vllm-router
//! 0.1.17 exports, with their labels, HELP texts and bucket bounds as its /metrics page wrote them
//! in front of stub workers (docs/hops.md): requests by route, per worker (`worker` is the worker's
//! URL, `http://<instance>`) processed requests, policy decisions, circuit-breaker state and
//! outcomes and health, the active workers, the generate-duration histogram (no labels), and the
//! retries by route, created at the first retry as the router does.
//!
//! Each interval the router sees what each replica received (its arrivals, from the replica's own
//! simulation) and draws, from a stream of its own (so no other series changes), its own time per
//! request (the state's `router_wait_s`, lognormal), on top of which an engine's input processing
//! comes before the engine answers: the histogram holds both, as the real router's does for a
//! stream. Retries (`router_retry_share`) are attempts that failed on the way and never reached an
//! engine: failures of the circuit breaker, decisions and processed requests of their worker. A
//! circuit held open (`router_open`, the replica `incident.replica` names) reads 1, after the
//! failures that opened it; that worker's engine gets nothing meanwhile (`state_at`).

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::sim::{binomial, circuit_open, host_stems, lognormal, state_at, Fam, Hist, Line, Metric};
use super::{ReplicaInfo, ScenarioSpec};
use vllm_diag::source::Labels;

/// The route the generated clients call.
const ROUTE: &str = "/v1/chat/completions";
/// vllm-router 0.1.17's bounds for `vllm_router_generate_duration_seconds`, as its page wrote them.
const DURATION_BUCKETS: &[f64] = &[0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 240.0];
/// Spread of the router's own time per request (lognormal sigma).
const WAIT_SIGMA: f64 = 0.5;
/// Failed attempts that open a circuit, counted at the interval it opens.
const OPENING_FAILURES: f64 = 5.0;
/// Draws per worker and interval of the router's time (weighted, as the engine's per-token draws).
const DRAWS: u64 = 8;

/// The cache-aware policy's prefix-routing outcomes (`vllm_router_prefix_routing_decisions_total`,
/// labelled `policy`, `stage` and `outcome` as vllm-router 0.1.17 labels them).
const PREFIX_OUTCOMES: [&str; 4] = ["prefix_hit", "prefix_miss", "load_imbalance", "missing_tokens"];
/// The share of the decisions made with the prompt's tokens each outcome takes; -1 for
/// `missing_tokens`, the state's `router_blind_share` of all of them.
const PREFIX_SHARES: [f64; 4] = [0.55, 0.4, 0.05, -1.0];

/// Per worker, cumulative counts.
#[derive(Default, Clone, Copy)]
struct Worker {
    decisions: f64,
    success: f64,
    failure: f64,
    open: bool,
}

/// The router's series for model `mi`, one sample per time; `trails[i][k]` is replica i's arrivals
/// and seconds of input processing in the interval ending at sample k.
pub(crate) fn series(spec: &ScenarioSpec, mi: usize, names: &[ReplicaInfo], trails: &[Vec<(f64, f64)>], times_ms: &[i64]) -> Vec<(Fam, Metric)> {
    let model = &spec.models[mi];
    let stem = &host_stems(&spec.models)[mi];
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed ^ 0x726f_7574_6572_5f31);
    rng.set_stream(mi as u64);
    let mut target = Labels::new();
    target.insert("job".into(), "vllm-router".into());
    target.insert("instance".into(), format!("{stem}-router:8080"));
    target.insert("namespace".into(), "inference".into());
    let singled = spec.incident.as_ref().filter(|i| i.model == model.name).map_or(0, |i| i.replica);
    let n = names.len();
    let mut workers = vec![Worker::default(); n];
    let (mut requests, mut retries) = (0.0, 0.0);
    let mut hist = Hist::new(DURATION_BUCKETS);
    // Per sample: requests, retries (None before the first), per worker (decisions, success, failure or None, state).
    let mut rows: Vec<(f64, Option<f64>, Vec<Worker>, Hist)> = Vec::with_capacity(times_ms.len());
    // A cache-aware policy's prefix decisions by outcome (PREFIX_OUTCOMES), per sample: fractions
    // of the requests, rounded where written, so nothing is drawn.
    let mut prefix = [0.0; 4];
    let mut prefix_rows: Vec<[f64; 4]> = Vec::with_capacity(times_ms.len());
    for k in 0..times_ms.len() {
        if k > 0 {
            let m = state_at(spec, model, singled as u32, times_ms[k - 1], times_ms[k]);
            let st = m.st;
            let arrived: Vec<(f64, f64)> = trails.iter().map(|t| t.get(k).copied().unwrap_or((0.0, 0.0))).collect();
            let total: f64 = arrived.iter().map(|a| a.0).sum();
            requests += total;
            let blind = total * st.router_blind_share;
            for (p, share) in prefix.iter_mut().zip(PREFIX_SHARES) {
                *p += if share < 0.0 { blind } else { (total - blind) * share };
            }
            let failed = binomial(&mut rng, total as u64, st.router_retry_share) as f64;
            retries += failed;
            for (i, w) in workers.iter_mut().enumerate() {
                let (a, input) = arrived[i];
                let share = if total > 0.0 { a / total } else { 0.0 };
                let f = (failed * share).round();
                let open = i as u32 == singled && circuit_open(&st, m.frac_prev, m.frac);
                let opening = if open && !w.open { OPENING_FAILURES } else { 0.0 };
                *w = Worker { decisions: w.decisions + a + f + opening, success: w.success + a, failure: w.failure + f + opening, open };
                let draws = (a as u64).min(DRAWS);
                for j in 0..draws {
                    let weight = a as u64 / draws + u64::from(j < a as u64 % draws);
                    hist.observe(lognormal(&mut rng, st.router_wait_s, WAIT_SIGMA) + input / a, weight);
                }
            }
        }
        rows.push((requests, (retries > 0.0).then_some(retries), workers.clone(), hist.clone()));
        prefix_rows.push(prefix.map(f64::round));
    }
    if model.router == Some(super::RouterKind::VllmRouterPd) {
        return emit_pd(&target, names, &model.router_policy, &rows);
    }
    let mut out = emit(&target, names, &model.router_policy, &rows);
    if model.router_policy == "cache_aware" {
        for (i, outcome) in PREFIX_OUTCOMES.iter().enumerate() {
            let mut labels = target.clone();
            for (k, v) in [("policy", "cache_aware"), ("stage", "regular"), ("outcome", outcome)] {
                labels.insert(k.to_string(), v.to_string());
            }
            let values = prefix_rows.iter().map(|r| Some(r[i])).collect();
            out.push((Fam::RouterPrefixDecisions, Metric { labels, lines: vec![Line { suffix: "_total", le: None, values }] }));
        }
    }
    out
}

/// The rows as vllm-router 0.1.17 writes them in prefill/decode mode (its page in
/// fixtures/router-metrics/): the requests by route, each prefill worker's and each decode
/// worker's requests (the first half of the replicas prefill, the rest decode), the decisions,
/// processed requests and health per worker; no plain-mode requests, durations or circuits.
fn emit_pd(target: &Labels, names: &[ReplicaInfo], policy: &str, rows: &[(f64, Option<f64>, Vec<Worker>, Hist)]) -> Vec<(Fam, Metric)> {
    let with = |extra: &[(&str, &str)]| {
        let mut l = target.clone();
        for (k, v) in extra {
            l.insert((*k).to_string(), (*v).to_string());
        }
        l
    };
    let counter = |fam: Fam, labels: Labels, values: Vec<Option<f64>>| (fam, Metric { labels, lines: vec![Line { suffix: "_total", le: None, values }] });
    let mut out = vec![
        (Fam::Up, Metric { labels: target.clone(), lines: vec![Line { suffix: "", le: None, values: rows.iter().map(|_| Some(1.0)).collect() }] }),
        counter(Fam::RouterPdRequests, with(&[("route", ROUTE)]), rows.iter().map(|r| Some(r.0)).collect()),
    ];
    let n = names.len() as u32;
    for (i, r) in names.iter().enumerate() {
        let url = format!("http://{}", r.instance);
        let decisions: Vec<Option<f64>> = rows.iter().map(|row| row.2.get(i).map(|w| w.decisions)).collect();
        let role = if super::RouterKind::VllmRouterPd.prefills(i as u32, n) { Fam::RouterPdPrefillRequests } else { Fam::RouterPdDecodeRequests };
        out.push(counter(role, with(&[("worker", &url)]), decisions.clone()));
        out.push(counter(Fam::RouterProcessed, with(&[("worker", &url)]), decisions.clone()));
        out.push(counter(Fam::RouterDecisions, with(&[("policy", policy), ("worker", &url)]), decisions));
        let health = rows.iter().map(|_| Some(1.0)).collect();
        out.push((Fam::RouterWorkerHealth, Metric { labels: with(&[("worker", &url)]), lines: vec![Line { suffix: "", le: None, values: health }] }));
    }
    out
}

/// The rows as series, labelled as vllm-router labels them.
fn emit(target: &Labels, names: &[ReplicaInfo], policy: &str, rows: &[(f64, Option<f64>, Vec<Worker>, Hist)]) -> Vec<(Fam, Metric)> {
    let with = |extra: &[(&str, &str)]| {
        let mut l = target.clone();
        for (k, v) in extra {
            l.insert((*k).to_string(), (*v).to_string());
        }
        l
    };
    let line = |fam: Fam, labels: Labels, values: Vec<Option<f64>>| {
        let suffix = if fam.kind() == super::sim::Kind::Counter { "_total" } else { "" };
        (fam, Metric { labels, lines: vec![Line { suffix, le: None, values }] })
    };
    let mut out = vec![
        line(Fam::Up, target.clone(), rows.iter().map(|_| Some(1.0)).collect()),
        line(Fam::RouterRequests, with(&[("route", ROUTE)]), rows.iter().map(|r| Some(r.0)).collect()),
        line(Fam::RouterActiveWorkers, target.clone(), rows.iter().map(|_| Some(names.len() as f64)).collect()),
    ];
    if rows.iter().any(|r| r.1.is_some()) {
        out.push(line(Fam::RouterRetries, with(&[("route", ROUTE)]), rows.iter().map(|r| r.1).collect()));
    }
    for (i, r) in names.iter().enumerate() {
        let url = format!("http://{}", r.instance);
        let w = |f: &dyn Fn(&Worker) -> Option<f64>| rows.iter().map(|row| row.2.get(i).and_then(f)).collect::<Vec<_>>();
        out.push(line(Fam::RouterProcessed, with(&[("worker", &url)]), w(&|w| Some(w.decisions))));
        out.push(line(Fam::RouterDecisions, with(&[("policy", policy), ("worker", &url)]), w(&|w| Some(w.decisions))));
        out.push(line(Fam::RouterCbState, with(&[("worker", &url)]), w(&|w| Some(if w.open { 1.0 } else { 0.0 }))));
        out.push(line(Fam::RouterWorkerHealth, with(&[("worker", &url)]), w(&|_| Some(1.0))));
        out.push(line(Fam::RouterCbOutcomes, with(&[("worker", &url), ("outcome", "success")]), w(&|w| Some(w.success))));
        let failures = w(&|w| (w.failure > 0.0).then_some(w.failure));
        if failures.iter().any(Option::is_some) {
            out.push(line(Fam::RouterCbOutcomes, with(&[("worker", &url), ("outcome", "failure")]), failures));
        }
    }
    // The histogram, bucket by bucket as the router writes its bounds (`le="1"`, not "1.0").
    let mut lines = Vec::new();
    for b in 0..=DURATION_BUCKETS.len() {
        let le = DURATION_BUCKETS.get(b).map_or_else(|| "+Inf".to_string(), |v| format!("{v}"));
        let values = rows.iter().map(|r| Some(r.3.counts[..=b].iter().sum::<u64>() as f64)).collect();
        lines.push(Line { suffix: "_bucket", le: Some(le), values });
    }
    lines.push(Line { suffix: "_count", le: None, values: rows.iter().map(|r| Some(r.3.counts.iter().sum::<u64>() as f64)).collect() });
    lines.push(Line { suffix: "_sum", le: None, values: rows.iter().map(|r| Some(r.3.sum)).collect() });
    out.push((Fam::RouterGenerateDuration, Metric { labels: target.clone(), lines }));
    out
}
