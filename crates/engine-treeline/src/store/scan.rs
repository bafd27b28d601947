//! Range scans (paper §4.1): a chunk is a run of base pages of one segment, or of several
//! consecutive segments. Under the index's read lock (so no segment can be reorganized meanwhile)
//! and the segments' latches (taken in stripe order), a chunk reads the base pages (one I/O per
//! run of pages back to back in the file) and their overflow pages, then takes the cached records
//! of the pages' key range, and merges: a cached record overrides the pages, a cached tombstone
//! hides them. A write-back writes a segment's pages under its latch and marks records clean
//! (after which they may be evicted) only after that, so while the chunk holds the latch a record
//! is either already in the pages it read or still cached: never lost between the two reads.
//! Each chunk is consistent; a long scan is not a snapshot. A forward chunk's records are
//! decoded only as the scan takes them (`scan_chunk`), so a scan that stops early pays for the
//! records it returned, not for every record of the pages it read.
//!
//! Readahead: a forward scan's first two chunks read `FIRST_CHUNK_PAGES` pages (the first from the
//! one holding its start), each further chunk twice as many, up to 16 pages: a short scan reads one or two
//! pages, a long one reads whole segments (the paper always reads to the end of the segment). A
//! chunk that reaches its segment's end goes on into the following segments; segments whose
//! pages lie back to back in the data file (as a bulk load and a reorganization write them) are
//! read in one I/O, so short segments do not multiply a scan's I/Os. A reverse scan reads its
//! part of one segment at once.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use strata_core::{at_or_after, at_or_before, borrow_bound, Direction, Key, KeyRange, Result, Value};

use super::scan_chunk::ChunkRecords;
use super::{Counters, Store};
use crate::index::{Index, SegmentEntry};
use crate::page::layout::MAX_SEGMENT_PAGES;
use crate::page::{Page, StoredValue};

/// Pages a forward scan's first chunk reads.
const FIRST_CHUNK_PAGES: usize = 2;

/// Pages of a forward scan's chunk after `chunks_read` chunks: `FIRST_CHUNK_PAGES` twice, then
/// doubling up to a segment (2, 2, 4, 8, 16, 16, …). A YCSB-E-sized scan that outgrows its first
/// chunk mostly needs one page more, so the second chunk does not double.
fn chunk_pages_after(chunks_read: usize) -> usize {
    match chunks_read {
        0 | 1 => FIRST_CHUNK_PAGES,
        n => (FIRST_CHUNK_PAGES << (n - 1).min(8)).min(MAX_SEGMENT_PAGES),
    }
}

/// The iterator `Engine::range` returns.
pub struct RangeIter {
    store: Arc<Store>,
    range: KeyRange,
    direction: Direction,
    /// A reverse scan's records of the chunk read last, in the order they are returned.
    buffer: VecDeque<(Key, StoredValue)>,
    /// A forward scan's chunk read last, decoded as it is taken.
    pending: Option<Pending>,
    /// Forward: keys not yet read are at or after this; reverse: at or before it.
    cursor: Bound<Key>,
    done: bool,
    /// Pages the next forward chunk reads (`chunk_pages_after`).
    chunk_pages: usize,
    chunks_read: usize,
}

/// A forward scan's read chunk and the cursor it was read from.
struct Pending {
    records: ChunkRecords,
    from: Bound<Key>,
}

/// One chunk's segment: its key range and entry.
struct Chunk {
    lower: Key,
    upper: Option<Key>,
    entry: Option<SegmentEntry>,
}

impl RangeIter {
    pub fn new(store: Arc<Store>, range: KeyRange, direction: Direction) -> RangeIter {
        let cursor = match direction {
            Direction::Forward => range.start.clone(),
            Direction::Reverse => range.end.clone(),
        };
        let done = range.is_empty();
        RangeIter {
            store,
            range,
            direction,
            buffer: VecDeque::new(),
            pending: None,
            cursor,
            done,
            chunk_pages: FIRST_CHUNK_PAGES,
            chunks_read: 0,
        }
    }

