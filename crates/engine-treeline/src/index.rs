//! The in-memory index (paper §4.3): each segment's lower bound → where it lives and how its keys
//! map to pages. Segments tile the key space: the first lower bound is the empty key and each
//! segment ends where the next begins. Overflow pages are in the index (not only in their base
//! pages' headers), so the free list is derived from the index alone, a point read knows both
//! page ids at once, and a crash never needs the page headers to find them.
//!
//! The index's byte form (inside `treeline-checkpoint`, docs/format/treeline.md) is encoded and
//! decoded here; decoding untrusted bytes never panics.

use std::collections::BTreeMap;
use std::ops::Bound;

use smallvec::SmallVec;
use strata_core::{Error, Key, Result};

use crate::free_space::{PageId, SegmentSlot, RESERVED_PAGES};
use crate::key_projection::common_prefix;
use crate::model::SegmentModel;
use crate::page::layout::is_segment_page_count;

/// One segment: `pages` base pages from `first_page`, the model that picks one of them, and the
/// overflow page of each base page (0 = none).
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentEntry {
    pub first_page: PageId,
    pub pages: u8,
    pub model: Option<SegmentModel>,
    pub production_id: u64,
    pub overflow: SmallVec<[PageId; 2]>,
}

impl SegmentEntry {
    pub fn new(slot: SegmentSlot, model: Option<SegmentModel>, production_id: u64) -> SegmentEntry {
        let overflow = std::iter::repeat_n(0, usize::from(slot.pages)).collect();
        SegmentEntry { first_page: slot.first_page, pages: slot.pages, model, production_id, overflow }
    }

    pub fn slot(&self) -> SegmentSlot {
        SegmentSlot { first_page: self.first_page, pages: self.pages }
    }

    /// The base page (0..pages) the model picks for `key`.
    pub fn page_index_for(&self, key: &[u8]) -> usize {
        self.model.map_or(0, |m| m.page_for_key(key)).min(usize::from(self.pages).saturating_sub(1))
    }

    /// Page id of base page `index`.
    pub fn base_page(&self, index: usize) -> PageId {
        self.first_page + index as u64
    }

    /// Overflow page of base page `index`, if any.
    pub fn overflow_of(&self, index: usize) -> Option<PageId> {
        self.overflow.get(index).copied().filter(|&id| id != 0)
    }

    pub fn has_overflow(&self) -> bool {
        self.overflow.iter().any(|&id| id != 0)
    }

    /// Bytes the entry holds in memory (with its key of `key_len` bytes), for the budget.
    pub fn memory_bytes(&self, key_len: usize) -> u64 {
        (key_len + 96 + 8 * self.overflow.len()) as u64
    }
}

/// Encoded bytes of an index entry besides its lower bound, model and overflow ids: lower
/// length, first page, pages, has-model, model prefix length, production id (`Index::encode`).
const ENTRY_FIXED_BYTES: usize = 2 + 8 + 1 + 1 + 2 + 8;
/// Encoded bytes of a model: base, slope bits, intercept bits.
const MODEL_BYTES: usize = 3 * 8;

/// The index: lower bound → segment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Index {
    map: BTreeMap<Key, SegmentEntry>,
    /// Sums over `map`, kept by every change: a reorganization reads them, and a walk of tens
    /// of thousands of segments per reorganization was most of a 1 KiB put load's CPU.
    totals: Totals,
}

/// What the segments of an index add up to.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Totals {
    base_pages: u64,
    overflow_pages: u64,
    memory_bytes: u64,
}

impl Totals {
    fn add(&mut self, lower: &[u8], entry: &SegmentEntry) {
        self.base_pages += u64::from(entry.pages);
        self.overflow_pages += entry.overflow.iter().filter(|&&o| o != 0).count() as u64;
        self.memory_bytes += entry.memory_bytes(lower.len());
    }

    fn subtract(&mut self, lower: &[u8], entry: &SegmentEntry) {
        self.base_pages -= u64::from(entry.pages);
        self.overflow_pages -= entry.overflow.iter().filter(|&&o| o != 0).count() as u64;
        self.memory_bytes -= entry.memory_bytes(lower.len());
    }
}

