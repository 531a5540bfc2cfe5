//! Typed options for a run, built once from the command line (and later a config file).

use serde::{Deserialize, Serialize};

use crate::report::TimeRange;

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
}
