use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Direction, Error, Key, Result};
use strata_io::{MemStorage, OpenOptions, Storage, StorageFile};

use super::block::BlockBuilder;
use super::filter::{RunFilter, BINARY_FUSE_HEADER_BYTES};
use super::writer::Footer;
use super::*;
use crate::memtable::MemTable;
use strata_core::borrow_bound;

fn file() -> Arc<dyn StorageFile> {
    MemStorage::new().open("run", OpenOptions::create()).unwrap()
}

type Model = BTreeMap<Key, Entry>;

fn random_model(rng: &mut SmallRng, n: usize, key_space: u32) -> Model {
    let mut model = Model::new();
    while model.len() < n {
        let key = format!("key{:08}", rng.gen_range(0..key_space)).into_bytes();
        let entry = match rng.gen_range(0..10) {
            0 => Entry::delete(),
            1 => Entry::merge(vec![rng.gen()]),
            _ => Entry::put((0..rng.gen_range(0..200)).map(|_| rng.gen()).collect()),
        };
        model.insert(key, entry);
    }
    model
}

fn write_run(file: &Arc<dyn StorageFile>, base: u64, model: &Model, options: RunOptions) -> RunInfo {
    let mut writer = RunWriter::new(file.clone(), base, options).unwrap();
    for (key, entry) in model {
        writer.add(key, entry.kind, &entry.value).unwrap();
    }
    writer.finish().unwrap()
}

fn open(file: &Arc<dyn StorageFile>, base: u64, info: &RunInfo) -> Arc<RunReader> {
    Arc::new(RunReader::open(file.clone(), "run", base, info.len_bytes).unwrap())
}

fn small_blocks() -> RunOptions {
    RunOptions { block_bytes: 256, restart_interval: 4, ..RunOptions::default() }
}

#[test]
fn footer_offsets() {
    let footer = Footer {
        index_offset: 0x0102_0304_0506_0708,
        index_len: 0x1112_1314,
        filter_len: 0x2122_2324,
        filter_offset: 0x3132_3334_3536_3738,
        entry_count: 0x4142_4344_4546_4748,
        tombstone_count: 0x5152_5354_5556_5758,
        max_lsn: 0x6162_6364_6566_6768,
        block_align_log2: 12,
    };
    let bytes = footer.encode();
    assert_eq!(bytes.len(), FOOTER_BYTES);
    assert_eq!(bytes[0], 0x08);
    assert_eq!(bytes[7], 0x01);
    assert_eq!(bytes[8], 0x14);
    assert_eq!(bytes[12], 0x24);
    assert_eq!(bytes[16], 0x38);
    assert_eq!(bytes[24], 0x48);
    assert_eq!(bytes[32], 0x58);
    assert_eq!(bytes[40], 0x68);
    assert_eq!(&bytes[48..52], &[1, 0, 12, 0]);
    assert_eq!(&bytes[52..56], b"SRUN");
    assert_eq!(u32::from_le_bytes(bytes[56..60].try_into().unwrap()), crc32c::crc32c(&bytes[..56]));
    assert_eq!(Footer::decode(&bytes), Ok(footer));
}

#[test]
fn block_offsets() {
    let mut builder = BlockBuilder::new(2);
    builder.add(b"apple", EntryKind::Put, b"v1");
    builder.add(b"apricot", EntryKind::Delete, b"");
    builder.add(b"banana", EntryKind::Merge, b"m");
    let bytes = builder.finish();
    // Entry 0 at 0: shared 0, unshared 5, value 2, kind 0, "apple", "v1".
    assert_eq!(&bytes[0..4], &[0, 5, 2, 0]);
    assert_eq!(&bytes[4..9], b"apple");
    assert_eq!(&bytes[9..11], b"v1");
    // Entry 1 at 11: shares "ap", 5 more bytes, no value, a delete.
    assert_eq!(&bytes[11..15], &[2, 5, 0, 1]);
    assert_eq!(&bytes[15..20], b"ricot");
    // Entry 2 at 20 is a restart (interval 2): stored whole, a merge operand.
    assert_eq!(&bytes[20..24], &[0, 6, 1, 2]);
    assert_eq!(&bytes[24..30], b"banana");
    assert_eq!(bytes[30], b'm');
    // Restarts at 0 and 20, then their count.
    assert_eq!(&bytes[31..35], &0u32.to_le_bytes());
    assert_eq!(&bytes[35..39], &20u32.to_le_bytes());
    assert_eq!(&bytes[39..43], &2u32.to_le_bytes());
    assert_eq!(bytes.len(), 43);
    let block = Block::parse(bytes.clone()).unwrap();
    assert_eq!(block.get(b"apricot").unwrap(), Some((EntryKind::Delete, &b""[..])));
    assert_eq!(block.get(b"banana").unwrap(), Some((EntryKind::Merge, &b"m"[..])));
    assert_eq!(block.get(b"apples").unwrap(), None);
    let decoded = Block::parse(bytes).unwrap().decode().unwrap();
    assert_eq!(decoded.entry(1), (&b"apricot"[..], EntryKind::Delete, &b""[..]));
    assert_eq!(BlockBuilder::new(16).finish(), 0u32.to_le_bytes());
}

