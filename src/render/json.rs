//! JSON output: the report exactly as `report.rs` defines it, for scripts and CI, followed by
//! `outcome`: the exit code the run gives and the `--fail-on` bar that decided it.
//!
//! No reshaping happens here: the schema is the `Report` type and its `schema_version`, so a field
//! added there appears here without a change, and consumers read one documented contract.

use crate::render::RenderOptions;
use crate::report::{Outcome, Report};

/// The document: every field of the report, then `outcome`.
#[derive(serde::Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    report: &'a Report,
    outcome: Outcome,
}

/// Pretty-printed JSON with a trailing newline.
pub fn render(report: &Report, opts: &RenderOptions) -> String {
    match serde_json::to_string_pretty(&Document { report, outcome: Outcome::with(report, opts.fail_on, opts.fail_on_unexplained) }) {
        Ok(mut s) => {
            s.push('\n');
            s
        }
        // Unreachable for this type (string keys, non-finite floats written as strings), but a
        // renderer never panics: say what happened in a shape a JSON reader can still parse.
        Err(e) => format!("{}\n", serde_json::json!({ "error": format!("cannot encode the report: {e}") })),
    }
}

/// The document of a run that gave no report: `{"schema_version": 1, "error": {"message": ...,
/// "exit_code": 3}}`, with no `findings`, so that no reader mistakes it for a clean report.
pub fn failure(message: &str, exit_code: u8) -> String {
    let doc = serde_json::json!({
        "schema_version": crate::report::SCHEMA_VERSION,
        "error": { "message": message, "exit_code": exit_code },
    });
    format!("{}\n", serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixtures::*;

    #[test]
    fn a_run_without_a_report_is_an_error_document() {
        let doc: serde_json::Value = serde_json::from_str(&failure("cannot reach \"http://x\": refused", 3)).unwrap();
        assert_eq!(doc["error"]["message"], "cannot reach \"http://x\": refused");
        assert_eq!(doc["error"]["exit_code"], 3);
        assert_eq!(doc["schema_version"], 1);
        assert!(doc.get("findings").is_none());
    }

    #[test]
    fn json_round_trips_into_an_equal_report() {
        for report in [sample_report(), clean_report(), nothing_evaluated_report()] {
            let text = render(&report, &RenderOptions::default());
            let back: Report = serde_json::from_str(&text).expect("rendered JSON parses back");
            assert_eq!(back, report);
        }
    }

    #[test]
    fn non_finite_values_survive_the_round_trip() {
        let mut report = sample_report();
        report.findings[0].evidence[0].value = Some(f64::INFINITY);
        report.findings[0].evidence[1].baseline = Some(f64::NAN);
        let text = render(&report, &RenderOptions::default());
        assert!(text.contains("\"+Inf\"") && text.contains("\"NaN\""));
        let back: Report = serde_json::from_str(&text).expect("rendered JSON parses back");
        assert_eq!(back.findings[0].evidence[0].value, Some(f64::INFINITY));
        assert!(back.findings[0].evidence[1].baseline.is_some_and(f64::is_nan));
    }

    /// `outcome` closes the document: the exit code the process gives for it and the bar that
    /// decided it, so a pipeline that keeps only the file still knows whether the run passed.
    #[test]
    fn the_document_ends_with_the_runs_outcome() {
        use crate::report::Severity;
        let doc = |report: &Report, fail_on: Option<Severity>| -> serde_json::Value {
            serde_json::from_str(&render(report, &RenderOptions { fail_on, ..RenderOptions::default() })).unwrap()
        };
        let sample = sample_report();
        assert!(sample.worst_severity() >= Some(Severity::Warning));
        assert_eq!(doc(&sample, Some(Severity::Warning))["outcome"], serde_json::json!({"exit_code": 1, "fail_on": "warning"}));
        assert_eq!(doc(&sample, None)["outcome"], serde_json::json!({"exit_code": sample.exit_code(None), "fail_on": "never"}));
        assert_eq!(doc(&clean_report(), Some(Severity::Info))["outcome"]["exit_code"], 0);
        let mut nothing = nothing_evaluated_report();
        nothing.stats.rules_evaluated = 0;
        assert_eq!(doc(&nothing, Some(Severity::Warning))["outcome"]["exit_code"], 3);
        let text = render(&sample, &RenderOptions::default());
        let last_key = text.trim_end().trim_end_matches('}').rfind("\"outcome\"").unwrap();
        assert!(text[..last_key].contains("\"findings\""), "outcome comes after the report's fields");
    }

    #[test]
    fn json_ends_with_a_newline() {
        assert!(render(&clean_report(), &RenderOptions::default()).ends_with("}\n"));
    }

    #[test]
    fn json_snapshot_of_the_sample_report() {
        insta::assert_snapshot!(render(&sample_report(), &RenderOptions::default()));
    }
}
