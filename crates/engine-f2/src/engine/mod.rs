//! The engine's shared state, how it opens (recovery), and its poison/closed bookkeeping.
//! Paths: docs/ARCHITECTURE.md, section `f2` (numbered write, compaction, checkpoint and recovery paths).

mod checkpointing;
mod cold_live;
mod compaction;
mod maintenance;
mod ops;
#[cfg(test)]
mod race_tests;
#[cfg(test)]
mod single_log_tests;
#[cfg(test)]
pub(crate) mod test_engines;
pub(crate) mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{EngineConfig, Error, Poison, Result};
use strata_io::Storage;
use strata_wal::{Wal, WalOptions};

use crate::checkpoint::{self, Checkpoint};
use crate::hash::key_hash;
use crate::hot_snapshot;
use crate::index::cold::ColdIndex;
use crate::index::hot::HotIndex;
use crate::log::{AppendLog, HybridLog, ReadCache, SegmentedFile, FIRST_ADDRESS};
use crate::options::{F2Options, Resolved};

pub(crate) const WAL_PREFIX: &str = "f2wal-";
use crate::log::{CHUNK_PREFIX, COLD_PREFIX, HOT_PREFIX};

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
    pub last_checkpoint: Mutex<Checkpoint>,
    pub wal_bytes_since_checkpoint: AtomicU64,
    pub closed: AtomicBool,
    /// Sticky after a failed write, sync, compaction or checkpoint.
    pub poison: Poison,
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
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig, options: &F2Options) -> Result<Inner> {
        let opts = options.resolve(config)?;
        for tmp in [checkpoint::tmp_name(), hot_snapshot::tmp_name()] {
            if storage.exists(&tmp)? {
                storage.remove(&tmp)?;
            }
        }
        // 1. The newest checkpoint fixes the layout and each log's live range.
        let ck = load_or_create_checkpoint(storage.as_ref(), &opts)?;
        let opts = options.resolve_for_layout(config, &opts, ck.layout(), checkpoint::FILE_NAME)?;
        let page = ck.page_size_bytes;
        let segments = |prefix| {
            SegmentedFile::new(storage.clone(), prefix, ck.segment_bytes).with_direct_reads(config.direct_io)
        };
        let (hot_file, cold_file, chunk_file) =
            (segments(HOT_PREFIX), segments(COLD_PREFIX), segments(CHUNK_PREFIX));
        // 2. (Leftover segment files are removed at step 5, once everything else checked out.)
        // 3. Open the logs (tail pages loaded) and rebuild both indexes from the checkpointed logs.
        let hot = HybridLog::open(
            hot_file,
            page,
            opts.hot_log_pages,
            opts.released_padding_regions,
            opts.mutable_fraction,
            ck.hot_begin,
            ck.hot_tail,
        )?;
        let cold = AppendLog::open(cold_file, page, ck.cold_begin, ck.cold_tail)?;
        verify_tail_page(ck.cold_begin, ck.cold_tail, page, &mut |from, to| {
            cold.scan(from, to, &mut |_, _| Ok(()))
        })?;
        let cold_index =
            ColdIndex::new(AppendLog::open(chunk_file, page, ck.chunk_begin, ck.chunk_tail)?, ck.chunk_count);
        cold_index.rebuild()?;
        //    The hot index comes from the snapshot written after this checkpoint if it is there
        //    and intact, else from a scan of the hot log.
        let new_hot_index = || HotIndex::with_budget_bytes(opts.hot_index_buckets, opts.split_bytes[0]);
        let mut hot_index = new_hot_index();
        let snapshot_key = hot_snapshot::SnapshotKey {
            wal_lsn: ck.wal_lsn,
            hot_begin: ck.hot_begin,
            hot_tail: ck.hot_tail,
            bucket_count: hot_index.bucket_count(),
        };
        let (mut scanned, mut loaded) = (0, 0);
        let snapshot_used =
            hot_snapshot::load_matching(storage.as_ref(), &snapshot_key, &mut |(bucket, tag, address)| {
                let _ = hot_index.find_or_create(HotIndex::hash_for(bucket, tag)).cas_address(address);
                loaded += 1;
            })?;
        if snapshot_used {
            hot.set_lent_bytes(hot_index.overrun_bytes());
            // In-memory pages are read without checksum checks, so the tail page loaded from
            // disk is checked here (the scan below checks it otherwise).
            verify_tail_page(ck.hot_begin, ck.hot_tail, page, &mut |from, to| {
                hot.scan(from, to, &mut |_, _| Ok(()))
            })?;
        } else {
            if loaded > 0 {
                // Fed from a snapshot whose body checksum failed at the end: start over, freeing
                // the fed index before the new one is allocated (never two at once).
                drop(hot_index);
                (hot_index, loaded) = (new_hot_index(), 0);
            }
            scanned = hot.scan(ck.hot_begin, ck.hot_tail, &mut |address, view| {
                let entry = hot_index.find_or_create(key_hash(view.key));
                let _ = entry.cas_address(address);
                hot.set_lent_bytes(hot_index.overrun_bytes());
                Ok(())
            })?;
        }
        let wal_options = WalOptions {
            segment_bytes: config.wal_segment_bytes,
            recovery_mode: config.recovery_mode,
            file_prefix: WAL_PREFIX.to_string(),
            ..WalOptions::default()
        };
        // 4. Replay the WAL records after the checkpoint into the hot log.
        let replayed = strata_kit::replay::open_wal(
            storage.clone(),
            wal_options.clone(),
            ck.wal_lsn + 1,
            &mut |_lsn, batch| {
                for op in batch.ops() {
                    ops::apply_op(&hot, &hot_index, None, op.key(), key_hash(op.key()), op.value(), None)?;
                }
                Ok(())
            },
        )?;
        let (wal, report, replayed_bytes) = (replayed.wal, replayed.report, replayed.payload_bytes);
        // 5. Segment files outside the live ranges are leftovers (of a crash after a checkpoint,
        //    or of one before the deletion of truncated segments finished). Removed only now: an
        //    open that fails (a damaged checkpoint naming a shorter range, a missing WAL segment)
        //    must leave every file for the operator. The hot range ends at the tail the replay
        //    reached; a leftover it wrote into holds its pages now.
        let hot_tail = hot.tail().max(ck.hot_begin + 1);
        segments(HOT_PREFIX).remove_outside(ck.hot_begin, hot_tail)?;
        segments(COLD_PREFIX).remove_outside(ck.cold_begin, ck.cold_tail.max(ck.cold_begin + 1))?;
        segments(CHUNK_PREFIX).remove_outside(ck.chunk_begin, ck.chunk_tail.max(ck.chunk_begin + 1))?;
        //    A hot-index snapshot that did not match belongs to an older checkpoint (the crash
        //    came between a checkpoint and its snapshot) or is damaged: it is never used again. A
        //    matching one is kept: it serves the next open too, until the next checkpoint
        //    replaces it.
        if !snapshot_used && storage.exists(hot_snapshot::FILE_NAME)? {
            storage.remove(hot_snapshot::FILE_NAME)?;
        }
        storage.sync_dir()?;
        let read_cache = (opts.read_cache_pages >= 2).then(|| ReadCache::new(page, opts.read_cache_pages));
        let inner = Inner {
            storage,
            opts,
            memory_budget_bytes: config.memory_budget_bytes,
            wal_options,
            wal,
            key_locks: (0..ops::KEY_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            write_lock: RwLock::new(()),
            batch_gate: RwLock::new(()),
            maintenance: Mutex::new(()),
            hot,
            hot_index,
            cold,
            cold_index,
            cold_live_estimate_bytes: AtomicU64::new(ck.cold_live_estimate_bytes),
            read_cache,
            last_checkpoint: Mutex::new(ck),
            wal_bytes_since_checkpoint: AtomicU64::new(replayed_bytes),
            closed: AtomicBool::new(false),
            poison: Poison::new(),
            counters: Counters::default(),
            worker: Arc::default(),
        };
        inner.counters.records_replayed.store(report.records_replayed, Relaxed);
        inner.counters.hot_records_scanned_at_open.store(scanned, Relaxed);
        inner.counters.hot_index_entries_loaded.store(loaded, Relaxed);
        Ok(inner)
    }

    pub fn ensure_usable(&self) -> Result<()> {
        if self.closed.load(Relaxed) {
            return Err(Error::Closed);
        }
        self.poison.check()
    }

    /// Bytes of every file in the directory (logs, checkpoint, WAL).
    pub fn disk_bytes(&self) -> u64 {
        strata_io::total_file_bytes(self.storage.as_ref())
    }

    /// Records the first write-path failure; every later operation returns `Error::Poisoned`.
    pub fn poisoned(&self, e: Error) -> Error {
        self.poison.poison(e)
    }
}

