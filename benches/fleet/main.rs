//! Fleet-scale benchmark of `vllm-diag explain` against the floor set by the metrics backend.
//!
//! Run it with `scripts/bench.sh` (see BENCHMARKS.md); it is not part of `cargo test` (the target
//! has `bench = false`, so only `cargo bench --bench fleet` builds it).
//!
//! For every fleet size it builds a TSDB of a generated fleet (cached, see [`data`]), starts a real
//! Prometheus on it (or, with `--backend victoria`, a real VictoriaMetrics single-node holding the
//! same samples, see [`vm`]), and then, interleaving the runs so both see the same background noise:
//! - runs the release `vllm-diag explain` binary end to end (spawn to exit) and takes its peak RSS
//!   from the kernel ([`child`]);
//! - sends the very requests that run made, taken from its `--record` file, with a minimal client
//!   ([`floor`]) at the same concurrency;
//! - replays the recording offline.
//!
//! It reports medians with min and max, over at least `--runs` runs and then until three seconds
//! of runs have passed, as hyperfine does (a small fleet gets many). Query counts and response
//! sizes come from the recording, so they are exact, not sampled. The backend's work is measured one query at a time: Prometheus'
//! own `execTotalTime` (`stats=all`); VictoriaMetrics' own query trace (`trace=1`, its root span,
//! which also holds writing the answer); and for both, the client's wall time per query, which
//! also holds encoding the answer and loopback transfer.

mod args;
mod child;
mod data;
mod floor;
mod latency;
mod prom;
mod raw;
mod server;
mod stats;
mod vm;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use args::Args;
use data::Fleet;
use stats::{bytes, median, ms, Summary};

/// Runs under /usr/bin/time for the peak RSS (it hardly varies).
const RSS_RUNS: usize = 3;

/// The metrics backend explain and the floor run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
enum Backend {
    #[serde(rename = "prometheus")]
    Prometheus,
    #[serde(rename = "victoriametrics")]
    Victoria,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Prometheus => "Prometheus",
            Backend::Victoria => "VictoriaMetrics",
        }
    }

    /// How the backend's work per query is taken (see [`floor::Timing`]).
    fn timing(self) -> floor::Timing {
        match self {
            Backend::Prometheus => floor::Timing::ServerStats,
            Backend::Victoria => floor::Timing::ServerTrace,
        }
    }

    fn timing_text(self) -> &'static str {
        match self {
            Backend::Prometheus => "sum of execTotalTime (stats=all)",
            Backend::Victoria => "sum of trace durations (trace=1)",
        }
    }
}

#[derive(Serialize)]
struct Machine {
    cpu: String,
    cores: usize,
    memory: String,
    kernel: String,
    prometheus: String,
    /// When VictoriaMetrics is measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    victoria_metrics: Option<String>,
    vllm_diag: String,
}

#[derive(Serialize)]
struct Startup {
    version: Summary,
    rules_list: Summary,
    /// `explain` against a port nobody listens on: start-up, rules, HTTP client, one refused
    /// connection, the error message (exit 3).
    explain_refused: Summary,
}

#[derive(Serialize)]
struct FleetResult {
    backend: Backend,
    fleet: String,
    replicas: u32,
    models: u32,
    series: u64,
    data: data::Built,
    data_built_in_this_run: bool,
    /// VictoriaMetrics only: what importing the fleet cost (when it was built; cached otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    import: Option<vm::Imported>,
    /// `stats.queries` of the recorded run.
    queries: u64,
    /// Distinct requests in the recording.
    recorded_requests: usize,
    /// Requests per phase: discovery, signals, follow-ups.
    phases: [usize; 3],
    response_bytes: u64,
    largest_response_bytes: u64,
    recording_bytes: u64,
    findings: Vec<String>,
    explain: Summary,
    explain_peak_rss_mib: f64,
    /// CPU time (user + system) of the explain process.
    explain_cpu: Summary,
    floor_flat: Summary,
    floor_phased: Summary,
    /// median(explain) / median(flat floor)
    ratio: f64,
    /// median(explain) / median(phased floor)
    ratio_phased: f64,
    /// The median of the ratios of runs taken back to back.
    paired_ratio: f64,
    /// Passes of the work and the data-read floor (at least [`WORK_REPS`], see [`MIN_TIMED`]).
    work_passes: usize,
    /// The backend's work for the run's queries, one at a time (median of `work_passes` passes
    /// of the sum of `execTotalTime` from Prometheus, of client wall times from VictoriaMetrics).
    server_exec_ms: f64,
    /// How `server_exec_ms` and `data_read_ms` were taken.
    work_timing: &'static str,
    /// The data-read floor: every sample of each family the run reads, read once over the
    /// baseline and the window (median of `work_passes` passes).
    data_read_ms: f64,
    /// Families the run's queries read (that hold data).
    families: usize,
    /// server_exec_ms / data_read_ms
    work_ratio: f64,
    /// The same ratio from each query's and each family's least time over the passes.
    work_ratio_least: f64,
    /// The same ratio from the client's wall times (request sent to the answer's last byte), in
    /// the same passes: what it costs to have the answers, transfer included.
    work_ratio_wall: f64,
    /// Queries per family: the most read family and how often.
    most_read_family: (String, usize),
    previous: Option<Previous>,
    /// With `--gzip`: the run's requests with compressed answers and without.
    #[serde(skip_serializing_if = "Option::is_none")]
    gzip: Option<Gzip>,
    /// With `--raw-reads`: the raw-read design at this fleet.
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<raw::Raw>,
    /// With `--raw-reads`: the histograms read at two grids read once, raw (a projection).
    #[serde(skip_serializing_if = "Option::is_none")]
    once: Option<raw::Once>,
    replay: Summary,
    replay_peak_rss_mib: f64,
    load_before: String,
    load_after: String,
}

