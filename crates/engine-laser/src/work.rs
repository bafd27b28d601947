//! Write path steps 5–7 and compaction (docs/ARCHITECTURE.md, "laser"; paper §4.4): a
//! finalized MemTable becomes a level 0 run of whole rows; an overflowing level's most
//! overflowing column group merges into the groups of the next level that it contains
//! (CG-local compaction), changing the layout on the way. Each ends with a new manifest; the
//! new version is swapped in after it is durable. Runs on the worker thread, and in the caller
//! for a requested checkpoint or compaction; `Inner::work` keeps one at a time.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{Direction, Error, Key, Result};
use strata_io::OpenOptions;
use strata_kit::sorted_run::{Entry, MergeIter, MergeOutput, RunOptions, RunWriter, SourceIter};
use strata_kit::tables::Frozen;

use crate::advisor::{advise, level_cost, ModelParams};
use crate::cells::{entry_of_stored, restrict, CellsMerge};
use crate::engine::{Inner, WorkState};
use crate::layout::ColumnSet;
use crate::manifest::{run_file_name, Manifest, RunMeta};
use crate::scan::Stitch;
use crate::version::{Group, Run, Version};

/// Level 0 holds at most this many times `level0_runs` before flushes wait for a compaction.
const LEVEL0_STOP_FACTOR: usize = 3;

/// Profiled operations before `layout=auto` asks the advisor again.
const RETUNE_OPS: u64 = 20_000;
/// How much more the current layout must cost than the advisor's before it changes.
const RETUNE_MARGIN: f64 = 0.10;

