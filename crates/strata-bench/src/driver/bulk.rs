//! `--load-mode bulk`: every record sorted by key and handed to the adapter's `bulk_load` on one
//! thread, the way TreeLine's benchmarks load every system (ycsbr's bulk-load trace).

use std::time::Instant;

use rand::rngs::SmallRng;
use rand::SeedableRng;

use crate::adapter::KvAdapter;
use crate::driver::PhaseMeasurement;
use crate::workload::trace::{draw_value, stream_seed, value_pool, TraceParams};
use crate::workload::KeySpec;

/// The load's keys, sorted and distinct, in one buffer (no allocation per key: 20M keys fit).
struct SortedKeys {
    bytes: Vec<u8>,
    /// `(offset, len)` of each key in `bytes`, in key order.
    spans: Vec<(usize, u32)>,
}

impl SortedKeys {
    fn build(keys: KeySpec, records: u64) -> SortedKeys {
        let mut bytes = Vec::new();
        let mut spans = Vec::with_capacity(records as usize);
        let mut key = Vec::new();
        for keynum in 0..records {
            keys.write_key(keynum, &mut key);
            spans.push((bytes.len(), key.len() as u32));
            bytes.extend_from_slice(&key);
        }
        let key_at = |&(at, len): &(usize, u32)| &bytes[at..at + len as usize];
        spans.sort_unstable_by(|a, b| key_at(a).cmp(key_at(b)));
        spans.dedup_by(|a, b| key_at(a) == key_at(b));
        SortedKeys { bytes, spans }
    }

    fn key(&self, i: usize) -> &[u8] {
        let (at, len) = self.spans[i];
        &self.bytes[at..at + len as usize]
    }
}

/// Sorts the load's keys (not timed), then times `adapter.bulk_load` over them with values
/// drawn as the put-mode load draws them.
pub fn run_bulk_load(adapter: &dyn KvAdapter, keys: KeySpec, trace: &TraceParams) -> PhaseMeasurement {
    let sorted = SortedKeys::build(keys, trace.records);
    let pool = value_pool(trace, 0);
    let mut rng = SmallRng::seed_from_u64(stream_seed(trace.seed, u32::MAX - 1, 0));
    let mut written_bytes = 0u64;
    let mut records = (0..sorted.spans.len()).map(|i| {
        let (len, offset) = draw_value(&mut rng, trace.values);
        let value = pool[offset as usize..(offset + len) as usize].to_vec();
        let key = sorted.key(i).to_vec();
        written_bytes += (key.len() + value.len()) as u64;
        (key, value)
    });
    let started = Instant::now();
    let loaded = adapter.bulk_load(&mut records);
    let elapsed = started.elapsed();
    drop(records);
    let mut m = PhaseMeasurement { elapsed, ..PhaseMeasurement::default() };
    match loaded {
        Ok(ops) => {
            m.ops = ops;
            m.user_bytes_written = written_bytes;
            m.inserted_bytes = written_bytes;
        }
        Err(e) => m.error = Some(crate::engines::one_line(&format!("bulk load: {e:#}"))),
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{KeyFormat, ValueSpec};

    #[test]
    fn bulk_keys_are_sorted_distinct_and_all_there() {
        let spec =
            KeySpec { format: KeyFormat::Int, key_bytes: Some(8), hashed: true, clustered_inserts: None };
        let sorted = SortedKeys::build(spec, 5_000);
        assert_eq!(sorted.spans.len(), 5_000);
        assert!((1..5_000).all(|i| sorted.key(i - 1) < sorted.key(i)));
        let params = TraceParams {
            seed: 1,
            records: 5_000,
            threads: 1,
            values: ValueSpec::fixed(16),
            max_scan_length: 1,
        };
        let map = crate::baseline::BTreeMapBaseline::default();
        let m = run_bulk_load(&map, spec, &params);
        assert_eq!((m.ops, m.inserted_bytes, m.error), (5_000, 5_000 * 24, None));
        assert_eq!(map.get(sorted.key(4_999)).unwrap(), Some(16), "the last key was loaded");
    }
}
