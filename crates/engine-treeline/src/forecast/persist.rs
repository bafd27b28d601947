//! `treeline-forecast`: the forecaster's histograms, stored at checkpoints so that a reopened
//! store forecasts from the inserts it saw before (docs/format/treeline.md, "treeline-forecast").
//! The reservoir sample is not stored (up to `10·b` keys, and only used to place the next
//! epoch's partitions): after a reopen it restarts empty and fills from the inserts counted
//! since.
//!
//! The file is advisory — a store without it forecasts from nothing, as a new one does — but a
//! file that is there and damaged is `Error::Corruption` naming it, like every other file; the
//! message says deleting it only drops the forecasts.

use strata_core::le_bytes::{u32_at, u64_at};
use strata_core::{Error, Result};
use strata_io::Storage;
use strata_kit::small_file::{CrcLayout, SmallFileFormat};

use super::{Forecaster, Histogram};
use crate::key_projection::KeyMap;

pub const FILE_NAME: &str = "treeline-forecast";
pub const VERSION: u32 = 1;

pub const FORMAT: SmallFileFormat =
    SmallFileFormat { magic: b"TLFCAST\0", versions: 1..=1, crc: CrcLayout::Trailing, payload_bytes: None };

/// Payload offsets of the fixed part.
pub const EPOCHS_COMPLETED: usize = 0;
pub const INSERTS_IN_EPOCH: usize = 8;
pub const PREFIX_LEN: usize = 16;
pub const PREFIX: usize = 18;

/// Partitions a stored histogram may have (the knob's `b` is far below this).
pub const MAX_PARTITIONS: usize = 1 << 24;

/// What a stored forecaster restores.
#[derive(Clone, Debug, PartialEq)]
pub struct ForecastState {
    pub epochs_completed: u64,
    pub inserts_in_epoch: u64,
    pub key_map: KeyMap,
    pub building: Histogram,
    pub frozen: Option<Histogram>,
}

impl ForecastState {
    pub fn encode(&self) -> Vec<u8> {
        let prefix = self.key_map.prefix();
        let mut p = Vec::with_capacity(PREFIX + prefix.len() + 16 * self.building.partitions() * 2 + 16);
        p.extend_from_slice(&self.epochs_completed.to_le_bytes());
        p.extend_from_slice(&self.inserts_in_epoch.to_le_bytes());
        p.extend_from_slice(&(prefix.len() as u16).to_le_bytes());
        p.extend_from_slice(prefix);
        encode_histogram(&self.building, &mut p);
        match &self.frozen {
            Some(h) => {
                p.push(1);
                encode_histogram(h, &mut p);
            }
            None => p.push(0),
        }
        p
    }

    /// Decodes a payload found at `payload_offset` of `file`.
    pub fn decode(payload: &[u8], file: &str, payload_offset: u64) -> Result<ForecastState> {
        let corrupt = |at: usize, what: &str| {
            let what = format!("{what} (deleting {FILE_NAME} only drops the insert forecasts)");
            Error::corruption(file, payload_offset + at as u64, what)
        };
        let u64_field = |at: usize| u64_at(payload, at).ok_or_else(|| corrupt(at, "truncated"));
        let epochs_completed = u64_field(EPOCHS_COMPLETED)?;
        let inserts_in_epoch = u64_field(INSERTS_IN_EPOCH)?;
        let prefix_len = payload
            .get(PREFIX_LEN..PREFIX)
            .and_then(|b| <[u8; 2]>::try_from(b).ok())
            .map(|b| usize::from(u16::from_le_bytes(b)))
            .ok_or_else(|| corrupt(PREFIX_LEN, "truncated"))?;
        if prefix_len > KeyMap::MAX_PREFIX_BYTES {
            return Err(corrupt(PREFIX_LEN, "key prefix longer than 64 bytes"));
        }
        let prefix = payload.get(PREFIX..PREFIX + prefix_len).ok_or_else(|| corrupt(PREFIX, "truncated"))?;
        let mut at = PREFIX + prefix_len;
        let building = decode_histogram(payload, &mut at).map_err(|(off, what)| corrupt(off, what))?;
        let frozen = match payload.get(at) {
            Some(0) => None,
            Some(1) => {
                at += 1;
                Some(decode_histogram(payload, &mut at).map_err(|(off, what)| corrupt(off, what))?)
            }
            Some(_) => return Err(corrupt(at, "has-frozen flag is not 0 or 1")),
            None => return Err(corrupt(at, "truncated")),
        };
        let end = at + usize::from(frozen.is_none());
        if end != payload.len() {
            return Err(corrupt(end, "bytes after the last histogram"));
        }
        let key_map = KeyMap::new(prefix);
        Ok(ForecastState { epochs_completed, inserts_in_epoch, key_map, building, frozen })
    }

