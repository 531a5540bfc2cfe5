//! `router`: a router's family, attributed to the models its workers serve.

use super::*;

/// A router's family, attributed to the models its workers serve. vllm-router's series carry
/// no model label: a worker-level family names the worker by its URL (`worker_label`,
/// `http://host:port`), joined to the engines' `instance` (`engines`, a vLLM gauge) through its
/// host:port; a router-level family (no `worker_label`) goes to every model the router's workers
/// (`workers`, a worker-level gauge every router exports) serve. See `Router::query`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Router {
    pub measure: RouterMeasure,
    pub family: Vec<String>,
    /// The denominator's family of a `ratio` (router-level).
    #[serde(default)]
    pub denominator: Vec<String>,
    /// Matchers on `family` (`outcome="failure"`).
    #[serde(default)]
    pub r#match: String,
    #[serde(default)]
    pub worker_label: String,
    /// The value `held_out` counts (`vllm_router_cb_state` 1: open; `vllm_router_worker_health` 0).
    #[serde(default)]
    pub equals: f64,
    #[serde(default = "default_router_workers")]
    pub workers: Vec<String>,
    #[serde(default = "default_router_engines")]
    pub engines: Vec<String>,
}

/// What a [`Router`] signal reads of its family, per model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterMeasure {
    /// A router-level histogram's mean (`_sum` over `_count`).
    Mean,
    /// A router-level histogram's mean over the mean of an engine histogram (`denominator`) for
    /// the same scope: how the router's time per request compares with the engines' own.
    OverEngineMean,
    /// A router-level counter's rate over `denominator`'s (0 where the counter has no series).
    Ratio,
    /// A worker-level counter's rate, summed over the model's workers.
    Rate,
    /// A worker-level counter's busiest worker over the mean of the model's workers.
    Spread,
    /// An engine gauge (`engines`) summed per engine instance, averaged over the instances a
    /// worker-level family lists as its workers in the window (the prefill pool: the workers of
    /// `vllm_router_pd_prefill_requests_total`). A pool none of whose workers is an engine that
    /// reported has no value.
    PoolMean,
    /// The largest share of the window one of the model's workers read `equals` (a circuit held
    /// open, a worker marked unhealthy), read at the trends' step; only workers whose engine
    /// reported in the window count (an engine that is down is `target-down`'s).
    HeldOut,
}

fn default_router_workers() -> Vec<String> {
    vec!["vllm_router_worker_health".to_string()]
}

fn default_router_engines() -> Vec<String> {
    vec!["vllm:num_requests_running".to_string()]
}

