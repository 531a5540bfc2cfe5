//! The explain pipeline: discover which metrics exist, query every signal for the window and the
//! baseline concurrently, evaluate the rules, rank, follow up on the findings, and assemble the
//! [`Report`].
//!
//! Its stages are plain functions over data, one file each, in the order a run goes through them:
//! [`discover`] (metric names, bucket bounds, fleet labels) -> [`plan`] (queries from signals, as a
//! [`fetch::ReadPlan`]) -> [`fetch`] (the only network code: the read plan carried out) -> [`assemble`] (answers -> signal values) -> [`judge`] (rules,
//! rank, coverage) -> [`follow_up`] (trends, per-replica breakdowns, recommendations) -> [`finish`]
//! (each finding's parts: [`onset`], when it began, read from its trend; [`correlate`], the change
//! it began after; [`cold_start`]; [`replica_cause`]; [`gpu_reasons`]) -> [`moved`] (what else moved
//! that no finding explains, and the correlations between signals that moved together) -> the
//! findings built from their parts once. Beside them, [`hops`] splits each model's wait into the hops of its path from the means the signals read, and [`binding`] reads which limit held each model's requests back at every
//! step of the window (its reads go with the signals'). The change events ([`crate::events`]) are asked with the signals. A query that fails or times out does not stop the run: the signals that
//! needed it become "not evaluated" with the reason, and the rest of the diagnosis still comes out.
//!
//! [`explain_traced`] strings them together as named steps, each from one type to the next, with
//! the network rounds in view: `discover_round` (round 1) -> `Found` -> `plan_reads` -> `Reads` ->
//! `fetch_reads` (round 2) -> `Answers` -> `judge_round` (round 3, the late minutes, only when a
//! rule asks) -> `Judged` -> `plan_follow_ups` -> `FollowUpReads` -> round 4 -> `follow_up_round`
//! -> `Followed` -> `assemble_report`. A `Run` carries the source, the deadline, the count of
//! queries and the run's warnings through them.

pub mod assemble;
pub mod binding;
pub mod cold_start;
pub mod correlate;
pub mod discover;
pub mod fetch;
pub mod finish;
pub mod follow_up;
pub mod gpu_reasons;
pub mod hops;
pub mod judge;
pub mod moved;
pub mod onset;
pub mod plan;
pub mod replica_cause;
#[cfg(test)]
mod stage_tests;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::events;
use crate::prom::Selector;
use crate::report::{Event, MetricsInfo, Report, RunParams, RunStats, SourceInfo, TimeRange, Warnings, SCHEMA_VERSION};
use crate::rules::RuleSet;
use crate::signals::{self, QueryContext};
use crate::source::{Source, SourceError};

pub use fetch::{run_queries, Answers};

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
    #[error("{0}{hint}", hint = api_path_hint(.0))]
    Unreachable(SourceError),
    #[error("{0}")]
    NoData(String),
}

/// What to do when the very first request found no API at the URL (HTTP 404): the URL given was a
/// page of the server's (`/graph`, `/metrics`, `/vmui`) or lacks the prefix it is served under.
fn api_path_hint(e: &SourceError) -> String {
    let (SourceError::NotPrometheus { status: 404, url, .. } | SourceError::HttpStatus { status: 404, url, .. }) = e else {
        return String::new();
    };
    let trimmed = url.trim_end_matches('/');
    let page = ["/api/v1/query", "/api/v1", "/graph", "/metrics", "/targets", "/alerts", "/query", "/vmui"].into_iter().find(|p| trimmed.ends_with(p));
    match page {
        Some(p) => format!(". That is a page of the server, not its base URL: drop {p} from --prometheus (give {})", &trimmed[..trimmed.len() - p.len()]),
        None => ". No Prometheus API answers under this URL: give the server's base URL, the one whose /api/v1/query answers (with the path prefix it is served under, if any: /prometheus, or /select/0/prometheus for a VictoriaMetrics cluster)".to_string(),
    }
}

