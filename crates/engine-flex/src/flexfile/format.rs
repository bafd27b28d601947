//! Byte layout of the logical log (docs/format/flexfile.md): header, checksummed blocks, and the
//! paper's 16-byte entries.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use crate::flextree::HOLE_ADDR;
use strata_core::le_bytes::{u32_at, u64_at};

pub(crate) const LOG_MAGIC: &[u8; 8] = b"FLXLOG01";
pub(crate) const LOG_FORMAT_VERSION: u32 = 1;
pub(crate) const LOG_FORMAT_AT: usize = 8;
pub(crate) const LOG_CRC_AT: usize = 12;
pub(crate) const LOG_TREE_VERSION_AT: usize = 16;
pub(crate) const LOG_HEADER_BYTES: usize = 32;

pub(crate) const BLOCK_MAGIC: &[u8; 4] = b"FXLB";
pub(crate) const BLOCK_COUNT_AT: usize = 4;
pub(crate) const BLOCK_TREE_VERSION_AT: usize = 8;
pub(crate) const BLOCK_SEQ_AT: usize = 16;
pub(crate) const BLOCK_CRC_AT: usize = 20;
pub(crate) const BLOCK_HEADER_BYTES: usize = 24;
/// One commit writes one block, so one operation never spans two blocks.
pub(crate) const MAX_BLOCK_ENTRIES: usize = 1 << 24;

pub(crate) const ENTRY_BYTES: usize = 16;
pub(crate) const ENTRY_OP_BITS: u32 = 2;
pub(crate) const ENTRY_LEN_BITS: u32 = 30;
pub(crate) const ENTRY_OFFSET_BITS: u32 = 48;
pub(crate) const ENTRY_ADDR_BITS: u32 = 48;
/// Longest range one entry can describe.
pub(crate) const MAX_ENTRY_LEN: u64 = (1 << ENTRY_LEN_BITS) - 1;
/// The 48-bit address that stands for a hole.
pub(crate) const ENTRY_HOLE_ADDR: u64 = (1 << ENTRY_ADDR_BITS) - 1;

const OP_INSERT: u128 = 0;
const OP_COLLAPSE: u128 = 1;
const OP_RELOCATE: u128 = 2;

/// One FlexTree operation as logged (paper §4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogOp {
    /// insert-range of an extent at `addr` (or a hole, `HOLE_ADDR`).
    Insert {
        offset: u64,
        len: u64,
        addr: u64,
    },
    Collapse {
        offset: u64,
        len: u64,
    },
    /// The bytes at `offset .. offset + len` moved to `addr` (GC, defrag).
    Relocate {
        offset: u64,
        len: u64,
        addr: u64,
    },
}

pub(crate) fn encode_entry(op: &LogOp) -> [u8; ENTRY_BYTES] {
    let (code, offset, len, addr) = match *op {
        LogOp::Insert { offset, len, addr } => {
            (OP_INSERT, offset, len, if addr == HOLE_ADDR { ENTRY_HOLE_ADDR } else { addr })
        }
        LogOp::Collapse { offset, len } => (OP_COLLAPSE, offset, len, 0),
        LogOp::Relocate { offset, len, addr } => (OP_RELOCATE, offset, len, addr),
    };
    debug_assert!(len <= MAX_ENTRY_LEN && offset < 1 << 48 && addr <= ENTRY_HOLE_ADDR);
    let word = code
        | (u128::from(len) << ENTRY_OP_BITS)
        | (u128::from(offset) << (ENTRY_OP_BITS + ENTRY_LEN_BITS))
        | (u128::from(addr) << (ENTRY_OP_BITS + ENTRY_LEN_BITS + ENTRY_OFFSET_BITS));
    word.to_le_bytes()
}

/// Decodes an entry; `None` for an invalid one (op 3, zero length, hole address on a relocate).
pub(crate) fn decode_entry(bytes: [u8; ENTRY_BYTES]) -> Option<LogOp> {
    let word = u128::from_le_bytes(bytes);
    let field = |shift: u32, bits: u32| ((word >> shift) & ((1u128 << bits) - 1)) as u64;
    let len = field(ENTRY_OP_BITS, ENTRY_LEN_BITS);
    let offset = field(ENTRY_OP_BITS + ENTRY_LEN_BITS, ENTRY_OFFSET_BITS);
    let addr = field(ENTRY_OP_BITS + ENTRY_LEN_BITS + ENTRY_OFFSET_BITS, ENTRY_ADDR_BITS);
    if len == 0 {
        return None;
    }
    match word & 3 {
        OP_INSERT => {
            Some(LogOp::Insert { offset, len, addr: if addr == ENTRY_HOLE_ADDR { HOLE_ADDR } else { addr } })
        }
        OP_COLLAPSE if addr == 0 => Some(LogOp::Collapse { offset, len }),
        OP_RELOCATE if addr != ENTRY_HOLE_ADDR => Some(LogOp::Relocate { offset, len, addr }),
        _ => None,
    }
}

