//! The data source from the settings: the Prometheus client with its auth and TLS, or a scrape run.
//!
//! Which credentials go where is decided here, from the origins the settings remember: the
//! metrics backend gets everything in force (flags, environment, configuration file); scrape
//! targets, which are other hosts, get only what was typed on this command line.

use crate::error::Failure;
use crate::settings::{Connection, Origin, Setting, Settings};
use crate::source::auth::{AuthFlags, ENV_BASIC_AUTH_PASSWORD, ENV_BEARER_TOKEN};
use crate::source::prometheus::{ClientOptions, PrometheusClient, Secret};

/// Who a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Peer {
    /// The metrics backend (`--prometheus`, the file's `source.prometheus`): every credential in force.
    Backend,
    /// A `--scrape` target, another host: only what is typed on this command line, plus the
    /// environment's password for a `--basic-auth-user` typed here. A probed URL takes the same.
    ScrapeTarget,
    /// The metrics backend of `probe`, whose typed credentials are the probed server's: only what
    /// the environment and the configuration file give.
    ProbeBackend,
}

impl Peer {
    /// Whether a value from `origin` may be sent to this peer.
    fn takes(self, origin: &Origin) -> bool {
        match self {
            Peer::Backend => true,
            Peer::ScrapeTarget => origin.is_flag() || *origin == Origin::Env(ENV_BASIC_AUTH_PASSWORD),
            Peer::ProbeBackend => !origin.is_flag(),
        }
    }

    fn keep<T: Clone>(self, s: &Setting<Option<T>>) -> Option<T> {
        s.value.clone().filter(|_| self.takes(&s.origin))
    }
}

/// The HTTP client for the backend, with the auth and TLS settings applied. Retries never outlive
/// the run's --timeout.
pub(super) fn connect(s: &Settings) -> Result<PrometheusClient, Failure> {
    let opts = client_options(s, &s.source.prometheus, Peer::Backend)?;
    PrometheusClient::new(opts).map_err(|e| {
        let e = e.to_string();
        Failure::Usage(if e.starts_with("--") { e } else { format!("{}: {e}", s.source.prometheus.origin.place("--prometheus", "source.prometheus")) })
    })
}

/// `probe`'s backend: the HTTP client for the Prometheus the engines are read from, with what the
/// environment and the configuration file give (the typed credentials are the probed server's).
pub(super) fn connect_probe_backend(s: &Settings) -> Result<PrometheusClient, Failure> {
    let opts = client_options(s, &s.source.prometheus, Peer::ProbeBackend)?;
    PrometheusClient::new(opts).map_err(|e| Failure::Usage(format!("{}: {e}", s.source.prometheus.origin.place("--prometheus", "source.prometheus"))))
}

/// `probe`'s HTTP client for the probed server: TLS and headers as typed on this command line, the
/// bearer token or basic auth as headers marked sensitive (never printed; the client follows a
/// redirect only to the same scheme, host and port, so they go nowhere else).
pub(super) fn probe_target_client(s: &Settings, url: &str) -> Result<reqwest::Client, Failure> {
    use crate::source::scrape::{client, ScrapeAuth};
    let o = client_options(s, url, Peer::ScrapeTarget)?;
    let mut headers = o.headers;
    if let Some(t) = o.bearer_token {
        headers.push(("Authorization".to_string(), Secret::new(format!("Bearer {}", t.expose()))));
    }
    if let Some((user, password)) = o.basic_auth {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{}", password.expose()));
        headers.push(("Authorization".to_string(), Secret::new(format!("Basic {token}"))));
    }
    client(&ScrapeAuth { tls: o.tls, bearer_token: None, basic_auth: None, headers }).map_err(Failure::Usage)
}

/// What of the connection settings `peer` gets, as the auth code takes them.
fn auth_flags(c: &Connection, peer: Peer) -> AuthFlags {
    AuthFlags {
        bearer_token_file: peer.keep(&c.bearer_token_file),
        basic_auth_user: peer.keep(&c.basic_auth_user),
        basic_auth_password_file: peer.keep(&c.basic_auth_password_file),
        headers: c.headers.iter().filter(|h| peer.takes(&h.origin)).map(|h| h.expose().to_string()).collect(),
        tenant: peer.keep(&c.tenant),
        ca_file: peer.keep(&c.ca_file),
        cert_file: peer.keep(&c.cert_file),
        key_file: peer.keep(&c.key_file),
        insecure_skip_verify: *c.insecure_skip_verify && peer.takes(&c.insecure_skip_verify.origin),
    }
}

