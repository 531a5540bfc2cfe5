//! `vllm-diag loadtest URL`: the settings into bounds, limits and a plan; a dry run, or the sweep
//! (each step's requests, the engines read after it when a Prometheus is given, the step judged,
//! the next load chosen); the knee, the limit that bound there, the derived profile; the result
//! written, the exit code.
//!
//! Everything that can be wrong with the settings is found before the first request: the bounds,
//! the URL, the profile, the credentials, the Prometheus client and the selector.

use std::time::Duration;

use crate::error::{exit, Failure};
use crate::loadtest::plan::{self as lplan, Sweep, CEILINGS, MAX_BISECTIONS};
use crate::loadtest::{self, engine, Bounds, Knee, LoadMode, LoadtestRun, Phase, Slo, Step, Stop};
use crate::probe::send::{self, Arrivals, Schedule};
use crate::probe::{plan, Limits};
use crate::prom::{Matcher, Selector};
use crate::settings::loadtest::{valid_profile_name, LoadtestSettings};
use crate::settings::probe::ProbeFormat;
use crate::settings::Settings;

/// The load test, and on a failure with `--format json` the error document every command writes.
pub(super) fn run_loadtest(s: Settings, p: LoadtestSettings) -> Result<u8, Failure> {
    let json = p.format == ProbeFormat::Json;
    let result = loadtest_run(s, p);
    if let (true, Err(e)) = (json, &result) {
        if !matches!(e, Failure::Output(_)) {
            let doc = serde_json::json!({"schema_version": loadtest::SCHEMA_VERSION, "error": {"message": e.to_string(), "exit_code": e.exit_code()}});
            let _ = super::write_stdout(&format!("{doc}\n"));
        }
    }
    result
}

/// The profile's limits, after a `--rules` directory and the configuration file's thresholds.
fn slo(s: &Settings) -> Result<Slo, Failure> {
    let mut rules = crate::rules::load_with_overrides(s.rules.dir.as_deref())?;
    let profile = s.rules.profile.as_deref().unwrap_or(crate::rules::DEFAULT_PROFILE).to_string();
    rules.apply_profile(&profile).map_err(Failure::Usage)?;
    let _ = s.rules.apply_to_rules(&mut rules);
    Ok(Slo { ttft_p95_high: rules.thresholds.get("ttft_p95_high").copied(), itl_p95_high: rules.thresholds.get("itl_p95_high").copied(), profile })
}

/// What the sweep needs besides the network clients.
struct Sweeping<'a> {
    plan: plan::Plan,
    mode: LoadMode,
    bounds: Bounds,
    slo: Slo,
    ladder: Vec<f64>,
    settle: Duration,
    selector_for: &'a dyn Fn(&str) -> Selector,
    quiet: bool,
}

