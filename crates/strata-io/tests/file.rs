//! FileStorage on a temporary directory: buffered and O_DIRECT I/O, namespace operations, locks.

use std::io::ErrorKind;

use strata_core::Error;
use strata_io::{read_all, AlignedBuf, FileStorage, OpenOptions, Storage, DIRECT_IO_ALIGNMENT_BYTES};
use tempfile::TempDir;

fn storage() -> (TempDir, FileStorage) {
    let dir = tempfile::tempdir().unwrap();
    let storage = FileStorage::open_dir(dir.path(), false).unwrap();
    (dir, storage)
}

fn io_kind(err: &Error) -> Option<ErrorKind> {
    match err {
        Error::Io { source, .. } => Some(source.kind()),
        _ => None,
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn open_dir_creates_missing_directory_only_when_asked() {
    let root = tempfile::tempdir().unwrap();
    let nested = root.path().join("x").join("db");
    let err = FileStorage::open_dir(&nested, false).unwrap_err();
    assert_eq!(io_kind(&err), Some(ErrorKind::NotFound));
    let storage = FileStorage::open_dir(&nested, true).unwrap();
    assert_eq!(storage.path(), nested);
    assert_eq!(storage.location(), nested.display().to_string());
    std::fs::write(root.path().join("plain"), b"").unwrap();
    assert!(FileStorage::open_dir(root.path().join("plain"), true).is_err());
}

#[test]
fn read_write_sync_len_round_trip() {
    let (_dir, storage) = storage();
    let file = storage.open("data", OpenOptions::create()).unwrap();
    assert!(file.is_empty().unwrap());
    file.write_at(0, b"hello ").unwrap();
    file.write_at(6, b"world").unwrap();
    file.sync().unwrap();
    assert_eq!(file.len().unwrap(), 11);
    let mut buf = [0u8; 5];
    file.read_at(6, &mut buf).unwrap();
    assert_eq!(&buf, b"world");
    let again = storage.open("data", OpenOptions::existing()).unwrap();
    assert_eq!(read_all(again.as_ref()).unwrap(), b"hello world");
    let err = file.read_at(8, &mut buf).unwrap_err();
    assert_eq!(io_kind(&err), Some(ErrorKind::UnexpectedEof));
    let stats = storage.io_stats();
    assert_eq!((stats.write_ops, stats.bytes_written, stats.sync_ops), (2, 11, 1));
    assert_eq!((stats.read_ops, stats.bytes_read), (2, 16));
}

#[test]
fn errors_name_the_operation_and_full_path() {
    let (dir, storage) = storage();
    let err = storage.open("missing", OpenOptions::existing()).unwrap_err();
    assert_eq!(io_kind(&err), Some(ErrorKind::NotFound));
    let path = dir.path().join("missing");
    assert!(err.to_string().contains(&format!("opening {}", path.display())), "{err}");
    let file = storage.open("f", OpenOptions::create()).unwrap();
    let err = file.read_at(0, &mut [0u8; 4]).unwrap_err();
    let expected = format!("reading 4 bytes at offset 0 of {}", dir.path().join("f").display());
    assert!(err.to_string().contains(&expected), "{err}");
    assert!(matches!(storage.open("a/b", OpenOptions::create()), Err(Error::InvalidArgument(_))));
}

#[test]
fn set_len_and_allocate() {
    let (_dir, storage) = storage();
    let file = storage.open("f", OpenOptions::create()).unwrap();
    file.write_at(0, b"abcdef").unwrap();
    file.set_len(3).unwrap();
    assert_eq!(read_all(file.as_ref()).unwrap(), b"abc");
    file.allocate(1 << 20).unwrap();
    assert_eq!(file.len().unwrap(), 1 << 20);
    let mut tail = [1u8; 16];
    file.read_at((1 << 20) - 16, &mut tail).unwrap();
    assert_eq!(tail, [0u8; 16]);
    file.allocate(10).unwrap();
    assert_eq!(file.len().unwrap(), 1 << 20, "allocate shrank the file");
    file.set_len(5).unwrap();
    assert_eq!(read_all(file.as_ref()).unwrap(), b"abc\0\0");
}

#[test]
fn list_rename_remove_exists() {
    let (dir, storage) = storage();
    for name in ["b", "a", "c"] {
        storage.open(name, OpenOptions::create()).unwrap().write_at(0, name.as_bytes()).unwrap();
    }
    std::fs::create_dir(dir.path().join("subdir")).unwrap();
    assert_eq!(storage.list().unwrap(), ["a", "b", "c"]);
    assert!(!storage.exists("subdir").unwrap());
    storage.rename("a", "c").unwrap();
    storage.sync_dir().unwrap();
    assert_eq!(storage.list().unwrap(), ["b", "c"]);
    let c = storage.open("c", OpenOptions::existing()).unwrap();
    assert_eq!(read_all(c.as_ref()).unwrap(), b"a");
    storage.remove("b").unwrap();
    assert!(!storage.exists("b").unwrap());
    assert!(storage.exists("c").unwrap());
    assert_eq!(io_kind(&storage.remove("b").unwrap_err()), Some(ErrorKind::NotFound));
    assert_eq!(io_kind(&storage.rename("b", "d").unwrap_err()), Some(ErrorKind::NotFound));
}

#[test]
fn lock_twice_in_process_fails_until_guard_drops() {
    let (dir, storage) = storage();
    let guard = storage.lock("LOCK").unwrap();
    let err = storage.lock("LOCK").unwrap_err();
    assert!(matches!(&err, Error::Locked(path) if path == &dir.path().join("LOCK").display().to_string()));
    // A separate FileStorage on the same directory (like a second Db) is refused too.
    let other = FileStorage::open_dir(dir.path(), false).unwrap();
    assert!(matches!(other.lock("LOCK"), Err(Error::Locked(_))));
    drop(guard);
    let _again = other.lock("LOCK").unwrap();
}

/// Regression (found by `crates/strata/tests/enospc_real_fs`): with `flock`, a child process
/// between `fork` and `exec` shares the lock's open file description, so a lock dropped while
/// another thread spawned a process stayed held and the next `lock` (a `Db` reopened right after
/// `close`) failed with `Locked`. The child here sleeps before `exec` to hold that window open.
#[test]
fn lock_is_free_after_drop_while_a_child_is_being_spawned() {
    use std::os::unix::process::CommandExt;
    use std::time::Duration;

    let (_dir, storage) = storage();
    let guard = storage.lock("LOCK").unwrap();
    let (forked_tx, forked_rx) = std::sync::mpsc::channel();
    let spawner = std::thread::spawn(move || {
        let mut child = std::process::Command::new("true");
        // SAFETY: the hook only sleeps (nanosleep is async-signal-safe) in the forked child.
        unsafe {
            child.pre_exec(|| {
                std::thread::sleep(Duration::from_millis(400));
                Ok(())
            })
        };
        let _ = forked_tx.send(());
        child.status().expect("run true")
    });
    forked_rx.recv().unwrap();
    std::thread::sleep(Duration::from_millis(100)); // the child has forked and sleeps in pre_exec
    drop(guard);
    let again = storage.lock("LOCK");
    assert!(spawner.join().unwrap().success());
    assert!(again.is_ok(), "lock after drop while a child was being spawned: {:?}", again.err());
}

/// The lock still excludes another process: this test re-runs itself as a child (env
/// `STRATA_LOCK_CHILD_DIR`) that tries the lock and exits 3 when it is `Locked`.
#[test]
fn lock_excludes_another_process_until_dropped() {
    if let Ok(dir) = std::env::var("STRATA_LOCK_CHILD_DIR") {
        let storage = FileStorage::open_dir(dir, false).unwrap();
        let code = match storage.lock("LOCK") {
            Ok(_) => 0,
            Err(Error::Locked(_)) => 3,
            Err(_) => 4,
        };
        std::process::exit(code);
    }
    let (dir, storage) = storage();
    let child_lock = || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "lock_excludes_another_process_until_dropped", "--nocapture"])
            .env("STRATA_LOCK_CHILD_DIR", dir.path())
            .output()
            .unwrap()
            .status
            .code()
    };
    let guard = storage.lock("LOCK").unwrap();
    assert_eq!(child_lock(), Some(3), "another process took a held lock");
    drop(guard);
    assert_eq!(child_lock(), Some(0), "another process could not take a dropped lock");
}

