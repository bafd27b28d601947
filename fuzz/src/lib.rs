//! Fuzz harnesses shared by the targets in `fuzz_targets/`.
//!
//! - [`damaged_store`]: a real store of each engine is built once per fuzz build and kept, so a
//!   crash input replays against the same files (`seed_cache`) (small sizes, so every kind of
//!   file exists: WAL segments, snapshots, table files, trees, logs, checkpoints, the manifest);
//!   the fuzz input picks one file and damages it (truncate, overwrite, flip, delete, replace),
//!   and the store is opened, read back, scanned and verified. Every decoder on the open and read
//!   paths sees real bytes made wrong. Errors are fine; a panic, or a value the key never held,
//!   is a bug.
//! - [`model_ops`]: operations decoded from the input run against an engine and a `BTreeMap`,
//!   with reopens; every read must match the model.

mod seed_cache;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use strata::storage::{CrashMode, MemStorage, OpenOptions, SimStorage, Storage};
use strata::{Db, Durability, EngineKind, Options, WriteBatch};

/// Sizes that make each engine write every kind of file within a few hundred operations.
pub fn options(kind: EngineKind) -> Options {
    let base = Options::new(kind).memory_budget_bytes(256 << 10).wal_segment_bytes(16 << 10);
    match kind {
        EngineKind::Flex => {
            base.engine_option("memtable_bytes", "4KiB").engine_option("max_interval_records", "8")
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
        _ => base,
    }
}

/// A seed store's files and every value each key ever held.
pub struct SeedStore {
    pub files: Vec<(String, Vec<u8>)>,
    pub history: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:05}", i % 400).into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    let len = (i as usize * 37) % 300;
    (0..len).map(|j| (i as usize + j) as u8).collect()
}

fn build_seed_store(kind: EngineKind) -> SeedStore {
    let sim = SimStorage::new(0x5eed);
    let storage: Arc<dyn Storage> =
        if taken_before_close(kind) { Arc::new(sim.clone()) } else { Arc::new(MemStorage::new()) };
    let db = Db::open("fuzz", options(kind).storage(storage.clone())).expect("seed store opens");
    let mut history: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for i in 0..3_000u32 {
        let (k, v) = (key(i * 7), value(i));
        if i % 11 == 0 {
            db.delete(&k).expect("seed delete");
        } else if i % 5 == 0 {
            let mut batch = WriteBatch::new();
            let (k2, v2) = (key(i * 13), value(i + 1));
            batch.put(k.clone(), v.clone()).put(k2.clone(), v2.clone());
            db.write(batch, Durability::Buffered).expect("seed batch");
            history.entry(k.clone()).or_default().insert(v);
            history.entry(k2).or_default().insert(v2);
        } else {
            db.put_with(&k, &v, if i % 97 == 0 { Durability::Sync } else { Durability::Buffered })
                .expect("seed put");
            history.entry(k).or_default().insert(v);
        }
    }
    if taken_before_close(kind) {
        db.flush().expect("seed store flushes");
        // A power cut freezes every file at one instant (the write-back worker may be mid-batch);
        // later I/O of the old handles fails, so the copy below is one consistent crash state.
        sim.crash(CrashMode::DropUnsynced);
    } else {
        db.close().expect("seed store closes");
    }
    let files = snapshot_files(storage.as_ref());
    drop(db);
    SeedStore { files, history }
}

/// Whether the seed store of `kind` is taken as a power cut leaves it (flushed, then a simulated
/// crash that drops unsynced writes) rather than closed. Treeline's close checkpoints: it writes
/// every record back, truncates `treeline-dwb` and releases the WAL, so a closed store has no
/// double-write images and no WAL records to replay; a crashed one has both (and pages, overflow
/// pages and an earlier checkpoint).
fn taken_before_close(kind: EngineKind) -> bool {
    kind == EngineKind::Treeline
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

/// The seed store of `kind`: the one this fuzz build stored (`seed_cache`), else built now.
pub fn seed_store(kind: EngineKind) -> &'static SeedStore {
    static STORES: [OnceLock<SeedStore>; 6] = [const { OnceLock::new() }; 6];
    let index = EngineKind::ALL.iter().position(|k| *k == kind).expect("a kind");
    STORES[index].get_or_init(|| seed_cache::load_or_store(&kind.to_string(), || build_seed_store(kind)))
}

/// Cursor over the fuzz input.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
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

