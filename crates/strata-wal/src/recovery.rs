//! Recovery: reads the segments, replays valid records, tells a torn tail from mid-log corruption,
//! and (when opening) repairs a tolerated torn tail. The rules are in `docs/format/wal.md`.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::sync::Arc;

use strata_core::{Error, Result};
use strata_io::{OpenOptions, Storage, StorageFile};

use crate::format::{RecordSlot, SegmentHeader, SEGMENT_HEADER_BYTES, STATE_KEEPING_VERSION};
use crate::options::{RecoveryReport, WalOptions};
use crate::segment_reader::{SegmentReader, RECOVERY_READ_WINDOW_BYTES};
use crate::state::{self, WalState};
use crate::Lsn;

mod torn_tail;

/// A `.log` segment that exists after recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegmentMeta {
    pub id: u64,
    pub name: String,
    /// `None` for a segment with a bad header that recovery skipped (it precedes every needed record).
    pub first_lsn: Option<Lsn>,
    pub len_bytes: u64,
    /// Bytes from the file's start known durable (header and whole records): what the next WAL
    /// state file records for it. A lower bound; grows at rollover and close.
    pub synced_bytes: u64,
}

/// A `.free` segment waiting for reuse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FreeSegment {
    pub name: String,
    pub len_bytes: u64,
}

/// Where the last segment's records end, when new records may continue it (see `segments.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LogTail {
    /// Offset right after the last valid record of the last segment (where the next one goes).
    pub end_offset: u64,
    /// The lsn the next record of this segment must have.
    pub next_lsn: Lsn,
    /// Every byte from `end_offset` to the end of the file is zero (or there is none). Otherwise
    /// the bytes there must be cut off before new records are written: they may hold records of
    /// an earlier, lost attempt to write the same lsns.
    pub tail_is_zero: bool,
}

#[derive(Debug)]
pub(crate) struct Recovered {
    pub report: RecoveryReport,
    pub segments: Vec<SegmentMeta>,
    /// Set when the last segment that existed before `open` survives recovery with a valid header.
    pub tail: Option<LogTail>,
    pub free: Vec<FreeSegment>,
    pub next_segment_id: u64,
    pub records_checked: u64,
    pub bytes_checked: u64,
    /// A WAL state file exists (see `state.rs`); when not, the writer writes one before it
    /// creates its first segment.
    pub state_exists: bool,
    /// The log ends before the caller's `min_lsn`: it holds no record the caller needs.
    pub behind_caller: bool,
}

/// What the scan is for.
pub(crate) struct ScanParams<'a> {
    pub min_lsn: Lsn,
    /// The first lsn the caller needs; `None` checks whatever the log holds (verify).
    pub required_from: Option<Lsn>,
    /// Repair a tolerated torn tail and sync what is kept (open); `false` changes nothing (verify).
    pub repair: bool,
    pub replay: &'a mut dyn FnMut(&RecordLocation<'_>, &[u8]) -> Result<()>,
}

/// Where a replayed record is: what a caller needs to report a payload it cannot use as
/// corruption of the right file at the right offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordLocation<'a> {
    /// The segment file's name in the storage (e.g. `wal-0000000000000003.log`).
    pub file: &'a str,
    /// Byte offset of the record (its header) in that file; the payload starts
    /// `RECORD_HEADER_BYTES` (docs/format/wal.md) later.
    pub offset: u64,
    pub lsn: Lsn,
}

struct SegmentFile {
    id: u64,
    name: String,
    file: Arc<dyn StorageFile>,
    len_bytes: u64,
    header: std::result::Result<SegmentHeader, String>,
    /// Where the records read by this recovery end (the segment was read, and synced if kept).
    scanned_end: Option<u64>,
}

