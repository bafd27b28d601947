//! `ReadMostly`: the reader-writer lock of state that every read takes and only commits write
//! (the MemTables, the table, the FlexFile's tree).
//!
//! A plain reader-writer lock is one counter that every reader increments and decrements: with
//! readers on two cores, that cache line moves between them on every read (in a 2-thread YCSB E
//! profile, the three locks' counters were ~6% of the CPU). `ReadMostly` is crossbeam's
//! `ShardedLock`: a reader locks only its thread's shard (each on its own cache line), a writer
//! locks every shard. Writers pay that; here they take the lock per committed batch or per
//! FlexFile operation, far less often than readers.
//!
//! Poisoning is ignored, as with parking_lot's locks: a panic while writing leaves the state as
//! it was at the panic, and the engine's own poisoning (`Inner::poison`, `State::poisoned`) is
//! what refuses further use after a failed operation.

use std::sync::{PoisonError, TryLockError};

use crossbeam_utils::sync::{ShardedLock, ShardedLockReadGuard, ShardedLockWriteGuard};

pub struct ReadMostly<T>(ShardedLock<T>);

impl<T> ReadMostly<T> {
    pub fn new(value: T) -> ReadMostly<T> {
        ReadMostly(ShardedLock::new(value))
    }

    pub fn read(&self) -> ShardedLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn write(&self) -> ShardedLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The write lock if no one holds the lock now.
    pub fn try_write(&self) -> Option<ShardedLockWriteGuard<'_, T>> {
        match self.0.try_write() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `try_write` is how a reader splits intervals without waiting (table_oversized.rs): it
    /// must fail while any thread holds a read lock, whichever shard that thread uses.
    #[test]
    fn try_write_fails_while_another_thread_reads_and_a_panicked_writer_does_not_poison() {
        let lock = std::sync::Arc::new(ReadMostly::new(0u32));
        let (held, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let reader = {
            let lock = lock.clone();
            let (held, release) = (held.0, release.1);
            std::thread::spawn(move || {
                let guard = lock.read();
                held.send(()).unwrap();
                release.recv().unwrap();
                *guard
            })
        };
        held.1.recv().unwrap();
        assert!(lock.try_write().is_none());
        release.0.send(()).unwrap();
        assert_eq!(reader.join().unwrap(), 0);
        *lock.try_write().expect("no reader left") += 1;
        let writer = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                let mut guard = lock.write();
                *guard += 1;
                panic!("a writer panics");
            })
        };
        assert!(writer.join().is_err());
        assert_eq!(*lock.read(), 2);
        assert_eq!(*lock.try_write().expect("poisoning is ignored"), 2);
    }
}
