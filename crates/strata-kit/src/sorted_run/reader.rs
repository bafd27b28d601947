//! `RunReader`: a run opened from `(file, base, len)`: footer, index and filter read and checked
//! once and held in memory; data blocks read (and their checksums checked) on each use. Point
//! reads ask the filter first, then read one block. `RunIter` walks a key range forward or in
//! reverse, one block at a time, reading ahead once it reads far (`read_ahead`).

use std::ops::Bound;
use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use strata_core::{at_or_after, at_or_before, borrow_bound, bound_key, bounds_hold_nothing};
use strata_core::{Direction, Error, Key, Result};
use strata_io::StorageFile;

use super::block::{Block, DecodedBlock};
use super::block_cache::{BlockCache, NO_SLOT};
use super::filter::RunFilter;
use super::read_ahead::ReadAhead;
use super::writer::Footer;
use super::{varint, Entry, EntryKind, BLOCK_TRAILER_BYTES, FOOTER_BYTES};

/// Whether a block read from the file goes into the block cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FillCache {
    Yes,
    /// A block streamed by a long iteration (read ahead): a merge reads each block of runs it is
    /// replacing once, and caching them would evict the blocks point reads come back to (RocksDB's
    /// compactions read with `fill_cache = false` for the same reason).
    No,
}

/// See the module documentation.
#[derive(Debug)]
pub struct RunReader {
    file: Arc<dyn StorageFile>,
    /// The file's name, for errors.
    name: String,
    base: u64,
    len: u64,
    footer: Footer,
    /// One entry per data block: its last key.
    index: DecodedBlock,
    /// Per data block: offset and length (without the checksum), relative to `base`.
    handles: Vec<(u64, usize)>,
    filter: RunFilter,
    /// The cache its data blocks go through, with the run's id and a slot number per block.
    cache: Option<RunCache>,
    /// `identity()`.
    identity: u32,
}

#[derive(Debug)]
struct RunCache {
    cache: Arc<BlockCache>,
    run_id: u64,
    slots: Vec<AtomicU32>,
}

impl RunReader {
    /// Opens the run of `len` bytes at `base` of `file` (named `name` in errors).
    pub fn open(file: Arc<dyn StorageFile>, name: &str, base: u64, len: u64) -> Result<RunReader> {
        RunReader::open_cached(file, name, base, len, None)
    }

