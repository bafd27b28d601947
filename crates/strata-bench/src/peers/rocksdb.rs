//! RocksDB (the `rocksdb` crate =0.20.1 over Debian's librocksdb 7.8.3). Every variant shares the
//! papers' conventions: 4 KiB blocks, a 10 bits/key bloom filter, direct I/O for reads and for
//! flush/compaction, a block cache + memtables sized to the memory budget, WAL on. The variants:
//!
//! - `rocksdb` (default): what RocksDB's own tuning guide gives for a memory-bounded workload
//!   (wiki "Partitioned Index Filters", "Block Cache", "Data Block Hash Index", "Setup Options and
//!   Basic Tuning"): partitioned index and filters so only small top-level indexes must stay in
//!   memory, metadata cached at high priority with the top level pinned, a hash index inside each
//!   data block for point lookups, dynamic level sizes. Each setting's reason is at its line.
//! - `rocksdb-weak`: whole-file index and filter blocks in the block cache (L0's pinned). Under a
//!   small budget they thrash (a 10M-record YCSB C measured read amplification 1,357); it shows
//!   what `rocksdb`'s partitioned metadata is worth, and keeps ratios quoted against this
//!   configuration in docs/benchmarks.md reproducible.
//! - `rocksdb-point`: `rocksdb-weak` plus `OptimizeForPointLookup`'s settings (the F2 paper's
//!   RocksDB baseline), with the cache still sized by the budget.
//! - `rocksdb-blob`: `rocksdb` plus integrated BlobDB (wiki "BlobDB"), what its experts use for
//!   large values: values of 4 KiB and more go to blob files, so compactions move only their
//!   references; blob garbage collection on (its defaults: the oldest 25% of blob files).

use ::rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, DBCompressionType, DataBlockIndexType, Options,
    WriteOptions, DB,
};
use anyhow::Context as _;

use super::{bytes_usize, format_bytes, owned_len, read_record, setting, LsmMemorySplit};
use crate::adapter::{KvAdapter, OpenParams};

const BLOCK_SIZE_BYTES: usize = 4 << 10;
const BLOOM_BITS_PER_KEY: f64 = 10.0;
/// RocksDB's default, and the number of cores this project benchmarks on.
const BACKGROUND_JOBS: i32 = 2;
/// Partitioned index/filter block size: the wiki's recommended 4 KiB (one device page per miss).
const METADATA_BLOCK_SIZE_BYTES: usize = 4 << 10;
/// `OptimizeForPointLookup`'s values (RocksDB 7.x, options/options.cc).
const DATA_BLOCK_HASH_RATIO: f64 = 0.75;
const MEMTABLE_BLOOM_RATIO: f64 = 0.02;
/// The basic tuning guide's `bytes_per_sync`.
const BYTES_PER_SYNC: u64 = 1 << 20;

/// Which RocksDB configuration an engine name stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tuning {
    /// `rocksdb`: the tuning guide's memory-bounded configuration.
    Tuned,
    /// `rocksdb-weak`: defaults plus bloom filters and a budgeted cache holding whole-file index
    /// and filter blocks.
    Weak,
    /// `rocksdb-point`: `Weak` plus what `OptimizeForPointLookup` turns on — a hash index inside
    /// each data block and a whole-key bloom filter on the memtable — without its fixed-size cache.
    WeakPointLookup,
    /// `rocksdb-blob`: `Tuned` plus blob files for values of `MIN_BLOB_BYTES` and more.
    TunedBlobs,
}

/// `rocksdb-blob`'s `min_blob_size`: a value of a data block's size or more goes to a blob file.
const MIN_BLOB_BYTES: u64 = 4 << 10;

impl Tuning {
    pub(super) fn engine_name(self) -> &'static str {
        match self {
            Tuning::Tuned => "rocksdb",
            Tuning::Weak => "rocksdb-weak",
            Tuning::WeakPointLookup => "rocksdb-point",
            Tuning::TunedBlobs => "rocksdb-blob",
        }
    }

    fn point_lookup_settings(self) -> bool {
        matches!(self, Tuning::Tuned | Tuning::WeakPointLookup | Tuning::TunedBlobs)
    }

    /// The tuning guide's settings (partitioned metadata, dynamic levels, ...).
    fn tuned(self) -> bool {
        matches!(self, Tuning::Tuned | Tuning::TunedBlobs)
    }
}