    /// The segment the cursor is in (`entry: None`: no segment yet, the whole key space).
    fn chunk_at_cursor(&self, index: &Index) -> Option<Chunk> {
        let (probe, step_back) = match (&self.direction, &self.cursor) {
            (Direction::Forward, Bound::Included(k) | Bound::Excluded(k)) => (k.clone(), false),
            (Direction::Forward, Bound::Unbounded) => (Vec::new(), false),
            (Direction::Reverse, Bound::Included(k)) => (k.clone(), false),
            (Direction::Reverse, Bound::Excluded(k)) => (k.clone(), true),
            (Direction::Reverse, Bound::Unbounded) => {
                let (lower, entry) = index.iter().next_back()?;
                return Some(Chunk { lower: lower.clone(), upper: None, entry: Some(entry.clone()) });
            }
        };
        let (lower, _, _) = index.segment_of(&probe)?;
        let lower = match step_back && *lower == probe {
            true => index.before(lower)?.clone(),
            false => lower.clone(),
        };
        let (lower, entry, upper) = index.segment_of(&lower)?;
        Some(Chunk { lower: lower.clone(), upper: upper.cloned(), entry: Some(entry.clone()) })
    }

    /// Reads the next chunk into `buffer` and moves the cursor past it.
    fn fill(&mut self) -> Result<()> {
        self.store.check_usable()?;
        let store = self.store.clone();
        let index = store.index.read();
        let chunk = match self.chunk_at_cursor(&index) {
            Some(chunk) => chunk,
            None if index.is_empty() => Chunk { lower: Vec::new(), upper: None, entry: None },
            None => {
                self.done = true;
                return Ok(());
            }
        };
        let (merged, chunk) = match &chunk.entry {
            Some(entry) => {
                let (first, last) = self.pages_to_read(&chunk, entry);
                let from = match (self.direction, &self.cursor) {
                    (Direction::Forward, Bound::Included(k) | Bound::Excluded(k)) => Some(k.clone()),
                    _ => None,
                };
                let span = Span {
                    lower: chunk.lower.clone(),
                    upper: chunk.upper.clone(),
                    entry: entry.clone(),
                    first,
                    last,
                    from,
                };
                let spans = self.with_following_segments(&index, span);
                read_spans(&store, &spans)?
            }
            None => {
                let mut records = ChunkRecords::default();
                records.push_cached(store.cache.cached_in(&chunk.lower, chunk.upper.as_deref()));
                (records, chunk)
            }
        };
        drop(index);
        let from = self.cursor.clone();
        match self.direction {
            Direction::Forward => self.pending = Some(Pending { records: merged, from }),
            Direction::Reverse => {
                let wanted = |k: &Key| at_or_before(k, borrow_bound(&from)) && self.range.contains(k);
                let records: Vec<_> = merged.filter(|(k, _)| wanted(k)).collect();
                self.buffer.extend(records.into_iter().rev());
            }
        }
        self.chunks_read += 1;
        self.chunk_pages = chunk_pages_after(self.chunks_read);
        self.advance_cursor(chunk);
        Ok(())
    }

    /// The next record of a forward scan's read chunk that the scan wants: at or after the
    /// cursor the chunk was read from, in range. A key past the range's end ends the scan (keys
    /// only grow).
    fn next_pending(&mut self) -> Option<(Key, StoredValue)> {
        let pending = self.pending.as_mut()?;
        for (key, value) in pending.records.by_ref() {
            if !self.range.admits_to_end(&key) {
                self.done = true;
                break;
            }
            if at_or_after(&key, borrow_bound(&pending.from)) && self.range.admits_from_start(&key) {
                return Some((key, value));
            }
        }
        self.pending = None;
        None
    }