/// Label the metric generation from the names present.
pub fn generation(names: &BTreeSet<String>) -> String {
    let has = |n: &str| signals::spellings(n).iter().any(|s| names.contains(s));
    let v1 = [
        "vllm:kv_cache_usage_perc",
        "vllm:inter_token_latency_seconds_bucket",
        "vllm:prefix_cache_queries_total",
        "vllm:gpu_prefix_cache_queries_total",
        "vllm:spec_decode_num_drafts_total",
        "vllm:request_prefill_kv_computed_tokens_bucket",
        "vllm:engine_sleep_state",
    ]
    .iter()
    .any(|n| has(n));
    let v0 = [
        "vllm:num_requests_swapped",
        "vllm:cpu_cache_usage_perc",
        "vllm:gpu_prefix_cache_hit_rate",
        "vllm:avg_generation_throughput_toks_per_s",
        "vllm:time_in_queue_requests_bucket",
        "vllm:tokens_total",
    ]
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
    if otel {
        format!("{g} (vllm_ names)")
    } else {
        g.to_string()
    }
}

/// Run the pipeline against `source` with the enabled `rules`.
pub async fn explain(source: Arc<dyn Source>, rules: &RuleSet, opts: &ExplainOptions) -> Result<Report, ExplainError> {
    explain_traced(source, rules, opts).await.map(|(report, _)| report)
}

/// What a run read besides its report, for the tests that measure it: every watched signal's
/// trend points per scope, as what else moved read them ([`moved::Points`]).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub trends: std::collections::BTreeMap<(String, crate::report::Scope), moved::Points>,
    /// What else moved's own queries (each a handful of signals' PromQL), which its trends are
    /// computed as from the reads it shares.
    pub moved_queries: Vec<crate::source::Request>,
    /// Its trends' step and range, seconds.
    pub moved_step: (u64, u64),
}

/// [`explain`], with what the run read ([`Trace`]). The stages in order, each from one type to the
/// next; the network rounds are `discover_round`'s (one more where the baseline holds no vLLM
/// data: where the data starts) and each `run.read` (the late minutes' only when a rule asks).
pub async fn explain_traced(source: Arc<dyn Source>, rules: &RuleSet, opts: &ExplainOptions) -> Result<(Report, Trace), ExplainError> {
    let mut run = Run { source, rules, opts, started: std::time::Instant::now(), warnings: Warnings::default(), queries: 0 };
    let needed = plan::needed_signals(rules);
    // Round 1: the metric names of both windows and the histograms' bucket bounds.
    let found = discover_round(&mut run, &needed).await?;
    let mut reads = plan_reads(&mut run, &needed, &found);
    // Round 2: every signal, the change events, the data's end and the binding reads at once.
    let answers = fetch_reads(&mut run, &reads).await;
    // Round 3, only when a rule's last minutes are to be read: those minutes, then the verdicts.
    let judged = judge_round(&mut run, &reads, &found, &answers).await;
    let follow_ups = plan_follow_ups(&mut run, &mut reads, &judged, &answers, &found);
    // Round 4: the findings' follow-ups, the events' second round, the trends and the hops.
    let more = if follow_ups.reads.wants.is_empty() { Answers::new() } else { run.read(&follow_ups.reads).await };
    let followed = follow_up_round(&mut run, &reads, judged, &follow_ups, &answers, &more);
    Ok(assemble_report(run, &found, reads, followed, &follow_ups))
}

/// What a run carries through its stages: where it reads and by when, what it has asked, and the
/// warnings its stages have found (handed to the report once, at the end).
struct Run<'a> {
    source: Arc<dyn Source>,
    rules: &'a RuleSet,
    opts: &'a ExplainOptions,
    started: std::time::Instant,
    warnings: Warnings,
    queries: usize,
}

