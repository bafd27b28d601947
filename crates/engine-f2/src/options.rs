//! Engine options and the memory-budget split of F2 §8.1.

use strata_core::{EngineConfig, EngineOptionReader, Error, Result};

use crate::checkpoint::{self, StoredLayout, MAX_PAGE_BYTES};
use crate::log::RELEASED_PADDING_REGION_BYTES;

/// Engine-specific knobs. `None` fields are derived from `EngineConfig::memory_budget_bytes` the
/// way the paper splits its 3 GiB budget (hot index 1/6, read cache 1/6, cold index 1/48, the rest
/// for the hot log's in-memory pages and its released padding, after setting aside
/// [`reserved_bytes`]: the cold and chunk logs' tail pages, the compaction frame buffer and the
/// WAL buffers). Hot-index overflow
/// buckets beyond its share are taken from the hot log's pages at run time.
#[derive(Clone, Debug, PartialEq)]
pub struct F2Options {
    /// Log page size (power of two, >= 4 KiB); also the largest record. Fixed at creation.
    /// Default (`None`): from the memory budget, [`default_page_bytes`].
    pub page_size_bytes: Option<u64>,
    /// Segment file size of every log (a multiple of the page size). Fixed at creation.
    pub segment_bytes: u64,
    pub hot_index_bytes: Option<u64>,
    pub hot_log_memory_bytes: Option<u64>,
    /// The read cache of disk-resident read-hot records (§7); under two pages disables it.
    pub read_cache_bytes: Option<u64>,
    /// Memory of the cold index's chunk table (8 B per 32-entry hash chunk). Fixed at creation.
    pub cold_index_bytes: Option<u64>,
    /// Fraction of the hot log's in-memory pages that are mutable (updated in place).
    pub mutable_fraction: f64,
    /// Hot-log disk budget: hot→cold compaction starts when the hot log exceeds
    /// `trigger_fraction` of it. Default: 4x the hot log's memory.
    pub hot_log_disk_budget_bytes: Option<u64>,
    /// Cold-log disk budget. Set: cold→cold compaction starts when the cold log exceeds
    /// `compaction_trigger_fraction` of it, and until then the cold log keeps every superseded
    /// version it was given (a fixed budget, whatever the live data). Default (`None`): the
    /// cold log is kept within about twice its live bytes — a round starts when it exceeds
    /// [`COLD_SPACE_AMPLIFICATION`] × its estimated live bytes + [`COLD_SLACK_PAGES`] pages
    /// (engine/cold_live.rs; docs/ARCHITECTURE.md, f2, "Space after crashes").
    pub cold_log_disk_budget_bytes: Option<u64>,
    /// Fraction of a log's disk budget at which its compaction starts (the hot log's, and the
    /// cold log's when `cold_log_disk_budget_bytes` is set).
    pub compaction_trigger_fraction: f64,
    /// Fraction of a log compacted per round (from its oldest end).
    pub compaction_fraction: f64,
    /// Worker threads of a compaction round (F2 §5.2): each runs ConditionalInsert on the
    /// records whose cold-index chunk it owns, so their disk reads overlap. Single-log mode
    /// uses one. 1..=64. Default 1 (plus the frame buffer's read-ahead thread and 8 reads in
    /// flight per round): on a 2-core machine more workers were not faster and cost peak RSS
    /// (malloc arenas of the extra threads; measured in docs/benchmarks.md).
    pub compaction_threads: usize,
    /// Pages of the compacted log held in memory at once (the frame buffer, read ahead of the
    /// workers and released in page order). Part of the memory reserve. 1..=64.
    pub compaction_frame_pages: usize,
    /// A checkpoint is taken when this many WAL bytes were appended since the last one (or
    /// earlier, once it would give back an eighth of the live bytes: `Inner::checkpoint_due`).
    /// Default: the configured WAL segment size, else 64 MiB.
    pub checkpoint_wal_bytes: Option<u64>,
    /// Run compaction, chunk-log GC and checkpoints on a background thread (writers only wait
    /// when the hot log exceeds its whole disk budget). Off: the writer that crosses a trigger
    /// runs them inline.
    pub background_maintenance: bool,
    /// FASTER's design, for comparison only (F2 §2, Figure 2; the paper's FASTER baseline of
    /// §8.1): hot-log compaction copies the live records of the compacted range to the hot log's
    /// own tail (lookup-based liveness: a record is copied iff it is still the newest of its key)
    /// instead of moving them to the cold log, so the hot log must hold every live record and
    /// the cold log stays empty. The on-disk format is the same in both modes, so a store may be
    /// reopened in the other mode: reads always consult the cold log too, and single-log
    /// compaction keeps tombstones while the cold log is not empty.
    pub single_log: bool,
    /// The hot log lends steps of its in-memory window to the read cache, and takes them back,
    /// by the marginal hits each side measures while the store runs (engine/memory_split.rs;
    /// the paper's §8.5 future work). Off: the split stays as configured.
    pub memory_split: bool,
}

