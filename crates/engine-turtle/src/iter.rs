//! Range scans, point-in-time and streaming. A scan takes a `View` when it starts (the tables
//! and a copy of the tree as of the last applied write, its lsn registered so the active table
//! keeps the versions it reads) and holds it until it is dropped. The view's finalized tables
//! and tree never change, so one merge of them (`Older`) runs the whole scan, read one entry at
//! a time as the caller asks, never sought again and never read past what is returned. Only
//! the active table changes under the scan: it is copied a window at a time, under its read
//! lock and as of the view's lsn, each window at most `n` entries (8 doubling to 1,024), never
//! across a device read. An entry comes out once both streams have reached it: the window ends
//! (when cut at its size) at its last key, and an older entry past that end waits for the next
//! window. A key in the window hides the older one; deletes come out of neither.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::iter::Peekable;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use self_cell::self_cell;
use strata_core::{borrow_bound, Direction, Key, KeyRange, Result, Value};
use strata_kit::sorted_run::{eager, table_source, Entry, EntryKind, LazyIter, MergeIter, MergeOutput};
use strata_kit::versioned_memtable::VersionedMemTable;

use crate::engine::Inner;
use crate::tree::Tree;
use strata_kit::tables::TablesView;

/// Entries of the first active-table window; each next one doubles, up to `MAX_WINDOW`.
const FIRST_WINDOW: usize = 8;
const MAX_WINDOW: usize = 1024;

/// Records returned before the engine's state is checked again (then twice as many, up to
/// `MAX_CHECK_EVERY`): a scan begun before a failed write stops with the poison.
const FIRST_CHECK: usize = 32;
const MAX_CHECK_EVERY: usize = 1024;

/// The store as of one write: the tables then (kit `TablesView`), and the tree then.
pub(crate) struct View {
    tables: TablesView,
    tree: Tree,
}

impl Inner {
    /// The store as of now: under the tables' read lock (the tree then holds exactly the
    /// tables that left the list), the active table's last lsn registered (`Tables::view`).
    pub(crate) fn view(&self) -> Result<View> {
        let tables = self.tables.read();
        Ok(View { tables: tables.view(&self.snapshots), tree: self.read_tree()? })
    }
}

/// What the older layers' merge borrows: the view and the scan's bounds.
struct Owner {
    view: View,
    range: KeyRange,
}

type OlderMerge<'a> = Peekable<MergeIter<'a>>;

self_cell!(
    /// The view's finalized tables and tree merged over the scan's range, deletes kept.
    struct Older {
        owner: Owner,
        #[not_covariant]
        dependent: OlderMerge,
    }
);

fn older_layers(view: View, range: KeyRange, direction: Direction) -> Older {
    Older::new(Owner { view, range }, |o| {
        let (lower, upper) = (borrow_bound(&o.range.start), borrow_bound(&o.range.end));
        let mut sources: Vec<LazyIter<'_>> = Vec::with_capacity(o.view.tables.finalized.len() + 1);
        for frozen in &o.view.tables.finalized {
            let entries = frozen.entries.range_at((lower, upper), o.view.tables.lsn);
            sources.push(eager(table_source(entries, direction)));
        }
        sources.push(o.view.tree.range(lower, upper, direction));
        MergeIter::lazy(sources, direction, MergeOutput::Above).peekable()
    })
}

/// The active table's entries as of the view, copied a window at a time.
struct Window {
    entries: VecDeque<(Key, Entry)>,
    /// Where the last copy was cut at its size (its last key): nothing past it is known yet.
    /// `None` once a copy reached the range's end.
    cut_at: Option<Key>,
    started: bool,
    next_size: usize,
}

/// `key` against `other` in scan order.
fn scan_order(key: &[u8], other: &[u8], direction: Direction) -> Ordering {
    match direction {
        Direction::Forward => key.cmp(other),
        Direction::Reverse => other.cmp(key),
    }
}

impl Window {
    /// Whether the (empty) window must be copied further before the older head, at `older`
    /// (`None`: the older layers are done), may come out.
    fn needs_copy(&self, older: Option<&[u8]>, direction: Direction) -> bool {
        match (&self.cut_at, older) {
            _ if !self.started => true,
            (None, _) => false,
            (Some(_), None) => true,
            (Some(cut), Some(key)) => scan_order(key, cut, direction) == Ordering::Greater,
        }
    }

