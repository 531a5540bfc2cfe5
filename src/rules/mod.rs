//! Rules: declarative runbook knowledge, loaded from TOML and evaluated over signals.

pub mod backtest;
pub mod doc;
pub mod eval;
pub mod export;
pub mod expr;
pub mod load;
pub mod steps;

/// The threshold naming the longest warm-up after a replica (re)starts (`explain::cold_start`).
pub const COLD_START_WARM_UP: &str = "cold_start_warm_up";
/// The thresholds of what else moved (`explain::moved`): the smallest factor past the baseline's
/// median, the fewest robust standard deviations, the shortest stretch.
pub const MOVED_RATIO: &str = "moved_ratio";
pub const MOVED_Z: &str = "moved_z";
pub const MOVED_DURATION: &str = "moved_duration";
/// The latency profile the pack's own thresholds are (rules/thresholds.toml holds its targets):
/// the one in force when `--profile` names none.
pub const DEFAULT_PROFILE: &str = "chat";
pub use load::{
    load_builtin, load_with_overrides, preload, range_misfit, threshold_uses, unit_misfit, ColdStartReach, CorrelationDef, RuleDef, RuleError, RuleSet,
    RuleStep, BY_BINDING, BY_REPLICAS,
};
