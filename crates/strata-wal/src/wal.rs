//! The open log: appends into a memory buffer, group commit in two phases, checkpoint truncation.
//!
//! Commit phases. A *write round* takes the whole append buffer, writes it to the segments under
//! `writer` and publishes `written_lsn`: that is all a `Buffered` commit waits for. A *sync round*
//! (`Sync` commits, `sync`, `close`) first runs a write round if anything is buffered, then takes
//! under `writer` a snapshot of the active segment's handle and of `written_lsn`, drops `writer`,
//! fdatasyncs that handle under `sync_gate` and publishes `durable_lsn` up to the snapshot. At
//! most one round of each kind runs at a time (`commit_state.writing` / `.syncing`), and write
//! rounds go on while a sync round waits for its fdatasync: a Buffered commit never waits for
//! another caller's fsync, unless its write fills the segment (the rollover's sync of the full
//! segment waits at `sync_gate` for the one in flight). `Sync` commits arriving during a sync
//! round wait for it and then share the next one (group commit).
//!
//! Locks (never taken in the other order): `marked_lsn` (held across a marker's append and
//! commit), then `writer`, then `buffer` or `sync_gate` (never both). `commit_state` is never
//! held while taking another lock. Poisoning (`strata_core::Poison`) takes no lock, so it may
//! happen under any of them; it records the cause before it sets the flag, and the flag is read
//! with `Acquire`.
//! Invariants:
//! - `durable_lsn <= written_lsn <= last_lsn`; a record is on the storage once `lsn <=
//!   written_lsn` and durable once `lsn <= durable_lsn`, which is published only after a successful
//!   fdatasync of every segment holding records up to it: a sync round's fdatasync covers the
//!   records of the active segment up to its snapshot, and every earlier segment was synced at
//!   its rollover, before the next one was started (or by recovery); the sync round checks this.
//! - Every fdatasync that publishes `durable_lsn` (a sync round's, a rollover's) runs under
//!   `sync_gate`, which also orders poisoning: a failed one poisons the log before the gate is
//!   released, and the next one checks for poison before it syncs or publishes.
//! - Only a write round or `truncate_before` (both under `writer`) write, create, rename or remove
//!   files; a sync round only fdatasyncs the handle it took (see `sync_round` for why that handle
//!   is never a released or reused file).
//! - Once poisoned, nothing is written or reported durable any more.
//! - `sync` and `close` end with a durable marker record whose `synced_lsn` covers every record
//!   they made durable, so damage to those records is later told apart from a torn tail.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, MutexGuard};
use strata_core::{Durability, Error, Poison, Result, VerifyReport};
use strata_io::{Storage, StorageFile};

use crate::counters::{bump, Counters};
use crate::format::{encode_durability_marker, encode_record, MAX_PAYLOAD_BYTES};
use crate::options::{RecoveryReport, WalOptions, WalStats};
use crate::recovery::{recover, RecordLocation, ScanParams};
use crate::segments::{self, SegmentWriter};
use crate::Lsn;

/// The shared write-ahead log. See the crate documentation for how engines use it.
#[derive(Debug)]
pub struct Wal {
    opts: WalOptions,
    buffer: Mutex<AppendBuffer>,
    writer: Mutex<SegmentWriter>,
    /// Held across every fdatasync that publishes `durable_lsn` and its publishing or poisoning.
    /// One at a time, because when concurrent fsyncs of one file hit a writeback error, Linux
    /// may report it to only one of them: the other must not publish what the error lost.
    sync_gate: Mutex<()>,
    commit_state: Mutex<CommitState>,
    commit_done: Condvar,
    last_lsn: AtomicU64,
    written_lsn: AtomicU64,
    durable_lsn: AtomicU64,
    /// Sticky after a failed write or fdatasync; errors read "WAL: <first cause>".
    poison: Poison,
    /// Every record up to this lsn is vouched for by a durable marker's `synced_lsn` or needs no
    /// voucher (markers; after `open`, what recovery made durable). Held while a marker is
    /// written, so concurrent `sync` calls write one marker, not one each.
    marked_lsn: Mutex<Lsn>,
    /// Set by `close` once everything is durable.
    closed: AtomicBool,
    counters: Arc<Counters>,
}

#[derive(Debug)]
struct AppendBuffer {
    /// Encoded records not yet taken by a write round.
    records: Vec<u8>,
    /// Lsn of the first record in `records` (meaningless while it is empty).
    first_lsn: Lsn,
    next_lsn: Lsn,
    /// The last write round's emptied buffer, kept so the next round does not reallocate.
    spare: Vec<u8>,
    /// `close` has begun: no more appends.
    closing: bool,
}

