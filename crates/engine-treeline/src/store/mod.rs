//! The engine's state and its recovery path (docs/ARCHITECTURE.md, "Engine treeline").
//!
//! Locks, always taken in this order (never the reverse): `maint` (one write-back,
//! reorganization or checkpoint at a time; it owns the free list, the double-write area and the
//! forecaster, and only its holder changes the index or any page) → `index` → a segment latch →
//! a cache shard (innermost, never held across I/O; the batch gate, when taken, just before
//! the shards: `sharded_cache.rs`). Readers hold `index` shared across their page
//! reads, so a reorganization's index swap waits for them and no reader reaches a page after its
//! segment left the index; segment latches keep a reader from seeing a page while it is
//! overwritten in place.

mod blobs;
mod bulk_load;
mod checkpoint;
mod counters;
mod eviction;
mod forecast_room;
mod page_size_choice;
mod reads;
mod reorg;
mod scan;
mod scan_chunk;
mod verify;
mod write_back;
mod writes;

pub(crate) use self::bulk_load::BulkLoad;
pub(crate) use self::checkpoint::Sweep;
pub(crate) use self::eviction::spawn as spawn_write_back_worker;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use strata_core::{EngineConfig, Error, Key, Result};
use strata_io::Storage;
use strata_kit::logged_writes::LoggedWrites;
use strata_kit::worker::WorkerSignals;
use strata_wal::WalOptions;

pub use self::counters::Counters;
pub use self::scan::RangeIter;
use self::writes::AppliedWrites;
use crate::blob::{BlobRef, BlobTable};
use crate::checkpoint_file::{self, Checkpoint};
use crate::data_file::{self, DataFile};
use crate::double_write::DoubleWrite;
use crate::forecast::{ForecastConfig, ForecastState, Forecaster};
use crate::free_space::{FreeSpace, PageId, SegmentSlot, RESERVED_PAGES};
use crate::index::Index;
use crate::key_projection::KeyMap;
use crate::options::{buffer_reserve_bytes, TreelineOptions};
use crate::page::PageSize;
use crate::sharded_cache::{self, ShardedCache};

/// WAL segment files are `treeline-wal-<id>.log`.
pub const WAL_FILE_PREFIX: &str = "treeline-wal-";
/// Segment latches (striped by the segment's first page id).
const LATCH_STRIPES: usize = 64;

/// State only the holder of `Store::maint` touches.
pub(crate) struct MaintState {
    pub free: FreeSpace,
    /// Slots that left the index since the last checkpoint. The checkpoint's index may still
    /// reference them, so they are reused only after the next checkpoint is durable.
    pub freed_since_checkpoint: Vec<SegmentSlot>,
    /// Live blob runs (the next checkpoint's blob table; `blobs.rs`).
    pub blobs: BlobTable,
    /// Blob runs written for a dirty record (by key, with the record's lsn) that no page has
    /// taken yet; settled at the end of every write-back (`blobs.rs`).
    pub unplaced_blobs: HashMap<Key, (strata_wal::Lsn, BlobRef)>,
    /// Runs (first page, pages) whose last reference left the pages since the last
    /// checkpoint: reused only after the next one, like `freed_since_checkpoint`.
    pub blob_runs_freed_since_checkpoint: Vec<(PageId, u64)>,
    pub next_blob_id: u64,
    pub double_write: DoubleWrite,
    /// Pages with an image in the double-write area's current generation. Later in-place writes
    /// of such a page until the next checkpoint or rewind need no image: recovery restores that image and
    /// replays the WAL from the checkpoint's replay lsn, which holds every record written to
    /// the page since (each was dirty after the checkpoint, so its last write is at or above
    /// the replay lsn). Empty after open, after each checkpoint and after each rewind of the
    /// area (the data file synced first: those pages' writes are intact on disk).
    pub imaged_since_checkpoint: HashSet<PageId>,
    pub forecaster: Option<Forecaster>,
    /// The forecaster's `progress` when `treeline-forecast` was last stored (or loaded).
    pub forecast_stored: Option<(u64, u64)>,
    pub generation: u64,
    pub next_production_id: u64,
    /// `next_production_id` at the last checkpoint: segments produced since are not in the
    /// checkpoint's index, so recovery never repairs their pages and in-place writes to them
    /// need no double-write images.
    pub checkpoint_production_id: u64,
    /// The cut lsn (the last applied one) of the last checkpoint (0: none since open).
    pub last_cut_lsn: u64,
    /// The cut lsn of the checkpoint before the last (0: none since open): an automatic
    /// checkpoint writes back the records dirty since before it.
    pub cut_before_last_lsn: u64,
    /// The runs the last checkpoint released to the free pages: the next one gives back to the
    /// file system those still free then (`give_back_free_runs`). Runs reused within one
    /// checkpoint distance are not punched: a write into a hole allocates again, which cost a
    /// put load 7% when every released run was punched.
    pub released_at_last_checkpoint: Vec<(PageId, u64)>,
}