#[test]
fn filter_offsets() {
    let hashes: Vec<u64> = (0..1000u64).map(|i| super::filter::key_hash(&i.to_be_bytes())).collect();
    let filter = RunFilter::build(hashes);
    let bytes = filter.encode();
    let RunFilter::BinaryFuse8(fuse) = &filter else { panic!("no filter built") };
    let d = &fuse.descriptor;
    assert_eq!(bytes[0], 1);
    assert_eq!(&bytes[1..9], &d.seed.to_le_bytes());
    assert_eq!(&bytes[9..13], &d.segment_length.to_le_bytes());
    assert_eq!(&bytes[13..17], &d.segment_length_mask.to_le_bytes());
    assert_eq!(&bytes[17..21], &d.segment_count_length.to_le_bytes());
    assert_eq!(&bytes[BINARY_FUSE_HEADER_BYTES..], &fuse.fingerprints[..]);
    assert_eq!(
        fuse.fingerprints.len() as u32,
        d.segment_count_length + 2 * d.segment_length,
        "the decoder's length rule"
    );
    let back = RunFilter::decode(&bytes).unwrap();
    assert!((0..1000u64).all(|i| back.may_contain(&i.to_be_bytes())));
    assert_eq!(RunFilter::None.encode(), vec![0]);
    // A descriptor that would send a lookup past the fingerprints is refused.
    let mut bad = bytes.clone();
    bad[17..21].copy_from_slice(&(d.segment_count_length * 2).to_le_bytes());
    assert!(RunFilter::decode(&bad).is_err());
    assert!(RunFilter::decode(&bytes[..bytes.len() - 1]).is_err());
}

#[test]
fn the_filter_rejects_most_absent_keys() {
    let hashes = (0..20_000u64).map(|i| super::filter::key_hash(&i.to_be_bytes())).collect();
    let filter = RunFilter::build(hashes);
    let false_positives = (20_000..120_000u64).filter(|i| filter.may_contain(&i.to_be_bytes())).count();
    assert!(false_positives < 1_000, "{false_positives} of 100,000 absent keys passed (expected ~390)");
    let bits_per_key = filter.memory_bytes() as f64 * 8.0 / 20_000.0;
    assert!(bits_per_key < 10.0, "{bits_per_key} bits per key");
}

#[test]
fn point_reads_match_the_model_and_absent_keys_are_none() {
    let mut rng = SmallRng::seed_from_u64(7);
    let model = random_model(&mut rng, 3_000, 20_000);
    let file = file();
    let info = write_run(&file, 0, &model, small_blocks());
    assert_eq!(info.entry_count, model.len() as u64);
    assert_eq!(info.tombstone_count, model.values().filter(|e| e.kind == EntryKind::Delete).count() as u64);
    assert_eq!(info.first_key.as_ref(), model.keys().next());
    assert_eq!(info.last_key.as_ref(), model.keys().next_back());
    let run = open(&file, 0, &info);
    assert!(run.data_blocks() > 100, "{} blocks", run.data_blocks());
    for (key, entry) in &model {
        assert_eq!(run.get(key).unwrap().as_ref(), Some(entry));
    }
    for i in 0..20_000u32 {
        let key = format!("key{i:08}").into_bytes();
        assert_eq!(run.get(&key).unwrap().as_ref(), model.get(&key));
    }
    assert_eq!(run.get(b"").unwrap(), None);
    assert_eq!(run.get(b"zzz").unwrap(), None);
}

