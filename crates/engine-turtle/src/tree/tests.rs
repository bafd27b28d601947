use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Key, Value};
use strata_kit::sorted_run::{Entry, MergeIter, MergeOutput};

use super::*;
use crate::pages::{Pages, PAGES_FILE};
use std::sync::Arc;
use strata_io::{MemStorage, OpenOptions, Storage};

fn new_pages(storage: &MemStorage) -> Arc<Pages> {
    let cache = strata_kit::sorted_run::BlockCache::new(64 << 10);
    Arc::new(Pages::new(storage.open(PAGES_FILE, OpenOptions::create()).unwrap(), 0).with_block_cache(cache))
}

/// The tree `tree` checkpointed and read back from a fresh allocator, as an open would; the
/// allocator's free map is the complement of what the tree uses.
fn reopen(tree: &mut Tree, pages: &Arc<Pages>, storage: &MemStorage) -> (Tree, Arc<Pages>) {
    let root = tree.checkpoint(pages).unwrap();
    let file = storage.open(PAGES_FILE, OpenOptions::existing()).unwrap();
    let reopened = Arc::new(Pages::new(file.clone(), file.len().unwrap()));
    let (tree, used) = Tree::open(&reopened, root, *tree.config()).unwrap();
    reopened.rebuild_free(used);
    (tree, reopened)
}

fn key(i: u32) -> Key {
    format!("k{i:06}").into_bytes()
}

/// A sorted batch of `n` random ops over `key_space` keys; deletes one in `delete_one_in`.
fn random_batch(rng: &mut SmallRng, n: usize, key_space: u32, delete_one_in: u32) -> Vec<(Key, Entry)> {
    let mut ops = BTreeMap::new();
    for _ in 0..n {
        let k = key(rng.gen_range(0..key_space));
        let entry = if rng.gen_range(0..delete_one_in) == 0 {
            Entry::delete()
        } else {
            Entry::put((0..rng.gen_range(1..40)).map(|_| rng.gen()).collect())
        };
        ops.insert(k, entry);
    }
    ops.into_iter().collect()
}

fn apply_to_model(model: &mut BTreeMap<Key, Value>, batch: &[(Key, Entry)]) {
    for (k, e) in batch {
        match e.kind {
            strata_kit::sorted_run::EntryKind::Put => {
                model.insert(k.clone(), e.value.clone());
            }
            _ => {
                model.remove(k);
            }
        }
    }
}

fn random_bound(rng: &mut SmallRng, key_space: u32) -> Bound<Key> {
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng.gen_range(0..key_space))),
        _ => Bound::Excluded(key(rng.gen_range(0..key_space))),
    }
}

