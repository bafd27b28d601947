//! Byte layout of the FlexTree file: header slots and node pages (docs/format/flexfile.md).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::{Error, Result};

use super::node::LeafEntry;
use strata_core::le_bytes::{u32_at, u64_at};

pub(crate) const PAGE_BYTES: usize = 4096;
/// Pages 0 and 1 are the header slots; nodes start at page 2.
pub(crate) const HEADER_PAGES: u64 = 2;

pub(crate) const HEADER_MAGIC: &[u8; 8] = b"FLXTREE1";
pub(crate) const HEADER_FORMAT_VERSION: u32 = 1;
pub(crate) const HEADER_FORMAT_AT: usize = 8;
pub(crate) const HEADER_PAGE_BYTES_AT: usize = 12;
pub(crate) const HEADER_VERSION_AT: usize = 16;
pub(crate) const HEADER_ROOT_AT: usize = 24;
pub(crate) const HEADER_PAGE_COUNT_AT: usize = 32;
pub(crate) const HEADER_LOGICAL_LEN_AT: usize = 40;
pub(crate) const HEADER_SEGMENT_BYTES_AT: usize = 48;
pub(crate) const HEADER_CRC_AT: usize = 56;
pub(crate) const HEADER_BYTES: usize = 60;

pub(crate) const NODE_MAGIC: &[u8; 4] = b"FXND";
pub(crate) const NODE_KIND_AT: usize = 4;
pub(crate) const NODE_COUNT_AT: usize = 6;
pub(crate) const NODE_VERSION_AT: usize = 8;
pub(crate) const NODE_BODY_AT: usize = 16;
pub(crate) const NODE_CRC_AT: usize = PAGE_BYTES - 4;
pub(crate) const NODE_KIND_LEAF: u8 = 1;
pub(crate) const NODE_KIND_INTERNAL: u8 = 2;
pub(crate) const LEAF_ENTRY_BYTES: usize = 16;
pub(crate) const INTERNAL_ENTRY_BYTES: usize = 24;

/// The committed state a header slot names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TreeHeader {
    pub version: u64,
    /// 0 = empty tree.
    pub root_page: u64,
    pub page_count: u64,
    pub logical_len: u64,
    pub segment_bytes: u64,
}

