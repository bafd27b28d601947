//! `RunWriter`: streams one run into a file at `base`, in writes of about `WRITE_CHUNK_BYTES`
//! (each a multiple of `align_bytes`, so an O_DIRECT file takes them), and ends it with the
//! filter, the index, padding and the footer. It never syncs: the engine syncs the file before
//! anything refers to the run.

use std::sync::Arc;

use strata_core::{Error, Key, Result};
use strata_io::StorageFile;

use super::block::BlockBuilder;
use super::filter::{key_hash, RunFilter};
use super::{
    varint, EntryKind, BLOCK_TRAILER_BYTES, FOOTER_BYTES, MAX_BLOCK_ALIGN_BYTES, RUN_MAGIC, RUN_VERSION,
};

/// Bytes gathered before a write to the file.
pub const WRITE_CHUNK_BYTES: usize = 1 << 20;

/// How a run is cut and laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// A data block is cut once it holds at least this many bytes.
    pub block_bytes: usize,
    /// Entries between two keys stored whole in a data block.
    pub restart_interval: usize,
    /// Build a filter over the run's keys.
    pub filter: bool,
    /// The run's length is a multiple of this (padding before the footer), and so is every
    /// write: 4,096 for O_DIRECT files (`base` must then be aligned too), 1 for none.
    pub align_bytes: usize,
    /// Every data block starts at a multiple of this from the run's first byte (zero padding
    /// between blocks), and a block with its checksum fits the pages `block_bytes` round up to
    /// (one entry larger than that makes a block of its own): with 4,096 and an aligned `base`,
    /// reading a block is one device page, where a packed block of 4 KiB spans two. A power of
    /// two up to 64 KiB; 1: blocks packed back to back.
    pub block_align_bytes: usize,
    /// Stored in the footer for the engine (`RunReader::max_lsn`).
    pub max_lsn: u64,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            block_bytes: 4096,
            restart_interval: 16,
            filter: true,
            align_bytes: 1,
            block_align_bytes: 1,
            max_lsn: 0,
        }
    }
}

/// What a finished run holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunInfo {
    /// Bytes from `base` to the end of the footer.
    pub len_bytes: u64,
    pub entry_count: u64,
    pub tombstone_count: u64,
    pub data_blocks: u64,
    /// First and last key (`None` for an empty run).
    pub first_key: Option<Key>,
    pub last_key: Option<Key>,
}

/// See the module documentation.
pub struct RunWriter {
    file: Arc<dyn StorageFile>,
    base: u64,
    options: RunOptions,
    /// Bytes not yet written; they start at `base + written`.
    pending: Vec<u8>,
    written: u64,
    block: BlockBuilder,
    index: BlockBuilder,
    hashes: Vec<u64>,
    first_key: Option<Key>,
    entry_count: u64,
    tombstone_count: u64,
    data_blocks: u64,
}

impl RunWriter {
    pub fn new(file: Arc<dyn StorageFile>, base: u64, options: RunOptions) -> Result<RunWriter> {
        let align = options.align_bytes.max(1) as u64;
        if !base.is_multiple_of(align) {
            return Err(Error::invalid(format!(
                "a run's base {base} is not a multiple of its alignment {align}"
            )));
        }
        let block_align = options.block_align_bytes.max(1);
        if !block_align.is_power_of_two() || block_align > MAX_BLOCK_ALIGN_BYTES {
            return Err(Error::invalid(format!(
                "a run's block alignment {block_align} is not a power of two up to {MAX_BLOCK_ALIGN_BYTES}"
            )));
        }
        Ok(RunWriter {
            file,
            base,
            options: RunOptions { align_bytes: align as usize, block_align_bytes: block_align, ..options },
            pending: Vec::new(),
            written: 0,
            block: BlockBuilder::new(options.restart_interval),
            index: BlockBuilder::new(1),
            hashes: Vec::new(),
            first_key: None,
            entry_count: 0,
            tombstone_count: 0,
            data_blocks: 0,
        })
    }

    /// The key added last.
    fn last_key(&self) -> Option<&[u8]> {
        if !self.block.is_empty() {
            Some(self.block.last_key())
        } else if !self.index.is_empty() {
            Some(self.index.last_key())
        } else {
            None
        }
    }

