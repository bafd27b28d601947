//! Records moved within a log segment: whole, checksum-valid records at other records'
//! addresses (a misdirected write, bytes shifted within a file). A read must not take one for
//! the record the index or a hash chain points to: it is corruption naming the segment.
//! Regression (fuzzing, `f2_hot_log`, `f2_cold_log`, `f2_chunk_log`): reads followed the moved
//! records and returned an older value or nothing.

mod common;

use std::sync::Arc;

use common::*;
use engine_f2::F2Engine;
use strata_core::{Durability, Engine, Error, MaintenanceTask};
use strata_io::{MemStorage, OpenOptions, Storage};

const KEYS: u64 = 700;
const WRITES: u64 = 3_000;
/// Every record of the store below: 24-byte header, 9-byte key, 8-byte value, padded to 8.
const RECORD_BYTES: usize = 48;
/// Chunk-log records: 24-byte header, 4-byte chunk id, 32 entries of 8 bytes, padded to 8.
const CHUNK_RECORD_BYTES: usize = (24 + 4 + 256usize).next_multiple_of(8);

/// A store with records in every log (hot, cold, chunk), all of one stored length, closed
/// cleanly after a checkpoint; then a few more writes that stay in the hot log's tail page.
fn store() -> Arc<dyn Storage> {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let engine = F2Engine::open_with(storage.clone(), &config(), small_options()).unwrap();
    for i in 0..WRITES {
        engine.put(&key(i % KEYS), &i.to_le_bytes(), Durability::Buffered).unwrap();
        if i == WRITES - 40 {
            engine.maintenance().run(MaintenanceTask::Checkpoint).unwrap();
        }
    }
    engine.close().unwrap();
    storage
}

fn last_value(k: u64) -> Vec<u8> {
    let last_write = (WRITES - KEYS..WRITES).find(|i| i % KEYS == k).unwrap();
    last_write.to_le_bytes().to_vec()
}

fn read(storage: &dyn Storage, name: &str) -> Vec<u8> {
    strata_io::read_all(storage.open(name, OpenOptions::existing()).unwrap().as_ref()).unwrap()
}

fn write(storage: &dyn Storage, name: &str, bytes: &[u8]) {
    let file = storage.open(name, OpenOptions::existing()).unwrap();
    file.write_at(0, bytes).unwrap();
}

/// Which two neighbouring records of a page to swap.
#[derive(Clone, Copy, Debug)]
enum Pair {
    First,
    /// The page's last two: in the hot log's last page, the newest writes (live keys, read from
    /// the page open loads into memory).
    Last,
}

/// Swaps two neighbouring records (`pair`) of every page of segment file `bytes` (pages of 4 KiB;
/// the first page of segment 0 starts its records at address 64) where the page starts with
/// records of `record_bytes`. Returns how many pairs were swapped.
fn swap_records(bytes: &mut [u8], first_segment: bool, record_bytes: usize, pair: Pair) -> usize {
    let is_record = |b: &[u8], at: usize| {
        let Some(header) = b.get(at..at + 24) else { return false };
        let lengths = 24
            + u32::from_le_bytes(header[4..8].try_into().unwrap()) as usize
            + u32::from_le_bytes(header[8..12].try_into().unwrap()) as usize;
        header[12] == 1 && lengths.next_multiple_of(8) == record_bytes && at + record_bytes <= b.len()
    };
    let mut swapped = 0;
    for page in (0..bytes.len()).step_by(4 << 10) {
        let page_end = (page + (4 << 10)).min(bytes.len());
        let first = if first_segment && page == 0 { 64 } else { page };
        let records = (first..page_end).step_by(record_bytes).take_while(|&at| is_record(bytes, at)).count();
        if records < 2 {
            continue;
        }
        let at = match pair {
            Pair::First => first,
            Pair::Last => first + (records - 2) * record_bytes,
        };
        let (one, other) = bytes[at..at + 2 * record_bytes].split_at_mut(record_bytes);
        one.swap_with_slice(other);
        swapped += 1;
    }
    swapped
}

/// Opens `storage` and reads every key: each read is the last value written or corruption
/// naming `segment`. Returns how many reads were corruption (an open refused as corruption of
/// `segment` counts as one).
fn reads_after_damage(storage: Arc<dyn Storage>, segment: &str) -> usize {
    let engine = match F2Engine::open_with(storage, &config(), small_options()) {
        Ok(engine) => engine,
        Err(Error::Corruption { file, .. }) if file == segment => return 1,
        Err(e) => panic!("damage to {segment} failed the open with {e:?}"),
    };
    let mut corrupt = 0;
    for k in 0..KEYS {
        match engine.get(&key(k)) {
            Ok(got) => assert_eq!(got, Some(last_value(k)), "{segment}: key {k} read a moved record"),
            Err(Error::Corruption { file, .. }) if file == segment => corrupt += 1,
            Err(e) => panic!("{segment}: key {k}: {e:?}"),
        }
    }
    corrupt
}

