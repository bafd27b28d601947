//! Disk faults surface as clear errors through the public API: full disk, flipped bits.

use std::sync::Arc;

use strata::storage::{CrashMode, SimStorage, Storage};
use strata::{Db, Durability, EngineKind, Error, Options};

fn open(sim: &SimStorage) -> strata::Result<Db> {
    Db::open(
        "sim",
        Options::new(EngineKind::Memory).storage(Arc::new(sim.clone())).wal_segment_bytes(64 << 10),
    )
}

#[test]
fn full_disk_is_a_clear_no_space_error_and_acked_writes_survive() {
    let sim = SimStorage::new(7);
    let db = open(&sim).unwrap();
    for i in 0..100u32 {
        db.put_with(i.to_be_bytes(), [1u8; 100], Durability::Sync).unwrap();
    }
    sim.set_capacity_bytes(Some(0));
    let mut acked = 100u32;
    let err = loop {
        match db.put_with(acked.to_be_bytes(), [2u8; 1000], Durability::Sync) {
            Ok(()) => acked += 1,
            Err(e) => break e,
        }
        assert!(acked < 100_000, "the disk never filled up");
    };
    assert!(err.is_no_space(), "expected a no-space error, got: {err}");
    assert!(!err.to_string().contains('\n'));
    drop(db);
    sim.set_capacity_bytes(None);
    sim.crash(CrashMode::DropUnsynced);
    let db = open(&sim).unwrap();
    for i in 0..acked {
        assert!(db.get(i.to_be_bytes()).unwrap().is_some(), "acknowledged key {i} lost");
    }
}

#[test]
fn flipped_bit_in_the_wal_is_reported_with_file_and_offset() {
    let sim = SimStorage::new(11);
    {
        let db = open(&sim).unwrap();
        for i in 0..50u32 {
            db.put_with(i.to_be_bytes(), [7u8; 40], Durability::Sync).unwrap();
        }
        db.close().unwrap();
    }
    let wal = sim.list().unwrap().into_iter().find(|n| n.starts_with("wal-")).expect("a WAL segment");
    // Inside the first record's payload: segment header (32) + record header (24) + a few bytes.
    sim.flip_bit(&wal, 32 + 24 + 6, 3).unwrap();
    let err = open(&sim).unwrap_err();
    match &err {
        Error::Corruption { file, offset, .. } => {
            assert!(file.contains(&wal), "{err}");
            assert_eq!(*offset, 32, "{err}");
        }
        other => panic!("expected corruption, got {other}"),
    }
    assert!(err.to_string().contains(&wal) && !err.to_string().contains('\n'), "{err}");
}