/// The auth and TLS settings applied for a server at `base_url`; warnings (an unverified
/// certificate) go to stderr.
fn client_options(s: &Settings, base_url: &str, peer: Peer) -> Result<ClientOptions, Failure> {
    use crate::source::auth::apply;
    use crate::source::prometheus::{DebugLog, RetryPolicy};
    let c = &s.connection;
    let flags = auth_flags(c, peer);
    let mut opts = ClientOptions {
        base_url: base_url.to_string(),
        query_timeout: *s.limits.query_timeout,
        retry: RetryPolicy { deadline: Some(*s.limits.timeout), ..RetryPolicy::default() },
        debug: c.debug.then(DebugLog::stderr),
        ..ClientOptions::default()
    };
    // The secrets the settings hold (from the environment or the file's ${VAR}), where the auth
    // code looks for its environment variables.
    let token: Option<Secret> = peer.keep(&c.bearer_token);
    if token.as_ref().is_some_and(|t| t.expose().trim().chars().any(char::is_control)) {
        // A header cannot carry it; the HTTP client's own error would name neither the variable nor
        // the file's line. The token itself is never shown.
        return Err(Failure::Usage(format!(
            "{}: the bearer token holds a line break or another control character, which an HTTP header cannot carry: set it to the token alone",
            c.bearer_token.origin.place("$VLLM_DIAG_BEARER_TOKEN", "source.bearer_token")
        )));
    }
    let password: Option<Secret> = peer.keep(&c.basic_auth_password);
    let env = |k: &str| match k {
        ENV_BEARER_TOKEN => token.as_ref().map(|t| t.expose().to_string()),
        ENV_BASIC_AUTH_PASSWORD => password.as_ref().map(|p| p.expose().to_string()),
        _ => None,
    };
    let warnings = apply(&flags, &env, &mut opts).map_err(|e| Failure::Usage(e.to_string()))?;
    for w in warnings {
        eprintln!("vllm-diag: {w}");
    }
    Ok(opts)
}

/// `--scrape`: check the settings that do not apply, sample the endpoints, place the windows.
pub(super) fn scrape_prepare(s: &Settings, progress: bool) -> Result<crate::source::scrape::Prepared, Failure> {
    use crate::source::scrape::{prepare, ScrapeArgs, ScrapeError};
    if s.scope.at.is_some() {
        return Err(Failure::Usage("--scrape diagnoses the window it samples, ending now: drop --at".into()));
    }
    if s.scope.baseline.is_some() {
        return Err(Failure::Usage(
            "--scrape has no history to offset a baseline into: drop --baseline, or pass a baseline captured earlier with --baseline-from FILE".into(),
        ));
    }
    let (params, selector) = s.run_params(chrono::Utc::now())?;
    let src = &s.source;
    let prepared = prepare(ScrapeArgs {
        urls: &src.scrape,
        window: s.window(),
        interval: src.interval.unwrap_or(crate::settings::DEFAULT_SCRAPE_INTERVAL),
        baseline_from: src.baseline_from.as_deref(),
        save_samples: src.save_samples.as_deref(),
        selector,
        group_by: params.group_by,
        replica_label: params.replica_label,
        auth: {
            let o = client_options(s, src.scrape.first().map(String::as_str).unwrap_or_default(), Peer::ScrapeTarget)?;
            crate::source::scrape::ScrapeAuth { tls: o.tls, bearer_token: o.bearer_token, basic_auth: o.basic_auth, headers: o.headers }
        },
        progress,
    })
    .map_err(|e| match e {
        ScrapeError::NothingScraped(_) => Failure::Source(e.to_string()),
        other => Failure::Usage(other.to_string()),
    })?;
    // The notes (targets that failed rounds) go into the report's warnings, in every format.
    Ok(prepared)
}

/// What a probe or load test sends with: the client for the URL under test, the Prometheus it
/// reads the engines from (`compare`), and the runtime both run on.
pub(super) fn probe_session(s: &Settings, url: &str, compare: bool) -> Result<(reqwest::Client, Option<PrometheusClient>, tokio::runtime::Runtime), Failure> {
    let client = probe_target_client(s, url)?;
    let backend = if compare { Some(connect_probe_backend(s)?) } else { None };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failure::Usage(format!("cannot start the async runtime: {e}")))?;
    Ok((client, backend, runtime))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file_origin() -> Origin {
        Origin::File { path: PathBuf::from("vllm-diag.toml"), line: 3, column: 1, vars: vec!["KEY".into()] }
    }

    #[test]
    fn scrape_targets_get_only_what_was_typed_and_the_backend_gets_everything() {
        let c = Connection {
            headers: vec![Setting::flag(Secret::new("X-Debug: 1"), "--header"), Setting::new(Secret::new("X-Api-Key: backend"), file_origin())],
            ca_file: Setting::new(Some(PathBuf::from("/ca.pem")), file_origin()),
            tenant: Setting::flag(Some("team-a".into()), "--tenant"),
            basic_auth_user: Setting::flag(Some("diag".into()), "--basic-auth-user"),
            basic_auth_password: Setting::new(Some(Secret::new("pw")), Origin::Env(ENV_BASIC_AUTH_PASSWORD)),
            bearer_token: Setting::new(Some(Secret::new("tok")), Origin::Env(ENV_BEARER_TOKEN)),
            ..Connection::default()
        };
        let scrape = auth_flags(&c, Peer::ScrapeTarget);
        assert_eq!(scrape.headers, ["X-Debug: 1"]);
        assert_eq!((scrape.ca_file, scrape.tenant.as_deref(), scrape.basic_auth_user.as_deref()), (None, Some("team-a"), Some("diag")));
        assert_eq!(Peer::ScrapeTarget.keep(&c.basic_auth_password).map(|p| p.expose().to_string()).as_deref(), Some("pw"));
        assert!(Peer::ScrapeTarget.keep(&c.bearer_token).is_none(), "the backend's token from the environment stays with the backend");

        let backend = auth_flags(&c, Peer::Backend);
        assert_eq!(backend.headers, ["X-Debug: 1", "X-Api-Key: backend"]);
        assert_eq!(backend.ca_file, Some(PathBuf::from("/ca.pem")));
        assert!(Peer::Backend.keep(&c.bearer_token).is_some());
    }
}