#[derive(Debug, Default)]
struct CommitState {
    /// A write round is running (its caller took the role).
    writing: bool,
    /// A sync round is running: its write round, or its fdatasync.
    syncing: bool,
    /// Lsns of `commit(.., Sync)` callers waiting for durability.
    sync_waiters: Vec<Lsn>,
}

impl Wal {
    /// Recovers the log in `storage`: calls `replay(lsn, payload)` for every valid record with
    /// `lsn >= min_lsn`, in lsn order, applies `opts.recovery_mode`, repairs a tolerated torn tail,
    /// and prepares for appends at `max(last valid lsn + 1, min_lsn)`. Nothing is written until
    /// the first record is; that record continues the last segment when it can, else a new one
    /// is created. Durability markers in the log are checked but never passed to `replay`, so the
    /// replayed lsns can have gaps.
    ///
    /// `min_lsn` must not be below an lsn passed to `truncate_before` earlier: records the caller
    /// needs but the log released are reported as corruption. When `open` fails, `replay`
    /// may already have seen a prefix of the records; discard what it built.
    ///
    /// Engines replaying write batches use `strata_kit::replay` instead, which decodes each
    /// payload and reports a bad one at its [`RecordLocation`]; this form (lsn only) remains for
    /// callers that have not moved to [`Wal::open_located`] yet.
    pub fn open(
        storage: Arc<dyn Storage>,
        opts: WalOptions,
        min_lsn: Lsn,
        replay: &mut dyn FnMut(Lsn, &[u8]) -> Result<()>,
    ) -> Result<(Wal, RecoveryReport)> {
        Wal::open_located(storage, opts, min_lsn, &mut |location, payload| replay(location.lsn, payload))
    }

    /// [`Wal::open`], but `replay` also learns where each record is (segment file, offset, lsn),
    /// so that a payload the caller cannot decode is reported as corruption of that file at that
    /// offset.
    pub fn open_located(
        storage: Arc<dyn Storage>,
        opts: WalOptions,
        min_lsn: Lsn,
        replay: &mut dyn FnMut(&RecordLocation<'_>, &[u8]) -> Result<()>,
    ) -> Result<(Wal, RecoveryReport)> {
        opts.validate()?;
        if min_lsn > crate::MAX_LSN {
            return Err(Error::invalid(format!("min_lsn {min_lsn} is past the lsn space (2^63 - 1)")));
        }
        let params = ScanParams { min_lsn, required_from: Some(min_lsn.max(1)), repair: true, replay };
        let recovered = recover(storage.as_ref(), &opts, params)?;
        let next_lsn = recovered.report.next_lsn;
        let counters = Arc::new(Counters::default());
        let behind_caller = recovered.behind_caller;
        let mut writer = SegmentWriter::new(
            storage,
            opts.clone(),
            segments::Recovered {
                segments: recovered.segments,
                continuation: recovered.tail,
                free: recovered.free,
                next_segment_id: recovered.next_segment_id,
                state_exists: recovered.state_exists,
                // Recovery synced every record it kept.
                durable_lsn: next_lsn - 1,
            },
            counters.clone(),
        );
        if behind_caller {
            writer.release_all_behind(next_lsn - 1)?;
        }
        let wal = Wal {
            opts,
            buffer: Mutex::new(AppendBuffer {
                records: Vec::new(),
                first_lsn: next_lsn,
                next_lsn,
                spare: Vec::new(),
                closing: false,
            }),
            writer: Mutex::new(writer),
            sync_gate: Mutex::new(()),
            commit_state: Mutex::new(CommitState::default()),
            commit_done: Condvar::new(),
            last_lsn: AtomicU64::new(next_lsn - 1),
            written_lsn: AtomicU64::new(next_lsn - 1),
            durable_lsn: AtomicU64::new(next_lsn - 1),
            poison: Poison::labelled("WAL"),
            // Recovery made every record it kept durable, so none needs a marker: an open that
            // appends nothing writes nothing.
            marked_lsn: Mutex::new(next_lsn - 1),
            closed: AtomicBool::new(false),
            counters,
        };
        Ok((wal, recovered.report))
    }

    /// Buffers one record (an atomic unit: the engine's encoded batch) and returns its lsn. No
    /// I/O unless `buffer_bytes` are buffered, in which case the buffer is written to the OS (and
    /// a failure of that write is returned; the log is then poisoned). Payloads may be empty, or
    /// larger than a segment (that record gets a segment of its own).
    pub fn append(&self, payload: &[u8]) -> Result<Lsn> {
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(Error::invalid(format!(
                "WAL record of {} bytes exceeds the maximum of {MAX_PAYLOAD_BYTES}",
                payload.len()
            )));
        }
        self.append_entry(Some(payload)).map(|(lsn, _)| lsn)
    }