impl Run<'_> {
    /// One round: the read plan carried out within what is left of the deadline.
    async fn read(&mut self, reads: &fetch::ReadPlan) -> Answers {
        let (answers, sent) = fetch::read(&self.source, reads, self.opts.concurrency, self.opts.deadline, self.started).await;
        self.queries += sent;
        answers
    }
}

/// What discovery found, and the plan it came from (whose fleet-label read goes with round 2).
struct Found {
    plan: discover::DiscoveryPlan,
    disc: discover::Discovery,
}

/// Round 1: both windows' metric names at once, and with them the bucket bounds of histograms read
/// at a target (SLO burn), so a target between two buckets can be interpolated. The bounds only
/// refine SLO reads, so they get a quarter of the deadline: a stuck answer must not cost the whole
/// run. Where the baseline holds no vLLM data, one coarse range query tells where the data starts.
async fn discover_round(run: &mut Run<'_>, needed: &BTreeSet<String>) -> Result<Found, ExplainError> {
    let (opts, source) = (run.opts, &run.source);
    let p = &opts.params;
    let disc_plan = discover::plan(run.rules, needed, &opts.selector, p);
    run.queries += 2 + disc_plan.buckets.len();
    let (mut disc_answers, mut bounds_answers) = tokio::join!(
        run_queries(source, vec![disc_plan.window.clone(), disc_plan.baseline.clone()], 2, opts.deadline),
        run_queries(source, disc_plan.buckets.iter().map(|(_, r)| r.clone()).collect(), opts.concurrency.saturating_sub(2).max(1), opts.deadline / 4),
    );
    let buckets = discover::read_buckets(&disc_plan, &mut bounds_answers, &mut run.warnings);
    let (window_names, baseline_names) = discover::read_names(&disc_plan, &mut disc_answers, &mut run.warnings, &source.url(), &opts.selector, p)?;
    if !baseline_names.iter().any(|n| n.starts_with("vllm")) {
        // Then the window may be longer than the data as well: one coarse range query tells.
        if let Some(req) = discover::data_start_request(&opts.selector, &window_names, &p.window) {
            run.queries += 1;
            let answers = run_queries(source, vec![req.clone()], 1, fetch::remaining(opts.deadline, run.started)).await;
            if let Some(first) = discover::data_start(&req, &answers, &p.window) {
                run.warnings.push(discover::data_start_warning(&first, &p.window));
            }
        }
    }
    Ok(Found { plan: disc_plan, disc: discover::Discovery { window_names, baseline_names, buckets } })
}

/// Round 2's reads: the signals' queries for each window, the change events', whether the data
/// reaches the window's end, and which limit binds.
struct Reads {
    signals: plan::SignalPlan,
    events: events::EventPlan,
    data_end: Option<crate::source::Request>,
    binding: Option<binding::BindingPlan>,
    all: fetch::ReadPlan,
}

/// Plan round 2: every read of the main round trip, within what is left of the overall deadline.
fn plan_reads(run: &mut Run<'_>, needed: &BTreeSet<String>, found: &Found) -> Reads {
    let (opts, p, disc) = (run.opts, &run.opts.params, &found.disc);
    let ctx = QueryContext {
        selector: opts.selector.clone(),
        group_by: p.group_by.clone(),
        range: p.window.duration(),
        thresholds: std::sync::Arc::new(run.rules.thresholds.clone()),
        buckets: std::sync::Arc::new(disc.buckets.clone()),
        replica_label: p.replica_label.clone(),
    };
    let mut signals = plan::plan_signals(run.rules, needed, ctx, p, disc, &mut run.warnings);
    // The change events are asked in the same round trip.
    let all_names: BTreeSet<String> = disc.window_names.union(&disc.baseline_names).cloned().collect();
    let event_ctx =
        events::EventContext { selector: &opts.selector, group_by: &p.group_by, replica_label: &p.replica_label, names: &all_names, steps: events::STEPS };
    let mut events = events::plan(&event_ctx, &p.baseline, &p.window);
    // A scrape's data begins with its first round, the window's start: nothing was stored before.
    let kind = run.source.info().kind;
    if kind == crate::report::SourceKind::Scrape {
        events.data_start = Some(p.window.start);
    }
    // Whether the data reaches the window's end (a scrape's does, by construction: its last round
    // closes the window).
    let data_end = if kind == crate::report::SourceKind::Prometheus { discover::data_end_request(&opts.selector, &disc.window_names, &p.window) } else { None };
    // Which limit binds, from a fixed handful of range reads (shared with the stall share where it
    // reads the same series at the same step).
    let binding = binding::plan(&opts.selector, p, &disc.window_names);
    let mut all = std::mem::take(&mut signals.reads);
    all.extend(fetch::ReadPlan::whole(std::iter::once(found.plan.labels.1.clone()).chain(events.requests()).chain(data_end.clone())));
    binding::add_reads(binding.as_ref(), &signals, run.rules, &mut all);
    Reads { signals, events, data_end, binding, all }
}

