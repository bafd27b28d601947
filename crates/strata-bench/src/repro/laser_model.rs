//! `strata repro laser`, part 2: the cost model checked against measured I/O (LASER §7.1,
//! Fig 7). One store per equi-width layout (column groups of 1, 3, 6, 15 and 30 columns at
//! every level below 0; T = 2), loaded and compacted, with no block cache so every block a
//! read needs is a device read. Then point reads of existing keys and scans of a fixed number
//! of rows, each with projections of 1, 3, 10 and 30 columns: the device's 4 KiB blocks per
//! operation beside what the model predicts (equation 5: the groups a point read needs at the
//! level that holds the key; equation 6: `s·E^G/(c·B)` per scan), by `engine_laser::advisor`.

use std::ops::Bound;

use engine_laser::advisor::{level_cost, Access, LevelWorkload, ModelParams};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata::{Db, Direction, EngineKind, KeyRange, MaintenanceTask, Options};

use super::laser::progress;
use super::render::print_rows;
use super::ReproArgs;
use crate::htap::workload::{self, COLUMNS, ROW_BYTES};
use crate::htap::{schema, HtapStore, StrataTable};

/// Column-group sizes of the paper's narrow-table designs.
const GROUP_SIZES: [usize; 5] = [30, 15, 6, 3, 1];
/// Projection widths (the first k columns).
const PROJECTIONS: [usize; 4] = [1, 3, 10, 30];
const SCAN_ROWS: u64 = 2_000;

/// The layout text of groups of `size` consecutive columns at every level.
fn equi_width(size: usize) -> String {
    (0..COLUMNS)
        .step_by(size)
        .map(|c| format!("{c}-{}", (c + size).min(COLUMNS) - 1))
        .collect::<Vec<_>>()
        .join("|")
}

pub(super) fn validate(args: &ReproArgs, parent: &std::path::Path) -> Result<(), String> {
    let rows_loaded: u64 = if args.quick { 200_000 } else { 2_000_000 };
    let (reads, scans) = if args.quick { (2_000u64, 40u64) } else { (10_000, 200) };
    println!();
    println!("cost model against measured I/O (§7.1, Fig 7): {rows_loaded} rows, T = 2, no block cache, direct I/O;");
    println!("  device 4 KiB blocks per operation, measured / predicted by the model (B = rows of a whole row per block)");
    let b = 4096.0 / (8.0 + ROW_BYTES as f64);
    let params = ModelParams { columns: COLUMNS, size_ratio: 2.0, rows_per_block: b };
    let mut rows = Vec::new();
    for size in GROUP_SIZES {
        progress(args, &format!("layout of {size}-column groups"));
        let measured = measure(parent, size, rows_loaded, reads, scans)?;
        let groups: Vec<Vec<u16>> = (0..COLUMNS)
            .step_by(size)
            .map(|c| (c as u16..(c + size).min(COLUMNS) as u16).collect())
            .collect();
        let mut row = vec![format!("{size}")];
        for (k, (read_blocks, scan_blocks)) in PROJECTIONS.iter().zip(&measured) {
            let columns: Vec<u16> = (0..*k as u16).collect();
            let read = LevelWorkload {
                reads: vec![Access { columns: columns.clone(), count: 1.0, entries: 1.0 }],
                ..Default::default()
            };
            let scan = LevelWorkload {
                scans: vec![Access { columns, count: 1.0, entries: SCAN_ROWS as f64 }],
                ..Default::default()
            };
            let predicted_read = level_cost(&params, 0.0, &read, &groups);
            let predicted_scan = level_cost(&params, 0.0, &scan, &groups);
            row.push(format!("{read_blocks:.2} / {predicted_read:.0}"));
            row.push(format!("{scan_blocks:.1} / {predicted_scan:.1}"));
        }
        rows.push(row);
    }
    let mut header = vec!["cg size".to_string()];
    for k in PROJECTIONS {
        header.push(format!("read {k} col"));
        header.push(format!("scan {k} col"));
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    print_rows(&header, &rows);
    println!(
        "  reads: blocks of the groups the projection needs at the key's level (filters keep the other levels unread);"
    );
    println!("  scans: {SCAN_ROWS} rows, s·E^G/(c·B) with E^G the needed groups' widths, each with its key");
    Ok(())
}

/// Per projection: device blocks per point read and per scan on a store of `size`-column groups.
fn measure(
    parent: &std::path::Path,
    size: usize,
    rows: u64,
    reads: u64,
    scans: u64,
) -> Result<Vec<(f64, f64)>, String> {
    let dir = tempfile::Builder::new()
        .prefix("strata-repro-laser-model-")
        .tempdir_in(parent)
        .map_err(|e| format!("cannot create a directory under {}: {e}", parent.display()))?;
    let layout = equi_width(size);
    let options = Options::new(EngineKind::Laser)
        .memory_budget_bytes(64 << 20)
        .direct_io(true)
        .engine_option("schema", "30x4")
        .engine_option("size_ratio", "2")
        .engine_option("layout", layout.as_str())
        .engine_option("block_cache_bytes", "0");
    let fail = |e: &dyn std::fmt::Display| format!("laser ({size}-column groups): {e}");
    let db = Db::open(dir.path(), options).map_err(|e| fail(&e))?;
    let store = StrataTable::new(&db).map_err(|e| fail(&e))?;
    store
        .load(&mut (0..rows).map(|i| (workload::key(i).to_vec(), workload::row(i))))
        .map_err(|e| fail(&e))?;
    db.maintain(MaintenanceTask::Compact).map_err(|e| fail(&e))?;
    let table = db.table(schema()).map_err(|e| fail(&e))?;
    let names: Vec<String> = (0..COLUMNS).map(|c| format!("c{c}")).collect();
    let mut rng = SmallRng::seed_from_u64(size as u64);
    let device_bytes = || db.stats().map(|s| s.io.bytes_read).map_err(|e| fail(&e));
    let mut out = Vec::new();
    for k in PROJECTIONS {
        let picked: Vec<&str> = names[..k].iter().map(String::as_str).collect();
        let projection = table.projection(&picked).map_err(|e| fail(&e))?;
        let before = device_bytes()?;
        for _ in 0..reads {
            let key = workload::key(rng.gen_range(0..rows));
            table
                .get(key, &projection)
                .map_err(|e| fail(&e))?
                .ok_or_else(|| fail(&"a loaded row is missing"))?;
        }
        let read_blocks = (device_bytes()? - before) as f64 / 4096.0 / reads as f64;
        let before = device_bytes()?;
        for _ in 0..scans {
            let start = KeyRange {
                start: Bound::Included(workload::key(rng.gen_range(0..rows)).to_vec()),
                end: Bound::Unbounded,
            };
            let iter = table.scan_with(start, Direction::Forward, &projection).map_err(|e| fail(&e))?;
            for item in iter.take(SCAN_ROWS as usize) {
                item.map_err(|e| fail(&e))?;
            }
        }
        let scan_blocks = (device_bytes()? - before) as f64 / 4096.0 / scans as f64;
        out.push((read_blocks, scan_blocks));
    }
    drop(table);
    drop(store);
    db.close().map_err(|e| fail(&e))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equi_width_layouts_cover_the_columns() {
        assert_eq!(equi_width(30), "0-29");
        assert_eq!(equi_width(15), "0-14|15-29");
        assert!(engine_laser::Layout::parse(&equi_width(1), COLUMNS).is_ok());
        assert!(engine_laser::Layout::parse(&equi_width(6), COLUMNS).is_ok());
    }
}