fn loadtest_run(s: Settings, p: LoadtestSettings) -> Result<u8, Failure> {
    if let Some(path) = &p.from {
        return written_again(path, &p);
    }
    let bounds = p.bounds()?;
    if p.profile_out.is_some() && !valid_profile_name(&p.profile_name) {
        return Err(Failure::Usage(format!("--profile-name {:?}: use letters, digits, '-' and '_' (a [profile.NAME] table's name)", p.profile_name)));
    }
    let shape = p.shape();
    let (endpoint, models_url) = plan::endpoint(&p.url, shape.api).map_err(|e| Failure::Usage(e.to_string().replacen("probe URL", "loadtest URL", 1)))?;
    // The plan's limits are the sweep's; each step narrows them (below).
    let limits = Limits {
        requests: bounds.max_requests,
        rate_per_second: bounds.max_rate,
        concurrency: bounds.max_concurrency,
        max_duration: bounds.max_duration,
        request_timeout: bounds.request_timeout,
    };
    let probe_plan = plan::Plan { target: crate::prom::strip_credentials(&p.url), endpoint, models_url, model: p.model.value.clone(), shape, limits };
    let slo = slo(&s)?;
    let compare = s.source.prometheus.origin.is_given();
    let given_selector = s
        .scope
        .selector
        .as_deref()
        .map(|text| Selector::parse(text).map_err(|e| Failure::Usage(format!("{}: {e}", s.scope.selector.origin.place("--selector", "selector")))))
        .transpose()?;
    let selector_for = |model: &str| given_selector.clone().unwrap_or_else(|| Selector { matchers: vec![Matcher::eq("model_name", model)] });
    let tokens = (*p.prompt_words + *p.max_tokens as usize) as u64;
    let sweep_plan = lplan::sweep_plan(*p.mode, *p.start, &bounds, if compare { *p.settle } else { Duration::ZERO }, tokens);

    if p.dry_run {
        let reads: Vec<String> = if compare {
            let sel = selector_for(probe_plan.model.as_deref().unwrap_or("<from /v1/models>"));
            let now = chrono::Utc::now();
            let w = engine::StepWindow::new(now - chrono::Duration::from_std(bounds.step).unwrap_or_default(), now, *p.settle);
            engine::queries(&sel, &w).into_iter().filter_map(|(_, r)| r.query().map(str::to_string)).collect()
        } else {
            Vec::new()
        };
        let text = match p.format {
            ProbeFormat::Text => {
                crate::render::loadtest::dry_run(probe_plan.endpoint.as_str(), &probe_plan.shape, (&bounds, &CEILINGS, &slo), &sweep_plan, &reads)
            }
            ProbeFormat::Json => {
                let v = serde_json::json!({
                    "schema_version": loadtest::SCHEMA_VERSION,
                    "dry_run": true,
                    "endpoint": probe_plan.endpoint.as_str(),
                    "bounds": bounds,
                    "ceilings": CEILINGS,
                    "slo": slo,
                    "shape": probe_plan.shape,
                    "plan": sweep_plan,
                    "engine_queries": reads,
                });
                format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
            }
        };
        super::write_stdout(&text)?;
        return Ok(exit::OK);
    }

    let (client, backend, runtime) = super::connect::probe_session(&s, probe_plan.endpoint.as_str(), compare)?;
    let shown = compare.then(|| crate::prom::strip_credentials(&s.source.prometheus));
    let backend: Option<&dyn crate::source::Source> = backend.as_ref().map(|b| b as &dyn crate::source::Source);
    let sweeping = Sweeping {
        plan: probe_plan,
        mode: *p.mode,
        bounds,
        slo,
        ladder: sweep_plan.ladder.clone(),
        settle: *p.settle,
        selector_for: &selector_for,
        quiet: p.quiet,
    };
    let mut run = runtime.block_on(sweep(&client, backend, shown, &sweeping))?;
    if let Some(k) = &run.knee {
        run.derived = Some(loadtest::derive(&run.steps, k, &p.profile_name, *p.margin));
    }
    if let Some(path) = &p.profile_out {
        match &run.derived {
            Some(d) => std::fs::write(path, crate::render::loadtest::profile_toml(&run, d))
                .map_err(|e| Failure::Output(format!("--profile-out {}: cannot write: {e}", path.display())))?,
            None => eprintln!("vllm-diag: no profile written to {}: no step was within the limits, so there is no knee to derive it from", path.display()),
        }
    }
    write(&run, &p)
}

/// The result on stdout in `--format`, and as a page where `--html` asks; the run's exit code.
fn write(run: &LoadtestRun, p: &LoadtestSettings) -> Result<u8, Failure> {
    if let Some(path) = &p.html {
        std::fs::write(path, crate::render::loadtest_html::html(run)).map_err(|e| Failure::Output(format!("--html {}: cannot write: {e}", path.display())))?;
    }
    let text = match p.format {
        ProbeFormat::Text => crate::render::loadtest::text(run),
        ProbeFormat::Json => crate::render::loadtest::json(run),
    };
    super::write_stdout(&text)?;
    Ok(run.exit_code())
}

/// `--from FILE`: a saved result, written again; nothing is sent.
fn written_again(path: &std::path::Path, p: &LoadtestSettings) -> Result<u8, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| Failure::Usage(format!("--from {}: cannot read: {e}", path.display())))?;
    let run: LoadtestRun = serde_json::from_str(&text).map_err(|e| {
        Failure::Usage(format!(
            "--from {}:{}:{}: not a load test's result ({}): write one with `vllm-diag loadtest URL --format json > FILE`",
            path.display(),
            e.line(),
            e.column(),
            e.to_string().split(" at line ").next().unwrap_or_default()
        ))
    })?;
    if run.schema_version != loadtest::SCHEMA_VERSION {
        return Err(Failure::Usage(format!(
            "--from {}: schema_version {} is not this build's ({}): write it again with this version's `vllm-diag loadtest`",
            path.display(),
            run.schema_version,
            loadtest::SCHEMA_VERSION
        )));
    }
    write(&run, p)
}

