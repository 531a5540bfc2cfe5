//! Turning a [`Report`] into text: a terminal table, Markdown for incident channels, Slack, HTML,
//! JUnit XML, or JSON for CI.
//!
//! Every renderer is a pure function to a `String`; the caller decides where it goes. Nothing here
//! probes the terminal, so the same report always renders to the same bytes, which is what makes
//! the snapshot tests meaningful and lets `--format table` be piped into a file.
//!
//! The pipeline is `Report -> ReportView -> text`. [`view::ReportView`] holds every section a
//! reader sees (header, verdict, findings with their evidence, healthy, not evaluated, disabled,
//! warnings), decided and worded once by the helpers in this module; the renderers only lay it out
//! in their markup, so the formats can never disagree about the facts or forget a section. JSON is
//! the exception on purpose: it is the serialized `Report` itself, the stable contract for scripts.
//! Two rules shape the wording:
//! - a rule that could not be evaluated is always listed by name, scope and reason: a diagnosis
//!   with holes must show them;
//! - when nothing at all was evaluated the output never calls anything healthy.
//!
//! Adding a format: write `render/<name>.rs` with `pub fn render(view: &ReportView, opts:
//! &RenderOptions) -> String`, add a variant to [`Format`] (and to [`Format::ALL`]), and one arm
//! to [`Format::spec`] giving its name, its one-line description and its renderer. `--format`,
//! its help text and its error messages follow from that.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use crate::report::{Evidence, Finding, NotEvaluated, Report, Scope, Severity, TimeRange};
use crate::units;

pub mod answer;
pub mod compact;
pub mod github;
pub mod hops;
pub mod html;
pub mod json;
pub mod junit;
pub mod links;
pub mod markdown;
pub mod slack;
pub mod slack_blocks;
pub mod sparkline;
pub mod table;
pub mod view;

pub use view::ReportView;

/// Output format chosen with `--format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Format {
    /// The verdict first, each warning or critical finding in a few lines, then one footer line
    /// (the default; `-v` gives [`Format::Table`]).
    #[default]
    Text,
    /// Boxed tables for a terminal: the full evidence, its conditions, the PromQL, what was healthy.
    Table,
    /// Compact Markdown to paste into an incident channel or a GitHub issue.
    Markdown,
    /// The report as JSON (schema in `report.rs`), for scripts and CI.
    Json,
    /// Slack mrkdwn: no tables, within one message, the most important finding first.
    Slack,
    /// The Slack message as Block Kit JSON, a payload for an incoming webhook.
    SlackBlocks,
    /// JUnit XML: a test case per rule and scope, for the test report view of CI systems.
    Junit,
    /// One self-contained HTML page with a chart of every evidence signal, for incident tickets.
    Html,
}

/// What a format is: its `--format` name, its description, whether people read it, its renderer.
struct Spec {
    name: &'static str,
    about: &'static str,
    text: bool,
    renderer: Renderer,
}

enum Renderer {
    /// Lays out the report view.
    View(fn(&ReportView, &RenderOptions) -> String),
    /// Serialises the report itself (JSON: the schema is the contract, not the view), with how the
    /// run ended under the options' `fail_on`.
    Report(fn(&Report, &RenderOptions) -> String),
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: &'static [Format] =
        &[Format::Text, Format::Table, Format::Markdown, Format::Json, Format::Slack, Format::SlackBlocks, Format::Junit, Format::Html];

    /// The one place a format is described.
    fn spec(self) -> Spec {
        use Renderer::{Report as R, View as V};
        let (name, about, text, renderer) = match self {
            Format::Text => ("text", "The verdict first, each warning or critical finding in a few lines, a footer (-v: table)", true, V(compact::render)),
            Format::Table => ("table", "Boxed tables for a terminal: the full evidence and its PromQL (what -v gives)", true, V(table::render)),
            Format::Markdown => ("markdown", "Compact Markdown to paste into an incident channel or a GitHub issue", true, V(markdown::render)),
            Format::Json => ("json", "The report as JSON (schema in `report.rs`), for scripts and CI", false, R(json::render)),
            Format::Slack => ("slack", "Slack mrkdwn: the answer in one message, under 1,500 characters", true, V(slack::render)),
            Format::SlackBlocks => ("slack-blocks", "The Slack message as Block Kit JSON, a payload for an incoming webhook", false, V(slack_blocks::render)),
            Format::Junit => ("junit", "JUnit XML: a test case per rule and scope, for the test report view of CI systems", false, V(junit::render)),
            Format::Html => ("html", "One self-contained HTML page with a chart of every evidence signal, for incident tickets", false, V(html::render)),
        };
        Spec { name, about, text, renderer }
    }

