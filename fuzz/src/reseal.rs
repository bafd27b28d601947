//! Checksum repair ("reseal") per file format: after the damage edits, a target may rewrite every
//! checksum of the damaged file that it can reach, so the damage gets past the checksums to the
//! decoders behind them (`damaged_store` does so when the input's flag byte says so; unsealed
//! damage is fuzzed too).
//!
//! Each function walks the file as its engine's decoder does, from the layouts in the engine
//! code (named at each function), recomputes each checksum it reaches and stops quietly where the
//! structure can no longer be parsed. It returns how many checksums it wrote. Resealing an
//! intact seed file must leave it unchanged (`fuzz/tests/reseal.rs` checks that for every
//! format, so the layouts here cannot drift from the engines' silently).
//!
//! Sizes the fuzz seeds fix (`crate::options`): f2 pages of 8 KiB in segments of 32 KiB,
//! treeline pages of 4 KiB, FlexFile data segments of 4 MiB (the default).

use crc32c::{crc32c, crc32c_append};

/// A reseal function: the damaged file's name and bytes; returns the checksums written.
pub type Reseal = fn(&str, &mut [u8]) -> usize;

/// f2's log page size and segment size in the fuzz seeds (`options`: `page_size_bytes`,
/// `segment_bytes`).
pub const F2_PAGE_BYTES: usize = 8 << 10;
pub const F2_SEGMENT_BYTES: usize = 32 << 10;
/// treeline's page size in the fuzz seeds (`page_size_bytes`).
pub const TREELINE_PAGE_BYTES: usize = 4 << 10;
/// FlexFile's data segment size (`FlexFileOptions::segment_bytes`, not set by the fuzz options).
pub const FLEXFILE_SEGMENT_BYTES: usize = 4 << 20;

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    if let Some(slot) = b.get_mut(at..at + 4) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    if let Some(slot) = b.get_mut(at..at + 8) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
}

/// No checksum to repair.
pub fn none(_: &str, _: &mut [u8]) -> usize {
    0
}

/// A `strata_kit::small_file` with `CrcLayout::Trailing`: the last 4 bytes are the CRC-32C of
/// every byte before them (`STRATA-MANIFEST`, `flexdb-meta`, `treeline-checkpoint`,
/// `treeline-forecast`).
pub fn trailing_crc(_: &str, b: &mut [u8]) -> usize {
    let Some(body) = b.len().checked_sub(4) else { return 0 };
    let crc = crc32c(&b[..body]);
    put_u32(b, body, crc);
    1
}

// ---- The shared WAL (crates/strata-wal/src/format.rs, state.rs; docs/format/wal.md) ----

const WAL_HEADER_BYTES: usize = 32;
const WAL_RECORD_HEADER_BYTES: usize = 24;
const WAL_MARKER_FLAG: u32 = 1 << 31;

/// leveldb's mask (`strata_wal::format::mask_crc`).
fn wal_mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// A WAL file: `*state` (the state file: masked CRC at 12 of bytes 16..), or a segment `*.log`
/// (header: masked CRC at 12 of bytes 0..12 and 16..32; then records from 32, each a masked CRC
/// at 0 of header bytes 4..24 and the payload, padded to 8, up to an all-zero header, a header
/// that cannot be a record or a record running past the file). `.free` files are ignored by
/// recovery and left alone.
pub fn wal(name: &str, b: &mut [u8]) -> usize {
    if name.ends_with("state") {
        if b.len() < WAL_HEADER_BYTES {
            return 0;
        }
        let crc = wal_mask(crc32c(&b[16..]));
        put_u32(b, 12, crc);
        return 1;
    }
    if !name.ends_with(".log") || b.len() < WAL_HEADER_BYTES {
        return 0;
    }
    let crc = wal_mask(crc32c_append(crc32c(&b[..12]), &b[16..32]));
    put_u32(b, 12, crc);
    let mut written = 1;
    let mut pos = WAL_HEADER_BYTES;
    while pos + WAL_RECORD_HEADER_BYTES <= b.len() {
        let header = &b[pos..pos + WAL_RECORD_HEADER_BYTES];
        if header.iter().all(|&x| x == 0) {
            break;
        }
        let field = u32_at(header, 4).unwrap_or(0);
        let payload_len = (field & !WAL_MARKER_FLAG) as usize;
        if field & WAL_MARKER_FLAG != 0 && payload_len != 0 {
            break;
        }
        let total = (WAL_RECORD_HEADER_BYTES + payload_len).next_multiple_of(8);
        if total > b.len() - pos {
            break;
        }
        let payload = &b[pos + WAL_RECORD_HEADER_BYTES..pos + WAL_RECORD_HEADER_BYTES + payload_len];
        let crc = wal_mask(crc32c_append(crc32c(&header[4..]), payload));
        put_u32(b, pos, crc);
        written += 1;
        pos += total;
    }
    written
}

