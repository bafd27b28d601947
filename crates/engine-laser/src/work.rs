//! Write path steps 5–7 and compaction (docs/ARCHITECTURE.md, "laser"; paper §4.4): a
//! finalized MemTable becomes a level 0 run of whole rows; an overflowing level's most
//! overflowing column group merges into the groups of the next level that it contains
//! (CG-local compaction), changing the layout on the way. Each ends with a new manifest; the
//! new version is swapped in after it is durable. Runs on the worker thread, and in the caller
//! for a requested checkpoint or compaction; `Inner::work` keeps one at a time.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{Error, Result};
use strata_io::{OpenOptions, StorageFile};
use strata_kit::sorted_run::{Entry, RunOptions, RunWriter};
use strata_kit::tables::Frozen;

use crate::advisor::{advise, level_cost, ModelParams, Trace, Workload};
use crate::cells::entry_of_stored;
use crate::engine::{Inner, WorkState};
use crate::manifest::{run_file_name, Manifest, RunMeta};
use crate::version::{Run, Version};

/// Level 0 holds at most this many times `level0_runs` before flushes wait for a compaction.
const LEVEL0_STOP_FACTOR: usize = 3;

/// How much more the current layout must cost than the advisor's before it changes.
const RETUNE_MARGIN: f64 = 0.10;

impl Inner {
    /// The worker's step: every finalized table flushed while level 0 has room, and every
    /// compaction due. Stops once a close asked it to.
    pub(crate) fn work_step(&self) -> Result<()> {
        loop {
            if self.signals.stop_requested() {
                return Ok(());
            }
            let level0_full = self.version.read().level0.len() >= self.level0_stop_runs();
            let oldest = self.tables.read().finalized.front().cloned();
            if let (Some(frozen), false) = (oldest, level0_full) {
                self.flush_table(&frozen)?;
                continue;
            }
            if !self.compact_one()? && !self.relayout_one()? {
                return Ok(());
            }
        }
    }

    fn level0_stop_runs(&self) -> usize {
        self.options.level0_runs as usize * LEVEL0_STOP_FACTOR
    }

    /// Finalizes the active table and flushes every table: afterwards level 0 holds every
    /// write applied before the call, and the WAL behind it is gone.
    pub(crate) fn checkpoint_now(&self) -> Result<()> {
        self.tables.write().finalize_active();
        loop {
            self.writes.check_usable()?;
            let Some(frozen) = self.tables.read().finalized.front().cloned() else { return Ok(()) };
            self.flush_table(&frozen)?;
        }
    }

    /// A checkpoint, then every compaction due and every level regrouped into the layout.
    pub(crate) fn compact_now(&self) -> Result<()> {
        self.checkpoint_now()?;
        loop {
            while self.compact_one()? {
                self.writes.check_usable()?;
            }
            if !self.regroup_first_stale()? {
                return Ok(());
            }
        }
    }

    /// Steps 5–7 for one finalized table: its newest entries as a level 0 run, the manifest,
    /// the version swapped, the table out of the list, the WAL truncated behind it.
    fn flush_table(&self, frozen: &Arc<Frozen>) -> Result<()> {
        let mut work = self.work.lock();
        if self.writes.state().is_closed()
            || !self.tables.read().finalized.front().is_some_and(|f| Arc::ptr_eq(f, frozen))
        {
            return Ok(()); // closed, or another caller flushed it while this one waited
        }
        self.writes.state().check_not_poisoned()?;
        let flushed = self.guarded("flushing a MemTable", || {
            let entries = frozen.entries.newest().map(|(key, value)| {
                entry_of_stored(&self.all, value)
                    .map(|entry| (key.to_vec(), entry))
                    .map_err(|e| Error::corruption("laser memtable", 0, e))
            });
            let mut sink = RunSink::new(self, &mut work)?;
            for item in entries {
                let (key, entry) = item?;
                sink.add(&key, &entry)?;
            }
            let run = sink.finish(self)?;
            let current = self.version.read().clone();
            let mut next = Version::clone(&current);
            if let Some(run) = run {
                next.level0.insert(0, run);
            }
            work.wal_lsn = frozen.last_lsn;
            self.install(&work, next, Vec::new())
        });
        flushed.map_err(|e| self.writes.poison(e))?;
        self.tables.write().remove_oldest_finalized();
        self.disk_version.fetch_add(1, Relaxed);
        self.counters.flushes.fetch_add(1, Relaxed);
        self.signals.notify_progress();
        // Under the work lock: flushes truncate the log in the order they flushed.
        let truncated = self.writes.wal().truncate_before(frozen.last_lsn + 1);
        drop(work);
        truncated.map_err(|e| self.writes.poison(e))
    }

