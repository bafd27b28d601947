//! The compaction frame buffer and its worker threads (F2 §5.2, "Multi-threaded Compaction").
//!
//! The calling thread (the coordinator) reads the compacted range a page at a time into at most
//! `frame_pages` frames, ahead of the workers, and releases frames strictly in page order.
//! `threads` scoped workers walk the frames in order; each takes the records of a frame whose
//! cold-index chunk it owns and runs ConditionalInsert on them (the caller's `process`).
//!
//! Invariants:
//! - Chunk ownership: a record goes to worker `chunk % threads`, so every chunk has exactly one
//!   writer during a round and its read-modify-write (read chunk, choose slot, append record,
//!   append chunk copy) cannot lose another record's entry; the worker may also read its chunks
//!   in one batch ahead of its appends, since nobody else changes them. Records of one key share
//!   a chunk, so they are handled by one worker, in log order.
//! - Appends: the cold log and the chunk log serialise concurrent appends on their tail-page
//!   mutex (an address is reserved and written under it); a chain only grows at the hands of its
//!   chunk's owner, so its addresses still go strictly backwards.
//! - Release order: the frame of a page is released (`on_release(page_end, padding_start)`, which truncates the
//!   source log) only after every worker finished its share of that page, and only after every
//!   earlier frame was released. So `begin` never passes a record whose ConditionalInsert has
//!   not finished, and truncation advances page by page as in a one-thread round.
//! - A worker never sees a frame released under it: its own share of the frame keeps the frame
//!   pending until it is done.
//! - An error in a worker or while reading a page stops the round: nothing more is released,
//!   the workers stop at their next frame, and the first error is returned.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::indexing_slicing))]

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use strata_core::{Error, Result};

use crate::hash::key_hash;
use crate::index::cold;
use crate::log::io_cause::IoCause;
use crate::log::{check_gap, scan_range, ScanEnd, SegmentedFile};
use crate::record::RecordView;

/// The source log of a round and how the round is cut into frames and shares.
pub(in crate::engine) struct RoundPlan<'a> {
    pub file: &'a SegmentedFile,
    pub page_size_bytes: u64,
    /// The compacted range `[from, until)`; `from` may be inside a page, `until` is not past the
    /// last complete record.
    pub from: u64,
    pub until: u64,
    pub threads: usize,
    pub frame_pages: usize,
    /// The cold index's chunk count (ownership is by chunk).
    pub chunk_count: u64,
}

/// A record of a frame, as handed to a worker.
pub(in crate::engine) struct FrameRecord<'f> {
    pub address: u64,
    pub hash: u64,
    pub view: RecordView<'f>,
}

/// What a round did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(in crate::engine) struct RoundOutcome {
    /// The sum of what `process` returned (records copied).
    pub copied: u64,
    /// Everything below this address was processed and released (`from` if nothing was).
    pub released_until: u64,
    /// Where the loaded pages held padding.
    pub padding: Padding,
}

/// The padding of a round's pages, `[start, end)` regions in address order, noted as the
/// coordinator loads them. A page may end early (the hot log turns pages early), so padding alone
/// is no damage; but a record's `prev_address` or an index entry pointing into it is records
/// gone missing (a lost write), which the round would otherwise skip and truncate silently.
#[derive(Debug, Default, PartialEq, Eq)]
pub(in crate::engine) struct Padding {
    regions: Vec<(u64, u64)>,
}

impl Padding {
    pub fn contains(&self, address: u64) -> bool {
        let after = self.regions.partition_point(|&(start, _)| start <= address);
        after > 0 && self.regions.get(after - 1).is_some_and(|&(_, end)| address < end)
    }

    /// The region ending where the page at `page_start` begins, if the page before it ended in
    /// padding.
    pub fn ending_at(&self, page_start: u64) -> Option<(u64, u64)> {
        self.regions.last().copied().filter(|&(_, end)| end == page_start)
    }
}

/// A page of the compacted range, read ahead.
struct Frame {
    page_start: u64,
    /// The compacted part of the page ends here.
    end: u64,
    /// Where the page's records end, if padding follows them (up to `end`).
    padding_start: Option<u64>,
    bytes: Vec<u8>,
    /// Each record's offset in `bytes`, key hash and owning worker, in log order.
    records: Vec<(usize, u64, usize)>,
}

#[derive(Default)]
struct Shared {
    /// Loaded frames not yet released, oldest first; `pending[i]` counts the workers that have
    /// not finished their share of `frames[i]`.
    frames: VecDeque<Arc<Frame>>,
    pending: VecDeque<usize>,
    /// The sequence number (0 = the round's first page) of `frames[0]`.
    first_seq: usize,
    /// The coordinator loads no more frames.
    all_loaded: bool,
    /// Stop now (an error, or the caller asked to stop).
    stop: bool,
    error: Option<Error>,
    copied: u64,
}