/// What reading one segment's chain of records found.
struct SegmentScan {
    /// The lsn after the segment's last valid record.
    next_lsn: Lsn,
    /// Offset after the last valid record: the clean end, or the bad record.
    end_offset: usize,
    /// What is wrong with the record at `end_offset`, when the chain broke there.
    bad: Option<String>,
    /// Valid records (data and markers) in the chain.
    records_checked: u64,
}

/// Where the chain of records broke.
enum Break {
    /// Bad record at `offset` of segment `index`, where the chain's next lsn should be.
    Record { index: usize, offset: usize, what: String },
    /// Bad header on segment `index`.
    Header { index: usize, what: String },
}

pub(crate) fn recover(storage: &dyn Storage, opts: &WalOptions, params: ScanParams<'_>) -> Result<Recovered> {
    recover_with_window(storage, opts, params, RECOVERY_READ_WINDOW_BYTES)
}

/// [`recover`], reading segments `read_window_bytes` at a time (tests use tiny windows).
pub(crate) fn recover_with_window(
    storage: &dyn Storage,
    opts: &WalOptions,
    params: ScanParams<'_>,
    read_window_bytes: usize,
) -> Result<Recovered> {
    let (mut listing, mut state) = list_and_check(storage, opts);
    if !params.repair && state.as_ref().is_err_and(Error::is_corruption) {
        // Verify runs beside an open log: a rollover or truncation between our listing and our
        // read of the state file can make them disagree. Both rewrite the state file while the
        // segments it lists exist, so a second look sees a consistent pair unless it is damage.
        (listing, state) = list_and_check(storage, opts);
    }
    let Listing { segments, free_ids, next_segment_id } = listing?;
    let state = state?;
    let mut scan = Scan {
        opts,
        params,
        read_window_bytes,
        segments,
        report: RecoveryReport::default(),
        records_checked: 0,
        bytes_checked: 0,
        state_durable_lsn: state.as_ref().map_or(0, |s| s.durable_lsn),
        state_synced_bytes: state
            .as_ref()
            .map(|s| s.segments.iter().map(|l| (l.id, l.synced_bytes)).collect()),
    };
    let (kept_len, expected, tail) = scan.run(storage)?;

    let free = collect_free_segments(storage, opts, &free_ids, scan.params.repair)?;
    let required = scan.params.required_from.unwrap_or(0);
    let next_lsn = expected.unwrap_or(1).max(scan.params.min_lsn).max(required).max(1);
    scan.report.next_lsn = next_lsn;
    let segments = scan
        .segments
        .into_iter()
        .take(kept_len)
        .map(|s| {
            let listed = state.as_ref().and_then(|state| state.listed(s.id)).map(|l| l.synced_bytes);
            let header_bytes = s.header.as_ref().map_or(0, |_| SEGMENT_HEADER_BYTES as u64);
            let synced_bytes = s.scanned_end.or(listed).unwrap_or(header_bytes).min(s.len_bytes);
            SegmentMeta {
                id: s.id,
                name: s.name,
                first_lsn: s.header.ok().map(|h| h.first_lsn),
                len_bytes: s.len_bytes,
                synced_bytes,
            }
        })
        .collect();
    Ok(Recovered {
        report: scan.report,
        segments,
        tail,
        free,
        next_segment_id,
        records_checked: scan.records_checked,
        bytes_checked: scan.bytes_checked,
        state_exists: state.is_some(),
        behind_caller: expected.is_some_and(|end| end < next_lsn),
    })
}

/// The segment files present (opened, headers read) and the `.free` files.
struct Listing {
    segments: Vec<SegmentFile>,
    free_ids: Vec<u64>,
    next_segment_id: u64,
}

fn list_segments(storage: &dyn Storage, opts: &WalOptions) -> Result<Listing> {
    let names = storage.list()?;
    let mut segment_ids: Vec<u64> = names.iter().filter_map(|n| opts.parse_segment_name(n)).collect();
    segment_ids.sort_unstable();
    let free_ids: Vec<u64> = names.iter().filter_map(|n| opts.parse_free_segment_name(n)).collect();
    let next_segment_id = segment_ids.iter().chain(&free_ids).max().map_or(1, |max| max + 1);
    let mut segments = Vec::with_capacity(segment_ids.len());
    for id in segment_ids {
        segments.push(open_segment(storage, opts, id)?);
    }
    Ok(Listing { segments, free_ids, next_segment_id })
}

