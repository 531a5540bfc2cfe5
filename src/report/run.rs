//! What a run is: the parameters that identify its data (stored in recordings so a replay asks the
//! same questions), and the warnings its stages collect.

use serde::{Deserialize, Serialize};

use super::*;

/// What identifies a diagnosis run's data: stored in recordings so a replay asks the same questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunParams {
    /// The window under diagnosis.
    pub window: TimeRange,
    /// The comparison window (same length, earlier).
    pub baseline: TimeRange,
    /// Extra label matchers as canonical PromQL (`job="vllm",namespace="prod"`), or empty.
    pub selector: String,
    /// Labels findings are grouped by (default `model_name`).
    pub group_by: Vec<String>,
    /// The label that tells a scope's replicas apart (default `instance`).
    #[serde(default = "default_replica_label")]
    pub replica_label: String,
}

/// The warnings a run collects as its stages find them (from the data source, with HTTP 200, and
/// from vllm-diag itself), in the order found. The report takes them once, at the end of the run:
/// [`Warnings::into_report`], each once, where it first appeared.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Warnings(Vec<String>);

impl Warnings {
    pub fn push(&mut self, warning: String) {
        self.0.push(warning);
    }

    /// For [`Report::warnings`]: each warning once, where it first appeared.
    pub fn into_report(self) -> Vec<String> {
        let mut seen = std::collections::BTreeSet::new();
        self.0.into_iter().filter(|w| seen.insert(w.clone())).collect()
    }

    /// Every warning in the order found, repeats kept.
    pub fn into_vec(self) -> Vec<String> {
        self.0
    }
}

impl Extend<String> for Warnings {
    fn extend<I: IntoIterator<Item = String>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

impl std::ops::Deref for Warnings {
    type Target = [String];
    fn deref(&self) -> &[String] {
        &self.0
    }
}
