//! Scans over the table (§5.3): one interval (a *window*) at a time, resuming from the previous
//! window's cursor while the index is unchanged. A cache miss reads the missed interval together
//! with the uncached intervals that follow it in scan order (logically adjacent in the table file)
//! with one table-file read; the scan keeps those in its `Resume` and caches each one only when it
//! reaches it, so a scan that stops early leaves the cache as it was.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use strata_core::{Error, KeyRange, Result};

use super::{corrupt, Table};
use crate::flexdb::cache::{owned_by, IntervalData};
use crate::flexdb::sparse_index::{Cursor, NO_SLOT};

/// At most this many intervals are read ahead per cache miss.
const MAX_READAHEAD_INTERVALS: usize = 16;

/// One interval of a scan: records `lo..hi` of `data` are in the scanned range.
pub struct TableWindow {
    pub data: Arc<IntervalData>,
    pub lo: usize,
    pub hi: usize,
    /// Intervals with records of the range may follow in scan order; when `true`, `lo < hi` and
    /// the table holds no record of the range between this window and the next one.
    pub more: bool,
    /// Where the next window starts if it begins past this interval.
    pub resume: Resume,
}

/// Where a scan's next window starts, valid while the index is unchanged (same `version`).
pub struct Resume {
    version: u64,
    cursor: Cursor,
    /// The interval at `cursor`, as the window returned it.
    current: Arc<IntervalData>,
    /// Read-ahead: the intervals right after `cursor` in scan order, verified, not yet cached.
    ahead: VecDeque<Arc<IntervalData>>,
    /// Start at the interval after `cursor` in scan order, not at `cursor` itself.
    pub step_past: bool,
}

impl Table {
    /// The first interval in scan order holding records of `range` (or the last one, when none
    /// does): its decoded records and which of them are in `range`. Starts from `resume` (the
    /// previous window of the scan) if the index has not changed since, else searches the index.
    pub fn scan_interval(
        &self,
        range: &KeyRange,
        reverse: bool,
        resume: Option<Resume>,
    ) -> Result<TableWindow> {
        let mut ahead = VecDeque::new();
        let mut current = None;
        let resumed = match resume.filter(|r| r.version == self.version) {
            None => None,
            Some(r) if !r.step_past => {
                current = Some(r.current);
                ahead = r.ahead;
                Some(r.cursor)
            }
            Some(r) => {
                ahead = r.ahead;
                if reverse {
                    self.index.prev(&r.cursor)
                } else {
                    self.index.next(&r.cursor)
                }
            }
        };
        let mut cur = match (resumed, reverse, &range.start, &range.end) {
            (Some(c), ..) => c,
            (None, false, Bound::Included(k) | Bound::Excluded(k), _) => self.index.seek(k),
            (None, false, Bound::Unbounded, _) => self.index.first(),
            (None, true, _, Bound::Included(k) | Bound::Excluded(k)) => self.index.seek(k),
            (None, true, _, Bound::Unbounded) => self.index.last(),
        };
        loop {
            let data = match current.take() {
                Some(d) => d,
                None => self.load_for_scan(&cur, range, reverse, &mut ahead)?,
            };
            let lo = data.partition_point(|k| !range.admits_from_start(k));
            let hi = data.partition_point(|k| range.admits_to_end(k)).max(lo);
            // A record outside the range on the far side means the range ends in this interval.
            let past_the_range = if reverse { lo > 0 } else { hi < data.len() };
            let next = if past_the_range {
                None
            } else if reverse {
                self.index.prev(&cur)
            } else {
                self.index.next(&cur)
            };
            match next {
                Some(n) if lo == hi => cur = n,
                _ => {
                    let resume = Resume {
                        version: self.version,
                        cursor: cur,
                        current: data.clone(),
                        ahead,
                        step_past: true,
                    };
                    return Ok(TableWindow { data, lo, hi, more: next.is_some(), resume });
                }
            }
        }
    }

