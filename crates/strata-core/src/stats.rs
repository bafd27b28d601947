/// Byte and operation counters of one storage backend (or the sum over several).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub read_ops: u64,
    pub write_ops: u64,
    pub sync_ops: u64,
}

impl IoStats {
    pub fn add(&mut self, other: &IoStats) {
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.read_ops += other.read_ops;
        self.write_ops += other.write_ops;
        self.sync_ops += other.sync_ops;
    }
}

/// What an engine reports about itself. Common fields first; `engine_counters` carries
/// engine-specific numbers by name (e.g. `wal.group_commits`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub engine: String,
    /// Live keys, when the engine knows it cheaply.
    pub live_keys: Option<u64>,
    /// Key + value bytes accepted from the user (logical writes).
    pub user_bytes_written: u64,
    /// Key + value bytes returned to the user (logical reads).
    pub user_bytes_read: u64,
    /// Bytes and operations that reached the storage backend (device-level).
    pub io: IoStats,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Bytes of memory the engine holds for data, indexes and caches.
    pub memory_bytes: u64,
    /// Bytes the engine's files occupy.
    pub disk_bytes: u64,
    pub engine_counters: Vec<(String, u64)>,
    /// Conditions the user should act on, one sentence each (e.g. a memory budget too small for
    /// the engine's index): empty when all is well. Present from the first `stats()` after open.
    pub notices: Vec<String>,
}

impl Stats {
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.engine_counters.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
}
