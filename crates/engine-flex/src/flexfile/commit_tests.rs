//! Tree commits (checkpoints) with readers running beside them, deferred from mutations, and
//! crashes at each of their fsyncs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::Error;
use strata_io::{CrashMode, HookStorage, MemStorage, SimStorage, Storage, SyncHook};

use super::{FlexFile, FlexFileOptions, TableFile};

/// Long enough never to fire on a working machine; only bounds a failing test.
const WAIT: Duration = Duration::from_secs(20);

/// Every log commit leaves the log past this, so every `sync` that logs something also commits
/// the tree.
fn tiny_log_opts() -> FlexFileOptions {
    FlexFileOptions { log_max_bytes: 64, ..FlexFileOptions::for_tests() }
}

fn random_bytes(rng: &mut SmallRng, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    rng.fill(&mut bytes[..]);
    bytes
}

/// A sync hook that, once armed, parks the next sync of the tree file until released.
struct Gate {
    armed: AtomicBool,
    parked: Mutex<Sender<()>>,
    release: Mutex<Receiver<()>>,
}

impl Gate {
    fn hook(gate: Arc<Gate>) -> SyncHook {
        Arc::new(move |name: &str| {
            if name.ends_with(".tree") && gate.armed.swap(false, SeqCst) {
                gate.parked.lock().send(()).ok();
                if gate.release.lock().recv_timeout(WAIT).is_err() {
                    return Err(Error::invalid("test never released the parked tree fsync"));
                }
            }
            Ok(())
        })
    }
}

/// What starts the tree commit that gets parked.
#[derive(Clone, Copy, Debug)]
enum Trigger {
    Sync,
    /// An insert that fills the log buffer.
    FullLogBuffer,
}

fn readers_and_a_writer_proceed_while_a_tree_commit_is_parked(trigger: Trigger) {
    let (parked_tx, parked_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Gate {
        armed: AtomicBool::new(false),
        parked: Mutex::new(parked_tx),
        release: Mutex::new(release_rx),
    });
    let storage: Arc<dyn Storage> =
        Arc::new(HookStorage::new(Arc::new(MemStorage::new()), Gate::hook(gate.clone())));
    let opts = FlexFileOptions { log_buffer_entries: 1000, ..tiny_log_opts() };
    let file = Arc::new(FlexFile::open(storage.clone(), "g", opts).unwrap());
    let mut rng = SmallRng::seed_from_u64(1);
    let mut model = random_bytes(&mut rng, 50_000);
    file.write(0, &model).unwrap();
    file.sync().unwrap();
    assert_eq!(file.stats().tree_commits, 1);

    let inserted = random_bytes(&mut rng, 3_000);
    file.insert(777, &inserted).unwrap();
    model.splice(777..777, inserted);
    let buffered = file.state.read().log_buf.len();
    gate.armed.store(true, SeqCst);
    let committing = {
        let file = file.clone();
        let mut model = model.clone();
        thread::spawn(move || match trigger {
            Trigger::Sync => file.sync().map(|()| model),
            Trigger::FullLogBuffer => {
                // One-byte extents that cannot merge: one log entry each.
                let bytes = vec![9u8; 1000 - buffered];
                for (i, b) in bytes.iter().enumerate() {
                    file.insert(2 * i as u64, &[*b])?;
                    model.insert(2 * i, *b);
                }
                Ok(model)
            }
        })
    };
    parked_rx.recv_timeout(WAIT).expect("the tree commit never reached its first fsync");
    let model = committing_model(trigger, &model, &file);

    // Parked inside the tree commit's first fsync: not yet published.
    let (read_tx, read_rx) = mpsc::channel();
    {
        let file = file.clone();
        thread::spawn(move || {
            let all = file.read_all();
            let extent = file.read_extent(800, 100);
            read_tx.send((all, extent, file.stats().tree_commits)).ok();
        });
    }
    match read_rx.recv_timeout(WAIT) {
        Ok((all, extent, tree_commits)) => {
            assert!(all.unwrap() == model, "{trigger:?}: a read during the tree commit saw other bytes");
            let (start, bytes) = extent.unwrap().unwrap();
            assert_eq!(bytes[..], model[start as usize..start as usize + bytes.len()]);
            assert_eq!(tree_commits, 1, "{trigger:?}: the tree commit was published before its fsync");
        }
        Err(RecvTimeoutError::Timeout) => {
            release_tx.send(()).ok();
            panic!("{trigger:?}: a reader was blocked by the tree commit");
        }
        Err(e) => panic!("reader thread died: {e}"),
    }

    // A write issued now waits for the writer lock (commits stay in order), then succeeds.
    let (write_tx, write_rx) = mpsc::channel();
    {
        let file = file.clone();
        thread::spawn(move || write_tx.send(file.write(10, b"written during the tree commit")).ok());
    }
    release_tx.send(()).unwrap();
    let mut model = committing.join().unwrap().unwrap();
    write_rx.recv_timeout(WAIT).expect("the write never finished").unwrap();
    model[10..40].copy_from_slice(b"written during the tree commit");
    assert_eq!(file.stats().tree_commits, 2);
    assert!(file.read_all().unwrap() == model);

    file.sync().unwrap();
    drop(file);
    let file = FlexFile::open(storage, "g", opts).unwrap();
    assert!(file.read_all().unwrap() == model, "{trigger:?}: the write after the tree commit was lost");
    file.verify().unwrap();
}

