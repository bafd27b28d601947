//! The keys of one sparse-index node in three flat arrays (prefix truncation and inline heads, as in
//! LeanStore), instead of one heap allocation per key:
//!
//! - `bytes = P ++ s_0 ++ s_1 ++ .. ++ s_{n-1}`: the node's common prefix `P` once, then each key's
//!   remaining bytes (its *suffix*) back to back; key `i` is `P ++ s_i`;
//! - `ends[i]`: where `s_i` ends in `bytes` (it starts at `ends[i - 1]`, or `|P|` for `i = 0`);
//! - `heads[i] = head(s_i)`: a binary search reads these and only compares suffixes on a tie.
//!
//! Invariants: keys strictly increase; `P` is the longest common prefix of the keys, leaving out an
//! empty first key (`skip_empty_first`: the leftmost node of each level starts with the empty key,
//! which would make `P` empty); such a key is stored as an empty suffix with head 0 and is not
//! prefixed by `P`. `P` is a prefix of every other key because the strings with a given prefix are
//! a contiguous range in lexicographic order, so every key between the first and the last one
//! starts with it too. Heads are sorted: removing a shared prefix keeps order, and `head` keeps
//! order (see there); 0, the head of a skipped empty key, is the smallest.
//!
//! An insert or removal inside the node moves at most the node's bytes (a memmove); one that
//! changes the first or last key may change `P` and re-encodes the node.

use std::cmp::Ordering;

use strata_core::Key;

/// A key stored in pieces (`first ++ second`): an index key is its node's prefix plus its suffix.
#[derive(Clone, Copy, Debug)]
pub struct IndexKey<'a> {
    first: &'a [u8],
    second: &'a [u8],
}

/// Keys up to this long are assembled on the stack by `IndexKey::with_slice`.
const INLINE_KEY_BYTES: usize = 64;

impl<'a> IndexKey<'a> {
    pub fn from_slice(key: &'a [u8]) -> IndexKey<'a> {
        IndexKey { first: key, second: &[] }
    }

    pub fn len(&self) -> usize {
        self.first.len() + self.second.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bytes(&self) -> impl Iterator<Item = u8> + 'a {
        self.first.iter().chain(self.second).copied()
    }

    /// The key without its first `n` bytes.
    fn skip(self, n: usize) -> IndexKey<'a> {
        match self.first.get(n..) {
            Some(first) => IndexKey { first, second: self.second },
            None => {
                IndexKey { first: &[], second: self.second.get(n - self.first.len()..).unwrap_or_default() }
            }
        }
    }

    pub fn write_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.first);
        out.extend_from_slice(self.second);
    }

    pub fn to_vec(&self) -> Key {
        let mut out = Vec::with_capacity(self.len());
        self.write_into(&mut out);
        out
    }

    /// Compares this key with `other` (lexicographically, as byte strings).
    pub fn cmp_slice(&self, other: &[u8]) -> Ordering {
        let n = self.first.len().min(other.len());
        match self.first.cmp(other.get(..n).unwrap_or_default()) {
            Ordering::Equal if n < self.first.len() => Ordering::Greater, // `other` ran out first
            Ordering::Equal => self.second.cmp(other.get(n..).unwrap_or_default()),
            unequal => unequal,
        }
    }

    /// Whether this key equals `other`, compared piece by piece (nothing is assembled).
    pub fn eq_slice(&self, other: &[u8]) -> bool {
        other.len() == self.len()
            && other.get(..self.first.len()) == Some(self.first)
            && other.get(self.first.len()..) == Some(self.second)
    }

    #[cfg(test)]
    pub fn cmp_key(&self, other: &IndexKey<'_>) -> Ordering {
        self.bytes().cmp(other.bytes())
    }

    /// Calls `f` with the key as one slice (assembled on the stack when short, else on the heap).
    pub fn with_slice<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        if self.second.is_empty() {
            return f(self.first);
        }
        if self.first.is_empty() {
            return f(self.second);
        }
        let mut inline = [0u8; INLINE_KEY_BYTES];
        match inline.get_mut(..self.len()) {
            Some(buf) => {
                let (a, b) = buf.split_at_mut(self.first.len());
                a.copy_from_slice(self.first);
                b.copy_from_slice(self.second);
                f(buf)
            }
            None => f(&self.to_vec()),
        }
    }
}

