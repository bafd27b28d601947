//! The engine's knobs (`EngineConfig::engine_options`, read with `EngineOptionReader`) and the
//! sizes derived from them and the memory budget.

use strata_core::{AutoOr, EngineConfig, EngineOptionReader, Error, Result};

use crate::page::PageSize;

/// Engine name, as the facade and the knobs' error messages spell it.
pub const ENGINE_NAME: &str = "treeline";

/// Smallest record cache: a few pages' worth of records.
pub const MIN_RECORD_CACHE_BYTES: u64 = 4 << 10;
/// The default checkpoint distance is at most the data file's size over this.
pub const CHECKPOINT_DISTANCES_PER_DATA: u64 = 16;
/// ... and at least this, whatever the data's size.
pub const MIN_DATA_DERIVED_CHECKPOINT_WAL_BYTES: u64 = 1 << 20;
/// Smallest share of the budget kept outside the record cache for buffers.
pub const MIN_BUFFER_RESERVE_BYTES: u64 = 64 << 10;

/// Memory kept outside the record cache for buffers — the WAL's append buffer (budget/16, at
/// most 1 MiB), pages being written back, a reorganization's pre pages (half the reserve, beyond
/// the full segment itself) — counted against the budget: an eighth of it, at least 64 KiB.
pub fn buffer_reserve_bytes(config: &EngineConfig) -> u64 {
    (config.memory_budget_bytes / 8).max(MIN_BUFFER_RESERVE_BYTES)
}

/// TreeLine's knobs. `None` means "derived" (documented per field).
#[derive(Clone, Debug, PartialEq)]
pub struct TreelineOptions {
    /// Page size of a new store (4 KiB–64 KiB, a power of two); an existing store keeps its own.
    /// `None` (`auto`, the default): chosen from the records at the store's first write-back or
    /// bulk load (`PageSize::for_record_bytes`), so a page holds about a dozen of them.
    pub page_size: Option<PageSize>,
    /// Record cache capacity; default the whole memory budget, which the index and the buffer
    /// reserve then reduce (`Store::effective_cache_bytes`), as the paper gives its record cache
    /// all the memory. Runtime knob.
    pub record_cache_bytes: Option<u64>,
    /// Shards of the record cache, 1 to 16 (a power of two; fixed at open). Default: two per
    /// core, one per 256 KiB of the cache's size at open, at most 16
    /// (`sharded_cache::default_shards`).
    pub record_cache_shards: Option<usize>,
    /// Records per page a reorganization aims for (the paper's *goal*); default: 70% of what fits
    /// a page at the reorganized records' average size.
    pub goal: Option<usize>,
    /// Model error bound in records (the paper's *epsilon*); default: what the goal leaves room
    /// for (`forecast::epsilon_for`).
    pub epsilon: Option<u32>,
    /// Segments examined on each side of a full segment in Phase I (the paper's *r*).
    pub reorg_radius: usize,
    /// Insert forecasting sets the goal of each reorganization (§4.6); off: the goal alone.
    pub forecasting: bool,
    /// Inserts per forecasting epoch (the paper's 100,000).
    pub forecast_epoch_inserts: u64,
    /// Histogram partitions *b*; default a fifth of the epoch (the paper's 20,000 for 100,000)
    /// within a sixteenth of the budget (`forecast_partitions()`), at most 2^20. The reservoir
    /// sample holds `10·b` keys.
    pub forecast_partitions: Option<usize>,
    /// Most epochs of forecast inserts a reorganization leaves room for (the paper's *f*, 100);
    /// fewer while the forecaster has completed fewer epochs (`store/forecast_room.rs`).
    pub forecast_future_epochs: u32,
    /// WAL growth that triggers a checkpoint; default the record cache size (at least 256 KiB),
    /// so replaying the log after a crash refills about one cache, but at most a sixteenth of
    /// the data file (at least 1 MiB), re-derived at every checkpoint
    /// (`TreelineOptions::checkpoint_wal_bytes`).
    pub checkpoint_wal_bytes: Option<u64>,
    /// Torn-page protection: a page overwritten in place goes to the double-write area first
    /// (default). Off assumes in-place page writes are atomic, as the paper does (NVMe devices
    /// whose atomic write unit covers the page, with direct I/O): a torn page is then reported as
    /// corruption by its checksum when read, never repaired. For measuring what the double
    /// write costs, and for such devices.
    pub double_write: bool,
    /// Page grouping (§4.4): reorganizations write segments of up to 16 pages addressed by a
    /// model; off: every segment is one page (for the paper's Fig 8 factor analysis).
    pub page_grouping: bool,
}

