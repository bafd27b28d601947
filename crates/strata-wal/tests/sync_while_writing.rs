//! Write rounds go on while another caller's fdatasync runs: Buffered commits do not wait for it,
//! what they write is not reported durable by it, a failed fdatasync still poisons the log, and
//! under a mix of everything no acknowledged record is lost.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, Error, Result};
use strata_io::{CrashMode, HookStorage, MemStorage, SimStorage, Storage, SyncHook};
use strata_wal::{Lsn, Wal};

const FIRST_SEGMENT: &str = "wal-0000000000000001.log";
const BOUNDED_WAIT: Duration = Duration::from_secs(10);

/// A storage whose next file sync, once armed, announces its file on `entered` and then waits
/// for the test's verdict on `release` (an `Err` fails the sync without syncing).
struct BlockingSync {
    storage: Arc<dyn Storage>,
    armed: Arc<AtomicBool>,
    entered: Receiver<String>,
    release: Sender<Result<()>>,
}

impl BlockingSync {
    fn new(inner: Arc<dyn Storage>) -> BlockingSync {
        let armed = Arc::new(AtomicBool::new(false));
        let (entered_tx, entered) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<Result<()>>();
        let release_rx = Mutex::new(release_rx);
        let hook_armed = armed.clone();
        let hook: SyncHook = Arc::new(move |name| {
            if !hook_armed.swap(false, Ordering::SeqCst) {
                return Ok(());
            }
            let _ = entered_tx.send(name.to_string());
            // A test that panicked drops the sender: the sync fails instead of hanging.
            release_rx.lock().recv().unwrap_or_else(|_| Err(Error::invalid("the test went away")))
        });
        BlockingSync { storage: Arc::new(HookStorage::new(inner, hook)), armed, entered, release }
    }

    /// Arms the next file sync and runs `f` on `wal` in another thread; returns that thread once
    /// it is parked in the armed sync (waiting at most `BOUNDED_WAIT`), with the synced file's name.
    fn park_in_fsync<T: Send + 'static>(
        &self,
        wal: &Arc<Wal>,
        f: impl FnOnce(&Wal) -> T + Send + 'static,
    ) -> (thread::JoinHandle<T>, String) {
        self.armed.store(true, Ordering::SeqCst);
        let wal = wal.clone();
        let parked = thread::spawn(move || f(&wal));
        let file = self.entered.recv_timeout(BOUNDED_WAIT).expect("the armed fdatasync never began");
        (parked, file)
    }
}

/// Runs `f` on another thread and returns its result, failing the test if it takes longer than
/// `BOUNDED_WAIT` (a thread stuck behind the blocked fdatasync).
fn finishes_within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done_tx, done) = mpsc::channel();
    thread::spawn(move || {
        let _ = done_tx.send(f());
    });
    done.recv_timeout(BOUNDED_WAIT)
        .unwrap_or_else(|_| panic!("{what} did not return within {BOUNDED_WAIT:?}"))
}

fn append_buffered(wal: &Arc<Wal>, payload: &'static [u8]) -> Lsn {
    let wal = wal.clone();
    finishes_within("a Buffered commit during another caller's fdatasync", move || {
        let lsn = wal.append(payload).unwrap();
        wal.commit(lsn, Durability::Buffered).unwrap();
        lsn
    })
}

fn lsns_in_first_segment(storage: &dyn Storage) -> Vec<Lsn> {
    record_positions(&read_file(storage, FIRST_SEGMENT)).into_iter().map(|(_, lsn, _)| lsn).collect()
}

/// A log on `blocking` with its first segment created (so the armed sync is a commit's).
fn open_with_a_segment(blocking: &BlockingSync) -> Arc<Wal> {
    let (wal, _, _) = open(&blocking.storage, &small_opts(64 << 10), 1).unwrap();
    let lsn = wal.append(b"creates the segment").unwrap();
    wal.commit(lsn, Durability::Sync).unwrap();
    Arc::new(wal)
}

#[test]
fn a_buffered_commit_completes_while_another_thread_waits_in_fsync() {
    let blocking = BlockingSync::new(Arc::new(MemStorage::new()));
    let wal = open_with_a_segment(&blocking);
    let before = wal.append(b"before the flush").unwrap();
    wal.commit(before, Durability::Buffered).unwrap();
    let (flusher, syncing) = blocking.park_in_fsync(&wal, |wal| wal.sync());
    assert_eq!(syncing, FIRST_SEGMENT);

    let during = append_buffered(&wal, b"during the flush's fdatasync");
    assert!(lsns_in_first_segment(blocking.storage.as_ref()).contains(&during), "not written");
    assert!(wal.durable_lsn() < during, "durable {} covers {during}", wal.durable_lsn());

    blocking.release.send(Ok(())).unwrap();
    assert_eq!(flusher.join().unwrap().unwrap(), before);
    assert!(wal.sync().unwrap() >= during);
    assert!(wal.durable_lsn() >= during);
}