/// How long `settle` waits for pending compactions before it gives up.
const SETTLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// Records per write batch of `--load-mode bulk`, as TreeLine's authors load RocksDB.
const BULK_LOAD_BATCH_RECORDS: usize = 1024;

pub(super) struct RocksDbAdapter {
    name: &'static str,
    db: DB,
    write_options: WriteOptions,
    config: Vec<(String, String)>,
}

/// The block-based table options of `tuning`, and what they are, for the report.
fn table_options(tuning: Tuning, cache: &Cache) -> (BlockBasedOptions, Vec<(String, String)>) {
    let mut table = BlockBasedOptions::default();
    table.set_block_size(BLOCK_SIZE_BYTES);
    // Full (not block-based) filters; format 5's faster and more accurate bloom implementation.
    table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
    table.set_format_version(5);
    table.set_block_cache(cache);
    // The budget bounds index and filter blocks too: they live in the block cache.
    table.set_cache_index_and_filter_blocks(true);
    // L0 files are few and every lookup probes them all: keep their metadata pinned (the
    // partitioned-index wiki recommends it for leveled compaction; it extends to partitions).
    table.set_pin_l0_filter_and_index_blocks_in_cache(true);
    let mut described = vec![setting("block size", format_bytes(BLOCK_SIZE_BYTES as u64))];
    if tuning.tuned() {
        // Partitioned index: a whole-file index block (hundreds of KiB per SST) competes with data
        // blocks for a small cache and is re-read whole after each eviction; 4 KiB partitions
        // are cached like data blocks and only the top level must stay in memory.
        table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
        // Partitioned filters (needs the two-level index): the same for the bloom filter, whose
        // whole-file block is ~10x the index's.
        table.set_partition_filters(true);
        table.set_metadata_block_size(METADATA_BLOCK_SIZE_BYTES);
        // The top-level index and filter of every file stay in the cache, pinned, so a lookup
        // never misses on them (cheap: a few KiB per file) — the wiki's setting for RocksDB ≥ 5.15.
        table.set_pin_top_level_index_and_filter(true);
        // cache_index_and_filter_blocks_with_high_priority: RocksDB 7.8's default is true and the
        // LRU cache's default high_pri_pool_ratio is 0.5 (include/rocksdb/{table,cache}.h), so
        // metadata partitions are evicted after data blocks; the crate has no setter for either.
        described.push(setting(
            "index and filters",
            "partitioned (two-level index search, partition_filters, 4 KiB metadata blocks); top level \
             pinned (pin_top_level_index_and_filter); partitions in the block cache at high priority \
             (RocksDB 7.8 defaults: cache_index_and_filter_blocks_with_high_priority, LRU high_pri_pool_ratio \
             0.5); L0's pinned",
        ));
    } else {
        described.push(setting(
            "index and filters",
            "one index and one filter block per file, in the block cache (cache_index_and_filter_blocks, L0 pinned)",
        ));
    }
    if tuning.point_lookup_settings() {
        // Data block hash index: a point lookup finds its key in a data block with one hash probe
        // instead of a binary search (wiki "Data Block Hash Index"); Seek, i.e. scans, still binary
        // searches, so scans lose nothing. Ratio 0.75 as OptimizeForPointLookup sets it.
        table.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
        table.set_data_block_hash_ratio(DATA_BLOCK_HASH_RATIO);
    }
    described.push(setting(
        "filter",
        format!("full bloom filter, {BLOOM_BITS_PER_KEY} bits/key, format_version 5"),
    ));
    (table, described)
}

