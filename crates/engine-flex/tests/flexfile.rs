//! FlexFile against a `Vec<u8>` model: random operations, reopen, crashes on SimStorage (the
//! recovered file equals the state after some operation at or after the last sync), fault
//! injection during GC and sync, the space cap, and readers running beside a writer.
//! `STRATA_SEED=<n>` replays a seed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use engine_flex::flexfile::{FlexFile, FlexFileOptions, LogMark, TableFile};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_io::{CrashMode, Fault, FaultKind, MemStorage, SimStorage, Storage};

fn seeds(count: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("STRATA_SEED") {
        return vec![seed.parse().expect("STRATA_SEED must be a number")];
    }
    let base: u64 = rand::random::<u32>().into();
    (0..count).map(|i| base + i).collect()
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u64, Vec<u8>),
    Collapse(u64, u64),
    Write(u64, Vec<u8>),
    Update(u64, u64, Vec<u8>),
    Defrag(u64, u64),
    Sync,
}

fn apply_model(model: &mut Vec<u8>, op: &Op) {
    match op {
        Op::Insert(off, data) => {
            model.splice(*off as usize..*off as usize, data.iter().copied());
        }
        Op::Collapse(off, len) => {
            model.drain(*off as usize..(*off + *len) as usize);
        }
        Op::Write(off, data) => {
            let end = *off as usize + data.len();
            if model.len() < end {
                model.resize(end, 0);
            }
            model[*off as usize..end].copy_from_slice(data);
        }
        Op::Update(off, old, data) => {
            model.splice(*off as usize..(*off + *old) as usize, data.iter().copied());
        }
        Op::Defrag(..) | Op::Sync => {}
    }
}

fn apply_file(file: &FlexFile, op: &Op) -> strata_core::Result<()> {
    match op {
        Op::Insert(off, data) => file.insert(*off, data),
        Op::Collapse(off, len) => file.collapse(*off, *len),
        Op::Write(off, data) => file.write(*off, data),
        Op::Update(off, old, data) => file.update(*off, *old, data),
        Op::Defrag(off, len) => file.defrag(*off, *len),
        Op::Sync => file.sync(),
    }
}

fn random_op(rng: &mut SmallRng, len: u64, max_len: u64) -> Op {
    let data = |rng: &mut SmallRng| {
        let n = rng.gen_range(1..=10_000);
        let mut v = vec![0u8; n];
        rng.fill(&mut v[..]);
        v
    };
    let pick = rng.gen_range(0..100);
    let shrink = len > max_len;
    match pick {
        _ if shrink || (pick < 20 && len > 0) => {
            let off = rng.gen_range(0..len.max(1));
            Op::Collapse(off, rng.gen_range(0..=(len - off).min(20_000)))
        }
        20..=49 => Op::Insert(rng.gen_range(0..=len), data(rng)),
        50..=69 => Op::Write(rng.gen_range(0..=len + 100), data(rng)),
        70..=84 if len > 0 => {
            let off = rng.gen_range(0..len);
            Op::Update(off, rng.gen_range(0..=(len - off).min(5_000)), data(rng))
        }
        85..=89 if len > 0 => {
            let off = rng.gen_range(0..len);
            Op::Defrag(off, rng.gen_range(0..=(len - off).min(50_000)))
        }
        _ => Op::Sync,
    }
}

fn assert_same(file: &FlexFile, model: &[u8], ctx: &str) {
    assert_eq!(file.len(), model.len() as u64, "{ctx}: length");
    let got = file.read_all().unwrap();
    assert!(got == model, "{ctx}: contents differ from the model");
    file.verify().unwrap();
}

