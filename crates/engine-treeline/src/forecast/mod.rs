//! Insert forecasting (paper §4.6): the workload is cut into epochs of `epoch_inserts` inserts.
//! During an epoch every insert is counted in a histogram (the *building* one) and offered to a
//! reservoir sample (Vitter's algorithm R, `10·b` keys, seeded RNG). When the epoch ends, the
//! building histogram is *frozen* (replacing the previous frozen one) and a new one is built with
//! partition bounds from the sorted sample (the paper's are equi-depth; ours follow the sample's
//! gaps, `histogram.rs`). Forecasts read only the frozen histogram:
//! the inserts of the last full epoch, projected `epochs_ahead` epochs forward.
//!
//! The sample spans every insert the forecaster has counted since it started (as the paper's
//! "uniform random sample of the base data" and its authors' code keep it), not only the last
//! epoch's: inserts are counted when their records are written back from the record cache (only
//! then is it known that a key was new), and a page's dirty records are written back together,
//! often epochs after they were put, so one epoch's inserts cover only some of the hot spots.
//! A sample of the last epoch alone left a hot spot not written back in it without a partition
//! of its own, and its inserts in the next epoch were spread over the cold key space around it. The histograms work on `u64` projections; whole keys
//! go through the forecaster's `KeyMap` (the 8 bytes after the store's common key prefix, set from
//! the index at open and at each checkpoint; a new prefix restarts the histograms).

mod histogram;
mod persist;

pub use histogram::Histogram;
pub use persist::ForecastState;

use strata_core::{Error, Result};

use crate::key_projection::KeyMap;

/// Knobs of the forecaster.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ForecastConfig {
    /// Inserts per epoch (>= 1); the paper uses 100,000.
    pub epoch_inserts: u64,
    /// Histogram partitions `b` (>= 1); the sample holds `10·b` keys.
    pub partitions: usize,
    /// Multiplies every forecast (>= 0; > 1 leaves extra room, trading space for fewer
    /// reorganizations).
    pub overestimation: f64,
    /// Seed of the reservoir sample's RNG (deterministic forecasts for tests and replays).
    pub seed: u64,
}

/// The most bytes a forecaster with `partitions` (b) histogram partitions holds, at the end of
/// an epoch, its peak: the sample (10·b keys of 8 bytes); the building, frozen and next
/// histograms (at most 4·b + 1 partitions each, a bound and a count of 8 bytes); and the larger
/// of the end's two temporary phases — the sample's gaps (16 bytes each) with the cuts (at most
/// b − 1 positions), or the groups (fewer than 2·b ranges of 16 bytes) with the cuts.
pub fn memory_bound_bytes(partitions: usize) -> u64 {
    let b = partitions as u64;
    let sample = 10 * b * 8;
    let histograms = 3 * (4 * b + 1) * 16;
    let cuts = b * 8;
    let temporaries = (10 * b * 16).max(2 * b * 16) + cuts;
    sample + histograms + temporaries
}

/// The most histogram partitions a forecaster can have within `bytes` (at least 1).
pub fn partitions_within(bytes: u64) -> usize {
    // memory_bound_bytes is linear in b.
    let per_partition = memory_bound_bytes(2) - memory_bound_bytes(1);
    let fixed = memory_bound_bytes(1) - per_partition;
    usize::try_from(bytes.saturating_sub(fixed) / per_partition).unwrap_or(usize::MAX).max(1)
}

/// Counts inserts per epoch and forecasts inserts per key range.
#[derive(Clone, Debug)]
pub struct Forecaster {
    config: ForecastConfig,
    rng: SplitMix64,
    sample: Vec<u64>,
    /// Inserts offered to the sample since it started (Algorithm R's `i`).
    sampled_inserts: u64,
    seen_in_epoch: u64,
    building: Histogram,
    frozen: Option<Histogram>,
    epochs_completed: u64,
    key_map: KeyMap,
}

impl Forecaster {
    pub fn new(config: ForecastConfig) -> Result<Forecaster> {
        let ok = config.epoch_inserts >= 1
            && config.partitions >= 1
            && config.overestimation.is_finite()
            && config.overestimation >= 0.0;
        if !ok {
            return Err(Error::invalid(format!("treeline forecast: bad configuration {config:?}")));
        }
        Ok(Forecaster {
            config,
            rng: SplitMix64(config.seed),
            sample: Vec::with_capacity(10 * config.partitions),
            sampled_inserts: 0,
            seen_in_epoch: 0,
            building: Histogram::from_sample(&mut [], 1),
            frozen: None,
            epochs_completed: 0,
            key_map: KeyMap::default(),
        })
    }

    /// How whole keys map to the histograms' projections.
    pub fn key_map(&self) -> &KeyMap {
        &self.key_map
    }

    /// Uses `key_map` from now on; when it differs from the current one, the histograms and the
    /// sample restart empty (their projections were of the old map).
    pub fn set_key_map(&mut self, key_map: KeyMap) {
        if key_map == self.key_map {
            return;
        }
        self.key_map = key_map;
        self.sample.clear();
        self.sampled_inserts = 0;
        self.seen_in_epoch = 0;
        self.building = Histogram::from_sample(&mut [], 1);
        self.frozen = None;
    }

