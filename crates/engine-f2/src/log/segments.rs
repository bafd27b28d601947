//! A log address space stored in fixed-size segment files `{prefix}{segment:016}.seg`
//! (docs/format/f2-logs.md, "Log address space and segment files").

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_core::{Error, Result};
use strata_io::{OpenOptions, Storage, StorageFile};

use super::io_cause::IoCounts;

pub const HOT_PREFIX: &str = "f2-hot-";
pub const COLD_PREFIX: &str = "f2-cold-";
pub const CHUNK_PREFIX: &str = "f2-chunk-";
/// `release_below` punches holes in whole units of this size (a file-system block).
pub const RELEASE_ALIGN_BYTES: u64 = 4096;
/// Each log's file prefix and its number, which its records' checksums carry (with the address)
/// so a record is valid only in the log and at the address it was written to.
const LOG_NUMBERS: [(&str, u8); 3] = [(HOT_PREFIX, 1), (COLD_PREFIX, 2), (CHUNK_PREFIX, 3)];

pub struct SegmentedFile {
    storage: Arc<dyn Storage>,
    prefix: &'static str,
    segment_bytes: u64,
    /// Open segment files; a segment is opened (and created) on first use.
    open: Mutex<BTreeMap<u64, Arc<dyn StorageFile>>>,
    /// With direct reads: a second, O_DIRECT handle per segment that reads go through (writes
    /// stay buffered: records are not aligned to the device; the kernel writes back dirty cached
    /// pages of a range before an O_DIRECT read of it, so reads see every write).
    direct_readers: Option<Mutex<BTreeMap<u64, Arc<dyn StorageFile>>>>,
    /// Segments written since their last fdatasync (`sync_all` syncs only these).
    dirty: Mutex<BTreeSet<u64>>,
    /// Single-record reads from storage (for stats: how many I/Os lookups cost).
    pub point_reads: AtomicU64,
    /// Every read and write of the segment files, by the cause of the thread doing it.
    pub io: IoCounts,
    /// The log appends to the next page only when a record does not fit in the rest of the
    /// current one (`AppendLog`; the hybrid log also turns pages early, `HybridLog::append`), so
    /// a scan can tell padding that ends a page from records that went missing.
    pages_turn_when_full: bool,
    /// From `LOG_NUMBERS`; 0 for another prefix (tests).
    log_number: u8,
    /// Addresses below this were given back to the file system by `release_below` (whole
    /// segments deleted, the rest of the first kept one punched), so a release punches only
    /// what the last one did not.
    released_below: AtomicU64,
}

impl SegmentedFile {
    /// Segments are written through the page cache; see [`SegmentedFile::with_direct_reads`].
    pub fn new(storage: Arc<dyn Storage>, prefix: &'static str, segment_bytes: u64) -> Self {
        SegmentedFile {
            storage,
            prefix,
            segment_bytes,
            open: Mutex::new(BTreeMap::new()),
            direct_readers: None,
            dirty: Mutex::new(BTreeSet::new()),
            point_reads: AtomicU64::new(0),
            io: IoCounts::default(),
            pages_turn_when_full: false,
            log_number: LOG_NUMBERS.iter().find(|(p, _)| *p == prefix).map_or(0, |(_, n)| *n),
            released_below: AtomicU64::new(0),
        }
    }

    /// `Error::Corruption` of the segment holding `address`, at its offset there.
    pub fn corruption(&self, address: u64, what: impl Into<String>) -> Error {
        Error::corruption(self.file_of(address), address % self.segment_bytes, what)
    }

    /// What the checksum of the record at `address` covers before the record's bytes
    /// (docs/format/f2-logs.md, "Record"): the address with the log's number in its top byte.
    /// Addresses stay below 2^56 (64 PiB of one log), so no two logs' values meet.
    pub fn checksum_address(&self, address: u64) -> u64 {
        address ^ (u64::from(self.log_number) << 56)
    }

    /// Marks the log as one whose pages turn only when full (see `pages_turn_when_full`).
    pub fn with_pages_turning_when_full(mut self) -> Self {
        self.pages_turn_when_full = true;
        self
    }

    pub fn pages_turn_when_full(&self) -> bool {
        self.pages_turn_when_full
    }

    /// Reads bypass the page cache (O_DIRECT where the storage supports it), so the engine's
    /// memory budget is all the caching it gets (`EngineConfig::direct_io`).
    pub fn with_direct_reads(mut self, direct: bool) -> Self {
        self.direct_readers = direct.then(|| Mutex::new(BTreeMap::new()));
        self
    }

    pub fn segment_name(&self, segment: u64) -> String {
        format!("{}{segment:016}.seg", self.prefix)
    }

    pub fn parse_segment_name(&self, name: &str) -> Option<u64> {
        let digits = name.strip_prefix(self.prefix)?.strip_suffix(".seg")?;
        (digits.len() == 16 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok())?
    }

    /// The file name holding `address`, for error messages.
    pub fn file_of(&self, address: u64) -> String {
        self.segment_name(address / self.segment_bytes)
    }

    fn segment(&self, segment: u64, create: bool) -> Result<Arc<dyn StorageFile>> {
        let mut open = self.open.lock();
        if let Some(f) = open.get(&segment) {
            return Ok(f.clone());
        }
        let opts = if create { OpenOptions::create() } else { OpenOptions::existing() };
        let file = self.storage.open(&self.segment_name(segment), opts.with_direct(false))?;
        open.insert(segment, file.clone());
        Ok(file)
    }

