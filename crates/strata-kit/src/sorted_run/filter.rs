//! A run's filter (docs/format/sorted-run.md, "Filter block"): a binary fuse filter with 8-bit
//! fingerprints (`xorf::BinaryFuse8`) over the XXH3-64 hashes of the run's keys. About 9 bits
//! per key and 1/256 false positives: it needs every key before it is built, which a run, written
//! once, has. Decoding checks the descriptor against the fingerprints so a lookup stays in bounds.

use xorf::{BinaryFuse8, Filter};

/// Filter kind byte: none (every key may be present).
const KIND_NONE: u8 = 0;
/// Filter kind byte: binary fuse, 8-bit fingerprints.
const KIND_BINARY_FUSE_8: u8 = 1;
/// Bytes before the fingerprints of a binary fuse filter block.
pub const BINARY_FUSE_HEADER_BYTES: usize = 21;

/// The hash a run's filter holds for `key`.
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// A run's filter.
#[derive(Clone, Debug)]
pub enum RunFilter {
    /// Every key may be present (an empty run, or a filter that could not be built).
    None,
    BinaryFuse8(BinaryFuse8),
}

impl RunFilter {
    /// The filter of the keys whose hashes are `hashes` (any order, duplicates allowed).
    pub fn build(mut hashes: Vec<u64>) -> RunFilter {
        hashes.sort_unstable();
        hashes.dedup();
        if hashes.is_empty() {
            return RunFilter::None;
        }
        // Construction fails only on duplicate hashes (removed above) or, with negligible
        // probability, after many seeds: then the run goes without a filter.
        BinaryFuse8::try_from(&hashes).map_or(RunFilter::None, RunFilter::BinaryFuse8)
    }

    /// False only when `key` is certainly not in the run.
    pub fn may_contain(&self, key: &[u8]) -> bool {
        match self {
            RunFilter::None => true,
            RunFilter::BinaryFuse8(filter) => filter.contains(&key_hash(key)),
        }
    }

    /// Bytes of memory the filter holds.
    pub fn memory_bytes(&self) -> usize {
        match self {
            RunFilter::None => 0,
            RunFilter::BinaryFuse8(filter) => filter.fingerprints.len() + BINARY_FUSE_HEADER_BYTES,
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        match self {
            RunFilter::None => vec![KIND_NONE],
            RunFilter::BinaryFuse8(filter) => {
                let d = &filter.descriptor;
                let mut out = Vec::with_capacity(BINARY_FUSE_HEADER_BYTES + filter.fingerprints.len());
                out.push(KIND_BINARY_FUSE_8);
                out.extend_from_slice(&d.seed.to_le_bytes());
                out.extend_from_slice(&d.segment_length.to_le_bytes());
                out.extend_from_slice(&d.segment_length_mask.to_le_bytes());
                out.extend_from_slice(&d.segment_count_length.to_le_bytes());
                out.extend_from_slice(&filter.fingerprints);
                out
            }
        }
    }

    /// Decodes a filter block (its checksum already checked).
    pub fn decode(bytes: &[u8]) -> Result<RunFilter, String> {
        use strata_core::le_bytes::{u32_at, u64_at};
        match bytes.first() {
            Some(&KIND_NONE) if bytes.len() == 1 => Ok(RunFilter::None),
            Some(&KIND_BINARY_FUSE_8) => {
                let short = || "filter block shorter than its header".to_string();
                let seed = u64_at(bytes, 1).ok_or_else(short)?;
                let segment_length = u32_at(bytes, 9).ok_or_else(short)?;
                let segment_length_mask = u32_at(bytes, 13).ok_or_else(short)?;
                let segment_count_length = u32_at(bytes, 17).ok_or_else(short)?;
                let fingerprints = &bytes[BINARY_FUSE_HEADER_BYTES..];
                let expected = u64::from(segment_count_length) + 2 * u64::from(segment_length);
                let consistent = segment_length.is_power_of_two()
                    && segment_length_mask == segment_length - 1
                    && segment_count_length > 0
                    && segment_count_length.is_multiple_of(segment_length)
                    && expected <= u64::from(u32::MAX)
                    && fingerprints.len() as u64 == expected;
                if !consistent {
                    return Err(format!(
                        "filter descriptor (segment length {segment_length}, mask {segment_length_mask}, \
                         count length {segment_count_length}) does not match {} fingerprints",
                        fingerprints.len()
                    ));
                }
                let descriptor =
                    xorf::Descriptor { seed, segment_length, segment_length_mask, segment_count_length };
                Ok(RunFilter::BinaryFuse8(BinaryFuse8 { descriptor, fingerprints: fingerprints.into() }))
            }
            Some(kind) => Err(format!("unknown filter kind {kind} or trailing bytes")),
            None => Err("empty filter block".into()),
        }
    }
}
