//! The engine contract as the facade exposes it: capabilities reported by each engine, runtime
//! options, maintenance on demand, and columnar tables through the row-encoded fallback.

use std::sync::Arc;

use strata::storage::MemStorage;
use strata::{Db, Direction, EngineKind, Error, KeyRange, MaintenanceTask, Options, Schema};

const AVAILABLE: [EngineKind; 6] = [
    EngineKind::Memory,
    EngineKind::Flex,
    EngineKind::F2,
    EngineKind::Treeline,
    EngineKind::Turtle,
    EngineKind::Laser,
];

fn open(kind: EngineKind) -> Db {
    Db::open("unused", Options::new(kind).storage(Arc::new(MemStorage::new()))).unwrap()
}

#[test]
fn each_engine_reports_its_own_capabilities() {
    for kind in AVAILABLE {
        let db = open(kind);
        let caps = db.capabilities();
        assert_eq!(caps.ordered, kind != EngineKind::F2, "{kind}");
        assert!(caps.prefix_consistent_recovery, "{kind}: every engine today recovers a prefix of its log");
        assert!(!caps.columnar, "{kind}: a store made with no schema keeps no columns of its own");
        if !caps.ordered {
            assert!(matches!(db.iter(), Err(Error::Unsupported(_))), "{kind}");
        }
    }
}

#[test]
fn unknown_runtime_options_and_tasks_are_refused_by_name() {
    for kind in AVAILABLE {
        let db = open(kind);
        let err = db.set_option("no_such_knob", "1").unwrap_err();
        assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("no_such_knob")), "{kind}: {err}");
        let tasks = db.capabilities().maintenance;
        for task in MaintenanceTask::ALL.into_iter().filter(|t| !tasks.contains(t)) {
            let err = db.maintain(task).unwrap_err();
            assert!(matches!(&err, Error::Unsupported(m) if m.contains(task.name())), "{kind}: {err}");
        }
    }
}

#[test]
fn every_declared_maintenance_task_runs_and_keeps_the_data() {
    for kind in AVAILABLE {
        let db = open(kind);
        for i in 0..500u32 {
            db.put(format!("k{i:04}"), i.to_le_bytes()).unwrap();
        }
        db.delete("k0007").unwrap();
        for &task in db.capabilities().maintenance {
            db.maintain(task).unwrap_or_else(|e| panic!("{kind} {}: {e}", task.name()));
        }
        assert_eq!(db.get("k0499").unwrap(), Some(499u32.to_le_bytes().to_vec()), "{kind}");
        assert_eq!(db.get("k0007").unwrap(), None, "{kind}");
    }
}

#[test]
fn memory_checkpoint_writes_a_snapshot() {
    let db = open(EngineKind::Memory);
    db.put("a", "1").unwrap();
    let before = db.stats().unwrap().counter("snapshots_written").unwrap();
    db.maintain(MaintenanceTask::Checkpoint).unwrap();
    assert_eq!(db.stats().unwrap().counter("snapshots_written"), Some(before + 1));
}

fn orders_schema() -> Schema {
    Schema::new([("qty", 4), ("price", 8), ("flag", 1)]).unwrap()
}

fn row(qty: u32, price: u64, flag: u8) -> Vec<u8> {
    let mut r = qty.to_le_bytes().to_vec();
    r.extend_from_slice(&price.to_le_bytes());
    r.push(flag);
    r
}

#[test]
fn columnar_tables_run_through_the_row_encoded_fallback() {
    for kind in [EngineKind::Memory, EngineKind::Flex] {
        columnar_table_operations(&open(kind), kind);
    }
}

#[cfg(feature = "laser")]
#[test]
fn columnar_tables_run_on_lasers_own_columns() {
    let options = Options::new(EngineKind::Laser)
        .storage(Arc::new(MemStorage::new()))
        .engine_option("schema", "qty:4,price:8,flag:1")
        .engine_option("layout", "row/column");
    let db = Db::open("unused", options).unwrap();
    assert!(db.capabilities().columnar);
    columnar_table_operations(&db, EngineKind::Laser);
}

/// Inserts, an update of two columns, projected reads, a scan and scans into column vectors.
fn columnar_table_operations(db: &Db, kind: EngineKind) {
    let table = db.table(orders_schema()).unwrap();
    for i in 0..100u32 {
        table.insert(format!("o{i:03}"), &row(i, u64::from(i) * 10, 0)).unwrap();
    }
    assert!(table.update("o042", &[("price", &7u64.to_le_bytes()), ("flag", &[1])]).unwrap());
    assert!(!table.update("absent", &[("flag", &[1])]).unwrap(), "{kind}: no row, nothing written");
    assert_eq!(db.get("absent").unwrap(), None, "{kind}");

    let flag_price = table.projection(&["flag", "price"]).unwrap();
    let mut expected = vec![1u8];
    expected.extend_from_slice(&7u64.to_le_bytes());
    assert_eq!(table.get("o042", &flag_price).unwrap(), Some(expected), "{kind}");
    assert_eq!(
        table.get("o042", &table.projection(&["qty"]).unwrap()).unwrap(),
        Some(42u32.to_le_bytes().to_vec())
    );

    let qty = table.projection(&["qty"]).unwrap();
    let scanned: Vec<(Vec<u8>, Vec<u8>)> =
        table.scan(b"o010".as_slice()..b"o013".as_slice(), &qty).unwrap().map(Result::unwrap).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> =
        (10u32..13).map(|i| (format!("o{i:03}").into_bytes(), i.to_le_bytes().to_vec())).collect();
    assert_eq!(scanned, want, "{kind}");

    // Column vectors: the same rows, a column at a time, in batches of the size asked.
    let price_qty = table.projection(&["price", "qty"]).unwrap();
    let batches: Vec<strata::ColumnBatch> = table
        .scan_batches_with(KeyRange::all(), Direction::Reverse, &price_qty, 30)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(batches.iter().map(|b| b.len()).collect::<Vec<_>>(), vec![30, 30, 30, 10], "{kind}");
    let prices: Vec<u64> = batches.iter().flat_map(|b| b.column_as::<u64>(0).unwrap()).collect();
    let want: Vec<u64> = (0..100u64).rev().map(|i| if i == 42 { 7 } else { i * 10 }).collect();
    assert_eq!(prices, want, "{kind}");
    assert_eq!(batches[3].key(9), b"o000", "{kind}");
    assert!(matches!(batches[0].column_as::<u32>(0), Err(Error::InvalidArgument(_))), "{kind}");
}

