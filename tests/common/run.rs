//! Running the vllm-diag binary from an integration test, and the small helpers around it.
//!
//! Every run starts without the environment variables vllm-diag reads for where and how to connect,
//! so a developer's shell never changes what a test sees; a test that wants one sets it explicitly.

use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use serde_json::Value;
use vllm_diag_sim::ScenarioSpec;

/// The variables vllm-diag reads for its source and credentials: removed from every run.
const CONNECTION_ENV: [&str; 3] = ["VLLM_DIAG_PROMETHEUS_URL", "VLLM_DIAG_BEARER_TOKEN", "VLLM_DIAG_BASIC_AUTH_PASSWORD"];

/// What one run of vllm-diag gave back.
pub struct Run {
    /// The exit code, -1 when a signal ended the process.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The exit code and the output (as text) of a finished process.
    pub fn from_output(out: &Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// stdout as JSON (the report of `--format json`). Panics with the exit code, stdout and stderr
    /// when it is not JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not a JSON report ({e}); exit {}\nstdout:\n{}\nstderr:\n{}", self.code, self.stdout, self.stderr))
    }
}

/// The vllm-diag binary built by cargo, without the connection variables in its environment.
pub fn vllm_diag() -> Command {
    let mut cmd = Command::cargo_bin("vllm-diag").unwrap_or_else(|e| panic!("binary: {e}"));
    for var in CONNECTION_ENV {
        cmd.env_remove(var);
    }
    cmd
}

/// Run a command from [`vllm_diag`] (perhaps with more set on it) with `args`, and the variables
/// `env` added to its environment; wait for it to finish.
pub fn run_command(mut cmd: Command, args: &[&str], env: &[(&str, &str)]) -> Run {
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.args(args).output().unwrap_or_else(|e| panic!("run vllm-diag: {e}"));
    Run::from_output(&out)
}

/// Run vllm-diag with `args` and the variables `env` (and no connection variables but those).
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Run {
    run_command(vllm_diag(), args, env)
}

/// `explain --prometheus <url> --at <at>` followed by `extra`: the arguments that diagnose one
/// server at one time.
pub fn explain_args<'a>(url: &'a str, at: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    [&["explain", "--prometheus", url, "--at", at][..], extra].concat()
}

/// Run `explain --prometheus <url> --at <at> --window 30m --format json`, then `extra`: the JSON
/// diagnosis of the half hour before `at`.
pub fn explain_json(url: &str, at: &str, extra: &[&str]) -> Run {
    run(&explain_args(url, at, &[&["--window", "30m", "--format", "json"][..], extra].concat()), &[])
}

/// The end of a scenario's incident window in the form `--at` takes (RFC 3339, whole seconds, UTC).
pub fn at_window_end(spec: &ScenarioSpec) -> String {
    spec.window_end().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Write `text` to `<dir>/<name>` (making the folders `name` goes through) and return its path.
pub fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    if let Some(parent) = p.parent() {
        std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir {}: {e}", parent.display()));
    }
    std::fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    p
}

/// A path as a command-line argument (test paths are UTF-8; anything else becomes "").
pub fn path_arg(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}
