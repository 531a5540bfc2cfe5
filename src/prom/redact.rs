//! Credentials out of URLs and free text, before anything is shown, logged or stored.
//!
//! A Prometheus URL may carry `user:pass@`, a scrape target `?token=...`, a proxy's error page an
//! `Authorization` header it echoed. Every function here works on text as written, parsed or not (a
//! URL that fails to parse is the one most likely to end up in an error message), and errs towards
//! hiding too much: when the text does not parse and has an `@` past where the host seems to end, a
//! password holding `/`, `?` or `#` may have cut the host short, so everything up to the last `@` is
//! hidden.
//!
//! - [`redact_url`]: for messages. `https://u:p@host/x?token=t` -> `https://***@host/x?token=***`.
//! - [`strip_credentials`]: for showing a source. The same, with the user-info left out altogether:
//!   `https://host/x?token=***`.
//! - [`mask_password`]: for `config show`, which names the user: `https://u:***@host/x`.
//! - [`redact_text`]: for free text: every URL in it, `Authorization:` values, `Bearer`/`Basic`
//!   credentials and `token=...`-style pairs.

const MASK: &str = "***";

/// A URL for a message: the user-info (`user:pass@`) becomes `***@`, credential query parameters
/// (`token`, `access_token`, `api_key`, `password`, `sig`, ...) keep their name and lose their value;
/// everything else stays as written.
pub fn redact_url(url: &str) -> String {
    let p = Parts::of(url);
    let userinfo = if p.userinfo.is_some() { "***@" } else { "" };
    format!("{}{userinfo}{}", p.scheme, mask_params(p.rest))
}

/// A URL for showing a source: the user-info left out altogether (`https://host/`), credential query
/// parameters masked as in [`redact_url`]. A URL with nothing to hide is returned as written.
pub fn strip_credentials(url: &str) -> String {
    let p = Parts::of(url);
    format!("{}{}", p.scheme, mask_params(p.rest))
}

/// A URL for `config show`, which names the user: `https://alice:***@host/p`. A user-info without a
/// password is masked whole (a user name alone is often a token), as are credential query parameters.
pub fn mask_password(url: &str) -> String {
    let p = Parts::of(url);
    let userinfo = match p.userinfo {
        Some(info) => match info.split_once(':') {
            Some((user, _)) => format!("{user}:{MASK}@"),
            None => format!("{MASK}@"),
        },
        None => String::new(),
    };
    format!("{}{userinfo}{}", p.scheme, mask_params(p.rest))
}

/// Free text that may hold credentials: every `scheme://...` in it through [`redact_url`], the value
/// of an `Authorization:` header to the end of its line, the credential after `Bearer` or `Basic`,
/// and the value of every `name=value` pair whose name says credential (`token=`, `password=`).
pub fn redact_text(text: &str) -> String {
    let text = redact_urls_in(text);
    let text = redact_authorization(&text);
    let text = redact_schemes(&text);
    redact_pairs(&text)
}

/// The pieces of a URL-ish text: `scheme://` (or nothing), the user-info if any, and the rest.
struct Parts<'a> {
    scheme: &'a str,
    userinfo: Option<&'a str>,
    rest: &'a str,
}

impl<'a> Parts<'a> {
    fn of(s: &'a str) -> Parts<'a> {
        let (scheme, after) = match s.find("://") {
            Some(i) => (&s[..i + 3], &s[i + 3..]),
            None => ("", s),
        };
        let authority_end = after.find(['/', '?', '#', '\\']).unwrap_or(after.len());
        let at = match after[..authority_end].rfind('@') {
            Some(at) => Some(at),
            // `http://host/a@b` parses without credentials and is shown whole; text that does not
            // parse may have had its host cut short by a password holding `/`, `?` or `#`.
            None if after[authority_end..].contains('@') && url::Url::parse(s).is_err() => after.rfind('@'),
            None => None,
        };
        match at {
            Some(at) => Parts { scheme, userinfo: Some(&after[..at]), rest: &after[at + 1..] },
            None => Parts { scheme, userinfo: None, rest: after },
        }
    }
}

/// A query or fragment parameter whose value is a credential, judged by its name.
fn is_credential_name(name: &str) -> bool {
    let n: String = name.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_lowercase()).collect();
    const PARTS: &[&str] =
        &["token", "secret", "passw", "pwd", "apikey", "accesskey", "auth", "signature", "credential", "session", "jwt", "bearer", "privatekey"];
    PARTS.iter().any(|p| n.contains(p)) || matches!(n.as_str(), "key" | "sig" | "pass" | "code")
}

/// `name=***` for every credential parameter in the query and in a `k=v` fragment.
fn mask_params(rest: &str) -> String {
    let (before_fragment, fragment) = match rest.find('#') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let mut out = match before_fragment.find('?') {
        Some(i) => format!("{}?{}", &before_fragment[..i], mask_pairs(&before_fragment[i + 1..])),
        None => before_fragment.to_string(),
    };
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(&if f.contains('=') { mask_pairs(f) } else { f.to_string() });
    }
    out
}

