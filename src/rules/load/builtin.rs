//! The built-in pack, compiled into the binary and parsed once per process, and `--rules DIR` over it.

use std::path::Path;
use std::sync::OnceLock;

use super::{load_str, validate, RuleError, RuleSet};

/// The built-in rule pack, in load order.
pub const BUILTIN: &[(&str, &str)] = &[
    ("rules/signals.toml", include_str!("../../../rules/signals.toml")),
    ("rules/thresholds.toml", include_str!("../../../rules/thresholds.toml")),
    ("rules/profiles.toml", include_str!("../../../rules/profiles.toml")),
    ("rules/latency.toml", include_str!("../../../rules/latency.toml")),
    ("rules/capacity.toml", include_str!("../../../rules/capacity.toml")),
    ("rules/errors.toml", include_str!("../../../rules/errors.toml")),
    ("rules/scheduler.toml", include_str!("../../../rules/scheduler.toml")),
    ("rules/workload.toml", include_str!("../../../rules/workload.toml")),
    ("rules/fleet.toml", include_str!("../../../rules/fleet.toml")),
    ("rules/gpu.toml", include_str!("../../../rules/gpu.toml")),
    ("rules/router.toml", include_str!("../../../rules/router.toml")),
    ("rules/slo.toml", include_str!("../../../rules/slo.toml")),
];

/// The built-in pack alone.
pub fn load_builtin() -> Result<RuleSet, RuleError> {
    load_with_overrides(None)
}

/// The built-in pack as parsed, once per process: by [`preload`]'s thread if it got there first,
/// else by whoever asks first (a second caller waits for the first one's result).
pub(super) static PARSED_BUILTIN: OnceLock<Result<RuleSet, RuleError>> = OnceLock::new();

pub(super) fn parse_builtin() -> Result<RuleSet, RuleError> {
    let mut set = RuleSet::default();
    for (name, src) in BUILTIN {
        load_str(&mut set, name, src)?;
    }
    Ok(set)
}

/// Start parsing the built-in pack on a thread of its own, so that it overlaps what the process
/// does before it needs the rules (parsing the command line, reading the configuration, building
/// the HTTP client): about a millisecond off every run's start on a machine with a spare core. A
/// process that never asks for the rules loses nothing but that thread's work; if the thread
/// cannot be started, the first caller parses the pack itself.
pub fn preload() {
    let _ = std::thread::Builder::new().name("rules".into()).spawn(|| PARSED_BUILTIN.get_or_init(parse_builtin).is_ok());
}

/// The built-in pack, then every `*.toml` in `dir` (sorted by name).
pub fn load_with_overrides(dir: Option<&Path>) -> Result<RuleSet, RuleError> {
    let mut set = PARSED_BUILTIN.get_or_init(parse_builtin).clone()?;
    if let Some(dir) = dir {
        let shown = dir.display().to_string();
        let io_err = |e: std::io::Error| RuleError {
            file: shown.clone(),
            line: 0,
            column: 0,
            message: format!("cannot read the rules directory: {e} (--rules takes a directory of *.toml files)"),
        };
        let mut files: Vec<_> =
            std::fs::read_dir(dir).map_err(io_err)?.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
        files.sort();
        if files.is_empty() {
            return Err(RuleError { file: shown, line: 0, column: 0, message: "no *.toml rule files in this directory (--rules)".into() });
        }
        for f in files {
            let name = f.display().to_string();
            let src = std::fs::read_to_string(&f).map_err(|e| RuleError { file: name.clone(), line: 0, column: 0, message: format!("cannot read: {e}") })?;
            load_str(&mut set, &name, &src)?;
        }
        super::resolve_routes(&mut set)?;
    }
    validate(&set)?;
    Ok(set)
}