/// The content while the tree commit is parked: for a full log buffer, the inserts made so far
/// (all of them: the commit starts after the one that filled the buffer).
fn committing_model(trigger: Trigger, model: &[u8], file: &FlexFile) -> Vec<u8> {
    let mut model = model.to_vec();
    if let Trigger::FullLogBuffer = trigger {
        let inserts = (file.len() - model.len() as u64) as usize;
        for i in 0..inserts {
            model.insert(2 * i, 9);
        }
    }
    model
}

#[test]
fn readers_and_a_writer_proceed_while_a_tree_commit_after_sync_is_parked_in_its_fsync() {
    readers_and_a_writer_proceed_while_a_tree_commit_is_parked(Trigger::Sync);
}

#[test]
fn readers_and_a_writer_proceed_while_a_tree_commit_after_a_full_log_buffer_is_parked() {
    readers_and_a_writer_proceed_while_a_tree_commit_is_parked(Trigger::FullLogBuffer);
}

#[test]
fn a_log_commit_inside_garbage_collection_leaves_the_tree_commit_to_maintain_or_sync() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    // Only GC commits the log (the buffer never fills); a tight data file makes it run often.
    let opts = FlexFileOptions {
        log_buffer_entries: 1 << 20,
        log_max_bytes: 4096,
        max_data_bytes: 1 << 20,
        ..FlexFileOptions::for_tests()
    };
    let file = FlexFile::open(storage.clone(), "m", opts).unwrap();
    let mut rng = SmallRng::seed_from_u64(2);
    let mut model = random_bytes(&mut rng, 600_000);
    file.write(0, &model).unwrap();
    let mut overwrite = |file: &FlexFile, model: &mut Vec<u8>| {
        let at = rng.gen_range(0..model.len() - 4096);
        let bytes = random_bytes(&mut rng, 4096);
        file.write(at as u64, &bytes).unwrap();
        model[at..at + 4096].copy_from_slice(&bytes);
    };
    for _ in 0..100_000 {
        if file.state.read().checkpoint_due {
            break;
        }
        overwrite(&file, &mut model);
    }
    let stats = file.stats();
    assert!(file.state.read().checkpoint_due, "GC never made a tree commit due: {stats:?}");
    assert!(stats.log_commits > 0 && stats.tree_commits == 0, "{stats:?}");
    file.maintain().unwrap();
    assert_eq!(file.stats().tree_commits, 1);
    assert!(!file.state.read().checkpoint_due);

    // With neither `sync` nor `maintain`, the mutation commits the tree itself once the log
    // reaches its hard limit, so the log stays bounded.
    let mut max_log_end = 0;
    for _ in 0..100_000 {
        if file.stats().tree_commits > 1 {
            break;
        }
        overwrite(&file, &mut model);
        max_log_end = max_log_end.max(file.state.read().log_end);
    }
    assert_eq!(file.stats().tree_commits, 2);
    assert!(max_log_end > 4096 && max_log_end <= 4 * 4096, "log grew to {max_log_end} bytes");
    file.sync().unwrap();
    drop(file);
    let file = FlexFile::open(storage, "m", opts).unwrap();
    assert!(file.read_all().unwrap() == model);
}

/// Syncs of one `sync` call, in order, and a crash of the simulated disk at the chosen one.
struct CrashHook {
    sim: SimStorage,
    mode: Mutex<CrashMode>,
    syncs: AtomicU64,
    crash_at: AtomicU64,
    names: Mutex<Vec<String>>,
}

impl CrashHook {
    fn hook(this: Arc<CrashHook>) -> SyncHook {
        Arc::new(move |name: &str| {
            let n = this.syncs.fetch_add(1, SeqCst);
            this.names.lock().push(name.to_string());
            if n == this.crash_at.load(SeqCst) {
                // The sync itself then fails on the dead handle.
                this.sim.crash(*this.mode.lock());
            }
            Ok(())
        })
    }