fn mask_pairs(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if is_credential_name(&percent_decode(k)) => format!("{k}={MASK}"),
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Where a URL written in prose ends: at white space, a quote or an angle bracket.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>')
}

fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let scheme_start =
            rest[..i].char_indices().rev().take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')).last().map_or(i, |(j, _)| j);
        let end = rest[i + 3..].find(ends_url).map_or(rest.len(), |e| i + 3 + e);
        out.push_str(&rest[..scheme_start]);
        out.push_str(&redact_url(&rest[scheme_start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `Authorization: <anything>` -> `Authorization: ***`, to the end of the line.
fn redact_authorization(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    let key = "authorization";
    while let Some(found) = lower[from..].find(key) {
        let k = from + found;
        let after = k + key.len();
        let colon = text[after..].find(|c: char| c != ' ' && c != '\t').map(|o| after + o);
        match colon {
            Some(c) if text[c..].starts_with(':') => {
                let value_start = c + 1;
                let value_end = text[value_start..].find(['\n', '\r']).map_or(text.len(), |e| value_start + e);
                let value = &text[value_start..value_end];
                out.push_str(&text[from..value_start]);
                if value.trim().is_empty() {
                    out.push_str(value);
                } else {
                    // The scheme name (`Bearer`, `Basic`) says nothing secret; keep it.
                    let lead = &value[..value.len() - value.trim_start().len()];
                    let scheme = value.split_whitespace().next().unwrap_or_default();
                    let has_credential = value.trim_start().len() > scheme.len();
                    if has_credential && is_auth_scheme(scheme) {
                        out.push_str(&format!("{lead}{scheme} {MASK}"));
                    } else {
                        out.push_str(&format!("{lead}{MASK}"));
                    }
                }
                from = value_end;
            }
            _ => {
                out.push_str(&text[from..after]);
                from = after;
            }
        }
    }
    out.push_str(&text[from..]);
    out
}

fn is_auth_scheme(word: &str) -> bool {
    ["bearer", "basic", "digest", "token", "negotiate", "apikey"].contains(&word.to_ascii_lowercase().as_str())
}

/// `Bearer <credential>` and `Basic <credential>` anywhere: the credential (eight or more token
/// characters, with a digit, a symbol or mixed case) becomes `***`. Prose such as "bearer token" or
/// "basic authentication" is left alone.
fn redact_schemes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let words = text.split_inclusive(char::is_whitespace);
    let mut masked_next = false;
    for word in words {
        let bare = word.trim_end().trim_end_matches([',', ';', ')', '.']);
        if masked_next && looks_like_credential(bare) {
            out.push_str(MASK);
            out.push_str(&word[bare.len()..]);
            masked_next = false;
            continue;
        }
        masked_next = matches!(bare.to_ascii_lowercase().as_str(), "bearer" | "basic");
        out.push_str(word);
    }
    out
}

fn looks_like_credential(w: &str) -> bool {
    w.len() >= 8
        && w != MASK
        && w.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '+' | '/' | '='))
        && (w.chars().any(|c| c.is_ascii_digit() || matches!(c, '-' | '.' | '_' | '~' | '+' | '/' | '='))
            || (w.chars().any(|c| c.is_ascii_uppercase()) && w.chars().any(|c| c.is_ascii_lowercase())))
}

