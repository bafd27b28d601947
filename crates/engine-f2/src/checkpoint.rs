//! The checkpoint file `f2-checkpoint` (docs/format/f2-logs.md, "Checkpoint").
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::le_bytes::u64_at;
use strata_core::{Error, Result};
use strata_io::Storage;
use strata_kit::small_file::{CrcLayout, SmallFileFormat, OVERHEAD_BYTES};

pub const FILE_NAME: &str = "f2-checkpoint";

pub fn tmp_name() -> String {
    format!("{FILE_NAME}.tmp")
}
/// Largest log page (and record) size; a checkpoint claiming more is damaged.
pub const MAX_PAGE_BYTES: u64 = 1 << 30;
/// 3: log records' checksums cover their address; 2 added the cold-index chunk entries' tag and
/// shared bit (docs/format/f2-logs.md). Older stores are refused (`Error::Incompatible`).
const FORMAT_VERSION: u32 = 3;
pub const CHECKPOINT_BYTES: usize = 112;
const FIELDS_OFFSET: usize = 16;

/// `magic | version | crc32c of bytes 16..112 | twelve u64 fields`.
fn format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRF2CK1",
        versions: FORMAT_VERSION..=FORMAT_VERSION,
        crc: CrcLayout::AfterVersionOverPayload,
        payload_bytes: Some(CHECKPOINT_BYTES - OVERHEAD_BYTES),
    }
}

/// The layout fields a checkpoint fixes when the store is created (every later open uses them
/// whatever its options say), and where they start in its file.
#[derive(Clone, Copy, Debug)]
pub struct StoredLayout {
    pub page_size_bytes: u64,
    pub segment_bytes: u64,
    pub chunk_count: u64,
    pub field_offset: u64,
}

/// What a checkpoint records: the WAL position it covers and each log's live range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    pub wal_lsn: u64,
    pub page_size_bytes: u64,
    pub segment_bytes: u64,
    pub chunk_count: u64,
    pub hot_begin: u64,
    pub hot_tail: u64,
    pub cold_begin: u64,
    pub cold_tail: u64,
    pub chunk_begin: u64,
    pub chunk_tail: u64,
    pub cold_truncations: u64,
    /// The cold log's estimated live bytes (engine/cold_live.rs) for `[cold_begin, cold_tail)`;
    /// 0 = none (no cold→cold round measured it yet).
    pub cold_live_estimate_bytes: u64,
}

impl Checkpoint {
    /// The sum of the three logs' begins (how far truncation has moved them, together).
    pub fn begins_sum(&self) -> u64 {
        self.hot_begin + self.cold_begin + self.chunk_begin
    }

    fn fields(&self) -> [u64; 12] {
        [
            self.wal_lsn,
            self.page_size_bytes,
            self.segment_bytes,
            self.chunk_count,
            self.hot_begin,
            self.hot_tail,
            self.cold_begin,
            self.cold_tail,
            self.chunk_begin,
            self.chunk_tail,
            self.cold_truncations,
            self.cold_live_estimate_bytes,
        ]
    }

    pub fn encode(&self) -> Vec<u8> {
        let fields: Vec<u8> = self.fields().iter().flat_map(|f| f.to_le_bytes()).collect();
        format().encode(FORMAT_VERSION, &fields)
    }

    pub fn decode(bytes: &[u8]) -> Result<Checkpoint> {
        let corrupt = |offset: u64, what: &str| Error::corruption(FILE_NAME, offset, what.to_string());
        let payload = format().decode(FILE_NAME, bytes)?.payload;
        let mut f = [0u64; 12];
        for (i, v) in f.iter_mut().enumerate() {
            let o = i * 8;
            // Unreachable with the size the format fixes; reported rather than read as zero.
            *v = u64_at(payload, o)
                .ok_or_else(|| corrupt((FIELDS_OFFSET + o) as u64, "truncated checkpoint field"))?;
        }
        let [wal_lsn, page_size_bytes, segment_bytes, chunk_count, hot_begin, hot_tail, cold_begin, cold_tail, chunk_begin, chunk_tail, cold_truncations, cold_live_estimate_bytes] =
            f;
        let c = Checkpoint {
            wal_lsn,
            page_size_bytes,
            segment_bytes,
            chunk_count,
            hot_begin,
            hot_tail,
            cold_begin,
            cold_tail,
            chunk_begin,
            chunk_tail,
            cold_truncations,
            cold_live_estimate_bytes,
        };
        let sane = (4096..=MAX_PAGE_BYTES).contains(&page_size_bytes)
            && page_size_bytes.is_power_of_two()
            && segment_bytes >= page_size_bytes
            && segment_bytes % page_size_bytes == 0
            && chunk_count.is_power_of_two()
            && chunk_count <= 1 << 32
            && [(hot_begin, hot_tail), (cold_begin, cold_tail), (chunk_begin, chunk_tail)]
                .iter()
                .all(|&(b, t)| b >= crate::log::FIRST_ADDRESS && b <= t && t < 1 << 47);
        if !sane {
            return Err(corrupt(FIELDS_OFFSET as u64, "checkpoint fields are inconsistent"));
        }
        if wal_lsn > strata_wal::MAX_LSN {
            return Err(corrupt(FIELDS_OFFSET as u64, "the WAL lsn is past the lsn space (2^63 - 1)"));
        }
        Ok(c)
    }

