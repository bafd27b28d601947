//! `turtle-pages`: one file of 4 KiB-aligned extents holding the checkpointed tree (node pages
//! and sorted runs), and its allocator (docs/format/turtle.md).
//!
//! Copy-on-write: an extent the last durable checkpoint refers to is never written. When the
//! in-memory tree lets go of an extent (its run or node was replaced), the extent is *retired*;
//! retired extents become free only once a newer checkpoint record is durable
//! (`free_retired_up_to`), so a crash always finds the last checkpoint's extents intact. The free
//! map is rebuilt at open as the complement of the extents the checkpoint's tree uses.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use strata_core::Result;
use strata_io::StorageFile;
use strata_kit::sorted_run::BlockCache;

/// The file's name.
pub const PAGES_FILE: &str = "turtle-pages";

/// Every extent starts and ends on this boundary (O_DIRECT).
pub const ALIGN_BYTES: u64 = 4096;

/// A byte range of `turtle-pages`; `len` is a multiple of `ALIGN_BYTES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Extent {
    pub offset: u64,
    pub len: u64,
}

impl Extent {
    pub fn end(&self) -> u64 {
        self.offset + self.len
    }
}

/// `len` rounded up to the alignment (saturating: a damaged length stays too large to fit).
pub fn aligned(len: u64) -> u64 {
    len.div_ceil(ALIGN_BYTES).saturating_mul(ALIGN_BYTES)
}

#[derive(Debug, Default)]
struct Allocation {
    /// Free extents by offset, coalesced (no two touch).
    free: BTreeMap<u64, u64>,
    /// One past the last allocated byte: extents at or above it are free.
    end: u64,
    /// Let go of by the tree; free once the next checkpoint is durable. Each with the
    /// retirement's sequence number.
    retired: Vec<(u64, Extent)>,
    retire_seq: u64,
}

/// See the module documentation.
#[derive(Debug)]
pub struct Pages {
    file: Arc<dyn StorageFile>,
    state: Mutex<Allocation>,
    /// The cache the runs in this file read their data blocks through.
    block_cache: Arc<BlockCache>,
}

impl Pages {
    /// The allocator of `file`, every byte below `end` taken until `rebuild_free`; no block
    /// cache (`with_block_cache`).
    pub fn new(file: Arc<dyn StorageFile>, end: u64) -> Pages {
        let state = Allocation { end: aligned(end), ..Allocation::default() };
        Pages { file, state: Mutex::new(state), block_cache: BlockCache::new(0) }
    }

    /// The runs of this file read their blocks through `cache`.
    pub fn with_block_cache(mut self, cache: Arc<BlockCache>) -> Pages {
        self.block_cache = cache;
        self
    }

    pub fn file(&self) -> &Arc<dyn StorageFile> {
        &self.file
    }

    pub fn block_cache(&self) -> &Arc<BlockCache> {
        &self.block_cache
    }

    /// Makes everything free except `used` (the checkpoint's extents, found by walking its
    /// tree at open); the end moves down to the last used byte.
    pub fn rebuild_free(&self, mut used: Vec<Extent>) {
        used.sort();
        let mut state = self.state.lock();
        state.free.clear();
        let mut at = 0;
        for extent in &used {
            if extent.offset > at {
                state.free.insert(at, extent.offset - at);
            }
            at = at.max(extent.end());
        }
        state.end = at;
    }

    /// An extent of `len` bytes (aligned up): the smallest free one that fits, else at the end.
    pub fn allocate(&self, len: u64) -> Extent {
        let len = aligned(len.max(1));
        let mut state = self.state.lock();
        let best =
            state.free.iter().filter(|(_, &l)| l >= len).min_by_key(|(_, &l)| l).map(|(&o, &l)| (o, l));
        if let Some((offset, free_len)) = best {
            state.free.remove(&offset);
            if free_len > len {
                state.free.insert(offset + len, free_len - len);
            }
            return Extent { offset, len };
        }
        let offset = state.end;
        state.end += len;
        Extent { offset, len }
    }

    /// Writes `bytes` (padded with zeros to the alignment) into a new extent and returns it.
    /// Not synced: the checkpoint syncs the file before its record refers to anything.
    pub fn write(&self, bytes: &[u8]) -> Result<Extent> {
        let extent = self.allocate(bytes.len() as u64);
        // Whole chunks are written from `bytes`; only a tail short of the alignment is copied.
        let aligned_len = bytes.len() / ALIGN_BYTES as usize * ALIGN_BYTES as usize;
        let (aligned, tail) = bytes.split_at(aligned_len);
        let mut padded_tail = tail.to_vec();
        padded_tail.resize(extent.len as usize - aligned_len, 0);
        let chunks = aligned.chunks(1 << 20).chain(std::iter::once(&padded_tail[..]));
        let mut offset = extent.offset;
        for chunk in chunks.filter(|chunk| !chunk.is_empty()) {
            if let Err(e) = self.file.write_at(offset, chunk) {
                self.free(&[extent]);
                return Err(e);
            }
            offset += chunk.len() as u64;
        }
        Ok(extent)
    }

    /// Returns extents that no checkpoint refers to (a write that failed, or `free_retired_up_to`).
    fn free(&self, extents: &[Extent]) {
        let mut state = self.state.lock();
        for extent in extents {
            free_into(&mut state, *extent);
        }
    }

    /// The tree let go of `extent`; it is freed after the next durable checkpoint.
    pub fn retire(&self, extent: Extent) {
        let mut state = self.state.lock();
        state.retire_seq += 1;
        let seq = state.retire_seq;
        state.retired.push((seq, extent));
    }

