//! Rule documentation generated from the rule files themselves: `rules list` and `rules show ID`.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::RuleSet;

/// What the configuration changed about the pack, for the listing to say: the rules it turns off
/// and the thresholds it (or a profile) sets, each with where, e.g. `./vllm-diag.toml:7`.
#[derive(Debug, Clone, Default)]
pub struct Notes {
    /// Rule id -> where it is turned off.
    pub off: BTreeMap<String, String>,
    /// Threshold name -> who set it: `./vllm-diag.toml:3`, `profile batch (--profile)`.
    pub thresholds: BTreeMap<String, String>,
}

/// One line per rule: id, severity, title; and `off` with where, for a rule the configuration
/// turns off.
pub fn list(set: &RuleSet, notes: &Notes) -> String {
    let w = set.rules.iter().map(|r| r.id.len()).max().unwrap_or(0);
    let mut out = String::new();
    for r in &set.rules {
        let _ = write!(out, "{:<w$}  {:<8}  {}", r.id, r.severity.as_str(), crate::text::one_line(&r.title));
        if let Some(place) = notes.off.get(&r.id) {
            let _ = write!(out, "  [off: {}]", crate::text::one_line(place));
        }
        out.push('\n');
    }
    out
}

/// Everything about one rule, its thresholds as in force (in their signal's unit, and who set
/// them when not the rule files).
pub fn show(set: &RuleSet, id: &str, notes: &Notes) -> Option<String> {
    let r = set.rule(id)?;
    let mut o = String::new();
    let _ = writeln!(o, "{} ({})\n{}\n", r.id, r.severity, r.title);
    if let Some(place) = notes.off.get(&r.id) {
        let _ = writeln!(o, "Turned off by the configuration ({place}): explain does not run it.\n");
    }
    let _ = writeln!(o, "What it detects\n  {}\n", r.description.trim().replace('\n', "\n  "));
    if !r.why.is_empty() {
        let _ = writeln!(o, "Why it matters\n  {}\n", r.why.trim());
    }
    let _ = writeln!(o, "Fires when all of these hold");
    for c in &r.when {
        let _ = writeln!(o, "  - {}", c.text);
    }
    if let Some(s) = &r.stand_in {
        let _ = writeln!(
            o,
            "\nWhen {} {} no metric in the data, it decides from these instead (a lower-confidence finding)",
            s.missing.join(", "),
            if s.missing.len() == 1 { "has" } else { "have" }
        );
        for c in &s.when {
            let _ = writeln!(o, "  - {}", c.text);
        }
    }
    let pairs = if r.recent { set.recent_pairs(r) } else { Vec::new() };
    if !pairs.is_empty() {
        let _ = writeln!(
            o,
            "\nWhen they do not hold over the whole window{}, they are checked again over its last minutes (a late or second episode), each of these read there against its whole baseline",
            r.recent_when.as_ref().map(|c| format!(" but {} does", c.text)).unwrap_or_default()
        );
        for (sig, recent) in &pairs {
            let range = set.signals.get(recent).and_then(|d| d.range).map(|d| humantime::format_duration(d).to_string()).unwrap_or_default();
            let _ = writeln!(o, "  - {sig}: {recent} (last {range})");
        }
    }
    if r.core {
        let _ = writeln!(o, "\nA core runbook check: a run that cannot evaluate it is not an all-clear (exit code 3).");
    }
    // Each threshold with the signal this rule compares with it, for its unit.
    let mut names: Vec<(&String, &String)> = Vec::new();
    for c in r.when.iter().chain(r.stand_in.iter().flat_map(|s| &s.when)) {
        for cmp in c.expr.comparisons() {
            if let super::expr::Rhs::Named { name } = &cmp.rhs {
                if !names.iter().any(|(n, _)| *n == name) {
                    names.push((name, &cmp.signal));
                }
            }
        }
    }
    if !names.is_empty() {
        let _ = writeln!(o, "\nThresholds");
        for (n, signal) in names {
            let unit = set.signals.get(signal.as_str()).map_or("", |d| d.unit.as_str());
            let v = set.thresholds.get(n.as_str()).map(|v| crate::units::format_value(*v, unit)).unwrap_or_else(|| "undefined".into());
            let by = notes.thresholds.get(n.as_str()).map(|w| format!(", set by {w}")).unwrap_or_default();
            let _ = writeln!(o, "  ${n} = {v} (compared with {signal}{by})");
        }
    }
    let _ = writeln!(
        o,
        "\nSignals (each with the PromQL explain asks for it: vLLM V1 names, by model_name, over a 30m window; explain picks the names the data has)"
    );
    let opts = super::export::Options::default();
    for s in r.signals().into_iter().chain(if r.recent { set.recent_pairs(r).into_iter().map(|(_, x)| x).collect() } else { Vec::new() }) {
        if let Some(d) = set.signals.get(&s) {
            let _ = writeln!(o, "  {}: {} ({}). {}", d.id, d.title, crate::units::unit_words(&d.unit), d.description);
            match super::export::signal_query(set, &d.id, &opts) {
                Ok(q) => {
                    let _ = writeln!(o, "    {q}");
                }
                Err(why) => {
                    let _ = writeln!(o, "    (no single PromQL query: {why})");
                }
            }
        }
    }
    if !r.supersedes.is_empty() {
        let _ = writeln!(o, "\nMore specific than: {}", r.supersedes.join(", "));
    }
    if let Some(c) = &r.caveat {
        let _ = writeln!(o, "\nBlind spot (said when judged healthy while {}): {}", c.when.text, c.text);
    }
    let _ = writeln!(o, "\nNext steps");
    for (i, s) in r.steps.iter().enumerate() {
        let _ = writeln!(o, "  {}. {}", i + 1, s.text);
        match s.answered_by.as_deref() {
            Some(crate::rules::BY_BINDING) => {
                let _ = writeln!(o, "     (answered from the limit that bound the model: confirmed when it is {})", s.held_by.join(" or "));
            }
            Some(crate::rules::BY_REPLICAS) => {
                let _ = writeln!(o, "     (answered from the per-replica breakdown: how evenly the model's replicas serve)");
            }
            Some(by) => {
                let _ = writeln!(o, "     (answered from {by} where it was read in the window and the baseline)");
            }
            None => {}
        }
    }
    if !r.references.is_empty() {
        let _ = writeln!(o, "\nReferences");
        for s in &r.references {
            let links: Vec<String> = pull_request(s).into_iter().chain(reference_link(s).map(str::to_string)).collect();
            match links.as_slice() {
                [] => {
                    let _ = writeln!(o, "  - {s}");
                }
                _ => {
                    let _ = writeln!(o, "  - {s}: {}", links.join(" "));
                }
            }
        }
    }
    let _ = writeln!(o, "\nDefined in {}", r.origin);
    // A rule file's text, printed with its line breaks and nothing that drives a terminal.
    Some(crate::text::printable(&o))
}

