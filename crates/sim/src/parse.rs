//! Reading a scenario file: the TOML as written, and the checks that turn it into a
//! [`ScenarioSpec`] or say which field is wrong and why.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::{
    events, Expectation, IncidentKind, IncidentSpec, KvConnector, MetricsGeneration, ModelSpec, Onset, RealGpu, RouterKind, ScenarioError, ScenarioSpec,
    BINDING_LIMITS, CUSTOM_BUCKET_FAMILIES, HOPS, REPLICA_CAUSES, ROUTER_POLICIES, TRUE_KINDS,
};

/// Largest number of samples per series a scenario may ask for (a week at 30 s).
const MAX_STEPS: u64 = 20_160;
const MAX_REPLICAS: u32 = 64;
const MAX_RATE: f64 = 500.0;
const MAX_NUM_SEQS: u32 = 4096;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    seed: u64,
    start: String,
    interval: String,
    #[serde(default)]
    warmup: Option<String>,
    baseline: String,
    window: String,
    #[serde(default)]
    metrics: MetricsGeneration,
    #[serde(default = "yes")]
    histograms: bool,
    #[serde(default)]
    drop: Vec<String>,
    #[serde(default = "yes")]
    counts_aborts: bool,
    #[serde(default)]
    model: Vec<RawModel>,
    #[serde(default)]
    incident: Option<RawIncident>,
    #[serde(default)]
    event: Vec<events::RawEvent>,
    #[serde(default)]
    expect: Option<RawExpect>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: String,
    replicas: u32,
    rate: f64,
    #[serde(default)]
    max_model_len: Option<u32>,
    #[serde(default)]
    max_num_seqs: Option<u32>,
    #[serde(default)]
    max_num_seqs_per_replica: Option<Vec<u32>>,
    #[serde(default)]
    weights: Option<Vec<f64>>,
    #[serde(default)]
    spec_decode: bool,
    #[serde(default)]
    preemption_detail: bool,
    #[serde(default)]
    waiting_by_reason: bool,
    #[serde(default)]
    dp_ranks: Option<u32>,
    #[serde(default)]
    kv_connector: Option<KvConnector>,
    #[serde(default)]
    dcgm: bool,
    #[serde(default)]
    gpu: Option<RealGpu>,
    #[serde(default)]
    custom_buckets: std::collections::BTreeMap<String, Vec<f64>>,
    #[serde(default)]
    router: Option<RouterKind>,
    #[serde(default)]
    router_policy: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIncident {
    kind: IncidentKind,
    model: String,
    #[serde(default)]
    replica: Option<u32>,
    #[serde(default)]
    onset: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default)]
    first: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    replica: Option<String>,
    #[serde(default)]
    absent: Vec<String>,
    #[serde(default)]
    healthy: bool,
    #[serde(default)]
    stood_in: bool,
    #[serde(default)]
    exit: Option<i32>,
    #[serde(default)]
    caused_by: Option<String>,
    #[serde(default)]
    no_cause: bool,
    #[serde(default)]
    binding: Option<String>,
    #[serde(default)]
    cold_start: bool,
    #[serde(default)]
    replica_cause: Option<String>,
    #[serde(default)]
    unexplained: Vec<String>,
    #[serde(default)]
    grew: Option<String>,
}

fn yes() -> bool {
    true
}

impl ScenarioSpec {
    /// Parse and validate a scenario from TOML text.
    pub fn from_toml_str(text: &str) -> Result<ScenarioSpec, ScenarioError> {
        Self::parse(text, "<text>")
    }

