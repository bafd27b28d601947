//! Tests of the sparse index: seeks, resizes, splits and merges against a sorted list, node keys
//! and pivots checked against a fresh computation, seeks against a full-key search, routing of
//! record keys by separators, and memory accounting against the allocator's own count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use super::*;

/// The model's answer to `seek(probe)`: the position of the last key `<= probe`.
fn model_seek(model: &[(Key, u64, u32)], probe: &[u8]) -> usize {
    model.partition_point(|m| m.0.as_slice() <= probe) - 1
}

/// Seeks `probe` and checks the interval against the model.
fn checked_seek(index: &SparseIndex, model: &[(Key, u64, u32)], probe: &[u8]) -> Cursor {
    let c = index.seek(probe);
    assert_eq!(index.interval(&c).key().to_vec(), model[model_seek(model, probe)].0, "seek {probe:?}");
    c
}

/// Every reachable node's keys equal a fresh encoding (see `NodeKeys::check`), each pivot is the
/// smallest key of its subtree, no node is empty; returns the keys of all leaves in order.
fn check_nodes(index: &SparseIndex) -> Vec<Key> {
    fn walk(index: &SparseIndex, id: usize, out: &mut Vec<Key>) -> Key {
        let node = &index.nodes[id];
        node.keys().check();
        assert!(node.len() > 0, "empty node {id}");
        match node {
            Node::Leaf { keys, entries } => {
                assert_eq!(keys.len(), entries.len());
                out.extend(keys.keys().iter().map(IndexKey::to_vec));
            }
            Node::Internal { keys, children } => {
                assert_eq!(keys.len(), children.len());
                for (i, c) in children.iter().enumerate() {
                    let min = walk(index, c.node, out);
                    assert_eq!(keys.key(i).to_vec(), min, "pivot {i} of node {id}");
                }
            }
        }
        node.keys().key(0).to_vec()
    }
    let mut out = Vec::new();
    walk(index, index.root, &mut out);
    out
}

/// Brute-force model: (key, size, count) in order; offsets are prefix sums.
fn check(index: &SparseIndex, model: &[(Key, u64, u32)], rng: &mut SmallRng) {
    let leaf_keys = check_nodes(index);
    assert_eq!(leaf_keys, model.iter().map(|m| m.0.clone()).collect::<Vec<_>>());
    let got = index.intervals();
    assert_eq!(got.len(), model.len());
    assert_eq!(index.interval_count(), model.len());
    let mut offset = 0;
    for ((k, o, s, _), (mk, ms, _)) in got.iter().zip(model) {
        assert_eq!((k, *o, *s), (mk, offset, *ms));
        offset += ms;
    }
    for (i, (mk, _, _)) in model.iter().enumerate() {
        let c = checked_seek(index, model, mk);
        let mut probe = mk.clone();
        probe.push(0);
        checked_seek(index, model, &probe);
        probe.truncate(mk.len().saturating_sub(1));
        checked_seek(index, model, &probe);
        assert_eq!(
            index.prev(&c).map(|p| index.interval(&p).key().to_vec()),
            i.checked_sub(1).map(|j| model[j].0.clone())
        );
        assert_eq!(index.next_key(&c).map(|k| k.to_vec()), model.get(i + 1).map(|m| m.0.clone()));
    }
    for _ in 0..200 {
        checked_seek(index, model, &random_key(rng));
    }
}

/// UDB-like keys (19 zero bytes + 8 B), their prefixes and extensions, the empty key, and
/// YCSB-like "user" keys: long shared prefixes, keys that are prefixes of one another, ties.
fn random_key(rng: &mut SmallRng) -> Key {
    let mut key = vec![0u8; 19];
    let x = if rng.gen() { rng.gen_range(0..2048) } else { rng.gen::<u64>() };
    key.extend_from_slice(&x.to_be_bytes());
    match rng.gen_range(0..6) {
        0 => Key::new(),
        1 | 2 => key,
        3 => {
            key.truncate(rng.gen_range(0..=27));
            key
        }
        4 => {
            let extra = rng.gen_range(1..3);
            key.extend((0..extra).map(|_| [0u8, 1, 0xff][rng.gen_range(0..3)]));
            key
        }
        _ => {
            let digits = rng.gen_range(0..10);
            let mut key = b"user".to_vec();
            key.extend((0..digits).map(|_| rng.gen_range(b'0'..=b'9')));
            key
        }
    }
}

