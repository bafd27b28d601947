//! `flexdb-meta`: the commit record (docs/format/flexdb.md): which table file kind the store uses
//! and up to which WAL lsn the table file holds every write.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::{Error, Result};
use strata_io::{read_all, write_file_atomic, OpenOptions, Storage};

pub const FILE_NAME: &str = "flexdb-meta";
const MAGIC: &[u8; 8] = b"STRFLXDB";
const VERSION: u32 = 1;
const META_BYTES: usize = 28;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// 0 = naive baseline, 1 = FlexFile.
    pub table_kind: u32,
    pub committed_lsn: u64,
}

pub fn encode(meta: &Meta) -> Vec<u8> {
    let mut out = Vec::with_capacity(META_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&meta.table_kind.to_le_bytes());
    out.extend_from_slice(&meta.committed_lsn.to_le_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

pub fn decode(bytes: &[u8]) -> Result<Meta> {
    let bad = |offset: u64, what: &str| Error::corruption(FILE_NAME, offset, what);
    if bytes.len() != META_BYTES {
        return Err(bad(0, &format!("{} bytes, expected {META_BYTES}", bytes.len())));
    }
    let u32_at = |at: usize| {
        bytes.get(at..at + 4).and_then(|b| <[u8; 4]>::try_from(b).ok()).map_or(0, u32::from_le_bytes)
    };
    if crc32c::crc32c(bytes.get(..24).unwrap_or_default()) != u32_at(24) {
        return Err(bad(24, "checksum mismatch"));
    }
    if bytes.get(..8) != Some(MAGIC.as_slice()) {
        return Err(bad(0, "bad magic"));
    }
    if u32_at(8) != VERSION {
        return Err(Error::Incompatible(format!(
            "{FILE_NAME} has format version {}, this build reads {VERSION}",
            u32_at(8)
        )));
    }
    let lsn = bytes.get(16..24).and_then(|b| <[u8; 8]>::try_from(b).ok()).map_or(0, u64::from_le_bytes);
    Ok(Meta { table_kind: u32_at(12), committed_lsn: lsn })
}

pub fn load(storage: &dyn Storage) -> Result<Option<Meta>> {
    if !storage.exists(FILE_NAME)? {
        return Ok(None);
    }
    decode(&read_all(storage.open(FILE_NAME, OpenOptions::existing())?.as_ref())?).map(Some)
}

pub fn store(storage: &dyn Storage, meta: &Meta) -> Result<()> {
    write_file_atomic(storage, FILE_NAME, &encode(meta))
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
