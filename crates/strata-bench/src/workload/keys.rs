//! Record shapes: how a key number becomes key bytes, how long values are, and the size presets.

/// YCSB's `Utils.fnvhash64`: [`fnv1_64`], then `Math.abs` (which leaves `i64::MIN` negative,
/// exactly as Java does; callers reinterpret it as `u64`).
pub fn fnv_hash64(value: u64) -> u64 {
    (fnv1_64(value) as i64).wrapping_abs() as u64
}

/// FNV-1 over the 8 little-end-first bytes of `value`, unsigned (ycsbr's `FNVHash64`; YCSB's
/// `fnvhash64` takes the absolute value of this).
pub fn fnv1_64(mut value: u64) -> u64 {
    const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
    const FNV_PRIME_64: u64 = 1_099_511_628_211;
    let mut hash = FNV_OFFSET_BASIS_64;
    for _ in 0..8 {
        let octet = value & 0xff;
        value >>= 8;
        hash ^= octet;
        hash = hash.wrapping_mul(FNV_PRIME_64);
    }
    hash
}

/// A bijection on `u64` (MurmurHash3's finalizer): distinct key numbers give distinct keys, and
/// consecutive key numbers land far apart in key order.
pub fn scramble64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyFormat {
    /// Big-endian 8-byte integer, left-padded with zero bytes to the key size.
    Int,
    /// YCSB's `user<digits>`.
    String,
}

/// Bytes YCSB's string keys need at most: `user` + 19 digits of a non-negative `i64`.
pub const MAX_NATURAL_STRING_KEY_BYTES: usize = 4 + 19;

/// How key number `n` (0, 1, 2, ... in insertion order) becomes key bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KeySpec {
    pub format: KeyFormat,
    /// Int: total key size (≥ 8). String: total size with zero-padded digits, or `None` for
    /// YCSB's natural variable length.
    pub key_bytes: Option<usize>,
    /// YCSB `insertorder=hashed`: key numbers are hashed, so insertion order is not key order.
    /// `false` is YCSB's `ordered`: keys ascend with insertion order.
    pub hashed: bool,
    /// `--insert-keys clustered`: new keys land in a few hot gaps of the loaded key space
    /// instead of where their own key numbers map (`None`: YCSB's spread).
    pub clustered_inserts: Option<ClusteredInserts>,
}

/// Where inserted keys go under `--insert-keys clustered`: the key number of every insert (from
/// `loaded_records` on) is hashed to one of `hot_regions` evenly spaced loaded records, and the new
/// key sorts just after that record's key (before the next loaded key, almost surely). The hot
/// regions never change, so the inserts keep landing where they landed before — the shape insert
/// forecasting (TreeLine §5.5, its taxi dataset's popular pickup areas) is built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ClusteredInserts {
    pub loaded_records: u64,
    pub hot_regions: u64,
}

impl ClusteredInserts {
    /// One hot region per this many loaded records, unless `--insert-keys clustered:N` says.
    pub const RECORDS_PER_HOT_REGION: u64 = 1_000;

    pub fn for_records(loaded_records: u64) -> ClusteredInserts {
        Self::with_spacing(loaded_records, Self::RECORDS_PER_HOT_REGION)
    }

    /// One hot region per `records_per_hot_region` (>= 1) loaded records.
    pub fn with_spacing(loaded_records: u64, records_per_hot_region: u64) -> ClusteredInserts {
        let hot_regions = (loaded_records / records_per_hot_region.max(1)).max(1);
        ClusteredInserts { loaded_records, hot_regions }
    }

    /// The loaded record an insert follows, and a hash that places it after that record.
    fn base_of(&self, keynum: u64) -> Option<(u64, u64)> {
        if keynum < self.loaded_records {
            return None;
        }
        let hash = scramble64(keynum ^ 0x636c_7573_7465_7273);
        let spacing = (self.loaded_records / self.hot_regions.max(1)).max(1);
        Some(((hash % self.hot_regions.max(1)) * spacing, hash))
    }
}

