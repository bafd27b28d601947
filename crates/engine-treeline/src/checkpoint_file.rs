//! `treeline-checkpoint`: the recovery point. A small checksummed file (strata-kit's
//! `small_file`, replaced atomically) holding the whole index as of the checkpoint, the lsn the
//! WAL replays from, the data file's end, the next production id and the checkpoint's
//! *generation*, which the double-write area's entries carry (docs/format/treeline.md).

use std::borrow::Cow;

use strata_core::{Error, Result};
use strata_io::Storage;
use strata_kit::small_file::{CrcLayout, SmallFileFormat};

use crate::blob::{BlobSlot, BlobTable};
use crate::free_space::PageId;
use crate::index::Index;
use crate::page::PageSize;

pub const FILE_NAME: &str = "treeline-checkpoint";
/// Version 2 adds the blob table after the index; version 1 is read with an empty one.
pub const VERSION: u32 = 2;

pub const FORMAT: SmallFileFormat =
    SmallFileFormat { magic: b"TLCHKPT\0", versions: 1..=2, crc: CrcLayout::Trailing, payload_bytes: None };

/// Bytes of one blob table entry: first page, page count, blob id.
pub const BLOB_ENTRY_BYTES: usize = 20;

/// Payload offsets.
pub const GENERATION: usize = 0;
pub const WAL_REPLAY_FROM_LSN: usize = 8;
pub const DATA_END_PAGE: usize = 16;
pub const NEXT_PRODUCTION_ID: usize = 24;
pub const PAGE_SIZE_LOG2: usize = 32;
pub const RESERVED: usize = 33;
pub const INDEX: usize = 40;

/// What a checkpoint records. Its tables are borrowed when one is stored (the live index and
/// blob table: a copy would double the index's memory at every checkpoint) and owned when one
/// is loaded.
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint<'a> {
    /// Bumped by every checkpoint; double-write entries of other generations are ignored.
    pub generation: u64,
    /// Every WAL record below this lsn is in the data pages.
    pub wal_replay_from_lsn: u64,
    /// Pages in the data file the index may reference (ids below this).
    pub data_end_page: PageId,
    pub next_production_id: u64,
    pub page_size: PageSize,
    pub index: Cow<'a, Index>,
    /// Live blob runs (docs/format/treeline.md, "Blob runs").
    pub blobs: Cow<'a, BlobTable>,
}

impl Checkpoint<'static> {
    /// The checkpoint of a store that references no page yet: a new store's (generation 1,
    /// replay from lsn 1), or one choosing its page size (`Store::settle_page_size`).
    pub fn of_empty_store(
        generation: u64,
        wal_replay_from_lsn: u64,
        next_production_id: u64,
        page_size: PageSize,
    ) -> Checkpoint<'static> {
        Checkpoint {
            generation,
            wal_replay_from_lsn,
            data_end_page: crate::free_space::RESERVED_PAGES,
            next_production_id,
            page_size,
            index: Cow::Owned(Index::default()),
            blobs: Cow::Owned(BlobTable::new()),
        }
    }
}

