//! Order-preserving 64-bit projections of byte-string keys.
//!
//! TreeLine's models are linear functions of integers, but Strata keys are arbitrary byte strings.
//! A key is *projected* to a `u64`: after removing a common prefix that every key of the range
//! shares, the next 8 bytes are read big-endian, zero-padded on the right when the key is shorter.
//!
//! **Order.** For keys `a <= b` (lexicographic byte order) that both start with the prefix,
//! `project(a) <= project(b)`. The projection is *not* injective: keys that agree on their first 8
//! bytes after the prefix (or differ only by trailing zero bytes within them, like `"ab"` and
//! `"ab\0"`) project to the same value. That is correct for TreeLine because a projection is only
//! ever used to *pick* a page inside a segment; the page's fences (full keys) decide membership, and
//! equal projections always pick the same page. The segment planner gives every distinct projection
//! exactly one page, and [`fence_for_projection`] turns a projection boundary into a key fence that
//! agrees with the projection for every key (see its doc), so a key is never lost between pages;
//! when in doubt (a model evaluated on a stale segment, say) the engine checks the fences and steps
//! to the neighbouring page.

/// A monotone map of whole keys onto `u64` for insert forecasting: the 8 bytes after `prefix`
/// (the store's common key prefix), with keys outside it clamped (below the prefix to 0, above
/// it to `u64::MAX`). Without it, keys sharing a prefix of 8 bytes or more (`user:0000…`) would
/// all map to one value and every forecast would be the whole epoch or nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyMap {
    prefix: Vec<u8>,
}

impl KeyMap {
    /// Prefixes longer than this are cut (the map only needs to separate key ranges).
    pub const MAX_PREFIX_BYTES: usize = 64;

    pub fn new(prefix: &[u8]) -> KeyMap {
        KeyMap { prefix: prefix.get(..Self::MAX_PREFIX_BYTES).unwrap_or(prefix).to_vec() }
    }

    pub fn prefix(&self) -> &[u8] {
        &self.prefix
    }

    /// Order-preserving: `a <= b` gives `map(a) <= map(b)`.
    pub fn project(&self, key: &[u8]) -> u64 {
        if key.starts_with(&self.prefix) {
            project(key, self.prefix.len())
        } else if key < self.prefix.as_slice() {
            0
        } else {
            u64::MAX
        }
    }

    /// The projection bound for the keys below `key`: every key `k < key` maps below it
    /// (`None`: some may map to `u64::MAX`). It is `project(key)` only when `key` is the
    /// smallest key with that projection (its fence); a longer key, or one with trailing zero
    /// bytes, has smaller keys mapping to its own projection, so the bound is one more. (Bounding
    /// by `project(key)` alone makes a range of keys that share their 8 projected bytes empty.)
    pub fn project_upper_exclusive(&self, key: &[u8]) -> Option<u64> {
        let projection = self.project(key);
        // Projection 0 is shared with every key below the prefix (clamped to 0).
        let is_fence = key.starts_with(&self.prefix) && key == fence_for_projection(&self.prefix, projection);
        if projection > 0 && is_fence {
            return Some(projection);
        }
        projection.checked_add(1)
    }
}

/// Length of the longest common prefix of `a` and `b`.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The first 8 bytes of `key` after `prefix_len` bytes, big-endian, zero-padded on the right.
///
/// A key shorter than `prefix_len` projects to 0 (callers only project keys that carry the prefix;
/// 0 keeps this total and order-preserving among keys with the prefix).
pub fn project(key: &[u8], prefix_len: usize) -> u64 {
    let rest = key.get(prefix_len..).unwrap_or(&[]);
    let mut bytes = [0u8; 8];
    for (dst, src) in bytes.iter_mut().zip(rest) {
        *dst = *src;
    }
    u64::from_be_bytes(bytes)
}

/// The shortest key `T` (after `prefix`) such that, for every key `k` that starts with `prefix`,
/// `project(k, prefix.len()) >= x` exactly when `k >= prefix ++ T`.
///
/// `T` is `x`'s 8 big-endian bytes with trailing zero bytes removed. Proof sketch: projection is
/// monotone, so `k >= T` gives `project(k) >= project(T) = x`. If `k < T`, either `k` differs
/// from `T` first at a position `j < len(T) <= 8` with a smaller byte, so its projection is smaller,
/// or `k` is a proper prefix of `T`, and since `T`'s last byte is non-zero, `k`'s zero padding
/// compares below `T` there. This is what makes model-derived page fences agree with the model.
pub fn fence_for_projection(prefix: &[u8], x: u64) -> Vec<u8> {
    let bytes = x.to_be_bytes();
    let len = 8 - (x.trailing_zeros() as usize / 8).min(8);
    let mut fence = Vec::with_capacity(prefix.len() + len);
    fence.extend_from_slice(prefix);
    fence.extend_from_slice(bytes.get(..len).unwrap_or(&bytes));
    fence
}

