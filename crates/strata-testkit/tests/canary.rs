//! The canary: a small, correct engine (plus switchable bugs) that proves the kit's checks pass
//! legal engines and catch broken ones.
//!
//! The engine keeps a `BTreeMap` in memory. Every `Sync` write, `flush` and `close` persists the
//! whole map (checksummed) with `write_file_atomic`; `open` loads it. Buffered/None writes live in
//! memory only, which is legal: until the next durability point they are pending. Writers take
//! turns (`writer`); a write builds the next map, persists it if it must, and only then installs
//! it, so readers (who never wait for a persist) see a write once it is durable as asked.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use strata_core::{
    BatchOp, Capabilities, Direction, Durability, Engine, Error, Key, KeyRange, KvIter, Limits, Result,
    Stats, Value, VerifyReport, WriteBatch,
};
use strata_io::{read_all, write_file_atomic, OpenOptions, Storage, StorageLock};
use strata_testkit::conformance::{self, Config};
use strata_testkit::{
    crash, damage, failed_writes, faults, in_flight, point_in_time, stress, StorageKind, Target,
};

const DATA_FILE: &str = "canary.data";
/// Written after the first successful persist: from then on a missing data file is damage, not a
/// new store.
const CREATED_FILE: &str = "canary.created";
const LOCK_FILE: &str = "LOCK";

/// Deliberate bugs the checks must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bug {
    None,
    /// Acknowledges every n-th put but never applies it.
    LoseEveryNthPut(u64),
    /// Swaps the first two items of every range result with at least two.
    MisorderScan,
    /// Acknowledges `Sync` writes without persisting them (only flush and close persist).
    AckSyncWithoutPersist,
    /// Read-modify-write reads and writes under separate lock acquisitions: lost updates.
    RacyRmw,
    /// Persisting failures are ignored: the write is acknowledged anyway.
    SwallowPersistErrors,
    /// Open does not verify the checksum.
    SkipChecksum,
    /// Open treats a file that fails its checksum as empty: silent loss of durable data.
    CorruptMeansEmpty,
    /// Open reads a data file cut short as the entries that remain (no checksum check then):
    /// an engine that ignores a shortened log.
    ShortenedFileIsAPrefix,
    /// Open treats a missing data file as a new, empty store even after it was created.
    MissingFileMeansEmpty,
    /// Open refuses a missing data file, but removes the store's other file first (what f2 did
    /// with its segments when its checkpoint was missing).
    RefusalRemovesFiles,
    /// A write is applied to the map before it is persisted and not undone when persisting
    /// fails; the failure refuses later writes but reads go on answering from the map, so they
    /// show the write that returned `Err` (the memory and flex bug of issue #19 item 4).
    FailedWriteStaysVisible,
    /// A write is installed before it is persisted; a failed persist poisons, and reads refuse a
    /// poisoned canary. So only a read *while* the persist runs sees the write that then fails
    /// (what memory, flex, treeline and f2 did before they applied after the log commit).
    InFlightWriteVisible,
    /// Writers do not take turns across a persist, and each applies its own changes to the map
    /// once its persist is done: a later write that needs no persist is applied first and then
    /// overwritten by an earlier one whose persist ends later (apply after commit, but not in
    /// log order).
    AppliesOutOfLogOrder,
    /// A scan reads the live map one record at a time: it sees writes made while it is open.
    ScansSeeLaterWrites,
}

/// `ScansSeeLaterWrites`: each step takes the next record of the map as it is then.
fn live_scan(state: Arc<Mutex<State>>, mut range: KeyRange, direction: Direction) -> KvIter {
    Box::new(std::iter::from_fn(move || {
        let state = state.lock();
        let mut within = state.map.range::<[u8], _>(range.as_bounds());
        let (key, value) = match direction {
            Direction::Forward => within.next(),
            Direction::Reverse => within.next_back(),
        }?;
        match direction {
            Direction::Forward => range.start = std::ops::Bound::Excluded(key.clone()),
            Direction::Reverse => range.end = std::ops::Bound::Excluded(key.clone()),
        }
        Some(Ok((key.clone(), value.clone())))
    }))
}

#[derive(Clone, Copy, Debug)]
struct Options {
    bug: Bug,
    ordered: bool,
    /// Reported as `Capabilities::prefix_consistent_recovery` (the crash oracle it is held to).
    prefix_consistent: bool,
    /// Persist on every write, so Buffered writes survive a process kill.
    persist_every_write: bool,
}