/// The sweep: the model looked up when none is given, then each step the [`Sweep`] chooses, until
/// it ends or a bound runs out; the knee and the limit that bound there.
async fn sweep(
    client: &reqwest::Client,
    backend: Option<&dyn crate::source::Source>,
    prometheus: Option<String>,
    w: &Sweeping<'_>,
) -> Result<LoadtestRun, Failure> {
    let model = match &w.plan.model {
        Some(m) => m.clone(),
        None => match send::lookup_model(client, &w.plan).await {
            Ok(m) => m,
            Err(send::LookupError::NotOne(e)) => return Err(Failure::Usage(e)),
            Err(send::LookupError::Unanswered(e)) => return Err(Failure::Source(format!("cannot start the load test: {e}"))),
        },
    };
    let selector = (w.selector_for)(&model);
    if !w.quiet {
        eprintln!("vllm-diag: loading {} (model {model})", w.plan.endpoint);
        eprintln!("vllm-diag: {}", crate::render::loadtest::bounds_line(w.mode, &w.bounds, &CEILINGS));
        eprintln!("vllm-diag: {}", crate::render::loadtest::slo_line(&w.slo, backend.is_some()));
    }
    let started = chrono::Utc::now();
    let t0 = tokio::time::Instant::now();
    let mut sweep = Sweep::new(w.mode, w.ladder.clone(), MAX_BISECTIONS);
    let mut steps: Vec<Step> = Vec::new();
    let (mut sent_so_far, mut next_index) = (0usize, 0usize);
    let settle = if backend.is_some() { w.settle } else { Duration::ZERO };
    while let Some((load, phase)) = sweep.next_load() {
        let left = w.bounds.max_duration.saturating_sub(t0.elapsed());
        // A step must be able to start for its length, drain, and be read, within what is left.
        if left < w.bounds.step + w.bounds.request_timeout.min(w.bounds.step) + settle {
            sweep.stop_for(Stop::DurationBound);
            break;
        }
        let remaining = w.bounds.max_requests - sent_so_far;
        if remaining == 0 {
            sweep.stop_for(Stop::RequestBound);
            break;
        }
        let mut step = run_step(client, w, &model, (steps.len(), phase, load), (remaining, next_index), left.saturating_sub(settle)).await;
        sent_so_far += step.sent;
        next_index += step.sent;
        if let Some(source) = backend {
            tokio::time::sleep(settle).await;
            let win = engine::StepWindow::new(step.started, step.ended, settle);
            let answers = crate::probe::engine::read(source, &engine::queries(&selector, &win)).await;
            let seconds = (step.ended - step.started).num_milliseconds() as f64 / 1000.0;
            step.engine = Some(engine::view(&win, step.started - chrono::Duration::from_std(settle).unwrap_or_default(), seconds, answers));
        }
        step.breaches = loadtest::judge(&step, &w.slo);
        sweep.record(load, step.passed(), phase);
        if !w.quiet {
            eprintln!("{}", crate::render::loadtest::progress(w.mode, &step, t0.elapsed().as_secs_f64(), &w.bounds));
        }
        let ran_out = step.requests_ran_out;
        steps.push(step);
        if ran_out {
            sweep.stop_for(Stop::RequestBound);
            break;
        }
    }
    let stop = sweep.stop().unwrap_or(Stop::Found);
    let knee =
        loadtest::knee(&steps).map(|(i, bad)| Knee { step: i, load: steps[i].load, first_bad: bad, bound: bad.and_then(|b| loadtest::bound_at(&steps, b)) });
    Ok(LoadtestRun {
        schema_version: loadtest::SCHEMA_VERSION,
        target: w.plan.target.clone(),
        endpoint: w.plan.endpoint.to_string(),
        model,
        mode: w.mode,
        shape: w.plan.shape.clone(),
        bounds: w.bounds,
        ceilings: CEILINGS,
        slo: w.slo.clone(),
        prometheus,
        selector: backend.map(|_| selector.to_promql()),
        started,
        ended: chrono::Utc::now(),
        steps,
        stop,
        knee,
        derived: None,
    })
}

/// One step: `load` held for the step's length (a closed loop of `load` in flight, at most the
/// rate bound; or Poisson arrivals at `load` a second, at most the concurrency bound), within the
/// requests `remaining` and the time `left`; request indexes go on from `first_index`.
async fn run_step(client: &reqwest::Client, w: &Sweeping<'_>, model: &str, at: (usize, Phase, f64), budget: (usize, usize), left: Duration) -> Step {
    let (index, phase, load) = at;
    let (remaining, first_index) = budget;
    let (rate, concurrency, arrivals) = match w.mode {
        LoadMode::Concurrency => (w.bounds.max_rate, load as usize, Arrivals::Paced),
        LoadMode::Rate => (load, w.bounds.max_concurrency, Arrivals::Poisson { seed: index as u64 + 1 }),
    };
    let limits = Limits {
        requests: remaining,
        rate_per_second: rate,
        concurrency: concurrency.max(1),
        // The step's requests may finish after it within their own timeout, never past the sweep's bound.
        max_duration: (w.bounds.step + w.bounds.request_timeout).min(left),
        request_timeout: w.bounds.request_timeout,
    };
    let plan = plan::Plan { limits, ..w.plan.clone() };
    let schedule = Schedule { arrivals, first_index, starts_for: w.bounds.step.min(left) };
    let sent = send::run_scheduled(client, &plan, model, schedule).await;
    let mut step = loadtest::step(index, phase, load, (sent.started, sent.ended), &sent.requests, sent.waited_for_slot);
    // Every request the bound had left was started: the request bound, not the step's time, ended it.
    step.requests_ran_out = sent.not_started == 0;
    step
}