impl Checkpoint<'_> {
    /// The payload's bytes (docs/format/treeline.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::with_capacity(self.payload_bytes());
        self.encode_into(&mut p);
        p
    }

    /// Exactly what `encode_into` appends.
    pub fn payload_bytes(&self) -> usize {
        INDEX + self.index.encoded_bytes() + 4 + BLOB_ENTRY_BYTES * self.blobs.len()
    }

    /// Appends the payload to `p`.
    pub fn encode_into(&self, p: &mut Vec<u8>) {
        for v in [self.generation, self.wal_replay_from_lsn, self.data_end_page, self.next_production_id] {
            p.extend_from_slice(&v.to_le_bytes());
        }
        p.push(self.page_size.log2());
        p.extend_from_slice(&[0; INDEX - RESERVED]);
        self.index.encode(p);
        p.extend_from_slice(&(self.blobs.len() as u32).to_le_bytes());
        for (first_page, slot) in self.blobs.iter() {
            p.extend_from_slice(&first_page.to_le_bytes());
            p.extend_from_slice(&(slot.pages as u32).to_le_bytes());
            p.extend_from_slice(&slot.blob_id.to_le_bytes());
        }
    }

    /// Decodes a version-`version` payload found at `payload_offset` of `file`.
    pub fn decode(
        payload: &[u8],
        version: u32,
        file: &str,
        payload_offset: u64,
    ) -> Result<Checkpoint<'static>> {
        let corrupt =
            |at: usize, what: &str| Error::corruption(file, payload_offset + at as u64, what.to_string());
        let u64_at =
            |at: usize| strata_core::le_bytes::u64_at(payload, at).ok_or_else(|| corrupt(at, "truncated"));
        let generation = u64_at(GENERATION)?;
        let wal_replay_from_lsn = u64_at(WAL_REPLAY_FROM_LSN)?;
        let data_end_page = u64_at(DATA_END_PAGE)?;
        let next_production_id = u64_at(NEXT_PRODUCTION_ID)?;
        let log2 =
            payload.get(PAGE_SIZE_LOG2).copied().ok_or_else(|| corrupt(PAGE_SIZE_LOG2, "truncated"))?;
        let page_size = PageSize::from_log2(log2).ok_or_else(|| corrupt(PAGE_SIZE_LOG2, "bad page size"))?;
        if payload.get(RESERVED..INDEX).is_none_or(|r| r.iter().any(|&b| b != 0)) {
            return Err(corrupt(RESERVED, "reserved bytes are not zero"));
        }
        if wal_replay_from_lsn == 0 || next_production_id == 0 {
            return Err(corrupt(WAL_REPLAY_FROM_LSN, "zero lsn or production id"));
        }
        if wal_replay_from_lsn > strata_wal::MAX_LSN {
            return Err(corrupt(WAL_REPLAY_FROM_LSN, "WAL replay lsn past the lsn space (2^63 - 1)"));
        }
        let rest = payload.get(INDEX..).unwrap_or_default();
        let (index, used) = Index::decode(rest, file, payload_offset + INDEX as u64, data_end_page)?;
        let blobs_at = INDEX + used;
        let (blobs, end) = match version {
            1 => (BlobTable::new(), blobs_at),
            _ => {
                decode_blob_table(payload, blobs_at, data_end_page).map_err(|(at, what)| corrupt(at, what))?
            }
        };
        if end != payload.len() {
            return Err(corrupt(end, "bytes after the last table"));
        }
        Ok(Checkpoint {
            generation,
            wal_replay_from_lsn,
            data_end_page,
            next_production_id,
            page_size,
            index: Cow::Owned(index),
            blobs: Cow::Owned(blobs),
        })
    }

    /// The checkpoint in `storage`, if there is one.
    pub fn load(storage: &dyn Storage) -> Result<Option<Checkpoint<'static>>> {
        if !storage.exists(FILE_NAME)? {
            return Ok(None);
        }
        let bytes =
            strata_io::read_all(storage.open(FILE_NAME, strata_io::OpenOptions::existing())?.as_ref())?;
        let decoded = FORMAT.decode(FILE_NAME, &bytes)?;
        Checkpoint::decode(decoded.payload, decoded.version, FILE_NAME, decoded.payload_offset).map(Some)
    }

    /// Durably replaces the checkpoint file (temporary file, fsync, rename, directory fsync).
    pub fn store(&self, storage: &dyn Storage) -> Result<()> {
        // Encoded straight into the file's bytes: the index is the store's largest table, and a
        // payload of its own copied into them held it twice more at every checkpoint.
        FORMAT.store_with(storage, FILE_NAME, VERSION, self.payload_bytes(), |out| self.encode_into(out))
    }
}

