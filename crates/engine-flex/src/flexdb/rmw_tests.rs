//! `rmw` reads the table before it takes the `mem` lock; a commit that finishes in between must
//! send it back to read again, or it would compute from a value older than the one committed.

use std::cell::RefCell;
use std::sync::Arc;

use strata_core::{Durability, EngineConfig, WriteBatch};
use strata_io::MemStorage;

use super::db::FlexDb;
use super::FlexOptions;

type Hook = Box<dyn FnOnce()>;

thread_local! {
    static AFTER_TABLE_READ: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Runs the hook set by this thread's test, once, right after `rmw` read the table.
pub(super) fn after_table_read() {
    if let Some(f) = AFTER_TABLE_READ.with(|h| h.borrow_mut().take()) {
        f();
    }
}

#[test]
fn an_rmw_whose_table_read_is_overtaken_by_a_commit_reads_again() {
    let config = EngineConfig::default();
    let engine = FlexDb::open(Arc::new(MemStorage::new()), &config, &FlexOptions::default()).unwrap();
    let put = |db: &FlexDb, value: &[u8]| db.write(WriteBatch::single(b"k", Some(value)), Durability::None);
    put(&engine, b"1").unwrap();
    engine.commit().unwrap(); // "k" = 1 is in the table, no MemTable holds it
    let writer = engine.clone();
    AFTER_TABLE_READ.with(|h| {
        *h.borrow_mut() = Some(Box::new(move || {
            // Between the rmw's table read (it saw 1) and its `mem` lock: a write of 2 that a
            // commit moves into the table, so no MemTable shows it any more.
            put(&writer, b"2").unwrap();
            writer.commit().unwrap();
        }))
    });
    let mut seen = Vec::new();
    let stored = engine
        .rmw(
            b"k",
            &mut |old| {
                seen.push(old.map(<[u8]>::to_vec));
                Some([old.unwrap_or_default(), b"+"].concat())
            },
            Durability::None,
        )
        .unwrap();
    assert_eq!(stored.as_deref(), Some(&b"2+"[..]), "computed from the overtaken value");
    assert_eq!(seen, [Some(b"2".to_vec())], "f ran once, on the current value");
    assert_eq!(engine.get(b"k").unwrap().as_deref(), Some(&b"2+"[..]));
    engine.shutdown(false).unwrap();
}
