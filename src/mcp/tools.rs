//! The tools `vllm-diag mcp` offers, their input schemas, and the checking of a call's arguments
//! into a typed [`Call`]. Every bad argument gives a message that names the argument, what was
//! wrong with it and what to give instead, for the agent to correct its next call.

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::report::Severity;

/// A checked tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    Explain(ExplainCall),
    Check(CheckCall),
    RulesList,
    RulesShow { id: String },
    Events { window: Option<Duration> },
}

/// `explain`'s arguments; `None` leaves the server's own setting (its flags and configuration file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExplainCall {
    pub window: Option<Duration>,
    /// RFC 3339, Unix seconds or "now", checked by [`crate::settings::parse_at`].
    pub at: Option<String>,
    pub baseline: Option<Duration>,
    /// Label matchers, checked by [`crate::prom::Selector::parse`].
    pub selector: Option<String>,
    /// Comma-separated label names.
    pub group_by: Option<String>,
    pub profile: Option<String>,
}

/// `check`'s arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckCall {
    /// An RFC 3339 time, a duration back from now, or `deploy`.
    pub since: String,
    /// `None`: the server's own (warning unless configured); else the severity at or above which
    /// it fails (`None`: never), and whether changes no rule explains fail it too (`unexplained`
    /// and `info`, as `--fail-on`).
    pub fail_on: Option<(Option<Severity>, bool)>,
}

/// The tool names, in the order they are listed.
pub const NAMES: [&str; 5] = ["explain", "check", "rules_list", "rules_show", "events"];

/// One tool as listed: name, title, description, input schema.
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub schema: Value,
}

fn string_property(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({ "type": "object", "properties": properties, "required": required, "additionalProperties": false })
}

/// Every tool, with its schema.
pub fn specs() -> Vec<ToolSpec> {
    let window = "Length of the window to diagnose, e.g. \"30m\", \"2h\" (default: the server's --window, else 30m).";
    vec![
        ToolSpec {
            name: "explain",
            title: "Diagnose a vLLM fleet",
            description: "Diagnose a window of vLLM metrics from Prometheus against a baseline and rank the likely causes. Returns a short text summary, then the JSON report (findings best first, each with the evidence that decided it, next steps and computed recommendations; not_evaluated lists what could not be judged). Read the numbers from the report rather than recomputing them.",
            schema: object_schema(
                json!({
                    "window": string_property(window),
                    "at": string_property("End of the window: RFC 3339 (2026-01-15T09:30:00Z), Unix seconds, or \"now\" (default)."),
                    "baseline": string_property("How far before the window the baseline sits, e.g. \"1d\" for the same time yesterday (default: the window's length)."),
                    "selector": string_property("Extra PromQL label matchers for every query, e.g. namespace=\"prod\",job=\"vllm\"."),
                    "group_by": string_property("Label(s) findings are grouped by, comma-separated (default model_name)."),
                    "profile": string_property("Latency profile for the thresholds: chat (default), code-completion, batch, rag, agentic, or one the rule files define."),
                }),
                &[],
            ),
        },
        ToolSpec {
            name: "check",
            title: "Check a deploy",
            description: "Post-deploy check: diagnose the time since the deploy against as long before it. The text starts with the verdict: FAIL, PASS or NOT EVALUATED (not a pass).",
            schema: object_schema(
                json!({
                    "since": string_property("When the deploy happened: an RFC 3339 time, a duration back from now (\"20m\"), or \"deploy\" (the last rollout or restart wave read from the metrics)."),
                    "fail_on": { "type": "string", "enum": ["never", "info", "unexplained", "warning", "critical"], "description": "The severity at or above which the check fails (default warning); unexplained also fails on changes no rule explains." },
                }),
                &["since"],
            ),
        },
        ToolSpec {
            name: "rules_list",
            title: "List the rules",
            description: "The runbook rules vllm-diag evaluates: id, severity, title.",
            schema: object_schema(json!({}), &[]),
        },
        ToolSpec {
            name: "rules_show",
            title: "Show one rule",
            description: "Everything about one rule: what it detects, why it matters, its conditions and thresholds, its next steps.",
            schema: object_schema(json!({ "id": string_property("The rule id, e.g. kv-cache-pressure (rules_list gives them).") }), &["id"]),
        },
        ToolSpec {
            name: "events",
            title: "What changed",
            description: "Changes read from the metrics over a window ending now: restarts, rollouts, replicas appearing or vanishing, configuration and version changes, targets down, GPU errors. Oldest first.",
            schema: object_schema(json!({ "window": string_property("How far back to look, e.g. \"6h\" (default 6h).") }), &[]),
        },
    ]
}