    /// Buffers a data record (`Some(payload)`) or, with `None`, a durability marker (accepted
    /// while `close` is in progress); returns its lsn and the `synced_lsn` it carries.
    fn append_entry(&self, payload: Option<&[u8]>) -> Result<(Lsn, Lsn)> {
        self.check_poisoned()?;
        let mut buffer = self.buffer.lock();
        if buffer.closing && payload.is_some() {
            return Err(Error::Closed);
        }
        let lsn = buffer.next_lsn;
        if buffer.records.is_empty() {
            buffer.first_lsn = lsn;
        }
        // Every lsn up to durable_lsn (< lsn) is durable now; the record may say so.
        let synced_lsn = self.durable_lsn.load(Acquire);
        match payload {
            Some(payload) => encode_record(lsn, synced_lsn, payload, &mut buffer.records),
            None => encode_durability_marker(lsn, synced_lsn, &mut buffer.records),
        }
        buffer.next_lsn = lsn + 1;
        self.last_lsn.store(lsn, Release);
        let buffer_full = buffer.records.len() >= self.opts.buffer_bytes;
        drop(buffer);
        match payload {
            Some(payload) => {
                bump(&self.counters.records_appended, 1);
                bump(&self.counters.payload_bytes_appended, payload.len() as u64);
            }
            None => bump(&self.counters.durability_markers_appended, 1),
        }
        if buffer_full {
            self.commit(lsn, Durability::Buffered)?;
        }
        Ok((lsn, synced_lsn))
    }

    /// Waits until record `lsn` and every record before it are as durable as `durability` asks:
    /// `Sync` fdatasync'ed, `Buffered` written to the OS, `None` no wait.
    ///
    /// Group commit: a `Buffered` caller whose record is not written yet runs a write round (or
    /// waits for the running one), which writes the whole buffer; a `Sync` caller runs a sync
    /// round (or waits for the running one), which writes the buffer and then fdatasyncs once for
    /// everything written. Write rounds go on while a sync round's fdatasync runs.
    pub fn commit(&self, lsn: Lsn, durability: Durability) -> Result<()> {
        self.commit_then(lsn, durability, &mut || {})
    }

    /// [`Wal::commit`]; whenever this caller ran a round (write or sync) that succeeded,
    /// `after_round` runs before the round's other waiters are woken, with no WAL lock held. An
    /// engine that applies writes after their commit applies the round's writes there, so the
    /// waiters it wakes find theirs applied — the group commit's leader applies the group, as
    /// RocksDB's write-group leader inserts the group's batches (strata_kit::apply_order).
    /// A panic in `after_round` still wakes the waiters (their records are written or durable:
    /// the round succeeded) before it goes on to this caller; the log is not poisoned by it.
    pub fn commit_then(&self, lsn: Lsn, durability: Durability, after_round: &mut dyn FnMut()) -> Result<()> {
        if lsn > self.last_lsn.load(Acquire) {
            return Err(Error::invalid(format!(
                "commit of WAL lsn {lsn}, but the last appended lsn is {}",
                self.last_lsn()
            )));
        }
        let need_sync = match durability {
            Durability::None => return self.check_poisoned(),
            Durability::Buffered => false,
            Durability::Sync => true,
        };
        let mut state = self.commit_state.lock();
        let mut registered = false;
        loop {
            self.poison.check()?;
            let reached = if need_sync { &self.durable_lsn } else { &self.written_lsn };
            if reached.load(Acquire) >= lsn {
                return Ok(());
            }
            if self.closed.load(Acquire) {
                return Err(Error::Closed);
            }
            if need_sync && !registered {
                state.sync_waiters.push(lsn);
                registered = true;
            }
            let busy = if need_sync { state.syncing } else { state.writing };
            if busy {
                self.commit_done.wait(&mut state);
                continue;
            }
            let round = if need_sync {
                self.run_sync_round(&mut state, lsn)
            } else {
                self.run_write_round(&mut state)
            };
            // Caught so that the waiters below are woken whatever `after_round` does: a waiter
            // is only ever woken here or by a later round, which may never come.
            let after = match round {
                Ok(()) => {
                    MutexGuard::unlocked(&mut state, || catch_unwind(AssertUnwindSafe(&mut *after_round)))
                }
                Err(_) => Ok(()),
            };
            self.count_covered_sync_waiters(&mut state);
            if round.is_err() {
                state.sync_waiters.clear();
            }
            self.commit_done.notify_all();
            if let Err(panic) = after {
                drop(state);
                resume_unwind(panic);
            }
            round?;
        }
    }

