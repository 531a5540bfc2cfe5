//! `vllm-diag probe URL`: the settings into a plan, a dry run or the requests, the engines read
//! for the same minutes when a Prometheus is given, the result written, the exit code.
//!
//! Everything that can be wrong with the settings is found before the first request: the limits,
//! the URL, the credentials, the Prometheus client and the selector.

use crate::error::{exit, Failure};
use crate::probe::{self, engine, plan, ProbeRun, CEILINGS};
use crate::prom::{Matcher, Selector};
use crate::settings::probe::{JoinProbe, ProbeFormat, ProbeSettings};
use crate::settings::Settings;

/// The probe, and on a failure with `--format json` the error document the other commands write
/// (`{"schema_version": 1, "error": {"message", "exit_code"}}`), so a pipeline never reads an empty
/// file as a clean run.
pub(super) fn run_probe(s: Settings, p: ProbeSettings) -> Result<u8, Failure> {
    let json = p.format == ProbeFormat::Json;
    let result = probe_run(s, p);
    if let (true, Err(e)) = (json, &result) {
        if !matches!(e, Failure::Output(_)) {
            let doc = serde_json::json!({"schema_version": probe::SCHEMA_VERSION, "error": {"message": e.to_string(), "exit_code": e.exit_code()}});
            let _ = super::write_stdout(&format!("{doc}\n"));
        }
    }
    result
}

fn probe_run(s: Settings, p: ProbeSettings) -> Result<u8, Failure> {
    let limits = p.limits()?;
    let shape = p.shape();
    let (endpoint, models_url) = plan::endpoint(&p.url, shape.api).map_err(|e| Failure::Usage(e.to_string()))?;
    let plan = plan::Plan { target: crate::prom::strip_credentials(&p.url), endpoint, models_url, model: p.model.value.clone(), shape, limits };
    // The engines are read only when a Prometheus was named (a flag, the environment, the file).
    let compare = s.source.prometheus.origin.is_given();
    let given_selector = s
        .scope
        .selector
        .as_deref()
        .map(|text| Selector::parse(text).map_err(|e| Failure::Usage(format!("{}: {e}", s.scope.selector.origin.place("--selector", "selector")))))
        .transpose()?;
    let selector_for = |model: &str| given_selector.clone().unwrap_or_else(|| Selector { matchers: vec![Matcher::eq("model_name", model)] });

    if p.dry_run {
        let planned = plan::planned(&plan);
        let reads: Vec<String> = if compare {
            let sel = selector_for(plan.model.as_deref().unwrap_or("<from /v1/models>"));
            engine::queries(&sel, chrono::Utc::now(), limits.max_duration + *p.settle * 2)
                .into_iter()
                .filter_map(|(_, r)| r.query().map(str::to_string))
                .collect()
        } else {
            Vec::new()
        };
        let text = match p.format {
            ProbeFormat::Text => crate::render::probe::dry_run(plan.endpoint.as_str(), &plan.shape, &limits, &CEILINGS, &planned, &reads),
            ProbeFormat::Json => {
                let v = serde_json::json!({
                    "schema_version": probe::SCHEMA_VERSION,
                    "dry_run": true,
                    "endpoint": plan.endpoint.as_str(),
                    "limits": limits,
                    "ceilings": CEILINGS,
                    "shape": plan.shape,
                    "requests": planned,
                    "engine_queries": reads,
                });
                format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
            }
        };
        super::write_stdout(&text)?;
        return Ok(exit::OK);
    }

    let (client, backend, runtime) = super::connect::probe_session(&s, plan.endpoint.as_str(), compare)?;
    let shown = crate::prom::strip_credentials(&s.source.prometheus);
    let backend: Option<&dyn crate::source::Source> = backend.as_ref().map(|b| b as &dyn crate::source::Source);
    let run = runtime.block_on(execute(&client, &plan, backend, shown, *p.settle, &selector_for, p.quiet))?;
    let text = match p.format {
        ProbeFormat::Text => crate::render::probe::text(&run),
        ProbeFormat::Json => crate::render::probe::json(&run),
    };
    super::write_stdout(&text)?;
    Ok(run.exit_code())
}