struct Buffer {
    shared: Mutex<Shared>,
    /// Wakes workers (a frame was loaded, or stop) and the coordinator (a share finished).
    changed: Condvar,
}

impl Buffer {
    fn fail(&self, e: Error) {
        self.fail_locked(&mut self.shared.lock(), e);
    }

    /// `fail` with the lock already held: the first error stays, everyone stops.
    fn fail_locked(&self, s: &mut Shared, e: Error) {
        s.error.get_or_insert(e);
        s.stop = true;
        self.changed.notify_all();
    }
}

/// Runs one compaction round over `plan.from..plan.until`. `process(share)` runs
/// ConditionalInsert on a worker's share of a frame (its records in log order) and returns how
/// many it copied; `on_release(page_end, padding_start)` is called on this thread for each
/// finished page, in order, with where the page's records end if padding follows them, and
/// returns whether the round may go on (false stops it early; what was released stays
/// released).
pub(in crate::engine) fn run_round(
    plan: &RoundPlan<'_>,
    read_page: &(dyn Fn(u64) -> Result<Vec<u8>> + Sync),
    process: &(dyn Fn(&[FrameRecord<'_>]) -> Result<u64> + Sync),
    on_release: &mut dyn FnMut(u64, Option<u64>) -> bool,
) -> Result<RoundOutcome> {
    let threads = plan.threads.max(1);
    let buffer = Buffer { shared: Mutex::new(Shared::default()), changed: Condvar::new() };
    let mut released_until = plan.from;
    let mut padding = Padding::default();
    let cause = IoCause::current();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                let buffer = &buffer;
                std::thread::Builder::new().name(format!("f2-compact-{w}")).spawn_scoped(scope, move || {
                    let _cause = cause.enter();
                    work(buffer, w, process)
                })
            })
            .collect();
        let mut spawn_failed = None;
        for w in &workers {
            if let Err(e) = w {
                spawn_failed = Some(Error::invalid(format!("spawning an f2 compaction worker: {e}")));
            }
        }
        match spawn_failed {
            Some(e) => buffer.fail(e),
            None => {
                coordinate(plan, threads, &buffer, read_page, on_release, &mut released_until, &mut padding)
            }
        }
        for handle in workers.into_iter().flatten() {
            if handle.join().is_err() {
                buffer.fail(Error::invalid("an f2 compaction worker panicked"));
            }
        }
    });
    let shared = buffer.shared.into_inner();
    match shared.error {
        Some(e) => Err(e),
        None => Ok(RoundOutcome { copied: shared.copied, released_until, padding }),
    }
}

/// The coordinator: keeps up to `frame_pages` frames loaded and releases finished ones in order.
fn coordinate(
    plan: &RoundPlan<'_>,
    threads: usize,
    buffer: &Buffer,
    read_page: &(dyn Fn(u64) -> Result<Vec<u8>> + Sync),
    on_release: &mut dyn FnMut(u64, Option<u64>) -> bool,
    released_until: &mut u64,
    padding: &mut Padding,
) {
    let page = plan.page_size_bytes;
    let mut next = plan.from;
    loop {
        // Read ahead into the free frames (outside the lock: this is the disk read).
        while next < plan.until {
            {
                let s = buffer.shared.lock();
                if s.stop || s.frames.len() >= plan.frame_pages.max(1) {
                    break;
                }
            }
            let end = (next - next % page + page).min(plan.until);
            let frame = match load_frame(plan, threads, read_page, next, end, padding) {
                Ok(f) => f,
                Err(e) => return buffer.fail(e),
            };
            let mut s = buffer.shared.lock();
            s.frames.push_back(Arc::new(frame));
            s.pending.push_back(threads);
            buffer.changed.notify_all();
            next = end;
        }
        let front = {
            let mut s = buffer.shared.lock();
            if next >= plan.until && !s.all_loaded {
                s.all_loaded = true;
                buffer.changed.notify_all();
            }
            loop {
                if s.stop {
                    return;
                }
                if s.pending.front() == Some(&0) {
                    break;
                }
                if s.frames.is_empty() && s.all_loaded {
                    return; // every page released
                }
                if s.frames.len() < plan.frame_pages.max(1) && !s.all_loaded {
                    break; // a frame is free: read ahead first
                }
                buffer.changed.wait(&mut s);
            }
            if s.pending.front() != Some(&0) {
                continue;
            }
            s.pending.pop_front();
            s.first_seq += 1;
            s.frames.pop_front()
        };
        let Some(front) = front else { continue };
        *released_until = front.end;
        if !on_release(front.end, front.padding_start) {
            let mut s = buffer.shared.lock();
            s.stop = true;
            buffer.changed.notify_all();
            return;
        }
    }
}

