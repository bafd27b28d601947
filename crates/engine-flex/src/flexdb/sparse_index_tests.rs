//! Tests of the sparse index: seeks, resizes, splits and merges against a sorted list, heads
//! checked against a fresh computation, seeks against a full-key search.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::*;

/// The model's answer to `seek(probe)`: the position of the last key `<= probe`.
fn model_seek(model: &[(Key, u64, u32)], probe: &[u8]) -> usize {
    model.partition_point(|m| m.0.as_slice() <= probe) - 1
}

/// Seeks `probe` and checks the interval against the model.
fn checked_seek(index: &SparseIndex, model: &[(Key, u64, u32)], probe: &[u8]) -> Cursor {
    let c = index.seek(probe);
    assert_eq!(index.interval(&c).key, model[model_seek(model, probe)].0, "seek {probe:?}");
    c
}

/// Every reachable node's heads equal a fresh computation from its keys, are sorted, and the
/// keys after the skipped empty key all start with the node's prefix.
fn check_heads(index: &SparseIndex) {
    assert!(index.nodes.is_clean());
    let mut stack = vec![index.root];
    while let Some(id) = stack.pop() {
        let (node, heads) = (index.nodes.node(id), index.nodes.heads(id));
        let mut fresh = NodeHeads::default();
        fresh.rebuild(node);
        assert_eq!(heads, &fresh, "node {id}");
        assert!(heads.heads.windows(2).all(|w| w[0] <= w[1]), "node {id}: unsorted heads");
        let from = usize::from(heads.skip_empty_first);
        assert_eq!(heads.heads.len(), node.len() - from);
        for i in from..node.len() {
            assert_eq!(node.key(i)[..heads.prefix_len], node.key(from)[..heads.prefix_len]);
        }
        if let Node::Internal(children) = node {
            stack.extend(children.iter().map(|c| c.node));
        }
    }
}

/// Brute-force model: (key, size, count) in order; offsets are prefix sums.
fn check(index: &SparseIndex, model: &[(Key, u64, u32)], rng: &mut SmallRng) {
    check_heads(index);
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
            index.prev(&c).map(|p| index.interval(&p).key.clone()),
            i.checked_sub(1).map(|j| model[j].0.clone())
        );
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
                model[i].1 = size;
            }
            3..=8 => {
                let right = random_key(&mut rng);
                let i = model_seek(&model, &right);
                if model[i].0 == right {
                    continue;
                }
                let cur = checked_seek(&index, &model, &right);
                let left = rng.gen_range(0..=model[i].1);
                index.split(&cur, left, 1, right.clone(), 1);
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

#[test]
fn build_matches_the_given_starts() {
    let starts: Vec<(Key, u64)> = (0..5000u32)
        .map(|i| (if i == 0 { vec![] } else { i.to_be_bytes().to_vec() }, u64::from(i) * 10))
        .collect();
    let index = SparseIndex::build(starts.clone(), 50_005);
    check_heads(&index);
    let got = index.intervals();
    assert_eq!(got.len(), 5000);
    assert_eq!(got[4999], (4999u32.to_be_bytes().to_vec(), 49_990, 15, None));
    let c = index.seek(&1234u32.to_be_bytes());
    assert_eq!(index.offset(&c), 12_340);
    assert!(index.is_first(&index.seek(b"")));
}

#[test]
fn built_index_seeks_like_a_list_and_counts_its_heads() {
    let mut rng = SmallRng::seed_from_u64(11);
    let mut keys: Vec<Key> = (0..3000).map(|_| random_key(&mut rng)).collect();
    keys.push(Key::new());
    keys.sort();
    keys.dedup();
    let model: Vec<(Key, u64, u32)> = keys.iter().map(|k| (k.clone(), 10, 0)).collect();
    let starts = keys.into_iter().enumerate().map(|(i, k)| (k, i as u64 * 10)).collect();
    let index = SparseIndex::build(starts, model.len() as u64 * 10);
    for _ in 0..5000 {
        checked_seek(&index, &model, &random_key(&mut rng));
    }
    check(&index, &model, &mut rng);
    let key_bytes: u64 = model.iter().map(|m| m.0.len() as u64).sum();
    let floor = key_bytes + model.len() as u64 * (ENTRY_OVERHEAD_BYTES + 8);
    assert!(index.memory_bytes() >= floor, "{} < {floor}", index.memory_bytes());
}

/// The search before heads: a full key comparison per probe of each node's binary search.
fn seek_by_full_keys(index: &SparseIndex, key: &[u8]) -> (usize, usize) {
    let mut node = index.root;
    loop {
        match index.nodes.node(node) {
            Node::Internal(children) => {
                let le = children.partition_point(|c| c.pivot.as_slice() <= key);
                node = children[le.max(1) - 1].node;
            }
            Node::Leaf(entries) => {
                return (node, entries.partition_point(|e| e.key.as_slice() <= key).max(1) - 1);
            }
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
    let index = SparseIndex::build(starts, total_bytes);
    for _ in 0..20_000 {
        let p = key_of(rng.gen());
        let c = index.seek(&p);
        assert_eq!(seek_by_full_keys(&index, &p), (c.leaf, c.pos));
    }
}
