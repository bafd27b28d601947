//! `flexdb-meta`: the commit record (docs/format/flexdb.md): which table file kind the store uses,
//! up to which WAL lsn the table file holds every write, and (version 2) how far the FlexFile's
//! logical log was synced at that commit, so recovery can tell a cut log from a torn tail.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::le_bytes::{u32_at, u64_at};
use strata_core::{Error, Result};
use strata_io::Storage;
use strata_kit::small_file::{CrcLayout, SmallFileFormat};

use crate::flexfile::LogMark;

pub const FILE_NAME: &str = "flexdb-meta";
/// Version 1 (28 bytes) has no log mark; stores written by older builds still open, with the
/// checks of that version, and the next commit rewrites the record as version 2.
const VERSION_1: u32 = 1;
const VERSION: u32 = 2;
const V1_PAYLOAD_BYTES: usize = 12;
const PAYLOAD_BYTES: usize = 28;

/// Version 2: `magic | version | table_kind u32 | committed_lsn u64 | log_tree_version u64 |
/// log_synced_bytes u64 | crc32c of bytes 0..40`: 44 bytes. Version 1 ends after committed_lsn
/// (crc of bytes 0..24, 28 bytes). The payload size is checked per version (`from_payload`).
fn format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRFLXDB",
        versions: VERSION_1..=VERSION,
        crc: CrcLayout::Trailing,
        payload_bytes: None,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// 0 = naive baseline, 1 = FlexFile.
    pub table_kind: u32,
    pub committed_lsn: u64,
    /// How far the FlexFile log was synced when this record was written (`None`: a naive table
    /// file, or a version-1 record). Stored as tree version 0 when absent (FlexFile versions
    /// start at 1).
    pub table_log: Option<LogMark>,
}

fn payload(meta: &Meta) -> Vec<u8> {
    let mark = meta.table_log.unwrap_or(LogMark { tree_version: 0, synced_bytes: 0 });
    let mut out = Vec::with_capacity(PAYLOAD_BYTES);
    out.extend_from_slice(&meta.table_kind.to_le_bytes());
    out.extend_from_slice(&meta.committed_lsn.to_le_bytes());
    out.extend_from_slice(&mark.tree_version.to_le_bytes());
    out.extend_from_slice(&mark.synced_bytes.to_le_bytes());
    out
}

/// The file's bytes (tests check them against docs/format/flexdb.md).
#[cfg(test)]
pub fn encode(meta: &Meta) -> Vec<u8> {
    format().encode(VERSION, &payload(meta))
}

#[cfg(test)]
pub fn decode(bytes: &[u8]) -> Result<Meta> {
    let decoded = format().decode(FILE_NAME, bytes)?;
    from_payload(decoded.version, decoded.payload)
}

fn from_payload(version: u32, payload: &[u8]) -> Result<Meta> {
    let expected = if version == VERSION_1 { V1_PAYLOAD_BYTES } else { PAYLOAD_BYTES };
    let (Some(table_kind), Some(committed_lsn)) = (u32_at(payload, 0), u64_at(payload, 4)) else {
        return Err(wrong_size(version, payload.len(), expected));
    };
    if payload.len() != expected {
        return Err(wrong_size(version, payload.len(), expected));
    }
    if committed_lsn > strata_wal::MAX_LSN {
        // magic (8) | version (4) | table_kind (4) | committed_lsn
        return Err(Error::corruption(FILE_NAME, 16, "committed lsn past the lsn space (2^63 - 1)"));
    }
    // Absent in version 1; tree version 0 stands for "no mark" in version 2.
    let table_log = match (u64_at(payload, 12), u64_at(payload, 20)) {
        (Some(tree_version), Some(synced_bytes)) if tree_version > 0 => {
            Some(LogMark { tree_version, synced_bytes })
        }
        _ => None,
    };
    Ok(Meta { table_kind, committed_lsn, table_log })
}

/// A checksum-valid record of the wrong size for its version: reported at offset 0, as
/// `small_file` reports a wrong size.
fn wrong_size(version: u32, payload_bytes: usize, expected: usize) -> Error {
    let overhead = strata_kit::small_file::OVERHEAD_BYTES;
    Error::corruption(
        FILE_NAME,
        0,
        format!(
            "{} bytes, expected {} for format version {version}",
            payload_bytes + overhead,
            expected + overhead
        ),
    )
}

pub fn load(storage: &dyn Storage) -> Result<Option<Meta>> {
    match format().load(storage, FILE_NAME)? {
        Some((version, payload)) => from_payload(version, &payload).map(Some),
        None => Ok(None),
    }
}

pub fn store(storage: &dyn Storage, meta: &Meta) -> Result<()> {
    format().store(storage, FILE_NAME, VERSION, &payload(meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Meta {
        Meta {
            table_kind: 1,
            committed_lsn: 0x0102_0304_0506_0708,
            table_log: Some(LogMark { tree_version: 0x1112_1314_1516_1718, synced_bytes: 0x2122_2324 }),
        }
    }

    #[test]
    fn layout_matches_format_doc() {
        let bytes = encode(&sample());
        assert_eq!(bytes.len(), 44);
        assert_eq!(&bytes[0..8], b"STRFLXDB");
        assert_eq!(&bytes[8..12], &2u32.to_le_bytes());
        assert_eq!(&bytes[12..16], &1u32.to_le_bytes());
        assert_eq!(&bytes[16..24], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&bytes[24..32], &0x1112_1314_1516_1718u64.to_le_bytes());
        assert_eq!(&bytes[32..40], &0x2122_2324u64.to_le_bytes());
        assert_eq!(&bytes[40..44], &crc32c::crc32c(&bytes[..40]).to_le_bytes());
        assert_eq!(decode(&bytes).unwrap(), sample());
        let naive = Meta { table_kind: 0, committed_lsn: 5, table_log: None };
        let bytes = encode(&naive);
        assert_eq!(&bytes[24..40], &[0; 16]);
        assert_eq!(decode(&bytes).unwrap(), naive);
    }

    /// Stores written before the log mark (version 1, 28 bytes) still open, without a mark.
    #[test]
    fn version_1_records_still_decode_without_a_log_mark() {
        let mut bytes = b"STRFLXDB".to_vec();
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&77u64.to_le_bytes());
        let crc = crc32c::crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
        let meta = decode(&bytes).unwrap();
        assert_eq!(meta, Meta { table_kind: 1, committed_lsn: 77, table_log: None });
    }

    /// A checksum-valid record whose size does not match its version is corruption.
    #[test]
    fn a_size_that_does_not_match_the_version_is_corruption() {
        let v2 = encode(&sample());
        let as_v1 = format().encode(VERSION_1, &v2[12..40]);
        assert!(matches!(decode(&as_v1), Err(Error::Corruption { .. })));
        let short_v2 = format().encode(VERSION, &v2[12..24]);
        assert!(matches!(decode(&short_v2), Err(Error::Corruption { .. })));
    }

    #[test]
    fn damage_is_reported() {
        let bytes = encode(&sample());
        for i in 0..bytes.len() * 8 {
            let mut bad = bytes.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(decode(&bad).is_err());
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err());
        }
    }
}
