use crate::{
    Capabilities, ColumnarTable, Direction, KeyRange, Maintenance, NoMaintenance, Result, Schema, Stats,
    Value, WriteBatch,
};

/// How durable a write must be before the call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// On stable storage (fdatasync) before returning: survives power loss.
    Sync,
    /// Handed to the operating system before returning: survives a process crash, not power loss.
    #[default]
    Buffered,
    /// May stay in process memory until the next `flush`, a `Sync` write, or a full buffer.
    None,
}

/// How recovery treats a log whose tail does not verify.
///
/// Neither mode can tell one kind of damage from a crash: after a crash (no clean `close`), a
/// last WAL segment cut so that it loses records acknowledged since the WAL state file was last
/// written (its last rollover, segment release or clean close) *and* every record after them.
/// A cut at a record boundary is then a clean end of the log in both modes; a cut inside a
/// record is a torn tail. The state file is deliberately not rewritten at every sync (it would
/// triple the fsyncs of `Sync` writes); docs/format/wal.md, "The window that leaves", has the
/// exact bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RecoveryMode {
    /// A torn or partly written tail (writes that were never acknowledged as durable) is dropped.
    /// Corruption before the tail — a bad record followed by records written after it was
    /// synced — is still an error. So is a log shorter than what it recorded as synced: a
    /// segment missing, cut below its synced length or replaced by an empty file, or records
    /// ending before the durable lsn of the WAL state file (docs/format/wal.md) — never
    /// tolerated, since that loses acknowledged writes. A cut inside a record of the last
    /// segment above that durable lsn, with nothing after it, is taken for a torn tail and
    /// dropped, even if those records had been acknowledged (the window above).
    #[default]
    TolerateTornTail,
    /// Any record that does not verify is an error, including a torn tail (and everything
    /// `TolerateTornTail` refuses). It still takes a last segment that ends cleanly at a record
    /// boundary above the state file's durable lsn for the end of the log.
    AbsoluteConsistency,
}

/// Size limits an engine enforces with `Error::InvalidArgument`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_key_bytes: usize,
    pub max_value_bytes: usize,
    /// Upper bound on the summed key + value bytes of one write batch.
    pub max_batch_bytes: usize,
}

/// Settings every engine understands; engine-specific knobs live in the engine crates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// Total memory the engine may use for caches, buffers and indexes.
    pub memory_budget_bytes: u64,
    pub recovery_mode: RecoveryMode,
    /// Size of one write-ahead-log segment file; `None`: sized to the memory budget
    /// ([`EngineConfig::effective_wal_segment_bytes`]).
    pub wal_segment_bytes: Option<u64>,
    /// Open data files with O_DIRECT where the engine supports it.
    pub direct_io: bool,
    /// Engine-specific knobs by name and value text (`max_interval_records` = `64`): each engine
    /// applies the ones it knows and refuses the others (`EngineOptionReader`).
    pub engine_options: Vec<(String, String)>,
}

/// The largest WAL segment a budget gets by default (from a 256 MiB budget up), and the log
/// distance that engines whose own triggers must not follow a small budget's segment keep by
/// default (memory's snapshot floor, f2's checkpoint distance).
pub const LARGEST_DEFAULT_WAL_SEGMENT_BYTES: u64 = 64 << 20;

/// The WAL segment size a budget gets when none is set: a quarter of the budget, in whole MiB,
/// within 1 MiB..=[`LARGEST_DEFAULT_WAL_SEGMENT_BYTES`]. A segment is preallocated and up to two
/// spare ones are kept for reuse, so a fixed 64 MiB would be several times the data of a small
/// store; a quarter of the budget keeps the log's files in proportion to the memory whose
/// contents they protect.
pub fn wal_segment_bytes_for_budget(memory_budget_bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    (memory_budget_bytes / 4 / MIB * MIB).clamp(MIB, LARGEST_DEFAULT_WAL_SEGMENT_BYTES)
}

impl EngineConfig {
    /// The WAL segment size: the one set, else the budget's ([`wal_segment_bytes_for_budget`]).
    pub fn effective_wal_segment_bytes(&self) -> u64 {
        self.wal_segment_bytes.unwrap_or(wal_segment_bytes_for_budget(self.memory_budget_bytes))
    }

    /// Sets one engine knob (`engine_options`); setting a name again replaces its value.
    pub fn engine_option(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        match self.engine_options.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.engine_options.push((name, value)),
        }
        self
    }

    /// `engine_option` for each pair, in order.
    pub fn with_engine_options<'a>(self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        pairs.into_iter().fold(self, |config, (n, v)| config.engine_option(n, v))
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            memory_budget_bytes: 256 << 20,
            recovery_mode: RecoveryMode::default(),
            wal_segment_bytes: None,
            direct_io: false,
            engine_options: Vec::new(),
        }
    }
}

/// What `verify` found: every persisted byte it read passed its checksum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub files_checked: u64,
    pub bytes_checked: u64,
    pub records_checked: u64,
}

/// The largest batch the default `Engine::bulk_load` writes at once.
pub const BULK_LOAD_BATCH_BYTES: usize = 1 << 20;