/// Persists every write, so a `Buffered` write is with the storage before it returns, as the
/// durability contract says (a restart without power loss keeps it).
const CORRECT: Options =
    Options { bug: Bug::None, ordered: true, prefix_consistent: true, persist_every_write: true };
/// Persists only `Sync` writes, flush and close: the bugs that need writes held in memory.
const IN_MEMORY_UNTIL_SYNC: Options = Options { persist_every_write: false, ..CORRECT };

struct Canary {
    storage: Arc<dyn Storage>,
    options: Options,
    /// Held by a write from reading the map to installing the next one, persist included, so
    /// writes are persisted and installed in one order (the canary's log order).
    writer: Mutex<()>,
    state: Arc<Mutex<State>>,
    _lock: Box<dyn StorageLock>,
}

#[derive(Default)]
struct State {
    map: BTreeMap<Key, Value>,
    closed: bool,
    /// Set when persisting failed: the durable state is unknown until reopen.
    poisoned: Option<String>,
    /// Puts since the last one `LoseEveryNthPut` dropped.
    puts_seen: u64,
}

impl Canary {
    fn open(storage: Arc<dyn Storage>, options: Options) -> Result<Canary> {
        let lock = storage.lock(LOCK_FILE)?;
        let map = if storage.exists(DATA_FILE)? {
            let file = storage.open(DATA_FILE, OpenOptions::existing())?;
            let bytes = read_all(&*file)?;
            match codec::decode(&bytes, options.bug != Bug::SkipChecksum) {
                Err(e) if e.is_corruption() && options.bug == Bug::CorruptMeansEmpty => BTreeMap::new(),
                Err(e) if e.is_corruption() && options.bug == Bug::ShortenedFileIsAPrefix => {
                    codec::prefix(&bytes)
                }
                decoded => decoded?,
            }
        } else if storage.exists(CREATED_FILE)? && options.bug != Bug::MissingFileMeansEmpty {
            if options.bug == Bug::RefusalRemovesFiles {
                storage.remove(CREATED_FILE)?;
            }
            return Err(Error::corruption(
                DATA_FILE,
                0,
                format!("missing, but {CREATED_FILE} says it was written"),
            ));
        } else {
            BTreeMap::new()
        };
        Ok(Canary {
            storage,
            options,
            writer: Mutex::new(()),
            state: Arc::new(Mutex::new(State { map, ..State::default() })),
            _lock: lock,
        })
    }

    fn usable(state: &State) -> Result<()> {
        if state.closed {
            return Err(Error::Closed);
        }
        match &state.poisoned {
            Some(why) => Err(Error::Poisoned(why.clone())),
            None => Ok(()),
        }
    }

    /// Reads refuse a poisoned canary: its map may hold the write whose persist failed.
    fn readable(&self, state: &State) -> Result<()> {
        match self.options.bug {
            Bug::FailedWriteStaysVisible if !state.closed => Ok(()),
            _ => Canary::usable(state),
        }
    }

    /// Writes `map` as the data file; a failure poisons the canary.
    fn persist(&self, map: &BTreeMap<Key, Value>) -> Result<()> {
        let result = write_file_atomic(&*self.storage, DATA_FILE, &codec::encode(map)).and_then(|()| {
            match self.storage.exists(CREATED_FILE)? {
                true => Ok(()),
                false => write_file_atomic(&*self.storage, CREATED_FILE, b"created"),
            }
        });
        if self.options.bug == Bug::SwallowPersistErrors {
            return Ok(());
        }
        if let Err(e) = &result {
            self.state.lock().poisoned = Some(e.to_string());
        }
        result
    }

    fn must_persist(&self, durability: Durability) -> bool {
        let sync = durability == Durability::Sync && self.options.bug != Bug::AckSyncWithoutPersist;
        sync || self.options.persist_every_write
    }

    /// A write's key changes (`None`: delete), without the puts `LoseEveryNthPut` drops.
    fn changes_of(&self, batch: WriteBatch) -> Changes {
        let mut changes = Changes::new();
        for op in batch.into_ops() {
            match op {
                BatchOp::Put { key, value } => {
                    if let Bug::LoseEveryNthPut(n) = self.options.bug {
                        let mut state = self.state.lock();
                        state.puts_seen += 1;
                        if state.puts_seen == n {
                            state.puts_seen = 0;
                            continue;
                        }
                    }
                    changes.push((key, Some(value)));
                }
                BatchOp::Delete { key } => changes.push((key, None)),
            }
        }
        changes
    }

