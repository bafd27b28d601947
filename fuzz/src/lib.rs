//! Fuzz harnesses shared by the targets in `fuzz_targets/`.
//!
//! - [`damaged_store`]: a real store of each engine is built once per fuzz build and kept, so a
//!   crash input replays against the same files (`seed_cache`), in two variants: closed cleanly,
//!   and as a power cut leaves it after a `flush` (small sizes, so every kind of file exists: WAL
//!   segments with records to replay, snapshots, table files, trees, logs, checkpoints,
//!   double-write images, the manifest). The fuzz input picks one file of the target's kind and
//!   edits it (see [`edit`]), then may reseal its checksums (`reseal`); the store is opened,
//!   every key read, scanned and verified. See [`damaged_store`] for what counts as a bug.
//! - [`model_ops`]: operations decoded from the input run against an engine and a `BTreeMap`,
//!   with reopens; every read must match the model.

pub mod reseal;
mod seed_cache;
mod server;
mod sorted_run;
mod table_model;
pub mod targets;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use strata::storage::{CrashMode, MemStorage, OpenOptions, SimStorage, Storage};
use strata::{Db, Durability, EngineKind, Error, MaintenanceTask, Options, WriteBatch};

pub use server::server_requests;
pub use sorted_run::sorted_run;
pub use table_model::laser_table_ops;
pub use targets::Target;

/// Sizes that make each engine write every kind of file within a few hundred operations.
pub fn options(kind: EngineKind) -> Options {
    let base = Options::new(kind).memory_budget_bytes(256 << 10).wal_segment_bytes(16 << 10);
    match kind {
        // A 16 KiB FlexFile log commits the FlexTree every few hundred entries, so the tree file
        // holds node pages (nodes keep their 120-entry capacity: the engine has no option for it).
        EngineKind::Flex => {
            [("memtable_bytes", "4KiB"), ("max_interval_records", "8"), ("flexfile_log_max_bytes", "16KiB")]
                .into_iter()
                .fold(base, |o, (n, v)| o.engine_option(n, v))
        }
        EngineKind::F2 => [
            ("page_size_bytes", "8KiB"),
            ("segment_bytes", "32KiB"),
            ("hot_index_bytes", "4KiB"),
            ("hot_log_memory_bytes", "32KiB"),
            ("cold_index_bytes", "256"),
            ("hot_log_disk_budget_bytes", "64KiB"),
            ("cold_log_disk_budget_bytes", "16KiB"),
            ("checkpoint_wal_bytes", "32KiB"),
        ]
        .into_iter()
        .fold(base, |o, (n, v)| o.engine_option(n, v)),
        // engine-treeline's test sizes (its tests/common.rs): a 4 KiB record cache over 4 KiB
        // pages writes back after a few puts, a few hundred fill pages into overflow pages and
        // reorganizations into multi-page segments, 24 KiB of WAL checkpoint.
        EngineKind::Treeline => [
            ("page_size_bytes", "4KiB"),
            ("record_cache_bytes", "4KiB"),
            ("checkpoint_wal_bytes", "24KiB"),
            ("goal", "6"),
            ("epsilon", "4"),
            ("forecast_epoch_inserts", "8"),
            ("reorg_radius", "2"),
        ]
        .into_iter()
        .fold(base, |o, (n, v)| o.engine_option(n, v)),
        // Small sizes: 64 KiB MemTables, 2 KiB leaves, 4 pivots: the seed's writes fill several
        // tables, each applied and checkpointed into a tree of a few levels, and settled after
        // each table (`settle=always`, as engine-turtle's kit).
        EngineKind::Turtle => [
            ("checkpoint_distance", "64KiB"),
            ("leaf_bytes", "2KiB"),
            ("max_pivots", "4"),
            ("settle", "always"),
        ]
        .into_iter()
        .fold(base, |o, (n, v)| o.engine_option(n, v)),
        // Small sizes, as engine-laser's kit: 16 KiB MemTables, level 0 compacted at two runs,
        // T = 2: the seed's writes are flushed and compacted into a few levels.
        EngineKind::Laser => [("memtable_bytes", "16KiB"), ("level0_runs", "2"), ("size_ratio", "2")]
            .into_iter()
            .fold(base, |o, (n, v)| o.engine_option(n, v)),
        _ => base,
    }
}