impl KeySpec {
    /// Checks the size against the format. The error is one sentence.
    pub fn validate(&self) -> Result<(), String> {
        match (self.format, self.key_bytes) {
            (KeyFormat::Int, Some(n)) if !(8..=4096).contains(&n) => {
                Err(format!("--key-bytes {n}: integer keys need 8 to 4096 bytes"))
            }
            (KeyFormat::String, Some(n)) if !(MAX_NATURAL_STRING_KEY_BYTES..=4096).contains(&n) => Err(format!(
                "--key-bytes {n}: string keys (user + up to 19 digits) need {MAX_NATURAL_STRING_KEY_BYTES} to 4096 bytes"
            )),
            _ => Ok(()),
        }
    }

    /// Writes the key for key number `keynum` into `out` (cleared first).
    pub fn write_key(&self, keynum: u64, out: &mut Vec<u8>) {
        match self.clustered_inserts.and_then(|c| c.base_of(keynum)) {
            Some((base, hash)) => {
                self.write_loaded_key(base, out);
                place_after(self.format, hash, out);
            }
            None => self.write_loaded_key(keynum, out),
        }
    }

    fn write_loaded_key(&self, keynum: u64, out: &mut Vec<u8>) {
        out.clear();
        match self.format {
            KeyFormat::Int => {
                let n = if self.hashed { scramble64(keynum) } else { keynum };
                let pad = self.key_bytes.unwrap_or(8).saturating_sub(8);
                out.resize(pad, 0);
                out.extend_from_slice(&n.to_be_bytes());
            }
            KeyFormat::String => {
                let n = if self.hashed { fnv_hash64(keynum) } else { keynum };
                let mut digits = [0u8; 20];
                let mut at = digits.len();
                let mut rest = n;
                loop {
                    at -= 1;
                    digits[at] = b'0' + (rest % 10) as u8;
                    rest /= 10;
                    if rest == 0 {
                        break;
                    }
                }
                let digits = &digits[at..];
                out.extend_from_slice(b"user");
                if let Some(total) = self.key_bytes {
                    let fill = total.saturating_sub(4 + digits.len());
                    out.resize(4 + fill, b'0');
                }
                out.extend_from_slice(digits);
            }
        }
    }

    /// Bytes of a typical key (exact for fixed-size keys; YCSB's natural string keys are ~23 B).
    pub fn typical_key_bytes(&self) -> usize {
        match (self.format, self.key_bytes) {
            (KeyFormat::Int, n) => n.unwrap_or(8),
            (KeyFormat::String, Some(n)) => n,
            (KeyFormat::String, None) => MAX_NATURAL_STRING_KEY_BYTES,
        }
    }
}

/// Turns the loaded key in `out` into a new key just after it: integer keys add 1 to 2^32 to
/// their last 8 bytes (the gap to the next of N hashed keys is about 2^64 / N), string keys get
/// `.` and 16 hex digits (`.` sorts below every digit, so before the next loaded key).
fn place_after(format: KeyFormat, hash: u64, out: &mut Vec<u8>) {
    match format {
        KeyFormat::Int => {
            let at = out.len().saturating_sub(8);
            let mut last = [0u8; 8];
            last.copy_from_slice(&out[at..]);
            let bumped = u64::from_be_bytes(last).saturating_add(1 + (hash >> 32));
            out[at..].copy_from_slice(&bumped.to_be_bytes());
        }
        KeyFormat::String => out.extend_from_slice(format!(".{hash:016x}").as_bytes()),
    }
}

/// Value sizes: fixed, or uniform over an inclusive range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ValueSpec {
    pub min_bytes: usize,
    pub max_bytes: usize,
}

impl ValueSpec {
    pub const MAX_VALUE_BYTES: usize = 16 << 20;

    pub fn fixed(bytes: usize) -> Self {
        ValueSpec { min_bytes: bytes, max_bytes: bytes }
    }