    /// The interval at `cur`: the front of `ahead` (which holds the intervals from `cur` on, in
    /// scan order, when not empty), cached now; or from the cache; or read from the table file
    /// together with the read-ahead, which goes to `ahead`.
    fn load_for_scan(
        &self,
        cur: &Cursor,
        range: &KeyRange,
        reverse: bool,
        ahead: &mut VecDeque<Arc<IntervalData>>,
    ) -> Result<Arc<IntervalData>> {
        let e = self.index.interval(cur);
        let slot = e.cache_slot().load(Relaxed);
        if let Some(data) = ahead.pop_front() {
            if slot != NO_SLOT {
                if let Some(cached) = self.cache.lock().get(slot, owned_by(e.key())) {
                    return Ok(cached.clone()); // another reader cached it meanwhile
                }
            }
            return Ok(self.cache_loaded(cur, slot, data));
        }
        if self.config.scan_readahead_bytes == 0 {
            return self.load(cur);
        }
        let run = self.readahead_run(cur, range, reverse);
        if run.len() <= 1 {
            return self.load(cur);
        }
        self.cache.lock().count_miss();
        self.interval_loads.fetch_add(1, Relaxed);
        // `run` is in scan order; its byte range is contiguous: intervals tile the file.
        let (first, last) = match reverse {
            false => (cur, run.last().unwrap_or(cur)),
            true => (run.last().unwrap_or(cur), cur),
        };
        let start = self.index.offset(first);
        let end = self.index.offset(last) + self.index.interval(last).size_bytes();
        let total = usize::try_from(end - start).map_err(|_| Error::invalid("read-ahead too large"))?;
        let mut buf = vec![0u8; total];
        let n = self.file.read(start, &mut buf)?;
        if n != total {
            return Err(corrupt(&self.file_name, start + n as u64, "table file ends inside an interval"));
        }
        let mut loaded = Vec::with_capacity(run.len());
        for c in &run {
            let offset = self.index.offset(c);
            let size = self.index.interval(c).size_bytes() as usize;
            let at = (offset - start) as usize;
            let bytes = buf.get(at..at + size).unwrap_or_default().to_vec();
            loaded.push(self.check_interval(c, offset, IntervalData::decode(bytes))?);
        }
        let mut loaded = loaded.into_iter();
        let data = loaded.next().ok_or_else(|| Error::invalid("empty read-ahead"))?;
        ahead.extend(loaded);
        Ok(self.cache_loaded(cur, slot, data))
    }