/// The run's requests sent with and without gzip-compressed answers (`--gzip`), interleaved.
#[derive(Serialize)]
struct Gzip {
    passes: usize,
    /// The client's wall time for all of them, as explain sends them (medians, ms).
    on_wall_ms: f64,
    off_wall_ms: f64,
    /// The backend process's CPU time (user and system) over a pass (medians, ms).
    on_backend_cpu_ms: f64,
    off_backend_cpu_ms: f64,
    /// Bytes over the wire in a pass.
    on_bytes: u64,
    off_bytes: u64,
}

/// The same fleet diagnosed by another binary (`--previous`), timed in the same loop.
#[derive(Serialize)]
struct Previous {
    binary: String,
    queries: u64,
    response_bytes: u64,
    largest_response_bytes: u64,
    findings: Vec<String>,
    same_findings: bool,
    explain: Summary,
    server_exec_ms: f64,
    work_ratio: f64,
    work_ratio_least: f64,
    /// median(previous) / median(this)
    speedup: f64,
    /// The median of the ratios of runs taken back to back.
    paired_speedup: f64,
}

/// Passes of the sequential `stats=all` replays (work and data-read floor), at least (and at least
/// `--runs`); the median is kept.
const WORK_REPS: usize = 5;

/// Timed runs and work passes go on past their minimum (`--runs`, [`WORK_REPS`]) until they have
/// taken this long, as hyperfine does: five 50 ms runs of a 10-replica fleet say little on a
/// shared machine, where one run in five can take a third longer. Capped by [`MAX_RUNS`].
const MIN_TIMED: Duration = Duration::from_secs(3);
const MAX_RUNS: usize = 41;

/// Whether a measuring loop goes on: `done` iterations so far, at least `min`, then until
/// [`MIN_TIMED`] has passed since `started`, never more than [`MAX_RUNS`].
fn more(done: usize, min: usize, started: Instant) -> bool {
    done < min || (done < MAX_RUNS && started.elapsed() < MIN_TIMED)
}

#[derive(Serialize)]
struct Results {
    machine: Machine,
    runs: usize,
    concurrency: usize,
    /// Round-trip time added between the clients and the backend (`--latency`), milliseconds.
    latency_ms: Option<u64>,
    startup: Startup,
    fleets: Vec<FleetResult>,
}

fn main() -> ExitCode {
    let args = args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_vllm-diag")
}