/// Checks every record checksum of the tail page of a log `[begin, tail)` (loaded into memory at
/// open, where reads do not check checksums).
fn verify_tail_page(
    begin: u64,
    tail: u64,
    page_size_bytes: u64,
    scan: &mut dyn FnMut(u64, u64) -> Result<u64>,
) -> Result<()> {
    let from = (tail - tail % page_size_bytes).max(begin);
    if tail > from {
        scan(from, tail)?;
    }
    Ok(())
}

/// The store's checkpoint; a new store gets one before any other file (so a store with f2 files
/// and no checkpoint lost it). Without that check a missing checkpoint would make every segment
/// look like a leftover and open would delete the data before the WAL showed anything missing.
fn load_or_create_checkpoint(storage: &dyn Storage, opts: &Resolved) -> Result<Checkpoint> {
    if let Some(ck) = Checkpoint::load(storage)? {
        return Ok(ck);
    }
    if let Some(other) = storage.list()?.into_iter().find(|n| n.starts_with("f2")) {
        return Err(Error::corruption(
            checkpoint::FILE_NAME,
            0,
            format!(
                "the file is missing, but the store holds {other} (a new store writes its checkpoint first)"
            ),
        ));
    }
    let ck = Checkpoint {
        wal_lsn: 0,
        page_size_bytes: opts.page_size_bytes,
        segment_bytes: opts.segment_bytes,
        chunk_count: opts.chunk_count,
        hot_begin: FIRST_ADDRESS,
        hot_tail: FIRST_ADDRESS,
        cold_begin: FIRST_ADDRESS,
        cold_tail: FIRST_ADDRESS,
        chunk_begin: FIRST_ADDRESS,
        chunk_tail: FIRST_ADDRESS,
        cold_truncations: 0,
        cold_live_estimate_bytes: 0,
    };
    ck.store(storage)?;
    Ok(ck)
}
