//! Torn tail or corruption: when the chain of records breaks, what follows the break decides
//! (docs/format/wal.md, "Recovery rules"). A tolerated break drops what follows it.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::ops::RangeInclusive;

use strata_core::{Error, RecoveryMode, Result};
use strata_io::Storage;

use super::{Break, Scan, SegmentFile};
use crate::format::{RecordSlot, RECORD_ALIGNMENT_BYTES, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use crate::segment_reader::SegmentReader;
use crate::Lsn;

impl Scan<'_, '_> {
    /// Classifies a break (see the recovery rules) and, for a tolerated one, drops what follows it.
    /// Returns how many segments remain.
    pub(super) fn resolve_break(
        &mut self,
        storage: &dyn Storage,
        broken: Break,
        expected: Option<Lsn>,
    ) -> Result<usize> {
        let broken_lsn = expected.or(self.params.required_from).unwrap_or(1).max(1);
        self.refuse_break_in_durable_lsns(&broken, broken_lsn)?;
        match broken {
            Break::Header { index, what } => self.resolve_header_break(storage, index, &what, broken_lsn),
            Break::Record { index, offset, what } => {
                self.resolve_record_break(storage, index, offset, &what, broken_lsn)
            }
        }
    }

    /// A break at an lsn the state file records as durable is corruption, whatever follows it.
    fn refuse_break_in_durable_lsns(&self, broken: &Break, broken_lsn: Lsn) -> Result<()> {
        if broken_lsn > self.state_durable_lsn {
            return Ok(());
        }
        let (index, offset, what) = match broken {
            Break::Header { index, what } => (*index, 0, what),
            Break::Record { index, offset, what } => (*index, *offset, what),
        };
        Err(Error::corruption(
            self.segment_name(index),
            offset as u64,
            format!(
                "{what}; lsn {broken_lsn} had been made durable ({} records every lsn up to {} as synced), \
                 so this is corruption, not a torn tail",
                self.opts.state_file_name(),
                self.state_durable_lsn
            ),
        ))
    }

    /// A bad header is a torn tail only on the last segment (a crash while creating it), and only
    /// if no record in its body says lsn `broken_lsn` was synced; `AbsoluteConsistency` also
    /// refuses one whose body holds records from `broken_lsn` on. The segment is removed.
    fn resolve_header_break(
        &mut self,
        storage: &dyn Storage,
        index: usize,
        what: &str,
        broken_lsn: Lsn,
    ) -> Result<usize> {
        let name = self.segment_name(index);
        if index != self.segments.len().saturating_sub(1) {
            return Err(Error::corruption(name, 0, format!("{what} (not the last segment)")));
        }
        let mut reader = SegmentReader::new(self.segment(index)?.file.as_ref(), self.read_window_bytes)?;
        let nonzero = reader.nonzero_prefix_bytes(0)?;
        let plausible = self.plausible_lsns(broken_lsn);
        let body = scan_records(&mut reader, SEGMENT_HEADER_BYTES, nonzero as usize, &plausible)?;
        if let Some(found) = body.iter().find(|r| r.synced_lsn >= broken_lsn) {
            return Err(Error::corruption(&name, 0, found.evidence(what, broken_lsn, &name)));
        }
        let holds_records = body.iter().any(|r| r.lsn >= broken_lsn);
        if holds_records && self.opts.recovery_mode == RecoveryMode::AbsoluteConsistency {
            return Err(Error::corruption(name, 0, format!("torn tail: {what}")));
        }
        self.report.torn_tail_bytes_dropped += nonzero;
        if self.params.repair {
            storage.remove(&name)?;
            storage.sync_dir()?;
        }
        Ok(index)
    }

    /// A bad record at `offset` of segment `index` is a torn tail if no record after it (in that
    /// segment or a later one) says lsn `broken_lsn` was synced, and the recovery mode drops torn
    /// tails: the segment is cut at the bad record and every later segment is removed.
    fn resolve_record_break(
        &mut self,
        storage: &dyn Storage,
        index: usize,
        offset: usize,
        what: &str,
        broken_lsn: Lsn,
    ) -> Result<usize> {
        let dropped_bytes = self.bytes_after_break(index, offset, what, broken_lsn)?;
        if self.opts.recovery_mode == RecoveryMode::AbsoluteConsistency {
            return Err(Error::corruption(
                self.segment_name(index),
                offset as u64,
                format!("torn tail at lsn {broken_lsn}: {what}"),
            ));
        }
        self.report.torn_tail_bytes_dropped += dropped_bytes;
        if self.params.repair {
            self.cut_log_at(storage, index, offset)?;
        }
        if let Some(segment) = self.segments.get_mut(index) {
            segment.len_bytes = offset as u64;
        }
        Ok(index + 1)
    }

    /// The non-zero bytes from a bad record at `offset` of segment `index` to the end of the log,
    /// which dropping the torn tail would drop. Corruption (of segment `index` at `offset`) if
    /// any record among them says lsn `broken_lsn` was synced.
    fn bytes_after_break(&self, index: usize, offset: usize, what: &str, broken_lsn: Lsn) -> Result<u64> {
        let name = self.segment_name(index);
        let plausible = self.plausible_lsns(broken_lsn);
        let mut reader = SegmentReader::new(self.segment(index)?.file.as_ref(), self.read_window_bytes)?;
        let mut dropped_bytes = reader.nonzero_prefix_bytes(offset)?;
        let nonzero_end = offset + dropped_bytes as usize;
        let same_segment =
            scan_records(&mut reader, offset + RECORD_ALIGNMENT_BYTES, nonzero_end, &plausible)?;
        if let Some(found) = same_segment.iter().find(|r| r.synced_lsn >= broken_lsn) {
            return Err(Error::corruption(&name, offset as u64, found.evidence(what, broken_lsn, &name)));
        }
        for later in self.segments.iter().skip(index + 1) {
            let mut later_reader = SegmentReader::new(later.file.as_ref(), self.read_window_bytes)?;
            let nonzero = later_reader.nonzero_prefix_bytes(0)?;
            let records =
                scan_records(&mut later_reader, SEGMENT_HEADER_BYTES, nonzero as usize, &plausible)?;
            if let Some(found) = records.iter().find(|r| r.synced_lsn >= broken_lsn) {
                return Err(Error::corruption(
                    &name,
                    offset as u64,
                    found.evidence(what, broken_lsn, &later.name),
                ));
            }
            dropped_bytes += nonzero;
        }
        Ok(dropped_bytes)
    }

    /// Durably removes every segment after `index` and cuts segment `index` at `offset`.
    fn cut_log_at(&self, storage: &dyn Storage, index: usize, offset: usize) -> Result<()> {
        let later: Vec<&SegmentFile> = self.segments.iter().skip(index + 1).collect();
        for segment in &later {
            storage.remove(&segment.name)?;
        }
        if !later.is_empty() {
            storage.sync_dir()?;
        }
        let segment = self.segment(index)?;
        segment.file.set_len(offset as u64)?;
        segment.file.sync()
    }

    /// Lsns a real record at or after the break can have: each record takes at least a header's
    /// bytes, so the log's size bounds how far past `broken_lsn` they go.
    fn plausible_lsns(&self, broken_lsn: Lsn) -> RangeInclusive<Lsn> {
        let log_bytes: u64 = self.segments.iter().map(|s| s.len_bytes).sum();
        broken_lsn..=broken_lsn.saturating_add(log_bytes / RECORD_HEADER_BYTES as u64 + 1)
    }
}

/// A valid record found by scanning aligned offsets.
struct FoundRecord {
    offset: usize,
    lsn: Lsn,
    synced_lsn: Lsn,
}

impl FoundRecord {
    fn evidence(&self, what: &str, broken_lsn: Lsn, file: &str) -> String {
        format!(
            "{what}; lsn {broken_lsn} had been made durable (the record with lsn {} at offset {} of {file} \
             says lsn {} was synced), so this is corruption, not a torn tail",
            self.lsn, self.offset, self.synced_lsn
        )
    }
}

/// Every valid record with an lsn in `lsns` starting at an 8-byte aligned offset from `from` up
/// to `nonzero_end` (where the segment's trailing zeros begin: a record with an lsn of 1 or more
/// has a non-zero byte in its header, so none starts in the zeros, and the caller has read them
/// once already). Cheap on garbage and on payload bytes: the lsn field must be in range before
/// the record's checksum is computed.
fn scan_records(
    reader: &mut SegmentReader<'_>,
    from: usize,
    nonzero_end: usize,
    lsns: &RangeInclusive<Lsn>,
) -> Result<Vec<FoundRecord>> {
    debug_assert!(!lsns.contains(&0), "lsn 0 would match the zeros");
    let mut found = Vec::new();
    let mut offset = from.next_multiple_of(RECORD_ALIGNMENT_BYTES);
    while offset < nonzero_end && offset.saturating_add(RECORD_HEADER_BYTES) <= reader.file_len() {
        let lsn = reader.lsn_field_at(offset)?;
        if lsn.is_some_and(|lsn| lsns.contains(&lsn)) {
            if let RecordSlot::Valid { lsn, synced_lsn, .. } = reader.decode_record(offset)? {
                found.push(FoundRecord { offset, lsn, synced_lsn });
            }
        }
        offset += RECORD_ALIGNMENT_BYTES;
    }
    Ok(found)
}
