//! Generated vLLM fleets, so integration tests can run the diagnosis against a real Prometheus.
//!
//! Hand-written fixtures drift from what servers emit and never have the noise that makes a
//! threshold flaky. A scenario file instead names a fleet (models, replicas, request rates), a
//! timeline (warm-up, baseline, window) and at most one incident on one model; the generator
//! simulates every replica interval by interval with vLLM's real metric names, labels and
//! histogram buckets, and writes OpenMetrics that `promtool tsdb create-blocks-from openmetrics`
//! backfills. The same seed always gives the same bytes.
//!
//! The numbers each incident kind produces live in one table (`state.rs`, [`IncidentKind::params`]);
//! the simulation (`sim.rs`) knows nothing about kinds, and `openmetrics.rs` only formats.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::Deserialize;

mod openmetrics;
mod sim;
mod state;

pub use sim::GeneratedSeries;
pub use state::{IncidentKind, Onset, StateParams, Workload};

/// Which generation of vLLM metric names the fleet exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsGeneration {
    /// vLLM 0.10+ (V1 engine): `kv_cache_usage_perc`, `inter_token_latency_seconds`, `engine` label,
    /// prefix-cache counters and `http_requests_total`.
    #[default]
    V1,
    /// vLLM 0.5-0.8 (V0 engine): `gpu_cache_usage_perc`, `time_per_output_token_seconds`, no
    /// `engine` label, no prefix-cache counters, no HTTP metrics.
    V0,
}

impl MetricsGeneration {
    pub fn as_str(self) -> &'static str {
        match self {
            MetricsGeneration::V1 => "v1",
            MetricsGeneration::V0 => "v0",
        }
    }
}

/// One served model: `replicas` identical servers, each receiving `rate` requests per second when healthy.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    pub name: String,
    pub replicas: u32,
    pub rate: f64,
    /// `--max-model-len`: the last bucket bound of the token-count histograms.
    pub max_model_len: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct IncidentSpec {
    pub kind: IncidentKind,
    /// The model_name every replica of which enters the incident state.
    pub model: String,
}

/// What the diagnosis must conclude; read by tests, ignored by the generator.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expectation {
    /// The rule that must rank first ...
    pub first: Option<String>,
    /// ... for this model_name.
    pub model: Option<String>,
    /// No warning or critical finding at all.
    pub healthy: bool,
}

/// A parsed, validated scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioSpec {
    pub name: String,
    pub description: String,
    pub seed: u64,
    /// Time of the first sample.
    pub start: DateTime<Utc>,
    /// Scrape interval.
    pub interval: Duration,
    /// Healthy lead-in before the baseline.
    pub warmup: Duration,
    pub baseline: Duration,
    /// The incident window; it ends at the last sample.
    pub window: Duration,
    pub metrics: MetricsGeneration,
    pub models: Vec<ModelSpec>,
    pub incident: Option<IncidentSpec>,
    pub expect: Expectation,
}

/// Why a scenario file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot read scenario file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("scenario {origin} is not valid TOML for a scenario: {message}")]
    Syntax { origin: String, message: String },
    #[error("scenario {origin}: {field}: {message}")]
    Invalid { origin: String, field: String, message: String },
}

/// Largest number of samples per series a scenario may ask for (a week at 30 s).
const MAX_STEPS: u64 = 20_160;
const MAX_REPLICAS: u32 = 64;
const MAX_RATE: f64 = 500.0;

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
    #[serde(default)]
    model: Vec<RawModel>,
    #[serde(default)]
    incident: Option<RawIncident>,
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIncident {
    kind: IncidentKind,
    model: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    #[serde(default)]
    first: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    healthy: bool,
}

impl ScenarioSpec {
    /// Parse and validate a scenario from TOML text.
    pub fn from_toml_str(text: &str) -> Result<ScenarioSpec, ScenarioError> {
        Self::parse(text, "<text>")
    }

