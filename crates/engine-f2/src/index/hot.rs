//! The hot-log index (FASTER's hash table): cache-line buckets of seven 8-byte entries plus an
//! overflow-bucket link, updated with compare-and-swap only. An entry names one hash chain: the
//! tag (14 more hash bits) and the log address of the chain's newest record; older records follow
//! through the records' previous-address fields.
//!
//! Entry layout (u64): bit 63 occupied, bit 62 tentative, bits 48..62 tag, bits 0..48 address.
//! A new entry is first published tentative (invisible to lookups); if another entry with the
//! same tag exists in the bucket chain, the newcomer withdraws and retries, so a (bucket, tag)
//! pair never has two entries.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::OnceLock;

const ENTRIES_PER_BUCKET: usize = 7;
const OCCUPIED: u64 = 1 << 63;
const TENTATIVE: u64 = 1 << 62;
const TAG_SHIFT: u32 = 48;
const TAG_MASK: u64 = 0x3fff;
pub const ADDRESS_MASK: u64 = (1 << 48) - 1;
/// Overflow arena segments; segment `i` holds `first_segment_buckets << i` buckets.
const OVERFLOW_SEGMENTS: usize = 40;
/// Overflow segments of the first segment's size before they start doubling (see
/// `HotIndex::overflow_position`): with the first an eighth of the main table, up to twice the
/// main table grows in steps of an eighth.
const EQUAL_OVERFLOW_SEGMENTS: usize = 16;

#[repr(align(64))]
#[derive(Default)]
struct Bucket {
    entries: [AtomicU64; ENTRIES_PER_BUCKET],
    /// 1 + index of the next overflow bucket, or 0.
    overflow: AtomicU64,
}

pub struct HotIndex {
    buckets: Box<[Bucket]>,
    overflow: Vec<OnceLock<Box<[Bucket]>>>,
    overflow_first_segment_buckets: u64,
    overflow_next: AtomicU64,
    /// Buckets of the overflow segments allocated so far.
    overflow_allocated_buckets: AtomicU64,
    /// The index's share of the memory budget; `overrun_bytes` is what it holds beyond it.
    budget_bytes: u64,
}

/// A handle on one entry slot and the value read from it.
#[derive(Clone, Copy)]
pub struct EntryRef<'a> {
    slot: &'a AtomicU64,
    pub value: u64,
}

impl EntryRef<'_> {
    pub fn address(&self) -> u64 {
        self.value & ADDRESS_MASK
    }

    /// Replaces the address if the entry still holds `self.value`; returns the updated handle or
    /// the value found instead.
    pub fn cas_address(&self, new_address: u64) -> Result<u64, u64> {
        let new = (self.value & !ADDRESS_MASK) | (new_address & ADDRESS_MASK);
        self.slot.compare_exchange(self.value, new, SeqCst, SeqCst).map(|_| new)
    }
}

fn tag_of(hash: u64) -> u64 {
    (hash >> TAG_SHIFT) & TAG_MASK
}

fn entry_tag(value: u64) -> u64 {
    (value >> TAG_SHIFT) & TAG_MASK
}

impl HotIndex {
    /// An index of `bucket_count` (rounded up to a power of two, at least 2) buckets, whose
    /// budget is its main table.
    pub fn new(bucket_count: u64) -> HotIndex {
        Self::with_budget_bytes(bucket_count, 0)
    }

    /// An index of `bucket_count` buckets (as `new`) with a memory budget of `budget_bytes` (at
    /// least the main table): overflow buckets beyond it count as `overrun_bytes`.
    pub fn with_budget_bytes(bucket_count: u64, budget_bytes: u64) -> HotIndex {
        let n = bucket_count.max(2).next_power_of_two();
        let buckets = (0..n).map(|_| Bucket::default()).collect();
        HotIndex {
            buckets,
            overflow: (0..OVERFLOW_SEGMENTS).map(|_| OnceLock::new()).collect(),
            overflow_first_segment_buckets: (n / 8).max(16),
            overflow_next: AtomicU64::new(0),
            overflow_allocated_buckets: AtomicU64::new(0),
            budget_bytes: budget_bytes.max(n * 64),
        }
    }

