//! RocksDB (the `rocksdb` crate =0.20.1 over Debian's librocksdb 7.8.3), configured as the papers
//! did: 4 KiB blocks, a 10 bits/key bloom filter, direct I/O for reads and for flush/compaction,
//! block cache + memtables sized to the memory budget, WAL on. Engine `rocksdb-point` adds the
//! point-lookup settings of `Options::OptimizeForPointLookup` (the F2 paper's RocksDB baseline)
//! while keeping the block cache sized by the budget.

use ::rocksdb::{BlockBasedOptions, Cache, DBCompressionType, DataBlockIndexType, Options, WriteOptions, DB};
use anyhow::Context as _;

use super::{bytes_usize, format_bytes, owned_len, read_record, setting, LsmMemorySplit};
use crate::adapter::{KvAdapter, OpenParams};

const BLOCK_SIZE_BYTES: usize = 4 << 10;
const BLOOM_BITS_PER_KEY: f64 = 10.0;
/// RocksDB's default, and the number of cores this project benchmarks on.
const BACKGROUND_JOBS: i32 = 2;

/// Which RocksDB configuration an engine name stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tuning {
    /// `rocksdb`: defaults plus the shared conventions (bloom filters, budgeted cache).
    General,
    /// `rocksdb-point`: what `OptimizeForPointLookup` turns on — a hash index inside each data
    /// block (binary search + hash, ratio 0.75) and a whole-key bloom filter on the memtable —
    /// without its fixed-size cache (ours follows the budget).
    PointLookup,
}

/// `OptimizeForPointLookup`'s values (RocksDB 7.x, options/options.cc).
const DATA_BLOCK_HASH_RATIO: f64 = 0.75;
const MEMTABLE_BLOOM_RATIO: f64 = 0.02;

pub(super) struct RocksDbAdapter {
    name: &'static str,
    db: DB,
    write_options: WriteOptions,
    config: Vec<(String, String)>,
}

impl RocksDbAdapter {
    pub(super) fn open(params: &OpenParams, tuning: Tuning) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&params.dir)
            .with_context(|| format!("rocksdb: creating {}", params.dir.display()))?;
        let split = LsmMemorySplit::of_budget(params.memory_budget_bytes);

        // The cache holds data blocks and, so that the budget bounds them too, index and filter blocks.
        let block_cache =
            Cache::new_lru_cache(bytes_usize(split.block_cache_bytes)).context("rocksdb: block cache")?;
        let mut table_options = BlockBasedOptions::default();
        table_options.set_block_size(BLOCK_SIZE_BYTES);
        table_options.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
        table_options.set_block_cache(&block_cache);
        table_options.set_cache_index_and_filter_blocks(true);
        table_options.set_pin_l0_filter_and_index_blocks_in_cache(true);
        if tuning == Tuning::PointLookup {
            table_options.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
            table_options.set_data_block_hash_ratio(DATA_BLOCK_HASH_RATIO);
        }

        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_block_based_table_factory(&table_options);
        options.set_compression_type(DBCompressionType::None);
        options.set_write_buffer_size(bytes_usize(split.memtable_bytes));
        options.set_max_write_buffer_number(split.memtable_count as i32);
        options.set_max_background_jobs(BACKGROUND_JOBS);
        options.set_optimize_filters_for_hits(false);
        options.set_use_direct_reads(params.direct_io);
        options.set_use_direct_io_for_flush_and_compaction(params.direct_io);
        if tuning == Tuning::PointLookup {
            options.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO);
            options.set_memtable_whole_key_filtering(true);
        }

        let db = DB::open(&options, &params.dir)
            .with_context(|| format!("rocksdb: opening {}", params.dir.display()))?;

        let mut write_options = WriteOptions::default();
        write_options.set_sync(params.sync_writes);
        write_options.disable_wal(false);

        let mut config = vec![
            setting("library", "RocksDB 7.8.3 (Debian librocksdb-dev) via rocksdb crate 0.20.1"),
            setting("memory", split.describe()),
            setting(
                "block cache",
                "LRU; index and filter blocks cached in it (cache_index_and_filter_blocks, L0 pinned)",
            ),
            setting("block size", format_bytes(BLOCK_SIZE_BYTES as u64)),
            setting("filter", format!("full bloom filter, {BLOOM_BITS_PER_KEY} bits/key, on every level")),
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
            setting("compaction", format!("leveled (defaults), {BACKGROUND_JOBS} background jobs")),
            setting("scan", "raw iterator: seek(start) then next()"),
        ];
        if tuning == Tuning::PointLookup {
            config.push(setting(
                "point lookups",
                format!(
                    "OptimizeForPointLookup's settings: data block hash index (ratio {DATA_BLOCK_HASH_RATIO}), \
                     memtable whole-key bloom filter (ratio {MEMTABLE_BLOOM_RATIO})"
                ),
            ));
        }
        let name = match tuning {
            Tuning::General => "rocksdb",
            Tuning::PointLookup => "rocksdb-point",
        };
        Ok(RocksDbAdapter { name, db, write_options, config })
    }
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

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        self.db.flush().context("rocksdb close (memtable flush)")?;
        drop(self);
        Ok(())
    }
}
