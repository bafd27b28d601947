//! CG-local compaction (paper §4.4; docs/ARCHITECTURE.md, "laser", write path step 7): which
//! group of which level overflows most, and its merge into the groups of the next level it
//! contains — regrouping that level when it holds another layout's groups — read once and
//! written to every target group at once.

use std::iter::Peekable;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{Direction, Error, Result};
use strata_kit::sorted_run::{Entry, EntryKind, MergeIter, MergeOperator, MergeOutput, SourceIter};

use crate::cells::{restrict, CellsMerge};
use crate::engine::{Inner, WorkState};
use crate::layout::{ColumnId, ColumnSet};
use crate::scan::Stitch;
use crate::version::{Group, Run, Version};
use crate::work::RunSink;

/// One compaction: a level's group (level 0: its whole runs) into the next level's groups it
/// contains.
#[derive(Debug)]
pub(crate) struct Job {
    /// 0 for level 0.
    pub from_level: usize,
    /// The group's index at `from_level` (unused for level 0).
    pub group: usize,
}

/// A target group of a compaction: its columns, the level's groups it rewrites (older data),
/// and whether nothing deeper holds its columns (deletes and partial rows then resolve).
struct TargetPlan<'v> {
    set: ColumnSet,
    older: Vec<&'v Group>,
    bottom: bool,
}

/// A target group while the compaction streams: its older entries, and its new run.
struct Target<'a> {
    set: ColumnSet,
    older: Peekable<SourceIter<'a>>,
    bottom: bool,
    operator: Option<CellsMerge>,
    sink: RunSink,
}

impl Inner {
    /// Bytes level `level` (1 and deeper) may hold: level 1 takes `level0_runs` MemTables, each
    /// deeper one T times the one above.
    fn level_capacity_bytes(&self, level: usize) -> u64 {
        let level1 = self.options.memtable_bytes.saturating_mul(self.options.level0_runs);
        (1..level).fold(level1, |bytes, _| bytes.saturating_mul(self.options.size_ratio))
    }

