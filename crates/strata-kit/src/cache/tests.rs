use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use super::*;

/// A value like flex's intervals: one buffer whose capacity it is charged for, reusable when
/// evicted; `dirty` vetoes eviction.
#[derive(Default)]
struct Blob {
    bytes: Vec<u8>,
    dirty: AtomicBool,
}

impl CacheValue for Blob {
    type Spare = Vec<u8>;

    fn memory_bytes(&self) -> u64 {
        96 + self.bytes.capacity() as u64
    }

    fn slack_bytes(&self) -> u64 {
        (self.bytes.capacity() - self.bytes.len()) as u64
    }

    fn evictable(&self) -> bool {
        !self.dirty.load(Relaxed)
    }

    fn into_spare(self) -> Result<Vec<u8>, Self> {
        Ok(self.bytes)
    }

    fn spare_capacity(spare: &Vec<u8>) -> usize {
        spare.capacity()
    }
}

type BlobCache = Cache<InlineKey, Arc<Blob>>;

fn data(n: usize) -> Arc<Blob> {
    let mut bytes = Vec::with_capacity(n * 100);
    bytes.resize(n * 100, n as u8);
    Arc::new(Blob { bytes, dirty: AtomicBool::new(false) })
}

fn key(k: &[u8]) -> InlineKey {
    InlineKey::from_slice(k)
}

/// The owner check flex uses: compare the slot's owner with the bytes looked up.
fn is(k: &[u8]) -> impl FnOnce(&InlineKey) -> bool + '_ {
    move |owner| owner.as_slice() == k
}

/// Owners "h0".."h{n}" (hot) and "s0".. (scanned once).
fn owner(prefix: &str, i: usize) -> Vec<u8> {
    format!("{prefix}{i}").into_bytes()
}

fn slot(inserted: (Option<u32>, Vec<Arc<Blob>>)) -> u32 {
    inserted.0.expect("cached")
}

#[test]
fn stays_within_budget_and_keeps_the_value_read_again() {
    let per = data(4).memory_bytes();
    // Room for three values and the ghost list's two entries.
    let mut cache = BlobCache::new(per * 3 + 2 * GHOST_ENTRY_BYTES);
    let a = slot(cache.insert(key(b"a"), data(4)));
    let b = slot(cache.insert(key(b"b"), data(4)));
    let c = slot(cache.insert(key(b"c"), data(4)));
    assert!(cache.get(a, is(b"a")).is_some());
    // `a` moves to the main part, `b` (never read again) is dropped.
    let d = slot(cache.insert(key(b"d"), data(4)));
    assert!(cache.used_bytes() <= cache.capacity_bytes());
    let live: Vec<&[u8]> = [(a, &b"a"[..]), (b, b"b"), (c, b"c"), (d, b"d")]
        .into_iter()
        .filter(|(s, k)| cache.contains(*s, is(k)))
        .map(|(_, k)| k)
        .collect();
    assert_eq!(live, [&b"a"[..], b"c", b"d"]);
    assert!(cache.get(d, is(b"x")).is_none(), "a slot answers only its owner");
    let (big, back) = cache.insert(key(b"big"), data(100));
    assert!(big.is_none() && back.len() == 1, "too large: not cached, handed back");
    cache.update(d, is(b"d"), data(1));
    assert_eq!(cache.get(d, is(b"d")).map(|x| x.bytes.len()), Some(100));
    assert_eq!(cache.invalidate(d).map(|x| x.bytes.len()), Some(100));
    assert!(cache.get(d, is(b"d")).is_none());
    assert_eq!((cache.hits(), cache.misses()), (2, 2));
}

#[test]
fn eviction_keeps_unshared_buffers_for_reuse_and_hands_back_shared_ones() {
    let mut cache = BlobCache::new(data(4).memory_bytes());
    let held = data(4); // a reader still holds it
    cache.insert(key(b"a"), held.clone());
    let (_, evicted) = cache.insert(key(b"b"), data(4));
    assert!(evicted.len() == 1 && Arc::ptr_eq(&evicted[0], &held), "shared: handed back to drop");
    assert_eq!(cache.take_spare(1).capacity(), 0, "nothing spare yet");
    let (_, evicted) = cache.insert(key(b"c"), data(4));
    assert!(evicted.is_empty(), "unshared: kept");
    assert!(cache.take_spare(held.bytes.len()).capacity() >= held.bytes.len());
}

