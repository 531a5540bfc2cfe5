//! Signals: named measurements over a window (P95 TTFT, preemption rate, KV-cache peak, ...).
//!
//! Signals are declared in `rules/*.toml`; this module turns a declaration into PromQL. It is the only
//! place PromQL is written. A declaration names metric *families* with alternatives for different vLLM
//! versions; [`resolve`] picks, per window, the first alternative present in the data (also trying the
//! `vllm_` spelling that OpenTelemetry pipelines produce), so a fleet mid-upgrade still gets an answer.
//! Aggregation happens in PromQL (`sum by (model_name)`), so the number of queries and the size of the
//! answers do not grow with the number of replicas.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Deserialize;

use crate::selector::{MatchOp, Matcher, Selector};

/// How a signal is computed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SignalKind {
    /// `histogram_quantile(q, ...)` over a histogram family (name without `_bucket`).
    Quantile {
        quantile: f64,
        histogram: Vec<String>,
        #[serde(default = "default_min_observations")]
        min_observations: f64,
    },
    /// Per-second rate of a counter (names with `_total`), summed over the scope.
    Rate {
        counter: Vec<String>,
        #[serde(default)]
        r#match: String,
        #[serde(default)]
        attribute_via: Vec<String>,
    },
    /// Rate of one counter over another (a share: 5xx over all, aborted over finished).
    Ratio {
        numerator: CounterRef,
        denominator: CounterRef,
        /// For counters that lack the grouping label (http_requests_total): a vLLM gauge whose series
        /// map `instance`/`job` to the grouping label.
        #[serde(default)]
        attribute_via: Vec<String>,
    },
    /// Mean of a histogram (`_sum` over `_count`): e.g. mean prompt length.
    Mean { histogram: Vec<String> },
    /// A gauge reduced over time (`max`, `avg`, `min`, `last`) then across the scope's series.
    Gauge {
        gauge: Vec<String>,
        over_time: OverTime,
        across: Across,
    },
    /// The share of the window during which a counter was increasing (0..1): "sustained" preemptions.
    ActiveShare { counter: Vec<String> },
}

fn default_min_observations() -> f64 {
    20.0
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CounterRef {
    pub counter: Vec<String>,
    #[serde(default)]
    pub r#match: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OverTime {
    Max,
    Avg,
    Min,
    Last,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Across {
    Max,
    Sum,
    Avg,
    Min,
}

/// A signal as declared.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalDef {
    pub id: String,
    pub title: String,
    pub unit: String,
    pub description: String,
    pub kind: SignalKind,
    /// Where it was declared (`rules/signals.toml:12`), for errors.
    pub origin: String,
}

/// The metric families a signal needs, each as its list of alternatives (in preference order).
/// Names are series names as stored (`..._bucket` for histograms).
pub fn required_series(kind: &SignalKind) -> Vec<Vec<String>> {
    let hist = |h: &Vec<String>, suffix: &str| h.iter().map(|n| format!("{n}{suffix}")).collect::<Vec<_>>();
    match kind {
        SignalKind::Quantile { histogram, .. } => vec![hist(histogram, "_bucket")],
        SignalKind::Mean { histogram } => vec![hist(histogram, "_sum")],
        SignalKind::Rate { counter, attribute_via, .. } => {
            let mut v = vec![counter.clone()];
            if !attribute_via.is_empty() {
                v.push(attribute_via.clone());
            }
            v
        }
        SignalKind::Ratio { numerator, denominator, attribute_via } => {
            let mut v = vec![numerator.counter.clone()];
            if denominator.counter != numerator.counter {
                v.push(denominator.counter.clone());
            }
            if !attribute_via.is_empty() {
                v.push(attribute_via.clone());
            }
            v
        }
        SignalKind::Gauge { gauge, .. } => vec![gauge.clone()],
        SignalKind::ActiveShare { counter } => vec![counter.clone()],
    }
}

/// Every spelling a declared name may have in storage: as declared, with `vllm_` for `vllm:`
/// (OpenTelemetry pipelines), and counters without `_total`.
pub fn spellings(name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    if let Some(rest) = name.strip_prefix("vllm:") {
        out.push(format!("vllm_{rest}"));
    }
    for n in out.clone() {
        if let Some(stem) = n.strip_suffix("_total") {
            out.push(stem.to_string());
        }
    }
    out
}

/// Pick the first alternative (in any spelling) present in `present`.
pub fn pick<'a>(alternatives: &[String], present: &'a BTreeSet<String>) -> Option<&'a String> {
    alternatives.iter().flat_map(|a| spellings(a)).find_map(|s| present.get(&s))
}

