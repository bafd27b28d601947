//! `strata demo`: the README's main job. Creates a store, writes, reads, scans, restarts and checks
//! that everything acknowledged survived, printing what it did.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use strata::{Db, Durability, EngineKind, Error, Options, WriteBatch};

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn key(i: u64) -> String {
    format!("user:{i:08}")
}

fn value(i: u64) -> String {
    format!("{{\"id\":{i},\"name\":\"user {i}\",\"visits\":0}}")
}

/// Runs the demo in `dir` (default: a fresh temporary directory, removed afterwards), printing
/// one numbered line per step to `out`; `Err` when a step failed or the data did not survive.
pub fn run(
    dir: Option<PathBuf>,
    engine: EngineKind,
    records: u64,
    out: &mut impl Write,
) -> Result<(), Error> {
    let (dir, _cleanup) = match dir {
        Some(d) => (d, None),
        None => {
            let d = std::env::temp_dir().join(format!("strata-demo-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            (d.clone(), Some(TempDir(d)))
        }
    };
    let mut say = |line: String| writeln!(out, "{line}").map_err(|e| Error::io("writing to stdout", e));
    say(format!("strata demo: engine '{engine}' in {}", dir.display()))?;

    let db = Db::open(&dir, Options::new(engine))?;
    let limits = db.limits();
    say(format!(
        "1. created the store (limits: keys up to {} B, values up to {} B)",
        limits.max_key_bytes, limits.max_value_bytes
    ))?;
    say(write_records(&db, records)?)?;
    say(read_back(&db, records)?)?;
    say(update_delete_and_sync(&db)?)?;
    say(match db.capabilities().ordered {
        true => scan_prefix(&db)?,
        false => point_reads_without_order(&db, records)?,
    })?;

    let before = db.stats()?;
    db.close()?;
    drop(db);
    let started = Instant::now();
    let db = Db::open(&dir, Options::existing())?;
    let restart = Restart::check(&db, records, started.elapsed().as_secs_f64())?;
    say(restart.describe(records))?;

    let report = db.verify()?;
    let after = db.stats()?;
    let live_keys = match after.live_keys {
        Some(n) => format!("{n} live keys"),
        None => format!("live keys not counted by '{engine}' (its stats leave them unknown)"),
    };
    say(format!(
        "7. verify: {} files, {} bytes, every checksum matched; {live_keys}, {} bytes on disk, {} \
         bytes written to storage before the restart",
        report.files_checked, report.bytes_checked, after.disk_bytes, before.io.bytes_written
    ))?;
    db.close()?;
    if !restart.as_written() {
        return Err(Error::Corruption {
            file: dir.display().to_string(),
            offset: 0,
            what: "the demo's data did not survive the restart as written".into(),
        });
    }
    say("done: the store behaved as expected.".into())?;
    Ok(())
}

/// Step 2: every record, in `Buffered` batches of 1000, then a flush.
fn write_records(db: &Db, records: u64) -> Result<String, Error> {
    let started = Instant::now();
    let mut batch = WriteBatch::new();
    for i in 0..records {
        batch.put(key(i), value(i));
        if batch.len() == 1000 {
            db.write(std::mem::take(&mut batch), Durability::Buffered)?;
        }
    }
    if !batch.is_empty() {
        db.write(batch, Durability::Buffered)?;
    }
    db.flush()?;
    let secs = started.elapsed().as_secs_f64();
    Ok(format!(
        "2. wrote {records} records in batches of 1000 and flushed: {:.2} s ({:.0} records/s)",
        secs,
        records as f64 / secs.max(1e-9)
    ))
}

/// Step 3: up to 100,000 records read back, spread evenly over the keys.
fn read_back(db: &Db, records: u64) -> Result<String, Error> {
    let started = Instant::now();
    let reads = records.min(100_000);
    let step = (records / reads.max(1)).max(1);
    let mut found = 0;
    for i in (0..records).step_by(step as usize).take(reads as usize) {
        if db.get(key(i))?.as_deref() == Some(value(i).as_bytes()) {
            found += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    Ok(format!(
        "3. read {reads} records back: {found} matched ({:.0} reads/s)",
        reads as f64 / secs.max(1e-9)
    ))
}

/// Step 4: ten increments of `counter:visits` through rmw, the first record deleted, one `Sync`
/// write.
fn update_delete_and_sync(db: &Db) -> Result<String, Error> {
    for _ in 0..10 {
        db.rmw(b"counter:visits", |old| {
            let n = old.and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok()).unwrap_or(0);
            Some((n + 1).to_string().into_bytes())
        })?;
    }
    db.delete(key(0))?;
    db.put_with("user:zz-last", "sync write", Durability::Sync)?;
    Ok("4. ran 10 read-modify-write increments, deleted user:00000000, made one Sync write".into())
}

/// Step 5: the first and last keys under `user:`, and a timed count of all of them.
fn scan_prefix(db: &Db) -> Result<String, Error> {
    let first: Vec<String> = db
        .prefix("user:")?
        .take(3)
        .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
        .collect::<Result<_, _>>()?;
    let last: Vec<String> = db
        .prefix_rev("user:")?
        .take(2)
        .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
        .collect::<Result<_, _>>()?;
    let started = Instant::now();
    let total = db.prefix("user:")?.count();
    Ok(format!(
        "5. scanned prefix 'user:': first {first:?}, last (reverse) {last:?}, {total} keys in {:.2} s",
        started.elapsed().as_secs_f64()
    ))
}

/// Step 5 on an engine that keeps no key order (`f2`): timed point reads of every record
/// instead of a prefix scan, which it refuses.
fn point_reads_without_order(db: &Db, records: u64) -> Result<String, Error> {
    let started = Instant::now();
    let mut found = 0u64;
    for i in 0..records {
        found += u64::from(db.get(key(i))?.is_some());
    }
    Ok(format!(
        "5. '{}' keeps no key order (hash-indexed: no range or prefix scans, which it refuses with \
         Unsupported); instead read every key under 'user:' by key: {found} found in {:.2} s",
        db.kind(),
        started.elapsed().as_secs_f64()
    ))
}

/// Step 6: what the reopened store holds of what steps 2 and 4 left.
struct Restart {
    reopen_secs: f64,
    /// Every record but the deleted first one reads back as written.
    survived: bool,
    counter: Option<String>,
    deleted_gone: bool,
}

impl Restart {
    fn check(db: &Db, records: u64, reopen_secs: f64) -> Result<Restart, Error> {
        let survived =
            (1..records).all(|i| matches!(db.get(key(i)), Ok(Some(v)) if v == value(i).as_bytes()));
        let counter = db.get("counter:visits")?.map(|v| String::from_utf8_lossy(&v).into_owned());
        let deleted_gone = db.get(key(0))?.is_none();
        Ok(Restart { reopen_secs, survived, counter, deleted_gone })
    }

    fn describe(&self, records: u64) -> String {
        format!(
            "6. closed and reopened in {:.3} s: all {} remaining records intact: {}; counter = {}; \
             deleted key gone: {}",
            self.reopen_secs,
            records.saturating_sub(1),
            self.survived,
            self.counter.as_deref().unwrap_or("missing"),
            self.deleted_gone
        )
    }

    /// The store kept what was acknowledged: the records, the ten increments, the delete.
    fn as_written(&self) -> bool {
        self.survived && self.deleted_gone && self.counter.as_deref() == Some("10")
    }
}