/// The options the `seed` store of `kind` is opened with (and built with, after its first
/// phase): [`options`], except treeline's [`Seed::DoubleWrite`] store, which checkpoints only
/// every 1 MiB of WAL (or of double-write images; a checkpoint truncates `treeline-dwb`) and
/// replays its WAL into a 64 KiB record cache (the 4 KiB one would write back all the time
/// during the open).
pub fn seed_options(kind: EngineKind, seed: Seed) -> Options {
    match (kind, seed) {
        (EngineKind::Treeline, Seed::DoubleWrite) => options(kind)
            .engine_option("checkpoint_wal_bytes", "1MiB")
            .engine_option("record_cache_bytes", "64KiB"),
        _ => options(kind),
    }
}

/// Which state of the workload's store a seed is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seed {
    /// Closed cleanly: every read must return exactly what the workload left.
    Clean,
    /// Flushed, then a simulated power cut that drops unsynced writes (one instant, although
    /// background workers run): WAL records after the last checkpoint or commit, which the open
    /// replays, treeline's double-write images. Reads are checked against the history.
    Crash,
    /// [`Seed::Crash`] after more writes that give treeline's `treeline-dwb` more images of one
    /// generation than one write carries (`treeline_double_write_phase`; other engines: the
    /// same as `Crash`). Only `treeline_dwb` pays for its extra keys and pages.
    DoubleWrite,
}

impl Seed {
    pub const ALL: [Seed; 3] = [Seed::Clean, Seed::Crash, Seed::DoubleWrite];
}

impl std::fmt::Display for Seed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Seed::Clean => "clean",
            Seed::Crash => "crash",
            Seed::DoubleWrite => "double-write",
        })
    }
}

/// A seed store's files, every value each key ever held, and what each key holds at the end.
pub struct SeedStore {
    pub files: Vec<(String, Vec<u8>)>,
    /// Every key the workload wrote or deleted, with every value it ever held.
    pub history: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
    /// The workload's final contents.
    pub last: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Closed cleanly ([`Seed::Clean`]).
    pub clean: bool,
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:05}", i % 400).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let len = (i as usize * 37) % 300;
    (0..len).map(|j| (i as usize + j) as u8).collect()
}