/// Lists the segments, then (in this order, see `recover_with_window`) reads the state file and
/// checks the listing against it.
fn list_and_check(storage: &dyn Storage, opts: &WalOptions) -> (Result<Listing>, Result<Option<WalState>>) {
    let listing = list_segments(storage, opts);
    let state = match &listing {
        Ok(listing) => check_state(storage, opts, &listing.segments),
        Err(_) => Ok(None),
    };
    (listing, state)
}

/// The state file rules (docs/format/wal.md, "WAL state file"): every segment it lists exists, is
/// at least as long as its synced bytes and has a valid header with the listed first lsn; a log
/// whose segments are format 2 has a state file. Returns the state (`None` for a log written
/// before state files existed: it keeps the protection of the record rules alone).
fn check_state(
    storage: &dyn Storage,
    opts: &WalOptions,
    segments: &[SegmentFile],
) -> Result<Option<WalState>> {
    let state_name = opts.state_file_name();
    let Some(state) = state::load(storage, opts)? else {
        let newer =
            segments.iter().find(|s| s.header.as_ref().is_ok_and(|h| h.version >= STATE_KEEPING_VERSION));
        return match newer {
            Some(segment) => Err(Error::corruption(
                &state_name,
                0,
                format!(
                    "missing: segment {} has format version {STATE_KEEPING_VERSION}, written by a log that keeps \
                     this file (expected a WAL state file, found none)",
                    segment.name
                ),
            )),
            None => Ok(None),
        };
    };
    for listed in &state.segments {
        let name = opts.segment_name(listed.id);
        let Some(found) = segments.iter().find(|s| s.id == listed.id) else {
            return Err(Error::corruption(
                &name,
                0,
                format!(
                    "missing segment: {state_name} records it as live (records from lsn {}) with {} bytes \
                     synced; expected {} bytes, found no file",
                    listed.first_lsn, listed.synced_bytes, listed.synced_bytes
                ),
            ));
        };
        if found.len_bytes < listed.synced_bytes {
            return Err(Error::corruption(
                &name,
                found.len_bytes,
                format!(
                    "segment shorter than its synced length: {state_name} records {} bytes synced, expected at \
                     least {} bytes, found {}",
                    listed.synced_bytes, listed.synced_bytes, found.len_bytes
                ),
            ));
        }
        match &found.header {
            Err(what) => {
                return Err(Error::corruption(
                    &name,
                    0,
                    format!("{what}; {state_name} records it as created and synced"),
                ))
            }
            Ok(header) if header.first_lsn != listed.first_lsn => {
                return Err(Error::corruption(
                    &name,
                    0,
                    format!(
                        "segment header says first lsn {}, {state_name} records {} (replaced segment)",
                        header.first_lsn, listed.first_lsn
                    ),
                ))
            }
            Ok(_) => {}
        }
    }
    Ok(Some(state))
}

fn open_segment(storage: &dyn Storage, opts: &WalOptions, id: u64) -> Result<SegmentFile> {
    let name = opts.segment_name(id);
    let file = storage.open(&name, OpenOptions::existing())?;
    let len_bytes = file.len()?;
    let header_len = len_bytes.min(SEGMENT_HEADER_BYTES as u64) as usize;
    let mut header_bytes = vec![0u8; header_len];
    file.read_at(0, &mut header_bytes)?;
    let header = SegmentHeader::decode(&header_bytes, id);
    Ok(SegmentFile { id, name, file, len_bytes, header, scanned_end: None })
}

