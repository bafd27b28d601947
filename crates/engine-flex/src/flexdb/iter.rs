//! Range scans: merge the active MemTable, the immutable one and the table file, one table
//! interval (a *window*) at a time. Each window costs one index search, one interval load (a
//! cache hit hands out slices of the cached bytes) and one short MemTable read lock; a record is
//! copied only when the iterator hands it out. Keys come out strictly ordered; the scan as a whole
//! is not a point-in-time snapshot.
//!
//! Why a window is consistent: the table is read first, then the MemTables. A commit moves keys
//! from the immutable MemTable into the table and only then drops the MemTable, bumping
//! `FlexDb::imm_drops` under the `mem` write lock. If that counter did not change between before
//! the table read and the MemTable read, every key the table read missed is still in a MemTable.
//! If it did, the window is read again.
//!
//! Most windows find no MemTable entry. A window's MemTable read also notes the first entry
//! past it (`Ahead`); while the MemTables' `version` is unchanged, a later window that ends
//! before those entries skips the MemTable reads (each a B-tree descent).

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;

use strata_core::{Direction, Key, KeyRange, Result, Value};
use strata_kit::memtable::Ahead;

use super::db::FlexDb;
use super::interval::IntervalData;
use super::table::Resume;

/// MemTable entries per source and window: a window ends at the last one when a MemTable has
/// more in it (a MemTable-only range then goes in windows of this many entries).
const MEM_WINDOW_ENTRIES: usize = 64;

pub(crate) struct MergedRange {
    db: Arc<FlexDb>,
    /// The part of the range no window has covered yet.
    remaining: KeyRange,
    reverse: bool,
    /// The current window's table records not yet handed out: `lo..hi` of `table`.
    table: Option<Arc<IntervalData>>,
    lo: usize,
    hi: usize,
    /// The current window's MemTable entries (active over immutable), in scan order.
    mem: VecDeque<(Key, Option<Value>)>,
    /// No window follows the current one.
    exhausted: bool,
    /// Where the table part of the next window starts, if the index is unchanged by then.
    resume: Option<Resume>,
    /// User bytes handed out and not yet added to the engine's counter.
    unreported_bytes: u64,
    /// What follows the last MemTable read, per MemTable (active, immutable), and the
    /// MemTables' version it holds for.
    mem_ahead: Option<(u64, [Ahead; 2])>,
}

impl MergedRange {
    pub(crate) fn new(db: Arc<FlexDb>, range: KeyRange, direction: Direction) -> Self {
        let exhausted = range.is_empty();
        MergedRange {
            db,
            remaining: range,
            reverse: direction == Direction::Reverse,
            table: None,
            lo: 0,
            hi: 0,
            mem: VecDeque::new(),
            exhausted,
            resume: None,
            unreported_bytes: 0,
            mem_ahead: None,
        }
    }

    /// `a` comes before `b` in scan order.
    fn before(&self, a: &[u8], b: &[u8]) -> bool {
        if self.reverse {
            a > b
        } else {
            a < b
        }
    }

    /// The next table record of the window in scan order.
    fn table_head(&self) -> Option<(&[u8], &[u8])> {
        let data = self.table.as_ref()?;
        if self.lo >= self.hi {
            return None;
        }
        let i = if self.reverse { self.hi - 1 } else { self.lo };
        Some((data.key(i), data.value(i)))
    }

    fn advance_table(&mut self) {
        if self.reverse {
            self.hi -= 1;
        } else {
            self.lo += 1;
        }
    }

