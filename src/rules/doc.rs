//! Rule documentation generated from the rule files themselves: `rules list` and `rules show ID`.

use std::fmt::Write;

use super::RuleSet;

/// One line per rule: id, severity, title.
pub fn list(set: &RuleSet) -> String {
    let w = set.rules.iter().map(|r| r.id.len()).max().unwrap_or(0);
    let mut out = String::new();
    for r in &set.rules {
        let _ = writeln!(out, "{:<w$}  {:<8}  {}", r.id, r.severity.as_str(), crate::text::one_line(&r.title));
    }
    out
}

/// Everything about one rule.
pub fn show(set: &RuleSet, id: &str) -> Option<String> {
    let r = set.rule(id)?;
    let mut o = String::new();
    let _ = writeln!(o, "{} ({})\n{}\n", r.id, r.severity, r.title);
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
    let mut names: Vec<&String> = Vec::new();
    for c in r.when.iter().chain(r.stand_in.iter().flat_map(|s| &s.when)) {
        for cmp in c.expr.comparisons() {
            if let super::expr::Rhs::Named { name } = &cmp.rhs {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    if !names.is_empty() {
        let _ = writeln!(o, "\nThresholds");
        for n in names {
            let v = set.thresholds.get(n.as_str()).map(|v| crate::units::sig(*v)).unwrap_or_else(|| "undefined".into());
            let _ = writeln!(o, "  ${n} = {v}");
        }
    }
    let _ = writeln!(o, "\nSignals");
    for s in r.signals().into_iter().chain(if r.recent { set.recent_pairs(r).into_iter().map(|(_, x)| x).collect() } else { Vec::new() }) {
        if let Some(d) = set.signals.get(&s) {
            let _ = writeln!(o, "  {:<22} {} ({}). {}", d.id, d.title, d.unit, d.description);
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
        let _ = writeln!(o, "  {}. {}", i + 1, s);
    }
    if !r.references.is_empty() {
        let _ = writeln!(o, "\nReferences");
        for s in &r.references {
            let _ = writeln!(o, "  - {s}");
        }
    }
    let _ = writeln!(o, "\nDefined in {}", r.origin);
    // A rule file's text, printed with its line breaks and nothing that drives a terminal.
    Some(crate::text::printable(&o))
}

#[cfg(test)]
mod tests {
    #[test]
    fn show_prints_what_the_rule_file_says() {
        let set = crate::rules::load_builtin().unwrap();
        let text = super::show(&set, "kv-cache-pressure").unwrap();
        assert!(text.contains("kv_usage_max >= $kv_usage_high"));
        assert!(text.contains("$kv_usage_high = 0.9"));
        assert!(text.contains("rules/capacity.toml:"));
        assert!(super::show(&set, "nope").is_none());
        assert_eq!(super::list(&set).lines().count(), set.rules.len());
    }

    #[test]
    fn a_rule_files_escape_sequences_never_reach_the_terminal() {
        let mut set = crate::rules::load_builtin().unwrap();
        let rule = "[[rule]]\nid = \"odd\"\ntitle = \"T\\u001b[31mRED\\r\"\nseverity = \"info\"\nsummary = \"s\"\nsteps = [\"\\u001b]8;;http://x\\u0007click\"]\nwhen = [\"itl_p95 > 1s\"]\n";
        crate::rules::load::load_str(&mut set, "odd.toml", rule).unwrap();
        for text in [super::list(&set), super::show(&set, "odd").unwrap()] {
            assert!(!text.chars().any(|c| c.is_control() && c != '\n'), "{text:?}");
            assert!(text.contains("T\u{FFFD}[31mRED"), "{text:?}");
        }
    }
}
