//! The PromQL every signal is read with, and the queries explain builds around them (discovery,
//! the fleet's labels, the cache configuration). The only place the diagnosis' PromQL is written.

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
    let names = RUNNING_GAUGE
        .iter()
        .map(|n| crate::prom::escape_regex_literal(n))
        .collect::<Vec<_>>()
        .join("|");
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

pub(super) fn over_time_fn(o: OverTime) -> &'static str {
    match o {
        OverTime::Max => "max_over_time",
        OverTime::Avg => "avg_over_time",
        OverTime::Min => "min_over_time",
        OverTime::Last => "last_over_time",
        OverTime::Rate => "rate",
    }
}

pub(super) fn across_fn(a: Across) -> &'static str {
    match a {
        Across::Max => "max",
        Across::Sum => "sum",
        Across::Avg => "avg",
        Across::Min => "min",
    }
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
    format!(
        "sum by (le, {by}, {replica_label}) (rate({}[{}]))",
        ctx.selector.series(&format!("{fam}_bucket"), &[]),
        promql_duration(ctx.range)
    )
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
    match kind {
        SignalKind::Quantile { .. } | SignalKind::SloBurn { .. } => Some(family_of(resolved.names.first()?).to_string()),
        SignalKind::Outlier { histogram, .. } if !histogram.is_empty() => Some(family_of(resolved.names.first()?).to_string()),
        _ => None,
    }
}

/// The mean of the histogram whose stored series is `series` (`_sum` over `_count`), per scope.
fn mean_query(series: &str, ctx: &QueryContext) -> String {
    let (by, r, fam) = (ctx.group_by.join(", "), promql_duration(ctx.range), family_of(series));
    format!(
        "sum by ({by}) (rate({}[{r}])) / sum by ({by}) (rate({}[{r}]))",
        ctx.selector.series(&format!("{fam}_sum"), &[]),
        ctx.selector.series(&format!("{fam}_count"), &[])
    )
}

/// A gateway histogram's mean whose model label is `model_label` (Dynamo's frontend: `model`):
/// that label copied into `model_name` first when the run groups by `model_name`, so its scopes
/// are the engines'. A series that already carries `model_name` keeps it (the copy needs a value).
fn relabelled_mean(series: &str, model_label: &str, ctx: &QueryContext) -> String {
    if !ctx.group_by.iter().any(|g| g == "model_name") {
        return mean_query(series, ctx);
    }
    let (by, r, fam) = (ctx.group_by.join(", "), promql_duration(ctx.range), family_of(series));
    let part = |suffix: &str| {
        format!(
            "sum by ({by}) (label_replace(rate({}[{r}]), \"model_name\", \"$1\", \"{model_label}\", \"(.+)\"))",
            ctx.selector.without(&ctx.group_by).series(&format!("{fam}{suffix}"), &[])
        )
    };
    format!("{} / {}", part("_sum"), part("_count"))
}

/// A worker's URL as vLLM's router writes it (`http://10.0.0.7:8000`, `grpc://...`): its host:port,
/// which is the engine target's `instance`.
const WORKER_URL: &str = "[a-z+]+://([^/]+).*";