/// `rules show SIGNAL`: one signal's title, unit, description, the PromQL explain asks for it
/// and the rules that read it; `None` when no signal has that id.
pub fn show_signal(set: &RuleSet, id: &str) -> Option<String> {
    let d = set.signals.get(id)?;
    let mut o = String::new();
    let _ = writeln!(o, "{} (signal, {})\n{}\n", d.id, crate::units::unit_words(&d.unit), d.title);
    let _ = writeln!(o, "What it measures\n  {}\n", d.description.trim().replace('\n', "\n  "));
    let _ = writeln!(o, "PromQL (vLLM V1 names, by model_name, over a 30m window; explain picks the names the data has)");
    match super::export::signal_query(set, &d.id, &super::export::Options::default()) {
        Ok(q) => {
            let _ = writeln!(o, "  {q}");
        }
        Err(why) => {
            let _ = writeln!(o, "  (no single PromQL query: {why})");
        }
    }
    let users: Vec<&str> = set.rules.iter().filter(|r| r.signals().iter().any(|s| s == id)).map(|r| r.id.as_str()).collect();
    let _ = writeln!(o, "\nRead by: {}", if users.is_empty() { "no rule (a stage of the diagnosis, or another signal)".to_string() } else { users.join(", ") });
    Some(crate::text::printable(&o))
}