    /// `open`, with the data blocks read through `cache`.
    pub fn open_cached(
        file: Arc<dyn StorageFile>,
        name: &str,
        base: u64,
        len: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<RunReader> {
        let corrupt = |at: u64, what: String| Error::corruption(name, base + at, what);
        let footer_at = len
            .checked_sub(FOOTER_BYTES as u64)
            .ok_or_else(|| corrupt(0, format!("a run of {len} bytes has no room for its footer")))?;
        let mut footer_bytes = [0u8; FOOTER_BYTES];
        file.read_at(base + footer_at, &mut footer_bytes)?;
        let footer = Footer::decode(&footer_bytes).map_err(|e| corrupt(footer_at, e))?;
        let trailer = BLOCK_TRAILER_BYTES as u64;
        let filter_end = footer.filter_offset.checked_add(u64::from(footer.filter_len) + trailer);
        let index_end = footer.index_offset.checked_add(u64::from(footer.index_len) + trailer);
        if filter_end != Some(footer.index_offset) || index_end.is_none_or(|end| end > footer_at) {
            return Err(corrupt(footer_at, "the footer's filter and index do not fit the run".into()));
        }
        let mut reader = RunReader {
            file,
            name: name.to_string(),
            base,
            len,
            footer,
            index: DecodedBlock::default(),
            handles: Vec::new(),
            filter: RunFilter::None,
            cache: None,
            identity: 0,
        };
        let (filter_bytes, filter_crc) =
            reader.read_with_crc(footer.filter_offset, footer.filter_len as usize)?;
        reader.filter =
            RunFilter::decode(&filter_bytes).map_err(|e| reader.corrupt(footer.filter_offset, e))?;
        let (index_bytes, index_crc) =
            reader.read_with_crc(footer.index_offset, footer.index_len as usize)?;
        let identity = crc32c::crc32c_append(crc32c::crc32c(&footer_bytes), &filter_crc.to_le_bytes());
        reader.identity = crc32c::crc32c_append(identity, &index_crc.to_le_bytes());
        reader.index = Block::parse(index_bytes)
            .and_then(Block::decode)
            .map_err(|e| reader.corrupt(footer.index_offset, format!("index: {e}")))?;
        reader.handles = reader.decode_handles()?;
        reader.cache = cache.map(|cache| RunCache {
            run_id: cache.run_id(),
            slots: (0..reader.handles.len()).map(|_| AtomicU32::new(NO_SLOT)).collect(),
            cache,
        });
        Ok(reader)
    }

    /// This reader, for the same run copied to `base` of `file` (named `name` in errors): what
    /// it checked and holds (footer, filter, index, identity, cache slots) stays. A writer that
    /// built a run in memory opens it there and moves the reader to where it copied the bytes,
    /// instead of reading them back.
    pub fn moved_to(mut self, file: Arc<dyn StorageFile>, name: &str, base: u64) -> RunReader {
        self.file = file;
        self.name = name.to_string();
        self.base = base;
        self
    }

    fn corrupt(&self, at: u64, what: impl Into<String>) -> Error {
        Error::corruption(self.name.as_str(), self.base + at, what)
    }

    /// The data blocks' handles, checked to tile the run from 0 to the filter, each block at
    /// the first multiple of the block alignment after the one before it.
    fn decode_handles(&self) -> Result<Vec<(u64, usize)>> {
        let mut handles = Vec::with_capacity(self.index.len());
        let align = self.footer.block_align_bytes();
        let mut expected_offset = 0u64;
        for i in 0..self.index.len() {
            let (_, _, value) = self.index.entry(i);
            let handle = varint::get(value, 0)
                .and_then(|(offset, p)| varint::get_u32(value, p).map(|(len, end)| (offset, len, end)));
            match handle {
                Some((offset, len, end)) if end == value.len() && offset == expected_offset => {
                    handles.push((offset, len));
                    let end = offset + (len + BLOCK_TRAILER_BYTES) as u64;
                    expected_offset = end.div_ceil(align) * align;
                }
                _ => {
                    return Err(
                        self.corrupt(self.footer.index_offset, format!("index entry {i}: bad block handle"))
                    )
                }
            }
        }
        if expected_offset != self.footer.filter_offset {
            return Err(self.corrupt(self.footer.index_offset, "the data blocks do not end at the filter"));
        }
        Ok(handles)
    }

    /// `len` bytes at `offset` whose CRC-32C follows them.
    fn read_checked(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        Ok(self.read_with_crc(offset, len)?.0)
    }

    /// `read_checked`, with the checksum it checked.
    fn read_with_crc(&self, offset: u64, len: usize) -> Result<(Vec<u8>, u32)> {
        self.checked(offset, len, self.read_raw(offset, len)?)
    }

    /// `len` bytes at `offset` and the checksum trailer after them, unchecked.
    fn read_raw(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut raw = vec![0u8; len + BLOCK_TRAILER_BYTES];
        self.file.read_at(self.base + offset, &mut raw)?;
        Ok(raw)
    }

    /// `raw` (`len` bytes read at `offset` and their CRC-32C) without its checksum, once checked;
    /// with the checksum.
    fn checked(&self, offset: u64, len: usize, mut raw: Vec<u8>) -> Result<(Vec<u8>, u32)> {
        let stored = strata_core::le_bytes::u32_at(&raw, len).unwrap_or(0);
        raw.truncate(len);
        if crc32c::crc32c(&raw) != stored {
            return Err(self.corrupt(offset, format!("checksum mismatch in the {len}-byte block")));
        }
        Ok((raw, stored))
    }

    /// Data block `i`, decoded and checked: from the cache, or read, checked and cached.
    fn block(&self, i: usize) -> Result<Arc<DecodedBlock>> {
        match self.cached_block(i) {
            Some(block) => Ok(block),
            None => self.read_block(i),
        }
    }

    /// Data block `i` if the cache holds it.
    pub(super) fn cached_block(&self, i: usize) -> Option<Arc<DecodedBlock>> {
        let c = self.cache.as_ref()?;
        c.cache.get(&c.slots[i], c.run_id, i as u64)
    }

    /// Data block `i` read, checked, decoded and cached.
    pub(super) fn read_block(&self, i: usize) -> Result<Arc<DecodedBlock>> {
        let (offset, len) = self.handles[i];
        self.block_from_raw(i, self.read_raw(offset, len)?, FillCache::Yes)
    }

    /// Data blocks `first..end` read in one I/O: each one's bytes and checksum trailer, in
    /// order, not yet checked (`block_from_raw` checks each when it is reached).
    pub(super) fn read_raw_blocks(&self, first: usize, end: usize) -> Result<Vec<Vec<u8>>> {
        let start = self.handles[first].0;
        let (last_offset, last_len) = self.handles[end - 1];
        let span = last_offset + (last_len + BLOCK_TRAILER_BYTES) as u64 - start;
        let mut buf = vec![0u8; span as usize];
        self.file.read_at(self.base + start, &mut buf)?;
        Ok(self.handles[first..end]
            .iter()
            .map(|&(offset, len)| {
                let at = (offset - start) as usize;
                buf[at..at + len + BLOCK_TRAILER_BYTES].to_vec()
            })
            .collect())
    }

    /// Data block `i` from `raw` (its bytes and checksum trailer as read), checked, decoded and
    /// cached if `fill` says so.
    pub(super) fn block_from_raw(
        &self,
        i: usize,
        raw: Vec<u8>,
        fill: FillCache,
    ) -> Result<Arc<DecodedBlock>> {
        let (offset, len) = self.handles[i];
        let (bytes, _) = self.checked(offset, len, raw)?;
        let block = Block::parse(bytes).map_err(|e| self.corrupt(offset, e))?;
        let block = Arc::new(self.decoded_block(i, block)?);
        if let (Some(c), FillCache::Yes) = (&self.cache, fill) {
            c.cache.insert(&c.slots[i], c.run_id, i as u64, block.clone());
        }
        Ok(block)
    }

    /// Data block `i` read, its checksum and restarts checked.
    fn raw_block(&self, i: usize) -> Result<Block> {
        let (offset, len) = self.handles[i];
        Block::parse(self.read_checked(offset, len)?).map_err(|e| self.corrupt(offset, e))
    }

    /// Data block `i` (`block`, its checksum and restarts checked) decoded, checked to hold keys
    /// above the previous block's last key and to end with the key the index gives it (so scans
    /// stay in order across blocks).
    fn decoded_block(&self, i: usize, block: Block) -> Result<DecodedBlock> {
        let offset = self.handles[i].0;
        let block = block.decode().map_err(|e| self.corrupt(offset, e))?;
        let last = block.len().checked_sub(1).map(|j| block.entry(j).0);
        let after_previous = i == 0 || !block.is_empty() && block.entry(0).0 > self.index.entry(i - 1).0;
        if last != Some(self.index.entry(i).0) || !after_previous {
            return Err(self.corrupt(offset, "the block's keys disagree with the index"));
        }
        Ok(block)
    }

    /// Data block `i`'s bytes in the file, its checksum trailer included.
    pub(super) fn block_bytes(&self, i: usize) -> usize {
        self.handles[i].1 + BLOCK_TRAILER_BYTES
    }

    /// The farthest block an iteration in `direction` may need, `far` being its far bound: the
    /// block that holds the bound's key (or the run's last block, or its first in reverse).
    fn last_block_needed(&self, far: Bound<&[u8]>, direction: Direction) -> usize {
        let end = match direction {
            Direction::Forward => self.handles.len().saturating_sub(1),
            Direction::Reverse => 0,
        };
        bound_key(far).and_then(|k| self.block_for(k)).unwrap_or(end)
    }

    /// The first data block whose last key is not below `key` (`None`: past the last).
    fn block_for(&self, key: &[u8]) -> Option<usize> {
        let i = self.index.lower_bound(key);
        (i < self.index.len()).then_some(i)
    }

    /// False only when `key` is certainly not in the run.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.filter.may_contain(key)
    }

