//! The one interface the driver uses for every engine: Strata's engines through the public
//! `strata::Db` API, and peer engines behind cargo features (`src/peers/`).

use std::path::{Path, PathBuf};

/// What every adapter is opened with. Each adapter maps these onto its own knobs and reports how
/// in `config_description`.
#[derive(Clone, Debug)]
pub struct OpenParams {
    /// An empty directory the adapter owns for this run.
    pub dir: PathBuf,
    /// Memory the engine may use for caches, memtables and buffers.
    pub memory_budget_bytes: u64,
    /// Use O_DIRECT for data files where the engine supports it.
    pub direct_io: bool,
    /// Make every write durable before it returns (WAL + fsync). Off: the engine's default
    /// buffered durability (WAL written to the OS, not fsynced), or no WAL where that is the
    /// only alternative — `config_description` must say which.
    pub sync_writes: bool,
    /// Worker threads that will use the adapter concurrently.
    pub threads: usize,
}

/// A key-value engine under test. Shared by all worker threads (`&self` everywhere).
pub trait KvAdapter: Send + Sync {
    /// Short name used in reports and `--engines`, e.g. `memory`, `rocksdb`.
    fn name(&self) -> &str;
    /// Every configuration choice that matters for a fair comparison, printed in the report.
    fn config_description(&self) -> Vec<(String, String)>;
    /// Returns the value length if present (values are read fully, then dropped).
    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>>;
    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()>;
    fn delete(&self, key: &[u8]) -> anyhow::Result<()>;
    /// Reads up to `count` records in key order starting at `start` (inclusive); returns how many
    /// were read. Unordered engines return an error.
    fn scan(&self, start: &[u8], count: usize) -> anyhow::Result<usize>;
    /// YCSB read-modify-write: read the record, then write the new value.
    fn read_modify_write(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        self.get(key)?;
        self.put(key, value)
    }
    /// Makes everything written so far durable (end of load phase).
    fn flush(&self) -> anyhow::Result<()>;
    /// `--load-mode bulk`: loads `records` (strictly increasing keys) into the empty store the
    /// way its own users bulk-load, durable on return; returns how many. The default puts them
    /// in order and flushes; adapters with a bulk path say what it does in `config_description`.
    fn bulk_load(&self, records: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> anyhow::Result<u64> {
        let mut loaded = 0;
        for (key, value) in records {
            self.put(&key, &value)?;
            loaded += 1;
        }
        self.flush()?;
        Ok(loaded)
    }
    /// Finishes the background work that would otherwise run during the next phase (an LSM's
    /// pending flushes and compactions), durable on return: `--from-checkpoint` settles the aged
    /// store before closing and copying it, so no engine's measured workloads pay a debt that
    /// another engine paid inside its close. The default flushes (Strata's engines finish their
    /// write-back in `close`).
    fn settle(&self) -> anyhow::Result<()> {
        self.flush()
    }
    /// Engine-reported statistics when the engine has them (Strata engines do).
    fn engine_stats(&self) -> Option<strata::Stats> {
        None
    }
    /// Closes the engine, releasing its files (so a reopen of the same directory can be timed).
    fn close(self: Box<Self>) -> anyhow::Result<()>;
}

/// Bytes the files under `dir` occupy (apparent sizes, recursively).
pub fn dir_size_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