/// The workload's history and final contents, kept as it runs.
#[derive(Default)]
struct Model {
    history: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
    last: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Model {
    fn put(&mut self, k: &[u8], v: &[u8]) {
        self.history.entry(k.to_vec()).or_default().insert(v.to_vec());
        self.last.insert(k.to_vec(), v.to_vec());
    }

    fn delete(&mut self, k: &[u8]) {
        self.history.entry(k.to_vec()).or_default();
        self.last.remove(k);
    }
}

fn build_seed_store(kind: EngineKind, seed: Seed) -> SeedStore {
    let sim = SimStorage::new(0x5eed);
    // A crash seed's store runs on one booted view of the disk: after the power cut every call
    // through it fails, so its background worker (a crashed process runs no destructors) cannot
    // recycle a WAL segment between the listing and the reading of the copy below.
    let storage: Arc<dyn Storage> = match seed {
        Seed::Crash | Seed::DoubleWrite => Arc::new(sim.booted()),
        Seed::Clean => Arc::new(MemStorage::new()),
    };
    let open =
        |options: Options| Db::open("fuzz", options.storage(storage.clone())).expect("seed store opens");
    let mut db = open(options(kind));
    let mut model = Model::default();
    for i in 0..3_000u32 {
        let (k, v) = (key(i * 7), value(i));
        if i % 11 == 0 {
            db.delete(&k).expect("seed delete");
            model.delete(&k);
        } else if i % 5 == 0 {
            let mut batch = WriteBatch::new();
            let (k2, v2) = (key(i * 13), value(i + 1));
            batch.put(k.clone(), v.clone()).put(k2.clone(), v2.clone());
            db.write(batch, Durability::Buffered).expect("seed batch");
            model.put(&k, &v);
            model.put(&k2, &v2);
        } else {
            db.put_with(&k, &v, if i % 97 == 0 { Durability::Sync } else { Durability::Buffered })
                .expect("seed put");
            model.put(&k, &v);
        }
    }
    if kind == EngineKind::Treeline {
        // Values too large for a page: blob runs in `treeline-data` (1 to 3 pages each).
        for i in 0..TREELINE_BLOB_KEYS {
            let k = format!("blob{i:03}").into_bytes();
            let v: Vec<u8> = (0..2_000 + i * 700).map(|j| (i * 17 + j) as u8).collect();
            db.put(&k, &v).expect("seed blob put");
            model.put(&k, &v);
        }
    }
    if kind == EngineKind::Treeline && seed == Seed::DoubleWrite {
        db = treeline_double_write_phase(db, &mut model, || open(seed_options(kind, seed)));
    }
    match seed {
        Seed::Crash | Seed::DoubleWrite => {
            db.flush().expect("seed store flushes");
            // A power cut freezes every file at one instant (the write-back worker may be
            // mid-batch); later I/O of the old handles fails, so the copy below is one
            // consistent crash state.
            sim.crash(CrashMode::DropUnsynced);
        }
        Seed::Clean => db.close().expect("seed store closes"),
    }
    let files = match seed {
        Seed::Crash | Seed::DoubleWrite => snapshot_files(&sim.booted()),
        Seed::Clean => snapshot_files(storage.as_ref()),
    };
    drop(db);
    SeedStore { files, history: model.history, last: model.last, clean: seed == Seed::Clean }
}

/// Keys whose values treeline keeps in blob runs.
const TREELINE_BLOB_KEYS: u32 = 12;

/// Bulk keys of treeline's double-write phase, and their values' length (two fit a 4 KiB page:
/// 300 keys fill ~150 pages).
const TREELINE_BULK_KEYS: u32 = 300;
const TREELINE_BULK_VALUE_BYTES: u32 = 1_400;

/// Fills more than 128 more pages (1,400-byte values: two a page at most, as the
/// reorganizations leave them), closes (a checkpoint: its index references them all), reopens with `seed_options`
/// (checkpoints only every 1 MiB: a checkpoint truncates `treeline-dwb`) and changes every
/// record, so the write-back that `Commit` starts overwrites each of those pages in place once:
/// each first in-place write of a page the checkpoint references appends its image to
/// `treeline-dwb`, more than one write's `MAX_ENTRIES_PER_WRITE` (128) in one generation. Until
/// the reopen the checkpoints come every 24 KiB of WAL, which lets pages freed by
/// reorganizations be reused (a checkpoint releases them), so the data file stays small; the
/// small new values keep the WAL the open replays short.
fn treeline_double_write_phase(db: Db, model: &mut Model, reopen: impl FnOnce() -> Db) -> Db {
    let bulk_key = |i: u32| format!("bulk{i:05}").into_bytes();
    for i in 0..TREELINE_BULK_KEYS {
        let v: Vec<u8> = (0..TREELINE_BULK_VALUE_BYTES).map(|j| (i * 31 + j) as u8).collect();
        db.put(bulk_key(i), &v).expect("seed bulk put");
        model.put(&bulk_key(i), &v);
    }
    db.close().expect("seed store closes");
    drop(db);
    let db = reopen();
    for i in 0..TREELINE_BULK_KEYS {
        let v = format!("small{i}").into_bytes();
        db.put(bulk_key(i), &v).expect("seed bulk update");
        model.put(&bulk_key(i), &v);
    }
    db.maintain(MaintenanceTask::Commit).expect("seed write-back");
    // A few more writes stay in the record cache, for the open to replay from the WAL.
    for i in 0..8 {
        let (k, v) = (key(i * 3), value(i + 7));
        db.put(&k, &v).expect("seed put");
        model.put(&k, &v);
    }
    db
}

fn snapshot_files(storage: &dyn Storage) -> Vec<(String, Vec<u8>)> {
    let mut names = storage.list().expect("list");
    names.sort();
    names
        .into_iter()
        .filter(|n| n != "LOCK")
        .map(|n| {
            let file = storage.open(&n, OpenOptions::existing()).expect("open seed file");
            let bytes = strata_io::read_all(file.as_ref()).expect("read seed file");
            (n, bytes)
        })
        .collect()
}

/// The `seed` store of `kind`: the one this fuzz build stored (`seed_cache`), else built now.
pub fn seed_store(kind: EngineKind, seed: Seed) -> &'static SeedStore {
    static STORES: [OnceLock<SeedStore>; 18] = [const { OnceLock::new() }; 18];
    let index = EngineKind::ALL.iter().position(|k| *k == kind).expect("a kind");
    let index = index * Seed::ALL.len() + Seed::ALL.iter().position(|s| *s == seed).expect("a seed");
    STORES[index]
        .get_or_init(|| seed_cache::load_or_store(&format!("{kind}-{seed}"), || build_seed_store(kind, seed)))
}

