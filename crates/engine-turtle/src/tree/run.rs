//! A sorted run of the tree (a leaf's records or a buffer segment's entries), always encoded
//! as a kit sorted run: in memory while it is new (one allocation, read through a reader over
//! it), in `turtle-pages` once a checkpoint or spill wrote those same bytes. Clones share it; a
//! node split gives both halves the same run. Written once however many views share it.
//! Kept encoded rather than as entries so a new run costs one allocation to hold and to free
//! (a reader that drops the last copy of an old tree frees whole runs), a checkpoint writes it
//! without encoding it, and memory holds its bytes, not a vector and two allocations per entry.

use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use strata_core::{Direction, Key, Result};
use strata_io::{BytesFile, StorageFile};
use strata_kit::sorted_run::{Entry, RunOptions, RunReader, RunWriter, SourceIter};

use super::entry_bytes;
use crate::pages::{Extent, ExtentGuard, Pages, ALIGN_BYTES, PAGES_FILE};

/// The name a run in memory goes by in errors.
const MEMORY_RUN_NAME: &str = "turtle run in memory";

/// See the module documentation.
#[derive(Clone, Debug)]
pub enum Run {
    Memory(Arc<MemRun>),
    Disk(Arc<DiskRun>),
}

/// A run's reader and what its node page keeps of it: the `entry_bytes` of all its entries and
/// its data blocks' bytes, whose ratio turns the block index's byte counts into `entry_bytes`.
#[derive(Debug)]
struct Encoded {
    reader: Arc<RunReader>,
    entry_bytes: u64,
    data_bytes: u64,
}

impl Encoded {
    fn new(reader: RunReader, entry_bytes: u64) -> Encoded {
        let data_bytes = reader.approximate_bytes(Bound::Unbounded, Bound::Unbounded);
        Encoded { reader: Arc::new(reader), entry_bytes, data_bytes }
    }
}

/// A run not yet checkpointed: its encoding in memory.
#[derive(Debug)]
pub struct MemRun {
    encoded: Encoded,
    file: Arc<BytesFile>,
    /// Set by the first checkpoint that writes it (every view then uses the one copy).
    persisted: OnceLock<Arc<DiskRun>>,
}

/// A checkpointed run: its reader (index and filter in memory) and its extent, retired when the
/// last view lets go of it.
#[derive(Debug)]
pub struct DiskRun {
    encoded: Encoded,
    guard: ExtentGuard,
}

impl DiskRun {
    /// Opens the run at `extent` whose entries count `entry_bytes` (both from a node page).
    pub fn open(pages: &Arc<Pages>, extent: Extent, entry_bytes: u64) -> Result<Arc<DiskRun>> {
        let cache = Some(pages.block_cache().clone());
        let reader =
            RunReader::open_cached(pages.file().clone(), PAGES_FILE, extent.offset, extent.len, cache)?;
        Ok(DiskRun::with_reader(pages, extent, reader, entry_bytes))
    }

    fn with_reader(pages: &Arc<Pages>, extent: Extent, reader: RunReader, entry_bytes: u64) -> Arc<DiskRun> {
        let guard = ExtentGuard::new(extent, pages.clone());
        Arc::new(DiskRun { encoded: Encoded::new(reader, entry_bytes), guard })
    }

    /// The run's `RunReader::identity`, which node pages keep beside their references.
    pub fn identity(&self) -> u32 {
        self.encoded.reader.identity()
    }

    pub fn extent(&self) -> Extent {
        self.guard.extent()
    }

    pub fn memory_bytes(&self) -> usize {
        self.encoded.reader.memory_bytes()
    }
}

fn to_owned(bound: Bound<&[u8]>) -> Bound<Key> {
    bound.map(<[u8]>::to_vec)
}

impl Run {
    /// A run of `entries` (keys strictly ascending), encoded in blocks of `block_bytes` aligned
    /// to their size, as it will be written.
    pub fn memory(entries: Vec<(Key, Entry)>, block_bytes: usize) -> Result<Run> {
        let mut builder = RunBuilder::new(block_bytes)?;
        for (key, entry) in &entries {
            builder.add(key, entry)?;
        }
        builder.finish()
    }

    /// A run with no entries (a new tree's leaf).
    pub fn empty() -> Result<Run> {
        Run::memory(Vec::new(), ALIGN_BYTES as usize)
    }

    fn encoded(&self) -> &Encoded {
        match self {
            Run::Memory(m) => &m.encoded,
            Run::Disk(d) => &d.encoded,
        }
    }

