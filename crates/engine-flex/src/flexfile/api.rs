use strata_core::Result;

/// How far a table file's log was durable at some point: the FlexFile log for tree
/// version `tree_version` held at least `synced_bytes` valid bytes (its 32-byte header included).
/// FlexDB records the mark in `flexdb-meta` at every commit; recovery refuses a log of that tree
/// version that is shorter, or whose valid blocks end earlier. A tree commit (which resets the
/// log) makes an older mark moot: the tree then holds everything the log held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogMark {
    /// Always at least 1 (a FlexFile's first tree version), so 0 can stand for "no mark".
    pub tree_version: u64,
    pub synced_bytes: u64,
}

/// A file whose logical address space can grow and shrink anywhere: the operations FlexDB needs
/// from FlexFile (paper §4, §5.4). All methods take `&self`; implementations are safe for
/// concurrent readers (a writer may hold an internal lock for a short critical section).
///
/// Offsets are logical byte offsets in `0..=len()`.
pub trait TableFile: Send + Sync {
    /// Logical size in bytes.
    fn len(&self) -> u64;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads up to `buf.len()` bytes at `offset`; returns how many were read (short only at the end).
    fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize>;

    /// Overwrites (and, past the end, appends) `data` at `offset` (`offset <= len()`).
    fn write(&self, offset: u64, data: &[u8]) -> Result<()>;

    /// insert-range: `data` appears at `offset`; everything at or after `offset` moves up by
    /// `data.len()`. `offset == len()` appends.
    fn insert(&self, offset: u64, data: &[u8]) -> Result<()>;

    /// collapse-range: removes `len` bytes at `offset`; everything after moves down by `len`.
    fn collapse(&self, offset: u64, len: u64) -> Result<()>;

    /// Replaces the `old_len` bytes at `offset` by `data` (a resize in place: collapse + insert).
    fn update(&self, offset: u64, old_len: u64, data: &[u8]) -> Result<()>;

    /// Finds the extent containing `offset` and returns its logical start (`<= offset`) and up to
    /// `max_len` bytes from that start; `None` when `offset >= len()`. FlexDB relies on every
    /// extent starting at a whole record (it only inserts and removes whole records), which is
    /// what lets recovery sample keys at arbitrary offsets (§5.4).
    fn read_extent(&self, offset: u64, max_len: usize) -> Result<Option<(u64, Vec<u8>)>>;

    /// Makes every operation so far durable, in order (data, then logical log, §4.2 Figure 9).
    /// After a crash the file recovers to the state of some prefix of its operations that includes
    /// every operation before the last `sync` that returned.
    fn sync(&self) -> Result<()>;

    /// Where the file's log stood after the last `sync` that returned (a durable point, never
    /// ahead of one); `None` for a file without a log (the naive baseline).
    fn synced_log(&self) -> Option<LogMark> {
        None
    }

    /// Memory the file keeps (its index, buffers), charged to the engine's memory budget.
    fn memory_bytes(&self) -> u64;

    /// Background upkeep between writes (FlexFile: garbage collection ahead of need), called
    /// where it blocks fewer readers than inside a write; nothing by default.
    fn maintain(&self) -> Result<()> {
        Ok(())
    }

    /// Implementation counters for the engine's stats (none by default).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}
