//! The data source from the flags: the Prometheus client with its auth and TLS, or a scrape run.

use crate::cli::ExplainArgs;
use crate::error::Failure;
use crate::source::prometheus::{ClientOptions, PrometheusClient};

/// The HTTP client for `--prometheus`, with the auth and TLS flags and the environment applied.
/// Retries never outlive the run's --timeout.
pub(super) fn connect(args: &ExplainArgs) -> Result<PrometheusClient, Failure> {
    let opts = client_options(args, &args.prometheus, false)?;
    PrometheusClient::new(opts).map_err(|e| {
        let e = e.to_string();
        Failure::Usage(if e.starts_with("--") { e } else { format!("--prometheus: {e}") })
    })
}

/// The auth and TLS flags and the environment, applied for a server at `base_url`; warnings (an
/// unverified certificate) go to stderr.
///
/// For `--scrape` only what is typed on this command line counts: the configuration file's source
/// and `$VLLM_DIAG_BEARER_TOKEN` hold the metrics backend's credentials, which must not be sent to
/// the vLLM endpoints (other hosts) unasked. The password of a `--basic-auth-user` typed here may
/// still come from `$VLLM_DIAG_BASIC_AUTH_PASSWORD`.
fn client_options(args: &ExplainArgs, base_url: &str, scrape: bool) -> Result<ClientOptions, Failure> {
    use crate::source::auth::{apply, AuthFlags, ENV_BASIC_AUTH_PASSWORD};
    use crate::source::prometheus::{DebugLog, RetryPolicy};
    let c = &args.connection;
    let typed = |id: &str| !scrape || args.given.flag(id);
    let flags = AuthFlags {
        bearer_token_file: c.bearer_token_file.clone().filter(|_| typed("bearer_token_file")),
        basic_auth_user: c.basic_auth_user.clone().filter(|_| typed("basic_auth_user")),
        basic_auth_password_file: c.basic_auth_password_file.clone().filter(|_| typed("basic_auth_password_file")),
        // The file's headers come after the typed ones: a scrape takes only the typed ones.
        headers: match (scrape, typed("headers")) {
            (false, _) => c.headers.clone(),
            (true, true) => c.headers[..c.typed_headers.unwrap_or(c.headers.len()).min(c.headers.len())].to_vec(),
            (true, false) => Vec::new(),
        },
        tenant: c.tenant.clone().filter(|_| typed("tenant")),
        ca_file: c.ca_file.clone().filter(|_| typed("ca_file")),
        cert_file: c.cert_file.clone().filter(|_| typed("cert_file")),
        key_file: c.key_file.clone().filter(|_| typed("key_file")),
        insecure_skip_verify: c.insecure_skip_verify && typed("insecure_skip_verify"),
    };
    let mut opts = ClientOptions {
        base_url: base_url.to_string(),
        query_timeout: args.query_timeout,
        retry: RetryPolicy { deadline: Some(args.timeout), ..RetryPolicy::default() },
        debug: c.debug.then(DebugLog::stderr),
        ..ClientOptions::default()
    };
    // Secrets the configuration file references with ${VAR} stand in for the environment's own.
    let env = |k: &str| {
        let own = std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        match scrape {
            true if k == ENV_BASIC_AUTH_PASSWORD => own,
            true => None,
            false => own.or_else(|| args.config.env_fallback(k)),
        }
    };
    let warnings = apply(&flags, &env, &mut opts).map_err(|e| Failure::Usage(e.to_string()))?;
    for w in warnings {
        eprintln!("vllm-diag: {w}");
    }
    Ok(opts)
}

/// `--scrape`: check the flags that do not apply, sample the endpoints, place the windows.
pub(super) fn scrape_prepare(args: &ExplainArgs, progress: bool) -> Result<crate::source::scrape::Prepared, Failure> {
    use crate::source::scrape::{prepare, ScrapeArgs, ScrapeError};
    if args.at.is_some() {
        return Err(Failure::Usage("--scrape diagnoses the window it samples, ending now: drop --at".into()));
    }
    if args.baseline.is_some() {
        return Err(Failure::Usage(
            "--scrape has no history to offset a baseline into: drop --baseline, or pass a baseline captured earlier with --baseline-from FILE".into(),
        ));
    }
    let (params, selector) = crate::config::run_params(args, chrono::Utc::now())?;
    let window = args.window.unwrap_or(std::time::Duration::from_secs(120));
    let prepared = prepare(ScrapeArgs {
        urls: &args.scrape,
        window,
        interval: args.interval.unwrap_or(std::time::Duration::from_secs(5)),
        baseline_from: args.baseline_from.as_deref(),
        save_samples: args.save_samples.as_deref(),
        selector,
        group_by: params.group_by,
        replica_label: params.replica_label,
        auth: {
            let o = client_options(args, args.scrape.first().map(String::as_str).unwrap_or_default(), true)?;
            crate::source::scrape::ScrapeAuth { tls: o.tls, bearer_token: o.bearer_token, basic_auth: o.basic_auth, headers: o.headers }
        },
        progress,
    })
    .map_err(|e| match e {
        ScrapeError::NothingScraped(_) => Failure::Source(e.to_string()),
        other => Failure::Usage(other.to_string()),
    })?;
    for n in &prepared.notes {
        eprintln!("vllm-diag: warning: {n}");
    }
    Ok(prepared)
}
