//! Table 1 (§6.1): append N extents to an empty index, look every one up (a full search each
//! time, not a leaf walk), then insert M extents at the front of another empty index. FlexTree
//! against the two indexes the paper compares it with: a B+-tree keyed by absolute offsets (here
//! `BTreeMap`; a front insert rewrites every later key) and a sorted array (`Vec`; a front insert
//! moves and renumbers every element).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use strata_core::Result;

use crate::flextree::{FlexTree, FlexTreeConfig};

/// Every extent is this long; addresses leave gaps (see [`extent_addr`]) so nothing merges.
pub const EXTENT_BYTES: u64 = 100;

/// Physical address of the `i`th extent written: never adjacent to another extent's, so no index
/// merges two extents and the extent count stays what was inserted.
pub fn extent_addr(i: u64) -> u64 {
    i * 2 * EXTENT_BYTES
}

/// An extent index: logical offsets to physical addresses.
pub trait ExtentIndex {
    fn append(&mut self, len_bytes: u64, addr: u64) -> Result<()>;
    fn insert_front(&mut self, len_bytes: u64, addr: u64) -> Result<()>;
    /// Physical address of logical `offset`; `None` past the end.
    fn lookup(&self, offset: u64) -> Option<u64>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexKind {
    FlexTree,
    /// The paper's B+-tree: absolute offsets as keys.
    BTreeMap,
    /// The paper's sorted array.
    SortedVec,
}

impl IndexKind {
    pub const ALL: [IndexKind; 3] = [IndexKind::FlexTree, IndexKind::BTreeMap, IndexKind::SortedVec];

    pub fn name(self) -> &'static str {
        match self {
            IndexKind::FlexTree => "FlexTree",
            IndexKind::BTreeMap => "BTreeMap",
            IndexKind::SortedVec => "sorted Vec",
        }
    }

    /// A front insert costs O(N) (the whole index moves), so large counts are extrapolated.
    pub fn front_insert_is_linear(self) -> bool {
        self != IndexKind::FlexTree
    }
}

pub fn new_index(kind: IndexKind) -> Result<Box<dyn ExtentIndex>> {
    Ok(match kind {
        IndexKind::FlexTree => Box::new(Flex(FlexTree::new(FlexTreeConfig::default())?)),
        IndexKind::BTreeMap => Box::new(Btree::default()),
        IndexKind::SortedVec => Box::new(Sorted::default()),
    })
}

struct Flex(FlexTree);

impl ExtentIndex for Flex {
    fn append(&mut self, len_bytes: u64, addr: u64) -> Result<()> {
        self.0.append(len_bytes, addr)
    }
    fn insert_front(&mut self, len_bytes: u64, addr: u64) -> Result<()> {
        self.0.insert(0, len_bytes, addr)
    }
    fn lookup(&self, offset: u64) -> Option<u64> {
        self.0.find(offset).map(|e| e.addr + (offset - e.offset))
    }
}

/// offset -> (len, addr), plus the logical end.
#[derive(Default)]
struct Btree(BTreeMap<u64, (u64, u64)>, u64);

impl ExtentIndex for Btree {
    fn append(&mut self, len_bytes: u64, addr: u64) -> Result<()> {
        self.0.insert(self.1, (len_bytes, addr));
        self.1 += len_bytes;
        Ok(())
    }
    fn insert_front(&mut self, len_bytes: u64, addr: u64) -> Result<()> {
        // Every key after the insert point changes: the map is rebuilt, as the paper's B+-tree
        // rewrites every node.
        let old = std::mem::take(&mut self.0);
        self.0 = old.into_iter().map(|(k, v)| (k + len_bytes, v)).collect();
        self.0.insert(0, (len_bytes, addr));
        self.1 += len_bytes;
        Ok(())
    }
    fn lookup(&self, offset: u64) -> Option<u64> {
        let (start, (len, addr)) = self.0.range(..=offset).next_back()?;
        (offset < start + len).then(|| addr + (offset - start))
    }
}

/// Sorted (offset, len, addr), plus the logical end.
#[derive(Default)]
struct Sorted(Vec<(u64, u64, u64)>, u64);

