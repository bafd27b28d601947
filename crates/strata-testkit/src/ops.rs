//! The operations a randomized run issues, and the seeded generator that draws them.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Bound;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use strata_core::{BatchOp, Direction, Durability, Engine, Key, KeyRange, Limits, Result, Value, WriteBatch};

use crate::escape;
use crate::keyspace::KeySpace;

/// A value at which the read-modify-write step deletes instead of appending.
const RMW_DELETE_AT_BYTES: usize = 24;
const BATCH_MAX_OPS: usize = 8;

/// The effect of one write unit (a single write or a whole batch): the final value per key
/// (`None` = deleted). Applying it is atomic.
pub(crate) type Unit = BTreeMap<Key, Option<Value>>;

/// How a simulated crash treats unsynced data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CrashKind {
    /// All unsynced writes are lost.
    DropUnsynced,
    /// A seeded prefix of each file's unsynced writes survives; the last may be torn.
    Random,
    /// A seeded subset of the pages each file's unsynced writes changed survives, in any order.
    Reordered,
}

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Get {
        key: Key,
    },
    Put {
        key: Key,
        value: Value,
        durability: Durability,
    },
    Delete {
        key: Key,
        durability: Durability,
    },
    Batch {
        batch: WriteBatch,
        durability: Durability,
    },
    /// Read-modify-write with [`rmw_step`].
    Rmw {
        key: Key,
        durability: Durability,
    },
    Range {
        range: KeyRange,
        direction: Direction,
        limit: Option<usize>,
    },
    Flush,
    /// `close()`, drop, open again.
    Reopen,
    /// Simulated power loss, drop, open again.
    Crash {
        kind: CrashKind,
    },
}

/// The deterministic closure every `Op::Rmw` applies: create when absent, append a byte, delete
/// once long.
pub(crate) fn rmw_step(old: Option<&[u8]>) -> Option<Value> {
    match old {
        None => Some(b"r".to_vec()),
        Some(v) if v.len() >= RMW_DELETE_AT_BYTES => None,
        Some(v) => {
            let mut next = v.to_vec();
            next.push(b'a' + (v.len() % 26) as u8);
            Some(next)
        }
    }
}

impl Op {
    /// The write unit this op applies, given the value its key holds now (needed by `Rmw`);
    /// `None` for ops that write nothing.
    pub(crate) fn unit(&self, current: impl Fn(&[u8]) -> Option<Value>) -> Option<Unit> {
        let mut unit = Unit::new();
        match self {
            Op::Put { key, value, .. } => {
                unit.insert(key.clone(), Some(value.clone()));
            }
            Op::Delete { key, .. } => {
                unit.insert(key.clone(), None);
            }
            Op::Batch { batch, .. } => {
                for op in batch.ops() {
                    unit.insert(op.key().to_vec(), op.value().map(<[u8]>::to_vec));
                }
            }
            Op::Rmw { key, .. } => {
                unit.insert(key.clone(), rmw_step(current(key).as_deref()));
            }
            Op::Get { .. } | Op::Range { .. } | Op::Flush | Op::Reopen | Op::Crash { .. } => return None,
        }
        Some(unit)
    }

    /// Issues this op's write to `engine` (rmw with [`rmw_step`]); reads and other ops do nothing.
    pub(crate) fn execute_write(&self, engine: &dyn Engine) -> Result<()> {
        match self {
            Op::Put { key, value, durability } => engine.put(key, value, *durability),
            Op::Delete { key, durability } => engine.delete(key, *durability),
            Op::Batch { batch, durability } => engine.write(batch.clone(), *durability),
            Op::Rmw { key, durability } => engine.rmw(key, &mut |old| rmw_step(old), *durability).map(drop),
            Op::Get { .. } | Op::Range { .. } | Op::Flush | Op::Reopen | Op::Crash { .. } => Ok(()),
        }
    }

