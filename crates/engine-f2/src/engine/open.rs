//! How a store opens: the recovery path of docs/ARCHITECTURE.md, section `f2`, whose numbered
//! steps the comments of [`Inner::open`] follow.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{EngineConfig, Error, Result};
use strata_io::Storage;
use strata_kit::open_state::OpenState;
use strata_kit::replay::ReplayedWal;
use strata_wal::WalOptions;

use super::memory_split::MemorySplit;
use super::{ops, Counters, Inner, WAL_PREFIX};
use crate::checkpoint::{self, Checkpoint};
use crate::hash::key_hash;
use crate::hot_snapshot;
use crate::index::cold::ColdIndex;
use crate::index::hot::HotIndex;
use crate::log::io_cause::IoCause;
use crate::log::{AppendLog, HybridLog, ReadCache, SegmentedFile, FIRST_ADDRESS};
use crate::log::{CHUNK_PREFIX, COLD_PREFIX, HOT_PREFIX};
use crate::options::{F2Options, Resolved};

impl Inner {
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig, options: &F2Options) -> Result<Inner> {
        let _cause = IoCause::Open.enter();
        // 1. The newest checkpoint fixes the layout and each log's live range. The options are
        //    resolved once, from the configuration and that layout, before any file is changed;
        //    then the temporary files of an interrupted checkpoint or snapshot are removed, and a
        //    new store writes its checkpoint first.
        let stored = Checkpoint::load(storage.as_ref())?;
        let opts = options.resolve(config, stored.as_ref().map(Checkpoint::layout).as_ref())?;
        remove_temporary_files(storage.as_ref())?;
        let created_checkpoint = stored.is_none();
        let ck = match stored {
            Some(ck) => ck,
            None => create_checkpoint(storage.as_ref(), &opts)?,
        };
        // 2. (Leftover segment files are removed at step 5, once everything else checked out.)
        // 3. Open the logs (tail pages loaded) and rebuild both indexes from the checkpointed logs.
        let logs = open_logs(&storage, config, &opts, &ck)?;
        let hot_index = rebuild_hot_index(storage.as_ref(), &opts, &ck, &logs.hot)?;
        // 4. Replay the WAL records after the checkpoint into the hot log.
        let wal_options = wal_options(config);
        let replayed = replay_wal(&storage, &wal_options, ck.wal_lsn, &logs.hot, &hot_index.index)?;
        // 5. Remove the segment files outside the live ranges and a snapshot that did not match.
        remove_leftovers(&storage, config, &ck, logs.hot.tail(), hot_index.from_snapshot)?;
        let recovered =
            Recovered { opts, checkpoint: ck, created_checkpoint, logs, hot_index, wal_options, replayed };
        Ok(recovered.into_inner(storage, config.memory_budget_bytes))
    }
}

/// Removes `f2-checkpoint.tmp` and `f2-hot-index.tmp`: an interrupted atomic replacement, whose
/// target file still holds the previous version.
fn remove_temporary_files(storage: &dyn Storage) -> Result<()> {
    for tmp in [checkpoint::tmp_name(), hot_snapshot::tmp_name()] {
        if storage.exists(&tmp)? {
            storage.remove(&tmp)?;
        }
    }
    Ok(())
}