    fn arm(&self, crash_at: u64, mode: CrashMode) {
        self.syncs.store(0, SeqCst);
        self.names.lock().clear();
        self.crash_at.store(crash_at, SeqCst);
        *self.mode.lock() = mode;
    }
}

/// Several synced rounds of changes (each commits the tree, so pages get freed and reused),
/// then changes whose `sync` runs with `hook` armed by `arm`. Returns the content as of the
/// last successful sync before that and the content the last `sync` makes durable, and that
/// sync's result.
fn run_to_last_sync(
    storage: &Arc<dyn Storage>,
    seed: u64,
    arm: impl FnOnce(),
) -> (Vec<u8>, Vec<u8>, strata_core::Result<()>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let file = FlexFile::open(storage.clone(), "c", tiny_log_opts()).unwrap();
    let mut model = Vec::new();
    let change = |file: &FlexFile, model: &mut Vec<u8>, rng: &mut SmallRng| {
        for _ in 0..rng.gen_range(5..30) {
            if model.len() > 20_000 && rng.gen_bool(0.3) {
                let at = rng.gen_range(0..model.len() - 5_000);
                file.collapse(at as u64, 5_000).unwrap();
                model.drain(at..at + 5_000);
            } else {
                let at = rng.gen_range(0..=model.len());
                let len = rng.gen_range(1..3_000);
                let bytes = random_bytes(rng, len);
                file.insert(at as u64, &bytes).unwrap();
                model.splice(at..at, bytes);
            }
        }
    };
    for _ in 0..6 {
        change(&file, &mut model, &mut rng);
        file.sync().unwrap();
    }
    let old = model.clone();
    change(&file, &mut model, &mut rng);
    arm();
    let result = file.sync();
    (old, model, result)
}

#[test]
fn a_crash_at_each_fsync_of_a_tree_commit_recovers_the_last_synced_content() {
    let seed = 7;
    let new_hook = || {
        let sim = SimStorage::new(seed);
        let hook = Arc::new(CrashHook {
            sim: sim.clone(),
            mode: Mutex::new(CrashMode::DropUnsynced),
            syncs: AtomicU64::new(0),
            crash_at: AtomicU64::new(u64::MAX),
            names: Mutex::new(Vec::new()),
        });
        let storage: Arc<dyn Storage> =
            Arc::new(HookStorage::new(Arc::new(sim), CrashHook::hook(hook.clone())));
        (hook, storage)
    };
    // A run without a crash: which syncs the last `sync` makes.
    let (hook, storage) = new_hook();
    let (_, _, result) = run_to_last_sync(&storage, seed, || hook.arm(u64::MAX, CrashMode::DropUnsynced));
    result.unwrap();
    let names = hook.names.lock().clone();
    let first_tree_sync = names.iter().position(|n| n == "c.tree").expect("the last sync commits the tree");
    assert_eq!(names, ["c.data", "c.log", "c.tree", "c.tree", "c.log"], "syncs of a log + tree commit");

    for crash_at in 0..names.len() as u64 {
        for mode in [CrashMode::DropUnsynced, CrashMode::Random] {
            let ctx = format!("crash at sync {crash_at} ({}), {mode:?}", names[crash_at as usize]);
            let (hook, storage) = new_hook();
            let (old, new, result) = run_to_last_sync(&storage, seed, || hook.arm(crash_at, mode));
            assert!(result.is_err(), "{ctx}: the sync survived the crash");
            // Once the log block is durable, the new content is synced, whatever the tree
            // commit after it did; before, only a torn-tail-free prefix of the commit's
            // writes may survive (Random), which is the old content or the new.
            let file = FlexFile::open(storage.clone(), "c", tiny_log_opts())
                .unwrap_or_else(|e| panic!("{ctx}: reopen failed: {e}"));
            let recovered = file.read_all().unwrap();
            file.verify().unwrap();
            let expected_new = crash_at >= first_tree_sync as u64;
            let ok = if expected_new {
                recovered == new
            } else if mode == CrashMode::DropUnsynced {
                recovered == old
            } else {
                recovered == old || recovered == new
            };
            assert!(ok, "{ctx}: recovered {} bytes (old {}, new {})", recovered.len(), old.len(), new.len());
            // The recovered file keeps working: free pages are really free.
            let mut model = recovered;
            for i in 0..20u8 {
                file.insert(i as u64 * 7, &[i; 900]).unwrap();
                model.splice(i as usize * 7..i as usize * 7, [i; 900]);
                file.sync().unwrap();
            }
            file.close().unwrap();
            drop(file);
            let file = FlexFile::open(storage, "c", tiny_log_opts()).unwrap();
            assert!(file.read_all().unwrap() == model, "{ctx}: after more commits");
            file.verify().unwrap();
        }
    }
}