    /// The `--format` value: `text`, `table`, `markdown`, `json`, `slack`, `junit`, `html`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// One line saying what the format is for (the `--help` text of its value).
    pub fn about(self) -> &'static str {
        self.spec().about
    }

    /// Formats meant for people reading text (a verdict line or annotations may go around them);
    /// the others are documents a program parses, which nothing may be added to.
    pub fn is_text(self) -> bool {
        self.spec().text
    }

    /// Formats laid out for a terminal, which may be coloured and are wrapped to its width.
    pub fn is_terminal(self) -> bool {
        matches!(self, Format::Text | Format::Table)
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--format` value that names no format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl std::fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        write!(f, "unknown format {:?}: use one of {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownFormat {}

impl std::str::FromStr for Format {
    type Err = UnknownFormat;

    /// The `--format` name, exactly as `--format` takes it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.name() == s)
            .ok_or_else(|| UnknownFormat(s.to_string()))
    }
}

/// Presentation knobs that do not change what is said.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// Colour severities with ANSI escapes (text and table only). The caller decides (tty, `NO_COLOR`, flag).
    pub color: bool,
    /// The terminal's width: the table format wraps to it, the text format to it or 100 columns,
    /// whichever is less. `None` (no terminal): both are laid out for 100 columns (PromQL keeps
    /// lines of its own, broken only where whitespace means nothing to it).
    pub width: Option<u16>,
    /// The time of rendering, for relative hints such as "ended 12 min ago". Set for live runs
    /// only: a replay or a snapshot leaves it `None` and so renders the same bytes every time.
    pub now: Option<DateTime<Utc>>,
    /// The severity at or above which a finding fails the run (`--fail-on`); `None` when nothing
    /// fails. JUnit turns it into failed test cases; `check` into its verdict.
    pub fail_on: Option<Severity>,
    /// Changes no rule explains fail the run too (`--fail-on unexplained`, or `info`).
    pub fail_on_unexplained: bool,
    /// Deep links from evidence queries to charts (markdown, slack, html); `None` for none.
    pub links: Option<links::GraphLinks>,
    /// `check`'s verdict line (`FAIL: ...`), which the text formats print first, escaped for
    /// their reader (it names scopes, whose label values come from the server); Slack counts it
    /// in its length limit. The document formats leave it out: the caller prints it on stderr.
    pub verdict: Option<String>,
}

/// What a document format (`json`, `junit`) writes on stdout when a run ends without a report (the
/// source unreachable, no vLLM data, a recording that cannot be read), so that a pipeline reading
/// the document finds the error where it expects the report, not an empty file. `None` for the
/// text formats and HTML: they print nothing on stdout, and the error goes to stderr as always.
pub fn failure_document(format: Format, message: &str, exit_code: u8) -> Option<String> {
    match format {
        Format::Json => Some(json::failure(message, exit_code)),
        Format::Junit => Some(junit::failure(message, exit_code)),
        _ => None,
    }
}

/// A line of text as `format` writes it: its escaping, and nothing else. Every fact of the
/// [`answer::Answer`] appears in a channel format exactly as `escape(format, fact)` (with its
/// whitespace laid out as the format wraps it), which is what the agreement tests look for.
pub fn escape(format: Format, s: &str) -> String {
    match format {
        Format::Markdown => markdown::text(s),
        Format::Slack | Format::SlackBlocks => slack::plain(s),
        Format::Html => html::esc(s),
        Format::Text | Format::Table | Format::Json | Format::Junit => one_line(s),
    }
}

/// Render `report` in `format`. Never fails: every format can express every report.
pub fn render(report: &Report, format: Format, opts: &RenderOptions) -> String {
    match format.spec().renderer {
        Renderer::View(render) => render(&ReportView::new(report, opts), opts),
        Renderer::Report(render) => render(report, opts),
    }
}

// ---------------------------------------------------------------------------------------------
// Shared wording. Both text formats call these, so they agree on every fact they print.
// ---------------------------------------------------------------------------------------------

/// `2026-01-15 09:00:00 → 09:30:00 UTC (30m)`; the end carries its date only when it differs.
pub(crate) fn describe_range(r: &TimeRange) -> String {
    let start = r.start.format("%Y-%m-%d %H:%M:%S");
    let end = if r.start.date_naive() == r.end.date_naive() {
        r.end.format("%H:%M:%S").to_string()
    } else {
        r.end.format("%Y-%m-%d %H:%M:%S").to_string()
    };
    format!("{start} → {end} UTC ({})", describe_duration(r))
}

/// Whole-second length of a range in humantime form (`30m`, `1h 30m`).
pub(crate) fn describe_duration(r: &TimeRange) -> String {
    let secs = r.duration().as_secs();
    humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
}

/// An instant for the PromQL note: time of day when it falls on `day_of`, else the full date.
pub(crate) fn describe_instant(t: &DateTime<Utc>, day_of: &DateTime<Utc>) -> String {
    if t.date_naive() == day_of.date_naive() {
        t.format("%H:%M:%S UTC").to_string()
    } else {
        t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
    }
}

/// When each evidence query was evaluated, said once per finding.
pub(crate) fn query_timing(report: &Report) -> String {
    let day = &report.window.start;
    format!(
        "at {} (baseline: same query at {})",
        describe_instant(&report.window.end, day),
        describe_instant(&report.baseline.end, day)
    )
}

/// The source kind (`prometheus`), its URL without credentials, and the selector as `{...}` when set.
pub(crate) fn describe_source(report: &Report) -> (String, String, Option<String>) {
    let kind = match report.source.kind.trim() {
        "" => "source".to_string(),
        k => one_line(k),
    };
    let sel = one_line(&report.source.selector);
    let selector = if sel.is_empty() {
        None
    } else {
        Some(format!("{{{sel}}}"))
    };
    (kind, display_url(report.source.url.trim()), selector)
}

/// The URL without user name or password (and credential parameters masked). The source is meant
/// to have removed them already; doing it again here means a slip elsewhere cannot put a secret on
/// screen.
pub(crate) fn display_url(raw: &str) -> String {
    // On one line, without control characters: a recording's URL is a file's text.
    one_line(&crate::prom::strip_credentials(raw))
}

/// `v1 metric names`, `mixed v0 and v1 metric names`, ...
pub(crate) fn describe_generation(generation: &str) -> String {
    match generation.trim() {
        "v1" => "v1 metric names".to_string(),
        "v0" => "v0 metric names".to_string(),
        "mixed" => "mixed v0 and v1 metric names".to_string(),
        "" | "unknown" => "metric generation unknown".to_string(),
        other => format!("{other} metric names"),
    }
}

/// `5 replicas by instance · 5 pods · 1 namespace`: the fleet's size by its labels, or `None` when
/// the report does not know it (a lookup that did not answer, an older recording).
pub(crate) fn describe_fleet(m: &crate::report::MetricsInfo) -> Option<String> {
    if m.labels.is_empty() {
        return None;
    }
    let count = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = vec![match m.labels.get(&m.replica_label) {
        Some(0) => format!("replicas not told apart (no `{}` label)", m.replica_label),
        None => format!("replica count unknown (the `{}` count did not answer)", m.replica_label),
        Some(&n) => format!("{} by {}", count(n, "replica", "replicas"), m.replica_label),
    }];
    for (label, one, many) in [("pod", "pod", "pods"), ("instance", "instance", "instances"), ("namespace", "namespace", "namespaces")] {
        if label == m.replica_label {
            continue;
        }
        if let Some(&n) = m.labels.get(label).filter(|n| **n > 0) {
            parts.push(count(n, one, many));
        }
    }
    Some(parts.join(" · "))
}

/// How scopes are written. When every scope seen is one label (normally `model_name`), scopes are
/// written as that label's value alone, and the label is named once in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScopeStyle {
    pub group_label: Option<String>,
    /// Whether [`ScopeStyle::compact`] may shorten the grouping label's values: only when every
    /// shortened value is still unique in the report.
    pub shorten: bool,
}

impl ScopeStyle {
    pub fn for_report(report: &Report) -> Self {
        let mut seen: Vec<&Scope> = report
            .metrics
            .scopes
            .iter()
            .filter(|s| !s.is_empty())
            .collect();
        if seen.is_empty() {
            seen = report
                .findings
                .iter()
                .map(|f| &f.scope)
                .chain(report.healthy.iter().map(|c| &c.scope))
                .chain(report.not_evaluated.iter().map(|n| &n.scope))
                .filter(|s| !s.is_empty())
                .collect();
        }
        let mut labels = BTreeSet::new();
        for scope in &seen {
            if scope.len() != 1 {
                return ScopeStyle { group_label: None, shorten: false };
            }
            labels.extend(scope.keys().cloned());
        }
        let group_label = if labels.len() == 1 {
            labels.into_iter().next()
        } else {
            None
        };
        let shorten = group_label.as_deref().is_some_and(|label| {
            let values: BTreeSet<&str> = report
                .metrics
                .scopes
                .iter()
                .chain(report.findings.iter().map(|f| &f.scope))
                .chain(report.healthy.iter().map(|c| &c.scope))
                .chain(report.not_evaluated.iter().map(|n| &n.scope))
                .filter_map(|s| s.get(label).map(String::as_str))
                .collect();
            let shortened: BTreeSet<String> = values.iter().map(|v| short_name(v)).collect();
            shortened.len() == values.len()
        });
        ScopeStyle { group_label, shorten }
    }

    /// Like [`ScopeStyle::format`], with long model names shortened for narrow places (the table
    /// format's headings): `meta-llama/Llama-3.1-8B-Instruct` becomes `Llama-3.1-8B-Instruct`.
    /// The full names stay in the header's list of scopes and in every other format.
    pub fn compact(&self, scope: &Scope) -> String {
        let Some(label) = self.group_label.as_deref().filter(|_| self.shorten) else {
            return self.format(scope);
        };
        match scope.get(label) {
            Some(value) => {
                let mut short = scope.clone();
                short.insert(label.to_string(), short_name(value));
                self.format(&short)
            }
            None => self.format(scope),
        }
    }

    /// `llama-3`, `llama-3 (engine=1)`, `instance=10.0.0.7:8000`, or `all` for the empty scope.
    pub fn format(&self, scope: &Scope) -> String {
        if scope.is_empty() {
            return "all".to_string();
        }
        let pairs = |skip: Option<&str>| {
            scope
                .iter()
                .filter(|(k, _)| Some(k.as_str()) != skip)
                .map(|(k, v)| format!("{k}={}", one_line(v)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self
            .group_label
            .as_deref()
            .and_then(|l| scope.get(l).map(|v| (l, v)))
        {
            // Grouped by a label the series lack (`--group-by pod` on a fleet without pods): say so
            // rather than print nothing.
            Some((label, value)) if scope.len() == 1 && value.is_empty() => format!("(no {label} label)"),
            Some((_, value)) if scope.len() == 1 => one_line(value),
            Some((label, value)) => format!("{} ({})", one_line(value), pairs(Some(label))),
            None => pairs(None),
        }
    }

    /// The scopes seen, for the header: `model_name: a, b` or `a=1, b=2; a=3`.
    pub fn describe_seen(&self, scopes: &[Scope]) -> String {
        if scopes.is_empty() {
            return "no scopes seen".to_string();
        }
        let list: Vec<String> = scopes.iter().map(|s| self.format(s)).collect();
        match &self.group_label {
            Some(label) => format!("{label}: {}", list.join(", ")),
            None => list.join("; "),
        }
    }
}

/// One evidence item worded for people: title, numbers (bounds as `< x` / `≥ x`: a quantile
/// `histogram_quantile` put at the largest finite bound is at least that), change,
/// condition and confidence. The view adds the sparkline and the trend.
pub(crate) fn evidence_words(e: &Evidence) -> view::EvidenceView {
    use crate::report::Bound;
    let fmt = |v: Option<f64>, bound: Option<Bound>| match (v, bound) {
        (_, Some(Bound::Below(b))) => format!("< {}", units::format_value(b, &e.unit)),
        (_, Some(Bound::Above(b))) => format!("≥ {}", units::format_value(b, &e.unit)),
        (Some(x), None) => units::format_value(x, &e.unit),
        (None, None) => "no data".to_string(),
    };
    let confidence = e.low_confidence.then(|| match e.observations {
        Some(n) if n.is_finite() => format!("low confidence ({n:.0} obs)"),
        _ => "low confidence".to_string(),
    });
    let title = if e.title.trim().is_empty() {
        e.signal.clone()
    } else {
        e.title.clone()
    };
    // Values only known as bounds are never divided as if they were measurements.
    let change = match (e.same_bucket, e.value_bound, e.baseline_bound, e.value, e.baseline) {
        (true, _, _, _, _) => Some("same bucket".to_string()),
        (false, Some(Bound::Above(v)), None, _, Some(b)) if b > 0.0 => Some(format!("≥ {}x", units::sig(v / b))),
        (false, None, Some(Bound::Below(b)), Some(v), _) if b > 0.0 => Some(format!("> {}x", units::sig(v / b))),
        (false, Some(Bound::Below(v)), None, _, Some(b)) if b > 0.0 => Some(format!("< {}x", units::sig(v / b))),
        (false, None, Some(Bound::Above(b)), Some(v), _) if b > 0.0 => Some(format!("≤ {}x", units::sig(v / b))),
        (false, None, None, v, b) => units::format_ratio(v, b),
        _ => None,
    };
    view::EvidenceView {
        signal: one_line(&e.signal),
        title: one_line(&title),
        value: fmt(e.value, e.value_bound),
        baseline: fmt(e.baseline, e.baseline_bound),
        change,
        condition: one_line(&e.threshold),
        condition_own: own_condition(&one_line(&e.threshold)),
        condition_words: one_line(&e.threshold),
        held: e.passed,
        confidence,
        sparkline: None,
        trend: None,
        link: None,
    }
}

/// `1 critical, 1 warning`, most severe first.
pub(crate) fn severity_counts(findings: &[Finding]) -> String {
    [Severity::Critical, Severity::Warning, Severity::Info]
        .iter()
        .filter_map(|s| {
            let n = findings.iter().filter(|f| f.severity == *s).count();
            (n > 0).then(|| format!("{n} {s}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the run amounts to, which decides the headline and the closing sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Findings,
    /// No findings, and at least one rule/scope pair was evaluated.
    Clean,
    /// No findings because nothing could be evaluated: not a clean bill.
    NothingEvaluated,
    /// No finding of warning or worse in what could be judged, but core runbook rules could not be
    /// judged (latency histograms missing, say): not a clean bill either.
    Incomplete,
}

pub(crate) fn verdict(report: &Report) -> Verdict {
    if report.findings.is_empty() && report.healthy.is_empty() {
        Verdict::NothingEvaluated
    } else if report.incomplete() {
        Verdict::Incomplete
    } else if !report.findings.is_empty() {
        Verdict::Findings
    } else {
        Verdict::Clean
    }
}

/// `21 of 24 rules evaluated (2 through stand-in signals)`, or `None` when every rule was evaluated
/// (or the report predates the count).
pub(crate) fn coverage_phrase(report: &Report) -> Option<String> {
    let c = &report.coverage;
    if c.rules == 0 || (c.evaluated == c.rules && c.stood_in == 0) {
        return None;
    }
    let mut s = format!("{} of {} rules evaluated", c.evaluated, c.rules);
    if c.stood_in > 0 {
        s.push_str(&format!(" ({} through stand-in signals)", c.stood_in));
    }
    Some(s)
}

/// The sentence naming the core rules that could not be judged, or `None`.
pub(crate) fn core_sentence(report: &Report) -> Option<String> {
    let core = &report.coverage.core_not_evaluated;
    let unread = &report.coverage.unread_targets;
    if core.is_empty() && unread.is_empty() {
        return None;
    }
    let mut parts = Vec::new();
    if !core.is_empty() {
        let ids: Vec<String> = core.iter().map(|r| one_line(r)).collect();
        let why: BTreeSet<String> = report
            .not_evaluated
            .iter()
            .filter(|n| core.contains(&n.rule))
            .map(|n| one_line(&n.reason))
            .collect();
        let mut s = format!("Core runbook checks not evaluated: {}", ids.join(", "));
        if let Some(first) = why.iter().next() {
            s.push_str(&format!(" ({first}{})", if why.len() > 1 { "; and more, listed below" } else { "" }));
        }
        parts.push(s);
    }
    if !unread.is_empty() {
        let list: Vec<String> = unread.iter().map(|t| one_line(t)).collect();
        parts.push(format!("Scrape targets that answered nothing, so nothing they serve is in this diagnosis: {}", list.join("; ")));
    }
    Some(format!("{}. What could not be seen is not known to be healthy.", parts.join(". ")))
}

/// The lower-confidence note of a finding decided through stand-in signals, or `None`.
pub(crate) fn stood_in_line(f: &Finding) -> Option<String> {
    let s = f.stood_in.as_ref()?;
    Some(format!(
        "Lower confidence: decided without {} (their metrics are missing from the data); {} stood in",
        s.missing.iter().map(|m| one_line(m)).collect::<Vec<_>>().join(", "),
        s.signals.iter().map(|m| one_line(m)).collect::<Vec<_>>().join(", ")
    ))
}

/// The note of a finding decided over the window's last minutes only, or `None`: which readings
/// were taken there, from when to when, against what.
pub(crate) fn recent_line(report: &Report, f: &Finding) -> Option<String> {
    let r = f.recent.as_ref()?;
    let start = report.window.end - chrono::Duration::seconds(r.range_seconds as i64);
    let span = TimeRange { start, end: report.window.end };
    let day = &report.window.start;
    let last = if r.range_seconds % 60 == 0 { format!("{} min", r.range_seconds / 60) } else { describe_duration(&span) };
    Some(format!(
        "Held over the window's last {last} ({} → {}) but not over the whole window: the rows marked \"last {last}\" were read there, each against its baseline over the whole baseline window (its query with the window's range, [{}], at {})",
        describe_instant(&start, day),
        describe_instant(&report.window.end, day),
        crate::signals::promql_duration(report.window.duration()),
        describe_instant(&report.baseline.end, day),
    ))
}

/// One change no rule explains: `P95 time to first token up 2.4x (robust z 31) on llama since
/// 09:12:00 UTC (18 min, ongoing): 1.9 s vs 800 ms`.
pub(crate) fn unexplained_line(report: &Report, u: &crate::report::Unexplained, scopes: &ScopeStyle) -> String {
    // A fall reads as the share left (0.05x), a rise with one decimal; a z past 100 only as that.
    let factor = |r: f64| if r < 1.0 { format!("{r:.2}x") } else { format!("{r:.1}x") };
    let size = match (u.ratio, u.robust_z) {
        (Some(r), Some(z)) if z > 100.0 => format!("{} (robust z > 100)", factor(r)),
        (Some(r), Some(z)) => format!("{} (robust z {z:.0})", factor(r)),
        (Some(r), None) => format!("{} (its baseline did not vary)", factor(r)),
        (None, _) => "from 0".to_string(),
    };
    let scope = scopes.compact(&u.scope);
    let on = if scope.is_empty() || scope == scopes.format(&Scope::new()) { String::new() } else { format!(" on {scope}") };
    let since = if u.from_start {
        format!("already at the window's start ({})", describe_instant(&report.window.start, &report.window.start))
    } else {
        format!("since {}", describe_instant(&u.onset, &report.window.start))
    };
    let minutes = (u.duration_seconds as f64 / 60.0).round() as u64;
    let lasting = if u.ongoing { format!("{minutes} min, ongoing") } else { format!("{minutes} min, then back") };
    let value = |v: Option<f64>| v.map_or_else(|| "?".to_string(), |v| crate::units::format_value(v, &u.unit));
    format!(
        "{} {} {size}{on} {since} ({lasting}): {} vs {}{}",
        one_line(&u.title),
        u.direction,
        value(u.value),
        value(u.baseline),
        if u.spare { " (read for this list only: no rule reads it)" } else { "" }
    )
}

/// The same change in brief, for the answer: `P95 time to first token up 2.4x on llama since
/// 09:12 UTC: 1.9 s vs 800 ms` (its size against the baseline's spread and how long it lasted: -v).
pub(crate) fn unexplained_brief(report: &Report, u: &crate::report::Unexplained, scopes: &ScopeStyle) -> String {
    let factor = match u.ratio {
        Some(r) if r < 1.0 => format!(" {r:.2}x"),
        Some(r) => format!(" {r:.1}x"),
        None => " from 0".to_string(),
    };
    let scope = scopes.compact(&u.scope);
    let on = if scope.is_empty() || scope == scopes.format(&Scope::new()) { String::new() } else { format!(" on {scope}") };
    let at = if u.from_start { report.window.start } else { u.onset };
    let value = |v: Option<f64>| v.map_or_else(|| "?".to_string(), |v| crate::units::format_value(v, &u.unit));
    format!("{} {}{factor}{on} since {}: {} vs {}", one_line(&u.title), u.direction, at.format("%H:%M UTC"), value(u.value), value(u.baseline))
}

/// First line of every text format: `2 findings (1 critical, 1 warning) · 2 not evaluated`.
pub(crate) fn headline(report: &Report) -> String {
    let main = match verdict(report) {
        Verdict::Findings => format!(
            "{} ({})",
            plural(report.findings.len(), "finding", "findings"),
            severity_counts(&report.findings)
        ),
        Verdict::Clean if !report.unexplained.is_empty() => format!(
            "no rule fired, but {} no rule explains",
            plural(report.unexplained.len(), "signal moved that", "signals moved that")
        ),
        Verdict::Clean => "no problems found".to_string(),
        Verdict::NothingEvaluated => "nothing evaluated".to_string(),
        Verdict::Incomplete if report.findings.is_empty() => format!("not an all-clear: {}", gap_phrase(report)),
        Verdict::Incomplete => format!(
            "{} ({}), {}",
            plural(report.findings.len(), "finding", "findings"),
            severity_counts(&report.findings),
            gap_phrase(report)
        ),
    };
    match (report.not_evaluated.len(), verdict(report), coverage_phrase(report)) {
        (0, Verdict::NothingEvaluated, _) => main,
        (n, Verdict::NothingEvaluated, _) => {
            format!(
                "{main} ({} could not be checked)",
                plural(n, "rule/scope pair", "rule/scope pairs")
            )
        }
        (_, _, Some(c)) => format!("{main} · {c}"),
        (0, _, None) => main,
        (n, _, None) => format!("{main} · {n} not evaluated"),
    }
}

/// What kept the run from passing, for the headline: `core checks not evaluated`, `a scrape target
/// answered nothing`, or both.
pub(crate) fn gap_phrase(report: &Report) -> String {
    let mut parts = Vec::new();
    if report.core_missing() {
        parts.push("core checks not evaluated".to_string());
    }
    match report.coverage.unread_targets.len() {
        0 => {}
        1 => parts.push("a scrape target answered nothing".to_string()),
        n => parts.push(format!("{n} scrape targets answered nothing")),
    }
    parts.join(", ")
}

/// The sentence printed instead of findings when there are none.
pub(crate) fn no_findings_sentence(report: &Report) -> Option<String> {
    let skipped = report.not_evaluated.len();
    match verdict(report) {
        Verdict::Findings => core_sentence(report),
        Verdict::Incomplete if !report.findings.is_empty() => core_sentence(report),
        Verdict::Incomplete => Some(format!(
            "No warning or critical finding in what could be checked ({}), but this is not an all-clear. {}",
            plural(report.healthy.len(), "rule/scope pair", "rule/scope pairs"),
            core_sentence(report).unwrap_or_default()
        )),
        Verdict::Clean => {
            let mut s = format!(
                "No problems found in the window: {} checked",
                plural(report.healthy.len(), "rule/scope pair", "rule/scope pairs")
            );
            if skipped > 0 {
                s.push_str(&format!(
                    ", {skipped} not evaluated (listed below, so this is a partial all-clear)"
                ));
            } else {
                s.push_str(", 0 not evaluated");
            }
            s.push('.');
            if !report.unexplained.is_empty() {
                s = format!(
                    "No rule fired ({} checked), but this is not an all-clear: {} that no rule explains, listed under \"Also changed\".",
                    plural(report.healthy.len(), "rule/scope pair", "rule/scope pairs"),
                    plural(report.unexplained.len(), "signal moved", "signals moved")
                );
            }
            Some(s)
        }
        Verdict::NothingEvaluated => {
            let mut s =
                "Nothing was evaluated: no rule could be checked against this window, so this is \
                         not an all-clear."
                    .to_string();
            // With failures the list below explains itself; without, the likely cause is the selector.
            if skipped == 0 && report.metrics.scopes.is_empty() {
                s.push_str(
                    " No vLLM series were seen in the window; check the selector and that the \
                     data source scrapes vLLM.",
                );
            }
            Some(s)
        }
    }
}

/// The one line naming the rules the configuration file switched off, if any.
pub(crate) fn disabled_line(report: &Report) -> Option<String> {
    (!report.disabled.is_empty()).then(|| {
        let ids: Vec<String> = report.disabled.iter().map(|r| one_line(r)).collect();
        format!("Disabled in the configuration (not evaluated): {}", ids.join(", "))
    })
}

/// `5 rule/scope pairs (rule-a, rule-b)`, or `None` when there is nothing healthy to mention.
pub(crate) fn healthy_summary(report: &Report) -> Option<(String, Vec<String>)> {
    if report.healthy.is_empty() {
        return None;
    }
    let rules: BTreeSet<String> = report.healthy.iter().map(|c| one_line(&c.rule)).collect();
    Some((
        plural(report.healthy.len(), "rule/scope pair", "rule/scope pairs"),
        rules.into_iter().collect(),
    ))
}

/// Not-evaluated entries in a stable order, each with its scope already worded.
pub(crate) fn not_evaluated_lines(
    report: &Report,
    scopes: &ScopeStyle,
) -> Vec<(String, String, String)> {
    let mut items: Vec<&NotEvaluated> = report.not_evaluated.iter().collect();
    items.sort();
    items
        .into_iter()
        .map(|n| {
            (
                one_line(&n.rule),
                scopes.format(&n.scope),
                one_line(&n.reason),
            )
        })
        .collect()
}

/// Heading over the not-evaluated list, the same in every format.
pub(crate) fn not_evaluated_heading(count: usize) -> String {
    format!(
        "Not evaluated ({}; not covered by this diagnosis):",
        plural(count, "rule/scope pair", "rule/scope pairs")
    )
}

/// Warnings in first-seen order, exact repeats folded into one line with a count.
pub(crate) fn warning_lines(report: &Report) -> Vec<String> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for w in &report.warnings {
        let w = one_line(w);
        match out.iter_mut().find(|(seen, _)| *seen == w) {
            Some((_, n)) => *n += 1,
            None => out.push((w, 1)),
        }
    }
    out.into_iter()
        .map(|(w, n)| if n > 1 { format!("{w} ({n} times)") } else { w })
        .collect()
}

