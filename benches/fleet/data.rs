//! Generated fleets, backfilled into a Prometheus TSDB and imported into a VictoriaMetrics storage
//! directory once each, and kept for later runs.
//!
//! A fleet is `replicas` servers spread evenly over `models` models, with one model in a
//! KV-cache-pressure incident so the run goes through every phase (findings, trends, per-replica
//! breakdowns, the cache-configuration query). The timeline is a 5-minute lead-in (so rates at the
//! baseline's start have data), a 30-minute baseline and the 30-minute window, scraped every 60 s:
//! at 1,000 replicas that is about 15 million samples, which is why the interval is coarser than the
//! tests' 30 s and nothing outside the two windows is generated.
//!
//! The scenario generator takes at most 64 replicas per model in one spec, so a fleet is generated
//! in chunks of at most 50 replicas per model, each chunk a spec of its own (own seed). Chunks are
//! written to their own files, streamed, then merged family by family into one OpenMetrics file,
//! because promtool wants all samples of a family together; the `instance` and `pod` labels of
//! every chunk but the first get a chunk tag so replicas stay distinct. One file means one set of
//! blocks, like a real Prometheus holds, rather than dozens of overlapping ones.
//!
//! The TSDB (`tsdb/`) and the VictoriaMetrics storage (`vm/`, see [`vm`]) are cached under
//! `<out>/data/<fleet>-<key>/`, the key a hash of the spec texts, the generator's source and
//! [`DATA_VERSION`]; `--fresh` rebuilds what the run measures. Each is built only when a run
//! measures that backend, from one OpenMetrics file generated for the purpose and deleted after.
//! Generation, backfill and import times are measured when the data is built and stored next to it
//! (`built.json`, `vm.json`).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use vllm_diag_sim::{generate_openmetrics, ScenarioSpec};

use crate::vm;

/// Bump when the way data is generated changes, so cached TSDBs are rebuilt.
const DATA_VERSION: &str = "1";
/// Replicas of one model in one generator spec (the generator allows 64).
const CHUNK_REPLICAS: u32 = 50;
/// Healthy requests per second per replica.
const RATE: f64 = 2.0;

/// A fleet size: `replicas` servers over `models` models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fleet {
    pub replicas: u32,
    pub models: u32,
}

impl Fleet {
    /// `1000x50`
    pub fn label(&self) -> String {
        format!("{}x{}", self.replicas, self.models)
    }

    /// Parse `1000x50` (replicas x models).
    pub fn parse(s: &str) -> Result<Fleet, String> {
        let bad = || format!("fleet size {s:?}: expected REPLICASxMODELS, e.g. 1000x50, with at least one replica per model");
        let (r, m) = s.trim().split_once('x').ok_or_else(bad)?;
        let replicas: u32 = r.parse().map_err(|_| bad())?;
        let models: u32 = m.parse().map_err(|_| bad())?;
        if models == 0 || replicas < models {
            return Err(bad());
        }
        Ok(Fleet { replicas, models })
    }

    /// The model names, `bench/model-00` ...
    fn model_name(i: u32) -> String {
        format!("bench/model-{i:02}")
    }

    /// Replicas of each model: as even as possible, the first models taking the remainder.
    fn per_model(&self) -> Vec<u32> {
        (0..self.models).map(|i| self.replicas / self.models + u32::from(i < self.replicas % self.models)).collect()
    }

    /// The generator specs (TOML) whose union is the fleet.
    pub fn chunk_specs(&self) -> Vec<String> {
        let per_model = self.per_model();
        let parts: Vec<u32> = per_model.iter().map(|n| n.div_ceil(CHUNK_REPLICAS)).collect();
        let chunks = parts.iter().copied().max().unwrap_or(1);
        (0..chunks)
            .map(|c| {
                let mut toml = format!(
                    "name = \"bench-{}-c{c}\"\nseed = {}\nstart = \"2026-01-15T08:00:00Z\"\ninterval = \"60s\"\n\
                     warmup = \"5m\"\nbaseline = \"30m\"\nwindow = \"30m\"\nmetrics = \"v1\"\n",
                    self.label(),
                    c + 1
                );
                for (m, (&n, &p)) in per_model.iter().zip(&parts).enumerate() {
                    if c >= p {
                        continue;
                    }
                    // The c-th of p nearly equal parts of n.
                    let share = n * (c + 1) / p - n * c / p;
                    toml.push_str(&format!("\n[[model]]\nname = \"{}\"\nreplicas = {share}\nrate = {RATE}\n", Fleet::model_name(m as u32)));
                }
                toml.push_str(&format!("\n[incident]\nkind = \"kv-cache-pressure\"\nmodel = \"{}\"\n", Fleet::model_name(0)));
                toml
            })
            .collect()
    }
}