fn bound(rng: &mut SmallRng) -> Bound<Key> {
    let key = format!("key{:08}", rng.gen_range(0..21_000)).into_bytes();
    match rng.gen_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

fn model_range(
    model: &Model,
    lower: &Bound<Key>,
    upper: &Bound<Key>,
    direction: Direction,
) -> Vec<(Key, Entry)> {
    let inside = |k: &Key| {
        strata_core::at_or_after(k, strata_core::borrow_bound(lower))
            && strata_core::at_or_before(k, strata_core::borrow_bound(upper))
    };
    let mut out: Vec<_> =
        model.iter().filter(|(k, _)| inside(k)).map(|(k, e)| (k.clone(), e.clone())).collect();
    if direction == Direction::Reverse {
        out.reverse();
    }
    out
}

#[test]
fn range_iteration_matches_the_model_both_ways() {
    let mut rng = SmallRng::seed_from_u64(11);
    let model = random_model(&mut rng, 2_000, 20_000);
    let file = file();
    let info = write_run(&file, 0, &model, small_blocks());
    let run = open(&file, 0, &info);
    for _ in 0..300 {
        let (lower, upper) = (bound(&mut rng), bound(&mut rng));
        for direction in [Direction::Forward, Direction::Reverse] {
            let got: Vec<_> = run.iter(lower.clone(), upper.clone(), direction).map(Result::unwrap).collect();
            assert_eq!(
                got,
                model_range(&model, &lower, &upper, direction),
                "{lower:?}..{upper:?} {direction:?}"
            );
        }
    }
}

#[test]
fn approximate_bytes_cover_the_range_and_are_zero_only_without_entries() {
    let mut rng = SmallRng::seed_from_u64(12);
    let model = random_model(&mut rng, 2_000, 20_000);
    let file = file();
    let info = write_run(&file, 0, &model, small_blocks());
    let run = open(&file, 0, &info);
    for _ in 0..500 {
        let (lower, upper) = (bound(&mut rng), bound(&mut rng));
        let entries = model_range(&model, &lower, &upper, Direction::Forward);
        let estimate = run.approximate_bytes(borrow_bound(&lower), borrow_bound(&upper));
        let exact: u64 = entries.iter().map(|(k, e)| (k.len() + e.value.len()) as u64).sum();
        assert!(estimate >= exact / 2, "{lower:?}..{upper:?}: {estimate} for {exact} bytes of entries");
        let blocks = estimate.div_ceil(256);
        assert!(entries.is_empty() || estimate > 0, "{lower:?}..{upper:?}: entries but no bytes");
        if strata_core::bounds_hold_nothing(borrow_bound(&lower), borrow_bound(&upper)) {
            assert_eq!(estimate, 0, "{lower:?}..{upper:?}: an inverted range counted bytes");
        }
        // Whole blocks: at most one block past each end of the range's entries.
        assert!(blocks <= (exact / 128) + 3, "{lower:?}..{upper:?}: {estimate} for {exact}");
    }
    // Two neighbouring keys (one block holds both) as an inverted range: nothing.
    let keys: Vec<&Key> = model.keys().take(2).collect();
    assert_eq!(run.approximate_bytes(Bound::Included(keys[1]), Bound::Excluded(keys[0])), 0);
    assert_eq!(run.approximate_bytes(Bound::Excluded(keys[0]), Bound::Excluded(keys[0])), 0);
    let all = run.approximate_bytes(Bound::Unbounded, Bound::Unbounded);
    assert!(all > 0 && all < info.len_bytes);
}

#[test]
fn an_empty_run_opens_and_holds_nothing() {
    let file = file();
    let info = write_run(&file, 0, &Model::new(), RunOptions::default());
    assert_eq!((info.entry_count, info.first_key.clone(), info.last_key.clone()), (0, None, None));
    let run = open(&file, 0, &info);
    assert_eq!(run.get(b"a").unwrap(), None);
    assert_eq!(run.last_key(), None);
    assert_eq!(run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Reverse).count(), 0);
}

#[test]
fn an_aligned_run_at_a_base_has_an_aligned_length_and_reads_back() {
    let mut rng = SmallRng::seed_from_u64(3);
    let model = random_model(&mut rng, 500, 5_000);
    let file = file();
    file.write_at(0, &[0xee; 8192]).unwrap();
    let options = RunOptions { align_bytes: 4096, max_lsn: 77, ..RunOptions::default() };
    let info = write_run(&file, 8192, &model, options);
    assert_eq!(info.len_bytes % 4096, 0);
    let run = open(&file, 8192, &info);
    assert_eq!(run.max_lsn(), 77);
    assert!(model.iter().all(|(k, e)| run.get(k).unwrap().as_ref() == Some(e)));
    assert!(RunWriter::new(file, 100, options).is_err(), "an unaligned base is refused");
}