/// One compaction: a level's group (level 0: its whole runs) into the next level's groups it
/// contains.
#[derive(Debug)]
struct Job {
    /// 0 for level 0.
    from_level: usize,
    /// The group's index at `from_level` (unused for level 0).
    group: usize,
}

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
            if !self.compact_one()? {
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

    /// A checkpoint, then every compaction due.
    pub(crate) fn compact_now(&self) -> Result<()> {
        self.checkpoint_now()?;
        while self.compact_one()? {
            self.writes.check_usable()?;
        }
        Ok(())
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
            let run = self.write_run(&mut work, entries)?;
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
        drop(work);
        self.writes.wal().truncate_before(frozen.last_lsn + 1).map_err(|e| self.writes.poison(e))
    }

    /// Runs `step`, a failure or panic poisoning the engine (the durable state is the last
    /// manifest; the runs it wrote are leftovers for the next open).
    fn guarded<T>(&self, doing: &str, step: impl FnOnce() -> Result<T>) -> Result<T> {
        catch_unwind(AssertUnwindSafe(step))
            .unwrap_or_else(|_| Err(Error::Poisoned(format!("a panic while {doing}"))))
            .map_err(|e| self.writes.poison(e))
    }

    /// Writes `entries` (ascending keys) as a new run file, synced; `None` when there are none.
    fn write_run(
        &self,
        work: &mut WorkState,
        entries: impl Iterator<Item = Result<(Key, Entry)>>,
    ) -> Result<Option<Arc<Run>>> {
        let id = work.next_run_id;
        work.next_run_id += 1;
        let name = run_file_name(id);
        let file = self.storage.open(&name, OpenOptions::create().with_direct(self.direct_io))?;
        let options = RunOptions {
            align_bytes: if self.direct_io { 4096 } else { 1 },
            block_align_bytes: 4096,
            ..RunOptions::default()
        };
        let mut writer = RunWriter::new(file.clone(), 0, options)?;
        let mut any = false;
        for item in entries {
            let (key, entry) = item?;
            writer.add(&key, entry.kind, &entry.value)?;
            any = true;
        }
        if !any {
            drop(writer);
            drop(file);
            self.storage.remove(&name)?;
            return Ok(None);
        }
        let info = writer.finish()?;
        file.sync()?;
        self.counters.compaction_bytes_written.fetch_add(info.len_bytes, Relaxed);
        let meta = RunMeta { id, len_bytes: info.len_bytes };
        Ok(Some(Arc::new(Run::open(&self.storage, meta, self.direct_io, &self.cache)?)))
    }

    /// Step 7: the manifest of `next`, stored durably; then `next` is the version, and the
    /// runs it replaced are retired (removed once no reader holds them).
    fn install(&self, work: &WorkState, next: Version, replaced: Vec<Arc<Run>>) -> Result<()> {
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

    /// Under `layout=auto`, once the profile holds `RETUNE_OPS` operations: the advisor's
    /// layout for them replaces the current one when that costs `RETUNE_MARGIN` more by the
    /// model (levels then take it as they compact). The profile starts a new window either way.
    fn retune_layout(&self, work: &mut WorkState, version: &Version) {
        if !work.auto_layout || self.profile.window_ops() < RETUNE_OPS {
            return;
        }
        let levels = version.levels.len().max(1);
        let level_bytes: Vec<u64> = (1..=levels).map(|l| version.level_bytes(l)).collect();
        let workload = self.profile.take(&level_bytes);
        let params = self.model_params();
        let advice = advise(&params, &workload, levels);
        let current: f64 = (1..=levels)
            .map(|l| level_cost(&params, workload.inserts, &workload.levels[l - 1], work.layout.groups(l)))
            .sum();
        if current > advice.total_cost() * (1.0 + RETUNE_MARGIN) {
            work.layout = advice.layout;
            self.counters.layout_changes.fetch_add(1, Relaxed);
        }
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

    /// Bytes level `level` (1 and deeper) may hold: level 1 takes `level0_runs` MemTables, each
    /// deeper one T times the one above.
    fn level_capacity_bytes(&self, level: usize) -> u64 {
        let level1 = self.options.memtable_bytes.saturating_mul(self.options.level0_runs);
        (1..level).fold(level1, |bytes, _| bytes.saturating_mul(self.options.size_ratio))
    }

    /// The most overflowing level (score ≥ 1: level 0 by its run count, the others by bytes
    /// over capacity), and in it the most overflowing group, each group's capacity its share
    /// of the level's by the bytes of a row its columns take.
    fn pick(&self, version: &Version) -> Option<Job> {
        let mut best: Option<(f64, Job)> = None;
        let level0 = version.level0.len() as f64 / self.options.level0_runs as f64;
        if level0 >= 1.0 {
            best = Some((level0, Job { from_level: 0, group: 0 }));
        }
        for (i, groups) in version.levels.iter().enumerate() {
            let level = i + 1;
            let capacity = self.level_capacity_bytes(level) as f64;
            let score = version.level_bytes(level) as f64 / capacity;
            if score < 1.0 || best.as_ref().is_some_and(|(s, _)| *s >= score) {
                continue;
            }
            let share = |g: &Group| self.group_share(&g.set);
            let (group, _) = groups
                .iter()
                .enumerate()
                .map(|(j, g)| (j, g.bytes() as f64 / (capacity * share(g))))
                .fold((0, f64::MIN), |a, b| if b.1 > a.1 { b } else { a });
            best = Some((score, Job { from_level: level, group }));
        }
        best.map(|(_, job)| job)
    }

    /// A group's share of its level: its columns' bytes over a row's (1 in a key-value store).
    fn group_share(&self, set: &ColumnSet) -> f64 {
        match self.all.row_bytes() {
            0 => 1.0,
            row => set.row_bytes().max(1) as f64 / row as f64,
        }
    }

    /// One compaction: the job's runs merged into the next level. Its target groups are the
    /// layout's groups there that share a column with the job (under CG containment, the ones
    /// it contains); when the level still holds groups of another layout, every group those
    /// touch is rewritten too, into the layout's (`regroup`). Per target, the job's runs
    /// restricted to its columns go over the level's runs that share its columns (joined by key
    /// when there are several); then the manifest.
    fn compact(&self, work: &mut WorkState, version: &Version, job: &Job) -> Result<()> {
        let to_level = job.from_level + 1;
        let (sources, from_set): (Vec<Arc<Run>>, ColumnSet) = if job.from_level == 0 {
            (version.level0.clone(), self.all.clone())
        } else {
            let group = &version.levels[job.from_level - 1][job.group];
            (group.run.iter().cloned().collect(), group.set.clone())
        };
        let layout: Vec<ColumnSet> = work
            .layout
            .groups(to_level)
            .iter()
            .map(|ids| ColumnSet::new(ids.clone(), &self.columns))
            .collect();
        let existing: Vec<Group> = match version.levels.get(to_level - 1) {
            Some(groups) => groups.clone(),
            None => layout.iter().map(|set| Group { set: set.clone(), run: None }).collect(),
        };
        let (targets, rewritten) = regroup(&from_set, &layout, &existing, self.columns.count());
        let mut replaced: Vec<Arc<Run>> = sources.clone();
        let mut level: Vec<Group> = existing
            .iter()
            .enumerate()
            .filter(|(j, _)| !rewritten.contains(j))
            .map(|(_, g)| g.clone())
            .collect();
        for target in targets {
            let older: Vec<&Group> =
                rewritten.iter().map(|&j| &existing[j]).filter(|g| g.set.intersects(&target)).collect();
            let bottom = !version.holds_below(to_level, &target);
            let run = self.merge_into(work, &sources, &from_set, &target, &older, bottom)?;
            level.push(Group { set: target, run });
        }
        rewritten.iter().for_each(|&j| replaced.extend(existing[j].run.iter().cloned()));
        level.sort_by(|a, b| a.set.ids().cmp(b.set.ids()));
        let mut next = version.clone();
        if next.levels.len() < to_level {
            next.levels.push(Vec::new());
        }
        next.levels[to_level - 1] = level;
        if job.from_level == 0 {
            next.level0.clear();
        } else {
            next.levels[job.from_level - 1][job.group].run = None;
        }
        self.install(work, next, replaced)
    }

    /// The sources (newer, over `from_set`) restricted to `target`'s columns, merged over the
    /// older groups' runs restricted to it, written as its new run.
    fn merge_into(
        &self,
        work: &mut WorkState,
        sources: &[Arc<Run>],
        from_set: &ColumnSet,
        target: &ColumnSet,
        older: &[&Group],
        bottom: bool,
    ) -> Result<Option<Arc<Run>>> {
        let mut inputs: Vec<SourceIter<'_>> = Vec::new();
        for run in sources {
            self.counters.compaction_bytes_read.fetch_add(run.meta.len_bytes, Relaxed);
            inputs.push(restricted(run, from_set, target));
        }
        let mut parts = Vec::new();
        for group in older {
            let Some(run) = &group.run else { continue };
            self.counters.compaction_bytes_read.fetch_add(run.meta.len_bytes, Relaxed);
            let part = group.set.intersection(target, &self.columns);
            parts.push((restricted(run, &group.set, &part), part));
        }
        if parts.len() == 1 && parts[0].1 == *target {
            inputs.extend(parts.pop().map(|(source, _)| source));
        } else if !parts.is_empty() {
            inputs.push(Box::new(Stitch::new(parts, target.clone(), Direction::Forward)));
        }
        let output = if bottom { MergeOutput::Bottom } else { MergeOutput::Above };
        let mut merge = MergeIter::new(inputs, Direction::Forward, output);
        if !self.all.is_variable() {
            merge = merge.with_operator(Arc::new(CellsMerge { set: target.clone() }));
        }
        self.write_run(work, merge)
    }
}

/// What a compaction from `from` writes at the next level: the `layout` groups it touches, and
/// the `existing` groups (their indices) it rewrites — grown together until they cover the same
/// columns, so the level still partitions every column afterwards. Under an unchanged layout
/// with CG containment that is the layout's groups within `from`, and the same existing ones.
fn regroup(
    from: &ColumnSet,
    layout: &[ColumnSet],
    existing: &[Group],
    column_count: usize,
) -> (Vec<ColumnSet>, Vec<usize>) {
    let mut cover = vec![false; column_count];
    from.ids().iter().for_each(|&id| cover[usize::from(id)] = true);
    let touches = |set: &ColumnSet, cover: &[bool]| set.ids().iter().any(|&id| cover[usize::from(id)]);
    loop {
        let targets: Vec<ColumnSet> = layout.iter().filter(|g| touches(g, &cover)).cloned().collect();
        let mut grown = cover.clone();
        targets.iter().flat_map(|g| g.ids()).for_each(|&id| grown[usize::from(id)] = true);
        let rewritten: Vec<usize> =
            (0..existing.len()).filter(|&j| touches(&existing[j].set, &grown)).collect();
        rewritten.iter().flat_map(|&j| existing[j].set.ids()).for_each(|&id| grown[usize::from(id)] = true);
        if grown == cover {
            return (targets, rewritten);
        }
        cover = grown;
    }
}

/// A run's entries (over `from`) restricted to `to`'s columns, those that say nothing of them
/// left out.
pub(crate) fn restricted<'a>(run: &Arc<Run>, from: &ColumnSet, to: &ColumnSet) -> SourceIter<'a> {
    let entries = run.reader.iter(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded, Direction::Forward);
    restrict_source(Box::new(entries), from.clone(), to.clone(), run.file_name())
}

/// `source`'s entries (over `from`) restricted to `to`.
pub(crate) fn restrict_source<'a>(
    source: SourceIter<'a>,
    from: ColumnSet,
    to: ColumnSet,
    file: String,
) -> SourceIter<'a> {
    if from == to {
        return source;
    }
    Box::new(source.filter_map(move |item| match item {
        Ok((key, entry)) => match restrict(&entry, &from, &to) {
            Ok(Some(entry)) => Some(Ok((key, entry))),
            Ok(None) => None,
            Err(e) => Some(Err(Error::corruption(file.as_str(), 0, e))),
        },
        Err(e) => Some(Err(e)),
    }))
}
