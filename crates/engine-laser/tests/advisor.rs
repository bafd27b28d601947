//! `layout=auto`: the engine profiles what each level serves and moves its layout to the
//! advisor's as levels compact.

use std::sync::Arc;

use engine_laser::LaserEngine;
use strata_core::{Direction, Durability, Engine, EngineConfig, KeyRange, Maintenance, Schema};
use strata_io::MemStorage;

fn config(layout: &str) -> EngineConfig {
    EngineConfig {
        wal_segment_bytes: Some(64 << 10),
        memory_budget_bytes: 1 << 20,
        ..EngineConfig::default()
    }
    .with_engine_options([
        ("schema", "12x4"),
        ("layout", layout),
        ("memtable_bytes", "16KiB"),
        ("level0_runs", "2"),
        ("size_ratio", "2"),
    ])
}

fn key(i: u64) -> Vec<u8> {
    format!("k{:08}", i.wrapping_mul(0x9E37_79B9) % 1_000_003).into_bytes()
}

fn counter(engine: &LaserEngine, name: &str) -> u64 {
    engine.stats().counter(name).unwrap_or(0)
}

/// Narrow scans of two columns while rows keep arriving: the advisor splits the levels the
/// scans read into groups, so the scanned columns sit apart from the rest.
#[test]
fn narrow_scans_move_an_auto_layout_off_rows() {
    let engine = LaserEngine::open(Arc::new(MemStorage::new()), &config("auto")).unwrap();
    let schema = Schema::new((0..12).map(|i| (format!("c{i}"), 4))).unwrap();
    let table = engine.open_table(&schema).unwrap().unwrap();
    let narrow = schema.projection(&["c10", "c11"]).unwrap();
    let row = |i: u64| (0..12u32).flat_map(|c| (i as u32 ^ c).to_le_bytes()).collect::<Vec<u8>>();
    for i in 0..60_000u64 {
        table.insert(&key(i), &row(i), Durability::None).unwrap();
        if i % 4 == 0 {
            let start =
                KeyRange { start: std::ops::Bound::Included(key(i)), end: std::ops::Bound::Unbounded };
            let rows = table.scan(start, Direction::Forward, &narrow).unwrap().take(50).count();
            assert!(rows > 0);
        }
    }
    assert!(counter(&engine, "layout_changes") >= 1, "the advisor never moved the layout");
    let split = (1..=counter(&engine, "levels")).any(|l| counter(&engine, &format!("level{l}_groups")) > 1);
    assert!(split, "no level took the advisor's groups: {:?}", engine.stats().engine_counters);
    for i in (0..60_000u64).step_by(997) {
        let got = table.get(&key(i), &schema.all_columns()).unwrap();
        assert_eq!(got, Some(row(i)), "row {i} after the layout moved");
    }
}

/// A fixed layout stays as it was given, whatever the workload.
#[test]
fn a_fixed_layout_never_moves() {
    let engine = LaserEngine::open(Arc::new(MemStorage::new()), &config("row")).unwrap();
    let schema = Schema::new((0..12).map(|i| (format!("c{i}"), 4))).unwrap();
    let table = engine.open_table(&schema).unwrap().unwrap();
    let narrow = schema.projection(&["c10", "c11"]).unwrap();
    for i in 0..30_000u64 {
        table.insert(&key(i), &[7u8; 48], Durability::None).unwrap();
        if i % 4 == 0 {
            let _ = table.scan(KeyRange::all(), Direction::Forward, &narrow).unwrap().take(20).count();
        }
    }
    assert_eq!(counter(&engine, "layout_changes"), 0);
    let levels = counter(&engine, "levels");
    assert!(levels >= 2, "the test should reach deeper levels");
    assert!((1..=levels).all(|l| counter(&engine, &format!("level{l}_groups")) == 1));
}

