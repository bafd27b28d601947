//! `treeline-data`: page 0 is the file header (a `small_file` record naming the page size), pages
//! `1..` are base and overflow pages (docs/format/treeline.md). Opened with O_DIRECT when
//! `EngineConfig::direct_io`; every write is a whole page at a page-aligned offset, so it meets
//! O_DIRECT's alignment rules for every page size.

use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::Arc;

use strata_core::{Error, Result};
use strata_io::{OpenOptions, Storage, StorageFile};
use strata_kit::small_file::{CrcLayout, SmallFileFormat, OVERHEAD_BYTES};

use crate::free_space::{page_offset, PageId};
use crate::page::{Page, PageSize};

pub const FILE_NAME: &str = "treeline-data";
pub const HEADER_VERSION: u32 = 1;
/// Header payload: `u8` page size log2, then 7 zero bytes.
pub const HEADER_PAYLOAD_BYTES: usize = 8;
pub const HEADER_BYTES: usize = OVERHEAD_BYTES + HEADER_PAYLOAD_BYTES;

pub const HEADER_FORMAT: SmallFileFormat = SmallFileFormat {
    magic: b"TLDATA\0\0",
    versions: 1..=1,
    crc: CrcLayout::Trailing,
    payload_bytes: Some(HEADER_PAYLOAD_BYTES),
};

/// The open data file. Its page size changes only while no checkpoint references any of its
/// pages (`reformat`), before any page of the new size is written.
#[derive(Debug)]
pub struct DataFile {
    file: Arc<dyn StorageFile>,
    page_size_log2: AtomicU8,
}

/// Truncates `file` to its header page for `size`, written and synced.
fn write_header(file: &dyn StorageFile, size: PageSize) -> Result<()> {
    file.set_len(0)?;
    let mut header = vec![0u8; size.bytes()];
    let mut payload = [0u8; HEADER_PAYLOAD_BYTES];
    payload[0] = size.log2();
    let encoded = HEADER_FORMAT.encode(HEADER_VERSION, &payload);
    if let Some(dst) = header.get_mut(..encoded.len()) {
        dst.copy_from_slice(&encoded);
    }
    file.write_at(0, &header)?;
    file.sync()
}

impl DataFile {
    /// Creates (or re-creates) the file with its header page, synced.
    pub fn create(storage: &dyn Storage, size: PageSize, direct: bool) -> Result<DataFile> {
        let file = storage.open(FILE_NAME, OpenOptions::create().with_direct(direct))?;
        write_header(file.as_ref(), size)?;
        storage.sync_dir()?;
        Ok(DataFile { file, page_size_log2: AtomicU8::new(size.log2()) })
    }

    /// Re-creates the file as a header for `size` pages, dropping every page. Only for a file
    /// no checkpoint references a page of (a new store choosing its page size at its first
    /// write-back): those pages hold nothing recovery needs, as the WAL holds their records.
    pub fn reformat(&self, size: PageSize) -> Result<()> {
        write_header(self.file.as_ref(), size)?;
        self.page_size_log2.store(size.log2(), Release);
        Ok(())
    }

    /// Opens the file and reads its page size from the header. Called only when a checkpoint
    /// exists, which references the file: its absence is damage, not a new store.
    pub fn open(storage: &dyn Storage, direct: bool) -> Result<DataFile> {
        if !storage.exists(FILE_NAME)? {
            return Err(Error::corruption(FILE_NAME, 0, "missing, but the checkpoint references its pages"));
        }
        let file = storage.open(FILE_NAME, OpenOptions::existing().with_direct(direct))?;
        let mut header = [0u8; HEADER_BYTES];
        file.read_at(0, &mut header).map_err(|_| Error::corruption(FILE_NAME, 0, "header truncated"))?;
        let decoded = HEADER_FORMAT.decode(FILE_NAME, &header)?;
        let log2 = decoded.payload.first().copied().unwrap_or_default();
        let size = PageSize::from_log2(log2).ok_or_else(|| {
            Error::corruption(FILE_NAME, decoded.payload_offset, format!("page size log2 {log2}"))
        })?;
        if decoded.payload.iter().skip(1).any(|&b| b != 0) {
            return Err(Error::corruption(
                FILE_NAME,
                decoded.payload_offset + 1,
                "reserved bytes are not zero",
            ));
        }
        Ok(DataFile { file, page_size_log2: AtomicU8::new(size.log2()) })
    }

    pub fn page_size(&self) -> PageSize {
        PageSize::from_log2(self.page_size_log2.load(Acquire)).unwrap_or(PageSize::DEFAULT)
    }

    fn offset_of(&self, id: PageId) -> Result<u64> {
        page_offset(id, self.page_size())
            .ok_or_else(|| Error::corruption(FILE_NAME, 0, format!("page id {id} overflows")))
    }

    /// The raw bytes of page `id`.
    pub fn read_raw(&self, id: PageId) -> Result<Vec<u8>> {
        self.read_bytes(id, 1)
    }