    /// Parses `N` or `MIN..MAX` (inclusive).
    pub fn parse(text: &str) -> Result<Self, String> {
        let num = |s: &str| {
            s.trim().parse::<usize>().map_err(|_| format!("--value-bytes {text:?}: expected N or MIN..MAX"))
        };
        let spec = match text.split_once("..") {
            Some((lo, hi)) => ValueSpec { min_bytes: num(lo)?, max_bytes: num(hi.trim_start_matches('='))? },
            None => ValueSpec::fixed(num(text)?),
        };
        if spec.min_bytes > spec.max_bytes {
            return Err(format!("--value-bytes {text:?}: MIN is larger than MAX"));
        }
        if spec.max_bytes > Self::MAX_VALUE_BYTES {
            return Err(format!("--value-bytes {text:?}: at most {} bytes", Self::MAX_VALUE_BYTES));
        }
        Ok(spec)
    }

    pub fn mean_bytes(&self) -> f64 {
        (self.min_bytes + self.max_bytes) as f64 / 2.0
    }

    pub fn is_fixed(&self) -> bool {
        self.min_bytes == self.max_bytes
    }
}

impl std::fmt::Display for ValueSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_fixed() {
            write!(f, "{} B", self.min_bytes)
        } else {
            write!(f, "{}..={} B", self.min_bytes, self.max_bytes)
        }
    }
}

/// Named record shapes from YCSB and the papers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    pub name: &'static str,
    pub format: KeyFormat,
    pub key_bytes: Option<usize>,
    pub value_bytes: usize,
    pub what: &'static str,
}

pub const PRESETS: [Preset; 7] = [
    Preset {
        name: "default",
        format: KeyFormat::Int,
        key_bytes: Some(8),
        value_bytes: 120,
        what: "8 B integer keys, 120 B values",
    },
    Preset {
        name: "ycsb",
        format: KeyFormat::String,
        key_bytes: None,
        value_bytes: 1000,
        what: "YCSB CoreWorkload: user<digits> keys, 10 fields x 100 B stored as one 1000 B value",
    },
    Preset {
        name: "64b",
        format: KeyFormat::Int,
        key_bytes: Some(8),
        value_bytes: 56,
        what: "64 B records: 8 B keys, 56 B values",
    },
    Preset {
        name: "1kb",
        format: KeyFormat::Int,
        key_bytes: Some(8),
        value_bytes: 1016,
        what: "1 KiB records: 8 B keys, 1016 B values",
    },
    Preset {
        name: "udb",
        format: KeyFormat::Int,
        key_bytes: Some(27),
        value_bytes: 127,
        what: "FlexDB's UDB (Facebook): 27 B keys, 127 B values",
    },
    Preset {
        name: "zippydb",
        format: KeyFormat::Int,
        key_bytes: Some(48),
        value_bytes: 43,
        what: "FlexDB's ZippyDB (Facebook): 48 B keys, 43 B values",
    },
    Preset {
        name: "sys",
        format: KeyFormat::Int,
        key_bytes: Some(28),
        value_bytes: 396,
        what: "FlexDB's SYS (Facebook): 28 B keys, 396 B values",
    },
];