impl Default for F2Options {
    fn default() -> Self {
        F2Options {
            page_size_bytes: None,
            segment_bytes: 64 << 20,
            hot_index_bytes: None,
            hot_log_memory_bytes: None,
            read_cache_bytes: None,
            cold_index_bytes: None,
            mutable_fraction: 0.9,
            hot_log_disk_budget_bytes: None,
            cold_log_disk_budget_bytes: None,
            compaction_trigger_fraction: 0.8,
            compaction_fraction: 0.2,
            compaction_threads: 1,
            compaction_frame_pages: 4,
            checkpoint_wal_bytes: None,
            background_maintenance: true,
            single_log: false,
            memory_split: true,
        }
    }
}

/// The options with every derived size filled in.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    pub page_size_bytes: u64,
    pub segment_bytes: u64,
    pub hot_index_buckets: u64,
    pub hot_log_pages: usize,
    /// Released-padding regions the hot log keeps at most (`log::released_padding`): one per
    /// page of its disk budget, in no more than 1/32 of its memory share, which it is taken from.
    pub released_padding_regions: usize,
    pub read_cache_pages: usize,
    /// The read cache's page size, its unit of eviction: see [`read_cache_page_bytes`].
    pub read_cache_page_bytes: u64,
    pub chunk_count: u64,
    pub mutable_fraction: f64,
    pub hot_trigger_bytes: u64,
    /// The hot log's whole disk budget: writers wait for compaction beyond it.
    pub hot_hard_bytes: u64,
    /// When cold→cold compaction is due.
    pub cold_trigger: ColdTrigger,
    pub compaction_fraction: f64,
    pub compaction_threads: usize,
    pub compaction_frame_pages: usize,
    pub checkpoint_wal_bytes: u64,
    pub background_maintenance: bool,
    /// See [`F2Options::single_log`].
    pub single_log: bool,
    /// See [`F2Options::memory_split`].
    pub memory_split: bool,
    /// The budget split as configured: (hot index, hot log, read cache, cold index).
    pub split_bytes: [u64; 4],
    /// Memory outside the split that the budget sets aside: see [`reserved_bytes`].
    pub reserved_bytes: u64,
}

/// The default cold→cold trigger keeps the cold log within this many times its estimated live
/// bytes (plus the slack below): the same bound the chunk log's garbage collection keeps.
pub const COLD_SPACE_AMPLIFICATION: u64 = 2;
/// Slack of the default cold→cold trigger, in pages: a tiny cold log is never compacted (a round
/// reads at least one page and never the tail page being appended to, so below a few pages
/// rounds would mostly reread what the last one copied).
pub const COLD_SLACK_PAGES: u64 = 4;