    /// The most overflowing level (score ≥ 1: level 0 by its run count, the others by bytes
    /// over capacity), and in it the most overflowing group, each group's capacity its share
    /// of the level's by the bytes of a row its columns take.
    pub(crate) fn pick(&self, version: &Version) -> Option<Job> {
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

    /// One compaction: the job's runs merged into the next level (`merge_into_level`), then
    /// the manifest.
    pub(crate) fn compact(&self, work: &mut WorkState, version: &Version, job: &Job) -> Result<()> {
        let to_level = job.from_level + 1;
        let (sources, from_set): (Vec<Arc<Run>>, ColumnSet) = if job.from_level == 0 {
            (version.level0.clone(), self.all.clone())
        } else {
            let group = &version.levels[job.from_level - 1][job.group];
            (group.run.iter().cloned().collect(), group.set.clone())
        };
        let (level, mut replaced) = self.merge_into_level(work, version, to_level, &sources, &from_set)?;
        replaced.extend(sources);
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

    /// Level `level`'s groups that are not the layout's rewritten into the layout's groups they
    /// touch, nothing merged into them (`relayout.rs` decides when), then the manifest.
    pub(crate) fn regroup_in_place(
        &self,
        work: &mut WorkState,
        version: &Version,
        level: usize,
    ) -> Result<()> {
        let wanted = work.layout.groups(level);
        let mut stale: Vec<ColumnId> = version.levels[level - 1]
            .iter()
            .filter(|g| !wanted.iter().any(|w| w.as_slice() == g.set.ids()))
            .flat_map(|g| g.set.ids().iter().copied())
            .collect();
        stale.sort_unstable();
        let stale = ColumnSet::new(stale, &self.columns);
        let (groups, replaced) = self.merge_into_level(work, version, level, &[], &stale)?;
        let mut next = version.clone();
        next.levels[level - 1] = groups;
        self.install(work, next, replaced)
    }

    /// `sources` (over `from_set`) merged into level `level`: the target groups are the
    /// layout's groups there that share a column with `from_set` (under CG containment, the
    /// ones it contains); when the level still holds groups of another layout, every group
    /// those touch is rewritten too, into the layout's (`regroup`). Per target, the sources
    /// restricted to its columns go over the level's runs that share its columns (joined by key
    /// when there are several). Returns the level's new groups and the level's runs they
    /// replace.
    fn merge_into_level(
        &self,
        work: &mut WorkState,
        version: &Version,
        level: usize,
        sources: &[Arc<Run>],
        from_set: &ColumnSet,
    ) -> Result<(Vec<Group>, Vec<Arc<Run>>)> {
        let layout: Vec<ColumnSet> =
            work.layout.groups(level).iter().map(|ids| ColumnSet::new(ids.clone(), &self.columns)).collect();
        let existing: Vec<Group> = match version.levels.get(level - 1) {
            Some(groups) => groups.clone(),
            None => layout.iter().map(|set| Group { set: set.clone(), run: None }).collect(),
        };
        let (targets, rewritten) = regroup(from_set, &layout, &existing, self.columns.count());
        let mut groups: Vec<Group> = existing
            .iter()
            .enumerate()
            .filter(|(j, _)| !rewritten.contains(j))
            .map(|(_, g)| g.clone())
            .collect();
        let plan: Vec<TargetPlan<'_>> = targets
            .into_iter()
            .map(|set| TargetPlan {
                older: rewritten.iter().map(|&j| &existing[j]).filter(|g| g.set.intersects(&set)).collect(),
                bottom: !version.holds_below(level, &set),
                set,
            })
            .collect();
        let sets: Vec<ColumnSet> = plan.iter().map(|t| t.set.clone()).collect();
        let runs = self.fan_out(work, sources, from_set, plan)?;
        groups.extend(sets.into_iter().zip(runs).map(|(set, run)| Group { set, run }));
        groups.sort_by(|a, b| a.set.ids().cmp(b.set.ids()));
        let replaced = rewritten.iter().flat_map(|&j| existing[j].run.iter().cloned()).collect();
        Ok((groups, replaced))
    }

    /// The job's runs merged once (newest first, deletes and partial rows kept), each entry
    /// restricted to every target and resolved over that target's older entries of the same
    /// key, each target's run written as the stream goes: the sources are read once however
    /// many groups the next level has.
    fn fan_out(
        &self,
        work: &mut WorkState,
        sources: &[Arc<Run>],
        from_set: &ColumnSet,
        plan: Vec<TargetPlan<'_>>,
    ) -> Result<Vec<Option<Arc<Run>>>> {
        let columnar = !self.all.is_variable();
        let mut inputs: Vec<SourceIter<'_>> = Vec::new();
        for run in sources {
            self.counters.compaction_bytes_read.fetch_add(run.meta.len_bytes, Relaxed);
            inputs.push(Box::new(run.reader.iter(
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                Direction::Forward,
            )));
        }
        let mut merged = MergeIter::new(inputs, Direction::Forward, MergeOutput::Above);
        if columnar {
            merged = merged.with_operator(Arc::new(CellsMerge { set: from_set.clone() }));
        }
        let mut targets = Vec::with_capacity(plan.len());
        for t in plan {
            let older = self.older_source(&t);
            let operator = columnar.then(|| CellsMerge { set: t.set.clone() });
            targets.push(Target {
                sink: RunSink::new(self, work)?,
                set: t.set,
                older: older.peekable(),
                bottom: t.bottom,
                operator,
            });
        }
        for item in merged {
            let (key, entry) = item?;
            for t in &mut targets {
                t.pass_older_before(Some(&key))?;
                let newer = restrict(&entry, from_set, &t.set)
                    .map_err(|e| Error::corruption("laser compaction", 0, e))?;
                let older = match t.older.next_if(|o| matches!(o, Ok((k, _)) if *k == key)) {
                    Some(o) => Some(o?.1),
                    None => None,
                };
                if let Some(e) = t.resolve(&key, newer, older)? {
                    t.sink.add(&key, &e)?;
                }
            }
        }
        let mut runs = Vec::with_capacity(targets.len());
        for mut t in targets {
            t.pass_older_before(None)?;
            runs.push(t.sink.finish(self)?);
        }
        Ok(runs)
    }

    /// A target's older entries: its one group's run, or the groups it rewrites joined by key.
    fn older_source<'v>(&self, t: &TargetPlan<'v>) -> SourceIter<'v> {
        let mut parts = Vec::new();
        for group in &t.older {
            let Some(run) = &group.run else { continue };
            self.counters.compaction_bytes_read.fetch_add(run.meta.len_bytes, Relaxed);
            let part = group.set.intersection(&t.set, &self.columns);
            parts.push((restricted(run, &group.set, &part), part));
        }
        match parts.len() {
            0 => Box::new(std::iter::empty()),
            1 if parts[0].1 == t.set => {
                parts.pop().map(|(source, _)| source).unwrap_or_else(|| Box::new(std::iter::empty()))
            }
            _ => Box::new(Stitch::new(parts, t.set.clone(), Direction::Forward)),
        }
    }
}

impl Target<'_> {
    /// Writes the older entries before `key` (`None`: all of them, at the end).
    fn pass_older_before(&mut self, key: Option<&[u8]>) -> Result<()> {
        let before = |o: &Result<(Vec<u8>, Entry)>| match (o, key) {
            (Err(_), _) | (_, None) => true,
            (Ok((k, _)), Some(key)) => k.as_slice() < key,
        };
        while let Some(item) = self.older.next_if(before) {
            let (k, entry) = item?;
            if let Some(e) = self.resolve(&k, None, Some(entry))? {
                self.sink.add(&k, &e)?;
            }
        }
        Ok(())
    }

    /// What the new run holds for a key: the newer entry over the older one (an operand folded
    /// into what is beneath it), then, at the bottom, no deletes and operands applied to
    /// nothing.
    fn resolve(&self, key: &[u8], newer: Option<Entry>, older: Option<Entry>) -> Result<Option<Entry>> {
        let operator = || {
            self.operator
                .as_ref()
                .ok_or_else(|| Error::corruption("laser compaction", 0, "a partial row in a key-value store"))
        };
        let entry = match (newer, older) {
            (None, None) => return Ok(None),
            (Some(n), Some(o)) if n.kind == EntryKind::Merge => match o.kind {
                EntryKind::Put => operator()?.apply(key, Some(&o.value), &n.value)?,
                EntryKind::Delete => operator()?.apply(key, None, &n.value)?,
                EntryKind::Merge => Entry::merge(operator()?.combine(key, &o.value, &n.value)?),
            },
            (Some(n), _) => n,
            (None, Some(o)) => o,
        };
        if !self.bottom {
            return Ok(Some(entry));
        }
        let entry = match entry.kind {
            EntryKind::Merge => operator()?.apply(key, None, &entry.value)?,
            _ => entry,
        };
        Ok((entry.kind != EntryKind::Delete).then_some(entry))
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
