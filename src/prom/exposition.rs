//! A strict parser for what vLLM's `/metrics` endpoints serve: the Prometheus text format (0.0.4)
//! and OpenMetrics 1.0.
//!
//! Why our own: the maintained crates either stop at the text format (no `# EOF`, no OpenMetrics
//! timestamps in seconds, no exemplars) or reject what real servers emit: `_created` series,
//! multiprocess rendering (`_sum` before `_bucket`, a family's lines not contiguous), HELP/TYPE
//! lines for families with no samples, trailing spaces, escaped label values. The grammar is small;
//! being strict about it (a bad line is an error naming the line, never a guess) is what keeps a
//! diagnosis from being built on a half-read scrape. Parsing never panics (fuzzed with proptest).
//!
//! Timestamps are optional. In the text format they are integer milliseconds; in OpenMetrics,
//! seconds (possibly fractional). A body is OpenMetrics when its content type says so or when it
//! ends with `# EOF`.

use std::collections::BTreeMap;

use crate::prom::escape::{unescape_exposition_value, unescape_help};
use crate::prom::Labels;
use crate::prom::{is_metric_name, label_name_len, metric_name_len, parse_exposition_value};

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpSample {
    /// The series name as written (`vllm:e2e_request_latency_seconds_bucket`).
    pub name: String,
    pub labels: Labels,
    pub value: f64,
    /// Milliseconds since the epoch, when the line carries a timestamp.
    pub timestamp_ms: Option<i64>,
}

/// A parsed exposition: every sample in order, and the families' declared types and help texts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    pub samples: Vec<ExpSample>,
    /// `# TYPE` per family name.
    pub types: BTreeMap<String, String>,
    /// `# HELP` per family name (trailing spaces kept, as written).
    pub help: BTreeMap<String, String>,
    /// The body ended with `# EOF` (OpenMetrics).
    pub openmetrics: bool,
}

/// Which dialect to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4 (timestamps in milliseconds).
    Text,
    /// OpenMetrics 1.0 (timestamps in seconds, `# EOF` required).
    OpenMetrics,
    /// OpenMetrics when the body has a `# EOF` line, else the text format.
    Detect,
}

impl Format {
    /// From an HTTP `Content-Type`.
    pub fn from_content_type(ct: &str) -> Format {
        if ct.to_ascii_lowercase().contains("application/openmetrics-text") {
            Format::OpenMetrics
        } else {
            Format::Detect
        }
    }
}

/// A line that is not valid exposition text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ExpositionError {
    pub line: usize,
    pub message: String,
}

const TYPES: &[&str] = &["counter", "gauge", "histogram", "summary", "untyped", "unknown", "gaugehistogram", "info", "stateset"];

/// Parse a whole body.
pub fn parse(body: &str, format: Format) -> Result<Exposition, ExpositionError> {
    let has_eof = body.lines().any(|l| l.trim_end() == "# EOF");
    let om = match format {
        Format::Text => false,
        Format::OpenMetrics => true,
        Format::Detect => has_eof,
    };
    if om && !has_eof {
        return Err(ExpositionError {
            line: body.lines().count().max(1),
            message: "OpenMetrics text must end with \"# EOF\"; the body is probably cut off".into(),
        });
    }
    let mut out = Exposition { openmetrics: om, ..Exposition::default() };
    let mut eof_seen = false;
    for (i, raw) in body.split('\n').enumerate() {
        let n = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let err = |message: String| ExpositionError { line: n, message };
        if eof_seen {
            if line.trim().is_empty() {
                continue;
            }
            return Err(err("text after \"# EOF\"".into()));
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.strip_prefix(' ').unwrap_or(comment);
            if comment.trim_end() == "EOF" {
                eof_seen = true;
                continue;
            }
            let mut parts = comment.splitn(3, ' ');
            let keyword = parts.next().unwrap_or_default();
            if !matches!(keyword, "HELP" | "TYPE" | "UNIT") {
                continue; // an ordinary comment
            }
            let name = parts.next().unwrap_or_default();
            if !is_metric_name(name) {
                return Err(err(format!("# {keyword} needs a metric name, found {:?}", short(name))));
            }
            let rest = parts.next().unwrap_or_default();
            match keyword {
                "TYPE" => {
                    let t = rest.trim();
                    if !TYPES.contains(&t) {
                        return Err(err(format!("unknown metric type {:?} for {name}", short(t))));
                    }
                    out.types.insert(name.to_string(), t.to_string());
                }
                "HELP" => {
                    out.help.insert(name.to_string(), unescape_help(rest, om));
                }
                _ => {}
            }
            continue;
        }
        out.samples.push(sample_line(line, om).map_err(err)?);
    }
    Ok(out)
}

