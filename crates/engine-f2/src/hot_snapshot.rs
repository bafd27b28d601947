//! The hot-index snapshot `f2-hot-index` (docs/format/f2-logs.md, "Hot-index snapshot"): written
//! at `close` after the final checkpoint, so the next open loads the hot index instead of
//! scanning the whole hot log. It is an optimization only: it is used when it matches the
//! checkpoint exactly (WAL position, hot-log range, bucket count) and every check passes;
//! anything else — missing, stale, damaged — means "scan the hot log instead".
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::sync::Arc;

use strata_core::le_bytes::{u32_at, u64_at};
use strata_core::Result;
use strata_io::{OpenOptions, Storage, StorageFile};

pub const FILE_NAME: &str = "f2-hot-index";
const MAGIC: &[u8; 8] = b"STRF2HI1";
const FORMAT_VERSION: u32 = 1;
pub const HEADER_BYTES: usize = 64;
/// bucket u32, tag u16, address 6 bytes (all little-endian).
pub const ENTRY_BYTES: usize = 12;
const WRITE_BUFFER_BYTES: usize = 1 << 20;
const TAG_LIMIT: u64 = 1 << 14;

/// What a snapshot must match to be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotKey {
    pub wal_lsn: u64,
    pub hot_begin: u64,
    pub hot_tail: u64,
    pub bucket_count: u64,
}

pub fn tmp_name() -> String {
    format!("{FILE_NAME}.tmp")
}

/// Streams entries into `f2-hot-index.tmp`; `finish` writes the header and renames it.
pub struct Writer {
    file: Arc<dyn StorageFile>,
    buffer: Vec<u8>,
    offset: u64,
    body_crc: u32,
    count: u64,
}

impl Writer {
    pub fn create(storage: &dyn Storage) -> Result<Writer> {
        let tmp = tmp_name();
        if storage.exists(&tmp)? {
            storage.remove(&tmp)?;
        }
        let file = storage.open(&tmp, OpenOptions::create())?;
        Ok(Writer {
            file,
            buffer: Vec::with_capacity(WRITE_BUFFER_BYTES),
            offset: HEADER_BYTES as u64,
            body_crc: 0,
            count: 0,
        })
    }

    pub fn push(&mut self, bucket: u64, tag: u64, address: u64) -> Result<()> {
        let bucket = u32::try_from(bucket)
            .map_err(|_| strata_core::Error::invalid("hot index too large for its snapshot format"))?;
        self.buffer.extend_from_slice(&bucket.to_le_bytes());
        self.buffer.extend_from_slice(&(tag as u16).to_le_bytes());
        self.buffer.extend_from_slice(address.to_le_bytes().get(..6).unwrap_or_default());
        self.count += 1;
        if self.buffer.len() + ENTRY_BYTES > WRITE_BUFFER_BYTES {
            self.flush_buffer()?;
        }
        Ok(())
    }

    fn flush_buffer(&mut self) -> Result<()> {
        self.body_crc = crc32c::crc32c_append(self.body_crc, &self.buffer);
        self.file.write_at(self.offset, &self.buffer)?;
        self.offset += self.buffer.len() as u64;
        self.buffer.clear();
        Ok(())
    }

    /// Writes the header, syncs, and renames the file into place (then syncs the directory).
    pub fn finish(mut self, storage: &dyn Storage, key: &SnapshotKey) -> Result<u64> {
        self.flush_buffer()?;
        let header = encode_header(key, self.count, self.body_crc);
        self.file.write_at(0, &header)?;
        self.file.sync()?;
        storage.rename(&tmp_name(), FILE_NAME)?;
        storage.sync_dir()?;
        Ok(self.count)
    }
}

fn encode_header(key: &SnapshotKey, count: u64, body_crc: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_BYTES);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&body_crc.to_le_bytes());
    for field in [key.wal_lsn, key.hot_begin, key.hot_tail, key.bucket_count, count] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.resize(HEADER_BYTES, 0);
    out
}

/// One decoded entry: (home bucket, tag, hot-log address).
pub type Entry = (u64, u64, u64);

