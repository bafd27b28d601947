//! The directory manifest: which engine owns the directory, and which format version wrote it.
//! Layout: docs/format/manifest.md.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::{Error, Result};
use strata_io::{read_all, write_file_atomic, OpenOptions, Storage};

use crate::EngineKind;

pub const MANIFEST_FILE_NAME: &str = "STRATA-MANIFEST";
pub const MANIFEST_FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 8] = b"STRATAMF";
const FIXED_HEADER_BYTES: usize = 14;
const CRC_BYTES: usize = 4;
const MAX_ENGINE_NAME_BYTES: usize = 32;

/// The decoded manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    pub format_version: u32,
    pub engine: EngineKind,
}

impl Manifest {
    pub fn new(engine: EngineKind) -> Self {
        Manifest { format_version: MANIFEST_FORMAT_VERSION, engine }
    }

    pub fn encode(&self) -> Vec<u8> {
        let name = self.engine.name().as_bytes();
        let mut out = Vec::with_capacity(FIXED_HEADER_BYTES + name.len() + CRC_BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.format_version.to_le_bytes());
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(name);
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Manifest> {
        let bad = |offset: usize, what: &str| Error::corruption(MANIFEST_FILE_NAME, offset as u64, what);
        let header = bytes.get(..FIXED_HEADER_BYTES).ok_or_else(|| bad(0, "manifest is truncated"))?;
        let (magic, rest) = header.split_at(8);
        if magic != MAGIC {
            return Err(bad(0, "bad magic: this is not a Strata manifest"));
        }
        let (version, name_len) = rest.split_at(4);
        let version = u32::from_le_bytes(version.try_into().map_err(|_| bad(8, "truncated version"))?);
        let name_len =
            usize::from(u16::from_le_bytes(name_len.try_into().map_err(|_| bad(12, "truncated length"))?));
        if name_len == 0 || name_len > MAX_ENGINE_NAME_BYTES {
            return Err(bad(12, "engine name length out of range"));
        }
        let body_len = FIXED_HEADER_BYTES + name_len;
        if bytes.len() != body_len + CRC_BYTES {
            return Err(bad(bytes.len().min(body_len), "manifest has the wrong length"));
        }
        let (body, crc) = bytes.split_at(body_len);
        let stored_crc = u32::from_le_bytes(crc.try_into().map_err(|_| bad(body_len, "truncated crc"))?);
        if crc32c::crc32c(body) != stored_crc {
            return Err(bad(body_len, "checksum mismatch"));
        }
        if version > MANIFEST_FORMAT_VERSION {
            return Err(Error::Incompatible(format!(
                "the directory was written by a newer Strata (manifest format {version}; this build reads up to \
                 {MANIFEST_FORMAT_VERSION})"
            )));
        }
        let name = body.get(FIXED_HEADER_BYTES..).ok_or_else(|| bad(FIXED_HEADER_BYTES, "truncated name"))?;
        let name =
            std::str::from_utf8(name).map_err(|_| bad(FIXED_HEADER_BYTES, "engine name is not UTF-8"))?;
        let engine = name.parse::<EngineKind>().map_err(|_| {
            Error::Incompatible(format!("the directory belongs to an unknown engine {name:?}"))
        })?;
        Ok(Manifest { format_version: version, engine })
    }

    /// Reads the manifest, `Ok(None)` if the directory has none.
    pub fn load(storage: &dyn Storage) -> Result<Option<Manifest>> {
        if !storage.exists(MANIFEST_FILE_NAME)? {
            return Ok(None);
        }
        let file = storage.open(MANIFEST_FILE_NAME, OpenOptions::existing())?;
        Manifest::decode(&read_all(file.as_ref())?).map(Some)
    }

    /// Writes the manifest durably (temporary file, fsync, rename, directory fsync).
    pub fn store(&self, storage: &dyn Storage) -> Result<()> {
        write_file_atomic(storage, MANIFEST_FILE_NAME, &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks every offset and size documented in docs/format/manifest.md.
    #[test]
    fn layout_matches_format_doc() {
        let bytes = Manifest::new(EngineKind::Flex).encode();
        assert_eq!(&bytes[0..8], b"STRATAMF");
        assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 1);
        assert_eq!(u16::from_le_bytes(bytes[12..14].try_into().unwrap()), 4);
        assert_eq!(&bytes[14..18], b"flex");
        assert_eq!(u32::from_le_bytes(bytes[18..22].try_into().unwrap()), crc32c::crc32c(&bytes[..18]));
        assert_eq!(bytes.len(), 18 + 4);
    }

    #[test]
    fn round_trip_every_engine() {
        for kind in EngineKind::ALL {
            assert_eq!(Manifest::decode(&Manifest::new(kind).encode()).unwrap(), Manifest::new(kind));
        }
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let good = Manifest::new(EngineKind::Memory).encode();
        for bit in 0..good.len() * 8 {
            let mut bad = good.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(Manifest::decode(&bad).is_err(), "flip of bit {bit} went unnoticed");
        }
    }

    #[test]
    fn truncations_are_errors_not_panics() {
        let good = Manifest::new(EngineKind::Turtle).encode();
        for len in 0..good.len() {
            assert!(Manifest::decode(&good[..len]).is_err());
        }
    }

    #[test]
    fn newer_format_is_incompatible() {
        let mut m = Manifest::new(EngineKind::Memory);
        m.format_version = MANIFEST_FORMAT_VERSION + 1;
        let err = Manifest::decode(&m.encode()).unwrap_err();
        assert!(matches!(err, Error::Incompatible(_)), "{err}");
    }
}