    /// Builds the next map, persists it when `durability` asks, then installs it (the bugs
    /// change when and how). `writer` is this write's turn.
    fn commit(&self, writer: MutexGuard<'_, ()>, changes: Changes, durability: Durability) -> Result<()> {
        let mut next = {
            let state = self.state.lock();
            Canary::usable(&state)?;
            state.map.clone()
        };
        apply(&mut next, &changes);
        match self.options.bug {
            Bug::FailedWriteStaysVisible | Bug::InFlightWriteVisible => self.state.lock().map = next.clone(),
            Bug::AppliesOutOfLogOrder => drop(writer),
            _ => {}
        }
        if self.must_persist(durability) {
            self.persist(&next)?;
        }
        let mut state = self.state.lock();
        match self.options.bug {
            Bug::AppliesOutOfLogOrder => apply(&mut state.map, &changes),
            _ => state.map = next,
        }
        Ok(())
    }

    /// The map, for a flush or close (which hold the writer's turn).
    fn current_map(&self, closing: bool) -> Result<BTreeMap<Key, Value>> {
        let mut state = self.state.lock();
        Canary::usable(&state)?;
        state.closed |= closing;
        Ok(state.map.clone())
    }
}

/// Key changes of one write, in order.
type Changes = Vec<(Key, Option<Value>)>;

fn apply(map: &mut BTreeMap<Key, Value>, changes: &Changes) {
    for (key, value) in changes {
        match value {
            Some(value) => map.insert(key.clone(), value.clone()),
            None => map.remove(key),
        };
    }
}

impl Engine for Canary {
    fn name(&self) -> &'static str {
        "canary"
    }

    fn limits(&self) -> Limits {
        Limits { max_key_bytes: 1024, max_value_bytes: 64 << 10, max_batch_bytes: 1 << 20 }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            ordered: self.options.ordered,
            point_in_time_scans: true,
            prefix_consistent_recovery: self.options.prefix_consistent,
            columnar: false,
            runtime_options: &[],
            maintenance: &[],
        }
    }

    fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        let state = self.state.lock();
        self.readable(&state)?;
        Ok(state.map.get(key).cloned())
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        let writer = self.writer.lock();
        let changes = self.changes_of(batch);
        self.commit(writer, changes, durability)
    }

    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>> {
        let current = || -> Result<Option<Value>> {
            let state = self.state.lock();
            Canary::usable(&state)?;
            Ok(state.map.get(key).cloned())
        };
        let (writer, new) = if self.options.bug == Bug::RacyRmw {
            let old = {
                let _writer = self.writer.lock();
                current()?
            };
            std::thread::yield_now();
            let new = f(old.as_deref());
            (self.writer.lock(), new)
        } else {
            let writer = self.writer.lock();
            let old = current()?;
            (writer, f(old.as_deref()))
        };
        self.commit(writer, vec![(key.to_vec(), new.clone())], durability)?;
        Ok(new)
    }

    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter> {
        if !self.options.ordered {
            return Err(Error::unsupported("this canary is configured as an unordered (hash) engine"));
        }
        let state = self.state.lock();
        self.readable(&state)?;
        if self.options.bug == Bug::ScansSeeLaterWrites {
            return Ok(live_scan(self.state.clone(), range, direction));
        }
        let mut items: Vec<(Key, Value)> = if range.is_empty() {
            Vec::new()
        } else {
            state.map.range::<[u8], _>(range.as_bounds()).map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        if direction == Direction::Reverse {
            items.reverse();
        }
        if self.options.bug == Bug::MisorderScan && items.len() >= 2 {
            items.swap(0, 1);
        }
        Ok(Box::new(items.into_iter().map(Ok)))
    }

    fn flush(&self) -> Result<()> {
        let _writer = self.writer.lock();
        self.persist(&self.current_map(false)?)
    }

    fn close(&self) -> Result<()> {
        let _writer = self.writer.lock();
        self.persist(&self.current_map(true)?)
    }

    fn stats(&self) -> Stats {
        let state = self.state.lock();
        Stats {
            engine: "canary".into(),
            live_keys: Some(state.map.len() as u64),
            io: self.storage.io_stats(),
            ..Stats::default()
        }
    }

    fn verify(&self) -> Result<VerifyReport> {
        if !self.storage.exists(DATA_FILE)? {
            return Ok(VerifyReport::default());
        }
        let bytes = read_all(&*self.storage.open(DATA_FILE, OpenOptions::existing())?)?;
        let map = codec::decode(&bytes, self.options.bug != Bug::SkipChecksum)?;
        Ok(VerifyReport {
            files_checked: 1,
            bytes_checked: bytes.len() as u64,
            records_checked: map.len() as u64,
        })
    }
}