/// The blob table at `at` of `payload`: live runs in increasing, non-overlapping order inside
/// `1 .. data_end_page`. Returns it and the offset past it; `Err` names the offending offset.
fn decode_blob_table(
    payload: &[u8],
    at: usize,
    data_end_page: PageId,
) -> std::result::Result<(BlobTable, usize), (usize, &'static str)> {
    let u32_at = |at: usize| strata_core::le_bytes::u32_at(payload, at).ok_or((at, "truncated"));
    let u64_at = |at: usize| strata_core::le_bytes::u64_at(payload, at).ok_or((at, "truncated"));
    let count = u32_at(at)? as usize;
    if count.saturating_mul(BLOB_ENTRY_BYTES) > payload.len().saturating_sub(at + 4) {
        return Err((at, "blob count past the end of the file"));
    }
    let mut blobs = BlobTable::new();
    let mut next_free: PageId = 1;
    for i in 0..count {
        let entry = at + 4 + i * BLOB_ENTRY_BYTES;
        let (first_page, pages, blob_id) =
            (u64_at(entry)?, u64::from(u32_at(entry + 8)?), u64_at(entry + 12)?);
        if first_page < next_free || pages == 0 || blob_id == 0 {
            return Err((entry, "blob run overlaps the one before, is empty or has id 0"));
        }
        let end = first_page.checked_add(pages).filter(|&e| e <= data_end_page);
        let Some(end) = end else { return Err((entry, "blob run past the data end page")) };
        blobs.insert(first_page, BlobSlot { pages, blob_id });
        next_free = end;
    }
    Ok((blobs, at + 4 + count * BLOB_ENTRY_BYTES))
}

#[cfg(test)]
mod tests {
    use strata_io::MemStorage;

    use super::*;
    use crate::free_space::SegmentSlot;
    use crate::index::SegmentEntry;