fn check(tree: &Tree, model: &BTreeMap<Key, Value>, rng: &mut SmallRng, key_space: u32) {
    for i in 0..key_space {
        assert_eq!(tree.get(&key(i)).unwrap(), model.get(&key(i)).cloned(), "get {i}");
    }
    for _ in 0..20 {
        let (lower, upper) = (random_bound(rng, key_space), random_bound(rng, key_space));
        let expected: Vec<(Key, Value)> = model
            .iter()
            .filter(|(k, _)| {
                strata_core::at_or_after(k, strata_core::borrow_bound(&lower))
                    && strata_core::at_or_before(k, strata_core::borrow_bound(&upper))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let range = |direction| {
            let source =
                tree.range(strata_core::borrow_bound(&lower), strata_core::borrow_bound(&upper), direction);
            MergeIter::lazy(vec![source], direction, MergeOutput::Visible)
        };
        let forward: Vec<_> =
            range(Direction::Forward).map(|r| r.map(|(k, e)| (k, e.value)).unwrap()).collect();
        assert_eq!(forward, expected, "{lower:?}..{upper:?}");
        let mut reverse: Vec<_> =
            range(Direction::Reverse).map(|r| r.map(|(k, e)| (k, e.value)).unwrap()).collect();
        reverse.reverse();
        assert_eq!(reverse, expected, "reverse {lower:?}..{upper:?}");
    }
}

/// Random batches of puts and deletes against a `BTreeMap`, with leaves of 512 bytes and 4
/// pivots per node, so the tree grows several levels, its nodes split, and deletes make leaves
/// and nodes join.
#[test]
fn random_batches_match_a_model_through_splits_and_joins() {
    for seed in 0..4u64 {
        let mut rng = SmallRng::seed_from_u64(seed);
        let config = TreeConfig { leaf_bytes: 512, max_pivots: 4 };
        let mut tree = Tree::new(config).unwrap();
        let mut model = BTreeMap::new();
        let key_space = 3_000;
        let storage = MemStorage::new();
        let mut pages = new_pages(&storage);
        let (mut tallest, mut most_leaves, mut lowest, mut fewest_leaves) = (0, 0, 0, 0);
        for round in 0..1_000 {
            // Grow, shrink (rounds 150..700 only delete; the deletes reach the leaves as the
            // buffers flush them down), grow again.
            let delete_one_in = if (150..700).contains(&round) { 1 } else { 8 };
            let n = rng.gen_range(1..60);
            let batch = random_batch(&mut rng, n, key_space, delete_one_in);
            apply_to_model(&mut model, &batch);
            tree.apply_batch(batch).unwrap();
            tree.check().unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            if round < 700 {
                tallest = tallest.max(tree.height());
                most_leaves = most_leaves.max(tree.leaf_count());
            }
            if round == 699 {
                fewest_leaves = tree.leaf_count();
                lowest = tree.height();
            }
            if round % 50 == 49 {
                // A checkpoint into the pages, and every other time a reopen from them.
                if round % 100 == 99 {
                    (tree, pages) = reopen(&mut tree, &pages, &storage);
                } else {
                    let mark = pages.retire_mark();
                    tree.checkpoint(&pages).unwrap();
                    pages.free_retired_up_to(mark).unwrap();
                }
                check(&tree, &model, &mut rng, key_space);
            }
        }
        check(&tree, &model, &mut rng, key_space);
        assert!(tallest >= 4, "seed {seed}: the tree only grew {tallest} levels");
        assert!(
            lowest < tallest && fewest_leaves * 4 < most_leaves,
            "seed {seed}: deletes did not shrink the tree: {tallest} levels and {most_leaves} leaves at most, \
             {lowest} and {fewest_leaves} after the deletes"
        );
        assert!(!model.is_empty());
    }
}

#[test]
fn a_batch_out_of_order_is_refused() {
    let mut tree = Tree::new(TreeConfig::default()).unwrap();
    let batch = vec![(key(2), Entry::put(vec![1])), (key(1), Entry::put(vec![1]))];
    assert!(tree.apply_batch(batch).is_err());
    let merge = vec![(key(1), Entry::merge(vec![1]))];
    assert!(tree.apply_batch(merge).is_err());
}

/// The buffer keeps what it has not flushed: after many small batches the root holds entries in
/// its levels, and every one of them is still found (newest version wins over the leaves').
#[test]
fn buffered_updates_shadow_older_values_below() {
    let config = TreeConfig { leaf_bytes: 1024, max_pivots: 8 };
    let mut tree = Tree::new(config).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..200u32 {
        let batch: Vec<(Key, Entry)> =
            (0..20).map(|i| (key(i * 10 + round % 7), Entry::put(round.to_le_bytes().to_vec()))).collect();
        apply_to_model(&mut model, &batch);
        tree.apply_batch(batch).unwrap();
    }
    assert!(tree.height() >= 2);
    assert!(tree.entry_count() > model.len() as u64, "some versions wait in buffers");
    for (k, v) in &model {
        assert_eq!(tree.get(k).unwrap().as_ref(), Some(v));
    }
}

/// Found when levels were first cut into leaf-sized segments: narrowing a segment (a node
/// split) dropped the flushed bound of a pivot that starts below the segment's view but reaches
/// into it, so an older version already flushed past came back over the leaf's newer one.
#[test]
fn narrowing_keeps_the_bound_of_a_pivot_reaching_into_the_view() {
    let entries: Vec<(Key, Entry)> = (10..20).map(|i| (key(i), Entry::put(vec![i as u8]))).collect();
    // The segment's view starts inside the pivot whose lower key is key(0).
    let mut segment = Segment::new(entries, 256).unwrap().narrowed(&key(12), None);
    segment.mark_flushed(&key(0), &key(15));
    let narrowed = segment.narrowed(&key(0), Some(&key(18)));
    assert!(narrowed.is_flushed(&key(0), &key(14)), "the bound of pivot key(0) was dropped");
    assert!(narrowed.get(&key(0), &key(14)).unwrap().is_none());
    assert!(narrowed.get(&key(0), &key(16)).unwrap().is_some());
}

/// Found with the same change: the block index counted a whole block for a range whose lower
/// bound lies above its upper one (a view narrowed to nothing inside one block), so a spent
/// segment stayed in its level and two views of a level began at one key.
#[test]
fn an_inverted_range_of_a_checkpointed_run_holds_no_bytes() {
    let storage = MemStorage::new();
    let pages = new_pages(&storage);
    let entries: Vec<(Key, Entry)> = (0..20).map(|i| (key(i), Entry::put(vec![1; 8]))).collect();
    let run = Run::memory(entries, 4096).unwrap().persist(&pages).unwrap();
    assert!(matches!(run, Run::Disk(_)));
    let (high, low) = (key(15), key(5));
    assert_eq!(run.bytes_between(Bound::Included(&high), Bound::Excluded(&low)), 0);
    assert!(run.bytes_between(Bound::Included(&low), Bound::Excluded(&high)) > 0);
}

/// A level merge whose segments pass its spill's bytes writes the rest as it cuts them: with no
/// room at all every buffer run is on disk (rewritten leaves stay in memory) while the same
/// batches without a spill keep them in memory, and both trees read as the model.
#[test]
fn level_merges_past_their_room_write_their_segments_as_they_cut_them() {
    let mut rng = SmallRng::seed_from_u64(7);
    let config = TreeConfig { leaf_bytes: 512, max_pivots: 8 };
    let storage = MemStorage::new();
    let pages = new_pages(&storage);
    let (mut kept, mut spilled) = (Tree::new(config).unwrap(), Tree::new(config).unwrap());
    let mut model = BTreeMap::new();
    let key_space = 2_000;
    for _ in 0..300 {
        let n = rng.gen_range(1..60);
        let batch = random_batch(&mut rng, n, key_space, 8);
        apply_to_model(&mut model, &batch);
        kept.apply_batch(batch.clone()).unwrap();
        let spill = SpillTo { pages: pages.clone(), after_bytes: 0 };
        spilled.apply_batch_spilling(batch, Some(spill)).unwrap();
        spilled.check().unwrap();
    }
    fn buffers_in_memory(subtree: &Subtree) -> u64 {
        let Subtree::Node(node) = subtree else { return 0 };
        let runs = node.levels().iter().flatten().map(Segment::run).filter(|r| r.is_memory());
        runs.map(Run::memory_bytes).sum::<u64>() + node.children().iter().map(buffers_in_memory).sum::<u64>()
    }
    let (in_memory, left) = (buffers_in_memory(&kept.root), buffers_in_memory(&spilled.root));
    assert!(pages.end() > 0, "segments were written");
    assert!(in_memory > 0 && left == 0, "{left} bytes of buffer runs left in memory against {in_memory}");
    check(&kept, &model, &mut rng, key_space);
    check(&spilled, &model, &mut rng, key_space);
}

/// A tree of `config` loaded with keys `0..key_space` (60-byte values) in random order, 100 to a
/// batch.
fn loaded_in_random_order(config: TreeConfig, key_space: u32, rng: &mut SmallRng) -> Tree {
    let mut tree = Tree::new(config).unwrap();
    let mut order: Vec<u32> = (0..key_space).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.gen_range(0..=i));
    }
    for chunk in order.chunks(100) {
        let mut batch: Vec<(Key, Entry)> = chunk.iter().map(|&i| (key(i), Entry::put(vec![1; 60]))).collect();
        batch.sort_by(|a, b| a.0.cmp(&b.0));
        tree.apply_batch(batch).unwrap();
    }
    tree
}

