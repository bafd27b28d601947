//! A sorted run of the tree (a leaf's records or a buffer segment's entries): in memory while
//! it is new, a kit sorted run in `turtle-pages` once a checkpoint wrote it. Clones share it; a
//! node split gives both halves the same run. Written once however many views share it.

use std::ops::Bound;
use std::sync::{Arc, OnceLock};

use strata_core::{Direction, Key, Result};
use strata_io::{MemStorage, OpenOptions, Storage, StorageFile};
use strata_kit::inline_key::heap_bytes as heap_bytes_of;
use strata_kit::sorted_run::{Entry, RunOptions, RunReader, RunWriter, SourceIter};

use super::{entry_bytes, index_range};
use crate::pages::{Extent, ExtentGuard, Pages, ALIGN_BYTES, PAGES_FILE};

/// See the module documentation.
#[derive(Clone, Debug)]
pub enum Run {
    Memory(Arc<MemRun>),
    Disk(Arc<DiskRun>),
}

/// A run not yet checkpointed.
#[derive(Debug)]
pub struct MemRun {
    entries: Vec<(Key, Entry)>,
    /// `prefix_bytes[i]`: `entry_bytes` of entries `0..i` (one more element than `entries`).
    prefix_bytes: Vec<u64>,
    /// The heap it holds: the vectors, and every key and value as the allocator charges it.
    heap_bytes: u64,
    /// Set by the first checkpoint that writes it (every view then uses the one copy).
    persisted: OnceLock<Arc<DiskRun>>,
}

/// A checkpointed run: its reader (index and filter in memory) and its extent, retired when the
/// last view lets go of it.
#[derive(Debug)]
pub struct DiskRun {
    reader: Arc<RunReader>,
    guard: ExtentGuard,
    /// `entry_bytes` of all its entries (kept in its node page), and its data blocks' bytes:
    /// their ratio turns the block index's byte counts into `entry_bytes`.
    entry_bytes: u64,
    data_bytes: u64,
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
        let data_bytes = reader.approximate_bytes(Bound::Unbounded, Bound::Unbounded);
        let guard = ExtentGuard::new(extent, pages.clone());
        Arc::new(DiskRun { reader: Arc::new(reader), guard, entry_bytes, data_bytes })
    }

    /// The run's `RunReader::identity`, which node pages keep beside their references.
    pub fn identity(&self) -> u32 {
        self.reader.identity()
    }

    pub fn extent(&self) -> Extent {
        self.guard.extent()
    }

    pub fn memory_bytes(&self) -> usize {
        self.reader.memory_bytes()
    }
}

fn to_owned(bound: Bound<&[u8]>) -> Bound<Key> {
    bound.map(<[u8]>::to_vec)
}

impl Run {
    /// A run of `entries` (keys strictly ascending).
    pub fn memory(mut entries: Vec<(Key, Entry)>) -> Run {
        // Held until the next checkpoint: no spare capacity from the vector's growth.
        entries.shrink_to_fit();
        let mut prefix_bytes = Vec::with_capacity(entries.len() + 1);
        let mut total = 0u64;
        let mut heap_bytes = (entries.capacity() * size_of::<(Key, Entry)>()) as u64;
        prefix_bytes.push(0);
        for (key, entry) in &entries {
            total += entry_bytes(key, entry);
            prefix_bytes.push(total);
            heap_bytes += heap_bytes_of(key.capacity()) + heap_bytes_of(entry.value.capacity());
        }
        heap_bytes += (prefix_bytes.capacity() * size_of::<u64>()) as u64;
        Run::Memory(Arc::new(MemRun { entries, prefix_bytes, heap_bytes, persisted: OnceLock::new() }))
    }

