//! One decoder for every source: raw exchange in, [`Response`] or a precise [`SourceError`] out.
//!
//! The decoder is the single place that knows the Prometheus envelope, so the live client and a replay
//! can never disagree about what a body means. It is written for hostile input: bodies come from
//! whatever answers at the configured URL (a proxy's HTML error page, a login screen, a cut-off
//! response), and each of those has to become an error a person can act on rather than a panic or a
//! bare "expected value at line 1 column 1".
//!
//! Parsing happens in two passes. The first reads only the envelope's small fields and skips `data`,
//! which both validates the JSON and tells us whether we are looking at a Prometheus answer at all. The
//! second reads `data` straight into typed samples; sample values are parsed while deserialising so a
//! large matrix is never held as a generic JSON tree.
//!
//! This file reads the envelope; `data.rs` holds the serde visitors of the data a success carries,
//! `summed.rs` reads an answer as a `sum by` of it ([`decode_summed`]), `errors.rs` says what a body
//! that is no answer means, and `excerpt.rs` quotes such a body (plain text, HTML error pages).

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use super::{Data, Exchange, Request, Response, SourceError};

mod data;
mod errors;
mod excerpt;
mod summed;
#[cfg(test)]
mod tests;

pub use summed::{decode_folded, decode_summed, Fold};

use data::QueryData;
use errors::{decode_err, describe_json_error, json_excerpt, not_prometheus, serde_detail};
use excerpt::short;

/// Turn a raw exchange into a response, or a clear error.
///
/// `url` is what error messages name (the caller's choice: base URL or endpoint, never with credentials).
pub fn decode(url: &str, req: &Request, ex: &Exchange) -> Result<Response, SourceError> {
    // The usual answer, a success, in one pass. Anything else (an error, an odd envelope, data of
    // an unexpected shape) is read again, the envelope's fields first, for its message.
    match decode_success(req, &ex.body) {
        Some(response) => Ok(response),
        None => decode_fields(url, req, ex),
    }
}

/// [`decode`] field by field: the envelope's small fields first, then the data a success carries.
fn decode_fields(url: &str, req: &Request, ex: &Exchange) -> Result<Response, SourceError> {
    let ok_status = (200..300).contains(&ex.http_status);
    let body = ex.body.as_str();

    if body.trim().is_empty() {
        return Err(if ok_status { decode_err(url, format!("HTTP {} with an empty body", ex.http_status)) } else { not_prometheus(url, ex) });
    }

    let head: Head = match serde_json::from_str(body) {
        Ok(h) => h,
        Err(e) => return Err(if ok_status { decode_err(url, describe_json_error(body, &e)) } else { not_prometheus(url, ex) }),
    };
    // serde also reads a struct from a JSON array; an envelope is always an object.
    let status = if body.trim_start().starts_with('{') { head.status.as_ref().and_then(Value::as_str) } else { None };

    match status {
        Some("error") => Err(SourceError::Api {
            url: url.to_string(),
            status: ex.http_status,
            error_type: head.error_type.as_ref().map(value_text).filter(|s| !s.is_empty()).unwrap_or_else(|| "unknown error".to_string()),
            message: head.error.as_ref().map(value_text).filter(|s| !s.is_empty()).unwrap_or_else(|| "(no message)".to_string()),
        }),
        Some("success") => {
            let (data, ignored) = decode_data(url, req, body)?;
            Ok(success(data, ignored, head.warnings.as_ref(), head.infos.as_ref()))
        }
        Some(other) if ok_status => Err(decode_err(url, format!("unknown response status {:?} (expected \"success\" or \"error\")", short(other, 40)))),
        None if ok_status => Err(decode_err(
            url,
            format!(
                "not a Prometheus API response: JSON without a \"status\" field ({}); check that the URL is the \
                 API base, e.g. http://host:9090",
                json_excerpt(body)
            ),
        )),
        _ => Err(not_prometheus(url, ex)),
    }
}