#[test]
fn random_operations_match_a_vec_model_across_reopens() {
    for seed in seeds(3) {
        println!("flexfile model seed {seed} (STRATA_SEED={seed})");
        let mut rng = SmallRng::seed_from_u64(seed);
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        let opts = FlexFileOptions::for_tests();
        let mut file = FlexFile::open(storage.clone(), "t", opts).unwrap();
        let mut model = Vec::new();
        let (mut log_commits, mut tree_commits) = (0, 0);
        for step in 0..600 {
            let op = random_op(&mut rng, model.len() as u64, 400_000);
            apply_file(&file, &op).unwrap_or_else(|e| panic!("seed {seed} step {step} {op:?}: {e}"));
            apply_model(&mut model, &op);
            if step % 50 == 0 {
                assert_same(&file, &model, &format!("seed {seed} step {step}"));
                // read_extent returns the start of the extent holding the offset.
                if !model.is_empty() {
                    let off = rng.gen_range(0..model.len() as u64);
                    let (start, bytes) = file.read_extent(off, 100).unwrap().unwrap();
                    assert!(start <= off);
                    assert_eq!(bytes[..], model[start as usize..(start as usize + bytes.len())]);
                }
            }
            if step % 150 == 149 {
                log_commits += file.stats().log_commits;
                if rng.gen_bool(0.5) {
                    file.close().unwrap();
                } else {
                    file.sync().unwrap();
                }
                tree_commits += file.stats().tree_commits;
                drop(file);
                file = FlexFile::open(storage.clone(), "t", opts).unwrap();
                assert_same(&file, &model, &format!("seed {seed} reopen at {step}"));
            }
        }
        assert!(
            log_commits > 0 && tree_commits > 0,
            "{log_commits} log commits, {tree_commits} tree commits"
        );
    }
}

/// Writes 1 MiB of random bytes, then overwrites `pieces` random 4 KiB pieces of it; returns
/// the expected contents.
fn write_then_overwrite(file: &FlexFile, seed: u64, pieces: usize) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = vec![0u8; 1 << 20];
    rng.fill(&mut model[..]);
    file.write(0, &model).unwrap();
    for _ in 0..pieces {
        let off = rng.gen_range(0..(model.len() - 4096)) as u64;
        let mut piece = vec![0u8; 4096];
        rng.fill(&mut piece[..]);
        file.write(off, &piece).unwrap();
        model[off as usize..off as usize + 4096].copy_from_slice(&piece);
    }
    model
}

#[test]
fn garbage_collection_reclaims_overwritten_segments() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let opts = FlexFileOptions::for_tests();
    let file = FlexFile::open(storage.clone(), "g", opts).unwrap();
    // 16 MiB of writes through a 4 MiB data file.
    let model = write_then_overwrite(&file, 7, 4096);
    assert_same(&file, &model, "after overwrites");
    let stats = file.stats();
    assert!(stats.gc_bytes_relocated > 0 && stats.gc_segments_reclaimed > 0, "{stats:?}");
    let data_len = storage.open("g.data", strata_io::OpenOptions::existing()).unwrap().len().unwrap();
    assert!(data_len <= opts.max_data_bytes, "data file grew to {data_len}");
    // Segments GC freed go back to the file system (punched: they read as zeros; the data is
    // random, so a segment holding any live byte is not all zeros).
    file.sync().unwrap();
    let used = file.stats().segments_used;
    let holding = segments_holding_bytes(storage.as_ref(), "g.data", opts.segment_bytes);
    assert!(holding <= used, "{holding} segments hold bytes, {used} are in use");
    file.close().unwrap();
    let file = FlexFile::open(storage.clone(), "g", opts).unwrap();
    assert_same(&file, &model, "after reopen");
    let holding = segments_holding_bytes(storage.as_ref(), "g.data", opts.segment_bytes);
    assert!(holding <= file.stats().segments_used, "after reopen: {holding} segments hold bytes");
}

/// Segments of the data file `name` with any non-zero byte.
fn segments_holding_bytes(storage: &dyn Storage, name: &str, segment_bytes: u64) -> u64 {
    let bytes =
        strata_io::read_all(&*storage.open(name, strata_io::OpenOptions::existing()).unwrap()).unwrap();
    bytes.chunks(segment_bytes as usize).filter(|s| s.iter().any(|b| *b != 0)).count() as u64
}

