//! The paper-experiment functions `strata repro flex` and the cargo benches run, at a tiny size:
//! every count matches, every lookup finds its extent, and each insert-range variant leaves a
//! file whose blocks are in the order a `Vec` model of the same inserts gives.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use engine_flex::experiments::{
    block_id, filesystem_name, flexfile_random_insert, fs_random_insert, insert_offsets_blocks,
    rewrite_random_insert, run_table1, FsInsertOutcome, IndexKind, InsertLimits, InsertRun, Table1Sizes,
    BLOCK_BYTES, FLEXFILE_NAME, FS_INSERT_FILE_NAME, REWRITE_FILE_NAME,
};
use engine_flex::flexfile::{FlexFile, FlexFileOptions, TableFile};
use strata_io::{FileStorage, Storage};

#[test]
fn table1_counts_and_lookups_are_right() {
    let sizes = Table1Sizes { appends: 5_000, front_inserts: 400, baseline_front_inserts: 100 };
    let rows = run_table1(sizes).unwrap();
    assert_eq!(rows.iter().map(|r| r.kind).collect::<Vec<_>>(), IndexKind::ALL);
    for row in &rows {
        assert_eq!(row.lookups_correct, sizes.appends, "{row:?}");
        assert_eq!(row.front_lookups_correct, row.front_inserts_measured, "{row:?}");
        let linear = row.kind.front_insert_is_linear();
        assert_eq!(row.front_inserts_measured, if linear { 100 } else { 400 }, "{row:?}");
        assert_eq!(row.front_extrapolated, linear, "{row:?}");
        // 4x the inserts of an O(N)-per-insert index: 16x the time.
        let factor = if linear { 16.0 } else { 1.0 };
        assert!((row.front_total_secs - row.front_measured_secs * factor).abs() < 1e-9, "{row:?}");
        assert!(row.append_secs > 0.0 && row.lookup_secs > 0.0, "{row:?}");
    }
}

/// Block ids in file order after `inserts` inserts drawn from `seed`.
fn model_order(seed: u64, inserts: u64) -> Vec<u64> {
    let mut order = Vec::new();
    for (i, at) in insert_offsets_blocks(seed).take(inserts as usize).enumerate() {
        order.insert(at as usize, i as u64);
    }
    order
}

fn ids_in(read: impl Fn(u64, &mut [u8]), blocks: u64) -> Vec<u64> {
    let mut block = vec![0u8; BLOCK_BYTES as usize];
    (0..blocks)
        .map(|b| {
            read(b * BLOCK_BYTES, &mut block);
            block_id(&block).unwrap()
        })
        .collect()
}

fn plain_file_ids(path: &Path, blocks: u64) -> Vec<u64> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path).unwrap();
    ids_in(|offset, buf| file.read_exact_at(buf, offset).unwrap(), blocks)
}

fn check_complete(run: &InsertRun, target: u64) {
    assert_eq!((run.inserts, run.target_inserts), (target, target), "{run:?}");
    assert_eq!(run.file_bytes, target * BLOCK_BYTES, "{run:?}");
    assert!(!run.stopped_at_deadline && run.secs > 0.0 && run.tail_ops_per_sec > 0.0, "{run:?}");
}

#[test]
fn insert_range_variants_leave_the_models_block_order() {
    let dir = tempfile::tempdir().unwrap();
    let (seed, target) = (7, 300);
    let limits = InsertLimits { total_bytes: target * BLOCK_BYTES + 100, deadline: None };
    let expected = model_order(seed, target);

    let flex = flexfile_random_insert(dir.path(), limits, seed).unwrap();
    check_complete(&flex, target);
    // Every user byte reached the storage layer (log and tree on top).
    assert!(flex.storage_bytes_written.unwrap() >= flex.user_bytes(), "{flex:?}");
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::open_dir(dir.path(), false).unwrap());
    let file = FlexFile::open(storage, FLEXFILE_NAME, FlexFileOptions::default()).unwrap();
    assert_eq!(file.len(), target * BLOCK_BYTES);
    assert_eq!(
        ids_in(|offset, buf| assert_eq!(file.read(offset, buf).unwrap(), buf.len()), target),
        expected
    );

    let rewrite = rewrite_random_insert(dir.path(), limits, seed).unwrap();
    check_complete(&rewrite, target);
    assert_eq!(plain_file_ids(&dir.path().join(REWRITE_FILE_NAME), target), expected);

    match fs_random_insert(dir.path(), limits, seed).unwrap() {
        FsInsertOutcome::Measured(run) => {
            check_complete(&run, target);
            assert_eq!(plain_file_ids(&dir.path().join(FS_INSERT_FILE_NAME), target), expected);
        }
        // Only where the filesystem cannot (tmpfs and overlayfs can't; ext4 and XFS can).
        FsInsertOutcome::Refused { error } => {
            let fs = filesystem_name(dir.path());
            assert!(!["ext4", "XFS"].contains(&fs.as_str()), "{fs} refused insert-range: {error}");
        }
    }
}

#[test]
fn a_deadline_stops_the_run_where_the_file_is_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let limits = InsertLimits { total_bytes: 1000 * BLOCK_BYTES, deadline: Some(Duration::ZERO) };
    let run = rewrite_random_insert(dir.path(), limits, 3).unwrap();
    // The deadline is checked every 16 inserts.
    assert_eq!((run.inserts, run.target_inserts, run.stopped_at_deadline), (16, 1000, true), "{run:?}");
    assert_eq!(run.file_bytes, 16 * BLOCK_BYTES);
    assert_eq!(plain_file_ids(&dir.path().join(REWRITE_FILE_NAME), 16), model_order(3, 16));
}

#[test]
fn tmpfs_refuses_insert_range_and_nothing_is_measured() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() || filesystem_name(shm) != "tmpfs" {
        eprintln!("skipped: no tmpfs at /dev/shm");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    let limits = InsertLimits { total_bytes: 64 * BLOCK_BYTES, deadline: None };
    let outcome = fs_random_insert(dir.path(), limits, 1).unwrap();
    assert!(
        matches!(&outcome, FsInsertOutcome::Refused { error } if error.contains("FALLOC_FL_INSERT_RANGE")),
        "{outcome:?}"
    );
}
