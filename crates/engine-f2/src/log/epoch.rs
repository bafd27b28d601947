//! Epoch protection in the style of FASTER's LightEpoch: a reader *protects* itself (publishes
//! the current epoch in a slot) before it looks at shared memory and releases the slot when it
//! is done; a writer that unlinked something *bumps* the epoch with a deferred item, which is
//! handed back (by [`Epoch::take_safe`]) only once every slot protected at the time of the bump
//! has been released. So memory unlinked before a bump is never reclaimed under a reader that
//! could still see it.
//!
//! Slots are claimed per protection, not per thread (a CAS from 0 on a slot picked by a
//! per-thread hint): no thread registration, nothing to clean up when a thread exits, and nested
//! protection on one thread simply takes a second slot.
//!
//! Ordering argument (all slot, epoch and unlink accesses are `SeqCst`): a reader claims its slot
//! before it reads the pointer that leads it to the memory (e.g. a log's head address). If the
//! reader saw the memory still linked, its claim precedes the unlink, which precedes the bump,
//! which precedes the scan of the slots in `take_safe`; so the scan sees the claim and its epoch
//! (read before the claim, hence at most the bumped epoch) holds the item back. `model.rs` checks
//! this with loom (`scripts/loom.sh`).

use std::collections::VecDeque;
use std::sync::atomic::Ordering::SeqCst;

use super::sync::{model_seq_cst_fence, yield_now, AtomicU64, AtomicUsize, Mutex};

/// Protection slots per epoch instance; more protections at once than this spin until a slot is
/// released (guards are held for a memory copy, never across I/O or locks). The loom model runs
/// at most 3 protections at once; fewer slots keep each scan (a load per slot) cheap to explore.
const SLOT_COUNT: usize = if cfg!(feature = "loom") { 4 } else { 128 };

/// A slot value meaning "not protected"; epochs start at 1.
const UNPROTECTED: u64 = 0;

/// Keeps each slot on its own cache line, so readers on different threads do not contend.
#[repr(align(64))]
struct Slot(AtomicU64);

pub struct Epoch<T> {
    current: AtomicU64,
    slots: Box<[Slot]>,
    /// Deferred items with the epoch that was current when they were unlinked.
    pending: Mutex<VecDeque<(u64, T)>>,
    pending_count: AtomicUsize,
}

/// Index of a claimed slot; give it back with [`Epoch::unprotect`].
#[derive(Debug)]
struct SlotId(usize);

/// A protection that is released when dropped (or earlier, by [`Protection::release`]).
pub struct Protection<'a, T> {
    epoch: &'a Epoch<T>,
    /// `None` once released, so the slot is given back exactly once.
    slot: Option<SlotId>,
}

impl<T> Protection<'_, T> {
    /// Gives the slot back now; dropping afterwards does nothing more. For owners that must act
    /// after the release (a ring reclaiming frames once this protection stops holding them back).
    pub fn release(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.epoch.unprotect(slot);
        }
    }
}

impl<T> Drop for Protection<'_, T> {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(not(feature = "loom"))]
fn thread_hint() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static HINT: usize = NEXT.fetch_add(1, SeqCst);
    }
    HINT.with(|h| *h)
}

/// Loom runs every model thread on one OS thread (a thread-local would be shared and vary
/// between tests): all start at slot 0, the most contended case (claims collide and retry).
#[cfg(feature = "loom")]
fn thread_hint() -> usize {
    0
}

impl<T> Default for Epoch<T> {
    fn default() -> Self {
        Epoch::new()
    }
}

impl<T> Epoch<T> {
    pub fn new() -> Epoch<T> {
        Epoch {
            current: AtomicU64::new(1),
            slots: (0..SLOT_COUNT).map(|_| Slot(AtomicU64::new(UNPROTECTED))).collect(),
            pending: Mutex::new(VecDeque::new()),
            pending_count: AtomicUsize::new(0),
        }
    }

    /// Claims a slot holding the current epoch. Everything the caller reads after this (with
    /// `SeqCst` or through a `SeqCst` load) is protected until [`Epoch::unprotect`].
    fn protect(&self) -> SlotId {
        let start = thread_hint();
        loop {
            let epoch = self.current.load(SeqCst);
            for i in 0..SLOT_COUNT {
                let index = (start + i) % SLOT_COUNT;
                let Some(slot) = self.slots.get(index) else { continue };
                if slot.0.load(SeqCst) == UNPROTECTED
                    && slot.0.compare_exchange(UNPROTECTED, epoch, SeqCst, SeqCst).is_ok()
                {
                    // The claim comes before every read it protects (see `model_seq_cst_fence`).
                    model_seq_cst_fence();
                    return SlotId(index);
                }
            }
            yield_now();
        }
    }