/// Cursor over the fuzz input.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn u16(&mut self) -> Option<u16> {
        let bytes: [u8; 2] = self.0.get(..2)?.try_into().ok()?;
        self.0 = &self.0[2..];
        Some(u16::from_le_bytes(bytes))
    }

    fn u32(&mut self) -> Option<u32> {
        let bytes: [u8; 4] = self.0.get(..4)?.try_into().ok()?;
        self.0 = &self.0[4..];
        Some(u32::from_le_bytes(bytes))
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken
    }
}

/// The flag byte's value (its top five bits) that deletes the file, and the one that replaces it
/// with the rest of the input: 1 in 32 inputs each; every other input edits the file.
const DELETE_FILE: u8 = 31;
const REPLACE_FILE: u8 = 30;
/// The flag byte's bit that asks for a reseal after the edits.
const RESEAL: u8 = 1;

/// Applies the edits the input describes to `bytes`, until the input ends; an edit whose
/// arguments run out is not applied. Each edit is an op byte, then its arguments: the op's low
/// three bits say which edit, bits 3..5 the alignment of its offsets and lengths (1 byte twice in
/// four, 8 bytes, or the target's `unit`: a record or page, so whole checksummed units can be
/// moved, duplicated and dropped).
/// - 0 truncate at `at`: u32
/// - 1 overwrite at `at` with `n` (u8) bytes of input
/// - 2 flip bit `bit`: u32
/// - 3 copy `len` (u16) bytes from `src` (u32) over the bytes at `dst` (u32), growing the file
///   when they run past its end
/// - 4 insert a copy of `len` (u16) bytes from `src` (u32) at `at` (u32)
/// - 5 remove `len` (u16) bytes at `at` (u32)
/// - 6 insert `n` (u8) bytes of input at `at` (u32)
/// - 7 add `delta` (i8) to the little-endian integer of 1, 2, 4 or 8 bytes (`width` u8, low two
///   bits) at `at` (u32)
///
/// Offsets are taken modulo the file length (+1 where the end is a valid place), lengths are
/// clamped to the file.
pub fn edit(bytes: &mut Vec<u8>, data: &[u8], unit: usize) {
    edit_input(bytes, &mut Input(data), unit);
}

fn edit_input(bytes: &mut Vec<u8>, input: &mut Input<'_>, unit: usize) {
    while let Some(op) = input.byte() {
        if apply_edit(bytes, input, op, unit).is_none() {
            return;
        }
    }
}

