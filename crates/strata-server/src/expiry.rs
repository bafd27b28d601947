//! The background sweep that deletes expired keys (reads already treat them as absent): it reads
//! the expiry index up to now, oldest first, and deletes each key whose own record still says it
//! is due. Ordered engines only; on others an expired key is dropped when a write meets it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use strata::WriteBatch;

use crate::keyspace::{expiry_record, is_expired, now_ms, EXPIRY_PREFIX};
use crate::state::ServerState;

/// Index entries read per pass; a full pass starts the next one at once.
const ENTRIES_PER_PASS: usize = 256;
const IDLE_PAUSE: Duration = Duration::from_millis(100);

/// Runs until the server shuts down.
pub fn run_sweeper(state: &ServerState) {
    if !state.keyspace.ordered() {
        return;
    }
    let mut reported = false;
    while !state.is_shutting_down() {
        match sweep_once(state, now_ms()) {
            Ok(n) if n == ENTRIES_PER_PASS => continue,
            Ok(_) => reported = false,
            Err(e) if !reported => {
                use std::io::Write;
                let _ = writeln!(std::io::stderr(), "strata serve: the expiry sweep failed ({e}); retrying");
                reported = true;
            }
            Err(_) => {}
        }
        std::thread::sleep(IDLE_PAUSE);
    }
}

/// One pass: returns how many index entries it handled.
pub fn sweep_once(state: &ServerState, now: u64) -> strata::Result<usize> {
    let ks = &state.keyspace;
    if !ks.ordered() {
        return Ok(0);
    }
    let due: Vec<Vec<u8>> = ks
        .db()
        .range(vec![EXPIRY_PREFIX]..expiry_record(now + 1, b""))?
        .take(ENTRIES_PER_PASS)
        .map(|item| item.map(|(record, _)| record))
        .collect::<strata::Result<_>>()?;
    for record in &due {
        // An index key shorter than its 8 time bytes is not one this server wrote: dropped.
        let Some(at) = record.get(1..9).and_then(|t| <[u8; 8]>::try_from(t).ok()).map(u64::from_be_bytes)
        else {
            let mut batch = WriteBatch::new();
            batch.delete(record.clone());
            ks.commit(batch)?;
            continue;
        };
        let key = &record[9..];
        let _locks = ks.lock(&[key]);
        match ks.raw_entry(key)? {
            Some(entry) if entry.expire_at_ms() == at && is_expired(at, now) => {
                ks.replace(key, Some(&entry), None)?;
                state.counters.expired_keys.fetch_add(1, Ordering::Relaxed);
            }
            // A hint left behind by a change of expiry: the key record decides.
            _ => {
                let mut batch = WriteBatch::new();
                batch.delete(record.clone());
                ks.commit(batch)?;
            }
        }
    }
    Ok(due.len())
}