    /// Writes `bytes` at `address`; the range must not cross a segment boundary.
    pub fn write_at(&self, address: u64, bytes: &[u8]) -> Result<()> {
        let (segment, offset) = (address / self.segment_bytes, address % self.segment_bytes);
        debug_assert!(offset + bytes.len() as u64 <= self.segment_bytes);
        self.segment(segment, true)?.write_at(offset, bytes)?;
        self.io.record_write(bytes.len());
        // Marked after the write: a `sync_all` that took the set before this point leaves the
        // segment dirty for the next one, never missing the write.
        self.dirty.lock().insert(segment);
        Ok(())
    }

    /// Reads `buf.len()` bytes at `address`; the range must not cross a segment boundary. The
    /// engine reads only addresses below a log's tail, which its checkpoint or its own writes say
    /// exist: a missing segment file, or one too short to hold them, is `Corruption` of that
    /// file at that address (data the log vouches for is gone, which no retry mends), not the
    /// bare `Io` error ("No such file or directory", "failed to fill whole buffer") that names
    /// neither.
    pub fn read_at(&self, address: u64, buf: &mut [u8]) -> Result<()> {
        let (segment, offset) = (address / self.segment_bytes, address % self.segment_bytes);
        let len = buf.len();
        self.read_existing(address, buf).map_err(|e| match &e {
            Error::Io { source, .. }
                if matches!(source.kind(), io::ErrorKind::NotFound | io::ErrorKind::UnexpectedEof) =>
            {
                let found = if source.kind() == io::ErrorKind::NotFound {
                    "found no file".to_string()
                } else {
                    let file_len = self.storage.open(&self.segment_name(segment), OpenOptions::existing());
                    let file_len = file_len.and_then(|f| f.len()).map_or_else(|_| "?".into(), |l| l.to_string());
                    format!("found {file_len} bytes")
                };
                Error::corruption(
                    self.segment_name(segment),
                    offset,
                    format!(
                        "the log holds {len} bytes at offset {offset} of this segment (below its tail): expected \
                         at least {} bytes, {found}",
                        offset + len as u64
                    ),
                )
            }
            _ => e,
        })
    }

    fn read_existing(&self, address: u64, buf: &mut [u8]) -> Result<()> {
        let (segment, offset) = (address / self.segment_bytes, address % self.segment_bytes);
        if offset + buf.len() as u64 > self.segment_bytes {
            return Err(Error::io(
                format!("reading {} bytes at address {address} of {}", buf.len(), self.prefix),
                io::Error::new(io::ErrorKind::InvalidInput, "read crosses a segment boundary"),
            ));
        }
        let file = match &self.direct_readers {
            None => self.segment(segment, false)?,
            Some(readers) => {
                let mut readers = readers.lock();
                match readers.get(&segment) {
                    Some(f) => f.clone(),
                    None => {
                        let opts = OpenOptions::existing().with_direct(true);
                        let file = self.storage.open(&self.segment_name(segment), opts)?;
                        readers.insert(segment, file.clone());
                        file
                    }
                }
            }
        };
        file.read_at(offset, buf)?;
        self.io.record_read(buf.len());
        Ok(())
    }

    /// fdatasyncs every segment written since its last sync (segments only read are skipped).
    pub fn sync_all(&self) -> Result<()> {
        let segments = std::mem::take(&mut *self.dirty.lock());
        for (i, &segment) in segments.iter().enumerate() {
            let file = self.open.lock().get(&segment).cloned();
            if let Some(file) = file {
                if let Err(e) = file.sync() {
                    // Still not durable: the next sync must try these again.
                    self.dirty.lock().extend(segments.iter().skip(i));
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Gives every byte below `begin` back to the file system: deletes the segment files wholly
    /// below it and punches the dead front of the segment holding it, down to a
    /// [`RELEASE_ALIGN_BYTES`] boundary (so no live byte at or above `begin` is zeroed). Callers
    /// release only below a durable checkpoint's `begin`: nothing reads there any more but a
    /// lookup that raced a truncation, which already treats any failed read below `begin` as
    /// truncated (a punched range reads as zeros and fails its checksum). Without it a log's
    /// directory holds up to a whole segment of dead bytes per log (64 MiB by default), many
    /// times a small store's data.
    pub fn release_below(&self, begin: u64) -> Result<()> {
        self.remove_outside(begin, u64::MAX)?;
        let segment_start = begin - begin % self.segment_bytes;
        let from = self.released_below.load(SeqCst).max(segment_start);
        let to = begin - begin % RELEASE_ALIGN_BYTES;
        if to > from && self.storage.exists(&self.segment_name(begin / self.segment_bytes))? {
            let file = self.segment(begin / self.segment_bytes, false)?;
            file.punch_hole(from - segment_start, to - from)?;
        }
        self.released_below.fetch_max(to, SeqCst);
        Ok(())
    }

    /// Deletes segment files wholly below `begin` and at or above the segment of `end_exclusive`
    /// rounded up (stale tails), among the files present in storage.
    pub fn remove_outside(&self, begin: u64, end_exclusive: u64) -> Result<u64> {
        let first_kept = begin / self.segment_bytes;
        let last_kept = end_exclusive.saturating_sub(1) / self.segment_bytes;
        let mut removed = 0;
        for name in self.storage.list()? {
            let Some(segment) = self.parse_segment_name(&name) else { continue };
            if segment < first_kept || segment > last_kept {
                self.open.lock().remove(&segment);
                if let Some(readers) = &self.direct_readers {
                    readers.lock().remove(&segment);
                }
                self.dirty.lock().remove(&segment);
                self.storage.remove(&name)?;
                removed += 1;
            }
        }
        Ok(removed)
    }
}