// ---- Engine memory (crates/engine-memory/src/snapshot.rs; docs/format/memory-snapshot.md) ----

/// A memory snapshot: the header's CRC at 12 (bytes 0..12 and 16..32), each block's CRC at 4 (of
/// its payload) from offset 32 up to the trailer (the last 24 bytes), then the trailer: when
/// every block was reached, its entry and block counts as the blocks hold them, and its CRC at 20
/// (of trailer bytes 0..20).
pub fn memory_snapshot(_: &str, b: &mut [u8]) -> usize {
    const HEADER: usize = 32;
    const TRAILER: usize = 24;
    if b.len() < HEADER + TRAILER {
        return 0;
    }
    let crc = crc32c_append(crc32c(&b[..12]), &b[16..HEADER]);
    put_u32(b, 12, crc);
    let mut written = 1;
    let trailer_at = b.len() - TRAILER;
    let (mut pos, mut blocks, mut entries, mut whole) = (HEADER, 0u32, 0u64, true);
    while pos < trailer_at {
        let Some(len) = u32_at(b, pos).map(|n| n as usize).filter(|_| pos + 8 <= trailer_at) else {
            whole = false;
            break;
        };
        let start = pos + 8;
        let Some(end) = start.checked_add(len).filter(|&end| end <= trailer_at) else {
            whole = false;
            break;
        };
        let crc = crc32c(&b[start..end]);
        put_u32(b, pos + 4, crc);
        written += 1;
        let mut p = start;
        while p < end {
            let (Some(k), Some(v)) = (u32_at(b, p), u32_at(b, p + 4)) else { break };
            p = p.saturating_add(8).saturating_add(k as usize).saturating_add(v as usize);
            entries += 1;
        }
        blocks += 1;
        pos = end;
    }
    if whole {
        put_u64(b, trailer_at + 8, entries);
        put_u32(b, trailer_at + 16, blocks);
    }
    let crc = crc32c(&b[trailer_at..trailer_at + 20]);
    put_u32(b, trailer_at + 20, crc);
    written + 1
}

// ---- Engine f2 (crates/engine-f2/src/{checkpoint,hot_snapshot,record}.rs, log/mod.rs;
//      docs/format/f2-logs.md) ----

/// `f2-checkpoint`: CRC-32C at 12 of bytes 16.. (`CrcLayout::AfterVersionOverPayload`).
pub fn f2_checkpoint(_: &str, b: &mut [u8]) -> usize {
    if b.len() < 16 {
        return 0;
    }
    let crc = crc32c(&b[16..]);
    put_u32(b, 12, crc);
    1
}

/// `f2-hot-index`: the body CRC at 12 (of bytes 64..), then the header CRC at 56 (of bytes
/// 0..56, which include the body CRC).
pub fn f2_hot_index(_: &str, b: &mut [u8]) -> usize {
    if b.len() < 64 {
        return 0;
    }
    let body = crc32c(&b[64..]);
    put_u32(b, 12, body);
    let header = crc32c(&b[..56]);
    put_u32(b, 56, header);
    2
}

