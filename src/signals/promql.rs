//! The PromQL the signal kinds share (bucket rates, means, counter rates and their joins), and the
//! queries explain builds around the signals (discovery, the fleet's labels, the cache
//! configuration). Each kind's own PromQL is in its module under `kinds/`; with this file they are
//! the only place the diagnosis' PromQL is written.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::prom::{MatchOp, Matcher, Selector};

use super::*;

/// The running-requests gauge, in both spellings: every vLLM version exports it, one series per
/// replica (engine), so it is what the fleet's size and the data's extent are read from.
pub const RUNNING_GAUGE: [&str; 2] = ["vllm:num_requests_running", "vllm_num_requests_running"];

/// The distinct combinations of the fleet's `labels` over `range`, read once from the
/// running-requests gauge every vLLM version exports (one series per engine): how many values each
/// label takes is counted from them by vllm-diag. One row per replica at most.
pub fn fleet_labels_query(selector: &Selector, labels: &[String], range: Duration) -> String {
    let names = RUNNING_GAUGE.iter().map(|n| crate::prom::escape_regex_literal(n)).collect::<Vec<_>>().join("|");
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: names }];
    m.extend(selector.matchers.iter().cloned());
    // Not production-stack's router's gauges of the same name (crate::prom::SHADOWED).
    if !m.iter().any(|m| m.name == crate::prom::selector::SHADOW_LABEL) {
        m.push(Matcher::eq(crate::prom::selector::SHADOW_LABEL, ""));
    }
    let series = format!("{{{}}}", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","));
    format!("group by ({}) (last_over_time({series}[{}]))", labels.join(", "), promql_duration(range))
}

/// The bucket series of the histograms `series` under the user's selector, for the label index:
/// which `le` values they carry is listed from the index alone (`/api/v1/label/le/values`), without
/// reading a sample. Whether every replica carries each bound is checked on the bucket reads
/// themselves ([`uncovered_bounds`]).
pub fn bucket_bounds_matcher(selector: &Selector, series: &[String]) -> String {
    let names = series.iter().map(|n| crate::prom::escape_regex_literal(n)).collect::<Vec<_>>().join("|");
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: names }];
    m.extend(selector.matchers.iter().cloned());
    format!("{{{}}}", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","))
}

/// How heavy a query of vllm-diag's own making is likely to be for the server, lowest first: bucket
/// reads (every bucket series of a histogram), then other reads of a histogram's buckets, then the
/// rest. Requests are sent heaviest first, so the last answers of a round are short ones and the
/// round ends sooner (the longest-first rule of scheduling).
pub fn weight_rank(query: &str) -> u8 {
    // Every bucket of a histogram: summed by the server, or asked unaggregated (a per-replica read).
    if query.contains("sum by (le,") || (query.starts_with("rate(") && query.contains("_bucket")) {
        0
    } else if query.contains("_bucket") {
        1
    } else {
        2
    }
}

/// A probe's engine-side read (`vllm-diag probe`): the mean of the histograms named `names` (one
/// family in its spellings) over the `range` before the instant asked, every series under the
/// selector summed, as `_sum` over `_count` (exact whatever the buckets; `increase`'s extrapolation
/// scales both alike). `count` asks the number of observations instead (the requests the engines
/// finished, for the e2e family): each series' last sample in the range less its first, summed,
/// which counts exactly what the scrapes saw (a restart inside the range would make it wrong, so
/// the means do not use it).
pub fn probe_engine_query(selector: &Selector, names: &[&str], range: Duration, count: bool) -> String {
    let series = |suffix: &str| {
        let alternatives = names.iter().map(|n| crate::prom::escape_regex_literal(&format!("{n}{suffix}"))).collect::<Vec<_>>().join("|");
        let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: alternatives }];
        m.extend(selector.matchers.iter().cloned());
        format!("{{{}}}[{}]", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","), promql_duration(range))
    };
    if count {
        let s = series("_count");
        format!("sum(max_over_time({s}) - min_over_time({s}))")
    } else {
        format!("sum(increase({})) / sum(increase({}))", series("_sum"), series("_count"))
    }
}