#[test]
fn a_record_written_during_an_fsync_is_not_reported_durable_by_it() {
    let blocking = BlockingSync::new(Arc::new(MemStorage::new()));
    let wal = open_with_a_segment(&blocking);
    // Not written yet: the Sync commit runs a write round first, then the fdatasync.
    let synced = wal.append(b"made durable by the blocked fdatasync").unwrap();
    let (committer, _) = blocking.park_in_fsync(&wal, move |wal| wal.commit(synced, Durability::Sync));
    assert!(lsns_in_first_segment(blocking.storage.as_ref()).contains(&synced));

    let during = append_buffered(&wal, b"written while it runs");
    blocking.release.send(Ok(())).unwrap();
    committer.join().unwrap().unwrap();
    assert_eq!(wal.durable_lsn(), synced, "the fdatasync covers what was written when it began");
    assert!(during > synced);

    let syncs = wal.stats().syncs;
    wal.commit(during, Durability::Sync).unwrap();
    assert_eq!(wal.durable_lsn(), during);
    assert_eq!(wal.stats().syncs, syncs + 1, "the later record needs a sync of its own");
}

#[test]
fn a_failed_fsync_during_buffered_writes_poisons_the_log_and_fails_its_waiters() {
    let sim = SimStorage::new(11);
    let blocking = BlockingSync::new(Arc::new(sim.clone()));
    let wal = open_with_a_segment(&blocking);
    let failing = wal.append(b"its sync fails").unwrap();
    let (committer, _) = blocking.park_in_fsync(&wal, move |wal| wal.commit(failing, Durability::Sync));

    let during = append_buffered(&wal, b"written during the failing fdatasync");
    // Waits behind the running sync round, or (if it starts late) finds the log poisoned.
    let waiter = {
        let wal = wal.clone();
        thread::spawn(move || wal.commit(during, Durability::Sync))
    };
    let eio = std::io::Error::from_raw_os_error(5);
    blocking.release.send(Err(Error::io("syncing (test)", eio))).unwrap();

    let err = committer.join().unwrap().unwrap_err();
    assert!(matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(5)), "{err}");
    let err = finishes_within("the Sync waiter", move || waiter.join().unwrap()).unwrap_err();
    assert!(matches!(&err, Error::Poisoned(msg) if msg.contains("syncing (test)")), "{err}");
    assert_eq!(wal.durable_lsn(), 1, "nothing is reported durable after a failed fdatasync");
    assert!(matches!(wal.append(b"later"), Err(Error::Poisoned(_))));
    assert!(matches!(wal.commit(during, Durability::Buffered), Err(Error::Poisoned(_))));
    assert!(matches!(wal.commit(failing, Durability::Sync), Err(Error::Poisoned(_))));
    assert!(matches!(wal.sync(), Err(Error::Poisoned(_))));

    drop(wal);
    sim.crash(CrashMode::DropUnsynced);
    let (_wal, _, replayed) = open(&blocking.storage, &small_opts(64 << 10), 1).unwrap();
    let lsns: Vec<Lsn> = replayed.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(lsns, vec![1], "only the record synced before the failure survives");
}

/// While a sync round waits in its fdatasync of the active segment: `truncate_before` is not
/// held up and keeps that segment, and a write that fills the segment rolls over once the
/// fdatasync ends. Everything acknowledged survives a crash.
#[test]
fn truncation_and_a_rollover_during_an_fsync_keep_the_synced_segment() {
    let sim = SimStorage::new(12);
    let blocking = BlockingSync::new(Arc::new(sim.clone()));
    let opts = small_opts(1024);
    let (wal, _, _) = open(&blocking.storage, &opts, 1).unwrap();
    let wal = Arc::new(wal);
    for i in 1..=3 {
        let lsn = wal.append(&payload(i, 100)).unwrap();
        wal.commit(lsn, Durability::Sync).unwrap();
    }
    let synced = wal.append(&payload(4, 100)).unwrap();
    let (committer, syncing) = blocking.park_in_fsync(&wal, move |wal| wal.commit(synced, Durability::Sync));

    let truncating = wal.clone();
    finishes_within("truncate_before", move || truncating.truncate_before(synced + 1)).unwrap();
    assert_eq!(segment_names(blocking.storage.as_ref(), &opts), vec![syncing.clone()]);
    // Does not fit: its write round syncs the full segment, after the running fdatasync.
    let rolling = wal.clone();
    let rollover = thread::spawn(move || -> Result<Lsn> {
        let lsn = rolling.append(&[7u8; 900])?;
        rolling.commit(lsn, Durability::Buffered)?;
        Ok(lsn)
    });
    blocking.release.send(Ok(())).unwrap();
    committer.join().unwrap().unwrap();
    let big_lsn = finishes_within("the rollover", move || rollover.join().unwrap()).unwrap();
    assert_eq!(segment_names(blocking.storage.as_ref(), &opts).len(), 2, "the big record rolled over");
    assert_eq!(wal.durable_lsn(), synced, "the full segment is durable, the big record is not yet");
    wal.commit(big_lsn, Durability::Sync).unwrap();

    drop(wal);
    sim.crash(CrashMode::DropUnsynced);
    let (_wal, _, replayed) = open(&blocking.storage, &opts, 1).unwrap();
    let lsns: Vec<Lsn> = replayed.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(lsns, (1..=big_lsn).collect::<Vec<_>>());
}

