//! The WAL state file `{prefix}state`: which segments are live and how many bytes of each, and
//! which lsns, were durable when it was written. It lives outside the segments, so a segment
//! that is deleted, emptied or shortened after the fact cannot also erase the evidence that it
//! held acknowledged records (RocksDB's `track_and_verify_wals_in_manifest`, for one log).
//! Layout and rules: `docs/format/wal.md`, "WAL state file".
//!
//! Invariant: everything the file says was true when it was written and stays a lower bound
//! afterwards — segments only grow while live, lsns are never reused, and the file is rewritten
//! (atomically: tmp, fsync, rename, directory fsync) *before* any listed segment is released.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::{Error, Result};
use strata_io::{read_all, write_file_atomic, OpenOptions, Storage};

use crate::format::mask_crc;
use crate::options::WalOptions;
use crate::Lsn;

pub const STATE_MAGIC: [u8; 8] = *b"STRWALST";
pub const STATE_FORMAT_VERSION: u32 = 1;
pub const STATE_HEADER_BYTES: usize = 32;
pub const STATE_ENTRY_BYTES: usize = 24;

/// (offset, size) of each state file header field.
pub mod state_field {
    pub const MAGIC: (usize, usize) = (0, 8);
    pub const FORMAT_VERSION: (usize, usize) = (8, 4);
    pub const CRC: (usize, usize) = (12, 4);
    pub const DURABLE_LSN: (usize, usize) = (16, 8);
    pub const SEGMENT_COUNT: (usize, usize) = (24, 4);
    pub const RESERVED: (usize, usize) = (28, 4);
}

/// (offset, size) of each field of one segment entry, from the entry's start.
pub mod entry_field {
    pub const SEGMENT_ID: (usize, usize) = (0, 8);
    pub const FIRST_LSN: (usize, usize) = (8, 8);
    pub const SYNCED_BYTES: (usize, usize) = (16, 8);
}

/// One live segment as the state file records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateSegment {
    pub id: u64,
    pub first_lsn: Lsn,
    /// Bytes from the start of the file that were durable: the header and whole records.
    pub synced_bytes: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalState {
    /// Every lsn up to this one was durable when the file was written.
    pub durable_lsn: Lsn,
    /// Live segments in id order.
    pub segments: Vec<StateSegment>,
}

fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

