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
//! [`decode_summed`] reads an answer as `sum by (L)` of it would have been: only the labels in `L`
//! are kept as the samples are read (the others are skipped, never allocated), and series left
//! with the same labels are added up. explain asks some per-replica reads unaggregated and sums
//! them itself this way, which costs the server less than its own `sum by` into thousands of groups.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::error::Category;
use serde_json::Value;

use super::{Data, Exchange, Labels, Request, Response, Sample, Series, SourceError};
use crate::prom::parse_sample_value;

/// Longest excerpt of a foreign body quoted in an error.
const EXCERPT_CHARS: usize = 200;

thread_local! {
    /// The labels [`decode_summed`] keeps, while it decodes (on this thread, with no await point in
    /// between); None otherwise.
    static KEEP: RefCell<Option<std::rc::Rc<[String]>>> = const { RefCell::new(None) };
}

/// [`decode`], keeping only the labels named in `by` and adding up the values of series (or
/// samples) left with the same labels at the same timestamp: the answer `sum by (by) (...)` of the
/// query would have given (a series lacking a label of `by` is grouped without it, as there). The
/// server's `sum by` adds in its own order; this adds in the answer's, so a sum of several series
/// may differ from it in the last bits.
pub fn decode_summed(url: &str, req: &Request, ex: &Exchange, by: &[String]) -> Result<Response, SourceError> {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            KEEP.with(|k| *k.borrow_mut() = None);
        }
    }
    KEEP.with(|k| *k.borrow_mut() = Some(by.into()));
    let _reset = Reset;
    let mut resp = decode(url, req, ex)?;
    drop(_reset);
    resp.data = match resp.data {
        Data::Vector(samples) => Data::Vector(sum_samples(samples)),
        Data::Matrix(series) => Data::Matrix(sum_series(series)),
        other => other,
    };
    Ok(resp)
}

/// Samples sorted by labels (as [`decode`] leaves them), those with the same labels added up (the
/// earliest timestamp kept).
fn sum_samples(samples: Vec<Sample>) -> Vec<Sample> {
    let mut out: Vec<Sample> = Vec::with_capacity(samples.len());
    for s in samples {
        match out.last_mut() {
            Some(last) if last.labels == s.labels => {
                last.v += s.v;
                last.t = last.t.min(s.t);
            }
            _ => out.push(s),
        }
    }
    out
}

/// Series sorted by labels (as [`decode`] leaves them), those with the same labels merged: the
/// values at each timestamp added up, a timestamp only one of them has kept as it is.
fn sum_series(series: Vec<Series>) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::with_capacity(series.len());
    for s in series {
        match out.last_mut() {
            Some(last) if last.labels == s.labels => {
                let mut points: std::collections::BTreeMap<i64, (f64, f64)> = std::collections::BTreeMap::new();
                for (t, v) in last.points.drain(..).chain(s.points) {
                    let e = points.entry((t * 1000.0).round() as i64).or_insert((t, 0.0));
                    e.1 += v;
                }
                last.points = points.into_values().collect();
            }
            _ => out.push(s),
        }
    }
    out
}

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

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum QueryData {
    Vector(Option<Vec<RawSample>>),
    Matrix(Option<Vec<RawSeries>>),
    Scalar(Point),
    String(StringPoint),
}

impl QueryData {
    /// The typed data and how many series carried only native histograms (and were dropped).
    fn into_data(self) -> Result<(Data, usize), String> {
        match self {
            QueryData::Vector(raw) => {
                let mut ignored = 0;
                let mut samples: Vec<Sample> = Vec::new();
                for s in raw.unwrap_or_default() {
                    match (s.value, s.histogram) {
                        (Some(p), _) => samples.push(Sample { labels: s.metric.0.into(), t: p.t, v: p.v }),
                        (None, Some(_)) => ignored += 1,
                        (None, None) => return Err(format!("a vector sample has neither \"value\" nor \"histogram\" ({})", show_labels(&s.metric.0))),
                    }
                }
                samples.sort_by(|a, b| a.labels.cmp(&b.labels).then(a.t.total_cmp(&b.t)));
                Ok((Data::Vector(samples), ignored))
            }
            QueryData::Matrix(raw) => {
                let mut ignored = 0;
                let mut series: Vec<Series> = Vec::new();
                for s in raw.unwrap_or_default() {
                    if s.histograms.is_some() {
                        ignored += 1;
                    }
                    if let Some(values) = s.values {
                        let points = values.into_iter().map(|p| (p.t, p.v)).collect();
                        series.push(Series { labels: s.metric.0, points });
                    }
                }
                series.sort_by(|a, b| a.labels.cmp(&b.labels));
                Ok((Data::Matrix(series), ignored))
            }
            QueryData::Scalar(p) => Ok((Data::Scalar(p.v), 0)),
            QueryData::String(p) => Ok((Data::String(p.s), 0)),
        }
    }
}

