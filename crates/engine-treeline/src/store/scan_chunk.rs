//! A scan chunk's records, merged and decoded only as the scan takes them: the chunk's pages
//! (read under their latches, then owned) and the snapshot of the record cache over its key range
//! taken under those same latches. A short scan that stops early decodes and copies only the
//! records it returned, not every record of the pages it read.
//!
//! Merge rules: each page is sorted; a key lives in one page of a base/overflow pair (should both
//! hold it, the base page's record is taken, as a point read takes it); a cached record overrides
//! the pages and a cached tombstone hides them.

use std::cmp::Ordering;
use std::collections::VecDeque;

use strata_core::{Key, Value};

use crate::page::{Entry, Page, StoredValue};

/// A base page and its overflow page, each with the slot of its next record.
struct PairCursor {
    base: Page,
    base_at: usize,
    overflow: Option<(Page, usize)>,
}

/// Which page of a pair holds the pair's next record.
#[derive(Clone, Copy)]
enum Side {
    Base,
    Overflow,
    /// Both hold the key: the base page's record is taken, the overflow page's skipped.
    Both,
}

impl PairCursor {
    fn new(base: Page, overflow: Option<Page>, from: Option<&[u8]>) -> PairCursor {
        let start = |page: &Page| from.map_or(0, |f| page.first_at_or_after(f));
        let base_at = start(&base);
        let overflow = overflow.map(|page| {
            let at = start(&page);
            (page, at)
        });
        PairCursor { base, base_at, overflow }
    }

    fn base_next(&self) -> Option<Entry<'_>> {
        (self.base_at < self.base.record_count()).then(|| self.base.entry(self.base_at))
    }

    fn overflow_next(&self) -> Option<Entry<'_>> {
        let (page, at) = self.overflow.as_ref()?;
        (*at < page.record_count()).then(|| page.entry(*at))
    }

    /// The side holding the pair's smallest remaining key (`None`: the pair is used up).
    fn next_side(&self) -> Option<Side> {
        match (self.base_next(), self.overflow_next()) {
            (None, None) => None,
            (Some(_), None) => Some(Side::Base),
            (None, Some(_)) => Some(Side::Overflow),
            (Some(b), Some(o)) => Some(match b.cmp_entry(&o) {
                Ordering::Less => Side::Base,
                Ordering::Equal => Side::Both,
                Ordering::Greater => Side::Overflow,
            }),
        }
    }

    fn entry(&self, side: Side) -> Option<Entry<'_>> {
        match side {
            Side::Base | Side::Both => self.base_next(),
            Side::Overflow => self.overflow_next(),
        }
    }

    fn advance(&mut self, side: Side) {
        if matches!(side, Side::Base | Side::Both) {
            self.base_at += 1;
        }
        if let (Side::Overflow | Side::Both, Some((_, at))) = (side, self.overflow.as_mut()) {
            *at += 1;
        }
    }
}

/// What the merge takes next.
enum Take {
    Page(Side),
    /// The cached record; `skip_page`: it overrides the page record of the same key.
    Cached {
        skip_page: Option<Side>,
    },
    End,
}

/// A chunk's records in ascending key order, produced lazily (see the module comment).
#[derive(Default)]
pub(super) struct ChunkRecords {
    /// Page pairs in key order, their key ranges disjoint.
    pairs: VecDeque<PairCursor>,
    /// The cache's records over the chunk's range, ascending (`None`: a tombstone).
    cached: VecDeque<(Key, Option<Value>)>,
    pages: u64,
}

impl ChunkRecords {
    /// Appends a pair whose keys all follow the pairs pushed before; records below `from` are
    /// skipped.
    pub fn push_pair(&mut self, base: Page, overflow: Option<Page>, from: Option<&[u8]>) {
        self.pages += 1 + u64::from(overflow.is_some());
        self.pairs.push_back(PairCursor::new(base, overflow, from));
    }

    /// Appends cached records (ascending, after every cached record pushed before).
    pub fn push_cached(&mut self, cached: Vec<(Key, Option<Value>)>) {
        self.cached.extend(cached);
    }