/// The PromQL behind a finding's evidence, as (signal, query) pairs, one line each.
pub(crate) fn finding_queries(f: &Finding) -> Vec<(String, String)> {
    f.evidence
        .iter()
        .filter(|e| !e.query.trim().is_empty())
        .map(|e| (one_line(&e.signal), one_line(&e.query)))
        .collect()
}

/// `3 of 8 replicas (instance): a, b, c`, when the finding was broken down per replica.
pub(crate) fn replicas_line(f: &Finding) -> Option<String> {
    let r = f.replicas.as_ref()?;
    if let Some(why) = &r.not_evaluated {
        return Some(format!("not evaluated ({})", one_line(why)));
    }
    if r.total == 0 {
        return None;
    }
    let names = if r.affected.is_empty() {
        "none on its own".to_string()
    } else if r.affected.len() <= 6 {
        r.affected.iter().map(|a| one_line(a)).collect::<Vec<_>>().join(", ")
    } else {
        format!("{}, and {} more", r.affected[..5].iter().map(|a| one_line(a)).collect::<Vec<_>>().join(", "), r.affected.len() - 5)
    };
    let limit = if r.limit.is_empty() { String::new() } else { format!(" ({} {})", one_line(&r.signal), one_line(&r.limit)) };
    Some(format!("{} of {} replicas{limit}: {names}", r.affected.len(), r.total))
}