    /// The run's entry for `key`: the filter, then one block.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>> {
        if !self.may_contain(key) {
            return Ok(None);
        }
        let Some(i) = self.block_for(key) else { return Ok(None) };
        if self.cache.is_none() {
            // Nothing to keep a decoded block for: search the block's restarts in place.
            let block = self.raw_block(i)?;
            let found = block.get(key).map_err(|e| self.corrupt(self.handles[i].0, e))?;
            return Ok(found.map(|(kind, value)| Entry { kind, value: value.to_vec() }));
        }
        let block = self.block(i)?;
        let at = block.lower_bound(key);
        if at == block.len() {
            return Ok(None);
        }
        let (found, kind, value) = block.entry(at);
        Ok((found == key).then(|| Entry { kind, value: value.to_vec() }))
    }

    /// The entries in `(lower, upper)`, in `direction`.
    pub fn iter(self: &Arc<Self>, lower: Bound<Key>, upper: Bound<Key>, direction: Direction) -> RunIter {
        RunIter::new(self.clone(), lower, upper, direction)
    }

    /// Bytes of the data blocks that may hold keys within the bounds (a block holds the keys
    /// above the previous block's last key up to its own): an estimate from the index alone, at
    /// most a block too high at each end.
    pub fn approximate_bytes(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> u64 {
        // The index alone would count the block holding both ends of an inverted range.
        if bounds_hold_nothing(lower, upper) {
            return 0;
        }
        let first = match lower {
            Bound::Included(k) => self.index.lower_bound(k),
            Bound::Excluded(k) => self.index.upper_bound(k),
            Bound::Unbounded => 0,
        };
        let end = match upper {
            // Block i holds keys above block i − 1's last key: some may be below (or at) k when
            // that last key is below k.
            Bound::Included(k) | Bound::Excluded(k) => {
                (self.index.lower_bound(k) + 1).min(self.handles.len())
            }
            Bound::Unbounded => self.handles.len(),
        };
        self.handles.get(first..end.max(first)).map_or(0, |h| h.iter().map(|&(_, len)| len as u64).sum())
    }

    /// A checksum of the run's footer, filter and index: an engine that keeps it beside its
    /// reference to the run can tell, at open, that the run there is the one it wrote (a valid
    /// run copied over another is otherwise undetectable by the run's own checksums).
    pub fn identity(&self) -> u32 {
        self.identity
    }

    pub fn last_key(&self) -> Option<&[u8]> {
        self.index.len().checked_sub(1).map(|i| self.index.entry(i).0)
    }

    pub fn entry_count(&self) -> u64 {
        self.footer.entry_count
    }

    pub fn tombstone_count(&self) -> u64 {
        self.footer.tombstone_count
    }

    pub fn max_lsn(&self) -> u64 {
        self.footer.max_lsn
    }

    pub fn len_bytes(&self) -> u64 {
        self.len
    }

    pub fn data_blocks(&self) -> usize {
        self.handles.len()
    }

    /// Bytes of memory the open run holds (index, handles and filter).
    pub fn memory_bytes(&self) -> usize {
        let slots = self.cache.as_ref().map_or(0, |c| c.slots.len() * 4);
        self.index.memory_bytes() + self.handles.len() * 16 + self.filter.memory_bytes() + slots
    }
}