    /// Runs a write round in the `writing` role, which the caller saw free.
    fn run_write_round(&self, state: &mut MutexGuard<'_, CommitState>) -> Result<()> {
        state.writing = true;
        let written = MutexGuard::unlocked(state, || self.contain_panic("write", || self.write_round()));
        state.writing = false;
        written
    }

    /// Runs a sync round for record `lsn` in the `syncing` role, which the caller saw free.
    fn run_sync_round(&self, state: &mut MutexGuard<'_, CommitState>, lsn: Lsn) -> Result<()> {
        state.syncing = true;
        let synced = self.write_then_sync(state, lsn);
        state.syncing = false;
        synced
    }

    /// Unless a running write round already wrote `lsn`, writes everything buffered (so that
    /// the fdatasync covers every record appended so far) and lets the write role go; then
    /// syncs. Waiting for the write role ends: every write round after `lsn` was appended
    /// writes it.
    fn write_then_sync(&self, state: &mut MutexGuard<'_, CommitState>, lsn: Lsn) -> Result<()> {
        loop {
            if !state.writing {
                if self.written_lsn.load(Acquire) < self.last_lsn.load(Acquire) {
                    self.run_write_round(state)?;
                    // Buffered commits covered by that write need not wait for the fdatasync.
                    self.commit_done.notify_all();
                }
                break;
            }
            if self.written_lsn.load(Acquire) >= lsn {
                break;
            }
            self.commit_done.wait(state);
        }
        MutexGuard::unlocked(state, || self.contain_panic("sync", || self.sync_round()))
    }

    /// Makes every record appended so far durable and returns the last lsn appended before the
    /// call. When that made records durable that no durable marker covers yet, it then appends a
    /// durability marker (which takes the next lsn) and syncs again, so that damage to those
    /// records is later reported as corruption instead of being dropped as a torn tail.
    pub fn sync(&self) -> Result<Lsn> {
        if self.closed.load(Acquire) {
            return Err(Error::Closed);
        }
        let lsn = self.last_lsn();
        self.commit(lsn, Durability::Sync)?;
        self.write_durability_marker(lsn)?;
        Ok(lsn)
    }

    /// Makes sure a durable marker vouches for every record up to `target` (which must be
    /// durable): unless one already does, appends a marker naming `durable_lsn` and syncs it.
    ///
    /// A marker vouches for the records up to its own `synced_lsn` (the `durable_lsn` when it was
    /// appended), not up to its own lsn: a record appended by another thread between that moment
    /// and the marker is made durable by the marker's sync but not vouched for, and a later
    /// `sync` must write another marker for it (test
    /// `a_record_appended_before_a_marker_but_after_its_synced_lsn_gets_a_marker_later`).
    fn write_durability_marker(&self, target: Lsn) -> Result<()> {
        let mut marked_lsn = self.marked_lsn.lock();
        if target <= *marked_lsn {
            return Ok(());
        }
        let (marker_lsn, synced_lsn) = self.append_entry(None)?;
        self.commit(marker_lsn, Durability::Sync)?;
        // A marker needs no voucher itself: right behind its synced_lsn it vouches for itself.
        let vouched = if synced_lsn + 1 == marker_lsn { marker_lsn } else { synced_lsn };
        *marked_lsn = (*marked_lsn).max(vouched);
        Ok(())
    }

    /// Releases segments whose records are all `< lsn` (recycled up to `recycle_segments`, else
    /// removed). Never touches the last (active) segment. Call it once everything below `lsn` is
    /// in the engine's own durable state.
    pub fn truncate_before(&self, lsn: Lsn) -> Result<()> {
        if self.closed.load(Acquire) {
            return Err(Error::Closed);
        }
        self.writer.lock().truncate_before(lsn, self.durable_lsn())
    }