    /// The sequence number of the latest retirement (a checkpoint notes it before it writes its
    /// record: everything retired up to it is unreferenced by the new checkpoint).
    pub fn retire_mark(&self) -> u64 {
        self.state.lock().retire_seq
    }

    /// Frees the extents retired up to `mark` (the checkpoint that no longer refers to them is
    /// durable), their blocks first given back to the file system (`punch_hole`), so the file
    /// holds little more than the tree on disk however much of it the tree rewrites. Punched
    /// before they become free: a new run written into one is never punched. Returns the bytes
    /// freed.
    pub fn free_retired_up_to(&self, mark: u64) -> Result<u64> {
        let done: Vec<Extent> = {
            let mut state = self.state.lock();
            let (done, kept): (Vec<_>, Vec<_>) = state.retired.drain(..).partition(|(seq, _)| *seq <= mark);
            state.retired = kept;
            done.into_iter().map(|(_, extent)| extent).collect()
        };
        let punched = done.iter().try_for_each(|e| self.file.punch_hole(e.offset, e.len));
        self.free(&done);
        punched?;
        Ok(done.iter().map(|e| e.len).sum())
    }

    /// Gives the blocks of every free extent back to the file system (at open: the holes a
    /// crash or an earlier version left allocated).
    pub fn punch_free(&self) -> Result<()> {
        let free: Vec<(u64, u64)> = self.state.lock().free.iter().map(|(&o, &l)| (o, l)).collect();
        free.into_iter().try_for_each(|(offset, len)| self.file.punch_hole(offset, len))
    }

    /// The end of the allocated space (the file may be longer until `trim_file`).
    pub fn end(&self) -> u64 {
        self.state.lock().end
    }

    /// Bytes free below the end.
    pub fn free_bytes(&self) -> u64 {
        self.state.lock().free.values().sum()
    }

    /// Gives the file's unallocated tail back to the file system.
    pub fn trim_file(&self) -> Result<()> {
        let end = self.end();
        if self.file.len()? > end {
            self.file.set_len(end)?;
        }
        Ok(())
    }
}

/// Adds `extent` to the free map, merging it with touching neighbours; a free run reaching the
/// end moves the end down.
fn free_into(state: &mut Allocation, extent: Extent) {
    let (mut offset, mut len) = (extent.offset, extent.len);
    if let Some((&before, &before_len)) = state.free.range(..offset).next_back() {
        if before + before_len == offset {
            state.free.remove(&before);
            offset = before;
            len += before_len;
        }
    }
    if let Some(after_len) = state.free.remove(&(offset + len)) {
        len += after_len;
    }
    if offset + len >= state.end {
        state.end = offset;
    } else {
        state.free.insert(offset, len);
    }
}

/// An extent the in-memory tree holds; dropped, it is retired (see the module documentation).
#[derive(Debug)]
pub struct ExtentGuard {
    extent: Extent,
    pages: Arc<Pages>,
}

impl ExtentGuard {
    pub fn new(extent: Extent, pages: Arc<Pages>) -> ExtentGuard {
        ExtentGuard { extent, pages }
    }

    pub fn extent(&self) -> Extent {
        self.extent
    }
}

impl Drop for ExtentGuard {
    fn drop(&mut self) {
        self.pages.retire(self.extent);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_io::{MemStorage, OpenOptions, Storage};

    fn pages() -> Pages {
        let file = MemStorage::new().open(PAGES_FILE, OpenOptions::create()).unwrap();
        Pages::new(file, 0)
    }

    #[test]
    fn freed_extents_coalesce_and_a_free_tail_moves_the_end_down() {
        let pages = pages();
        let a = pages.allocate(4096);
        let b = pages.allocate(8192);
        let c = pages.allocate(100);
        assert_eq!((a.offset, b.offset, c.offset, c.len), (0, 4096, 12288, 4096));
        pages.free(&[a, b]);
        assert_eq!(pages.free_bytes(), 12288);
        assert_eq!(pages.allocate(12288).offset, 0, "a and b merged into one extent");
        pages.free(&[c]);
        assert_eq!(pages.end(), 12288, "the tail went back");
    }

    #[test]
    fn retired_extents_stay_taken_until_their_checkpoint_is_durable() {
        let pages = pages();
        let a = pages.allocate(4096);
        let b = pages.allocate(4096);
        let _c = pages.allocate(4096);
        pages.retire(a);
        let mark = pages.retire_mark();
        pages.retire(b);
        assert_eq!(pages.allocate(4096).offset, 12288, "nothing retired is reused yet");
        assert_eq!(pages.free_retired_up_to(mark).unwrap(), 4096);
        assert_eq!(pages.allocate(4096).offset, 0, "a is free; b is retired after the mark");
    }

    #[test]
    fn rebuild_frees_the_holes_between_used_extents() {
        let pages = pages();
        pages.rebuild_free(vec![Extent { offset: 8192, len: 4096 }, Extent { offset: 0, len: 4096 }]);
        assert_eq!((pages.end(), pages.free_bytes()), (12288, 4096));
    }

    #[test]
    fn writes_land_whole_and_padded_to_the_alignment() {
        let pages = pages();
        for len in [0usize, 100, 4096, 5000, (1 << 20) + 4096, (2 << 20) + 17] {
            let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8 + 1).collect();
            let extent = pages.write(&bytes).unwrap();
            assert_eq!(extent.len, (len as u64).div_ceil(ALIGN_BYTES).max(1) * ALIGN_BYTES, "{len}");
            let mut back = vec![0u8; extent.len as usize];
            pages.file().read_at(extent.offset, &mut back).unwrap();
            assert_eq!(&back[..len], &bytes[..], "{len}");
            assert!(back[len..].iter().all(|&b| b == 0), "{len}: padded with zeros");
        }
    }
}
