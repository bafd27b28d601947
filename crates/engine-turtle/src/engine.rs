//! The engine: the kit's write path into one active MemTable (the Big MemTable, limit χ), at
//! most two finalized tables on their way into the tree, and the tree behind them
//! (docs/ARCHITECTURE.md, "turtle").

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use strata_core::{AutoOr, EngineConfig, Result, Value};
use strata_io::{OpenOptions, Storage};
use strata_kit::logged_writes::{ApplyLogged, Current, Logged, LoggedWrites, ReadCurrent, WriteSizes};
use strata_kit::sorted_run::BlockCache;
use strata_kit::versioned_memtable::VersionedMemTable;
use strata_kit::worker::{Worker, WorkerSignals};
use strata_wal::WalOptions;

use crate::checkpoint::Checkpoint;
use crate::distance::{distance_for, worth_changing, DistanceTuner};
use crate::options::{Settle, TurtleOptions};
use crate::pages::{Pages, PAGES_FILE};
use crate::tree::{Tree, TreeConfig};
use strata_kit::tables::{new_active, wait_for_room, Snapshots, Tables};

/// WAL segment files are named `turtle-wal-{id}.log`.
pub const WAL_FILE_PREFIX: &str = "turtle-wal-";

/// Finalized tables waiting for the tree before writers wait (the paper's two).
const MAX_FINALIZED: usize = 2;

#[derive(Default)]
pub(crate) struct Counters {
    pub user_bytes_read: AtomicU64,
    pub batches_applied: AtomicU64,
    pub checkpoints: AtomicU64,
    pub spills: AtomicU64,
    pub bytes_freed: AtomicU64,
    pub tables_finalized: AtomicU64,
    pub records_replayed: AtomicU64,
    pub writer_waits: AtomicU64,
    pub settle_steps: AtomicU64,
}

pub(crate) struct Inner {
    pub storage: Arc<dyn Storage>,
    pub wal_options: WalOptions,
    /// The WAL, the closed flag and the poison; batches reach `tables.active` through it.
    pub writes: LoggedWrites,
    pub tables: RwLock<Tables>,
    /// Live snapshots (scans): the active table keeps the versions they read.
    pub snapshots: Arc<Snapshots>,
    pub tree: RwLock<Tree>,
    pub tree_config: TreeConfig,
    pub pages: Arc<Pages>,
    /// One apply-and-checkpoint at a time (worker, requested checkpoints).
    pub apply_lock: Mutex<()>,
    /// Bumped when a finalized table leaves the list (its writes are in the tree): an rmw that
    /// read the tree before it must read again.
    pub tree_version: AtomicU64,
    /// The WAL lsn the last checkpoint holds everything up to.
    pub checkpoint_lsn: AtomicU64,
    /// χ, in bytes of the active table's memory.
    pub checkpoint_distance_bytes: AtomicU64,
    /// χ when the active table began: while `MAX_FINALIZED` tables wait for the tree, the
    /// active table is finalized only at the larger of this and χ (`finalize_limit_bytes`).
    pub active_began_under_bytes: AtomicU64,
    /// Moves χ while `checkpoint_distance` is `auto`.
    pub tuner: DistanceTuner,
    pub signals: Arc<WorkerSignals>,
    pub counters: Counters,
    /// The budget runtime memory knobs stay within.
    pub memory_budget_bytes: u64,
    /// `block_cache_bytes` was set: the cache keeps that size.
    pub block_cache_pinned: AtomicBool,
}

/// What open found and built.
pub(crate) struct Opened {
    pub inner: Arc<Inner>,
    pub worker: Worker,
}

