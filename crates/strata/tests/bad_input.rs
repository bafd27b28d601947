//! Bad input gets a clear, one-line error — never a panic.

use std::sync::Arc;

use strata::storage::{MemStorage, Storage};
use strata::{Db, Durability, EngineKind, Error, Options, WriteBatch};

fn mem_db() -> (Arc<MemStorage>, Db) {
    let storage = Arc::new(MemStorage::new());
    let db = Db::open("unused", Options::new(EngineKind::Memory).storage(storage.clone())).unwrap();
    (storage, db)
}

fn one_line(e: &Error) -> String {
    let text = e.to_string();
    assert!(!text.contains('\n'), "error spans lines: {text}");
    text
}

#[test]
fn oversized_key_value_and_batch_are_invalid_arguments() {
    let (_s, db) = mem_db();
    let limits = db.limits();
    let big_key = vec![b'k'; limits.max_key_bytes + 1];
    let err = db.put(&big_key, b"v").unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(one_line(&err).contains("key of"), "{err}");
    assert!(matches!(db.get(&big_key).unwrap_err(), Error::InvalidArgument(_)));
    assert!(matches!(db.delete(&big_key).unwrap_err(), Error::InvalidArgument(_)));

    let big_value = vec![0u8; limits.max_value_bytes + 1];
    let err = db.put(b"k", &big_value).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(one_line(&err).contains("value of"), "{err}");

    let mut batch = WriteBatch::new();
    batch.put(b"ok".to_vec(), b"v".to_vec()).put(big_key.clone(), b"v".to_vec());
    assert!(matches!(db.write(batch, Durability::Sync).unwrap_err(), Error::InvalidArgument(_)));
    assert_eq!(db.get(b"ok").unwrap(), None, "a rejected batch must not be partly applied");

    // A read-modify-write whose result is too large keeps the old value and reports the error.
    db.put(b"n", b"old").unwrap();
    let err = db.rmw(b"n", |_| Some(vec![0u8; limits.max_value_bytes + 1])).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(db.get(b"n").unwrap().as_deref(), Some(&b"old"[..]));

    // Exactly at the limit is fine.
    db.put(vec![b'k'; limits.max_key_bytes], b"").unwrap();
}

/// Every engine is in the default build; a build without one (`--no-default-features`) refuses
/// it by name (`unsupported_engines_name_themselves`).
#[test]
fn every_engine_is_in_the_default_build() {
    for kind in EngineKind::ALL {
        assert_eq!(kind.is_available(), cfg!(feature = "laser") || kind != EngineKind::Laser, "{kind}");
    }
}

#[cfg(not(feature = "laser"))]
#[test]
fn unsupported_engines_name_themselves() {
    let kind = EngineKind::Laser;
    let storage = Arc::new(MemStorage::new());
    let err = Db::open("unused", Options::new(kind).storage(storage.clone())).unwrap_err();
    assert!(matches!(err, Error::Unsupported(_)), "{err}");
    assert!(one_line(&err).contains(kind.name()), "{err}");
    assert!(storage.list_names().is_empty(), "a failed open must not leave a manifest behind");
}

/// Regression (found by review): the manifest was stored before the engine checked its options,
/// so a create with an option the engine refuses left a durable manifest (and engine files), and
/// the directory could then only be opened as that engine. A failed create now leaves it empty.
#[test]
fn a_create_the_engine_refuses_leaves_the_directory_empty() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, bad) in [
        (EngineKind::F2, Options::new(EngineKind::F2).engine_option("no_such_option", "1")),
        (EngineKind::Memory, Options::new(EngineKind::Memory).wal_segment_bytes(100)),
    ] {
        let err = Db::open(dir.path(), bad).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{kind}: {err}");
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "LOCK")
            .collect();
        assert!(left.is_empty(), "{kind}: a failed create left {left:?}");
    }
    let db = Db::open(dir.path(), Options::new(EngineKind::Flex)).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
}

#[cfg(not(feature = "laser"))]
trait ListNames {
    fn list_names(&self) -> Vec<String>;
}

