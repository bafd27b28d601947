//! `treeline-dwb`: the double-write area. Before a page that the last checkpoint's index
//! references is overwritten in place, its new image is appended here and synced, so a crash
//! that tears the in-place write (SimStorage keeps a random prefix of unsynced writes) can be
//! repaired at open: the latest image of each such page written since the checkpoint is written
//! back in place. Entries carry the checkpoint generation; recovery ignores other generations, so
//! a checkpoint only needs to truncate the file to reclaim its space, not to be correct. Between
//! checkpoints the area rewinds (`DoubleWrite::rewind`) once the data file is synced, so it
//! stays within its limit.
//!
//! Entry (`ENTRY_HEADER_BYTES + P` bytes, back to back from offset 0): `u32` CRC-32C of the rest
//! of the entry, `u32` magic `"TLDW"`, `u64` generation, `u64` page id, `u64` sequence number
//! (0, 1, 2, … within a generation), then the page image.

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_core::{Error, Result};
use strata_io::{OpenOptions, Storage, StorageFile};

use crate::free_space::PageId;
use crate::page::PageSize;

pub const FILE_NAME: &str = "treeline-dwb";
pub const MAGIC: [u8; 4] = *b"TLDW";
pub const CRC: usize = 0;
pub const ENTRY_MAGIC: usize = 4;
pub const GENERATION: usize = 8;
pub const PAGE_ID: usize = 16;
pub const SEQUENCE: usize = 24;
pub const ENTRY_HEADER_BYTES: usize = 32;
/// Most entries one write carries before its sync (a write-back batch's in-place pages, a base
/// page and at most one overflow page per pair, fit in one). Recovery relies on it: the blocks of
/// the write a crash interrupted may reach the disk in any order, so a damaged entry may be
/// followed by valid ones of the same write, but not by one this many entries later.
pub const MAX_ENTRIES_PER_WRITE: usize = 128;

/// The open double-write area.
#[derive(Debug)]
pub struct DoubleWrite {
    file: Arc<dyn StorageFile>,
    size: PageSize,
    generation: u64,
    next_offset: u64,
    next_sequence: u64,
}

fn entry_bytes(size: PageSize) -> usize {
    ENTRY_HEADER_BYTES + size.bytes()
}

fn encode_entry(out: &mut Vec<u8>, generation: u64, sequence: u64, id: PageId, image: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&MAGIC);
    for v in [generation, id, sequence] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(image);
    let crc = crc32c::crc32c(out.get(start + 4..).unwrap_or_default());
    if let Some(slot) = out.get_mut(start..start + 4) {
        slot.copy_from_slice(&crc.to_le_bytes());
    }
}

/// The page id of a valid entry of `generation` with sequence `sequence`, else `None`.
fn check_entry(entry: &[u8], generation: u64, sequence: Option<u64>) -> Option<PageId> {
    let u64_at = |at| strata_core::le_bytes::u64_at(entry, at);
    let crc = strata_core::le_bytes::u32_at(entry, CRC)?;
    let ok = crc == crc32c::crc32c(entry.get(4..)?)
        && entry.get(ENTRY_MAGIC..ENTRY_MAGIC + 4)? == MAGIC
        && u64_at(GENERATION)? == generation
        && sequence.is_none_or(|s| u64_at(SEQUENCE) == Some(s));
    ok.then(|| u64_at(PAGE_ID)).flatten()
}

impl DoubleWrite {
    /// Opens (creating) the area for appends in `generation`, starting empty.
    pub fn open(storage: &dyn Storage, size: PageSize, generation: u64) -> Result<DoubleWrite> {
        let file = storage.open(FILE_NAME, OpenOptions::create())?;
        file.set_len(0)?;
        Ok(DoubleWrite { file, size, generation, next_offset: 0, next_sequence: 0 })
    }

    pub fn bytes(&self) -> u64 {
        self.next_offset
    }

