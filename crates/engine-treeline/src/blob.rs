//! Blob runs: values too large for a page (docs/format/treeline.md, "Blob runs"). A run is
//! consecutive pages of `treeline-data` holding a header, the key and the value, written once in
//! one sequential write and read back in one; the page record keeps a 20-byte [`BlobRef`].

use strata_core::{Error, Result, Value};

use crate::free_space::PageId;
use crate::page::layout::put_bytes;
use crate::page::PageSize;

/// Largest value the engine accepts, at every page size.
pub const MAX_VALUE_BYTES: usize = 16 << 20;

/// Run header offsets.
pub const CRC: usize = 0;
pub const MAGIC: usize = 4;
pub const VERSION: usize = 6;
pub const RESERVED_A: usize = 7;
pub const KEY_LEN: usize = 8;
pub const RESERVED_B: usize = 10;
pub const VALUE_LEN: usize = 12;
pub const BLOB_ID: usize = 16;
pub const RESERVED_C: usize = 24;
pub const HEADER_LEN: usize = 32;

pub const MAGIC_BYTES: [u8; 2] = *b"TB";
pub const FORMAT_VERSION: u8 = 1;

/// Reference offsets (the value bytes of a blob record on its page).
pub const REF_FIRST_PAGE: usize = 0;
pub const REF_VALUE_LEN: usize = 8;
pub const REF_BLOB_ID: usize = 12;
pub const REF_LEN: usize = 20;

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
    pub blob_id: u64,
}

/// Pages a run of a `key_len`-byte key and a `value_len`-byte value occupies.
pub fn run_pages(size: PageSize, key_len: usize, value_len: usize) -> u64 {
    (HEADER_LEN + key_len + value_len).div_ceil(size.bytes()) as u64
}

/// Whether a record goes to a blob run: its key and value exceed the inline limit.
pub fn needs_blob(size: PageSize, key_len: usize, value_len: usize) -> bool {
    key_len + value_len > size.max_record_bytes()
}

impl BlobRef {
    pub fn encode(&self) -> [u8; REF_LEN] {
        let mut out = [0u8; REF_LEN];
        put_bytes(&mut out, REF_FIRST_PAGE, &self.first_page.to_le_bytes());
        put_bytes(&mut out, REF_VALUE_LEN, &self.value_len.to_le_bytes());
        put_bytes(&mut out, REF_BLOB_ID, &self.blob_id.to_le_bytes());
        out
    }

    /// Decodes reference bytes; `Err(offset, what)` names the offending field within them.
    pub fn decode(bytes: &[u8]) -> std::result::Result<BlobRef, (usize, &'static str)> {
        if bytes.len() != REF_LEN {
            return Err((0, "a blob reference is not 20 bytes"));
        }
        let first_page = strata_core::le_bytes::u64_at(bytes, REF_FIRST_PAGE).unwrap_or(0);
        let value_len = strata_core::le_bytes::u32_at(bytes, REF_VALUE_LEN).unwrap_or(0);
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
        Ok(BlobRef { first_page, value_len, blob_id })
    }

    /// Pages of the run it references, for `key_len`-byte keys.
    pub fn pages(&self, size: PageSize, key_len: usize) -> u64 {
        run_pages(size, key_len, self.value_len as usize)
    }
}

/// The bytes of a run holding `key` and `value` under `blob_id`, padded to whole pages.
pub fn encode_run(size: PageSize, key: &[u8], value: &[u8], blob_id: u64) -> Vec<u8> {
    let pages = run_pages(size, key.len(), value.len()) as usize;
    let mut out = vec![0u8; pages * size.bytes()];
    put_bytes(&mut out, MAGIC, &MAGIC_BYTES);
    put_bytes(&mut out, VERSION, &[FORMAT_VERSION]);
    put_bytes(&mut out, KEY_LEN, &(key.len() as u16).to_le_bytes());
    put_bytes(&mut out, VALUE_LEN, &(value.len() as u32).to_le_bytes());
    put_bytes(&mut out, BLOB_ID, &blob_id.to_le_bytes());
    put_bytes(&mut out, HEADER_LEN, key);
    let value_at = HEADER_LEN + key.len();
    put_bytes(&mut out, value_at, value);
    let crc = crc32c::crc32c(out.get(MAGIC..value_at + value.len()).unwrap_or_default());
    put_bytes(&mut out, CRC, &crc.to_le_bytes());
    out
}

/// The value of a run read as `bytes` from file offset `run_offset` of `file`, checked against
/// the reference `blob` of record `key`, in `bytes`' own allocation. Never panics on any input.
pub fn decode_run(
    mut bytes: Vec<u8>,
    key: &[u8],
    blob: &BlobRef,
    file: &str,
    run_offset: u64,
) -> Result<Value> {
    let (start, end) = check_run(&bytes, key, blob, file, run_offset)?;
    bytes.truncate(end);
    bytes.drain(..start);
    Ok(bytes)
}