    /// The raw bytes of pages `first .. first + count`, in one read; a read past the end of
    /// the file is corruption (the index referenced a page the file does not have).
    fn read_bytes(&self, first: PageId, count: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.page_size().bytes() * count];
        let offset = self.offset_of(first)?;
        self.file.read_at(offset, &mut buf).map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof => {
                Error::corruption(FILE_NAME, offset, format!("page {first} is past the end of the file"))
            }
            other => other,
        })?;
        Ok(buf)
    }

    /// The raw bytes of the `pages`-page run at `first` (a blob run), in one read.
    pub fn read_run(&self, first: PageId, pages: u64) -> Result<Vec<u8>> {
        let count = usize::try_from(pages)
            .ok()
            .filter(|&n| n <= crate::blob::MAX_VALUE_BYTES / PageSize::MIN + 1)
            .ok_or_else(|| Error::corruption(FILE_NAME, 0, format!("a run of {pages} pages")))?;
        self.read_bytes(first, count)
    }

    /// Page `id`, validated.
    pub fn read_page(&self, id: PageId) -> Result<Page> {
        let bytes = self.read_raw(id)?;
        Page::open(bytes, FILE_NAME, self.offset_of(id)?)
    }

    /// Pages `first .. first + count`, validated, read in one I/O (a segment's base pages are
    /// contiguous: page grouping turns a scan into one sequential read).
    pub fn read_pages(&self, first: PageId, count: usize) -> Result<Vec<Page>> {
        let page_bytes = self.page_size().bytes();
        let offset = self.offset_of(first)?;
        let buf = self.read_bytes(first, count)?;
        let mut pages = Vec::with_capacity(count);
        for (i, bytes) in buf.chunks_exact(page_bytes).enumerate() {
            pages.push(Page::open(bytes.to_vec(), FILE_NAME, offset + (i * page_bytes) as u64)?);
        }
        Ok(pages)
    }

    pub fn write_page(&self, id: PageId, bytes: &[u8]) -> Result<()> {
        self.file.write_at(self.offset_of(id)?, bytes)
    }

    pub fn sync(&self) -> Result<()> {
        self.file.sync()
    }

    pub fn len_bytes(&self) -> Result<u64> {
        self.file.len()
    }

    /// Gives the blocks of the free runs `(first page, pages)` below `end` back to the file
    /// system (holes: the file's length stays), so free pages inside the file cost no disk
    /// space until they are reused. The caller guarantees that neither the index nor the durable
    /// checkpoint references them. A run reaching `end` is cut at it (`give_back_pages_from`
    /// takes the rest).
    pub fn give_back_free_runs(&self, runs: &[(PageId, u64)], end: PageId) -> Result<()> {
        let page_bytes = self.page_size().bytes() as u64;
        for &(first, pages) in runs.iter().filter(|(first, _)| *first < end) {
            let pages = pages.min(end - first);
            self.file.punch_hole(self.offset_of(first)?, pages * page_bytes)?;
        }
        Ok(())
    }

    /// Gives the pages from `end` on back to the file system, if the file reaches past it. The
    /// caller guarantees no page there is referenced by the index or by the durable checkpoint.
    pub fn give_back_pages_from(&self, end: PageId) -> Result<()> {
        let end_bytes = self.offset_of(end)?;
        if self.file.len()? > end_bytes {
            self.file.set_len(end_bytes)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use strata_io::MemStorage;

    use super::*;

    /// docs/format/treeline.md, "The data file header".
    #[test]
    fn header_offsets_and_damage() {
        let storage = MemStorage::new();
        let size = PageSize::new(8192).unwrap();
        drop(DataFile::create(&storage, size, false).unwrap());
        let bytes =
            strata_io::read_all(storage.open(FILE_NAME, OpenOptions::existing()).unwrap().as_ref()).unwrap();
        assert_eq!(bytes.len(), 8192);
        assert_eq!(&bytes[..8], b"TLDATA\0\0");
        assert_eq!(&bytes[8..12], &1u32.to_le_bytes());
        assert_eq!(bytes[12], 13);
        let crc = crc32c::crc32c(&bytes[..20]);
        assert_eq!(&bytes[20..24], &crc.to_le_bytes());
        assert_eq!(DataFile::open(&storage, false).unwrap().page_size(), size);
        let file = storage.open(FILE_NAME, OpenOptions::existing()).unwrap();
        file.write_at(12, &[14]).unwrap();
        assert!(DataFile::open(&storage, false).unwrap_err().is_corruption());
        let data = DataFile::open(&storage, false);
        assert!(data.is_err());
    }

    /// A new store choosing its page size: the file becomes a header for the new size, and its
    /// pages are gone.
    #[test]
    fn reformat_leaves_a_header_for_the_new_size_only() {
        let storage = MemStorage::new();
        let data = DataFile::create(&storage, PageSize::DEFAULT, false).unwrap();
        data.write_page(5, &[7u8; 4096]).unwrap();
        assert_eq!(data.len_bytes().unwrap(), 6 * 4096);
        let big = PageSize::new(16384).unwrap();
        data.reformat(big).unwrap();
        assert_eq!((data.page_size(), data.len_bytes().unwrap()), (big, 16384));
        assert_eq!(DataFile::open(&storage, false).unwrap().page_size(), big);
    }
}