    fn advance_cursor(&mut self, chunk: Chunk) {
        let next = match self.direction {
            Direction::Forward => chunk.upper.map(Bound::Included),
            Direction::Reverse => (!chunk.lower.is_empty()).then_some(Bound::Excluded(chunk.lower)),
        };
        match next {
            Some(bound) if self.still_in_range(&bound) => self.cursor = bound,
            _ => self.done = true,
        }
    }

    fn still_in_range(&self, bound: &Bound<Key>) -> bool {
        match (self.direction, bound) {
            (Direction::Forward, Bound::Included(k)) => self.range.admits_to_end(k),
            (Direction::Reverse, Bound::Excluded(k)) => {
                // Keys below `k` remain; any of them in range?
                match self.range.as_bounds().0 {
                    Bound::Included(s) | Bound::Excluded(s) => s < k.as_slice(),
                    Bound::Unbounded => true,
                }
            }
            _ => false,
        }
    }

    /// A forward chunk that reaches its segment's end with readahead to spare goes on into the
    /// following segments (each from its first page) until `chunk_pages` pages are planned or
    /// the scan's range ends; `read_spans` reads back-to-back ones in one I/O.
    fn with_following_segments(&self, index: &Index, first: Span) -> Vec<Span> {
        let mut budget = self.chunk_pages.saturating_sub(first.last - first.first + 1);
        let mut spans = vec![first];
        while self.direction == Direction::Forward && budget > 0 {
            let Some(prev) = spans.last() else { break };
            let (Some(next_lower), true) = (&prev.upper, prev.last + 1 == usize::from(prev.entry.pages))
            else {
                break;
            };
            if !self.range.admits_to_end(next_lower) {
                break;
            }
            let Some((lower, entry, upper)) = index.segment_of(next_lower) else { break };
            let chunk = Chunk { lower: lower.clone(), upper: upper.cloned(), entry: None };
            let end = self.page_holding_range_end(&chunk, entry);
            let last = end.min(budget - 1);
            budget -= last + 1;
            let (lower, upper) = (chunk.lower, chunk.upper);
            spans.push(Span { lower, upper, entry: entry.clone(), first: 0, last, from: None });
        }
        spans
    }

    /// The page of `entry` holding the scan range's end, or its last page when the end lies
    /// beyond the segment.
    fn page_holding_range_end(&self, chunk: &Chunk, entry: &SegmentEntry) -> usize {
        let last_page = usize::from(entry.pages) - 1;
        match self.range.as_bounds().1 {
            Bound::Included(k) | Bound::Excluded(k) if chunk.upper.as_deref().is_none_or(|u| k < u) => {
                entry.page_index_for(k).min(last_page)
            }
            _ => last_page,
        }
    }

    /// The segment's pages this chunk reads, by index: forward, from the page the model picks
    /// for the cursor, `chunk_pages` of them (fewer at the scan's end or the segment's; earlier
    /// ones too if the pick overshot, `read_spans`); reverse, the whole segment.
    fn pages_to_read(&self, chunk: &Chunk, entry: &SegmentEntry) -> (usize, usize) {
        let last_page = usize::from(entry.pages) - 1;
        let inside = |k: &[u8]| k >= chunk.lower.as_slice() && chunk.upper.as_deref().is_none_or(|u| k < u);
        let page_of = |bound: Bound<&[u8]>, outside: usize| match bound {
            Bound::Included(k) | Bound::Excluded(k) if inside(k) => entry.page_index_for(k),
            _ => outside,
        };
        let end = self.range.as_bounds().1;
        match self.direction {
            Direction::Forward => {
                let first = page_of(borrow_bound(&self.cursor), 0);
                let last = page_of(end, last_page).min(first + self.chunk_pages - 1);
                (first, last.max(first))
            }
            // The whole segment: the model may route a bound without the segment's key prefix
            // to the wrong page (see `from_page_zero_if_the_model_overshot`), and a reverse
            // chunk has no later chance to read the pages it skipped.
            Direction::Reverse => (0, last_page),
        }
    }
}