/// Overwrites of keys the leaves hold keep a node's buffer within `SPACE_PENDING_FRACTION` of
/// its leaves (about: a flush happens after the batch that passes it), while the same tree
/// buffers more than that before the overwrites, when its batches brought new keys.
#[test]
fn overwrites_keep_the_buffer_above_leaves_within_its_share_of_their_bytes() {
    let mut rng = SmallRng::seed_from_u64(11);
    let config = TreeConfig { leaf_bytes: 4096, max_pivots: 64 };
    let key_space = 6_000;
    let mut tree = loaded_in_random_order(config, key_space, &mut rng);
    let loaded = tree.bytes();
    assert_eq!(tree.height(), 2, "one node above leaves");
    assert!(loaded.buffer_pending as f64 > loaded.leaves as f64 * SPACE_PENDING_FRACTION, "{loaded:?}");
    for _ in 0..600 {
        let n = rng.gen_range(50..150);
        let batch = random_batch(&mut rng, n, key_space, 1_000);
        tree.apply_batch(batch).unwrap();
    }
    let after = tree.bytes();
    let bound = after.leaves as f64 * SPACE_PENDING_FRACTION + 2.0 * config.leaf_bytes as f64;
    assert!((after.buffer_pending as f64) < bound, "{after:?} against {bound}");
}

