//! `MergeIter`: a k-way merge of sorted sources (runs, MemTables) given newest first, forward or
//! in reverse. Per key the newest source's entry wins; a merge operand is folded with the older
//! entries of its key by the engine's `MergeOperator` until a put or a delete (or the end) gives
//! it a base. What comes out depends on who reads (`MergeOutput`): a reader sees values only, a
//! compaction into the bottom drops deletes, a compaction above older data keeps them.
//!
//! The head of every source is compared on a step (k is the number of levels and MemTables,
//! a few dozen at most, where a heap would clone every key it holds), unless only the first
//! source moved since the last comparison and its new head still comes before the runner-up's:
//! then it is first again with one comparison (a merge mostly takes long stretches from one
//! source, a leaf under a few buffered updates).
//!
//! Lazy sources (`LazyIter`) may yield `Sourced::NotBefore(key)` — nothing before `key` in the
//! direction — instead of opening what lies there (a run's next part, a child's range): the
//! merge opens it only once every other head has reached `key`, so a scan that stops earlier
//! never reads its blocks. A merge is itself a lazy source for an enclosing one
//! (`MergeIter::into_lazy`): when its first head is such a promise it passes it on.

use std::cmp::Ordering;
use std::sync::Arc;

use strata_core::{Direction, Error, Key, Result};

use super::{Entry, EntryKind};

/// A sorted source: entries with strictly ascending keys (descending in reverse).
pub type SourceIter<'a> = Box<dyn Iterator<Item = Result<(Key, Entry)>> + Send + 'a>;

/// What a lazy source yields, in its direction's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sourced {
    Entry(Key, Entry),
    /// No entry comes before this key (in the direction); one at the key itself may.
    NotBefore(Key),
}

impl Sourced {
    fn key(&self) -> &[u8] {
        match self {
            Sourced::Entry(key, _) | Sourced::NotBefore(key) => key,
        }
    }
}

/// A sorted source that may put off reading (`Sourced::NotBefore`).
pub type LazyIter<'a> = Box<dyn Iterator<Item = Result<Sourced>> + Send + 'a>;

/// `source` as a lazy source that never puts anything off.
pub fn eager<'a>(source: SourceIter<'a>) -> LazyIter<'a> {
    Box::new(source.map(|item| item.map(|(key, entry)| Sourced::Entry(key, entry))))
}

/// Resolves merge operands (an engine's partial updates).
pub trait MergeOperator: Send + Sync {
    /// One operand equal to applying `older` and then `newer`.
    fn combine(&self, key: &[u8], older: &[u8], newer: &[u8]) -> Result<Vec<u8>>;
    /// What `operand` makes of `base` (`None`: no value beneath it): a put, a delete (it leaves
    /// the key without a value), or still an operand (a partial value that nothing beneath
    /// completes, which the merge then yields as it is, whoever reads).
    fn apply(&self, key: &[u8], base: Option<&[u8]>, operand: &[u8]) -> Result<Entry>;
}

/// Who reads the merge, which decides what it yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeOutput {
    /// A reader: values; deletes hidden, operands applied (an operand its operator leaves
    /// partial comes out as an operand).
    Visible,
    /// A compaction whose output has nothing older beneath it: deletes dropped, operands applied.
    Bottom,
    /// A compaction above older data: deletes kept, operands combined but not applied.
    Above,
}

/// See the module documentation.
pub struct MergeIter<'a> {
    sources: Vec<LazyIter<'a>>,
    heads: Vec<Option<Sourced>>,
    direction: Direction,
    output: MergeOutput,
    operator: Option<Arc<dyn MergeOperator>>,
    /// A source failed: yielded next, then the merge ends.
    failed: Option<Error>,
    started: bool,
    done: bool,
    /// The last promise passed on (`into_lazy`).
    promised: Option<Key>,
    /// The last comparison's first source and runner-up (`None`: no other head), valid while
    /// no other source has moved.
    order: Option<(usize, Option<usize>)>,
}