#[test]
fn keys_out_of_order_and_deletes_with_values_are_refused() {
    let mut writer = RunWriter::new(file(), 0, RunOptions::default()).unwrap();
    writer.add(b"b", EntryKind::Put, b"1").unwrap();
    assert!(matches!(writer.add(b"b", EntryKind::Put, b"2"), Err(Error::InvalidArgument(_))));
    assert!(matches!(writer.add(b"a", EntryKind::Put, b"2"), Err(Error::InvalidArgument(_))));
    assert!(matches!(writer.add(b"c", EntryKind::Delete, b"x"), Err(Error::InvalidArgument(_))));
    writer.add(b"c", EntryKind::Delete, b"").unwrap();
}

/// Every single-byte change of a run is an error (at open, or when the damaged block is read),
/// never different data; the error names the file.
#[test]
fn every_damaged_byte_is_an_error_never_other_data() {
    let mut rng = SmallRng::seed_from_u64(5);
    let model = random_model(&mut rng, 60, 1_000);
    let file = file();
    let info = write_run(&file, 0, &model, small_blocks());
    let pristine = strata_io::read_all(file.as_ref()).unwrap();
    assert!(
        pristine.len() > 4_000 && info.data_blocks > 10,
        "{} bytes, {} blocks",
        pristine.len(),
        info.data_blocks
    );
    assert_eq!(pristine.len() as u64, info.len_bytes);
    let keys: Vec<&Key> = model.keys().collect();
    for at in 0..pristine.len() {
        match read_with_byte_flipped(&pristine, at, &keys, Direction::Forward) {
            Err(Error::Corruption { file, .. }) => assert_eq!(file, "run"),
            Err(e) => panic!("byte {at}: {e}"),
            Ok((all, gets)) => {
                panic!("byte {at} flipped and unnoticed: {} entries, {} gets", all.len(), gets.len())
            }
        }
    }
}

/// A run's entries in one direction, and what gets of some keys returned.
pub(super) type EntriesAndGets = (Vec<(Key, Entry)>, Vec<Option<Entry>>);

/// What a reader of the run `pristine` (written at offset 0 of a file named "run") returns with
/// byte `at` flipped: every entry in `direction`, and a get of each of `keys`.
pub(super) fn read_with_byte_flipped(
    pristine: &[u8],
    at: usize,
    keys: &[&Key],
    direction: Direction,
) -> Result<EntriesAndGets> {
    let mut damaged = pristine.to_vec();
    damaged[at] ^= 0x40;
    let copy = MemStorage::new().open("run", OpenOptions::create())?;
    copy.write_at(0, &damaged)?;
    let run = Arc::new(RunReader::open(copy, "run", 0, pristine.len() as u64)?);
    let all = run.iter(Bound::Unbounded, Bound::Unbounded, direction).collect::<Result<_>>()?;
    let gets = keys.iter().map(|k| run.get(k)).collect::<Result<_>>()?;
    Ok((all, gets))
}

/// Concatenates `operand`s (newer after older); applied to a base, appends to it.
struct Append;

