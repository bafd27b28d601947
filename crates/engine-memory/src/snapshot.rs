//! Snapshot files of the memory engine's map (docs/format/memory-snapshot.md).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::le_bytes::{u32_at, u64_at};
use strata_core::{BatchOp, Error, Result};
use strata_io::{OpenOptions, Storage, StorageFile};
use strata_kit::memtable::MemTable;
use strata_kit::small_file::{CrcLayout, SmallFileFormat, OVERHEAD_BYTES};

const TRAILER_MAGIC: &[u8; 8] = b"STRMEMSE";
const FORMAT_VERSION: u32 = 1;
pub(crate) const HEADER_BYTES: usize = 32;
pub(crate) const BLOCK_HEADER_BYTES: usize = 8;
pub(crate) const TRAILER_BYTES: usize = 24;
const TARGET_BLOCK_BYTES: usize = 64 << 10;
const FILE_PREFIX: &str = "snapshot-";
const FILE_SUFFIX: &str = ".snap";

pub(crate) fn file_name(lsn: u64) -> String {
    format!("{FILE_PREFIX}{lsn:016}{FILE_SUFFIX}")
}

/// The lsn of a snapshot file name, `None` for other files (including `.tmp` leftovers).
pub(crate) fn parse_file_name(name: &str) -> Option<u64> {
    name.strip_prefix(FILE_PREFIX)?.strip_suffix(FILE_SUFFIX)?.parse().ok()
}

/// The header: `magic | version | crc32c of bytes 0..12 and 16..32 | lsn u64 | 8 reserved
/// zero bytes`.
fn header_format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRMEMS1",
        versions: FORMAT_VERSION..=FORMAT_VERSION,
        crc: CrcLayout::AfterVersionOverRest,
        payload_bytes: Some(HEADER_BYTES - OVERHEAD_BYTES),
    }
}

fn encode_header(lsn: u64) -> Vec<u8> {
    let mut payload = [0u8; HEADER_BYTES - OVERHEAD_BYTES];
    if let Some(field) = payload.get_mut(..8) {
        field.copy_from_slice(&lsn.to_le_bytes());
    }
    header_format().encode(FORMAT_VERSION, &payload)
}

/// Streams a map into a snapshot file: blocks are written as they fill, so memory stays bounded.
pub(crate) struct SnapshotWriter {
    file: std::sync::Arc<dyn StorageFile>,
    offset: u64,
    block: Vec<u8>,
    entry_count: u64,
    block_count: u32,
}

impl SnapshotWriter {
    pub(crate) fn create(storage: &dyn Storage, tmp_name: &str, lsn: u64) -> Result<Self> {
        if storage.exists(tmp_name)? {
            storage.remove(tmp_name)?;
        }
        let file = storage.open(tmp_name, OpenOptions::create())?;
        file.write_at(0, &encode_header(lsn))?;
        Ok(SnapshotWriter {
            file,
            offset: HEADER_BYTES as u64,
            block: Vec::with_capacity(TARGET_BLOCK_BYTES + 1024),
            entry_count: 0,
            block_count: 0,
        })
    }

    pub(crate) fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.block.extend_from_slice(&(key.len() as u32).to_le_bytes());
        self.block.extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.block.extend_from_slice(key);
        self.block.extend_from_slice(value);
        self.entry_count += 1;
        if self.block.len() >= TARGET_BLOCK_BYTES {
            self.write_block()?;
        }
        Ok(())
    }

    fn write_block(&mut self) -> Result<()> {
        let mut out = Vec::with_capacity(BLOCK_HEADER_BYTES + self.block.len());
        out.extend_from_slice(&(self.block.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32c::crc32c(&self.block).to_le_bytes());
        out.extend_from_slice(&self.block);
        self.file.write_at(self.offset, &out)?;
        self.offset += out.len() as u64;
        self.block.clear();
        self.block_count += 1;
        Ok(())
    }

    /// Writes the last block and the trailer, and syncs the file. Returns the file size.
    pub(crate) fn finish(mut self) -> Result<u64> {
        if !self.block.is_empty() {
            self.write_block()?;
        }
        let mut trailer = [0u8; TRAILER_BYTES];
        trailer[0..8].copy_from_slice(TRAILER_MAGIC);
        trailer[8..16].copy_from_slice(&self.entry_count.to_le_bytes());
        trailer[16..20].copy_from_slice(&self.block_count.to_le_bytes());
        let crc = crc32c::crc32c(&trailer[0..20]);
        trailer[20..24].copy_from_slice(&crc.to_le_bytes());
        self.file.write_at(self.offset, &trailer)?;
        self.file.sync()?;
        Ok(self.offset + TRAILER_BYTES as u64)
    }
}