/// A probe's engine-side gauge read: the highest value any one series under the selector held in the
/// `range` before the instant asked (the most requests one engine had running, or waiting).
pub fn probe_engine_gauge_max(selector: &Selector, names: &[&str], range: Duration) -> String {
    let alternatives = names.iter().map(|n| crate::prom::escape_regex_literal(n)).collect::<Vec<_>>().join("|");
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: alternatives }];
    m.extend(selector.matchers.iter().cloned());
    if !m.iter().any(|m| m.name == crate::prom::selector::SHADOW_LABEL) {
        // Not production-stack's router's gauges of the same name (crate::prom::SHADOWED).
        m.push(Matcher::eq(crate::prom::selector::SHADOW_LABEL, ""));
    }
    format!("max(max_over_time({{{}}}[{}]))", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","), promql_duration(range))
}

/// A load test's step read of a gauge: the step's mean of each series under the selector, the
/// highest (the requests waiting on the engine with the most, on average over the step).
pub fn engine_gauge_mean_max(selector: &Selector, names: &[&str], range: Duration) -> String {
    probe_engine_gauge_max(selector, names, range).replacen("max(max_over_time(", "max(avg_over_time(", 1)
}

/// A load test's step read of a counter: how much it rose over the `range`, each series' last
/// sample less its first, summed (exactly what the scrapes saw, as [`probe_engine_query`]'s count).
pub fn engine_counter_rise(selector: &Selector, names: &[&str], range: Duration) -> String {
    let s = series_in(selector, names, "", range);
    format!("sum(max_over_time({s}) - min_over_time({s}))")
}

/// A load test's step read of a histogram's quantile `q` over the `range`, every series under the
/// selector summed by bucket (the engines' own p95 time between tokens, to the first token).
pub fn engine_histogram_quantile(selector: &Selector, names: &[&str], q: f64, range: Duration) -> String {
    format!("histogram_quantile({q}, sum by (le) (increase({})))", series_in(selector, names, "_bucket", range))
}

/// `{__name__=~"a<suffix>|b<suffix>",selector...}[range]`.
fn series_in(selector: &Selector, names: &[&str], suffix: &str, range: Duration) -> String {
    let alternatives = names.iter().map(|n| crate::prom::escape_regex_literal(&format!("{n}{suffix}"))).collect::<Vec<_>>().join("|");
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: alternatives }];
    m.extend(selector.matchers.iter().cloned());
    format!("{{{}}}[{}]", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","), promql_duration(range))
}

/// PromQL duration in whole seconds (exact and accepted everywhere).
pub fn promql_duration(d: Duration) -> String {
    format!("{}s", d.as_secs().max(1))
}