impl MergeOperator for Append {
    fn combine(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Result<Vec<u8>> {
        Ok([older, newer].concat())
    }
    fn apply(&self, _key: &[u8], base: Option<&[u8]>, operand: &[u8]) -> Result<Entry> {
        Ok(Entry::put([base.unwrap_or_default(), operand].concat()))
    }
}

/// What a merge of `layers` (newest first) yields for `key`, by replaying them oldest first.
fn replay(layers: &[Model], key: &[u8], output: MergeOutput) -> Option<Entry> {
    let mut state: Option<Entry> = None;
    for layer in layers.iter().rev() {
        let Some(entry) = layer.get(key) else { continue };
        state = Some(match (entry.kind, state.take()) {
            (EntryKind::Merge, Some(Entry { kind: EntryKind::Put, value })) => {
                Entry::put([value, entry.value.clone()].concat())
            }
            (EntryKind::Merge, Some(Entry { kind: EntryKind::Delete, .. })) => {
                Entry::put(entry.value.clone())
            }
            (EntryKind::Merge, Some(Entry { kind: EntryKind::Merge, value })) => {
                Entry::merge([value, entry.value.clone()].concat())
            }
            _ => entry.clone(),
        });
    }
    match (state, output) {
        (Some(Entry { kind: EntryKind::Delete, .. }), MergeOutput::Visible | MergeOutput::Bottom) => None,
        (Some(Entry { kind: EntryKind::Merge, value }), MergeOutput::Visible | MergeOutput::Bottom) => {
            Some(Entry::put(value))
        }
        (state, _) => state,
    }
}

#[test]
fn a_merge_of_runs_and_a_memtable_matches_a_replay_both_ways() {
    let mut rng = SmallRng::seed_from_u64(13);
    let layers: Vec<Model> = (0..4).map(|_| random_model(&mut rng, 400, 2_000)).collect();
    let runs: Vec<Arc<RunReader>> = layers[1..]
        .iter()
        .map(|layer| {
            let file = file();
            let info = write_run(&file, 0, layer, small_blocks());
            open(&file, 0, &info)
        })
        .collect();
    // The newest layer is a MemTable (which holds puts and deletes only).
    let mut table = MemTable::default();
    let mut newest = Model::new();
    for (key, entry) in &layers[0] {
        match entry.kind {
            EntryKind::Put => {
                table.apply(strata_core::BatchOp::Put { key: key.clone(), value: entry.value.clone() })
            }
            EntryKind::Delete => table.apply(strata_core::BatchOp::Delete { key: key.clone() }),
            EntryKind::Merge => continue,
        }
        newest.insert(key.clone(), entry.clone());
    }
    let layers: Vec<Model> = std::iter::once(newest).chain(layers[1..].iter().cloned()).collect();
    let all_keys: std::collections::BTreeSet<Key> = layers.iter().flat_map(|l| l.keys().cloned()).collect();
    for output in [MergeOutput::Visible, MergeOutput::Bottom, MergeOutput::Above] {
        for direction in [Direction::Forward, Direction::Reverse] {
            let mut sources: Vec<SourceIter<'_>> =
                vec![table_source(table.range((Bound::Unbounded, Bound::Unbounded)), direction)];
            sources.extend(
                runs.iter().map(|r| {
                    Box::new(r.iter(Bound::Unbounded, Bound::Unbounded, direction)) as SourceIter<'_>
                }),
            );
            let got: Vec<_> = MergeIter::new(sources, direction, output)
                .with_operator(Arc::new(Append))
                .map(Result::unwrap)
                .collect();
            let mut expected: Vec<_> =
                all_keys.iter().filter_map(|k| replay(&layers, k, output).map(|e| (k.clone(), e))).collect();
            if direction == Direction::Reverse {
                expected.reverse();
            }
            let merges = expected.iter().filter(|(_, e)| e.kind == EntryKind::Merge).count();
            assert_eq!(merges > 0, output == MergeOutput::Above, "{output:?}: {merges} operands left");
            assert_eq!(got, expected, "{output:?} {direction:?}");
        }
    }
}

#[test]
fn a_failing_source_ends_the_merge_with_its_error() {
    let good: SourceIter<'_> = Box::new((0..5u8).map(|i| Ok((vec![i], Entry::put(vec![i])))));
    let bad: SourceIter<'_> = Box::new(
        vec![Ok((vec![1], Entry::put(vec![9]))), Err(Error::corruption("other", 12, "bad block"))]
            .into_iter(),
    );
    let items: Vec<_> = MergeIter::new(vec![good, bad], Direction::Forward, MergeOutput::Visible).collect();
    assert!(items.iter().any(|i| matches!(i, Err(Error::Corruption { offset: 12, .. }))), "{items:?}");
    assert!(matches!(items.last(), Some(Err(_))));
    let operand: SourceIter<'_> = Box::new(std::iter::once(Ok((vec![1], Entry::merge(vec![1])))));
    let items: Vec<_> = MergeIter::new(vec![operand], Direction::Forward, MergeOutput::Visible).collect();
    assert!(matches!(items.as_slice(), [Err(Error::InvalidArgument(_))]), "no operator: {items:?}");
}

