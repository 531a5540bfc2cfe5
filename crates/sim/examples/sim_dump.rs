//! Write everything the generator produces into a directory, so two builds of the simulator can
//! be compared byte for byte (`cmp -r`, `diff -r`):
//!
//! ```text
//! cargo run -p vllm-diag-sim --example sim_dump -- OUT_DIR
//! ```
//!
//! It writes, into `OUT_DIR`:
//! - `scenarios/<name>.om` and `scenarios/<name>.truth`: every `fixtures/scenarios/*.toml`, its
//!   OpenMetrics text and its true events;
//! - `kinds/<kind>.om` and `kinds/<kind>.truth`: for every incident kind, a small fleet that offers
//!   what the kind needs (a second model beside it), generated with the kind on its first model;
//!   `kinds-v0/<kind>.om` the same for each kind that V0 can tell;
//! - `kinds.txt`: each kind's name, rule, near miss, needs and parameters, as the crate reads them.
//!
//! A refactor of the simulator that changes no output leaves the directory identical.

use std::fmt::Write as _;
use std::fs;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use vllm_diag_sim::{generate_openmetrics, IncidentKind, ScenarioSpec};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let (Some(out), None) = (args.next(), args.next()) else {
        eprintln!("usage: sim_dump OUT_DIR");
        return ExitCode::from(2);
    };
    match run(Path::new(&out)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sim_dump: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(out: &Path) -> Result<(), String> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/scenarios");
    let mut paths: Vec<PathBuf> = fs::read_dir(&fixtures)
        .map_err(|e| format!("{}: {e}", fixtures.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("toml"))
        .collect();
    paths.sort();
    for dir in ["scenarios", "kinds", "kinds-v0"] {
        fs::create_dir_all(out.join(dir)).map_err(|e| format!("{}: {e}", out.join(dir).display()))?;
    }
    for path in &paths {
        let spec = ScenarioSpec::load(path).map_err(|e| e.to_string())?;
        write(&spec, &out.join("scenarios"), &spec.name)?;
    }
    let mut table = String::new();
    for kind in IncidentKind::ALL {
        let _ = writeln!(
            table,
            "{kind}\n  rule {}\n  near_miss_of {:?}\n  named_by_a_rule {}\n  needs {:?}\n  params {:?}",
            kind.rule(),
            kind.near_miss_of(),
            kind.named_by_a_rule(),
            kind.needs(),
            kind.params()
        );
        let spec = ScenarioSpec::from_toml_str(&kind_spec(kind, "v1")).map_err(|e| format!("{kind}: {e}"))?;
        write(&spec, &out.join("kinds"), kind.as_str())?;
        if !kind.needs().v1 {
            let spec = ScenarioSpec::from_toml_str(&kind_spec(kind, "v0")).map_err(|e| format!("{kind} (v0): {e}"))?;
            write(&spec, &out.join("kinds-v0"), kind.as_str())?;
        }
    }
    fs::write(out.join("kinds.txt"), table).map_err(|e| e.to_string())?;
    eprintln!("sim_dump: {} scenarios, {} kinds into {}", paths.len(), IncidentKind::ALL.len(), out.display());
    Ok(())
}

fn write(spec: &ScenarioSpec, dir: &Path, name: &str) -> Result<(), String> {
    let path = dir.join(format!("{name}.om"));
    let file = fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut w = BufWriter::new(file);
    generate_openmetrics(spec, &mut w).and_then(|()| w.flush()).map_err(|e| format!("{}: {e}", path.display()))?;
    let truth: String = spec.true_events().iter().map(|e| format!("{e:?}\n")).collect();
    fs::write(dir.join(format!("{name}.truth")), truth).map_err(|e| e.to_string())
}

/// A fleet that offers everything `kind` needs on its first model, the kind on it.
fn kind_spec(kind: IncidentKind, metrics: &str) -> String {
    let n = kind.needs();
    let mut model = format!("name = \"m/a\"\nreplicas = {}\nrate = 2.0\n", n.min_replicas.max(3));
    if metrics == "v1" {
        model.push_str("preemption_detail = true\n");
    }
    if n.spec_decode {
        model.push_str("spec_decode = true\n");
    }
    if n.nixl {
        model.push_str("kv_connector = \"nixl\"\n");
    }
    if n.external_cache {
        model.push_str("kv_connector = \"lmcache\"\n");
    }
    if n.dcgm {
        model.push_str("dcgm = true\n");
    }
    if n.real_gpu {
        model.push_str("gpu = \"h200\"\n");
    }
    if n.waiting_by_reason {
        model.push_str("waiting_by_reason = true\n");
    }
    if n.data_parallel {
        model.push_str("dp_ranks = 2\n");
    }
    if n.router_pd {
        model.push_str("router = \"vllm-router-pd\"\n");
    } else if n.router {
        model.push_str("router = \"vllm-router\"\n");
    }
    if n.cache_aware {
        model.push_str("router_policy = \"cache_aware\"\n");
    }
    if kind == IncidentKind::ReplicaConfigCap {
        let caps: Vec<String> = (0..n.min_replicas.max(3)).map(|i| if i == 0 { "8".into() } else { "64".into() }).collect();
        model.push_str(&format!("max_num_seqs_per_replica = [{}]\n", caps.join(", ")));
    }
    let replica = if n.uses_replica { "replica = 1\n" } else { "" };
    format!(
        "name = \"{kind}\"\nseed = 11\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"60s\"\nwarmup = \"10m\"\n\
         baseline = \"30m\"\nwindow = \"30m\"\nmetrics = \"{metrics}\"\n\n[[model]]\n{model}\n\
         [[model]]\nname = \"m/b\"\nreplicas = 2\nrate = 1.0\ndcgm = true\n\n\
         [incident]\nkind = \"{kind}\"\nmodel = \"m/a\"\n{replica}\n[expect]\nhealthy = true\n"
    )
}