/// The empty checkpoint of a new store, written before any other file (so a store with f2 files
/// and no checkpoint lost it). Without that check a missing checkpoint would make every segment
/// look like a leftover and open would delete the data before the WAL showed anything missing.
fn create_checkpoint(storage: &dyn Storage, opts: &Resolved) -> Result<Checkpoint> {
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

/// The segment files of the log named by `prefix`, in the checkpoint's segment size.
fn log_file(
    storage: &Arc<dyn Storage>,
    config: &EngineConfig,
    ck: &Checkpoint,
    prefix: &'static str,
) -> SegmentedFile {
    SegmentedFile::new(storage.clone(), prefix, ck.segment_bytes).with_direct_reads(config.direct_io)
}

/// The three logs, opened at the checkpoint's ranges.
struct Logs {
    hot: HybridLog,
    cold: AppendLog,
    cold_index: ColdIndex,
}

/// Step 3, the logs: opens each (its tail page loaded and, for the cold log, checked) and
/// rebuilds the cold index's chunk table from the chunk log.
fn open_logs(
    storage: &Arc<dyn Storage>,
    config: &EngineConfig,
    opts: &Resolved,
    ck: &Checkpoint,
) -> Result<Logs> {
    let page = ck.page_size_bytes;
    let file = |prefix| log_file(storage, config, ck, prefix);
    let hot = HybridLog::open(
        file(HOT_PREFIX),
        page,
        opts.hot_log_pages,
        opts.released_padding_regions,
        opts.mutable_fraction,
        ck.hot_begin,
        ck.hot_tail,
    )?;
    let cold = AppendLog::open(file(COLD_PREFIX), page, ck.cold_begin, ck.cold_tail)?;
    verify_tail_page(ck.cold_begin, ck.cold_tail, page, &mut |from, to| {
        cold.scan(from, to, &mut |_, _| Ok(()))
    })?;
    let chunk_log = AppendLog::open(file(CHUNK_PREFIX), page, ck.chunk_begin, ck.chunk_tail)?;
    let cold_index = ColdIndex::new(chunk_log, ck.chunk_count);
    cold_index.rebuild()?;
    Ok(Logs { hot, cold, cold_index })
}

/// The hot index rebuilt at open, and where its entries came from.
struct RebuiltHotIndex {
    index: HotIndex,
    /// Loaded from this checkpoint's snapshot (which is kept: it serves the next open too).
    from_snapshot: bool,
    entries_loaded: u64,
    records_scanned: u64,
}

/// Step 3, the hot index: from the snapshot written after this checkpoint if it is there and
/// intact, else from a scan of the hot log.
fn rebuild_hot_index(
    storage: &dyn Storage,
    opts: &Resolved,
    ck: &Checkpoint,
    hot: &HybridLog,
) -> Result<RebuiltHotIndex> {
    let new_index = || HotIndex::with_budget_bytes(opts.hot_index_buckets, opts.split_bytes[0]);
    let index = new_index();
    let snapshot_key = hot_snapshot::SnapshotKey {
        wal_lsn: ck.wal_lsn,
        hot_begin: ck.hot_begin,
        hot_tail: ck.hot_tail,
        bucket_count: index.bucket_count(),
    };
    let mut loaded = 0;
    let from_snapshot =
        hot_snapshot::load_matching(storage, &snapshot_key, &mut |(bucket, tag, address)| {
            let _ = index.find_or_create(HotIndex::hash_for(bucket, tag)).cas_address(address);
            loaded += 1;
        })?;
    if from_snapshot {
        hot.set_lent_bytes(index.overrun_bytes());
        // In-memory pages are read without checksum checks, so the tail page loaded from disk is
        // checked here (the scan checks it otherwise).
        verify_tail_page(ck.hot_begin, ck.hot_tail, ck.page_size_bytes, &mut |from, to| {
            hot.scan(from, to, &mut |_, _| Ok(()))
        })?;
        return Ok(RebuiltHotIndex { index, from_snapshot, entries_loaded: loaded, records_scanned: 0 });
    }
    // Fed from a snapshot whose body checksum failed at the end: start over, freeing the fed
    // index before the new one is allocated (never two at once).
    let index = if loaded > 0 {
        drop(index);
        new_index()
    } else {
        index
    };
    let records_scanned = hot.scan(ck.hot_begin, ck.hot_tail, &mut |address, view| {
        let _ = index.find_or_create(key_hash(view.key)).cas_address(address);
        hot.set_lent_bytes(index.overrun_bytes());
        Ok(())
    })?;
    Ok(RebuiltHotIndex { index, from_snapshot, entries_loaded: 0, records_scanned })
}

/// The WAL's options: the configuration's segment size and recovery mode, f2's file prefix.
fn wal_options(config: &EngineConfig) -> WalOptions {
    WalOptions {
        segment_bytes: config.effective_wal_segment_bytes(),
        recovery_mode: config.recovery_mode,
        file_prefix: WAL_PREFIX.to_string(),
        ..WalOptions::default()
    }
}

/// Step 4: opens the WAL and applies every batch after `checkpoint_lsn` to the hot log, as a
/// write would (no read cache exists yet).
fn replay_wal(
    storage: &Arc<dyn Storage>,
    wal_options: &WalOptions,
    checkpoint_lsn: u64,
    hot: &HybridLog,
    hot_index: &HotIndex,
) -> Result<ReplayedWal> {
    strata_kit::replay::open_wal(
        storage.clone(),
        wal_options.clone(),
        checkpoint_lsn + 1,
        &mut |_lsn, batch| {
            for op in batch.ops() {
                ops::apply_op(hot, hot_index, None, op.key(), key_hash(op.key()), op.value(), None)?;
            }
            Ok(())
        },
    )
}

/// Step 5. Segment files outside the live ranges are leftovers (of a crash after a checkpoint,
/// or of one before the deletion of truncated segments finished). They are removed last: an open
/// that fails (a damaged checkpoint naming a shorter range, a missing WAL segment) must leave
/// every file for the operator. The hot range ends at `hot_tail`, the tail the replay reached: a
/// leftover it wrote into holds its pages now.
///
/// A hot-index snapshot that did not match belongs to an older checkpoint (the crash came
/// between a checkpoint and its snapshot) or is damaged: it is never used again. A matching one
/// is kept: it serves the next open too, until the next checkpoint replaces it.
fn remove_leftovers(
    storage: &Arc<dyn Storage>,
    config: &EngineConfig,
    ck: &Checkpoint,
    hot_tail: u64,
    snapshot_used: bool,
) -> Result<()> {
    let file = |prefix| log_file(storage, config, ck, prefix);
    for (prefix, begin, tail) in [
        (HOT_PREFIX, ck.hot_begin, hot_tail),
        (COLD_PREFIX, ck.cold_begin, ck.cold_tail),
        (CHUNK_PREFIX, ck.chunk_begin, ck.chunk_tail),
    ] {
        let file = file(prefix);
        file.remove_outside(begin, tail.max(begin + 1))?;
        // A crash may have lost the last checkpoint's punched holes (they are not synced).
        file.release_below(begin)?;
    }
    if !snapshot_used && storage.exists(hot_snapshot::FILE_NAME)? {
        storage.remove(hot_snapshot::FILE_NAME)?;
    }
    storage.sync_dir()
}

/// The most pages the read cache may grow by with what the hot log lends it (16 times the 64
/// pages of its own share).
const MAX_LENT_READ_CACHE_PAGES: u64 = 1024;

/// What recovery rebuilt, before the engine's locks and counters are put around it.
struct Recovered {
    opts: Resolved,
    checkpoint: Checkpoint,
    /// A new store's first checkpoint was written by this open.
    created_checkpoint: bool,
    logs: Logs,
    hot_index: RebuiltHotIndex,
    wal_options: WalOptions,
    replayed: ReplayedWal,
}

impl Recovered {
    fn into_inner(self, storage: Arc<dyn Storage>, memory_budget_bytes: u64) -> Inner {
        let Recovered { opts, checkpoint, created_checkpoint, logs, hot_index, wal_options, replayed } = self;
        let split = MemorySplit::default();
        let hot_log_bytes = opts.hot_log_pages as u64 * opts.page_size_bytes;
        let read_cache = (opts.read_cache_pages >= 2).then(|| {
            // The cache's ring has a frame for every page it may ever hold: bounded, so a tiny
            // cache beside a large hot log does not get a frame per 4 KiB of the hot log.
            let lendable_pages = if opts.memory_split {
                let pages = (hot_log_bytes / opts.read_cache_page_bytes).min(MAX_LENT_READ_CACHE_PAGES);
                split.enable(hot_log_bytes, opts.page_size_bytes, pages * opts.read_cache_page_bytes);
                pages as usize
            } else {
                0
            };
            let pages = opts.read_cache_pages;
            ReadCache::new(opts.read_cache_page_bytes, pages, pages + lendable_pages)
        });
        let inner = Inner {
            storage,
            opts,
            memory_budget_bytes,
            wal_options,
            wal: replayed.wal,
            key_locks: (0..ops::KEY_LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            write_lock: RwLock::new(()),
            batch_gate: RwLock::new(()),
            maintenance: Mutex::new(()),
            hot: logs.hot,
            hot_index: hot_index.index,
            cold: logs.cold,
            cold_index: logs.cold_index,
            cold_live_estimate_bytes: AtomicU64::new(checkpoint.cold_live_estimate_bytes),
            read_cache,
            split,
            last_checkpoint_begins_sum: AtomicU64::new(checkpoint.begins_sum()),
            last_checkpoint: Mutex::new(checkpoint),
            wal_bytes_since_checkpoint: AtomicU64::new(replayed.payload_bytes),
            state: OpenState::labelled(""),
            counters: Counters::default(),
            worker: Arc::default(),
        };
        let counters = &inner.counters;
        counters.records_replayed.store(replayed.report.records_replayed, Relaxed);
        counters.hot_records_scanned_at_open.store(hot_index.records_scanned, Relaxed);
        counters.hot_index_entries_loaded.store(hot_index.entries_loaded, Relaxed);
        if created_checkpoint {
            counters.checkpoint_file_bytes_written.store(checkpoint::CHECKPOINT_BYTES as u64, Relaxed);
        }
        inner
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