#[test]
fn random_resize_split_absorb_against_a_list() {
    let mut rng = SmallRng::seed_from_u64(7);
    let mut index = SparseIndex::default();
    let mut model: Vec<(Key, u64, u32)> = vec![(Vec::new(), 0, 0)];
    let mut max_depth = 0;
    for step in 0..12_000 {
        match rng.gen_range(0..10) {
            0..=2 => {
                let i = rng.gen_range(0..model.len());
                let cur = checked_seek(&index, &model, &model[i].0.clone());
                let size = rng.gen_range(0..500);
                index.resize(&cur, size, Some(3), 1);
                model[i].1 = u64::from(size);
            }
            3..=8 => {
                let right = random_key(&mut rng);
                let i = model_seek(&model, &right);
                if model[i].0 == right {
                    continue;
                }
                let cur = checked_seek(&index, &model, &right);
                let left = rng.gen_range(0..=model[i].1);
                index.split(&cur, left as u32, 1, &right, 1);
                let rest = model[i].1 - left;
                model[i].1 = left;
                model.insert(i + 1, (right, rest, 1));
            }
            _ => {
                let i = rng.gen_range(0..model.len());
                let cur = checked_seek(&index, &model, &model[i].0.clone());
                if index.absorb_next(&cur).is_some() {
                    let (_, s, _) = model.remove(i + 1);
                    model[i].1 += s;
                }
            }
        }
        max_depth = max_depth.max(index.first().path.len());
        if step % 97 == 0 {
            check(&index, &model, &mut rng);
        }
    }
    assert!(max_depth >= 2, "internal nodes never split: depth {max_depth}, {}", model.len());
    check(&index, &model, &mut rng);
    while model.len() > 1 {
        let cur = index.first();
        index.absorb_next(&cur).unwrap();
        let (_, s, _) = model.remove(1);
        model[0].1 += s;
        if model.len().is_multiple_of(211) {
            check(&index, &model, &mut rng);
        }
    }
    check(&index, &model, &mut rng);
}

