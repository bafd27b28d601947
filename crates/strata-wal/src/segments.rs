//! The segment files while the log is open: placing encoded records into segments (rollover),
//! continuing the last segment after `open`, creating or recycling segments, and releasing old
//! ones. One writer at a time (a write round, or `truncate_before`) holds the `SegmentWriter`; a
//! sync round only borrows the active segment's handle from it (see [`SegmentWriter::sync_target`]).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{Error, Result};
use strata_io::{OpenOptions, Storage, StorageFile};

use crate::counters::{bump, Counters};
use crate::format::{
    encoded_record_bytes_at, SegmentHeader, END_MARKER, FORMAT_VERSION, SEGMENT_HEADER_BYTES,
};
use crate::options::WalOptions;
use crate::recovery::{FreeSegment, LogTail, SegmentMeta};
use crate::state::{self, StateSegment, WalState};
use crate::Lsn;

/// The smallest preallocation tried before a segment is started without one.
const MIN_PREALLOCATION_BYTES: u64 = 64 << 10;

#[derive(Debug)]
struct ActiveSegment {
    file: Arc<dyn StorageFile>,
    /// Where the next record goes; the end marker sits here.
    write_offset: u64,
    holds_records: bool,
}

#[derive(Debug)]
pub(crate) struct SegmentWriter {
    storage: Arc<dyn Storage>,
    opts: WalOptions,
    /// Segment files in id order. When `active` is set it is the last one.
    segments: Vec<SegmentMeta>,
    active: Option<ActiveSegment>,
    /// Where the last segment's records ended at `open`: the first write continues there when
    /// its first lsn is `next_lsn`. Taken by the first write.
    continuation: Option<LogTail>,
    free: Vec<FreeSegment>,
    next_segment_id: u64,
    counters: Arc<Counters>,
    /// The WAL state file exists. Until it does, none is listed as required by recovery, so the
    /// first segment this writer creates is preceded by a state file (listing what exists):
    /// from then on a format-2 segment without a state file is damage, not a crash window.
    state_exists: bool,
    /// Every lsn up to this one is durable (recovery's, a rollover's or the caller's word):
    /// what the next state file records.
    durable_lsn: Lsn,
}

/// What recovery hands the writer.
pub(crate) struct Recovered {
    pub segments: Vec<SegmentMeta>,
    pub continuation: Option<LogTail>,
    pub free: Vec<FreeSegment>,
    pub next_segment_id: u64,
    pub state_exists: bool,
    pub durable_lsn: Lsn,
}

impl SegmentWriter {
    pub fn new(
        storage: Arc<dyn Storage>,
        opts: WalOptions,
        recovered: Recovered,
        counters: Arc<Counters>,
    ) -> SegmentWriter {
        let Recovered { segments, continuation, free, next_segment_id, state_exists, durable_lsn } =
            recovered;
        let disk_bytes = segments.iter().map(|s| s.len_bytes).chain(free.iter().map(|f| f.len_bytes)).sum();
        counters.disk_bytes.store(disk_bytes, Relaxed);
        SegmentWriter {
            storage,
            opts,
            segments,
            active: None,
            continuation,
            free,
            next_segment_id,
            counters,
            state_exists,
            durable_lsn,
        }
    }

    pub fn set_segment_bytes(&mut self, segment_bytes: u64) {
        self.opts.segment_bytes = segment_bytes;
    }

    pub fn segment_bytes(&self) -> u64 {
        self.opts.segment_bytes
    }

    /// Writes the WAL state file: the segments from `segments[keep_from..]` with their synced
    /// bytes, and `durable_lsn` (raised to the caller's `durable_lsn` first). Durable on return.
    fn store_state(&mut self, durable_lsn: Lsn, keep_from: usize) -> Result<()> {
        self.durable_lsn = self.durable_lsn.max(durable_lsn);
        let segments = self
            .segments
            .iter()
            .skip(keep_from)
            .filter_map(|s| {
                Some(StateSegment { id: s.id, first_lsn: s.first_lsn?, synced_bytes: s.synced_bytes })
            })
            .collect();
        let written = state::store(
            self.storage.as_ref(),
            &self.opts,
            &WalState { durable_lsn: self.durable_lsn, segments },
        )?;
        bump(&self.counters.bytes_written, written);
        self.state_exists = true;
        Ok(())
    }

    /// At `close`, once every record written is durable (`durable_lsn` covers them): records the
    /// active segment's full length of records in the state file. A log that wrote no record
    /// since it was opened writes nothing.
    pub fn record_close(&mut self, durable_lsn: Lsn) -> Result<()> {
        let Some(active) = &self.active else { return Ok(()) };
        let end = active.write_offset;
        if let Some(meta) = self.segments.last_mut() {
            meta.synced_bytes = meta.synced_bytes.max(end);
        }
        self.store_state(durable_lsn, 0)
    }

