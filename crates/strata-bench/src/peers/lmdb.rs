//! LMDB through `heed` 0.23: a copy-on-write B+tree in one memory-mapped file. One write
//! transaction per put (LMDB has a single writer), one read transaction per get or scan.

use std::ops::Bound;

use anyhow::Context as _;
use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions};

use super::{format_bytes, owned_len, read_record, setting};
use crate::adapter::{KvAdapter, OpenParams};

/// Virtual address space reserved for the map; the file grows only as data is written. Bounds the
/// data set: writes past it fail with `MapFull`.
const MAP_SIZE_BYTES: u64 = 64 << 30;
/// LMDB's default reader table size; raised when more worker threads than this will read.
const DEFAULT_MAX_READERS: u32 = 126;

pub(super) struct LmdbAdapter {
    env: Env,
    db: Database<'static, Bytes, Bytes>,
    config: Vec<(String, String)>,
}

impl LmdbAdapter {
    pub(super) fn open(params: &OpenParams) -> anyhow::Result<Self> {
        std::fs::create_dir_all(&params.dir)
            .with_context(|| format!("lmdb: creating {}", params.dir.display()))?;
        let map_size_bytes =
            usize::try_from(MAP_SIZE_BYTES).context("lmdb: map size exceeds address space")?;
        let threads = u32::try_from(params.threads).unwrap_or(u32::MAX);
        let max_readers = DEFAULT_MAX_READERS.max(threads.saturating_add(8));

        let mut flags = EnvFlags::NO_READ_AHEAD;
        if !params.sync_writes {
            flags |= EnvFlags::NO_SYNC;
        }
        let mut options = EnvOpenOptions::new();
        options.map_size(map_size_bytes).max_readers(max_readers);
        // SAFETY: NO_SYNC only weakens durability (a system crash may lose the last commits; the
        // database stays consistent because WRITE_MAP is off). NO_READ_AHEAD is a performance hint.
        unsafe { options.flags(flags) };
        // SAFETY: the directory belongs to this adapter alone (OpenParams), so no other process
        // or mapping modifies the file while it is mapped, and it is a local file system.
        let env = unsafe { options.open(&params.dir) }
            .with_context(|| format!("lmdb: opening {}", params.dir.display()))?;

        let wtxn = env.write_txn().context("lmdb: write transaction")?;
        let db = env
            .create_databases_and_commit(wtxn, |opener, wtxn| {
                opener.create_database::<Bytes, Bytes>(wtxn, None).map(CommitOrAbort::<_, ()>::Commit)
            })
            .context("lmdb: opening the unnamed database")?
            .unwrap_commit();

        let config = vec![
            setting("library", "LMDB (mdb.master, bundled) via heed 0.23.1"),
            setting(
                "memory",
                format!(
                    "no cache knob: data is memory-mapped and cached by the OS page cache, so the {} budget \
                     is not enforced",
                    format_bytes(params.memory_budget_bytes)
                ),
            ),
            setting(
                "map size",
                format!("{} virtual (file grows with the data)", format_bytes(MAP_SIZE_BYTES)),
            ),
            setting("page size", "OS page size (4 KiB)"),
            setting("read-ahead", "off (MDB_NORDAHEAD: random reads on data larger than memory)"),
            setting("compression", "none (LMDB has none)"),
            setting(
                "direct I/O",
                if params.direct_io {
                    "requested but unsupported (mmap reads, buffered writes)"
                } else {
                    "off"
                },
            ),
            setting(
                "durability",
                if params.sync_writes {
                    "fsync at every commit (default LMDB)"
                } else {
                    "MDB_NOSYNC: commits reach the OS but are not fsynced (no WAL; a system crash may \
                     lose the last commits); flush() syncs"
                },
            ),
            setting("writes", "one write transaction per put/delete (LMDB has a single writer)"),
            setting("reads", format!("one read transaction per get/scan; {max_readers} reader slots")),
        ];
        Ok(LmdbAdapter { env, db, config })
    }
}

impl KvAdapter for LmdbAdapter {
    fn name(&self) -> &str {
        "lmdb"
    }

    fn config_description(&self) -> Vec<(String, String)> {
        self.config.clone()
    }

    fn get(&self, key: &[u8]) -> anyhow::Result<Option<usize>> {
        let rtxn = self.env.read_txn().context("lmdb get: read transaction")?;
        let value = self.db.get(&rtxn, key).context("lmdb get")?;
        Ok(value.map(owned_len))
    }

    fn put(&self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        let mut wtxn = self.env.write_txn().context("lmdb put: write transaction")?;
        self.db.put(&mut wtxn, key, value).context("lmdb put")?;
        wtxn.commit().context("lmdb put: commit")
    }

    fn delete(&self, key: &[u8]) -> anyhow::Result<()> {
        let mut wtxn = self.env.write_txn().context("lmdb delete: write transaction")?;
        self.db.delete(&mut wtxn, key).context("lmdb delete")?;
        wtxn.commit().context("lmdb delete: commit")
    }

    fn scan(&self, start: &[u8], count: usize) -> anyhow::Result<usize> {
        let rtxn = self.env.read_txn().context("lmdb scan: read transaction")?;
        // LMDB rejects zero-length keys, also as a seek target; the empty key sorts first anyway.
        let lower = if start.is_empty() { Bound::Unbounded } else { Bound::Included(start) };
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (lower, Bound::Unbounded);
        let mut read = 0;
        for item in self.db.range(&rtxn, &bounds).context("lmdb scan")?.take(count) {
            let (key, value) = item.context("lmdb scan")?;
            read_record(key, value);
            read += 1;
        }
        Ok(read)
    }

    fn flush(&self) -> anyhow::Result<()> {
        self.env.force_sync().context("lmdb flush (sync)")
    }

    fn close(self: Box<Self>) -> anyhow::Result<()> {
        let LmdbAdapter { env, db: _, config: _ } = *self;
        env.force_sync().context("lmdb close (sync)")?;
        // Wait until the environment is really closed, so a reopen (timed by the driver) starts clean.
        env.prepare_for_closing().wait();
        Ok(())
    }
}
