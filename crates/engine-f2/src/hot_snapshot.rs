//! The hot-index snapshot `f2-hot-index` (docs/format/f2-logs.md, "Hot-index snapshot"): written
//! after every checkpoint (the one `close` takes included), so the next open, clean or after a
//! crash, loads the hot index instead of scanning the whole hot log. It is an optimization only: it is used when it matches the
//! checkpoint exactly (WAL position, hot-log range, bucket count) and every check passes;
//! anything else — missing, stale, damaged — means "scan the hot log instead".
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::sync::Arc;

use strata_core::le_bytes::{u32_at, u64_at};
use strata_core::Result;
use strata_io::{OpenOptions, Storage, StorageFile};
use strata_kit::small_file::{CrcLayout, SmallFileFormat, OVERHEAD_BYTES};

pub const FILE_NAME: &str = "f2-hot-index";
const FORMAT_VERSION: u32 = 1;
pub const HEADER_BYTES: usize = 64;
/// The header's checksummed part: `magic | version | body_crc u32 | five u64 fields | crc32c of
/// bytes 0..56`; zero padding follows up to `HEADER_BYTES`.
const CHECKED_HEADER_BYTES: usize = OVERHEAD_BYTES + HEADER_PAYLOAD_BYTES;
const HEADER_PAYLOAD_BYTES: usize = 4 + 5 * 8;

fn header_format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRF2HI1",
        versions: FORMAT_VERSION..=FORMAT_VERSION,
        crc: CrcLayout::Trailing,
        payload_bytes: Some(HEADER_PAYLOAD_BYTES),
    }
}
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

/// The snapshot file's size with `entries` entries.
pub fn file_bytes(entries: u64) -> u64 {
    HEADER_BYTES as u64 + entries * ENTRY_BYTES as u64
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
    let mut payload = Vec::with_capacity(HEADER_PAYLOAD_BYTES);
    payload.extend_from_slice(&body_crc.to_le_bytes());
    for field in [key.wal_lsn, key.hot_begin, key.hot_tail, key.bucket_count, count] {
        payload.extend_from_slice(&field.to_le_bytes());
    }
    let mut out = header_format().encode(FORMAT_VERSION, &payload);
    out.resize(HEADER_BYTES, 0);
    out
}

/// One decoded entry: (home bucket, tag, hot-log address).
pub type Entry = (u64, u64, u64);

/// Body bytes read at a time when loading: whole entries, so no entry straddles two reads.
const READ_CHUNK_BYTES: usize = ENTRY_BYTES * 64 * 1024;

/// The entry count and body checksum of a header that is intact and matches `key`.
fn check_header(header: &[u8], key: &SnapshotKey) -> Option<(u64, u32)> {
    // Anything wrong (damage, another version) only means "scan the hot log instead".
    let fields = header_format().decode(FILE_NAME, header.get(..CHECKED_HEADER_BYTES)?).ok()?.payload;
    let stored = SnapshotKey {
        wal_lsn: u64_at(fields, 4)?,
        hot_begin: u64_at(fields, 12)?,
        hot_tail: u64_at(fields, 20)?,
        bucket_count: u64_at(fields, 28)?,
    };
    (stored == *key).then_some((u64_at(fields, 36)?, u32_at(fields, 0)?))
}

/// One 12-byte entry, if it is in range for `key`.
fn decode_entry(e: &[u8], key: &SnapshotKey) -> Option<Entry> {
    let bucket = u64::from(u32_at(e, 0)?);
    let tag = u64::from(u16::from_le_bytes(e.get(4..6)?.try_into().ok()?));
    let mut address_bytes = [0u8; 8];
    address_bytes.get_mut(..6)?.copy_from_slice(e.get(6..12)?);
    let address = u64::from_le_bytes(address_bytes);
    let valid =
        bucket < key.bucket_count && tag < TAG_LIMIT && address >= key.hot_begin && address < key.hot_tail;
    valid.then_some((bucket, tag, address))
}

