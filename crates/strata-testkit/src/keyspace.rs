//! The keys and values conformance and fault runs draw from: a small key space with shared
//! prefixes (so ranges cover interesting neighbourhoods), the empty key, a few long keys; values
//! from empty to a few KiB.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Key, Limits, Value};

/// Prefixes of the regular keys; they nest ("a" < "ab" < "abc") and straddle byte extremes.
const KEY_PREFIXES: [&[u8]; 7] = [b"a", b"ab", b"abc", b"b", b"b\x00", b"user:", b"\xff"];
/// Keys per prefix besides the bare prefix itself.
const KEYS_PER_PREFIX: u8 = 8;
const NUMBERED_KEYS: usize = 16;
const LONG_KEYS: u8 = 3;
const LONG_KEY_MAX_BYTES: usize = 1024;
/// Largest value drawn, before the engine's limit.
const VALUE_MAX_BYTES: usize = 4096;

#[derive(Debug)]
pub(crate) struct KeySpace {
    regular: Vec<Key>,
    long: Vec<Key>,
    empty_key_allowed: bool,
    /// Prefixes used for `KeyRange::prefix` scans.
    scan_prefixes: Vec<Key>,
    value_max_bytes: usize,
}

impl KeySpace {
    pub(crate) fn new(seed: u64, limits: Limits) -> KeySpace {
        let mut rng = SmallRng::seed_from_u64(crate::seed::derive(seed, 0x6b65_7973));
        let fits = |k: &Key| k.len() <= limits.max_key_bytes;
        let mut regular = Vec::new();
        for prefix in KEY_PREFIXES {
            regular.push(prefix.to_vec());
            for i in 0..KEYS_PER_PREFIX {
                let mut key = prefix.to_vec();
                key.extend_from_slice(&[b'/', b'0' + i]);
                regular.push(key);
            }
        }
        regular.extend((0..NUMBERED_KEYS).map(|i| format!("k{i:02}").into_bytes()));
        regular.retain(fits);
        let long_max_bytes = LONG_KEY_MAX_BYTES.min(limits.max_key_bytes);
        let mut long = Vec::new();
        if long_max_bytes > 100 {
            for i in 0..LONG_KEYS {
                let len = rng.gen_range(100..=long_max_bytes);
                let mut key = b"long/".to_vec();
                key.push(b'a' + i);
                key.resize(len, b'.');
                if let Some(last) = key.last_mut() {
                    *last = b'0' + i;
                }
                long.push(key);
            }
        }
        let mut scan_prefixes: Vec<Key> = vec![b"".to_vec(), b"a".to_vec(), b"ab".to_vec(), b"b".to_vec()];
        scan_prefixes.extend([b"abc/".to_vec(), b"user:".to_vec(), b"\xff".to_vec(), b"long/".to_vec()]);
        scan_prefixes.extend([b"k0".to_vec(), b"b\x00".to_vec(), b"zz".to_vec()]);
        KeySpace {
            regular,
            long,
            empty_key_allowed: limits.max_key_bytes > 0,
            scan_prefixes,
            value_max_bytes: VALUE_MAX_BYTES.min(limits.max_value_bytes),
        }
    }

    /// Every key a write can pick.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Key> + '_ {
        let empty: &'static Key = &EMPTY_KEY;
        let empty = self.empty_key_allowed.then_some(empty);
        self.regular.iter().chain(&self.long).chain(empty)
    }

    pub(crate) fn write_key(&self, rng: &mut SmallRng) -> Key {
        let roll = rng.gen_range(0..100);
        if roll < 3 && !self.long.is_empty() {
            return self.long[rng.gen_range(0..self.long.len())].clone();
        }
        if (roll < 5 && self.empty_key_allowed) || self.regular.is_empty() {
            return Vec::new();
        }
        self.regular[rng.gen_range(0..self.regular.len())].clone()
    }

    /// Mostly keys writes use; sometimes a key no write ever uses.
    pub(crate) fn read_key(&self, rng: &mut SmallRng) -> Key {
        let mut key = self.write_key(rng);
        if rng.gen_range(0..10) == 0 {
            key.push(b'~');
        }
        key
    }

    /// A key for a range bound: a key of the space, or one just beside it.
    pub(crate) fn bound_key(&self, rng: &mut SmallRng) -> Key {
        let mut key = self.write_key(rng);
        match rng.gen_range(0..10) {
            0 => key.push(0),
            1 => key.push(rng.gen()),
            2 => {
                key.pop();
            }
            _ => {}
        }
        key
    }

    pub(crate) fn scan_prefix(&self, rng: &mut SmallRng) -> Key {
        self.scan_prefixes[rng.gen_range(0..self.scan_prefixes.len())].clone()
    }

    /// A value whose leading bytes are `serial`, so distinct writes carry distinct values.
    pub(crate) fn value(&self, rng: &mut SmallRng, serial: u64) -> Value {
        let len = match rng.gen_range(0..100) {
            0..=7 => 0,
            8..=67 => rng.gen_range(1..=16),
            68..=92 => rng.gen_range(17..=256),
            _ => rng.gen_range(257..=VALUE_MAX_BYTES),
        };
        filled_value(len.min(self.value_max_bytes), serial)
    }
}

static EMPTY_KEY: Key = Vec::new();

/// `len` bytes: `serial` little-endian, then a filler stream derived from it.
pub(crate) fn filled_value(len: usize, serial: u64) -> Value {
    let mut value = Vec::with_capacity(len);
    let mut x = serial.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    value.extend(serial.to_le_bytes().iter().take(len));
    while value.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let take = (len - value.len()).min(8);
        value.extend(x.to_le_bytes().iter().take(take));
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_key_bytes: usize) -> Limits {
        Limits { max_key_bytes, max_value_bytes: 1 << 20, max_batch_bytes: 1 << 22 }
    }

    #[test]
    fn keys_respect_the_limit_and_include_edge_cases() {
        let space = KeySpace::new(1, limits(200));
        assert!(space.all().all(|k| k.len() <= 200));
        assert!(space.all().any(|k| k.is_empty()));
        assert!(space.all().any(|k| k.len() > 100));
        assert!(space.all().count() > 70);
        let tiny = KeySpace::new(1, limits(3));
        assert!(tiny.all().all(|k| k.len() <= 3));
        assert!(!tiny.all().any(|k| k.len() > 100));
    }

    #[test]
    fn values_are_deterministic_and_sized() {
        assert_eq!(filled_value(0, 9), Vec::<u8>::new());
        assert_eq!(filled_value(3, 0x0102_0304), vec![4, 3, 2]);
        assert_eq!(filled_value(100, 7), filled_value(100, 7));
        assert_ne!(filled_value(100, 7), filled_value(100, 8));
        assert_eq!(filled_value(4000, 1).len(), 4000);
    }
}
