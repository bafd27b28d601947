//! Small checksummed files (and file headers): 8-byte magic, u32 format version, CRC-32C
//! (Castagnoli) and a payload, all integers little-endian. One encoder/decoder for the facade's
//! manifest, flexdb's commit record, f2's checkpoint and hot-index snapshot header, and the
//! memory engine's snapshot header. Their layouts predate this module and must not change, so
//! [`CrcLayout`] says where the checksum sits and what it covers; everything else is common.
//!
//! Decoding never panics and checks, in this order: length (corruption at offset 0), magic
//! (offset 0), checksum (at the checksum's offset), version (outside the readable range:
//! `Error::Incompatible`). The payload's own fields are the caller's to check.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::ops::RangeInclusive;

use strata_core::{Error, Result};
use strata_io::{read_all, write_file_atomic, OpenOptions, Storage};

const MAGIC_BYTES: usize = 8;
const VERSION_OFFSET: usize = 8;
const AFTER_VERSION: usize = 12;
const CRC_BYTES: usize = 4;

/// Bytes a small file adds around its payload: magic, version and checksum.
pub const OVERHEAD_BYTES: usize = MAGIC_BYTES + 4 + CRC_BYTES;

/// Where the CRC-32C sits and which bytes it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcLayout {
    /// `magic | version | payload | crc`: the crc, in the last 4 bytes, covers every byte
    /// before it (manifest, `flexdb-meta`, f2 hot-index snapshot header).
    Trailing,
    /// `magic | version | crc | payload`: the crc, at offset 12, covers the payload only
    /// (`f2-checkpoint`).
    AfterVersionOverPayload,
    /// `magic | version | crc | payload`: the crc, at offset 12, covers bytes 0..12 followed by
    /// the payload: every byte but its own (memory snapshot header).
    AfterVersionOverRest,
}

/// One small-file format: its magic, the versions this build reads, its checksum layout and,
/// for fixed-size formats, its payload size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SmallFileFormat {
    pub magic: &'static [u8; 8],
    /// Versions this build reads; any other is `Error::Incompatible`.
    pub versions: RangeInclusive<u32>,
    pub crc: CrcLayout,
    /// `Some(n)`: the payload is exactly `n` bytes, and a file of another size is corruption at
    /// offset 0 (checked first). `None`: any size.
    pub payload_bytes: Option<usize>,
}

/// A decoded small file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    pub version: u32,
    pub payload: &'a [u8],
    /// File offset of `payload[0]`, for reporting a bad payload field at its file offset.
    pub payload_offset: u64,
}

impl SmallFileFormat {
    /// File offset of the payload.
    pub fn payload_offset(&self) -> usize {
        match self.crc {
            CrcLayout::Trailing => AFTER_VERSION,
            CrcLayout::AfterVersionOverPayload | CrcLayout::AfterVersionOverRest => AFTER_VERSION + CRC_BYTES,
        }
    }

    /// File offset of the checksum in a file of `len` bytes.
    fn crc_offset(&self, len: usize) -> usize {
        match self.crc {
            CrcLayout::Trailing => len.saturating_sub(CRC_BYTES),
            CrcLayout::AfterVersionOverPayload | CrcLayout::AfterVersionOverRest => AFTER_VERSION,
        }
    }

    fn checksum(&self, bytes: &[u8], payload: &[u8]) -> u32 {
        match self.crc {
            CrcLayout::Trailing => {
                crc32c::crc32c(bytes.get(..bytes.len().saturating_sub(CRC_BYTES)).unwrap_or_default())
            }
            CrcLayout::AfterVersionOverPayload => crc32c::crc32c(payload),
            CrcLayout::AfterVersionOverRest => {
                crc32c::crc32c_append(crc32c::crc32c(bytes.get(..AFTER_VERSION).unwrap_or_default()), payload)
            }
        }
    }

    /// The file's bytes: `OVERHEAD_BYTES + payload.len()` of them.
    pub fn encode(&self, version: u32, payload: &[u8]) -> Vec<u8> {
        self.encode_with(version, payload.len(), |out| out.extend_from_slice(payload))
    }

