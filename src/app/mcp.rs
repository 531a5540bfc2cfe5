//! `mcp`: the settings and flags become the MCP server ([`crate::mcp`]) and the closure that runs
//! each tool call: the same diagnosis explain and check run, the rule documentation `rules list`
//! and `rules show` print, the change events `check --since deploy` reads. The call's arguments
//! replace the server's settings for that call only.

use std::sync::Arc;

use super::check::{check_scope, since_not_window, verdict, NOT_EVALUATED};
use super::explain::{diagnose, live_now, runtime};
use super::serve::read_secret;
use crate::cli::{McpServerArgs, McpTransport};
use crate::error::{exit, Failure};
use crate::mcp::tools::{CheckCall, ExplainCall};
use crate::mcp::{Answer, Call, HttpConfig, Redact, Server};
use crate::render::{self, Format, RenderOptions};
use crate::report::Report;
use crate::settings::{Lookup, Origin, Setting, Settings};

/// How far back `events` looks when the call gives no window.
const EVENTS_WINDOW: std::time::Duration = crate::app::check::DEPLOY_LOOKBACK;

/// The longest text summary, in lines (the JSON that follows has the rest).
const SUMMARY_LINES: usize = 40;

pub(super) fn run_mcp(mut s: Settings, command_line: &Settings, lookup: &Lookup, args: McpServerArgs) -> Result<u8, Failure> {
    refuse_what_does_not_apply(&s, &args)?;
    // An agent reads the exit code as the verdict: a warning or worse is exit code 1 unless
    // --fail-on (or the file) says otherwise, as for check; explain's own default, never, would
    // give 0 beside a critical finding.
    if !s.output.fail_on.origin.is_given() {
        s.output.fail_on = Setting::default_value(Some(crate::report::Severity::Warning));
    }
    // Checked once before serving, as serve does: a bad selector, rule file, profile or connection
    // setting stops here rather than failing every call.
    s.run_params(chrono::Utc::now())?;
    let mut rules = crate::rules::load_with_overrides(s.rules.dir.as_deref())?;
    if let Some(profile) = s.rules.profile.as_deref() {
        rules.apply_profile(profile).map_err(Failure::Usage)?;
    }
    drop(super::connect::connect(&s)?);
    let redact = Redact::new(secrets(&s));
    let auth_token = args.auth_token_file.as_deref().map(|p| read_secret("--auth-token-file", p)).transpose()?;
    // The rules tools read the pack as `rules list` does: the command line's rules directory and
    // profile, and the configuration file.
    let rules_command_line = Settings {
        rules: crate::settings::RuleSettings { dir: command_line.rules.dir.clone(), profile: command_line.rules.profile.clone(), ..Default::default() },
        ..Settings::default()
    };
    let lookup = lookup.clone();
    let calls = Arc::new(runtime()?);
    let rt = calls.clone();
    let run: Arc<crate::mcp::Run> = Arc::new(move |call: Call| match call {
        Call::Explain(c) => explain(&s, &c, &rt),
        Call::Check(c) => check(&s, &c, &rt),
        Call::Events { window } => events(&s, window.unwrap_or(EVENTS_WINDOW), &rt),
        Call::RulesList => {
            let (text, document) = super::rules::list_for_agents(rules_command_line.clone(), &lookup)?;
            Ok(Answer { summary: text, document })
        }
        Call::RulesShow { id } => {
            let text = super::rules::show_for_agents(rules_command_line.clone(), &lookup, &id)?;
            Ok(Answer { summary: text.clone(), document: serde_json::json!({ "id": id, "text": text }) })
        }
    });
    let server = Server::new(run, redact);
    let service = runtime()?;
    let result = match args.transport {
        McpTransport::Stdio => service.block_on(crate::mcp::run_stdio(server)),
        McpTransport::Http => {
            crate::serve::check_exposure("mcp", &args.listen, auth_token.is_some(), args.allow_unauthenticated_remote).map_err(Failure::Usage)?;
            let config = HttpConfig { listen: args.listen.clone(), allowed_hosts: args.allowed_host.clone(), auth_token };
            service.block_on(crate::mcp::run_http(server, config, crate::serve::stop_signal("mcp")))
        }
    };
    // A call still running is bounded by --timeout; the process need not wait for it.
    service.shutdown_timeout(std::time::Duration::from_secs(5));
    drop(calls);
    result.map(|()| exit::OK)
}

