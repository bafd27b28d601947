//! Log address spaces: segment files, the hot hybrid log (mutable / read-only / on-disk regions)
//! and the append-only logs used for the cold log and the hash-chunk log.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

mod append;
mod epoch;
mod hybrid;
pub mod io_cause;
#[cfg(all(test, feature = "loom"))]
mod model;
mod read_cache;
mod released_padding;
mod ring;
mod segments;
mod sync;
mod window;

pub use append::AppendLog;
pub use hybrid::HybridLog;
pub use read_cache::{ReadCache, READ_CACHE_FLAG};
pub use released_padding::REGION_BYTES as RELEASED_PADDING_REGION_BYTES;
pub use segments::{SegmentedFile, CHUNK_PREFIX, COLD_PREFIX, HOT_PREFIX};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

use strata_core::Result;

use crate::record::{self, OwnedRecord, RecordView, Slot};

/// Addresses below this are never used, so address 0 can mean "none".
pub const FIRST_ADDRESS: u64 = 64;

/// First disk read for a record; longer records take a second read.
const FIRST_READ_BYTES: u64 = 512;

/// The device block size assumed when sizing a record's first read: the first read stops at a
/// block boundary (if that leaves room for a header and a short key), so a small record costs one
/// block, not two.
const DEVICE_BLOCK_BYTES: u64 = 4096;
const MIN_FIRST_READ_BYTES: u64 = 64;

/// A log's live address range `[begin, tail)` and how often `begin` moved (shared by the hot log
/// and the append-only logs).
pub struct Bounds {
    begin: AtomicU64,
    tail: AtomicU64,
    /// Incremented *before* `begin` moves, so a reader that saw the new `begin` sees the new count.
    truncations: AtomicU64,
}

impl Bounds {
    pub fn new(begin: u64, tail: u64) -> Bounds {
        Bounds { begin: AtomicU64::new(begin), tail: AtomicU64::new(tail), truncations: AtomicU64::new(0) }
    }

    pub fn begin(&self) -> u64 {
        self.begin.load(SeqCst)
    }

    pub fn tail(&self) -> u64 {
        self.tail.load(SeqCst)
    }

    pub fn set_tail(&self, tail: u64) {
        self.tail.store(tail, SeqCst);
    }

    /// Moves the tail from `seen` to `new` if no one moved it meanwhile (concurrent appends
    /// reserve their space this way).
    pub fn cas_tail(&self, seen: u64, new: u64) -> bool {
        self.tail.compare_exchange(seen, new, SeqCst, SeqCst).is_ok()
    }

    pub fn truncations(&self) -> u64 {
        self.truncations.load(SeqCst)
    }

    /// Moves `begin` forward (after everything live below `new_begin` was copied elsewhere).
    pub fn truncate(&self, new_begin: u64) {
        self.truncations.fetch_add(1, SeqCst);
        self.begin.fetch_max(new_begin, SeqCst);
    }

    /// Bytes between begin and tail.
    pub fn size_bytes(&self) -> u64 {
        self.tail().saturating_sub(self.begin())
    }
}

/// The page holding `tail`, with its live bytes (`[begin, tail)` ∩ the page) read from the
/// segment files: (page start, page bytes). Bytes outside the live range stay zero; they are
/// never read.
pub fn load_tail_page(file: &SegmentedFile, page_size: u64, begin: u64, tail: u64) -> Result<(u64, Vec<u8>)> {
    let start = tail - tail % page_size;
    let mut bytes = vec![0u8; page_size as usize];
    let from = start.max(begin);
    if tail > from {
        let range = (from - start) as usize..(tail - start) as usize;
        file.read_at(from, bytes.get_mut(range).unwrap_or_default())?;
    }
    Ok((start, bytes))
}

/// The record at `address` inside an in-memory page that starts at `page_start`.
fn record_in_page(
    file: &SegmentedFile,
    page: &[u8],
    page_start: u64,
    address: u64,
) -> Result<Option<OwnedRecord>> {
    view_in_page(file, page, page_start, address, OwnedRecord::from_view).map(Some)
}

/// `see` applied to the record at `address` inside an in-memory page that starts at
/// `page_start`, without copying it; no record there is corruption.
fn view_in_page<R>(
    file: &SegmentedFile,
    page: &[u8],
    page_start: u64,
    address: u64,
    see: impl FnOnce(&RecordView<'_>) -> R,
) -> Result<R> {
    let offset = (address - page_start) as usize;
    match page.get(offset..).and_then(RecordView::parse) {
        Some(view) => Ok(see(&view)),
        None => Err(file.corruption(address, "no record at this address of an in-memory log page")),
    }
}

/// The record at `address` from the segment files, or `None` if the log was truncated past it
/// while the read ran (its segment may have been deleted).
fn record_on_disk(
    file: &SegmentedFile,
    page_size: u64,
    bounds: &Bounds,
    address: u64,
) -> Result<Option<OwnedRecord>> {
    match read_record_from_disk(file, page_size, address) {
        Ok(r) => Ok(Some(r)),
        Err(_) if address < bounds.begin() => Ok(None),
        Err(e) => Err(e),
    }
}

/// A copy of the on-disk page starting at `page_start`.
pub fn read_page_from_disk(file: &SegmentedFile, page_size: u64, page_start: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; page_size as usize];
    file.read_at(page_start, &mut buf)?;
    Ok(buf)
}