/// The built-in rules as a Markdown table, one row per rule: its id, severity, when it fires (the
/// first sentence of its description that says so, thresholds written with their values) and
/// whether it is a core check. docs/rules.md holds this table; tests/docs.rs checks it is the
/// pack's, so the page never lists a rule the binary does not have or misses one it has.
pub fn markdown_table(set: &RuleSet) -> String {
    let uses = super::threshold_uses(set);
    let value = |name: &str| -> Option<String> {
        let v = set.thresholds.get(name)?;
        let unit = uses.get(name).and_then(|u| u.first()).map_or("", |u| u.unit.as_str());
        // The sentence names what is counted (`4 requests`, `+20%/h per hour` would say it twice).
        Some(match unit {
            "requests" | "tokens" | "count" | "factor" | "requests_per_second" | "per_second" => crate::units::sig(*v),
            "ratio_per_hour" => format!("{}%", crate::units::sig(v * 100.0)),
            _ => crate::units::format_value(*v, unit),
        })
    };
    let mut out = String::from("| id | severity | fires | core |\n|---|---|---|---|\n");
    for r in &set.rules {
        let text = with_values(&fires_when(&r.description).unwrap_or_else(|| r.summary.clone()), &value);
        let cell = crate::text::one_line(&text).replace('|', "\\|");
        let _ = writeln!(out, "| `{}` | {} | {} | {} |", r.id, r.severity.as_str(), cell, if r.core { "core" } else { "" });
    }
    out
}

/// The first sentence of a description that says when the rule fires (`Fires when ...`, `Fires
/// where ...`), without `Fires`; a sentence ends at a full stop outside parentheses.
fn fires_when(description: &str) -> Option<String> {
    let text = description.split_whitespace().collect::<Vec<_>>().join(" ");
    let start = text.find("Fires ")?;
    let rest = &text[start + "Fires ".len()..];
    let mut depth = 0i32;
    let chars: Vec<(usize, char)> = rest.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '.' if depth <= 0 => {
                let next = chars.get(k + 1).map(|x| x.1);
                let after = chars.get(k + 2).map(|x| x.1);
                // The next sentence starts with a capital, a code span or vLLM's name.
                let starts = after.is_some_and(|a| a.is_uppercase() || a == '`') || rest[i..].starts_with(". vLLM");
                if next.is_none() || (next == Some(' ') && starts) {
                    return Some(rest[..i].to_string());
                }
            }
            _ => {}
        }
    }
    Some(rest.trim_end_matches('.').to_string())
}

/// `$name` written as its value (`$kv_usage_high` -> `90%`) where the set holds it.
fn with_values(text: &str, value: &dyn Fn(&str) -> Option<String>) -> String {
    let re = regex::Regex::new(r"\$([a-z_][a-z0-9_]*)").expect("a valid pattern");
    re.replace_all(text, |c: &regex::Captures| value(&c[1]).unwrap_or_else(|| c[0].to_string())).into_owned()
}