fn short(s: &str) -> String {
    let mut t: String = s.chars().take(40).collect();
    if s.chars().count() > 40 {
        t.push('…');
    }
    t
}

/// `name{labels} value [timestamp] [# exemplar]`.
fn sample_line(line: &str, om: bool) -> Result<ExpSample, String> {
    let name_end = metric_name_len(line);
    let name = &line[..name_end];
    if name.is_empty() {
        return Err(format!("expected a metric name at the start of {:?}", short(line)));
    }
    let mut rest = &line[name_end..];
    let mut labels = Labels::new();
    if let Some(after) = rest.strip_prefix('{') {
        let (parsed, remaining) = label_set(after)?;
        labels = parsed;
        rest = remaining;
    }
    if labels.contains_key("__name__") {
        return Err(format!("{name}: a sample may not set the __name__ label"));
    }
    if !rest.starts_with([' ', '\t']) {
        return Err(format!("{name}: expected a space and a value, found {:?}", short(rest)));
    }
    // Drop an OpenMetrics exemplar (" # {...} value [ts]") before reading value and timestamp.
    let body = match rest.find(" # ") {
        Some(i) if om => &rest[..i],
        _ => rest,
    };
    let mut fields = body.split([' ', '\t']).filter(|f| !f.is_empty());
    let value_text = fields.next().ok_or_else(|| format!("{name}: the value is missing"))?;
    let value = parse_exposition_value(value_text).ok_or_else(|| format!("{name}: {:?} is not a number", short(value_text)))?;
    let timestamp_ms = match fields.next() {
        None => None,
        Some(ts) => Some(parse_timestamp(ts, om).ok_or_else(|| {
            let unit = if om { "seconds" } else { "whole milliseconds" };
            format!("{name}: timestamp {:?} is not a number of {unit}", short(ts))
        })?),
    };
    if let Some(extra) = fields.next() {
        return Err(format!("{name}: unexpected {:?} after the value and timestamp", short(extra)));
    }
    Ok(ExpSample { name: name.to_string(), labels, value, timestamp_ms })
}

/// Parse `a="x",b="y"}` (the text after `{`); returns the labels and what follows the `}`.
fn label_set(mut s: &str) -> Result<(Labels, &str), String> {
    let mut labels = Labels::new();
    loop {
        s = s.trim_start_matches([' ', '\t']);
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        let end = label_name_len(s);
        let lname = &s[..end];
        if lname.is_empty() {
            return Err(format!("expected a label name, found {:?}", short(s)));
        }
        s = s[end..].trim_start_matches([' ', '\t']);
        s = s.strip_prefix('=').ok_or_else(|| format!("label {lname}: expected '=', found {:?}", short(s)))?;
        s = s.trim_start_matches([' ', '\t']);
        s = s.strip_prefix('"').ok_or_else(|| format!("label {lname}: the value must be in double quotes"))?;
        // The closing quote is the first one no backslash escapes.
        let mut closed = None;
        let mut chars = s.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    closed = Some(i);
                    break;
                }
                '\\' if chars.next().is_none() => break,
                _ => {}
            }
        }
        let Some(close) = closed else {
            return Err(format!("label {lname}: the quoted value is not closed"));
        };
        let value = unescape_exposition_value(&s[..close]);
        let after = close + 1;
        if labels.insert(lname.to_string(), value).is_some() {
            return Err(format!("label {lname} appears twice"));
        }
        s = s[after..].trim_start_matches([' ', '\t']);
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err(format!("after label {lname}: expected ',' or '}}', found {:?}", short(s)));
        }
    }
}