    /// The file's bytes, its payload whatever `write_payload` appends to the buffer it is given
    /// (reserved for `payload_bytes`): a large payload (treeline's index) is encoded in place
    /// instead of into a buffer of its own that the file's bytes then copy.
    pub fn encode_with(
        &self,
        version: u32,
        payload_bytes: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(OVERHEAD_BYTES + payload_bytes);
        out.extend_from_slice(self.magic);
        out.extend_from_slice(&version.to_le_bytes());
        if self.crc != CrcLayout::Trailing {
            out.extend_from_slice(&[0; CRC_BYTES]);
        }
        let payload_at = out.len();
        write_payload(&mut out);
        let payload_end = out.len();
        if self.crc == CrcLayout::Trailing {
            out.extend_from_slice(&[0; CRC_BYTES]);
        }
        let crc_at = self.crc_offset(out.len());
        let crc = self.checksum(&out, out.get(payload_at..payload_end).unwrap_or_default());
        if let Some(slot) = out.get_mut(crc_at..crc_at + CRC_BYTES) {
            slot.copy_from_slice(&crc.to_le_bytes());
        }
        out
    }

    /// Checks and splits the bytes of `file` (its name, for errors). See the module docs for the
    /// order of the checks; every failure names `file` and the offset of the bad field.
    pub fn decode<'a>(&self, file: &str, bytes: &'a [u8]) -> Result<Decoded<'a>> {
        let corrupt = |offset: usize, what: String| Error::corruption(file, offset as u64, what);
        let expected_len = self.payload_bytes.map(|n| OVERHEAD_BYTES + n);
        if expected_len.is_some_and(|n| n != bytes.len()) || bytes.len() < OVERHEAD_BYTES {
            let expected =
                expected_len.map_or_else(|| format!("at least {OVERHEAD_BYTES}"), |n| n.to_string());
            return Err(corrupt(
                0,
                format!("{} bytes, expected {expected}: truncated or not this file", bytes.len()),
            ));
        }
        if bytes.get(..MAGIC_BYTES) != Some(self.magic.as_slice()) {
            return Err(corrupt(
                0,
                format!("bad magic (expected {:?})", String::from_utf8_lossy(self.magic)),
            ));
        }
        let payload_offset = self.payload_offset();
        let payload_end = payload_offset + (bytes.len() - OVERHEAD_BYTES);
        let payload = bytes.get(payload_offset..payload_end).unwrap_or_default();
        let crc_at = self.crc_offset(bytes.len());
        if u32_at(bytes, crc_at) != Some(self.checksum(bytes, payload)) {
            return Err(corrupt(crc_at, "checksum mismatch".to_string()));
        }
        let version = u32_at(bytes, VERSION_OFFSET).unwrap_or_default();
        if !self.versions.contains(&version) {
            let (oldest, newest) = (self.versions.start(), self.versions.end());
            let age = if version > *newest { "newer" } else { "older" };
            return Err(Error::Incompatible(format!(
                "{file} has format version {version}, {age} than this build reads ({oldest}..={newest})"
            )));
        }
        Ok(Decoded { version, payload, payload_offset: payload_offset as u64 })
    }

    /// Reads and decodes `file`: `Ok(None)` if it does not exist, else its version and payload.
    pub fn load(&self, storage: &dyn Storage, file: &str) -> Result<Option<(u32, Vec<u8>)>> {
        if !storage.exists(file)? {
            return Ok(None);
        }
        let bytes = read_all(storage.open(file, OpenOptions::existing())?.as_ref())?;
        let decoded = self.decode(file, &bytes)?;
        Ok(Some((decoded.version, decoded.payload.to_vec())))
    }

    /// Durably replaces `file` (temporary file, fsync, rename, directory fsync:
    /// `strata_io::write_file_atomic`), so it is either the old or the new file after a crash.
    pub fn store(&self, storage: &dyn Storage, file: &str, version: u32, payload: &[u8]) -> Result<()> {
        self.store_with(storage, file, version, payload.len(), |out| out.extend_from_slice(payload))
    }

    /// `store` with the payload written in place (`encode_with`).
    pub fn store_with(
        &self,
        storage: &dyn Storage,
        file: &str,
        version: u32,
        payload_bytes: usize,
        write_payload: impl FnOnce(&mut Vec<u8>),
    ) -> Result<()> {
        write_file_atomic(storage, file, &self.encode_with(version, payload_bytes, write_payload))
    }
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

#[cfg(test)]
mod tests;