    /// Bytes of memory the index holds (main buckets plus allocated overflow segments).
    pub fn memory_bytes(&self) -> u64 {
        (self.buckets.len() as u64 + self.overflow_allocated_buckets.load(SeqCst)) * 64
    }

    /// Bytes held beyond the index's budget (overflow buckets; they are never freed).
    pub fn overrun_bytes(&self) -> u64 {
        self.memory_bytes().saturating_sub(self.budget_bytes)
    }

    fn home(&self, hash: u64) -> &Bucket {
        let i = (hash & (self.buckets.len() as u64 - 1)) as usize;
        &self.buckets[i]
    }

    fn overflow_bucket(&self, link: u64) -> Option<&Bucket> {
        let index = link.checked_sub(1)?;
        let (segment, offset) = self.overflow_position(index);
        self.overflow.get(segment)?.get()?.get(offset as usize)
    }

    /// Where overflow bucket `index` lives: the first [`EQUAL_OVERFLOW_SEGMENTS`] segments hold
    /// `first` buckets each, the later ones double (2·first, 4·first, …). Overflow buckets are
    /// never freed, so segments that doubled from the start held up to twice the buckets ever
    /// used: 8 MiB of overflow for a load's peak at a 22 MiB budget, taken from the hot log.
    fn overflow_position(&self, index: u64) -> (usize, u64) {
        let first = self.overflow_first_segment_buckets;
        let equal_buckets = first * EQUAL_OVERFLOW_SEGMENTS as u64;
        if index < equal_buckets {
            return ((index / first) as usize, index % first);
        }
        // Segment EQUAL + i covers [2·first·(2^i − 1), 2·first·(2^(i+1) − 1)) past the equal ones.
        let (doubled, past) = (2 * first, index - equal_buckets);
        let segment = 63 - (past / doubled + 1).leading_zeros() as u64;
        let start = doubled * ((1u64 << segment) - 1);
        (EQUAL_OVERFLOW_SEGMENTS + segment as usize, past - start)
    }

    fn overflow_segment_buckets(&self, segment: usize) -> u64 {
        let first = self.overflow_first_segment_buckets;
        match segment.checked_sub(EQUAL_OVERFLOW_SEGMENTS) {
            None => first,
            Some(doublings) => (2 * first) << doublings,
        }
    }

    /// Allocates an overflow bucket; returns its link value (1 + index).
    fn allocate_overflow(&self) -> Option<u64> {
        let index = self.overflow_next.fetch_add(1, SeqCst);
        let (segment, _) = self.overflow_position(index);
        let cell = self.overflow.get(segment)?;
        cell.get_or_init(|| {
            let len = self.overflow_segment_buckets(segment);
            self.overflow_allocated_buckets.fetch_add(len, SeqCst);
            (0..len).map(|_| Bucket::default()).collect()
        });
        Some(index + 1)
    }

    /// Visits the slots of the bucket chain of `hash`; stops when `f` returns `Some`.
    fn for_each_slot<'a, T>(&'a self, hash: u64, mut f: impl FnMut(&'a AtomicU64) -> Option<T>) -> Option<T> {
        let mut bucket = Some(self.home(hash));
        while let Some(b) = bucket {
            for slot in &b.entries {
                if let Some(t) = f(slot) {
                    return Some(t);
                }
            }
            bucket = self.overflow_bucket(b.overflow.load(SeqCst));
        }
        None
    }

    pub fn bucket_count(&self) -> u64 {
        self.buckets.len() as u64
    }

    /// Which entry `hash` maps to, as one number: keys with equal values share an entry (and so
    /// a hash chain); keys with different values never do.
    pub fn entry_id(&self, hash: u64) -> u64 {
        (hash & (self.buckets.len() as u64 - 1)) | (tag_of(hash) << TAG_SHIFT)
    }

    /// A hash that selects home bucket `bucket` and carries `tag` (the entry a snapshot entry
    /// is restored into).
    pub fn hash_for(bucket: u64, tag: u64) -> u64 {
        bucket | ((tag & TAG_MASK) << TAG_SHIFT)
    }