/// When cold→cold compaction is due (see [`F2Options::cold_log_disk_budget_bytes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColdTrigger {
    /// An explicit budget: the cold log is over this many bytes (budget × trigger fraction).
    SizeBytes(u64),
    /// The default: the cold log is over [`COLD_SPACE_AMPLIFICATION`] × its estimated live bytes
    /// + `slack_bytes`.
    SpaceAmplification { slack_bytes: u64 },
}

impl ColdTrigger {
    /// Whether a cold log of `size_bytes`, whose live bytes are estimated at
    /// `live_estimate_bytes`, is due for a cold→cold round.
    pub fn is_due(&self, size_bytes: u64, live_estimate_bytes: u64) -> bool {
        match *self {
            ColdTrigger::SizeBytes(trigger_bytes) => size_bytes > trigger_bytes,
            ColdTrigger::SpaceAmplification { slack_bytes } => {
                size_bytes
                    > live_estimate_bytes.saturating_mul(COLD_SPACE_AMPLIFICATION).saturating_add(slack_bytes)
            }
        }
    }
}

/// The page size of a new store when the options leave it to the budget: a 64th of it as a
/// power of two, from 64 KiB to 1 MiB. The budget sets aside about six pages (the cold and
/// chunk logs' tail pages and the compaction frames), so 1 MiB pages left a 9 MiB budget 1 MiB
/// for its hot log, read cache and hot index together; 1 MiB (the paper's) from 64 MiB up. A
/// page bounds a record: a store that needs larger values sets `page_size_bytes`.
pub fn default_page_bytes(memory_budget_bytes: u64) -> u64 {
    floor_pow2(memory_budget_bytes / 64).clamp(64 << 10, 1 << 20)
}

/// The WAL's append buffers: the one being filled and the spare being written (each about
/// `WalOptions::buffer_bytes`).
pub fn wal_buffer_bytes() -> u64 {
    2 * strata_wal::WalOptions::default().buffer_bytes as u64
}

/// Memory besides the four structures of the split: the cold and chunk logs' tail pages, the
/// compaction frame buffer (`frame_pages`; checkpoint and verify scans use one page of it, they
/// never run during a compaction round) and the WAL's buffers.
pub fn reserved_bytes(page_size_bytes: u64, frame_pages: usize) -> u64 {
    (2 + frame_pages.max(1) as u64) * page_size_bytes + wal_buffer_bytes()
}

/// The read cache's pages are never written to disk, so their size need not be the logs': it
/// is the unit the cache evicts (second-chance FIFO), a page of about a 64th of the cache
/// (at least 4 KiB, at most the log's page, which bounds a record). With the log's 1 MiB pages a
/// 4 MiB cache had four, and each eviction dropped a quarter of the cached records.
pub fn read_cache_page_bytes(read_cache_bytes: u64, log_page_bytes: u64) -> u64 {
    floor_pow2(read_cache_bytes / READ_CACHE_PAGES_TARGET)
        .clamp(MIN_READ_CACHE_PAGE_BYTES, log_page_bytes.max(MIN_READ_CACHE_PAGE_BYTES))
}

const READ_CACHE_PAGES_TARGET: u64 = 64;
const MIN_READ_CACHE_PAGE_BYTES: u64 = 4096;

/// The power of two nearest to `x` (ties up): the cold index's chunk count and the hot index's
/// bucket count. Rounding down left up to half of either share unused: two cold keys per entry
/// where the paper sizes about one (its 8 M chunks of 32 entries for 250 M keys), so a cold get
/// walked a shared chain; and a hot index whose buckets all overflowed, its overflow buckets
/// (never freed) taking 9 MiB of a 22 MiB budget from the hot log.
fn nearest_pow2(x: u64) -> u64 {
    let below = floor_pow2(x);
    if (x - below) * 2 >= below && below < 1 << 62 {
        below * 2
    } else {
        below
    }
}

const MAX_COMPACTION_THREADS: usize = 64;
const MAX_COMPACTION_FRAME_PAGES: usize = 64;

