//! Unsigned LEB128 varints: 7 bits per byte, low group first, the high bit set on every byte but
//! the last. Decoding untrusted bytes never panics: `None` when the bytes end first or the value
//! does not fit a u64 (more than 10 bytes, or bits beyond 64).

/// Appends `value`.
pub fn put(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Bytes `put` writes for `value`.
pub fn len(mut value: u64) -> usize {
    let mut n = 1;
    while value >= 0x80 {
        value >>= 7;
        n += 1;
    }
    n
}

/// The varint at `bytes[at..]` and the offset just after it.
pub fn get(bytes: &[u8], at: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = *bytes.get(at.checked_add(i)?)?;
        let group = u64::from(byte & 0x7f);
        if i == 9 && group > 1 {
            return None;
        }
        value |= group << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, at + i + 1));
        }
    }
    None
}

/// `get`, for a value that must fit a `usize` no larger than `u32::MAX`.
pub fn get_u32(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let (value, next) = get(bytes, at)?;
    let value = u32::try_from(value).ok()?;
    Some((value as usize, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_lengths() {
        for value in [0, 1, 127, 128, 300, 16_383, 16_384, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            put(&mut out, value);
            assert_eq!(out.len(), len(value), "{value}");
            assert_eq!(get(&out, 0), Some((value, out.len())), "{value}");
        }
        let mut out = Vec::new();
        put(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
    }

    #[test]
    fn truncated_or_oversized_varints_are_none() {
        assert_eq!(get(&[0x80], 0), None);
        assert_eq!(get(&[], 0), None);
        assert_eq!(get(&[0xff; 10], 0), None);
        assert_eq!(get(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02], 0), None);
        assert_eq!(get(&[0x01], usize::MAX), None);
        let mut big = Vec::new();
        put(&mut big, u64::from(u32::MAX) + 1);
        assert_eq!(get_u32(&big, 0), None);
    }
}
