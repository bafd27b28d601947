//! `--reopen-after-kill`: how long an engine takes to open after the process that was writing to it
//! was killed (SIGKILL, no close, no flush), and whether the loaded records are all there.
//!
//! Both sides run in forked children, so the engine under test never runs in the bench process
//! itself: child 1 opens the engine in a fresh directory, runs the same load as the main run, says
//! so over a pipe and waits; the bench kills it with SIGKILL mid-life (background work included);
//! child 2 opens the directory (timed), reads back a sample of the loaded keys (timed too: the
//! first reads after a reopen can pay for recovery work an engine deferred) and reports. The
//! measurements run before any engine runs in the bench process, so the process has one thread
//! at each fork (engines with background threads, like RocksDB's, are not fork-safe once
//! started).

use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::adapter::{KvAdapter, OpenParams};
use crate::config::BenchConfig;
use crate::driver::{run_phase, OpSource, PhaseInputs, PhaseLimit};
use crate::engines::{self, EngineSource, OpenError};
use crate::workload::trace::{value_pool, LoadTrace};

/// Keys read back after the reopen (spread evenly over every thread's load).
const SAMPLED_KEYS: u64 = 10_000;

/// What one kill-and-reopen measured.
#[derive(Clone, Debug, PartialEq)]
pub struct KillReopen {
    pub reopen_ms: f64,
    /// Reading the sampled keys back, right after the reopen, one at a time.
    pub sampled_reads_ms: f64,
    pub sampled_keys: u64,
    pub found_keys: u64,
    pub page_cache_dropped: bool,
}

impl KillReopen {
    pub fn note(&self) -> String {
        format!(
            "SIGKILL right after the load, no flush; {} of {} sampled keys found, read in {:.1} ms{}",
            self.found_keys,
            self.sampled_keys,
            self.sampled_reads_ms,
            if self.page_cache_dropped { "; page cache dropped before the reopen" } else { "" }
        )
    }
}

/// Loads into `dir` in a child, kills it, and times a reopen in a second child.
pub fn measure(
    config: &BenchConfig,
    name: &str,
    source: EngineSource,
    params: &OpenParams,
) -> Result<KillReopen, String> {
    std::fs::create_dir_all(&params.dir)
        .map_err(|e| format!("cannot create {}: {e}", params.dir.display()))?;
    let loaded = in_child(|out| {
        let adapter = open(name, source, params)?;
        load(config, adapter.as_ref())?;
        // Stay alive with the engine open (and its background work running) until killed.
        out.write_all(b"loaded\n").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    })?;
    let mut kill = loaded.kill_when_line_arrives()?;
    kill.kill_and_wait();
    let page_cache_dropped = config.drop_caches && crate::metrics::drop_page_cache().is_ok();
    let reopened = in_child(|out| {
        let keys = sampled_load_keys(config); // before the clock starts
        let started = Instant::now();
        let adapter = open(name, source, params)?;
        let reopen_ms = started.elapsed().as_secs_f64() * 1000.0;
        let started = Instant::now();
        let found = read_back(&keys, adapter.as_ref())?;
        let sampled_reads_ms = started.elapsed().as_secs_f64() * 1000.0;
        let sampled = keys.len();
        let _ = adapter.close();
        writeln!(out, "{reopen_ms} {sampled} {found} {sampled_reads_ms}").map_err(|e| e.to_string())?;
        Ok(())
    })?;
    let line = reopened.finish()?;
    let mut fields = line.split_whitespace().map(str::parse::<f64>);
    let mut next = || fields.next().and_then(Result::ok).ok_or_else(|| format!("bad report {line:?}"));
    Ok(KillReopen {
        reopen_ms: next()?,
        sampled_keys: next()? as u64,
        found_keys: next()? as u64,
        sampled_reads_ms: next()?,
        page_cache_dropped,
    })
}

fn open(name: &str, source: EngineSource, params: &OpenParams) -> Result<Box<dyn KvAdapter>, String> {
    engines::open(name, source, params).map_err(|e| match e {
        OpenError::Unsupported(m) | OpenError::Failed(m) => m,
    })
}