    /// The next live entry of the current window, or `None` when the window is used up.
    fn pop_window(&mut self) -> Option<(Key, Value)> {
        loop {
            let from_mem = match (self.table_head(), self.mem.front()) {
                (None, None) => return None,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((tk, _)), Some((mk, _))) => {
                    if tk == mk.as_slice() {
                        self.advance_table(); // shadowed by the MemTable
                        true
                    } else {
                        self.before(mk, tk)
                    }
                }
            };
            if from_mem {
                if let Some((k, Some(v))) = self.mem.pop_front() {
                    return Some((k, v));
                }
                continue; // a tombstone
            }
            let item = self.table_head().map(|(k, v)| (k.to_vec(), v.to_vec()));
            self.advance_table();
            return item;
        }
    }

    /// Reads the next window: one table interval, then the MemTable entries up to its end.
    fn refill(&mut self) -> Result<()> {
        self.report_reads();
        loop {
            let drops_before = self.db.imm_drops.load(SeqCst);
            // Taken: a retry after a commit searches the index again.
            let (window, split_due) = {
                let table = self.db.table.read();
                (
                    table.scan_interval(&self.remaining, self.reverse, self.resume.take())?,
                    table.has_oversized(),
                )
            };
            if split_due {
                self.db.split_oversized_without_waiting();
            }
            // The table holds every record of the range up to `table_bound` (inclusive).
            let table_bound: Option<Key> = window.more.then(|| {
                let i = if self.reverse { window.lo } else { window.hi - 1 };
                window.data.key(i).to_vec()
            });
            let (mut active, mut frozen) = (Vec::new(), Vec::new());
            {
                let mem = self.db.mem.read();
                if self.db.imm_drops.load(SeqCst) != drops_before {
                    continue; // a commit finished in between: the table read may miss keys
                }
                if !self.mem_ends_before_ahead(mem.version, table_bound.as_deref()) {
                    let bounds = self.mem_bounds(table_bound.as_deref());
                    let active_ahead =
                        mem.active.window_into(bounds, self.reverse, MEM_WINDOW_ENTRIES, &mut active);
                    let frozen_ahead = match &mem.imm {
                        Some(imm) => imm.window_into(bounds, self.reverse, MEM_WINDOW_ENTRIES, &mut frozen),
                        None => Ahead::Nothing,
                    };
                    self.mem_ahead = Some((mem.version, [active_ahead, frozen_ahead]));
                }
            }
            // A full MemTable window may stop before the table's: the window ends at the earliest.
            let mut bound = table_bound.clone();
            for source in [&active, &frozen] {
                if source.len() >= MEM_WINDOW_ENTRIES {
                    if let Some((k, _)) = source.last() {
                        if bound.as_ref().is_none_or(|b| self.before(k, b)) {
                            bound = Some(k.clone());
                        }
                    }
                }
            }
            let mut resume = window.resume;
            resume.step_past = bound == table_bound;
            self.resume = Some(resume);
            self.set_window(window.data, window.lo, window.hi, active, frozen, bound);
            return Ok(());
        }
    }

    /// The MemTables held no entry between the last MemTable read and what it noted ahead, and
    /// still do not (same `version`): a window ending at `table_bound` before those entries
    /// holds none. A window without a table bound runs to the range's end and is always read.
    fn mem_ends_before_ahead(&self, version: u64, table_bound: Option<&[u8]>) -> bool {
        let (Some(bound), Some((seen, ahead))) = (table_bound, &self.mem_ahead) else { return false };
        *seen == version
            && ahead.iter().all(|a| match a {
                Ahead::Key(k) => self.before(bound, k),
                Ahead::Nothing => true,
                Ahead::Unknown => false,
            })
    }

    /// The MemTable range of a window: `remaining` cut at `table_bound` (inclusive).
    fn mem_bounds<'a>(&'a self, table_bound: Option<&'a [u8]>) -> (Bound<&'a [u8]>, Bound<&'a [u8]>) {
        let (start, end) = self.remaining.as_bounds();
        match table_bound {
            None => (start, end),
            Some(b) if self.reverse => (Bound::Included(b), end),
            Some(b) => (start, Bound::Included(b)),
        }
    }

    fn set_window(
        &mut self,
        data: Arc<IntervalData>,
        mut lo: usize,
        mut hi: usize,
        active: Vec<(Key, Option<Value>)>,
        frozen: Vec<(Key, Option<Value>)>,
        bound: Option<Key>,
    ) {
        let within = |k: &[u8]| bound.as_deref().is_none_or(|b| !self.before(b, k));
        if let Some(b) = bound.as_deref() {
            if self.reverse {
                lo = lo.max(data.partition_point(|k| k < b)).min(hi);
            } else {
                hi = lo.max(data.partition_point(|k| k <= b)).min(hi);
            }
        }
        let mut merged = VecDeque::with_capacity(active.len() + frozen.len());
        let mut frozen = frozen.into_iter().take_while(|(k, _)| within(k)).peekable();
        for entry in active.into_iter().take_while(|(k, _)| within(k)) {
            while let Some(f) = frozen.next_if(|(fk, _)| self.before(fk, &entry.0)) {
                merged.push_back(f);
            }
            frozen.next_if(|(fk, _)| *fk == entry.0); // shadowed by the active MemTable
            merged.push_back(entry);
        }
        merged.extend(frozen);
        match bound {
            None => self.exhausted = true,
            Some(b) => {
                if self.reverse {
                    self.remaining.end = Bound::Excluded(b);
                } else {
                    self.remaining.start = Bound::Excluded(b);
                }
                self.exhausted = self.remaining.is_empty();
            }
        }
        (self.table, self.lo, self.hi, self.mem) = (Some(data), lo, hi, merged);
    }

    fn report_reads(&mut self) {
        if self.unreported_bytes > 0 {
            self.db.note_read(std::mem::take(&mut self.unreported_bytes));
        }
    }
}

impl Iterator for MergedRange {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((k, v)) = self.pop_window() {
                self.unreported_bytes += (k.len() + v.len()) as u64;
                return Some(Ok((k, v)));
            }
            if self.exhausted {
                self.report_reads();
                return None;
            }
            if let Err(e) = self.db.check_usable().and_then(|()| self.refill()) {
                self.exhausted = true;
                self.table = None;
                self.mem.clear();
                return Some(Err(e));
            }
        }
    }
}

impl Drop for MergedRange {
    fn drop(&mut self) {
        self.report_reads();
    }
}