/// The explain settings that make no sense for a server answering calls, refused with the reason.
fn refuse_what_does_not_apply(s: &Settings, args: &McpServerArgs) -> Result<(), Failure> {
    let given = super::one_run_flags(s);
    if !given.is_empty() {
        return Err(Failure::Usage(format!(
            "mcp diagnoses live data from --prometheus over the windows each call names (the explain tool's window and at): drop {}",
            given.join(", ")
        )));
    }
    if args.transport == McpTransport::Stdio && (args.auth_token_file.is_some() || !args.allowed_host.is_empty()) {
        return Err(Failure::Usage("--auth-token-file and --allowed-host are for --transport http; over stdio the client starts the process itself".into()));
    }
    Ok(())
}

/// Every credential the settings hold or name, to mask wherever it might appear: the token and
/// password (given or read from their files) and the values of the extra headers.
fn secrets(s: &Settings) -> Vec<String> {
    let c = &s.connection;
    let mut out: Vec<String> = Vec::new();
    out.extend(c.bearer_token.value.iter().map(|t| t.expose().to_string()));
    out.extend(c.basic_auth_password.value.iter().map(|t| t.expose().to_string()));
    for path in c.bearer_token_file.value.iter().chain(c.basic_auth_password_file.value.iter()) {
        if let Ok(text) = std::fs::read_to_string(path) {
            out.push(text.trim_end_matches(['\r', '\n']).trim().to_string());
        }
    }
    for h in &c.headers {
        if let Some((_, value)) = h.expose().split_once(':') {
            out.push(value.trim().to_string());
        }
    }
    // A password in the URL (http://user:password@host), as written and decoded.
    if let Some(password) = url::Url::parse(&s.source.prometheus).ok().and_then(|u| u.password().map(str::to_string)) {
        out.push(percent_encoding::percent_decode_str(&password).decode_utf8_lossy().into_owned());
        out.push(password);
    }
    for var in [crate::source::auth::ENV_BEARER_TOKEN, crate::source::auth::ENV_BASIC_AUTH_PASSWORD] {
        if let Ok(v) = std::env::var(var) {
            out.push(v);
        }
    }
    out
}

/// A call's argument as a setting: named by the argument, so that an error about it says where
/// the value came from.
fn arg<T>(value: T, name: &'static str) -> Setting<T> {
    Setting::new(value, Origin::Flag(name))
}

/// A message written for the command line, with the flags that are tool arguments here named as
/// arguments (`--window 15s` becomes `window 15s`), so that the agent knows what to change.
fn as_arguments(failure: Failure) -> Failure {
    const FLAGS: [(&str, &str); 8] = [
        ("--since", "since"),
        ("--at", "at"),
        ("--window", "window"),
        ("--baseline", "baseline"),
        ("--selector", "selector"),
        ("--group-by", "group_by"),
        ("--profile", "profile"),
        ("--fail-on", "fail_on"),
    ];
    let rewrite = |m: String| FLAGS.iter().fold(m, |m, (flag, arg)| m.replace(flag, arg));
    match failure {
        Failure::Usage(m) => Failure::Usage(rewrite(m)),
        Failure::NoData(m) => Failure::NoData(rewrite(m)),
        other => other,
    }
}

fn explain(base: &Settings, c: &ExplainCall, rt: &tokio::runtime::Runtime) -> Result<Answer, Failure> {
    let mut s = base.clone();
    if let Some(w) = c.window {
        s.scope.window = arg(Some(w), "window");
    }
    if let Some(at) = &c.at {
        s.scope.at = arg(Some(at.clone()), "at");
    }
    if let Some(b) = c.baseline {
        s.scope.baseline = arg(Some(b), "baseline");
    }
    if let Some(sel) = &c.selector {
        s.scope.selector = arg(Some(sel.clone()), "selector");
    }
    if let Some(g) = &c.group_by {
        s.scope.group_by = arg(g.clone(), "group_by");
    }
    if let Some(p) = &c.profile {
        s.rules.profile = arg(Some(p.clone()), "profile");
    }
    let report = diagnose(&s, false, rt).map_err(|e| match as_arguments(e) {
        Failure::Usage(m) if c.profile.is_some() && m.contains("profile") => Failure::Usage(format!("explain: argument \"profile\": {m}")),
        other => other,
    })?;
    Ok(answer(&s, &report, None))
}

fn check(base: &Settings, c: &CheckCall, rt: &tokio::runtime::Runtime) -> Result<Answer, Failure> {
    let mut s = base.clone();
    // The window comes from `since`: the server's own --window and --baseline are explain's.
    s.scope.window = Setting::default_value(None);
    s.scope.baseline = Setting::default_value(None);
    if let Some((severity, unexplained)) = c.fail_on {
        s.output.fail_on = arg(severity, "fail_on");
        s.output.fail_on_unexplained = arg(unexplained, "fail_on");
    }
    let deploy = check_scope(&mut s, Some(&c.since)).map_err(|e| match e {
        Failure::Usage(m) => Failure::Usage(format!("check: argument \"since\": {}", m.trim_start_matches("--since "))),
        other => as_arguments(other),
    })?;
    let mut report = diagnose(&s, false, rt).map_err(|e| match as_arguments(since_not_window(e)) {
        Failure::NoData(m) => Failure::NoData(format!("{NOT_EVALUATED}: {m}")),
        Failure::Source(m) => Failure::Source(format!("{NOT_EVALUATED}: {m}")),
        other => other,
    })?;
    report.deploy = deploy;
    let verdict = verdict(&s, &report);
    Ok(answer(&s, &report, Some(verdict)))
}