fn load(config: &BenchConfig, adapter: &dyn KvAdapter) -> Result<(), String> {
    let trace = config.trace_params();
    let pools: Vec<Vec<u8>> = (0..config.threads).map(|t| value_pool(&trace, t)).collect();
    let inputs = PhaseInputs {
        adapter,
        keys: config.keys,
        value_pools: &pools,
        record_bytes_estimate: config.record_bytes_estimate(),
        label: String::new(),
        quiet: true,
    };
    let loads = (0..config.threads).map(|t| LoadTrace::new(&trace, t)).collect();
    let limit = PhaseLimit { total_ops: Some(config.records), ..PhaseLimit::default() };
    let (m, _) = run_phase(&inputs, loads, limit);
    match m.error {
        Some(e) => Err(format!("load failed: {e}")),
        None => Ok(()),
    }
}

/// Every k-th key of every thread's load trace (regenerated), about `SAMPLED_KEYS` in all.
fn sampled_load_keys(config: &BenchConfig) -> Vec<Vec<u8>> {
    let trace = config.trace_params();
    let stride = (config.records / SAMPLED_KEYS).max(1);
    let mut keys = Vec::new();
    for t in 0..config.threads {
        let mut ops = LoadTrace::new(&trace, t);
        let mut i = 0u64;
        while let Some(op) = ops.next_op() {
            if i.is_multiple_of(stride) {
                let mut key = Vec::new();
                config.keys.write_key(op.keynum, &mut key);
                keys.push(key);
            }
            i += 1;
        }
    }
    keys
}

/// Reads `keys` back one at a time: how many were found.
fn read_back(keys: &[Vec<u8>], adapter: &dyn KvAdapter) -> Result<u64, String> {
    let mut found = 0;
    for key in keys {
        if adapter.get(key).map_err(|e| format!("get after reopen: {e:#}"))?.is_some() {
            found += 1;
        }
    }
    Ok(found)
}

/// A forked child whose stdout-like pipe the parent reads.
struct Child {
    pid: libc::pid_t,
    from_child: std::fs::File,
}

/// Forks; the child runs `body` with the pipe's write end, then exits (status 0 on `Ok`, 1 after
/// writing `error: ...` on `Err`). The child dies with the bench (PR_SET_PDEATHSIG).
fn in_child(body: impl FnOnce(&mut std::fs::File) -> Result<(), String>) -> Result<Child, String> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created by pipe2 and are owned by nothing else.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the bench process is single-threaded here (see the module doc); the child only runs
    // Rust code and leaves with `_exit`, never returning into the parent's stack.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        drop(read_end);
        // SAFETY: prctl(PR_SET_PDEATHSIG) has no memory-safety preconditions.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        let mut out = std::fs::File::from(write_end);
        let status = match body(&mut out) {
            Ok(()) => 0,
            Err(e) => {
                let _ = writeln!(out, "error: {}", engines::one_line(&e));
                1
            }
        };
        let _ = out.flush();
        // SAFETY: _exit ends the child without running the parent's atexit handlers or destructors.
        unsafe { libc::_exit(status) };
    }
    drop(write_end);
    Ok(Child { pid, from_child: std::fs::File::from(read_end) })
}

impl Child {
    fn read_line(&mut self) -> Result<String, String> {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match self.from_child.read(&mut byte) {
                Ok(0) => break,
                Ok(_) if byte[0] == b'\n' => break,
                Ok(_) => line.push(byte[0]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("reading from the child: {e}")),
            }
        }
        let line = String::from_utf8_lossy(&line).into_owned();
        if let Some(e) = line.strip_prefix("error: ") {
            return Err(e.to_string());
        }
        if line.is_empty() {
            return Err("the child process died without reporting".into());
        }
        Ok(line)
    }

    /// Waits for the child's first line ("loaded"), then hands it over to be killed.
    fn kill_when_line_arrives(mut self) -> Result<Child, String> {
        match self.read_line() {
            Ok(_) => Ok(self),
            Err(e) => {
                self.kill_and_wait();
                Err(e)
            }
        }
    }

    fn kill_and_wait(&mut self) {
        // SAFETY: `pid` is our own child, not yet reaped.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }

    /// The child's one report line, after it exited.
    fn finish(mut self) -> Result<String, String> {
        let line = self.read_line();
        let mut status = 0;
        // SAFETY: `pid` is our own child, not yet reaped.
        unsafe { libc::waitpid(self.pid, &mut status, 0) };
        line
    }
}

/// Removes the kill measurement's directory.
pub fn clean_up(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}