    /// Appends one entry; keys must ascend strictly, a delete carries no value.
    pub fn add(&mut self, key: &[u8], kind: EntryKind, value: &[u8]) -> Result<()> {
        if self.last_key().is_some_and(|last| last >= key) {
            return Err(Error::invalid("sorted run: keys must be added in strictly ascending order"));
        }
        if kind == EntryKind::Delete && !value.is_empty() {
            return Err(Error::invalid("sorted run: a delete has no value"));
        }
        if u32::try_from(key.len()).is_err() || u32::try_from(value.len()).is_err() {
            return Err(Error::invalid("sorted run: keys and values are limited to 4 GiB"));
        }
        if self.first_key.is_none() {
            self.first_key = Some(key.to_vec());
        }
        if !self.block.is_empty() && !self.block_fits(key, value) {
            self.finish_block()?;
        }
        if self.options.filter {
            self.hashes.push(key_hash(key));
        }
        self.block.add(key, kind, value);
        self.entry_count += 1;
        self.tombstone_count += u64::from(kind == EntryKind::Delete);
        if self.block.size_bytes() >= self.options.block_bytes {
            self.finish_block()?;
        }
        Ok(())
    }

    /// Bytes the run takes so far (what is written and what waits).
    pub fn len_bytes(&self) -> u64 {
        self.written + self.pending.len() as u64 + self.block.size_bytes() as u64
    }

    /// Whether the block, `key` and `value` added, still fits its aligned pages (always, with
    /// packed blocks). Counts the entry at most: its whole key (no shared prefix) and one more
    /// restart.
    fn block_fits(&self, key: &[u8], value: &[u8]) -> bool {
        let align = self.options.block_align_bytes;
        if align == 1 {
            return true;
        }
        let (key_len, value_len) = (key.len() as u64, value.len() as u64);
        let fields_most = 2 * varint::len(key_len) + varint::len(value_len) + 1;
        let entry_most = fields_most + key.len() + value.len() + 4;
        let pages_bytes = self.options.block_bytes.max(1).div_ceil(align) * align;
        self.block.size_bytes() + entry_most + BLOCK_TRAILER_BYTES <= pages_bytes
    }

    fn finish_block(&mut self) -> Result<()> {
        let last_key = self.block.last_key().to_vec();
        let bytes = self.block.finish();
        let offset = self.written + self.pending.len() as u64;
        self.append_with_crc(&bytes);
        // The next block (or the filter) starts at the next multiple of the block alignment.
        let align = self.options.block_align_bytes as u64;
        let end = self.written + self.pending.len() as u64;
        let padding = (end.div_ceil(align) * align - end) as usize;
        self.pending.resize(self.pending.len() + padding, 0);
        let mut handle = Vec::with_capacity(12);
        varint::put(&mut handle, offset);
        varint::put(&mut handle, bytes.len() as u64);
        self.index.add(&last_key, EntryKind::Put, &handle);
        self.data_blocks += 1;
        if self.pending.len() >= WRITE_CHUNK_BYTES {
            self.write_aligned_prefix()?;
        }
        Ok(())
    }

    fn append_with_crc(&mut self, bytes: &[u8]) {
        self.pending.extend_from_slice(bytes);
        self.pending.extend_from_slice(&crc32c::crc32c(bytes).to_le_bytes());
    }

    /// Writes the longest prefix of `pending` that is a multiple of the alignment.
    fn write_aligned_prefix(&mut self) -> Result<()> {
        let align = self.options.align_bytes;
        let n = self.pending.len() / align * align;
        if n == 0 {
            return Ok(());
        }
        self.file.write_at(self.base + self.written, &self.pending[..n])?;
        self.pending.drain(..n);
        self.written += n as u64;
        Ok(())
    }