/// Column-family and DB options beyond the table's.
fn db_options(
    tuning: Tuning,
    split: &LsmMemorySplit,
    params: &OpenParams,
) -> (Options, Vec<(String, String)>) {
    let mut options = Options::default();
    options.create_if_missing(true);
    options.set_compression_type(DBCompressionType::None);
    options.set_write_buffer_size(bytes_usize(split.memtable_bytes));
    options.set_max_write_buffer_number(split.memtable_count as i32);
    options.set_max_background_jobs(BACKGROUND_JOBS);
    options.set_use_direct_reads(params.direct_io);
    options.set_use_direct_io_for_flush_and_compaction(params.direct_io);
    let mut described = Vec::new();
    if tuning.point_lookup_settings() {
        // A whole-key bloom filter on the memtable: a read of a key that is not in the memtable
        // (nearly all of them, at a budget this small) skips the skiplist search.
        options.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO);
        options.set_memtable_whole_key_filtering(true);
        described.push(setting(
            "point lookups",
            format!(
                "OptimizeForPointLookup's settings: data block hash index (ratio {DATA_BLOCK_HASH_RATIO}), \
                 memtable whole-key bloom filter (ratio {MEMTABLE_BLOOM_RATIO})"
            ),
        ));
    }
    if tuning == Tuning::TunedBlobs {
        // Integrated BlobDB (RocksDB wiki "BlobDB"): large values are written once to blob files
        // at flush and compactions rewrite only the keys and blob references; garbage collection
        // relocates the live values of the oldest blob files during compaction.
        options.set_enable_blob_files(true);
        options.set_min_blob_size(MIN_BLOB_BYTES);
        options.set_enable_blob_gc(true);
        described.push(setting(
            "blob files",
            format!(
                "on: values of {} or more in blob files (256 MiB each), blob GC on (age cutoff 0.25)",
                format_bytes(MIN_BLOB_BYTES)
            ),
        ));
    }
    if tuning.tuned() {
        // Dynamic level sizes (tuning guide, "Setup Options and Basic Tuning"): level targets follow
        // the last level's actual size, so ~90% of the data sits in the last level, space
        // amplification stays near 1.11 and a lookup probes no half-empty levels.
        options.set_level_compaction_dynamic_level_bytes(true);
        // Every read in these traces hits an existing key (`not found` is 0), so the last level's
        // filters — ~90% of all filter bytes — would only ever say "maybe": not building them
        // frees that much of the cache for data (the tuning guide's advice for hit-only reads).
        options.set_optimize_filters_for_hits(true);
        // Sync SST writes every 1 MiB instead of in one burst at file close (basic tuning guide);
        // a no-op with direct I/O for flush and compaction.
        options.set_bytes_per_sync(BYTES_PER_SYNC);
        described.push(setting(
            "tuning",
            "level_compaction_dynamic_level_bytes, optimize_filters_for_hits (reads here always hit: no \
             last-level filters), bytes_per_sync 1 MiB; compaction_pri kMinOverlappingRatio (7.8 default); \
             not set: optimize_filters_for_memory (not in RocksDB 7.8's C API or the crate)",
        ));
    } else {
        options.set_optimize_filters_for_hits(false);
    }
    (options, described)
}

impl RocksDbAdapter {
    pub(super) fn open(params: &OpenParams, tuning: Tuning) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&params.dir)
            .with_context(|| format!("rocksdb: creating {}", params.dir.display()))?;
        let split = LsmMemorySplit::of_budget(params.memory_budget_bytes);
        let block_cache =
            Cache::new_lru_cache(bytes_usize(split.block_cache_bytes)).context("rocksdb: block cache")?;
        let (table, table_described) = table_options(tuning, &block_cache);
        let (mut options, db_described) = db_options(tuning, &split, params);
        options.set_block_based_table_factory(&table);

        let db = DB::open(&options, &params.dir)
            .with_context(|| format!("rocksdb: opening {}", params.dir.display()))?;
        let mut write_options = WriteOptions::default();
        write_options.set_sync(params.sync_writes);
        write_options.disable_wal(false);

        let mut config = vec![
            setting("library", "RocksDB 7.8.3 (Debian librocksdb-dev) via rocksdb crate 0.20.1"),
            setting("variant", variant_description(tuning)),
            setting("memory", split.describe()),
            setting("block cache", "LRU, sized to the budget's share; index and filter blocks in it"),
        ];
        config.extend(table_described);
        config.extend(common_settings(params));
        config.extend(db_described);
        Ok(RocksDbAdapter { name: tuning.engine_name(), db, write_options, config })
    }
}

fn variant_description(tuning: Tuning) -> &'static str {
    match tuning {
        Tuning::Tuned => "tuned for a bounded memory budget (RocksDB wiki); the default `rocksdb`",
        Tuning::Weak => {
            "weak: one index and one filter block per file, unpartitioned (whole-file index/filter blocks thrash a small cache)"
        }
        Tuning::WeakPointLookup => {
            "rocksdb-weak + OptimizeForPointLookup's settings (the F2 paper's baseline)"
        }
        Tuning::TunedBlobs => "rocksdb + integrated BlobDB for large values (RocksDB wiki \"BlobDB\")",
    }
}