/// `Engine::bulk_load`'s default, callable by engines that override it for some stores only:
/// batches within `limits().max_batch_bytes` (at most `BULK_LOAD_BATCH_BYTES`) written
/// `Buffered`, then a flush.
pub fn bulk_load_by_writes<E: Engine + ?Sized>(
    engine: &E,
    records: &mut dyn Iterator<Item = Result<(crate::Key, Value)>>,
) -> Result<u64> {
    let max_batch_bytes = engine.limits().max_batch_bytes.min(BULK_LOAD_BATCH_BYTES);
    let mut batch = WriteBatch::new();
    let mut loaded = 0u64;
    for record in records {
        let (key, value) = record?;
        if !batch.is_empty() && batch.payload_bytes() + key.len() + value.len() > max_batch_bytes {
            engine.write(std::mem::take(&mut batch), Durability::Buffered)?;
        }
        batch.put(key, value);
        loaded += 1;
    }
    if !batch.is_empty() {
        engine.write(batch, Durability::Buffered)?;
    }
    engine.flush()?;
    Ok(loaded)
}

/// An owning iterator over `(key, value)` pairs in key order (or reverse key order).
pub type KvIter = Box<dyn Iterator<Item = Result<(crate::Key, Value)>> + Send>;

/// The contract every storage engine implements. The facade (`strata::Db`) validates sizes and
/// dispatches here; engines may assume keys and values are within `limits()`.
///
/// Concurrency: all methods take `&self`; an engine is shared by many threads.
pub trait Engine: Send + Sync {
    /// The engine's `EngineKind` name, e.g. `"memory"`.
    fn name(&self) -> &'static str;

    fn limits(&self) -> Limits;

    /// What this engine supports (scans, recovery guarantee, runtime knobs, maintenance tasks).
    fn capabilities(&self) -> Capabilities;

    fn get(&self, key: &[u8]) -> Result<Option<Value>>;

    /// Applies every operation of `batch` atomically.
    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()>;

    /// Atomic read-modify-write of one key: `f` sees the current value (`None` if absent) and
    /// returns the new one (`None` deletes). `f` may be called more than once (on retry).
    /// Returns the value now stored.
    fn rmw(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&[u8]>) -> Option<Value>,
        durability: Durability,
    ) -> Result<Option<Value>>;

    /// Ordered scan. Unordered engines return `Error::Unsupported` with the reason.
    /// The iterator owns what it needs; it is not a point-in-time snapshot unless the engine says so,
    /// but it always yields keys in strictly increasing (or decreasing) order.
    fn range(&self, range: KeyRange, direction: Direction) -> Result<KvIter>;

    /// Makes every write acknowledged so far durable.
    fn flush(&self) -> Result<()>;

    /// Flushes and releases resources; later calls return `Error::Closed`.
    fn close(&self) -> Result<()>;

    fn stats(&self) -> Stats;

    /// Reads every persisted byte and checks every checksum.
    fn verify(&self) -> Result<VerifyReport>;

    /// Runtime knobs and maintenance on demand, as declared in `capabilities()`.
    fn maintenance(&self) -> &dyn Maintenance {
        &NoMaintenance
    }

    /// The engine's own columnar table for `schema`, when `capabilities().columnar`; `None` makes
    /// the facade use the row-encoded fallback (`RowEncodedTable`).
    fn open_table(&self, _schema: &Schema) -> Option<Result<Box<dyn ColumnarTable>>> {
        None
    }

    /// Loads records whose keys strictly increase and returns how many once they are durable.
    /// The facade checks order and sizes; a violation arrives as an `Err` item, which ends the
    /// load with that error. This default writes batches (within `limits().max_batch_bytes`)
    /// and flushes: an error or crash mid-way may leave any prefix of the records loaded.
    /// Engines with a faster path into an empty store override it.
    fn bulk_load(&self, records: &mut dyn Iterator<Item = Result<(crate::Key, Value)>>) -> Result<u64> {
        bulk_load_by_writes(self, records)
    }

    fn put(&self, key: &[u8], value: &[u8], durability: Durability) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write(batch, durability)
    }

    fn delete(&self, key: &[u8], durability: Durability) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write(batch, durability)
    }
}

#[cfg(test)]
mod wal_segment_tests {
    use super::*;

    #[test]
    fn an_unset_wal_segment_is_a_quarter_of_the_budget_in_whole_mib_within_1_to_64_mib() {
        const MIB: u64 = 1 << 20;
        assert_eq!(wal_segment_bytes_for_budget(0), MIB);
        assert_eq!(wal_segment_bytes_for_budget(5 * MIB), MIB);
        assert_eq!(wal_segment_bytes_for_budget(15 * MIB + 300_000), 3 * MIB);
        assert_eq!(wal_segment_bytes_for_budget(256 * MIB), 64 * MIB);
        assert_eq!(wal_segment_bytes_for_budget(u64::MAX), 64 * MIB);
        let config = EngineConfig { memory_budget_bytes: 16 * MIB, ..EngineConfig::default() };
        assert_eq!(config.effective_wal_segment_bytes(), 4 * MIB);
        let set = EngineConfig { wal_segment_bytes: Some(100), ..config };
        assert_eq!(set.effective_wal_segment_bytes(), 100, "a size set is taken as it is");
    }
}