impl<'a> MergeIter<'a> {
    /// `sources` newest first, each sorted in `direction`.
    pub fn new(sources: Vec<SourceIter<'a>>, direction: Direction, output: MergeOutput) -> MergeIter<'a> {
        MergeIter::lazy(sources.into_iter().map(eager).collect(), direction, output)
    }

    /// `sources` newest first, each sorted in `direction`, any of them lazy.
    pub fn lazy(sources: Vec<LazyIter<'a>>, direction: Direction, output: MergeOutput) -> MergeIter<'a> {
        let heads = (0..sources.len()).map(|_| None).collect();
        MergeIter {
            sources,
            heads,
            direction,
            output,
            operator: None,
            failed: None,
            started: false,
            done: false,
            promised: None,
            order: None,
        }
    }

    /// Resolves merge operands with `operator` (without one, an operand is an error).
    pub fn with_operator(mut self, operator: Arc<dyn MergeOperator>) -> MergeIter<'a> {
        self.operator = Some(operator);
        self
    }

    fn advance(&mut self, i: usize) {
        self.heads[i] = match self.sources[i].next() {
            Some(Ok(item)) => Some(item),
            Some(Err(e)) => {
                self.failed.get_or_insert(e);
                None
            }
            None => None,
        };
    }

    /// The source whose head comes first in the direction: on a tie a promise before an entry
    /// (what it puts off may hold that key), then the newest.
    fn first_head(&mut self) -> Option<usize> {
        if let Some((first, runner_up)) = self.order {
            if let Some(head) = &self.heads[first] {
                let still_first = runner_up.is_none_or(|r| {
                    self.heads[r].as_ref().is_some_and(|other| self.strictly_before(head, other))
                });
                if still_first {
                    return Some(first);
                }
            }
        }
        let (mut best, mut second): (Option<usize>, Option<usize>) = (None, None);
        for i in 0..self.heads.len() {
            if self.heads[i].is_none() {
                continue;
            }
            if best.is_none_or(|b| self.comes_before(i, b)) {
                second = best;
                best = Some(i);
            } else if second.is_none_or(|s| self.comes_before(i, s)) {
                second = Some(i);
            }
        }
        self.order = best.map(|b| (b, second));
        best
    }

    /// Whether head `i` comes before head `j` (both present; `i` the newer on a tie of kinds).
    fn comes_before(&self, i: usize, j: usize) -> bool {
        let (Some(a), Some(b)) = (&self.heads[i], &self.heads[j]) else { return false };
        match a.key().cmp(b.key()) {
            Ordering::Equal => matches!((a, b), (Sourced::NotBefore(_), Sourced::Entry(..))),
            _ => self.strictly_before(a, b),
        }
    }

    /// Whether `a`'s key comes strictly before `b`'s in the direction.
    fn strictly_before(&self, a: &Sourced, b: &Sourced) -> bool {
        match self.direction {
            Direction::Forward => a.key() < b.key(),
            Direction::Reverse => a.key() > b.key(),
        }
    }

    /// The next key's newest entry and (under a merge operand) its older ones, newest first,
    /// every source holding it advanced; or, when `pass_promises` and the first head is a
    /// promise, that promise (nothing is opened).
    fn next_key(&mut self, pass_promises: bool) -> Option<Next> {
        loop {
            let first = self.first_head()?;
            if let Some(Sourced::NotBefore(key)) = &self.heads[first] {
                // A promise passed on once is opened when the enclosing merge asks again:
                // that it asked means every other head there has reached the key.
                if pass_promises && self.promised.as_ref() != Some(key) {
                    self.promised = Some(key.clone());
                    return Some(Next::NotBefore(key.clone()));
                }
                self.advance(first); // opens what it put off
                if self.failed.is_some() {
                    return None; // the error comes next, before any entry it may have hidden
                }
                continue;
            }
            let Some(Sourced::Entry(key, newest)) = self.heads[first].take() else { return None };
            // Another source holds the key only if the runner-up does (it is the least of the
            // other heads): most steps compare one head, not every one.
            let tied = match self.order {
                Some((_, Some(r))) => self.heads[r].as_ref().is_some_and(|h| h.key() == key.as_slice()),
                Some((_, None)) => false,
                None => true,
            };
            self.advance(first);
            // Older entries matter only under a merge operand: no allocation per key otherwise.
            let keep_older = newest.kind == EntryKind::Merge;
            let mut older = Vec::new();
            for i in (first + 1..self.heads.len()).filter(|_| tied) {
                if self.heads[i].as_ref().is_some_and(|h| h.key() == key.as_slice()) {
                    if let Some(Sourced::Entry(_, entry)) = self.heads[i].take() {
                        if keep_older {
                            older.push(entry);
                        }
                    }
                    self.advance(i);
                    self.order = None; // another source moved: compare every head again
                }
            }
            return Some(Next::Key(key, newest, older));
        }
    }

    /// The next item: an entry, or (when `pass_promises`) a promise.
    fn next_sourced(&mut self, pass_promises: bool) -> Option<Result<Sourced>> {
        if !self.started {
            self.started = true;
            (0..self.sources.len()).for_each(|i| self.advance(i));
        }
        loop {
            if self.done {
                return None;
            }
            if let Some(e) = self.failed.take() {
                self.done = true;
                return Some(Err(e));
            }
            let (key, newest, older) = match self.next_key(pass_promises) {
                Some(Next::Key(key, newest, older)) => (key, newest, older),
                Some(Next::NotBefore(key)) => return Some(Ok(Sourced::NotBefore(key))),
                None => {
                    if self.failed.is_none() {
                        self.done = true;
                    }
                    continue;
                }
            };
            match self.resolve(&key, newest, older) {
                Ok(Some(entry)) => return Some(Ok(Sourced::Entry(key, entry))),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }

    /// This merge as a lazy source of an enclosing merge: it passes on its first head's
    /// promise instead of opening what that puts off.
    pub fn into_lazy(self) -> LazyIter<'a> {
        Box::new(Promising(self))
    }

    /// What the merge yields for one key (`None`: nothing).
    fn resolve(&self, key: &[u8], newest: Entry, older: Vec<Entry>) -> Result<Option<Entry>> {
        let resolved = match newest.kind {
            EntryKind::Put | EntryKind::Delete => newest,
            EntryKind::Merge => self.fold_operand(key, newest.value, older.into_iter())?,
        };
        // A delete an operand's `apply` made is resolved like any other.
        Ok(match (resolved.kind, self.output) {
            (EntryKind::Delete, MergeOutput::Visible | MergeOutput::Bottom) => None,
            _ => Some(resolved),
        })
    }

    /// Folds `operand` with the older entries until one gives it a base.
    fn fold_operand(
        &self,
        key: &[u8],
        mut operand: Vec<u8>,
        older: impl Iterator<Item = Entry>,
    ) -> Result<Entry> {
        let operator = self
            .operator
            .as_ref()
            .ok_or_else(|| Error::invalid("sorted run merge: a merge operand, but no merge operator"))?;
        for entry in older {
            match entry.kind {
                EntryKind::Put => return operator.apply(key, Some(&entry.value), &operand),
                EntryKind::Delete => return operator.apply(key, None, &operand),
                EntryKind::Merge => operand = operator.combine(key, &entry.value, &operand)?,
            }
        }
        Ok(match self.output {
            MergeOutput::Above => Entry::merge(operand),
            MergeOutput::Visible | MergeOutput::Bottom => operator.apply(key, None, &operand)?,
        })
    }
}

/// What `next_key` found.
enum Next {
    /// A key, its newest entry, and its older ones when the newest is a merge operand.
    Key(Key, Entry, Vec<Entry>),
    NotBefore(Key),
}

impl Iterator for MergeIter<'_> {
    type Item = Result<(Key, Entry)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.next_sourced(false)? {
                Ok(Sourced::Entry(key, entry)) => return Some(Ok((key, entry))),
                Ok(Sourced::NotBefore(_)) => continue, // only passed on when asked to
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// A merge that passes its promises on (`MergeIter::into_lazy`).
struct Promising<'a>(MergeIter<'a>);

impl Iterator for Promising<'_> {
    type Item = Result<Sourced>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_sourced(true)
    }
}

/// A MemTable's entries (`MemTable::range`, `VersionedMemTable::range_at`; `None` a tombstone,
/// which becomes a delete) as a merge source in `direction`.
pub fn table_source<'a, I>(entries: I, direction: Direction) -> SourceIter<'a>
where
    I: DoubleEndedIterator<Item = (&'a [u8], Option<&'a [u8]>)> + Send + 'a,
{
    let entry = |(key, value): (&[u8], Option<&[u8]>)| {
        Ok((key.to_vec(), value.map_or_else(Entry::delete, |v| Entry::put(v.to_vec()))))
    };
    match direction {
        Direction::Forward => Box::new(entries.map(entry)),
        Direction::Reverse => Box::new(entries.rev().map(entry)),
    }
}
