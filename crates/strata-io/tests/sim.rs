//! SimStorage: crash semantics, fault injection, capacity, bit flips, determinism.

use std::io::ErrorKind;
use std::sync::Arc;

use strata_core::Error;
use strata_io::{
    read_all, write_file_atomic, CrashMode, Fault, FaultKind, OpenOptions, SimStorage, Storage, StorageFile,
};

fn create(sim: &SimStorage, name: &str) -> Arc<dyn StorageFile> {
    sim.open(name, OpenOptions::create()).unwrap()
}

/// A file whose creation is durable (dir synced) but with no durable contents yet.
fn durable_empty_file(sim: &SimStorage, name: &str) -> Arc<dyn StorageFile> {
    let file = create(sim, name);
    sim.sync_dir().unwrap();
    file
}

fn os_error(err: &Error) -> Option<i32> {
    match err {
        Error::Io { source, .. } => source.raw_os_error(),
        _ => None,
    }
}

fn io_kind(err: &Error) -> Option<ErrorKind> {
    match err {
        Error::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

#[test]
fn unsynced_write_is_lost_on_drop_unsynced() {
    let sim = SimStorage::new(1);
    let file = durable_empty_file(&sim, "a");
    file.write_at(0, b"durable").unwrap();
    file.sync().unwrap();
    file.write_at(7, b"-volatile").unwrap();
    assert_eq!(sim.contents("a").unwrap(), b"durable-volatile");
    assert_eq!(sim.durable_contents("a").unwrap(), b"durable");
    sim.crash(CrashMode::DropUnsynced);
    let file = sim.open("a", OpenOptions::existing()).unwrap();
    assert_eq!(read_all(file.as_ref()).unwrap(), b"durable");
}

#[test]
fn synced_write_survives_crash_in_both_modes() {
    for mode in [CrashMode::DropUnsynced, CrashMode::Random] {
        let sim = SimStorage::new(2);
        let file = durable_empty_file(&sim, "a");
        file.write_at(0, b"hello").unwrap();
        file.set_len(8).unwrap();
        file.sync().unwrap();
        sim.crash(mode);
        assert_eq!(sim.contents("a").unwrap(), b"hello\0\0\0", "{mode:?}");
    }
}

#[test]
fn create_without_sync_dir_vanishes_even_if_file_synced() {
    let sim = SimStorage::new(3);
    let file = create(&sim, "new");
    file.write_at(0, b"data").unwrap();
    file.sync().unwrap();
    assert_eq!(sim.durable_contents("new"), None);
    sim.crash(CrashMode::DropUnsynced);
    assert!(!sim.exists("new").unwrap());
    assert!(sim.list().unwrap().is_empty());
    let err = sim.open("new", OpenOptions::existing()).unwrap_err();
    assert_eq!(io_kind(&err), Some(ErrorKind::NotFound));
}

#[test]
fn rename_without_sync_dir_is_undone() {
    let sim = SimStorage::new(4);
    write_file_atomic(&sim, "current", b"v1").unwrap();
    let tmp = create(&sim, "next");
    tmp.write_at(0, b"v2").unwrap();
    tmp.sync().unwrap();
    sim.sync_dir().unwrap();
    sim.rename("next", "current").unwrap();
    assert_eq!(sim.contents("current").unwrap(), b"v2");
    assert_eq!(sim.durable_contents("current").unwrap(), b"v1");
    sim.crash(CrashMode::DropUnsynced);
    assert_eq!(sim.list().unwrap(), vec!["current".to_string(), "next".to_string()]);
    assert_eq!(sim.contents("current").unwrap(), b"v1");
    assert_eq!(sim.contents("next").unwrap(), b"v2");
}

#[test]
fn remove_without_sync_dir_comes_back_with_durable_contents() {
    let sim = SimStorage::new(5);
    let file = durable_empty_file(&sim, "a");
    file.write_at(0, b"kept").unwrap();
    file.sync().unwrap();
    file.write_at(0, b"lost").unwrap();
    sim.remove("a").unwrap();
    assert!(!sim.exists("a").unwrap());
    // An open handle still reaches the unlinked file, as on Unix.
    assert_eq!(read_all(file.as_ref()).unwrap(), b"lost");
    sim.crash(CrashMode::DropUnsynced);
    assert_eq!(sim.contents("a").unwrap(), b"kept");
    sim.remove("a").unwrap();
    sim.sync_dir().unwrap();
    sim.crash(CrashMode::DropUnsynced);
    assert!(!sim.exists("a").unwrap());
}

#[test]
fn write_file_atomic_is_durable() {
    let sim = SimStorage::new(6);
    write_file_atomic(&sim, "MANIFEST", b"m1").unwrap();
    sim.crash(CrashMode::Random);
    assert_eq!(sim.contents("MANIFEST").unwrap(), b"m1");
    assert!(!sim.exists("MANIFEST.tmp").unwrap());
}

const CHUNK_BYTES: usize = 16;
const CHUNKS: usize = 8;

/// Crashes (Random) after eight unsynced 16-byte writes of bytes 1..=8 behind a synced header;
/// returns the surviving contents after the header.
fn random_crash_tail(seed: u64) -> Vec<u8> {
    let sim = SimStorage::new(seed);
    let file = durable_empty_file(&sim, "log");
    file.write_at(0, b"HDR").unwrap();
    file.sync().unwrap();
    for chunk in 0..CHUNKS {
        file.write_at((3 + chunk * CHUNK_BYTES) as u64, &[chunk as u8 + 1; CHUNK_BYTES]).unwrap();
    }
    sim.crash(CrashMode::Random);
    let contents = sim.contents("log").unwrap();
    assert_eq!(&contents[..3], b"HDR", "seed {seed}: synced header lost");
    contents[3..].to_vec()
}

#[test]
fn random_crash_keeps_a_prefix_of_writes_and_sometimes_tears_the_last() {
    let (mut none_kept, mut all_kept, mut torn) = (0, 0, 0);
    for seed in 0..200 {
        let tail = random_crash_tail(seed);
        let expected: Vec<u8> = (0..CHUNKS).flat_map(|c| [c as u8 + 1; CHUNK_BYTES]).collect();
        assert!(expected.starts_with(&tail), "seed {seed}: {tail:?} is not a prefix of the writes");
        match tail.len() {
            0 => none_kept += 1,
            len if len == CHUNKS * CHUNK_BYTES => all_kept += 1,
            len if len % CHUNK_BYTES != 0 => torn += 1,
            _ => {}
        }
    }
    assert!(none_kept > 0 && all_kept > 0 && torn > 0, "none={none_kept} all={all_kept} torn={torn}");
}

#[test]
fn same_seed_gives_same_crash_outcome() {
    for seed in [11, 12, 13] {
        assert_eq!(random_crash_tail(seed), random_crash_tail(seed), "seed {seed}");
    }
    let outcomes: std::collections::HashSet<Vec<u8>> = (0..10).map(random_crash_tail).collect();
    assert!(outcomes.len() > 1, "ten seeds all crashed the same way");
}

#[test]
fn old_handles_are_stale_after_crash() {
    let sim = SimStorage::new(7);
    let file = durable_empty_file(&sim, "a");
    file.write_at(0, b"abc").unwrap();
    file.sync().unwrap();
    sim.crash(CrashMode::DropUnsynced);
    let mut buf = [0u8; 3];
    let errors = [
        file.read_at(0, &mut buf).unwrap_err(),
        file.write_at(0, b"x").unwrap_err(),
        file.sync().unwrap_err(),
        file.len().unwrap_err(),
        file.set_len(0).unwrap_err(),
        file.allocate(100).unwrap_err(),
    ];
    for err in errors {
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert!(err.to_string().contains("simulated crash: stale handle"), "{err}");
    }
    let reopened = sim.open("a", OpenOptions::existing()).unwrap();
    reopened.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"abc");
    drop(file);
    assert_eq!(reopened.len().unwrap(), 3);
}

/// A booted view is one process lifetime: after a crash nothing goes through it (not even a
/// whole-file replacement with new handles), while plain clones and the next boot work on.
#[test]
fn a_booted_view_is_dead_after_the_next_crash() {
    let sim = SimStorage::new(4);
    let process = sim.booted();
    write_file_atomic(&process, "meta", b"before").unwrap();
    sim.crash(CrashMode::DropUnsynced);
    let dead = [
        process.open("other", OpenOptions::create()).err(),
        write_file_atomic(&process, "meta", b"after").err(),
        process.remove("meta").err(),
        process.rename("meta", "moved").err(),
        process.sync_dir().err(),
        process.lock("LOCK").err(),
        process.list().err(),
        process.exists("meta").err(),
    ];
    for (i, err) in dead.into_iter().enumerate() {
        let err = err.unwrap_or_else(|| panic!("call {i} through a dead view succeeded"));
        assert!(err.to_string().contains("dead process"), "call {i}: {err}");
    }
    assert_eq!(sim.contents("meta").unwrap(), b"before");
    let next = sim.booted();
    write_file_atomic(&next, "meta", b"rebooted").unwrap();
    assert_eq!(sim.contents("meta").unwrap(), b"rebooted");
}

#[test]
fn crash_releases_locks_and_old_guards_cannot_release_new_ones() {
    let sim = SimStorage::new(8);
    let old_guard = sim.lock("LOCK").unwrap();
    assert!(matches!(sim.lock("LOCK"), Err(Error::Locked(_))));
    sim.crash(CrashMode::DropUnsynced);
    let new_guard = sim.lock("LOCK").unwrap();
    drop(old_guard);
    assert!(matches!(sim.lock("LOCK"), Err(Error::Locked(_))), "old guard released the new lock");
    drop(new_guard);
    sim.lock("LOCK").unwrap();
}

#[test]
fn fail_op_fires_at_the_chosen_op_only() {
    let sim = SimStorage::new(9);
    let file = durable_empty_file(&sim, "a");
    let start = sim.op_count();
    sim.inject(Fault::FailOp { after_ops: 2, kind: FaultKind::Eio, sticky: false });
    file.write_at(0, b"one").unwrap();
    assert!(sim.exists("a").unwrap() && file.len().unwrap() == 3, "uncounted calls");
    file.sync().unwrap();
    let err = file.write_at(3, b"two").unwrap_err();
    assert_eq!(os_error(&err), Some(libc::EIO));
    assert!(err.to_string().contains("sim:a"), "{err}");
    assert_eq!(sim.contents("a").unwrap(), b"one", "a failed write wrote something");
    file.write_at(3, b"two").unwrap();
    assert_eq!(sim.op_count(), start + 4);
}

#[test]
fn sticky_fail_op_fails_everything_until_cleared() {
    let sim = SimStorage::new(10);
    let file = durable_empty_file(&sim, "a");
    sim.inject(Fault::FailOp { after_ops: 1, kind: FaultKind::Enospc, sticky: true });
    file.write_at(0, b"ok").unwrap();
    let mut buf = [0u8; 2];
    let errors = [
        file.read_at(0, &mut buf).unwrap_err(),
        file.sync().unwrap_err(),
        sim.open("b", OpenOptions::create()).unwrap_err(),
        sim.rename("a", "b").unwrap_err(),
        sim.remove("a").unwrap_err(),
        sim.sync_dir().unwrap_err(),
    ];
    for err in &errors {
        assert!(err.is_no_space(), "{err}");
    }
    assert!(!sim.exists("b").unwrap() && sim.exists("a").unwrap());
    sim.clear_faults();
    file.read_at(0, &mut buf).unwrap();
    file.sync().unwrap();
}

#[test]
fn fail_write_counts_only_size_changing_calls() {
    let sim = SimStorage::new(11);
    let file = durable_empty_file(&sim, "a");
    sim.inject(Fault::FailWrite { after_writes: 2, kind: FaultKind::Enospc, sticky: false });
    file.write_at(0, b"1").unwrap();
    file.sync().unwrap();
    let mut buf = [0u8; 1];
    file.read_at(0, &mut buf).unwrap();
    file.set_len(2).unwrap();
    let err = file.allocate(100).unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert_eq!(file.len().unwrap(), 2, "a failed allocate changed the length");
    file.allocate(100).unwrap();
    assert_eq!(file.len().unwrap(), 100);

    sim.inject(Fault::FailWrite { after_writes: 0, kind: FaultKind::Eio, sticky: true });
    assert_eq!(os_error(&file.write_at(0, b"x").unwrap_err()), Some(libc::EIO));
    assert_eq!(os_error(&file.set_len(0).unwrap_err()), Some(libc::EIO));
    file.sync().unwrap();
    sim.clear_faults();
    file.write_at(0, b"x").unwrap();
}

#[test]
fn failed_sync_leaves_data_not_durable_for_good() {
    let sim = SimStorage::new(12);
    let file = durable_empty_file(&sim, "a");
    file.write_at(0, b"base").unwrap();
    file.sync().unwrap();
    sim.inject(Fault::FailSync { after_syncs: 1 });
    sim.sync_dir().unwrap();
    file.write_at(0, b"LOST").unwrap();
    let err = file.sync().unwrap_err();
    assert_eq!(os_error(&err), Some(libc::EIO));
    assert_eq!(sim.contents("a").unwrap(), b"LOST", "reads still see the page cache");
    assert_eq!(sim.durable_contents("a").unwrap(), b"base");
    // Like Linux after a failed fsync: the pages were marked clean, a retried sync persists nothing.
    file.sync().unwrap();
    assert_eq!(sim.durable_contents("a").unwrap(), b"base");
    file.write_at(4, b"+new").unwrap();
    file.sync().unwrap();
    assert_eq!(sim.durable_contents("a").unwrap(), b"base+new");
    sim.crash(CrashMode::DropUnsynced);
    assert_eq!(sim.contents("a").unwrap(), b"base+new");
}

#[test]
fn failed_sync_dir_leaves_namespace_not_durable() {
    let sim = SimStorage::new(13);
    create(&sim, "a");
    sim.inject(Fault::FailSync { after_syncs: 0 });
    assert_eq!(os_error(&sim.sync_dir().unwrap_err()), Some(libc::EIO));
    assert_eq!(sim.durable_contents("a"), None);
    sim.sync_dir().unwrap();
    assert_eq!(sim.durable_contents("a"), Some(vec![]));
}

#[test]
fn capacity_limit_gives_enospc() {
    let sim = SimStorage::new(14);
    let a = durable_empty_file(&sim, "a");
    let b = create(&sim, "b");
    sim.set_capacity_bytes(Some(100));
    a.write_at(0, &[1; 60]).unwrap();
    let err = b.write_at(0, &[2; 41]).unwrap_err();
    assert!(err.is_no_space(), "{err}");
    assert_eq!(os_error(&err), Some(libc::ENOSPC));
    assert_eq!(sim.contents("b").unwrap(), b"", "a write failing with ENOSPC wrote something");
    assert!(b.allocate(41).unwrap_err().is_no_space());
    assert!(b.set_len(41).unwrap_err().is_no_space());
    b.write_at(0, &[2; 40]).unwrap();
    a.write_at(0, &[3; 60]).unwrap();
    a.set_len(10).unwrap();
    b.write_at(40, &[2; 50]).unwrap();
    sim.set_capacity_bytes(None);
    b.allocate(10_000).unwrap();
}

#[test]
fn flip_bit_is_visible_in_reads_and_survives_crash() {
    let sim = SimStorage::new(15);
    let file = durable_empty_file(&sim, "a");
    file.write_at(0, &[0u8; 8]).unwrap();
    file.sync().unwrap();
    sim.flip_bit("a", 5, 3).unwrap();
    let mut buf = [0u8; 8];
    file.read_at(0, &mut buf).unwrap();
    assert_eq!(buf, [0, 0, 0, 0, 0, 8, 0, 0]);
    assert_eq!(sim.durable_contents("a").unwrap(), buf);
    sim.crash(CrashMode::Random);
    assert_eq!(sim.contents("a").unwrap(), buf);
    assert!(matches!(sim.flip_bit("a", 8, 0), Err(Error::InvalidArgument(_))));
    assert!(matches!(sim.flip_bit("a", 0, 8), Err(Error::InvalidArgument(_))));
    assert!(sim.flip_bit("missing", 0, 0).is_err());
}

#[test]
fn reads_past_end_are_unexpected_eof() {
    let sim = SimStorage::new(16);
    let file = create(&sim, "a");
    file.write_at(0, b"abc").unwrap();
    let mut buf = [0u8; 2];
    let err = file.read_at(2, &mut buf).unwrap_err();
    assert_eq!(io_kind(&err), Some(ErrorKind::UnexpectedEof));
    assert!(err.to_string().contains("reading 2 bytes at offset 2 of sim:a"), "{err}");
    file.read_at(1, &mut buf).unwrap();
    assert_eq!(&buf, b"bc");
    file.read_at(3, &mut []).unwrap();
}

#[test]
fn io_stats_count_bytes_and_ops() {
    let sim = SimStorage::new(17);
    let file = create(&sim, "a");
    file.write_at(0, b"12345").unwrap();
    file.sync().unwrap();
    sim.sync_dir().unwrap();
    let mut buf = [0u8; 4];
    file.read_at(1, &mut buf).unwrap();
    let stats = sim.io_stats();
    assert_eq!((stats.bytes_written, stats.write_ops), (5, 1));
    assert_eq!((stats.bytes_read, stats.read_ops), (4, 1));
    assert_eq!(stats.sync_ops, 2);
    assert_eq!(sim.clone().io_stats(), stats, "clones share counters");
}
