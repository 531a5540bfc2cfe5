//! A [`Source`] that answers by local evaluation over series held in memory (see [`crate::local`]).
//!
//! It is what `--scrape` and `rules test` diagnose with: the same requests, the same JSON envelopes
//! and the same decoder as a Prometheus server, so record and replay work unchanged. [`answer`]
//! turns a request into an [`Exchange`] as Prometheus would: the same envelope, result types,
//! value strings and error classes, so the decoder, `--record`, `--replay` and `explain` cannot
//! tell a local answer from a server's.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Map, Value as Json};

use super::{Exchange, Labels, Request, Source, SourceError};
use crate::local::{EvalError, Sample, Series, Store, Value};
use crate::prom::format_go_float;
use crate::report::SourceInfo;

pub struct LocalSource {
    store: Arc<Store>,
    info: SourceInfo,
}

impl LocalSource {
    /// `kind` and `url` describe where the series came from, for the report header (e.g. `scrape` and
    /// the endpoints, or `rules-test` and the test file).
    pub fn new(store: Arc<Store>, kind: impl Into<crate::report::SourceKind>, url: &str) -> LocalSource {
        LocalSource { store, info: SourceInfo { kind: kind.into(), url: url.to_string(), selector: String::new() } }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Answer synchronously (evaluation is CPU work over memory; nothing to wait for).
    pub fn answer(&self, req: &Request) -> Exchange {
        answer(&self.store, req)
    }
}

impl Source for LocalSource {
    fn send<'a>(&'a self, req: &'a Request) -> BoxFuture<'a, Result<Exchange, SourceError>> {
        Box::pin(async move { Ok(self.answer(req)) })
    }

