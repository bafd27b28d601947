//! Node page layout, damage and identity tests (docs/format/turtle.md, "Node page").

use strata_io::{MemStorage, OpenOptions, Storage};
use strata_kit::sorted_run::Entry;

use super::*;

/// Thirty records of `key(i)` → 20 bytes of `v`.
fn batch(range: std::ops::Range<u32>, v: u8) -> Vec<(Key, Entry)> {
    range.map(|i| (format!("k{i:03}").into_bytes(), Entry::put(vec![v; 20]))).collect()
}

/// Pages in memory and a root over two leaves (leaves of 512 bytes, 4 pivots), checkpointed.
fn two_leaf_tree() -> (Arc<Pages>, TreeConfig, Tree, ChildRef) {
    let storage = MemStorage::new();
    let pages = Arc::new(Pages::new(storage.open(PAGES_FILE, OpenOptions::create()).unwrap(), 0));
    let config = TreeConfig { leaf_bytes: 512, max_pivots: 4 };
    let mut tree = Tree::new(config).unwrap();
    tree.apply_batch(batch(0..30, 1)).unwrap(); // one leaf over 512 bytes: two leaves, a root
    let root = tree.checkpoint(&pages).unwrap();
    (pages, config, tree, root)
}

/// docs/format/turtle.md, "Node page": a two-pivot root over two leaves with one buffered
/// segment, each field at its documented offset.
#[test]
fn node_page_offsets() {
    let (pages, config, mut tree, _) = two_leaf_tree();
    tree.apply_batch(batch(0..2, 2)).unwrap(); // buffered in the root
    let root = tree.checkpoint(&pages).unwrap();
    assert_eq!(root.kind, ChildKind::Node);
    let mut bytes = vec![0u8; root.len as usize];
    pages.file().read_at(root.offset, &mut bytes).unwrap();
    assert_eq!(&bytes[0..8], b"STRTNOD1");
    assert_eq!(u32::from_le_bytes(bytes[8..12].try_into().unwrap()), 1);
    assert_eq!(u32::from_le_bytes(bytes[12..16].try_into().unwrap()), crc32c::crc32c(&bytes[16..]));
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    assert_eq!(bytes[16], 0, "the root has no upper key");
    assert_eq!(u32_at(17), 2, "pivot count");
    // Pivot 0: the empty key, a leaf child.
    assert_eq!(u32_at(21), 0);
    assert_eq!(bytes[25], ChildKind::Leaf as u8);
    let (leaf_offset, leaf_len, leaf_bytes) = (u64_at(26), u64_at(34), u64_at(42));
    assert_eq!((leaf_offset % 4096, leaf_len % 4096), (0, 0));
    assert!(leaf_bytes > 0);
    let leaf_identity = u32_at(50);
    // Pivot 1: its 4-byte key, then its child.
    assert_eq!(u32_at(54), 4);
    let level_count_at = 54 + 4 + 4 + 1 + 24 + 4;
    assert_eq!(bytes[level_count_at] as usize, config.max_levels());
    assert_eq!(u32_at(level_count_at + 1), 1, "level 0 holds one segment");
    let segment_at = level_count_at + 5;
    assert_eq!(u64_at(segment_at) % 4096, 0);
    assert_eq!(u64_at(segment_at + 16), 2 * (4 + 20 + 8), "the segment's entry bytes");
    let segment = (u64_at(segment_at), u64_at(segment_at + 8), u32_at(segment_at + 24));
    assert_eq!(u32_at(segment_at + 28), 0, "its view starts at the empty key");
    assert_eq!(bytes[segment_at + 32], 0, "and has no end");
    assert_eq!(u32_at(segment_at + 33), 0, "nothing flushed");
    // The references open as kit sorted runs with the identities the page gives them.
    let open = |offset, len| {
        strata_kit::sorted_run::RunReader::open(pages.file().clone(), PAGES_FILE, offset, len).unwrap()
    };
    let leaf = open(leaf_offset, leaf_len);
    assert!(leaf.entry_count() > 0);
    assert_eq!(leaf.identity(), leaf_identity);
    assert_eq!(open(segment.0, segment.1).identity(), segment.2);
}

#[test]
fn every_damaged_byte_of_a_node_page_is_refused() {
    let (pages, config, _tree, root) = two_leaf_tree();
    let mut good = vec![0u8; root.len as usize];
    pages.file().read_at(root.offset, &mut good).unwrap();
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 0x04;
        pages.file().write_at(root.offset, &bad).unwrap();
        match Tree::open(&pages, root, config) {
            Err(strata_core::Error::Corruption { file, .. }) => assert_eq!(file, PAGES_FILE),
            // The version field is outside the checksum: another version is refused as such.
            Err(strata_core::Error::Incompatible(_)) if (8..12).contains(&at) => {}
            Err(other) => panic!("byte {at}: {other}"),
            Ok(_) => panic!("byte {at}: a damaged node page opened"),
        }
    }
    pages.file().write_at(root.offset, &good).unwrap();
    assert!(Tree::open(&pages, root, config).is_ok());
}

/// Found by the `turtle_pages` fuzz target: one valid run copied over another (whole
/// extents, every checksum intact) opened, and the keys of the overwritten leaf read as
/// absent. References now carry the run's identity and the node page's CRC.
#[test]
fn a_valid_run_copied_over_another_is_refused_at_open() {
    let (pages, config, tree, root) = two_leaf_tree();
    let Subtree::Node(node) = &tree.root else { panic!("a root node") };
    let extents: Vec<Extent> = node
        .children()
        .iter()
        .map(|c| match c {
            Subtree::Leaf(leaf) => leaf.run().extent().unwrap(),
            Subtree::Node(_) => panic!("leaves under the root"),
        })
        .collect();
    assert_eq!(extents[0].len, extents[1].len, "two leaves of one page each");
    let mut second = vec![0u8; extents[1].len as usize];
    pages.file().read_at(extents[1].offset, &mut second).unwrap();
    pages.file().write_at(extents[0].offset, &second).unwrap();
    match Tree::open(&pages, root, config) {
        Err(strata_core::Error::Corruption { file, offset, .. }) => {
            assert_eq!((file.as_str(), offset), (PAGES_FILE, extents[0].offset))
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a leaf overwritten by its neighbour opened"),
    }
}

/// Found by the `turtle_checkpoint` fuzz target: a resealed record whose root length was near
/// 2^64 overflowed rounding it up to whole pages (a panic). It is corruption now.
#[test]
fn a_reference_too_long_for_any_file_is_corruption() {
    let (pages, config, _tree, root) = two_leaf_tree();
    for len in [u64::MAX, u64::MAX - 4095, 1 << 62] {
        let damaged = ChildRef { len, ..root };
        match Tree::open(&pages, damaged, config) {
            Err(strata_core::Error::Corruption { file, .. }) => assert_eq!(file, PAGES_FILE),
            Err(other) => panic!("{len}: {other}"),
            Ok(_) => panic!("{len}: opened"),
        }
    }
}