/// Round 2 carried out, with the servers' warnings and whether the data ends before the window.
async fn fetch_reads(run: &mut Run<'_>, reads: &Reads) -> Answers {
    let answers = run.read(&reads.all).await;
    for resp in answers.values().flatten() {
        run.warnings.extend(resp.warnings.iter().cloned());
    }
    let p = &run.opts.params;
    if let Some(newest) = reads.data_end.as_ref().and_then(|req| discover::data_end(req, &answers, &p.window)) {
        run.warnings.push(discover::data_end_warning(&newest, &p.window));
    }
    answers
}

/// The values assembled and the rules judged over them.
struct Judged {
    labels: std::collections::BTreeMap<String, usize>,
    table: crate::rules::eval::SignalTable,
    names_used: std::collections::BTreeMap<String, String>,
    verdicts: judge::Judged,
}

/// Assemble the values and judge. Where a rule judged over the window's last minutes too did not
/// hold but its `[rule.recent]` condition did, read those minutes for those scopes (one more round
/// trip, only then; one query set for all of them) and judge again.
async fn judge_round(run: &mut Run<'_>, reads: &Reads, found: &Found, answers: &Answers) -> Judged {
    let (rules, p) = (run.rules, &run.opts.params);
    let labels = assemble::fleet_labels(&found.plan.labels, answers, &found.disc.window_names, p, &mut run.warnings);
    let (mut table, names_used) = assemble::signal_table(&reads.signals, answers, &p.group_by, &mut run.warnings);
    let late = judge::late_scopes(rules, &table, p);
    if !late.is_empty() {
        let selector = follow_up::only_scopes(&run.opts.selector, &p.group_by, &late);
        let ctx = QueryContext { selector, ..reads.signals.ctx.clone() };
        let late_plan = plan::plan_signals(rules, &rules.late_signals(), ctx, p, &found.disc, &mut run.warnings);
        let late_answers = run.read(&late_plan.reads).await;
        let (part, _) = assemble::signal_table(&late_plan, &late_answers, &p.group_by, &mut run.warnings);
        judge::merge_late(&mut table, part);
    }
    let verdicts = judge::judge_late(rules, &table, p, &late);
    run.warnings.extend(unread_warning(&judge::unread(rules, &table), p));
    Judged { labels, table, names_used, verdicts }
}

/// Round 4's reads: the findings' follow-ups, the changes' second round (which models the changed
/// replicas serve), what else moved (every watched signal's trend over both windows, a fixed
/// handful of queries) and each replica's time by hop (two queries, where the fleet has 2 to 256
/// replicas).
struct FollowUpReads {
    findings: follow_up::FollowUps,
    moved: moved::MovedPlan,
    hops: Option<hops::ReplicaPlan>,
    reads: fetch::ReadPlan,
}

