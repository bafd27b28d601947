//! Blob runs: values too large for a page (docs/format/treeline.md, "Blob runs"). A run is
//! consecutive pages of `treeline-data` holding the value alone, zero-padded to whole pages,
//! written once in one sequential write and read back in one; the page record keeps a 24-byte
//! [`BlobRef`] with the value's length and the checksum of its key and value. No header in the
//! run: a value of a whole number of pages (4 KiB, 64 KiB) takes exactly that many.

use strata_core::{Error, Result, Value};

use crate::free_space::PageId;
use crate::page::layout::put_bytes;
use crate::page::PageSize;

/// Largest value the engine accepts, at every page size.
pub const MAX_VALUE_BYTES: usize = 16 << 20;

/// Reference offsets (the value bytes of a blob record on its page).
pub const REF_FIRST_PAGE: usize = 0;
pub const REF_VALUE_LEN: usize = 8;
pub const REF_CRC: usize = 12;
pub const REF_BLOB_ID: usize = 16;
pub const REF_LEN: usize = 24;

/// A live blob run: its pages and the id its reference carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobSlot {
    pub pages: u64,
    pub blob_id: u64,
}

/// Live runs by first page (the checkpoint's blob table).
pub type BlobTable = std::collections::BTreeMap<PageId, BlobSlot>;

/// Where a record's value lives when it is not on its page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlobRef {
    pub first_page: PageId,
    pub value_len: u32,
    /// CRC-32C of the record's key followed by its value.
    pub crc: u32,
    pub blob_id: u64,
}

/// Pages a run of a `value_len`-byte value occupies.
pub fn run_pages(size: PageSize, value_len: usize) -> u64 {
    value_len.div_ceil(size.bytes()).max(1) as u64
}

/// Whether a record goes to a blob run: its key and value exceed the inline limit.
pub fn needs_blob(size: PageSize, key_len: usize, value_len: usize) -> bool {
    key_len + value_len > size.max_record_bytes()
}

/// The checksum a reference carries: CRC-32C of `key` then `value`.
pub fn checksum(key: &[u8], value: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(key), value)
}

impl BlobRef {
    pub fn encode(&self) -> [u8; REF_LEN] {
        let mut out = [0u8; REF_LEN];
        put_bytes(&mut out, REF_FIRST_PAGE, &self.first_page.to_le_bytes());
        put_bytes(&mut out, REF_VALUE_LEN, &self.value_len.to_le_bytes());
        put_bytes(&mut out, REF_CRC, &self.crc.to_le_bytes());
        put_bytes(&mut out, REF_BLOB_ID, &self.blob_id.to_le_bytes());
        out
    }

    /// Decodes reference bytes; `Err(offset, what)` names the offending field within them.
    pub fn decode(bytes: &[u8]) -> std::result::Result<BlobRef, (usize, &'static str)> {
        if bytes.len() != REF_LEN {
            return Err((0, "a blob reference is not 24 bytes"));
        }
        let first_page = strata_core::le_bytes::u64_at(bytes, REF_FIRST_PAGE).unwrap_or(0);
        let value_len = strata_core::le_bytes::u32_at(bytes, REF_VALUE_LEN).unwrap_or(0);
        let crc = strata_core::le_bytes::u32_at(bytes, REF_CRC).unwrap_or(0);
        let blob_id = strata_core::le_bytes::u64_at(bytes, REF_BLOB_ID).unwrap_or(0);
        if first_page == 0 {
            return Err((REF_FIRST_PAGE, "blob reference to page 0"));
        }
        if value_len as usize > MAX_VALUE_BYTES {
            return Err((REF_VALUE_LEN, "blob reference longer than 16 MiB"));
        }
        if blob_id == 0 {
            return Err((REF_BLOB_ID, "blob reference with id 0"));
        }
        Ok(BlobRef { first_page, value_len, crc, blob_id })
    }

    /// Pages of the run it references.
    pub fn pages(&self, size: PageSize) -> u64 {
        run_pages(size, self.value_len as usize)
    }
}

/// The bytes of a run holding `value`: the value, zero-padded to whole pages.
pub fn encode_run(size: PageSize, value: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; run_pages(size, value.len()) as usize * size.bytes()];
    put_bytes(&mut out, 0, value);
    out
}

