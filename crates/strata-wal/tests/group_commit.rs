//! Concurrent `commit(.., Sync)` callers share writes and fdatasyncs.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::*;
use strata_core::Durability;
use strata_io::{HookStorage, MemStorage, Storage, SyncHook};
use strata_wal::Wal;

/// MemStorage whose file syncs take `sync_delay`, like a disk, and are counted in `file_syncs`.
fn slow_sync_storage(sync_delay: Duration, file_syncs: Arc<AtomicU64>) -> Arc<dyn Storage> {
    let hook: SyncHook = Arc::new(move |name| {
        thread::sleep(sync_delay);
        // Segment syncs only: `WalStats::syncs` does not count the WAL state file's.
        if !name.contains("state") {
            file_syncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    });
    Arc::new(HookStorage::new(Arc::new(MemStorage::new()), hook))
}

/// `threads` writers each append `commits_per_thread` records under one engine lock (so log order
/// is apply order) and make each durable with `make_durable(wal, lsn, i)`, checking it is durable
/// when that returns. Returns what was applied, in lsn order.
fn concurrent_writers(
    wal: &Arc<Wal>,
    threads: u64,
    commits_per_thread: u64,
    make_durable: fn(&Wal, u64, u64),
) -> Vec<(u64, Vec<u8>)> {
    let engine_lock = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let barrier = Arc::new(Barrier::new(threads as usize));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (wal, engine_lock, barrier) = (wal.clone(), engine_lock.clone(), barrier.clone());
            thread::spawn(move || {
                barrier.wait();
                for i in 0..commits_per_thread {
                    let payload = format!("thread {t} commit {i}").into_bytes();
                    let lsn = {
                        let mut applied = engine_lock.lock();
                        let lsn = wal.append(&payload).unwrap();
                        applied.push((lsn, payload));
                        lsn
                    };
                    make_durable(&wal, lsn, i);
                    assert!(wal.durable_lsn() >= lsn, "lsn {lsn} returned before it was durable");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let mut applied = engine_lock.lock().clone();
    applied.sort();
    applied
}

#[test]
fn eight_threads_of_sync_commits_share_syncs_and_all_become_durable() {
    const THREADS: u64 = 8;
    const COMMITS_PER_THREAD: u64 = 60;
    let file_syncs = Arc::new(AtomicU64::new(0));
    let storage = slow_sync_storage(Duration::from_millis(1), file_syncs.clone());
    let opts = small_opts(64 << 10);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let wal = Arc::new(wal);
    let applied = concurrent_writers(&wal, THREADS, COMMITS_PER_THREAD, |wal, lsn, _| {
        wal.commit(lsn, Durability::Sync).unwrap();
    });
    let commits = THREADS * COMMITS_PER_THREAD;
    let stats = wal.stats();
    assert_eq!(wal.durable_lsn(), commits);
    assert_eq!(stats.syncs, file_syncs.load(Ordering::Relaxed), "{stats:?}");
    assert!(stats.syncs < commits / 2, "group commit should share syncs: {stats:?}");
    assert!(stats.group_commits > 0, "{stats:?}");
    assert!(stats.record_writes < commits / 2, "group commit should share writes: {stats:?}");
    assert!(stats.sync_commits <= commits, "{stats:?}");
    wal.close().unwrap();

    let (_wal, _, replayed) = open(&storage, &opts, 1).unwrap();
    assert_eq!(replayed, applied, "log order equals apply order");
}

#[test]
fn sync_commit_syncs_and_buffered_commit_only_writes() {
    let file_syncs = Arc::new(AtomicU64::new(0));
    let storage = slow_sync_storage(Duration::ZERO, file_syncs.clone());
    let (wal, _, _) = open(&storage, &small_opts(64 << 10), 1).unwrap();
    let lsn = wal.append(b"a").unwrap();
    wal.commit(lsn, Durability::Buffered).unwrap();
    let after_create = file_syncs.load(Ordering::Relaxed);
    assert_eq!(after_create, 1, "creating the segment syncs it once");
    assert_eq!(wal.durable_lsn(), 0);
    let writes = storage.io_stats().write_ops;
    let lsn = wal.append(b"b").unwrap();
    wal.commit(lsn, Durability::Buffered).unwrap();
    assert_eq!(storage.io_stats().write_ops, writes + 1);
    assert_eq!(file_syncs.load(Ordering::Relaxed), after_create);
    wal.commit(lsn, Durability::Sync).unwrap();
    assert_eq!(file_syncs.load(Ordering::Relaxed), after_create + 1);
    assert_eq!(storage.io_stats().write_ops, writes + 1, "nothing left to write");
    assert_eq!(wal.durable_lsn(), 2);
    let lsn = wal.append(b"c").unwrap();
    let bytes = common::read_file(storage.as_ref(), "wal-0000000000000001.log");
    let positions = record_positions(&bytes);
    assert_eq!(positions.len(), 2, "c is still buffered");
    wal.commit(lsn, Durability::Sync).unwrap();
    let bytes = common::read_file(storage.as_ref(), "wal-0000000000000001.log");
    let positions = record_positions(&bytes);
    assert_eq!(positions.iter().map(|p| (p.1, p.2)).collect::<Vec<_>>(), vec![(1, 0), (2, 0), (3, 2)]);
}

/// Flushes (`sync()`) racing with `Sync` commits: each flush makes everything before it durable
/// and writes at most one durability marker, syncs are still shared, and markers never reach the
/// replay.
#[test]
fn concurrent_flushes_and_sync_commits_share_syncs() {
    const THREADS: u64 = 8;
    const COMMITS_PER_THREAD: u64 = 40;
    const FLUSH_EVERY: u64 = 5;
    let file_syncs = Arc::new(AtomicU64::new(0));
    let storage = slow_sync_storage(Duration::from_millis(1), file_syncs.clone());
    let opts = small_opts(64 << 10);
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let wal = Arc::new(wal);
    let applied = concurrent_writers(&wal, THREADS, COMMITS_PER_THREAD, |wal, lsn, i| {
        if i % FLUSH_EVERY == 0 {
            assert!(wal.sync().unwrap() >= lsn);
        } else {
            wal.commit(lsn, Durability::Sync).unwrap();
        }
    });
    let commits = THREADS * COMMITS_PER_THREAD;
    let flushes = THREADS * COMMITS_PER_THREAD / FLUSH_EVERY;
    let stats = wal.stats();
    assert_eq!(stats.records_appended, commits);
    assert_eq!(wal.last_lsn(), commits + stats.durability_markers_appended);
    assert!((1..=flushes).contains(&stats.durability_markers_appended), "{stats:?}");
    assert_eq!(stats.syncs, file_syncs.load(Ordering::Relaxed), "{stats:?}");
    assert!(stats.syncs < commits / 2, "group commit should share syncs: {stats:?}");
    assert!(stats.group_commits > 0, "{stats:?}");
    wal.close().unwrap();

    let (_wal, _, replayed) = open(&storage, &opts, 1).unwrap();
    assert_eq!(replayed, applied, "log order equals apply order; markers are not replayed");
}