/// A storage whose file syncs each return `delay` after they took effect (counted in
/// `file_syncs`), so records written meanwhile are on the storage, not durable, and a log that
/// reported them durable anyway loses them at the next crash.
fn late_sync_return(inner: Arc<dyn Storage>, delay: Duration, file_syncs: Arc<AtomicU64>) -> HookStorage {
    let hook: SyncHook = Arc::new(move |name| {
        // Segment syncs only: `WalStats::syncs` does not count the WAL state file's.
        file_syncs.fetch_add(u64::from(!name.contains("state")), Ordering::Relaxed);
        thread::sleep(delay);
        Ok(())
    });
    HookStorage::after(inner, hook)
}

/// Asserts that record `lsn` would survive a power loss now: some segment's durable bytes hold
/// it, unless a checkpoint above it has released its segment.
fn assert_durable_now(sim: &SimStorage, lsn: Lsn, checkpoint: &AtomicU64) {
    let names = sim.list().unwrap();
    let durable = names.iter().filter(|name| name.ends_with(".log")).any(|name| {
        let bytes = sim.durable_contents(name).unwrap_or_default();
        record_positions(&bytes).iter().any(|&(_, record_lsn, _)| record_lsn == lsn)
    });
    assert!(durable || checkpoint.load(Ordering::SeqCst) > lsn, "lsn {lsn} acknowledged but not durable");
}