/// Routing by separators: random record keys, cut into intervals by random splits whose index
/// keys are the shortest separators, then merges of emptied intervals: every record key (and
/// keys between them) is found in the interval whose range `[s_i, s_{i+1})` holds it, compared
/// with a brute-force list of the intervals' records; separators are shorter than keys.
#[test]
fn separators_route_every_record_key_to_its_interval() {
    let mut rng = SmallRng::seed_from_u64(13);
    for shape in 0..3 {
        let mut records: Vec<Key> = (0..3000)
            .map(|_| match shape {
                0 => [&[0u8; 19][..], &rng.gen::<u64>().to_be_bytes()].concat(),
                1 => format!("user{}", rng.gen::<u32>()).into_bytes(),
                _ => random_key(&mut rng),
            })
            .collect();
        records.sort();
        records.dedup();
        // The model: the records of each interval (by index in `records`) and its index key.
        let mut index = SparseIndex::build(&[(Vec::new(), 0)], records.len() as u64).unwrap();
        let mut model: Vec<(Key, std::ops::Range<usize>)> = vec![(Vec::new(), 0..records.len())];
        let (mut separator_bytes, mut key_bytes) = (0, 0);
        for step in 0..2500 {
            let i = rng.gen_range(0..model.len());
            let range = model[i].1.clone();
            if range.len() >= 2 {
                let cut = rng.gen_range(range.start + 1..range.end);
                let sep = shortest_separator(&records[cut - 1], &records[cut]).to_vec();
                assert!(records[cut - 1] < sep && sep <= records[cut]);
                separator_bytes += sep.len();
                key_bytes += records[cut].len();
                let cur = index.seek(&records[range.start]);
                assert_eq!(index.interval(&cur).key().to_vec(), model[i].0);
                index.split(&cur, (cut - range.start) as u32, 0, &sep, 0);
                model[i].1.end = cut;
                model.insert(i + 1, (sep, cut..range.end));
            } else if step % 3 == 0 && i + 1 < model.len() {
                // An emptied interval merges into its predecessor (as `after_change` does).
                let cur = index.seek(&model[i].0);
                index.absorb_next(&cur).unwrap();
                let (_, next) = model.remove(i + 1);
                model[i].1.end = next.end;
            }
        }
        check_nodes(&index);
        for (i, (sep, range)) in model.iter().enumerate() {
            let upper = model.get(i + 1).map(|m| m.0.as_slice());
            for r in range.clone() {
                let key = &records[r];
                assert!(sep <= key && upper.is_none_or(|u| key.as_slice() < u), "routing invariant");
                let cur = index.seek(key);
                assert_eq!(index.interval(&cur).key().to_vec(), *sep, "record {r}");
                assert_eq!(index.offset(&cur), range.start as u64, "record {r}");
                let mut after = key.clone();
                after.push(0);
                let in_gap = upper.is_none_or(|u| after.as_slice() < u);
                let want = if in_gap { sep } else { &model[i + 1].0 };
                assert_eq!(index.interval(&index.seek(&after)).key().to_vec(), *want);
            }
        }
        assert!(model.len() > 500, "{}", model.len());
        assert!(separator_bytes < key_bytes, "shape {shape}: {separator_bytes} of {key_bytes} bytes");
    }
}

#[test]
fn shortest_separator_is_the_shortest_string_between() {
    let cases: [(&[u8], &[u8], &[u8]); 6] = [
        (b"abc", b"abd", b"abd"),
        (b"ab", b"abc", b"abc"),
        (b"abc", b"b", b"b"),
        (b"", b"a", b"a"),
        (b"a\xff\xff", b"b", b"b"),
        (b"user1234", b"user2", b"user2"),
    ];
    for (left, right, want) in cases {
        assert_eq!(shortest_separator(left, right), want);
    }
    let s = shortest_separator(b"\0\0\0\x10\x20\x30", b"\0\0\0\x11\0\0");
    assert_eq!(s, b"\0\0\0\x11");
}

#[test]
fn build_matches_the_given_starts() {
    let starts: Vec<(Key, u64)> = (0..5000u32)
        .map(|i| (if i == 0 { vec![] } else { i.to_be_bytes().to_vec() }, u64::from(i) * 10))
        .collect();
    let index = SparseIndex::build(&starts, 50_005).unwrap();
    check_nodes(&index);
    let got = index.intervals();
    assert_eq!(got.len(), 5000);
    assert_eq!(got[4999], (4999u32.to_be_bytes().to_vec(), 49_990, 15, None));
    let c = index.seek(&1234u32.to_be_bytes());
    assert_eq!(index.offset(&c), 12_340);
    assert!(index.is_first(&index.seek(b"")));
}

/// Sizes are u32: `build` rejects a larger interval, `absorb_next` refuses to merge two intervals
/// beyond it.
#[test]
fn intervals_beyond_4_gib_are_refused() {
    let too_large = [(Vec::new(), 0), (b"k".to_vec(), 10), (b"m".to_vec(), MAX_INTERVAL_BYTES + 11)];
    assert_eq!(
        SparseIndex::build(&too_large, MAX_INTERVAL_BYTES + 20).unwrap_err(),
        BadInterval { offset: 10, end: MAX_INTERVAL_BYTES + 11 }
    );
    let starts = [(Vec::new(), 0), (b"k".to_vec(), 10), (b"m".to_vec(), MAX_INTERVAL_BYTES)];
    let mut index = SparseIndex::build(&starts, MAX_INTERVAL_BYTES + 11).unwrap();
    let second = index.seek(b"k");
    assert_eq!(index.absorb_next(&second), None, "one byte too many");
    assert_eq!(index.interval_count(), 3);
    assert_eq!(index.absorb_next(&index.first()), Some(NO_SLOT), "exactly the limit");
    assert_eq!(index.intervals()[0], (Vec::new(), 0, MAX_INTERVAL_BYTES, None));
    assert_eq!(index.intervals()[1], (b"m".to_vec(), MAX_INTERVAL_BYTES, 11, None));
}