/// Reads through a block cache answer as the file does, the second time from memory; a run
/// written over the same bytes and opened again never gets the first run's cached blocks.
#[test]
fn a_block_cache_answers_as_the_file_does_and_never_for_a_replaced_run() {
    let mut rng = SmallRng::seed_from_u64(13);
    let model = random_model(&mut rng, 1_000, 10_000);
    let file = file();
    let info = write_run(&file, 0, &model, small_blocks());
    let cache = BlockCache::new(1 << 20);
    let run = Arc::new(
        RunReader::open_cached(file.clone(), "run", 0, info.len_bytes, Some(cache.clone())).unwrap(),
    );
    for _ in 0..2 {
        for (key, entry) in &model {
            assert_eq!(run.get(key).unwrap().as_ref(), Some(entry));
        }
        let all: Vec<_> =
            run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).map(Result::unwrap).collect();
        assert_eq!(all.len(), model.len());
    }
    let (hits, misses) = cache.hits_and_misses();
    assert!(
        misses <= info.data_blocks && hits > 2 * model.len() as u64 - misses,
        "{hits} hits, {misses} misses"
    );
    // Another run in the same bytes: its reader must read them, not the cache.
    let other = random_model(&mut rng, 1_000, 10_000);
    let info2 = write_run(&file, 0, &other, small_blocks());
    let run2 = RunReader::open_cached(file.clone(), "run", 0, info2.len_bytes, Some(cache.clone())).unwrap();
    for (key, entry) in &other {
        assert_eq!(run2.get(key).unwrap().as_ref(), Some(entry));
    }
    cache.set_capacity(0);
    assert_eq!(cache.used_bytes(), 0);
}

/// A run built in one file and copied to another answers through a reader opened on the first
/// and moved (`moved_to`), and its errors name the second file at its absolute offset.
#[test]
fn a_reader_moved_with_its_run_reads_the_copy() {
    let mut rng = SmallRng::seed_from_u64(14);
    let model = random_model(&mut rng, 500, 5_000);
    let built = file();
    let info = write_run(&built, 0, &model, RunOptions { align_bytes: 4096, ..small_blocks() });
    let reader = RunReader::open(built.clone(), "built", 0, info.len_bytes).unwrap();
    let bytes = strata_io::read_all(built.as_ref()).unwrap();
    let copy = MemStorage::new().open("copy", OpenOptions::create()).unwrap();
    copy.write_at(8192, &bytes).unwrap();
    built.set_len(0).unwrap(); // nothing may be read from the first file any more
    let moved = Arc::new(reader.moved_to(copy.clone(), "copy", 8192));
    for (key, entry) in &model {
        assert_eq!(moved.get(key).unwrap().as_ref(), Some(entry));
    }
    let all: Vec<_> =
        moved.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).map(Result::unwrap).collect();
    assert_eq!(all.len(), model.len());
    copy.write_at(8192, &[0xFF; 16]).unwrap();
    match moved.get(model.keys().next().unwrap()) {
        Err(strata_core::Error::Corruption { file, offset, .. }) => {
            assert_eq!((file.as_str(), offset), ("copy", 8192))
        }
        other => panic!("{other:?}"),
    }
}

/// A run of many small blocks in a storage that counts reads.
fn counted_run(seed: u64, entries: usize) -> (Arc<dyn Storage>, Arc<dyn StorageFile>, Model, RunInfo) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let model = random_model(&mut rng, entries, 20_000);
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let file = storage.open("run", OpenOptions::create()).unwrap();
    let info = write_run(&file, 0, &model, small_blocks());
    (storage, file, model, info)
}

/// Reads and bytes read while `f` runs.
fn reads_during<T>(storage: &Arc<dyn Storage>, f: impl FnOnce() -> T) -> (T, u64, u64) {
    let before = storage.io_stats();
    let out = f();
    let after = storage.io_stats();
    (out, after.read_ops - before.read_ops, after.bytes_read - before.bytes_read)
}

#[test]
fn an_iteration_through_a_run_reads_ahead_in_few_reads_both_ways() {
    let (storage, file, model, info) = counted_run(21, 2_000);
    let run = open(&file, 0, &info);
    assert!(info.data_blocks > 300, "{} blocks", info.data_blocks);
    for direction in [Direction::Forward, Direction::Reverse] {
        let (got, reads, _) = reads_during(&storage, || {
            run.iter(Bound::Unbounded, Bound::Unbounded, direction).map(Result::unwrap).collect::<Vec<_>>()
        });
        assert_eq!(got, model_range(&model, &Bound::Unbounded, &Bound::Unbounded, direction));
        // Four single reads, then windows doubling from 16 KiB to 128 KiB of ~270-byte blocks.
        assert!(
            reads * 20 < info.data_blocks,
            "{direction:?}: {reads} reads for {} blocks",
            info.data_blocks
        );
    }
}