/// Settling (`Tree::settle_step`) moves buffered entries into the leaves until each node buffers
/// at most the fraction, reads never change on the way, and the runs that flushes left mostly
/// flushed are rewritten: at a fraction of 0 no buffered run is left at all.
#[test]
fn settling_empties_the_buffers_to_the_fraction_and_keeps_every_record() {
    for (seed, fraction) in [(1u64, 0.0), (2, 0.05), (3, 0.0)] {
        let mut rng = SmallRng::seed_from_u64(seed);
        let config = TreeConfig { leaf_bytes: 512, max_pivots: 4 };
        let mut tree = Tree::new(config).unwrap();
        let mut model = BTreeMap::new();
        let key_space = 3_000;
        for _ in 0..400 {
            let n = rng.gen_range(1..60);
            let batch = random_batch(&mut rng, n, key_space, 6);
            apply_to_model(&mut model, &batch);
            tree.apply_batch(batch).unwrap();
        }
        let before = tree.bytes();
        assert!(tree.height() >= 3 && before.buffer_pending > before.leaves / 10, "{before:?}");
        let mut steps = 0;
        while tree.settle_step(fraction, None).unwrap() {
            steps += 1;
            assert!(steps < 100_000, "seed {seed}: settling does not end");
            if steps % 25 == 0 {
                tree.check().unwrap_or_else(|e| panic!("seed {seed} step {steps}: {e}"));
                check(&tree, &model, &mut rng, key_space);
            }
        }
        tree.check().unwrap();
        check(&tree, &model, &mut rng, key_space);
        let after = tree.bytes();
        let levels_above = (tree.height() - 1) as f64;
        let bound = levels_above * fraction * after.leaves as f64;
        assert!(after.buffer_pending as f64 <= bound, "seed {seed}: {after:?} against {bound}");
        // A rewritten run keeps only unflushed entries; a run may hold up to twice that (the
        // estimates count whole blocks at each end).
        let runs_bound = 2.0 * after.buffer_pending as f64 + 4.0 * config.leaf_bytes as f64;
        assert!((after.buffer_runs as f64) <= runs_bound, "seed {seed}: {after:?}");
        if fraction == 0.0 {
            assert_eq!((after.buffer_pending, after.buffer_runs), (0, 0), "seed {seed}");
        }
        assert!(!tree.settle_step(fraction, None).unwrap(), "a settled tree stays");
        let storage = MemStorage::new();
        let pages = new_pages(&storage);
        let (reopened, _) = reopen(&mut tree, &pages, &storage);
        check(&reopened, &model, &mut rng, key_space);
    }
}

/// A settled buffer keeps few runs for its unflushed entries: flushes raise bounds and leave
/// the entries in the runs, so settling rewrites a segment whose flushed entries outweigh its
/// unflushed ones. A two-level tree over 64-pivot nodes, loaded, then overwritten a little.
#[test]
fn settling_rewrites_the_runs_its_flushes_left_mostly_flushed() {
    let mut rng = SmallRng::seed_from_u64(11);
    let config = TreeConfig { leaf_bytes: 4096, max_pivots: 64 };
    let key_space = 6_000;
    let mut tree = loaded_in_random_order(config, key_space, &mut rng);
    for _ in 0..100 {
        let n = rng.gen_range(50..150);
        let batch = random_batch(&mut rng, n, key_space, 1_000);
        tree.apply_batch(batch).unwrap();
    }
    let before = tree.bytes();
    while tree.settle_step(0.1, None).unwrap() {}
    let after = tree.bytes();
    assert!(after.buffer_pending < before.buffer_pending / 2, "{before:?} {after:?}");
    // Without the rewrites: 39.4 k bytes of runs for 27.3 k unflushed.
    let bound = after.buffer_pending + 2 * config.leaf_bytes;
    assert!(after.buffer_runs <= bound, "{after:?}: more than {bound} bytes of runs");
}