/// Applies the edits the input describes to `bytes`; `None` means the file is deleted.
fn damage(mut bytes: Vec<u8>, input: &mut Input<'_>) -> Option<Vec<u8>> {
    while let Some(op) = input.byte() {
        let at = |off: u32, len: usize| if len == 0 { 0 } else { off as usize % (len + 1) };
        match op % 6 {
            0 => {
                let cut = at(input.u32()?, bytes.len());
                bytes.truncate(cut);
            }
            1 => {
                let start = at(input.u32()?, bytes.len());
                let n = usize::from(input.byte()?);
                let patch = input.take(n).to_vec();
                let end = (start + patch.len()).min(bytes.len());
                bytes[start..end].copy_from_slice(&patch[..end - start]);
            }
            2 => {
                if !bytes.is_empty() {
                    let bit = input.u32()? as usize % (bytes.len() * 8);
                    bytes[bit / 8] ^= 1 << (bit % 8);
                }
            }
            3 => return None,
            // Recompute a trailing CRC-32C over everything before it (the small-file format of
            // checkpoints, manifests and metadata), so damage reaches the decoder behind it.
            4 => {
                if let Some(body) = bytes.len().checked_sub(4) {
                    let crc = crc32c::crc32c(&bytes[..body]);
                    bytes[body..].copy_from_slice(&crc.to_le_bytes());
                }
            }
            _ => return Some(input.0.to_vec()),
        }
    }
    Some(bytes)
}

/// Opens the seed store of `kind` with one file (among those `pick` accepts) damaged as the input
/// says, then reads every key, scans and verifies. Panics only on a bug: a panic inside the
/// engine, or a value a key never held.
pub fn damaged_store(kind: EngineKind, pick: fn(&str) -> bool, data: &[u8]) {
    let seed = seed_store(kind);
    let candidates: Vec<usize> = (0..seed.files.len()).filter(|&i| pick(&seed.files[i].0)).collect();
    let mut input = Input(data);
    let (Some(choice), false) = (input.byte(), candidates.is_empty()) else { return };
    let target = candidates[usize::from(choice) % candidates.len()];
    let storage = Arc::new(MemStorage::new());
    for (i, (name, bytes)) in seed.files.iter().enumerate() {
        let bytes = if i == target { damage(bytes.clone(), &mut input) } else { Some(bytes.clone()) };
        if let Some(bytes) = bytes {
            let file = storage.open(name, OpenOptions::create()).expect("mem file");
            file.write_at(0, &bytes).expect("mem write");
        }
    }
    let Ok(db) = Db::open("fuzz", options(kind).storage(storage)) else { return };
    check_against_history(&db, &seed.history);
    let _ = db.verify();
    let _ = db.close();
}

fn check_against_history(db: &Db, history: &BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>) {
    for (k, values) in history {
        if let Ok(Some(v)) = db.get(k) {
            assert!(values.contains(&v), "key {k:?} returned a value it never held ({} bytes)", v.len());
        }
    }
    if !db.capabilities().ordered {
        return;
    }
    let Ok(iter) = db.iter() else { return };
    let mut last: Option<Vec<u8>> = None;
    for item in iter.take(10_000) {
        let Ok((k, v)) = item else { return };
        assert!(last.as_ref().is_none_or(|l| *l < k), "scan out of order at {k:?}");
        let held = history.get(&k).is_some_and(|values| values.contains(&v));
        assert!(held, "scan returned key {k:?} with a value it never held");
        last = Some(k);
    }
}

/// Runs the operations the input describes against `kind` on an in-memory store and a
/// `BTreeMap`, reopening when asked; every read and scan must match the model.
pub fn model_ops(kind: EngineKind, data: &[u8]) {
    let storage = Arc::new(MemStorage::new());
    let open = || Db::open("fuzz", options(kind).storage(storage.clone())).expect("open");
    let mut db = open();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut input = Input(data);
    while let Some(op) = input.byte() {
        let k = format!("k{:02}", input.byte().unwrap_or(0) % 48).into_bytes();
        match op % 8 {
            0..=2 => {
                let n = usize::from(input.byte().unwrap_or(0)) * 3;
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
                let new = db.rmw(&k, |old| old.map(|o| [o, b"+"].concat())).expect("rmw");
                if let Some(v) = model.get_mut(&k) {
                    v.push(b'+');
                }
                assert_eq!(new, model.get(&k).cloned(), "rmw {k:?}");
            }
            6 if db.capabilities().ordered => {
                let got: Vec<(Vec<u8>, Vec<u8>)> =
                    db.range(k.clone()..).expect("range").map(|r| r.expect("item")).collect();
                let want: Vec<(Vec<u8>, Vec<u8>)> =
                    model.range(k..).map(|(a, b)| (a.clone(), b.clone())).collect();
                assert_eq!(got, want, "range scan");
            }
            _ => {
                db.close().expect("close");
                drop(db);
                db = open();
            }
        }
    }
    for (k, v) in &model {
        assert_eq!(db.get(k).expect("final get").as_ref(), Some(v), "final {k:?}");
    }
}
