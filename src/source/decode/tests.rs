//! Tests of the decoder: the envelope, the data, the sums, the errors and the excerpts.

use super::*;
use chrono::{TimeZone, Utc};

use super::errors::byte_offset;
use super::summed::{Fold, KEEP};
use crate::source::{Labels, Sample, Series};

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

/// Read as `max by (model_name, instance)`: series left alike keep the largest value per
/// timestamp, a NaN giving way to a number as in PromQL's `max`, and a vector the same way.
#[test]
fn a_maxed_read_keeps_the_largest_of_series_left_alike() {
    let by: Vec<String> = ["model_name", "instance"].iter().map(|s| s.to_string()).collect();
    let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
        {"metric":{"instance":"a","engine":"0","model_name":"m"},"values":[[10,"0.25"],[20,"NaN"],[30,"0.5"]]},
        {"metric":{"instance":"a","engine":"1","model_name":"m"},"values":[[10,"0.75"],[20,"0.5"]]},
        {"metric":{"instance":"b","engine":"0","model_name":"m"},"values":[[10,"0.1"]]}]}}"#;
    let r = decode_folded(URL, &range(), &ok(body), &by, Fold::Max).unwrap();
    let Data::Matrix(series) = r.data else { panic!("{:?}", r.data) };
    let got: Vec<(Labels, Vec<(f64, f64)>)> = series.into_iter().map(|s| (s.labels, s.points)).collect();
    assert_eq!(got[0], (labels(&[("instance", "a"), ("model_name", "m")]), vec![(10.0, 0.75), (20.0, 0.5), (30.0, 0.5)]));
    assert_eq!(got[1], (labels(&[("instance", "b"), ("model_name", "m")]), vec![(10.0, 0.1)]));
    let body = r#"{"status":"success","data":{"resultType":"vector","result":[
        {"metric":{"instance":"a","engine":"1","model_name":"m"},"value":[10,"2"]},
        {"metric":{"instance":"a","engine":"0","model_name":"m"},"value":[10,"3"]}]}}"#;
    let Data::Vector(samples) = decode_folded(URL, &instant(), &ok(body), &by, Fold::Max).unwrap().data else { panic!() };
    assert_eq!(samples.iter().map(|s| s.v).collect::<Vec<_>>(), vec![3.0]);
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