/// Where a key lives: its segment (by lower bound and upper bound) and base page.
#[derive(Clone, Debug, PartialEq)]
pub struct Location {
    pub lower: Key,
    pub upper: Option<Key>,
    pub entry: SegmentEntry,
    pub page_index: usize,
}

impl Location {
    pub fn base_page(&self) -> PageId {
        self.entry.base_page(self.page_index)
    }

    pub fn overflow(&self) -> Option<PageId> {
        self.entry.overflow_of(self.page_index)
    }
}

impl Index {
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Base pages and overflow pages the segments reference.
    pub fn page_counts(&self) -> (u64, u64) {
        (self.totals.base_pages, self.totals.overflow_pages)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Key, &SegmentEntry)> {
        self.map.iter()
    }

    pub fn insert(&mut self, lower: Key, entry: SegmentEntry) {
        self.totals.add(&lower, &entry);
        if let Some(old) = self.map.insert(lower.clone(), entry) {
            self.totals.subtract(&lower, &old);
        }
    }

    pub fn remove(&mut self, lower: &[u8]) -> Option<SegmentEntry> {
        let old = self.map.remove(lower)?;
        self.totals.subtract(lower, &old);
        Some(old)
    }

    /// Links overflow page `id` to base page `page_index` of the segment starting at `lower`;
    /// `false` if there is no such segment or page.
    pub fn set_overflow(&mut self, lower: &[u8], page_index: usize, id: PageId) -> bool {
        let Some(slot) = self.map.get_mut(lower).and_then(|e| e.overflow.get_mut(page_index)) else {
            return false;
        };
        // Only the count of linked overflow pages changes (memory bytes follow the page count).
        self.totals.overflow_pages = self.totals.overflow_pages - u64::from(*slot != 0) + u64::from(id != 0);
        *slot = id;
        true
    }

    /// The segment holding `key` (the last lower bound `<= key`), with its upper bound.
    pub fn segment_of(&self, key: &[u8]) -> Option<(&Key, &SegmentEntry, Option<&Key>)> {
        let (lower, entry) =
            self.map.range::<[u8], _>((Bound::Unbounded, Bound::Included(key))).next_back()?;
        Some((lower, entry, self.upper_of(lower)))
    }

    /// The lower bound of the segment after the one starting at `lower`.
    pub fn upper_of(&self, lower: &[u8]) -> Option<&Key> {
        self.map.range::<[u8], _>((Bound::Excluded(lower), Bound::Unbounded)).next().map(|(k, _)| k)
    }

    /// The lower bound of the segment before the one starting at `lower`.
    pub fn before(&self, lower: &[u8]) -> Option<&Key> {
        self.map.range::<[u8], _>((Bound::Unbounded, Bound::Excluded(lower))).next_back().map(|(k, _)| k)
    }

    pub fn locate(&self, key: &[u8]) -> Option<Location> {
        let (lower, entry, upper) = self.segment_of(key)?;
        Some(Location {
            lower: lower.clone(),
            upper: upper.cloned(),
            entry: entry.clone(),
            page_index: entry.page_index_for(key),
        })
    }

    /// The common prefix of the keys the segments start at (the first segment's lower bound is
    /// left out: it is the empty key, below every key); empty with fewer than two segments.
    pub fn data_prefix(&self) -> &[u8] {
        let mut lowers = self.map.keys().skip(1);
        match (lowers.next(), self.map.keys().next_back()) {
            (Some(first), Some(last)) => first.get(..common_prefix(first, last)).unwrap_or_default(),
            _ => &[],
        }
    }

