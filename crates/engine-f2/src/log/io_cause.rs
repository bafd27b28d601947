//! Why a log's device bytes moved: f2's causes over the shared kit's per-thread cause
//! (`strata_kit::io_cause`). Each thread carries the cause of the work it is doing — a user
//! operation unless a maintenance task entered its own with [`IoCause::enter`] — and each log's
//! [`IoCounts`] adds every read and write of its segment files to the current cause. The engine's
//! stats report them as `io.<log>.<cause>.{reads,read_bytes,writes,write_bytes}`, so a phase's
//! device bytes can be split into what its gets, its writes' page turns, each kind of compaction
//! and the checkpoints cost (docs/ARCHITECTURE.md, f2, "Device bytes by cause").
//!
//! Threads a task spawns start as `User`: the task passes its cause on
//! ([`IoCause::current`], then `enter` on the new thread), as compaction's workers and its
//! parallel chunk and liveness readers do.

pub use strata_kit::io_cause::{CauseGuard, IoCounts};

/// f2's causes; the discriminant is the kit's cause index (`User` is 0, as the kit requires).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoCause {
    /// Gets, writes (the hot log's page turns) and rmw on the caller's thread.
    User = 0,
    HotToCold = 1,
    ColdToCold = 2,
    ChunkGc = 3,
    Checkpoint = 4,
    /// Recovery at open, and `verify`.
    Open = 5,
}

pub const CAUSES: [IoCause; 6] = [
    IoCause::User,
    IoCause::HotToCold,
    IoCause::ColdToCold,
    IoCause::ChunkGc,
    IoCause::Checkpoint,
    IoCause::Open,
];

/// The counters' cause names, in index order.
pub const CAUSE_NAMES: [&str; 6] = ["user", "hot_to_cold", "cold_to_cold", "chunk_gc", "checkpoint", "open"];

impl IoCause {
    /// The cause of this thread's current work.
    pub fn current() -> IoCause {
        CAUSES.get(strata_kit::io_cause::current()).copied().unwrap_or(IoCause::User)
    }

    /// Makes `self` this thread's cause until the guard is dropped (then the previous one again).
    #[must_use = "the cause holds only while the guard lives"]
    pub fn enter(self) -> CauseGuard {
        strata_kit::io_cause::enter(self as usize)
    }
}

/// `io.<log>.<cause>.<figure>` of one log's counts.
pub fn counters(counts: &IoCounts, log: &str) -> Vec<(String, u64)> {
    counts.counters(log, &CAUSE_NAMES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_round_trip_through_the_kit_and_name_their_counters() {
        for cause in CAUSES {
            let _entered = cause.enter();
            assert_eq!(IoCause::current(), cause);
        }
        assert_eq!(IoCause::current(), IoCause::User);
        let counts = IoCounts::default();
        {
            let _gc = IoCause::ChunkGc.enter();
            counts.record_write(288);
        }
        let named = counters(&counts, "chunk_log");
        assert!(named.contains(&("io.chunk_log.chunk_gc.write_bytes".to_string(), 288)));
        assert_eq!(named.len(), 4 * CAUSES.len());
    }
}
