//! Runs whose data blocks are aligned (`RunOptions::block_align_bytes`): each block a device
//! page of its own, read in one aligned read; the layout checked at open like a packed one.

use std::ops::Bound;
use std::sync::{Arc, Mutex};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Error, Key, Result};
use strata_io::{HookStorage, MemStorage, OpenOptions, ReadHook, Storage, StorageFile};

use super::writer::Footer;
use super::*;

fn model(seed: u64, n: usize, value_most: usize) -> Vec<(Key, Entry)> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut keys: Vec<Key> =
        (0..n).map(|_| format!("key{:08}", rng.gen_range(0..1_000_000)).into_bytes()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|k| {
            let entry = match rng.gen_range(0..20) {
                0 => Entry::delete(),
                1 => Entry::put(vec![7; rng.gen_range(5_000..9_000)]), // larger than a page
                _ => Entry::put((0..rng.gen_range(0..value_most)).map(|_| rng.gen()).collect()),
            };
            (k, entry)
        })
        .collect()
}

fn aligned(page_bytes: usize) -> RunOptions {
    RunOptions {
        block_bytes: page_bytes,
        block_align_bytes: page_bytes,
        align_bytes: page_bytes,
        ..RunOptions::default()
    }
}

fn write(file: &Arc<dyn StorageFile>, entries: &[(Key, Entry)], options: RunOptions) -> RunInfo {
    let mut writer = RunWriter::new(file.clone(), 0, options).unwrap();
    for (key, entry) in entries {
        writer.add(key, entry.kind, &entry.value).unwrap();
    }
    writer.finish().unwrap()
}

/// Every read's offset and length.
type Reads = Arc<Mutex<Vec<(u64, usize)>>>;

/// A storage that records every read's offset and length.
fn recorded() -> (Arc<dyn Storage>, Reads) {
    let reads = Arc::new(Mutex::new(Vec::new()));
    let seen = reads.clone();
    let hook: ReadHook = Arc::new(move |_, offset, len| {
        seen.lock().unwrap().push((offset, len));
        Ok(())
    });
    (Arc::new(HookStorage::reads(Arc::new(MemStorage::new()), hook)), reads)
}

#[test]
fn a_point_read_of_an_aligned_run_reads_one_aligned_page_unless_its_entry_is_larger() {
    let entries = model(1, 3_000, 300);
    let (storage, reads) = recorded();
    let file = storage.open("run", OpenOptions::create()).unwrap();
    let info = write(&file, &entries, aligned(4096));
    let run = RunReader::open(file, "run", 0, info.len_bytes).unwrap();
    assert!(info.data_blocks > 50, "{} blocks", info.data_blocks);
    for (key, entry) in &entries {
        reads.lock().unwrap().clear();
        assert_eq!(run.get(key).unwrap().as_ref(), Some(entry));
        let reads = reads.lock().unwrap().clone();
        assert_eq!(reads.len(), 1, "one read per point read");
        let (offset, len) = reads[0];
        assert_eq!(offset % 4096, 0, "a block at {offset}");
        if entry.value.len() < 4_000 {
            assert!(len <= 4096, "a {len}-byte read for a small entry at {offset}");
        }
    }
}

#[test]
fn an_aligned_run_iterates_as_its_entries_both_ways() {
    for (seed, page) in [(2, 4096), (3, 512), (4, 256)] {
        let entries = model(seed, 2_000, 200);
        let file = MemStorage::new().open("run", OpenOptions::create()).unwrap();
        let info = write(&file, &entries, aligned(page));
        let run = Arc::new(RunReader::open(file, "run", 0, info.len_bytes).unwrap());
        let forward: Vec<_> =
            run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).map(Result::unwrap).collect();
        assert_eq!(forward, entries, "page {page}");
        let mut reverse: Vec<_> =
            run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Reverse).map(Result::unwrap).collect();
        reverse.reverse();
        assert_eq!(reverse, entries, "page {page}");
        let from = entries[entries.len() / 2].0.clone();
        let tail = run.iter(Bound::Included(from), Bound::Unbounded, Direction::Forward).count();
        assert_eq!(tail, entries.len() - entries.len() / 2, "page {page}");
    }
}

/// A flipped byte is an error, or it lies in the padding between blocks, which no read
/// returns: every entry still reads back as written.
#[test]
fn a_damaged_aligned_run_is_an_error_or_unchanged_data() {
    let entries = model(5, 80, 120);
    let file = MemStorage::new().open("run", OpenOptions::create()).unwrap();
    let info = write(&file, &entries, aligned(256));
    let pristine = strata_io::read_all(file.as_ref()).unwrap();
    assert_eq!(pristine.len() as u64, info.len_bytes);
    let keys: Vec<&Key> = entries.iter().map(|(k, _)| k).collect();
    let mut padding_flips = 0;
    for at in 0..pristine.len() {
        match super::tests::read_with_byte_flipped(&pristine, at, &keys, Direction::Reverse) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, "run"),
            Err(e) => panic!("byte {at}: {e}"),
            Ok((mut all, gets)) => {
                all.reverse();
                assert_eq!(all, entries, "byte {at} flipped: different entries");
                assert!(gets.iter().zip(&entries).all(|(g, (_, e))| g.as_ref() == Some(e)), "byte {at}");
                padding_flips += 1;
            }
        }
    }
    assert!(padding_flips > 0 && padding_flips < pristine.len() / 2, "{padding_flips} bytes of padding");
}

#[test]
fn a_footer_whose_alignment_disagrees_with_the_blocks_is_corruption() {
    let entries = model(6, 300, 100);
    let file = MemStorage::new().open("run", OpenOptions::create()).unwrap();
    let info = write(&file, &entries, RunOptions { block_bytes: 256, ..RunOptions::default() });
    let mut bytes = strata_io::read_all(file.as_ref()).unwrap();
    let footer_at = bytes.len() - FOOTER_BYTES;
    for log2 in [8u8, 17] {
        let mut footer = Footer::decode(&bytes[footer_at..]).unwrap();
        footer.block_align_log2 = log2;
        let mut encoded = footer.encode();
        encoded[50] = log2;
        let crc = crc32c::crc32c(&encoded[..56]);
        encoded[56..60].copy_from_slice(&crc.to_le_bytes());
        bytes[footer_at..].copy_from_slice(&encoded);
        let copy = MemStorage::new().open("run", OpenOptions::create()).unwrap();
        copy.write_at(0, &bytes).unwrap();
        match RunReader::open(copy, "run", 0, info.len_bytes) {
            Err(Error::Corruption { .. }) => {}
            other => panic!("alignment 2^{log2} over packed blocks: {:?}", other.map(|_| ())),
        }
    }
}

#[test]
fn a_block_alignment_that_is_no_power_of_two_or_too_large_is_refused() {
    for block_align_bytes in [3, 4095, 1 << 17] {
        let file = MemStorage::new().open("run", OpenOptions::create()).unwrap();
        let options = RunOptions { block_align_bytes, ..RunOptions::default() };
        assert!(
            matches!(RunWriter::new(file, 0, options), Err(Error::InvalidArgument(_))),
            "{block_align_bytes}"
        );
    }
}
