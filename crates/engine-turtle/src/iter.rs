//! Range scans: the tables and the tree merged (`strata_kit::sorted_run::MergeIter`), read in
//! chunks (`strata_kit::chunked_range`). A chunk holds no lock while it reads the device: under
//! the tables' read lock it takes the finalized tables (shared, immutable), a copy of the active
//! table's first entries in the range and a copy of the tree (`Inner::read_tree`), then merges
//! them with the lock let go, so writers never wait for a scan's reads.

use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{borrow_bound, Direction, Key, KeyRange, Result, Value};
use strata_kit::chunked_range::{ChunkSizes, ChunkSource};
use strata_kit::sorted_run::{eager, memtable_source, Entry, LazyIter, MergeIter, MergeOutput};

use crate::engine::{Frozen, Inner};
use crate::tree::Tree;

/// Each chunk seeks every run on the path again (a block per level of every node, mostly cached
/// by then), and reads its entries plus the merge's look-ahead from the leaf, whatever the caller
/// takes of them. A first chunk of 32 with doubling refills (32, then 64) reads about 80 entries
/// for a YCSB E scan of 1–100 records against about 110 with a first chunk of 64 (whose 65- to
/// 100-record scans read 192): a leaf block fewer per scan. Measured: E 1.1–1.2× with 12% fewer
/// bytes read per scan (docs/benchmarks.md); 16 read a little less again for more re-seeks.
pub(crate) const CHUNK_SIZES: ChunkSizes = ChunkSizes { first_entries: 32, max_entries: 1024 };

/// What a chunk reads, taken under the tables' read lock.
struct Snapshot {
    /// The active table's first entries in the range, in the direction (tombstones as deletes).
    active: Vec<(Key, Entry)>,
    /// Where `active` was cut short: the merge is right only up to this key (inclusive).
    active_cut: Option<Key>,
    /// Newest first.
    finalized: Vec<Arc<Frozen>>,
    tree: Tree,
}

impl Inner {
    /// The snapshot a chunk reads within `range`: the active table copied up to `limit` entries
    /// (each yields at most one record, so `limit` of them serve a chunk of `limit` records
    /// unless deletes among them hide some).
    fn snapshot(&self, range: &KeyRange, direction: Direction, limit: usize) -> Result<Snapshot> {
        let bounds = (borrow_bound(&range.start), borrow_bound(&range.end));
        let tables = self.tables.read();
        let tree = self.read_tree()?;
        let mut active: Vec<(Key, Entry)> =
            memtable_source(&tables.active, bounds, direction).take(limit + 1).collect::<Result<_>>()?;
        let active_cut = (active.len() > limit).then(|| {
            active.truncate(limit);
            active[limit - 1].0.clone()
        });
        let finalized = tables.finalized.iter().rev().cloned().collect();
        Ok(Snapshot { active, active_cut, finalized, tree })
    }

    /// Up to `limit` records of `snapshot` within `range` (cut at `active_cut`).
    fn merge_snapshot(
        snapshot: &mut Snapshot,
        range: &KeyRange,
        direction: Direction,
        limit: usize,
    ) -> Result<Vec<(Key, Value)>> {
        let (mut lower, mut upper) = (borrow_bound(&range.start), borrow_bound(&range.end));
        if let Some(cut) = &snapshot.active_cut {
            match direction {
                Direction::Forward => upper = Bound::Included(cut.as_slice()),
                Direction::Reverse => lower = Bound::Included(cut.as_slice()),
            }
        }
        // Newest first: the active table, the finalized ones newest first, the tree.
        let active = std::mem::take(&mut snapshot.active).into_iter().map(Ok);
        let mut sources: Vec<LazyIter<'_>> = vec![eager(Box::new(active))];
        for frozen in &snapshot.finalized {
            sources.push(eager(memtable_source(&frozen.table, (lower, upper), direction)));
        }
        sources.push(snapshot.tree.range(lower, upper, direction));
        MergeIter::lazy(sources, direction, MergeOutput::Visible)
            .take(limit)
            .map(|r| r.map(|(k, e)| (k, e.value)))
            .collect()
    }
}

/// `range` past `key` in `direction` (what is left after a part that ended at `key`).
fn past(range: &KeyRange, key: Key, direction: Direction) -> KeyRange {
    match direction {
        Direction::Forward => KeyRange { start: Bound::Excluded(key), end: range.end.clone() },
        Direction::Reverse => KeyRange { start: range.start.clone(), end: Bound::Excluded(key) },
    }
}

impl ChunkSource for Inner {
    fn check_readable(&self) -> Result<()> {
        self.writes.check_usable()
    }

    /// Reads snapshots until `limit` records or the range's end: a snapshot whose active table
    /// was cut short (deletes there hid records) is followed by one past the cut that copies
    /// twice as many of the table's entries.
    fn read_chunk(&self, range: &KeyRange, direction: Direction, limit: usize) -> Result<Vec<(Key, Value)>> {
        let mut chunk: Vec<(Key, Value)> = Vec::with_capacity(limit);
        let mut rest = range.clone();
        let mut active_entries = limit;
        loop {
            let want = limit - chunk.len();
            let mut snapshot = self.snapshot(&rest, direction, active_entries)?;
            active_entries = active_entries.saturating_mul(2);
            let part = Inner::merge_snapshot(&mut snapshot, &rest, direction, want)?;
            let ended_at_cut = part.len() < want;
            chunk.extend(part);
            match snapshot.active_cut {
                Some(cut) if ended_at_cut => rest = past(&rest, cut, direction),
                _ => break,
            }
            if rest.is_empty() {
                break;
            }
        }
        let bytes: usize = chunk.iter().map(|(k, v)| k.len() + v.len()).sum();
        self.counters.user_bytes_read.fetch_add(bytes as u64, Relaxed);
        Ok(chunk)
    }
}