impl Kind for Router {
    fn validate(&self) -> Result<(), String> {
        use RouterMeasure as M;
        let Router { measure, family, denominator, r#match, worker_label, equals, workers, engines } = self;
        check_match(r#match, "match")?;
        let worker_level = matches!(measure, M::Rate | M::Spread | M::HeldOut | M::PoolMean);
        if worker_level == worker_label.is_empty() {
            return Err("a router signal's rate, spread, held_out and pool_mean read a worker-level family (`worker_label`); its mean, ratio and over_engine_mean a router-level one (none)".into());
        }
        if !worker_label.is_empty() && !crate::prom::is_label_name(worker_label) {
            return Err(format!("worker_label {worker_label:?} is not a label name"));
        }
        if matches!(measure, M::Ratio | M::OverEngineMean) == denominator.is_empty() {
            return Err("`denominator` goes with the ratio and over_engine_mean measures, and only with them".into());
        }
        if !equals.is_finite() {
            return Err("`equals` must be a number".into());
        }
        nonempty(family, "family")?;
        nonempty(workers, "workers")?;
        nonempty(engines, "engines")
    }

    fn required_series(&self) -> Vec<Vec<String>> {
        let Router { measure, family, denominator, worker_label, workers, engines, .. } = self;
        // A ratio needs only its denominator: vLLM's router creates a counter's series at its
        // first event (no retry yet: no `vllm_router_retries_total`), which reads as 0.
        let mut v = vec![match measure {
            RouterMeasure::Mean | RouterMeasure::OverEngineMean => hist(family, "_sum"),
            RouterMeasure::Ratio => denominator.clone(),
            _ => family.clone(),
        }];
        // The engines' histogram an `over_engine_mean` divides by, before the workers and
        // engines (Router::query reads those from the end).
        if *measure == RouterMeasure::OverEngineMean {
            v.push(hist(denominator, "_sum"));
        }
        if worker_label.is_empty() {
            v.push(workers.clone());
        }
        v.push(engines.clone());
        v
    }

    fn queries(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<SignalQueries, String> {
        let per = self.query(resolved, ctx)?;
        if self.measure != RouterMeasure::HeldOut {
            return Ok(plain(per));
        }
        // Read per engine instance, so that the finding names the worker held out.
        let by = ctx.group_by.join(", ");
        Ok(SignalQueries {
            value: format!("max by ({by}) ({per})"),
            fetch: Some(per),
            per_replica: Some(("instance".to_string(), Reduction::Max)),
            ..plain(String::new())
        })
    }
}

/// A worker's URL as vLLM's router writes it (`http://10.0.0.7:8000`, `grpc://...`): its host:port,
/// which is the engine target's `instance`.
const WORKER_URL: &str = "[a-z+]+://([^/]+).*";

impl Router {
    /// The signal's PromQL. The router's own `instance` and `job` are kept as `router_instance`
    /// and `router_job`, and a worker-level series' `instance` becomes its worker's host:port,
    /// then joins the engines' `instance` to take their grouping labels (`engines` read over the
    /// range: an engine that reported in it). A router-level series goes to every scope its
    /// router's workers serve (`workers` joined the same way), all of it to each: a router in
    /// front of two models times both.
    fn query(&self, resolved: &Resolved, ctx: &QueryContext) -> Result<String, String> {
        let Router { measure, r#match, worker_label, equals, family, .. } = self;
        let (by, r) = (ctx.group_by.join(", "), promql_duration(ctx.range));
        let own = ctx.selector.without(&ctx.group_by);
        let extra = matchers(r#match)?;
        let engines = resolved.names.last().ok_or("no engine gauge")?;
        // `instance` is the join's: not also in group_left when the run groups by it.
        let (_, left, engine_by) = join_labels(&["instance".to_string()], &ctx.group_by);
        let engine_map = format!("group by ({engine_by}) (last_over_time({}[{r}]))", ctx.selector.series(engines, &[]));
        let as_router = |x: String| {
            format!("label_replace(label_replace({x}, \"router_instance\", \"$1\", \"instance\", \"(.*)\"), \"router_job\", \"$1\", \"job\", \"(.*)\")")
        };
        let as_engine = |x: String, label: &str| format!("label_replace({x}, \"instance\", \"$1\", \"{label}\", \"{WORKER_URL}\")");
        // Per engine instance, with the scope's labels: `reduce` over the worker-level series `x`.
        let per_engine = |x: String, reduce: &str| {
            format!(
                "{reduce} by ({engine_by}) ({reduce} by (instance) ({}) * on (instance) group_left ({left}) {engine_map})",
                as_engine(as_router(x), worker_label)
            )
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
                let num = per_router(counter_rate(&own.series(family.first().ok_or("no family")?, &extra), ctx.range));
                let den = per_router(counter_rate(&own.series(name, &[]), ctx.range));
                format!("({num} or {den} * 0) / {den}")
            }
            RouterMeasure::Rate => format!("sum by ({by}) ({})", per_engine(counter_rate(&own.series(name, &extra), ctx.range), "sum")),
            RouterMeasure::Spread => {
                // No value where the family did not move at all: vllm-router 0.1.17 stops counting
                // its processed requests and policy decisions while one worker is healthy (its
                // requests and circuit-breaker outcomes keep counting), which is not "no traffic".
                let per = per_engine(counter_rate(&own.series(name, &extra), ctx.range), "sum");
                format!("max by ({by}) ({per}) / (avg by ({by}) ({per}) > 0)")
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
}
