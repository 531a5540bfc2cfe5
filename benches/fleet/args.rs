//! The benchmark's command line (clap), and its conversion into [`Args`], what the run reads.
//!
//! A flag given twice takes its last value, and of `--sizes` and `--grid` the later one wins.
//! `cargo bench` appends `--bench` to the arguments: it is accepted and ignored.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{CommandFactory, Parser, ValueEnum};

use crate::data::Fleet;
use crate::Backend;

/// vllm-diag's default `--concurrency`: the benchmark's `--concurrency` default, for explain and the floor client alike.
const CONCURRENCY: usize = 8;
/// The fleet sizes measured by default: 10x1, 100x10, 1000x50.
const DIAGONAL: &str = "10x1,100x10,1000x50";
/// `--grid`: every size from 10, 100, 1000 replicas x 1, 10, 50 models (at least one replica per model).
const GRID: &[&str] = &["10x1", "10x10", "100x1", "100x10", "100x50", "1000x1", "1000x10", "1000x50"];

/// What a run measures, from the command line.
pub struct Args {
    pub fleets: Vec<Fleet>,
    pub runs: usize,
    pub out: PathBuf,
    pub fresh: bool,
    /// Another vllm-diag binary (the previous release) run side by side with this one.
    pub previous: Option<PathBuf>,
    /// The backends measured, each fleet against each in this order.
    pub backends: Vec<Backend>,
    /// Round-trip time added between the clients (explain, the floor) and the backend.
    pub latency: Option<Duration>,
    /// Requests in flight at once, explain's (`--concurrency`) and the floor's alike.
    pub concurrency: usize,
    /// Also measure the floor's requests with and without gzip-compressed answers.
    pub gzip: bool,
    /// Also measure the raw-read design: each family read raw once, the run's queries evaluated locally.
    pub raw_reads: bool,
}

/// Fleet-scale benchmark of vllm-diag explain against the floor set by the metrics backend
/// (BENCHMARKS.md; scripts/bench.sh runs it).
#[derive(Parser)]
#[command(name = "fleet", bin_name = "cargo bench --bench fleet --", args_override_self = true)]
struct Cli {
    /// Fleet sizes as REPLICASxMODELS, comma-separated (default: the diagonal 10x1,100x10,1000x50)
    #[arg(long, value_name = "SIZES", overrides_with = "grid")]
    sizes: Option<String>,

    /// Every size from 10, 100, 1000 replicas x 1, 10, 50 models (at least one replica per model)
    #[arg(long, overrides_with = "sizes")]
    grid: bool,

    /// Timed runs per measurement and passes of the backend's work, at least (at least 5); a fleet
    /// quick to diagnose gets more, until 3 s of them (at most 41)
    #[arg(long, value_name = "N", default_value_t = 7, value_parser = runs)]
    runs: usize,

    /// Where data, recordings and results go (default target/bench)
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,

    /// Rebuild the cached TSDBs instead of reusing them
    #[arg(long)]
    fresh: bool,

    /// Also time this vllm-diag binary (e.g. the previous release), interleaved with this one
    #[arg(long, value_name = "BIN")]
    previous: Option<PathBuf>,

    /// The metrics backend (both: each fleet against Prometheus, then against VictoriaMetrics)
    #[arg(long, value_enum, default_value_t = BackendChoice::Prometheus)]
    backend: BackendChoice,

    /// Requests in flight, explain's (--concurrency) and the floor's (default: explain's own default)
    #[arg(long, value_name = "N", default_value_t = CONCURRENCY, value_parser = concurrency)]
    concurrency: usize,

    /// Explain and the floor reach the backend through a loopback relay adding MS of round trip
    /// (half each way, per chunk of bytes): a remote backend; the backend's work is measured
    /// directly
    #[arg(long, value_name = "MS", value_parser = latency)]
    latency: Option<Duration>,

    /// Also send the run's requests with and without gzip-compressed answers, interleaved: the
    /// client's wall time, the bytes over the wire and the backend's CPU time for each
    #[arg(long)]
    gzip: bool,

    /// Also measure the other design for the run's reads: each family the run reads asked once,
    /// raw, and every query of the run evaluated in-process over it (the backend's work, the
    /// client's wall time and bytes, decoding and local evaluation)
    #[arg(long)]
    raw_reads: bool,

    /// Appended by cargo bench; ignored
    #[arg(long, hide = true)]
    bench: bool,
}

/// `--backend`'s values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendChoice {
    Prometheus,
    #[value(alias = "victoriametrics")]
    Victoria,
    Both,
}

fn runs(s: &str) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|_| "--runs takes a whole number".to_string())?;
    if n < 5 {
        return Err("at least 5, so that a median means something".into());
    }
    Ok(n)
}

fn concurrency(s: &str) -> Result<usize, String> {
    s.parse().ok().filter(|n| (1..=256).contains(n)).ok_or_else(|| "--concurrency takes 1 to 256".to_string())
}

fn latency(s: &str) -> Result<Duration, String> {
    let ms: u64 = s.trim_end_matches("ms").parse().map_err(|_| "--latency takes milliseconds (20 or 20ms)".to_string())?;
    Ok(Duration::from_millis(ms))
}

/// The command line, or clap's message and exit (2 for a mistake, 0 for `--help`).
pub fn parse() -> Args {
    let cli = Cli::parse();
    let sizes: Vec<&str> = match (&cli.sizes, cli.grid) {
        (_, true) => GRID.to_vec(),
        (Some(sizes), false) => sizes.split(',').collect(),
        (None, false) => DIAGONAL.split(',').collect(),
    };
    let fleets = match sizes.iter().map(|s| Fleet::parse(s)).collect::<Result<_, _>>() {
        Ok(fleets) => fleets,
        Err(e) => Cli::command().error(clap::error::ErrorKind::ValueValidation, e).exit(),
    };
    let backends = match cli.backend {
        BackendChoice::Prometheus => vec![Backend::Prometheus],
        BackendChoice::Victoria => vec![Backend::Victoria],
        BackendChoice::Both => vec![Backend::Prometheus, Backend::Victoria],
    };
    Args {
        fleets,
        runs: cli.runs,
        out: cli.out.unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench")),
        fresh: cli.fresh,
        previous: cli.previous,
        backends,
        latency: cli.latency,
        concurrency: cli.concurrency,
        gzip: cli.gzip,
        raw_reads: cli.raw_reads,
    }
}
