//! The windowed reader must see exactly what a whole-file read sees: same records, same errors,
//! same offsets, for every window size, while never reading more than a window (or one record)
//! at a time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{Durability, RecoveryMode};
use strata_io::{HookStorage, MemStorage, OpenOptions, Storage};

use super::*;
use crate::format::{
    decode_record, encode_durability_marker, encode_record, record_bytes, SegmentHeader, FORMAT_VERSION,
    RECORD_ALIGNMENT_BYTES, SEGMENT_HEADER_BYTES,
};
use crate::recovery::{recover_with_window, ScanParams};
use crate::{Lsn, Wal, WalOptions};

const WINDOWS: [usize; 8] = [1, 7, 8, 24, 40, 100, 333, 4096];

fn file_holding_in(storage: &dyn Storage, bytes: &[u8]) -> Arc<dyn StorageFile> {
    let file = storage.open("segment", OpenOptions::create()).unwrap();
    file.write_at(0, bytes).unwrap();
    file
}

fn file_holding(bytes: &[u8]) -> Arc<dyn StorageFile> {
    file_holding_in(&MemStorage::new(), bytes)
}

/// A file holding `bytes`, and the length of its longest read so far.
fn recorded_file_holding(bytes: &[u8]) -> (Arc<dyn StorageFile>, Arc<AtomicUsize>) {
    let (storage, longest) = HookStorage::recording_longest_read(Arc::new(MemStorage::new()));
    (file_holding_in(&storage, bytes), longest)
}

/// A segment of records (some larger than most windows, some markers), followed by zeros.
fn segment_image(rng: &mut SmallRng) -> Vec<u8> {
    let mut bytes = SegmentHeader { segment_id: 1, first_lsn: 1, version: FORMAT_VERSION }.encode().to_vec();
    for lsn in 1..=40u64 {
        if lsn % 7 == 0 {
            encode_durability_marker(lsn, lsn - 1, &mut bytes);
            continue;
        }
        let len = if lsn % 5 == 0 { rng.gen_range(300..2000) } else { rng.gen_range(0..80) };
        let payload: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        encode_record(lsn, lsn - 1, &payload, &mut bytes);
    }
    bytes.resize(bytes.len() + rng.gen_range(0..600), 0);
    bytes
}

fn damage(bytes: &mut Vec<u8>, rng: &mut SmallRng) {
    match rng.gen_range(0..5) {
        0 => {
            for _ in 0..rng.gen_range(1..4) {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] = rng.gen();
            }
        }
        1 => bytes.truncate(rng.gen_range(0..bytes.len())),
        2 => {
            // A length field claiming more (or less) than the record holds.
            let i = rng.gen_range(SEGMENT_HEADER_BYTES / 8..bytes.len() / 8) * 8 + 4;
            if i + 4 <= bytes.len() {
                bytes[i..i + 4].copy_from_slice(&rng.gen::<u32>().to_le_bytes());
            }
        }
        3 => {
            let i = rng.gen_range(0..bytes.len());
            bytes.extend((0..rng.gen_range(1..50)).map(|_| rng.gen::<u8>()));
            bytes[i] ^= 0x40;
        }
        _ => {}
    }
}

#[test]
fn windowed_decoding_matches_whole_file_decoding_for_every_window() {
    let mut rng = SmallRng::seed_from_u64(0x5eed_3001);
    for round in 0..60 {
        let mut bytes = segment_image(&mut rng);
        damage(&mut bytes, &mut rng);
        let file = file_holding(&bytes);
        for window_bytes in WINDOWS {
            let context = format!("round {round}, window {window_bytes}");
            let mut reader = SegmentReader::new(file.as_ref(), window_bytes).unwrap();
            assert_eq!(reader.file_len(), bytes.len());
            // The chain, as replay walks it.
            let mut offset = SEGMENT_HEADER_BYTES;
            loop {
                let whole = decode_record(&bytes, offset);
                let windowed = reader.decode_record(offset).unwrap();
                assert_eq!(windowed, whole, "{context}: record at {offset}");
                let RecordSlot::Valid { payload, record_bytes, .. } = whole else { break };
                assert_eq!(reader.loaded(payload.clone()), &bytes[payload], "{context}: payload at {offset}");
                offset += record_bytes;
            }
            assert_eq!(
                reader.is_zero_from(offset).unwrap(),
                bytes[offset.min(bytes.len())..].iter().all(|&b| b == 0),
                "{context}: tail after {offset}"
            );
            // Every aligned offset, as the break scan walks them, and the torn-tail byte counts.
            for offset in (0..bytes.len() + 16).step_by(RECORD_ALIGNMENT_BYTES) {
                let lsn = bytes.get(offset + 8..offset + 16).filter(|_| offset + 24 <= bytes.len());
                let lsn = lsn.map(|b| u64::from_le_bytes(b.try_into().unwrap()));
                assert_eq!(reader.lsn_field_at(offset).unwrap(), lsn, "{context}: lsn at {offset}");
                assert_eq!(reader.decode_record(offset).unwrap(), decode_record(&bytes, offset), "{context}");
            }
            for from in [0, 1, 31, 32, bytes.len() / 2, bytes.len(), bytes.len() + 5] {
                let tail = bytes.get(from..).unwrap_or_default();
                let expected = tail.iter().rposition(|&b| b != 0).map_or(0, |last| last as u64 + 1);
                assert_eq!(reader.nonzero_prefix_bytes(from).unwrap(), expected, "{context}: from {from}");
            }
        }
    }
}