#[test]
fn take_spare_picks_the_smallest_buffer_that_fits_else_the_largest() {
    let mut cache = BlobCache::new(1 << 20);
    cache.set_spare_limits(8, 1 << 20);
    for (i, n) in [2, 8, 4].into_iter().enumerate() {
        let s = slot(cache.insert(key(&owner("s", i)), data(n)));
        if let Some(Ok(blob)) = cache.invalidate(s).map(Arc::try_unwrap) {
            cache.spare.push(blob.bytes);
        }
    }
    assert_eq!(cache.take_spare(300).capacity(), 400);
    assert_eq!(cache.take_spare(5000).capacity(), 800);
    assert_eq!(cache.take_spare(0).capacity(), 200);
    assert_eq!(cache.take_spare(0).capacity(), 0);
}

#[test]
fn values_read_once_do_not_push_out_the_ones_read_again() {
    let per = data(4).memory_bytes();
    let mut cache = BlobCache::new(per * 20);
    let hot: Vec<u32> = (0..10).map(|i| slot(cache.insert(key(&owner("h", i)), data(4)))).collect();
    for (i, &s) in hot.iter().enumerate() {
        assert!(cache.get(s, is(&owner("h", i))).is_some());
    }
    // A scan: 200 values, each read once. CLOCK alone would cycle all of them through.
    for i in 0..200 {
        cache.insert(key(&owner("s", i)), data(4));
        assert!(cache.used_bytes() <= per * 20);
    }
    for (i, &s) in hot.iter().enumerate() {
        assert!(cache.get(s, is(&owner("h", i))).is_some(), "hot value {i} was evicted");
    }
}

#[test]
fn a_value_dropped_from_the_small_fifo_comes_back_into_the_main_part() {
    let per = data(4).memory_bytes();
    let mut cache = BlobCache::new(per * 20);
    let first = slot(cache.insert(key(&owner("x", 0)), data(4)));
    for i in 0..30 {
        cache.insert(key(&owner("s", i)), data(4));
    }
    assert!(cache.get(first, is(&owner("x", 0))).is_none(), "read once: dropped from the small FIFO");
    let again = slot(cache.insert(key(&owner("x", 0)), data(4))); // the ghost list knows it: main part
    for i in 30..300 {
        cache.insert(key(&owner("s", i)), data(4));
    }
    assert!(cache.get(again, is(&owner("x", 0))).is_some());
}

/// An update whose value is the only one in an over-full small FIFO must still make room from
/// the main part (re-queueing it step after step left the cache over its capacity).
#[test]
fn an_update_makes_room_even_when_only_its_own_value_is_in_the_small_fifo() {
    let per = data(4).memory_bytes();
    let mut cache = BlobCache::new(per * 3 + 4 * GHOST_ENTRY_BYTES);
    let slots: Vec<u32> =
        ["a", "b", "c"].iter().map(|k| slot(cache.insert(key(k.as_bytes()), data(4)))).collect();
    for (s, k) in slots.iter().zip(["a", "b", "c"]) {
        assert!(cache.get(*s, is(k.as_bytes())).is_some());
    }
    // `d` pushes a, b, c (read again) to the main part and evicts one of them.
    let d = slot(cache.insert(key(b"d"), data(4)));
    cache.update(d, is(b"d"), data(8)); // twice the size: only the main part can give room
    assert!(
        cache.used_bytes() <= cache.capacity_bytes(),
        "{} > {}",
        cache.used_bytes(),
        cache.capacity_bytes()
    );
    assert_eq!(cache.get(d, is(b"d")).map(|x| x.bytes.len()), Some(800));
}