/// Check a call's arguments. `Err(None)` for a tool that does not exist (a protocol error); `Err(Some(message))`
/// for arguments that are wrong (a tool error the agent reads).
pub fn parse(tool: &str, arguments: Option<&Map<String, Value>>) -> Result<Call, Option<String>> {
    let empty = Map::new();
    let args = Args { tool, map: arguments.unwrap_or(&empty) };
    let call = match tool {
        "explain" => {
            args.only(&["window", "at", "baseline", "selector", "group_by", "profile"])?;
            Call::Explain(ExplainCall {
                window: args.duration("window")?,
                at: args.time("at")?,
                baseline: args.duration("baseline")?,
                selector: args.selector("selector")?,
                group_by: args.labels("group_by")?,
                profile: args.name("profile", "a profile name such as chat, batch or code-completion")?,
            })
        }
        "check" => {
            args.only(&["since", "fail_on"])?;
            let since = args.string("since")?.ok_or_else(|| {
                Some(
                    "check: argument \"since\" is required: give the deploy time as an RFC 3339 time, a duration back from now (\"20m\"), or \"deploy\""
                        .to_string(),
                )
            })?;
            let since = check_since(&since)?;
            Call::Check(CheckCall { since, fail_on: args.fail_on("fail_on")? })
        }
        "rules_list" => {
            args.only(&[])?;
            Call::RulesList
        }
        "rules_show" => {
            args.only(&["id"])?;
            let id = args.name("id", "a rule id such as kv-cache-pressure (rules_list gives them)")?;
            Call::RulesShow {
                id: id.ok_or_else(|| {
                    Some("rules_show: argument \"id\" is required: give a rule id such as kv-cache-pressure (rules_list gives them)".to_string())
                })?,
            }
        }
        "events" => {
            args.only(&["window"])?;
            Call::Events { window: args.duration("window")? }
        }
        _ => return Err(None),
    };
    Ok(call)
}

/// `check`'s `since`: "deploy", or a time or duration `check::deploy_time` will take (checked
/// against now here; the window is checked again when the call runs).
fn check_since(since: &str) -> Result<String, Option<String>> {
    let s = since.trim();
    if s == "deploy" {
        return Ok(s.to_string());
    }
    crate::check::deploy_time(s, chrono::Utc::now()).map_err(|e| {
        let text = e.to_string();
        let text = text.trim_start_matches("--since ").trim_start_matches(&format!("{s}: "));
        Some(format!("check: argument \"since\" ({s:?}): {text}"))
    })?;
    Ok(s.to_string())
}

/// A call's arguments, with the tool's name for messages.
struct Args<'a> {
    tool: &'a str,
    map: &'a Map<String, Value>,
}