#[test]
fn reads_are_at_most_a_window_or_one_record_long() {
    let mut rng = SmallRng::seed_from_u64(0x5eed_3002);
    let mut bytes = segment_image(&mut rng);
    bytes.resize(bytes.len() + 100_000, 0);
    let largest_record_bytes = record_bytes(1999);
    for window_bytes in [64, 512, 4096] {
        let (file, longest_read_bytes) = recorded_file_holding(&bytes);
        let mut reader = SegmentReader::new(file.as_ref(), window_bytes).unwrap();
        let mut offset = SEGMENT_HEADER_BYTES;
        while let RecordSlot::Valid { record_bytes, .. } = reader.decode_record(offset).unwrap() {
            offset += record_bytes;
        }
        assert!(reader.is_zero_from(offset).unwrap());
        let longest = longest_read_bytes.load(Ordering::Relaxed);
        assert!(longest <= window_bytes.max(largest_record_bytes), "window {window_bytes}: read {longest}");
        assert!(
            reader.window.capacity() <= window_bytes.max(largest_record_bytes) * 2,
            "window {window_bytes}"
        );
    }
}

#[test]
fn a_length_claim_past_the_end_of_the_file_reads_only_the_header() {
    let mut bytes = SegmentHeader { segment_id: 1, first_lsn: 1, version: FORMAT_VERSION }.encode().to_vec();
    encode_record(1, 0, &[7; 100], &mut bytes);
    bytes[SEGMENT_HEADER_BYTES + 4..SEGMENT_HEADER_BYTES + 8].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    bytes.resize(1 << 20, 0);
    let (file, longest_read_bytes) = recorded_file_holding(&bytes);
    let mut reader = SegmentReader::new(file.as_ref(), 64).unwrap();
    let slot = reader.decode_record(SEGMENT_HEADER_BYTES).unwrap();
    assert_eq!(slot, decode_record(&bytes, SEGMENT_HEADER_BYTES));
    assert!(matches!(&slot, RecordSlot::Invalid(what) if what.contains("runs past the end")), "{slot:?}");
    assert_eq!(longest_read_bytes.load(Ordering::Relaxed), 64);
}

/// Runs recovery (without repair, so the storage stays as it is) with `window_bytes`, returning
/// everything it decided, replayed records included, as text.
fn recovery_outcome(storage: &MemStorage, opts: &WalOptions, verify: bool, window_bytes: usize) -> String {
    let mut replayed: Vec<(String, u64, Lsn, Vec<u8>)> = Vec::new();
    let mut replay = |at: &crate::RecordLocation<'_>, payload: &[u8]| {
        replayed.push((at.file.to_string(), at.offset, at.lsn, payload.to_vec()));
        Ok(())
    };
    let params = ScanParams {
        min_lsn: if verify { Lsn::MAX } else { 1 },
        required_from: if verify { None } else { Some(1) },
        repair: false,
        replay: &mut replay,
    };
    let recovered = recover_with_window(storage, opts, params, window_bytes);
    format!("{recovered:?} {replayed:?}")
}

#[test]
fn recovery_decides_the_same_for_every_window_on_damaged_logs() {
    let mut rng = SmallRng::seed_from_u64(0x5eed_3003);
    for round in 0..40 {
        let storage = MemStorage::new();
        let opts = WalOptions {
            segment_bytes: [512, 2048, 8192][round % 3],
            preallocate: rng.gen_bool(0.5),
            recovery_mode: if rng.gen_bool(0.5) {
                RecoveryMode::AbsoluteConsistency
            } else {
                RecoveryMode::default()
            },
            ..WalOptions::default()
        };
        let (wal, _) = Wal::open(Arc::new(storage.clone()), opts.clone(), 1, &mut |_, _| Ok(())).unwrap();
        for _ in 0..rng.gen_range(5..60) {
            let len = if rng.gen_bool(0.1) { rng.gen_range(500..3000) } else { rng.gen_range(0..100) };
            let lsn = wal.append(&(0..len).map(|_| rng.gen()).collect::<Vec<u8>>()).unwrap();
            let durability = if rng.gen_bool(0.2) { Durability::Sync } else { Durability::Buffered };
            wal.commit(lsn, durability).unwrap();
        }
        wal.close().unwrap();
        let names: Vec<String> =
            storage.list().unwrap().into_iter().filter(|n| n.ends_with(".log")).collect();
        let name = if rng.gen_bool(0.6) { names.last() } else { names.get(rng.gen_range(0..names.len())) };
        let file = storage.open(name.unwrap(), OpenOptions::existing()).unwrap();
        let mut bytes = strata_io::read_all(file.as_ref()).unwrap();
        damage(&mut bytes, &mut rng);
        file.set_len(0).unwrap();
        file.write_at(0, &bytes).unwrap();

        for verify in [false, true] {
            let whole_file = recovery_outcome(&storage, &opts, verify, usize::MAX);
            for window_bytes in WINDOWS {
                let windowed = recovery_outcome(&storage, &opts, verify, window_bytes);
                assert_eq!(windowed, whole_file, "round {round}, verify {verify}, window {window_bytes}");
            }
        }
    }
}
