//! The base URL: http(s) only, credentials taken out, a path prefix kept, and shown without them.

use url::Url;

use super::{Secret, SourceError};

const URL_FORMS: &str = "expected a URL like http://host:9090 or https://host/prometheus";

/// Parse and normalise the base URL: http(s) only, credentials taken out, path without trailing slash
/// (and without a pasted `/api/v1`, which every request adds itself).
pub(super) fn parse_base_url(raw: &str) -> Result<(Url, Option<(String, Secret)>), SourceError> {
    let text = raw.trim();
    let bad = |why: &str| SourceError::Other { detail: format!("invalid Prometheus URL {:?}: {why}; {URL_FORMS}", crate::prom::redact_url(text)) };
    if text.is_empty() {
        return Err(bad("it is empty"));
    }
    if !text.contains("://") {
        return Err(bad("it has no scheme (http:// or https://)"));
    }
    let mut url = Url::parse(text).map_err(|e| {
        // `user:pa/ss@host`: the password's `/` ends the host early, and the error is about a port
        // or a host nobody typed.
        let after_scheme = text.split_once("://").map_or(text, |(_, rest)| rest);
        match after_scheme.contains('@') {
            true => bad(&format!(
                "{e}. A password in the URL holding /, ?, #, @ or : must be percent-encoded (/ as %2F), or passed with --basic-auth-user and ${}",
                crate::source::auth::ENV_BASIC_AUTH_PASSWORD
            )),
            false => bad(&e.to_string()),
        }
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(bad(&format!("the scheme is {:?}, not http or https", url.scheme())));
    }
    if url.host_str().is_none_or(|h| h.is_empty()) {
        return Err(bad("it has no host"));
    }
    if url.query().is_some() {
        return Err(bad("it has a query string (?...), which a base URL cannot carry; use headers for tenants and keys"));
    }
    url.set_fragment(None);

    let auth = if !url.username().is_empty() || url.password().is_some() {
        let user = percent_decode(url.username());
        let pass = percent_decode(url.password().unwrap_or(""));
        // Both setters only fail for URLs that cannot have credentials, which http(s) URLs can.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        Some((user, Secret::new(pass)))
    } else {
        None
    };

    let mut path = url.path().trim_end_matches('/').to_string();
    for suffix in ["/api/v1", "/api/v1/query"] {
        if path.ends_with(suffix) {
            path.truncate(path.len() - suffix.len());
        }
    }
    url.set_path(if path.is_empty() { "/" } else { &path });
    Ok((url, auth))
}

/// A URL as shown to people: no trailing slash after the host.
pub(super) fn show_url(u: &Url) -> String {
    let s = u.as_str();
    if u.path() == "/" {
        s.trim_end_matches('/').to_string()
    } else {
        s.to_string()
    }
}

/// `%40` -> `@` for user names and passwords taken from a URL. Invalid escapes are kept as written.
pub(super) fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}