/// A key range of one run, forward or in reverse. After an error it ends.
pub struct RunIter {
    run: Arc<RunReader>,
    lower: Bound<Key>,
    upper: Bound<Key>,
    direction: Direction,
    /// The block `entries` came from (`None` before the first).
    block: Option<usize>,
    entries: Arc<DecodedBlock>,
    /// Forward: the next entry; reverse: one past it.
    pos: usize,
    done: bool,
    /// The farthest block the range may need, in the direction.
    last_needed: usize,
    /// Every key of the loaded block is within the far bound (none is checked again).
    block_inside: bool,
    read_ahead: ReadAhead,
}

impl RunIter {
    fn new(run: Arc<RunReader>, lower: Bound<Key>, upper: Bound<Key>, direction: Direction) -> RunIter {
        let done = run.handles.is_empty();
        let entries = Arc::default();
        let far = match direction {
            Direction::Forward => borrow_bound(&upper),
            Direction::Reverse => borrow_bound(&lower),
        };
        let last_needed = run.last_block_needed(far, direction);
        let read_ahead = ReadAhead::default();
        RunIter {
            run,
            lower,
            upper,
            direction,
            block: None,
            entries,
            pos: 0,
            done,
            last_needed,
            block_inside: false,
            read_ahead,
        }
    }

