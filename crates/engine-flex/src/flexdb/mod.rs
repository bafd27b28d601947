//! FlexDB (paper §5): a MemTable and the shared WAL in front of one sorted table file that is
//! updated in place with insert-range and collapse-range; a volatile sparse index with partial
//! offsets and shifts; an interval cache; recovery by sampling extents. Paths:
//! docs/ARCHITECTURE.md (section `flex`), docs/format/flexdb.md.
//!
//! `db.rs` holds a store's state (`FlexDb`) and its open, read and close paths; `write.rs` the
//! write path, `commit.rs` and `committer.rs` the commit path, `memory_budget.rs` how the
//! MemTables and the interval cache share the budget. The crate's `FlexEngine` only adapts
//! `FlexDb` to `strata_core::Engine`; nothing here depends on it.

mod cache;
mod commit;
mod committer;
pub(crate) mod db;
mod interval;
pub(crate) mod iter;
mod mem_reservation;
mod memory_budget;
pub(crate) mod meta;
pub mod naive_file;
pub(crate) mod record;
#[cfg(test)]
mod rmw_tests;
pub mod sparse_index;
mod stats;
pub(crate) mod table;
mod write;

pub use naive_file::NaiveTableFile;

use strata_core::{EngineConfig, EngineOptionReader, Result};

use crate::flexfile::FlexFileOptions;

/// Which `TableFile` implementation holds the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TableFileKind {
    /// `NaiveTableFile`: whole file in memory, rewritten on every commit (the baseline).
    Naive,
    /// FlexFile (paper §4).
    FlexFile,
}

impl TableFileKind {
    pub(crate) fn code(self) -> u32 {
        match self {
            TableFileKind::Naive => 0,
            TableFileKind::FlexFile => 1,
        }
    }
}

/// FlexDB's own knobs (the shared ones are in `EngineConfig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlexOptions {
    pub table_file: TableFileKind,
    /// MemTable size that triggers a commit; `None`: a third of the memory budget (64 KiB–256
    /// MiB). At most two MemTables exist (the active one and the one being committed); they
    /// reserve only what they hold, so the interval cache has the rest between commits.
    pub memtable_bytes: Option<u64>,
    /// Interval-cache size; `None`: what the memory budget leaves after the sparse index, the
    /// table file's own structures (FlexTree, buffers) and the MemTables' reservation (what they
    /// hold plus a quarter MemTable, two full ones at most), re-evaluated after every commit and
    /// whenever a write passes the reservation, and at least 1/16 of the budget (`memory.over_budget_bytes` in the stats reports
    /// an index that outgrew the budget).
    pub cache_bytes: Option<u64>,
    /// Intervals are split above this many bytes (§5.1).
    pub max_interval_bytes: u64,
    /// Intervals are split above this many records, into the fewest equal pieces (§5.1). The
    /// paper's experiments use 8 with an interval cache as large as the data. Under a budget of
    /// ~1/5 of the data, larger intervals mean fewer loads per scan and a smaller sparse index,
    /// for slower point reads and more bytes rewritten per commit. 64 by default, chosen side by
    /// side against 32 and 48 (docs/benchmarks.md, "64-record intervals").
    pub max_interval_records: u32,
    /// A scan's cache miss also reads the uncached intervals after it, up to this many bytes in
    /// all, with one table-file read (0: none). Off by default: it cost scans more than it saved
    /// in every measurement (docs/benchmarks.md).
    pub scan_readahead_bytes: u64,
    /// Recovery samples the table file every this many bytes (§5.4); sampled intervals are split
    /// on first access. A larger stride moves cost from the open to the first reads (a first
    /// access loads the whole sampled interval); 8 KiB by default (32 KiB compared in
    /// docs/benchmarks.md).
    pub rebuild_interval_bytes: u64,
    /// MemTable entries the committer applies per hold of the table's write lock: bounds how long
    /// a reader can wait for a commit.
    pub commit_step_entries: usize,
    /// A commit writes an interval again as one extent once its changes would leave it spanning
    /// more table-file extents than this; below, each changed record is inserted or collapsed in
    /// place (§5.1). Low: a cache miss is one device read, for more bytes rewritten per commit.
    pub rewrite_above_extents: u32,
    /// Options of the FlexFile table file (`table_file: FlexFile`).
    pub flexfile: FlexFileOptions,
}

impl Default for FlexOptions {
    fn default() -> Self {
        FlexOptions {
            table_file: TableFileKind::FlexFile,
            memtable_bytes: None,
            cache_bytes: None,
            max_interval_bytes: 16 << 10,
            max_interval_records: 64,
            scan_readahead_bytes: 0,
            rebuild_interval_bytes: 8 << 10,
            commit_step_entries: 256,
            rewrite_above_extents: 2,
            flexfile: FlexFileOptions::default(),
        }
    }
}

