//! Group-commit benchmark on real files.
//!
//! ```text
//! cargo run --release -p strata-wal --example commit_rate -- \
//!     --dir /tmp --seconds 5 --threads 1,8 --payload-bytes 128 --buffered-threads 1,4
//! ```
//! Part 1: each thread loops `append` + `commit(Sync)`; for each thread count it prints commits/s,
//! fdatasyncs/s and commits per sync. With several writers, commits per sync should be well above
//! 1: concurrent commits share one write and one fdatasync.
//!
//! Part 2 (`--buffered-threads`, empty to skip): each thread loops `append` + `commit(Buffered)`,
//! first alone, then while one more thread calls `sync()` back to back (an engine flushing its
//! log). It prints Buffered commits/s, flushes/s and the p99 / max Buffered commit latency: a
//! Buffered commit that waits for someone else's fdatasync shows up there.
//!
//! The log lives in a temporary directory under `--dir`, removed afterwards.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_core::Durability;
use strata_io::{FileStorage, Storage};
use strata_wal::{Wal, WalOptions};

struct Args {
    dir: PathBuf,
    seconds: f64,
    threads: Vec<usize>,
    payload_bytes: usize,
    buffered_threads: Vec<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        dir: std::env::temp_dir(),
        seconds: 5.0,
        threads: vec![1, 8],
        payload_bytes: 128,
        buffered_threads: vec![1, 4],
    };
    let mut iter = std::env::args().skip(1);
    while let Some(flag) = iter.next() {
        let mut value = || iter.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(value()?),
            "--seconds" => args.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--threads" => args.threads = parse_counts("--threads", &value()?)?,
            "--buffered-threads" => args.buffered_threads = parse_counts("--buffered-threads", &value()?)?,
            "--payload-bytes" => {
                args.payload_bytes = value()?.parse().map_err(|e| format!("--payload-bytes: {e}"))?
            }
            "-h" | "--help" => {
                return Err(
                    "usage: commit_rate [--dir DIR] [--seconds S] [--threads 1,8] [--payload-bytes N] \
                     [--buffered-threads 1,4]"
                        .into(),
                )
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if args.threads.is_empty()
        || args.threads.contains(&0)
        || args.buffered_threads.contains(&0)
        || args.seconds <= 0.0
    {
        return Err("--threads needs positive counts and --seconds a positive duration".into());
    }
    Ok(args)
}

fn parse_counts(flag: &str, list: &str) -> Result<Vec<usize>, String> {
    list.split(',')
        .filter(|t| !t.trim().is_empty())
        .map(|t| t.trim().parse().map_err(|e| format!("{flag} {t:?}: {e}")))
        .collect()
}

struct RunResult {
    commits: u64,
    syncs: u64,
    elapsed: Duration,
}

/// A log on real files in a fresh temporary directory under `--dir`.
fn open_log(args: &Args) -> strata_core::Result<(tempfile::TempDir, Arc<Wal>)> {
    let dir =
        tempfile::Builder::new().prefix("strata-wal-commit-rate-").tempdir_in(&args.dir).map_err(|e| {
            strata_core::Error::io(format!("creating a temporary directory in {}", args.dir.display()), e)
        })?;
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(dir.path(), true)?);
    let (wal, _) = Wal::open(storage, WalOptions::default(), 1, &mut |_, _| Ok(()))?;
    Ok((dir, Arc::new(wal)))
}

fn close_log(dir: tempfile::TempDir, wal: Arc<Wal>) -> strata_core::Result<()> {
    wal.close()?;
    drop(wal);
    dir.close().map_err(|e| strata_core::Error::io("removing the temporary directory", e))
}

fn join_all<T>(handles: Vec<std::thread::JoinHandle<strata_core::Result<T>>>) -> strata_core::Result<Vec<T>> {
    handles
        .into_iter()
        .map(|h| h.join().map_err(|_| strata_core::Error::invalid("a benchmark thread panicked"))?)
        .collect()
}

fn run(args: &Args, threads: usize) -> strata_core::Result<RunResult> {
    let (dir, wal) = open_log(args)?;
    // Stands in for the engine's write lock: append order = apply order; commit waits outside it.
    let engine_lock = Arc::new(parking_lot::Mutex::new(()));
    let commits = Arc::new(AtomicU64::new(0));
    let payload = vec![0xC5u8; args.payload_bytes];
    let syncs_before = wal.stats().syncs;
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.seconds);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (wal, engine_lock, commits, payload) =
                (wal.clone(), engine_lock.clone(), commits.clone(), payload.clone());
            std::thread::spawn(move || -> strata_core::Result<()> {
                while Instant::now() < deadline {
                    let lsn = {
                        let _guard = engine_lock.lock();
                        wal.append(&payload)?
                    };
                    wal.commit(lsn, Durability::Sync)?;
                    commits.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            })
        })
        .collect();
    join_all(workers)?;
    let elapsed = start.elapsed();
    let syncs = wal.stats().syncs - syncs_before;
    close_log(dir, wal)?;
    Ok(RunResult { commits: commits.load(Ordering::Relaxed), syncs, elapsed })
}

