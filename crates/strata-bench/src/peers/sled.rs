//! sled 0.34.7: a log-structured Bw-tree-like store with its own page cache.

use anyhow::Context as _;

use super::{format_bytes, setting};
use crate::adapter::{KvAdapter, OpenParams};

/// sled's default background flush period when writes are not synced individually.
const FLUSH_EVERY_MS: u64 = 500;

pub(super) struct SledAdapter {
    db: ::sled::Db,
    sync_writes: bool,
    config: Vec<(String, String)>,
}

impl SledAdapter {
    pub(super) fn open(params: &OpenParams) -> anyhow::Result<Self> {
        let db = ::sled::Config::new()
            .path(&params.dir)
            .cache_capacity(params.memory_budget_bytes)
            .mode(::sled::Mode::LowSpace)
            .use_compression(false)
            .flush_every_ms(Some(FLUSH_EVERY_MS))
            .open()
            .with_context(|| format!("sled: opening {}", params.dir.display()))?;

        let config = vec![
            setting("library", "sled 0.34.7"),
            setting(
                "memory",
                format!(
                    "{} page cache (cache_capacity = the whole budget; sled's accounting is approximate)",
                    format_bytes(params.memory_budget_bytes)
                ),
            ),
            setting("mode", "LowSpace (default)"),
            setting("compression", "none"),
            setting(
                "direct I/O",
                if params.direct_io { "requested but unsupported (buffered file I/O)" } else { "off" },
            ),
            setting(
                "durability",
                if params.sync_writes {
                    "flush() (fsync) after every write".to_owned()
                } else {
                    format!(
                        "writes buffered in sled's log buffers, flushed to disk every {FLUSH_EVERY_MS} ms \
                         (default); flush() fsyncs"
                    )
                },
            ),
        ];
        Ok(SledAdapter { db, sync_writes: params.sync_writes, config })
    }

    fn flush_if_sync(&self, what: &str) -> anyhow::Result<()> {
        if self.sync_writes {
            self.db.flush().with_context(|| format!("sled {what}: flush"))?;
        }
        Ok(())
    }
}

impl KvAdapter for SledAdapter {
    fn name(&self) -> &str {
        "sled"
    }

    fn config_description(&self) -> Vec<(String, String)> {
        self.config.clone()
    }

    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
        // `get` returns an owned, reference-counted buffer: already what `strata::Db::get` returns.
        let value = self.db.get(key).context("sled get")?;
        Ok(value.map(|value| std::hint::black_box(value).len()))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        self.db.insert(key, value).context("sled put")?;
        self.flush_if_sync("put")
    }

    fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
        self.db.remove(key).context("sled delete")?;
        self.flush_if_sync("delete")
    }

    fn scan(&self, start: &[u8], count: usize) -> anyhow::Result<usize> {
        let mut read = 0;
        for item in self.db.range(start..).take(count) {
            let record = item.context("sled scan")?;
            std::hint::black_box(record);
            read += 1;
        }
        Ok(read)
    }

    fn flush(&self) -> anyhow::Result<()> {
        self.db.flush().context("sled flush")?;
        Ok(())
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        self.flush()?;
        drop(self);
        Ok(())
    }
}
