//! One writer thread: Sync and Buffered puts, deletes and batches on its own keys (`t<i>/…`) until
//! its first failed call, with an exact model of what it had acknowledged. Keys are private to a
//! thread, so each thread's model is exact for its key prefix whatever the others do.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use strata::{Db, Durability, Error, WriteBatch};

/// One key's write: `Some(value)` puts it, `None` deletes it.
pub type Write = (Vec<u8>, Option<Vec<u8>>);

/// The first call of a thread that returned `Err`; the thread stops there, so this is its only
/// unacknowledged write (whole, as a batch would be).
pub struct Failed {
    pub what: &'static str,
    pub writes: Vec<Write>,
    pub error: Error,
}

pub struct ThreadLog {
    pub thread: usize,
    /// Every acknowledged (`Ok`) write applied in order: the state readers must see.
    pub acked: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Every key this thread ever wrote, deleted ones included (f2 cannot scan, so reads `get`
    /// these).
    pub keys: Vec<Vec<u8>>,
    pub acked_calls: u64,
    pub acked_bytes: u64,
    pub failed: Option<Failed>,
}

impl ThreadLog {
    pub fn prefix(&self) -> Vec<u8> {
        format!("t{}/", self.thread).into_bytes()
    }

    /// The model with the failed call applied too: what a reopen may show instead of `acked`
    /// (a failed write is unacknowledged, so the log may hold it; docs/testing.md, layer 5).
    pub fn with_failed(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut model = self.acked.clone();
        for (key, value) in self.failed.iter().flat_map(|f| &f.writes) {
            apply(&mut model, key, value.as_deref());
        }
        model
    }
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, key: &[u8], value: Option<&[u8]>) {
    match value {
        Some(v) => model.insert(key.to_vec(), v.to_vec()),
        None => model.remove(key),
    };
}

/// xorshift64*: deterministic per thread, no dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

struct Writer<'a> {
    db: &'a Db,
    log: ThreadLog,
    rng: Rng,
    next_key: u64,
    seq: u64,
    max_value: usize,
}

/// Writes until the first call returns `Err`, then returns the log. `written` counts payload
/// bytes over all threads; past `limit` the disk is not filling up, which fails the test.
/// Values are at most `max_value` bytes (the engine's limit; treeline's is below 1.5 KiB).
pub fn write_until_error(
    db: &Db,
    thread: usize,
    written: &AtomicU64,
    limit: u64,
    max_value: usize,
) -> ThreadLog {
    let log = ThreadLog {
        thread,
        acked: BTreeMap::new(),
        keys: Vec::new(),
        acked_calls: 0,
        acked_bytes: 0,
        failed: None,
    };
    let rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (thread as u64 + 1));
    let max_value = max_value.min(4096);
    let mut w = Writer { db, log, rng, next_key: 0, seq: 0, max_value };
    loop {
        let (what, writes, durability) = w.next_call();
        let bytes: u64 = writes.iter().map(|(k, v)| (k.len() + v.as_ref().map_or(0, Vec::len)) as u64).sum();
        match w.call(&writes, durability) {
            Ok(()) => {
                for (key, value) in &writes {
                    apply(&mut w.log.acked, key, value.as_deref());
                }
                w.log.acked_calls += 1;
                w.log.acked_bytes += bytes;
            }
            Err(error) => {
                w.log.failed = Some(Failed { what, writes, error });
                return w.log;
            }
        }
        let total = written.fetch_add(bytes, Ordering::Relaxed) + bytes;
        assert!(total < limit, "thread {thread}: {total} bytes acknowledged and the disk never filled up");
    }
}

impl Writer<'_> {
    fn durability(&mut self) -> Durability {
        if self.rng.below(2) == 0 {
            Durability::Sync
        } else {
            Durability::Buffered
        }
    }

    /// A put, a delete of a live key, or a batch of 2–6 distinct keys (puts and a delete), each
    /// Sync or Buffered. Puts are mostly to new keys so the live data grows until the disk is
    /// full (an engine that reclaims overwritten space would otherwise never fill it).
    fn next_call(&mut self) -> (&'static str, Vec<Write>, Durability) {
        let durability = self.durability();
        match self.rng.below(10) {
            0..=5 => ("put", vec![self.put()], durability),
            6 => match self.live_key() {
                Some(key) => ("delete", vec![(key, None)], durability),
                None => ("put", vec![self.put()], durability),
            },
            _ => {
                let n = 2 + self.rng.below(5) as usize;
                let mut writes: Vec<Write> = Vec::with_capacity(n);
                if let Some(key) = self.live_key() {
                    writes.push((key, None));
                }
                while writes.len() < n {
                    let put = self.put();
                    if writes.iter().all(|(k, _)| *k != put.0) {
                        writes.push(put);
                    }
                }
                ("batch", writes, durability)
            }
        }
    }

    /// A put of a fresh key (4 in 5) or of an earlier one, with a value no other call writes
    /// (it starts with the thread and call number), from a quarter of `max_value` to all of it.
    fn put(&mut self) -> Write {
        let key = match self.rng.below(5) {
            0 if !self.log.keys.is_empty() => {
                self.log.keys[self.rng.below(self.log.keys.len() as u64) as usize].clone()
            }
            _ => {
                self.next_key += 1;
                let key = format!("t{}/k{:07}", self.log.thread, self.next_key).into_bytes();
                self.log.keys.push(key.clone());
                key
            }
        };
        self.seq += 1;
        let mut value = format!("v{}:{}:", self.log.thread, self.seq).into_bytes();
        let len = self.max_value / 4 + self.rng.below(self.max_value as u64 * 3 / 4 + 1) as usize;
        let fill = self.rng.below(251) as u8;
        value.extend((value.len()..len).map(|i| fill.wrapping_add(i as u8)));
        (key, Some(value))
    }

    fn live_key(&mut self) -> Option<Vec<u8>> {
        if self.log.acked.is_empty() {
            return None;
        }
        let key = &self.log.keys[self.rng.below(self.log.keys.len() as u64) as usize];
        self.log.acked.contains_key(key).then(|| key.clone())
    }

    fn call(&self, writes: &[Write], durability: Durability) -> strata::Result<()> {
        match writes {
            [(key, Some(value))] => self.db.put_with(key, value, durability),
            [(key, None)] => self.db.delete_with(key, durability),
            _ => {
                let mut batch = WriteBatch::new();
                for (key, value) in writes {
                    match value {
                        Some(v) => batch.put(key.clone(), v.clone()),
                        None => batch.delete(key.clone()),
                    };
                }
                self.db.write(batch, durability)
            }
        }
    }
}