fn apply_edit(bytes: &mut Vec<u8>, input: &mut Input<'_>, op: u8, unit: usize) -> Option<()> {
    let align = match (op >> 3) & 3 {
        0 | 1 => 1,
        2 => 8,
        _ => unit.max(1),
    };
    // An offset in 0..=len (`end`) or 0..len, a multiple of `align`.
    let place = |raw: u32, len: usize, end: bool| -> usize {
        let slots = if end { len / align + 1 } else { len.div_ceil(align) };
        if slots == 0 {
            0
        } else {
            (raw as usize % slots) * align
        }
    };
    let length = |raw: u16| (raw as usize).next_multiple_of(align);
    match op & 7 {
        0 => {
            let cut = place(input.u32()?, bytes.len(), true);
            bytes.truncate(cut);
        }
        1 => {
            let start = place(input.u32()?, bytes.len(), true);
            let n = usize::from(input.byte()?);
            let patch = input.take(n);
            let end = (start + patch.len()).min(bytes.len());
            bytes[start..end].copy_from_slice(&patch[..end - start]);
        }
        2 => {
            let bit = input.u32()? as usize;
            if !bytes.is_empty() {
                let bit = bit % (bytes.len() * 8);
                bytes[bit / 8] ^= 1 << (bit % 8);
            }
        }
        3 => {
            let (src, dst, len) = (input.u32()?, input.u32()?, input.u16()?);
            let src = place(src, bytes.len(), false);
            let dst = place(dst, bytes.len(), true);
            let chunk = bytes[src.min(bytes.len())..].iter().take(length(len)).copied().collect::<Vec<u8>>();
            let end = dst + chunk.len();
            if end > bytes.len() {
                bytes.resize(end, 0);
            }
            bytes[dst..end].copy_from_slice(&chunk);
        }
        4 => {
            let (at, src, len) = (input.u32()?, input.u32()?, input.u16()?);
            let at = place(at, bytes.len(), true);
            let src = place(src, bytes.len(), false);
            let chunk = bytes[src.min(bytes.len())..].iter().take(length(len)).copied().collect::<Vec<u8>>();
            bytes.splice(at..at, chunk);
        }
        5 => {
            let (at, len) = (input.u32()?, input.u16()?);
            let at = place(at, bytes.len(), false).min(bytes.len());
            let end = (at + length(len)).min(bytes.len());
            bytes.drain(at..end);
        }
        6 => {
            let at = place(input.u32()?, bytes.len(), true);
            let n = usize::from(input.byte()?);
            let patch = input.take(n).to_vec();
            bytes.splice(at..at, patch);
        }
        _ => {
            let (at, width, delta) = (input.u32()?, input.byte()?, input.byte()? as i8);
            let width = 1usize << (width & 3);
            let at = place(at, bytes.len(), false);
            if let Some(field) = bytes.get_mut(at..at + width) {
                let mut word = [0u8; 8];
                word[..width].copy_from_slice(field);
                let sum = u64::from_le_bytes(word).wrapping_add(i64::from(delta) as u64);
                field.copy_from_slice(&sum.to_le_bytes()[..width]);
            }
        }
    }
    Some(())
}

/// What the reads of a damaged store are checked against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Exactly the workload's final contents: a lost write or a resurrected delete is a bug.
    Last,
    /// A value the key held at some point (or none).
    History,
    /// Only the store's agreement with itself: resealed damage to a file of user data makes any
    /// value valid.
    Consistent,
}

