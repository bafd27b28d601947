//! FlexTree against a brute-force model (one physical address per logical byte), with seeded
//! random insert / collapse / remap / lookup. `STRATA_SEED=<n>` replays a failing seed.

use std::collections::HashMap;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::node::{FlexTreeConfig, HOLE_ADDR};
use super::page::PAGE_BYTES;
use super::tree::FlexTree;

fn seeds(default_count: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("STRATA_SEED") {
        return vec![seed.parse().expect("STRATA_SEED must be a number")];
    }
    let count = std::env::var("STRATA_FUZZ_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(default_count);
    let base: u64 = rand::random::<u32>().into();
    (0..count).map(|i| base + i).collect()
}

/// Per-byte model: `model[i]` is the physical address of logical byte `i`.
struct Model {
    bytes: Vec<u64>,
}

impl Model {
    fn insert(&mut self, offset: u64, len: u64, addr: u64) {
        let at = offset as usize;
        let new = (0..len).map(|i| if addr == HOLE_ADDR { HOLE_ADDR } else { addr + i });
        self.bytes.splice(at..at, new);
    }
    fn collapse(&mut self, offset: u64, len: u64) {
        self.bytes.drain(offset as usize..(offset + len) as usize);
    }
}

fn check_against(tree: &FlexTree, model: &Model, seed: u64, step: usize) {
    tree.check_invariants().unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
    assert_eq!(tree.len(), model.bytes.len() as u64, "seed {seed} step {step}: len");
    let mut got = Vec::with_capacity(model.bytes.len());
    let mut mappings = Vec::new();
    tree.query(0, tree.len(), &mut mappings);
    let mut at = 0;
    for m in &mappings {
        assert_eq!(m.offset, at, "seed {seed} step {step}: query not contiguous");
        at += m.len;
        got.extend((0..m.len).map(|i| if m.is_hole() { HOLE_ADDR } else { m.addr + i }));
    }
    assert!(got == model.bytes, "seed {seed} step {step}: mapping differs from the model");
}

fn random_ops(seed: u64, cfg: FlexTreeConfig, steps: usize) {
    println!("flextree fuzz seed {seed} (replay with STRATA_SEED={seed})");
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut tree = FlexTree::new(cfg).unwrap();
    let mut model = Model { bytes: Vec::new() };
    let mut next_addr = 0u64;
    for step in 0..steps {
        let len = tree.len();
        match rng.gen_range(0..100) {
            0..=29 => {
                // Append, physically contiguous with the previous append: exercises merging.
                let n = rng.gen_range(1..=64);
                tree.append(n, next_addr).unwrap();
                model.insert(len, n, next_addr);
                next_addr += n;
            }
            30..=59 => {
                let offset = rng.gen_range(0..=len);
                let n = rng.gen_range(1..=64);
                let addr = if rng.gen_bool(0.1) { HOLE_ADDR } else { next_addr + 1000 };
                tree.insert(offset, n, addr).unwrap();
                model.insert(offset, n, addr);
                next_addr += n + 1000;
            }
            60..=79 if len > 0 => {
                let offset = rng.gen_range(0..len);
                let n = rng.gen_range(1..=(len - offset).min(300));
                tree.collapse(offset, n).unwrap();
                model.collapse(offset, n);
            }
            80..=84 if len > 0 => {
                let offset = rng.gen_range(0..len);
                let n = rng.gen_range(1..=(len - offset).min(100));
                tree.remap(offset, n, next_addr).unwrap();
                model.collapse(offset, n);
                model.insert(offset, n, next_addr);
                next_addr += n;
            }
            _ if len > 0 => {
                let offset = rng.gen_range(0..len);
                let e = tree.find(offset).expect("offset inside the file");
                assert!(e.offset <= offset && offset < e.offset + e.len, "seed {seed}: find");
                let expect = model.bytes[offset as usize];
                let got = if e.is_hole() { HOLE_ADDR } else { e.addr + (offset - e.offset) };
                assert_eq!(got, expect, "seed {seed} step {step}: find({offset})");
            }
            _ => {}
        }
        if step % 97 == 0 || step + 1 == steps {
            check_against(&tree, &model, seed, step);
        }
        // Keep the model small so the test stays fast.
        if tree.len() > 60_000 {
            let n = tree.len() - 30_000;
            tree.collapse(10_000, n).unwrap();
            model.collapse(10_000, n);
        }
    }
    check_against(&tree, &model, seed, steps);
}

fn small_config() -> FlexTreeConfig {
    FlexTreeConfig {
        leaf_capacity: 4,
        internal_capacity: 4,
        max_merge_bytes: 100,
        merge_boundary_bytes: 0,
        rebase_threshold: 5_000,
    }
}

#[test]
fn random_ops_match_brute_force_small_nodes() {
    for seed in seeds(4) {
        random_ops(seed, small_config(), 10_000);
    }
}

/// Regression (seed 3090744138 of the test above): an append split left a single child in the
/// new internal node; a later collapse emptied a leaf below it that had no sibling to merge with.
#[test]
fn append_split_internal_nodes_keep_two_children_seed_3090744138() {
    random_ops(3090744138, small_config(), 10_000);
}

#[test]
fn random_ops_match_brute_force_default_nodes() {
    for seed in seeds(2) {
        random_ops(seed, FlexTreeConfig::default(), 4_000);
    }
}

#[test]
fn appends_fill_nodes_instead_of_leaving_them_half_full() {
    let cfg = small_config();
    let mut tree = FlexTree::new(cfg).unwrap();
    let mut model = Model { bytes: Vec::new() };
    let n = 4_000u64;
    for i in 0..n {
        // Physically apart, so nothing merges: one leaf entry per append.
        tree.append(3, i * 10).unwrap();
        model.insert(i * 3, 3, i * 10);
    }
    check_against(&tree, &model, 0, 0);
    // Full leaves of 4 entries (n/4) plus internal nodes left with at least 3 of their 4 children
    // (an append split keeps two children on the right): n/4 · (1/3 + 1/9 + …) = n/8, so about
    // 3n/8 nodes. Half-full splits would need about a node per extent.
    let nodes = tree.node_count() as u64;
    assert!(nodes <= 3 * n / 8 + 10, "{nodes} nodes for {n} appended extents");
    // Full nodes still take inserts and collapses anywhere.
    let mut rng = SmallRng::seed_from_u64(7);
    for step in 0..2_000 {
        let len = tree.len();
        let offset = rng.gen_range(0..len);
        if rng.gen_bool(0.5) {
            tree.insert(offset, 5, 1 << 40).unwrap();
            model.insert(offset, 5, 1 << 40);
        } else {
            let k = rng.gen_range(1..=(len - offset).min(20));
            tree.collapse(offset, k).unwrap();
            model.collapse(offset, k);
        }
        if step % 101 == 0 {
            check_against(&tree, &model, 7, step);
        }
    }
    check_against(&tree, &model, 7, 2_000);
}

#[test]
fn insert_at_front_shifts_everything() {
    let mut tree = FlexTree::new(small_config()).unwrap();
    for i in 0..1000u64 {
        tree.insert(0, 10, i * 100).unwrap();
    }
    tree.check_invariants().unwrap();
    let extents = tree.extents();
    assert_eq!(extents.len(), 1000);
    for (i, e) in extents.iter().enumerate() {
        assert_eq!(e.offset, i as u64 * 10);
        assert_eq!(e.addr, (999 - i as u64) * 100);
    }
}

#[test]
fn contiguous_appends_merge_up_to_the_limit() {
    let mut tree = FlexTree::new(FlexTreeConfig { max_merge_bytes: 100, ..small_config() }).unwrap();
    for i in 0..25u64 {
        tree.append(10, i * 10).unwrap();
    }
    let lens: Vec<u64> = tree.extents().iter().map(|e| e.len).collect();
    assert_eq!(lens, vec![100, 100, 50]);
}

/// Regression (FlexFile GC panicked on "segment live bytes underflow" in
/// tests/flexdb.rs `readers_are_not_blocked_for_a_whole_commit`): an extent ending at a segment
/// end merged with the next one starting the following segment, so one extent spanned two
/// segments. With `merge_boundary_bytes` no merge crosses a multiple of it.
#[test]
fn contiguous_appends_do_not_merge_across_the_boundary() {
    let config = FlexTreeConfig { max_merge_bytes: 100, merge_boundary_bytes: 40, ..small_config() };
    let mut tree = FlexTree::new(config).unwrap();
    for i in 0..10u64 {
        tree.append(10, i * 10).unwrap();
    }
    let extents: Vec<(u64, u64)> = tree.extents().iter().map(|e| (e.addr, e.len)).collect();
    assert_eq!(extents, vec![(0, 40), (40, 40), (80, 20)]);
}

#[test]
fn collapse_splits_extents_at_both_ends() {
    let mut tree = FlexTree::new(FlexTreeConfig { max_merge_bytes: 0, ..small_config() }).unwrap();
    tree.append(100, 1000).unwrap();
    tree.collapse(10, 80).unwrap();
    let e = tree.extents();
    assert_eq!(e.len(), 2);
    assert_eq!((e[0].offset, e[0].len, e[0].addr), (0, 10, 1000));
    assert_eq!((e[1].offset, e[1].len, e[1].addr), (10, 10, 1090));
}

#[test]
fn rebasing_keeps_offsets_past_four_gib() {
    // Split leaves inherit their parent's shift, so the partial offsets of the rightmost leaf
    // grow with the file; past 4 GiB they must be rebased (§3.3).
    let mut tree = FlexTree::new(FlexTreeConfig::default()).unwrap();
    let hole = super::node::MAX_ENTRY_BYTES;
    for i in 0..400u64 {
        tree.append(hole, HOLE_ADDR).unwrap();
        tree.append(4096, i << 20).unwrap();
    }
    tree.check_invariants().unwrap();
    assert!(tree.len() > 1 << 32);
    assert!(tree.rebase_count() > 0, "no rebase happened");
    let last = tree.find(tree.len() - 1).unwrap();
    assert_eq!((last.offset, last.addr), (tree.len() - 4096, 399 << 20));
    tree.insert(0, 4096, 1 << 40).unwrap();
    let last = tree.find(tree.len() - 1).unwrap();
    assert_eq!((last.offset, last.addr), (tree.len() - 4096, 399 << 20));
}

#[test]
fn huge_holes_are_split_into_entries() {
    let mut tree = FlexTree::new(FlexTreeConfig::default()).unwrap();
    tree.append(10 << 30, HOLE_ADDR).unwrap();
    tree.insert(5 << 30, 4096, 123 << 12).unwrap();
    tree.check_invariants().unwrap();
    assert_eq!(tree.len(), (10 << 30) + 4096);
    assert_eq!(tree.find(5 << 30).unwrap().addr, 123 << 12);
    assert!(tree.find((5 << 30) + 4096).unwrap().is_hole());
}

#[test]
fn out_of_range_operations_are_errors() {
    let mut tree = FlexTree::new(small_config()).unwrap();
    tree.append(10, 0).unwrap();
    assert!(tree.insert(11, 1, 0).is_err());
    assert!(tree.collapse(5, 6).is_err());
    assert!(tree.insert(0, 1, HOLE_ADDR - 1).is_err());
    assert!(FlexTree::new(FlexTreeConfig { leaf_capacity: 2, ..small_config() }).is_err());
    tree.check_invariants().unwrap();
}

/// A page store for persistence tests.
#[derive(Default)]
struct Pages {
    pages: HashMap<u64, Vec<u8>>,
    next: u64,
    free: Vec<u64>,
}

fn commit(tree: &mut FlexTree, store: &mut Pages, version: u64) -> u64 {
    let Pages { pages, next, free } = store;
    let mut alloc = || {
        free.pop().unwrap_or_else(|| {
            *next += 1;
            *next + 1
        })
    };
    let dirty = tree.encode_dirty(version, &mut alloc).unwrap();
    for (p, bytes) in dirty.pages {
        assert_eq!(bytes.len(), PAGE_BYTES);
        pages.insert(p, bytes);
    }
    store.free.extend(tree.take_freed_pages());
    dirty.root_page
}

fn load(store: &Pages, root: u64, len: u64, cfg: FlexTreeConfig) -> strata_core::Result<FlexTree> {
    FlexTree::load(cfg, root, store.next + 2, len, "t.tree", &mut |p, buf: &mut [u8]| {
        buf.copy_from_slice(store.pages.get(&p).expect("page written"));
        Ok(())
    })
    .map(|(tree, _)| tree)
}

#[test]
fn copy_on_write_commit_round_trips_and_rewrites_only_dirty_nodes() {
    let cfg = small_config();
    let mut tree = FlexTree::new(cfg).unwrap();
    let mut store = Pages::default();
    for i in 0..500u64 {
        tree.insert((i * 7) % (tree.len() + 1), 5, i * 1000).unwrap();
    }
    let root = commit(&mut tree, &mut store, 1);
    let loaded = load(&store, root, tree.len(), cfg).unwrap();
    assert_eq!(loaded.extents(), tree.extents());
    loaded.check_invariants().unwrap();
    let written_before = store.pages.len();
    tree.insert(0, 3, 999_999).unwrap();
    let root = commit(&mut tree, &mut store, 2);
    let pages_now = store.pages.len();
    assert!(
        pages_now - written_before < 20,
        "a one-extent insert rewrote {} pages",
        pages_now - written_before
    );
    let mut loaded = load(&store, root, tree.len(), cfg).unwrap();
    assert_eq!(loaded.extents(), tree.extents());
    // The loaded tree keeps working.
    loaded.collapse(1, 100).unwrap();
    tree.collapse(1, 100).unwrap();
    assert_eq!(loaded.extents(), tree.extents());
}

#[test]
fn damaged_node_page_is_corruption() {
    let cfg = small_config();
    let mut tree = FlexTree::new(cfg).unwrap();
    for i in 0..50u64 {
        tree.insert(0, 5, i * 1000).unwrap();
    }
    let mut store = Pages::default();
    let root = commit(&mut tree, &mut store, 1);
    for page in store.pages.keys().copied().collect::<Vec<_>>() {
        let mut damaged = Pages { pages: store.pages.clone(), next: store.next, free: Vec::new() };
        damaged.pages.get_mut(&page).unwrap()[40] ^= 4;
        let err = load(&damaged, root, tree.len(), cfg).unwrap_err();
        assert!(err.is_corruption(), "{err}");
    }
    assert!(load(&store, root, tree.len() + 1, cfg).unwrap_err().is_corruption());
}