fn collect_free_segments(
    storage: &dyn Storage,
    opts: &WalOptions,
    free_ids: &[u64],
    repair: bool,
) -> Result<Vec<FreeSegment>> {
    let mut free = Vec::new();
    let mut removed_any = false;
    for &id in free_ids {
        let name = opts.free_segment_name(id);
        if !repair {
            continue;
        }
        if free.len() >= opts.recycle_segments {
            storage.remove(&name)?;
            removed_any = true;
            continue;
        }
        let len_bytes = storage.open(&name, OpenOptions::existing())?.len()?;
        free.push(FreeSegment { name, len_bytes });
    }
    if removed_any {
        storage.sync_dir()?;
    }
    Ok(free)
}

struct Scan<'a, 'p> {
    opts: &'a WalOptions,
    params: ScanParams<'p>,
    read_window_bytes: usize,
    segments: Vec<SegmentFile>,
    report: RecoveryReport,
    records_checked: u64,
    bytes_checked: u64,
    /// Every lsn up to this one was durable when the WAL state file was written (0 without one):
    /// the log must hold them all, whatever the markers say.
    state_durable_lsn: Lsn,
    /// (segment id, synced bytes) of each segment the state file lists; `None` without one.
    state_synced_bytes: Option<Vec<(u64, u64)>>,
}

impl Scan<'_, '_> {
    /// Walks the chain of records. Returns how many segments (a prefix of `self.segments`) remain,
    /// the lsn after the last record the log accounts for, and where the last segment ends when it
    /// remains.
    fn run(&mut self, storage: &dyn Storage) -> Result<(usize, Option<Lsn>, Option<LogTail>)> {
        let start = self.first_needed_segment();
        let mut expected: Option<Lsn> = None;
        let mut broken = None;
        let mut tail = None;
        let mut scanned_ends = Vec::new();
        for index in start..self.segments.len() {
            let Some(segment) = self.segments.get(index) else { break };
            let first_lsn = match &segment.header {
                Err(what) => {
                    broken = Some(Break::Header { index, what: what.clone() });
                    break;
                }
                Ok(header) => header.first_lsn,
            };
            self.check_segment_start(segment, first_lsn, expected)?;
            let mut reader = SegmentReader::new(segment.file.as_ref(), self.read_window_bytes)?;
            let scanned =
                replay_segment(&mut reader, &segment.name, first_lsn, &mut self.params, &mut self.report)?;
            self.records_checked += scanned.records_checked;
            expected = Some(scanned.next_lsn);
            scanned_ends.push((index, scanned.end_offset as u64));
            self.report.segments_read += 1;
            self.bytes_checked += reader.file_len() as u64;
            if index + 1 == self.segments.len() {
                // A bad record here is either an error or a torn tail cut off at `end_offset`.
                let tail_is_zero = scanned.bad.is_some() || reader.is_zero_from(scanned.end_offset)?;
                tail = Some(LogTail {
                    end_offset: scanned.end_offset as u64,
                    next_lsn: scanned.next_lsn,
                    tail_is_zero,
                });
            }
            if let Some(what) = scanned.bad {
                broken = Some(Break::Record { index, offset: scanned.end_offset, what });
                break;
            }
        }
        for (index, end) in scanned_ends {
            if let Some(segment) = self.segments.get_mut(index) {
                segment.scanned_end = Some(end);
            }
        }
        let kept_len = match broken {
            None => {
                self.check_clean_end(expected)?;
                self.segments.len()
            }
            Some(broken) => self.resolve_break(storage, broken, expected)?,
        };
        if self.params.repair {
            self.make_kept_durable(storage, start, kept_len)?;
        }
        if kept_len < self.segments.len() {
            tail = None;
        }
        Ok((kept_len, expected, tail))
    }

    /// The last segment whose first lsn is at or below the first lsn the caller needs (the
    /// first segment when none is, or when the caller needs none): where the scan starts.
    fn first_needed_segment(&self) -> usize {
        let required = self.params.required_from.unwrap_or(0);
        self.segments
            .iter()
            .rposition(|s| s.header.as_ref().is_ok_and(|h| h.first_lsn <= required))
            .unwrap_or(0)
    }