/// A [`SignalKind::Router`] signal's PromQL. The router's own `instance` and `job` are kept as
/// `router_instance` and `router_job`, and a worker-level series' `instance` becomes its worker's
/// host:port, then joins the engines' `instance` to take their grouping labels (`engines` read
/// over the range: an engine that reported in it). A router-level series goes to every scope its
/// router's workers serve (`workers` joined the same way), all of it to each: a router in front
/// of two models times both.
fn router_query(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
    let SignalKind::Router { measure, r#match, worker_label, equals, family, .. } = kind else {
        return Err("not a router signal".into());
    };
    let (by, r) = (ctx.group_by.join(", "), promql_duration(ctx.range));
    let own = ctx.selector.without(&ctx.group_by);
    let extra = parse_match(r#match).map_err(|e| e.to_string())?;
    let engines = resolved.names.last().ok_or("no engine gauge")?;
    // `instance` is the join's: not also in group_left when the run groups by it.
    let (_, left, engine_by) = join_labels(&["instance".to_string()], &ctx.group_by);
    let engine_map = format!("group by ({engine_by}) (last_over_time({}[{r}]))", ctx.selector.series(engines, &[]));
    let as_router = |x: String| format!("label_replace(label_replace({x}, \"router_instance\", \"$1\", \"instance\", \"(.*)\"), \"router_job\", \"$1\", \"job\", \"(.*)\")");
    let as_engine = |x: String, label: &str| format!("label_replace({x}, \"instance\", \"$1\", \"{label}\", \"{WORKER_URL}\")");
    // Per engine instance, with the scope's labels: `reduce` over the worker-level series `x`.
    let per_engine = |x: String, reduce: &str| {
        format!("{reduce} by ({engine_by}) ({reduce} by (instance) ({}) * on (instance) group_left ({left}) {engine_map})", as_engine(as_router(x), worker_label))
    };
    // Per scope: a router-level expression `x`, to every scope its router's workers serve.
    let per_router = |x: String| -> String {
        let workers = &resolved.names[resolved.names.len() - 2];
        let routed = format!(
            "group by (router_instance, router_job, {by}) ({} * on (instance) group_left ({left}) {engine_map})",
            as_engine(as_router(format!("last_over_time({}[{r}])", own.series(workers, &[]))), "worker")
        );
        format!("sum by ({by}) (sum by (router_instance, router_job) ({}) * on (router_instance, router_job) group_right {routed})", as_router(x))
    };
    let name = &resolved.names[0];
    Ok(match measure {
        RouterMeasure::Mean => {
            let fam = family_of(name);
            let rate = |suffix: &str| per_router(format!("rate({}[{r}])", own.series(&format!("{fam}{suffix}"), &extra)));
            format!("{} / {}", rate("_sum"), rate("_count"))
        }
        RouterMeasure::OverEngineMean => {
            let fam = family_of(name);
            let rate = |suffix: &str| per_router(format!("rate({}[{r}])", own.series(&format!("{fam}{suffix}"), &extra)));
            let engine = family_of(resolved.names.get(1).ok_or("no engine histogram")?);
            let engine_rate = |suffix: &str| format!("sum by ({by}) (rate({}[{r}]))", ctx.selector.series(&format!("{engine}{suffix}"), &[]));
            format!("({} / {}) / ({} / {})", rate("_sum"), rate("_count"), engine_rate("_sum"), engine_rate("_count"))
        }
        RouterMeasure::Ratio => {
            // The numerator as declared, present or not (see required_series): none is 0.
            let num = per_router(format!("rate({}[{r}])", own.series(family.first().ok_or("no family")?, &extra)));
            let den = per_router(format!("rate({}[{r}])", own.series(name, &[])));
            format!("({num} or {den} * 0) / {den}")
        }
        RouterMeasure::Rate => format!("sum by ({by}) ({})", per_engine(format!("rate({}[{r}])", own.series(name, &extra)), "sum")),
        RouterMeasure::Spread => {
            let per = per_engine(format!("rate({}[{r}])", own.series(name, &extra)), "sum");
            format!("max by ({by}) ({per}) / avg by ({by}) ({per})")
        }
        RouterMeasure::PoolMean => {
            let gauge = resolved.names.last().ok_or("no engine gauge")?;
            let pool = format!("group by (instance) ({})", as_engine(format!("last_over_time({}[{r}])", own.series(name, &extra)), worker_label));
            format!("avg by ({by}) (sum by ({engine_by}) (avg_over_time({}[{r}])) and on (instance) {pool})", ctx.selector.series(gauge, &[]))
        }
        RouterMeasure::HeldOut => {
            let step = subquery_step(ctx);
            let share = format!("avg_over_time(({} == bool {})[{r}:{step}s])", own.series(name, &extra), crate::prom::format_go_float(*equals));
            per_engine(share, "max")
        }
    })
}

/// The mean of the first histogram of `series` less the means of the others (a [`SignalKind::Mean`]
/// has only the first): `(mean a) - (mean b) - ...`.
fn mean_less_means(series: &[String], ctx: &QueryContext) -> String {
    match series {
        [one] => mean_query(one, ctx),
        many => many.iter().map(|n| format!("({})", mean_query(n, ctx))).collect::<Vec<_>>().join(" - "),
    }
}

/// A ratio per a gauge's level ([`SignalKind::Ratio`] with `per`), engine by engine (the replica
/// and vLLM's data-parallel `engine` label): a busy replica's steps beside an idle one's would
/// otherwise read as a batch twice the average. Only where the gauge stayed at `at_least` or more
/// throughout the range: a range across a change of load (a busy stretch ending) weighs the steps
/// and the gauge's time differently. Then averaged over the scope's engines: one series per scope,
/// one expression read whole (no anchor: the loader refuses one).
fn ratio_per_gauge_query(numerator: &CounterRef, denominator: &CounterRef, at_least: f64, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
    let (by, r, sel) = (ctx.group_by.join(", "), promql_duration(ctx.range), &ctx.selector);
    let parse = |m: &str| parse_match(m).map_err(|e| e.to_string());
    let (num_name, gauge) = (&resolved.names[0], resolved.names.last().ok_or("no gauge")?);
    let den_name = if denominator.counter != numerator.counter { &resolved.names[1] } else { num_name };
    let replica = ctx.replica_label.as_str();
    if !crate::prom::is_label_name(replica) {
        return Err(format!("replica label {replica:?} is not a label name"));
    }
    let mut each: Vec<&str> = ctx.group_by.iter().map(String::as_str).collect();
    for l in [replica, "engine"] {
        if !each.contains(&l) {
            each.push(l);
        }
    }
    let each = each.join(", ");
    Ok(format!(
        "avg by ({by}) (sum by ({each}) (rate({}[{r}])) / sum by ({each}) (rate({}[{r}])) / (sum by ({each}) (avg_over_time({g}[{r}])) and (sum by ({each}) (min_over_time({g}[{r}])) >= {at_least})))",
        sel.series(num_name, &parse(&numerator.r#match)?),
        sel.series(den_name, &parse(&denominator.r#match)?),
        g = sel.series(gauge, &[])
    ))
}

/// Build the PromQL for a resolved signal.
pub fn build(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    let parse = |m: &str| parse_match(m).map_err(|e| e.to_string());
    let plain = |value: String| SignalQueries { value, fetch: None, count: None, per_replica: None, parts: None, sums: Vec::new() };
    let summed = |read: SumRead| (read.promql(sel, &ctx.group_by), read);
    let parts = |value: String, how: Combine, reads: Vec<String>| SignalQueries { parts: Some((how, reads)), ..plain(value) };
    let replica = |declared: &String| -> Result<String, String> {
        let l = if declared == RUN_REPLICA_LABEL { &ctx.replica_label } else { declared };
        if crate::prom::is_label_name(l) { Ok(l.clone()) } else { Err(format!("replica_label {l:?} is not a label name")) }
    };
    Ok(match kind {
        SignalKind::Quantile { quantile, .. } => {
            let fam = family_of(&resolved.names[0]);
            SignalQueries {
                value: format!("histogram_quantile({quantile}, {})", bucket_rates_query(resolved, ctx)),
                count: Some(format!(
                    "sum by ({by}) (increase({}[{r}]))",
                    sel.series(&format!("{fam}_count"), &[])
                )),
                fetch: None,
                per_replica: None,
                parts: None,
                sums: Vec::new(),
            }
        }
        SignalKind::Mean { model_label, .. } if !model_label.is_empty() => plain(relabelled_mean(&resolved.names[0], model_label, ctx)),
        SignalKind::Mean { .. } | SignalKind::Remainder { .. } => plain(mean_less_means(&resolved.names, ctx)),
        SignalKind::Router { measure: RouterMeasure::HeldOut, .. } => {
            // Read per engine instance, so that the finding names the worker held out.
            let per = router_query(kind, resolved, ctx)?;
            let by = ctx.group_by.join(", ");
            SignalQueries { value: format!("max by ({by}) ({per})"), fetch: Some(per), per_replica: Some(("instance".to_string(), Reduction::Max)), ..plain(String::new()) }
        }
        SignalKind::Router { .. } => plain(router_query(kind, resolved, ctx)?),
        SignalKind::Rate { r#match, attribute_via, join_on, .. } => {
            let extra = parse(r#match)?;
            let anchor = (!attribute_via.is_empty()).then(|| resolved.names[1].as_str());
            let (value, read) = summed(rate_read(&resolved.names[0], &extra, anchor, join_on, ctx));
            SignalQueries { sums: vec![(value.clone(), read)], ..plain(value) }
        }
        SignalKind::Ratio { numerator, denominator, per, per_at_least, .. } if !per.is_empty() => plain(ratio_per_gauge_query(numerator, denominator, *per_at_least, resolved, ctx)?),
        SignalKind::Ratio { numerator, denominator, attribute_via, join_on, .. } => {
            let num_extra = parse(&numerator.r#match)?;
            let den_extra = parse(&denominator.r#match)?;
            let num_name = &resolved.names[0];
            let den_name = if denominator.counter != numerator.counter { &resolved.names[1] } else { num_name };
            let anchor = (!attribute_via.is_empty()).then(|| resolved.names.last().map(String::as_str)).flatten();
            let (num, num_read) = summed(rate_read(num_name, &num_extra, anchor, join_on, ctx));
            let (den, den_read) = summed(rate_read(den_name, &den_extra, anchor, join_on, ctx));
            // A share with no matching events is 0, not "no data": fall back to 0 x the denominator.
            // explain reads the two rates once each (other shares and signals read the same
            // denominator) and divides them itself (Combine::Share).
            SignalQueries {
                sums: vec![(num.clone(), num_read), (den.clone(), den_read)],
                ..parts(format!("({num} or {den} * 0) / {den}"), Combine::Share, vec![num, den])
            }
        }
        SignalKind::Gauge { .. } => plain(gauge_query(kind, resolved, ctx)?),
        SignalKind::ActiveShare { .. } => {
            let step = (ctx.range.as_secs() / 30).max(15);
            let inner = (step * 2).max(120);
            plain(format!(
                "avg_over_time((sum by ({by}) (rate({}[{inner}s])) > bool 0)[{r}:{step}s])",
                sel.series(&resolved.names[0], &[])
            ))
        }
        SignalKind::StallShare { below, replica_label, .. } => plain(stall_share_query(*below, &replica(replica_label)?, resolved, ctx)),
        SignalKind::QueueWait { .. } => {
            let waiting = format!("sum by ({by}) (avg_over_time({}[{r}]))", sel.series(&resolved.names[0], &[]));
            let (done, done_read) = summed(rate_read(&resolved.names[1], &[], None, &[], ctx));
            SignalQueries { sums: vec![(done.clone(), done_read)], ..parts(format!("{waiting} / {done}"), Combine::Divide, vec![waiting, done]) }
        }
        SignalKind::GiveUps { share, .. } => {
            let rate = |name: &String| format!("sum by ({by}) (rate({}[{r}]))", sel.series(name, &[]));
            let (started, finished) = (rate(&resolved.names[0]), rate(&resolved.names[1]));
            let under_way = format!(
                "sum by ({by}) (max_over_time({}[{r}])) / {}",
                sel.series(&resolved.names[2], &[]),
                ctx.range.as_secs().max(1)
            );
            let gave_up = format!("clamp_min({started} - {finished} - {under_way}, 0)");
            plain(if *share { format!("{gave_up} / ({gave_up} + {finished})") } else { gave_up })
        }
        SignalKind::Slope { r#match, .. } => {
            let extra = parse(r#match)?;
            plain(format!("avg by ({by}) (deriv({}[{r}])) * 3600", sel.series(&resolved.names[0], &extra)))
        }
        SignalKind::Spread { replica_label, least, .. } => {
            let replica_label = &replica(replica_label)?;
            let mut read = rate_read(&resolved.names[0], &[], None, &[], ctx);
            read.by.push(replica_label.clone());
            let (per, read) = summed(read);
            let (pick, how) = if *least { ("min", Combine::Least) } else { ("max", Combine::Spread) };
            SignalQueries { sums: vec![(per.clone(), read)], ..parts(format!("{pick} by ({by}) ({per}) / avg by ({by}) ({per})"), how, vec![per]) }
        }
        SignalKind::Fill { .. } => {
            let m = sel.series(&resolved.names[0], &[]);
            plain(format!("avg by ({by}) (avg_over_time({m}[{r}]) / max_over_time({m}[{r}]))"))
        }
        SignalKind::Outlier { histogram, quantile, replica_label, measure, min_observations, ranks, .. } => {
            let replica_label = &replica(replica_label)?;
            if *ranks {
                if !histogram.is_empty() {
                    return Err("ranks are compared on gauges only".into());
                }
                return Ok(rank_outlier(*measure, replica_label, resolved, ctx));
            }
            let min_observations = if histogram.is_empty() { 0 } else { *min_observations };
            replica_outlier(!histogram.is_empty(), *quantile, *measure, min_observations, replica_label, resolved, ctx)
        }
        SignalKind::SloBurn { target, objective, .. } => plain(slo_burn_query(target, objective, resolved, ctx)?),
        SignalKind::Vanished { replica_label, .. } => {
            let replica_label = &replica(replica_label)?;
            let m = sel.series(&resolved.names[0], &[]);
            let value = format!("group by ({by}, {replica_label}) (last_over_time({m}[{r}])) unless group by ({by}, {replica_label}) (last_over_time({m}[5m]))");
            SignalQueries { value, per_replica: Some((replica_label.clone(), Reduction::Count)), ..plain(String::new()) }
        }
        SignalKind::ReplicasOver { above, replica_label, attribute_via, join_on, bits, name_by, .. } => {
            let replica_label = &replica(replica_label)?;
            if let Some(bad) = name_by.iter().find(|l| !crate::prom::is_label_name(l)) {
                return Err(format!("name_by {bad:?} is not a label name"));
            }
            let over = OverGauge { above: *above, bits, name_by };
            let value = replicas_over_query(&over, replica_label, !attribute_via.is_empty(), join_on, resolved, ctx);
            SignalQueries { value, per_replica: Some((replica_label.clone(), Reduction::Count)), ..plain(String::new()) }
        }
    })
}

/// A gauge signal's PromQL: each series reduced over the window (its bits decoded, divided by
/// another gauge, scaled), then across the scope, joined to it through an anchor gauge where the
/// series lack the grouping labels (exporters: DCGM).
fn gauge_query(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
    let SignalKind::Gauge { over_time, across, r#match, attribute_via, join_on, attribute_before, less, bits, over, scale, .. } = kind else {
        return Err("not a gauge".into());
    };
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    let parse = |m: &str| parse_match(m).map_err(|e| e.to_string());
    let extra = parse(r#match)?;
    let (ot, ac) = (over_time_fn(*over_time), across_fn(*across));
    let over_name = over.as_ref().map(|_| resolved.names[1].as_str());
    if attribute_via.is_empty() {
        let whole = format!("{ac} by ({by}) ({})", scaled(reduced_gauge(ot, &sel.series(&resolved.names[0], &extra), bits, over_name.map(|o| sel.series(o, &extra)), ctx), *scale));
        match less {
            None => Ok(whole),
            // Where the other gauge has no series for a scope, `or` takes 0 off.
            Some(l) => {
                let part = format!("{ac} by ({by}) ({ot}({}[{r}]))", sel.series(&l.gauge, &parse(&l.r#match)?));
                Ok(format!("{whole} - ({part} or {whole} * 0)"))
            }
        }
    } else {
        let own = sel.without(&ctx.group_by);
        let (j, left, anchor_by) = join_labels(join_on, &ctx.group_by);
        let anchor_range = if *attribute_before { promql_duration(ctx.range * 2) } else { r.clone() };
        let anchor = resolved.names.last().map(String::as_str).unwrap_or_default();
        Ok(format!(
            "{ac} by ({by}) ({} * on ({j}) group_left ({left}) group by ({anchor_by}) (last_over_time({}[{anchor_range}])))",
            scaled(reduced_gauge(ot, &own.series(&resolved.names[0], &extra), bits, over_name.map(|o| own.series(o, &extra)), ctx), *scale),
            sel.series(anchor, &[])
        ))
    }
}

/// The step a subquery over the window is read at: the trends' step (a thirtieth of the range,
/// 15 s at least).
fn subquery_step(ctx: &QueryContext) -> u64 {
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

/// One gauge's series reduced over the window, series by series: `over_time(series[range])`; a
/// bitmask's bits first (through a subquery at the trends' step), or divided by another gauge of
/// the same labels (`over`).
fn reduced_gauge(ot: &str, series: &str, bits: &[u32], over: Option<String>, ctx: &QueryContext) -> String {
    let r = promql_duration(ctx.range);
    let own = if bits.is_empty() {
        format!("{ot}({series}[{r}])")
    } else {
        format!("{ot}(({})[{r}:{}s])", bits_set(series, bits), subquery_step(ctx))
    };
    match over {
        None => own,
        Some(o) => format!("({own} / {ot}({o}[{r}]))"),
    }
}

/// A reduced series multiplied by `scale`, where there is one.
fn scaled(reduced: String, scale: Option<f64>) -> String {
    match scale {
        None => reduced,
        Some(k) => format!("({reduced} * {k})"),
    }
}

/// The worst replica's share of the window holding requests (running or waiting) while generating
/// fewer than `below` tokens per second, at the trends' step.
fn stall_share_query(below: f64, replica_label: &str, resolved: &Resolved, ctx: &QueryContext) -> String {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    let step = (ctx.range.as_secs() / 30).max(15);
    let inner = (step * 2).max(60);
    let per = if ctx.group_by.iter().any(|l| l == replica_label) { by.clone() } else { format!("{by}, {replica_label}") };
    let gauge = |n: &str| format!("sum by ({per}) (max_over_time({}[{step}s]))", sel.series(n, &[]));
    format!(
        "max by ({by}) (avg_over_time(((sum by ({per}) (rate({}[{inner}s])) < bool {below}) * ({} + {} >= bool 1))[{r}:{step}s]))",
        sel.series(&resolved.names[0], &[]),
        gauge(&resolved.names[1]),
        gauge(&resolved.names[2])
    )
}


/// The burn rate of an SLO "`objective` of requests under `target`": the share of observations over
/// the target (the buckets at or under it over the `+Inf` bucket), as a multiple of the error
/// budget. A target between two bucket bounds is interpolated linearly between them.
pub(super) fn slo_burn_query(target: &str, objective: &str, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    let t = quantity(target, &ctx.thresholds)?;
    let o = quantity(objective, &ctx.thresholds)?;
    if !(0.0..1.0).contains(&o) {
        return Err(format!("objective {o} must be between 0 and 1"));
    }
    let fam = family_of(&resolved.names[0]);
    let bucket = format!("{fam}_bucket");
    let budget = crate::units::sig(1.0 - o);
    let at = |b: &Bound| {
        let le = match b.written.as_slice() {
            [one] => Matcher { name: "le".into(), op: MatchOp::Eq, value: one.clone() },
            many => Matcher {
                name: "le".into(),
                op: MatchOp::Re,
                value: many.iter().map(|w| crate::prom::escape_regex_literal(w)).collect::<Vec<_>>().join("|"),
            },
        };
        format!("sum by ({by}) (rate({}[{r}]))", sel.series(&bucket, &[le]))
    };
    // The rate of observations at or under the target.
    let good = match ctx.buckets.get(&resolved.names[0]) {
        None => format!(
            "sum by ({by}) (rate({}[{r}]))",
            sel.series(&bucket, &[Matcher { name: "le".into(), op: MatchOp::Re, value: le_regex(t) }])
        ),
        Some(bounds) => match bucket_at(bounds, t).map_err(|e| format!("{fam}: {e}"))? {
            AtTarget::Exact(b) => at(b),
            AtTarget::Between(lo, hi) => {
                let f = (t - lo.value) / (hi.value - lo.value);
                format!("({} * {} + {} * {})", at(lo), weight(1.0 - f), at(hi), weight(f))
            }
        },
    };
    // Every observation is in the +Inf bucket: the total is read from the same family as the good
    // share (as the quantiles' observation counts are), so one family is all a burn rate needs.
    let all = Matcher { name: "le".into(), op: MatchOp::Eq, value: "+Inf".into() };
    Ok(format!("(1 - {good} / sum by ({by}) (rate({}[{r}]))) / {budget}", sel.series(&bucket, &[all])))
}

/// What [`replicas_over_query`] counts: series over `above`, a bitmask's `bits` read first, the
/// series' own `name_by` labels carried to the finding.
pub(super) struct OverGauge<'a> {
    pub above: f64,
    pub bits: &'a [u32],
    pub name_by: &'a [String],
}

/// Replicas whose gauge went over `above` in the window, one series each. An `attributed` gauge
/// (an exporter's, without the model label) is joined to the scope through the anchor gauge; the
/// anchor's `instance` then replaces the exporter's own, so the finding can name the vLLM server
/// as well as the pod.
pub(super) fn replicas_over_query(g: &OverGauge, replica_label: &str, attributed: bool, join_on: &[String], resolved: &Resolved, ctx: &QueryContext) -> String {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    let above = g.above;
    let peak = |series: String| {
        if g.bits.is_empty() {
            format!("max_over_time({series}[{r}])")
        } else {
            format!("max_over_time(({})[{r}:{}s])", bits_set(&series, g.bits), subquery_step(ctx))
        }
    };
    let named: String = g.name_by.iter().filter(|l| *l != replica_label && !ctx.group_by.contains(l)).map(|l| format!(", {l}")).collect();
    if !attributed {
        format!("max by ({by}, {replica_label}{named}) ({}) > {above}", peak(sel.series(&resolved.names[0], &[])))
    } else {
        let own = sel.without(&ctx.group_by);
        let mut carry = ctx.group_by.clone();
        if replica_label != "instance" {
            carry.push("instance".into());
        }
        let (j, left, anchor_by) = join_labels(join_on, &carry);
        format!(
            "max by ({by}, {replica_label}{}{named}) ({} * on ({j}) group_left ({left}) group by ({anchor_by}) (last_over_time({}[{r}]))) > {above}",
            if replica_label == "instance" { "" } else { ", instance" },
            peak(own.series(&resolved.names[0], &[])),
            sel.series(&resolved.names[1], &[])
        )
    }
}

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
        let common: Vec<Matcher> = first
            .extra
            .iter()
            .filter(|m| m.op == MatchOp::Nre && passes_absent(m) && reads.iter().all(|r| r.extra.contains(m)))
            .cloned()
            .collect();
        let own = |r: &&SumRead| r.extra.iter().filter(|m| !common.contains(m)).cloned().collect::<Vec<Matcher>>();
        if reads.iter().any(|r| own(r).iter().any(|m| matches!(m.op, MatchOp::Re | MatchOp::Nre))) {
            return None;
        }
        // The grouping labels first, as every read writes them, then the others in name order
        // (not a common matcher's label, unless a read groups or filters on it otherwise).
        let others: BTreeSet<String> = reads
            .iter()
            .flat_map(|r| r.by.iter().cloned().chain(own(r).into_iter().map(|m| m.name)))
            .filter(|l| !group_by.contains(l))
            .collect();
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
            None => format!("sum by ({outer}) (rate({}[{r}]))", selector.series(&self.counter, extra)),
            Some((anchor, join)) => {
                let own = selector.without(group_by);
                let (j, g, anchor_by) = join_labels(join, group_by);
                // The counter's own labels the outer sum keeps (a status it is filtered on) stay
                // through the join.
                let inner: Vec<&str> = join.iter().chain(by.iter().filter(|l| !group_by.contains(l) && !join.contains(l))).map(String::as_str).collect();
                format!(
                    "sum by ({outer}) (sum by ({}) (rate({}[{r}])) * on ({j}) group_left ({g}) group by ({anchor_by}) (last_over_time({}[{r}])))",
                    inner.join(", "),
                    own.series(&self.counter, extra),
                    selector.series(anchor, &[])
                )
            }
        }
    }
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
/// The worst replica over (or minus) the median of the others. In PromQL the per-replica expression
/// is evaluated three times; explain fetches it once and reduces it (Reduction::Outlier).
fn replica_outlier(
    histogram: bool,
    quantile: f64,
    measure: OutlierMeasure,
    min_observations: u32,
    replica_label: &str,
    resolved: &Resolved,
    ctx: &QueryContext,
) -> SignalQueries {
    let (by, r, sel) = (ctx.group_by.join(", "), promql_duration(ctx.range), &ctx.selector);
    let per = if histogram {
        let fam = family_of(&resolved.names[0]);
        format!("histogram_quantile({quantile}, sum by (le, {by}, {replica_label}) (rate({}[{r}])))", sel.series(&format!("{fam}_bucket"), &[]))
    } else {
        format!("max by ({by}, {replica_label}) (avg_over_time({}[{r}]))", sel.series(&resolved.names[0], &[]))
    };
    let top = format!("topk by ({by}) (1, {per})");
    let op = match measure {
        OutlierMeasure::Ratio => "/",
        OutlierMeasure::Gap => "-",
    };
    let reading = OutlierReading { measure, min_observations, range_seconds: ctx.range.as_secs(), ranks: false };
    SignalQueries {
        value: format!("{top} {op} on ({by}) group_left quantile by ({by}) (0.5, {per} unless on ({by}, {replica_label}) {top})"),
        fetch: Some(per),
        count: None,
        per_replica: Some((replica_label.to_string(), Reduction::Outlier(reading))),
        parts: None,
        sums: Vec::new(),
    }
}

/// A gauge's data-parallel ranks compared inside each replica: per (scope, replica), the worst rank
/// over (or minus) the median of the replica's other ranks; the scope's value is the largest of
/// those. explain fetches the per-rank expression once and reduces it itself.
fn rank_outlier(measure: OutlierMeasure, replica_label: &str, resolved: &Resolved, ctx: &QueryContext) -> SignalQueries {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let per = format!(
        "max by ({by}, {replica_label}, {RANK_LABEL}) (avg_over_time({}[{r}]))",
        ctx.selector.series(&resolved.names[0], &[])
    );
    let top = format!("topk by ({by}, {replica_label}) (1, {per})");
    let op = match measure {
        OutlierMeasure::Ratio => "/",
        OutlierMeasure::Gap => "-",
    };
    let reading = OutlierReading { measure, min_observations: 0, range_seconds: ctx.range.as_secs(), ranks: true };
    SignalQueries {
        value: format!(
            "max by ({by}) ({top} {op} on ({by}, {replica_label}) group_left quantile by ({by}, {replica_label}) (0.5, {per} unless on ({by}, {replica_label}, {RANK_LABEL}) {top}))"
        ),
        fetch: Some(per),
        count: None,
        per_replica: Some((replica_label.to_string(), Reduction::Outlier(reading))),
        parts: None,
        sums: Vec::new(),
    }
}

fn join_labels(join_on: &[String], carry: &[String]) -> (String, String, String) {
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
    use promql_parser::parser::Expr;
    struct Names(BTreeSet<String>);
    impl promql_parser::util::ExprVisitor for Names {
        type Error = String;
        fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
            let vs = match e {
                Expr::VectorSelector(vs) => vs,
                Expr::MatrixSelector(ms) => &ms.vs,
                _ => return Ok(true),
            };
            self.0.extend(vs.name.clone());
            for m in vs.matchers.matchers.iter().filter(|m| m.name == "__name__") {
                self.0.extend(m.value.split('|').map(|n| n.replace('\\', "")));
            }
            Ok(true)
        }
    }
    let expr = promql_parser::parser::parse(query)?;
    let mut names = Names(BTreeSet::new());
    promql_parser::util::walk_expr(&mut names, &expr)?;
    Ok(names.0)
}