    /// Runs `step`, a failure or panic poisoning the engine (the durable state is the last
    /// manifest; the runs it wrote are leftovers for the next open).
    pub(crate) fn guarded<T>(&self, doing: &str, step: impl FnOnce() -> Result<T>) -> Result<T> {
        catch_unwind(AssertUnwindSafe(step))
            .unwrap_or_else(|_| Err(Error::Poisoned(format!("a panic while {doing}"))))
            .map_err(|e| self.writes.poison(e))
    }

    /// Step 7: the manifest of `next`, stored durably; then `next` is the version, and the
    /// runs it replaced are retired (removed once no reader holds them).
    pub(crate) fn install(&self, work: &WorkState, next: Version, replaced: Vec<Arc<Run>>) -> Result<()> {
        let (level0, levels) = next.level_metas();
        Manifest {
            wal_lsn: work.wal_lsn,
            next_run_id: work.next_run_id,
            schema: self.schema.clone(),
            layout: work.layout.clone(),
            level0,
            levels,
        }
        .store(self.storage.as_ref())?;
        *self.version.write() = Arc::new(next);
        replaced.iter().for_each(|run| run.retire());
        self.resize_block_cache();
        Ok(())
    }

    /// Runs the most urgent compaction, if any is due; `false` when none is.
    fn compact_one(&self) -> Result<bool> {
        let mut work = self.work.lock();
        if self.writes.state().is_closed() {
            return Ok(false);
        }
        self.writes.state().check_not_poisoned()?;
        let version = self.version.read().clone();
        let Some(job) = self.pick(&version) else { return Ok(false) };
        self.retune_layout(&mut work, &version);
        self.guarded("compacting", || self.compact(&mut work, &version, &job))?;
        self.counters.compactions.fetch_add(1, Relaxed);
        self.signals.notify_progress();
        Ok(true)
    }

    /// Once the profile's window is full (`WINDOW_OPS`): the window becomes `last_workload`
    /// (and the trace's), and under `layout=auto` the advisor's layout for it replaces the
    /// current one when that costs `RETUNE_MARGIN` more by the model (levels then take it as
    /// they compact, or in place, `relayout.rs`). The profile starts a new window either way.
    pub(crate) fn retune_layout(&self, work: &mut WorkState, version: &Version) {
        if !self.profile.window_full() {
            return;
        }
        let levels = version.levels.len().max(1);
        let level_bytes: Vec<u64> = (1..=levels).map(|l| version.level_bytes(l)).collect();
        let workload = self.profile.take(&level_bytes);
        self.record_trace(&workload, levels);
        if work.auto_layout {
            let params = self.model_params();
            let advice = advise(&params, &workload, levels);
            let current: f64 = (1..=levels)
                .map(|l| {
                    level_cost(&params, workload.inserts, &workload.levels[l - 1], work.layout.groups(l))
                })
                .sum();
            if current > advice.total_cost() * (1.0 + RETUNE_MARGIN) {
                work.layout = advice.layout;
                self.counters.layout_changes.fetch_add(1, Relaxed);
            }
        }
        work.last_workload = Some(workload);
    }