    /// Visits every published entry as (home bucket, tag, address), overflow buckets included.
    pub fn for_each_entry(&self, mut f: impl FnMut(u64, u64, u64)) {
        for (i, home) in self.buckets.iter().enumerate() {
            let mut bucket = Some(home);
            while let Some(b) = bucket {
                for slot in &b.entries {
                    let v = slot.load(SeqCst);
                    if v & OCCUPIED != 0 && v & TENTATIVE == 0 {
                        f(i as u64, entry_tag(v), v & ADDRESS_MASK);
                    }
                }
                bucket = self.overflow_bucket(b.overflow.load(SeqCst));
            }
        }
    }

    /// The (non-tentative) entry for `hash`, if any.
    pub fn find(&self, hash: u64) -> Option<EntryRef<'_>> {
        let tag = tag_of(hash);
        self.for_each_slot(hash, |slot| {
            let value = slot.load(SeqCst);
            (value & OCCUPIED != 0 && value & TENTATIVE == 0 && entry_tag(value) == tag)
                .then_some(EntryRef { slot, value })
        })
    }

    /// The entry for `hash`, creating an empty one (address 0) if there is none.
    pub fn find_or_create(&self, hash: u64) -> EntryRef<'_> {
        let tag = tag_of(hash);
        loop {
            if let Some(found) = self.find(hash) {
                return found;
            }
            let tentative = OCCUPIED | TENTATIVE | (tag << TAG_SHIFT);
            let claimed = self.for_each_slot(hash, |slot| {
                slot.compare_exchange(0, tentative, SeqCst, SeqCst).is_ok().then_some(slot)
            });
            let Some(mine) = claimed else {
                self.extend_chain(hash);
                continue;
            };
            let rival = self.for_each_slot(hash, |slot| {
                let v = slot.load(SeqCst);
                (!std::ptr::eq(slot, mine) && v & OCCUPIED != 0 && entry_tag(v) == tag).then_some(())
            });
            if rival.is_some() {
                mine.store(0, SeqCst);
                std::thread::yield_now();
                continue;
            }
            let value = OCCUPIED | (tag << TAG_SHIFT);
            mine.store(value, SeqCst);
            return EntryRef { slot: mine, value };
        }
    }

    /// Links a new overflow bucket at the end of the bucket chain of `hash`.
    fn extend_chain(&self, hash: u64) {
        let mut bucket = self.home(hash);
        loop {
            let link = bucket.overflow.load(SeqCst);
            if let Some(next) = self.overflow_bucket(link) {
                bucket = next;
                continue;
            }
            let Some(new) = self.allocate_overflow() else { return };
            // Losing the race leaks one arena bucket; the winner's bucket serves both.
            let _ = bucket.overflow.compare_exchange(0, new, SeqCst, SeqCst);
            return;
        }
    }

    /// Clears every entry whose address is below `begin` (after a truncation) and returns how
    /// many. Entries changed concurrently keep their new value. An entry whose address `lost`
    /// says held no record (padding where the truncated range lost records) stops it: `Err` with
    /// that address, the entry kept.
    pub fn invalidate_below(&self, begin: u64, lost: &dyn Fn(u64) -> bool) -> std::result::Result<u64, u64> {
        let mut cleared = 0;
        let overflow = self.overflow.iter().filter_map(|s| s.get()).flat_map(|s| s.iter());
        for bucket in self.buckets.iter().chain(overflow) {
            for slot in &bucket.entries {
                let v = slot.load(SeqCst);
                let address = v & ADDRESS_MASK;
                if v & OCCUPIED != 0 && v & TENTATIVE == 0 && address < begin {
                    if lost(address) {
                        return Err(address);
                    }
                    cleared += u64::from(slot.compare_exchange(v, 0, SeqCst, SeqCst).is_ok());
                }
            }
        }
        Ok(cleared)
    }

    /// Number of occupied entries (for stats and tests).
    pub fn entry_count(&self) -> u64 {
        let overflow = self.overflow.iter().filter_map(|s| s.get()).flat_map(|s| s.iter());
        self.buckets
            .iter()
            .chain(overflow)
            .flat_map(|b| b.entries.iter())
            .filter(|s| s.load(SeqCst) & OCCUPIED != 0)
            .count() as u64
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn hash(bucket: u64, tag: u64) -> u64 {
        (tag << TAG_SHIFT) | bucket
    }

    #[test]
    fn bucket_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Bucket>(), 64);
        assert_eq!(std::mem::align_of::<Bucket>(), 64);
    }

    #[test]
    fn overflow_positions_cover_the_arena() {
        let index = HotIndex::new(2);
        let first = index.overflow_first_segment_buckets;
        assert_eq!(index.overflow_position(0), (0, 0));
        assert_eq!(index.overflow_position(first - 1), (0, first - 1));
        assert_eq!(index.overflow_position(first), (1, 0));
        assert_eq!(index.overflow_position(3 * first), (3, 0));
        let equal = EQUAL_OVERFLOW_SEGMENTS as u64 * first;
        assert_eq!(index.overflow_position(equal - 1), (EQUAL_OVERFLOW_SEGMENTS - 1, first - 1));
        assert_eq!(index.overflow_position(equal), (EQUAL_OVERFLOW_SEGMENTS, 0));
        assert_eq!(index.overflow_position(equal + 2 * first), (EQUAL_OVERFLOW_SEGMENTS + 1, 0));
        // Every index has one position, inside its segment, and the positions run in order.
        let mut last = None;
        for i in 0..equal + 40 * first {
            let (segment, offset) = index.overflow_position(i);
            assert!(offset < index.overflow_segment_buckets(segment), "index {i}");
            if let Some((s, o)) = last {
                assert!((segment, offset) == (s, o + 1) || (segment == s + 1 && offset == 0), "index {i}");
            }
            last = Some((segment, offset));
        }
        // Room for far more overflow than any table needs: a million times the main table.
        let capacity: u64 = (0..OVERFLOW_SEGMENTS).map(|s| index.overflow_segment_buckets(s)).sum();
        assert!(capacity > (1 << 20) * index.bucket_count());
    }

    #[test]
    fn entries_overflow_and_stay_distinct() {
        let index = HotIndex::new(2);
        for tag in 0..40 {
            let e = index.find_or_create(hash(0, tag));
            assert_eq!(e.address(), 0);
            e.cas_address(1000 + tag).unwrap();
        }
        for tag in 0..40 {
            assert_eq!(index.find(hash(0, tag)).unwrap().address(), 1000 + tag);
        }
        assert_eq!(index.entry_count(), 40);
        assert!(index.find(hash(1, 3)).is_none());
        assert_eq!(index.invalidate_below(1020, &|_| false), Ok(20));
        assert!(index.find(hash(0, 5)).is_none());
        assert_eq!(index.find(hash(0, 25)).unwrap().address(), 1025);
    }

    #[test]
    fn stale_cas_fails() {
        let index = HotIndex::new(4);
        let e = index.find_or_create(hash(1, 9));
        e.cas_address(64).unwrap();
        assert_eq!(e.cas_address(128), Err(e.value | 64));
    }

    /// Many threads create entries for the same few tags at once and bump addresses with CAS
    /// loops: every (bucket, tag) ends up with exactly one entry and no increment is lost.
    #[test]
    fn concurrent_create_and_cas_races() {
        let index = Arc::new(HotIndex::new(2));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let index = index.clone();
                std::thread::spawn(move || {
                    for round in 0..2000u64 {
                        let h = hash(round % 2, round % 11);
                        loop {
                            let e = index.find_or_create(h);
                            if e.cas_address(e.address() + 1).is_ok() {
                                break;
                            }
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(index.entry_count(), 22);
        let total: u64 = (0..2)
            .flat_map(|b| (0..11).map(move |t| (b, t)))
            .filter_map(|(b, t)| index.find(hash(b, t)))
            .map(|e| e.address())
            .sum();
        assert_eq!(total, 8 * 2000);
    }
}
