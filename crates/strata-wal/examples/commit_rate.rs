//! Group-commit benchmark on real files: each thread loops `append` + `commit(Sync)`.
//!
//! ```text
//! cargo run --release -p strata-wal --example commit_rate -- \
//!     --dir /tmp --seconds 5 --threads 1,8 --payload-bytes 128
//! ```
//! For each thread count it prints commits/s, fdatasyncs/s and commits per sync. The log lives in
//! a temporary directory under `--dir`, removed afterwards. With several writers, commits per sync
//! should be well above 1: concurrent commits share one write and one fdatasync.

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
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { dir: std::env::temp_dir(), seconds: 5.0, threads: vec![1, 8], payload_bytes: 128 };
    let mut iter = std::env::args().skip(1);
    while let Some(flag) = iter.next() {
        let mut value = || iter.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(value()?),
            "--seconds" => args.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--threads" => {
                args.threads = value()?
                    .split(',')
                    .map(|t| t.trim().parse().map_err(|e| format!("--threads {t:?}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--payload-bytes" => {
                args.payload_bytes = value()?.parse().map_err(|e| format!("--payload-bytes: {e}"))?
            }
            "-h" | "--help" => {
                return Err(
                    "usage: commit_rate [--dir DIR] [--seconds S] [--threads 1,8] [--payload-bytes N]".into(),
                )
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if args.threads.is_empty() || args.threads.contains(&0) || args.seconds <= 0.0 {
        return Err("--threads needs positive counts and --seconds a positive duration".into());
    }
    Ok(args)
}

struct RunResult {
    commits: u64,
    syncs: u64,
    elapsed: Duration,
}

fn run(args: &Args, threads: usize) -> strata_core::Result<RunResult> {
    let dir =
        tempfile::Builder::new().prefix("strata-wal-commit-rate-").tempdir_in(&args.dir).map_err(|e| {
            strata_core::Error::io(format!("creating a temporary directory in {}", args.dir.display()), e)
        })?;
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(dir.path(), true)?);
    let (wal, _) = Wal::open(storage, WalOptions::default(), 1, &mut |_, _| Ok(()))?;
    let wal = Arc::new(wal);
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
    for worker in workers {
        worker.join().map_err(|_| strata_core::Error::invalid("a benchmark thread panicked"))??;
    }
    let elapsed = start.elapsed();
    let syncs = wal.stats().syncs - syncs_before;
    wal.close()?;
    drop(wal);
    dir.close().map_err(|e| strata_core::Error::io("removing the temporary directory", e))?;
    Ok(RunResult { commits: commits.load(Ordering::Relaxed), syncs, elapsed })
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
}
