//! A finding's next steps as data, and the one place they become words.
//!
//! A step is either still to be done by a person (`open`: the rule file's words, or an action a
//! stage decided from its numbers, such as starting with the change the finding began after) or
//! already answered by the metrics (`answered`: a rule step that says which signal answers it, read
//! against its baseline). Every format prints [`Step::text`]; the JSON carries each step's words in
//! `steps` (unchanged for consumers of schema 1) and its data in `step_detail`.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize};

use super::{ColdStart, Event, LimitKind};
use crate::units::{format_value, sig};

/// How far a signal must move against its baseline for a step's question to be answered "it
/// changed": a fifth, either way. Closer than that is "unchanged".
pub const CHANGED: f64 = 1.2;

/// One step of a finding's runbook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    /// A step of the rule's runbook that no metric answered here: the rule file's words.
    Rule {
        ask: String,
        /// The engine flag the step proposes to change, as the rule file names it (`--max-num-seqs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lever: Option<String>,
        /// What answers the step once the run has read it (the binding limit, the per-replica
        /// breakdown); a finishing step turns it into an answer, or leaves the step asked.
        #[serde(skip)]
        awaits: Option<Awaits>,
    },
    /// A step of the rule's runbook the metrics answered.
    Answered(Answered),
    /// A step of the rule's runbook answered by which limit held the model's requests back.
    Bound(BoundAnswer),
    /// A step of the rule's runbook answered by the per-replica breakdown: how evenly the model's
    /// replicas serve.
    Spread(SpreadAnswer),
    /// Start with the change the finding began after.
    Change { event: Event },
    /// Every replica that was slow after a start warmed up in time: nothing to roll back.
    WarmedUp { replicas: Vec<String> },
    /// A replica stayed slow after a start for longer than a warm-up: look at what the start changed.
    NotColdStart { start: ColdStart },
    /// One replica holds a larger batch than its peers: balance the load.
    Balance { replica: String, running: f64, peers_running: f64 },
    /// Every replica that busy: scale out rather than take the replica away.
    Scale,
    /// One replica is held by a lower `--max-num-seqs` than its peers.
    AlignFlag { replica: String, cap: f64, peers: f64, peers_capped: bool },
    /// Compare the replicas' launch arguments for any other difference.
    CompareLaunchArgs,
}

/// A rule step answered by a signal read over the window and the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answered {
    /// The rule file's question, as it would have read unanswered.
    pub ask: String,
    pub signal: String,
    /// The signal's title (`Running requests (avg)`).
    pub title: String,
    pub unit: String,
    #[serde(with = "crate::report::opt_f64")]
    pub value: Option<f64>,
    #[serde(with = "crate::report::opt_f64")]
    pub baseline: Option<f64>,
    pub verdict: StepVerdict,
    /// What the verdict means for this finding, in the rule file's words (absent where the rule
    /// gives none for this verdict).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
}

/// What a rule step waits for from the run before it can be answered: the rule file's choice of
/// answer, and what each answer means for the finding in its words.
#[derive(Debug, Clone, PartialEq)]
pub enum Awaits {
    /// Which limit bound the finding's model: confirmed when it is one of `held_by`.
    Binding { held_by: Vec<LimitKind>, if_held: Option<String>, if_not_held: Option<String> },
    /// How evenly the model's replicas serve.
    Replicas { if_even: Option<String>, if_uneven: Option<String> },
}

/// A rule step answered by the limit that held the finding's model back over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundAnswer {
    /// The rule file's question, as it would have read unanswered.
    pub ask: String,
    pub limit: LimitKind,
    /// The share of the window's steps `limit` held.
    pub share: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typical: Option<super::BindingState>,
    /// Whether `limit` is one the step asks about (the rule's `held_by`).
    pub confirmed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
}

/// Replicas serve evenly when the busiest serves at most this many times what the least busy does.
pub const EVEN_SPREAD: f64 = 1.5;

/// What a replica's share is measured in: generated tokens per second where every replica's was
/// read, otherwise its running batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpreadMeasure {
    GenerationTokens,
    Running,
}

/// A rule step answered by the per-replica breakdown of the finding's model (medians over the
/// window).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpreadAnswer {
    pub ask: String,
    /// How many replicas of the model reported over the window.
    pub replicas: usize,
    pub measure: SpreadMeasure,
    /// The least and the most any one replica served.
    pub low: f64,
    pub high: f64,
    /// The replica that served the most, where the spread is uneven.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busiest: Option<String>,
    /// Whether the busiest serves at most [`EVEN_SPREAD`] times the least busy.
    pub even: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meaning: Option<String>,
}