/// A vector element. Either `value` or `histogram` is present.
#[derive(Deserialize)]
struct RawSample {
    #[serde(default)]
    metric: Metric,
    #[serde(default)]
    value: Option<Point>,
    #[serde(default)]
    histogram: Option<IgnoredAny>,
}

/// A matrix element. `values`, `histograms`, or both.
#[derive(Deserialize)]
struct RawSeries {
    #[serde(default)]
    metric: Metric,
    #[serde(default)]
    values: Option<Vec<Point>>,
    #[serde(default)]
    histograms: Option<IgnoredAny>,
}

/// A series' labels: all of them, or, while [`decode_summed`] runs, those it keeps (the others are
/// skipped unread).
#[derive(Default)]
struct Metric(Labels);

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Some(keep) = KEEP.with(|k| k.borrow().clone()) else {
            return Labels::deserialize(d).map(Metric);
        };
        struct V(std::rc::Rc<[String]>);
        impl<'de> Visitor<'de> for V {
            type Value = Metric;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of label names and values")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Metric, A::Error> {
                let mut pairs = Vec::with_capacity(self.0.len());
                while let Some(name) = map.next_key::<Name<'de>>()? {
                    if self.0.iter().any(|k| *k == *name.0) {
                        let value = map.next_value::<String>()?;
                        // An empty value is no label, as for `sum by`.
                        if !value.is_empty() {
                            pairs.push((name.0.into_owned(), value));
                        }
                    } else {
                        // Still a string, as in any label set; not kept.
                        map.next_value::<Name<'de>>()?;
                    }
                }
                Ok(Metric(pairs.into_iter().collect()))
            }
        }
        d.deserialize_map(V(keep))
    }
}

/// A label name, borrowed from the body where it can be (no escapes in it).
struct Name<'de>(std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a label name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Name<'de>, E> {
                Ok(Name(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Name<'de>, E> {
                Ok(Name(std::borrow::Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// `[<unix seconds>, "<value>"]` with the value already parsed.
struct Point {
    t: f64,
    v: f64,
}

/// `[<unix seconds>, "<text>"]`.
struct StringPoint {
    s: String,
}

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Point;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [timestamp, \"value\"] pair")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Point, A::Error> {
                let t: Num = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let v: Num = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(Point { t: t.0, v: v.0 })
            }
        }
        d.deserialize_seq(V)
    }
}

impl<'de> Deserialize<'de> for StringPoint {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StringPoint;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a [timestamp, \"text\"] pair")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<StringPoint, A::Error> {
                let _t: Num = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let s: String = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(StringPoint { s })
            }
        }
        d.deserialize_seq(V)
    }
}

/// A number written either as a JSON number or as a Prometheus value string ("1.5", "NaN", "+Inf").
struct Num(f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a number in a string")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                parse_sample_value(v).map(Num).ok_or_else(|| E::custom(format!("sample value {:?} is not a number", short(v, 60))))
            }
        }
        d.deserialize_any(V)
    }
}

/// `{a="1", b="2"}`, cut short for messages.
fn show_labels(labels: &Labels) -> String {
    let inner: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    short(&format!("{{{}}}", inner.join(", ")), 120)
}

fn decode_err(url: &str, detail: String) -> SourceError {
    SourceError::Decode { url: url.to_string(), detail }
}