/// `Suggested max_num_seqs = 18`, then how it was computed and its caveat.
pub(crate) fn recommendation_lines(f: &Finding) -> Vec<(String, String)> {
    f.recommendations
        .iter()
        .map(|r| {
            (
                format!("Suggested {} = {}", one_line(&r.setting), one_line(&r.value)),
                format!("{} ({})", one_line(&r.arithmetic), one_line(&r.caveat)),
            )
        })
        .collect()
}

/// The experiment card of a recommendation, whole and brief: `--max-num-seqs: unknown → 15 ·
/// trade-off: ... · confidence high: preempting in ...` and `--max-num-seqs: unknown → 15 ·
/// confidence high`. `None` for a recommendation without a flag (a report from before cards).
pub(crate) fn card_lines(r: &crate::report::Recommendation) -> Option<(String, String)> {
    if r.flag.trim().is_empty() {
        return None;
    }
    let (from, to) = (one_line(&r.from), one_line(&r.to));
    // `1578 blocks → 3083 blocks (1.95x)` reads `1578 → 3083 blocks (1.95x)`: the unit once.
    let from = match from.rsplit_once(' ') {
        Some((n, unit)) if to.split(' ').nth(1) == Some(unit) && n.parse::<f64>().is_ok() => n.to_string(),
        _ => from,
    };
    let change = format!("{}: {from} → {to}", one_line(&r.flag));
    let level = r.confidence.level.as_str();
    let whole = format!("{change} · trade-off: {} · confidence {level}: {}", one_line(&r.tradeoff), one_line(&r.confidence.basis));
    Some((whole, format!("{change} · confidence {level}")))
}

/// `Won't help: more KV memory (--gpu-memory-utilization): KV-cache usage peaked at 42%, never past 60%`.
pub(crate) fn wont_help_lines(f: &Finding) -> Vec<String> {
    f.wont_help.iter().map(|w| format!("Won't help: {} ({}): {}", one_line(&w.lever), one_line(&w.flag), one_line(&w.why))).collect()
}

// ---------------------------------------------------------------------------------------------
// Human touches: relative times, short names, sparklines, the check verdict.
// ---------------------------------------------------------------------------------------------

/// `12 min ago`, `3 h 5 min ago`, `2 days ago`; `just now` under a minute (or for a time a little
/// in the future, which is clock skew).
pub(crate) fn ago(t: &DateTime<Utc>, now: &DateTime<Utc>) -> String {
    let secs = (*now - *t).num_seconds();
    if secs < 60 {
        return "just now".to_string();
    }
    let mins = secs / 60;
    if mins < 60 {
        return format!("{mins} min ago");
    }
    let (h, m) = (mins / 60, mins % 60);
    if h < 48 {
        return if m == 0 { format!("{h} h ago") } else { format!("{h} h {m} min ago") };
    }
    format!("{} days ago", h / 24)
}

/// [`describe_range`] with, on a live run, how long ago the range ended:
/// `2026-01-15 09:00:00 → 09:30:00 UTC (30m, ended 12 min ago)`.
pub(crate) fn describe_range_at(r: &TimeRange, now: Option<&DateTime<Utc>>) -> String {
    let plain = describe_range(r);
    match now {
        Some(now) => match plain.strip_suffix(')') {
            Some(head) => format!("{head}, ended {})", ago(&r.end, now)),
            None => plain,
        },
        None => plain,
    }
}

/// An instant in UTC with, on a live run, a relative hint: `2026-01-15 08:50:00 UTC (30 min ago)`.
pub(crate) fn describe_time_at(t: &DateTime<Utc>, now: Option<&DateTime<Utc>>) -> String {
    let abs = t.format("%Y-%m-%d %H:%M:%S UTC").to_string();
    match now {
        Some(now) => format!("{abs} ({})", ago(t, now)),
        None => abs,
    }
}

/// A model name short enough for a heading: the organisation or directory part is dropped
/// (`meta-llama/Llama-3.1-8B-Instruct` -> `Llama-3.1-8B-Instruct`), and what is still longer
/// than 32 characters loses its middle (`averyveryverylong…name-suffix`). The ends are kept
/// because that is where model names differ: the family first, the size and variant last.
pub(crate) fn short_name(name: &str) -> String {
    const MAX: usize = 32;
    let name = one_line(name);
    let base = match name.trim_end_matches('/').rsplit_once('/') {
        Some((_, last)) if !last.is_empty() => last.to_string(),
        _ => name.clone(),
    };
    let chars: Vec<char> = base.chars().collect();
    if chars.len() <= MAX {
        return base;
    }
    let head: String = chars[..15].iter().collect();
    let tail: String = chars[chars.len() - 16..].iter().collect();
    format!("{head}…{tail}")
}

/// The evidence's sparkline over baseline and window, when it carries a trend.
pub(crate) fn evidence_sparkline(report: &Report, e: &Evidence) -> Option<String> {
    let t = e.series.as_ref()?;
    sparkline::trend(t, &report.baseline, &report.window, sparkline::CELLS)
}

/// The first line `vllm-diag check` prints: `FAIL: ...`, `PASS: ...` or `NOT EVALUATED: ...`.
/// It says the same as the exit code (1, 0, 3), in words, with the deploy time it measured from
/// (the window's start) and the findings that decided it.
pub fn check_verdict(report: &Report, opts: &RenderOptions) -> String {
    let scopes = ScopeStyle::for_report(report);
    let since = format!(
        "since the deploy at {}",
        describe_time_at(&report.window.start, opts.now.as_ref())
    );
    let failing: Vec<&Finding> = match opts.fail_on {
        Some(bar) => report.findings.iter().filter(|f| f.severity >= bar).collect(),
        None => Vec::new(),
    };
    if !failing.is_empty() {
        let count = if failing.len() == 1 {
            format!("1 {} finding", failing[0].severity)
        } else {
            format!("{} findings ({})", failing.len(), severity_counts(&failing.iter().map(|f| (*f).clone()).collect::<Vec<_>>()))
        };
        const NAMED: usize = 3;
        let mut named: Vec<String> = failing
            .iter()
            .take(NAMED)
            .map(|f| format!("{} on {}", one_line(&f.rule), scopes.format(&f.scope)))
            .collect();
        if failing.len() > NAMED {
            named.push(format!("and {} more", failing.len() - NAMED));
        }
        return format!("FAIL: {count} {since} ({})", named.join(", "));
    }
    if opts.fail_on_unexplained && !report.unexplained.is_empty() {
        const NAMED: usize = 3;
        let mut named: Vec<String> = report
            .unexplained
            .iter()
            .take(NAMED)
            .map(|u| format!("{} {} on {}", u.title, u.direction, scopes.format(&u.scope)))
            .collect();
        if report.unexplained.len() > NAMED {
            named.push(format!("and {} more", report.unexplained.len() - NAMED));
        }
        return format!(
            "FAIL: {} that no rule explains {since} ({}; --fail-on {})",
            plural(report.unexplained.len(), "signal moved", "signals moved"),
            named.join(", "),
            crate::report::fail_on_name(opts.fail_on, true)
        );
    }
    if report.core_missing() && report.stats.rules_evaluated > 0 {
        let core: Vec<String> = report.coverage.core_not_evaluated.iter().map(|r| one_line(r)).collect();
        let rest = if report.findings.is_empty() {
            "nothing was found in the rest".to_string()
        } else {
            format!("the rest found {} ({}), none failing", plural(report.findings.len(), "finding", "findings"), severity_counts(&report.findings))
        };
        return format!(
            "NOT EVALUATED: the core checks {} could not be evaluated in the {} {since}; {rest} ({}), but this is not a pass",
            core.join(", "),
            describe_duration(&report.window),
            coverage_phrase(report).unwrap_or_else(|| format!("{} evaluated", plural(report.stats.rules_evaluated, "rule/scope pair", "rule/scope pairs")))
        );
    }
    if report.findings.is_empty() && report.stats.rules_evaluated == 0 {
        let n = report.not_evaluated.len();
        let why = if n == 0 {
            String::new()
        } else {
            format!(" ({} could not be checked)", plural(n, "rule/scope pair", "rule/scope pairs"))
        };
        return format!("NOT EVALUATED: no rule could be checked against the {} {since}{why}; this is not a pass", describe_duration(&report.window));
    }
    let bar = match opts.fail_on {
        Some(bar) => format!("no {bar} or worse finding"),
        None => "nothing fails with --fail-on never".to_string(),
    };
    let mut notes: Vec<String> = Vec::new();
    // Changes no rule explains fail the run only with --fail-on unexplained (or info); the verdict
    // says them first either way.
    if !report.unexplained.is_empty() {
        notes.push(format!("but {} that no rule explains", plural(report.unexplained.len(), "signal moved", "signals moved")));
    }
    if !report.findings.is_empty() {
        let below = if opts.fail_on.is_some() { " below the bar" } else { "" };
        notes.push(format!(
            "{} ({}){below}",
            plural(report.findings.len(), "finding", "findings"),
            severity_counts(&report.findings)
        ));
    }
    notes.push(format!("{} evaluated", plural(report.stats.rules_evaluated, "rule/scope pair", "rule/scope pairs")));
    if !report.not_evaluated.is_empty() {
        notes.push(format!("{} not evaluated", report.not_evaluated.len()));
    }
    format!(
        "PASS: {bar} in the {} {since}; {}",
        describe_duration(&report.window),
        notes.join(", ")
    )
}