fn floor_pow2(x: u64) -> u64 {
    if x == 0 {
        1
    } else {
        1 << (63 - x.leading_zeros())
    }
}

impl F2Options {
    /// The options an open runs with, resolved in one step: the fields named in
    /// `EngineConfig::engine_options` override these, every field is checked, and each derived
    /// size is computed from the memory budget. `stored` is what an existing store's checkpoint
    /// fixed (`None` for a new store): its page size, segment size and chunk count override the
    /// configured ones and every page-derived size is computed for them. The stored layout may
    /// not need more memory than both the budget and this configuration's own layout: a
    /// checksum-valid but damaged field would otherwise allocate gigabytes at open.
    pub(crate) fn resolve(&self, config: &EngineConfig, stored: Option<&StoredLayout>) -> Result<Resolved> {
        let mut options = self.clone();
        options.apply_engine_options(config)?;
        options.validate(config)?;
        let configured = options.derive_sizes(config);
        let Some(layout) = stored else { return Ok(configured) };
        options.page_size_bytes = Some(layout.page_size_bytes);
        options.segment_bytes = layout.segment_bytes;
        // The checkpoint's own checks cover the stored fields; these are checked again with them
        // in place, so a layout the options could not have produced is refused either way.
        options.validate(config)?;
        let mut resolved = options.derive_sizes(config);
        resolved.chunk_count = layout.chunk_count;
        check_layout_memory(config, configured.layout_memory_bytes(), &resolved, layout)?;
        Ok(resolved)
    }

    /// Overrides the fields named in `EngineConfig::engine_options` (each by its field name;
    /// sizes take `64MiB`-style suffixes, `None` fields become explicit); refuses unknown names.
    fn apply_engine_options(&mut self, config: &EngineConfig) -> Result<()> {
        let mut r = EngineOptionReader::new("f2", &config.engine_options)?;
        // Memory shares stay within the budget; disk budgets and files within 1 PiB.
        let memory = 0..=config.memory_budget_bytes.max(4 << 10);
        let disk = 0..=1 << 50;
        let mut bytes = |field: &mut u64, name, range| -> Result<()> {
            *field = r.bytes(name, range)?.unwrap_or(*field);
            Ok(())
        };
        bytes(&mut self.segment_bytes, "segment_bytes", 4 << 10..=1 << 50)?;
        let mut optional_bytes = |field: &mut Option<u64>, name, range| -> Result<()> {
            *field = r.bytes(name, range)?.or(*field);
            Ok(())
        };
        optional_bytes(&mut self.page_size_bytes, "page_size_bytes", 4 << 10..=MAX_PAGE_BYTES)?;
        optional_bytes(&mut self.hot_index_bytes, "hot_index_bytes", memory.clone())?;
        optional_bytes(&mut self.hot_log_memory_bytes, "hot_log_memory_bytes", memory.clone())?;
        optional_bytes(&mut self.read_cache_bytes, "read_cache_bytes", memory.clone())?;
        optional_bytes(&mut self.cold_index_bytes, "cold_index_bytes", memory)?;
        optional_bytes(&mut self.hot_log_disk_budget_bytes, "hot_log_disk_budget_bytes", disk.clone())?;
        optional_bytes(&mut self.cold_log_disk_budget_bytes, "cold_log_disk_budget_bytes", disk.clone())?;
        optional_bytes(&mut self.checkpoint_wal_bytes, "checkpoint_wal_bytes", disk)?;
        let mut fraction = |field: &mut f64, name| -> Result<()> {
            *field = r.fraction(name)?.unwrap_or(*field);
            Ok(())
        };
        fraction(&mut self.mutable_fraction, "mutable_fraction")?;
        fraction(&mut self.compaction_trigger_fraction, "compaction_trigger_fraction")?;
        fraction(&mut self.compaction_fraction, "compaction_fraction")?;
        let mut count = |field: &mut usize, name, max: usize| -> Result<()> {
            *field = r.count(name, 1..=max as u64)?.map_or(*field, |n| n as usize);
            Ok(())
        };
        count(&mut self.compaction_threads, "compaction_threads", MAX_COMPACTION_THREADS)?;
        count(&mut self.compaction_frame_pages, "compaction_frame_pages", MAX_COMPACTION_FRAME_PAGES)?;
        let mut flag = |field: &mut bool, name| -> Result<()> {
            *field = r.flag(name)?.unwrap_or(*field);
            Ok(())
        };
        flag(&mut self.background_maintenance, "background_maintenance")?;
        flag(&mut self.single_log, "single_log")?;
        flag(&mut self.memory_split, "memory_split")?;
        r.finish()
    }