/// A segment of an f2 log (`f2-hot-`, `f2-cold-`, `f2-chunk-` `<segment:016>.seg`): pages of
/// [`F2_PAGE_BYTES`]; in each, records from the page start (address 64 for the first page of
/// segment 0: addresses below 64 are never used) until fewer than 24 bytes remain, a zero `kind`
/// byte (padding), a header that cannot be a record or a record overrunning its page. A record's
/// CRC at 0 covers its address (`segment * F2_SEGMENT_BYTES` + offset, u64, with the log's number
/// in the top byte: 1 hot, 2 cold, 3 chunk) and then bytes 4..24 + key + value: a record the
/// edits moved is resealed where it now lies.
pub fn f2_log(name: &str, b: &mut [u8]) -> usize {
    let segment = name
        .strip_suffix(".seg")
        .and_then(|s| s.rsplit('-').next())
        .and_then(|digits| digits.parse::<u64>().ok());
    let log_number: u64 = match name {
        n if n.starts_with("f2-hot-") => 1,
        n if n.starts_with("f2-cold-") => 2,
        n if n.starts_with("f2-chunk-") => 3,
        _ => return 0,
    };
    let Some(segment) = segment else { return 0 };
    let mut written = 0;
    for page_start in (0..b.len()).step_by(F2_PAGE_BYTES) {
        let page_end = (page_start + F2_PAGE_BYTES).min(b.len());
        let mut pos = if segment == 0 && page_start == 0 { 64 } else { page_start };
        while pos + 24 <= page_end {
            let kind = b[pos + 12];
            let (key_len, value_len) = (u32_at(b, pos + 4).unwrap_or(0), u32_at(b, pos + 8).unwrap_or(0));
            if kind == 0 || kind > 2 || (kind == 2 && value_len != 0) {
                break;
            }
            let body = 24 + key_len as usize + value_len as usize;
            let stored = body.next_multiple_of(8);
            if stored > page_end - pos {
                break;
            }
            let address = (segment * F2_SEGMENT_BYTES as u64 + pos as u64) ^ (log_number << 56);
            let crc = crc32c_append(crc32c(&address.to_le_bytes()), &b[pos + 4..pos + body]);
            put_u32(b, pos, crc);
            written += 1;
            pos += stored;
        }
    }
    written
}

// ---- Engine flex (crates/engine-flex/src/flexfile/format.rs, flextree/page.rs,
//      flexdb/record.rs; docs/format/flexfile.md, flexdb.md) ----

/// `flexdb-table.log`: the header CRC at 12 (bytes 0..12 and 16..32), then from 32 every block
/// (`FXLB`, 1..=2^24 entries of 16 bytes, CRC at 20 of bytes 0..20 and the entries) at
/// multiples of 8, as replay scans for them: both copies of each block are resealed (each where
/// it stands), and past bytes that are no block the walk goes on 8 bytes later.
pub fn flexfile_log(_: &str, b: &mut [u8]) -> usize {
    if b.len() < 32 {
        return 0;
    }
    let crc = crc32c_append(crc32c(&b[..12]), &b[16..32]);
    put_u32(b, 12, crc);
    let mut written = 1;
    let mut pos = 32;
    while pos + 24 <= b.len() {
        let count = u32_at(b, pos + 4).unwrap_or(0) as usize;
        let size = 24 + count * 16;
        if &b[pos..pos + 4] != b"FXLB" || count == 0 || count > 1 << 24 || size > b.len() - pos {
            pos += 8;
            continue;
        }
        let crc = crc32c_append(crc32c(&b[pos..pos + 20]), &b[pos + 24..pos + size]);
        put_u32(b, pos + 20, crc);
        written += 1;
        pos += size;
    }
    written
}

/// `flexdb-table.tree`: pages of 4096 bytes; header slots 0 and 1 (`FLXTREE1`, CRC at 56 of bytes
/// 0..56), node pages from 2 (`FXND`, CRC at 4092 of bytes 0..4092). Pages without their magic
/// (free, never written) are left alone.
pub fn flextree(_: &str, b: &mut [u8]) -> usize {
    const PAGE: usize = 4096;
    let mut written = 0;
    for slot in 0..2 {
        let at = slot * PAGE;
        if at + 60 <= b.len() && &b[at..at + 8] == b"FLXTREE1" {
            let crc = crc32c(&b[at..at + 56]);
            put_u32(b, at + 56, crc);
            written += 1;
        }
    }
    let mut at = 2 * PAGE;
    while at + PAGE <= b.len() {
        if &b[at..at + 4] == b"FXND" {
            let crc = crc32c(&b[at..at + PAGE - 4]);
            put_u32(b, at + PAGE - 4, crc);
            written += 1;
        }
        at += PAGE;
    }
    written
}

