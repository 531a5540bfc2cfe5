//! The rules commands (`rules list`, `show`, `test`, `export`), over the pack explain would run:
//! the built-in rules, the rules directory, the profile, and what the configuration file says
//! about them (its thresholds, the rules it turns off). `list` and `show` say what the file
//! changed and where; `export` leaves out the rules it turns off. `test` reads a file only when
//! `--config` names one (a rule test gives the same result on every machine), then judges with its
//! thresholds and can still test a rule it turns off (a test names the rules it runs).
//!
//! A configuration file that cannot be used stops `test` and `export`, whose output a pipeline
//! acts on, as it stops explain; `list` and `show` (documentation) warn and go on without it.

use crate::cli::RulesCommand;
use crate::error::{exit, Failure};
use crate::rules::{doc, load_with_overrides, RuleSet};
use crate::settings::{build, origin_text, rules_dir_exists, ConfigError, Lookup, Mode, Settings};

use super::write_stdout;

pub fn run_rules(command: RulesCommand, lookup: &Lookup) -> Result<u8, Failure> {
    match command {
        RulesCommand::List(a) => {
            let pack = pack(a.into_settings(None), lookup, Lenient::Yes)?;
            write_stdout(&doc::list(&pack.set, &pack.notes))?;
            Ok(exit::OK)
        }
        RulesCommand::Test { files, rules } => {
            // A rule test gives the same result on every machine: it reads a configuration file
            // only when --config names one, never one found in the directory or the home. Every
            // rule stays testable (a test names the rules it runs); the thresholds are the file's.
            let hermetic = Lookup { explicit: lookup.explicit.clone(), disabled: lookup.disabled || lookup.explicit.is_none() };
            let set = pack(rules.into_settings(None), &hermetic, Lenient::No)?.set;
            let summary = crate::rules_test::run_files(&files, &set).map_err(|e| Failure::Usage(format!("test file error: {e}")))?;
            write_stdout(&summary.text)?;
            Ok(if summary.failed > 0 { exit::FINDINGS } else { exit::OK })
        }
        RulesCommand::Export(mut a) => {
            use crate::rules::export;
            let stray = a.backtest_flags_without_backtest();
            if !stray.is_empty() {
                return Err(Failure::Usage(format!(
                    "{} only applies with --backtest (the file itself names no server); add --backtest 7d to evaluate the alerts over past data, or drop {}",
                    stray.join(", "),
                    if stray.len() == 1 { "it" } else { "them" }
                )));
            }
            let pack = pack(a.settings(), lookup, Lenient::No)?;
            for (id, place) in &pack.notes.off {
                eprintln!("vllm-diag: not exported: {id}: turned off by the configuration ({place})");
            }
            let set = pack.in_force();
            // The scope: the flags, else the configuration file's, else the defaults; each error
            // names where its value was given.
            let scope = &pack.settings.scope;
            let (sp, gp) = (scope.selector.origin.place("--selector", "selector"), scope.group_by.origin.place("--group-by", "group_by"));
            let rp = scope.replica_label.origin.place("--replica-label", "replica_label");
            let selector = match scope.selector.as_deref() {
                Some(s) => crate::prom::Selector::parse(s).map_err(|e| Failure::Usage(format!("{sp}: {e}")))?,
                None => crate::prom::Selector::default(),
            };
            let replica_label = scope.replica_label.value.clone();
            let group_by: Vec<String> = scope.group_by.split(',').map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect();
            if let Some(bad) = group_by.iter().find(|l| !crate::prom::is_label_name(l)) {
                return Err(Failure::Usage(format!("{gp}: {bad:?} is not a label name (letters, digits and '_')")));
            }
            if !crate::prom::is_label_name(&replica_label) {
                return Err(Failure::Usage(format!("{rp}: {replica_label:?} is not a label name (letters, digits and '_')")));
            }
            if group_by.is_empty() {
                return Err(Failure::Usage(format!("{gp} needs at least one label, e.g. model_name")));
            }
            let opts = export::Options {
                selector: selector.clone(),
                group_by,
                replica_label,
                window: a.window,
                baseline: a.baseline.unwrap_or(a.window),
                hold: a.hold,
                runbook_url_base: a.runbook_url_base,
                profile: pack.settings.rules.profile.value.clone(),
                configured: pack.configured(),
                turned_off: pack.notes.off.len(),
            };
            let out = export::export(&set, &opts);
            for s in &out.skipped {
                eprintln!("vllm-diag: not exported: {}: {}", s.rule, s.reason);
            }
            for a in &out.alerts {
                for n in &a.notes {
                    eprintln!("vllm-diag: note: {}: {n}", a.rule);
                }
            }
            if out.alerts.is_empty() {
                return Err(Failure::Usage("no rule could be expressed in PromQL, so there is nothing to export (reasons above)".into()));
            }
            if let Some(range) = a.backtest.backtest {
                let ask = super::backtest::Ask {
                    range,
                    step: a.backtest.step,
                    hold: a.hold,
                    json: a.backtest.json,
                    group_by: opts.group_by.clone(),
                    inhibitions: export::inhibitions(&out, &set),
                };
                return super::backtest::run(&pack.settings, &out.alerts, &selector, &ask);
            }
            let text = match a.format {
                crate::cli::ExportFormat::Prometheus => export::to_yaml(&out, &set, &opts),
                crate::cli::ExportFormat::Alertmanager => export::to_alertmanager_yaml(&out, &set, &opts),
            };
            write_stdout(&text)?;
            Ok(exit::OK)
        }
        RulesCommand::Show { id, rules } => {
            let pack = pack(rules.into_settings(None), lookup, Lenient::Yes)?;
            let set = &pack.set;
            let text = doc::show(set, &id, &pack.notes).or_else(|| doc::show_signal(set, &id)).ok_or_else(|| {
                Failure::Usage(format!(
                    "no rule {id:?}.{} Known rules: {}. A signal's id shows that signal (e.g. kv_usage_max; `vllm-diag completions` knows them all)",
                    crate::text::did_you_mean(&id, set.rules.iter().map(|r| r.id.as_str()).chain(set.signals.keys().map(String::as_str))),
                    set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")
                ))
            })?;
            write_stdout(&text)?;
            Ok(exit::OK)
        }
    }
}

