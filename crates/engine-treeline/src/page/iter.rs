//! In-order iteration over a page's records, forward and reverse, optionally from a key.

use super::slotted::{Entry, Page};

/// Double-ended iterator over slots `front..back` of a page, in key order.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    page: &'a Page,
    front: usize,
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        if self.front >= self.back {
            return None;
        }
        let entry = self.page.entry(self.front);
        self.front += 1;
        Some(entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back.saturating_sub(self.front);
        (n, Some(n))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front >= self.back {
            return None;
        }
        self.back -= 1;
        Some(self.page.entry(self.back))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl Page {
    /// All records in key order (`.rev()` for descending).
    pub fn iter(&self) -> Iter<'_> {
        Iter { page: self, front: 0, back: self.record_count() }
    }

    /// Records with keys `>= key`, ascending; `.rev()` walks them from the largest down to `key`.
    pub fn iter_from(&self, key: &[u8]) -> Iter<'_> {
        Iter { page: self, front: self.first_at_or_after(key), back: self.record_count() }
    }

    /// Records with keys `<= key`, ascending; `.rev()` is a reverse scan starting at `key`.
    pub fn iter_through(&self, key: &[u8]) -> Iter<'_> {
        Iter { page: self, front: 0, back: self.first_after(key) }
    }

    /// Index of the first slot whose key is `>= key`.
    pub fn first_at_or_after(&self, key: &[u8]) -> usize {
        self.partition(key, false)
    }

    /// Index of the first slot whose key is `> key`.
    fn first_after(&self, key: &[u8]) -> usize {
        self.partition(key, true)
    }

    /// The first slot past every key `< key` (and past `key` itself when `past_equal`). Keys
    /// below the lower fence sort before every slot; keys the page does not cover, after.
    fn partition(&self, key: &[u8], past_equal: bool) -> usize {
        if key < self.lower_fence() {
            return 0;
        }
        if !self.covers(key) {
            return self.record_count();
        }
        let suffix = key.get(self.prefix().len()..).unwrap_or(&[]);
        match self.search(suffix) {
            Ok(i) if past_equal => i + 1,
            Ok(i) | Err(i) => i,
        }
    }
}