impl WalState {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(STATE_HEADER_BYTES + STATE_ENTRY_BYTES * self.segments.len());
        out.extend_from_slice(&STATE_MAGIC);
        out.extend_from_slice(&STATE_FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&[0; 4]); // crc, filled in below
        out.extend_from_slice(&self.durable_lsn.to_le_bytes());
        out.extend_from_slice(&(self.segments.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        for segment in &self.segments {
            out.extend_from_slice(&segment.id.to_le_bytes());
            out.extend_from_slice(&segment.first_lsn.to_le_bytes());
            out.extend_from_slice(&segment.synced_bytes.to_le_bytes());
        }
        let crc = mask_crc(crc32c::crc32c(out.get(STATE_HEADER_BYTES / 2..).unwrap_or_default()));
        out.get_mut(state_field::CRC.0..state_field::CRC.0 + 4)
            .unwrap_or_default()
            .copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes the file `name`; every failure is `Corruption` naming the file and the bad
    /// field's offset.
    pub fn decode(bytes: &[u8], name: &str) -> Result<WalState> {
        let bad = |offset: usize, what: String| Error::corruption(name, offset as u64, what);
        if bytes.len() < STATE_HEADER_BYTES {
            return Err(bad(
                0,
                format!("WAL state needs {STATE_HEADER_BYTES} bytes, the file has {}", bytes.len()),
            ));
        }
        if bytes.get(..8) != Some(STATE_MAGIC.as_slice()) {
            return Err(bad(state_field::MAGIC.0, "bad WAL state magic".into()));
        }
        let version = read_u32(bytes, state_field::FORMAT_VERSION.0).unwrap_or(0);
        if version != STATE_FORMAT_VERSION {
            return Err(bad(
                state_field::FORMAT_VERSION.0,
                format!("unsupported WAL state version {version}"),
            ));
        }
        let stored_crc = read_u32(bytes, state_field::CRC.0).unwrap_or(0);
        let crc = mask_crc(crc32c::crc32c(bytes.get(STATE_HEADER_BYTES / 2..).unwrap_or_default()));
        if stored_crc != crc {
            return Err(bad(state_field::CRC.0, "WAL state checksum mismatch".into()));
        }
        let count = read_u32(bytes, state_field::SEGMENT_COUNT.0).unwrap_or(0) as usize;
        let expected_len =
            count.checked_mul(STATE_ENTRY_BYTES).and_then(|n| n.checked_add(STATE_HEADER_BYTES));
        if expected_len != Some(bytes.len()) || read_u32(bytes, state_field::RESERVED.0) != Some(0) {
            return Err(bad(
                state_field::SEGMENT_COUNT.0,
                format!("WAL state lists {count} segments but holds {} bytes", bytes.len()),
            ));
        }
        let mut segments: Vec<StateSegment> = Vec::with_capacity(count);
        for at in (STATE_HEADER_BYTES..bytes.len()).step_by(STATE_ENTRY_BYTES) {
            let field = |(offset, _): (usize, usize)| read_u64(bytes, at + offset).unwrap_or(0);
            let segment = StateSegment {
                id: field(entry_field::SEGMENT_ID),
                first_lsn: field(entry_field::FIRST_LSN),
                synced_bytes: field(entry_field::SYNCED_BYTES),
            };
            if segments.last().is_some_and(|previous| previous.id >= segment.id) {
                return Err(bad(at, format!("WAL state lists segment {} out of order", segment.id)));
            }
            segments.push(segment);
        }
        let durable_lsn = read_u64(bytes, state_field::DURABLE_LSN.0).unwrap_or(0);
        Ok(WalState { durable_lsn, segments })
    }

    pub fn listed(&self, id: u64) -> Option<&StateSegment> {
        self.segments.iter().find(|s| s.id == id)
    }
}

/// Reads the state file, `None` when there is none.
pub fn load(storage: &dyn Storage, opts: &WalOptions) -> Result<Option<WalState>> {
    let name = opts.state_file_name();
    if !storage.exists(&name)? {
        return Ok(None);
    }
    let bytes = read_all(storage.open(&name, OpenOptions::existing())?.as_ref())?;
    WalState::decode(&bytes, &name).map(Some)
}

/// Replaces the state file atomically; it is durable when this returns.
/// Durably replaces the state file; returns the bytes written.
pub fn store(storage: &dyn Storage, opts: &WalOptions, state: &WalState) -> Result<u64> {
    let bytes = state.encode();
    write_file_atomic(storage, &opts.state_file_name(), &bytes)?;
    Ok(bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn sample() -> WalState {
        WalState {
            durable_lsn: 0x0102_0304_0506_0708,
            segments: vec![
                StateSegment { id: 3, first_lsn: 10, synced_bytes: 4096 },
                StateSegment { id: 4, first_lsn: 77, synced_bytes: 32 },
            ],
        }
    }

    #[test]
    fn state_round_trips_and_rejects_every_flipped_bit() {
        let bytes = sample().encode();
        assert_eq!(bytes.len(), STATE_HEADER_BYTES + 2 * STATE_ENTRY_BYTES);
        assert_eq!(WalState::decode(&bytes, "s").unwrap(), sample());
        for bit in 0..bytes.len() * 8 {
            let mut damaged = bytes.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            assert!(WalState::decode(&damaged, "s").unwrap_err().is_corruption(), "bit {bit}");
        }
        for len in 0..bytes.len() {
            let err = WalState::decode(&bytes[..len], "wal-state").unwrap_err();
            assert!(err.to_string().contains("wal-state"), "{err}");
        }
    }

    #[test]
    fn state_fields_sit_at_the_documented_offsets() {
        let bytes = sample().encode();
        assert_eq!(&bytes[..8], b"STRWALST");
        assert_eq!(read_u32(&bytes, state_field::FORMAT_VERSION.0), Some(1));
        assert_eq!(read_u64(&bytes, state_field::DURABLE_LSN.0), Some(0x0102_0304_0506_0708));
        assert_eq!(read_u32(&bytes, state_field::SEGMENT_COUNT.0), Some(2));
        let second = STATE_HEADER_BYTES + STATE_ENTRY_BYTES;
        assert_eq!(read_u64(&bytes, second + entry_field::SEGMENT_ID.0), Some(4));
        assert_eq!(read_u64(&bytes, second + entry_field::FIRST_LSN.0), Some(77));
        assert_eq!(read_u64(&bytes, second + entry_field::SYNCED_BYTES.0), Some(32));
        let doc = include_str!("../../../docs/format/wal.md");
        let section = doc.split("## WAL state file").nth(1).expect("wal.md documents the state file");
        for (name, (offset, size)) in [
            ("magic", state_field::MAGIC),
            ("format_version", state_field::FORMAT_VERSION),
            ("crc", state_field::CRC),
            ("durable_lsn", state_field::DURABLE_LSN),
            ("segment_count", state_field::SEGMENT_COUNT),
            ("reserved", state_field::RESERVED),
            ("segment_id", entry_field::SEGMENT_ID),
            ("first_lsn", entry_field::FIRST_LSN),
            ("synced_bytes", entry_field::SYNCED_BYTES),
        ] {
            let row = format!("| {offset} | {size} | `{name}` |");
            assert!(section.contains(&row), "wal.md lacks the row {row:?}");
        }
    }

    #[test]
    fn decoding_random_bytes_never_panics() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..2000 {
            let len = rng.gen_range(0..200);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if rng.gen_bool(0.5) && bytes.len() >= 8 {
                bytes[..8].copy_from_slice(&STATE_MAGIC);
            }
            let _ = WalState::decode(&bytes, "s");
        }
    }
}