impl MaintState {
    pub fn take_production_id(&mut self) -> u64 {
        let id = self.next_production_id;
        self.next_production_id += 1;
        id
    }
}

/// The engine. See the module documentation for its locks.
pub(crate) struct Store {
    pub storage: Arc<dyn Storage>,
    pub config: EngineConfig,
    pub options: TreelineOptions,
    /// The data file, which carries the store's page size (`Store::page_size`).
    pub data: DataFile,
    pub wal_options: WalOptions,
    /// The WAL, the closed flag and the poison; writes reach `cache` through it, in log order
    /// after their commit (writes.rs).
    pub writes: LoggedWrites,
    /// How far writes reached the cache, and its pressure after the last run (writes.rs).
    pub(crate) applied: AppliedWrites,
    pub maint: Mutex<MaintState>,
    pub index: RwLock<Index>,
    latches: [RwLock<()>; LATCH_STRIPES],
    /// The record cache, in shards by key (`sharded_cache.rs`).
    pub cache: ShardedCache,
    /// Bumped after every page write and before any of its records is marked clean: a reader
    /// that saw it unchanged across its page read (loading it again under the key's shard lock)
    /// may cache what it read.
    pub page_write_epoch: AtomicU64,
    pub wal_bytes_since_checkpoint: AtomicU64,
    /// The checkpoint distance, re-derived from the data file's size at open and at every
    /// checkpoint (`follow_data_size`).
    pub checkpoint_wal_bytes: AtomicU64,
    /// The record cache capacity asked for (the budget may leave less; `effective_cache_bytes`).
    pub record_cache_bytes: AtomicU64,
    pub index_memory_bytes: AtomicU64,
    /// What the forecaster holds at most (`options.forecaster_memory_bytes`, fixed at open).
    pub forecaster_memory_bytes: u64,
    pub double_write_bytes: AtomicU64,
    /// The write-back worker's signals (eviction.rs).
    pub signals: Arc<WorkerSignals>,
    pub counters: Counters,
}

