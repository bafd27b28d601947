//! Little-endian integers at byte offsets of on-disk buffers, for decoders of untrusted bytes:
//! `None` when the buffer ends first (including an offset so large that `at + width` overflows),
//! never a panic.

pub fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

pub fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_in_range_and_none_past_the_end() {
        let bytes = [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(u32_at(&bytes, 0), Some(1));
        assert_eq!(u64_at(&bytes, 4), Some(2));
        assert_eq!(u32_at(&bytes, 9), None);
        assert_eq!(u64_at(&bytes, 5), None);
        assert_eq!(u32_at(&bytes, usize::MAX - 1), None);
        assert_eq!(u64_at(&bytes, usize::MAX), None);
    }
}