/// Opens the seed store of `target` with one file (among those its `pick` accepts) damaged as
/// the input says, then reads every key, scans and verifies. The input: a byte picking the file;
/// a flag byte (bit 0: reseal the file's checksums after the edits, `reseal`; top five bits 31:
/// delete the file, 30: replace it with the rest of the input); then the edits ([`edit`]).
///
/// Panics only on a bug:
/// - a panic inside the engine (with overflow checks and debug assertions on);
/// - the undamaged store failing to open, or failing a read, the scan, `verify` or `close`;
/// - an open that fails with anything but `Error::Corruption` (or `Incompatible`), when
///   `target.open_errors_are_corruption`;
/// - a failed open that removed a file (other than a `.tmp` file), when
///   `target.failed_open_keeps_files`;
/// - a read that returns a wrong value: against the seed's final contents when the seed was
///   closed cleanly and the damage was not resealed (or the reseal changed nothing; and
///   `target.last_values_exact`), against the
///   history of values when the seed was taken at a crash or when resealed damage hit a file
///   without user data (it can only lead to stale data, not make up values);
/// - a scan out of order, or one that ends cleanly and disagrees with the gets (or, for the
///   final-contents check, with the final contents).
pub fn damaged_store(target: &Target, data: &[u8]) {
    let seed = seed_store(target.kind, target.seed);
    let candidates: Vec<usize> = (0..seed.files.len()).filter(|&i| (target.pick)(&seed.files[i].0)).collect();
    let mut input = Input(data);
    let (Some(choice), false) = (input.byte(), candidates.is_empty()) else { return };
    let chosen = candidates[usize::from(choice) % candidates.len()];
    let (name, original) = &seed.files[chosen];
    let flags = input.byte().unwrap_or(0);
    let (damaged, resealed_changes) = match flags >> 3 {
        DELETE_FILE => (None, false),
        REPLACE_FILE => (Some(input.0.to_vec()), false),
        _ => {
            let mut bytes = original.clone();
            edit_input(&mut bytes, &mut input, target.unit);
            let unsealed = (flags & RESEAL != 0).then(|| bytes.clone());
            if unsealed.is_some() {
                (target.reseal)(name, &mut bytes);
            }
            let changed = unsealed.is_some_and(|u| u != bytes);
            (Some(bytes), changed)
        }
    };
    let intact = damaged.as_ref() == Some(original);
    let expect = match (resealed_changes, seed.clean) {
        (false, true) if target.last_values_exact => Expect::Last,
        (false, _) => Expect::History,
        (true, _) if target.holds_values => Expect::Consistent,
        (true, _) => Expect::History,
    };
    let storage = Arc::new(MemStorage::new());
    for (i, (n, bytes)) in seed.files.iter().enumerate() {
        let bytes = if i == chosen { damaged.as_ref() } else { Some(bytes) };
        if let Some(bytes) = bytes {
            let file = storage.open(n, OpenOptions::create()).expect("mem file");
            file.write_at(0, bytes).expect("mem write");
        }
    }
    let before = storage.list().expect("list");
    let db = match Db::open("fuzz", seed_options(target.kind, target.seed).storage(storage.clone())) {
        Ok(db) => db,
        Err(e) => {
            assert!(!intact, "{}: the undamaged {} seed store does not open: {e}", target.name, target.seed);
            if target.open_errors_are_corruption {
                assert!(
                    matches!(e, Error::Corruption { .. } | Error::Incompatible(_)),
                    "{}: damage to {name} failed the open with an error that is not corruption: {e:?}",
                    target.name
                );
            }
            if target.failed_open_keeps_files {
                let after = storage.list().expect("list");
                for n in before.iter().filter(|n| !n.ends_with(".tmp") && *n != "LOCK") {
                    assert!(after.contains(n), "{}: the failed open removed {n} ({e})", target.name);
                }
            }
            return;
        }
    };
    check_reads(&db, seed, expect, target.name, intact);
    no_error_when_intact(&db.verify(), intact, target.name, &"verify");
    no_error_when_intact(&db.close(), intact, target.name, &"close");
}

/// A read of the undamaged store must not fail: an error there is a check that fires on a
/// healthy store (with damage, an error is the store refusing it, which any read may do).
fn no_error_when_intact<T>(
    read: &strata::Result<T>,
    intact: bool,
    target: &str,
    what: &dyn std::fmt::Display,
) {
    if let (true, Err(e)) = (intact, read) {
        panic!("{target}: {what} failed on the undamaged seed store: {e:?}");
    }
}

/// Whether `got` (a read of `k`) is what `expect` allows.
fn allowed(seed: &SeedStore, expect: Expect, k: &[u8], got: Option<&[u8]>) -> bool {
    match expect {
        Expect::Last => seed.last.get(k).map(Vec::as_slice) == got,
        Expect::History => got.is_none_or(|v| seed.history.get(k).is_some_and(|values| values.contains(v))),
        Expect::Consistent => true,
    }
}