/// What the data said about a step's question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepVerdict {
    /// The signal rose at least [`CHANGED`] times its baseline.
    Grew,
    /// It fell to at most 1/[`CHANGED`] of its baseline.
    Fell,
    /// Within a fifth of its baseline.
    Unchanged,
    /// The step is about something the window holds none of (an error class at 0%).
    None,
}

impl StepVerdict {
    /// The verdict of a value against its baseline; `None` (no verdict) when either is missing or
    /// not a finite number.
    pub fn of(value: Option<f64>, baseline: Option<f64>) -> Option<StepVerdict> {
        let (v, b) = (value.filter(|v| v.is_finite())?, baseline.filter(|b| b.is_finite())?);
        Some(if b <= 0.0 {
            if v > 0.0 {
                StepVerdict::Grew
            } else {
                StepVerdict::Unchanged
            }
        } else if v >= b * CHANGED {
            StepVerdict::Grew
        } else if v <= b / CHANGED {
            StepVerdict::Fell
        } else {
            StepVerdict::Unchanged
        })
    }
}

impl Step {
    /// A step asked as its words.
    pub fn ask(ask: impl Into<String>) -> Step {
        Step::Rule { ask: ask.into(), lever: None, awaits: None }
    }

    /// Whether a person still has to do it (every step but an answered one).
    pub fn is_open(&self) -> bool {
        !matches!(self, Step::Answered(_) | Step::Bound(_) | Step::Spread(_))
    }

    /// Whether the metrics found none of what the step is about (an error class at 0%): such
    /// answers are listed after the others.
    pub fn found_none(&self) -> bool {
        matches!(self, Step::Answered(a) if a.verdict == StepVerdict::None)
    }

    /// The engine flag the step proposes to change, where it is a rule step that names one.
    pub fn lever(&self) -> Option<&str> {
        match self {
            Step::Rule { lever, .. } => lever.as_deref(),
            _ => None,
        }
    }

    /// The step in words: what every format prints.
    pub fn text(&self) -> String {
        match self {
            Step::Rule { ask, .. } => ask.clone(),
            Step::Answered(a) => a.text(),
            Step::Bound(b) => b.text(),
            Step::Spread(r) => r.text(),
            Step::Change { event } => event.first_step(),
            Step::WarmedUp { replicas } => format!(
                "Nothing to roll back: {} warmed up. If every start costs users minutes of slow answers, warm a new server before it takes traffic (representative requests before its readiness probe passes) and keep its compilation caches (torch.compile, CUDA graphs) on a persistent volume.",
                replicas.join(", ")
            ),
            Step::NotColdStart { start } => {
                format!("{}: look at what the start changed (flags, image, node) before treating it as warm-up.", upper_first(&start.text))
            }
            Step::Balance { replica, running, peers_running } => format!(
                "Balance the load: {replica} holds {} running requests against {} on its peers. Check the load balancer's policy and weights (least outstanding requests, session affinity, prefix-aware routing) and whether its peers refuse work (a lower --max-num-seqs, failed readiness).",
                sig(*running),
                sig(*peers_running)
            ),
            Step::Scale => "Or scale: where every replica is this busy, add replicas until the batch each one decodes meets the latency you need. Taking this replica out of service would move its batch onto its peers, which would slow the same way.".into(),
            Step::AlignFlag { replica, cap, peers, peers_capped } => format!(
                "Align the flag: {replica} runs with --max-num-seqs {} and its peers with {}{}; deploy it with its peers' value (or, if the lower value was meant, size the fleet for it).",
                sig(*cap),
                if *peers_capped { "" } else { "at least " },
                sig(*peers)
            ),
            Step::CompareLaunchArgs => {
                "Compare the replicas' launch arguments (vLLM logs its engine arguments at start) or deployment manifests for any other difference.".into()
            }
        }
    }
}

