//! Fuzzing what comes back from servers and files: the Prometheus response decoder
//! (`source::decode`), replay files (`Replay::open`), selectors and label-value escaping, and the
//! exposition parser on damaged real-looking scrapes. Seeds are the recorded incidents in
//! `fixtures/incidents/` (real Prometheus answers) and the scenario generator's OpenMetrics.
//!
//! Properties: no input panics; an error message stays short (no body is dumped whole into it);
//! escaping a label value and parsing it back gives the same value, and an escaped regex literal
//! matches exactly itself.

#[path = "fuzz_support/mod.rs"]
mod support;

use chrono::{TimeZone, Utc};
use proptest::prelude::*;
use vllm_diag::prom::{escape_regex_literal, Matcher, Selector};
use vllm_diag::source::{decode, Exchange, Request};

use support::{config, edit_strategy, files, mutate, read};

/// (request, exchange) pairs from every recorded incident (read once).
fn recorded() -> &'static [(Request, Exchange)] {
    static SEEDS: std::sync::OnceLock<Vec<(Request, Exchange)>> = std::sync::OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut out = Vec::new();
        for path in files("fixtures/incidents", ".json") {
            let v: serde_json::Value = serde_json::from_str(&read(&path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            for e in v["exchanges"].as_array().into_iter().flatten() {
                let (Ok(req), Ok(ex)) = (serde_json::from_value::<Request>(e["request"].clone()), serde_json::from_value::<Exchange>(e["response"].clone()))
                else {
                    continue;
                };
                out.push((req, ex));
            }
        }
        assert!(out.len() > 10, "the recorded incidents hold too few answers to seed the fuzzer");
        out
    })
}

fn requests() -> Vec<Request> {
    let t = Utc.timestamp_opt(1_768_467_600, 0).single().unwrap_or_default();
    vec![
        Request::Instant { query: "up".into(), time: t },
        Request::Range { query: "up".into(), start: t, end: t, step_seconds: 60 },
        Request::LabelValues { label: "__name__".into(), matchers: vec!["{job=\"vllm\"}".into()], start: t, end: t },
    ]
}

fn check_decode(req: &Request, ex: &Exchange) {
    if let Err(e) = decode("http://prom:9090", req, ex) {
        let msg = e.to_string();
        assert!(msg.chars().count() < 1500, "an error message of {} characters: {msg}", msg.chars().count());
        assert!(!e.short_reason().is_empty());
    }
}

/// JSON values of any shape, for putting where the envelope expects something specific.
fn json_value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(serde_json::Value::from),
        prop::sample::select(vec!["NaN", "+Inf", "-Inf", "1e309", "", "success", "error", "vector", "matrix", "scalar", "string"])
            .prop_map(serde_json::Value::from),
        "\\PC{0,12}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "status",
                    "data",
                    "resultType",
                    "result",
                    "metric",
                    "value",
                    "values",
                    "histogram",
                    "histograms",
                    "warnings",
                    "infos",
                    "error",
                    "errorType",
                    "x"
                ]),
                inner,
                0..6
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
        ]
    })
}

fn status() -> impl Strategy<Value = u16> {
    prop_oneof![Just(200u16), Just(400), Just(401), Just(422), Just(429), Just(500), Just(502), Just(503), 100u16..600]
}