/// `rules list` for `mcp`: the text, and each rule's id, severity, title and whether the
/// configuration turns it off.
pub(super) fn list_for_agents(command_line: Settings, lookup: &Lookup) -> Result<(String, serde_json::Value), Failure> {
    let pack = pack(command_line, lookup, Lenient::Yes)?;
    let rules: Vec<serde_json::Value> = pack
        .set
        .rules
        .iter()
        .map(|r| serde_json::json!({ "id": r.id, "severity": r.severity.as_str(), "title": r.title, "off": pack.notes.off.contains_key(&r.id) }))
        .collect();
    Ok((doc::list(&pack.set, &pack.notes), serde_json::json!({ "rules": rules })))
}

/// `rules show ID` for `mcp`.
pub(super) fn show_for_agents(command_line: Settings, lookup: &Lookup, id: &str) -> Result<String, Failure> {
    let pack = pack(command_line, lookup, Lenient::Yes)?;
    let set = &pack.set;
    doc::show(set, id, &pack.notes).ok_or_else(|| {
        Failure::Usage(format!(
            "rules_show: argument \"id\": no rule {id:?}.{} Known rules: {}",
            crate::text::did_you_mean(id, set.rules.iter().map(|r| r.id.as_str())),
            set.rules.iter().map(|r| r.id.as_str()).collect::<Vec<_>>().join(", ")
        ))
    })
}

/// Whether a configuration file that cannot be used is warned about (and left out) or an error.
#[derive(Clone, Copy, PartialEq)]
enum Lenient {
    Yes,
    No,
}

/// The pack, its thresholds as in force, every rule still in it.
struct Pack {
    set: RuleSet,
    /// What the configuration changed, and where.
    notes: doc::Notes,
    settings: Settings,
}

impl Pack {
    /// What the configuration file changed, one item per kind, for `rules export`'s header.
    fn configured(&self) -> Vec<String> {
        let mut out = Vec::new();
        let set_by_file: Vec<String> =
            self.settings.rules.thresholds.iter().map(|t| format!("{} = {} ({})", t.name, t.written, origin_text(&t.origin))).collect();
        if !set_by_file.is_empty() {
            out.push(format!("thresholds {}", set_by_file.join(", ")));
        }
        if !self.notes.off.is_empty() {
            let place = origin_text(&self.settings.rules.off.origin);
            out.push(format!("rules turned off ({place}): {}", self.notes.off.keys().cloned().collect::<Vec<_>>().join(", ")));
        }
        out
    }

    /// The pack as explain runs it: without the rules the configuration turns off.
    fn in_force(&self) -> RuleSet {
        let mut set = self.set.clone();
        self.settings.rules.apply_to_rules(&mut set);
        set
    }
}

/// The rule pack the command line and the configuration file describe (see the module's text).
fn pack(command_line: Settings, lookup: &Lookup, lenient: Lenient) -> Result<Pack, Failure> {
    let settings = match build(command_line.clone(), lookup, Mode::Show).and_then(|s| rules_dir_exists(&s.rules.dir).map(|()| s)) {
        Ok(s) => s,
        // A rule file that does not load is an error whoever names it.
        Err(ConfigError::Rules(e)) => return Err(Failure::Rules(e)),
        Err(e) if lenient == Lenient::Yes => {
            eprintln!("vllm-diag: warning: {e}; shown without the configuration file (explain would stop here)");
            command_line
        }
        Err(e) => return Err(e.into()),
    };
    let mut set = load_with_overrides(settings.rules.dir.as_deref())?;
    let mut notes = doc::Notes::default();
    if let Some(p) = settings.rules.profile.as_deref() {
        set.apply_profile(p).map_err(Failure::Usage)?;
        let by = format!("profile {p} ({})", origin_text(&settings.rules.profile.origin));
        for name in set.profiles.get(p).map(|p| p.thresholds.keys()).into_iter().flatten() {
            notes.thresholds.insert(name.clone(), by.clone());
        }
    }
    for t in &settings.rules.thresholds {
        set.thresholds.insert(t.name.clone(), t.number);
        notes.thresholds.insert(t.name.clone(), origin_text(&t.origin));
    }
    if let Some(off) = settings.rules.off.as_ref() {
        let place = origin_text(&settings.rules.off.origin);
        notes.off.extend(off.iter().map(|id| (id.clone(), place.clone())));
    }
    Ok(Pack { set, notes, settings })
}
