//! Why flex's device bytes moved (issue 35, item 1): every file flex opens is counted under a
//! kind chosen from its name (`strata_kit::io_cause::CountedStorage`), and each thread's reads
//! and writes under the cause of the work it is doing. `Stats` reports
//! `io.<kind>.<cause>.{reads,read_bytes,writes,write_bytes}`; `strata bench` prints them.

use std::sync::Arc;

use strata_io::Storage;
use strata_kit::io_cause::{self, CauseGuard, CountedStorage};

/// File kinds, indexed as `kind_of` returns them: the FlexFile's data segments, its FlexTree
/// pages and its operation log (the naive table file counts as data), the shared WAL, the
/// commit record.
pub const KINDS: &[&str] = &["data", "tree", "log", "wal", "meta"];

/// What a thread is doing, indexed as `CAUSE_NAMES`; a thread that entered none counts as
/// cause 0, `user` (gets, scans and the WAL appends of writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoCause {
    /// A commit: the immutable MemTable's intervals read and written back, the FlexFile log
    /// and tree commits it causes, the commit record.
    Commit = 1,
    /// FlexFile garbage collection: live extents of victim segments read and relocated.
    Gc = 2,
    /// Recovery at open: the commit record, the FlexTree and its log, the sampled table, the WAL.
    Open = 3,
}

/// The causes' names in `io.<kind>.<cause>.*`.
pub const CAUSE_NAMES: &[&str] = &["user", "commit", "gc", "open"];

impl IoCause {
    /// This thread counts under `self` until the guard is dropped.
    pub fn enter(self) -> CauseGuard {
        io_cause::enter(self as usize)
    }
}

/// The kind of the file named `name` (an index into `KINDS`).
fn kind_of(name: &str) -> usize {
    // The WAL's segments end in `.log` too.
    let kind = if name.starts_with("flexdb-wal-") {
        "wal"
    } else if name.ends_with(".data") || name.ends_with(".table") {
        "data"
    } else if name.ends_with(".tree") {
        "tree"
    } else if name.ends_with(".log") {
        "log"
    } else {
        "meta"
    };
    KINDS.iter().position(|k| *k == kind).unwrap_or(KINDS.len() - 1)
}

/// `storage` with every file flex opens counted by kind and cause.
pub fn counted(storage: Arc<dyn Storage>) -> Arc<CountedStorage> {
    Arc::new(CountedStorage::new(storage, KINDS, kind_of))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_map_to_their_kinds() {
        let kind = |name: &str| KINDS[kind_of(name)];
        assert_eq!(kind("flexdb-table.data"), "data");
        assert_eq!(kind("flexdb-table.tree"), "tree");
        assert_eq!(kind("flexdb-table.log"), "log");
        assert_eq!(kind("flexdb-wal-00000000000000000001.log"), "wal");
        assert_eq!(kind("flexdb-meta"), "meta");
        assert_eq!(kind("flexdb-naive.table"), "data");
    }
}