impl FlexOptions {
    /// Overrides the FlexDB knobs named in `EngineConfig::engine_options` (each by its field
    /// name; sizes take `64MiB`-style suffixes); refuses unknown names.
    pub fn apply_engine_options(&mut self, config: &EngineConfig) -> Result<()> {
        let mut r = EngineOptionReader::new("flex", &config.engine_options)?;
        // Memory knobs stay within the budget; interval sizes within what the table accepts.
        let budget = config.memory_budget_bytes.max(4 << 10);
        let interval = 1..=table::MAX_CONFIGURED_INTERVAL_BYTES;
        if let Some(v) = r.bytes("memtable_bytes", 4 << 10..=budget)? {
            self.memtable_bytes = Some(v);
        }
        if let Some(v) = r.bytes("cache_bytes", 0..=budget)? {
            self.cache_bytes = Some(v);
        }
        self.max_interval_bytes =
            r.bytes("max_interval_bytes", interval.clone())?.unwrap_or(self.max_interval_bytes);
        let records = r.count("max_interval_records", 2..=u64::from(u16::MAX))?;
        self.max_interval_records = records.map_or(self.max_interval_records, |n| n as u32);
        let readahead = r.bytes("scan_readahead_bytes", 0..=table::MAX_CONFIGURED_INTERVAL_BYTES)?;
        self.scan_readahead_bytes = readahead.unwrap_or(self.scan_readahead_bytes);
        let stride = r.bytes("rebuild_interval_bytes", interval)?;
        self.rebuild_interval_bytes = stride.unwrap_or(self.rebuild_interval_bytes);
        let step = r.count("commit_step_entries", 1..=1 << 20)?;
        self.commit_step_entries = step.map_or(self.commit_step_entries, |n| n as usize);
        // The FlexFile log's bound: a smaller one commits the tree more often (more tree writes,
        // shorter log replay at open).
        let log_max = r.bytes("flexfile_log_max_bytes", 4 << 10..=1 << 30)?;
        self.flexfile.log_max_bytes = log_max.unwrap_or(self.flexfile.log_max_bytes);
        let rewrite = r.count("rewrite_above_extents", 1..=1024)?;
        self.rewrite_above_extents = rewrite.map_or(self.rewrite_above_extents, |n| n as u32);
        // Live data below this share of the used segments makes GC run: higher holds less
        // space for more copying (at most 85: the space cap is 30/32).
        let trigger = r.count("gc_trigger_percent", 0..=85)?;
        self.flexfile.gc_trigger_percent = trigger.unwrap_or(self.flexfile.gc_trigger_percent);
        r.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_options_set_knobs_by_name_and_refuse_unknown_ones() {
        let named =
            |pairs: &[(&str, &str)]| EngineConfig::default().with_engine_options(pairs.iter().copied());
        let mut o = FlexOptions::default();
        o.apply_engine_options(&named(&[("max_interval_records", "64"), ("cache_bytes", "32MiB")])).unwrap();
        assert_eq!(o.max_interval_records, 64);
        assert_eq!(o.cache_bytes, Some(32 << 20));
        assert_eq!(o.max_interval_bytes, FlexOptions::default().max_interval_bytes);
        let err =
            FlexOptions::default().apply_engine_options(&named(&[("interval_records", "64")])).unwrap_err();
        assert!(err.to_string().contains("max_interval_records"), "{err}");
        assert!(FlexOptions::default()
            .apply_engine_options(&named(&[("max_interval_records", "1")]))
            .is_err());
        let mut o = FlexOptions::default();
        o.apply_engine_options(&named(&[("flexfile_log_max_bytes", "16KiB")])).unwrap();
        assert_eq!(o.flexfile.log_max_bytes, 16 << 10);
        assert!(FlexOptions::default()
            .apply_engine_options(&named(&[("flexfile_log_max_bytes", "1KiB")]))
            .is_err());
        let mut o = FlexOptions::default();
        o.apply_engine_options(&named(&[("rewrite_above_extents", "8"), ("gc_trigger_percent", "75")]))
            .unwrap();
        assert_eq!((o.rewrite_above_extents, o.flexfile.gc_trigger_percent), (8, 75));
        for bad in [("rewrite_above_extents", "0"), ("gc_trigger_percent", "90")] {
            assert!(FlexOptions::default().apply_engine_options(&named(&[bad])).is_err(), "{bad:?}");
        }
    }
}
