//! Helpers shared by the WAL integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use rand::rngs::SmallRng;
use rand::Rng;
use strata_core::{Durability, RecoveryMode, Result};
use strata_io::{OpenOptions, Storage};
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
    let (wal, report) = Wal::open(storage.clone(), opts.clone(), min_lsn, &mut |lsn, payload| {
        replayed.push((lsn, payload.to_vec()));
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

/// `(offset, lsn, synced_lsn)` of each record of a segment image, walking from offset 32 to the
/// end marker. Parses independently of the crate's decoder.
pub fn record_positions(bytes: &[u8]) -> Vec<(u64, Lsn, Lsn)> {
    let mut out = Vec::new();
    let mut offset = 32usize;
    while offset + 24 <= bytes.len() {
        let header = &bytes[offset..offset + 24];
        if header.iter().all(|&b| b == 0) {
            break;
        }
        let payload_len = u32::from_le_bytes(header[4..8].try_into().unwrap()) as usize;
        let lsn = u64::from_le_bytes(header[8..16].try_into().unwrap());
        let synced = u64::from_le_bytes(header[16..24].try_into().unwrap());
        out.push((offset as u64, lsn, synced));
        offset += (24 + payload_len).next_multiple_of(8);
    }
    out
}

/// Asserts that `replayed` holds exactly the records `from..=to` with their `payload(lsn, max)`.
pub fn assert_replayed_range(replayed: &Replayed, from: Lsn, to: Lsn, max_bytes: usize) {
    let lsns: Vec<Lsn> = replayed.iter().map(|(lsn, _)| *lsn).collect();
    let expected: Vec<Lsn> = (from..=to).collect();
    assert_eq!(lsns, expected, "replayed lsns");
    for (lsn, bytes) in replayed {
        assert_eq!(bytes, &payload(*lsn, max_bytes), "payload of lsn {lsn}");
    }
}

/// What the test knows about the log across crashes.
#[derive(Default)]
pub struct Model {
    /// Payload of lsn `i + 1` for every record appended and not lost since.
    pub appended: Vec<Vec<u8>>,
    /// Highest lsn a `commit(Sync)` or `sync()` acknowledged.
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

    /// Checks a recovery against the model and forgets records that did not survive.
    pub fn check_recovery(&mut self, replayed: &Replayed, context: &str) {
        let first = self.min_lsn();
        let survivors = first + replayed.len() as u64 - 1;
        for (i, (lsn, bytes)) in replayed.iter().enumerate() {
            assert_eq!(*lsn, first + i as u64, "{context}: replayed lsns are not contiguous from {first}");
            let expected = self.appended.get(*lsn as usize - 1);
            assert_eq!(Some(bytes), expected, "{context}: lsn {lsn} replayed other bytes than appended");
        }
        assert!(
            survivors >= self.acked,
            "{context}: lsn {} was acknowledged durable but only {survivors} survived",
            self.acked
        );
        if (survivors as usize) < self.appended.len() {
            self.recoveries_losing_records += 1;
        }
        self.appended.truncate(survivors as usize);
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
                model.appended.push(bytes);
                let lsn = wal.append(model.appended.last().map_or(&[][..], |b| b.as_slice()))?;
                assert_eq!(lsn as usize, model.appended.len());
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
