//! χ that chooses itself (`checkpoint_distance=auto`, the default; the paper tunes it by hand
//! per workload, §5.1.3). The engine counts the operations it serves; after every window of
//! `WINDOW_OPS` it smooths the share of them that wrote and sets χ from it (`distance_for`):
//! writes want a large MemTable (updates coalesce, batches land on fewer pivots, so fewer bytes
//! are rewritten per byte written), reads want the memory in the block cache. A lower χ leaves
//! an active table already above it in place (its records, the latest writes, serve reads from
//! memory; measured: sending it to the tree at once cost C a fifth of its throughput) and frees
//! only the room it no longer needs to grow into; the next write finalizes it (once fewer than
//! two finalized tables wait: `Inner::finalize_limit_bytes`).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};

use parking_lot::Mutex;

use crate::options::Settle;

/// Operations (reads, scans, written records) per observation window.
pub(crate) const WINDOW_OPS: u64 = 4096;

/// The write share at which χ is the largest the budget allows: a load. YCSB A (half writes)
/// gets the geometric middle, budget/16, which measured best for A (docs/benchmarks.md).
const FULL_WRITE_SHARE: f64 = 1.0;

/// A new χ replaces the current one only when they differ by more than this factor, so a
/// share that wavers inside a phase does not resize the cache every window.
const CHANGE_FACTOR: f64 = 1.25;

/// The shares of a window's operations, smoothed over the windows (each window weighs half).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Shares {
    /// Of reads, scans and written records, the written records.
    pub write: f64,
    /// Of the same, the scans.
    pub scan: f64,
}

/// The counters of the current window and the smoothed shares, kept while χ or settling is
/// `auto`.
pub(crate) struct DistanceTuner {
    auto: AtomicBool,
    /// `Settle`, as its byte.
    settle: AtomicU8,
    window_ops: AtomicU64,
    window_writes: AtomicU64,
    window_scans: AtomicU64,
    /// `None` before the first window.
    smoothed: Mutex<Option<Shares>>,
    /// Times `auto` moved χ.
    pub changes: AtomicU64,
    /// Held while χ is chosen or set, so a value fixed by `set_option` is never overwritten by
    /// a window that ended as it was set.
    pub choosing: Mutex<()>,
}

impl DistanceTuner {
    pub fn new(auto: bool, settle: Settle) -> DistanceTuner {
        DistanceTuner {
            auto: AtomicBool::new(auto),
            settle: AtomicU8::new(settle.to_byte()),
            window_ops: AtomicU64::new(0),
            window_writes: AtomicU64::new(0),
            window_scans: AtomicU64::new(0),
            smoothed: Mutex::new(None),
            changes: AtomicU64::new(0),
            choosing: Mutex::new(()),
        }
    }

    pub fn is_auto(&self) -> bool {
        self.auto.load(Relaxed)
    }

    pub fn set_auto(&self, auto: bool) {
        self.auto.store(auto, Relaxed);
    }

    pub fn settle(&self) -> Settle {
        Settle::from_byte(self.settle.load(Relaxed))
    }

    pub fn set_settle(&self, settle: Settle) {
        self.settle.store(settle.to_byte(), Relaxed);
    }

    /// Counts `reads` gets, `scans` scans and `writes` written records; true for the one
    /// caller whose operations complete the window (it then calls `end_window`).
    pub fn note(&self, reads: u64, scans: u64, writes: u64) -> bool {
        if !self.is_auto() && self.settle() != Settle::Auto {
            return false;
        }
        if writes > 0 {
            self.window_writes.fetch_add(writes, Relaxed);
        }
        if scans > 0 {
            self.window_scans.fetch_add(scans, Relaxed);
        }
        let ops = reads + scans + writes;
        let before = self.window_ops.fetch_add(ops, Relaxed);
        before < WINDOW_OPS && before + ops >= WINDOW_OPS
    }

    /// Starts a new window; returns the shares smoothed over the windows so far.
    pub fn end_window(&self) -> Shares {
        let mut smoothed = self.smoothed.lock();
        let ops = self.window_ops.swap(0, Relaxed).max(1);
        let share = |count: u64| count.min(ops) as f64 / ops as f64;
        let window = Shares {
            write: share(self.window_writes.swap(0, Relaxed)),
            scan: share(self.window_scans.swap(0, Relaxed)),
        };
        let next = smoothed.map_or(window, |old| Shares {
            write: (old.write + window.write) / 2.0,
            scan: (old.scan + window.scan) / 2.0,
        });
        *smoothed = Some(next);
        next
    }

    /// The smoothed shares; `None` before the first window.
    pub fn shares(&self) -> Option<Shares> {
        *self.smoothed.lock()
    }

    /// The smoothed write and scan shares in thousandths (for `Stats`); 0 before the first
    /// window.
    pub fn shares_permille(&self) -> (u64, u64) {
        let permille = |share: f64| (share * 1000.0).round() as u64;
        self.shares().map_or((0, 0), |s| (permille(s.write), permille(s.scan)))
    }
}

/// The smallest and largest χ `auto` chooses for `budget_bytes`: up to three tables of the
/// largest (one active, two finalized) take three quarters of the budget, as the fixed default
/// does; the smallest leaves the block cache all but 1/64 of it.
pub(crate) fn distance_bounds(budget_bytes: u64) -> (u64, u64) {
    let low_limit = *crate::CHECKPOINT_DISTANCE_RANGE.start();
    let high = (budget_bytes / 4).clamp(low_limit, 1 << 30);
    let low = (budget_bytes / 64).clamp(low_limit, high);
    (low, high)
}