    /// The log page size for `config`: the configured one, else [`default_page_bytes`].
    pub fn page_bytes(&self, config: &EngineConfig) -> u64 {
        self.page_size_bytes.unwrap_or_else(|| default_page_bytes(config.memory_budget_bytes))
    }

    /// Refuses sizes, fractions and counts outside their ranges.
    fn validate(&self, config: &EngineConfig) -> Result<()> {
        let page = self.page_bytes(config);
        if page < 4096 || !page.is_power_of_two() || page > MAX_PAGE_BYTES {
            return Err(Error::invalid(format!(
                "f2 page_size_bytes {page} must be a power of two in 4 KiB..1 GiB"
            )));
        }
        if self.segment_bytes < page || !self.segment_bytes.is_multiple_of(page) {
            return Err(Error::invalid("f2 segment_bytes must be a positive multiple of page_size_bytes"));
        }
        let fractions = [self.mutable_fraction, self.compaction_trigger_fraction, self.compaction_fraction];
        if fractions.iter().any(|f| !(*f > 0.0 && *f <= 1.0)) {
            return Err(Error::invalid("f2 fractions must be in (0, 1]"));
        }
        if !(1..=MAX_COMPACTION_THREADS).contains(&self.compaction_threads) {
            return Err(Error::invalid(format!(
                "f2 compaction_threads {} must be in 1..={MAX_COMPACTION_THREADS}",
                self.compaction_threads
            )));
        }
        if !(1..=MAX_COMPACTION_FRAME_PAGES).contains(&self.compaction_frame_pages) {
            return Err(Error::invalid(format!(
                "f2 compaction_frame_pages {} must be in 1..={MAX_COMPACTION_FRAME_PAGES}",
                self.compaction_frame_pages
            )));
        }
        Ok(())
    }