#[expect(clippy::indexing_slicing, reason = "fixed offsets inside a fixed-size array")]
pub(crate) fn encode_header(h: &TreeHeader) -> [u8; HEADER_BYTES] {
    let mut out = [0u8; HEADER_BYTES];
    out[..8].copy_from_slice(HEADER_MAGIC);
    out[HEADER_FORMAT_AT..HEADER_FORMAT_AT + 4].copy_from_slice(&HEADER_FORMAT_VERSION.to_le_bytes());
    out[HEADER_PAGE_BYTES_AT..HEADER_PAGE_BYTES_AT + 4].copy_from_slice(&(PAGE_BYTES as u32).to_le_bytes());
    for (at, value) in [
        (HEADER_VERSION_AT, h.version),
        (HEADER_ROOT_AT, h.root_page),
        (HEADER_PAGE_COUNT_AT, h.page_count),
        (HEADER_LOGICAL_LEN_AT, h.logical_len),
        (HEADER_SEGMENT_BYTES_AT, h.segment_bytes),
    ] {
        out[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out[..HEADER_CRC_AT]);
    out[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    out
}

/// A header slot, or `None` when it is not a valid slot (never written, torn, damaged).
pub(crate) fn decode_header(bytes: &[u8]) -> Option<TreeHeader> {
    let body = bytes.get(..HEADER_CRC_AT)?;
    if body.get(..8)? != HEADER_MAGIC || u32_at(bytes, HEADER_CRC_AT)? != crc32c::crc32c(body) {
        return None;
    }
    if u32_at(bytes, HEADER_FORMAT_AT)? != HEADER_FORMAT_VERSION
        || u32_at(bytes, HEADER_PAGE_BYTES_AT)? != PAGE_BYTES as u32
    {
        return None;
    }
    Some(TreeHeader {
        version: u64_at(bytes, HEADER_VERSION_AT)?,
        root_page: u64_at(bytes, HEADER_ROOT_AT)?,
        page_count: u64_at(bytes, HEADER_PAGE_COUNT_AT)?,
        logical_len: u64_at(bytes, HEADER_LOGICAL_LEN_AT)?,
        segment_bytes: u64_at(bytes, HEADER_SEGMENT_BYTES_AT)?,
    })
}

/// A decoded node page. Internal entries are (child page, shift, pivot).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PageNode {
    Leaf(Vec<LeafEntry>),
    Internal(Vec<(u64, i64, i64)>),
}

pub(crate) const MAX_PAGE_LEAF_ENTRIES: usize = (NODE_CRC_AT - NODE_BODY_AT) / LEAF_ENTRY_BYTES;
pub(crate) const MAX_PAGE_INTERNAL_ENTRIES: usize = (NODE_CRC_AT - NODE_BODY_AT) / INTERNAL_ENTRY_BYTES;

#[expect(clippy::indexing_slicing, reason = "fixed offsets inside a page-sized buffer")]
fn finish_page(mut page: Vec<u8>, kind: u8, count: usize, version: u64) -> Vec<u8> {
    page[..4].copy_from_slice(NODE_MAGIC);
    page[NODE_KIND_AT] = kind;
    page[NODE_COUNT_AT..NODE_COUNT_AT + 2].copy_from_slice(&(count as u16).to_le_bytes());
    page[NODE_VERSION_AT..NODE_VERSION_AT + 8].copy_from_slice(&version.to_le_bytes());
    let crc = crc32c::crc32c(&page[..NODE_CRC_AT]);
    page[NODE_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    page
}

/// Encodes a leaf (at most [`MAX_PAGE_LEAF_ENTRIES`] entries; the tree's capacity is lower).
#[expect(clippy::indexing_slicing, reason = "fixed offsets inside a page-sized buffer")]
pub(crate) fn encode_leaf(entries: &[LeafEntry], version: u64) -> Vec<u8> {
    let mut page = vec![0u8; PAGE_BYTES];
    for (i, e) in entries.iter().enumerate() {
        let at = NODE_BODY_AT + i * LEAF_ENTRY_BYTES;
        page[at..at + 4].copy_from_slice(&e.partial_offset.to_le_bytes());
        page[at + 4..at + 8].copy_from_slice(&e.len.to_le_bytes());
        page[at + 8..at + 16].copy_from_slice(&e.addr.to_le_bytes());
    }
    finish_page(page, NODE_KIND_LEAF, entries.len(), version)
}

#[expect(clippy::indexing_slicing, reason = "fixed offsets inside a page-sized buffer")]
pub(crate) fn encode_internal(children: &[(u64, i64, i64)], version: u64) -> Vec<u8> {
    let mut page = vec![0u8; PAGE_BYTES];
    for (i, (child_page, shift, pivot)) in children.iter().enumerate() {
        let at = NODE_BODY_AT + i * INTERNAL_ENTRY_BYTES;
        page[at..at + 8].copy_from_slice(&child_page.to_le_bytes());
        page[at + 8..at + 16].copy_from_slice(&shift.to_le_bytes());
        page[at + 16..at + 24].copy_from_slice(&pivot.to_le_bytes());
    }
    finish_page(page, NODE_KIND_INTERNAL, children.len(), version)
}

/// Decodes and checks a node page read from `page_no` of `file`.
pub(crate) fn decode_node(page: &[u8], page_no: u64, file: &str) -> Result<PageNode> {
    let offset = page_no * PAGE_BYTES as u64;
    let bad = |what: &str| Error::corruption(file, offset, format!("flextree node page {page_no}: {what}"));
    let body = page.get(..NODE_CRC_AT).ok_or_else(|| bad("short page"))?;
    if u32_at(page, NODE_CRC_AT) != Some(crc32c::crc32c(body)) {
        return Err(bad("checksum mismatch"));
    }
    if body.get(..4) != Some(NODE_MAGIC.as_slice()) {
        return Err(bad("bad magic"));
    }
    let count = u16::from_le_bytes([
        *body.get(NODE_COUNT_AT).ok_or_else(|| bad("short"))?,
        *body.get(NODE_COUNT_AT + 1).ok_or_else(|| bad("short"))?,
    ]) as usize;
    let entry = |i: usize, size: usize| body.get(NODE_BODY_AT + i * size..NODE_BODY_AT + (i + 1) * size);
    match body.get(NODE_KIND_AT).copied() {
        Some(NODE_KIND_LEAF) if (1..=MAX_PAGE_LEAF_ENTRIES).contains(&count) => {
            let mut entries = Vec::with_capacity(count);
            for i in 0..count {
                let e = entry(i, LEAF_ENTRY_BYTES).ok_or_else(|| bad("short"))?;
                entries.push(LeafEntry {
                    partial_offset: u32_at(e, 0).ok_or_else(|| bad("short"))?,
                    len: u32_at(e, 4).ok_or_else(|| bad("short"))?,
                    addr: u64_at(e, 8).ok_or_else(|| bad("short"))?,
                });
            }
            Ok(PageNode::Leaf(entries))
        }
        Some(NODE_KIND_INTERNAL) if (1..=MAX_PAGE_INTERNAL_ENTRIES).contains(&count) => {
            let mut children = Vec::with_capacity(count);
            for i in 0..count {
                let e = entry(i, INTERNAL_ENTRY_BYTES).ok_or_else(|| bad("short"))?;
                let child = u64_at(e, 0).ok_or_else(|| bad("short"))?;
                let shift = u64_at(e, 8).ok_or_else(|| bad("short"))? as i64;
                let pivot = u64_at(e, 16).ok_or_else(|| bad("short"))? as i64;
                children.push((child, shift, pivot));
            }
            Ok(PageNode::Internal(children))
        }
        _ => Err(bad("bad kind or entry count")),
    }
}