    /// The entry of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        match self {
            Run::Memory(m) => Ok(m
                .entries
                .binary_search_by(|(k, _)| k.as_slice().cmp(key))
                .ok()
                .map(|i| m.entries[i].1.clone())),
            Run::Disk(d) => d.reader.get(key),
        }
    }

    /// The entries within the bounds, in `direction`.
    pub fn iter<'a>(
        &'a self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> SourceIter<'a> {
        match self {
            Run::Memory(m) => {
                let slice = &m.entries[index_range(&m.entries, lower, upper)];
                let item = |(k, e): &(Key, Entry)| Ok((k.clone(), e.clone()));
                match direction {
                    Direction::Forward => Box::new(slice.iter().map(item)),
                    Direction::Reverse => Box::new(slice.iter().rev().map(item)),
                }
            }
            Run::Disk(d) => Box::new(d.reader.iter(to_owned(lower), to_owned(upper), direction)),
        }
    }

    /// `entry_bytes` of the entries within the bounds: exact in memory; on disk, the bytes of
    /// the blocks that may hold them (from the block index: at most a block too many at each
    /// end) scaled to `entry_bytes`. Zero only when the bounds hold no entry.
    pub fn bytes_between(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> u64 {
        match self {
            Run::Memory(m) => {
                let range = index_range(&m.entries, lower, upper);
                m.prefix_bytes[range.end] - m.prefix_bytes[range.start]
            }
            Run::Disk(d) => {
                let blocks = d.reader.approximate_bytes(lower, upper);
                let scaled = u128::from(blocks) * u128::from(d.entry_bytes) / u128::from(d.data_bytes.max(1));
                if blocks == 0 {
                    0
                } else {
                    (scaled as u64).max(1)
                }
            }
        }
    }

    /// How far `bytes_between` may count over at each end of a range: nothing in memory; on
    /// disk, twice an average block in `entry_bytes` (a block holds `block_bytes` plus at most
    /// one entry).
    pub fn estimate_slack_bytes(&self) -> u64 {
        match self {
            Run::Memory(_) => 0,
            Run::Disk(d) => 2 * d.entry_bytes / (d.reader.data_blocks() as u64).max(1),
        }
    }

    /// `entry_bytes` of all its entries.
    pub fn total_bytes(&self) -> u64 {
        match self {
            Run::Memory(m) => m.prefix_bytes.last().copied().unwrap_or(0),
            Run::Disk(d) => d.entry_bytes,
        }
    }

    /// Every entry (a rewrite reads the whole run).
    pub fn entries(&self) -> Result<Vec<(Key, Entry)>> {
        match self {
            Run::Memory(m) => Ok(m.entries.clone()),
            Run::Disk(_) => self.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).collect(),
        }
    }

    /// Entries held (a disk run's footer count).
    pub fn entry_count(&self) -> u64 {
        match self {
            Run::Memory(m) => m.entries.len() as u64,
            Run::Disk(d) => d.reader.entry_count(),
        }
    }

    /// Memory the run holds: its entries (their vectors and allocations), or its reader's index
    /// and filter.
    pub fn memory_bytes(&self) -> u64 {
        match self {
            Run::Memory(m) => m.heap_bytes,
            Run::Disk(d) => d.memory_bytes() as u64,
        }
    }

    /// Whether it is new (in memory, not yet written).
    pub fn is_memory(&self) -> bool {
        matches!(self, Run::Memory(_))
    }

    /// This run on disk, in blocks of about `block_bytes`: written into `pages` on the first call
    /// for a memory run (not synced), the existing copy afterwards.
    pub fn persist(&self, pages: &Arc<Pages>, block_bytes: usize) -> Result<Run> {
        let m = match self {
            Run::Disk(_) => return Ok(self.clone()),
            Run::Memory(m) => m,
        };
        if let Some(disk) = m.persisted.get() {
            return Ok(Run::Disk(disk.clone()));
        }
        // Built and opened in memory, then copied: nothing is read back from the device.
        let built = MemStorage::new().open("run", OpenOptions::create())?;
        let len = encode(&built, &m.entries, block_bytes)?;
        let reader = RunReader::open_cached(built.clone(), "run", 0, len, Some(pages.block_cache().clone()))?;
        let extent = pages.write(strata_io::read_all(built.as_ref())?)?;
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

/// `entries` as a kit sorted run padded to the page alignment, at the start of `file`; returns
/// its length. Its data blocks are aligned to their size (a power of two, at most a page, and
/// extents start on pages), so a block read from `turtle-pages` with direct I/O is one page,
/// not the two a packed block spans.
fn encode(file: &Arc<dyn StorageFile>, entries: &[(Key, Entry)], block_bytes: usize) -> Result<u64> {
    let options = RunOptions {
        block_bytes,
        block_align_bytes: block_bytes,
        align_bytes: ALIGN_BYTES as usize,
        ..RunOptions::default()
    };
    let mut writer = RunWriter::new(file.clone(), 0, options)?;
    for (key, entry) in entries {
        writer.add(key, entry.kind, &entry.value)?;
    }
    Ok(writer.finish()?.len_bytes)
}