    /// Appends `workload` (profiled over `levels` levels) to the `trace_file`, when one is
    /// set. A trace that cannot be written is a notice, not an error: it is not the store's.
    pub(crate) fn record_trace(&self, workload: &Workload, levels: usize) {
        let Some(path) = &self.options.trace_file else { return };
        let nothing = |l: &crate::advisor::LevelWorkload| {
            l.reads.is_empty() && l.scans.is_empty() && l.updates.is_empty()
        };
        if workload.inserts == 0.0 && workload.levels.iter().all(nothing) {
            return;
        }
        let trace = Trace { params: self.model_params(), levels, workload: workload.clone() };
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| std::io::Write::write_all(&mut file, trace.to_text().as_bytes()));
        if appended.is_err() {
            self.counters.trace_write_failures.fetch_add(1, Relaxed);
        }
    }

    /// The profile since the last window, appended to the trace (at close).
    pub(crate) fn record_trace_rest(&self) {
        if self.options.trace_file.is_none() {
            return;
        }
        let version = self.version.read().clone();
        let levels = version.levels.len().max(1);
        let level_bytes: Vec<u64> = (1..=levels).map(|l| version.level_bytes(l)).collect();
        let workload = self.profile.take(&level_bytes);
        self.record_trace(&workload, levels);
    }

    /// The model's view of this store: c columns, T, and B whole rows (with an 8-byte key, the
    /// paper's) to a 4 KiB block.
    pub(crate) fn model_params(&self) -> ModelParams {
        let row_bytes = self.all.row_bytes().max(1) as f64;
        ModelParams {
            columns: self.columns.count(),
            size_ratio: self.options.size_ratio as f64,
            rows_per_block: (4096.0 / (8.0 + row_bytes)).max(1.0),
        }
    }
}

/// A new run file being written: entries in ascending key order, then `finish` (synced and
/// opened), or nothing at all when it got no entry (the file is removed).
pub(crate) struct RunSink {
    id: u64,
    file: Arc<dyn StorageFile>,
    writer: Option<RunWriter>,
    entries: u64,
}

impl RunSink {
    /// A run file with the next run id (`work.next_run_id`), 4 KiB blocks aligned to 4 KiB.
    pub fn new(inner: &Inner, work: &mut WorkState) -> Result<RunSink> {
        let id = work.next_run_id;
        work.next_run_id += 1;
        let file =
            inner.storage.open(&run_file_name(id), OpenOptions::create().with_direct(inner.direct_io))?;
        let options = RunOptions {
            align_bytes: if inner.direct_io { 4096 } else { 1 },
            block_align_bytes: 4096,
            ..RunOptions::default()
        };
        let writer = RunWriter::new(file.clone(), 0, options)?;
        Ok(RunSink { id, file, writer: Some(writer), entries: 0 })
    }

    pub fn add(&mut self, key: &[u8], entry: &Entry) -> Result<()> {
        self.entries += 1;
        match &mut self.writer {
            Some(w) => w.add(key, entry.kind, &entry.value),
            None => Err(Error::invalid("a finished run")),
        }
    }

    /// The run, synced and open; `None` when it holds nothing.
    pub fn finish(mut self, inner: &Inner) -> Result<Option<Arc<Run>>> {
        let writer = self.writer.take().ok_or_else(|| Error::invalid("a finished run"))?;
        let name = run_file_name(self.id);
        if self.entries == 0 {
            drop(writer);
            inner.storage.remove(&name)?;
            return Ok(None);
        }
        let info = writer.finish()?;
        self.file.sync()?;
        inner.counters.compaction_bytes_written.fetch_add(info.len_bytes, Relaxed);
        let meta = RunMeta { id: self.id, len_bytes: info.len_bytes };
        Ok(Some(Arc::new(Run::open(&inner.storage, meta, inner.direct_io, &inner.cache)?)))
    }
}