    pub(crate) fn durability(&self) -> Option<Durability> {
        match self {
            Op::Put { durability, .. }
            | Op::Delete { durability, .. }
            | Op::Batch { durability, .. }
            | Op::Rmw { durability, .. } => Some(*durability),
            _ => None,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Get { key } => write!(f, "get {}", escape::key(key)),
            Op::Put { key, value, durability } => {
                write!(f, "put {} = {} {durability:?}", escape::key(key), escape::value(Some(value)))
            }
            Op::Delete { key, durability } => write!(f, "delete {} {durability:?}", escape::key(key)),
            Op::Batch { batch, durability } => {
                write!(f, "batch {durability:?} [")?;
                for (i, op) in batch.ops().iter().enumerate() {
                    let sep = if i == 0 { "" } else { ", " };
                    match op {
                        BatchOp::Put { key, value } => {
                            write!(f, "{sep}put {} = {}", escape::key(key), escape::value(Some(value)))?
                        }
                        BatchOp::Delete { key } => write!(f, "{sep}delete {}", escape::key(key))?,
                    }
                }
                write!(f, "]")
            }
            Op::Rmw { key, durability } => write!(f, "rmw {} {durability:?}", escape::key(key)),
            Op::Range { range, direction, limit } => {
                write!(f, "range {}", escape::range(range, *direction))?;
                match limit {
                    Some(n) => write!(f, " take {n}"),
                    None => Ok(()),
                }
            }
            Op::Flush => write!(f, "flush"),
            Op::Reopen => write!(f, "reopen (close, drop, open)"),
            Op::Crash { kind } => write!(f, "crash {kind:?} (power loss, drop, open)"),
        }
    }
}

/// Relative weights of each op kind, and the share of each durability among writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpMix {
    pub(crate) get: u32,
    pub(crate) put: u32,
    pub(crate) delete: u32,
    pub(crate) batch: u32,
    pub(crate) rmw: u32,
    pub(crate) range: u32,
    pub(crate) flush: u32,
    pub(crate) reopen: u32,
    pub(crate) crash: u32,
    pub(crate) sync_percent: u32,
    /// Share of `Durability::None` among non-Sync writes; the rest are Buffered.
    pub(crate) unbuffered_percent: u32,
}

impl OpMix {
    pub(crate) const CONFORMANCE: OpMix = OpMix {
        get: 18,
        put: 22,
        delete: 7,
        batch: 10,
        rmw: 8,
        range: 16,
        flush: 2,
        reopen: 1,
        crash: 2,
        sync_percent: 10,
        unbuffered_percent: 50,
    };

    /// Fault phases: no crashes (the check crashes once a call fails), more reopens and flushes so
    /// faults also hit open, recovery and sync paths.
    pub(crate) const FAULTS: OpMix = OpMix {
        get: 14,
        put: 22,
        delete: 6,
        batch: 10,
        rmw: 6,
        range: 8,
        flush: 5,
        reopen: 3,
        crash: 0,
        sync_percent: 25,
        unbuffered_percent: 50,
    };

    /// Mostly Sync writes, for fsync-failure phases.
    pub(crate) const SYNC_HEAVY: OpMix = OpMix {
        get: 4,
        put: 20,
        delete: 3,
        batch: 4,
        rmw: 3,
        range: 0,
        flush: 3,
        reopen: 0,
        crash: 0,
        sync_percent: 60,
        unbuffered_percent: 50,
    };

    /// Writes only (plus flushes), for building up state before a bit flip.
    pub(crate) const WRITES: OpMix = OpMix {
        get: 0,
        put: 30,
        delete: 6,
        batch: 8,
        rmw: 6,
        range: 0,
        flush: 1,
        reopen: 0,
        crash: 0,
        sync_percent: 10,
        unbuffered_percent: 50,
    };

    pub(crate) fn without_crashes(self) -> OpMix {
        OpMix { crash: 0, ..self }
    }
}

/// Draws ops from a seed; the same seed and key space always yield the same sequence.
#[derive(Debug)]
pub(crate) struct Generator {
    rng: SmallRng,
    mix: OpMix,
    limits: Limits,
    /// Counts values drawn, so every written value is distinct.
    value_serial: u64,
}

impl Generator {
    pub(crate) fn new(seed: u64, mix: OpMix, limits: Limits) -> Generator {
        Generator { rng: SmallRng::seed_from_u64(seed), mix, limits, value_serial: 0 }
    }