/// The metric chosen for each required family, or the families that are missing.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// One chosen series name per entry of [`required_series`].
    pub names: Vec<String>,
}

/// Resolve a signal's families against the names present in one window.
pub fn resolve(kind: &SignalKind, present: &BTreeSet<String>) -> Result<Resolved, Vec<String>> {
    let mut names = Vec::new();
    let mut missing = Vec::new();
    for alts in required_series(kind) {
        match pick(&alts, present) {
            Some(n) => names.push(n.clone()),
            None => missing.push(alts.join(" / ")),
        }
    }
    if missing.is_empty() {
        Ok(Resolved { names })
    } else {
        Err(missing)
    }
}

/// Everything a query needs besides the signal itself.
#[derive(Debug, Clone)]
pub struct QueryContext {
    pub selector: Selector,
    pub group_by: Vec<String>,
    /// The window's length (the range of every `[...]`).
    pub range: Duration,
}

/// PromQL duration in whole seconds (exact and accepted everywhere).
pub fn promql_duration(d: Duration) -> String {
    format!("{}s", d.as_secs().max(1))
}

/// The stem of a stored histogram series name: `x_bucket` / `x_sum` -> `x`.
fn family_of(series: &str) -> &str {
    series
        .strip_suffix("_bucket")
        .or_else(|| series.strip_suffix("_sum"))
        .or_else(|| series.strip_suffix("_count"))
        .unwrap_or(series)
}

/// Parse a rule file's `match = 'finished_reason="abort"'` into matchers.
pub fn parse_match(m: &str) -> Result<Vec<Matcher>, crate::selector::SelectorError> {
    Ok(Selector::parse(m)?.matchers)
}

/// The queries behind one signal for one window: the value, and for quantiles the observation count.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalQueries {
    pub value: String,
    pub count: Option<String>,
}

