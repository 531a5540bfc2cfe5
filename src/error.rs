//! What can stop a run, and the exit code each maps to (documented in `--help` and docs/output.md).

/// Exit codes: a public contract for CI.
pub mod exit {
    pub const OK: u8 = crate::report::EXIT_OK;
    pub const FINDINGS: u8 = crate::report::EXIT_FINDINGS;
    pub const USAGE: u8 = 2;
    pub const NO_DATA: u8 = crate::report::EXIT_NO_DATA;
}

#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// A flag or argument is wrong.
    #[error("{0}")]
    Usage(String),
    /// A rule file is wrong.
    #[error("rule file error: {0}")]
    Rules(#[from] crate::rules::RuleError),
    /// A recording cannot be read or written.
    #[error("{0}")]
    Recording(String),
    /// The data source cannot be reached or answered with an error for everything.
    #[error("{0}")]
    Source(String),
    /// The source answered but holds no vLLM data for the window, or nothing could be evaluated.
    #[error("{0}")]
    NoData(String),
    /// Writing the output failed.
    #[error("cannot write the output: {0}")]
    Output(String),
}

impl Failure {
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage(_) | Failure::Rules(_) | Failure::Recording(_) | Failure::Output(_) => exit::USAGE,
            Failure::Source(_) | Failure::NoData(_) => exit::NO_DATA,
        }
    }
}