impl Store {
    /// Opens (creating if empty) the store: checkpoint, double-write repair, free list, WAL replay.
    pub fn open(storage: Arc<dyn Storage>, config: &EngineConfig) -> Result<Arc<Store>> {
        let options = TreelineOptions::from_config(config)?;
        let wal_options = WalOptions {
            segment_bytes: config.effective_wal_segment_bytes(),
            recovery_mode: config.recovery_mode,
            buffer_bytes: (config.memory_budget_bytes / 16).clamp(4 << 10, 1 << 20) as usize,
            file_prefix: WAL_FILE_PREFIX.to_string(),
            ..WalOptions::default()
        };
        // 1. The last checkpoint (or a new store), and the data file it describes.
        let (checkpoint, data) = open_or_create(storage.as_ref(), config, &options, &wal_options)?;
        // 2. Repair pages torn since the checkpoint from their double-write images.
        let restored = restore_double_written_pages(storage.as_ref(), &data, &checkpoint)?;
        // 3. The free list: every page the checkpoint's index does not reference.
        check_data_end(&checkpoint, &data)?;
        let free = derive_free_space(&checkpoint)?;
        let double_write = DoubleWrite::open(storage.as_ref(), checkpoint.page_size, checkpoint.generation)?;
        let forecaster = match options.forecasting {
            true => Some(restored_forecaster(storage.as_ref(), config, &options, &checkpoint)?),
            false => None,
        };
        let forecast_stored = forecaster.as_ref().map(Forecaster::progress);
        let cache_bytes = options.record_cache_bytes(config);
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let shards =
            options.record_cache_shards.unwrap_or_else(|| sharded_cache::default_shards(cache_bytes, cores));
        let cache = ShardedCache::new(cache_bytes, shards);
        // 4. Replay the WAL after the checkpoint into the cache, as dirty records.
        let replayed = replay_into_cache(&storage, &wal_options, checkpoint.wal_replay_from_lsn, &cache)?;
        let index_memory_bytes = checkpoint.index.memory_bytes();
        let data_pages = free.end();
        let store = Store {
            data,
            applied: AppliedWrites::after_replay(replayed.wal.last_lsn()),
            writes: LoggedWrites::new(replayed.wal, "treeline"),
            wal_options,
            maint: Mutex::new(MaintState {
                free,
                freed_since_checkpoint: Vec::new(),
                blobs: checkpoint.blobs.into_owned(),
                unplaced_blobs: HashMap::new(),
                blob_runs_freed_since_checkpoint: Vec::new(),
                next_blob_id: blobs::first_blob_id_of_this_open(),
                double_write,
                imaged_since_checkpoint: HashSet::new(),
                forecaster,
                forecast_stored,
                generation: checkpoint.generation,
                next_production_id: checkpoint.next_production_id,
                checkpoint_production_id: checkpoint.next_production_id,
                last_cut_lsn: 0,
                cut_before_last_lsn: 0,
                released_at_last_checkpoint: Vec::new(),
            }),
            index: RwLock::new(checkpoint.index.into_owned()),
            latches: std::array::from_fn(|_| RwLock::new(())),
            cache,
            page_write_epoch: AtomicU64::new(0),
            wal_bytes_since_checkpoint: AtomicU64::new(replayed.payload_bytes),
            checkpoint_wal_bytes: AtomicU64::new(0),
            record_cache_bytes: AtomicU64::new(cache_bytes),
            index_memory_bytes: AtomicU64::new(index_memory_bytes),
            forecaster_memory_bytes: options.forecaster_memory_bytes(config),
            double_write_bytes: AtomicU64::new(0),
            signals: Arc::default(),
            counters: Counters::default(),
            storage,
            config: config.clone(),
            options,
        };
        store.counters.records_replayed_at_open.store(replayed.report.records_replayed, Relaxed);
        store.counters.pages_restored_at_open.store(restored, Relaxed);
        store.follow_data_size(data_pages)?;
        // 5. After an unclean shutdown, free the blob runs no page references any more.
        if replayed.report.records_replayed > 0 && !store.maint.lock().blobs.is_empty() {
            let mut maint = store.maint.lock();
            let freed = store.sweep_unreferenced(&mut maint)?;
            store.counters.blob_runs_unreferenced_at_open.store(freed, Relaxed);
        }
        let store = Arc::new(store);
        // 6. Bring the cache back under its capacity (write-backs need the open WAL).
        store.evict_while_over_capacity()?;
        Ok(store)
    }

    /// The store's page size: fixed once a checkpoint references a page (`settle_page_size`).
    pub fn page_size(&self) -> PageSize {
        self.data.page_size()
    }