/// Opens (creating if empty) the store: checkpoint record, tree, free map, WAL replay.
pub(crate) fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<Opened> {
    let options = TurtleOptions::from_config(config)?;
    let wal_options = WalOptions {
        segment_bytes: config.effective_wal_segment_bytes(),
        recovery_mode: config.recovery_mode,
        file_prefix: WAL_FILE_PREFIX.to_string(),
        ..WalOptions::default()
    };
    // 1. The last checkpoint, if any: it fixes the tree's shape.
    let checkpoint = Checkpoint::load(storage.as_ref())?;
    let tree_config = checkpoint.map_or(options.tree, |c| c.tree);
    // 2. The tree from its root; everything else in the pages file is free.
    let file = storage.open(PAGES_FILE, OpenOptions::create().with_direct(config.direct_io))?;
    let cache = BlockCache::new(options.block_cache_bytes.unwrap_or(0));
    let pages = Arc::new(Pages::new(file.clone(), file.len()?).with_block_cache(cache));
    let (tree, used) = match checkpoint {
        Some(c) => Tree::open(&pages, c.root, tree_config)?,
        None => (Tree::new(tree_config)?, Vec::new()),
    };
    pages.rebuild_free(used);
    // 3. The WAL after the checkpoint, into the active table.
    let mut active = VersionedMemTable::default();
    let mut last_lsn = checkpoint.map_or(0, |c| c.wal_lsn);
    let replayed = strata_kit::replay::open_wal(
        storage.clone(),
        wal_options.clone(),
        last_lsn + 1,
        &mut |lsn, batch| {
            for op in batch.into_ops() {
                active.apply(op, lsn, None);
            }
            last_lsn = lsn;
            Ok(())
        },
    )?;
    // Only now, with the WAL found whole, is anything changed: the pages file's unused tail
    // (from an interrupted checkpoint) goes back, and the free holes below it.
    pages.trim_file()?;
    pages.punch_free()?;
    let signals = Arc::new(WorkerSignals::default());
    let initial_distance_bytes = options.initial_distance_bytes(config.memory_budget_bytes);
    let inner = Arc::new(Inner {
        storage,
        wal_options,
        writes: LoggedWrites::new(replayed.wal, "turtle engine"),
        tables: RwLock::new(Tables::new(new_active(active, last_lsn))),
        snapshots: Arc::default(),
        tree: RwLock::new(tree),
        tree_config,
        pages,
        apply_lock: Mutex::new(()),
        tree_version: AtomicU64::new(0),
        checkpoint_lsn: AtomicU64::new(checkpoint.map_or(0, |c| c.wal_lsn)),
        checkpoint_distance_bytes: AtomicU64::new(initial_distance_bytes),
        active_began_under_bytes: AtomicU64::new(initial_distance_bytes),
        tuner: DistanceTuner::new(options.checkpoint_distance == AutoOr::Auto, options.settle),
        signals: signals.clone(),
        counters: Counters::default(),
        memory_budget_bytes: config.memory_budget_bytes,
        block_cache_pinned: AtomicBool::new(options.block_cache_bytes.is_some()),
    });
    inner.resize_block_cache();
    inner.counters.records_replayed.store(replayed.report.records_replayed, Relaxed);
    let worker = spawn_worker(&inner, signals)?;
    inner.finalize_if_full();
    Ok(Opened { inner, worker })
}

fn spawn_worker(inner: &Arc<Inner>, signals: Arc<WorkerSignals>) -> Result<Worker> {
    Worker::spawn_for("turtle-apply", signals, inner, Inner::apply_finalized, |inner, e| {
        inner.writes.poison(e)
    })
}

impl Inner {
    /// Unless pinned, the block cache gets what the budget leaves after the MemTables, room
    /// for the active one to reach its `finalize_limit_bytes`, and the tree's memory (at least
    /// an eighth of the budget).
    /// Called when those change by a table's worth: at open, when a table is finalized or
    /// leaves, and when χ changes.
    pub(crate) fn resize_block_cache(&self) {
        if self.block_cache_pinned.load(Relaxed) {
            return;
        }
        let (tables, growth) = {
            let tables = self.tables.read();
            (tables.memory_bytes(), self.finalize_limit_bytes(&tables))
        };
        let tree = self.tree.read().memory().total_bytes;
        let reserved = tables + growth + tree;
        let budget = self.memory_budget_bytes;
        self.pages.block_cache().set_capacity(budget.saturating_sub(reserved).max(budget / 8));
    }

    /// Counts served operations for `auto` χ and settling; the one that completes a window
    /// retunes.
    pub(crate) fn note_ops(&self, reads: u64, scans: u64, writes: u64) {
        if !self.tuner.note(reads, scans, writes) {
            return;
        }
        let _choosing = self.tuner.choosing.lock();
        let shares = self.tuner.end_window();
        if self.tuner.settle() == Settle::Auto && crate::distance::settle_fraction(shares).is_some() {
            self.signals.request(); // the worker settles the tree (`settle_while_due`)
        }
        let target = distance_for(shares.write, self.memory_budget_bytes);
        if self.tuner.is_auto() && worth_changing(self.checkpoint_distance_bytes.load(Relaxed), target) {
            self.tuner.changes.fetch_add(1, Relaxed);
            self.set_checkpoint_distance(target);
        }
    }

    /// χ from the next write on (an active table already above it is finalized then); the
    /// block cache is resized at once.
    pub(crate) fn set_checkpoint_distance(&self, bytes: u64) {
        self.checkpoint_distance_bytes.store(bytes, Relaxed);
        self.resize_block_cache();
    }