/// `CNRY`, u64 entry count, entries (u32 key length, key, u32 value length, value), crc32c of
/// everything before it; all little-endian.
mod codec {
    #![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

    use std::collections::BTreeMap;

    use strata_core::{Error, Key, Result, Value};

    const MAGIC: &[u8; 4] = b"CNRY";

    pub fn encode(map: &BTreeMap<Key, Value>) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(map.len() as u64).to_le_bytes());
        for (k, v) in map {
            out.extend_from_slice(&(k.len() as u32).to_le_bytes());
            out.extend_from_slice(k);
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// The entries that can be read, ignoring the count and checksum (the bug
    /// `ShortenedFileIsAPrefix`).
    pub fn prefix(bytes: &[u8]) -> BTreeMap<Key, Value> {
        let mut map = BTreeMap::new();
        let mut pos = 12usize;
        let mut take = |n: usize| {
            let slice = bytes.get(pos..pos.saturating_add(n))?;
            pos += n;
            Some(slice)
        };
        let len = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap_or_default()) as usize;
        while let Some(k) = take(4).map(len).and_then(|n| take(n).map(<[u8]>::to_vec)) {
            let Some(v) = take(4).map(len).and_then(|n| take(n).map(<[u8]>::to_vec)) else { break };
            map.insert(k, v);
        }
        map
    }

    pub fn decode(bytes: &[u8], verify_checksum: bool) -> Result<BTreeMap<Key, Value>> {
        let corrupt = |offset: usize, what: &str| Error::corruption(super::DATA_FILE, offset as u64, what);
        let body_len =
            bytes.len().checked_sub(4).ok_or_else(|| corrupt(0, "file shorter than its checksum"))?;
        let (body, crc) = bytes.split_at(body_len);
        let stored = u32::from_le_bytes(crc.try_into().map_err(|_| corrupt(body_len, "short checksum"))?);
        if verify_checksum && crc32c::crc32c(body) != stored {
            return Err(corrupt(body_len, "checksum mismatch"));
        }
        let mut pos = 0usize;
        let mut take = |n: usize| -> Result<&[u8]> {
            let slice =
                body.get(pos..pos.saturating_add(n)).ok_or_else(|| corrupt(pos, "truncated entry"))?;
            pos += n;
            Ok(slice)
        };
        if take(4)? != MAGIC {
            return Err(corrupt(0, "bad magic"));
        }
        let count = u64::from_le_bytes(take(8)?.try_into().map_err(|_| corrupt(4, "short count"))?);
        let mut map = BTreeMap::new();
        for _ in 0..count {
            let len = u32::from_le_bytes(take(4)?.try_into().map_err(|_| corrupt(0, "short length"))?);
            let key = take(len as usize)?.to_vec();
            let len = u32::from_le_bytes(take(4)?.try_into().map_err(|_| corrupt(0, "short length"))?);
            let value = take(len as usize)?.to_vec();
            map.insert(key, value);
        }
        Ok(map)
    }
}

fn target(options: Options) -> Target {
    named_target("canary", options)
}

fn named_target(name: &'static str, options: Options) -> Target {
    Target::new(
        name,
        Arc::new(move |storage: Arc<dyn Storage>| {
            Ok(Box::new(Canary::open(storage, options)?) as Box<dyn Engine>)
        }),
    )
}

/// Fixed seeds for the "catches" tests, so they are deterministic.
const BITE_SEEDS: [u64; 3] = [1, 2, 3];

#[test]
fn canary_correct_engine_passes_conformance() {
    conformance::check(&target(CORRECT), StorageKind::Mem);
    conformance::check(&target(CORRECT), StorageKind::Sim);
}

#[test]
fn canary_unordered_engine_passes_the_weak_crash_oracle() {
    let target =
        named_target("canary-unordered", Options { ordered: false, prefix_consistent: false, ..CORRECT });
    conformance::check(&target, StorageKind::Sim);
}