impl Answered {
    /// `Running requests (avg) grew 1.91x, 38.7 → 73.9: the larger batch explains part of the
    /// slower decode.`
    pub fn text(&self) -> String {
        let f = |v: Option<f64>| v.map_or_else(|| "n/a".to_string(), |v| format_value(v, &self.unit));
        let (v, b) = (f(self.value), f(self.baseline));
        let ratio = match (self.value, self.baseline) {
            (Some(v), Some(b)) if b > 0.0 && v.is_finite() && b.is_finite() => Some(v / b),
            _ => None,
        };
        let head = match (self.verdict, ratio) {
            (StepVerdict::Grew, Some(r)) => format!("{} grew {}x, {b} → {v}", self.title, sig(r)),
            (StepVerdict::Grew, None) => format!("{} grew from {b} to {v}", self.title),
            (StepVerdict::Fell, Some(r)) => format!("{} fell to {}x, {b} → {v}", self.title, sig(r)),
            (StepVerdict::Fell, None) => format!("{} fell from {b} to {v}", self.title),
            (StepVerdict::Unchanged, _) => format!("{} unchanged, {b} → {v}", self.title),
            (StepVerdict::None, _) => format!("{} {v} in the window", self.title),
        };
        match &self.meaning {
            Some(m) => format!("{head}: {}.", m.trim_end_matches('.')),
            None => format!("{head}."),
        }
    }
}

impl BoundAnswer {
    /// `Bound by max_num_seqs for 100% of the window; a typical step: 4 of 4 running, KV at 13%,
    /// 4 waiting: requests wait for a free slot, not for a slower engine.`
    pub fn text(&self) -> String {
        let head = super::words::binding_words(self.limit, self.share, self.typical.as_ref());
        match &self.meaning {
            Some(m) => format!("{head}: {}.", m.trim_end_matches('.')),
            None => format!("{head}."),
        }
    }
}

impl SpreadAnswer {
    /// `The 3 replicas each serve 410 to 450 generated tokens/s: ...`, or for one replica, that
    /// there is no peer to compare with.
    pub fn text(&self) -> String {
        let what = |v: f64| match self.measure {
            SpreadMeasure::GenerationTokens => format!("{} generated tokens/s", sig(v)),
            SpreadMeasure::Running => format!("{} running requests", sig(v)),
        };
        let head = if self.replicas == 1 {
            format!("One replica serves the model ({}): it has no peer to share its load with", what(self.high))
        } else if self.even {
            format!("The {} replicas each serve {} to {}, within {}x of each other", self.replicas, sig(self.low), what(self.high), sig(EVEN_SPREAD))
        } else {
            let ratio = if self.low > 0.0 { format!(", {}x the least busy", sig(self.high / self.low)) } else { String::new() };
            let busiest = self.busiest.as_deref().map(|r| format!(" on {r}")).unwrap_or_default();
            format!("The {} replicas serve {} to {}: the most{busiest}{ratio}", self.replicas, sig(self.low), what(self.high))
        };
        // A single replica's answer is its own; the rule's words are about shares between peers.
        match self.meaning.as_ref().filter(|_| self.replicas > 1) {
            Some(m) => format!("{head}: {}.", m.trim_end_matches('.')),
            None => format!("{head}."),
        }
    }
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// A finding's steps, in order. In the JSON they are two fields side by side: `steps`, each step's
/// words, and `step_detail`, each step's data with `state` (`answered` or `open`) and its words.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Steps(pub Vec<Step>);

impl std::ops::Deref for Steps {
    type Target = Vec<Step>;
    fn deref(&self) -> &Vec<Step> {
        &self.0
    }
}

impl std::ops::DerefMut for Steps {
    fn deref_mut(&mut self) -> &mut Vec<Step> {
        &mut self.0
    }
}

impl From<Vec<Step>> for Steps {
    fn from(v: Vec<Step>) -> Steps {
        Steps(v)
    }
}

impl Steps {
    /// The steps a person still has to do, in order.
    pub fn open(&self) -> impl Iterator<Item = &Step> {
        self.0.iter().filter(|s| s.is_open())
    }

    /// The steps the metrics answered, in order.
    pub fn answered(&self) -> impl Iterator<Item = &Answered> {
        self.0.iter().filter_map(|s| match s {
            Step::Answered(a) => Some(a),
            _ => None,
        })
    }

    /// The answered steps as printed: the limit that bound the model first (it says why requests
    /// waited), then what the data showed in the rule's order, what it found none of last.
    pub fn checked(&self) -> impl Iterator<Item = &Step> {
        let answered = || self.0.iter().filter(|s| !s.is_open());
        let bound = |s: &&Step| matches!(s, Step::Bound(_));
        answered().filter(bound).chain(answered().filter(move |s| !bound(s) && !s.found_none())).chain(answered().filter(|s| s.found_none()))
    }