/// Feeds the entries of a snapshot of `len_bytes` (read through `read_at`) to `insert`, a chunk
/// at a time, and says whether the snapshot is intact and matches `key`. It stops at the first
/// thing wrong; the body checksum is known only at the end, so `false` can come after entries
/// were fed, and the caller must then discard them.
fn feed_matching(
    len_bytes: u64,
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> Result<()>,
    key: &SnapshotKey,
    insert: &mut dyn FnMut(Entry),
) -> Result<bool> {
    let mut header = [0u8; HEADER_BYTES];
    if len_bytes < HEADER_BYTES as u64 {
        return Ok(false);
    }
    read_at(0, &mut header)?;
    let Some((count, body_crc)) = check_header(&header, key) else { return Ok(false) };
    let body_bytes = len_bytes - HEADER_BYTES as u64;
    if count.checked_mul(ENTRY_BYTES as u64) != Some(body_bytes) {
        return Ok(false);
    }
    let mut chunk = vec![0u8; READ_CHUNK_BYTES.min(usize::try_from(body_bytes).unwrap_or(READ_CHUNK_BYTES))];
    let (mut offset, mut crc) = (HEADER_BYTES as u64, 0u32);
    while offset < len_bytes {
        let n = usize::try_from(len_bytes - offset).map_or(chunk.len(), |left| left.min(chunk.len()));
        let Some(bytes) = chunk.get_mut(..n) else { return Ok(false) };
        read_at(offset, bytes)?;
        crc = crc32c::crc32c_append(crc, bytes);
        for e in bytes.chunks_exact(ENTRY_BYTES) {
            match decode_entry(e, key) {
                Some(entry) => insert(entry),
                None => return Ok(false),
            }
        }
        offset += n as u64;
    }
    Ok(crc == body_crc)
}

/// Feeds the entries of `f2-hot-index` to `insert` when the file is there, intact and matches
/// `key`, reading it a chunk at a time (memory does not grow with the snapshot). Returns whether
/// it was used; when not, `insert` may have received entries of the unusable snapshot, which the
/// caller discards (see `feed_matching`).
pub fn load_matching(
    storage: &dyn Storage,
    key: &SnapshotKey,
    insert: &mut dyn FnMut(Entry),
) -> Result<bool> {
    if !storage.exists(FILE_NAME)? {
        return Ok(false);
    }
    let file = storage.open(FILE_NAME, OpenOptions::existing())?;
    feed_matching(file.len()?, &mut |offset, buf| file.read_at(offset, buf), key, insert)
}

#[cfg(test)]
mod tests {
    use strata_io::MemStorage;

    use super::*;

    const KEY: SnapshotKey = SnapshotKey { wal_lsn: 9, hot_begin: 64, hot_tail: 1 << 20, bucket_count: 1024 };

    /// `feed_matching` over a snapshot's bytes in memory.
    fn feed_bytes(bytes: &[u8], key: &SnapshotKey, insert: &mut dyn FnMut(Entry)) -> bool {
        let mut read_at = |offset: u64, buf: &mut [u8]| {
            let at = offset as usize;
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            Ok(())
        };
        feed_matching(bytes.len() as u64, &mut read_at, key, insert).unwrap()
    }

    /// The entries of a snapshot's bytes if they are intact and match `key`.
    fn decode_matching(bytes: &[u8], key: &SnapshotKey) -> Option<Vec<Entry>> {
        let mut entries = Vec::new();
        feed_bytes(bytes, key, &mut |e| entries.push(e)).then_some(entries)
    }

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

    /// Loading reads the body a chunk at a time: a snapshot of more entries than one chunk holds
    /// loads whole and in order, and a body checksum that fails only at the end refuses it after
    /// its entries were fed (which the caller must then discard).
    #[test]
    fn snapshots_larger_than_a_read_chunk_load_whole_and_a_late_checksum_failure_refuses_them() {
        let per_chunk = (READ_CHUNK_BYTES / ENTRY_BYTES) as u64;
        let entries: Vec<Entry> =
            (0..per_chunk + 5).map(|i| (i % 1024, i % 7, 64 + 8 * (i % 1000))).collect();
        let mut bytes = written(&entries);
        assert!(bytes.len() > HEADER_BYTES + READ_CHUNK_BYTES);
        assert_eq!(decode_matching(&bytes, &KEY), Some(entries));
        // The last entry's address moved to another in-range one: every entry decodes, the
        // checksum does not match.
        let last = bytes.len() - ENTRY_BYTES;
        bytes[last + 6] ^= 0x08;
        let mut fed = 0u64;
        assert!(!feed_bytes(&bytes, &KEY, &mut |_| fed += 1));
        assert_eq!(fed, per_chunk + 5, "all entries were fed before the checksum failed");
    }
}