    /// A segment starting at `first_lsn` must continue the log where the segment before ended
    /// (`expected`), and the first one scanned must start at or below the first lsn the caller
    /// needs.
    fn check_segment_start(
        &self,
        segment: &SegmentFile,
        first_lsn: Lsn,
        expected: Option<Lsn>,
    ) -> Result<()> {
        match expected {
            None => {
                if let Some(required) = self.params.required_from.filter(|&r| first_lsn > r) {
                    return Err(Error::corruption(
                        &segment.name,
                        0,
                        format!(
                            "the log starts at lsn {first_lsn} but records from lsn {required} are needed \
                             (missing segment, or min_lsn is below an earlier truncate_before)"
                        ),
                    ));
                }
            }
            // Verify (no lsn required) checks each run of segments on its own.
            Some(expected) if expected != first_lsn && self.params.required_from.is_some() => {
                return Err(Error::corruption(
                    &segment.name,
                    0,
                    format!(
                        "segment starts at lsn {first_lsn} but the previous segment ends before lsn \
                         {expected} (missing or out-of-place segment)"
                    ),
                ));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// Makes the records this recovery keeps (segments `start..kept_len`) durable, as the log's
    /// writer assumes when it continues the last segment:
    /// - The last segment's records past what the state file records as synced are written again
    ///   before the sync. After a failed fdatasync (by an earlier open of the log since the machine booted) the kernel
    ///   may have marked their pages clean without writing them: a sync alone would leave a hole
    ///   that a power loss exposes, cutting off every record appended after it. For the same
    ///   reason the segment is cut right after its records: a lost write may have extended the
    ///   file in the page cache only, and a partial record header at the end of the durable file
    ///   would read as damage once later records say they were synced.
    /// - The directory is synced: a segment's name may not be durable yet (a process killed, or a
    ///   directory sync that failed, between its creation or rename and the directory sync).
    fn make_kept_durable(&mut self, storage: &dyn Storage, start: usize, kept_len: usize) -> Result<()> {
        if let Some(last) = kept_len.checked_sub(1).filter(|&last| last >= start) {
            self.rewrite_unverified_records(last)?;
        }
        let kept = self.segments.get(start..kept_len).unwrap_or_default();
        for segment in kept {
            segment.file.sync()?;
        }
        if !kept.is_empty() {
            storage.sync_dir()?;
        }
        Ok(())
    }

    /// Writes segment `index`'s records past its synced length in the state file again (all of
    /// them without one) and cuts the file after them.
    fn rewrite_unverified_records(&mut self, index: usize) -> Result<()> {
        let Some(segment) = self.segments.get(index) else { return Ok(()) };
        let end = segment.scanned_end.unwrap_or(0);
        let synced = self
            .state_synced_bytes
            .as_ref()
            .and_then(|listed| listed.iter().find(|(id, _)| *id == segment.id).map(|&(_, bytes)| bytes))
            .unwrap_or(0);
        if synced >= end {
            return Ok(());
        }
        self.rewrite(segment, synced, end)?;
        if segment.len_bytes > end {
            segment.file.set_len(end)?;
            if let Some(segment) = self.segments.get_mut(index) {
                segment.len_bytes = end;
            }
        }
        Ok(())
    }

    /// Reads `[from, to)` of `segment` and writes the same bytes back, a window at a time.
    fn rewrite(&self, segment: &SegmentFile, from: u64, to: u64) -> Result<()> {
        let mut buf = vec![0u8; self.read_window_bytes.max(1)];
        let mut at = from;
        while at < to {
            let n = (to - at).min(buf.len() as u64) as usize;
            let window = buf.get_mut(..n).unwrap_or_default();
            segment.file.read_at(at, window)?;
            segment.file.write_at(at, window)?;
            at += n as u64;
        }
        Ok(())
    }

    /// A log that ends cleanly (no bad record) must still reach every lsn the state file records
    /// as synced: a segment cut at a record boundary, or whose records were replaced by zeros,
    /// ends cleanly too.
    fn check_clean_end(&self, expected: Option<Lsn>) -> Result<()> {
        if expected.is_none() {
            return self.check_released_records();
        }
        let Some(next_lsn) = expected.filter(|&next| next <= self.state_durable_lsn) else {
            return Ok(());
        };
        let last = self.segments.iter().rev().find(|s| s.scanned_end.is_some());
        let (name, end) = last.map_or((String::new(), 0), |s| (s.name.clone(), s.scanned_end.unwrap_or(0)));
        Err(Error::corruption(
            name,
            end,
            format!(
                "the log ends at lsn {} but {} records every lsn up to {} as synced (expected records up to \
                 lsn {}, found them up to lsn {})",
                next_lsn.saturating_sub(1),
                self.opts.state_file_name(),
                self.state_durable_lsn,
                self.state_durable_lsn,
                next_lsn.saturating_sub(1)
            ),
        ))
    }

    /// No segment holds a record: every lsn the state file records as synced was released
    /// (`truncate_before`, or the segments behind a caller's checkpoint at an earlier open). A
    /// caller that needs one of them lost what held it (its checkpoint or snapshot).
    fn check_released_records(&self) -> Result<()> {
        let Some(required) = self.params.required_from.filter(|&r| r <= self.state_durable_lsn) else {
            return Ok(());
        };
        Err(Error::corruption(
            self.opts.state_file_name(),
            0,
            format!(
                "the log holds no records and released every lsn up to {}, but records from lsn {required} \
                 are needed (the checkpoint or snapshot that held them is missing)",
                self.state_durable_lsn
            ),
        ))
    }

    fn segment(&self, index: usize) -> Result<&SegmentFile> {
        self.segments
            .get(index)
            .ok_or_else(|| Error::invalid(format!("WAL recovery lost track of segment #{index}")))
    }

    fn segment_name(&self, index: usize) -> String {
        self.segments.get(index).map_or_else(String::new, |s| s.name.clone())
    }
}

/// Replays the data records of one segment (markers are checked, not replayed): where its records
/// end, the lsn after the last one, and what is wrong with the record at `end_offset` if the chain
/// broke there. Reads the segment a window at a time; a record straddling windows is read whole.
fn replay_segment(
    reader: &mut SegmentReader<'_>,
    name: &str,
    first_lsn: Lsn,
    params: &mut ScanParams<'_>,
    report: &mut RecoveryReport,
) -> Result<SegmentScan> {
    let mut expected = first_lsn;
    let mut offset = SEGMENT_HEADER_BYTES;
    let mut records_checked = 0;
    let bad = loop {
        match reader.decode_record(offset)? {
            RecordSlot::EndOfFile | RecordSlot::EndMarker => break None,
            RecordSlot::Valid { lsn, .. } if lsn < expected => break None,
            RecordSlot::Valid { lsn, payload, record_bytes, is_durability_marker, .. } if lsn == expected => {
                if lsn >= params.min_lsn && !is_durability_marker {
                    let location = RecordLocation { file: name, offset: offset as u64, lsn };
                    (params.replay)(&location, reader.loaded(payload))?;
                    report.records_replayed += 1;
                }
                report.last_lsn = lsn;
                records_checked += 1;
                expected = lsn.saturating_add(1);
                offset += record_bytes;
            }
            RecordSlot::Valid { lsn, .. } => {
                break Some(format!("found lsn {lsn} where lsn {expected} belongs"));
            }
            RecordSlot::Invalid(what) => break Some(what),
        }
    };
    Ok(SegmentScan { next_lsn: expected, end_offset: offset, bad, records_checked })
}
