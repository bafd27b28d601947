//! redb 4.4: a copy-on-write B-tree in one file with its own page cache. One write transaction
//! per put (redb has a single writer), one read transaction per get or scan.

use ::redb::{Builder, Database, Durability, ReadableDatabase as _, TableDefinition};
use anyhow::Context as _;

use super::{bytes_usize, format_bytes, owned_len, read_record, setting};
use crate::adapter::{KvAdapter, OpenParams};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");
const FILE_NAME: &str = "data.redb";

pub(super) struct RedbAdapter {
    db: Database,
    durability: Durability,
    config: Vec<(String, String)>,
}

impl RedbAdapter {
    pub(super) fn open(params: &OpenParams) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&params.dir)
            .with_context(|| format!("redb: creating {}", params.dir.display()))?;
        let path = params.dir.join(FILE_NAME);
        let mut builder = Builder::new();
        builder.set_cache_size(bytes_usize(params.memory_budget_bytes));
        let db = builder.create(&path).with_context(|| format!("redb: opening {}", path.display()))?;
        let durability = if params.sync_writes { Durability::Immediate } else { Durability::None };

        // Read transactions cannot create the table; make sure it exists (durably) up front.
        let txn = db.begin_write().context("redb: write transaction")?;
        txn.open_table(TABLE).context("redb: creating the table")?;
        txn.commit().context("redb: creating the table")?;

        let config = vec![
            setting("library", "redb 4.4.0"),
            setting(
                "memory",
                format!("{} page cache (the whole budget)", format_bytes(params.memory_budget_bytes)),
            ),
            setting("page size", "4 KiB (redb's fixed default)"),
            setting("compression", "none (redb has none)"),
            setting(
                "direct I/O",
                if params.direct_io { "requested but unsupported (buffered file I/O)" } else { "off" },
            ),
            setting(
                "durability",
                if params.sync_writes {
                    "Durability::Immediate: fsync at every commit"
                } else {
                    "Durability::None per commit: no WAL, commits are lost on a crash until the next \
                     durable commit; flush() commits with Durability::Immediate"
                },
            ),
            setting("writes", "one write transaction per put/delete (redb has a single writer)"),
            setting("reads", "one read transaction per get/scan"),
        ];
        Ok(RedbAdapter { db, durability, config })
    }

    fn write(
        &self,
        what: &str,
        apply: impl FnOnce(&mut ::redb::Table<&[u8], &[u8]>) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let mut txn = self.db.begin_write().with_context(|| format!("redb {what}: write transaction"))?;
        txn.set_durability(self.durability).with_context(|| format!("redb {what}: durability"))?;
        {
            let mut table = txn.open_table(TABLE).with_context(|| format!("redb {what}: table"))?;
            apply(&mut table)?;
        }
        txn.commit().with_context(|| format!("redb {what}: commit"))
    }
}

impl KvAdapter for RedbAdapter {
    fn name(&self) -> &str {
        "redb"
    }

    fn config_description(&self) -> Vec<(String, String)> {
        self.config.clone()
    }

    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
        let txn = self.db.begin_read().context("redb get: read transaction")?;
        let table = txn.open_table(TABLE).context("redb get: table")?;
        let value = table.get(key).context("redb get")?;
        Ok(value.map(|guard| owned_len(guard.value())))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        self.write("put", |table| {
            table.insert(key, value).context("redb put")?;
            Ok(())
        })
    }

    fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
        self.write("delete", |table| {
            table.remove(key).context("redb delete")?;
            Ok(())
        })
    }

    fn scan(&self, start: &[u8], count: usize) -> anyhow::Result<usize> {
        let txn = self.db.begin_read().context("redb scan: read transaction")?;
        let table = txn.open_table(TABLE).context("redb scan: table")?;
        let mut read = 0;
        for item in table.range::<&[u8]>(start..).context("redb scan")?.take(count) {
            let (key, value) = item.context("redb scan")?;
            read_record(key.value(), value.value());
            read += 1;
        }
        Ok(read)
    }

    fn flush(&self) -> anyhow::Result<()> {
        let mut txn = self.db.begin_write().context("redb flush: write transaction")?;
        txn.set_durability(Durability::Immediate).context("redb flush: durability")?;
        txn.commit().context("redb flush: commit")
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        self.flush()?;
        drop(self);
        Ok(())
    }
}