#[test]
fn built_index_seeks_like_a_list() {
    let mut rng = SmallRng::seed_from_u64(11);
    let mut keys: Vec<Key> = (0..3000).map(|_| random_key(&mut rng)).collect();
    keys.push(Key::new());
    keys.sort();
    keys.dedup();
    let model: Vec<(Key, u64, u32)> = keys.iter().map(|k| (k.clone(), 10, 0)).collect();
    let starts: Vec<_> = keys.into_iter().enumerate().map(|(i, k)| (k, i as u64 * 10)).collect();
    let index = SparseIndex::build(&starts, model.len() as u64 * 10).unwrap();
    for _ in 0..5000 {
        checked_seek(&index, &model, &random_key(&mut rng));
    }
    check(&index, &model, &mut rng);
}

/// The search without heads or prefixes: a full key comparison per probe of each node's binary
/// search.
fn seek_by_full_keys(index: &SparseIndex, key: &[u8]) -> (usize, usize) {
    let mut node = index.root;
    loop {
        let keys: Vec<Key> = index.nodes[node].keys().keys().iter().map(IndexKey::to_vec).collect();
        let le = keys.partition_point(|k| k.as_slice() <= key).max(1) - 1;
        match &index.nodes[node] {
            Node::Internal { children, .. } => node = children[le].node,
            Node::Leaf { .. } => return (node, le),
        }
    }
}

/// Seeks with heads agree with a plain full-key search, for UDB-like keys (19 zero bytes, then 8)
/// and YCSB `user<n>` keys, over a built index of ~20k intervals. (Speed is not measured here:
/// timings belong to the benchmark tools.)
#[test]
fn seeks_agree_with_a_full_key_search() {
    check_against_full_keys(|x| [&[0u8; 19][..], &x.to_be_bytes()].concat());
    check_against_full_keys(|x| format!("user{x}").into_bytes());
}

fn check_against_full_keys(key_of: impl Fn(u64) -> Key) {
    let mut rng = SmallRng::seed_from_u64(3);
    let mut keys: Vec<Key> = (0..20_000).map(|_| key_of(rng.gen())).collect();
    keys.sort_unstable();
    keys.dedup();
    let starts = std::iter::once((Key::new(), 0))
        .chain(keys.into_iter().enumerate().map(|(i, k)| (k, (i as u64 + 1) * 100)))
        .collect::<Vec<_>>();
    let total_bytes = starts.len() as u64 * 100;
    let index = SparseIndex::build(&starts, total_bytes).unwrap();
    for _ in 0..20_000 {
        let p = key_of(rng.gen());
        let c = index.seek(&p);
        assert_eq!(seek_by_full_keys(&index, &p), (c.leaf, c.pos));
    }
}

/// Counts, per thread, the bytes live allocations take under glibc's rounding (the model
/// `allocation_bytes` uses), so a test can compare `memory_bytes` with what was really allocated.
struct CountingAllocator;

thread_local! {
    static LIVE_ALLOCATION_BYTES: Cell<i64> = const { Cell::new(0) };
}

fn note_allocation(added: usize, removed: usize) {
    let delta = allocation_bytes(added) as i64 - allocation_bytes(removed) as i64;
    let _ = LIVE_ALLOCATION_BYTES.try_with(|c| c.set(c.get() + delta));
}