    /// Loads the first block to read and positions `pos` at the range's start in it.
    fn start(&mut self) -> Result<()> {
        let blocks = self.run.handles.len();
        match self.direction {
            Direction::Forward => {
                let first = bound_key(borrow_bound(&self.lower)).map_or(Some(0), |k| self.run.block_for(k));
                let Some(i) = first else {
                    self.done = true;
                    return Ok(());
                };
                self.load(i)?;
                self.pos = match &self.lower {
                    Bound::Unbounded => 0,
                    Bound::Included(k) => self.entries.lower_bound(k),
                    Bound::Excluded(k) => self.entries.upper_bound(k),
                };
            }
            Direction::Reverse => {
                let last = bound_key(borrow_bound(&self.upper))
                    .and_then(|k| self.run.block_for(k))
                    .unwrap_or(blocks - 1);
                self.load(last)?;
                self.pos = match &self.upper {
                    Bound::Unbounded => self.entries.len(),
                    Bound::Excluded(k) => self.entries.lower_bound(k),
                    Bound::Included(k) => self.entries.upper_bound(k),
                };
            }
        }
        Ok(())
    }

    fn load(&mut self, i: usize) -> Result<()> {
        self.entries = self.read_ahead.load(&self.run, self.block, i, self.direction, self.last_needed)?;
        self.block = Some(i);
        // Its last key in the direction within the far bound: so is every key of it.
        self.block_inside = match (self.direction, self.entries.len()) {
            (_, 0) => false,
            (Direction::Forward, n) => at_or_before(self.entries.entry(n - 1).0, borrow_bound(&self.upper)),
            (Direction::Reverse, _) => at_or_after(self.entries.entry(0).0, borrow_bound(&self.lower)),
        };
        Ok(())
    }

    /// Positions `pos` on the next entry in the direction, ignoring the far bound, and returns
    /// its index in `entries` without moving past it; `None` at the run's end.
    fn settle_index(&mut self) -> Result<Option<usize>> {
        if self.block.is_none() {
            self.start()?;
            if self.done {
                return Ok(None);
            }
        }
        loop {
            let current = self.block.unwrap_or(0);
            match self.direction {
                Direction::Forward if self.pos < self.entries.len() => return Ok(Some(self.pos)),
                // Blocks past `last_needed` hold no key of the range: not read.
                Direction::Forward if current < self.last_needed => {
                    self.load(current + 1)?;
                    self.pos = 0;
                }
                Direction::Reverse if self.pos > 0 => return Ok(Some(self.pos - 1)),
                Direction::Reverse if current > self.last_needed => {
                    self.load(current - 1)?;
                    self.pos = self.entries.len();
                }
                _ => return Ok(None),
            }
        }
    }

    /// Stands on the next entry of the range without taking it: `true` when there is one (then
    /// `head` borrows it and `advance` moves past it), `false` at the range's end or after an
    /// error (returned once; the iterator then ends). The borrowing twin of `next`, for a merge
    /// that copies only the bytes it keeps.
    pub fn settle(&mut self) -> Result<bool> {
        if self.done {
            return Ok(false);
        }
        let inside = match self.settle_index() {
            Ok(Some(_)) if self.block_inside => true,
            Ok(Some(i)) => {
                let key = self.entries.entry(i).0;
                match self.direction {
                    Direction::Forward => at_or_before(key, borrow_bound(&self.upper)),
                    Direction::Reverse => at_or_after(key, borrow_bound(&self.lower)),
                }
            }
            Ok(None) => false,
            Err(e) => {
                self.done = true;
                return Err(e);
            }
        };
        self.done = !inside;
        Ok(inside)
    }

    /// The entry `settle` stood on: key, kind, value. Only after `settle` returned `true` and
    /// before `advance`.
    #[inline]
    pub fn head(&self) -> (&[u8], EntryKind, &[u8]) {
        let i = match self.direction {
            Direction::Forward => self.pos,
            Direction::Reverse => self.pos - 1,
        };
        self.entries.entry(i)
    }

    /// Moves past the entry `settle` stood on.
    #[inline]
    pub fn advance(&mut self) {
        match self.direction {
            Direction::Forward => self.pos += 1,
            Direction::Reverse => self.pos -= 1,
        }
    }
}

impl Iterator for RunIter {
    type Item = Result<(Key, Entry)>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.settle() {
            Ok(true) => {
                let (key, kind, value) = self.head();
                let item = (key.to_vec(), Entry { kind, value: value.to_vec() });
                self.advance();
                Some(Ok(item))
            }
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
