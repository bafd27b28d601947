//! The directory manifest: which engine owns the directory, and which format version wrote it.
//! Layout: docs/format/manifest.md.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use strata_core::{Error, Result};
use strata_io::{read_all, write_file_atomic, OpenOptions, Storage};
use strata_kit::small_file::{CrcLayout, SmallFileFormat};

use crate::EngineKind;

pub const MANIFEST_FILE_NAME: &str = "STRATA-MANIFEST";
pub const MANIFEST_FORMAT_VERSION: u32 = 1;
/// The payload: `engine_name_len u16 | engine_name`, at file offset 12.
const NAME_LEN_OFFSET: u64 = 12;
const NAME_OFFSET: u64 = 14;
const MAX_ENGINE_NAME_BYTES: usize = 32;

/// `magic | format_version | payload | crc32c of every byte before it`.
fn format() -> SmallFileFormat {
    SmallFileFormat {
        magic: b"STRATAMF",
        versions: 1..=MANIFEST_FORMAT_VERSION,
        crc: CrcLayout::Trailing,
        payload_bytes: None,
    }
}

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
        let mut payload = Vec::with_capacity(2 + name.len());
        payload.extend_from_slice(&(name.len() as u16).to_le_bytes());
        payload.extend_from_slice(name);
        format().encode(self.format_version, &payload)
    }

    pub fn decode(bytes: &[u8]) -> Result<Manifest> {
        let bad = |offset: u64, what: &str| Error::corruption(MANIFEST_FILE_NAME, offset, what);
        let decoded = format().decode(MANIFEST_FILE_NAME, bytes)?;
        let (name_len, name) =
            decoded.payload.split_at_checked(2).ok_or_else(|| bad(NAME_LEN_OFFSET, "truncated length"))?;
        let name_len = name_len
            .try_into()
            .map(u16::from_le_bytes)
            .map_err(|_| bad(NAME_LEN_OFFSET, "truncated length"))?;
        let name_len = usize::from(name_len);
        if name_len == 0 || name_len > MAX_ENGINE_NAME_BYTES {
            return Err(bad(NAME_LEN_OFFSET, "engine name length out of range"));
        }
        if name.len() != name_len {
            return Err(bad(NAME_LEN_OFFSET, "engine name length does not match the manifest's length"));
        }
        let name = std::str::from_utf8(name).map_err(|_| bad(NAME_OFFSET, "engine name is not UTF-8"))?;
        let engine = name.parse::<EngineKind>().map_err(|_| {
            Error::Incompatible(format!("the directory belongs to an unknown engine {name:?}"))
        })?;
        Ok(Manifest { format_version: decoded.version, engine })
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