fn run(args: &Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(|e| format!("cannot start the async runtime: {e}"))?;

    let machine = machine(args.backends.contains(&Backend::Victoria));
    eprintln!("machine: {} ({} cores), load {}", machine.cpu, machine.cores, loadavg());

    let startup = Startup {
        version: Summary::of(&walls(&child::repeat(Command::new(bin()).arg("--version"), args.runs * 3, 0)?)),
        rules_list: Summary::of(&walls(&child::repeat(Command::new(bin()).args(["rules", "list"]), args.runs * 3, 0)?)),
        explain_refused: Summary::of(&walls(&child::repeat(
            Command::new(bin())
                .args(["--no-config", "explain", "--prometheus", &format!("http://127.0.0.1:{}", closed_port()?)])
                .args(["--at", "2026-01-15T09:05:00Z"])
                .env_remove("VLLM_DIAG_PROMETHEUS_URL"),
            args.runs * 3,
            3,
        )?)),
    };

    let mut fleets = Vec::new();
    let prometheus = args.backends.contains(&Backend::Prometheus);
    let victoria = args.backends.contains(&Backend::Victoria);
    for fleet in &args.fleets {
        let prepared = data::prepare(&rt, *fleet, &args.out, args.fresh, prometheus, victoria)?;
        for &backend in &args.backends {
            let r = measure(&rt, *fleet, &prepared, backend, args)?;
            eprintln!(
                "[{} {}] explain {} | floor {} | ratio {:.2} | {} queries, {} | replay {} | work {} / data floor {} = {:.2} (least of each: {:.2}; by wall time {:.2}){}",
                r.fleet,
                backend.name(),
                r.explain.text(),
                r.floor_flat.text(),
                r.ratio,
                r.queries,
                bytes(r.response_bytes),
                r.replay.text(),
                ms(r.server_exec_ms),
                ms(r.data_read_ms),
                r.work_ratio,
                r.work_ratio_least,
                r.work_ratio_wall,
                r.previous.as_ref().map_or(String::new(), |p| format!(" | previous: explain {}, work/floor {:.2}, speed-up {:.2}x", p.explain.text(), p.work_ratio, p.speedup))
            );
            fleets.push(r);
        }
    }

    let results = Results { machine, runs: args.runs, concurrency: args.concurrency, latency_ms: args.latency.map(|d| d.as_millis() as u64), startup, fleets };
    let json = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    let md = markdown(&results);
    for (name, text) in [("results.json", &json), ("results.md", &md)] {
        let p = args.out.join(name);
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    println!("{md}");
    eprintln!("results written to {}", args.out.join("results.{md,json}").display());
    Ok(())
}

fn walls(runs: &[child::Finished]) -> Vec<Duration> {
    runs.iter().map(|f| f.wall).collect()
}

fn measure(rt: &tokio::runtime::Runtime, fleet: Fleet, prepared: &data::Prepared, backend: Backend, args: &Args) -> Result<FleetResult, String> {
    let label = fleet.label();
    let work = match backend {
        Backend::Prometheus => args.out.join("runs").join(&label),
        Backend::Victoria => args.out.join("runs").join(format!("{label}-victoria")),
    };
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let server = match backend {
        Backend::Prometheus => rt.block_on(prom::start(&prepared.tsdb, &work))?,
        Backend::Victoria => {
            let storage = &prepared.vm.as_ref().ok_or("no VictoriaMetrics data was prepared")?.storage;
            rt.block_on(vm::start(storage, &work, "victoria-metrics.log"))?
        }
    };
    let url = server.url.clone();
    // explain and the floor reach the backend through the relay (`--latency`); the backend's work
    // and the data-read floor are measured directly.
    let relay = args.latency.map(|rtt| latency::start(rt, &url, rtt / 2)).transpose()?;
    let near = relay.as_ref().map_or_else(|| url.clone(), |r| r.url.clone());
    // Let start-up work (WAL replay, a first compaction check) finish before timing anything.
    std::thread::sleep(Duration::from_secs(3));
    let at = prepared.built.window_end.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let series = rt.block_on(count_series(&url, &at))?;
    let load_before = loadavg();

    let live_args: Vec<String> =
        ["--no-config", "explain", "--prometheus", &near, "--at", &at, "--window", "30m", "--concurrency", &args.concurrency.to_string()]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let explain_args = |extra: &[&str]| -> Command {
        let mut c = Command::new(bin());
        c.args(&live_args).args(extra).env_remove("VLLM_DIAG_PROMETHEUS_URL");
        c
    };

    // 1. The recorded run: what was asked and answered, and the report.
    let rec_path = work.join("recording.json");
    let rec_str = rec_path.display().to_string();
    let (findings, queries, rec) = record(bin(), &live_args, &work, "")?;
    let recording_bytes = std::fs::metadata(&rec_path).map(|m| m.len()).unwrap_or(0);
    let prev_bin = args.previous.as_ref().map(|p| p.display().to_string());
    let prev = match &prev_bin {
        Some(b) => Some(record(b, &live_args, &work, "-previous")?),
        None => None,
    };

    // 2. Warm both up once (page cache, postings), then interleave.
    let mut table = explain_args(&[]);
    let mut prev_table = prev_bin.as_ref().map(|b| {
        let mut c = Command::new(b);
        c.args(&live_args).env_remove("VLLM_DIAG_PROMETHEUS_URL");
        c
    });
    child::repeat(&mut table, 1, 0)?;
    if let Some(c) = prev_table.as_mut() {
        child::repeat(c, 1, 0)?;
    }
    rt.block_on(floor::flat(&near, &rec, args.concurrency))?;
    let mut explain_runs = Vec::new();
    let mut prev_runs = Vec::new();
    let mut flat = Vec::new();
    let mut phased = Vec::new();
    let mut floor_bytes = 0;
    let timed = Instant::now();
    while more(explain_runs.len(), args.runs, timed) {
        explain_runs.extend(child::repeat(&mut table, 1, 0)?);
        if let Some(c) = prev_table.as_mut() {
            prev_runs.extend(child::repeat(c, 1, 0)?);
        }
        let p = rt.block_on(floor::flat(&near, &rec, args.concurrency))?;
        floor_bytes = p.bytes;
        flat.push(p.wall);
        phased.push(rt.block_on(floor::phased(&near, &rec, args.concurrency))?.wall);
    }
    if floor_bytes != rec.total_bytes() {
        eprintln!("[{label}] note: the floor client received {floor_bytes} bytes, the recording holds {}", rec.total_bytes());
    }
    // The backend's own work, one query at a time, against the data-read floor of the families it
    // reads: each build's work against the floor of its own families (the previous build may read
    // families this one no longer does, such as a histogram's `_count`).
    let own_families = floor::families(&rec)?;
    let prev_families = match &prev {
        Some((_, _, p)) => floor::families(p)?,
        None => BTreeMap::new(),
    };
    let most_read_family = own_families.clone().into_iter().max_by_key(|(_, n)| *n).unwrap_or_default();
    let (start, end) = floor::span(&rec).ok_or_else(|| format!("[{label}] the recording has no discovery request"))?;
    let names: Vec<String> = own_families.keys().chain(prev_families.keys()).cloned().collect::<BTreeSet<_>>().into_iter().collect();
    let mut exec = Vec::new();
    let mut prev_exec = Vec::new();
    let mut data_read = Vec::new();
    let mut prev_data_read = Vec::new();
    let mut with_data = 0;
    // Each query's least time over the passes: on a shared machine other work only ever adds
    // time, so the least is the closest to the query's own cost. Reported beside the medians.
    let least = |passes: &[Vec<(f64, String)>]| -> Vec<f64> {
        let n = passes.first().map_or(0, Vec::len);
        (0..n).map(|i| passes.iter().filter_map(|p| p.get(i)).map(|(t, _)| *t).fold(f64::INFINITY, f64::min)).collect()
    };
    let mut floor_least: BTreeMap<String, f64> = BTreeMap::new();
    // Each query's median and least time over the passes, largest median first: one pass alone is
    // too noisy to say where the work goes (a 3 ms query can take 14 ms once).
    let listing = |passes: &[Vec<(f64, String)>]| -> String {
        let Some(first) = passes.first() else { return String::new() };
        let lows = least(passes);
        let mut rows: Vec<(f64, f64, &str)> = first
            .iter()
            .enumerate()
            .map(|(i, (_, q))| {
                let times: Vec<f64> = passes.iter().filter_map(|p| p.get(i)).map(|(t, _)| t * 1000.0).collect();
                (median(&times), lows[i] * 1000.0, q.as_str())
            })
            .collect();
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut out = String::from("median\tleast\tquery\n");
        out.extend(rows.iter().map(|(m, l, q)| format!("{m:.1} ms\t{l:.1} ms\t{q}\n")));
        out
    };
    let (mut own_passes, mut prev_passes) = (Vec::new(), Vec::new());
    let passes_started = Instant::now();
    // The same from the client's wall times, measured in the same passes.
    let (mut exec_wall, mut data_read_wall) = (Vec::new(), Vec::new());
    // Each query's cost as the backend accounts it, and as the client's wall clock does.
    let by_backend = |c: &floor::Cost| c.server;
    let by_wall = |c: &floor::Cost| c.wall;
    // A pass's sum in milliseconds, of each query's cost as `pick` takes it.
    let total = |each: &[(floor::Cost, String)], pick: &dyn Fn(&floor::Cost) -> f64| each.iter().map(|(c, _)| pick(c)).sum::<f64>() * 1000.0;
    let times = |each: Vec<(floor::Cost, String)>| each.into_iter().map(|(c, q)| (c.server, q)).collect::<Vec<_>>();
    while more(own_passes.len(), WORK_REPS.max(args.runs), passes_started) {
        let each = rt.block_on(floor::server_exec_secs(&url, &rec, backend.timing()))?;
        exec.push(total(&each, &by_backend));
        exec_wall.push(total(&each, &by_wall));
        own_passes.push(times(each));
        if let Some((_, _, p)) = &prev {
            let each = rt.block_on(floor::server_exec_secs(&url, p, backend.timing()))?;
            prev_exec.push(total(&each, &by_backend));
            prev_passes.push(times(each));
        }
        let each = rt.block_on(floor::data_read_secs(&url, &names, start, end, backend.timing()))?;
        // The floor of the families `of` reads, in milliseconds, each family's cost as `pick` takes it.
        let sum = |of: &BTreeMap<String, usize>, pick: &dyn Fn(&floor::Cost) -> f64| {
            of.keys().filter_map(|f| each.get(f)).map(|(c, _)| pick(c)).sum::<f64>() * 1000.0
        };
        data_read.push(sum(&own_families, &by_backend));
        prev_data_read.push(sum(&prev_families, &by_backend));
        data_read_wall.push(sum(&own_families, &by_wall));
        for (f, (c, _)) in &each {
            floor_least.entry(f.clone()).and_modify(|x| *x = x.min(c.server)).or_insert(c.server);
        }
        with_data = own_families.keys().filter(|f| each.get(*f).is_some_and(|(_, d)| *d)).count();
    }
    let _ = std::fs::write(work.join("server-exec.tsv"), listing(&own_passes));
    if !prev_passes.is_empty() {
        let _ = std::fs::write(work.join("server-exec-previous.tsv"), listing(&prev_passes));
    }
    let least_floor = |of: &BTreeMap<String, usize>| of.keys().filter_map(|f| floor_least.get(f)).sum::<f64>();
    let work_ratio_least = least(&own_passes).iter().sum::<f64>() / least_floor(&own_families);
    let prev_work_ratio_least = least(&prev_passes).iter().sum::<f64>() / least_floor(&prev_families);
    let server_exec_ms = median(&exec);
    let data_read_ms = median(&data_read);
    let gzip = match args.gzip {
        true => Some(gzip_passes(rt, &server, &near, &rec, args)?),
        false => None,
    };
    let raw = match args.raw_reads {
        true => Some(raw::measure(rt, &near, &url, &rec, end, backend.timing(), args.concurrency, WORK_REPS.max(args.runs))?),
        false => None,
    };
    let once = match args.raw_reads {
        true => {
            let mut once = raw::histograms_once(rt, &url, &rec, end, backend.timing(), WORK_REPS.max(args.runs))?;
            let work_least_ms = least(&own_passes).iter().sum::<f64>() * 1000.0;
            once.work_ratio_least = (work_least_ms - once.replaced_ms + once.raw_ms) / (least_floor(&own_families) * 1000.0);
            Some(once)
        }
        false => None,
    };
    let explain_rss_kib = child::peak_rss_kib(bin(), &live_args, RSS_RUNS)?;
    let load_after = loadavg();
    drop(server);

    // 3. Offline: the recording replayed.
    let mut replay = Command::new(bin());
    let replay_args: Vec<String> = ["--no-config", "explain", "--replay", &rec_str].iter().map(|s| s.to_string()).collect();
    replay.args(&replay_args);
    child::repeat(&mut replay, 1, 0)?;
    let replay_runs = child::repeat(&mut replay, args.runs, 0)?;
    let replay_rss_kib = child::peak_rss_kib(bin(), &replay_args, RSS_RUNS)?;

    let explain = Summary::of(&walls(&explain_runs));
    let floor_flat = Summary::of(&flat);
    let previous = prev.map(|(prev_findings, prev_queries, p)| {
        let s = Summary::of(&walls(&prev_runs));
        let paired: Vec<f64> = prev_runs.iter().zip(&explain_runs).map(|(p, e)| p.wall.as_secs_f64() / e.wall.as_secs_f64()).collect();
        let prev_exec_ms = median(&prev_exec);
        Previous {
            binary: prev_bin.clone().unwrap_or_default(),
            queries: prev_queries,
            response_bytes: p.total_bytes(),
            largest_response_bytes: p.largest(),
            same_findings: prev_findings == findings,
            findings: prev_findings,
            speedup: s.median_ms / explain.median_ms,
            paired_speedup: median(&paired),
            explain: s,
            server_exec_ms: prev_exec_ms,
            work_ratio: prev_exec_ms / median(&prev_data_read),
            work_ratio_least: prev_work_ratio_least,
        }
    });
    let paired: Vec<f64> = explain_runs.iter().zip(&flat).map(|(e, f)| e.wall.as_secs_f64() / f.as_secs_f64()).collect();
    let (data, data_built_in_this_run, import) = match (&prepared.vm, backend) {
        (Some(v), Backend::Victoria) => (v.built.built.clone(), v.fresh, Some(v.built.imported.clone())),
        _ => (prepared.built.clone(), prepared.fresh, None),
    };
    Ok(FleetResult {
        backend,
        fleet: label,
        replicas: fleet.replicas,
        models: fleet.models,
        series,
        data,
        data_built_in_this_run,
        import,
        queries,
        recorded_requests: rec.requests.len(),
        phases: floor::phases(&rec.requests).map(|p| p.len()),
        response_bytes: rec.total_bytes(),
        largest_response_bytes: rec.largest(),
        recording_bytes,
        findings,
        ratio: explain.median_ms / floor_flat.median_ms,
        ratio_phased: explain.median_ms / Summary::of(&phased).median_ms,
        paired_ratio: median(&paired),
        explain,
        explain_peak_rss_mib: explain_rss_kib as f64 / 1024.0,
        explain_cpu: Summary::of(&explain_runs.iter().map(|f| f.cpu).collect::<Vec<_>>()),
        floor_flat,
        floor_phased: Summary::of(&phased),
        work_passes: own_passes.len(),
        server_exec_ms,
        work_timing: backend.timing_text(),
        data_read_ms,
        families: with_data,
        work_ratio: server_exec_ms / data_read_ms,
        work_ratio_least,
        work_ratio_wall: median(&exec_wall) / median(&data_read_wall),
        most_read_family,
        previous,
        gzip,
        raw,
        once,
        replay: Summary::of(&walls(&replay_runs)),
        replay_peak_rss_mib: replay_rss_kib as f64 / 1024.0,
        load_before,
        load_after,
    })
}

/// The run's requests with and without gzip-compressed answers, interleaved (the order swapped
/// every pass), at least `args.runs` passes of each: the wall time, the bytes over the wire and the
/// backend's CPU time of each pass.
fn gzip_passes(rt: &tokio::runtime::Runtime, server: &server::Server, near: &str, rec: &floor::Recorded, args: &Args) -> Result<Gzip, String> {
    let (mut on, mut off) = ((Vec::new(), Vec::new(), 0), (Vec::new(), Vec::new(), 0));
    // One of each first, to warm both up.
    for gz in [true, false] {
        rt.block_on(floor::flat_gzip(near, rec, args.concurrency, gz))?;
    }
    let started = Instant::now();
    let mut i = 0;
    while more(on.0.len(), args.runs, started) {
        let order = if i % 2 == 0 { [true, false] } else { [false, true] };
        for gz in order {
            let before = server.cpu().ok_or("cannot read the backend's CPU time")?;
            let pass = rt.block_on(floor::flat_gzip(near, rec, args.concurrency, gz))?;
            let cpu = server.cpu().ok_or("cannot read the backend's CPU time")?.saturating_sub(before);
            let into = if gz { &mut on } else { &mut off };
            into.0.push(pass.wall.as_secs_f64() * 1000.0);
            into.1.push(cpu.as_secs_f64() * 1000.0);
            into.2 = pass.bytes;
        }
        i += 1;
    }
    Ok(Gzip {
        passes: on.0.len(),
        on_wall_ms: median(&on.0),
        off_wall_ms: median(&off.0),
        on_backend_cpu_ms: median(&on.1),
        off_backend_cpu_ms: median(&off.1),
        on_bytes: on.2,
        off_bytes: off.2,
    })
}

/// One recorded run of `binary` (`--format json --record`): its findings, `stats.queries` and
/// the recording. `suffix` tells the files of two binaries apart in `work`.
fn record(binary: &str, live_args: &[String], work: &Path, suffix: &str) -> Result<(Vec<String>, u64, floor::Recorded), String> {
    let to_file = |p: &Path| -> Result<Stdio, String> { std::fs::File::create(p).map(Stdio::from).map_err(|e| format!("cannot create {}: {e}", p.display())) };
    let rec_path = work.join(format!("recording{suffix}.json"));
    let report_path = work.join(format!("report{suffix}.json"));
    let stderr_path = work.join(format!("record{suffix}.stderr"));
    let mut cmd = Command::new(binary);
    cmd.args(live_args).env_remove("VLLM_DIAG_PROMETHEUS_URL");
    cmd.args(["--format", "json", "--record", &rec_path.display().to_string()]);
    cmd.stdout(to_file(&report_path)?).stderr(to_file(&stderr_path)?);
    let f = child::run(&mut cmd)?;
    if f.code != Some(0) {
        return Err(format!("{binary} explain exited with {:?}; see {}", f.code, stderr_path.display()));
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).map_err(|e| e.to_string())?).map_err(|e| format!("{}: {e}", report_path.display()))?;
    let findings: Vec<String> = report["findings"]
        .as_array()
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .map(|f| {
            let replicas = f["replicas"]["affected"].as_array().map(|a| a.len());
            let total = f["replicas"]["total"].as_u64();
            let mut s = format!("{} @ {}", f["rule"].as_str().unwrap_or("?"), f["scope"]["model_name"].as_str().unwrap_or("?"));
            if let (Some(a), Some(t)) = (replicas, total) {
                let _ = write!(s, " ({a} of {t} replicas)");
            }
            s
        })
        .collect();
    let queries = report["stats"]["queries"].as_u64().unwrap_or(0);
    let rec = floor::Recorded::load(&rec_path)?;
    if rec.errors > 0 {
        return Err(format!("{} recorded requests failed; see {}", rec.errors, rec_path.display()));
    }
    Ok((findings, queries, rec))
}