    /// Sizes the segments created from now on (the active one rolls over once it holds that
    /// many bytes, or goes on to it if it was made smaller). For an engine whose log grows and
    /// shrinks with its data: a segment sized at `open` for a small store would stay small (one
    /// file and fsync per segment) as it grows, one sized for the budget makes a small store's
    /// log several times its data. `.free` files larger than this are cut to it when reused and
    /// not kept when released. Below [`MIN_SEGMENT_BYTES`](crate::MIN_SEGMENT_BYTES): refused.
    pub fn set_segment_bytes(&self, segment_bytes: u64) -> Result<()> {
        WalOptions { segment_bytes, ..self.opts.clone() }.validate()?;
        self.writer.lock().set_segment_bytes(segment_bytes);
        Ok(())
    }

    /// The size of segments created from now on.
    pub fn segment_bytes(&self) -> u64 {
        self.writer.lock().segment_bytes()
    }

    /// The last lsn handed out, to a record or a durability marker; right after `open`, the last
    /// lsn the log accounts for (0 if none).
    pub fn last_lsn(&self) -> Lsn {
        self.last_lsn.load(Acquire)
    }

    /// Every record up to this lsn is durable.
    pub fn durable_lsn(&self) -> Lsn {
        self.durable_lsn.load(Acquire)
    }

    /// Every record up to this lsn is written to the storage (what a `Buffered` commit waits
    /// for); published only after that write succeeded.
    pub fn written_lsn(&self) -> Lsn {
        self.written_lsn.load(Acquire)
    }

    pub fn stats(&self) -> WalStats {
        self.counters.snapshot()
    }

    /// Segment files (`.log`) and released files kept for reuse (`.free`) right now.
    pub fn segment_counts(&self) -> (usize, usize) {
        let writer = self.writer.lock();
        (writer.segment_count(), writer.free_count())
    }

    /// Makes everything durable (ending with a durability marker, like `sync`) and closes the
    /// log: later appends, syncs and truncations return `Error::Closed`. Closing twice is fine.
    pub fn close(&self) -> Result<()> {
        {
            let mut buffer = self.buffer.lock();
            if buffer.closing && self.closed.load(Acquire) {
                return Ok(());
            }
            buffer.closing = true;
        }
        let last_lsn = self.last_lsn();
        let synced =
            self.commit(last_lsn, Durability::Sync).and_then(|()| self.write_durability_marker(last_lsn));
        self.closed.store(true, Release);
        let mut writer = self.writer.lock();
        // Everything written is durable now: the state file records the active segment's full
        // length, so recovery refuses a later shortening of it as corruption.
        let recorded = match synced {
            Ok(()) => writer.record_close(self.durable_lsn()).map_err(|e| self.poison(e)),
            Err(e) => Err(e),
        };
        writer.release_files();
        recorded
    }

    /// Reads every segment and checks every checksum and the recovery rules of
    /// `opts.recovery_mode`, changing nothing (a torn tail that mode tolerates is accepted).
    /// Meant for a log that is not open for writing. `records_checked` counts markers too.
    pub fn verify(storage: &dyn Storage, opts: &WalOptions) -> Result<VerifyReport> {
        opts.validate()?;
        let mut ignore = |_: &RecordLocation<'_>, _: &[u8]| Ok(());
        let params =
            ScanParams { min_lsn: Lsn::MAX, required_from: None, repair: false, replay: &mut ignore };
        let recovered = recover(storage, opts, params)?;
        Ok(VerifyReport {
            files_checked: recovered.report.segments_read,
            bytes_checked: recovered.bytes_checked,
            records_checked: recovered.records_checked,
        })
    }

    /// Takes the whole append buffer, writes it (making full segments durable at rollover) and
    /// publishes `written_lsn`. Any failure poisons the log.
    fn write_round(&self) -> Result<()> {
        let mut writer = self.writer.lock();
        self.check_poisoned()?;
        let (mut records, first_lsn, last_lsn) = {
            let mut buffer = self.buffer.lock();
            let spare = std::mem::take(&mut buffer.spare);
            (std::mem::replace(&mut buffer.records, spare), buffer.first_lsn, buffer.next_lsn - 1)
        };
        if records.is_empty() {
            return Ok(());
        }
        let sync_full_segment = |file: &dyn StorageFile, segment_last_lsn: Lsn| {
            // Records up to `segment_last_lsn` are on the storage already.
            self.written_lsn.fetch_max(segment_last_lsn, Release);
            self.sync_segment(file, segment_last_lsn)
        };
        if let Err(e) = writer.write_records(&mut records, first_lsn, last_lsn, &sync_full_segment) {
            return Err(self.poison(e));
        }
        // Stored under `writer`, so a sync round's snapshot sees the file and the lsn agree.
        self.written_lsn.store(last_lsn, Release);
        // Keep the allocation for the next round unless one huge record inflated it.
        if records.capacity() <= self.opts.buffer_bytes.saturating_mul(2) {
            records.clear();
            self.buffer.lock().spare = records;
        }
        Ok(())
    }

