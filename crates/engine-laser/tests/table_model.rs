//! laser's own table against a model: random whole-row inserts, updates of some columns,
//! deletes, projected reads and projected scans both ways, compactions, reopens and power cuts
//! after a flush (simulated storage), on a store
//! whose levels split into column groups (rows, then halves, then smaller groups, then single
//! columns) with a tiny MemTable, so partial rows meet whole rows in every layout. Seeds print
//! on failure; `STRATA_SEED` replays one (the worker's compactions interleave differently from
//! run to run).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use engine_laser::LaserEngine;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{
    ColumnarTable, Direction, Durability, Engine, EngineConfig, KeyRange, Maintenance, MaintenanceTask,
    Projection, Schema,
};
use strata_io::{CrashMode, SimStorage, Storage};
use strata_testkit::seed::{ops_per_seed, replay_line, seeds};

const WIDTHS: [usize; 6] = [1, 2, 4, 8, 3, 5];

fn config(layout: &str) -> EngineConfig {
    EngineConfig {
        wal_segment_bytes: Some(16 << 10),
        memory_budget_bytes: 256 << 10,
        ..EngineConfig::default()
    }
    .with_engine_options([
        ("schema", "a:1,b:2,c:4,d:8,e:3,f:5"),
        ("layout", layout),
        ("memtable_bytes", "4KiB"),
        ("level0_runs", "2"),
        ("size_ratio", "2"),
    ])
}

fn schema() -> Schema {
    Schema::new(["a", "b", "c", "d", "e", "f"].into_iter().zip(WIDTHS)).unwrap()
}

fn offsets() -> Vec<usize> {
    WIDTHS.iter().scan(0, |at, w| Some(std::mem::replace(at, *at + w))).collect()
}

fn random_column(rng: &mut SmallRng, column: usize) -> Vec<u8> {
    (0..WIDTHS[column]).map(|_| rng.gen()).collect()
}

fn random_projection(rng: &mut SmallRng, schema: &Schema) -> Projection {
    let names = ["a", "b", "c", "d", "e", "f"];
    let n = rng.gen_range(1..=8);
    let picked: Vec<&str> = (0..n).map(|_| names[rng.gen_range(0..6)]).collect();
    schema.projection(&picked).unwrap()
}

fn project(row: &[u8], projection: &Projection) -> Vec<u8> {
    let offsets = offsets();
    projection.columns().iter().flat_map(|&i| row[offsets[i]..offsets[i] + WIDTHS[i]].to_vec()).collect()
}

fn key(i: u32) -> Vec<u8> {
    format!("row{i:04}").into_bytes()
}

struct Store {
    disk: SimStorage,
    layout: &'static str,
    engine: Option<LaserEngine>,
}

impl Store {
    fn engine(&self) -> &LaserEngine {
        self.engine.as_ref().unwrap()
    }

    fn table(&self) -> Box<dyn ColumnarTable> {
        self.engine().open_table(&schema()).expect("a table store").unwrap()
    }

    fn open(&mut self) {
        let storage: Arc<dyn Storage> = Arc::new(self.disk.booted());
        self.engine = Some(LaserEngine::open(storage, &config(self.layout)).unwrap());
    }

    fn reopen(&mut self) {
        self.engine.take().unwrap().close().unwrap();
        self.open();
    }

    /// A flush, then a power cut that keeps a random part of what was not synced: every
    /// acknowledged write was flushed, so the reopened table is the model's.
    fn crash_after_flush(&mut self) {
        self.engine().flush().unwrap();
        self.disk.crash(CrashMode::Random);
        drop(self.engine.take()); // its handles are dead: the close fails, quietly
        self.open();
    }
}

const LAYOUTS: [&str; 4] = ["row", "0-2|3-5/0|1-2|3|4-5/column", "column", "0,2,4|1,3,5/0,4|2|1|3,5"];