pub(crate) fn encode_log_header(tree_version: u64) -> [u8; LOG_HEADER_BYTES] {
    let mut out = [0u8; LOG_HEADER_BYTES];
    out[..8].copy_from_slice(LOG_MAGIC);
    out[LOG_FORMAT_AT..LOG_FORMAT_AT + 4].copy_from_slice(&LOG_FORMAT_VERSION.to_le_bytes());
    out[LOG_TREE_VERSION_AT..LOG_TREE_VERSION_AT + 8].copy_from_slice(&tree_version.to_le_bytes());
    let crc = header_crc(&out);
    out[LOG_CRC_AT..LOG_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    out
}

fn header_crc(header: &[u8; LOG_HEADER_BYTES]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&header[..LOG_CRC_AT]), &header[LOG_CRC_AT + 4..])
}

/// The tree version a log header names; `None` if the header is not valid.
pub(crate) fn decode_log_header(bytes: &[u8]) -> Option<u64> {
    let header: &[u8; LOG_HEADER_BYTES] = bytes.get(..LOG_HEADER_BYTES)?.try_into().ok()?;
    if header.get(..8)? != LOG_MAGIC
        || u32_at(header, LOG_FORMAT_AT)? != LOG_FORMAT_VERSION
        || u32_at(header, LOG_CRC_AT)? != header_crc(header)
    {
        return None;
    }
    u64_at(header, LOG_TREE_VERSION_AT)
}

/// Encodes one block holding `ops` (at most `MAX_BLOCK_ENTRIES`).
#[expect(clippy::indexing_slicing, reason = "fixed offsets inside the block header")]
pub(crate) fn encode_block(ops: &[LogOp], tree_version: u64, seq: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOCK_HEADER_BYTES + ops.len() * ENTRY_BYTES);
    out.extend_from_slice(BLOCK_MAGIC);
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    out.extend_from_slice(&tree_version.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
    for op in ops {
        out.extend_from_slice(&encode_entry(op));
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..BLOCK_CRC_AT]), &out[BLOCK_HEADER_BYTES..]);
    out[BLOCK_CRC_AT..BLOCK_HEADER_BYTES].copy_from_slice(&crc.to_le_bytes());
    out
}

/// The sequence number of a valid block (of `tree_version`) at the start of `bytes`.
pub(crate) fn valid_block_seq(bytes: &[u8], tree_version: u64) -> Option<u32> {
    let seq = u32_at(bytes, BLOCK_SEQ_AT)?;
    decode_block(bytes, tree_version, seq).ok().map(|_| seq)
}

/// Why a block could not be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlockError {
    /// Fewer bytes than a header, or a header that is not a block header: the end of the log.
    NoBlock,
    /// A block header with this total size whose contents do not check out.
    Bad { size_bytes: usize },
}

