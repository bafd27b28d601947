//! The interval cache (§5.3): the kit's byte-bounded S3-FIFO/CLOCK cache (`strata_kit::cache`)
//! holding decoded intervals (`IntervalData`), each slot owned by its interval's index key. The
//! sparse index stores an interval's slot number; a slot now owned by another key is a miss, so
//! a hit costs no hashing and no search. Write-through: the committer updates a cached interval
//! in place when it changes the table file. An evicted interval's two buffers are kept for the
//! next miss to decode into (`take_spare`), so a reader's miss usually allocates nothing.

use std::sync::Arc;

use strata_kit::cache::{Cache, CacheValue};
use strata_kit::inline_key::InlineKey;

pub use super::interval::IntervalData;
use super::interval::Span;
use super::sparse_index::IndexKey;

/// The interval cache. Not internally locked: the table keeps it under a mutex.
pub type IntervalCache = Cache<InlineKey, Arc<IntervalData>>;

/// The two heap buffers of an evicted interval (`IntervalData::into_buffers`).
pub type SpareBuffers = (Vec<u8>, Vec<Span>);

impl CacheValue for IntervalData {
    type Spare = SpareBuffers;

    fn memory_bytes(&self) -> u64 {
        IntervalData::memory_bytes(self)
    }

    fn slack_bytes(&self) -> u64 {
        IntervalData::slack_bytes(self)
    }

    fn into_spare(self) -> Result<SpareBuffers, Self> {
        Ok(self.into_buffers())
    }

    fn spare_capacity(spare: &SpareBuffers) -> usize {
        spare.0.capacity()
    }
}

/// The owner check of a lookup for the interval with index key `key`: compares the slot's owner
/// with the key's pieces in place (nothing is assembled).
#[inline]
pub fn owned_by(key: IndexKey<'_>) -> impl FnOnce(&InlineKey) -> bool + '_ {
    move |owner| key.eq_slice(owner)
}

/// A slot owner for the interval with index key `key` (inline up to 32 bytes: no allocation).
pub fn owner_key(key: IndexKey<'_>) -> InlineKey {
    let mut owner = InlineKey::new();
    key.with_slice(|k| owner.extend_from_slice(k));
    owner
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flexdb::record;

    fn data(n: usize) -> Arc<IntervalData> {
        let mut bytes = Vec::new();
        for i in 0..n {
            record::encode_into(&[i as u8], &[0; 100], &mut bytes);
        }
        Arc::new(IntervalData::decode(bytes).unwrap())
    }

    /// An evicted interval nobody holds gives its buffers to the next miss, which decodes into
    /// them; one a reader holds comes back to be dropped. Slots answer only their owner.
    #[test]
    fn evicted_interval_buffers_are_decoded_into_again() {
        let mut cache = IntervalCache::new(data(4).memory_bytes());
        let held = data(4); // a reader still holds it
        let a = cache.insert(owner_key(IndexKey::from_slice(b"a")), held.clone()).0.unwrap();
        assert!(cache.get(a, owned_by(IndexKey::from_slice(b"a"))).is_some());
        assert!(cache.get(a, owned_by(IndexKey::from_slice(b"ab"))).is_none());
        let (_, evicted) = cache.insert(owner_key(IndexKey::from_slice(b"b")), data(4));
        assert!(evicted.len() == 1 && Arc::ptr_eq(&evicted[0], &held), "shared: handed back to drop");
        let (_, evicted) = cache.insert(owner_key(IndexKey::from_slice(b"c")), data(4));
        assert!(evicted.is_empty(), "unshared: kept");
        let (mut bytes, spans) = cache.take_spare(held.bytes().len());
        assert!(bytes.capacity() >= held.bytes().len() && spans.capacity() >= 4);
        bytes.clear();
        bytes.extend_from_slice(held.bytes());
        let reused = IntervalData::decode_reusing(bytes, spans).unwrap();
        assert_eq!(reused.iter().collect::<Vec<_>>(), held.iter().collect::<Vec<_>>());
    }
}