impl Default for TreelineOptions {
    fn default() -> Self {
        TreelineOptions {
            page_size: None,
            record_cache_bytes: None,
            record_cache_shards: None,
            goal: None,
            epsilon: None,
            reorg_radius: 5,
            forecasting: true,
            forecast_epoch_inserts: 100_000,
            forecast_partitions: None,
            forecast_future_epochs: 100,
            checkpoint_wal_bytes: None,
            double_write: true,
            page_grouping: true,
        }
    }
}

/// Knobs `Db::set_option` may change while the store is open.
pub const RUNTIME_OPTIONS: &[&str] = &["record_cache_bytes"];

impl TreelineOptions {
    /// The knobs given in `config`, over the defaults; refuses unknown names and bad values.
    pub fn from_config(config: &EngineConfig) -> Result<TreelineOptions> {
        let mut options = TreelineOptions::default();
        let mut r = EngineOptionReader::new(ENGINE_NAME, &config.engine_options)?;
        if let Some(AutoOr::Fixed(bytes)) = r.bytes_or_auto("page_size_bytes", 4096..=65536)? {
            let size = usize::try_from(bytes).map_err(|_| Error::invalid("page_size_bytes"))?;
            options.page_size = Some(PageSize::new(size)?);
        }
        options.record_cache_bytes = r.bytes("record_cache_bytes", cache_range(config))?;
        options.record_cache_shards = r.count("record_cache_shards", 1..=16)?.map(|n| n as usize);
        options.goal = r.count("goal", 1..=6552)?.map(|g| g as usize);
        options.epsilon = r.count("epsilon", 1..=3276)?.map(|e| e as u32);
        if let Some(radius) = r.count("reorg_radius", 0..=64)? {
            options.reorg_radius = radius as usize;
        }
        if let Some(on) = r.flag("forecasting")? {
            options.forecasting = on;
        }
        if let Some(n) = r.count("forecast_epoch_inserts", 1..=1 << 40)? {
            options.forecast_epoch_inserts = n;
        }
        options.forecast_partitions = r.count("forecast_partitions", 1..=1 << 20)?.map(|b| b as usize);
        if let Some(f) = r.count("forecast_future_epochs", 0..=1 << 20)? {
            options.forecast_future_epochs = f as u32;
        }
        options.checkpoint_wal_bytes = r.bytes("checkpoint_wal_bytes", 4096..=1 << 50)?;
        if let Some(on) = r.flag("double_write")? {
            options.double_write = on;
        }
        if let Some(on) = r.flag("page_grouping")? {
            options.page_grouping = on;
        }
        r.finish()?;
        Ok(options)
    }

    /// Histogram partitions: the knob, or a fifth of the epoch but no more than fit a
    /// `FORECAST_BUDGET_DIVISOR`th of the budget (`forecast::memory_bound_bytes`: 20,000
    /// partitions, the default epoch's fifth, take 8.8 MB at an epoch's end), and no fewer than
    /// `MIN_FORECAST_PARTITIONS` (a few hot spots need a partition each).
    pub fn forecast_partitions(&self, config: &EngineConfig) -> usize {
        self.forecast_partitions.unwrap_or_else(|| {
            let by_epoch = (self.forecast_epoch_inserts / 5).clamp(1, 1 << 20) as usize;
            let by_budget =
                crate::forecast::partitions_within(config.memory_budget_bytes / FORECAST_BUDGET_DIVISOR);
            by_epoch.min(by_budget.max(MIN_FORECAST_PARTITIONS))
        })
    }

    /// What the forecaster holds at most (0 without forecasting), counted in the budget like the
    /// index.
    pub fn forecaster_memory_bytes(&self, config: &EngineConfig) -> u64 {
        match self.forecasting {
            true => crate::forecast::memory_bound_bytes(self.forecast_partitions(config)),
            false => 0,
        }
    }

    /// The record cache capacity for `config`'s budget.
    pub fn record_cache_bytes(&self, config: &EngineConfig) -> u64 {
        self.record_cache_bytes.unwrap_or(config.memory_budget_bytes).max(MIN_RECORD_CACHE_BYTES)
    }

