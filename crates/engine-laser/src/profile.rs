//! What the workload asks of each level, for the design advisor (paper §6.1: w, p_i, q_i, u_i
//! and their projections): point reads at the deepest level they read, updates at the level
//! their key was found, scans with the rows they returned (spread over the levels by their
//! sizes when the advisor runs), inserts of whole rows. Counted per projection. A key-value
//! store has one column and nothing to choose: it counts nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_kit::worker::WorkerSignals;

use crate::advisor::{Access, LevelWorkload, Workload};
use crate::layout::{ColumnId, ColumnSet};

/// One point read in this many is counted (and weighs this many): a read takes the profile's
/// lock only then.
const READ_SAMPLE: u64 = 8;

/// Operations (reads by their weight) in a profile window: once a window holds this many, the
/// worker is asked to look at it (`layout=auto` asks the advisor again; any layout's levels
/// that still hold other groups may be regrouped, `relayout.rs`).
pub(crate) const WINDOW_OPS: u64 = 20_000;

#[derive(Default)]
struct Counts {
    inserts: f64,
    /// (level, columns) → reads.
    reads: HashMap<(usize, Vec<ColumnId>), f64>,
    /// columns → (scans, rows returned).
    scans: HashMap<Vec<ColumnId>, (f64, f64)>,
    /// (level, columns) → updates.
    updates: HashMap<(usize, Vec<ColumnId>), f64>,
}

/// See the module documentation.
pub(crate) struct Profile {
    enabled: bool,
    /// Woken when a window fills, so a workload of reads alone is looked at too.
    signals: Arc<WorkerSignals>,
    reads_seen: AtomicU64,
    /// Operations counted since the last `take` (reads by their weight).
    window_ops: AtomicU64,
    counts: Mutex<Counts>,
}

impl Profile {
    pub fn new(columns: usize, signals: Arc<WorkerSignals>) -> Profile {
        Profile {
            enabled: columns > 1,
            signals,
            reads_seen: AtomicU64::new(0),
            window_ops: AtomicU64::new(0),
            counts: Mutex::default(),
        }
    }

    /// Operations counted since the last `take`.
    pub fn window_ops(&self) -> u64 {
        self.window_ops.load(Relaxed)
    }

    /// Whether the window holds `WINDOW_OPS` operations.
    pub fn window_full(&self) -> bool {
        self.window_ops() >= WINDOW_OPS
    }

    /// Counts `ops` operations into the window; the one that fills it wakes the worker.
    fn count(&self, ops: u64) {
        let before = self.window_ops.fetch_add(ops, Relaxed);
        if before < WINDOW_OPS && before + ops >= WINDOW_OPS {
            self.signals.request();
        }
    }

    pub fn read(&self, level: usize, set: &ColumnSet) {
        if !self.enabled || !self.reads_seen.fetch_add(1, Relaxed).is_multiple_of(READ_SAMPLE) {
            return;
        }
        self.count(READ_SAMPLE);
        *self.counts.lock().reads.entry((level, set.ids().to_vec())).or_default() += READ_SAMPLE as f64;
    }

    pub fn scan(&self, set: &ColumnSet, rows: u64) {
        if self.enabled {
            self.count(1);
            let mut counts = self.counts.lock();
            let slot = counts.scans.entry(set.ids().to_vec()).or_default();
            slot.0 += 1.0;
            slot.1 += rows as f64;
        }
    }

    pub fn update(&self, level: usize, columns: Vec<ColumnId>) {
        if self.enabled {
            self.count(1);
            *self.counts.lock().updates.entry((level, columns)).or_default() += 1.0;
        }
    }

    pub fn inserts(&self, rows: u64) {
        if self.enabled {
            self.count(rows);
            self.counts.lock().inserts += rows as f64;
        }
    }

    /// The workload counted since the last `take` (and forgotten), for `levels` levels whose
    /// sizes are `level_bytes` (level 1 first): a scan's rows are spread over the levels in
    /// proportion to their bytes; reads and updates served above level 1 (MemTables, level 0)
    /// cost every layout the same and are left out.
    pub fn take(&self, level_bytes: &[u64]) -> Workload {
        let counts = std::mem::take(&mut *self.counts.lock());
        self.window_ops.store(0, Relaxed);
        let mut levels = vec![LevelWorkload::default(); level_bytes.len()];
        let access = |columns: Vec<ColumnId>, count: f64, entries: f64| Access { columns, count, entries };
        for ((level, columns), count) in counts.reads {
            if let Some(l) = level.checked_sub(1).and_then(|i| levels.get_mut(i)) {
                l.reads.push(access(columns, count, 1.0));
            }
        }
        for ((level, columns), count) in counts.updates {
            if let Some(l) = level.checked_sub(1).and_then(|i| levels.get_mut(i)) {
                l.updates.push(access(columns, count, 1.0));
            }
        }
        let total: u64 = level_bytes.iter().sum();
        for (columns, (count, rows)) in counts.scans {
            for (l, bytes) in levels.iter_mut().zip(level_bytes) {
                let share = if total == 0 { 0.0 } else { *bytes as f64 / total as f64 };
                l.scans.push(access(columns.clone(), count, rows / count.max(1.0) * share));
            }
        }
        for l in &mut levels {
            l.reads.sort_by(|a, b| a.columns.cmp(&b.columns));
            l.scans.sort_by(|a, b| a.columns.cmp(&b.columns));
            l.updates.sort_by(|a, b| a.columns.cmp(&b.columns));
        }
        Workload { inserts: counts.inserts, levels }
    }
}
