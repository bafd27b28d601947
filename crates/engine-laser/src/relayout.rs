//! Regrouping a level in place (docs/ARCHITECTURE.md, "laser", write path step 8). A layout
//! reaches a level when a compaction writes into it, so a level that compactions rarely reach
//! (the deepest ones, the largest) keeps its old groups long after the layout moved — after a
//! workload shift, exactly the levels that hold most rows. When no flush or compaction is due,
//! the worker rewrites the one level whose regrouping pays back soonest by the cost model over
//! the last profile window, if it pays back within `PAYBACK_WINDOWS` windows: the model's
//! saving per window (block reads) against reading and writing the level's blocks once. So a
//! layout that moves for a passing window rewrites little, and one that holds is reached
//! everywhere without a rewrite of the whole store at once.

use std::sync::atomic::Ordering::Relaxed;

use strata_core::Result;

use crate::advisor::{level_cost, LevelWorkload};
use crate::engine::{Inner, WorkState};
use crate::layout::ColumnId;
use crate::version::Version;

/// Windows of the last profiled workload a regrouping must pay back within.
const PAYBACK_WINDOWS: f64 = 10.0;
/// The model's block (its B whole rows).
const BLOCK_BYTES: f64 = 4096.0;

impl Inner {
    /// One level regrouped in place when that pays (module docs), after the profile's window
    /// is looked at (`retune_layout`); `false` when no level is worth it.
    pub(crate) fn relayout_one(&self) -> Result<bool> {
        let mut work = self.work.lock();
        if self.writes.state().is_closed() {
            return Ok(false);
        }
        self.writes.state().check_not_poisoned()?;
        let version = self.version.read().clone();
        self.retune_layout(&mut work, &version);
        let Some(level) = self.level_to_regroup(&work, &version) else { return Ok(false) };
        self.regroup_counted(&mut work, &version, level)?;
        self.signals.notify_progress();
        Ok(true)
    }

    /// The shallowest level whose groups are not the layout's regrouped in place, whatever the
    /// model says (the `Compact` maintenance task: reorganize now); `false` when none is left.
    pub(crate) fn regroup_first_stale(&self) -> Result<bool> {
        let mut work = self.work.lock();
        self.writes.check_usable()?;
        let version = self.version.read().clone();
        let stale = (1..=version.levels.len()).find(|&level| !holds_layout(&work, &version, level));
        let Some(level) = stale else { return Ok(false) };
        self.regroup_counted(&mut work, &version, level)?;
        Ok(true)
    }

    /// `regroup_in_place` (a failure or panic poisons the engine), counted.
    fn regroup_counted(&self, work: &mut WorkState, version: &Version, level: usize) -> Result<()> {
        self.guarded("regrouping a level", || self.regroup_in_place(work, version, level))?;
        self.counters.regroups.fetch_add(1, Relaxed);
        Ok(())
    }

    /// The level whose groups differ from the layout's and whose regrouping pays back soonest
    /// within `PAYBACK_WINDOWS` windows of `last_workload`.
    fn level_to_regroup(&self, work: &WorkState, version: &Version) -> Option<usize> {
        let workload = work.last_workload.as_ref()?;
        let params = self.model_params();
        let nothing = LevelWorkload::default();
        let mut best: Option<(f64, usize)> = None;
        for level in 1..=version.levels.len() {
            if holds_layout(work, version, level) {
                continue;
            }
            let wanted = work.layout.groups(level);
            let held = held_groups(version, level);
            let served = workload.levels.get(level - 1).unwrap_or(&nothing);
            let cost = |groups: &[Vec<ColumnId>]| level_cost(&params, workload.inserts, served, groups);
            let saving_per_window = cost(&held) - cost(wanted);
            let rewrite_blocks = 2.0 * version.level_bytes(level) as f64 / BLOCK_BYTES;
            if saving_per_window <= 0.0 || saving_per_window * PAYBACK_WINDOWS < rewrite_blocks {
                continue;
            }
            let payback_windows = rewrite_blocks / saving_per_window;
            if best.is_none_or(|(b, _)| payback_windows < b) {
                best = Some((payback_windows, level));
            }
        }
        best.map(|(_, level)| level)
    }
}

/// Level `level`'s groups as column lists.
fn held_groups(version: &Version, level: usize) -> Vec<Vec<ColumnId>> {
    version.levels[level - 1].iter().map(|g| g.set.ids().to_vec()).collect()
}

/// Whether level `level` holds the layout's groups.
fn holds_layout(work: &WorkState, version: &Version, level: usize) -> bool {
    same_partition(&held_groups(version, level), work.layout.groups(level))
}

/// Whether two lists of groups are the same partition, in any order.
fn same_partition(a: &[Vec<ColumnId>], b: &[Vec<ColumnId>]) -> bool {
    let sorted = |groups: &[Vec<ColumnId>]| {
        let mut groups = groups.to_vec();
        groups.sort();
        groups
    };
    a.len() == b.len() && sorted(a) == sorted(b)
}