/// `slack_bytes` is kept as values come and go; it must equal a walk of the slots after inserts,
/// evictions, updates and invalidations of values with and without slack.
#[test]
fn the_slack_total_follows_inserts_updates_evictions_and_invalidations() {
    let walked = |c: &BlobCache| -> u64 {
        c.slots.iter().filter_map(|s| s.value.as_ref()).map(|d| d.slack_bytes()).sum()
    };
    let roomy = |n: usize| {
        let mut bytes = vec![1; n * 100];
        bytes.reserve(1000);
        Arc::new(Blob { bytes, dirty: AtomicBool::new(false) })
    };
    assert!(roomy(2).slack_bytes() >= 1000);
    let mut cache = BlobCache::new(roomy(4).memory_bytes() * 3);
    let mut slots = Vec::new();
    for i in 0..12 {
        let d = if i % 2 == 0 { roomy(i % 5 + 1) } else { data(i % 5 + 1) };
        slots.push(cache.insert(key(&owner("s", i)), d).0);
        assert_eq!(cache.slack_bytes(), walked(&cache), "after insert {i}");
    }
    for (i, s) in slots.iter().enumerate() {
        let d = if i % 3 == 0 { roomy(2) } else { data(2) };
        cache.update(s.unwrap_or(u32::MAX), is(&owner("s", i)), d);
        assert_eq!(cache.slack_bytes(), walked(&cache), "after update {i}");
    }
    assert!(cache.slack_bytes() > 0);
    for s in slots.into_iter().flatten() {
        cache.invalidate(s);
    }
    assert_eq!((cache.slack_bytes(), walked(&cache)), (0, 0));
}

#[test]
fn the_small_fifo_does_not_keep_entries_of_emptied_slots() {
    let mut cache = BlobCache::new(1 << 30);
    for i in 0..1000 {
        let s = slot(cache.insert(key(&owner("s", i)), data(1)));
        cache.invalidate(s);
    }
    assert!(cache.small.len() <= 2 * cache.small_live + 64, "{} entries", cache.small.len());
    assert_eq!((cache.small_live, cache.small_bytes, cache.data_bytes), (0, 0, 0));
}

/// A dirty value is never evicted, not by the small FIFO, the CLOCK hand, the fallback or a
/// capacity change; once clean it goes like any other. A value that finds only dirty ones in
/// the way is refused and handed back.
#[test]
fn values_that_may_not_be_evicted_stay_until_the_owner_releases_them() {
    let per = data(4).memory_bytes();
    let mut cache = BlobCache::new(per * 4);
    let dirty: Vec<(u32, Arc<Blob>)> = (0..3)
        .map(|i| {
            let d = data(4);
            d.dirty.store(true, Relaxed);
            (slot(cache.insert(key(&owner("d", i)), d.clone())), d)
        })
        .collect();
    for i in 0..100 {
        let (s, _) = cache.insert(key(&owner("s", i)), data(4));
        assert!(s.is_some(), "one slot's worth is evictable");
    }
    for (i, (s, _)) in dirty.iter().enumerate() {
        assert!(cache.contains(*s, is(&owner("d", i))), "dirty value {i} was evicted");
    }
    let evicted = cache.set_capacity(per * 3);
    assert!(evicted.iter().all(|v| v.evictable()) && cache.len() == 3);
    let (s, back) = cache.insert(key(b"new"), data(4));
    assert!(s.is_none() && back.len() == 1 && back[0].evictable(), "no room: refused, handed back");
    // Written back: evictable again.
    dirty[0].1.dirty.store(false, Relaxed);
    assert!(cache.insert(key(b"new"), data(4)).0.is_some());
    assert!(!cache.contains(dirty[0].0, is(&owner("d", 0))));
}

/// A second kind of value: plain (not shared) blocks keyed by (file, block), with no buffers
/// to reuse, as a block cache would hold them. Evicted blocks come back to the caller.
#[test]
fn blocks_keyed_by_file_and_number_are_cached_and_handed_back_when_evicted() {
    #[derive(Debug, PartialEq)]
    struct Block(u64);
    impl CacheValue for Block {
        type Spare = ();
        fn memory_bytes(&self) -> u64 {
            100
        }
    }
    let mut cache: Cache<(u64, u64), Block> = Cache::new(1000);
    let slots: Vec<u32> = (0..10u64).map(|b| cache.insert((7, b), Block(b)).0.expect("fits")).collect();
    assert_eq!(cache.get(slots[3], |&(f, b)| (f, b) == (7, 3)), Some(&Block(3)));
    assert!(cache.get(slots[3], |&owner| owner == (8, 3)).is_none(), "another file's block 3");
    let mut handed_back = Vec::new();
    for b in 10..40u64 {
        let (s, evicted) = cache.insert((7, b), Block(b));
        assert!(s.is_some());
        handed_back.extend(evicted);
    }
    assert_eq!(cache.len() + handed_back.len(), 40, "every block is cached or was handed back");
    assert!(cache.used_bytes() <= 1000);
    let () = cache.take_spare(100);
}