#[test]
fn a_record_moved_within_a_log_segment_is_corruption_not_another_record() {
    let clean = store();
    let mut segments: Vec<String> =
        clean.list().unwrap().into_iter().filter(|n| n.ends_with(".seg")).collect();
    segments.sort();
    let mut reported_by_log = std::collections::BTreeMap::<&str, usize>::new();
    for (segment, pair) in segments.iter().flat_map(|s| [(s, Pair::First), (s, Pair::Last)]) {
        let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
        for name in clean.list().unwrap() {
            let file = storage.open(&name, OpenOptions::create()).unwrap();
            file.write_at(0, &read(clean.as_ref(), &name)).unwrap();
        }
        let mut bytes = read(storage.as_ref(), segment);
        let record_bytes = if segment.starts_with("f2-chunk-") { CHUNK_RECORD_BYTES } else { RECORD_BYTES };
        let first_segment = segment.ends_with("0000000000000000.seg");
        if swap_records(&mut bytes, first_segment, record_bytes, pair) == 0 {
            continue;
        }
        write(storage.as_ref(), segment, &bytes);
        let corrupt = reads_after_damage(storage, segment);
        let log = ["f2-hot-", "f2-cold-", "f2-chunk-"].into_iter().find(|p| segment.starts_with(p)).unwrap();
        *reported_by_log.entry(log).or_default() += usize::from(corrupt > 0);
    }
    // Each log had a damaged segment whose damage a read (or the open) reported.
    for log in ["f2-hot-", "f2-cold-", "f2-chunk-"] {
        assert!(
            reported_by_log.get(log).is_some_and(|&n| n > 0),
            "no damage to {log} was reported: {reported_by_log:?}"
        );
    }
}

/// The newest writes sit in the hot log's last page, which open loads into memory: swapping
/// its last two records (two live keys) must be found there too, not only by reads from disk.
#[test]
fn records_moved_within_the_hot_log_s_last_page_are_corruption() {
    let storage = store();
    let mut hot: Vec<String> = storage
        .list()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("f2-hot-") && n.ends_with(".seg"))
        .collect();
    hot.sort();
    let last = hot.last().unwrap();
    let mut bytes = read(storage.as_ref(), last);
    // Only the last page that holds records: earlier pages stay intact.
    let last_page = (0..bytes.len()).step_by(4 << 10).rev().find(|&p| bytes[p + 12] == 1).unwrap();
    let first_segment = last.ends_with("0000000000000000.seg");
    assert_eq!(
        swap_records(&mut bytes[last_page..], first_segment && last_page == 0, RECORD_BYTES, Pair::Last),
        1
    );
    write(storage.as_ref(), last, &bytes);
    assert!(reads_after_damage(storage, last) > 0, "the swapped newest records were read as intact");
}

/// A copy of `clean` with segment `name`'s records from the `skip`-th of page `page` (a page
/// index within the file) to the page's end zeroed, as a lost write of those blocks leaves them.
fn with_records_zeroed(
    clean: &dyn Storage,
    name: &str,
    page: usize,
    skip: usize,
    record_bytes: usize,
) -> Arc<dyn Storage> {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    for n in clean.list().unwrap() {
        let mut bytes = read(clean, &n);
        if n == name {
            let page_start = page * (4 << 10);
            let first = if n.ends_with("0000000000000000.seg") && page == 0 { 64 } else { page_start };
            bytes[first + skip * record_bytes..page_start + (4 << 10)].fill(0);
        }
        storage.open(&n, OpenOptions::create()).unwrap().write_at(0, &bytes).unwrap();
    }
    storage
}

/// The pages of segment file `bytes` that start with a record.
fn pages_with_records(bytes: &[u8]) -> Vec<usize> {
    (0..bytes.len() / (4 << 10)).filter(|p| bytes[p * (4 << 10) + 12] == 1).collect()
}

fn segments_of(storage: &dyn Storage, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = storage
        .list()
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with(prefix) && n.ends_with(".seg"))
        .collect();
    names.sort();
    names
}