/// Buffered commit latencies in 1 µs buckets up to `LATENCY_BUCKETS` µs (the last one collects
/// everything longer), plus the exact maximum.
struct Latencies {
    buckets: Vec<u64>,
    max: Duration,
}

const LATENCY_BUCKETS: usize = 100_000;

impl Latencies {
    fn new() -> Latencies {
        Latencies { buckets: vec![0; LATENCY_BUCKETS + 1], max: Duration::ZERO }
    }

    fn record(&mut self, latency: Duration) {
        let micros = usize::try_from(latency.as_micros()).unwrap_or(usize::MAX).min(LATENCY_BUCKETS);
        if let Some(bucket) = self.buckets.get_mut(micros) {
            *bucket += 1;
        }
        self.max = self.max.max(latency);
    }

    fn merge(&mut self, other: &Latencies) {
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.max = self.max.max(other.max);
    }

    fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Upper bound (in µs) of the `quantile` latency.
    fn quantile_micros(&self, quantile: f64) -> usize {
        let target = (self.count() as f64 * quantile).ceil() as u64;
        let mut seen = 0;
        for (micros, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= target.max(1) {
                return micros + 1;
            }
        }
        LATENCY_BUCKETS
    }
}

struct BufferedResult {
    latencies: Latencies,
    flushes: u64,
    elapsed: Duration,
}

/// `threads` writers loop `append` + `commit(Buffered)`; with `flusher`, one more thread calls
/// `sync()` back to back meanwhile.
fn run_buffered(args: &Args, threads: usize, flusher: bool) -> strata_core::Result<BufferedResult> {
    let (dir, wal) = open_log(args)?;
    let engine_lock = Arc::new(parking_lot::Mutex::new(()));
    let payload = vec![0xC5u8; args.payload_bytes];
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(args.seconds);
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (wal, engine_lock, payload) = (wal.clone(), engine_lock.clone(), payload.clone());
            std::thread::spawn(move || -> strata_core::Result<Latencies> {
                let mut latencies = Latencies::new();
                while Instant::now() < deadline {
                    let began = Instant::now();
                    let lsn = {
                        let _guard = engine_lock.lock();
                        wal.append(&payload)?
                    };
                    wal.commit(lsn, Durability::Buffered)?;
                    latencies.record(began.elapsed());
                }
                Ok(latencies)
            })
        })
        .collect();
    let flusher = flusher.then(|| {
        let wal = wal.clone();
        std::thread::spawn(move || -> strata_core::Result<u64> {
            let mut flushes = 0;
            while Instant::now() < deadline {
                wal.sync()?;
                flushes += 1;
            }
            Ok(flushes)
        })
    });
    let mut latencies = Latencies::new();
    for worker_latencies in join_all(workers)? {
        latencies.merge(&worker_latencies);
    }
    let flushes = join_all(flusher.into_iter().collect())?.into_iter().sum();
    let elapsed = start.elapsed();
    close_log(dir, wal)?;
    Ok(BufferedResult { latencies, flushes, elapsed })
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    println!(
        "WAL commit rate: append + commit(Sync), {} B payloads, {} s per run, dir {}",
        args.payload_bytes,
        args.seconds,
        args.dir.display()
    );
    println!(
        "{:>8} {:>12} {:>10} {:>10} {:>16}",
        "threads", "commits", "commits/s", "syncs/s", "commits/sync"
    );
    for &threads in &args.threads {
        match run(&args, threads) {
            Ok(r) => {
                let secs = r.elapsed.as_secs_f64();
                println!(
                    "{threads:>8} {:>12} {:>10.0} {:>10.0} {:>16.2}",
                    r.commits,
                    r.commits as f64 / secs,
                    r.syncs as f64 / secs,
                    r.commits as f64 / r.syncs.max(1) as f64
                );
            }
            Err(e) => {
                eprintln!("run with {threads} threads failed: {e}");
                std::process::exit(1);
            }
        }
    }
    if args.buffered_threads.is_empty() {
        return;
    }
    println!();
    println!("append + commit(Buffered), alone and while one more thread calls sync() back to back");
    println!(
        "{:>8} {:>8} {:>12} {:>10} {:>10} {:>10} {:>10}",
        "threads", "flusher", "commits", "commits/s", "flushes/s", "p99 us", "max us"
    );
    for &threads in &args.buffered_threads {
        for flusher in [false, true] {
            match run_buffered(&args, threads, flusher) {
                Ok(r) => {
                    let secs = r.elapsed.as_secs_f64();
                    let commits = r.latencies.count();
                    println!(
                        "{threads:>8} {:>8} {commits:>12} {:>10.0} {:>10.0} {:>10} {:>10}",
                        if flusher { "on" } else { "off" },
                        commits as f64 / secs,
                        r.flushes as f64 / secs,
                        r.latencies.quantile_micros(0.99),
                        r.latencies.max.as_micros()
                    );
                }
                Err(e) => {
                    eprintln!("Buffered run with {threads} threads failed: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
}