fn not_prometheus(url: &str, ex: &Exchange) -> SourceError {
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

/// Why a 2xx body is not readable JSON, in words.
fn describe_json_error(body: &str, e: &serde_json::Error) -> String {
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
fn serde_detail(body: &str, e: &serde_json::Error) -> String {
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
fn byte_offset(body: &str, line: usize, column: usize) -> usize {
    if line == 0 {
        return 0;
    }
    let line_start: usize = body.split_inclusive('\n').take(line - 1).map(str::len).sum();
    (line_start + column.saturating_sub(1)).min(body.len())
}

/// The start of a JSON body, whitespace collapsed.
fn json_excerpt(body: &str) -> String {
    let collapsed = collapse_ws(body);
    format!("starts with {:?}", short(&collapsed, 60))
}

/// At most `n` characters of `s`, with "..." when cut.
fn short(s: &str, n: usize) -> String {
    if s.chars().count() > n {
        let cut: String = s.chars().take(n).collect();
        format!("{cut}...")
    } else {
        s.to_string()
    }
}

fn collapse_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn looks_like_html(body: &str, content_type: &str) -> bool {
    if content_type.to_ascii_lowercase().contains("html") {
        return true;
    }
    let head: String = body.trim_start().chars().take(512).collect::<String>().to_ascii_lowercase();
    head.starts_with('<') && ["<!doctype html", "<html", "<head", "<body", "<title", "<h1", "<center", "<p>"].iter().any(|t| head.contains(t))
}

/// A short, readable excerpt of a body that is not a Prometheus response.
fn excerpt(body: &str, content_type: &str) -> String {
    if body.trim().is_empty() {
        return "(empty body)".to_string();
    }
    if looks_like_html(body, content_type) {
        return html_excerpt(body);
    }
    let text = collapse_ws(body);
    format!("{:?}", head_and_tail(&text, EXCERPT_CHARS))
}

/// At most about `n` characters of a plain-text error: its start and its end, since servers often
/// put the request first and the reason last (VictoriaMetrics: `remoteAddr: ...; requestURI: ...;
/// unsupported path requested: ...`).
fn head_and_tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    if count <= n {
        return s.to_string();
    }
    let tail_len = n * 2 / 5;
    let head: String = s.chars().take(n - tail_len).collect();
    let tail: String = s.chars().skip(count - tail_len).collect();
    format!("{head} ... {tail}")
}

/// `HTML page titled "502 Bad Gateway"`, or the page's text when it has no title.
fn html_excerpt(body: &str) -> String {
    if let Some(title) = html_title(body) {
        let text = collapse_ws(&decode_entities(&strip_tags(&title)));
        if !text.is_empty() {
            return format!("HTML page titled {:?}", short(&text, EXCERPT_CHARS));
        }
    }
    let text = collapse_ws(&decode_entities(&strip_tags(&drop_blocks(body))));
    if text.is_empty() {
        "HTML page without text".to_string()
    } else {
        format!("HTML page: {:?}", short(&text, EXCERPT_CHARS))
    }
}

/// Text between `<title ...>` and `</title>`, if present. ASCII lowercasing keeps byte offsets valid.
fn html_title(body: &str) -> Option<String> {
    let lower = body.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let content_start = open + lower[open..].find('>')? + 1;
    let close = content_start + lower[content_start..].find("</title")?;
    Some(body[content_start..close].to_string())
}

/// Removes `<script>` and `<style>` elements with their content.
fn drop_blocks(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let lower = body.to_ascii_lowercase();
    let mut i = 0;
    while i < body.len() {
        let next = ["<script", "<style"].iter().filter_map(|t| lower[i..].find(t).map(|p| (i + p, *t))).min_by_key(|(p, _)| *p);
        match next {
            Some((p, tag)) => {
                out.push_str(&body[i..p]);
                let closing = format!("</{}", &tag[1..]);
                match lower[p..].find(&closing) {
                    Some(c) => {
                        let after = p + c;
                        i = match lower[after..].find('>') {
                            Some(g) => after + g + 1,
                            None => body.len(),
                        };
                    }
                    None => i = body.len(),
                }
            }
            None => {
                out.push_str(&body[i..]);
                break;
            }
        }
    }
    out
}

/// Replaces every `<...>` with a space.
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_tag = false;
    for c in s.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn decode_entities(s: &str) -> String {
    s.replace("&nbsp;", " ").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&#39;", "'").replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};

    const URL: &str = "http://prom:9090";

    fn instant() -> Request {
        Request::Instant { query: "up".into(), time: Utc.timestamp_opt(1_700_000_000, 0).unwrap() }
    }

    fn range() -> Request {
        Request::Range {
            query: "up".into(),
            start: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
            end: Utc.timestamp_opt(1_700_000_600, 0).unwrap(),
            step_seconds: 60,
        }
    }

    fn label_values() -> Request {
        Request::LabelValues {
            label: "__name__".into(),
            matchers: vec!["{__name__=~\"vllm:.*\"}".into()],
            start: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
            end: Utc.timestamp_opt(1_700_000_600, 0).unwrap(),
        }
    }

    fn ex(status: u16, ct: &str, body: &str) -> Exchange {
        Exchange { http_status: status, content_type: ct.into(), body: body.into() }
    }

    fn ok(body: &str) -> Exchange {
        ex(200, "application/json", body)
    }

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn decodes_a_vector_sorted_by_labels() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"model_name":"b"},"value":[1700000000.5,"2"]},
            {"metric":{"model_name":"a"},"value":[1700000000.5,"1.5e3"]}]}}"#;
        let r = decode(URL, &instant(), &ok(body)).unwrap();
        assert_eq!(
            r.data,
            Data::Vector(vec![
                Sample { labels: labels(&[("model_name", "a")]).into(), t: 1_700_000_000.5, v: 1500.0 },
                Sample { labels: labels(&[("model_name", "b")]).into(), t: 1_700_000_000.5, v: 2.0 },
            ])
        );
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn decodes_special_float_values() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"a":"1"},"value":[1,"NaN"]},
            {"metric":{"a":"2"},"value":[1,"+Inf"]},
            {"metric":{"a":"3"},"value":[1,"-Inf"]}]}}"#;
        let Data::Vector(s) = decode(URL, &instant(), &ok(body)).unwrap().data else { panic!("not a vector") };
        assert!(s[0].v.is_nan());
        assert_eq!(s[1].v, f64::INFINITY);
        assert_eq!(s[2].v, f64::NEG_INFINITY);
    }

    #[test]
    fn decodes_a_matrix_sorted_by_labels_keeping_point_order() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"pod":"z"},"values":[[10,"1"],[20,"2"]]},
            {"metric":{"pod":"a"},"values":[[10,"3"],[20,"4"]]}]}}"#;
        let r = decode(URL, &range(), &ok(body)).unwrap();
        assert_eq!(
            r.data,
            Data::Matrix(vec![
                Series { labels: labels(&[("pod", "a")]), points: vec![(10.0, 3.0), (20.0, 4.0)] },
                Series { labels: labels(&[("pod", "z")]), points: vec![(10.0, 1.0), (20.0, 2.0)] },
            ])
        );
    }

    /// Read summed by (le, model_name, instance): the other labels are dropped as they are read,
    /// series left alike are added up per timestamp (one's extra point kept), a series without
    /// a label of the grouping is grouped without it, and a vector is summed the same way. The
    /// next decode on the thread keeps every label again.
    #[test]
    fn a_summed_read_keeps_the_grouping_labels_and_adds_up_series_left_alike() {
        let by: Vec<String> = ["le", "model_name", "instance"].iter().map(|s| s.to_string()).collect();
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"instance":"a","engine":"0","job":"v","le":"0.5","model_name":"m"},"values":[[10,"1"],[20,"2"]]},
            {"metric":{"instance":"a","engine":"1","job":"v","le":"0.5","model_name":"m"},"values":[[10,"0.5"],[20,"NaN"],[30,"4"]]},
            {"metric":{"instance":"b","engine":"0","job":"v","le":"0.5","model_name":"m"},"values":[[10,"7"]]},
            {"metric":{"engine":"0","le":"+Inf","model_name":"m"},"values":[[20,"3"]]},
            {"metric":{"engine":"1","le":"+Inf","model_name":"m"},"values":[[20,"5"]]}]}}"#;
        let r = decode_summed(URL, &range(), &ok(body), &by).unwrap();
        let Data::Matrix(series) = r.data else { panic!("{:?}", r.data) };
        let got: Vec<(Labels, Vec<(f64, f64)>)> = series.into_iter().map(|s| (s.labels, s.points)).collect();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].0, labels(&[("instance", "a"), ("le", "0.5"), ("model_name", "m")]));
        assert_eq!(got[0].1[0], (10.0, 1.5));
        assert!(got[0].1[1].0 == 20.0 && got[0].1[1].1.is_nan(), "NaN adds up to NaN, as in sum: {:?}", got[0].1);
        assert_eq!(got[0].1[2], (30.0, 4.0));
        assert_eq!(got[1], (labels(&[("instance", "b"), ("le", "0.5"), ("model_name", "m")]), vec![(10.0, 7.0)]));
        assert_eq!(got[2], (labels(&[("le", "+Inf"), ("model_name", "m")]), vec![(20.0, 8.0)]));

        let body = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"instance":"a","engine":"1","le":"1"},"value":[10,"2"]},
            {"metric":{"instance":"a","engine":"0","le":"1"},"value":[10,"3"]}]}}"#;
        let r = decode_summed(URL, &instant(), &ok(body), &by).unwrap();
        let Data::Vector(samples) = r.data else { panic!("{:?}", r.data) };
        assert_eq!(samples.len(), 1);
        assert_eq!((samples[0].labels.as_ref(), samples[0].v), (&labels(&[("instance", "a"), ("le", "1")]), 5.0));
        // An empty value is no label, as for `sum by`; a dropped label is still read as a string.
        let empty = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"instance":"","le":"1"},"value":[10,"1"]},
            {"metric":{"le":"1"},"value":[10,"2"]}]}}"#;
        let Data::Vector(samples) = decode_summed(URL, &instant(), &ok(empty), &by).unwrap().data else { panic!() };
        assert_eq!(samples.iter().map(|s| (s.labels.as_ref().clone(), s.v)).collect::<Vec<_>>(), vec![(labels(&[("le", "1")]), 3.0)]);
        let bad = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":7,"le":"1"},"value":[10,"1"]}]}}"#;
        assert!(decode_summed(URL, &instant(), &ok(bad), &by).is_err(), "a label value that is not a string");

        let r = decode(URL, &instant(), &ok(body)).unwrap();
        let Data::Vector(samples) = r.data else { panic!() };
        assert_eq!(samples.len(), 2, "a plain decode keeps every label");
        assert!(samples.iter().all(|s| s.labels.contains_key("engine")));
    }

    #[test]
    fn decodes_scalar_and_string_results() {
        let s = decode(URL, &instant(), &ok(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"0.25"]}}"#));
        assert_eq!(s.unwrap().data, Data::Scalar(0.25));
        let s = decode(URL, &instant(), &ok(r#"{"status":"success","data":{"resultType":"string","result":[1,"hello"]}}"#));
        assert_eq!(s.unwrap().data, Data::String("hello".into()));
    }

    #[test]
    fn accepts_result_type_after_result() {
        let body = r#"{"status":"success","data":{"result":[1,"3"],"resultType":"scalar"}}"#;
        assert_eq!(decode(URL, &instant(), &ok(body)).unwrap().data, Data::Scalar(3.0));
    }

    #[test]
    fn decodes_label_values_sorted() {
        let body = r#"{"status":"success","data":["vllm:b","vllm:a"]}"#;
        let r = decode(URL, &label_values(), &ok(body)).unwrap();
        assert_eq!(r.data, Data::Labels(vec!["vllm:a".into(), "vllm:b".into()]));
    }

    #[test]
    fn null_label_values_are_an_empty_list() {
        let r = decode(URL, &label_values(), &ok(r#"{"status":"success","data":null}"#)).unwrap();
        assert_eq!(r.data, Data::Labels(vec![]));
    }

    #[test]
    fn an_empty_vector_is_not_an_error() {
        let r = decode(URL, &instant(), &ok(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#));
        assert_eq!(r.unwrap().data, Data::Vector(vec![]));
    }

    #[test]
    fn a_success_read_in_one_pass_is_what_the_field_by_field_reading_gives() {
        let cases: Vec<(Request, &str)> = vec![
            (
                instant(),
                r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"b":"2"},"value":[1,"NaN"]},{"metric":{"a":"1"},"value":[1,"+Inf"]}]}}"#,
            ),
            (range(), r#"{"data":{"result":[{"metric":{"a":"1"},"values":[[1,"1"],[61,"2"]]}],"resultType":"matrix"},"status":"success"}"#),
            (instant(), r#"{"status":"success","data":{"resultType":"scalar","result":[1,"3"]}}"#),
            (instant(), r#"{"status":"success","data":{"resultType":"string","result":[1,"x"]}}"#),
            (instant(), r#"{"status":"success","warnings":"one","infos":[1,"two"],"errorType":"","data":{"resultType":"vector","result":[]}}"#),
            (instant(), r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"histogram":[1,{"count":"2"}]}]}}"#),
            (label_values(), r#"{"status":"success","data":["b","a","b"]}"#),
        ];
        for (req, body) in cases {
            // Compared as text: NaN is not equal to itself. On any HTTP status (a success envelope
            // is read as one whatever the status), and with the labels projected as a summed read
            // projects them.
            for status in [200, 503] {
                let exchange = ex(status, "application/json", body);
                let fields = decode_fields(URL, &req, &exchange);
                assert!(fields.is_ok(), "{body}: {fields:?}");
                assert_eq!(format!("{:?}", decode_success(&req, body).map(Ok::<_, SourceError>)), format!("{:?}", Some(fields)), "{body}");
            }
            KEEP.with(|k| *k.borrow_mut() = Some(vec!["a".to_string()].into()));
            let (one_pass, fields) = (decode_success(&req, body), decode_fields(URL, &req, &ok(body)));
            KEEP.with(|k| *k.borrow_mut() = None);
            assert_eq!(format!("{:?}", one_pass.map(Ok::<_, SourceError>)), format!("{:?}", Some(fields)), "{body} (projected)");
        }
        // What one pass cannot read is left to the fields, which say what is wrong.
        for (req, body) in [
            (instant(), r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#),
            (instant(), r#"{"status":"success"}"#),
            (instant(), r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}}"#),
            (label_values(), r#"{"status":"success","data":null}"#),
            (instant(), r#"[{"status":"success"}]"#),
            (instant(), ""),
            // A duplicated envelope field is an error either way.
            (instant(), r#"{"status":"success","error":"a","error":"b","data":{"resultType":"vector","result":[]}}"#),
            (instant(), r#"{"status":"success","errorType":"a","errorType":"b","data":{"resultType":"vector","result":[]}}"#),
        ] {
            assert_eq!(decode_success(&req, body), None, "{body}");
            if !body.is_empty() {
                assert!(decode(URL, &req, &ok(body)).is_err() || body.contains("null"), "{body}");
            }
        }
    }

    #[test]
    fn copies_warnings_and_infos_through() {
        let body = r#"{"status":"success","warnings":["partial response: store down"],"infos":["PromQL info: x"],
            "data":{"resultType":"vector","result":[]}}"#;
        let r = decode(URL, &instant(), &ok(body)).unwrap();
        assert_eq!(r.warnings, vec!["partial response: store down".to_string()]);
        assert_eq!(r.infos, vec!["PromQL info: x".to_string()]);
    }

    #[test]
    fn skips_native_histogram_samples_with_a_warning() {
        let body = r#"{"status":"success","warnings":["w"],"data":{"resultType":"vector","result":[
            {"metric":{"a":"1"},"histogram":[1,{"count":"2","sum":"3","buckets":[]}]},
            {"metric":{"a":"2"},"value":[1,"5"]}]}}"#;
        let r = decode(URL, &instant(), &ok(body)).unwrap();
        assert_eq!(r.data, Data::Vector(vec![Sample { labels: labels(&[("a", "2")]).into(), t: 1.0, v: 5.0 }]));
        assert_eq!(r.warnings, vec!["w".to_string(), "native histogram samples are not supported and were ignored (1 series)".to_string()]);
    }

    #[test]
    fn skips_native_histogram_series_in_a_matrix_with_a_warning() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"a":"1"},"histograms":[[1,{"count":"2"}]]}]}}"#;
        let r = decode(URL, &range(), &ok(body)).unwrap();
        assert_eq!(r.data, Data::Matrix(vec![]));
        assert_eq!(r.warnings.len(), 1);
    }

    #[test]
    fn a_value_that_is_not_a_number_is_a_decode_error_naming_it() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"twelve"]}]}}"#;
        let err = decode(URL, &instant(), &ok(body)).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.contains("\"twelve\""), "{detail}");
    }

    #[test]
    fn an_error_envelope_becomes_an_api_error_whatever_the_http_status() {
        for status in [400, 422, 503, 200] {
            let body = r#"{"status":"error","errorType":"bad_data","error":"parse error at char 5"}"#;
            let err = decode(URL, &instant(), &ex(status, "application/json", body)).unwrap_err();
            assert_eq!(err, SourceError::Api { url: URL.into(), status, error_type: "bad_data".into(), message: "parse error at char 5".into() });
        }
    }

    #[test]
    fn an_html_error_page_is_reported_by_its_title() {
        let body = "<html>\n<head><title>502 Bad Gateway</title><style>body{color:red}</style></head>\n\
                    <body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>";
        let err = decode(URL, &instant(), &ex(404, "text/html", body)).unwrap_err();
        let SourceError::NotPrometheus { status, excerpt, content_type, .. } = &err else { panic!("{err:?}") };
        assert_eq!(*status, 404);
        assert_eq!(content_type, "text/html");
        assert_eq!(excerpt, "HTML page titled \"502 Bad Gateway\"");
        let err = decode(URL, &instant(), &ex(502, "text/html", body)).unwrap_err();
        let SourceError::HttpStatus { status, excerpt, meaning, .. } = &err else { panic!("{err:?}") };
        assert_eq!((*status, excerpt.as_str()), (502, "HTML page titled \"502 Bad Gateway\""));
        assert!(meaning.contains("proxy or gateway"), "{meaning}");
    }

    #[test]
    fn an_html_page_without_title_is_reported_by_its_text() {
        let body = "<html><script>var x = '<b>';</script><body><h1>Access   denied</h1> &amp; logged</body></html>";
        let err = decode(URL, &instant(), &ex(400, "", body)).unwrap_err();
        let SourceError::NotPrometheus { excerpt, content_type, .. } = &err else { panic!("{err:?}") };
        assert_eq!(excerpt, "HTML page: \"Access denied & logged\"");
        assert_eq!(content_type, "no content type");
    }

    #[test]
    fn a_plain_text_error_is_quoted_collapsed_and_cut() {
        let body = format!("upstream   connect error\n\nor disconnect {}", "x".repeat(500));
        let err = decode(URL, &instant(), &ex(503, "text/plain", &body)).unwrap_err();
        let SourceError::HttpStatus { excerpt, .. } = &err else { panic!("{err:?}") };
        assert!(excerpt.starts_with("\"upstream connect error or disconnect xxx"), "{excerpt}");
        assert!(excerpt.chars().count() < 220, "{excerpt}");
        assert!(excerpt.contains("..."));
    }

    #[test]
    fn a_long_plain_text_error_keeps_its_end_where_the_reason_often_is() {
        let body = format!(
            "remoteAddr: \"127.0.0.1:50000\"; requestURI: /select/0/prometheus/api/v1/query?{}; unsupported path requested: \"/select/0/prometheus/api/v1/query\"\n",
            "query=x&".repeat(40)
        );
        let err = decode(URL, &instant(), &ex(400, "text/plain; charset=utf-8", &body)).unwrap_err();
        // A 400 in plain text is not Prometheus talking (it answers 400 in JSON).
        let SourceError::NotPrometheus { excerpt, status: 400, .. } = &err else { panic!("{err:?}") };
        assert!(excerpt.starts_with("\"remoteAddr: "), "{excerpt}");
        assert!(excerpt.contains(" ... ") && excerpt.contains("unsupported path requested"), "{excerpt}");
        assert!(excerpt.chars().count() < 220, "{excerpt}");
    }

    #[test]
    fn an_empty_error_body_says_so() {
        let err = decode(URL, &instant(), &ex(404, "", "")).unwrap_err();
        let SourceError::NotPrometheus { excerpt, status, .. } = &err else { panic!("{err:?}") };
        assert_eq!(excerpt, "(empty body)");
        assert_eq!(*status, 404);
    }

    #[test]
    fn json_that_is_not_an_envelope_on_an_error_status_is_not_prometheus() {
        let err = decode(URL, &instant(), &ex(404, "application/json", r#"{"message":"no route"}"#)).unwrap_err();
        let SourceError::NotPrometheus { excerpt, .. } = &err else { panic!("{err:?}") };
        assert!(excerpt.contains("no route"));
    }

    #[test]
    fn statuses_that_explain_themselves_say_what_they_mean_and_what_to_do() {
        let cases: [(u16, &str, &[&str]); 6] = [
            (401, "Unauthorized\n", &["not authorized", "--basic-auth-user", "--bearer-token-file"]),
            (403, "", &["forbidden", "--tenant"]),
            (429, "slow down", &["rate-limiting", "--concurrency"]),
            (503, "", &["unavailable", "restarting"]),
            (504, "<html><title>504 Gateway Time-out</title></html>", &["gateway", "down"]),
            (400, "Client sent an HTTP request to an HTTPS server.\n", &["https://"]),
        ];
        for (status, body, words) in cases {
            let err = decode(URL, &instant(), &ex(status, "text/plain", body)).unwrap_err();
            let SourceError::HttpStatus { status: got, meaning, .. } = &err else { panic!("{status}: {err:?}") };
            assert_eq!(*got, status);
            for w in words {
                assert!(meaning.contains(w), "{status}: {meaning:?} lacks {w:?}");
            }
            let text = err.to_string();
            assert!(text.starts_with(&format!("{URL} answered HTTP {status}: ")), "{text}");
        }
    }

    #[test]
    fn an_error_envelope_wins_over_the_status_meaning() {
        let body = r#"{"status":"error","errorType":"unavailable","error":"too many queries"}"#;
        let err = decode(URL, &instant(), &ex(503, "application/json", body)).unwrap_err();
        assert!(matches!(err, SourceError::Api { status: 503, .. }), "{err:?}");
    }

    #[test]
    fn html_with_status_200_is_a_decode_error_saying_it_is_not_json() {
        let body = "<!DOCTYPE html><html><head><title>Grafana</title></head></html>";
        let err = decode(URL, &instant(), &ex(200, "text/html", body)).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.starts_with("response body is not JSON (starts with \"<!DOCTYPE html>"), "{detail}");
        assert!(detail.contains("it is an HTML page titled \"Grafana\""), "{detail}");
    }

    #[test]
    fn truncated_json_names_the_byte_where_it_stops() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"val"#;
        let err = decode(URL, &instant(), &ok(body)).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.starts_with(&format!("truncated JSON at byte {}", body.len())), "{detail}");
    }

    #[test]
    fn json_of_the_wrong_shape_is_a_decode_error() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":{"not":"a list"}}}"#;
        let err = decode(URL, &instant(), &ok(body)).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.starts_with("unexpected query result"), "{detail}");
        assert!(detail.contains("at byte"), "{detail}");
    }

    #[test]
    fn unknown_result_type_is_a_decode_error() {
        let body = r#"{"status":"success","data":{"resultType":"streams","result":[]}}"#;
        let err = decode(URL, &instant(), &ok(body)).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.contains("streams"), "{detail}");
    }

    #[test]
    fn success_without_data_is_a_decode_error() {
        let err = decode(URL, &instant(), &ok(r#"{"status":"success"}"#)).unwrap_err();
        assert!(matches!(err, SourceError::Decode { .. }), "{err:?}");
    }

    #[test]
    fn a_json_array_is_never_taken_for_an_envelope() {
        let err = decode(URL, &instant(), &ok(r#"["error","bad_data","boom"]"#)).unwrap_err();
        assert!(matches!(err, SourceError::Decode { .. }), "{err:?}");
        let err = decode(URL, &instant(), &ex(418, "", r#"["error","bad_data","boom"]"#)).unwrap_err();
        assert!(matches!(err, SourceError::NotPrometheus { .. }), "{err:?}");
        let err = decode(URL, &instant(), &ex(500, "", r#"["error","bad_data","boom"]"#)).unwrap_err();
        assert!(matches!(err, SourceError::HttpStatus { status: 500, .. }), "{err:?}");
    }

    #[test]
    fn a_sample_without_value_or_histogram_is_a_decode_error() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"}}]}}"#;
        let err = decode(URL, &instant(), &ok(body)).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.contains("neither \"value\" nor \"histogram\""), "{detail}");
    }

    #[test]
    fn json_without_status_on_200_is_a_decode_error_with_a_hint() {
        let err = decode(URL, &instant(), &ok(r#"{"hello":"world"}"#)).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.contains("\"status\""), "{detail}");
    }

    #[test]
    fn json_that_is_not_an_object_on_200_says_so() {
        let err = decode(URL, &instant(), &ok("\"success\"")).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.contains("JSON that is not an object"), "{detail}");
        let err = decode(URL, &instant(), &ok(r#"{"status":"success","status":"error"}"#)).unwrap_err();
        let SourceError::Decode { detail, .. } = &err else { panic!("{err:?}") };
        assert!(detail.contains("duplicate field"), "{detail}");
    }

    #[test]
    fn byte_offsets_follow_lines() {
        assert_eq!(byte_offset("ab\ncd", 2, 2), 4);
        assert_eq!(byte_offset("ab\ncd", 1, 1), 0);
        assert_eq!(byte_offset("ab", 9, 9), 2);
    }

    #[test]
    fn adversarial_bodies_never_panic() {
        let deep_open = "[".repeat(100_000);
        let deep_obj = format!("{}{}", "{\"a\":".repeat(5000), "}".repeat(5000));
        let deep_data = format!(r#"{{"status":"success","data":{}}}"#, "[".repeat(10_000));
        let huge_label =
            format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"a":"{}"}},"value":[1,"1"]}}]}}}}"#, "x".repeat(1_000_000));
        let bodies: Vec<String> = vec![
            "".into(),
            " \n\t ".into(),
            "{}".into(),
            "[]".into(),
            "null".into(),
            "true".into(),
            "42".into(),
            "\"success\"".into(),
            r#"{"status":"success"}"#.into(),
            r#"{"status":"error"}"#.into(),
            r#"{"status":null}"#.into(),
            r#"{"status":1}"#.into(),
            r#"{"status":["success"]}"#.into(),
            r#"{"status":"success","data":null}"#.into(),
            r#"{"status":"success","data":7}"#.into(),
            r#"{"status":"success","data":"x"}"#.into(),
            r#"{"status":"success","data":{}}"#.into(),
            r#"{"status":"success","data":{"resultType":7}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector"}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":null}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[null]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":null,"value":[1,"1"]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"1"]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1",2]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1e999,"1"]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1e999999"]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[123456789012345678901234567890,"1"]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[-1,"-0"]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":[true,"1"]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"vector","result":[{"value":{"t":1}}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"values":null}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"values":[[1]]}]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"scalar","result":null}}"#.into(),
            r#"{"status":"success","data":{"resultType":"scalar","result":[]}}"#.into(),
            r#"{"status":"success","data":{"resultType":"string","result":[1,2]}}"#.into(),
            r#"{"status":"success","warnings":"not a list","data":{"resultType":"vector","result":[]}}"#.into(),
            r#"{"status":"success","warnings":[1,{"a":null}],"data":{"resultType":"vector","result":[]}}"#.into(),
            r#"{"status":"error","errorType":{"x":1},"error":[1,2]}"#.into(),
            r#"{"status":"success","status":"error"}"#.into(),
            "{\"status\":\"succ\u{e9}ss\"}".into(),
            "\u{feff}{\"status\":\"success\"}".into(),
            "<".into(),
            "<html".into(),
            "<title>".into(),
            "<title></title".into(),
            "<html><title>\u{1F600}\u{1F600}</title>".into(),
            "<script>".into(),
            "<sCrIpT>alert(1)</ScRiPt".into(),
            "\u{0}\u{1}\u{2}".into(),
            "é".repeat(1000),
            deep_open,
            deep_obj,
            deep_data,
            huge_label,
        ];
        for body in &bodies {
            for status in [200u16, 204, 400, 500, 502] {
                for ct in ["application/json", "text/html", ""] {
                    for req in [instant(), range(), label_values()] {
                        let r = decode(URL, &req, &ex(status, ct, body));
                        if let Err(e) = r {
                            // Every message must be short enough to show to a person.
                            assert!(e.to_string().len() < 2_000, "too long for body {:?}", short(body, 40));
                        }
                    }
                }
            }
        }
    }
}