/// Every (segment, page index) of the log `prefix` whose page starts with a record, in address order.
fn log_pages(storage: &dyn Storage, prefix: &str) -> Vec<(String, usize)> {
    segments_of(storage, prefix)
        .into_iter()
        .flat_map(|n| pages_with_records(&read(storage, &n)).into_iter().map(move |p| (n.clone(), p)))
        .collect()
}

/// Opening `damaged` fails as corruption of `segment` whose message contains `what_contains`.
fn assert_open_is_corruption(damaged: Arc<dyn Storage>, segment: &str, what_contains: &str) {
    let opened = F2Engine::open_with(damaged, &config(), small_options());
    assert!(
        matches!(&opened, Err(Error::Corruption { file, what, .. }) if file == segment && what.contains(what_contains)),
        "{:?}",
        opened.err()
    );
}

/// Regression (fuzzing, `f2_chunk_log`): the chunk log's last segment lost the end of its last
/// page (shortened; its records read back as zero). The rebuild took the zeros for the padding
/// that ends a page, skipped the newest chunk records and read older ones: keys went missing.
#[test]
fn zeroed_records_in_a_log_s_last_page_are_corruption_not_padding() {
    let clean = store();
    let last = segments_of(clean.as_ref(), "f2-chunk-").pop().unwrap();
    let page = *pages_with_records(&read(clean.as_ref(), &last)).last().unwrap();
    let damaged = with_records_zeroed(clean.as_ref(), &last, page, 1, CHUNK_RECORD_BYTES);
    assert_open_is_corruption(damaged, &last, "padding");
}

/// Cold and chunk logs turn to the next page only when a record does not fit: padding where the
/// next page's first record would have fit is records gone missing, in any page.
#[test]
fn padding_where_the_next_record_would_have_fit_is_corruption_in_the_append_logs() {
    let clean = store();
    for prefix in ["f2-chunk-", "f2-cold-"] {
        // The log's next-to-last page: live, below the log's end (older segments may lie below
        // the log's begin, compacted and not yet removed).
        let pages = log_pages(clean.as_ref(), prefix);
        let (segment, page) = pages[pages.len() - 2].clone();
        let record_bytes = if prefix == "f2-chunk-" { CHUNK_RECORD_BYTES } else { RECORD_BYTES };
        let damaged = with_records_zeroed(clean.as_ref(), &segment, page, 1, record_bytes);
        let engine = match F2Engine::open_with(damaged, &config(), small_options()) {
            Err(Error::Corruption { file, what, .. })
                if file == segment && what.contains("would have fit") =>
            {
                continue
            }
            Err(e) => panic!("{segment}: {e:?}"),
            Ok(engine) => engine,
        };
        let verified = engine.verify();
        assert!(
            matches!(&verified, Err(Error::Corruption { file, what, .. }) if *file == segment && what.contains("would have fit")),
            "{segment}: {verified:?}"
        );
    }
}

/// A whole page of the chunk log zeroed below its end (a lost write of the page): the next
/// page's first record would have fit in it.
#[test]
fn an_empty_page_below_an_append_log_s_end_is_corruption() {
    let clean = store();
    let pages = log_pages(clean.as_ref(), "f2-chunk-");
    let (segment, page) = pages[pages.len() - 2].clone();
    assert!(
        page > 0 || !segment.ends_with("0000000000000000.seg"),
        "a page whose records start at its start"
    );
    let damaged = with_records_zeroed(clean.as_ref(), &segment, page, 0, CHUNK_RECORD_BYTES);
    assert_open_is_corruption(damaged, &segment, "would have fit");
}

/// A store whose hot log's first page lost its records from the 11th on (zeroed on disk: a lost
/// write), with `rewritten` of the keys there written again (a longer value: appended, not
/// updated in place) right after it, so their new records link to the lost ones; then one
/// compaction round, whose result is returned.
fn compact_over_lost_hot_records(rewritten: u64) -> Result<(u64, u64), Error> {
    let storage: Arc<dyn Storage> = Arc::new(MemStorage::new());
    let options = engine_f2::F2Options {
        background_maintenance: false,
        hot_log_disk_budget_bytes: Some(4 << 20),
        checkpoint_wal_bytes: Some(4 << 20),
        ..small_options()
    };
    let engine = F2Engine::open_with(storage.clone(), &config(), options).unwrap();
    let keys = 2_000u64;
    for i in 0..keys {
        engine.put(&key(i), &i.to_le_bytes(), Durability::Buffered).unwrap();
        if i == 100 {
            for k in 0..rewritten {
                engine.put(&key(k), &[k as u8; 16], Durability::Buffered).unwrap();
            }
        }
    }
    // The hot log's first pages left memory long ago: a round reads them from disk.
    let first = segments_of(storage.as_ref(), "f2-hot-").remove(0);
    let mut bytes = read(storage.as_ref(), &first);
    let first_record = if first.ends_with("0000000000000000.seg") { 64 } else { 0 };
    bytes[first_record + 10 * RECORD_BYTES..4 << 10].fill(0);
    write(storage.as_ref(), &first, &bytes);
    let compacted = engine.compact_now();
    for i in 0..keys {
        match engine.get(&key(i)) {
            Ok(got) => assert!(got.is_some(), "key {i} read nothing"),
            Err(e) => assert!(matches!(e, Error::Corruption { .. } | Error::Poisoned(_)), "key {i}: {e:?}"),
        }
    }
    compacted
}