/// `name=value`, and `"name": "value"` in JSON, with a credential name. A bare `name: value` is
/// prose more often than not ("token: expired") and is left alone.
fn redact_pairs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    let mut copied = 0;
    while i < chars.len() {
        let (b, c) = chars[i];
        if c != '=' && c != ':' {
            i += 1;
            continue;
        }
        // The name just before the separator (in quotes before a `:`).
        let mut name_end = b;
        let quoted = text[..name_end].ends_with('"');
        if quoted {
            name_end -= 1;
        } else if c == ':' {
            i += 1;
            continue;
        }
        let name_start = text[..name_end]
            .char_indices()
            .rev()
            .take_while(|(_, c)| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            .last()
            .map_or(name_end, |(j, _)| j);
        let name = &text[name_start..name_end];
        // `://` is a URL's, not a pair's; `==`, `:=` and the like are not pairs either.
        let after = &text[b + 1..];
        if name.is_empty() || !is_credential_name(name) || after.starts_with(['/', '=']) {
            i += 1;
            continue;
        }
        let value_off = after.len() - after.trim_start_matches([' ', '"']).len();
        let value_start = b + 1 + value_off;
        let value_end = text[value_start..]
            .find(|c: char| c.is_whitespace() || matches!(c, '&' | '"' | '\'' | ',' | ';' | '}' | ')' | '<' | '>'))
            .map_or(text.len(), |e| value_start + e);
        let value = &text[value_start..value_end];
        if value.is_empty() || value == MASK {
            i += 1;
            continue;
        }
        out.push_str(&text[copied..value_start]);
        out.push_str(MASK);
        copied = value_end;
        while i < chars.len() && chars[i].0 < value_end {
            i += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRETS: &[&str] = &["s3cret", "pw1234", "tok-abc-123", "AKIA123", "dXNlcjpwYXNz"];

    fn assert_clean(shown: &str) {
        for s in SECRETS {
            assert!(!shown.contains(s), "{s} in {shown}");
        }
    }

    #[test]
    fn user_and_password_are_hidden_in_messages_with_the_rest_as_written() {
        assert_eq!(redact_url("http://a:b@host/x@y"), "http://***@host/x@y");
        assert_eq!(redact_url("a:b@host:9090"), "***@host:9090");
        assert_eq!(redact_url("http://host/p"), "http://host/p");
        assert_eq!(redact_url("https://u:pw1234@other/prometheus/api/v1/query"), "https://***@other/prometheus/api/v1/query");
        assert_eq!(redact_url("http://host:9090/a@b"), "http://host:9090/a@b");
    }

    #[test]
    fn a_password_that_cuts_the_host_short_is_still_hidden() {
        // `/`, `?` and `#` in an unencoded password make the text unparseable; hide up to the last `@`.
        for url in ["http://user:s3/cret@host/x", "http://user:s3?cret@host", "http://user:s3#cret@host", "https://user:s3cret@[bad"] {
            let shown = redact_url(url);
            assert!(!shown.contains("s3") && !shown.contains("cret") || shown == "https://***@[bad", "{shown}");
            assert!(!strip_credentials(url).contains("cret") && !mask_password(url).contains("cret"), "{url}");
        }
    }

    #[test]
    fn credential_query_parameters_lose_their_values() {
        assert_eq!(
            redact_url("http://host/metrics?token=tok-abc-123&x=1&access_token=s3cret&API-Key=pw1234"),
            "http://host/metrics?token=***&x=1&access_token=***&API-Key=***"
        );
        assert_eq!(
            redact_url("https://b.s3/o?X-Amz-Credential=AKIA123&X-Amz-Signature=s3cret&sig=pw1234&page=2"),
            "https://b.s3/o?X-Amz-Credential=***&X-Amz-Signature=***&sig=***&page=2"
        );
        assert_eq!(redact_url("https://app/cb#access_token=s3cret&state=x"), "https://app/cb#access_token=***&state=x");
        assert_eq!(redact_url("http://host/q?query=up&step=30"), "http://host/q?query=up&step=30");
    }

    #[test]
    fn showing_a_source_leaves_the_user_info_out() {
        assert_eq!(strip_credentials("https://user:s3cret@prom.example:9090/"), "https://prom.example:9090/");
        assert_eq!(strip_credentials("https://prom.example:9090"), "https://prom.example:9090");
        assert_eq!(strip_credentials("https://user:s3cret@[bad"), "https://[bad");
        assert_eq!(strip_credentials("http://h/m?token=s3cret"), "http://h/m?token=***");
    }

    #[test]
    fn config_show_names_the_user_but_not_the_password() {
        assert_eq!(mask_password("https://alice:pw@host/p"), "https://alice:***@host/p");
        assert_eq!(mask_password("http://host:9090/a@b"), "http://host:9090/a@b");
        assert_eq!(mask_password("https://diag:s3cret@prom.example/prometheus"), "https://diag:***@prom.example/prometheus");
        // A user name alone may be a token.
        assert_eq!(mask_password("https://tok-abc-123@host"), "https://***@host");
        assert_eq!(mask_password("alice:pw1234@host"), "alice:***@host");
        assert_eq!(mask_password(""), "");
    }

    #[test]
    fn free_text_has_urls_headers_and_token_pairs_masked() {
        let text = "GET https://u:s3cret@h/p?token=tok-abc-123 failed; Authorization: Bearer tok-abc-123\n\
                    retry with authorization: Basic dXNlcjpwYXNz\n\
                    or Bearer tok-abc-123, or Basic dXNlcjpwYXNz. {\"access_token\": \"pw1234\"} key=AKIA123";
        let shown = redact_text(text);
        assert_clean(&shown);
        assert!(shown.contains("GET https://***@h/p?token=*** failed"), "{shown}");
        assert!(shown.contains("Authorization: Bearer ***\n"), "{shown}");
        assert!(shown.contains("\"access_token\": \"***\""), "{shown}");
        assert!(shown.contains("or Bearer ***, or Basic ***."), "{shown}");
        assert!(shown.ends_with("key=***"), "{shown}");
    }

    #[test]
    fn free_text_without_credentials_is_unchanged() {
        for text in [
            "query failed: parse error at char 5: unexpected \"}\"",
            "use a bearer token or basic auth; see http://host:9090/graph?g0.expr=up",
            "model_name=\"a\",job=\"vllm\" == 1",
            "",
        ] {
            assert_eq!(redact_text(text), text);
        }
    }
}