/// What building a fleet's data cost, stored with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Built {
    pub fleet: String,
    pub chunks: usize,
    /// Simulating and writing OpenMetrics (all chunks), then merging them.
    pub generate_secs: f64,
    pub openmetrics_bytes: u64,
    pub samples: u64,
    /// `promtool tsdb create-blocks-from openmetrics` alone (absent when only VictoriaMetrics
    /// was loaded).
    pub backfill_secs: Option<f64>,
    /// End of the diagnosed window (`--at`).
    pub window_end: DateTime<Utc>,
}

/// A fleet's VictoriaMetrics storage and what importing it cost (`vm.json` beside it).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VmBuilt {
    /// The generation that fed the import.
    pub built: Built,
    pub imported: vm::Imported,
}

/// A fleet's data, ready for the backends asked for.
pub struct Prepared {
    /// The Prometheus TSDB (built only when Prometheus is measured).
    pub tsdb: PathBuf,
    pub built: Built,
    /// False when the TSDB came from the cache (its build times are from the run that built it).
    pub fresh: bool,
    /// The VictoriaMetrics storage directory, when VictoriaMetrics is measured.
    pub vm: Option<PreparedVm>,
}

pub struct PreparedVm {
    pub storage: PathBuf,
    pub built: VmBuilt,
    /// False when the storage came from the cache.
    pub fresh: bool,
}

