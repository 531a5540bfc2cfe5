//! Run a child process and take its wall time and CPU time from the kernel, and its peak memory.
//!
//! `wait4` returns the child's own `rusage` (`getrusage(RUSAGE_CHILDREN)` would fold in the
//! Prometheus servers this benchmark also starts). The clock runs from just before `spawn` to the
//! moment the child is reaped: what a user waiting at a prompt sees, process start-up included.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How one run ended.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    pub wall: Duration,
    /// CPU time (user + system) the process used.
    pub cpu: Duration,
    /// Exit code; `None` when a signal ended it.
    pub code: Option<i32>,
}

/// Spawn `cmd` with stdin closed, wait for it and measure it. Standard output and error go where
/// the caller pointed them (files, so nothing blocks on a full pipe).
pub fn run(cmd: &mut Command) -> Result<Finished, String> {
    cmd.stdin(Stdio::null());
    let started = Instant::now();
    let child = cmd.spawn().map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: rusage is plain old data; an all-zero value is valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: pid is our own child, not yet reaped; both pointers are to live locals.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(format!("cannot wait for {:?}: {err}", cmd.get_program()));
        }
    }
    let wall = started.elapsed();
    // The child is reaped; dropping the handle neither waits nor kills.
    drop(child);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64);
    Ok(Finished { wall, cpu: tv(usage.ru_utime) + tv(usage.ru_stime), code })
}

/// Run `cmd` `n` times with its output thrown away; every run must exit with `expect`.
pub fn repeat(cmd: &mut Command, n: usize, expect: i32) -> Result<Vec<Finished>, String> {
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let f = run(cmd)?;
        if f.code != Some(expect) {
            return Err(format!("{cmd:?} exited with {:?}, expected {expect}", f.code));
        }
        out.push(f);
    }
    Ok(out)
}

/// Peak RSS in KiB of `program args`, the largest of `n` runs, taken by `/usr/bin/time`.
///
/// Not from [`run`]: a child spawned by this (large) benchmark process inherits its RSS high-water
/// mark across `exec`, so `wait4` would report the benchmark's own peak whenever it is larger.
/// `/usr/bin/time` is small and forks the measured program itself.
pub fn peak_rss_kib(program: &str, args: &[String], n: usize) -> Result<u64, String> {
    let out = std::env::temp_dir().join(format!("vllm-diag-bench-rss-{}", std::process::id()));
    let mut peak = 0;
    for _ in 0..n {
        let f = run(Command::new("/usr/bin/time").arg("-f").arg("%M").arg("-o").arg(&out).arg(program).args(args).stdout(Stdio::null()).stderr(Stdio::null()))
            .map_err(|e| format!("{e}. Install the Debian package `time` (scripts/bench.sh does)"))?;
        if f.code != Some(0) {
            return Err(format!("{program} {args:?} under /usr/bin/time exited with {:?}", f.code));
        }
        let text = std::fs::read_to_string(&out).map_err(|e| format!("cannot read {}: {e}", out.display()))?;
        let kib: u64 = text.lines().last().and_then(|l| l.trim().parse().ok()).ok_or_else(|| format!("/usr/bin/time wrote {text:?}, not a number of KiB"))?;
        peak = peak.max(kib);
    }
    let _ = std::fs::remove_file(&out);
    Ok(peak)
}