    /// `Err` once closed or poisoned.
    pub fn check_usable(&self) -> Result<()> {
        self.writes.check_usable()
    }

    /// The latch of the segment whose first page is `first_page`.
    pub fn latch_read(&self, first_page: PageId) -> RwLockReadGuard<'_, ()> {
        self.latch(first_page).read()
    }

    /// The read latches of several segments, each stripe once, taken in stripe order: a global
    /// order, so two readers holding several never wait on each other through writers (who
    /// hold one latch at a time).
    pub fn latches_read(&self, first_pages: impl Iterator<Item = PageId>) -> Vec<RwLockReadGuard<'_, ()>> {
        let mut stripes: Vec<usize> = first_pages.map(|p| (p % LATCH_STRIPES as u64) as usize).collect();
        stripes.sort_unstable();
        stripes.dedup();
        stripes.into_iter().filter_map(|s| self.latches.get(s)).map(RwLock::read).collect()
    }

    pub fn latch_write(&self, first_page: PageId) -> RwLockWriteGuard<'_, ()> {
        self.latch(first_page).write()
    }

    #[allow(clippy::indexing_slicing, reason = "the stripe is reduced modulo the array's length")]
    fn latch(&self, first_page: PageId) -> &RwLock<()> {
        &self.latches[(first_page % LATCH_STRIPES as u64) as usize]
    }

    /// The record cache capacity: the asked-for size, less whatever the index and the buffer
    /// reserve leave of the memory budget (never below the minimum).
    pub fn effective_cache_bytes(&self) -> u64 {
        let requested = self.record_cache_bytes.load(Relaxed);
        crate::options::cache_bytes_within_budget(&self.config, requested, self.held_memory_bytes())
    }

    /// What the index and the forecaster hold (counted in the budget before the record cache).
    pub fn held_memory_bytes(&self) -> u64 {
        self.index_memory_bytes.load(Relaxed) + self.forecaster_memory_bytes
    }

    /// What the index, the forecaster, the buffer reserve and the record cache's capacity hold beyond the budget
    /// (the cache's floor: `options::CACHE_FLOOR_BUDGET_DIVISOR`); 0 within it.
    pub fn over_budget_bytes(&self) -> u64 {
        let held =
            self.held_memory_bytes() + buffer_reserve_bytes(&self.config) + self.effective_cache_bytes();
        held.saturating_sub(self.config.memory_budget_bytes)
    }

    /// Runs a maintenance step; any failure poisons the engine (pages, index and cache may
    /// disagree with the disk until a reopen recovers from the checkpoint and the WAL).
    pub fn maintain<T>(&self, step: impl FnOnce() -> Result<T>) -> Result<T> {
        self.writes.state().check_not_poisoned()?;
        step().map_err(|e| self.writes.poison(e))
    }
}

/// Opens the WAL, applying every batch from `from_lsn` on to `cache` as dirty records.
fn replay_into_cache(
    storage: &Arc<dyn Storage>,
    wal_options: &WalOptions,
    from_lsn: u64,
    cache: &ShardedCache,
) -> Result<strata_kit::replay::ReplayedWal> {
    strata_kit::replay::open_wal(storage.clone(), wal_options.clone(), from_lsn, &mut |lsn, batch| {
        for op in batch.into_ops() {
            let value = op.value().map(<[u8]>::to_vec);
            let key = match op {
                strata_core::BatchOp::Put { key, .. } | strata_core::BatchOp::Delete { key } => key,
            };
            cache.put_dirty(key, value, lsn);
        }
        Ok(())
    })
}