    /// Writes `records` (encoded records with lsns `first_lsn..=last_lsn`, back to back) to the
    /// log, rolling over to new segments as they fill. At each rollover, before the next segment
    /// is started, `sync_full_segment(file, lsn)` must make the full segment (holding records up
    /// to `lsn`) durable.
    pub fn write_records(
        &mut self,
        records: &mut Vec<u8>,
        first_lsn: Lsn,
        last_lsn: Lsn,
        sync_full_segment: &dyn Fn(&dyn StorageFile, Lsn) -> Result<()>,
    ) -> Result<()> {
        let records_len = records.len();
        records.extend_from_slice(&END_MARKER);
        let (mut pos, mut lsn) = (0usize, first_lsn);
        while pos < records_len {
            if self.active.is_none() {
                match self.continuation.take() {
                    Some(tail) if tail.next_lsn == lsn => self.continue_last_segment(tail)?,
                    _ => self.start_segment(lsn)?,
                };
            }
            let Some(active) = self.active.as_mut() else { continue };
            let room = self.opts.record_space_end().saturating_sub(active.write_offset);
            let (chunk_len, chunk_records) = if (records_len - pos) as u64 <= room {
                (records_len - pos, last_lsn + 1 - lsn)
            } else {
                fitting_records(records, pos, records_len, room, !active.holds_records)
            };
            if chunk_len == 0 && !active.holds_records {
                return Err(Error::invalid(format!("WAL buffer holds a malformed record at lsn {lsn}")));
            }
            if chunk_len > 0 {
                let chunk_end = pos + chunk_len;
                let written = if chunk_end == records_len {
                    let with_marker = records.get(pos..).unwrap_or_default();
                    active.file.write_at(active.write_offset, with_marker)?;
                    with_marker.len()
                } else {
                    let mut with_marker = records.get(pos..chunk_end).unwrap_or_default().to_vec();
                    with_marker.extend_from_slice(&END_MARKER);
                    active.file.write_at(active.write_offset, &with_marker)?;
                    with_marker.len()
                };
                active.write_offset += chunk_len as u64;
                active.holds_records = true;
                let reach_bytes = active.write_offset + END_MARKER.len() as u64;
                bump(&self.counters.bytes_written, written as u64);
                bump(&self.counters.record_writes, 1);
                self.note_active_len(reach_bytes);
                pos = chunk_end;
                lsn += chunk_records;
            }
            if pos < records_len {
                self.finish_segment(sync_full_segment, lsn - 1)?;
            }
        }
        records.truncate(records_len);
        Ok(())
    }

    /// What a sync round fdatasyncs: the active segment's handle and the lsn its first record
    /// has (or would have), or `None` while no segment is active. Every earlier segment was
    /// made durable at its rollover (or by recovery).
    pub fn sync_target(&self) -> Option<(Arc<dyn StorageFile>, Option<Lsn>)> {
        let active = self.active.as_ref()?;
        Some((active.file.clone(), self.segments.last().and_then(|s| s.first_lsn)))
    }

    /// Releases (recycles or removes) every segment whose records are all below `lsn`, never the
    /// last segment, then syncs the directory.
    /// The state file is rewritten without them first (with `durable_lsn`), so it never lists a
    /// segment that is gone.
    pub fn truncate_before(&mut self, lsn: Lsn, durable_lsn: Lsn) -> Result<()> {
        let releasable = self.releasable_before(lsn);
        if releasable == 0 {
            return Ok(());
        }
        self.store_state(durable_lsn, releasable)?;
        let mut released_any = false;
        let result = self.release_segments_before(lsn, &mut released_any);
        if released_any {
            self.storage.sync_dir()?;
        }
        result
    }

    /// How many segments from the front hold only records below `lsn` (never the last one).
    fn releasable_before(&self, lsn: Lsn) -> usize {
        let mut count = 0;
        while count + 1 < self.segments.len() {
            match self.segments.iter().skip(count + 1).find_map(|s| s.first_lsn) {
                Some(bound) if bound <= lsn => count += 1,
                _ => break,
            }
        }
        count
    }

    fn release_segments_before(&mut self, lsn: Lsn, released_any: &mut bool) -> Result<()> {
        while self.segments.len() > 1 {
            // Records of the first segment are all below the next known first lsn.
            match self.segments.iter().skip(1).find_map(|s| s.first_lsn) {
                Some(bound) if bound <= lsn => {}
                _ => break,
            }
            self.release_first_segment()?;
            *released_any = true;
        }
        Ok(())
    }

