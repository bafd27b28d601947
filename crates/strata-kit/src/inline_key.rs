//! `InlineKey`: a key held inline (up to `INLINE_KEY_BYTES`) where keys are compared often, such
//! as ordered-map nodes and cache slots: a search compares bytes in the node or slot it is reading
//! instead of following one pointer per key to a heap buffer (each a likely CPU cache miss).
//! Longer keys spill to the heap.

/// Keys up to this long are held inline.
pub const INLINE_KEY_BYTES: usize = 32;

/// A key held inline up to `INLINE_KEY_BYTES` (48 B with smallvec 1.x), else on the heap.
pub type InlineKey = smallvec::SmallVec<[u8; INLINE_KEY_BYTES]>;

/// `key` as an `InlineKey`: inline whenever it fits. (`SmallVec::from_vec` goes by the vector's
/// capacity, so a short key in a roomy vector would stay on the heap.)
pub fn from_vec(key: Vec<u8>) -> InlineKey {
    match key.len() <= INLINE_KEY_BYTES {
        true => InlineKey::from_slice(&key),
        false => InlineKey::from_vec(key),
    }
}

/// What a heap buffer of `len` bytes costs the allocator (glibc: an 8 B header, 16 B granules,
/// 32 B minimum); an empty buffer allocates nothing. Counting this keeps memory accounting honest
/// for small records.
pub fn heap_bytes(len: usize) -> u64 {
    if len == 0 {
        0
    } else {
        ((len as u64 + 8).next_multiple_of(16)).max(32)
    }
}

/// What a key of this length costs besides its `InlineKey` slot: a heap buffer when it is too
/// long to be inline.
pub fn key_heap_bytes(len: usize) -> u64 {
    if len > INLINE_KEY_BYTES {
        heap_bytes(len)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_key_is_inline_whatever_its_vectors_capacity() {
        let mut roomy = Vec::with_capacity(4 * INLINE_KEY_BYTES);
        roomy.extend_from_slice(b"user12");
        assert!(!from_vec(roomy).spilled());
        assert!(!from_vec(vec![7; INLINE_KEY_BYTES]).spilled());
        assert!(from_vec(vec![7; INLINE_KEY_BYTES + 1]).spilled());
    }
}
