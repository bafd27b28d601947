//! Helpers shared by the WAL integration tests.
#![allow(dead_code)]

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::Rng;
use strata_core::{Durability, Error, RecoveryMode, Result};
use strata_io::{CrashMode, HookStorage, OpenOptions, SimStorage, Storage, SyncHook};
use strata_wal::{Lsn, RecoveryReport, Wal, WalOptions};

pub type Replayed = Vec<(Lsn, Vec<u8>)>;

pub fn small_opts(segment_bytes: u64) -> WalOptions {
    WalOptions { segment_bytes, ..WalOptions::default() }
}

pub fn with_mode(mut opts: WalOptions, mode: RecoveryMode) -> WalOptions {
    opts.recovery_mode = mode;
    opts
}

/// Opens the log and collects what it replays.
pub fn open(
    storage: &Arc<dyn Storage>,
    opts: &WalOptions,
    min_lsn: Lsn,
) -> Result<(Wal, RecoveryReport, Replayed)> {
    let mut replayed = Vec::new();
    let (wal, report) = Wal::open_located(storage.clone(), opts.clone(), min_lsn, &mut |at, payload| {
        replayed.push((at.lsn, payload.to_vec()));
        Ok(())
    })?;
    Ok((wal, report, replayed))
}

/// A deterministic payload for `lsn`, 0..=max_bytes long (some empty).
pub fn payload(lsn: Lsn, max_bytes: usize) -> Vec<u8> {
    let len = (lsn as usize).wrapping_mul(2_654_435_761) % (max_bytes + 1);
    (0..len).map(|i| (lsn as usize + i * 31) as u8).collect()
}

/// `.log` segment names, in id order.
pub fn segment_names(storage: &dyn Storage, opts: &WalOptions) -> Vec<String> {
    storage.list().unwrap().into_iter().filter(|n| opts.parse_segment_name(n).is_some()).collect()
}

pub fn free_names(storage: &dyn Storage, opts: &WalOptions) -> Vec<String> {
    storage.list().unwrap().into_iter().filter(|n| opts.parse_free_segment_name(n).is_some()).collect()
}

pub fn read_file(storage: &dyn Storage, name: &str) -> Vec<u8> {
    strata_io::read_all(storage.open(name, OpenOptions::existing()).unwrap().as_ref()).unwrap()
}

/// Flips one bit through the ordinary file interface (for backends without `flip_bit`).
pub fn flip_bit(storage: &dyn Storage, name: &str, offset: u64, bit: u8) {
    let file = storage.open(name, OpenOptions::existing()).unwrap();
    let mut byte = [0u8];
    file.read_at(offset, &mut byte).unwrap();
    byte[0] ^= 1 << bit;
    file.write_at(offset, &byte).unwrap();
}

/// Bit 31 of `payload_len`: the record is a durability marker (see docs/format/wal.md).
pub const DURABILITY_MARKER_FLAG: u32 = 0x8000_0000;

/// `(offset, lsn, synced_lsn)` of each record (data or durability marker) of a segment image,
/// walking from offset 32 to the end marker. Parses independently of the crate's decoder.
pub fn record_positions(bytes: &[u8]) -> Vec<(u64, Lsn, Lsn)> {
    let mut out = Vec::new();
    let mut offset = 32usize;
    while offset + 24 <= bytes.len() {
        let header = &bytes[offset..offset + 24];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let payload_len_field = u32::from_le_bytes(header[4..8].try_into().unwrap());
        let payload_len = (payload_len_field & !DURABILITY_MARKER_FLAG) as usize;
        let lsn = u64::from_le_bytes(header[8..16].try_into().unwrap());
        let synced = u64::from_le_bytes(header[16..24].try_into().unwrap());
        out.push((offset as u64, lsn, synced));
        offset += (24 + payload_len).next_multiple_of(8);
    }
    out
}

