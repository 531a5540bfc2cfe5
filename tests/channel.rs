//! The incident channel gets the whole answer, and every line of it agrees (issue 49), on every
//! shipped recording (fixtures/incidents/) and every generated scenario (fixtures/scenarios/).
//!
//! The scenarios are diagnosed in process over local evaluation of their generated series, which
//! tests/differential.rs holds to a real Prometheus answer for answer on every scenario: this test
//! is about what the report says, and needs no server.
//!
//! For each report:
//! - every channel format (text, Markdown, Slack, Slack Block Kit, HTML) shows every fact of the
//!   one answer (same verdict, scope, deciding numbers, cards, steps, what was absorbed, counts);
//! - the Slack message holds the verdict, the deciding numbers, the advice and at least two steps
//!   in under 1,500 characters; the Markdown fits in 40 lines; the default text gives each card
//!   one line;
//! - no lever is ruled out because a limit "did not bind" beside a binding that says it did;
//! - the counts add up (evaluated + not evaluated = the pack; healthy + rules with findings <=
//!   evaluated; the not-evaluated count is the rules the report could not judge anywhere);
//! - the same quantity (running, waiting requests) is not printed two ways in one answer;
//! - the profile in force is said in every format;
//! - a correlation names its points, has at least 10, and never blames KV pressure at a KV-cache
//!   usage that is healthy;
//! - Slack and Block Kit may leave lines out to fit the channel, but then say how many, and never
//!   more than they say;
//! - no channel format points at a command-line flag (`-v`), and none shows a signal id where words
//!   belong (`(see preemption_recent)`);
//! - no open step asks about a signal the finding's answered steps already show, and no step
//!   proposes a lever the finding's won't-help rules out;
//! - JUnit fails exactly the findings `check` counts (one per finding, absorbed rules passing), and
//!   the top finding's score is at least each absorbed finding's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use vllm_diag::explain::{explain, ExplainOptions};
use vllm_diag::render::answer::{Answer, Hints};
use vllm_diag::render::{escape, render, Format, RenderOptions, ReportView};
use vllm_diag::report::{LimitKind, Report, RunParams, Step, TimeRange};
use vllm_diag::source::record::Replay;
use vllm_diag::source::Source;

const CHANNEL: [Format; 5] = [Format::Text, Format::Markdown, Format::Slack, Format::SlackBlocks, Format::Html];
/// The Slack message's promise.
const SLACK_CHARS: usize = 1500;
/// The Markdown's promise.
const MARKDOWN_LINES: usize = 40;

fn files(dir: &str, ext: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    out
}