/// A port on 127.0.0.1 that was free a moment ago (connections to it are refused).
fn closed_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

/// How many series Prometheus holds at the window's end (within its lookback).
async fn count_series(url: &str, at: &str) -> Result<u64, String> {
    let body = url::form_urlencoded::Serializer::new(String::new()).extend_pairs([("query", "count({__name__=~\".+\"})"), ("time", at)]).finish();
    let answer = reqwest::Client::new()
        .post(format!("{url}/api/v1/query"))
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .map_err(|e| format!("counting series: {e}"))?
        .bytes()
        .await
        .map_err(|e| format!("counting series: {e}"))?;
    let v: serde_json::Value = serde_json::from_slice(&answer).map_err(|e| format!("counting series: {e}"))?;
    v["data"]["result"][0]["value"][1].as_str().and_then(|s| s.parse().ok()).ok_or_else(|| format!("counting series: unexpected answer {v}"))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")).unwrap_or_else(|_| "?".into())
}

fn machine(victoria: bool) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").map(|r| r.trim_start_matches([' ', '\t', ':']).to_string()))
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
        .map_or("?".into(), |kib| format!("{:.0} GiB", kib as f64 / 1048576.0));
    let first_line = |prog: &str, arg: &str| {
        Command::new(prog)
            .arg(arg)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(if o.stdout.is_empty() { &o.stderr } else { &o.stdout }).lines().next().unwrap_or("").to_string())
            .unwrap_or_else(|| "?".into())
    };
    Machine {
        cpu,
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        memory,
        kernel: first_line("uname", "-r"),
        prometheus: first_line("prometheus", "--version"),
        victoria_metrics: victoria.then(vm::version),
        vllm_diag: first_line(bin(), "--version"),
    }
}

