//! The engine's knobs (`EngineConfig::engine_options`, read with `EngineOptionReader`).

use strata_core::{AutoOr, EngineConfig, EngineOptionReader, Result};

use crate::tree::TreeConfig;

pub const ENGINE_NAME: &str = "turtle";

/// Knobs `Db::set_option` may change while the store is open.
pub const RUNTIME_OPTIONS: &[&str] = &["checkpoint_distance", "block_cache_bytes", "settle"];

/// The checkpoint distance's range: a MemTable of at least 4 KiB (tests apply tables within a few
/// hundred writes), at most 16 GiB.
pub const CHECKPOINT_DISTANCE_RANGE: std::ops::RangeInclusive<u64> = (4 << 10)..=(16 << 30);

/// The engine's knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurtleOptions {
    /// χ: bytes the active MemTable gathers before it is finalized and applied to the tree,
    /// followed by a checkpoint (the paper's checkpoint distance). Changeable at run time.
    /// `Auto` (the default): chosen from the workload's write share (`crate::distance`).
    pub checkpoint_distance: AutoOr<u64>,
    /// The tree's shape (`leaf_bytes`, `max_pivots`); fixed by the checkpoint once written.
    pub tree: TreeConfig,
    /// Memory for data blocks of the tree's runs (`strata_kit::sorted_run::BlockCache`), fixed
    /// (also at run time); `None`: what the budget leaves after the MemTables, room for the
    /// active one to fill, and the tree's indexes and filters, re-derived as they change.
    pub block_cache_bytes: Option<u64>,
    /// When the worker settles the tree's buffers into its leaves. Changeable at run time.
    pub settle: Settle,
}

/// When the worker settles the tree (`Tree::settle_step`: buffers flushed into the leaves, so
/// reads meet few buffered runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settle {
    /// While scans are many and writes few, as far as the write share makes it worth
    /// (`distance::settle_fraction`).
    Auto,
    /// After every table it applies, to the least fraction (a store that is mostly read).
    Always,
    /// Never (the buffers flush only as the paper's bounds require).
    Off,
}

impl Settle {
    /// The option's words, in `Settle::ALL`'s order.
    pub const NAMES: [&'static str; 3] = ["auto", "always", "off"];
    const ALL: [Settle; 3] = [Settle::Auto, Settle::Always, Settle::Off];

    pub fn from_name(name: &str) -> Option<Settle> {
        Settle::NAMES.iter().position(|n| *n == name).map(|i| Settle::ALL[i])
    }

    pub fn to_byte(self) -> u8 {
        Settle::ALL.iter().position(|s| *s == self).unwrap_or(0) as u8
    }

    pub fn from_byte(byte: u8) -> Settle {
        Settle::ALL.get(usize::from(byte)).copied().unwrap_or(Settle::Auto)
    }
}

impl TurtleOptions {
    /// The knobs given in `config`, over the defaults; refuses unknown names and bad values.
    pub fn from_config(config: &EngineConfig) -> Result<TurtleOptions> {
        let mut r = EngineOptionReader::new(ENGINE_NAME, &config.engine_options)?;
        let checkpoint_distance =
            r.bytes_or_auto("checkpoint_distance", CHECKPOINT_DISTANCE_RANGE)?.unwrap_or(AutoOr::Auto);
        let mut tree = TreeConfig::default();
        if let Some(bytes) = r.bytes("leaf_bytes", 512..=(64 << 20))? {
            tree.leaf_bytes = bytes;
        }
        if let Some(n) = r.count("max_pivots", 2..=64)? {
            tree.max_pivots = n as usize;
        }
        let block_cache_bytes = r.bytes("block_cache_bytes", 0..=config.memory_budget_bytes)?;
        let settle = r.choice("settle", &Settle::NAMES)?.and_then(Settle::from_name).unwrap_or(Settle::Auto);
        r.finish()?;
        Ok(TurtleOptions { checkpoint_distance, tree, block_cache_bytes, settle })
    }

    /// χ at open: the fixed one, or `auto`'s largest (a store is usually opened to be written).
    pub fn initial_distance_bytes(&self, memory_budget_bytes: u64) -> u64 {
        match self.checkpoint_distance {
            AutoOr::Fixed(bytes) => bytes,
            AutoOr::Auto => crate::distance::distance_bounds(memory_budget_bytes).1,
        }
    }
}