fn run(source: Arc<dyn Source>, params: RunParams, profile: Option<&str>) -> Report {
    let mut rules = vllm_diag::rules::load_builtin().expect("the built-in rules load");
    if let Some(p) = profile {
        rules.apply_profile(p).expect("a known profile");
    }
    let selector = vllm_diag::prom::Selector::parse(&params.selector).expect("a valid selector");
    let opts = ExplainOptions { params, selector, concurrency: 4, deadline: Duration::from_secs(300) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let mut report = rt.block_on(explain(source, &rules, &opts)).expect("a report");
    report.profile = Some(profile.unwrap_or(vllm_diag::rules::DEFAULT_PROFILE).to_string());
    report
}

/// A shipped recording, replayed as `explain --replay` does.
fn recording(path: &Path) -> Report {
    let (replay, params) = Replay::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let profile = replay.profile().map(str::to_string);
    run(Arc::new(replay), params, profile.as_deref())
}

/// A generated scenario, diagnosed over local evaluation of its series at its window's end.
fn scenario(path: &Path) -> Report {
    scenario_over(path, None)
}

/// The same over the last `window` of the scenario's window.
fn scenario_over(path: &Path, window: Option<Duration>) -> Report {
    let spec = vllm_diag_sim::ScenarioSpec::load(path).unwrap_or_else(|e| panic!("{e}"));
    let store = Arc::new(vllm_diag::local::Store::from_series(vllm_diag_sim::generate_series(&spec).into_iter().map(|g| (g.name, g.labels, g.points))));
    let end = spec.window_end();
    let window = chrono::Duration::from_std(window.unwrap_or(spec.window)).expect("a window");
    let params = RunParams {
        window: TimeRange { start: end - window, end },
        baseline: TimeRange { start: end - window - window, end: end - window },
        selector: String::new(),
        group_by: vec!["model_name".to_string()],
        replica_label: "instance".to_string(),
    };
    run(Arc::new(vllm_diag::source::local::LocalSource::new(store, "local", "generated series")), params, None)
}

/// Whitespace runs as one space: the text format wraps a fact over lines, indenting them.
fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What a reader of `format` sees, as text: Block Kit's texts joined, the rest as rendered.
fn shown(report: &Report, format: Format) -> String {
    let out = render(report, format, &RenderOptions::default());
    if format != Format::SlackBlocks {
        return out;
    }
    let v: serde_json::Value = serde_json::from_str(&out).expect("Block Kit is JSON");
    let mut texts = vec![v["text"].as_str().unwrap_or_default().to_string()];
    for b in v["blocks"].as_array().expect("blocks") {
        texts.extend(b["text"]["text"].as_str().map(str::to_string));
        for e in b["elements"].as_array().into_iter().flatten() {
            texts.extend(e["text"].as_str().map(str::to_string));
        }
    }
    texts.join("\n")
}

/// Every way `report`'s channel answer disagrees with itself, the limits or its numbers.
fn problems(report: &Report) -> Vec<String> {
    let view = ReportView::new(report, &RenderOptions::default());
    let a = Answer::new(&view, Hints::None);
    let mut out: Vec<String> = unanswered(report);
    for format in CHANNEL {
        let text = shown(report, format);
        let flat = squeeze(&text);
        let missing: Vec<&str> = a.facts().into_iter().filter(|fact| !flat.contains(&squeeze(&escape(format, fact)))).collect();
        // Slack and Block Kit may leave lines out to fit the channel, saying how many.
        let cut = if matches!(format, Format::Slack | Format::SlackBlocks) { left_out(&text) } else { 0 };
        if missing.len() > cut {
            for fact in missing {
                out.push(format!("{format}: does not say {fact:?} ({cut} lines said left out)\n{text}"));
            }
        }
        if format != Format::Text && (text.contains("-v lists") || text.contains("-v says") || text.contains("-v has") || text.contains("(the arithmetic: -v"))
        {
            out.push(format!("{format}: a command-line hint in a channel format\n{text}"));
        }
        if signal_id_in_words(&text) {
            out.push(format!("{format}: a signal id where words belong\n{text}"));
        }
        let profile = format!("profile {}", report.profile.as_deref().unwrap_or_default());
        if !text.contains(&profile) {
            out.push(format!("{format}: the profile in force ({profile}) is not said"));
        }
        // The page's whole report below the answer keeps each card's arithmetic, as -v does.
        if format != Format::Html {
            out.extend(one_quantity_one_number(format, &text));
        }
    }
    out.extend(limits(report, &a));
    out.extend(agreement(report));
    out.extend(steps_and_scores(report));
    out.extend(counts(report, &a));
    out.extend(correlations(report));
    // -v says the profile too, JUnit has it as a property, and the JSON carries it.
    let junit = render(report, Format::Junit, &RenderOptions::default());
    if !junit.contains(&format!("<property name=\"profile\" value=\"{}\"", report.profile.as_deref().unwrap_or_default())) {
        out.push("junit: the profile in force is not a property".to_string());
    }
    let json = render(report, Format::Json, &RenderOptions::default());
    if !json.contains(&format!("\"profile\": \"{}\"", report.profile.as_deref().unwrap_or_default())) {
        out.push("json: no profile".to_string());
    }
    let table = render(report, Format::Table, &RenderOptions::default());
    if !table.contains(&format!("profile {}", report.profile.as_deref().unwrap_or_default())) {
        out.push("table: the profile in force is not said".to_string());
    }
    out
}

/// A step left open although the report holds what answers it: the binding of the finding's model.
fn unanswered(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for f in &report.findings {
        let bound = report.binding.iter().any(|b| b.is_model_of(&f.scope, &report.metrics.replica_label));
        for s in f.steps.iter() {
            if let Step::Rule { ask, awaits: Some(vllm_diag::report::Awaits::Binding { .. }), .. } = s {
                if bound {
                    out.push(format!("{}: {ask:?} is asked, although the binding of its model answers it", f.rule));
                }
            }
        }
    }
    out
}

/// The Slack message, the Markdown and the text within what the issue asks.
fn limits(report: &Report, a: &Answer) -> Vec<String> {
    let mut out = Vec::new();
    let slack = render(report, Format::Slack, &RenderOptions::default());
    // What the channel shows: Slack's three escapes read as one character each.
    let chars = slack.replace("&gt;", ">").replace("&lt;", "<").replace("&amp;", "&").chars().count();
    if chars >= SLACK_CHARS {
        out.push(format!("slack: {chars} characters, not under {SLACK_CHARS}\n{slack}"));
    }
    if let Some(l) = &a.lead {
        let f = report.findings.iter().find(|f| f.rule == l.rule).expect("the lead is a finding");
        if l.numbers.is_empty() {
            out.push(format!("{}: the lead finding has no deciding number", l.rule));
        }
        // The answer asks the first open steps and shows the first answered ones.
        let open = f.steps.open().count();
        if l.steps.len() < open.min(2) {
            out.push(format!("{}: {} steps in the answer, of {open} open", l.rule, l.steps.len()));
        }
        let answered = f.steps.checked().count();
        if l.checked.len() < answered.min(2) {
            out.push(format!("{}: {} checked steps in the answer, of {answered}", l.rule, l.checked.len()));
        }
        if l.cards.len() != f.recommendations.len() {
            out.push(format!("{}: {} cards in the answer, {} in the report", l.rule, l.cards.len(), f.recommendations.len()));
        }
        let text = render(report, Format::Text, &RenderOptions::default());
        for c in &l.cards {
            if !text.lines().any(|line| line.trim() == c.line) {
                out.push(format!("text: the card {:?} is not one line of its own\n{text}", c.line));
            }
        }
    }
    let md = render(report, Format::Markdown, &RenderOptions::default());
    if md.lines().count() > MARKDOWN_LINES {
        out.push(format!("markdown: {} lines, more than {MARKDOWN_LINES}\n{md}", md.lines().count()));
    }
    out
}

/// The limit a lever acts on, by its flag.
fn lever_limit(flag: &str) -> Option<LimitKind> {
    if flag.contains("--max-num-seqs") {
        Some(LimitKind::MaxNumSeqs)
    } else if flag.contains("kv-cache") || flag.contains("gpu-memory-utilization") {
        Some(LimitKind::KvCache)
    } else if flag.contains("--max-num-batched-tokens") {
        Some(LimitKind::MaxNumBatchedTokens)
    } else {
        None
    }
}

/// No lever is ruled out for a limit the binding says bound: not "did not bind" beside "bound by",
/// and nothing about the KV cache for a model the KV cache bound.
fn agreement(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for f in &report.findings {
        let Some(b) =
            report.binding.iter().find(|b| b.scope.iter().all(|(k, v)| f.scope.get(k) == Some(v)) && !b.scope.contains_key(&report.metrics.replica_label))
        else {
            continue;
        };
        for w in &f.wont_help {
            let Some(limit) = lever_limit(&w.flag) else { continue };
            let share = b.shares.get(&limit).copied().unwrap_or(0.0);
            if share >= 0.1 && (w.why.contains("did not bind") || limit == LimitKind::KvCache) {
                out.push(format!(
                    "{} on {:?}: won't help {} ({}) beside a binding of {} for {:.0}% of the window",
                    f.rule,
                    f.scope,
                    w.lever,
                    w.why,
                    limit.name(),
                    share * 100.0
                ));
            }
        }
    }
    out
}

/// `(see preemption_recent)` or `(see a_b, c_d)`: signal ids where a reader needs words.
fn signal_id_in_words(text: &str) -> bool {
    text.match_indices("(see ").any(|(i, _)| {
        let rest = &text[i + 5..];
        let Some(end) = rest.find(')') else { return false };
        rest[..end].split(", ").all(|id| id.contains('_') && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
    })
}

/// How many lines a Slack message says it left out to fit the channel (0 when it says none).
fn left_out(text: &str) -> usize {
    text.lines()
        .find_map(|l| {
            l.trim_matches('_').split_once(" left out to fit the channel").map(|(n, _)| n.split_whitespace().next().unwrap_or_default().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

/// Every line earned: no open step asks what an answered one shows, no step proposes a lever the
/// evidence rules out, JUnit fails each finding once (as `check` counts them), and a finding's
/// score is at least that of each finding it absorbed.
fn steps_and_scores(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for f in &report.findings {
        let ruled_out: Vec<&str> = f.wont_help.iter().flat_map(|w| w.flag.split(" / ")).collect();
        for s in f.steps.iter() {
            if let Some(l) = s.lever().filter(|l| ruled_out.contains(l)) {
                out.push(format!("{}: the step {:?} proposes {l}, which its won't-help rules out", f.rule, s.text()));
            }
        }
        let answered: Vec<&str> = f.steps.answered().map(|a| a.ask.as_str()).collect();
        for s in f.steps.open() {
            if let Step::Rule { ask, .. } = s {
                if answered.contains(&ask.as_str()) {
                    out.push(format!("{}: the step {ask:?} is both answered and asked", f.rule));
                }
            }
        }
        for a in &f.also_consistent {
            if a.score > f.score + 1e-9 {
                out.push(format!("{}: score {} below the score {} of {}, which it absorbed", f.rule, f.score, a.score, a.rule));
            }
        }
    }
    let opts = RenderOptions { fail_on: Some(vllm_diag::report::Severity::Warning), ..RenderOptions::default() };
    let junit = render(report, Format::Junit, &opts);
    // The findings check counts, and a failed probe (`--probe`), a test case of its own.
    let failing = report.findings.iter().filter(|f| f.severity >= vllm_diag::report::Severity::Warning).count()
        + usize::from(report.probe.as_ref().is_some_and(|p| p.fails()));
    if !junit.contains("<testsuites name=\"vllm-diag\" tests=\"")
        || !junit.lines().next().into_iter().chain(junit.lines()).any(|l| l.starts_with("<testsuites ") && l.contains(&format!(" failures=\"{failing}\" ")))
    {
        out.push(format!("junit: the failures are not the {failing} findings and failed probes check counts"));
    }
    out
}

/// The counts the answer says add up, and are the report's.
fn counts(report: &Report, a: &Answer) -> Vec<String> {
    let c = a.counts;
    let mut out = Vec::new();
    if c.evaluated + c.not_evaluated != c.total {
        out.push(format!("counts: {} evaluated + {} not evaluated != {} rules", c.evaluated, c.not_evaluated, c.total));
    }
    let with_findings: std::collections::BTreeSet<&str> =
        report.findings.iter().flat_map(|f| std::iter::once(f.rule.as_str()).chain(f.also_consistent.iter().map(|x| x.rule.as_str()))).collect();
    if c.healthy + with_findings.len() > c.evaluated {
        out.push(format!("counts: {} healthy + {} with findings > {} evaluated", c.healthy, with_findings.len(), c.evaluated));
    }
    let judged: std::collections::BTreeSet<&str> = with_findings.iter().copied().chain(report.healthy.iter().map(|h| h.rule.as_str())).collect();
    let nowhere: std::collections::BTreeSet<&str> = report.not_evaluated.iter().map(|n| n.rule.as_str()).filter(|r| !judged.contains(r)).collect();
    let disabled = report.disabled.len();
    if report.stats.rules_evaluated > 0 && nowhere.len() != c.not_evaluated {
        out.push(format!(
            "counts: {} rules said not evaluated, {} not evaluated in any scope ({nowhere:?}; {disabled} disabled)",
            c.not_evaluated,
            nowhere.len()
        ));
    }
    out
}

/// The running and waiting requests are each given one number in an answer (`58 running` in the
/// binding, never `50.9 running` in a card beside it).
fn one_quantity_one_number(format: Format, text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for what in ["running", "waiting"] {
        let words: Vec<&str> = text.split_whitespace().collect();
        let mut numbers: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        for w in words.windows(3) {
            // `58 running`, `43.7 waiting`, not `17 running sequences per replica` (another quantity).
            if w[1].trim_end_matches([',', '.', ':', ';']) == what && w[2] != "sequences" && w[0].parse::<f64>().is_ok() {
                numbers.insert(w[0].to_string());
            }
        }
        if numbers.len() > 1 {
            out.push(format!("{format}: {what} requests printed as {numbers:?}\n{text}"));
        }
    }
    out
}

/// Correlations name their points, have enough of them, and never blame a healthy KV cache.
fn correlations(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for f in &report.findings {
        for c in &f.correlations {
            if c.points < 10 || !c.text.contains(&format!("over {} points", c.points)) {
                out.push(format!("{}: a correlation over {} points: {}", f.rule, c.points, c.text));
            }
            if c.cause.starts_with("kv_usage") {
                let kv = f.evidence.iter().filter(|e| e.signal.starts_with("kv_usage")).filter_map(|e| e.value).fold(f64::NAN, f64::max);
                if kv < 0.6 {
                    out.push(format!("{}: blames KV pressure at {:.0}% KV-cache usage: {}", f.rule, kv * 100.0, c.text));
                }
            }
        }
    }
    out
}

fn assert_none(what: &str, problems: Vec<String>) {
    assert!(problems.is_empty(), "{what}: {} problems:\n{}", problems.len(), problems.join("\n---\n"));
}

#[test]
fn every_recording_gets_one_answer_that_agrees_with_itself() {
    let paths = files("fixtures/incidents", "json");
    assert!(paths.len() >= 3, "only {} recordings", paths.len());
    let mut found = Vec::new();
    for path in paths {
        found.extend(problems(&recording(&path)).into_iter().map(|p| format!("{}: {p}", path.display())));
    }
    assert_none("the recordings", found);
}

/// Each scenario's diagnosis, four at a time; every failure is reported, not only the first.
#[test]
fn every_generated_scenario_gets_one_answer_that_agrees_with_itself() {
    let paths = files("fixtures/scenarios", "toml");
    assert!(paths.len() >= 50, "only {} scenarios", paths.len());
    let only = std::env::var("VLLM_DIAG_SCENARIO").ok();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(path) = paths.get(i) else { break };
                let name = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
                if only.as_deref().is_some_and(|o| !o.split(',').any(|x| x == name)) {
                    continue;
                }
                let found = problems(&scenario(path));
                if !found.is_empty() {
                    failures.lock().unwrap_or_else(|p| p.into_inner()).push(format!("{name}: {}", found.join("\n---\n")));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    assert!(failures.is_empty(), "{} scenarios disagree:\n{}", failures.len(), failures.join("\n=====\n"));
}

/// What the run adjusted to a short window is a note for -v, not a warning in the channel.
#[test]
fn a_short_windows_adjustment_is_said_under_verbose_only() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios/kv-cache-pressure.toml");
    let report = scenario_over(&path, Some(Duration::from_secs(240)));
    assert!(report.notes.iter().any(|n| n.contains("shorter than some signals' own ranges")), "{:?}", report.notes);
    assert!(!report.warnings.iter().any(|w| w.contains("own ranges")), "{:?}", report.warnings);
    for format in CHANNEL {
        let text = shown(&report, format);
        assert!(!text.contains("own ranges") || format == Format::Html, "{format}: {text}");
    }
    let table = render(&report, Format::Table, &RenderOptions::default());
    assert!(table.contains("Note: the window (240s) is shorter than some signals' own ranges"), "{table}");
}

/// A probe joined to a diagnosis (`explain --probe`) is said in every channel format, under a
/// clean answer and under a finding: the lab's probe through vLLM's router at its limit
/// (fixtures/real-engine-probe-join, scripts/lab/probe-join.sh) joined to two recordings.
#[test]
fn a_probe_joined_to_a_diagnosis_is_said_in_every_channel_format() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lab: Report = serde_json::from_str(&std::fs::read_to_string(root.join("fixtures/real-engine-probe-join/explain-probe-408.json")).unwrap()).unwrap();
    let probe = lab.probe.expect("the lab's report holds its probe");
    for name in ["healthy-steady", "kv-cache-pressure"] {
        let mut report = recording(&root.join(format!("fixtures/incidents/{name}.json")));
        report.probe = Some(probe.clone());
        assert_none(name, problems(&report));
        if name == "healthy-steady" {
            for format in CHANNEL {
                let text = squeeze(&shown(&report, format));
                for said in [
                    "PROBE FAILED: the probe of http://127.0.0.1:39389/v1/completions: 8 of 10 requests failed",
                    "Refused in front of the engines: 8 of 10 requests answered busy",
                ] {
                    assert!(text.contains(&squeeze(&escape(format, said))), "{format}: {said:?} not in\n{text}");
                }
            }
        }
    }
}