/// χ for a smoothed write share: from the smallest bound at no writes to the largest at
/// `FULL_WRITE_SHARE`, geometrically (write amplification falls with log χ, paper §2.2.4).
/// The block cache gets what the tables leave: it grows as χ falls.
pub(crate) fn distance_for(write_share: f64, budget_bytes: u64) -> u64 {
    let (low, high) = distance_bounds(budget_bytes);
    let reach = (write_share / FULL_WRITE_SHARE).clamp(0.0, 1.0);
    let distance = low as f64 * (high as f64 / low as f64).powf(reach);
    (distance as u64).clamp(low, high)
}

/// The write share below which the worker settles the tree's buffers into its leaves.
const SETTLE_BELOW_WRITE_SHARE: f64 = 0.5;
/// The scan share from which it does: a get meets a buffered run through its filter, a scan
/// with a block read (measured at 2M records after YCSB A: settling cost B and C 30% of their
/// throughput while it ran, and won E 40%).
const SETTLE_FROM_SCAN_SHARE: f64 = 0.1;
/// The least fraction settling aims for (a node's buffer against the leaf bytes below it):
/// with no writes at all, buffers a hundredth of the data.
pub(crate) const MIN_SETTLE_FRACTION: f64 = 0.01;

/// How far the worker settles the tree at the smoothed `shares` (`Tree::settle_step`): each
/// node's buffer to this fraction of the leaf bytes below it, from the space bound's fraction
/// (`SPACE_PENDING_FRACTION`) at `SETTLE_BELOW_WRITE_SHARE` down to `MIN_SETTLE_FRACTION`
/// with no writes; `None` (no settling) from that write share up, or under
/// `SETTLE_FROM_SCAN_SHARE` scans. A buffered run costs a scan a block read in each node it
/// passes (measured: 1.8 device reads per YCSB E scan against 1.3 settled), and settling costs
/// a leaf's rewrite per flush: worth it when scans are many and writes few, and what new
/// writes cost to settle again falls with their share.
pub(crate) fn settle_fraction(shares: Shares) -> Option<f64> {
    (shares.write < SETTLE_BELOW_WRITE_SHARE && shares.scan >= SETTLE_FROM_SCAN_SHARE).then(|| {
        let fraction = crate::tree::SPACE_PENDING_FRACTION * shares.write / SETTLE_BELOW_WRITE_SHARE;
        fraction.max(MIN_SETTLE_FRACTION)
    })
}

/// Whether `target` differs from `current` enough to replace it.
pub(crate) fn worth_changing(current: u64, target: u64) -> bool {
    let (small, large) = (current.min(target).max(1) as f64, current.max(target) as f64);
    large / small > CHANGE_FACTOR
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_distance_grows_with_the_write_share_within_its_bounds() {
        let budget = 64 << 20;
        let (low, high) = distance_bounds(budget);
        assert_eq!((low, high), (1 << 20, 16 << 20));
        assert_eq!(distance_for(0.0, budget), low);
        assert_eq!(distance_for(FULL_WRITE_SHARE, budget), high);
        assert_eq!(distance_for(0.5, budget), 4 << 20, "YCSB A: budget/16");
        let quarter = distance_for(FULL_WRITE_SHARE / 4.0, budget);
        assert_eq!(quarter, 2 << 20, "a quarter of the way is a quarter of the doublings");
        // A tiny budget still gives the smallest table the engine accepts.
        assert_eq!(distance_bounds(1 << 10), (4 << 10, 4 << 10));
    }

    #[test]
    fn windows_end_once_and_smooth_the_shares() {
        let tuner = DistanceTuner::new(true, Settle::Off);
        assert_eq!(tuner.shares(), None);
        assert!(!tuner.note(WINDOW_OPS - 1, 0, 0));
        assert!(tuner.note(0, 0, 1), "the write that completes the window ends it");
        assert!(!tuner.note(0, 0, 1), "only one caller ends a window");
        let first = tuner.end_window();
        assert!(first.write < 0.01 && first.scan == 0.0, "{first:?}");
        assert!(tuner.note(0, WINDOW_OPS / 2, WINDOW_OPS / 2));
        let second = tuner.end_window();
        assert!((second.write - (first.write + 0.5) / 2.0).abs() < 1e-9, "{second:?}");
        assert!((second.scan - 0.25).abs() < 1e-9, "{second:?}");
        assert_eq!(tuner.shares_permille(), ((second.write * 1000.0).round() as u64, 250));
        tuner.set_auto(false);
        assert!(!tuner.note(0, 0, 2 * WINDOW_OPS), "a fixed distance counts nothing");
        tuner.set_settle(Settle::Auto);
        assert!(tuner.note(0, 0, 2 * WINDOW_OPS), "settling by the shares counts");
    }

    #[test]
    fn settling_wants_scans_and_few_writes() {
        let shares = |write, scan| Shares { write, scan };
        assert_eq!(settle_fraction(shares(0.0, 0.95)), Some(MIN_SETTLE_FRACTION));
        let e = settle_fraction(shares(0.05, 0.95)).unwrap();
        assert!((e - 0.03).abs() < 1e-9, "YCSB E: {e}");
        assert_eq!(settle_fraction(shares(0.0, 0.0)), None, "gets alone meet filters");
        assert_eq!(settle_fraction(shares(0.05, 0.05)), None);
        assert_eq!(settle_fraction(shares(0.5, 0.5)), None, "half writes: the apply path's bounds");
    }

    #[test]
    fn small_wavers_do_not_change_the_distance() {
        assert!(!worth_changing(1 << 20, (1 << 20) + (1 << 18)));
        assert!(worth_changing(1 << 20, 2 << 20));
        assert!(worth_changing(2 << 20, 1 << 20));
    }
}