    /// The stored state, if the file exists.
    pub fn load(storage: &dyn Storage) -> Result<Option<ForecastState>> {
        let Some((_, payload)) = FORMAT.load(storage, FILE_NAME)? else { return Ok(None) };
        ForecastState::decode(&payload, FILE_NAME, FORMAT.payload_offset() as u64).map(Some)
    }

    /// Durably replaces the file (temporary file, fsync, rename, directory fsync).
    pub fn store(&self, storage: &dyn Storage) -> Result<()> {
        FORMAT.store(storage, FILE_NAME, VERSION, &self.encode())
    }
}

/// `u32` partitions `k`, then `k` `u64` lower bounds, then `k` `u64` counts.
fn encode_histogram(h: &Histogram, out: &mut Vec<u8>) {
    out.extend_from_slice(&(h.partitions() as u32).to_le_bytes());
    for b in h.bounds() {
        out.extend_from_slice(&b.to_le_bytes());
    }
    for c in h.counts() {
        out.extend_from_slice(&c.to_le_bytes());
    }
}

/// A histogram at `*at`, which moves past it; an error is (offset, what).
fn decode_histogram(p: &[u8], at: &mut usize) -> std::result::Result<Histogram, (usize, &'static str)> {
    let k = u32_at(p, *at).map(|k| k as usize).ok_or((*at, "truncated"))?;
    if k == 0 || k > MAX_PARTITIONS {
        return Err((*at, "histogram partition count is 0 or above 2^24"));
    }
    let start = *at + 4;
    if p.len() < start + 16 * k {
        return Err((start, "truncated histogram"));
    }
    let read = |from: usize| (0..k).filter_map(|i| u64_at(p, from + 8 * i)).collect::<Vec<u64>>();
    let (bounds, counts) = (read(start), read(start + 8 * k));
    *at = start + 16 * k;
    Histogram::from_parts(bounds, counts)
        .ok_or((start, "histogram bounds do not start at 0 and strictly increase"))
}

impl Forecaster {
    /// What `treeline-forecast` stores.
    pub fn state(&self) -> ForecastState {
        ForecastState {
            epochs_completed: self.epochs_completed,
            inserts_in_epoch: self.seen_in_epoch,
            key_map: self.key_map.clone(),
            building: self.building.clone(),
            frozen: self.frozen.clone(),
        }
    }

    /// Continues from a stored state (the sample restarts empty). Call `set_key_map` with the
    /// store's current key map afterwards: a different one restarts the histograms.
    pub fn restore(&mut self, state: ForecastState) {
        self.epochs_completed = state.epochs_completed;
        self.seen_in_epoch = state.inserts_in_epoch;
        self.key_map = state.key_map;
        self.building = state.building;
        self.frozen = state.frozen;
        self.sample.clear();
        self.sampled_inserts = 0;
    }
}

#[cfg(test)]
mod tests {
    use strata_io::MemStorage;

    use super::*;

    fn sample_state() -> ForecastState {
        let building = Histogram::from_parts(vec![0, 30], vec![1, 2]).unwrap();
        let mut frozen = Histogram::from_sample(&mut [], 1);
        frozen.record(7);
        ForecastState {
            epochs_completed: 3,
            inserts_in_epoch: 3,
            key_map: KeyMap::new(b"user"),
            building,
            frozen: Some(frozen),
        }
    }