    /// The budget split and every size derived from it (the fields are valid: [`Self::validate`]).
    fn derive_sizes(&self, config: &EngineConfig) -> Resolved {
        let page = self.page_bytes(config);
        let budget = config.memory_budget_bytes;
        let hot_index = self.hot_index_bytes.unwrap_or(budget / 6);
        let read_cache = self.read_cache_bytes.unwrap_or(budget / 6);
        let cold_index = self.cold_index_bytes.unwrap_or(budget / 48);
        let reserved = reserved_bytes(page, self.compaction_frame_pages);
        let shares = hot_index.saturating_add(read_cache).saturating_add(cold_index).saturating_add(reserved);
        let hot_log_share = self.hot_log_memory_bytes.unwrap_or_else(|| budget.saturating_sub(shares));
        let hot_budget =
            self.hot_log_disk_budget_bytes.unwrap_or(hot_log_share.saturating_mul(4)).max(4 * page);
        let released_padding_regions =
            (hot_budget / page + 1).min(hot_log_share / 32 / RELEASED_PADDING_REGION_BYTES).max(1);
        let hot_log = hot_log_share.saturating_sub(released_padding_regions * RELEASED_PADDING_REGION_BYTES);
        let hot_log_pages = (hot_log / page).max(2) as usize;
        let cache_page = read_cache_page_bytes(read_cache, page);
        let hot_log = hot_log_pages as u64 * page;
        let cold_trigger = match self.cold_log_disk_budget_bytes {
            Some(budget) => ColdTrigger::SizeBytes(
                (budget.max(2 * page) as f64 * self.compaction_trigger_fraction) as u64,
            ),
            None => ColdTrigger::SpaceAmplification { slack_bytes: COLD_SLACK_PAGES * page },
        };
        Resolved {
            page_size_bytes: page,
            segment_bytes: self.segment_bytes,
            hot_index_buckets: nearest_pow2((hot_index / 64).max(2)),
            hot_log_pages,
            released_padding_regions: usize::try_from(released_padding_regions).unwrap_or(usize::MAX),
            read_cache_pages: (read_cache / cache_page) as usize,
            read_cache_page_bytes: cache_page,
            chunk_count: nearest_pow2((cold_index / 8).clamp(1, 1 << 32)),
            mutable_fraction: self.mutable_fraction,
            hot_trigger_bytes: (hot_budget as f64 * self.compaction_trigger_fraction) as u64,
            hot_hard_bytes: hot_budget,
            cold_trigger,
            compaction_fraction: self.compaction_fraction,
            compaction_threads: self.compaction_threads,
            compaction_frame_pages: self.compaction_frame_pages,
            checkpoint_wal_bytes: self
                .checkpoint_wal_bytes
                .unwrap_or(default_checkpoint_wal_bytes(config))
                .max(4096),
            background_maintenance: self.background_maintenance,
            single_log: self.single_log,
            memory_split: self.memory_split,
            split_bytes: [hot_index, hot_log, read_cache, cold_index],
            reserved_bytes: reserved,
        }
    }
}

impl Resolved {
    /// Memory the layout fixes whatever the shares: the smallest hot log (2 pages), the pages and
    /// buffers compaction reserves, and the cold index's chunk table (8 bytes a chunk).
    pub fn layout_memory_bytes(&self) -> u64 {
        (2 * self.page_size_bytes)
            .saturating_add(self.reserved_bytes)
            .saturating_add(self.chunk_count.saturating_mul(8))
    }
}

/// Refuses a stored layout (`resolved` computed for it) that needs more memory than both the
/// budget and the configured layout (`configured_bytes`): `Corruption` of the checkpoint, whose
/// message names the budget that would open the store.
fn check_layout_memory(
    config: &EngineConfig,
    configured_bytes: u64,
    resolved: &Resolved,
    layout: &StoredLayout,
) -> Result<()> {
    let needed = resolved.layout_memory_bytes();
    if needed <= configured_bytes.max(config.memory_budget_bytes) {
        return Ok(());
    }
    Err(Error::corruption(
        checkpoint::FILE_NAME,
        layout.field_offset,
        format!(
            "its layout (page {} bytes, {} cold-index chunks) needs {needed} bytes of memory, more than \
             the memory budget of {} bytes: a damaged checkpoint, or a store created with a larger \
             budget or page size than this configuration's (reopen it with a budget of at least \
             {needed} bytes)",
            layout.page_size_bytes, layout.chunk_count, config.memory_budget_bytes
        ),
    ))
}