    pub(crate) fn rng(&mut self) -> &mut SmallRng {
        &mut self.rng
    }

    /// A put of a `value_len`-byte value under a key no earlier write used, with a random
    /// durability.
    pub(crate) fn sized_put(&mut self, keys: &KeySpace, value_len: usize) -> Op {
        self.value_serial += 1;
        // A key no earlier write used: the live data grows by every put, so an engine that
        // gives back overwritten versions' space (a compacting tree) still fills the disk.
        let mut key = format!("fill/{:08}", self.value_serial).into_bytes();
        if key.len() > self.limits.max_key_bytes {
            key = keys.write_key(&mut self.rng);
        }
        let value =
            crate::keyspace::filled_value(value_len.min(self.limits.max_value_bytes), self.value_serial);
        Op::Put { key, value, durability: self.durability() }
    }

    pub(crate) fn next_op(&mut self, keys: &KeySpace) -> Op {
        let m = self.mix;
        let weights = [m.get, m.put, m.delete, m.batch, m.rmw, m.range, m.flush, m.reopen, m.crash];
        let total: u32 = weights.iter().sum();
        let mut roll = self.rng.gen_range(0..total.max(1));
        let mut kind = 0;
        for (i, w) in weights.iter().enumerate() {
            if roll < *w {
                kind = i;
                break;
            }
            roll -= w;
        }
        match kind {
            0 => Op::Get { key: keys.read_key(&mut self.rng) },
            1 => {
                let key = keys.write_key(&mut self.rng);
                let value = self.value(keys);
                Op::Put { key, value, durability: self.durability() }
            }
            2 => Op::Delete { key: keys.write_key(&mut self.rng), durability: self.durability() },
            3 => self.batch(keys),
            4 => Op::Rmw { key: keys.write_key(&mut self.rng), durability: self.durability() },
            5 => self.range(keys),
            6 => Op::Flush,
            7 => Op::Reopen,
            _ => {
                let kind = match self.rng.gen_range(0..10) {
                    0..=3 => CrashKind::Random,
                    4..=6 => CrashKind::Reordered,
                    _ => CrashKind::DropUnsynced,
                };
                Op::Crash { kind }
            }
        }
    }

    pub(crate) fn value(&mut self, keys: &KeySpace) -> Value {
        self.value_serial += 1;
        keys.value(&mut self.rng, self.value_serial)
    }

    pub(crate) fn durability(&mut self) -> Durability {
        if self.rng.gen_range(0..100) < self.mix.sync_percent {
            Durability::Sync
        } else if self.rng.gen_range(0..100) < self.mix.unbuffered_percent {
            Durability::None
        } else {
            Durability::Buffered
        }
    }

    /// 1–8 puts and deletes, a key sometimes repeated (the last op on it wins), within the
    /// engine's batch limit.
    fn batch(&mut self, keys: &KeySpace) -> Op {
        let len = self.rng.gen_range(1..=BATCH_MAX_OPS);
        let mut batch = WriteBatch::new();
        let mut last_key: Option<Key> = None;
        for _ in 0..len {
            let key = match &last_key {
                Some(k) if self.rng.gen_range(0..5) == 0 => k.clone(),
                _ => keys.write_key(&mut self.rng),
            };
            let op = if self.rng.gen_range(0..4) == 0 {
                BatchOp::Delete { key: key.clone() }
            } else {
                BatchOp::Put { key: key.clone(), value: self.value(keys) }
            };
            let op_bytes = op.key().len() + op.value().map_or(0, <[u8]>::len);
            if !batch.is_empty() && batch.payload_bytes() + op_bytes > self.limits.max_batch_bytes {
                break;
            }
            batch.push(op);
            last_key = Some(key);
        }
        Op::Batch { batch, durability: self.durability() }
    }