/// Base pages `first..=last` of one segment, with its bounds in the index.
#[derive(Clone)]
struct Span {
    lower: Key,
    upper: Option<Key>,
    entry: SegmentEntry,
    first: usize,
    last: usize,
    /// Records below this key are not wanted (a forward scan's cursor, in its first span).
    from: Option<Key>,
}

/// Reads the spans (segments following each other in key order) under all their latches:
/// spans whose pages follow each other in the data file (a bulk load or a reorganization writes
/// neighbouring segments next to each other) in one I/O, then each span's overflow pages and the
/// cached records of its range, merged. Returns the records and the chunk from the first span's
/// lower bound to the last's upper bound.
fn read_spans(store: &Store, spans: &[Span]) -> Result<(ChunkRecords, Chunk)> {
    let _latches = store.latches_read(spans.iter().map(|s| s.entry.first_page));
    Counters::add(&store.counters.scan_chunks, 1);
    let mut records = ChunkRecords::default();
    let mut chunk: Option<Chunk> = None;
    let mut at = 0;
    while let Some(head) = spans.get(at) {
        let run = physically_contiguous_run(spans.get(at..).unwrap_or_default());
        let in_run = spans.get(at..at + run).unwrap_or_default();
        let count: usize = in_run.iter().map(|s| s.last - s.first + 1).sum();
        let mut pages = store.data.read_pages(head.entry.base_page(head.first), count)?.into_iter();
        Counters::add(&store.counters.scan_base_reads, 1);
        for span in in_run {
            let mut base: Vec<_> = pages.by_ref().take(span.last - span.first + 1).collect();
            let from_page_zero = from_page_zero_if_the_model_overshot(store, span, &mut base)?;
            let span = from_page_zero.as_ref().unwrap_or(span);
            let part_chunk = span_records(store, span, base, &mut records)?;
            match chunk.as_mut() {
                Some(c) => c.upper = part_chunk.upper,
                None => chunk = Some(part_chunk),
            }
        }
        at += run;
    }
    Counters::add(&store.counters.scan_pages_read, records.pages());
    let chunk = chunk.ok_or_else(|| strata_core::Error::invalid("treeline scan: no span"))?;
    Ok((records, chunk))
}

/// The model picks a forward span's first page for the scan position. It agrees with the fences
/// only for keys carrying the segment's common prefix: a position without it (a range start
/// below or between the segment's keys, a deleted lower bound with a shorter prefix) can be
/// routed past the page that holds it, and the records in between would be skipped silently.
/// Then the span's earlier pages are read too and it starts at page 0 (`None`: the pick held).
fn from_page_zero_if_the_model_overshot(
    store: &Store,
    span: &Span,
    base: &mut Vec<Page>,
) -> Result<Option<Span>> {
    let overshot = match (span.first, base.first(), span.from.as_deref()) {
        (0, _, _) | (_, None, _) | (_, _, None) => false,
        (_, Some(page), Some(from)) => from < page.lower_fence(),
    };
    if !overshot {
        return Ok(None);
    }
    Counters::add(&store.counters.scan_base_reads, 1);
    let mut pages = store.data.read_pages(span.entry.base_page(0), span.first)?;
    pages.append(base);
    *base = pages;
    Ok(Some(Span { first: 0, ..span.clone() }))
}

/// How many spans from the first one have their pages back to back in the data file (a span
/// that stops before its segment's end ends the run: the next span's pages are not next).
fn physically_contiguous_run(spans: &[Span]) -> usize {
    let mut run = 1;
    while let (Some(prev), Some(next)) = (spans.get(run - 1), spans.get(run)) {
        let prev_end = prev.entry.base_page(prev.last) + 1;
        if prev.last + 1 != usize::from(prev.entry.pages) || next.entry.base_page(next.first) != prev_end {
            break;
        }
        run += 1;
    }
    run
}

