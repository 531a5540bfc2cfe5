//! What a rule pack is once read: rules, their conditions, caveats and stand-ins, signals,
//! thresholds with where they were written, profiles, and the error that names a file and line.

use std::collections::BTreeMap;

use crate::report::Severity;
use crate::rules::expr::Expr;
use crate::signals::SignalDef;

/// A rule file that cannot be used, at its line and column (0 when the problem is the file or
/// directory as a whole: not shown then).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", position(*line, *column))]
pub struct RuleError {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

pub(super) fn position(line: usize, column: usize) -> String {
    match (line, column) {
        (0, _) => String::new(),
        (l, 0) => format!(":{l}"),
        (l, c) => format!(":{l}:{c}"),
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub text: String,
    pub expr: Expr,
    /// Where its text starts in its file (line, column), for errors found once every file is
    /// merged; (0, 0) when it was not read from a file.
    pub at: (usize, usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct RuleDef {
    pub id: String,
    pub title: String,
    pub severity: Severity,
    /// One sentence shown with a finding: what it means.
    pub summary: String,
    /// What the rule detects and how (for `rules show`).
    pub description: String,
    /// Why it matters.
    pub why: String,
    /// Conditions that must all hold.
    pub when: Vec<Condition>,
    /// Signals shown as context beside the ones the conditions name.
    pub evidence: Vec<String>,
    /// Rules this one explains better when both match the same scope.
    pub supersedes: Vec<String>,
    pub steps: Vec<RuleStep>,
    pub references: Vec<String>,
    /// A computed recommendation to attach (`max_num_seqs`, `chunked_prefill`).
    pub recommend: Option<String>,
    /// More cards its evidence sizes, after `recommend`'s, as alternatives (`kv_blocks`,
    /// `replicas_for_kv`, `more_seqs`, `replicas_for_queue`, `step_budget`: [`crate::recommend::CARDS`]).
    pub also_size: Vec<String>,
    /// The finding lists the levers its evidence rules out ("won't help": more KV memory where the
    /// cache had room, a lower max_num_seqs where the cap did not bind, a quantised KV cache for a
    /// queue that did not wait for blocks).
    pub rules_out_levers: bool,
    /// How a replica's cold start explains this rule's finding: `replica` (the finding names the
    /// replica that started), `model` (a model-wide finding, explained when the model's other
    /// replicas stayed at their level). None: a start never explains it away.
    pub cold_start: Option<ColdStartReach>,
    /// The finding may be about one replica that differs from its peers: why it differs (load,
    /// config, hardware) is read, and its steps and card follow from it.
    pub replica_cause: bool,
    /// How to decide when the primary signals are missing from the data (histograms relabelled away,
    /// gauge-only collectors): other conditions over the signals that do exist.
    pub stand_in: Option<StandIn>,
    /// One of the runbook's core checks: an all-clear in which a core rule could not be evaluated
    /// is not an all-clear.
    pub core: bool,
    /// Also decided over the window's last minutes: where the whole window does not meet the
    /// conditions, they are evaluated again with each signal that has a `recent` reading read
    /// there instead, against the same baseline, so an episode that began late in a long window
    /// is not averaged away (see [`RuleSet::recent_pairs`]).
    pub recent: bool,
    /// Where those minutes are worth reading (`[rule.recent] when`): a condition over the whole
    /// window, checked for each scope where the rule did not hold there (slow-decode: P95 ITL up a
    /// tenth). Without one (`recent = true`) they are read for every such scope.
    pub recent_when: Option<Condition>,
    /// What the metrics cannot show about this rule's problem, said when the rule is judged healthy
    /// and the caveat's condition holds (an aborted share of 0 on an engine that counts no client
    /// disconnect), so that "healthy" is not read as more than the data says.
    pub caveat: Option<Caveat>,
    /// `file:line` of the declaration.
    pub origin: String,
}

/// What a cold start explains of a rule's finding (`cold_start = "replica"` or `"model"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColdStartReach {
    /// A finding that names the replica that started.
    Replica,
    /// A model-wide finding, when the model's other replicas stayed at their baseline level.
    Model,
}

/// One step of a rule's runbook as its file writes it: the words, and where the metrics can
/// answer it, which signal does and what each answer means for the finding.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleStep {
    pub text: String,
    /// The signal whose change against its baseline answers the step (`running_avg` for "did the
    /// running batch grow?"). Where both readings exist the step becomes a checked statement with
    /// its numbers instead of a question.
    pub answered_by: Option<String>,
    /// What the answer means for the finding when the signal grew, fell or stayed within a fifth
    /// of its baseline (`if_grew`, `if_fell`, `if_unchanged`).
    pub if_grew: Option<String>,
    pub if_fell: Option<String>,
    pub if_unchanged: Option<String>,
    /// With `answered_by = "binding"`: the limits (`max-num-seqs`, `kv-cache`, ...) whose binding
    /// confirms the step, and what it means when one of them bound or none did.
    pub held_by: Vec<String>,
    pub if_held: Option<String>,
    pub if_not_held: Option<String>,
    /// With `answered_by = "replicas"`: what it means when the model's replicas serve evenly, or not.
    pub if_even: Option<String>,
    pub if_uneven: Option<String>,
    /// The engine flag the step proposes to change (`--max-num-seqs`): a step whose lever the
    /// evidence rules out is not given.
    pub lever: Option<String>,
    /// The signal whose value orders this step among the rule's other `rank_by` steps, largest
    /// first (the error class that dominates comes first); a step whose signal reads 0 is answered
    /// "none", not asked.
    pub rank_by: Option<String>,
}

/// `answered_by = "binding"`: the step is answered by which limit held the model back.
pub const BY_BINDING: &str = "binding";
/// `answered_by = "replicas"`: the step is answered by the per-replica breakdown.
pub const BY_REPLICAS: &str = "replicas";

impl RuleStep {
    /// The signals the step reads (not the run-wide answers `binding` and `replicas`).
    pub fn signals(&self) -> impl Iterator<Item = &String> {
        self.answered_by.iter().filter(|s| !matches!(s.as_str(), BY_BINDING | BY_REPLICAS)).chain(self.rank_by.iter())
    }
}

/// A blind spot of a rule: `text` is said (as a warning) for each scope the rule found healthy
/// while `when` held there.
#[derive(Debug, Clone, PartialEq)]
pub struct Caveat {
    pub when: Condition,
    pub text: String,
}

/// A rule's second way of deciding: used only when one of `missing` has no metric in the window
/// (never when a query failed or timed out), and then said in the finding.
#[derive(Debug, Clone, PartialEq)]
pub struct StandIn {
    /// Primary signals whose absence lets the stand-in decide.
    pub missing: Vec<String>,
    /// Conditions that must all hold, over signals that exist where the primary ones do not.
    pub when: Vec<Condition>,
}

impl RuleDef {
    /// Every condition the rule holds: `when`, the stand-in's, the caveat's and `[rule.recent]`'s.
    pub fn all_conditions(&self) -> impl Iterator<Item = &Condition> {
        self.when.iter().chain(self.stand_in.iter().flat_map(|s| &s.when)).chain(self.caveat.iter().map(|c| &c.when)).chain(self.recent_when.iter())
    }

    /// Every signal the rule reads: the conditions' first, then the extra evidence, without repeats.
    pub fn signals(&self) -> Vec<String> {
        let mut out = self.primary_signals();
        for s in self.stand_in_signals() {
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// The signals the stand-in conditions read (none without a stand-in).
    pub fn stand_in_signals(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in self.stand_in.iter().flat_map(|s| &s.when) {
            for cmp in c.expr.comparisons() {
                if !out.contains(&cmp.signal) {
                    out.push(cmp.signal.clone());
                }
            }
        }
        out
    }

    /// The signals of the conditions and the evidence, without the stand-in's.
    pub fn primary_signals(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for c in &self.when {
            for cmp in c.expr.comparisons() {
                if !out.contains(&cmp.signal) {
                    out.push(cmp.signal.clone());
                }
            }
        }
        for e in &self.evidence {
            if !out.contains(e) {
                out.push(e.clone());
            }
        }
        out
    }
}

/// Signals, thresholds and rules after merging every file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleSet {
    pub signals: BTreeMap<String, SignalDef>,
    pub thresholds: BTreeMap<String, f64>,
    /// Where each threshold was last set and how it was written, for errors found once every file
    /// is in (a unit that does not fit its signals, a name nothing uses).
    pub threshold_origins: BTreeMap<String, Written>,
    /// In id order.
    pub rules: Vec<RuleDef>,
    /// Latency profiles by name: thresholds that replace the defaults when chosen.
    pub profiles: BTreeMap<String, Profile>,
    /// Named lists of HTTP routes (`[routes]`; `user`: the routes users call), which a signal's
    /// `match` names as `$routes.NAME`; a later file's list replaces an earlier one.
    pub routes: BTreeMap<String, Vec<String>>,
    /// The pairs of signals whose trends what else moved compares (`[[correlation]]`), cause first;
    /// a later file's pair of the same two signals replaces an earlier one.
    pub correlations: Vec<CorrelationDef>,
}

/// Two signals whose trends moving together means something (`[[correlation]]`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CorrelationDef {
    /// The signal taken as the cause (KV-cache usage) ...
    pub cause: String,
    /// ... and the one it would raise (P95 TTFT).
    pub effect: String,
    /// What their moving together means, as the reports say it.
    pub meaning: String,
    /// The cause's level at or under which it is healthy whatever moved with it (KV-cache usage
    /// under 60%): a cause there is never blamed. `None`: the cause must only have risen against
    /// its baseline.
    pub healthy_at_or_below: Option<f64>,
    /// Where it was declared (`rules/signals.toml:12`), for errors.
    pub origin: String,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    pub description: String,
    pub thresholds: BTreeMap<String, f64>,
    /// Where each threshold was set and how, for errors found once all files are in.
    pub origins: BTreeMap<String, Written>,
}

/// A threshold as written in a rule file: its text (`"3s"`, `0.9`) and where.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    pub text: String,
    pub file: String,
    pub line: usize,
    pub column: usize,
}

impl Written {
    pub(super) fn error(&self, message: String) -> RuleError {
        RuleError { file: self.file.clone(), line: self.line, column: self.column, message }
    }
}

impl RuleSet {
    pub fn rule(&self, id: &str) -> Option<&RuleDef> {
        self.rules.iter().find(|r| r.id == id)
    }

