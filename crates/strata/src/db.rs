use std::ops::RangeBounds;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strata_core::{
    Capabilities, ColumnarTable, Direction, Durability, Engine, Error, KeyRange, KvIter, Limits,
    MaintenanceTask, Result, RowEncodedTable, Schema, Stats, Value, VerifyReport, WriteBatch,
};
use strata_io::{FileStorage, Storage, StorageLock};

use crate::{EngineKind, Manifest, Options, Table, MANIFEST_FILE_NAME};

const LOCK_FILE_NAME: &str = "LOCK";

/// An open database. `Send + Sync`: share it between threads by reference or in an `Arc`.
/// Dropping it closes it (flushing buffered writes; errors on that path are ignored — call
/// [`Db::close`] to see them).
pub struct Db {
    engine: Box<dyn Engine>,
    kind: EngineKind,
    limits: Limits,
    default_durability: Durability,
    closed: AtomicBool,
    location: String,
    /// The directory lock: released by `close` once the engine has closed (so the directory can be
    /// reopened while this handle still exists), else on drop after the engine is gone (declared
    /// after `engine`).
    lock: parking_lot::Mutex<Option<Box<dyn StorageLock>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("engine", &self.kind).field("location", &self.location).finish()
    }
}

impl Db {
    /// Opens the database in directory `path` (see [`Options`]).
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        if let Some(kind) = options.engine {
            ensure_available(kind)?;
        }
        let storage: Arc<dyn Storage> = match &options.storage {
            Some(s) => s.clone(),
            None => {
                let path = path.as_ref();
                if !options.create_if_missing && !path.exists() {
                    return Err(Error::invalid(format!("{} does not exist", path.display())));
                }
                Arc::new(FileStorage::open_dir(path, options.create_if_missing)?)
            }
        };
        Db::open_on(storage, options)
    }

    fn open_on(storage: Arc<dyn Storage>, options: Options) -> Result<Db> {
        let location = storage.location();
        if let Some(kind) = options.engine {
            ensure_available(kind)?;
        }
        let lock = storage.lock(LOCK_FILE_NAME)?;
        let mut created = false;
        let kind = match (Manifest::load(storage.as_ref())?, options.engine) {
            (Some(_), _) if options.error_if_exists => {
                return Err(Error::invalid(format!("{location} already holds a Strata database")));
            }
            (Some(manifest), Some(wanted)) if manifest.engine != wanted => {
                return Err(Error::Incompatible(format!(
                    "{location} holds a '{}' database; it cannot be opened as '{wanted}'",
                    manifest.engine
                )));
            }
            (Some(manifest), _) => manifest.engine,
            (None, None) => {
                missing_manifest_beside_engine_files(storage.as_ref())?;
                return Err(Error::invalid(format!(
                    "{location} is not a Strata database (no {MANIFEST_FILE_NAME}); create it with an engine kind"
                )));
            }
            (None, Some(_)) if !options.create_if_missing => {
                return Err(Error::invalid(format!(
                    "{location} holds no database and create_if_missing is off"
                )));
            }
            (None, Some(wanted)) => {
                let foreign: Vec<String> = storage
                    .list()?
                    .into_iter()
                    .filter(|n| n != LOCK_FILE_NAME && !n.ends_with(".tmp"))
                    .collect();
                if !foreign.is_empty() {
                    missing_manifest_beside_engine_files(storage.as_ref())?;
                    return Err(Error::invalid(format!(
                        "{location} is not empty and is not a Strata database (found {}); refusing to create one there",
                        foreign.first().map(String::as_str).unwrap_or_default()
                    )));
                }
                Manifest::new(wanted).store(storage.as_ref())?;
                created = true;
                wanted
            }
        };
        ensure_available(kind)?;
        let engine = match open_engine(kind, storage.clone(), &options) {
            Ok(engine) => engine,
            Err(e) => {
                if created {
                    undo_creation(storage.as_ref());
                }
                return Err(e);
            }
        };
        Ok(Db {
            limits: engine.limits(),
            engine,
            kind,
            default_durability: options.default_durability,
            closed: AtomicBool::new(false),
            location,
            lock: parking_lot::Mutex::new(Some(lock)),
        })
    }

    pub fn kind(&self) -> EngineKind {
        self.kind
    }

    /// Largest key, value and batch this engine accepts.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub(crate) fn default_durability(&self) -> Durability {
        self.default_durability
    }

    /// Where the database lives (a path, or `mem:`/`sim:`).
    pub fn location(&self) -> &str {
        &self.location
    }

    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Value>> {
        self.ensure_open()?;
        let key = key.as_ref();
        self.check_key(key)?;
        self.engine.get(key)
    }

    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_with(key, value, self.default_durability)
    }

    pub fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        durability: Durability,
    ) -> Result<()> {
        self.ensure_open()?;
        let (key, value) = (key.as_ref(), value.as_ref());
        self.check_key(key)?;
        self.check_value(value)?;
        self.engine.put(key, value, durability)
    }

    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_with(key, self.default_durability)
    }

    pub fn delete_with(&self, key: impl AsRef<[u8]>, durability: Durability) -> Result<()> {
        self.ensure_open()?;
        let key = key.as_ref();
        self.check_key(key)?;
        self.engine.delete(key, durability)
    }

    /// Applies every operation of `batch` atomically (all or none survive a crash).
    pub fn write(&self, batch: WriteBatch, durability: Durability) -> Result<()> {
        self.ensure_open()?;
        if batch.payload_bytes() > self.limits.max_batch_bytes {
            return Err(Error::invalid(format!(
                "write batch holds {} bytes of keys and values; the '{}' engine accepts at most {}",
                batch.payload_bytes(),
                self.kind,
                self.limits.max_batch_bytes
            )));
        }
        for op in batch.ops() {
            self.check_key(op.key())?;
            if let Some(value) = op.value() {
                self.check_value(value)?;
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.engine.write(batch, durability)
    }

    /// Loads `records`, whose keys must strictly increase, and returns how many were loaded
    /// once all of them are durable (as after `flush`). Into an empty store an engine may take
    /// a faster path than writes (`treeline` builds its segments directly, all or nothing);
    /// otherwise the records are written in batches, and an error or crash mid-way may leave a
    /// prefix of them loaded. A key out of order, or a key or value over `limits()`, ends the
    /// load with `Error::InvalidArgument` naming the record's position.
    pub fn bulk_load<I, K, V>(&self, records: I) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        self.ensure_open()?;
        let mut previous: Option<Vec<u8>> = None;
        let mut position = 0u64;
        let mut failed = false;
        let mut checked = records.into_iter().map_while(|(key, value)| {
            if failed {
                return None;
            }
            let (key, value) = (key.as_ref(), value.as_ref());
            let checked = self.check_bulk_record(key, value, previous.as_deref(), position);
            failed = checked.is_err();
            position += 1;
            previous = Some(key.to_vec());
            Some(checked.map(|()| (key.to_vec(), value.to_vec())))
        });
        self.engine.bulk_load(&mut checked)
    }

    fn check_bulk_record(
        &self,
        key: &[u8],
        value: &[u8],
        previous: Option<&[u8]>,
        position: u64,
    ) -> Result<()> {
        let at = |e: Error| match e {
            Error::InvalidArgument(msg) => Error::invalid(format!("bulk load record {position}: {msg}")),
            other => other,
        };
        self.check_key(key).map_err(at)?;
        self.check_value(value).map_err(at)?;
        match previous {
            Some(previous) if key <= previous => Err(Error::invalid(format!(
                "bulk load record {position}: keys must strictly increase, but {} follows {}",
                shown_key(key),
                shown_key(previous)
            ))),
            _ => Ok(()),
        }
    }

    /// Atomic read-modify-write: `f` gets the current value (`None` if absent) and returns the new
    /// one (`None` deletes). `f` may run more than once. Returns the value now stored.
    pub fn rmw<F>(&self, key: impl AsRef<[u8]>, f: F) -> Result<Option<Value>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Value>,
    {
        self.rmw_with(key, f, self.default_durability)
    }

    pub fn rmw_with<F>(
        &self,
        key: impl AsRef<[u8]>,
        mut f: F,
        durability: Durability,
    ) -> Result<Option<Value>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Value>,
    {
        self.ensure_open()?;
        let key = key.as_ref();
        self.check_key(key)?;
        let max_value_bytes = self.limits.max_value_bytes;
        let mut oversized = None;
        // An oversized result cannot be stored: keep the old value and report the error afterwards.
        let mut checked = |old: Option<&[u8]>| {
            let new = f(old);
            match new {
                Some(v) if v.len() > max_value_bytes => {
                    oversized = Some(v.len());
                    old.map(<[u8]>::to_vec)
                }
                other => {
                    oversized = None;
                    other
                }
            }
        };
        let stored = self.engine.rmw(key, &mut checked, durability)?;
        match oversized {
            Some(len) => Err(self.value_too_large(len)),
            None => Ok(stored),
        }
    }

    /// Forward scan over `bounds`, e.g. `db.range(b"a".as_slice()..b"m".as_slice())`.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, bounds: R) -> Result<Iter> {
        self.scan(KeyRange::from_bounds(bounds), Direction::Forward)
    }

    /// Reverse scan over `bounds` (largest key first).
    pub fn range_rev<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, bounds: R) -> Result<Iter> {
        self.scan(KeyRange::from_bounds(bounds), Direction::Reverse)
    }

    /// Every key starting with `prefix`, in order.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<Iter> {
        self.scan(KeyRange::prefix(prefix.as_ref()), Direction::Forward)
    }

    pub fn prefix_rev(&self, prefix: impl AsRef<[u8]>) -> Result<Iter> {
        self.scan(KeyRange::prefix(prefix.as_ref()), Direction::Reverse)
    }

    /// Every key, in order.
    pub fn iter(&self) -> Result<Iter> {
        self.scan(KeyRange::all(), Direction::Forward)
    }

    pub fn scan(&self, range: KeyRange, direction: Direction) -> Result<Iter> {
        self.ensure_open()?;
        Ok(Iter::new(self.engine.range(range, direction)?))
    }

    /// Makes every write acknowledged so far durable.
    pub fn flush(&self) -> Result<()> {
        self.ensure_open()?;
        self.engine.flush()
    }

    pub fn stats(&self) -> Result<Stats> {
        self.ensure_open()?;
        Ok(self.engine.stats())
    }

    /// Reads every persisted byte and checks every checksum.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.ensure_open()?;
        self.engine.verify()
    }

    /// What this engine supports: ordered scans, its recovery guarantee, its runtime options and
    /// maintenance tasks, native columnar tables.
    pub fn capabilities(&self) -> Capabilities {
        self.engine.capabilities()
    }

    /// Changes one of the engine's runtime knobs while the store is open (`capabilities()
    /// .runtime_options` lists them; the value text is read as at open, e.g. `64MiB`). Not stored:
    /// the next open uses the options it is given.
    pub fn set_option(&self, name: &str, value: &str) -> Result<()> {
        self.ensure_open()?;
        let runtime = self.engine.capabilities().runtime_options;
        if !runtime.contains(&name) {
            let known = if runtime.is_empty() { "none".to_string() } else { runtime.join(", ") };
            return Err(Error::invalid(format!(
                "the '{}' engine cannot change {name:?} while open; its runtime options: {known}",
                self.kind
            )));
        }
        self.engine.maintenance().set_option(name, value)
    }

    /// Runs maintenance now instead of waiting for the engine's triggers (`capabilities()
    /// .maintenance` lists what the engine does); returns when it is done.
    pub fn maintain(&self, task: MaintenanceTask) -> Result<()> {
        self.ensure_open()?;
        if !self.engine.capabilities().maintenance.contains(&task) {
            return Err(task.not_offered_by(self.kind.name()));
        }
        self.engine.maintenance().run(task)
    }

    /// A table of fixed-width columns over this store: the engine's own columnar layout where it
    /// has one (`capabilities().columnar`), else rows encoded as values. Keys are the store's keys;
    /// a table shares the key space with plain `put`/`get`.
    pub fn table(&self, schema: Schema) -> Result<Table<'_>> {
        self.ensure_open()?;
        if schema.row_bytes() > self.limits.max_value_bytes {
            return Err(self.value_too_large(schema.row_bytes()));
        }
        let inner: Box<dyn ColumnarTable + '_> = match self.engine.open_table(&schema) {
            Some(native) => native?,
            None => Box::new(RowEncodedTable::new(self.engine.as_ref(), schema)),
        };
        Ok(Table::new(self, inner))
    }

    /// Flushes, closes the engine and releases the directory lock. Every later call of another
    /// method returns `Error::Closed`; closing again does nothing and returns `Ok` (dropping a
    /// `Db` closes it too).
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let closed = self.engine.close();
        // Released even when closing failed: the engine's threads are stopped either way, and a
        // new open is how a poisoned or failed store recovers.
        drop(self.lock.lock().take());
        closed
    }

    pub(crate) fn ensure_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    pub(crate) fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() > self.limits.max_key_bytes {
            return Err(Error::invalid(format!(
                "key of {} bytes is too large; the '{}' engine accepts keys up to {} bytes",
                key.len(),
                self.kind,
                self.limits.max_key_bytes
            )));
        }
        Ok(())
    }

    fn check_value(&self, value: &[u8]) -> Result<()> {
        if value.len() > self.limits.max_value_bytes {
            return Err(self.value_too_large(value.len()));
        }
        Ok(())
    }

    fn value_too_large(&self, len: usize) -> Error {
        Error::invalid(format!(
            "value of {len} bytes is too large; the '{}' engine accepts values up to {} bytes",
            self.kind, self.limits.max_value_bytes
        ))
    }
}

