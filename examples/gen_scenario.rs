//! Write a scenario's OpenMetrics to stdout, for humans and benchmarks:
//!
//! ```text
//! cargo run --example gen_scenario -- fixtures/scenarios/kv-cache-pressure.toml > kv.om
//! promtool tsdb create-blocks-from openmetrics kv.om ./data
//! ```
//!
//! The timeline (baseline, window, incident onset) and every replica's instance, pod and node go
//! to stderr, so the numbers and names can be looked up.

use std::io::Write;
use std::process::ExitCode;

use vllm_diag_sim::{generate_openmetrics, ScenarioSpec};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!("usage: gen_scenario <fixtures/scenarios/NAME.toml>  (OpenMetrics goes to stdout)");
        return ExitCode::from(2);
    };
    let spec = match ScenarioSpec::load(&path) {
        Ok(spec) => spec,
        Err(e) => {
            eprintln!("gen_scenario: {e}");
            return ExitCode::from(2);
        }
    };
    eprintln!(
        "{}: baseline {} .. {}, window {} .. {} ({} samples per series, {} replicas)",
        spec.name,
        spec.baseline_start().to_rfc3339(),
        spec.baseline_end().to_rfc3339(),
        spec.window_start().to_rfc3339(),
        spec.window_end().to_rfc3339(),
        spec.sample_count(),
        spec.replica_count(),
    );
    if let (Some(incident), Some(onset)) = (&spec.incident, spec.incident_onset()) {
        let replica = spec.instance_of(&incident.model, incident.replica).unwrap_or_default();
        eprintln!("incident {} on {} from {} (replica {} is {replica})", incident.kind, incident.model, onset.to_rfc3339(), incident.replica);
    }
    for r in spec.replicas() {
        eprintln!("  {} #{}: instance {} pod {} node {}", r.model, r.index, r.instance, r.pod, r.node);
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match generate_openmetrics(&spec, &mut out).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen_scenario: cannot write: {e}");
            ExitCode::from(1)
        }
    }
}