#[test]
fn a_short_scan_reads_only_its_blocks_and_read_ahead_stops_at_the_range_end() {
    let (storage, file, model, info) = counted_run(22, 2_000);
    let run = open(&file, 0, &info);
    // A scan of a few entries reads its one or two blocks, one read each.
    let (_, reads, _) = reads_during(&storage, || {
        run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).take(3).count()
    });
    assert!(reads <= 2, "{reads} reads for 3 entries");
    // A range of a fifth of the run reads at most its own blocks' bytes (trailers included)
    // and one block more.
    let keys: Vec<&Key> = model.keys().collect();
    let (lower, upper) = (keys[800].clone(), keys[1_200].clone());
    for direction in [Direction::Forward, Direction::Reverse] {
        let (lower, upper) = (Bound::Included(lower.clone()), Bound::Excluded(upper.clone()));
        let (got, _, bytes) = reads_during(&storage, || {
            run.iter(lower.clone(), upper.clone(), direction).map(Result::unwrap).collect::<Vec<_>>()
        });
        assert_eq!(got, model_range(&model, &lower, &upper, direction));
        let range_bytes = run.approximate_bytes(borrow_bound(&lower), borrow_bound(&upper));
        let blocks = range_bytes / 200 + 2;
        assert!(
            bytes <= range_bytes + blocks * 4 + 600,
            "{direction:?}: {bytes} bytes read for a range of {range_bytes}"
        );
    }
}

#[test]
fn a_damaged_block_read_ahead_is_an_error_only_when_the_iteration_reaches_it() {
    let (_, file, model, info) = counted_run(23, 2_000);
    let pristine = strata_io::read_all(file.as_ref()).unwrap();
    let run = open(&file, 0, &info);
    // Damage the data block holding the 100th key: the windows that read it start well before.
    let keys: Vec<&Key> = model.keys().collect();
    let damaged_key = keys[100].clone();
    let at = run.approximate_bytes(Bound::Unbounded, Bound::Included(damaged_key.as_slice())) as usize - 8;
    let mut damaged = pristine.clone();
    damaged[at] ^= 0x40;
    let copy = MemStorage::new().open("run", OpenOptions::create()).unwrap();
    copy.write_at(0, &damaged).unwrap();
    let run = Arc::new(RunReader::open(copy, "run", 0, info.len_bytes).unwrap());
    let before: Vec<_> = run
        .iter(Bound::Unbounded, Bound::Excluded(damaged_key.clone()), Direction::Forward)
        .take(60)
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(before.len(), 60);
    let through: Result<Vec<_>> = run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).collect();
    match through {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, "run");
            assert!(offset <= at as u64 && at as u64 - offset < 600, "damage at {at}, reported at {offset}");
        }
        other => panic!("the damaged block went unnoticed: {:?}", other.map(|v| v.len())),
    }
}

#[test]
fn a_window_that_fails_to_read_falls_back_to_the_block_the_iteration_needs() {
    let (storage, file, model, info) = counted_run(24, 2_000);
    let reader = RunReader::open(file, "run", 0, info.len_bytes).unwrap();
    // Blocks of ~270 bytes read alone; every window (two blocks or more) fails.
    let hook: strata_io::ReadHook = Arc::new(|name, _, len| match len > 600 {
        true => Err(Error::io(name, std::io::Error::other("injected: a long read failed"))),
        false => Ok(()),
    });
    let failing = strata_io::HookStorage::reads(storage, hook).open("run", OpenOptions::existing()).unwrap();
    let run = Arc::new(reader.moved_to(failing, "run", 0));
    for direction in [Direction::Forward, Direction::Reverse] {
        let got: Vec<_> =
            run.iter(Bound::Unbounded, Bound::Unbounded, direction).collect::<Result<_>>().unwrap();
        assert_eq!(got, model_range(&model, &Bound::Unbounded, &Bound::Unbounded, direction));
    }
}