/// The value of a run read as `bytes` from file offset `run_offset` of `file`, checked against
/// the reference `blob` of record `key` (its length and the checksum of key and value), in
/// `bytes`' own allocation. Never panics on any input.
pub fn decode_run(
    mut bytes: Vec<u8>,
    key: &[u8],
    blob: &BlobRef,
    file: &str,
    run_offset: u64,
) -> Result<Value> {
    let value_len = blob.value_len as usize;
    let Some(value) = bytes.get(..value_len) else {
        return Err(Error::corruption(
            file,
            run_offset,
            format!("blob run shorter than its {value_len}-byte value"),
        ));
    };
    if checksum(key, value) != blob.crc {
        return Err(Error::corruption(
            file,
            run_offset,
            "blob run checksum mismatch (damaged, or not the run its reference names)",
        ));
    }
    bytes.truncate(value_len);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "treeline-data";

    fn sample() -> (Vec<u8>, Vec<u8>, BlobRef, Vec<u8>) {
        let key = b"key-1".to_vec();
        let value: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let crc = checksum(&key, &value);
        let blob = BlobRef { first_page: 9, value_len: 5000, crc, blob_id: 0x1122_3344_5566_7788 };
        let run = encode_run(PageSize::DEFAULT, &value);
        (key, value, blob, run)
    }

    /// docs/format/treeline.md, "Blob runs": every field at its documented offset.
    #[test]
    fn offsets() {
        let (key, value, blob, run) = sample();
        assert_eq!(run.len(), 2 * 4096, "5000 bytes take two pages");
        assert_eq!(&run[..5000], &value[..]);
        assert!(run[5000..].iter().all(|&b| b == 0));
        let r = blob.encode();
        assert_eq!(&r[0..8], &9u64.to_le_bytes());
        assert_eq!(&r[8..12], &5000u32.to_le_bytes());
        assert_eq!(&r[12..16], &crc32c::crc32c(&[&key[..], &value[..]].concat()).to_le_bytes());
        assert_eq!(&r[16..24], &blob.blob_id.to_le_bytes());
        assert_eq!(BlobRef::decode(&r), Ok(blob));
        assert_eq!(decode_run(run.clone(), &key, &blob, FILE, 0).unwrap(), value);
        assert_eq!(
            encode_run(PageSize::DEFAULT, &[7; 4096]).len(),
            4096,
            "a page-sized value takes one page"
        );
    }

    #[test]
    fn every_damaged_byte_of_the_value_is_corruption_at_the_run() {
        let (key, _, blob, run) = sample();
        for at in (0..5000).step_by(37) {
            let mut damaged = run.clone();
            damaged[at] ^= 0x40;
            let err = decode_run(damaged, &key, &blob, FILE, 8192).unwrap_err();
            assert!(
                matches!(&err, Error::Corruption { file, offset, .. } if file == FILE && *offset == 8192),
                "byte {at}: {err:?}"
            );
        }
        for len in [0, 1, 4096, 4999] {
            assert!(decode_run(run[..len].to_vec(), &key, &blob, FILE, 0).is_err(), "{len}");
        }
    }

    #[test]
    fn a_run_of_another_key_or_length_is_refused() {
        let (key, _, blob, run) = sample();
        assert!(decode_run(run.clone(), b"key-2", &blob, FILE, 0).is_err());
        assert!(decode_run(run.clone(), &key, &BlobRef { value_len: 4999, ..blob }, FILE, 0).is_err());
        assert!(decode_run(run, &key, &BlobRef { crc: blob.crc ^ 1, ..blob }, FILE, 0).is_err());
    }

    #[test]
    fn references_with_impossible_fields_are_refused() {
        let blob = BlobRef { first_page: 3, value_len: 2000, crc: 5, blob_id: 1 };
        assert!(BlobRef::decode(&BlobRef { first_page: 0, ..blob }.encode()).is_err());
        assert!(BlobRef::decode(&BlobRef { blob_id: 0, ..blob }.encode()).is_err());
        assert!(
            BlobRef::decode(&BlobRef { value_len: (MAX_VALUE_BYTES + 1) as u32, ..blob }.encode()).is_err()
        );
        assert!(BlobRef::decode(&blob.encode()[..23]).is_err());
    }

    #[test]
    fn run_sizes() {
        let size = PageSize::DEFAULT;
        assert_eq!(run_pages(size, 4096), 1);
        assert_eq!(run_pages(size, 4097), 2);
        assert_eq!(run_pages(size, 1 << 20), 256);
        assert!(!needs_blob(size, 8, 1742 - 8));
        assert!(needs_blob(size, 8, 1742 - 7));
    }
}