/// The forecaster, continuing from `treeline-forecast` when the last checkpoint stored one, its
/// key map the index's key prefix (a different prefix restarts its histograms).
fn restored_forecaster(
    storage: &dyn Storage,
    config: &EngineConfig,
    options: &TreelineOptions,
    checkpoint: &Checkpoint,
) -> Result<Forecaster> {
    let mut forecaster = Forecaster::new(ForecastConfig {
        epoch_inserts: options.forecast_epoch_inserts,
        partitions: options.forecast_partitions(config),
        overestimation: 1.0,
        seed: 0x7472_6565_6c69_6e65,
    })?;
    if let Some(state) = ForecastState::load(storage)? {
        forecaster.restore(state);
    }
    forecaster.set_key_map(KeyMap::new(checkpoint.index.data_prefix()));
    Ok(forecaster)
}

/// The last checkpoint and the data file, or a new store's (data file with its header, synced,
/// then the first checkpoint: a crash between the two leaves no checkpoint and no WAL, which is
/// a new store again).
fn open_or_create(
    storage: &dyn Storage,
    config: &EngineConfig,
    options: &TreelineOptions,
    wal_options: &WalOptions,
) -> Result<(Checkpoint<'static>, DataFile)> {
    if let Some(mut checkpoint) = Checkpoint::load(storage)? {
        if checkpoint.index.is_empty() && checkpoint.blobs.is_empty() {
            let data = data_file_of_an_empty_store(storage, &mut checkpoint, config.direct_io)?;
            return Ok((checkpoint, data));
        }
        let data = DataFile::open(storage, config.direct_io)?;
        if data.page_size() != checkpoint.page_size {
            return Err(Error::corruption(
                checkpoint_file::FILE_NAME,
                (strata_kit::small_file::OVERHEAD_BYTES - 4 + checkpoint_file::PAGE_SIZE_LOG2) as u64,
                format!(
                    "page size {} differs from the data file's {}",
                    checkpoint.page_size.bytes(),
                    data.page_size().bytes()
                ),
            ));
        }
        return Ok((checkpoint, data));
    }
    refuse_files_without_a_checkpoint(storage, wal_options)?;
    let page_size = options.page_size.unwrap_or(PageSize::DEFAULT);
    let data = DataFile::create(storage, page_size, config.direct_io)?;
    let checkpoint = Checkpoint::of_empty_store(1, 1, 1, page_size);
    checkpoint.store(storage)?;
    Ok((checkpoint, data))
}

/// The data file of a store whose checkpoint references no page (a new one's): its pages hold
/// nothing recovery needs, so a header that is missing, damaged or of another page size (a
/// crash while a new store chose its page size: the checkpoint naming the size is stored
/// first, `Store::settle_page_size`) is written again for the checkpoint's size, and the
/// checkpoint's data end is then the header's.
fn data_file_of_an_empty_store(
    storage: &dyn Storage,
    checkpoint: &mut Checkpoint,
    direct: bool,
) -> Result<DataFile> {
    match DataFile::open(storage, direct) {
        Ok(data) if data.page_size() == checkpoint.page_size => return Ok(data),
        Ok(_) => {}
        Err(e) if e.is_corruption() => {}
        Err(e) => return Err(e),
    }
    checkpoint.data_end_page = RESERVED_PAGES;
    DataFile::create(storage, checkpoint.page_size, direct)
}

/// No checkpoint: a new store, or one whose creation crashed after the data file's header and
/// before the first checkpoint (the data file holds only its header). Anything more — WAL
/// segments, the WAL's state file, pages in the data file — means the checkpoint was lost.
fn refuse_files_without_a_checkpoint(storage: &dyn Storage, wal_options: &WalOptions) -> Result<()> {
    let missing =
        |what: String| Error::corruption(checkpoint_file::FILE_NAME, 0, format!("missing, but {what}"));
    let state_file = wal_options.state_file_name();
    for name in storage.list()? {
        if wal_options.parse_segment_name(&name).is_some() || name == state_file {
            return Err(missing(format!("WAL file {name} exists")));
        }
    }
    // A header that does not decode is an interrupted creation (written, not yet synced).
    if let Ok(data) = DataFile::open(storage, false) {
        let header_bytes = RESERVED_PAGES * data.page_size().bytes() as u64;
        if data.len_bytes()? > header_bytes {
            return Err(missing(format!("{} holds pages past its header", data_file::FILE_NAME)));
        }
    }
    Ok(())
}

