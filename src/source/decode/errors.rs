//! What a body that is no Prometheus answer means, as an error a person can act on: an HTTP
//! status explained, JSON that does not parse or is not an envelope, with where and what.

use serde_json::error::Category;

use super::excerpt::{collapse_ws, excerpt, html_excerpt, looks_like_html, short};
use crate::source::{Exchange, SourceError};

pub(super) fn decode_err(url: &str, detail: String) -> SourceError {
    SourceError::Decode { url: url.to_string(), detail }
}

pub(super) fn not_prometheus(url: &str, ex: &Exchange) -> SourceError {
    if let Some(meaning) = status_meaning(ex) {
        return SourceError::HttpStatus { url: url.to_string(), status: ex.http_status, meaning, excerpt: excerpt(&ex.body, &ex.content_type) };
    }
    SourceError::NotPrometheus {
        url: url.to_string(),
        status: ex.http_status,
        content_type: if ex.content_type.trim().is_empty() { "no content type".to_string() } else { short(ex.content_type.trim(), 80) },
        excerpt: excerpt(&ex.body, &ex.content_type),
    }
}

/// What an HTTP status means for vllm-diag and what to do about it, for the statuses that say more
/// than the body does. `None`: the body is the best explanation there is.
fn status_meaning(ex: &Exchange) -> Option<String> {
    let m = match ex.http_status {
        400 if ex.body.contains("HTTP request to an HTTPS server") => "the server speaks HTTPS on this port: write the URL with https://",
        401 => {
            "not authorized: the server wants credentials, or refused the ones given. Check --basic-auth-user \
             with --basic-auth-password-file ($VLLM_DIAG_BASIC_AUTH_PASSWORD), or --bearer-token-file \
             ($VLLM_DIAG_BEARER_TOKEN), or user:password@ in the URL"
        }
        403 => {
            "forbidden: the credentials were accepted but may not read this API (or this --tenant); ask for \
             read access to the query API"
        }
        407 => "a proxy between here and the server wants its own credentials (proxy authentication required)",
        429 => {
            "too many requests: the server is rate-limiting vllm-diag (retried as long as Retry-After and the \
             --timeout deadline allowed). Try again later or lower --concurrency"
        }
        500 => "internal server error: the server failed while answering; its logs say why",
        502 | 504 => {
            "a proxy or gateway in front of the server got no good answer from it: the server may be down, \
             restarting or overloaded (retried while the --timeout deadline allowed)"
        }
        503 => {
            "service unavailable: the server or a proxy in front of it is overloaded, restarting or down \
             (retried while the --timeout deadline allowed)"
        }
        _ => return None,
    };
    Some(m.to_string())
}

/// Why a 2xx body is not readable JSON, in words.
pub(super) fn describe_json_error(body: &str, e: &serde_json::Error) -> String {
    let first = body.trim_start().chars().next().unwrap_or(' ');
    match e.classify() {
        Category::Eof => format!("truncated JSON at byte {} (the body stops in the middle of a value; a proxy or a size limit may have cut it)", body.len()),
        Category::Syntax if first != '{' && first != '[' => {
            let mut d = format!("response body is not JSON (starts with {:?})", short(body.trim_start(), 40));
            if looks_like_html(body, "") {
                d.push_str(&format!("; it is an {}: check that the URL is the Prometheus API base, e.g. http://host:9090", html_excerpt(body)));
            }
            d
        }
        Category::Syntax => format!("invalid JSON at byte {}: {}", byte_offset(body, e.line(), e.column()), strip_position(&e.to_string())),
        Category::Data if first != '{' => {
            format!("not a Prometheus API response: JSON that is not an object ({})", json_excerpt(body))
        }
        Category::Data | Category::Io => {
            format!("not a Prometheus API response: {} ({})", strip_position(&e.to_string()), json_excerpt(body))
        }
    }
}

/// A serde_json data error with the byte offset, e.g. `sample value "abc" is not a number (at byte 120)`.
pub(super) fn serde_detail(body: &str, e: &serde_json::Error) -> String {
    if e.classify() == Category::Eof {
        return describe_json_error(body, e);
    }
    format!("{} (at byte {})", strip_position(&e.to_string()), byte_offset(body, e.line(), e.column()))
}

/// serde_json appends " at line L column C"; we report a byte offset instead.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Byte offset of serde_json's 1-based line and column (column counts bytes).
pub(super) fn byte_offset(body: &str, line: usize, column: usize) -> usize {
    if line == 0 {
        return 0;
    }
    let line_start: usize = body.split_inclusive('\n').take(line - 1).map(str::len).sum();
    (line_start + column.saturating_sub(1)).min(body.len())
}

/// The start of a JSON body, whitespace collapsed.
pub(super) fn json_excerpt(body: &str) -> String {
    let collapsed = collapse_ws(body);
    format!("starts with {:?}", short(&collapsed, 60))
}
