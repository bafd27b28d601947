//! The key hash. It is persisted indirectly (it picks hash chunks and chunk slots of the cold
//! index), so it must never change: FNV-1a over the key, finished with murmur3's 64-bit mixer.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

pub fn key_hash(key: &[u8]) -> u64 {
    let mut h = FNV_OFFSET;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    fmix64(h ^ key.len() as u64)
}

fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pinned values: a change here would break the cold index of existing stores.
    #[test]
    fn hash_is_stable() {
        assert_eq!(key_hash(b""), fmix64(FNV_OFFSET));
        // Computed independently (FNV-1a 64 over the key, xor the length, murmur3 fmix64).
        assert_eq!(key_hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(key_hash(b"user:1"), 0x3fa2_efa0_2dae_96f5);
        assert_eq!(key_hash(b"user:2"), 0x7f04_0b85_e4ef_f1ae);
        assert_eq!(key_hash(&[0, 1, 2, 3, 4, 5, 6, 7]), 0xa3f5_8b16_a9fa_152f);
        let a = key_hash(b"user:1");
        assert_eq!(a, key_hash(b"user:1"));
        assert_ne!(a, key_hash(b"user:2"));
    }
}