fn markdown(r: &Results) -> String {
    let mut s = String::new();
    let m = &r.machine;
    let vm = m.victoria_metrics.as_ref().map_or(String::new(), |v| format!("; {v}"));
    let _ = writeln!(s, "Machine: {}, {} cores, {}, Linux {}; {}{vm}; {}.", m.cpu, m.cores, m.memory, m.kernel, m.prometheus, m.vllm_diag);
    if let Some(ms) = r.latency_ms {
        let _ = writeln!(s, "explain and the floor reach the backend through a loopback relay adding {ms} ms of round trip (`--latency`); the backend's work is measured directly.");
    }
    let _ = writeln!(
        s,
        "At least {} timed runs per number, more until {} s of timed runs (at most {MAX_RUNS}): the count is in the `runs` column (median, then min–max); concurrency {}.\n",
        r.runs,
        MIN_TIMED.as_secs(),
        r.concurrency
    );

    let _ = writeln!(s, "| fleet (replicas x models) | backend | series | queries (per phase) | bytes received | largest answer | explain | floor (flat) | floor, phased like explain | explain / floor | explain / phased floor | explain peak RSS | runs |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for f in &r.fleets {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {:.2} (paired {:.2}) | {:.2} | {:.1} MiB | {} |",
            f.fleet,
            f.backend.name(),
            f.series,
            f.queries,
            f.phases.map(|n| n.to_string()).join(" + "),
            bytes(f.response_bytes),
            bytes(f.largest_response_bytes),
            f.explain.text(),
            f.floor_flat.text(),
            f.floor_phased.text(),
            f.ratio,
            f.paired_ratio,
            f.ratio_phased,
            f.explain_peak_rss_mib,
            f.explain.runs
        );
    }

    let _ =
        writeln!(s, "\n| fleet | backend | explain CPU time | replay | replay peak RSS | recording | backend work (sum, sequential) | load before → after |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---|");
    for f in &r.fleets {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} MiB | {} | {} | {} → {} |",
            f.fleet,
            f.backend.name(),
            f.explain_cpu.text(),
            f.replay.text(),
            f.replay_peak_rss_mib,
            bytes(f.recording_bytes),
            ms(f.server_exec_ms),
            f.load_before,
            f.load_after
        );
    }

    let _ = writeln!(s, "\nThe backend's work (the run's queries one at a time, nothing else in flight; label-values requests left out) against the data-read floor (each family the run reads, every sample once over the baseline and the window: `count(count_over_time(F[1h]))`, one family at a time; the previous build's ratio is against the families it reads); medians of at least {} passes (more until {} s of passes, at most {MAX_RUNS}: the `passes` column), each pass timing the work and the floor back to back; beside it, the ratio of the sums of each query's and each family's least time over the passes (other work on a shared machine only adds time). Prometheus: the sum of its own `execTotalTime` (`stats=all`, evaluation only). VictoriaMetrics: the sum of the durations of its own query traces (`trace=1`, the root span: the request's handling, evaluation and writing the answer). The last ratio is the same from the client's wall times in the same passes, request sent to last byte received (evaluation, encoding and loopback transfer), for the work and the floor alike.\n", WORK_REPS.max(r.runs), MIN_TIMED.as_secs());
    let _ = writeln!(s, "| fleet | backend | families | data-read floor | backend work | measured as | work / data floor | the same, least of each query and family | most read family | passes | work / data floor by the client's wall time |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---|---:|---:|---|---:|---:|");
    for f in &r.fleets {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {} ({} queries) | {} | {:.2} |",
            f.fleet,
            f.backend.name(),
            f.families,
            ms(f.data_read_ms),
            ms(f.server_exec_ms),
            f.work_timing,
            f.work_ratio,
            f.work_ratio_least,
            f.most_read_family.0,
            f.most_read_family.1,
            f.work_passes,
            f.work_ratio_wall
        );
    }
    if r.fleets.iter().any(|f| f.gzip.is_some()) {
        let _ = writeln!(s, "\nThe run's requests with gzip-compressed answers and without (`--gzip`), interleaved, as the floor client sends them (medians): the client's wall time, the bytes over the wire, the backend process's CPU time (user and system) over a pass.\n");
        let _ = writeln!(s, "| fleet | backend | passes | wall, gzip | wall, plain | bytes, gzip | bytes, plain | backend CPU, gzip | backend CPU, plain |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for f in &r.fleets {
            let Some(g) = &f.gzip else { continue };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                f.fleet,
                f.backend.name(),
                g.passes,
                ms(g.on_wall_ms),
                ms(g.off_wall_ms),
                bytes(g.on_bytes),
                bytes(g.off_bytes),
                ms(g.on_backend_cpu_ms),
                ms(g.off_backend_cpu_ms)
            );
        }
    }
    if r.fleets.iter().any(|f| f.raw.is_some()) {
        let _ = writeln!(s, "\nThe raw-read design (`--raw-reads`): each family the run reads asked once, raw, as far back as the run's longest range reaches, and every query of the run evaluated by the local engine over it (medians): the backend's work for the raw reads (one at a time, as above), the client's wall time to have them all, decoding and loading them, evaluating the run's queries on one thread.\n");
        let _ = writeln!(s, "| fleet | backend | passes | families | series | samples | bytes | backend work | / data floor | fetch wall | decode and load | local evaluation | queries evaluated (refused) |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for f in &r.fleets {
            let Some(w) = &f.raw else { continue };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {} ({}) |",
                f.fleet,
                f.backend.name(),
                w.passes,
                w.families,
                w.series,
                w.samples,
                bytes(w.bytes),
                ms(w.backend_work_ms),
                w.backend_work_ms / f.data_read_ms,
                ms(w.fetch_wall_ms),
                ms(w.load_ms),
                ms(w.eval_ms),
                w.evaluated,
                w.refused.len()
            );
        }
        for f in &r.fleets {
            let Some(w) = &f.raw else { continue };
            let _ = writeln!(s, "\nSlowest local evaluations, {} on {}:\n", f.fleet, f.backend.name());
            for (t, q) in &w.slowest {
                let _ = writeln!(s, "- {} `{}`", ms(*t), q.chars().take(160).collect::<String>());
            }
            for q in &w.refused {
                let _ = writeln!(s, "- refused: {q}");
            }
        }
        for f in &r.fleets {
            let Some(o) = &f.once else { continue };
            let _ = writeln!(
                s,
                "\nThe step between, {} on {} (a projection from measured parts): the histograms the run reads whole at more than one grid ({}) read once each, raw, in place of the {} queries that read them; the rest of the run as it is. The replaced queries' backend work {} (least of each), the raw reads' {}; bytes {} → {}. Backend work / data-read floor, least of each: {:.2} → **{:.2}**. The packed reads that hold a histogram beside other families are left as they are.\n",
                f.fleet,
                f.backend.name(),
                o.families.join(", "),
                o.replaced.len(),
                ms(o.replaced_ms),
                ms(o.raw_ms),
                bytes(o.replaced_bytes),
                bytes(o.raw_bytes),
                f.work_ratio_least,
                o.work_ratio_least
            );
            for (family, secs, work, b) in &o.each {
                let _ = writeln!(s, "- `{family}[{secs}s]`: {}, {}", ms(*work), bytes(*b));
            }
        }
    }
    if r.fleets.iter().any(|f| f.previous.is_some()) {
        let _ = writeln!(s, "\nSide by side with the previous binary (`--previous`), interleaved in the same loop:\n");
        let _ = writeln!(s, "| fleet | backend | queries (previous → this) | bytes received | largest answer | backend work / data floor | explain, previous | explain, this | previous / this (paired) | same findings |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
        for f in &r.fleets {
            let Some(p) = &f.previous else { continue };
            let _ = writeln!(
                s,
                "| {} | {} | {} → {} | {} → {} | {} → {} | {:.2} → {:.2} (least: {:.2} → {:.2}) | {} | {} | {:.2}x ({:.2}x) | {} |",
                f.fleet,
                f.backend.name(),
                p.queries,
                f.queries,
                bytes(p.response_bytes),
                bytes(f.response_bytes),
                bytes(p.largest_response_bytes),
                bytes(f.largest_response_bytes),
                p.work_ratio,
                f.work_ratio,
                p.work_ratio_least,
                f.work_ratio_least,
                p.explain.text(),
                f.explain.text(),
                p.speedup,
                p.paired_speedup,
                if p.same_findings { "yes".to_string() } else { format!("no: {}", p.findings.join("; ")) }
            );
        }
    }

    for backend in [Backend::Prometheus, Backend::Victoria] {
        let rows: Vec<&FleetResult> = r.fleets.iter().filter(|f| f.backend == backend).collect();
        let Some(base) = rows.first() else { continue };
        let _ = writeln!(s, "\nGrowth relative to {}, {}:\n", base.fleet, backend.name());
        let _ = writeln!(s, "| fleet | backend | replicas | series | queries | bytes received | floor | explain | explain − floor |");
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
        for f in rows.iter() {
            let x = |a: f64, b: f64| format!("{:.2}x", a / b);
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                f.fleet,
                backend.name(),
                x(f.replicas as f64, base.replicas as f64),
                x(f.series as f64, base.series as f64),
                x(f.queries as f64, base.queries as f64),
                x(f.response_bytes as f64, base.response_bytes as f64),
                x(f.floor_flat.median_ms, base.floor_flat.median_ms),
                x(f.explain.median_ms, base.explain.median_ms),
                ms(f.explain.median_ms - f.floor_flat.median_ms),
            );
        }
    }

    let _ = writeln!(
        s,
        "\nStart-up: `vllm-diag --version` {}; `vllm-diag rules list` {}; `explain` against a closed port {}.",
        r.startup.version.text(),
        r.startup.rules_list.text(),
        r.startup.explain_refused.text()
    );

    let _ = writeln!(s, "\n| fleet | backend | data: samples | OpenMetrics | generate | backfill (promtool) or import (VictoriaMetrics) | findings |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---|");
    for f in &r.fleets {
        let d = &f.data;
        let cached = if f.data_built_in_this_run { "" } else { " (cached)" };
        let load = match (&f.import, d.backfill_secs) {
            (Some(i), _) => format!("{:.1} s{cached}", i.import_secs + i.searchable_secs),
            (None, Some(b)) => format!("{b:.1} s{cached}"),
            (None, None) => "?".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {:.1} s{cached} | {load} | {} |",
            f.fleet,
            f.backend.name(),
            d.samples,
            bytes(d.openmetrics_bytes),
            d.generate_secs,
            f.findings.join("; ")
        );
    }
    let imports: Vec<(&FleetResult, &vm::Imported)> = r.fleets.iter().filter_map(|f| Some((f, f.import.as_ref()?))).collect();
    if !imports.is_empty() {
        let _ = writeln!(s, "\nImport into VictoriaMetrics (`/api/v1/import/prometheus`, the OpenMetrics file streamed as Prometheus text with millisecond timestamps, {IMPORT_REQUESTS_TEXT}), measured when the storage was built:\n");
        let _ = writeln!(s, "| fleet | samples | text sent | requests | import (all requests answered) | then searchable (flush, every sample counted) | total | samples/s | storage on disk |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (f, i) in imports {
            let cached = if f.data_built_in_this_run { "" } else { " (cached)" };
            let total = i.import_secs + i.searchable_secs;
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.1} s{cached} | {:.1} s | {:.1} s | {:.0} | {} |",
                f.fleet,
                i.samples,
                bytes(i.text_bytes),
                i.requests,
                i.import_secs,
                i.searchable_secs,
                total,
                i.samples as f64 / total,
                bytes(i.storage_bytes)
            );
        }
    }
    s
}

/// How the import is sent, for the results' prose.
const IMPORT_REQUESTS_TEXT: &str = "about 16 MiB per request, two in flight";