    /// Whether one of the steps is answered by the finding's binding limit (which it then words
    /// whole).
    pub fn answered_by_binding(&self) -> bool {
        self.0.iter().any(|s| matches!(s, Step::Bound(_)))
    }
}

#[derive(Serialize)]
struct StepOut<'a> {
    state: &'static str,
    text: String,
    #[serde(flatten)]
    step: &'a Step,
}

impl Serialize for Steps {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("steps", &self.0.iter().map(Step::text).collect::<Vec<_>>())?;
        let detail: Vec<StepOut> =
            self.0.iter().map(|st| StepOut { state: if st.is_open() { "open" } else { "answered" }, text: st.text(), step: st }).collect();
        m.serialize_entry("step_detail", &detail)?;
        m.end()
    }
}

#[derive(Deserialize)]
struct StepIn {
    #[serde(flatten)]
    step: Step,
}

#[derive(Deserialize)]
struct StepsIn {
    #[serde(default)]
    steps: Vec<String>,
    #[serde(default)]
    step_detail: Option<Vec<StepIn>>,
}

impl<'de> Deserialize<'de> for Steps {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Steps, D::Error> {
        let raw = StepsIn::deserialize(d)?;
        Ok(Steps(match raw.step_detail {
            Some(detail) => detail.into_iter().map(|s| s.step).collect(),
            // A report written before steps carried their data: each step as the words it had.
            None => raw.steps.into_iter().map(Step::ask).collect(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(value: f64, baseline: f64, meaning: Option<&str>) -> Answered {
        Answered {
            ask: "Check whether the number of running requests grew.".into(),
            signal: "running_avg".into(),
            title: "Running requests (avg)".into(),
            unit: "count".into(),
            value: Some(value),
            baseline: Some(baseline),
            verdict: StepVerdict::of(Some(value), Some(baseline)).unwrap(),
            meaning: meaning.map(str::to_string),
        }
    }

    #[test]
    fn an_answer_says_the_change_with_its_numbers() {
        let a = answered(73.9, 38.7, Some("the larger batch explains part of the slower decode"));
        assert_eq!(a.verdict, StepVerdict::Grew);
        assert_eq!(a.text(), "Running requests (avg) grew 1.91x, 38.7 → 73.9: the larger batch explains part of the slower decode.");
        let same = answered(776.0, 767.0, None);
        assert_eq!(same.verdict, StepVerdict::Unchanged);
        assert_eq!(same.text(), "Running requests (avg) unchanged, 767 → 776.");
        assert_eq!(answered(10.0, 20.0, None).verdict, StepVerdict::Fell);
    }

    #[test]
    fn no_verdict_without_both_numbers() {
        assert_eq!(StepVerdict::of(None, Some(1.0)), None);
        assert_eq!(StepVerdict::of(Some(1.0), Some(f64::NAN)), None);
        assert_eq!(StepVerdict::of(Some(0.0), Some(0.0)), Some(StepVerdict::Unchanged));
        assert_eq!(StepVerdict::of(Some(0.2), Some(0.0)), Some(StepVerdict::Grew));
    }

    #[test]
    fn steps_round_trip_through_their_two_json_fields() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Holder {
            #[serde(flatten)]
            steps: Steps,
        }
        let h = Holder { steps: Steps(vec![Step::ask("Look at the GPUs."), Step::Answered(answered(73.9, 38.7, None)), Step::Scale]) };
        let json = serde_json::to_value(&h).unwrap();
        assert_eq!(json["steps"][1], "Running requests (avg) grew 1.91x, 38.7 → 73.9.");
        assert_eq!(json["step_detail"][0]["state"], "open");
        assert_eq!(json["step_detail"][1]["state"], "answered");
        assert_eq!(json["step_detail"][1]["verdict"], "grew");
        assert_eq!(json["step_detail"][1]["signal"], "running_avg");
        let back: Holder = serde_json::from_value(json).unwrap();
        assert_eq!(back, h);
        let old: Holder = serde_json::from_value(serde_json::json!({"steps": ["Do this."]})).unwrap();
        assert_eq!(old.steps.0, vec![Step::ask("Do this.")]);
    }
}
