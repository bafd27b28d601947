//! An append-only log with one in-memory tail page: the cold log and the hash-chunk log.
//! Appends may come from several threads (the workers of a compaction round): each reserves its
//! address and copies its bytes under the tail-page mutex, so addresses are handed out in append
//! order and records never overlap. Readers never block on disk reads of others.

use parking_lot::Mutex;
use strata_core::{Error, Result};

use super::{
    load_tail_page, read_page_from_disk, record_in_page, record_on_disk, scan_read_pages, Bounds,
    SegmentedFile,
};
use crate::record::{self, OwnedRecord, RecordView};

pub struct AppendLog {
    pub file: SegmentedFile,
    page_size: u64,
    bounds: Bounds,
    /// The page holding `tail`. Bytes below its start are in the segment files (handed to the OS).
    tail_page: Mutex<TailPage>,
}

struct TailPage {
    start: u64,
    bytes: Vec<u8>,
    /// Bytes of this page (from its start) already handed to the segment files.
    written_len: u64,
    /// The whole page is in its segment file (its first write covers the whole page, zero
    /// padding included, so segment files always hold whole pages).
    on_disk: bool,
}

impl AppendLog {
    /// Opens a log whose durable contents are `[begin, tail)`; loads the tail page.
    pub fn open(file: SegmentedFile, page_size: u64, begin: u64, tail: u64) -> Result<AppendLog> {
        let file = file.with_pages_turning_when_full();
        let (start, bytes) = load_tail_page(&file, page_size, begin, tail)?;
        // Live bytes in the page mean it was written whole once; an empty log (or one truncated
        // to its tail) may have no segment file for it yet.
        let on_disk = tail > start.max(begin);
        Ok(AppendLog {
            file,
            page_size,
            bounds: Bounds::new(begin, tail),
            tail_page: Mutex::new(TailPage { start, bytes, written_len: tail - start, on_disk }),
        })
    }

    pub fn begin(&self) -> u64 {
        self.bounds.begin()
    }

    pub fn tail(&self) -> u64 {
        self.bounds.tail()
    }

    pub fn truncations(&self) -> u64 {
        self.bounds.truncations()
    }

    pub fn page_size(&self) -> u64 {
        self.page_size
    }

    /// Appends an encoded record (at most a page), sealed at its address (`record::seal`), and
    /// returns the address.
    pub fn append(&self, bytes: &mut [u8]) -> Result<u64> {
        let body_len = record::body_len(bytes)
            .ok_or_else(|| Error::invalid("log append: the bytes are not a record"))?;
        let len = bytes.len() as u64;
        if len > self.page_size {
            return Err(Error::invalid(format!(
                "record of {len} bytes exceeds the page size {}",
                self.page_size
            )));
        }
        let mut page = self.tail_page.lock();
        let mut tail = self.tail();
        if tail - page.start + len > self.page_size {
            // The whole page, zero padding included: segment files hold whole pages.
            let page_end = page.start + self.page_size;
            write_unwritten(&self.file, &mut page, page_end)?;
            page.start += self.page_size;
            page.bytes.fill(0);
            page.written_len = 0;
            page.on_disk = false;
            tail = page.start;
        }
        record::seal_body(bytes, body_len, self.file.checksum_address(tail));
        let offset = (tail - page.start) as usize;
        let slot = page.bytes.get_mut(offset..offset + bytes.len()).unwrap_or_default();
        slot.copy_from_slice(bytes);
        self.bounds.set_tail(tail + len);
        Ok(tail)
    }

    /// Writes the tail page's bytes not yet written to the OS (not synced); nothing when no
    /// record was appended since the last flush.
    pub fn flush(&self) -> Result<()> {
        let mut page = self.tail_page.lock();
        write_unwritten(&self.file, &mut page, self.tail())
    }

    /// The record at `address`, or `None` if the log was truncated past it.
    pub fn read(&self, address: u64) -> Result<Option<OwnedRecord>> {
        if address < self.begin() {
            return Ok(None);
        }
        {
            let page = self.tail_page.lock();
            if address >= page.start {
                return record_in_page(&self.file, &page.bytes, page.start, address);
            }
        }
        record_on_disk(&self.file, self.page_size, &self.bounds, address)
    }

    /// A copy of the page starting at `page_start`.
    pub fn read_page(&self, page_start: u64) -> Result<Vec<u8>> {
        {
            let page = self.tail_page.lock();
            if page_start == page.start {
                return Ok(page.bytes.clone());
            }
        }
        read_page_from_disk(&self.file, self.page_size, page_start)
    }

    /// Visits every record in `[from, to)`, checking checksums.
    pub fn scan(
        &self,
        from: u64,
        to: u64,
        on_record: &mut dyn FnMut(u64, RecordView<'_>) -> Result<()>,
    ) -> Result<u64> {
        scan_read_pages(&self.file, self.page_size, from, to, &|p| self.read_page(p), on_record)
    }

    /// Moves `begin` forward (after everything live below `new_begin` was copied elsewhere).
    pub fn truncate(&self, new_begin: u64) {
        self.bounds.truncate(new_begin);
    }

    /// Bytes between begin and tail.
    pub fn size_bytes(&self) -> u64 {
        self.bounds.size_bytes()
    }

    pub fn memory_bytes(&self) -> u64 {
        self.page_size
    }
}

/// Writes the tail page's bytes from `written_len` up to address `until` to the segment files
/// (the whole page on its first write, then only the bytes appended since).
fn write_unwritten(file: &SegmentedFile, page: &mut TailPage, until: u64) -> Result<()> {
    let end = until - page.start;
    if !page.on_disk {
        file.write_at(page.start, &page.bytes)?;
        page.on_disk = true;
    } else if end > page.written_len {
        let range = page.written_len as usize..end as usize;
        file.write_at(page.start + page.written_len, page.bytes.get(range).unwrap_or_default())?;
    }
    page.written_len = page.written_len.max(end);
    Ok(())
}