    /// Appends the images of `pages`, in writes of at most [`MAX_ENTRIES_PER_WRITE`] entries each
    /// followed by a sync: after this returns they survive any crash.
    pub fn append_and_sync(&mut self, pages: &[(PageId, &[u8])]) -> Result<()> {
        for group in pages.chunks(MAX_ENTRIES_PER_WRITE) {
            let mut out = Vec::with_capacity(group.len() * entry_bytes(self.size));
            for (i, (id, image)) in group.iter().enumerate() {
                encode_entry(&mut out, self.generation, self.next_sequence + i as u64, *id, image);
            }
            self.file.write_at(self.next_offset, &out)?;
            self.file.sync()?;
            self.next_offset += out.len() as u64;
            self.next_sequence += group.len() as u64;
        }
        Ok(())
    }

    /// Starts `generation` (after a checkpoint made every earlier image unnecessary).
    pub fn reset(&mut self, generation: u64) -> Result<()> {
        self.file.set_len(0)?;
        (self.generation, self.next_offset, self.next_sequence) = (generation, 0, 0);
        Ok(())
    }

    /// Empties the area within its generation, durably, once the data file was synced after
    /// every in-place write its images cover (those pages are intact on disk and need no image
    /// until they are written again: the caller forgets which pages have one). The truncation is
    /// synced before any new entry is appended at offset 0, so recovery never reads the new
    /// entries followed by old ones of the same generation; a crash before it is durable leaves
    /// the old entries, images of pages since the checkpoint that recovery may restore as it
    /// restores any first image (the WAL replay from the checkpoint brings each page's records
    /// up to date).
    pub fn rewind(&mut self) -> Result<()> {
        self.file.set_len(0)?;
        self.file.sync()?;
        (self.next_offset, self.next_sequence) = (0, 0);
        Ok(())
    }

    /// Bytes `pages` images take in the area.
    pub fn bytes_for(&self, pages: usize) -> u64 {
        (pages * entry_bytes(self.size)) as u64
    }

    /// The latest image of each page written in `generation`, read from the area in `storage`.
    /// Entries are read in order up to the first that is not a valid entry of `generation` with
    /// the next sequence number (the end, or the write a crash interrupted, whose entries may
    /// have reached the disk in any order). A valid entry of `generation` at least
    /// [`MAX_ENTRIES_PER_WRITE`] entries after that point was written after the damaged one was
    /// synced, so synced images were damaged: `Error::Corruption`. (Dropping a damaged synced
    /// image closer to the end loses nothing silently: a torn page it would have repaired fails
    /// its checksum when read.)
    pub fn recover(
        storage: &dyn Storage,
        size: PageSize,
        generation: u64,
    ) -> Result<BTreeMap<PageId, Vec<u8>>> {
        let mut images = BTreeMap::new();
        if !storage.exists(FILE_NAME)? {
            return Ok(images);
        }
        let bytes = strata_io::read_all(storage.open(FILE_NAME, OpenOptions::existing())?.as_ref())?;
        let stride = entry_bytes(size);
        let mut entries = bytes.chunks_exact(stride).enumerate();
        let mut end = None;
        for (i, entry) in entries.by_ref() {
            let Some(id) = check_entry(entry, generation, Some(i as u64)) else {
                end = Some(i);
                break;
            };
            let image = entry.get(ENTRY_HEADER_BYTES..).unwrap_or_default().to_vec();
            images.insert(id, image);
        }
        let written_later = |i: usize| end.is_some_and(|end| i >= end + MAX_ENTRIES_PER_WRITE);
        if let Some((i, _)) =
            entries.find(|(i, e)| written_later(*i) && check_entry(e, generation, None).is_some())
        {
            return Err(Error::corruption(
                FILE_NAME,
                (i * stride) as u64,
                "a valid double-write entry follows a damaged one",
            ));
        }
        Ok(images)
    }
}

#[cfg(test)]
mod tests {
    use strata_io::MemStorage;

    use super::*;

    fn image(fill: u8) -> Vec<u8> {
        vec![fill; PageSize::DEFAULT.bytes()]
    }

