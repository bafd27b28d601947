//! Records lost on disk (a lost write leaves zeros) at the end of a hot page read as the padding
//! that may end any hot page, so a compaction round skips them and truncates the page. A record
//! above the round that links to one of them (a key sharing its hot-index entry) must then make
//! a read that walks the chain through it fail as corruption, not end the chain there.

use std::sync::Arc;

use strata_core::{Durability, Engine, EngineConfig, Error};
use strata_io::{MemStorage, OpenOptions, Storage};

use crate::engine::test_engines::manual_options;
use crate::hash::key_hash;
use crate::{F2Engine, F2Options};

const PAGE_BYTES: u64 = 4 << 10;
const SEGMENT_BYTES: u64 = 16 << 10;

/// A round truncates the lost record away; a read of its key then walks the newer record's
/// chain into the released padding below `begin`, which is corruption, not the chain's end
/// (that would read the key as absent).
#[test]
fn a_chain_link_into_released_padding_is_corruption_not_the_end_of_the_chain() {
    let storage = Arc::new(MemStorage::new());
    let options = F2Options {
        page_size_bytes: Some(PAGE_BYTES),
        segment_bytes: SEGMENT_BYTES,
        hot_index_bytes: Some(1 << 10),
        // One page a round: the round's last page is the one with the lost record.
        compaction_fraction: 0.001,
        ..manual_options()
    };
    let config = EngineConfig { memory_budget_bytes: 256 << 10, ..EngineConfig::default() };
    let engine = F2Engine::open_with(storage.clone(), &config, options).unwrap();
    let inner = engine.inner.clone();
    let mut written = 0u32;
    while inner.hot.head() < 2 * PAGE_BYTES {
        engine.put(format!("key-{written:05}").as_bytes(), &[7u8; 60], Durability::None).unwrap();
        written += 1;
    }
    let begin = inner.hot.begin();
    assert!(begin < PAGE_BYTES && inner.hot.head() >= PAGE_BYTES, "the first page is on disk only");
    // The first page's last record: key `lost`, the newest record of its hot-index entry.
    let mut last = None;
    inner
        .hot
        .scan(begin, PAGE_BYTES, &mut |address, view| {
            last = Some((address, view.key.to_vec(), view.stored_len() as u64));
            Ok(())
        })
        .unwrap();
    let (lost_address, lost, lost_bytes) = last.unwrap();
    let entry = inner.hot_index.entry_id(key_hash(&lost));
    assert_eq!(inner.hot_index.find(key_hash(&lost)).map(|e| e.address()), Some(lost_address));
    // A new key sharing that entry: its record links to the lost one.
    let sharing = (0u64..)
        .map(|i| format!("sharing-{i}").into_bytes())
        .find(|k| inner.hot_index.entry_id(key_hash(k)) == entry);
    let sharing = sharing.unwrap();
    engine.put(&sharing, b"newer", Durability::None).unwrap();
    // The lost write: the record's bytes on disk are zeros.
    let segment = storage.open("f2-hot-0000000000000000.seg", OpenOptions::existing()).unwrap();
    segment.write_at(lost_address, &vec![0u8; lost_bytes as usize]).unwrap();
    inner.compact_hot().unwrap();
    assert!(inner.hot.begin() >= PAGE_BYTES, "the round released the first page");
    assert_eq!(engine.get(&sharing).unwrap().as_deref(), Some(&b"newer"[..]));
    let read = engine.get(&lost);
    assert!(
        matches!(&read, Err(Error::Corruption { file, what, .. }) if file == "f2-hot-0000000000000000.seg" && what.contains("released as page padding")),
        "{read:?}"
    );
}