#[test]
fn conformance_catches_lost_write() {
    let target = target(Options { bug: Bug::LoseEveryNthPut(7), ..CORRECT });
    for seed in BITE_SEEDS {
        let result = conformance::run(&target, &Config::new(StorageKind::Mem, seed));
        assert!(
            matches!(&result, Err(f) if f.description.contains("the model holds") || f.description.contains("differs from the model")),
            "{result:?}"
        );
    }
}

#[test]
fn conformance_catches_misordered_scan() {
    let target = target(Options { bug: Bug::MisorderScan, ..CORRECT });
    for seed in BITE_SEEDS {
        let result = conformance::run(&target, &Config::new(StorageKind::Mem, seed));
        assert!(matches!(&result, Err(f) if f.description.contains("not strictly ordered")), "{result:?}");
    }
}

#[test]
fn point_in_time_check_passes_a_snapshot_scan_and_catches_a_live_one() {
    point_in_time::check(&target(CORRECT));
    let target = target(Options { bug: Bug::ScansSeeLaterWrites, ..CORRECT });
    for seed in BITE_SEEDS {
        let result = point_in_time::run(&target, seed);
        assert!(matches!(&result, Err(e) if e.contains("the store then held")), "{result:?}");
    }
}

#[test]
fn conformance_catches_sync_write_lost_in_a_crash() {
    let target = target(Options { bug: Bug::AckSyncWithoutPersist, ..IN_MEMORY_UNTIL_SYNC });
    for seed in BITE_SEEDS {
        let result = conformance::run(&target, &Config::new(StorageKind::Sim, seed));
        assert!(
            matches!(&result, Err(f) if f.description.contains("after the crash") && f.op_index.is_some()),
            "{result:?}"
        );
    }
}

#[test]
fn canary_passes_fault_injection() {
    faults::check(&target(CORRECT));
}

#[test]
fn canary_passes_stress() {
    stress::check(&target(CORRECT), 4, 2000);
}

#[test]
fn stress_catches_lost_updates() {
    let target = target(Options { bug: Bug::RacyRmw, ..CORRECT });
    let result = stress::run(&target, 1, 4, 3000);
    assert!(matches!(&result, Err(f) if f.description.contains("lost updates")), "{result:?}");
}

#[test]
fn faults_catch_swallowed_io_errors() {
    let target = target(Options { bug: Bug::SwallowPersistErrors, ..CORRECT });
    for seed in BITE_SEEDS {
        let result = faults::run(&target, seed);
        // The lost write shows at the power loss, or at a reopen the fault phase ran first.
        let lost = |f: &strata_testkit::Failure| {
            f.description.contains("after the crash") || f.description.contains("after close and reopen")
        };
        assert!(matches!(&result, Err(f) if lost(f)), "{result:?}");
    }
}

#[test]
fn faults_catch_undetected_bit_flips() {
    let target = target(Options { bug: Bug::SkipChecksum, ..CORRECT });
    for seed in BITE_SEEDS {
        let result = faults::run(&target, seed);
        assert!(matches!(&result, Err(f) if f.description.contains("undetected corruption")), "{result:?}");
    }
}

#[test]
fn faults_catch_durable_data_silently_dropped_after_a_bit_flip() {
    let target = target(Options { bug: Bug::CorruptMeansEmpty, ..CORRECT });
    for seed in BITE_SEEDS {
        let result = faults::run(&target, seed);
        assert!(
            matches!(&result, Err(f) if f.description.contains("durable data is silently")),
            "{result:?}"
        );
    }
}

#[test]
fn canary_passes_the_failed_writes_check() {
    failed_writes::check(&target(CORRECT));
    let unordered =
        named_target("canary-unordered", Options { ordered: false, prefix_consistent: false, ..CORRECT });
    failed_writes::check(&unordered);
}

#[test]
fn failed_writes_check_catches_a_failed_write_left_visible() {
    let target = target(Options { bug: Bug::FailedWriteStaysVisible, ..CORRECT });
    for seed in BITE_SEEDS {
        let result = failed_writes::run(&target, seed);
        assert!(matches!(&result, Err(f) if f.description.contains("failed writes absent")), "{result:?}");
    }
}

#[test]
fn canary_passes_the_in_flight_check() {
    in_flight::check(&target(CORRECT));
    let unordered =
        named_target("canary-unordered", Options { ordered: false, prefix_consistent: false, ..CORRECT });
    in_flight::check(&unordered);
}