fn check_reads(db: &Db, seed: &SeedStore, expect: Expect, target: &str, intact: bool) {
    let mut gets: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
    for k in seed.history.keys() {
        let read = db.get(k);
        no_error_when_intact(&read, intact, target, &format_args!("get {:?}", String::from_utf8_lossy(k)));
        if let Ok(got) = read {
            assert!(
                allowed(seed, expect, k, got.as_deref()),
                "{target}: key {:?} read {} ({expect:?} check; it last held {})",
                String::from_utf8_lossy(k),
                describe(got.as_deref()),
                describe(seed.last.get(k).map(Vec::as_slice)),
            );
            gets.insert(k.clone(), got);
        }
    }
    if !db.capabilities().ordered {
        return;
    }
    let iter = db.iter();
    no_error_when_intact(&iter, intact, target, &"iter");
    let Ok(iter) = iter else { return };
    let mut scanned: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut last: Option<Vec<u8>> = None;
    for item in iter.take(10_000) {
        no_error_when_intact(&item, intact, target, &"a scan item");
        let Ok((k, v)) = item else { return };
        assert!(last.as_ref().is_none_or(|l| *l < k), "{target}: scan out of order at {k:?}");
        assert!(
            allowed(seed, expect, &k, Some(&v)),
            "{target}: scan returned key {:?} with {} ({expect:?} check; it last held {})",
            String::from_utf8_lossy(&k),
            describe(Some(&v)),
            describe(seed.last.get(&k).map(Vec::as_slice)),
        );
        last = Some(k.clone());
        scanned.insert(k, v);
    }
    if scanned.len() == 10_000 {
        return;
    }
    // The scan ended cleanly: it is the store's whole contents.
    if expect == Expect::Last {
        if let Some(k) = seed.last.keys().find(|k| !scanned.contains_key(*k)) {
            panic!("{target}: the scan lost key {:?}", String::from_utf8_lossy(k));
        }
    }
    for (k, got) in &gets {
        assert_eq!(
            got.as_ref(),
            scanned.get(k),
            "{target}: get and scan disagree on key {:?}",
            String::from_utf8_lossy(k)
        );
    }
    for (k, v) in scanned.iter().filter(|(k, _)| !seed.history.contains_key(*k)) {
        if let Ok(got) = db.get(k) {
            assert_eq!(got.as_ref(), Some(v), "{target}: get and scan disagree on key {k:?}");
        }
    }
}

fn describe(v: Option<&[u8]>) -> String {
    v.map_or_else(|| "nothing".to_string(), |v| format!("a value of {} bytes", v.len()))
}

/// Bytes per input unit of a large put's length (255 units: 6,120 bytes, f2's largest value).
const LARGE_PUT_STEP_BYTES: usize = 24;

