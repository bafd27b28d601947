//! What the workload asks of each level, for the design advisor (paper §6.1: w, p_i, q_i, u_i
//! and their projections): point reads at the deepest level they read, updates at the level
//! their key was found, scans with the rows they returned (spread over the levels by their
//! sizes when the advisor runs), inserts of whole rows. Counted per projection. A key-value
//! store has one column and nothing to choose: it counts nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::advisor::{Access, LevelWorkload, Workload};
use crate::layout::{ColumnId, ColumnSet};

/// One point read in this many is counted (and weighs this many): a read takes the profile's
/// lock only then.
const READ_SAMPLE: u64 = 8;

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
    reads_seen: AtomicU64,
    /// Operations counted since the last `take` (reads by their weight).
    window_ops: AtomicU64,
    counts: Mutex<Counts>,
}

impl Profile {
    pub fn new(columns: usize) -> Profile {
        Profile {
            enabled: columns > 1,
            reads_seen: AtomicU64::new(0),
            window_ops: AtomicU64::new(0),
            counts: Mutex::default(),
        }
    }

    /// Operations counted since the last `take`.
    pub fn window_ops(&self) -> u64 {
        self.window_ops.load(Relaxed)
    }

    pub fn read(&self, level: usize, set: &ColumnSet) {
        if !self.enabled || !self.reads_seen.fetch_add(1, Relaxed).is_multiple_of(READ_SAMPLE) {
            return;
        }
        self.window_ops.fetch_add(READ_SAMPLE, Relaxed);
        *self.counts.lock().reads.entry((level, set.ids().to_vec())).or_default() += READ_SAMPLE as f64;
    }

    pub fn scan(&self, set: &ColumnSet, rows: u64) {
        if self.enabled {
            self.window_ops.fetch_add(1, Relaxed);
            let mut counts = self.counts.lock();
            let slot = counts.scans.entry(set.ids().to_vec()).or_default();
            slot.0 += 1.0;
            slot.1 += rows as f64;
        }
    }

    pub fn update(&self, level: usize, columns: Vec<ColumnId>) {
        if self.enabled {
            self.window_ops.fetch_add(1, Relaxed);
            *self.counts.lock().updates.entry((level, columns)).or_default() += 1.0;
        }
    }

    pub fn inserts(&self, rows: u64) {
        if self.enabled {
            self.window_ops.fetch_add(rows, Relaxed);
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