/// Threads append under an engine lock and commit with every durability, flush with `sync()`,
/// and truncate, on tiny segments (many rollovers and recycled files) with fdatasyncs slow
/// enough for writes to overlap them: each acknowledged record is durable when acknowledged,
/// and after a power loss every acknowledged record is there.
#[test]
fn many_threads_mixing_commits_syncs_and_rollovers_lose_no_acknowledged_record() {
    const THREADS: u64 = 4;
    const OPS_PER_THREAD: u64 = 250;
    let sim = SimStorage::new(13);
    let file_syncs = Arc::new(AtomicU64::new(0));
    let storage: Arc<dyn Storage> =
        Arc::new(late_sync_return(Arc::new(sim.clone()), Duration::from_micros(100), file_syncs.clone()));
    let opts = strata_wal::WalOptions { recycle_segments: 2, ..small_opts(512) };
    let (wal, _, _) = open(&storage, &opts, 1).unwrap();
    let wal = Arc::new(wal);
    let engine_lock = Arc::new(Mutex::new(Vec::<(Lsn, Vec<u8>)>::new()));
    let (acked, checkpoint) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (wal, engine_lock, sim) = (wal.clone(), engine_lock.clone(), sim.clone());
            let (acked, checkpoint) = (acked.clone(), checkpoint.clone());
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t);
                for _ in 0..OPS_PER_THREAD {
                    match rng.gen_range(0..100) {
                        0..=79 => {
                            let len = if rng.gen_bool(0.05) { 600 } else { rng.gen_range(0..120) };
                            let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                            let lsn = {
                                let mut applied = engine_lock.lock();
                                let lsn = wal.append(&bytes).unwrap();
                                applied.push((lsn, bytes));
                                lsn
                            };
                            let durability = match rng.gen_range(0..10) {
                                0..=3 => Durability::Sync,
                                4..=7 => Durability::Buffered,
                                _ => Durability::None,
                            };
                            wal.commit(lsn, durability).unwrap();
                            if durability == Durability::Sync {
                                assert_durable_now(&sim, lsn, &checkpoint);
                                acked.fetch_max(lsn, Ordering::SeqCst);
                            }
                        }
                        80..=94 => {
                            let synced = wal.sync().unwrap();
                            if synced > 0 {
                                assert_durable_now(&sim, synced, &checkpoint);
                            }
                            acked.fetch_max(synced, Ordering::SeqCst);
                        }
                        _ => {
                            // The engine's own state covers everything durable before it truncates.
                            let durable = wal.durable_lsn();
                            checkpoint.fetch_max(durable, Ordering::SeqCst);
                            wal.truncate_before(durable).unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let stats = wal.stats();
    assert!(stats.segments_created + stats.segments_recycled > 10, "too few rollovers: {stats:?}");
    assert!(stats.segments_recycled > 0, "{stats:?}");
    assert_eq!(stats.syncs, file_syncs.load(Ordering::Relaxed), "{stats:?}");
    drop(wal);

    sim.crash(CrashMode::DropUnsynced);
    let mut model = Model {
        appended: engine_lock.lock().clone(),
        acked: acked.load(Ordering::SeqCst),
        checkpoint: checkpoint.load(Ordering::SeqCst),
        ..Model::default()
    };
    model.appended.sort_by_key(|(lsn, _)| *lsn);
    let (_wal, _, replayed) = open(&storage, &opts, model.min_lsn()).unwrap();
    // Every record from the checkpoint up to the last acknowledged one comes back.
    model.check_recovery(&replayed, "after a power loss");
}

/// Review finding (session 4): `marked_lsn` was set to the marker's own lsn, but a marker vouches
/// only for records up to its `synced_lsn`. A record appended by another thread between a `sync`'s
/// commit and its marker became durable without a voucher, no later `sync`/`close` wrote one,
/// and damage to it was then dropped as a torn tail instead of reported.
#[test]
fn a_record_appended_before_a_marker_but_after_its_synced_lsn_gets_a_marker_later() {
    let sim = SimStorage::new(Default::default());
    let blocking = BlockingSync::new(Arc::new(sim.clone()));
    let wal = open_with_a_segment(&blocking);
    let before = wal.append(b"made durable by the sync").unwrap();
    let (flusher, _) = blocking.park_in_fsync(&wal, |wal| wal.sync());
    // Appended while the sync's own commit is in its fdatasync: after that commit's snapshot,
    // before the sync appends its marker (whose synced_lsn is then `before`).
    let squeezed = wal.append(&[7u8; 64]).unwrap();
    blocking.release.send(Ok(())).unwrap();
    assert_eq!(flusher.join().unwrap().unwrap(), before);
    wal.commit(squeezed, Durability::Sync).unwrap();
    wal.close().unwrap();

    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let positions = record_positions(&read_file(storage.as_ref(), FIRST_SEGMENT));
    let (offset, _, _) = *positions.iter().find(|p| p.1 == squeezed).unwrap();
    assert!(
        positions.iter().any(|&(at, _, synced)| at > offset && synced >= squeezed),
        "no marker after the acknowledged record vouches for it: {positions:?}"
    );
    // Damage to it must be reported, not dropped as a torn tail.
    flip_bit(storage.as_ref(), FIRST_SEGMENT, offset + 30, 2);
    let opened = Wal::open(storage, small_opts(64 << 10), 1, &mut |_, _| Ok(()));
    match opened {
        Err(e) => assert!(e.is_corruption(), "{e}"),
        Ok(_) => panic!("a damaged acknowledged record was dropped as a torn tail"),
    }
}

/// Review finding (session 4): a panic inside a round (a storage implementation's bug) left the
/// round's role taken, so every later commit of that kind waited forever. Now the panic poisons
/// the log and becomes an error, and later commits fail instead of hanging.
#[test]
fn a_panic_in_a_sync_round_poisons_the_log_instead_of_hanging_later_commits() {
    let armed = Arc::new(AtomicBool::new(false));
    let trigger = armed.clone();
    let hook: SyncHook = Arc::new(move |name| {
        if trigger.load(Ordering::SeqCst) {
            panic!("simulated storage bug while syncing {name}");
        }
        Ok(())
    });
    let storage: Arc<dyn Storage> = Arc::new(HookStorage::new(Arc::new(MemStorage::new()), hook));
    let (wal, _, _) = open(&storage, &small_opts(64 << 10), 1).unwrap();
    let wal = Arc::new(wal);
    let first = wal.append(b"before the bug").unwrap();
    wal.commit(first, Durability::Sync).unwrap();
    armed.store(true, Ordering::SeqCst);

    let lsn = wal.append(b"synced by a panicking storage").unwrap();
    let err = wal.commit(lsn, Durability::Sync).unwrap_err();
    assert!(matches!(err, Error::Poisoned(_)) && err.to_string().contains("panic"), "{err}");
    for durability in [Durability::Buffered, Durability::Sync] {
        let wal = wal.clone();
        let later = finishes_within("a commit after a panicking round", move || {
            wal.append(b"after").and_then(|lsn| wal.commit(lsn, durability))
        });
        assert!(matches!(later, Err(Error::Poisoned(_))), "{durability:?}: {later:?}");
    }
    assert_eq!(wal.durable_lsn(), first, "nothing after the failed sync is reported durable");
}