    /// Every page the index references: base pages and overflow pages.
    pub fn used_pages(&self) -> impl Iterator<Item = PageId> + '_ {
        self.map.values().flat_map(|e| {
            (e.first_page..e.first_page + u64::from(e.pages))
                .chain(e.overflow.iter().copied().filter(|&o| o != 0))
        })
    }

    pub fn memory_bytes(&self) -> u64 {
        self.totals.memory_bytes
    }

    /// Bytes `encode` appends.
    pub fn encoded_bytes(&self) -> usize {
        let entry_bytes = |(lower, e): (&Key, &SegmentEntry)| {
            let model_bytes = if e.model.is_some() { MODEL_BYTES } else { 0 };
            ENTRY_FIXED_BYTES + lower.len() + model_bytes + 8 * e.overflow.len()
        };
        4 + self.map.iter().map(entry_bytes).sum::<usize>()
    }

    /// The byte form: `u32` count, then per segment (in key order) `u16` lower length, the lower
    /// bound, `u64` first page, `u8` pages, `u8` has-model, `u16` model prefix length, `u64`
    /// production id, the model (`u64` base, `u64` slope bits, `u64` intercept bits) when present,
    /// and `pages` × `u64` overflow page ids.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&(self.map.len() as u32).to_le_bytes());
        for (lower, e) in &self.map {
            out.extend_from_slice(&(lower.len() as u16).to_le_bytes());
            out.extend_from_slice(lower);
            out.extend_from_slice(&e.first_page.to_le_bytes());
            out.push(e.pages);
            out.push(u8::from(e.model.is_some()));
            out.extend_from_slice(&e.model.map_or(0, |m| m.prefix_len).to_le_bytes());
            out.extend_from_slice(&e.production_id.to_le_bytes());
            if let Some(m) = e.model {
                out.extend_from_slice(&m.base.to_le_bytes());
                out.extend_from_slice(&m.slope.to_bits().to_le_bytes());
                out.extend_from_slice(&m.intercept.to_bits().to_le_bytes());
            }
            for id in &e.overflow {
                out.extend_from_slice(&id.to_le_bytes());
            }
        }
    }

    /// Decodes `bytes` (found in `file` at `offset`), checking that lower bounds start at the
    /// empty key and strictly increase, page counts and models are valid, and every page id is a
    /// data page below `end_page`. Returns the index and the bytes consumed.
    pub fn decode(bytes: &[u8], file: &str, offset: u64, end_page: PageId) -> Result<(Index, usize)> {
        let mut r = Reader { bytes, at: 0 };
        let corrupt = |at: usize, what: String| Error::corruption(file, offset + at as u64, what);
        let count = r.u32().ok_or_else(|| corrupt(0, "index truncated".into()))?;
        let mut index = Index::default();
        let mut previous: Option<Key> = None;
        for i in 0..count {
            let start = r.at;
            let (lower, entry) =
                r.segment().ok_or_else(|| corrupt(start, format!("index segment {i} truncated")))?;
            let ordered = match &previous {
                None => lower.is_empty(),
                Some(p) => *p < lower,
            };
            if !ordered {
                return Err(corrupt(start, format!("index segment {i}: lower bounds out of order")));
            }
            let pages_ok = entry.first_page >= RESERVED_PAGES
                && entry.first_page.checked_add(u64::from(entry.pages)).is_some_and(|end| end <= end_page)
                && entry.overflow.iter().all(|&o| o == 0 || (RESERVED_PAGES..end_page).contains(&o));
            if !pages_ok {
                return Err(corrupt(start, format!("index segment {i}: page ids outside the data file")));
            }
            previous = Some(lower.clone());
            index.insert(lower, entry);
        }
        Ok((index, r.at))
    }
}