fn plan_follow_ups(run: &mut Run<'_>, reads: &mut Reads, judged: &Judged, answers: &Answers, found: &Found) -> FollowUpReads {
    let (rules, opts, p) = (run.rules, run.opts, &run.opts.params);
    let findings = follow_up::plan(&judged.verdicts.ranked.findings, rules, &reads.signals, &opts.selector, p, &found.disc.window_names);
    let event_more = events::follow_up(&mut reads.events, answers);
    // The spare families only where discovery found them.
    let spare: BTreeSet<String> = rules.signals.values().filter(|d| d.spare).map(|d| d.id.clone()).collect();
    let spare_plan = plan::plan_signals(rules, &spare, reads.signals.ctx.clone(), p, &found.disc, &mut Warnings::default());
    let replicas = judged.labels.get(&p.replica_label).copied();
    let moved = moved::plan(rules, &reads.signals, &spare_plan, &opts.selector, p, replicas, &mut run.warnings);
    let hops = hops::replica_plan(&reads.signals, &hops::HopSignals::of(rules), &opts.selector, p, replicas);
    let mut all = findings.reads();
    [fetch::ReadPlan::whole(event_more), hops.as_ref().map(hops::ReplicaPlan::read_plan).unwrap_or_default(), moved.read_plan()]
        .into_iter()
        .for_each(|r| all.extend(r));
    FollowUpReads { findings, moved, hops, reads: all }
}

/// The findings followed up, and what the run found beside them.
struct Followed {
    judged: Judged,
    binding: Vec<crate::report::Binding>,
    events: Vec<Event>,
    unexplained: Vec<crate::report::Unexplained>,
    trends: std::collections::BTreeMap<(String, crate::report::Scope), moved::Points>,
    hops: Vec<crate::report::HopSplit>,
}

/// Round 4's answers into the findings: which limit bound each model (read before the follow-ups,
/// so the levers they rule out agree with it), the follow-ups (built into the findings), the change
/// events, the findings' finishing parts ([`finish`]), what else moved (given each finding as it
/// will stand, it adds their correlations), the findings built and ranked once, and the time by
/// hop; nothing dropped in silence.
fn follow_up_round(run: &mut Run<'_>, reads: &Reads, mut judged: Judged, fu: &FollowUpReads, answers: &Answers, more: &Answers) -> Followed {
    let (rules, p) = (run.rules, &run.opts.params);
    let binding = reads.binding.as_ref().map(|b| binding::read(b, answers, p)).unwrap_or_default();
    // Each replica's batch, queue and KV: cards of a finding about some replicas are sized from them.
    let replicas = reads.binding.as_ref().map(|b| binding::replicas(b, answers, p)).unwrap_or_default();
    let findings = &mut judged.verdicts.ranked.findings;
    let read = follow_up::read(&fu.findings, more, findings, rules, &judged.table, &binding, &replicas, p, &mut run.warnings);
    *findings = std::mem::take(findings).into_iter().zip(read).map(|(f, part)| follow_up::build(f, part)).collect();
    let events = events::read(&reads.events, &[answers, more], &mut run.warnings);
    let latency = events::replica_latency(&reads.events, &[answers, more]);
    let step = fu.findings.step.max(reads.events.step());
    let finish = finish::Finish { rules, p, table: &judged.table, events: &events, step, latency: &latency, replicas: &replicas, binding: &binding };
    let mut finishing = finish::parts(findings, &finish);
    let moved = moved::find(&fu.moved, more, &finishing.standing(findings), rules, p, &mut run.warnings);
    finishing.correlated(moved.correlations);
    *findings = finish::finished(std::mem::take(findings), finishing);
    let (unexplained, trends) = (moved.unexplained, moved.points);
    let hop_ids = hops::HopSignals::of(rules);
    let hops = hops::with_replicas(hops::split(&judged.table, &hop_ids), fu.hops.as_ref(), &hop_ids, more, &p.group_by);
    let unreadable: Vec<_> = fetch::unreadable(answers).into_iter().chain(fetch::unreadable(more)).collect();
    run.warnings.extend(fetch::unreadable_warning(&unreadable));
    Followed { judged, binding, events, unexplained, trends, hops }
}