/// Runs the operations the input describes against `kind` on an in-memory store and a
/// `BTreeMap`, reopening when asked; every read and scan must match the model. On an engine
/// with point-in-time scans, a scan may also be held open (up to four) while later operations
/// run: each advance, and its end (before a reopen, or at the input's end), must match the model
/// as it was when the scan began.
pub fn model_ops(kind: EngineKind, data: &[u8]) {
    let storage = Arc::new(MemStorage::new());
    let open = || Db::open("fuzz", options(kind).storage(storage.clone())).expect("open");
    let mut db = open();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut held: Vec<HeldScan> = Vec::new();
    let mut input = Input(data);
    while let Some(op) = input.byte() {
        let k = format!("k{:02}", input.byte().unwrap_or(0) % 48).into_bytes();
        match op % 8 {
            0..=2 => {
                // Up to 765 bytes, and up to 6 KiB for one op in three (treeline's blob runs).
                let step = if op % 8 == 2 { LARGE_PUT_STEP_BYTES } else { 3 };
                let n = usize::from(input.byte().unwrap_or(0)) * step;
                let v = vec![op; n];
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            3 => {
                db.delete(&k).expect("delete");
                model.remove(&k);
            }
            4 => assert_eq!(db.get(&k).expect("get"), model.get(&k).cloned(), "get {k:?}"),
            5 => {
                // An rmw grows a value by one byte, but never past the largest value the puts
                // above write (255 × 24 = 6,120 bytes, f2's limit exactly): growing past it is
                // an engine's refusal (`InvalidArgument`), not a bug (model_f2 found this).
                const LARGEST_PUT_BYTES: usize = 255 * LARGE_PUT_STEP_BYTES;
                let grow =
                    |o: &[u8]| if o.len() < LARGEST_PUT_BYTES { [o, b"+"].concat() } else { o.to_vec() };
                let new = db.rmw(&k, |old| old.map(grow)).expect("rmw");
                if let Some(v) = model.get_mut(&k) {
                    *v = grow(v);
                }
                assert_eq!(new, model.get(&k).cloned(), "rmw {k:?}");
            }
            6 if db.capabilities().point_in_time_scans && op & 0x30 != 0 => {
                if op & 0x30 == 0x10 && held.len() < 4 {
                    held.push(HeldScan::open(&db, &model, k));
                } else if let Some(scan) = held.last_mut() {
                    scan.advance(usize::from(op >> 6) * 3 + 1);
                }
            }
            6 if db.capabilities().ordered => {
                let got: Vec<(Vec<u8>, Vec<u8>)> =
                    db.range(k.clone()..).expect("range").map(|r| r.expect("item")).collect();
                let want: Vec<(Vec<u8>, Vec<u8>)> =
                    model.range(k..).map(|(a, b)| (a.clone(), b.clone())).collect();
                assert_eq!(got, want, "range scan");
            }
            _ => {
                held.drain(..).for_each(HeldScan::finish);
                db.close().expect("close");
                drop(db);
                db = open();
            }
        }
    }
    held.drain(..).for_each(HeldScan::finish);
    for (k, v) in &model {
        assert_eq!(db.get(k).expect("final get").as_ref(), Some(v), "final {k:?}");
    }
}

/// A scan held open across later operations, and the records it must yield: the model's when
/// it began.
struct HeldScan {
    iter: strata::Iter,
    expected: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
}

impl HeldScan {
    fn open(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, from: Vec<u8>) -> HeldScan {
        let expected: Vec<_> = model.range(from.clone()..).map(|(a, b)| (a.clone(), b.clone())).collect();
        HeldScan { iter: db.range(from..).expect("range"), expected: expected.into_iter() }
    }

    /// The next `n` records (fewer at the end) match the model at the scan's start.
    fn advance(&mut self, n: usize) {
        for _ in 0..n {
            let got = self.iter.next().map(|r| r.expect("held scan item"));
            assert_eq!(got, self.expected.next(), "a held scan saw the store after it began");
        }
    }

    fn finish(mut self) {
        let rest = self.expected.len() + 1;
        self.advance(rest);
    }
}

/// TreeLine's blob runs decoded straight from the input (docs/format/treeline.md, "Blob runs"):
/// the first 24 bytes are a reference, the next byte a key length, then the key, then the run's
/// bytes. Decoding never panics; a value that decodes has the reference's length and checksum
/// and is the run's first bytes.
pub fn treeline_blob(data: &[u8]) {
    use engine_treeline::blob::{checksum, decode_run, encode_run, BlobRef, REF_LEN};
    use engine_treeline::page::PageSize;
    let Some((reference, rest)) = data.split_at_checked(REF_LEN) else { return };
    let Ok(blob) = BlobRef::decode(reference) else { return };
    assert_eq!(&blob.encode()[..], reference, "a reference re-encodes to its bytes");
    let Some((&key_len, rest)) = rest.split_first() else { return };
    let Some((key, run)) = rest.split_at_checked(usize::from(key_len).min(rest.len())) else { return };
    if let Ok(value) = decode_run(run.to_vec(), key, &blob, "treeline-data", 4096) {
        assert_eq!(value.len(), blob.value_len as usize);
        assert_eq!(checksum(key, &value), blob.crc);
        let encoded = encode_run(PageSize::DEFAULT, &value);
        assert_eq!(&encoded[..value.len()], &run[..value.len()], "the value is the run's first bytes");
    }
}