    fn info(&self) -> SourceInfo {
        self.info.clone()
    }
}

/// Answer one request from the store.
pub fn answer(store: &Store, req: &Request) -> Exchange {
    match try_answer(store, req) {
        Ok(data) => envelope_ok(data),
        Err(e) => envelope_err(e),
    }
}

fn try_answer(store: &Store, req: &Request) -> Result<Json, EvalError> {
    match req {
        Request::Instant { query, time } => {
            let t = time.timestamp_millis();
            Ok(match crate::local::instant_query(store, query, t)? {
                Value::Scalar(v) => json!({"resultType": "scalar", "result": [ts(t), format_go_float(v)]}),
                Value::Str(s) => json!({"resultType": "string", "result": [ts(t), s]}),
                Value::Vector(v) => {
                    json!({"resultType": "vector", "result": v.iter().map(|s| vector_item(s, t)).collect::<Vec<_>>()})
                }
                Value::Matrix(m) => {
                    json!({"resultType": "matrix", "result": m.series.iter().map(matrix_item).collect::<Vec<_>>()})
                }
            })
        }
        Request::Range { query, start, end, step_seconds } => {
            let step = i64::try_from(*step_seconds).unwrap_or(i64::MAX / 2).saturating_mul(1000);
            let (start, end) = (start.timestamp_millis(), end.timestamp_millis());
            let series = crate::local::range_query(store, query, start, end, step)?;
            Ok(json!({"resultType": "matrix", "result": series.iter().map(matrix_item).collect::<Vec<_>>()}))
        }
        Request::LabelValues { label, matchers, start, end } => {
            let (from, to) = (start.timestamp_millis(), end.timestamp_millis());
            let values = crate::local::label_values(store, label, matchers, from, to)?;
            Ok(Json::Array(values.into_iter().map(Json::String).collect()))
        }
    }
}

/// Unix seconds as Prometheus writes them: an integer when whole, else with milliseconds.
fn ts(t_ms: i64) -> Json {
    if t_ms % 1000 == 0 {
        json!(t_ms / 1000)
    } else {
        json!(t_ms as f64 / 1000.0)
    }
}

fn metric(labels: &Labels) -> Json {
    Json::Object(labels.iter().map(|(k, v)| (k.clone(), Json::String(v.clone()))).collect::<Map<_, _>>())
}

fn vector_item(s: &Sample, t: i64) -> Json {
    json!({"metric": metric(&s.labels), "value": [ts(t), format_go_float(s.v)]})
}

fn matrix_item(s: &Series) -> Json {
    json!({"metric": metric(&s.labels), "values": s.points.iter().map(|(t, v)| json!([ts(*t), format_go_float(*v)])).collect::<Vec<_>>()})
}

fn envelope_ok(data: Json) -> Exchange {
    Exchange { http_status: 200, content_type: "application/json".into(), body: json!({"status": "success", "data": data}).to_string() }
}

fn envelope_err(e: EvalError) -> Exchange {
    let (status, kind) = match &e {
        EvalError::BadData(_) | EvalError::Unsupported(_) => (400, "bad_data"),
        EvalError::Execution(_) => (422, "execution"),
    };
    Exchange {
        http_status: status,
        content_type: "application/json".into(),
        body: json!({"status": "error", "errorType": kind, "error": e.to_string()}).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::Store;
    use chrono::{TimeZone, Utc};

    fn store() -> Store {
        let mut s = Store::new();
        let l = |m: &str| -> Labels { [("__name__", "x"), ("m", m)].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() };
        s.add(l("a"), (0..10).map(|i| (i * 1000, i as f64)));
        s.add(l("b"), (0..10).map(|i| (i * 1000, 2.0 * i as f64)));
        s
    }

    fn body(ex: &Exchange) -> Json {
        serde_json::from_str(&ex.body).unwrap()
    }

    #[test]
    fn an_instant_vector_comes_back_in_the_prometheus_envelope() {
        let req = Request::Instant { query: "sum(x)".into(), time: Utc.timestamp_opt(9, 0).unwrap() };
        let ex = answer(&store(), &req);
        assert_eq!(ex.http_status, 200);
        assert_eq!(body(&ex), json!({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[9,"27"]}]}}));
        // and the project's decoder reads it
        let resp = super::super::decode("local", &req, &ex).unwrap();
        assert!(matches!(resp.data, super::super::Data::Vector(ref v) if v.len() == 1 && v[0].v == 27.0));
    }

    #[test]
    fn unsupported_promql_is_a_bad_data_error_that_says_so() {
        let req = Request::Instant { query: "hour()".into(), time: Utc.timestamp_opt(9, 0).unwrap() };
        let ex = answer(&store(), &req);
        assert_eq!(ex.http_status, 400);
        let b = body(&ex);
        assert_eq!(b["errorType"], "bad_data");
        assert!(b["error"].as_str().unwrap().contains("not supported by local evaluation"), "{b}");
    }

    #[test]
    fn a_range_query_returns_a_sorted_matrix() {
        let req = Request::Range { query: "x * 2".into(), start: Utc.timestamp_opt(0, 0).unwrap(), end: Utc.timestamp_opt(2, 0).unwrap(), step_seconds: 1 };
        let b = body(&answer(&store(), &req));
        assert_eq!(b["data"]["resultType"], "matrix");
        assert_eq!(b["data"]["result"][0]["metric"], json!({"m":"a"}));
        assert_eq!(b["data"]["result"][1]["values"], json!([[0, "0"], [1, "4"], [2, "8"]]));
    }

    #[test]
    fn label_values_list_names_with_samples_in_the_range() {
        let req = Request::LabelValues {
            label: "m".into(),
            matchers: vec![r#"{__name__=~"x|y"}"#.into()],
            start: Utc.timestamp_opt(0, 0).unwrap(),
            end: Utc.timestamp_opt(5, 0).unwrap(),
        };
        assert_eq!(body(&answer(&store(), &req)), json!({"status":"success","data":["a","b"]}));
        let later =
            Request::LabelValues { label: "m".into(), matchers: vec![], start: Utc.timestamp_opt(100, 0).unwrap(), end: Utc.timestamp_opt(200, 0).unwrap() };
        assert_eq!(body(&answer(&store(), &later))["data"], json!([]));
    }

    #[test]
    fn many_to_many_matching_is_an_execution_error() {
        let req = Request::Instant { query: "x + on() x".into(), time: Utc.timestamp_opt(9, 0).unwrap() };
        let ex = answer(&store(), &req);
        assert_eq!(ex.http_status, 422);
        assert_eq!(body(&ex)["errorType"], "execution");
    }
}
