//! The reseal functions (`strata_fuzz::reseal`), one test per target, on its seed store's files:
//! - resealing an intact file changes nothing (so every checksum it writes is computed exactly as
//!   the engine computed it), and it writes more than the header's checksum where the file holds
//!   records;
//! - a byte flipped inside a record's payload, then resealed: the reseal rewrote checksums, only
//!   the flipped byte and checksum fields differ from the seed file, resealing again changes
//!   nothing, flipping the byte back and resealing gives the seed file again;
//! - the store opens with the resealed file and reads every key with no checksum error from that
//!   file (the damage got past the checksums).

use std::sync::Arc;

use strata::storage::{MemStorage, OpenOptions, Storage};
use strata::{Db, Error};
use strata_fuzz::targets::{self, Target};
use strata_fuzz::{seed_options, seed_store};

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize
}

/// The largest file `target` picks from its seed store.
fn largest(target: &Target) -> (&'static str, &'static [u8]) {
    let seed = seed_store(target.kind, target.seed);
    seed.files
        .iter()
        .filter(|(n, _)| (target.pick)(n))
        .max_by_key(|(_, b)| b.len())
        .map(|(n, b)| (n.as_str(), b.as_slice()))
        .unwrap_or_else(|| panic!("{}: no file", target.name))
}

/// Opens `target`'s seed store with `name` replaced by `bytes` and reads every key; returns every
/// error met.
fn open_and_read(target: &Target, name: &str, bytes: &[u8]) -> Vec<Error> {
    let seed = seed_store(target.kind, target.seed);
    let storage = Arc::new(MemStorage::new());
    for (n, b) in &seed.files {
        let b = if n == name { bytes } else { b.as_slice() };
        storage.open(n, OpenOptions::create()).unwrap().write_at(0, b).unwrap();
    }
    let db = match Db::open("fuzz", seed_options(target.kind, target.seed).storage(storage)) {
        Ok(db) => db,
        Err(e) => return vec![e],
    };
    let mut errors: Vec<Error> = seed.history.keys().filter_map(|k| db.get(k).err()).collect();
    if let Err(e) = db.verify() {
        errors.push(e);
    }
    let _ = db.close();
    errors
}

/// A checksum error naming `name`.
fn checksum_error(e: &Error, name: &str) -> bool {
    matches!(e, Error::Corruption { file, what, .. }
        if file.contains(name) && (what.contains("checksum") || what.contains("crc")))
}

/// The byte to flip: inside the first record's (block's, page's, entry's) payload, or a field of a
/// small file.
fn payload_byte(target: &Target, name: &str, b: &[u8]) -> usize {
    match target.name {
        // The last payload byte of the first data record.
        "memory_wal" | "flex_wal" | "f2_wal" | "treeline_wal" => last_byte_of_first_wal_payload(b),
        // The first value byte of the first entry of the first block.
        "memory_snapshot" => 32 + 8 + 8 + u32_at(b, 40),
        // `cold_live_estimate_bytes`, a field nothing checks.
        "f2_checkpoint" => 104,
        // The first entry's address.
        "f2_hot_index" => 64 + 6,
        // The last value byte of the first record.
        "f2_hot_log" | "f2_cold_log" | "f2_chunk_log" => {
            let start = first_live_record_offset(target, name, b.len());
            start + 24 + u32_at(b, start + 4) + u32_at(b, start + 8) - 1
        }
        // The length bits of the first block's first entry.
        "flex_table_log" => 32 + 24 + 1,
        // The first entry of the first node page.
        "flex_tree" => {
            let page = (2..).find(|p| &b[p * 4096..p * 4096 + 4] == b"FXND").unwrap();
            page * 4096 + 16 + 4
        }
        // The last byte of the first record.
        "flex_table_data" => {
            let (key_len, value_len) = (b[4] as usize, b[5] as usize);
            assert!(key_len < 0x80 && value_len < 0x80, "one-byte varints in the seed's first record");
            6 + key_len + value_len - 1
        }
        // The last byte (the heap) of the first data page (`TL` at 4: blob runs, which hold
        // bare values with no checksum of their own, may come first).
        "treeline_data" => {
            let page = (1..).find(|p| &b[p * 4096 + 4..p * 4096 + 6] == b"TL").unwrap();
            (page + 1) * 4096 - 1
        }
        // The last byte of the first entry's image.
        "treeline_dwb" => 32 + 4096 - 1,
        // The engine name; flexdb's committed lsn; the checkpoint's generation; forecast counts.
        "manifest" => 14,
        "flex_meta" => 16,
        "treeline_checkpoint" | "treeline_forecast" => 12,
        other => panic!("no payload byte for {other}"),
    }
}

/// The last payload byte of a WAL segment's first record with a payload, past durability markers
/// (a 24-byte header whose length field is `0x80000000`, no payload) and empty records.
/// Regression: the seed's largest flex segment began with a marker once, and its length field
/// (bit 31 set) was taken for a payload length (CI: "index out of bounds: the len is 16384 but
/// the index is 2147483703").
fn last_byte_of_first_wal_payload(b: &[u8]) -> usize {
    let mut at = 32;
    loop {
        let len = u32_at(b, at + 4);
        assert!(len != 0 || b[at..at + 24].iter().any(|&x| x != 0), "no data record before the end marker");
        if len & 0x8000_0000 == 0 && len > 0 {
            return at + 24 + len - 1;
        }
        // Records are padded to 8 bytes (docs/format/wal.md).
        at += (24 + (len & 0x7fff_ffff)).div_ceil(8) * 8;
    }
}