    /// [`Epoch::protect`] released when the returned guard drops.
    pub fn guard(&self) -> Protection<'_, T> {
        Protection { epoch: self, slot: Some(self.protect()) }
    }

    fn unprotect(&self, slot: SlotId) {
        if let Some(s) = self.slots.get(slot.0) {
            s.0.store(UNPROTECTED, SeqCst);
        }
    }

    /// Defers `item` until every protection active now has been released. The caller has
    /// already unlinked whatever `item` stands for.
    pub fn bump(&self, item: T) {
        let mut pending = self.pending.lock();
        let prior = self.current.fetch_add(1, SeqCst);
        pending.push_back((prior, item));
        self.pending_count.fetch_add(1, SeqCst);
    }

    /// Waits until every protection taken before this call was released (FASTER's "bump and
    /// wait"): whatever a protected thread did after checking state this caller changed first
    /// is finished. The caller must hold no protection of this epoch.
    pub fn wait_for_older(&self) {
        let prior = self.current.fetch_add(1, SeqCst);
        while self.safe_epoch() < prior {
            yield_now();
        }
    }

    /// True when deferred items are waiting (cheap; guards check it when they are released).
    pub fn has_pending(&self) -> bool {
        self.pending_count.load(SeqCst) > 0
    }

    /// The newest epoch no active protection can still be in: items bumped at or below it are safe.
    fn safe_epoch(&self) -> u64 {
        // The caller's unlink (or `read_only` move) comes before the scan of the slots.
        model_seq_cst_fence();
        let current = self.current.load(SeqCst);
        let oldest = self
            .slots
            .iter()
            .map(|s| s.0.load(SeqCst))
            .filter(|&e| e != UNPROTECTED)
            .min()
            .unwrap_or(current);
        oldest - 1
    }

    /// Removes and returns, oldest first, every deferred item no active protection can reach.
    pub fn take_safe(&self) -> Vec<T> {
        if !self.has_pending() {
            return Vec::new();
        }
        let mut pending = self.pending.lock();
        let safe = self.safe_epoch();
        let mut out = Vec::new();
        while pending.front().is_some_and(|(e, _)| *e <= safe) {
            if let Some((_, item)) = pending.pop_front() {
                out.push(item);
            }
        }
        self.pending_count.fetch_sub(out.len(), SeqCst);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_waits_for_protections_older_than_its_bump() {
        let epoch = Epoch::new();
        let old = epoch.protect();
        epoch.bump("a");
        let newer = epoch.protect();
        assert!(epoch.take_safe().is_empty(), "the older protection still holds 'a'");
        epoch.unprotect(old);
        assert_eq!(epoch.take_safe(), vec!["a"], "a protection taken after the bump does not hold it");
        epoch.bump("b");
        assert!(epoch.take_safe().is_empty());
        epoch.unprotect(newer);
        assert_eq!(epoch.take_safe(), vec!["b"]);
        assert!(!epoch.has_pending());
    }

    #[test]
    fn wait_for_older_returns_once_older_protections_are_released() {
        let epoch: Epoch<()> = Epoch::new();
        let done = std::sync::atomic::AtomicBool::new(false);
        let old = epoch.protect();
        std::thread::scope(|s| {
            s.spawn(|| {
                epoch.wait_for_older();
                done.store(true, SeqCst);
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
            let newer = epoch.protect();
            assert!(!done.load(SeqCst), "returned while an older protection was held");
            epoch.unprotect(old);
            while !done.load(SeqCst) {
                std::thread::yield_now();
            }
            epoch.unprotect(newer);
        });
    }

    #[test]
    fn many_protections_at_once_take_distinct_slots() {
        let epoch: Epoch<()> = Epoch::new();
        let ids: Vec<_> = (0..SLOT_COUNT).map(|_| epoch.protect()).collect();
        let mut seen: Vec<usize> = ids.iter().map(|s| s.0).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), SLOT_COUNT);
        for id in ids {
            epoch.unprotect(id);
        }
        epoch.bump(());
        assert_eq!(epoch.take_safe().len(), 1);
    }
}