/// The range of every subquery in `query` (`[300s:15s]` is 300 s), quoted strings skipped. A
/// subquery asked as a range query is evaluated at every one of its own steps from the first
/// step's range to the last step, so at two instants far apart (a window and its baseline) it
/// computes the whole span between them: such a query is better asked at each instant.
pub fn subquery_ranges(query: &str) -> Vec<Duration> {
    let mut out = Vec::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in query.char_indices() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q != '`' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' | '`' => quote = Some(c),
                '[' => {
                    let rest = &query[i + 1..];
                    let Some(close) = rest.find(']') else { continue };
                    if let Some((range, _step)) = rest[..close].split_once(':') {
                        if let Ok(d) = humantime::parse_duration(range.trim()) {
                            out.push(d);
                        }
                    }
                }
                _ => {}
            },
        }
    }
    out
}

/// Parse a rule file's `match = 'finished_reason="abort"'` into matchers.
pub fn parse_match(m: &str) -> Result<Vec<Matcher>, crate::prom::SelectorError> {
    Ok(Selector::parse(m)?.matchers)
}

/// The queries behind one signal for one window: the value, and for quantiles the observation count.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalQueries {
    /// The signal's value per scope, in PromQL (what reports show and rules export).
    pub value: String,
    /// What explain sends instead of `value`, when it is cheaper for the server to answer with the
    /// per-replica values and let vllm-diag reduce them (outliers: the per-replica expression is
    /// then evaluated once instead of three times).
    pub fetch: Option<String>,
    pub count: Option<String>,
    /// For outliers: the value query returns one series per replica, labelled with this label, and
    /// the scope's value is computed from them (worst over the median of the others).
    pub per_replica: Option<(String, Reduction)>,
    /// What explain sends instead of `value` when the value combines reads that other signals
    /// make too (a share's denominator, a request rate): the reads, each asked once however many
    /// signals need it, and how vllm-diag combines them into `value`'s result.
    pub parts: Option<(Combine, Vec<String>)>,
    /// The reads among `value` and `parts` that are sums of a counter's rates, described, so that
    /// explain can answer several over one counter with one read (see [`SumRead`]).
    pub sums: Vec<(String, SumRead)>,
}

/// How the `parts` of a signal become its value per scope, exactly as its PromQL would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// `(num or den * 0) / den`: every scope of the denominator; one with no numerator is 0.
    Share,
    /// `a / b`: the scopes both have.
    Divide,
    /// `max by (G) (per) / avg by (G) (per)` over one per-replica read.
    Spread,
    /// `min by (G) (per) / avg by (G) (per)` over one per-replica read.
    Least,
    /// `a * N` over one read: a rate as the count over its range (N seconds).
    Times(u64),
    /// `a - b - c ...`: the scopes all of them have (a remainder of means, each read whole by the
    /// signal that is that mean).
    Less,
    /// `clamp_min(started - finished - under_way, 0)` over those three reads (`under_way` already
    /// divided by the range's seconds); with `share`, that over itself plus `finished`.
    GiveUps { share: bool },
}

/// `le` values as clients write a bound: `0.5`, `1.0`, `1` and the like.
pub(super) fn le_forms(bound: f64) -> Vec<String> {
    let mut forms = vec![format!("{bound}")];
    if bound.fract() == 0.0 {
        forms.push(format!("{bound:.1}"));
    }
    forms.push(format!("{bound:e}"));
    forms.sort();
    forms.dedup();
    forms
}

/// [`le_forms`] as an anchored regex.
pub(super) fn le_regex(bound: f64) -> String {
    le_forms(bound).iter().map(|f| crate::prom::escape_regex_literal(f)).collect::<Vec<_>>().join("|")
}

/// The per-scope bucket rates a quantile signal reads (`sum by (le, G) (rate(F_bucket[R]))`): the
/// argument of its `histogram_quantile`. Two quantiles of one histogram read it once, and vllm-diag
/// interpolates both from it ([`crate::local::functions::bucket_quantile`], Prometheus' own rules).
pub fn bucket_rates_query(resolved: &Resolved, ctx: &QueryContext) -> String {
    let fam = family_of(&resolved.names[0]);
    let by = ctx.group_by.join(", ");
    format!("sum by (le, {by}) (rate({}[{}]))", ctx.selector.series(&format!("{fam}_bucket"), &[]), promql_duration(ctx.range))
}

/// The per-replica bucket rates (`sum by (le, G, R) (rate(F_bucket[R]))`): what an outlier's
/// per-replica quantiles are read from, and, summed over replicas by vllm-diag, the scope's
/// quantiles of the same histogram, so the histogram is read once for all of them.
pub fn replica_bucket_rates_query(resolved: &Resolved, ctx: &QueryContext, replica_label: &str) -> String {
    let fam = family_of(&resolved.names[0]);
    let by = ctx.group_by.join(", ");
    format!("sum by (le, {by}, {replica_label}) (rate({}[{}]))", ctx.selector.series(&format!("{fam}_bucket"), &[]), promql_duration(ctx.range))
}

/// The bucket rates of every series of the histogram, unaggregated (`rate(F_bucket[R])`): what
/// explain asks instead of [`replica_bucket_rates_query`], summing the answer by `le`, the
/// grouping labels and the replica label itself as it decodes it. The server then reads each series
/// as that query would but skips grouping thousands of them, the dearest part of it at fleet scale.
pub fn bucket_rates_read(resolved: &Resolved, ctx: &QueryContext) -> String {
    let fam = family_of(&resolved.names[0]);
    format!("rate({}[{}])", ctx.selector.series(&format!("{fam}_bucket"), &[]), promql_duration(ctx.range))
}

/// The stored histogram a signal reads by its buckets (quantiles, outliers over a histogram, SLO
/// burn rates), by its stem: `x` for `x_bucket`.
pub fn histogram_of(kind: &SignalKind, resolved: &Resolved) -> Option<String> {
    kind.kind().histogram_use()?;
    Some(family_of(resolved.names.first()?).to_string())
}

/// The mean of the histogram whose stored series is `series` (`_sum` over `_count`), per scope.
pub(super) fn mean_query(series: &str, ctx: &QueryContext) -> String {
    let (by, r, fam) = (ctx.group_by.join(", "), promql_duration(ctx.range), family_of(series));
    format!(
        "sum by ({by}) (rate({}[{r}])) / sum by ({by}) (rate({}[{r}]))",
        ctx.selector.series(&format!("{fam}_sum"), &[]),
        ctx.selector.series(&format!("{fam}_count"), &[])
    )
}

/// The mean of the first histogram of `series` less the means of the others (a [`Mean`] has only
/// the first, a [`Remainder`] the others too): `(mean a) - (mean b) - ...`.
pub(super) fn mean_less_means(series: &[String], ctx: &QueryContext) -> String {
    match series {
        [one] => mean_query(one, ctx),
        many => many.iter().map(|n| format!("({})", mean_query(n, ctx))).collect::<Vec<_>>().join(" - "),
    }
}

/// The sums [`mean_less_means`] divides, as reads: per histogram of `series`, its `_sum` and its
/// `_count` rates summed by the grouping labels, as that query writes them.
pub fn mean_parts(series: &[String], ctx: &QueryContext) -> Vec<(SumRead, SumRead)> {
    series
        .iter()
        .map(|n| {
            let fam = family_of(n);
            (rate_read(&format!("{fam}_sum"), &[], None, &[], ctx), rate_read(&format!("{fam}_count"), &[], None, &[], ctx))
        })
        .collect()
}

/// Build the PromQL for a resolved signal.
pub fn build(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
    kind.kind().queries(resolved, ctx)
}

/// The step a subquery over the window is read at: the trends' step (a thirtieth of the range,
/// 15 s at least).
pub(super) fn subquery_step(ctx: &QueryContext) -> u64 {
    (ctx.range.as_secs() / 30).max(15)
}

/// A bitmask's series as 1 where any of `bits` is set and 0 where none is. PromQL has no bitwise
/// operators: bit b of x is `floor(x / b) % 2`.
pub fn bits_set(series: &str, bits: &[u32]) -> String {
    let one = |b: &u32| format!("floor({series} / {b}) % 2");
    match bits {
        [b] => one(b),
        many => format!("clamp_max({}, 1)", many.iter().map(one).collect::<Vec<_>>().join(" + ")),
    }
}

/// A counter's per-second increase over the range `range`, series by series, counting a series
/// born inside the range from zero: `rate()` reads only the differences between a series' samples,
/// so a series created at its first event already holding a value (an HTTP status a server answers
/// for the first time; vLLM's router's failures, retries and circuit transitions) adds nothing of
/// that value, though every bit of it happened inside the range.
///
/// A series with no sample in the five minutes before the range (Prometheus' lookback: more samples
/// over the range and those minutes than over the range alone) on a target that was up in them (`up`
/// summed over both spans differs: a sample of 1 before the range; not a target whose history was
/// never seen, which may hold days of counts) reads its last value over the range; every other series
/// reads `rate()` as before (a reset is rate's to handle). The last value, not the first sample plus
/// the rate, so that a backend whose `rate()` already counts a new series from zero
/// (VictoriaMetrics does when its first value is small) is not counted twice. Range selectors only,
/// each ending at the evaluation time: a query shifted back by `offset` after each of them (a rule
/// export's baseline) shifts all of it.
pub fn counter_rate(series: &str, range: Duration) -> String {
    let secs = range.as_secs().max(1);
    let (r, with_lookback) = (promql_duration(range), format!("{}s", secs + LOOKBACK_SECS));
    format!(
        "((last_over_time({series}[{r}]) / {secs} unless count_over_time({series}[{with_lookback}]) > count_over_time({series}[{r}])) and on (instance, job) (sum_over_time(up[{with_lookback}]) > sum_over_time(up[{r}])) or rate({series}[{r}]))"
    )
}

/// Whether a counter's series exist from its exporter's start, each at 0: vLLM's own engine
/// counters (`vllm:`, and the older `vllm_` spelling, not the router's `vllm_router_`), which vLLM
/// registers at start with every label value (measured on 0.32: every `finished_reason`,
/// preemptions), except the NIXL connector's, created with its first transfer statistics. Such a
/// series is born only with its engine, whose start `rate()` reads from 0: [`counter_rate`] would
/// read it again for nothing.
pub fn created_at_start(counter: &str) -> bool {
    let engine = counter.starts_with("vllm:") || (counter.starts_with("vllm_") && !counter.starts_with("vllm_router_"));
    engine && !counter.contains("nixl")
}

/// `rate()` of `series` (a selector of `counter`) over `range`, or [`counter_rate`] where the
/// counter's series can be born inside the range holding a value.
pub fn counter_increase_rate(counter: &str, series: &str, range: Duration) -> String {
    if created_at_start(counter) {
        format!("rate({series}[{}])", promql_duration(range))
    } else {
        counter_rate(series, range)
    }
}

/// Prometheus' default lookback (`--query.lookback-delta`): how far before an instant a series' last
/// sample still counts as present.
pub const LOOKBACK_SECS: u64 = 300;

/// One counter's per-second rate summed over groups: `sum by (BY) (rate(C{sel,extra}[R]))`. A
/// counter without the grouping labels (HTTP, DCGM) is summed per `join` labels first and carried
/// to the scope by an anchor gauge; matchers on the grouping labels then go to the anchor only.
///
/// Reads of one counter over one range that differ only in grouping and matchers (a share's
/// numerator and denominator, a spread's per-replica rates, an error rate) are answered by one read
/// grouped by every label they group or filter on ([`SumRead::shared`]), from which explain sums
/// each of them: the counter's series are then read once instead of once per signal.
#[derive(Debug, Clone, PartialEq)]
pub struct SumRead {
    pub counter: String,
    pub extra: Vec<Matcher>,
    pub by: Vec<String>,
    /// The anchor gauge and the labels joined on, for a counter without the grouping labels.
    pub anchor: Option<(String, Vec<String>)>,
    pub range: Duration,
}

impl SumRead {
    /// This read alone, as PromQL.
    pub fn promql(&self, selector: &Selector, group_by: &[String]) -> String {
        self.query(selector, group_by, &self.by, &self.extra)
    }

    /// Reads with the same key can share one read.
    pub fn key(&self) -> (String, Option<(String, Vec<String>)>, Duration) {
        (self.counter.clone(), self.anchor.clone(), self.range)
    }

    /// One read that answers every read in `reads` (all with one key): the counter's rates summed
    /// by every label they group or filter on, or `None` when they cannot share one (an attributed
    /// counter grouped by a label the anchor does not carry, or filtered on a grouping label; a
    /// read filtered by a regular expression, which vllm-diag would match with Rust's engine
    /// instead of the server's Go RE2, whose classes and `.` differ at the edges).
    ///
    /// A negative regular expression that every read carries (the HTTP signals leave out a
    /// router's own render and tokenize calls) is the server's to apply: it goes into the shared
    /// read, its label is left out of the answer, and the cut's filter then sees a series without
    /// that label, which such a matcher passes (one that matches the empty value cannot share).
    pub fn shared(reads: &[&SumRead], selector: &Selector, group_by: &[String]) -> Option<String> {
        let first = reads.first()?;
        let passes_absent = |m: &Matcher| m.compile().is_ok_and(|c| c.matches(None));
        let common: Vec<Matcher> =
            first.extra.iter().filter(|m| m.op == MatchOp::Nre && passes_absent(m) && reads.iter().all(|r| r.extra.contains(m))).cloned().collect();
        let own = |r: &&SumRead| r.extra.iter().filter(|m| !common.contains(m)).cloned().collect::<Vec<Matcher>>();
        // A list of literal alternatives (the routes users call) matches the same in either
        // engine: read grouped by its label, and matched by vllm-diag.
        let own_regex = |m: &Matcher| match m.op {
            MatchOp::Nre => true,
            MatchOp::Re => !literal_alternatives(&m.value),
            _ => false,
        };
        if reads.iter().any(|r| own(r).iter().any(own_regex)) {
            return None;
        }
        // The grouping labels first, as every read writes them, then the others in name order
        // (not a common matcher's label, unless a read groups or filters on it otherwise).
        let others: BTreeSet<String> =
            reads.iter().flat_map(|r| r.by.iter().cloned().chain(own(r).into_iter().map(|m| m.name))).filter(|l| !group_by.contains(l)).collect();
        if common.iter().any(|m| others.contains(&m.name)) {
            return None;
        }
        let keep: Vec<String> = group_by.iter().cloned().chain(others).collect();
        if let Some((_, join)) = &first.anchor {
            let carried = |l: &String| group_by.contains(l) || join.contains(l);
            if reads.iter().any(|r| !r.by.iter().all(carried) || r.extra.iter().any(|m| group_by.contains(&m.name))) {
                return None;
            }
        }
        Some(first.query(selector, group_by, &keep, &common))
    }

    fn query(&self, selector: &Selector, group_by: &[String], by: &[String], extra: &[Matcher]) -> String {
        let r = promql_duration(self.range);
        let outer = by.join(", ");
        match &self.anchor {
            None => format!("sum by ({outer}) ({})", counter_increase_rate(&self.counter, &selector.series(&self.counter, extra), self.range)),
            Some((anchor, join)) => {
                let own = selector.without(group_by);
                let (j, g, anchor_by) = join_labels(join, group_by);
                // The counter's own labels the outer sum keeps (a status it is filtered on) stay
                // through the join.
                let inner: Vec<&str> = join.iter().chain(by.iter().filter(|l| !group_by.contains(l) && !join.contains(l))).map(String::as_str).collect();
                format!(
                    "sum by ({outer}) (sum by ({}) ({}) * on ({j}) group_left ({g}) group by ({anchor_by}) (last_over_time({}[{r}])))",
                    inner.join(", "),
                    counter_increase_rate(&self.counter, &own.series(&self.counter, extra), self.range),
                    selector.series(anchor, &[])
                )
            }
        }
    }
}

/// Whether a regular expression is only literal alternatives (`/v1/completions|/v1/chat/completions`,
/// each escaped): one that Go's RE2 and Rust's regex match alike.
pub fn literal_alternatives(pattern: &str) -> bool {
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if e.is_ascii_punctuation() => {}
                _ => return false,
            },
            '.' | '^' | '$' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' => return false,
            _ => {}
        }
    }
    true
}

/// `sum by (G) (rate(C{sel,extra}[R]))`, attributed through `anchor` when the counter lacks the
/// grouping labels.
pub(super) fn rate_read(counter: &str, extra: &[Matcher], anchor: Option<&str>, join: &[String], ctx: &QueryContext) -> SumRead {
    SumRead {
        counter: counter.to_string(),
        extra: extra.to_vec(),
        by: ctx.group_by.clone(),
        anchor: anchor.map(|a| (a.to_string(), join.to_vec())),
        range: ctx.range,
    }
}

/// How many series of `metric` hold a sample at each step of a range query: where the first point
/// lies tells when the data starts.
pub fn series_count_query(selector: &Selector, metric: &str) -> String {
    format!("count({})", selector.series(metric, &[]))
}

/// The three label lists of a join that brings the grouping labels to series without them
/// (`X * on (J) group_left (L) group by (A) (anchor)`): J the join's labels, L the grouping labels
/// the join is not already on (PromQL refuses a label in both `on` and `group_left`, as with
/// `--group-by model_name,namespace` and a join on namespace and pod), and A both, each once.
pub(super) fn join_labels(join_on: &[String], carry: &[String]) -> (String, String, String) {
    let mut left: Vec<&str> = Vec::new();
    for l in carry {
        if !join_on.contains(l) && !left.contains(&l.as_str()) {
            left.push(l);
        }
    }
    let anchor: Vec<&str> = join_on.iter().map(String::as_str).chain(left.iter().copied()).collect();
    (join_on.join(", "), left.join(", "), anchor.join(", "))
}

/// vLLM's cache configuration (`num_gpu_blocks`, `block_size` as labels of the info gauge `name`)
/// per scope. The info series carries no model label, so it is joined to the scope's labels
/// through `anchor` (a gauge every engine exports) on the engine's `instance` and `job`.
pub fn cache_config_query(selector: &Selector, group_by: &[String], name: &str, anchor: &str, range: Duration) -> String {
    let by = group_by.join(", ");
    let r = promql_duration(range);
    let (j, left, anchor_by) = join_labels(&["instance".to_string(), "job".to_string()], group_by);
    format!(
        "max by ({by}, num_gpu_blocks, block_size) (last_over_time({}[{r}]) * on ({j}) group_left ({left}) group by ({anchor_by}) (last_over_time({}[{r}])))",
        selector.without(group_by).series(name, &[]),
        selector.series(anchor, &[])
    )
}

/// The discovery selector: every vLLM series name plus the HTTP layer's, under the user's selector.
pub fn discovery_matcher(selector: &Selector, extra_names: &[String]) -> String {
    let mut names = vec!["vllm[:_].+".to_string()];
    names.extend(extra_names.iter().map(|n| crate::prom::escape_regex_literal(n)));
    names_matcher(&names, selector)
}

/// The discovery selectors (`match[]` values, whose union is listed). The other exporters' series
/// (`up`, `http_requests_total`, DCGM's) carry no grouping label such as `model_name`: their
/// queries join them to the scope through a vLLM gauge and put matchers on the grouping labels on
/// that gauge only, and discovery must look for them the same way, or `--selector
/// 'model_name="m"'` (and every `serve` diagnosis) would find them missing. So when the selector
/// names a grouping label they get a selector of their own without it; otherwise one selector
/// lists everything, as it always did (and as recordings made before hold it).
pub fn discovery_matchers(selector: &Selector, extra_names: &[String], group_by: &[String]) -> Vec<String> {
    if extra_names.is_empty() || selector.only(group_by).matchers.is_empty() {
        return vec![discovery_matcher(selector, extra_names)];
    }
    let extras: Vec<String> = extra_names.iter().map(|n| crate::prom::escape_regex_literal(n)).collect();
    vec![discovery_matcher(selector, &[]), names_matcher(&extras, &selector.without(group_by))]
}

fn names_matcher(names: &[String], selector: &Selector) -> String {
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: names.join("|") }];
    m.extend(selector.matchers.iter().cloned());
    format!("{{{}}}", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","))
}

