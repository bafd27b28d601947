//! The engine's shared state and its poison/closed bookkeeping; how it opens is `open.rs`.
//! Paths: docs/ARCHITECTURE.md, section `f2` (numbered write, compaction, checkpoint and recovery paths).

mod checkpointing;
mod cold_live;
mod compaction;
mod maintenance;
pub(crate) mod memory_split;
mod open;
mod ops;
#[cfg(test)]
mod race_tests;
#[cfg(test)]
mod single_log_tests;
mod stats;
#[cfg(test)]
pub(crate) mod test_engines;
pub(crate) mod worker;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{Error, Result};
use strata_io::Storage;
use strata_kit::open_state::OpenState;
use strata_wal::{Wal, WalOptions};

use crate::checkpoint::Checkpoint;
use crate::index::cold::ColdIndex;
use crate::index::hot::HotIndex;
use crate::log::{AppendLog, HybridLog, ReadCache};
use crate::options::Resolved;
use memory_split::MemorySplit;

pub(crate) const WAL_PREFIX: &str = "f2wal-";

pub(crate) struct Inner {
    pub storage: Arc<dyn Storage>,
    pub opts: Resolved,
    /// `EngineConfig::memory_budget_bytes` (for stats).
    pub memory_budget_bytes: u64,
    pub wal_options: WalOptions,
    pub wal: Wal,
    /// Write latches, one per stripe of key hashes: a write holds its keys' latches from WAL
    /// append through its commit to the end of its apply, so per key WAL order is apply order
    /// (and replay reproduces the state), and a write is applied only once its commit succeeded.
    pub key_locks: Box<[Mutex<()>]>,
    /// Writers hold it shared from WAL append through commit to the end of apply; the checkpoint cut and
    /// `stable_hot_tail` take it exclusively (every logged write applied, every reserved record
    /// complete).
    pub write_lock: RwLock<()>,
    /// Readers hold it shared; a multi-operation batch holds it exclusively while it is applied,
    /// so no reader sees half a batch.
    pub batch_gate: RwLock<()>,
    /// Held by compaction, checkpoint and verify: one maintenance task at a time. The cold log
    /// and the cold index are written only under it (by a compaction round's workers, one per
    /// chunk: engine/compaction/frames.rs).
    pub maintenance: Mutex<()>,
    pub hot: HybridLog,
    pub hot_index: HotIndex,
    pub cold: AppendLog,
    pub cold_index: ColdIndex,
    /// The cold log's estimated live bytes (engine/cold_live.rs): set by complete cold→cold
    /// rounds and loaded from the checkpoint; read by the default cold→cold trigger.
    pub cold_live_estimate_bytes: AtomicU64,
    /// `None` when the read-cache budget is under two pages.
    pub read_cache: Option<ReadCache>,
    /// How much of the hot log's window the read cache holds now, and the signals that move it.
    pub split: MemorySplit,
    pub last_checkpoint: Mutex<Checkpoint>,
    /// The sum of the last checkpoint's three log begins (`checkpoint_due` reads it on every
    /// write without the mutex).
    pub last_checkpoint_begins_sum: AtomicU64,
    pub wal_bytes_since_checkpoint: AtomicU64,
    /// Closed flag, and the poison: sticky after a failed write, sync, compaction or checkpoint.
    pub state: OpenState,
    pub counters: Counters,
    /// Signals between writers and the background maintenance thread.
    pub worker: Arc<strata_kit::worker::WorkerSignals>,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub user_bytes_written: AtomicU64,
    pub user_bytes_read: AtomicU64,
    pub in_place_updates: AtomicU64,
    pub appends: AtomicU64,
    pub hot_hits: AtomicU64,
    pub read_cache_hits: AtomicU64,
    pub read_cache_inserts: AtomicU64,
    pub read_cache_second_chances: AtomicU64,
    pub cold_hits: AtomicU64,
    pub misses: AtomicU64,
    pub cold_lookups: AtomicU64,
    pub false_absence_retries: AtomicU64,
    /// Lookups restarted because the hot log was truncated while they missed in it.
    pub hot_truncation_retries: AtomicU64,
    pub rmw_retries: AtomicU64,
    /// Rmw calls that found no hot record and read the cold log outside the write lock.
    pub rmw_cold_reads: AtomicU64,
    pub hot_compactions: AtomicU64,
    pub hot_records_to_cold: AtomicU64,
    /// Single-log mode: live records hot-log compaction copied to the hot log's own tail.
    pub hot_records_to_hot_tail: AtomicU64,
    /// Record bytes appended by compaction (hot→cold, hot→hot tail and cold→cold copies).
    pub compaction_bytes_written: AtomicU64,
    pub cold_compactions: AtomicU64,
    pub cold_records_copied: AtomicU64,
    pub chunks_collected: AtomicU64,
    pub checkpoints: AtomicU64,
    /// Bytes of `f2-checkpoint` and `f2-hot-index` files written (the logs count their own).
    pub checkpoint_file_bytes_written: AtomicU64,
    pub records_replayed: AtomicU64,
    pub hot_records_scanned_at_open: AtomicU64,
    /// Hot-index entries loaded from the snapshot at open (instead of scanning the hot log).
    pub hot_index_entries_loaded: AtomicU64,
    /// Hot-index snapshots that could not be written after a checkpoint (the checkpoint stands;
    /// the next open after a crash scans the hot log instead).
    pub hot_index_snapshot_failures: AtomicU64,
    /// Writes that found the hot log over its disk budget and waited for compaction.
    pub backpressure_waits: AtomicU64,
    pub backpressure_max_wait_us: AtomicU64,
    /// Longest run of each maintenance task (µs).
    pub hot_round_max_us: AtomicU64,
    pub cold_round_max_us: AtomicU64,
    pub chunk_gc_max_us: AtomicU64,
    pub checkpoint_max_us: AtomicU64,
}

impl Inner {
    pub fn ensure_usable(&self) -> Result<()> {
        self.state.check()
    }

    /// Bytes of every file in the directory (logs, checkpoint, WAL).
    pub fn disk_bytes(&self) -> u64 {
        strata_io::total_file_bytes(self.storage.as_ref())
    }

    /// Records the first write-path failure; every later operation returns `Error::Poisoned`.
    pub fn poisoned(&self, e: Error) -> Error {
        self.state.poison(e)
    }
}
