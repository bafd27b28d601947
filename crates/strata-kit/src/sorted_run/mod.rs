//! Sorted runs: immutable, checksummed runs of entries in ascending key order (data blocks with
//! prefix-compressed keys and restart points, a binary fuse filter, a block index and a footer),
//! and a k-way merge of runs and MemTables. docs/format/sorted-run.md is the byte layout.
//!
//! Built for the engines whose on-disk data is sorted runs: TurtleKV's segments and leaves and
//! LASER's per-level runs (row or column-group values alike: a value is opaque bytes). Where a
//! run lives is the engine's business: `RunWriter` writes at `base` of any `StorageFile` and
//! reports the length, `RunReader` opens `(file, base, len)`.
//!
//! Invariants: keys ascend strictly within a run (the writer refuses anything else); a run holds
//! at most one entry per key; a delete is an entry of kind `Delete` (a tombstone), and a merge
//! operand an entry of kind `Merge` that a `MergeOperator` resolves against older entries.

mod block;
mod block_cache;
mod deferred;
mod filter;
mod merge;
mod read_ahead;
mod reader;
pub mod varint;
mod writer;

#[cfg(test)]
mod aligned_tests;
#[cfg(test)]
mod tests;

pub use block::{Block, BlockBuilder, DecodedBlock};
pub use block_cache::BlockCache;
pub use deferred::{DeferredParts, OpenPart};
pub use filter::RunFilter;
pub use merge::{eager, table_source, LazyIter, MergeIter, MergeOperator, MergeOutput, SourceIter, Sourced};
pub use reader::{RunIter, RunReader};
pub use writer::{RunInfo, RunOptions, RunWriter};

/// What an entry says about its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// The key's value.
    Put,
    /// The key is deleted (a tombstone: it hides older entries until it reaches the bottom).
    Delete,
    /// A partial update to apply on top of the older entries (`MergeOperator`).
    Merge,
}

impl EntryKind {
    pub fn to_byte(self) -> u8 {
        match self {
            EntryKind::Put => 0,
            EntryKind::Delete => 1,
            EntryKind::Merge => 2,
        }
    }

    pub fn from_byte(byte: u8) -> Option<EntryKind> {
        match byte {
            0 => Some(EntryKind::Put),
            1 => Some(EntryKind::Delete),
            2 => Some(EntryKind::Merge),
            _ => None,
        }
    }
}

/// An entry as the readers and the merge hand it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub kind: EntryKind,
    /// Empty for a delete.
    pub value: Vec<u8>,
}

impl Entry {
    pub fn put(value: Vec<u8>) -> Entry {
        Entry { kind: EntryKind::Put, value }
    }

    pub fn delete() -> Entry {
        Entry { kind: EntryKind::Delete, value: Vec::new() }
    }

    pub fn merge(operand: Vec<u8>) -> Entry {
        Entry { kind: EntryKind::Merge, value: operand }
    }
}

/// Bytes of the footer at the end of every run.
pub const FOOTER_BYTES: usize = 60;
/// The footer's magic, bytes 52..56.
pub const RUN_MAGIC: [u8; 4] = *b"SRUN";
/// The layout version this code writes and reads.
pub const RUN_VERSION: u16 = 1;
/// Bytes of the CRC-32C after every block.
pub const BLOCK_TRAILER_BYTES: usize = 4;
/// The largest data block alignment a run may have (`RunOptions::block_align_bytes`).
pub const MAX_BLOCK_ALIGN_BYTES: usize = 1 << 16;
