//! `MergeIter`: a k-way merge of sorted sources (runs, MemTables) given newest first, forward or
//! in reverse. Per key the newest source's entry wins; a merge operand is folded with the older
//! entries of its key by the engine's `MergeOperator` until a put or a delete (or the end) gives
//! it a base. What comes out depends on who reads (`MergeOutput`): a reader sees values only, a
//! compaction into the bottom drops deletes, a compaction above older data keeps them.
//!
//! The head of every source is compared on each step (k is the number of levels and MemTables,
//! a few dozen at most, where a heap would clone every key it holds).

use std::cmp::Ordering;
use std::sync::Arc;

use strata_core::{Direction, Error, Key, Result};

use super::{Entry, EntryKind};
use crate::memtable::{KeyBounds, MemTable};

/// A sorted source: entries with strictly ascending keys (descending in reverse).
pub type SourceIter<'a> = Box<dyn Iterator<Item = Result<(Key, Entry)>> + Send + 'a>;

/// Resolves merge operands (an engine's partial updates).
pub trait MergeOperator: Send + Sync {
    /// One operand equal to applying `older` and then `newer`.
    fn combine(&self, key: &[u8], older: &[u8], newer: &[u8]) -> Result<Vec<u8>>;
    /// The value `operand` makes of `base` (`None`: no value beneath it).
    fn apply(&self, key: &[u8], base: Option<&[u8]>, operand: &[u8]) -> Result<Vec<u8>>;
}

/// Who reads the merge, which decides what it yields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeOutput {
    /// A reader: values only; deletes hidden, operands applied.
    Visible,
    /// A compaction whose output has nothing older beneath it: deletes dropped, operands applied.
    Bottom,
    /// A compaction above older data: deletes kept, operands combined but not applied.
    Above,
}

/// See the module documentation.
pub struct MergeIter<'a> {
    sources: Vec<SourceIter<'a>>,
    heads: Vec<Option<(Key, Entry)>>,
    direction: Direction,
    output: MergeOutput,
    operator: Option<Arc<dyn MergeOperator>>,
    /// A source failed: yielded next, then the merge ends.
    failed: Option<Error>,
    started: bool,
    done: bool,
}

impl<'a> MergeIter<'a> {
    /// `sources` newest first, each sorted in `direction`.
    pub fn new(sources: Vec<SourceIter<'a>>, direction: Direction, output: MergeOutput) -> MergeIter<'a> {
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

    /// The source whose head comes first in the direction (the newest on a tie).
    fn first_head(&self) -> Option<usize> {
        let mut best: Option<(usize, &[u8])> = None;
        for (i, head) in self.heads.iter().enumerate() {
            let Some((key, _)) = head else { continue };
            let better = match best {
                None => true,
                Some((_, best_key)) => {
                    let order = key.as_slice().cmp(best_key);
                    match self.direction {
                        Direction::Forward => order == Ordering::Less,
                        Direction::Reverse => order == Ordering::Greater,
                    }
                }
            };
            if better {
                best = Some((i, key));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The next key's entries, newest first, every source holding it advanced.
    fn next_key(&mut self) -> Option<(Key, Vec<Entry>)> {
        let first = self.first_head()?;
        let (key, newest) = self.heads[first].take()?;
        self.advance(first);
        let mut entries = vec![newest];
        for i in first + 1..self.heads.len() {
            if self.heads[i].as_ref().is_some_and(|(k, _)| *k == key) {
                if let Some((_, entry)) = self.heads[i].take() {
                    entries.push(entry);
                }
                self.advance(i);
            }
        }
        Some((key, entries))
    }

    /// What the merge yields for one key (`None`: nothing).
    fn resolve(&self, key: &[u8], entries: Vec<Entry>) -> Result<Option<Entry>> {
        let mut entries = entries.into_iter();
        let Some(newest) = entries.next() else { return Ok(None) };
        let resolved = match newest.kind {
            EntryKind::Put | EntryKind::Delete => newest,
            EntryKind::Merge => self.fold_operand(key, newest.value, entries)?,
        };
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
                EntryKind::Put => {
                    return Ok(Entry::put(operator.apply(key, Some(&entry.value), &operand)?))
                }
                EntryKind::Delete => return Ok(Entry::put(operator.apply(key, None, &operand)?)),
                EntryKind::Merge => operand = operator.combine(key, &entry.value, &operand)?,
            }
        }
        Ok(match self.output {
            MergeOutput::Above => Entry::merge(operand),
            MergeOutput::Visible | MergeOutput::Bottom => Entry::put(operator.apply(key, None, &operand)?),
        })
    }
}

impl Iterator for MergeIter<'_> {
    type Item = Result<(Key, Entry)>;

    fn next(&mut self) -> Option<Self::Item> {
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
            let Some((key, entries)) = self.next_key() else {
                if self.failed.is_none() {
                    self.done = true;
                }
                continue;
            };
            match self.resolve(&key, entries) {
                Ok(Some(entry)) => return Some(Ok((key, entry))),
                Ok(None) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// A MemTable's entries within `bounds` as a merge source (a tombstone becomes a delete).
pub fn memtable_source<'a>(
    table: &'a MemTable,
    bounds: KeyBounds<'a>,
    direction: Direction,
) -> SourceIter<'a> {
    let entry = |(key, value): (&[u8], Option<&[u8]>)| {
        Ok((key.to_vec(), value.map_or_else(Entry::delete, |v| Entry::put(v.to_vec()))))
    };
    match direction {
        Direction::Forward => Box::new(table.range(bounds).map(entry)),
        Direction::Reverse => Box::new(table.range(bounds).rev().map(entry)),
    }
}