/// Where a reference is read: the runbook and the pathologies are the project's own pages
/// (docs/rules.md holds the runbook's table, docs/how-it-decides.md how each is told), the rest the
/// upstream documentation they name (a vLLM pull request by its number, on GitHub). `None` for a reference this table does not know (a rule file
/// of the user's): it is printed as written.
pub fn reference_link(reference: &str) -> Option<&'static str> {
    const LINKS: &[(&str, &str)] = &[
        ("Operator runbook", "docs/rules.md, \"The built-in rules\" (vllm-diag's sources)"),
        ("Operator guide", "docs/how-it-decides.md (vllm-diag's sources)"),
        ("Pathology", "docs/how-it-decides.md (vllm-diag's sources)"),
        ("vLLM metrics design", "https://docs.vllm.ai/en/latest/design/metrics/"),
        ("vLLM metrics", "https://docs.vllm.ai/en/latest/usage/metrics/"),
        ("vLLM scheduler", "https://docs.vllm.ai/en/latest/configuration/engine_args/"),
        ("vLLM v1 scheduler", "https://github.com/vllm-project/vllm/blob/main/vllm/v1/core/sched/scheduler.py"),
        ("vLLM speculative decoding", "https://docs.vllm.ai/en/latest/features/spec_decode/"),
        ("vLLM sleep mode", "https://docs.vllm.ai/en/latest/features/sleep_mode/"),
        ("vLLM NIXL connector", "https://docs.vllm.ai/en/latest/features/nixl_connector_usage/"),
        ("vLLM data parallelism", "https://docs.vllm.ai/en/latest/serving/data_parallel_deployment/"),
        ("vLLM router (vllm-router)", "docs/hops.md, \"Routers and gateways\" (vllm-diag's sources)"),
        ("vLLM:", "https://docs.vllm.ai/en/latest/usage/metrics/"),
        ("Prometheus `up` metric", "https://prometheus.io/docs/concepts/jobs_instances/"),
        ("NVIDIA DCGM field reference", "https://docs.nvidia.com/datacenter/dcgm/latest/dcgm-api/dcgm-api-field-ids.html"),
        ("NVIDIA NVML", "https://docs.nvidia.com/deploy/nvml-api/group__nvmlClocksEventReasons.html"),
        ("NVIDIA XID errors", "https://docs.nvidia.com/deploy/xid-errors/index.html"),
        ("Multi-window, multi-burn-rate alerts", "https://sre.google/workbook/alerting-on-slos/"),
    ];
    LINKS.iter().find(|(prefix, _)| reference.starts_with(prefix)).map(|(_, url)| *url)
}