/// Whether the record at `offset` of a segment image is a durability marker.
pub fn is_durability_marker_at(bytes: &[u8], offset: u64) -> bool {
    let field = &bytes[offset as usize + 4..offset as usize + 8];
    u32::from_le_bytes(field.try_into().unwrap()) & DURABILITY_MARKER_FLAG != 0
}

/// Asserts that `replayed` holds exactly the records `from..=to` with their `payload(lsn, max)`
/// (for logs with no durability marker inside that range).
pub fn assert_replayed_range(replayed: &Replayed, from: Lsn, to: Lsn, max_bytes: usize) {
    let lsns: Vec<Lsn> = replayed.iter().map(|(lsn, _)| *lsn).collect();
    let expected: Vec<Lsn> = (from..=to).collect();
    assert_eq!(lsns, expected, "replayed lsns");
    for (lsn, bytes) in replayed {
        assert_eq!(bytes, &payload(*lsn, max_bytes), "payload of lsn {lsn}");
    }
}

/// Asserts that `replayed` is exactly the records of `appended` (`(lsn, payload)` in lsn order)
/// with `lsn >= from`.
pub fn assert_replayed_from(replayed: &Replayed, appended: &[(Lsn, Vec<u8>)], from: Lsn) {
    let expected: Vec<&(Lsn, Vec<u8>)> = appended.iter().filter(|(lsn, _)| *lsn >= from).collect();
    let lsns: Vec<Lsn> = replayed.iter().map(|(lsn, _)| *lsn).collect();
    let expected_lsns: Vec<Lsn> = expected.iter().map(|(lsn, _)| *lsn).collect();
    assert_eq!(lsns, expected_lsns, "replayed lsns");
    for ((lsn, bytes), (_, appended)) in replayed.iter().zip(expected) {
        assert_eq!(bytes, appended, "payload of lsn {lsn}");
    }
}

/// What the test knows about the log across crashes.
#[derive(Default)]
pub struct Model {
    /// `(lsn, payload)` of every record appended and not lost since, in lsn order. Lsns have gaps
    /// where durability markers sit.
    pub appended: Vec<(Lsn, Vec<u8>)>,
    /// Every record with an lsn up to this was acknowledged durable by `commit(Sync)` or `sync()`.
    pub acked: Lsn,
    /// Highest lsn passed to `truncate_before`; reopen passes it as `min_lsn`.
    pub checkpoint: Lsn,
    /// Recoveries that lost unacknowledged records (to show the tests exercise it).
    pub recoveries_losing_records: u64,
}

impl Model {
    pub fn min_lsn(&self) -> Lsn {
        self.checkpoint.max(1)
    }

    /// Checks a recovery against the model and forgets records that did not survive: what is
    /// replayed must be a prefix of the records appended from `min_lsn` on, holding every
    /// acknowledged one.
    pub fn check_recovery(&mut self, replayed: &Replayed, context: &str) {
        let first = self.min_lsn();
        let skipped = self.appended.iter().take_while(|(lsn, _)| *lsn < first).count();
        let expected = &self.appended[skipped..];
        assert!(
            replayed.len() <= expected.len(),
            "{context}: {} records replayed, only {} appended from lsn {first}",
            replayed.len(),
            expected.len()
        );
        for ((lsn, bytes), (expected_lsn, expected_bytes)) in replayed.iter().zip(expected) {
            assert_eq!(lsn, expected_lsn, "{context}: replayed lsns are not the appended ones");
            assert_eq!(bytes, expected_bytes, "{context}: lsn {lsn} replayed other bytes than appended");
        }
        if let Some((lost_lsn, _)) = expected.get(replayed.len()) {
            assert!(
                *lost_lsn > self.acked,
                "{context}: lsn {lost_lsn} was acknowledged durable (up to {}) but did not survive",
                self.acked
            );
            self.recoveries_losing_records += 1;
        }
        self.appended.truncate(skipped + replayed.len());
    }
}