    /// The checkpoint distance for a store whose data file holds `data_bytes`: the knob, or the
    /// record cache size (at least 256 KiB) but no more than a sixteenth of the data (at least
    /// 1 MiB). The WAL kept is about three distances, and slots freed by reorganizations are
    /// reused only after the next checkpoint: a distance of a whole cache made the WAL of a
    /// 30 MB store 29 MB and left 30% of its data file free between checkpoints.
    pub fn checkpoint_wal_bytes(&self, config: &EngineConfig, data_bytes: u64) -> u64 {
        self.checkpoint_wal_bytes.unwrap_or_else(|| {
            let by_data =
                (data_bytes / CHECKPOINT_DISTANCES_PER_DATA).max(MIN_DATA_DERIVED_CHECKPOINT_WAL_BYTES);
            self.record_cache_bytes(config).max(256 << 10).min(by_data)
        })
    }
}

/// The WAL segment size for checkpoint distance `distance_bytes`: a quarter of it in whole MiB
/// (at least 1 MiB), at most the budget's default (`EngineConfig::effective_wal_segment_bytes`);
/// `None` when the configuration sets the size. The log keeps about three distances plus the
/// active segment and two recycled ones, so segments of a quarter distance keep it near 3.75
/// distances where budget-sized ones (4 MiB at 16 MiB) made a 30 MB store's log 16 MB.
pub fn wal_segment_bytes_for_distance(config: &EngineConfig, distance_bytes: u64) -> Option<u64> {
    if config.wal_segment_bytes.is_some() {
        return None;
    }
    let quarter_mib = (distance_bytes / 4).div_ceil(1 << 20).max(1);
    Some((quarter_mib << 20).min(config.effective_wal_segment_bytes()))
}

/// The forecaster's default partitions fit this share of the budget (1/16).
pub const FORECAST_BUDGET_DIVISOR: u64 = 16;
/// The fewest partitions the budget leaves the forecaster by default (113 KB at most).
pub const MIN_FORECAST_PARTITIONS: usize = 256;

/// The record cache never gets less than this share of the budget (1/4), however much the index
/// takes: with a fixed cache of a few KiB a store whose index filled its budget read every
/// record from its pages. The memory then exceeds the budget, which stats report
/// (`memory.over_budget_bytes`).
pub const CACHE_FLOOR_BUDGET_DIVISOR: u64 = 4;

/// The record cache capacity: `requested`, within what the budget leaves after `held_bytes` (the
/// index and the forecaster) and the buffer reserve, but at least a quarter of the budget
/// (`CACHE_FLOOR_BUDGET_DIVISOR`) unless less was requested, and at least `MIN_RECORD_CACHE_BYTES`.
pub fn cache_bytes_within_budget(config: &EngineConfig, requested: u64, held_bytes: u64) -> u64 {
    let budget = config.memory_budget_bytes;
    let left = budget.saturating_sub(held_bytes + buffer_reserve_bytes(config));
    let floor = budget / CACHE_FLOOR_BUDGET_DIVISOR;
    requested.min(left.max(floor)).max(MIN_RECORD_CACHE_BYTES)
}

/// Record cache sizes the budget allows: what is left after the buffer reserve.
pub fn cache_range(config: &EngineConfig) -> std::ops::RangeInclusive<u64> {
    MIN_RECORD_CACHE_BYTES
        ..=config.memory_budget_bytes.saturating_sub(buffer_reserve_bytes(config)).max(MIN_RECORD_CACHE_BYTES)
}