fn parse_timestamp(s: &str, om: bool) -> Option<i64> {
    if om {
        let v = parse_exposition_value(s)?;
        let ms = (v * 1000.0).round();
        (ms.is_finite() && ms.abs() < 9.2e15).then_some(ms as i64)
    } else {
        if !s.bytes().enumerate().all(|(i, b)| b.is_ascii_digit() || (i == 0 && b == b'-')) {
            return None;
        }
        s.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn reads_samples_with_and_without_labels_and_timestamps() {
        let e = parse("# HELP x Help text.\n# TYPE x counter\nx_total 3\nx_total{a=\"b\"} 4.5e3 1700000000000\n", Format::Text).unwrap();
        assert_eq!(e.types["x"], "counter");
        assert_eq!(e.help["x"], "Help text.");
        assert_eq!(e.samples[0], ExpSample { name: "x_total".into(), labels: Labels::new(), value: 3.0, timestamp_ms: None });
        assert_eq!(e.samples[1].labels, labels(&[("a", "b")]));
        assert_eq!(e.samples[1].value, 4500.0);
        assert_eq!(e.samples[1].timestamp_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn openmetrics_timestamps_are_seconds_and_eof_ends_the_body() {
        let e = parse("# TYPE g gauge\ng{a=\"1\"} 1 1700000000.25\n# EOF\n", Format::Detect).unwrap();
        assert!(e.openmetrics);
        assert_eq!(e.samples[0].timestamp_ms, Some(1_700_000_000_250));
        let err = parse("g 1\n# EOF\ng 2\n", Format::Detect).unwrap_err();
        assert_eq!(err.line, 3);
        let err = parse("g 1\n", Format::OpenMetrics).unwrap_err();
        assert!(err.message.contains("# EOF"), "{err}");
    }

    #[test]
    fn special_values_and_escaped_label_values_are_read_exactly() {
        let e = parse("a{le=\"+Inf\"} +Inf\nb NaN\nc -Inf\nd{path=\"C:\\\\x\",q=\"say \\\"hi\\\"\",nl=\"a\\nb\"} 1\n", Format::Text).unwrap();
        assert_eq!(e.samples[0].value, f64::INFINITY);
        assert!(e.samples[1].value.is_nan());
        assert_eq!(e.samples[2].value, f64::NEG_INFINITY);
        assert_eq!(e.samples[3].labels, labels(&[("path", "C:\\x"), ("q", "say \"hi\""), ("nl", "a\nb")]));
    }

    #[test]
    fn trailing_spaces_trailing_commas_and_crlf_are_accepted() {
        let e = parse("# HELP h Help ends in a space. \r\nh{a=\"1\",} 2   \r\n", Format::Text).unwrap();
        assert_eq!(e.help["h"], "Help ends in a space. ");
        assert_eq!(e.samples[0].value, 2.0);
    }

    #[test]
    fn openmetrics_exemplars_are_dropped() {
        let e = parse("h_bucket{le=\"1\"} 5 # {trace_id=\"x\"} 0.5 1700000000\n# EOF\n", Format::Detect).unwrap();
        assert_eq!(e.samples[0].value, 5.0);
        assert_eq!(e.samples[0].timestamp_ms, None);
    }

    #[test]
    fn every_malformed_line_is_an_error_naming_the_line() {
        for (body, line, want) in [
            ("ok 1\n{a=\"b\"} 1\n", 2, "metric name"),
            ("x{a=b} 1\n", 1, "double quotes"),
            ("x{a=\"b} 1\n", 1, "not closed"),
            ("x{a=\"1\",a=\"2\"} 1\n", 1, "twice"),
            ("x 1 2 3\n", 1, "unexpected"),
            ("x one\n", 1, "not a number"),
            ("x\n", 1, "space and a value"),
            ("x 1 1.5\n", 1, "whole milliseconds"),
            ("# TYPE x thing\n", 1, "unknown metric type"),
            ("x{1a=\"b\"} 1\n", 1, "label name"),
            ("x{a=\"1\" b=\"2\"} 1\n", 1, "expected ','"),
            ("x infinity\n", 1, "not a number"),
        ] {
            let e = parse(body, Format::Text).expect_err(body);
            assert_eq!(e.line, line, "{body}: {e}");
            assert!(e.message.contains(want), "{body}: {e}");
        }
    }

    fn real(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-metrics").join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn every_real_vllm_capture_parses() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real-metrics");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("fixtures/real-metrics is in the repository") {
            let path = entry.expect("a directory entry").path();
            if path.file_name().is_some_and(|f| f == "README.md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            let e = parse(&text, Format::Detect).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // every sample line became a sample
            let sample_lines = text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')).count();
            assert_eq!(e.samples.len(), sample_lines, "{}", path.display());
            n += 1;
        }
        assert!(n >= 10, "only {n} captures found");
    }

    #[test]
    fn created_series_and_multiprocess_ordering_are_ordinary_samples() {
        let e = parse(&real("v1_0.10.0_production-stack-issue617_glm45_EXCERPTS.txt"), Format::Detect).unwrap();
        assert!(e.samples.iter().any(|s| s.name.ends_with("_created")));
        let e = parse(&real("v1_0.10.x_dp2-apiserver2_vllm-pr22227_qwen3-8b_EXCERPTS.txt"), Format::Detect).unwrap();
        let sum = e.samples.iter().position(|s| s.name == "vllm:inter_token_latency_seconds_sum").unwrap();
        let bucket = e.samples.iter().position(|s| s.name == "vllm:inter_token_latency_seconds_bucket").unwrap();
        assert!(sum < bucket);
        assert_eq!(e.samples[bucket].labels.get("engine").map(String::as_str), Some("0"));
    }

    #[test]
    fn families_with_help_and_type_but_no_samples_are_kept_as_metadata() {
        let e = parse(&real("v0_0.5.x_functionary-pr263_empty-families.txt"), Format::Detect).unwrap();
        assert_eq!(e.types.get("vllm:num_requests_running").map(String::as_str), Some("gauge"));
        assert!(!e.samples.iter().any(|s| s.name == "vllm:num_requests_running"));
    }

    #[test]
    fn the_complete_capture_has_every_family_typed() {
        let e = parse(&real("v1_recent_qwen3-30b-a3b_spec-decode_vllmstat-fixture.prom"), Format::Detect).unwrap();
        assert!(e.samples.len() > 300, "{}", e.samples.len());
        assert_eq!(e.types.get("vllm:kv_cache_usage_perc").map(String::as_str), Some("gauge"));
        let inf = e.samples.iter().find(|s| s.labels.get("le").is_some_and(|l| l == "+Inf")).unwrap();
        assert!(inf.value >= 0.0);
    }

    mod fuzz {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

            #[test]
            fn arbitrary_text_never_panics(body in ".{0,400}") {
                let _ = parse(&body, Format::Detect);
                let _ = parse(&body, Format::Text);
                let _ = parse(&body, Format::OpenMetrics);
            }

            #[test]
            fn exposition_like_text_never_panics(body in r#"(#( (HELP|TYPE|EOF))? )?[a-z_:]{0,6}(\{([a-z_]{0,3}=?"[^"\n]{0,5}\\?"?,?){0,3}\}?)?( [-+0-9.eEInfNa]{0,8}){0,3}(\n|\r\n)?"#) {
                let _ = parse(&body, Format::Detect);
            }

            #[test]
            fn written_samples_read_back_exactly(
                name in "[a-z_:][a-z0-9_:]{0,12}",
                labels in proptest::collection::btree_map("[a-z_][a-z0-9_]{0,6}", "\\PC{0,12}", 0..4),
                value in proptest::num::f64::ANY,
                ts in proptest::option::of(-1_000_000_000_000i64..4_000_000_000_000),
            ) {
                prop_assume!(!labels.contains_key("__name__"));
                let esc = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
                let lbl: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", esc(v))).collect();
                let v = if value.is_nan() { "NaN".to_string() } else if value == f64::INFINITY { "+Inf".into() } else if value == f64::NEG_INFINITY { "-Inf".into() } else { format!("{value:e}") };
                let ts_text = ts.map(|t| format!(" {t}")).unwrap_or_default();
                let line = format!("{name}{{{}}} {v}{ts_text}\n", lbl.join(","));
                let e = parse(&line, Format::Text).unwrap();
                prop_assert_eq!(e.samples.len(), 1);
                let s = &e.samples[0];
                prop_assert_eq!(&s.name, &name);
                prop_assert_eq!(&s.labels, &Labels::from(labels.clone()));
                prop_assert!(s.value == value || (s.value.is_nan() && value.is_nan()));
                prop_assert_eq!(s.timestamp_ms, ts);
            }
        }
    }
}