/// What a snapshot file holds.
pub(crate) struct LoadedSnapshot {
    pub lsn: u64,
    pub entries: MemTable,
    pub file_bytes: u64,
}

/// Reads and verifies a whole snapshot file.
pub(crate) fn load(storage: &dyn Storage, name: &str) -> Result<LoadedSnapshot> {
    let file = storage.open(name, OpenOptions::existing())?;
    let bytes = strata_io::read_all(file.as_ref())?;
    decode(name, &bytes)
}

pub(crate) fn decode(name: &str, bytes: &[u8]) -> Result<LoadedSnapshot> {
    let bad = |offset: usize, what: &str| Error::corruption(name, offset as u64, what);
    if bytes.len() < HEADER_BYTES + TRAILER_BYTES {
        return Err(bad(0, "snapshot is truncated"));
    }
    let header = bytes.get(..HEADER_BYTES).ok_or_else(|| bad(0, "short header"))?;
    let lsn = u64_at(header_format().decode(name, header)?.payload, 0).unwrap_or_default();

    let trailer_at = bytes.len() - TRAILER_BYTES;
    let trailer = bytes.get(trailer_at..).ok_or_else(|| bad(trailer_at, "short trailer"))?;
    if trailer.get(0..8) != Some(TRAILER_MAGIC.as_slice())
        || u32_at(trailer, 20) != trailer.get(0..20).map(crc32c::crc32c)
    {
        return Err(bad(trailer_at, "snapshot trailer is missing or damaged"));
    }
    let expected_entries = u64_at(trailer, 8).unwrap_or_default();
    let expected_blocks = u32_at(trailer, 16).unwrap_or_default();

    let mut entries = MemTable::default();
    let mut last_key: Option<Vec<u8>> = None;
    let mut pos = HEADER_BYTES;
    let mut blocks = 0u32;
    while pos < trailer_at {
        let block_at = pos;
        let len = u32_at(bytes, pos).ok_or_else(|| bad(block_at, "truncated block header"))? as usize;
        let crc = u32_at(bytes, pos + 4).ok_or_else(|| bad(block_at, "truncated block header"))?;
        let start = pos + BLOCK_HEADER_BYTES;
        let payload = start
            .checked_add(len)
            .filter(|&end| end <= trailer_at)
            .and_then(|end| bytes.get(start..end))
            .ok_or_else(|| bad(block_at, "block length runs past the trailer"))?;
        if crc32c::crc32c(payload) != crc {
            return Err(bad(block_at, "block checksum mismatch"));
        }
        let mut p = 0;
        while p < payload.len() {
            let entry_at = start + p;
            let (Some(klen), Some(vlen)) = (u32_at(payload, p), u32_at(payload, p + 4)) else {
                return Err(bad(entry_at, "truncated entry header"));
            };
            let kstart = p + 8;
            let kend = kstart.checked_add(klen as usize);
            let vend = kend.and_then(|k| k.checked_add(vlen as usize));
            let (Some(key), Some(value)) = (
                kend.and_then(|k| payload.get(kstart..k)),
                kend.zip(vend).and_then(|(k, v)| payload.get(k..v)),
            ) else {
                return Err(bad(entry_at, "entry runs past its block"));
            };
            if last_key.as_deref().is_some_and(|last| last >= key) {
                return Err(bad(entry_at, "keys are not strictly increasing"));
            }
            last_key = Some(key.to_vec());
            entries.apply_without_tombstones(BatchOp::Put { key: key.to_vec(), value: value.to_vec() });
            p = vend.unwrap_or(payload.len());
        }
        blocks += 1;
        pos = start + len;
    }
    if blocks != expected_blocks || entries.len() as u64 != expected_entries {
        return Err(bad(trailer_at, "entry or block count does not match the trailer"));
    }
    Ok(LoadedSnapshot { lsn, entries, file_bytes: bytes.len() as u64 })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use strata_core::{Key, Value};
    use strata_io::MemStorage;

    use super::*;

    fn write(storage: &MemStorage, lsn: u64, map: &BTreeMap<Key, Value>) -> Vec<u8> {
        let mut w = SnapshotWriter::create(storage, "s.tmp", lsn).unwrap();
        for (k, v) in map {
            w.add(k, v).unwrap();
        }
        w.finish().unwrap();
        storage
            .open("s.tmp", OpenOptions::existing())
            .map(|f| strata_io::read_all(f.as_ref()).unwrap())
            .unwrap()
    }

    fn sample() -> BTreeMap<Key, Value> {
        (0..3000u32).map(|i| (format!("key{i:06}").into_bytes(), vec![i as u8; (i % 97) as usize])).collect()
    }

    #[test]
    fn round_trip_multi_block() {
        let storage = MemStorage::new();
        let map = sample();
        let bytes = write(&storage, 42, &map);
        let loaded = decode("s", &bytes).unwrap();
        assert_eq!(loaded.lsn, 42);
        assert!(loaded.entries.iter().eq(map.iter().map(|(k, v)| (&k[..], Some(&v[..])))));
        let trailer = &bytes[bytes.len() - TRAILER_BYTES..];
        assert!(u32::from_le_bytes(trailer[16..20].try_into().unwrap()) > 1, "expected several blocks");
    }

    /// Checks the offsets documented in docs/format/memory-snapshot.md.
    #[test]
    fn layout_matches_format_doc() {
        let storage = MemStorage::new();
        let map: BTreeMap<Key, Value> = [(b"ab".to_vec(), b"xyz".to_vec())].into();
        let b = write(&storage, 7, &map);
        assert_eq!(&b[0..8], b"STRMEMS1");
        assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 1);
        assert_eq!(u64::from_le_bytes(b[16..24].try_into().unwrap()), 7);
        let crc = crc32c::crc32c_append(crc32c::crc32c(&b[0..12]), &b[16..32]);
        assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), crc);
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 13);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), crc32c::crc32c(&b[40..53]));
        assert_eq!(&b[40..44], &2u32.to_le_bytes());
        assert_eq!(&b[44..48], &3u32.to_le_bytes());
        assert_eq!(&b[48..53], b"abxyz");
        assert_eq!(&b[53..61], b"STRMEMSE");
        assert_eq!(u64::from_le_bytes(b[61..69].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[69..73].try_into().unwrap()), 1);
        assert_eq!(u32::from_le_bytes(b[73..77].try_into().unwrap()), crc32c::crc32c(&b[53..73]));
        assert_eq!(b.len(), 77);
    }

    #[test]
    fn every_bit_flip_and_truncation_is_detected() {
        let storage = MemStorage::new();
        let map: BTreeMap<Key, Value> = (0..20u8).map(|i| (vec![b'k', i], vec![i; usize::from(i)])).collect();
        let good = write(&storage, 3, &map);
        for bit in 0..good.len() * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let err =
                decode("snap", &bad).err().unwrap_or_else(|| panic!("flip of bit {bit} went unnoticed"));
            assert!(matches!(err, Error::Corruption { .. } | Error::Incompatible(_)), "{err}");
        }
        for len in 0..good.len() {
            assert!(decode("snap", &good[..len]).is_err());
        }
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(parse_file_name(&file_name(99)), Some(99));
        assert_eq!(parse_file_name("snapshot-0000000000000099.snap.tmp"), None);
        assert_eq!(parse_file_name("wal-0000000000000001.log"), None);
    }
}