/// A bounds-checked little-endian reader.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let out = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(out)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    /// One segment; `None` when truncated or invalid.
    fn segment(&mut self) -> Option<(Key, SegmentEntry)> {
        let lower_len = usize::from(self.u16()?);
        let lower = self.take(lower_len)?.to_vec();
        let first_page = self.u64()?;
        let pages = self.u8()?;
        let has_model = self.u8()?;
        let prefix_len = self.u16()?;
        let production_id = self.u64()?;
        if !is_segment_page_count(pages) || has_model > 1 || (has_model == 1) != (pages > 1) {
            return None;
        }
        let model = if has_model == 1 {
            let (base, slope, intercept) =
                (self.u64()?, f64::from_bits(self.u64()?), f64::from_bits(self.u64()?));
            let model = SegmentModel { prefix_len, base, slope, intercept, pages };
            if !model.is_well_formed() {
                return None;
            }
            Some(model)
        } else {
            None
        };
        let overflow = (0..pages).map(|_| self.u64()).collect::<Option<SmallVec<_>>>()?;
        Some((lower, SegmentEntry { first_page, pages, model, production_id, overflow }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Index {
        let mut index = Index::default();
        index.insert(Vec::new(), SegmentEntry::new(SegmentSlot { first_page: 1, pages: 1 }, None, 1));
        let model = SegmentModel { prefix_len: 1, base: 7, slope: 0.5, intercept: 0.25, pages: 4 };
        let mut e = SegmentEntry::new(SegmentSlot { first_page: 2, pages: 4 }, Some(model), 9);
        e.overflow[2] = 8;
        index.insert(b"m".to_vec(), e);
        index
    }

    #[test]
    fn round_trips_and_locates() {
        let index = sample();
        let mut bytes = Vec::new();
        index.encode(&mut bytes);
        let (back, used) = Index::decode(&bytes, "f", 0, 9).unwrap();
        assert_eq!((back, used), (index.clone(), bytes.len()));
        let loc = index.locate(b"q").unwrap();
        assert_eq!((loc.lower.as_slice(), loc.upper), (b"m".as_slice(), None));
        assert_eq!(index.locate(b"a").unwrap().upper, Some(b"m".to_vec()));
        let mut used: Vec<_> = index.used_pages().collect();
        used.sort_unstable();
        assert_eq!(used, vec![1, 2, 3, 4, 5, 8]);
    }

    /// What the totals must equal: a walk of every segment.
    fn recounted(index: &Index) -> (u64, u64, u64) {
        index.iter().fold((0, 0, 0), |(base, overflow, bytes), (k, e)| {
            let linked = e.overflow.iter().filter(|&&o| o != 0).count() as u64;
            (base + u64::from(e.pages), overflow + linked, bytes + e.memory_bytes(k.len()))
        })
    }

    #[test]
    fn totals_follow_every_insert_replace_remove_and_overflow_link() {
        let mut index = sample();
        let check = |index: &Index| {
            let (base, overflow) = index.page_counts();
            assert_eq!((base, overflow, index.memory_bytes()), recounted(index));
        };
        check(&index);
        let model = SegmentModel { prefix_len: 1, base: 0, slope: 0.5, intercept: 0.0, pages: 16 };
        let mut bigger = SegmentEntry::new(SegmentSlot { first_page: 20, pages: 16 }, Some(model), 3);
        bigger.overflow[0] = 40;
        index.insert(b"m".to_vec(), bigger);
        check(&index);
        let model = SegmentModel { prefix_len: 1, base: 0, slope: 0.5, intercept: 0.0, pages: 2 };
        index.insert(
            b"zz".to_vec(),
            SegmentEntry::new(SegmentSlot { first_page: 50, pages: 2 }, Some(model), 4),
        );
        assert!(index.set_overflow(b"zz", 1, 60));
        assert!(!index.set_overflow(b"zz", 2, 61), "no base page 2");
        assert!(!index.set_overflow(b"y", 0, 61), "no segment starts at y");
        check(&index);
        assert!(index.remove(b"m").is_some() && index.remove(b"m").is_none());
        check(&index);
        let mut bytes = Vec::new();
        index.encode(&mut bytes);
        let (back, _) = Index::decode(&bytes, "f", 0, 100).unwrap();
        check(&back);
        assert_eq!(back, index);
    }

    #[test]
    fn every_truncation_and_bad_page_is_corruption_not_a_panic() {
        let mut bytes = Vec::new();
        sample().encode(&mut bytes);
        for len in 0..bytes.len() {
            assert!(Index::decode(&bytes[..len], "f", 0, 9).unwrap_err().is_corruption(), "{len}");
        }
        assert!(Index::decode(&bytes, "f", 0, 8).unwrap_err().is_corruption(), "overflow past the end");
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x5a;
            let _ = Index::decode(&damaged, "f", 0, 9); // never panics
        }
    }
}