pub(crate) fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {many}")
    }
}

// ---------------------------------------------------------------------------------------------
// Conditions in words. A rule's condition, as it bears on one signal, names the other signals it
// is combined with as `(see a, b)` (the JSON keeps that form); the terminal formats spell them out
// from the finding's own evidence.
// ---------------------------------------------------------------------------------------------

/// One `(see a, b)` in a condition: its byte span (with the ` or ` / ` and ` before it), the word
/// joining it to the rest, and the signals it names.
struct SeeGroup {
    start: usize,
    end: usize,
    sep: &'static str,
    ids: Vec<String>,
}

fn see_groups(cond: &str) -> Vec<SeeGroup> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = cond[from..].find("(see ").map(|i| from + i) {
        let Some(close) = cond[i..].find(')').map(|j| i + j + 1) else { break };
        let ids = cond[i + "(see ".len()..close - 1].split(", ").map(str::to_string).collect();
        let (start, sep) = if cond[..i].ends_with(" or ") {
            (i - " or ".len(), " or ")
        } else if cond[..i].ends_with(" and ") {
            (i - " and ".len(), " and ")
        } else {
            (i, "")
        };
        out.push(SeeGroup { start, end: close, sep, ids });
        from = close;
    }
    out
}

/// `(x)` around a part left alone once the `(see ...)` beside it is gone becomes `x`.
fn unwrap_lone_parens(s: &str) -> String {
    let mut s = s.to_string();
    loop {
        let bytes: Vec<(usize, char)> = s.char_indices().collect();
        let mut found = None;
        let mut stack: Vec<usize> = Vec::new();
        for &(i, c) in &bytes {
            match c {
                '(' => stack.push(i),
                ')' => {
                    if let Some(open) = stack.pop() {
                        let inner = &s[open + 1..i];
                        let whole = open == 0 && i == s.len() - 1;
                        let lone = !inner.contains(" or ") && !inner.contains(" and ") && !inner.contains('(');
                        if (lone || whole && !inner.contains('(')) && !s[..open].ends_with("not ") {
                            found = Some((open, i));
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        match found {
            Some((open, close)) => s = format!("{}{}{}", &s[..open], &s[open + 1..close], &s[close + 1..]),
            None => return s,
        }
    }
}

/// A signal's condition without the other signals it is combined with: `>= 50% or (see
/// preemption_recent)` -> `>= 50%`. The conditions of several lines of a rule (`a; b`), which
/// must all hold, are joined by `and`: `(>= 1.5x baseline or > 100 ms) and > 100 ms`.
pub(crate) fn own_condition(cond: &str) -> String {
    let parts: Vec<String> = cond
        .split("; ")
        .map(|part| {
            let mut s = part.to_string();
            for g in see_groups(part).iter().rev() {
                s.replace_range(g.start..g.end, "");
            }
            unwrap_lone_parens(s.trim())
        })
        .filter(|p| !p.is_empty())
        .collect();
    let compound = |p: &String| p.contains(" or ") || p.contains(" and ");
    match parts.as_slice() {
        [one] => one.clone(),
        _ => parts.iter().map(|p| if compound(p) { format!("({p})") } else { p.clone() }).collect::<Vec<_>>().join(" and "),
    }
}

/// The signals a condition holds as alternatives (`... or (see a, b)`): when one of them is shown
/// as deciding a finding, the others say nothing more.
pub(crate) fn alternatives(cond: &str) -> Vec<String> {
    see_groups(cond).into_iter().filter(|g| g.sep == " or ").flat_map(|g| g.ids).collect()
}

/// `Share of the last 5 min` -> `share of the last 5 min`; `P95 queue time` and `KV-cache usage`
/// keep their capitals.
fn lowercase_first(title: &str) -> String {
    let mut chars = title.chars();
    match (chars.next(), chars.next()) {
        (Some(a), Some(b)) if a.is_uppercase() && b.is_lowercase() => a.to_lowercase().chain(title.chars().skip(1)).collect(),
        _ => title.to_string(),
    }
}

/// A condition with each `(see a, b)` written out from the finding's evidence (`signal`, `title`,
/// `condition`): `>= 50% or share of the last 5 min with preemptions >= 50%`. Signals joined by
/// the same word on every side (`a or b or c`) are spelt out with their own conditions; a group
/// whose inner shape the text does not show (`a and (b or c)` seen from `b`) is named, not
/// guessed: `or a condition on running requests and generation throughput`.
pub(crate) fn condition_in_words(cond: &str, signal: &str, evidence: &[(String, String, String)]) -> String {
    let find = |id: &str| evidence.iter().find(|(s, _, _)| s == id);
    let title = |id: &str| find(id).map_or_else(|| id.to_string(), |(_, t, _)| lowercase_first(t));
    cond.split("; ")
        .map(|part| {
            let mut s = part.to_string();
            for g in see_groups(part).iter().rev() {
                // Spelt out only when every other signal of the group sees this one and the rest of
                // the group, by the same word: a flat `a or b or c`.
                let flat = g.ids.iter().all(|id| {
                    find(id).is_some_and(|(_, _, c)| {
                        !c.contains("; ")
                            && see_groups(c).iter().any(|h| {
                                let mut want: Vec<&str> = g.ids.iter().filter(|x| *x != id).map(String::as_str).chain([signal]).collect();
                                let mut got: Vec<&str> = h.ids.iter().map(String::as_str).collect();
                                want.sort_unstable();
                                got.sort_unstable();
                                h.sep == g.sep && want == got
                            })
                    })
                });
                let words = if flat && !g.sep.is_empty() {
                    g.ids
                        .iter()
                        .map(|id| {
                            let own = find(id).map(|(_, _, c)| own_condition(c)).unwrap_or_default();
                            if own.contains(" or ") || own.contains(" and ") {
                                format!("({} {own})", title(id))
                            } else {
                                format!("{} {own}", title(id))
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(g.sep)
                } else {
                    let names: Vec<String> = g.ids.iter().map(|id| title(id)).collect();
                    let list = match names.split_last() {
                        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
                        _ => names.join(""),
                    };
                    format!("a condition on {list}")
                };
                s.replace_range(g.start..g.end, &format!("{}{words}", g.sep));
            }
            s
        })
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) use crate::text::{is_bidi_control, one_line};

#[cfg(test)]
mod control_tests {
    #[test]
    fn control_characters_from_outside_never_reach_the_terminal() {
        let hostile = "llama\u{1b}[31mRED\u{7}\u{9b}2J";
        let out = super::one_line(hostile);
        assert!(!out.chars().any(|c| c.is_control()), "{out:?}");
        assert!(out.starts_with("llama"));
        // A recording's URL is a file's text: shown without its escapes or credentials.
        let url = super::display_url("http://u:pw@evil\u{1b}]8;;x\u{7}click/\u{1b}[2J");
        assert!(!url.chars().any(|c| c.is_control()) && !url.contains("pw"), "{url:?}");
        // A right-to-left override (U+202E) would show the text after it reversed.
        assert_eq!(super::one_line("Aaa-model\u{202e} Qwen/Qwen2.5\u{2066}"), "Aaa-model\u{FFFD} Qwen/Qwen2.5\u{FFFD}");
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Hand-built reports shared by every renderer's snapshot tests.

    use std::collections::BTreeMap;

    use chrono::{TimeZone, Utc};

    use crate::report::*;

    fn t(h: u32, m: u32) -> chrono::DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 15, h, m, 0)
            .single()
            .expect("valid fixed timestamp")
    }

    /// `r` with `n` changes no rule explains on Qwen (the first a TTFT rise).
    pub(crate) fn with_unexplained(mut r: Report, n: usize) -> Report {
        let start = r.window.start;
        r.unexplained = (0..n)
            .map(|i| Unexplained {
                signal: if i == 0 { "ttft_p95".into() } else { format!("signal_{i}") },
                title: if i == 0 { "P95 time to first token".into() } else { format!("Signal {i}") },
                unit: "seconds".into(),
                scope: model(QWEN),
                direction: "up".into(),
                value: Some(1.9),
                baseline: Some(0.8),
                ratio: Some(2.375),
                robust_z: Some(31.0),
                onset: start + chrono::Duration::minutes(12),
                from_start: false,
                duration_seconds: 1080,
                ongoing: true,
                query: "histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket[3m])))".into(),
                metric: "vllm:time_to_first_token_seconds_bucket".into(),
                spare: false,
                series: Trend { step_seconds: 60, range_seconds: 180, query: String::new(), baseline: vec![], window: vec![] },
            })
            .collect();
        r
    }

    pub(crate) fn model(name: &str) -> Scope {
        BTreeMap::from([("model_name".to_string(), name.to_string())])
    }

    const LLAMA: &str = "llama-3.1-70b-instruct";
    pub(crate) const QWEN: &str = "qwen2.5-coder-32b";

    fn base(
        findings: Vec<Finding>,
        healthy: Vec<Checked>,
        not_evaluated: Vec<NotEvaluated>,
    ) -> Report {
        Report {
            schema_version: SCHEMA_VERSION,
            window: TimeRange {
                start: t(9, 0),
                end: t(9, 30),
            },
            baseline: TimeRange {
                start: t(8, 30),
                end: t(9, 0),
            },
            source: SourceInfo {
                kind: "prometheus".to_string(),
                url: "http://prometheus.monitoring:9090".to_string(),
                selector: r#"namespace="inference-prod""#.to_string(),
            },
            metrics: MetricsInfo {
                generation: "v1".to_string(),
                scopes: vec![model(LLAMA), model(QWEN)],
                names_used: BTreeMap::from([
                    (
                        "kv_cache_usage".to_string(),
                        "vllm:kv_cache_usage_perc".to_string(),
                    ),
                    (
                        "ttft_p95".to_string(),
                        "vllm:time_to_first_token_seconds".to_string(),
                    ),
                ]),
                labels: BTreeMap::from([
                    ("instance".to_string(), 5),
                    ("model_name".to_string(), 2),
                    ("namespace".to_string(), 1),
                    ("pod".to_string(), 5),
                ]),
                replica_label: "instance".to_string(),
            },
            findings,
            healthy,
            not_evaluated,
            disabled: vec![],
            warnings: vec![],
            caveats: vec![],
            stats: RunStats {
                queries: 38,
                rules_evaluated: 12,
            },
            coverage: crate::report::Coverage { rules: 8, evaluated: 6, stood_in: 0, core_not_evaluated: vec![], unread_targets: vec![] },
            events: vec![],
            deploy: None,
            binding: Vec::new(),
            unexplained: Vec::new(),
            hops: Vec::new(),
            profile: Some("chat".to_string()),
            notes: Vec::new(),
            readings: Vec::new(),
        }
    }

    /// Two findings on different models, one with also-consistent rules and a low-confidence
    /// quantile; healthy pairs, not-evaluated pairs and a data-source warning.
    pub(crate) fn sample_report() -> Report {
        let kv = Finding {
            rule: "kv-cache-exhausted".to_string(),
            title: "KV cache exhausted: requests are being preempted".to_string(),
            severity: Severity::Critical,
            score: 3.7,
            scope: model(LLAMA),
            summary: "The KV cache stayed nearly full and the scheduler evicted running requests to make \
                      room, so requests are recomputed and latency climbs."
                .to_string(),
            evidence: vec![
                Evidence {
                    signal: "kv_cache_usage".to_string(),
                    title: "KV cache usage (max)".to_string(),
                    unit: "ratio".to_string(),
                    value: Some(0.991),
                    baseline: Some(0.62),
                    threshold: "> 95%".to_string(),
                    passed: true,
                    query: r#"max by (model_name) (max_over_time(vllm:kv_cache_usage_perc{namespace="inference-prod"}[30m]))"#
                        .to_string(),
                    metric: "vllm:kv_cache_usage_perc".to_string(),
                    low_confidence: false,
                    observations: None,
                    limits: vec![],
                    series: None,
                    value_bound: None,
                    baseline_bound: None,
                    same_bucket: false,
                },
                Evidence {
                    signal: "preemption_rate".to_string(),
                    title: "Preemptions".to_string(),
                    unit: "per_second".to_string(),
                    value: Some(4.2),
                    baseline: Some(0.0),
                    threshold: "> 0.1/s".to_string(),
                    passed: true,
                    query: r#"sum by (model_name) (rate(vllm:num_preemptions_total{namespace="inference-prod"}[30m]))"#
                        .to_string(),
                    metric: "vllm:num_preemptions_total".to_string(),
                    low_confidence: false,
                    observations: None,
                    limits: vec![],
                    series: None,
                    value_bound: None,
                    baseline_bound: None,
                    same_bucket: false,
                },
            ],
            steps: vec![
                "Lower --max-num-seqs or --max-num-batched-tokens so fewer requests share the cache."
                    .to_string(),
                "Raise --gpu-memory-utilization (e.g. 0.90 -> 0.95) if the GPU has headroom.".to_string(),
                "Add replicas or move long-context traffic to a separate deployment.".to_string(),
            ],
            references: vec!["https://docs.vllm.ai/en/latest/configuration/optimization.html".to_string()],
            recommendations: vec![Recommendation {
                setting: "max_num_seqs".to_string(),
                value: "37".to_string(),
                arithmetic: "40 running sequences per replica used 96% of the KV cache on average: 40 x 90% headroom / 96% = 37 sequences per replica".to_string(),
                caveat: "a starting point for a load test".to_string(),
                flag: "--max-num-seqs".to_string(),
                from: "unknown".to_string(),
                to: "37".to_string(),
                tradeoff: "fewer sequences at once: no preemptions, but each replica admits less".to_string(),
                confidence: crate::report::Confidence {
                    level: crate::report::ConfidenceLevel::High,
                    basis: "share of time preempting: 90% over the window and 100% over its last 5 min".to_string(),
                },
            }],
            wont_help: vec![],
            replicas: Some(Replicas {
                label: "instance".to_string(),
                affected: vec!["10.0.0.1:8000".to_string(), "10.0.0.2:8000".to_string()],
                total: 3,
                signal: "kv_usage_max".to_string(),
                limit: ">= 90%".to_string(),
                not_evaluated: None,
            }),
            stood_in: None,
            recent: None,
            onset: Some(Utc.with_ymd_and_hms(2026, 1, 15, 9, 3, 0).unwrap()),
            onset_signal: Some("kv_cache_usage".to_string()),
            ended: None,
            preceded_by: None,
            cold_start: None,
            replica_cause: None,
            gpu_reasons: Vec::new(),
            correlations: Vec::new(),
            also_consistent: vec![
                AlsoConsistent {
                    rule: "queue-backlog".to_string(),
                    title: "Requests are waiting in the queue".to_string(),
                    severity: Severity::Warning,
                    score: 1.9,
                },
                AlsoConsistent {
                    rule: "ttft-regression".to_string(),
                    title: "Time to first token regressed".to_string(),
                    severity: Severity::Info,
                    score: 1.2,
                },
            ],
            raised_from: None,
        };
        let ttft = Finding {
            rule: "ttft-regression".to_string(),
            title: "Time to first token regressed".to_string(),
            severity: Severity::Warning,
            score: 2.1,
            scope: model(QWEN),
            summary: "Users wait much longer for the first token than in the baseline, while the queue \
                      stayed short, which points at prefill rather than admission."
                .to_string(),
            evidence: vec![
                Evidence {
                    signal: "ttft_p95".to_string(),
                    title: "P95 time to first token".to_string(),
                    unit: "seconds".to_string(),
                    value: Some(4.12),
                    baseline: Some(0.82),
                    threshold: "> 2x baseline or > 3s".to_string(),
                    passed: true,
                    query: r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket{namespace="inference-prod"}[30m])))"#
                        .to_string(),
                    metric: "vllm:time_to_first_token_seconds".to_string(),
                    low_confidence: true,
                    observations: Some(14.0),
                    limits: vec![],
                    series: None,
                    value_bound: None,
                    baseline_bound: None,
                    same_bucket: false,
                },
                Evidence {
                    signal: "queue_time_p95".to_string(),
                    title: "P95 time in queue".to_string(),
                    unit: "seconds".to_string(),
                    value: Some(0.031),
                    baseline: Some(0.024),
                    threshold: "< 0.5s".to_string(),
                    passed: true,
                    query: r#"histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:request_queue_time_seconds_bucket{namespace="inference-prod"}[30m])))"#
                        .to_string(),
                    metric: "vllm:request_queue_time_seconds".to_string(),
                    low_confidence: false,
                    observations: Some(412.0),
                    limits: vec![],
                    series: None,
                    value_bound: None,
                    baseline_bound: None,
                    same_bucket: false,
                },
                Evidence {
                    signal: "prefix_cache_hit_ratio".to_string(),
                    title: "Prefix cache hit ratio".to_string(),
                    unit: "ratio".to_string(),
                    value: None,
                    baseline: Some(0.41),
                    threshold: "< 50% of baseline".to_string(),
                    passed: false,
                    query: r#"sum by (model_name) (rate(vllm:prefix_cache_hits_total{namespace="inference-prod"}[30m])) / sum by (model_name) (rate(vllm:prefix_cache_queries_total{namespace="inference-prod"}[30m]))"#
                        .to_string(),
                    metric: "vllm:prefix_cache_hits_total".to_string(),
                    low_confidence: false,
                    observations: None,
                    limits: vec![],
                    series: None,
                    value_bound: None,
                    baseline_bound: None,
                    same_bucket: false,
                },
            ],
            steps: vec![
                "Compare prompt lengths with the baseline: longer prompts mean longer prefill.".to_string(),
                "Enable chunked prefill (--enable-chunked-prefill) so long prompts do not stall others."
                    .to_string(),
            ],
            references: vec![],
            recommendations: vec![],
            wont_help: vec![crate::report::WontHelp {
                lever: "more KV memory".to_string(),
                flag: "--gpu-memory-utilization / --kv-cache-memory-bytes".to_string(),
                why: "KV-cache usage peaked at 41%, never past 60%".to_string(),
            }],
            replicas: None,
            stood_in: None,
            recent: None,
            // Already past its baseline when the window began.
            onset: None,
            onset_signal: Some("ttft_p95".to_string()),
            ended: None,
            preceded_by: None,
            cold_start: None,
            replica_cause: None,
            gpu_reasons: Vec::new(),
            correlations: Vec::new(),
            also_consistent: vec![],
            raised_from: None,
        };
        let healthy = vec![
            Checked {
                rule: "error-rate".to_string(),
                scope: model(LLAMA),
            },
            Checked {
                rule: "error-rate".to_string(),
                scope: model(QWEN),
            },
            Checked {
                rule: "queue-backlog".to_string(),
                scope: model(QWEN),
            },
            Checked {
                rule: "throughput-drop".to_string(),
                scope: model(LLAMA),
            },
            Checked {
                rule: "throughput-drop".to_string(),
                scope: model(QWEN),
            },
        ];
        let not_evaluated = vec![
            NotEvaluated {
                rule: "spec-decode-acceptance-drop".to_string(),
                scope: model(QWEN),
                reason: "no series for vllm:spec_decode_num_draft_tokens_total in the window"
                    .to_string(),
            },
            NotEvaluated {
                rule: "kv-cache-exhausted".to_string(),
                scope: model(QWEN),
                reason: "timed out".to_string(),
            },
        ];
        let mut r = base(vec![kv, ttft], healthy, not_evaluated);
        // The KV-cache signal carries its course and its threshold, as live runs give them:
        // steady in the baseline, climbing to the ceiling in the window, with a scrape gap.
        let (b0, w0) = (r.baseline.start.timestamp() as f64, r.window.start.timestamp() as f64);
        let kv_usage = &mut r.findings[0].evidence[0];
        kv_usage.limits = vec![Limit { label: "> 95%".to_string(), value: 0.95 }];
        kv_usage.series = Some(Trend {
            step_seconds: 60,
            range_seconds: 180,
            query: r#"max by (model_name) (max_over_time(vllm:kv_cache_usage_perc{namespace="inference-prod"}[180s]))"#.to_string(),
            baseline: (0..=30).map(|i| (b0 + 60.0 * i as f64, 0.60 + 0.02 * ((i % 5) as f64 - 2.0).abs() / 2.0)).collect(),
            window: (0..=30)
                .filter(|i| !(18..21).contains(i))
                .map(|i| (w0 + 60.0 * i as f64, (0.62 + 0.03 * i as f64).min(0.991)))
                .collect(),
        });
        r.warnings = vec![
            "partial response: store 10.0.3.7:10901 unavailable".to_string(),
            "partial response: store 10.0.3.7:10901 unavailable".to_string(),
        ];
        r
    }

    fn event(h: u32, m: u32, s: u32, kind: EventKind, scope: Scope, detail: &str) -> Event {
        Event {
            time: Utc.with_ymd_and_hms(2026, 1, 15, h, m, s).single().expect("valid fixed timestamp"),
            kind,
            scope,
            detail: detail.to_string(),
            replicas: vec![],
            of: None,
            until: None,
            before: BTreeMap::new(),
            after: BTreeMap::new(),
        }
    }

    /// The sample report with what changed around it: a target going down and coming back and a
    /// rollout tied to no model in the baseline; a restart wave and a configuration change on the
    /// KV-cache finding's model just before its onset (the change it began after), and a restart
    /// of the other model later in the window.
    pub(crate) fn sample_report_with_events() -> Report {
        let mut r = sample_report();
        let mut down = event(8, 44, 0, EventKind::TargetDown, model(LLAMA), "1 of 3 replicas stopped answering scrapes");
        down.replicas = vec!["10.0.0.3:8000".to_string()];
        down.of = Some(3);
        let mut up = event(8, 46, 30, EventKind::TargetUp, model(LLAMA), "1 of 3 replicas answering scrapes again");
        up.replicas = down.replicas.clone();
        up.of = Some(3);
        let rollout = event(8, 58, 0, EventKind::Rollout, Scope::new(), "Deployment inference-prod/vllm-llama generation 7 -> 8");
        let mut restart = event(9, 0, 30, EventKind::Restart, model(LLAMA), "2 of 3 replicas restarted");
        restart.replicas = vec!["10.0.0.1:8000".to_string(), "10.0.0.2:8000".to_string()];
        restart.of = Some(3);
        restart.until = Some(t(9, 1));
        let mut config = event(9, 1, 0, EventKind::ConfigChange, model(LLAMA), "num_gpu_blocks 2000 -> 900 on 2 of 3 replicas");
        config.replicas = restart.replicas.clone();
        config.of = Some(3);
        config.before = BTreeMap::from([("num_gpu_blocks".to_string(), "2000".to_string())]);
        config.after = BTreeMap::from([("num_gpu_blocks".to_string(), "900".to_string())]);
        let qwen_restart = event(9, 12, 0, EventKind::Restart, model(QWEN), "1 of 2 replicas restarted");
        r.events = vec![config.clone(), down, up, rollout, qwen_restart, restart];
        r.events.sort_by_key(|e| e.time);
        let kv = &mut r.findings[0];
        kv.preceded_by = Some(PrecededBy {
            event: config,
            lead_seconds: 120,
            text: "began 2 min after a configuration change at 09:01 UTC: num_gpu_blocks 2000 -> 900 on 2 of 3 replicas".to_string(),
        });
        kv.steps.insert(
            0,
            "Start with the configuration change at 09:01 UTC (num_gpu_blocks 2000 -> 900 on 2 of 3 replicas): roll it back, or compare it with the last healthy configuration, before tuning anything else.".to_string(),
        );
        r
    }

    /// Everything evaluated and nothing matched.
    pub(crate) fn clean_report() -> Report {
        let healthy = ["error-rate", "kv-cache-exhausted", "ttft-regression"]
            .iter()
            .flat_map(|rule| {
                [LLAMA, QWEN].map(|m| Checked {
                    rule: rule.to_string(),
                    scope: model(m),
                })
            })
            .collect();
        base(vec![], healthy, vec![])
    }

    /// The data source answered nothing usable: every pair is not evaluated.
    pub(crate) fn nothing_evaluated_report() -> Report {
        let not_evaluated = ["error-rate", "kv-cache-exhausted"]
            .iter()
            .map(|rule| NotEvaluated {
                rule: rule.to_string(),
                scope: Scope::new(),
                reason: "data source unreachable".to_string(),
            })
            .collect();
        let mut r = base(vec![], vec![], not_evaluated);
        r.metrics = MetricsInfo {
            generation: "unknown".to_string(),
            ..MetricsInfo::default()
        };
        r.warnings =
            vec!["no vLLM metrics found for selector {namespace=\"inference-prod\"}".to_string()];
        r
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};

    use super::fixtures::*;
    use super::*;

    fn scope(pairs: &[(&str, &str)]) -> Scope {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_range_within_one_day_shows_the_date_once() {
        let r = sample_report();
        assert_eq!(
            describe_range(&r.window),
            "2026-01-15 09:00:00 → 09:30:00 UTC (30m)"
        );
    }

    #[test]
    fn a_range_across_midnight_shows_both_dates() {
        let r = TimeRange {
            start: Utc.with_ymd_and_hms(2026, 1, 15, 23, 30, 0).unwrap(),
            end: Utc.with_ymd_and_hms(2026, 1, 16, 1, 0, 0).unwrap(),
        };
        assert_eq!(
            describe_range(&r),
            "2026-01-15 23:30:00 → 2026-01-16 01:00:00 UTC (1h 30m)"
        );
    }

    #[test]
    fn a_scope_of_only_the_grouping_label_is_written_as_its_value() {
        let style = ScopeStyle::for_report(&sample_report());
        assert_eq!(style.group_label.as_deref(), Some("model_name"));
        assert_eq!(
            style.format(&scope(&[("model_name", "llama-3")])),
            "llama-3"
        );
        assert_eq!(
            style.format(&scope(&[("model_name", "llama-3"), ("engine", "1")])),
            "llama-3 (engine=1)"
        );
        assert_eq!(style.format(&Scope::new()), "all");
        // Grouped by a label the series lack: said, not left blank.
        assert_eq!(style.format(&scope(&[("model_name", "")])), "(no model_name label)");
    }

    #[test]
    fn scopes_with_several_labels_are_written_in_full() {
        let mut r = sample_report();
        r.metrics.scopes = vec![scope(&[("model_name", "a"), ("engine", "0")])];
        let style = ScopeStyle::for_report(&r);
        assert_eq!(style.group_label, None);
        assert_eq!(
            style.format(&scope(&[("model_name", "a"), ("engine", "0")])),
            "engine=0, model_name=a"
        );
    }

    #[test]
    fn evidence_shows_change_only_against_a_positive_baseline() {
        let r = sample_report();
        let kv = evidence_words(&r.findings[0].evidence[0]);
        assert_eq!((kv.value.as_str(), kv.baseline.as_str()), ("99.1%", "62%"));
        assert_eq!(kv.change.as_deref(), Some("1.6x"));
        let preempt = evidence_words(&r.findings[0].evidence[1]);
        assert_eq!(preempt.change, None);
        let ttft = evidence_words(&r.findings[1].evidence[0]);
        assert_eq!(ttft.confidence.as_deref(), Some("low confidence (14 obs)"));
        let missing = evidence_words(&r.findings[1].evidence[2]);
        assert_eq!(missing.value, "no data");
    }

    #[test]
    fn credentials_in_the_source_url_are_never_displayed() {
        assert_eq!(
            display_url("https://user:s3cret@prom.example:9090/"),
            "https://prom.example:9090/"
        );
        assert!(!display_url("https://user:s3cret@[bad").contains("s3cret"));
    }

    #[test]
    fn nothing_evaluated_is_never_called_healthy() {
        let r = nothing_evaluated_report();
        assert_eq!(verdict(&r), Verdict::NothingEvaluated);
        let s = no_findings_sentence(&r).unwrap_or_default().to_lowercase();
        assert!(!s.contains("healthy") && !s.contains("no problems"), "{s}");
        assert!(healthy_summary(&r).is_none());
    }

    #[test]
    fn repeated_warnings_are_folded_with_a_count() {
        let r = sample_report();
        assert_eq!(
            warning_lines(&r),
            vec!["partial response: store 10.0.3.7:10901 unavailable (2 times)"]
        );
    }

    #[test]
    fn headline_counts_findings_by_severity_and_not_evaluated() {
        assert_eq!(
            headline(&sample_report()),
            "2 findings (1 critical, 1 warning) · 6 of 8 rules evaluated"
        );
        assert_eq!(headline(&clean_report()), "no problems found · 6 of 8 rules evaluated");
        let mut r = clean_report();
        r.coverage = crate::report::Coverage { rules: 8, evaluated: 8, stood_in: 0, core_not_evaluated: vec![], unread_targets: vec![] };
        assert_eq!(headline(&r), "no problems found");
    }

    fn named(rows: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
        rows.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect()
    }

    #[test]
    fn a_condition_names_the_other_signals_it_reads_in_words() {
        let ev = named(&[
            ("preemption_active", "Share of window with preemptions", ">= 50% or (see preemption_recent)"),
            ("preemption_recent", "Share of the last 5 min with preemptions", ">= 50% or (see preemption_active)"),
        ]);
        assert_eq!(condition_in_words(&ev[0].2, "preemption_active", &ev), ">= 50% or share of the last 5 min with preemptions >= 50%");
        assert_eq!(own_condition(&ev[0].2), ">= 50%");
        assert_eq!(alternatives(&ev[0].2), ["preemption_recent"]);
        // A flat `or` of three signals: each spelt out with its own condition, compound ones in parentheses.
        let ev = named(&[
            ("ttft_p95", "P95 time to first token", ">= 2x baseline or > 3 s or (see queue_p95, itl_p95)"),
            ("queue_p95", "P95 queue time", "> 1 s or (>= 2x baseline and > 300 ms) or (see ttft_p95, itl_p95)"),
            ("itl_p95", "P95 inter-token latency", ">= 1.5x baseline or > 100 ms or (see ttft_p95, queue_p95)"),
        ]);
        assert_eq!(
            condition_in_words(&ev[0].2, "ttft_p95", &ev),
            ">= 2x baseline or > 3 s or (P95 queue time > 1 s or (>= 2x baseline and > 300 ms)) or (P95 inter-token latency >= 1.5x baseline or > 100 ms)"
        );
        assert_eq!(own_condition(&ev[1].2), "> 1 s or (>= 2x baseline and > 300 ms)");
    }

    #[test]
    fn a_group_whose_shape_the_text_does_not_show_is_named_not_guessed() {
        // itl_p95 <= 100 ms and (itl_p95 < 1.5x baseline or (running_avg >= 2x baseline and gen >= 1.2x baseline))
        let ev = named(&[
            ("itl_p95", "P95 inter-token latency", "<= 100 ms and (< 1.5x baseline or (see running_avg, gen_rate))"),
            ("running_avg", "Running requests (avg)", "((>= 2x baseline and (see gen_rate)) or (see itl_p95)) and (see itl_p95)"),
            ("gen_rate", "Generation throughput", "((>= 1.2x baseline and (see running_avg)) or (see itl_p95)) and (see itl_p95)"),
        ]);
        assert_eq!(
            condition_in_words(&ev[0].2, "itl_p95", &ev),
            "<= 100 ms and (< 1.5x baseline or a condition on running requests (avg) and generation throughput)"
        );
        assert_eq!(own_condition(&ev[0].2), "<= 100 ms and < 1.5x baseline");
        assert_eq!(own_condition(&ev[1].2), ">= 2x baseline");
        assert!(alternatives(&ev[0].2).contains(&"running_avg".to_string()));
        // A signal the evidence does not carry is named by its id; several lines are joined by `and`.
        assert_eq!(condition_in_words("> 3 s or (see nowhere)", "x", &ev), "> 3 s or a condition on nowhere");
        assert_eq!(own_condition(">= 1.5x baseline or > 100 ms; > 100 ms"), "(>= 1.5x baseline or > 100 ms) and > 100 ms");
        assert_eq!(own_condition("not (> 3 s)"), "not (> 3 s)");
    }

    #[test]
    fn an_all_clear_without_the_core_checks_is_not_an_all_clear() {
        let mut r = clean_report();
        r.coverage = crate::report::Coverage { rules: 8, evaluated: 5, stood_in: 2, core_not_evaluated: vec!["slow-decode".into()], unread_targets: vec![] };
        assert_eq!(verdict(&r), Verdict::Incomplete);
        let h = headline(&r);
        assert!(h.starts_with("not an all-clear") && h.contains("5 of 8 rules evaluated (2 through stand-in signals)"), "{h}");
        let s = no_findings_sentence(&r).unwrap();
        assert!(s.contains("not an all-clear") && s.contains("slow-decode"), "{s}");
        assert!(!s.contains("No problems found"), "{s}");
        let opts = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
        assert!(check_verdict(&r, &opts).starts_with("NOT EVALUATED: the core checks slow-decode"), "{}", check_verdict(&r, &opts));
        // A warning finding reads as a finding, still naming what could not be checked; below
        // --fail-on it does not turn the check into a pass.
        let mut with_warning = sample_report();
        with_warning.coverage.core_not_evaluated = vec!["slow-decode".into()];
        assert_eq!(verdict(&with_warning), Verdict::Findings);
        assert!(no_findings_sentence(&with_warning).unwrap().contains("slow-decode"));
        let critical_only = RenderOptions { fail_on: Some(Severity::Critical), ..RenderOptions::default() };
        let mut warning_only = with_warning.clone();
        warning_only.findings.retain(|f| f.severity == Severity::Warning);
        let v = check_verdict(&warning_only, &critical_only);
        assert!(v.starts_with("NOT EVALUATED") && v.contains("1 finding (1 warning), none failing"), "{v}");
    }

    #[test]
    fn checks_verdict_still_passes_with_changes_no_rule_explains_and_says_them_first() {
        let opts = RenderOptions { fail_on: Some(Severity::Warning), ..RenderOptions::default() };
        let clean = clean_report();
        assert!(!check_verdict(&clean, &opts).contains("moved"));
        let mut moved = clean.clone();
        moved.unexplained.push(crate::report::Unexplained {
            signal: "prefix_hit_ratio".into(),
            title: "Prefix-cache hit ratio".into(),
            unit: "ratio".into(),
            scope: Scope::new(),
            direction: "down".into(),
            value: Some(0.1),
            baseline: Some(0.5),
            ratio: Some(0.2),
            robust_z: None,
            onset: moved.window.start,
            from_start: true,
            duration_seconds: 1800,
            ongoing: true,
            query: String::new(),
            metric: String::new(),
            spare: false,
            series: crate::report::Trend { step_seconds: 60, range_seconds: 180, query: String::new(), baseline: vec![], window: vec![] },
        });
        let v = check_verdict(&moved, &opts);
        assert!(v.starts_with("PASS: ") && v.contains("; but 1 signal moved that no rule explains, "), "{v}");
        assert_eq!(moved.exit_code(opts.fail_on), clean.exit_code(opts.fail_on));
        // --fail-on unexplained: the same report fails, and says on what; a clean one still passes.
        let unexplained = RenderOptions { fail_on_unexplained: true, ..opts };
        let v = check_verdict(&moved, &unexplained);
        assert!(v.starts_with("FAIL: 1 signal moved that no rule explains since the deploy at ") && v.contains("(Prefix-cache hit ratio down on ") && v.ends_with("; --fail-on unexplained)"), "{v}");
        assert_eq!(moved.exit_code_with(unexplained.fail_on, true), crate::report::EXIT_FINDINGS);
        assert!(check_verdict(&clean, &unexplained).starts_with("PASS: "));
        assert_eq!(clean.exit_code_with(unexplained.fail_on, true), clean.exit_code(opts.fail_on));
        // A failing finding comes first and names the findings.
        let mut both = sample_report();
        both.unexplained = moved.unexplained.clone();
        assert!(check_verdict(&both, &unexplained).contains("critical"), "{}", check_verdict(&both, &unexplained));
        assert_eq!(crate::report::fail_on_name(Some(Severity::Warning), true), "unexplained");
        assert_eq!(crate::report::fail_on_name(Some(Severity::Info), true), "info");
        assert_eq!(crate::report::fail_on_name(None, false), "never");
    }

    #[test]
    fn every_format_has_a_unique_name_that_parses_back() {
        let names: BTreeSet<&str> = Format::ALL.iter().map(|f| f.name()).collect();
        assert_eq!(names.len(), Format::ALL.len());
        assert_eq!(names, BTreeSet::from(["text", "table", "markdown", "json", "slack", "slack-blocks", "junit", "html"]));
        for &f in Format::ALL {
            assert_eq!(f.name().parse::<Format>(), Ok(f));
            assert_eq!(f.to_string(), f.name());
            assert!(!f.about().is_empty() && !f.about().ends_with('.'), "{}", f.about());
        }
        let err = "yaml".parse::<Format>().unwrap_err().to_string();
        assert!(err.contains("\"yaml\"") && err.contains("text, table, markdown, json, slack, slack-blocks, junit, html"), "{err}");
        assert_eq!(Format::default(), Format::Text);
        let text: Vec<&str> = Format::ALL.iter().filter(|f| f.is_text()).map(|f| f.name()).collect();
        assert_eq!(text, ["text", "table", "markdown", "slack"]);
        let terminal: Vec<&str> = Format::ALL.iter().filter(|f| f.is_terminal()).map(|f| f.name()).collect();
        assert_eq!(terminal, ["text", "table"]);
    }

    #[test]
    fn render_dispatches_on_format() {
        let r = clean_report();
        let json = render(&r, Format::Json, &RenderOptions::default());
        assert!(json.starts_with('{'));
        assert!(
            render(&r, Format::Markdown, &RenderOptions::default()).contains("OK: no problem found")
        );
    }
}