impl Args<'_> {
    fn bad(&self, name: &str, what: String) -> Option<String> {
        Some(format!("{}: argument {name:?}: {what}", self.tool))
    }

    /// Refuse arguments the tool does not take, naming those it does.
    fn only(&self, known: &[&str]) -> Result<(), Option<String>> {
        match self.map.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(k) if known.is_empty() => Err(Some(format!("{}: takes no arguments; drop {k:?}", self.tool))),
            Some(k) => Err(Some(format!(
                "{}: unknown argument {k:?}.{} It takes: {}",
                self.tool,
                crate::text::did_you_mean(k, known.iter().copied()),
                known.join(", ")
            ))),
        }
    }

    /// A string argument; absent or null is `None`; an empty string is refused.
    fn string(&self, name: &str) -> Result<Option<String>, Option<String>> {
        match self.map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Err(self.bad(name, "is empty: give a value or leave the argument out".into())),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(other) => Err(self.bad(name, format!("must be a string, not {}", json_kind(other)))),
        }
    }

    fn duration(&self, name: &str) -> Result<Option<Duration>, Option<String>> {
        let Some(s) = self.string(name)? else { return Ok(None) };
        crate::units::parse_duration(&s).map(Some).map_err(|e| {
            let how = if e.contains("write e.g.") { "" } else { ". Give a length such as \"30m\", \"2h\" or \"1d\"" };
            self.bad(name, format!("{s:?} is not a duration: {e}{how}"))
        })
    }

    fn time(&self, name: &str) -> Result<Option<String>, Option<String>> {
        let Some(s) = self.string(name)? else { return Ok(None) };
        crate::settings::parse_at(&s, chrono::Utc::now()).map_err(|e| {
            let text = e.to_string();
            self.bad(name, text.trim_start_matches("--at: ").trim_start_matches("--at ").to_string())
        })?;
        Ok(Some(s))
    }

    fn selector(&self, name: &str) -> Result<Option<String>, Option<String>> {
        let Some(s) = self.string(name)? else { return Ok(None) };
        crate::prom::Selector::parse(&s).map_err(|e| {
            // The parser's message starts with the flag it was written for.
            let text = e.to_string();
            let text = text.strip_prefix(&format!("--selector {s:?}: ")).unwrap_or(&text).to_string();
            self.bad(name, format!("{s:?} is not a list of label matchers: {text}"))
        })?;
        Ok(Some(s))
    }

    fn labels(&self, name: &str) -> Result<Option<String>, Option<String>> {
        let Some(s) = self.string(name)? else { return Ok(None) };
        let labels: Vec<&str> = s.split(',').map(str::trim).filter(|l| !l.is_empty()).collect();
        if labels.is_empty() {
            return Err(self.bad(name, "names no label: give e.g. \"model_name\" or \"model_name,namespace\"".into()));
        }
        if let Some(bad) = labels.iter().find(|l| !crate::prom::is_label_name(l)) {
            return Err(self.bad(name, format!("{bad:?} is not a label name (letters, digits and '_', not starting with a digit)")));
        }
        Ok(Some(labels.join(",")))
    }

    /// A short name (a rule id, a profile): one line, no control characters.
    fn name(&self, name: &str, what: &str) -> Result<Option<String>, Option<String>> {
        let Some(s) = self.string(name)? else { return Ok(None) };
        if s.len() > 200 || s.chars().any(char::is_control) {
            return Err(self.bad(name, format!("is not a name: give {what}")));
        }
        Ok(Some(s))
    }

    fn fail_on(&self, name: &str) -> Result<Option<(Option<Severity>, bool)>, Option<String>> {
        let Some(s) = self.string(name)? else { return Ok(None) };
        match s.as_str() {
            "never" => Ok(Some((None, false))),
            "info" => Ok(Some((Some(Severity::Info), true))),
            "unexplained" => Ok(Some((Some(Severity::Warning), true))),
            "warning" => Ok(Some((Some(Severity::Warning), false))),
            "critical" => Ok(Some((Some(Severity::Critical), false))),
            _ => Err(self.bad(name, format!("{s:?} is not a level: give never, info, unexplained, warning or critical"))),
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str, args: Value) -> Result<Call, Option<String>> {
        parse(tool, args.as_object())
    }

    fn error(tool: &str, args: Value) -> String {
        call(tool, args).expect_err("refused").expect("a tool error, not an unknown tool")
    }

    #[test]
    fn every_listed_tool_parses_with_no_or_its_required_arguments() {
        for spec in specs() {
            assert!(NAMES.contains(&spec.name));
            let args = match spec.name {
                "check" => json!({"since": "20m"}),
                "rules_show" => json!({"id": "kv-cache-pressure"}),
                _ => json!({}),
            };
            assert!(call(spec.name, args).is_ok(), "{}", spec.name);
            assert_eq!(spec.schema["type"], "object");
        }
    }

    #[test]
    fn explain_arguments_become_typed_values() {
        let c = call(
            "explain",
            json!({"window": "2h", "baseline": "1d", "at": "now", "selector": "job=\"vllm\"", "group_by": "model_name, namespace", "profile": "batch"}),
        )
        .unwrap();
        assert_eq!(
            c,
            Call::Explain(ExplainCall {
                window: Some(Duration::from_secs(7200)),
                at: Some("now".into()),
                baseline: Some(Duration::from_secs(86400)),
                selector: Some("job=\"vllm\"".into()),
                group_by: Some("model_name,namespace".into()),
                profile: Some("batch".into()),
            })
        );
        assert_eq!(call("explain", json!({"window": null})).unwrap(), Call::Explain(ExplainCall::default()));
    }

    #[test]
    fn a_bad_argument_is_named_with_what_to_give() {
        let e = error("explain", json!({"window": "banana"}));
        assert!(e.starts_with("explain: argument \"window\": \"banana\" is not a duration"), "{e}");
        assert!(e.contains("30m"), "{e}");
        let e = error("explain", json!({"window": 30}));
        assert!(e.contains("\"window\": must be a string, not a number"), "{e}");
        let e = error("explain", json!({"windw": "30m"}));
        assert!(e.contains("unknown argument \"windw\"") && e.contains("window"), "{e}");
        let e = error("explain", json!({"selector": "job=vllm"}));
        assert!(e.contains("argument \"selector\"") && e.contains("namespace=\"prod\"") && !e.contains("--selector"), "{e}");
        let e = error("explain", json!({"group_by": "model-name"}));
        assert!(e.contains("\"model-name\" is not a label name"), "{e}");
        let e = error("explain", json!({"at": "yesterday"}));
        assert!(e.contains("argument \"at\"") && e.contains("now"), "{e}");
        let e = error("check", json!({}));
        assert!(e.contains("\"since\" is required"), "{e}");
        let e = error("check", json!({"since": "20m", "fail_on": "high"}));
        assert!(e.contains("never, info, unexplained, warning or critical"), "{e}");
        let Ok(Call::Check(c)) = parse("check", json!({"since": "20m", "fail_on": "unexplained"}).as_object()) else { panic!("unexplained is a level") };
        assert_eq!(c.fail_on, Some((Some(Severity::Warning), true)));
        let e = error("check", json!({"since": "soon"}));
        assert!(e.contains("argument \"since\""), "{e}");
        let e = error("rules_list", json!({"x": 1}));
        assert!(e.contains("takes no arguments"), "{e}");
        let e = error("events", json!({"window": ""}));
        assert!(e.contains("is empty"), "{e}");
    }

    #[test]
    fn an_unknown_tool_is_not_a_tool_error() {
        assert_eq!(call("diagnose", json!({})), Err(None));
    }
}