#[test]
fn columnar_bad_rows_columns_and_foreign_values_are_clear_errors() {
    let db = open(EngineKind::Memory);
    let table = db.table(orders_schema()).unwrap();
    assert!(matches!(table.insert("o1", &[0u8; 5]), Err(Error::InvalidArgument(_))));
    table.insert("o1", &row(1, 2, 3)).unwrap();
    assert!(matches!(table.update("o1", &[("price", &[0u8; 4])]), Err(Error::InvalidArgument(_))));
    assert!(matches!(table.update("o1", &[("nope", &[0u8; 4])]), Err(Error::InvalidArgument(_))));
    db.put("plain", "not a row").unwrap();
    let all = table.schema().all_columns();
    let err = table.get("plain", &all).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("not a row")), "{err}");
    assert!(matches!(table.update("plain", &[("flag", &[1])]), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get("plain").unwrap(), Some(b"not a row".to_vec()), "a refused update leaves the value");
    let too_wide = Schema::new([("blob", db.limits().max_value_bytes + 1)]).unwrap();
    assert!(matches!(db.table(too_wide), Err(Error::InvalidArgument(_))));
}

#[test]
fn columnar_point_operations_work_on_an_unordered_engine_and_scans_say_why_not() {
    let db = open(EngineKind::F2);
    let table = db.table(orders_schema()).unwrap();
    table.insert("o1", &row(5, 6, 0)).unwrap();
    assert!(table.update("o1", &[("qty", &9u32.to_le_bytes())]).unwrap());
    assert_eq!(
        table.get("o1", &table.projection(&["qty"]).unwrap()).unwrap(),
        Some(9u32.to_le_bytes().to_vec())
    );
    let all = table.schema().all_columns();
    assert!(matches!(table.scan(b"a".as_slice().., &all), Err(Error::Unsupported(_))));
}

#[cfg(not(feature = "laser"))]
#[test]
fn an_unimplemented_engine_is_refused_before_the_directory_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("never-created");
    let unimplemented =
        EngineKind::ALL.into_iter().find(|k| !k.is_available()).expect("an unimplemented kind");
    assert!(matches!(Db::open(&path, Options::new(unimplemented)), Err(Error::Unsupported(_))));
    assert!(!path.exists(), "opening an unimplemented engine created {}", path.display());
}

/// The README's limits table quotes these numbers.
#[test]
fn f2_limits_with_the_default_page_match_the_readme() {
    let limits = open(EngineKind::F2).limits();
    assert_eq!(limits.max_key_bytes, 4096);
    assert_eq!(limits.max_value_bytes, 1_044_448);
}

#[test]
fn a_runtime_knob_set_through_the_db_takes_effect_while_open() {
    let db = Db::open(
        "unused",
        Options::new(EngineKind::Flex)
            .memory_budget_bytes(8 << 20)
            .engine_option("memtable_bytes", "64KiB")
            .storage(Arc::new(MemStorage::new())),
    )
    .unwrap();
    assert_eq!(db.capabilities().runtime_options, &["cache_bytes"]);
    let value = vec![7u8; 200];
    for i in 0..20_000u32 {
        db.put(format!("k{i:06}"), &value).unwrap();
    }
    db.maintain(MaintenanceTask::Commit).unwrap();
    for i in (0..20_000u32).step_by(7) {
        assert!(db.get(format!("k{i:06}")).unwrap().is_some());
    }
    let counter = |name: &str| db.stats().unwrap().counter(name).unwrap();
    assert!(
        counter("memory.cache_bytes") > 256 << 10,
        "the reads filled the cache: {}",
        counter("memory.cache_bytes")
    );

    db.set_option("cache_bytes", "256KiB").unwrap();
    assert_eq!(counter("memory.cache_capacity_bytes"), 256 << 10);
    assert!(
        counter("memory.cache_bytes") <= 256 << 10,
        "shrinking evicts at once: {}",
        counter("memory.cache_bytes")
    );
    assert_eq!(db.get("k000007").unwrap(), Some(value.clone()), "data unaffected");

    let err = db.set_option("cache_bytes", "1GiB").unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("cache_bytes")), "{err}");
    assert_eq!(
        counter("memory.cache_capacity_bytes"),
        256 << 10,
        "a refused value leaves the knob as it was"
    );
}