    /// `cur` (when it is not cached) and the uncached intervals that follow it in scan order and
    /// may hold records of `range`, within the read-ahead budget; empty when `cur` is cached.
    fn readahead_run(&self, cur: &Cursor, range: &KeyRange, reverse: bool) -> Vec<Cursor> {
        let cache = self.cache.lock();
        let cached = |c: &Cursor| {
            let e = self.index.interval(c);
            let slot = e.cache_slot().load(Relaxed);
            slot != NO_SLOT && cache.contains(slot, owned_by(e.key()))
        };
        if cached(cur) {
            return Vec::new();
        }
        let mut run = vec![cur.clone()];
        let mut bytes = self.index.interval(cur).size_bytes();
        while run.len() < MAX_READAHEAD_INTERVALS {
            let Some(last) = run.last() else { break };
            // Reverse: an interval whose index key is below the range holds its last records
            // (earlier intervals hold only keys below it). Forward: one whose index key is above
            // the range holds none (routing invariant).
            if reverse && !self.index.interval(last).key().with_slice(|k| range.admits_from_start(k)) {
                break;
            }
            let next = if reverse { self.index.prev(last) } else { self.index.next(last) };
            let Some(next) = next else { break };
            let e = self.index.interval(&next);
            if (!reverse && !e.key().with_slice(|k| range.admits_to_end(k)))
                || bytes + e.size_bytes() > self.config.scan_readahead_bytes
                || cached(&next)
            {
                break;
            }
            bytes += e.size_bytes();
            run.push(next);
        }
        run
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use strata_core::Key;
    use strata_io::MemStorage;

    use super::*;
    use crate::flexdb::table::TableConfig;
    use crate::flexdb::NaiveTableFile;
    use crate::flexfile::TableFile;

    fn key(i: u32) -> Key {
        format!("k{i:04}").into_bytes()
    }

    fn table(scan_readahead_bytes: u64) -> Table {
        let file: Arc<dyn TableFile> = Arc::new(NaiveTableFile::open(Arc::new(MemStorage::new())).unwrap());
        let config = TableConfig {
            rewrite_above_extents: 2,
            max_interval_bytes: 256,
            max_interval_records: 4,
            rebuild_interval_bytes: 64,
            cache_bytes: 2048,
            scan_readahead_bytes,
        };
        let mut table = Table::open(file, "t".into(), config).unwrap();
        for i in (0..300).filter(|i| i % 7 != 3) {
            table.apply(&key(i), Some(format!("v{i}").as_bytes())).unwrap();
        }
        table
    }

    /// The keys of `range` in scan order, window by window, resuming like `MergedRange` does
    /// (sometimes at the same interval again, as when a MemTable window ends first).
    fn scan(table: &Table, mut range: KeyRange, reverse: bool) -> Vec<Key> {
        let (mut out, mut resume, mut again) = (Vec::new(), None, false);
        loop {
            let w = table.scan_interval(&range, reverse, resume.take()).unwrap();
            let (lo, hi) = (w.lo, w.hi);
            // Every other window hands out only its first record and resumes at the same interval.
            again = !again && hi - lo > 1;
            let (lo, hi) = match (again, reverse) {
                (false, _) => (lo, hi),
                (true, false) => (lo, lo + 1),
                (true, true) => (hi - 1, hi),
            };
            let keys: Vec<Key> = (lo..hi).map(|i| w.data.key(i).to_vec()).collect();
            if reverse {
                out.extend(keys.iter().rev().cloned());
            } else {
                out.extend(keys.iter().cloned());
            }
            if !w.more && !again {
                return out;
            }
            let mut r = w.resume;
            r.step_past = !again;
            resume = Some(r);
            let Some(bound) = (if reverse { keys.first() } else { keys.last() }) else { return out };
            if reverse {
                range.end = Bound::Excluded(bound.clone());
            } else {
                range.start = Bound::Excluded(bound.clone());
            }
        }
    }

    fn range(start: Bound<Key>, end: Bound<Key>) -> KeyRange {
        KeyRange { start, end }
    }

    #[test]
    fn readahead_scans_return_the_same_keys_with_fewer_reads() {
        let (plain, ahead) = (table(0), table(1024));
        let ranges = [
            KeyRange::all(),
            range(Bound::Included(key(10)), Bound::Excluded(key(200))),
            range(Bound::Excluded(key(3)), Bound::Included(key(31))),
            range(Bound::Included(key(250)), Bound::Unbounded),
            range(Bound::Unbounded, Bound::Included(key(17))),
        ];
        for range in ranges {
            for reverse in [false, true] {
                let want = scan(&plain, range.clone(), reverse);
                assert!(!want.is_empty());
                assert_eq!(scan(&ahead, range.clone(), reverse), want, "{range:?} reverse {reverse}");
            }
        }
        let loads = |t: &Table| t.interval_loads.load(Relaxed);
        let (before_plain, before_ahead) = (loads(&plain), loads(&ahead));
        scan(&plain, KeyRange::all(), false);
        scan(&ahead, KeyRange::all(), false);
        let (read_plain, read_ahead) = (loads(&plain) - before_plain, loads(&ahead) - before_ahead);
        assert!(read_ahead * 2 < read_plain, "read-ahead {read_ahead} reads vs {read_plain}");
        assert!(ahead.cache_stats().used_bytes <= 2048);
    }
}