/// The report, assembled once from what the stages handed on, and what the run read.
fn assemble_report(run: Run<'_>, found: &Found, reads: Reads, f: Followed, fu: &FollowUpReads) -> (Report, Trace) {
    let p = &run.opts.params;
    let judge::Judged { ranked, scopes, evaluated, coverage, caveats, readings } = f.judged.verdicts;
    let info = SourceInfo { selector: run.opts.selector.to_promql(), ..run.source.info() };
    let report = Report {
        schema_version: SCHEMA_VERSION,
        window: p.window,
        baseline: p.baseline,
        source: info,
        metrics: MetricsInfo {
            generation: generation(&found.disc.window_names),
            scopes: scopes.into_iter().filter(|s| !s.is_empty()).collect(),
            names_used: f.judged.names_used,
            labels: f.judged.labels,
            replica_label: p.replica_label.clone(),
        },
        findings: ranked.findings,
        healthy: ranked.healthy,
        not_evaluated: ranked.not_evaluated,
        disabled: Vec::new(),
        warnings: run.warnings.into_report(),
        caveats,
        stats: RunStats { queries: run.queries, rules_evaluated: evaluated },
        coverage,
        events: f.events,
        deploy: None,
        binding: f.binding,
        unexplained: f.unexplained,
        hops: f.hops,
        profile: None,
        notes: reads.signals.notes,
        readings,
        probe: None,
    };
    let trace = Trace { trends: f.trends, moved_queries: fu.moved.requests(), moved_step: (fu.moved.step, fu.moved.trend_range.as_secs()) };
    (report, trace)
}

/// The warning for signals no rate could be taken for ([`judge::unread`]), if any. rate() needs two
/// samples of a series. A short window is the likely reason; over a longer one the series stopped
/// reporting, or the data ends before the window does.
fn unread_warning(unread: &[String], p: &RunParams) -> Option<String> {
    if unread.is_empty() {
        return None;
    }
    let window = p.window.duration();
    let why = if window < std::time::Duration::from_secs(300) {
        format!("the {} window (or the baseline) probably holds fewer than two samples of each series, and rate() needs two. Widen --window to at least four scrape intervals", humantime::format_duration(window))
    } else {
        "their series have fewer than two samples in the window or the baseline, and rate() needs two: they stopped reporting, or the data ends before the window does (check --at)".to_string()
    };
    Some(format!("no rate could be taken for {} although the metrics are in the data and the queries succeeded: {why}", unread.join(", ")))
}