    /// The layout fields (from `page_size_bytes` on), which the options are resolved against.
    pub fn layout(&self) -> StoredLayout {
        StoredLayout {
            page_size_bytes: self.page_size_bytes,
            segment_bytes: self.segment_bytes,
            chunk_count: self.chunk_count,
            field_offset: (FIELDS_OFFSET + 8) as u64,
        }
    }

    pub fn load(storage: &dyn Storage) -> Result<Option<Checkpoint>> {
        if !storage.exists(FILE_NAME)? {
            return Ok(None);
        }
        let file = storage.open(FILE_NAME, strata_io::OpenOptions::existing())?;
        Checkpoint::decode(&strata_io::read_all(file.as_ref())?).map(Some)
    }

    /// Durably replaces the checkpoint file (tmp file, fsync, rename, directory fsync).
    pub fn store(&self, storage: &dyn Storage) -> Result<()> {
        strata_io::write_file_atomic(storage, FILE_NAME, &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Checkpoint {
        Checkpoint {
            wal_lsn: 7,
            page_size_bytes: 4096,
            segment_bytes: 8192,
            chunk_count: 16,
            hot_begin: 64,
            hot_tail: 100,
            cold_begin: 64,
            cold_tail: 64,
            chunk_begin: 64,
            chunk_tail: 400,
            cold_truncations: 3,
            cold_live_estimate_bytes: 5,
        }
    }

    /// Format 2 stores' record checksums do not cover the address: refused, not misread.
    #[test]
    fn a_format_2_checkpoint_is_incompatible() {
        let mut bytes = sample().encode();
        bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
        let err = Checkpoint::decode(&bytes).unwrap_err();
        assert!(matches!(&err, Error::Incompatible(m) if m.contains("older")), "{err:?}");
    }

    #[test]
    fn documented_offsets_match_the_code() {
        let bytes = sample().encode();
        assert_eq!(bytes.len(), CHECKPOINT_BYTES);
        assert_eq!(&bytes[0..8], b"STRF2CK1");
        assert_eq!(&bytes[8..12], &3u32.to_le_bytes());
        assert_eq!(&bytes[12..16], &crc32c::crc32c(&bytes[16..112]).to_le_bytes());
        let field = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().unwrap());
        assert_eq!(field(16), 7);
        assert_eq!(field(24), 4096);
        assert_eq!(field(32), 8192);
        assert_eq!(field(40), 16);
        assert_eq!((field(48), field(56)), (64, 100));
        assert_eq!((field(64), field(72)), (64, 64));
        assert_eq!((field(80), field(88)), (64, 400));
        assert_eq!(field(96), 3);
        assert_eq!(field(104), 5);
        assert_eq!(Checkpoint::decode(&bytes).unwrap(), sample());
    }

    /// A file cut anywhere (inside a field included) is corruption of the checkpoint file at a
    /// stated offset, not a panic or an I/O error.
    #[test]
    fn a_truncated_checkpoint_is_corruption_naming_the_file() {
        let bytes = sample().encode();
        for len in [0, 8, 12, 20, FIELDS_OFFSET + 8 * 5 + 3, CHECKPOINT_BYTES - 1] {
            let err = Checkpoint::decode(&bytes[..len]).unwrap_err();
            assert!(
                matches!(&err, Error::Corruption { file, offset: 0, .. } if file.as_str() == FILE_NAME),
                "len {len}: {err:?}"
            );
        }
    }

    #[test]
    fn damage_is_reported_not_panicked() {
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            assert!(Checkpoint::decode(&bytes[..len]).is_err());
        }
        for bit in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(Checkpoint::decode(&b).is_err(), "bit {bit}");
        }
    }
}