pub fn random_opts(rng: &mut SmallRng) -> WalOptions {
    WalOptions {
        segment_bytes: [512, 1024, 4096][rng.gen_range(0..3)],
        recycle_segments: rng.gen_range(0..3),
        preallocate: rng.gen_bool(0.5),
        buffer_bytes: [64, 1024, 1 << 20][rng.gen_range(0..3)],
        ..WalOptions::default()
    }
}

/// Random appends, commits, syncs and checkpoints.
pub fn run_workload(wal: &Wal, model: &mut Model, rng: &mut SmallRng, ops: usize) -> Result<()> {
    for _ in 0..ops {
        match rng.gen_range(0..100) {
            0..=79 => {
                let len = if rng.gen_bool(0.05) { rng.gen_range(500..3000) } else { rng.gen_range(0..120) };
                let bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                // A failed append may still have buffered (and written) the record: it is "maybe".
                let expected_lsn = wal.last_lsn() + 1;
                model.appended.push((expected_lsn, bytes));
                let lsn = wal.append(model.appended.last().map_or(&[][..], |(_, b)| b.as_slice()))?;
                assert_eq!(lsn, expected_lsn);
                let durability = match rng.gen_range(0..10) {
                    0..=2 => Durability::Sync,
                    3..=6 => Durability::Buffered,
                    _ => Durability::None,
                };
                wal.commit(lsn, durability)?;
                if durability == Durability::Sync {
                    model.acked = model.acked.max(lsn);
                }
            }
            80..=83 => model.acked = model.acked.max(wal.sync()?),
            _ => {
                let durable = wal.durable_lsn();
                if durable > model.checkpoint {
                    let checkpoint = rng.gen_range(model.checkpoint..=durable).max(1);
                    // The engine's snapshot covers everything below the checkpoint before it
                    // truncates, so a failed truncation still reopens from the checkpoint.
                    model.checkpoint = checkpoint;
                    wal.truncate_before(checkpoint)?;
                }
            }
        }
    }
    Ok(())
}

/// Encodes a data record the way docs/format/wal.md describes it, independently of the crate.
pub fn encode_test_record(lsn: Lsn, synced_lsn: Lsn, payload: &[u8]) -> Vec<u8> {
    let mut record = vec![0u8; 24];
    record[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    record[8..16].copy_from_slice(&lsn.to_le_bytes());
    record[16..24].copy_from_slice(&synced_lsn.to_le_bytes());
    record.extend_from_slice(payload);
    let crc = crc32c::crc32c(&record[4..]);
    let masked = crc.rotate_right(15).wrapping_add(0xa282_ead8);
    record[..4].copy_from_slice(&masked.to_le_bytes());
    record.resize(record.len().next_multiple_of(8), 0);
    record
}

/// A storage whose `crash_at_sync`-th file sync (counting from 1; 0 = never) does not sync but
/// crashes the simulated machine (`CrashMode::Random`) and fails: a power loss while that
/// fdatasync was in flight.
pub struct CrashAtSync {
    pub storage: Arc<dyn Storage>,
    pub file_syncs: Arc<AtomicU64>,
    pub crash_at_sync: Arc<AtomicU64>,
}

impl CrashAtSync {
    pub fn new(sim: SimStorage) -> CrashAtSync {
        let (file_syncs, crash_at_sync) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (syncs, crash_at) = (file_syncs.clone(), crash_at_sync.clone());
        let inner: Arc<dyn Storage> = Arc::new(sim.clone());
        let hook: SyncHook = Arc::new(move |_name| {
            let count = syncs.fetch_add(1, Ordering::SeqCst) + 1;
            if count == crash_at.load(Ordering::SeqCst) {
                sim.crash(CrashMode::Random);
                return Err(Error::io(
                    "syncing during a simulated power loss",
                    io::Error::other("power loss"),
                ));
            }
            Ok(())
        });
        CrashAtSync { storage: Arc::new(HookStorage::new(inner, hook)), file_syncs, crash_at_sync }
    }
}