    /// Finalizes the active table once it holds `finalize_limit_bytes`, and wakes the worker.
    fn finalize_if_full(&self) {
        let mut tables = self.tables.write();
        let full = tables.active.read().entries.memory_bytes() >= self.finalize_limit_bytes(&tables);
        if full && self.finalize_active(&mut tables) {
            self.counters.tables_finalized.fetch_add(1, Relaxed);
            drop(tables);
            self.signals.request();
            self.resize_block_cache();
        }
    }

    /// The active table's memory at which it is finalized: χ, unless `MAX_FINALIZED` tables
    /// already wait for the tree — then the χ it began under if that is larger. A χ that falls
    /// (`auto` at the end of a load) so never finalizes a table early into a full list, which
    /// would stop every writer until the worker applied a whole table of the old χ; the tables
    /// never hold more than the χ they began under allowed.
    pub(crate) fn finalize_limit_bytes(&self, tables: &Tables) -> u64 {
        let distance = self.checkpoint_distance_bytes.load(Relaxed);
        if tables.finalized.len() < MAX_FINALIZED {
            return distance;
        }
        distance.max(self.active_began_under_bytes.load(Relaxed))
    }

    /// Moves the active table to the finalized list (when it holds anything); the new active
    /// table begins under the current χ.
    pub(crate) fn finalize_active(&self, tables: &mut Tables) -> bool {
        let finalized = tables.finalize_active();
        if finalized {
            self.active_began_under_bytes.store(self.checkpoint_distance_bytes.load(Relaxed), Relaxed);
        }
        finalized
    }

    /// Writers wait while more than `MAX_FINALIZED` tables wait for the tree (kit
    /// `wait_for_room`).
    fn wait_for_room(&self) -> Result<()> {
        let full = || self.tables.read().finalized.len() > MAX_FINALIZED;
        let counted = || {
            self.counters.writer_waits.fetch_add(1, Relaxed);
        };
        wait_for_room(full, &self.writes, &self.signals, counted)
    }

    /// The newest value of `key`: the active table, the finalized ones newest first, the tree.
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        if let Some(found) = self.tables.read().get(key) {
            return Ok(found);
        }
        self.read_tree()?.get(key)
    }

    /// The tree as it is now, to read with no lock held (a copy shares every node and run:
    /// the worker swaps in new trees, never changes a shared node; the runs it holds stay
    /// readable, their extents unfreed, until it is dropped), once the engine is known not to
    /// be poisoned: a poisoned engine serves no reads (a failed apply or checkpoint poisons it).
    /// A read that held the tree's lock across its device reads made the worker's swap wait,
    /// and every read behind the swap with it.
    pub(crate) fn read_tree(&self) -> Result<Tree> {
        let tree = self.tree.read().clone();
        self.writes.state().check_not_poisoned()?;
        Ok(tree)
    }
}

/// Write path step 4 (strata_kit::logged_writes): committed batches into the active table; a
/// full table is finalized after the run.
impl ApplyLogged for Inner {
    fn apply_run(&self, run: &mut Vec<Logged>) -> Result<()> {
        self.tables.read().apply_logged(run, &self.snapshots, |entries, op, lsn, snapshot| {
            entries.apply(op, lsn, snapshot);
            Ok(())
        })?;
        self.finalize_if_full();
        Ok(())
    }

    fn after_apply(&self, _sizes: WriteSizes) -> Result<()> {
        self.wait_for_room()
    }
}

/// An rmw's read: the tree read ahead with no lock held (`prepare`), the tables at `current`;
/// a finalized table that reached the tree in between makes the tree read stale.
pub(crate) struct TurtleRead<'a> {
    pub inner: &'a Inner,
    pub key: &'a [u8],
    pub tree_value: Option<(u64, Option<Value>)>,
}

impl ReadCurrent for TurtleRead<'_> {
    fn prepare(&mut self) -> Result<()> {
        let version = self.inner.tree_version.load(Relaxed);
        let value = self.inner.read_tree()?.get(self.key)?;
        self.tree_value = Some((version, value));
        Ok(())
    }

    fn current(&mut self) -> Current {
        let tables = self.inner.tables.read();
        if let Some(found) = tables.get(self.key) {
            return Current::Value(found);
        }
        match &self.tree_value {
            Some((version, value)) if *version == self.inner.tree_version.load(Relaxed) => {
                Current::Value(value.clone())
            }
            _ => Current::Stale,
        }
    }
}