#[test]
fn the_first_wal_payload_is_found_past_markers_and_empty_records() {
    let mut b = vec![0u8; 32];
    let mut record = |len: u32, payload: usize| {
        let mut r = vec![0xab; 24];
        r[4..8].copy_from_slice(&len.to_le_bytes());
        r.extend(std::iter::repeat_n(0x11, payload));
        r.resize(r.len().div_ceil(8) * 8, 0);
        b.extend(r);
    };
    record(0x8000_0000, 0);
    record(0, 0);
    record(5, 5);
    b.extend([0u8; 24]);
    assert_eq!(last_byte_of_first_wal_payload(&b), 32 + 24 + 24 + 24 + 5 - 1);
}

/// Where the first live record of an f2 log segment starts: at the checkpoint's `begin` of that
/// log if it falls in this segment (a checkpoint punches the dead front out), else at the
/// segment's start (address 64 in the first segment).
fn first_live_record_offset(target: &Target, name: &str, segment_len: usize) -> usize {
    let seed = seed_store(target.kind, target.seed);
    let ck = &seed.files.iter().find(|(n, _)| n == "f2-checkpoint").expect("a checkpoint").1;
    let u64_at = |at: usize| u64::from_le_bytes(ck[at..at + 8].try_into().unwrap());
    let begin_field = match name.split('-').nth(1) {
        Some("hot") => 48,
        Some("cold") => 64,
        _ => 80,
    };
    let (begin, segment_bytes) = (u64_at(begin_field), u64_at(32));
    let segment: u64 = name.rsplit('-').next().unwrap().trim_end_matches(".seg").parse().unwrap();
    let segment_start = segment * segment_bytes;
    if (segment_start..segment_start + segment_len as u64).contains(&begin) {
        (begin - segment_start) as usize
    } else {
        if segment == 0 {
            64
        } else {
            0
        }
    }
}

fn check(target: &Target) {
    let (name, seed_bytes) = largest(target);
    let reseal = target.reseal;
    let mut again = seed_bytes.to_vec();
    let written = reseal(name, &mut again);
    assert!(again == seed_bytes, "{}: resealing the intact {name} changed it", target.name);
    let records = seed_bytes.len() > target.header_bytes && target.header_bytes > 0;
    println!("{}: {name}, {} bytes, {written} checksums", target.name, seed_bytes.len());
    assert!(written >= if records { 2 } else { 1 }, "{}: {written} checksums written", target.name);

    let at = payload_byte(target, name, seed_bytes);
    let mut flipped = seed_bytes.to_vec();
    flipped[at] ^= 0x5a;
    let mut sealed = flipped.clone();
    reseal(name, &mut sealed);
    assert!(sealed != flipped, "{}: the reseal rewrote no checksum over byte {at}", target.name);
    let differing: Vec<usize> = (0..sealed.len()).filter(|&i| sealed[i] != seed_bytes[i]).collect();
    assert!(
        differing.len() <= 1 + 12 && differing.contains(&at),
        "{}: the resealed file differs at {differing:?}",
        target.name
    );
    let mut twice = sealed.clone();
    reseal(name, &mut twice);
    assert!(twice == sealed, "{}: a second reseal changed the file", target.name);
    let mut back = sealed.clone();
    back[at] ^= 0x5a;
    reseal(name, &mut back);
    assert!(back == seed_bytes, "{}: flipped back and resealed, the file differs from the seed", target.name);

    let errors = open_and_read(target, name, &sealed);
    assert!(
        !errors.iter().any(|e| checksum_error(e, name)),
        "{}: still a checksum error after the reseal: {errors:?}",
        target.name
    );
    println!("  resealed damage at {at}: {} errors {:?}", errors.len(), errors.first());
}

macro_rules! reseal_tests {
    ($($test:ident: $target:ident,)*) => {
        $(
            #[test]
            fn $test() {
                check(&targets::$target);
            }
        )*
    };
}

reseal_tests! {
    manifest: MANIFEST,
    memory_wal: MEMORY_WAL,
    memory_snapshot: MEMORY_SNAPSHOT,
    flex_wal: FLEX_WAL,
    flex_meta: FLEX_META,
    flex_table_data: FLEX_TABLE_DATA,
    flex_table_log: FLEX_TABLE_LOG,
    flex_tree: FLEX_TREE,
    f2_wal: F2_WAL,
    f2_checkpoint: F2_CHECKPOINT,
    f2_hot_index: F2_HOT_INDEX,
    f2_hot_log: F2_HOT_LOG,
    f2_cold_log: F2_COLD_LOG,
    f2_chunk_log: F2_CHUNK_LOG,
    treeline_wal: TREELINE_WAL,
    treeline_checkpoint: TREELINE_CHECKPOINT,
    treeline_forecast: TREELINE_FORECAST,
    treeline_data: TREELINE_DATA,
    treeline_dwb: TREELINE_DWB,
}

/// The WAL state file (`*state`) reseals too: its checksum covers bytes 16.. .
#[test]
fn wal_state_file() {
    let target = &targets::MEMORY_WAL;
    let seed = seed_store(target.kind, target.seed);
    let (name, bytes) = seed.files.iter().find(|(n, _)| n == "wal-state").expect("wal-state");
    let mut again = bytes.clone();
    assert_eq!((target.reseal)(name, &mut again), 1);
    assert!(again == *bytes, "resealing the intact state file changed it");
    let mut sealed = bytes.clone();
    sealed[16] ^= 1; // durable_lsn
    (target.reseal)(name, &mut sealed);
    let errors = open_and_read(target, name, &sealed);
    assert!(!errors.iter().any(|e| checksum_error(e, name)), "{errors:?}");
}