/// Reads and checks (checksum included) the record at `address` from the segment files.
pub fn read_record_from_disk(file: &SegmentedFile, page_size: u64, address: u64) -> Result<OwnedRecord> {
    let page_end = address - address % page_size + page_size;
    file.point_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let to_block_end = DEVICE_BLOCK_BYTES - address % DEVICE_BLOCK_BYTES;
    let mut first = FIRST_READ_BYTES.min(page_end - address);
    if to_block_end >= MIN_FIRST_READ_BYTES {
        first = first.min(to_block_end);
    }
    let mut buf = vec![0u8; first as usize];
    file.read_at(address, &mut buf)?;
    let corrupt = |what: String| file.corruption(address, what);
    if buf.len() < record::HEADER_BYTES {
        return Err(corrupt(format!("no room for a record at address {address}")));
    }
    let need = {
        let key_len = u32::from_le_bytes(buf.get(4..8).and_then(|b| b.try_into().ok()).unwrap_or_default());
        let value_len =
            u32::from_le_bytes(buf.get(8..12).and_then(|b| b.try_into().ok()).unwrap_or_default());
        record::HEADER_BYTES as u64 + u64::from(key_len) + u64::from(value_len)
    };
    if need > page_end - address {
        return Err(corrupt(format!("record at address {address} overruns its page")));
    }
    if need > first {
        buf.resize(need as usize, 0);
        let rest = buf.get_mut(first as usize..).unwrap_or_default();
        file.read_at(address + first, rest)?;
    }
    // Pad so the slot parser sees the record's stored length.
    let stored = (need as usize).div_ceil(record::RECORD_ALIGN_BYTES) * record::RECORD_ALIGN_BYTES;
    buf.resize(buf.len().max(stored), 0);
    match record::parse_slot(&buf, Some(file.checksum_address(address))) {
        Ok(Slot::Record(view)) => Ok(OwnedRecord::from_view(&view)),
        Ok(Slot::Padding) => Err(corrupt(format!("no record at address {address} (page padding)"))),
        Err(what) => Err(corrupt(format!("{what} (record at address {address})"))),
    }
}

/// `scan_range` over pages that `read_page` reads into buffers of their own.
pub fn scan_read_pages(
    file: &SegmentedFile,
    page_size: u64,
    from: u64,
    to: u64,
    read_page: &dyn Fn(u64) -> Result<Vec<u8>>,
    on_record: &mut dyn FnMut(u64, RecordView<'_>) -> Result<()>,
) -> Result<u64> {
    scan_range(file, page_size, from, to, ScanEnd::LogEnd, &mut |p| read_page(p).map(Cow::Owned), on_record)
}

/// What a scan's end `to` is, which says where padding may be before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanEnd {
    /// The log's tail (or a checkpointed one): the tail never points into padding (a record
    /// that does not fit moves it to the next page), so the records of the page holding `to`,
    /// or ending at it, run back to back from the page start.
    LogEnd,
    /// A page boundary inside the log (a compaction frame).
    PageCut,
}