/// A layout reaches the levels no compaction writes into: with no inserts there are no
/// compactions, yet once a window of narrow scans shows the new layout pays, the worker
/// regroups every level in place, and every row reads back whole. Without `relayout.rs` the
/// levels keep their rows for as long as nothing is inserted.
#[test]
fn a_new_layout_reaches_levels_that_no_compaction_writes() {
    let engine = LaserEngine::open(Arc::new(MemStorage::new()), &config("row")).unwrap();
    let schema = Schema::new((0..12).map(|i| (format!("c{i}"), 4))).unwrap();
    let table = engine.open_table(&schema).unwrap().unwrap();
    let row = |i: u64| (0..12u32).flat_map(|c| (i as u32 ^ c).to_le_bytes()).collect::<Vec<u8>>();
    for i in 0..30_000u64 {
        table.insert(&key(i), &row(i), Durability::None).unwrap();
    }
    engine.run(strata_core::MaintenanceTask::Compact).unwrap();
    let levels = counter(&engine, "levels");
    assert!(levels >= 2, "the test should reach deeper levels");
    engine.set_option("layout", "0-1|2-11").unwrap();
    let narrow = schema.projection(&["c0", "c1"]).unwrap();
    let regrouped = |engine: &LaserEngine| {
        (1..=levels).all(|l| {
            counter(engine, &format!("level{l}_groups")) == 2
                || counter(engine, &format!("level{l}_bytes")) == 0
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut scans = 0u64;
    while !regrouped(&engine) {
        assert!(
            std::time::Instant::now() < deadline,
            "levels not regrouped: {:?}",
            engine.stats().engine_counters
        );
        let start =
            KeyRange { start: std::ops::Bound::Included(key(scans)), end: std::ops::Bound::Unbounded };
        let _ = table.scan(start, Direction::Forward, &narrow).unwrap().take(20).count();
        scans += 1;
    }
    assert!(counter(&engine, "levels_regrouped") >= 1, "{:?}", engine.stats().engine_counters);
    for i in (0..30_000u64).step_by(211) {
        assert_eq!(
            table.get(&key(i), &schema.all_columns()).unwrap(),
            Some(row(i)),
            "row {i} after regrouping"
        );
    }
}

/// The workload shifts (LASER §7.3, Fig 10): narrow scans of the last two columns, then of the
/// first two. `auto` follows: after the shift the layout gives the new columns a group of their
/// own, and every row reads back whole.
#[test]
fn an_auto_layout_follows_a_shift_in_the_scanned_columns() {
    let engine = LaserEngine::open(Arc::new(MemStorage::new()), &config("auto")).unwrap();
    let schema = Schema::new((0..12).map(|i| (format!("c{i}"), 4))).unwrap();
    let table = engine.open_table(&schema).unwrap().unwrap();
    let row = |i: u64| (0..12u32).flat_map(|c| (i as u32 ^ c).to_le_bytes()).collect::<Vec<u8>>();
    let mut inserted = 0u64;
    let mut phase = |columns: [&str; 2], rows: u64| {
        let narrow = schema.projection(&columns).unwrap();
        for _ in 0..rows {
            table.insert(&key(inserted), &row(inserted), Durability::None).unwrap();
            if inserted.is_multiple_of(4) {
                let start = KeyRange {
                    start: std::ops::Bound::Included(key(inserted)),
                    end: std::ops::Bound::Unbounded,
                };
                let _ = table.scan(start, Direction::Forward, &narrow).unwrap().take(50).count();
            }
            inserted += 1;
        }
    };
    phase(["c10", "c11"], 60_000);
    let before = engine.layout();
    let changes_before = counter(&engine, "layout_changes");
    // The deepest levels hold most rows, so most of what a scan reads.
    assert!(
        before.groups(99).contains(&vec![10, 11]),
        "the first workload's columns apart: {}",
        before.to_text()
    );
    phase(["c0", "c1"], 60_000);
    let after = engine.layout();
    assert!(counter(&engine, "layout_changes") > changes_before, "the layout never moved after the shift");
    assert!(after.groups(99).contains(&vec![0, 1]), "the new workload's columns apart: {}", after.to_text());
    for i in (0..inserted).step_by(1_009) {
        assert_eq!(
            table.get(&key(i), &schema.all_columns()).unwrap(),
            Some(row(i)),
            "row {i} after the shift"
        );
    }
}

/// `trace_file`: the profiled workload is written as a trace `strata advise --trace` reads —
/// here a fixed layout's whole run, at close — and the advisor splits off the scanned columns.
#[test]
fn the_profiled_workload_is_written_as_a_trace_the_advisor_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("workload.trace");
    let mut config = config("row");
    config.engine_options.push(("trace_file".into(), path.display().to_string()));
    let engine = LaserEngine::open(Arc::new(MemStorage::new()), &config).unwrap();
    let schema = Schema::new((0..12).map(|i| (format!("c{i}"), 4))).unwrap();
    let table = engine.open_table(&schema).unwrap().unwrap();
    let narrow = schema.projection(&["c10", "c11"]).unwrap();
    let row = |i: u64| (0..12u32).flat_map(|c| (i as u32 ^ c).to_le_bytes()).collect::<Vec<u8>>();
    for i in 0..20_000u64 {
        table.insert(&key(i), &row(i), Durability::None).unwrap();
    }
    for _ in 0..20 {
        assert!(table.scan(KeyRange::all(), Direction::Forward, &narrow).unwrap().count() > 10_000);
    }
    drop(table);
    engine.close().unwrap();
    let trace = engine_laser::advisor::Trace::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(trace.workload.inserts, 20_000.0);
    let scans: Vec<&engine_laser::advisor::Access> =
        trace.workload.levels.iter().flat_map(|l| &l.scans).collect();
    assert!(!scans.is_empty() && scans.iter().all(|a| a.columns == [10, 11]), "{scans:?}");
    let advice = engine_laser::advisor::advise(&trace.params, &trace.workload, trace.levels);
    let deepest = advice.layout.groups(trace.levels);
    assert!(deepest.iter().any(|g| g.as_slice() == [10, 11]), "the advisor kept {deepest:?}");
}