/// Records lost from a hot-log page on disk read as the padding that may end any hot page early,
/// so a compaction round's scan skipped them; the round then truncated them away and cleared the
/// index entries pointing at them, and their keys read nothing. Now the round fails as
/// corruption (and poisons the engine).
#[test]
fn a_compaction_round_over_lost_hot_records_is_corruption_not_silent_loss() {
    let compacted = compact_over_lost_hot_records(0);
    assert!(
        matches!(&compacted, Err(Error::Corruption { file, what, .. }) if file.starts_with("f2-hot-") && what.contains("hot index points at")),
        "{compacted:?}"
    );
}

/// The same loss where every lost record was superseded by a newer one that links to it: no
/// index entry points at the lost records, but the links do.
#[test]
fn a_compaction_round_over_lost_hot_records_that_newer_ones_link_to_is_corruption() {
    let compacted = compact_over_lost_hot_records(90);
    assert!(
        matches!(&compacted, Err(Error::Corruption { file, what, .. }) if file.starts_with("f2-hot-") && what.contains("links to address")),
        "{compacted:?}"
    );
}

/// In the cold log (pages turn only when full) a compaction round that meets padding the next
/// page's first record would have fit in fails as corruption, instead of skipping the lost
/// records and truncating them away.
#[test]
fn a_cold_compaction_round_over_lost_records_is_corruption() {
    let storage = store();
    let options = engine_f2::F2Options { background_maintenance: false, ..small_options() };
    let engine = F2Engine::open_with(storage.clone(), &config(), options).unwrap();
    let begin = counter(&engine, "cold_log.begin");
    let page = begin - begin % (4 << 10);
    let segment = format!("f2-cold-{:016}.seg", begin / (16 << 10));
    let mut bytes = read(storage.as_ref(), &segment);
    let in_file = (page % (16 << 10)) as usize;
    let first = (begin % (16 << 10)) as usize;
    bytes[first + RECORD_BYTES..in_file + (4 << 10)].fill(0);
    write(storage.as_ref(), &segment, &bytes);
    let compacted = engine.compact_now();
    assert!(
        matches!(&compacted, Err(Error::Corruption { file, what, .. }) if *file == segment && what.contains("would have fit")),
        "{compacted:?}"
    );
}

/// The same loss on the last page of a cold round (a round of one page here): no page of the
/// round follows it, so only the first record after the round can show that records are
/// missing there. Before, the round skipped them and truncated them away.
#[test]
fn a_cold_compaction_round_ending_in_lost_records_is_corruption() {
    let storage = store();
    let options =
        engine_f2::F2Options { background_maintenance: false, compaction_fraction: 0.001, ..small_options() };
    let engine = F2Engine::open_with(storage.clone(), &config(), options).unwrap();
    let begin = counter(&engine, "cold_log.begin");
    let page = begin - begin % (4 << 10);
    let segment = format!("f2-cold-{:016}.seg", begin / (16 << 10));
    let in_file = (page % (16 << 10)) as usize;
    let first = if page == 0 { 64 } else { in_file };
    let records = (in_file + (4 << 10) - first) / RECORD_BYTES;
    let last = first + (records - 1) * RECORD_BYTES;
    assert!(((begin % (16 << 10)) as usize) < last, "the round starts before the lost record");
    let mut bytes = read(storage.as_ref(), &segment);
    bytes[last..in_file + (4 << 10)].fill(0);
    write(storage.as_ref(), &segment, &bytes);
    let compacted = engine.compact_now();
    assert!(
        matches!(&compacted, Err(Error::Corruption { file, what, .. }) if *file == segment && what.contains("would have fit")),
        "{compacted:?}"
    );
}
