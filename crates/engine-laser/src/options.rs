//! The engine's knobs (`EngineConfig::engine_options`, read with `EngineOptionReader`).

use strata_core::{EngineConfig, EngineOptionReader, Error, Result, Schema};

use crate::layout::{Layout, MAX_COLUMNS};

pub const ENGINE_NAME: &str = "laser";

/// Knobs `Db::set_option` may change while the store is open.
pub const RUNTIME_OPTIONS: &[&str] = &["block_cache_bytes", "layout"];

/// The engine's knobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaserOptions {
    /// The table's columns (`name:width,…`, or `NxW` for N columns `c0…` of W bytes); `None`:
    /// a key-value store. Fixed at creation (the manifest keeps it).
    pub schema: Option<Schema>,
    /// Column groups per level (`layout::Layout::parse`), or `None`: `auto` (the default), the
    /// design advisor's choice from the profiled workload, starting from rows at every level.
    /// The manifest keeps the layout compactions write (also one set at run time); levels take
    /// it as they compact.
    pub layout: Option<Layout>,
    /// T: each level holds this many times the one above. Default 10 (RocksDB's): at 2, the
    /// paper's for its HTAP runs, a 300k-record store has twice the levels and a short scan
    /// merges up to ten sources (YCSB E at 0.54× of T = 10; docs/benchmarks.md).
    pub size_ratio: u64,
    /// Bytes the active MemTable gathers before it is finalized and flushed to level 0;
    /// default an eighth of the budget, 256 KiB to 64 MiB.
    pub memtable_bytes: u64,
    /// Level 0 runs that start a compaction into level 1; writers wait once three times as
    /// many are waiting (RocksDB's slowdown and stop triggers, folded into one).
    pub level0_runs: u64,
    /// Memory for data blocks, fixed; `None`: what the budget leaves after the MemTables.
    pub block_cache_bytes: Option<u64>,
    /// A file the profiled workload is appended to as a trace `strata advise --trace` reads:
    /// each profile window the worker takes (`retune_layout`), and what is left at close. Not
    /// part of the store (never read by it); `None`: no trace.
    pub trace_file: Option<std::path::PathBuf>,
}

impl LaserOptions {
    /// The knobs given in `config`, over the defaults; refuses unknown names and bad values.
    pub fn from_config(config: &EngineConfig) -> Result<LaserOptions> {
        let mut r = EngineOptionReader::new(ENGINE_NAME, &config.engine_options)?;
        let schema = match r.text("schema") {
            Some(text) => Some(parse_schema(text).map_err(|e| r.invalid("schema", text, &e))?),
            None => None,
        };
        let columns = schema.as_ref().map_or(1, |s| s.columns().len());
        let layout = match r.text("layout") {
            Some("auto") | None => None,
            Some(text) => Some(Layout::parse(text, columns)?),
        };
        let size_ratio = r.count("size_ratio", 2..=64)?.unwrap_or(10);
        let memtable_bytes = r
            .bytes("memtable_bytes", (4 << 10)..=(4 << 30))?
            .unwrap_or_else(|| default_memtable_bytes(config));
        let level0_runs = r.count("level0_runs", 1..=64)?.unwrap_or(4);
        let block_cache_bytes = r.bytes("block_cache_bytes", 0..=config.memory_budget_bytes)?;
        let trace_file = r.text("trace_file").map(std::path::PathBuf::from);
        r.finish()?;
        Ok(LaserOptions {
            schema,
            layout,
            size_ratio,
            memtable_bytes,
            level0_runs,
            block_cache_bytes,
            trace_file,
        })
    }
}

fn default_memtable_bytes(config: &EngineConfig) -> u64 {
    (config.memory_budget_bytes / 8).clamp(256 << 10, 64 << 20)
}

/// `name:width,name:width,…` or `NxW` (N columns named `c0`, `c1`, … of W bytes each).
fn parse_schema(text: &str) -> std::result::Result<Schema, String> {
    let expected = "name:width,… (like id:8,price:4) or NxW (like 30x4)";
    let columns: Vec<(String, usize)> = match text.split_once('x') {
        Some((n, w)) if !text.contains(':') => {
            let (n, w) = (n.trim().parse::<usize>(), w.trim().parse::<usize>());
            let (Ok(n), Ok(w)) = (n, w) else { return Err(expected.into()) };
            (0..n).map(|i| (format!("c{i}"), w)).collect()
        }
        _ => text
            .split(',')
            .map(|part| {
                let (name, width) = part.split_once(':').ok_or(expected)?;
                let width = width.trim().parse::<usize>().map_err(|_| expected)?;
                Ok((name.trim().to_string(), width))
            })
            .collect::<std::result::Result<_, &str>>()?,
    };
    if columns.len() > MAX_COLUMNS {
        return Err(format!("at most {MAX_COLUMNS} columns"));
    }
    if columns.iter().any(|(name, _)| name.is_empty() || name.len() > 255) {
        return Err("column names of 1 to 255 bytes".into());
    }
    if columns.iter().any(|(_, w)| *w > 1 << 20) {
        return Err("columns of at most 1 MiB".into());
    }
    Schema::new(columns).map_err(|e: Error| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(pairs: &[(&str, &str)]) -> Result<LaserOptions> {
        LaserOptions::from_config(&EngineConfig::default().with_engine_options(pairs.iter().copied()))
    }

    #[test]
    fn schemas_and_layouts_parse_and_bad_ones_are_refused() {
        let o = options(&[("schema", "30x4"), ("layout", "row/0-14|15-29")]).unwrap();
        let schema = o.schema.unwrap();
        assert_eq!(
            (schema.columns().len(), schema.row_bytes(), schema.columns()[29].name.as_str()),
            (30, 120, "c29")
        );
        assert_eq!(options(&[("schema", "30x4"), ("layout", "auto")]).unwrap().layout, None);
        let o = options(&[("schema", "id:8, price:4")]).unwrap();
        assert_eq!(o.schema.unwrap().column_index("price"), Some(1));
        assert_eq!(options(&[]).unwrap().schema, None);
        for bad in [
            [("schema", "id:x")],
            [("schema", "3x")],
            [("schema", "a:0")],
            [("layout", "0|1")],
            [("size_ratio", "1")],
        ] {
            assert!(matches!(options(&bad), Err(Error::InvalidArgument(_))), "{bad:?}");
        }
    }
}