proptest! {
    #![proptest_config(config(1000))]

    #[test]
    fn arbitrary_bodies_never_make_the_decoder_panic(
        body in "\\PC{0,200}",
        status in status(),
        ct in prop::sample::select(vec!["application/json", "text/html", "text/plain", "", "application/json; charset=utf-8"]),
        which in 0usize..3,
    ) {
        let req = &requests()[which];
        check_decode(req, &Exchange { http_status: status, content_type: ct.to_string(), body });
    }

    #[test]
    fn envelopes_of_any_shape_never_make_the_decoder_panic(
        status_field in json_value(),
        data in json_value(),
        warnings in json_value(),
        http in status(),
        which in 0usize..3,
    ) {
        let body = serde_json::json!({"status": status_field, "data": data, "warnings": warnings}).to_string();
        check_decode(&requests()[which], &Exchange { http_status: http, content_type: "application/json".into(), body: body.clone() });
        let success = serde_json::json!({"status": "success", "data": data}).to_string();
        check_decode(&requests()[which], &Exchange { http_status: 200, content_type: "application/json".into(), body: success });
    }

    #[test]
    fn damaged_real_answers_never_make_the_decoder_panic(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit_strategy(), 1..5),
        http in status(),
    ) {
        let (req, ex) = pick.get(recorded());
        let damaged = Exchange { http_status: http, content_type: ex.content_type.clone(), body: mutate(&ex.body, &edits) };
        check_decode(req, &damaged);
    }

    #[test]
    fn a_label_value_escaped_into_a_matcher_parses_back_to_itself(
        value in prop_oneof!["\\PC{0,24}", ".{0,24}", "[\"\\\\\n\r\t{}=~!,` ]{0,12}"],
        name in "[a-zA-Z_][a-zA-Z0-9_]{0,10}",
    ) {
        let m = Matcher::eq(&name, &value);
        let text = m.to_string();
        let parsed = Selector::parse(&text).map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(parsed.matchers, vec![m]);
    }

    #[test]
    fn an_escaped_regex_literal_matches_exactly_itself(value in "\\PC{0,16}", other in "\\PC{0,16}") {
        let re = regex::Regex::new(&format!("^(?:{})$", escape_regex_literal(&value)))
            .map_err(|e| TestCaseError::fail(format!("{value:?} does not compile: {e}")))?;
        prop_assert!(re.is_match(&value));
        prop_assert_eq!(re.is_match(&other), other == value);
    }

    #[test]
    fn selectors_parse_or_fail_and_round_trip(input in "\\PC{0,60}") {
        if let Ok(sel) = Selector::parse(&input) {
            let again = Selector::parse(&sel.to_promql()).map_err(|e| TestCaseError::fail(format!("{input:?} -> {:?}: {e}", sel.to_promql())))?;
            prop_assert_eq!(again, sel);
        }
    }

    #[test]
    fn selector_shaped_text_never_panics(input in r#"\{?([a-z_]{0,5}\s*(=|!=|=~|!~)?\s*("[^"]{0,6}"?|'[^']{0,6}'?|`[^`]{0,6}`?)?\s*,?\s*){0,4}\}?"#) {
        if let Ok(sel) = Selector::parse(&input) {
            prop_assert_eq!(Selector::parse(&sel.to_promql()).ok(), Some(sel));
        }
    }

    #[test]
    fn damaged_generated_openmetrics_never_makes_the_exposition_parser_panic(
        edits in prop::collection::vec(edit_strategy(), 1..6),
        start in 0usize..2000,
    ) {
        let om = generated_openmetrics();
        let lines: Vec<&str> = om.lines().collect();
        let from = start % lines.len().max(1);
        let chunk = lines[from..(from + 60).min(lines.len())].join("\n") + "\n# EOF\n";
        let damaged = mutate(&chunk, &edits);
        for f in [vllm_diag::prom::exposition::Format::Detect, vllm_diag::prom::exposition::Format::Text, vllm_diag::prom::exposition::Format::OpenMetrics] {
            let _ = vllm_diag::prom::exposition::parse(&damaged, f);
        }
    }
}

proptest! {
    // Each case writes and parses a whole recording: fewer of them.
    #![proptest_config(config(128))]

    #[test]
    fn damaged_recordings_are_refused_or_read_never_a_panic(
        pick in any::<prop::sample::Index>(),
        edits in prop::collection::vec(edit_strategy(), 1..4),
    ) {
        let paths = files("fixtures/incidents", ".json");
        let path = pick.get(&paths);
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let damaged = dir.path().join("damaged.json");
        std::fs::write(&damaged, mutate(&read(path), &edits)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Err(e) = vllm_diag::source::record::Replay::open(&damaged) {
            prop_assert!(e.to_string().contains("damaged.json"), "{}", e);
        }
    }
}

/// The head of a generated scenario's OpenMetrics: every family vLLM exports, as the generator
/// writes it (read once).
fn generated_openmetrics() -> &'static str {
    static OM: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    OM.get_or_init(|| {
        let mut spec =
            vllm_diag_sim::ScenarioSpec::load(support::repo().join("fixtures/scenarios/healthy-steady.toml")).unwrap_or_else(|e| panic!("scenario: {e}"));
        // A few scrapes are enough variety.
        spec.warmup = std::time::Duration::from_secs(60);
        spec.baseline = std::time::Duration::from_secs(120);
        spec.window = std::time::Duration::from_secs(120);
        let mut buf = Vec::new();
        vllm_diag_sim::generate_openmetrics(&spec, &mut buf).unwrap_or_else(|e| panic!("generate: {e}"));
        // One scrape's worth is enough variety; keep the first lines of every family.
        String::from_utf8_lossy(&buf).lines().take(4000).collect::<Vec<_>>().join("\n")
    })
}

#[test]
fn every_prefix_of_real_answers_decodes_or_fails_cleanly() {
    for (req, ex) in recorded().iter().take(40) {
        let body = &ex.body;
        let step = (body.len() / 200).max(1);
        for cut in (0..body.len()).step_by(step).filter(|i| body.is_char_boundary(*i)) {
            let cut_ex = Exchange { body: body[..cut].to_string(), ..ex.clone() };
            assert!(
                decode("http://prom:9090", req, &cut_ex).is_err() || cut == 0 || body[..cut].trim_end().ends_with('}'),
                "a cut body decoded: {:?}",
                &body[..cut]
            );
            check_decode(req, &cut_ex);
        }
    }
}