fn common_settings(params: &OpenParams) -> Vec<(String, String)> {
    vec![
        setting("compression", "none"),
        setting(
            "direct I/O",
            if params.direct_io {
                "on: reads (use_direct_reads) and flush/compaction writes"
            } else {
                "off (OS page cache)"
            },
        ),
        setting(
            "durability",
            if params.sync_writes {
                "WAL on, fsync per write (WriteOptions::set_sync)"
            } else {
                "WAL on, written to the OS per write, not fsynced; flush() syncs the WAL"
            },
        ),
        setting("compaction", format!("leveled, {BACKGROUND_JOBS} background jobs")),
        // YCSB E's scans read ≤ 100 records: 1–4 data blocks per level. RocksDB's automatic
        // iterator readahead (8 KiB doubling to 256 KiB after two sequential reads of one file,
        // direct I/O included) covers longer ones; a fixed readahead_size would over-read every
        // short scan.
        setting("scan", "raw iterator: seek(start) then next(); RocksDB's automatic readahead"),
    ]
}

impl KvAdapter for RocksDbAdapter {
    fn name(&self) -> &str {
        self.name
    }

    fn config_description(&self) -> Vec<(String, String)> {
        self.config.clone()
    }

    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
        let value = self.db.get_pinned(key).context("rocksdb get")?;
        Ok(value.map(|pinned| owned_len(&pinned)))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        self.db.put_opt(key, value, &self.write_options).context("rocksdb put")
    }

    fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
        self.db.delete_opt(key, &self.write_options).context("rocksdb delete")
    }

    fn scan(&self, start: &[u8], count: usize) -> anyhow::Result<usize> {
        let mut iter = self.db.raw_iterator();
        iter.seek(start);
        let mut read = 0;
        while read < count {
            let (Some(key), Some(value)) = (iter.key(), iter.value()) else { break };
            read_record(key, value);
            read += 1;
            iter.next();
        }
        iter.status().context("rocksdb scan")?;
        Ok(read)
    }

    fn flush(&self) -> anyhow::Result<()> {
        self.db.flush_wal(true).context("rocksdb flush (WAL sync)")
    }

    /// As TreeLine's authors load RocksDB (bench/common/rocksdb_interface.h): write batches of
    /// 1,024 records in key order, then one full manual compaction that may move the result to
    /// the best-fitting level (`change_level`), here also flushing the memtable first.
    fn bulk_load(&self, records: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> anyhow::Result<u64> {
        let mut batch = rocksdb::WriteBatch::default();
        let mut loaded = 0;
        for (key, value) in records {
            batch.put(&key, &value);
            loaded += 1;
            if batch.len() >= BULK_LOAD_BATCH_RECORDS {
                self.db
                    .write_opt(std::mem::take(&mut batch), &self.write_options)
                    .context("rocksdb bulk write")?;
            }
        }
        if !batch.is_empty() {
            self.db.write_opt(batch, &self.write_options).context("rocksdb bulk write")?;
        }
        self.db.flush().context("rocksdb bulk load (memtable flush)")?;
        let mut compact = rocksdb::CompactOptions::default();
        compact.set_change_level(true);
        self.db.compact_range_opt(None::<&[u8]>, None::<&[u8]>, &compact);
        Ok(loaded)
    }

    /// Flushes the memtables, then waits until no flush or compaction is running or pending
    /// (RocksDB 7.8 has no `WaitForCompact`; these are the properties it reads).
    fn settle(&self) -> anyhow::Result<()> {
        self.db.flush().context("rocksdb settle (memtable flush)")?;
        let busy = |name: &str| -> anyhow::Result<bool> {
            Ok(self.db.property_int_value(name).context("rocksdb property")?.unwrap_or(0) > 0)
        };
        let deadline = std::time::Instant::now() + SETTLE_TIMEOUT;
        while busy("rocksdb.compaction-pending")?
            || busy("rocksdb.num-running-compactions")?
            || busy("rocksdb.num-running-flushes")?
        {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "rocksdb settle: compactions still pending"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Ok(())
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        self.db.flush().context("rocksdb close (memtable flush)")?;
        drop(self);
        Ok(())
    }
}