// SAFETY: every method forwards to `System` with the caller's arguments and only adds counting.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size(), 0);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation(layout.size(), 0);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_allocation(0, layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation(new_size, layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn live_allocation_bytes() -> i64 {
    LIVE_ALLOCATION_BYTES.with(Cell::get)
}

fn udb_key(x: u64) -> Key {
    [&[0u8; 19][..], &x.to_be_bytes()].concat()
}

/// Grows an index the way the table does: the UDB keys of `records` (sorted) cut into intervals
/// of 4 to 11 records (one byte each) at separators, split off in random order.
fn index_by_random_splits(records: &[u64], rng: &mut SmallRng) -> SparseIndex {
    let mut cuts = Vec::new();
    let mut at = rng.gen_range(4..12);
    while at < records.len() {
        cuts.push(at);
        at += rng.gen_range(4..12);
    }
    cuts.shuffle(rng);
    let mut index = SparseIndex::build(&[(Vec::new(), 0)], records.len() as u64).unwrap();
    for cut in cuts {
        let (left, right) = (udb_key(records[cut - 1]), udb_key(records[cut]));
        let sep = shortest_separator(&left, &right);
        let cur = index.seek(sep);
        let left_bytes = cut as u64 - index.offset(&cur);
        index.split(&cur, left_bytes as u32, 0, sep, 0);
    }
    index
}

/// `memory_bytes` against the allocator's count of what building the index allocated and kept
/// (the same malloc rounding model): within 10% (in fact equal) for an index grown by splits and
/// shrunk by merges, and for a built one.
#[test]
fn memory_bytes_match_what_the_allocator_counted() {
    let mut rng = SmallRng::seed_from_u64(17);
    let mut records: Vec<u64> = (0..20_000).map(|_| rng.gen()).collect();
    records.sort_unstable();
    let before = live_allocation_bytes();
    let mut index = index_by_random_splits(&records, &mut rng);
    for _ in 0..300 {
        let cur = index.seek(&udb_key(records[rng.gen_range(0..records.len())]));
        index.absorb_next(&cur);
    }
    let counted = (live_allocation_bytes() - before) as u64;
    let reported = index.memory_bytes();
    assert!(reported.abs_diff(counted) * 10 <= counted, "reported {reported}, allocated {counted}");
    assert_eq!(reported, counted);
    drop(index);
    assert_eq!(live_allocation_bytes(), before);
    let starts: Vec<(Key, u64)> =
        std::iter::once((Vec::new(), 0)).chain(records.iter().map(|&k| (udb_key(k), 0))).collect();
    let before = live_allocation_bytes();
    let built = SparseIndex::build(&starts, 0).unwrap();
    assert_eq!(built.memory_bytes(), (live_allocation_bytes() - before) as u64);
}

/// The UDB shape (27-byte keys: 19 zero bytes and a random u64; ~7.5 records per interval,
/// intervals split off in random order, ~270k of them): at most 55 bytes per interval. Prints
/// the measured bytes per interval.
#[test]
fn udb_shaped_index_takes_at_most_55_bytes_per_interval() {
    let mut rng = SmallRng::seed_from_u64(19);
    let mut records: Vec<u64> = (0..2_000_000).map(|_| rng.gen()).collect();
    records.sort_unstable();
    records.dedup();
    let index = index_by_random_splits(&records, &mut rng);
    let per_interval = index.memory_bytes() as f64 / index.interval_count() as f64;
    println!("{} intervals, {per_interval:.1} bytes per interval", index.interval_count());
    assert!(per_interval <= 55.0, "{per_interval:.1} bytes per interval");
    let starts: Vec<(Key, u64)> = index.intervals().into_iter().map(|(k, o, _, _)| (k, o)).collect();
    let rebuilt = SparseIndex::build(&starts, records.len() as u64).unwrap();
    let per_interval = rebuilt.memory_bytes() as f64 / rebuilt.interval_count() as f64;
    println!("built from the same keys: {per_interval:.1} bytes per interval");
    assert!(per_interval <= 55.0, "{per_interval:.1} bytes per interval (built)");
}
