//! What the store must show: on the failing handle, never a failed write (reads may return an
//! error instead of data); after reopen, every acknowledged write, with each thread's failed call
//! applied whole or not at all.

use std::collections::BTreeMap;

use strata::{Db, EngineKind, Error};

use crate::writer::ThreadLog;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// How reads on one handle answered: data (checked against the model) or errors.
#[derive(Default)]
pub struct ReadTally {
    pub data: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

impl ReadTally {
    fn error(&mut self, e: &Error) {
        self.errors += 1;
        self.first_error.get_or_insert_with(|| e.to_string());
    }
}

impl std::fmt::Display for ReadTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} reads returned data, {} an error", self.data, self.errors)?;
        if let Some(e) = &self.first_error {
            write!(f, " ({e})")?;
        }
        Ok(())
    }
}

/// Reads on the handle whose writes failed, once no write is in flight: a read that returns data
/// must equal the acknowledged model exactly — a failed put's value, a key a failed delete
/// removed or any part of a failed batch is a bug (docs/testing.md, layer 5, "same handle").
pub fn same_handle_shows_no_failed_write(kind: EngineKind, db: &Db, log: &ThreadLog, tally: &mut ReadTally) {
    let failed_keys = log.failed.iter().flat_map(|f| f.writes.iter().map(|(k, _)| k));
    for key in failed_keys.chain(&log.keys) {
        match db.get(key) {
            Ok(found) => {
                tally.data += 1;
                assert_eq!(
                    found.as_ref(),
                    log.acked.get(key),
                    "{kind} thread {}: key {} on the failing handle does not match the acknowledged \
                     writes (a failed write is visible)",
                    log.thread,
                    String::from_utf8_lossy(key)
                );
            }
            Err(e) => tally.error(&e),
        }
    }
    if db.capabilities().ordered {
        scan_matches_model(kind, db, log, &log.acked, tally);
    }
}

/// A prefix scan of the thread's keys: the items before any error must be the model's first
/// items; a scan that ends without error must equal the model.
fn scan_matches_model(kind: EngineKind, db: &Db, log: &ThreadLog, model: &Model, tally: &mut ReadTally) {
    let mut expected = model.iter();
    let iter = match db.prefix(log.prefix()) {
        Ok(iter) => iter,
        Err(e) => return tally.error(&e),
    };
    for item in iter {
        match item {
            Ok((key, value)) => {
                tally.data += 1;
                let want = expected.next().map(|(k, v)| (k.as_slice(), v.as_slice()));
                assert!(
                    want == Some((key.as_slice(), value.as_slice())),
                    "{kind} thread {}: scan returned {} where the model has {:?}",
                    log.thread,
                    String::from_utf8_lossy(&key),
                    want.map(|(k, _)| String::from_utf8_lossy(k)),
                );
            }
            Err(e) => return tally.error(&e),
        }
    }
    let missing = expected.next().map(|(k, _)| String::from_utf8_lossy(k).into_owned());
    assert!(missing.is_none(), "{kind} thread {}: scan ended before {missing:?}", log.thread);
}

/// After reopen: each thread's keys hold its acknowledged model, or that model with its failed
/// call applied as a whole (an unacknowledged write may be in the log, docs/testing.md layer 5).
/// Returns whether the failed call came back. Reads must not fail here.
pub fn reopened_holds_every_acknowledged_write(kind: EngineKind, db: &Db, log: &ThreadLog) -> bool {
    let found = read_keys(kind, db, log);
    let with_failed = log.with_failed();
    let applied = if matches_model(&found, &log.acked) {
        false
    } else if matches_model(&found, &with_failed) {
        true
    } else {
        let lost: Vec<_> = log
            .acked
            .keys()
            .filter(|k| found.get(*k).and_then(Option::as_ref) != log.acked.get(*k))
            .collect();
        panic!(
            "{kind} thread {}: after reopen {} keys differ from the acknowledged writes (first: {:?}); \
             the failed call ({:?}) was neither absent nor whole",
            log.thread,
            lost.len(),
            lost.first().map(|k| String::from_utf8_lossy(k)),
            log.failed.as_ref().map(|f| f.what),
        );
    };
    if db.capabilities().ordered {
        let model = if applied { &with_failed } else { &log.acked };
        let mut tally = ReadTally::default();
        scan_matches_model(kind, db, log, model, &mut tally);
        assert_eq!(tally.errors, 0, "{kind} thread {}: scan after reopen: {tally}", log.thread);
    }
    applied
}

/// Every key the thread wrote (its failed call's too) and what `get` returns for it.
fn read_keys(kind: EngineKind, db: &Db, log: &ThreadLog) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
    let failed_keys = log.failed.iter().flat_map(|f| f.writes.iter().map(|(k, _)| k));
    failed_keys
        .chain(&log.keys)
        .map(|key| {
            let value = db.get(key).unwrap_or_else(|e| panic!("{kind}: get after reopen: {e}"));
            (key.clone(), value)
        })
        .collect()
}

fn matches_model(found: &BTreeMap<Vec<u8>, Option<Vec<u8>>>, model: &Model) -> bool {
    found.iter().all(|(key, value)| value.as_ref() == model.get(key))
}