/// Build (or reuse) a fleet's data under `out/data/`: the Prometheus TSDB when `prometheus`, the
/// VictoriaMetrics storage when `victoria`. Both come from one generated OpenMetrics file.
pub fn prepare(rt: &tokio::runtime::Runtime, fleet: Fleet, out: &Path, fresh: bool, prometheus: bool, victoria: bool) -> Result<Prepared, String> {
    let specs = fleet.chunk_specs();
    let key = fnv1a(format!("{DATA_VERSION}\n{}\n{}", specs.join("\n"), generator_fingerprint()).as_bytes());
    let dir = out.join("data").join(format!("{}-{key:016x}", fleet.label()));
    let tsdb = dir.join("tsdb");
    let storage = dir.join("vm");
    let meta_path = dir.join("built.json");
    let vm_meta_path = dir.join("vm.json");
    let cached_tsdb = (prometheus && !fresh).then(|| read_json::<Built>(&meta_path)).flatten();
    let cached_vm = (victoria && !fresh).then(|| read_json::<VmBuilt>(&vm_meta_path)).flatten();
    let need_tsdb = prometheus && cached_tsdb.is_none();
    let need_vm = victoria && cached_vm.is_none();
    if !need_tsdb && !need_vm {
        let built = cached_tsdb.clone().or_else(|| cached_vm.as_ref().map(|v| v.built.clone())).ok_or("no backend asked for")?;
        let vm = cached_vm.map(|built| PreparedVm { storage, built, fresh: false });
        return Ok(Prepared { tsdb, built, fresh: false, vm });
    }
    // Data of this size from another generator or spec is stale: remove it, and what is rebuilt here.
    let prefix = format!("{}-", fleet.label());
    for old in std::fs::read_dir(out.join("data")).into_iter().flatten().flatten() {
        if old.file_name().to_string_lossy().starts_with(&prefix) && old.path() != dir {
            std::fs::remove_dir_all(old.path()).map_err(|e| format!("cannot remove the old data in {}: {e}", old.path().display()))?;
        }
    }
    let rebuilt: &[(bool, &Path)] = &[(need_tsdb, &tsdb), (need_tsdb, &meta_path), (need_vm, &storage), (need_vm, &vm_meta_path)];
    for (_, p) in rebuilt.iter().filter(|(need, p)| *need && p.exists()) {
        let removed = if p.is_dir() { std::fs::remove_dir_all(p) } else { std::fs::remove_file(p) };
        removed.map_err(|e| format!("cannot remove the old data in {}: {e}", p.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;

    // Only VictoriaMetrics, and more than one chunk: each chunk is imported as it is generated,
    // never merged into one file (10,000 replicas would be about 30 GB of OpenMetrics).
    if need_vm && !prometheus && specs.len() > 1 {
        let vm_built = generate_into_vm(rt, fleet, &specs, &dir, &storage)?;
        write_json(&vm_meta_path, &vm_built)?;
        let built = vm_built.built.clone();
        return Ok(Prepared { tsdb, built, fresh: true, vm: Some(PreparedVm { storage, built: vm_built, fresh: true }) });
    }
    let (om, mut built) = generate(fleet, &specs, &dir)?;
    let result = (|| -> Result<Prepared, String> {
        if need_tsdb {
            built.backfill_secs = Some(backfill(fleet, &om, &tsdb, &built)?);
            write_json(&meta_path, &built)?;
        }
        let built_tsdb = cached_tsdb.map_or((built.clone(), true), |b| (b, false));
        let vm = if need_vm {
            let vm_built = VmBuilt { built: Built { backfill_secs: None, ..built.clone() }, imported: import_vm(rt, fleet, &om, &storage, &dir)? };
            write_json(&vm_meta_path, &vm_built)?;
            Some(PreparedVm { storage: storage.clone(), built: vm_built, fresh: true })
        } else {
            cached_vm.map(|built| PreparedVm { storage: storage.clone(), built, fresh: false })
        };
        Ok(Prepared { tsdb: tsdb.clone(), built: built_tsdb.0, fresh: built_tsdb.1, vm })
    })();
    let _ = std::fs::remove_file(&om);
    result
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The chunks' generator specs, parsed.
fn parse_specs(fleet: Fleet, specs: &[String]) -> Result<Vec<ScenarioSpec>, String> {
    specs.iter().map(|t| ScenarioSpec::from_toml_str(t).map_err(|e| format!("fleet {}: the generated spec is invalid: {e}\n{t}", fleet.label()))).collect()
}

/// Generate the fleet's OpenMetrics file in `dir`; returns it and what it cost (no backfill yet).
fn generate(fleet: Fleet, specs: &[String], dir: &Path) -> Result<(PathBuf, Built), String> {
    let parsed = parse_specs(fleet, specs)?;
    let window_end = parsed[0].window_end();

    eprintln!("[{}] generating {} replicas in {} chunk(s)", fleet.label(), fleet.replicas, parsed.len());
    let started = Instant::now();
    let mut chunk_files = Vec::new();
    for (c, spec) in parsed.iter().enumerate() {
        let path = dir.join(format!("chunk-{c}.om"));
        let file = File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        generate_openmetrics(spec, &mut w).and_then(|()| w.flush()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        chunk_files.push(path);
    }
    let om = dir.join("fleet.om");
    let samples = merge(&chunk_files, &om)?;
    for f in &chunk_files {
        let _ = std::fs::remove_file(f);
    }
    let built = Built {
        fleet: fleet.label(),
        chunks: parsed.len(),
        generate_secs: started.elapsed().as_secs_f64(),
        openmetrics_bytes: std::fs::metadata(&om).map(|m| m.len()).unwrap_or(0),
        samples,
        backfill_secs: None,
        window_end,
    };
    Ok((om, built))
}

/// Generate the fleet chunk by chunk, importing each into a VictoriaMetrics started on `storage`
/// (then stopped) before the next is written; only one chunk's OpenMetrics is on disk at a time.
fn generate_into_vm(rt: &tokio::runtime::Runtime, fleet: Fleet, specs: &[String], dir: &Path, storage: &Path) -> Result<VmBuilt, String> {
    let parsed = parse_specs(fleet, specs)?;
    let window_end = parsed[0].window_end();
    eprintln!("[{}] generating {} replicas in {} chunk(s), each imported into VictoriaMetrics as it is written", fleet.label(), fleet.replicas, parsed.len());
    let started = Instant::now();
    let (mut generate_secs, mut openmetrics_bytes) = (0.0, 0u64);
    let mut imported = rt.block_on(async {
        let server = vm::start(storage, dir, "vm-import.log").await?;
        let mut sent = vm::Sent::default();
        for (c, spec) in parsed.iter().enumerate() {
            let path = dir.join(format!("chunk-{c}.om"));
            let generated = Instant::now();
            let file = File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            let mut w = BufWriter::with_capacity(1 << 20, file);
            generate_openmetrics(spec, &mut w).and_then(|()| w.flush()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            drop(w);
            generate_secs += generated.elapsed().as_secs_f64();
            openmetrics_bytes += std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            eprintln!("[{}] chunk {} of {}: {:.1} GB written, importing", fleet.label(), c + 1, parsed.len(), openmetrics_bytes as f64 / 1e9);
            let result = sent.add(&server.url, &path, (c > 0).then_some(c)).await;
            let _ = std::fs::remove_file(&path);
            result.map_err(|e| format!("{e}\nits log:\n{}", server.log_text()))?;
        }
        sent.finish(&server.url, started).await.map_err(|e| format!("{e}\nits log:\n{}", server.log_text()))
    })?;
    imported.storage_bytes = vm::dir_bytes(storage);
    say_imported(fleet, &imported, " with the generation");
    let built =
        Built { fleet: fleet.label(), chunks: parsed.len(), generate_secs, openmetrics_bytes, samples: imported.samples, backfill_secs: None, window_end };
    Ok(VmBuilt { built, imported })
}

/// promtool's backfill of `om` into `tsdb`; returns its time.
fn backfill(fleet: Fleet, om: &Path, tsdb: &Path, built: &Built) -> Result<f64, String> {
    std::fs::create_dir_all(tsdb).map_err(|e| format!("cannot create {}: {e}", tsdb.display()))?;
    eprintln!("[{}] backfilling {} samples ({:.1} GB of OpenMetrics) with promtool", fleet.label(), built.samples, built.openmetrics_bytes as f64 / 1e9);
    let started = Instant::now();
    let output = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(om)
        .arg(tsdb)
        .output()
        .map_err(|e| format!("cannot run promtool: {e}. Install the Debian package `prometheus` (scripts/bench.sh does)"))?;
    let backfill_secs = started.elapsed().as_secs_f64();
    if !output.status.success() {
        return Err(format!(
            "promtool could not backfill {} ({}):\n{}{}",
            om.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(backfill_secs)
}

/// Import `om` into a VictoriaMetrics started on `storage` (then stopped, so its data is on disk).
fn import_vm(rt: &tokio::runtime::Runtime, fleet: Fleet, om: &Path, storage: &Path, dir: &Path) -> Result<vm::Imported, String> {
    eprintln!("[{}] importing {} into VictoriaMetrics", fleet.label(), om.display());
    let mut imported = rt.block_on(async {
        let server = vm::start(storage, dir, "vm-import.log").await?;
        vm::import(&server.url, om).await.map_err(|e| format!("{e}\nits log:\n{}", server.log_text()))
    })?;
    imported.storage_bytes = vm::dir_bytes(storage);
    say_imported(fleet, &imported, "");
    Ok(imported)
}

/// The import's line on stderr; `how` after its time (" with the generation").
fn say_imported(fleet: Fleet, imported: &vm::Imported, how: &str) {
    eprintln!(
        "[{}] imported {} samples ({:.1} GB of text, {} requests) in {:.1} s{how}, searchable {:.1} s later",
        fleet.label(),
        imported.samples,
        imported.text_bytes as f64 / 1e9,
        imported.requests,
        imported.import_secs,
        imported.searchable_secs
    );
}

/// One metric family's lines in a chunk file: `[start, end)` byte offsets, header lines included.
struct Section {
    name: String,
    start: u64,
    end: u64,
}

/// Merge chunk files into one OpenMetrics file, family by family, tagging the replicas of every
/// chunk but the first. Returns the number of samples written.
fn merge(chunks: &[PathBuf], out: &Path) -> Result<u64, String> {
    let open = |p: &Path| File::open(p).map_err(|e| format!("cannot open {}: {e}", p.display()));
    let mut index: Vec<Vec<Section>> = Vec::new();
    for path in chunks {
        index.push(sections(BufReader::with_capacity(1 << 20, open(path)?)).map_err(|e| format!("cannot read {}: {e}", path.display()))?);
    }
    // Families in order of first appearance.
    let mut order: Vec<String> = Vec::new();
    for s in index.iter().flatten() {
        if !order.contains(&s.name) {
            order.push(s.name.clone());
        }
    }
    let file = File::create(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    let mut readers: Vec<BufReader<File>> = chunks.iter().map(|p| open(p).map(|f| BufReader::with_capacity(1 << 20, f))).collect::<Result<_, _>>()?;
    let werr = |e: std::io::Error| format!("cannot write {}: {e}", out.display());
    let mut samples = 0u64;
    let mut line = Vec::with_capacity(512);
    for name in &order {
        let mut header_written = false;
        for (c, (sections, reader)) in index.iter().zip(readers.iter_mut()).enumerate() {
            let Some(s) = sections.iter().find(|s| &s.name == name) else { continue };
            reader.seek(SeekFrom::Start(s.start)).map_err(|e| e.to_string())?;
            let mut part = reader.by_ref().take(s.end - s.start);
            loop {
                line.clear();
                if part.read_until(b'\n', &mut line).map_err(|e| e.to_string())? == 0 {
                    break;
                }
                if line.starts_with(b"#") {
                    if !header_written {
                        w.write_all(&line).map_err(werr)?;
                    }
                    continue;
                }
                samples += 1;
                if c == 0 {
                    w.write_all(&line).map_err(werr)?;
                } else {
                    w.write_all(&tag_replica(&line, c)).map_err(werr)?;
                }
            }
            header_written = true;
        }
    }
    w.write_all(b"# EOF\n").and_then(|()| w.flush()).map_err(werr)?;
    Ok(samples)
}

/// Where each family starts and ends in one generator output.
fn sections(mut r: impl BufRead) -> std::io::Result<Vec<Section>> {
    let mut out: Vec<Section> = Vec::new();
    let mut pos = 0u64;
    let mut line = Vec::with_capacity(512);
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line)? as u64;
        if n == 0 {
            break;
        }
        if line.starts_with(b"# TYPE ") || line.starts_with(b"# EOF") {
            if let Some(last) = out.last_mut() {
                last.end = pos;
            }
            if line.starts_with(b"# TYPE ") {
                let name = String::from_utf8_lossy(&line[7..]).split_whitespace().next().unwrap_or_default().to_string();
                out.push(Section { name, start: pos, end: u64::MAX });
            }
        }
        pos += n;
    }
    if let Some(last) = out.last_mut() {
        if last.end == u64::MAX {
            last.end = pos;
        }
    }
    Ok(out)
}

/// `instance="x-3:8000"` -> `instance="x-3-c2:8000"`, `pod="p"` -> `pod="c2-p"`.
pub fn tag_replica(line: &[u8], chunk: usize) -> Vec<u8> {
    let text = String::from_utf8_lossy(line);
    text.replace(":8000\"", &format!("-c{chunk}:8000\"")).replace("pod=\"", &format!("pod=\"c{chunk}-")).into_bytes()
}

/// A hash of the generator's source (`crates/sim/src/`), so a changed generator rebuilds the data.
fn generator_fingerprint() -> u64 {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.clone(), std::fs::read(&p).unwrap_or_default()));
            }
        }
    }
    let mut files = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/sim/src"), &mut files);
    files.sort();
    fnv1a(&files.into_iter().flat_map(|(_, bytes)| bytes).collect::<Vec<u8>>())
}

/// FNV-1a: a stable hash for cache keys (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}