/// A vLLM pull request a reference names (`vllm-project/vllm #38435`), as a link.
fn pull_request(reference: &str) -> Option<String> {
    let at = reference.find("vllm-project/vllm #")? + "vllm-project/vllm #".len();
    let number: String = reference[at..].chars().take_while(char::is_ascii_digit).collect();
    (!number.is_empty()).then(|| format!("https://github.com/vllm-project/vllm/pull/{number}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn show_prints_what_the_rule_file_says() {
        let set = crate::rules::load_builtin().unwrap();
        let none = super::Notes::default();
        let text = super::show(&set, "kv-cache-pressure", &none).unwrap();
        assert!(text.contains("kv_usage_max >= $kv_usage_high"));
        assert!(text.contains("$kv_usage_high = 90% (compared with kv_usage_max)"), "{text}");
        assert!(text.contains("$ttft_p95_high = 3 s (compared with ttft_p95)"), "{text}");
        assert!(text.contains("rules/capacity.toml:"));
        assert!(super::show(&set, "nope", &none).is_none());
        assert_eq!(super::list(&set, &none).lines().count(), set.rules.len());
    }

    #[test]
    fn show_says_what_answers_each_step() {
        let set = crate::rules::load_builtin().unwrap();
        let text = super::show(&set, "load-exceeds-capacity", &super::Notes::default()).unwrap();
        assert!(text.contains("(answered from request_rate where it was read in the window and the baseline)"), "{text}");
        assert!(text.contains("(answered from the per-replica breakdown: how evenly the model's replicas serve)"), "{text}");
        assert!(text.contains("(answered from the limit that bound the model: confirmed when it is max-num-seqs or kv-cache)"), "{text}");
        assert!(!text.contains("answered from binding") && !text.contains("answered from replicas"), "{text}");
    }

    /// What `rules show` prints reads as a product: every signal with its PromQL, units in words,
    /// every built-in reference with a link, and no rule text telling the project's history.
    #[test]
    fn show_gives_each_signals_promql_units_in_words_and_links_every_reference() {
        let set = crate::rules::load_builtin().unwrap();
        let none = super::Notes::default();
        let text = super::show(&set, "kv-cache-pressure", &none).unwrap();
        assert!(text.contains("  preemption_rate: Preemptions (per second). "), "{text}");
        assert!(text.contains("\n    sum by (model_name) (rate(vllm:num_preemptions_total[1800s]))\n"), "{text}");
        assert!(text.contains("kv_usage_max: KV-cache usage (peak) (a share, shown as %)."), "{text}");
        assert!(text.contains("  - Pathology: KV-cache thrashing: docs/how-it-decides.md"), "{text}");
        for r in &set.rules {
            let text = super::show(&set, &r.id, &none).unwrap();
            assert!(!text.contains("_second)") && !text.contains("(ratio)"), "{}: a unit as an identifier\n{text}", r.id);
            for reference in &r.references {
                assert!(super::reference_link(reference).is_some() || super::pull_request(reference).is_some(), "{}: no link for {reference:?}", r.id);
            }
            for s in r.signals() {
                let q = super::super::export::signal_query(&set, &s, &super::super::export::Options::default());
                assert!(q.is_ok() || text.contains("(no single PromQL query: "), "{}: {s}: {q:?}", r.id);
            }
        }
    }

    #[test]
    fn no_rule_text_tells_the_projects_history() {
        let set = crate::rules::load_builtin().unwrap();
        let history = regex::Regex::new(r"(?i)\breal (engine|vllm|h200|gpu|replicas?)\b|was called|as before|\bpreviously\b|\bissue \d").unwrap();
        let mut found = Vec::new();
        for r in &set.rules {
            for (what, text) in [("title", &r.title), ("summary", &r.summary), ("description", &r.description), ("why", &r.why)].into_iter().chain(
                r.steps.iter().flat_map(|s| [Some(&s.text), s.if_grew.as_ref(), s.if_fell.as_ref(), s.if_unchanged.as_ref()]).flatten().map(|s| ("step", s)),
            ) {
                if let Some(m) = history.find(text) {
                    found.push(format!("{} {what}: {:?}", r.id, m.as_str()));
                }
            }
        }
        for d in set.signals.values() {
            if let Some(m) = history.find(&d.description).or_else(|| history.find(&d.title)) {
                found.push(format!("signal {}: {:?}", d.id, m.as_str()));
            }
        }
        assert!(found.is_empty(), "project history belongs in CHANGELOG.md: {found:#?}");
    }

    #[test]
    fn what_the_configuration_changed_is_said_with_where() {
        let set = crate::rules::load_builtin().unwrap();
        let notes = super::Notes {
            off: [("slow-decode".to_string(), "./vllm-diag.toml:7".to_string())].into(),
            thresholds: [("kv_usage_high".to_string(), "./vllm-diag.toml:3".to_string())].into(),
        };
        let list = super::list(&set, &notes);
        let line = list.lines().find(|l| l.starts_with("slow-decode ")).unwrap();
        assert!(line.ends_with("[off: ./vllm-diag.toml:7]"), "{line}");
        assert_eq!(list.matches("[off:").count(), 1, "{list}");
        let text = super::show(&set, "slow-decode", &notes).unwrap();
        assert!(text.contains("Turned off by the configuration (./vllm-diag.toml:7)"), "{text}");
        let text = super::show(&set, "kv-cache-pressure", &notes).unwrap();
        assert!(text.contains("$kv_usage_high = 90% (compared with kv_usage_max, set by ./vllm-diag.toml:3)"), "{text}");
    }

    #[test]
    fn a_rule_files_escape_sequences_never_reach_the_terminal() {
        let mut set = crate::rules::load_builtin().unwrap();
        let rule = "[[rule]]\nid = \"odd\"\ntitle = \"T\\u001b[31mRED\\r\"\nseverity = \"info\"\nsummary = \"s\"\nsteps = [\"\\u001b]8;;http://x\\u0007click\"]\nwhen = [\"itl_p95 > 1s\"]\n";
        crate::rules::load::load_str(&mut set, "odd.toml", rule).unwrap();
        let none = super::Notes::default();
        for text in [super::list(&set, &none), super::show(&set, "odd", &none).unwrap()] {
            assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
            assert!(text.contains("T\u{FFFD}[31mRED"), "{text:?}");
        }
    }
}