/// GC ahead of need (what FlexDB runs between commit steps) lifts utilization above the
/// trigger, one segment per lock hold, keeps the contents, and leaves nothing for the writes'
/// own low-utilization GC to do right after.
#[test]
fn garbage_collection_ahead_of_writes_restores_utilization() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    // No GC inside writes for low utilization: only the space cap forces it.
    let opts =
        FlexFileOptions { gc_trigger_percent: 0, max_data_bytes: 64 << 20, ..FlexFileOptions::for_tests() };
    let file = FlexFile::open(storage.clone(), "g", opts).unwrap();
    let model = write_then_overwrite(&file, 9, 2048);
    let utilization = |s: &engine_flex::flexfile::FlexFileStats| {
        s.live_data_bytes as f64 / (s.segments_used * opts.segment_bytes) as f64
    };
    let before = file.stats();
    assert!(utilization(&before) < 0.5, "overwrites left garbage: {before:?}");
    // Reopen with the default trigger (50%) and collect ahead.
    file.close().unwrap();
    let opts = FlexFileOptions { gc_trigger_percent: 50, ..opts };
    let file = FlexFile::open(storage.clone(), "g", opts).unwrap();
    let cleaned = file.collect_garbage_ahead().unwrap();
    let after = file.stats();
    assert!(cleaned > 0 && utilization(&after) >= 0.55, "cleaned {cleaned}: {after:?}");
    assert_same(&file, &model, "after GC ahead");
    assert_eq!(file.collect_garbage_ahead().unwrap(), 0, "nothing left to clean");
    file.close().unwrap();
    let file = FlexFile::open(storage, "g", opts).unwrap();
    assert_same(&file, &model, "after reopen");
}

#[test]
fn running_out_of_space_is_an_error_and_the_file_stays_usable() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let opts = FlexFileOptions::for_tests();
    let file = FlexFile::open(storage.clone(), "s", opts).unwrap();
    let mut model = Vec::new();
    let chunk = vec![0xabu8; 100_000];
    let err = loop {
        match file.insert(0, &chunk) {
            Ok(()) => model.splice(0..0, chunk.iter().copied()).for_each(drop),
            Err(err) => break err,
        }
    };
    assert!(err.is_no_space(), "{err}");
    assert!(model.len() as u64 > opts.max_data_bytes / 2, "gave up at {} bytes", model.len());
    assert_same(&file, &model, "after no-space");
    file.collapse(0, 500_000).unwrap();
    model.drain(..500_000);
    file.insert(7, b"still works").unwrap();
    model.splice(7..7, b"still works".iter().copied());
    assert_same(&file, &model, "after freeing space");
    file.sync().unwrap();
    drop(file);
    let file = FlexFile::open(storage, "s", opts).unwrap();
    assert_same(&file, &model, "after reopen");
}

/// Runs random operations, crashes, and checks the recovered file is one of the states after
/// the last successful sync (inclusive).
fn crash_cycles(seed: u64, cycles: usize, faults: bool) {
    println!("flexfile crash seed {seed} faults {faults} (STRATA_SEED={seed})");
    let mut rng = SmallRng::seed_from_u64(seed);
    let sim = SimStorage::new(seed);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    // A tight data file so that garbage collection runs often (and faults hit it).
    let opts = FlexFileOptions { max_data_bytes: 1 << 20, ..FlexFileOptions::for_tests() };
    let mut durable = Vec::new();
    let (mut synced_ops, mut failed_ops, mut max_len) = (0, 0, 0);
    let (mut gc_bytes, mut tree_commits) = (0, 0);
    // The last `synced_log` seen: it claims durability, so no crash may make the log fall short
    // of it (FlexDB records it in its commit record and opens with it, issue #19).
    let mut mark: Option<LogMark> = None;
    for cycle in 0..cycles {
        let file = FlexFile::open_checked(storage.clone(), "c", opts, mark)
            .unwrap_or_else(|e| panic!("seed {seed} cycle {cycle}: {e}"));
        mark = file.synced_log();
        let recovered = file.read_all().unwrap();
        file.verify().unwrap();
        // `durable` holds every acceptable state: the last synced one and each one after it.
        assert!(
            durable.is_empty() && recovered.is_empty() || durable.contains(&recovered),
            "seed {seed} cycle {cycle}: recovered {} bytes, not a state after the last sync",
            recovered.len()
        );
        max_len = max_len.max(recovered.len());
        let mut model = recovered;
        durable = vec![model.clone()];
        if faults && rng.gen_bool(0.7) {
            let fault = match rng.gen_range(0..3) {
                0 => Fault::FailSync { after_syncs: rng.gen_range(0..6) },
                1 => Fault::FailWrite {
                    after_writes: rng.gen_range(0..40),
                    kind: FaultKind::Enospc,
                    sticky: rng.gen_bool(0.5),
                },
                _ => Fault::FailOp { after_ops: rng.gen_range(0..80), kind: FaultKind::Eio, sticky: false },
            };
            sim.inject(fault);
        }
        for _ in 0..rng.gen_range(1..60) {
            let op = random_op(&mut rng, model.len() as u64, 300_000);
            let applied = apply_file(&file, &op);
            // Also after a failure: a failed commit must not advance the mark.
            mark = file.synced_log();
            match applied {
                Ok(()) => {
                    apply_model(&mut model, &op);
                    if matches!(op, Op::Sync) {
                        synced_ops += durable.len();
                        durable.clear();
                    }
                    durable.push(model.clone());
                }
                Err(err) => {
                    // A refused or failed operation may or may not have happened in memory;
                    // only the durable state matters now. Everything after fails too.
                    assert!(
                        err.is_no_space()
                            || matches!(err, strata_core::Error::Io { .. } | strata_core::Error::Poisoned(_)),
                        "{err}"
                    );
                    failed_ops += 1;
                    let mut maybe = model.clone();
                    apply_model(&mut maybe, &op);
                    durable.push(maybe);
                    if !err.is_no_space() {
                        break;
                    }
                }
            }
        }
        gc_bytes += file.stats().gc_bytes_relocated;
        tree_commits += file.stats().tree_commits;
        sim.crash(if rng.gen_bool(0.5) { CrashMode::DropUnsynced } else { CrashMode::Random });
        sim.clear_faults();
        drop(file);
    }
    println!(
        "{synced_ops} ops synced, {failed_ops} failed, largest recovered file {max_len} bytes, \
         {gc_bytes} bytes relocated by GC, {tree_commits} tree commits"
    );
    assert!(synced_ops > 0 && max_len > 10_000 && gc_bytes > 0 && tree_commits > 0);
    assert!(!faults || failed_ops > 0, "no fault fired");
}