/// A `Sync` write that does no I/O before it returns is never held: the scenario would check
/// nothing, and the check says so instead of passing.
#[test]
fn in_flight_check_refuses_a_sync_write_it_could_not_hold() {
    let target = target(Options { bug: Bug::AckSyncWithoutPersist, ..IN_MEMORY_UNTIL_SYNC });
    let result = in_flight::run(&target, 1);
    assert!(matches!(&result, Err(f) if f.description.contains("never held")), "{result:?}");
}

#[test]
fn in_flight_check_catches_a_write_visible_while_its_persist_runs() {
    for bug in [Bug::InFlightWriteVisible, Bug::FailedWriteStaysVisible] {
        let result = in_flight::run(&target(Options { bug, ..CORRECT }), 1);
        assert!(
            matches!(&result, Err(f) if f.description.contains("visible before it failed")),
            "{bug:?}: {result:?}"
        );
    }
}

#[test]
fn in_flight_check_catches_writes_applied_out_of_log_order() {
    let result =
        in_flight::run(&target(Options { bug: Bug::AppliesOutOfLogOrder, ..IN_MEMORY_UNTIL_SYNC }), 1);
    assert!(
        matches!(&result, Err(f) if f.description.contains("applied over the later write")),
        "{result:?}"
    );
}

/// Why the in-flight check exists: the failed-writes check judges reads made after a failed
/// write returned, so a write visible only while its persist runs passes it.
#[test]
fn failed_writes_check_does_not_see_a_write_visible_only_while_in_flight() {
    for seed in BITE_SEEDS {
        let result = failed_writes::run(&target(Options { bug: Bug::InFlightWriteVisible, ..CORRECT }), seed);
        assert!(result.is_ok(), "{result:?}");
    }
}

#[test]
fn canary_passes_the_damage_set() {
    damage::check(&target(CORRECT));
}

#[test]
fn damage_catches_an_engine_that_ignores_a_shortened_file() {
    let target = target(Options { bug: Bug::ShortenedFileIsAPrefix, ..CORRECT });
    let result = damage::run(&target, 1);
    assert!(matches!(&result, Err(f) if f.description.contains("silent loss")), "{result:?}");
}

#[test]
fn damage_catches_an_engine_that_reads_a_missing_file_as_empty() {
    let target = target(Options { bug: Bug::MissingFileMeansEmpty, ..CORRECT });
    let result = damage::run(&target, 1);
    assert!(
        matches!(&result, Err(f) if f.description.contains("Delete") && f.description.contains("silent loss")),
        "{result:?}"
    );
}

#[test]
fn damage_catches_an_open_that_removes_files_before_it_refuses() {
    let target = target(Options { bug: Bug::RefusalRemovesFiles, ..CORRECT });
    let result = damage::run(&target, 1);
    assert!(
        matches!(&result, Err(f) if f.description.contains("the open refused, but it removed")),
        "{result:?}"
    );
}

/// The canary persists on every write here, so Buffered writes reach the OS as the contract
/// requires for surviving a process kill.
#[test]
fn process_kill_canary() {
    let target = target(Options { persist_every_write: true, ..CORRECT });
    crash::process_kill(&target, "process_kill_canary", 8);
}

/// The correct canary keeps Buffered writes in memory only: legal under power loss, but a
/// process kill loses them, and the harness must notice.
#[test]
fn process_kill_catches_lost_buffered_writes() {
    let result =
        crash::run(&target(IN_MEMORY_UNTIL_SYNC), "process_kill_catches_lost_buffered_writes", 12, 1);
    assert!(matches!(&result, Err(f) if f.description.contains("matches neither")), "{result:?}");
}

/// A `Buffered` write that returned Ok is with the storage: a restart without power loss (a
/// failed close, then a reopen) keeps it. An engine that holds it in memory until a Sync loses it
/// there, and the restart check says so.
#[test]
fn restart_check_catches_buffered_writes_held_in_memory() {
    let target = named_target("canary-in-memory-until-sync", IN_MEMORY_UNTIL_SYNC);
    let caught = BITE_SEEDS.iter().any(|&seed| {
        let result = failed_writes::run(&target, seed);
        matches!(&result, Err(f) if f.description.contains("restart without power loss"))
    });
    assert!(caught, "no seed caught Buffered writes lost at a restart without power loss");
}
