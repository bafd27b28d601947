//! laser's own table against a `BTreeMap` of rows: inserts, updates of some columns, deletes,
//! projected gets, projected scans as rows and as column vectors (both directions, any batch
//! size), compactions, layout changes and reopens, decoded from the input. Small sizes (a 4 KiB
//! MemTable, T = 2) so a few hundred operations reach levels split into column groups.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use strata::storage::MemStorage;
use strata::{
    Db, Direction, Durability, EngineKind, KeyRange, MaintenanceTask, Options, Projection, Schema, Table,
};

use crate::Input;

const WIDTHS: [usize; 5] = [1, 2, 4, 8, 3];
const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];
const LAYOUTS: [&str; 4] = ["row", "0-2|3-4/0|1-2|3|4/column", "column", "row/0,2,4|1,3/0,4|2|1|3"];

fn options(layout: &str) -> Options {
    Options::new(EngineKind::Laser)
        .memory_budget_bytes(256 << 10)
        .wal_segment_bytes(16 << 10)
        .engine_option("schema", "a:1,b:2,c:4,d:8,e:3")
        .engine_option("layout", layout)
        .engine_option("memtable_bytes", "4KiB")
        .engine_option("level0_runs", "2")
        .engine_option("size_ratio", "2")
}

fn offset(column: usize) -> usize {
    WIDTHS[..column].iter().sum()
}

fn project(row: &[u8], projection: &Projection) -> Vec<u8> {
    projection.columns().iter().flat_map(|&c| row[offset(c)..offset(c) + WIDTHS[c]].to_vec()).collect()
}

fn projection(schema: &Schema, input: &mut Input<'_>) -> Projection {
    let picked = input.byte().unwrap_or(0);
    let names: Vec<&str> = (0..5).filter(|i| picked & (1 << i) != 0).map(|i| NAMES[i]).collect();
    let names = if names.is_empty() { vec![NAMES[usize::from(picked >> 5) % 5]] } else { names };
    schema.projection(&names).expect("known columns")
}

/// A projected scan from `k` to a key the input gives, as rows (`op % 10 == 6`) or as column
/// vectors in batches of a size the input gives, in the direction `op` picks, against the model.
fn check_scan(
    table: &Table<'_>,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    input: &mut Input<'_>,
    op: u8,
    k: Vec<u8>,
) {
    let projection = projection(table.schema(), input);
    let hi = format!("k{:03}", input.byte().unwrap_or(0) % 120).into_bytes();
    let direction = if op & 0x40 == 0 { Direction::Forward } else { Direction::Reverse };
    let range = KeyRange { start: Bound::Included(k.clone()), end: Bound::Excluded(hi.clone()) };
    let rows = op % 10 == 6;
    let got: Vec<(Vec<u8>, Vec<u8>)> = if rows {
        table.scan_with(range, direction, &projection).expect("scan").map(|r| r.expect("row")).collect()
    } else {
        let size = usize::from(input.byte().unwrap_or(0) % 40) + 1;
        let batches = table.scan_batches_with(range, direction, &projection, size).expect("batches");
        batches
            .map(|b| b.expect("batch"))
            .inspect(|b| assert!(b.len() <= size && !b.is_empty(), "batch of {} rows", b.len()))
            .flat_map(|b| b.rows().collect::<Vec<_>>())
            .collect()
    };
    let mut want: Vec<(Vec<u8>, Vec<u8>)> = if k < hi {
        model.range(k..hi).map(|(key, row)| (key.clone(), project(row, &projection))).collect()
    } else {
        Vec::new()
    };
    if direction == Direction::Reverse {
        want.reverse();
    }
    assert_eq!(got, want, "scan ({})", if rows { "rows" } else { "column vectors" });
}

/// See the module documentation.
pub fn laser_table_ops(data: &[u8]) {
    let mut input = Input(data);
    let mut layout = LAYOUTS[usize::from(input.byte().unwrap_or(0)) % LAYOUTS.len()];
    let storage = Arc::new(MemStorage::new());
    let open = |layout: &str| Db::open("fuzz", options(layout).storage(storage.clone())).expect("open");
    let mut db = open(layout);
    let schema = Schema::new(NAMES.into_iter().zip(WIDTHS)).expect("schema");
    let row_bytes: usize = WIDTHS.iter().sum();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let d = Durability::Buffered;
    while let Some(op) = input.byte() {
        let table = db.table(schema.clone()).expect("table");
        let k = format!("k{:03}", input.byte().unwrap_or(0) % 120).into_bytes();
        match op % 10 {
            0 | 1 => {
                let fill = input.byte().unwrap_or(0);
                let row: Vec<u8> = (0..row_bytes).map(|i| fill.wrapping_add(i as u8)).collect();
                table.insert_with(&k, &row, d).expect("insert");
                model.insert(k, row);
            }
            2 | 3 => {
                let column = usize::from(op / 10) % 5;
                let value = vec![input.byte().unwrap_or(0); WIDTHS[column]];
                let updated = table.update_with(&k, &[(NAMES[column], &value)], d).expect("update");
                assert_eq!(updated, model.contains_key(&k), "update of {k:?}");
                if let Some(row) = model.get_mut(&k) {
                    row[offset(column)..offset(column) + WIDTHS[column]].copy_from_slice(&value);
                }
            }
            4 => {
                db.delete_with(&k, d).expect("delete");
                model.remove(&k);
            }
            5 => {
                let projection = projection(&schema, &mut input);
                let want = model.get(&k).map(|row| project(row, &projection));
                assert_eq!(table.get(&k, &projection).expect("get"), want, "get {k:?}");
            }
            6 | 7 => check_scan(&table, &model, &mut input, op, k),
            8 if op & 0x80 == 0 => db.maintain(MaintenanceTask::Compact).expect("compact"),
            8 => {
                layout = LAYOUTS[usize::from(op >> 4) % LAYOUTS.len()];
                db.set_option("layout", layout).expect("layout");
            }
            _ => {
                drop(table);
                db.close().expect("close");
                drop(db);
                db = open(layout);
            }
        }
    }
    let table = db.table(schema.clone()).expect("table");
    let all = schema.all_columns();
    let got: Vec<(Vec<u8>, Vec<u8>)> =
        table.scan(..b"z".to_vec(), &all).expect("final scan").map(|r| r.expect("row")).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(got, want, "the final table");
}