/// Decodes the block at the start of `bytes`; returns its ops and total size.
pub(crate) fn decode_block(
    bytes: &[u8],
    tree_version: u64,
    seq: u32,
) -> Result<(Vec<LogOp>, usize), BlockError> {
    let header = bytes.get(..BLOCK_HEADER_BYTES).ok_or(BlockError::NoBlock)?;
    let count = u32_at(header, BLOCK_COUNT_AT).ok_or(BlockError::NoBlock)? as usize;
    if header.get(..4) != Some(BLOCK_MAGIC.as_slice()) || count == 0 || count > MAX_BLOCK_ENTRIES {
        return Err(BlockError::NoBlock);
    }
    let size_bytes = BLOCK_HEADER_BYTES + count * ENTRY_BYTES;
    let bad = BlockError::Bad { size_bytes };
    let block = bytes.get(..size_bytes).ok_or(bad)?;
    let entries = block.get(BLOCK_HEADER_BYTES..).ok_or(bad)?;
    let crc = crc32c::crc32c_append(crc32c::crc32c(header.get(..BLOCK_CRC_AT).ok_or(bad)?), entries);
    if u32_at(header, BLOCK_CRC_AT) != Some(crc)
        || u64_at(header, BLOCK_TREE_VERSION_AT) != Some(tree_version)
        || u32_at(header, BLOCK_SEQ_AT) != Some(seq)
    {
        return Err(bad);
    }
    let mut ops = Vec::with_capacity(count);
    for chunk in entries.chunks_exact(ENTRY_BYTES) {
        let raw: [u8; ENTRY_BYTES] = chunk.try_into().map_err(|_| bad)?;
        ops.push(decode_entry(raw).ok_or(bad)?);
    }
    Ok((ops, size_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flextree::page::{self, TreeHeader};

    /// Every offset and size in docs/format/flexfile.md, checked against the code.
    #[test]
    fn layout_matches_the_format_doc() {
        let doc = include_str!("../../../../docs/format/flexfile.md");
        for row in [
            "| 0 | 8 | `magic` | ASCII `FLXTREE1` |",
            "| 16 | 8 | `tree_version` | u64, +1 per committed tree; the log names it |",
            "| 56 | 4 | `crc` | CRC-32C of bytes `0..56` |",
            "| 4092 | 4 | `crc` | CRC-32C of bytes `0..4092` |",
            "| 0 | 8 | `magic` | ASCII `FLXLOG01` |",
            "| 20 | 4 | `crc` | CRC-32C of block bytes `0..20` followed by the entries |",
            "| 24 | 16 × count | entries | |",
            "| 80..128 | `addr` |",
        ] {
            assert!(doc.contains(row), "format doc lacks {row:?}");
        }
        assert_eq!((page::HEADER_VERSION_AT, page::HEADER_ROOT_AT, page::HEADER_PAGE_COUNT_AT), (16, 24, 32));
        assert_eq!(
            (page::HEADER_LOGICAL_LEN_AT, page::HEADER_SEGMENT_BYTES_AT, page::HEADER_CRC_AT),
            (40, 48, 56)
        );
        assert_eq!(
            (page::NODE_KIND_AT, page::NODE_COUNT_AT, page::NODE_VERSION_AT, page::NODE_BODY_AT),
            (4, 6, 8, 16)
        );
        assert_eq!((page::NODE_CRC_AT, page::LEAF_ENTRY_BYTES, page::INTERNAL_ENTRY_BYTES), (4092, 16, 24));
        assert_eq!((LOG_FORMAT_AT, LOG_CRC_AT, LOG_TREE_VERSION_AT, LOG_HEADER_BYTES), (8, 12, 16, 32));
        assert_eq!((BLOCK_COUNT_AT, BLOCK_TREE_VERSION_AT, BLOCK_SEQ_AT, BLOCK_CRC_AT), (4, 8, 16, 20));
        assert_eq!((BLOCK_HEADER_BYTES, ENTRY_BYTES), (24, 16));

        // Encoded bytes land where the tables say.
        let h =
            TreeHeader { version: 7, root_page: 9, page_count: 11, logical_len: 13, segment_bytes: 4 << 20 };
        let bytes = page::encode_header(&h);
        assert_eq!(&bytes[..8], b"FLXTREE1");
        assert_eq!(bytes[16], 7);
        assert_eq!(bytes[24], 9);
        assert_eq!(bytes[32], 11);
        assert_eq!(bytes[40], 13);
        assert_eq!(u64::from_le_bytes(bytes[48..56].try_into().unwrap()), 4 << 20);
        assert_eq!(u32::from_le_bytes(bytes[56..60].try_into().unwrap()), crc32c::crc32c(&bytes[..56]));
        assert_eq!(page::decode_header(&bytes), Some(h));

        let op = LogOp::Insert { offset: 0x1234_5678_9abc, len: 4096, addr: 0xfedc_ba98_7654 };
        let word = u128::from_le_bytes(encode_entry(&op));
        assert_eq!(word & 3, 0);
        assert_eq!((word >> 2) & ((1 << 30) - 1), 4096);
        assert_eq!((word >> 32) & ((1 << 48) - 1), 0x1234_5678_9abc);
        assert_eq!(word >> 80, 0xfedc_ba98_7654);

        let block = encode_block(&[op], 5, 3);
        assert_eq!(&block[..4], b"FXLB");
        assert_eq!(block[BLOCK_COUNT_AT], 1);
        assert_eq!(block[BLOCK_TREE_VERSION_AT], 5);
        assert_eq!(block[BLOCK_SEQ_AT], 3);
        assert_eq!(block.len(), 24 + 16);
        let header = encode_log_header(42);
        assert_eq!(header[LOG_TREE_VERSION_AT], 42);
        assert_eq!(decode_log_header(&header), Some(42));
    }

    #[test]
    fn entries_round_trip_and_bad_entries_are_rejected() {
        for op in [
            LogOp::Insert { offset: 0, len: 1, addr: 0 },
            LogOp::Insert { offset: (1 << 48) - 1, len: MAX_ENTRY_LEN, addr: HOLE_ADDR },
            LogOp::Collapse { offset: 77, len: 5 },
            LogOp::Relocate { offset: 1, len: 2, addr: 3 },
        ] {
            assert_eq!(decode_entry(encode_entry(&op)), Some(op));
        }
        assert_eq!(decode_entry([0xff; 16]), None);
        assert_eq!(decode_entry([0; 16]), None);
    }

    #[test]
    fn damaged_blocks_are_detected() {
        let ops = [LogOp::Collapse { offset: 1, len: 2 }, LogOp::Insert { offset: 3, len: 4, addr: 5 }];
        let block = encode_block(&ops, 9, 0);
        assert_eq!(decode_block(&block, 9, 0), Ok((ops.to_vec(), block.len())));
        assert_eq!(decode_block(&block, 8, 0), Err(BlockError::Bad { size_bytes: block.len() }));
        assert_eq!(decode_block(&block, 9, 1), Err(BlockError::Bad { size_bytes: block.len() }));
        for i in 0..block.len() {
            let mut damaged = block.clone();
            damaged[i] ^= 0x10;
            assert!(decode_block(&damaged, 9, 0).is_err(), "flip at {i} not detected");
        }
        assert_eq!(decode_block(&block[..30], 9, 0), Err(BlockError::Bad { size_bytes: block.len() }));
        assert_eq!(decode_block(&[0u8; 24], 9, 0), Err(BlockError::NoBlock));
    }
}