    /// Read, parse and validate a scenario file.
    pub fn load(path: impl AsRef<Path>) -> Result<ScenarioSpec, ScenarioError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
        Self::parse(&text, &path.display().to_string())
    }

    fn parse(text: &str, origin: &str) -> Result<ScenarioSpec, ScenarioError> {
        let raw: RawSpec = toml::from_str(text).map_err(|e| ScenarioError::Syntax { origin: origin.to_string(), message: e.to_string() })?;
        let invalid = |field: &str, message: String| ScenarioError::Invalid { origin: origin.to_string(), field: field.to_string(), message };

        if raw.name.trim().is_empty() {
            return Err(invalid("name", "must not be empty".into()));
        }
        let start = DateTime::parse_from_rfc3339(raw.start.trim())
            .map_err(|e| invalid("start", format!("{:?} is not an RFC 3339 time ({e})", raw.start)))?
            .with_timezone(&Utc);
        if start.timestamp() <= 0 || start.timestamp() > 32_503_680_000 {
            return Err(invalid("start", "must lie between 1970 and 3000".into()));
        }
        let duration = |field: &str, text: &str| -> Result<Duration, ScenarioError> {
            let d = humantime::parse_duration(text.trim()).map_err(|e| invalid(field, format!("{text:?} is not a duration like \"30s\" or \"20m\" ({e})")))?;
            if d.subsec_nanos() % 1_000_000 != 0 {
                return Err(invalid(field, "must be a whole number of milliseconds".into()));
            }
            Ok(d)
        };
        let interval = duration("interval", &raw.interval)?;
        let warmup = match &raw.warmup {
            Some(w) => duration("warmup", w)?,
            None => Duration::ZERO,
        };
        let baseline = duration("baseline", &raw.baseline)?;
        let window = duration("window", &raw.window)?;
        if interval < Duration::from_secs(1) {
            return Err(invalid("interval", "must be at least 1s".into()));
        }
        let ms = |d: Duration| d.as_millis() as u64;
        for (field, d) in [("warmup", warmup), ("baseline", baseline), ("window", window)] {
            if ms(d) % ms(interval) != 0 {
                return Err(invalid(field, format!("must be a whole number of intervals ({})", raw.interval)));
            }
        }
        if baseline.is_zero() || window.is_zero() {
            return Err(invalid("window", "baseline and window must both be longer than zero".into()));
        }
        let steps = (ms(warmup) + ms(baseline) + ms(window)) / ms(interval);
        if steps > MAX_STEPS {
            return Err(invalid("window", format!("{steps} samples per series; at most {MAX_STEPS} are allowed")));
        }

        if raw.model.is_empty() {
            return Err(invalid("model", "at least one [[model]] is needed".into()));
        }
        let mut models: Vec<ModelSpec> = Vec::with_capacity(raw.model.len());
        for (i, m) in raw.model.into_iter().enumerate() {
            let field = format!("model[{i}]");
            if m.name.trim().is_empty() {
                return Err(invalid(&field, "name must not be empty".into()));
            }
            if models.iter().any(|o| o.name == m.name) {
                return Err(invalid(&field, format!("model {:?} appears twice", m.name)));
            }
            if m.replicas == 0 || m.replicas > MAX_REPLICAS {
                return Err(invalid(&field, format!("replicas must be between 1 and {MAX_REPLICAS}")));
            }
            if !(m.rate.is_finite() && m.rate > 0.0 && m.rate <= MAX_RATE) {
                return Err(invalid(&field, format!("rate must be above 0 and at most {MAX_RATE} requests per second")));
            }
            let max_model_len = m.max_model_len.unwrap_or(32_768);
            if !(1_000..=10_000_000).contains(&max_model_len) {
                return Err(invalid(&field, "max_model_len must be between 1000 and 10000000".into()));
            }
            let max_num_seqs = m.max_num_seqs.unwrap_or(64);
            if !(1..=MAX_NUM_SEQS).contains(&max_num_seqs) {
                return Err(invalid(&field, format!("max_num_seqs must be between 1 and {MAX_NUM_SEQS}")));
            }
            let per_replica = m.max_num_seqs_per_replica.unwrap_or_default();
            if !per_replica.is_empty() {
                if per_replica.len() != m.replicas as usize {
                    return Err(invalid(&field, format!("max_num_seqs_per_replica has {} values; give one per replica ({})", per_replica.len(), m.replicas)));
                }
                if per_replica.iter().any(|c| !(1..=MAX_NUM_SEQS).contains(c)) {
                    return Err(invalid(&field, format!("max_num_seqs_per_replica: each cap must be between 1 and {MAX_NUM_SEQS}")));
                }
            }
            let weights = m.weights.unwrap_or_default();
            if !weights.is_empty() {
                if weights.len() != m.replicas as usize {
                    return Err(invalid(&field, format!("weights has {} values; give one per replica ({})", weights.len(), m.replicas)));
                }
                if weights.iter().any(|w| !(w.is_finite() && *w > 0.0 && *w <= 1e6)) {
                    return Err(invalid(&field, "weights must be positive numbers (at most 1000000)".into()));
                }
            }
            let spec_model = ModelSpec::new(&m.name, m.replicas, m.rate);
            let busiest = ModelSpec { weights: weights.clone(), ..spec_model }.arrival_shares().into_iter().enumerate().fold((0, 0.0), |best, (i, share)| {
                if share > best.1 {
                    (i, share)
                } else {
                    best
                }
            });
            if m.rate * busiest.1 > MAX_RATE {
                return Err(invalid(
                    &field,
                    format!("weights send {:.0} requests per second to replica {}; at most {MAX_RATE} per replica", m.rate * busiest.1, busiest.0),
                ));
            }
            let dp_ranks = m.dp_ranks.unwrap_or(1);
            if !(1..=8).contains(&dp_ranks) {
                return Err(invalid(&field, format!("dp_ranks = {dp_ranks}: give 1 to 8 ranks per server")));
            }
            if raw.metrics == MetricsGeneration::V0 && (m.spec_decode || m.kv_connector.is_some() || m.preemption_detail || m.waiting_by_reason || dp_ranks > 1)
            {
                return Err(invalid(
                    &field,
                    "spec_decode, kv_connector, preemption_detail, waiting_by_reason and dp_ranks are generated with V1 names only; use metrics = \"v1\""
                        .into(),
                ));
            }
            for (family, bounds) in &m.custom_buckets {
                if !CUSTOM_BUCKET_FAMILIES.contains(&family.as_str()) {
                    return Err(invalid(&field, format!("custom_buckets: unknown family {family:?}; use one of {CUSTOM_BUCKET_FAMILIES:?}")));
                }
                if bounds.is_empty() || bounds.iter().any(|b| !(b.is_finite() && *b > 0.0)) || bounds.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(invalid(&field, format!("custom_buckets.{family}: give positive bounds in ascending order")));
                }
            }
            let router_policy = m.router_policy.unwrap_or_else(|| "round_robin".to_string());
            if !ROUTER_POLICIES.contains(&router_policy.as_str()) {
                return Err(invalid(&field, format!("router_policy {router_policy:?} is not one of vllm-router's policies ({})", ROUTER_POLICIES.join(", "))));
            }
            models.push(ModelSpec {
                name: m.name,
                replicas: m.replicas,
                rate: m.rate,
                max_model_len,
                max_num_seqs,
                max_num_seqs_per_replica: per_replica,
                weights,
                spec_decode: m.spec_decode,
                preemption_detail: m.preemption_detail,
                waiting_by_reason: m.waiting_by_reason,
                dp_ranks,
                kv_connector: m.kv_connector,
                dcgm: m.dcgm || m.gpu.is_some(),
                gpu: m.gpu,
                custom_buckets: m.custom_buckets,
                router: m.router,
                router_policy,
            });
        }

        let total = warmup + baseline + window;
        let incident = match raw.incident {
            None => None,
            Some(inc) => {
                let Some(model) = models.iter().find(|m| m.name == inc.model) else {
                    let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
                    return Err(invalid("incident.model", format!("{:?} is not one of the models ({})", inc.model, names.join(", "))));
                };
                let kind = inc.kind;
                let needs = kind.needs();
                let lacks = |what: &str| invalid("incident.kind", format!("{kind} needs {what} on model {:?}; add it to that [[model]]", model.name));
                if needs.v1 && !raw.metrics.is_v1() {
                    return Err(invalid("incident.kind", format!("{kind} moves metrics that only V1 exports; use metrics = \"v1\" or \"v1-otel\"")));
                }
                if needs.spec_decode && !model.spec_decode {
                    return Err(lacks("spec_decode = true"));
                }
                if needs.nixl && model.kv_connector != Some(KvConnector::Nixl) {
                    return Err(lacks("kv_connector = \"nixl\""));
                }
                if needs.external_cache && model.kv_connector != Some(KvConnector::Lmcache) {
                    return Err(lacks("kv_connector = \"lmcache\""));
                }
                if needs.dcgm && !model.dcgm {
                    return Err(lacks("dcgm = true"));
                }
                if needs.waiting_by_reason && !model.waiting_by_reason {
                    return Err(lacks("waiting_by_reason = true"));
                }
                if needs.data_parallel && model.dp_ranks < 2 {
                    return Err(lacks("dp_ranks = 2 or more"));
                }
                if needs.router && model.router.is_none() {
                    return Err(lacks("router = \"vllm-router\""));
                }
                if needs.cache_aware && (model.router != Some(RouterKind::VllmRouter) || model.router_policy != "cache_aware") {
                    return Err(lacks("router = \"vllm-router\" and router_policy = \"cache_aware\""));
                }
                if needs.router_pd && model.router != Some(RouterKind::VllmRouterPd) {
                    return Err(lacks("router = \"vllm-router-pd\""));
                }
                if needs.real_gpu && model.gpu.is_none() {
                    return Err(lacks("gpu = \"h200\" (its story is the real board's power cap and clocks)"));
                }
                if model.replicas < needs.min_replicas {
                    return Err(invalid(
                        "incident.kind",
                        format!(
                            "{kind} compares a replica with its peers and needs at least {} replicas; {:?} has {}",
                            needs.min_replicas, model.name, model.replicas
                        ),
                    ));
                }
                let replica = match inc.replica {
                    None => 0,
                    Some(_) if !needs.uses_replica => {
                        return Err(invalid("incident.replica", format!("{kind} affects every replica of the model; remove replica")));
                    }
                    Some(r) if r >= model.replicas => {
                        return Err(invalid(
                            "incident.replica",
                            format!("{r} is not a replica index of {:?} (0 to {})", model.name, model.replicas.saturating_sub(1)),
                        ));
                    }
                    Some(r) => r,
                };
                let onset_before_end = match &inc.onset {
                    None => None,
                    Some(text) => {
                        let Some(rest) = text.trim().strip_prefix('-') else {
                            return Err(invalid("incident.onset", format!("{text:?} must be negative, relative to the window's end, like \"-60m\"")));
                        };
                        let d = duration("incident.onset", rest)?;
                        if d.is_zero() || ms(d) % ms(interval) != 0 {
                            return Err(invalid("incident.onset", format!("must be a whole number of intervals ({}) above zero", raw.interval)));
                        }
                        if d >= total {
                            return Err(invalid(
                                "incident.onset",
                                format!("{text} lies before the first sample; make warmup longer (the timeline is {})", humantime::format_duration(total)),
                            ));
                        }
                        Some(d)
                    }
                };
                if let Onset::BeforeEnd { secs } = kind.params().onset {
                    if onset_before_end.is_none() && Duration::from_secs(secs) >= total {
                        return Err(invalid(
                            "incident.kind",
                            format!(
                                "{kind} starts {} before the window's end, before the first sample; make warmup longer",
                                humantime::format_duration(Duration::from_secs(secs))
                            ),
                        ));
                    }
                }
                Some(IncidentSpec { kind, model: inc.model, replica, onset_before_end })
            }
        };

        let models_and_sizes: Vec<(String, u32)> = models.iter().map(|m| (m.name.clone(), m.replicas)).collect();
        let events = events::parse(raw.event, &models_and_sizes, &events::Ctx { invalid: &invalid, duration: &duration, interval, total })?;

        let mut spec = ScenarioSpec {
            name: raw.name,
            description: raw.description,
            seed: raw.seed,
            start,
            interval,
            warmup,
            baseline,
            window,
            metrics: raw.metrics,
            histograms: raw.histograms,
            drop: raw.drop,
            counts_aborts: raw.counts_aborts,
            models,
            incident,
            events,
            expect: Expectation::default(),
        };

        if let Some(e) = raw.expect {
            // A model without a first finding only names whose binding is checked (a near miss
            // whose limit must read `none`, say).
            // So does a model with unexplained changes: the model they must be listed for.
            let model_for_binding = e.first.is_none() && (e.binding.is_some() || !e.unexplained.is_empty());
            if e.healthy && (e.first.is_some() || (e.model.is_some() && !model_for_binding) || e.replica.is_some()) {
                return Err(invalid(
                    "expect",
                    "healthy = true cannot be combined with first, model or replica (model only with binding or unexplained)".into(),
                ));
            }
            if e.first.is_some() != e.model.is_some() && !(model_for_binding && e.model.is_some()) {
                return Err(invalid("expect", "first and model go together".into()));
            }
            if let Some(limit) = &e.binding {
                if !BINDING_LIMITS.contains(&limit.as_str()) {
                    return Err(invalid("expect.binding", format!("{limit:?} is not a limit ({})", BINDING_LIMITS.join(", "))));
                }
                if e.model.is_none() {
                    return Err(invalid("expect.binding", "names the limit for a model: it needs model".into()));
                }
            }
            if let Some(cause) = &e.replica_cause {
                if !REPLICA_CAUSES.contains(&cause.as_str()) {
                    return Err(invalid("expect.replica_cause", format!("{cause:?} is not a cause ({})", REPLICA_CAUSES.join(", "))));
                }
                if e.replica.is_none() {
                    return Err(invalid("expect.replica_cause", "says why the named replica differs: it needs first, model and replica".into()));
                }
            }
            if let Some(hop) = &e.grew {
                if !HOPS.contains(&hop.as_str()) {
                    return Err(invalid("expect.grew", format!("{hop:?} is not a hop ({})", HOPS.join(", "))));
                }
                if e.model.is_none() {
                    return Err(invalid("expect.grew", "names the hop that grew for a model: it needs first and model".into()));
                }
            }
            if e.stood_in && e.first.is_none() {
                return Err(invalid("expect.stood_in", "says how the first finding was reached: it needs first and model".into()));
            }
            if let Some(model) = &e.model {
                if !spec.models.iter().any(|m| &m.name == model) {
                    return Err(invalid("expect.model", format!("{model:?} is not one of the models")));
                }
            }
            if let Some(instance) = &e.replica {
                let Some(model) = &e.model else {
                    return Err(invalid("expect.replica", "needs first and model".into()));
                };
                let instances: Vec<String> = spec.replicas().into_iter().filter(|r| &r.model == model).map(|r| r.instance).collect();
                if !instances.contains(instance) {
                    return Err(invalid("expect.replica", format!("{instance:?} is not an instance of {model:?} ({})", instances.join(", "))));
                }
            }
            for (i, rule) in e.absent.iter().enumerate() {
                if rule.trim().is_empty() {
                    return Err(invalid("expect.absent", format!("entry {i} is empty")));
                }
                if e.absent[..i].contains(rule) {
                    return Err(invalid("expect.absent", format!("{rule:?} is listed twice")));
                }
                if e.first.as_ref() == Some(rule) {
                    return Err(invalid("expect.absent", format!("{rule:?} is also expected first")));
                }
            }
            if let Some(kind) = &e.caused_by {
                if !TRUE_KINDS.contains(&kind.as_str()) {
                    return Err(invalid("expect.caused_by", format!("{kind:?} is not an event kind ({})", TRUE_KINDS.join(", "))));
                }
                let Some(model) = &e.model else {
                    return Err(invalid("expect.caused_by", "says what the first finding follows: it needs first and model".into()));
                };
                if e.no_cause {
                    return Err(invalid("expect.caused_by", "cannot be combined with no_cause = true".into()));
                }
                if !spec.true_events().iter().any(|t| &t.kind == kind && &t.model == model) {
                    return Err(invalid("expect.caused_by", format!("no {kind} event happens to {model:?} in this scenario; add an [[event]] for it")));
                }
            }
            spec.expect = Expectation {
                first: e.first,
                model: e.model,
                replica: e.replica,
                absent: e.absent,
                stood_in: e.stood_in,
                exit: e.exit,
                healthy: e.healthy,
                caused_by: e.caused_by,
                no_cause: e.no_cause,
                binding: e.binding,
                cold_start: e.cold_start,
                replica_cause: e.replica_cause,
                unexplained: e.unexplained,
                grew: e.grew,
            };
        }
        Ok(spec)
    }
}