impl ExtentIndex for Sorted {
    fn append(&mut self, len_bytes: u64, addr: u64) -> Result<()> {
        self.0.push((self.1, len_bytes, addr));
        self.1 += len_bytes;
        Ok(())
    }
    fn insert_front(&mut self, len_bytes: u64, addr: u64) -> Result<()> {
        self.0.insert(0, (0, len_bytes, addr));
        for e in self.0.iter_mut().skip(1) {
            e.0 += len_bytes;
        }
        self.1 += len_bytes;
        Ok(())
    }
    fn lookup(&self, offset: u64) -> Option<u64> {
        let i = self.0.partition_point(|e| e.0 <= offset).checked_sub(1)?;
        let (start, len, addr) = *self.0.get(i)?;
        (offset < start + len).then(|| addr + (offset - start))
    }
}

/// How many operations of each kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Table1Sizes {
    /// Appended, then each looked up once.
    pub appends: u64,
    /// Front inserts FlexTree runs, and the count the baselines' totals are given for.
    pub front_inserts: u64,
    /// Front inserts the O(N)-per-insert baselines actually run (at most `front_inserts`); their
    /// total for `front_inserts` is extrapolated quadratically from it.
    pub baseline_front_inserts: u64,
}

/// One index's row of Table 1.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexTimes {
    pub kind: IndexKind,
    pub appends: u64,
    pub append_secs: f64,
    pub lookup_secs: f64,
    /// Lookups (one per appended extent) that returned the extent's address: `appends` when right.
    pub lookups_correct: u64,
    /// Front inserts run and timed.
    pub front_inserts_measured: u64,
    pub front_measured_secs: f64,
    /// Lookups after the front inserts that found the extents in reverse insertion order.
    pub front_lookups_correct: u64,
    /// Time for `Table1Sizes::front_inserts`: measured, or extrapolated when fewer were run.
    pub front_total_secs: f64,
    pub front_extrapolated: bool,
}

/// Runs the three experiments on every index in [`IndexKind::ALL`], one index in memory at a time.
pub fn run_table1(sizes: Table1Sizes) -> Result<Vec<IndexTimes>> {
    IndexKind::ALL.iter().map(|&kind| run_one(kind, sizes)).collect()
}

fn run_one(kind: IndexKind, sizes: Table1Sizes) -> Result<IndexTimes> {
    let (append_secs, lookup_secs, lookups_correct) = append_then_lookup(kind, sizes.appends)?;
    let fronts = if kind.front_insert_is_linear() {
        sizes.baseline_front_inserts.min(sizes.front_inserts)
    } else {
        sizes.front_inserts
    };
    let (front_measured_secs, front_lookups_correct) = insert_at_front(kind, fronts)?;
    // O(N) per insert: the total for n inserts grows as n^2.
    let ratio = sizes.front_inserts as f64 / fronts.max(1) as f64;
    let front_extrapolated = fronts < sizes.front_inserts;
    Ok(IndexTimes {
        kind,
        appends: sizes.appends,
        append_secs,
        lookup_secs,
        lookups_correct,
        front_inserts_measured: fronts,
        front_measured_secs,
        front_lookups_correct,
        front_total_secs: if front_extrapolated {
            front_measured_secs * ratio * ratio
        } else {
            front_measured_secs
        },
        front_extrapolated,
    })
}

/// (append seconds, lookup seconds, lookups that found the right address).
fn append_then_lookup(kind: IndexKind, appends: u64) -> Result<(f64, f64, u64)> {
    let mut index = new_index(kind)?;
    let started = Instant::now();
    for i in 0..appends {
        index.append(EXTENT_BYTES, extent_addr(i))?;
    }
    let append_secs = started.elapsed().as_secs_f64();
    // A point inside each extent, so every lookup has to resolve an offset within an extent.
    let started = Instant::now();
    let mut correct = 0u64;
    for i in 0..appends {
        let found = index.lookup(i * EXTENT_BYTES + 7);
        correct += u64::from(found == Some(extent_addr(i) + 7));
    }
    let lookup_secs = started.elapsed().as_secs_f64();
    black_box(&index);
    Ok((append_secs, lookup_secs, correct))
}

/// (seconds for `count` front inserts, extents then found where they belong).
fn insert_at_front(kind: IndexKind, count: u64) -> Result<(f64, u64)> {
    let mut index = new_index(kind)?;
    let started = Instant::now();
    for i in 0..count {
        index.insert_front(EXTENT_BYTES, extent_addr(i))?;
    }
    let secs = started.elapsed().as_secs_f64();
    // Untimed check: the last inserted extent is first, so logical extent k is insert count-1-k.
    let correct = (0..count)
        .filter(|k| index.lookup(k * EXTENT_BYTES) == Some(extent_addr(count - 1 - k)))
        .count() as u64;
    Ok((secs, correct))
}