    /// Writes the last block, the filter, the index, the padding and the footer.
    pub fn finish(mut self) -> Result<RunInfo> {
        if !self.block.is_empty() {
            self.finish_block()?;
        }
        let last_key = (!self.index.is_empty()).then(|| self.index.last_key().to_vec());
        let filter = if self.options.filter {
            RunFilter::build(std::mem::take(&mut self.hashes))
        } else {
            RunFilter::None
        };
        let filter_bytes = filter.encode();
        let filter_offset = self.written + self.pending.len() as u64;
        self.append_with_crc(&filter_bytes);
        let index_bytes = self.index.finish();
        let index_offset = self.written + self.pending.len() as u64;
        self.append_with_crc(&index_bytes);
        let align = self.options.align_bytes as u64;
        let unpadded = self.written + self.pending.len() as u64 + FOOTER_BYTES as u64;
        let padding = (align - unpadded % align) % align;
        self.pending.resize(self.pending.len() + padding as usize, 0);
        let footer = Footer {
            index_offset,
            index_len: len_u32(index_bytes.len())?,
            filter_len: len_u32(filter_bytes.len())?,
            filter_offset,
            entry_count: self.entry_count,
            tombstone_count: self.tombstone_count,
            max_lsn: self.options.max_lsn,
            block_align_log2: self.options.block_align_bytes.trailing_zeros() as u8,
        };
        self.pending.extend_from_slice(&footer.encode());
        self.write_aligned_prefix()?;
        debug_assert!(self.pending.is_empty());
        Ok(RunInfo {
            len_bytes: self.written,
            entry_count: self.entry_count,
            tombstone_count: self.tombstone_count,
            data_blocks: self.data_blocks,
            first_key: self.first_key,
            last_key,
        })
    }
}

fn len_u32(len: usize) -> Result<u32> {
    u32::try_from(len).map_err(|_| Error::invalid("sorted run: an index or filter over 4 GiB"))
}

/// The footer's fields (docs/format/sorted-run.md, "Footer").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footer {
    pub index_offset: u64,
    pub index_len: u32,
    pub filter_len: u32,
    pub filter_offset: u64,
    pub entry_count: u64,
    pub tombstone_count: u64,
    pub max_lsn: u64,
    /// Data blocks start at multiples of `1 << block_align_log2` (0: packed).
    pub block_align_log2: u8,
}

impl Footer {
    /// The data blocks' alignment in bytes (1: packed).
    pub fn block_align_bytes(&self) -> u64 {
        1 << self.block_align_log2
    }

    pub fn encode(&self) -> [u8; FOOTER_BYTES] {
        let mut out = [0u8; FOOTER_BYTES];
        out[0..8].copy_from_slice(&self.index_offset.to_le_bytes());
        out[8..12].copy_from_slice(&self.index_len.to_le_bytes());
        out[12..16].copy_from_slice(&self.filter_len.to_le_bytes());
        out[16..24].copy_from_slice(&self.filter_offset.to_le_bytes());
        out[24..32].copy_from_slice(&self.entry_count.to_le_bytes());
        out[32..40].copy_from_slice(&self.tombstone_count.to_le_bytes());
        out[40..48].copy_from_slice(&self.max_lsn.to_le_bytes());
        out[48..50].copy_from_slice(&RUN_VERSION.to_le_bytes());
        out[50] = self.block_align_log2;
        out[51] = 0;
        out[52..56].copy_from_slice(&RUN_MAGIC);
        let crc = crc32c::crc32c(&out[..56]);
        out[56..60].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// The footer in `bytes` (exactly `FOOTER_BYTES`), or what is wrong with it.
    pub fn decode(bytes: &[u8]) -> std::result::Result<Footer, String> {
        use strata_core::le_bytes::{u32_at, u64_at};
        if bytes.len() != FOOTER_BYTES {
            return Err(format!("footer of {} bytes", bytes.len()));
        }
        let stored_crc = u32_at(bytes, 56).unwrap_or(0);
        if crc32c::crc32c(&bytes[..56]) != stored_crc {
            return Err("footer checksum mismatch".into());
        }
        if bytes[52..56] != RUN_MAGIC {
            return Err("not a sorted run (bad magic)".into());
        }
        let version = u16::from_le_bytes([bytes[48], bytes[49]]);
        if version != RUN_VERSION || bytes[51] != 0 {
            return Err(format!("unsupported sorted run version {version}"));
        }
        let block_align_log2 = bytes[50];
        if 1usize.checked_shl(u32::from(block_align_log2)).is_none_or(|a| a > MAX_BLOCK_ALIGN_BYTES) {
            return Err(format!("block alignment 2^{block_align_log2} over {MAX_BLOCK_ALIGN_BYTES} bytes"));
        }
        let field = |at| u64_at(bytes, at).unwrap_or(0);
        Ok(Footer {
            index_offset: field(0),
            index_len: u32_at(bytes, 8).unwrap_or(0),
            filter_len: u32_at(bytes, 12).unwrap_or(0),
            filter_offset: field(16),
            entry_count: field(24),
            tombstone_count: field(32),
            max_lsn: field(40),
            block_align_log2,
        })
    }
}