/// Writes the latest double-write image of every page the checkpoint's index references back in
/// place (a torn in-place write is thereby repaired; an intact one is rewritten with the same
/// bytes or newer ones whose records the WAL also holds), then syncs. Returns pages rewritten.
/// Images of pages the checkpoint does not reference are of segments written since, which
/// recovery does not use.
fn restore_double_written_pages(
    storage: &dyn Storage,
    data: &DataFile,
    checkpoint: &Checkpoint,
) -> Result<u64> {
    let images = DoubleWrite::recover(storage, checkpoint.page_size, checkpoint.generation)?;
    let referenced: BTreeSet<PageId> = checkpoint.index.used_pages().collect();
    let any_images = !images.is_empty();
    let mut restored = 0;
    for (id, image) in images.into_iter().filter(|(id, _)| referenced.contains(id)) {
        if data.read_raw(id).ok().as_ref() == Some(&image) {
            continue;
        }
        // The image passed its entry checksum; it must also be a valid page.
        crate::page::Page::open(image.clone(), crate::double_write::FILE_NAME, 0)?;
        data.write_page(id, &image)?;
        restored += 1;
    }
    // Synced even when nothing was rewritten: pages that read back intact may sit only in the
    // OS cache (a killed process), and the double-write area is truncated next.
    if any_images {
        data.sync()?;
    }
    Ok(restored)
}

/// The data file holds every page below the checkpoint's end: the pages were synced before the
/// checkpoint was written, and the file is cut only at the end of a checkpoint already stored. A larger end is a damaged checkpoint (and
/// would make the free list of billions of pages that are not there: the `treeline_checkpoint`
/// fuzz target ran out of memory on one).
fn check_data_end(checkpoint: &Checkpoint, data: &DataFile) -> Result<()> {
    let file_pages = data.len_bytes()? / checkpoint.page_size.bytes() as u64;
    if checkpoint.data_end_page > file_pages {
        return Err(Error::corruption(
            checkpoint_file::FILE_NAME,
            (checkpoint_file::FORMAT.payload_offset() + checkpoint_file::DATA_END_PAGE) as u64,
            format!(
                "data end page {} is past the {file_pages} pages of {}",
                checkpoint.data_end_page,
                crate::data_file::FILE_NAME
            ),
        ));
    }
    Ok(())
}

/// Free pages: the runs below the checkpoint's end that neither its index nor its blob table
/// references. Two of them sharing a page is corruption of the checkpoint.
fn derive_free_space(checkpoint: &Checkpoint) -> Result<FreeSpace> {
    let index = &checkpoint.index;
    let mut used: Vec<(PageId, u64)> =
        index.iter().map(|(_, e)| (e.first_page, u64::from(e.pages))).collect();
    used.extend(index.iter().flat_map(|(_, e)| e.overflow.iter().filter(|&&o| o != 0).map(|&o| (o, 1))));
    used.extend(checkpoint.blobs.iter().map(|(&first, slot)| (first, slot.pages)));
    used.sort_unstable();
    let mut free = FreeSpace::with_end(checkpoint.data_end_page);
    let mut page = RESERVED_PAGES;
    for (first, pages) in used {
        if first < page {
            return Err(Error::corruption(
                checkpoint_file::FILE_NAME,
                0,
                format!("page {first} is referenced twice (by the index or the blob table)"),
            ));
        }
        if first > page {
            free.release_run(page, first - page)?;
        }
        page = first + pages;
    }
    if page < checkpoint.data_end_page {
        free.release_run(page, checkpoint.data_end_page - page)?;
    }
    Ok(free)
}
