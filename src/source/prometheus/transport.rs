//! Transport errors read for what a person can act on: the chain of causes, its innermost part, the
//! I/O error kind, and a server that went away mid-answer.

use std::error::Error as StdError;
use std::io;

pub(super) fn io_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Standard base64 with padding, for masking the `Authorization: Basic` value.
pub(super) fn base64(input: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(input)
}

/// The server went away mid-request or mid-answer: hyper's "connection closed before message
/// completed", or "channel closed" when the connection died before the request went out (an idle
/// connection closed by the server, a TLS 1.3 server hanging up after the handshake). Matched on
/// text: hyper is not a direct dependency, and its error kinds are not public through reqwest.
pub(crate) fn is_incomplete_message(e: &reqwest::Error) -> bool {
    let t = chain_text(e).to_ascii_lowercase();
    t.contains("connection closed")
        || t.contains("channel closed")
        || t.contains("was canceled")
        || t.contains("end of file before message length reached")
        || t.contains("unexpected eof")
}

/// The messages of an error's sources, outermost first, joined by ": ". The top-level reqwest message
/// is skipped: it repeats the URL and says nothing about the cause.
pub(crate) fn chain_text(e: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(err) = cur {
        let msg = err.to_string();
        if !msg.is_empty() && parts.last() != Some(&msg) {
            parts.push(msg);
        }
        cur = err.source();
    }
    if parts.is_empty() {
        parts.push(e.to_string());
    }
    parts.join(": ")
}

/// The most specific part of a chain text, without ` (os error N)`.
pub(crate) fn innermost(text: &str) -> String {
    let last = text.rsplit(": ").next().unwrap_or(text).trim();
    let last = match last.find(" (os error") {
        Some(i) => &last[..i],
        None => last,
    };
    let mut chars = last.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => "unknown error".to_string(),
    }
}

pub(crate) fn io_error_kind(e: &reqwest::Error) -> Option<io::ErrorKind> {
    let mut cur: Option<&(dyn StdError + 'static)> = e.source();
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            return Some(io.kind());
        }
        cur = err.source();
    }
    None
}
