//! The synchronisation primitives of the epoch (`epoch.rs`) and the page ring (`ring.rs`), so the
//! `loom` feature can swap them for loom's and model-check the protocol (`model.rs`). Without the
//! feature these are std's atomics and `parking_lot`'s mutex, and the model-only hooks below
//! compile to nothing.
//!
//! With the feature, the two modules only work inside `loom::model`: run nothing but the model
//! tests then (`scripts/loom.sh`).

#[cfg(not(feature = "loom"))]
pub(super) use parking_lot::Mutex;
#[cfg(not(feature = "loom"))]
pub(super) use std::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize};

#[cfg(feature = "loom")]
pub(super) use loom::sync::atomic::{fence, AtomicPtr, AtomicU64, AtomicUsize};

/// `parking_lot`'s interface (`lock` returns the guard) over loom's mutex.
#[cfg(feature = "loom")]
pub(super) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(feature = "loom")]
impl<T> Mutex<T> {
    pub(super) fn new(value: T) -> Mutex<T> {
        Mutex(loom::sync::Mutex::new(value))
    }

    /// Loom's mutex poisons like std's; a panic already fails the model, so the value is used as is.
    pub(super) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Gives other threads a turn in a wait loop (under loom: lets the model schedule them).
pub(super) fn yield_now() {
    #[cfg(not(feature = "loom"))]
    std::thread::yield_now();
    #[cfg(feature = "loom")]
    loom::thread::yield_now();
}

/// A busy-wait hint (under loom a yield, else the model spins without end).
pub(super) fn spin_loop() {
    #[cfg(not(feature = "loom"))]
    std::hint::spin_loop();
    #[cfg(feature = "loom")]
    loom::hint::spin_loop();
}

/// A `SeqCst` fence under loom only, at the two points where the epoch's ordering argument uses
/// the single total order of its `SeqCst` accesses (a reader's slot claim before its reads; an
/// unlink before the scan of the slots). Loom treats `SeqCst` loads, stores and read-modify-writes
/// as acquire/release (it would let both sides read stale values: a false alarm) but models
/// `SeqCst` fences exactly. A fence between the two accesses of each side gives the same
/// guarantee the `SeqCst` accesses already give in the real program, which needs no fence.
pub(super) fn model_seq_cst_fence() {
    #[cfg(feature = "loom")]
    loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

/// Who uses a frame's page buffer, for loom's causality check; zero-sized without the feature.
/// A reader holds [`SharedAccess`] while it has the buffer (a `PageRef`); a reclaim takes the
/// buffer out with [`BufferAccess::exclusive`]. Loom fails the model if the reclaim is not
/// ordered after every shared access (happens-before), whether or not the schedule it ran
/// overlapped them: that is the "never reclaimed under a reader" invariant. The record lives in
/// the frame, not the buffer, so a buggy reclaim is caught before any freed memory is touched.
#[derive(Default)]
pub(super) struct BufferAccess {
    #[cfg(feature = "loom")]
    cell: loom::cell::UnsafeCell<()>,
}

// SAFETY: the cell holds `()` and is never dereferenced; it only records accesses for loom's
// checks, which are themselves synchronised by the model. Without the feature the type is empty.
#[cfg(feature = "loom")]
unsafe impl Sync for BufferAccess {}

/// A shared use of a frame's buffer, from [`BufferAccess::shared`] until dropped.
pub(super) struct SharedAccess {
    #[cfg(feature = "loom")]
    _reading: loom::cell::ConstPtr<()>,
}

impl BufferAccess {
    #[inline]
    pub(super) fn shared(&self) -> SharedAccess {
        SharedAccess {
            #[cfg(feature = "loom")]
            _reading: self.cell.get(),
        }
    }

    /// Marks the buffer taken out of the frame (to be reused or freed).
    #[inline]
    pub(super) fn exclusive(&self) {
        #[cfg(feature = "loom")]
        self.cell.with_mut(|_| ());
    }
}