/// The summary (the text format, shortened, the exit code in words) and the JSON report.
fn answer(s: &Settings, report: &Report, verdict: Option<String>) -> Answer {
    let fail_on = *s.output.fail_on;
    // The footer points at the JSON that follows, not at -v.
    let opts = RenderOptions { now: live_now(s), fail_on, verdict, detail: render::Detail::JsonBelow, ..RenderOptions::default() };
    let text = render::render(report, Format::Text, &opts);
    let mut lines: Vec<&str> = text.lines().collect();
    let cut = lines.len().saturating_sub(SUMMARY_LINES);
    lines.truncate(SUMMARY_LINES);
    let mut summary = lines.join("\n");
    if cut > 0 {
        summary.push_str(&format!("\n... ({cut} more lines: the JSON report below has everything)"));
    }
    let code = report.exit_code(fail_on);
    // A check's verdict leads the text; where it says NOT EVALUATED already, it is not said twice.
    let said = opts.verdict.is_some()
        && render::verdict_says_not_evaluated(report, &RenderOptions { fail_on_unexplained: *s.output.fail_on_unexplained, ..opts.clone() });
    if code == exit::NO_DATA && !said {
        summary = format!(
            "NOT EVALUATED (exit code 3): this run gives no verdict and is not a healthy result; the report says what could not be judged and why.\n{summary}"
        );
    }
    let bar = fail_on.map_or("never".to_string(), |f| f.to_string());
    summary.push_str(&format!("\n\nexit code {code} (fail_on {bar}): {}", exit_meaning(code)));
    let json = render::render(report, Format::Json, &opts);
    let document = serde_json::from_str(&json)
        .unwrap_or_else(|e| serde_json::json!({ "error": { "message": format!("cannot encode the report: {e}"), "exit_code": code } }));
    Answer { summary, document }
}

/// What an exit code means, in the words docs/output.md uses.
fn exit_meaning(code: u8) -> &'static str {
    match code {
        exit::OK => "no finding at or above fail_on",
        exit::FINDINGS => "a finding at or above fail_on",
        exit::NO_DATA => "NOT EVALUATED: nothing could be judged, or core checks could not be; this is not a healthy verdict",
        _ => "usage or configuration error",
    }
}

/// `events`: the changes read from the metrics over `window` ending now.
fn events(s: &Settings, window: std::time::Duration, rt: &tokio::runtime::Runtime) -> Result<Answer, Failure> {
    let end = chrono::Utc::now();
    let (params, selector) = s.run_params(end)?;
    let client: Arc<dyn crate::source::Source> = Arc::new(super::connect::connect(s)?);
    let length = chrono::Duration::from_std(window).map_err(|_| Failure::Usage("events: argument \"window\" is too long".into()))?;
    let range = crate::report::TimeRange { start: end - length, end };
    let (events, warnings) = rt.block_on(crate::explain::find_events(client, &selector, &params.group_by, &params.replica_label, range, *s.limits.timeout));
    let mut summary = format!(
        "{} change events in the {} before {}",
        events.len(),
        humantime::format_duration(window),
        end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    for e in &events {
        summary.push_str(&format!("\n{}  {}  {}", e.time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), e.kind.as_str(), render::one_line(&e.detail)));
    }
    for w in &warnings {
        summary.push_str(&format!("\nwarning: {}", render::one_line(w)));
    }
    let document = serde_json::json!({
        "schema_version": crate::report::SCHEMA_VERSION,
        "window": range,
        "events": events,
        "warnings": warnings,
    });
    Ok(Answer { summary, document })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_in_a_message_become_the_tool_arguments() {
        let f = as_arguments(Failure::NoData("no vLLM data in the window. Check --at and --since, or widen --window".into()));
        assert_eq!(f.to_string(), "no vLLM data in the window. Check at and since, or widen window");
        let f = as_arguments(Failure::Usage("--group-by: \"a-b\" is not a label name".into()));
        assert_eq!(f.to_string(), "group_by: \"a-b\" is not a label name");
        // A source error names no flag of ours, and is left as it is.
        assert_eq!(as_arguments(Failure::Source("cannot reach --x".into())).to_string(), "cannot reach --x");
    }
}