    fn sample() -> Checkpoint<'static> {
        let mut index = Index::default();
        index.insert(Vec::new(), SegmentEntry::new(SegmentSlot { first_page: 1, pages: 1 }, None, 3));
        Checkpoint {
            generation: 7,
            wal_replay_from_lsn: 42,
            data_end_page: 5,
            next_production_id: 4,
            page_size: PageSize::DEFAULT,
            index: Cow::Owned(index),
            blobs: Cow::Owned(BlobTable::from([(2, BlobSlot { pages: 3, blob_id: 0xAB })])),
        }
    }

    /// The file is encoded in place with its payload's exact size reserved: the same bytes as
    /// the payload encoded on its own and framed, for segments with and without models and
    /// overflow pages.
    #[test]
    fn a_checkpoint_stored_in_place_is_the_framed_payload_of_its_exact_size() {
        let mut c = Checkpoint { data_end_page: 40, ..sample() };
        let model =
            crate::model::SegmentModel { prefix_len: 2, base: 9, slope: 0.5, intercept: 1.0, pages: 4 };
        let index = c.index.to_mut();
        index.insert(
            b"m".to_vec(),
            SegmentEntry::new(SegmentSlot { first_page: 9, pages: 4 }, Some(model), 5),
        );
        assert!(index.set_overflow(b"m", 2, 30));
        let payload = c.encode();
        assert_eq!(c.payload_bytes(), payload.len());
        assert_eq!(payload.capacity(), payload.len(), "reserved exactly, never grown");
        let storage = strata_io::MemStorage::new();
        c.store(&storage).unwrap();
        let stored = strata_io::read_all(
            storage.open(FILE_NAME, strata_io::OpenOptions::existing()).unwrap().as_ref(),
        );
        assert_eq!(stored.unwrap(), FORMAT.encode(VERSION, &payload));
        assert_eq!(Checkpoint::load(&storage).unwrap(), Some(c));
    }

    /// docs/format/treeline.md, "treeline-checkpoint": every field at its documented offset.
    #[test]
    fn offsets() {
        let c = sample();
        let file = FORMAT.encode(VERSION, &c.encode());
        let p = &file[12..file.len() - 4];
        assert_eq!(&file[..8], b"TLCHKPT\0");
        assert_eq!(p[GENERATION], 7);
        assert_eq!(p[WAL_REPLAY_FROM_LSN], 42);
        assert_eq!(p[DATA_END_PAGE], 5);
        assert_eq!(p[NEXT_PRODUCTION_ID], 4);
        assert_eq!(p[PAGE_SIZE_LOG2], 12);
        assert_eq!(&p[INDEX..INDEX + 4], &1u32.to_le_bytes());
        assert_eq!(&p[INDEX + 4..INDEX + 6], &0u16.to_le_bytes(), "first lower bound: empty");
        assert_eq!(p[INDEX + 6], 1, "first page");
        // The blob table: the last 4 + 20 bytes of this payload.
        let table = p.len() - 24;
        assert_eq!(&p[table..table + 4], &1u32.to_le_bytes());
        assert_eq!(&p[table + 4..table + 12], &2u64.to_le_bytes(), "first page");
        assert_eq!(&p[table + 12..table + 16], &3u32.to_le_bytes(), "pages");
        assert_eq!(&p[table + 16..table + 24], &0xABu64.to_le_bytes(), "blob id");
    }

    /// A version-1 checkpoint (no blob table) reads as one with none.
    #[test]
    fn version_one_has_no_blob_table() {
        let mut c = sample();
        c.blobs.to_mut().clear();
        let v2 = c.encode();
        let v1 = &v2[..v2.len() - 4];
        assert_eq!(Checkpoint::decode(v1, 1, "f", 12).unwrap(), c);
        assert!(Checkpoint::decode(v1, 2, "f", 12).is_err(), "version 2 needs its table");
        assert!(Checkpoint::decode(&v2, 1, "f", 12).is_err(), "version 1 has nothing after the index");
    }

    #[test]
    fn blob_runs_past_the_end_or_overlapping_are_corruption() {
        for blobs in [
            vec![(4, BlobSlot { pages: 2, blob_id: 1 })],
            vec![(2, BlobSlot { pages: 2, blob_id: 1 }), (3, BlobSlot { pages: 1, blob_id: 2 })],
            vec![(2, BlobSlot { pages: 0, blob_id: 1 })],
            vec![(2, BlobSlot { pages: 1, blob_id: 0 })],
            vec![(0, BlobSlot { pages: 1, blob_id: 1 })],
        ] {
            let mut c = sample();
            c.blobs.to_mut().clear();
            let mut p = c.encode();
            p.truncate(p.len() - 4);
            p.extend_from_slice(&(blobs.len() as u32).to_le_bytes());
            for (first, slot) in &blobs {
                p.extend_from_slice(&(*first as u64).to_le_bytes());
                p.extend_from_slice(&(slot.pages as u32).to_le_bytes());
                p.extend_from_slice(&slot.blob_id.to_le_bytes());
            }
            assert!(Checkpoint::decode(&p, 2, "f", 12).unwrap_err().is_corruption(), "{blobs:?}");
        }
    }

    #[test]
    fn round_trips_and_damage_is_corruption() {
        let storage = MemStorage::new();
        assert_eq!(Checkpoint::load(&storage).unwrap(), None);
        sample().store(&storage).unwrap();
        assert_eq!(Checkpoint::load(&storage).unwrap(), Some(sample()));
        let payload = sample().encode();
        for len in 0..payload.len() {
            assert!(Checkpoint::decode(&payload[..len], VERSION, "f", 12).is_err(), "{len}");
        }
        for i in 0..payload.len() {
            let mut damaged = payload.clone();
            damaged[i] ^= 0x21;
            let _ = Checkpoint::decode(&damaged, VERSION, "f", 12); // never panics
        }
    }

    /// Found by fuzzing: a checksum-valid replay lsn past the lsn space was refused by the WAL
    /// as an invalid argument, not as corruption of the checkpoint.
    #[test]
    fn a_replay_lsn_past_the_lsn_space_is_corruption_naming_the_checkpoint() {
        let mut checkpoint = sample();
        checkpoint.wal_replay_from_lsn = strata_wal::MAX_LSN + 1;
        let bytes = checkpoint.encode();
        let err = Checkpoint::decode(&bytes, VERSION, "treeline-checkpoint", 0).unwrap_err();
        assert!(
            matches!(&err, Error::Corruption { file, offset, .. }
                if file == "treeline-checkpoint" && *offset == WAL_REPLAY_FROM_LSN as u64),
            "{err:?}"
        );
    }
}