/// Calls `on_record` for every record in `[from, to)`, reading pages through `read_page` (which
/// returns the whole page starting at the given address, owned or borrowed from a page the
/// caller already holds) and checking every checksum. Padding where records must be is
/// corruption: in the page holding or ending at a log's end (`ScanEnd::LogEnd`), and in a log
/// whose pages turn only when full, padding the next page's first record would have fit.
pub fn scan_range<'p>(
    file: &SegmentedFile,
    page_size: u64,
    from: u64,
    to: u64,
    end: ScanEnd,
    read_page: &mut dyn FnMut(u64) -> Result<Cow<'p, [u8]>>,
    on_record: &mut dyn FnMut(u64, RecordView<'_>) -> Result<()>,
) -> Result<u64> {
    let mut address = from;
    let mut records = 0;
    let mut page: Option<(u64, Cow<'p, [u8]>)> = None;
    // Padding that ended the page before: its address and length.
    let mut gap: Option<(u64, u64)> = None;
    while address < to {
        let page_start = address - address % page_size;
        if page.as_ref().is_none_or(|(start, _)| *start != page_start) {
            page = Some((page_start, read_page(page_start)?));
        }
        let bytes = page.as_ref().map(|(_, b)| b.as_ref()).unwrap_or_default();
        let offset = (address - page_start) as usize;
        let corrupt = |what: String| file.corruption(address, what);
        let rest = bytes.get(offset..).ok_or_else(|| corrupt("short page".to_string()))?;
        match record::parse_slot(rest, Some(file.checksum_address(address))) {
            Ok(Slot::Padding) => {
                check_padding(file, page_size, address, to, end)?;
                gap = Some((address, page_start + page_size - address));
                address = page_start + page_size;
            }
            Ok(Slot::Record(view)) => {
                if let Some((gap_at, gap_bytes)) = gap.take() {
                    check_gap(file, gap_at, gap_bytes, view.stored_len() as u64)?;
                }
                let next = address + view.stored_len() as u64;
                if next > to {
                    return Err(corrupt(format!(
                        "record at address {address} extends past the log tail {to}"
                    )));
                }
                on_record(address, view)?;
                records += 1;
                address = next;
            }
            Err(what) => return Err(corrupt(format!("{what} (record at address {address})"))),
        }
    }
    Ok(records)
}

/// Padding at `address` of a scan to `to`: corruption when `to` is the log's end and the
/// padding's page holds it or ends at it (see `ScanEnd::LogEnd`). A whole empty page below the
/// end in a log whose pages turn only when full fails `check_gap` at the next page's record.
fn check_padding(file: &SegmentedFile, page_size: u64, address: u64, to: u64, end: ScanEnd) -> Result<()> {
    let page_end = address - address % page_size + page_size;
    if end == ScanEnd::PageCut || page_end < to {
        return Ok(());
    }
    Err(file.corruption(
        address,
        format!(
            "page padding at address {address}, below the log's end {to}: the records after it are missing"
        ),
    ))
}

/// `gap_bytes` of padding at `gap_at` ended a page whose next page starts with a record of
/// `next_record_bytes`: in a log whose pages turn only when full the record did not fit there,
/// or records went missing.
pub fn check_gap(file: &SegmentedFile, gap_at: u64, gap_bytes: u64, next_record_bytes: u64) -> Result<()> {
    if !file.pages_turn_when_full() || next_record_bytes > gap_bytes {
        return Ok(());
    }
    Err(file.corruption(gap_at, format!(
            "{gap_bytes} bytes of page padding at address {gap_at} where the next record ({next_record_bytes} \
             bytes) would have fit: the records there are missing"
        ),
    ))
}

#[cfg(test)]
mod scan_tests {
    use std::sync::Arc;

    use strata_io::MemStorage;

    use super::*;
    use strata_core::Error;

    const PAGE: u64 = 4096;

    /// Page 1 of a cold log filled exactly by 64 records of 64 bytes (so the log's end can be the
    /// page's end), each sealed at its address.
    fn full_page(file: &SegmentedFile) -> Vec<u8> {
        let mut page = Vec::new();
        for i in 0..64u64 {
            let mut r = record::encode(&i.to_le_bytes(), Some(&[7u8; 32]), 0);
            assert_eq!(r.len(), 64);
            assert!(record::seal(&mut r, file.checksum_address(PAGE + i * 64)));
            page.extend_from_slice(&r);
        }
        page
    }

    fn scan(file: &SegmentedFile, page: &[u8], to: u64, end: ScanEnd) -> Result<u64> {
        scan_range(file, PAGE, PAGE, to, end, &mut |_| Ok(Cow::Borrowed(page)), &mut |_, _| Ok(()))
    }

    /// A log whose end is a page boundary ends with a full page: padding there (its last records
    /// zeroed) is records gone missing, which a check of only the page holding the end (the next
    /// one) would not see.
    #[test]
    fn padding_in_the_page_ending_at_the_log_s_end_is_corruption() {
        for file in [
            SegmentedFile::new(Arc::new(MemStorage::new()), "f2-cold-", 16 << 10)
                .with_pages_turning_when_full(),
            SegmentedFile::new(Arc::new(MemStorage::new()), "f2-hot-", 16 << 10),
        ] {
            let mut page = full_page(&file);
            assert_eq!(scan(&file, &page, 2 * PAGE, ScanEnd::LogEnd).unwrap(), 64);
            page[62 * 64..].fill(0);
            let err = scan(&file, &page, 2 * PAGE, ScanEnd::LogEnd).unwrap_err();
            assert!(
                matches!(&err, Error::Corruption { what, .. } if what.contains("below the log's end")),
                "{err:?}"
            );
            assert_eq!(
                scan(&file, &page, 2 * PAGE, ScanEnd::PageCut).unwrap(),
                62,
                "a frame may end in padding"
            );
        }
    }

    /// The checksum binds a record to its log too: the same bytes at the same address of another
    /// log's file fail it.
    #[test]
    fn a_record_in_another_log_s_file_fails_its_checksum() {
        let cold = SegmentedFile::new(Arc::new(MemStorage::new()), "f2-cold-", 16 << 10);
        let hot = SegmentedFile::new(Arc::new(MemStorage::new()), "f2-hot-", 16 << 10);
        let page = full_page(&cold);
        assert_eq!(scan(&cold, &page, 2 * PAGE, ScanEnd::LogEnd).unwrap(), 64);
        let err = scan(&hot, &page, 2 * PAGE, ScanEnd::LogEnd).unwrap_err();
        assert!(matches!(&err, Error::Corruption { what, .. } if what.contains("checksum")), "{err:?}");
    }
}