/// `x[..8]` as a big-endian u64, zero-padded on the right.
///
/// Order: for byte strings `a < b`, `head(a) <= head(b)`. Either `a` is a proper prefix of `b`:
/// then `a`'s padded 8 bytes are `b`'s first bytes followed by zeros, and 0 is the smallest byte,
/// so `head(a) <= head(b)`. Or they first differ at `j` with `a[j] < b[j]`: for `j < 8` the padded
/// arrays first differ at `j` the same way (`head(a) < head(b)`); for `j >= 8` the first 8 bytes
/// are equal and so are the heads. Contrapositive: `head(a) < head(b)` implies `a < b`.
fn head(x: IndexKey<'_>) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.iter_mut().zip(x.bytes()).for_each(|(b, x)| *b = x);
    u64::from_be_bytes(bytes)
}

fn common_prefix_len(a: IndexKey<'_>, b: IndexKey<'_>) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

/// Bytes the allocator takes for a `requested`-byte allocation: glibc malloc's chunk (the request
/// plus an 8-byte header, rounded up to 16, at least 32).
pub fn allocation_bytes(requested: usize) -> u64 {
    if requested == 0 {
        0
    } else {
        ((requested + 8).next_multiple_of(16)).max(32) as u64
    }
}

/// Makes room for `extra` more elements, growing by at least a quarter: nodes are small and
/// many, so a doubling `Vec` would leave a third of the index unused on average.
pub fn reserve<T>(v: &mut Vec<T>, extra: usize) {
    if v.capacity() - v.len() < extra {
        v.reserve_exact(extra.max(v.len() / 4).max(4));
    }
}

/// The keys of one node; see the module documentation.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct NodeKeys {
    bytes: Vec<u8>,
    ends: Vec<u32>,
    heads: Vec<u64>,
    prefix_len: u32,
    skip_empty_first: bool,
}