    /// At open, before any record is written: releases every segment, because the caller's
    /// `min_lsn` lies past all their records (a power loss left the log behind the caller's
    /// checkpoint). Kept, they would stay listed in the state file below a durable lsn the log
    /// never reached, which later recoveries would take for a shortened log. The state file is
    /// rewritten to list none first.
    pub fn release_all_behind(&mut self, durable_lsn: Lsn) -> Result<()> {
        debug_assert!(self.active.is_none(), "release_all_behind after a write");
        if self.segments.is_empty() {
            return Ok(());
        }
        self.continuation = None;
        self.store_state(durable_lsn, self.segments.len())?;
        while !self.segments.is_empty() {
            self.release_first_segment()?;
        }
        self.storage.sync_dir()
    }

    /// Recycles the first segment as a `.free` file, or removes it; on an error it stays listed.
    fn release_first_segment(&mut self) -> Result<()> {
        let segment = self.segments.remove(0);
        let recycle =
            self.free.len() < self.opts.recycle_segments && segment.len_bytes <= self.opts.segment_bytes;
        if recycle {
            let free_name = self.opts.free_segment_name(segment.id);
            if let Err(e) = self.storage.rename(&segment.name, &free_name) {
                self.segments.insert(0, segment);
                return Err(e);
            }
            self.free.push(FreeSegment { name: free_name, len_bytes: segment.len_bytes });
        } else {
            if let Err(e) = self.storage.remove(&segment.name) {
                self.segments.insert(0, segment);
                return Err(e);
            }
            self.counters.disk_bytes.fetch_sub(segment.len_bytes, Relaxed);
            bump(&self.counters.segments_removed, 1);
        }
        Ok(())
    }