/// Send the plan's requests (the model looked up first when none is given), then, with a
/// Prometheus, wait `settle` and read the engines for the probe's minutes under `selector_for`'s
/// selector for the model probed.
async fn execute(
    client: &reqwest::Client,
    plan: &plan::Plan,
    backend: Option<&dyn crate::source::Source>,
    prometheus_shown: String,
    settle: std::time::Duration,
    selector_for: &dyn Fn(&str) -> Selector,
    quiet: bool,
) -> Result<ProbeRun, Failure> {
    let (model, looked_up) = match &plan.model {
        Some(m) => (m.clone(), false),
        None => match probe::send::lookup_model(client, plan).await {
            Ok(m) => (m, true),
            Err(probe::send::LookupError::NotOne(e)) => return Err(Failure::Usage(e)),
            Err(probe::send::LookupError::Unanswered(e)) => return Err(Failure::Source(format!("cannot start the probe: {e}"))),
        },
    };
    if !quiet {
        eprintln!("vllm-diag: probing {} (model {model}); {}", plan.endpoint, crate::render::probe::limits_line(&plan.limits, &CEILINGS));
    }
    let sent = probe::send::run(client, plan, &model).await;
    let summary = probe::summary::summarize(&sent.requests);
    let engine = match backend {
        None => None,
        Some(source) => {
            if !quiet && !settle.is_zero() {
                eprintln!("vllm-diag: waiting {} s for the engines' last scrape (--settle)", settle.as_secs_f64());
            }
            tokio::time::sleep(settle).await;
            let (from, to, range) = engine::window(sent.started, sent.ended, settle);
            let selector = selector_for(&model);
            let answers = engine::read(source, &engine::queries(&selector, to, range)).await;
            Some(engine::view(prometheus_shown, &selector, (from, to), answers, &summary))
        }
    };
    let refused_in_front = probe::refused_in_front(&sent.requests, engine.as_ref());
    Ok(ProbeRun {
        schema_version: probe::SCHEMA_VERSION,
        target: plan.target.clone(),
        endpoint: plan.endpoint.to_string(),
        model,
        model_looked_up: looked_up,
        shape: plan.shape.clone(),
        limits: plan.limits,
        ceilings: CEILINGS,
        started: sent.started,
        ended: sent.ended,
        not_started: sent.not_started,
        requests: sent.requests,
        summary,
        refused_in_front,
        engine,
    })
}

/// `explain --probe`, `check --probe`: the probe run before the diagnosis, on `runtime`. The
/// requests go to the probed URL with `--probe-bearer-token-file` only (the command's credential
/// flags are the Prometheus'); the engines are read from the diagnosis' own Prometheus, with its
/// credentials, under `model_name="MODEL"` for the model probed.
pub(super) fn for_diagnosis(s: &Settings, j: &JoinProbe, runtime: &tokio::runtime::Runtime) -> Result<ProbeRun, Failure> {
    let p = &j.probe;
    let limits = p.limits()?;
    let shape = p.shape();
    let (endpoint, models_url) = plan::endpoint(&p.url, shape.api).map_err(|e| Failure::Usage(format!("--probe: {e}")))?;
    let plan = plan::Plan { target: crate::prom::strip_credentials(&p.url), endpoint, models_url, model: p.model.value.clone(), shape, limits };
    let target_settings = Settings {
        connection: crate::settings::Connection {
            bearer_token_file: crate::settings::Setting::flag(j.bearer_token_file.clone(), "--probe-bearer-token-file"),
            ..Default::default()
        },
        ..s.clone()
    };
    let client = super::connect::probe_target_client(&target_settings, plan.endpoint.as_str())?;
    let backend = super::connect::connect(s)?;
    let selector_for = |model: &str| Selector { matchers: vec![Matcher::eq("model_name", model)] };
    let quiet = *s.output.quiet;
    runtime.block_on(execute(&client, &plan, Some(&backend), crate::prom::strip_credentials(&s.source.prometheus), *p.settle, &selector_for, quiet))
}