#[test]
fn a_bounded_iteration_reads_no_block_past_its_last_key() {
    let (storage, file, model, info) = counted_run(25, 2_000);
    let run = open(&file, 0, &info);
    for direction in [Direction::Forward, Direction::Reverse] {
        // The first keys in the direction, and the reads an unbounded iteration has made when it
        // yields each (three blocks at most: no window yet).
        let keys: Vec<Key> = model_range(&model, &Bound::Unbounded, &Bound::Unbounded, direction)
            .into_iter()
            .take(8)
            .map(|(k, _)| k)
            .collect();
        let mut all = run.iter(Bound::Unbounded, Bound::Unbounded, direction);
        let start = storage.io_stats().read_ops;
        let reads_when_yielded: Vec<u64> = keys
            .iter()
            .map(|_| {
                all.next().unwrap().unwrap();
                storage.io_stats().read_ops - start
            })
            .collect();
        for (k, expected) in keys.iter().zip(reads_when_yielded) {
            let (lower, upper) = match direction {
                Direction::Forward => (Bound::Unbounded, Bound::Included(k.clone())),
                Direction::Reverse => (Bound::Included(k.clone()), Bound::Unbounded),
            };
            let (n, reads, _) = reads_during(&storage, || run.iter(lower, upper, direction).count());
            assert!(n > 0);
            assert_eq!(reads, expected, "{direction:?} to {k:?}");
        }
    }
}

#[test]
fn blocks_read_ahead_do_not_fill_the_block_cache() {
    let (_, file, model, info) = counted_run(26, 2_000);
    let cache = BlockCache::new(16 << 20);
    let run = Arc::new(RunReader::open_cached(file, "run", 0, info.len_bytes, Some(cache.clone())).unwrap());
    let all: Vec<_> =
        run.iter(Bound::Unbounded, Bound::Unbounded, Direction::Forward).map(Result::unwrap).collect();
    assert_eq!(all.len(), model.len());
    // Only the blocks read one at a time before the first window (a few hundred bytes each).
    let after_scan = cache.used_bytes();
    assert!(
        after_scan > 0 && after_scan < 8 << 10,
        "{after_scan} bytes cached by a scan of {} blocks",
        info.data_blocks
    );
    // Point reads still cache what they read.
    for (key, entry) in model.iter().step_by(50) {
        assert_eq!(run.get(key).unwrap().as_ref(), Some(entry));
    }
    assert!(cache.used_bytes() > after_scan);
}

/// An operator whose operand `b"x"` erases what it covers (its `apply` leaves no value) and
/// whose operand `b"p"` stays partial.
struct Erasing;

impl MergeOperator for Erasing {
    fn combine(&self, _key: &[u8], _older: &[u8], newer: &[u8]) -> Result<Vec<u8>> {
        Ok(newer.to_vec())
    }
    fn apply(&self, _key: &[u8], _base: Option<&[u8]>, operand: &[u8]) -> Result<Entry> {
        Ok(match operand {
            b"x" => Entry::delete(),
            b"p" => Entry::merge(operand.to_vec()),
            _ => Entry::put(operand.to_vec()),
        })
    }
}

#[test]
fn an_operand_that_leaves_no_value_is_a_delete_and_one_left_partial_comes_out_as_it_is() {
    let entries = |list: Vec<(&[u8], Entry)>| -> SourceIter<'static> {
        Box::new(list.into_iter().map(|(k, e)| Ok((k.to_vec(), e))).collect::<Vec<_>>().into_iter())
    };
    let merged = |output| -> Vec<(Key, Entry)> {
        let newer = entries(vec![
            (b"a", Entry::merge(b"x".to_vec())),
            (b"b", Entry::merge(b"y".to_vec())),
            (b"c", Entry::merge(b"p".to_vec())),
        ]);
        let older = entries(vec![(b"a", Entry::put(b"1".to_vec())), (b"b", Entry::put(b"2".to_vec()))]);
        MergeIter::new(vec![newer, older], Direction::Forward, output)
            .with_operator(Arc::new(Erasing))
            .collect::<Result<_>>()
            .unwrap()
    };
    let partial = (b"c".to_vec(), Entry::merge(b"p".to_vec()));
    assert_eq!(
        merged(MergeOutput::Visible),
        vec![(b"b".to_vec(), Entry::put(b"y".to_vec())), partial.clone()]
    );
    assert_eq!(
        merged(MergeOutput::Above),
        vec![(b"a".to_vec(), Entry::delete()), (b"b".to_vec(), Entry::put(b"y".to_vec())), partial],
        "above older data the erased key stays a delete"
    );
}