/// The change events of `range` alone, without a diagnosis (`check --since deploy` looks for the
/// deploy with it): one discovery request, then the event queries.
pub async fn find_events(
    source: Arc<dyn Source>,
    selector: &Selector,
    group_by: &[String],
    replica_label: &str,
    range: TimeRange,
    deadline: Duration,
) -> (Vec<Event>, Vec<String>) {
    let started = std::time::Instant::now();
    let mut warnings = Warnings::default();
    let names_req = discover::names_request(selector, &[], &[], &range);
    let answers = run_queries(&source, vec![names_req.clone()], 1, deadline).await;
    let names: BTreeSet<String> = match answers.get(&names_req) {
        Some(Ok(crate::source::Response { data: crate::source::Data::Labels(names), .. })) => names.iter().cloned().collect(),
        Some(Err(e)) => {
            warnings.push(format!("metric names not listed: {e}"));
            BTreeSet::new()
        }
        _ => BTreeSet::new(),
    };
    let ctx = events::EventContext { selector, group_by, replica_label, names: &names, steps: events::DEPLOY_STEPS };
    let mut plan = events::plan(&ctx, &range, &range);
    let answers = run_queries(&source, plan.requests(), 4, fetch::remaining(deadline, started)).await;
    let more_requests = events::follow_up(&mut plan, &answers);
    let more = run_queries(&source, more_requests, 4, fetch::remaining(deadline, started)).await;
    let found = events::read(&plan, &[&answers, &more], &mut warnings);
    (found, warnings.into_vec())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::rank::Judgement;
    use crate::report::Scope;
    use crate::rules::eval::{Availability, Outcome, SignalTable, SignalValues};

    fn scope(model: &str) -> Scope {
        [("model_name".to_string(), model.to_string())].into_iter().collect()
    }

    fn narrowed(user: &str, models: &[&str]) -> String {
        let sel = Selector::parse(user).unwrap();
        let scopes: BTreeSet<Scope> = models.iter().map(|m| scope(m)).collect();
        follow_up::only_scopes(&sel, &["model_name".to_string()], &scopes).series("m", &[])
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
        let j = |rule: &str, outcome: Outcome| Judgement { rule: rule.into(), scope: scope("m"), outcome, late: true };
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
        let c = judge::coverage(&rules, &table, &judgements, true, &by);
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
        let idle = vec![Judgement { rule: "slow-decode".into(), scope: scope("idle"), outcome: unknown(), late: true }, j("slow-decode", Outcome::NotMatched)];
        assert!(judge::coverage(&rules, &quiet_table, &idle, true, &by).core_not_evaluated.is_empty());
        // With no data at all in the window nothing counts as evaluated, and every core rule is missing.
        let none = judge::coverage(&rules, &table, &judgements, false, &by);
        assert_eq!(none.evaluated, 0);
        assert_eq!(none.core_not_evaluated.len(), 6);
    }

    #[test]
    fn latency_no_model_has_an_observation_count_for_is_a_gap_and_an_idle_fleets_is_not() {
        // `--window 15s` over 60 s scrapes: the queries succeed, but no rate can be taken, so the
        // quantiles and rates come back with nothing at all. An idle fleet's come back with zero
        // observations and a zero rate.
        use crate::rules::eval::WindowValues;
        let rules = crate::rules::load_builtin().unwrap();
        let by = vec!["model_name".to_string()];
        let nothing = WindowValues::unavailable(Availability::Ok);
        let zero_observations = WindowValues { counts: [(scope("m"), 0.0)].into_iter().collect(), ..nothing.clone() };
        let zero_rate = WindowValues { values: [(scope("m"), 0.0)].into_iter().collect(), ..nothing.clone() };
        let table_of = |quantiles: &WindowValues, rate: &WindowValues| {
            let mut t = SignalTable::new();
            for sig in ["ttft_p95", "queue_p95", "itl_p95"] {
                t.insert(sig.into(), SignalValues { window: quantiles.clone(), baseline: quantiles.clone() });
            }
            t.insert("generation_tokens_rate".into(), SignalValues { window: rate.clone(), baseline: rate.clone() });
            t
        };
        let judgements = vec![Judgement {
            rule: "slow-decode".into(),
            scope: scope("m"),
            outcome: Outcome::Unknown { reasons: vec!["no data for itl_p95 in the window".into()] },
            late: true,
        }];

        let short = table_of(&nothing, &nothing);
        assert_eq!(judge::unread(&rules, &short), vec!["generation_tokens_rate", "itl_p95", "queue_p95", "ttft_p95"]);
        assert_eq!(judge::coverage(&rules, &short, &judgements, true, &by).core_not_evaluated, vec!["slow-decode"]);
        // Only the rate unread is enough: slow-decode reads it too.
        assert_eq!(judge::coverage(&rules, &table_of(&zero_observations, &nothing), &judgements, true, &by).core_not_evaluated, vec!["slow-decode"]);

        let idle = table_of(&zero_observations, &zero_rate);
        assert!(judge::unread(&rules, &idle).is_empty());
        assert!(judge::coverage(&rules, &idle, &judgements, true, &by).core_not_evaluated.is_empty());
    }
}