/// Checks a run (see `decode_run`); returns where its value starts and ends in `bytes`.
fn check_run(
    bytes: &[u8],
    key: &[u8],
    blob: &BlobRef,
    file: &str,
    run_offset: u64,
) -> Result<(usize, usize)> {
    let bad = |at: usize, what: String| Error::corruption(file, run_offset + at as u64, what);
    let u16_at = |at: usize| crate::page::layout::u16_at(bytes, at).unwrap_or(0);
    let u32_at = |at: usize| strata_core::le_bytes::u32_at(bytes, at).unwrap_or(0);
    let u64_at = |at: usize| strata_core::le_bytes::u64_at(bytes, at).unwrap_or(0);
    if bytes.len() < HEADER_LEN {
        return Err(bad(0, "blob run shorter than its header".into()));
    }
    if bytes.get(MAGIC..VERSION) != Some(&MAGIC_BYTES[..]) {
        return Err(bad(MAGIC, "not a blob run (bad magic)".into()));
    }
    let key_len = usize::from(u16_at(KEY_LEN));
    let value_len = u32_at(VALUE_LEN) as usize;
    let end = HEADER_LEN + key_len + value_len;
    let Some(covered) = bytes.get(MAGIC..end) else {
        return Err(bad(VALUE_LEN, format!("blob of {key_len} + {value_len} bytes runs past its pages")));
    };
    if crc32c::crc32c(covered) != u32_at(CRC) {
        return Err(bad(CRC, "blob run checksum mismatch".into()));
    }
    if bytes.get(VERSION) != Some(&FORMAT_VERSION) {
        return Err(bad(VERSION, "unknown blob run version".into()));
    }
    let reserved_zero =
        bytes.get(RESERVED_A) == Some(&0) && u16_at(RESERVED_B) == 0 && u64_at(RESERVED_C) == 0;
    if !reserved_zero {
        return Err(bad(RESERVED_A, "blob run reserved bytes are not zero".into()));
    }
    if bytes.get(HEADER_LEN..HEADER_LEN + key_len) != Some(key) {
        return Err(bad(HEADER_LEN, "blob run holds another key than its reference's record".into()));
    }
    if value_len != blob.value_len as usize || u64_at(BLOB_ID) != blob.blob_id {
        return Err(bad(BLOB_ID, "blob run is not the one its reference names (length or id)".into()));
    }
    Ok((HEADER_LEN + key_len, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "treeline-data";

    fn sample() -> (Vec<u8>, Vec<u8>, BlobRef, Vec<u8>) {
        let key = b"key-1".to_vec();
        let value: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let blob = BlobRef { first_page: 9, value_len: 5000, blob_id: 0x1122_3344_5566_7788 };
        let run = encode_run(PageSize::DEFAULT, &key, &value, blob.blob_id);
        (key, value, blob, run)
    }

    /// docs/format/treeline.md, "Blob runs": every field at its documented offset.
    #[test]
    fn offsets() {
        let (key, value, blob, run) = sample();
        assert_eq!(run.len(), 2 * 4096, "32 + 5 + 5000 bytes take two pages");
        assert_eq!(&run[4..6], b"TB");
        assert_eq!(run[6], 1);
        assert_eq!(&run[8..10], &5u16.to_le_bytes());
        assert_eq!(&run[12..16], &5000u32.to_le_bytes());
        assert_eq!(&run[16..24], &blob.blob_id.to_le_bytes());
        assert_eq!(&run[32..37], &key[..]);
        assert_eq!(&run[37..5037], &value[..]);
        assert!(run[5037..].iter().all(|&b| b == 0));
        assert_eq!(&run[0..4], &crc32c::crc32c(&run[4..5037]).to_le_bytes());
        let r = blob.encode();
        assert_eq!(&r[0..8], &9u64.to_le_bytes());
        assert_eq!(&r[8..12], &5000u32.to_le_bytes());
        assert_eq!(&r[12..20], &blob.blob_id.to_le_bytes());
        assert_eq!(BlobRef::decode(&r), Ok(blob));
        assert_eq!(decode_run(run.clone(), &key, &blob, FILE, 0).unwrap(), value);
    }

    #[test]
    fn every_damaged_header_byte_is_corruption_at_the_run() {
        let (key, _, blob, run) = sample();
        for at in 0..HEADER_LEN + key.len() + 40 {
            let mut damaged = run.clone();
            damaged[at] ^= 0x40;
            let err = decode_run(damaged, &key, &blob, FILE, 8192).unwrap_err();
            assert!(
                matches!(&err, Error::Corruption { file, offset, .. } if file == FILE && (8192..8192 + 32).contains(offset)),
                "byte {at}: {err:?}"
            );
        }
        for len in 0..run.len() / 2 {
            assert!(decode_run(run[..len].to_vec(), &key, &blob, FILE, 0).is_err(), "{len}");
        }
    }

    #[test]
    fn a_run_of_another_key_length_or_id_is_refused() {
        let (key, _, blob, run) = sample();
        assert!(decode_run(run.clone(), b"key-2", &blob, FILE, 0).is_err());
        assert!(decode_run(run.clone(), &key, &BlobRef { value_len: 4999, ..blob }, FILE, 0).is_err());
        assert!(decode_run(run.clone(), &key, &BlobRef { blob_id: 7, ..blob }, FILE, 0).is_err());
    }

    #[test]
    fn references_with_impossible_fields_are_refused() {
        let blob = BlobRef { first_page: 3, value_len: 2000, blob_id: 1 };
        assert!(BlobRef::decode(&BlobRef { first_page: 0, ..blob }.encode()).is_err());
        assert!(BlobRef::decode(&BlobRef { blob_id: 0, ..blob }.encode()).is_err());
        assert!(
            BlobRef::decode(&BlobRef { value_len: (MAX_VALUE_BYTES + 1) as u32, ..blob }.encode()).is_err()
        );
        assert!(BlobRef::decode(&blob.encode()[..19]).is_err());
    }

    #[test]
    fn run_sizes() {
        let size = PageSize::DEFAULT;
        assert_eq!(run_pages(size, 8, 4096 - 40), 1);
        assert_eq!(run_pages(size, 8, 4096 - 39), 2);
        assert_eq!(run_pages(size, 16, 1 << 20), 257);
        assert!(!needs_blob(size, 8, 1742 - 8));
        assert!(needs_blob(size, 8, 1742 - 7));
    }
}