    /// docs/format/treeline.md, "treeline-dwb": entry fields at their offsets.
    #[test]
    fn offsets_latest_image_wins_and_other_generations_are_ignored() {
        let storage = MemStorage::new();
        let mut dwb = DoubleWrite::open(&storage, PageSize::DEFAULT, 3).unwrap();
        dwb.append_and_sync(&[(5, &image(1)), (6, &image(2))]).unwrap();
        dwb.append_and_sync(&[(5, &image(3))]).unwrap();
        let raw =
            strata_io::read_all(storage.open(FILE_NAME, OpenOptions::existing()).unwrap().as_ref()).unwrap();
        let second = &raw[entry_bytes(PageSize::DEFAULT)..];
        assert_eq!(&second[ENTRY_MAGIC..ENTRY_MAGIC + 4], b"TLDW");
        assert_eq!(second[GENERATION], 3);
        assert_eq!(second[PAGE_ID], 6);
        assert_eq!(second[SEQUENCE], 1);
        assert_eq!(second[ENTRY_HEADER_BYTES], 2);
        let got = DoubleWrite::recover(&storage, PageSize::DEFAULT, 3).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[&5], image(3));
        assert!(DoubleWrite::recover(&storage, PageSize::DEFAULT, 4).unwrap().is_empty());
    }

    #[test]
    fn a_rewound_area_holds_only_the_images_appended_since() {
        let storage = MemStorage::new();
        let mut dwb = DoubleWrite::open(&storage, PageSize::DEFAULT, 2).unwrap();
        dwb.append_and_sync(&[(5, &image(1)), (6, &image(2))]).unwrap();
        dwb.rewind().unwrap();
        assert_eq!(dwb.bytes(), 0);
        assert!(DoubleWrite::recover(&storage, PageSize::DEFAULT, 2).unwrap().is_empty());
        dwb.append_and_sync(&[(7, &image(3))]).unwrap();
        let got = DoubleWrite::recover(&storage, PageSize::DEFAULT, 2).unwrap();
        assert_eq!(got.into_iter().collect::<Vec<_>>(), vec![(7, image(3))], "sequence 0 again, at offset 0");
        assert_eq!(dwb.bytes(), dwb.bytes_for(1));
    }

    #[test]
    fn a_torn_tail_is_dropped_and_damage_before_valid_entries_is_corruption() {
        let storage = MemStorage::new();
        let mut dwb = DoubleWrite::open(&storage, PageSize::DEFAULT, 1).unwrap();
        let pages: Vec<(PageId, Vec<u8>)> =
            (0..MAX_ENTRIES_PER_WRITE as u64 + 2).map(|i| (i, image(i as u8))).collect();
        let refs: Vec<(PageId, &[u8])> = pages.iter().map(|(id, b)| (*id, b.as_slice())).collect();
        dwb.append_and_sync(&refs).unwrap(); // two writes: 128 entries, then 2
        let file = storage.open(FILE_NAME, OpenOptions::existing()).unwrap();
        let stride = entry_bytes(PageSize::DEFAULT) as u64;
        file.set_len((refs.len() as u64 - 1) * stride + 100).unwrap(); // the last entry torn
        assert_eq!(DoubleWrite::recover(&storage, PageSize::DEFAULT, 1).unwrap().len(), refs.len() - 1);
        // Damage in the first entry, whose write was synced before the second write's valid
        // entries were written.
        file.write_at(40, &[0xee]).unwrap();
        assert!(DoubleWrite::recover(&storage, PageSize::DEFAULT, 1).unwrap_err().is_corruption());
    }

    /// Regression: the entries of one write reach a real disk in any order when a crash
    /// interrupts it (SimStorage keeps a prefix, so the kit cannot show it); a valid entry after
    /// a damaged one of the same write is a torn write, not corruption, or the store would not
    /// open after an ordinary power cut. No in-place write has started: they wait for the sync.
    #[test]
    fn entries_of_the_interrupted_write_persisted_out_of_order_are_a_torn_tail() {
        let storage = MemStorage::new();
        let mut dwb = DoubleWrite::open(&storage, PageSize::DEFAULT, 1).unwrap();
        dwb.append_and_sync(&[(5, &image(1))]).unwrap();
        dwb.append_and_sync(&[(6, &image(2)), (7, &image(3)), (8, &image(4))]).unwrap();
        let stride = entry_bytes(PageSize::DEFAULT) as u64;
        let file = storage.open(FILE_NAME, OpenOptions::existing()).unwrap();
        file.write_at(stride + 40, &[0xee]).unwrap(); // the second write's first entry never landed
        let images = DoubleWrite::recover(&storage, PageSize::DEFAULT, 1).unwrap();
        assert_eq!(images.keys().copied().collect::<Vec<_>>(), vec![5], "the synced write's image");
    }
}