/// Build the PromQL for a resolved signal. `extra` holds the parsed `match` strings of the declaration.
pub fn build(kind: &SignalKind, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    let sel = &ctx.selector;
    let parse = |m: &str| parse_match(m).map_err(|e| e.to_string());
    Ok(match kind {
        SignalKind::Quantile { quantile, .. } => {
            let fam = family_of(&resolved.names[0]);
            SignalQueries {
                value: format!(
                    "histogram_quantile({quantile}, sum by (le, {by}) (rate({}[{r}])))",
                    sel.series(&format!("{fam}_bucket"), &[])
                ),
                count: Some(format!(
                    "sum by ({by}) (increase({}[{r}]))",
                    sel.series(&format!("{fam}_count"), &[])
                )),
            }
        }
        SignalKind::Mean { .. } => {
            let fam = family_of(&resolved.names[0]);
            SignalQueries {
                value: format!(
                    "sum by ({by}) (rate({}[{r}])) / sum by ({by}) (rate({}[{r}]))",
                    sel.series(&format!("{fam}_sum"), &[]),
                    sel.series(&format!("{fam}_count"), &[])
                ),
                count: None,
            }
        }
        SignalKind::Rate { r#match, attribute_via, .. } => {
            let extra = parse(r#match)?;
            let anchor = (!attribute_via.is_empty()).then(|| resolved.names[1].as_str());
            SignalQueries { value: rate_expr(&resolved.names[0], &extra, anchor, ctx), count: None }
        }
        SignalKind::Ratio { numerator, denominator, attribute_via } => {
            let num_extra = parse(&numerator.r#match)?;
            let den_extra = parse(&denominator.r#match)?;
            let num_name = &resolved.names[0];
            let den_name = if denominator.counter != numerator.counter { &resolved.names[1] } else { num_name };
            let anchor = (!attribute_via.is_empty()).then(|| resolved.names.last().map(String::as_str)).flatten();
            let num = rate_expr(num_name, &num_extra, anchor, ctx);
            let den = rate_expr(den_name, &den_extra, anchor, ctx);
            // A share with no matching events is 0, not "no data": fall back to 0 x the denominator.
            SignalQueries { value: format!("({num} or {den} * 0) / {den}"), count: None }
        }
        SignalKind::Gauge { over_time, across, .. } => {
            let ot = match over_time {
                OverTime::Max => "max_over_time",
                OverTime::Avg => "avg_over_time",
                OverTime::Min => "min_over_time",
                OverTime::Last => "last_over_time",
            };
            let ac = match across {
                Across::Max => "max",
                Across::Sum => "sum",
                Across::Avg => "avg",
                Across::Min => "min",
            };
            SignalQueries {
                value: format!("{ac} by ({by}) ({ot}({}[{r}]))", sel.series(&resolved.names[0], &[])),
                count: None,
            }
        }
        SignalKind::ActiveShare { .. } => {
            let step = (ctx.range.as_secs() / 30).max(15);
            let inner = (step * 2).max(120);
            SignalQueries {
                value: format!(
                    "avg_over_time((sum by ({by}) (rate({}[{inner}s])) > bool 0)[{r}:{step}s])",
                    sel.series(&resolved.names[0], &[])
                ),
                count: None,
            }
        }
    })
}

/// `sum by (G) (rate(C{sel,extra}[R]))`; for counters without the grouping label, joined through the
/// anchor gauge on `instance` and `job`. Matchers on the grouping labels go to the anchor side only.
fn rate_expr(counter: &str, extra: &[Matcher], anchor: Option<&str>, ctx: &QueryContext) -> String {
    let by = ctx.group_by.join(", ");
    let r = promql_duration(ctx.range);
    match anchor {
        None => format!("sum by ({by}) (rate({}[{r}]))", ctx.selector.series(counter, extra)),
        Some(anchor) => {
            let own = ctx.selector.without(&ctx.group_by);
            format!(
                "sum by ({by}) (sum by (instance, job) (rate({}[{r}])) * on (instance, job) group_left ({by}) group by (instance, job, {by}) (last_over_time({}[{r}])))",
                own.series(counter, extra),
                ctx.selector.series(anchor, &[])
            )
        }
    }
}

/// The discovery selector: every vLLM series name plus the HTTP layer's, under the user's selector.
pub fn discovery_matcher(selector: &Selector, extra_names: &[String]) -> String {
    let mut names = vec!["vllm[:_].+".to_string()];
    names.extend(extra_names.iter().map(|n| crate::selector::escape_regex_literal(n)));
    let mut m = vec![Matcher { name: "__name__".into(), op: MatchOp::Re, value: names.join("|") }];
    m.extend(selector.matchers.iter().cloned());
    format!("{{{}}}", m.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(sel: &str) -> QueryContext {
        QueryContext {
            selector: Selector::parse(sel).unwrap(),
            group_by: vec!["model_name".into()],
            range: Duration::from_secs(1800),
        }
    }

    fn present(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn picks_the_first_alternative_present_in_any_spelling() {
        let alts = vec!["vllm:kv_cache_usage_perc".to_string(), "vllm:gpu_cache_usage_perc".to_string()];
        assert_eq!(pick(&alts, &present(&["vllm:gpu_cache_usage_perc"])).unwrap(), "vllm:gpu_cache_usage_perc");
        assert_eq!(
            pick(&alts, &present(&["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"])).unwrap(),
            "vllm:kv_cache_usage_perc"
        );
        assert_eq!(pick(&alts, &present(&["vllm_kv_cache_usage_perc"])).unwrap(), "vllm_kv_cache_usage_perc");
        assert!(pick(&alts, &present(&["vllm:num_requests_running"])).is_none());
    }

    #[test]
    fn counters_may_be_stored_without_total() {
        assert!(spellings("vllm:num_preemptions_total").contains(&"vllm_num_preemptions".to_string()));
    }

    #[test]
    fn quantile_query_aggregates_by_scope_and_keeps_the_selector() {
        let k = SignalKind::Quantile {
            quantile: 0.95,
            histogram: vec!["vllm:time_to_first_token_seconds".into()],
            min_observations: 20.0,
        };
        let r = resolve(&k, &present(&["vllm:time_to_first_token_seconds_bucket"])).unwrap();
        let q = build(&k, &r, &ctx(r#"job="vllm""#)).unwrap();
        assert_eq!(
            q.value,
            r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket{job="vllm"}[1800s])))"#
        );
        assert_eq!(
            q.count.unwrap(),
            r#"sum by (model_name) (increase(vllm:time_to_first_token_seconds_count{job="vllm"}[1800s]))"#
        );
    }

    #[test]
    fn ratio_of_a_labelled_subset_defaults_to_zero() {
        let k = SignalKind::Ratio {
            numerator: CounterRef { counter: vec!["vllm:request_success_total".into()], r#match: r#"finished_reason="abort""#.into() },
            denominator: CounterRef { counter: vec!["vllm:request_success_total".into()], r#match: String::new() },
            attribute_via: vec![],
        };
        let r = resolve(&k, &present(&["vllm:request_success_total"])).unwrap();
        let q = build(&k, &r, &ctx("")).unwrap();
        assert_eq!(
            q.value,
            r#"(sum by (model_name) (rate(vllm:request_success_total{finished_reason="abort"}[1800s])) or sum by (model_name) (rate(vllm:request_success_total[1800s])) * 0) / sum by (model_name) (rate(vllm:request_success_total[1800s]))"#
        );
    }

    #[test]
    fn http_counters_are_attributed_through_the_anchor_gauge() {
        let k = SignalKind::Ratio {
            numerator: CounterRef { counter: vec!["http_requests_total".into()], r#match: r#"status="5xx""#.into() },
            denominator: CounterRef { counter: vec!["http_requests_total".into()], r#match: String::new() },
            attribute_via: vec!["vllm:num_requests_running".into()],
        };
        let r = resolve(&k, &present(&["http_requests_total", "vllm:num_requests_running"])).unwrap();
        let q = build(&k, &r, &ctx(r#"model_name="m",job="vllm""#)).unwrap();
        // The model matcher applies to the anchor only: http_requests_total has no model_name.
        assert!(q.value.contains(r#"rate(http_requests_total{job="vllm",status="5xx"}[1800s])"#), "{}", q.value);
        assert!(q.value.contains(r#"last_over_time(vllm:num_requests_running{model_name="m",job="vllm"}[1800s])"#));
    }

    #[test]
    fn missing_families_are_named() {
        let k = SignalKind::Gauge {
            gauge: vec!["vllm:kv_cache_usage_perc".into(), "vllm:gpu_cache_usage_perc".into()],
            over_time: OverTime::Max,
            across: Across::Max,
        };
        let err = resolve(&k, &present(&[])).unwrap_err();
        assert_eq!(err, vec!["vllm:kv_cache_usage_perc / vllm:gpu_cache_usage_perc".to_string()]);
    }

    #[test]
    fn active_share_uses_a_subquery_over_the_window() {
        let k = SignalKind::ActiveShare { counter: vec!["vllm:num_preemptions_total".into()] };
        let r = resolve(&k, &present(&["vllm:num_preemptions_total"])).unwrap();
        let q = build(&k, &r, &ctx("")).unwrap();
        assert_eq!(
            q.value,
            "avg_over_time((sum by (model_name) (rate(vllm:num_preemptions_total[120s])) > bool 0)[1800s:60s])"
        );
    }

    #[test]
    fn discovery_matches_vllm_names_and_extras_under_the_selector() {
        let m = discovery_matcher(&Selector::parse(r#"job="vllm""#).unwrap(), &["http_requests_total".into()]);
        assert_eq!(m, r#"{__name__=~"vllm[:_].+|http_requests_total",job="vllm"}"#);
    }
}
