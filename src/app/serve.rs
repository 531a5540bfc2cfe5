//! `serve`: the settings and flags become the service's [`crate::serve::Config`] and the closure
//! that runs one diagnosis, the same `diagnose` explain runs, scoped and windowed by the alerts.

use std::path::Path;
use std::sync::Arc;

use super::explain::{diagnose, graph_links, runtime};
use crate::cli::ServiceArgs;
use crate::error::{exit, Failure};
use crate::prom::Selector;
use crate::serve::deliver::{Diagnosis, Retry, Target};
use crate::serve::{self, Config, Diagnose};
use crate::settings::{Setting, Settings};
use crate::source::prometheus::Secret;

pub(super) fn run_serve(s: Settings, args: ServiceArgs) -> Result<u8, Failure> {
    refuse_what_does_not_apply(&s)?;
    // Checked once before serving, so a bad selector, grouping, rule file or connection setting
    // stops here rather than failing every notification.
    let (params, user_selector) = s.run_params(chrono::Utc::now())?;
    let mut rules = crate::rules::load_with_overrides(s.rules.dir.as_deref())?;
    if let Some(profile) = s.rules.profile.as_deref() {
        rules.apply_profile(profile).map_err(Failure::Usage)?;
    }
    // The connection settings too (URL, credentials, headers, tenants, TLS files): a client is
    // built once here and dropped; each diagnosis builds its own.
    drop(super::connect::connect(&s)?);
    let config = Config {
        listen: args.listen.clone(),
        webhook: args.webhook_url.as_deref().map(webhook_target).transpose()?,
        slack: args.slack_webhook_url_file.as_deref().map(slack_target).transpose()?,
        auth_token: args.auth_token_file.as_deref().map(|p| read_secret("--auth-token-file", p)).transpose()?,
        dedup: args.dedup,
        max_concurrent: usize::from(args.max_concurrent),
        queue: usize::from(args.queue),
        window: s.window(),
        share_within: args.share_within,
        group_by: params.group_by,
        body_limit: serve::DEFAULT_BODY_LIMIT,
        retry: Retry::default(),
        links: graph_links(&s),
    };
    serve::check_exposure("serve", &config.listen, config.auth_token.is_some(), args.allow_unauthenticated_remote).map_err(Failure::Usage)?;
    if config.auth_token.is_none() {
        eprintln!("vllm-diag serve: warning: no --auth-token-file: anyone who can reach {} can trigger diagnoses", config.listen);
    }
    // The diagnoses run on their own runtime, from the service's blocking threads; it is dropped
    // last, here, after the service's.
    let diagnoses = Arc::new(runtime()?);
    let rt = diagnoses.clone();
    let settings = Arc::new(s);
    let run_one: Arc<Diagnose> = Arc::new(move |extra: &Selector, end, window| {
        let mut run = (*settings).clone();
        let mut selector = user_selector.clone();
        selector.matchers.extend(extra.matchers.iter().cloned());
        run.scope.selector = Setting::new(Some(selector.to_promql()), run.scope.selector.origin.clone());
        run.scope.at = Setting::default_value(Some(end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)));
        run.scope.window = Setting::default_value(Some(window));
        let report = diagnose(&run, false, &rt)?;
        let exit_code = report.exit_code_with(*run.output.fail_on, *run.output.fail_on_unexplained);
        Ok(Diagnosis { report, exit_code })
    });
    let service = runtime()?;
    let result = service.block_on(serve::run(config, run_one, serve::stop_signal("serve")));
    // A diagnosis still running after the drain is bounded by --timeout; the process need not wait.
    service.shutdown_timeout(std::time::Duration::from_secs(5));
    drop(diagnoses);
    result.map(|()| exit::OK)
}

/// The explain settings that make no sense for a service, refused with the reason.
fn refuse_what_does_not_apply(s: &Settings) -> Result<(), Failure> {
    let given = super::one_run_flags(s);
    if given.is_empty() {
        return Ok(());
    }
    Err(Failure::Usage(format!("serve diagnoses live data from --prometheus over windows that end when an alert arrives: drop {}", given.join(", "))))
}

/// `--webhook-url`: an http(s) URL.
fn webhook_target(url: &str) -> Result<Target, Failure> {
    match url::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(Target::webhook(url)),
        _ => Err(Failure::Usage(format!("--webhook-url {}: give an http:// or https:// URL", crate::prom::redact_url(url)))),
    }
}

/// `--slack-webhook-url-file`: a file holding an http(s) URL, which is never shown.
fn slack_target(path: &Path) -> Result<Target, Failure> {
    let url = read_secret("--slack-webhook-url-file", path)?;
    match url::Url::parse(url.expose()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Ok(Target::slack(url.expose())),
        _ => Err(Failure::Usage(format!(
            "--slack-webhook-url-file {}: does not hold an http:// or https:// URL (Slack's incoming webhook URL, https://hooks.slack.com/services/...)",
            path.display()
        ))),
    }
}

/// A secret from a file: its content without the trailing line break. Errors name the flag and the
/// file, never the content.
pub(super) fn read_secret(flag: &str, path: &Path) -> Result<Secret, Failure> {
    let bytes = std::fs::read(path).map_err(|e| {
        let reason = e.to_string();
        let reason = reason.split(" (os error").next().unwrap_or(&reason).to_string();
        Failure::Usage(format!("{flag} {}: cannot read it: {reason}", path.display()))
    })?;
    let text = String::from_utf8(bytes).map_err(|_| Failure::Usage(format!("{flag} {}: is not UTF-8 text", path.display())))?;
    let trimmed = text.trim_end_matches(['\r', '\n']).trim();
    if trimmed.is_empty() {
        return Err(Failure::Usage(format!("{flag} {}: is empty", path.display())));
    }
    Ok(Secret::new(trimmed))
}
