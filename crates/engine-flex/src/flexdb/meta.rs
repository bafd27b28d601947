//! `flexdb-meta`: the commit record (docs/format/flexdb.md): which table file kind the store uses
//! and up to which WAL lsn the table file holds every write.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::le_bytes::{u32_at, u64_at};
use strata_core::{Error, Result};
use strata_io::Storage;
use strata_kit::small_file::{CrcLayout, SmallFileFormat};

pub const FILE_NAME: &str = "flexdb-meta";
const VERSION: u32 = 1;
const PAYLOAD_BYTES: usize = 12;

/// `magic | version | table_kind u32 | committed_lsn u64 | crc32c of bytes 0..24`: 28 bytes.
fn format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRFLXDB",
        versions: VERSION..=VERSION,
        crc: CrcLayout::Trailing,
        payload_bytes: Some(PAYLOAD_BYTES),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// 0 = naive baseline, 1 = FlexFile.
    pub table_kind: u32,
    pub committed_lsn: u64,
}

fn payload(meta: &Meta) -> [u8; PAYLOAD_BYTES] {
    let mut out = [0u8; PAYLOAD_BYTES];
    let (kind, lsn) = out.split_at_mut(4);
    kind.copy_from_slice(&meta.table_kind.to_le_bytes());
    lsn.copy_from_slice(&meta.committed_lsn.to_le_bytes());
    out
}

/// The file's bytes (tests check them against docs/format/flexdb.md).
#[cfg(test)]
pub fn encode(meta: &Meta) -> Vec<u8> {
    format().encode(VERSION, &payload(meta))
}

#[cfg(test)]
pub fn decode(bytes: &[u8]) -> Result<Meta> {
    from_payload(format().decode(FILE_NAME, bytes)?.payload)
}

fn from_payload(payload: &[u8]) -> Result<Meta> {
    match (u32_at(payload, 0), u64_at(payload, 4)) {
        (Some(table_kind), Some(committed_lsn)) => Ok(Meta { table_kind, committed_lsn }),
        // Unreachable: the format fixes the payload size.
        _ => Err(Error::corruption(FILE_NAME, 12, "truncated commit record")),
    }
}

pub fn load(storage: &dyn Storage) -> Result<Option<Meta>> {
    match format().load(storage, FILE_NAME)? {
        Some((_, payload)) => from_payload(&payload).map(Some),
        None => Ok(None),
    }
}

pub fn store(storage: &dyn Storage, meta: &Meta) -> Result<()> {
    format().store(storage, FILE_NAME, VERSION, &payload(meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_format_doc() {
        let bytes = encode(&Meta { table_kind: 1, committed_lsn: 0x0102_0304_0506_0708 });
        assert_eq!(bytes.len(), 28);
        assert_eq!(&bytes[0..8], b"STRFLXDB");
        assert_eq!(&bytes[8..12], &1u32.to_le_bytes());
        assert_eq!(&bytes[12..16], &1u32.to_le_bytes());
        assert_eq!(&bytes[16..24], &0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(&bytes[24..28], &crc32c::crc32c(&bytes[..24]).to_le_bytes());
        assert_eq!(decode(&bytes).unwrap().committed_lsn, 0x0102_0304_0506_0708);
    }

    #[test]
    fn damage_is_reported() {
        let bytes = encode(&Meta { table_kind: 0, committed_lsn: 9 });
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