/// Without `checkpoint_wal_bytes`: a checkpoint per WAL segment set explicitly, else every
/// 64 MiB of log (the checkpoint writes the whole hot-index snapshot, so a segment sized to a
/// small budget would make them far more frequent).
fn default_checkpoint_wal_bytes(config: &EngineConfig) -> u64 {
    config.wal_segment_bytes.unwrap_or(strata_core::LARGEST_DEFAULT_WAL_SEGMENT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_options_set_fields_by_name_and_refuse_unknown_ones() {
        let named =
            |pairs: &[(&str, &str)]| EngineConfig::default().with_engine_options(pairs.iter().copied());
        let mut o = F2Options::default();
        let config =
            named(&[("read_cache_bytes", "8MiB"), ("compaction_threads", "2"), ("single_log", "true")]);
        o.apply_engine_options(&config).unwrap();
        assert_eq!(o.read_cache_bytes, Some(8 << 20));
        assert_eq!(o.compaction_threads, 2);
        assert!(o.single_log);
        assert_eq!(o.page_size_bytes, F2Options::default().page_size_bytes);
        let err = F2Options::default().apply_engine_options(&named(&[("read_cache", "8MiB")])).unwrap_err();
        assert!(err.to_string().contains("read_cache_bytes"), "{err}");
        for (name, value) in
            [("compaction_threads", "0"), ("hot_index_bytes", "1TiB"), ("page_size_bytes", "2GiB")]
        {
            let err = F2Options::default().apply_engine_options(&named(&[(name, value)])).unwrap_err();
            assert!(err.to_string().contains(name), "{name}={value}: {err}");
        }
    }

    /// An explicit cold budget is a fixed trigger; the default is the space-amplification
    /// trigger; the budget is accepted by name.
    #[test]
    fn cold_trigger_is_the_budget_when_set_and_space_amplification_by_default() {
        let config = EngineConfig::default();
        let page = F2Options::default().page_bytes(&config);
        let default_trigger = F2Options::default().resolve(&config, None).unwrap().cold_trigger;
        assert_eq!(default_trigger, ColdTrigger::SpaceAmplification { slack_bytes: COLD_SLACK_PAGES * page });
        let mut o = F2Options::default();
        let named = EngineConfig::default().with_engine_options([("cold_log_disk_budget_bytes", "10MiB")]);
        o.apply_engine_options(&named).unwrap();
        assert_eq!(o.cold_log_disk_budget_bytes, Some(10 << 20));
        let fixed = ((10u64 << 20) as f64 * o.compaction_trigger_fraction) as u64;
        assert_eq!(o.resolve(&config, None).unwrap().cold_trigger, ColdTrigger::SizeBytes(fixed));
        // A tiny budget is raised to two pages.
        let tiny = F2Options { cold_log_disk_budget_bytes: Some(1), ..F2Options::default() };
        let two_pages = ((2 * page) as f64 * tiny.compaction_trigger_fraction) as u64;
        assert_eq!(tiny.resolve(&config, None).unwrap().cold_trigger, ColdTrigger::SizeBytes(two_pages));
    }

    #[test]
    fn cold_trigger_thresholds() {
        let fixed = ColdTrigger::SizeBytes(100);
        assert!(!fixed.is_due(100, 0) && fixed.is_due(101, 1_000));
        let amplification = ColdTrigger::SpaceAmplification { slack_bytes: 10 };
        assert!(!amplification.is_due(2 * 50 + 10, 50) && amplification.is_due(2 * 50 + 11, 50));
        assert!(amplification.is_due(11, 0), "no estimate yet: due once over the slack");
        assert!(!amplification.is_due(u64::MAX, u64::MAX), "saturates instead of overflowing");
    }

    #[test]
    fn default_split_follows_the_paper() {
        let config = EngineConfig { memory_budget_bytes: 3 << 30, ..EngineConfig::default() };
        let r = F2Options::default().resolve(&config, None).unwrap();
        assert_eq!(r.split_bytes[0], 512 << 20);
        assert_eq!(r.split_bytes[3], 64 << 20);
        assert_eq!(r.chunk_count, 8 << 20);
        assert_eq!(r.hot_index_buckets, 8 << 20);
        assert_eq!(r.split_bytes[2], 512 << 20);
        // The paper's "remaining ≈1.75 GiB" for the hot log's in-memory region.
        assert!(r.split_bytes[1] > 1792 << 20 && r.split_bytes[1] < 2 << 30);
    }

    #[test]
    fn small_budgets_get_a_full_cold_index_and_a_read_cache_of_many_pages() {
        // 22 MiB: a 48th is 480 KB, 60 k chunks: 64 Ki of them (two cold keys per entry at
        // 2 M keys with the 32 Ki that rounding down gave).
        let config = EngineConfig { memory_budget_bytes: 22 << 20, ..EngineConfig::default() };
        let r = F2Options::default().resolve(&config, None).unwrap();
        assert_eq!(r.chunk_count, 64 << 10);
        assert_eq!(r.hot_index_buckets, 64 << 10, "3.7 MiB of 64-byte buckets: 60 k, rounded to 64 Ki");
        assert_eq!(r.read_cache_page_bytes, 32 << 10);
        assert_eq!(r.read_cache_pages, 117);
        assert_eq!((nearest_pow2(5), nearest_pow2(6), nearest_pow2(7), nearest_pow2(1)), (4, 8, 8, 1));
        // Pages from the budget: 256 KiB here, so six of them are not a third of the budget.
        assert_eq!(r.page_size_bytes, 256 << 10);
        let pages = [1 << 20, 9_646_899, 64 << 20, 3 << 30].map(default_page_bytes);
        assert_eq!(pages, [64 << 10, 128 << 10, 1 << 20, 1 << 20]);
        let set = F2Options { page_size_bytes: Some(4 << 10), ..F2Options::default() };
        assert_eq!(set.resolve(&config, None).unwrap().page_size_bytes, 4 << 10, "a set size wins");
        // Never above the log's page (a cached record must fit one), never under 4 KiB.
        assert_eq!(read_cache_page_bytes(1 << 40, 1 << 20), 1 << 20);
        assert_eq!(read_cache_page_bytes(10_000, 1 << 20), 4096);
    }

    #[test]
    fn bad_options_are_rejected() {
        let config = EngineConfig::default();
        let bad = F2Options { page_size_bytes: Some(1000), ..F2Options::default() };
        assert!(bad.resolve(&config, None).is_err());
        let bad = F2Options { compaction_fraction: 0.0, ..F2Options::default() };
        assert!(bad.resolve(&config, None).is_err());
        for (compaction_threads, compaction_frame_pages) in [(0, 4), (65, 4), (2, 0), (2, 65)] {
            let bad = F2Options { compaction_threads, compaction_frame_pages, ..F2Options::default() };
            assert!(
                bad.resolve(&config, None).is_err(),
                "{compaction_threads} threads, {compaction_frame_pages} frames"
            );
        }
        let one = F2Options { compaction_threads: 1, compaction_frame_pages: 1, ..F2Options::default() };
        assert_eq!(one.resolve(&config, None).unwrap().compaction_threads, 1);
    }

    /// A stored layout overrides the configured page size, segment size and chunk count (sizes
    /// derived from the page are computed for it); one needing more memory than both the budget
    /// and the configured layout is corruption of the checkpoint.
    #[test]
    fn a_stored_layout_overrides_the_configured_one_within_the_memory_bound() {
        let config = EngineConfig { memory_budget_bytes: 64 << 20, ..EngineConfig::default() };
        let options =
            F2Options { page_size_bytes: Some(8 << 10), segment_bytes: 64 << 10, ..F2Options::default() };
        let stored = StoredLayout {
            page_size_bytes: 4 << 10,
            segment_bytes: 32 << 10,
            chunk_count: 1 << 10,
            field_offset: 24,
        };
        let resolved = options.resolve(&config, Some(&stored)).unwrap();
        let mut expected =
            F2Options { page_size_bytes: Some(4 << 10), segment_bytes: 32 << 10, ..options.clone() }
                .resolve(&config, None)
                .unwrap();
        expected.chunk_count = 1 << 10;
        assert_eq!(resolved, expected);
        let huge = StoredLayout { chunk_count: 1 << 32, ..stored };
        let err = options.resolve(&config, Some(&huge)).unwrap_err();
        assert!(
            matches!(&err, Error::Corruption { file, offset: 24, .. } if file.as_str() == checkpoint::FILE_NAME),
            "{err:?}"
        );
    }
}