    /// The id of the signal the pack gives `role` to, if any.
    pub fn signal_for(&self, role: crate::signals::Role) -> Option<&str> {
        self.signals.values().find(|d| d.role == Some(role)).map(|d| d.id.as_str())
    }

    /// Each signal the rule reads (conditions and evidence) that has a reading over the window's
    /// last minutes, with that reading's id.
    pub fn recent_pairs(&self, rule: &RuleDef) -> Vec<(String, String)> {
        rule.primary_signals()
            .into_iter()
            .filter_map(|sig| {
                let recent = self.signals.get(&sig)?.recent.clone()?;
                Some((sig, recent))
            })
            .collect()
    }

    /// True when the rule is decided over the window's last minutes too, or when it explains
    /// better (supersedes) a rule that is: a finding of the last minutes alone is explained by it
    /// only if it holds there as well.
    pub fn reads_recent(&self, rule: &RuleDef) -> bool {
        rule.recent || rule.supersedes.iter().any(|s| self.rule(s).is_some_and(|r| r.recent))
    }

    /// The readings over the window's last minutes that a second reading needs: those of every
    /// rule with `recent = true` and of every rule that would absorb its findings
    /// ([`RuleSet::reads_recent`]), without the ones the rules read anyway.
    pub fn late_signals(&self) -> std::collections::BTreeSet<String> {
        let own: std::collections::BTreeSet<String> = self.rules.iter().flat_map(|r| r.signals()).collect();
        self.rules.iter().filter(|r| self.reads_recent(r)).flat_map(|r| self.recent_pairs(r)).map(|(_, recent)| recent).filter(|s| !own.contains(s)).collect()
    }
}

impl RuleSet {
    /// Replace the default thresholds with a profile's.
    pub fn apply_profile(&mut self, name: &str) -> Result<(), String> {
        let p = self
            .profiles
            .get(name)
            .ok_or_else(|| format!("--profile {name:?}: no such profile. Known profiles: {}", self.profiles.keys().cloned().collect::<Vec<_>>().join(", ")))?;
        for (k, v) in p.thresholds.clone() {
            self.thresholds.insert(k, v);
        }
        Ok(())
    }
}