    /// Prefix ranges, full ranges, and ranges with random bounds — some empty or inverted.
    fn range(&mut self, keys: &KeySpace) -> Op {
        let rng = &mut self.rng;
        let range = match rng.gen_range(0..12) {
            0 | 1 => KeyRange::prefix(&keys.scan_prefix(rng)),
            2 => KeyRange::all(),
            // One key at both ends: a single-key range, or empty when either end is excluded.
            3 => {
                let key = keys.bound_key(rng);
                KeyRange { start: random_bound(rng, key.clone()), end: random_bound(rng, key) }
            }
            _ => {
                let (mut low, mut high) = (keys.bound_key(rng), keys.bound_key(rng));
                if low > high {
                    std::mem::swap(&mut low, &mut high);
                }
                if rng.gen_range(0..7) == 0 {
                    std::mem::swap(&mut low, &mut high);
                }
                KeyRange { start: random_bound(rng, low), end: random_bound(rng, high) }
            }
        };
        let direction = if rng.gen_bool(0.5) { Direction::Forward } else { Direction::Reverse };
        let limit = rng.gen_bool(0.3).then(|| rng.gen_range(0..=5));
        Op::Range { range, direction, limit }
    }
}

fn random_bound(rng: &mut SmallRng, key: Key) -> Bound<Key> {
    match rng.gen_range(0..5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Excluded(key),
        _ => Bound::Included(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits { max_key_bytes: 2048, max_value_bytes: 1 << 20, max_batch_bytes: 1 << 22 };

    #[test]
    fn rmw_step_cycles_through_create_append_delete() {
        let mut v = None;
        let mut seen_delete = false;
        for _ in 0..60 {
            v = rmw_step(v.as_deref());
            seen_delete |= v.is_none();
        }
        assert!(seen_delete);
        assert_eq!(rmw_step(None), Some(b"r".to_vec()));
        assert_eq!(rmw_step(Some(b"")), Some(b"a".to_vec()));
    }

    /// Regression (turtle's disk-full scenario passed 600 writes on 32 KiB of free space): the
    /// disk-filling puts must grow the live data, so each uses a key no earlier put used; over a
    /// small key set a compacting engine gave the overwritten versions' space back.
    #[test]
    fn disk_filling_puts_never_reuse_a_key() {
        let keys = KeySpace::new(7, LIMITS);
        let mut g = Generator::new(7, OpMix::FAULTS, LIMITS);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            match g.sized_put(&keys, 1536) {
                Op::Put { key, value, .. } => {
                    assert_eq!(value.len(), 1536);
                    assert!(seen.insert(key), "a disk-filling put reused a key");
                }
                other => panic!("not a put: {other}"),
            }
        }
    }

    #[test]
    fn same_seed_same_ops() {
        let keys = KeySpace::new(5, LIMITS);
        let mut a = Generator::new(5, OpMix::CONFORMANCE, LIMITS);
        let mut b = Generator::new(5, OpMix::CONFORMANCE, LIMITS);
        for _ in 0..500 {
            assert_eq!(a.next_op(&keys).to_string(), b.next_op(&keys).to_string());
        }
    }

    #[test]
    fn batch_units_keep_the_last_op_per_key() {
        let mut batch = WriteBatch::new();
        batch.put(b"k".to_vec(), b"1".to_vec()).delete(b"k".to_vec()).put(b"j".to_vec(), b"2".to_vec());
        batch.put(b"k".to_vec(), b"3".to_vec());
        let unit = Op::Batch { batch, durability: Durability::None }.unit(|_| None);
        let unit = unit.expect("a batch writes");
        assert_eq!(unit.get(b"k".as_slice()), Some(&Some(b"3".to_vec())));
        assert_eq!(unit.get(b"j".as_slice()), Some(&Some(b"2".to_vec())));
        assert_eq!(unit.len(), 2);
    }

    #[test]
    fn the_mix_produces_every_kind() {
        let keys = KeySpace::new(3, LIMITS);
        let mut generator = Generator::new(3, OpMix::CONFORMANCE, LIMITS);
        let mut seen = [false; 9];
        for _ in 0..2000 {
            let i = match generator.next_op(&keys) {
                Op::Get { .. } => 0,
                Op::Put { .. } => 1,
                Op::Delete { .. } => 2,
                Op::Batch { .. } => 3,
                Op::Rmw { .. } => 4,
                Op::Range { .. } => 5,
                Op::Flush => 6,
                Op::Reopen => 7,
                Op::Crash { .. } => 8,
            };
            seen[i] = true;
        }
        assert_eq!(seen, [true; 9]);
    }
}