    /// Read, parse and validate a scenario file.
    pub fn load(path: impl AsRef<Path>) -> Result<ScenarioSpec, ScenarioError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path)
            .map_err(|source| ScenarioError::Read { path: path.display().to_string(), source })?;
        Self::parse(&text, &path.display().to_string())
    }

    fn parse(text: &str, origin: &str) -> Result<ScenarioSpec, ScenarioError> {
        let raw: RawSpec = toml::from_str(text)
            .map_err(|e| ScenarioError::Syntax { origin: origin.to_string(), message: e.to_string() })?;
        let invalid = |field: &str, message: String| ScenarioError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message,
        };

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
            let d = humantime::parse_duration(text.trim())
                .map_err(|e| invalid(field, format!("{text:?} is not a duration like \"30s\" or \"20m\" ({e})")))?;
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
                return Err(invalid(
                    &field,
                    format!("rate must be above 0 and at most {MAX_RATE} requests per second"),
                ));
            }
            let max_model_len = m.max_model_len.unwrap_or(32_768);
            if !(1_000..=10_000_000).contains(&max_model_len) {
                return Err(invalid(&field, "max_model_len must be between 1000 and 10000000".into()));
            }
            models.push(ModelSpec { name: m.name, replicas: m.replicas, rate: m.rate, max_model_len });
        }

        let incident = match raw.incident {
            None => None,
            Some(inc) => {
                if !models.iter().any(|m| m.name == inc.model) {
                    let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
                    return Err(invalid(
                        "incident.model",
                        format!("{:?} is not one of the models ({})", inc.model, names.join(", ")),
                    ));
                }
                Some(IncidentSpec { kind: inc.kind, model: inc.model })
            }
        };

        let expect = match raw.expect {
            None => Expectation::default(),
            Some(e) => {
                if e.healthy && (e.first.is_some() || e.model.is_some()) {
                    return Err(invalid("expect", "healthy = true cannot be combined with first or model".into()));
                }
                if e.first.is_some() != e.model.is_some() {
                    return Err(invalid("expect", "first and model go together".into()));
                }
                if let Some(model) = &e.model {
                    if !models.iter().any(|m| &m.name == model) {
                        return Err(invalid("expect.model", format!("{model:?} is not one of the models")));
                    }
                }
                Expectation { first: e.first, model: e.model, healthy: e.healthy }
            }
        };

        Ok(ScenarioSpec {
            name: raw.name,
            description: raw.description,
            seed: raw.seed,
            start,
            interval,
            warmup,
            baseline,
            window,
            metrics: raw.metrics,
            models,
            incident,
            expect,
        })
    }

    /// Start of the healthy baseline (the first sample after the warm-up).
    pub fn baseline_start(&self) -> DateTime<Utc> {
        self.start + delta(self.warmup)
    }

    /// End of the baseline, which is the start of the window.
    pub fn baseline_end(&self) -> DateTime<Utc> {
        self.window_start()
    }

    pub fn window_start(&self) -> DateTime<Utc> {
        self.baseline_start() + delta(self.baseline)
    }

    /// The last sample.
    pub fn window_end(&self) -> DateTime<Utc> {
        self.window_start() + delta(self.window)
    }

    /// Number of samples in every series.
    pub fn sample_count(&self) -> usize {
        let total = self.warmup + self.baseline + self.window;
        (total.as_millis() / self.interval.as_millis()) as usize + 1
    }

    /// Total number of replicas across models.
    pub fn replica_count(&self) -> u32 {
        self.models.iter().map(|m| m.replicas).sum()
    }

    /// The model that has the incident, if any.
    pub fn incident_model(&self) -> Option<&str> {
        self.incident.as_ref().map(|i| i.model.as_str())
    }
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::milliseconds(d.as_millis() as i64)
}

/// Every series the scenario's fleet exports, sorted by name then labels.
pub fn generate_series(spec: &ScenarioSpec) -> Vec<GeneratedSeries> {
    sim::simulate(spec).into_series()
}

/// Write the scenario as OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`:
/// every sample timestamped, each family's samples together, `# EOF` at the end.
pub fn generate_openmetrics(spec: &ScenarioSpec, out: &mut impl std::io::Write) -> std::io::Result<()> {
    let generated = sim::simulate(spec);
    openmetrics::write(&generated, out)
}

#[cfg(test)]
mod tests;