    /// Drops the file handles (the log is closed).
    pub fn release_files(&mut self) {
        self.active = None;
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Makes a new segment (recycled when a `.free` file is available) the active one. Its header
    /// and end marker are durable, and its name is in the durable directory, before it returns.
    /// Then the state file is rewritten to list it (with the durable lsn the previous rollover
    /// established): a crash in between leaves the new segment unlisted, which recovery accepts.
    fn start_segment(&mut self, first_lsn: Lsn) -> Result<&mut ActiveSegment> {
        if !self.state_exists {
            self.store_state(0, 0)?;
        }
        let id = self.next_segment_id;
        self.next_segment_id += 1;
        let name = self.opts.segment_name(id);
        let mut start =
            SegmentHeader { segment_id: id, first_lsn, version: FORMAT_VERSION }.encode().to_vec();
        start.extend_from_slice(&END_MARKER);
        let (file, len_bytes) = match self.free.pop() {
            Some(free) => {
                self.counters.disk_bytes.fetch_sub(free.len_bytes, Relaxed);
                let file = self.storage.open(&free.name, OpenOptions::existing())?;
                // Kept under a larger segment size (`set_segment_bytes`): its tail is stale bytes.
                if free.len_bytes > self.opts.segment_bytes {
                    file.set_len(self.opts.segment_bytes)?;
                }
                self.allocate_what_fits(file.as_ref())?;
                file.write_at(0, &start)?;
                file.sync()?;
                let len_bytes = file.len()?;
                drop(file);
                self.storage.rename(&free.name, &name)?;
                self.storage.sync_dir()?;
                bump(&self.counters.segments_recycled, 1);
                (self.storage.open(&name, OpenOptions::existing())?, len_bytes)
            }
            None => {
                let file = self.storage.open(&name, OpenOptions::create())?;
                let prepared = self.prepare_new_segment(file.as_ref(), &start);
                if let Err(e) = prepared {
                    drop(file);
                    // Best effort: an unfinished segment left behind is removed by recovery too.
                    let _ = self.storage.remove(&name);
                    return Err(e);
                }
                bump(&self.counters.segments_created, 1);
                let len_bytes = file.len()?;
                (file, len_bytes)
            }
        };
        bump(&self.counters.bytes_written, start.len() as u64);
        bump(&self.counters.syncs, 1);
        self.counters.disk_bytes.fetch_add(len_bytes, Relaxed);
        let synced_bytes = SEGMENT_HEADER_BYTES as u64;
        self.segments.push(SegmentMeta { id, name, first_lsn: Some(first_lsn), len_bytes, synced_bytes });
        self.store_state(0, 0)?;
        Ok(self.active.insert(ActiveSegment {
            file,
            write_offset: SEGMENT_HEADER_BYTES as u64,
            holds_records: false,
        }))
    }

    /// Makes the last segment found by recovery the active one, with the next record going right
    /// after its last valid record. Recovery synced the segment, so what it read is what is
    /// durable; bytes after the end that are not zero are cut off durably first, because they may
    /// hold records of an earlier, lost attempt at the same lsns (written out of order before a
    /// crash), which a torn write of the new records could otherwise expose. A segment shortened
    /// by a repair (or by that cut) is extended again when preallocation is on.
    fn continue_last_segment(&mut self, tail: LogTail) -> Result<&mut ActiveSegment> {
        let Some(meta) = self.segments.last() else {
            return Err(Error::invalid("WAL has no segment to continue"));
        };
        let file = self.storage.open(&meta.name, OpenOptions::existing())?;
        let mut len_bytes = file.len()?;
        if len_bytes < tail.end_offset {
            return Err(Error::invalid(format!(
                "WAL segment {} shrank to {len_bytes} bytes after recovery read records up to {}",
                meta.name, tail.end_offset
            )));
        }
        if !tail.tail_is_zero {
            file.set_len(tail.end_offset)?;
            file.sync()?;
            bump(&self.counters.syncs, 1);
            len_bytes = tail.end_offset;
        }
        if self.opts.preallocate && len_bytes < self.opts.segment_bytes {
            self.allocate_what_fits(file.as_ref())?;
            len_bytes = file.len()?;
        }
        self.set_last_segment_len(len_bytes);
        Ok(self.active.insert(ActiveSegment {
            file,
            write_offset: tail.end_offset,
            holds_records: tail.end_offset > SEGMENT_HEADER_BYTES as u64,
        }))
    }

    /// Preallocation (when on) of `segment_bytes`, or of what fits: on a no-space error it halves
    /// the request down to [`MIN_PREALLOCATION_BYTES`], then gives up preallocating. A segment is
    /// only a size target — writes extend the file — so a nearly full disk still takes the
    /// records that fit instead of refusing every write because 64 MiB do not.
    fn allocate_what_fits(&self, file: &dyn StorageFile) -> Result<()> {
        if !self.opts.preallocate {
            return Ok(());
        }
        let mut bytes = self.opts.segment_bytes;
        loop {
            match file.allocate(bytes) {
                Ok(()) => return Ok(()),
                Err(e) if e.is_no_space() && bytes > MIN_PREALLOCATION_BYTES => bytes /= 2,
                Err(e) if e.is_no_space() => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    fn prepare_new_segment(&self, file: &dyn StorageFile, start: &[u8]) -> Result<()> {
        self.allocate_what_fits(file)?;
        file.write_at(0, start)?;
        file.sync()?;
        self.storage.sync_dir()
    }

    /// Makes the full active segment (holding records up to `last_lsn`) durable and forgets it;
    /// the next write starts a new segment.
    fn finish_segment(
        &mut self,
        sync_full_segment: &dyn Fn(&dyn StorageFile, Lsn) -> Result<()>,
        last_lsn: Lsn,
    ) -> Result<()> {
        if let Some(active) = &self.active {
            sync_full_segment(active.file.as_ref(), last_lsn)?;
            let end = active.write_offset;
            if let Some(meta) = self.segments.last_mut() {
                meta.synced_bytes = meta.synced_bytes.max(end);
            }
            self.durable_lsn = self.durable_lsn.max(last_lsn);
        }
        self.active = None;
        Ok(())
    }

    /// Records a new length of the last segment file (shorter or longer).
    fn set_last_segment_len(&mut self, len_bytes: u64) {
        if let Some(meta) = self.segments.last_mut() {
            let old = std::mem::replace(&mut meta.len_bytes, len_bytes);
            self.counters.disk_bytes.fetch_add(len_bytes, Relaxed);
            self.counters.disk_bytes.fetch_sub(old, Relaxed);
        }
    }

    fn note_active_len(&mut self, reach_bytes: u64) {
        if let Some(meta) = self.segments.last_mut() {
            if reach_bytes > meta.len_bytes {
                self.counters.disk_bytes.fetch_add(reach_bytes - meta.len_bytes, Relaxed);
                meta.len_bytes = reach_bytes;
            }
        }
    }
}

/// How many bytes (and records) starting at `pos` fit into `room` bytes. When nothing fits and
/// the segment is still empty, the first record is taken anyway: it gets the segment to itself.
fn fitting_records(records: &[u8], pos: usize, end: usize, room: u64, segment_empty: bool) -> (usize, u64) {
    let (mut len, mut count) = (0usize, 0u64);
    while pos + len < end {
        let Some(next) = encoded_record_bytes_at(records, pos + len) else { break };
        if (len + next) as u64 > room {
            if count == 0 && segment_empty {
                return (next.min(end - pos), 1);
            }
            break;
        }
        len += next;
        count += 1;
    }
    (len, count)
}