/// Parses a runtime `record_cache_bytes` value as at open.
pub fn parse_record_cache_bytes(config: &EngineConfig, value: &str) -> Result<u64> {
    EngineOptionReader::runtime_bytes(ENGINE_NAME, "record_cache_bytes", value, cache_range(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_never_takes_the_cache_below_a_quarter_of_the_budget() {
        let mib = 1u64 << 20;
        let config = EngineConfig { memory_budget_bytes: 16 * mib, ..EngineConfig::default() };
        let reserve = buffer_reserve_bytes(&config);
        assert_eq!(cache_bytes_within_budget(&config, 16 * mib, 0), 16 * mib - reserve);
        assert_eq!(cache_bytes_within_budget(&config, 16 * mib, 6 * mib), 10 * mib - reserve);
        assert_eq!(cache_bytes_within_budget(&config, 16 * mib, 15 * mib), 4 * mib, "the floor");
        assert_eq!(cache_bytes_within_budget(&config, mib, 15 * mib), mib, "less was asked for");
        assert_eq!(cache_bytes_within_budget(&config, 0, 0), MIN_RECORD_CACHE_BYTES);
    }

    #[test]
    fn checkpoint_distance_and_wal_segments_follow_the_data() {
        let config = EngineConfig { memory_budget_bytes: 16 << 20, ..EngineConfig::default() };
        let options = TreelineOptions::from_config(&config).unwrap();
        let mib = 1u64 << 20;
        assert_eq!(options.checkpoint_wal_bytes(&config, 0), mib, "a new store: 1 MiB");
        assert_eq!(options.checkpoint_wal_bytes(&config, 64 * mib), 4 * mib, "a sixteenth of the data");
        assert_eq!(options.checkpoint_wal_bytes(&config, 1 << 40), 16 * mib, "at most the cache");
        assert_eq!(wal_segment_bytes_for_distance(&config, mib), Some(mib));
        assert_eq!(wal_segment_bytes_for_distance(&config, 12 * mib), Some(3 * mib));
        assert_eq!(
            wal_segment_bytes_for_distance(&config, 64 * mib),
            Some(4 * mib),
            "the budget's default caps it"
        );
        let set = EngineConfig { wal_segment_bytes: Some(8 * mib), ..config.clone() };
        assert_eq!(wal_segment_bytes_for_distance(&set, mib), None, "a configured size stays");
        let knob =
            TreelineOptions::from_config(&config.clone().engine_option("checkpoint_wal_bytes", "5MiB"))
                .unwrap();
        assert_eq!(knob.checkpoint_wal_bytes(&config, 0), 5 * mib);
    }

    #[test]
    fn the_forecaster_fits_a_sixteenth_of_the_budget_unless_its_knob_says_otherwise() {
        let at = |budget: u64, knobs: &[(&str, &str)]| {
            let config = EngineConfig { memory_budget_bytes: budget, ..EngineConfig::default() }
                .with_engine_options(knobs.iter().copied());
            let o = TreelineOptions::from_config(&config).unwrap();
            (o.forecast_partitions(&config), o.forecaster_memory_bytes(&config))
        };
        let mib = 1u64 << 20;
        let (partitions, bytes) = at(36 * mib, &[]);
        assert!(partitions < 20_000 && bytes <= 36 * mib / 16, "{partitions} partitions, {bytes} bytes");
        assert!(crate::forecast::memory_bound_bytes(partitions + 1) > 36 * mib / 16, "the most that fit");
        assert_eq!(at(4 << 30, &[]).0, 20_000, "a large budget: the default epoch's fifth");
        assert_eq!(at(36 * mib, &[("forecast_partitions", "30000")]).0, 30_000, "the knob wins");
        assert_eq!(at(36 * mib, &[("forecasting", "false")]).1, 0, "no forecaster, nothing held");
        assert_eq!(at(mib, &[]).0, MIN_FORECAST_PARTITIONS, "a small budget: the floor");
        assert_eq!(at(mib, &[("forecast_epoch_inserts", "500")]).0, 100, "the epoch's fifth below it");
    }

    #[test]
    fn knobs_are_read_and_unknown_ones_refused() {
        let config = EngineConfig::default().with_engine_options([
            ("record_cache_bytes", "64KiB"),
            ("goal", "20"),
            ("forecasting", "false"),
            ("reorg_radius", "2"),
        ]);
        let o = TreelineOptions::from_config(&config).unwrap();
        assert_eq!(o.record_cache_bytes, Some(64 << 10));
        assert_eq!((o.goal, o.forecasting, o.reorg_radius), (Some(20), false, 2));
        let bad = EngineConfig::default().engine_option("page_size_bytes", "5000");
        assert!(TreelineOptions::from_config(&bad).is_err());
        let unknown = EngineConfig::default().engine_option("cache", "1");
        assert!(TreelineOptions::from_config(&unknown)
            .unwrap_err()
            .to_string()
            .contains("record_cache_bytes"));
        assert!(parse_record_cache_bytes(&EngineConfig::default(), "1TiB").is_err());
    }
}
