//! fjall 3.1: a pure-Rust LSM-tree with a shared journal, configured like RocksDB where fjall has
//! the knob: 4 KiB blocks, 10 bits/key bloom filters, the same budget split, no compression.

use ::fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
};
use ::fjall::{CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode};
use anyhow::Context as _;

use super::{format_bytes, setting, LsmMemorySplit};
use crate::adapter::{KvAdapter, OpenParams};

const KEYSPACE_NAME: &str = "kv";
const BLOCK_SIZE_BYTES: u32 = 4 << 10;
const BLOOM_BITS_PER_KEY: f32 = 10.0;

pub(super) struct FjallAdapter {
    db: Database,
    keyspace: Keyspace,
    sync_writes: bool,
    config: Vec<(String, String)>,
}

impl FjallAdapter {
    pub(super) fn open(params: &OpenParams) -> anyhow::Result<Self> {
        let split = LsmMemorySplit::of_budget(params.memory_budget_bytes);
        let db = Database::builder(&params.dir)
            .cache_size(split.block_cache_bytes)
            .open()
            .with_context(|| format!("fjall: opening {}", params.dir.display()))?;
        let keyspace = db
            .keyspace(KEYSPACE_NAME, || {
                KeyspaceCreateOptions::default()
                    .max_memtable_size(split.memtable_bytes)
                    .data_block_size_policy(BlockSizePolicy::all(BLOCK_SIZE_BYTES))
                    .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                        BloomConstructionPolicy::BitsPerKey(BLOOM_BITS_PER_KEY),
                    )))
                    .data_block_compression_policy(CompressionPolicy::all(CompressionType::None))
                    .index_block_compression_policy(CompressionPolicy::all(CompressionType::None))
            })
            .context("fjall: opening the keyspace")?;

        let config = vec![
            setting("library", "fjall 3.1.13 (lsm-tree 3)"),
            setting(
                "memory",
                format!(
                    "{} block cache + {} memtable per keyspace (same 1/3 memtable split as rocksdb; fjall \
                     bounds sealed memtables by journal size, not count)",
                    format_bytes(split.block_cache_bytes),
                    format_bytes(split.memtable_bytes)
                ),
            ),
            setting("block size", format_bytes(u64::from(BLOCK_SIZE_BYTES))),
            setting("filter", format!("bloom filter, {BLOOM_BITS_PER_KEY} bits/key, on every level")),
            setting("compression", "none (data and index blocks; built without the lz4 feature)"),
            setting(
                "direct I/O",
                if params.direct_io { "requested but unsupported (buffered file I/O)" } else { "off" },
            ),
            setting(
                "durability",
                if params.sync_writes {
                    "journal fdatasync after every write (persist(SyncData))"
                } else {
                    "journal written to the OS per write, not fsynced (default); flush() fsyncs"
                },
            ),
            setting("compaction", "leveled (default), default worker threads (min(cores, 4))"),
        ];
        Ok(FjallAdapter { db, keyspace, sync_writes: params.sync_writes, config })
    }

    fn persist_if_sync(&self, what: &str) -> anyhow::Result<()> {
        if self.sync_writes {
            self.db.persist(PersistMode::SyncData).with_context(|| format!("fjall {what}: journal sync"))?;
        }
        Ok(())
    }
}

impl KvAdapter for FjallAdapter {
    fn name(&self) -> &str {
        "fjall"
    }

    fn config_description(&self) -> Vec<(String, String)> {
        self.config.clone()
    }

    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
        // `get` returns an owned, reference-counted buffer: already what `strata::Db::get` returns.
        let value = self.keyspace.get(key).context("fjall get")?;
        Ok(value.map(|value| std::hint::black_box(value).len()))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        self.keyspace.insert(key, value).context("fjall put")?;
        self.persist_if_sync("put")
    }

    fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
        self.keyspace.remove(key).context("fjall delete")?;
        self.persist_if_sync("delete")
    }

    fn scan(&self, start: &[u8], count: usize) -> anyhow::Result<usize> {
        let mut read = 0;
        for guard in self.keyspace.range(start..).take(count) {
            let record = guard.into_inner().context("fjall scan")?;
            std::hint::black_box(record);
            read += 1;
        }
        Ok(read)
    }

    fn flush(&self) -> anyhow::Result<()> {
        self.db.persist(PersistMode::SyncAll).context("fjall flush (journal sync)")
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        self.flush()?;
        drop(self);
        Ok(())
    }
}