#[cfg(test)]
mod tests {
    /// Every key below a bound maps below its `project_upper_exclusive`, and the bound is tight:
    /// a fence bounds exactly, keys sharing their 8 projected bytes (the hex keys of the
    /// forecasting test) make a non-empty range.
    #[test]
    fn keys_below_a_key_map_below_its_upper_bound() {
        let map = KeyMap::new(b"user:");
        let mut keys: Vec<Vec<u8>> = [
            &b""[..],
            b"a",
            b"user",
            b"user:",
            b"user:\x00",
            b"user:ab",
            b"user:ab\x00",
            b"user:abcdefgh",
            b"user:abcdefgh\x00",
            b"user:abcdefghij",
            b"user:abcdefgi",
            b"user:\xff\xff\xff\xff\xff\xff\xff\xff",
            b"user:\xff\xff\xff\xff\xff\xff\xff\xff\x01",
            b"user;",
            b"v",
        ]
        .iter()
        .map(|k| k.to_vec())
        .collect();
        keys.sort();
        for (i, bound) in keys.iter().enumerate() {
            let upper = map.project_upper_exclusive(bound);
            for below in &keys[..i] {
                assert!(upper.is_none_or(|u| map.project(below) < u), "{below:?} < {bound:?}");
            }
        }
        assert_eq!(map.project_upper_exclusive(b"user:ab"), Some(0x6162_0000_0000_0000));
        assert_eq!(map.project_upper_exclusive(b"user:ab\x00"), Some(0x6162_0000_0000_0001));
        assert_eq!(map.project_upper_exclusive(b"user:abcdefghij"), Some(map.project(b"user:abcdefgh") + 1));
        assert_eq!(map.project_upper_exclusive(b"zzz"), None);
        assert_eq!(map.project_upper_exclusive(b"aaa"), Some(1), "keys below the prefix map to 0");
    }

    #[test]
    fn key_map_skips_the_prefix_and_clamps_keys_outside_it() {
        let map = KeyMap::new(b"user:");
        assert_eq!(map.project(b"user:ab"), 0x6162_0000_0000_0000);
        assert_eq!(map.project(b"aaa"), 0, "below the prefix");
        assert_eq!(map.project(b"zzz"), u64::MAX, "above it");
        assert_eq!(map.project(b"user"), 0, "a proper prefix of the prefix sorts below it");
        let mut keys: Vec<&[u8]> =
            vec![b"", b"a", b"user", b"user:", b"user:\x00", b"user:zz", b"user;", b"v"];
        keys.sort();
        let projected: Vec<u64> = keys.iter().map(|k| map.project(k)).collect();
        assert!(projected.windows(2).all(|w| w[0] <= w[1]), "monotone: {projected:?}");
        assert_eq!(KeyMap::new(&[7; 100]).prefix().len(), KeyMap::MAX_PREFIX_BYTES);
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn projection_examples() {
        assert_eq!(project(b"", 0), 0);
        assert_eq!(project(b"a", 0), 0x6100_0000_0000_0000);
        assert_eq!(project(b"abcdefghij", 0), u64::from_be_bytes(*b"abcdefgh"));
        assert_eq!(project(b"user:42", 5), 0x3432_0000_0000_0000);
        assert_eq!(project(b"us", 5), 0, "shorter than the prefix");
        assert_eq!(project(b"ab", 0), project(b"ab\0", 0), "trailing zeros collide");
    }

    #[test]
    fn common_prefix_examples() {
        assert_eq!(common_prefix(b"", b"abc"), 0);
        assert_eq!(common_prefix(b"abc", b"abd"), 2);
        assert_eq!(common_prefix(b"abc", b"abc"), 3);
        assert_eq!(common_prefix(b"ab", b"abc"), 2);
    }

    #[test]
    fn fence_examples() {
        assert_eq!(fence_for_projection(b"p", 0), b"p".to_vec());
        assert_eq!(fence_for_projection(b"", 0x6162_0000_0000_0000), b"ab".to_vec());
        assert_eq!(fence_for_projection(b"", u64::MAX), vec![0xff; 8]);
        assert_eq!(fence_for_projection(b"", 1), vec![0, 0, 0, 0, 0, 0, 0, 1]);
    }

    proptest! {
        #[test]
        fn projection_is_order_preserving(
            prefix in proptest::collection::vec(any::<u8>(), 0..4),
            a in proptest::collection::vec(any::<u8>(), 0..12),
            b in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let ka = [prefix.clone(), a].concat();
            let kb = [prefix.clone(), b].concat();
            let (lo, hi) = if ka <= kb { (ka, kb) } else { (kb, ka) };
            prop_assert!(project(&lo, prefix.len()) <= project(&hi, prefix.len()));
            prop_assert!(common_prefix(&lo, &hi) >= prefix.len());
        }

        #[test]
        fn fence_agrees_with_projection(
            prefix in proptest::collection::vec(any::<u8>(), 0..3),
            k in proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(0xffu8), any::<u8>()], 0..11),
            x in prop_oneof![any::<u64>(), (0u64..256).prop_map(|v| v << 56), Just(0u64)],
        ) {
            let key = [prefix.clone(), k].concat();
            let fence = fence_for_projection(&prefix, x);
            prop_assert_eq!(project(&key, prefix.len()) >= x, key >= fence);
        }
    }
}