#[cfg(not(feature = "laser"))]
impl ListNames for MemStorage {
    fn list_names(&self) -> Vec<String> {
        use strata::storage::Storage;
        self.list().unwrap().into_iter().filter(|n| n != "LOCK").collect()
    }
}

#[test]
fn second_open_in_the_same_process_is_locked_until_the_first_closes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::new(EngineKind::Memory)).unwrap();
    let err = Db::open(dir.path(), Options::new(EngineKind::Memory)).unwrap_err();
    assert!(matches!(err, Error::Locked(_)), "{err}");
    assert!(one_line(&err).contains("locked"), "{err}");
    drop(db);
    Db::open(dir.path(), Options::existing()).unwrap();
}

#[test]
fn close_releases_the_directory_lock_while_the_handle_lives() {
    let dir = tempfile::tempdir().unwrap();
    let first = Db::open(dir.path(), Options::new(EngineKind::Memory)).unwrap();
    first.put(b"k", b"v").unwrap();
    first.close().unwrap();
    let second = Db::open(dir.path(), Options::existing()).unwrap();
    assert_eq!(second.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert!(matches!(first.get(b"k"), Err(Error::Closed)));
    drop(first);
    second.put(b"k2", b"v2").unwrap();
}

#[test]
fn manifest_records_the_engine_and_existing_opens_need_one() {
    let dir = tempfile::tempdir().unwrap();
    let err = Db::open(dir.path(), Options::existing()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    {
        let db = Db::open(dir.path(), Options::new(EngineKind::Memory)).unwrap();
        db.put(b"k", b"v").unwrap();
    }
    let db = Db::open(dir.path(), Options::existing()).unwrap();
    assert_eq!(db.kind(), EngineKind::Memory);
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(db);
    let err = Db::open(dir.path(), Options::new(EngineKind::Memory).error_if_exists(true)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn wrong_engine_for_a_directory_is_incompatible() {
    // Write a manifest naming another engine, as a future build with that engine would.
    let storage = Arc::new(MemStorage::new());
    strata::Manifest::new(EngineKind::Flex).store(storage.as_ref()).unwrap();
    let err = Db::open("unused", Options::new(EngineKind::Memory).storage(storage.clone())).unwrap_err();
    assert!(matches!(err, Error::Incompatible(_)), "{err}");
    assert!(one_line(&err).contains("'flex'"), "{err}");
    let db = Db::open("unused", Options::new(EngineKind::Flex).storage(storage)).unwrap();
    assert_eq!(db.kind(), EngineKind::Flex);
}

#[test]
fn refuses_to_create_a_database_in_a_non_empty_foreign_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious.txt"), b"user data").unwrap();
    let err = Db::open(dir.path(), Options::new(EngineKind::Memory)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(dir.path().join("precious.txt").exists());
    // Names that start like an engine's files but are not theirs: still not a lost manifest.
    for name in ["snapshot-2024.png", "wal-notes"] {
        std::fs::write(dir.path().join(name), b"user data").unwrap();
        let err = Db::open(dir.path(), Options::new(EngineKind::Memory)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{name}: {err}");
    }
}

/// Found by fuzzing: a store whose manifest was deleted was refused as "not a Strata
/// database", an invalid argument; its engine files say it was one, so the manifest is corrupt.
#[test]
fn a_store_that_lost_its_manifest_is_corruption_naming_it() {
    for kind in [EngineKind::Memory, EngineKind::Flex, EngineKind::F2, EngineKind::Treeline] {
        let storage = Arc::new(MemStorage::new());
        let db = Db::open("unused", Options::new(kind).storage(storage.clone())).unwrap();
        db.put(b"k", b"v").unwrap();
        db.close().unwrap();
        drop(db);
        storage.remove("STRATA-MANIFEST").unwrap();
        for options in [Options::new(kind), Options::existing()] {
            let err = Db::open("unused", options.storage(storage.clone())).err();
            let err = err.unwrap_or_else(|| panic!("{kind}: a store without its manifest opened"));
            assert!(
                matches!(&err, Error::Corruption { file, what, .. }
                    if file == "STRATA-MANIFEST" && what.contains(kind.name())),
                "{kind}: {err}"
            );
        }
    }
}

#[test]
fn closed_database_rejects_operations() {
    let (_s, db) = mem_db();
    db.put(b"a", b"1").unwrap();
    let mut scan = db.iter().unwrap();
    db.close().unwrap();
    assert!(matches!(db.get(b"a").unwrap_err(), Error::Closed));
    assert!(matches!(db.put(b"a", b"2").unwrap_err(), Error::Closed));
    assert!(matches!(db.flush().unwrap_err(), Error::Closed));
    assert!(matches!(scan.next(), Some(Err(Error::Closed))));
    db.close().unwrap();
}

#[test]
fn empty_values_are_values_and_empty_batches_are_no_ops() {
    let (_s, db) = mem_db();
    db.put(b"e", b"").unwrap();
    assert_eq!(db.get(b"e").unwrap(), Some(vec![]));
    db.write(WriteBatch::new(), Durability::Sync).unwrap();
    let all: Vec<_> = db.iter().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(all, vec![(b"e".to_vec(), vec![])]);
}

#[test]
fn db_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
}

#[test]
fn engine_options_reach_the_engine_and_unknown_ones_are_refused() {
    let open = |options: Options| Db::open("unused", options.storage(Arc::new(MemStorage::new())));
    let flex = || Options::new(EngineKind::Flex).memory_budget_bytes(16 << 20);
    let db = open(flex().engine_option("cache_bytes", "3MiB")).unwrap();
    assert_eq!(db.stats().unwrap().counter("memory.cache_capacity_bytes"), Some(3 << 20));
    db.close().unwrap();
    // Setting a name again replaces its value.
    let db = open(flex().engine_option("cache_bytes", "1MiB").engine_option("cache_bytes", "2MiB")).unwrap();
    assert_eq!(db.stats().unwrap().counter("memory.cache_capacity_bytes"), Some(2 << 20));
    db.close().unwrap();

    let err = open(flex().engine_option("cache_size", "3MiB")).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(one_line(&err).contains("'cache_size'") && one_line(&err).contains("cache_bytes"), "{err}");
    let err = open(flex().engine_option("max_interval_records", "lots")).unwrap_err();
    assert!(one_line(&err).contains("max_interval_records=\"lots\""), "{err}");
    let err = open(Options::new(EngineKind::Memory).engine_option("cache_bytes", "1MiB")).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)) && one_line(&err).contains("takes none"), "{err}");
    let err = open(Options::new(EngineKind::F2).engine_option("read_cache", "1MiB")).unwrap_err();
    assert!(one_line(&err).contains("read_cache_bytes"), "{err}");
}

#[test]
fn a_bulk_load_out_of_order_or_oversized_is_refused_naming_the_record() {
    for kind in [EngineKind::Memory, EngineKind::Treeline] {
        let storage = Arc::new(MemStorage::new());
        let db = Db::open("unused", Options::new(kind).storage(storage)).unwrap();
        let err = db.bulk_load([(b"b".to_vec(), b"1".to_vec()), (b"a".to_vec(), b"2".to_vec())]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{kind}: {err}");
        let text = one_line(&err);
        assert!(text.contains("record 1") && text.contains("strictly increase"), "{kind}: {text}");
        let err = db.bulk_load([(b"a".to_vec(), b"1".to_vec()), (b"a".to_vec(), b"2".to_vec())]).unwrap_err();
        assert!(one_line(&err).contains("\"a\" follows \"a\""), "{kind}: duplicate keys: {err}");
        let big_value = vec![0u8; db.limits().max_value_bytes + 1];
        let err = db.bulk_load([(b"a".to_vec(), big_value)]).unwrap_err();
        assert!(one_line(&err).contains("record 0: value of"), "{kind}: {err}");
        assert_eq!(db.bulk_load([(b"x", b"1"), (b"y", b"2")]).unwrap(), 2, "{kind}: the handle still loads");
        assert_eq!(db.get(b"y").unwrap().as_deref(), Some(b"2".as_slice()), "{kind}");
    }
}