/// A success's response: its data, and the envelope's warnings and infos (with one more warning
/// when native histogram series were left out).
fn success(data: Data, ignored: usize, warnings: Option<&Value>, infos: Option<&Value>) -> Response {
    let mut warnings = string_list(warnings);
    if ignored > 0 {
        warnings.push(format!("native histogram samples are not supported and were ignored ({ignored} series)"));
    }
    Response { data, warnings, infos: string_list(infos) }
}

/// A `"status": "success"` envelope with the data a request expects, read in one pass; `None` for
/// anything else, which [`decode`] then reads field by field to say what is wrong. The same
/// response as that slower path gives for a success (a test holds them together).
fn decode_success(req: &Request, body: &str) -> Option<Response> {
    // serde also reads a struct from a JSON array; an envelope is always an object.
    if !body.trim_start().starts_with('{') {
        return None;
    }
    let (data, ignored, warnings, infos) = match req {
        Request::LabelValues { .. } => {
            let env: Envelope<Vec<String>> = serde_json::from_str(body).ok()?;
            let labels = env.data.filter(|_| env.status.as_ref().and_then(Value::as_str) == Some("success"))?;
            (label_values(labels), 0, env.warnings, env.infos)
        }
        Request::Instant { .. } | Request::Range { .. } => {
            let env: Envelope<QueryData> = serde_json::from_str(body).ok()?;
            let (data, ignored) = env.data.filter(|_| env.status.as_ref().and_then(Value::as_str) == Some("success"))?.into_data().ok()?;
            (data, ignored, env.warnings, env.infos)
        }
    };
    Some(success(data, ignored, warnings.as_ref(), infos.as_ref()))
}

/// The envelope: its small fields, and the data as `D` reads it. Loose types on purpose for the
/// small fields: an oddly typed one should give a message about that field, not a serde type error
/// about the whole body. A duplicated or too deeply nested field stops every reading alike.
#[derive(Deserialize)]
struct Envelope<D> {
    #[serde(default)]
    status: Option<Value>,
    #[serde(default, rename = "errorType")]
    error_type: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    warnings: Option<Value>,
    #[serde(default)]
    infos: Option<Value>,
    #[serde(default = "none")]
    data: Option<D>,
}

/// The envelope's small fields alone, the data skipped.
type Head = Envelope<IgnoredAny>;

/// A label-values answer's names, sorted and without repeats.
fn label_values(mut labels: Vec<String>) -> Data {
    labels.sort();
    labels.dedup();
    Data::Labels(labels)
}

fn decode_data(url: &str, req: &Request, body: &str) -> Result<(Data, usize), SourceError> {
    match req {
        Request::LabelValues { .. } => {
            let env: DataOnly<Vec<String>> =
                serde_json::from_str(body).map_err(|e| decode_err(url, format!("unexpected label values: {}", serde_detail(body, &e))))?;
            Ok((label_values(env.data.unwrap_or_default()), 0))
        }
        Request::Instant { .. } | Request::Range { .. } => {
            let env: DataOnly<QueryData> =
                serde_json::from_str(body).map_err(|e| decode_err(url, format!("unexpected query result: {}", serde_detail(body, &e))))?;
            let Some(data) = env.data else {
                return Err(decode_err(url, "\"status\":\"success\" without \"data\"".to_string()));
            };
            data.into_data().map_err(|detail| decode_err(url, detail))
        }
    }
}

#[derive(Deserialize)]
struct DataOnly<D> {
    #[serde(default = "none")]
    data: Option<D>,
}

fn none<D>() -> Option<D> {
    None
}

/// A JSON value as plain text: strings unquoted, anything else as compact JSON.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `warnings` / `infos`: normally a list of strings; anything else is kept as text rather than lost.
fn string_list(v: Option<&Value>) -> Vec<String> {
    match v {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(value_text).collect(),
        Some(other) => vec![value_text(other)],
    }
}