pub fn preset(name: &str) -> Result<Preset, String> {
    PRESETS.iter().copied().find(|p| p.name == name).ok_or_else(|| {
        let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
        format!("unknown --preset {name:?}; expected one of: {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Clustered inserts land right after one of the hot loaded keys, before the next loaded key,
    /// and only in those gaps; loaded keys are unchanged.
    #[test]
    fn clustered_inserts_land_in_the_hot_gaps_only() {
        for format in [KeyFormat::Int, KeyFormat::String] {
            let loaded = 20_000;
            let spread = KeySpec { format, key_bytes: None, hashed: true, clustered_inserts: None };
            let clustered =
                KeySpec { clustered_inserts: Some(ClusteredInserts::for_records(loaded)), ..spread };
            let key = |spec: &KeySpec, n: u64| {
                let mut out = Vec::new();
                spec.write_key(n, &mut out);
                out
            };
            assert_eq!(key(&clustered, 123), key(&spread, 123), "{format:?}: a loaded key");
            let mut sorted: Vec<Vec<u8>> = (0..loaded).map(|n| key(&spread, n)).collect();
            sorted.sort();
            let mut gaps = std::collections::BTreeSet::new();
            for n in loaded..loaded + 2_000 {
                let new = key(&clustered, n);
                let after = sorted.partition_point(|k| *k < new);
                let base = &sorted[after - 1];
                assert!(base < &new && sorted.get(after).is_none_or(|next| new < *next), "{format:?}");
                let base_keynum = (0..loaded).step_by(1_000).find(|&b| key(&spread, b) == *base);
                assert!(base_keynum.is_some(), "{format:?}: key {n} follows a record that is not hot");
                gaps.insert(after);
            }
            assert_eq!(gaps.len(), 20, "{format:?}: 2,000 inserts over all 20 hot gaps");
        }
    }

    #[test]
    fn fnv_matches_ycsb_reference_values() {
        // Computed independently with Java `long` semantics (signed wrapping multiply, Math.abs).
        for (input, expected) in [
            (0, 6_284_781_860_667_377_211),
            (1, 8_517_097_267_634_966_620),
            (42, 55_488_592_825_689_361),
            (12_345, 1_792_800_413_050_876_852),
            (9_999_999_999, 3_605_131_173_811_637_474),
        ] {
            assert_eq!(fnv_hash64(input), expected, "fnv_hash64({input})");
        }
    }

    #[test]
    fn int_keys_are_unique_padded_and_scrambled() {
        let spec =
            KeySpec { format: KeyFormat::Int, key_bytes: Some(27), hashed: true, clustered_inserts: None };
        let mut keys = std::collections::BTreeSet::new();
        let mut k = Vec::new();
        for n in 0..10_000 {
            spec.write_key(n, &mut k);
            assert_eq!(k.len(), 27);
            assert!(k[..19].iter().all(|&b| b == 0));
            keys.insert(k.clone());
        }
        assert_eq!(keys.len(), 10_000);
        // Hashed: key order is not insertion order.
        let order: Vec<u64> =
            keys.iter().map(|k| u64::from_be_bytes(k[19..].try_into().unwrap())).take(10).collect();
        assert!(order.windows(2).any(|w| w[0] + 1 != w[1]));
        let ordered = KeySpec { hashed: false, ..spec };
        ordered.write_key(5, &mut k);
        assert_eq!(&k[19..], &5u64.to_be_bytes());
    }

    #[test]
    fn string_keys_look_like_ycsb() {
        let natural =
            KeySpec { format: KeyFormat::String, key_bytes: None, hashed: false, clustered_inserts: None };
        let mut k = Vec::new();
        natural.write_key(42, &mut k);
        assert_eq!(k, b"user42");
        let padded = KeySpec { key_bytes: Some(24), ..natural };
        padded.write_key(42, &mut k);
        assert_eq!(k, b"user00000000000000000042");
        let hashed = KeySpec { hashed: true, ..natural };
        hashed.write_key(42, &mut k);
        assert_eq!(k, format!("user{}", fnv_hash64(42)).into_bytes());
        assert!(KeySpec { key_bytes: Some(10), ..natural }.validate().is_err());
    }

    #[test]
    fn value_spec_parsing() {
        assert_eq!(ValueSpec::parse("120").unwrap(), ValueSpec::fixed(120));
        assert_eq!(ValueSpec::parse("10..20").unwrap(), ValueSpec { min_bytes: 10, max_bytes: 20 });
        assert_eq!(ValueSpec::parse("10..=20").unwrap(), ValueSpec { min_bytes: 10, max_bytes: 20 });
        assert!(ValueSpec::parse("20..10").is_err());
        assert!(ValueSpec::parse("abc").is_err());
        assert!(ValueSpec::parse("-1").is_err());
        assert!(preset("udb").unwrap().key_bytes == Some(27));
        assert!(preset("nope").is_err());
    }
}
