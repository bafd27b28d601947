//! Keeping the record cache within its capacity (paper §4.2), in the background: writers only
//! append to the WAL and the cache; the write-back worker (a kit `Worker`) evicts in batches
//! whenever the cache is over capacity, and takes the checkpoints that are due. A writer waits
//! (backpressure) only while the cache is more than an eighth over capacity, so memory stays
//! bounded even when writes outrun write-back.
//!
//! Lifetime: the worker's step holds an `Arc<Store>`; the engine stops and joins the worker
//! before its own close runs the last checkpoint, so no step touches a closed store. A failed
//! step has poisoned the store (`Store::maintain`); the worker then exits and writers waiting
//! for it see the poison.

use std::sync::Arc;
use std::time::Duration;

use strata_core::Result;
use strata_kit::worker::Worker;

use super::write_back::MAX_BATCH_PAGES;
use super::Store;

/// How long a writer waits for the worker before it checks the store's state again.
const BACKPRESSURE_RECHECK: Duration = Duration::from_millis(20);
/// Eviction batches one worker step writes before it looks at the checkpoint trigger.
const BATCHES_PER_STEP: usize = 4;

/// Starts the write-back worker of `store`.
pub(crate) fn spawn(store: &Arc<Store>) -> Result<Worker> {
    let step_store = store.clone();
    let poison_store = store.clone();
    Worker::spawn(
        "treeline-write-back",
        store.signals.clone(),
        move || step_store.background_step(),
        move |e| poison_store.writes.poison(e),
    )
}

/// Whether the record cache is over its capacity (the worker should evict) and over the hard
/// limit (writers wait).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CachePressure {
    pub over_capacity: bool,
    pub over_hard_limit: bool,
}

/// Eviction stops this far below capacity, so each batch frees room for more than one write.
fn low_watermark_bytes(capacity_bytes: u64) -> u64 {
    capacity_bytes - capacity_bytes / 16
}

/// Writers wait while the cache is above this.
fn hard_limit_bytes(capacity_bytes: u64) -> u64 {
    capacity_bytes + capacity_bytes / 8
}

impl Store {
    /// The worker's step: a few batches of eviction towards the low watermark, then a
    /// checkpoint if one is due; asks for another step while the cache is still over capacity
    /// (bounding the eviction lets a due checkpoint run although writers keep the cache full).
    fn background_step(&self) -> Result<()> {
        if self.writes.state().is_closed() {
            return Ok(());
        }
        self.evict_to(low_watermark_bytes, BATCHES_PER_STEP)?;
        self.checkpoint_if_due()?;
        if self.cache_pressure().over_capacity {
            self.signals.request();
        }
        Ok(())
    }

    /// After a write: wakes the worker when the cache is over capacity or a checkpoint is due,
    /// and waits for it while the cache is over the hard limit. A stopped worker (the store is
    /// closing) leaves the writer to evict for itself.
    pub(crate) fn make_room_after_write(&self, pressure: CachePressure) -> Result<()> {
        if pressure.over_capacity || self.checkpoint_due() {
            self.signals.request();
        }
        if !pressure.over_hard_limit {
            return Ok(());
        }
        loop {
            self.check_usable()?;
            let seen = self.signals.progress();
            if seen.stopping() {
                return self.evict_while_over_capacity();
            }
            self.signals.request();
            self.signals.wait_for_progress(BACKPRESSURE_RECHECK, |p| p.rounds == seen.rounds);
            if !self.cache_pressure().over_hard_limit {
                return Ok(());
            }
        }
    }

    /// How full the cache is (its capacity follows the budget first).
    pub(crate) fn cache_pressure(&self) -> CachePressure {
        let capacity_bytes = self.effective_cache_bytes();
        self.cache.set_capacity_bytes(capacity_bytes);
        let used = self.cache.used_bytes();
        CachePressure {
            over_capacity: used > capacity_bytes,
            over_hard_limit: used > hard_limit_bytes(capacity_bytes),
        }
    }

    /// Evicts in the caller until the cache fits its capacity (at open, on a runtime capacity
    /// change, and for writers once the worker has stopped).
    pub fn evict_while_over_capacity(&self) -> Result<()> {
        self.evict_to(|capacity_bytes| capacity_bytes, usize::MAX)
    }

    /// CLOCK eviction in batches until the cache holds at most `target(capacity)` bytes or
    /// `max_batches` were written: clean victims go at once; the pages of up to
    /// `MAX_BATCH_PAGES` dirty ones are written back together (their dirty records stay cached,
    /// clean), and then those victims are evicted.
    fn evict_to(&self, target: impl Fn(u64) -> u64, max_batches: usize) -> Result<()> {
        for _ in 0..max_batches {
            let victims = {
                let capacity_bytes = self.effective_cache_bytes();
                self.cache.set_capacity_bytes(capacity_bytes);
                if self.cache.used_bytes() <= target(capacity_bytes) {
                    return Ok(());
                }
                self.cache.choose_victims(MAX_BATCH_PAGES, target(capacity_bytes))
            };
            if victims.is_empty() {
                self.signals.notify_progress();
                return Ok(());
            }
            {
                let mut maint = self.maint.lock();
                self.maintain(|| self.write_back_pages_of(&mut maint, &victims))?;
            }
            for key in &victims {
                self.cache.evict_if_clean(key);
            }
            self.signals.notify_progress();
        }
        Ok(())
    }
}