    /// docs/format/treeline.md, "treeline-forecast": every field at its documented offset.
    #[test]
    fn offsets() {
        let file = FORMAT.encode(VERSION, &sample_state().encode());
        let p = &file[FORMAT.payload_offset()..file.len() - 4];
        assert_eq!(&file[..8], b"TLFCAST\0");
        assert_eq!(p[EPOCHS_COMPLETED], 3);
        assert_eq!(p[INSERTS_IN_EPOCH], 3);
        assert_eq!(&p[PREFIX_LEN..PREFIX], &4u16.to_le_bytes());
        assert_eq!(&p[PREFIX..PREFIX + 4], b"user");
        let h = PREFIX + 4;
        assert_eq!(&p[h..h + 4], &2u32.to_le_bytes(), "building: 2 partitions");
        assert_eq!(&p[h + 4..h + 12], &0u64.to_le_bytes(), "first bound 0");
        assert_eq!(&p[h + 12..h + 20], &30u64.to_le_bytes(), "second bound");
        assert_eq!(&p[h + 20..h + 28], &1u64.to_le_bytes(), "first count");
        assert_eq!(&p[h + 28..h + 36], &2u64.to_le_bytes(), "second count");
        assert_eq!(p[h + 36], 1, "has frozen");
        assert_eq!(&p[h + 37..h + 41], &1u32.to_le_bytes());
        assert_eq!(p.len(), h + 41 + 16);
    }

    #[test]
    fn round_trips_and_damage_is_corruption_naming_the_file() {
        let storage = MemStorage::new();
        assert_eq!(ForecastState::load(&storage).unwrap(), None);
        sample_state().store(&storage).unwrap();
        assert_eq!(ForecastState::load(&storage).unwrap(), Some(sample_state()));
        let payload = sample_state().encode();
        for len in 0..payload.len() {
            let err = ForecastState::decode(&payload[..len], FILE_NAME, 12).unwrap_err();
            assert!(matches!(err, Error::Corruption { .. }), "{len}: {err}");
            assert!(err.to_string().contains(FILE_NAME), "{err}");
        }
        for i in 0..payload.len() {
            let mut damaged = payload.clone();
            damaged[i] ^= 0x21;
            let _ = ForecastState::decode(&damaged, FILE_NAME, 12); // never panics
        }
    }

    /// Regression: the checksum vouches for the bytes, not for the counts, so a damaged file
    /// that verifies may hold counts at `u64::MAX`; the next counted insert must saturate, not
    /// overflow (a panic in builds with overflow checks, as the tests and fuzz builds are).
    #[test]
    fn counts_at_their_maximum_in_a_stored_state_saturate_instead_of_overflowing() {
        let config = super::super::ForecastConfig {
            epoch_inserts: u64::MAX,
            partitions: 2,
            overestimation: 1.0,
            seed: 1,
        };
        let full = Histogram::from_parts(vec![0, 30], vec![u64::MAX, u64::MAX]).unwrap();
        let state = ForecastState {
            epochs_completed: u64::MAX,
            inserts_in_epoch: u64::MAX - 1,
            key_map: KeyMap::new(b""),
            building: full.clone(),
            frozen: Some(full),
        };
        let mut forecaster = Forecaster::new(config).unwrap();
        forecaster.restore(ForecastState::decode(&state.encode(), FILE_NAME, 0).unwrap());
        assert_eq!(forecaster.building().total(), u64::MAX);
        for key in [1, 40, 1, 40] {
            forecaster.record_insert(key); // the second one ends an epoch
        }
        assert_eq!(forecaster.epochs_completed(), u64::MAX);
        assert!(forecaster.forecast(0, None, 3).is_finite());
    }

    #[test]
    fn a_restored_forecaster_forecasts_as_the_stored_one_did() {
        let config =
            super::super::ForecastConfig { epoch_inserts: 100, partitions: 4, overestimation: 1.0, seed: 1 };
        let mut before = Forecaster::new(config).unwrap();
        for i in 0..250u64 {
            before.record_insert(i * 1_000 % 77_777);
        }
        let mut after = Forecaster::new(config).unwrap();
        after.restore(ForecastState::decode(&before.state().encode(), FILE_NAME, 0).unwrap());
        assert_eq!(after.epochs_completed(), 2);
        assert_eq!(after.inserts_in_epoch(), 50);
        for (lo, hi) in [(0, Some(10_000)), (20_000, None), (0, None)] {
            assert_eq!(after.forecast(lo, hi, 3), before.forecast(lo, hi, 3));
            assert!(after.forecast(lo, hi, 3) > 0.0);
        }
        assert_eq!(after.building(), before.building());
    }
}