    /// The entry of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        self.encoded().reader.get(key)
    }

    /// The entries within the bounds, in `direction`.
    pub fn iter<'a>(
        &'a self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> SourceIter<'a> {
        Box::new(self.encoded().reader.iter(to_owned(lower), to_owned(upper), direction))
    }

    /// `entry_bytes` of the entries within the bounds: the bytes of the blocks that may hold
    /// them (from the block index: at most a block too many at each end) scaled to
    /// `entry_bytes`. Zero only when the bounds hold no entry.
    pub fn bytes_between(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> u64 {
        let e = self.encoded();
        let blocks = e.reader.approximate_bytes(lower, upper);
        let scaled = u128::from(blocks) * u128::from(e.entry_bytes) / u128::from(e.data_bytes.max(1));
        if blocks == 0 {
            0
        } else {
            (scaled as u64).max(1)
        }
    }

    /// How far `bytes_between` may count over at each end of a range: twice an average block in
    /// `entry_bytes` (a block holds `block_bytes` plus at most one entry).
    pub fn estimate_slack_bytes(&self) -> u64 {
        let e = self.encoded();
        2 * e.entry_bytes / (e.reader.data_blocks() as u64).max(1)
    }

    /// `entry_bytes` of all its entries.
    pub fn total_bytes(&self) -> u64 {
        self.encoded().entry_bytes
    }

    /// Every entry (a rewrite reads the whole run).
    pub fn entries(&self) -> Result<Vec<(Key, Entry)>> {
        self.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).collect()
    }

    /// Entries held (the footer's count).
    pub fn entry_count(&self) -> u64 {
        self.encoded().reader.entry_count()
    }

    /// Memory the run holds: its bytes and reader in memory, or its reader's index and filter.
    pub fn memory_bytes(&self) -> u64 {
        match self {
            Run::Memory(m) => (m.file.capacity_bytes() + m.encoded.reader.memory_bytes()) as u64,
            Run::Disk(d) => d.memory_bytes() as u64,
        }
    }

    /// Whether it is new (in memory, not yet written).
    pub fn is_memory(&self) -> bool {
        matches!(self, Run::Memory(_))
    }

    /// This run on disk: its bytes written into `pages` on the first call for a memory run
    /// (not synced), the existing copy afterwards.
    pub fn persist(&self, pages: &Arc<Pages>) -> Result<Run> {
        let m = match self {
            Run::Disk(_) => return Ok(self.clone()),
            Run::Memory(m) => m,
        };
        if let Some(disk) = m.persisted.get() {
            return Ok(Run::Disk(disk.clone()));
        }
        // A reader with the block cache, opened over the bytes in memory and moved to where
        // they are written: nothing is read back from the device.
        let cache = Some(pages.block_cache().clone());
        let len = m.file.len()?;
        let reader = RunReader::open_cached(m.file.clone(), MEMORY_RUN_NAME, 0, len, cache)?;
        let extent = m.file.with_bytes(|bytes| pages.write(bytes))?;
        let reader = reader.moved_to(pages.file().clone(), PAGES_FILE, extent.offset);
        let disk = DiskRun::with_reader(pages, extent, reader, self.total_bytes());
        Ok(Run::Disk(m.persisted.get_or_init(|| disk).clone()))
    }

    /// The run's identity in memory (views of one run share it).
    pub fn id(&self) -> usize {
        match self {
            Run::Memory(m) => Arc::as_ptr(m) as usize,
            Run::Disk(d) => Arc::as_ptr(d) as usize,
        }
    }

    /// The extent of a disk run.
    pub fn extent(&self) -> Option<Extent> {
        match self {
            Run::Memory(_) => None,
            Run::Disk(d) => Some(d.extent()),
        }
    }

    /// The written copy of a memory run that a checkpoint wrote (`persist`), else this run.
    pub fn written(&self) -> Run {
        match self {
            Run::Memory(m) => m.persisted.get().map_or_else(|| self.clone(), |d| Run::Disk(d.clone())),
            Run::Disk(_) => self.clone(),
        }
    }
}

/// A memory run built one entry at a time, encoded as the entries come (none is held): kit
/// sorted-run blocks of `block_bytes` aligned to their size and the run padded to the page
/// alignment, so a block read from `turtle-pages` with direct I/O is one page, not the two a
/// packed block spans, and a checkpoint writes the bytes as they are.
pub struct RunBuilder {
    file: Arc<BytesFile>,
    writer: RunWriter,
    entry_bytes: u64,
}

impl RunBuilder {
    /// An empty builder. Its bytes grow as written and are trimmed once finished: reserving a
    /// segment's size up front measured a third more peak RSS on a load (the allocator kept
    /// the trimmed reservations' pages).
    pub fn new(block_bytes: usize) -> Result<RunBuilder> {
        let options = RunOptions {
            block_bytes,
            block_align_bytes: block_bytes,
            align_bytes: ALIGN_BYTES as usize,
            ..RunOptions::default()
        };
        let file = Arc::new(BytesFile::new(MEMORY_RUN_NAME));
        let writer = RunWriter::new(file.clone(), 0, options)?;
        Ok(RunBuilder { file, writer, entry_bytes: 0 })
    }

    /// Appends `entry` (its key above every one before it).
    pub fn add(&mut self, key: &[u8], entry: &Entry) -> Result<()> {
        self.entry_bytes += entry_bytes(key, entry);
        self.writer.add(key, entry.kind, &entry.value)
    }

    /// `entry_bytes` of the entries added.
    pub fn entry_bytes(&self) -> u64 {
        self.entry_bytes
    }

    /// The run of the entries added.
    pub fn finish(self) -> Result<Run> {
        let len = self.writer.finish()?.len_bytes;
        self.file.shrink_to_fit();
        let reader = RunReader::open(self.file.clone(), MEMORY_RUN_NAME, 0, len)?;
        let encoded = Encoded::new(reader, self.entry_bytes);
        Ok(Run::Memory(Arc::new(MemRun { encoded, file: self.file, persisted: OnceLock::new() })))
    }
}