    /// Records one insert of `key` (through the key map).
    pub fn record_insert_key(&mut self, key: &[u8]) {
        self.record_insert(self.key_map.project(key));
    }

    /// `forecast` over the keys `lower .. upper_exclusive` (through the key map).
    pub fn forecast_keys(&self, lower: &[u8], upper_exclusive: Option<&[u8]>, epochs_ahead: u32) -> f64 {
        let upper = upper_exclusive.and_then(|u| self.key_map.project_upper_exclusive(u));
        self.forecast(self.key_map.project(lower), upper, epochs_ahead)
    }

    /// Records one insert of a key with projection `key_projection`.
    pub fn record_insert(&mut self, key_projection: u64) {
        self.building.record(key_projection);
        self.offer_to_sample(key_projection);
        // Saturating: a damaged but checksum-valid forecast file may hold any count.
        self.seen_in_epoch = self.seen_in_epoch.saturating_add(1);
        if self.seen_in_epoch >= self.config.epoch_inserts {
            self.end_epoch();
        }
    }

    /// Algorithm R: the `i`-th key offered (0-based) replaces a random slot with probability
    /// `k/(i+1)`.
    fn offer_to_sample(&mut self, key: u64) {
        let capacity = 10 * self.config.partitions;
        let i = self.sampled_inserts;
        self.sampled_inserts = i.saturating_add(1);
        if self.sample.len() < capacity {
            self.sample.push(key);
            return;
        }
        let j = self.rng.below(i.saturating_add(1));
        if let Some(slot) = usize::try_from(j).ok().and_then(|j| self.sample.get_mut(j)) {
            *slot = key;
        }
    }

    fn end_epoch(&mut self) {
        let next = Histogram::from_sample(&mut self.sample, self.config.partitions);
        self.frozen = Some(std::mem::replace(&mut self.building, next));
        self.seen_in_epoch = 0;
        self.epochs_completed = self.epochs_completed.saturating_add(1);
    }

    /// Forecast inserts into `lower .. upper_exclusive` (`None`: unbounded) over the next
    /// `epochs_ahead` epochs, times the overestimation factor; 0 before the first epoch ends.
    pub fn forecast(&self, lower: u64, upper_exclusive: Option<u64>, epochs_ahead: u32) -> f64 {
        self.frozen.as_ref().map_or(0.0, |h| {
            h.estimate(lower, upper_exclusive) * f64::from(epochs_ahead) * self.config.overestimation
        })
    }

    /// The histogram of the last completed epoch, if any.
    pub fn frozen(&self) -> Option<&Histogram> {
        self.frozen.as_ref()
    }

    /// The histogram counting the current epoch.
    pub fn building(&self) -> &Histogram {
        &self.building
    }

    pub fn epochs_completed(&self) -> u64 {
        self.epochs_completed
    }

    /// (epochs completed, inserts in the current epoch): changes with every insert counted (a
    /// changed key map restarts the count, which changes it too unless nothing was counted).
    pub fn progress(&self) -> (u64, u64) {
        (self.epochs_completed, self.seen_in_epoch)
    }

    /// Inserts counted so far in the current epoch.
    pub fn inserts_in_epoch(&self) -> u64 {
        self.seen_in_epoch
    }
}

/// Records per page for a segment about to be written (§4.6, "Utilizing Forecasts"): the
/// current records spread evenly over as many pages as records plus forecast inserts need at
/// `max_records_per_page`, so that the pages, filled to the goal, leave room for the forecast. When even one record per page cannot make
/// room for the forecast, the goal is 1. A zero capacity is treated as 1.
pub fn goal_for(segment_records: usize, forecast: f64, max_records_per_page: usize) -> usize {
    let max = max_records_per_page.max(1);
    let forecast = if forecast.is_finite() && forecast > 0.0 { forecast.ceil() } else { 0.0 };
    // f64 → usize saturates; the sum is only an upper bound on what must fit.
    let expected = segment_records.saturating_add(forecast as usize);
    let pages = expected.div_ceil(max).max(1);
    let mut goal = segment_records.div_ceil(pages).clamp(1, max);
    // Rounding the even spread up can use fewer pages than needed (742 records on 741 pages
    // makes a goal of 2, i.e. 371 pages); step down until the pages used suffice.
    while goal > 1 && segment_records.div_ceil(goal).saturating_mul(max) < expected {
        goal -= 1;
    }
    goal
}

/// The error bound a goal leaves room for: ε free records at each end of a page, so
/// `goal + 2ε <= max_records_per_page` (§3.2), at least 1.
pub fn epsilon_for(goal: usize, max_records_per_page: usize) -> u32 {
    let eps = max_records_per_page.saturating_sub(goal) / 2;
    u32::try_from(eps).unwrap_or(u32::MAX).max(1)
}

/// SplitMix64 (Steele, Lea, Flood 2014): a small seeded generator, enough for sampling.
#[derive(Clone, Debug)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (multiply-shift; bias below 2^-64·n, negligible here).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests;