/// Reads the page holding `from` and lists its records in `[from, end)` (checksums checked),
/// noting where the page ends in padding. A record linking into earlier padding of the round is
/// corruption, and so is padding the page's first record would have fit in, in a log whose pages
/// turn only when full.
fn load_frame(
    plan: &RoundPlan<'_>,
    threads: usize,
    read_page: &(dyn Fn(u64) -> Result<Vec<u8>> + Sync),
    from: u64,
    end: u64,
    padding: &mut Padding,
) -> Result<Frame> {
    let page_start = from - from % plan.page_size_bytes;
    let bytes = read_page(page_start)?;
    let mut records = Vec::new();
    let mut records_end = from;
    // A frame is one page: `scan_range` walks it where it is.
    let mut borrow = |_| Ok(Cow::Borrowed(bytes.as_slice()));
    scan_range(
        plan.file,
        plan.page_size_bytes,
        from,
        end,
        ScanEnd::PageCut,
        &mut borrow,
        &mut |address, view| {
            if let (true, Some((gap_at, gap_end))) = (address == page_start, padding.ending_at(page_start)) {
                check_gap(plan.file, gap_at, gap_end - gap_at, view.stored_len() as u64)?;
            }
            check_link(plan, padding, address, view.prev_address)?;
            let hash = key_hash(view.key);
            let chunk = cold::position(hash, plan.chunk_count).0;
            let owner = (chunk % threads as u64) as usize;
            records.push(((address - page_start) as usize, hash, owner));
            records_end = address + view.stored_len() as u64;
            Ok(())
        },
    )?;
    let padding_start = (records_end < end).then_some(records_end);
    if let Some(start) = padding_start {
        padding.regions.push((start, end));
    }
    Ok(Frame { page_start, end, padding_start, bytes, records })
}

/// The record at `address` links to `prev`: within the round, that must be a record, not padding.
fn check_link(plan: &RoundPlan<'_>, padding: &Padding, address: u64, prev: u64) -> Result<()> {
    if prev < plan.from || !padding.contains(prev) {
        return Ok(());
    }
    let file = plan.file;
    Err(file.corruption(prev, format!("the record at address {address} links to address {prev}, which the log holds as padding: records there are missing"),
    ))
}

/// A worker: its share of every frame, in frame order, until the last frame or a stop.
fn work(buffer: &Buffer, worker: usize, process: &(dyn Fn(&[FrameRecord<'_>]) -> Result<u64> + Sync)) {
    let _on_panic = StopOnPanic(buffer);
    let mut seq = 0usize;
    loop {
        let frame = {
            let mut s = buffer.shared.lock();
            loop {
                if s.stop {
                    return;
                }
                // Frame `seq` stays pending (not released) until this worker is done with it.
                let Some(at) = seq.checked_sub(s.first_seq) else {
                    drop(s);
                    return buffer.fail(Error::invalid("compaction released a frame a worker had not done"));
                };
                if let Some(f) = s.frames.get(at) {
                    break f.clone();
                }
                if s.all_loaded {
                    return;
                }
                buffer.changed.wait(&mut s);
            }
        };
        let outcome = share_of(&frame, worker).and_then(|share| process(&share));
        let mut s = buffer.shared.lock();
        match outcome {
            Ok(copied) => {
                s.copied += copied;
                let pending = seq.checked_sub(s.first_seq).and_then(|at| s.pending.get_mut(at));
                let Some(p) = pending.filter(|p| **p > 0) else {
                    let e = Error::invalid("compaction released a frame a worker had not done");
                    return buffer.fail_locked(&mut s, e);
                };
                *p -= 1;
                if *p == 0 {
                    buffer.changed.notify_all();
                }
            }
            Err(e) => return buffer.fail_locked(&mut s, e),
        }
        seq += 1;
    }
}

/// The records of `frame` that `worker` owns, in log order.
fn share_of(frame: &Frame, worker: usize) -> Result<Vec<FrameRecord<'_>>> {
    let mut share = Vec::new();
    for &(offset, hash, owner) in &frame.records {
        if owner != worker {
            continue;
        }
        let address = frame.page_start + offset as u64;
        let view = frame.bytes.get(offset..).and_then(RecordView::parse).ok_or_else(|| {
            Error::invalid(format!("compaction frame lost its record at address {address}"))
        })?;
        share.push(FrameRecord { address, hash, view });
    }
    Ok(share)
}

/// Stops the round if a worker unwinds, so the coordinator and the other workers do not wait for
/// a share that will never finish.
struct StopOnPanic<'a>(&'a Buffer);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.fail(Error::invalid("an f2 compaction worker panicked"));
        }
    }
}