/// The metric names a query reads: every selector's name, and each alternative of a
/// `__name__=~"a|b"` matcher (the only regex this module writes on names). For the query-budget
/// checks and the benchmark's data-read floor, which count how often each family is read.
pub fn families_read(query: &str) -> Result<BTreeSet<String>, String> {
    let mut names = BTreeSet::new();
    for vs in selectors_of(query)? {
        names.extend(vs.name.clone());
        for m in vs.matchers.matchers.iter().filter(|m| m.name == "__name__") {
            names.extend(m.value.split('|').map(|n| n.replace('\\', "")));
        }
    }
    Ok(names)
}

/// Every series selector of `query` (those of range selectors included), in the order the query
/// writes them.
pub fn selectors_of(query: &str) -> Result<Vec<promql_parser::parser::VectorSelector>, String> {
    use promql_parser::parser::{Expr, VectorSelector};
    struct All(Vec<VectorSelector>);
    impl promql_parser::util::ExprVisitor for All {
        type Error = String;
        fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
            match e {
                Expr::VectorSelector(vs) => self.0.push(vs.clone()),
                Expr::MatrixSelector(ms) => self.0.push(ms.vs.clone()),
                _ => {}
            }
            Ok(true)
        }
    }
    let expr = promql_parser::parser::parse(query)?;
    let mut all = All(Vec::new());
    promql_parser::util::walk_expr(&mut all, &expr)?;
    Ok(all.0)
}
