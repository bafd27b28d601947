//! A leaf: the newest value of every key in its range, no tombstones (a delete that reaches a
//! leaf removes the key: nothing older lies beneath). A batch applied to a leaf merges into it
//! (the whole leaf is read and rewritten); a leaf grown past `leaf_bytes` splits into even parts
//! of at most that size.

use std::ops::Bound;

use strata_core::{Direction, Key, Result, Value};
use strata_kit::sorted_run::{Entry, EntryKind, SourceIter};

use super::run::Run;
use super::{entry_bytes, TreeConfig};

/// See the module documentation.
#[derive(Clone, Debug)]
pub struct Leaf {
    /// Puts only.
    run: Run,
    /// `entry_bytes` of its records.
    bytes: u64,
}

impl Leaf {
    /// A leaf with no records (a new tree's root, a placeholder while a node rebuilds a child).
    pub fn empty() -> Result<Leaf> {
        Ok(Leaf { run: Run::empty()?, bytes: 0 })
    }

    /// A leaf of `run` (puts only) whose records count `bytes` (from its node page).
    pub fn from_run(run: Run, bytes: u64) -> Leaf {
        Leaf { run, bytes }
    }

    pub fn run(&self) -> &Run {
        &self.run
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Value>> {
        Ok(self.run.get(key)?.filter(|e| e.kind == EntryKind::Put).map(|e| e.value))
    }

    /// Its records within the bounds, in `direction`.
    pub fn range<'a>(
        &'a self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        direction: Direction,
    ) -> SourceIter<'a> {
        self.run.iter(lower, upper, direction)
    }

    /// Applies `batch` (sorted, newer than the leaf) and returns the leaf, or its parts when it
    /// grew past `leaf_bytes` (`split_even`): each with its lower key (the first part's is the
    /// leaf's own, `lower`).
    pub fn apply(
        self,
        lower: Key,
        batch: Vec<(Key, Entry)>,
        config: &TreeConfig,
    ) -> Result<Vec<(Key, Leaf)>> {
        Ok(self.apply_counting(lower, batch, config)?.0)
    }

    /// `apply`, and the `entry_bytes` of the batch's entries whose key the leaf held (records
    /// replaced or deleted, where the rest are new keys).
    pub fn apply_counting(
        self,
        lower: Key,
        batch: Vec<(Key, Entry)>,
        config: &TreeConfig,
    ) -> Result<(Vec<(Key, Leaf)>, u64)> {
        let old = self.run.entries()?;
        let mut merged: Vec<(Key, Entry)> = Vec::with_capacity(old.len() + batch.len());
        let mut old = old.into_iter().peekable();
        let mut replaced_bytes = 0;
        for (key, entry) in batch {
            while let Some(item) = old.next_if(|(k, _)| *k < key) {
                merged.push(item);
            }
            if old.next_if(|(k, _)| *k == key).is_some() {
                replaced_bytes += entry_bytes(&key, &entry);
            }
            if entry.kind == EntryKind::Put {
                merged.push((key, entry));
            }
        }
        merged.extend(old);
        Ok((split_even(lower, merged, config)?, replaced_bytes))
    }

    /// Two neighbouring leaves' records (`self` the lower), in order.
    pub fn joined_entries(self, upper: Leaf) -> Result<Vec<(Key, Entry)>> {
        let mut entries = self.run.entries()?;
        entries.extend(upper.run.entries()?);
        Ok(entries)
    }

    /// The leaf's run becomes its written copy, if a checkpoint wrote it.
    pub fn install_written(&mut self) {
        self.run = self.run.written();
    }
}

/// `entries` cut into `⌈bytes / leaf_bytes⌉` parts of about equal size (one part when they
/// fit, or when there is a single entry; a part can pass `leaf_bytes` by less than one entry);
/// the first part's lower key is `lower`, the others' their first key.
pub fn split_even(lower: Key, entries: Vec<(Key, Entry)>, config: &TreeConfig) -> Result<Vec<(Key, Leaf)>> {
    let block_bytes = config.run_block_bytes();
    let leaf = |entries: Vec<(Key, Entry)>, bytes: u64| -> Result<Leaf> {
        Ok(Leaf { run: Run::memory(entries, block_bytes)?, bytes })
    };
    let total: u64 = entries.iter().map(|(k, e)| entry_bytes(k, e)).sum();
    let parts = total.div_ceil(config.leaf_bytes.max(1)).max(1);
    if parts == 1 || entries.len() < 2 {
        return Ok(vec![(lower, leaf(entries, total)?)]);
    }
    let target = total.div_ceil(parts);
    let mut out = Vec::with_capacity(parts as usize);
    let mut current: Vec<(Key, Entry)> = Vec::new();
    let mut current_bytes = 0u64;
    let mut part_lower = lower;
    for (key, entry) in entries {
        let bytes = entry_bytes(&key, &entry);
        if !current.is_empty() && current_bytes + bytes > target && (out.len() as u64) < parts - 1 {
            let next_lower = key.clone();
            let full = leaf(std::mem::take(&mut current), current_bytes)?;
            out.push((std::mem::replace(&mut part_lower, next_lower), full));
            current_bytes = 0;
        }
        current_bytes += bytes;
        current.push((key, entry));
    }
    out.push((part_lower, leaf(current, current_bytes)?));
    Ok(out)
}