/// A key for an error message: its first 32 bytes, non-ASCII escaped.
fn shown_key(key: &[u8]) -> String {
    let head = key.get(..32).unwrap_or(key);
    let more = if key.len() > head.len() { "…" } else { "" };
    format!("\"{}{more}\"", head.escape_ascii())
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// Iterator over `(key, value)` pairs of a scan. Owns what it needs; the `Db` may be used (and
/// written) while it is alive.
pub struct Iter {
    inner: KvIter,
}

impl Iter {
    pub(crate) fn new(inner: KvIter) -> Self {
        Iter { inner }
    }
}

impl Iterator for Iter {
    type Item = Result<(Vec<u8>, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

/// After this open created the store and its engine failed to open (options the engine
/// refuses, an I/O error): removes every file but the lock, so the directory is empty again and
/// can be created with other options or another engine (a durable manifest left behind would
/// make it a database of an engine that never opened). Best effort:
/// the caller reports the engine's error, and the directory held nothing else before.
fn undo_creation(storage: &dyn Storage) {
    let Ok(names) = storage.list() else { return };
    // The manifest goes last: engine files without it read as a store that lost its manifest.
    for name in names.iter().filter(|n| *n != LOCK_FILE_NAME && *n != MANIFEST_FILE_NAME) {
        let _ = storage.remove(name);
    }
    let _ = storage.sync_dir();
    let _ = storage.remove(MANIFEST_FILE_NAME);
    let _ = storage.sync_dir();
}

fn ensure_available(kind: EngineKind) -> Result<()> {
    if kind.is_available() {
        Ok(())
    } else {
        Err(unavailable(kind))
    }
}

fn open_engine(kind: EngineKind, storage: Arc<dyn Storage>, options: &Options) -> Result<Box<dyn Engine>> {
    match crate::registry::factory(kind) {
        Some(factory) => (factory.open)(storage, &options.engine_config),
        None => Err(unavailable(kind)),
    }
}

fn unavailable(kind: EngineKind) -> Error {
    Error::unsupported(format!("engine '{kind}' is not implemented in this build of Strata yet"))
}

/// A directory without a manifest that holds an engine's files lost its manifest (the engine
/// writes none of them before the manifest is durable): `Corruption` naming it, with the engine
/// the files belong to, rather than "not a Strata database".
fn missing_manifest_beside_engine_files(storage: &dyn Storage) -> Result<()> {
    let names = storage.list()?;
    let Some((kind, name)) = names.iter().find_map(|n| EngineKind::owning_file(n).map(|k| (k, n))) else {
        return Ok(());
    };
    Err(Error::corruption(
        MANIFEST_FILE_NAME,
        0,
        format!("missing, but the directory holds {kind} engine files ({name}): restore the manifest"),
    ))
}