/// Regression (found by review): `total_file_bytes` (every engine's `Stats::disk_bytes`) opened
/// every listed file, `LOCK` included; closing that descriptor dropped the process's POSIX lock,
/// and another process could then open the same store. Opening a held lock file is refused now,
/// so the count skips it and the lock holds. The child is `lock_excludes_another_process_until_dropped`'s.
#[test]
fn counting_disk_bytes_keeps_the_directory_lock() {
    let (dir, storage) = storage();
    let guard = storage.lock("LOCK").unwrap();
    storage.open("data", OpenOptions::create()).unwrap().write_at(0, b"12345").unwrap();
    assert!(matches!(storage.open("LOCK", OpenOptions::existing()), Err(Error::InvalidArgument(_))));
    assert_eq!(strata_io::total_file_bytes(&storage), 5);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "lock_excludes_another_process_until_dropped", "--nocapture"])
        .env("STRATA_LOCK_CHILD_DIR", dir.path())
        .output()
        .unwrap();
    assert_eq!(child.status.code(), Some(3), "another process took the lock after the count");
    drop(guard);
    assert!(storage.open("LOCK", OpenOptions::existing()).is_ok(), "a released lock file opens again");
}

#[test]
fn direct_io_aligned_write_then_unaligned_read() {
    let (_dir, storage) = storage();
    let file = storage.open("direct", OpenOptions::create().with_direct(true)).unwrap();
    let block_bytes = DIRECT_IO_ALIGNMENT_BYTES;
    let data = pattern(3 * block_bytes);
    let mut aligned = AlignedBuf::new(data.len());
    aligned.copy_from_slice(&data);
    file.write_at(0, &aligned).unwrap();
    // An unaligned buffer with aligned offset and length is bounced internally.
    let unaligned_source = pattern(block_bytes + 1);
    file.write_at(3 * block_bytes as u64, &unaligned_source[1..]).unwrap();
    file.sync().unwrap();
    assert_eq!(file.len().unwrap(), 4 * block_bytes as u64);

    for (offset, len) in [(1, 10), (block_bytes - 3, 7), (100, 2 * block_bytes), (0, block_bytes)] {
        let mut buf = vec![0u8; len];
        file.read_at(offset as u64, &mut buf).unwrap();
        let mut expected = data.clone();
        expected.extend_from_slice(&unaligned_source[1..]);
        assert_eq!(buf, &expected[offset..offset + len], "offset {offset} len {len}");
    }
    let mut aligned_read = AlignedBuf::new(block_bytes);
    file.read_at(block_bytes as u64, &mut aligned_read).unwrap();
    assert_eq!(&aligned_read[..], &data[block_bytes..2 * block_bytes]);
    let err = file.read_at(4 * block_bytes as u64 - 5, &mut [0u8; 10]).unwrap_err();
    assert_eq!(io_kind(&err), Some(ErrorKind::UnexpectedEof));
}

