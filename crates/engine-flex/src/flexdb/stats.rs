//! What FlexDB reports about itself: `stats` (counters and the memory budget's parts) and
//! `verify` (every checksum of the WAL, the commit record and the table file).

use std::sync::atomic::Ordering::Relaxed;

use strata_core::{Error, Result, Stats, VerifyReport};
use strata_wal::Wal;

use super::db::FlexDb;
use super::meta;
use crate::io_kinds;

impl FlexDb {
    pub(crate) fn stats(&self) -> Stats {
        let (mem_bytes, mem_entries) = {
            let mem = self.mem.read();
            let imm = mem.imm.as_ref().map_or(0, |m| m.memory_bytes());
            (mem.active.memory_bytes() + imm, mem.active.len() as u64)
        };
        // One read lock for the whole table snapshot.
        let t = self.table.read();
        let cache = t.cache_stats();
        let (cache_capacity, index_bytes, file_memory) =
            (t.cache_capacity_bytes(), t.index().memory_bytes(), t.file_memory_bytes());
        let intervals = t.index().interval_count() as u64;
        let (table_bytes, rebuild_bytes, loads, file_counters) =
            (t.file_len(), t.rebuild_bytes_read, t.interval_loads.load(Relaxed), t.file_counters());
        let split_on_access = t.intervals_split_on_access;
        drop(t);
        let memory_bytes = mem_bytes + cache.used_bytes + index_bytes + file_memory;
        let c = &self.counters;
        Stats {
            engine: "flex".into(),
            live_keys: None,
            user_bytes_written: self.writes.user_bytes_written(),
            user_bytes_read: c.user_bytes_read.load(Relaxed),
            io: self.storage.io_stats(),
            cache_hits: cache.hits,
            cache_misses: cache.misses,
            memory_bytes,
            disk_bytes: strata_io::total_file_bytes(self.storage.as_ref()),
            engine_counters: [
                ("flexdb.commits", c.commits.load(Relaxed)),
                ("flexdb.committed_entries", c.committed_entries.load(Relaxed)),
                ("flexdb.last_commit_micros", c.last_commit_micros.load(Relaxed)),
                ("flexdb.memtable_entries", mem_entries),
                ("flexdb.intervals", intervals),
                ("flexdb.interval_loads", loads),
                ("flexdb.cached_intervals", cache.intervals),
                ("flexdb.table_file_bytes", table_bytes),
                ("flexdb.rebuild_bytes_read", rebuild_bytes),
                ("flexdb.intervals_split_on_access", split_on_access),
                ("flexdb.records_replayed_at_open", c.records_replayed.load(Relaxed)),
                ("flexdb.open_micros", c.open_micros.load(Relaxed)),
                ("flexdb.write_paced_micros", c.paced_micros.load(Relaxed)),
                ("memory.budget_bytes", self.memory.budget_bytes),
                ("memory.memtables_bytes", mem_bytes),
                ("memory.memtable_limit_bytes", self.memtable_bytes),
                ("memory.memtables_reserved_bytes", self.mem_reserved_bytes.load(Relaxed)),
                ("memory.cache_bytes", cache.used_bytes),
                ("memory.cache_slack_bytes", cache.slack_bytes),
                ("memory.cache_capacity_bytes", cache_capacity),
                ("memory.sparse_index_bytes", index_bytes),
                ("memory.table_file_bytes", file_memory),
                ("memory.over_budget_bytes", memory_bytes.saturating_sub(self.memory.budget_bytes)),
            ]
            .into_iter()
            .chain(file_counters)
            .map(|(name, value)| (name.to_string(), value))
            .chain(self.writes.wal().stats().counters())
            .chain(self.io.counters(io_kinds::CAUSE_NAMES))
            .collect(),
            notices: Vec::new(),
        }
    }

    pub(crate) fn verify(&self) -> Result<VerifyReport> {
        self.check_usable()?;
        let mut report = Wal::verify(self.storage.as_ref(), &self.wal_options)?;
        if let Some(m) = meta::load(self.storage.as_ref())? {
            if m.table_kind != self.table_kind.code() {
                return Err(Error::corruption(
                    "flexdb-meta",
                    12,
                    format!("table file kind {} does not match the open table file", m.table_kind),
                ));
            }
            report.files_checked += 1;
        }
        let (records, bytes) = self.table.read().verify()?;
        report.files_checked += 1;
        report.records_checked += records;
        report.bytes_checked += bytes;
        Ok(report)
    }
}
