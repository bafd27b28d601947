//! The committer's half of the table (§5.2): applying sorted MemTable entries to the table file
//! with insert-range, collapse-range and update, one interval at a time, and resizing the
//! interval in the sparse index.

use std::ops::Range;
use std::sync::Arc;

use strata_core::{Error, Result};

use super::{Table, MAX_CONFIGURED_INTERVAL_BYTES};
use crate::flexdb::interval::IntervalData;
use crate::flexdb::record;
use crate::flexdb::sparse_index::{Cursor, IndexKey};

/// A MemTable entry to apply: `None` removes the key.
pub type Entry<'a> = (&'a [u8], Option<&'a [u8]>);

/// One record changed in an interval: `old_len` bytes at `old_at` (inside the old interval;
/// 0 for an insert) become the bytes `new` of the new interval (empty for a removal).
struct Change {
    old_at: usize,
    old_len: usize,
    new: Range<usize>,
}

/// How many leading entries of `entries` (sorted, at least the first) lie below `upper`. A
/// linear scan: groups are short (about one entry per interval), and each entry is looked at
/// once over a whole commit step.
pub(super) fn entries_below(entries: &[Entry<'_>], upper: IndexKey<'_>) -> usize {
    1 + entries.iter().skip(1).take_while(|(k, _)| upper.cmp_slice(k).is_gt()).count()
}

/// How many leading entries of `entries` (at least one) encode to at most `max_bytes` in all.
fn entries_within_bytes(entries: &[Entry<'_>], max_bytes: u64) -> usize {
    let mut total = 0u64;
    let n = entries
        .iter()
        .take_while(|(k, v)| {
            total += record::encoded_len(k, v.unwrap_or_default()) as u64;
            total <= max_bytes
        })
        .count();
    n.max(1)
}

impl Table {
    /// Makes the table hold each entry's value (`None`: no record). `entries` sorted by key,
    /// each key once. Idempotent. Caller holds the write lock. `prefetched`: what `prefetch`
    /// returned for `entries` (or nothing); an interval is read again unless its prefetched
    /// records still match the index. On error the table file and the index may disagree: the
    /// engine poisons itself.
    pub fn apply_sorted(&mut self, entries: &[Entry<'_>], prefetched: &[Arc<IntervalData>]) -> Result<()> {
        let mut rest = entries;
        let mut candidates = prefetched;
        while let Some(&(first, _)) = rest.first() {
            let cur = self.index.seek(first);
            // The entries below the next interval's index key belong to this interval (routing
            // invariant); a huge group goes in parts, so the interval stays far below
            // `MAX_INTERVAL_BYTES` (the split after each part cuts it down again).
            let upper = self.index.next_key(&cur);
            let in_interval = upper.map_or(rest.len(), |u| entries_below(rest, u));
            let in_interval = entries_within_bytes(&rest[..in_interval], MAX_CONFIGURED_INTERVAL_BYTES);
            // Prefetched intervals wholly below this group belong to earlier groups (an empty
            // one is simply read again).
            while candidates.first().is_some_and(|d| d.is_empty() || d.key(d.len() - 1) < first) {
                candidates = candidates.get(1..).unwrap_or_default();
            }
            // A candidate serves one group only: once applied, the interval differs from it even
            // where `still_matches` cannot tell (same size and count), e.g. for the next part of
            // a group cut by bytes.
            let data = match candidates.first() {
                Some(d) if self.still_matches(&cur, d, upper) => {
                    let d = d.clone();
                    candidates = candidates.get(1..).unwrap_or_default();
                    d
                }
                _ => self.load_with(&cur, false)?,
            };
            let (group, tail) = rest.split_at(in_interval);
            self.apply_in_interval(cur, &data, group)?;
            rest = tail;
        }
        Ok(())
    }

    /// `data` (read earlier for the interval at `cur`, whose successor has index key `upper`)
    /// is still its content: only the committer changes intervals, and it has changed only
    /// others since, but splits and merges around them move boundaries, so check.
    fn still_matches(&self, cur: &Cursor, data: &IntervalData, upper: Option<IndexKey<'_>>) -> bool {
        let e = self.index.interval(cur);
        data.bytes().len() as u64 == e.size_bytes()
            && e.count().is_none_or(|c| c as usize == data.len())
            && (data.is_empty() || e.key().cmp_slice(data.key(0)).is_le())
            && (data.is_empty() || upper.is_none_or(|u| u.cmp_slice(data.key(data.len() - 1)).is_gt()))
    }

    /// Applies `group` (sorted, all inside the interval at `cur`): builds the interval's new
    /// records, changes the table file, resizes the index entry, then caches, splits or merges.
    fn apply_in_interval(&mut self, cur: Cursor, data: &IntervalData, group: &[Entry<'_>]) -> Result<()> {
        let extra: usize = group.iter().map(|(k, v)| record::encoded_len(k, v.unwrap_or_default())).sum();
        let mut out = IntervalData::with_capacity(data.bytes().len() + extra, data.len() + group.len());
        let mut changes: Vec<Change> = Vec::new();
        let mut next_old = 0; // old records before this one are in `out` or removed
        for &(key, value) in group {
            let (idx, found) = match data.find(key) {
                Ok(i) => (i, true),
                Err(i) => (i, false),
            };
            while next_old < idx {
                out.push_checked(data, next_old);
                next_old += 1;
            }
            let new_start = out.bytes().len();
            match (found, value) {
                (true, Some(v)) if data.value(idx) == v => {
                    out.push_checked(data, idx);
                    next_old += 1;
                    continue;
                }
                (false, None) => continue,
                (_, Some(v)) => out.push_new(key, v),
                (true, None) => {}
            }
            if found {
                next_old += 1;
            }
            let old_len = if found { data.record_len(idx) } else { 0 };
            changes.push(Change {
                old_at: data.record_start(idx),
                old_len,
                new: new_start..out.bytes().len(),
            });
        }
        while next_old < data.len() {
            out.push_checked(data, next_old);
            next_old += 1;
        }
        if changes.is_empty() {
            return Ok(());
        }
        // The index stores sizes as u32 (`MAX_INTERVAL_BYTES`). Unreachable with the clamped
        // limits (an interval of at most ~2 GiB gets at most 1 GiB of new records), and checked
        // before the table file changes.
        let new_size = u32::try_from(out.bytes().len())
            .map_err(|_| Error::invalid("a commit would grow an interval of the table file beyond 4 GiB"))?;
        // Scans holding a cursor into the old layout must search the index again.
        self.version += 1;
        let interval_offset = self.index.offset(&cur);
        let extents = self.index.interval(&cur).extents();
        // A change inside an extent splits it: an insert or replace adds up to two extents, a
        // removal one. A fragmented interval is written again as one extent instead, so a cache
        // miss costs few device reads (at the price of rewriting up to one interval).
        let added: u32 = changes.iter().map(|c| if c.new.is_empty() { 1 } else { 2 }).sum();
        let new_bytes = out.bytes();
        let extents = if extents.saturating_add(added) > self.config.rewrite_above_extents
            && new_bytes.len() as u64 <= 2 * self.config.max_interval_bytes
        {
            self.file.update(interval_offset, data.bytes().len() as u64, new_bytes)?;
            1
        } else {
            // Back to front, so the old offsets of the changes not yet made stay valid.
            for c in changes.iter().rev() {
                let at = interval_offset + c.old_at as u64;
                let record = new_bytes.get(c.new.clone()).unwrap_or_default();
                match (c.old_len, record.is_empty()) {
                    (0, _) => self.file.insert(at, record)?,
                    (n, true) => self.file.collapse(at, n as u64)?,
                    (n, false) => self.file.update(at, n as u64, record)?,
                }
            }
            extents.saturating_add(added)
        };
        self.index.resize(&cur, new_size, Some(out.len() as u32), extents);
        self.after_change(cur, out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use strata_io::MemStorage;

    use super::super::TableConfig;
    use super::*;
    use crate::flexdb::NaiveTableFile;
    use crate::flexfile::{FlexFile, FlexFileOptions, TableFile};

    #[test]
    fn huge_groups_are_applied_in_parts_of_bounded_bytes() {
        let value = [0u8; 100];
        let entries: Vec<Entry<'_>> =
            [&b"a"[..], b"b", b"c"].iter().map(|k| (*k, Some(&value[..]))).collect();
        let one = record::encoded_len(b"a", &value) as u64;
        assert_eq!(entries_within_bytes(&entries, 2 * one), 2);
        assert_eq!(entries_within_bytes(&entries, 2 * one - 1), 1);
        assert_eq!(entries_within_bytes(&entries, 0), 1, "at least one entry");
        assert_eq!(entries_within_bytes(&entries, u64::MAX), 3);
    }

    /// Random sorted groups (inserts next to replaced and removed keys, unchanged values, empty
    /// values) applied with `apply_sorted` over both table files: every key reads back as in a
    /// model, `verify` passes, and a reopened table (index rebuilt by sampling) agrees.
    #[test]
    fn apply_sorted_groups_match_a_model_on_both_table_files() {
        for flex in [false, true] {
            let storage = Arc::new(MemStorage::new());
            let open_file = |storage: Arc<MemStorage>| -> Arc<dyn TableFile> {
                if flex {
                    Arc::new(FlexFile::open(storage, "t", FlexFileOptions::for_tests()).unwrap())
                } else {
                    Arc::new(NaiveTableFile::open(storage).unwrap())
                }
            };
            let config = TableConfig {
                rewrite_above_extents: 2,
                max_interval_bytes: 512,
                max_interval_records: 8,
                rebuild_interval_bytes: 128,
                cache_bytes: 8 << 10,
                scan_readahead_bytes: 2048,
            };
            let file = open_file(storage.clone());
            let mut table = Table::open(file.clone(), "t".into(), config).unwrap();
            let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
            let mut rng = StdRng::seed_from_u64(7);
            for round in 0..60 {
                let mut batch: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
                for _ in 0..rng.gen_range(1..40) {
                    let k = format!("k{:03}", rng.gen_range(0..300)).into_bytes();
                    let v = match rng.gen_range(0..10) {
                        0..=2 => None,
                        3 => Some(Vec::new()),
                        4 => model.get(&k).cloned(),
                        _ => Some(vec![round as u8; rng.gen_range(1..40)]),
                    };
                    batch.insert(k, v);
                }
                let entries: Vec<Entry<'_>> =
                    batch.iter().map(|(k, v)| (k.as_slice(), v.as_deref())).collect();
                let prefetched = table.prefetch(&entries).unwrap();
                table.apply_sorted(&entries, &prefetched).unwrap();
                table.apply_sorted(&entries, &[]).unwrap(); // idempotent
                for (k, v) in batch {
                    match v {
                        Some(v) => model.insert(k, v),
                        None => model.remove(&k),
                    };
                }
                for i in 0..300 {
                    let k = format!("k{i:03}").into_bytes();
                    assert_eq!(table.get(&k).unwrap().as_ref(), model.get(&k), "flex {flex} round {round}");
                }
                assert_eq!(table.verify().unwrap().0, model.len() as u64);
            }
            table.sync().unwrap();
            drop(table);
            drop(file);
            let reopened = Table::open(open_file(storage), "t".into(), config).unwrap();
            for (k, v) in &model {
                assert_eq!(reopened.get(k).unwrap().as_ref(), Some(v));
            }
        }
    }
}