/// Bytes this thread has caused the block layer to read (`/proc/thread-self/io`).
#[cfg(target_os = "linux")]
fn thread_read_bytes() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    let line = io.lines().find(|l| l.starts_with("read_bytes:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[cfg(target_os = "linux")]
#[test]
fn a_small_direct_read_moves_only_the_blocks_the_file_system_needs() {
    let (dir, storage) = storage();
    let file = storage.open("direct", OpenOptions::create().with_direct(true)).unwrap();
    if storage.direct_io_fallbacks() > 0 {
        eprintln!("filesystem does not support O_DIRECT; nothing to measure");
        return;
    }
    let data = pattern(16 * DIRECT_IO_ALIGNMENT_BYTES);
    let mut aligned = AlignedBuf::new(data.len());
    aligned.copy_from_slice(&data);
    file.write_at(0, &aligned).unwrap();
    file.sync().unwrap();
    let alignment = strata_io::direct_read_alignment_of(&dir.path().join("direct")).unwrap();
    assert!(alignment.is_power_of_two() && (512..=4096).contains(&alignment), "{alignment}");
    // 200 bytes inside one 512-byte sector of the sixth block, then 200 bytes across a sector
    // boundary: one alignment unit, then two (or one 4 KiB block).
    for (offset, units) in [(5 * 4096 + 100, 1), (5 * 4096 + 400, if alignment < 4096 { 2 } else { 1 })] {
        let mut buf = [0u8; 200];
        let before = thread_read_bytes();
        file.read_at(offset, &mut buf).unwrap();
        let read = thread_read_bytes() - before;
        eprintln!("offset {offset}: read {read} bytes from the device (alignment {alignment})");
        assert_eq!(&buf[..], &data[offset as usize..offset as usize + 200]);
        if read > 0 {
            // (Some kernels do not account O_DIRECT reads here; then there is nothing to compare.)
            assert_eq!(read, units * alignment, "offset {offset}: alignment {alignment}");
        }
    }
}

#[test]
fn unaligned_direct_write_is_invalid_argument() {
    let (_dir, storage) = storage();
    let file = storage.open("direct", OpenOptions::create().with_direct(true)).unwrap();
    if storage.direct_io_fallbacks() > 0 {
        eprintln!("filesystem does not support O_DIRECT; the file is buffered and accepts any write");
        return;
    }
    let buf = AlignedBuf::new(DIRECT_IO_ALIGNMENT_BYTES);
    let err = file.write_at(512, &buf).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(msg) if msg.contains("O_DIRECT")), "{err}");
    let err = file.write_at(0, &buf[..100]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(file.len().unwrap(), 0);
    assert_eq!(storage.io_stats().write_ops, 0);
}