/// One LEB128 varint of at most 5 bytes at the start of `b`: (value, bytes).
fn varint(b: &[u8]) -> Option<(usize, usize)> {
    let mut value = 0usize;
    for (i, &byte) in b.iter().enumerate().take(5) {
        value |= usize::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

/// `flexdb-table.data`: FlexDB's records (CRC-32C at 0 of the rest of the record, varint key and
/// value lengths, key, value). FlexFile writes each data segment ([`FLEXFILE_SEGMENT_BYTES`])
/// log-structured from its start, whole records back to back, so each segment is walked from its
/// start until bytes that cannot be a record (lengths over the limits, an all-zero header: the
/// unwritten rest, a record running past the segment).
pub fn flexdb_data(_: &str, b: &mut [u8]) -> usize {
    let mut written = 0;
    for segment in (0..b.len()).step_by(FLEXFILE_SEGMENT_BYTES) {
        let end = (segment + FLEXFILE_SEGMENT_BYTES).min(b.len());
        let mut pos = segment;
        while pos + 6 <= end {
            let Some((key_len, a)) = varint(&b[pos + 4..end]) else { break };
            let Some((value_len, c)) = varint(&b[pos + 4 + a..end]) else { break };
            let header = 4 + a + c;
            if key_len > 4096 || value_len > 64 << 10 || b[pos..pos + header].iter().all(|&x| x == 0) {
                break;
            }
            let len = header + key_len + value_len;
            if len > end - pos {
                break;
            }
            let crc = crc32c(&b[pos + 4..pos + len]);
            put_u32(b, pos, crc);
            written += 1;
            pos += len;
        }
    }
    written
}

// ---- Engine treeline (crates/engine-treeline/src/{data_file,double_write}.rs, page/;
//      docs/format/treeline.md) ----

/// One treeline page at the start of `page` (`"TL"` at 4, CRC-32C at 0 of bytes 4..P); a page
/// without the magic (free, never written) is left alone.
fn treeline_page(page: &mut [u8]) -> usize {
    if page.len() < TREELINE_PAGE_BYTES || &page[4..6] != b"TL" {
        return 0;
    }
    let crc = crc32c(&page[4..TREELINE_PAGE_BYTES]);
    put_u32(page, 0, crc);
    1
}

/// `treeline-data`: the header (page 0: `TLDATA`, CRC at 20 of bytes 0..20) and every page.
/// Blob runs hold bare values (their checksum is in the referencing record), so damage to them
/// is never resealed.
pub fn treeline_data(_: &str, b: &mut [u8]) -> usize {
    let mut written = 0;
    if b.len() >= 24 && &b[..6] == b"TLDATA" {
        let crc = crc32c(&b[..20]);
        put_u32(b, 20, crc);
        written += 1;
    }
    let mut at = TREELINE_PAGE_BYTES;
    while at + TREELINE_PAGE_BYTES <= b.len() {
        written += treeline_page(&mut b[at..at + TREELINE_PAGE_BYTES]);
        at += TREELINE_PAGE_BYTES;
    }
    written
}

/// `treeline-dwb`: entries of 32 + P bytes from 0; in each (`TLDW` at 4) the page image at 32
/// (its own page CRC), then the entry's CRC at 0 of bytes 4..32 + P.
pub fn treeline_dwb(_: &str, b: &mut [u8]) -> usize {
    let entry = 32 + TREELINE_PAGE_BYTES;
    let mut written = 0;
    let mut at = 0;
    while at + entry <= b.len() {
        if &b[at + 4..at + 8] == b"TLDW" {
            written += treeline_page(&mut b[at + 32..at + entry]);
            let crc = crc32c(&b[at + 4..at + entry]);
            put_u32(b, at, crc);
            written += 1;
        }
        at += entry;
    }
    written
}