#[test]
fn crash_recovery_yields_a_state_after_the_last_sync() {
    for seed in seeds(2) {
        crash_cycles(seed, 40, false);
    }
}

#[test]
fn crash_recovery_with_eio_and_enospc_faults_during_gc_and_sync() {
    for seed in seeds(2) {
        crash_cycles(seed, 40, true);
    }
}

#[test]
fn readers_see_whole_records_while_a_writer_inserts_and_syncs() {
    // Every insert and collapse moves whole 16-byte records; a reader must never see a torn one.
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let file = Arc::new(FlexFile::open(storage, "r", FlexFileOptions::for_tests()).unwrap());
    let record = |id: u64| {
        let mut r = id.to_le_bytes().to_vec();
        r.extend_from_slice(&(!id).to_le_bytes());
        r
    };
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (file, stop) = (file.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) || reads == 0 {
                    let bytes = file.read_all().unwrap();
                    assert_eq!(bytes.len() % 16, 0);
                    for r in bytes.chunks_exact(16) {
                        let id = u64::from_le_bytes(r[..8].try_into().unwrap());
                        assert_eq!(u64::from_le_bytes(r[8..].try_into().unwrap()), !id, "torn record");
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut rng = SmallRng::seed_from_u64(3);
    for id in 0..3000u64 {
        let records = file.len() / 16;
        file.insert(rng.gen_range(0..=records) * 16, &record(id)).unwrap();
        if id % 3 == 0 && records > 10 {
            file.collapse(rng.gen_range(0..records - 5) * 16, 32).unwrap();
        }
        if id % 100 == 0 {
            file.sync().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
}

#[test]
fn defrag_merges_fragmented_extents_and_keeps_contents() {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let file = FlexFile::open(storage, "d", FlexFileOptions::for_tests()).unwrap();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut model = Vec::new();
    for i in 0..400u64 {
        let rec = vec![i as u8; 100];
        let off = rng.gen_range(0..=model.len() / 100) * 100;
        file.insert(off as u64, &rec).unwrap();
        model.splice(off..off, rec);
    }
    let before = file.extents(0, file.len()).len();
    file.defrag(0, file.len()).unwrap();
    let after = file.extents(0, file.len()).len();
    assert!(after * 4 < before, "defrag left {after} of {before} extents");
    assert_same(&file, &model, "after defrag");
}

#[test]
fn damaged_tree_page_or_mid_log_block_is_corruption_on_open() {
    let sim = SimStorage::new(5);
    let storage: Arc<dyn Storage> = Arc::new(sim.clone());
    let opts = FlexFileOptions { log_max_bytes: 1 << 20, ..FlexFileOptions::for_tests() };
    let file = FlexFile::open(storage.clone(), "x", opts).unwrap();
    for i in 0..200u64 {
        file.insert(0, &[i as u8; 300]).unwrap();
    }
    file.close().unwrap();
    // Three more log blocks after the tree commit.
    for i in 0..3u8 {
        file.insert(5, &[i; 10]).unwrap();
        file.sync().unwrap();
    }
    let expect = file.read_all().unwrap();
    drop(file);
    // Tree node page 2 (the first node page written), a byte inside its entries.
    let damaged = sim.clone();
    damaged.flip_bit("x.tree", 2 * 4096 + 20, 3).unwrap();
    let err = FlexFile::open(Arc::new(damaged.clone()), "x", opts).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    damaged.flip_bit("x.tree", 2 * 4096 + 20, 3).unwrap();
    FlexFile::open(Arc::new(damaged.clone()), "x", opts).unwrap();
    // Log blocks are stored twice: one damaged copy is survived with intact data...
    let log = sim.durable_contents("x.log").unwrap();
    let block_bytes = 24 + 16 * u32::from_le_bytes(log[36..40].try_into().unwrap()) as u64;
    damaged.flip_bit("x.log", 32 + 30, 1).unwrap();
    let file = FlexFile::open(Arc::new(damaged.clone()), "x", opts).unwrap();
    assert_eq!(&file.read_all().unwrap()[..20], &expect[..20]);
    drop(file);
    // ...both copies damaged, with later blocks after them, is corruption.
    damaged.flip_bit("x.log", 32 + block_bytes + 30, 1).unwrap();
    let err = FlexFile::open(Arc::new(damaged.clone()), "x", opts).unwrap_err();
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn damaged_last_log_block_is_not_mistaken_for_a_torn_tail() {
    // Regression (found by the kit's bit-flip check, seed 6157996280926389800): a flipped bit
    // in the last synced log block made recovery drop it as a torn tail.
    let sim = SimStorage::new(9);
    let opts = FlexFileOptions { log_max_bytes: 1 << 20, ..FlexFileOptions::for_tests() };
    let file = FlexFile::open(Arc::new(sim.clone()), "l", opts).unwrap();
    file.insert(0, b"synced data").unwrap();
    file.sync().unwrap();
    drop(file);
    let log_len = sim.durable_contents("l.log").unwrap().len() as u64;
    for byte in 32..log_len {
        let bit = (byte % 8) as u8;
        sim.flip_bit("l.log", byte, bit).unwrap();
        let file = FlexFile::open(Arc::new(sim.clone()), "l", opts).unwrap();
        assert_eq!(file.read_all().unwrap(), b"synced data", "flip at byte {byte}");
        drop(file);
        sim.flip_bit("l.log", byte, bit).unwrap();
    }
}

/// Issue #19: with the mark a caller recorded from `synced_log`, open refuses a log cut below
/// it (naming the log, the expected and the found length), a tree whose newer header slot was
/// lost, and a tree file that lost both headers; bytes past the mark are still a torn tail.
#[test]
fn a_synced_log_mark_refuses_a_shorter_log_or_an_older_tree() {
    let sim = SimStorage::new(11);
    let opts = FlexFileOptions { log_max_bytes: 1 << 20, ..FlexFileOptions::for_tests() };
    let file = FlexFile::open(Arc::new(sim.clone()), "m", opts).unwrap();
    for i in 0..3u8 {
        file.insert(0, &[i; 100]).unwrap();
        file.sync().unwrap();
    }
    let mark = file.synced_log().unwrap();
    drop(file);
    let log = sim.durable_contents("m.log").unwrap();
    assert_eq!(mark.synced_bytes, log.len() as u64);
    let with = |name: &str, bytes: &[u8]| {
        let copy = MemStorage::new();
        for file in ["m.data", "m.tree", "m.log"] {
            let contents = if file == name { bytes.to_vec() } else { sim.durable_contents(file).unwrap() };
            copy.open(file, strata_io::OpenOptions::create()).unwrap().write_at(0, &contents).unwrap();
        }
        Arc::new(copy) as Arc<dyn Storage>
    };
    let refused = |storage: Arc<dyn Storage>, mark: LogMark| match FlexFile::open_checked(
        storage,
        "m",
        opts,
        Some(mark),
    ) {
        Ok(_) => panic!("opened"),
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            e.to_string()
        }
    };
    let cut = log.len() - 1;
    let err = refused(with("m.log", &log[..cut]), mark);
    assert!(err.contains("m.log") && err.contains(&format!("expected at least {}", log.len())), "{err}");
    assert!(err.contains(&format!("found {cut}")), "{err}");
    // A mark of a newer tree version than the file holds: its newer header slot was lost.
    let newer = LogMark { tree_version: mark.tree_version + 1, synced_bytes: 32 };
    assert!(refused(with("m.log", &log), newer).contains("m.tree"));
    // No valid header at all beside a mark: not a new file.
    let tree = sim.durable_contents("m.tree").unwrap();
    let headerless = [vec![0; 2 * 4096], tree[2 * 4096..].to_vec()].concat();
    let no_tree = with("m.tree", &headerless);
    // The log keeps only its header, so only the mark tells a lost tree from a new file.
    no_tree.open("m.log", strata_io::OpenOptions::create()).unwrap().set_len(32).unwrap();
    assert!(refused(no_tree, LogMark { tree_version: 1, synced_bytes: 32 }).contains("m.tree"));
    // A torn tail past the mark is dropped; the file opens with every synced byte.
    let torn = [log.clone(), log[32..60].to_vec()].concat();
    let file = FlexFile::open_checked(with("m.log", &torn), "m", opts, Some(mark)).unwrap();
    assert_eq!(file.len(), 300);
}

/// Regression (found by the kit's same-boot FailSync scenario, issue #19): a log or tree-header
/// fsync fails, the process reopens before any power loss, and the open read the unsynced log
/// block (or header) back from the page cache, where a failed fsync had marked it clean without
/// writing it; new blocks were then synced after it, and the power loss left a hole: the next
/// open refused the file ("damaged log block before block at …"). Open now writes the replayed
/// log and the header slot in use again before syncing them.
#[test]
fn a_failed_sync_then_a_reopen_before_the_power_loss_keeps_every_later_sync() {
    // A short log, so tree commits (tree pages, then the header slot, then the log reset) come
    // often and the sweep fails each of their syncs too.
    let opts = FlexFileOptions { log_max_bytes: 1024, ..FlexFileOptions::for_tests() };
    let mut fired = 0;
    for after_syncs in 0..48u64 {
        let sim = SimStorage::new(after_syncs);
        let storage: Arc<dyn Storage> = Arc::new(sim.clone());
        let mut rng = SmallRng::seed_from_u64(after_syncs);
        let file = FlexFile::open_checked(storage.clone(), "s", opts, None).unwrap();
        let mut model = Vec::new();
        sim.inject(Fault::FailSync { after_syncs });
        for _ in 0..200 {
            let op = random_op(&mut rng, model.len() as u64, 100_000);
            if apply_file(&file, &op).is_err() {
                fired += 1;
                break;
            }
            apply_model(&mut model, &op);
        }
        let mark = file.synced_log();
        drop(file);
        sim.clear_faults();
        let context = format!("sync {after_syncs} failed");
        let file = FlexFile::open_checked(storage.clone(), "s", opts, mark)
            .unwrap_or_else(|e| panic!("{context}: reopen in the same boot: {e}"));
        let mut model = file.read_all().unwrap();
        // Few enough that no tree commit replaces a header slot lost to the failed sync.
        for _ in 0..3 {
            let op = random_op(&mut rng, model.len() as u64, 100_000);
            apply_file(&file, &op).unwrap();
            apply_model(&mut model, &op);
        }
        file.sync().unwrap();
        let mark = file.synced_log();
        sim.crash(CrashMode::DropUnsynced);
        drop(file);
        let file = FlexFile::open_checked(storage.clone(), "s", opts, mark)
            .unwrap_or_else(|e| panic!("{context}: open after the power loss: {e}"));
        assert_same(&file, &model, &context);
    }
    assert!(fired > 24, "the fault fired in {fired} runs only");
}