impl NodeKeys {
    /// The node keys for `keys`, which must strictly increase.
    pub fn from_keys<'a>(keys: &[IndexKey<'a>]) -> NodeKeys {
        let skip_empty_first = keys.first().is_some_and(|k| k.is_empty());
        let from = usize::from(skip_empty_first);
        let prefix_len = match (keys.get(from), keys.last()) {
            (Some(&first), Some(&last)) => common_prefix_len(first, last),
            _ => 0,
        };
        let total: usize = keys.iter().map(|k| k.len()).sum();
        let mut bytes =
            Vec::with_capacity(prefix_len + total.saturating_sub(prefix_len * (keys.len() - from)));
        if let Some(first) = keys.get(from) {
            bytes.extend(first.bytes().take(prefix_len));
        }
        let mut ends = Vec::with_capacity(keys.len());
        let mut heads = Vec::with_capacity(keys.len());
        for (i, key) in keys.iter().enumerate() {
            let suffix = if i < from { IndexKey::from_slice(&[]) } else { key.skip(prefix_len) };
            suffix.write_into(&mut bytes);
            ends.push(bytes.len() as u32);
            heads.push(head(suffix));
        }
        NodeKeys { bytes, ends, heads, prefix_len: prefix_len as u32, skip_empty_first }
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    fn prefix(&self) -> &[u8] {
        self.bytes.get(..self.prefix_len as usize).unwrap_or_default()
    }

    fn suffix_start(&self, i: usize) -> usize {
        match i.checked_sub(1) {
            Some(j) => self.ends.get(j).map_or(self.bytes.len(), |&e| e as usize),
            None => self.prefix_len as usize,
        }
    }

    fn suffix(&self, i: usize) -> &[u8] {
        let end = self.ends.get(i).map_or(0, |&e| e as usize);
        self.bytes.get(self.suffix_start(i)..end).unwrap_or_default()
    }

    /// Key `i` (empty for `i >= len()`).
    pub fn key(&self, i: usize) -> IndexKey<'_> {
        if i == 0 && self.skip_empty_first {
            return IndexKey::from_slice(&[]);
        }
        IndexKey { first: self.prefix(), second: self.suffix(i) }
    }

    pub fn keys(&self) -> Vec<IndexKey<'_>> {
        (0..self.len()).map(|i| self.key(i)).collect()
    }

    /// How many keys are `<= key`.
    ///
    /// A `key` outside the range of strings starting with `P` is below or above every key (but a
    /// skipped empty one). Otherwise, with `h = head(key[|P|..])`, keys whose head is `< h` are
    /// `< key` and keys whose head is `> h` are `> key` (contrapositive in `head`), so only the
    /// contiguous run with head `h` needs suffix comparisons. A skipped empty key has the empty
    /// suffix and head 0, which answers `<=` correctly without a special case.
    pub fn count_le(&self, key: &[u8]) -> usize {
        let from = usize::from(self.skip_empty_first);
        let n = self.len();
        if n <= from {
            return n;
        }
        let p = self.prefix_len as usize;
        // A `key` shorter than `P` compares `Less` when it is a prefix of `P`: then it is smaller
        // than every key starting with `P`. `Equal` means `key` starts with `P`.
        match key.get(..p.min(key.len())).unwrap_or_default().cmp(self.prefix()) {
            Ordering::Less => return from,
            Ordering::Greater => return n,
            Ordering::Equal => {}
        }
        let rest = key.get(p..).unwrap_or_default();
        let h = head(IndexKey::from_slice(rest));
        let mut hi = self.heads.partition_point(|&x| x <= h);
        if hi == 0 || self.heads.get(hi - 1) != Some(&h) {
            return hi;
        }
        let mut lo = self.heads.get(..hi).unwrap_or_default().partition_point(|&x| x < h);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.suffix(mid) <= rest {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Inserts `key` as key `i`; the caller keeps keys strictly increasing.
    pub fn insert(&mut self, i: usize, key: &[u8]) {
        let from = usize::from(self.skip_empty_first);
        // `P` stays the longest common prefix if `key` starts with it and is not a new empty key.
        if self.len() > from && i >= from && !key.is_empty() && key.starts_with(self.prefix()) {
            let suffix = key.get(self.prefix_len as usize..).unwrap_or_default();
            let at = self.suffix_start(i);
            reserve(&mut self.bytes, suffix.len());
            self.bytes.splice(at..at, suffix.iter().copied());
            self.ends.iter_mut().skip(i).for_each(|e| *e += suffix.len() as u32);
            reserve(&mut self.ends, 1);
            self.ends.insert(i, (at + suffix.len()) as u32);
            reserve(&mut self.heads, 1);
            self.heads.insert(i, head(IndexKey::from_slice(suffix)));
            return;
        }
        let mut keys = self.keys();
        keys.insert(i, IndexKey::from_slice(key));
        *self = NodeKeys::from_keys(&keys);
    }

    /// Removes key `i`.
    pub fn remove(&mut self, i: usize) {
        let from = usize::from(self.skip_empty_first);
        // Between the first and the last of the prefixed keys: `P` stays the same.
        if i > from && i + 1 < self.len() {
            let (start, end) = (self.suffix_start(i), self.ends.get(i).map_or(0, |&e| e as usize));
            self.bytes.drain(start..end);
            self.ends.remove(i);
            self.ends.iter_mut().skip(i).for_each(|e| *e -= (end - start) as u32);
            self.heads.remove(i);
            return;
        }
        let mut keys = self.keys();
        if i < keys.len() {
            keys.remove(i);
        }
        *self = NodeKeys::from_keys(&keys);
    }

    /// Replaces key `i` with `key`; the caller keeps keys strictly increasing.
    pub fn replace(&mut self, i: usize, key: &[u8]) {
        self.remove(i);
        self.insert(i, key);
    }

    /// Moves keys `at..` into a new `NodeKeys`.
    pub fn split_off(&mut self, at: usize) -> NodeKeys {
        let keys = self.keys();
        let (left, right) = keys.split_at(at.min(keys.len()));
        let (left, right) = (NodeKeys::from_keys(left), NodeKeys::from_keys(right));
        *self = left;
        right
    }

    /// Heap memory of the three arrays, as the allocator counts it.
    pub fn heap_bytes(&self) -> u64 {
        allocation_bytes(self.bytes.capacity())
            + allocation_bytes(self.ends.capacity() * size_of::<u32>())
            + allocation_bytes(self.heads.capacity() * size_of::<u64>())
    }

    /// Checks the invariants (for tests): equal to a fresh encoding, sorted keys and heads, and
    /// every key but a skipped empty one starts with the prefix.
    #[cfg(test)]
    pub fn check(&self) {
        let keys = self.keys();
        assert!(keys.windows(2).all(|w| w[0].cmp_key(&w[1]) == Ordering::Less), "keys out of order");
        assert!(self.heads.windows(2).all(|w| w[0] <= w[1]), "unsorted heads");
        assert_eq!(self, &NodeKeys::from_keys(&keys), "differs from a fresh encoding");
        assert_eq!(self.heads.len(), self.len());
        assert_eq!(self.ends.last().map_or(self.prefix_len as usize, |&e| e as usize), self.bytes.len());
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn node(keys: &[Vec<u8>]) -> NodeKeys {
        NodeKeys::from_keys(&keys.iter().map(|k| IndexKey::from_slice(k)).collect::<Vec<_>>())
    }

    fn check_against(node: &NodeKeys, model: &[Vec<u8>]) {
        node.check();
        assert_eq!(node.keys().iter().map(IndexKey::to_vec).collect::<Vec<_>>(), model);
        let mut probes: Vec<Vec<u8>> = model.to_vec();
        for k in model {
            let mut longer = k.clone();
            longer.push(0);
            probes.push(longer);
            probes.push(k[..k.len().saturating_sub(1)].to_vec());
            let mut bumped = k.clone();
            if let Some(b) = bumped.last_mut() {
                *b = b.wrapping_add(1);
            }
            probes.push(bumped);
        }
        probes.push(Vec::new());
        probes.push(vec![0xff; 40]);
        for p in &probes {
            let want = model.iter().filter(|k| k.as_slice() <= p.as_slice()).count();
            assert_eq!(node.count_le(p), want, "probe {p:?} in {model:?}");
        }
    }

    fn udb(x: u64) -> Vec<u8> {
        [&[0u8; 19][..], &x.to_be_bytes()].concat()
    }

    /// Inserts and removes at the front, the back and the middle, with and without an empty first
    /// key, on keys whose common prefix grows and shrinks: every step matches a list of keys.
    #[test]
    fn insert_and_remove_at_both_ends_and_in_the_middle() {
        for with_empty in [false, true] {
            let mut model: Vec<Vec<u8>> =
                (10..20u64).map(|x| udb(x << 8)).chain(with_empty.then(Vec::new)).collect();
            model.sort();
            let mut keys = node(&model);
            check_against(&keys, &model);
            let first = usize::from(with_empty);
            let inserts: [Vec<u8>; 6] = [
                udb(1),               // new first key: a shorter prefix
                udb(u64::MAX),        // new last key
                udb((12 << 8) + 1),   // middle
                udb(9 << 8),          // second
                b"\x00\x00".to_vec(), // a prefix of all others, at the front
                b"z".to_vec(),        // at the back, no common prefix left
            ];
            for key in inserts {
                let at = model.binary_search(&key).unwrap_err();
                model.insert(at, key.clone());
                keys.insert(at, &key);
                check_against(&keys, &model);
            }
            for pick in [0, 2, 1, 1, 0, 2] {
                let at = [first, model.len() / 2, model.len() - 1][pick];
                model.remove(at);
                keys.remove(at);
                check_against(&keys, &model);
            }
            let replacement = model[first + 2].iter().copied().chain([7]).collect::<Vec<_>>();
            model[first + 2] = replacement.clone();
            keys.replace(first + 2, &replacement);
            check_against(&keys, &model);
            let right = keys.split_off(4);
            check_against(&keys, &model[..4]);
            check_against(&right, &model[4..]);
            model.truncate(4);
            while !model.is_empty() {
                model.remove(0);
                keys.remove(0);
                check_against(&keys, &model);
            }
        }
    }

    /// Random keys with long shared prefixes, keys that are prefixes of others and an empty first
    /// key, inserted and removed at random positions.
    #[test]
    fn random_edits_match_a_sorted_list() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut model: Vec<Vec<u8>> = vec![Vec::new()];
        let mut keys = node(&model);
        for step in 0..4000 {
            if rng.gen_bool(0.6) || model.len() < 3 {
                let mut k = b"user".to_vec();
                k.extend((0..rng.gen_range(0..12)).map(|_| rng.gen_range(b'0'..=b'3')));
                if let Err(at) = model.binary_search(&k) {
                    model.insert(at, k.clone());
                    keys.insert(at, &k);
                }
            } else {
                let at = rng.gen_range(1..model.len());
                model.remove(at);
                keys.remove(at);
            }
            if step % 37 == 0 {
                check_against(&keys, &model);
            }
        }
        check_against(&keys, &model);
    }

    #[test]
    fn index_keys_compare_and_assemble_like_their_bytes() {
        let parts: [(&[u8], &[u8]); 5] =
            [(b"", b""), (b"ab", b""), (b"", b"ab"), (b"a", b"b"), (b"ab", b"c")];
        let others: [&[u8]; 6] = [b"", b"a", b"ab", b"abc", b"abd", b"b"];
        for (first, second) in parts {
            let key = IndexKey { first, second };
            let whole = [first, second].concat();
            assert_eq!(key.to_vec(), whole);
            assert_eq!(key.with_slice(|s| s.to_vec()), whole);
            for o in others {
                assert_eq!(key.cmp_slice(o), whole.as_slice().cmp(o), "{whole:?} vs {o:?}");
            }
        }
        let long = IndexKey { first: &[1; 50], second: &[2; 50] };
        assert_eq!(long.with_slice(|s| s.len()), 100);
    }
}
