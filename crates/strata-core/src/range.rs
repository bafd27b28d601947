use std::ops::{Bound, RangeBounds};

use crate::Key;

/// Scan direction for ordered engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Direction {
    #[default]
    Forward,
    Reverse,
}

/// An owned key range with arbitrary bounds; the engines' common currency for scans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    pub start: Bound<Key>,
    pub end: Bound<Key>,
}

impl KeyRange {
    pub fn all() -> Self {
        KeyRange { start: Bound::Unbounded, end: Bound::Unbounded }
    }

    /// Every key that starts with `prefix`.
    pub fn prefix(prefix: &[u8]) -> Self {
        let end = match prefix_successor(prefix) {
            Some(s) => Bound::Excluded(s),
            None => Bound::Unbounded,
        };
        KeyRange { start: Bound::Included(prefix.to_vec()), end }
    }

    /// Builds an owned range from any `RangeBounds` over byte slices or vectors.
    pub fn from_bounds<K: AsRef<[u8]>, R: RangeBounds<K>>(bounds: R) -> Self {
        let own = |b: Bound<&K>| match b {
            Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        KeyRange { start: own(bounds.start_bound()), end: own(bounds.end_bound()) }
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.admits_from_start(key) && self.admits_to_end(key)
    }

    /// `key` is not below the range's start (it may be past its end).
    pub fn admits_from_start(&self, key: &[u8]) -> bool {
        at_or_after(key, borrow_bound(&self.start))
    }

    /// `key` is not past the range's end (it may be below its start).
    pub fn admits_to_end(&self, key: &[u8]) -> bool {
        at_or_before(key, borrow_bound(&self.end))
    }

    /// True when no key can fall inside the range.
    pub fn is_empty(&self) -> bool {
        bounds_hold_nothing(borrow_bound(&self.start), borrow_bound(&self.end))
    }

    /// The borrowed form, usable with `BTreeMap::range`.
    pub fn as_bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (borrow_bound(&self.start), borrow_bound(&self.end))
    }
}

impl RangeBounds<[u8]> for KeyRange {
    fn start_bound(&self) -> Bound<&[u8]> {
        borrow_bound(&self.start)
    }
    fn end_bound(&self) -> Bound<&[u8]> {
        borrow_bound(&self.end)
    }
}

/// `b` over the key's bytes, for `at_or_after`, `at_or_before` and the range APIs.
pub fn borrow_bound(b: &Bound<Key>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The key a bound names (`None`: unbounded).
pub fn bound_key(b: Bound<&[u8]>) -> Option<&[u8]> {
    match b {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

/// The smallest key greater than every key with this prefix, or `None` if no such key exists
/// (the prefix is empty or all 0xFF).
fn prefix_successor(prefix: &[u8]) -> Option<Key> {
    let mut succ = prefix.to_vec();
    while let Some(last) = succ.pop() {
        if last < u8::MAX {
            succ.push(last + 1);
            return Some(succ);
        }
    }
    None
}

/// `key` is not below the lower bound `lower`.
pub fn at_or_after(key: &[u8], lower: Bound<&[u8]>) -> bool {
    match lower {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    }
}

/// Whether no key lies between the bounds: the lower one above the upper one, or both at one
/// key with either excluding it (`BTreeMap::range` panics on such bounds).
pub fn bounds_hold_nothing(lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    match (lower, upper) {
        (Bound::Included(l), Bound::Included(u)) => l > u,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) => l >= u,
        _ => false,
    }
}

/// `key` is not above the upper bound `upper`.
pub fn at_or_before(key: &[u8], upper: Bound<&[u8]>) -> bool {
    match upper {
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
        Bound::Unbounded => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_range_covers_exactly_the_prefix() {
        let r = KeyRange::prefix(b"ab\xff");
        assert!(r.contains(b"ab\xff"));
        assert!(r.contains(b"ab\xff\x00"));
        assert!(!r.contains(b"ac"));
        assert!(r.contains(b"ab\xff\xff\xff"));
        assert!(!r.contains(b"ab"));
        assert_eq!(KeyRange::prefix(b""), KeyRange { start: Bound::Included(vec![]), end: Bound::Unbounded });
        assert_eq!(KeyRange::prefix(b"\xff\xff").end, Bound::Unbounded);
    }

    #[test]
    fn emptiness() {
        assert!(KeyRange::from_bounds(b"b".as_slice()..b"a".as_slice()).is_empty());
        assert!(KeyRange::from_bounds(b"a".as_slice()..b"a".as_slice()).is_empty());
        assert!(!KeyRange::from_bounds(b"a".as_slice()..=b"a".as_slice()).is_empty());
        assert!(!KeyRange::all().is_empty());
    }
}