    /// Makes every record written so far durable: fdatasync of the active segment, taken with
    /// `written_lsn` under `writer` and synced without it, so write rounds go on meanwhile (their
    /// records are simply not covered). Any failure poisons the log.
    ///
    /// Why the handle is never a released or reused file when it is synced: the fdatasync runs
    /// under `sync_gate` and only while `durable_lsn < covered`. The segment it belongs to (N)
    /// was the active one at the snapshot. Before N stops being the last segment, its rollover
    /// syncs it under `sync_gate` and publishes `durable_lsn` up to N's last record (`>=
    /// covered`), or poisons the log; both are seen here under the gate, and then nothing is
    /// synced. So when this fdatasync runs, N is still the last segment: `truncate_before` never
    /// releases the last segment, and a `.free` file is only reused by a rollover after N. After
    /// `close` dropped the writer's handle, ours (an `Arc`) stays open; syncing it is harmless.
    fn sync_round(&self) -> Result<()> {
        self.check_poisoned()?;
        let (target, covered) = {
            let writer = self.writer.lock();
            (writer.sync_target(), self.written_lsn.load(Acquire))
        };
        if covered <= self.durable_lsn.load(Acquire) {
            return Ok(());
        }
        let Some((file, first_lsn)) = target else {
            return Err(self.poison(Error::invalid(format!(
                "WAL records up to lsn {covered} are written but no segment is active to sync"
            ))));
        };
        let _gate = self.sync_gate.lock();
        self.check_poisoned()?;
        let durable = self.durable_lsn.load(Acquire);
        if durable >= covered {
            return Ok(());
        }
        // This fdatasync covers the active segment only: records before it must be durable.
        if let Some(first_lsn) = first_lsn.filter(|&first| durable.saturating_add(1) < first) {
            return Err(self.poison(Error::invalid(format!(
                "WAL segment {} starts at lsn {first_lsn} but only lsns up to {durable} are durable",
                file.name()
            ))));
        }
        self.sync_file_and_publish(file.as_ref(), covered)
    }

    /// The rollover's fdatasync of a full segment holding records up to `last_lsn`.
    fn sync_segment(&self, file: &dyn StorageFile, last_lsn: Lsn) -> Result<()> {
        let _gate = self.sync_gate.lock();
        self.check_poisoned()?;
        self.sync_file_and_publish(file, last_lsn)
    }

    /// fdatasync of `file`, then `durable_lsn = max(durable_lsn, covered)`; a failure poisons the
    /// log. Called under `sync_gate` on a log that is not poisoned.
    fn sync_file_and_publish(&self, file: &dyn StorageFile, covered: Lsn) -> Result<()> {
        if let Err(e) = file.sync() {
            return Err(self.poison(e));
        }
        bump(&self.counters.syncs, 1);
        self.durable_lsn.fetch_max(covered, Release);
        Ok(())
    }

    fn count_covered_sync_waiters(&self, state: &mut CommitState) {
        let durable = self.durable_lsn.load(Acquire);
        let before = state.sync_waiters.len();
        state.sync_waiters.retain(|&lsn| lsn > durable);
        let covered = (before - state.sync_waiters.len()) as u64;
        bump(&self.counters.sync_commits, covered);
        if covered > 1 {
            bump(&self.counters.group_commits, 1);
        }
    }

    /// Runs a round; a panic inside it (a storage implementation's bug) poisons the log and
    /// becomes this caller's error, so the round's role is released and the callers waiting for
    /// it are told, instead of waiting forever for a round that never ends.
    fn contain_panic(&self, round: &str, f: impl FnOnce() -> Result<()>) -> Result<()> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            Err(self.poison(Error::Poisoned(format!("a panic in a WAL {round} round: {what}"))))
        })
    }

    /// Records the first failure; returns it for the caller that hit it.
    fn poison(&self, error: Error) -> Error {
        self.poison.poison(error)
    }

    fn check_poisoned(&self) -> Result<()> {
        self.poison.check()
    }
}