/// The entries of a snapshot file's bytes if they are intact and match `key`; `None` otherwise.
pub fn decode_matching(bytes: &[u8], key: &SnapshotKey) -> Option<Vec<Entry>> {
    let header = bytes.get(..HEADER_BYTES)?;
    if header.get(..8)? != MAGIC || u32_at(header, 8)? != FORMAT_VERSION {
        return None;
    }
    let fields_end = 16 + 5 * 8;
    if u32_at(header, fields_end)? != crc32c::crc32c(header.get(..fields_end)?) {
        return None;
    }
    let stored = SnapshotKey {
        wal_lsn: u64_at(header, 16)?,
        hot_begin: u64_at(header, 24)?,
        hot_tail: u64_at(header, 32)?,
        bucket_count: u64_at(header, 40)?,
    };
    let count = u64_at(header, 48)?;
    let body = bytes.get(HEADER_BYTES..)?;
    if stored != *key
        || (body.len() as u64) != count.checked_mul(ENTRY_BYTES as u64)?
        || crc32c::crc32c(body) != u32_at(header, 12)?
    {
        return None;
    }
    let mut entries = Vec::with_capacity(usize::try_from(count).ok()?);
    for e in body.chunks_exact(ENTRY_BYTES) {
        let bucket = u64::from(u32_at(e, 0)?);
        let tag = u64::from(u16::from_le_bytes(e.get(4..6)?.try_into().ok()?));
        let mut address_bytes = [0u8; 8];
        address_bytes.get_mut(..6)?.copy_from_slice(e.get(6..12)?);
        let address = u64::from_le_bytes(address_bytes);
        let valid = bucket < key.bucket_count
            && tag < TAG_LIMIT
            && address >= key.hot_begin
            && address < key.hot_tail;
        if !valid {
            return None;
        }
        entries.push((bucket, tag, address));
    }
    Some(entries)
}

/// Reads `f2-hot-index` and returns its entries if it matches `key` and is intact.
pub fn load_matching(storage: &dyn Storage, key: &SnapshotKey) -> Result<Option<Vec<Entry>>> {
    if !storage.exists(FILE_NAME)? {
        return Ok(None);
    }
    let file = storage.open(FILE_NAME, OpenOptions::existing())?;
    let bytes = strata_io::read_all(file.as_ref())?;
    Ok(decode_matching(&bytes, key))
}

#[cfg(test)]
mod tests {
    use strata_io::MemStorage;

    use super::*;

    const KEY: SnapshotKey = SnapshotKey { wal_lsn: 9, hot_begin: 64, hot_tail: 1 << 20, bucket_count: 1024 };

    fn written(entries: &[Entry]) -> Vec<u8> {
        let storage = MemStorage::new();
        let mut w = Writer::create(&storage).unwrap();
        for &(b, t, a) in entries {
            w.push(b, t, a).unwrap();
        }
        assert_eq!(w.finish(&storage, &KEY).unwrap(), entries.len() as u64);
        assert!(!storage.exists(&tmp_name()).unwrap());
        let file = storage.open(FILE_NAME, OpenOptions::existing()).unwrap();
        strata_io::read_all(file.as_ref()).unwrap()
    }

    #[test]
    fn round_trip_and_documented_layout() {
        let entries = vec![(0, 0, 64), (1023, 0x3fff, (1 << 20) - 8), (5, 77, 4096)];
        let bytes = written(&entries);
        assert_eq!(bytes.len(), HEADER_BYTES + 3 * ENTRY_BYTES);
        assert_eq!(&bytes[..8], b"STRF2HI1");
        assert_eq!(u64_at(&bytes, 48), Some(3));
        assert_eq!(&bytes[HEADER_BYTES + 12..HEADER_BYTES + 16], &1023u32.to_le_bytes());
        assert_eq!(decode_matching(&bytes, &KEY), Some(entries));
    }

    #[test]
    fn stale_or_damaged_snapshots_are_not_used() {
        let bytes = written(&[(3, 4, 100), (7, 8, 200)]);
        for other in [
            SnapshotKey { wal_lsn: 10, ..KEY },
            SnapshotKey { hot_tail: 1 << 21, ..KEY },
            SnapshotKey { bucket_count: 2048, ..KEY },
        ] {
            assert_eq!(decode_matching(&bytes, &other), None);
        }
        for len in 0..bytes.len() {
            assert_eq!(decode_matching(&bytes[..len], &KEY), None);
        }
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            let decoded = decode_matching(&damaged, &KEY);
            // Bytes 60..64 are header padding; everything else is checked.
            if !(60..64).contains(&(bit / 8)) {
                assert_eq!(decoded, None, "bit {bit}");
            }
        }
        let out_of_range = written(&[(1024, 0, 100)]);
        assert_eq!(decode_matching(&out_of_range, &KEY), None);
    }
}