    /// The next window: the view's active table past the last cut, within the range.
    fn copy(&mut self, view: &View, range: &KeyRange, direction: Direction) -> Result<()> {
        let n = self.next_size;
        self.next_size = (n * 2).min(MAX_WINDOW);
        let (mut lower, mut upper) = (borrow_bound(&range.start), borrow_bound(&range.end));
        if let Some(cut) = &self.cut_at {
            match direction {
                Direction::Forward => lower = Bound::Excluded(cut),
                Direction::Reverse => upper = Bound::Excluded(cut),
            }
        }
        let copy = |entries: &VersionedMemTable| -> Result<Vec<(Key, Entry)>> {
            let source = table_source(entries.range_at((lower, upper), view.tables.lsn), direction);
            source.take(n + 1).collect()
        };
        let active = view.tables.active.read();
        let mut copied = match active.frozen.clone() {
            // Finalized since the view was taken: immutable now, read with no lock.
            Some(frozen) => {
                drop(active);
                copy(&frozen.entries)?
            }
            None => copy(&active.entries)?,
        };
        self.started = true;
        self.cut_at = if copied.len() > n {
            copied.truncate(n);
            copied.last().map(|(k, _)| k.clone())
        } else {
            None
        };
        self.entries = copied.into();
        Ok(())
    }
}

/// What comes next in a scan.
enum Next {
    Window,
    /// The older head, and the window's head of the same key hides it.
    WindowHidingOlder,
    Older,
    CopyWindow,
    End,
}

/// See the module documentation.
pub(crate) struct TurtleScan {
    inner: Arc<Inner>,
    older: Older,
    direction: Direction,
    window: Window,
    returned: usize,
    next_check: usize,
    check_every: usize,
    bytes_returned: u64,
    done: bool,
}

impl TurtleScan {
    pub(crate) fn new(inner: Arc<Inner>, range: KeyRange, direction: Direction) -> Result<TurtleScan> {
        let view = inner.view()?;
        let window =
            Window { entries: VecDeque::new(), cut_at: None, started: false, next_size: FIRST_WINDOW };
        let done = range.is_empty();
        Ok(TurtleScan {
            inner,
            older: older_layers(view, range, direction),
            direction,
            window,
            returned: 0,
            next_check: FIRST_CHECK,
            check_every: FIRST_CHECK,
            bytes_returned: 0,
            done,
        })
    }

    /// The next entry in scan order, a delete included; `None` at the range's end.
    fn next_entry(&mut self) -> Result<Option<(Key, Entry)>> {
        let (direction, window) = (self.direction, &mut self.window);
        self.older.with_dependent_mut(|owner, older| loop {
            let next = match (window.entries.front(), older.peek()) {
                (_, Some(Err(_))) => return older.next().transpose(),
                (None, head) => {
                    let head = head.map(|item| item.as_ref().map_or(&[][..], |(k, _)| k.as_slice()));
                    match (window.needs_copy(head, direction), head) {
                        (true, _) => Next::CopyWindow,
                        (false, None) => Next::End,
                        (false, Some(_)) => Next::Older,
                    }
                }
                (Some(_), None) => Next::Window,
                (Some((w, _)), Some(Ok((o, _)))) => match scan_order(w, o, direction) {
                    Ordering::Less => Next::Window,
                    Ordering::Equal => Next::WindowHidingOlder,
                    Ordering::Greater => Next::Older,
                },
            };
            match next {
                Next::CopyWindow => window.copy(&owner.view, &owner.range, direction)?,
                Next::End => return Ok(None),
                Next::Older => return older.next().transpose(),
                Next::WindowHidingOlder => {
                    older.next().transpose()?;
                    return Ok(window.entries.pop_front());
                }
                Next::Window => return Ok(window.entries.pop_front()),
            }
        })
    }

    /// Every so many records: the engine still readable (not closed, not poisoned).
    fn check_if_due(&mut self) -> Result<()> {
        if self.returned < self.next_check {
            return Ok(());
        }
        self.check_every = (self.check_every * 2).min(MAX_CHECK_EVERY);
        self.next_check = self.returned + self.check_every;
        self.count_bytes();
        self.inner.writes.check_usable()
    }

    fn count_bytes(&mut self) {
        let bytes = std::mem::take(&mut self.bytes_returned);
        self.inner.counters.user_bytes_read.fetch_add(bytes, Relaxed);
    }
}

impl Iterator for TurtleScan {
    type Item = Result<(Key, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let next = self.check_if_due().and_then(|()| self.next_entry());
            match next {
                Ok(Some((key, entry))) if entry.kind == EntryKind::Put => {
                    self.returned += 1;
                    self.bytes_returned += (key.len() + entry.value.len()) as u64;
                    return Some(Ok((key, entry.value)));
                }
                Ok(Some(_)) => {} // a delete
                Ok(None) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        None
    }
}

impl Drop for TurtleScan {
    fn drop(&mut self) {
        self.count_bytes();
    }
}
