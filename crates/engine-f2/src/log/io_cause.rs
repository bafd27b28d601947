//! Why a log's device bytes moved. Each thread carries the cause of the work it is doing — a
//! user operation unless a maintenance task entered its own with [`IoCause::enter`] — and each
//! log's [`IoCounts`] adds every read and write of its segment files to the current cause. The
//! engine's stats report them as `io.<log>.<cause>.{reads,read_bytes,writes,write_bytes}`, so a
//! phase's device bytes can be split into what its gets, its writes' page turns, each kind of
//! compaction and the checkpoints cost (docs/ARCHITECTURE.md, f2, "Device bytes by cause").
//!
//! Threads a task spawns start as `User`: the task passes its cause on
//! ([`IoCause::current`], then `enter` on the new thread), as compaction's workers and its
//! parallel chunk and liveness readers do.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoCause {
    /// Gets, writes (the hot log's page turns) and rmw on the caller's thread.
    User,
    HotToCold,
    ColdToCold,
    ChunkGc,
    Checkpoint,
    /// Recovery at open, and `verify`.
    Open,
}

pub const CAUSES: [IoCause; 6] = [
    IoCause::User,
    IoCause::HotToCold,
    IoCause::ColdToCold,
    IoCause::ChunkGc,
    IoCause::Checkpoint,
    IoCause::Open,
];

thread_local! {
    static CURRENT: Cell<IoCause> = const { Cell::new(IoCause::User) };
}

impl IoCause {
    pub fn name(self) -> &'static str {
        match self {
            IoCause::User => "user",
            IoCause::HotToCold => "hot_to_cold",
            IoCause::ColdToCold => "cold_to_cold",
            IoCause::ChunkGc => "chunk_gc",
            IoCause::Checkpoint => "checkpoint",
            IoCause::Open => "open",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The cause of this thread's current work.
    pub fn current() -> IoCause {
        CURRENT.with(Cell::get)
    }

    /// Makes `self` this thread's cause until the guard is dropped (then the previous one again).
    #[must_use = "the cause holds only while the guard lives"]
    pub fn enter(self) -> CauseGuard {
        CauseGuard { previous: CURRENT.with(|c| c.replace(self)) }
    }
}

pub struct CauseGuard {
    previous: IoCause,
}

impl Drop for CauseGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.previous));
    }
}

/// One log's device reads and writes, by cause.
#[derive(Default)]
pub struct IoCounts {
    reads: [AtomicU64; CAUSES.len()],
    read_bytes: [AtomicU64; CAUSES.len()],
    writes: [AtomicU64; CAUSES.len()],
    write_bytes: [AtomicU64; CAUSES.len()],
}

impl IoCounts {
    pub fn record_read(&self, bytes: usize) {
        Self::add(&self.reads, &self.read_bytes, bytes);
    }

    pub fn record_write(&self, bytes: usize) {
        Self::add(&self.writes, &self.write_bytes, bytes);
    }

    fn add(ops: &[AtomicU64; CAUSES.len()], bytes_by_cause: &[AtomicU64; CAUSES.len()], bytes: usize) {
        let i = IoCause::current().index();
        if let (Some(op), Some(b)) = (ops.get(i), bytes_by_cause.get(i)) {
            op.fetch_add(1, Relaxed);
            b.fetch_add(bytes as u64, Relaxed);
        }
    }

    /// `io.<log>.<cause>.<figure>` for every cause.
    pub fn counters(&self, log: &str) -> Vec<(String, u64)> {
        let mut out = Vec::with_capacity(4 * CAUSES.len());
        for cause in CAUSES {
            let i = cause.index();
            for (figure, values) in [
                ("reads", &self.reads),
                ("read_bytes", &self.read_bytes),
                ("writes", &self.writes),
                ("write_bytes", &self.write_bytes),
            ] {
                let value = values.get(i).map_or(0, |v| v.load(Relaxed));
                out.push((format!("io.{log}.{}.{figure}", cause.name()), value));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(counts: &IoCounts, name: &str) -> u64 {
        counts.counters("hot").into_iter().find(|(n, _)| n == name).map_or(u64::MAX, |(_, v)| v)
    }

    #[test]
    fn bytes_go_to_the_cause_entered_on_this_thread_and_back_after_the_guard() {
        let counts = IoCounts::default();
        counts.record_read(100);
        {
            let _compacting = IoCause::HotToCold.enter();
            counts.record_read(4096);
            counts.record_write(512);
            {
                let _nested = IoCause::Checkpoint.enter();
                counts.record_write(7);
            }
            counts.record_read(4096);
        }
        counts.record_write(3);
        assert_eq!(counter(&counts, "io.hot.user.read_bytes"), 100);
        assert_eq!(counter(&counts, "io.hot.user.write_bytes"), 3);
        assert_eq!(counter(&counts, "io.hot.hot_to_cold.reads"), 2);
        assert_eq!(counter(&counts, "io.hot.hot_to_cold.read_bytes"), 8192);
        assert_eq!(counter(&counts, "io.hot.hot_to_cold.write_bytes"), 512);
        assert_eq!(counter(&counts, "io.hot.checkpoint.writes"), 1);
        // Another thread starts as a user thread, whatever this one entered.
        let _here = IoCause::ColdToCold.enter();
        std::thread::scope(|s| s.spawn(|| assert_eq!(IoCause::current(), IoCause::User)).join().unwrap());
        assert_eq!(counts.counters("hot").len(), 4 * CAUSES.len());
    }
}