    /// Pages (base and overflow) this chunk holds.
    pub fn pages(&self) -> u64 {
        self.pages
    }

    fn next_take(&mut self) -> Take {
        while self.pairs.front().is_some_and(|p| p.next_side().is_none()) {
            self.pairs.pop_front();
        }
        let page = self.pairs.front().and_then(|p| Some((p, p.next_side()?)));
        match (page, self.cached.front()) {
            (None, None) => Take::End,
            (Some((_, side)), None) => Take::Page(side),
            (None, Some(_)) => Take::Cached { skip_page: None },
            (Some((pair, side)), Some((key, _))) => match pair.entry(side).map(|e| e.cmp_key(key)) {
                Some(Ordering::Less) => Take::Page(side),
                Some(Ordering::Equal) => Take::Cached { skip_page: Some(side) },
                _ => Take::Cached { skip_page: None },
            },
        }
    }
}

/// Records as pages hold them (a blob run is read only when the scan returns its record).
impl Iterator for ChunkRecords {
    type Item = (Key, StoredValue);

    fn next(&mut self) -> Option<(Key, StoredValue)> {
        loop {
            match self.next_take() {
                Take::End => return None,
                Take::Page(side) => {
                    let pair = self.pairs.front_mut()?;
                    let record = pair.entry(side).map(|e| (e.key(), e.value.to_owned_value()));
                    pair.advance(side);
                    return record;
                }
                Take::Cached { skip_page } => {
                    if let (Some(side), Some(pair)) = (skip_page, self.pairs.front_mut()) {
                        pair.advance(side);
                    }
                    match self.cached.pop_front()? {
                        (key, Some(value)) => return Some((key, StoredValue::Inline(value))),
                        (_, None) => continue,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::page::{PageKind, PageSize};

    fn page(kind: PageKind, records: &[(&[u8], &[u8])]) -> Page {
        let mut page = Page::new(PageSize::DEFAULT, kind, b"k", Some(b"l")).unwrap();
        for (k, v) in records {
            page.put(k, v).unwrap();
        }
        page
    }

    fn head() -> PageKind {
        PageKind::SegmentHead { pages: 1, model: None, production_id: 0 }
    }

    #[test]
    fn merges_base_overflow_and_cache_in_key_order() {
        let base = page(head(), &[(b"k1", b"b1"), (b"k3", b"b3"), (b"k5", b"b5")]);
        let mut overflow = Page::new_overflow_for(&base).unwrap();
        for (k, v) in [(b"k2", b"o2"), (b"k4", b"o4")] {
            overflow.put(k, v).unwrap();
        }
        let mut chunk = ChunkRecords::default();
        chunk.push_pair(base, Some(overflow), Some(b"k2"));
        chunk.push_cached(vec![(b"k3".to_vec(), Some(b"c3".to_vec())), (b"k4".to_vec(), None)]);
        let got: Vec<_> = chunk.collect();
        let want: Vec<(Key, StoredValue)> = vec![
            (b"k2".to_vec(), StoredValue::Inline(b"o2".to_vec())),
            (b"k3".to_vec(), StoredValue::Inline(b"c3".to_vec())),
            (b"k5".to_vec(), StoredValue::Inline(b"b5".to_vec())),
        ];
        assert_eq!(got, want);
    }

    /// Regression (one rule for a key held twice): a point read takes the base page's record,
    /// and so must a scan, not the overflow page's.
    #[test]
    fn a_key_in_both_pages_of_a_pair_is_returned_once_from_the_base_page() {
        let base = page(head(), &[(b"k1", b"base")]);
        let mut overflow = Page::new_overflow_for(&base).unwrap();
        overflow.put(b"k1", b"overflow").unwrap();
        let mut chunk = ChunkRecords::default();
        chunk.push_pair(base, Some(overflow), None);
        assert_eq!(chunk.collect::<Vec<_>>(), vec![(b"k1".to_vec(), StoredValue::Inline(b"base".to_vec()))]);
    }
}
