//! Rules: declarative runbook knowledge, loaded from TOML and evaluated over signals.

pub mod doc;
pub mod eval;
pub mod export;
pub mod expr;
pub mod load;

pub use load::{load_builtin, load_with_overrides, preload, threshold_uses, unit_misfit, RuleDef, RuleError, RuleSet};