/// `regroup`: the layout also changes while the store runs (`set_option("layout")`), so
/// compactions regroup levels written in another layout.
fn run(seed: u64, layout: &'static str, ops: usize, regroup: bool) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut store = Store { disk: SimStorage::new(seed), layout, engine: None };
    store.open();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let schema = schema();
    let d = Durability::Buffered;
    for op in 0..ops {
        let table = store.table();
        let k = key(rng.gen_range(0..300));
        let context = || format!("seed {seed} layout {layout} op #{op}: {}", replay_line(seed));
        match rng.gen_range(0..100) {
            0..=29 => {
                let row: Vec<u8> = (0..6).flat_map(|c| random_column(&mut rng, c)).collect();
                table.insert(&k, &row, d).unwrap();
                model.insert(k, row);
            }
            30..=54 => {
                let columns: Vec<usize> = (0..rng.gen_range(1..=3)).map(|_| rng.gen_range(0..6)).collect();
                let values: Vec<(usize, Vec<u8>)> =
                    columns.iter().map(|&c| (c, random_column(&mut rng, c))).collect();
                let update: Vec<(usize, &[u8])> = values.iter().map(|(c, v)| (*c, v.as_slice())).collect();
                let updated = table.update(&k, &update, d).unwrap();
                assert_eq!(updated, model.contains_key(&k), "{}", context());
                if let Some(row) = model.get_mut(&k) {
                    let offsets = offsets();
                    for (c, v) in &values {
                        row[offsets[*c]..offsets[*c] + WIDTHS[*c]].copy_from_slice(v);
                    }
                }
            }
            55..=62 => {
                store.engine().delete(&k, d).unwrap();
                model.remove(&k);
            }
            63..=84 => {
                let projection = random_projection(&mut rng, &schema);
                let got = table.get(&k, &projection).unwrap();
                assert_eq!(got, model.get(&k).map(|row| project(row, &projection)), "get {}", context());
            }
            85..=95 => {
                let projection = random_projection(&mut rng, &schema);
                let (lo, hi) = (key(rng.gen_range(0..300)), key(rng.gen_range(0..300)));
                let direction = if rng.gen_bool(0.5) { Direction::Forward } else { Direction::Reverse };
                let range = KeyRange { start: Bound::Included(lo.clone()), end: Bound::Excluded(hi.clone()) };
                // Half the scans hand out column vectors, in batches of a random size.
                let got: Vec<(Vec<u8>, Vec<u8>)> = if rng.gen_bool(0.5) {
                    table.scan(range, direction, &projection).unwrap().map(Result::unwrap).collect()
                } else {
                    let rows = rng.gen_range(1..40);
                    let batches = table.scan_batches(range, direction, &projection, rows).unwrap();
                    batches.map(Result::unwrap).flat_map(|b| b.rows().collect::<Vec<_>>()).collect()
                };
                let mut want: Vec<(Vec<u8>, Vec<u8>)> = if lo < hi {
                    model.range(lo..hi).map(|(k, row)| (k.clone(), project(row, &projection))).collect()
                } else {
                    Vec::new()
                };
                if direction == Direction::Reverse {
                    want.reverse();
                }
                assert_eq!(got, want, "scan {}", context());
            }
            96 => store.engine().run(MaintenanceTask::Compact).unwrap(),
            97 if regroup => {
                let next = LAYOUTS[rng.gen_range(0..LAYOUTS.len())];
                store.engine().set_option("layout", next).unwrap();
                store.layout = next;
            }
            97 => {}
            98 => {
                drop(table);
                store.reopen();
            }
            _ => {
                drop(table);
                store.crash_after_flush();
            }
        }
        // `LASER_CHECK_EVERY_OP=1`: the whole table against the model after every operation, to
        // find the first that diverges (slower; the worker's timing then differs too).
        if std::env::var("LASER_CHECK_EVERY_OP").is_ok() {
            let all = schema.all_columns();
            let got: Vec<(Vec<u8>, Vec<u8>)> = store
                .table()
                .scan(KeyRange::all(), Direction::Forward, &all)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let want: Vec<(Vec<u8>, Vec<u8>)> = model.clone().into_iter().collect();
            if got != want {
                let extra: Vec<_> = got
                    .iter()
                    .filter(|g| !want.contains(g))
                    .map(|(k, v)| (String::from_utf8_lossy(k).to_string(), v.clone()))
                    .collect();
                let missing: Vec<_> = want
                    .iter()
                    .filter(|w| !got.contains(w))
                    .map(|(k, v)| (String::from_utf8_lossy(k).to_string(), v.clone()))
                    .collect();
                panic!(
                    "diverged after op #{op} (layout {}): extra {extra:?} missing {missing:?}",
                    store.layout
                );
            }
        }
    }
    let all = schema.all_columns();
    let got: Vec<(Vec<u8>, Vec<u8>)> =
        store.table().scan(KeyRange::all(), Direction::Forward, &all).unwrap().map(Result::unwrap).collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(got, want, "seed {seed} layout {layout} at the end: {}", replay_line(seed));
    let batches = store.table().scan_batches(KeyRange::all(), Direction::Reverse, &all, 64).unwrap();
    let mut got: Vec<(Vec<u8>, Vec<u8>)> =
        batches.map(Result::unwrap).flat_map(|b| b.rows().collect::<Vec<_>>()).collect();
    got.reverse();
    assert_eq!(got, want, "seed {seed} layout {layout}, column vectors at the end: {}", replay_line(seed));
    let levels = store.engine().stats().counter("levels").unwrap();
    assert!(levels >= 2, "seed {seed}: the run reached {levels} levels; it should reach column groups");
}

#[test]
fn tables_in_column_group_layouts_match_the_model() {
    for seed in seeds(3) {
        for layout in LAYOUTS {
            run(seed, layout, ops_per_seed(3_000), false);
        }
    }
}

#[test]
fn tables_whose_layout_changes_while_they_run_match_the_model() {
    for seed in seeds(6) {
        run(seed, LAYOUTS[seed as usize % LAYOUTS.len()], ops_per_seed(4_000), true);
    }
}