/// One span's records (lazily, into `records`): its base pages (read by the caller under the
/// span's latch) and their overflow pages from `span.from` on, with the cached records of that
/// key range over them; returns the chunk the pages cover (bounded by their fences, or the
/// segment's bounds at its ends).
fn span_records(store: &Store, span: &Span, base: Vec<Page>, records: &mut ChunkRecords) -> Result<Chunk> {
    let Span { lower: segment_lower, upper: segment_upper, entry, first, last, from } = span;
    check_base_pages(store, entry, *first, &base, segment_lower, segment_upper.as_deref())?;
    let lower = match (first, base.first()) {
        (0, _) | (_, None) => segment_lower.clone(),
        (_, Some(page)) => page.lower_fence().to_vec(),
    };
    let upper = match (last + 1 == usize::from(entry.pages), base.last()) {
        (true, _) | (_, None) => segment_upper.clone(),
        (false, Some(page)) => page.upper_fence().map(<[u8]>::to_vec),
    };
    let from = from.as_deref().filter(|f| *f > lower.as_slice());
    for (i, page) in (*first..).zip(base) {
        let overflow = store.read_checked_overflow(entry, i, &page)?;
        records.push_pair(page, overflow, from);
    }
    records.push_cached(store.cache.cached_in(from.unwrap_or(&lower), upper.as_deref()));
    Ok(Chunk { lower, upper, entry: None })
}

/// Base pages `first..` of `entry`'s segment (bounds `lower`..`upper` in the index), as read:
/// each must be the page the index places there, with fences within the segment's bounds, and
/// they must tile the range (each starts where the one before ends).
pub(super) fn check_base_pages(
    store: &Store,
    entry: &SegmentEntry,
    first: usize,
    pages: &[Page],
    lower: &[u8],
    upper: Option<&[u8]>,
) -> Result<()> {
    let mut previous_upper: Option<Option<&[u8]>> = None;
    for (i, page) in (first..).zip(pages) {
        let id = entry.base_page(i);
        check_within_segment(store, page, id, lower, upper)?;
        store.check_page_identity(page, id, entry, i)?;
        if previous_upper.is_some_and(|u| u != Some(page.lower_fence())) {
            return Err(page_error(store, id, "does not start where the page before it in its segment ends"));
        }
        previous_upper = Some(page.upper_fence());
    }
    Ok(())
}

/// A page's fences must lie within its segment's bounds in the index (a point read checks the
/// key against the fences; a scan returns a page's records by position, so an index that
/// disagrees with the pages would hand out records out of order). Regression: a checkpoint
/// damaged with a recomputed checksum (fuzzing, `treeline_checkpoint`).
fn check_within_segment(
    store: &Store,
    page: &crate::page::Page,
    id: crate::free_space::PageId,
    segment_lower: &[u8],
    segment_upper: Option<&[u8]>,
) -> Result<()> {
    let above_upper = match (page.upper_fence(), segment_upper) {
        (Some(fence), Some(upper)) => fence > upper,
        (None, Some(_)) => true,
        (_, None) => false,
    };
    if page.lower_fence() >= segment_lower && !above_upper {
        return Ok(());
    }
    Err(page_error(store, id, "has fences outside the bounds treeline-checkpoint's index gives its segment"))
}

/// Corruption of the data file at page `id`, which `what`.
pub(super) fn page_error(store: &Store, id: crate::free_space::PageId, what: &str) -> strata_core::Error {
    let offset = crate::free_space::page_offset(id, store.page_size()).unwrap_or(0);
    strata_core::Error::corruption(crate::data_file::FILE_NAME, offset, format!("page {id} {what}"))
}

impl Iterator for RangeIter {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((key, stored)) = self.buffer.pop_front().or_else(|| self.next_pending()) {
                match self.store.resolve_for_scan(&key, stored) {
                    Ok(Some(value)) => return Some(Ok((key, value))),
                    Ok(None) => continue,
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            }
            if self.done {
                return None;
            }
            if let Err(e) = self.fill() {
                self.done = true;
                return Some(Err(e));
            }
        }
    }
}
